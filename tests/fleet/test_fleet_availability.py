"""Availability (in-service / installed capacity-time) beside MPG: fleet text, JSON and summary.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.fleet.commands import render_fleet
from fleetlib.fleet.views import measured_summary

SLURM = Path(__file__).resolve().parents[2] / "data" / "fleet" / "slurm_sample"

# by hand from the sample's sinfo and sacctmgr files: 6 GPU nodes x 8 GPUs over the day; out of service
# gpu-h02 04:30:05-08:01:10 and 15:00-17:30, gpu-a004 22:30-24:00 (8 GPUs each)
INSTALLED = 6 * 8 * 86400.0
OUT = 8 * ((3 * 3600 + 31 * 60 + 5) + 2.5 * 3600 + 1.5 * 3600)
AVAILABILITY = (INSTALLED - OUT) / INSTALLED


def test_availability_stands_beside_mpg_in_the_fleet_text_and_json() -> None:
    fm = measure_fleet(SLURM)
    assert fm.availability == pytest.approx(AVAILABILITY, rel=1e-12)
    res = fm.to_dict()
    assert res["availability"] == fm.availability
    lines = render_fleet(res).splitlines()
    mpg_line = next(i for i, line in enumerate(lines) if line.startswith("MPG"))
    assert lines[mpg_line + 1].startswith(f"availability {100 * AVAILABILITY:5.1f} %")


def test_availability_is_in_the_measured_block_of_summary_json() -> None:
    measured = measured_summary(measure_fleet(SLURM), manifest="data/fleet/slurm_sample/fleet.yaml")
    assert measured["availability"] == pytest.approx(AVAILABILITY, rel=1e-12)


def test_the_fleet_text_prints_the_ledger_and_its_first_rejections() -> None:
    res = measure_fleet(SLURM).to_dict()
    led = res["ledger"]
    lines = render_fleet(res).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("ledger: "))
    assert lines[at].startswith(f"ledger: {led['read']:,} rows read = {led['kept']:,} kept + "
                                f"{led['repaired']:,} repaired + {led['rejected']:,} rejected")
    assert led["read"] == led["kept"] + led["repaired"] + led["rejected"]
    assert "kept but unused: 25 sacct job step" in lines[at]
    rejected = [e for e in led["entries"] if e["action"] == "rejected"]
    assert len(rejected) == led["rejected"] == 2
    for e, line in zip(rejected, lines[at + 1:at + 3], strict=True):
        assert line == f"  rejected: {e['file']}, row {e['row']}, field {e['field']!r}: {e['reason']}"
