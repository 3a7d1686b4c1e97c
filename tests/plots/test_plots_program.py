"""Tests of the step-trace figures in fleetlib.plots (rung 3).

Inputs are hand-built frames in the shapes fleetlib.program returns (a step partition, a rank x step
table, a straggler report, a collective audit, a roofline placement, an HTA comparison table).  The
tests read the drawn artists back -- bar widths and heights, image cells, marker positions -- and
compare them with the inputs; they also check that bad inputs are refused.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from fleetlib import plots
from fleetlib.plots.program import PART_LABEL
from fleetlib.quality import DomainError

PARTS = list(plots.PARTITION_PARTS)


@pytest.fixture(autouse=True)
def close_figs():
    yield
    plt.close("all")


def partition() -> pd.DataFrame:
    rows = [(0, 1, 5000, 1000, 0, 200, 40, 760), (1, 1, 4000, 1000, 1500, 200, 40, 260),
            (0, 2, 5100, 900, 100, 0, 0, 400)]
    frame = pd.DataFrame(rows, columns=["rank", "step", *PARTS], dtype=float)
    frame["step_wall_us"] = frame[PARTS].sum(axis=1)
    return frame


def test_partition_parts_distinguished_by_colour_and_hatch():
    ax = plots.step_partition_bars(partition())
    colours = {tuple(c.patches[0].get_facecolor()) for c in ax.containers[:len(PARTS)]}
    hatches = {c.patches[0].get_hatch() or "" for c in ax.containers[:len(PARTS)]}
    assert len(colours) == len(PARTS) and len(hatches) == len(PARTS)


def test_partition_bars_stack_to_the_wall_time():
    data = partition()
    ax = plots.step_partition_bars(data)
    ends = np.zeros(len(data))
    for part in PARTS:
        assert ax.containers[PARTS.index(part)].get_label() == PART_LABEL[part]
        widths = np.array([b.get_width() for b in ax.containers[PARTS.index(part)]])
        np.testing.assert_allclose(widths, data[part].to_numpy() / 1000.0)
        lefts = np.array([b.get_x() for b in ax.containers[PARTS.index(part)]])
        np.testing.assert_allclose(lefts, ends)
        ends = ends + widths
    np.testing.assert_allclose(ends, data["step_wall_us"].to_numpy() / 1000.0)
    dots = next(line for line in ax.lines if line.get_gid() == "step-wall")
    np.testing.assert_allclose(dots.get_xdata(), data["step_wall_us"].to_numpy() / 1000.0)
    # a rank with two rows: bars are labelled by rank and step
    assert ax.get_yticklabels()[0].get_text() == "rank 0 · step 1"
    assert ax.get_xlabel() == "time in the step (ms)"


def test_partition_bars_refuse_parts_that_do_not_add_up():
    data = partition()
    data.loc[0, "idle"] += 5.0
    with pytest.raises(DomainError, match="add up"):
        plots.step_partition_bars(data)
    with pytest.raises(DomainError, match="missing column"):
        plots.step_partition_bars(partition().drop(columns="peer_wait"))
    with pytest.raises(DomainError, match="unit"):
        plots.step_partition_bars(partition(), unit="s")


def test_heatmap_cells_equal_the_table_and_missing_cells_stay_empty():
    table = pd.DataFrame([[0.1, 0.4], [0.2, np.nan]], index=pd.Index([0, 1], name="rank"),
                         columns=pd.Index([10, 11], name="step"))
    ax = plots.rank_step_heatmap(table, value_label="peer wait (share of step)", share=True)
    image = ax.images[0].get_array()
    np.testing.assert_allclose(image.filled(np.nan), table.to_numpy())
    assert image.mask[1, 1] and not image.mask[0, 0]
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == ["10%", "20%", "40%"]          # one label per present cell, none for the missing one
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "11"]
    with pytest.raises(DomainError):
        plots.rank_step_heatmap(table * 3.0, value_label="x", share=True)
    with pytest.raises(DomainError):
        plots.rank_step_heatmap(pd.DataFrame([[np.nan]]), value_label="x")
    with pytest.raises(DomainError):
        plots.rank_step_heatmap(-table, value_label="x")


def report() -> pd.DataFrame:
    return pd.DataFrame({"rank": [0, 1, 2], "arrived_last_share": [0.0, 0.25, 0.75],
                         "peer_wait_us": [4000.0, 2500.0, 0.0], "relative_score": [1.0, 0.9, 0.6],
                         "straggler": [False, False, True]})


def test_straggler_bars_heights_and_flags():
    ax = plots.straggler_bars(report())
    bars = ax.containers[0]
    np.testing.assert_allclose([b.get_height() for b in bars], [0.0, 0.25, 0.75])
    assert [b.get_hatch() for b in bars] == [None, None, "xx"]
    ax = plots.straggler_bars(report(), value="peer_wait_us")
    np.testing.assert_allclose([b.get_height() for b in ax.containers[0]], [4.0, 2.5, 0.0])  # ms
    ax = plots.straggler_bars(report(), value="relative_score", threshold=0.75)
    line = next(x for x in ax.lines if x.get_gid() == "threshold")
    assert line.get_ydata()[0] == 0.75
    with pytest.raises(DomainError):
        plots.straggler_bars(report(), value="median_wait")
    with pytest.raises(DomainError):
        plots.straggler_bars(report().assign(arrived_last_share=[0.0, 1.5, 0.2]))


def audit() -> pd.DataFrame:
    return pd.DataFrame({"rank": [0, 0, 1, 1], "step": 3, "group": ["dp", "dp", "dp", "dp"],
                         "collective": ["allreduce", "alltoall", "allreduce", "alltoall"],
                         "count": [3, 5, 3, 4], "expected": [3, 5, 3, 5]})


def test_audit_bars_count_per_rank_and_type_with_the_intended_count():
    ax = plots.collective_audit_bars(audit())
    heights = {c.get_label(): [b.get_height() for b in c] for c in ax.containers}
    assert heights == {"allreduce (dp)": [3, 3], "alltoall (dp)": [5, 4]}
    ticks = [c for c in ax.collections if (c.get_gid() or "").startswith("expected:alltoall")]
    assert ticks and np.allclose([s[0][1] for s in ticks[0].get_segments()], [5, 5])
    with pytest.raises(DomainError, match="one step"):
        plots.collective_audit_bars(pd.concat([audit(), audit()]))


def placed() -> pd.DataFrame:
    return pd.DataFrame({
        "intensity_flop_per_byte": [1.0, 950.0, 10.0, np.nan],
        "achieved_flops_per_s": [9e11, 9.5e13, 1e11, np.nan],
        "regime": pd.array(["near bandwidth ceiling", "near compute ceiling", "below both ceilings", None],
                           dtype="string")})


def test_roofline_scatter_draws_roof_ridge_and_each_placed_kernel():
    ax = plots.roofline_scatter(placed(), peak_flops_per_s=1e14, peak_bytes_per_s=1e12, peak_label="toy")
    roof = next(x for x in ax.lines if x.get_gid() == "roof")
    xs, ys = roof.get_xdata(), roof.get_ydata()
    np.testing.assert_allclose(ys, np.minimum(1e14, xs * 1e12))
    ridge = next(x for x in ax.lines if x.get_gid() == "ridge")
    assert ridge.get_xdata()[0] == pytest.approx(100.0)
    points = {c.get_gid(): c.get_offsets() for c in ax.collections}
    np.testing.assert_allclose(points["kernels:near compute ceiling"], [[950.0, 9.5e13]])
    np.testing.assert_allclose(points["kernels:near bandwidth ceiling"], [[1.0, 9e11]])
    assert "1 without FLOPs not drawn" in ax.get_legend().get_title().get_text()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    with pytest.raises(DomainError):
        plots.roofline_scatter(placed().iloc[[3]], peak_flops_per_s=1e14, peak_bytes_per_s=1e12)
    with pytest.raises(DomainError):
        plots.roofline_scatter(placed(), peak_flops_per_s=0.0, peak_bytes_per_s=1e12)
    bad = placed().assign(regime=pd.array(["fast", None, None, None], dtype="string"))
    with pytest.raises(DomainError, match="unknown regimes"):
        plots.roofline_scatter(bad, peak_flops_per_s=1e14, peak_bytes_per_s=1e12)


def comparison() -> pd.DataFrame:
    rows = []
    for rank, (idle, comp) in {0: (50.0, 10.0), 1: (30.0, 20.0)}.items():
        for source in ("HTA 0.5 (published)", "HTA definitions (fleetlib)"):
            rows += [(rank, source, "idle", idle), (rank, source, "compute", comp),
                     (rank, source, "non_compute", 100.0 - idle - comp)]
        parts = dict(zip(PARTS, [comp, 15.0, 20.0, 5.0, idle - 10.0, 100.0 - comp - 40.0 - idle + 10.0],
                         strict=True))
        rows += [(rank, "step partition (fleetlib)", k, v) for k, v in parts.items()]
    return pd.DataFrame(rows, columns=["rank", "source", "category", "pct"])


def test_hta_comparison_bars_stack_each_source_to_100():
    table = comparison()
    ax = plots.hta_comparison_bars(table)
    for (rank, source), rows in table.groupby(["rank", "source"]):
        bars = [p for p in ax.patches if (p.get_gid() or "").startswith(f"hta:{source}:{rank}:")]
        assert len(bars) == len(rows)
        assert max(b.get_y() + b.get_height() for b in bars) == pytest.approx(100.0)
    bad = table.copy()
    bad.loc[0, "pct"] += 3.0
    with pytest.raises(DomainError, match="100"):
        plots.hta_comparison_bars(bad)
    with pytest.raises(DomainError, match="unknown categories"):
        plots.hta_comparison_bars(table.assign(category="busy"))


def test_every_new_plot_draws_into_a_given_axes():
    fig, axes = plt.subplots(2, 3)
    got = [plots.step_partition_bars(partition(), ax=axes[0, 0]),
           plots.straggler_bars(report(), ax=axes[0, 1]),
           plots.collective_audit_bars(audit(), ax=axes[0, 2]),
           plots.roofline_scatter(placed(), peak_flops_per_s=1e14, peak_bytes_per_s=1e12, ax=axes[1, 0]),
           plots.hta_comparison_bars(comparison(), ax=axes[1, 1])]
    assert got == [axes[0, 0], axes[0, 1], axes[0, 2], axes[1, 0], axes[1, 1]]
    with pytest.raises(DomainError, match="Axes"):
        plots.straggler_bars(report(), ax=fig)


def test_fleet_law_bars_stack_the_six_terms_to_the_wall():
    from fleetlib.program import FLEET_LAW_LABELS, FLEET_LAW_TERMS

    terms = pd.DataFrame([(0, 1, 300, 700, 90, 40, 500, 20), (1, 1, 310, 650, 80, 40, 0, 600)],
                         columns=["rank", "step", *FLEET_LAW_TERMS], dtype=float)
    terms["step_wall_us"] = terms[list(FLEET_LAW_TERMS)].sum(axis=1)
    ax = plots.fleet_law_bars(terms, unit="us")
    ends = np.zeros(len(terms))
    for j, t in enumerate(FLEET_LAW_TERMS):
        assert ax.containers[j].get_label() == FLEET_LAW_LABELS[t]
        widths = np.array([b.get_width() for b in ax.containers[j]])
        np.testing.assert_allclose(widths, terms[t].to_numpy())
        ends = ends + widths
    np.testing.assert_allclose(ends, terms["step_wall_us"].to_numpy())
    assert len({tuple(c.patches[0].get_facecolor()) for c in ax.containers[:6]}) == 6


def test_utilisation_heatmap_draws_each_rank_and_bin_and_leaves_empty_bins_blank():
    table = pd.DataFrame([[0.2, np.nan, 0.9], [0.5, 0.1, 1.0]], index=[0, 1], columns=[0.0, 1.0, 2.0])
    ax = plots.utilisation_heatmap(table, value_label="compute share")
    image = ax.get_images()[0]
    arr = image.get_array()
    assert arr.shape == (2, 3) and arr.mask[0, 1] and not arr.mask[1, 1]
    np.testing.assert_allclose(arr[1].filled(np.nan), [0.5, 0.1, 1.0])
    assert image.get_extent()[:2] == [0.0, 3.0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1"]
    with pytest.raises(DomainError):
        plots.utilisation_heatmap(table * 2, value_label="x")
