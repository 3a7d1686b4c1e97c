"""Joining the per-rank tables of many trace files into one table per kind, in linear time.

Each rank file yields its own kernel, step, host-sync and op frames.  :func:`_concat` gives what
``pd.concat(frames, ignore_index=True)`` gives, column by column: categoricals with the same
categories on every rank are joined by their codes, differing "free" categories are unioned over the
values present, and other columns are joined as arrays -- avoiding ``pd.concat``'s pairwise dtype
comparison, which costs time quadratic in the number of ranks.  Moved out of
:mod:`fleetlib.program.readers.kineto` unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.program.readers._frames import frame

__all__: list[str] = []


def _same_categories(arrays: Sequence[Any]) -> bool:
    first = arrays[0].dtype
    return all(a.dtype is first or (len(a.categories) == len(first.categories)
                                    and a.categories.equals(first.categories)) for a in arrays[1:])


def _union_categorical(arrays: Sequence[pd.Categorical]) -> pd.Categorical:
    """Return the categorical ``astype("category")`` makes of the joined values, from the codes.

    Categories: the distinct values present, sorted (code point order, as pandas sorts text).
    """
    used = [a.categories.to_numpy(dtype=object)[np.unique(a.codes[a.codes >= 0])] for a in arrays]
    distinct = pd.unique(np.concatenate(used))
    if not all(isinstance(v, str) for v in distinct):  # not met in practice: pandas decides
        values = np.concatenate([np.asarray(a, dtype=object) for a in arrays])
        return pd.Series(values, dtype=object).astype("category").array
    cats = pd.Index(sorted(distinct), dtype="str")
    codes = []
    for a in arrays:
        to_union = np.append(cats.get_indexer(a.categories), -1)  # code -1 (missing) stays -1
        codes.append(to_union[a.codes].astype(np.int32))
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)  # distinct by construction
    dtype = fast(cats, False) if fast is not None else pd.CategoricalDtype(cats)
    return pd.Categorical.from_codes(np.concatenate(codes), dtype=dtype, validate=False)


def _concat_column(arrays: list[Any], free: bool) -> Any:
    """One column of the merged table, as ``pd.concat`` makes it (free categories re-derived).

    Categorical columns are joined by their codes when every rank has the same categories; with
    different ones a free categorical takes the sorted union of the values present (what joining
    the values and ``astype("category")`` gives) and any other becomes objects (``pd.concat``'s
    result).  Comparing dtypes pairwise as ``pd.concat`` does costs time quadratic in the number
    of ranks; this is linear.
    """
    first = arrays[0]
    if isinstance(first.dtype, pd.CategoricalDtype):
        if all(isinstance(a.dtype, pd.CategoricalDtype) for a in arrays) and _same_categories(arrays):
            codes = np.concatenate([a.codes for a in arrays])
            return pd.Categorical.from_codes(codes, dtype=first.dtype, validate=False)
        if free and all(isinstance(a.dtype, pd.CategoricalDtype) for a in arrays):
            return _union_categorical(arrays)
        values = pd.Series(np.concatenate([np.asarray(a, dtype=object) for a in arrays]), dtype=object)
        return values.astype("category").array if free else values
    if any(a.dtype != first.dtype for a in arrays[1:]):  # not met in practice: pandas decides
        return pd.concat([pd.Series(a) for a in arrays], ignore_index=True).array
    if isinstance(first, np.ndarray):
        joined = np.concatenate(arrays)
        # an object column stays object (a bare object array would be inferred as text)
        return pd.Series(joined, dtype=object, copy=False) if joined.dtype == object else joined
    return type(first)._concat_same_type(arrays)  # Int64, text and other extension arrays


def _column_arrays(frame: pd.DataFrame) -> list[Any]:
    """Return the frame's columns as arrays (``frame[c]`` builds a Series per call: far slower)."""
    get = getattr(frame, "_get_column_array", None)
    if get is None:  # pragma: no cover - every supported pandas has it
        return [frame[c].array for c in frame.columns]
    return [get(i) for i in range(frame.shape[1])]


def _concat(frames: list[pd.DataFrame], empty: pd.DataFrame, free_categories: Sequence[str]) -> pd.DataFrame:
    """All ranks' frames in one table (what ``pd.concat(frames, ignore_index=True)`` gives), in linear time.

    Free categories (``free_categories``) that differ between ranks are unioned.
    """
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty
    names = list(frames[0].columns)
    if any(list(f.columns) != names for f in frames[1:]):  # not met in practice: pandas aligns
        out = pd.concat(frames, ignore_index=True)
        for c in free_categories:
            if not isinstance(out[c].dtype, pd.CategoricalDtype):
                out[c] = out[c].astype("category")
        return out
    per_frame = [_column_arrays(f) for f in frames]
    columns = {c: _concat_column([arrays[i] for arrays in per_frame], c in free_categories)
               for i, c in enumerate(names)}
    return frame(columns)


def _sorted_by(frame: pd.DataFrame, keys: Sequence[str]) -> bool:
    """Return True when ``frame``'s rows are already in ascending lexicographic order of ``keys``.

    Then a stable sort by ``keys`` (which ``sort_values`` on several keys is) returns the rows as
    they are, so it can be skipped.  Any key that is not a plain numeric column, or holds NaN,
    answers False (the caller sorts).
    """
    if len(frame) < 2:
        return True
    columns = []
    for k in keys:
        values = frame[k].to_numpy()
        if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and np.isnan(values).any()):
            return False
        columns.append(values)
    undecided = np.ones(len(frame) - 1, dtype=bool)  # pairs of consecutive rows tied on the keys so far
    for values in columns:
        before, after = values[:-1], values[1:]
        if (undecided & (before > after)).any():
            return False
        undecided &= before == after
        if not undecided.any():
            break
    return True


def _sort(frame: pd.DataFrame, keys: list[str], kind: str = "quicksort") -> pd.DataFrame:
    """``frame.sort_values(keys, kind=kind, ignore_index=True)``, skipped when the rows are in order.

    ``sort_values`` on two or more keys is a stable lexicographic sort whatever ``kind``, so rows
    already in order come back unchanged; a single key is sorted with ``kind`` as given.
    """
    if (len(keys) > 1 or kind == "stable") and _sorted_by(frame, keys):
        return frame.reset_index(drop=True) if not isinstance(frame.index, pd.RangeIndex) else frame
    return frame.sort_values(keys, kind=kind, ignore_index=True)


#: The kinds of table one trace file yields: (attribute, its free categories, shifted time columns).
_TABLES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("kernels", ("name", "process_group", "comm_rule"), ("start_us", "end_us", "launch_us")),
    ("steps", (), ("start_us", "end_us")),
    ("host_syncs", ("name", "sync_kind"), ("start_us", "end_us")),
    ("ops", ("name",), ("start_us",)),
)


class _Merger:
    """Join the per-rank tables of many trace reads in two levels, the first while reads arrive.

    :meth:`add` joins one batch of reads (a Dask task's files, in file order) into one piece per
    table, unshifted, and can run while workers still parse the next batches; :meth:`finish` joins
    the pieces in batch order, moves every rank onto the common time base and sorts.  The result
    is what joining the shifted per-file tables in one :func:`_concat` and sorting them gives:
    categories joined by codes where equal and unioned over the values present where free and
    different (the same at either level), each row's time plus its own file's shift (the same
    float addition, made only where the shift is not zero), and the same stable sorts -- skipped
    when the joined rows are already in order (ranks read in rank order: every file's table is
    sorted and a shift per rank keeps that order).
    """

    def __init__(self, empties: dict[str, pd.DataFrame]) -> None:
        self.empties = empties
        self.pieces: dict[int, dict[str, pd.DataFrame]] = {}

    def add(self, batch: int, reads: Sequence[Any]) -> None:
        """Join the tables of ``reads`` (objects with the four table attributes) as piece ``batch``."""
        self.pieces[batch] = {name: _concat([getattr(r, name) for r in reads], self.empties[name], free)
                              for name, free, _ in _TABLES}

    def finish(self, shift_by_rank: dict[int, float]) -> dict[str, pd.DataFrame]:
        """Return the four joined tables, shifted by rank (µs added) and sorted as the reader sorts."""
        order = sorted(self.pieces)
        out = {}
        for name, free, times in _TABLES:
            # each table's pieces are dropped once joined (the client holds less at its peak)
            frame = _concat([self.pieces[b].pop(name) for b in order], self.empties[name], free)
            out[name] = _shift(frame, times, shift_by_rank)
        self.pieces.clear()
        return {
            "kernels": _sort(out["kernels"], ["rank", "start_us", "end_us", "stream"], kind="stable"),
            "steps": _sort(out["steps"], ["rank", "start_us"]),
            "host_syncs": _sort(out["host_syncs"], ["rank", "start_us"], kind="stable"),
            "ops": _sort(out["ops"], ["rank", "start_us"], kind="stable"),
        }


def _shift(frame: pd.DataFrame, times: Sequence[str], shift_by_rank: dict[int, float]) -> pd.DataFrame:
    """Add each row's rank's shift to the time columns (rows of ranks with no shift untouched)."""
    moved = {r: s for r, s in shift_by_rank.items() if s}
    if not moved or frame.empty:
        return frame
    ranks = np.fromiter(moved, dtype=np.int64, count=len(moved))
    shifts = np.fromiter(moved.values(), dtype=np.float64, count=len(moved))
    order = np.argsort(ranks)
    ranks, shifts = ranks[order], shifts[order]
    row_rank = frame["rank"].to_numpy()
    at = np.minimum(np.searchsorted(ranks, row_rank), len(ranks) - 1)
    hit = ranks[at] == row_rank
    if not hit.any():
        return frame
    frame = frame.copy(deep=False)
    for c in times:
        values = frame[c].to_numpy(dtype=np.float64, copy=True)
        values[hit] = values[hit] + shifts[at[hit]]
        frame[c] = values
    return frame
