"""The trace reader's fast paths answer exactly what the paths they stand in for answer.

Each memoised or numpy helper of :mod:`fleetlib.program.readers._memo` and
:mod:`fleetlib.program.readers._numeric` is compared with the pandas / classifier call it replaces,
on values that take the fast path and on values that must fall back (text numbers, booleans,
integers beyond 2**53, unhashable and non-text values), and called twice so the second answer
comes from the memo.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fleetlib.program import classify
from fleetlib.program.classify import Classifier
from fleetlib.program.readers import _memo, _numeric
from fleetlib.program.readers._tables import _categorical
from fleetlib.quality import DomainError


def obj(*values: object) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


NUMBER_CASES = [
    obj(1, 2, 3),
    obj(1, None, 2.5, float("nan"), float("inf")),
    obj(None, None),
    obj(),
    obj(2 ** 60, 1),          # beyond 2**53: the pandas path decides
    obj("12", 3, None),       # numeric text: the pandas path converts it
    obj(True, 1),             # a boolean is not a count
    obj("x", [1], None),
]


@pytest.mark.parametrize("values", NUMBER_CASES)
def test_to_floats_is_pd_to_numeric(values):
    expected = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)
    np.testing.assert_array_equal(_numeric.to_floats(values), expected)


MESSAGE_CASES = [
    (obj(10, None, 3, 7), obj("Float", "c10::Half", "BFloat16", "unknown_t")),
    (obj(None, None), obj("Float", None)),
    (obj(4, 4), obj(None, "long int")),
    (obj("8", 2), obj("Float", "Float")),
    (obj(5, 6), obj(3, "Float")),             # a dtype that is not text
    (obj(2 ** 60, 1), obj("Byte", "Byte")),
    (obj(), obj()),
]


@pytest.mark.parametrize(("nelems", "dtypes"), MESSAGE_CASES)
def test_message_bytes_is_classify_message_bytes(nelems, dtypes):
    expected = classify.message_bytes(nelems, dtypes).to_numpy(dtype=float, na_value=np.nan)
    for _ in range(2):  # the second call reads the dtype sizes from the memo
        np.testing.assert_array_equal(_numeric.message_bytes(nelems, dtypes), expected)


def test_message_bytes_refuses_a_negative_count_as_classify_does():
    with pytest.raises(DomainError):
        classify.message_bytes(obj(-1), obj("Float"))
    with pytest.raises(DomainError):
        _numeric.message_bytes(obj(-1), obj("Float"))


def test_shape_bytes_is_classify_shape_bytes():
    dims = obj([[2, 3], [4]], [], None, [[5, True]], [[7]], [[]], "[[1]]")
    types = obj(["float", "int"], ["float"], None, ["float"], ["c10::BFloat16"], ["float"], ["float"])
    expected = classify.shape_bytes(list(dims), list(types)).to_numpy(dtype=float, na_value=np.nan)
    np.testing.assert_array_equal(_numeric.shape_bytes(dims, types), expected)
    assert _numeric.shape_bytes(dims, types)[0] == 24.0  # 2 x 3 floats: counted by hand


NAMES = obj("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "volta_sgemm_128x32_nn",
            "void deep_ep::intranode::dispatch<8>(int*)", None, "ncclDevKernel_SendRecv",
            "volta_sgemm_128x32_nn")


def test_comm_rules_per_classifier_are_the_classifiers():
    plain, extra = Classifier(), Classifier(extra_comm_patterns=(r"^volta_sgemm",))
    for _ in range(2):
        for c in (plain, extra):  # one memo per fingerprint: the two must not share answers
            assert _memo.comm_rules(c, NAMES).tolist() == c.comm_rules(NAMES).tolist()
    assert _memo.comm_rules(extra, NAMES)[1] == "name:^volta_sgemm"
    assert _memo.comm_rules(plain, NAMES)[1] == ""
    odd = obj("a", 3, None)  # a name that is not text: the classifier itself answers
    assert _memo.comm_rules(plain, odd).tolist() == plain.comm_rules(odd).tolist()


def test_sync_kinds_and_graph_launches_are_classifys():
    calls = obj("cudaDeviceSynchronize", "cudaLaunchKernel", "cudaStreamWaitEvent", None, "hipGraphLaunch",
                "cudaMemcpy", "cudaGraphLaunch_v10000", "cudaLaunchKernel")
    for _ in range(2):
        kinds, blocking = _memo.sync_kinds(calls)
        want_kinds, want_blocking = classify.host_sync_kinds(calls)
        assert kinds.tolist() == want_kinds.tolist()
        assert blocking.tolist() == want_blocking.tolist()
        assert _memo.graph_launches(calls).tolist() == classify.is_graph_launch(calls).tolist()


def test_collectives_from_arg_are_classifys():
    values = obj("allreduce", "_allgather_base", None, "barrier", "something_else", "all_to_all", 7)
    for _ in range(2):
        labels, ok = _memo.collectives_from_arg(values)
        want_labels, want_ok = classify.collective_from_arg(values)
        assert labels.tolist() == want_labels.tolist()
        assert ok.tolist() == want_ok.tolist()


@pytest.mark.parametrize("values", [
    obj("b", "a", "c", "a", "b"),
    obj("b", None, "a"),
    obj(),
    obj("x", 1, "y"),
    obj("Z", "a", "_", "ä", "A"),
])
def test_free_categorical_is_pd_categorical(values):
    for _ in range(2):  # the second call reuses the sorted dtype
        got, want = _categorical(values), pd.Categorical(values)
        assert list(got.categories) == list(want.categories)
        assert got.codes.tolist() == want.codes.tolist()
        assert got.astype(object).tolist() == want.astype(object).tolist()


def test_same_names_in_another_order_give_the_same_categories():
    first, second = _categorical(obj("b", "a", "c")), _categorical(obj("c", "b", "a", "a"))
    assert list(first.categories) == list(second.categories) == ["a", "b", "c"]
    assert second.astype(object).tolist() == ["c", "b", "a", "a"]


def test_fixed_categorical_codes_are_get_indexer():
    dtype = pd.CategoricalDtype(pd.Index(["compute", "comm", "memcpy"], dtype="str"))
    values = obj("comm", "compute", "unknown", None, "memcpy", "comm")
    got = _categorical(values, dtype)
    assert got.codes.tolist() == dtype.categories.get_indexer(values).tolist() == [1, 0, -1, -1, 2, 1]


def test_collectives_from_annotation_are_classifys():
    names = obj("nccl:all_reduce", "nccl:all_to_all", None, "nccl:send 0->1", "gloo:broadcast",
                "ProfilerStep#3",
                "nccl:all_reduce")
    for _ in range(2):
        got = _memo.collectives_from_annotation(names).tolist()
        assert got == classify.collective_from_annotation(names).tolist()
    assert got[:2] == ["allreduce", "alltoall"]


def test_gunzip_one_call_and_sliced_loop_agree():
    import gzip
    import zlib

    from fleetlib.program.readers import _decode
    from fleetlib.quality import InputError

    text = b'{"traceEvents": [' + b",".join(b'{"ph": "X", "ts": %d}' % i for i in range(5000)) + b"]}"
    one = gzip.compress(text)
    assert _decode._gunzip_small(one, 1 << 30) == text  # the one-call path took it
    assert bytes(_decode._gunzip(one, "f")) == text
    # what the one-call path leaves to the loop: several members with zero padding between them
    two = gzip.compress(text[:100]) + b"\0\0" + gzip.compress(text[100:])
    assert _decode._gunzip_small(two, 1 << 30) is None
    assert bytes(_decode._gunzip(two, "f")) == text
    # refusals are the loop's, whichever path saw the file first: truncated, trailing garbage, a
    # trailer whose length does not match the content
    lying = one[:-4] + (10).to_bytes(4, "little")
    for bad, why in ((one[:-9], "truncated or corrupt"), (one + b"junk", "trailing garbage"),
                     (lying, "incorrect length")):
        assert _decode._gunzip_small(bad, 1 << 30) is None
        with pytest.raises(InputError, match=why):
            _decode._gunzip(bad, "f")
    with pytest.raises(InputError, match="decompresses to more than"):
        _decode._gunzip(one, "f", max_bytes=len(text) - 1)
    assert zlib.crc32(bytes(_decode._gunzip(one, "f"))) == zlib.crc32(text)


@pytest.mark.parametrize("values", [
    obj("b", "a", None, "b", "", "a"),
    obj(None, None),
    obj(),
    obj("x", 1, 1.0, None, float("nan"), "x"),   # not only text: pandas factorises
    obj(*[f"k{i % 7}" for i in range(5000)]),      # beyond the dictionary's size: pandas
])
def test_factorize_is_pd_factorize(values):
    codes, uniques = _memo.factorize(values)
    want_codes, want_uniques = pd.factorize(values, use_na_sentinel=True)
    assert codes.tolist() == want_codes.tolist()
    assert list(uniques) == list(want_uniques)


def test_factorize_refuses_unhashable_values_as_pandas_does():
    with pytest.raises(TypeError):
        _memo.factorize(obj("a", ["b"]))
    assert _memo.distinct(obj("a", ["b"])) is None
