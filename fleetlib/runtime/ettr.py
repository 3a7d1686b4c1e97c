"""Meta's expected effective training time ratio (ETTR; Kokolis et al. 2025) and its optimal interval.

Part of the analytical runtime model; :mod:`fleetlib.runtime.model` re-exports every name.
"""

from __future__ import annotations

import math

from fleetlib.quality import DomainError, check_nonnegative, check_positive

__all__ = ["ettr_optimal_interval_s", "expected_ettr", "mttf_from_node_failure_rate_s"]


def _hours(seconds: float) -> str:
    return f"{seconds / 3600.0:.4g} h"



def mttf_from_node_failure_rate_s(nodes: float, failures_per_node_day: float) -> float:
    """Job mean time to failure from a per-node failure rate, ``1 / (N_nodes r_f)``.

    Parameters
    ----------
    nodes
        Nodes in the job, > 0.
    failures_per_node_day
        Failure rate per node-day ``r_f``, > 0 (e.g. 6.5e-3 for 6.5 per 1000 node-days).

    Returns
    -------
    float
        Mean time to failure in seconds.

    Examples
    --------
    >>> round(mttf_from_node_failure_rate_s(2048, 6.5e-3) / 3600, 2)
    1.8
    """
    n = check_positive("nodes", nodes)
    rf = check_positive("failures_per_node_day", failures_per_node_day)
    return 86400.0 / (n * rf)


def expected_ettr(*, mttf_s: float, restart_s: float, checkpoint_write_s: float, interval_s: float,
                  queue_s: float = 0.0) -> float:
    """Return the expected effective training time ratio (ETTR) of a long job (Kokolis et al. 2025).

    ETTR is productive runtime over wall-clock time of a job run, including time spent queued.  The
    closed form (as the field notes quote it) is::

        E[ETTR] ~= (1 - (u0 + dt / 2) / MTTF) / (1 + w / dt)

    with ``u0`` the restart overhead per failure, ``dt`` the checkpoint interval, ``w`` the
    checkpoint write time and ``MTTF = 1 / (N_nodes r_f)``.  Assumptions: failures arrive as a
    Poisson process; each costs one restart plus, on average, half an interval of lost work; the
    write pause is paid once per interval; everything is first order in ``dt / MTTF``.  A queue
    wait ``q`` after each interruption is added as ``E[ETTR] / (1 + q / MTTF)`` -- an extension
    derived in the field notes, not the paper's own equation (the queue wait after submission is
    left out, as it vanishes for long runs).

    Because its denominator includes queue time, ETTR also spans part of scheduling goodput; with
    ``queue_s = 0`` it is the failure-driven part of runtime goodput and is not directly comparable
    to :func:`runtime_loss_terms` otherwise.

    Parameters
    ----------
    mttf_s
        Job mean time to failure, seconds, > 0 (see :func:`mttf_from_node_failure_rate_s`).
    restart_s
        Restart overhead per failure ``u0`` (init + checkpoint load), seconds, >= 0.
    checkpoint_write_s
        Checkpoint write time ``w``, seconds, >= 0.
    interval_s
        Checkpoint interval ``dt``, seconds, > 0.
    queue_s
        Expected queue wait after each interruption ``q``, seconds, >= 0.

    Returns
    -------
    float
        Expected ETTR, in (0, 1].

    Raises
    ------
    DomainError
        On negative durations, non-positive MTTF or interval, an interval longer than the MTTF
        (the model assumes at most one failure per interval), or when restart plus half an interval
        reaches the MTTF (the model would predict no progress).

    Examples
    --------
    >>> m = mttf_from_node_failure_rate_s(2048, 6.5e-3)
    >>> round(expected_ettr(mttf_s=m, restart_s=300, checkpoint_write_s=0, interval_s=3600), 3)
    0.676
    """
    m = check_positive("mttf_s", mttf_s)
    u0 = check_nonnegative("restart_s", restart_s)
    w = check_nonnegative("checkpoint_write_s", checkpoint_write_s)
    dt = check_positive("interval_s", interval_s)
    q = check_nonnegative("queue_s", queue_s)
    if dt > m:
        raise DomainError(
            f"checkpoint interval ({_hours(dt)}) is longer than the MTTF ({_hours(m)}): the expected-ETTR "
            "model assumes at most one failure per interval and has no meaning there"
        )
    lost = u0 + dt / 2.0
    if lost >= m:
        raise DomainError(
            f"restart_s + interval_s / 2 ({_hours(lost)}) reaches the MTTF ({_hours(m)}): the expected "
            "ETTR model predicts no progress and has no meaning there"
        )
    return (1.0 - lost / m) / (1.0 + w / dt) / (1.0 + q / m)


def ettr_optimal_interval_s(*, mttf_s: float, checkpoint_write_s: float, restart_s: float = 0.0,
                            queue_s: float = 0.0) -> float:
    """Checkpoint interval that maximises :func:`expected_ettr`, in closed form.

    Setting the derivative of ``(1 - (u0 + dt/2)/M) dt / (dt + w)`` to zero gives
    ``dt**2 + 2 w dt - 2 w (M - u0) = 0``, whose positive root is::

        dt* = sqrt(w**2 + 2 w (M - u0)) - w

    For ``w, u0 << M`` this is ``sqrt(2 w M)``, the Young form the paper and field notes quote.  The
    queue factor does not depend on ``dt`` and leaves the optimum unchanged.

    Parameters
    ----------
    mttf_s
        Job mean time to failure, seconds, > 0.
    checkpoint_write_s
        Checkpoint write time ``w``, seconds, > 0 (a free checkpoint has no optimum).
    restart_s
        Restart overhead per failure, seconds, in [0, ``mttf_s``).
    queue_s
        Queue wait after each interruption, seconds, >= 0 (validated; does not move the optimum).

    Returns
    -------
    float
        The optimal interval in seconds.

    Examples
    --------
    >>> round(ettr_optimal_interval_s(mttf_s=302 * 3600, checkpoint_write_s=9.8) / 60, 2)
    76.77
    """
    m = check_positive("mttf_s", mttf_s)
    w = check_positive("checkpoint_write_s", checkpoint_write_s)
    u0 = check_nonnegative("restart_s", restart_s)
    check_nonnegative("queue_s", queue_s)
    if u0 >= m:
        raise DomainError(f"restart_s {u0!r} reaches the MTTF {m!r}: no interval yields progress")
    return math.sqrt(w * w + 2.0 * w * (m - u0)) - w
