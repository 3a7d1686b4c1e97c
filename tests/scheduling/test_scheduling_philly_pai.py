"""Philly ``cluster_job_log`` and Alibaba PAI 2020 readers: waits, gangs and the ledger, checked against
values worked out by hand from the sample files (see each sample's SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib.quality import InputError
from fleetlib.scheduling.readers import READERS, read
from fleetlib.scheduling.views import cohort_goodput, queue_waits

ROOT = Path(__file__).resolve().parents[2]
PHILLY = ROOT / "data/scheduler/philly_sample/cluster_job_log.json"
PAI_DIR = ROOT / "data/scheduler/pai_sample"
PAI = [
    PAI_DIR / f"{n}.csv"
    for n in ("pai_job_table", "pai_task_table", "pai_instance_table", "pai_machine_spec")
]
CORPUS = ROOT / "tests/corpus/scheduling"


def _utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


# ---------------------------------------------------------------------------------------------------
# Philly
# ---------------------------------------------------------------------------------------------------


def test_philly_attempts_times_and_devices():
    recs, ledger = READERS["philly"].read(PHILLY)
    a = recs.allocations.set_index(["job_id", "attempt"])
    # the README example: submitted 01:11:39 PDT (UTC-7), attempt 0 01:12:09-01:13:23, retry at 01:13:30
    ex = "application_1506638472019_14199"
    assert a.loc[(ex, 0), "submit"] == _utc("2017-10-07 08:11:39")
    assert a.loc[(ex, 0), "first_assigned"] == _utc("2017-10-07 08:12:09")
    assert a.loc[(ex, 0), "release"] == _utc("2017-10-07 08:13:23")
    assert a.loc[(ex, 1), "submit"] == _utc("2017-10-07 08:13:23")  # re-queued when attempt 0 ended
    assert a.loc[(ex, 1), "gang_complete"] == _utc("2017-10-07 08:13:30")
    assert list(a["devices"]) == [8, 8, 1, 16, 4, 1]
    assert list(a["end_state"]) == ["failed", "completed", "completed", "cancelled", "completed", "running"]
    assert (a["gang_complete"] == a["first_assigned"]).all()
    # the job left out for no attempts, and the attempt left out for no start_time
    assert "application_1506638472019_14302" not in a.index.get_level_values(0)
    assert ("application_1506638472019_14310", 1) in a.index
    assert ("application_1506638472019_14310", 0) not in a.index
    # the running attempt is censored at the latest time in the log (job 14199's end, 06:53:12 PDT)
    assert a.loc[("application_1506638472019_14377", 0), "release"] == _utc("2017-10-09 13:53:12")
    assert ledger.read == 6 and ledger.kept == 3 and ledger.repaired == 2 and ledger.rejected == 1
    assert ledger.balanced()
    (rej,) = [e for e in ledger.entries if e.action == "rejected"]
    assert (rej.row, rej.field) == (4, "attempts") and "no recorded scheduling attempt" in rej.reason
    flags = {(f.code, f.row) for f in ledger.flags}
    assert flags == {("gang_complete_inferred_at_start", 3), ("unknown_job_status", 6)}
    assert "no time-based goodput" in recs.extra["notes"]["use"]


def test_philly_waits_and_cohorts_by_hand():
    recs, _ = READERS["philly"].read(PHILLY)
    waits = queue_waits(recs.allocations)
    # submit -> start of each attempt, seconds: 30 and 7 (the retry), 300, 3600, 10, 600
    assert waits["wait_s"].tolist() == [30.0, 7.0, 300.0, 3600.0, 10.0, 600.0]
    assert (waits["partial_hold_s"] == 0).all()
    co = cohort_goodput(recs.allocations).set_index("cohort")
    # held GPU-seconds: cohort 1: 1 x 3300 + 1 x 2592 (running until 13:53:12); 2-8: 8 x 74 + 8 x 193182
    # (2 d 5 h 39 min 42 s) + 4 x 1790; 9-64: 16 x 86400
    assert co.loc["1", "held_device_s"] == pytest.approx(3300 + 2592)
    assert co.loc["2-8", "held_device_s"] == pytest.approx(8 * 74 + 8 * 193_182 + 4 * 1790)
    assert co.loc["9-64", "held_device_s"] == pytest.approx(16 * 86_400)
    assert co.loc["2-8", "mean_wait_s"] == pytest.approx((30 + 7 + 10) / 3)
    assert co.loc["2-8", "jobs"] == 2 and co.loc["2-8", "allocations"] == 3


def test_philly_window_and_zone():
    recs, _ = READERS["philly"].read(PHILLY, window=("2017-10-07T00:00Z", "2017-10-09T14:00Z"))
    run = recs.allocations[recs.allocations["end_state"] == "running"]
    assert run["release"].tolist() == [_utc("2017-10-09 14:00")]
    recs, _ = READERS["philly"].read(PHILLY, tz="UTC")
    assert recs.allocations["submit"].iloc[0] == _utc("2017-10-07 01:11:39")
    assert "America/Los_Angeles" in READERS["philly"].read(PHILLY)[0].extra["notes"]["time_zone"]


def test_philly_bad_corpus_messages():
    recs, ledger = READERS["philly"].read(CORPUS / "philly/bad_jobs.json")
    assert recs.allocations["job_id"].tolist() == ["job_ok", "job_dst"]
    got = {e.row: (e.field, e.reason) for e in ledger.entries}
    expect = {
        2: ("jobid", "duplicate jobid"),
        3: ("end_time", "attempts[0] ends before it starts"),
        4: ("start_time", "attempts[0] starts before the job was submitted"),
        5: ("start_time", "attempts[1] starts before the previous attempt ended"),
        # the repeated DST hour: kept, read at the earlier offset (PDT) and named
        6: ("submitted_time", "'2017-11-05 01:30:00' is ambiguous in America/Los_Angeles"),
        7: ("start_time", "attempts[0].start_time 'yesterday' is not a time"),
        8: (None, "not a JSON object"),
        9: ("jobid", "jobid missing"),
    }
    assert set(got) == set(expect)
    for row, (fld, text) in expect.items():
        assert got[row][0] == fld and text in got[row][1], (row, got[row])
    assert ledger.read == 9 and ledger.rejected == 7 and ledger.repaired == 1 and ledger.kept == 1
    dst = recs.allocations.set_index("job_id").loc["job_dst"]
    assert dst["submit"] == _utc("2017-11-05 08:30")  # 01:30 PDT (UTC-7)
    assert dst["gang_complete"] == _utc("2017-11-05 11:00")  # 03:00 PST (UTC-8), after the change


@pytest.mark.parametrize(
    ("name", "text"), [("truncated.json", "malformed JSON"), ("empty.json", "empty file")]
)
def test_philly_unreadable_files(name, text):
    with pytest.raises(InputError, match=text) as info:
        READERS["philly"].read(CORPUS / "philly" / name)
    assert info.value.file == str(CORPUS / "philly" / name)


# ---------------------------------------------------------------------------------------------------
# PAI 2020
# ---------------------------------------------------------------------------------------------------


def _s(seconds: float) -> pd.Timestamp:
    return pd.Timestamp(int(seconds * 1e9), tz="UTC")


def test_pai_jobs_gangs_and_waits_by_hand():
    recs, ledger = READERS["pai"].read(PAI)
    a = recs.allocations.set_index("job_id")
    j2 = a.loc["a1b2c3d4e5f60718293a4b5c"]  # PS (CPU) + 2 GPU workers; instances launch at +30 s, +100 s
    assert (j2["submit"], j2["first_assigned"], j2["gang_complete"], j2["release"]) == (
        _s(1_000_000),
        _s(1_000_030),
        _s(1_000_100),
        _s(1_003_600),
    )
    assert j2["devices"] == 2 and j2["pool"] == "P100"
    j3 = a.loc["0f1e2d3c4b5a69788796a5b4"]  # plan_gpu 50: half a GPU, rounded up
    assert j3["gpu_share"] == 0.5 and j3["devices"] == 1 and j3["pool"] == "T4"
    j5 = a.loc["5e5e5e5e1a2b3c4d5e6f7a8b"]  # still running: censored at the latest time (j1's end)
    assert (j5["end_state"], j5["devices"], j5["release"]) == ("running", 8, _s(4_551_416))
    j6 = a.loc["6a6b6c6d6e6f707172737475"]  # still waiting: never assigned
    assert j6["end_state"] == "pending" and pd.isna(j6["first_assigned"]) and j6["release"] == _s(4_551_416)
    j7 = a.loc["7f7e7d7c7b7a797877767574"]  # the blank-plan_gpu evaluator asks no GPU; the worker asks 2
    assert (j7["devices"], j7["pool"], j7["end_state"]) == (2, "MISC", "failed")
    assert "c0ffee00c0ffee00c0ffee00" not in a.index  # CPU-only
    waits = queue_waits(recs.allocations).set_index("job_id")
    # submit -> gang completion: 21, 100 (30 pending + 70 partial hold), 5, 600, (pending to end), 50
    assert waits.loc["4b3f04b66a525d2df903eb16", "wait_s"] == 21
    assert tuple(waits.loc["a1b2c3d4e5f60718293a4b5c", ["wait_s", "pending_s", "partial_hold_s"]]) == (
        100,
        30,
        70,
    )
    assert waits.loc["0f1e2d3c4b5a69788796a5b4", "wait_s"] == 5
    assert waits.loc["5e5e5e5e1a2b3c4d5e6f7a8b", "wait_s"] == 600
    assert waits.loc["6a6b6c6d6e6f707172737475", "wait_s"] == 4_551_416 - 3_500_000
    assert waits.loc["7f7e7d7c7b7a797877767574", "wait_s"] == 50
    assert (ledger.read, ledger.kept, ledger.repaired, ledger.rejected) == (23, 18, 3, 2)
    flags = sorted((Path(f.file).name, f.row, f.code) for f in ledger.flags)
    assert flags == [
        ("pai_job_table.csv", 2, "gang_complete_inferred"),
        ("pai_job_table.csv", 3, "fractional_gpu_rounded_up"),
        ("pai_job_table.csv", 5, "gang_complete_inferred"),
    ]
    inst = recs.extra["installed"].set_index("model")["devices"].to_dict()
    assert inst == {"P100": 4, "T4": 2, "V100": 8}


def test_pai_header_line_is_accepted(tmp_path):
    from fleetlib.scheduling.readers.pai import PAI_COLUMNS

    paths = []
    for kind, src in zip(("job", "task", "instance", "machine_spec"), PAI, strict=True):
        p = tmp_path / src.name
        p.write_text(",".join(PAI_COLUMNS[kind]) + "\n" + src.read_text())
        paths.append(p)
    with_header, ledger = READERS["pai"].read(paths)
    plain, _ = READERS["pai"].read(PAI)
    pd.testing.assert_frame_equal(with_header.allocations, plain.allocations)
    # rows are file lines: the header is line 1, so the CPU-only job is now line 5
    assert [e.row for e in ledger.entries if e.action == "rejected" and e.file.endswith("job_table.csv")] == [
        5
    ]


def test_pai_bad_corpus_messages():
    _, ledger = READERS["pai"].read([PAI[0], CORPUS / "pai/bad_task_table.csv"])
    tasks = {e.row: (e.field, e.reason) for e in ledger.entries if e.file.endswith("bad_task_table.csv")}
    expect = {
        1: "part of a job rejected at",
        2: "duplicate task of the same job",
        3: "inst_num is not a positive whole number",
        4: "plan_gpu is not a non-negative per cent",
        5: "ends before it starts",
        6: "task launched before its job was submitted",
        7: "job_name not in pai_job_table",
        8: "7 fields where pai_task_table has 10",
    }
    assert set(tasks) == set(expect)
    for row, text in expect.items():
        assert text in tasks[row][1], (row, tasks[row])
    jobs = {e.row: e.reason for e in ledger.entries if e.file.endswith("pai_job_table.csv")}
    assert "bad_task_table.csv line 2" in jobs[1] and "no task rows" in jobs[4]
    assert ledger.kept == 0 and ledger.balanced()


def test_pai_missing_tables_and_unknown_files(tmp_path):
    with pytest.raises(InputError, match="no pai_task_table"):
        READERS["pai"].read([PAI[0]])
    with pytest.raises(InputError, match="no pai_job_table"):
        READERS["pai"].read([PAI[1]])
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b,c\n")
    with pytest.raises(InputError, match="3 fields: not a PAI 2020 table"):
        READERS["pai"].read([odd])
    with pytest.raises(InputError, match="header only"):
        READERS["pai"].read([CORPUS / "pai/header_only.csv"])


def test_pai_window_censors_open_jobs():
    end = _s(4_600_000)
    recs, _ = READERS["pai"].read(PAI, window=(_s(0), end))
    open_rows = recs.allocations[recs.allocations["end_state"].isin(["running", "pending"])]
    assert (open_rows["release"] == end).all() and len(open_rows) == 2


def test_registered_and_dispatched():
    assert {"philly", "pai"} <= set(READERS)
    recs, _ = read(PHILLY, "philly")
    assert len(recs.allocations) == 6
    recs, _ = read(PAI, "pai")
    assert np.isclose(recs.allocations["gpu_share"].sum(), 1 + 2 + 0.5 + 8 + 1 + 2)
