"""Building the readers' tables from typed columns without pandas' per-column inference.

``pd.DataFrame({name: array, ...}, copy=False)`` inspects every column again (``sanitize_array``:
dtype inference, a copy check, index extraction) although the readers hand it columns whose dtypes
they have just built: about 90 µs for a kernel table of a rank file, four tables per file, and
again on every cached reload.  :func:`frame` builds the same table straight from the arrays when
every column is already a typed 1-D array of one length, and otherwise leaves it to the
constructor, so the result is always what ``pd.DataFrame(columns, copy=False)`` returns
(equal values, dtypes, column order and a fresh ``RangeIndex``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__: list[str] = []

_FROM_ARRAYS = getattr(pd.DataFrame, "_from_arrays", None)
#: The column index of each set of column names (an Index is immutable: tables may share one);
#: building it infers the names' dtype, a third of the constructor's cost on a small table.
_COLUMN_INDEX: dict[tuple[str, ...], pd.Index] = {}


def _typed(value: Any, n: int) -> Any:
    """Return ``value`` as an array the frame can hold as it is, or None (the constructor decides).

    A numpy array of a numeric or boolean dtype, a pandas extension array (categorical, masked
    integer ...) or a Series with a default index and object dtype (how the readers mark a column
    that must stay ``object``).  A bare object array is left to the constructor, which infers
    text from it.
    """
    if isinstance(value, np.ndarray):
        return value if value.ndim == 1 and len(value) == n and value.dtype.kind in "biuf" else None
    if isinstance(value, pd.Series):
        index = value.index
        if (len(value) == n and isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
                and value.dtype == object):
            return value.to_numpy(copy=False)
        return None
    if isinstance(value, pd.api.extensions.ExtensionArray) and value.ndim == 1 and len(value) == n:
        return value
    return None


def frame(columns: Mapping[str, Any]) -> pd.DataFrame:
    """Return ``pd.DataFrame(columns, copy=False)``, built directly when every column is typed.

    Parameters
    ----------
    columns
        Column name -> numpy array (numeric or boolean), pandas extension array, or object
        Series with a default index; anything else (or unequal lengths) goes to the constructor.

    Returns
    -------
    DataFrame
        The table, with a ``RangeIndex`` from 0.
    """
    if _FROM_ARRAYS is None or not columns:
        return pd.DataFrame(columns, copy=False)
    first = next(iter(columns.values()))
    try:
        n = len(first)
    except TypeError:
        return pd.DataFrame(columns, copy=False)
    arrays = []
    for value in columns.values():
        typed = _typed(value, n)
        if typed is None:
            return pd.DataFrame(columns, copy=False)
        arrays.append(typed)
    names = tuple(columns)
    index = _COLUMN_INDEX.get(names)
    if index is None:
        if len(_COLUMN_INDEX) > 256:
            _COLUMN_INDEX.clear()
        index = _COLUMN_INDEX[names] = pd.Index(list(names))
    return _FROM_ARRAYS(arrays, columns=index, index=pd.RangeIndex(n), verify_integrity=False)

