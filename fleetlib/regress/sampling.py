"""A sampling plan for step traces: stratified continuous samples plus triggered captures.

Chapter 9.3.3: a trace sample must be stratified -- across job sizes and architectures, pipeline
stages and parallel groups, warm-up and steady state, hours of the day -- and never rank 0 alone;
continuous sampling is paired with threshold triggers on the always-on per-rank timers, each
trigger tracing the lagging rank beside a healthy peer of the same collective group.

:func:`trace_plan` returns

* ``strata``: every (job size in nodes, architecture, software version, hour-of-day block) present
  among the bundle's timed jobs, and the job(s) chosen for each;
* ``continuous``: per chosen job, the ranks (one per node -- the parallel groups of a synchronous
  data-parallel job -- each at a different local index, so rank 0 is never alone) and two step
  ranges, one in warm-up (the first steps) and one in steady state (the middle);
* ``triggered``: each straggler episode of the rank timers (ranks over the step's lower quartile by the bound
  on >= 2 consecutive steps), its slow ranks and a healthy peer of the job (its collective group):
  the job's rank with the smallest worst ratio over those steps;
* ``program_sampling``: P estimated from the sampled steps alone, with its bootstrap standard
  error over the sampled jobs (:func:`fleetlib.regress.compare.ratio_standard_error`), beside the
  measured P -- P's sampling error.

Pipeline stages are not in a fleet bundle's records: that stratum is one (``"not stated"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fleetlib.fleet.sampling import GPUS_PER_NODE, STRATUM_KEYS, trace_strata
from fleetlib.quality import DomainError
from fleetlib.regress.compare import ratio_standard_error
from fleetlib.regress.tiers import REFERENCE_QUANTILE, STRAGGLER_BOUND, straggler_episodes

__all__ = ["check_plan", "trace_plan"]


def _strata(units: Any) -> pd.DataFrame:
    jobs = units.jobs
    timed = jobs[jobs["retained_steps"].to_numpy(float) > 0]
    return trace_strata(timed[timed.index.isin(units.steps["job_id"].unique())])


def _ranks_for(devices: int, job_seed: int) -> list[int]:
    """One rank per node, each at a different local index (rank 0 never alone)."""
    nodes = max(devices // GPUS_PER_NODE, 1)
    per = min(devices, GPUS_PER_NODE)
    shift = 1 + job_seed % max(per - 1, 1)
    ranks = [n * per + (shift + n) % per for n in range(nodes)]
    if len(ranks) == 1 and devices > 1:
        ranks.append((ranks[0] + per // 2) % per)
    out = sorted(set(ranks))
    if out == [0] and devices > 1:
        out = [0, 1]
    return out


def _healthy_peer(timers: pd.DataFrame, slow: list[int], first: int, last: int) -> int | None:
    t = timers[(timers["step"] >= first) & (timers["step"] <= last)]
    if not len(t):
        return None
    ref = t.groupby("step")["duration_s"].quantile(REFERENCE_QUANTILE).reindex(t["step"]).to_numpy(float)
    worst = pd.Series(t["duration_s"].to_numpy(float) / ref).groupby(t["rank"].to_numpy()).max()
    worst = worst[~worst.index.isin(slow)]
    return None if not len(worst) else int(worst.idxmin())


def _program_sampling(units: Any, chosen: list[dict[str, Any]], boot: int, seed: int) -> dict[str, Any]:
    s = units.steps
    parts = []
    for c in chosen:
        for a, z in (c["warmup_steps"], c["steady_steps"]):
            parts.append(s[(s["job_id"] == c["job_id"]) & (s["step"] >= a) & (s["step"] <= z)])
    sample = pd.concat(parts, ignore_index=True) if parts else s.iloc[0:0]
    measured = units.measurement.program.value if units.measurement is not None else None
    sample = sample[sample["job_id"].isin(units.jobs.index[units.jobs["ideal_device_s"].notna()])]
    if not len(sample) or sample["productive_device_s"].sum() <= 0:
        return {"value": None, "standard_error": None, "measured": measured, "sampled_steps": len(sample)}
    per_job = sample.groupby("job_id", sort=True)[["ideal_device_s", "productive_device_s"]].sum()
    se = ratio_standard_error(per_job["ideal_device_s"], per_job["productive_device_s"], boot=boot, seed=seed)
    cfg = units.jobs[units.jobs["ideal_device_s"].notna()]
    return {
        "value": float(sample["ideal_device_s"].sum() / sample["productive_device_s"].sum()),
        "standard_error": se if np.isfinite(se) else None,
        "sampled_steps": len(sample),
        "sampled_jobs": int(sample["job_id"].nunique()),
        "measured": measured,
        "measured_jobs_with_a_model_config": float(
            cfg["ideal_device_s"].sum() / cfg["productive_device_s"].sum()
        )
        if len(cfg) and cfg["productive_device_s"].sum() > 0
        else None,
        "note": "P of the jobs with a model config estimated from the planned steps only (bootstrap over the "
        "sampled jobs, each job's planned steps summed); the measured P counts jobs without a config as "
        "unobserved",
    }


def trace_plan(
    units: Any,
    *,
    per_stratum: int = 1,
    steps_per_range: int = 5,
    seed: int = 0,
    boot: int = 300,
) -> dict[str, Any]:
    """Plan which jobs, ranks and step ranges to trace, and the triggered captures.

    Parameters
    ----------
    units
        A bundle's :class:`~fleetlib.regress.units.FleetUnits`.
    per_stratum
        Jobs chosen per stratum (at random among its jobs).
    steps_per_range
        Steps in each planned range (warm-up and steady state).
    seed
        Seed of the choice.
    boot
        Bootstrap draws of P's sampling error.

    Returns
    -------
    dict
        ``strata``, ``continuous``, ``triggered``, ``program_sampling``, ``coverage`` (strata
        present, strata covered), ``rules``.
    """
    if per_stratum < 1 or steps_per_range < 1:
        raise DomainError("per_stratum and steps_per_range must be at least 1")
    st = _strata(units)
    rng = np.random.default_rng(seed)
    keys = list(STRATUM_KEYS)
    strata, chosen = [], []
    for key, sel in st.groupby(keys, sort=True):
        pick = sorted(rng.choice(sel.index.to_numpy(), size=min(per_stratum, len(sel)), replace=False))
        strata.append(
            {
                **dict(zip(keys, (int(key[0]), *key[1:]), strict=True)),
                "jobs": len(sel),
                "chosen": [str(j) for j in pick],
            }
        )
        for j in pick:
            n = int(sel.loc[j, "retained_steps"])
            k = min(steps_per_range, n)
            mid = max(n // 2 - k // 2, 1)
            chosen.append(
                {
                    "job_id": str(j),
                    "ranks": _ranks_for(int(sel.loc[j, "devices"]), int(rng.integers(1 << 30))),
                    "warmup_steps": [1, k],
                    "steady_steps": [mid, min(mid + k - 1, n)],
                    "reason": "stratum " + ", ".join(f"{k_}={v}" for k_, v in zip(keys, key, strict=True)),
                }
            )
    triggered = []
    for ep in straggler_episodes(units.rank_timers):
        timers = units.rank_timers[ep["job_id"]]
        peer = _healthy_peer(timers, ep["ranks"], *ep["steps"])
        triggered.append(
            {
                **ep,
                "healthy_peer": peer,
                "reason": f"per-rank timers over {1 + STRAGGLER_BOUND:.2f} x the step's lower quartile on "
                f"{ep['steps'][1] - ep['steps'][0] + 1} consecutive steps; traced beside a "
                "healthy peer of the job's collective group",
            }
        )
    plan = {
        "strata": strata,
        "continuous": chosen,
        "triggered": triggered,
        "program_sampling": _program_sampling(units, chosen, boot, seed),
        "coverage": {
            "strata_present": len(strata),
            "strata_covered": sum(bool(s["chosen"]) for s in strata),
            "jobs_with_rank_timers": len(units.rank_timers),
        },
        "rules": [
            "stratified by job size (nodes), architecture, software version, hour-of-day block and "
            "pipeline stage (not stated in the records: one stratum)",
            "ranks: one per node (parallel group), each at a different local index; rank 0 never alone",
            "step ranges: warm-up (first steps) and steady state (middle)",
            "triggered: straggler episodes of the always-on per-rank timers, each with a healthy peer",
        ],
    }
    check_plan(plan)
    return plan


def check_plan(plan: dict[str, Any]) -> None:
    """Refuse a plan that traces rank 0 alone, anywhere.

    Raises
    ------
    DomainError
        A continuous entry or a triggered capture whose ranks are ``[0]`` only.
    """
    for entry in plan.get("continuous", []):
        if list(entry["ranks"]) == [0]:
            raise DomainError(
                f"trace plan for job {entry['job_id']}: rank 0 alone characterises a special "
                "rank, not the fleet; sample other ranks too"
            )
    for entry in plan.get("triggered", []):
        ranks = list(entry["ranks"]) + ([] if entry.get("healthy_peer") is None else [entry["healthy_peer"]])
        if ranks == [0]:
            raise DomainError(f"triggered capture for job {entry['job_id']} traces rank 0 alone")
