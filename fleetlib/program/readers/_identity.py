"""Factorising an object array of text by the objects it points at, then by value.

The trace reader's text columns hold few distinct values many times over, and after
:func:`~fleetlib.program.readers._columns._shared` equal values are one object.  An object array
is an array of pointers: hashing the pointers (integers, in C) groups the rows by object at a
fraction of the cost of a Python-level pass that hashes and compares each string; the few
distinct objects are then grouped by value with a dictionary, so equal strings held by different
objects still get one code.  The answer is exactly ``pd.factorize(values, use_na_sentinel=True)``
for text and None: codes in order of first appearance, -1 for None.
"""

from __future__ import annotations

import ctypes

import numpy as np

try:  # pandas' integer hash table (what pd.factorize runs on int64), without its dispatch
    from pandas._libs.hashtable import Int64HashTable
except ImportError:  # pragma: no cover - every supported pandas has it
    Int64HashTable = None

__all__: list[str] = []

_POINTER = ctypes.c_size_t
_WORD = np.dtype(np.uintp)


def pointers(values: np.ndarray) -> np.ndarray | None:
    """Return the object pointers of a 1-D object array as int64 (a copy), or None for other arrays."""
    if (values.dtype != object or values.ndim != 1 or _WORD.itemsize != ctypes.sizeof(_POINTER)
            or _WORD.itemsize != 8):
        return None
    n = len(values)
    if not n:
        return np.zeros(0, dtype=np.int64)
    if not values.flags.c_contiguous:
        values = np.ascontiguousarray(values)
    raw = np.ctypeslib.as_array((_POINTER * n).from_address(values.ctypes.data))
    return raw.astype(np.int64)  # a copy: nothing refers to the array's buffer afterwards


def factorize_text(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``pd.factorize(values, use_na_sentinel=True)`` of text and None, or None for other values.

    Parameters
    ----------
    values
        A 1-D object array.

    Returns
    -------
    (codes, uniques) or None
        Codes (intp) numbering the distinct strings in order of first appearance, -1 for None;
        the distinct strings as an object array.  None when a value is neither ``str`` nor None,
        or when more than a quarter of the rows hold objects of their own (the caller factorises
        by value).
    """
    ptrs = pointers(values)
    if ptrs is None:
        return None
    n = len(ptrs)
    if Int64HashTable is not None:
        uptr, by_object = Int64HashTable(max(1, min(n, 1 << 20))).factorize(ptrs)
    else:  # pragma: no cover
        import pandas as pd

        by_object, uptr = pd.factorize(ptrs)
    k = len(uptr)
    if k > n // 4:  # mostly one object per row (text straight from the decoder): by value is faster
        return None
    first = np.empty(k, dtype=np.intp)
    first[by_object[::-1]] = np.arange(n - 1, -1, -1, dtype=np.intp)  # each object's first row
    objects = values[first].tolist()  # the values array keeps every object alive meanwhile
    for v in objects:
        if v is not None and type(v) is not str:
            return None
    seen: dict[str | None, int] = {None: -1}
    number = seen.setdefault
    by_value = np.fromiter([number(v, len(seen) - 1) for v in objects], dtype=np.intp, count=k)
    del seen[None]
    codes = by_value[by_object] if k else np.zeros(0, dtype=np.intp)
    return codes.astype(np.intp, copy=False), np.fromiter(seen, dtype=object, count=len(seen))
