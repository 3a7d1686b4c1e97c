"""Synthetic step traces (fleetlib.program.synth): the reader and the analysis recover the injected truth.

The generator adds up, while it lays the events down, what each rank spent every step on; those sums
are compared here with what :func:`read_traces` + :func:`step_partition` (with peer waits from the
matched collectives) + :func:`straggler_report` measure from the written files.  Times are whole
microseconds, so the comparison is exact.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.program.breakdown import PARTITION_PARTS, step_partition
from fleetlib.program.collectives import collective_waits, match_collectives, straggler_report
from fleetlib.program.flops import PEAK_RATES
from fleetlib.program.readers.kineto import read_traces
from fleetlib.program.roofline import kernel_roofline, op_flops_bytes, roofline_placement
from fleetlib.program.synth import SYNTH_PARTS, synth_step_traces
from fleetlib.quality import DomainError


def _measure(folder: Path):
    traces = read_traces(folder, cache=False, progress=False)
    matched = match_collectives(traces.kernels)
    waits = collective_waits(matched)
    part = step_partition(traces.kernels, traces.steps,
                          collective_wait=waits[["kernel_index", "peer_wait_us"]])
    return traces, matched, waits, part


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synth")
    synth = synth_step_traces(folder)
    return synth, *_measure(folder)


def test_partition_equals_the_injected_truth(default):
    synth, traces, matched, _waits, part = default
    assert SYNTH_PARTS == PARTITION_PARTS
    assert matched.attrs["matched_by"] == "seq"            # the generator writes process group and Seq
    assert not traces.ledger.rejected and not traces.ledger.repaired
    cols = ["rank", "step", *PARTITION_PARTS, "step_wall_us"]
    pd.testing.assert_frame_equal(part[cols], synth.partition[cols], check_dtype=False)
    assert (part["dispatch_rule"] == "launch_us").all()   # dispatch from launch times, not the gap rule


def test_straggler_is_found(default):
    synth, _traces, _matched, waits, part = default
    report = straggler_report(waits, part).set_index("rank")
    s = synth.straggler_rank
    assert report.loc[s, "arrived_last_share"] == 1.0
    assert (report.drop(index=s)["arrived_last"] == 0).all()
    assert report["straggler"].tolist() == [r == s for r in report.index]
    # own work = wall - peer wait; the straggler's median over the best rank's, by hand from the truth
    own = synth.partition.assign(own=synth.partition["step_wall_us"] - synth.partition["peer_wait"])
    med = own.groupby("rank")["own"].median()
    assert report.loc[s, "relative_score"] == pytest.approx(med.min() / med.loc[s])
    per_step = waits.drop_duplicates("instance").set_index("step")["last_arriver"]
    assert per_step.to_dict() == synth.last_arriver.set_index("step")["rank"].to_dict()


def test_gemm_roofline_from_recorded_shapes(default):
    synth, traces, *_ = default
    m, k, n = synth.params["gemm_mnk"]
    ops = op_flops_bytes(traces.ops)
    assert set(ops.loc[ops["flops"].notna(), "name"]) == {"aten::mm"}
    assert ops.attrs["unknown_ops"] == {"no shape rule for this op": int((ops["name"] != "aten::mm").sum())}
    table = kernel_roofline(traces.kernels, ops)
    gemm = table[table["op_name"] == "aten::mm"].sort_values(["rank", "step"])
    assert (gemm["flops"] == 2.0 * m * k * n).all()
    expected_rate = 2.0 * m * k * n / (synth.gemm_us["gemm_us"].to_numpy() * 1e-6)
    np.testing.assert_allclose(gemm["achieved_flops_per_s"].to_numpy(), expected_rate)
    placed = roofline_placement(table, PEAK_RATES["H100 SXM"])
    regime = placed[placed["op_name"] == "aten::mm"].groupby("rank")["regime"].unique().map(set)
    # 733 TFLOP/s of 989 on the healthy ranks (74 %); the straggler's longer kernel runs at 44 %
    assert regime.loc[synth.straggler_rank] == {"below both ceilings"}
    assert all(v == {"near compute ceiling"} for r, v in regime.items() if r != synth.straggler_rank)


def test_files_are_kineto_object_form(default):
    synth = default[0]
    import gzip

    doc = json.loads(gzip.decompress(synth.paths[0].read_bytes()))
    assert doc["distributedInfo"] == {"backend": "nccl", "rank": 0, "world_size": 4}
    assert "baseTimeNanoseconds" in doc and isinstance(doc["traceEvents"], list)
    assert {e["cat"] for e in doc["traceEvents"]} == {"user_annotation", "cpu_op", "cuda_runtime", "kernel",
                                                     "gpu_memcpy"}


@settings(max_examples=6, deadline=None)
@given(ranks=st.integers(2, 5), steps=st.integers(1, 3), seed=st.integers(0, 100),
       straggler=st.one_of(st.none(), st.integers(0, 4)), extra=st.integers(0, 3000),
       gap=st.integers(0, 200), memcpy=st.integers(0, 400), tail=st.integers(0, 400))
def test_any_configuration_is_recovered(ranks, steps, seed, straggler, extra, gap, memcpy, tail):
    straggler = None if straggler is None else straggler % ranks
    with tempfile.TemporaryDirectory() as d:
        synth = synth_step_traces(d, ranks=ranks, steps=steps, seed=seed, straggler_rank=straggler,
                                  straggler_extra_us=extra, dispatch_gap_us=gap, memcpy_us=memcpy,
                                  tail_us=tail, compute_us=2000, gz=False)
        _traces, _m, waits, part = _measure(Path(d))
    cols = ["rank", "step", *PARTITION_PARTS, "step_wall_us"]
    pd.testing.assert_frame_equal(part[cols], synth.partition[cols], check_dtype=False)
    # the parts add up to the wall time, and the last arriver is the rank with no wait in each step
    assert np.allclose(part[list(PARTITION_PARTS)].sum(axis=1), part["step_wall_us"])
    got = waits.drop_duplicates("instance").set_index("step")["last_arriver"]
    want = synth.last_arriver.set_index("step")["rank"]
    zero_wait = synth.partition[synth.partition["peer_wait"] == 0].groupby("step")["rank"].agg(set)
    for step, rank in got.items():   # ties (equal jitter) may name any of the tied ranks
        assert rank in zero_wait.loc[step] and want.loc[step] in zero_wait.loc[step]


@pytest.mark.parametrize("kwargs", [
    {"ranks": 1}, {"steps": 0}, {"straggler_rank": 4}, {"straggler_rank": -1}, {"transfer_us": 0},
    {"compute_us": 0}, {"compute2_us": 10}, {"memcpy_us": -1}, {"jitter_us": 1.5}, {"ranks": True},
    {"gemm_mnk": (1, 2)}, {"gemm_mnk": (0, 2, 3)},
])
def test_bad_arguments(tmp_path, kwargs):
    with pytest.raises(DomainError):
        synth_step_traces(tmp_path, **kwargs)
