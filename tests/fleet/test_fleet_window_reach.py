"""fleetlib fleet refuses a window reaching beyond its scheduler records unless --allow-empty-window."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetlib.fleet.commands import run_fleet
from fleetlib.quality import InputError

BUNDLE = Path(__file__).resolve().parents[2] / "data" / "fleet" / "slurm_sample"
WIDE = ("2024-03-04T00:00:00Z", "2024-03-07T00:00:00Z")


def test_a_window_two_days_beyond_the_records_is_refused_then_measured_when_allowed() -> None:
    with pytest.raises(InputError) as err:
        run_fleet(BUNDLE, window=WIDE)
    message = str(err.value)
    assert "fleet.yaml" in message and "field 'window'" in message
    assert "2024-03-04T00:00:00+00:00 .. 2024-03-07T00:00:00+00:00" in message
    assert "2024-03-04T00:00:30+00:00 .. 2024-03-04T22:00:10+00:00" in message
    day = run_fleet(BUNDLE)
    wide = run_fleet(BUNDLE, window=WIDE, allow_empty_window=True)
    assert wide["factors"]["scheduling"]["value"] < day["factors"]["scheduling"]["value"]
