"""Compare two measurements under their contracts: per factor, loss category and tier, with intervals.

:func:`compare` takes two :class:`~fleetlib.regress.units.FleetUnits` (two bundles, two windows of
one bundle, or two groups of one bundle split by a contract field) and returns, for every metric of
:func:`fleetlib.regress.tiers.factor_metrics` and :func:`~fleetlib.regress.tiers.tier_metrics`, the
baseline, the candidate, the delta and a confidence interval of the delta, and a verdict.

The interval
------------
Each side is resampled on its own by a Poisson bootstrap (every unit weighted by a Poisson(1)
draw) at the unit that fits the factor's timescale: whole demand cycles for S, jobs within days for
R (two-stage: days, then jobs), retained steps within jobs for P (two-stage: jobs, then steps).
The delta's interval is ``delta +- t x sqrt(se_baseline^2 + se_candidate^2)`` with the bootstrap
standard errors and ``t`` Student's quantile at ``1 - alpha / (2 m)`` on ``units - 1`` degrees of
freedom (``units`` the smaller side's count of independent units): Bonferroni over the ``m``
metrics compared, so the chance that *any* metric of an unchanged pair is called significant is at
most about ``alpha`` (measured in the tests: :func:`false_alarm_rate`).

The contract
------------
:func:`fleetlib.contract.contract_differences` lists the fields the two sides state differently.
A field that differs and is not ``under_test`` confounds the comparison: every verdict is refused
(``significant`` None) unless ``allow_confounded``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.contract import contract_differences
from fleetlib.quality import DomainError
from fleetlib.regress.tiers import (
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
    "Comparison",
    "binomial_bounds",
    "compare",
    "false_alarm_rate",
    "poisson_bounds",
    "t_quantile",
    "unit_tables",
    "verdict_table",
]

_P_COLS = ("step_time_above_baseline", "below_ideal_rate", "program_unobserved")


def unit_tables(units: Any) -> dict[str, pd.DataFrame]:
    """Return the four unit tables the metrics sum over (with the job fields joined to steps)."""
    jobs = units.jobs.copy()
    jobs["one"] = 1.0
    cycles = units.cycles.copy()
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
    return {
        "cycles": cycles,
        "jobs": jobs.reset_index(),
        "steps": steps,
        "rank_steps": rank_step_table(units.rank_timers),
    }


def t_quantile(p: float, df: float) -> float:
    """Return Student's t quantile (Hill's 1970 expansion of the normal quantile; exact as df grows).

    Parameters
    ----------
    p
        Probability in (0.5, 1).
    df
        Degrees of freedom (at least 1).
    """
    z = statistics.NormalDist().inv_cdf(p)
    v = max(float(df), 1.0)
    return float(
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


#: Columns that identify a unit across two sides (paired comparisons).
_KEYS: dict[str, tuple[str, ...]] = {
    "cycles": ("pool", "cycle"),
    "jobs": ("job_id",),
    "steps": ("job_id", "step"),
    "rank_steps": ("job_id", "step"),
}


def _labels(t: pd.DataFrame, cols: Sequence[str]) -> pd.Series:
    if not len(t):
        return pd.Series([], dtype=object)
    out = t[cols[0]].astype(str).astype(object)
    for c in cols[1:]:
        out = out + "|" + t[c].astype(str).astype(object)
    return out


def _poisson_cdf(k: int, lam: float) -> float:
    if lam <= 0:
        return 1.0
    terms = [-lam + i * math.log(lam) - math.lgamma(i + 1) for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def poisson_bounds(k: int, tail: float) -> tuple[float, float]:
    """Return the exact (Garwood) bounds of a Poisson mean from ``k`` events, ``tail`` in each tail.

    Parameters
    ----------
    k
        Events observed (>= 0).
    tail
        Probability left in each tail (e.g. 0.025 for a 95 % interval).
    """

    def solve(f: Any, lo: float, hi: float) -> float:
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if f(mid) else (lo, mid)
        return 0.5 * (lo + hi)

    hi_start = max(10.0, 10.0 * (k + 10))
    upper = solve(lambda lam: _poisson_cdf(k, lam) > tail, 0.0, hi_start)
    lower = 0.0 if k == 0 else solve(lambda lam: 1.0 - _poisson_cdf(k - 1, lam) < tail, 0.0, hi_start)
    return lower, upper


def _events(t: pd.DataFrame, m: Metric) -> tuple[float, float]:
    """Return (events, exposure) of an events metric over its rows."""
    mask = np.ones(len(t), dtype=bool)
    for col, value in m.where.items():
        mask &= (t[col] == value).to_numpy()
    if not len(t) or m.num not in t or m.den not in t:
        return 0.0, 0.0
    return float(t.loc[mask, m.num].sum()), float(t.loc[mask, m.den].sum())


def _binom_cdf(k: int, n: int, p: float) -> float:
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    terms = [
        math.lgamma(n + 1)
        - math.lgamma(i + 1)
        - math.lgamma(n - i + 1)
        + i * math.log(p)
        + (n - i) * math.log1p(-p)
        for i in range(k + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def binomial_bounds(k: int, n: int, tail: float) -> tuple[float, float]:
    """Return the exact (Clopper-Pearson) bounds of a binomial proportion, ``tail`` in each tail."""

    def solve(f: Any) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if f(mid) else (lo, mid)
        return 0.5 * (lo + hi)

    lower = 0.0 if k == 0 else solve(lambda p: 1.0 - _binom_cdf(k - 1, n, p) < tail)
    upper = 1.0 if k == n else solve(lambda p: _binom_cdf(k, n, p) > tail)
    return lower, upper


def _events_verdict(
    m: Metric, ta: pd.DataFrame, tb: pd.DataFrame, alpha: float, refused: bool, confounders: list[str]
) -> dict[str, Any]:
    """Return an events metric's record: the two Poisson rates compared by the exact conditional test.

    Given the ``K`` events of both sides, the candidate's share is binomial with ``p0 = nb / (na + nb)``
    when the rates are equal; its Clopper-Pearson interval ``[pl, pu]`` maps onto the delta of the rates
    as ``K (p / nb - (1 - p) / na)``, so the interval excludes 0 exactly when the test rejects.
    """
    (ka, na), (kb, nb) = _events(ta, m), _events(tb, m)
    total = round(ka + kb)
    if na <= 0 or nb <= 0:
        rec = _verdict(m, float("nan"), float("nan"), float("nan"), 0.0, refused, confounders, 0)
    elif total == 0:
        rec = _verdict(m, 0.0, 0.0, float("nan"), 0.0, refused, confounders, 0)
    else:
        va, vb = m.scale * ka / na, m.scale * kb / nb
        pl, pu = binomial_bounds(round(kb), total, alpha / 2)
        lo = m.scale * total * (pl / nb - (1 - pl) / na)
        hi = m.scale * total * (pu / nb - (1 - pu) / na)
        rec = _verdict(m, va, vb, 1.0, 0.0, refused, confounders, total)
        rec["ci_low"], rec["ci_high"] = float(lo), float(hi)
        if not refused:
            sig = bool(lo > 0 or hi < 0)
            rec["significant"] = sig
            worse = (vb < va) if m.better == "higher" else (vb > va)
            rec["verdict"] = ("regression" if worse else "improvement") if sig else "no significant change"
    rec["resampling"] = "exact conditional Poisson test (events over exposure)"
    rec["events"] = {"baseline": ka, "candidate": kb}
    return rec


#: The most bootstrap weights one table's draw may hold (float32, drawn as int64: 12 bytes each).
_MAX_WEIGHT_CELLS = 1 << 28


class _Resampler:
    """Poisson bootstrap weights per (table, cluster) of one side, drawn once and shared by its metrics.

    With a ``partner`` (a paired comparison) a unit with the same key on both sides -- the same cycle,
    job or step -- gets the same weight on both.
    """

    def __init__(
        self,
        tables: Mapping[str, pd.DataFrame],
        boot: int,
        rng: np.random.Generator,
        partner: Mapping[str, pd.DataFrame] | None = None,
    ) -> None:
        self.tables, self.boot, self.rng, self.partner = tables, boot, rng, partner
        self._cache: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self._shared: dict[tuple[str, str, str], dict[str, np.ndarray]] = {}

    def _draw(
        self, table: str, what: str, col: str, labels: pd.Series, other: pd.Series | None
    ) -> np.ndarray:
        """Return a (boot x len(labels)) weight matrix; paired: the same draw for the same label."""
        cells = self.boot * (len(labels) + (0 if other is None else len(other)))
        if cells > _MAX_WEIGHT_CELLS:  # a typo such as --boot 1000000000 would exhaust memory
            raise DomainError(f"boot={self.boot} draws over the {len(labels):,} rows of the {table} table "
                              f"would hold {cells:,} bootstrap weights (at most {_MAX_WEIGHT_CELLS:,}, about "
                              f"{_MAX_WEIGHT_CELLS * 12 / 1e9:.0f} GB while drawn); use fewer draws")
        if other is None:
            codes = pd.factorize(labels)[0]
            n = int(codes.max()) + 1 if len(codes) else 0
            return self.rng.poisson(1.0, size=(self.boot, n)).astype(np.float32)[:, codes]
        key = (table, what, col)
        if key not in self._shared:
            union = pd.Index(pd.concat([labels, other]).unique())
            draw = self.rng.poisson(1.0, size=(self.boot, len(union))).astype(np.float32)
            self._shared[key] = {"index": union, "draw": draw}
        sh = self._shared[key]
        return sh["draw"][:, sh["index"].get_indexer(labels)]

    def weights(self, table: str, cluster: str) -> tuple[np.ndarray, np.ndarray]:
        key = (table, cluster)
        if key not in self._cache:
            t = self.tables[table]
            o = None if self.partner is None else self.partner[table]
            inner = RESAMPLING[table][1]
            outer = t[cluster].astype(str) if cluster in t else _labels(t, _KEYS[table])
            o_outer = (
                None if o is None else (o[cluster].astype(str) if cluster in o else _labels(o, _KEYS[table]))
            )
            codes = pd.factorize(outer)[0]
            w = self._draw(
                table,
                "outer",
                cluster,
                outer.reset_index(drop=True),
                None if o_outer is None else o_outer.reset_index(drop=True),
            )
            if inner:
                rows = _labels(t, _KEYS[table]).reset_index(drop=True)
                o_rows = None if o is None else _labels(o, _KEYS[table]).reset_index(drop=True)
                w = w * self._draw(table, "inner", cluster, rows, o_rows)
            self._cache[key] = (w, codes)
        return self._cache[key]

    def metric(self, m: Metric) -> tuple[float, np.ndarray, int]:
        """Return the metric's value, its replicates and its count of independent units."""
        t = self.tables[m.table]
        if not len(t) or m.num not in t or m.den not in t:
            return float("nan"), np.full(self.boot, np.nan), 0
        mask = np.ones(len(t), dtype=bool)
        for col, value in m.where.items():
            mask &= (t[col] == value).to_numpy()
        num = np.where(mask, t[m.num].to_numpy(float), 0.0)
        den = np.where(mask, t[m.den].to_numpy(float), 0.0)
        total = den.sum()
        if not mask.any() or total <= 0:
            return float("nan"), np.full(self.boot, np.nan), 0
        cluster = m.cluster or RESAMPLING[m.table][0] or ""
        w, codes = self.weights(m.table, cluster)
        n_b = (w @ num.astype(np.float32)).astype(float)
        d_b = (w @ den.astype(np.float32)).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            reps = np.where(d_b > 0, m.scale * n_b / d_b, np.nan)
        outer = np.unique(codes[mask]).size
        units = outer if outer > 1 or not RESAMPLING[m.table][1] else int(mask.sum())
        return float(m.scale * num.sum() / total), reps, units


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
        ci_high, significant, verdict, resampling``.
    sections
        Per tier: its metrics' records, and its findings (scaling curve, straggler episodes).
    settings
        Level, bootstrap draws, Bonferroni count, seed, under test, allowed confounding.
    notes
        What was left out and why.
    """

    baseline: str
    candidate: str
    contract_differences: list[dict[str, Any]]
    confounders: list[str]
    verdicts: list[dict[str, Any]]
    sections: dict[str, dict[str, Any]]
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
    paired: bool = False,
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
        Family-wise confidence level over all metrics compared (Bonferroni).
    boot
        Bootstrap draws per side and metric.
    seed
        Seed of the resampling.
    paired
        The two sides hold the same units (the same jobs replayed under the change, e.g. two
        synthetic bundles of one seed): a unit with the same key -- cycle, job, step -- gets the same
        bootstrap weight on both sides and the interval is that of the paired delta.  Units on one
        side only keep their own draw.

    Returns
    -------
    Comparison
        Verdicts per metric, sections per tier, the contract differences.

    Raises
    ------
    DomainError
        A level outside (0, 1), fewer than 50 draws, an unknown tier.
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
    names_b = {m.name for m in tier_metrics(candidate)}
    metrics = factor_metrics() + [m for m in tier_metrics(baseline) if m.tier in chosen and m.name in names_b]
    rng = np.random.default_rng(seed)
    side_a = _Resampler(ta, boot, rng, tb if paired else None)
    side_b = _Resampler(tb, boot, rng, ta if paired else None)
    if paired:  # one shared draw per key
        side_b._shared = side_a._shared
    rows = []
    events = [m for m in metrics if m.kind == "events"]
    metrics = [m for m in metrics if m.kind != "events"]
    for m in metrics:
        va, ra, na = side_a.metric(m)
        vb, rb, nb = side_b.metric(m)
        enough = np.isfinite(ra).sum() > 1 and np.isfinite(rb).sum() > 1 and min(na, nb) >= 2
        if not enough:
            se = float("nan")
        elif paired:
            se = float(np.nanstd(rb - ra))
        else:
            se = float(np.sqrt(np.nanvar(ra) + np.nanvar(rb)))
        rows.append((m, va, vb, se, min(na, nb)))
    testable = [r for r in rows if np.isfinite(r[1]) and np.isfinite(r[2]) and np.isfinite(r[3]) and r[3] > 0]
    n_tests = max(len(testable) + len(events), 1)
    p = 1.0 - (1.0 - level) / (2.0 * n_tests)
    verdicts = [
        _verdict(m, va, vb, se, t_quantile(p, units - 1), refused, confounders, units)
        for m, va, vb, se, units in rows
    ]
    verdicts += [
        _events_verdict(m, ta[m.table], tb[m.table], (1.0 - level) / n_tests, refused, confounders)
        for m in events
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
            "bonferroni_metrics": n_tests,
            "seed": seed,
            "interval": "delta +- t(1 - (1 - level) / (2 m), units - 1) x bootstrap standard error",
            "under_test": sorted(tested),
            "allow_confounded": allow_confounded,
            "paired": paired,
            "resampling": {k: v[2] for k, v in RESAMPLING.items()},
            "cycle": str(baseline.cycle),
        },
        notes=notes,
    )


def _verdict(
    m: Metric, va: float, vb: float, se: float, z: float, refused: bool, confounders: list[str], units: int
) -> dict[str, Any]:
    finite = bool(np.isfinite(va) and np.isfinite(vb))
    delta = vb - va if finite else None
    ok = finite and np.isfinite(se) and se > 0
    lo = float(delta - z * se) if ok else None
    hi = float(delta + z * se) if ok else None
    significant: bool | None = None
    if ok and not refused:
        significant = bool(lo > 0 or hi < 0)
    if not finite:
        verdict = "not measured on both sides"
    elif refused:
        verdict = "no verdict: contract differs on " + ", ".join(confounders)
    elif not ok:
        verdict = "no change measurable (no spread)" if delta == 0 else "no interval (too few units)"
    elif not significant:
        verdict = "no significant change"
    else:
        worse = (delta < 0) if m.better == "higher" else (delta > 0)
        verdict = "regression" if worse else "improvement"
    return {
        "factor": m.factor,
        "tier": m.tier,
        "metric": m.name,
        "unit": m.unit,
        "baseline": va if np.isfinite(va) else None,
        "candidate": vb if np.isfinite(vb) else None,
        "delta": delta,
        "ci_low": lo,
        "ci_high": hi,
        "significant": significant,
        "verdict": verdict,
        "resampling": RESAMPLING[m.table][2] if m.cluster is None else "jobs within whole demand cycles",
        "units": units,
    }


def false_alarm_rate(units: Any, *, pairs: int = 20, seed: int = 0, **kwargs: Any) -> dict[str, Any]:
    """Measure the false-alarm rate on unchanged pairs: random halves of one bundle's demand cycles.

    Each pair splits the bundle's whole cycles at random into two equal sets (jobs go with the cycle
    their gang completed in); nothing differs between the halves but chance, so any significant
    regression is a false alarm.

    Parameters
    ----------
    units
        One bundle's units (at least four cycles).
    pairs
        Number of unchanged pairs.
    seed
        Seed of the splits (and, offset, of each comparison's resampling).
    **kwargs
        Passed to :func:`compare`.

    Returns
    -------
    dict
        ``pairs``, ``false_alarms`` (pairs with any significant change), ``rate``, ``metrics`` per
        pair, and the metrics that alarmed.
    """
    cyc = np.array(sorted(units.cycles["cycle"].unique()))
    if cyc.size < 4:
        raise DomainError(f"false_alarm_rate needs at least 4 cycles; the units have {cyc.size}")
    rng = np.random.default_rng(seed)
    alarms, alarmed, counts = 0, [], []
    for i in range(pairs):
        pick = rng.permutation(cyc)
        a = units.subset(cycles=pick[: cyc.size // 2], label=f"half A{i}")
        b = units.subset(cycles=pick[cyc.size // 2 : 2 * (cyc.size // 2)], label=f"half B{i}")
        res = compare(a, b, seed=seed + 1 + i, **kwargs)
        sig = [v["metric"] for v in res.verdicts if v["significant"]]
        counts.append(len(res.verdicts))
        if sig:
            alarms += 1
            alarmed.append({"pair": i, "metrics": sig})
    return {
        "pairs": pairs,
        "false_alarms": alarms,
        "rate": alarms / pairs,
        "metrics_per_pair": max(counts),
        "alarmed": alarmed,
        "definition": "pairs of random halves of one bundle's whole demand cycles in which any metric "
        "was called significant (either direction)",
    }


def verdict_table(result: Comparison | Mapping[str, Any]) -> pd.DataFrame:
    """Return the verdicts as a table (one row per metric)."""
    d = result.to_dict() if isinstance(result, Comparison) else result
    return pd.DataFrame.from_records(d["verdicts"])
