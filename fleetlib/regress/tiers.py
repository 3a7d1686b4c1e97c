"""Table 4's regression tiers as metric sets, each read from the record that settles its factor.

Every metric is a ratio of sums over one unit table of :class:`~fleetlib.regress.units.FleetUnits`
(resampled at its own unit: :data:`RESAMPLING`, or the metric's ``cluster``):

=====================  ========  ===================================================================
tier                   factor    metrics
=====================  ========  ===================================================================
``canaries``           program   P (MFU of retained steps) of 1-node jobs and of each multi-node size:
                                 the scaling-efficiency curve (:func:`scaling_curve`)
``fleet_baseline``     program   retained-step MFU (P of the jobs with a model config) per architecture x
                                 software version
``gray_failure``       program   share of retained steps above 1.05 x the job's fault-free step;
                                 straggler rank-steps per 1,000 (per-rank timers over the step's
                                 median by more than the bound); straggler episodes (a finding)
``startup_recovery``   runtime   gang complete -> first step (startup) per job; checkpoint pause per
                                 commit; elastic wait per resize (device-s); restarts per 1,000
                                 held device-hours; rework share and
                                 data stall ratio (input wait) of held time
``allocation``         scheduling queue wait to gang completion per job; partial-gang hold and idle
                                 while queued (stranded capacity) as shares of in-service capacity,
                                 over whole demand cycles
=====================  ========  ===================================================================

The fragmentation index needs node-level free devices, which a fleet bundle's scheduler records do
not give measure_fleet; the allocation tier names it as not measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.fleet.results import RUNTIME_LOSSES

__all__ = [
    "REFERENCE_QUANTILE",
    "STRAGGLER_BOUND",
    "TIERS",
    "Metric",
    "factor_metrics",
    "rank_step_table",
    "scaling_curve",
    "tier_metrics",
]

#: Tier names in Table 4's order, with their factor.
TIERS: dict[str, str] = {
    "canaries": "program",
    "fleet_baseline": "program",
    "gray_failure": "program",
    "startup_recovery": "runtime",
    "allocation": "scheduling",
}
#: A rank (or step) is slow when its timer exceeds its reference by more than this fraction.
STRAGGLER_BOUND: float = 0.05
#: A rank's reference: this quantile of its step's rank times.
REFERENCE_QUANTILE: float = 0.25
_S_LOSSES = ("partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue", "unattributed")
_P_LOSSES = ("step_time_above_baseline", "below_ideal_rate", "program_unobserved")
#: Per unit table: the column naming each row's resampling unit, and the unit in words.  A unit's
#: rows are summed first (a job's retained steps, a cycle's pools); units are then resampled whole.
RESAMPLING: dict[str, tuple[str, str]] = {
    "cycles": ("cycle_key", "whole demand cycles"),
    "jobs": ("job_key", "jobs"),
    "commits": ("job_key", "jobs (their checkpoint commits summed)"),
    "steps": ("job_key", "jobs (their retained steps summed)"),
    "rank_steps": ("job_key", "jobs (their per-rank timer steps summed)"),
}
#: A metric's own unit when it overrides its table's (``Metric.cluster``), in words.
CLUSTERS: dict[str, str] = {"cycle_key": "whole demand cycles (their jobs summed)"}


@dataclass(frozen=True)
class Metric:
    """One compared quantity: ``scale x sum(num) / sum(den)`` over a unit table (rows ``where``).

    Attributes
    ----------
    name, factor, tier
        What it is, the factor it belongs to, and its tier (``"factor"``, ``"loss"`` or a tier).
    table
        ``"cycles"``, ``"jobs"``, ``"commits"``, ``"steps"`` or ``"rank_steps"``.
    num, den
        Columns summed.
    better
        ``"higher"`` or ``"lower"``: the direction that is not a regression.
    unit
        Named unit of the value.
    scale
        Multiplier of the ratio.
    where
        ``{column: value}`` rows kept.
    cluster
        Override of the table's resampling unit (``"cycle_key"``: a scheduling metric of jobs is
        resampled by the demand cycle their gang completed in).
    kind
        ``"ratio"`` (bootstrap standard error, t interval) or ``"events"``: ``num`` counts rare events
        over the exposure ``den``; the two rates are compared by the exact conditional binomial test.
    upper
        The value's upper bound (1 for a share, ``scale`` for a count per exposure that cannot
        exceed it; the lower bound is 0 for every metric): the delta's interval stays within
        ``[0 - baseline, upper - baseline]``.
    """

    name: str
    factor: str
    tier: str
    table: str
    num: str
    den: str
    better: str
    unit: str
    scale: float = 1.0
    where: Mapping[str, Any] = field(default_factory=dict)
    cluster: str | None = None
    kind: str = "ratio"
    upper: float = math.inf


def factor_metrics() -> list[Metric]:
    """Return the three factors and every loss category as shares of the factor's denominator."""
    out = [
        Metric(
            "scheduling goodput",
            "scheduling",
            "factor",
            "cycles",
            "held_device_s",
            "capacity_device_s",
            "higher",
            "fraction", upper=1.0,
        ),
        Metric(
            "runtime goodput",
            "runtime",
            "factor",
            "jobs",
            "productive_device_s",
            "held_device_s",
            "higher",
            "fraction", upper=1.0,
        ),
        Metric(
            "program goodput",
            "program",
            "factor",
            "steps",
            "ideal_device_s",
            "productive_device_s",
            "higher",
            "fraction", upper=1.0,
        ),
    ]
    out += [
        Metric(
            f"scheduling.{k} share",
            "scheduling",
            "loss",
            "cycles",
            k,
            "capacity_device_s",
            "lower",
            "fraction of capacity", upper=1.0,
        )
        for k in _S_LOSSES
    ]
    out += [
        Metric(
            f"runtime.{k} share",
            "runtime",
            "loss",
            "jobs",
            k,
            "held_device_s",
            "lower",
            "fraction of held",
            upper=1.0,
        )
        for k in RUNTIME_LOSSES
    ]
    out += [
        Metric(
            f"program.{k.replace('program_', '')} share",
            "program",
            "loss",
            "steps",
            k,
            "productive_device_s",
            "lower",
            "fraction of productive", upper=1.0,
        )
        for k in _P_LOSSES
    ]
    return out


def _all_timers(rank_timers: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    frames = [t.assign(job_id=str(j)) for j, t in rank_timers.items() if len(t)]
    if not frames:
        return pd.DataFrame(columns=["job_id", "rank", "step", "duration_s"])
    t = pd.concat(frames, ignore_index=True)
    return t.sort_values(["job_id", "rank", "step"], kind="stable", ignore_index=True)


def _reference(t: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """Each row's reference time: the lower quartile of its step's rank times.

    The lower quartile stays a healthy rank's time while up to three quarters of the ranks are slow
    (a slow node is half the ranks of a two-node job), where the median would not.
    """
    q = t.groupby(list(keys), sort=False)["duration_s"].quantile(REFERENCE_QUANTILE)
    idx = pd.MultiIndex.from_arrays([t[k].to_numpy() for k in keys]) if len(keys) > 1 else t[keys[0]]
    return q.reindex(idx).to_numpy(float)


def _flag(t: pd.DataFrame, bound: float) -> pd.DataFrame:
    """Mark each rank-step over ``(1 + bound) x`` its step's reference, and those on a run of >= 2 steps."""
    ref = _reference(t, ["job_id", "step"])
    d = t["duration_s"].to_numpy(float)
    slow = d > (1.0 + bound) * ref
    job, rank, step = t["job_id"].to_numpy(), t["rank"].to_numpy(), t["step"].to_numpy()
    same = np.r_[False, (job[1:] == job[:-1]) & (rank[1:] == rank[:-1]) & (step[1:] == step[:-1] + 1)]
    prev_slow = np.r_[False, slow[:-1]] & same
    next_slow = np.r_[slow[1:], False] & np.r_[same[1:], False]
    return t.assign(
        slow=slow,
        episode=slow & (prev_slow | next_slow),
        ratio=d / np.where(ref > 0, ref, np.nan),
        run_start=slow & ~prev_slow,
    )


def rank_step_table(rank_timers: Mapping[str, pd.DataFrame], bound: float = STRAGGLER_BOUND) -> pd.DataFrame:
    """Per (job, step): ranks timed, ranks over ``(1 + bound) x`` the step's lower-quartile rank time.

    Parameters
    ----------
    rank_timers
        ``{job id: rank-timer table (rank, step, duration_s)}``.
    bound
        The anomaly bound, a fraction of the step's lower quartile.

    Returns
    -------
    DataFrame
        ``job_id, step, ranks, stragglers`` (ranks over the bound), ``episode_ranks`` (of those, ranks
        also over it on the step before or after: in an episode), ``max_ratio``.
    """
    t = _all_timers(rank_timers)
    if not len(t):
        return pd.DataFrame(columns=["job_id", "step", "ranks", "stragglers", "episode_ranks", "max_ratio"])
    f = _flag(t, bound)
    agg = f.groupby(["job_id", "step"], sort=True).agg(
        ranks=("slow", "size"),
        stragglers=("slow", "sum"),
        episode_ranks=("episode", "sum"),
        max_ratio=("ratio", "max"),
    )
    out = agg.reset_index()
    out["ranks"] = out["ranks"].astype(float)
    out["stragglers"] = out["stragglers"].astype(float)
    out["episode_ranks"] = out["episode_ranks"].astype(float)
    return out


def tier_metrics(units: Any) -> list[Metric]:
    """Return Table 4's tier metrics for these units (the groups and sizes they hold)."""
    jobs = units.jobs
    out: list[Metric] = []
    sizes = sorted({int(d) // 8 for d in units.steps["devices"].unique()}) if len(units.steps) else []
    for n in sizes:
        out.append(
            Metric(
                f"program goodput, {n}-node jobs",
                "program",
                "canaries",
                "steps",
                "ideal_device_s",
                "productive_device_s",
                "higher",
                "fraction", upper=1.0,
                where={"devices": 8 * n},
            )
        )
    groups = jobs.loc[jobs["ideal_device_s"].notna(), ["architecture", "software_version"]].drop_duplicates()
    for arch, ver in sorted(groups.itertuples(index=False, name=None)):
        out.append(
            Metric(
                f"program goodput, {arch} x {ver}",
                "program",
                "fleet_baseline",
                "steps",
                "ideal_device_s",
                "productive_device_s",
                "higher",
                "fraction", upper=1.0,
                where={"architecture": arch, "software_version": ver, "has_config": True},
            )
        )
    out += [
        Metric(
            "retained steps above 1.05 x fault-free",
            "program",
            "gray_failure",
            "steps",
            "slow_step",
            "one",
            "lower",
            "fraction of steps", upper=1.0,
        ),
        Metric(
            "straggler rank-steps per 1,000",
            "program",
            "gray_failure",
            "rank_steps",
            "stragglers",
            "ranks",
            "lower",
            "per 1,000 rank-steps",
            scale=1000.0,
            upper=1000.0,
        ),
        Metric(
            "straggler episodes per million rank-steps",
            "program",
            "gray_failure",
            "jobs",
            "straggler_episodes",
            "rank_steps",
            "lower",
            "per 10^6 rank-steps",
            scale=1e6,
            kind="events",
            upper=1e6,
        ),
        Metric(
            "rank-steps in straggler episodes per 1,000",
            "program",
            "gray_failure",
            "rank_steps",
            "episode_ranks",
            "ranks",
            "lower",
            "per 1,000 rank-steps",
            scale=1000.0,
            upper=1000.0,
        ),
        Metric(
            "startup per job (gang complete -> first step)",
            "runtime",
            "startup_recovery",
            "jobs",
            "startup_s",
            "timed",
            "lower",
            "s",
        ),
        Metric(
            "checkpoint pause per commit",
            "runtime",
            "startup_recovery",
            "commits",
            "pause_s",
            "one",
            "lower",
            "s",
        ),
        Metric(
            "elastic wait per resize",
            "runtime",
            "startup_recovery",
            "jobs",
            "elastic_wait",
            "resizes",
            "lower",
            "device-s",
        ),
        Metric(
            "restarts per 1,000 held device-hours",
            "runtime",
            "startup_recovery",
            "jobs",
            "restarts",
            "held_device_h",
            "lower",
            "per 1,000 device-h",
            scale=1000.0,
        ),
        Metric(
            "rework share of held time",
            "runtime",
            "startup_recovery",
            "jobs",
            "rework",
            "held_device_s",
            "lower",
            "fraction of held", upper=1.0,
        ),
        Metric(
            "data stall ratio (input wait / held)",
            "runtime",
            "startup_recovery",
            "jobs",
            "input_wait",
            "held_device_s",
            "lower",
            "fraction of held", upper=1.0,
        ),
        Metric(
            "queue wait to gang completion per job",
            "scheduling",
            "allocation",
            "jobs",
            "queue_wait_s",
            "one",
            "lower",
            "s",
            cluster="cycle_key",
        ),
        Metric(
            "partial-gang hold share of capacity",
            "scheduling",
            "allocation",
            "cycles",
            "partial_gang_hold",
            "capacity_device_s",
            "lower",
            "fraction of capacity", upper=1.0,
        ),
        Metric(
            "idle while queued (stranded) share of capacity",
            "scheduling",
            "allocation",
            "cycles",
            "idle_with_queue",
            "capacity_device_s",
            "lower",
            "fraction of capacity", upper=1.0,
        ),
    ]
    return out


def scaling_curve(units: Any) -> list[dict[str, Any]]:
    """Return the canaries' scaling-efficiency curve: P per job size over the 1-node P (no CI).

    Returns
    -------
    list of dict
        ``nodes``, ``jobs``, ``program_goodput``, ``scaling_efficiency`` (None without 1-node jobs).
    """
    s = units.steps
    if not len(s):
        return []
    g = s.groupby(s["devices"] // 8).agg(
        ideal=("ideal_device_s", "sum"), prod=("productive_device_s", "sum"), jobs=("job_id", "nunique")
    )
    p = (g["ideal"] / g["prod"]).to_dict()
    one = p.get(1)
    return [
        {
            "nodes": int(n),
            "jobs": int(g.loc[n, "jobs"]),
            "program_goodput": float(p[n]),
            "scaling_efficiency": None if not one else float(p[n] / one),
        }
        for n in g.index
    ]


def straggler_episodes(
    rank_timers: Mapping[str, pd.DataFrame], min_steps: int = 2, bound: float = STRAGGLER_BOUND
) -> list[dict[str, Any]]:
    """Return the straggler episodes: runs of >= ``min_steps`` consecutive steps of ranks over the bound.

    Parameters
    ----------
    rank_timers
        ``{job id: rank-timer table}``.
    min_steps
        Shortest run that is an episode (a single slow step is the background).
    bound
        The anomaly bound (a fraction over the step's lower-quartile rank time).

    Returns
    -------
    list of dict
        ``job_id``, ``ranks`` (the slow ranks of runs with the same first and last step), ``steps``
        ``[first, last]``, ``excess`` (mean slow-rank time over the step's lower quartile, minus one).
    """
    t = _all_timers(rank_timers)
    if not len(t):
        return []
    f = _flag(t, bound)
    f = f[f["slow"]].copy()
    if not len(f):
        return []
    f["run"] = np.cumsum(f["run_start"].to_numpy())
    runs = f.groupby("run").agg(
        job_id=("job_id", "first"),
        rank=("rank", "first"),
        first=("step", "min"),
        last=("step", "max"),
        n=("step", "size"),
        ratio=("ratio", "mean"),
    )
    runs = runs[runs["n"] >= min_steps]
    out = []
    for (job, first, last), sel in runs.groupby(["job_id", "first", "last"], sort=True):
        out.append(
            {
                "job_id": str(job),
                "ranks": sorted(int(r) for r in sel["rank"]),
                "steps": [int(first), int(last)],
                "excess": float(sel["ratio"].mean() - 1.0),
            }
        )
    return out
