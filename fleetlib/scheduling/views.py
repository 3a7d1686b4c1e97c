"""Derived tables for analysts: views computed from the canonical scheduler tables.

Nothing here is the scheduling factor itself (that is :mod:`fleetlib.scheduling.goodput`); each
function summarises the same records another way for a notebook or a report:

* the full step function per pool (:func:`occupancy`), the queue derived from allocations
  (:func:`derive_queue`) and S as a time series (:func:`goodput_timeseries`);
* per-job views: held time (:func:`held_time`), queue waits split by whether devices were free
  (:func:`queue_waits`), goodput by job-size cohort (:func:`cohort_goodput`), and the openb waits
  by size cohort (:func:`openb_cohorts`), and the mix of end states by count and device-time
  (:func:`status_mix`);
* fragmentation (:func:`stranded_devices`, :func:`fragmentation_index`);
* stretches in which every pool reports nothing (:func:`silent_stretches`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from fleetlib.accounting import Window
from fleetlib.quality import DomainError
from fleetlib.scheduling.goodput import scheduling_partition
from fleetlib.scheduling.measure import collection_gaps
from fleetlib.scheduling.records import times_ns
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    DEFAULT_COHORT_EDGES,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    require_columns,
)
from fleetlib.scheduling.sweep import (
    NAT,
    NS,
    EventBlock,
    PreparedTables,
    as_window,
    clip,
    coverage,
    device_counts,
    inside,
    masked_runs,
    pool_codes,
    pool_names,
    prepare,
    segments,
    sort_events,
    union,
    wsum,
)

__all__ = [
    "cohort_goodput",
    "derive_queue",
    "fragmentation_index",
    "goodput_timeseries",
    "held_time",
    "occupancy",
    "openb_cohorts",
    "queue_waits",
    "silent_stretches",
    "status_mix",
    "stranded_devices",
]


def openb_cohorts(waits: pd.DataFrame) -> pd.DataFrame:
    """Summarise openb waits by size cohort.

    Parameters
    ----------
    waits
        The ``waits`` table the openb reader returns (:func:`fleetlib.scheduling.readers.openb.read`).

    Returns
    -------
    pandas.DataFrame
        One row per cohort (CPU only, shared, 1, 2, 4, 8 GPUs ...) with ``pods``, ``scheduled_pods``,
        ``never_scheduled`` (censored waits), ``devices_requested``, ``wait_p50_s``, ``wait_p90_s``,
        ``wait_max_s`` and ``share_waited`` (share of scheduled pods that waited more than 0 s); the
        wait statistics cover scheduled pods only.
    """
    missing = [c for c in ("cohort", "devices", "wait_s", "scheduled") if c not in waits.columns]
    if missing:
        raise DomainError(f"waits table lacks column(s) {missing}; pass the waits table the openb reader "
                          "returns")
    s = waits[waits["scheduled"]]
    g = s.groupby("cohort")["wait_s"]
    out = pd.DataFrame(
        {
            "pods": waits.groupby("cohort").size(),
            "scheduled_pods": g.size(),
            "devices_requested": waits.groupby("cohort")["devices"].sum(),
            "wait_p50_s": g.quantile(0.5),
            "wait_p90_s": g.quantile(0.9),
            "wait_max_s": g.max(),
            "share_waited": s.assign(w=s["wait_s"] > 0).groupby("cohort")["w"].mean(),
        }
    )
    out["scheduled_pods"] = out["scheduled_pods"].fillna(0).astype("int64")
    out["never_scheduled"] = out["pods"] - out["scheduled_pods"]
    order = {"CPU only": -2.0, "shared (<1 GPU)": -1.0}
    key = [order[c] if c in order else float(str(c).split()[0]) for c in out.index]
    out = out.iloc[np.argsort(np.asarray(key), kind="stable")]
    return out.reset_index()[
        [
            "cohort",
            "pods",
            "scheduled_pods",
            "never_scheduled",
            "devices_requested",
            "wait_p50_s",
            "wait_p90_s",
            "wait_max_s",
            "share_waited",
        ]
    ]


# ---------------------------------------------------------------------------------------------------
# The full step function (occupancy), the derived queue and the time series
# ---------------------------------------------------------------------------------------------------

_OCC_CHANNELS: tuple[str, ...] = OCCUPANCY_COLUMNS[3:]


def _occupancy_arrays(tb: PreparedTables, channels: Sequence[str] = _OCC_CHANNELS
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Sweep every channel; return pool, start, end (ns from w0) and channel values of the rows."""
    w0, w1, n = tb.w0, tb.w1, len(tb.names)
    if tb.occ is not None:
        o = tb.occ
        s, e = clip(o["start"], w0, w1), clip(o["end"], w0, w1)
        keep = e > s
        order = np.lexsort((s[keep], o["pool"][keep]))
        return (o["pool"][keep][order], s[keep][order], e[keep][order],
                {c: o[c][keep][order] for c in channels})
    ci = {name: i for i, name in enumerate(channels)}
    blocks: list[EventBlock] = []

    def add(name: str, pool: np.ndarray, t0: np.ndarray, t1: np.ndarray, mag: np.ndarray | int) -> None:
        if name in ci:
            blocks.extend([EventBlock(pool, t0, 2 * ci[name] + 1, mag),
                           EventBlock(pool, t1, 2 * ci[name], mag)])

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
    pool, t, code, mag = sort_events(blocks, w0, w1, n, 2 * len(channels))
    vals = {}
    for name, i in ci.items():
        vals[name] = np.cumsum(np.where(code == 2 * i + 1, mag, 0) - np.where(code == 2 * i, mag, 0))[:-1]
    sp, st, dur = segments(pool, t)
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


def _frame(tb: PreparedTables, pool: np.ndarray, start: np.ndarray, end: np.ndarray,
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
    tb = prepare(allocations, capacity, queue, reservations, None, window)
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
    tb = prepare(allocations, None, None, None, None, window, need_capacity=False)
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

    Bins are aligned to multiples of ``freq`` since the Unix epoch (UTC), cut to the window; the
    window's exclusions count no time in the bins they fall in.

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
    tb = prepare(allocations, capacity, queue, reservations, occupancy, window)
    n, w0, w1 = len(tb.names), tb.w0, tb.w1
    pool, s, e, v = _occupancy_arrays(tb)
    us, ue = union(*masked_runs(pool, s, e - s, v["pending_jobs"] > 0))
    b0, b1 = w0 // f, (w1 - 1) // f
    nb = int(b1 - b0 + 1)
    edges = np.arange(b0 + 1, b1 + 1, dtype=np.int64) * f - w0
    # the window's exclusions (ns from w0): cut at their bounds, their pieces count no time
    xs = np.array([int(a.as_unit("ns").value) - w0 for a, _ in tb.window.exclusions], dtype=np.int64)
    xe = np.array([int(b.as_unit("ns").value) - w0 for _, b in tb.window.exclusions], dtype=np.int64)
    cuts = np.union1d(edges, np.concatenate([us, ue, xs, xe]))
    cuts = cuts[(cuts > 0) & (cuts < w1 - w0)]
    idx, ps, pe = _split_at(s, e, cuts)
    dur_s = (pe - ps) / NS
    if xs.size:
        dur_s = np.where(inside(xs, xe, ps), 0.0, dur_s)
    p = pool[idx]
    b = (ps + w0) // f - b0
    key = p * nb + b
    m = n * nb
    free = (v["in_service"] - v["held_complete"] - v["partial_gang"] - v["reserved"])[idx]
    pos = np.maximum(free, 0) * dur_s
    own = v["pending_jobs"][idx] > 0
    glob = inside(us, ue, ps)
    cols = {
        "capacity_device_s": wsum(key, v["in_service"][idx] * dur_s, m),
        "out_of_service_device_s": wsum(key, v["out_of_service"][idx] * dur_s, m),
        "held_device_s": wsum(key, v["held_complete"][idx] * dur_s, m),
        "partial_gang_hold": wsum(key, v["partial_gang"][idx] * dur_s, m),
        "reservation": wsum(key, v["reserved"][idx] * dur_s, m),
        "idle_with_queue": wsum(key, pos * own, m),
        "idle_empty_queue": wsum(key, pos * ~own, m),
        "unattributed": wsum(key, np.minimum(free, 0) * dur_s, m),
        "cross_pool_idle_with_queue": wsum(key, pos * glob, m),
        "cross_pool_idle_empty_queue": wsum(key, pos * ~glob, m),
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
    require_columns(allocations, ALLOCATION_COLUMNS, "<allocations>", "allocations")
    t = {c: times_ns(allocations[c], file="<allocations>", field=c)
         for c in ("submit", "first_assigned", "gang_complete", "release")}
    assigned = t["first_assigned"] != NAT
    missing = (t["release"] == NAT) | (t["submit"] == NAT) | (assigned & (t["gang_complete"] == NAT))
    if np.any(missing):
        raise DomainError("allocations with missing times: validate the table first")
    t["assigned"] = assigned
    t["pend_end"] = np.where(assigned, t["gang_complete"], t["release"])
    t["first_assigned"] = np.where(assigned, t["first_assigned"], t["release"])
    t["gang_complete"] = np.where(assigned, t["gang_complete"], t["release"])
    win = None
    if window is not None:
        _, _, win = as_window(window, None)
    return t, win


def _inside_s(start: np.ndarray, end: np.ndarray, win: Window | None) -> np.ndarray:
    """Seconds of each ``[start, end)`` (ns) inside the window's included pieces (all of it without a window).

    Each piece clips the intervals as a window does and the pieces' seconds add up: a window without
    exclusions is its one piece.
    """
    if win is None:
        return (end - start) / NS
    out = np.zeros(start.shape)
    for a, b in win.pieces:
        w0, w1 = int(a.as_unit("ns").value), int(b.as_unit("ns").value)
        out = out + (np.clip(end, w0, w1) - np.clip(start, w0, w1)) / NS
    return out


def _clipped(t: np.ndarray, win: Window | None) -> np.ndarray:
    """Return times clipped to the window's span (unchanged without a window)."""
    if win is None or win.start is None or win.end is None:
        return t
    return np.clip(t, int(win.start.as_unit("ns").value), int(win.end.as_unit("ns").value))


def held_time(allocations: pd.DataFrame, *, window: Any = None, by: Literal["job", "attempt"] = "job"
              ) -> pd.DataFrame:
    """Held time of complete allocations per job (the runtime factor's denominator).

    Parameters
    ----------
    allocations
        Canonical allocations.
    window
        Cut every interval to this window (to its included pieces when it has exclusions; the first
        and last times are clipped to its span); default: no cut.
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
    t, win = _alloc_times(allocations, window)
    dev = device_counts(allocations["devices"], "allocations.devices")
    hold = np.where(t["assigned"], dev, 0)
    held_s = _inside_s(t["gang_complete"], t["release"], win)
    part_s = _inside_s(t["first_assigned"], t["gang_complete"], win)
    rows = pd.DataFrame({
        "job_id": allocations["job_id"].to_numpy(),
        "attempt": allocations["attempt"].to_numpy(),
        "pool": allocations["pool"].to_numpy(),
        "devices": hold,
        "held_s": held_s,
        "held_device_s": hold * held_s,
        "partial_hold_s": part_s,
        "partial_hold_device_s": hold * part_s,
        "first_gang_complete": pd.to_datetime(np.where(t["assigned"], _clipped(t["gang_complete"], win), NAT),
                                              unit="ns", utc=True),
        "last_release": pd.to_datetime(np.where(t["assigned"], _clipped(t["release"], win), NAT), unit="ns",
                                       utc=True),
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


def status_mix(allocations: pd.DataFrame, *, window: Any = None) -> pd.DataFrame:
    """Return the mix of end states: how many attempts ended each way and the device-time they held.

    Parameters
    ----------
    allocations
        Canonical allocations.
    window
        Cut the held time to this window (see :func:`held_time`); default: no cut.

    Returns
    -------
    pandas.DataFrame
        One row per ``end_state`` (most attempts first): ``end_state, attempts, jobs,
        attempt_share, held_device_s, held_share`` (shares of all attempts and of all held
        device-time; ``held_share`` is None when nothing was held).
    """
    held = held_time(allocations, window=window, by="attempt")
    rows = pd.DataFrame({"end_state": allocations["end_state"].astype(str).to_numpy(),
                         "job_id": held["job_id"].to_numpy(),
                         "held_device_s": held["held_device_s"].to_numpy()})
    out = rows.groupby("end_state", sort=False).agg(attempts=("job_id", "size"), jobs=("job_id", "nunique"),
                                                     held_device_s=("held_device_s", "sum"))
    out = out.sort_values(["attempts", "held_device_s"], ascending=False, kind="stable")
    total_held = float(out["held_device_s"].sum())
    out.insert(2, "attempt_share", out["attempts"] / max(len(rows), 1))
    out["held_share"] = (out["held_device_s"] / total_held) if total_held > 0 else None
    return out.reset_index()


def _free_runs(allocations: pd.DataFrame, capacity: pd.DataFrame, reservations: pd.DataFrame | None,
               window: tuple[pd.Timestamp, pd.Timestamp]
               ) -> tuple[PreparedTables, np.ndarray, np.ndarray, np.ndarray]:
    """Return the intervals, per pool, during which the pool had at least one free in-service device."""
    tb = prepare(allocations, capacity, None, reservations, None, window)
    pool, s, e, v = _occupancy_arrays(tb, channels=("in_service", "held_complete", "partial_gang",
                                                    "reserved"))
    free = v["in_service"] - v["held_complete"] - v["partial_gang"] - v["reserved"]
    rs, re, rp = masked_runs(pool, s, e - s, free > 0, with_pool=True)
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
    wait_s = (t["pend_end"] - t["submit"]) / NS
    pending_s = (t["first_assigned"] - t["submit"]) / NS
    pending_s = np.where(t["assigned"], pending_s, wait_s)
    completed = t["assigned"] & (t["gang_complete"] < t["release"])
    out = pd.DataFrame({
        "job_id": allocations["job_id"].to_numpy(),
        "attempt": allocations["attempt"].to_numpy(),
        "pool": allocations["pool"].to_numpy(),
        "requested_devices": allocations["requested_devices"].to_numpy(),
        "submit": pd.to_datetime(t["submit"], unit="ns", utc=True),
        "gang_complete": pd.to_datetime(np.where(completed, t["gang_complete"], NAT), unit="ns", utc=True),
        "completed": completed,
        "wait_s": wait_s,
        "pending_s": pending_s,
        "partial_hold_s": np.where(t["assigned"], (t["gang_complete"] - t["first_assigned"]) / NS, 0.0),
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
        pc = pool_codes(allocations["pool"], tb.names)
        a0 = np.clip(t["submit"], tb.w0, tb.w1) - tb.w0 + pc * span
        a1 = np.clip(t["pend_end"], tb.w0, tb.w1) - tb.w0 + pc * span
        idle = (coverage(us, ue, a1) - coverage(us, ue, a0)) / NS
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
    t, win = _alloc_times(allocations, window)
    dev = device_counts(allocations["devices"], "allocations.devices")
    req = device_counts(allocations["requested_devices"], "allocations.requested_devices")
    hold = np.where(t["assigned"], dev, 0)
    size = pd.Series(req).groupby(allocations["job_id"].to_numpy(), sort=False).transform("max").to_numpy()
    labels = _cohort_labels(e)
    cohort = pd.Categorical.from_codes(np.searchsorted(np.asarray(e), size, side="left"), categories=labels,
                                       ordered=True)
    rows = pd.DataFrame({
        "cohort": cohort,
        "job_id": allocations["job_id"].to_numpy(),
        "held_device_s": hold * _inside_s(t["gang_complete"], t["release"], win),
        "partial_gang_hold": hold * _inside_s(t["first_assigned"], t["gang_complete"], win),
        "demand_device_s": req * _inside_s(t["submit"], t["release"], win),
        "wait_s": _inside_s(t["submit"], t["pend_end"], win),
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
    require_columns(node_free, ("pool", "node", "start", "end", "node_devices", "free_devices"),
                     "<node_free>", "node_free")
    require_columns(allocations, ALLOCATION_COLUMNS, "<allocations>", "allocations")
    names = pool_names(node_free["pool"], allocations["pool"])
    ns0 = times_ns(node_free["start"], file="<node_free>", field="start")
    ns1 = times_ns(node_free["end"], file="<node_free>", field="end")
    default = (int(ns0.min()), int(ns1.max())) if len(node_free) else None
    w0, w1, _ = as_window(window, default)
    n = len(names)
    nd = device_counts(node_free["node_devices"], "node_free.node_devices")
    fr = device_counts(node_free["free_devices"], "node_free.free_devices")
    if np.any(fr > nd) or np.any(nd < 1):
        raise DomainError("node_free: free_devices must lie in [0, node_devices], node_devices >= 1")
    npool = pool_codes(node_free["pool"], names)
    t, _ = _alloc_times(allocations, None)
    apool = pool_codes(allocations["pool"], names)
    req = device_counts(allocations["requested_devices"], "allocations.requested_devices")
    waiting = (t["pend_end"] > t["submit"]) & (req > 0)
    sizes = np.unique(req[waiting])
    span = w1 - w0 + 1
    s_rel, e_rel = clip(ns0, w0, w1), clip(ns1, w0, w1)
    q0, q1 = s_rel + npool * span, e_rel + npool * span
    free_s = np.zeros(n)
    strand_s = np.zeros(n)
    pending_s = np.zeros(n)
    if sizes.size:
        blocks = []
        for k, g in enumerate(sizes.tolist()):
            m = waiting & (req == g)
            blocks += [EventBlock(apool[m], t["submit"][m], 2 * k + 1, 1),
                       EventBlock(apool[m], t["pend_end"][m], 2 * k, 1)]
        pool, tt, code, _ = sort_events(blocks, w0, w1, n, 2 * sizes.size)
        counts = np.stack([np.cumsum((code == 2 * k + 1).astype(np.int64) - (code == 2 * k))
                           for k in range(sizes.size)], axis=1)[:-1]
        sp, st, dur = segments(pool, tt)
        any_p = counts > 0
        smallest = np.where(any_p.any(axis=1), np.argmax(any_p, axis=1), -1)
        pending_s = wsum(sp, (smallest >= 0) * (dur / NS), n)
        for k, g in enumerate(sizes.tolist()):
            rs, re, rp = masked_runs(sp, st, dur, smallest == k, with_pool=True)
            if rs.size == 0:
                continue
            # one sorted interval set across pools: pool p's times are offset by p * span
            us, ue = union(rs + rp * span, re + rp * span)
            cov = (coverage(us, ue, q1) - coverage(us, ue, q0)) / NS
            free_s += wsum(npool, fr * cov, n)
            stranded = (fr > 0) & (fr < np.minimum(g, nd))
            strand_s += wsum(npool, fr * stranded * cov, n)
    out = pd.DataFrame({"pool": list(names), "pending_s": pending_s, "free_device_s_while_pending": free_s,
                        "stranded_device_s": strand_s})
    den = out["free_device_s_while_pending"].astype("Float64")
    out["fragmentation_index"] = (out["stranded_device_s"].astype("Float64") / den).where(den > 0, pd.NA)
    return out


#: Occupancy channels that must all be zero, in every pool at once, for an instant to count as silent.

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
    require_columns(occupancy_table, OCCUPANCY_COLUMNS, "<occupancy>", "occupancy")
    min_ns = _freq_ns(min_duration, "min_duration")
    empty = pd.DataFrame({c: pd.Series([], dtype=float) for c in _SILENT_COLUMNS})
    occ = occupancy_table
    if occ.empty:
        return empty
    start = times_ns(occ["start"], field="start")
    end = times_ns(occ["end"], field="end")
    pools = pd.factorize(occ["pool"])[0]
    span = Window.between(pd.Timestamp(int(start.min()), tz="UTC"), pd.Timestamp(int(end.max()), tz="UTC"))
    gaps = collection_gaps({"occupancy": occ}, span, min_gap_s=min_ns / NS)
    t0, t1 = times_ns(gaps["start"], field="start"), times_ns(gaps["end"], field="end")
    if t0.size == 0:
        return empty
    in_service = occ["in_service"].to_numpy(dtype=np.float64)
    row_s = (end - start) / NS
    capacity_s = float(np.dot(in_service, row_s))
    held_s = float(np.dot(occ["held_complete"].to_numpy(dtype=np.float64), row_s))
    inside = gaps["device_s"].to_numpy(dtype=np.float64)
    remaining = capacity_s - float(inside.sum())
    if remaining <= 0:
        raise DomainError("the occupancy table is silent from end to end: no capacity-time is left once the "
                          "silent stretches are taken out")
    return pd.DataFrame({
        "start": pd.to_datetime(t0, utc=True),
        "end": pd.to_datetime(t1, utc=True),
        "duration_h": (t1 - t0) / (3600 * NS),
        "pools": int(pools.max()) + 1,
        "in_service_device_s": inside,
        "scheduling_goodput_without": held_s / remaining,
    })
