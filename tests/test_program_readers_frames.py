"""The readers' direct table builders equal the pandas calls they stand in for.

:func:`fleetlib.program.readers._frames.frame` must return what ``pd.DataFrame(columns, copy=False)``
returns, and :func:`~fleetlib.program.readers._frames.with_column` what ``table[name] = values``
leaves in the table -- values, dtypes (categories included), column order and index -- on columns
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
from fleetlib.program.readers._frames import frame, with_column
from fleetlib.program.traces import read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


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


def setitem(table: pd.DataFrame, name: str, values: np.ndarray) -> pd.DataFrame:
    out = table.copy(deep=False)
    out[name] = values
    return out


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 40), rank=st.integers(0, 2**40), which=st.sampled_from(sorted(typed_columns(1))))
def test_with_column_equals_setitem(n: int, rank: int, which: str) -> None:
    table = pd.DataFrame(typed_columns(n), copy=False)
    values = np.full(n, rank, dtype=np.int64)
    before = table.copy(deep=True)
    got = with_column(table, which, values)
    pd.testing.assert_frame_equal(got, setitem(table, which, values), check_exact=True)
    pd.testing.assert_frame_equal(table, before, check_exact=True)  # the input is left as it was


@pytest.mark.parametrize("table", [
    pd.DataFrame({"rank": [1, 2], "x": [0.5, 1.5]}, index=[3, 4]),              # another index
    pd.DataFrame([[1, 2], [3, 4]], columns=["rank", "rank"]),                  # a repeated column
    pd.DataFrame({"x": [1.0, 2.0]}),                                            # no such column: added
])
def test_with_column_falls_back_to_setitem(table: pd.DataFrame) -> None:
    values = np.array([7, 8], dtype=np.int64)
    pd.testing.assert_frame_equal(with_column(table, "rank", values), setitem(table, "rank", values))


def bundled() -> list[Path]:
    return sorted(p for p in DATA.rglob("*.json*") if p.name.endswith((".json", ".json.gz")))


@pytest.mark.parametrize("path", bundled(), ids=lambda p: p.name)
def test_bundled_traces_read_alike_with_the_direct_builders(path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    fast = read_trace(path, cache=False)
    monkeypatch.setattr(_frames, "_FROM_ARRAYS", None)  # every table through pd.DataFrame / setitem
    slow = read_trace(path, cache=False)
    for name in ("kernels", "steps", "host_syncs", "ops"):
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(slow, name), check_exact=True)
    monkeypatch.undo()
    read_trace(path, cache=True, cache_dir=tmp_path)
    cached = read_trace(path, cache=True, cache_dir=tmp_path)
    assert cached.from_cache
    for name in ("kernels", "steps", "host_syncs", "ops"):
        pd.testing.assert_frame_equal(getattr(cached, name), getattr(slow, name), check_exact=True)
