"""Issue 30 item 3: every registered reader, each number of its good sample set to an extreme, under 512 MiB.

For each reader of the three rungs' ``READERS``, the smallest good bundled sample is cut to a small
head (as in ``test_fuzz_readers.py``) and, one at a time, each of :data:`POSITIONS` numbers
spread over it is replaced by each of :data:`EXTREMES` (0, -1, 1e-300, 1e300, 2**63, NaN); a Parquet
sample gets them in the first row of up to as many numeric columns.  A reader of several files spreads
its positions over them (one file at least one).  The reader must read the result
or raise :class:`~fleetlib.quality.InputError` / :class:`~fleetlib.quality.DomainError`: never
another exception, never a ``MemoryError``.

Each rung's readers run in one process whose address space is limited to :data:`ADDRESS_SPACE`
(``resource.RLIMIT_AS``), set before fleetlib is imported.  No reader loads numba: the one kernel
they called, the JSON nesting scan, is numpy (:mod:`fleetlib._jsondepth`), so LLVM's 671 MiB of
address space is never mapped.  Measured on the 2-core build machine: importing fleetlib and the
three rungs' readers peaks at 393 MiB of virtual memory.  Two allocators reserve address space they
do not use, and a reservation refused at the limit left a thread pool waiting on a futex for ever:
glibc's per-thread malloc arenas (``MALLOC_ARENA_MAX=2``) and Arrow's jemalloc pool
(``ARROW_DEFAULT_MEMORY_POOL=system``); the worker runs with both set.  What a mutated number could
allocate (an 8e15 count) is far beyond the limit either way.  This file is also the
worker: ``python tests/core/test_fuzz_extremes.py RUNG`` prints one JSON line per failure and one per
reader with its count of reads.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNGS = ("scheduling", "runtime", "program")
ADDRESS_SPACE = 512 * 1024**2
EXTREMES = ("0", "-1", "1e-300", "1e300", str(2**63), "NaN")
POSITIONS = 4
HEAD_LINES = 60
_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


def _fuzzed(rung: str) -> list[str]:
    readers = importlib.import_module(f"fleetlib.{rung}.readers").READERS
    return [name for name, spec in readers.items() if any(not s.bad for s in spec.samples)]


def _head(raw: bytes) -> bytes:
    import gzip
    import json as _json

    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if raw.startswith(b"PAR1") or len(raw) <= 16_000:
        return raw
    if raw.lstrip()[:1] in (b"{", b"["):
        try:
            doc = _json.loads(raw)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
            doc["traceEvents"] = doc["traceEvents"][:100]
            return _json.dumps(doc, indent=1).encode()
        if isinstance(doc, list):
            return _json.dumps(doc[:20], indent=1).encode()
    return b"\n".join(raw.split(b"\n")[:HEAD_LINES]) + b"\n"


def _mutations(raw: bytes, positions: int):
    """Yield (where, value, bytes): each extreme in place of each of up to ``positions`` numbers."""
    if raw.startswith(b"PAR1"):
        import pandas as pd

        frame = pd.read_parquet(io.BytesIO(raw))
        for column in [c for c in frame.columns if frame[c].dtype.kind in "iuf"][:positions]:
            for value in EXTREMES:
                mutated = frame.copy()
                as_float = float(value)
                if frame[column].dtype.kind in "iu":
                    if as_float != as_float or as_float != int(as_float) or abs(as_float) >= 2**63:
                        as_float = float(2**63 - 1) if as_float == as_float else None
                    mutated[column] = mutated[column].astype("Int64" if as_float is None else "int64")
                    mutated.loc[mutated.index[:1], column] = None if as_float is None else int(as_float)
                else:
                    mutated.loc[mutated.index[:1], column] = as_float
                buf = io.BytesIO()
                mutated.to_parquet(buf)
                yield f"column {column}", value, buf.getvalue()
        return
    numbers = list(_NUMBER.finditer(raw))
    step = max(1, len(numbers) // positions)
    for m in numbers[::step][:positions]:
        for value in EXTREMES:
            mutated = raw[:m.start()] + value.encode() + raw[m.end():]
            yield f"byte {m.start()} ({m.group().decode()!r})", value, mutated


def _worker(rung: str) -> int:
    import resource
    import warnings

    warnings.filterwarnings("error", category=RuntimeWarning, module="fleetlib")  # as pytest's settings
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    readers = importlib.import_module(f"fleetlib.{rung}.readers").READERS
    for name in readers:
        if any(not s.bad for s in readers[name].samples):
            _fuzz_one(readers[name], name)
    print(json.dumps({"numba_loaded": "numba" in sys.modules}), flush=True)
    return 0


def _fuzz_one(spec, name: str) -> None:
    from fleetlib.quality import DomainError, InputError

    good = sorted((s for s in spec.samples if not s.bad),
                  key=lambda s: sum((ROOT / p).stat().st_size for p in s.paths))[0]
    originals = [(Path(p).name, _head((ROOT / p).read_bytes())) for p in good.paths]
    reads, started = 0, time.perf_counter()
    per_file = max(1, POSITIONS // len(originals))
    with tempfile.TemporaryDirectory() as folder:
        for which, (_, content) in enumerate(originals[:POSITIONS]):
            for where, value, mutated in _mutations(content, per_file):
                paths = []
                for k, (fname, body) in enumerate(originals):
                    p = Path(folder) / fname
                    p.write_bytes(mutated if k == which else body)
                    paths.append(p)
                reads += 1
                try:
                    spec.read(paths, **dict(good.options))
                except (InputError, DomainError):
                    pass
                except BaseException as exc:  # the failure under test: reported, not raised
                    print(json.dumps({"reader": name, "file": originals[which][0], "where": where,
                                      "value": value, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}),
                          flush=True)
    print(json.dumps({"reader": name, "reads": reads, "seconds": round(time.perf_counter() - started, 1)}),
          flush=True)


@pytest.mark.slow
@pytest.mark.parametrize("rung", RUNGS)
def test_extreme_numbers_are_read_or_refused_within_the_address_space_limit(rung):
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, MPLBACKEND="Agg", MALLOC_ARENA_MAX="2",
               ARROW_DEFAULT_MEMORY_POOL="system")
    done = subprocess.run([sys.executable, __file__, rung], capture_output=True, text=True, env=env,
                          timeout=900, cwd=ROOT)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, done.stderr[-2000:]
    counted = {x["reader"]: x["reads"] for x in lines if "reads" in x}
    assert set(counted) == set(_fuzzed(rung)) and all(counted.values()), counted  # every reader ran
    assert {"numba_loaded": False} in lines  # no reader maps LLVM into the limited address space
    failures = [x for x in lines if "error" in x]
    assert not failures, failures


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
