"""MPG by calendar window and by segment: rows that add up to the whole, the chain checked in each.

Independent truths: the whole window's walk (every row's numerators and denominators add up to its own),
a separate walk on each day's window (a day's row is that walk's S, R and P), the scheduler's
allocations (a job held across midnight is split between the two days), and the bundle's own pool
capacities (``FleetMeasurement.pools``).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.accounting import Window
from fleetlib.cli import main
from fleetlib.fleet import FleetMeasurement, measure_fleet, synth_fleet
from fleetlib.fleet.measure import calendar_windows
from fleetlib.quality import DomainError

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "data" / "fleet" / "synthetic"
FACTORS = ("scheduling", "runtime", "program")
SUMS = ("numerator_device_s", "denominator_device_s")


def assert_rows_add_up(fm: FleetMeasurement, rows: list[dict], rtol: float = 1e-9) -> None:
    """Every factor's numerator and denominator summed over the rows is the whole window's."""
    assert rows
    whole = fm.to_dict()["factors"]
    for f in FACTORS:
        for key in SUMS:
            total = math.fsum(r["factors"][f][key] for r in rows)
            assert math.isclose(total, whole[f][key], rel_tol=rtol), (f, key, total, whole[f][key])
    ideal = math.fsum(r["ideal_device_s"] for r in rows)
    assert math.isclose(ideal, fm.ideal_device_s, rel_tol=rtol)


def assert_chain_per_row(rows: list[dict]) -> None:
    """In each row each denominator is the previous numerator, and MPG is ideal over capacity."""
    for r in rows:
        f = r["factors"]
        assert set(r["chain"]) == {"scheduling->runtime", "runtime->program"}
        assert all(c["holds"] for c in r["chain"].values()), r["chain"]
        assert math.isclose(f["runtime"]["denominator_device_s"], f["scheduling"]["numerator_device_s"],
                            rel_tol=1e-9)
        assert math.isclose(f["program"]["denominator_device_s"], f["runtime"]["numerator_device_s"],
                            rel_tol=1e-9)
        ideal, capacity = f["program"]["numerator_device_s"], f["scheduling"]["denominator_device_s"]
        assert math.isclose(r["mpg"], ideal / capacity, rel_tol=1e-9)


# ---------------------------------------------------------------------------------------------------
# Calendar windows
# ---------------------------------------------------------------------------------------------------


def test_calendar_days_are_utc_midnights_clipped_to_the_window() -> None:
    win = Window.between(pd.Timestamp("2024-05-01T06:00Z"), pd.Timestamp("2024-05-03T12:00+02:00"))
    days = calendar_windows(win, "day")
    assert [d[0] for d in days] == ["2024-05-01", "2024-05-02", "2024-05-03"]
    assert days[0][1] == win.start and days[-1][2] == win.end
    assert days[1][1] == pd.Timestamp("2024-05-02T00:00Z") and days[1][2] == pd.Timestamp("2024-05-03T00:00Z")
    assert all(a[2] == b[1] for a, b in itertools.pairwise(days))  # they tile the window


def test_calendar_weeks_start_on_monday_utc() -> None:
    win = Window.between(pd.Timestamp("2024-05-01T00:00Z"), pd.Timestamp("2024-05-15T00:00Z"))
    weeks = calendar_windows(win, "week")
    assert [w[0] for w in weeks] == ["2024-W18", "2024-W19", "2024-W20"]
    assert weeks[1][1] == pd.Timestamp("2024-05-06T00:00Z")  # a Monday
    assert weeks[0][1] == win.start and weeks[-1][2] == win.end


def test_an_unknown_calendar_window_is_refused() -> None:
    with pytest.raises(DomainError, match="by must be one of"):
        measure_fleet(BUNDLE, by="hour")


# ---------------------------------------------------------------------------------------------------
# The bundled synthetic fleet (12 hours of one day): quick
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled() -> FleetMeasurement:
    return measure_fleet(BUNDLE, by="day", segment_by="pool")


def test_one_day_inside_the_window_is_the_whole(bundled: FleetMeasurement) -> None:
    plain = measure_fleet(BUNDLE)
    (row,) = bundled.windows
    assert row["label"] == "2024-05-01"
    for f in FACTORS:  # measuring by day leaves the whole window's numbers as they were
        assert math.isclose(bundled.factor(f).value, plain.factor(f).value, rel_tol=1e-12)
        assert math.isclose(row["factors"][f]["numerator_device_s"], plain.factor(f).numerator, rel_tol=1e-12)
    assert math.isclose(row["mpg"], plain.mpg, rel_tol=1e-12)
    assert_chain_per_row(bundled.windows)


def test_pool_segments_take_each_pools_own_capacity(bundled: FleetMeasurement) -> None:
    assert_rows_add_up(bundled, bundled.segments)
    assert_chain_per_row(bundled.segments)
    pools = bundled.to_dict()["pools"]
    assert {r["value"] for r in bundled.segments} == set(pools)
    for r in bundled.segments:
        assert r["scheduling_split"] == "the pool's own capacity"
        assert math.isclose(r["scheduling"], pools[r["value"]]["scheduling"], rel_tol=1e-12)
        assert math.isclose(r["mpg"], pools[r["value"]]["mpg"], rel_tol=1e-12)


@pytest.mark.parametrize("field", ["architecture", "software_version"])
def test_job_field_segments_add_up_with_the_fleets_s(field: str) -> None:
    fm = measure_fleet(BUNDLE, segment_by=field)
    assert_rows_add_up(fm, fm.segments)
    assert_chain_per_row(fm.segments)
    for r in fm.segments:  # no capacity of its own: the fleet's S, capacity apportioned by held time
        assert r["scheduling_split"] == "apportioned by held device-s"
        assert math.isclose(r["scheduling"], fm.scheduling.value, rel_tol=1e-12)
    assert sum(r["jobs"] for r in fm.segments) == len(fm.jobs)


def test_an_unknown_segment_field_is_refused_with_the_fields_available(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(DomainError) as err:
        measure_fleet(BUNDLE, segment_by="colour")
    assert str(err.value) == ("cannot segment by 'colour': this bundle's jobs carry pool, architecture, "
                              "software_version")
    assert main(["fleet", str(BUNDLE), "--segment-by", "colour"]) != 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pool, architecture, software_version" in lines[0]


def test_cli_prints_the_rows_and_json_carries_them(capsys: pytest.CaptureFixture) -> None:
    assert main(["fleet", str(BUNDLE), "--by", "day", "--segment-by", "pool", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["by"] == "day" and len(res["windows"]) == 1
    assert res["segment_by"] == "pool" and {r["value"] for r in res["segments"]} == set(res["pools"])
    assert main(["fleet", str(BUNDLE), "--by", "day", "--segment-by", "pool"]) == 0
    text = capsys.readouterr().out
    assert "by day (UTC" in text and "2024-05-01" in text and "by pool (S: the pool's own capacity" in text
    plain = measure_fleet(BUNDLE).to_dict()
    assert "windows" not in plain and "segments" not in plain  # only when asked for


# ---------------------------------------------------------------------------------------------------
# A 2-day fleet: the acceptance case (slow: the bundle is written once, ~30 s)
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_days(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("two_days") / "b"
    # seed 8: job 70016 is held from 2024-05-01 into 2024-05-02 (its steps run across midnight)
    return synth_fleet(out, devices=32, days=2, seed=8, inject={"versions": ["2.1", "2.2"]}).manifest


@pytest.mark.slow
def test_by_day_on_a_two_day_bundle_gives_two_rows_that_add_up(two_days: Path) -> None:
    fm = measure_fleet(two_days, by="day", segment_by="software_version")
    assert [r["label"] for r in fm.windows] == ["2024-05-01", "2024-05-02"]
    assert_rows_add_up(fm, fm.windows)
    assert_chain_per_row(fm.windows)
    assert_rows_add_up(fm, fm.segments)
    assert_chain_per_row(fm.segments)
    assert {r["value"] for r in fm.segments} == {"2.1", "2.2"}
    # a job held across midnight is split: counted in both days' rows, its steps by their share
    assert sum(r["jobs"] for r in fm.windows) == len(fm.jobs) + 1


@pytest.mark.slow
def test_the_dask_engine_gives_the_same_rows(two_days: Path) -> None:
    pandas_rows = measure_fleet(two_days, by="day").windows
    dask_rows = measure_fleet(two_days, by="day", engine="dask", workers=1).windows
    for a, b in zip(pandas_rows, dask_rows, strict=True):
        for f in FACTORS:
            for key in SUMS:
                assert math.isclose(a["factors"][f][key], b["factors"][f][key], rel_tol=1e-12)


@pytest.mark.slow
def test_each_days_row_is_the_walk_on_that_day(two_days: Path) -> None:
    fm = measure_fleet(two_days, by="day")
    for row in fm.windows:
        day = measure_fleet(two_days, window=[row["start"], row["end"]])
        for f in FACTORS:
            for key, value in (("numerator_device_s", day.factor(f).numerator),
                               ("denominator_device_s", day.factor(f).denominator)):
                assert math.isclose(row["factors"][f][key], value, rel_tol=1e-12), (row["label"], f, key)
            losses = dict(day.factor(f).losses)
            assert row["factors"][f]["losses"] == pytest.approx(losses, rel=1e-9, abs=1e-6)
        assert math.isclose(row["mpg"], day.mpg, rel_tol=1e-12)


def test_views_reshape_the_rows_and_the_plot_draws_them(bundled: FleetMeasurement) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fleetlib.fleet import views
    from fleetlib.plots.fleet import factor_series

    table = views.window_table(bundled)
    assert list(table.columns) == ["window", "start", "end", *views.SLICE_TABLE_COLUMNS]
    row = bundled.windows[0]
    assert table.loc[0, "MPG"] == row["mpg"] and bool(table.loc[0, "chain_holds"])
    assert math.isclose(table.loc[0, "capacity_device_h"] * 3600.0, bundled.capacity_device_s, rel_tol=1e-12)
    segments = views.segment_table(bundled)
    assert list(segments.columns[:2]) == ["pool", "scheduling_split"]
    assert math.isclose(segments["ideal_device_h"].sum() * 3600.0, bundled.ideal_device_s, rel_tol=1e-9)
    ax = factor_series(table)
    drawn = {line.get_label(): line.get_ydata().tolist() for line in ax.get_lines()}
    assert drawn == {k: table[k].tolist() for k in ("S", "R", "P", "MPG")}
    plt.close(ax.figure)
    assert views.window_table(measure_fleet(BUNDLE)).empty  # not measured by window: no row
