"""The scheduling sweep's primitives: prepared tables, sorted events and interval sets.

The partition (:mod:`fleetlib.scheduling.goodput`) and the derived tables
(:mod:`fleetlib.scheduling.views`) both work on the same int64 form of the records and the same
few vectorised operations, kept here once:

* :func:`prepare` checks the canonical tables and reduces them to int64 arrays per pool over one
  window (:class:`PreparedTables`): pool codes (:func:`pool_names`, :func:`pool_codes`), device
  counts (:func:`device_counts`), times in nanoseconds and the window (:func:`as_window`, :func:`clip`);
* :func:`sort_events` orders signed step changes (:class:`EventBlock`) by pool, time and code in one
  sort; :func:`segments` gives the stretches between consecutive events of a pool;
* interval sets: :func:`masked_runs` merges contiguous masked segments, :func:`union` makes sorted
  disjoint intervals, :func:`coverage` and :func:`inside` measure and test against them, and
  :func:`wsum` sums weights per pool.

Times are int64 nanoseconds (:data:`NAT` for a missing one); device-seconds are float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import excerpt
from fleetlib.accounting import Window
from fleetlib.quality import DomainError
from fleetlib.scheduling.records import times_ns
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    RESERVATION_COLUMNS,
    require_columns,
)

__all__ = [
    "NAT",
    "NS",
    "EventBlock",
    "PreparedTables",
    "as_window",
    "clip",
    "coverage",
    "device_counts",
    "inside",
    "masked_runs",
    "pool_codes",
    "pool_names",
    "prepare",
    "segments",
    "sort_events",
    "union",
    "wsum",
]

#: Missing time (NaT) as int64 nanoseconds.
NAT = np.iinfo(np.int64).min
#: Nanoseconds per second.
NS = 1_000_000_000
#: Rows per block of the allocation-time check (int64 temporaries that stay in cache).
_CHECK_BLOCK = 1 << 16


# ---------------------------------------------------------------------------------------------------
# The prepared tables: canonical tables -> int64 arrays per pool over one window
# ---------------------------------------------------------------------------------------------------


def pool_names(*columns: pd.Series | None) -> pd.Index:
    """Return the sorted pool names used in any of ``columns`` (None or empty columns skipped).

    Parameters
    ----------
    *columns
        ``pool`` columns of the canonical tables (categorical or not).

    Returns
    -------
    pandas.Index
        The names as text, sorted: position i is pool code i.
    """
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


def pool_codes(col: pd.Series, names: pd.Index, *, compact: bool = False) -> np.ndarray:
    """Return the codes of ``col`` in ``names`` (int64; with ``compact`` the narrowest signed type).

    Raises
    ------
    DomainError
        A row without a pool.
    """
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


def device_counts(col: pd.Series, name: str) -> np.ndarray:
    """Return a column of device counts as int64.

    Parameters
    ----------
    col
        The column (integers, or floats that hold whole numbers).
    name
        ``table.column``, for the error.

    Raises
    ------
    DomainError
        A negative, missing or fractional count.
    """
    if col.dtype.kind in "iu":
        if col.dtype.kind == "u" and col.size and int(col.max()) >= 2**63:
            _bad_count(col, name, col.to_numpy() >= 2**63)
        vals = col.to_numpy(dtype=np.int64)
        if vals.size and vals.min() < 0:
            _bad_count(col, name, vals < 0)
        return vals
    arr = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(arr) | (arr < 0) | (np.floor(arr) != arr) | (arr >= 2.0**63)
    if bad.any():
        _bad_count(col, name, bad)
    return arr.astype(np.int64)


def _bad_count(col: pd.Series, name: str, bad: np.ndarray) -> None:
    """Raise the error naming the first row of ``col`` that holds no device count, and its value."""
    i = int(np.flatnonzero(bad)[0])
    raise DomainError(f"{name} must hold non-negative integer device counts: row {i} (index "
                      f"{excerpt(col.index[i], 24)}) holds {excerpt(col.iloc[i], 24)} (of {int(bad.sum()):,} "
                      "such rows); read the records through a reader, or validate the table first "
                      "(fleetlib.scheduling.records)")


def as_window(window: Any, default: tuple[int, int] | None) -> tuple[int, int, Window]:
    """Return the window as int64 nanosecond bounds ``(w0, w1)`` and as a :class:`Window`.

    Parameters
    ----------
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes, or None for ``default``.
    default
        ``(w0, w1)`` in nanoseconds (the span of the capacity records), or None when there is none.

    Raises
    ------
    DomainError
        No window and no default, or a nominal window.
    """
    if window is None:
        if default is None:
            raise DomainError("no capacity rows: no node list, capacity or occupancy table was read, or "
                              "every row of it was rejected (see the ledger); scheduling goodput needs the "
                              "pool's in-service capacity: add the node list (sinfo, machine spec ...) or "
                              "give --capacity GPUS and a window")
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


def clip(t: np.ndarray, w0: int, w1: int) -> np.ndarray:
    """Return nanosecond times clipped to ``[w0, w1]`` and counted from ``w0``."""
    return np.clip(t, w0, w1) - w0


@dataclass
class PreparedTables:
    """Canonical tables reduced to int64 arrays over one window (what :func:`prepare` returns).

    ``names`` are the pools (position = pool code); ``w0``, ``w1`` the window in nanoseconds; each
    table present is a dict of arrays: ``pool`` codes, times in absolute nanoseconds and counts
    (allocations also carry ``hold``, the devices a row holds, and ``pend_end``, the end of its
    pending interval).
    """

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
    out = {"pool": pool_codes(df["pool"], names),
           "start": times_ns(df["start"], file=f"<{table}>", field="start"),
           "end": times_ns(df["end"], file=f"<{table}>", field="end")}
    if np.any(out["start"] == NAT) or np.any(out["end"] == NAT) or np.any(out["end"] < out["start"]):
        raise DomainError(f"the {table} table has missing or reversed interval bounds; validate it first")
    for c in counts:
        out[c] = device_counts(df[c], f"{table}.{c}")
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
        assigned = fa != NAT
        every_assigned = every_assigned and bool(assigned.all())
        missing = missing or bool(np.any(rel == NAT)) or bool(np.any(sub == NAT))
        no_gc = gc == NAT
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


def prepare(allocations: pd.DataFrame | None, capacity: pd.DataFrame | None, queue: pd.DataFrame | None,
            reservations: pd.DataFrame | None, occupancy: pd.DataFrame | None, window: Any, *,
            need_capacity: bool = True) -> PreparedTables:
    """Check the canonical tables and reduce them to int64 arrays per pool over one window.

    Parameters
    ----------
    allocations, capacity, queue, reservations, occupancy
        Validated canonical tables (see :mod:`fleetlib.scheduling.records`); either an occupancy
        table alone, or capacity with any of the others.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; None: the span of the capacity (or
        occupancy) rows, or without ``need_capacity`` the allocations' span.
    need_capacity
        False lets allocations come without capacity (the derived queue).

    Returns
    -------
    PreparedTables

    Raises
    ------
    DomainError
        Missing columns, missing capacity, tables that fail the structural checks.
    """
    if occupancy is not None:
        if allocations is not None or capacity is not None:
            raise DomainError("give either allocations with capacity, or an occupancy table -- not both")
        require_columns(occupancy, OCCUPANCY_COLUMNS, "<occupancy>", "occupancy")
        names = pool_names(occupancy["pool"])
        occ = _interval_arrays(occupancy, names, OCCUPANCY_COLUMNS[3:], "occupancy")
        default = (int(occ["start"].min()), int(occ["end"].max())) if len(occupancy) else None
        w0, w1, win = as_window(window, default)
        return PreparedTables(names, w0, w1, win, None, None, None, None, occ)
    if capacity is None:
        if need_capacity or allocations is None:
            raise DomainError("scheduling goodput needs a capacity table (in-service devices per pool over "
                              "time) with the allocations, or an occupancy table")
        capacity = pd.DataFrame({c: pd.Series([], dtype=object) for c in CAPACITY_COLUMNS})
        capacity["start"] = capacity["end"] = pd.Series([], dtype="datetime64[ns, UTC]")
        capacity["devices_in_service"] = capacity["devices_out_of_service"] = pd.Series([], dtype=np.int64)
    require_columns(capacity, CAPACITY_COLUMNS, "<capacity>", "capacity")
    if allocations is not None:
        require_columns(allocations, ALLOCATION_COLUMNS, "<allocations>", "allocations")
    if queue is not None:
        require_columns(queue, QUEUE_COLUMNS, "<queue>", "queue")
    if reservations is not None:
        require_columns(reservations, RESERVATION_COLUMNS, "<reservations>", "reservations")
    names = pool_names(capacity["pool"], None if allocations is None else allocations["pool"],
                        None if queue is None else queue["pool"],
                        None if reservations is None else reservations["pool"])
    cap = _interval_arrays(capacity, names, CAPACITY_COLUMNS[3:], "capacity")
    alloc = None
    if allocations is not None:
        a = {c: times_ns(allocations[c], file="<allocations>", field=c)
             for c in ("submit", "first_assigned", "gang_complete", "release")}
        a["pool"] = pool_codes(allocations["pool"], names, compact=True)
        a["devices"] = device_counts(allocations["devices"], "allocations.devices")
        a["requested"] = device_counts(allocations["requested_devices"], "allocations.requested_devices")
        every_assigned = _check_alloc_times(a)
        # hold devices and the end of the pending interval (views when every row got devices)
        if every_assigned:
            a["hold"] = a["devices"]
            a["pend_end"] = a["gang_complete"]
        else:
            assigned = a["first_assigned"] != NAT
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
    w0, w1, win = as_window(window, default)
    q = None if queue is None else _interval_arrays(queue, names, QUEUE_COLUMNS[3:], "queue")
    r = None if reservations is None else _interval_arrays(reservations, names, ("devices",), "reservations")
    return PreparedTables(names, w0, w1, win, cap, alloc, q, r, None)


# ---------------------------------------------------------------------------------------------------
# Events: one sort of packed (pool, time, code, magnitude) keys
# ---------------------------------------------------------------------------------------------------


@dataclass
class EventBlock:
    """Events of one kind for :func:`sort_events`: pools, absolute nanosecond times, a code, magnitudes.

    ``pool`` and ``mag`` are arrays as long as ``t``, or one value for every event.
    """

    pool: np.ndarray | int
    t: np.ndarray  # absolute ns
    code: int
    mag: np.ndarray | int


def sort_events(blocks: list[EventBlock], w0: int, w1: int, n_pools: int, n_codes: int, *,
                force_argsort: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sort events by (pool, time, code); return pool, time (ns from w0), code and magnitude arrays.

    Each event is packed into one int64 key (pool, time in the coarsest exact unit, code,
    magnitude) and the keys sorted once; when the key would need more than 63 bits (or with
    ``force_argsort``) the columns are ordered with ``numpy.lexsort`` instead (same result).
    """
    blocks = [b for b in blocks if np.size(b.t)]
    sizes = [int(np.size(b.t)) for b in blocks]
    total = sum(sizes)
    if total == 0:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e, e
    trel = [clip(b.t, w0, w1) for b in blocks]
    mags = [np.broadcast_to(np.asarray(b.mag, dtype=np.int64), (s,))
            for b, s in zip(blocks, sizes, strict=True)]
    unit = 1
    for u in (NS, 1_000_000, 1_000):
        if not any(np.any(tr % u) for tr in trel):
            unit = u
            break
    bt = int((w1 - w0) // unit).bit_length()
    bm = max(int(max(int(m.max()) if m.size else 0 for m in mags)).bit_length(), 1)
    bc = max((n_codes - 1).bit_length(), 1)
    bp = max((n_pools - 1).bit_length(), 1)
    if not force_argsort and bt + bm + bc + bp <= 63:
        sc, st = bm, bm + bc
        sp = st + bt
        key = np.empty(total, dtype=np.int64)
        pos = 0
        for b, tr, m, s in zip(blocks, trel, mags, sizes, strict=True):
            seg = key[pos:pos + s]
            np.floor_divide(tr, unit, out=seg)
            seg <<= st
            seg |= (np.asarray(b.pool, dtype=np.int64) << sp) | (b.code << sc)
            seg |= m
            pos += s
        key.sort()
        pool = key >> sp
        t = ((key >> st) & ((1 << bt) - 1)) * unit
        code = (key >> sc) & ((1 << bc) - 1)
        mag = key & ((1 << bm) - 1)
        return pool, t, code, mag
    pool = np.concatenate([np.broadcast_to(np.asarray(b.pool, dtype=np.int64), (s,))
                           for b, s in zip(blocks, sizes, strict=True)])
    t = np.concatenate(trel)
    code = np.concatenate([np.full(s, b.code, dtype=np.int64) for b, s in zip(blocks, sizes, strict=True)])
    mag = np.concatenate(mags)
    order = np.lexsort((mag, code, t, pool))
    return pool[order], t[order], code[order], mag[order]


def segments(pool: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segments between consecutive events of one pool: (pool, start, duration) with zero across pools."""
    if pool.size == 0:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e
    dt = np.diff(t)
    dt[pool[1:] != pool[:-1]] = 0
    return pool[:-1], t[:-1], dt


# ---------------------------------------------------------------------------------------------------
# Interval-set helpers (union across pools, coverage)
# ---------------------------------------------------------------------------------------------------


def masked_runs(pool: np.ndarray, start: np.ndarray, dur: np.ndarray, mask: np.ndarray, *,
          with_pool: bool = False) -> Any:
    """Merge contiguous masked segments of one pool into runs; return (starts, ends[, pools])."""
    idx = np.flatnonzero(mask & (dur > 0))
    if idx.size == 0:
        e = np.zeros(0, dtype=np.int64)
        return (e, e, e) if with_pool else (e, e)
    s, e, p = start[idx], start[idx] + dur[idx], pool[idx]
    new = np.r_[True, (p[1:] != p[:-1]) | (s[1:] != e[:-1])]
    last = np.r_[new[1:], True]
    return (s[new], e[last], p[new]) if with_pool else (s[new], e[last])


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted disjoint (starts, ends); touching intervals merge."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    cm = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > cm[:-1]]
    last = np.r_[new[1:], True]
    return s[new], cm[last]


def coverage(us: np.ndarray, ue: np.ndarray, t: np.ndarray, before: np.ndarray | None = None) -> np.ndarray:
    """Measure of the union of sorted disjoint intervals ``[us, ue)`` inside ``[-inf, t)``.

    ``before`` (optional) is ``[0, cumsum(ue - us)]``, for callers that query the same set often.
    """
    if us.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    length = ue - us
    if before is None:
        before = np.concatenate(([0], np.cumsum(length)))
    k = np.searchsorted(us, t, side="right") - 1
    kk = np.maximum(k, 0)
    c = before[kk] + np.clip(t - us[kk], 0, length[kk])
    return np.where(k < 0, 0, c)


def inside(us: np.ndarray, ue: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Return True where ``t`` lies in the union of sorted disjoint intervals ``[us, ue)``."""
    if us.size == 0:
        return np.zeros(t.shape, dtype=bool)
    k = np.searchsorted(us, t, side="right") - 1
    return (k >= 0) & (t < ue[np.maximum(k, 0)])


def wsum(codes: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    """Return the sum of ``weights`` per code ``0 .. n - 1`` (float64)."""
    if codes.size == 0:
        return np.zeros(n)
    return np.bincount(codes, weights=weights, minlength=n)[:n].astype(float)
