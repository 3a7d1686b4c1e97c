"""ipywidgets wiring for the notebooks: one explorer per notebook's interactive view.

The rung notebooks' explorers come first (:func:`scheduling_explorer`, :func:`timeline_explorer`,
:func:`straggler_explorer`), then one per course notebook (:func:`pool_snapshot_explorer`,
:func:`capacity_cost_explorer`, :func:`lever_explorer`, :func:`iso_goodput_explorer`,
:func:`efficiency_frontier_explorer`, :func:`runtime_loss_explorer`, :func:`serving_replica_explorer`,
:func:`fix_composition_explorer`).

Each function takes data the library already computed and a redraw target (an
:class:`ipywidgets.Output`, created when omitted), builds the controls, draws the figure once into the
target and redraws it whenever a control changes.  It returns the widget box; the notebook displays it
*under* the static figure it drew first.

Nothing here runs at import: ``ipywidgets``, ``IPython`` and matplotlib's pyplot are imported inside the
functions, so ``import fleetlib.widgets`` works where they are not loaded.  No function waits on a kernel
comm, so under papermill or nbval (no front end) each returns at once; the widget state is simply
recorded.  The redraw callable is kept as the box's ``redraw`` attribute (tests call it directly).

Batch runs build no widget at all: each notebook passes its ``interactive`` parameter through
:func:`interactive_allowed`, which turns it off when the kernel runs under ``FLEETLIB_BATCH=1`` (set by
``fleetlib report`` for its papermill kernels and by ``make test`` for nbval's), so a report or a test run
never waits on a front end that will not answer, while a live JupyterLab session still gets the controls.
The static figure is drawn before the widget cell either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

__all__ = [
    "BATCH_ENV",
    "capacity_cost_explorer",
    "efficiency_frontier_explorer",
    "fix_composition_explorer",
    "interactive_allowed",
    "iso_goodput_explorer",
    "lever_explorer",
    "pool_snapshot_explorer",
    "runtime_loss_explorer",
    "scheduling_explorer",
    "serving_replica_explorer",
    "straggler_explorer",
    "timeline_explorer",
]

#: Environment variable marking a batch run (papermill under ``fleetlib report``, nbval under ``make test``).
BATCH_ENV = "FLEETLIB_BATCH"


def interactive_allowed(requested: bool) -> bool:
    """Return whether a notebook should build its widget controls.

    Parameters
    ----------
    requested
        The notebook's ``interactive`` parameter.

    Returns
    -------
    bool
        ``requested``, except under a batch run (environment variable :data:`BATCH_ENV` set to anything but
        ``""``, ``"0"`` or ``"false"``), where it is False and one line says that the controls were left out.
    """
    import os

    batch = os.environ.get(BATCH_ENV, "").strip().lower() not in ("", "0", "false", "no")
    if requested and batch:
        print(f"interactive controls left out: a batch run ({BATCH_ENV} is set) has no front end to drive "
              "them; the static figures above show the same data")
        return False
    return bool(requested)


#: Label of the whole-fleet entry of the pool control.
ALL_POOLS = "all pools"


def _show(draw: Callable[[Any], Any], output: Any, figsize: tuple[float, float]) -> None:
    """Clear ``output`` and display a fresh figure drawn by ``draw(ax)`` in it; the figure is then closed."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    output.clear_output(wait=True)
    fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    try:
        draw(ax)
        with output:
            display(fig)
    finally:
        plt.close(fig)


def _refuse(output: Any, refusal: Exception) -> None:
    """Clear ``output`` and print why the library refused the current choice (instead of a figure)."""
    output.clear_output(wait=True)
    with output:
        print(f"refused: {refusal}")


def _say(output: Any, text: str) -> None:
    """Print ``text`` into ``output`` under what it already shows."""
    with output:
        print(text)


def _slider(name: str, value: float, low: float, high: float, step: float) -> Any:
    """Make a float slider labelled ``name``, its readout as fine as its step."""
    import ipywidgets

    return ipywidgets.FloatSlider(value=float(value), min=float(low), max=float(high), step=float(step),
                                  description=name, readout_format=".3f" if step < 0.01 else ".2f",
                                  style={"description_width": "initial"})


def _box(controls: Sequence[Any], output: Any, redraw: Callable[..., None]) -> Any:
    import ipywidgets

    for control in controls:
        control.observe(lambda _change: redraw(), names="value")
    box = ipywidgets.VBox([ipywidgets.HBox(list(controls)), output])
    box.redraw = redraw
    redraw()
    return box


def scheduling_explorer(partition: Any, *, view: str = "pool", denominator: str = "in_service",
                        output: Any = None) -> Any:
    """Pick a pool, an idle view and a denominator; redraw that factor's partition waterfall.

    Parameters
    ----------
    partition
        A :class:`fleetlib.scheduling.SchedulingPartition` (``scheduling_partition(...)``).
    view, denominator
        Initial idle view (``"pool"`` or ``"cross_pool"``) and denominator (``"in_service"`` or
        ``"installed"``).
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The controls above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib.plots import partition_waterfall

    output = ipywidgets.Output() if output is None else output
    pool = ipywidgets.Dropdown(options=[ALL_POOLS, *partition.pools], value=ALL_POOLS, description="pool")
    idle = ipywidgets.Dropdown(options=["pool", "cross_pool"], value=view, description="idle view")
    over = ipywidgets.Dropdown(options=["in_service", "installed"], value=denominator,
                               description="denominator")

    def redraw() -> None:
        factor = partition.factor(None if pool.value == ALL_POOLS else pool.value, view=idle.value,
                                  denominator=over.value)
        _show(lambda ax: partition_waterfall(factor, ax=ax), output, (7.5, 3.8))

    return _box([pool, idle, over], output, redraw)


def timeline_explorer(steps: pd.DataFrame, events: pd.DataFrame, series: pd.DataFrame, *, start: Any,
                      end: Any, window_min: float, restarts: pd.DataFrame | None = None,
                      output: Any = None, **options: Any) -> Any:
    """Pick a rolling-window length; redraw cumulative goodput with those windows.

    Parameters
    ----------
    steps, events
        The canonical timeline tables the windows are measured on.
    series
        The cumulative series (:func:`fleetlib.runtime.cumulative_series`), drawn as it is.
    start, end
        Bounds of the windows (the measurement's ``window_start`` / ``window_end``).
    window_min
        Initial window length, minutes (the slider runs from 10 to 240).
    restarts
        Restart markers (``time``, ``kind``), e.g. ``measurement.interruptions[["time", "kind"]]``.
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.
    **options
        Passed to :func:`fleetlib.runtime.rolling_windows` (``fault_free_step_s``, ...).

    Returns
    -------
    ipywidgets.VBox
        The slider above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib.plots import cumulative_goodput
    from fleetlib.runtime import rolling_windows

    output = ipywidgets.Output() if output is None else output
    length = ipywidgets.FloatSlider(value=float(window_min), min=10.0, max=240.0, step=10.0,
                                    description="window (min)")

    def redraw() -> None:
        windows = rolling_windows(steps, events, start=start, end=end, window_min=length.value, **options)
        _show(lambda ax: cumulative_goodput(series, restarts=restarts, windows=windows, ax=ax), output,
              (10.0, 4.2))

    return _box([length], output, redraw)


def straggler_explorer(waits: pd.DataFrame, partition: pd.DataFrame, *, threshold: float,
                       output: Any = None) -> Any:
    """Pick a straggler threshold; redraw each rank's relative score against it.

    Parameters
    ----------
    waits, partition
        A trace set's peer waits and step partition (:func:`fleetlib.program.views.measure_step_traces`).
    threshold
        Initial relative-score threshold (the slider runs from 0.5 to 1.0).
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The slider above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib.plots import straggler_bars
    from fleetlib.program import straggler_report

    output = ipywidgets.Output() if output is None else output
    level = ipywidgets.FloatSlider(value=float(threshold), min=0.5, max=1.0, step=0.01,
                                   description="threshold")

    def redraw() -> None:
        report = straggler_report(waits, partition, threshold=level.value)
        _show(lambda ax: straggler_bars(report, value="relative_score", threshold=level.value, ax=ax), output,
              (7.0, 3.8))

    return _box([level], output, redraw)


# ---------------------------------------------------------------------------------------------------
# Course notebooks: one explorer per worked example's interactive view
# ---------------------------------------------------------------------------------------------------


def pool_snapshot_explorer(scenario: Mapping[str, Any], *, program: float, assigned_share: float,
                           incomplete_gang_share: float, input_wait_share: float,
                           output: Any = None) -> Any:
    """Vary the pool snapshot's capacity shares; redraw the derived factor chain (course notebook 01).

    Scheduling goodput comes from the snapshot
    (:func:`fleetlib.scheduling.snapshot_scheduling_goodput`), runtime goodput from equation 4
    with the data stall the snapshot's input waits imply, and the program factor stays as given; MPG is
    their product.

    Parameters
    ----------
    scenario
        The scenario's runtime-model parameters (:func:`fleetlib.scenario.runtime_terms` reads them).
    program
        Program goodput, held fixed (fraction).
    assigned_share, incomplete_gang_share, input_wait_share
        Initial pool-capacity shares: assigned to jobs, held by incomplete gangs, waiting for input.
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The sliders above the figure; ``.redraw()`` draws the current choice again.  A choice the library
        refuses (say, more capacity in incomplete gangs than is assigned) prints the refusal instead.
    """
    import ipywidgets

    from fleetlib import accounting, scheduling
    from fleetlib.plots import factor_chain
    from fleetlib.quality import DomainError
    from fleetlib.scenario import runtime_terms

    output = ipywidgets.Output() if output is None else output
    assigned = _slider("assigned_share", assigned_share, 0.2, 1.0, 0.01)
    incomplete = _slider("incomplete_gang_share", incomplete_gang_share, 0.0, 0.5, 0.01)
    input_wait = _slider("input_wait_share", input_wait_share, 0.0, 0.2, 0.005)

    def redraw() -> None:
        try:
            pool = scheduling.snapshot_scheduling_goodput(assigned.value, incomplete.value)
            stall = scheduling.data_stall_from_capacity_share(input_wait.value, pool)
            terms = runtime_terms(scenario, data_stall=stall)
            factors = {"scheduling": pool.S, "runtime": terms.runtime_goodput, "program": program}
            split = accounting.loss_shares(factors["scheduling"], factors["runtime"], factors["program"])
            _show(lambda ax: factor_chain({**factors, "mpg": split["useful"]}, ax=ax), output, (7.0, 4.1))
        except DomainError as refusal:
            _refuse(output, refusal)

    return _box([assigned, incomplete, input_wait], output, redraw)


def capacity_cost_explorer(factors: Mapping[str, float], *, price_per_device_hour: float,
                           reference: Mapping[str, float] | None = None,
                           reference_label: str = "Llama 3 405B", output: Any = None) -> Any:
    """Vary S, R and P; redraw the capacity waterfall and print a useful hour's cost (course notebook 02).

    Parameters
    ----------
    factors
        Initial ``{"scheduling": S, "runtime": R, "program": P}`` (fractions).
    price_per_device_hour
        Price of one in-service accelerator-hour, for the cost of a useful hour (equation 6).
    reference, reference_label
        Shares drawn as thin hollow bars under each row, and their legend text
        (:func:`fleetlib.plots.capacity_waterfall`).
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The sliders above the figure and its cost line; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib import accounting
    from fleetlib.plots import capacity_waterfall
    from fleetlib.quality import DomainError

    output = ipywidgets.Output() if output is None else output
    sliders = {name: _slider(name, factors[name], 0.05, 1.0, 0.01)
               for name in ("scheduling", "runtime", "program")}

    def redraw() -> None:
        chosen = [sliders[name].value for name in ("scheduling", "runtime", "program")]
        try:
            shares = accounting.loss_shares(*chosen)
            _show(lambda ax: capacity_waterfall(shares, reference=reference, reference_label=reference_label,
                                                ax=ax), output, (8.0, 4.2))
            useful_hour = accounting.cost_per_useful_hour(price_per_device_hour, *chosen)
        except DomainError as refusal:
            _refuse(output, refusal)
            return
        _say(output, f"cost of a useful hour: ${useful_hour:.2f}")

    return _box(list(sliders.values()), output, redraw)


def lever_explorer(factors: Mapping[str, float], ceilings: Mapping[str, float], *,
                   output: Any = None) -> Any:
    """Move each lever's ceiling; redraw the levers ranked by relative gain (course notebook 03).

    Parameters
    ----------
    factors
        Today's factors, ``{"scheduling": S, "runtime": R, "program": P}``; each ceiling's slider runs from
        its factor to 1.
    ceilings
        Initial ceiling of each lever (same keys, or a subset).
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The sliders above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib import accounting
    from fleetlib.plots import lever_ranking
    from fleetlib.quality import DomainError

    output = ipywidgets.Output() if output is None else output
    sliders = {name: _slider(f"{name}_ceiling", ceiling, factors[name], 1.0, 0.01)
               for name, ceiling in ceilings.items()}

    def redraw() -> None:
        chosen = {name: slider.value for name, slider in sliders.items()}
        try:
            levers = accounting.levers_frame(accounting.rank_levers(factors, chosen))
            _show(lambda ax: lever_ranking(levers, ax=ax), output, (7.5, 1.8 + 0.9 * len(chosen)))
        except DomainError as refusal:
            _refuse(output, refusal)

    return _box(list(sliders.values()), output, redraw)


def iso_goodput_explorer(grid: pd.DataFrame, factors: Mapping[str, float], *, ceiling: float,
                         levels: Sequence[float] | None = None, x: str = "program", y: str = "runtime",
                         output: Any = None) -> Any:
    """Move the ``x`` factor's ceiling; redraw the iso-MPG map with today, the ceiling and the break-even.

    Course notebook 04: the arrow runs from today to the ``x`` factor at its ceiling, then down the
    iso-MPG curve through today to the ``y`` value at which the trade breaks even
    (:func:`fleetlib.frontier.iso_goodput_curve`); the factors other than ``x`` and ``y`` stay fixed.

    Parameters
    ----------
    grid
        The goodput grid over ``x`` and ``y`` (:func:`fleetlib.frontier.iso_goodput_grid`), drawn as it is.
    factors
        Today's ``{"scheduling": S, "runtime": R, "program": P}``; its MPG is the bold curve.
    ceiling
        Initial ceiling of the ``x`` factor (the slider runs from today's value to 1).
    levels
        Contour levels (:func:`fleetlib.plots.iso_goodput`).
    x, y
        The factors on the horizontal and vertical axes.
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The slider above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib import accounting, frontier
    from fleetlib.plots import iso_goodput
    from fleetlib.quality import DomainError

    output = ipywidgets.Output() if output is None else output
    fixed = {name: value for name, value in factors.items() if name not in (x, y)}
    mpg_today = accounting.loss_shares(factors["scheduling"], factors["runtime"],
                                       factors["program"])["useful"]
    lever = _slider(f"{x}_ceiling", ceiling, factors[x], 1.0, 0.01)

    def redraw() -> None:
        try:
            # The slider never goes below today's x, so the break-even y never exceeds today's: reachable.
            (break_even,) = frontier.iso_goodput_curve(mpg_today, [lever.value], x_factor=x, y_factor=y,
                                                       fixed=fixed)[y]
            points = pd.DataFrame({
                "label": ["today", f"{x} ceiling", "break-even"],
                x: [factors[x], lever.value, lever.value],
                y: [factors[y], factors[y], break_even],
                "arrow_to": [f"{x} ceiling", "break-even", None],
            })
            _show(lambda ax: iso_goodput(grid, x=x, y=y, levels=levels, highlight=mpg_today, points=points,
                                         ax=ax), output, (6.4, 5.0))
        except DomainError as refusal:
            _refuse(output, refusal)

    return _box([lever], output, redraw)


def efficiency_frontier_explorer(strategies: pd.DataFrame, *, spot_price_fraction: float,
                                 spot_runtime_factor: float, cost_unit: str = "× baseline",
                                 output: Any = None) -> Any:
    """Reprice the spot tier; redraw the strategies at both prices and their frontier (course notebook 05).

    Parameters
    ----------
    strategies
        The elastic strategies (:func:`fleetlib.frontier.elastic_strategies`), priced at ``"fleet rate"``
        (1.0) and ``"spot"``.
    spot_price_fraction, spot_runtime_factor
        Initial spot price (fraction of the fleet rate) and share of spot held time that survives
        interruptions.
    cost_unit
        Unit of the cost axis (:func:`fleetlib.plots.efficiency_frontier`).
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The sliders above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib import frontier
    from fleetlib.plots import efficiency_frontier
    from fleetlib.quality import DomainError

    output = ipywidgets.Output() if output is None else output
    price = _slider("spot_price_fraction", spot_price_fraction, 0.05, 1.0, 0.05)
    survives = _slider("spot_runtime_factor", spot_runtime_factor, 0.3, 1.0, 0.05)

    def redraw() -> None:
        try:
            points = frontier.efficiency_frontier(strategies, {"fleet rate": 1.0, "spot": price.value},
                                                  runtime_factor={"spot": survives.value})
            _show(lambda ax: efficiency_frontier(points, cost_unit=cost_unit, ax=ax), output, (8.0, 4.8))
        except DomainError as refusal:
            _refuse(output, refusal)

    return _box([price, survives], output, redraw)


def runtime_loss_explorer(scenario: Mapping[str, Any], sweep_devices: Sequence[int], *, base_devices: int,
                          reference_loss: float | None = None, output: Any = None) -> Any:
    """Vary the data stall and the preemption rate; redraw runtime loss by job size (course notebook 06).

    Parameters
    ----------
    scenario
        The scenario's runtime-model parameters (:func:`fleetlib.scenario.runtime_model_inputs` reads
        them); its ``data_stall`` and ``preemptions_per_day`` are the sliders' initial values, its
        ``mtbf_h`` the MTBF at ``base_devices``.
    sweep_devices
        Job sizes to recompute (devices).
    base_devices
        Job size at which the scenario's MTBF was measured.
    reference_loss
        A cited runtime loss drawn as a reference line (:func:`fleetlib.plots.runtime_loss_by_size`).
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The sliders above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib import runtime
    from fleetlib.plots import runtime_loss_by_size
    from fleetlib.quality import DomainError
    from fleetlib.scenario import runtime_model_inputs

    output = ipywidgets.Output() if output is None else output
    stall = _slider("data_stall", scenario["data_stall"], 0.0, 0.2, 0.005)
    preemptions = _slider("preemptions_per_day", scenario["preemptions_per_day"], 0.0, 12.0, 0.5)

    def redraw() -> None:
        try:
            varied = runtime_model_inputs({**scenario, "data_stall": stall.value,
                                           "preemptions_per_day": preemptions.value})
            frame = runtime.runtime_loss_by_size(
                list(sweep_devices), base_devices=base_devices, mtbf_h_at_base=scenario["mtbf_h"],
                checkpoint_write_s=varied["checkpoint_write_s"], recovery_s=varied["recovery_s"],
                startup_s=varied["startup_s"], held_s=varied["held_s"], data_stall=varied["data_stall"],
                preemptions_per_s=varied["preemptions_per_s"],
                preemption_tax_s=runtime.preemption_tax_s(varied["lost_work_s"], varied["startup_s"]),
            )
            _show(lambda ax: runtime_loss_by_size(frame, reference_loss=reference_loss, ax=ax), output,
                  (10.0, 4.6))
        except DomainError as refusal:
            _refuse(output, refusal)

    return _box([stall, preemptions], output, redraw)


def serving_replica_explorer(cold_start_s: float, floor_s: float, *, lifetime_min: float, step_ms: float,
                             output: Any = None) -> Any:
    """Vary a replica's lifetime and measured decode step; redraw its runtime loss (course notebook 07).

    The figure shows the cold start's share of the replica's held time
    (:func:`fleetlib.runtime.serving_runtime_goodput`); under it one line gives the replica's R and its
    MBU against ``floor_s`` (:func:`fleetlib.program.mbu`).

    Parameters
    ----------
    cold_start_s
        Placement to ready: weight fetch, load and warm-up, seconds.
    floor_s
        The decode step's bandwidth floor (:func:`fleetlib.program.decode_floor`), seconds.
    lifetime_min
        Initial held time of the replica, minutes (the slider runs from 10 minutes to two days).
    step_ms
        Initial measured decode step, milliseconds (the slider runs from the floor to four times it).
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The sliders above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib import program, runtime
    from fleetlib.plots import RUNTIME_TERMS, runtime_terms_bar
    from fleetlib.quality import DomainError

    output = ipywidgets.Output() if output is None else output
    lifetime = _slider("lifetime_min", lifetime_min, 10.0, 2880.0, 10.0)
    floor_ms = floor_s * 1000.0
    step = _slider("step_ms", max(step_ms, floor_ms), floor_ms, 4.0 * floor_ms, 0.01)

    def redraw() -> None:
        try:
            r = runtime.serving_runtime_goodput(cold_start_s, lifetime.value * 60.0)
            terms = {name: 0.0 for name in RUNTIME_TERMS} | {"startup": 1.0 - r}
            _show(lambda ax: runtime_terms_bar(terms, ax=ax), output, (6.0, 3.2))
            _say(output, f"R = {r:.3f}   MBU = {float(program.mbu(floor_s, step.value / 1000.0)):.3f}")
        except DomainError as refusal:
            _refuse(output, refusal)

    return _box([lifetime, step], output, redraw)


def fix_composition_explorer(terms_s: Mapping[str, float], fixes: Mapping[str, Mapping[str, float]], *,
                             output: Any = None) -> Any:
    """Vary how much each program fix scales its term; redraw the step before, per fix and together.

    Course notebook 08: one slider per (fix, term) pair, from 0.1 to 1 (1 leaves the term alone); the
    bars are :func:`fleetlib.program.compose_fixes` drawn by :func:`fleetlib.plots.fleet_law_bars`.

    Parameters
    ----------
    terms_s
        The step's terms in seconds (:data:`fleetlib.program.FIX_TERMS`).
    fixes
        Initial ``{fix: {term: time multiplier}}``.
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.

    Returns
    -------
    ipywidgets.VBox
        The sliders above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib import program
    from fleetlib.plots import fleet_law_bars
    from fleetlib.quality import DomainError

    output = ipywidgets.Output() if output is None else output
    sliders = {(fix, term): _slider(f"{fix}: {term}", m, 0.1, 1.0, 0.05)
               for fix, scale in fixes.items() for term, m in scale.items()}

    def redraw() -> None:
        chosen: dict[str, dict[str, float]] = {}
        for (fix, term), slider in sliders.items():
            chosen.setdefault(fix, {})[term] = slider.value
        try:
            table = program.compose_fixes(terms_s, chosen)
            _show(lambda ax: fleet_law_bars(table, ax=ax), output, (10.0, 1.6 + 0.5 * len(table)))
        except DomainError as refusal:
            _refuse(output, refusal)

    return _box(list(sliders.values()), output, redraw)
