"""Figures that hide nothing: no legend over bars or over an axis label, no bar cut at the axes' top.

Each figure is drawn from a hand-built frame, rendered (Agg), and the display boxes of its artists are
read back: the legend's box must not meet any bar, marker line or the x-axis label, and every bar must
end inside the axes.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import Rectangle

from fleetlib import plots


@pytest.fixture(autouse=True)
def close_figs():
    yield
    plt.close("all")


def _boxes(ax) -> dict:
    """Render the figure; return display boxes of the legend, the x label, the bars and the lines."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bars = [p.get_window_extent(renderer) for p in ax.patches
            if isinstance(p, Rectangle) and p.get_width() and p.get_height()]
    lines = [line.get_window_extent(renderer) for line in ax.lines]
    return {"legend": ax.get_legend().get_window_extent(renderer),
            "xlabel": ax.xaxis.label.get_window_extent(renderer),
            "axes": ax.get_window_extent(renderer), "bars": bars, "lines": lines}


def _assert_legend_hides_nothing(ax) -> None:
    found = _boxes(ax)
    legend = found["legend"]
    assert not legend.overlaps(found["xlabel"]), "legend over the x-axis label"
    hidden = [b for b in found["bars"] + found["lines"] if legend.overlaps(b)]
    assert not hidden, f"legend over {len(hidden)} drawn artist(s)"


def _assert_bars_inside(ax) -> None:
    found = _boxes(ax)
    top = found["axes"].y1
    cut = [b for b in found["bars"] if b.y1 > top + 0.5]
    assert not cut, f"{len(cut)} bar(s) cut at the axes' top"


def openb_waits() -> pd.DataFrame:
    # the shape of openb: the largest 90th percentile in the last cohorts, under where a legend sits
    return pd.DataFrame({"cohort": ["CPU only", "shared (<1 GPU)", "1 GPU", "2 GPUs", "4 GPUs", "8 GPUs"],
                         "wait_p50_s": [3.0, 1.0, 2.0, 1.0, 0.0, 0.0],
                         "wait_p90_s": [34.0, 140.0, 130.0, 35.0, 1.7, 147.0]})


def test_openb_wait_bars_fit_and_the_legend_hides_no_bar() -> None:
    ax = plots.openb_wait_bars(openb_waits())
    _assert_bars_inside(ax)
    _assert_legend_hides_nothing(ax)
    assert ax.get_ylim()[1] > 147.0


def test_openb_wait_bars_in_a_two_panel_figure() -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.2), layout="constrained")
    plots.openb_wait_bars(openb_waits(), ax=left)
    right.bar([0, 1], [0.5, 1.0], label="other panel")
    _assert_legend_hides_nothing(left)
    legend = left.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert not legend.overlaps(right.get_window_extent(fig.canvas.get_renderer()))


def test_step_wall_legend_clears_its_x_label() -> None:
    parts = list(plots.PARTITION_PARTS)
    rows = [(r, 1, 5000 - 300 * r, 1000, 100 * r, 200, 40, 760) for r in range(4)]
    frame = pd.DataFrame(rows, columns=["rank", "step", *parts], dtype=float)
    frame["step_wall_us"] = frame[parts].sum(axis=1)
    ax = plots.step_partition_bars(frame)
    _assert_legend_hides_nothing(ax)
    assert np.isfinite(ax.get_xlim()).all()


@pytest.mark.parametrize("days", [1, 30])
def test_daily_series_x_axis_spans_the_days_drawn(days: int) -> None:
    import matplotlib.dates as mdates

    starts = pd.date_range("2024-03-04", periods=days, freq="1D", tz="UTC")
    daily = pd.DataFrame({"pool": ["gpu"] * days + ["h100"] * days, "start": list(starts) * 2,
                          "scheduling_goodput": np.linspace(0.5, 0.9, 2 * days)})
    ax = plots.daily_series(daily)
    lo, hi = (mdates.num2date(v) for v in ax.get_xlim())
    first, last = starts[0], starts[-1]
    assert lo <= first and hi >= last
    # one day alone: no more than a day either side (matplotlib alone would show four years)
    assert (first - lo) <= pd.Timedelta(days=1) + (last - first) * 0.05
    assert (hi - last) <= pd.Timedelta(days=1) + (last - first) * 0.05


def test_factor_series_legend_hides_no_line_near_one() -> None:
    table = pd.DataFrame({"window": ["d1", "d2", "d3"], "S": [0.97, 0.99, 0.98], "R": [0.9, 0.95, 0.96],
                          "P": [0.4, 0.5, 0.45], "MPG": [0.35, 0.47, 0.42]})
    _assert_legend_hides_nothing(plots.fleet.factor_series(table))


def test_cohort_goodput_legend_hides_no_bar() -> None:
    cohorts = pd.DataFrame({"cohort": ["1", "2-8", "9-64", "65-512"], "job_scheduling_goodput": [1.0] * 4,
                            "capacity_share": [0.01, 0.05, 0.2, 0.4]})
    _assert_legend_hides_nothing(plots.cohort_goodput_bars(cohorts))
