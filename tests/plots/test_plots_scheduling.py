"""Scheduler-record figures (:mod:`fleetlib.plots.scheduling`) on a small synthetic fleet."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from fleetlib import plots
from fleetlib.quality import DomainError
from fleetlib.scheduling import (
    cohort_goodput,
    goodput_timeseries,
    scheduling_partition,
    synthetic_fleet,
)


@pytest.fixture(scope="module")
def fleet():
    return synthetic_fleet(600, seed=3)


@pytest.fixture(scope="module")
def partition(fleet):
    return scheduling_partition(fleet.allocations, fleet.capacity, reservations=fleet.reservations)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _hatched(ax) -> set[str]:
    return {p.get_hatch() or "" for p in ax.patches}


def test_waterfall_draws_every_loss_and_labels_units(partition):
    factor = partition.factor()
    ax = plots.partition_waterfall(factor)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "in-service capacity" and labels[-1] == "held (S)"
    assert len(labels) == len(factor.loss_fractions) + 2
    assert "(%)" in ax.get_xlabel()
    installed = plots.partition_waterfall(partition.factor(denominator="installed"))
    assert installed.get_yticklabels()[0].get_text() == "installed capacity"
    with pytest.raises(DomainError):
        plots.partition_waterfall({"value": 0.5})


def test_pool_shares_stack_to_one_and_each_part_has_its_own_hatch(partition):
    factors = {p: partition.factor(p) for p in partition.pools}
    ax = plots.pool_shares(factors)
    assert len(ax.containers) == 1 + len(next(iter(factors.values())).loss_fractions)
    right = [max(b.get_x() + b.get_width() for b in bars) for bars in zip(*ax.containers, strict=True)]
    assert right == pytest.approx([1.0] * len(factors), abs=1e-9)
    assert len({c.patches[0].get_hatch() for c in ax.containers}) == len(ax.containers)


def test_idle_views_and_truth_bars_in_device_hours(fleet, partition):
    ax = plots.idle_views(partition.table)
    assert "device-h" in ax.get_ylabel() and len(_hatched(ax)) == 2
    heights = sorted(p.get_height() for p in ax.patches)
    idle = partition.table[["idle_with_queue", "cross_pool_idle_with_queue"]] / 3600
    expected = sorted(idle.to_numpy().ravel())
    assert heights == pytest.approx(expected)
    side = pd.DataFrame({"injected": fleet.truth.sum(), "computed": partition.totals})
    ax = plots.injected_vs_computed(side)
    assert "device-h" in ax.get_xlabel() and len(ax.patches) == 2 * len(plots.TRUTH_CATEGORIES)
    with pytest.raises(DomainError):
        plots.injected_vs_computed(side, categories=["no_such_loss"])


def test_time_series_figures(fleet):
    hourly = goodput_timeseries(fleet.allocations, fleet.capacity, freq="1h")
    profile = plots.hour_of_day_profile(hourly, clock="UTC")
    assert set(profile["hour"]) <= set(range(24))
    assert profile["idle_with_queue_h"].sum() * 3600 == pytest.approx(hourly["idle_with_queue"].sum())
    ax = plots.goodput_by_hour(profile)
    assert len({line.get_marker() for line in ax.get_lines()}) == len(ax.get_lines())
    assert "hour of day (UTC)" == ax.get_xlabel()
    ax = plots.idle_by_hour(profile)
    assert len(ax.get_lines()) == 2 and "device-h" in ax.get_ylabel()
    daily = plots.daily_capacity_table(goodput_timeseries(fleet.allocations, fleet.capacity, freq="1D"))
    assert (daily["devices_in_service"] > 0).all()
    ax = plots.daily_series(daily, column="devices_in_service")
    assert "devices" in ax.get_ylabel()
    with pytest.raises(DomainError):
        plots.daily_series(daily, column="held")


def test_cohort_bars(fleet):
    cohorts = cohort_goodput(fleet.allocations, capacity=fleet.capacity)
    ax = plots.cohort_goodput_bars(cohorts)
    assert len(ax.patches) == 2 * len(cohorts) and len(_hatched(ax)) == 2
    waits = pd.DataFrame({"cohort": ["1 GPU", "8 GPUs"], "wait_p50_s": [1.0, 30.0],
                          "wait_p90_s": [5.0, 300.0]})
    ax = plots.openb_wait_bars(waits)
    assert "(s" in ax.get_ylabel() and len(ax.patches) == 4
