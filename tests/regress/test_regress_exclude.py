"""Exclusion windows in the regression units: S's cycles add up to the excluded window's S."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fleetlib.quality import DomainError
from fleetlib.regress.commands import render_trace_plan, run_trace_plan
from fleetlib.regress.units import fleet_units

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "data" / "fleet" / "synthetic"
CUT = ("2024-05-01T03:30:00Z", "2024-05-01T05:00:00Z")  # 03:00-04:00 partly, 04:00-05:00 wholly excluded


def test_the_hourly_cycles_of_an_excluded_window_add_up_to_its_s():
    units = fleet_units(BUNDLE, exclude=[CUT], cycle="1h")
    s = units.measurement.scheduling
    assert units.window.excluded_s == 5400.0
    assert 4 not in set(units.cycles["cycle"])  # the wholly excluded hour has no row
    assert math.isclose(units.cycles["capacity_device_s"].sum(), s.denominator, rel_tol=1e-12)
    assert math.isclose(units.cycles["held_device_s"].sum(), s.numerator, rel_tol=1e-12)


@pytest.mark.slow
def test_trace_plan_takes_exclude_and_lists_it():
    res = run_trace_plan(BUNDLE, exclude=[list(CUT)])
    assert res["window"]["exclusions"][0]["seconds"] == 5400.0
    assert "excluded                 1.50 h in 1 interval(s)" in render_trace_plan(res)


@pytest.mark.slow
def test_compare_takes_an_exclusion_per_side_and_lists_it():
    from fleetlib.quality import InputError
    from fleetlib.regress.commands import render_compare, run_compare

    a, b = ("2024-05-01T00:00:00Z", "2024-05-01T06:00:00Z"), ("2024-05-01T06:00:00Z", "2024-05-01T12:00:00Z")
    half_hour = [["2024-05-01T03:00:00Z", "2024-05-01T03:30:00Z"]]
    res = run_compare(BUNDLE, window_a=a, window_b=b, exclude_a=half_hour, cycle="1h", boot=50)
    assert res["windows"]["baseline"]["excluded_s"] == 1800.0
    assert res["windows"]["candidate"]["exclusions"] == []
    assert "baseline: excluded                 0.50 h in 1 interval(s)" in render_compare(res)
    with pytest.raises(InputError) as info:
        run_compare(BUNDLE, window_a=a, window_b=b, exclude_b=half_hour, cycle="1h", boot=50)
    assert info.value.field == "exclude" and "is not inside the window" in str(info.value)


def test_a_window_shorter_than_the_cycle_names_the_cycle_option():
    # slurm_sample's window is one day: a 2-day cycle fits no whole cycle, and the error says how to fix it
    with pytest.raises(DomainError, match=r"holds no whole cycle of 2 days .*--cycle, e\.g\. --cycle 1h"):
        fleet_units(ROOT / "data" / "fleet" / "slurm_sample", cycle="2D")
