"""Fuzz every registered reader of the three rungs with mutated copies of its own bundled samples.

The readers are taken from each rung's ``READERS`` registry, so a reader someone registers later is
fuzzed too.  Each example mutates one sample (truncate it, flip bytes, duplicate or drop lines, deepen
the nesting, swap two fields of a line, put an extreme number in place of a number), writes it under
the original file names and reads it.  Whatever the bytes, the reader must

* raise nothing but :class:`fleetlib.InputError` (naming the file), or return a balanced ledger;
* finish each example within :data:`SECONDS_PER_EXAMPLE` and allocate at most :data:`PEAK_BYTES`
  (Python and NumPy allocations, measured by ``tracemalloc``).

Budget: ``FLEETLIB_FUZZ_EXAMPLES`` examples per reader (default 12: the whole suite then takes
about two to three minutes on a 2-core machine); raise it for a local run, e.g.
``FLEETLIB_FUZZ_EXAMPLES=500 pytest tests/core/test_fuzz_readers.py``.  Large samples are cut to their
first :data:`HEAD_LINES` lines (a JSON trace to its first :data:`HEAD_EVENTS` events) before they
are mutated, so an example costs milliseconds, not the time to read a whole trace.
"""

from __future__ import annotations

import gzip
import importlib
import json
import os
import re
import signal
import time
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetlib._io import GZIP_MAGIC
from fleetlib.quality import DomainError, InputError

ROOT = Path(__file__).resolve().parents[2]
RUNGS = ("scheduling", "runtime", "program")

EXAMPLES = int(os.environ.get("FLEETLIB_FUZZ_EXAMPLES", "12"))
SECONDS_PER_EXAMPLE = 30.0
PEAK_BYTES = 512 * 1024**2
HEAD_LINES = 120
HEAD_EVENTS = 150

EXTREME_NUMBERS = ("1e20", "99999999999999999999", "-9223372036854775809", "9223372036854775807",
                   "-1", "0", "inf", "-inf", "NaN", "1e400", "1e-400", "0x10", "16777215")


def _registered() -> list[tuple[str, str, object, object]]:
    out = []
    for rung in RUNGS:
        readers = getattr(importlib.import_module(f"fleetlib.{rung}.readers"), "READERS", {})
        for name, spec in readers.items():
            good = [s for s in spec.samples if not s.bad]
            # the smallest good sample: a fuzz example must be cheap
            good.sort(key=lambda s: sum((ROOT / p).stat().st_size for p in s.paths))
            if good:
                out.append((rung, name, spec, good[0]))
    return out


def _trim(raw: bytes) -> bytes:
    """Cut a large sample to a small head that still has the sample's shape."""
    if raw.startswith(GZIP_MAGIC):
        raw = gzip.decompress(raw)
    if raw.startswith(b"PAR1") or len(raw) <= 32_000:
        return raw
    head = raw.lstrip()[:1]
    if head in (b"{", b"["):
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
            doc["traceEvents"] = doc["traceEvents"][:HEAD_EVENTS]
            lines = [json.dumps({k: v for k, v in doc.items() if k != "traceEvents"})[:-1]
                     + ', "traceEvents": [']
            lines += [json.dumps(e) + ("," if i + 1 < len(doc["traceEvents"]) else "")
                      for i, e in enumerate(doc["traceEvents"])]
            return ("\n".join(lines) + "\n]}\n").encode()
    return b"\n".join(raw.split(b"\n")[:HEAD_LINES]) + b"\n"


_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


@st.composite
def _mutation(draw: st.DrawFn, data: bytes) -> bytes:
    kind = draw(st.sampled_from(("truncate", "flip", "duplicate_line", "drop_line", "deepen", "swap_fields",
                                 "extreme_number", "extreme_number", "lone_surrogate", "two")))
    if kind == "two":
        return draw(_mutation(draw(_mutation(data))))
    n = len(data)
    if n == 0:
        return b"{" * 10_000
    if kind == "truncate":
        return data[:draw(st.integers(0, n - 1))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, n - 1))
            out[i] = draw(st.integers(0, 255))
        return bytes(out)
    if kind == "lone_surrogate":  # a JSON / YAML escape of half a UTF-16 pair, just inside a quoted text
        quotes = [m.end() for m in re.finditer(rb'"', data)] or [n]
        pos = quotes[draw(st.integers(0, len(quotes) - 1))]
        return data[:pos] + draw(st.sampled_from((rb"\ud800", rb"\udfff", rb"\U0000dc00"))) + data[pos:]
    lines = data.split(b"\n")
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "duplicate_line":
        return b"\n".join(lines[:i + 1] + [lines[i]] * draw(st.integers(1, 3)) + lines[i + 1:])
    if kind == "drop_line":
        return b"\n".join(lines[:i] + lines[i + 1:])
    if kind == "deepen":
        depth = draw(st.sampled_from((3, 70, 2_000, 50_000)))
        pos = draw(st.integers(0, n))
        opener = draw(st.sampled_from((b"[", b"{\"a\": ", b"- ", b"[[")))
        closer = {b"[": b"]", b"{\"a\": ": b"}", b"- ": b"", b"[[": b"]]"}[opener]
        return data[:pos] + opener * depth + b"1" + closer * depth + data[pos:]
    if kind == "swap_fields":
        line = lines[i]
        sep = next((s for s in (b"|", b",", b"\t", b" ") if s in line), None)
        if sep is None:
            return data
        fields = line.split(sep)
        a, b = draw(st.integers(0, len(fields) - 1)), draw(st.integers(0, len(fields) - 1))
        fields[a], fields[b] = fields[b], fields[a]
        lines[i] = sep.join(fields)
        return b"\n".join(lines)
    numbers = list(_NUMBER.finditer(data))
    if not numbers:
        return data
    m = numbers[draw(st.integers(0, len(numbers) - 1))]
    value = draw(st.sampled_from(EXTREME_NUMBERS)).encode()
    return data[:m.start()] + value + data[m.end():]


def _unwritable_text(tables: object) -> list[str]:
    """The columns of a reader's tables holding a string that is not whole UTF-8 text (a lone surrogate)."""
    frames = tables.items() if isinstance(tables, dict) else ()
    bad = []
    for key, frame in frames:
        if not isinstance(frame, pd.DataFrame):
            continue
        for column in frame.columns:
            values = frame[column]
            if values.dtype != object:  # an Arrow string column cannot hold one: building it fails
                continue
            for v in values.tolist():  # the samples are small
                if isinstance(v, str) and not v.isascii():
                    try:
                        v.encode("utf-8")
                    except UnicodeEncodeError:
                        bad.append(f"{key}.{column}")
                        break
    return bad


class Blocked(BaseException):
    """Raised by the alarm: not an OSError or Exception, so no reader's except clause can swallow it."""


def _too_long(*_: object) -> None:
    raise Blocked(f"one example ran past {SECONDS_PER_EXAMPLE:.0f} s")


CASES = _registered()


def test_every_rung_is_fuzzed():
    assert {rung for rung, *_ in CASES} == set(RUNGS)


@pytest.mark.parametrize(("rung", "name", "spec", "sample"), CASES,
                         ids=[f"{rung}-{name}" for rung, name, *_ in CASES])
def test_reader_survives_mutated_samples(rung, name, spec, sample, tmp_path_factory):
    originals = [(Path(p).name, _trim((ROOT / p).read_bytes())) for p in sample.paths]
    folder = tmp_path_factory.mktemp(f"fuzz-{rung}-{name}")

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def run(data: st.DataObject) -> None:
        which = data.draw(st.integers(0, len(originals) - 1))
        mutated = data.draw(_mutation(originals[which][1]))
        paths = []
        for k, (fname, content) in enumerate(originals):
            p = folder / fname
            p.write_bytes(mutated if k == which else content)
            paths.append(p)
        tracemalloc.start()
        started = time.perf_counter()
        signal.alarm(int(SECONDS_PER_EXAMPLE))  # a hang fails the example instead of the whole run
        tables = {}
        try:
            tables, ledger = spec.read(paths, **dict(sample.options))
        except InputError as exc:
            assert exc.file is not None, f"{rung} {name}: InputError without a file: {exc}"
            ledger = None
        finally:
            signal.alarm(0)
            elapsed = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        assert elapsed < SECONDS_PER_EXAMPLE, f"{rung} {name}: {elapsed:.1f} s on one mutated sample"
        assert peak < PEAK_BYTES, f"{rung} {name}: {peak / 2**20:.0f} MiB on one mutated sample"
        if ledger is not None:
            assert ledger.balanced(), (ledger.read, ledger.kept, ledger.repaired, ledger.rejected)
            assert not _unwritable_text(tables), f"{rung} {name}: a table holds text UTF-8 cannot write"

    previous = signal.signal(signal.SIGALRM, _too_long)
    try:
        run()
    finally:
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("rung", "name", "spec", "sample"), CASES,
                         ids=[f"{rung}-{name}" for rung, name, *_ in CASES])
def test_reader_refuses_what_is_not_a_regular_file(rung, name, spec, sample, tmp_path):
    """A device, a pipe or an empty folder is refused by name at once: never read forever, never a hang."""
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    folder = tmp_path / "empty"
    folder.mkdir()

    def hang(*_):
        raise Blocked(f"{rung} {name} blocked on a path that is not a regular file")

    previous = signal.signal(signal.SIGALRM, hang)
    try:
        for path in ("/dev/zero", fifo, folder):
            signal.alarm(10)
            try:
                # an empty folder may be refused as an argument (DomainError, one line on the CLI too)
                with pytest.raises(InputError if path != folder else (InputError, DomainError)) as info:
                    spec.read([path], **dict(sample.options))
            finally:
                signal.alarm(0)
            named = getattr(info.value, "file", None) or str(info.value)
            assert Path(path).name in named, info.value
    finally:
        signal.signal(signal.SIGALRM, previous)
