"""Communication found by metadata first, then by configurable name patterns (issue 13 item 5),
and the per-trace validity rules of item 7 (ROCm same-stream overlap clipped, links per rank).

Expected values are written down from the events each test lays down.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetlib.cli import main as cli_main
from fleetlib.program.breakdown import step_partition
from fleetlib.program.classify import DEFAULT_COMM_PATTERNS, Classifier, comm_rule_metadata
from fleetlib.program.commands import run_program
from fleetlib.program.readers.kineto import read_traces
from fleetlib.program.readers.nsys import read_nsys
from fleetlib.program.synth import MOE_KERNELS, synth_moe_traces, write_nsys_sqlite
from fleetlib.quality import DomainError

PARTS = ["compute", "exposed_comm", "peer_wait", "exposed_memcpy", "host_dispatch", "idle"]


def _kineto(
    path: Path,
    kernels: list[dict],
    *,
    runtime_prefix: str = "cuda",
    rank: int = 0,
    steps: tuple[tuple[int, int], ...] = ((0, 1000),),
    extra: list[dict] | None = None,
) -> Path:
    """A Kineto trace: one ProfilerStep per (start, end), each kernel launched 5 µs before it starts."""
    events = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": f"ProfilerStep#{i}",
            "pid": 1,
            "tid": 1,
            "ts": a,
            "dur": b - a,
        }
        for i, (a, b) in enumerate(steps)
    ]
    for corr, k in enumerate(kernels, start=1):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": f"{runtime_prefix}LaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": k["ts"] - 5,
                "dur": 2,
                "args": {"correlation": corr},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": k["name"],
                "pid": 0,
                "tid": k.get("stream", 7),
                "ts": k["ts"],
                "dur": k["dur"],
                "args": {"device": 0, "stream": k.get("stream", 7), "correlation": corr, **k.get("args", {})},
            }
        )
    events.extend(extra or [])
    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 1},
        "traceEvents": events,
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }
    path.write_text(json.dumps(doc))
    return path


def _read(path: Path, **options):
    return read_traces([path], cache=False, progress=False, **options)


def test_metadata_wins_over_the_name_both_ways(tmp_path):
    kernels = [
        # the name says compute, the args say all_to_all: communication, an all-to-all
        {
            "name": "void fused_moe_permute_kernel<bf16>(int*)",
            "ts": 100,
            "dur": 50,
            "args": {"Collective name": "all_to_all", "Process Group Name": "ep"},
        },
        # the name says all-reduce (a NCCL kernel), the args say all_to_all: an all-to-all
        {
            "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            "ts": 200,
            "dur": 50,
            "stream": 13,
            "args": {"Collective name": "all_to_all"},
        },
        # the name alone: NCCL all-reduce by its name rule
        {"name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ts": 300, "dur": 50, "stream": 13},
        # plain compute
        {"name": "sm90_xmma_gemm_bf16", "ts": 400, "dur": 50},
    ]
    k = _read(_kineto(tmp_path / "t.json", kernels)).kernels.sort_values("start_us")
    assert k["kind"].astype(str).tolist() == ["comm", "comm", "comm", "compute"]
    assert k["collective"].astype(str).tolist() == ["alltoall", "alltoall", "allreduce", "none"]
    assert k["collective_source"].astype(str).tolist() == ["args", "args", "name", "none"]
    meta = comm_rule_metadata("Collective name")
    name_rule = "name:" + DEFAULT_COMM_PATTERNS[0]
    assert k["comm_rule"].astype(str).tolist() == [meta, meta, name_rule, ""]
    assert k["process_group"].astype(str).tolist()[0] == "ep"


def test_nccl_nvtx_range_wins_over_the_name_in_nsys(tmp_path):
    us = 1000
    runtime = [
        {
            "start": t * us,
            "end": (t + 2) * us,
            "name": "cudaLaunchKernel_v7000",
            "correlation": c,
            "pid": 9,
            "tid": 9,
        }
        for c, t in ((1, 95), (2, 195), (3, 295))
    ]
    nvtx = [
        {"start": 90 * us, "end": 99 * us, "text": "ncclAllGather", "pid": 9, "tid": 9, "domain": "NCCL"},
        {
            "start": 190 * us,
            "end": 199 * us,
            "text": "ncclReduceScatter",
            "pid": 9,
            "tid": 9,
            "domain": "NCCL",
        },
        {"start": 0, "end": 500 * us, "text": "ProfilerStep#3", "pid": 9, "tid": 9},
    ]
    kernels = [
        {
            "start": 100 * us,
            "end": 150 * us,
            "name": "copy_and_pack_kernel",
            "stream": 7,
            "correlation": 1,
            "pid": 9,
        },
        {
            "start": 200 * us,
            "end": 250 * us,
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "stream": 13,
            "correlation": 2,
            "pid": 9,
        },
        {
            "start": 300 * us,
            "end": 350 * us,
            "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "stream": 13,
            "correlation": 3,
            "pid": 9,
        },
    ]
    path = write_nsys_sqlite(tmp_path / "m.sqlite", kernels=kernels, runtime=runtime, nvtx=nvtx)
    k = read_nsys(path).kernels
    assert k["kind"].astype(str).tolist() == ["comm", "comm", "comm"]
    assert k["collective"].astype(str).tolist() == ["allgather", "reducescatter", "allreduce"]
    assert k["comm_rule"].astype(str).tolist() == [
        "metadata:nvtx:NCCL",
        "metadata:nvtx:NCCL",
        "name:" + DEFAULT_COMM_PATTERNS[0],
    ]


@pytest.mark.parametrize(
    "name",
    [
        "ncclDevKernel_AllGather_RING_LL",
        "ncclSymkDevKernel_AllReduce_LDMC",
        "ncclKernel_SendRecv",
        "void rccl_main_kernel<0>(ncclDevComm*)",
        "mscclKernel_Sum_float",
        "void deep_ep::intranode::notify_dispatch<8>(int const*)",
        "void deep_ep::internode::cached_notify(int)",
        "void deep_ep::internode_ll::combine<true>(void*)",
        "nvshmemi_alltoall_kernel",
        "void vllm::cross_device_reduce_1stage<half, 8>(RankData*)",
        "custom_all_to_all_bf16",
        "one_shot_all_reduce_kernel",
    ],
)
def test_default_patterns_cover_the_libraries(name):
    c = Classifier()
    assert c.kinds([name], ["kernel"]).tolist() == ["comm"]
    assert c.comm_rules([name])[0].startswith("name:")


@pytest.mark.parametrize(
    "name",
    [
        "hipLaunchKernel_gemm",
        "void at::native::reduce_kernel<512>(float*)",
        "sm90_xmma_gemm_bf16",
        "ampere_sgemm_128x64_nn",
    ],
)
def test_default_patterns_leave_compute_alone(name):
    assert Classifier().kinds([name], ["kernel"]).tolist() == ["compute"]
    assert Classifier().comm_rules([name]).tolist() == [""]


def test_comm_rule_needs_a_field():
    with pytest.raises(DomainError):
        comm_rule_metadata("")


@pytest.mark.parametrize("output", ["kineto", "nsys"])
def test_deepep_moe_trace_shows_overlapped_and_exposed_comm(tmp_path, output):
    syn = synth_moe_traces(tmp_path, ranks=2, steps=3, output=output)
    traces = (
        read_traces(syn.paths, cache=False, progress=False) if output == "kineto" else read_nsys(syn.paths)
    )
    k = traces.kernels
    comm = k.loc[k["kind"] == "comm"]
    deepep = {MOE_KERNELS[r] for r in ("notify_dispatch", "dispatch", "combine")}
    assert set(comm["name"].astype(str)) == deepep
    assert set(comm["comm_rule"].astype(str)) == {"name:deep_?ep::"}
    assert set(comm["collective"].astype(str)) == {"alltoall"}
    p = step_partition(k, traces.steps)
    truth = syn.truth.sort_values(["rank", "step"]).reset_index(drop=True)
    for col in ("compute", "exposed_comm", "idle", "step_wall_us", "overlapped_comm_us"):
        assert p[col].tolist() == truth[col].tolist(), col
    # 130 µs of DeepEP communication per step: 70 hidden under compute, 60 exposed
    assert p["overlapped_comm_us"].unique().tolist() == [70.0] and p["exposed_comm"].unique().tolist() == [
        60.0
    ]
    assert (p[PARTS].sum(axis=1) == p["step_wall_us"]).all()


def test_without_the_deepep_pattern_the_moe_step_looks_like_compute(tmp_path):
    syn = synth_moe_traces(tmp_path, ranks=1, steps=1)
    no_deepep = Classifier(comm_patterns=tuple(p for p in DEFAULT_COMM_PATTERNS if "deep" not in p))
    k = read_traces(syn.paths, cache=False, progress=False, classifier=no_deepep).kernels
    p = step_partition(k, read_traces(syn.paths, cache=False, progress=False).steps)
    assert p["exposed_comm"].tolist() == [0.0] and p["compute"].tolist() == [330.0]


def test_cli_comm_pattern_adds_a_pattern(tmp_path, capsys):
    path = _kineto(
        tmp_path / "rank-0.json",
        [
            {"name": "gemm_kernel", "ts": 100, "dur": 100},
            {"name": "my_house_a2a_kernel", "ts": 200, "dur": 300, "stream": 20},
        ],
    )
    plain = run_program([path], cache=False)
    assert plain["ranks"]["0"]["partition_us"]["exposed_comm"] == 0.0
    added = run_program([path], cache=False, comm_patterns=(r"house_a2a",))
    assert added["ranks"]["0"]["partition_us"]["exposed_comm"] == 300.0
    rc = cli_main(["program", str(path), "--no-cache", "--json", "--comm-pattern", "house_a2a"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["ranks"]["0"]["partition_us"]["exposed_comm"] == 300.0


def test_cli_reads_an_nsys_export(tmp_path, capsys):
    syn = synth_moe_traces(tmp_path, ranks=2, steps=2, output="nsys")
    rc = cli_main(["program", *map(str, syn.paths), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and sorted(out["ranks"]) == ["0", "1"]
    assert out["ranks"]["0"]["partition_us"]["exposed_comm"] == 120.0  # 2 steps x 60 µs
    assert out["ranks"]["0"]["overlapped_comm_us"] == 140.0


def test_rocm_same_stream_overlap_is_clipped_and_counted(tmp_path):
    kernels = [
        {"name": "Cijk_Ailk_Bljk_HHS_BH_MT128x128", "ts": 100, "dur": 100},
        {"name": "Cijk_Ailk_Bljk_HHS_BH_MT64x64", "ts": 180, "dur": 100},  # 20 µs inside the first
        {"name": "elementwise_kernel", "ts": 300, "dur": 50},
    ]
    rocm = _read(_kineto(tmp_path / "rocm.json", kernels, runtime_prefix="hip"))
    assert rocm.metadata[0]["platform"] == "rocm"
    k = rocm.kernels.sort_values("start_us")
    assert k["end_us"].tolist() == [180.0, 280.0, 350.0] and k["dur_us"].tolist() == [80.0, 100.0, 50.0]
    (entry,) = [e for e in rocm.ledger.entries if "rocm_stream_overlap_clipped" in e.reason]
    assert entry.action == "repaired" and entry.field == "dur" and "20 µs" in entry.reason
    assert "stream_overlap_clipped" in rocm.ledger.codes()
    p = step_partition(rocm.kernels, rocm.steps)
    assert p["compute"].tolist() == [230.0]  # 100..280 and 300..350, no second counted twice
    # the same events as a CUDA trace are kept as recorded and flagged
    cuda = _read(_kineto(tmp_path / "cuda.json", kernels))
    assert cuda.kernels.sort_values("start_us")["end_us"].tolist() == [200.0, 280.0, 350.0]
    assert "stream_overlap" in cuda.ledger.codes() and cuda.ledger.repaired == 0


def test_links_stay_within_their_rank_when_ranks_are_merged(tmp_path):
    # both ranks use correlation ids 1 and 2, with different launch times
    paths = []
    for r, (a, b) in enumerate(((100, 300), (150, 500))):
        kernels = [{"name": "gemm", "ts": a, "dur": 20}, {"name": "gemm", "ts": b, "dur": 20}]
        paths.append(_kineto(tmp_path / f"rank-{r}.json", kernels, rank=r))
    t = read_traces(paths, cache=False, progress=False)
    k = t.kernels.sort_values(["rank", "start_us"])
    assert k["correlation"].tolist() == [1, 2, 1, 2]
    assert (k["launch_us"] == k["start_us"] - 5).all()
