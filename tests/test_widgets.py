"""fleetlib.widgets: each explorer returns a widget and redraws when a control changes (no front end)."""

from __future__ import annotations

import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

ipywidgets = pytest.importorskip("ipywidgets")

from fleetlib import widgets  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _redraws(box, control, value, monkeypatch) -> int:
    """Change ``control`` to ``value`` and count the figures drawn (each redraw shows one)."""
    drawn = []
    monkeypatch.setattr(widgets, "_show", lambda draw, output, figsize: drawn.append(draw(plt.gca())))
    control.value = value
    box.redraw()
    return len(drawn)


def test_import_loads_no_widget_library():
    code = ("import sys, fleetlib.widgets; "
            "assert 'ipywidgets' not in sys.modules and 'IPython' not in sys.modules, sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr


def test_scheduling_explorer(monkeypatch):
    from fleetlib.scheduling import scheduling_partition, synthetic_fleet

    fleet = synthetic_fleet(300, seed=1)
    partition = scheduling_partition(fleet.allocations, fleet.capacity, reservations=fleet.reservations)
    box = widgets.scheduling_explorer(partition)
    assert isinstance(box, ipywidgets.VBox) and isinstance(box.children[1], ipywidgets.Output)
    pool, _view, denominator = box.children[0].children
    assert list(pool.options) == [widgets.ALL_POOLS, *partition.pools]
    assert _redraws(box, pool, partition.pools[0], monkeypatch) == 2  # the observer and the direct call
    assert _redraws(box, denominator, "installed", monkeypatch) == 2


def test_timeline_explorer(monkeypatch):
    from fleetlib.runtime.goodput import runtime_goodput
    from fleetlib.runtime.synth import synth_timeline
    from fleetlib.runtime.views import cumulative_series

    steps, events, _ = synth_timeline(2000, seed=3, step_s=0.5, failure_rate_per_h=2.0,
                                      checkpoint_every_steps=200)
    whole = runtime_goodput(steps, events, fault_free_step_s=0.5)
    series = cumulative_series(steps, events, start=whole.window_start, end=whole.window_end, points=20,
                               fault_free_step_s=0.5)
    box = widgets.timeline_explorer(steps, events, series, start=whole.window_start, end=whole.window_end,
                                    window_min=30.0, restarts=whole.interruptions[["time", "kind"]],
                                    fault_free_step_s=0.5)
    (slider,) = box.children[0].children
    assert slider.value == 30.0
    assert _redraws(box, slider, 60.0, monkeypatch) == 2


def test_straggler_explorer(monkeypatch):
    from fleetlib.program.synth import synth_step_traces
    from fleetlib.program.traces import read_traces
    from fleetlib.program.views import measure_step_traces

    with tempfile.TemporaryDirectory() as folder:
        synth_step_traces(folder, ranks=3, steps=2, seed=0, straggler_rank=1)
        traces = read_traces(folder, cache=False, progress=False)
    _matched, waits, partition = measure_step_traces(traces.kernels, traces.steps)
    box = widgets.straggler_explorer(waits, partition, threshold=0.75)
    (slider,) = box.children[0].children
    assert _redraws(box, slider, 0.9, monkeypatch) == 2


def test_redraw_draws_into_its_output_without_a_front_end():
    from fleetlib.scheduling import scheduling_partition, synthetic_fleet

    fleet = synthetic_fleet(200, seed=2)
    partition = scheduling_partition(fleet.allocations, fleet.capacity)
    output = ipywidgets.Output()
    box = widgets.scheduling_explorer(partition, view="cross_pool", output=output)
    assert box.children[1] is output
    box.redraw()  # draws, displays and closes its figure
    assert plt.get_fignums() == []
