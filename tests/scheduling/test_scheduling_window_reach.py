"""A window reaching beyond the scheduler records is refused, naming both spans, unless allowed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fleetlib.quality import InputError
from fleetlib.scheduling import WINDOW_SLACK
from fleetlib.scheduling.commands import run_scheduling

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "fleet" / "slurm_sample" / "scheduler"
FILES = sorted(str(p) for p in SAMPLE.iterdir())
# the sample's sacct: the first job submitted at 00:00:30, the last one that ended released at
# 22:00:10 (job 41018); 41011 is still pending at the end (its release is the window's end)
RECORDS = "2024-03-04T00:00:30+00:00 .. 2024-03-04T22:00:10+00:00"


def test_a_window_two_days_beyond_the_records_is_refused_naming_both_spans() -> None:
    with pytest.raises(InputError) as err:
        run_scheduling(FILES, "slurm", tz="UTC", window=("2024-03-04T00:00Z", "2024-03-07T00:00Z"))
    message = str(err.value)
    assert "\n" not in message and "field 'window'" in message
    assert "2024-03-04T00:00:00+00:00 .. 2024-03-07T00:00:00+00:00" in message and RECORDS in message
    assert "--allow-empty-window" in message


def test_a_window_starting_days_before_the_records_is_refused() -> None:
    with pytest.raises(InputError, match="beyond the scheduler records"):
        run_scheduling(FILES, "slurm", tz="UTC", window=("2024-03-02T00:00Z", "2024-03-05T00:00Z"))


def test_allow_empty_window_measures_it_as_stated() -> None:
    day = run_scheduling(FILES, "slurm", tz="UTC", window=("2024-03-04T00:00Z", "2024-03-05T00:00Z"))
    wide = run_scheduling(FILES, "slurm", tz="UTC", window=("2024-03-04T00:00Z", "2024-03-07T00:00Z"),
                          allow_empty_window=True)
    # two more days of the same installed capacity, and held time only from the job still pending
    assert wide["capacity_device_s"] > 2.5 * day["capacity_device_s"]
    assert wide["scheduling_goodput"] < day["scheduling_goodput"]


def test_an_idle_tail_within_the_slack_is_measured() -> None:
    # the manifest's day ends 1 h 59 min after the last record: inside the slack, no refusal
    assert WINDOW_SLACK >= pd.Timedelta(hours=2)
    res = run_scheduling(FILES, "slurm", tz="UTC", window=("2024-03-04T00:00Z", "2024-03-05T00:00Z"))
    assert 0 < res["scheduling_goodput"] < 1
