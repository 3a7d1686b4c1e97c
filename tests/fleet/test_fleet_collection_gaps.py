"""Collection gaps in the fleet walk: on `fleetlib fleet`'s text and JSON, in summary.json and on the index.

The bundle is the fleet corpus's ``good`` one: two 8-GPU nodes over 00:00-02:00 and two jobs whose
records (submission to end) cover 00:00-01:10, so 01:10-02:00 holds no record of any job while 16
GPUs stay in service.  Everything expected below is worked out from those two sacct lines by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.fleet.commands import render_fleet, run_fleet
from fleetlib.fleet.views import measured_summary
from fleetlib.report.index import render_index

BUNDLE = Path(__file__).resolve().parents[1] / "corpus" / "fleet_bundles" / "good"
GAP_START, GAP_END = "2024-06-01T01:10:00+00:00", "2024-06-01T02:00:00+00:00"
GAP_S = 50 * 60.0
GAP_DEVICE_S = 16 * GAP_S
HELD_DEVICE_S = 8 * 3600.0 + 8 * 1800.0  # job 101 ran 60 min on 8 GPUs, job 102 30 min on 8


def test_the_walk_names_a_gap_and_keeps_s_as_measured() -> None:
    fm = measure_fleet(BUNDLE, collection_gap_s=20 * 60.0)
    assert fm.collection_gaps == [{"start": GAP_START, "end": GAP_END, "seconds": GAP_S,
                                   "device_s": GAP_DEVICE_S}]
    assert fm.scheduling.value == pytest.approx(HELD_DEVICE_S / (16 * 7200.0), rel=1e-12)
    flags = [f for f in fm.ledger.to_dict()["flags"] if f["code"] == "collection_gap"]
    assert len(flags) == 1 and f"--exclude {GAP_START} {GAP_END}" in flags[0]["message"]
    assert measure_fleet(BUNDLE, collection_gap_s=None).collection_gaps == []


def test_the_default_threshold_is_an_hour() -> None:
    assert measure_fleet(BUNDLE).collection_gaps == []  # 50 min < 60 min


def test_leaving_the_gap_out_removes_it_and_changes_s() -> None:
    fm = measure_fleet(BUNDLE, exclude=[(GAP_START, GAP_END)], collection_gap_s=20 * 60.0)
    assert fm.collection_gaps == []
    assert fm.scheduling.value == pytest.approx(HELD_DEVICE_S / (16 * 4200.0), rel=1e-12)


def test_the_fleet_text_and_json_show_the_gap_with_its_exclude() -> None:
    res = run_fleet(BUNDLE, collection_gap_min=20)
    assert res["collection_gaps"][0]["device_s"] == GAP_DEVICE_S
    text = render_fleet(res)
    assert "collection gaps: 1 stretch(es)" in text
    assert f"50 min  {GAP_DEVICE_S / 3600:,.1f} device-h  --exclude {GAP_START} {GAP_END}" in text
    assert f"({100 * GAP_DEVICE_S / (16 * 7200.0):.1f} % of capacity)" in text
    with pytest.raises(Exception, match="--collection-gap must be a positive number"):
        run_fleet(BUNDLE, collection_gap_min=0)


def test_summary_json_and_the_index_carry_the_gap() -> None:
    fm = measure_fleet(BUNDLE, collection_gap_s=20 * 60.0)
    measured = measured_summary(fm, manifest="tests/corpus/fleet_bundles/good/fleet.yaml")
    assert measured["collection_gaps"] == fm.collection_gaps
    summary = {"measured": {**measured, "ledger": None}, "pages": [], "skipped": [],
               "scenario": {"title": "t"}, "window": {"label": "w"}, "mpg": 0.125,
               "factors": {f: {"value": 0.5} for f in ("scheduling", "runtime", "program")}}
    page = render_index(summary)
    block = page[page.index('id="collection-gaps"'):]
    assert f"<code>--exclude {GAP_START} {GAP_END}</code>" in block
    assert page.index('id="headline"') < page.index('id="collection-gaps"')

