"""Tests of fleetlib.plots: artists drawn, inputs validated, rcParams left alone.

Inputs are hand-built with the shapes the computing modules produce, using the chapter's running
example (S = 0.65, R = 0.90, P = 0.48; Llama 3 405B: S = 1, R = 0.90, P = 0.41) and the per-size
runtime terms behind Figure 5.  Expected geometry is computed here from the factors, independently
of the shares handed to the plot.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.axes import Axes
from matplotlib.contour import ContourSet
from matplotlib.text import Annotation

from fleetlib import plots
from fleetlib.quality import DomainError

# ---------------------------------------------------------------------------------------------------
# Fixtures: hand-made inputs in the producers' shapes
# ---------------------------------------------------------------------------------------------------

S, R, P = 0.65, 0.90, 0.48
# Equation 2 by hand: 1 - S, S (1 - R), S R (1 - P), S R P.
RUNNING_SHARES = {"scheduling": 0.35, "runtime": 0.065, "program": 0.3042, "useful": 0.2808}
LLAMA_SHARES = {"scheduling": 0.0, "runtime": 0.10, "program": 0.531, "useful": 0.369}
# Napkin Math 9.3: five runtime terms of the 128-GPU week (shares of held time).
RUNNING_TERMS = {"startup": 0.000516, "input_wait": 0.076923, "checkpoint": 0.004246,
                 "recovery": 0.000342, "preemption": 0.014028, "total": 0.096055}

DEVICES = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
# Figure 5 reconstruction (Young-Daly interval, checkpoint and recovery shares per size).
INTERVAL_MIN = [76.94, 54.4, 38.47, 27.2, 19.23, 13.6, 9.617, 6.8]
CHECKPOINT = [0.004246, 0.006005, 0.008492, 0.01201, 0.01698, 0.02402, 0.03397, 0.04804]
RECOVERY = [0.0003422, 0.0006843, 0.001369, 0.002737, 0.005475, 0.01095, 0.0219, 0.0438]


@pytest.fixture(autouse=True)
def close_figs():
    yield
    plt.close("all")


@pytest.fixture
def ax():
    _, axes = plt.subplots()
    return axes


def size_frame() -> pd.DataFrame:
    n = len(DEVICES)
    frame = pd.DataFrame({
        "devices": DEVICES,
        "mtbf_h": [302.0 * 128 / d for d in DEVICES],
        "interval_min": INTERVAL_MIN,
        "startup": [0.000516] * n,
        "input_wait": [0.076923] * n,
        "checkpoint": CHECKPOINT,
        "recovery": RECOVERY,
        "preemption": [0.014028] * n,
    })
    frame["total"] = frame[["startup", "input_wait", "checkpoint", "recovery", "preemption"]].sum(axis=1)
    return frame


def iso_grid(value=lambda p, r: p * r) -> pd.DataFrame:
    p, r = np.meshgrid(np.linspace(0.3, 1.0, 36), np.linspace(0.6, 1.0, 41))
    return pd.DataFrame({"program": p.ravel(), "runtime": r.ravel(), "value": value(p, r).ravel()})


ISO_POINTS = pd.DataFrame({"label": ["today", "program ceiling", "runtime ceiling"],
                           "program": [0.48, 0.65, 0.48], "runtime": [0.90, 0.90, 1.00],
                           "arrow_to": ["program ceiling", None, None]})


def frontier_points() -> pd.DataFrame:
    return pd.DataFrame({
        "label": ["128 GPUs", "step-up", "512 GPUs", "128 spot", "step-up spot", "512 spot"],
        "tier": ["fleet"] * 3 + ["spot"] * 3,
        "time_to_result_h": [64.0, 37.5, 24.0, 70.0, 41.0, 27.0],
        "cost_per_useful_unit": [1.0, 1.11, 1.25, 0.38, 0.42, 0.47],
        "relative_goodput": [1.0, 0.90, 0.80, 0.92, 0.83, 0.74],
        "on_frontier": [False, False, True, True, True, True],
    })


def lever_frame() -> pd.DataFrame:
    mpg = S * R * P
    rows = [  # deliberately not in rank order
        ("runtime", 0.90, 1.00, 3), ("program", 0.48, 0.65, 1), ("scheduling", 0.65, 0.80, 2)]
    share = {"scheduling": 1 - S, "runtime": S * (1 - R), "program": S * R * (1 - P)}
    return pd.DataFrame([
        {"factor": f, "current": c, "ceiling": m, "relative_gain": m / c - 1, "mpg_before": mpg,
         "mpg_at_ceiling": mpg * m / c, "added_useful": mpg * (m / c - 1), "loss_share": share[f], "rank": k}
        for f, c, m, k in rows])


def by_gid(ax: Axes, prefix: str) -> list:
    return [a for a in ax.get_children() if (a.get_gid() or "").startswith(prefix)]


def one_gid(ax: Axes, gid: str):
    (artist,) = [a for a in ax.get_children() if a.get_gid() == gid]
    return artist


def patches_by_gid(ax: Axes, prefix: str) -> list:
    return [p for p in ax.patches if (p.get_gid() or "").startswith(prefix)]


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


# The calls every generic test runs (function, positional data, options).
CALLS = {
    "capacity_waterfall": (plots.capacity_waterfall, lambda: RUNNING_SHARES, {"reference": LLAMA_SHARES}),
    "runtime_terms_bar": (plots.runtime_terms_bar, lambda: RUNNING_TERMS, {}),
    "iso_goodput": (plots.iso_goodput, iso_grid, {"levels": [0.3, 0.4, 0.5], "points": ISO_POINTS}),
    "efficiency_frontier": (plots.efficiency_frontier, frontier_points, {}),
    "runtime_loss_by_size": (plots.runtime_loss_by_size, size_frame,
                             {"crossover_devices": 12857, "reference_loss": 0.10}),
    "lever_ranking": (plots.lever_ranking, lever_frame, {}),
    "factor_chain": (plots.factor_chain, lambda: {"scheduling": S, "runtime": R, "program": P}, {}),
}


# ---------------------------------------------------------------------------------------------------
# Shared contract: Axes in, same Axes out, units in labels, rcParams untouched
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CALLS))
def test_draws_into_given_axes_without_new_figure_or_rcparams_change(name, ax):
    func, data, options = CALLS[name]
    figures = plt.get_fignums()
    before = dict(mpl.rcParams)
    out = func(data(), ax=ax, **options)
    assert out is ax
    assert plt.get_fignums() == figures
    assert dict(mpl.rcParams) == before


@pytest.mark.parametrize("name", sorted(CALLS))
def test_without_axes_makes_one_new_figure(name):
    func, data, options = CALLS[name]
    figures = set(plt.get_fignums())
    out = func(data(), **options)
    assert isinstance(out, Axes)
    assert set(plt.get_fignums()) - figures == {out.figure.number}


@pytest.mark.parametrize(("name", "unit_x", "unit_y"), [
    ("capacity_waterfall", "(%)", None),
    ("runtime_terms_bar", "share of held time (%)", None),
    ("iso_goodput", "(fraction of ideal rate)", "(fraction of held time)"),
    ("efficiency_frontier", "time to result (h)", "cost per useful unit (× baseline)"),
    ("runtime_loss_by_size", "(GPUs", "(% of held time)"),
    ("lever_ranking", "(% of current MPG)", None),
    ("factor_chain", "(%)", None),
])
def test_axis_labels_carry_units(name, unit_x, unit_y, ax):
    func, data, options = CALLS[name]
    func(data(), ax=ax, **options)
    assert unit_x in ax.get_xlabel()
    if unit_y is not None:
        assert unit_y in ax.get_ylabel()


def test_import_leaves_rcparams_unchanged():
    code = textwrap.dedent("""
        import matplotlib as mpl
        before = dict(mpl.rcParams)
        import fleetlib.plots
        after = dict(mpl.rcParams)
        changed = sorted(k for k in before if before[k] != after[k])
        assert not changed, changed
    """)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_plots_module_never_sets_backend():
    from pathlib import Path

    package = Path(plots.__file__).parent
    source = "\n".join(p.read_text(encoding="utf-8") for p in sorted(package.glob("*.py")))
    assert "matplotlib.use(" not in source and "mpl.use(" not in source and "switch_backend" not in source


def test_theme_context_applies_then_restores():
    before = dict(mpl.rcParams)
    colorblind = [mpl.colors.to_hex(c) for c in plots.palette()]
    with plots.theme(context="talk"):
        cycle = [mpl.colors.to_hex(c) for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]]
        assert cycle == colorblind
        assert mpl.rcParams["font.size"] != before["font.size"]
    assert dict(mpl.rcParams) == before


def test_use_theme_changes_rcparams_globally():
    with mpl.rc_context():  # undo the global change after the test
        plots.use_theme()
        cycle = [mpl.colors.to_hex(c) for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]]
        assert cycle[:3] == ["#0173b2", "#de8f05", "#029e73"]
        with pytest.raises(DomainError, match="font_scale"):
            plots.use_theme(font_scale=0)


def test_non_axes_ax_is_rejected():
    with pytest.raises(DomainError, match="Axes"):
        plots.runtime_terms_bar(RUNNING_TERMS, ax="not an axes")


# ---------------------------------------------------------------------------------------------------
# capacity_waterfall (Figure 10, left)
# ---------------------------------------------------------------------------------------------------


def test_waterfall_bars_follow_the_running_example(ax):
    plots.capacity_waterfall(RUNNING_SHARES, reference=LLAMA_SHARES, ax=ax)
    remaining = patches_by_gid(ax, "remaining:")
    lost = patches_by_gid(ax, "lost:")
    boundaries = ("scheduling", "runtime", "program")
    assert [p.get_gid() for p in remaining] == [f"remaining:{b}" for b in boundaries]
    # Capacity after each boundary: S, S R, S R P -- from the factors, not from the shares.
    np.testing.assert_allclose([p.get_width() for p in remaining], [S, S * R, S * R * P], atol=1e-12)
    np.testing.assert_allclose([p.get_width() for p in lost], [1 - S, S * (1 - R), S * R * (1 - P)],
                               atol=1e-12)
    np.testing.assert_allclose([p.get_x() for p in lost], [S, S * R, S * R * P], atol=1e-12)
    assert all(p.get_linestyle() == "--" for p in lost)
    labels = texts(ax)
    for expected in ("100%", "65%", "28%", "−35%", "−6.5%", "−30%"):
        assert expected in labels


def test_waterfall_hatches_only_illustrative_boundaries(ax):
    plots.capacity_waterfall(RUNNING_SHARES, illustrative=("scheduling",), ax=ax)
    hatch = {p.get_gid(): p.get_hatch() for p in patches_by_gid(ax, "lost:")}
    assert hatch["lost:scheduling"]
    assert not hatch["lost:runtime"] and not hatch["lost:program"]
    _, ax2 = plt.subplots()
    plots.capacity_waterfall(RUNNING_SHARES, illustrative=(), ax=ax2)
    assert not any(p.get_hatch() for p in patches_by_gid(ax2, "lost:"))


def test_waterfall_reference_is_hollow(ax):
    plots.capacity_waterfall(RUNNING_SHARES, reference=LLAMA_SHARES, ax=ax)
    ref = patches_by_gid(ax, "reference")
    assert len(ref) == 4
    assert not any(p.get_fill() for p in ref)
    # Llama 3 405B: offered 1, held 1 (S = 1), retained 0.90, useful 0.90 x 0.41.
    np.testing.assert_allclose([p.get_width() for p in ref], [1.0, 1.0, 0.90, 0.90 * 0.41], atol=1e-12)
    assert "37%" in texts(ax)
    _, ax2 = plt.subplots()
    plots.capacity_waterfall(RUNNING_SHARES, ax=ax2)
    assert patches_by_gid(ax2, "reference") == []


@settings(max_examples=12, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_waterfall_geometry_matches_factor_products(s, r, p):
    shares = {"scheduling": 1 - s, "runtime": s * (1 - r), "program": s * r * (1 - p), "useful": s * r * p}
    fig, ax = plt.subplots()
    try:
        plots.capacity_waterfall(shares, ax=ax)
        widths = [b.get_width() for b in patches_by_gid(ax, "remaining:")]
        lost = [b.get_width() for b in patches_by_gid(ax, "lost:")]
        np.testing.assert_allclose(widths, [s, s * r, s * r * p], atol=1e-9)
        assert math.isclose(widths[-1] + sum(lost), 1.0, abs_tol=1e-9)
    finally:
        plt.close(fig)


@pytest.mark.parametrize(("shares", "match"), [
    ({"scheduling": 0.35, "runtime": 0.065, "useful": 0.2808}, "program"),
    ({**RUNNING_SHARES, "useful": 0.30}, "sum to 1"),
    ({"scheduling": -0.1, "runtime": 0.2, "program": 0.5, "useful": 0.4}, r"\[0, 1\]"),
    ({**RUNNING_SHARES, "runtime": float("nan")}, "finite"),
])
def test_waterfall_rejects_bad_shares(shares, match, ax):
    with pytest.raises(DomainError, match=match):
        plots.capacity_waterfall(shares, ax=ax)


def test_waterfall_rejects_bad_reference_and_illustrative(ax):
    with pytest.raises(DomainError, match="reference"):
        plots.capacity_waterfall(RUNNING_SHARES, reference={"scheduling": 0.0}, ax=ax)
    with pytest.raises(DomainError, match="illustrative"):
        plots.capacity_waterfall(RUNNING_SHARES, illustrative=("queueing",), ax=ax)


# ---------------------------------------------------------------------------------------------------
# runtime_terms_bar (Figure 10, right)
# ---------------------------------------------------------------------------------------------------


def test_terms_bar_draws_five_terms_and_ignores_total(ax):
    plots.runtime_terms_bar(RUNNING_TERMS, ax=ax)
    bars = patches_by_gid(ax, "term:")
    assert [b.get_gid() for b in bars] == [f"term:{k}" for k in plots.RUNTIME_TERMS]
    np.testing.assert_allclose([b.get_width() for b in bars], [RUNNING_TERMS[k] for k in plots.RUNTIME_TERMS])
    assert {"0.05%", "7.7%", "1.4%", "0.42%", "0.03%"} <= set(texts(ax))
    # Each term distinguished twice: distinct colours and distinct hatches.
    assert len({b.get_facecolor() for b in bars}) == 5
    assert len({b.get_hatch() for b in bars}) == 5


def test_terms_bar_shows_unattributed_when_given(ax):
    plots.runtime_terms_bar({**RUNNING_TERMS, "unattributed": 0.004}, ax=ax)
    assert len(patches_by_gid(ax, "term:")) == 6
    assert "unattributed" in [t.get_text() for t in ax.get_yticklabels()]


def test_terms_bar_rejects_missing_or_bad_terms(ax):
    terms = {k: v for k, v in RUNNING_TERMS.items() if k != "recovery"}
    with pytest.raises(DomainError, match="recovery"):
        plots.runtime_terms_bar(terms, ax=ax)
    with pytest.raises(DomainError, match=r"\[0, 1\]"):
        plots.runtime_terms_bar({**RUNNING_TERMS, "input_wait": 1.5}, ax=ax)
    with pytest.raises(DomainError, match="mapping"):
        plots.runtime_terms_bar([0.1, 0.2], ax=ax)


# ---------------------------------------------------------------------------------------------------
# iso_goodput (Figure 11)
# ---------------------------------------------------------------------------------------------------


def contour_sets(ax: Axes) -> list[ContourSet]:
    return [c for c in ax.collections if isinstance(c, ContourSet)]


def test_iso_goodput_labels_every_level_in_place(ax):
    levels = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    plots.iso_goodput(iso_grid(), levels=levels, highlight=0.432, ax=ax)
    sets = contour_sets(ax)
    assert len(sets) == 2
    main, bold = sets
    np.testing.assert_allclose(main.levels, levels)
    assert sorted({t.get_text() for t in main.labelTexts}) == ["0.30", "0.40", "0.50", "0.60", "0.70", "0.80"]
    assert [t.get_text() for t in bold.labelTexts] == ["0.43"]
    assert bold.get_linewidths()[0] > main.get_linewidths()[0]


def test_iso_goodput_draws_the_given_values_not_its_own_product(ax):
    # A grid whose value is P + R: contours must follow P + R = level, which R x P would not.
    plots.iso_goodput(iso_grid(lambda p, r: p + r), levels=[1.4, 1.6], ax=ax)
    (cs,) = contour_sets(ax)
    for level, segs in zip(cs.levels, cs.allsegs, strict=True):
        verts = np.concatenate(segs)
        assert len(verts) > 5
        np.testing.assert_allclose(verts.sum(axis=1), level, atol=1e-6)


def test_iso_goodput_points_markers_labels_and_arrow(ax):
    plots.iso_goodput(iso_grid(), levels=[0.4, 0.5], points=ISO_POINTS, ax=ax)
    markers = by_gid(ax, "point:")
    assert len(markers) == 3
    assert len({m.get_marker() for m in markers}) == 3
    assert len({m.get_markerfacecolor() for m in markers}) == 3
    np.testing.assert_allclose([m.get_xydata()[0] for m in markers], ISO_POINTS[["program", "runtime"]])
    assert {"today", "program ceiling", "runtime ceiling"} <= set(texts(ax))
    arrows = [a for a in ax.texts if isinstance(a, Annotation) and a.arrow_patch is not None]
    assert len(arrows) == 1
    np.testing.assert_allclose(arrows[0].xy, (0.65, 0.90))
    np.testing.assert_allclose(arrows[0].xyann, (0.48, 0.90))
    # The runtime-ceiling point sits on the grid's top edge; the axes widen to show it whole.
    assert ax.get_ylim()[1] > 1.0


def test_iso_goodput_other_axes_names(ax):
    p, s = np.meshgrid(np.linspace(0.3, 1, 8), np.linspace(0.5, 1, 6))
    grid = pd.DataFrame({"program": p.ravel(), "scheduling": s.ravel(), "value": (0.9 * p * s).ravel()})
    plots.iso_goodput(grid, y="scheduling", levels=[0.3], ax=ax)
    assert "offered capacity" in ax.get_ylabel()


@pytest.mark.parametrize(("mutate", "match"), [
    (lambda g: g.drop(columns="value"), "value"),
    (lambda g: g.iloc[1:], "regular grid"),
    (lambda g: pd.concat([g, g.iloc[:1]]), "regular grid"),
    (lambda g: g.assign(value=np.where(g.index == 3, np.inf, g["value"])), "finite"),
])
def test_iso_goodput_rejects_bad_grids(mutate, match, ax):
    with pytest.raises(DomainError, match=match):
        plots.iso_goodput(mutate(iso_grid()), ax=ax)


def test_iso_goodput_rejects_bad_levels_and_points(ax):
    with pytest.raises(DomainError, match="increasing"):
        plots.iso_goodput(iso_grid(), levels=[0.5, 0.4], ax=ax)
    with pytest.raises(DomainError, match="runtime"):
        plots.iso_goodput(iso_grid(), points=ISO_POINTS.drop(columns="runtime"), ax=ax)
    with pytest.raises(DomainError, match="nowhere"):
        plots.iso_goodput(iso_grid(), points=ISO_POINTS.assign(arrow_to=["nowhere", None, None]), ax=ax)


# ---------------------------------------------------------------------------------------------------
# efficiency_frontier (Figure 12)
# ---------------------------------------------------------------------------------------------------


def test_frontier_fill_follows_flags_and_area_follows_goodput(ax):
    points = frontier_points()
    plots.efficiency_frontier(points, area_pt2=300.0, ax=ax)
    groups = {c.get_gid(): c for c in by_gid(ax, "points:")}
    assert set(groups) == {"points:fleet:frontier", "points:fleet:dominated", "points:spot:frontier"}
    for gid, coll in groups.items():
        faces = coll.get_facecolors()
        if gid.endswith(":frontier"):
            assert len(faces) and np.all(faces[:, 3] == 1.0)
        else:
            assert len(faces) == 0 or np.all(faces[:, 3] == 0.0)
        tier, flag = gid.split(":")[1:]
        sel = (points["tier"] == tier) & (points["on_frontier"] == (flag == "frontier"))
        where = points.loc[sel, ["time_to_result_h", "cost_per_useful_unit"]]
        np.testing.assert_allclose(coll.get_offsets(), where)
        np.testing.assert_allclose(coll.get_sizes(), 300.0 * points.loc[sel, "relative_goodput"])
    # Marker shape by tier (and colour by tier): the fleet and spot paths differ.
    fleet, spot = groups["points:fleet:frontier"], groups["points:spot:frontier"]
    assert fleet.get_paths()[0].vertices.shape != spot.get_paths()[0].vertices.shape
    assert not np.allclose(fleet.get_edgecolors()[0], spot.get_edgecolors()[0])


def test_frontier_line_runs_through_flagged_points_by_time(ax):
    plots.efficiency_frontier(frontier_points(), ax=ax)
    line = one_gid(ax, "frontier")
    np.testing.assert_allclose(line.get_xdata(), [24.0, 27.0, 41.0, 70.0])
    np.testing.assert_allclose(line.get_ydata(), [1.25, 0.47, 0.42, 0.38])
    assert line.get_drawstyle() == "steps-post"
    assert {"512 GPUs · 0.80", "128 GPUs · 1.00", "128 spot · 0.92"} <= set(texts(ax))


def test_frontier_rejects_bad_points(ax):
    with pytest.raises(DomainError, match="relative_goodput"):
        plots.efficiency_frontier(frontier_points().drop(columns="relative_goodput"), ax=ax)
    with pytest.raises(DomainError, match="on_frontier"):
        plots.efficiency_frontier(frontier_points().assign(on_frontier=["yes"] * 6), ax=ax)
    with pytest.raises(DomainError, match="> 0"):
        plots.efficiency_frontier(frontier_points().assign(time_to_result_h=-1.0), ax=ax)
    with pytest.raises(DomainError, match="DataFrame"):
        plots.efficiency_frontier(frontier_points().to_dict(), ax=ax)


# ---------------------------------------------------------------------------------------------------
# runtime_loss_by_size (Figure 5)
# ---------------------------------------------------------------------------------------------------


def test_runtime_by_size_stacks_terms(ax):
    frame = size_frame()
    plots.runtime_loss_by_size(frame, ax=ax)
    bars = patches_by_gid(ax, "term:")
    assert len(bars) == 5 * len(DEVICES)
    order = list(plots.RUNTIME_TERMS)
    heights = np.array([b.get_height() for b in bars]).reshape(len(order), len(DEVICES))
    bottoms = np.array([b.get_y() for b in bars]).reshape(len(order), len(DEVICES))
    np.testing.assert_allclose(heights, frame[order].to_numpy().T, atol=1e-12)
    np.testing.assert_allclose(bottoms[0], 0.0)
    np.testing.assert_allclose(bottoms[1:], np.cumsum(frame[order].to_numpy().T, axis=0)[:-1], atol=1e-12)
    # The stack top reaches the given total (10% at 128 GPUs, 18% at 16,384 in the chapter).
    np.testing.assert_allclose(bottoms[-1] + heights[-1], frame["total"], atol=1e-12)
    assert "9.6%" in texts(ax) and "18%" in texts(ax)
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[0].startswith("128\n77 min") and ticks[-1].startswith("16K\n6.8 min")
    # Hatch and colour differ between terms.
    first = bars[:: len(DEVICES)]
    assert len({b.get_hatch() for b in first}) == 5 and len({b.get_facecolor() for b in first}) == 5


def test_runtime_by_size_crossover_and_reference(ax):
    plots.runtime_loss_by_size(size_frame(), crossover_devices=12857, reference_loss=0.10, ax=ax)
    line = one_gid(ax, "crossover")
    assert line.get_linestyle() == ":"
    # Log2 position between the 8,192 (index 6) and 16,384 (index 7) bars.
    np.testing.assert_allclose(line.get_xdata()[0], 6 + math.log2(12857 / 8192))
    ref = one_gid(ax, "reference")
    assert not ref.get_fill()
    assert ref.get_height() == pytest.approx(0.10)
    assert "≤ 10%" in texts(ax)
    assert "Llama" in ax.get_xticklabels()[-1].get_text()


def test_runtime_by_size_shows_unattributed_column(ax):
    plots.runtime_loss_by_size(size_frame().assign(unattributed=0.002), ax=ax)
    assert len(patches_by_gid(ax, "term:unattributed")) == len(DEVICES)


@pytest.mark.parametrize(("mutate", "kwargs", "match"), [
    (lambda f: f.drop(columns=["mtbf_h", "total"]), {}, r"mtbf_h.*total"),
    (lambda f: f.iloc[::-1], {}, "increasing"),
    (lambda f: f.assign(checkpoint=-0.01), {}, "checkpoint"),
    (lambda f: f, {"crossover_devices": 40000}, "outside"),
    (lambda f: f, {"reference_loss": 1.2}, "reference_loss"),
])
def test_runtime_by_size_rejects_bad_input(mutate, kwargs, match, ax):
    with pytest.raises(DomainError, match=match):
        plots.runtime_loss_by_size(mutate(size_frame()), ax=ax, **kwargs)


# ---------------------------------------------------------------------------------------------------
# lever_ranking
# ---------------------------------------------------------------------------------------------------


def test_levers_drawn_in_rank_order_with_loss_share_beside(ax):
    plots.lever_ranking(lever_frame(), ax=ax)
    gains = patches_by_gid(ax, "gain:")
    shares = patches_by_gid(ax, "share:")
    assert [b.get_gid() for b in gains] == ["gain:program", "gain:scheduling", "gain:runtime"]
    # program 0.48 -> 0.65: +35%; scheduling 0.65 -> 0.80: +23%; runtime 0.90 -> 1.00: +11%.
    expected_gain = [0.65 / 0.48 - 1, 0.80 / 0.65 - 1, 1 / 0.9 - 1]
    np.testing.assert_allclose([b.get_width() for b in gains], expected_gain)
    np.testing.assert_allclose([b.get_width() for b in shares], [S * R * (1 - P), 1 - S, S * (1 - R)])
    assert all(b.get_hatch() and b.get_linestyle() == "--" for b in shares)
    assert not any(b.get_hatch() for b in gains)
    # Rank 1 is at the top (the y axis is inverted, so its y is smallest).
    ys = [b.get_y() for b in gains]
    assert ys == sorted(ys) and ax.yaxis_inverted()
    labels = texts(ax)
    assert any(t.startswith("+35%") and "MPG 0.281 → 0.380" in t for t in labels)
    assert any(t.startswith("+11%") and "0.312" in t for t in labels)


def test_levers_reject_bad_frames(ax):
    with pytest.raises(DomainError, match="loss_share"):
        plots.lever_ranking(lever_frame().drop(columns="loss_share"), ax=ax)
    with pytest.raises(DomainError, match="unique"):
        plots.lever_ranking(lever_frame().assign(rank=1), ax=ax)
    with pytest.raises(DomainError, match="relative_gain"):
        plots.lever_ranking(lever_frame().assign(relative_gain=-0.1), ax=ax)


# ---------------------------------------------------------------------------------------------------
# factor_chain
# ---------------------------------------------------------------------------------------------------


def test_factor_chain_bars_and_optional_mpg(ax):
    plots.factor_chain({"scheduling": S, "runtime": R, "program": P, "mpg": 0.2808}, ax=ax)
    kept = patches_by_gid(ax, "kept:")
    lost = patches_by_gid(ax, "lost:")
    np.testing.assert_allclose([b.get_width() for b in kept], [S, R, P, 0.2808])
    np.testing.assert_allclose([b.get_width() + b.get_x() for b in lost], 1.0)
    assert {"S = 0.65", "R = 0.90", "P = 0.48", "MPG = 0.28"} <= set(texts(ax))
    _, ax2 = plt.subplots()
    plots.factor_chain({"scheduling": S, "runtime": R, "program": P}, ax=ax2)
    assert len(patches_by_gid(ax2, "kept:")) == 3


def test_factor_chain_rejects_missing_factor(ax):
    with pytest.raises(DomainError, match="program"):
        plots.factor_chain({"scheduling": S, "runtime": R}, ax=ax)


def test_kernel_ranking_bars_are_the_shares_largest_on_top_with_their_errors():
    table = pd.DataFrame({"name": ["nccl_allreduce", "gemm", "x" * 80],
                          "kind": ["comm", "compute", "compute"], "share": [0.06, 0.01, 0.005],
                          "standard_error": [0.002, 0.004, float("nan")]})
    from fleetlib.plots import fleet as fleet_plots

    ax = fleet_plots.kernel_ranking(table)
    bars = sorted((p for p in ax.patches if p.get_height() > 0.5), key=lambda p: -p.get_y())
    assert [round(b.get_width(), 12) for b in bars] == [6.0, 1.0, 0.5]
    labels = [t.get_text() for t in sorted(ax.get_yticklabels(), key=lambda t: -t.get_position()[1])]
    assert labels[0] == "nccl_allreduce" and labels[2].endswith("\u2026") and len(labels[2]) == 48
    plt.close(ax.figure)


def test_fleet_figures_draw_names_with_dollars_as_text_not_mathtext():
    """A kernel or pool name holding TeX between ``$`` is drawn as its own characters, never parsed."""
    from matplotlib.mathtext import MathTextParser

    from fleetlib.plots import fleet as fleet_plots

    tex = "$\\href{javascript:alert(1)}{x}$"
    with pytest.raises(ValueError, match="href"):  # what the figure would hit if the name were mathtext
        MathTextParser("path").parse(tex)
    kernels = pd.DataFrame({"name": [tex, "gemm $1 and $2"], "kind": ["compute", "compute"],
                            "share": [0.2, 0.1], "standard_error": [0.01, 0.01]})
    ax = fleet_plots.kernel_ranking(kernels)
    ax.figure.canvas.draw()  # lays out every label: a mathtext parse of the name would raise here
    shown = {t.get_text(): t._preprocess_math(t.get_text()) for t in ax.get_yticklabels()}
    assert sorted(v for v, _ in shown.values()) == sorted(kernels["name"])  # drawn as the raw characters
    assert not any(math for _, math in shown.values())
    plt.close(ax.figure)
    jobs = pd.DataFrame({"pool": [tex], "held_device_h": [1.0], "runtime_goodput": [0.5],
                         "program_goodput": [0.5]})
    ax = fleet_plots.job_goodput_map(jobs)
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [plots.data_text(f"pool {tex}")]
    plt.close(ax.figure)
