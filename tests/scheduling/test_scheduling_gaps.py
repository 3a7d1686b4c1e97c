"""Collection gaps: stretches where no pool has any record of any job while capacity persists."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fleetlib.accounting import Window
from fleetlib.quality import DomainError
from fleetlib.scheduling import collection_gaps, measure, read
from fleetlib.scheduling.commands import render_scheduling, run_scheduling

HELIOS = Path(__file__).resolve().parents[2] / "data" / "scheduler" / "helios_earth_may2020"
T0 = pd.Timestamp("2025-01-01", tz="UTC")


def t(hours: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(hours=hours)


def two_pools() -> dict[str, pd.DataFrame]:
    """Pools a (8 devices, 0-12 h) and b (4 devices, 0-6 h); jobs leave holes at 3-4.5 h, 6.5-7 h and 8-12 h.

    3-4.5 h: 90 min with 12 devices in service -> a gap of 18 device-h; 6.5-7 h: 30 min -> too short;
    8-10 h: a queue row has a pending job -> not a gap; 10-12 h: 2 h with 8 devices -> 16 device-h.
    """
    cap = pd.DataFrame({"pool": ["a", "b"], "start": [t(0), t(0)], "end": [t(12), t(6)],
                        "devices_in_service": [8, 4], "devices_out_of_service": [0, 0]})
    spans = [("a", 0, 2, 3), ("b", 1, 1, 2), ("a", 4.5, 4.5, 6.5), ("b", 7, 7, 8)]
    alloc = pd.DataFrame({"job_id": [1, 2, 3, 4], "attempt": [0] * 4, "pool": [s[0] for s in spans],
                          "devices": [2] * 4, "submit": [t(s[1]) for s in spans],
                          "first_assigned": [t(s[2]) for s in spans],
                          "gang_complete": [t(s[2]) for s in spans],
                          "release": [t(s[3]) for s in spans], "priority": [0] * 4, "elastic": [False] * 4,
                          "end_state": ["completed"] * 4, "requested_devices": [2] * 4})
    queue = pd.DataFrame({"pool": ["a"], "start": [t(8)], "end": [t(10)], "pending_jobs": [1],
                          "pending_devices": [16]})
    return {"allocations": alloc, "capacity": cap, "queue": queue}


def test_a_hand_built_fleet_has_the_gaps_counted_by_hand():
    tables = two_pools()
    gaps = collection_gaps(tables, Window.between(t(0), t(12)))
    assert list(gaps["start"]) == [t(3), t(10)] and list(gaps["end"]) == [t(4.5), t(12)]
    assert list(gaps["seconds"]) == [5400.0, 7200.0]
    assert list(gaps["device_s"]) == [12 * 5400.0, 8 * 7200.0]
    # configurable: 20 min finds the 30-min hole too; 100 min keeps only the 2-h one
    short = collection_gaps(tables, Window.between(t(0), t(12)), min_gap_s=20 * 60)
    assert list(short["start"]) == [t(3), t(6.5), t(10)] and short["device_s"].iloc[1] == 8 * 1800.0
    assert list(collection_gaps(tables, Window.between(t(0), t(12)), min_gap_s=100 * 60)["start"]) == [t(10)]
    # an excluded stretch is never a gap; what is left of a partly excluded one is measured alone
    win = Window.between(t(0), t(12)).excluding([(t(3), t(4.5)), (t(11), t(12))])
    left = collection_gaps(tables, win)
    assert list(left["start"]) == [t(10)] and left["seconds"].tolist() == [3600.0]
    assert collection_gaps(tables, win, min_gap_s=3601).empty
    with pytest.raises(DomainError, match="must be > 0 s"):
        collection_gaps(tables, Window.between(t(0), t(12)), min_gap_s=0)


def test_measure_flags_each_gap_and_keeps_s_until_it_is_excluded():
    tables = two_pools()
    m = measure(tables, window=(t(0), t(12)))
    plain = measure(tables, window=(t(0), t(12)), collection_gap_s=None)
    assert m.factor() == plain.factor() and plain.gaps is None
    flags = [f for f in m.ledger.flags if f.code == "collection_gap"]
    assert [f.time for f in flags] == [t(3).isoformat(), t(10).isoformat()]
    assert "(90 min) while 18.0 device-h of capacity persist" in flags[0].message
    assert flags[0].message.endswith(f"--window {t(0).isoformat()} {t(12).isoformat()} "
                                     f"--exclude {t(3).isoformat()} {t(4.5).isoformat()}")
    d = m.to_dict()["collection_gaps"]
    assert d[1] == {"start": t(10).isoformat(), "end": t(12).isoformat(), "seconds": 7200.0,
                    "device_s": 57600.0}
    cut = measure(tables, window=(t(0), t(12)), exclude=[(t(3), t(4.5))])
    assert [g["start"] for g in cut.to_dict()["collection_gaps"]] == [t(10).isoformat()]
    assert cut.factor().denominator == plain.factor().denominator - 12 * 5400.0


def _raw_gaps(min_minutes: int) -> list[dict[str, object]]:
    """The gaps read straight from the raw sequences: minutes where every VC has no job of any kind."""
    frames = [pd.read_csv(f, usecols=["time", "total_job_num", "total_gpu_num"], index_col="time")
              for f in sorted(HELIOS.glob("vc*.csv.gz"))]
    jobs = sum(f["total_job_num"] for f in frames)
    cap = sum(f["total_gpu_num"] for f in frames)
    empty = (jobs == 0) & (cap > 0)
    run = (empty != empty.shift()).cumsum()
    out = []
    for _, minutes in empty.groupby(run):
        if minutes.iloc[0] and len(minutes) >= min_minutes:
            first = pd.Timestamp(minutes.index[0]).tz_localize("Asia/Shanghai").tz_convert("UTC")
            end = first + pd.Timedelta(minutes=len(minutes))
            out.append({"start": first.isoformat(), "end": end.isoformat(),
                        "seconds": 60.0 * len(minutes), "device_s": 60.0 * float(cap[minutes.index].sum())})
    return out


def test_the_bundled_helios_sequences_show_the_gaps_the_raw_files_show():
    vcs = sorted(HELIOS.glob("vc*.csv.gz"))
    res = run_scheduling(vcs, "helios-sequence")
    want = _raw_gaps(60)
    assert res["collection_gaps"] == want
    assert [g["seconds"] for g in want] == [1445 * 60.0, 121 * 60.0]  # the lost day, and two hours on 12 May
    assert round(res["scheduling_goodput"], 4) == 0.7091  # S keeps its all-records value
    text = render_scheduling(res)
    win = f"--window {res['window']['start']} {res['window']['end']}"
    assert f"beside {win}" in text
    assert f"--exclude {want[0]['start']} {want[0]['end']}" in text
    assert [f["code"] for f in res["ledger"]["flags"]].count("collection_gap") == 2
    # a longer threshold keeps the day only; excluding the day as suggested leaves the two hours
    assert run_scheduling(vcs, "helios-sequence", collection_gap_min=130)["collection_gaps"] == want[:1]
    cut = run_scheduling(vcs, "helios-sequence", window=[res["window"]["start"], res["window"]["end"]],
                         exclude=[[want[0]["start"], want[0]["end"]]])
    assert cut["collection_gaps"] == want[1:]
    left = res["capacity_device_s"] - want[0]["device_s"]
    assert cut["capacity_device_s"] == pytest.approx(left, rel=1e-12)
    with pytest.raises(DomainError, match="--collection-gap"):
        run_scheduling(vcs, "helios-sequence", collection_gap_min=0)


# ------------------------------------------------------------------------------------------------
# Clipped values: Helios clips running GPUs to the total while the size-split parts are not clipped
# ------------------------------------------------------------------------------------------------

PARTS = ["running_gpu_num_noless_8", "running_gpu_num_less_8"]


def test_the_bundled_helios_parts_above_the_total_are_flagged_with_count_and_device_time():
    vcs = sorted(HELIOS.glob("vc*.csv.gz"))
    records, ledger = read(vcs, "helios-sequence")
    want = []
    for f in vcs:  # an independent pass over the raw files
        raw = pd.read_csv(f, usecols=["total_gpu_num", *PARTS])
        excess = raw[PARTS].sum(axis=1) - raw["total_gpu_num"]
        want.append((f.name.split(".")[0], int((excess > 0).sum()), 60.0 * float(excess[excess > 0].sum())))
    got = records.extra["above_quota"]
    assert list(got.itertuples(index=False, name=None)) == want
    assert sum(w[1] for w in want) == 2492 and want[3][:2] == ("vchbv", 2054)
    flags = [f for f in ledger.flags if f.code == "allocated_above_quota"]
    assert [Path(f.file).name for f in flags] == [f.name for f in vcs]
    assert flags[3].message.startswith(f"2,054 minutes where the size-split running GPUs "
                                       f"({' + '.join(PARTS)}) exceed total_gpu_num, "
                                       f"{want[3][2] / 3600:,.2f} device-h")
    # what S measures is unchanged: running_gpu_num, clipped to the total
    assert round(measure(records, ledger=ledger).scheduling_goodput, 4) == 0.7091


def test_a_hand_built_sequence_flags_only_the_minutes_whose_parts_exceed_the_total(tmp_path):
    head = ",".join(["time", "total_gpu_num", "running_gpu_num", "idle_gpu_num", "pending_gpu_num",
                     "pending_gpujob_num", *PARTS])
    rows = ["2020-05-01 00:00:00,16,16,0,0,0,8,8",  # parts == total: fine
            "2020-05-01 00:01:00,16,16,0,0,0,16,4",  # 4 above
            "2020-05-01 00:02:00,16,10,6,0,0,8,2",  # below
            "2020-05-01 00:03:00,16,16,0,0,0,24,3",  # 11 above
            "2020-05-01 00:04:00,16,17,0,0,0,24,3"]  # running + idle != total: rejected, not flagged
    path = tmp_path / "vcX.csv"
    path.write_text("\n".join([head, *rows]) + "\n")
    records, ledger = read([path], "helios-sequence")
    assert list(records.extra["above_quota"].itertuples(index=False, name=None)) == [("vcX", 2, 15 * 60.0)]
    (flag,) = [f for f in ledger.flags if f.code == "allocated_above_quota"]
    assert flag.row == 3 and flag.message.startswith("2 minutes") and "(900 device-s)" in flag.message
    assert ledger.rejected == 1
    # without the parts there is nothing to compare
    path.write_text("\n".join([",".join(head.split(",")[:6]), *(",".join(r.split(",")[:6]) for r in rows)]))
    records, ledger = read([path], "helios-sequence")
    assert "allocated_above_quota" not in ledger.codes()
    assert records.extra["above_quota"]["minutes"].tolist() == [0]
