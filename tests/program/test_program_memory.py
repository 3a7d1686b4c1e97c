"""Kineto [memory] events: read with a ledger, summed per step (peak, spike, churn).

Checked on hand-written trace files, so every value is known.
"""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from fleetlib.program import synth_triage_tables
from fleetlib.program.commands import run_program
from fleetlib.program.memory import memory_by_rank, memory_by_step, read_memory_events
from fleetlib.program.schema import MEMORY_COLUMNS

MIB = 2**20


def _event(ts, size, total, device_type=1):
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
            "ts": ts, "args": {"Total Reserved": 2 * total, "Total Allocated": total, "Bytes": size,
                               "Addr": 4096, "Device Type": device_type, "Device Id": 0}}


def _write(path, rank, events):
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 1, "args": {}}
    doc = {"distributedInfo": {"rank": rank}, "traceEvents": [kernel, *events]}
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)


@pytest.fixture
def traces(tmp_path):
    base = 1024 * MIB
    a = [_event(10, 100 * MIB, base + 100 * MIB), _event(20, 100 * MIB, base + 200 * MIB),
         _event(30, -100 * MIB, base + 100 * MIB), _event(40, 100 * MIB, base + 200 * MIB),
         _event(50, 8, base + 200 * MIB + 8, device_type=0),                 # a CPU allocation
         {"ph": "i", "name": "[memory]", "ts": 60, "args": {"Bytes": "lots"}},  # rejected
         _event(110, 500 * MIB, base + 700 * MIB)]
    _write(tmp_path / "r1.json.gz", 1, a)
    _write(tmp_path / "r0.json", 0, [_event(15, 64 * MIB, base + 64 * MIB)])
    return tmp_path


def test_events_are_read_and_ledgered(traces):
    table, ledger = read_memory_events([traces / "r1.json.gz", traces / "r0.json"])
    assert (ledger.read, ledger.kept, ledger.rejected) == (8, 7, 1)
    assert ledger.entries[0].field == "args.Bytes" and ledger.entries[0].row == 6
    assert table["rank"].tolist() == [0, 1, 1, 1, 1, 1, 1]                # rank from distributedInfo
    assert table.loc[1, "bytes"] == 100 * MIB and table.loc[5, "device_type"] == 0


def test_peak_spike_and_churn_per_step(traces):
    table, _ = read_memory_events([traces / "r1.json.gz", traces / "r0.json"])
    steps = pd.DataFrame({"rank": [1, 1, 0], "step": [1, 2, 1], "start_us": [0.0, 100.0, 0.0],
                          "end_us": [100.0, 200.0, 100.0]})
    per = memory_by_step(table, steps).set_index(["rank", "step"])
    base = 1024 * MIB
    # rank 1 step 1: three 100 MiB allocations of one size (churn 3), peak base + 200 MiB, from base
    assert per.loc[(1, 1)].tolist() == [4, base + 200 * MIB, 200 * MIB, 3, 300 * MIB]
    assert per.loc[(1, 2)].tolist() == [1, base + 700 * MIB, 500 * MIB, 0, 0]
    assert per.loc[(0, 1), "churn_count"] == 0                             # 64 MiB once
    assert memory_by_rank(per.reset_index())["1"] == {"peak_allocated_bytes": base + 700 * MIB,
                                                      "churn_count": 3, "churn_bytes": 300 * MIB, "steps": 2}


def test_synthetic_memory_tables_hold_their_pattern():
    spike = synth_triage_tables("large_memory_spikes")
    per = memory_by_step(spike["memory"], spike["steps"])
    assert (per["spike_bytes"] == (4096 + 64) * MIB).all()
    churn = memory_by_step(synth_triage_tables("repeated_large_allocations")["memory"], spike["steps"])
    assert (churn["churn_count"] == 4).all() and (churn["churn_bytes"] == 4 * 256 * MIB).all()


def test_cli_reports_memory_of_the_traces():
    from pathlib import Path

    dlrm = Path(__file__).resolve().parents[2] / "data" / "traces" / "dlrm_8rank"
    res = run_program([dlrm], memory=True, cache=False)
    assert res["memory"]["ledger"]["read"] == 0                           # the sample has no [memory] events
    assert set(res["not_observable"]) == {"large_memory_spikes", "repeated_large_allocations"}


# --- Nsight Systems: the CUDA_GPU_MEMORY_USAGE_EVENTS table --------------------------------------

MS = 1_000_000  # ns


def _nsys_rank(path, rank_pid, memory, tables=None):
    from fleetlib.program import write_nsys_sqlite

    kernels = [{"start": s * 10 * MS + MS // 2, "end": s * 10 * MS + 9 * MS, "name": "void gemm_kernel()",
                "stream": 7, "correlation": s + 1, "pid": rank_pid} for s in range(2)]
    nvtx = [{"start": s * 10 * MS, "end": (s + 1) * 10 * MS, "text": f"ProfilerStep#{s}", "pid": rank_pid,
             "tid": 1} for s in range(2)]
    return write_nsys_sqlite(path, kernels=kernels, nvtx=nvtx, memory=memory,
                             gpus=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], tables=tables)


@pytest.fixture
def nsys_exports(tmp_path):
    big, buf = 1024 * MIB, 256 * MIB
    r0 = [{"start": MS, "bytes": big, "op": 0, "address": 1, "pid": 10}]      # held across both steps
    for s in range(2):                                                         # three 256 MiB per step
        for k in range(3):
            t = s * 10 * MS + (2 + 2 * k) * MS
            r0 += [{"start": t, "bytes": buf, "op": 0, "address": 2, "pid": 10},
                   {"start": t + MS, "bytes": buf, "op": 1, "address": 2, "pid": 10}]
    r0.append({"start": 3 * MS, "bytes": 8, "op": 5, "address": 3, "pid": 10})     # unknown operation
    r1 = [{"start": MS, "bytes": 2 * big, "op": 0, "address": 1, "pid": 20},
          {"start": 2 * MS, "bytes": buf, "op": 0, "address": 9, "pid": 20, "mem_kind": 1},  # pinned host
          {"start": 3 * MS, "bytes": buf, "op": 0, "address": 9, "pid": 20, "global_pid": None}]
    return [_nsys_rank(tmp_path / "rank0.sqlite", 10, r0), _nsys_rank(tmp_path / "rank1.sqlite", 20, r1)]


def test_nsys_memory_table_is_read_and_ledgered(nsys_exports):
    table, ledger = read_memory_events(nsys_exports)
    assert (ledger.read, ledger.kept, ledger.rejected) == (17, 15, 2)
    rejected = {(e.file.rsplit("/", 1)[-1], e.row, e.field) for e in ledger.entries}
    assert rejected == {("rank0.sqlite", 14, "CUDA_GPU_MEMORY_USAGE_EVENTS.memoryOperationType"),
                        ("rank1.sqlite", 3, "CUDA_GPU_MEMORY_USAGE_EVENTS.globalPid")}
    r0 = table[table["rank"] == 0]
    assert r0["ts_us"].tolist()[:3] == [1000.0, 2000.0, 3000.0]                # the kernel table's clock
    assert r0["bytes"].tolist()[1:3] == [256 * MIB, -256 * MIB]                # a free is negative
    assert table.loc[table["rank"] == 1, "device_type"].tolist() == [1.0, 0.0]


def test_nsys_memory_peak_and_churn_by_hand(nsys_exports):
    res = run_program(nsys_exports, memory=True, cache=False)
    # by hand: rank 0 holds 1 GiB and at most one 256 MiB buffer at a time; three 256 MiB
    # allocations in each of its two steps.  Rank 1: 2 GiB once (the pinned host buffer not counted).
    assert res["memory"]["ranks"]["0"] == {"peak_allocated_bytes": float(1024 * MIB + 256 * MIB),
                                           "churn_count": 6, "churn_bytes": float(6 * 256 * MIB), "steps": 2}
    assert res["memory"]["ranks"]["1"] == {"peak_allocated_bytes": float(2048 * MIB), "churn_count": 0,
                                           "churn_bytes": 0.0, "steps": 1}
    assert res["memory"]["ledger"]["rejected"] == 2
    fired = {f["pattern"]: f for f in res["findings"]}
    assert {"large_memory_spikes", "repeated_large_allocations"} <= set(fired)
    assert fired["repeated_large_allocations"]["ranks"] == [0]
    assert not {"large_memory_spikes", "repeated_large_allocations"} & set(res["not_observable"])


def test_nsys_export_without_the_table_adds_nothing(tmp_path):
    from fleetlib.program import NSYS_SCHEMA

    without = tuple(t for t in NSYS_SCHEMA if t != "CUDA_GPU_MEMORY_USAGE_EVENTS")
    path = _nsys_rank(tmp_path / "rank0.sqlite", 10, [], tables=without)
    table, ledger = read_memory_events([path])
    assert table.empty and ledger.read == 0 and list(table.columns) == list(MEMORY_COLUMNS)
