"""Numbers from object columns without a pandas round trip, where the values allow it exactly.

A rank file's GPU rows number in the hundreds: ``pd.to_numeric`` over a Series, a nullable array
and back costs more in fixed overhead than the values themselves.  Each helper here returns the
same float64 values (NaN for missing) as the pandas path it replaces, or None when a value is of a
kind only that path handles (text, booleans, integers beyond 2**53 ...), and the caller takes it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fleetlib.program import classify
from fleetlib.program.readers import _memo

try:  # pandas' integer hash table (what pd.Index.get_indexer runs on int64), without its dispatch
    from pandas._libs.hashtable import Int64HashTable
except ImportError:  # pragma: no cover - every supported pandas has it
    Int64HashTable = None

_EXACT = 2 ** 53  # integers below this convert to float64 exactly
_NONE = type(None)


def floats(values: np.ndarray) -> np.ndarray | None:
    """``pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(float)``, or None.

    Only ints (below 2**53 in magnitude), floats and None are converted here.
    """
    items = values.tolist()
    kinds = set(map(type, items))
    if not kinds <= {int, float, _NONE}:
        return None
    if int in kinds and max((abs(v) for v in items if type(v) is int), default=0) >= _EXACT:
        return None
    if _NONE not in kinds:
        return np.asarray(items, dtype=np.float64) if items else np.zeros(0)
    return np.asarray([np.nan if v is None else v for v in items], dtype=np.float64)


def _size_rule(uniques: np.ndarray) -> list[float]:
    return classify.dtype_size_bytes(uniques).tolist()


def message_bytes(nelems: np.ndarray, dtypes: np.ndarray) -> np.ndarray:
    """``classify.message_bytes(nelems, dtypes)`` as float64 (NaN for ``<NA>``), computed in numpy.

    Element sizes are looked up once per distinct dtype name and process.  Values the fast path
    does not take (text counts, negative counts, unhashable dtypes ...) go through
    :func:`fleetlib.program.classify.message_bytes` itself, errors included.
    """
    n = floats(np.asarray(nelems, dtype=object))
    if n is None or (n[np.isfinite(n)] < 0).any() or len(dtypes) != len(n):
        return _slow(nelems, dtypes)
    have = np.isfinite(n)
    if not have.any():
        return np.full(len(n), np.nan)
    key = f"{id(classify.DTYPE_BYTES)}:{len(classify.DTYPE_BYTES)}"  # a changed size table starts over
    size = _memo.mapped(np.asarray(dtypes, dtype=object)[have], _size_rule, "dtype_size", key, np.nan)
    if size is None:
        return _slow(nelems, dtypes)
    out = np.full(len(n), np.nan)
    out[have] = n[have] * size.astype(np.float64)
    return np.where(np.isfinite(out), np.round(out), np.nan)


def _slow(nelems: Any, dtypes: Any) -> np.ndarray:
    return classify.message_bytes(nelems, dtypes).to_numpy(dtype=float, na_value=np.nan)


def to_floats(values: np.ndarray) -> np.ndarray:
    """``pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)``."""
    out = floats(np.asarray(values, dtype=object))
    if out is None:
        out = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)
    return out


def shape_bytes(dims: np.ndarray, types: np.ndarray) -> np.ndarray:
    """``classify.shape_bytes(list(dims), list(types))`` as float64 (NaN for ``<NA>``).

    The first shape's element count and the first type are taken as
    :func:`fleetlib.program.classify.shape_bytes` takes them; the bytes come from
    :func:`message_bytes` above (sizes memoised per dtype name).
    """
    if len(dims) != len(types):
        return classify.shape_bytes(list(dims), list(types)).to_numpy(dtype=float, na_value=np.nan)
    count, first_type = classify.first_shape_elements(dims.tolist(), types.tolist())
    return message_bytes(count, first_type)


def median(values: np.ndarray) -> float:
    """``float(np.median(values))`` of finite float64 values (not empty), without its overhead.

    The middle value of the sorted values, or the mean of the middle two as ``np.median`` takes it
    (their sum halved).
    """
    ordered = np.sort(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return float((ordered[mid - 1] + ordered[mid]) / 2.0)


def first_index(keys: np.ndarray) -> tuple[np.ndarray, Any]:
    """Return the first row of each distinct int64 key, and a look-up of keys into their order.

    ``pd.Index(keys)`` without its duplicates (``duplicated(keep="first")``) and its
    ``get_indexer``: a key's position among the distinct keys in order of first appearance, -1
    for a key not there -- on pandas' integer hash table directly.
    """
    if Int64HashTable is None:  # pragma: no cover
        index = pd.Index(keys)
        first = np.flatnonzero(~index.duplicated(keep="first"))
        return first, pd.Index(keys[first]).get_indexer
    table = Int64HashTable(max(1, len(keys)))
    uniques, codes = table.factorize(keys)
    first = np.empty(len(uniques), dtype=np.intp)
    first[codes[::-1]] = np.arange(len(keys) - 1, -1, -1, dtype=np.intp)  # each key's first row
    return first, table.lookup


def int64_bytes(nbytes: np.ndarray) -> pd.arrays.IntegerArray:
    """``pd.array(round(nbytes), dtype="Float64").astype("Int64")`` (NaN and infinities missing).

    Built directly: the same cast of the rounded floats to int64 (masked slots hold what that
    cast makes of NaN, as pandas' own cast leaves them), without two extension-array round trips.
    """
    have = np.isfinite(nbytes)
    with np.errstate(invalid="ignore"):
        data = np.where(have, np.round(nbytes), np.nan).astype(np.int64)
    return pd.arrays.IntegerArray(data, ~have)
