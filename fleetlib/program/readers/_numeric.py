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
