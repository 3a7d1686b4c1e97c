"""The index's parts around the headline and its page sections, rendered from a hand-built summary (fast).

The measured block is the hand-written three-job bundle's (``tests/corpus/three_job_fleet``), whose ledger
counts are known from its files: 37 rows, all kept; three sacct job steps and one sacctmgr registration line
kept but unused.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from report_factors import visible_text

from fleetlib.report import _measured_block
from fleetlib.report.index import render_index
from fleetlib.scenario import load_parameters, scenario_summary

ROOT = Path(__file__).resolve().parents[2]
THREE_JOBS = "tests/corpus/three_job_fleet/fleet.yaml"


@pytest.fixture(scope="module")
def summary() -> dict:
    params = load_parameters(ROOT / "parameters" / "running_example.yaml")
    params["fleet_manifest"] = THREE_JOBS
    out = scenario_summary(params)
    out.update(measured=_measured_block(params), params_file="parameters/running_example.yaml",
               overrides={}, skipped=[], pages=[
                   {"html": "html/00_whole_fleet.html", "title": "00 · Whole fleet", "part": "walk"},
                   {"html": "html/01_scheduler_samples.html", "title": "Case study · Scheduler samples",
                    "part": "case"},
                   {"html": "html/01_napkin_maths.html", "title": "01 · Napkin", "part": "course"}])
    return out


def test_case_studies_are_listed_between_the_walk_and_the_course(summary: dict) -> None:
    page = render_index(summary)
    assert page.index('id="pages"') < page.index('id="case-studies"') < page.index('id="course"')
    section = page[page.index('id="case-studies"'):page.index('id="course"')]
    assert "html/01_scheduler_samples.html" in section and "html/00_whole_fleet.html" not in section
    assert "Case studies: the bundled public samples" in page


def test_no_case_studies_section_without_case_study_pages(summary: dict) -> None:
    own = {**summary, "pages": [p for p in summary["pages"] if p["part"] != "case"],
           "skipped": [{"name": "01_scheduler_samples",
                        "reason": "a case study of the bundled public samples, not of your fleet"}]}
    page = render_index(own)
    assert 'id="case-studies"' not in page
    assert "01_scheduler_samples: not run — a case study of the bundled public samples" in page


def test_the_fleet_ledger_stands_beside_the_headline(summary: dict) -> None:
    page = render_index(summary)
    brief = visible_text(page[page.index('id="ledger-brief"'):page.index('id="levers"')])
    assert "Ledger: 37 rows read = 37 kept + 0 repaired + 0 rejected" in brief
    assert ("kept but unused: 3 sacct job step (123.batch, 123.0), 1 sacctmgr Cluster Registered TRES line"
            in brief)
    assert page.index('id="headline"') < page.index('id="ledger-brief"') < page.index('id="levers"')


def test_the_first_rejections_are_named_with_file_and_row(summary: dict) -> None:
    rejecting = copy.deepcopy(summary)
    ledger = rejecting["measured"]["ledger"]
    ledger["rejected"], ledger["read"] = 6, ledger["read"] + 6
    ledger["entries"] = [{"action": "rejected", "file": "scheduler/sacct.txt", "row": 10 + i,
                          "field": "Start", "reason": f"bad <time> {i}"} for i in range(6)]
    page = render_index(rejecting)
    brief = visible_text(page[page.index('id="ledger-brief"'):page.index('id="levers"')])
    assert "rejected: scheduler/sacct.txt, row 10, field 'Start': bad <time> 0" in brief
    assert "row 14" in brief and "row 15" not in brief  # the first five
    assert "1 more rejected rows (all of them under Ledgers below)" in brief
    assert "<time>" not in page  # escaped


def test_applied_overrides_are_listed_escaped(summary: dict) -> None:
    assert "No -p overrides" in visible_text(render_index(summary))
    page = render_index({**summary, "overrides": {"timeline_window_min": 30.0, "scenario_title": "<b>x</b>"}})
    listed = page[page.index('id="overrides"'):page.index('id="levers"')]
    assert "timeline_window_min = 30.0" in listed
    assert "scenario_title = &#x27;&lt;b&gt;x&lt;/b&gt;&#x27;" in listed and "<b>x</b>" not in listed
