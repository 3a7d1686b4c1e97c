"""Tests of the job-timeline figures: attempt_gantt, cumulative_goodput and step_time_distribution.

Inputs are hand-built frames in the shapes the runtime rung produces (labelled intervals with UTC
times, a cumulative series, rolling windows, step durations).  Expected geometry -- hours since the
origin, total drawn width per category, counts per group -- is computed here from the inputs, not
read back from the code under test.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.collections import LineCollection, PolyCollection

from fleetlib import plots
from fleetlib.quality import DomainError

T0 = pd.Timestamp("2024-01-01T00:00:00Z")


@pytest.fixture(autouse=True)
def close_figs():
    yield
    plt.close("all")


@pytest.fixture
def ax():
    return plt.subplots()[1]


def at(seconds: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(seconds=seconds)


def intervals_frame() -> pd.DataFrame:
    """Two attempts: startup, steps, a checkpoint, erased steps, recovery; queue; reload, steps."""
    rows = [  # attempt, start s, end s, category
        (0, 0, 600, "startup"), (0, 600, 1800, "productive"), (0, 1800, 1830, "checkpoint"),
        (0, 1830, 3000, "productive"), (0, 3000, 3600, "rework"), (0, 3600, 3900, "recovery"),
        (1, 3900, 5700, "not_held"), (1, 5700, 6000, "preemption"), (1, 6000, 9000, "productive"),
        (1, 9000, 9600, "progress_at_risk"), (1, 9600, 9700, "idle"),
    ]
    return pd.DataFrame({"attempt": [r[0] for r in rows], "start": [at(r[1]) for r in rows],
                         "end": [at(r[2]) for r in rows], "category": [r[3] for r in rows]})


def collections_by_gid(ax) -> dict[str, list[PolyCollection]]:
    out: dict[str, list[PolyCollection]] = {}
    for c in ax.collections:
        if c.get_gid():
            out.setdefault(c.get_gid(), []).append(c)
    return out


def drawn_width_h(collection: PolyCollection) -> float:
    return float(sum(np.ptp(path.vertices[:, 0]) for path in collection.get_paths()))


# ---------------------------------------------------------------------------------------------------
# Shared conventions
# ---------------------------------------------------------------------------------------------------


def _draw(name: str, ax=None):
    if name == "attempt_gantt":
        return plots.attempt_gantt(intervals_frame(), ax=ax)
    if name == "cumulative_goodput":
        series = pd.DataFrame({"time": [at(3600 * k) for k in (1, 2, 3)],
                               "cumulative_goodput": [0.5, 0.7, 0.8]})
        return plots.cumulative_goodput(series, ax=ax)
    steps = pd.DataFrame({"duration_s": [1.0, 1.1, 1.0, 2.5]})
    return plots.step_time_distribution(steps, fault_free_step_s=1.0, ax=ax)


NAMES = ["attempt_gantt", "cumulative_goodput", "step_time_distribution"]


@pytest.mark.parametrize("name", NAMES)
def test_draws_into_given_axes_without_new_figure_or_rcparams_change(name, ax):
    before = dict(mpl.rcParams)
    figures = plt.get_fignums()
    assert _draw(name, ax) is ax
    assert plt.get_fignums() == figures
    assert dict(mpl.rcParams) == before


@pytest.mark.parametrize("name", NAMES)
def test_without_axes_makes_one_new_figure(name):
    figures = set(plt.get_fignums())
    out = _draw(name)
    assert len(set(plt.get_fignums()) - figures) == 1 and out.figure.number not in figures


@pytest.mark.parametrize("name, unit_x, unit_y", [
    ("attempt_gantt", "(h)", None),
    ("cumulative_goodput", "(h)", "(% of held time)"),
    ("step_time_distribution", "(s)", "(count"),
])
def test_axis_labels_carry_units(name, unit_x, unit_y, ax):
    _draw(name, ax)
    assert unit_x in ax.get_xlabel()
    if unit_y:
        assert unit_y in ax.get_ylabel()


def test_new_names_are_exported():
    for name in ("attempt_gantt", "cumulative_goodput", "step_time_distribution", "TIMELINE_CATEGORIES"):
        assert name in plots.__all__


# ---------------------------------------------------------------------------------------------------
# attempt_gantt
# ---------------------------------------------------------------------------------------------------


def test_gantt_one_row_per_attempt_and_widths_per_category(ax):
    frame = intervals_frame()
    plots.attempt_gantt(frame, ax=ax)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["attempt 0", "attempt 1"]
    assert "2024-01-01 00:00:00 UTC" in ax.get_xlabel()
    drawn = collections_by_gid(ax)
    hours = (frame["end"] - frame["start"]).dt.total_seconds() / 3600.0
    expected = hours.groupby(frame["category"]).sum()
    assert set(drawn) == {f"interval:{c}" for c in expected.index}
    for cat, width in expected.items():
        assert sum(drawn_width_h(c) for c in drawn[f"interval:{cat}"]) == pytest.approx(width, abs=1e-9), cat
    # x positions are hours since the first start: the idle tail ends at 9700 s
    assert ax.get_xlim()[1] > 9700 / 3600.0
    xs = np.concatenate([p.vertices[:, 0] for p in drawn["interval:idle"][0].get_paths()])
    assert xs.max() == pytest.approx(9700 / 3600.0)


def test_gantt_categories_distinguished_by_colour_and_hatch(ax):
    cats = [c for c in plots.TIMELINE_CATEGORIES if c != "not_held"]
    frame = pd.DataFrame({"attempt": 0, "start": [at(100 * i) for i in range(len(cats))],
                          "end": [at(100 * i + 50) for i in range(len(cats))], "category": cats})
    plots.attempt_gantt(frame, ax=ax)
    drawn = collections_by_gid(ax)
    colours = {tuple(np.round(drawn[f"interval:{c}"][0].get_facecolor()[0], 4)) for c in cats}
    hatches = {drawn[f"interval:{c}"][0].get_hatch() for c in cats}
    assert len(colours) == len(cats) and len(hatches) == len(cats)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == len(cats) and "unattributed" in labels


def test_gantt_not_held_is_hollow_and_dashed(ax):
    plots.attempt_gantt(intervals_frame(), ax=ax)
    (queue,) = collections_by_gid(ax)["interval:not_held"]
    assert tuple(queue.get_facecolor()[0][:3]) == (1.0, 1.0, 1.0)
    assert queue.get_linestyle()[0][1] is not None  # a dash pattern, not a solid edge


def test_gantt_touching_intervals_of_one_category_draw_as_one_rectangle(ax):
    starts = np.arange(1000, dtype=float)
    frame = pd.DataFrame({"attempt": 0, "start": [at(s) for s in starts],
                          "end": [at(s + 1.0) for s in starts], "category": "productive"})
    frame.loc[500:, ["start", "end"]] += pd.Timedelta(seconds=5)  # one gap: two runs
    plots.attempt_gantt(frame, ax=ax)
    (prod,) = collections_by_gid(ax)["interval:productive"]
    assert len(prod.get_paths()) == 2
    assert drawn_width_h(prod) == pytest.approx(1000 / 3600.0)


def test_gantt_markers_one_style_per_kind(ax):
    marks = pd.DataFrame({"attempt": [0, 1, 1], "time": [at(3000), at(6000), at(3900)],
                          "kind": ["failure", "restore", "preempt"]})
    plots.attempt_gantt(intervals_frame(), markers=marks, ax=ax)
    lines = {ln.get_gid(): ln for ln in ax.lines if ln.get_gid()}
    assert set(lines) == {"marker:failure", "marker:restore", "marker:preempt"}
    assert len({ln.get_marker() for ln in lines.values()}) == 3
    assert len({tuple(mpl.colors.to_rgb(ln.get_markerfacecolor())) for ln in lines.values()}) == 3
    assert lines["marker:failure"].get_xdata()[0] == pytest.approx(3000 / 3600.0)


def test_gantt_and_cumulative_accept_empty_overlays(ax):
    empty = pd.DataFrame({"attempt": pd.Series([], dtype=int),
                          "time": pd.Series([], dtype="datetime64[ns, UTC]"),
                          "kind": pd.Series([], dtype=str)})
    plots.attempt_gantt(intervals_frame(), markers=empty, ax=ax)
    assert not [ln for ln in ax.lines if str(ln.get_gid()).startswith("marker:")]
    series = pd.DataFrame({"time": [at(3600)], "cumulative_goodput": [0.5]})
    plots.cumulative_goodput(series, restarts=empty[["time", "kind"]], ax=ax)
    with pytest.raises(DomainError, match="missing column"):
        plots.attempt_gantt(intervals_frame(), markers=empty[["time"]], ax=ax)


def test_gantt_origin_shifts_the_axis(ax):
    plots.attempt_gantt(intervals_frame(), origin="2023-12-31T23:00:00Z", ax=ax)
    xs = np.concatenate([p.vertices[:, 0] for p in collections_by_gid(ax)["interval:startup"][0].get_paths()])
    assert xs.min() == pytest.approx(1.0)


@pytest.mark.parametrize("mutate, kwargs, match", [
    (lambda f: f.drop(columns="category"), {}, "missing column"),
    (lambda f: f.assign(category="waiting"), {}, "unknown categories"),
    (lambda f: f.assign(start=f["start"].dt.tz_localize(None)), {}, "timezone-aware"),
    (lambda f: f.assign(end=f["start"] - pd.Timedelta(seconds=1)), {}, "end before"),
    (lambda f: f.iloc[0:0], {}, "no rows"),
    (lambda f: f, {"markers": pd.DataFrame({"attempt": [7], "time": [T0], "kind": ["failure"]})},
     "no interval"),
    (lambda f: f, {"markers": pd.DataFrame({"time": [T0]})}, "missing column"),
    (lambda f: f, {"origin": "2024-01-01T00:00"}, "timezone-aware"),
])
def test_gantt_rejects_bad_input(mutate, kwargs, match, ax):
    with pytest.raises(DomainError, match=match):
        plots.attempt_gantt(mutate(intervals_frame()), ax=ax, **kwargs)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(plots.TIMELINE_CATEGORIES[:-1]),
                          st.integers(1, 500), st.integers(0, 50)), min_size=1, max_size=25))
def test_gantt_draws_every_second_given_once(parts):
    """Laid end to end (with gaps), the drawn width per category is the sum of the given lengths."""
    rows, t = [], 0
    for attempt, cat, length, gap in parts:
        rows.append((attempt, at(t), at(t + length), cat))
        t += length + gap
    frame = pd.DataFrame(rows, columns=["attempt", "start", "end", "category"])
    fig, ax = plt.subplots()
    plots.attempt_gantt(frame, ax=ax)
    drawn = collections_by_gid(ax)
    expected = ((frame["end"] - frame["start"]).dt.total_seconds() / 3600.0).groupby(frame["category"]).sum()
    for cat, width in expected.items():
        assert sum(drawn_width_h(c) for c in drawn[f"interval:{cat}"]) == pytest.approx(width, abs=1e-9)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------
# cumulative_goodput
# ---------------------------------------------------------------------------------------------------


def test_cumulative_line_windows_and_restarts(ax):
    series = pd.DataFrame({"time": [at(900 * k) for k in range(1, 9)],
                           "cumulative_goodput": [np.nan, 0.4, 0.6, 0.7, 0.65, 0.7, 0.75, 0.8]})
    windows = pd.DataFrame({"start": [at(0), at(3600)], "end": [at(3600), at(7200)],
                            "runtime_goodput": [0.55, None]})
    restarts = pd.DataFrame({"time": [at(3700), at(5000)], "kind": ["failure", "preempt"]})
    plots.cumulative_goodput(series, windows=windows, restarts=restarts, ax=ax)
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "cumulative"]
    np.testing.assert_allclose(line.get_xdata(), [0.25 * k for k in range(1, 9)])
    np.testing.assert_allclose(line.get_ydata(), series["cumulative_goodput"], equal_nan=True)
    assert line.get_linestyle() == "-"
    (segs,) = [c for c in ax.collections if c.get_gid() == "windows"]
    assert isinstance(segs, LineCollection)
    (seg,) = segs.get_segments()  # the window with no held time is left blank
    np.testing.assert_allclose(seg, [[0.0, 0.55], [1.0, 0.55]])
    styles = {c.get_gid(): c for c in ax.collections if str(c.get_gid()).startswith("restart:")}
    assert set(styles) == {"restart:failure", "restart:preempt"}
    assert styles["restart:failure"].get_linestyle() != styles["restart:preempt"].get_linestyle()
    markers = {ln.get_gid(): ln.get_marker() for ln in ax.lines
               if str(ln.get_gid()).startswith("restart-marker")}
    assert len(set(markers.values())) == 2
    assert ax.get_ylim() == (0.0, 1.02)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("cumulative" in s for s in labels) and any("window" in s for s in labels)
    assert "failure" in labels and "preempt" in labels


@pytest.mark.parametrize("series, kwargs, match", [
    (pd.DataFrame({"time": [T0], "goodput": [0.5]}), {}, "missing column"),
    (pd.DataFrame({"time": [T0], "cumulative_goodput": [1.2]}), {}, r"\[0, 1\]"),
    (pd.DataFrame({"time": [T0], "cumulative_goodput": [np.nan]}), {}, "no finite value"),
    (pd.DataFrame({"time": [T0.tz_localize(None)], "cumulative_goodput": [0.5]}), {}, "timezone-aware"),
    (pd.DataFrame({"time": [T0], "cumulative_goodput": [0.5]}),
     {"windows": pd.DataFrame({"start": [T0], "end": [T0], "runtime_goodput": [-0.1]})}, r"\[0, 1\]"),
    (pd.DataFrame({"time": [T0], "cumulative_goodput": [0.5]}),
     {"restarts": pd.DataFrame({"when": [T0], "kind": ["failure"]})}, "missing column"),
])
def test_cumulative_rejects_bad_input(series, kwargs, match, ax):
    with pytest.raises(DomainError, match=match):
        plots.cumulative_goodput(series, ax=ax, **kwargs)


# ---------------------------------------------------------------------------------------------------
# step_time_distribution
# ---------------------------------------------------------------------------------------------------


def steps_frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    steady = 2.0 + rng.exponential(0.05, 900)
    erased = 2.0 + rng.exponential(0.05, 97)
    return pd.DataFrame({"duration_s": np.concatenate([steady, [5.0, 4.0, 3.0], erased]),
                         "phase": ["steady"] * 900 + ["warm-up"] * 3 + ["erased"] * 97})


def test_step_times_counts_groups_and_lines(ax):
    frame = steps_frame()
    plots.step_time_distribution(frame, fault_free_step_s=2.0, warmup_threshold_s=2.2, ax=ax)
    groups = {p.get_gid(): p for p in ax.patches if str(p.get_gid()).startswith("hist:")}
    assert set(groups) == {"hist:steady", "hist:warm-up", "hist:erased"}
    assert len({p.get_hatch() for p in groups.values()}) == 3
    assert len({tuple(np.round(p.get_facecolor(), 4)) for p in groups.values()}) == 3
    assert len({str(p.get_linestyle()) for p in groups.values()}) == 3
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "steady (900 steps)" in labels and "warm-up (3 steps)" in labels and "erased (97 steps)" in labels
    lines = {ln.get_gid(): ln for ln in ax.lines}
    assert lines["fault-free"].get_xdata()[0] == 2.0 and lines["warmup-threshold"].get_xdata()[0] == 2.2
    assert lines["fault-free"].get_linestyle() != lines["warmup-threshold"].get_linestyle()
    assert ax.get_yscale() == "log"


def test_step_times_bins_cover_every_step(ax):
    frame = steps_frame()
    _, edges = np.histogram(frame["duration_s"], bins=10)
    # a baseline inside the data range leaves the bins on the data's own range
    plots.step_time_distribution(frame, fault_free_step_s=2.05, hue=None, bins=10, ax=ax)
    (patch,) = [p for p in ax.patches if p.get_gid() == "hist:steps"]
    # a stepfilled outline: its top edge spans exactly the data range
    xs = patch.get_path().vertices[:, 0]
    assert xs.min() == pytest.approx(edges[0]) and xs.max() == pytest.approx(edges[-1])


def test_step_times_log_axis(ax):
    frame = pd.DataFrame({"duration_s": [1.0, 1.1, 30.0]})
    plots.step_time_distribution(frame, fault_free_step_s=1.0, log_x=True, ax=ax)
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()


@pytest.mark.parametrize("frame, kwargs, match", [
    (pd.DataFrame({"seconds": [1.0]}), {"fault_free_step_s": 1.0}, "missing column"),
    (pd.DataFrame({"duration_s": [1.0, 0.0]}), {"fault_free_step_s": 1.0}, "> 0"),
    (pd.DataFrame({"duration_s": [1.0]}), {"fault_free_step_s": -1.0}, "> 0"),
    (pd.DataFrame({"duration_s": [1.0]}), {"fault_free_step_s": 1.0, "warmup_threshold_s": 0.0}, "> 0"),
    (pd.DataFrame({"duration_s": [1.0]}), {"fault_free_step_s": 1.0, "bins": 1}, "bins"),
    (pd.DataFrame({"duration_s": [np.nan]}), {"fault_free_step_s": 1.0}, "finite"),
])
def test_step_times_reject_bad_input(frame, kwargs, match, ax):
    with pytest.raises(DomainError, match=match):
        plots.step_time_distribution(frame, ax=ax, **kwargs)


# ---------------------------------------------------------------------------------------------------
# Measured versus modelled, event chronicle, held time of result logs
# ---------------------------------------------------------------------------------------------------


def test_model_terms_bars_pairs_measured_and_modelled(ax):
    terms = pd.DataFrame({"measured": [0.02, 0.07, 0.0], "modelled": [0.021, np.nan, 0.001]},
                         index=["startup", "input_wait", "recovery"])
    plots.model_terms_bars(terms, ax=ax)
    assert len(ax.containers) == 2 and "(%)" in ax.get_xlabel()
    assert {c.patches[0].get_hatch() or "" for c in ax.containers} == {"", ".."}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["startup", "input wait", "recovery"]


def test_checkpoint_interval_bars_leave_out_missing_optima(ax):
    plots.checkpoint_interval_bars(pd.Series({"used": 17.7, "young": np.nan, "daly": 20.1}), ax=ax)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["used", "daly"]
    assert len({p.get_hatch() for p in ax.patches}) == 2 and "(min)" in ax.get_xlabel()
    with pytest.raises(DomainError):
        plots.checkpoint_interval_bars(pd.Series({"used": np.nan}))


def test_event_chronicle_gives_every_kind_its_own_colour_and_marker(ax):
    kinds = ["failure", "restore", "a", "b", "c", "d", "e", "f"]
    events = pd.DataFrame({"time": pd.date_range("2022-03-11", periods=len(kinds), freq="D", tz="UTC"),
                           "kind": kinds, "lost_work_s": [3600.0] + [np.nan] * (len(kinds) - 1)})
    plots.event_chronicle(events, ax=ax)
    styles = {(tuple(c.get_facecolor()[0]), c.get_paths()[0].vertices.tobytes()) for c in ax.collections}
    assert len(styles) == len(kinds)
    assert any(t.get_text() == "1 h" for t in ax.texts) and "(UTC)" in ax.get_xlabel()


def test_held_time_shares_stack_to_one(ax):
    summary = pd.DataFrame({"platform": ["small", "large"], "held_s": [100.0, 50.0], "startup_s": [5.0, 20.0],
                            "productive_s": [85.0, 25.0], "evaluation_s": [10.0, 5.0],
                            "unattributed_s": [0.0, 0.0]})
    plots.held_time_shares(summary, ax=ax)
    assert len(ax.containers) == len(plots.RESULT_LOG_PARTS)
    right = [max(b.get_x() + b.get_width() for b in bars) for bars in zip(*ax.containers, strict=True)]
    assert right == pytest.approx([1.0, 1.0])
    assert len({c.patches[0].get_hatch() or "" for c in ax.containers}) == len(ax.containers)


def test_step_series_draws_each_regime_at_its_level_and_marks_the_change_points(ax):
    # a job measured by the runtime rung: 10 s steps, 11.5 s from step 300 on
    from runtime.test_runtime_slowdown import fail_slow_jobs

    from fleetlib.runtime import runtime_goodput

    steps, events, _ = fail_slow_jobs()
    m = runtime_goodput(steps, events, job_id="shift")
    series = m.step_series("shift")
    out = plots.step_series(series, ax=ax)
    assert out is ax
    regimes = {c.get_gid(): c for c in ax.collections if str(c.get_gid()).startswith("regime:")}
    assert set(regimes) == {"regime:0", "regime:1"}
    # each level is drawn where the measurement put it, over the steps of its regime
    for gid, row in zip(("regime:0", "regime:1"), m.regimes.itertuples(), strict=True):
        (x0, y0), (x1, y1) = regimes[gid].get_segments()[0]
        assert y0 == y1 == pytest.approx(row.level_s)
        assert (x0, x1) == (row.first_step, row.last_step)
    healthy = m.regimes.loc[m.regimes["healthy"], "level_s"].iloc[0]
    assert m.fault_free_step_s["shift"] == pytest.approx(healthy)
    changes = [ln.get_gid() for ln in ax.lines if str(ln.get_gid()).startswith("change:")]
    assert changes == [f"change:{int(m.change_points['step'].iloc[0])}"]
    [points] = [ln for ln in ax.lines if ln.get_gid() == "steps"]
    assert len(points.get_xdata()) == len(series)
    assert "(s)" in ax.get_ylabel()
    with pytest.raises(DomainError, match="several jobs"):
        plots.step_series(runtime_goodput(steps, events).step_series(), ax=ax)


def test_device_series_draws_held_and_stepping_devices_as_measured(ax):
    # the issue-33 acceptance job: four slices, one lost at 60 s and regained at 155 s
    from runtime.test_runtime_elastic import _job

    from fleetlib.runtime import measure

    series = measure(_job()).device_series
    out = plots.device_series(series, ax=ax)
    assert out is ax
    lines = {ln.get_gid(): ln for ln in ax.lines}
    held = lines["held"]
    x, y = held.get_data()
    assert list(x) == pytest.approx([t / 3600 for t in (0, 60, 80, 95, 155, 160, 170, 190)])
    assert list(y) == [4, 3, 3, 3, 4, 4, 4, 0]
    assert list(lines["total"].get_data()[1]) == [4, 4, 4, 4, 4, 4, 4, 0]
    assert ax.get_ylabel() == "devices"
    with pytest.raises(DomainError):
        plots.device_series(series.iloc[0:0], ax=ax)
