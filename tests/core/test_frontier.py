"""Unit and property tests for fleetlib.frontier (iso-goodput, elastic strategies, frontier, compilation)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.accounting import cost_per_useful_hour, time_to_result
from fleetlib.frontier import (
    ELASTIC_STRATEGIES,
    FRONTIER_COLUMNS,
    CompileCacheKey,
    break_even_ratio,
    compile_break_even,
    compiled_step_fraction,
    efficiency_frontier,
    elastic_break_even_pause_h,
    elastic_strategies,
    iso_goodput_curve,
    iso_goodput_grid,
    max_relative_rise,
    pareto_frontier,
    price_tiers,
    relative_goodput_per_held_gpu_hour,
)
from fleetlib.quality import DomainError

fractions = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
positive_fractions = st.floats(min_value=1e-3, max_value=1.0, allow_nan=False)


# ---------------------------------------------------------------------------------------------------
# Iso-goodput
# ---------------------------------------------------------------------------------------------------


def test_grid_columns_shape_and_a_hand_point():
    grid = iso_goodput_grid("program", "runtime", fixed={"scheduling": 0.65},
                            x_range=(0.48, 0.65), y_range=(0.90, 1.0), n=2)
    assert list(grid.columns) == ["program", "runtime", "value"]
    assert len(grid) == 4
    row = grid[(grid["program"] == 0.48) & (grid["runtime"] == 0.90)]
    assert row["value"].item() == pytest.approx(0.2808)  # the running example's MPG
    assert grid.attrs["product"] == "pool"
    assert grid.attrs["fixed"] == {"scheduling": 0.65}


def test_grid_job_mode_is_runtime_times_program():
    grid = iso_goodput_grid("runtime", "program", fixed={}, x_range=(0.5, 1.0), y_range=(0.2, 0.8), n=5)
    assert list(grid.columns) == ["runtime", "program", "value"]
    np.testing.assert_allclose(grid["value"], grid["runtime"] * grid["program"])
    assert grid.attrs["product"] == "job"
    # every combination of the two axes appears exactly once
    assert grid[["runtime", "program"]].drop_duplicates().shape[0] == 25


def test_grid_other_axis_pairs_hold_their_third_factor():
    grid = iso_goodput_grid("scheduling", "program", fixed={"runtime": 0.9}, n=3)
    np.testing.assert_allclose(grid["value"], grid["scheduling"] * grid["program"] * 0.9)


@pytest.mark.parametrize("kwargs", [
    dict(x_factor="program", y_factor="program", fixed={"scheduling": 0.5}),
    dict(x_factor="mfu", y_factor="runtime", fixed={"scheduling": 0.5}),
    dict(x_factor="scheduling", y_factor="runtime", fixed={}),  # job mode needs runtime x program
    dict(x_factor="program", y_factor="runtime", fixed={"runtime": 0.5}),
    dict(x_factor="program", y_factor="runtime", fixed={"scheduling": 0.5, "program": 0.4}),
    dict(x_factor="program", y_factor="runtime", fixed={"scheduling": 1.2}),
    dict(x_factor="program", y_factor="runtime", fixed={}, x_range=(0.5, 0.5)),
    dict(x_factor="program", y_factor="runtime", fixed={}, x_range=(-0.1, 0.5)),
    dict(x_factor="program", y_factor="runtime", fixed={}, y_range=(0.5, 1.5)),
    dict(x_factor="program", y_factor="runtime", fixed={}, y_range=(0.1, 0.2, 0.3)),
    dict(x_factor="program", y_factor="runtime", fixed={}, n=1),
    dict(x_factor="program", y_factor="runtime", fixed={}, n=2.5),
    dict(x_factor="program", y_factor="runtime", fixed={}, n=True),
])
def test_grid_rejects_bad_arguments(kwargs):
    with pytest.raises(DomainError):
        iso_goodput_grid(**kwargs)


@settings(max_examples=40, deadline=None)
@given(s=fractions, lo=st.floats(0.0, 0.5), hi=st.floats(0.51, 1.0), n=st.integers(2, 12))
def test_grid_value_is_the_product(s, lo, hi, n):
    grid = iso_goodput_grid("program", "runtime", fixed={"scheduling": s}, x_range=(lo, hi),
                            y_range=(lo, hi), n=n)
    assert len(grid) == n * n
    np.testing.assert_allclose(grid["value"].to_numpy(),
                               s * grid["program"].to_numpy() * grid["runtime"].to_numpy(), rtol=1e-12,
                               atol=1e-300)
    assert grid["program"].min() == pytest.approx(lo) and grid["runtime"].max() == pytest.approx(hi)


def test_curve_through_running_example_gives_the_break_even_loss():
    level = 0.90 * 0.48
    curve = iso_goodput_curve(level, [0.48, 0.65], fixed={})
    r_at_ceiling = curve.loc[curve["program"] == 0.65, "runtime"].item()
    # second method: the break-even ratio of the program lever
    assert 1 - r_at_ceiling / 0.90 == pytest.approx(break_even_ratio(0.65 / 0.48))
    assert curve.loc[curve["program"] == 0.48, "runtime"].item() == pytest.approx(0.90)


def test_curve_drops_unreachable_points_instead_of_nan():
    curve = iso_goodput_curve(0.5, [0.0, 0.2, 0.5, 0.8, 1.0], fixed={})
    assert list(curve.columns) == ["program", "runtime"]
    assert curve["program"].tolist() == [0.5, 0.8, 1.0]  # 0 and 0.2 would need runtime > 1
    assert not curve.isna().any().any()
    assert (curve["runtime"] <= 1.0).all()
    # a level above the fixed factor cannot be reached at all
    assert iso_goodput_curve(0.7, [0.5, 1.0], fixed={"scheduling": 0.65}).empty


@pytest.mark.parametrize("level, xs", [(0.0, [0.5]), (1.1, [0.5]), (0.3, [1.2]), (0.3, [-0.1]),
                                       (0.3, [float("nan")]), (float("nan"), [0.5])])
def test_curve_rejects_bad_arguments(level, xs):
    with pytest.raises(DomainError):
        iso_goodput_curve(level, xs, fixed={})


@settings(max_examples=40, deadline=None)
@given(s=positive_fractions, level=positive_fractions,
       xs=st.lists(fractions, min_size=0, max_size=30))
def test_curve_points_all_hold_the_level(s, level, xs):
    curve = iso_goodput_curve(level, xs, x_factor="runtime", y_factor="program", fixed={"scheduling": s})
    product = s * curve["runtime"].to_numpy() * curve["program"].to_numpy()
    np.testing.assert_allclose(product, level, rtol=1e-12)
    assert ((curve["program"] > 0) & (curve["program"] <= 1.0 + 1e-12)).all()
    # every x that can reach the level is kept
    assert len(curve) == sum(1 for x in xs if x * s >= level)


def test_break_even_and_headroom_helpers():
    assert break_even_ratio(1.0) == 0.0
    assert break_even_ratio(2.0) == pytest.approx(0.5)
    assert max_relative_rise(1.0) == 0.0
    assert max_relative_rise(0.5) == pytest.approx(1.0)
    for bad in (0.99, 0.0, -2.0, float("inf")):
        with pytest.raises(DomainError):
            break_even_ratio(bad)
    for bad in (0.0, 1.01, -0.1):
        with pytest.raises(DomainError):
            max_relative_rise(bad)


@settings(max_examples=50, deadline=None)
@given(gain=st.floats(1.0, 100.0))
def test_break_even_loss_exactly_cancels_the_gain(gain):
    assert gain * (1.0 - break_even_ratio(gain)) == pytest.approx(1.0, rel=1e-12)


# ---------------------------------------------------------------------------------------------------
# Elastic strategies
# ---------------------------------------------------------------------------------------------------


def test_elastic_defaults_by_hand():
    frame = elastic_strategies().set_index("strategy")
    assert tuple(frame.index) == ELASTIC_STRATEGIES
    for col in ("devices_held", "queue_h", "progress_in_window", "relative_rate", "time_to_result_h",
                "held_gpu_h", "relative_goodput"):
        assert col in frame.columns
    # small: 1 epoch/h; full: 4 x 0.8 = 3.2 epochs/h after a 4-h wait;
    # step: 1 epoch/h to t = 4 h, a 10-min pause, then 2 x 0.9 = 1.8 epochs/h
    assert frame["time_to_result_h"].to_dict() == pytest.approx(
        {"small now": 64.0, "wait for full": 4 + 64 / 3.2, "step up": 4 + 1 / 6 + 60 / 1.8})
    assert frame["held_gpu_h"].to_dict() == pytest.approx(
        {"small now": 128 * 64, "wait for full": 512 * 20, "step up": 128 * 4 + 256 / 6 + 256 * 60 / 1.8})
    assert frame["progress_in_window"].to_dict() == pytest.approx(
        {"small now": 24.0, "wait for full": 64.0, "step up": 4 + (20 - 1 / 6) * 1.8})
    assert frame["devices_held"].tolist() == [128, 512, 256]
    assert frame.loc["small now", "relative_goodput"] == 1.0
    assert frame.loc["step up", "runtime_goodput"] == pytest.approx(1 - (256 / 6) / 9088)


def test_elastic_full_row_agrees_with_equation_7():
    frame = elastic_strategies(wait_h=2.5, window_h=30.0).set_index("strategy")
    target = frame.loc["wait for full", "target_epochs"]
    assert target == pytest.approx((30 - 2.5) * 3.2)
    assert frame.loc["wait for full", "time_to_result_h"] == pytest.approx(
        time_to_result(2.5, target * 128, 512, 1.0, 0.8))


def test_elastic_target_reached_before_step_up_never_steps():
    frame = elastic_strategies(target_epochs=3.0).set_index("strategy")
    assert frame.loc["step up", "time_to_result_h"] == pytest.approx(3.0)
    assert frame.loc["step up", "devices_held"] == 128
    assert frame.loc["step up", "relative_goodput"] == pytest.approx(1.0)


def test_elastic_pause_held_devices_is_explicit():
    default = elastic_strategies().set_index("strategy").loc["step up", "held_gpu_h"]
    smaller = elastic_strategies(pause_held_devices=128).set_index("strategy").loc["step up", "held_gpu_h"]
    assert default - smaller == pytest.approx((256 - 128) / 6)


def test_break_even_pause_equalises_window_progress():
    pause_h = elastic_break_even_pause_h()
    assert pause_h == pytest.approx(20 * (1 - 1 / 1.8))
    frame = elastic_strategies(rescale_pause_min=pause_h * 60).set_index("strategy")
    progress = frame["progress_in_window"]
    assert progress["step up"] == pytest.approx(progress["small now"])
    longer = elastic_strategies(rescale_pause_min=pause_h * 60 + 30).set_index("strategy")
    assert longer.loc["step up", "progress_in_window"] < longer.loc["small now", "progress_in_window"]


@pytest.mark.parametrize("kwargs", [
    dict(small_devices=256),
    dict(step_devices=512),
    dict(small_devices=0),
    dict(small_devices=128.0),
    dict(target_devices=True),
    dict(efficiency={256: 0.9}),
    dict(efficiency={256: 0.9, 512: 1.2}),
    dict(efficiency={128: 0.95, 256: 0.9, 512: 0.8}),
    dict(wait_h=-1.0),
    dict(step_up_h=-0.5),
    dict(rescale_pause_min=-10.0),
    dict(window_h=0.0),
    dict(wait_h=30.0),
    dict(wait_h=24.0, target_epochs=10.0),
    dict(target_epochs=0.0),
    dict(pause_held_devices=0),
])
def test_elastic_rejects_bad_arguments(kwargs):
    with pytest.raises(DomainError):
        elastic_strategies(**kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(step_efficiency=0.5),  # 2 x 0.5 = 1x: no pause is ever repaid
    dict(step_up_h=24.0),
    dict(window_h=-1.0),
    dict(step_devices=128),
    dict(step_efficiency=0.0),
])
def test_break_even_pause_rejects_bad_arguments(kwargs):
    with pytest.raises(DomainError):
        elastic_break_even_pause_h(**kwargs)


def test_relative_goodput_helper():
    assert relative_goodput_per_held_gpu_hour(8192, 10240) == pytest.approx(0.8)
    np.testing.assert_allclose(relative_goodput_per_held_gpu_hour(10.0, np.array([10.0, 20.0])), [1.0, 0.5])
    for useful, held in ((1.0, 0.0), (-1.0, 1.0), (1.0, float("nan"))):
        with pytest.raises(DomainError):
            relative_goodput_per_held_gpu_hour(useful, held)


# ---------------------------------------------------------------------------------------------------
# Price tiers and the frontier
# ---------------------------------------------------------------------------------------------------


def _points() -> pd.DataFrame:
    return pd.DataFrame({"label": ["a", "b"], "queue_h": [0.0, 2.0], "time_to_result_h": [10.0, 6.0],
                         "relative_goodput": [1.0, 0.5]})


def test_price_tiers_cost_and_runtime_factor():
    priced = price_tiers(_points(), {"fleet": 1.0, "spot": 0.4}, runtime_factor={"spot": 0.8})
    assert priced["tier"].tolist() == ["fleet", "fleet", "spot", "spot"]
    assert priced["label"].tolist() == ["a", "b", "a", "b"]
    spot_b = priced.iloc[3]
    assert spot_b["relative_goodput"] == pytest.approx(0.4)
    assert spot_b["time_to_result_h"] == pytest.approx(2.0 + 4.0 / 0.8)  # queue kept, held part stretched
    assert spot_b["cost_per_useful_unit"] == pytest.approx(0.4 / 0.4)
    # second method: equation 6 with S = P = 1 and the relative goodput as R
    for _, row in priced.iterrows():
        assert row["cost_per_useful_unit"] == pytest.approx(
            cost_per_useful_hour(row["price_fraction"], 1.0, row["relative_goodput"], 1.0))


def test_price_tiers_accepts_strategy_column():
    priced = price_tiers(elastic_strategies().drop(columns="label"), {"fleet": 1.0})
    assert priced["label"].tolist() == list(ELASTIC_STRATEGIES)


@pytest.mark.parametrize("tiers, factor, points", [
    ({}, None, _points()),
    ({"fleet": -1.0}, None, _points()),
    ({"fleet": 1.0}, {"spot": 0.9}, _points()),
    ({"spot": 0.3}, {"spot": 0.0}, _points()),
    ({"spot": 0.3}, {"spot": 1.2}, _points()),
    ({"fleet": 1.0}, None, _points().drop(columns="queue_h")),
    ({"fleet": 1.0}, None, _points().drop(columns="label")),
    ({"fleet": 1.0}, None, _points().assign(queue_h=[0.0, 7.0])),
    ({"fleet": 1.0}, None, _points().assign(relative_goodput=[1.0, 0.0])),
    ({"fleet": 1.0}, None, _points().assign(time_to_result_h=[np.nan, 6.0])),
    ({"fleet": 1.0}, None, _points().assign(queue_h=[-1.0, 0.0])),
])
def test_price_tiers_rejects_bad_arguments(tiers, factor, points):
    with pytest.raises(DomainError):
        price_tiers(points, tiers, runtime_factor=factor)


def test_pareto_hand_fixture_with_ties():
    pts = pd.DataFrame({"x": [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0],
                        "y": [5.0, 6.0, 3.0, 3.0, 4.0, 1.0, 1.0]})
    out = pareto_frontier(pts, x="x", y="y")
    # (1,5) fastest; (1,6) same x higher y; two identical (2,3) both stay; (3,4) beaten by (2,3);
    # (3,1) on; (4,1) beaten by (3,1) (same y, larger x)
    assert out["on_frontier"].tolist() == [True, False, True, True, False, True, False]
    assert out.index.equals(pts.index) and list(pts.columns) == ["x", "y"]  # input untouched


def test_pareto_rejects_bad_input_and_handles_empty():
    with pytest.raises(DomainError):
        pareto_frontier(pd.DataFrame({"x": [1.0], "y": [np.inf]}), x="x", y="y")
    with pytest.raises(DomainError):
        pareto_frontier(pd.DataFrame({"x": [1.0]}), x="x", y="y")
    with pytest.raises(DomainError):
        pareto_frontier([(1, 2)], x="x", y="y")  # type: ignore[arg-type]
    empty = pareto_frontier(pd.DataFrame({"x": [], "y": []}), x="x", y="y")
    assert empty["on_frontier"].dtype == bool and empty.empty


def _dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[0] and a[1] <= b[1] and (a[0] < b[0] or a[1] < b[1])


coords = st.lists(st.tuples(st.integers(0, 6).map(float), st.integers(0, 6).map(float)), min_size=1,
                  max_size=25)


@settings(max_examples=80, deadline=None)
@given(points=coords)
def test_pareto_properties(points):
    frame = pd.DataFrame(points, columns=["x", "y"])
    out = pareto_frontier(frame, x="x", y="y")
    on = [p for p, f in zip(points, out["on_frontier"], strict=True) if f]
    off = [p for p, f in zip(points, out["on_frontier"], strict=True) if not f]
    assert on  # a finite non-empty set always has a frontier
    for p in off:
        assert any(_dominates(q, p) for q in on)
    for p in on:
        assert not any(_dominates(q, p) for q in on)
        assert not any(_dominates(q, p) for q in points)


def test_efficiency_frontier_columns_and_single_price_has_no_dominance():
    frame = efficiency_frontier(elastic_strategies(), {"fleet": 1.0})
    assert tuple(frame.columns) == FRONTIER_COLUMNS
    # at one price cost is the reciprocal of goodput, and the three strategies trade time against cost
    assert frame["on_frontier"].all()
    np.testing.assert_allclose(frame["cost_per_useful_unit"] * frame["relative_goodput"], 1.0)


# ---------------------------------------------------------------------------------------------------
# Compilation break-even
# ---------------------------------------------------------------------------------------------------


def test_compiled_step_fraction_by_hand_and_bad_args():
    assert compiled_step_fraction({"a": 0.6, "b": 0.4}, {"b": 0.5}) == pytest.approx(0.8)
    assert compiled_step_fraction({"a": 1.0}, {}) == 1.0
    for shares, removed in (({}, {}), ({"a": 0.6, "b": 0.3}, {}), ({"a": 1.0}, {"b": 0.5}),
                            ({"a": 1.0}, {"a": 1.5}), ({"a": 1.2, "b": -0.2}, {})):
        with pytest.raises(DomainError):
            compiled_step_fraction(shares, removed)


def test_shared_artifact_charged_once_per_replica_builds_charged_to_each():
    shared = compile_break_even(step_s=0.01, compiled_step_s=0.005, build_s=600, replicas=10,
                                burst_held_s=3600)
    own = compile_break_even(step_s=0.01, compiled_step_s=0.005, build_s=600, replicas=10,
                             shared_artifact=False, burst_held_s=3600)
    assert shared.executions_to_repay == own.executions_to_repay == pytest.approx(120_000)
    assert shared.builds == 1 and own.builds == 10
    assert shared.charged_build_device_h == pytest.approx(600 / 3600)
    assert own.charged_build_device_h == pytest.approx(10 * 600 / 3600) == own.per_replica_builds_device_h
    assert shared.build_s_charged_per_replica == 0.0 and shared.burst_share == 0.0
    assert own.build_s_charged_per_replica == 600 and own.burst_share == pytest.approx(600 / 3600)
    assert shared.shared_repay_time_s == pytest.approx(120_000 * 0.005 / 10)
    assert own.to_dict()["speedup"] == pytest.approx(2.0)


@pytest.mark.parametrize("kwargs", [
    dict(step_s=0.01, compiled_step_s=0.01, build_s=60),
    dict(step_s=0.01, compiled_step_s=0.02, build_s=60),
    dict(step_s=0.0, compiled_step_s=0.001, build_s=60),
    dict(step_s=0.01, compiled_step_s=0.005, build_s=-1),
    dict(step_s=0.01, compiled_step_s=0.005, build_s=60, replicas=0),
    dict(step_s=0.01, compiled_step_s=0.005, build_s=60, shared_artifact="yes"),
    dict(step_s=0.01, compiled_step_s=0.005, build_s=600, shared_artifact=False, burst_held_s=300),
    dict(step_s=0.01, compiled_step_s=0.005, build_s=600, burst_held_s=0),
    dict(step_s=0.01, compiled_step_s=0.005, build_s=600, devices_per_replica=0),
])
def test_compile_break_even_rejects_bad_arguments(kwargs):
    with pytest.raises(DomainError):
        compile_break_even(**kwargs)


@settings(max_examples=50, deadline=None)
@given(step=st.floats(1e-4, 10.0), frac=st.floats(0.05, 0.95), build=st.floats(0.0, 1e5),
       replicas=st.integers(1, 1000))
def test_savings_over_break_even_repay_the_build(step, frac, build, replicas):
    out = compile_break_even(step_s=step, compiled_step_s=step * frac, build_s=build, replicas=replicas)
    assert out.executions_to_repay * out.saving_s == pytest.approx(build, rel=1e-9, abs=1e-9)
    assert out.shared_repay_time_s * replicas == pytest.approx(out.repay_time_s, rel=1e-12, abs=1e-12)


def test_cache_key_reuse():
    key = CompileCacheKey("rev-7", [(8, 4096)], [16, 8], "H100 SXM", "torch 2.5")
    same = CompileCacheKey("rev-7", ((8, 4096),), (16, 8), "H100 SXM", "torch 2.5")
    assert key.can_reuse_for(same) and key.invalidated_by(same) == ()
    changes = {"model_revision": "rev-8", "input_shapes": ((8, 8192),), "device_mesh": (32, 8),
               "accelerator_model": "H200", "compiler_version": "torch 2.6"}
    for name, value in changes.items():
        other = CompileCacheKey(**{**same.__dict__, name: value})
        assert not key.can_reuse_for(other)
        assert key.invalidated_by(other) == (name,)
    with pytest.raises(DomainError):
        CompileCacheKey("", (), (), "H100", "x")
    with pytest.raises(DomainError):
        CompileCacheKey("r", "8x4096", (), "H100", "x")  # type: ignore[arg-type]
    with pytest.raises(DomainError):
        key.can_reuse_for("rev-7")  # type: ignore[arg-type]


def test_napkin_default_build_needs_fifteen_times_fewer_tokens():
    t0 = 1 / 120
    autotune = compile_break_even(step_s=t0, compiled_step_s=0.635 * t0, build_s=900)
    default = compile_break_even(step_s=t0, compiled_step_s=0.635 * t0, build_s=60)
    assert autotune.executions_to_repay / default.executions_to_repay == pytest.approx(15.0)
    assert math.isclose(default.executions_to_repay, 60 / (0.365 * t0))
