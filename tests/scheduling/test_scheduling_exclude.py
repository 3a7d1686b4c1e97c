"""Exclusion windows in the scheduling rung: an excluded stretch leaves capacity, held time, every loss."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fleetlib.accounting import Window
from fleetlib.quality import DomainError
from fleetlib.scheduling import goodput_timeseries, held_time, measure, scheduling_partition
from fleetlib.scheduling.commands import render_scheduling, run_scheduling, run_synth_allocations
from fleetlib.scheduling.synth import synthetic_fleet

T0 = pd.Timestamp("2025-01-01", tz="UTC")


def t(hours: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(hours=hours)


def one_gang() -> dict[str, pd.DataFrame]:
    """One pool of 10 devices for 10 h; one gang of 8 submitted at 0 h, complete at 2 h, released at 10 h."""
    cap = pd.DataFrame({"pool": ["a"], "start": [t(0)], "end": [t(10)], "devices_in_service": [10],
                        "devices_out_of_service": [0]})
    alloc = pd.DataFrame({"job_id": [1], "attempt": [0], "pool": ["a"], "devices": [8], "submit": [t(0)],
                          "first_assigned": [t(0)], "gang_complete": [t(2)], "release": [t(10)],
                          "priority": [0], "elastic": [False], "end_state": ["completed"],
                          "requested_devices": [8]})
    return {"allocations": alloc, "capacity": cap}


def test_an_excluded_stretch_leaves_capacity_held_time_and_idle_time_as_computed_by_hand():
    win = Window.between(t(0), t(10)).excluding([(t(4), t(6))])
    f = scheduling_partition(**one_gang(), window=win).factor()
    h = 3600.0
    # by hand: 10 devices x 8 included hours; the gang holds 8 devices over 2..4 h and 6..10 h; it is
    # partial (first assigned -> complete) over 0..2 h; 2 free devices wait with a queue over 0..2 h and
    # with an empty queue over the 6 included hours after it
    assert f.denominator == 80 * h and f.numerator == 48 * h and f.value == pytest.approx(0.6, abs=1e-15)
    assert f.losses == {"partial_gang_hold": 16 * h, "reservation": 0.0, "idle_with_queue": 4 * h,
                        "idle_empty_queue": 12 * h, "unattributed": 0.0}
    assert f.window.same_as(win) and f.window.excluded_s == 2 * h
    whole = scheduling_partition(**one_gang(), window=Window.between(t(0), t(10))).factor()
    assert whole.denominator - f.denominator == 20 * h and whole.numerator - f.numerator == 16 * h
    held = held_time(one_gang()["allocations"], window=win)
    assert held["held_device_s"].sum() == f.numerator and held["partial_hold_device_s"].sum() == 16 * h


def test_excluding_a_middle_stretch_gives_the_sums_of_the_two_sides_measured_apart():
    fleet = synthetic_fleet(3_000, seed=4, days=3)
    tables = {"allocations": fleet.allocations, "capacity": fleet.capacity,
              "reservations": fleet.reservations}
    t0, t3 = fleet.capacity["start"].min(), fleet.capacity["end"].max()
    t1, t2 = t0 + pd.Timedelta(hours=17, minutes=20), t0 + pd.Timedelta(hours=41, seconds=7)
    excluded = scheduling_partition(**tables, window=Window.between(t0, t3).excluding([(t1, t2)])).table
    left = scheduling_partition(**tables, window=Window.between(t0, t1)).table
    right = scheduling_partition(**tables, window=Window.between(t2, t3)).table
    whole = scheduling_partition(**tables, window=Window.between(t0, t3)).table
    both = left + right
    for col in excluded.columns:
        np.testing.assert_allclose(excluded[col].to_numpy(), both[col].to_numpy(), rtol=1e-12, atol=1e-6)
    assert (excluded["capacity_device_s"] < whole["capacity_device_s"]).all()
    held = held_time(fleet.allocations, window=Window.between(t0, t3).excluding([(t1, t2)]))
    assert math.isclose(held["held_device_s"].sum(), excluded["held_device_s"].sum(), rel_tol=1e-12)


def test_measure_records_the_exclusions_in_its_window_its_ledger_and_its_json():
    m = measure(one_gang(), window=(t(0), t(10)), exclude=[(t(4), t(6))])
    assert m.factor().value == pytest.approx(0.6, abs=1e-15)
    d = m.to_dict()
    assert d["window"]["excluded_s"] == 7200.0 and len(d["window"]["exclusions"]) == 1
    flags = [f for f in d["ledger"]["flags"] if f["code"] == "excluded_time"]
    assert len(flags) == 1
    assert flags[0]["message"].startswith("1 interval(s) excluded, 7200 s of the window's 36000 s")
    with pytest.raises(DomainError) as err:
        measure(one_gang(), exclude=[(t(4), t(6))])
    assert str(err.value) == "exclusions need a measured window to lie in: give the window too"


def test_the_command_takes_exclude_and_lists_it(tmp_path):
    out = tmp_path / "fleet.parquet"
    res = run_synth_allocations(400, 3, out, days=2)
    start = pd.Timestamp(res["window"]["start"])
    win = [start.isoformat(), (start + pd.Timedelta(days=2)).isoformat()]
    cut = [(start + pd.Timedelta(hours=5)).isoformat(), (start + pd.Timedelta(hours=9)).isoformat()]
    got = run_scheduling([out], "canonical", window=win, exclude=[cut])
    assert got["window"]["exclusions"][0]["seconds"] == 4 * 3600.0
    plain = run_scheduling([out], "canonical", window=win)
    assert got["capacity_device_s"] < plain["capacity_device_s"] and plain["window"]["exclusions"] == []
    text = render_scheduling(got)
    assert "excluded                 4.00 h in 1 interval(s)" in text and "excluded_time" in text
    with pytest.raises(DomainError) as err:
        run_scheduling([out], "canonical", exclude=[cut])
    assert str(err.value) == "--exclude needs --window START END: the exclusions lie inside the window"
    with pytest.raises(DomainError) as err:
        run_scheduling([out], "canonical", window=win, exclude=[cut, [cut[0], win[1]]])
    assert "overlap; give their union as one exclusion" in str(err.value)


def test_the_hourly_series_of_an_excluded_window_adds_up_to_its_partition():
    fleet = synthetic_fleet(2_000, seed=7, days=2)
    tables = {"allocations": fleet.allocations, "capacity": fleet.capacity,
              "reservations": fleet.reservations}
    t0, t3 = fleet.capacity["start"].min(), fleet.capacity["end"].max()
    cut = (t0 + pd.Timedelta(hours=5, minutes=15), t0 + pd.Timedelta(hours=9, minutes=45))
    win = Window.between(t0, t3).excluding([cut])
    series = goodput_timeseries(**tables, window=win, freq="1h")
    table = scheduling_partition(**tables, window=win).table
    columns = ["capacity_device_s", "out_of_service_device_s", "held_device_s", "partial_gang_hold",
               "reservation", "idle_with_queue", "idle_empty_queue", "cross_pool_idle_with_queue",
               "cross_pool_idle_empty_queue"]
    summed = series.groupby("pool", observed=True)[columns].sum()
    for col in summed.columns:
        np.testing.assert_allclose(summed[col].to_numpy(), table[col].to_numpy(), rtol=1e-12, atol=1e-6)
    hour = series[series["start"] == t0 + pd.Timedelta(hours=6)]
    assert (hour["capacity_device_s"] == 0).all()  # wholly excluded: the bin counts no time
