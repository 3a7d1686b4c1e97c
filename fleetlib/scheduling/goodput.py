"""Scheduling goodput: an exact partition of in-service capacity-time, from scheduler records.

Over a window ``[start, end)`` and for each pool, in-service capacity-time splits into

=====================  ===========================================================================
``held_device_s``      device-time held by complete allocations (``gang_complete -> release``): the
                       numerator of scheduling goodput S and the denominator of runtime goodput
``partial_gang_hold``  device-time held by gangs still waiting for members
                       (``first_assigned -> gang_complete``)
``reservation``        free devices kept idle for a waiting gang (recorded reservations)
``idle_with_queue``    free devices while the pool had pending GPU jobs: a scheduling-policy loss
                       (placement, quota, fragmentation)
``idle_empty_queue``   free devices while the pool's queue was empty: a demand (capacity-planning)
                       loss
``unattributed``       whatever the named parts do not explain; negative when allocations and
                       reservations exceed in-service capacity (a data problem that is also
                       flagged, never clipped)
=====================  ===========================================================================

so ``capacity = held + partial_gang_hold + reservation + idle_with_queue + idle_empty_queue +
unattributed`` exactly, and ``S = held / capacity``.  The cross-pool view splits the same idle
device-time by whether *any* pool had pending GPU work (what quota lending between pools could
recover); its two idle parts sum to the per-pool ones.  Out-of-service devices are not in the
denominator; they are reported as availability (in-service / installed).  The installed-capacity
denominator is an explicit option (``denominator="installed"``), which adds an ``out_of_service``
loss.

How the sweep works (vectorised, one sort): every interval boundary inside the window becomes an
event that changes a pool's free devices (in-service minus held, partial and reserved) or its
pending jobs by a signed amount.  Each event is packed into one int64 key -- ``pool | time |
pending change | free change``, the time counted in the coarsest exact unit (second, millisecond,
microsecond or nanosecond) -- so one ``numpy.sort`` orders all events and cumulative sums of the
decoded changes give the pool's free devices and pending jobs between consecutive events.  When the
key would need more than 63 bits the events are ordered with ``numpy.lexsort`` instead (same
result, slower).  The held, partial, reserved and capacity integrals are direct sums over rows; only
the idle split needs the sweep, and the cross-pool view adds one union of the pools' pending
intervals.  Times are int64 nanoseconds; device-seconds are float64, exact for whole-second records
up to 2**53 device-seconds.

A job's own queue wait is not a loss here: it lowers S only through the idle device-time it
coincides with (:func:`queue_waits` splits each wait into the part spent while the pool had free
devices and the part spent while every device was taken).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, Ledger
from fleetlib.scheduling.records import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    RESERVATION_COLUMNS,
    _require_columns,
    times_ns,
)

__all__ = [
    "DEFAULT_COHORT_EDGES",
    "LOSS_KEYS",
    "PARTITION_COLUMNS",
    "SILENT_CHANNELS",
    "SchedulingPartition",
    "cohort_goodput",
    "derive_queue",
    "fragmentation_index",
    "goodput_timeseries",
    "held_time",
    "occupancy",
    "queue_waits",
    "scheduling_goodput",
    "scheduling_partition",
    "scheduling_summary",
    "silent_stretches",
    "stranded_devices",
]

Denominator = Literal["in_service", "installed"]
IdleView = Literal["pool", "cross_pool"]

#: Loss keys of the scheduling partition, in the order a report shows them.
LOSS_KEYS: tuple[str, ...] = ("partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue",
                              "unattributed")

#: Columns of :attr:`SchedulingPartition.table` (device-seconds, one row per pool).
PARTITION_COLUMNS: tuple[str, ...] = (
    "capacity_device_s", "installed_device_s", "out_of_service_device_s", "held_device_s",
    "partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue", "unattributed",
    "cross_pool_idle_with_queue", "cross_pool_idle_empty_queue", "over_allocated_device_s",
)

#: Upper bounds (devices, inclusive) of the default job-size cohorts: 1, 2-8, 9-64, 65-512, >512.
DEFAULT_COHORT_EDGES: tuple[int, ...] = (1, 8, 64, 512)

_NAT = np.iinfo(np.int64).min
_NS = 1_000_000_000
#: Elements per block of the blocked passes: int64 temporaries of 512 KiB that stay in cache and that
#: the allocator reuses, instead of fresh full-length arrays (each a new mapping whose every page is
#: a page fault when first touched).  Measured on 10 M allocations: 2**16 beat 2**18 to 2**22.
_BLOCK = 1 << 16


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
    elif isinstance(window, Window):
        if window.is_nominal:
            raise DomainError("scheduling goodput from records needs a measured window (Window.between)")
        win = window
    elif isinstance(window, Sequence) and not isinstance(window, str) and len(window) == 2:
        win = Window.between(window[0], window[1])
    else:
        raise DomainError(f"window must be a Window or a (start, end) pair; got {window!r}")
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
    for lo, hi in _blocks(int(a["release"].size)):
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


# ---------------------------------------------------------------------------------------------------
# The sweep: one sort of packed events
# ---------------------------------------------------------------------------------------------------


@dataclass
class _Block:
    pool: np.ndarray | int
    t: np.ndarray  # absolute ns
    code: int
    mag: np.ndarray | int


def _sort_events(blocks: list[_Block], w0: int, w1: int, n_pools: int, n_codes: int, *,
                 force_argsort: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sort events by (pool, time, code); return pool, time (ns from w0), code and magnitude arrays."""
    blocks = [b for b in blocks if np.size(b.t)]
    sizes = [int(np.size(b.t)) for b in blocks]
    total = sum(sizes)
    if total == 0:
        e = np.zeros(0, dtype=np.int64)
        return e, e, e, e
    trel = [_clip(b.t, w0, w1) for b in blocks]
    mags = [np.broadcast_to(np.asarray(b.mag, dtype=np.int64), (s,))
            for b, s in zip(blocks, sizes, strict=True)]
    unit = 1
    for u in (_NS, 1_000_000, 1_000):
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


def _segments(pool: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _runs(pool: np.ndarray, start: np.ndarray, dur: np.ndarray, mask: np.ndarray, *,
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


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted disjoint (starts, ends); touching intervals merge."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    cm = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > cm[:-1]]
    last = np.r_[new[1:], True]
    return s[new], cm[last]


def _coverage(us: np.ndarray, ue: np.ndarray, t: np.ndarray, before: np.ndarray | None = None) -> np.ndarray:
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


def _inside(us: np.ndarray, ue: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Return True where ``t`` lies in the union of sorted disjoint intervals ``[us, ue)``."""
    if us.size == 0:
        return np.zeros(t.shape, dtype=bool)
    k = np.searchsorted(us, t, side="right") - 1
    return (k >= 0) & (t < ue[np.maximum(k, 0)])


def _wsum(codes: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    if codes.size == 0:
        return np.zeros(n)
    return np.bincount(codes, weights=weights, minlength=n)[:n].astype(float)


def _blocks(n: int, size: int | None = None) -> Iterator[tuple[int, int]]:
    """Consecutive ``[lo, hi)`` ranges of at most ``size`` elements covering ``range(n)``."""
    step = size or _BLOCK
    return ((lo, min(lo + step, n)) for lo in range(0, n, step))


# ---------------------------------------------------------------------------------------------------
# The partition
# ---------------------------------------------------------------------------------------------------

#: One block of segments of the sweep: pool, start, duration, free devices, pending jobs.
_Segs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _merge_runs(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Join the per-block runs of :func:`_runs` into the runs of the whole sequence of segments."""
    parts = [p for p in parts if p[0].size]
    if not parts:
        e = np.zeros(0, dtype=np.int64)
        return e, e
    if len(parts) == 1:
        return parts[0][0], parts[0][1]
    s = np.concatenate([p[0] for p in parts])
    e = np.concatenate([p[1] for p in parts])
    p = np.concatenate([p[2] for p in parts])
    new = np.r_[True, (p[1:] != p[:-1]) | (s[1:] != e[:-1])]
    last = np.r_[new[1:], True]
    return s[new], e[last]


def _idle_split_blocks(blocks: Callable[[], Iterator[_Segs]], n: int, unit: int,
                       sweep: _Sweep | None = None) -> dict[str, Any]:
    """Split free device-time by the pool's and by any pool's queue state (times in ``unit`` ns).

    ``blocks()`` yields the segments (sorted by pool, then time) block by block.  The first pass
    makes the per-pool split and the pools' pending runs; the cross-pool split needs their union,
    so a second pass measures how much of each free segment with an empty own queue lies in it.
    With ``sweep``, the first pass keeps those segments in the part of the sorted keys it has
    already read (:meth:`_Sweep.stash`), and the second pass reads them back (:meth:`_Sweep.replay`)
    instead of decoding every event again.  Only block-sized temporaries are made.
    """
    per_s = _NS // unit  # time units per second (division keeps whole seconds exact)
    iq, pos_all, neg = np.zeros(n), np.zeros(n), np.zeros(n)
    first_over = np.full(n, _NAT, dtype=np.int64)
    runs = []
    for pool, start, dur, free, pend in blocks():
        dur_s = dur / per_s
        pos = np.maximum(free, 0) * dur_s
        queued = pend > 0
        iq += _wsum(pool, pos * queued, n)
        pos_all += _wsum(pool, pos, n)
        if free.size and free.min() < 0:
            neg += _wsum(pool, np.minimum(free, 0) * dur_s, n)
            over = np.flatnonzero((free < 0) & (dur > 0))
            if over.size:
                p_u, first = np.unique(pool[over], return_index=True)
                unset = first_over[p_u] == _NAT
                first_over[p_u[unset]] = start[over][first[unset]] * unit
        runs.append(_runs(pool, start, dur, queued, with_pool=True))
        if sweep is not None:
            sel = np.flatnonzero((free > 0) & ~queued & (dur > 0))
            sweep.stash(pool[sel], start[sel], start[sel] + dur[sel], free[sel])
    ie = pos_all - iq
    us, ue = _union(*_merge_runs(runs))
    before = np.concatenate(([0], np.cumsum(ue - us)))
    extra = np.zeros(n)
    second = blocks() if sweep is None else sweep.replay()
    for pool, start, dur, free, pend in second:
        if dur is None:  # kept by the first pass: pool, start, end and free of the selected segments
            sel_pool, s_sel, e_sel, sel_free = pool, start, free, pend
        else:
            sel = np.flatnonzero((free > 0) & (pend <= 0) & (dur > 0))
            sel_pool, s_sel, sel_free = pool[sel], start[sel], free[sel]
            e_sel = s_sel + dur[sel]
        if s_sel.size == 0:
            continue
        cov = _coverage(us, ue, e_sel, before) - _coverage(us, ue, s_sel, before)
        extra += _wsum(sel_pool, sel_free * (cov / per_s), n)
    return {"idle_with_queue": iq, "idle_empty_queue": ie, "sweep_negative": neg,
            "cross_pool_idle_with_queue": iq + extra, "cross_pool_idle_empty_queue": ie - extra,
            "first_over": first_over, "union": (us, ue)}


def _idle_split(pool: np.ndarray, start: np.ndarray, dur: np.ndarray, free: np.ndarray, pend: np.ndarray,
                n: int, unit: int) -> dict[str, Any]:
    """:func:`_idle_split_blocks` over segments given as whole arrays (one block)."""
    return _idle_split_blocks(lambda: iter([(pool, start, dur, free, pend)]), n, unit)


@dataclass
class _Delta:
    """Events that change the free devices and the pending jobs of a pool by signed amounts.

    ``mask`` (optional) keeps only the rows where it is True; ``sign`` multiplies the array-valued
    changes (so a release and an assignment can share one array of device counts).
    """

    pool: np.ndarray | int
    t: np.ndarray  # absolute ns
    free: np.ndarray | int
    pend: np.ndarray | int
    mask: np.ndarray | None = None
    sign: int = 1

    def count(self) -> int:
        """Return the number of events."""
        return int(np.size(self.t) if self.mask is None else np.count_nonzero(self.mask))

    def ranges(self) -> Iterator[tuple[int, int, np.ndarray | None]]:
        """Yield ``(lo, hi, mask)`` per block of rows that holds at least one event."""
        for lo, hi in _blocks(int(np.size(self.t))):
            m = None if self.mask is None else self.mask[lo:hi]
            if m is None or m.any():
                yield lo, hi, m

    def field(self, x: Any, lo: int, hi: int, signed: bool) -> Any:
        """Return a scalar field as is, an array field's rows ``[lo, hi)`` (negated when signed)."""
        if np.ndim(x) == 0:
            return int(x)
        x = x[lo:hi]
        return -x if signed and self.sign < 0 else x

    def abs_max(self, x: Any) -> int:
        """Return the largest absolute change of a field over the events."""
        if np.ndim(x) == 0:
            return abs(int(x))
        big = 0
        for lo, hi, m in self.ranges():
            v = x[lo:hi]
            big = max(big, int(np.max(v, where=m, initial=0)) if m is not None else int(v.max()),
                      -int(np.min(v, where=m, initial=0)) if m is not None else -int(v.min()))
        return big

    def divisible(self, unit: int) -> bool:
        """Return True when every event time is a multiple of ``unit`` ns."""
        for lo, hi, m in self.ranges():
            r = self.t[lo:hi] % unit
            if bool(np.any(r, where=m) if m is not None else r.any()):
                return False
        return True


_UNITS: tuple[int, ...] = (_NS, 1_000_000, 1_000, 1)


@dataclass
class _Sweep:
    """The sorted events of a sweep, decoded block by block into segments."""

    total: int
    unit: int
    key: np.ndarray | None = None  # packed path: sorted keys
    shifts: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)  # sp, st, bt, bf, bq, big_f
    big_p: int = 0
    decoded: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None  # fallback path
    _read_to: int = 0  # keys before this position are no longer needed by segments()
    _kept: list[tuple[int, int]] = field(default_factory=list)  # (offset, rows) of stashed blocks
    _spill: tuple[int, int, int] | None = None  # (block start, carried free, carried pending)
    _block: tuple[int, int, int] = (0, 0, 0)  # start and carries of the block being read

    def _decode(self, lo: int, hi: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Pool and time of events ``[lo, hi)``; free and pending changes of events ``[lo, b)``."""
        if self.decoded is not None:
            pool, t, dfree, dpend = self.decoded
            return pool[lo:hi], t[lo:hi], dfree[lo:b], dpend[lo:b]
        assert self.key is not None
        sp, st, bt, bf, bq, big_f = self.shifts
        k = self.key[lo:hi]
        pool = k >> sp
        t = k >> st
        t &= (1 << bt) - 1
        kb = k[:b - lo]
        dpend = kb >> bf
        dpend &= (1 << bq) - 1
        dpend -= self.big_p
        dfree = kb & ((1 << bf) - 1)
        dfree -= big_f
        return pool, t, dfree, dpend

    def segments(self) -> Iterator[_Segs]:
        """Yield the segments of positive duration between consecutive events of one pool, in order.

        A segment runs from an event to the next event of the same pool, with the free devices and
        pending jobs in force after the first event (cumulative sums carried across blocks).
        """
        yield from self._segments_from(0, 0, 0)

    def _segments_from(self, start: int, carry_f: int, carry_p: int) -> Iterator[_Segs]:
        for lo, b in _blocks(self.total - start):
            lo, b = lo + start, b + start
            self._block = (lo, carry_f, carry_p)
            hi = min(b + 1, self.total)
            pool, t, dfree, dpend = self._decode(lo, hi, b)
            free = np.cumsum(dfree)
            free += carry_f
            pend = np.cumsum(dpend)
            pend += carry_p
            carry_f, carry_p = int(free[-1]), int(pend[-1])
            m = hi - lo - 1  # segments that start in this block
            dt = t[1:] - t[:-1]
            dt[pool[1:] != pool[:-1]] = 0
            keep = np.flatnonzero(dt > 0)
            out = pool[:m][keep], t[:m][keep], dt[keep], free[:m][keep], pend[:m][keep]
            del pool, t, dfree, dpend, free, pend, dt, keep
            self._read_to = b  # the next block reads keys from b on
            yield out

    def stash(self, pool: np.ndarray, start: np.ndarray, end: np.ndarray, free: np.ndarray) -> None:
        """Keep four columns of the segments of the block just read, in the keys already read.

        When they do not fit (or there are no keys), the second pass decodes the events again from
        this block on.
        """
        if self._spill is not None:
            return
        off = self._kept[-1][0] + 4 * self._kept[-1][1] if self._kept else 0
        rows = int(pool.size)
        if self.key is None or off + 4 * rows > self._read_to:
            self._spill = self._block
            return
        view = self.key[off:off + 4 * rows].reshape(rows, 4)
        for j, col in enumerate((pool, start, end, free)):
            view[:, j] = col
        self._kept.append((off, rows))

    def replay(self) -> Iterator[tuple[Any, ...]]:
        """Yield the stashed blocks as ``(pool, start, None, end, free)``, then the segments of the rest."""
        assert self.key is not None or not self._kept
        for off, rows in self._kept:
            view = self.key[off:off + 4 * rows].reshape(rows, 4)  # type: ignore[index]
            yield view[:, 0], view[:, 1], None, view[:, 2], view[:, 3]
        if self._spill is not None:
            yield from self._segments_from(*self._spill)


def _sweep_free_pending(deltas: list[_Delta], w0: int, w1: int, n_pools: int, *,
                        force_argsort: bool = False) -> _Sweep:
    """Sort the events once; the returned :class:`_Sweep` yields the segments block by block.

    Each event is packed into one int64 key ``pool | time | pending delta | free delta`` (signed
    deltas stored with an offset), so one in-place ``numpy.sort`` of the keys orders the events; the
    cumulative sums of the decoded deltas give the free devices and pending jobs after each event.
    Keys are written and decoded in blocks, so besides the keys only block-sized arrays are made.
    The time unit is the coarsest of 1 s, 1 ms, 1 us, 1 ns dividing the window bounds and every
    event time.
    """
    deltas = [d for d in deltas if np.size(d.t)]
    sizes = [d.count() for d in deltas]
    deltas = [d for d, s in zip(deltas, sizes, strict=True) if s]
    sizes = [s for s in sizes if s]
    total = sum(sizes)
    if total == 0:
        return _Sweep(total=0, unit=1)
    k = next(i for i, u in enumerate(_UNITS) if not (w0 % u or w1 % u))
    for d in deltas:
        while k < len(_UNITS) - 1 and not d.divisible(_UNITS[k]):
            k += 1
    unit = _UNITS[k]
    big_f = max(d.abs_max(d.free) for d in deltas)
    big_p = max(d.abs_max(d.pend) for d in deltas)
    bf, bq = max((2 * big_f).bit_length(), 1), max((2 * big_p).bit_length(), 1)
    bt = int((w1 - w0) // unit).bit_length()
    bp = max((n_pools - 1).bit_length(), 1)
    if not force_argsort and bp + bt + bq + bf <= 63:
        st, sp = bq + bf, bq + bf + bt
        key = np.empty(total, dtype=np.int64)
        buf = np.empty(min(_BLOCK, total), dtype=np.int64)
        pos = 0
        for d in deltas:
            for lo, hi, m in d.ranges():
                # the keys of every row of the block, then only those of the events
                seg = buf[:hi - lo] if m is not None else key[pos:pos + hi - lo]
                np.maximum(d.t[lo:hi], w0, out=seg)
                np.minimum(seg, w1, out=seg)
                seg -= w0
                if unit > 1:
                    seg //= unit
                seg <<= st
                for x, off, shift, signed in ((d.pool, 0, sp, False), (d.pend, big_p, bf, True),
                                              (d.free, big_f, 0, True)):
                    v = d.field(x, lo, hi, signed)
                    if isinstance(v, int):
                        seg |= (v + off) << shift
                    else:
                        v = v.astype(np.int64)
                        if off:
                            v += off
                        if shift:
                            v <<= shift
                        seg |= v
                if m is not None:
                    cnt = int(np.count_nonzero(m))
                    np.compress(m, seg, out=key[pos:pos + cnt])
                    pos += cnt
                else:
                    pos += hi - lo
        assert pos == total
        key.sort()
        return _Sweep(total=total, unit=unit, key=key, shifts=(sp, st, bt, bf, bq, big_f), big_p=big_p)
    def cat(name: str) -> np.ndarray:
        parts = []
        for d in deltas:
            for lo, hi, m in d.ranges():
                v = d.t[lo:hi] if name == "t" else d.field(getattr(d, name), lo, hi, name != "pool")
                v = np.broadcast_to(np.asarray(v, dtype=np.int64), (hi - lo,))
                parts.append(v if m is None else v[m])
        return np.concatenate(parts)

    pool, dfree, dpend = cat("pool"), cat("free"), cat("pend")
    t = (np.clip(cat("t"), w0, w1) - w0) // unit
    order = np.lexsort((t, pool))
    return _Sweep(total=total, unit=unit, decoded=(pool[order], t[order], dfree[order], dpend[order]))


def _partition_arrays(tb: _Tables, *, force_argsort: bool = False) -> dict[str, Any]:
    n, w0, w1 = len(tb.names), tb.w0, tb.w1
    out: dict[str, Any] = {}
    if tb.occ is not None:
        o = tb.occ
        s, e = _clip(o["start"], w0, w1), _clip(o["end"], w0, w1)
        dur = e - s
        dur_s = dur / _NS
        out["capacity_device_s"] = _wsum(o["pool"], o["in_service"] * dur_s, n)
        out["out_of_service_device_s"] = _wsum(o["pool"], o["out_of_service"] * dur_s, n)
        out["held_device_s"] = _wsum(o["pool"], o["held_complete"] * dur_s, n)
        out["partial_gang_hold"] = _wsum(o["pool"], o["partial_gang"] * dur_s, n)
        out["reservation"] = _wsum(o["pool"], o["reserved"] * dur_s, n)
        free = o["in_service"] - o["held_complete"] - o["partial_gang"] - o["reserved"]
        order = np.lexsort((s, o["pool"]))
        out.update(_idle_split(o["pool"][order], s[order], dur[order], free[order],
                               o["pending_jobs"][order], n, 1))
        return out
    c = tb.cap
    assert c is not None
    cdur_s = (_clip(c["end"], w0, w1) - _clip(c["start"], w0, w1)) / _NS
    out["capacity_device_s"] = _wsum(c["pool"], c["devices_in_service"] * cdur_s, n)
    out["out_of_service_device_s"] = _wsum(c["pool"], c["devices_out_of_service"] * cdur_s, n)
    deltas = [_Delta(c["pool"], c["start"], c["devices_in_service"], 0),
              _Delta(c["pool"], c["end"], -c["devices_in_service"], 0)]
    a = tb.alloc
    if a is not None:
        held, part, hold_m, pend_m = _alloc_sums_and_masks(a, w0, w1, n, derive_queue=tb.queue is None)
        out["held_device_s"], out["partial_gang_hold"] = held, part
        # only rows that hold devices (or wait) inside the window make events
        deltas += [_Delta(a["pool"], a["first_assigned"], a["hold"], 0, mask=hold_m, sign=-1),
                   _Delta(a["pool"], a["release"], a["hold"], 0, mask=hold_m)]
        if tb.queue is None:
            deltas += [_Delta(a["pool"], a["submit"], 0, 1, mask=pend_m),
                       _Delta(a["pool"], a["pend_end"], 0, -1, mask=pend_m)]
    else:
        out["held_device_s"] = np.zeros(n)
        out["partial_gang_hold"] = np.zeros(n)
    if tb.queue is not None:
        q = tb.queue
        deltas += [_Delta(q["pool"], q["start"], 0, q["pending_jobs"]),
                   _Delta(q["pool"], q["end"], 0, -q["pending_jobs"])]
    if tb.res is not None:
        r = tb.res
        out["reservation"] = _wsum(r["pool"], r["devices"] * ((_clip(r["end"], w0, w1)
                                                               - _clip(r["start"], w0, w1)) / _NS), n)
        deltas += [_Delta(r["pool"], r["start"], -r["devices"], 0),
                   _Delta(r["pool"], r["end"], r["devices"], 0)]
    else:
        out["reservation"] = np.zeros(n)
    sweep = _sweep_free_pending(deltas, w0, w1, n, force_argsort=force_argsort)
    del deltas
    out.update(_idle_split_blocks(sweep.segments, n, sweep.unit, sweep))
    return out


def _alloc_sums_and_masks(a: dict[str, np.ndarray], w0: int, w1: int, n: int, *, derive_queue: bool
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Held and partial-gang device-seconds per pool, and which rows make hold and pending events.

    One blocked pass over the allocations: the window clipping, the products and the masks are
    made block by block.  A mask is returned as None when it keeps every row.
    """
    na = int(a["release"].size)
    held, part = np.zeros(n), np.zeros(n)
    hold_m = np.empty(na, dtype=bool)
    pend_m = np.empty(na, dtype=bool) if derive_queue else None
    for lo, hi in _blocks(na):
        pool, hold = a["pool"][lo:hi], a["hold"][lo:hi]
        fa_raw, gc_raw, rel_raw = (a[k][lo:hi] for k in ("first_assigned", "gang_complete", "release"))
        fa, gc, rel = _clip(fa_raw, w0, w1), _clip(gc_raw, w0, w1), _clip(rel_raw, w0, w1)
        held += _wsum(pool, hold * ((rel - gc) / _NS), n)
        part += _wsum(pool, hold * ((gc - fa) / _NS), n)
        hm = hold_m[lo:hi]
        np.greater(hold, 0, out=hm)
        hm &= rel_raw > fa_raw
        hm &= rel_raw > w0
        hm &= fa_raw < w1
        if pend_m is not None:
            sub, pe = a["submit"][lo:hi], a["pend_end"][lo:hi]
            pm = pend_m[lo:hi]
            np.greater(pe, sub, out=pm)
            pm &= pe > w0
            pm &= sub < w1
    return (held, part, None if hold_m.all() else hold_m,
            None if pend_m is None or pend_m.all() else pend_m)


@dataclass(frozen=True)
class SchedulingPartition:
    """Scheduling goodput and its loss partition, per pool, over one window.

    Attributes
    ----------
    window
        The measured window ``[start, end)``.
    table
        One row per pool, columns :data:`PARTITION_COLUMNS` (device-seconds).  For every pool
        ``capacity_device_s`` equals the sum of ``held_device_s`` and the five loss columns
        (``partial_gang_hold, reservation, idle_with_queue, idle_empty_queue, unattributed``);
        ``cross_pool_idle_*`` split the same idle device-time by whether any pool had pending work;
        ``over_allocated_device_s`` is the device-time allocations and reservations held above
        in-service capacity (0 for consistent records; when positive, ``unattributed`` is about its
        negative).
    record
        The records the partition came from.
    flags
        Data-quality findings (allocated above capacity), each one line.
    """

    window: Window
    table: pd.DataFrame
    record: str
    flags: tuple[str, ...] = ()

    @property
    def pools(self) -> list[str]:
        """Pool names, in table order."""
        return [str(p) for p in self.table.index]

    @property
    def totals(self) -> pd.Series:
        """The partition summed over pools."""
        return self.table.sum(axis=0)

    @property
    def scheduling_goodput(self) -> float:
        """Fleet scheduling goodput S over the window, in-service denominator."""
        return self.factor().value

    @property
    def availability(self) -> float:
        """In-service over installed capacity-time for the fleet (out-of-service hours excluded)."""
        tot = self.totals
        if tot["installed_device_s"] <= 0:
            raise DomainError("no installed capacity in the window: availability is undefined")
        return float(tot["capacity_device_s"] / tot["installed_device_s"])

    def _row(self, pool: str | None) -> pd.Series:
        if pool is None:
            return self.totals
        if pool not in self.table.index:
            raise DomainError(f"unknown pool {pool!r}; pools are {self.pools}")
        return self.table.loc[pool]

    def factor(self, pool: str | None = None, *, view: IdleView = "pool",
               denominator: Denominator = "in_service") -> Factor:
        """Return scheduling goodput as a :class:`~fleetlib.accounting.Factor`.

        Parameters
        ----------
        pool
            One pool, or None for the whole fleet.
        view
            ``"pool"``: idle capacity split by the pool's own queue; ``"cross_pool"``: by whether any
            pool had pending GPU work.
        denominator
            ``"in_service"`` (the accounting's denominator) or ``"installed"`` (adds an
            ``out_of_service`` loss; stated in the convention).

        Returns
        -------
        Factor
            Boundary ``"scheduling"``, numerator held device-seconds, losses in device-seconds.

        Raises
        ------
        DomainError
            No capacity in the window, or complete allocations above the denominator (records
            inconsistent; see :attr:`flags`).
        """
        if view not in ("pool", "cross_pool"):
            raise DomainError(f"view must be 'pool' or 'cross_pool'; got {view!r}")
        if denominator not in ("in_service", "installed"):
            raise DomainError(f"denominator must be 'in_service' or 'installed'; got {denominator!r}")
        row = self._row(pool)
        den = float(row["installed_device_s"] if denominator == "installed" else row["capacity_device_s"])
        where = f"pool {pool!r}" if pool is not None else "the fleet"
        if den <= 0:
            raise DomainError(f"{where} has no {denominator.replace('_', '-')} capacity in the window "
                              f"{self.window.label}: scheduling goodput is undefined")
        held = float(row["held_device_s"])
        if held > den * (1 + 1e-9):
            raise DomainError(f"{where}: complete allocations hold {held:.6g} device-s, more than the "
                              f"{den:.6g} device-s of capacity; the records are inconsistent "
                              f"({'; '.join(self.flags) or 'allocated above capacity'})")
        prefix = "cross_pool_" if view == "cross_pool" else ""
        losses = {"partial_gang_hold": float(row["partial_gang_hold"]),
                  "reservation": float(row["reservation"]),
                  "idle_with_queue": max(float(row[prefix + "idle_with_queue"]), 0.0),
                  "idle_empty_queue": max(float(row[prefix + "idle_empty_queue"]), 0.0)}
        if denominator == "installed":
            losses["out_of_service"] = float(row["out_of_service_device_s"])
        conv = (f"scheduling, {'installed' if denominator == 'installed' else 'in-service'} denominator, "
                f"{'cross-pool' if view == 'cross_pool' else 'per-pool'} idle view")
        return Factor(boundary="scheduling", numerator=held, denominator=den, window=self.window,
                      record=self.record, convention=conv, numerator_unit="device-s",
                      denominator_unit="device-s", losses=losses)

    def _pool_dict(self, row: pd.Series, denominator: Denominator) -> dict[str, Any]:
        den = float(row["installed_device_s"] if denominator == "installed" else row["capacity_device_s"])
        held = float(row["held_device_s"])
        losses = {k: float(row[k]) for k in LOSS_KEYS}
        if denominator == "installed":
            losses["unattributed"] = float(row["unattributed"])
            losses["out_of_service"] = float(row["out_of_service_device_s"])
        inst = float(row["installed_device_s"])
        return {
            "scheduling_goodput": held / den if den > 0 else None,
            "capacity_device_s": den,
            "held_device_s": held,
            "availability": float(row["capacity_device_s"]) / inst if inst > 0 else None,
            "losses": losses,
            "cross_pool_losses": {"idle_with_queue": float(row["cross_pool_idle_with_queue"]),
                                  "idle_empty_queue": float(row["cross_pool_idle_empty_queue"])},
        }

    def summary(self, *, denominator: Denominator = "in_service",
                ledger: Ledger | dict[str, Any] | None = None) -> dict[str, Any]:
        """Return the JSON-ready summary the ``fleetlib scheduling`` command prints.

        Parameters
        ----------
        denominator
            ``"in_service"`` or ``"installed"`` (then ``capacity_device_s`` is installed capacity and
            ``losses`` carries an extra ``out_of_service`` key).
        ledger
            The readers' ledger; its dictionary is returned under ``ledger`` with this partition's
            data-quality ``flags`` added.

        Returns
        -------
        dict
            Keys ``scheduling_goodput, capacity_device_s, held_device_s, availability, losses,
            cross_pool_losses, pools, ledger``.
        """
        if denominator not in ("in_service", "installed"):
            raise DomainError(f"denominator must be 'in_service' or 'installed'; got {denominator!r}")
        top = self._pool_dict(self.totals, denominator)
        if top["scheduling_goodput"] is None:
            raise DomainError(f"no {denominator.replace('_', '-')} capacity in the window "
                              f"{self.window.label}: scheduling goodput is undefined")
        if top["scheduling_goodput"] > 1 + 1e-9:
            raise DomainError("complete allocations hold more device-time than the fleet's capacity; the "
                              f"records are inconsistent ({'; '.join(self.flags)})")
        top["pools"] = {p: self._pool_dict(self.table.loc[p], denominator) for p in self.pools}
        led = ledger.to_dict() if isinstance(ledger, Ledger) else dict(ledger or Ledger().to_dict())
        led["flags"] = list(led.get("flags", [])) + list(self.flags)
        top["ledger"] = led
        return top


def scheduling_partition(allocations: pd.DataFrame | None = None, capacity: pd.DataFrame | None = None, *,
                         queue: pd.DataFrame | None = None, reservations: pd.DataFrame | None = None,
                         occupancy: pd.DataFrame | None = None, window: Any = None,
                         _force_argsort: bool = False) -> SchedulingPartition:
    """Partition in-service capacity-time into held time and the scheduling losses, per pool.

    Parameters
    ----------
    allocations, capacity
        Canonical tables (validated; see :mod:`fleetlib.scheduling.records`).  ``capacity`` is
        required with allocations; without allocations every in-service device-second is idle.
    queue
        Queue step function; when None the queue is derived from the allocations (pending from
        ``submit`` to ``gang_complete``).
    reservations
        Devices kept idle for waiting gangs; when None the reservation loss is zero (it is then
        inside the idle losses).
    occupancy
        Instead of the four tables above: an occupancy step function (for example Helios per-VC
        minute sequences).
    window
        ``Window.between(start, end)`` or a ``(start, end)`` pair; default: the span of the
        capacity (or occupancy) table.

    Returns
    -------
    SchedulingPartition
        Per-pool partition; ``.factor()``, ``.summary()``.

    Raises
    ------
    DomainError
        Missing capacity, a nominal window, tables that fail the structural checks.
    """
    tb = _prepare(allocations, capacity, queue, reservations, occupancy, window)
    arr = _partition_arrays(tb, force_argsort=_force_argsort)
    cap = arr["capacity_device_s"]
    table = pd.DataFrame({
        "capacity_device_s": cap,
        "installed_device_s": cap + arr["out_of_service_device_s"],
        "out_of_service_device_s": arr["out_of_service_device_s"],
        "held_device_s": arr["held_device_s"],
        "partial_gang_hold": arr["partial_gang_hold"],
        "reservation": arr["reservation"],
        "idle_with_queue": arr["idle_with_queue"],
        "idle_empty_queue": arr["idle_empty_queue"],
        "unattributed": (cap - arr["held_device_s"] - arr["partial_gang_hold"] - arr["reservation"]
                         - arr["idle_with_queue"] - arr["idle_empty_queue"]),
        "cross_pool_idle_with_queue": arr["cross_pool_idle_with_queue"],
        "cross_pool_idle_empty_queue": arr["cross_pool_idle_empty_queue"],
        "over_allocated_device_s": 0.0 - arr["sweep_negative"],
    }, index=pd.Index(tb.names, name="pool"))
    flags = []
    for i, p in enumerate(tb.names):
        over = float(table["over_allocated_device_s"].to_numpy()[i])
        if over > 0:
            first = pd.Timestamp(int(arr["first_over"][i]) + tb.w0, unit="ns", tz="UTC")
            flags.append(f"allocated above capacity: pool {p!r} held {over:.6g} device-s above its "
                         f"in-service capacity (first at {first.isoformat()}); shown as negative "
                         "unattributed, not clipped")
    record = ("scheduler records (occupancy)" if tb.occ is not None
              else "scheduler records (allocations, capacity"
              + (", queue" if tb.queue is not None else "")
              + (", reservations" if tb.res is not None else "") + ")")
    return SchedulingPartition(window=tb.window, table=table, record=record, flags=tuple(flags))


def scheduling_goodput(allocations: pd.DataFrame | None = None, capacity: pd.DataFrame | None = None, *,
                       queue: pd.DataFrame | None = None, reservations: pd.DataFrame | None = None,
                       occupancy: pd.DataFrame | None = None, window: Any = None, pool: str | None = None,
                       view: IdleView = "pool", denominator: Denominator = "in_service") -> Factor:
    """Scheduling goodput S as a :class:`~fleetlib.accounting.Factor` with its loss partition.

    Parameters
    ----------
    allocations, capacity, queue, reservations, occupancy, window
        As in :func:`scheduling_partition`.
    pool
        One pool, or None for the fleet.
    view
        ``"pool"`` or ``"cross_pool"`` split of idle capacity.
    denominator
        ``"in_service"`` (default) or ``"installed"``.

    Returns
    -------
    Factor
        ``held device-s / capacity device-s`` with losses ``partial_gang_hold, reservation,
        idle_with_queue, idle_empty_queue`` and the computed ``unattributed``.

    Examples
    --------
    >>> import pandas as pd
    >>> t = lambda h: pd.Timestamp("2025-01-01", tz="UTC") + pd.Timedelta(hours=h)
    >>> cap = pd.DataFrame({"pool": ["a"], "start": [t(0)], "end": [t(10)],
    ...                     "devices_in_service": [10], "devices_out_of_service": [0]})
    >>> alloc = pd.DataFrame({"job_id": [1], "attempt": [0], "pool": ["a"], "devices": [8],
    ...     "submit": [t(0)], "first_assigned": [t(0)], "gang_complete": [t(2)], "release": [t(10)],
    ...     "priority": [0], "elastic": [False], "end_state": ["completed"], "requested_devices": [8]})
    >>> f = scheduling_goodput(alloc, cap)
    >>> round(f.value, 2), f.losses["partial_gang_hold"] / 3600
    (0.64, 16.0)
    """
    part = scheduling_partition(allocations, capacity, queue=queue, reservations=reservations,
                                occupancy=occupancy, window=window)
    return part.factor(pool, view=view, denominator=denominator)


def scheduling_summary(allocations: pd.DataFrame | None = None, capacity: pd.DataFrame | None = None, *,
                       queue: pd.DataFrame | None = None, reservations: pd.DataFrame | None = None,
                       occupancy: pd.DataFrame | None = None, window: Any = None,
                       denominator: Denominator = "in_service",
                       ledger: Ledger | dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the ``fleetlib scheduling --json`` object.

    Parameters
    ----------
    allocations, capacity, queue, reservations, occupancy, window
        As in :func:`scheduling_partition`.
    denominator
        ``"in_service"`` (default) or ``"installed"`` (explicit; adds ``losses.out_of_service``).
    ledger
        The readers' ledger, returned under ``ledger`` with the partition's flags added.

    Returns
    -------
    dict
        ``scheduling_goodput, capacity_device_s, held_device_s, availability, losses
        {partial_gang_hold, reservation, idle_with_queue, idle_empty_queue, unattributed},
        cross_pool_losses {idle_with_queue, idle_empty_queue}, pools {name: same keys}, ledger``.
    """
    part = scheduling_partition(allocations, capacity, queue=queue, reservations=reservations,
                                occupancy=occupancy, window=window)
    return part.summary(denominator=denominator, ledger=ledger)


# ---------------------------------------------------------------------------------------------------
# The full step function (occupancy), the derived queue and the time series
# ---------------------------------------------------------------------------------------------------

_OCC_CHANNELS: tuple[str, ...] = OCCUPANCY_COLUMNS[3:]


def _occupancy_arrays(tb: _Tables, channels: Sequence[str] = _OCC_CHANNELS
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Sweep every channel; return pool, start, end (ns from w0) and channel values of the rows."""
    w0, w1, n = tb.w0, tb.w1, len(tb.names)
    if tb.occ is not None:
        o = tb.occ
        s, e = _clip(o["start"], w0, w1), _clip(o["end"], w0, w1)
        keep = e > s
        order = np.lexsort((s[keep], o["pool"][keep]))
        return (o["pool"][keep][order], s[keep][order], e[keep][order],
                {c: o[c][keep][order] for c in channels})
    ci = {name: i for i, name in enumerate(channels)}
    blocks: list[_Block] = []

    def add(name: str, pool: np.ndarray, t0: np.ndarray, t1: np.ndarray, mag: np.ndarray | int) -> None:
        if name in ci:
            blocks.extend([_Block(pool, t0, 2 * ci[name] + 1, mag), _Block(pool, t1, 2 * ci[name], mag)])

    c = tb.cap
    assert c is not None
    add("in_service", c["pool"], c["start"], c["end"], c["devices_in_service"])
    add("out_of_service", c["pool"], c["start"], c["end"], c["devices_out_of_service"])
    a = tb.alloc
    if a is not None:
        add("held_complete", a["pool"], a["gang_complete"], a["release"], a["hold"])
        add("partial_gang", a["pool"], a["first_assigned"], a["gang_complete"], a["hold"])
        if tb.queue is None:
            add("pending_jobs", a["pool"], a["submit"], a["pend_end"], 1)
            add("pending_devices", a["pool"], a["submit"], a["pend_end"], a["requested"])
    if tb.queue is not None:
        q = tb.queue
        add("pending_jobs", q["pool"], q["start"], q["end"], q["pending_jobs"])
        add("pending_devices", q["pool"], q["start"], q["end"], q["pending_devices"])
    if tb.res is not None:
        r = tb.res
        add("reserved", r["pool"], r["start"], r["end"], r["devices"])
    pool, t, code, mag = _sort_events(blocks, w0, w1, n, 2 * len(channels))
    vals = {}
    for name, i in ci.items():
        vals[name] = np.cumsum(np.where(code == 2 * i + 1, mag, 0) - np.where(code == 2 * i, mag, 0))[:-1]
    sp, st, dur = _segments(pool, t)
    keep = dur > 0
    sp, st, dur = sp[keep], st[keep], dur[keep]
    vals = {k: v[keep] for k, v in vals.items()}
    if sp.size == 0:
        return sp, st, st, vals
    # merge consecutive identical rows and drop rows where every channel is zero
    change = np.zeros(sp.size, dtype=bool)
    change[0] = True
    change[1:] |= sp[1:] != sp[:-1]
    for v in vals.values():
        change[1:] |= v[1:] != v[:-1]
    last = np.r_[change[1:], True]
    start, end = st[change], (st + dur)[last]
    pool_r = sp[change]
    vals = {k: v[change] for k, v in vals.items()}
    nonzero = np.zeros(pool_r.size, dtype=bool)
    for v in vals.values():
        nonzero |= v != 0
    return pool_r[nonzero], start[nonzero], end[nonzero], {k: v[nonzero] for k, v in vals.items()}


def _frame(tb: _Tables, pool: np.ndarray, start: np.ndarray, end: np.ndarray,
           values: dict[str, np.ndarray]) -> pd.DataFrame:
    out = pd.DataFrame({
        "pool": pd.Categorical.from_codes(pool, categories=tb.names) if len(tb.names)
        else pd.Categorical([]),
        "start": pd.to_datetime(start + tb.w0, unit="ns", utc=True),
        "end": pd.to_datetime(end + tb.w0, unit="ns", utc=True),
    })
    for k, v in values.items():
        out[k] = v.astype(np.int64)
    return out


def occupancy(allocations: pd.DataFrame | None, capacity: pd.DataFrame, *, queue: pd.DataFrame | None = None,
              reservations: pd.DataFrame | None = None, window: Any = None) -> pd.DataFrame:
    """Return the occupancy step function the sweep builds from the records.

    Parameters
    ----------
    allocations, capacity, queue, reservations, window
        As in :func:`scheduling_partition`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`~fleetlib.scheduling.records.OCCUPANCY_COLUMNS`, one row per interval over
        which every count is constant (consecutive equal rows merged; intervals where every count
        is zero left out).  ``scheduling_partition(occupancy=...)`` on it gives the same partition as
        on the records.
    """
    tb = _prepare(allocations, capacity, queue, reservations, None, window)
    pool, start, end, vals = _occupancy_arrays(tb)
    return _frame(tb, pool, start, end, vals)[list(OCCUPANCY_COLUMNS)]


def derive_queue(allocations: pd.DataFrame, *, window: Any = None) -> pd.DataFrame:
    """Derive the queue step function from allocations (pending from submit to gang completion).

    Parameters
    ----------
    allocations
        Canonical allocations.  A row is pending from ``submit`` to ``gang_complete``, or to
        ``release`` when it never got a device; ``pending_devices`` counts ``requested_devices``.
    window
        Window to cut it to; default: from the first submit to the last release.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`~fleetlib.scheduling.records.QUEUE_COLUMNS`; intervals with no pending job
        are left out.
    """
    tb = _prepare(allocations, None, None, None, None, window, need_capacity=False)
    pool, start, end, vals = _occupancy_arrays(tb, channels=("pending_jobs", "pending_devices"))
    return _frame(tb, pool, start, end, vals)[list(QUEUE_COLUMNS)]


def _freq_ns(freq: str | pd.Timedelta, name: str = "freq") -> int:
    try:
        f = int(pd.Timedelta(freq).value)
    except (ValueError, TypeError) as exc:
        raise DomainError(f"{name} must be a duration such as '1h'; got {freq!r}") from exc
    if f <= 0:
        raise DomainError(f"{name} must be a positive duration; got {freq!r}")
    return f


def _split_at(start: np.ndarray, end: np.ndarray,
              cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split segments at sorted cut points; return (segment index, piece start, piece end)."""
    lo = np.searchsorted(cuts, start, side="right")
    hi = np.searchsorted(cuts, end, side="left")
    k = np.maximum(hi - lo, 0)
    reps = k + 1
    idx = np.repeat(np.arange(start.size), reps)
    j = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)
    cut_lo = cuts[np.minimum(lo[idx] + j - 1, max(cuts.size - 1, 0))] if cuts.size else start[idx]
    cut_hi = cuts[np.minimum(lo[idx] + j, max(cuts.size - 1, 0))] if cuts.size else end[idx]
    ps = np.where(j == 0, start[idx], cut_lo)
    pe = np.where(j == k[idx], end[idx], cut_hi)
    return idx, ps, pe


def goodput_timeseries(allocations: pd.DataFrame | None = None, capacity: pd.DataFrame | None = None, *,
                       queue: pd.DataFrame | None = None, reservations: pd.DataFrame | None = None,
                       occupancy: pd.DataFrame | None = None, window: Any = None,
                       freq: str | pd.Timedelta = "1h") -> pd.DataFrame:
    """Scheduling partition per pool per time bin (hourly by default), to show demand cycles.

    Bins are aligned to multiples of ``freq`` since the Unix epoch (UTC), cut to the window.

    Parameters
    ----------
    allocations, capacity, queue, reservations, occupancy, window
        As in :func:`scheduling_partition`.
    freq
        Bin length, e.g. ``"1h"`` or ``"1D"``.

    Returns
    -------
    pandas.DataFrame
        One row per pool and bin: ``pool, start, end`` and the device-second columns
        ``capacity_device_s, out_of_service_device_s, held_device_s, partial_gang_hold,
        reservation, idle_with_queue, idle_empty_queue, unattributed, cross_pool_idle_with_queue,
        cross_pool_idle_empty_queue``, plus ``scheduling_goodput`` and ``availability`` (nullable
        floats, missing where the bin has no capacity).  Summed over bins the columns equal
        :func:`scheduling_partition`'s table.
    """
    f = _freq_ns(freq)
    tb = _prepare(allocations, capacity, queue, reservations, occupancy, window)
    n, w0, w1 = len(tb.names), tb.w0, tb.w1
    pool, s, e, v = _occupancy_arrays(tb)
    us, ue = _union(*_runs(pool, s, e - s, v["pending_jobs"] > 0))
    b0, b1 = w0 // f, (w1 - 1) // f
    nb = int(b1 - b0 + 1)
    edges = np.arange(b0 + 1, b1 + 1, dtype=np.int64) * f - w0
    cuts = np.union1d(edges, np.concatenate([us, ue]))
    cuts = cuts[(cuts > 0) & (cuts < w1 - w0)]
    idx, ps, pe = _split_at(s, e, cuts)
    dur_s = (pe - ps) / _NS
    p = pool[idx]
    b = (ps + w0) // f - b0
    key = p * nb + b
    m = n * nb
    free = (v["in_service"] - v["held_complete"] - v["partial_gang"] - v["reserved"])[idx]
    pos = np.maximum(free, 0) * dur_s
    own = v["pending_jobs"][idx] > 0
    glob = _inside(us, ue, ps)
    cols = {
        "capacity_device_s": _wsum(key, v["in_service"][idx] * dur_s, m),
        "out_of_service_device_s": _wsum(key, v["out_of_service"][idx] * dur_s, m),
        "held_device_s": _wsum(key, v["held_complete"][idx] * dur_s, m),
        "partial_gang_hold": _wsum(key, v["partial_gang"][idx] * dur_s, m),
        "reservation": _wsum(key, v["reserved"][idx] * dur_s, m),
        "idle_with_queue": _wsum(key, pos * own, m),
        "idle_empty_queue": _wsum(key, pos * ~own, m),
        "unattributed": _wsum(key, np.minimum(free, 0) * dur_s, m),
        "cross_pool_idle_with_queue": _wsum(key, pos * glob, m),
        "cross_pool_idle_empty_queue": _wsum(key, pos * ~glob, m),
    }
    bins = np.arange(b0, b1 + 1, dtype=np.int64)
    bstart = np.maximum(bins * f, w0)
    bend = np.minimum((bins + 1) * f, w1)
    out = pd.DataFrame({
        "pool": pd.Categorical.from_codes(np.repeat(np.arange(n), nb), categories=tb.names)
        if n else pd.Categorical([]),
        "start": pd.to_datetime(np.tile(bstart, n), unit="ns", utc=True),
        "end": pd.to_datetime(np.tile(bend, n), unit="ns", utc=True),
        **cols,
    })
    cap = out["capacity_device_s"].astype("Float64")
    inst = (out["capacity_device_s"] + out["out_of_service_device_s"]).astype("Float64")
    out["scheduling_goodput"] = (out["held_device_s"].astype("Float64") / cap).where(cap > 0, pd.NA)
    out["availability"] = (cap / inst).where(inst > 0, pd.NA)
    return out


# ---------------------------------------------------------------------------------------------------
# Per-job views: held time, queue wait, size cohorts
# ---------------------------------------------------------------------------------------------------


def _alloc_times(allocations: pd.DataFrame, window: Any) -> tuple[dict[str, np.ndarray], Window | None]:
    _require_columns(allocations, ALLOCATION_COLUMNS, "<allocations>", "allocations")
    t = {c: times_ns(allocations[c], file="<allocations>", field=c)
         for c in ("submit", "first_assigned", "gang_complete", "release")}
    assigned = t["first_assigned"] != _NAT
    missing = (t["release"] == _NAT) | (t["submit"] == _NAT) | (assigned & (t["gang_complete"] == _NAT))
    if np.any(missing):
        raise DomainError("allocations with missing times: validate the table first")
    t["assigned"] = assigned
    t["pend_end"] = np.where(assigned, t["gang_complete"], t["release"])
    t["first_assigned"] = np.where(assigned, t["first_assigned"], t["release"])
    t["gang_complete"] = np.where(assigned, t["gang_complete"], t["release"])
    win = None
    if window is not None:
        w0, w1, win = _as_window(window, None)
        for c in ("submit", "first_assigned", "gang_complete", "release", "pend_end"):
            t[c] = np.clip(t[c], w0, w1)
    return t, win


def held_time(allocations: pd.DataFrame, *, window: Any = None, by: Literal["job", "attempt"] = "job"
              ) -> pd.DataFrame:
    """Held time of complete allocations per job (the runtime factor's denominator).

    Parameters
    ----------
    allocations
        Canonical allocations.
    window
        Cut every interval to this window; default: no cut.
    by
        ``"job"`` (sum over attempts and elastic segments) or ``"attempt"`` (one row per row).

    Returns
    -------
    pandas.DataFrame
        ``job_id`` (and ``attempt``), ``pool``, ``devices`` (largest segment), ``held_s`` (wall
        seconds from gang complete to release), ``held_device_s``, ``partial_hold_s``,
        ``partial_hold_device_s``, ``first_gang_complete``, ``last_release``.
    """
    if by not in ("job", "attempt"):
        raise DomainError(f"by must be 'job' or 'attempt'; got {by!r}")
    t, _ = _alloc_times(allocations, window)
    dev = _counts(allocations["devices"], "allocations.devices")
    hold = np.where(t["assigned"], dev, 0)
    held_s = (t["release"] - t["gang_complete"]) / _NS
    part_s = (t["gang_complete"] - t["first_assigned"]) / _NS
    rows = pd.DataFrame({
        "job_id": allocations["job_id"].to_numpy(),
        "attempt": allocations["attempt"].to_numpy(),
        "pool": allocations["pool"].to_numpy(),
        "devices": hold,
        "held_s": held_s,
        "held_device_s": hold * held_s,
        "partial_hold_s": part_s,
        "partial_hold_device_s": hold * part_s,
        "first_gang_complete": pd.to_datetime(np.where(t["assigned"], t["gang_complete"], _NAT), unit="ns",
                                              utc=True),
        "last_release": pd.to_datetime(np.where(t["assigned"], t["release"], _NAT), unit="ns", utc=True),
    })
    if by == "attempt":
        return rows
    g = rows.groupby("job_id", sort=False)
    out = g.agg(pool=("pool", "first"), attempts=("attempt", "size"), devices=("devices", "max"),
                held_s=("held_s", "sum"), held_device_s=("held_device_s", "sum"),
                partial_hold_s=("partial_hold_s", "sum"),
                partial_hold_device_s=("partial_hold_device_s", "sum"),
                first_gang_complete=("first_gang_complete", "min"), last_release=("last_release", "max"))
    return out.reset_index()


def _free_runs(allocations: pd.DataFrame, capacity: pd.DataFrame, reservations: pd.DataFrame | None,
               window: tuple[pd.Timestamp, pd.Timestamp]
               ) -> tuple[_Tables, np.ndarray, np.ndarray, np.ndarray]:
    """Return the intervals, per pool, during which the pool had at least one free in-service device."""
    tb = _prepare(allocations, capacity, None, reservations, None, window)
    pool, s, e, v = _occupancy_arrays(tb, channels=("in_service", "held_complete", "partial_gang",
                                                    "reserved"))
    free = v["in_service"] - v["held_complete"] - v["partial_gang"] - v["reserved"]
    rs, re, rp = _runs(pool, s, e - s, free > 0, with_pool=True)
    return tb, rp, rs, re


def queue_waits(allocations: pd.DataFrame, *, capacity: pd.DataFrame | None = None,
                reservations: pd.DataFrame | None = None,
                by: Literal["attempt", "job"] = "attempt") -> pd.DataFrame:
    """Queue wait per attempt or job: time to result, a scheduling loss only while capacity sat free.

    Parameters
    ----------
    allocations
        Canonical allocations.
    capacity, reservations
        When capacity is given, each wait is split into the part during which the job's pool had
        free in-service devices (``wait_while_pool_idle_s``: the wait coincided with scheduling
        loss) and the part during which every in-service device was held, partial or reserved
        (``wait_while_pool_full_s``: it costs the job time to result and the fleet nothing).
    by
        ``"attempt"`` (one row per allocation row) or ``"job"`` (summed per job).

    Returns
    -------
    pandas.DataFrame
        ``job_id, attempt, pool, requested_devices, submit, gang_complete, completed, wait_s,
        pending_s, partial_hold_s`` (and the two split columns with capacity).  ``wait_s`` runs
        from submit to gang completion (to release for a gang that never completed); it is
        ``pending_s`` (submit to first device) plus ``partial_hold_s``.
    """
    if by not in ("job", "attempt"):
        raise DomainError(f"by must be 'job' or 'attempt'; got {by!r}")
    t, _ = _alloc_times(allocations, None)
    wait_s = (t["pend_end"] - t["submit"]) / _NS
    pending_s = (t["first_assigned"] - t["submit"]) / _NS
    pending_s = np.where(t["assigned"], pending_s, wait_s)
    completed = t["assigned"] & (t["gang_complete"] < t["release"])
    out = pd.DataFrame({
        "job_id": allocations["job_id"].to_numpy(),
        "attempt": allocations["attempt"].to_numpy(),
        "pool": allocations["pool"].to_numpy(),
        "requested_devices": allocations["requested_devices"].to_numpy(),
        "submit": pd.to_datetime(t["submit"], unit="ns", utc=True),
        "gang_complete": pd.to_datetime(np.where(completed, t["gang_complete"], _NAT), unit="ns", utc=True),
        "completed": completed,
        "wait_s": wait_s,
        "pending_s": pending_s,
        "partial_hold_s": np.where(t["assigned"], (t["gang_complete"] - t["first_assigned"]) / _NS, 0.0),
    })
    if capacity is not None and len(out):
        cap_t0 = times_ns(capacity["start"], file="<capacity>", field="start")
        cap_t1 = times_ns(capacity["end"], file="<capacity>", field="end")
        lo = int(np.concatenate([t["submit"], cap_t0]).min())
        hi = max(int(np.concatenate([t["release"], cap_t1]).max()), lo + 1)
        span_w = (pd.Timestamp(lo, unit="ns", tz="UTC"), pd.Timestamp(hi, unit="ns", tz="UTC"))
        tb, rp, rs, re = _free_runs(allocations, capacity, reservations, span_w)
        # one sorted interval set across pools: offset each pool by (pool * span)
        span = tb.w1 - tb.w0 + 1
        us, ue = rs + rp * span, re + rp * span
        pc = _pool_codes(allocations["pool"], tb.names)
        a0 = np.clip(t["submit"], tb.w0, tb.w1) - tb.w0 + pc * span
        a1 = np.clip(t["pend_end"], tb.w0, tb.w1) - tb.w0 + pc * span
        idle = (_coverage(us, ue, a1) - _coverage(us, ue, a0)) / _NS
        out["wait_while_pool_idle_s"] = idle
        out["wait_while_pool_full_s"] = wait_s - idle
    if by == "attempt":
        return out
    num = [c for c in ("wait_s", "pending_s", "partial_hold_s", "wait_while_pool_idle_s",
                       "wait_while_pool_full_s") if c in out.columns]
    g = out.groupby("job_id", sort=False)
    agg = g[num].sum()
    agg.insert(0, "pool", g["pool"].first())
    agg.insert(1, "attempts", g.size())
    agg.insert(2, "requested_devices", g["requested_devices"].max())
    agg.insert(3, "submit", g["submit"].min())
    agg.insert(4, "completed", g["completed"].any())
    return agg.reset_index()


def _cohort_labels(edges: Sequence[int]) -> list[str]:
    labels, lo = [], 1
    for hi in edges:
        labels.append(str(hi) if lo == hi else f"{lo}-{hi}")
        lo = hi + 1
    labels.append(f">{edges[-1]}")
    return labels


def cohort_goodput(allocations: pd.DataFrame, *, capacity: pd.DataFrame | None = None, window: Any = None,
                   edges: Sequence[int] = DEFAULT_COHORT_EDGES) -> pd.DataFrame:
    """Scheduling goodput by job-size cohort.

    A job's cohort is its largest ``requested_devices``.  Two views per cohort:

    * ``job_scheduling_goodput`` -- job-centric: device-time the cohort's jobs held complete
      allocations, over the device-time they asked for from submit to release
      (``requested_devices x (release - submit)``, summed over attempts; requeue gaps between
      attempts are not demand).  This is the per-cohort number fleets track (a job waiting while
      other jobs hold the pool lowers it, the pool's S not).
    * ``capacity_share`` -- pool-centric (with ``capacity``): the cohort's held device-time over the
      fleet's in-service capacity-time; the shares sum to the fleet's S.

    Parameters
    ----------
    allocations
        Canonical allocations.
    capacity
        Capacity table, for ``capacity_share``.
    window
        Window (default: the capacity span with capacity, else no cut).
    edges
        Inclusive upper bounds of the cohorts, strictly increasing positive integers; sizes above
        the last edge form a last cohort.

    Returns
    -------
    pandas.DataFrame
        One row per cohort: ``cohort, jobs, allocations, held_device_s, partial_gang_hold,
        demand_device_s, job_scheduling_goodput, mean_wait_s, median_wait_s`` (and
        ``capacity_share``).  Cohorts without jobs are left out.
    """
    e = [int(x) for x in edges]
    if not e or any(x < 1 for x in e) or any(b <= a for a, b in itertools.pairwise(e)):
        raise DomainError(f"cohort edges must be strictly increasing positive integers; got {list(edges)!r}")
    cap_total = None
    if capacity is not None:
        part = scheduling_partition(None, capacity, window=window)
        window = part.window
        cap_total = float(part.totals["capacity_device_s"])
    t, _ = _alloc_times(allocations, window)
    dev = _counts(allocations["devices"], "allocations.devices")
    req = _counts(allocations["requested_devices"], "allocations.requested_devices")
    hold = np.where(t["assigned"], dev, 0)
    size = pd.Series(req).groupby(allocations["job_id"].to_numpy(), sort=False).transform("max").to_numpy()
    labels = _cohort_labels(e)
    cohort = pd.Categorical.from_codes(np.searchsorted(np.asarray(e), size, side="left"), categories=labels,
                                       ordered=True)
    rows = pd.DataFrame({
        "cohort": cohort,
        "job_id": allocations["job_id"].to_numpy(),
        "held_device_s": hold * ((t["release"] - t["gang_complete"]) / _NS),
        "partial_gang_hold": hold * ((t["gang_complete"] - t["first_assigned"]) / _NS),
        "demand_device_s": req * ((t["release"] - t["submit"]) / _NS),
        "wait_s": (t["pend_end"] - t["submit"]) / _NS,
    })
    g = rows.groupby("cohort", observed=True, sort=True)
    out = g.agg(jobs=("job_id", "nunique"), allocations=("job_id", "size"),
                held_device_s=("held_device_s", "sum"), partial_gang_hold=("partial_gang_hold", "sum"),
                demand_device_s=("demand_device_s", "sum"), mean_wait_s=("wait_s", "mean"),
                median_wait_s=("wait_s", "median"))
    dem = out["demand_device_s"].astype("Float64")
    out.insert(5, "job_scheduling_goodput",
               (out["held_device_s"].astype("Float64") / dem).where(dem > 0, pd.NA))
    if cap_total is not None:
        if cap_total <= 0:
            raise DomainError("no in-service capacity in the window: capacity shares are undefined")
        out["capacity_share"] = out["held_device_s"] / cap_total
    return out.reset_index()


# ---------------------------------------------------------------------------------------------------
# Fragmentation
# ---------------------------------------------------------------------------------------------------


def stranded_devices(free_per_node: Any, node_devices: Any, gang_devices: int) -> int:
    """Free devices that cannot host any part of a gang of ``gang_devices`` devices.

    A gang no larger than a node must fit on one node, so a node with fewer than ``gang_devices``
    free devices strands them; a gang larger than a node takes whole nodes, so every partly free
    node strands its free devices.  Nodes with nothing free strand nothing.

    Parameters
    ----------
    free_per_node
        Free devices on each node (non-negative integers).
    node_devices
        Devices per node: one number for all nodes, or one per node.
    gang_devices
        Size of the gang to place (at least 1).

    Returns
    -------
    int
        Stranded free devices.

    Examples
    --------
    >>> stranded_devices([8, 3, 3, 2, 0], 8, 4)   # the 3+3+2 scattered devices cannot host 4
    8
    >>> stranded_devices([8, 3, 3, 2, 0], 8, 16)  # a 16-device gang needs whole nodes
    8
    """
    free = np.asarray(free_per_node, dtype=np.int64)
    nodes = np.broadcast_to(np.asarray(node_devices, dtype=np.int64), free.shape)
    if int(gang_devices) < 1:
        raise DomainError(f"gang_devices must be at least 1; got {gang_devices!r}")
    if np.any(free < 0) or np.any(nodes < 1) or np.any(free > nodes):
        raise DomainError("free devices per node must lie in [0, node_devices] and nodes hold at least "
                          "1 device")
    need = np.minimum(int(gang_devices), nodes)
    return int(free[(free > 0) & (free < need)].sum())


def fragmentation_index(node_free: pd.DataFrame, allocations: pd.DataFrame, *,
                        window: Any = None) -> pd.DataFrame:
    """Time-weighted fragmentation index per pool, from node-level free devices.

    Definition: while a pool has at least one pending gang, the fragmentation index is the share
    of its free device-time that cannot host the smallest pending gang --

    ``FI = sum over time of stranded devices / sum over time of free devices``, both taken only
    while something is pending, where *stranded* is :func:`stranded_devices` for the smallest
    pending gang (a gang no larger than a node needs that many free devices on one node; a larger
    gang needs whole free nodes).  FI = 0: every free device could serve the head of the queue's
    smallest gang; FI = 1: free capacity exists but is all in fragments.

    It needs node granularity, so it is computed only from node-level data: pool-level counts
    cannot say how free devices are spread over nodes, and any devices-per-node assumption would
    be a guess presented as a measurement.  Without node data, ``idle_with_queue`` of
    :func:`scheduling_partition` bounds the stranded device-time from above.

    Parameters
    ----------
    node_free
        Columns ``pool, node, start, end, node_devices, free_devices``: free devices of each node
        over ``[start, end)``.
    allocations
        Canonical allocations; pending gangs (``submit`` to ``gang_complete``) and their
        ``requested_devices`` come from them.
    window
        Window; default: the span of ``node_free``.

    Returns
    -------
    pandas.DataFrame
        One row per pool: ``pool, pending_s, free_device_s_while_pending, stranded_device_s,
        fragmentation_index`` (nullable, missing when no device was free while gangs waited).
    """
    _require_columns(node_free, ("pool", "node", "start", "end", "node_devices", "free_devices"),
                     "<node_free>", "node_free")
    _require_columns(allocations, ALLOCATION_COLUMNS, "<allocations>", "allocations")
    names = _pool_names(node_free["pool"], allocations["pool"])
    ns0 = times_ns(node_free["start"], file="<node_free>", field="start")
    ns1 = times_ns(node_free["end"], file="<node_free>", field="end")
    default = (int(ns0.min()), int(ns1.max())) if len(node_free) else None
    w0, w1, _ = _as_window(window, default)
    n = len(names)
    nd = _counts(node_free["node_devices"], "node_free.node_devices")
    fr = _counts(node_free["free_devices"], "node_free.free_devices")
    if np.any(fr > nd) or np.any(nd < 1):
        raise DomainError("node_free: free_devices must lie in [0, node_devices], node_devices >= 1")
    npool = _pool_codes(node_free["pool"], names)
    t, _ = _alloc_times(allocations, None)
    apool = _pool_codes(allocations["pool"], names)
    req = _counts(allocations["requested_devices"], "allocations.requested_devices")
    waiting = (t["pend_end"] > t["submit"]) & (req > 0)
    sizes = np.unique(req[waiting])
    span = w1 - w0 + 1
    s_rel, e_rel = _clip(ns0, w0, w1), _clip(ns1, w0, w1)
    q0, q1 = s_rel + npool * span, e_rel + npool * span
    free_s = np.zeros(n)
    strand_s = np.zeros(n)
    pending_s = np.zeros(n)
    if sizes.size:
        blocks = []
        for k, g in enumerate(sizes.tolist()):
            m = waiting & (req == g)
            blocks += [_Block(apool[m], t["submit"][m], 2 * k + 1, 1),
                       _Block(apool[m], t["pend_end"][m], 2 * k, 1)]
        pool, tt, code, _ = _sort_events(blocks, w0, w1, n, 2 * sizes.size)
        counts = np.stack([np.cumsum((code == 2 * k + 1).astype(np.int64) - (code == 2 * k))
                           for k in range(sizes.size)], axis=1)[:-1]
        sp, st, dur = _segments(pool, tt)
        any_p = counts > 0
        smallest = np.where(any_p.any(axis=1), np.argmax(any_p, axis=1), -1)
        pending_s = _wsum(sp, (smallest >= 0) * (dur / _NS), n)
        for k, g in enumerate(sizes.tolist()):
            rs, re, rp = _runs(sp, st, dur, smallest == k, with_pool=True)
            if rs.size == 0:
                continue
            # one sorted interval set across pools: pool p's times are offset by p * span
            us, ue = _union(rs + rp * span, re + rp * span)
            cov = (_coverage(us, ue, q1) - _coverage(us, ue, q0)) / _NS
            free_s += _wsum(npool, fr * cov, n)
            stranded = (fr > 0) & (fr < np.minimum(g, nd))
            strand_s += _wsum(npool, fr * stranded * cov, n)
    out = pd.DataFrame({"pool": list(names), "pending_s": pending_s, "free_device_s_while_pending": free_s,
                        "stranded_device_s": strand_s})
    den = out["free_device_s_while_pending"].astype("Float64")
    out["fragmentation_index"] = (out["stranded_device_s"].astype("Float64") / den).where(den > 0, pd.NA)
    return out


#: Occupancy channels that must all be zero, in every pool at once, for an instant to count as silent.
SILENT_CHANNELS: tuple[str, ...] = ("held_complete", "partial_gang", "reserved", "pending_jobs")

_SILENT_COLUMNS: tuple[str, ...] = ("start", "end", "duration_h", "pools", "in_service_device_s",
                                    "scheduling_goodput_without")


def _coverage_count(edges: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many of the intervals [start, end) cover each elementary interval between sorted ``edges``."""
    delta = np.zeros(edges.size, dtype=np.int64)
    np.add.at(delta, np.searchsorted(edges, start), 1)
    np.add.at(delta, np.searchsorted(edges, end), -1)
    return np.cumsum(delta)[:-1]


def silent_stretches(occupancy_table: pd.DataFrame, *,
                     min_duration: str | pd.Timedelta = "1h") -> pd.DataFrame:
    """Find stretches in which every pool reports nothing held, nothing reserved and nothing queued.

    A whole fleet that holds no device and has no pending job for hours while its capacity stays in
    service is more often a gap in the record (a collector that stopped) than a real lull.  This does
    not change the accounting -- such time stays idle with an empty queue -- but it shows the stretch
    and how much the factor depends on it.

    Parameters
    ----------
    occupancy_table
        An occupancy table (:data:`fleetlib.scheduling.records.OCCUPANCY_COLUMNS`), e.g. from the Helios
        sequence reader.
    min_duration
        Shortest stretch reported (a pandas time-delta string or ``Timedelta``; must be positive).

    Returns
    -------
    pandas.DataFrame
        One row per maximal stretch, in time order: ``start``, ``end`` (UTC), ``duration_h``, ``pools``
        (the number of pools, all silent), ``in_service_device_s`` (capacity-time inside the stretch,
        counted by the factor as idle with an empty queue) and ``scheduling_goodput_without`` (the
        factor of the whole table with every reported stretch taken out of the denominator -- held time
        inside a silent stretch is zero by definition; the same value on every row).  Empty, with these
        columns, when there is no such stretch.

    Raises
    ------
    DomainError
        A non-positive or unreadable ``min_duration``, a table without the occupancy columns, or a
        table that is silent from end to end (the factor without it has no denominator).
    """
    _require_columns(occupancy_table, OCCUPANCY_COLUMNS, "<occupancy>", "occupancy")
    min_ns = _freq_ns(min_duration, "min_duration")
    empty = pd.DataFrame({c: pd.Series([], dtype=float) for c in _SILENT_COLUMNS})
    occ = occupancy_table
    if occ.empty:
        return empty
    start = times_ns(occ["start"], field="start")
    end = times_ns(occ["end"], field="end")
    pools = pd.factorize(occ["pool"])[0]
    silent = np.ones(len(occ), dtype=bool)
    for name in SILENT_CHANNELS:
        silent &= occ[name].to_numpy() == 0
    # An elementary interval between two boundaries is quiet when every pool has a silent row over it
    # and no row that is not silent (a pool with no row there is not known to be silent).
    edges = np.unique(np.concatenate([start, end]))
    quiet = np.ones(edges.size - 1, dtype=bool)
    for p in range(int(pools.max()) + 1):  # a loop over the pools: a handful
        mine = pools == p
        loud = mine & ~silent
        quiet &= _coverage_count(edges, start[mine & silent], end[mine & silent]) > 0
        quiet &= _coverage_count(edges, start[loud], end[loud]) == 0
    change = np.diff(np.r_[0, quiet.astype(np.int8), 0])
    t0, t1 = edges[np.flatnonzero(change == 1)], edges[np.flatnonzero(change == -1)]
    keep = (t1 - t0) >= min_ns
    t0, t1 = t0[keep], t1[keep]
    if t0.size == 0:
        return empty
    in_service = occ["in_service"].to_numpy(dtype=np.float64)
    row_s = (end - start) / _NS
    capacity_s = float(np.dot(in_service, row_s))
    held_s = float(np.dot(occ["held_complete"].to_numpy(dtype=np.float64), row_s))
    inside = np.array([float(np.dot(np.clip(np.minimum(end, b) - np.maximum(start, a), 0, None) / _NS,
                                    in_service))
                       for a, b in zip(t0, t1, strict=True)])  # a loop over the stretches: a handful
    remaining = capacity_s - float(inside.sum())
    if remaining <= 0:
        raise DomainError("the occupancy table is silent from end to end: no capacity-time is left once the "
                          "silent stretches are taken out")
    return pd.DataFrame({
        "start": pd.to_datetime(t0, utc=True),
        "end": pd.to_datetime(t1, utc=True),
        "duration_h": (t1 - t0) / (3600 * _NS),
        "pools": int(pools.max()) + 1,
        "in_service_device_s": inside,
        "scheduling_goodput_without": held_s / remaining,
    })
