"""Scenario files: strict loading of typed literals, and the summary of the running example."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fleetlib.quality import DomainError, InputError
from fleetlib.scenario import load_parameters, runtime_model_inputs, scenario_summary

ROOT = Path(__file__).resolve().parents[1]
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
    assert terms["input_wait"] == pytest.approx(0.0769, rel=1e-12)
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
