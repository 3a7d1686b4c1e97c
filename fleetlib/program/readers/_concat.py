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
    return pd.DataFrame(columns, copy=False)
