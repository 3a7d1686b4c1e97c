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
    from fleetlib.program import measure_step_traces, read_traces, synth_step_traces

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


# ---------------------------------------------------------------------------------------------------
# Course notebooks' explorers
# ---------------------------------------------------------------------------------------------------

#: The running example's inputs (parameters/running_example.yaml), as the course notebooks pass them.
RUNTIME_SCENARIO = {
    "held_days": 7.0, "startup_min": 5.2, "data_stall": 0.05 / 0.65, "checkpoint_write_s": 9.8,
    "mtbf_h": 302.0, "recovery_min": 6.2, "checkpoint_interval_min": 77.0, "preemptions_per_day": 1.0,
    "lost_work_per_preemption_min": 15.0,
}
FACTORS = {"scheduling": 0.65, "runtime": 0.90, "program": 0.48}
CEILINGS = {"scheduling": 0.80, "runtime": 0.98, "program": 0.65}


def _sliders(box) -> dict[str, object]:
    return {control.description: control for control in box.children[0].children}


def _captured(monkeypatch, name: str) -> list[dict]:
    """Record the keyword arguments (and first argument) of each call of ``fleetlib.plots.<name>``."""
    import fleetlib.plots

    calls: list[dict] = []
    real = getattr(fleetlib.plots, name)

    def record(data, **options):
        calls.append({"data": data, **options})
        return real(data, **options)

    monkeypatch.setattr(fleetlib.plots, name, record)
    return calls


def test_pool_snapshot_explorer(monkeypatch):
    box = widgets.pool_snapshot_explorer(RUNTIME_SCENARIO, program=0.48, assigned_share=0.80,
                                         incomplete_gang_share=0.15, input_wait_share=0.05)
    assert isinstance(box, ipywidgets.VBox) and isinstance(box.children[1], ipywidgets.Output)
    sliders = _sliders(box)
    assert list(sliders) == ["assigned_share", "incomplete_gang_share", "input_wait_share"]
    assert [s.value for s in sliders.values()] == [0.80, 0.15, 0.05]
    assert _redraws(box, sliders["assigned_share"], 0.9, monkeypatch) == 2
    assert _redraws(box, sliders["input_wait_share"], 0.1, monkeypatch) == 2


def test_pool_snapshot_explorer_draws_the_derived_chain(monkeypatch):
    from fleetlib import accounting
    from fleetlib.scenario import runtime_terms
    from fleetlib.scheduling import snapshot

    calls = _captured(monkeypatch, "factor_chain")
    widgets.pool_snapshot_explorer(RUNTIME_SCENARIO, program=0.48, assigned_share=0.80,
                                   incomplete_gang_share=0.15, input_wait_share=0.05)
    pool = snapshot.snapshot_scheduling_goodput(0.80, 0.15)
    terms = runtime_terms(RUNTIME_SCENARIO, data_stall=snapshot.data_stall_from_capacity_share(0.05, pool))
    expected = {"scheduling": pool.S, "runtime": terms.runtime_goodput, "program": 0.48}
    expected["mpg"] = accounting.loss_shares(*expected.values())["useful"]
    assert [c["data"] for c in calls] == [expected]


def test_pool_snapshot_explorer_prints_a_refusal(monkeypatch, capsys):
    box = widgets.pool_snapshot_explorer(RUNTIME_SCENARIO, program=0.48, assigned_share=0.80,
                                         incomplete_gang_share=0.15, input_wait_share=0.05)
    sliders = _sliders(box)
    sliders["incomplete_gang_share"].value = 0.45
    capsys.readouterr()
    # More capacity held by incomplete gangs than is assigned: no figure, the refusal instead.
    assert _redraws(box, sliders["assigned_share"], 0.3, monkeypatch) == 0
    assert "refused: incomplete-gang share" in capsys.readouterr().out  # no kernel: Output prints through
    assert plt.get_fignums() == []


def test_capacity_cost_explorer(monkeypatch, capsys):
    from fleetlib import accounting

    reference = accounting.loss_shares(1.0, 0.90, 0.41)
    box = widgets.capacity_cost_explorer(FACTORS, price_per_device_hour=2.0, reference=reference)
    sliders = _sliders(box)
    assert {name: s.value for name, s in sliders.items()} == FACTORS
    assert f"cost of a useful hour: ${accounting.cost_per_useful_hour(2.0, 0.65, 0.90, 0.48):.2f}" in (
        capsys.readouterr().out)
    assert _redraws(box, sliders["program"], 0.65, monkeypatch) == 2
    assert f"${accounting.cost_per_useful_hour(2.0, 0.65, 0.90, 0.65):.2f}" in capsys.readouterr().out


def test_lever_explorer(monkeypatch):
    from fleetlib import accounting

    calls = _captured(monkeypatch, "lever_ranking")
    box = widgets.lever_explorer(FACTORS, CEILINGS)
    sliders = _sliders(box)
    assert list(sliders) == ["scheduling_ceiling", "runtime_ceiling", "program_ceiling"]
    assert [(s.min, s.value) for s in sliders.values()] == [(0.65, 0.80), (0.90, 0.98), (0.48, 0.65)]
    expected = accounting.levers_frame(accounting.rank_levers(FACTORS, CEILINGS))
    assert calls[0]["data"].equals(expected)
    monkeypatch.undo()
    assert _redraws(box, sliders["program_ceiling"], 0.5, monkeypatch) == 2


def test_iso_goodput_explorer(monkeypatch):
    import pandas as pd

    from fleetlib import accounting, frontier

    grid = frontier.iso_goodput_grid("program", "runtime", fixed={"scheduling": 0.65}, x_range=(0.2, 1.0),
                                     y_range=(0.3, 1.0), n=21)
    calls = _captured(monkeypatch, "iso_goodput")
    box = widgets.iso_goodput_explorer(grid, FACTORS, ceiling=0.65, levels=[0.2, 0.3])
    (slider,) = box.children[0].children
    assert (slider.min, slider.value) == (0.48, 0.65)
    mpg = accounting.loss_shares(0.65, 0.90, 0.48)["useful"]
    (break_even,) = frontier.iso_goodput_curve(mpg, [0.65], fixed={"scheduling": 0.65})["runtime"]
    # The points the notebook's static figure draws.
    expected = pd.DataFrame({
        "label": ["today", "program ceiling", "break-even"],
        "program": [0.48, 0.65, 0.65],
        "runtime": [0.90, 0.90, break_even],
        "arrow_to": ["program ceiling", "break-even", None],
    })
    (call,) = calls
    pd.testing.assert_frame_equal(call["points"], expected)
    assert call["highlight"] == mpg and call["levels"] == [0.2, 0.3]
    monkeypatch.undo()
    assert _redraws(box, slider, 1.0, monkeypatch) == 2


def test_iso_goodput_explorer_on_other_axes(monkeypatch):
    from fleetlib import frontier

    grid = frontier.iso_goodput_grid("runtime", "program", fixed={"scheduling": 0.65}, n=11)
    calls = _captured(monkeypatch, "iso_goodput")
    box = widgets.iso_goodput_explorer(grid, FACTORS, ceiling=0.98, x="runtime", y="program")
    (call,) = calls
    assert (call["x"], call["y"]) == ("runtime", "program")
    assert list(call["points"]["label"]) == ["today", "runtime ceiling", "break-even"]
    assert call["points"]["program"].iloc[-1] == pytest.approx(0.90 * 0.48 / 0.98)
    (slider,) = box.children[0].children
    assert slider.description == "runtime_ceiling" and slider.min == 0.90


def test_efficiency_frontier_explorer(monkeypatch):
    from fleetlib import frontier

    strategies = frontier.elastic_strategies(
        target_devices=512, small_devices=128, step_devices=256, wait_h=4.0, step_up_h=4.0,
        rescale_pause_min=10.0, efficiency={256: 0.90, 512: 0.80}, window_h=24.0)
    calls = _captured(monkeypatch, "efficiency_frontier")
    box = widgets.efficiency_frontier_explorer(strategies, spot_price_fraction=0.35, spot_runtime_factor=0.9,
                                               cost_unit="x fleet-rate cost")
    expected = frontier.efficiency_frontier(strategies, {"fleet rate": 1.0, "spot": 0.35},
                                            runtime_factor={"spot": 0.9})
    assert calls[0]["data"].equals(expected) and calls[0]["cost_unit"] == "x fleet-rate cost"
    monkeypatch.undo()
    sliders = _sliders(box)
    assert _redraws(box, sliders["spot_price_fraction"], 0.6, monkeypatch) == 2
    assert _redraws(box, sliders["spot_runtime_factor"], 0.5, monkeypatch) == 2


def test_runtime_loss_explorer(monkeypatch):
    from fleetlib.runtime import model
    from fleetlib.scenario import runtime_model_inputs

    sizes = [128, 1024, 16384]
    calls = _captured(monkeypatch, "runtime_loss_by_size")
    box = widgets.runtime_loss_explorer(RUNTIME_SCENARIO, sizes, base_devices=128, reference_loss=0.10)
    inputs = runtime_model_inputs(RUNTIME_SCENARIO)
    # The sweep the notebook's static figure draws.
    expected = model.runtime_loss_by_size(
        sizes, base_devices=128, mtbf_h_at_base=302.0, checkpoint_write_s=inputs["checkpoint_write_s"],
        recovery_s=inputs["recovery_s"], startup_s=inputs["startup_s"], held_s=inputs["held_s"],
        data_stall=inputs["data_stall"], preemptions_per_s=inputs["preemptions_per_s"],
        preemption_tax_s=model.preemption_tax_s(inputs["lost_work_s"], inputs["startup_s"]))
    assert calls[0]["data"].equals(expected) and calls[0]["reference_loss"] == 0.10
    monkeypatch.undo()
    sliders = _sliders(box)
    assert [s.value for s in sliders.values()] == [RUNTIME_SCENARIO["data_stall"], 1.0]
    assert _redraws(box, sliders["data_stall"], 0.0, monkeypatch) == 2
    assert _redraws(box, sliders["preemptions_per_day"], 12.0, monkeypatch) == 2


@pytest.mark.parametrize(("env", "requested", "expected"), [
    (None, True, True), (None, False, False), ("1", True, False), ("true", True, False),
    ("0", True, True), ("", True, True), ("1", False, False),
])
def test_interactive_allowed_only_outside_a_batch_run(env, requested, expected, monkeypatch, capsys) -> None:
    from fleetlib.widgets import BATCH_ENV, interactive_allowed

    if env is None:
        monkeypatch.delenv(BATCH_ENV, raising=False)
    else:
        monkeypatch.setenv(BATCH_ENV, env)
    assert interactive_allowed(requested) is expected
    said = capsys.readouterr().out
    assert ("interactive controls left out" in said) == (requested and not expected)


def test_serving_replica_explorer(monkeypatch):
    calls = _captured(monkeypatch, "runtime_terms_bar")
    box = widgets.serving_replica_explorer(342.0, 0.005, lifetime_min=60.0, step_ms=8.0)
    # 5.7 min of cold start in an hour held: the startup share is 342 / 3600 (hand computation).
    assert calls[0]["data"]["startup"] == pytest.approx(342.0 / 3600.0)
    assert sum(calls[0]["data"].values()) == pytest.approx(342.0 / 3600.0)
    monkeypatch.undo()
    sliders = _sliders(box)
    assert [s.value for s in sliders.values()] == [60.0, 8.0]
    assert sliders["step_ms"].min == pytest.approx(5.0)
    assert _redraws(box, sliders["lifetime_min"], 1440.0, monkeypatch) == 2


def test_fix_composition_explorer(monkeypatch):
    from fleetlib import program

    terms = {"data": 0.06, "compute": 0.11, "comm": 0.175, "overhead": 0.01}
    fixes = {"FP8": {"compute": 0.5}, "compression": {"comm": 0.5}}
    calls = _captured(monkeypatch, "fleet_law_bars")
    box = widgets.fix_composition_explorer(terms, fixes)
    assert calls[0]["data"].equals(program.compose_fixes(terms, fixes))
    monkeypatch.undo()
    sliders = _sliders(box)
    assert list(sliders) == ["FP8: compute", "compression: comm"]
    assert _redraws(box, sliders["FP8: compute"], 0.8, monkeypatch) == 2
