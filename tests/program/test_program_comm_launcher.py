"""Communication found by what launched it (issue 28 item 1): metadata first, then the CPU op,
annotation or Python function that launched the kernel, then the name patterns last.

Expected values come from the generator's layout (:func:`fleetlib.program.synth.synth_moe_traces`),
from events each test lays down, or from the raw bundled files read by a plain ``json`` script here.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from fleetlib.cli import main as cli_main
from fleetlib.program.breakdown import step_partition
from fleetlib.program.classify import classified_by, collective_from_launcher, comm_rule_launcher
from fleetlib.program.readers.kineto import read_traces
from fleetlib.program.readers.nsys import read_nsys
from fleetlib.program.synth import MOE_UNLISTED_KERNELS, synth_moe_traces, write_nsys_sqlite
from fleetlib.quality import DomainError

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
XFER = {MOE_UNLISTED_KERNELS[r] for r in ("notify_dispatch", "dispatch", "combine")}


def _read(paths, output):
    return read_traces(paths, cache=False, progress=False) if output == "kineto" else read_nsys(paths)


@pytest.mark.parametrize("output", ["kineto", "nsys"])
def test_unlisted_moe_kernels_are_communication_by_their_launcher(tmp_path, output):
    syn = synth_moe_traces(tmp_path, ranks=2, steps=2, output=output, names="unlisted")
    traces = _read(syn.paths, output)
    k = traces.kernels
    comm = k.loc[k["kind"] == "comm"]
    assert set(comm["name"].astype(str)) == XFER
    assert set(comm["classified_by"].astype(str)) == {"launcher"}
    by_rule = comm.groupby(comm["comm_rule"].astype(str), observed=True).size().to_dict()
    assert by_rule == {"launcher:dispatch(F)": 2 * 2 * 2, "launcher:combine(B)": 2 * 2}
    assert set(comm["collective"].astype(str)) == {"alltoall"}
    assert set(comm["collective_source"].astype(str)) == {"host_annotation"}
    # the reduction kernel of the next layer says "reduce" but aten::sum launched it: compute
    reduce = k.loc[k["name"].astype(str) == MOE_UNLISTED_KERNELS["next_layer"]]
    assert len(reduce) == 4 and set(reduce["kind"].astype(str)) == {"compute"}
    assert set(reduce["classified_by"].astype(str)) == {"none"}
    p = step_partition(k, traces.steps)
    truth = syn.truth.sort_values(["rank", "step"]).reset_index(drop=True)
    for col in ("compute", "exposed_comm", "idle", "step_wall_us", "overlapped_comm_us"):
        assert p[col].tolist() == truth[col].tolist(), col
    assert "comm_by_name_only" not in traces.ledger.codes()


@pytest.mark.parametrize("output", ["kineto", "nsys"])
def test_kernels_found_by_name_only_are_flagged(tmp_path, output):
    syn = synth_moe_traces(tmp_path, ranks=1, steps=2, output=output)  # DeepEP names, bare launches
    traces = _read(syn.paths, output)
    comm = traces.kernels.loc[traces.kernels["kind"] == "comm"]
    assert len(comm) == 6 and set(comm["classified_by"].astype(str)) == {"name"}
    (flag,) = [f for f in traces.ledger.flags if f.code == "comm_by_name_only"]
    assert flag.message.startswith("6 communication kernels (260 µs)")  # 2 steps x (10 + 60 + 60) µs


def _trace(path: Path, spans: list[tuple[str, str, int, int]], kernels: list[dict]) -> Path:
    """Spans (category, name, ts, end) on thread 1; each kernel launched at its ``launch`` time."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1,
               "ts": 0, "dur": 1000}]
    for ext, (cat, name, a, b) in enumerate(spans, start=100):
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": a, "dur": b - a,
                       "args": {"External id": ext}})
    for corr, k in enumerate(kernels, start=1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": k["launch"], "dur": 1, "args": {"correlation": corr}})
        args = {"device": 0, "stream": 7, "correlation": corr, **k.get("args", {})}
        events.append({"ph": "X", "cat": "kernel", "name": k["name"], "pid": 0, "tid": 7, "ts": k["ts"],
                       "dur": 10, "args": args})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_the_rules_apply_in_order_metadata_launcher_name(tmp_path):
    spans = [
        ("user_annotation", "dispatch(F)", 10, 60),
        ("cpu_op", "acme::moe::permute", 12, 20),      # a custom op inside the annotation: its work
        ("cpu_op", "aten::index_select", 30, 40),      # PyTorch's own operator inside it: compute
        ("python_function", "moe/layer.py(88): combine", 100, 120),
        ("python_function", "torch/utils/_python_dispatch.py(40): __torch_dispatch__", 200, 220),
        ("cpu_op", "aten::sum", 300, 320),
    ]
    kernels = [
        {"name": "acme_permute_kernel", "launch": 15, "ts": 400},
        {"name": "indexSelectLargeIndex", "launch": 35, "ts": 420},
        {"name": "acme_send_tokens", "launch": 50, "ts": 440},   # directly under dispatch(F)
        {"name": "acme_gather_tokens", "launch": 110, "ts": 460},
        {"name": "elementwise_kernel", "launch": 210, "ts": 480},
        {"name": "void at::native::reduce_kernel<512, 1>(float*)", "launch": 310, "ts": 500},
        {"name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "launch": 600, "ts": 520},
        {"name": "acme_kernel", "launch": 55, "ts": 540,
         "args": {"Collective name": "allgather", "Process Group Name": "0"}},
    ]
    k = read_traces([_trace(tmp_path / "rank-0.json", spans, kernels)], cache=False, progress=False).kernels
    cols = [k[c].astype(str) for c in ("name", "kind", "classified_by", "comm_rule")]
    got = {n: (kind, by, rule) for n, kind, by, rule in zip(*cols, strict=True)}
    assert got["acme_permute_kernel"] == ("comm", "launcher", "launcher:dispatch(F)")
    assert got["indexSelectLargeIndex"] == ("compute", "none", "")
    assert got["acme_send_tokens"] == ("comm", "launcher", "launcher:dispatch(F)")
    assert got["acme_gather_tokens"] == ("comm", "launcher", "launcher:moe/layer.py(88): combine")
    assert got["elementwise_kernel"] == ("compute", "none", "")
    assert got["void at::native::reduce_kernel<512, 1>(float*)"] == ("compute", "none", "")
    assert got["ncclDevKernel_AllReduce_Sum_f32_RING_LL"][:2] == ("comm", "name")
    assert got["acme_kernel"] == ("comm", "metadata", "metadata:Collective name")
    coll = dict(zip(k["name"].astype(str), k["collective"].astype(str), strict=True))
    assert coll["acme_kernel"] == "allgather" and coll["acme_send_tokens"] == "alltoall"



def test_nsys_launcher_rule_spares_pytorch_operators_inside_the_range(tmp_path):
    """Under ``emit_nvtx`` each PyTorch operator is an ``aten::`` range: its kernels stay compute."""
    us = 1000
    nvtx = [{"start": 10 * us, "end": 60 * us, "text": "dispatch(F)", "pid": 1, "tid": 1},
            {"start": 30 * us, "end": 40 * us, "text": "aten::index_select, seq = 4", "pid": 1, "tid": 1},
            {"start": 100 * us, "end": 120 * us, "text": "aten::sum", "pid": 1, "tid": 1},
            {"start": 100 * us, "end": 130 * us, "text": "combine(B)", "pid": 1, "tid": 1}]
    launches = {"acme_send_tokens": 50, "indexSelectLargeIndex": 35, "acme_gather_tokens": 110}
    kernels, runtime = [], []
    for corr, (name, at) in enumerate(launches.items(), start=1):
        kernels.append({"start": (400 + 20 * corr) * us, "end": (410 + 20 * corr) * us, "name": name,
                        "stream": 7, "correlation": corr, "pid": 1})
        runtime.append({"start": at * us, "end": (at + 1) * us, "name": "cudaLaunchKernel_v7000",
                        "correlation": corr, "pid": 1, "tid": 1})
    path = write_nsys_sqlite(tmp_path / "rank0.sqlite", kernels=kernels, runtime=runtime, nvtx=nvtx,
                             gpus=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}])
    k = read_nsys([path]).kernels
    got = {n: (kind, by) for n, kind, by in zip(k["name"].astype(str), k["kind"].astype(str),
                                               k["classified_by"].astype(str), strict=True)}
    assert got["acme_send_tokens"] == ("comm", "launcher")
    assert got["indexSelectLargeIndex"] == ("compute", "none")   # aten:: op nested in dispatch(F)
    # aten::sum starts with combine(B) but is the inner range (it ends first): its work, compute
    assert got["acme_gather_tokens"] == ("compute", "none")

def test_launcher_names_are_read_as_words():
    names = ["dispatch(F)", "combine(B)", "deep_ep/buffer.py(512): dispatch", "moe_dispatch",
             "c10d::allreduce_", "nccl:_all_gather_base", "c10d::reduce_scatter_tensor_coalesced_",
             "c10d::broadcast_", "nccl:send 0->1", "## alltoall_fwd_single ##",
             "aten::sum", "__torch_dispatch__", "MoEDispatcher.forward", "aten::broadcast_tensors",
             "aten::combinations", "record_param_comms", "ProfilerStep#3", None]
    assert collective_from_launcher(names).tolist() == [
        "alltoall", "alltoall", "alltoall", "alltoall", "allreduce", "allgather", "reducescatter",
        "broadcast", "sendrecv", "alltoall", "none", "none", "none", "none", "none", "none", "none", "none"]
    assert classified_by(["metadata:Collective name", "launcher:x", "name:nccl", "", None]).tolist() == [
        "metadata", "launcher", "name", "none", "none"]
    with pytest.raises(DomainError):
        comm_rule_launcher("")


def _launched_in_collective_annotation(path: Path) -> int:
    """Kernels whose launch call lies in an ``nccl:*`` annotation on its thread (raw JSON, no fleetlib)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ann = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in ev
           if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("nccl:")]
    calls = {e["args"]["correlation"]: (e["tid"], e["ts"]) for e in ev
             if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    n = 0
    for e in ev:
        if e.get("cat") == "kernel" and "Collective name" not in e.get("args", {}):
            call = calls.get(e["args"].get("correlation"))
            n += call is not None and any(t == call[0] and a <= call[1] <= b for t, a, b in ann)
    return n


@pytest.mark.parametrize(("name", "expected"), [
    ("hta_nccl_allreduce_rank-0.json.gz", {"metadata": 21, "launcher": 0, "name": 0}),
    ("hta_pp_pair_rank-0.json.gz", {"metadata": 0, "launcher": 10, "name": 0}),
    ("hta_pp_pair_rank-1.json.gz", {"metadata": 0, "launcher": 10, "name": 0}),
])
def test_bundled_traces_are_classified_by_metadata_or_launcher(name, expected):
    k = read_traces([TRACES / name], cache=False, progress=False).kernels
    by = k.loc[k["kind"] == "comm", "classified_by"].astype(str)
    assert {c: int((by == c).sum()) for c in ("metadata", "launcher", "name")} == expected
    assert expected["launcher"] == _launched_in_collective_annotation(TRACES / name)
    assert np.all(k.loc[k["kind"] != "comm", "classified_by"].astype(str) == "none")


def test_cli_counts_communication_by_rule(tmp_path, capsys):
    syn = synth_moe_traces(tmp_path, ranks=1, steps=2, names="unlisted")
    assert cli_main(["program", *map(str, syn.paths), "--no-cache", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["communication"] == {"kernels": 6, "classified_by": {"metadata": 0, "launcher": 6, "name": 0}}
    assert out["ranks"]["0"]["partition_us"]["exposed_comm"] == 120.0  # 2 steps x 60 µs, as the truth says
    assert cli_main(["program", *map(str, syn.paths), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "communication kernels: 6 (0 by metadata, 6 by launcher, 0 by name only)" in text
