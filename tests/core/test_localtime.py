"""Naive local times on daylight-saving nights: resolved by the stated rule, booked as named repairs, none
rejected.  Expected instants are worked out by hand: America/Los_Angeles is UTC-7 (PDT) before 2017-11-05
02:00 PDT and UTC-8 (PST) after; on 2017-03-12 the wall clock jumps from 02:00 PST to 03:00 PDT."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fleetlib.localtime import localize
from fleetlib.scheduling.readers import READERS

LA = "America/Los_Angeles"


def _utc(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def _philly_job(jobid: str, submitted: str, start: str, end: str) -> dict[str, object]:
    return {"status": "Pass", "vc": "v1", "jobid": jobid, "user": "u1", "submitted_time": submitted,
            "attempts": [{"start_time": start, "end_time": end, "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}


def test_localize_fall_back_by_record_order_then_the_earlier_offset():
    wall = pd.Series(pd.to_datetime([
        "2017-11-05 01:10", "2017-11-05 01:50",  # first pass (PDT, UTC-7)
        "2017-11-05 01:05", "2017-11-05 01:40",  # stepped back: second pass (PST, UTC-8)
        "2018-11-04 01:30",  # another night, alone: the earlier offset (PDT)
        None,
    ]))
    got = localize(wall, LA)
    assert got.utc.tolist()[:5] == [_utc("2017-11-05 08:10"), _utc("2017-11-05 08:50"),
                                    _utc("2017-11-05 09:05"), _utc("2017-11-05 09:40"),
                                    _utc("2018-11-04 08:30")]
    assert pd.isna(got.utc.iloc[5])
    assert got.first_pass.tolist() == [True, True, False, False, True, False]
    assert got.second_pass.tolist() == [False, False, True, True, False, False]
    assert not got.shifted.any()


def test_localize_spring_forward_shifts_by_the_gap():
    # 02:30 PST does not exist in Los Angeles: read at PST (UTC-8) = 10:30Z = 03:30 PDT (the 1 h gap);
    # Lord Howe springs forward by 30 min (02:00 +10:30 -> 02:30 +11:00): 02:15 is read at +10:30
    la = localize(pd.Series(pd.to_datetime(["2017-03-12 01:59", "2017-03-12 02:30", "2017-03-12 03:00"])), LA)
    assert la.utc.tolist() == [_utc("2017-03-12 09:59"), _utc("2017-03-12 10:30"), _utc("2017-03-12 10:00")]
    assert la.shifted.tolist() == [False, True, False]
    mask, why = la.repairs("start")
    assert mask.tolist() == [False, True, False]
    assert why.tolist() == ["start '2017-03-12 02:30:00' does not exist in America/Los_Angeles (clocks "
                            "sprang forward): shifted forward by the 1:00 gap to 2017-03-12T03:30:00-07:00"]
    lh = localize(pd.Series(pd.to_datetime(["2017-10-01 02:15"])), "Australia/Lord_Howe")
    assert lh.utc.tolist() == [_utc("2017-09-30 15:45")]
    assert "the 0:30 gap to 2017-10-01T02:45:00+11:00" in lh.repairs("t")[1][0]


def test_philly_fall_back_hour_is_repaired_not_rejected(tmp_path):
    jobs = [  # submission order, as the real log; every time in 01:00-01:59 happens twice that night
        _philly_job("j1", "2017-11-05 00:55:00", "2017-11-05 00:58:00", "2017-11-05 01:20:00"),
        _philly_job("j2", "2017-11-05 01:10:00", "2017-11-05 01:15:00", "2017-11-05 01:30:00"),
        _philly_job("j3", "2017-11-05 01:50:00", "2017-11-05 01:55:00", "2017-11-05 01:10:00"),
        _philly_job("j4", "2017-11-05 01:05:00", "2017-11-05 01:06:00", "2017-11-05 01:30:00"),
        _philly_job("j5", "2017-11-05 01:40:00", "2017-11-05 01:45:00", "2017-11-05 03:00:00"),
        _philly_job("j6", "2017-11-05 02:05:00", "2017-11-05 02:10:00", "2017-11-05 03:00:00"),
    ]
    path = tmp_path / "cluster_job_log.json"
    path.write_text(json.dumps(jobs))
    recs, ledger = READERS["philly"].read(path)
    a = recs.allocations.set_index("job_id")
    # by hand: first pass UTC-7, second pass (from the first step back in each column) UTC-8
    expect = {
        "j1": ("07:55", "07:58", "08:20"),  # end 01:20 is the first of the night's end times: PDT
        "j2": ("08:10", "08:15", "08:30"),
        "j3": ("08:50", "08:55", "09:10"),  # end 01:10 < 01:30 already seen: PST from here on
        "j4": ("09:05", "09:06", "09:30"),  # submit 01:05 < 01:50: PST; start 01:06 < 01:55: PST
        "j5": ("09:40", "09:45", "11:00"),
        "j6": ("10:05", "10:10", "11:00"),  # after 02:00 PST: one reading
    }
    assert list(a.index) == list(expect)
    for job, (sub, start, end) in expect.items():
        row = a.loc[job]
        assert (row["submit"], row["first_assigned"], row["release"]) == (
            _utc(f"2017-11-05 {sub}"), _utc(f"2017-11-05 {start}"), _utc(f"2017-11-05 {end}")), job
    assert (ledger.read, ledger.kept, ledger.repaired, ledger.rejected) == (6, 1, 5, 0)
    assert ledger.balanced()
    rep = {e.row: e for e in ledger.entries if e.action == "repaired"}
    assert set(rep) == {1, 2, 3, 4, 5}
    assert rep[4].field == "submitted_time,start_time,end_time"
    assert all(e.file == str(path) for e in rep.values())
    assert "submitted_time '2017-11-05 01:05:00' is ambiguous in America/Los_Angeles" in rep[4].reason
    assert "read as 2017-11-05T01:05:00-08:00, the second pass (record order, then the earlier offset)" \
        in rep[4].reason
    assert "attempts[0]: end_time '2017-11-05 01:20:00'" in rep[1].reason
    assert "2017-11-05T01:20:00-07:00, the first pass" in rep[1].reason


def test_philly_spring_forward_gap_is_shifted(tmp_path):
    path = tmp_path / "cluster_job_log.json"
    path.write_text(json.dumps([
        _philly_job("k1", "2017-03-12 01:50:00", "2017-03-12 02:30:00", "2017-03-12 03:45:00"),
    ]))
    recs, ledger = READERS["philly"].read(path)
    row = recs.allocations.iloc[0]
    # 01:50 PST = 09:50Z; 02:30 (no such time) -> 03:30 PDT = 10:30Z; 03:45 PDT = 10:45Z
    assert (row["submit"], row["first_assigned"], row["release"]) == (
        _utc("2017-03-12 09:50"), _utc("2017-03-12 10:30"), _utc("2017-03-12 10:45"))
    (e,) = ledger.entries
    assert (e.action, e.row, e.field) == ("repaired", 1, "start_time")
    assert "shifted forward by the 1:00 gap to 2017-03-12T03:30:00-07:00" in e.reason


def test_slurm_fall_back_hour_with_tz(tmp_path):
    header = ("JobID|JobIDRaw|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|State|"
              "ExitCode|AllocTRES|ReqTRES|NodeList")
    tres = "billing=8,cpu=8,gres/gpu=8,mem=100G,node=1"

    def line(job: int, submit: str, start: str, end: str, elapsed: str) -> str:
        t = "2017-11-05T"
        return (f"{job}|{job}|u|a|p|normal|1|{t}{submit}|{t}{submit}|{t}{start}|{t}{end}|{elapsed}|COMPLETED|"
                f"0:0|{tres}|{tres}|gpu-h01")

    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([
        header,
        line(1, "01:10:00", "01:20:00", "01:50:00", "00:30:00"),  # all first pass (PDT)
        line(2, "01:05:00", "01:15:00", "02:30:00", "01:15:00"),  # stepped back: PST; 02:30 PST plain
    ]) + "\n")
    rec, ledger = READERS["slurm"].read(path, tz=LA)
    a = rec.allocations.set_index("job_id")
    assert (a.loc["1", "submit"], a.loc["1", "first_assigned"], a.loc["1", "release"]) == (
        _utc("2017-11-05 08:10"), _utc("2017-11-05 08:20"), _utc("2017-11-05 08:50"))
    assert (a.loc["2", "submit"], a.loc["2", "first_assigned"], a.loc["2", "release"]) == (
        _utc("2017-11-05 09:05"), _utc("2017-11-05 09:15"), _utc("2017-11-05 10:30"))
    assert ledger.rejected == 0 and ledger.balanced()
    rep = {e.row: e for e in ledger.entries if e.action == "repaired"}
    assert np.array_equal(sorted(rep), [2, 3])  # file rows (the header is row 1)
    assert "Submit '2017-11-05T01:05:00' is ambiguous in America/Los_Angeles" in rep[3].reason
    assert rep[3].field == "Submit,Eligible,Start" and rep[2].field == "Submit,Eligible,Start,End"
