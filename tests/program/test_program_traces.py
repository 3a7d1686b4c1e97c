"""Tests for the Kineto trace reader: trace shapes, ledgers, cache, bad-input corpus, bundled traces.

Synthetic traces are written by :func:`write_trace` from event dicts built by the small helpers
below, one per shape the reader must handle.  Expected values are computed by hand from those
events, or -- for the bundled real traces -- from the raw JSON with the standard library, never by
the reader itself.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetlib._io import gunzip
from fleetlib.program.classify import COLLECTIVES, KINDS, Classifier
from fleetlib.program.readers import kineto
from fleetlib.program.readers._cache import CACHE_SUFFIX, default_cache_dir
from fleetlib.program.readers.kineto import (
    empty_host_syncs,
    empty_kernels,
    empty_ops,
    empty_steps,
    rank_from_file_name,
    read_trace,
    read_traces,
    trace_files,
)
from fleetlib.program.schema import (
    HOST_SYNC_COLUMNS,
    KERNEL_COLUMNS,
    KERNEL_EXTRA_COLUMNS,
    OPS_COLUMNS,
    STEP_COLUMNS,
)
from fleetlib.quality import DomainError, InputError, Ledger

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "traces"
DLRM = DATA / "dlrm_8rank"
NCCL = DATA / "hta_nccl_allreduce_rank-0.json.gz"
PP = [DATA / "hta_pp_pair_rank-0.json.gz", DATA / "hta_pp_pair_rank-1.json.gz"]
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "traces"


# --- helpers: synthetic traces ------------------------------------------------------------------


def write_trace(
    path: Path,
    events: list,
    *,
    top: dict | None = None,
    bare: bool = False,
    gz: bool = False,
    indent: int | None = None,
    events_first: bool = False,
) -> Path:
    """Write a trace: an object ``{**top, "traceEvents": events}`` (or a bare event array)."""
    if bare:
        doc: object = events
    elif events_first:
        doc = {"traceEvents": events, **(top or {})}
    else:
        doc = {**(top or {}), "traceEvents": events}
    data = json.dumps(doc, indent=indent).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def info(rank: int = 0, world: int = 1, **more) -> dict:
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        **more,
    }


def kernel(
    ts,
    dur,
    name="void gemm_kernel<float>(float*)",
    *,
    stream=7,
    device=0,
    corr=None,
    cat="kernel",
    pid=None,
    tid=None,
    args=None,
) -> dict:
    a = {"device": device, "stream": stream}
    if corr is not None:
        a["correlation"] = corr
    a.update(args or {})
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": device if pid is None else pid,
        "tid": stream if tid is None else tid,
        "ts": ts,
        "dur": dur,
        "args": a,
    }


def runtime(ts, dur, name, corr, *, tid=100, cat="cuda_runtime") -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr},
    }


def span(name, ts, dur, *, tid=100, cat="user_annotation", args=None) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args or {},
    }


def step(n, ts, dur) -> dict:
    return span(f"ProfilerStep#{n}", ts, dur)


def balanced(ledger) -> bool:
    return ledger.balanced() and ledger.read == ledger.kept + ledger.repaired + ledger.rejected


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


# --- canonical tables -----------------------------------------------------------------------------


def test_empty_tables_have_the_canonical_columns_and_dtypes():
    k = empty_kernels()
    assert tuple(k.columns) == KERNEL_COLUMNS + KERNEL_EXTRA_COLUMNS
    assert list(k["kind"].cat.categories) == list(KINDS)
    assert list(k["collective"].cat.categories) == list(COLLECTIVES)
    assert (
        str(k["step"].dtype) == "Int64"
        and str(k["seq"].dtype) == "Int64"
        and str(k["bytes"].dtype) == "Int64"
    )
    assert str(k["cuda_graph"].dtype) == "bool" and str(k["start_us"].dtype) == "float64"
    assert tuple(empty_steps().columns) == STEP_COLUMNS
    assert tuple(empty_host_syncs().columns) == HOST_SYNC_COLUMNS
    assert str(k["external_id"].dtype) == "Int64"
    o = empty_ops()
    assert tuple(o.columns) == OPS_COLUMNS
    assert {c: str(o[c].dtype) for c in o.columns} == {
        "rank": "int64", "external_id": "Int64", "name": "category", "start_us": "float64",
        "dur_us": "float64", "input_dims": "object", "input_types": "object",
    }


def test_modern_object_form_with_base_time(tmp_path, cache_dir):
    events = [
        step(7, 1000.5, 500.0),
        runtime(1010.25, 4.0, "cudaLaunchKernel", corr=1),
        kernel(1020.125, 30.5, corr=1),
        kernel(
            1060.0, 10.0, "Memcpy DtoD (Device -> Device)", cat="gpu_memcpy", corr=2, args={"bytes": 4096}
        ),
        kernel(1080.0, 5.0, "Memset (Device)", cat="gpu_memset", args={"bytes": 128}),
        kernel(2000.0, 1.0),
    ]  # after the step window
    top = info(
        rank=2,
        world=4,
        baseTimeNanoseconds=1_700_000_000_000_000_000,
        displayTimeUnit="ms",
        deviceProperties=[{"id": 0, "name": "NVIDIA H100"}],
    )
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=top), cache_dir=cache_dir)
    k = tr.kernels
    assert tr.rank == 2 and tr.metadata["rank_source"] == "distributedInfo"
    assert tr.metadata["base_time_ns"] == 1_700_000_000_000_000_000
    assert tr.metadata["time_origin"] == "baseTimeNanoseconds" and tr.metadata["time_unit"] == "us"
    assert tr.metadata["world_size"] == 4 and tr.metadata["device_properties"][0]["name"] == "NVIDIA H100"
    assert k["start_us"].tolist() == [1020.125, 1060.0, 1080.0, 2000.0]  # ts kept as written (µs)
    assert k["dur_us"].tolist() == [30.5, 10.0, 5.0, 1.0]
    assert k["kind"].astype(str).tolist() == ["compute", "memcpy", "memset", "compute"]
    assert k["bytes"].tolist()[1:3] == [4096, 128] and pd.isna(k["bytes"].iloc[0])
    assert k["step"].tolist()[:3] == [7, 7, 7] and pd.isna(k["step"].iloc[3])
    assert k["launch_us"].iloc[0] == 1010.25 and np.isnan(k["launch_us"].iloc[1])
    assert (k["rank"] == 2).all() and (k["stream"] == 7).all() and (k["device"] == 0).all()
    assert tr.steps[["step", "start_us", "end_us"]].to_numpy().tolist() == [[7, 1000.5, 1500.5]]
    assert tr.steps["source"].tolist() == ["profiler_step"]
    # every event is a record: 4 GPU rows, 1 step, 1 launch call (kept: it gives launch_us)
    assert tr.ledger.read == len(events) == 6 and tr.ledger.kept == 6 and balanced(tr.ledger)
    assert tr.ledger.unused == {}
    assert tr.ledger.flags == []


def test_gzip_is_recognised_by_content_and_gives_the_same_tables(tmp_path):
    events = [step(1, 0.0, 100.0), kernel(10.0, 20.0), kernel(40.0, 5.0, stream=9)]
    plain = read_trace(write_trace(tmp_path / "a.json", events, top=info()), cache=False)
    packed = read_trace(write_trace(tmp_path / "b.json", events, top=info(), gz=True), cache=False)
    pd.testing.assert_frame_equal(plain.kernels, packed.kernels)
    pd.testing.assert_frame_equal(plain.steps, packed.steps)


def test_legacy_bare_array_with_capitalised_categories(tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "Operator",
            "name": "ProfilerStep#3",
            "pid": 1,
            "tid": 1,
            "ts": 1_600_000_000_500_000,
            "dur": 100,
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 1_600_000_000_500_005,
            "dur": 3,
            "args": {"correlation": 11},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "volta_sgemm_128x64_nn",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1_600_000_000_500_010,
            "dur": 20,
            "args": {"device": 0, "stream": 7, "correlation": 11},
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1_600_000_000_500_040,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "bytes": 64},
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset (Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1_600_000_000_500_050,
            "dur": 1,
            "args": {"device": 0, "stream": 7},
        },
    ]
    tr = read_trace(write_trace(tmp_path / "worker5.json", events, bare=True), cache=False)
    assert tr.metadata["format"] == "bare_array"
    assert tr.kernels["kind"].astype(str).tolist() == ["compute", "memcpy", "memset"]
    # absolute µs integers: the origin is the earliest whole second, values stay exact
    assert tr.metadata["time_origin"] == "earliest_second"
    assert tr.metadata["base_time_ns"] == 1_600_000_000 * 10**9
    assert tr.kernels["start_us"].tolist() == [500_010.0, 500_040.0, 500_050.0]
    assert tr.kernels["launch_us"].iloc[0] == 500_005.0
    assert tr.steps[["step", "start_us", "end_us"]].to_numpy().tolist() == [[3, 500_000.0, 500_100.0]]
    assert tr.rank == 5
    assert {"legacy_format", "rank_from_file_name"} <= set(tr.ledger.codes())
    legacy = next(f for f in tr.flags if f.code == "legacy_format")
    assert "Kernel" in legacy.message and "bare event array" in legacy.message


def test_cuda_layout_without_stream_args_takes_pid_and_tid(tmp_path):
    events = [
        step(1, 0.0, 100.0),
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 21, "ts": 10.0, "dur": 5.0},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 22, "ts": 12.0, "dur": 5.0},
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    assert tr.kernels["device"].tolist() == [3, 3]
    assert tr.kernels["stream"].tolist() == [21, 22]


def test_rocm_layout(tmp_path):
    meta = [
        {"name": "process_labels", "ph": "M", "pid": 102, "tid": 0, "args": {"labels": "GPU 2"}},
        {"name": "thread_name", "ph": "M", "pid": 102, "tid": "hip_q", "args": {"name": "stream 5 "}},
    ]
    events = [
        *meta,
        step(1, 0.0, 1000.0),
        runtime(5.0, 2.0, "hipExtModuleLaunchKernel", corr=40),
        # args carry device and stream (the Dispatch Kernel shape of roctracer)
        {
            "ph": "X",
            "cat": "kernel",
            "name": "Cijk_Ailk_Bljk_HHS_BH_MT128x128",
            "pid": 2,
            "tid": 3,
            "ts": 10.0,
            "dur": 50.0,
            "args": {"device": 2, "stream": 3, "correlation": 40, "kind": "Dispatch Kernel"},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
            "pid": 2,
            "tid": 3,
            "ts": 70.0,
            "dur": 100.0,
            "args": {"device": 2, "stream": 3, "kind": "Dispatch Kernel"},
        },
        # no args: device from the "GPU 2" label of pid 102, stream from the thread name
        {
            "ph": "X",
            "cat": "kernel",
            "name": "__amd_rocclr_copyBuffer",
            "pid": 102,
            "tid": "hip_q",
            "ts": 200.0,
            "dur": 5.0,
        },
    ]
    tr = read_trace(
        write_trace(tmp_path / "t.json", events, top=info(roctracer_version=4, hip_runtime_version=60200)),
        cache=False,
    )
    k = tr.kernels
    assert tr.metadata["platform"] == "rocm"
    assert k["device"].tolist() == [2, 2, 2] and k["stream"].tolist() == [3, 3, 5]
    assert k["kind"].astype(str).tolist() == ["compute", "comm", "memcpy"]
    assert k["collective"].astype(str).tolist()[1] == "none"  # ncclDevKernel_Generic says nothing
    assert k["launch_us"].iloc[0] == 5.0


def test_nanosecond_timestamps_are_recognised_and_exact(tmp_path):
    t0 = 1_700_000_000_123_456_789
    events = [step(1, t0, 100_000), kernel(t0 + 10_001, 20_002), kernel(t0 + 40_003, 10_000)]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    assert tr.metadata["time_unit"] == "ns" and "timestamps_in_ns" in tr.ledger.codes()
    assert tr.metadata["base_time_ns"] == 1_700_000_000 * 10**9
    assert tr.kernels["start_us"].tolist() == [123_466.790, 123_496.792]
    assert tr.kernels["dur_us"].tolist() == pytest.approx([20.002, 10.0], abs=1e-9)
    assert tr.steps["start_us"].tolist() == [123_456.789]


def test_nanoseconds_relative_to_base_and_forced_unit(tmp_path):
    base = 1_711_964_646_000_000_000
    # relative ns above 1e13 cannot be µs (a Kineto base spans three months = 7.9e12 µs)
    events = [step(1, 40_000_000_000_000, 1_000_000), kernel(40_000_000_100_000, 2_000)]
    tr = read_trace(write_trace(tmp_path / "a.json", events, top=info(baseTimeNanoseconds=base)), cache=False)
    assert tr.metadata["time_unit"] == "ns" and tr.kernels["start_us"].tolist() == [40_000_000_100.0]
    small = [step(1, 1_000, 500), kernel(1_100, 20)]
    forced = read_trace(write_trace(tmp_path / "b.json", small, top=info()), cache=False, time_unit="ns")
    assert forced.kernels["start_us"].tolist() == [1.1] and forced.kernels["dur_us"].tolist() == [0.02]
    assert "as requested" in next(f.message for f in forced.flags if f.code == "timestamps_in_ns")
    with pytest.raises(DomainError, match="time_unit"):
        read_trace(tmp_path / "b.json", cache=False, time_unit="ms")


def test_integers_beyond_int64_are_kept_in_the_ledger_not_wrapped(tmp_path):
    huge = 2**64 + 5
    events = [
        step(1, 0.0, 100.0),
        kernel(10.0, 5.0, corr=huge, args={"Comms Id": 2**70}),
        kernel(20.0, 5.0, corr=3),
        runtime(2.0, 1.0, "cudaLaunchKernel", corr=huge),
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    k = tr.kernels
    assert pd.isna(k["correlation"].iloc[0]) and k["correlation"].iloc[1] == 3
    repaired = [e for e in tr.ledger.entries if e.action == "repaired"]
    assert len(repaired) == 1 and str(huge) in repaired[0].reason and repaired[0].field == "correlation"
    assert "integer_beyond_int64" in tr.ledger.codes() and balanced(tr.ledger)


def test_unknown_categories_are_kept_as_other_and_flagged_once(tmp_path):
    events = [
        step(1, 0.0, 100.0),
        kernel(10.0, 5.0),
        kernel(20.0, 5.0, "my_accelerator_op", cat="acme_gpu_op"),
        kernel(30.0, 5.0, "my_accelerator_op", cat="acme_gpu_op"),
        {"ph": "X", "cat": "acme_host_thing", "name": "h", "pid": 999, "tid": 998, "ts": 40.0, "dur": 1.0},
    ]
    with mock.patch.object(kineto, "_CHUNK_BYTES", 60):  # the two acme events land in different chunks
        tr = read_trace(write_trace(tmp_path / "t.json", events, top=info(), indent=1), cache=False)
    k = tr.kernels
    assert k["kind"].astype(str).tolist() == ["compute", "other", "other", "other"]
    flags = [f for f in tr.flags if f.code == "unknown_category"]
    assert sorted(f.message.split("'")[1] for f in flags) == ["acme_gpu_op", "acme_host_thing"]
    assert "2 complete events" in next(f.message for f in flags if "acme_gpu_op" in f.message)
    # an unknown category on a host process gets no device or stream; one on the GPU pid keeps them
    assert k["stream"].tolist() == [7, 7, 7, -1] and k["device"].tolist() == [0, 0, 0, -1]
    assert tr.metadata["events_by_category"]["acme_gpu_op"] == 2


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("worker3_step_12.1694128201557.pt.trace.json.gz", 3),
        ("sampled_rank-1.json.gz", 1),
        ("rank_12.json", 12),
        ("job-rank7.pt.trace.json", 7),
        ("trace.json", None),
        ("rank_non_gpu.json", None),
        ("/a/b/worker0/trace.json", None),
    ],
)
def test_rank_from_file_name(name, rank):
    assert rank_from_file_name(name) == rank


def test_rank_sources_and_flags(tmp_path):
    events = [step(1, 0.0, 100.0), kernel(10.0, 5.0)]
    named = read_trace(write_trace(tmp_path / "rank_4.json", events, top={"schemaVersion": 1}), cache=False)
    assert (named.rank, named.metadata["rank_source"]) == (4, "file_name")
    assert "rank_from_file_name" in named.ledger.codes() and (named.kernels["rank"] == 4).all()
    assumed = read_trace(write_trace(tmp_path / "t.json", events, top={}), cache=False)
    assert (assumed.rank, assumed.metadata["rank_source"]) == (0, "assumed")
    assert "rank_assumed_zero" in assumed.ledger.codes()
    explicit = read_trace(tmp_path / "t.json", cache=False, rank=9)
    assert explicit.rank == 9 and "rank_from_mapping" in explicit.ledger.codes()
    override = read_trace(write_trace(tmp_path / "d.json", events, top=info(rank=1)), cache=False, rank=2)
    assert override.rank == 2 and "rank_override" in override.ledger.codes()
    assert all(f.rank == 2 for f in override.flags)
    bad = read_trace(
        write_trace(tmp_path / "e.json", events, top={"distributedInfo": {"rank": "x"}}), cache=False
    )
    assert "invalid_distributed_rank" in bad.ledger.codes() and bad.rank == 0
    with pytest.raises(DomainError, match="rank"):
        read_trace(tmp_path / "t.json", cache=False, rank=-1)


def test_no_profiler_step_falls_back_to_the_gpu_span_or_markers(tmp_path):
    events = [
        span("execute_model 0", 0.0, 50.0),
        span("execute_model 1", 50.0, 50.0),
        kernel(10.0, 20.0),
        kernel(60.0, 20.0),
        kernel(85.0, 5.0, stream=9),
    ]
    path = write_trace(tmp_path / "t.json", events, top=info())
    plain = read_trace(path, cache=False)
    assert plain.steps[["step", "start_us", "end_us"]].to_numpy().tolist() == [[0, 10.0, 90.0]]
    assert plain.steps["source"].tolist() == ["gpu_span"] and "no_profiler_step" in plain.ledger.codes()
    assert plain.kernels["step"].tolist() == [0, 0, 0]
    marked = read_trace(path, cache=False, step_marker=r"^execute_model (\d+)")
    windows = marked.steps[["step", "start_us", "end_us"]].to_numpy().tolist()
    assert windows == [[0, 0.0, 50.0], [1, 50.0, 100.0]]
    assert marked.steps["source"].tolist() == ["marker", "marker"]
    assert marked.kernels["step"].tolist() == [0, 1, 1] and "steps_from_markers" in marked.ledger.codes()
    assert marked.ledger.read == 3 + 2 and balanced(marked.ledger)
    with pytest.raises(DomainError, match="step_marker"):
        read_trace(path, cache=False, step_marker="(")


def test_cpu_only_trace_uses_the_trace_span(tmp_path):
    events = [span("aten::add", 5.0, 10.0, cat="cpu_op"), span("aten::mul", 20.0, 30.0, cat="cpu_op")]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    assert tr.kernels.empty and tr.steps["source"].tolist() == ["trace_span"]
    assert tr.steps[["start_us", "end_us"]].to_numpy().tolist() == [[5.0, 50.0]]
    assert {"no_profiler_step", "no_gpu_activity"} <= set(tr.ledger.codes())


def test_collective_semantics_from_kernel_args(tmp_path):
    args = {
        "Collective name": "_allgather_base",
        "In msg nelems": 1000,
        "Out msg nelems": 8000,
        "dtype": "BFloat16",
        "Process Group Name": "3",
        "Process Group Description": "tp",
        "Seq": 17,
    }
    events = [
        step(1, 0.0, 100.0),
        kernel(
            10.0,
            5.0,
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            stream=20,
            args=args,
        ),
        kernel(
            20.0,
            5.0,
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
            stream=20,
            args={"Collective name": "mystery_op", "In msg nelems": 8, "dtype": "Float8_e4m3fn"},
        ),
        kernel(
            30.0,
            5.0,
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            stream=20,
            args={"In msg nelems": 10, "dtype": "weird_dtype"},
        ),
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    k = tr.kernels
    assert k["kind"].astype(str).tolist() == ["comm"] * 3
    assert k["collective"].astype(str).tolist() == ["allgather", "sendrecv", "allreduce"]
    assert k["collective_source"].astype(str).tolist() == ["args", "name", "name"]
    assert k["bytes"].iloc[0] == 2000 and k["bytes"].iloc[1] == 8 and pd.isna(k["bytes"].iloc[2])
    assert k["process_group"].astype(str).tolist() == ["3", "", ""]
    assert k["seq"].iloc[0] == 17 and pd.isna(k["seq"].iloc[1])
    assert {"unknown_collective_name", "unknown_dtype"} <= set(tr.ledger.codes())


def test_collective_from_host_annotations(tmp_path):
    # DLRM-style: the NCCL kernel has no args; nccl:all_to_all encloses its launch on the same thread
    events = [
        step(1, 0.0, 1000.0),
        span("record_param_comms", 10.0, 30.0, cat="cpu_op", args={"Input Dims": [[6144], []]}),
        span("nccl:all_to_all", 12.0, 20.0, args={"Input Dims": [[6144]], "Input type": ["float"]}),
        runtime(15.0, 5.0, "cudaLaunchKernel", corr=1),
        kernel(20.0, 100.0, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", stream=84, corr=1),
        # newer PyTorch: record_param_comms carries explicit args and wins over the nccl: name
        span(
            "record_param_comms",
            200.0,
            30.0,
            cat="cpu_op",
            args={
                "Collective name": "reduce_scatter_tensor_coalesced",
                "In msg nelems": 64,
                "dtype": "Half",
                "Process Group Name": "7",
                "Seq": 4,
            },
        ),
        span("nccl:reduce_scatter", 202.0, 20.0, args={"Input Dims": [[999]], "Input type": ["float"]}),
        runtime(205.0, 5.0, "cudaLaunchKernel", corr=2),
        kernel(
            300.0,
            50.0,
            "ncclDevKernel_ReduceScatter_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            stream=84,
            corr=2,
        ),
        # a launch on another thread is not enclosed by these annotations: the name decides
        runtime(16.0, 1.0, "cudaLaunchKernel", corr=3, tid=555),
        kernel(400.0, 5.0, "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)", stream=84, corr=3),
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    k = tr.kernels
    assert k["collective"].astype(str).tolist() == ["alltoall", "reducescatter", "broadcast"]
    assert k["collective_source"].astype(str).tolist() == ["host_annotation", "host_annotation", "name"]
    assert k["bytes"].iloc[0] == 6144 * 4 and k["bytes"].iloc[1] == 64 * 2
    assert k["process_group"].astype(str).tolist() == ["", "7", ""]
    assert k["seq"].iloc[1] == 4 and pd.isna(k["seq"].iloc[0])


@pytest.mark.parametrize(("args", "cat"), [
    ({"Input Dims": [[-5]], "Input type": ["float"]}, "user_annotation"),  # a negative dimension
    ({"Input Dims": [[10**19]], "Input type": ["float"]}, "user_annotation"),  # past int64 bytes
    ({"Collective name": "all_to_all", "In msg nelems": 2**62, "dtype": "Float"}, "cpu_op"),
])
def test_message_size_negative_or_past_int64_is_unknown(tmp_path, args, cat):
    name = "record_param_comms" if "Collective name" in args else "nccl:all_to_all"
    events = [
        step(1, 0.0, 1000.0),
        span(name, 12.0, 20.0, cat=cat, args=args),
        runtime(15.0, 5.0, "cudaLaunchKernel", corr=1),
        kernel(20.0, 100.0, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", stream=84, corr=1),
    ]
    k = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False).kernels
    assert k["collective"].astype(str).tolist() == ["alltoall"]
    assert k["bytes"].isna().all()


def test_custom_classifier_and_sync_and_graph_kinds(tmp_path, cache_dir):
    events = [
        step(1, 0.0, 1000.0),
        runtime(1.0, 2.0, "cudaGraphLaunch", corr=5),
        kernel(10.0, 5.0, "my_allreduce_kernel_bf16", corr=5),
        kernel(20.0, 5.0, "void at::native::reduce_kernel<512, 1>(float*)", corr=5),
        kernel(30.0, 5.0, "gemm", corr=6),
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Wait Event",
            "pid": 0,
            "tid": 7,
            "ts": 40.0,
            "dur": 3.0,
            "args": {"device": 0, "stream": 7, "wait_on_stream": 20},
        },
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Context Sync",
            "pid": 0,
            "tid": 0,
            "ts": 50.0,
            "dur": 2.0,
            "args": {"device": 0, "stream": -1},
        },
    ]
    path = write_trace(tmp_path / "t.json", events, top=info())
    default = read_trace(path, cache_dir=cache_dir)
    assert default.kernels["kind"].astype(str).tolist() == ["compute", "compute", "compute", "sync", "sync"]
    assert default.kernels["stream"].tolist()[3:] == [7, -1]
    custom = read_trace(
        path, cache_dir=cache_dir, classifier=Classifier(extra_comm_patterns=(r"^my_allreduce",))
    )
    assert not custom.from_cache  # another classification is another cache entry
    assert custom.kernels["kind"].astype(str).tolist()[:3] == ["comm", "compute", "compute"]
    assert custom.kernels["collective"].astype(str).tolist()[0] == "allreduce"
    assert custom.kernels["cuda_graph"].tolist() == [True, True, False, False, False]
    assert "cuda_graph" in custom.ledger.codes()
    with pytest.raises(DomainError, match="Classifier"):
        read_trace(path, cache=False, classifier="nccl")


def test_host_sync_table(tmp_path):
    events = [
        step(1, 0.0, 100.0),
        runtime(10.0, 30.0, "cudaStreamSynchronize", corr=1, tid=100),
        runtime(50.0, 1.0, "cudaStreamWaitEvent", corr=2, tid=100),
        runtime(60.0, 5.0, "cudaDeviceSynchronize", corr=3, tid=101),
        runtime(70.0, 2.0, "hipEventSynchronize", corr=4, tid=101),
        runtime(80.0, 2.0, "cudaEventQuery", corr=5, tid=101),  # polls, does not synchronise
        runtime(150.0, 4.0, "cudaMemcpy", corr=6, tid=100),
        runtime(90.0, -1.0, "cudaStreamSynchronize", corr=7, tid=100),
        kernel(5.0, 1.0),
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    h = tr.host_syncs
    assert h["name"].astype(str).tolist() == [
        "cudaStreamSynchronize",
        "cudaStreamWaitEvent",
        "cudaDeviceSynchronize",
        "hipEventSynchronize",
        "cudaMemcpy",
    ]
    assert h["sync_kind"].astype(str).tolist() == [
        "stream",
        "stream_wait_event",
        "device",
        "event",
        "sync_memcpy",
    ]
    assert h["blocking"].tolist() == [True, False, True, True, True]
    assert h["tid"].tolist() == [100, 100, 101, 101, 100]
    assert h["step"].tolist()[:4] == [1, 1, 1, 1] and pd.isna(h["step"].iloc[4])
    # every event is a record (the cudaEventQuery call too); the negative sync is rejected
    assert tr.ledger.read == len(events) == 9 and tr.ledger.rejected == 1 and balanced(tr.ledger)


def test_bad_values_in_rows_are_rejected_or_repaired(tmp_path):
    events = [
        step(1, 0.0, 100.0),
        kernel(None, 5.0),  # no ts
        kernel("12.5", 5.0),  # numeric text: repaired
        kernel("soon", 5.0),  # not a number
        kernel(20.0, None),  # no duration
        kernel(30.0, True),  # a boolean is not a duration
        {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": 40.0, "dur": 1.0, "args": "oops"},
        3,
        "not an event",  # entries that are not objects
        kernel(50.0, 1.0),
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    led = tr.ledger
    rejected = {e.row: (e.field, e.reason) for e in led.entries if e.action == "rejected"}
    assert sorted(rejected) == [2, 4, 5, 6, 8, 9]
    assert rejected[8] == (None, "entry of traceEvents is not a JSON object")
    assert rejected[2][0] == "ts" and rejected[5][0] == "dur" and "not a finite number" in rejected[6][1]
    repaired = {e.row: e.reason for e in led.entries if e.action == "repaired"}
    assert sorted(repaired) == [3, 7]
    assert "numeric text" in repaired[3] and "<unnamed>" in repaired[7]
    assert tr.kernels["start_us"].tolist() == [12.5, 40.0, 50.0]
    assert "args_not_object" in led.codes()
    assert led.read == 10 and balanced(led)


def test_metadata_keys_after_the_events_and_chunked_decoding(tmp_path):
    nested = {"shapes": [{"a": 1}, {"b": [{"c": 2}, {"d": 3}]}]}  # "}, {" inside an event: a false cut
    events = (
        [step(1, 0.0, 10_000.0)]
        + [kernel(10.0 + 20 * i, 10.0, f"k{i % 3}", stream=7 + i % 2, corr=i, args=nested) for i in range(40)]
        + [runtime(5.0 + 20 * i, 1.0, "cudaLaunchKernel", corr=i) for i in range(40)]
    )
    top = info(rank=1, world=2, baseTimeNanoseconds=123_000_000_000)
    path = write_trace(tmp_path / "t.json", events, top=top, indent=2, events_first=True)
    whole = read_trace(path, cache=False)
    assert whole.metadata["base_time_ns"] == 123_000_000_000 and whole.rank == 1
    for size in (1, 150, 700, 5000):
        with mock.patch.object(kineto, "_CHUNK_BYTES", size):
            chunked = read_trace(path, cache=False)
        pd.testing.assert_frame_equal(whole.kernels, chunked.kernels)
        pd.testing.assert_frame_equal(whole.steps, chunked.steps)
        assert chunked.metadata == whole.metadata


_EVENT = st.fixed_dictionaries(
    {
        "ts": st.floats(0, 1e6, allow_nan=False),
        "dur": st.floats(0, 1e3, allow_nan=False),
        "stream": st.integers(0, 3),
        "name": st.sampled_from(["gemm", "ncclKernel_AllReduce_x", "Memcpy HtoD", "é}{, ["]),
        "cat": st.sampled_from(["kernel", "gpu_memcpy", "cpu_op", "cuda_runtime", "ac2g"]),
        "extra": st.sampled_from([None, {"l": [{"x": 1}, {"y": "}, {"}]}, "}\n,\n{"]),
    }
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(_EVENT, min_size=1, max_size=25),
    chunk=st.integers(1, 400),
    indent=st.sampled_from([None, 0, 1, 2]),
    bare=st.booleans(),
)
def test_chunked_decoding_equals_the_whole_document_parse(events, chunk, indent, bare):
    evs = [
        {
            "ph": "X",
            "cat": e["cat"],
            "name": e["name"],
            "pid": 0,
            "tid": e["stream"],
            "ts": e["ts"],
            "dur": e["dur"],
            "args": {"stream": e["stream"], "device": 0, "more": e["extra"]},
        }
        for e in events
    ]
    evs.append(step(1, 0.0, 2e6))
    with tempfile.TemporaryDirectory() as d:
        path = write_trace(Path(d) / "t.json", evs, top=info(), indent=indent, bare=bare)
        with mock.patch.object(kineto, "_CHUNK_BYTES", 10**9):
            whole = read_trace(path, cache=False)
        with mock.patch.object(kineto, "_CHUNK_BYTES", chunk):
            chunked = read_trace(path, cache=False)
    pd.testing.assert_frame_equal(whole.kernels, chunked.kernels)
    assert whole.ledger.to_dict() == chunked.ledger.to_dict()
    assert balanced(chunked.ledger)
    gpu = sum(e["cat"] in ("kernel", "gpu_memcpy") for e in events)
    assert len(chunked.kernels) == gpu and chunked.ledger.read == len(evs)  # every event is a record


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.floats(0, 100, allow_nan=False),
            st.floats(-1, 50),
            st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "zzz"]),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_ledger_accounts_for_every_candidate_row(rows):
    evs = [kernel(ts, dur, stream=s, cat=c) for s, ts, dur, c in rows] + [step(1, 0.0, 30.0)]
    with tempfile.TemporaryDirectory() as d:
        tr = read_trace(
            write_trace(Path(d) / "t.json", evs, top=info()),
            cache=False,
            max_event_us=40.0,
            overlap_tolerance_us=0.5,
        )
    led = tr.ledger
    assert led.read == len(rows) + 1 and balanced(led)
    bad = sum(1 for _, _, dur, _ in rows if dur < 0 or dur > 40.0)
    assert led.rejected == bad and len(tr.kernels) == len(rows) - bad
    # after the rounding repairs, no activity ends later than the next one starts by <= the tolerance
    k = tr.kernels[tr.kernels["kind"].isin(["compute", "memcpy", "memset"]) & (tr.kernels["stream"] >= 0)]
    k = k.sort_values(["stream", "start_us", "end_us"])
    for _, g in k.groupby("stream"):
        over = g["end_us"].to_numpy()[:-1] - g["start_us"].to_numpy()[1:]
        assert not ((over > 0) & (over <= 0.5)).any()


def test_document_structure_edge_cases(tmp_path):
    events = [step(1, 0.0, 100.0), kernel(10.0, 20.0), kernel(40.0, 5.0)]
    text = json.dumps({**info(), "traceEvents": events}).encode()
    # a gzip file of two members (concatenated streams) is one document
    half = len(text) // 2
    (tmp_path / "multi.json.gz").write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    assert len(read_trace(tmp_path / "multi.json.gz", cache=False).kernels) == 2
    (tmp_path / "junk.json.gz").write_bytes(gzip.compress(text) + b"garbage")
    with pytest.raises(InputError, match="trailing garbage"):
        read_trace(tmp_path / "junk.json.gz", cache=False)
    # a "traceEvents" key nested before the real one is not taken for the event array
    nested = {"meta": {"traceEvents": [1, 2]}, **info(), "traceEvents": events}
    (tmp_path / "nested.json").write_text(json.dumps(nested))
    tr = read_trace(tmp_path / "nested.json", cache=False)
    assert len(tr.kernels) == 2 and tr.metadata["other"]["meta"] == {"traceEvents": [1, 2]}
    for name, body, match in (
        ("number.json", "42", "not JSON"),
        ("noevents.json", json.dumps(info()), "no traceEvents"),
        ("scalar_events.json", json.dumps({"traceEvents": 3}), "traceEvents is a int"),
        ("extra.json", json.dumps(events) + " [1]", "extra data"),
        ("tail.json", json.dumps({"traceEvents": events})[:-1] + ', "x": }', "after traceEvents"),
        ("no_timed.json", json.dumps({"traceEvents": [{"ph": "M", "name": "process_name"}]}), "none is a"),
    ):
        (tmp_path / name).write_text(body)
        with pytest.raises(InputError, match=match):
            read_trace(tmp_path / name, cache=False)
    with pytest.raises(InputError, match="not found"):
        read_trace(tmp_path / "missing.json", cache=False)


# --- cache --------------------------------------------------------------------------------------------


def test_cache_round_trip_is_identical_and_keyed_by_content(tmp_path, cache_dir):
    events = [
        step(1, 0.0, 100.0),
        runtime(1.0, 1.0, "cudaStreamSynchronize", corr=9),
        kernel(10.0, 20.0004, corr=1),
        kernel(30.0, 5.0),
        kernel(40.0, -1.0),
        kernel(
            50.0,
            5.0,
            "ncclKernel_AllReduce_RING_LL_Sum_float",
            stream=20,
            args={"Collective name": "allreduce", "In msg nelems": 4, "dtype": "Float"},
        ),
    ]
    path = write_trace(tmp_path / "rank_3.json", events, top={"schemaVersion": 1})
    first = read_trace(path, cache_dir=cache_dir)
    second = read_trace(path, cache_dir=cache_dir)
    assert not first.from_cache and second.from_cache
    assert len(list(cache_dir.glob("*" + CACHE_SUFFIX))) == 1
    for a, b in (
        (first.kernels, second.kernels),
        (first.steps, second.steps),
        (first.host_syncs, second.host_syncs),
        (first.ops, second.ops),
    ):
        pd.testing.assert_frame_equal(a, b)
    assert first.metadata == second.metadata and first.ledger.to_dict() == second.ledger.to_dict()
    # same bytes under another name: a cache hit, but the rank comes from the new name
    other = shutil.copy(path, tmp_path / "rank_5.json")
    third = read_trace(other, cache_dir=cache_dir)
    assert third.from_cache and third.rank == 5 and (third.kernels["rank"] == 5).all()
    assert all(e.file == str(other) for e in third.ledger.entries)
    # a damaged entry is ignored and rewritten
    entry = next(cache_dir.glob("*" + CACHE_SUFFIX))
    entry.write_bytes(b"not a cache file")
    fourth = read_trace(path, cache_dir=cache_dir)
    assert not fourth.from_cache
    pd.testing.assert_frame_equal(first.kernels, fourth.kernels)
    assert read_trace(path, cache_dir=cache_dir).from_cache
    assert not read_trace(path, cache=False, cache_dir=cache_dir).from_cache


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLEETLIB_TRACE_CACHE", str(tmp_path / "elsewhere"))
    assert default_cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("FLEETLIB_TRACE_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "fleetlib" / "traces"


# --- many files -----------------------------------------------------------------------------------------


def test_read_traces_rebases_ranks_and_flags_missing_ones(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    write_trace(
        d / "a.json",
        [step(1, 1000.0, 100.0), kernel(1010.0, 5.0)],
        top=info(rank=0, world=4, baseTimeNanoseconds=5_000_000_000),
    )
    write_trace(
        d / "b.json.gz",
        [step(1, 10.0, 100.0), kernel(20.0, 5.0)],
        top=info(rank=2, world=4, baseTimeNanoseconds=5_000_990_000),
        gz=True,
    )
    (d / "notes.txt").write_text("not a trace")
    ts = read_traces(d, cache=False, progress=True)
    assert ts.ranks == [0, 2] and ts.base_time_ns == 5_000_000_000
    assert ts.kernels["start_us"].tolist() == [1010.0, 1010.0]  # rank 2 moved by 990 µs
    assert ts.steps["start_us"].tolist() == [1000.0, 1000.0]
    codes = ts.ledger.codes()
    assert "missing_ranks" in codes and "time_base_shifted" in codes
    assert "2 of 4 ranks read" in next(f.message for f in ts.flags if f.code == "missing_ranks")
    assert isinstance(ts.ledger, Ledger) and balanced(ts.ledger)
    assert isinstance(ts.kernels["name"].dtype, pd.CategoricalDtype)


def test_read_traces_duplicates_mapping_and_skipping(tmp_path):
    d = tmp_path / "dup"
    d.mkdir()
    for name in ("x.json", "y.json"):
        write_trace(d / name, [step(1, 0.0, 10.0), kernel(1.0, 1.0)], top=info(rank=0, world=2))
    with pytest.raises(InputError, match="duplicate ranks") as err:
        read_traces(d, cache=False, progress=False)
    assert "x.json" in str(err.value) and "y.json" in str(err.value)
    ts = read_traces(d, cache=False, progress=False, ranks={"y.json": 1})
    assert ts.ranks == [0, 1] and "rank_override" in ts.ledger.codes()
    (d / "z.json").write_text("{broken")
    with pytest.raises(InputError, match="invalid JSON"):
        read_traces(d, cache=False, progress=False, ranks={"y.json": 1})
    skipped = read_traces(d, cache=False, progress=False, ranks={"y.json": 1}, errors="skip")
    assert skipped.ranks == [0, 1] and skipped.ledger.rejected == 1 and balanced(skipped.ledger)
    assert next(e for e in skipped.ledger.entries if e.field == "file").file.endswith("z.json")
    with pytest.raises(DomainError, match="errors"):
        read_traces(d, cache=False, errors="ignore")


def test_trace_files_expansion(tmp_path):
    (tmp_path / "b.json").write_text("[]")
    (tmp_path / "a.json.gz").write_bytes(b"")
    (tmp_path / "c.csv").write_text("")
    assert [p.name for p in trace_files(tmp_path)] == ["a.json.gz", "b.json"]
    assert [p.name for p in trace_files([tmp_path / "b.json"])] == ["b.json"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DomainError, match="no"):
        trace_files(empty)
    with pytest.raises(DomainError):
        trace_files([])
    with pytest.raises(InputError, match="not found"):
        trace_files(tmp_path / "missing.json")


# --- the bad-input corpus (tests/corpus/traces) -------------------------------------------------


def test_corpus_truncated_gzip():
    with pytest.raises(InputError, match="truncated or corrupt gzip") as err:
        read_trace(CORPUS / "truncated.json.gz", cache=False)
    assert err.value.field == "gzip" and err.value.file.endswith("truncated.json.gz")


def test_corpus_invalid_json_names_the_line():
    with pytest.raises(InputError, match="line 13 column 8") as err:
        read_trace(CORPUS / "invalid_json.json", cache=False)
    assert (err.value.row, err.value.field) == (13, "json")
    with pytest.raises(InputError, match="looks truncated"):
        read_trace(CORPUS / "truncated.json", cache=False)


def test_corpus_invalid_utf8_is_repaired_not_lost():
    tr = read_trace(CORPUS / "invalid_utf8.json", cache=False)
    assert tr.kernels["name"].astype(str).tolist()[0] == "kernel_caf\ufffd\ufffd"
    rep = [e for e in tr.ledger.entries if e.action == "repaired"]
    assert [(e.row, e.field) for e in rep] == [(2, "name")] and "U+FFFD" in rep[0].reason
    assert "invalid_utf8" in tr.ledger.codes() and len(tr.kernels) == 2 and balanced(tr.ledger)


def test_corpus_negative_duration_is_rejected():
    tr = read_trace(CORPUS / "negative_duration.json", cache=False)
    (entry,) = tr.ledger.entries
    assert (entry.action, entry.row, entry.field) == ("rejected", 3, "dur") and "negative" in entry.reason
    assert tr.kernels["start_us"].tolist() == [10.0, 60.0] and balanced(tr.ledger)


def test_corpus_ns_rounding_overlap_is_trimmed_and_real_overlap_flagged():
    tr = read_trace(CORPUS / "ns_rounding_overlap.json", cache=False)
    (entry,) = tr.ledger.entries
    assert (entry.action, entry.row, entry.field) == ("repaired", 2, "dur")
    assert entry.reason.startswith("ns_rounding_overlap") and "0.4 ns" in entry.reason
    s7 = tr.kernels[tr.kernels["stream"] == 7]
    assert s7["end_us"].tolist() == [30.0, 40.0, 42.0]  # 30.0004 trimmed to the next start
    assert "stream_overlap" in tr.ledger.codes()  # the 3 µs overlap on stream 9 is kept and flagged
    s9 = tr.kernels[tr.kernels["stream"] == 9]
    assert s9["end_us"].tolist() == [30.0, 32.0]


def test_corpus_absurdly_long_event_is_rejected_with_the_threshold():
    tr = read_trace(CORPUS / "absurd_duration.json", cache=False)
    (entry,) = tr.ledger.entries
    assert entry.action == "rejected" and entry.row == 3 and "max_event_us=3.6e+09" in entry.reason
    kept = read_trace(CORPUS / "absurd_duration.json", cache=False, max_event_us=1e12)
    assert len(kept.kernels) == 3 and kept.ledger.rejected == 0
    with pytest.raises(DomainError):
        read_trace(CORPUS / "absurd_duration.json", cache=False, max_event_us=0)


def test_corpus_duplicate_ranks():
    with pytest.raises(InputError, match="duplicate ranks") as err:
        read_traces(CORPUS / "duplicate_ranks", cache=False, progress=False)
    assert "trace_a.json" in str(err.value) and "trace_b.json" in str(err.value) and err.value.field == "rank"


def test_corpus_empty_traces():
    with pytest.raises(InputError, match="no events") as err:
        read_trace(CORPUS / "empty_events.json", cache=False)
    assert err.value.field == "traceEvents"
    with pytest.raises(InputError, match="empty file"):
        read_trace(CORPUS / "empty_file.json", cache=False)


def test_corpus_single_rank_of_a_multi_rank_job():
    ts = read_traces(CORPUS / "single_rank_of_8.json", cache=False, progress=False)
    assert ts.ranks == [3]
    flag = next(f for f in ts.flags if f.code == "missing_ranks")
    assert "1 of 8 ranks read" in flag.message and "0, 1, 2, 4, 5, 6, 7" in flag.message


def test_corpus_no_profiler_step():
    tr = read_trace(CORPUS / "no_profiler_step.json", cache=False)
    assert tr.steps["source"].tolist() == ["gpu_span"] and "no_profiler_step" in tr.ledger.codes()
    marked = read_trace(CORPUS / "no_profiler_step.json", cache=False, step_marker=r"^execute_model (\d+)$")
    assert marked.steps["step"].tolist() == [0, 1] and marked.kernels["step"].tolist() == [0, 1]


def test_corpus_legacy_bare_array():
    tr = read_trace(CORPUS / "legacy_bare_array.json", cache=False)
    assert tr.metadata["format"] == "bare_array" and "legacy_format" in tr.ledger.codes()
    assert tr.kernels["kind"].astype(str).tolist() == ["compute", "memcpy"]
    assert tr.kernels["bytes"].tolist()[1] == 4096 and tr.steps["step"].tolist() == [3]


def test_corpus_ns_timestamps():
    tr = read_trace(CORPUS / "ns_timestamps.json", cache=False)
    assert tr.metadata["time_unit"] == "ns"
    assert tr.kernels["start_us"].tolist() == [123_466.790, 123_496.792]


# --- bundled real traces ----------------------------------------------------------------------------


def _raw_events(path: Path) -> list[dict]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


@pytest.fixture(scope="module")
def dlrm():
    return read_traces(DLRM, cache=False, progress=False)


def test_dlrm_eight_ranks_from_distributed_info(dlrm):
    assert dlrm.ranks == list(range(8))
    assert {r: m["rank_source"] for r, m in dlrm.metadata.items()} == dict.fromkeys(
        range(8), "distributedInfo"
    )
    assert all(m["world_size"] == 8 for m in dlrm.metadata.values())
    assert dlrm.ledger.rejected == 0 and dlrm.ledger.repaired == 0 and balanced(dlrm.ledger)
    # these traces write each kernel's correlation id as its External id: the launching op is found
    # by enclosure instead (flagged, no row changed)
    assert dlrm.ledger.codes() == ["external_id_from_launch"]
    files = sorted(DLRM.glob("*.json.gz"))
    for path in files:
        raw = _raw_events(path)
        rank = rank_from_file_name(path.name)
        gpu = [
            e for e in raw if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        ]
        assert (dlrm.kernels["rank"] == rank).sum() == len(gpu)
        counts = Counter(e["name"] for e in raw if e.get("cat") == "cuda_runtime")
        h = dlrm.host_syncs[dlrm.host_syncs["rank"] == rank]
        assert (h["name"] == "cudaStreamSynchronize").sum() == counts["cudaStreamSynchronize"]
        assert (h["name"] == "cudaStreamWaitEvent").sum() == counts["cudaStreamWaitEvent"]


def test_dlrm_step_windows(dlrm):
    steps = dlrm.steps.set_index("rank")
    assert (steps["step"] == 10).all() and (steps["source"] == "profiler_step").all()
    for path in sorted(DLRM.glob("*.json.gz")):
        (ps,) = [e for e in _raw_events(path) if e.get("name", "").startswith("ProfilerStep#")]
        rank = rank_from_file_name(path.name)
        assert steps.loc[rank, "end_us"] - steps.loc[rank, "start_us"] == ps["dur"]
        assert steps.loc[rank, "start_us"] == ps["ts"] - dlrm.base_time_ns // 1000
    assert dlrm.kernels["step"].notna().all()  # every activity starts inside its rank's step


def test_dlrm_all_to_all_kernels_are_classified_from_the_host_annotation(dlrm):
    k = dlrm.kernels
    comm = k[k["kind"] == "comm"]
    sendrecv = comm["name"].astype(str).str.startswith("ncclKernel_SendRecv")
    # decision: SendRecv kernels launched inside nccl:all_to_all are all-to-alls (not sendrecv)
    assert (comm.loc[sendrecv, "collective"] == "alltoall").all()
    assert (comm.loc[~sendrecv, "collective"] == "allreduce").all()
    assert (comm["collective_source"] == "host_annotation").all()
    per_rank = pd.crosstab(comm["rank"], comm["collective"].astype(str))
    assert per_rank["alltoall"].tolist() == [5] * 8 and per_rank["allreduce"].tolist() == [3] * 8
    assert comm["name"].astype(str).str.startswith("ncclKernel_").all()
    first = comm[sendrecv].groupby("rank").head(1).set_index("rank")
    raw_first = {0: 2146, 1: 7635, 2: 518, 3: 6132, 4: 4882, 5: 4679, 6: 514, 7: 10}  # field notes §8.3
    assert first["dur_us"].to_dict() == {r: float(d) for r, d in raw_first.items()}
    assert (first["bytes"] == 6144 * 4).all()  # nccl:all_to_all Input Dims [[6144]], float
    ends = first["end_us"]
    assert ends.max() - ends.min() <= 2.0  # one host: all ranks leave the first all-to-all together
    assert (first["launch_us"] < first["start_us"]).all()


@pytest.fixture(scope="module")
def nccl():
    """The AllReduce trace read once (the typed decoder watched), and its raw events."""
    spy = mock.Mock(wraps=kineto.EVENT_DECODER)
    text = mock.Mock(wraps=kineto._text)  # the json path's decoding step
    with mock.patch.object(kineto, "EVENT_DECODER", spy), mock.patch.object(kineto, "_text", text):
        tr = read_trace(NCCL, cache=False)
    assert not text.called  # msgspec decoded the whole document
    return tr, _raw_events(NCCL), spy.decode.call_count


def test_hta_nccl_trace_collectives_come_from_kernel_args(nccl):
    tr, events, typed_calls = nccl
    assert typed_calls >= 16  # the file is decoded in pieces, all by the typed decoder
    raw = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
    k = tr.kernels[tr.kernels["kind"] == "comm"].sort_values("start_us")
    raw.sort(key=lambda e: e["ts"])
    assert len(k) == len(raw) == 21
    assert k["collective"].astype(str).tolist() == [e["args"]["Collective name"] for e in raw]
    assert Counter(k["collective"].astype(str)) == {"allreduce": 15, "broadcast": 6}
    size = {"Float": 4, "Long": 8}
    assert k["bytes"].tolist() == [e["args"]["In msg nelems"] * size[e["args"]["dtype"]] for e in raw]
    assert (k["collective_source"] == "args").all() and (k["process_group"] == "0").all()
    assert k["start_us"].tolist() == [e["ts"] for e in raw]  # ts is relative to baseTimeNanoseconds
    assert tr.metadata["base_time_ns"] == 1_711_964_646_000_000_000
    assert tr.steps["step"].tolist() == [4, 5, 6]
    assert tr.metadata["distributed_info"]["nccl_version"] == "2.17.1"
    assert balanced(tr.ledger) and tr.ledger.rejected == 0


def test_hta_pipeline_pair_is_two_of_128_ranks():
    ts = read_traces(PP, cache=False, progress=False)
    assert ts.ranks == [0, 1]
    assert "2 of 128 ranks read" in next(f.message for f in ts.flags if f.code == "missing_ranks")
    assert ts.steps.groupby("rank")["step"].apply(list).to_dict() == {0: [551, 552], 1: [551, 552]}
    comm = ts.kernels[ts.kernels["kind"] == "comm"]
    assert comm["name"].astype(str).str.startswith("ncclKernel_SendRecv").all() and len(comm) > 0


# --- CPU operators with shapes (ops) and kernel -> op links ------------------------------------------


def cpu_op(name, ts, dur, ext, *, dims=None, types=None, tid=100, cat="cpu_op") -> dict:
    args = {"External id": ext}
    if dims is not None:
        args["Input Dims"] = dims
    if types is not None:
        args["Input type"] = types
    return span(name, ts, dur, tid=tid, cat=cat, args=args)


def test_ops_table_and_external_id_from_kernel_args(tmp_path, cache_dir):
    # modern Kineto: the kernel's External id names the op (it differs from the correlation id)
    events = [
        step(1, 0.0, 1000.0),
        cpu_op("aten::linear", 10.0, 200.0, 7, dims=[[64, 128], [256, 128], [256]],
               types=["float", "float", "float"]),
        cpu_op("aten::addmm", 20.0, 100.0, 8, dims=[[256], [64, 128], [128, 256], [], []],
               types=["float", "float", "float", "Scalar", "Scalar"]),
        cpu_op("aten::empty", 30.0, 1.0, 9),  # no shapes recorded: not a row
        cpu_op("aten::mm", 300.0, -5.0, 10, dims=[[1, 2], [2, 3]]),  # negative duration: rejected
        cpu_op("aten::mm", 400.0, 50.0, 2**70, dims=[[1, 2], [2, 3]], types=["c10::Half", "c10::Half"]),
        runtime(40.0, 5.0, "cudaLaunchKernel", corr=501),
        kernel(60.0, 30.0, "ampere_sgemm_64x64_tn", corr=501, args={"External id": 8}),
        kernel(100.0, 5.0, "memset", corr=502),  # no External id arg and no launch call: <NA>
    ]
    path = write_trace(tmp_path / "t.json", events, top=info())
    tr = read_trace(path, cache_dir=cache_dir)
    o = tr.ops
    assert tuple(o.columns) == OPS_COLUMNS and len(o) == 3
    assert o["name"].tolist() == ["aten::linear", "aten::addmm", "aten::mm"]
    assert o["external_id"].tolist()[:2] == [7, 8]
    assert o["external_id"].isna().tolist() == [False, False, True]
    assert o["start_us"].tolist() == [10.0, 20.0, 400.0] and o["dur_us"].tolist() == [200.0, 100.0, 50.0]
    assert o["input_dims"].tolist() == [
        "[[64, 128], [256, 128], [256]]", "[[256], [64, 128], [128, 256], [], []]", "[[1, 2], [2, 3]]",
    ]
    assert json.loads(o["input_types"][1]) == ["float", "float", "float", "Scalar", "Scalar"]
    assert o["input_types"][2] == '["c10::Half", "c10::Half"]'
    assert str(o["input_dims"].dtype) == "object" and str(o["input_types"].dtype) == "object"
    k = tr.kernels
    assert k["external_id"].tolist()[0] == 8 and pd.isna(k["external_id"][1])
    assert "external_id_from_launch" not in tr.ledger.codes()
    joined = k.dropna(subset=["external_id"]).merge(o, on=["rank", "external_id"], suffixes=("", "_op"))
    assert joined["name_op"].tolist() == ["aten::addmm"]  # (drop <NA> first: pandas joins NA to NA)
    # ledger: every event read; the negative op rejected, the huge id repaired
    rejected = {(e.row, e.field) for e in tr.ledger.entries if e.action == "rejected"}
    assert rejected == {(5, "dur")}
    repaired = [e for e in tr.ledger.entries if e.action == "repaired"]
    assert [e.row for e in repaired] == [6] and str(2**70) in repaired[0].reason
    assert tr.ledger.read == len(events) == 9 and balanced(tr.ledger)
    # the cache keeps the table exactly
    again = read_trace(path, cache_dir=cache_dir)
    assert again.from_cache
    pd.testing.assert_frame_equal(tr.ops, again.ops)
    pd.testing.assert_frame_equal(tr.kernels, again.kernels)


def test_external_id_from_the_op_enclosing_the_launch(tmp_path):
    # older Kineto: External id == correlation on every kernel; the innermost CPU op that encloses
    # the launch call on the launching thread is the launching op (nested ops, siblings, threads)
    events = [
        step(1, 0.0, 1000.0),
        cpu_op("aten::linear", 10.0, 300.0, 1, dims=[[8, 4], [2, 4]]),
        cpu_op("aten::t", 12.0, 3.0, 2, dims=[[2, 4]]),  # a finished sibling before the launch
        cpu_op("aten::addmm", 20.0, 100.0, 3, dims=[[2], [8, 4], [4, 2]]),
        cpu_op("aten::empty", 25.0, 2.0, 4),  # finished before the launch
        runtime(40.0, 5.0, "cudaLaunchKernel", corr=900),  # inside addmm
        runtime(200.0, 5.0, "cudaLaunchKernel", corr=901),  # inside linear only
        runtime(500.0, 5.0, "cudaLaunchKernel", corr=902),  # inside no op
        cpu_op("aten::mul", 40.0, 10.0, 5, dims=[[3]], tid=101),  # same time, other thread
        kernel(60.0, 10.0, corr=900, args={"External id": 900}),
        kernel(210.0, 10.0, corr=901, args={"External id": 901}),
        kernel(510.0, 10.0, corr=902, args={"External id": 902}),
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    ext = tr.kernels["external_id"]
    assert ext.tolist()[:2] == [3, 1] and pd.isna(ext[2])
    assert tr.ledger.codes() == ["external_id_from_launch"]


def _innermost_op(ops: list[dict], tid, t: float):
    inside = [o for o in ops if o["tid"] == tid and o["ts"] <= t <= o["ts"] + o["dur"]]
    if not inside:
        return None
    best = max(inside, key=lambda o: (o["ts"], -o["dur"]))
    return best["args"]["External id"]


def test_dlrm_ops_and_kernel_links_match_a_brute_force_search(dlrm):
    path = sorted(DLRM.glob("*.json.gz"))[0]
    raw = _raw_events(path)
    ops_raw = [e for e in raw if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    shaped = [e for e in ops_raw if "Input Dims" in e.get("args", {})]
    o = dlrm.ops[dlrm.ops["rank"] == 0]
    assert len(o) == len(shaped) > 1000
    base = min(e["ts"] for e in raw if "ts" in e) // 10**6 * 10**6
    expect = sorted((e["ts"] - base, e["args"]["External id"], e["name"], json.dumps(e["args"]["Input Dims"]))
                    for e in shaped)
    got = sorted(zip(o["start_us"], o["external_id"], o["name"].astype(str), o["input_dims"], strict=True))
    assert got == expect
    mm = o[o["name"].isin(["aten::addmm", "aten::mm"])]
    assert len(mm) >= 20 and mm["input_dims"].map(lambda t: len(json.loads(t)) >= 2).all()
    # every kernel's link, recomputed by brute force from the raw JSON (launch call -> innermost op)
    calls = {e["args"]["correlation"]: e for e in raw if e.get("cat") == "cuda_runtime"}
    k = dlrm.kernels[dlrm.kernels["rank"] == 0]
    for corr, ext in zip(k["correlation"], k["external_id"], strict=True):
        call = calls.get(corr)
        want = None if call is None else _innermost_op(ops_raw, call["tid"], call["ts"])
        assert (pd.isna(ext) and want is None) or ext == want
    # every GEMM kernel joins to a matrix-multiply op with its shapes
    gemm = k[k["name"].astype(str).str.contains("sgemm|gemmSN", regex=True)].dropna(subset=["external_id"])
    joined = gemm.merge(o, on=["rank", "external_id"], how="left", suffixes=("", "_op"))
    assert len(gemm) >= 20 and len(joined) == len(gemm)
    assert set(joined["name_op"].astype(str)) == {"aten::mm", "aten::addmm", "aten::bmm"}
    assert ((joined["launch_us"] >= joined["start_us_op"])
            & (joined["launch_us"] <= joined["start_us_op"] + joined["dur_us_op"])).all()
    # TraceSet.ops is every rank's table on the common time base
    assert sorted(dlrm.ops["rank"].unique()) == list(range(8))
    assert len(dlrm.ops) == sum(len(tr.ops) for tr in dlrm.reads)


def test_hta_allreduce_trace_links_kernels_by_their_own_external_id(nccl):
    tr, raw, _ = nccl
    first = next(e for e in raw if e.get("cat") == "kernel")
    assert tr.ops.empty and tuple(tr.ops.columns) == OPS_COLUMNS  # recorded without shapes
    k = tr.kernels
    assert int(k["external_id"].notna().sum()) == len(k)
    assert first["args"]["External id"] != first["args"]["correlation"]
    mine = k[k["correlation"] == first["args"]["correlation"]]
    assert mine["external_id"].tolist() == [first["args"]["External id"]]
    assert "external_id_from_launch" not in tr.ledger.codes()


# --- parallel parse on Dask -------------------------------------------------------------------------


def test_read_traces_on_a_dask_cluster_equals_the_serial_path(tmp_path):
    distributed = pytest.importorskip("distributed")
    bad = tmp_path / "rank_9.json"
    bad.write_bytes(b'{"traceEvents": [{"ph": "X", ')
    files = [sorted(DLRM.glob("*.json.gz"))[0], PP[1], bad]
    ranks = {p.name: i for i, p in enumerate(files)}  # the two pairs would otherwise both claim ranks
    serial = read_traces(files, cache=False, progress=False, errors="skip", ranks=ranks)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
        as cluster,
        distributed.Client(cluster) as client,
    ):
        par = read_traces(files, cache=False, progress=True, errors="skip", ranks=ranks, client=client)
        with pytest.raises(InputError, match=r"rank_9\.json"):
            read_traces([bad], cache=False, progress=False, client=client)
    for table in ("kernels", "steps", "host_syncs", "ops"):
        pd.testing.assert_frame_equal(getattr(serial, table), getattr(par, table))
    assert serial.ledger.to_dict() == par.ledger.to_dict()
    assert par.ledger.rejected == 1 and par.ledger.entries[-1].field == "file"
    assert par.base_time_ns == serial.base_time_ns and par.ranks == [0, 1]
    assert [tr.path for tr in par.reads] == files[:2]
    assert "time_base_shifted" in par.ledger.codes() and len(par.ops) > 0
    with pytest.raises(DomainError, match="client"):
        read_traces(files, cache=False, client="localhost:8786")


# --- adversarial documents ------------------------------------------------------------------------------


_W = st.sampled_from([0, 7, 2.5, "3.5", "x", None, True, 2**70, -5, [1], {"a": 1}, float("nan"), 1e300])
_ARGS = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "stream": _W, "correlation": _W, "External id": _W, "device": _W, "Seq": _W,
            "Input Dims": st.sampled_from([[[1, 2], []], "x", None]),
            "Input type": st.sampled_from([["float"], 3]),
            "labels": st.sampled_from(["GPU 0", None, "@@BAD@@"]),
            "name": st.sampled_from(["stream 7", None]),
            "Collective name": st.sampled_from(["allreduce", "bogus"]),
        },
    ),
    st.sampled_from([[1], "text", None]),
)
RAW_EVENT = st.one_of(
    st.fixed_dictionaries(
        {
            "ph": st.sampled_from(["X", "X", "X", "M", "i", "B"]),
            "cat": st.sampled_from(
                ["kernel", "cpu_op", "cuda_runtime", "user_annotation", "Kernel", "odd", None]
            ),
            "name": st.sampled_from(["k", "ProfilerStep#1", "nccl:all_reduce", "@@BAD@@", "process_labels",
                                     "thread_name", "cudaDeviceSynchronize", None]),
            "pid": st.sampled_from([0, 1, "GPU 0"]),
            "tid": st.sampled_from([7, "stream 9", 100]),
            "ts": st.one_of(st.floats(0, 1e4, allow_nan=False), _W),
            "dur": st.one_of(st.floats(0, 1e3, allow_nan=False), _W),
            "args": _ARGS,
        }
    ),
    st.sampled_from([5, "entry", [], None]),
)


def _outcome(path: Path, **kw):
    """Tables, ledger and metadata of a read -- or the one-line error it raised."""
    try:
        tr = read_trace(path, cache=False, **kw)
    except InputError as exc:
        return ("error", str(exc), exc.row, exc.field)
    return (tr.kernels, tr.steps, tr.host_syncs, tr.ops, tr.ledger.to_dict(), tr.metadata)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(RAW_EVENT, min_size=0, max_size=20), chunk=st.integers(1, 300), bare=st.booleans())
def test_adversarial_events_are_read_with_a_balanced_ledger_or_refused_in_one_line(events, chunk, bare):
    """Hostile values, invalid UTF-8 (where marked), non-object entries: a read or an InputError,
    the same whatever the size of the pieces the event array is decoded in."""
    doc = events if bare else {**info(), "traceEvents": events, "baseTimeNanoseconds": 5}
    data = json.dumps(doc).encode().replace(b"@@BAD@@", b"bad\xff\xfe")  # invalid UTF-8 where marked
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.json"
        path.write_bytes(data)
        whole = _outcome(path)
        with mock.patch.object(kineto, "_CHUNK_BYTES", chunk):
            pieces = _outcome(path)
    assert type(whole[0]) is type(pieces[0])
    if isinstance(whole[0], str):  # both refused, in one line naming the file
        assert whole == pieces and "\n" not in whole[1] and str(path) in whole[1]
        return
    for x, y in zip(whole[:4], pieces[:4], strict=True):
        pd.testing.assert_frame_equal(x, y)
    assert whole[4] == pieces[4] and whole[5] == pieces[5]
    led = whole[4]
    assert led["read"] == len(events) and led["read"] == led["kept"] + led["repaired"] + led["rejected"]


@pytest.mark.parametrize("cut", [0.9, 0.5, 0.1])
def test_gunzip_presized_buffer_is_exact_for_one_or_many_members(cut):
    text = json.dumps({"traceEvents": [kernel(float(i), 1.0) for i in range(300)]}).encode()
    k = int(len(text) * cut)
    for raw in (gzip.compress(text), gzip.compress(text[:k]) + gzip.compress(text[k:])):
        out = gunzip(raw, "x.json.gz")
        assert bytes(out) == text == gzip.decompress(raw)
    with pytest.raises(InputError, match="truncated"):  # the trailer of a cut file is arbitrary bytes
        whole = gzip.compress(text)
        gunzip(whole[: len(whole) // 2], "x.json.gz")


def test_the_ledger_counts_every_event_of_a_rank_file():
    # the DLRM rank 0 file holds 3,290 events; before the one-ledger refactor the ledger counted the
    # 1,896 that became table rows.  Now every event is a record: the ones no table is built from
    # are kept and counted by kind.
    path = sorted(DLRM.glob("*.json.gz"))[0]
    events = _raw_events(path)
    tr = read_trace(path, cache=False)
    led = tr.ledger
    assert len(events) == 3290 and led.read == 3290 and led.kept == 3290 and balanced(led)
    assert led.unused == {"metadata": 42, "flow": 786, "instant": 2, "complete:Trace": 1,
                          "complete:user_annotation": 31}
    phases = Counter(e.get("ph") for e in events)
    assert led.unused["metadata"] == phases["M"] and led.unused["flow"] == phases["s"] + phases["f"]
    assert all(f.rank == 0 and f.file == str(path) for f in led.flags)
    d = led.to_dict()
    assert d["unused"] == led.unused and d["flags"][0]["code"] == "external_id_from_launch"


@pytest.mark.parametrize("path", [NCCL, *PP], ids=lambda p: p.name)
def test_every_bundled_trace_ledger_reads_its_event_count(path):
    tr = read_trace(path, cache=False)
    assert tr.ledger.read == len(_raw_events(path)) and balanced(tr.ledger)
    assert set(tr.ledger.unused) >= {"metadata", "complete:Trace"}


def test_unused_events_are_counted_by_phase_and_category(tmp_path):
    events = [
        step(1, 0.0, 100.0),
        kernel(10.0, 5.0),
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
        {"ph": "s", "id": 1, "pid": 0, "tid": 1, "ts": 1.0, "cat": "ac2g", "name": "flow"},
        {"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 10.0, "cat": "ac2g", "name": "flow", "bp": "e"},
        {"ph": "i", "s": "t", "pid": 0, "tid": 1, "ts": 2.0, "name": "mark"},
        {"ph": "C", "pid": 0, "ts": 3.0, "name": "mem", "args": {"bytes": 5}},
        {"ph": "X", "cat": "python_function", "name": "f", "pid": 0, "tid": 1, "ts": 4.0, "dur": 1.0},
        {"name": "no phase"},
        [1, 2],  # not an object: rejected
    ]
    tr = read_trace(write_trace(tmp_path / "t.json", events, top=info()), cache=False)
    led = tr.ledger
    assert led.read == len(events) and led.rejected == 1 and balanced(led)
    assert led.unused == {"metadata": 1, "flow": 2, "instant": 1, "counter": 1,
                          "complete:python_function": 1, "no_phase": 1}
    assert led.kept == len(events) - 1  # unused events are kept (they are part of kept)


def test_input_is_opened_as_every_fleetlib_input(tmp_path):
    import bz2

    doc = json.dumps({"traceEvents": [step(1, 0.0, 10.0), kernel(1.0, 2.0)]}).encode()
    (tmp_path / "t.json.bz2").write_bytes(bz2.compress(doc))
    with pytest.raises(InputError, match="bzip2-compressed input is not read") as err:
        read_trace(tmp_path / "t.json.bz2", cache=False)
    assert err.value.file == str(tmp_path / "t.json.bz2")
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        read_trace(tmp_path / "folder.json", cache=False)
    # gzip is recognised by its bytes, whatever the name
    (tmp_path / "plain-name.json").write_bytes(gzip.compress(doc))
    assert len(read_trace(tmp_path / "plain-name.json", cache=False).kernels) == 1


def test_gunzip_is_bounded():
    raw = gzip.compress(b" " * 100_000)
    with pytest.raises(InputError, match="more than the 1,000-byte input limit"):
        gunzip(raw, "bomb.json.gz", max_bytes=1_000)
    assert len(gunzip(raw, "ok.json.gz", max_bytes=100_000)) == 100_000


def test_read_is_the_registry_protocol_with_a_window():
    from fleetlib.program.readers import READERS, kineto

    assert READERS["kineto"].read is kineto.read
    tables, ledger = kineto.read(PP)
    assert set(tables) == {"kernels", "steps", "host_syncs", "ops"} and ledger.read == 9575
    assert tables["steps"]["step"].tolist() == [551, 552, 551, 552]  # two ranks, two steps each
    # the PP traces write absolute unix time: a window selects the steps inside it
    ts = read_traces(PP, cache=False, progress=False)
    starts = kineto.utc(ts, ts.steps["start_us"])
    cut = starts.sort_values()[2]  # the start of step 552 on the earlier rank
    late = f"{cut.isoformat()}/2030-01-01T00:00Z"
    tables, ledger = kineto.read(PP, window=late)
    assert tables["steps"]["step"].tolist() == [552, 552] and "outside_window" in ledger.codes()
    assert set(tables["kernels"]["step"].dropna().unique()) == {552} and ledger.read == 9575
    everything, led = kineto.read(PP, window="2023-01-01T00:00Z/2024-01-01T00:00Z")
    assert "outside_window" not in led.codes() and len(everything["kernels"]) == len(ts.kernels)


def test_read_without_a_calendar_clock_selects_nothing(tmp_path):
    from fleetlib.program.readers import kineto

    path = write_trace(tmp_path / "t.json", [step(1, 0.0, 100.0), kernel(10.0, 5.0)], top=info())
    tables, ledger = kineto.read(path, window="2024-01-01T00:00Z/2024-01-02T00:00Z")
    assert len(tables["steps"]) == 1 and "window_not_applied" in ledger.codes()
    assert not kineto.has_calendar_clock(read_traces(path, cache=False, progress=False))
