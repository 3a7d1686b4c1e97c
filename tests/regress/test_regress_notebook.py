"""The regressions notebook ``notebooks/04_regressions.ipynb``: thin, stripped, in the report chain, runs.

The papermill run checks what the notebook prints against the injections (every tier's regression
caught, every injected straggler episode found) and the measured false-alarm rate.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from notebook_support import (
    ROOT,
    check_stripped,
    declared_parameters,
    defined_functions,
    printed,
    run_notebook,
)

from fleetlib.report import RUNG_NOTEBOOKS

NOTEBOOK = ROOT / "notebooks" / "04_regressions.ipynb"


@pytest.fixture(scope="module")
def nb() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def test_committed_without_outputs_and_thin(nb):
    check_stripped(nb)
    assert defined_functions(nb) == []
    assert declared_parameters(nb) == {
        "pair_devices": 96,
        "seed": 0,
        "cycle": "2h",
        "unchanged_pairs": 20,
        "bundle_dir": "",
    }


def test_in_the_report_chain_after_the_rungs():
    walk = RUNG_NOTEBOOKS
    assert walk.index("notebooks/04_regressions.ipynb") > walk.index("notebooks/03_step_traces.ipynb")


def test_summary_json_measured_factors_carry_their_contract(tmp_path):
    from fleetlib.fleet import measure_fleet
    from fleetlib.fleet.views import measured_summary

    fm = measure_fleet(ROOT / "data" / "fleet" / "synthetic" / "fleet.yaml")
    block = json.loads(json.dumps(measured_summary(fm, manifest="data/fleet/synthetic/fleet.yaml")))
    for name, factor in block["factors"].items():
        c = factor["contract"]
        assert set(c) >= {
            "workload",
            "system_state",
            "timing_boundary",
            "statistical_report",
            "load_generation",
        }
        assert c["system_state"]["software_version"] == "synthetic"
        assert c["statistical_report"]["factor"] == f"{name} goodput"


@pytest.mark.notebook
def test_notebook_catches_each_regression(tmp_path):
    result = run_notebook(NOTEBOOK, tmp_path, {"bundle_dir": str(tmp_path / "bundles")})
    text = printed(result)
    m = re.search(r"injected straggler episodes found by the triggers: (\d+) of (\d+)", text)
    assert m and m.group(1) == m.group(2) and int(m.group(2)) > 0
    rate = re.search(r"false-alarm rate: (\d+) of (\d+) unchanged pairs", text)
    assert rate and int(rate.group(2)) == 20 and int(rate.group(1)) <= 1
    assert "confounders: ['compiler_version'] | refused: True" in text
