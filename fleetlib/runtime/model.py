"""Analytical runtime-goodput model: equation 4, checkpoint intervals, ETTR and the size sweep.

Runtime goodput ``R`` is the share of held time (gang complete -> release) that ends up as retained
steps.  Equation 4 of the chapter estimates the runtime loss ``1 - R`` to first order as a sum of five
shares of held time, each taken from the model of the subsystem that owns it::

    1 - R  ~=  T_startup / T_held             cold launch to first step
             + f_stall                          steady-state input waits
             + C / tau + tau / (2 M)            synchronous checkpoint writes + expected rework
             + T_recovery / M                   detection, relaunch, reload, warm-up per failure
             + lambda_pre * T_pre               forced preemptions x (lost work + reload/warm-up)

The sum is honest only if no lost second sits in two terms.  This module builds the junction rules
of section 9.5.2 into its arguments rather than leaving them to the caller's memory:

* **Rework is counted once.**  Work a hardware failure erases is in the checkpoint term
  (``tau / 2M``); the recovery argument is the restart budget *without* rework.  Work a preemption
  erases is in the preemption tax, not in ``M``.
* **Warm-up goes to the event that caused it.**  Recovery and preemption budgets each contain their
  own reload and warm-up (:func:`preemption_tax_s` composes one), so the startup argument counts
  cold launches only.
* **Input stall is a steady-state ratio.**  Loader refill after a restart is warm-up, already in the
  recovery or preemption budget.
* **Only synchronous checkpoint pauses enter ``C``.**  Contention from asynchronous writes slows
  retained steps and is a program-goodput loss.

When any single share passes 10 % of held time the first-order sum stops being trustworthy (rule 47):
:class:`RuntimeLossTerms` then carries a warning that names the term, and the right move is to measure
the shares on the job timeline (:mod:`fleetlib.runtime.goodput`).

The module also holds the checkpoint-interval models (Young 1974; Daly 2006), preemptions treated as
extra interruptions (rule 40), Meta's expected effective-training-time ratio (Kokolis et al. 2025),
the figure 5 sweep over job size, the serving-replica cold-start ratio, and the measurement-window
guard of rule 42.  All durations are seconds and all rates are per second unless a name says
otherwise; every share is a fraction of held time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from fleetlib.quality import DomainError, check_fraction, check_nonnegative, check_positive
from fleetlib.runtime.ettr import (
    ettr_optimal_interval_s,
    expected_ettr,
    mttf_from_node_failure_rate_s,
)
from fleetlib.runtime.schema import EQ4_TERMS

__all__ = [
    "FIRST_ORDER_TERM_LIMIT",
    "SIZE_SWEEP_COLUMNS",
    "RuntimeLossTerms",
    "check_runtime_window",
    "checkpoint_write_time_s",
    "crossover_devices",
    "daly_expected_wall_s",
    "daly_interval_s",
    "effective_interruption_mtbf_s",
    "ettr_optimal_interval_s",
    "expected_ettr",
    "held_share_from_capacity_share",
    "interval_with_preemptions_s",
    "mttf_from_node_failure_rate_s",
    "preemption_tax_s",
    "runtime_loss_by_size",
    "runtime_loss_terms",
    "serving_runtime_goodput",
    "young_interval_s",
    "young_waste",
]

#: A single equation-4 share above this fraction of held time triggers a warning (rule 47).
FIRST_ORDER_TERM_LIMIT = 0.10

#: Columns of :func:`runtime_loss_by_size`, in order.
SIZE_SWEEP_COLUMNS = ("devices", "mtbf_h", "interval_min", "startup", "input_wait", "checkpoint",
                      "recovery", "preemption", "total")

_TERM_NAMES = EQ4_TERMS
_EXP_LIMIT = 700.0  # exp() of more than this overflows a float64


# ---------------------------------------------------------------------------------------------------
# Small validators
# ---------------------------------------------------------------------------------------------------


def _stall(value: float) -> float:
    f = check_fraction("data_stall", value)
    if f >= 1.0:
        raise DomainError(f"data_stall must lie in [0, 1): a job that waits on input all the time "
                          f"retains nothing; got {value!r}")
    return f


def _positive_array(name: str, values: npt.ArrayLike) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} must be numbers; got {values!r}") from exc
    if arr.ndim > 1:
        raise DomainError(f"{name} must be a scalar or a one-dimensional array; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise DomainError(f"{name} must be finite; got {values!r}")
    if np.any(arr <= 0.0):
        bad = arr[arr <= 0.0][0]
        raise DomainError(f"{name} must be > 0; got {bad!r}")
    return arr


def _hours(seconds: float) -> str:
    return f"{seconds / 3600.0:.4g} h"


# ---------------------------------------------------------------------------------------------------
# Input derivations
# ---------------------------------------------------------------------------------------------------


def held_share_from_capacity_share(capacity_share: float, scheduling_goodput: float) -> float:
    """Re-express a loss stated as a share of in-service capacity as a share of held time.

    A runtime loss that a pool snapshot reports against in-service capacity (for example input waits
    taking 5 % of the pool) is a larger share of the time the jobs actually held, because held time is
    only the fraction ``S`` of capacity.  Dividing by ``S`` moves the share onto equation 4's
    denominator.

    Parameters
    ----------
    capacity_share
        The loss as a fraction of in-service capacity-time; at most ``scheduling_goodput``.
    scheduling_goodput
        Scheduling goodput ``S`` of the pool, in (0, 1].

    Returns
    -------
    float
        The same loss as a fraction of held time, ``capacity_share / S``.

    Examples
    --------
    >>> round(held_share_from_capacity_share(0.05, 0.65), 4)
    0.0769
    """
    share = check_fraction("capacity_share", capacity_share)
    s = check_fraction("scheduling_goodput", scheduling_goodput, allow_zero=False)
    if share > s:
        raise DomainError(f"a loss inside held time cannot exceed the held share of capacity: "
                          f"capacity_share {share!r} > scheduling_goodput {s!r}")
    return share / s


def checkpoint_write_time_s(checkpoint_bytes: float, write_bandwidth_bytes_per_s: float) -> float:
    """Return the synchronous pause to write a checkpoint, ``size / bandwidth``.

    Parameters
    ----------
    checkpoint_bytes
        Bytes in the resumable checkpoint (weights, optimizer state, ...), >= 0.
    write_bandwidth_bytes_per_s
        Storage bandwidth available to this job while it writes, > 0.

    Returns
    -------
    float
        Write time in seconds.

    Examples
    --------
    >>> checkpoint_write_time_s(70e9 * 14, 100e9)
    9.8
    """
    size = check_nonnegative("checkpoint_bytes", checkpoint_bytes)
    bw = check_positive("write_bandwidth_bytes_per_s", write_bandwidth_bytes_per_s)
    return size / bw


def preemption_tax_s(lost_work_s: float, startup_s: float) -> float:
    """Return the held time one forced preemption costs: lost work plus one reload and warm-up.

    The tax carries the work discarded since the last committed checkpoint *and* the restart that
    follows readmission.  Because the restart is charged here, it must not also enter the startup term
    of :func:`runtime_loss_terms` (which counts cold launches only), and the queue wait between
    eviction and readmission is not held time at all.

    Parameters
    ----------
    lost_work_s
        Post-checkpoint work discarded by one eviction, seconds, >= 0.
    startup_s
        Reload, relaunch and warm-up after readmission, seconds, >= 0.

    Returns
    -------
    float
        Per-eviction overhead in seconds.

    Examples
    --------
    >>> preemption_tax_s(15 * 60, 5.2 * 60) / 60
    20.2
    """
    return check_nonnegative("lost_work_s", lost_work_s) + check_nonnegative("startup_s", startup_s)


# ---------------------------------------------------------------------------------------------------
# Checkpoint intervals: Young and Daly
# ---------------------------------------------------------------------------------------------------


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Return Young's first-order optimum checkpoint interval, ``sqrt(2 C M)``.

    Parameters
    ----------
    checkpoint_s
        Synchronous checkpoint write time ``C``, seconds, > 0 (a free checkpoint has no optimum).
    mtbf_s
        Mean time between interruptions ``M``, seconds, > 0.

    Returns
    -------
    float
        The interval ``tau`` in seconds that minimises :func:`young_waste`.

    Raises
    ------
    DomainError
        If ``C > M / 2``: the optimum would be longer than the MTBF, where the first-order model no
        longer holds (use :func:`daly_interval_s`).

    Examples
    --------
    >>> round(young_interval_s(9.8, 302 * 3600) / 60, 2)
    76.94
    """
    c = check_positive("checkpoint_s", checkpoint_s)
    m = check_positive("mtbf_s", mtbf_s)
    if c > m / 2.0:
        raise DomainError(
            f"checkpoint_s {c!r} exceeds half the MTBF ({m / 2.0!r} s): Young's optimum would be longer "
            "than the MTBF, outside the first-order model; use daly_interval_s"
        )
    return math.sqrt(2.0 * c * m)


def young_waste(checkpoint_s: float, interval_s: float, mtbf_s: float) -> float:
    """Return Young's first-order checkpoint waste at a given interval, ``C / tau + tau / (2 M)``.

    The first part is the synchronous write pause per interval; the second is the expected rework,
    half an interval lost per interruption.  The result is the waste as a fraction of held time and
    already contains every step a failure erases.

    Parameters
    ----------
    checkpoint_s
        Synchronous checkpoint write time ``C``, seconds, >= 0.
    interval_s
        Checkpoint interval ``tau``, seconds, in (0, ``mtbf_s``].
    mtbf_s
        Mean time between interruptions ``M``, seconds, > 0.

    Returns
    -------
    float
        The checkpoint waste fraction.

    Raises
    ------
    DomainError
        On a negative write time, a non-positive MTBF or interval, or an interval longer than the
        MTBF (a first-order model assumes at most one interruption per interval).

    Examples
    --------
    >>> round(young_waste(9.8, 77 * 60, 302 * 3600), 5)
    0.00425
    """
    c = check_nonnegative("checkpoint_s", checkpoint_s)
    tau = check_positive("interval_s", interval_s)
    m = check_positive("mtbf_s", mtbf_s)
    if tau > m:
        raise DomainError(
            f"checkpoint interval {_hours(tau)} is longer than the MTBF {_hours(m)}: Young's first-order "
            "waste assumes at most one interruption per interval and has no meaning there"
        )
    return c / tau + tau / (2.0 * m)


def daly_interval_s(checkpoint_s: float, restart_s: float, mtbf_s: float) -> float:
    """Return Daly's higher-order optimum checkpoint interval (Daly 2006).

    With ``x = C / (2 M)``::

        tau = sqrt(2 C M) * (1 + sqrt(x) / 3 + x / 9) - C     if C < 2 M
        tau = M                                               otherwise

    The restart time does not enter Daly's optimum; it scales the expected wall time by
    ``exp(R / M)`` (see :func:`daly_expected_wall_s`), which leaves the minimiser unchanged.  It is
    validated here so that the two functions take the same inputs.

    Parameters
    ----------
    checkpoint_s
        Checkpoint write time ``C`` (Daly's delta), seconds, > 0.
    restart_s
        Restart time ``R``, seconds, >= 0.
    mtbf_s
        Mean time between interruptions ``M``, seconds, > 0.

    Returns
    -------
    float
        The interval in seconds.

    Examples
    --------
    >>> round(daly_interval_s(300, 600, 24 * 3600) / 60, 1)
    116.7
    """
    c = check_positive("checkpoint_s", checkpoint_s)
    check_nonnegative("restart_s", restart_s)
    m = check_positive("mtbf_s", mtbf_s)
    if c >= 2.0 * m:
        return m
    x = c / (2.0 * m)
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - c


def daly_expected_wall_s(work_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float,
                         interval_s: float | npt.ArrayLike) -> float | np.ndarray:
    """Return the expected wall time to finish a job under exponential failures (Daly 2006).

    ``T_wall = M exp(R / M) (exp((tau + C) / M) - 1) T_work / tau``: the work is cut into segments
    of ``tau`` compute plus one checkpoint ``C``; each failure costs a restart ``R`` and the partial
    segment; failures arrive as a Poisson process of mean interval ``M``.

    Parameters
    ----------
    work_s
        Fault-free compute time of the job ``T_work``, seconds, >= 0.
    checkpoint_s
        Checkpoint write time ``C``, seconds, >= 0.
    restart_s
        Restart time ``R``, seconds, >= 0.
    mtbf_s
        Mean time between failures ``M``, seconds, > 0.
    interval_s
        Compute time between checkpoints ``tau``, seconds, > 0; a scalar or a one-dimensional array
        (evaluated element-wise, for interval scans).

    Returns
    -------
    float or numpy.ndarray
        Expected wall time in seconds, shaped like ``interval_s``.

    Raises
    ------
    DomainError
        On a negative duration, a non-positive MTBF or interval, or an interval so much longer than
        the MTBF that the expected time overflows.
    """
    work = check_nonnegative("work_s", work_s)
    c = check_nonnegative("checkpoint_s", checkpoint_s)
    r = check_nonnegative("restart_s", restart_s)
    m = check_positive("mtbf_s", mtbf_s)
    tau = _positive_array("interval_s", interval_s)
    exponent = (tau + c) / m
    if r / m + float(np.max(exponent, initial=0.0)) > _EXP_LIMIT:
        raise DomainError("interval_s + checkpoint_s (or restart_s) is hundreds of MTBFs: the job "
                          "almost surely never finishes and its expected wall time overflows")
    wall = m * math.exp(r / m) * np.expm1(exponent) * work / tau
    return float(wall) if wall.ndim == 0 else wall


# ---------------------------------------------------------------------------------------------------
# Preemptions as interruptions (rule 40)
# ---------------------------------------------------------------------------------------------------


def effective_interruption_mtbf_s(mtbf_s: float, preemptions_per_s: float) -> float:
    """Mean time between interruptions of any kind: ``1 / M_eff = 1 / M + lambda_pre``.

    A forced preemption discards the work since the last commit just as a hardware failure does, so
    for choosing the checkpoint cadence the two independent arrival processes add.

    Parameters
    ----------
    mtbf_s
        Mean time between hardware failures, seconds, > 0.
    preemptions_per_s
        Forced-preemption rate, per second, >= 0.

    Returns
    -------
    float
        Effective mean time between interruptions, seconds.

    Examples
    --------
    >>> round(effective_interruption_mtbf_s(302 * 3600, 1 / 86400) / 3600, 2)
    22.23
    """
    m = check_positive("mtbf_s", mtbf_s)
    lam = check_nonnegative("preemptions_per_s", preemptions_per_s)
    return 1.0 / (1.0 / m + lam)


def interval_with_preemptions_s(checkpoint_s: float, mtbf_s: float, preemptions_per_s: float) -> float:
    """Young's interval with budgeted preemptions counted as interruptions (rule 40).

    Parameters
    ----------
    checkpoint_s
        Synchronous checkpoint write time, seconds, > 0.
    mtbf_s
        Mean time between hardware failures, seconds, > 0.
    preemptions_per_s
        Forced-preemption rate, per second, >= 0.

    Returns
    -------
    float
        ``sqrt(2 C M_eff)`` in seconds, with ``M_eff`` from :func:`effective_interruption_mtbf_s`.

    Examples
    --------
    >>> round(interval_with_preemptions_s(9.8, 302 * 3600, 1 / 86400) / 60, 1)
    20.9
    """
    return young_interval_s(checkpoint_s, effective_interruption_mtbf_s(mtbf_s, preemptions_per_s))


# ---------------------------------------------------------------------------------------------------
# Equation 4
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeLossTerms:
    """The five terms of equation 4 as shares of held time, and what they add up to.

    Attributes
    ----------
    startup
        Cold-launch startup share, ``T_startup / T_held``.
    input_wait
        Steady-state data stall ratio.
    checkpoint_write
        Synchronous write pauses, ``C / tau``.
    checkpoint_rework
        Expected rework after hardware failures, ``tau / (2 M)``.
    checkpoint
        ``checkpoint_write + checkpoint_rework`` (Young's waste at ``tau``).
    recovery
        Per-failure restart budget over MTBF, ``T_recovery / M`` (no rework).
    preemption
        Preemption rate x tax (lost work + reload/warm-up).
    total
        Sum of the five terms: first-order runtime loss ``1 - R``.
    runtime_goodput
        ``1 - total``.
    interval_s
        Checkpoint interval the checkpoint term was evaluated at, seconds.
    warnings
        One message per term above :data:`FIRST_ORDER_TERM_LIMIT` of held time.
    """

    startup: float
    input_wait: float
    checkpoint_write: float
    checkpoint_rework: float
    checkpoint: float
    recovery: float
    preemption: float
    total: float
    runtime_goodput: float
    interval_s: float
    warnings: tuple[str, ...] = ()

    def terms(self) -> dict[str, float]:
        """Return the five equation-4 terms in the order a job meets them."""
        return {name: getattr(self, name) for name in _TERM_NAMES}

    def to_dict(self) -> dict[str, Any]:
        """Return every field as a JSON-ready dictionary (warnings as a list)."""
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        return out


def _term_warnings(terms: dict[str, float]) -> tuple[str, ...]:
    return tuple(
        f"{name} is {share:.1%} of held time, above {FIRST_ORDER_TERM_LIMIT:.0%}: the first-order sum "
        "of equation 4 is no longer reliable; measure the shares from the job timeline"
        for name, share in terms.items() if share > FIRST_ORDER_TERM_LIMIT
    )


def _loss_arrays(*, held_s: float, startup_s: float, data_stall: float, checkpoint_write_s: float,
                 mtbf_s: np.ndarray, recovery_s: float, preemptions_per_s: float,
                 preemption_tax_s: float, interval_s: np.ndarray) -> dict[str, np.ndarray]:
    """Vectorised equation 4 over arrays of MTBF and interval (inputs already validated)."""
    if np.any(interval_s > mtbf_s):
        i = int(np.argmax(interval_s > mtbf_s))
        raise DomainError(
            f"checkpoint interval {_hours(float(interval_s[i]))} is longer than the MTBF "
            f"{_hours(float(mtbf_s[i]))}: the first-order checkpoint waste has no meaning there"
        )
    n = mtbf_s.shape
    write = checkpoint_write_s / interval_s
    rework = interval_s / (2.0 * mtbf_s)
    out = {
        "startup": np.full(n, startup_s / held_s),
        "input_wait": np.full(n, data_stall),
        "checkpoint_write": write,
        "checkpoint_rework": rework,
        "checkpoint": write + rework,
        "recovery": recovery_s / mtbf_s,
        "preemption": np.full(n, preemptions_per_s * preemption_tax_s),
    }
    out["total"] = (out["startup"] + out["input_wait"] + out["checkpoint"] + out["recovery"]
                    + out["preemption"])
    if np.any(out["total"] >= 1.0):
        i = int(np.argmax(out["total"] >= 1.0))
        raise DomainError(
            f"the five runtime loss terms add to {float(out['total'][i]):.3g} of held time (>= 1): "
            "the first-order sum is meaningless here; measure runtime goodput from the job timeline"
        )
    return out


def runtime_loss_terms(*, held_s: float, startup_s: float, data_stall: float, checkpoint_write_s: float,
                       mtbf_s: float, recovery_s: float, preemptions_per_s: float,
                       preemption_tax_s: float, interval_s: float | None = None) -> RuntimeLossTerms:
    """Equation 4: the five runtime loss shares of one job and the runtime goodput they leave.

    Each argument is the input of one owner's model, and each has a junction rule that keeps the
    five shares from overlapping (section 9.5.2):

    * ``startup_s`` covers **cold launches only**; restarts after a failure or eviction are inside
      ``recovery_s`` and ``preemption_tax_s``.
    * ``data_stall`` is the **steady-state** stall ratio; loader refill after a restart is warm-up,
      already in the restart budgets.
    * ``checkpoint_write_s`` is the **synchronous** pause only; the checkpoint term ``C / tau +
      tau / (2 M)`` also holds the expected rework after hardware failures.
    * ``recovery_s`` therefore **excludes rework**: detection, relaunch, reload and warm-up.
    * ``preemption_tax_s`` is lost work **plus** reload/warm-up (:func:`preemption_tax_s`), and
      preemptions are *not* folded into ``mtbf_s``.

    Parameters
    ----------
    held_s
        Held time of the allocation, gang complete -> release, seconds, > 0.
    startup_s
        Total cold-launch time (gang complete -> first step) inside ``held_s``, seconds, >= 0.
    data_stall
        Steady-state data stall ratio, in [0, 1).
    checkpoint_write_s
        Synchronous checkpoint pause per commit, seconds, >= 0 (> 0 when ``interval_s`` is None).
    mtbf_s
        System mean time between hardware failures at this job's size, seconds, > 0.
    recovery_s
        Per-failure recovery budget without rework, seconds, >= 0.
    preemptions_per_s
        Forced-preemption rate, per second, >= 0.
    preemption_tax_s
        Held time lost per eviction (lost work + reload/warm-up), seconds, >= 0.
    interval_s
        Checkpoint interval in use, seconds, in (0, ``mtbf_s``]; None for Young's optimum on the
        hardware MTBF (:func:`young_interval_s`), as equation 4 evaluates it.  To checkpoint at the
        preemption-aware cadence, pass :func:`interval_with_preemptions_s`.

    Returns
    -------
    RuntimeLossTerms
        The five shares, the split of the checkpoint share, their total, ``1 - total``, the interval
        used, and a warning for every share above 10 % of held time (rule 47).

    Raises
    ------
    DomainError
        On a negative duration or rate, a zero MTBF or held time, a startup longer than the held
        time, ``data_stall`` outside [0, 1), an interval longer than the MTBF, or terms that add to
        the whole held time or more.

    Examples
    --------
    >>> t = runtime_loss_terms(held_s=7 * 86400, startup_s=5.2 * 60, data_stall=0.05 / 0.65,
    ...                        checkpoint_write_s=9.8, mtbf_s=302 * 3600, recovery_s=6.2 * 60,
    ...                        preemptions_per_s=1 / 86400, preemption_tax_s=20.2 * 60)
    >>> round(t.runtime_goodput, 3), t.warnings
    (0.904, ())
    """
    held = check_positive("held_s", held_s)
    startup = check_nonnegative("startup_s", startup_s)
    if startup > held:
        raise DomainError(f"startup_s {startup!r} is longer than held_s {held!r}")
    stall = _stall(data_stall)
    c = check_nonnegative("checkpoint_write_s", checkpoint_write_s)
    m = check_positive("mtbf_s", mtbf_s)
    rec = check_nonnegative("recovery_s", recovery_s)
    lam = check_nonnegative("preemptions_per_s", preemptions_per_s)
    tax = check_nonnegative("preemption_tax_s", preemption_tax_s)
    tau = young_interval_s(c, m) if interval_s is None else check_positive("interval_s", interval_s)
    arrays = _loss_arrays(held_s=held, startup_s=startup, data_stall=stall, checkpoint_write_s=c,
                          mtbf_s=np.array([m]), recovery_s=rec, preemptions_per_s=lam,
                          preemption_tax_s=tax, interval_s=np.array([tau]))
    vals = {k: float(v[0]) for k, v in arrays.items()}
    return RuntimeLossTerms(
        startup=vals["startup"], input_wait=vals["input_wait"],
        checkpoint_write=vals["checkpoint_write"], checkpoint_rework=vals["checkpoint_rework"],
        checkpoint=vals["checkpoint"], recovery=vals["recovery"], preemption=vals["preemption"],
        total=vals["total"], runtime_goodput=1.0 - vals["total"], interval_s=tau,
        warnings=_term_warnings({k: vals[k] for k in _TERM_NAMES}),
    )


# ---------------------------------------------------------------------------------------------------
# Figure 5: loss versus job size
# ---------------------------------------------------------------------------------------------------


def _sweep_scalars(*, base_devices: float, mtbf_h_at_base: float, checkpoint_write_s: float,
                   recovery_s: float, startup_s: float, held_s: float, data_stall: float,
                   preemptions_per_s: float, preemption_tax_s: float) -> dict[str, float]:
    held = check_positive("held_s", held_s)
    startup = check_nonnegative("startup_s", startup_s)
    if startup > held:
        raise DomainError(f"startup_s {startup!r} is longer than held_s {held!r}")
    return {
        "base_devices": check_positive("base_devices", base_devices),
        "mtbf_base_s": check_positive("mtbf_h_at_base", mtbf_h_at_base) * 3600.0,
        "checkpoint_write_s": check_positive("checkpoint_write_s", checkpoint_write_s),
        "recovery_s": check_nonnegative("recovery_s", recovery_s),
        "startup_s": startup,
        "held_s": held,
        "data_stall": _stall(data_stall),
        "preemptions_per_s": check_nonnegative("preemptions_per_s", preemptions_per_s),
        "preemption_tax_s": check_nonnegative("preemption_tax_s", preemption_tax_s),
    }


def runtime_loss_by_size(devices: Iterable[float] | npt.ArrayLike, *, base_devices: float,
                         mtbf_h_at_base: float, checkpoint_write_s: float, recovery_s: float,
                         startup_s: float, held_s: float, data_stall: float, preemptions_per_s: float,
                         preemption_tax_s: float) -> pd.DataFrame:
    """Recompute the five terms of equation 4 at each job size (figure 5).

    Failure-rate model: every device fails independently at the same rate, so the job's failure rate
    is proportional to its device count and ``MTBF(N) = MTBF_base * base_devices / N``.  At each size
    the checkpoint interval is Young's optimum on that MTBF, ``tau(N) = sqrt(2 C MTBF(N))``, which makes
    the checkpoint share ``sqrt(2 C / MTBF(N))``, growing as ``sqrt(N)``; recovery grows as ``N``.
    Startup, input waits and preemption do not depend on size and stay flat.  The checkpoint write
    time, recovery budget, held time and preemption budget are held fixed (the chapter holds "the 70B
    checkpoint" at every size).

    Parameters
    ----------
    devices
        Job sizes, one-dimensional, each > 0 (non-integers are allowed: the model is continuous).
    base_devices
        Size at which ``mtbf_h_at_base`` was measured, > 0.
    mtbf_h_at_base
        System MTBF at ``base_devices``, hours, > 0.
    checkpoint_write_s
        Synchronous checkpoint pause, seconds, > 0.
    recovery_s
        Per-failure recovery budget without rework, seconds, >= 0.
    startup_s
        Cold-launch startup inside the held time, seconds, >= 0.
    held_s
        Held time of the allocation, seconds, > 0.
    data_stall
        Steady-state data stall ratio, in [0, 1).
    preemptions_per_s
        Forced-preemption rate, per second, >= 0.
    preemption_tax_s
        Held time lost per eviction, seconds, >= 0.

    Returns
    -------
    pandas.DataFrame
        One row per entry of ``devices`` (input order) with columns :data:`SIZE_SWEEP_COLUMNS`:
        ``devices``, ``mtbf_h``, ``interval_min`` (Young's optimum) and the shares ``startup``,
        ``input_wait``, ``checkpoint``, ``recovery``, ``preemption``, ``total`` of held time.

    Raises
    ------
    DomainError
        On invalid inputs, on a size so large that Young's interval would exceed the MTBF, or where
        the terms add to the whole held time.
    """
    p = _sweep_scalars(base_devices=base_devices, mtbf_h_at_base=mtbf_h_at_base,
                       checkpoint_write_s=checkpoint_write_s, recovery_s=recovery_s,
                       startup_s=startup_s, held_s=held_s, data_stall=data_stall,
                       preemptions_per_s=preemptions_per_s, preemption_tax_s=preemption_tax_s)
    values = devices if hasattr(devices, "__len__") else list(devices)  # accept a generator too
    n = np.atleast_1d(_positive_array("devices", values))
    mtbf_s = p["mtbf_base_s"] * p["base_devices"] / n
    tau = np.sqrt(2.0 * p["checkpoint_write_s"] * mtbf_s)
    if np.any(tau > mtbf_s):
        big = float(n[np.argmax(tau > mtbf_s)])
        raise DomainError(
            f"at {big:g} devices the MTBF ({_hours(float(mtbf_s[np.argmax(tau > mtbf_s)]))}) is under twice "
            "the checkpoint write time: Young's interval would exceed the MTBF, outside the first-order model"
        )
    arrays = _loss_arrays(held_s=p["held_s"], startup_s=p["startup_s"], data_stall=p["data_stall"],
                          checkpoint_write_s=p["checkpoint_write_s"], mtbf_s=mtbf_s,
                          recovery_s=p["recovery_s"], preemptions_per_s=p["preemptions_per_s"],
                          preemption_tax_s=p["preemption_tax_s"], interval_s=tau)
    frame = pd.DataFrame({"devices": n, "mtbf_h": mtbf_s / 3600.0, "interval_min": tau / 60.0})
    for name in (*_TERM_NAMES, "total"):
        frame[name] = arrays[name]
    return frame.loc[:, list(SIZE_SWEEP_COLUMNS)]


def crossover_devices(*, base_devices: float, mtbf_h_at_base: float, checkpoint_write_s: float,
                      recovery_s: float, data_stall: float, startup_s: float = 0.0,
                      held_s: float = 1.0, preemptions_per_s: float = 0.0,
                      preemption_tax_s: float = 0.0) -> float:
    """Job size at which checkpoint waste plus recovery equals the input-wait share (figure 5).

    Under the failure-rate model of :func:`runtime_loss_by_size`, with Young's interval at each size
    the failure-driven shares are ``sqrt(2 C) x + T_rec x**2`` where ``x = 1 / sqrt(MTBF(N))``.
    Setting them equal to ``f_stall`` gives a quadratic in ``x`` with one positive root, solved here
    in the cancellation-free form ``x = 2 f / (sqrt(2 C) + sqrt(2 C + 4 T_rec f))``; then
    ``MTBF* = 1 / x**2`` and ``N* = base_devices * MTBF_base / MTBF*``.

    Parameters
    ----------
    base_devices, mtbf_h_at_base, checkpoint_write_s, recovery_s, data_stall
        As in :func:`runtime_loss_by_size`; ``data_stall`` must be > 0 for a crossover to exist.
    startup_s, held_s, preemptions_per_s, preemption_tax_s
        Accepted so that the sweep's keyword set can be passed unchanged; validated, but they do not
        move the crossover (those terms are flat in device count).

    Returns
    -------
    float
        The crossover device count (continuous).

    Raises
    ------
    DomainError
        On invalid inputs, a zero data stall (no crossover above zero devices), or a crossover where
        Young's interval would exceed the MTBF.

    Examples
    --------
    >>> round(crossover_devices(base_devices=128, mtbf_h_at_base=302, checkpoint_write_s=9.8,
    ...                         recovery_s=6.2 * 60, data_stall=0.05 / 0.65))
    12857
    """
    p = _sweep_scalars(base_devices=base_devices, mtbf_h_at_base=mtbf_h_at_base,
                       checkpoint_write_s=checkpoint_write_s, recovery_s=recovery_s,
                       startup_s=startup_s, held_s=held_s, data_stall=data_stall,
                       preemptions_per_s=preemptions_per_s, preemption_tax_s=preemption_tax_s)
    f = p["data_stall"]
    if f == 0.0:
        raise DomainError("data_stall is 0: checkpoint waste plus recovery exceed it at any size, so "
                          "there is no crossover above zero devices")
    two_c = 2.0 * p["checkpoint_write_s"]
    x = 2.0 * f / (math.sqrt(two_c) + math.sqrt(two_c + 4.0 * p["recovery_s"] * f))
    mtbf_star = 1.0 / (x * x)
    if p["checkpoint_write_s"] > mtbf_star / 2.0:
        raise DomainError(
            f"the crossover falls where the MTBF ({_hours(mtbf_star)}) is under twice the checkpoint "
            "write time, outside Young's first-order model"
        )
    return p["base_devices"] * p["mtbf_base_s"] / mtbf_star


# ---------------------------------------------------------------------------------------------------
# Serving replica and measurement window
# ---------------------------------------------------------------------------------------------------


def serving_runtime_goodput(cold_start_s: float, lifetime_s: float, *,
                            lifetime_includes_cold_start: bool = True) -> float:
    """Runtime goodput of a serving replica: ready time over held time.

    Weight fetch, model load and warm-up after placement are runtime losses (provisioning before the
    complete allocation is a scheduling loss).  A replica's lifetime can be read two ways, and for a
    short-lived replica the choice shows in the second digit -- the chapter's "single burst hour" is
    such a case: a held hour that includes the 5.7-minute cold start gives 1 - 5.7/60 = 0.905 (loss
    9.5 %), while an hour of ready time plus the cold start gives 60/65.7 = 0.913 (loss 8.7 %).  The
    chapter's "about 9 percent" and "about 0.91" sit between the two; state which one you mean.

    Parameters
    ----------
    cold_start_s
        Time from placement to ready, seconds, >= 0.
    lifetime_s
        The replica's lifetime, seconds, > 0: held time if ``lifetime_includes_cold_start``,
        otherwise ready time.
    lifetime_includes_cold_start
        True (default): ``lifetime_s`` is held time, ready = lifetime - cold start.  False:
        ``lifetime_s`` is ready time, held = lifetime + cold start.

    Returns
    -------
    float
        Ready time / held time.

    Examples
    --------
    >>> round(serving_runtime_goodput(5.7 * 60, 86400), 4)
    0.996
    """
    cold = check_nonnegative("cold_start_s", cold_start_s)
    life = check_positive("lifetime_s", lifetime_s)
    if lifetime_includes_cold_start:
        if cold > life:
            raise DomainError(f"cold_start_s {cold!r} is longer than the held lifetime {life!r}")
        return (life - cold) / life
    return life / (life + cold)


def check_runtime_window(window_s: float, mtbf_s: float, *, min_interruptions: float = 1.0) -> float:
    """Refuse a runtime-goodput window too short to contain the interruptions it should measure.

    Failure-driven runtime losses arrive once per MTBF; a window shorter than that usually sees none
    of them and reports a runtime goodput that is too high (rule 42: measure over days to weeks).

    Parameters
    ----------
    window_s
        Length of the measurement window, seconds, > 0.
    mtbf_s
        Mean time between interruptions of the job, seconds, > 0.
    min_interruptions
        Expected interruptions the window must span, > 0; the default 1.0 rejects windows shorter
        than one MTBF.

    Returns
    -------
    float
        Expected number of interruptions inside the window, ``window_s / mtbf_s``.

    Raises
    ------
    DomainError
        If the window is shorter than ``min_interruptions`` MTBFs.

    Examples
    --------
    >>> round(check_runtime_window(14 * 86400, 302 * 3600), 2)
    1.11
    """
    w = check_positive("window_s", window_s)
    m = check_positive("mtbf_s", mtbf_s)
    k = check_positive("min_interruptions", min_interruptions)
    if w < k * m:
        raise DomainError(
            f"runtime window of {w / 86400.0:.3g} days is shorter than {k:g} x the MTBF of "
            f"{m / 86400.0:.3g} days: it is expected to contain {w / m:.2g} interruptions, too few to "
            "measure failure-driven runtime losses; measure over a window spanning many interruptions"
        )
    return w / m
