"""Scenario files: strict loading of typed literals, and the summary of the running example."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.quality import DomainError, InputError
from fleetlib.scenario import (
    RUNTIME_MODEL_KEYS,
    load_parameters,
    runtime_model_inputs,
    runtime_terms,
    scenario_summary,
)

ROOT = Path(__file__).resolve().parents[2]
RUNNING = ROOT / "parameters" / "running_example.yaml"
LLAMA3 = ROOT / "parameters" / "llama3_405b.yaml"


@pytest.fixture(scope="module")
def running() -> dict:
    return load_parameters(RUNNING)


@pytest.fixture(scope="module")
def summary(running) -> dict:
    return scenario_summary(running)


# --- load_parameters --------------------------------------------------------------------------------


def test_running_example_loads_typed_values(running):
    assert running["scenario_name"] == "running_example"
    assert running["scheduling_goodput"] == 0.65
    assert running["devices"] == 128 and isinstance(running["devices"], int)
    assert running["sweep_devices"][0] == 128 and running["sweep_devices"][-1] == 16384
    assert next(iter(running)) == "scenario_name"  # file order is kept


def test_exponent_without_a_dot_is_a_number(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("rate: 1e-3\nbig: 2E6\nname: x1e3\n")
    params = load_parameters(f)
    assert params["rate"] == 0.001 and isinstance(params["rate"], float)
    assert params["big"] == 2e6
    assert params["name"] == "x1e3"


@pytest.mark.parametrize(
    ("text", "key", "what"),
    [
        ("a: 1\nwindow_label:\n", "window_label", "null"),
        ("nested:\n  x: 1\n", "nested", "mapping"),
        ("when: 2024-01-01\n", "when", "date"),
        ("sizes: [1, two, 3]\n", "sizes", "list"),
        ("flags: [true, false]\n", "flags", "list"),
        ("mtbf_h: .inf\n", "mtbf_h", "finite"),
        ("stall: .nan\n", "stall", "finite"),
        ("sizes: [1, .nan]\n", "sizes", "finite"),
        ("1: one\n", "1", "identifier"),
    ],
)
def test_bad_types_raise_input_error_naming_file_and_key(tmp_path, text, key, what):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=what) as info:
        load_parameters(f)
    assert info.value.file == str(f)
    assert info.value.field == key
    assert "bad.yaml" in str(info.value) and repr(key) in str(info.value)


@pytest.mark.parametrize(
    ("text", "what"),
    [("", "empty"), ("- 1\n- 2\n", "mapping"), ("a: [1, 2\n", "YAML"), ("just text\n", "mapping")],
)
def test_files_that_are_not_mappings(tmp_path, text, what):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=what):
        load_parameters(f)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_parameters(tmp_path / "nope.yaml")


# --- scenario_summary -------------------------------------------------------------------------------


def test_summary_product_table_8(summary):
    assert summary["scenario"] == {"name": "running_example",
                                   "title": "Llama 2 70B on 128 H100 GPUs, shared pool"}
    assert summary["mpg"] == pytest.approx(0.65 * 0.90 * 0.48, rel=1e-12)
    assert round(summary["mpg"], 4) == 0.2808
    assert summary["job_product"] == pytest.approx(0.432, rel=1e-12)
    assert summary["loss_shares"]["runtime"] == pytest.approx(0.65 * 0.10, rel=1e-12)
    assert summary["marginal_value"]["program"] == pytest.approx(0.65 * 0.90, rel=1e-12)
    assert summary["windows_mixed"] is False


def test_summary_factors_carry_the_scenario_window(summary, running):
    for boundary, factor in summary["factors"].items():
        assert factor["boundary"] == boundary
        assert factor["value"] == running[f"{boundary}_goodput"]
        assert factor["window"]["label"] == running["window_label"]
        assert factor["record"] == "stated in the scenario file"
    assert summary["window"]["label"] == running["window_label"]


def test_summary_lever_ranking(summary):
    order = [lever["factor"] for lever in summary["lever_ranking"]]
    assert order == ["program", "scheduling", "runtime"]
    program = summary["lever_ranking"][0]
    assert program["relative_gain"] == pytest.approx(0.65 / 0.48 - 1, rel=1e-12)
    assert program["rank"] == 1
    # Ranked by relative gain, not by loss share: scheduling has the largest share but ranks second.
    shares = {lever["factor"]: lever["loss_share"] for lever in summary["lever_ranking"]}
    assert max(shares, key=shares.get) == "scheduling"


def test_summary_cost(summary):
    assert round(summary["cost_per_useful_hour"], 2) == 7.12
    assert summary["cost_per_useful_hour"] == pytest.approx(2 / (0.65 * 0.9 * 0.48), rel=1e-12)
    assert summary["held_hours_chargeback"] == pytest.approx(2 / (0.9 * 0.48), rel=1e-12)


def test_summary_runtime_model_terms(summary):
    terms = summary["runtime_model"]
    # Napkin Math 9.3, recomputed by hand from the running example's inputs.
    held_s, mtbf_s, tau_s = 7 * 86400, 302 * 3600, 77 * 60
    assert terms["startup"] == pytest.approx(5.2 * 60 / held_s, rel=1e-12)
    assert terms["input_wait"] == 0.05 / 0.65
    assert terms["checkpoint"] == pytest.approx(9.8 / tau_s + tau_s / (2 * mtbf_s), rel=1e-12)
    assert terms["recovery"] == pytest.approx(6.2 * 60 / mtbf_s, rel=1e-12)
    assert terms["preemption"] == pytest.approx((15 + 5.2) * 60 / 86400, rel=1e-12)
    assert terms["runtime_goodput"] == pytest.approx(0.904, abs=5e-4)
    assert summary["runtime_model_inputs"]["preemption_tax_s"] == pytest.approx(20.2 * 60)


def test_summary_is_plain_json(summary):
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text) == summary

    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        else:
            assert x is None or type(x) in (str, int, float, bool), type(x)
            if isinstance(x, float):
                assert math.isfinite(x)

    walk(summary)


def test_llama3_summary():
    s = scenario_summary(load_parameters(LLAMA3))
    assert s["mpg"] == pytest.approx(1.0 * 0.90 * 0.41, rel=1e-12)
    assert s["cost_per_useful_hour"] == pytest.approx(2 / 0.369, rel=1e-12)
    # A dedicated cluster: the scheduling lever is already at its ceiling, so it gains nothing.
    gains = {lever["factor"]: lever["relative_gain"] for lever in s["lever_ranking"]}
    assert gains["scheduling"] == 0.0
    assert s["runtime_model"]["preemption"] == 0.0


def test_summary_missing_key_names_it(running):
    params = dict(running)
    del params["price_per_device_hour"]
    with pytest.raises(InputError, match="price_per_device_hour"):
        scenario_summary(params)


def test_summary_text_where_a_number_is_needed(running):
    params = {**running, "mtbf_h": "302 h"}
    with pytest.raises(InputError, match="mtbf_h"):
        scenario_summary(params)


def test_summary_refuses_out_of_domain_values(running):
    with pytest.raises(DomainError, match="scheduling"):
        scenario_summary({**running, "scheduling_goodput": 1.3})
    with pytest.raises(DomainError, match="ceiling"):
        scenario_summary({**running, "program_ceiling": 0.3})


def test_runtime_model_inputs_units(running):
    inputs = runtime_model_inputs(running)
    assert inputs["held_s"] == 7 * 86400
    assert inputs["mtbf_s"] == 302 * 3600
    assert inputs["preemptions_per_s"] == pytest.approx(1 / 86400)
    assert inputs["interval_s"] == 77 * 60


# --- runtime_terms --------------------------------------------------------------------------------


def test_runtime_terms_match_equation_4_by_hand(running):
    t = runtime_terms(running)
    held_s, mtbf_s, tau_s = 7 * 86400, 302 * 3600, 77 * 60
    tax_s = (15 + 5.2) * 60  # lost work + one restart
    assert t.startup == pytest.approx(5.2 * 60 / held_s, rel=1e-12)
    assert t.input_wait == 0.05 / 0.65
    assert t.checkpoint_write == pytest.approx(9.8 / tau_s, rel=1e-12)
    assert t.checkpoint_rework == pytest.approx(tau_s / (2 * mtbf_s), rel=1e-12)
    assert t.recovery == pytest.approx(6.2 * 60 / mtbf_s, rel=1e-12)
    assert t.preemption == pytest.approx(tax_s / 86400, rel=1e-12)
    assert t.interval_s == tau_s
    assert t.total == pytest.approx(sum(t.terms().values()), rel=1e-12)
    assert round(t.runtime_goodput, 3) == 0.904  # Napkin Math 9.3: "about 0.90"
    assert t.warnings == ()
    # The report's summary uses the same helper, so the two cannot drift apart.
    assert scenario_summary(running)["runtime_model"] == t.to_dict()


def test_runtime_terms_overrides_are_scenario_keys_in_scenario_units(running):
    # The chapter's uncapped low-priority run: 12 evictions a day at 20.2 min each -> 16.8 %.
    uncapped = runtime_terms(running, preemptions_per_day=12.0)
    assert uncapped.preemption == pytest.approx(12 * 20.2 * 60 / 86400, rel=1e-12)
    assert round(uncapped.preemption, 3) == 0.168
    assert len(uncapped.warnings) == 1 and "preemption" in uncapped.warnings[0]
    # A one-hour job: the 5.2-minute cold start is about 9 % of held time.
    one_hour = runtime_terms(running, held_days=1 / 24)
    assert one_hour.startup == pytest.approx(5.2 / 60, rel=1e-12)
    # Only the overridden term moves.
    base = runtime_terms(running)
    assert one_hour.checkpoint == base.checkpoint and one_hour.preemption == base.preemption
    # Input waits removed: the runtime ceiling of section 9.8.1.
    assert round(runtime_terms(running, data_stall=0.0).runtime_goodput, 2) == 0.98
    assert running["preemptions_per_day"] == 1.0 and running["held_days"] == 7.0  # params untouched


def test_runtime_terms_refuses_unknown_overrides(running):
    with pytest.raises(DomainError, match="'preemption_per_day'"):
        runtime_terms(running, preemption_per_day=12.0)
    with pytest.raises(DomainError, match="held_days"):  # the message lists the keys it accepts
        runtime_terms(running, price_per_device_hour=3.0)


def test_runtime_terms_missing_or_bad_inputs(running):
    params = {k: v for k, v in running.items() if k != "mtbf_h"}
    with pytest.raises(InputError, match="mtbf_h"):
        runtime_terms(params)
    with pytest.raises(InputError, match="data_stall"):
        runtime_terms(running, data_stall="7.7 %")
    with pytest.raises(DomainError, match="data_stall"):
        runtime_terms(running, data_stall=1.0)
    with pytest.raises(DomainError, match="MTBF"):  # a 77-min interval against a 1-hour MTBF
        runtime_terms(running, mtbf_h=1.0)


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(min_value=0.0, max_value=6.0), stall=st.floats(min_value=0.0, max_value=0.5))
def test_runtime_terms_preemption_is_linear_and_stall_passes_through(running, rate, stall):
    t = runtime_terms(running, preemptions_per_day=rate, data_stall=stall)
    assert t.preemption == pytest.approx(rate * 20.2 * 60 / 86400, rel=1e-12, abs=1e-15)
    assert t.input_wait == stall
    assert t.runtime_goodput == pytest.approx(1 - sum(t.terms().values()), rel=1e-12)


def test_runtime_model_keys_are_what_runtime_model_inputs_reads(running):
    subset = {k: running[k] for k in RUNTIME_MODEL_KEYS}
    assert runtime_model_inputs(subset) == runtime_model_inputs(running)
    for key in RUNTIME_MODEL_KEYS:
        with pytest.raises(InputError, match=key):
            runtime_model_inputs({k: v for k, v in subset.items() if k != key})


# --- what the scenario files say --------------------------------------------------------------------


def test_running_example_data_stall_is_the_unrounded_ratio(running):
    from fleetlib.runtime.model import crossover_devices

    assert running["data_stall"] == 0.05 / 0.65
    kwargs = {"base_devices": running["devices"], "mtbf_h_at_base": running["mtbf_h"],
              "checkpoint_write_s": running["checkpoint_write_s"], "recovery_s": running["recovery_min"] * 60}
    # Figure 5's crossover (reference case fig_5_runtime_loss_vs_job_size computes 12,857.1).
    assert round(crossover_devices(data_stall=running["data_stall"], **kwargs)) == 12857
    # The rounded 0.0769 would move it by five GPUs: the reason the file keeps full precision.
    assert round(crossover_devices(data_stall=0.0769, **kwargs)) == 12852


def test_llama3_program_inputs_are_the_labelled_reconstruction():
    from fleetlib.program import flops

    p = load_parameters(LLAMA3)
    useful_flops = p["useful_pflop_per_step"] * 1e15
    assert useful_flops == pytest.approx(6 * 405e9 * 16e6, rel=1e-12)  # 6 N x 16M tokens per step
    peak = p["peak_tflops_per_device"] * 1e12
    fleet = flops.mfu(useful_flops, p["devices"], peak, p["step_time_ms"] / 1e3)
    baseline = flops.mfu(useful_flops, p["devices"], peak, p["node_step_time_ms"] / 1e3)
    # Back-solved, so they reproduce the reported MFUs (0.41 at 16,384 GPUs, 0.43 at 8,192) by construction;
    # the step times are given to 0.1 ms, so agreement is to about 1e-5.
    assert fleet == pytest.approx(p["program_goodput"], abs=1e-5)
    assert fleet == pytest.approx(0.41, abs=1e-5)
    assert baseline == pytest.approx(p["program_ceiling"], abs=1e-5)
    assert baseline == pytest.approx(0.43, abs=1e-5)
    # Not the running example's 14.9 PFLOP / 245 ms, which gave an MFU of 0.004 on 16,384 devices.
    assert fleet > 100 * flops.mfu(14.9e15, p["devices"], peak, 0.245)


@pytest.mark.parametrize("path", [RUNNING, LLAMA3], ids=lambda p: p.stem)
def test_spot_runtime_factor_reproduces_figure_12(path):
    from fleetlib.frontier import efficiency_frontier, elastic_strategies

    p = load_parameters(path)
    factor = p["spot_runtime_factor"]
    assert factor == 0.9 and isinstance(factor, float)
    strategies = elastic_strategies(
        target_devices=p["elastic_target_devices"], small_devices=p["elastic_small_devices"],
        step_devices=p["elastic_step_devices"], wait_h=p["elastic_wait_h"], step_up_h=p["elastic_step_up_h"],
        rescale_pause_min=p["elastic_rescale_pause_min"],
        efficiency={p["elastic_step_devices"]: p["elastic_efficiency_256"],
                    p["elastic_target_devices"]: p["elastic_efficiency_512"]},
        window_h=p["elastic_window_h"],
    )
    tiers = {"fleet": 1.0, "spot": p["spot_price_fraction"]}

    def frontier(f):
        frame = efficiency_frontier(strategies, tiers, runtime_factor={"spot": f})
        return set(map(tuple, frame.loc[frame["on_frontier"], ["tier", "label"]].to_numpy().tolist()))

    spot_all = {("spot", "small now"), ("spot", "wait for full"), ("spot", "step up")}
    chapter = spot_all | {("fleet", "wait for full")}  # every spot point and only the fastest fleet point
    assert frontier(factor) == chapter
    # The range the file's comment states: from 20/33.5 (about 0.597) up to, not including, 1.
    threshold = 20 / 33.5
    assert frontier(threshold) == chapter
    assert frontier(threshold - 1e-6) != chapter
    assert frontier(1.0) == spot_all
