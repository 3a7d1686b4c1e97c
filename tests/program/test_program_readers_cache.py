"""The trace cache shared by many writers, and the per-process memos of the Kineto reader.

A reload is compared with a parse of the same file (``cache=False``: the reader's own path, which
never touches the cache) column by column, bit for bit: dtypes, categories and their order, codes,
the data under an ``Int64`` mask, the index, the metadata's types and key order, the ledger.
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import pickle
import shutil
import struct
import tempfile
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_program_traces import _RAW_EVENT, info

from fleetlib.program.classify import Classifier
from fleetlib.program.readers import _cache, _tables
from fleetlib.program.readers._cache import CACHE_SUFFIX
from fleetlib.program.readers.kineto import read_trace
from fleetlib.quality import InputError

ROOT = Path(__file__).resolve().parents[2]
DLRM0 = ROOT / "data" / "traces" / "dlrm_8rank" / "worker0_step_12.1694128201545.pt.trace.json.gz"
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
            assert np.array_equal(x.array._mask, y.array._mask), where
            assert x.array._data.tobytes() == y.array._data.tobytes(), where  # the masked slots too
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
    same_read(parsed, reloaded)  # its string sets from the memo the writer filled
    _cache._STRINGS.clear()
    same_read(parsed, read_trace(path, cache_dir=tmp_path))  # ... and decoded from the file
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
@given(events=st.lists(_RAW_EVENT, min_size=0, max_size=20), bare=st.booleans(), gz=st.booleans())
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
        same_read(parsed, first)
        same_read(parsed, again)
        # what the format cannot reproduce exactly is not cached (parsed again), never misread
        assert again.from_cache == bool(list((Path(d) / "c").glob("*" + CACHE_SUFFIX)))


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


@pytest.mark.parametrize("fallback", ["blocks", "columns"])
def test_the_fallback_builders_give_the_same_tables(fallback, tmp_path, monkeypatch):
    """Without pandas' block classes (or, on pandas < 3, without create_dataframe_from_blocks)."""
    read_trace(DLRM0, cache_dir=tmp_path)
    monkeypatch.setattr(_cache, "_FAST", None)
    monkeypatch.setattr(_cache, "_PLANS", {})
    if fallback == "columns":
        monkeypatch.setattr(_cache, "_from_blocks", None)
    hit = read_trace(DLRM0, cache_dir=tmp_path)
    assert hit.from_cache
    same_read(read_trace(DLRM0, cache=False), hit)


def test_what_the_format_cannot_reproduce_is_not_written(tmp_path):
    tr = read_trace(DLRM0, cache=False)
    built = _tables._Built(tr.kernels, tr.steps, tr.host_syncs, {"window": (1.0, 2.0)}, tr.ops)
    assert not _cache._write_cache(tmp_path / "a", built, tr.ledger)  # a tuple would come back a list
    for value in (5, [1], float("nan")):  # only text and None are stored
        odd = tr.ops.copy()
        odd["input_dims"] = odd["input_dims"].astype(object)
        odd.loc[1, "input_dims"] = value
        built = _tables._Built(tr.kernels, tr.steps, tr.host_syncs, {}, odd)
        assert not _cache._write_cache(tmp_path / "b", built, tr.ledger), value
    assert not list(tmp_path.iterdir())


# --- damaged, foreign and old files are parsed again, never misread -----------------------------------


def _damaged_variants(raw: bytes, head: dict, offsets: list[int]) -> dict[str, bytes]:
    """Damaged copies of one cache file: cut, garbage, other versions, bad codes, bools, strings."""
    prefix = struct.Struct("<8sII")
    magic, version, length = prefix.unpack(raw[:prefix.size])
    out = {f"cut_{k}": raw[:k] for k in sorted({0, 4, 15, 16, prefix.size + length // 2, prefix.size + length,
                                                   len(raw) // 3, len(raw) // 2, len(raw) - 1})}
    out["appended"] = raw + b"\0" * 64
    out["garbage"] = bytes(np.random.default_rng(0).integers(0, 256, len(raw), dtype=np.uint8))
    out["empty"] = b""
    out["other_format"] = prefix.pack(magic, version + 1, length) + raw[prefix.size:]
    out["other_magic"] = prefix.pack(b"PAR1\0\0\0\0", version, length) + raw[prefix.size:]
    out["long_header"] = prefix.pack(magic, version, len(raw)) + raw[prefix.size:]
    body = json.loads(raw[prefix.size:prefix.size + length])

    def with_header(**changes) -> bytes:
        text = json.dumps({**body, **changes}).encode()
        return prefix.pack(magic, version, len(text)) + text  # the regions move: a size mismatch at least

    out["not_an_object"] = prefix.pack(magic, version, 2) + b"[]" + raw[prefix.size + 2:]
    out["rows_negative"] = with_header(rows=[-1, 0, 0, 0])
    out["rows_text"] = with_header(rows=["1", 0, 0, 0])
    out["json_garbage"] = prefix.pack(magic, version, length) + b"{" * length + raw[prefix.size + length:]
    # same-length edits of the header: the layout still fits, the contents do not
    text = raw[prefix.size:prefix.size + length]
    key = text.index(b'"key":"') + len(b'"key":"')
    read = text.index(b'"read":') + len(b'"read":')
    edits = {"key": (key, b"0" if text[key:key + 1] != b"0" else b"1"),  # another entry's name
             "read_text": (read, b'"'), "rows_big": (text.index(b'"rows":[') + len(b'"rows":['), b"9")}
    for name, (at, byte) in edits.items():
        out[name] = raw[:prefix.size + at] + byte + raw[prefix.size + at + 1:]
    # the regions of the kernel table: numeric blocks, Int64 data and mask, then the codes
    plan = _cache._plan("kernels")
    n = head["rows"][0]
    at = len(plan.numeric) + 1  # the Int64 mask (bool)
    out["bool_byte"] = raw[:offsets[at]] + b"\x02" + raw[offsets[at] + 1:]
    first_codes = len(plan.numeric) + 2
    for k in range(len(plan.cats)):
        o = offsets[first_codes + k]
        out[f"codes_{k}_high"] = raw[:o] + b"\x7f" + raw[o + 1:]  # int8 127: past every category
        out[f"codes_{k}_low"] = raw[:o] + b"\xfe" + raw[o + 1:]  # -2
    bools = next(g for g, (d, _, _) in enumerate(plan.numeric) if d.kind == "b")
    out["bool_column"] = raw[:offsets[bools]] + b"\xff" + raw[offsets[bools] + 1:]
    # the string sets: offsets out of order, text that is not UTF-8
    sets = len(offsets) - 2 * len(head["strings"])
    ends = offsets[sets]
    out["string_offsets"] = raw[:ends] + struct.pack("<q", 10**9) + raw[ends + 8:]
    out["string_bytes"] = raw[:offsets[sets + 1]] + b"\xff" + raw[offsets[sets + 1] + 1:]
    assert n > 0 and len(out) > 30
    return out


def test_damaged_or_foreign_cache_files_are_parsed_again(tmp_path):
    parsed = read_trace(DLRM0, cache=False)
    read_trace(DLRM0, cache_dir=tmp_path)
    entry = entry_of(tmp_path)
    raw = entry.read_bytes()
    buf = _cache._read_whole(entry)
    head, _, offsets = _cache._header(buf, entry.name)
    _cache._STRINGS.clear()  # the damaged string sets must be decoded, not found in the memo
    for name, data in _damaged_variants(raw, head, offsets).items():
        entry.write_bytes(data)
        assert _cache._read_cache(entry, str(DLRM0), lambda m, led: (0, "x")) is None, name
        again = read_trace(DLRM0, cache_dir=tmp_path)
        assert not again.from_cache, name
        same_read(parsed, again)
        assert entry.read_bytes() == raw, name  # rewritten whole
        hit = read_trace(DLRM0, cache_dir=tmp_path)
        assert hit.from_cache, name
        same_read(parsed, hit)


def test_a_cache_file_beyond_the_input_limit_is_not_read(tmp_path):
    from fleetlib._io import using_limits

    read_trace(DLRM0, cache_dir=tmp_path)
    entry = entry_of(tmp_path)
    size = entry.stat().st_size
    with using_limits(max_bytes=size - 1):
        with pytest.raises(_cache._Damaged, match="input limit"):  # from its size, before any read
            _cache._read_whole(entry)
        assert _cache._read_cache(entry, str(DLRM0), lambda m, led: (0, "x")) is None
    with using_limits(max_bytes=size):
        assert _cache._read_cache(entry, str(DLRM0), lambda m, led: (0, "x")) is not None


def test_another_entrys_file_and_old_parquet_entries_are_not_read(tmp_path):
    other = ROOT / "data" / "traces" / "dlrm_8rank" / "worker1_step_12.1694128201556.pt.trace.json.gz"
    read_trace(other, cache_dir=tmp_path)
    foreign = entry_of(tmp_path)
    read_trace(DLRM0, cache_dir=tmp_path)
    mine = next(p for p in tmp_path.glob("*" + CACHE_SUFFIX) if p != foreign)
    shutil.copy(foreign, mine)  # a whole, valid file -- of another trace
    again = read_trace(DLRM0, cache_dir=tmp_path)
    assert not again.from_cache
    same_read(read_trace(DLRM0, cache=False), again)
    # the Parquet entries of earlier versions have another name: never looked up
    assert _cache._cache_path(tmp_path, "0" * 64, _tables._Options(Classifier(), None, "auto", 1.0, 0.0)
                              ).name.endswith(f"-c{_cache.CACHE_FORMAT}{CACHE_SUFFIX}")


# --- many writers -----------------------------------------------------------------------------------------


def test_concurrent_writers_of_one_entry_leave_one_whole_file(tmp_path):
    tr = read_trace(DLRM0, cache=True, cache_dir=tmp_path)
    entry = entry_of(tmp_path)
    built, ledger, _ = _cache._read_cache(entry, str(DLRM0), lambda m, led: (0, "x"))
    written = entry.read_bytes()
    entry.unlink()
    errors: list[BaseException] = []
    misses: list[int] = []

    def write() -> None:
        try:
            for _ in range(5):
                _cache._write_cache(entry, built, ledger, str(DLRM0))
        except BaseException as exc:  # reported below
            errors.append(exc)

    def read() -> None:  # a reader sees a whole file or none, never a partial one
        try:
            for _ in range(20):
                if entry.exists() and _cache._read_cache(entry, str(DLRM0), lambda m, led: (0, "x")) is None:
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
    assert entry.read_bytes() == written  # every writer writes the same bytes
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


# --- per-process memos -------------------------------------------------------------------------------------


def test_the_kind_memo_gives_what_the_classifier_gives():
    names = np.array(["ncclKernel_AllReduce_RING_LL_Sum_float", "sgemm", "Memcpy HtoD", "sgemm", "x",
                      "ncclDevKernel_SendRecv"], dtype=object)
    cats = np.array(["kernel", "kernel", "gpu_memcpy", "cuda_sync", "other", "kernel"], dtype=object)
    for classifier in (Classifier(), Classifier(extra_comm_patterns=(r"^sgemm$",))):
        expected = classifier.kinds(names, cats).tolist()
        assert _tables._kinds(classifier, names, cats).tolist() == expected
        assert _tables._kinds(classifier, names[::-1], cats[::-1]).tolist() == expected[::-1]  # from the memo


def test_the_string_memo_is_bounded_and_keyed_by_content():
    def decode(strings: list[str]):
        text = "".join(strings).encode()
        ends = np.cumsum([len(x) for x in strings]).astype(np.int64)
        blob = np.frombuffer(text, np.uint8)
        return _cache._decode_set("categories:str", ends, blob, ends.tobytes() + text)

    _cache._STRINGS.clear()
    for i in range(_cache._STRINGS_LIMIT + 5):
        assert decode([f"name{i}"]).categories.tolist() == [f"name{i}"]
    assert len(_cache._STRINGS) <= _cache._STRINGS_LIMIT
    assert decode(["ab", "c"]) is decode(["ab", "c"])  # the second from the memo
    assert decode(["a", "bc"]).categories.tolist() == ["a", "bc"]  # same text, other strings
    assert decode(["b", "a", ""]).categories.tolist() == ["b", "a", ""]  # stored order, not sorted
    with pytest.raises(ValueError, match="unique"):
        decode(["a", "a"])  # a set that is not a valid categorical dtype is refused, not memoised
