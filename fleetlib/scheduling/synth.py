"""Synthetic fleets of scheduler records with known ground truth, and the canonical Parquet file.

How a fleet is built (so that every loss is injected, not measured)
------------------------------------------------------------------
Each pool is a set of *lanes*: disjoint groups of devices whose width is a job size (1 ... 256
devices).  Time is cut into slots (an hour by default), aligned across pools.  Each lane runs a
sequence of jobs, each spanning whole slots, separated by empty slots:

* in its first slot a job waits ``a`` seconds (idle, or held for it as a *reservation*), then its
  devices are bound and it holds a partial gang for ``b`` seconds, then the gang is complete;
* in its last slot it releases ``c`` seconds before the slot ends (idle tail);
* an elastic job may shrink to half its width inside its last slot; the released half stays
  idle (no other job claims it -- the chapter's elastic rule);
* a rigid job may be retried: the next job on the lane becomes attempt 1 of the same job.

Queue state is fixed per pool and slot: in a *queued* slot every job starting in it was submitted
at the slot start and waits until its gang is complete, so the pool has pending work exactly over
``[slot start, slot start + q)`` where ``q`` is the longest such wait; in other slots jobs start
the moment they are submitted.  Idle device-time is then with-queue or empty-queue by plain
interval arithmetic, per pool and across pools (``q`` maximised over pools).  In some slots part of
a pool's unused devices is out of service (repair), which lowers in-service capacity and
availability only.  Demand is diurnal: night slots lose more jobs and are rarely queued.

The ground truth is computed from these pieces, independently of the sweep in
:mod:`fleetlib.scheduling.goodput`; times are whole seconds, so computed and injected partitions
agree exactly.

The canonical Parquet file
--------------------------
:func:`write_allocations` writes one Parquet file holding the allocations, the capacity and,
when given, the reservations and queue tables.  The file has one schema, the union of the tables'
columns plus a ``table`` column naming the table of each row; each table occupies its own row
groups, listed in the file's key-value metadata under ``fleetlib`` (JSON: ``format``,
``version``, ``tables: {name: [first_row_group, end_row_group, rows]}``).  Times are
``timestamp[ns, UTC]``; columns a table does not have are null in its rows.
The canonical reader (:func:`fleetlib.scheduling.readers.canonical.read`, ``--format canonical``)
reads it back and validates every table into one ledger.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from fleetlib.quality import DomainError
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    CANONICAL_FORMAT,
    CANONICAL_TABLES,
    CAPACITY_COLUMNS,
    PARTITION_COLUMNS,
    RESERVATION_COLUMNS,
    TABLE_COLUMNS,
)

__all__ = [
    "DEFAULT_POOLS",
    "SyntheticFleet",
    "synth_allocations_command",
    "synthetic_fleet",
    "write_allocations",
]


#: Default pools: share of lanes, lane widths (devices) and their probabilities.
DEFAULT_POOLS: dict[str, dict[str, tuple[float, ...] | float]] = {
    "train-large": {"share": 0.2, "widths": (64, 128, 256), "p": (0.5, 0.35, 0.15)},
    "train-small": {"share": 0.3, "widths": (8, 16, 32), "p": (0.5, 0.3, 0.2)},
    "dev": {"share": 0.35, "widths": (1, 2, 4, 8), "p": (0.4, 0.25, 0.2, 0.15)},
    "serve": {"share": 0.15, "widths": (8,), "p": (1.0,)},
}

_END_STATES = ("completed", "failed", "cancelled", "timeout", "preempted")
_END_P = (0.82, 0.08, 0.06, 0.04, 0.0)
_STATE_CODE = {s: i for i, s in enumerate(_END_STATES)}


class SyntheticFleet(NamedTuple):
    """A synthetic fleet: canonical tables and the injected ground truth.

    Attributes
    ----------
    allocations, capacity, reservations
        Canonical tables (:mod:`fleetlib.scheduling.records`).
    truth
        Injected device-seconds per pool, columns
        :data:`~fleetlib.scheduling.goodput.PARTITION_COLUMNS` (``unattributed`` and
        ``over_allocated_device_s`` are zero).
    """

    allocations: pd.DataFrame
    capacity: pd.DataFrame
    reservations: pd.DataFrame
    truth: pd.DataFrame


_HOURS = np.arange(24)
#: Diurnal demand by UTC hour in [0, 1]: zero at night, peaking mid-afternoon.
_DAY = np.where((_HOURS >= 6) & (_HOURS < 22), np.sin(np.pi * (_HOURS - 6) / 16.0), 0.0)


def _day_shape(hour: np.ndarray) -> np.ndarray:
    """Return the diurnal demand level in [0, 1] of whole UTC hours."""
    return _DAY[np.asarray(hour, dtype=np.int64) % 24]


def _overlap(lo: np.ndarray, hi: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(np.minimum(hi, b) - np.maximum(lo, a), 0)


def synthetic_fleet(n: int = 10_000, *, seed: int = 0, days: float | None = None, slot_s: int = 3600,
                    start: Any = "2025-01-06T00:00:00Z", pools: Mapping[str, Mapping[str, Any]] | None = None,
                    mean_job_slots: float = 6.0, mean_gap_slots: float = 0.5, partial_share: float = 0.35,
                    reservation_share: float = 0.15, elastic_share: float = 0.1, retry_share: float = 0.05,
                    out_of_service_share: float = 0.05) -> SyntheticFleet:
    """Generate a fleet with exactly ``n`` allocation rows and its injected loss partition.

    Parameters
    ----------
    n
        Number of allocation rows (attempts and elastic segments), at least 1.
    seed
        Random seed; the same arguments give the same fleet.
    days
        Length of the fleet's record; default 7 days up to 100,000 rows, else 28.
    slot_s
        Slot length in seconds (jobs start and end in slots); at least 8.
    start
        Timezone-aware start of the record.
    pools
        ``{name: {"share": lanes share, "widths": lane widths, "p": their probabilities}}``;
        default :data:`DEFAULT_POOLS`.
    mean_job_slots, mean_gap_slots
        Mean job length and mean empty gap between jobs on a lane, in slots.
    partial_share
        Share of jobs in queued slots that hold a partial gang before completing.
    reservation_share
        Share of waiting jobs whose wait is a recorded reservation of their devices.
    elastic_share
        Share of multi-device jobs that are elastic; 70 % of those shrink to half size.
    retry_share
        Share of rigid jobs that are a retry (next attempt) of the previous rigid job on the lane.
    out_of_service_share
        Share of pool-slots in which some empty devices are out of service.

    Returns
    -------
    SyntheticFleet
        ``(allocations, capacity, reservations, truth)``.

    Examples
    --------
    >>> fleet = synthetic_fleet(200, seed=1)
    >>> len(fleet.allocations), float(fleet.truth["unattributed"].abs().sum())
    (200, 0.0)
    """
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise DomainError(f"n must be a positive integer; got {n!r}")
    n = int(n)
    slot_s = int(slot_s)
    if slot_s < 8:
        raise DomainError(f"slot_s must be at least 8 seconds; got {slot_s!r}")
    for name, v in (("partial_share", partial_share), ("reservation_share", reservation_share),
                    ("elastic_share", elastic_share), ("retry_share", retry_share),
                    ("out_of_service_share", out_of_service_share)):
        if not 0.0 <= float(v) <= 1.0:
            raise DomainError(f"{name} must be a fraction in [0, 1]; got {v!r}")
    if mean_job_slots < 1 or mean_gap_slots < 0:
        raise DomainError("mean_job_slots must be >= 1 and mean_gap_slots >= 0")
    spec = dict(DEFAULT_POOLS if pools is None else pools)
    if not spec:
        raise DomainError("at least one pool is needed")
    t0 = pd.Timestamp(start)
    if t0.tzinfo is None:
        raise DomainError("start must be timezone-aware")
    t0_ns = int(t0.tz_convert("UTC").as_unit("ns").value)
    if days is None:
        days = 7.0 if n <= 100_000 else 28.0
    n_slots = max(1, round(days * 86400 / slot_s))
    rng = np.random.default_rng(seed)
    scale = 1.05
    for _ in range(8):
        out = _generate(n, rng, spec, n_slots, slot_s, t0_ns, scale, mean_job_slots, mean_gap_slots,
                        partial_share, reservation_share, elastic_share, retry_share, out_of_service_share)
        if out is not None:
            return out
        scale *= 1.25
    raise DomainError("could not generate enough allocations; raise days or lower mean_job_slots")


def _generate(n: int, rng: np.random.Generator, spec: Mapping[str, Mapping[str, Any]], n_slots: int,
              slot_s: int, t0_ns: int, scale: float, mean_k: float, mean_g: float, partial_share: float,
              reservation_share: float, elastic_share: float, retry_share: float,
              oos_share: float) -> SyntheticFleet | None:
    names = list(spec)
    n_pools = len(names)
    L = slot_s
    Lq = max(L // 4, 2)
    keep_mean = 0.6 + 0.4 * float(_DAY.mean())
    jobs_per_lane = max(n_slots / (mean_k + mean_g) * keep_mean, 1e-9)
    n_lanes = max(n_pools, math.ceil(n / jobs_per_lane * scale))
    shares = np.array([float(spec[p].get("share", 1.0)) for p in names])
    if np.any(shares <= 0):
        raise DomainError("pool shares must be positive")
    counts = np.maximum(1, np.floor(shares / shares.sum() * n_lanes)).astype(np.int64)
    lane_pool = np.repeat(np.arange(n_pools), counts)
    lane_width = np.empty(lane_pool.size, dtype=np.int64)
    for i, p in enumerate(names):
        widths = np.asarray(spec[p]["widths"], dtype=np.int64)
        prob = np.asarray(spec[p].get("p", np.full(widths.size, 1.0 / widths.size)), dtype=float)
        if widths.size == 0 or np.any(widths < 1) or prob.size != widths.size:
            raise DomainError(f"pool {p!r}: widths must be positive integers with one probability each")
        m = lane_pool == i
        lane_width[m] = rng.choice(widths, size=int(m.sum()), p=prob / prob.sum())
    n_lanes = lane_pool.size
    pool_devices = np.bincount(lane_pool, weights=lane_width, minlength=n_pools).astype(np.int64)

    # tile each lane with (gap, job) pairs
    M = math.ceil(n_slots / (mean_k + mean_g) * 1.25) + 8
    k = rng.geometric(1.0 / mean_k, size=(n_lanes, M)).astype(np.int64)
    g = rng.geometric(1.0 / (mean_g + 1.0), size=(n_lanes, M)).astype(np.int64) - 1
    start_slot = np.cumsum(g + k, axis=1) - k
    valid = start_slot < n_slots
    lane = np.broadcast_to(np.arange(n_lanes)[:, None], (n_lanes, M))[valid]
    s_slot = start_slot[valid]
    e_slot = np.minimum(s_slot + k[valid] - 1, n_slots - 1)
    hour = ((t0_ns // 10**9 + s_slot * L) // 3600) % 24
    keep = rng.random(s_slot.size) < 0.6 + 0.4 * _day_shape(hour)
    lane, s_slot, e_slot = lane[keep], s_slot[keep], e_slot[keep]
    nj = s_slot.size
    pool = lane_pool[lane]
    width = lane_width[lane]

    # elastic jobs; most shrink to half their width inside their last slot (always possible: the
    # complete part of a job's last slot is at least a quarter slot long)
    elastic = (width >= 2) & (rng.random(nj) < elastic_share)
    shrink = elastic & (rng.random(nj) < 0.7)

    # exactly n rows: drop jobs uniformly at random (a shrinking job has two rows)
    rows = 1 + shrink.astype(np.int64)
    if rows.sum() < n:
        return None
    order = rng.permutation(nj)
    csum = np.cumsum(rows[order])
    take = csum <= n
    chosen = np.zeros(nj, dtype=bool)
    chosen[order[take]] = True
    short = n - (int(csum[take][-1]) if take.any() else 0)
    if short:
        rest = order[~take]
        single = rest[rows[rest] == 1]
        if single.size < short:
            return None
        chosen[single[:short]] = True
    lane, s_slot, e_slot, pool, width, elastic, shrink = (
        x[chosen] for x in (lane, s_slot, e_slot, pool, width, elastic, shrink))
    nj = s_slot.size

    # queue state per (pool, slot), diurnal
    ps_hour = ((t0_ns // 10**9 + np.arange(n_slots) * L) // 3600) % 24
    q_prob = 0.1 + 0.7 * _day_shape(ps_hour)
    queued_ps = rng.random((n_pools, n_slots)) < q_prob[None, :]
    queued = queued_ps[pool, s_slot]
    # job times, seconds from the start
    a = rng.integers(0, Lq, size=nj)
    b = np.where(queued & (rng.random(nj) < partial_share), rng.integers(1, Lq, size=nj), 0)
    c = rng.integers(0, Lq, size=nj)
    reserved = queued & (a > 0) & (rng.random(nj) < reservation_share)
    s0 = s_slot * L
    e0 = e_slot * L
    fa = s0 + a
    gc = fa + b
    rel = e0 + L - c
    submit = np.where(queued, s0, fa)
    lo = np.maximum(gc, e0)
    t1 = lo + 1 + (rng.random(nj) * (rel - lo - 1)).astype(np.int64)
    t1 = np.where(shrink, np.minimum(t1, rel - 1), rel)
    half = width // 2
    qlen = np.zeros(n_pools * n_slots, dtype=np.int64)
    np.maximum.at(qlen, pool * n_slots + s_slot, np.where(queued, a + b, 0))
    qlen = qlen.reshape(n_pools, n_slots)
    qmax = qlen.max(axis=0)

    # retries: a rigid job following a rigid job on the same lane may be its next attempt
    first_on_lane = np.r_[True, lane[1:] != lane[:-1]]
    prev_rigid = np.r_[False, ~elastic[:-1]]
    retry = ~first_on_lane & ~elastic & prev_rigid & (rng.random(nj) < retry_share)
    job_id = np.cumsum(~retry) - 1
    attempt = np.arange(nj) - np.maximum.accumulate(np.where(~retry, np.arange(nj), 0))
    state = rng.choice(len(_END_STATES), size=nj, p=_END_P)
    retried = np.r_[retry[1:], False]
    state = np.where(retried, _STATE_CODE["preempted"], state)
    state = np.where(shrink, _STATE_CODE["completed"], state)
    priority = rng.integers(0, 3, size=nj)

    # rows: every job, then the second segment of a shrinking job right after its first
    si = np.flatnonzero(shrink)
    pos = np.arange(nj) + np.cumsum(shrink) - shrink
    nr = nj + si.size
    seg = pos[si] + 1

    def place(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = np.empty(nr, dtype=np.result_type(x, y))
        out[pos] = x
        out[seg] = y
        return out

    def utc(x: np.ndarray) -> pd.DatetimeIndex:
        return pd.to_datetime(x * 10**9 + t0_ns, unit="ns", utc=True)

    allocations = pd.DataFrame({
        "job_id": place(job_id, job_id[si]).astype(np.int64),
        "attempt": place(attempt, np.ones(si.size, dtype=np.int64)).astype(np.int64),
        "pool": pd.Categorical.from_codes(place(pool, pool[si]), categories=names),
        "devices": place(width, half[si]).astype(np.int64),
        "submit": utc(place(submit, t1[si])),
        "first_assigned": utc(place(fa, t1[si])),
        "gang_complete": utc(place(gc, t1[si])),
        "release": utc(place(np.where(shrink, t1, rel), rel[si])),
        "priority": place(priority, priority[si]).astype(np.int64),
        "elastic": place(elastic, np.ones(si.size, dtype=bool)),
        "end_state": pd.Categorical.from_codes(place(state, state[si]), categories=list(_END_STATES)),
        "requested_devices": place(width, half[si]).astype(np.int64),
    })[list(ALLOCATION_COLUMNS)]

    ri = np.flatnonzero(reserved)
    reservations = pd.DataFrame({
        "pool": pd.Categorical.from_codes(pool[ri], categories=names),
        "start": utc(s0[ri]),
        "end": utc(fa[ri]),
        "devices": width[ri].astype(np.int64),
        "for_job_id": job_id[ri].astype(np.int64),
    })[list(RESERVATION_COLUMNS)]

    # busy width per pool-slot (lanes inside a job's span), out-of-service among the empty devices
    diff = np.zeros(n_pools * (n_slots + 1), dtype=np.int64)
    np.add.at(diff, pool * (n_slots + 1) + s_slot, width)
    np.add.at(diff, pool * (n_slots + 1) + e_slot + 1, -width)
    busy = np.cumsum(diff.reshape(n_pools, n_slots + 1), axis=1)[:, :n_slots]
    empty = pool_devices[:, None] - busy
    oos = np.where(rng.random((n_pools, n_slots)) < oos_share, rng.binomial(empty, 0.3), 0).astype(np.int64)
    in_service = pool_devices[:, None] - oos
    slot_start = np.arange(n_slots, dtype=np.int64) * L
    capacity = pd.DataFrame({
        "pool": pd.Categorical.from_codes(np.repeat(np.arange(n_pools), n_slots), categories=names),
        "start": pd.to_datetime(np.tile(slot_start, n_pools) * 10**9 + t0_ns, unit="ns", utc=True),
        "end": pd.to_datetime(np.tile(slot_start + L, n_pools) * 10**9 + t0_ns, unit="ns", utc=True),
        "devices_in_service": in_service.ravel(),
        "devices_out_of_service": oos.ravel(),
    })[list(CAPACITY_COLUMNS)]

    # ---- ground truth from the injected pieces ----
    def per_pool(p: np.ndarray, v: np.ndarray) -> np.ndarray:
        return np.bincount(p, weights=v, minlength=n_pools)[:n_pools] if p.size else np.zeros(n_pools)

    held = (per_pool(pool, width * (np.where(shrink, t1, rel) - gc))
            + per_pool(pool[si], half[si] * (rel - t1)[si]))
    partial = per_pool(pool, width * b)
    reservation = per_pool(pool[ri], width[ri] * a[ri])
    # idle pieces: (pool, slot, lo, hi, devices), times in seconds from the start
    lead = ~reserved
    pieces = [
        (pool[lead], s_slot[lead], s0[lead], fa[lead], width[lead]),
        (pool, e_slot, rel, e0 + L, width),
        (pool[si], e_slot[si], t1[si], rel[si], (width - half)[si]),
    ]
    pp, sl = np.divmod(np.arange(n_pools * n_slots), n_slots)
    pieces.append((pp, sl, sl * L, sl * L + L, (in_service - busy).ravel()))
    iq = np.zeros(n_pools)
    idle = np.zeros(n_pools)
    ciq = np.zeros(n_pools)
    for p_, s_, lo_, hi_, d_ in pieces:
        base = s_ * L
        idle += per_pool(p_, d_ * (hi_ - lo_))
        iq += per_pool(p_, d_ * _overlap(lo_, hi_, base, base + qlen[p_, s_]))
        ciq += per_pool(p_, d_ * _overlap(lo_, hi_, base, base + qmax[s_]))
    cap = in_service.sum(axis=1).astype(float) * L
    oos_s = oos.sum(axis=1).astype(float) * L
    truth = pd.DataFrame({
        "capacity_device_s": cap,
        "installed_device_s": cap + oos_s,
        "out_of_service_device_s": oos_s,
        "held_device_s": held,
        "partial_gang_hold": partial,
        "reservation": reservation,
        "idle_with_queue": iq,
        "idle_empty_queue": idle - iq,
        "unattributed": cap - held - partial - reservation - idle,
        "cross_pool_idle_with_queue": ciq,
        "cross_pool_idle_empty_queue": idle - ciq,
        "over_allocated_device_s": np.zeros(n_pools),
    }, index=pd.Index(names, name="pool", dtype=object))[list(PARTITION_COLUMNS)]
    truth = truth.sort_index()
    return SyntheticFleet(allocations, capacity, reservations, truth)


# ---------------------------------------------------------------------------------------------------
# The canonical Parquet file
# ---------------------------------------------------------------------------------------------------

_TABLE_ORDER = CANONICAL_TABLES
_TABLE_COLUMNS = {name: TABLE_COLUMNS[name] for name in CANONICAL_TABLES}


def write_allocations(allocations: pd.DataFrame, capacity: pd.DataFrame, path: str | Path, *,
                      reservations: pd.DataFrame | None = None, queue: pd.DataFrame | None = None,
                      row_group_size: int = 1_000_000) -> Path:
    """Write canonical allocations, capacity (and reservations, queue) to one Parquet file.

    The layout is described in the module docstring: the union of the tables' columns plus a
    ``table`` column, each table in its own row groups, listed in the ``fleetlib`` metadata.

    Parameters
    ----------
    allocations, capacity
        Canonical tables.
    path
        Output file (``.parquet``).
    reservations, queue
        Optional canonical tables.
    row_group_size
        Rows per row group.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = {"allocations": allocations, "capacity": capacity, "reservations": reservations, "queue": queue}
    for name, df in tables.items():
        if df is not None:
            missing = [c for c in _TABLE_COLUMNS[name] if c not in df.columns]
            if missing:
                raise DomainError(f"{name} lacks column(s) {missing}")
    ts = pa.timestamp("ns", tz="UTC")
    job_type = pa.int64() if pd.api.types.is_integer_dtype(allocations["job_id"].dtype) else pa.string()
    prio_type = pa.int64() if pd.api.types.is_integer_dtype(allocations["priority"].dtype) else pa.float64()
    types = {"table": pa.string(), "job_id": job_type, "attempt": pa.int64(), "pool": pa.string(),
             "devices": pa.int64(), "submit": ts, "first_assigned": ts, "gang_complete": ts, "release": ts,
             "priority": prio_type, "elastic": pa.bool_(), "end_state": pa.string(),
             "requested_devices": pa.int64(), "start": ts, "end": ts, "devices_in_service": pa.int64(),
             "devices_out_of_service": pa.int64(), "pending_jobs": pa.int64(), "pending_devices": pa.int64(),
             "for_job_id": job_type}
    schema = pa.schema([(k, v) for k, v in types.items()])
    meta: dict[str, Any] = {"format": CANONICAL_FORMAT, "version": 1, "tables": {}}
    out = Path(path)
    groups = 0
    with pq.ParquetWriter(out, schema) as writer:
        for name in _TABLE_ORDER:
            df = tables[name]
            if df is None:
                continue
            n = len(df)
            arrays = []
            for fld in schema:
                if fld.name == "table":
                    arrays.append(pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                                                 pa.array([name])).cast(pa.string()))
                elif fld.name in _TABLE_COLUMNS[name]:
                    arrays.append(_arrow_column(df[fld.name], fld.type))
                else:
                    arrays.append(pa.nulls(n, type=fld.type))
            table = pa.Table.from_arrays(arrays, schema=schema)
            first = groups
            for off in range(0, max(n, 1), row_group_size):
                writer.write_table(table.slice(off, row_group_size))
                groups += 1
            meta["tables"][name] = [first, groups, n]
        writer.add_key_value_metadata({"fleetlib": json.dumps(meta)})
    return out


def _arrow_column(col: pd.Series, typ: Any) -> Any:
    """Convert one pandas column to an Arrow array of the file's type (vectorised)."""
    import pyarrow as pa

    if pa.types.is_timestamp(typ):
        return pa.array(col.dt.tz_convert("UTC").dt.as_unit("ns"), type=typ, from_pandas=True)
    if pa.types.is_string(typ):
        if isinstance(col.dtype, pd.CategoricalDtype):
            cats = col.cat.categories.astype(str)
            col = pd.Series(pd.Categorical.from_codes(col.cat.codes, categories=cats))
            return pa.array(col, from_pandas=True).cast(pa.string())
        return pa.array(col.astype("string"), from_pandas=True).cast(pa.string())
    return pa.array(col, type=typ, from_pandas=True)


def synth_allocations_command(n: int, seed: int, out: str | Path, *,
                              days: float | None = None) -> dict[str, Any]:
    """Generate a synthetic fleet, write it as a canonical Parquet file and describe it.

    The logic of ``fleetlib synth allocations --n N --seed S --out FILE.parquet``; the file is read
    back by ``fleetlib scheduling FILE.parquet --format canonical``.

    Parameters
    ----------
    n
        Allocation rows.
    seed
        Random seed.
    out
        Output Parquet path.
    days
        Record length (default as in :func:`synthetic_fleet`).

    Returns
    -------
    dict
        ``path, allocations, capacity_rows, reservation_rows, window {start, end}, pools`` and
        ``truth``: the injected device-seconds per pool (the columns of
        :data:`~fleetlib.scheduling.goodput.PARTITION_COLUMNS`) and the fleet's injected
        ``scheduling_goodput``.
    """
    fleet = synthetic_fleet(n, seed=seed, days=days)
    path = write_allocations(fleet.allocations, fleet.capacity, out, reservations=fleet.reservations)
    tot = fleet.truth.sum()
    return {
        "path": str(path),
        "allocations": len(fleet.allocations),
        "capacity_rows": len(fleet.capacity),
        "reservation_rows": len(fleet.reservations),
        "window": {"start": fleet.capacity["start"].min().isoformat(),
                   "end": fleet.capacity["end"].max().isoformat()},
        "pools": [str(p) for p in fleet.truth.index],
        "truth": {
            "scheduling_goodput": float(tot["held_device_s"] / tot["capacity_device_s"]),
            "pools": {str(p): {k: float(v) for k, v in row.items()} for p, row in fleet.truth.iterrows()},
        },
    }
