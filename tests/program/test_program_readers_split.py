"""The trace reader's cheaper steps answer exactly what the steps they stand in for answer.

* :meth:`_Source._typed_split` (the event array cut out of a small document without a first scan)
  against the split into raw top-level values it skips (:meth:`_Source._typed_whole` with the cut
  refused), on documents built to mislead a cut: keys before and after the events whose text holds
  ``]`` and ``"traceEvents": [``, a repeated ``traceEvents``, whitespace JSON does not allow, a
  byte-order mark, trailing bytes, truncation.
* The hash-table factorisation of text, the ``Int64`` bytes column and the raw-bytes join against
  ``pd.factorize``, ``pd.array(...).astype("Int64")`` and ``bytes()``.
"""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.program.readers import _columns, _decode, _memo
from fleetlib.program.readers._decode import _Source
from fleetlib.program.readers._memo import text_codes as _text_codes
from fleetlib.program.readers._numeric import int64_bytes as _int64_bytes
from fleetlib.quality import InputError


def outcome(doc: bytes, split: bool) -> tuple:
    """What the document's source yields: events, top-level keys, format -- or the error."""
    src = _Source(doc, "t.json")
    if not split:
        src._typed_split = lambda: None  # the raw-value split the cut stands in for
    try:
        events = [list(piece) for piece in src.chunks()]
    except InputError as exc:
        return ("error", str(exc), exc.row, exc.field)
    return ("ok", events, list(src.top.items()), src.format, src.replaced)


EVENTS = b'[{"ph": "X", "cat": "kernel", "name": "k]", "pid": 1, "tid": 7, "ts": 10, "dur": 2}, ' \
         b'{"ph": "M", "name": "thread_name", "args": {"name": "stream 7 ]"}}]'

DOCS = [
    b'{"traceEvents": ' + EVENTS + b'}',
    b'{"schemaVersion": 1, "traceEvents": ' + EVENTS + b', "traceName": "a]b", "x": [1, [2]]}',
    b'  \n{"a": "\\"traceEvents\\": [", "traceEvents" :\t' + EVENTS + b' , "b": {"c": "]"}}\n ',
    b'{"traceEvents": ' + EVENTS + b', "traceEvents": []}',               # repeated key: the last wins
    b'{"traceEvents": [], "k": 1, "traceEvents": ' + EVENTS + b'}',
    b'{"a": 1, "a": 2, "traceEvents": ' + EVENTS + b', "a": 3}',           # repeated other keys
    b'\xef\xbb\xbf{"traceEvents": ' + EVENTS + b'}',                        # byte-order mark
    b'{"traceEvents"\x0c: ' + EVENTS + b'}',                                # not JSON whitespace
    b'{"traceEvents": ' + EVENTS + b'}\x0c',
    b'{"traceEvents": ' + EVENTS + b'} x',                                  # trailing bytes
    b'{"traceEvents": ' + EVENTS + b']}',
    b'{"traceEvents": ' + EVENTS[:-1] + b'}',                               # array not closed
    b'{"traceEvents": ' + EVENTS,                                           # truncated
    b'{, "traceEvents": ' + EVENTS + b'}',
    b'{"a": 1,, "traceEvents": ' + EVENTS + b'}',
    b'{"a": 1 "traceEvents": ' + EVENTS + b'}',
    b'{"traceEvents": ' + EVENTS + b', }',
    b'{"traceEvents": ' + EVENTS + b' "b": 1}',
    b'{"a": NaN, "traceEvents": ' + EVENTS + b'}',                          # msgspec refuses NaN
    b'{"traceEvents": ' + EVENTS + b', "b": "\\ud800"}',                    # a lone surrogate escape
    b'{"traceEvents": [1, 2]}',                                             # entries not objects
    b'{"traceEvents": [], "b": ' + b'[' * 12 + b']' * 12 + b'}',            # many ] after the array
    b'{"traceEvents": {"ph": "X"}}',
    b'{"notEvents": []}',
    b'[{"ph": "X", "ts": 1, "dur": 1}]',
]


@pytest.mark.parametrize("doc", DOCS)
def test_cut_is_the_raw_value_split(doc):
    assert outcome(doc, split=True) == outcome(doc, split=False)


def test_cut_is_taken_on_a_plain_document():
    src = _Source(DOCS[1], "t.json")
    events = src._typed_split()
    assert events is not None and len(events) == 2
    assert list(src.top) == ["schemaVersion", "traceName", "x"]


_WS = st.sampled_from(["", " ", "\n", "\t ", "\r\n  "])
_TEXT = st.lists(st.sampled_from([*'ab]["{},: \\', '"traceEvents": [', "\u00e9"]),
                 max_size=8).map("".join)
_VALUE = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | _TEXT,
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=2),
                      max_leaves=6)
_KEYS = st.lists(st.tuples(st.sampled_from(["a", "b", "traceName", "x]", "traceEvents"]), _VALUE), max_size=3)


@settings(max_examples=150, deadline=None)
@given(before=_KEYS, after=_KEYS, ws=st.lists(_WS, min_size=6, max_size=6), cut=st.integers(0, 3))
def test_cut_matches_on_generated_documents(before, after, ws, cut):
    def pairs(items):
        return "".join(f"{json.dumps(k)}:{ws[1]}{json.dumps(v)},{ws[2]}" for k, v in items)

    tail = "".join(f",{ws[3]}{json.dumps(k)}:{json.dumps(v)}" for k, v in after)
    text = (f"{ws[0]}{{{pairs(before)}\"traceEvents\"{ws[4]}:{ws[5]}".encode() + EVENTS + tail.encode()
            + b"}" + ws[0].encode())
    docs = [text] + ([text[:-cut]] if cut else [])  # and the document cut short
    for doc in docs:
        assert outcome(doc, split=True) == outcome(doc, split=False)


def obj(*values: object) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


@pytest.mark.parametrize("values", [
    obj("b", "a", None, "b", "", "a"), obj(None, None), obj(), obj("a\udc80", "b", "a\udc80"),
    obj(*[f"kernel_{i % 13}" for i in range(3000)]), obj("x", 1, None),
    obj(*["void at::native::kernel<" + "f" * 90 + f"{i % 7}>" for i in range(300)]),  # long names
    obj("short", "a" * 100, "short", None), obj(1, True, 1.0, float("nan"), None, "1"),
])
def test_factorize_by_value_is_pd_factorize(values):
    codes, uniques = _memo.factorize_by_value(values)
    want_codes, want_uniques = pd.factorize(values, use_na_sentinel=True)
    assert codes.tolist() == want_codes.tolist()
    assert list(uniques) == list(want_uniques)
    assert uniques.dtype == object


@pytest.mark.parametrize("values", [obj("k", "c", "k"), obj("a", None),
                                    obj(*[f"n{i % 5}" for i in range(900)])])
def test_text_codes_are_pd_factorize_without_sentinel(values):
    codes, uniques = _text_codes(values)
    want_codes, want_uniques = pd.factorize(values, use_na_sentinel=False)
    assert codes.tolist() == want_codes.tolist()
    assert list(map(repr, uniques)) == list(map(repr, want_uniques))  # a missing value is NaN in both


@pytest.mark.parametrize("x", [
    np.array([1.0, np.nan, 3.5, 2.5, -0.0, np.inf, -np.inf, 2.0 ** 63, 1e30, -1e30, 2.0 ** 62 + 1]),
    np.zeros(0), np.array([np.nan, np.nan]),
])
def test_int64_bytes_is_the_float64_cast(x):
    want = pd.array(np.where(np.isfinite(x), np.round(x), np.nan), dtype="Float64").astype("Int64")
    got = _int64_bytes(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got._mask, want._mask)
    np.testing.assert_array_equal(got._data, want._data)


def test_raw_bytes_are_each_raw_values_bytes():
    raws = _decode._DECODER.decode(
        b'[{"args": {"Input Dims": [[1, 2], []]}}, {"args": {"Input Dims": "a\\u0000b"}},'
        b' {"args": {"Input Dims": [ 3 ,\n4 ]}}]')
    values = _columns._objects([e.args.input_dims for e in raws], 3)
    assert all(isinstance(v, msgspec.Raw) for v in values)
    assert _columns._raw_bytes(values) == [bytes(v) for v in values]


def test_a_mixed_batch_reads_as_its_files_read_one_by_one(tmp_path):
    """A batch (good files, rejected rows, an unreadable file) answers what read_trace answers per file."""
    from pathlib import Path

    from fleetlib.program.readers import _dask, kineto

    data = Path(__file__).resolve().parents[2] / "data" / "traces"
    rejected = tmp_path / "rank_5.json"
    rejected.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": -1},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "x", "dur": 1},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 9, "dur": 1,
         "args": {"correlation": 1}},
    ]}))
    unreadable = tmp_path / "rank_6.json.gz"
    unreadable.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 12)
    files = [sorted((data / "dlrm_8rank").glob("*.json.gz"))[0], rejected, unreadable,
             data / "hta_pp_pair_rank-1.json.gz"]
    kwargs = [{"cache": False}] * len(files)
    got = _dask._read_batch(files, kwargs)
    for f, g in zip(files, got, strict=True):
        try:
            want = kineto.read_trace(f, cache=False)
        except InputError as exc:
            assert isinstance(g, InputError) and (str(g), g.row, g.field) == (str(exc), exc.row, exc.field)
            continue
        for table in ("kernels", "steps", "host_syncs", "ops"):
            pd.testing.assert_frame_equal(getattr(g, table), getattr(want, table), check_exact=True)
        assert g.ledger.to_dict() == want.ledger.to_dict() and g.metadata == want.metadata
    assert got[1].ledger.rejected == 2 and isinstance(got[2], InputError)
    merged = kineto.read_traces(files, cache=False, progress=False, errors="skip")
    assert [e.field for e in merged.ledger.entries if e.file == str(unreadable)] == ["file"]
    assert merged.ranks == sorted(tr.rank for tr in got if not isinstance(tr, InputError))


def test_median_is_np_median():
    from fleetlib.program.readers._numeric import median

    rng = np.random.default_rng(0)
    for n in [*range(1, 40), 64, 65, 999]:
        values = np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(-6, 18)
        assert median(values) == float(np.median(values))


def test_first_index_is_pd_index_without_duplicates():
    from fleetlib.program.readers._numeric import first_index

    rng = np.random.default_rng(1)
    for n in [1, 2, 7, 300]:
        keys = rng.integers(-3, 9, n).astype(np.int64)
        probe = rng.integers(-5, 12, 40).astype(np.int64)
        index = pd.Index(keys)
        keep = ~index.duplicated(keep="first")
        first, lookup = first_index(keys)
        assert first.tolist() == np.flatnonzero(keep).tolist()
        assert lookup(probe).tolist() == index[keep].get_indexer(probe).tolist()


@pytest.mark.parametrize("values", [obj("a", "b"), obj("a", None), obj("a", 3, ["x"]), obj(), obj(None)])
def test_not_text_is_the_value_by_value_check(values):
    from fleetlib.program.readers._decode import _not_text

    want = [not isinstance(v, str) for v in values]
    assert _not_text(values).tolist() == want


@pytest.mark.parametrize("values", [obj(7, 7, "PyTorch Profiler", None, 8), obj(1, True, 1.0, "1", 2),
                                    obj(3.0, 3), obj()])
def test_shared_thread_ids_are_what_sharing_makes_them(values):
    got, want = _columns._shared_ids(values.copy()), _columns._shared(values.copy())
    assert [(type(v), v) for v in got] == [(type(v), v) for v in want]


@pytest.mark.parametrize("values", [
    obj(7, 7, 123456789, 123456789, 8),
    obj(2 ** 70, 2 ** 70, 1),  # beyond int64: shared by value
    obj(5),
])
def test_integer_thread_ids_are_shared_as_sharing_makes_them(values):
    copies = np.array([int(str(v)) for v in values], dtype=object)  # a new int object per row
    got, want = _columns._shared_ids(copies), _columns._shared(values.copy())
    assert [(type(v), v) for v in got] == [(type(v), v) for v in want]
    assert len({id(v) for v in got}) == len(set(values.tolist()))  # one object per distinct id
