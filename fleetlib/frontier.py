"""Trades between factors and the efficiency frontier (chapter section 9.9).

Four tools live here, each a pure function over numbers or small frames:

* **Iso-goodput** -- :func:`iso_goodput_grid` tabulates the product of two factors (with the third
  held fixed, or the job product R x P) over a grid, :func:`iso_goodput_curve` traces one level of
  that product, and :func:`break_even_ratio` / :func:`max_relative_rise` give the margins a trade
  has to spend.
* **Elastic strategies** -- :func:`elastic_strategies` prices the three ways of starting a job built
  for a large allocation (run small now, wait for the full allocation, start small and step up)
  in progress over a window, time to result and useful work per held GPU-hour;
  :func:`elastic_break_even_pause_h` gives the rescale pause at which stepping up stops paying.
* **Frontier** -- :func:`price_tiers` replicates strategy points at several capacity prices,
  :func:`pareto_frontier` marks the points no other point beats on both time to result and cost
  per useful unit, and :func:`efficiency_frontier` chains them into the frame the plots draw.
* **Compilation break-even** -- :func:`compiled_step_fraction`, :func:`compile_break_even` and
  :class:`CompileCacheKey`: a build is repaid over the executions that reuse its artifact, never
  over elapsed time.

Units are relative where the chapter's decision is relative: in the elastic model one *epoch* is the
work the small allocation completes in one hour at its own program goodput, and "relative goodput"
is useful work per held GPU-hour as a ratio to that small run on the fleet rate (1.00).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import BOUNDARIES, time_to_result
from fleetlib.quality import DomainError, check_fraction, check_nonnegative, check_positive

__all__ = [
    "ELASTIC_STRATEGIES",
    "FRONTIER_COLUMNS",
    "CompileBreakEven",
    "CompileCacheKey",
    "break_even_ratio",
    "compile_break_even",
    "compiled_step_fraction",
    "efficiency_frontier",
    "elastic_break_even_pause_h",
    "elastic_strategies",
    "iso_goodput_curve",
    "iso_goodput_grid",
    "max_relative_rise",
    "pareto_frontier",
    "price_tiers",
    "relative_goodput_per_held_gpu_hour",
]

#: Names of the three elastic strategies, in the order :func:`elastic_strategies` returns them.
ELASTIC_STRATEGIES: tuple[str, str, str] = ("small now", "wait for full", "step up")

#: Columns of the frame the frontier plot draws, in order.
FRONTIER_COLUMNS: tuple[str, ...] = (
    "label", "tier", "time_to_result_h", "cost_per_useful_unit", "relative_goodput", "on_frontier",
)

#: Scaling efficiencies of the chapter's elastic decision (program goodput relative to 128 GPUs).
_DEFAULT_EFFICIENCY: dict[int, float] = {256: 0.90, 512: 0.80}

#: Shares of a step must add to one within this tolerance.
_SHARE_TOL = 1e-6


# ---------------------------------------------------------------------------------------------------
# Iso-goodput
# ---------------------------------------------------------------------------------------------------


def _check_factor_pair(x_factor: str, y_factor: str) -> None:
    for name, f in (("x_factor", x_factor), ("y_factor", y_factor)):
        if f not in BOUNDARIES:
            raise DomainError(f"{name} must be one of {BOUNDARIES}; got {f!r}")
    if x_factor == y_factor:
        raise DomainError(f"x_factor and y_factor must differ; both are {x_factor!r}")


def _fixed_multiplier(x_factor: str, y_factor: str, fixed: Mapping[str, float]) -> float:
    """Return the product of the factors held fixed, validating ``fixed`` against the axes."""
    _check_factor_pair(x_factor, y_factor)
    (third,) = [b for b in BOUNDARIES if b not in (x_factor, y_factor)]
    keys = set(fixed)
    if not keys:
        if third != "scheduling":
            raise DomainError(
                f"with {x_factor} and {y_factor} on the axes, the product needs {third} goodput: pass "
                f"fixed={{{third!r}: value}} (an empty `fixed` means the job product runtime x program)"
            )
        return 1.0
    if keys != {third}:
        raise DomainError(
            f"fixed must hold exactly the factor not on an axis ({third!r}), or be empty for the job "
            f"product; got keys {sorted(keys)}"
        )
    return check_fraction(f"fixed {third} goodput", fixed[third])


def _check_range(name: str, bounds: Sequence[float]) -> tuple[float, float]:
    if len(bounds) != 2:
        raise DomainError(f"{name} must be a (low, high) pair; got {bounds!r}")
    lo = check_fraction(f"{name} low", bounds[0])
    hi = check_fraction(f"{name} high", bounds[1])
    if hi <= lo:
        raise DomainError(f"{name} must have low < high; got {bounds!r}")
    return lo, hi


def iso_goodput_grid(x_factor: str = "program", y_factor: str = "runtime", *,
                     fixed: Mapping[str, float],
                     x_range: Sequence[float] = (0.05, 1.0),
                     y_range: Sequence[float] = (0.05, 1.0),
                     n: int = 101) -> pd.DataFrame:
    """Tabulate the goodput product over a grid of two factors (the surface of figure 11).

    Two products can be drawn:

    * the **pool product** (MPG): put two factors on the axes and hold the third in ``fixed``,
      e.g. ``fixed={"scheduling": 0.65}`` with runtime and program on the axes;
    * the **job product** R x P: put runtime and program on the axes and pass ``fixed={}``.
      Scheduling goodput is then left out (a lever confined to one job is judged on R x P).

    Parameters
    ----------
    x_factor, y_factor
        Factors on the axes, two different names among ``"scheduling"``, ``"runtime"``,
        ``"program"``.
    fixed
        ``{third_factor: value}`` for the pool product, or ``{}`` for the job product (only when
        the axes are runtime and program).
    x_range, y_range
        ``(low, high)`` bounds of each axis, fractions in [0, 1] with ``low < high``.
    n
        Number of grid points along each axis (at least 2); the frame has ``n * n`` rows.

    Returns
    -------
    pandas.DataFrame
        Long (tidy) frame with columns exactly ``[x_factor, y_factor, "value"]``, where
        ``value`` is the product of both axis values and the fixed factor.  ``attrs`` records
        ``{"product": "pool" | "job", "fixed": {...}}``.

    Examples
    --------
    >>> grid = iso_goodput_grid("program", "runtime", fixed={"scheduling": 0.65}, n=3)
    >>> list(grid.columns)
    ['program', 'runtime', 'value']
    """
    multiplier = _fixed_multiplier(x_factor, y_factor, fixed)
    lo_x, hi_x = _check_range("x_range", x_range)
    lo_y, hi_y = _check_range("y_range", y_range)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise DomainError(f"n must be an integer >= 2; got {n!r}")
    xs = np.linspace(lo_x, hi_x, int(n))
    ys = np.linspace(lo_y, hi_y, int(n))
    gx, gy = np.meshgrid(xs, ys)
    frame = pd.DataFrame({x_factor: gx.ravel(), y_factor: gy.ravel(),
                          "value": gx.ravel() * gy.ravel() * multiplier})
    frame.attrs = {"product": "job" if not fixed else "pool",
                   "fixed": {k: float(v) for k, v in fixed.items()}}
    return frame


def iso_goodput_curve(level: float, x_values: Sequence[float] | np.ndarray, *,
                      x_factor: str = "program", y_factor: str = "runtime",
                      fixed: Mapping[str, float]) -> pd.DataFrame:
    """Trace the curve on which the goodput product stays at ``level``.

    For each ``x`` the curve's ``y`` is ``level / (x * fixed)``.  Where that ``y`` would exceed one
    (a goodput above one) -- including ``x = 0`` -- the point is unreachable and is **dropped**, so
    the frame holds only reachable points, never NaN or a clipped value.  The result may be empty
    when no ``x`` can reach the level.

    Parameters
    ----------
    level
        The product to hold, in (0, 1].
    x_values
        Candidate values of the x factor, fractions in [0, 1].
    x_factor, y_factor, fixed
        As in :func:`iso_goodput_grid` (``fixed={}`` for the job product R x P).

    Returns
    -------
    pandas.DataFrame
        Columns exactly ``[x_factor, y_factor]``, the reachable points in the order given.

    Examples
    --------
    >>> curve = iso_goodput_curve(0.432, [0.4, 0.48, 0.6], fixed={})
    >>> [round(v, 3) for v in curve["runtime"]]
    [0.9, 0.72]
    """
    multiplier = _fixed_multiplier(x_factor, y_factor, fixed)
    lvl = check_fraction("level", level, allow_zero=False)
    xs = np.asarray(x_values, dtype=float).ravel()
    if xs.size and (not np.all(np.isfinite(xs)) or xs.min() < 0.0 or xs.max() > 1.0):
        bad = xs[~(np.isfinite(xs) & (xs >= 0.0) & (xs <= 1.0))]
        raise DomainError(f"x_values must be finite fractions in [0, 1]; got {bad[:5].tolist()}")
    reach = xs * multiplier
    keep = reach >= lvl
    ys = lvl / reach[keep]
    return pd.DataFrame({x_factor: xs[keep], y_factor: ys})


def break_even_ratio(gain_ratio: float) -> float:
    """Return the largest relative loss in another factor that a gain can pay for: ``1 - 1/gain``.

    A factor multiplied by ``gain_ratio`` leaves the product unchanged when another factor is
    multiplied by ``1 / gain_ratio``; any smaller loss leaves the product higher.

    Parameters
    ----------
    gain_ratio
        after / before of the factor that rises, at least 1.

    Returns
    -------
    float
        The break-even relative loss, in [0, 1).

    Examples
    --------
    >>> round(break_even_ratio(0.65 / 0.48), 4)
    0.2615
    """
    g = check_positive("gain ratio", gain_ratio)
    if g < 1.0:
        raise DomainError(f"gain ratio must be >= 1 (a loss cannot pay for another loss); got {gain_ratio!r}")
    return 1.0 - 1.0 / g


def max_relative_rise(value: float) -> float:
    """Return the most a factor can rise relative to itself before reaching one: ``1/value - 1``.

    Parameters
    ----------
    value
        The factor now, in (0, 1].

    Returns
    -------
    float
        The relative headroom (0 for a factor already at one).

    Examples
    --------
    >>> round(max_relative_rise(0.90), 4)
    0.1111
    """
    v = check_fraction("factor value", value, allow_zero=False)
    return 1.0 / v - 1.0


# ---------------------------------------------------------------------------------------------------
# Elastic strategies (section 9.9.1)
# ---------------------------------------------------------------------------------------------------


def relative_goodput_per_held_gpu_hour(useful_gpu_h: float | np.ndarray,
                                       held_gpu_h: float | np.ndarray) -> float | np.ndarray:
    """Return useful work per held GPU-hour, as a ratio to a baseline that turns every held hour into work.

    Parameters
    ----------
    useful_gpu_h
        Work done, in GPU-hours of the baseline allocation at its own rate (>= 0).
    held_gpu_h
        GPU-hours held to do it (> 0).

    Returns
    -------
    float or numpy.ndarray
        ``useful_gpu_h / held_gpu_h`` (1.00 for the baseline itself).
    """
    useful = np.asarray(useful_gpu_h, dtype=float)
    held = np.asarray(held_gpu_h, dtype=float)
    if not (np.all(np.isfinite(useful)) and np.all(np.isfinite(held))):
        raise DomainError("useful and held GPU-hours must be finite")
    if np.any(useful < 0.0):
        raise DomainError("useful GPU-hours must be >= 0")
    if np.any(held <= 0.0):
        raise DomainError("held GPU-hours must be > 0 (nothing held, no goodput)")
    out = useful / held
    return float(out) if out.ndim == 0 else out


def _check_devices(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DomainError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def _efficiencies(efficiency: Mapping[int, float] | None, small: int, step: int,
                  target: int) -> tuple[float, float]:
    eff = dict(_DEFAULT_EFFICIENCY if efficiency is None else efficiency)
    if small in eff and eff[small] != 1.0:
        raise DomainError(f"efficiency is relative to the small allocation, so efficiency[{small}] "
                          f"must be 1.0; got {eff[small]!r}")
    missing = [d for d in (step, target) if d not in eff]
    if missing:
        raise DomainError(f"efficiency needs a scaling efficiency for {missing} devices; "
                          f"got keys {sorted(eff)}")
    e_step = check_fraction(f"efficiency at {step} devices", eff[step], allow_zero=False)
    e_target = check_fraction(f"efficiency at {target} devices", eff[target], allow_zero=False)
    return e_step, e_target


def elastic_break_even_pause_h(*, small_devices: int = 128, step_devices: int = 256,
                               step_efficiency: float = 0.90, window_h: float = 24.0,
                               step_up_h: float = 4.0) -> float:
    """Rescale pause at which stepping up stops making more progress in the window than staying small.

    After the step-up at ``step_up_h`` the larger allocation runs at ``r`` times the small rate
    (``r = step_devices / small_devices * step_efficiency``).  Progress over the rest of the window
    is equal when ``(window - t_step - pause) * r = window - t_step``, so the break-even pause is
    ``(window - t_step) * (1 - 1/r)``.

    Parameters
    ----------
    small_devices, step_devices
        Allocation before and after the step-up; ``step_devices > small_devices``.
    step_efficiency
        Program goodput of the larger allocation relative to the small one, in (0, 1].
    window_h
        The window over which progress is compared (> 0).
    step_up_h
        When the step-up happens, in [0, window_h).

    Returns
    -------
    float
        Break-even pause in hours.

    Examples
    --------
    >>> round(elastic_break_even_pause_h(), 2)
    8.89
    """
    small = _check_devices("small_devices", small_devices)
    step = _check_devices("step_devices", step_devices)
    if step <= small:
        raise DomainError(f"step_devices ({step}) must exceed small_devices ({small})")
    eff = check_fraction("step efficiency", step_efficiency, allow_zero=False)
    window = check_positive("window_h", window_h)
    t_step = check_nonnegative("step_up_h", step_up_h)
    if t_step >= window:
        raise DomainError(f"step_up_h ({t_step}) must fall inside the window ({window} h)")
    ratio = step / small * eff
    if ratio <= 1.0:
        raise DomainError(
            f"the stepped-up allocation runs at {ratio:.3f}x the small rate; at or below 1x no pause "
            "can be repaid"
        )
    return (window - t_step) * (1.0 - 1.0 / ratio)


def elastic_strategies(*, target_devices: int = 512, small_devices: int = 128, step_devices: int = 256,
                       wait_h: float = 4.0, step_up_h: float = 4.0, rescale_pause_min: float = 10.0,
                       efficiency: Mapping[int, float] | None = None, window_h: float = 24.0,
                       target_epochs: float | None = None,
                       pause_held_devices: int | None = None) -> pd.DataFrame:
    """Price the three ways to start a job built for a large allocation (section 9.9.1).

    The global batch is fixed, so every epoch is the same statistical progress whatever the
    allocation.  One epoch is what the small allocation does in one hour; an allocation of ``N``
    devices runs at ``N / small_devices * efficiency[N]`` epochs per hour.  The strategies:

    * ``"small now"`` -- hold ``small_devices`` from t = 0 until the target is reached;
    * ``"wait for full"`` -- queue ``wait_h`` (nothing held), then hold ``target_devices``;
    * ``"step up"`` -- hold ``small_devices`` from t = 0; at ``step_up_h`` pause for the rescale
      (checkpoint, reshard, restart), then run on ``step_devices`` and leave the rest to the queue.

    **How the rescale pause is held.**  During the pause the job holds ``pause_held_devices``
    (default ``step_devices``: the larger gang is already assigned while the job restarts on it) and
    makes no progress, so the pause is a runtime loss on that many devices.  This reproduces the
    reconstruction of figure 12 (relative goodput 0.901 for the step-up).  If the target is reached
    before ``step_up_h``, the step-up never happens.

    Parameters
    ----------
    target_devices, small_devices, step_devices
        Allocation sizes, ``small_devices < step_devices < target_devices``.
    wait_h
        Queue wait for the full allocation (>= 0).
    step_up_h
        When capacity frees for the step-up (>= 0); the chapter does not state it, and 4 h
        reproduces all its numbers.
    rescale_pause_min
        Length of the step-up's rescale pause (>= 0).
    efficiency
        Program goodput of each larger allocation relative to the small one,
        ``{step_devices: e, target_devices: e}`` (default ``{256: 0.90, 512: 0.80}``).
    window_h
        Window over which progress is compared, 24 h in the chapter; it must be longer than
        ``wait_h``.
    target_epochs
        Fixed target for time to result and goodput; default the epochs the full allocation
        completes in the window (64 with the defaults).
    pause_held_devices
        Devices held during the rescale pause; default ``step_devices``.

    Returns
    -------
    pandas.DataFrame
        One row per strategy (``ELASTIC_STRATEGIES`` order) with columns ``strategy``, ``label``
        (same as strategy), ``start_devices``, ``devices_held`` (the allocation it finishes on),
        ``queue_h``, ``rate_epochs_per_h`` (final rate), ``progress_in_window`` (epochs),
        ``relative_rate`` (average rate over the window relative to the small run),
        ``trails_full`` (shortfall of window progress against the full allocation),
        ``target_epochs``, ``time_to_result_h``, ``held_gpu_h``, ``runtime_goodput`` (held time
        not lost to the pause), ``relative_goodput`` (useful work per held GPU-hour relative to the
        small run = 1.00).

    Examples
    --------
    >>> frame = elastic_strategies()
    >>> frame.set_index("strategy")["time_to_result_h"].round(1).to_dict()
    {'small now': 64.0, 'wait for full': 24.0, 'step up': 37.5}
    """
    small = _check_devices("small_devices", small_devices)
    step = _check_devices("step_devices", step_devices)
    target = _check_devices("target_devices", target_devices)
    if not small < step < target:
        raise DomainError("need small_devices < step_devices < target_devices; "
                          f"got {small}, {step}, {target}")
    pause_dev = (step if pause_held_devices is None
                 else _check_devices("pause_held_devices", pause_held_devices))
    e_step, e_target = _efficiencies(efficiency, small, step, target)
    wait = check_nonnegative("wait_h", wait_h)
    t_step = check_nonnegative("step_up_h", step_up_h)
    pause = check_nonnegative("rescale_pause_min", rescale_pause_min) / 60.0
    window = check_positive("window_h", window_h)

    r_small = 1.0
    r_step = step / small * e_step
    r_full = target / small * e_target

    def step_progress(t: float) -> float:
        # Epochs the step-up strategy has completed t hours after submission.
        if t <= t_step:
            return t * r_small
        return t_step * r_small + max(0.0, t - t_step - pause) * r_step

    if wait >= window:
        raise DomainError(f"the full allocation's wait ({wait} h) must end inside the window ({window} h), "
                          "or the strategies cannot be compared over it")
    full_in_window = (window - wait) * r_full
    goal = full_in_window if target_epochs is None else check_positive("target_epochs", target_epochs)

    # Useful work in small-allocation GPU-hours (one epoch = small_devices GPU-hours at the baseline).
    useful_gpu_h = goal * small

    # Equation 7 per strategy: T = T_queue + A_ideal / (N R P), with relative P and R = 1 outside the pause.
    ttr_small = time_to_result(0.0, useful_gpu_h, small, 1.0, 1.0)
    ttr_full = time_to_result(wait, useful_gpu_h, target, 1.0, e_target)
    before_step = t_step * r_small
    if goal <= before_step:
        ttr_step = time_to_result(0.0, useful_gpu_h, small, 1.0, 1.0)
        held_step = small * ttr_step
        pause_held = 0.0
    else:
        remaining_gpu_h = (goal - before_step) * small
        ttr_step = t_step + pause + time_to_result(0.0, remaining_gpu_h, step, 1.0, e_step)
        pause_held = pause_dev * pause
        held_step = small * t_step + pause_held + step * (ttr_step - t_step - pause)

    held = np.array([small * ttr_small, target * (ttr_full - wait), held_step])
    progress = np.array([window * r_small, full_in_window, step_progress(window)])
    frame = pd.DataFrame({
        "strategy": list(ELASTIC_STRATEGIES),
        "label": list(ELASTIC_STRATEGIES),
        "start_devices": [small, target, small],
        "devices_held": [small, target, step if goal > before_step else small],
        "queue_h": [0.0, wait, 0.0],
        "rate_epochs_per_h": [r_small, r_full, r_step if goal > before_step else r_small],
        "progress_in_window": progress,
        "relative_rate": progress / (window * r_small),
        "trails_full": 1.0 - progress / full_in_window,
        "target_epochs": goal,
        "time_to_result_h": [ttr_small, ttr_full, ttr_step],
        "held_gpu_h": held,
        "runtime_goodput": [1.0, 1.0, 1.0 - pause_held / held_step],
        "relative_goodput": relative_goodput_per_held_gpu_hour(useful_gpu_h, held),
    })
    frame.attrs = {"window_h": window, "small_devices": small,
                   "pause_held_devices": pause_dev, "step_up_h": t_step}
    return frame


# ---------------------------------------------------------------------------------------------------
# Price tiers and the frontier (section 9.9.4)
# ---------------------------------------------------------------------------------------------------


def _label_column(points: pd.DataFrame) -> pd.Series:
    if "label" in points.columns:
        return points["label"]
    if "strategy" in points.columns:
        return points["strategy"]
    raise DomainError("points need a 'label' (or 'strategy') column")


def _require_columns(points: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(points, pd.DataFrame):
        raise DomainError(f"{what} must be a pandas DataFrame; got {type(points).__name__}")
    missing = [c for c in columns if c not in points.columns]
    if missing:
        raise DomainError(f"{what} lack column(s) {missing}; have {list(points.columns)}")


def price_tiers(points: pd.DataFrame, tiers: Mapping[str, float], *,
                runtime_factor: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Replicate strategy points at each capacity price tier and price their useful work.

    Cost per useful unit is the tier's price (as a fraction of the fleet rate) divided by relative
    goodput (equation 6 in relative units).  A tier may also carry a ``runtime_factor`` in (0, 1]:
    the share of held time that survives its interruptions (rework, graceful saves).  It multiplies
    relative goodput and stretches the held part of time to result (``T - queue``) by its inverse;
    the queue wait is kept, as the chapter's figure 12 does for spot.

    The chapter's spot interruption profile comes from another chapter and is not given, so the
    default factor is 1.0 (no interruption loss) and any other value is the caller's assumption.

    Parameters
    ----------
    points
        One row per configuration with ``label`` (or ``strategy``), ``queue_h``,
        ``time_to_result_h`` and ``relative_goodput``; e.g. :func:`elastic_strategies`.
    tiers
        ``{tier name: price fraction of the fleet rate}``, each price >= 0.
    runtime_factor
        ``{tier name: factor in (0, 1]}``; tiers not named keep 1.0.

    Returns
    -------
    pandas.DataFrame
        One row per (tier, point), tiers in the order given, with columns ``label``, ``tier``,
        ``price_fraction``, ``runtime_factor``, ``queue_h``, ``time_to_result_h``,
        ``relative_goodput`` and ``cost_per_useful_unit``.
    """
    _require_columns(points, ["queue_h", "time_to_result_h", "relative_goodput"], "points")
    if not tiers:
        raise DomainError("tiers must name at least one price tier")
    factors = dict(runtime_factor or {})
    unknown = sorted(set(factors) - set(tiers))
    if unknown:
        raise DomainError(f"runtime_factor names tier(s) {unknown} that are not in tiers {list(tiers)}")
    names = list(tiers)
    price = np.array([check_nonnegative(f"price fraction of tier {t!r}", tiers[t]) for t in names])
    factor = np.array([check_fraction(f"runtime factor of tier {t!r}", factors.get(t, 1.0), allow_zero=False)
                       for t in names])

    labels = _label_column(points).to_numpy()
    queue = points["queue_h"].to_numpy(dtype=float)
    ttr = points["time_to_result_h"].to_numpy(dtype=float)
    goodput = points["relative_goodput"].to_numpy(dtype=float)
    for name, arr in (("queue_h", queue), ("time_to_result_h", ttr), ("relative_goodput", goodput)):
        if not np.all(np.isfinite(arr)):
            raise DomainError(f"points column {name!r} must be finite")
    if np.any(queue < 0.0):
        raise DomainError("points column 'queue_h' must be >= 0")
    if np.any(ttr < queue):
        raise DomainError("time to result must be at least the queue wait for every point")
    if np.any(goodput <= 0.0):
        raise DomainError("relative goodput must be > 0 for every point (cost would be unbounded)")

    n_points, n_tiers = len(points), len(names)
    tier_idx = np.repeat(np.arange(n_tiers), n_points)
    pt_idx = np.tile(np.arange(n_points), n_tiers)
    f = factor[tier_idx]
    g = goodput[pt_idx] * f
    q = queue[pt_idx]
    return pd.DataFrame({
        "label": labels[pt_idx],
        "tier": np.asarray(names, dtype=object)[tier_idx],
        "price_fraction": price[tier_idx],
        "runtime_factor": f,
        "queue_h": q,
        "time_to_result_h": q + (ttr[pt_idx] - q) / f,
        "relative_goodput": g,
        "cost_per_useful_unit": price[tier_idx] / g,
    })


def pareto_frontier(points: pd.DataFrame, x: str = "time_to_result_h",
                    y: str = "cost_per_useful_unit") -> pd.DataFrame:
    """Mark the points that no other point beats on both ``x`` and ``y`` (both minimised).

    A point is dominated when another is no worse on both coordinates and strictly better on at
    least one.  Identical points do not dominate each other, so both stay on the frontier.  The
    test is sort-based, O(n log n): after sorting by ``x``, a point is dominated exactly when some
    point with a strictly smaller ``x`` has ``y`` no larger, or a point with the same ``x`` has a
    strictly smaller ``y``.

    Parameters
    ----------
    points
        Frame with numeric, finite ``x`` and ``y`` columns.
    x, y
        Column names of the two coordinates to minimise.

    Returns
    -------
    pandas.DataFrame
        A copy of ``points`` with a boolean ``on_frontier`` column.
    """
    _require_columns(points, [x, y], "points")
    xs = points[x].to_numpy(dtype=float)
    ys = points[y].to_numpy(dtype=float)
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise DomainError(f"columns {x!r} and {y!r} must be finite to compare points")
    out = points.copy()
    if xs.size == 0:
        out["on_frontier"] = np.zeros(0, dtype=bool)
        return out
    order = np.lexsort((ys, xs))
    xs_s, ys_s = xs[order], ys[order]
    # First index of each point's x-group; the minimum y strictly before that group.
    first = np.searchsorted(xs_s, xs_s, side="left")
    prefix_min = np.concatenate(([np.inf], np.minimum.accumulate(ys_s)))[first]
    # Within a group sorted by y, the group's minimum y sits at its first index.
    group_min = ys_s[first]
    dominated_s = (prefix_min <= ys_s) | (group_min < ys_s)
    on = np.empty_like(dominated_s)
    on[order] = ~dominated_s
    out["on_frontier"] = on
    return out


def efficiency_frontier(points: pd.DataFrame, tiers: Mapping[str, float], *,
                        runtime_factor: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Price points at each tier and mark the cost-time frontier: the frame figure 12 draws.

    Parameters
    ----------
    points
        Configurations, e.g. :func:`elastic_strategies`; see :func:`price_tiers`.
    tiers
        ``{tier name: price fraction of the fleet rate}``, e.g. ``{"fleet": 1.0, "spot": 0.35}``.
    runtime_factor
        Optional ``{tier name: factor in (0, 1]}`` for interruption losses (default none).

    Returns
    -------
    pandas.DataFrame
        Columns exactly ``label, tier, time_to_result_h, cost_per_useful_unit,
        relative_goodput, on_frontier`` (``FRONTIER_COLUMNS``).

    Examples
    --------
    >>> frame = efficiency_frontier(elastic_strategies(), {"fleet": 1.0, "spot": 0.35},
    ...                             runtime_factor={"spot": 0.9})
    >>> frame.loc[frame["on_frontier"], ["label", "tier"]].to_numpy().tolist()
    [['wait for full', 'fleet'], ['small now', 'spot'], ['wait for full', 'spot'], ['step up', 'spot']]
    """
    priced = price_tiers(points, tiers, runtime_factor=runtime_factor)
    marked = pareto_frontier(priced)
    return marked.loc[:, list(FRONTIER_COLUMNS)].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------
# Compilation break-even (section 9.9.3, Napkin Math 9.6)
# ---------------------------------------------------------------------------------------------------


def compiled_step_fraction(shares: Mapping[str, float], removed: Mapping[str, float]) -> float:
    """Return the compiled step as a fraction of the uncompiled one.

    Parameters
    ----------
    shares
        ``{part: share of the uncompiled step}``; shares lie in [0, 1] and add to one.
    removed
        ``{part: fraction of that part's time the compiler removes}``; parts not named are
        unchanged.  Every key must be a key of ``shares``.

    Returns
    -------
    float
        ``sum(share * (1 - removed))`` over the parts.

    Examples
    --------
    >>> f = compiled_step_fraction({"matmul": 0.50, "elementwise": 0.35, "launch": 0.15},
    ...                            {"elementwise": 0.70, "launch": 0.80})
    >>> round(f, 6)
    0.635
    """
    if not shares:
        raise DomainError("shares must name at least one part of the step")
    unknown = sorted(set(removed) - set(shares))
    if unknown:
        raise DomainError(f"removed names part(s) {unknown} that are not in shares {sorted(shares)}")
    total = 0.0
    kept = 0.0
    for part, share in shares.items():
        s = check_fraction(f"share of {part!r}", share)
        r = check_fraction(f"removed fraction of {part!r}", removed.get(part, 0.0))
        total += s
        kept += s * (1.0 - r)
    if abs(total - 1.0) > _SHARE_TOL:
        raise DomainError(f"shares of the step must add to 1; they add to {total}")
    return kept


@dataclass(frozen=True)
class CompileBreakEven:
    """When a compilation build repays itself, and where its cost is charged (rule 41).

    Attributes
    ----------
    step_s, compiled_step_s
        One execution (token, step) before and after compilation.
    build_s
        Wall-clock length of one build.
    replicas
        Replicas that run the compiled program.
    shared_artifact
        True when one build's artifact is loaded by every replica; False when each replica builds.
    speedup
        ``step_s / compiled_step_s``.
    saving_s
        Time saved per execution.
    executions_to_repay
        Executions (tokens, steps) whose savings add up to one build.
    repay_time_s
        Those executions generated by one stream at the compiled rate.
    shared_repay_time_s
        ``repay_time_s / replicas``: how long the whole pool takes to repay one shared build.
    builds
        Builds per rollout: 1 with a shared artifact, ``replicas`` otherwise.
    per_replica_builds_device_h
        Device-hours that per-replica builds cost one rollout (``replicas x build``), reported
        for contrast whichever mode is chosen.
    charged_build_device_h
        Device-hours of build actually paid in the chosen mode.
    build_s_charged_per_replica
        Build time charged to each serving replica's runtime goodput as startup: ``build_s`` for
        per-replica builds; 0 for a shared artifact, whose single build is charged once, to the job
        that built it.
    burst_held_s
        Held time of a replica added for a burst, if given.
    burst_share
        ``build_s_charged_per_replica / burst_held_s``: the share of that replica's held time lost
        to its build (None without ``burst_held_s``).
    """

    step_s: float
    compiled_step_s: float
    build_s: float
    replicas: int
    shared_artifact: bool
    speedup: float
    saving_s: float
    executions_to_repay: float
    repay_time_s: float
    shared_repay_time_s: float
    builds: int
    per_replica_builds_device_h: float
    charged_build_device_h: float
    build_s_charged_per_replica: float
    burst_held_s: float | None
    burst_share: float | None

    def to_dict(self) -> dict[str, Any]:
        """Return the break-even as a JSON-ready dictionary."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def compile_break_even(*, step_s: float, compiled_step_s: float, build_s: float, replicas: int = 1,
                       shared_artifact: bool = True, burst_held_s: float | None = None,
                       devices_per_replica: int = 1) -> CompileBreakEven:
    """Count the executions that repay a compilation build and charge the build where it lands.

    A build is repaid over executions that reuse its artifact, not over elapsed time: it costs
    ``build_s`` once and saves ``step_s - compiled_step_s`` on every execution.  With a shared
    artifact the pool repays one build together; with per-replica builds every replica pays its
    own build as startup (a runtime loss) and must repay it alone.

    Parameters
    ----------
    step_s, compiled_step_s
        Time of one execution without and with compilation; the compiled one must be faster.
    build_s
        Length of one build (>= 0).
    replicas
        Replicas that run the compiled program (>= 1).
    shared_artifact
        True when one build is stored and loaded by every replica.
    burst_held_s
        Held time of a replica added for a burst, to express its build as a share of held time;
        must be at least the build time charged to the replica.
    devices_per_replica
        Devices a replica (and its build) holds, for the device-hour figures.

    Returns
    -------
    CompileBreakEven
        The break-even and its charges.

    Examples
    --------
    >>> t0 = 1 / 120
    >>> out = compile_break_even(step_s=t0, compiled_step_s=0.635 * t0, build_s=900, replicas=128)
    >>> round(out.executions_to_repay), round(out.shared_repay_time_s, 1)
    (295890, 12.2)
    """
    t0 = check_positive("step_s", step_s)
    t1 = check_positive("compiled_step_s", compiled_step_s)
    if t1 >= t0:
        raise DomainError(f"the compiled step ({t1} s) is not faster than the uncompiled one ({t0} s); "
                          "a build that saves nothing is never repaid")
    build = check_nonnegative("build_s", build_s)
    n = _check_devices("replicas", replicas)
    per_dev = _check_devices("devices_per_replica", devices_per_replica)
    if not isinstance(shared_artifact, bool):
        raise DomainError(f"shared_artifact must be True or False; got {shared_artifact!r}")
    saving = t0 - t1
    executions = build / saving
    repay = executions * t1
    builds = 1 if shared_artifact else n
    charged_per_replica = 0.0 if shared_artifact else build
    share: float | None = None
    held: float | None = None
    if burst_held_s is not None:
        held = check_positive("burst_held_s", burst_held_s)
        if charged_per_replica > held:
            raise DomainError(f"the build charged to a replica ({charged_per_replica} s) exceeds its held "
                              f"time ({held} s): the replica would never serve")
        share = charged_per_replica / held
    return CompileBreakEven(
        step_s=t0, compiled_step_s=t1, build_s=build, replicas=n, shared_artifact=shared_artifact,
        speedup=t0 / t1, saving_s=saving, executions_to_repay=executions, repay_time_s=repay,
        shared_repay_time_s=repay / n, builds=builds,
        per_replica_builds_device_h=n * build * per_dev / 3600.0,
        charged_build_device_h=builds * build * per_dev / 3600.0,
        build_s_charged_per_replica=charged_per_replica, burst_held_s=held, burst_share=share,
    )


def _as_tuple(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuple(v) for v in value)
    return value


@dataclass(frozen=True)
class CompileCacheKey:
    """What a stored compilation artifact is valid for.

    An artifact can be reused only under the same key: a change of model revision, input shapes,
    device mesh, accelerator model or compiler version invalidates it and pays the build anew.
    Lists in ``input_shapes`` and ``device_mesh`` are stored as (nested) tuples.

    Parameters
    ----------
    model_revision
        Revision of the program or weights layout that was compiled.
    input_shapes
        Shape signature (or shape bucket) the artifact was specialised to.
    device_mesh
        Device count and topology of the mesh.
    accelerator_model
        Accelerator the artifact was built for, e.g. ``"H100 SXM"``.
    compiler_version
        Compiler and library versions, e.g. ``"torch 2.5 / triton 3.1"``.
    """

    model_revision: str
    input_shapes: tuple[Any, ...]
    device_mesh: tuple[Any, ...]
    accelerator_model: str
    compiler_version: str

    def __post_init__(self) -> None:
        for name in ("model_revision", "accelerator_model", "compiler_version"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise DomainError(f"{name} must be a non-empty string; got {value!r}")
        for name in ("input_shapes", "device_mesh"):
            value = getattr(self, name)
            if not isinstance(value, (list, tuple)):
                raise DomainError(f"{name} must be a tuple or list; got {type(value).__name__}")
            object.__setattr__(self, name, _as_tuple(value))

    def invalidated_by(self, other: CompileCacheKey) -> tuple[str, ...]:
        """Return the fields in which ``other`` differs from this key (empty when reusable).

        Parameters
        ----------
        other
            The key of the launch that wants to load the artifact.

        Returns
        -------
        tuple of str
            Names of the differing fields, in declaration order.
        """
        if not isinstance(other, CompileCacheKey):
            raise DomainError(f"compare with another CompileCacheKey; got {type(other).__name__}")
        return tuple(f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name))

    def can_reuse_for(self, other: CompileCacheKey) -> bool:
        """Return True when an artifact built under this key can serve a launch with key ``other``.

        Parameters
        ----------
        other
            The key of the launch that wants to load the artifact.

        Returns
        -------
        bool
            True only when all five fields match.
        """
        return not self.invalidated_by(other)
