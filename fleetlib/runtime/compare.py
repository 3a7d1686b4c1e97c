"""Measured versus modelled runtime goodput: equation 4 fed with inputs read off the timeline.

Equation 4 (:func:`fleetlib.runtime.model.runtime_loss_terms`) predicts the runtime loss from five
owners' models.  :func:`compare_to_model` estimates each of its inputs from a measured timeline,
evaluates the model, and sets the prediction beside the measured partition
(:mod:`fleetlib.runtime.goodput`).  The difference is the residual: held time lost to what the model
does not describe (hangs, slow warm-ups, evaluation, creeping startup) or described with the wrong
inputs.

Inputs and how they are estimated (all over the measured window):

=====================  ==========================================================================
input                  estimate
=====================  ==========================================================================
``startup_s``          measured startup (cold launches and their warm-up)
``data_stall``         input wait of retained steady-state steps over their total step time --
                       the steady-state ratio of the data pipeline equation, not the share of held
                       time (equation 4 uses it as a share to first order)
``checkpoint_write_s`` measured checkpoint pause time per checkpoint pause
``interval_s``         median spacing of consecutive commits with no interruption between them,
                       minus the mean pause: the compute time between checkpoints
``mtbf_s``             held time per failure (logged or inferred), with an exact Poisson
                       (chi-square) confidence interval
``recovery_s``         mean per failure of detection + relaunch/reload + warm-up excess (no rework)
``preemptions_per_s``  preemptions per held second
``preemption_tax_s``   mean per preemption of lost work + held restart time + warm-up excess
=====================  ==========================================================================

Measured terms are matched to the model's: ``checkpoint`` is the synchronous pauses *plus* the rework
after failures (the model's checkpoint term holds both, Young's ``C / tau + tau / 2M``); evaluation,
idle time, progress at risk and unattributed time have no term and show
as unmodelled.

The chi-square quantile is computed here without scipy: the regularised lower incomplete gamma
function (series below ``a + 1``, continued fraction above) inverted by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fleetlib.quality import DomainError, check_fraction, check_nonnegative, check_positive
from fleetlib.runtime.goodput import RuntimeMeasurement, runtime_goodput
from fleetlib.runtime.model import (
    RuntimeLossTerms,
    daly_interval_s,
    interval_with_preemptions_s,
    runtime_loss_terms,
    young_interval_s,
)
from fleetlib.runtime.schema import EQ4_TERMS, UNMODELLED_TERMS

__all__ = [
    "ModelComparison",
    "RuntimeModelInputs",
    "chi2_quantile",
    "compare_measurement",
    "compare_to_model",
    "estimate_model_inputs",
    "mtbf_interval_s",
    "poisson_rate_interval",
    "regularized_gamma_p",
]

# stands in for an unbounded MTBF (no failure observed): every failure-driven term evaluates to ~0
_NO_FAILURE_MTBF_S = 1e300


# ---------------------------------------------------------------------------------------------------
# Incomplete gamma, chi-square quantile, Poisson interval
# ---------------------------------------------------------------------------------------------------


def regularized_gamma_p(a: float, x: float) -> float:
    """Regularised lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``.

    For ``x < a + 1`` the power series ``e^-x x^a / Gamma(a + 1) * sum x^n / ((a+1)...(a+n))``
    converges quickly; otherwise ``Q = 1 - P`` is evaluated with a continued fraction (modified
    Lentz).  Accurate to about 1e-14.

    Parameters
    ----------
    a
        Shape, > 0.
    x
        Argument, >= 0.

    Returns
    -------
    float
        ``P(a, x)`` in [0, 1]; for integer ``a = k`` it equals the probability that a Poisson
        variable of mean ``x`` is at least ``k``.
    """
    a = check_positive("a", a)
    x = check_nonnegative("x", x)
    if x == 0.0:
        return 0.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:
        term = 1.0 / a
        total = term
        ap = a
        for _ in range(10_000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return min(1.0, math.exp(log_front) * total)
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return max(0.0, 1.0 - math.exp(log_front) * h)


def chi2_quantile(p: float, dof: float) -> float:
    """Quantile of the chi-square distribution: the ``x`` with ``P(dof / 2, x / 2) = p``.

    Parameters
    ----------
    p
        Probability, in [0, 1).
    dof
        Degrees of freedom, > 0.

    Returns
    -------
    float
        The quantile, found by bisection to a relative precision of about 1e-13.

    Examples
    --------
    >>> round(chi2_quantile(0.95, 1), 4)
    3.8415
    >>> round(chi2_quantile(0.025, 10), 4)
    3.247
    """
    p = check_fraction("p", p)
    if p >= 1.0:
        raise DomainError("p must be below 1: the chi-square distribution has no finite upper end")
    a = check_positive("dof", dof) / 2.0
    if p == 0.0:
        return 0.0
    lo, hi = 0.0, max(1.0, a)
    while regularized_gamma_p(a, hi) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if regularized_gamma_p(a, mid) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return lo + hi  # 2 x the gamma quantile (the midpoint times two)


def poisson_rate_interval(count: int, exposure_s: float, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Garwood) two-sided confidence interval of a Poisson rate, per second.

    With ``k`` events over exposure ``T`` and ``alpha = 1 - confidence``::

        lower = chi2(alpha / 2, 2k) / (2 T)          (0 when k = 0)
        upper = chi2(1 - alpha / 2, 2k + 2) / (2 T)

    Parameters
    ----------
    count
        Events observed, an integer >= 0.
    exposure_s
        Time over which they were counted, seconds, > 0.
    confidence
        Two-sided confidence level, in (0, 1).

    Returns
    -------
    tuple of float
        ``(lower, upper)`` rate per second.

    Examples
    --------
    >>> lo, hi = poisson_rate_interval(0, 1.0)
    >>> lo, round(hi, 4)
    (0.0, 3.6889)
    """
    if isinstance(count, bool) or int(count) != count or count < 0:
        raise DomainError(f"count must be an integer >= 0; got {count!r}")
    t = check_positive("exposure_s", exposure_s)
    c = check_fraction("confidence", confidence)
    if c in (0.0, 1.0):
        raise DomainError(f"confidence must lie strictly between 0 and 1; got {confidence!r}")
    alpha = 1.0 - c
    k = int(count)
    lower = 0.0 if k == 0 else chi2_quantile(alpha / 2.0, 2 * k) / (2.0 * t)
    upper = chi2_quantile(1.0 - alpha / 2.0, 2 * k + 2) / (2.0 * t)
    return lower, upper


def mtbf_interval_s(failures: int, exposure_s: float, confidence: float = 0.95
                    ) -> tuple[float | None, float, float | None]:
    """MTBF point estimate and exact confidence interval from a failure count.

    Parameters
    ----------
    failures
        Failures observed, an integer >= 0.
    exposure_s
        Exposure (held time) over which they were counted, seconds, > 0.
    confidence
        Two-sided confidence level, in (0, 1).

    Returns
    -------
    tuple
        ``(point, low, high)`` in seconds: ``point = exposure / failures`` (None with no failure);
        ``low = 1 / upper rate``; ``high = 1 / lower rate`` (None -- unbounded -- with no failure).

    Examples
    --------
    >>> point, low, high = mtbf_interval_s(5, 5 * 3600.0)
    >>> point / 3600, round(low / 3600, 3), round(high / 3600, 3)
    (1.0, 0.429, 3.08)
    """
    lo_rate, hi_rate = poisson_rate_interval(failures, exposure_s, confidence)
    point = exposure_s / failures if failures else None
    return point, 1.0 / hi_rate, (1.0 / lo_rate if lo_rate > 0 else None)


# ---------------------------------------------------------------------------------------------------
# Estimating the inputs
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeModelInputs:
    """Equation-4 inputs estimated from a measured timeline (see the module docstring).

    Attributes
    ----------
    held_s, startup_s, data_stall
        Held time, cold-launch startup, steady-state data stall ratio.
    checkpoint_write_s, checkpoint_pauses, interval_s
        Mean checkpoint pause, number of pauses, and the compute interval between checkpoints
        actually used (None with fewer than two commits).
    failures, mtbf_s, mtbf_low_s, mtbf_high_s, confidence
        Failure count, MTBF point estimate (None without failures) and its exact interval
        (``mtbf_high_s`` None: unbounded).
    recovery_s
        Mean recovery per failure without rework (None without failures).
    preemptions, preemptions_per_s, preemption_tax_s
        Preemption count, rate per held second, mean held time lost per preemption (None without
        preemptions).
    """

    held_s: float
    startup_s: float
    data_stall: float
    checkpoint_write_s: float | None
    checkpoint_pauses: int
    interval_s: float | None
    failures: int
    mtbf_s: float | None
    mtbf_low_s: float
    mtbf_high_s: float | None
    confidence: float
    recovery_s: float | None
    preemptions: int
    preemptions_per_s: float
    preemption_tax_s: float | None

    def to_dict(self) -> dict[str, Any]:
        """Return the inputs as a JSON-ready dictionary."""
        return dict(self.__dict__)


def estimate_model_inputs(measurement: RuntimeMeasurement, *, confidence: float = 0.95) -> RuntimeModelInputs:
    """Estimate equation 4's inputs from a runtime measurement.

    Parameters
    ----------
    measurement
        From :func:`fleetlib.runtime.goodput.runtime_goodput`.
    confidence
        Confidence level of the MTBF interval, in (0, 1).

    Returns
    -------
    RuntimeModelInputs

    Raises
    ------
    DomainError
        When the measurement holds no held time.
    """
    m = measurement
    if m.held_s <= 0:
        raise DomainError("the measured window holds no held time: there is nothing to estimate from")
    c = m.categories
    retained_time = m.productive_retrospective_s + c["input_wait"]  # compute time includes slow steps
    stall = c["input_wait"] / retained_time if retained_time > 0 else 0.0
    pauses = m.checkpoint_pauses
    write = c["checkpoint"] / pauses if pauses else None
    interval = None
    if m.commit_spacing_s is not None:
        interval = m.commit_spacing_s - (write or 0.0)
        interval = interval if interval > 0 else None
    inter = m.interruptions
    if len(inter):
        inter = inter[inter["in_window"]]
    fails = inter[inter["kind"] == "failure"] if len(inter) else inter
    pres = inter[inter["kind"] == "preempt"] if len(inter) else inter
    k = len(fails)
    point, low, high = mtbf_interval_s(k, m.held_s, confidence)
    recovery = float(fails["recovery_s"].mean()) if k else None
    n_pre = len(pres)
    tax = float((pres["lost_work_s"] + pres["restart_s"] + pres["warmup_s"]).mean()) if n_pre else None
    return RuntimeModelInputs(
        held_s=m.held_s, startup_s=c["startup"], data_stall=stall, checkpoint_write_s=write,
        checkpoint_pauses=pauses, interval_s=interval, failures=k, mtbf_s=point, mtbf_low_s=low,
        mtbf_high_s=high, confidence=confidence, recovery_s=recovery, preemptions=n_pre,
        preemptions_per_s=n_pre / m.held_s, preemption_tax_s=tax,
    )


# ---------------------------------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelComparison:
    """Equation 4 evaluated on a timeline's own inputs, beside the measured partition.

    Attributes
    ----------
    inputs
        The estimated inputs.
    model
        Equation 4's terms (None when the model cannot be evaluated; ``notes`` says why).
    measured
        Measured shares of held time matched to the equation-4 terms (:data:`EQ4_TERMS`), plus
        ``checkpoint_write`` and ``checkpoint_rework`` (the two parts of ``checkpoint``).
    unmodelled
        Measured shares with no equation-4 term (:data:`UNMODELLED_TERMS`).
    residual
        Measured minus modelled share per equation-4 term, and ``total``: measured runtime loss minus
        the model's (equal to the term residuals plus everything unmodelled).
    measured_runtime_goodput, model_runtime_goodput
        Productive share measured, and ``1 - total`` of the model (None without a model).
    intervals
        Checkpoint intervals in seconds: ``used`` (the cadence measured), ``young``, ``daly``, and
        ``young_with_preemptions`` (preemptions counted as interruptions, rule 40); None where one
        cannot be computed.
    notes
        Why a value is missing, and the model's first-order warnings.
    """

    inputs: RuntimeModelInputs
    model: RuntimeLossTerms | None
    measured: dict[str, float]
    unmodelled: dict[str, float]
    residual: dict[str, float]
    measured_runtime_goodput: float
    model_runtime_goodput: float | None
    intervals: dict[str, float | None]
    notes: tuple[str, ...] = field(default=())

    def frame(self) -> pd.DataFrame:
        """One row per term: measured share, modelled share and residual (NaN-free; None if no model)."""
        rows = []
        for term in EQ4_TERMS:
            modelled = None if self.model is None else float(getattr(self.model, term))
            rows.append({"term": term, "measured": self.measured[term], "modelled": modelled,
                         "residual": self.residual.get(term)})
        for term in UNMODELLED_TERMS:
            has_model = self.model is not None
            rows.append({"term": term, "measured": self.unmodelled[term],
                         "modelled": 0.0 if has_model else None,
                         "residual": self.unmodelled[term] if has_model else None})
        return pd.DataFrame(rows).set_index("term")

    def to_dict(self) -> dict[str, Any]:
        """Return the comparison as a JSON-ready dictionary."""
        return {
            "inputs": self.inputs.to_dict(),
            "model": None if self.model is None else self.model.to_dict(),
            "measured": dict(self.measured),
            "unmodelled": dict(self.unmodelled),
            "residual": dict(self.residual),
            "measured_runtime_goodput": self.measured_runtime_goodput,
            "model_runtime_goodput": self.model_runtime_goodput,
            "intervals": dict(self.intervals),
            "notes": list(self.notes),
        }


def _try(notes: list[str], label: str, fn: Any, *args: Any) -> float | None:
    try:
        return float(fn(*args))
    except DomainError as exc:
        notes.append(f"{label}: {exc}")
        return None


def compare_measurement(measurement: RuntimeMeasurement, *, confidence: float = 0.95) -> ModelComparison:
    """Evaluate equation 4 on a measurement's own inputs and set it beside the measured partition.

    Parameters
    ----------
    measurement
        From :func:`fleetlib.runtime.goodput.runtime_goodput` (either definition).
    confidence
        Confidence level of the MTBF interval.

    Returns
    -------
    ModelComparison
    """
    m = measurement
    inp = estimate_model_inputs(m, confidence=confidence)
    held = m.held_s
    c = m.categories
    measured = {
        "startup": c["startup"] / held,
        "input_wait": c["input_wait"] / held,
        "checkpoint": (c["checkpoint"] + c["rework"]) / held,
        "recovery": c["recovery"] / held,
        "preemption": c["preemption"] / held,
        "checkpoint_write": c["checkpoint"] / held,
        "checkpoint_rework": c["rework"] / held,
    }
    unmodelled = {k: c[k] / held for k in UNMODELLED_TERMS}
    notes: list[str] = []
    mtbf = inp.mtbf_s
    if mtbf is None:
        notes.append("no failure in the window: the MTBF point estimate is unbounded, so the failure-driven "
                     f"terms are evaluated at rate zero (MTBF >= {inp.mtbf_low_s / 3600.0:.4g} h at "
                     f"{confidence:.0%} confidence)")
    write = inp.checkpoint_write_s
    interval = inp.interval_s
    if interval is None:
        notes.append("fewer than two checkpoint commits without an interruption between them: the checkpoint "
                     "interval in use is unknown")
    model = None
    model_inputs_ok = interval is not None or (write is not None and write > 0 and mtbf is not None)
    if model_inputs_ok:
        try:
            model = runtime_loss_terms(
                held_s=held, startup_s=inp.startup_s, data_stall=inp.data_stall,
                checkpoint_write_s=write or 0.0, mtbf_s=mtbf if mtbf is not None else _NO_FAILURE_MTBF_S,
                recovery_s=inp.recovery_s or 0.0, preemptions_per_s=inp.preemptions_per_s,
                preemption_tax_s=inp.preemption_tax_s or 0.0, interval_s=interval)
            notes.extend(model.warnings)
            if interval is None:
                notes.append("the checkpoint term is evaluated at Young's interval")
        except DomainError as exc:
            notes.append(f"equation 4 cannot be evaluated on these inputs: {exc}")
    else:
        notes.append("equation 4 is not evaluated: no checkpoint interval could be measured or derived")
    residual: dict[str, float] = {}
    measured_loss = 1.0 - m.productive_s / held
    if model is not None:
        for term in EQ4_TERMS:
            residual[term] = measured[term] - float(getattr(model, term))
        residual["total"] = measured_loss - model.total
    intervals: dict[str, float | None] = {"used": interval, "young": None, "daly": None,
                                          "young_with_preemptions": None}
    if write is not None and write > 0:
        if mtbf is not None:
            intervals["young"] = _try(notes, "Young", young_interval_s, write, mtbf)
            intervals["daly"] = _try(notes, "Daly", daly_interval_s, write, inp.recovery_s or 0.0, mtbf)
        if mtbf is not None or inp.preemptions_per_s > 0:
            intervals["young_with_preemptions"] = _try(
                notes, "Young with preemptions", interval_with_preemptions_s, write,
                mtbf if mtbf is not None else _NO_FAILURE_MTBF_S, inp.preemptions_per_s)
    else:
        notes.append("no synchronous checkpoint pause measured: the optimal intervals need a write cost > 0")
    return ModelComparison(
        inputs=inp, model=model, measured=measured, unmodelled=unmodelled, residual=residual,
        measured_runtime_goodput=m.productive_s / held,
        model_runtime_goodput=None if model is None else model.runtime_goodput,
        intervals=intervals, notes=tuple(notes))


def compare_to_model(steps: pd.DataFrame, events: pd.DataFrame, *, job_id: str | None = None,
                     window: Any = None, definition: str = "committed",
                     fault_free_step_s: float | None = None, confidence: float = 0.95) -> ModelComparison:
    """Measure a timeline and compare it with equation 4 evaluated on its own inputs.

    Parameters
    ----------
    steps, events
        Canonical timeline tables.
    job_id, window, definition, fault_free_step_s
        As in :func:`fleetlib.runtime.goodput.runtime_goodput`.
    confidence
        Confidence level of the MTBF interval.

    Returns
    -------
    ModelComparison
    """
    measurement = runtime_goodput(steps, events, job_id=job_id, window=window,
                                  definition=definition,  # type: ignore[arg-type]
                                  fault_free_step_s=fault_free_step_s)
    return compare_measurement(measurement, confidence=confidence)
