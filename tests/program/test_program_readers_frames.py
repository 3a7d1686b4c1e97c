"""The readers' direct table builders equal the pandas calls they stand in for.

:func:`fleetlib.program.readers._frames.frame` must return what ``pd.DataFrame(columns, copy=False)``
returns -- values, dtypes (categories included), column order and index -- on columns
that take the direct path and on columns that must go to the constructor (bare object arrays,
lists, Series with another index, unequal lengths).  The bundled traces are read with both and
compared table by table.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.program.readers import _frames
from fleetlib.program.readers._frames import frame
from fleetlib.program.traces import read_trace

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"


def objects(values: list[object]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def typed_columns(n: int) -> dict[str, object]:
    return {
        "rank": np.zeros(n, dtype=np.int64),
        "start_us": np.linspace(0.0, 1.0, n),
        "flag": np.arange(n) % 2 == 0,
        "small": np.arange(n, dtype=np.int8),
        "name": pd.Categorical.from_codes(np.arange(n) % 3, categories=["a", "b", "c"]),
        "seq": pd.array([None if i % 4 == 0 else i for i in range(n)], dtype="Int64"),
        "dims": pd.Series(objects([f"[[{i}]]" if i % 3 else None for i in range(n)]), dtype=object),
    }


@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_frame_equals_the_constructor_on_typed_columns(n: int) -> None:
    columns = typed_columns(n)
    got, want = frame(columns), pd.DataFrame(columns, copy=False)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert list(got.dtypes) == list(want.dtypes)
    assert isinstance(got.index, pd.RangeIndex) and got.columns.dtype == want.columns.dtype


@pytest.mark.parametrize("odd", [
    objects(["x", "y", "z"]),                      # a bare object array: the constructor infers text
    ["x", "y", "z"],                               # a list
    pd.Series([1, 2, 3], index=[5, 6, 7]),         # a Series with another index: aligned by pandas
    np.arange(4),                                  # another length: the constructor raises
    np.array(["a", "b", "c"]),                     # numpy text
])
def test_frame_leaves_other_columns_to_the_constructor(odd: object) -> None:
    columns = {**typed_columns(3), "odd": odd}
    try:
        want = pd.DataFrame(columns, copy=False)
    except ValueError as exc:
        with pytest.raises(ValueError, match=str(exc)[:20]):
            frame(columns)
        return
    pd.testing.assert_frame_equal(frame(columns), want, check_exact=True)


def test_a_shared_column_index_is_never_changed_by_a_table() -> None:
    a = frame(typed_columns(3))
    b = frame(typed_columns(3))
    b["extra"] = 1
    b.columns = [c.upper() for c in b.columns]
    assert list(a.columns) == list(typed_columns(3))
    assert list(frame(typed_columns(2)).columns) == list(typed_columns(3))


def bundled() -> list[Path]:
    return sorted(p for p in DATA.rglob("*.json*") if p.name.endswith((".json", ".json.gz")))


@pytest.mark.parametrize("path", bundled(), ids=lambda p: p.name)
def test_bundled_traces_read_alike_with_the_direct_builders(path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    fast = read_trace(path, cache=False)
    monkeypatch.setattr(_frames, "_FROM_ARRAYS", None)  # every table through pd.DataFrame
    slow = read_trace(path, cache=False)
    for name in ("kernels", "steps", "host_syncs", "ops"):
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(slow, name), check_exact=True)
    monkeypatch.undo()
    read_trace(path, cache=True, cache_dir=tmp_path)
    cached = read_trace(path, cache=True, cache_dir=tmp_path)
    assert cached.from_cache
    for name in ("kernels", "steps", "host_syncs", "ops"):
        pd.testing.assert_frame_equal(getattr(cached, name), getattr(slow, name), check_exact=True)


# --- factorising text by identity (fleetlib.program.readers._identity) -----------------------------

TEXT = st.one_of(st.none(), st.sampled_from(["", "a", "b", "nccl:all_reduce", "é", "a" * 50]),
                 st.text(max_size=6))


def fresh_copies(values: list[object]) -> np.ndarray:
    """The values with every string a new object (as the decoder hands them over)."""
    return objects([None if v is None else "".join(list(v)) if isinstance(v, str) else v for v in values])


def shared_copies(values: list[object]) -> np.ndarray:
    """The values with equal strings one object (as after _columns._shared)."""
    one: dict[object, object] = {}
    return objects([v if v is None else one.setdefault(v, v) for v in values])


@settings(max_examples=150, deadline=None)
@given(pool=st.lists(TEXT, min_size=1, max_size=12), picks=st.lists(st.integers(0, 11), max_size=700),
       shared=st.booleans())
def test_factorize_text_equals_pandas(pool: list[object], picks: list[int], shared: bool) -> None:
    from fleetlib.program.readers import _memo
    from fleetlib.program.readers._identity import factorize_text

    values = [pool[i % len(pool)] for i in picks]
    array = shared_copies(values) if shared else fresh_copies(values)
    want_codes, want_uniques = pd.factorize(array, use_na_sentinel=True)
    got = factorize_text(array)
    if got is not None:
        np.testing.assert_array_equal(got[0], want_codes)
        assert got[1].tolist() == list(want_uniques)
    codes, uniques = _memo.factorize(array)  # whatever path it takes
    np.testing.assert_array_equal(codes, want_codes)
    assert uniques.tolist() == list(want_uniques)


@pytest.mark.parametrize("odd", [1, 2.5, float("nan"), True, b"x", ("t",)])
def test_factorize_text_leaves_other_values_to_pandas(odd: object) -> None:
    from fleetlib.program.readers import _memo
    from fleetlib.program.readers._identity import factorize_text

    array = shared_copies(["a", None, "b"] * 300 + [odd])
    assert factorize_text(array) is None
    codes, uniques = _memo.factorize(array)
    want_codes, want_uniques = pd.factorize(array, use_na_sentinel=True)
    np.testing.assert_array_equal(codes, want_codes)
    assert [type(u) for u in uniques.tolist()] == [type(u) for u in want_uniques]


def test_factorize_text_reads_a_strided_array() -> None:
    from fleetlib.program.readers._identity import factorize_text

    base = shared_copies(["x", "y", None, "x"] * 500)
    view = base[::3]
    got = factorize_text(view)
    want_codes, want_uniques = pd.factorize(view, use_na_sentinel=True)
    assert got is not None
    np.testing.assert_array_equal(got[0], want_codes)
    assert got[1].tolist() == list(want_uniques)


# --- comparing factorised values (fleetlib.program.readers._columns._is_value) ----------------------

JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True),
                        st.sampled_from(["X", "M", "x", "X ", "", "f", "s"]))


@settings(max_examples=150, deadline=None)
@given(values=st.lists(JSON_SCALAR, max_size=60), text=st.sampled_from(["X", "M", "f"]))
def test_is_value_equals_elementwise_comparison(values: list[object], text: str) -> None:
    from fleetlib.program.readers._columns import _is_value

    array = fresh_copies(values)
    codes, uniques = pd.factorize(array, use_na_sentinel=True)
    np.testing.assert_array_equal(_is_value(codes, uniques, text), np.asarray(array == text, dtype=bool))
