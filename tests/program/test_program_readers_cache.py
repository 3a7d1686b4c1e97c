"""The trace cache: a reload is the parse, bit for bit; damaged, foreign or planted entries are misses.

A reload is compared with a parse of the same file (``cache=False``: the reader's own path, which
never touches the cache) column by column, bit for bit: dtypes, categories and their order, codes,
the data under an ``Int64`` mask, the index, the metadata's types and key order, the ledger.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import pickle
import shutil
import struct
import tempfile
import threading
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_program_traces import RAW_EVENT, info

from fleetlib._io import using_limits
from fleetlib.program.readers._cache import CACHE_SUFFIX, load, store
from fleetlib.program.readers.kineto import read_trace
from fleetlib.quality import InputError

ROOT = Path(__file__).resolve().parents[2]
DLRM0 = ROOT / "data" / "traces" / "dlrm_8rank" / "worker0_step_12.1694128201545.pt.trace.json.gz"
DLRM1 = ROOT / "data" / "traces" / "dlrm_8rank" / "worker1_step_12.1694128201556.pt.trace.json.gz"
BUNDLED = sorted((ROOT / "data" / "traces").rglob("*.json.gz"))
CORPUS = sorted(p for p in (ROOT / "tests" / "corpus" / "traces").rglob("*.json*") if p.is_file())
TABLES = ("kernels", "steps", "host_syncs", "ops")


# --- an exact comparison, written independently of the cache's code ----------------------------------


def same_json(a, b, where: str = "$") -> None:
    """Identical JSON-like values: types (int is not float, list is not tuple), key order, float bits."""
    assert type(a) is type(b), (where, a, b)
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same_json(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same_json(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), (where, a, b)
    else:
        assert a == b, (where, a, b)


def same_frame(a: pd.DataFrame, b: pd.DataFrame, table: str) -> None:
    assert list(a.columns) == list(b.columns) and a.columns.dtype == b.columns.dtype, table
    assert type(a.index) is type(b.index) and a.index.equals(b.index), table
    assert a.index.name == b.index.name and a.columns.name == b.columns.name, table
    for c in a.columns:
        x, y = a[c], b[c]
        where = (table, c)
        assert x.dtype == y.dtype, where
        if isinstance(x.dtype, pd.CategoricalDtype):
            cx, cy = x.cat.categories, y.cat.categories
            assert cx.dtype == cy.dtype and cx.tolist() == cy.tolist(), where  # values and order
            assert x.cat.ordered == y.cat.ordered and x.cat.codes.dtype == y.cat.codes.dtype, where
            assert np.array_equal(x.cat.codes.to_numpy(), y.cat.codes.to_numpy()), where
        elif isinstance(x.dtype, pd.Int64Dtype):
            assert np.array_equal(x.isna().to_numpy(), y.isna().to_numpy()), where
            values = [v.to_numpy(dtype=np.int64, na_value=0).tobytes() for v in (x, y)]
            assert values[0] == values[1], where
        elif x.dtype == object:
            vx, vy = x.tolist(), y.tolist()
            assert [type(v) for v in vx] == [type(v) for v in vy] and vx == vy, where
        else:
            assert x.to_numpy().tobytes() == y.to_numpy().tobytes(), where  # NaN payloads, -0.0
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def same_read(a, b) -> None:
    """A reload ``b`` is the parse ``a``: tables, metadata, ledger (entries and flags), rank."""
    for t in TABLES:
        same_frame(getattr(a, t), getattr(b, t), t)
    same_json(a.metadata, b.metadata)
    same_json(a.ledger.to_dict(), b.ledger.to_dict())
    same_json([vars(e) for e in a.ledger.entries], [vars(e) for e in b.ledger.entries])
    same_json([f.to_dict() for f in a.ledger.flags], [f.to_dict() for f in b.ledger.flags])
    assert a.rank == b.rank and a.path == b.path


def entry_of(folder: Path) -> Path:
    (entry,) = folder.glob("*" + CACHE_SUFFIX)
    return entry


# --- a reload is the parse -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_a_reload_is_the_parse_of_every_bundled_trace(path, tmp_path):
    parsed = read_trace(path, cache=False)
    written = read_trace(path, cache_dir=tmp_path)
    reloaded = read_trace(path, cache_dir=tmp_path)
    assert not written.from_cache and reloaded.from_cache
    same_read(parsed, written)
    same_read(parsed, reloaded)
    # a renamed copy with an explicit rank: a hit, with its own name, rank and rank flags
    copy = Path(shutil.copy(path, tmp_path / "rank_77.json.gz"))
    for kw in ({}, {"rank": 3}):
        hit = read_trace(copy, cache_dir=tmp_path, **kw)
        assert hit.from_cache
        same_read(read_trace(copy, cache=False, **kw), hit)
    assert len(list(tmp_path.glob("*" + CACHE_SUFFIX))) == 1
    # a reloaded table is an ordinary one: it pickles (Dask) and takes writes without touching the next
    kernels = reloaded.kernels
    pd.testing.assert_frame_equal(pickle.loads(pickle.dumps(kernels)), kernels)
    if len(kernels):
        kernels.loc[0, "dur_us"] = -1.0
        kernels.loc[0, "name"] = kernels["name"].iloc[-1]
        same_read(parsed, read_trace(path, cache_dir=tmp_path))


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_a_reload_is_the_parse_of_every_corpus_trace(path, tmp_path):
    """The bad-input corpus: empty tables, rejected rows, repairs and flags survive a reload."""
    try:
        parsed = read_trace(path, cache=False)
    except InputError:
        with pytest.raises(InputError):
            read_trace(path, cache_dir=tmp_path)
        assert not list(tmp_path.glob("*" + CACHE_SUFFIX))  # nothing cached for a refused file
        return
    read_trace(path, cache_dir=tmp_path)
    reloaded = read_trace(path, cache_dir=tmp_path)
    assert reloaded.from_cache
    same_read(parsed, reloaded)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(RAW_EVENT, min_size=0, max_size=20), bare=st.booleans(), gz=st.booleans())
def test_a_reload_is_the_parse_of_adversarial_traces(events, bare, gz):
    doc = events if bare else {**info(), "traceEvents": events, "baseTimeNanoseconds": 5}
    data = json.dumps(doc).encode().replace(b"@@BAD@@", b"bad\xff\xfe")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.json"
        path.write_bytes(gzip.compress(data) if gz else data)
        try:
            parsed = read_trace(path, cache=False)
        except InputError:
            return
        first = read_trace(path, cache_dir=Path(d) / "c")
        again = read_trace(path, cache_dir=Path(d) / "c")
        assert again.from_cache
        same_read(parsed, first)
        same_read(parsed, again)


def test_metadata_json_msgspec_does_not_read_is_still_reloaded_exactly(tmp_path):
    """NaN, infinities, -0.0, integers past 64 bits and lone surrogates in the trace's own keys."""
    doc = {"distributedInfo": {"rank": 1},
           "extra": {"nan": float("nan"), "big": 2**70, "neg0": -0.0, "inf": float("-inf"), "s": "\ud800x"},
           "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0,
                            "dur": 2.0, "args": {"stream": 7}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    parsed = read_trace(path, cache=False)
    assert parsed.metadata["other"]["extra"]["big"] == 2**70
    read_trace(path, cache_dir=tmp_path / "c")
    hit = read_trace(path, cache_dir=tmp_path / "c")
    assert hit.from_cache
    same_read(parsed, hit)


# --- damaged, foreign and planted files are parsed again, never misread ---------------------------------


def _sealed(data: bytes) -> bytes:
    """A pickle with its checksum, as the cache writes one (a whole file of the right shape)."""
    return data + zlib.crc32(data).to_bytes(4, "little")


def _damaged_variants(raw: bytes, other: bytes) -> dict[str, bytes]:
    """Damaged copies of one cache file: cut, garbage, appended bytes, another entry, other pickles."""
    out = {f"cut_{k}": raw[:k] for k in sorted({0, 1, 2, 16, len(raw) // 3, len(raw) // 2, len(raw) - 1})}
    out["appended"] = raw + b"\0" * 64
    out["garbage"] = bytes(np.random.default_rng(0).integers(0, 256, len(raw), dtype=np.uint8))
    out["flipped"] = raw[:len(raw) // 2] + bytes([raw[len(raw) // 2] ^ 0xFF]) + raw[len(raw) // 2 + 1:]
    out["another_entry"] = other  # a whole, valid file -- of another trace
    out["not_a_pair"] = _sealed(pickle.dumps([1, 2, 3], protocol=5))
    out["wrong_key"] = _sealed(pickle.dumps(("0" * 64, pickle.loads(raw[:-4])[1]), protocol=5))
    out["old_block_format"] = b"FLTRACE\x00" + raw
    return out


def test_damaged_or_foreign_cache_files_are_parsed_again(tmp_path):
    parsed = read_trace(DLRM0, cache=False)
    read_trace(DLRM1, cache_dir=tmp_path)
    other = entry_of(tmp_path).read_bytes()
    for p in tmp_path.iterdir():
        p.unlink()
    read_trace(DLRM0, cache_dir=tmp_path)
    entry = entry_of(tmp_path)
    raw = entry.read_bytes()
    for name, data in _damaged_variants(raw, other).items():
        entry.write_bytes(data)
        again = read_trace(DLRM0, cache_dir=tmp_path)
        assert not again.from_cache, name
        same_read(parsed, again)
        hit = read_trace(DLRM0, cache_dir=tmp_path)  # rewritten whole
        assert hit.from_cache, name
        same_read(parsed, hit)
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry.name]


def test_an_entry_that_is_a_link_or_a_folder_is_not_followed(tmp_path):
    folder = tmp_path / "cache"
    read_trace(DLRM0, cache_dir=folder)
    entry = entry_of(folder)
    outside = tmp_path / "elsewhere.pkl"
    entry.rename(outside)
    entry.symlink_to(outside)  # a valid entry, but outside the folder: never read through the link
    assert not read_trace(DLRM0, cache_dir=folder).from_cache
    assert not entry.is_symlink() and read_trace(DLRM0, cache_dir=folder).from_cache  # replaced
    entry.unlink()
    entry.mkdir()
    tr = read_trace(DLRM0, cache_dir=folder)
    assert not tr.from_cache and "cache_not_written" in tr.ledger.codes()


def test_a_folder_others_can_write_into_is_neither_read_nor_written(tmp_path):
    folder = tmp_path / "cache"
    read_trace(DLRM0, cache_dir=folder)
    assert folder.stat().st_mode & 0o777 == 0o700  # made private
    os.chmod(folder, 0o777)
    tr = read_trace(DLRM0, cache_dir=folder)
    assert not tr.from_cache and "cache_not_written" in tr.ledger.codes()
    os.chmod(folder, 0o755)  # readable by others, writable by its owner only: used, and made private
    assert read_trace(DLRM0, cache_dir=folder).from_cache
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_cache_file_beyond_the_input_limit_is_not_read(tmp_path):
    read_trace(DLRM0, cache_dir=tmp_path)
    size = entry_of(tmp_path).stat().st_size
    with using_limits(max_bytes=10_000_000):  # the trace itself stays within the limit
        assert load(tmp_path, entry_of(tmp_path).stem) is not None
    with using_limits(max_bytes=size - 1):
        assert load(tmp_path, entry_of(tmp_path).stem) is None


# --- many writers -----------------------------------------------------------------------------------------


def test_concurrent_writers_of_one_entry_leave_one_whole_file(tmp_path):
    tr = read_trace(DLRM0, cache=True, cache_dir=tmp_path)
    entry = entry_of(tmp_path)
    key = entry.stem
    value = load(tmp_path, key)
    entry.unlink()
    errors: list[BaseException] = []
    misses: list[int] = []

    def write() -> None:
        try:
            for _ in range(5):
                store(tmp_path, key, value)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def read() -> None:  # a reader sees a whole file or none, never a partial one
        try:
            for _ in range(20):
                if entry.exists() and load(tmp_path, key) is None:
                    misses.append(1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=f) for f in [write] * 4 + [read] * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not misses
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry.name]  # no temporary file left behind
    again = read_trace(DLRM0, cache=True, cache_dir=tmp_path)
    assert again.from_cache
    same_read(tr, again)


def _read_in_a_process(args: tuple[str, str, object]) -> str:
    path, cache_dir, barrier = args
    barrier.wait()
    tr = read_trace(path, cache_dir=cache_dir)
    return tr.metadata["sha256"]


def test_concurrent_processes_leave_one_whole_file(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(3)
        with ctx.Pool(3) as pool:
            shas = pool.map(_read_in_a_process, [(str(DLRM0), str(tmp_path), barrier)] * 3)
    assert len(set(shas)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry_of(tmp_path).name]
    hit = read_trace(DLRM0, cache_dir=tmp_path)
    assert hit.from_cache
    same_read(read_trace(DLRM0, cache=False), hit)


def test_an_unwritable_cache_folder_is_flagged_not_fatal(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    tr = read_trace(DLRM0, cache_dir=blocker / "cache")
    assert "cache_not_written" in tr.ledger.codes() and not tr.from_cache
    same_read(read_trace(DLRM0, cache=False), read_trace(DLRM0, cache=False, cache_dir=blocker / "cache"))
