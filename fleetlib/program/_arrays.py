"""Argument validation shared by the program rung's formulas (flops, roofline, iron law).

Every helper takes a name (for the message) and a scalar or array, and raises
:class:`~fleetlib.quality.DomainError` naming the first offending value and where it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

from fleetlib.quality import DomainError

ArrayLike: TypeAlias = float | int | Sequence[float] | np.ndarray
FloatOrArray: TypeAlias = float | np.ndarray

#: A utilization a hair above one (float round-off) is accepted; anything more is refused.
UNIT_SLACK = 1e-9



def checked_values(name: str, value: ArrayLike, *, positive: bool = False, nonnegative: bool = False,
            fraction: bool = False) -> np.ndarray:
    """Return ``value`` as a float array after checking it is finite and in the stated domain."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} must be a number or an array of numbers; got {value!r}") from exc
    if arr.size == 0:
        raise DomainError(f"{name} is empty; give at least one value")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise DomainError(f"{name} must be finite; got {first_bad(arr, bad)!r}{bad_position(arr, bad)}")
    if positive:
        bad = arr <= 0.0
        if bad.any():
            raise DomainError(f"{name} must be > 0; got {first_bad(arr, bad)!r}{bad_position(arr, bad)}")
    if nonnegative:
        bad = arr < 0.0
        if bad.any():
            raise DomainError(f"{name} must be >= 0; got {first_bad(arr, bad)!r}{bad_position(arr, bad)}")
    if fraction:
        bad = (arr < 0.0) | (arr > 1.0)
        if bad.any():
            raise DomainError(f"{name} must be a fraction in [0, 1]; got {first_bad(arr, bad)!r}"
                              f"{bad_position(arr, bad)}")
    return arr


def checked_counts(name: str, value: ArrayLike, *, minimum: int = 1) -> np.ndarray:
    """Return ``value`` as an array of whole counts >= ``minimum`` (devices, ranks, layers)."""
    arr = checked_values(name, value)
    bad = (arr != np.round(arr)) | (arr < minimum)
    if bad.any():
        raise DomainError(f"{name} must be a whole number >= {minimum}; got {first_bad(arr, bad)!r}"
                          f"{bad_position(arr, bad)}")
    return arr


def first_bad(arr: np.ndarray, bad: np.ndarray) -> float:
    return float(arr[bad].flat[0]) if arr.ndim else float(arr)


def bad_position(arr: np.ndarray, bad: np.ndarray) -> str:
    if arr.ndim == 0:
        return ""
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    n = int(bad.sum())
    return f" at index {idx[0] if len(idx) == 1 else idx} ({n} bad value{'s' if n > 1 else ''})"


def scalar_or_array(arr: np.ndarray) -> FloatOrArray:
    """Return a float for a 0-d result, the array otherwise."""
    return float(arr) if np.ndim(arr) == 0 else arr


def at_most_one(name: str, arr: np.ndarray, hint: str) -> np.ndarray:
    """Refuse a utilization above one; it means a numerator or denominator is wrong."""
    bad = arr > 1.0 + UNIT_SLACK
    if bad.any():
        raise DomainError(f"{name} = {first_bad(arr, bad):.4g} exceeds 1{bad_position(arr, bad)}: {hint}")
    return arr
