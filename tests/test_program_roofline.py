"""Unit and property tests of fleetlib.program.roofline and fleetlib.program.iron_law."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.program.flops import PEAK_RATES
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
    arithmetic_intensity,
    attainable_flops,
    bandwidth_fraction,
    bandwidth_headroom,
    compute_fraction,
    measured_intensity,
    place_kernels,
    ridge_point,
    roofline_diagnosis,
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
