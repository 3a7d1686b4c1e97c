"""Acceptance on the bundled 8-rank DLRM step (facebookresearch/param, MIT): waits, stragglers, partition.

Independent figures (field notes, step_traces.md section 8.3, read from the raw JSON): the first
all-to-all ends within a few microseconds on all eight ranks (one host, one clock), rank 7's kernel
lasts 10 us and rank 1's 7,635 us, so rank 7 arrived last and rank 1 waited 7,625 us for it.  Each
rank runs five all-to-alls (NCCL SendRecv kernels launched by ``nccl:all_to_all``) and three
AllReduces in its one ``ProfilerStep#10``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fleetlib.program.breakdown import PARTITION_PARTS, step_partition
from fleetlib.program.collectives import (
    collective_audit,
    collective_waits,
    expected_collectives,
    match_collectives,
    program_summary,
    straggler_report,
)
from fleetlib.program.readers.kineto import read_traces

DLRM = Path(__file__).resolve().parents[2] / "data" / "traces" / "dlrm_8rank"

#: (duration of the first all-to-all kernel, ProfilerStep#10 duration) per rank, microseconds, from
#: the raw trace events.
RAW = {0: (2146, 14455), 1: (7635, 19901), 2: (518, 13017), 3: (6132, 19313), 4: (4882, 17979),
       5: (4679, 17797), 6: (514, 13091), 7: (10, 12509)}


@pytest.fixture(scope="module")
def dlrm():
    traces = read_traces(DLRM, cache=False, progress=False)
    matched = match_collectives(traces.kernels)
    waits = collective_waits(matched)
    part = step_partition(traces.kernels, traces.steps,
                          collective_wait=waits[["kernel_index", "peer_wait_us"]])
    return traces, matched, waits, part


def first_alltoall(waits):
    a2a = waits[waits["collective"] == "alltoall"]
    return a2a[a2a["instance"] == a2a["instance"].min()].set_index("rank")


def test_first_alltoall_rank7_arrives_last_and_rank1_waits_longest(dlrm):
    _, matched, waits, _ = dlrm
    assert matched.attrs["matched_by"] == "occurrence"  # the trace has no process-group sequence numbers
    first = first_alltoall(waits)
    assert sorted(first.index) == list(range(8))
    assert first["dur_us"].to_dict() == {r: float(d) for r, (d, _) in RAW.items()}
    assert (first["last_arriver"] == 7).all()
    assert first.loc[7, "peer_wait_us"] == 0.0
    assert first["peer_wait_us"].idxmax() == 1
    assert first.loc[1, "peer_wait_us"] == RAW[1][0] - RAW[7][0] == 7625.0  # ~7.6 ms
    # The premise of the clock-free split: the ranks leave the collective together.
    assert np.ptp(first["end_us"]) <= 3.0


def test_every_partition_sums_to_its_step_wall_time(dlrm):
    part = dlrm[3]
    assert len(part) == 8 and (part["step"] == 10).all()
    np.testing.assert_allclose(part[list(PARTITION_PARTS)].sum(axis=1), part["step_wall_us"],
                               rtol=0, atol=1e-9)
    assert part.set_index("rank")["step_wall_us"].to_dict() == {r: float(w) for r, (_, w) in RAW.items()}
    assert (part[list(PARTITION_PARTS)] >= 0).all().all()
    # rank 1, the longest waiter, spends the largest share of its step waiting for peers
    share = part.set_index("rank").eval("peer_wait / step_wall_us")
    assert share.idxmax() == 1
    # every rank's peer wait includes its wait at the first all-to-all (no compute overlaps it there)
    first = first_alltoall(dlrm[2])
    assert (part.set_index("rank")["peer_wait"] >= first["peer_wait_us"] - 1e-9).all()
    # the reader gives launch times, so dispatch is not approximated on most ranks
    assert (part["dispatch_rule"] == "launch_us").sum() >= 6


def test_stragglers_and_collective_audit(dlrm):
    traces, _, waits, part = dlrm
    rep = straggler_report(waits, part).set_index("rank")
    assert rep["collectives"].tolist() == [8] * 8
    assert rep["arrived_last_share"].idxmax() == 7
    assert rep.loc[7, "wait_caused_us"] == rep["wait_caused_us"].max()
    assert rep["arrived_last"].sum() == 8  # one last arriver per instance
    audit = collective_audit(traces.kernels)
    counts = audit.pivot_table(index="rank", columns="collective", values="count", aggfunc="sum",
                               observed=True)
    assert counts["alltoall"].tolist() == [5] * 8 and counts["allreduce"].tolist() == [3] * 8
    diff = expected_collectives(traces.kernels, {"alltoall": 5, "allreduce": 3})
    assert (diff["status"] == "ok").all() and len(diff) == 16


def test_program_summary_on_dlrm_is_json_ready(dlrm):
    traces = dlrm[0]
    out = json.loads(json.dumps(program_summary(traces.kernels, traces.steps)))
    first = next(f for f in out["collectives"]["first"] if f["collective"] == "alltoall")
    assert (first["last_arriver"], first["longest_waiter"], first["longest_wait_us"]) == (7, 1, 7625.0)
    for r, entry in out["ranks"].items():
        assert sum(entry["partition_us"].values()) == pytest.approx(entry["step_wall_us"], abs=1e-6)
        assert entry["step_wall_us"] == RAW[int(r)][1]
