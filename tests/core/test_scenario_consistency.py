"""Values a scenario states twice agree: each comment that promises two values match is checked here.

Values that restate another one *exactly* are not stated at all: ``load_parameters`` derives them
(``fleetlib.scenario.DERIVED_PARAMETERS``).  What is left are values that restate another one after rounding,
or through a formula the file's comment names; each test below names the comment it holds to account.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from fleetlib.program import flops
from fleetlib.runtime.model import young_interval_s
from fleetlib.scenario import DERIVED_PARAMETERS, load_parameters, runtime_terms

ROOT = Path(__file__).resolve().parents[2]
PARAMETERS = ROOT / "parameters"
SCENARIOS = {p.stem: load_parameters(p) for p in sorted(PARAMETERS.glob("*.yaml"))}
BOTH = pytest.mark.parametrize("name", sorted(SCENARIOS))


def two_significant(x: float) -> float:
    return float(f"{x:.2g}")


def mfu(params: dict, step_ms: float) -> float:
    return flops.mfu(params["useful_pflop_per_step"] * 1e15, params["devices"],
                     params["peak_tflops_per_device"] * 1e12, step_ms / 1e3)


def test_both_scenarios_are_checked():
    assert sorted(SCENARIOS) == ["llama3_405b", "running_example"]


@BOTH
def test_derived_values_follow_their_sources(name):
    p = SCENARIOS[name]
    assert p["data_stall"] == p["input_wait_share"] / p["scheduling_goodput"]
    assert p["timeline_synth_checkpoint_write_s"] == p["checkpoint_write_s"]
    assert {d.key for d in DERIVED_PARAMETERS} == {"data_stall", "timeline_synth_checkpoint_write_s"}


@BOTH
def test_identity_matches_the_file_and_the_title(name):
    p = SCENARIOS[name]
    assert p["scenario_name"] == name
    assert f"{p['devices']:,} H100" in p["scenario_title"]  # "128 H100 GPUs", "16,384 H100 GPUs"
    assert p["devices"] % p["devices_per_node"] == 0
    # traces_decode_n_params: "this scenario's 70B" / "Llama 3 405B".
    assert f"{p['traces_decode_n_params'] / 1e9:g}B" in p["scenario_title"]


@BOTH
def test_scheduling_factor_and_ceiling_follow_the_snapshot(name):
    p = SCENARIOS[name]
    # S counts complete allocations only: assigned capacity less the partial gangs (rule 6).
    complete = p["assigned_share"] - p["incomplete_gang_share"]
    assert p["scheduling_goodput"] == pytest.approx(complete, abs=1e-12)
    # The scheduling ceiling: no partial-gang holds, so everything assigned is complete.
    assert p["scheduling_ceiling"] == p["assigned_share"]


@BOTH
def test_program_factor_and_ceiling_are_the_stated_mfus(name):
    p = SCENARIOS[name]
    # "The napkin notebook derives each one from the inputs below": MFU at the fleet's and the node's step.
    assert round(mfu(p, p["step_time_ms"]), 2) == p["program_goodput"]
    assert round(mfu(p, p["node_step_time_ms"]), 2) == p["program_ceiling"]
    # The peak is the named device's dense BF16 rate, the device the title names.
    peak = flops.PEAK_RATES["H100 SXM"]
    assert p["peak_tflops_per_device"] == peak.dense_tflops and peak.precision == "BF16"
    assert p["traces_decode_accelerator"] == "H100 SXM"


def test_running_example_runtime_factor_and_ceiling_are_equation_4():
    p = SCENARIOS["running_example"]
    assert round(runtime_terms(p).runtime_goodput, 2) == p["runtime_goodput"]  # 0.904: "about 0.90"
    # The runtime ceiling: input waits eliminated.
    assert round(runtime_terms(p, data_stall=0.0).runtime_goodput, 2) == p["runtime_ceiling"]


@BOTH
def test_checkpoint_interval_is_youngs_optimum_rounded(name):
    p = SCENARIOS[name]
    optimum_min = young_interval_s(p["checkpoint_write_s"], p["mtbf_h"] * 3600.0) / 60.0
    assert two_significant(optimum_min) == p["checkpoint_interval_min"]  # 76.9 -> 77, 6.80 -> 6.8


def test_llama3_mtbf_is_the_running_example_scaled_by_device_count():
    running, llama = SCENARIOS["running_example"], SCENARIOS["llama3_405b"]
    # "302 h x 128 / 16,384": the failure-rate assumption of figure 5.
    assert llama["mtbf_h"] == running["mtbf_h"] * running["devices"] / llama["devices"]


@BOTH
def test_synthetic_timeline_restates_the_scenario(name):
    p = SCENARIOS[name]
    # timeline_synth_step_s: "fault-free step time, seconds: this scenario's step_time_ms".
    assert p["timeline_synth_step_s"] == pytest.approx(p["step_time_ms"] / 1e3, rel=1e-12)
    # timeline_synth_input_wait_prob: a share p of steps waits 0.2 steps on average (the synthetic job's
    # default mean wait, fleetlib.runtime.synth), a steady-state stall p*0.2 / (1 + p*0.2) "of about"
    # this scenario's data_stall (0.0775 against 0.0769 in the running example).
    waited = p["timeline_synth_input_wait_prob"] * 0.2
    assert waited / (1 + waited) == pytest.approx(p["data_stall"], abs=1e-3)
    # No forced preemption in the scenario, none in the synthetic job (and the other way round).
    assert (p["timeline_synth_preemption_rate_per_h"] == 0) == (p["preemptions_per_day"] == 0)


def test_llama3_synthetic_failures_and_checkpoints_follow_its_mtbf_and_interval():
    p = SCENARIOS["llama3_405b"]
    # "failures per running hour: 1 / mtbf_h".
    assert p["timeline_synth_failure_rate_per_h"] == round(1 / p["mtbf_h"], 4)
    # "about 6.8 min of steps between checkpoints: this scenario's interval".
    interval_s = p["checkpoint_interval_min"] * 60.0
    assert p["timeline_synth_checkpoint_every_steps"] == round(interval_s / p["timeline_synth_step_s"])


def test_running_example_decode_step_is_its_token_rate():
    p = SCENARIOS["running_example"]
    # traces_decode_step_ms: "120 tokens/s: decode_tokens_per_s", to 0.01 ms.
    assert p["traces_decode_step_ms"] == round(1e3 / p["decode_tokens_per_s"], 2)


@BOTH
def test_elastic_efficiency_keys_name_the_sizes_they_hold(name):
    p = SCENARIOS[name]
    assert f"elastic_efficiency_{p['elastic_step_devices']}" in p
    assert f"elastic_efficiency_{p['elastic_target_devices']}" in p
    assert p["elastic_small_devices"] < p["elastic_step_devices"] < p["elastic_target_devices"]


@BOTH
def test_roofline_peak_is_the_traced_device(name):
    p = SCENARIOS[name]
    model = yaml.safe_load((ROOT / p["traces_model"]).read_text())
    # "V100 SXM2 FP32": the traced DLRM ranks ran on V100s, and their GEMMs in float32.
    assert model["accelerator"].startswith("V100") and p["traces_roofline_precision"] == "FP32"
    assert math.isclose(p["traces_roofline_peak_tflops"], 15.7)
