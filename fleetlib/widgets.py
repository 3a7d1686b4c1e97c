"""ipywidgets wiring for the rung notebooks: one explorer per notebook's interactive view.

Each function takes data the library already computed and a redraw target (an
:class:`ipywidgets.Output`, created when omitted), builds the controls, draws the figure once into the
target and redraws it whenever a control changes.  It returns the widget box; the notebook displays it
*under* the static figure it drew first.

Nothing here runs at import: ``ipywidgets``, ``IPython`` and matplotlib's pyplot are imported inside the
functions, so ``import fleetlib.widgets`` works where they are not loaded.  No function waits on a kernel
comm, so under papermill or nbval (no front end) each returns at once; the widget state is simply
recorded.  The redraw callable is kept as the box's ``redraw`` attribute (tests call it directly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

__all__ = ["scheduling_explorer", "straggler_explorer", "timeline_explorer"]

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
        The cumulative series (:func:`fleetlib.runtime.views.cumulative_series`), drawn as it is.
    start, end
        Bounds of the windows (the measurement's ``window_start`` / ``window_end``).
    window_min
        Initial window length, minutes (the slider runs from 10 to 240).
    restarts
        Restart markers (``time``, ``kind``), e.g. ``measurement.interruptions[["time", "kind"]]``.
    output
        The :class:`ipywidgets.Output` to redraw into; a new one when omitted.
    **options
        Passed to :func:`fleetlib.runtime.views.rolling_windows` (``fault_free_step_s``, ...).

    Returns
    -------
    ipywidgets.VBox
        The slider above the figure; ``.redraw()`` draws the current choice again.
    """
    import ipywidgets

    from fleetlib.plots import cumulative_goodput
    from fleetlib.runtime.views import rolling_windows

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
    from fleetlib.program.collectives import straggler_report

    output = ipywidgets.Output() if output is None else output
    level = ipywidgets.FloatSlider(value=float(threshold), min=0.5, max=1.0, step=0.01,
                                   description="threshold")

    def redraw() -> None:
        report = straggler_report(waits, partition, threshold=level.value)
        _show(lambda ax: straggler_bars(report, value="relative_score", threshold=level.value, ax=ax), output,
              (7.0, 3.8))

    return _box([level], output, redraw)
