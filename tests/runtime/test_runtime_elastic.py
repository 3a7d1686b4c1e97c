"""Issue 33: elastic jobs -- resizes charged once (``elastic_wait``, ``elastic_reinit``), the device-count
series and ml-goodput-measurement's slice efficiencies, on a hand-built job and on the peer's own scenarios.

The acceptance job (``_job``), by hand.  One job, four slices, gang complete at 0 s, released at 190 s:

====================  =========  ===================================================
stretch               seconds    what
====================  =========  ===================================================
[0, 10)               10         launch before step 0 (startup)
[10, 60)              50         steps 0-4, 10 s each, on four slices
[60, 80)              20         a slice is lost: elastic wait (resize_begin 4 -> 3)
[80, 95)              15         re-initialisation on three slices (resize_end)
[95, 155)             60         steps 5-9, 12 s each, on three slices
[155, 160)            5          the slice is back: elastic wait (resize_begin 3 -> 4)
[160, 170)            10         re-initialisation on four slices (resize_end)
[170, 190)            20         steps 10-11, 10 s each, on four slices
====================  =========  ===================================================

elastic_wait = 20 + 5 = 25 s; elastic_reinit = 15 + 10 = 25 s; productive = 50 + 60 + 20 = 130 s (the
clean end commits every step); startup 10 s; 130 + 25 + 25 + 10 = 190 s = held.  R = 130 / 190 = 0.684.

Slice efficiency as ml-goodput-measurement 0.2.3 defines it (``_compute_time_weighted_efficiency``:
the time-weighted mean of active / total and available / total slices from job start to job end),
with the slice counts the recorder logs at 0 s (4, 4, 4), 60 s (0, 4, 3), 95 s (3, 4, 3), 155 s
(0, 4, 4) and 170 s (4, 4, 4) -- (active, total, available):

* stepping:  (4 x 60 + 0 x 35 + 3 x 60 + 0 x 15 + 4 x 20) / (4 x 190) = 500 / 760 = 0.658 (0.65789...)
* available: (4 x 60 + 3 x 95 + 4 x 35) / (4 x 190) = 665 / 760 = 0.875

fleetlib reads the same numbers from the device series: devices stepping is the mesh (4, then 3 from
the first resize_end, then 4 from the second) and zero inside the partition's elastic parts
([60, 95) and [155, 170)); devices held is 4, 3 from 60 s, 4 from 155 s.

The rollback variant: after the slice loss the job restores to step 2 and runs steps 3-4 again
(12 s each on three slices, [95, 119)), then steps 5-9 ([119, 179)), regains the slice at 179 s
(5 s wait, 10 s re-initialisation) and runs steps 10-11 ([194, 214)); released at 214 s.  The first
runs of steps 3 and 4 (2 x 10 s = 20 s) are rework; the elastic terms stay 25 s and 25 s; productive
= 3 x 10 + 7 x 12 + 2 x 10 = 134 s; 134 + 20 + 25 + 25 + 10 = 214 s = held.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.accounting import Window
from fleetlib.quality import InputError
from fleetlib.runtime import measure
from fleetlib.runtime.commands import render_runtime, run_runtime
from fleetlib.runtime.goodput import summary_of
from fleetlib.runtime.readers import read_canonical, read_mlgoodput
from fleetlib.runtime.readers.canonical import write_canonical
from fleetlib.runtime.timeline import tables_from_seconds

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "tests" / "corpus" / "runtime" / "mlgoodput_peer"
FIXTURE = PEER / "Issue33ElasticFixture__test_slice_loss_and_regain_timeline.jsonl"
RESULTS = json.loads((PEER / "elastic_results.json").read_text())


def _job(rollback: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    steps = [(0, k, 10.0 + 10 * k, 20.0 + 10 * k) for k in range(5)]
    again = [3, 4] if rollback else []
    t = 95.0
    for k in [*again, *range(5, 10)]:  # on three slices
        steps.append((0, k, t, t + 12))
        t += 12
    regain = t
    steps += [(0, 10, regain + 15, regain + 25), (0, 11, regain + 25, regain + 35)]
    end = regain + 35
    events = [(0, 0.0, "gang_complete"), (0, 60.0, "resize_begin"), (0, 80.0, "resize_end"),
              (0, regain, "resize_begin"), (0, regain + 5, "resize_end"), (0, end, "job_completed"),
              (0, end, "release")]
    s, e = tables_from_seconds(steps, events)
    devices = {60.0: (4, 3), 80.0: (3, 3), regain: (3, 4), regain + 5: (4, 4)}
    offset = (e["time"] - e["time"].min()).dt.total_seconds()
    e["devices_before"] = pd.array([devices.get(x, (None, None))[0] for x in offset], dtype="Int64")
    e["devices_after"] = pd.array([devices.get(x, (None, None))[1] for x in offset], dtype="Int64")
    return s, e


def _nonzero(categories: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in categories.items() if v}


def test_the_acceptance_job_charges_each_resize_once():
    m = measure(_job())
    assert _nonzero(m.categories) == {"productive": 130.0, "startup": 10.0, "elastic_wait": 25.0,
                                      "elastic_reinit": 25.0}
    assert m.held_s == 190.0 and m.runtime_goodput == pytest.approx(130 / 190, abs=1e-15)
    assert m.stepping_slice_efficiency == pytest.approx(500 / 760, abs=1e-12)
    assert m.available_slice_efficiency == pytest.approx(665 / 760, abs=1e-12)
    assert round(m.stepping_slice_efficiency, 3) == 0.658 and m.available_slice_efficiency == 0.875


def test_the_device_series_is_a_step_function_over_held_time():
    series = measure(_job()).device_series
    assert series["time"].dt.strftime("%M:%S").tolist() == [
        "00:00", "01:00", "01:20", "01:35", "02:35", "02:40", "02:50", "03:10"]
    assert series["devices_held"].tolist() == [4, 3, 3, 3, 4, 4, 4, 0]
    assert series["devices_stepping"].tolist() == [4, 0, 0, 3, 0, 0, 4, 0]
    assert series["devices_total"].tolist() == [4, 4, 4, 4, 4, 4, 4, 0]
    assert set(series["attempt"]) == {0}


def test_rework_after_an_elastic_rollback_stays_rework():
    m = measure(_job(rollback=True))
    assert _nonzero(m.categories) == {"productive": 134.0, "startup": 10.0, "elastic_wait": 25.0,
                                      "elastic_reinit": 25.0, "rework": 20.0}
    assert m.held_s == 214.0
    assert "restart_inferred_from_step_numbers" in m.ledger.codes()


def test_the_canonical_file_carries_the_device_counts(tmp_path):
    s, e = _job()
    path = write_canonical(type("T", (), {"steps": s, "events": e})(), tmp_path / "elastic.csv")
    tables, ledger = read_canonical(path)
    assert ledger.rejected == 0
    resize = tables.events[tables.events["kind"].isin(["resize_begin", "resize_end"])]
    assert resize["devices_before"].tolist() == [4, 3, 3, 4]
    assert resize["devices_after"].tolist() == [3, 3, 4, 4]
    m = measure(path, format="canonical")
    assert _nonzero(m.categories)["elastic_wait"] == 25.0 and m.available_slice_efficiency == 0.875


def test_the_ml_goodput_records_of_the_same_job_give_the_same_numbers():
    tables, ledger = read_mlgoodput(FIXTURE)
    assert ledger.read == ledger.kept == 27 and not ledger.to_dict()["flags"]
    resize = tables.events[tables.events["kind"].isin(["resize_begin", "resize_end"])]
    assert resize["duration_s"].tolist() == [20.0, 15.0, 5.0, 10.0]  # the recorder's own intervals
    assert resize["devices_before"].tolist() == [4, 3, 3, 4]
    assert resize["devices_after"].tolist() == [3, 3, 4, 4]
    m = measure(FIXTURE, format="mlgoodput")
    assert _nonzero(m.categories) == _nonzero(measure(_job()).categories)
    assert (m.stepping_slice_efficiency, m.available_slice_efficiency) == (500 / 760, 665 / 760)


def test_the_peer_counts_the_resize_pauses_twice_on_the_acceptance_job():
    """ml-goodput-measurement 0.2.3 on the same records (captured by generate_elastic.py): productive is
    first step start to job end, 190 - 10 = 180 s, and the elastic buckets 20 + 5 + 25 = 50 s come on top:
    230 s of buckets on a 190 s job, goodput 180 / 190 = 94.7 %.  Its slice efficiencies agree."""
    calls = RESULTS["Issue33ElasticFixture.test_slice_loss_and_regain"]["calls"]
    peer = next(c for c in calls if c["call"] == "ElasticGoodputCalculator._get_current_productive_and_"
                "unproductive_time")
    elastic = {k: v for k, v in peer["unproductive_s"].items() if k.startswith("ELASTIC")}
    assert peer["productive_s"] == 180.0 and sum(elastic.values()) == 50.0
    assert next(c for c in calls if c["call"].endswith(".get_job_goodput"))["goodput_pct"] == \
        pytest.approx(100 * 180 / 190)
    details = next(c for c in calls if c["call"].endswith("get_job_goodput_details"))
    m = measure(FIXTURE, format="mlgoodput")
    assert m.productive_s + m.categories["elastic_wait"] + m.categories["elastic_reinit"] + \
        m.categories["startup"] == m.held_s == 190.0
    assert details["stepping_slice_efficiency"] == pytest.approx(m.stepping_slice_efficiency, abs=1e-12)
    assert details["available_slice_efficiency"] == pytest.approx(m.available_slice_efficiency, abs=1e-12)


def test_the_command_shows_the_elastic_terms_and_the_slice_efficiency():
    res = run_runtime([str(FIXTURE)], format="mlgoodput")
    assert res["terms"]["elastic_wait"] == 25.0 and res["terms"]["elastic_reinit"] == 25.0
    assert res["stepping_slice_efficiency"] == 500 / 760 and res["available_slice_efficiency"] == 0.875
    text = render_runtime(res)
    assert "elastic wait" in text and "elastic re-initialisation" in text
    assert "stepping 0.658, available 0.875" in text
    assert summary_of(measure(FIXTURE, format="mlgoodput"))["stepping_slice_efficiency"] == 500 / 760


def test_a_timeline_without_resizes_shows_no_elastic_lines():
    res = run_runtime([str(PEER / "GoodputTest__test_goodput_calculator_timeline.jsonl")], format="mlgoodput")
    assert res["terms"]["elastic_wait"] == 0.0 and res["stepping_slice_efficiency"] is None
    assert "elastic" not in render_runtime(res)


# ---------------------------------------------------------------------------------------------------
# The peer's elastic tests (goodput_elastic_test.py), captured with a fixed clock
# ---------------------------------------------------------------------------------------------------


def _peer_calls(test: str, call: str) -> list[dict]:
    return [c for c in RESULTS[test]["calls"] if c["call"].endswith(call)]


def test_every_captured_peer_test_passed_in_the_capture():
    assert RESULTS and all(r["ok"] for r in RESULTS.values())


def test_peer_elastic_buckets_and_fleetlib_waits_that_run_to_the_reinitialisation():
    """test_get_current_productive_and_unproductive_time_elastic: waits [10, 20) slice_down and [30, 45)
    scale_up, re-initialisation [55, 75), steps at 75 and 85 s, no job end.  The peer: 10 + 15 s of
    waits, 20 s of re-initialisation, productive 10 s; the 20 s at [20, 30) and [45, 55) are in no bucket.
    fleetlib runs a wait until the next resize marker or the re-initialisation: [10, 30) + [30, 55) =
    45 s; re-initialisation 20 s; startup [0, 10); step 0 [75, 85) is progress at risk (no commit, no
    end); 10 + 45 + 20 + 10 = 85 s = held (to the last record)."""
    test = "ElasticGoodputCalculatorTest.test_get_current_productive_and_unproductive_time_elastic"
    peer = _peer_calls(test, "ElasticGoodputCalculator._get_current_productive_and_unproductive_time")[0]
    assert {k: v for k, v in peer["unproductive_s"].items() if v} == {
        "ELASTIC_SLICE_DOWN": 10.0, "ELASTIC_SCALE_UP": 15.0, "ELASTIC_REINITIALIZATION": 20.0}
    m = measure(PEER / RESULTS[test]["file"], format="mlgoodput")
    assert _nonzero(m.categories) == {"startup": 10.0, "elastic_wait": 45.0, "elastic_reinit": 20.0,
                                      "progress_at_risk": 10.0}
    assert m.held_s == 85.0


def test_peer_slice_efficiency_details_agree():
    """test_get_job_goodput_details_elastic: (active 2, available 2) of 4 for 8 h, available 4 for
    1 h 20 s: stepping 0.5, available (0.5 x 28800 + 1 x 3620) / 32420 = 0.55583."""
    test = "ElasticGoodputCalculatorTest.test_get_job_goodput_details_elastic"
    details = _peer_calls(test, "get_job_goodput_details")[0]
    m = measure(PEER / RESULTS[test]["file"], format="mlgoodput")
    assert m.stepping_slice_efficiency == details["stepping_slice_efficiency"] == 0.5
    assert m.available_slice_efficiency == pytest.approx((0.5 * 28800 + 3620) / 32420, abs=1e-12)
    assert details["available_slice_efficiency"] == pytest.approx(m.available_slice_efficiency, abs=1e-12)
    assert m.productive_s == 20.0 and m.held_s == 32420.0
    peer_pct = _peer_calls(test, "GoodputCalculator.get_job_goodput")[0]["goodput_pct"]
    assert peer_pct == pytest.approx(100 * m.runtime_goodput)


def test_peer_time_weighted_efficiency_on_slice_counts_alone():
    """test_compute_time_weighted_efficiency: slice counts only (no job start: fleetlib cannot place
    them in held time and refuses); held from 0 to 9 h around them: 0.5 and (2/4 x 8 + 4/4 x 1) / 9."""
    test = "ElasticGoodputCalculatorTest.test_compute_time_weighted_efficiency"
    path = PEER / RESULTS[test]["file"]
    with pytest.raises(InputError, match="no gang_complete"):
        measure(path, format="mlgoodput")
    tables, _ = read_mlgoodput(path)
    e = tables.events.drop(columns=["source_file", "source_row"])  # rows added below have none
    t0 = e["time"].min()
    frame = pd.DataFrame({"job_id": e["job_id"].iloc[0], "attempt": 0,
                          "time": [t0, t0 + pd.Timedelta(hours=9)], "kind": ["gang_complete", "release"]})
    m = measure((tables.steps, pd.concat([e, frame], ignore_index=True).sort_values("time", kind="stable")))
    assert m.stepping_slice_efficiency == 0.5
    assert m.available_slice_efficiency == pytest.approx(5 / 9, abs=1e-12)
    assert _peer_calls(test, "_compute_time_weighted_efficiency")[0]["efficiency"] == \
        pytest.approx([0.5, 5 / 9])


# ---------------------------------------------------------------------------------------------------
# The peer's exclusion tests (GoodputExclusionIntegrationTest), with the windows the peer was given
# ---------------------------------------------------------------------------------------------------


def _excluded(test: str) -> tuple[object, dict]:
    call = [c for c in _peer_calls(test, "get_job_goodput_with_exclusions") if c["exclusions"]][-1]
    path = PEER / RESULTS[test]["file"]
    whole = measure(path, format="mlgoodput")
    win = Window.between(whole.window_start, whole.window_end).excluding(
        [(pd.Timestamp(a, unit="s", tz="UTC"), pd.Timestamp(b, unit="s", tz="UTC"))
         for a, b in call["exclusions"]],
        clip=True)
    m = measure(path, format="mlgoodput", window=win)
    losses = sum(v for k, v in m.categories.items() if k != "productive")
    assert math.isclose(m.productive_s + losses, m.held_s, abs_tol=1e-9)
    return m, call


@pytest.mark.parametrize(("test", "held", "productive"), [
    ("test_basic_exclusion_reduces_productive_time", 25.0, 15.0),  # 30 s less 5 s of step 0
    ("test_exclusion_during_disruption_recovery", 10.0, 10.0),  # 30 s less the 20 s outage
    ("test_exclusion_masking_badput_event", 15.0, 5.0),  # 25 s less the 10 s TPU init
])
def test_peer_exclusions_that_add_up_agree(test, held, productive):
    m, call = _excluded(f"GoodputExclusionIntegrationTest.{test}")
    assert (m.held_s, m.productive_s) == (held, productive)
    assert call["goodput_pct"] == pytest.approx(100 * m.runtime_goodput)


def test_peer_exclusion_over_training_prep_removes_only_its_overlap():
    """Window [5, 15) s over training prep [0, 10) s, step 0 at 20 s, job end 25 s.  The peer excludes
    5 s (the overlap with the prep), so its wall is 25 - 5 = 20 s: productive 5 + prep 5 + other 10 =
    20 s, goodput 25 %.  The window is 10 s long: fleetlib leaves all of it out, 25 - 10 = 15 s held =
    productive 5 + startup 10 ([0, 5) and [15, 20)), R = 5 / 15 = 33.3 %."""
    m, call = _excluded("GoodputExclusionIntegrationTest.test_exclusion_masking_training_prep")
    assert call["excluded_s"] == 5.0 and call["goodput_pct"] == 25.0
    assert (m.held_s, m.productive_s, m.categories["startup"]) == (15.0, 5.0, 10.0)
    assert m.runtime_goodput == pytest.approx(1 / 3, abs=1e-15)


def test_peer_exclusion_over_a_custom_event_does_not_add_up():
    """Window [11, 21) s over the first 10 s custom badput event of a 54 s job.  The peer: adjusted wall
    54 - 10 = 44 s, goodput 45.45 % = 20 s, and badput custom 20 s (both events: the excluded one too),
    data loading 10 + 2 s, TPU init 1 s, training prep 2 s: 20 + 35 = 55 s of buckets on 44 s.
    fleetlib: held 44 s = productive 9 (steps' compute time) + input wait 10 + startup 9 + unattributed
    16 (the custom events are auxiliary markers; the second one, [36, 46) s, and the 3 s after each
    remain), R = 9 / 44."""
    m, call = _excluded("GoodputExclusionIntegrationTest.test_exclusion_with_multiple_steps_and_badput")
    seconds = {k: v * 44 / 100 for k, v in call["badput_pct"].items() if not isinstance(v, dict) and v}
    custom = sum(call["badput_pct"]["CUSTOM_BADPUT_EVENTS"].values()) * 44 / 100
    assert call["excluded_s"] == 10.0
    assert call["goodput_pct"] * 44 / 100 + sum(seconds.values()) + custom == pytest.approx(55.0)
    assert _nonzero(m.categories) == {"productive": 9.0, "input_wait": 10.0, "startup": 9.0,
                                      "unattributed": 16.0}
    assert m.held_s == 44.0


def test_the_validated_events_keep_the_device_counts():
    from fleetlib.runtime.timeline import validate_timeline

    _, events, ledger = validate_timeline(*_job())
    resize = events[events["kind"] == "resize_begin"]
    assert resize["devices_before"].tolist() == [4, 3] and resize["devices_after"].tolist() == [3, 4]
    assert "unknown_event_kind" not in ledger.codes()  # resize kinds are the partition's own


def test_the_peer_drops_its_elastic_buckets_under_an_exclusion_window():
    """The acceptance job with [100, 110) s (inside steps 5-9) excluded.  The peer: excluded 10 s, goodput
    94.44 % = 170 / 180 s, other 5.56 % = 10 s (the launch), and every elastic bucket 0: 170 + 10 = 180 s,
    the 50 s of resize pauses counted productive only.  fleetlib: held 180 s = productive 120 + elastic
    wait 25 + re-initialisation 25 + startup 10; R = 120 / 180 = 66.7 %."""
    test = "Issue33ElasticFixture.test_slice_loss_and_regain"
    call = _peer_calls(test, "get_job_goodput_with_exclusions")[0]
    assert call["excluded_s"] == 10.0 and call["goodput_pct"] == pytest.approx(100 * 170 / 180)
    assert all(v == 0.0 for k, v in call["badput_pct"].items() if k.startswith("ELASTIC"))
    assert call["badput_pct"]["OTHER"] == pytest.approx(100 * 10 / 180)
    whole = measure(FIXTURE, format="mlgoodput")
    win = Window.between(whole.window_start, whole.window_end).excluding(
        [(whole.window_start + pd.Timedelta(seconds=100), whole.window_start + pd.Timedelta(seconds=110))])
    m = measure(FIXTURE, format="mlgoodput", window=win)
    assert _nonzero(m.categories) == {"productive": 120.0, "startup": 10.0, "elastic_wait": 25.0,
                                      "elastic_reinit": 25.0}
    assert m.held_s == 180.0
    # the slice efficiencies leave the excluded 10 s too: (500 - 3 x 10) / (760 - 4 x 10)
    assert m.stepping_slice_efficiency == pytest.approx(470 / 720, abs=1e-12)
