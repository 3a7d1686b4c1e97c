"""Unit and property tests of fleetlib.program.flops: peaks, FLOP conventions, MFU, MBU and the guards."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fleetlib.program.flops as flops_mod
import fleetlib.program.iron_law as iron_law_mod
import fleetlib.program.roofline as roofline_mod
from fleetlib.accounting import Factor, Window
from fleetlib.program.flops import (
    PEAK_RATES,
    PeakRate,
    ProgramGoodputConvention,
    combine_program_rows,
    decode_floor,
    decode_floor_s,
    equivalent_devices_at_peak,
    fleet_mfu_from_node,
    flop_convention_label,
    hfu,
    mbu,
    mbu_convention,
    mfu,
    mfu_at_floor,
    mfu_convention,
    mfu_from_throughput,
    model_flops_per_token,
    peak_rate,
    peak_work_flops,
    program_goodput_from_mfu,
    program_rows_by_ideal,
    scaling_efficiency,
    scaling_efficiency_from_mfu,
)
from fleetlib.quality import DomainError

H100 = PEAK_RATES["H100 SXM"]
SHAPE = {"n_layers": 80, "n_heads": 64, "head_dim": 128, "seq_len": 4096}


# --------------------------------------------------------------------------------------- peak table


@pytest.mark.parametrize(("name", "tflops", "tb_s"), [
    ("H100 SXM", 989.0, 3.35), ("A100 SXM", 312.0, 2.039), ("V100 SXM", 125.0, 0.9),
    ("H200 SXM", 989.0, 4.8), ("MI300X", 1307.4, 5.3),
])
def test_peak_table_holds_dense_rates_with_sources(name, tflops, tb_s):
    p = PEAK_RATES[name]
    assert (p.dense_tflops, p.hbm_tb_per_s) == (tflops, tb_s)
    assert p.peak_flops_per_s == tflops * 1e12 and p.hbm_bytes_per_s == tb_s * 1e12
    assert len(p.source) > 20 and p.precision in ("BF16", "FP16")


def test_every_peak_has_a_source_and_sparse_figures_are_not_used():
    for p in PEAK_RATES.values():
        assert p.source
        assert "dense" in p.arithmetic_label
    # H100's datasheet 1,979 TFLOP/s is with sparsity; the table holds the dense half.
    assert H100.dense_tflops == pytest.approx(1979 / 2, abs=1)


def test_peak_labels_and_ridge():
    assert H100.arithmetic_label == "H100 SXM dense BF16 989 TFLOP/s"
    assert H100.bandwidth_label == "H100 SXM HBM 3.35 TB/s"
    assert H100.ridge_flop_per_byte == pytest.approx(295.22, abs=0.01)


def test_peak_rate_lookup():
    assert peak_rate("h100 sxm") is H100
    with pytest.raises(DomainError, match="known"):
        peak_rate("H100 PCIe-ish")


@pytest.mark.parametrize("kwargs", [
    {"dense_tflops": -1.0}, {"hbm_tb_per_s": 0.0}, {"accelerator": "H100, SXM"}, {"accelerator": ""},
])
def test_bad_peak_rate_is_refused(kwargs):
    base = {"accelerator": "X", "dense_tflops": 1.0, "hbm_tb_per_s": 1.0, "precision": "BF16", "source": "s"}
    with pytest.raises(DomainError):
        PeakRate(**{**base, **kwargs})


# --------------------------------------------------------------------------------------- FLOP counting


def test_flop_conventions_by_hand():
    n = 70e9
    lhqt = 80 * 64 * 128 * 4096
    assert model_flops_per_token(n, convention="palm", **SHAPE) == 6 * n + 12 * lhqt
    assert model_flops_per_token(n, convention="megatron", **SHAPE) == 6 * n + 6 * lhqt
    assert model_flops_per_token(n, convention="megatron", causal=False, **SHAPE) == 6 * n + 12 * lhqt
    assert model_flops_per_token(n, convention="6n") == 6 * n
    # 6n ignores attention shape arguments, which lets one sweep call all conventions alike.
    assert model_flops_per_token(n, convention="6n", **SHAPE) == 6 * n


def test_palm_and_megatron_differ_by_half_the_attention_term():
    palm = model_flops_per_token(7e9, convention="palm", **SHAPE)
    meg = model_flops_per_token(7e9, convention="megatron", **SHAPE)
    six = model_flops_per_token(7e9, convention="6n")
    assert palm - meg == pytest.approx(meg - six)


def test_flop_counting_is_vectorised():
    n = np.array([1e9, 7e9, 70e9])
    got = model_flops_per_token(n, convention="palm", **SHAPE)
    expected = [model_flops_per_token(x, convention="palm", **SHAPE) for x in n]
    np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"convention": "palm", "causal": True, **SHAPE}, "megatron"),
    ({"convention": "palm", "n_layers": 80}, "needs"),
    ({"convention": "megatron", **{**SHAPE, "n_heads": 2.5}}, "whole number"),
    ({"convention": "megatron", **{**SHAPE, "seq_len": 0}}, "whole number"),
    ({"convention": "chinchilla"}, "convention"),
    ({"convention": "6n", "causal": True}, "causal"),
])
def test_bad_flop_arguments(kwargs, match):
    with pytest.raises(DomainError, match=match):
        model_flops_per_token(1e9, **kwargs)


def test_flop_count_rejects_bad_params():
    for bad in (0, -1e9, float("nan"), "many"):
        with pytest.raises(DomainError):
            model_flops_per_token(bad, convention="6n")


def test_flop_convention_labels():
    assert flop_convention_label("palm") == "PaLM 6N+12LHQT"
    assert flop_convention_label("megatron") == "Megatron causal 6N+6LHQT"
    assert flop_convention_label("megatron", causal=False) == "Megatron full 6N+12LHQT"
    assert flop_convention_label("6n") == "6N"
    with pytest.raises(DomainError):
        flop_convention_label("palm", causal=True)


# --------------------------------------------------------------------------------------- MFU / HFU


def test_mfu_is_equation_3():
    assert peak_work_flops(128, 989e12, 0.245) == pytest.approx(128 * 989e12 * 0.245)
    assert mfu(14.9e15, 128, 989e12, 0.245) == pytest.approx(14.9e15 / (128 * 989e12 * 0.245))


def test_mfu_is_vectorised_over_steps():
    steps = np.array([0.240, 0.245, 0.260, 0.300])
    got = mfu(14.9e15, 128, 989e12, steps)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, [mfu(14.9e15, 128, 989e12, s) for s in steps])


def test_mfu_above_one_is_refused_with_a_hint():
    with pytest.raises(DomainError, match=r"FLOP count.*peak|peak.*FLOP count"):
        mfu(40e15, 128, 989e12, 0.245)
    # The classic cause: a datasheet peak "with sparsity" halved twice.
    with pytest.raises(DomainError, match="sparse"):
        mfu(14.9e15, 128, 989e12 / 4, 0.245)


@pytest.mark.parametrize("args", [
    (1e15, 0, 989e12, 0.2), (1e15, 8.5, 989e12, 0.2), (1e15, 8, 0.0, 0.2), (1e15, 8, 989e12, -0.2),
    (-1.0, 8, 989e12, 0.2), (1e15, 8, 989e12, float("inf")),
])
def test_mfu_bad_arguments(args):
    with pytest.raises(DomainError):
        mfu(*args)


@settings(max_examples=100, deadline=None)
@given(share=st.floats(0.0, 1.0), devices=st.integers(1, 100_000), peak=st.floats(1e12, 5e15),
       step_s=st.floats(1e-3, 100.0))
def test_mfu_lies_in_unit_interval_and_recovers_its_share(share, devices, peak, step_s):
    work = devices * peak * step_s
    m = mfu(share * work, devices, peak, step_s)
    assert 0.0 <= m <= 1.0
    assert m == pytest.approx(share, rel=1e-9, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(share=st.floats(0.01, 1.0), stretch=st.floats(1.0, 10.0))
def test_a_longer_step_lowers_mfu_in_proportion(share, stretch):
    base = mfu(share * 8 * 1e15 * 0.5, 8, 1e15, 0.5)
    assert mfu(share * 8 * 1e15 * 0.5, 8, 1e15, 0.5 * stretch) == pytest.approx(base / stretch)


def test_mfu_from_throughput_agrees_with_step_mfu():
    tokens_per_step, step_s = 4_194_304, 0.245
    per_token = 14.9e15 / tokens_per_step
    assert mfu_from_throughput(tokens_per_step / step_s, per_token, 128, 989e12) == pytest.approx(
        mfu(14.9e15, 128, 989e12, step_s))
    with pytest.raises(DomainError, match="exceeds 1"):
        mfu_from_throughput(1e9, 1e9, 1, 989e12)


def test_hfu_adds_recomputation_and_exceeds_mfu():
    m = mfu(14.9e15, 128, 989e12, 0.245)
    h = hfu(14.9e15, 3e15, 128, 989e12, 0.245)
    assert h > m
    assert h - m == pytest.approx(3e15 / (128 * 989e12 * 0.245))
    with pytest.raises(DomainError):
        hfu(14.9e15, -1.0, 128, 989e12, 0.245)


def test_equivalent_devices_at_peak():
    assert equivalent_devices_at_peak(10_000, -0.02) == pytest.approx(-200.0)
    np.testing.assert_allclose(equivalent_devices_at_peak([1000, 2000], 0.05), [50.0, 100.0])
    with pytest.raises(DomainError, match="percentage point"):
        equivalent_devices_at_peak(10_000, 1.5)  # 1.5 points must be passed as 0.015


# --------------------------------------------------------------------------------------- scaling


def test_scaling_efficiency_and_its_bad_arguments():
    assert scaling_efficiency(0.18, 0.245) == pytest.approx(0.18 / 0.245)
    with pytest.raises(DomainError, match="per-device work"):
        scaling_efficiency(0.30, 0.245)
    with pytest.raises(DomainError):
        scaling_efficiency(0.0, 0.245)
    with pytest.raises(DomainError):
        scaling_efficiency_from_mfu(0.0, 0.4)
    with pytest.raises(DomainError, match="per-device work"):
        scaling_efficiency_from_mfu(0.4, 0.5)


@settings(max_examples=100, deadline=None)
@given(node_mfu=st.floats(0.05, 1.0), eff=st.floats(0.05, 1.0))
def test_fleet_mfu_route_and_ratio_route_agree(node_mfu, eff):
    fleet = fleet_mfu_from_node(node_mfu, eff)
    assert scaling_efficiency_from_mfu(node_mfu, fleet) == pytest.approx(eff)
    assert program_goodput_from_mfu(node_mfu=node_mfu, scaling_eff=eff) == pytest.approx(fleet)


def test_program_goodput_from_mfu_routes():
    assert program_goodput_from_mfu(fleet_mfu=0.48) == 0.48
    assert program_goodput_from_mfu(fleet_mfu=0.48, node_mfu=0.65) == 0.48
    with pytest.raises(DomainError, match="rule 31"):
        program_goodput_from_mfu(fleet_mfu=0.48, scaling_eff=0.74)
    with pytest.raises(DomainError, match="omits the loss to scale"):
        program_goodput_from_mfu(node_mfu=0.65)
    with pytest.raises(DomainError, match="give fleet_mfu"):
        program_goodput_from_mfu()
    with pytest.raises(DomainError, match="same per-device work"):
        program_goodput_from_mfu(fleet_mfu=0.30, node_mfu=0.65, scaling_eff=0.74)
    with pytest.raises(DomainError):
        program_goodput_from_mfu(fleet_mfu=1.2)


# --------------------------------------------------------------------------------------- MBU


def test_decode_floor_by_hand_and_conventions():
    f = decode_floor(70e9, 2, 8, 3.35e12)
    assert f.floor_s == pytest.approx(70e9 * 2 / 8 / 3.35e12)
    assert f.convention == "weights-only" and f.bytes_per_device == pytest.approx(17.5e9)
    kv = decode_floor(70e9, 2, 8, 3.35e12, kv_cache_bytes=8e9)
    assert kv.convention == "weights+kv"
    assert kv.floor_s - f.floor_s == pytest.approx(8e9 / 8 / 3.35e12)
    assert f.mbu(2 * f.floor_s) == pytest.approx(0.5)


@settings(max_examples=100, deadline=None)
@given(devices=st.integers(1, 64), params=st.floats(1e8, 1e12), kv=st.floats(0.0, 1e11))
def test_decode_floor_scales_as_one_over_devices(devices, params, kv):
    one = decode_floor_s(params, 2, 1, 3.35e12, kv)
    assert decode_floor_s(params, 2, devices, 3.35e12, kv) == pytest.approx(one / devices)


@pytest.mark.parametrize("args", [
    (70e9, 0, 8, 3.35e12), (70e9, 2, 0, 3.35e12), (70e9, 2, 8, -1.0), (70e9, 2, 8, 3.35e12, -1.0),
    (70e9, 2, 2.5, 3.35e12),
])
def test_decode_floor_bad_arguments(args):
    with pytest.raises(DomainError):
        decode_floor_s(*args)


def test_mbu_is_floor_over_measured_and_refuses_a_step_faster_than_its_floor():
    assert mbu(5.2e-3, 6.05e-3) == pytest.approx(5.2 / 6.05)
    np.testing.assert_allclose(mbu(5.2e-3, np.array([5.2e-3, 10.4e-3])), [1.0, 0.5])
    with pytest.raises(DomainError, match="faster than its bandwidth floor"):
        mbu(5.2e-3, 4.0e-3)


def test_mfu_at_floor_refuses_a_compute_bound_batch():
    floor = decode_floor_s(70e9, 2, 8, 3.35e12)
    assert mfu_at_floor(70e9, 8, floor, 989e12, tokens_per_step=64) == pytest.approx(
        64 * mfu_at_floor(70e9, 8, floor, 989e12))
    with pytest.raises(DomainError, match="compute-bound"):
        mfu_at_floor(70e9, 8, floor, 989e12, tokens_per_step=1024)


# --------------------------------------------------------------------------------------- conventions


def test_convention_labels_name_both_choices():
    assert str(mfu_convention("palm", H100)) == "MFU, PaLM 6N+12LHQT, H100 SXM dense BF16 989 TFLOP/s"
    assert str(mfu_convention("megatron", "TPU v5p dense BF16 459 TFLOP/s (unverified)")) == (
        "MFU, Megatron causal 6N+6LHQT, TPU v5p dense BF16 459 TFLOP/s (unverified)")
    weights_only = mbu_convention(H100, include_kv_cache=False)
    assert str(weights_only) == "MBU, weights-only floor, H100 SXM HBM 3.35 TB/s"
    assert mbu_convention(H100, include_kv_cache=True).counting == "weights+KV floor"


def test_convention_parse_round_trip_and_bad_labels():
    conv = mfu_convention("palm", PEAK_RATES["A100 SXM"])
    assert ProgramGoodputConvention.parse(str(conv)) == conv
    assert ProgramGoodputConvention.parse(conv) is conv
    for bad in ("MFU, PaLM", "HFU, PaLM 6N+12LHQT, H100", "MFU, , H100", "MFU, a, b, c"):
        with pytest.raises(DomainError):
            ProgramGoodputConvention.parse(bad)
    with pytest.raises(DomainError):
        mfu_convention("palm", "H100, SXM")


def test_convention_travels_on_a_factor():
    conv = mfu_convention("palm", H100)
    f = Factor.from_value("program", 0.48, Window.nominal("w"), convention=str(conv))
    assert ProgramGoodputConvention.parse(f.convention).ideal == "MFU"


def test_combine_program_rows_is_time_weighted():
    conv = mfu_convention("palm", H100)
    got = combine_program_rows([0.48, 0.30], [3.0, 1.0], conv)
    assert got.value == pytest.approx((0.48 * 3 + 0.30 * 1) / 4)  # total ideal time / total time
    assert (got.ideal, got.rows, got.retained_s) == ("MFU", 2, 4.0)
    assert got.convention == str(conv)


def test_combine_program_rows_allows_mixed_peaks_but_not_mixed_counting():
    a100 = mfu_convention("palm", PEAK_RATES["A100 SXM"])
    h100 = mfu_convention("palm", H100)
    got = combine_program_rows([0.5, 0.4], [1.0, 1.0], [a100, str(h100)])
    assert got.references == (a100.reference, h100.reference)
    assert "each row against its own" in got.convention
    with pytest.raises(DomainError, match="different conventions"):
        combine_program_rows([0.5, 0.4], [1.0, 1.0], [h100, mfu_convention("megatron", H100)])


def test_combine_program_rows_refuses_mfu_with_mbu():
    with pytest.raises(DomainError, match="MFU-based and MBU-based"):
        combine_program_rows([0.48, 0.86], [1.0, 1.0],
                             [mfu_convention("palm", H100), mbu_convention(H100, include_kv_cache=False)])


@pytest.mark.parametrize(("values", "times", "match"), [
    ([0.5, 1.2], [1.0, 1.0], "fraction"), ([0.5], [0.0], "> 0"), ([0.5, 0.4], [1.0], "equal length"),
])
def test_combine_program_rows_bad_arguments(values, times, match):
    with pytest.raises(DomainError, match=match):
        combine_program_rows(values, times, mfu_convention("palm", H100))


def test_combine_program_rows_needs_one_convention_per_row():
    with pytest.raises(DomainError, match="conventions"):
        combine_program_rows([0.5, 0.4], [1.0, 1.0], [mfu_convention("palm", H100)])


def test_program_rows_by_ideal_keeps_classes_apart():
    mfu_c, mbu_c = str(mfu_convention("palm", H100)), str(mbu_convention(H100, include_kv_cache=False))
    frame = pd.DataFrame({
        "program_goodput": [0.48, 0.40, 0.86, 0.70],
        "retained_s": [100.0, 50.0, 10.0, 30.0],
        "convention": [mfu_c, mfu_c, mbu_c, mbu_c],
    })
    out = program_rows_by_ideal(frame).set_index("ideal")
    assert list(out.index) == ["MBU", "MFU"]
    assert out.loc["MFU", "program_goodput"] == pytest.approx((48 + 20) / 150)
    assert out.loc["MBU", "program_goodput"] == pytest.approx((8.6 + 21) / 40)
    assert out.loc["MFU", "rows"] == 2
    with pytest.raises(DomainError, match="missing"):
        program_rows_by_ideal(frame.drop(columns="convention"))


# --------------------------------------------------------------------------------------- docstrings


@pytest.mark.parametrize("module", [flops_mod, roofline_mod, iron_law_mod])
def test_docstring_examples_hold(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
