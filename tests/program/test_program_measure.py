"""Tests for fleetlib.program.measure: one result (partition, ledger, window, factor) from step traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fleetlib.program
from fleetlib.accounting import Factor, Window
from fleetlib.program.breakdown import program_goodput_factor
from fleetlib.program.collectives import program_summary
from fleetlib.program.measure import NO_CLOCK_LABEL, ProgramMeasurement, measure, traced_window
from fleetlib.program.model_config import load_model_config
from fleetlib.program.readers.kineto import read_traces
from fleetlib.program.schema import PARTITION_PARTS
from fleetlib.quality import DomainError

ROOT = Path(__file__).resolve().parents[2]
DLRM = ROOT / "data" / "traces" / "dlrm_8rank"
MODEL = ROOT / "data" / "traces" / "models" / "dlrm_example.yaml"
NCCL = ROOT / "data" / "traces" / "hta_nccl_allreduce_rank-0.json.gz"


@pytest.fixture(scope="module")
def dlrm_traces():
    return read_traces(DLRM, cache=False, progress=False)


@pytest.fixture(scope="module")
def dlrm(dlrm_traces):
    return measure(dlrm_traces, model=MODEL)


def _profiler_steps(path: Path) -> list[dict]:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]


def test_measure_is_exported_from_the_rung():
    assert fleetlib.program.measure is measure and fleetlib.program.ProgramMeasurement is ProgramMeasurement


def test_dlrm_window_is_the_measured_utc_span_of_the_traced_steps(dlrm):
    # the DLRM traces write absolute unix microseconds: the steps' own clock gives the window
    steps = [e for p in sorted(DLRM.glob("*.json.gz")) for e in _profiler_steps(p)]
    start = pd.Timestamp(min(e["ts"] for e in steps), unit="us", tz="UTC")
    end = pd.Timestamp(max(e["ts"] + e["dur"] for e in steps), unit="us", tz="UTC")
    w = dlrm.window
    assert not w.is_nominal and dlrm.has_clock
    assert (w.start, w.end) == (start, end)
    assert str(w.start.tz) == "UTC" and w.start.year == 2023
    assert w.label == load_model_config(MODEL)["name"]


def test_dlrm_numbers_stay_the_same(dlrm, dlrm_traces):
    part = dlrm.partition
    assert len(part) == 8 and part["rank"].tolist() == list(range(8))
    np.testing.assert_allclose(part[list(PARTITION_PARTS)].sum(axis=1), part["step_wall_us"], rtol=0,
                               atol=1e-6)
    first = dlrm.summary()["collectives"]["first"][0]
    assert first["collective"] == "alltoall" and first["last_arriver"] == 7
    assert first["longest_waiter"] == 1 and round(first["longest_wait_us"] / 1000, 3) == 7.625
    # the factor equals the one built the old way (program_summary's partition records, nominal window)
    summary = program_summary(dlrm_traces.kernels, dlrm_traces.steps, ops=dlrm_traces.ops)
    cfg = load_model_config(MODEL)
    old = program_goodput_factor(pd.DataFrame.from_records(summary["partition"]),
                                 useful_flops_per_step=cfg["useful_flops_per_step"], devices=cfg["devices"],
                                 peak=cfg["peak"], convention=cfg["convention"].label,
                                 window=Window.nominal(cfg["name"]))
    f = dlrm.factor()
    assert isinstance(f, Factor) and f.boundary == "program"
    # the convention gained a fourth field (issue 13 item 6) saying where the step time comes from
    assert f.value == old.value and f.losses == old.losses
    assert f.convention == old.convention + ", step time from 8 traced rank-step windows (profiler_step)"
    assert f.window is dlrm.window
    assert dlrm.summary() == summary


def test_ledger_is_the_readers_and_counts_every_event(dlrm, dlrm_traces):
    assert dlrm.ledger is dlrm_traces.ledger
    events = sum(len(json.loads(gzip.decompress(p.read_bytes()))["traceEvents"])
                 for p in DLRM.glob("*.json.gz"))
    assert dlrm.ledger.read == events and dlrm.ledger.balanced()


def test_to_dict_is_json_ready(dlrm):
    d = json.loads(json.dumps(dlrm.to_dict()))
    assert d["window"]["start"].startswith("2023-09-07T23:10:01") and d["has_clock"] is True
    assert d["factor"]["window"] == d["window"] and d["factor"]["boundary"] == "program"
    assert d["steps"] == 8 and len(d["partition"]) == 8 and len(d["files"]) == 8
    assert d["ledger"]["read"] == dlrm.ledger.read and "unused" in d["ledger"]


def test_paths_and_trace_sets_measure_the_same(dlrm):
    again = measure(DLRM, model=MODEL, cache=False)
    pd.testing.assert_frame_equal(again.partition, dlrm.partition)
    assert again.window == dlrm.window and again.factor().value == dlrm.factor().value


def test_without_a_model_there_is_no_factor(dlrm_traces):
    m = measure(dlrm_traces)
    with pytest.raises(DomainError, match="useful FLOPs"):
        m.factor()
    assert m.to_dict()["factor"] is None
    assert not m.window.is_nominal and m.window.label.startswith("2023-09-07T23:10:01")


def test_base_time_nanoseconds_is_a_calendar_clock():
    m = measure(NCCL, cache=False)
    assert m.has_clock and m.window.start >= pd.Timestamp("2024-04-01", tz="UTC")
    base = m.traces.base_time_ns
    assert m.window.start == pd.Timestamp(base + round(m.traces.steps["start_us"].min() * 1000), unit="ns",
                                          tz="UTC")


def test_a_given_window_must_hold_the_traced_steps(dlrm_traces, dlrm):
    day = "2023-09-07T00:00Z/2023-09-08T00:00Z"
    m = measure(dlrm_traces, model=MODEL, window=day)
    assert m.window == Window.parse(day) and m.factor().window == Window.parse(day)
    assert m.factor().value == dlrm.factor().value
    with pytest.raises(DomainError, match="not inside the window"):
        measure(dlrm_traces, window="2024-01-01T00:00Z/2024-01-02T00:00Z")
    with pytest.raises(DomainError, match="zone"):
        measure(dlrm_traces, window="2023-09-07T00:00/2023-09-08T00:00")


def _relative_trace(path: Path) -> Path:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 100.0,
         "dur": 50.0},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 110.0, "dur": 20.0,
         "args": {"device": 0, "stream": 7}},
    ]
    doc = {"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


def test_traces_without_a_calendar_clock_get_a_nominal_window(tmp_path):
    m = measure(_relative_trace(tmp_path / "t.json"), cache=False)
    assert m.window.is_nominal and not m.has_clock
    assert NO_CLOCK_LABEL in m.window.label and "1 traced rank-step" in m.window.label
    assert m.partition["step_wall_us"].tolist() == [50.0]
    # a caller's nominal window names it instead
    named = measure(m.traces, window=Window.nominal("job 42, step sample"))
    assert named.window.label == "job 42, step sample"
    assert traced_window(m.traces, label="sample").label == f"sample ({NO_CLOCK_LABEL})"


def test_model_given_as_the_loaded_mapping(dlrm_traces, dlrm):
    cfg = load_model_config(MODEL)
    assert measure(dlrm_traces, model=cfg).factor().value == dlrm.factor().value
    with pytest.raises(DomainError, match="lacks"):
        measure(dlrm_traces, model={"devices": 8})
