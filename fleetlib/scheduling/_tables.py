"""Input normalisation of the scheduling sweep: canonical tables -> int64 arrays per pool.

Shared by :mod:`fleetlib.scheduling.goodput` (the partition) and :mod:`fleetlib.scheduling.views`
(the derived tables); private to the rung.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Window
from fleetlib.quality import DomainError
from fleetlib.scheduling.records import _require_columns, times_ns
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    RESERVATION_COLUMNS,
)

_NAT = np.iinfo(np.int64).min
#: Rows per block of the allocation-time check (int64 temporaries that stay in cache).
_CHECK_BLOCK = 1 << 16


# ---------------------------------------------------------------------------------------------------
# Input normalisation
# ---------------------------------------------------------------------------------------------------


def _pool_names(*columns: pd.Series | None) -> pd.Index:
    names: list[str] = []
    for col in columns:
        if col is None or len(col) == 0:
            continue
        if isinstance(col.dtype, pd.CategoricalDtype):
            codes = col.cat.codes.to_numpy()
            used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(col.cat.categories)))
            names.extend(str(col.cat.categories[i]) for i in used.tolist())
        else:
            names.extend(str(x) for x in pd.unique(col.dropna()))
    return pd.Index(sorted(set(names)), dtype=object)


def _pool_codes(col: pd.Series, names: pd.Index, *, compact: bool = False) -> np.ndarray:
    """Codes of ``col`` in ``names``: int64, or with ``compact`` the narrowest signed type that fits."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = pd.Index([str(x) for x in col.cat.categories], dtype=object)
        dtype = (np.int8 if len(names) < 127 else np.int16 if len(names) < 32767 else np.int32) if compact \
            else np.int64
        mapping = np.append(names.get_indexer(cats), -1).astype(dtype)  # the last entry serves code -1
        out = mapping[col.cat.codes.to_numpy()]
    else:
        codes, uniques = pd.factorize(col, use_na_sentinel=True)
        mapping = np.append(names.get_indexer(pd.Index([str(x) for x in uniques], dtype=object)), -1)
        out = mapping[np.where(codes < 0, len(uniques), codes)].astype(np.int64)
    if out.size and out.min() < 0:
        raise DomainError("a row has no pool; validate the tables first (fleetlib.scheduling.records)")
    return out


def _counts(col: pd.Series, name: str) -> np.ndarray:
    if col.dtype.kind in "iu":
        vals = col.to_numpy(dtype=np.int64)
        if vals.size and vals.min() < 0:
            raise DomainError(f"{name} must hold non-negative integer device counts; validate the table "
                              "first (fleetlib.scheduling.records)")
        return vals
    arr = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(np.floor(arr) != arr):
        raise DomainError(f"{name} must hold non-negative integer device counts; validate the table first "
                          "(fleetlib.scheduling.records)")
    return arr.astype(np.int64)


def _as_window(window: Any, default: tuple[int, int] | None) -> tuple[int, int, Window]:
    if window is None:
        if default is None:
            raise DomainError("no capacity rows: scheduling goodput needs the pool's in-service capacity "
                              "(a capacity table, or an occupancy table)")
        w0, w1 = default
        win = Window.between(pd.Timestamp(w0, unit="ns", tz="UTC"), pd.Timestamp(w1, unit="ns", tz="UTC"))
    else:
        win = Window.parse(window)  # a Window, a (start, end) pair or 'START/END' text
        if win is None or win.is_nominal:
            raise DomainError("scheduling goodput from records needs a measured window (Window.between)")
    assert win.start is not None and win.end is not None
    w0 = int(win.start.as_unit("ns").value)
    w1 = int(win.end.as_unit("ns").value)
    return w0, w1, win


def _clip(t: np.ndarray, w0: int, w1: int) -> np.ndarray:
    return np.clip(t, w0, w1) - w0


@dataclass
class _Tables:
    """Canonical tables reduced to int64 arrays over one window."""

    names: pd.Index
    w0: int
    w1: int
    window: Window
    cap: dict[str, np.ndarray] | None
    alloc: dict[str, np.ndarray] | None
    queue: dict[str, np.ndarray] | None
    res: dict[str, np.ndarray] | None
    occ: dict[str, np.ndarray] | None


def _interval_arrays(df: pd.DataFrame, names: pd.Index, counts: Sequence[str],
                     table: str) -> dict[str, np.ndarray]:
    out = {"pool": _pool_codes(df["pool"], names),
           "start": times_ns(df["start"], file=f"<{table}>", field="start"),
           "end": times_ns(df["end"], file=f"<{table}>", field="end")}
    if np.any(out["start"] == _NAT) or np.any(out["end"] == _NAT) or np.any(out["end"] < out["start"]):
        raise DomainError(f"the {table} table has missing or reversed interval bounds; validate it first")
    for c in counts:
        out[c] = _counts(df[c], f"{table}.{c}")
    return out


def _check_alloc_times(a: dict[str, np.ndarray]) -> bool:
    """Check the allocation times block by block; return True when every row got devices.

    Raises
    ------
    DomainError
        Missing submit or release times, a gang-complete time missing on an assigned row (or given
        on a row never assigned), or times out of order.
    """
    missing = gc_mismatch = out_of_order = False
    every_assigned = True
    n = int(a["release"].size)
    for lo, hi in ((lo, min(lo + _CHECK_BLOCK, n)) for lo in range(0, n, _CHECK_BLOCK)):
        sub, fa, gc, rel = (a[k][lo:hi] for k in ("submit", "first_assigned", "gang_complete", "release"))
        assigned = fa != _NAT
        every_assigned = every_assigned and bool(assigned.all())
        missing = missing or bool(np.any(rel == _NAT)) or bool(np.any(sub == _NAT))
        no_gc = gc == _NAT
        gc_mismatch = gc_mismatch or bool(np.any(assigned & no_gc)) or bool(np.any(~assigned & ~no_gc))
        reversed_ = (gc < fa) | (rel < gc)
        out_of_order = out_of_order or bool(np.any(assigned & reversed_)) or bool(np.any(rel < sub))
    if missing:
        raise DomainError("allocations with a missing submit or release time: validate the table first "
                          "(validate_allocations(..., open_end=...))")
    if gc_mismatch:
        raise DomainError("allocations with first_assigned but no gang_complete (or the reverse): "
                          "validate the table first; rigid gangs are inferred there, elastic ones "
                          "refused")
    if out_of_order:
        raise DomainError("allocation times out of order (first_assigned <= gang_complete <= release "
                          "expected): validate the table first")
    return every_assigned


def _prepare(allocations: pd.DataFrame | None, capacity: pd.DataFrame | None, queue: pd.DataFrame | None,
             reservations: pd.DataFrame | None, occupancy: pd.DataFrame | None, window: Any, *,
             need_capacity: bool = True) -> _Tables:
    if occupancy is not None:
        if allocations is not None or capacity is not None:
            raise DomainError("give either allocations with capacity, or an occupancy table -- not both")
        _require_columns(occupancy, OCCUPANCY_COLUMNS, "<occupancy>", "occupancy")
        names = _pool_names(occupancy["pool"])
        occ = _interval_arrays(occupancy, names, OCCUPANCY_COLUMNS[3:], "occupancy")
        default = (int(occ["start"].min()), int(occ["end"].max())) if len(occupancy) else None
        w0, w1, win = _as_window(window, default)
        return _Tables(names, w0, w1, win, None, None, None, None, occ)
    if capacity is None:
        if need_capacity or allocations is None:
            raise DomainError("scheduling goodput needs a capacity table (in-service devices per pool over "
                              "time) with the allocations, or an occupancy table")
        capacity = pd.DataFrame({c: pd.Series([], dtype=object) for c in CAPACITY_COLUMNS})
        capacity["start"] = capacity["end"] = pd.Series([], dtype="datetime64[ns, UTC]")
        capacity["devices_in_service"] = capacity["devices_out_of_service"] = pd.Series([], dtype=np.int64)
    _require_columns(capacity, CAPACITY_COLUMNS, "<capacity>", "capacity")
    if allocations is not None:
        _require_columns(allocations, ALLOCATION_COLUMNS, "<allocations>", "allocations")
    if queue is not None:
        _require_columns(queue, QUEUE_COLUMNS, "<queue>", "queue")
    if reservations is not None:
        _require_columns(reservations, RESERVATION_COLUMNS, "<reservations>", "reservations")
    names = _pool_names(capacity["pool"], None if allocations is None else allocations["pool"],
                        None if queue is None else queue["pool"],
                        None if reservations is None else reservations["pool"])
    cap = _interval_arrays(capacity, names, CAPACITY_COLUMNS[3:], "capacity")
    alloc = None
    if allocations is not None:
        a = {c: times_ns(allocations[c], file="<allocations>", field=c)
             for c in ("submit", "first_assigned", "gang_complete", "release")}
        a["pool"] = _pool_codes(allocations["pool"], names, compact=True)
        a["devices"] = _counts(allocations["devices"], "allocations.devices")
        a["requested"] = _counts(allocations["requested_devices"], "allocations.requested_devices")
        every_assigned = _check_alloc_times(a)
        # hold devices and the end of the pending interval (views when every row got devices)
        if every_assigned:
            a["hold"] = a["devices"]
            a["pend_end"] = a["gang_complete"]
        else:
            assigned = a["first_assigned"] != _NAT
            a["hold"] = np.where(assigned, a["devices"], 0)
            a["first_assigned"] = np.where(assigned, a["first_assigned"], a["release"])
            a["pend_end"] = np.where(assigned, a["gang_complete"], a["release"])
            a["gang_complete"] = np.where(assigned, a["gang_complete"], a["release"])
        alloc = a
    if len(capacity):
        default: tuple[int, int] | None = (int(cap["start"].min()), int(cap["end"].max()))
    elif alloc is not None and len(alloc["submit"]) and not need_capacity:
        default = (int(alloc["submit"].min()), int(alloc["release"].max()))
        if default[1] <= default[0]:
            default = None
    else:
        default = None
    w0, w1, win = _as_window(window, default)
    q = None if queue is None else _interval_arrays(queue, names, QUEUE_COLUMNS[3:], "queue")
    r = None if reservations is None else _interval_arrays(reservations, names, ("devices",), "reservations")
    return _Tables(names, w0, w1, win, cap, alloc, q, r, None)
