"""Records far from the rest of their file: a 1970 stamp among 2026 rejected by row, a year ahead flagged."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib._io import far_times, using_limits
from fleetlib.scheduling import read

ROOT = Path(__file__).resolve().parents[2]
HELIOS = ROOT / "data/scheduler/helios_earth_may2020"
T2026 = 1_772_000_000  # 2026-02-25 (Unix seconds)


def test_far_times_judges_by_the_bulk_of_the_file():
    days = np.datetime64("2026-03-01", "ns") + np.arange(20).astype("timedelta64[D]")
    stamps = np.concatenate([days, [np.datetime64("1970-01-01", "ns"), np.datetime64("2027-03-01", "ns"),
                                    np.datetime64("NaT", "ns")]])
    far, impossible, bulk = far_times(stamps)
    assert impossible.tolist() == [False] * 20 + [True, False, False]  # 56 years: > ten margins of 90 days
    assert far.tolist() == [False] * 21 + [True, False]  # a year: > one margin, < ten
    assert bulk == "2026-03-05 .. 2026-03-15"
    assert not far_times(stamps[-4:])[1].any()  # too few times to judge


def _pai(tmp_path: Path, starts: list[float]) -> list[Path]:
    jobs, tasks = [], []
    for i, s in enumerate(starts):
        name = f"job{i:04d}"
        jobs.append(f"{name},inst{i},user1,Terminated,{s:.1f},{s + 3600:.1f}")
        tasks.append(f"{name},worker,1.0,Terminated,{s + 10:.1f},{s + 3590:.1f},600.0,29.3,100.0,V100")
    (tmp_path / "pai_job_table.csv").write_text("\n".join(jobs) + "\n")
    (tmp_path / "pai_task_table.csv").write_text("\n".join(tasks) + "\n")
    return [tmp_path / "pai_job_table.csv", tmp_path / "pai_task_table.csv"]


def test_a_pai_job_stamped_1970_among_2026_jobs_is_rejected_by_row(tmp_path):
    starts = [T2026 + 3600.0 * i for i in range(12)]
    starts[5] = 0.0  # a clock reset: 1970-01-01 (PAI's own shifted times may lie near it)
    records, ledger = read(_pai(tmp_path, starts), "pai")
    rejected = [(Path(e.file).name, e.row, e.field) for e in ledger.entries if e.action == "rejected"]
    assert rejected == [("pai_job_table.csv", 6, "start_time"), ("pai_task_table.csv", 6, "job_name")]
    assert "start_time 0 s is decades from the table's other times" in ledger.entries[0].reason
    assert "job0005" not in set(records.allocations["job_id"].astype(str))
    held = (records.allocations["release"] - records.allocations["gang_complete"]).max()
    assert held < pd.Timedelta(days=1)  # no job holds 56 years
    assert ledger.balanced()


def test_pai_seconds_near_1970_are_read_as_they_are(tmp_path):
    records, ledger = read(_pai(tmp_path, [1_000_000.0 + 3600 * i for i in range(12)]), "pai")
    assert len(records.allocations) == 12 and "time_far_from_the_rest" not in ledger.codes()


def test_a_helios_time_a_year_ahead_of_the_rest_gets_a_ledger_entry(tmp_path):
    table = pd.read_csv(HELIOS / "vc6YE.csv.gz", nrows=200, dtype=str)
    table.loc[199, "time"] = "2021-05-01 03:19:00"  # one minute's state a year ahead
    path = tmp_path / "vc6YE.csv.gz"
    path.write_bytes(gzip.compress(table.to_csv(index=False).encode()))
    _, ledger = read([path], "helios-sequence", tz="Asia/Shanghai")
    flags = [(f.row, f.field) for f in ledger.flags if f.code == "time_far_from_the_rest"]
    assert flags == [(201, "time")]  # the header is line 1
    message = next(f.message for f in ledger.flags if f.code == "time_far_from_the_rest")
    assert message == ("time 2021-04-30 19:19:00+00:00 lies far outside the file's other times (most lie in "
                       "2020-04-30 .. 2020-04-30 UTC)")  # China wall clock, UTC+8


def test_a_slurm_start_decades_before_the_rest_is_rejected_even_inside_the_plausible_years(tmp_path):
    sample = ROOT / "data/scheduler/slurm_sample"
    lines = (sample / "sacct.txt").read_text().split("\n")
    fields = lines[1].split("|")
    assert fields[0] == "41004"
    fields[9] = "1971-03-04T00:01:00"  # Start: a clock reset, inside earliest_year=1970
    lines[1] = "|".join(fields)
    (tmp_path / "sacct.txt").write_text("\n".join(lines))
    with using_limits(earliest_year=1970):
        _, ledger = read([tmp_path / "sacct.txt", sample / "sinfo_nodes.txt"], "slurm", tz="UTC")
    rejected = [(e.row, e.field, e.reason) for e in ledger.entries
                if e.action == "rejected" and e.field == "Start"]
    assert rejected == [(2, "Start", "time 1971-03-04 00:01:00+00:00 is decades from the file's other times "
                         "(most lie in 2024-03-04 .. 2024-03-04 UTC): a clock reset or a damaged time")]
