"""Table 7 triage: each detector fires on its own synthetic case and no other; a clean step fires none.

The synthetic tables (:func:`fleetlib.program.synth.synth_triage_tables`) are built with one pattern
each and known times, so the evidence of every finding is checked against the generator's numbers.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fleetlib.program import measure, traced_step_partition
from fleetlib.program.synth import TRIAGE_CASES, synth_triage_tables
from fleetlib.program.triage import FINDING_COLUMNS, TABLE7_PATTERNS, triage

DLRM = Path(__file__).resolve().parents[2] / "data" / "traces" / "dlrm_8rank"

#: Evidence each case injects, microseconds over its three steps (see synth_triage_tables).
EXPECTED = {
    "small_kernel_gaps": 2 * 3 * 250 * 20.0,           # 20 us of host dispatch before each of 250 kernels
    "low_flops_high_bandwidth": 2 * 3 * 7_000.0,       # the skinny aten::mm's kernel
    "non_gemm_kernels": 2 * 3 * 6_000.0,               # the elementwise kernels
    "exposed_collectives": 2 * 3 * 3_000.0,            # the AllReduce with nothing under it
    "barrier_straggler": 3 * 3 * 1_200.0,              # three ranks wait 1.2 ms for rank 3
    "pipeline_bubbles": 3 * (3_500.0 + 6_000.0),       # stage 0 idle at the end, stage 1 at the start
    "input_wait": 2 * 2 * 2_000.0,                     # 2 ms between consecutive steps, two gaps a rank
    "large_memory_spikes": 2 * 3 * 1_000.0,            # the local_memory term: the elementwise kernel
    "repeated_large_allocations": 2 * 3 * 1_400.0,     # the steps' device-idle time (dispatch + other)
}


def _triage(case: str, **kw):
    t = synth_triage_tables(case)
    matched, _waits, part = traced_step_partition(t["kernels"], t["steps"], ops=t["ops"])
    return triage(t["kernels"], t["steps"], part, matched=matched, ops=t["ops"], memory=t["memory"], **kw)


def test_the_nine_patterns_of_table_7():
    assert len(TABLE7_PATTERNS) == 9
    assert set(EXPECTED) == set(TABLE7_PATTERNS)
    assert set(TRIAGE_CASES) == {"clean", *EXPECTED}


def test_a_clean_step_triggers_nothing():
    found = _triage("clean")
    assert found.findings.empty
    assert set(found.not_observable) == {"low_flops_high_bandwidth"}      # the clean case records no shapes
    t = synth_triage_tables("large_memory_spikes")
    matched, _waits, part = traced_step_partition(t["kernels"], t["steps"])
    blind = triage(t["kernels"], t["steps"], part, matched=matched)      # no memory events given
    assert blind.findings.empty
    assert blind.not_observable["large_memory_spikes"] == "not observable: no memory events in the trace"


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_case_triggers_its_detector_and_no_other(case):
    found = _triage(case)
    assert found.findings["pattern"].tolist() == [case]
    row = found.findings.iloc[0]
    assert row["evidence_us"] == EXPECTED[case]
    assert list(found.findings.columns) == list(FINDING_COLUMNS)
    factor, term, lever, trade = TABLE7_PATTERNS[case]
    assert (row["factor"], row["term"], row["lever"], row["trade_off"]) == (factor, term, lever, trade)
    assert row["ranks"] == ([0, 1, 2] if case == "barrier_straggler" else [0, 1])
    assert row["steps"] == ([0, 1] if case == "input_wait" else [0, 1, 2])


def test_the_straggler_is_named():
    row = _triage("barrier_straggler").findings.iloc[0]
    assert row["status"] == "observed; not waiting: rank 3"


def test_input_wait_is_a_runtime_loss_confirmed_only_by_the_timeline():
    row = _triage("input_wait").findings.iloc[0]
    assert row["factor"] == "runtime" and row["status"].startswith("unconfirmed")
    waited = pd.DataFrame({"rank": [0, 1], "step": [0, 0], "input_wait_us": [1_900.0, 1_800.0]})
    assert _triage("input_wait", input_wait=waited).findings.iloc[0]["status"].startswith("confirmed")
    # the timeline shows no input wait: the drops are something else, and the pattern is dropped
    assert _triage("input_wait", input_wait=waited.assign(input_wait_us=0.0)).findings.empty


def test_findings_are_ranked_by_evidence():
    t = synth_triage_tables("exposed_collectives")
    g = synth_triage_tables("input_wait")
    other = g["kernels"].assign(rank=g["kernels"]["rank"] + 2, process_group="dp2")   # a second job's ranks
    k = pd.concat([t["kernels"], other], ignore_index=True)
    s = pd.concat([t["steps"], g["steps"].assign(rank=g["steps"]["rank"] + 2)], ignore_index=True)
    matched, _w, part = traced_step_partition(k, s)
    found = triage(k, s, part, matched=matched).findings
    assert found["pattern"].tolist() == ["exposed_collectives", "input_wait"]
    assert found["evidence_us"].tolist() == [EXPECTED["exposed_collectives"], EXPECTED["input_wait"]]


def test_dlrm_sample_findings():
    m = measure(DLRM, progress=False)
    out = m.to_dict()
    assert [f["pattern"] for f in out["findings"]] == ["small_kernel_gaps"]
    first = out["findings"][0]
    # the evidence is the dispatch term of every rank's step (the partition's host dispatch)
    assert first["evidence_us"] == pytest.approx(float(m.partition["host_dispatch"].sum()), abs=1e-6)
    assert first["ranks"] == list(range(8))
    assert set(out["not_observable"]) == {"large_memory_spikes", "repeated_large_allocations"}
