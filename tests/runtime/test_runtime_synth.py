"""Synthetic timelines: the measurement recovers the injected ground truth; the one-file Parquet form."""

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetlib.quality import DomainError, InputError
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.schema import CATEGORIES
from fleetlib.runtime.synth import (
    PARQUET_COLUMNS,
    read_canonical_timeline,
    runtime_summary_file,
    synth_timeline,
    synth_timeline_file,
    write_timeline,
)
from fleetlib.runtime.timeline import validate_timeline


def assert_truth(m, truth, *, definition="committed"):
    expected = dict(truth)
    if definition == "retrospective":
        expected["productive"] = truth["productive_retrospective_s"]
        expected["progress_at_risk"] = 0.0
    for k in CATEGORIES:
        assert m.categories[k] == pytest.approx(expected[k], abs=1e-6), k
    assert m.held_s == pytest.approx(truth["held_s"], abs=1e-6)
    assert m.queue_after_interruption_s == pytest.approx(truth["queue_after_interruption_s"], abs=1e-6)
    assert m.productive_retrospective_s == pytest.approx(truth["productive_retrospective_s"], abs=1e-6)


params = st.fixed_dictionaries({
    "n": st.integers(1, 300),
    "seed": st.integers(0, 2**31 - 1),
    "step_s": st.sampled_from([0.5, 1.0, 3.0]),
    "failure_rate_per_h": st.sampled_from([0.0, 10.0, 60.0, 200.0]),
    "preemption_rate_per_h": st.sampled_from([0.0, 10.0, 60.0]),
    "checkpoint_every_steps": st.integers(1, 40),
    "checkpoint_write_s": st.sampled_from([0.0, 2.0, 10.0]),
    "async_checkpoint": st.booleans(),
    "checkpoint_stage_s": st.sampled_from([0.0, 0.5]),
    "input_wait_prob": st.sampled_from([0.0, 0.3]),
    "step_jitter": st.sampled_from([0.0, 0.05]),
    "startup_s": st.sampled_from([0.0, 30.0]),
    "warmup_steps": st.sampled_from([0, 1, 3]),
    "detect_s": st.sampled_from([0.0, 10.0]),
    "failure_requeue_s": st.sampled_from([None, 100.0]),
    "preemption_drain_s": st.sampled_from([0.0, 5.0]),
    "eval_every_steps": st.sampled_from([0, 7]),
    "eval_s": st.sampled_from([0.0, 20.0]),
    "hang_s": st.sampled_from([0.0, 40.0]),
    "final_checkpoint": st.booleans(),
})


def build(p):
    kw = dict(p)
    n, seed = kw.pop("n"), kw.pop("seed")
    # keep progress likely: at most about one interruption per checkpoint interval on average
    rate_per_s = (kw["failure_rate_per_h"] + kw["preemption_rate_per_h"]) / 3600.0
    if rate_per_s > 0:
        kw["checkpoint_every_steps"] = max(1, min(kw["checkpoint_every_steps"],
                                                  int(1.0 / (rate_per_s * kw["step_s"]))))
    if kw["async_checkpoint"]:
        kw["checkpoint_write_s"] = max(kw["checkpoint_write_s"], kw["checkpoint_stage_s"])
        if kw["checkpoint_write_s"] >= kw["checkpoint_every_steps"] * kw["step_s"]:
            kw["async_checkpoint"] = False
    return synth_timeline(n, seed=seed, **kw), kw


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=params, definition=st.sampled_from(["committed", "retrospective"]))
def test_measured_partition_equals_the_injected_truth(p, definition):
    (steps, events, truth), kw = build(p)
    m = runtime_goodput(steps, events, definition=definition, fault_free_step_s=kw["step_s"],
                        as_of="data_end")
    assert_truth(m, truth, definition=definition)
    assert m.partition_error_s == pytest.approx(0.0, abs=1e-6)
    assert sum(m.interruptions["kind"] == "failure") == truth["n_failures"]
    assert sum(m.interruptions["kind"] == "preempt") == truth["n_preemptions"]
    assert not [f for f in m.ledger.flags if f.code != "terminal_interruption"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), fail=st.sampled_from([0.0, 5.0, 20.0]), pre=st.sampled_from([0.0, 5.0]),
       async_=st.booleans())
def test_estimated_baseline_recovers_the_truth_without_jitter(seed, fail, pre, async_):
    steps, events, truth = synth_timeline(2000, seed=seed, step_s=1.0, failure_rate_per_h=fail,
                                          preemption_rate_per_h=pre, checkpoint_every_steps=50,
                                          checkpoint_write_s=5.0, async_checkpoint=async_,
                                          input_wait_prob=0.2, eval_every_steps=300, eval_s=30.0)
    m = runtime_goodput(steps, events)  # median estimator, committed, whole timeline
    assert m.fault_free_step_s["synthetic-0"] == pytest.approx(1.0, rel=1e-9)
    assert_truth(m, truth)


def test_seed_determinism_and_event_shape():
    a = synth_timeline(500, seed=7, failure_rate_per_h=30.0, preemption_rate_per_h=10.0)
    b = synth_timeline(500, seed=7, failure_rate_per_h=30.0, preemption_rate_per_h=10.0)
    c = synth_timeline(500, seed=8, failure_rate_per_h=30.0, preemption_rate_per_h=10.0)
    pd.testing.assert_frame_equal(a[0], b[0])
    pd.testing.assert_frame_equal(a[1], b[1])
    assert a[2] == b[2] and a[2] != c[2]
    steps, events, truth = a
    assert truth["executed_steps"] == len(steps)
    assert events["time"].is_monotonic_increasing
    _, _, ledger = validate_timeline(steps, events)
    assert ledger.balanced() and ledger.repaired == ledger.rejected == 0


def test_a_quiet_run_by_hand():
    # 10 steps of 2 s, checkpoint every 5 (4 s pause), startup 30 s with a 3-step warm-up of excess
    # 1.5: the warm-up steps take 2 x (1 + 1.5), 2 x (1 + 1.0), 2 x (1 + 0.5) s
    _steps, events, truth = synth_timeline(10, seed=0, step_s=2.0, checkpoint_every_steps=5,
                                          checkpoint_write_s=4.0, startup_s=30.0)
    assert truth["productive"] == pytest.approx(20.0)
    assert truth["startup"] == pytest.approx(30.0 + 2 * (1.5 + 1.0 + 0.5))
    assert truth["checkpoint"] == pytest.approx(8.0)
    assert truth["held_s"] == pytest.approx(30.0 + 20.0 + 6.0 + 8.0)
    assert list(events["kind"]) == ["gang_complete", "first_step", "checkpoint_begin", "checkpoint_commit",
                                    "checkpoint_begin", "checkpoint_commit", "release"]


def test_asynchronous_checkpoints_pause_only_to_stage():
    sync = synth_timeline(100, seed=1, checkpoint_every_steps=10, checkpoint_write_s=5.0)[2]
    asyn = synth_timeline(100, seed=1, checkpoint_every_steps=10, checkpoint_write_s=5.0,
                          async_checkpoint=True, checkpoint_stage_s=0.5)[2]
    assert sync["checkpoint"] == pytest.approx(10 * 5.0)
    assert asyn["checkpoint"] == pytest.approx(9 * 0.5 + 5.0)  # the final commit is synchronous


def test_bad_arguments():
    with pytest.raises(DomainError):
        synth_timeline(0, seed=1)
    with pytest.raises(DomainError):
        synth_timeline(10, seed=1, step_s=0.0)
    with pytest.raises(DomainError, match="jitter"):
        synth_timeline(10, seed=1, step_jitter=0.2)
    with pytest.raises(DomainError, match="warm-up"):
        synth_timeline(10, seed=1, warmup_steps=10, warmup_excess=0.5)
    with pytest.raises(DomainError, match="interval"):
        synth_timeline(10, seed=1, async_checkpoint=True, checkpoint_every_steps=2, checkpoint_write_s=5.0)
    with pytest.raises(DomainError):
        synth_timeline(10, seed=1, input_wait_prob=1.5)
    with pytest.raises(DomainError, match="timezone"):
        synth_timeline(10, seed=1, start="2024-01-01")


# ---------------------------------------------------------------------------------------------------
# One-file Parquet layout
# ---------------------------------------------------------------------------------------------------


def test_parquet_round_trip(tmp_path):
    steps, events, truth = synth_timeline(3000, seed=3, failure_rate_per_h=20.0, preemption_rate_per_h=5.0,
                                          input_wait_prob=0.1, eval_every_steps=500, eval_s=30.0, hang_s=10.0)
    path = write_timeline(steps, events, tmp_path / "sub" / "t.parquet")
    schema = pq.read_schema(path)
    assert tuple(schema.names) == PARQUET_COLUMNS
    assert schema.metadata[b"fleetlib.timeline"] == b"1"
    s2, e2, ledger = read_canonical_timeline(path)
    assert ledger.read == len(steps) + len(events) and ledger.balanced()
    v_steps, v_events, _ = validate_timeline(steps, events)
    pd.testing.assert_frame_equal(s2.reset_index(drop=True), v_steps, check_categorical=False)
    pd.testing.assert_frame_equal(e2.reset_index(drop=True), v_events, check_categorical=False)
    m1 = runtime_goodput(steps, events)
    m2 = runtime_goodput(s2, e2)
    assert m1.categories == m2.categories
    assert_truth(runtime_goodput(s2, e2, fault_free_step_s=1.0, as_of="data_end"), truth)


def test_command_line_logic(tmp_path):
    import json
    made = synth_timeline_file(800, seed=4, out=tmp_path / "t.parquet", failure_rate_per_h=40.0)
    assert made["steps"] >= 800 and made["truth"]["productive"] == pytest.approx(800.0)
    out = runtime_summary_file(made["path"])
    json.dumps(out)
    assert out["ledger"]["read"] == made["steps"] + made["events"]
    assert out["productive_s"] == pytest.approx(made["truth"]["productive"])
    assert out["held_s"] == pytest.approx(made["truth"]["held_s"])
    for k in ("startup", "checkpoint", "recovery", "rework"):
        assert out["terms"][k] == pytest.approx(made["truth"][k], abs=1e-6)
    window = ["2024-01-01T00:05:00Z", "2024-01-01T00:10:00Z"]
    assert runtime_summary_file(made["path"], window=window)["held_s"] == pytest.approx(300.0)


def test_read_refuses_bad_files(tmp_path):
    steps, events, _ = synth_timeline(20, seed=1)
    path = write_timeline(steps, events, tmp_path / "t.parquet")
    table = pq.read_table(path)
    bad = table.set_column(0, "record", pa.array(["step"] * (table.num_rows - 1) + ["other"]))
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(InputError, match="record") as err:
        read_canonical_timeline(tmp_path / "bad.parquet")
    assert err.value.row == table.num_rows  # the last row, 1-based
    pq.write_table(table.drop_columns(["input_wait_s"]), tmp_path / "short.parquet")
    with pytest.raises(InputError, match="missing column"):
        read_canonical_timeline(tmp_path / "short.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="cannot read"):
        read_canonical_timeline(tmp_path / "junk.parquet")
    nowait = table.set_column(table.schema.get_field_index("input_wait_s"), "input_wait_s",
                              pa.nulls(table.num_rows, pa.float64()))
    pq.write_table(nowait, tmp_path / "nowait.parquet")
    with pytest.raises(InputError, match="rule 22"):
        read_canonical_timeline(tmp_path / "nowait.parquet")


def test_generation_is_vectorised():
    # 200 000 steps with interruptions; a per-step Python loop would take far longer than this bound
    import time
    t = time.perf_counter()
    steps, _events, truth = synth_timeline(200_000, seed=11, failure_rate_per_h=1.0,
                                           preemption_rate_per_h=0.5, checkpoint_every_steps=500,
                                           input_wait_prob=0.05)
    elapsed = time.perf_counter() - t
    assert len(steps) >= 200_000 and elapsed < 5.0
    assert math.isclose(truth["productive"], 200_000.0)
    assert np.all(np.diff(steps["start"].array.asi8) > 0)


# ---------------------------------------------------------------------------------------------------
# The fast Parquet path (batch-wise decoding into preallocated arrays) against the general one
# ---------------------------------------------------------------------------------------------------


def _two_job_file(tmp_path):
    """A two-job timeline file, rewritten with 97-row row groups whose job dictionaries differ."""
    s1, e1, _ = synth_timeline(400, seed=5, failure_rate_per_h=30.0, input_wait_prob=0.2)
    s2, e2, _ = synth_timeline(300, seed=6, preemption_rate_per_h=30.0, checkpoint_every_steps=40)
    steps = pd.concat([s1.assign(job_id="job-a"), s2.assign(job_id="job-b")], ignore_index=True)
    events = pd.concat([e1.assign(job_id="job-a"), e2.assign(job_id="job-b")], ignore_index=True)
    one = write_timeline(steps, events, tmp_path / "one.parquet")
    table = pq.read_table(one)
    jobs = table.column("job_id").cast(pa.string()).combine_chunks()
    # per-chunk dictionaries in first-appearance order: one job, both jobs, the other job first ...
    chunks = [jobs.slice(lo, 97).dictionary_encode() for lo in range(0, len(jobs), 97)]
    table = table.set_column(1, "job_id", pa.chunked_array(chunks))
    many = tmp_path / "many.parquet"
    pq.write_table(table, many, row_group_size=97)
    return one, many, table


def test_fast_parquet_path_matches_the_general_path(tmp_path, monkeypatch):
    from fleetlib.runtime import synth as synth_module

    one, many, table = _two_job_file(tmp_path)
    with pq.ParquetFile(many) as pf:
        assert pf.metadata.num_row_groups > 10
        groups = [pf.read_row_group(i, columns=["job_id"]) for i in range(pf.metadata.num_row_groups)]
    dictionaries = {tuple(g.column(0).chunk(0).dictionary.to_pylist()) for g in groups}
    assert ("job-a",) in dictionaries and ("job-b",) in dictionaries  # the job dictionary changes
    # batches that cut across row groups and across the step/event boundary
    monkeypatch.setattr(synth_module, "_READ_BATCH_ROWS", 13)
    for path in (one, many):
        with pq.ParquetFile(path) as pf:
            fast = synth_module._read_parquet_fast(pf)
        assert fast is not None
        general = synth_module._read_parquet_general(path)
        for got, want in zip(fast, general, strict=True):
            pd.testing.assert_frame_equal(got, want, check_categorical=False)
    n_steps = int(np.count_nonzero(np.asarray(table.column("record").to_pylist()) == "step"))
    assert len(fast[0]) == n_steps and len(fast[1]) == table.num_rows - n_steps
    assert list(fast[0]["job_id"].astype(str).unique()) == ["job-a", "job-b"]
    a, b = runtime_summary_file(one), runtime_summary_file(many)
    for key in ("runtime_goodput", "held_s", "productive_s", "terms", "interruptions", "ledger"):
        assert a[key] == b[key], key


def test_fast_parquet_path_falls_back_with_the_same_errors(tmp_path):
    from fleetlib.runtime import synth as synth_module

    one, _, _ = _two_job_file(tmp_path)
    table = pq.read_table(one)
    record = table.column("record").cast(pa.string()).to_pylist()
    n_steps = record.count("step")
    # events stored before the steps: not the fast layout; the general path splits them the same way
    flipped = pa.concat_tables([table.slice(n_steps), table.slice(0, n_steps)])
    pq.write_table(flipped, tmp_path / "flipped.parquet")
    with pq.ParquetFile(tmp_path / "flipped.parquet") as pf:
        assert synth_module._read_parquet_fast(pf) is None
    a, b = runtime_summary_file(one), runtime_summary_file(tmp_path / "flipped.parquet")
    assert a["terms"] == b["terms"] and a["held_s"] == b["held_s"]
    # a dictionary-encoded record column with a third value: the general path names its row
    record[n_steps + 3] = "other"
    odd = table.set_column(0, "record", pa.array(record).dictionary_encode())
    pq.write_table(odd, tmp_path / "odd.parquet")
    with pytest.raises(InputError, match="record") as err:
        read_canonical_timeline(tmp_path / "odd.parquet")
    assert err.value.row == n_steps + 4  # the file's row: index + 1
    # a null attempt on a step row
    attempt = table.column("attempt").to_pylist()
    attempt[5] = None
    holed = table.set_column(2, "attempt", pa.array(attempt, pa.int64()))
    pq.write_table(holed, tmp_path / "holed.parquet")
    with pytest.raises(InputError, match="missing value") as err:
        runtime_summary_file(tmp_path / "holed.parquet")
    assert err.value.row == 6 and err.value.field == "attempt"
    assert err.value.file == str(tmp_path / "holed.parquet")
    # a missing column is named as such, not reported as an unreadable file
    pq.write_table(table.drop_columns(["duration_s"]), tmp_path / "short.parquet")
    with pytest.raises(InputError, match="missing column") as err:
        runtime_summary_file(tmp_path / "short.parquet")
    assert "cannot read" not in str(err.value) and err.value.field == "duration_s"


def test_read_canonical_timeline_returns_editable_tables(tmp_path):
    steps, events, _ = synth_timeline(50, seed=2)
    path = write_timeline(steps, events, tmp_path / "t.parquet")
    s1, e1, _ = read_canonical_timeline(path)
    s1.loc[0, "attempt"] = 9
    s1["input_wait_s"] += 1.0
    e1.loc[0, "attempt"] = 9
    s2, _, _ = read_canonical_timeline(path)
    assert s1.loc[0, "attempt"] == 9 and s2.loc[0, "attempt"] == steps["attempt"].iloc[0]
    np.testing.assert_array_equal(s1["input_wait_s"].to_numpy(), s2["input_wait_s"].to_numpy() + 1.0)
