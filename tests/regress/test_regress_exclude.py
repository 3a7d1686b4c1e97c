"""Exclusion windows in the regression units: S's cycles add up to the excluded window's S."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

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
