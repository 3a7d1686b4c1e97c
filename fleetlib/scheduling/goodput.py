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
coincides with (:func:`fleetlib.scheduling.views.queue_waits` splits each wait into the part spent
while the pool had free devices and the part spent while every device was taken).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, Ledger
from fleetlib.scheduling.schema import (
    LOSS_KEYS,
    Denominator,
    IdleView,
)
from fleetlib.scheduling.sweep import (
    NAT,
    NS,
    PreparedTables,
    clip,
    coverage,
    masked_runs,
    prepare,
    union,
    wsum,
)

__all__ = [
    "SchedulingPartition",
    "scheduling_goodput",
    "scheduling_partition",
    "scheduling_summary",
]

#: Elements per block of the blocked passes: int64 temporaries of 512 KiB that stay in cache and that
#: the allocator reuses, instead of fresh full-length arrays (each a new mapping whose every page is
#: a page fault when first touched).  Measured on 10 M allocations: 2**16 beat 2**18 to 2**22.
_BLOCK = 1 << 16


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
    """Join the per-block runs of :func:`~fleetlib.scheduling.sweep.masked_runs` into the whole's runs."""
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
    per_s = NS // unit  # time units per second (division keeps whole seconds exact)
    iq, pos_all, neg = np.zeros(n), np.zeros(n), np.zeros(n)
    first_over = np.full(n, NAT, dtype=np.int64)
    runs = []
    for pool, start, dur, free, pend in blocks():
        dur_s = dur / per_s
        pos = np.maximum(free, 0) * dur_s
        queued = pend > 0
        iq += wsum(pool, pos * queued, n)
        pos_all += wsum(pool, pos, n)
        if free.size and free.min() < 0:
            neg += wsum(pool, np.minimum(free, 0) * dur_s, n)
            over = np.flatnonzero((free < 0) & (dur > 0))
            if over.size:
                p_u, first = np.unique(pool[over], return_index=True)
                unset = first_over[p_u] == NAT
                first_over[p_u[unset]] = start[over][first[unset]] * unit
        runs.append(masked_runs(pool, start, dur, queued, with_pool=True))
        if sweep is not None:
            sel = np.flatnonzero((free > 0) & ~queued & (dur > 0))
            sweep.stash(pool[sel], start[sel], start[sel] + dur[sel], free[sel])
    ie = pos_all - iq
    us, ue = union(*_merge_runs(runs))
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
        cov = coverage(us, ue, e_sel, before) - coverage(us, ue, s_sel, before)
        extra += wsum(sel_pool, sel_free * (cov / per_s), n)
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


_UNITS: tuple[int, ...] = (NS, 1_000_000, 1_000, 1)


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
        # one block of rows, masked ones included (a block may hold more rows than there are events)
        buf = np.empty(min(_BLOCK, max(int(np.size(d.t)) for d in deltas)), dtype=np.int64)
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


def _partition_arrays(tb: PreparedTables, *, force_argsort: bool = False) -> dict[str, Any]:
    n, w0, w1 = len(tb.names), tb.w0, tb.w1
    out: dict[str, Any] = {}
    if tb.occ is not None:
        o = tb.occ
        s, e = clip(o["start"], w0, w1), clip(o["end"], w0, w1)
        dur = e - s
        dur_s = dur / NS
        out["capacity_device_s"] = wsum(o["pool"], o["in_service"] * dur_s, n)
        out["out_of_service_device_s"] = wsum(o["pool"], o["out_of_service"] * dur_s, n)
        out["held_device_s"] = wsum(o["pool"], o["held_complete"] * dur_s, n)
        out["partial_gang_hold"] = wsum(o["pool"], o["partial_gang"] * dur_s, n)
        out["reservation"] = wsum(o["pool"], o["reserved"] * dur_s, n)
        free = o["in_service"] - o["held_complete"] - o["partial_gang"] - o["reserved"]
        order = np.lexsort((s, o["pool"]))
        out.update(_idle_split(o["pool"][order], s[order], dur[order], free[order],
                               o["pending_jobs"][order], n, 1))
        return out
    c = tb.cap
    assert c is not None
    cdur_s = (clip(c["end"], w0, w1) - clip(c["start"], w0, w1)) / NS
    out["capacity_device_s"] = wsum(c["pool"], c["devices_in_service"] * cdur_s, n)
    out["out_of_service_device_s"] = wsum(c["pool"], c["devices_out_of_service"] * cdur_s, n)
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
        out["reservation"] = wsum(r["pool"], r["devices"] * ((clip(r["end"], w0, w1)
                                                               - clip(r["start"], w0, w1)) / NS), n)
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
        fa, gc, rel = clip(fa_raw, w0, w1), clip(gc_raw, w0, w1), clip(rel_raw, w0, w1)
        held += wsum(pool, hold * ((rel - gc) / NS), n)
        part += wsum(pool, hold * ((gc - fa) / NS), n)
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


def _included_arrays(tb: PreparedTables, *, force_argsort: bool = False) -> dict[str, Any]:
    """Return :func:`_partition_arrays` summed over the window's included pieces.

    Without exclusions the one piece is the window itself.  With exclusions every piece is swept on
    its own (each clips to its ``[a, b)`` as the whole window would) and the device-seconds add up;
    ``first_over`` becomes absolute nanoseconds (the earliest over-allocation of any piece).
    """
    out: dict[str, Any] = {}
    first = np.full(len(tb.names), NAT, dtype=np.int64)
    for a, b in tb.window.pieces:
        w0, w1 = int(a.as_unit("ns").value), int(b.as_unit("ns").value)
        piece = tb if (w0, w1) == (tb.w0, tb.w1) else replace(tb, w0=w0, w1=w1)
        arr = _partition_arrays(piece, force_argsort=force_argsort)
        unset = (first == NAT) & (arr["first_over"] != NAT)
        first[unset] = arr["first_over"][unset] + w0
        for key, value in arr.items():
            if key not in ("first_over", "union"):
                out[key] = value if key not in out else out[key] + value
    out["first_over"] = first
    return out


@dataclass(frozen=True)
class SchedulingPartition:
    """Scheduling goodput and its loss partition, per pool, over one window.

    Attributes
    ----------
    window
        The measured window ``[start, end)``.
    table
        One row per pool, columns :data:`~fleetlib.scheduling.schema.PARTITION_COLUMNS`
        (device-seconds).  For every pool ``capacity_device_s`` equals the sum of ``held_device_s``
        and the five loss columns (``partial_gang_hold, reservation, idle_with_queue,
        idle_empty_queue, unattributed``);
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
    tb = prepare(allocations, capacity, queue, reservations, occupancy, window)
    arr = _included_arrays(tb, force_argsort=_force_argsort)
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
            first = pd.Timestamp(int(arr["first_over"][i]), unit="ns", tz="UTC")
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
