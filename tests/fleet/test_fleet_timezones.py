"""A timeline in another time zone than the scheduler records: flagged on the job join, or refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.quality import InputError

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "fleet" / "slurm_sample"


def _shift_timeline(path: Path, hours: float) -> None:
    """Move every time of a canonical timeline CSV by ``hours`` (as a host in another zone would write it)."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in ("start", "end", "time"):
        times = pd.to_datetime(table[col].where(table[col] != ""), utc=True) + pd.Timedelta(hours=hours)
        table[col] = times.dt.strftime("%Y-%m-%dT%H:%M:%SZ").fillna("")
    table.to_csv(path, index=False)


def _bundle(tmp_path: Path) -> Path:
    bundle = tmp_path / "bundle"
    shutil.copytree(SAMPLE, bundle)
    return bundle


def test_the_sample_has_no_timezone_flag() -> None:
    assert "timezone_mismatch" not in measure_fleet(SAMPLE).ledger.codes()


@pytest.mark.parametrize(("hours", "text"), [(1.0, "+1 h"), (-5.5, "-5:30 h")])
def test_one_timeline_an_offset_away_is_flagged_naming_job_offset_and_files(
    tmp_path: Path, hours: float, text: str
) -> None:
    bundle = _bundle(tmp_path)
    _shift_timeline(bundle / "timelines" / "41006.csv", hours)
    flags = [f for f in measure_fleet(bundle).ledger.flags if f.code == "timezone_mismatch"]
    assert [(f.job_id, f.file) for f in flags] == [("41006", "timelines/41006.csv")]
    assert text in flags[0].message
    assert "scheduler/sacct.txt" in flags[0].message and "UTC" in flags[0].message


def test_a_shift_of_minutes_is_not_a_time_zone(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    _shift_timeline(bundle / "timelines" / "41006.csv", 0.4)  # 24 min: a clock, not a zone
    assert "timezone_mismatch" not in measure_fleet(bundle).ledger.codes()


def test_every_job_an_hour_away_refuses_the_scheduler_zone(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    man = bundle / "fleet.yaml"
    # the records were written in UTC: read as Berlin time (CET, +1 h), every allocation moves an hour earlier
    man.write_text(man.read_text().replace("tz: UTC", "tz: Europe/Berlin"))
    with pytest.raises(InputError) as err:
        measure_fleet(bundle)
    assert err.value.field == "scheduler.tz"
    assert err.value.file is not None and err.value.file.endswith("fleet.yaml")
    assert "+1 h" in str(err.value) and "Europe/Berlin" in str(err.value)


def test_a_timeline_twenty_minutes_past_its_release_is_no_time_zone(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    path = bundle / "timelines" / "41006.csv"
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    last = pd.to_datetime(table["end"].where(table["end"] != ""), utc=True).max()
    release = pd.Timestamp("2024-03-04T05:30:05Z")  # sacct's End of 41006
    assert last <= release
    _shift_timeline(path, ((release - last) + pd.Timedelta(minutes=20)) / pd.Timedelta(hours=1))
    assert "timezone_mismatch" not in measure_fleet(bundle).ledger.codes()
