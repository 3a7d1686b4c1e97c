"""The whole-fleet notebook ``notebooks/00_whole_fleet.ipynb``, first in the report chain, and the
``measured`` block of a report's ``summary.json``.

Static checks read the committed notebook: outputs stripped, one parameters cell of typed literals whose
``fleet_manifest`` default is the bundled data locations' value, first in the report chain.  The papermill
run and the report run compare what they print and write with the bundled fleet's ``truth.json`` — the
generator's own injected numbers, not the measuring code's.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from notebook_support import (
    NBSTRIPOUT,
    PARAMETER_FILES,
    ROOT,
    check_nbstripout_clean,
    check_stripped,
    declared_parameters,
    defined_functions,
    figure_names,
    load_yaml,
    printed,
    run_notebook,
)

from fleetlib.report import RUNG_NOTEBOOKS, run_report

NOTEBOOK = ROOT / "notebooks" / "00_whole_fleet.ipynb"
TRUTH = json.loads((ROOT / "data" / "fleet" / "synthetic" / "truth.json").read_text())


@pytest.fixture(scope="module")
def nb() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def test_committed_without_outputs(nb):
    check_stripped(nb)


@pytest.mark.skipif(NBSTRIPOUT is None, reason="nbstripout is not installed in .venv")
def test_nbstripout_would_change_nothing():
    check_nbstripout_clean(NOTEBOOK)


def test_parameters_are_typed_literals_matching_the_scenarios(nb):
    declared = declared_parameters(nb)
    assert declared == {"fleet_manifest": "data/fleet/synthetic/fleet.yaml", "output_dir": "",
                        "fleet_by": "day", "fleet_segment_by": "pool"}
    for path in PARAMETER_FILES:
        assert load_yaml(path)["fleet_manifest"] == declared["fleet_manifest"], path.name


def test_thin_notebook(nb):
    assert defined_functions(nb) == []
    assert sorted(figure_names(nb)) == ["fleet_by_window", "fleet_jobs", "fleet_kernels", "fleet_waterfall"]


def test_first_in_the_report_chain():
    assert RUNG_NOTEBOOKS[0] == "notebooks/00_whole_fleet.ipynb"


@pytest.mark.notebook
def test_notebook_prints_the_generators_truth(tmp_path):
    out = tmp_path / "figures"
    result = run_notebook(NOTEBOOK, tmp_path, {"output_dir": str(out)})
    text = printed(result)
    f = TRUTH["factors"]
    expected = (f"MPG {TRUTH['mpg']:.1%} = S {f['scheduling']['value']:.1%} x R {f['runtime']['value']:.1%} "
                f"x P {f['program']['value']:.1%}")
    assert expected in text
    names = sorted(p.name for p in out.iterdir())
    assert names == ["fleet_by_window.png", "fleet_by_window.svg", "fleet_jobs.png", "fleet_jobs.svg",
                     "fleet_kernels.png", "fleet_kernels.svg", "fleet_waterfall.png", "fleet_waterfall.svg"]


@pytest.mark.notebook
def test_report_summary_has_a_measured_block_and_labels_the_stated_one(tmp_path):
    out = run_report(ROOT / "parameters" / "running_example.yaml", tmp_path / "report",
                     notebooks=["notebooks/00_whole_fleet.ipynb"], progress=False)
    summary = json.loads((Path(out) / "summary.json").read_text())
    measured = summary["measured"]
    assert next(iter(summary)) == "measured"
    assert measured["label"] == "measured"
    assert measured["mpg"] == pytest.approx(TRUTH["mpg"], rel=1e-9)
    for boundary, factor in measured["factors"].items():
        assert factor["label"] == "measured"
        assert factor["value"] == pytest.approx(TRUTH["factors"][boundary]["value"], rel=1e-9)
        assert factor["record"] and factor["files"], boundary
        assert factor["window"]["start"] == "2024-05-01T00:00:00+00:00"
    assert all(c["holds"] for c in measured["chain"].values())
    assert summary["label"] == "stated"
    assert {f["label"] for f in summary["factors"].values()} == {"stated"}
    assert {f["record"] for f in summary["factors"].values()} == {"stated in the scenario file"}
