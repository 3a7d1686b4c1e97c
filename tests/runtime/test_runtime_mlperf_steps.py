"""MLPerf step series (issue 13, item 1): the steps inside the training blocks, from ``tracked_stats``.

The bundled log is a real MLPerf Training v5.1 result (NVIDIA, Llama-2-70B LoRA on 8 GPUs).  Every
expected number below is computed here from the raw ``:::MLLOG`` lines with ``json`` alone, not with
fleetlib's parser.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from fleetlib.cli import main
from fleetlib.runtime.commands import mlperf_step_statistics
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.readers import READERS, read_mlperf
from fleetlib.runtime.readers.mlperf import STEP_DIALECTS, read_mlperf_series

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "data/timelines/mlperf_v5.1_nvidia_theia_ngpu8_llama2_70b_lora/result_0.txt"
ASUS = ROOT / "data/timelines/asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt"
BAD = ROOT / "tests/corpus/runtime/mlperf_steps/bad_step_timing.txt"


def _records(path: Path) -> list[tuple[int, dict]]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if ":::MLLOG" in line:
            out.append((n, json.loads(line.split(":::MLLOG", 1)[1])))
    return out


def _raw_blocks(path: Path) -> tuple[list[float], list[float], float]:
    """Block lengths (s), the block-mean step times the log states, and the global batch."""
    recs = [r for _, r in _records(path)]
    starts = [r["time_ms"] for r in recs if r["key"] == "block_start"]
    stops = [r["time_ms"] for r in recs if r["key"] == "block_stop"]
    lengths = [(b - a) / 1000.0 for a, b in zip(starts, stops, strict=True)]
    logged = [r for r in recs if r["key"] == "tracked_stats" and "train_step_time" in r["value"]]
    gbs = next(r["value"] for r in recs if r["key"] == "global_batch_size")
    counts = [r["metadata"]["samples_count"] / gbs for r in logged]
    return lengths, [r["value"]["train_step_time"] for r in logged], counts


def _cli_json(*args: str) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main([*map(str, args), "--json"])
    assert code == 0
    return json.loads(buf.getvalue())


def test_the_bundled_log_is_registered_and_byte_counted():
    samples = {s.paths[0]: s for s in READERS["mlperf"].samples}
    rel = str(LOG.relative_to(ROOT))
    assert samples[rel].records == len(_records(LOG)) == 99
    assert (LOG.parent / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert "4da2d1cd71eb30c855dad12712480ae5ac90dd89" in (LOG.parent / "SOURCE.md").read_text()


def test_steps_tile_the_blocks_with_the_logged_counts():
    lengths, _, counts = _raw_blocks(LOG)
    assert counts == [192, 48, 48, 48, 48]
    tables, ledger, series = read_mlperf_series(LOG)
    steps = tables.steps
    assert series.dialect == "block_step_time" and series.steps == len(steps) == 384
    assert steps["step"].tolist() == list(range(384))
    dur = (steps["end"] - steps["start"]).dt.total_seconds().to_numpy()
    assert dur.sum() == pytest.approx(sum(lengths), abs=1e-6)  # productive time is the blocks', as before
    first = np.cumsum([0, *counts[:-1]]).astype(int)
    for b, (k, n) in enumerate(zip(first, counts, strict=True)):
        assert dur[k:k + int(n)] == pytest.approx(np.full(int(n), lengths[b] / n), abs=2e-9)
    assert (steps["samples"] == 8).all()
    assert ledger.balanced() and ledger.read == 99 and ledger.rejected == 0
    flags = [f for f in ledger.flags if f.code == "mlperf_step_dialect"]
    assert len(flags) == 1 and "'block_step_time'" in flags[0].message and "384 step(s)" in flags[0].message


def test_fault_free_step_time_and_slow_step_loss_against_the_raw_lines():
    lengths, logged, counts = _raw_blocks(LOG)
    per_step = np.repeat(np.array(lengths) / counts, np.array(counts, dtype=int))
    # the fifth block (48 steps, from step 336) runs 50 % slower than the four before it: a level
    # shift, so the healthy regime is steps 1..335 (the first step after the start is left out)
    assert per_step[-48] / per_step[-49] > 1.4 and np.ptp(per_step[:-48]) / per_step[0] < 0.01
    ff = float(np.median(per_step[1:-48]))
    slow = float((per_step[1:] - ff).sum())  # no warm-up here: the first step is within tolerance
    res = mlperf_step_statistics(LOG)
    assert res["fault_free_step_s"] == pytest.approx(ff, abs=1e-9)
    [shift] = res["change_points"]["result_0"]
    assert shift["step"] == 336 and shift["before_s"] == pytest.approx(ff)
    assert shift["after_s"] == pytest.approx(per_step[-1])
    assert abs(res["fault_free_step_s"] / np.median(logged) - 1.0) < 0.01  # acceptance: within 1 %
    assert res["slow_step_s"] == pytest.approx(slow + (per_step[0] - ff), abs=1e-6)
    assert res["slow_step_s"] > 17.0  # the fifth block: 48 steps at 1.12 s against 0.746 s
    assert res["stall_s"] == 0.0
    assert res["logged_step_s"] == {"median": pytest.approx(float(np.median(logged))), "count": 5}
    assert res["step_time_s"]["max"] == pytest.approx(lengths[4] / 48, abs=1e-9)


def test_the_cli_prints_the_step_series():
    res = _cli_json("runtime", LOG, "--format", "mlperf")
    assert res["step_dialect"] == "block_step_time" and res["steps"] == 384
    lengths, _, _ = _raw_blocks(LOG)
    assert res["productive_s"] == pytest.approx(sum(lengths), abs=1e-6)
    assert res["slow_step_s"] == pytest.approx(mlperf_step_statistics(LOG)["slow_step_s"])
    assert any(f["code"] == "mlperf_step_dialect" for f in res["ledger"]["flags"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["runtime", str(LOG), "--format", "mlperf"]) == 0
    text = buf.getvalue()
    assert "step series              384 steps (dialect block_step_time)" in text
    assert "fault-free step time     0.742885 s" in text
    assert "  'result_0': step 336 (attempt 0, " in text and "0.742885 s -> 1.11854 s (+50.6%)" in text


def test_the_timeline_measurement_takes_the_steps():
    tables, _ = read_mlperf(LOG)
    m = runtime_goodput(tables.steps, tables.events, definition="retrospective")
    assert m.retained_steps == 384
    assert m.slow_step_s == pytest.approx(mlperf_step_statistics(LOG)["slow_step_s"])


def test_per_block_throughput_dialect():
    _, _, series = read_mlperf_series(ASUS)
    assert series.dialect == "block_throughput" and series.steps == 384
    recs = [r for _, r in _records(ASUS)]
    thr = [r["value"]["throughput"] for r in recs if r["key"] == "tracked_stats"]
    assert series.logged_step_s == pytest.approx(8.0 / np.array(thr))


def test_a_log_without_step_timing_keeps_its_blocks(tmp_path):
    path = tmp_path / "no_timing.txt"
    path.write_text("".join(line for line in LOG.read_text().splitlines(keepends=True)
                            if '"tracked_stats"' not in line))
    tables, ledger, series = read_mlperf_series(path)
    assert series.dialect == "blocks" and len(tables.steps) == 5
    res = _cli_json("runtime", path, "--format", "mlperf")
    assert res["fault_free_step_s"] is None and res["step_dialect"] == "blocks"
    assert "'blocks'" in next(f.message for f in ledger.flags if f.code == "mlperf_step_dialect")


def _per_step_log(path: Path, *, in_samples: bool, step_s: list[float], gbs: int = 64,
                  tail_ms: int = 0) -> None:
    """A small log in the per-step dialect: one train_step_time point at the end of every step."""
    t = 1_700_000_000_000
    lines = [{"time_ms": t, "event_type": "INTERVAL_START", "key": "init_start", "value": None},
             {"time_ms": t, "event_type": "POINT_IN_TIME", "key": "global_batch_size", "value": gbs},
             {"time_ms": t + 5000, "event_type": "INTERVAL_END", "key": "init_stop", "value": None},
             {"time_ms": t + 5000, "event_type": "INTERVAL_START", "key": "run_start", "value": None},
             {"time_ms": t + 5000, "event_type": "INTERVAL_START", "key": "block_start", "value": None,
              "metadata": {"samples_count": 0, "step": 0}}]
    now = t + 5000
    for i, d in enumerate(step_s, start=1):
        now += round(d * 1000)
        lines.append({"time_ms": now, "event_type": "POINT_IN_TIME", "key": "tracked_stats",
                      "value": {"train_step_time": d},
                      "metadata": {"step": float(i * gbs if in_samples else i)}})
    now += tail_ms
    lines += [{"time_ms": now, "event_type": "INTERVAL_END", "key": "block_stop", "value": None},
              {"time_ms": now + 10, "event_type": "INTERVAL_END", "key": "run_stop", "value": None,
               "metadata": {"status": "success"}}]
    path.write_text("".join(f":::MLLOG {json.dumps({'namespace': '', **r})}\n" for r in lines))


@pytest.mark.parametrize("in_samples", [False, True])
def test_per_step_series_in_steps_or_in_samples(tmp_path, in_samples):
    step_s = [2.0, 0.5, 0.5, 0.5, 0.8, 0.5, 0.5, 1.1, 0.5, 0.5]
    path = tmp_path / "per_step.txt"
    _per_step_log(path, in_samples=in_samples, step_s=step_s)
    tables, ledger, series = read_mlperf_series(path)
    assert series.dialect == "step_series" and len(tables.steps) == len(step_s)
    dur = (tables.steps["end"] - tables.steps["start"]).dt.total_seconds().to_numpy()
    assert dur == pytest.approx(step_s, abs=1e-9)
    codes = {f.code for f in ledger.flags}
    assert ("step_index_in_samples" in codes) is in_samples
    res = mlperf_step_statistics(path)
    assert res["fault_free_step_s"] == pytest.approx(0.5)
    # the first step is warm-up (startup), the others above 0.5 s are slow steps: 0.3 + 0.6 s
    assert res["slow_step_s"] == pytest.approx(0.9, abs=1e-9)


@pytest.mark.parametrize(("tail_ms", "tail_steps"), [(100, 0), (1500, 3)])
def test_the_steps_tile_the_block_after_the_last_point(tmp_path, tail_ms, tail_steps):
    # after the last timing point: 0.1 s (less than half a step: added to the last step) or 1.5 s
    # (three steps of the last logged step time, 0.5 s)
    step_s = [0.5] * 6
    path = tmp_path / "tail.txt"
    _per_step_log(path, in_samples=False, step_s=step_s, tail_ms=tail_ms)
    tables, _, _ = read_mlperf_series(path)
    dur = (tables.steps["end"] - tables.steps["start"]).dt.total_seconds().to_numpy()
    assert len(dur) == 6 + tail_steps
    assert dur.sum() == pytest.approx(3.0 + tail_ms / 1000.0, abs=1e-9)
    assert tables.steps["step"].tolist() == list(range(6 + tail_steps))


def test_bad_step_timing_is_rejected_with_its_row():
    _, ledger, series = read_mlperf_series(BAD)
    rejected = {e.row: e for e in ledger.entries if e.action == "rejected"}
    assert set(rejected) == {58, 69}
    assert rejected[58].field == "value" and "got 'fast'" in rejected[58].reason
    assert "must be a positive number" in rejected[69].reason
    inferred = [f for f in ledger.flags if f.code == "step_count_inferred"]
    assert len(inferred) == 2 and all("has no usable step timing point" in f.message for f in inferred)
    assert series.steps == 384  # the two blocks are counted in the median logged step time: 48 each
    assert set(STEP_DIALECTS) == {"step_series", "block_step_time", "block_throughput", "blocks"}
