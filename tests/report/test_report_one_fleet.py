"""One fleet per report: every S, R, P and MPG the walk's pages print is the index's, to the printed digit.

The walk (pages 00-03) runs once on the running example (its fleet is the scenario's ``fleet_manifest``,
the bundled synthetic fleet) and once on a hand-written three-job bundle (``tests/corpus/three_job_fleet``)
through ``run_report(..., fleet=...)``: the same code path.  Every factor a page prints in the fleet's form
(``S = 49.5 %``, or the headline's ``S 49.5 %``) is compared with ``summary.json``'s measured value, and each
rung page must print its own factor.  Nothing here states a factor's value: R's clean-end rule may move
the headline.  Only the walk's notebooks run (the case studies and the course print other data's numbers
by design), so the check costs four notebooks per report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_factors import printed_factors, visible_text

from fleetlib.fleet import load_manifest
from fleetlib.report import RUNG_NOTEBOOKS, run_report

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "parameters" / "running_example.yaml"
THREE_JOBS = ROOT / "tests" / "corpus" / "three_job_fleet" / "fleet.yaml"
WALK = [nb for nb in RUNG_NOTEBOOKS if Path(nb).stem[:2] in {"00", "01", "02", "03"}]
SYMBOL = {"scheduling": "S", "runtime": "R", "program": "P"}
#: The factor each rung page opens on.
OPENS_ON = {"01_scheduler_records": "S", "02_job_timeline": "R", "03_step_traces": "P"}

pytestmark = [pytest.mark.slow, pytest.mark.notebook]


def _text(page: Path) -> str:
    return visible_text(page.read_text(encoding="utf-8"))


def _expected(summary: dict) -> dict[str, str]:
    measured = summary["measured"]
    out = {SYMBOL[name]: f"{100 * f['value']:.1f}" for name, f in measured["factors"].items()}
    out["MPG"] = f"{100 * measured['mpg']:.1f}"
    return out


def _check_report(out: Path) -> dict[str, list[tuple[str, str]]]:
    summary = json.loads((out / "summary.json").read_text())
    expected = _expected(summary)
    found = {}
    for page in [out / "index.html", *(out / p["html"] for p in summary["pages"])]:
        printed = printed_factors(page.read_text(encoding="utf-8"))
        wrong = [(symbol, value) for symbol, value in printed if value != expected[symbol]]
        assert not wrong, f"{page.name} prints {wrong}; the index's are {expected}"
        found[page.stem] = printed
    for stem, symbol in OPENS_ON.items():
        if stem in found:
            assert (symbol, expected[symbol]) in found[stem], f"{stem} does not print the fleet's {symbol}"
    assert {s for s, _ in found["index"]} == {"S", "R", "P", "MPG"}
    return found


@pytest.fixture(scope="module")
def default_walk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_report(PARAMS, tmp_path_factory.mktemp("default") / "report", notebooks=WALK, progress=False)


@pytest.fixture(scope="module")
def three_job_walk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the default chain of an own-fleet report: the walk without 04, no case studies, no course
    return run_report(PARAMS, tmp_path_factory.mktemp("three") / "report", progress=False, fleet=THREE_JOBS,
                      notebooks=[nb for nb in WALK if "03_step_traces" not in nb])


def test_every_factor_the_default_walk_prints_is_the_index_s(default_walk: Path) -> None:
    found = _check_report(default_walk)
    assert set(OPENS_ON) <= set(found)  # every rung page ran
    summary = json.loads((default_walk / "summary.json").read_text())
    assert summary["measured"]["manifest"] == "data/fleet/synthetic/fleet.yaml"


def test_the_runtime_page_prints_r_s_definition_from_the_factor(default_walk: Path) -> None:
    summary = json.loads((default_walk / "summary.json").read_text())
    convention = summary["measured"]["factors"]["runtime"]["convention"]
    page = visible_text((default_walk / "html" / "02_job_timeline.html").read_text(encoding="utf-8"))
    assert f"Definition of R: {convention}" in page


def test_pool_job_and_traced_numbers_are_labelled_with_their_subset(default_walk: Path) -> None:
    scheduler = _text(default_walk / "html" / "01_scheduler_records.html")
    assert "S(pool dev) = " in scheduler and "S(pool train) = " in scheduler
    traces = _text(default_walk / "html" / "03_step_traces.html")
    manifest = load_manifest(ROOT / "data" / "fleet" / "synthetic" / "fleet.yaml")
    traced = sorted(job for job in manifest.traces if job in manifest.models)
    assert all(f"P(job {job}) = " in traces for job in traced)
    assert "close MPG" not in traces


def test_a_hand_written_three_job_fleet_tells_one_story(three_job_walk: Path) -> None:
    found = _check_report(three_job_walk)
    assert set(found) == {"index", "00_whole_fleet", "01_scheduler_records", "02_job_timeline"}
    summary = json.loads((three_job_walk / "summary.json").read_text())
    # independent truth: held device-time over capacity from the hand-written sacct/sinfo (16 GPUs, 6 h)
    held_device_h = 8 * 3.0 + 8 * (70 / 60) + 16 * 2.0
    s_value = summary["measured"]["factors"]["scheduling"]["value"]
    assert s_value == pytest.approx(held_device_h / 96.0, rel=1e-9)
    index = _text(three_job_walk / "index.html")
    assert "Rows read 37 = kept 37 + repaired 0 + rejected 0" in index or "37 rows read = 37 kept" in index
    assert "kept but unused" in index
    jobs = visible_text((three_job_walk / "html" / "02_job_timeline.html").read_text(encoding="utf-8"))
    assert "R(job 51001) = " in jobs and "51003" in jobs  # the job without a timeline is in the table
