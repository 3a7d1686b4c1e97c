"""MFU you can trust (issue 13 item 6, issue 14) and per-step validity (item 7).

Peaks carry their precision, MFU/MBU above one is an InputError naming the convention, the
convention says where seq_len and the step time come from, unknown devices are errors, and a model
configuration that does not fit the traces is refused or flagged.  Numbers are computed by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.accounting import Window
from fleetlib.cli import main as cli_main
from fleetlib.program.breakdown import program_goodput_factor, step_partition, steps_without_device_activity
from fleetlib.program.flops import (
    ProgramGoodputConvention,
    UtilizationAboveOneError,
    mbu,
    mbu_convention,
    mfu,
    mfu_convention,
)
from fleetlib.program.measure import measure
from fleetlib.program.model_config import check_model_fits, load_model_config
from fleetlib.program.peaks import PEAK_RATES_BY_PRECISION, peak_rate
from fleetlib.program.readers.kineto import read_traces
from fleetlib.quality import DomainError, InputError

ROOT = Path(__file__).resolve().parents[2]
DLRM = ROOT / "data/traces/dlrm_8rank"


def test_named_peaks_carry_their_precision():
    assert peak_rate("H100 SXM").named == "H100 SXM dense BF16"
    fp8 = peak_rate("H100 SXM dense FP8")
    assert fp8.dense_tflops == 1979.0 and fp8.precision == "FP8" and fp8.hbm_tb_per_s == 3.35
    assert peak_rate("h100 sxm", "fp8") is fp8 and peak_rate("H100 SXM FP8") is fp8
    assert peak_rate("MI300X", "FP8").dense_tflops == 2614.9
    assert peak_rate("V100 SXM").arithmetic_label == "V100 SXM dense FP16 125 TFLOP/s"
    assert all(p.precision == prec for (_, prec), p in PEAK_RATES_BY_PRECISION.items())


def test_unknown_device_or_precision_is_an_error_never_a_fallback():
    with pytest.raises(DomainError, match="no peak rate for accelerator 'B9000'"):
        peak_rate("B9000")
    with pytest.raises(DomainError, match="no FP8 peak for A100 SXM"):
        peak_rate("A100 SXM", "FP8")
    with pytest.raises(DomainError, match="no FP8 peak for V100 SXM"):
        peak_rate("V100 SXM dense FP8")


def test_fp8_work_against_a_bf16_peak_is_refused_naming_the_convention():
    # 8 devices, 1 s steps, 1.2 x the BF16 peak of work: plausible only against the FP8 peak
    flops = 1.2 * 8 * 989e12
    bf16 = mfu_convention("6n", peak_rate("H100 SXM"))
    with pytest.raises(UtilizationAboveOneError) as info:
        mfu(flops, 8, 989e12, 1.0, convention=bf16)
    err = info.value
    assert isinstance(err, InputError) and isinstance(err, DomainError)
    assert "MFU = 1.2 exceeds 1" in str(err) and "MFU, 6N, H100 SXM dense BF16 989 TFLOP/s" in str(err)
    fp8 = mfu_convention("6n", peak_rate("H100 SXM", "FP8"))
    assert mfu(flops, 8, 1979e12, 1.0, convention=fp8) == pytest.approx(1.2 * 989 / 1979, rel=1e-12)
    with pytest.raises(DomainError, match="exceeds 1"):  # without a convention it is still refused
        mfu(flops, 8, 989e12, 1.0)


def test_mbu_above_one_names_its_convention():
    conv = mbu_convention(peak_rate("H100 SXM"), include_kv_cache=False)
    with pytest.raises(UtilizationAboveOneError, match="weights-only floor"):
        mbu(0.010, 0.008, convention=conv)
    assert mbu(0.008, 0.010, convention=conv) == pytest.approx(0.8)


def _partition(wall_us: float = 1_000_000.0, ranks: int = 2) -> pd.DataFrame:
    rows = [
        {
            "rank": r,
            "step": 1,
            "compute": wall_us,
            "exposed_comm": 0.0,
            "peer_wait": 0.0,
            "exposed_memcpy": 0.0,
            "host_dispatch": 0.0,
            "idle": 0.0,
            "step_wall_us": wall_us,
        }
        for r in range(ranks)
    ]
    return pd.DataFrame(rows)


def test_factor_above_one_is_an_input_error_naming_the_config():
    peak = peak_rate("H100 SXM")
    kwargs = {"devices": 2, "peak": peak, "convention": "6n", "window": Window.nominal("w")}
    with pytest.raises(UtilizationAboveOneError) as info:
        program_goodput_factor(
            _partition(),
            useful_flops_per_step=3 * 989e12,
            config_file="m.yaml",
            step_time_source="step time from 2 traced rank-step windows (profiler_step)",
            **kwargs,
        )
    assert info.value.file == "m.yaml" and info.value.field == "useful_flops_per_step"
    assert "MFU = 1.5 exceeds 1 under convention 'MFU, 6N, H100 SXM dense BF16 989 TFLOP/s, step time" in str(
        info.value
    )
    f = program_goodput_factor(
        _partition(),
        useful_flops_per_step=989e12,
        step_time_source="step time from 2 traced rank-step windows (profiler_step)",
        **kwargs,
    )
    assert f.value == pytest.approx(0.5, rel=1e-12)
    assert f.convention == (
        "MFU, 6N, H100 SXM dense BF16 989 TFLOP/s, step time from 2 traced rank-step windows (profiler_step)"
    )


def test_convention_provenance_round_trips_and_is_checked():
    conv = mfu_convention("palm", peak_rate("A100 SXM")).with_provenance("seq_len 4096 from training config")
    assert conv.label.endswith(", seq_len 4096 from training config")
    assert ProgramGoodputConvention.parse(conv.label) == conv
    with pytest.raises(DomainError):
        conv.with_provenance("whatever the logs said")
    with pytest.raises(DomainError):
        ProgramGoodputConvention.parse("MFU, a, b, c")


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_model_config_precision_and_seq_len_source(tmp_path):
    cfg = load_model_config(
        _config(
            tmp_path,
            "accelerator: H100 SXM\nprecision: FP8\ndevices: 8\n"
            "n_params: 1e9\ntokens_per_step: 1e6\nconvention: palm\n"
            "n_layers: 2\nn_heads: 4\nhead_dim: 8\nseq_len: 4096\n"
            "seq_len_source: training config\n",
        )
    )
    assert cfg["peak"].dense_tflops == 1979.0
    assert cfg["convention"].label == (
        "MFU, PaLM 6N+12LHQT, H100 SXM dense FP8 1979 TFLOP/s, seq_len 4096 from training config"
    )
    with pytest.raises(InputError) as info:
        load_model_config(
            _config(
                tmp_path,
                "accelerator: A100 SXM\nprecision: FP8\ndevices: 8\n"
                "useful_flops_per_step: 1e12\nconvention: x\n",
            )
        )
    assert info.value.field == "precision" and "no FP8 peak for A100 SXM" in str(info.value)
    with pytest.raises(InputError) as info:
        load_model_config(
            _config(
                tmp_path,
                "accelerator: H100 SXM\ndevices: 8\nn_params: 1e9\n"
                "tokens_per_step: 10\nconvention: 6n\nseq_len_source: 'a, b'\n",
            )
        )
    assert info.value.field == "seq_len_source"


def test_model_that_does_not_fit_the_traces(tmp_path):
    cfg = load_model_config(
        _config(tmp_path, "accelerator: H100 SXM\ndevices: 4\nuseful_flops_per_step: 1e12\nconvention: x\n")
    )
    with pytest.raises(InputError) as info:
        check_model_fits(cfg, 8, [])
    assert info.value.field == "devices" and "fewer than the 8 traced ranks" in str(info.value)
    assert check_model_fits(cfg, 4, ["NVIDIA H100 80GB HBM3"]) == []
    ((code, message),) = check_model_fits(cfg, 4, ["Tesla V100-SXM2-32GB"])
    assert code == "model_device_mismatch" and "'H100 SXM'" in message and "V100" in message
    assert check_model_fits(cfg, 4, ["synthetic GPU"])[0][0] == "model_device_unverified"


def test_measure_flags_a_device_mismatch_and_refuses_too_few_devices(tmp_path):
    traces = read_traces(DLRM, cache=False, progress=False)
    h100 = _config(
        tmp_path, "accelerator: H100 SXM\ndevices: 8\nuseful_flops_per_step: 5e11\nconvention: x\n"
    )
    m = measure(traces, model=h100)
    flags = [f for f in m.ledger.flags if f.code == "model_device_mismatch"]
    assert len(flags) == 1 and "Tesla V100-SXM2-32GB" in flags[0].message
    v100 = _config(
        tmp_path, "accelerator: V100 SXM\ndevices: 4\nuseful_flops_per_step: 5e11\nconvention: x\n"
    )
    with pytest.raises(InputError, match="fewer than the 8 traced ranks"):
        measure(traces, model=v100)


def _trace_with_an_empty_step(path: Path) -> Path:
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{s}",
            "pid": 1,
            "tid": 1,
            "ts": 1000 * s,
            "dur": 900,
        }
        for s in range(3)
    ]
    for corr, s in enumerate((0, 2), start=1):  # step 1 has no device activity
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": 1000 * s + 5,
                "dur": 2,
                "args": {"correlation": corr},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm",
                "pid": 0,
                "tid": 7,
                "ts": 1000 * s + 10,
                "dur": 500,
                "args": {"device": 0, "stream": 7, "correlation": corr},
            }
        )
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 1_700_000_000_000_000_000}))
    return path


def test_a_step_without_device_activity_is_flagged_per_step(tmp_path):
    path = _trace_with_an_empty_step(tmp_path / "rank-0.json")
    traces = read_traces([path], cache=False, progress=False)
    part = step_partition(traces.kernels, traces.steps)
    quiet = steps_without_device_activity(part)
    assert quiet[["rank", "step", "step_wall_us"]].to_numpy().tolist() == [[0, 1, 900.0]]
    m = measure(traces)
    flags = [f for f in m.ledger.flags if f.code == "step_without_device_activity"]
    assert len(flags) == 1 and flags[0].rank == 0 and "rank 0 step 1" in flags[0].message
    measure(traces)  # measuring again does not add the flag twice
    assert sum(f.code == "step_without_device_activity" for f in traces.ledger.flags) == 1


def test_cli_mfu_above_one_is_one_line_naming_the_convention(tmp_path, capsys):
    path = _trace_with_an_empty_step(tmp_path / "rank-0.json")
    cfg = _config(
        tmp_path, "accelerator: H100 SXM\ndevices: 1\nuseful_flops_per_step: 1e18\nconvention: 6n\n"
    )
    rc = cli_main(["program", str(path), "--no-cache", "--model", str(cfg)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert (
        f"file {cfg}" in err and "exceeds 1 under convention 'MFU, 6N, H100 SXM dense BF16 989 TFLOP/s" in err
    )
