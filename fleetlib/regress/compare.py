"""Compare two measurements under their contracts: per factor, loss category and tier, with intervals.

:func:`compare` takes two :class:`~fleetlib.regress.units.FleetUnits` (two bundles, two windows of
one bundle, or two groups of one bundle split by a contract field) and returns, for every metric of
:func:`fleetlib.regress.tiers.factor_metrics` and :func:`~fleetlib.regress.tiers.tier_metrics`, the
baseline, the candidate, the delta, an interval of the delta, the minimum detectable effect and a
verdict.

Units
-----
Each metric is ``scale x sum(num) / sum(den)`` over one unit table, and is resampled at its own unit
(:data:`fleetlib.regress.tiers.RESAMPLING`): whole demand cycles for S and its losses (and for the
queue wait of the jobs completing in them); jobs for R, its losses and the per-job timings; for the
checkpoint pause per commit, the commits clustered by their job; for P and the per-step tiers, the
retained steps clustered by their job.  A unit's rows are summed first; units are resampled whole
(the cluster bootstrap).  Commits and steps are not resampled one by one: a job's checkpoints write
the same state to the same storage and its steps run the same model, so they move together -- resampled
one by one, 20 disjoint unchanged pairs of synthetic fleets (4 nodes, two days, different seeds) called
the pause per commit significant in 10 of the 20.  With fewer than :data:`MIN_UNITS` units on a side
(paired: in all) a metric gets no interval but "too few units (n=2) to test": fewer clusters than that
make a cluster bootstrap's standard error unreliable (Cameron, Gelbach and Miller 2008,
"Bootstrap-based improvements for inference with clustered errors").

Pairing
-------
A job is the same job on both sides when its id and its submit time agree (the same jobs replayed,
or two windows of long-running jobs); its commits and steps then pair through it.  When the sides
share at least half of the smaller side's jobs, every job-level metric is paired by job id; demand
cycles are paired by their start when the jobs are paired (the same demand replayed) and at least
half of them are shared.  A paired metric resamples the union of both sides' units jointly (a unit on
one side only counts zero on the other), so the interval is that of the paired delta.  Each verdict
and the settings say which pairing was used (``paired=False`` forces independent sides).

The interval
------------
The delta's standard error is the standard deviation of :func:`scipy.stats.bootstrap`'s resamples
(paired: of the delta; otherwise each side's, combined, with Welch-Satterthwaite degrees of
freedom; paired: units - 1).  The test is Student's ``t = delta / se`` (:data:`scipy.stats.t`).
Event counts (straggler episodes) are compared by the exact conditional binomial test
(:func:`scipy.stats.binomtest`, Clopper-Pearson interval).  The family-wise error over the metrics
tested is held at ``1 - level`` by Holm's step-down: ordered by p-value, the ``i``-th smallest is
significant when it and every smaller one satisfies ``p_(j) <= alpha / (m - j + 1)``.  Each interval
is given at the level Holm judged its metric at (``alpha / (m - i + 1)`` for a rejected one, the
level of the step that stopped for the rest), so an interval excludes 0 exactly when the verdict is
significant; it is then cut to the metric's range (every metric is at least 0; a share at most 1),
which never moves 0 in or out.  The minimum detectable effect is the delta the test would find with
:data:`POWER` probability as the family's first step, ``(t(1 - alpha / 2m) + t(POWER)) x se``.

The contract
------------
:func:`fleetlib.contract.contract_differences` lists the fields the two sides state differently.
A field that differs and is not ``under_test`` confounds the comparison: every verdict is refused
(``significant`` None) unless ``allow_confounded``.
"""

from __future__ import annotations

import math
import sys
import warnings
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from fleetlib.contract import contract_differences
from fleetlib.quality import DomainError
from fleetlib.regress.tiers import (
    CLUSTERS,
    RESAMPLING,
    STRAGGLER_BOUND,
    TIERS,
    Metric,
    factor_metrics,
    rank_step_table,
    scaling_curve,
    straggler_episodes,
    tier_metrics,
)

__all__ = [
    "MIN_UNITS",
    "POWER",
    "REGRESSIONS_COLUMNS",
    "Comparison",
    "compare",
    "false_alarm_rate",
    "holm",
    "pairing",
    "ratio_standard_error",
    "regressions_table",
    "unit_tables",
    "verdict_table",
]

#: Fewest resampling units a side (paired: the union) needs for a metric to be tested.
MIN_UNITS: int = 8
#: Power at which the minimum detectable effect is stated.
POWER: float = 0.8
#: The most bootstrap indices one metric's resampling may hold (int64: 8 bytes each).
_MAX_INDEX_CELLS = 1 << 28
_P_COLS = ("step_time_above_baseline", "below_ideal_rate", "program_unobserved")
#: Unit kinds, the unit tables keyed by each, and the key column.
_KINDS: dict[str, tuple[str, ...]] = {
    "job": ("jobs", "commits", "steps", "rank_steps"),
    "cycle": ("cycles",),
}


def _job_keys(jobs: pd.DataFrame) -> pd.Series:
    """Return each job's identity across two bundles: its id and its submit time."""
    submit = pd.to_datetime(jobs["submit"], utc=True)
    text = pd.Series(
        np.where(submit.isna(), "", submit.astype(str).to_numpy(dtype=object)), index=jobs.index, dtype=object
    )
    return pd.Series(jobs.index.astype(str), index=jobs.index, dtype=object) + "@" + text


def _cycle_keys(cycles: pd.DataFrame, index: pd.Series) -> pd.Series:
    """Return each demand cycle's identity: its start (its index when the units hold no cycles)."""
    starts = {}
    if len(cycles) and "cycle_start" in cycles:
        starts = dict(zip(cycles["cycle"].astype(int), cycles["cycle_start"].astype(str), strict=True))
    return pd.Series([starts.get(int(c), f"cycle {int(c)}") for c in index], index=index.index, dtype=object)


def unit_tables(units: Any) -> dict[str, pd.DataFrame]:
    """Return the five unit tables the metrics sum over, each row carrying its unit's key.

    ``cycles`` (``cycle_key``), ``jobs`` (``job_key``, ``cycle_key``), ``commits``, ``steps`` and
    ``rank_steps`` (``job_key``; the job fields joined to the steps).
    """
    jobs = units.jobs.copy()
    jobs["one"] = 1.0
    jobs["job_key"] = _job_keys(jobs)
    jobs["cycle_key"] = _cycle_keys(units.cycles, jobs["cycle"])
    cycles = units.cycles.copy()
    cycles["cycle_key"] = (
        _cycle_keys(units.cycles, cycles["cycle"]) if len(cycles) else pd.Series(dtype=object)
    )
    steps = units.steps.copy()
    job_cols = ["architecture", "software_version", "pool", "productive_device_s", *_P_COLS]
    j = jobs.loc[steps["job_id"], job_cols].reset_index(drop=True)
    share = np.where(
        j["productive_device_s"].to_numpy(float) > 0,
        steps["productive_device_s"].to_numpy(float) / j["productive_device_s"].to_numpy(float),
        0.0,
    )
    for c in _P_COLS:
        steps[c] = j[c].to_numpy(float) * share
    for c in ("architecture", "software_version", "pool"):
        steps[c] = j[c].to_numpy()
    steps["one"] = 1.0
    steps["has_config"] = jobs.loc[steps["job_id"], "ideal_device_s"].notna().to_numpy()
    steps["slow_step"] = (steps["step_ratio"].to_numpy(float) > 1.0 + STRAGGLER_BOUND).astype(float)
    key_of = jobs["job_key"]
    steps["job_key"] = key_of.reindex(steps["job_id"]).to_numpy()
    ranks = units.rank_steps if units.rank_steps is not None else rank_step_table(units.rank_timers)
    ranks = ranks.copy()
    ranks["job_key"] = (
        key_of.reindex(ranks["job_id"].astype(str)).fillna(ranks["job_id"].astype(str)).to_numpy()
    )
    commits = units.commits.copy()
    commits["job_key"] = key_of.reindex(commits["job_id"].astype(str)).to_numpy(dtype=object)
    return {
        "cycles": cycles,
        "jobs": jobs.reset_index(),
        "commits": commits,
        "steps": steps,
        "rank_steps": ranks,
    }


def pairing(ta: Mapping[str, pd.DataFrame], tb: Mapping[str, pd.DataFrame]) -> dict[str, dict[str, Any]]:
    """Return, per kind of unit (job, cycle), whether two sides' units are paired and why.

    Jobs (and with them their commits and steps) are paired when the sides share at least half of the
    smaller side's jobs (same id and submit time); cycles when the jobs are paired and the sides share
    at least half of the smaller side's cycles (same start).

    Returns
    -------
    dict
        ``{kind: {"paired", "shared", "baseline", "candidate", "text"}}``.
    """
    out: dict[str, dict[str, Any]] = {}
    for kind, tables in _KINDS.items():
        col = RESAMPLING[tables[0]][0]
        a = set(ta[tables[0]][col]) if col in ta[tables[0]] else set()
        b = set(tb[tables[0]][col]) if col in tb[tables[0]] else set()
        shared = len(a & b)
        smaller = min(len(a), len(b))
        paired = shared > 0 and 2 * shared >= smaller and (kind == "job" or out["job"]["paired"])
        why = (
            f"paired by {kind} ({shared} shared of {len(a)} | {len(b)})"
            if paired
            else f"independent ({shared} of {len(a)} | {len(b)} {kind}s shared"
            + (")" if kind == "job" or out["job"]["paired"] else "; the jobs are not paired)")
        )
        out[kind] = {"paired": paired, "shared": shared, "baseline": len(a), "candidate": len(b), "text": why}
    return out


def _unit_sums(t: pd.DataFrame, m: Metric) -> pd.DataFrame | None:
    """Return ``num`` and ``den`` summed per unit of the metric (rows ``where``), or None."""
    key = m.cluster or RESAMPLING[m.table][0]
    if not len(t) or m.num not in t or m.den not in t or key not in t:
        return None
    mask = np.ones(len(t), dtype=bool)
    for col, value in m.where.items():
        mask &= (t[col] == value).to_numpy()
    sel = pd.DataFrame(
        {
            "key": t[key].to_numpy()[mask],
            "num": t[m.num].to_numpy(float)[mask],
            "den": t[m.den].to_numpy(float)[mask],
        }
    )
    g = sel.groupby("key", sort=True)[["num", "den"]].sum()
    g = g[(g["den"].to_numpy() > 0) | (g["num"].to_numpy() != 0)]
    return g if len(g) and g["den"].sum() > 0 else None


def _bootstrap_sd(stat: Any, n: int, boot: int, seed: int, table: str) -> float:
    """Return the standard deviation of ``boot`` resamples of ``stat`` over ``n`` units (scipy.stats)."""
    cells = boot * n
    if cells > _MAX_INDEX_CELLS:  # a typo such as --boot 1000000000 would exhaust memory
        raise DomainError(
            f"boot={boot} draws over the {n:,} units of the {table} table would hold {cells:,} bootstrap "
            f"indices (at most {_MAX_INDEX_CELLS:,}, about {_MAX_INDEX_CELLS * 8 / 1e9:.0f} GB while drawn); "
            "use fewer draws"
        )
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (np.arange(n),),
            stat,
            n_resamples=boot,
            vectorized=True,
            method="percentile",
            batch=max(1, (1 << 22) // max(n, 1)),
            rng=np.random.default_rng(seed),
        )
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    dist = dist[np.isfinite(dist)]
    return float(np.std(dist, ddof=1)) if dist.size > 1 else float("nan")


def _ratio(num: np.ndarray, den: np.ndarray, scale: float) -> Any:
    def stat(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        d = den[idx].sum(axis=axis)
        return np.where(d > 0, scale * num[idx].sum(axis=axis) / np.where(d > 0, d, 1.0), np.nan)

    return stat


def ratio_standard_error(
    num: Any, den: Any, *, scale: float = 1.0, boot: int = 400, seed: int = 0, table: str = "given"
) -> float:
    """Return the bootstrap standard error of ``scale x sum(num) / sum(den)`` over independent units.

    Parameters
    ----------
    num, den
        Per unit (a job, a cycle: its rows already summed), the numerator and denominator.
    scale
        Multiplier of the ratio.
    boot
        Resamples (:func:`scipy.stats.bootstrap`, units drawn with replacement).
    seed
        Seed of the resampling.
    table
        Named in the error when ``boot`` times the units would exhaust memory.

    Returns
    -------
    float
        The resamples' standard deviation (NaN with fewer than two units).
    """
    n_arr, d_arr = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if n_arr.size < 2:
        return float("nan")
    return _bootstrap_sd(_ratio(n_arr, d_arr, scale), n_arr.size, boot, seed, table)


def _ratio_test(
    m: Metric, ga: pd.DataFrame | None, gb: pd.DataFrame | None, paired: bool, boot: int, seed: int
) -> dict[str, Any]:
    """Return a ratio metric's values, delta, standard error, degrees of freedom and units."""
    va = float(m.scale * ga["num"].sum() / ga["den"].sum()) if ga is not None else float("nan")
    vb = float(m.scale * gb["num"].sum() / gb["den"].sum()) if gb is not None else float("nan")
    out: dict[str, Any] = {"va": va, "vb": vb, "se": float("nan"), "df": float("nan")}
    out["units_a"] = 0 if ga is None else len(ga)
    out["units_b"] = 0 if gb is None else len(gb)
    if ga is None or gb is None:
        out["units"] = min(out["units_a"], out["units_b"])
        return out
    if paired:
        u = ga.index.union(gb.index)
        a, b = ga.reindex(u, fill_value=0.0), gb.reindex(u, fill_value=0.0)
        out["units"] = len(u)
        if len(u) < MIN_UNITS:
            return out
        sa = _ratio(a["num"].to_numpy(float), a["den"].to_numpy(float), m.scale)
        sb = _ratio(b["num"].to_numpy(float), b["den"].to_numpy(float), m.scale)
        same = np.array_equal(a.to_numpy(), b.to_numpy())
        out["se"] = (
            0.0
            if same
            else _bootstrap_sd(lambda i, axis=-1: sb(i, axis) - sa(i, axis), len(u), boot, seed, m.table)
        )
        out["df"] = float(len(u) - 1)
        return out
    na, nb = len(ga), len(gb)
    out["units"] = min(na, nb)
    if min(na, nb) < MIN_UNITS:
        return out
    se_a, se_b = (
        ratio_standard_error(g["num"], g["den"], scale=m.scale, boot=boot, seed=seed + k, table=m.table)
        for k, g in enumerate((ga, gb))
    )
    out["se"] = float(math.hypot(se_a, se_b))
    welch = se_a**4 / (na - 1) + se_b**4 / (nb - 1)
    out["df"] = float((se_a**2 + se_b**2) ** 2 / welch) if welch > 0 else float(min(na, nb) - 1)
    return out


def _events(t: pd.DataFrame, m: Metric) -> tuple[float, float]:
    """Return (events, exposure) of an events metric over its rows."""
    g = _unit_sums(t, m)
    return (0.0, 0.0) if g is None else (float(g["num"].sum()), float(g["den"].sum()))


def holm(p_values: Sequence[float], alpha: float) -> tuple[list[bool], list[float], list[float]]:
    """Holm's step-down over a family of p-values.

    Parameters
    ----------
    p_values
        One p-value per hypothesis.
    alpha
        Family-wise error rate.

    Returns
    -------
    tuple of lists
        ``reject`` per hypothesis; ``level``: the significance level it was judged at
        (``alpha / (m - i + 1)`` for the ``i``-th smallest p-value while they are rejected, the level
        of the first step that was not for every later one); ``adjusted``: Holm's adjusted p-value
        ``max_{j <= i} min(1, (m - j + 1) p_(j))``.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    reject, level, adjusted = [False] * m, [alpha] * m, [1.0] * m
    stop: float | None = None
    running = 0.0
    for rank, i in enumerate(order):
        step = alpha / (m - rank)
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
        if stop is None and p_values[i] <= step:
            reject[i], level[i] = True, step
        else:
            stop = step if stop is None else stop
            level[i] = stop
    return reject, level, adjusted


@dataclass
class Comparison:
    """The result of :func:`compare`.

    Attributes
    ----------
    baseline, candidate
        The names of the two sides.
    contract_differences
        :func:`fleetlib.contract.contract_differences`, plus manifest keys outside Table 2.
    confounders
        Fields that differ and are not under test (a verdict is refused unless allowed).
    verdicts
        One record per metric: ``factor, tier, metric, unit, baseline, candidate, delta, ci_low,
        ci_high, ci_level, p_value, p_holm, mde, standard_error, df, units, units_baseline,
        units_candidate, significant, verdict, resampling, pairing``.
    sections
        Per tier: its metrics' records, and its findings (scaling curve, straggler episodes).
    settings
        Level, draws, the family tested (Holm), the pairing, the resampling units, the cycle.
    notes
        What a side left out.
    """

    baseline: str
    candidate: str
    contract_differences: list[dict[str, Any]]
    confounders: list[str]
    verdicts: list[dict[str, Any]]
    sections: dict[str, Any]
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """Whether the verdicts were refused (a confounding contract difference, not allowed)."""
        return bool(self.confounders) and not self.settings["allow_confounded"]

    def significant(self, *, tier: str | None = None, factor: str | None = None) -> list[dict[str, Any]]:
        """Return the significant regressions (optionally of one tier or factor)."""
        return [
            v
            for v in self.verdicts
            if v["verdict"] == "regression"
            and (tier is None or v["tier"] == tier)
            and (factor is None or v["factor"] == factor)
        ]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON object of ``fleetlib compare --json``."""
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "contract_differences": self.contract_differences,
            "confounders": self.confounders,
            "refused": self.refused,
            "verdicts": self.verdicts,
            "sections": self.sections,
            "settings": self.settings,
            "notes": self.notes,
        }


def _other_differences(a: Any, b: Any, under_test: set[str]) -> list[dict[str, Any]]:
    out = []
    for k in sorted(set(a.contract.other) | set(b.contract.other)):
        if k == "jobs":
            continue
        va, vb = a.contract.other.get(k, "not stated"), b.contract.other.get(k, "not stated")
        if va != vb:
            out.append(
                {
                    "field": k,
                    "category": "other (not a Table 2 field)",
                    "baseline": va,
                    "candidate": vb,
                    "kind": "other",
                    "under_test": k in under_test,
                }
            )
    return out


_KIND_OF_KEY = {"job_key": "job", "cycle_key": "cycle"}


def _test(
    m: Metric,
    ta: Mapping[str, pd.DataFrame],
    tb: Mapping[str, pd.DataFrame],
    paired: bool,
    boot: int,
    seed: int,
) -> dict[str, Any]:
    """Return one metric's test: values, delta, p-value (None: not tested) and what its interval needs."""
    if m.kind == "events":
        (ka, na), (kb, nb) = _events(ta[m.table], m), _events(tb[m.table], m)
        total = round(ka + kb)
        r: dict[str, Any] = {
            "va": m.scale * ka / na if na > 0 else float("nan"),
            "vb": m.scale * kb / nb if nb > 0 else float("nan"),
            "events": (ka, na, kb, nb),
            "units": total,
            "units_a": round(ka),
            "units_b": round(kb),
            "p": None,
        }
        if na > 0 and nb > 0 and total > 0:
            r["binom"] = stats.binomtest(round(kb), total, nb / (na + nb))
            r["p"] = float(r["binom"].pvalue)
        return r
    r = _ratio_test(m, _unit_sums(ta[m.table], m), _unit_sums(tb[m.table], m), paired, boot, seed)
    r["p"] = None
    if np.isfinite(r["va"]) and np.isfinite(r["vb"]) and np.isfinite(r["se"]):
        delta = r["vb"] - r["va"]
        if r["se"] > 0:
            r["p"] = float(2.0 * stats.t.sf(abs(delta) / r["se"], r["df"]))
        elif delta != 0:
            r["p"] = 0.0  # every resample gives the same non-zero delta
    return r


def _interval(m: Metric, r: dict[str, Any], alpha_i: float) -> tuple[float, float]:
    """Return the delta's interval at significance ``alpha_i``, cut to the metric's range."""
    va = r["va"]
    if m.kind == "events":
        ka, na, kb, nb = r["events"]
        total = round(ka + kb)
        ci = r["binom"].proportion_ci(confidence_level=1.0 - alpha_i, method="exact")
        lo = m.scale * total * (ci.low / nb - (1 - ci.low) / na)
        hi = m.scale * total * (ci.high / nb - (1 - ci.high) / na)
    else:
        delta = r["vb"] - va
        half = float(stats.t.ppf(1.0 - alpha_i / 2.0, r["df"]) * r["se"]) if r["se"] > 0 else 0.0
        lo, hi = delta - half, delta + half
    return float(max(lo, 0.0 - va)), float(min(hi, m.upper - va))


def _mde(m: Metric, r: dict[str, Any], alpha_first: float) -> float | None:
    """Return the effect the family's first step would find with :data:`POWER` probability."""
    if m.kind == "events":
        ka, na, kb, nb = r["events"]
        if na <= 0 or nb <= 0:
            return None
        rate = max(ka + kb, 1.0) / (na + nb)  # the pooled rate (at least one event), normal approximation
        z = stats.norm.ppf(1.0 - alpha_first / 2.0) + stats.norm.ppf(POWER)
        return float(m.scale * z * math.sqrt(rate / na + rate / nb))
    if not np.isfinite(r["se"]) or not np.isfinite(r["df"]):
        return None
    t = stats.t.ppf(1.0 - alpha_first / 2.0, r["df"]) + stats.t.ppf(POWER, r["df"])
    return float(t * r["se"])


def _resampling(m: Metric) -> str:
    if m.kind == "events":
        return "exact conditional binomial test (events over exposure)"
    return CLUSTERS[m.cluster] if m.cluster is not None else RESAMPLING[m.table][1]


def _record(
    m: Metric,
    r: dict[str, Any],
    test: dict[str, Any] | None,
    refused: bool,
    confounders: list[str],
    pair_text: str,
) -> dict[str, Any]:
    va, vb = r["va"], r["vb"]
    finite = bool(np.isfinite(va) and np.isfinite(vb))
    delta = float(vb - va) if finite else None
    rec: dict[str, Any] = {
        "factor": m.factor,
        "tier": m.tier,
        "metric": m.name,
        "unit": m.unit,
        "baseline": float(va) if np.isfinite(va) else None,
        "candidate": float(vb) if np.isfinite(vb) else None,
        "delta": delta,
        "ci_low": None,
        "ci_high": None,
        "ci_level": None,
        "p_value": r["p"],
        "p_holm": None,
        "mde": None,
        "standard_error": None if m.kind == "events" or not np.isfinite(r.get("se", np.nan)) else r["se"],
        "df": None if m.kind == "events" or not np.isfinite(r.get("df", np.nan)) else r["df"],
        "units": r["units"],
        "units_baseline": r["units_a"],
        "units_candidate": r["units_b"],
        "significant": None,
        "verdict": "",
        "resampling": _resampling(m),
        "pairing": "events compared as counts" if m.kind == "events" else pair_text,
    }
    if m.kind == "events":
        rec["events"] = {"baseline": r["events"][0], "candidate": r["events"][2]}
    if test is not None:
        rec["ci_low"], rec["ci_high"] = _interval(m, r, test["level"])
        rec["ci_level"] = 1.0 - test["level"]
        rec["p_holm"] = test["adjusted"]
        rec["mde"] = _mde(m, r, test["first"])
    if not finite:
        rec["verdict"] = "not measured on both sides"
    elif refused:
        rec["verdict"] = "no verdict: contract differs on " + ", ".join(confounders)
    elif test is None:
        if m.kind == "events":
            rec["verdict"] = "no events on either side: nothing to test"
        elif r["units"] < MIN_UNITS:
            rec["verdict"] = f"too few units (n={r['units']}) to test"
        elif not np.isfinite(r["se"]):
            rec["verdict"] = "no interval: the resamples' ratio is undefined (no denominator)"
        else:
            rec["verdict"] = (
                "no change on any unit" if "paired" in pair_text[:6] else "no change measurable (no spread)"
            )
    else:
        rec["significant"] = bool(test["reject"])
        if not test["reject"]:
            rec["verdict"] = "no significant change"
        else:
            worse = (delta < 0) if m.better == "higher" else (delta > 0)
            rec["verdict"] = "regression" if worse else "improvement"
    return rec


def compare(
    baseline: Any,
    candidate: Any,
    *,
    under_test: Iterable[str] = (),
    allow_confounded: bool = False,
    tiers: Sequence[str] | None = None,
    level: float = 0.95,
    boot: int = 400,
    seed: int = 0,
    paired: bool | None = None,
    progress: bool = False,
) -> Comparison:
    """Compare two measurements per factor, loss category and Table 4 tier.

    Parameters
    ----------
    baseline, candidate
        :class:`~fleetlib.regress.units.FleetUnits` (see :func:`fleetlib.regress.units.fleet_units`
        and :meth:`~fleetlib.regress.units.FleetUnits.subset` / ``split``).
    under_test
        Contract fields the comparison is about (their difference is the change under test).
    allow_confounded
        Give verdicts even when other contract fields differ (they are still named).
    tiers
        Tiers to include (default all of :data:`fleetlib.regress.tiers.TIERS`); factors and loss
        categories are always compared.
    level
        Family-wise confidence level over the metrics tested (Holm's step-down).
    boot
        Bootstrap resamples per metric (and side, when not paired).
    seed
        Seed of the resampling (each metric draws from its own stream of it).
    paired
        None (default): pair by unit id where the sides share their units (see the module
        docstring); False: every metric independent; True: pair every kind of unit the sides share
        at all.
    progress
        A bar over the metrics bootstrapped, on stderr (tqdm; a widget in a notebook).

    Returns
    -------
    Comparison
        Verdicts per metric, sections per tier, the contract differences.

    Raises
    ------
    DomainError
        A level outside (0, 1), fewer than 50 draws, an unknown tier, more draws than memory holds.
    """
    if not 0.0 < level < 1.0:
        raise DomainError(f"level must lie in (0, 1); got {level!r}")
    if boot < 50:
        raise DomainError(f"boot must be at least 50 draws; got {boot!r}")
    chosen = list(TIERS) if tiers is None else list(tiers)
    unknown = sorted(set(chosen) - set(TIERS))
    if unknown:
        raise DomainError(f"unknown tier(s) {unknown}; tiers are {list(TIERS)}")
    tested = set(under_test)
    diffs = contract_differences(baseline.contract, candidate.contract, under_test=tested)
    diffs += _other_differences(baseline, candidate, tested)
    confounders = sorted({d["field"] for d in diffs if d["kind"] == "differs" and not d["under_test"]})
    refused = bool(confounders) and not allow_confounded
    ta, tb = unit_tables(baseline), unit_tables(candidate)
    pairs = pairing(ta, tb)
    for kind, p in pairs.items():
        if paired is False or (paired is True and p["shared"] > 0):
            p["paired"] = bool(paired)
            p["text"] = (
                f"paired by {kind} ({p['shared']} shared of {p['baseline']} | {p['candidate']}; asked)"
                if paired
                else "independent (asked)"
            )
    names_b = {m.name for m in tier_metrics(candidate)}
    metrics = factor_metrics() + [m for m in tier_metrics(baseline) if m.tier in chosen and m.name in names_b]
    from tqdm.auto import tqdm

    results = []
    for m in tqdm(metrics, desc="compare bootstrap", unit="metric", file=sys.stderr, disable=not progress):
        kind = _KIND_OF_KEY[m.cluster or RESAMPLING[m.table][0]]
        stream = zlib.crc32(m.name.encode())
        results.append((m, kind, _test(m, ta, tb, pairs[kind]["paired"], boot, seed * 7919 + stream)))
    family = [i for i, (_m, _k, r) in enumerate(results) if r["p"] is not None]
    alpha = 1.0 - level
    reject, levels, adjusted = holm([results[i][2]["p"] for i in family], alpha)
    first = alpha / max(len(family), 1)
    tests = {
        i: {"reject": reject[j], "level": levels[j], "adjusted": adjusted[j], "first": first}
        for j, i in enumerate(family)
    }
    verdicts = [
        _record(m, r, tests.get(i), refused, confounders, pairs[kind]["text"])
        for i, (m, kind, r) in enumerate(results)
    ]
    order = {m.name: i for i, m in enumerate(factor_metrics() + tier_metrics(baseline))}
    verdicts.sort(
        key=lambda v: (
            list(TIERS).index(v["tier"]) + 2 if v["tier"] in TIERS else ["factor", "loss"].index(v["tier"]),
            order.get(v["metric"], 0),
        )
    )
    sections = {t: {"factor": TIERS[t], "metrics": [v for v in verdicts if v["tier"] == t]} for t in chosen}
    if "canaries" in sections:
        sections["canaries"]["scaling_curve"] = {
            "baseline": scaling_curve(baseline),
            "candidate": scaling_curve(candidate),
        }
    if "gray_failure" in sections:
        sections["gray_failure"]["straggler_episodes"] = {
            "baseline": straggler_episodes(baseline.rank_timers),
            "candidate": straggler_episodes(candidate.rank_timers),
        }
        if not baseline.rank_timers and not candidate.rank_timers:
            sections["gray_failure"]["note"] = "no per-rank timers in either bundle: stragglers not located"
    if "allocation" in sections:
        sections["allocation"]["note"] = (
            "fragmentation index not measured: it needs node-level free devices, which measure_fleet does "
            "not read from the scheduler records"
        )
    notes = list(dict.fromkeys([*baseline.notes, *candidate.notes]))
    return Comparison(
        baseline=baseline.name,
        candidate=candidate.name,
        contract_differences=diffs,
        confounders=confounders,
        verdicts=verdicts,
        sections=sections,
        settings={
            "level": level,
            "boot": boot,
            "family": "Holm step-down",
            "tested_metrics": len(family),
            "seed": seed,
            "min_units": MIN_UNITS,
            "power": POWER,
            "interval": "delta +- t(1 - a_i / 2, df) x bootstrap standard error, a_i the level Holm "
            "judged the metric at; cut to the metric's range",
            "mde": f"(t(1 - (1 - level) / 2m, df) + t({POWER}, df)) x standard error, m the metrics tested",
            "under_test": sorted(tested),
            "allow_confounded": allow_confounded,
            "pairing": pairs,
            "resampling": {k: v[1] for k, v in RESAMPLING.items()},
            "cycle": str(baseline.cycle),
        },
        notes=notes,
    )


def false_alarm_rate(pairs: Iterable[tuple[Any, Any]], *, seed: int = 0, **kwargs: Any) -> dict[str, Any]:
    """Measure the false-alarm rate on unchanged pairs: any metric called significant is a false alarm.

    Parameters
    ----------
    pairs
        ``(baseline, candidate)`` units of pairs in which nothing changed (e.g. two bundles drawn with
        the same parameters and different seeds: :func:`fleetlib.regress.synth.unchanged_pairs`).
    seed
        Seed of the first comparison's resampling (the ``i``-th pair uses ``seed + i``).
    **kwargs
        Passed to :func:`compare`.

    Returns
    -------
    dict
        ``pairs``, ``false_alarms`` (pairs with any significant change), ``rate``,
        ``metrics_per_pair``, ``tested_per_pair`` (the most metrics a pair tested), and the metrics that
        alarmed.
    """
    alarms, alarmed, counts, tested, n = 0, [], [], [], 0
    for i, (a, b) in enumerate(pairs):
        res = compare(a, b, seed=seed + i, **kwargs)
        sig = [v["metric"] for v in res.verdicts if v["significant"]]
        counts.append(len(res.verdicts))
        tested.append(res.settings["tested_metrics"])
        n += 1
        if sig:
            alarms += 1
            alarmed.append({"pair": i, "metrics": sig})
    if not n:
        raise DomainError("false_alarm_rate needs at least one pair")
    return {
        "pairs": n,
        "false_alarms": alarms,
        "rate": alarms / n,
        "metrics_per_pair": max(counts),
        "tested_per_pair": max(tested),
        "alarmed": alarmed,
        "definition": "unchanged pairs in which any metric was called significant (either direction)",
    }


def verdict_table(result: Comparison | Mapping[str, Any]) -> pd.DataFrame:
    """Return the verdicts as a table (one row per metric)."""
    d = result.to_dict() if isinstance(result, Comparison) else result
    return pd.DataFrame.from_records(d["verdicts"])


#: Columns of :func:`regressions_table`, in order.
REGRESSIONS_COLUMNS = ("candidate", "tier", "factor", "metric", "baseline value", "candidate value",
                       "delta", "unit", "ci_low", "ci_high", "verdict")


def regressions_table(results: Mapping[str, Comparison | Mapping[str, Any]], *,
                      metrics: Mapping[str, str] | None = None,
                      significant_only: bool = False) -> pd.DataFrame:
    """Return several comparisons' verdicts as one table, each row named by its candidate.

    Parameters
    ----------
    results
        Candidate name -> its :class:`Comparison` against the baseline (or the comparison's
        :meth:`Comparison.to_dict`).
    metrics
        Candidate name -> the one metric to show for it (the metric its tier watches); None: every metric.
    significant_only
        Keep only the rows whose change is significant.

    Returns
    -------
    pandas.DataFrame
        One row per candidate and metric, columns :data:`REGRESSIONS_COLUMNS`: the candidate's name, the
        metric's tier, factor and name, the two sides' values, ``delta`` = candidate value - baseline
        value in the metric's ``unit``, the delta's interval (``ci_low``, ``ci_high``, same unit) and the
        verdict.
    """
    rows = []
    for name, result in results.items():
        d = result.to_dict() if isinstance(result, Comparison) else result
        for v in d["verdicts"]:
            if metrics is not None and v["metric"] != metrics.get(name):
                continue
            if significant_only and not v["significant"]:
                continue
            rows.append({"candidate": name, "tier": v["tier"], "factor": v["factor"], "metric": v["metric"],
                         "baseline value": v["baseline"], "candidate value": v["candidate"],
                         "delta": v["delta"], "unit": v["unit"], "ci_low": v["ci_low"],
                         "ci_high": v["ci_high"], "verdict": v["verdict"]})
    return pd.DataFrame.from_records(rows, columns=list(REGRESSIONS_COLUMNS))
