"""Unit and property tests of fleetlib.program.roofline and fleetlib.program.iron_law."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.program.flops import PEAK_RATES, PeakRate
from fleetlib.program.iron_law import (
    attention_hbm_traffic_bytes,
    collective_time_s,
    dispatch_to_floor_ratio,
    fleet_law_step_s,
    fusion_hbm_traffic_bytes,
    fusion_traffic_ratio,
    iron_law_terms_s,
    iron_law_time_s,
    ring_allreduce_bytes_per_rank,
    ring_wire_bytes_per_rank,
    speedup_from_term_scaling,
    split_collective_wait,
    straggler_mfu,
    synchronous_rate_factor,
    tiled_attention_traffic_ratio,
    tp_allreduce_bytes_per_layer,
    trace_volume_bytes,
)
from fleetlib.program.roofline import (
    BAD_SHAPES,
    NO_RULE,
    OP_FLOP_RULES,
    UNKNOWN_DTYPE,
    arithmetic_intensity,
    attainable_flops,
    bandwidth_fraction,
    bandwidth_headroom,
    compute_fraction,
    gemm_time_split,
    kernel_roofline,
    measured_intensity,
    op_flops_bytes,
    place_kernels,
    ridge_point,
    roofline_diagnosis,
    roofline_placement,
    roofline_regime,
)
from fleetlib.quality import DomainError

H100 = PEAK_RATES["H100 SXM"]
PEAK, BW = H100.peak_flops_per_s, H100.hbm_bytes_per_s

intensities = st.floats(0.0, 1e5, allow_nan=False)
peaks = st.floats(1e12, 5e15)
bandwidths = st.floats(1e11, 1e13)


# =========================================================================================== roofline


def test_intensity_and_ridge_by_hand():
    assert arithmetic_intensity(2e9, 1e9) == 2.0
    assert measured_intensity(5e12, 2.8e12) == pytest.approx(5 / 2.8)
    assert ridge_point(PEAK, BW) == pytest.approx(989 / 3.35)
    np.testing.assert_allclose(arithmetic_intensity([1.0, 4.0], [2.0, 2.0]), [0.5, 2.0])


@pytest.mark.parametrize(("fn", "args"), [
    (arithmetic_intensity, (1e9, 0.0)), (arithmetic_intensity, (-1.0, 1.0)), (ridge_point, (0.0, BW)),
    (attainable_flops, (-1.0, PEAK, BW)), (roofline_regime, (1.0, 0.0)),
    (measured_intensity, (1.0, [1.0, 0.0])),
])
def test_roofline_bad_arguments(fn, args):
    with pytest.raises(DomainError):
        fn(*args)


def test_error_message_names_the_bad_index():
    with pytest.raises(DomainError, match="index 2"):
        arithmetic_intensity([1.0, 1.0, 1.0], [1.0, 2.0, -3.0])


@settings(max_examples=100, deadline=None)
@given(i=intensities, peak=peaks, bw=bandwidths)
def test_attainable_is_below_both_ceilings_and_touches_one(i, peak, bw):
    a = attainable_flops(i, peak, bw)
    assert a <= peak * (1 + 1e-12) and a <= i * bw * (1 + 1e-12) + 1e-300
    assert a == pytest.approx(min(peak, i * bw))


@settings(max_examples=100, deadline=None)
@given(peak=peaks, bw=bandwidths, eps=st.floats(1e-9, 1e-3))
def test_attainable_is_continuous_at_the_ridge(peak, bw, eps):
    ridge = ridge_point(peak, bw)
    at = attainable_flops(ridge, peak, bw)
    assert at == pytest.approx(peak, rel=1e-12)
    below = attainable_flops(ridge * (1 - eps), peak, bw)
    above = attainable_flops(ridge * (1 + eps), peak, bw)
    assert below == pytest.approx(at, rel=2 * eps) and above == pytest.approx(at, rel=1e-12)
    assert roofline_regime(ridge * (1 - eps), ridge) == "memory-bound"
    assert roofline_regime(ridge, ridge) == "compute-bound"


@settings(max_examples=50, deadline=None)
@given(xs=st.lists(intensities, min_size=2, max_size=50))
def test_attainable_is_vectorised_and_monotone(xs):
    i = np.sort(np.array(xs))
    a = attainable_flops(i, PEAK, BW)
    assert isinstance(a, np.ndarray) and a.shape == i.shape
    assert np.all(np.diff(a) >= 0)
    np.testing.assert_allclose(a, [attainable_flops(x, PEAK, BW) for x in i])


def test_regime_is_vectorised():
    ridge = ridge_point(PEAK, BW)
    got = roofline_regime(np.array([1.8, 295.0, 296.0, 1000.0]), ridge)
    assert list(got) == ["memory-bound", "memory-bound", "compute-bound", "compute-bound"]


def test_fractions_and_headroom():
    assert bandwidth_fraction(2.8e12, BW) == pytest.approx(2.8 / 3.35)
    assert bandwidth_headroom(2.8e12, BW) == pytest.approx(1 - 2.8 / 3.35)
    assert compute_fraction(700e12, PEAK) == pytest.approx(700 / 989)
    with pytest.raises(DomainError, match="memory boundaries"):
        bandwidth_fraction(4e12, BW)
    with pytest.raises(DomainError, match="precision"):
        compute_fraction(1200e12, PEAK)


def test_three_diagnoses_of_measured_kernels():
    flops = np.array([5e12, 800e12, 50e12, 0.5e12])
    traffic = np.array([2.8e12, 0.5e12, 0.2e12, 1.0e12])
    got = roofline_diagnosis(flops, traffic, PEAK, BW)
    # LayerNorm-like near the slope; a large GEMM near the plateau; a GEMM far below both; a
    # memory-bound kernel using under a third of the bandwidth.
    assert list(got) == ["near bandwidth ceiling", "near compute ceiling", "below both ceilings",
                         "below both ceilings"]
    with pytest.raises(DomainError):
        roofline_diagnosis(flops, traffic, PEAK, BW, near=0.0)


def test_place_kernels_on_arrays_and_a_zero_flop_kernel():
    k = place_kernels(np.array([0.0, 5e12]), np.array([1e12, 2.8e12]), PEAK, BW)
    assert k.fraction_of_attainable[0] == 0.0 and np.isinf(k.below_ridge_factor[0])
    assert list(k.regime) == ["memory-bound", "memory-bound"]
    np.testing.assert_allclose(k.bandwidth_fraction + k.bandwidth_headroom, 1.0)


def test_a_point_above_the_roofline_is_refused():
    # Above the slope means more bytes/s than the peak; above the plateau means more FLOP/s than peak.
    with pytest.raises(DomainError, match="memory boundaries"):
        place_kernels(100e12, 4e12, PEAK, BW)
    with pytest.raises(DomainError, match="precision"):
        place_kernels(1100e12, 1e12, PEAK, BW)
    k = place_kernels(PEAK, BW, PEAK, BW)  # exactly at the ridge, on both ceilings
    assert k.fraction_of_attainable == pytest.approx(1.0) and k.regime == "compute-bound"


# =========================================================================================== iron law


def test_iron_law_terms_sum():
    terms = iron_law_terms_s(6e9, 1e12, 3e12, 1e15, 0.5, 2e-3)
    assert terms["data_s"] == pytest.approx(6e-3) and terms["compute_s"] == pytest.approx(6e-3)
    assert terms["total_s"] == pytest.approx(14e-3)
    assert iron_law_time_s(6e9, 1e12, 3e12, 1e15, 0.5, 2e-3) == terms["total_s"]
    for eff in (0.0, 1.5):
        with pytest.raises(DomainError):
            iron_law_time_s(6e9, 1e12, 3e12, 1e15, eff, 2e-3)


def test_term_scaling_agrees_with_the_iron_law():
    # Build a 60/30/10 step from physical terms and double the peak: a second route to 1.18x.
    before = iron_law_time_s(0.6e12, 1e12, 0.3e15, 1e15, 1.0, 0.1)
    after = iron_law_time_s(0.6e12, 1e12, 0.3e15, 2e15, 1.0, 0.1)
    shares = {"data": 0.6, "compute": 0.3, "overhead": 0.1}
    assert speedup_from_term_scaling(shares, {"compute": 0.5}) == pytest.approx(before / after)


@pytest.mark.parametrize(("shares", "scale", "match"), [
    ({"data": 0.6, "compute": 0.3}, {}, "sum to 1"),
    ({"data": 0.6, "compute": 0.4}, {"network": 0.5}, "not in shares"),
    ({"data": 1.0}, {"data": 0.0}, "unbounded"),
    ({"data": 1.1, "compute": -0.1}, {}, ">= 0"),
    ({}, {}, "empty"),
    ({"data": 0.6, "compute": 0.4}, {"data": -1.0}, ">= 0"),
])
def test_term_scaling_bad_arguments(shares, scale, match):
    with pytest.raises(DomainError, match=match):
        speedup_from_term_scaling(shares, scale)


@settings(max_examples=100, deadline=None)
@given(a=st.floats(0.0, 1.0), b=st.floats(0.0, 1.0), s=st.floats(0.01, 1.0))
def test_shrinking_a_term_never_slows_the_step(a, b, s):
    total = a + b + 1.0
    shares = {"x": a / total, "y": b / total, "z": 1.0 / total}
    shares["z"] = 1.0 - shares["x"] - shares["y"]
    sp = speedup_from_term_scaling(shares, {"x": s})
    assert 1.0 <= sp <= 1.0 / (1.0 - shares["x"] * (1 - s)) * (1 + 1e-12)


def test_fleet_law_step():
    assert fleet_law_step_s(12.8, 128, 0.05, 0.02, 0.03) == pytest.approx(0.1 + 0.05 + 0.02 - 0.03)
    # A measured per-device shard is not divided by N again.
    assert fleet_law_step_s(0.18, 128, 0.05, local_is_per_device=True) == pytest.approx(0.23)
    curve = fleet_law_step_s(10.0, np.array([8, 16, 32]), np.array([0.01, 0.02, 0.04]))
    np.testing.assert_allclose(curve, [1.26, 0.645, 0.3525])
    with pytest.raises(DomainError, match="only communication"):
        fleet_law_step_s(12.8, 128, 0.05, 0.0, 0.06)
    with pytest.raises(DomainError, match="local execution"):
        fleet_law_step_s(1.28, 128, 0.05, 0.0, 0.02)
    with pytest.raises(DomainError):
        fleet_law_step_s(1.28, 0, 0.05)


# =========================================================================================== collectives


def test_ring_bytes():
    assert ring_allreduce_bytes_per_rank(36e6, 8) == pytest.approx(63e6)
    assert ring_allreduce_bytes_per_rank(36e6, 1) == 0.0
    assert ring_wire_bytes_per_rank(8e6, 4, "allgather") == pytest.approx(6e6)
    assert ring_wire_bytes_per_rank(8e6, 4, "reducescatter") == pytest.approx(6e6)
    with pytest.raises(DomainError, match="collective"):
        ring_wire_bytes_per_rank(8e6, 4, "alltoall")
    with pytest.raises(DomainError, match="whole number"):
        ring_allreduce_bytes_per_rank(8e6, 2.5)


@settings(max_examples=100, deadline=None)
@given(message=st.floats(1.0, 1e10), n=st.integers(2, 4096))
def test_ring_allreduce_volume_is_below_twice_the_message_and_grows_with_ranks(message, n):
    b = ring_allreduce_bytes_per_rank(message, n)
    assert message <= b < 2 * message
    assert ring_allreduce_bytes_per_rank(message, n + 1) >= b


def test_collective_time_counts_latency_and_bandwidth():
    t = collective_time_s(36e6, 8, 450e9, count=320, latency_s=10e-6)
    assert t == pytest.approx(320 * (10e-6 + 63e6 / 450e9))
    assert collective_time_s(36e6, 8, 450e9, count=0) == 0.0
    with pytest.raises(DomainError):
        collective_time_s(36e6, 8, 0.0)


def test_tp_allreduce_bytes():
    assert tp_allreduce_bytes_per_layer(8192, 2, tokens=16) == 16 * 8192 * 2 * 2
    with pytest.raises(DomainError):
        tp_allreduce_bytes_per_layer(8192, 2, tokens=0)


# =========================================================================================== traffic models


def test_fusion_traffic_model():
    assert fusion_traffic_ratio(2048, 8192, 2, elementwise_ops=0) == 1.0
    unfused, fused = fusion_hbm_traffic_bytes(10, 4, 2, elementwise_ops=3, weight_bytes=100.0)
    assert (unfused, fused) == (100 + 2 * 80 + 6 * 80, 100 + 2 * 80)
    # More tokens per weight make the intermediates dominate, so fusion saves relatively more.
    ratios = fusion_traffic_ratio(np.array([256, 2048, 16384]), 8192, 2)
    assert np.all(np.diff(ratios) > 0) and ratios[-1] < 4.0  # bounded by (6A)/(2A) = 3 as W/A -> 0
    with pytest.raises(DomainError):
        fusion_traffic_ratio(2048, 8192, 0)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 65536), d=st.integers(1, 512), b=st.sampled_from([1, 2, 4]))
def test_tiled_attention_ratio_matches_the_byte_model(n, d, b):
    standard = attention_hbm_traffic_bytes(n, d, b, tiled=False)
    ratio = standard / attention_hbm_traffic_bytes(n, d, b, tiled=True)
    assert ratio == pytest.approx(tiled_attention_traffic_ratio(n, d))


# =========================================================================================== waits


def test_split_collective_wait_on_many_collectives():
    enter = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0], [0.0, 1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    finish = np.array([2.0, 5.0, 6.0, 1.5])
    s = split_collective_wait(enter, finish, 2.0)
    np.testing.assert_allclose(s.barrier_wait_s, [0.0, 3.0, 2.0, 0.0])
    np.testing.assert_allclose(s.transfer_s, [2.0, 2.0, 4.0, 1.5])
    np.testing.assert_allclose(s.added_transfer_s, [0.0, 0.0, 2.0, -0.5])
    assert list(s.term) == ["none", "synchronization", "both", "none"]
    assert list(s.late_rank) == [0, 3, 3, 0]
    np.testing.assert_allclose(s.per_rank_wait_s[2], [2.0, 1.0, 2.0, 0.0])
    # Parts add up: barrier wait + transfer = finish - first entry.
    np.testing.assert_allclose(s.barrier_wait_s + s.transfer_s, finish - enter.min(axis=1))


def test_split_collective_wait_resolution_and_bad_input():
    s = split_collective_wait([0.0, 1e-7], 2e-3 + 1e-7, 2e-3, resolution_s=1e-6)
    assert s.term == "none"
    with pytest.raises(DomainError, match="before its last rank"):
        split_collective_wait([0.0, 5.0], 4.0, 1.0)
    with pytest.raises(DomainError, match="ranks axis"):
        split_collective_wait(1.0, 4.0, 1.0)
    with pytest.raises(DomainError, match="one finish per collective"):
        split_collective_wait(np.zeros((3, 4)), np.ones(2), 1.0)
    with pytest.raises(DomainError):
        split_collective_wait([0.0, 1.0], 4.0, -1.0)


# ======================================================================================= fleet-scale facts


def test_trace_volume_and_gray_failure():
    assert trace_volume_bytes(500e6, np.array([8, 1024])).tolist() == [4e9, 512e9]
    assert synchronous_rate_factor([1.0, 0.95, 0.9, 1.0]) == pytest.approx(0.9)
    assert synchronous_rate_factor([3000.0, 2700.0], nominal_throughput=3000.0) == pytest.approx(0.9)
    assert synchronous_rate_factor([1.2, 1.1]) == 1.0  # a fast node cannot speed a synchronous step
    assert straggler_mfu(0.5, [1.0, 0.8]) == pytest.approx(0.4)
    with pytest.raises(DomainError):
        synchronous_rate_factor([1.0, 0.0])
    with pytest.raises(DomainError):
        trace_volume_bytes(-1.0, 8)


def test_dispatch_ratio():
    assert dispatch_to_floor_ratio(12e-3, 6e-3) == 2.0
    with pytest.raises(DomainError):
        dispatch_to_floor_ratio(12e-3, 0.0)



# ============================================================================ roofline from op shapes


def _ops(rows):
    """Ops table from (name, dims, types) rows, ranks 0 and external ids 1.."""
    return pd.DataFrame({"rank": 0, "external_id": np.arange(1, len(rows) + 1),
                         "name": [r[0] for r in rows],
                         "input_dims": [json.dumps(r[1]) for r in rows],
                         "input_types": [json.dumps(r[2]) for r in rows],
                         "start_us": 0.0, "dur_us": 1.0})


# (name, Input Dims, Input type, FLOPs by hand, bytes by hand)
HAND = [
    # A[8,16] @ B[16,32]: 2*8*16*32 = 8192; (128 + 512 + 256 out) * 2 bytes (half)
    ("aten::mm", [[8, 16], [16, 32]], ["c10::Half", "c10::Half"], 8192.0, (128 + 512 + 256) * 2.0),
    # bias[32] + A[8,16] @ B[16,32]: 8192 + 8*32 = 8448; (32 + 128 + 512 + 256) * 4
    ("aten::addmm", [[32], [8, 16], [16, 32], [], []], ["float", "float", "float", "Scalar", "Scalar"],
     8448.0, (32 + 128 + 512 + 256) * 4.0),
    # A[4,8,16] @ B[4,16,2]: 2*4*8*16*2 = 2048; (512 + 128 + 64) * 2 (bf16)
    ("aten::bmm", [[4, 8, 16], [4, 16, 2]], ["BFloat16", "BFloat16"], 2048.0, (512 + 128 + 64) * 2.0),
    # C[4,8,2] + A[4,8,16] @ B[4,16,2]: 2048 + 64 = 2112; (64 + 512 + 128 + 64) * 4
    ("aten::baddbmm", [[4, 8, 2], [4, 8, 16], [4, 16, 2], [], []],
     ["float", "float", "float", "Scalar", "Scalar"], 2112.0, (64 + 512 + 128 + 64) * 4.0),
    # matmul broadcast: A[3,1,5,6] @ B[7,6,2] -> out [3,7,5,2]: 2*21*5*6*2 = 2520; (90 + 84 + 210) * 4
    ("aten::matmul", [[3, 1, 5, 6], [7, 6, 2]], ["float", "float"], 2520.0, (90 + 84 + 210) * 4.0),
    # matmul vector @ matrix: v[6] @ B[6,2] -> [2]: 2*6*2 = 24; (6 + 12 + 2) * 4
    ("aten::matmul", [[6], [6, 2]], ["float", "float"], 24.0, (6 + 12 + 2) * 4.0),
    # linear x[2,3,10] W[4,10] b[4]: rows 6: 2*6*10*4 + 6*4 = 504; (60 + 40 + 4 + 24) * 4
    ("aten::linear", [[2, 3, 10], [4, 10], [4]], ["float", "float", "float"], 504.0,
     (60 + 40 + 4 + 24) * 4.0),
    # linear without bias: 2*6*10*4 = 480; (60 + 40 + 24) * 4
    ("aten::linear", [[2, 3, 10], [4, 10], []], ["float", "float", ""], 480.0, (60 + 40 + 24) * 4.0),
]


@pytest.mark.parametrize(("name", "dims", "types", "flops", "nbytes"), HAND,
                         ids=[f"{h[0]}-{i}" for i, h in enumerate(HAND)])
def test_op_flops_and_bytes_by_hand(name, dims, types, flops, nbytes):
    out = op_flops_bytes(_ops([(name, dims, types)])).iloc[0]
    assert out["flops"] == flops
    assert out["bytes_moved"] == nbytes
    assert out["flops_rule"] == OP_FLOP_RULES[name]


def test_unknown_ops_are_nan_and_counted_never_guessed():
    rows = [("aten::relu", [[8, 16]], ["float"]),
            ("aten::convolution", [[1, 3, 8, 8], [4, 3, 3, 3], [4]], ["float", "float", "float"]),
            ("aten::mm", [[8, 16], [15, 32]], ["float", "float"]),       # inner dims differ
            ("aten::mm", [[8, 16], [16, 32]], ["complex32", "float"]),   # unknown dtype
            ("aten::mm", [[8, 16], [16, 32]], ["float", "float"])]
    ops = _ops(rows)
    ops.loc[5, ["input_dims", "input_types"]] = [None, None]  # row without recorded shapes
    ops.loc[5, "name"] = "aten::addmm"
    out = op_flops_bytes(ops)
    assert out["flops_rule"].tolist()[:4] == [NO_RULE, NO_RULE, BAD_SHAPES, UNKNOWN_DTYPE]
    assert out["flops_rule"].iloc[5] == BAD_SHAPES
    assert out["flops"].isna().tolist() == [True, True, True, True, False, True]
    assert out.attrs["unknown_ops"] == {NO_RULE: 2, BAD_SHAPES: 2, UNKNOWN_DTYPE: 1}
    with pytest.raises(DomainError, match="input_dims"):
        op_flops_bytes(ops.drop(columns="input_dims"))


def _kernels():
    # op 1 (mm, 8192 FLOPs) launched two kernels of 3 and 1 us; op 2 (relu) one; one kernel without op
    return pd.DataFrame({"rank": 0, "external_id": pd.array([1, 1, 2, pd.NA], dtype="Int64"),
                         "start_us": [0.0, 3.0, 5.0, 7.0], "end_us": [3.0, 4.0, 6.0, 9.0],
                         "name": ["gemm_kernel", "splitk_reduce", "relu_kernel", "elementwise"],
                         "kind": "compute", "step": 1})


def test_kernel_roofline_splits_an_op_by_duration_or_to_its_longest_kernel():
    ops = op_flops_bytes(_ops([HAND[0][:3], ("aten::relu", [[8, 16]], ["float"])]))
    table = kernel_roofline(_kernels(), ops)
    np.testing.assert_allclose(table["flops"].to_numpy(), [6144.0, 2048.0, np.nan, np.nan])
    np.testing.assert_allclose(table["bytes_moved"].to_numpy()[:2], [1344.0, 448.0])
    # both kernels of the op run at the op's average rate: 8192 FLOP over 4 us
    np.testing.assert_allclose(table["achieved_flops_per_s"].to_numpy()[:2], [8192 / 4e-6] * 2)
    np.testing.assert_allclose(table["intensity_flop_per_byte"].to_numpy()[:2], [8192 / 1792] * 2)
    assert table.attrs["kernels_with_flops"] == 2 and table.attrs["kernels_without_op"] == 1
    assert table.attrs["kernels_with_unknown_op"] == 1
    longest = kernel_roofline(_kernels(), ops, split="longest")
    np.testing.assert_allclose(longest["flops"].to_numpy()[:2], [8192.0, 0.0])
    with pytest.raises(DomainError, match="split"):
        kernel_roofline(_kernels(), ops, split="evenly")
    with pytest.raises(DomainError, match="op_flops_bytes"):
        kernel_roofline(_kernels(), _ops([HAND[0][:3]]))
    dup = pd.concat([ops, ops.iloc[[0]]], ignore_index=True)
    with pytest.raises(DomainError, match="repeats"):
        kernel_roofline(_kernels(), dup)


#: A round-number device: ridge at 100 FLOP/byte.
TOY = PeakRate("toy", 100.0, 1.0, "FP32", "made-up ceilings for a test")


def test_placement_puts_constructed_kernels_in_each_of_the_three_regimes():
    # rates chosen against the toy ceilings: 100 TFLOP/s and 1 TB/s
    table = pd.DataFrame({
        "achieved_flops_per_s": [9e11, 9.5e13, 1e11, 5e12],
        "achieved_bytes_per_s": [9e11, 1e11, 1e10, np.nan],   # the last kernel has no known bytes
        "dtype": ["float", "float", "c10::Half", None]})
    placed = roofline_placement(table, TOY)
    assert placed["ridge_flop_per_byte"].iloc[0] == pytest.approx(100.0)
    # intensity 1 < ridge, at 90 % of the slope's 1e12 ceiling -> near the bandwidth ceiling
    # intensity 950 > ridge, at 95 % of peak -> near the compute ceiling
    # intensity 10 < ridge, at 1 % of its 1e13 ceiling -> below both
    assert placed["regime"].tolist()[:3] == ["near bandwidth ceiling", "near compute ceiling",
                                             "below both ceilings"]
    assert pd.isna(placed["regime"].iloc[3]) and np.isnan(placed["fraction_of_attainable"].iloc[3])
    assert placed["side"].tolist()[:3] == ["memory-bound", "compute-bound", "memory-bound"]
    np.testing.assert_allclose(placed["fraction_of_attainable"].to_numpy()[:3], [0.9, 0.95, 0.01])
    assert placed["precision_matches"].tolist()[:3] == [True, True, False]
    assert placed.attrs["peak_source"] == TOY.source
    with pytest.raises(DomainError, match="PeakRate"):
        roofline_placement(table, 1e14)
    too_fast = table.assign(achieved_flops_per_s=[2e14, 1.0, 1.0, 1.0])
    with pytest.raises(DomainError):
        roofline_placement(too_fast, TOY)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 64), k=st.integers(1, 64), n=st.integers(1, 64), b=st.integers(1, 8))
def test_bmm_equals_b_times_mm_and_matmul_agrees(m, k, n, b):
    rows = [("aten::mm", [[m, k], [k, n]], ["float", "float"]),
            ("aten::bmm", [[b, m, k], [b, k, n]], ["float", "float"]),
            ("aten::matmul", [[b, m, k], [b, k, n]], ["float", "float"])]
    f = op_flops_bytes(_ops(rows))["flops"].to_numpy()
    assert f[1] == b * f[0] == f[2] == 2 * b * m * k * n


def test_gemm_time_split_by_op_and_by_name():
    kernels = _kernels()
    steps = pd.DataFrame({"rank": [0], "step": [1], "start_us": [0.0], "end_us": [10.0]})
    ops = _ops([HAND[0][:3], ("aten::relu", [[8, 16]], ["float"])])
    by_op = gemm_time_split(kernels, steps, ops=ops).iloc[0]
    # op 1's two kernels (3 + 1 us) are GEMM time; relu (1 us) and the unclaimed kernel (2 us) are not
    assert (by_op["gemm_us"], by_op["non_gemm_us"]) == (4.0, 3.0)
    assert by_op["non_gemm_share"] == pytest.approx(3.0 / 7.0)
    assert by_op["non_gemm_share_of_step"] == pytest.approx(0.3)
    by_name = gemm_time_split(kernels, steps).iloc[0]   # only "gemm_kernel" matches the name pattern
    assert (by_name["gemm_us"], by_name["non_gemm_us"]) == (3.0, 4.0)
    with pytest.raises(DomainError, match="regular expression"):
        gemm_time_split(kernels, steps, pattern="(")


# ------------------------------------------------------------------------------- on the DLRM trace

DLRM = Path(__file__).resolve().parents[2] / "data" / "traces" / "dlrm_8rank"


def _first_addmm(path: Path) -> dict:
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    return next(e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm")


def test_dlrm_addmm_flops_from_its_recorded_shapes():
    from fleetlib.program.readers.kineto import read_trace

    path = sorted(DLRM.glob("worker0_*.json.gz"))[0]
    tr = read_trace(path, cache=False)
    if not hasattr(tr, "ops"):
        pytest.skip("the trace reader does not return host ops yet")
    raw = _first_addmm(path)
    bias, a, b = raw["args"]["Input Dims"][:3]           # [[256], [16, 13], [13, 256]] in this trace
    hand = 2 * a[0] * a[1] * b[1] + a[0] * b[1]
    ops = op_flops_bytes(tr.ops)
    row = ops[ops["external_id"] == raw["args"]["External id"]].iloc[0]
    assert row["name"] == "aten::addmm" and row["flops"] == hand
    assert row["bytes_moved"] == 4 * (bias[0] + a[0] * a[1] + b[0] * b[1] + a[0] * b[1])
    table = kernel_roofline(tr.kernels, ops)
    assert table.attrs["kernels_with_flops"] > 0
    placed = roofline_placement(table, PEAK_RATES["V100 SXM"])
    known = placed.dropna(subset=["regime"])
    assert len(known) == table.attrs["kernels_with_flops"] - int((table["achieved_flops_per_s"] == 0).sum())
    assert set(known["regime"]) <= {"below both ceilings", "near bandwidth ceiling", "near compute ceiling"}
