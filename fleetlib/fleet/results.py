"""The fleet measurement's results: the factors from the per-job table, pools, cohorts, waterfall, levers.

Split from :mod:`fleetlib.fleet.measure` (which re-exports every name): the loss vocabularies of the
fleet's R and P partitions, who owns each loss, and the functions that turn the per-job table into
:class:`~fleetlib.accounting.Factor` objects, the waterfall, the per-pool and per-cohort results, the
levers and the per-job JSON records.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import is_url, listed_files, url_kind
from fleetlib.accounting import CHAIN_RTOL, Factor, LeverGain, Window, mpg, rank_levers
from fleetlib.quality import ChainMismatchError, Ledger
from fleetlib.runtime import CLEAN_END_RULE

__all__ = [
    "COHORT_EDGES",
    "LOSS_OWNERS",
    "PROGRAM_LOSSES",
    "RUNG_LOSSES",
    "RUNTIME_LOSSES",
    "TRACE_PARTS",
    "cohorts",
    "factor_contracts",
    "job_records",
    "levers",
    "pools",
    "program_factor",
    "runtime_factor",
    "slice_row",
    "sum_factors",
    "waterfall",
]

#: Runtime losses of the fleet's R partition (device-seconds), in report order.
RUNTIME_LOSSES: tuple[str, ...] = (
    "startup",
    "input_wait",
    "checkpoint",
    "recovery",
    "rework",
    "preemption",
    "elastic_wait",
    "elastic_reinit",
    "evaluation",
    "stall",
    "idle",
    "progress_at_risk",
    "timeline_unattributed",
    "zombie",
    "unobserved",
    "reconciliation_residual",
)
#: Program losses of the fleet's P partition (device-seconds).
PROGRAM_LOSSES: tuple[str, ...] = ("step_time_above_baseline", "below_ideal_rate", "unobserved")
#: Parts of the trace partition a traced job's productive time is split into.
TRACE_PARTS: tuple[str, ...] = (
    "compute",
    "exposed_comm",
    "peer_wait",
    "exposed_memcpy",
    "host_dispatch",
    "idle",
)
#: Rung categories carried over (seconds x devices) into the fleet's R partition.
RUNG_LOSSES = (
    "startup",
    "input_wait",
    "checkpoint",
    "recovery",
    "rework",
    "preemption",
    "elastic_wait",
    "elastic_reinit",
    "evaluation",
    "stall",
    "idle",
    "progress_at_risk",
)
#: Who usually owns each named loss (the levers table groups by it).
LOSS_OWNERS: dict[str, str] = {
    "partial_gang_hold": "scheduler policy",
    "reservation": "scheduler policy",
    "idle_with_queue": "scheduler policy",
    "idle_empty_queue": "capacity planning",
    "startup": "job launch and compilation",
    "input_wait": "input pipeline",
    "checkpoint": "checkpointing",
    "recovery": "reliability (detection, relaunch)",
    "rework": "checkpointing cadence and reliability",
    "preemption": "scheduler policy",
    "elastic_wait": "reliability and elastic policy (devices lost or regained)",
    "elastic_reinit": "elastic runtime (re-initialisation after a resize)",
    "evaluation": "training recipe",
    "stall": "job owners and program (hung or stalled steps)",
    "idle": "job owners (teardown, hangs)",
    "progress_at_risk": "checkpointing",
    "timeline_unattributed": "instrumentation",
    "zombie": "job owners and scheduler (held gangs with no step)",
    "unobserved": "instrumentation (no timeline)",
    "reconciliation_residual": "instrumentation (timeline vs scheduler)",
    "step_time_above_baseline": "program (stragglers, contention; traces explain)",
    "below_ideal_rate": "program (kernels, communication, dispatch)",
}
#: Upper bounds (devices, inclusive) of the job-size cohorts of the waterfall.
COHORT_EDGES: tuple[int, ...] = (8, 64, 512)
_RUNTIME_CONVENTION = (
    "R is the retained steps' productive time (wall time less input waits; warm-up excess after a (re)start "
    "is startup or recovery) x devices over the scheduler's held device-time (gang complete -> release, "
    "clipped to the window), retrospective definition: every finished step not erased by a later restart "
    f"counts. {CLEAN_END_RULE} Held time without a timeline counts as not productive (unobserved: R is "
    "the bound)"
)



# ---------------------------------------------------------------------------------------------------
# Factors, pools, waterfall, levers
# ---------------------------------------------------------------------------------------------------


def _nonneg_losses(values: Mapping[str, float]) -> tuple[dict[str, float], list[str]]:
    losses, notes = {}, []
    for k, v in values.items():
        if v < 0:
            notes.append(f"{k} is {v:.6g} device-s (negative): left to unattributed")
        else:
            losses[k] = float(v)
    return losses, notes


def _fsum(
    jobs: pd.DataFrame, column: str, memo: dict[str, float] | None, *, nan_as_zero: bool = False
) -> float:
    """Return ``math.fsum`` of a job column (NaN read as 0 with ``nan_as_zero``).

    ``memo`` maps column -> sum and must only ever see one job table: the fleet's factors and a pool
    holding every job read the same rows, so each column is summed once.
    """
    if memo is not None and column in memo:
        return memo[column]
    values = jobs[column].to_numpy(float)
    total = math.fsum(np.where(np.isnan(values), 0.0, values) if nan_as_zero else values)
    if memo is not None:
        memo[column] = total
    return total


def runtime_factor(
    jobs: pd.DataFrame, window: Window, held_total: float, memo: dict[str, float] | None = None
) -> Factor:
    """Return the fleet's runtime factor R from the per-job table (device-seconds).

    Parameters
    ----------
    jobs
        The walk's job table (the runtime columns added).
    window
        The measured window.
    held_total
        The scheduler's held device-seconds (R's denominator, S's numerator).
    memo
        Column sums already made (filled here), shared with a pool holding every job.

    Returns
    -------
    Factor
        Productive over held device-seconds, with the runtime losses.
    """
    sums = {k: _fsum(jobs, k, memo) for k in RUNTIME_LOSSES}
    losses, notes = _nonneg_losses(sums)
    return Factor(
        boundary="runtime",
        numerator=_fsum(jobs, "productive_device_s", memo),
        denominator=held_total,
        window=window,
        record="job timelines joined to the scheduler records",
        convention="; ".join([_RUNTIME_CONVENTION, *notes]),
        numerator_unit="device-s",
        denominator_unit="device-s",
        losses=losses,
    )


def program_factor(
    jobs: pd.DataFrame,
    window: Window,
    runtime: Factor,
    conventions: Mapping[str, str],
    memo: dict[str, float] | None = None,
) -> Factor:
    """Return the fleet's program factor P over R's numerator (device-seconds).

    Parameters
    ----------
    jobs
        The walk's job table (the program columns added).
    window
        The measured window.
    runtime
        The runtime factor (P's denominator is its numerator).
    conventions
        Each configured job's MFU convention.
    memo
        Column sums already made (filled here).

    Returns
    -------
    Factor
        Ideal over productive device-seconds, with the program losses.
    """
    sums = {
        "step_time_above_baseline": _fsum(jobs, "step_time_above_baseline", memo),
        "below_ideal_rate": _fsum(jobs, "below_ideal_rate", memo),
        "unobserved": _fsum(jobs, "program_unobserved", memo),
    }
    losses, notes = _nonneg_losses(sums)
    names = sorted(set(conventions.values()))
    conv = (
        ("MFU per job (" + "; ".join(names) + ")" if names else "no model config: P unobserved")
        + "; ideal time of the retained steps over their productive time; jobs without a model config "
        "unobserved"
    )
    return Factor(
        boundary="program",
        numerator=_fsum(jobs, "ideal_device_s", memo, nan_as_zero=True),
        denominator=runtime.numerator,
        window=window,
        record="job timelines + model configs (traces explain)",
        convention="; ".join([conv, *notes]),
        numerator_unit="device-s",
        denominator_unit="device-s",
        losses=losses,
    )


def sum_factors(parts: list[Factor], window: Window, *, record: str = "", convention: str = "") -> Factor:
    """Return one factor whose numerator, denominator and losses are the sums of ``parts``' (device-s).

    The factor of a set of disjoint intervals (a calendar window less its excluded time): each part
    is measured on one interval, and the sums are the factor of their union.

    Parameters
    ----------
    parts
        Factors of one boundary, measured on disjoint intervals.
    window
        The window the sum stands for.
    record, convention
        Default: the first part's.

    Returns
    -------
    Factor
        The summed factor (one part: that part, on ``window``).
    """
    first = parts[0]
    # the named losses (the factor computes its own unattributed remainder)
    names = list(dict.fromkeys(k for f in parts for k in f.losses if k != "unattributed"))
    return Factor(
        boundary=first.boundary,
        numerator=math.fsum(f.numerator for f in parts),
        denominator=math.fsum(f.denominator for f in parts),
        window=window,
        record=record or first.record,
        convention=convention or first.convention,
        numerator_unit=first.numerator_unit,
        denominator_unit=first.denominator_unit,
        losses={k: math.fsum(f.losses.get(k, 0.0) for f in parts) for k in names},
    )


def _factor_entry(boundary: str, numerator: float, denominator: float,
                  losses: Mapping[str, float]) -> dict[str, Any]:
    return {
        "value": numerator / denominator if denominator > 0 else None,
        "numerator_device_s": float(numerator),
        "denominator_device_s": float(denominator),
        "losses": {k: float(v) for k, v in losses.items()},
    }


def slice_row(
    s: Factor, jobs: pd.DataFrame, window: Window, conventions: Mapping[str, str]
) -> dict[str, Any]:
    """Return one row of a fleet measured by window or by segment: S, R, P, MPG and every sum, chain checked.

    Parameters
    ----------
    s
        The slice's scheduling factor (its numerator: the held device-s of ``jobs``).
    jobs
        The slice's job table (the walk's columns, held time and runtime parts of the slice alone).
    window
        The slice's window.
    conventions
        Each configured job's MFU convention.

    Returns
    -------
    dict
        ``jobs`` (with held time in the slice), ``mpg``, ``scheduling``, ``runtime``, ``program``
        (values; None where a denominator is 0), ``factors`` (per boundary: value, numerator,
        denominator, losses, device-s), ``ideal_device_s`` and ``chain`` (as
        :func:`fleetlib.accounting.mpg` checked it).  A slice with no held time (or no productive
        time) has no R (or P): its numerators and denominators are 0 and the chain is checked on
        them as numbers.

    Raises
    ------
    fleetlib.quality.ChainMismatchError
        A denominator is not the previous numerator.
    """
    held = _fsum(jobs, "held_device_s", None)
    r = runtime_factor(jobs, window, held) if held > 0 else None
    p = program_factor(jobs, window, r, conventions) if r is not None and r.numerator > 0 else None
    if r is not None and p is not None:
        product = mpg(s, r, p)
        chain = {k: dict(v) for k, v in product.chain.items()}
        value: float | None = product.value
    else:  # no held (or no productive) time in the slice: the chain on plain numbers
        prod = _fsum(jobs, "productive_device_s", None)
        chain = {}
        for name, before, after in (("scheduling->runtime", s.numerator, held),
                                    ("runtime->program", prod, prod)):
            residual = after - before
            holds = abs(residual) <= CHAIN_RTOL * max(abs(before), abs(after))
            if not holds:
                raise ChainMismatchError(f"{name}: the slice's denominator {after:.6g} device-s is not the "
                                         f"previous numerator {before:.6g} device-s ({window.label})")
            chain[name] = {"previous_numerator": before, "next_denominator": after, "unit": "device-s",
                           "residual": residual, "rtol": CHAIN_RTOL, "holds": holds}
        value = 0.0 if s.denominator > 0 else None
    factors = {"scheduling": _factor_entry("scheduling", s.numerator, s.denominator, s.losses)}
    for name, f, den in (("runtime", r, held), ("program", p, 0.0 if r is None else r.numerator)):
        factors[name] = (_factor_entry(name, f.numerator, f.denominator, f.losses) if f is not None
                         else _factor_entry(name, 0.0, den, {}))
    return {
        "jobs": int((jobs["held_device_s"].to_numpy(float) > 0).sum()),
        "mpg": value,
        **{k: v["value"] for k, v in factors.items()},
        "ideal_device_s": factors["program"]["numerator_device_s"],
        "factors": factors,
        "chain": chain,
    }


def waterfall(s: Factor, r: Factor, p: Factor) -> list[dict[str, Any]]:
    """Return the fleet waterfall: capacity, each loss and each factor's numerator, one record per bar.

    Parameters
    ----------
    s, r, p
        The three chained factors.

    Returns
    -------
    list of dict
        ``stage``, ``kind`` (``total`` or ``loss``), ``device_s`` and ``device_h`` per bar.
    """
    bars = [("in_service_capacity", "total", s.denominator)]
    for f, total in ((s, "held"), (r, "productive"), (p, "ideal")):
        bars += [(f"{f.boundary}.{k}", "loss", v) for k, v in f.losses.items()]
        bars.append((total, "total", f.numerator))
    return [{"stage": n, "kind": k, "device_s": float(v), "device_h": float(v) / 3600.0} for n, k, v in bars]


def _job_waterfall(row: pd.Series) -> dict[str, float]:
    out = {"held": float(row["held_device_s"])}
    out.update({f"runtime.{k}": float(row[k]) for k in RUNTIME_LOSSES if row[k]})
    out["productive"] = float(row["productive_device_s"])
    out.update(
        {
            "program.step_time_above_baseline": float(row["step_time_above_baseline"]),
            "program.below_ideal_rate": float(row["below_ideal_rate"]),
            "program.unobserved": float(row["program_unobserved"]),
        }
    )
    out["ideal"] = float(0.0 if pd.isna(row["ideal_device_s"]) else row["ideal_device_s"])
    return out


def pools(
    partition: Any, jobs: pd.DataFrame, window: Window, memo: dict[str, float] | None = None
) -> dict[str, dict[str, Any]]:
    """Return per pool: S, R, P, MPG, the job product and the waterfall.

    Parameters
    ----------
    partition
        The scheduling partition (its pools and per-pool factors).
    jobs
        The walk's job table.
    window
        The measured window.
    memo
        The fleet factors' column sums of ``jobs`` (:func:`_fsum`), reused by a pool holding every job.

    Returns
    -------
    dict
        Pool name -> its results.
    """
    out = {}
    for pool in partition.pools:
        s = partition.factor(pool)
        mask = (jobs["pool"] == pool).to_numpy(dtype=bool)
        every = bool(mask.all())
        sel = jobs if every else jobs[mask]  # one pool: the jobs themselves, not a copy
        sums = memo if every else None
        entry: dict[str, Any] = {
            "scheduling": s.value,
            "capacity_device_s": s.denominator,
            "held_device_s": s.numerator,
            "scheduling_losses": dict(s.losses),
        }
        if s.numerator > 0 and len(sel):
            r = runtime_factor(sel, window, s.numerator, sums)
            entry["runtime"] = r.value
            entry["runtime_losses"] = dict(r.losses)
            if r.numerator > 0:
                p = program_factor(sel, window, r, {}, sums)
                prod = mpg(s, r, p)
                entry.update(
                    program=p.value,
                    program_losses=dict(p.losses),
                    mpg=prod.value,
                    job_product=prod.job_product,
                    waterfall_device_s={
                        f"{b['kind']}:{b['stage']}": b["device_s"] for b in waterfall(s, r, p)
                    },
                )
        out[pool] = entry
    return out


def cohorts(jobs: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Return per job-size cohort (:data:`COHORT_EDGES`): jobs, device-seconds and the job product.

    Parameters
    ----------
    jobs
        The walk's job table.

    Returns
    -------
    dict
        Cohort label (``"1-8"``, ...) -> its sums and ratios.
    """
    edges = (0, *COHORT_EDGES, np.inf)
    labels = [f"{lo + 1}-{hi}" if np.isfinite(hi) else f">{lo}" for lo, hi in itertools.pairwise(edges)]
    cohort = pd.cut(jobs["devices"], bins=list(edges), labels=labels)
    out = {}
    for label, sel in jobs.groupby(cohort, observed=True):
        held = float(sel["held_device_s"].sum())
        prod = float(sel["productive_device_s"].sum())
        ideal = float(sel["ideal_device_s"].fillna(0.0).sum())
        out[str(label)] = {
            "jobs": len(sel),
            "held_device_s": held,
            "productive_device_s": prod,
            "ideal_device_s": ideal,
            "runtime_goodput": prod / held if held > 0 else None,
            "program_goodput": ideal / prod if prod > 0 else None,
            "job_product": ideal / held if held > 0 else None,
        }
    return out


def levers(
    s: Factor, r: Factor, p: Factor, jobs: pd.DataFrame, contract: Mapping[str, Any]
) -> tuple[dict[str, Any], list[LeverGain]]:
    """Return the levers from measured ceilings, ranked by relative gain, and each loss's gain.

    Parameters
    ----------
    s, r, p
        The three chained factors.
    jobs
        The walk's job table.
    contract
        The manifest's contract (a stated ``program_ceiling``).

    Returns
    -------
    tuple of (dict, list of LeverGain)
        The JSON object of the levers and the ranked gains.
    """
    policy = s.losses.get("idle_with_queue", 0.0) + s.losses.get("partial_gang_hold", 0.0)
    ceilings = {"scheduling": min((s.numerator + policy) / s.denominator, 1.0), "runtime": 1.0}
    with_cfg = jobs[jobs["ideal_device_s"].notna() & (jobs["productive_device_s"] > 0)]
    p_ceiling, p_source = p.value, "no model config: no measured ceiling"
    if len(with_cfg):
        best = with_cfg.groupby("model_name")["program_goodput"].transform("max")
        p_ceiling = float((with_cfg["productive_device_s"] * best).sum() / p.denominator)
        p_source = "the best P measured in the window for the same model and layout"
    stated = contract.get("program_ceiling") if isinstance(contract, Mapping) else None
    if isinstance(stated, (int, float)) and not isinstance(stated, bool) and stated > p_ceiling:
        p_ceiling, p_source = float(stated), "stated in the manifest's contract (program_ceiling)"
    ceilings["program"] = max(min(p_ceiling, 1.0), p.value)
    values = {"scheduling": s.value, "runtime": r.value, "program": p.value}
    ranked = [] if min(values.values()) <= 0 else rank_levers(values, ceilings)
    per_loss = []
    for f in (s, r, p):
        for k, v in f.losses.items():
            if v > 0 and f.numerator > 0 and k != "unattributed":
                per_loss.append(
                    {
                        "factor": f.boundary,
                        "loss": k,
                        "owner": LOSS_OWNERS.get(k, "unassigned"),
                        "device_s": v,
                        "relative_gain": v / f.numerator,
                    }
                )
    per_loss.sort(key=lambda x: x["relative_gain"], reverse=True)
    sources = {
        "scheduling": "the policy losses (idle while queued, partial gangs) recovered",
        "runtime": "every named runtime loss to zero",
        "program": p_source,
    }
    return (
        {
            "ranked": [g.to_dict() for g in ranked],
            "ceilings": ceilings,
            "ceiling_sources": sources,
            "per_loss": per_loss,
        },
        ranked,
    )


def _text(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _num(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def job_records(jobs: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Return per job id the JSON record of ``fleetlib fleet --json`` (columns read once, no ``iterrows``).

    Parameters
    ----------
    jobs
        The walk's job table.

    Returns
    -------
    dict
        Job id -> its record.
    """
    col = {c: jobs[c].tolist() for c in jobs.columns}
    elastic = "stepping_slice_efficiency" in col
    out = {}
    for i, job in enumerate(jobs.index):

        def v(name: str, i: int = i) -> Any:
            return col[name][i]

        held = float(v("held_device_s"))
        observed = bool(v("observed"))
        ideal = v("ideal_device_s")
        ideal_missing = ideal is None or (isinstance(ideal, float) and math.isnan(ideal))
        bars = {"held": held}
        bars.update({f"runtime.{k}": float(v(k)) for k in RUNTIME_LOSSES if v(k)})
        bars["productive"] = float(v("productive_device_s"))
        bars.update(
            {
                "program.step_time_above_baseline": float(v("step_time_above_baseline")),
                "program.below_ideal_rate": float(v("below_ideal_rate")),
                "program.unobserved": float(v("program_unobserved")),
            }
        )
        bars["ideal"] = 0.0 if ideal_missing else float(ideal)
        out[str(job)] = {
            "pool": str(v("pool")),
            "devices": int(v("devices")),
            "held_device_s": held,
            "observed": observed,
            "zombie": bool(v("zombie_job")),
            "timeline": _text(v("timeline")),
            "model": _text(v("model")),
            "runtime_goodput": _num(v("runtime_goodput")),
            "program_goodput": _num(v("program_goodput")),
            "job_product": (_num(ideal) or 0.0) / held if held > 0 and observed else None,
            "coverage": {
                # the share of the scheduler's held time the job's timeline covers
                "runtime": (
                    1.0 if v("zombie_job") else min(float(v("timeline_held_device_s")) / held, 1.0)
                )
                if held > 0 and observed
                else 0.0,
                "program": 0.0 if ideal_missing else 1.0,
            },
            "productive_device_s": float(v("productive_device_s")),
            "ideal_device_s": _num(ideal),
            "waterfall_device_s": bars,
        }
        if elastic and not math.isnan(col["stepping_slice_efficiency"][i]):  # its timeline logs devices
            out[str(job)].update({
                "stepping_slice_efficiency": float(v("stepping_slice_efficiency")),
                "available_slice_efficiency": float(v("available_slice_efficiency")),
                "elastic_scaling_device_s": float(v("elastic_scaling_device_s")),
            })
    return out


# ---------------------------------------------------------------------------------------------------
# The measurement contract of each factor (chapter Table 2)
# ---------------------------------------------------------------------------------------------------

#: What measure_fleet itself fixes about each factor's timing boundary (stated by this code, not a default).
_TIMING: dict[str, dict[str, str]] = {
    "scheduling": {
        "included_setup": "none: held time starts at gang complete (partial gangs are a scheduling loss)",
        "steady_state": "not applicable (capacity-time over whole demand cycles)",
    },
    "runtime": {
        "included_setup": "everything from gang complete to release (startup and compilation included)",
        "warmup": "warm-up excess of the first step after a (re)start is startup or recovery",
        "cold_start": "gang complete -> first step (the startup loss)",
    },
    "program": {
        "included_setup": "none: retained steps only (startup and warm-up excess are runtime losses)",
        "warmup": "warm-up excess excluded (charged to startup or recovery)",
        "steady_state": "retained steps, wall time less input waits",
    },
}
_DENOMINATORS = {
    "scheduling": "in-service capacity device-s of the pools",
    "runtime": "the scheduler's held device-s (gang complete -> release), clipped to the window",
    "program": "runtime's numerator: retained steps' productive device-s",
}


def _weighted_std(values: np.ndarray, weights: np.ndarray) -> float | None:
    ok = np.isfinite(values) & (weights > 0)
    if ok.sum() < 2:
        return None
    v, w = values[ok], weights[ok]
    mean = float(np.average(v, weights=w))
    return float(np.sqrt(np.average((v - mean) ** 2, weights=w)))


def factor_contracts(
    man: Any, factors: Mapping[str, Factor], jobs: pd.DataFrame, pools: Mapping[str, Any]
) -> dict[str, Any]:
    """Return ``{factor: contract dict}``: Table 2's categories for each measured factor.

    Workload and system state come from the manifest's ``contract:`` block merged with what the
    records carry (:func:`fleetlib.contract.contract_from_records`); the timing boundary is what
    :func:`~fleetlib.fleet.measure.measure_fleet` fixes for that factor; the statistical report is the
    factor, its denominator, window, the count of units it sums, its value and the spread across them.
    Every other field reads ``"not stated"``.
    """
    from fleetlib.contract import Contract, contract_from_records

    trace_files: list[Any] = []
    noted = Ledger()  # special files: the measurement's own listing flags them in the fleet's ledger
    for paths in man.traces.values():
        for p in paths:  # a URL folder is listed through fsspec; its files stay URLs
            folder = url_kind(p) == "directory" if is_url(p) else Path(p).is_dir()
            trace_files += (listed_files(p, (".json", ".json.gz"), recursive=True, ledger=noted)
                            if folder else [p])
    records = contract_from_records(
        scheduler_files=man.scheduler_files,
        scheduler_format=man.scheduler_format,
        timeline_files=man.timeline_files,
        timeline_format=man.timeline_format,
        trace_files=trace_files,
        relative=lambda p: man.relative(p),
    )
    base = Contract.from_mapping(man.contract).merged(records)
    out = {}
    for name, f in factors.items():
        if name == "scheduling":
            vals = np.array([p["scheduling"] for p in pools.values()], float)
            wts = np.array([p["capacity_device_s"] for p in pools.values()], float)
            units, spread = f"{len(pools)} pools", "capacity-weighted standard deviation across pools"
        elif name == "runtime":
            vals, wts = jobs["runtime_goodput"].to_numpy(float), jobs["held_device_s"].to_numpy(float)
            units, spread = f"{len(jobs)} jobs", "held-weighted standard deviation across jobs"
        else:
            vals = jobs["program_goodput"].to_numpy(float)
            wts = jobs["productive_device_s"].to_numpy(float)
            n = int(np.isfinite(vals).sum())
            units = f"{n} jobs with a model config"
            spread = "productive-weighted standard deviation across jobs"
        sd = _weighted_std(vals, wts)
        report = {
            "factor": f"{name} goodput",
            "denominator": _DENOMINATORS[name],
            "window": f.window.describe(),
            "trial_count": f"1 window; {units}",
            "central_value": f"ratio of sums {f.value:.6g}",
            "dispersion": None if sd is None else f"{spread}: {sd:.4g}",
        }
        c = base.with_fields(_TIMING[name], source="measure_fleet (its timing boundary)")
        c = c.with_fields(report, source="measure_fleet (this measurement)")
        out[name] = c.to_dict()
    return out
