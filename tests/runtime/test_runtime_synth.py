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
from fleetlib.runtime.commands import run_runtime
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.measure import measure
from fleetlib.runtime.readers import READERS
from fleetlib.runtime.schema import CATEGORIES, PARQUET_COLUMNS
from fleetlib.runtime.synth import synth_timeline, synth_timeline_file, write_timeline
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
    "clean_end_commit": st.booleans(),
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
                        as_of="data_end", clean_end_commit=kw["clean_end_commit"])
    assert_truth(m, truth, definition=definition)
    assert m.partition_error_s == pytest.approx(0.0, abs=1e-6)
    assert sum(m.interruptions["kind"] == "failure") == truth["n_failures"]
    assert sum(m.interruptions["kind"] == "preempt") == truth["n_preemptions"]
    assert not [f for f in m.ledger.flags if f.code not in ("terminal_interruption", "clean_end_commit")]


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


def read_file(path):
    tables, ledger = READERS["canonical"].read([path])
    return tables["steps"], tables["events"], ledger


def test_parquet_round_trip(tmp_path):
    steps, events, truth = synth_timeline(3000, seed=3, failure_rate_per_h=20.0, preemption_rate_per_h=5.0,
                                          input_wait_prob=0.1, eval_every_steps=500, eval_s=30.0, hang_s=10.0)
    path = write_timeline(steps, events, tmp_path / "sub" / "t.parquet")
    schema = pq.read_schema(path)
    assert tuple(schema.names) == PARQUET_COLUMNS
    assert schema.metadata[b"fleetlib.timeline"] == b"1"
    s2, e2, ledger = read_file(path)
    assert ledger.read == len(steps) + len(events) and ledger.balanced()
    assert len(s2) == len(steps) and len(e2) == len(events)
    assert s2["source_row"].tolist() == list(range(1, len(steps) + 1))  # the file's rows, 1-based
    np.testing.assert_array_equal(s2["start"].array.asi8, steps["start"].array.asi8)
    np.testing.assert_array_equal(s2["input_wait_s"].to_numpy(), steps["input_wait_s"].to_numpy())
    assert measure(path).categories == runtime_goodput(steps, events).categories
    assert_truth(measure(path, fault_free_step_s=1.0, as_of="data_end"), truth)


def test_command_line_logic(tmp_path):
    import json
    made = synth_timeline_file(800, seed=4, out=tmp_path / "t.parquet", failure_rate_per_h=40.0)
    assert made["steps"] >= 800 and made["truth"]["productive"] == pytest.approx(800.0)
    out = run_runtime([made["path"]], "canonical")
    json.dumps(out)
    assert out["ledger"]["read"] == made["steps"] + made["events"]
    assert out["productive_s"] == pytest.approx(made["truth"]["productive"])
    assert out["held_s"] == pytest.approx(made["truth"]["held_s"])
    for k in ("startup", "checkpoint", "recovery", "rework"):
        assert out["terms"][k] == pytest.approx(made["truth"][k], abs=1e-6)
    window = ["2024-01-01T00:05:00Z", "2024-01-01T00:10:00Z"]
    assert run_runtime([made["path"]], "canonical", window=window)["held_s"] == pytest.approx(300.0)


def test_bad_rows_of_a_timeline_file_are_booked(tmp_path):
    steps, events, _ = synth_timeline(20, seed=1)
    path = write_timeline(steps, events, tmp_path / "t.parquet")
    table = pq.read_table(path)
    record = table.column("record").cast(pa.string()).to_pylist()
    record[-1] = "other"
    pq.write_table(table.set_column(0, "record", pa.array(record)), tmp_path / "bad.parquet")
    _, e2, ledger = read_file(tmp_path / "bad.parquet")
    assert len(e2) == len(events) - 1 and ledger.balanced()
    [entry] = [e for e in ledger.to_dict()["entries"] if e["action"] == "rejected"]
    assert entry["row"] == table.num_rows and entry["field"] == "record"  # the last row, 1-based
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="not a readable Parquet"):
        read_file(tmp_path / "junk.parquet")
    nowait = table.set_column(table.schema.get_field_index("input_wait_s"), "input_wait_s",
                              pa.nulls(table.num_rows, pa.float64()))
    pq.write_table(nowait, tmp_path / "nowait.parquet")
    s3, _, ledger = read_file(tmp_path / "nowait.parquet")
    assert ledger.repaired == len(steps) and (s3["input_wait_s"] == 0.0).all()


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
# Any layout of the one-file form reads alike: row groups, dictionaries, row order
# ---------------------------------------------------------------------------------------------------


def _two_job_file(tmp_path):
    """A two-job timeline file, rewritten with 97-row row groups whose job dictionaries differ."""
    s1, e1, t1 = synth_timeline(400, seed=5, failure_rate_per_h=30.0, input_wait_prob=0.2)
    s2, e2, t2 = synth_timeline(300, seed=6, preemption_rate_per_h=30.0, checkpoint_every_steps=40)
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
    return one, many, table, (t1, t2)


def test_row_groups_and_changing_dictionaries_read_alike(tmp_path):
    one, many, table, truths = _two_job_file(tmp_path)
    with pq.ParquetFile(many) as pf:
        assert pf.metadata.num_row_groups > 10
        groups = [pf.read_row_group(i, columns=["job_id"]) for i in range(pf.metadata.num_row_groups)]
    dictionaries = {tuple(g.column(0).chunk(0).dictionary.to_pylist()) for g in groups}
    assert ("job-a",) in dictionaries and ("job-b",) in dictionaries  # the job dictionary changes
    s1, _, _ = read_file(one)
    s2, e2, _ = read_file(many)
    n_steps = table.column("record").cast(pa.string()).to_pylist().count("step")
    assert len(s2) == n_steps and len(e2) == table.num_rows - n_steps
    assert list(s2["job_id"].astype(str).unique()) == ["job-a", "job-b"]
    pd.testing.assert_frame_equal(s1.drop(columns="source_file"), s2.drop(columns="source_file"),
                                  check_categorical=False)
    a, b = run_runtime([one], "canonical"), run_runtime([many], "canonical")
    for key in ("runtime_goodput", "held_s", "productive_s", "terms", "interruptions"):
        assert a[key] == b[key], key
    # the generator's truth, summed over the two jobs
    assert a["productive_s"] == pytest.approx(sum(t["productive"] for t in truths))


def test_row_order_and_bad_values_of_a_timeline_file(tmp_path):
    one, _, _, _ = _two_job_file(tmp_path)
    table = pq.read_table(one)
    record = table.column("record").cast(pa.string()).to_pylist()
    n_steps = record.count("step")
    # events stored before the steps: the record column splits them the same way
    flipped = pa.concat_tables([table.slice(n_steps), table.slice(0, n_steps)])
    pq.write_table(flipped, tmp_path / "flipped.parquet")
    a, b = run_runtime([one], "canonical"), run_runtime([tmp_path / "flipped.parquet"], "canonical")
    assert a["terms"] == b["terms"] and a["held_s"] == b["held_s"]
    # a dictionary-encoded record column with a third value: the row is rejected by its file row
    record[n_steps + 3] = "other"
    odd = table.set_column(0, "record", pa.array(record).dictionary_encode())
    pq.write_table(odd, tmp_path / "odd.parquet")
    _, _, ledger = read_file(tmp_path / "odd.parquet")
    [entry] = [e for e in ledger.to_dict()["entries"] if e["action"] == "rejected"]
    assert entry["row"] == n_steps + 4 and entry["field"] == "record"  # the file's row: index + 1
    # a null attempt on a step row
    attempt = table.column("attempt").to_pylist()
    attempt[5] = None
    holed = table.set_column(2, "attempt", pa.array(attempt, pa.int64()))
    pq.write_table(holed, tmp_path / "holed.parquet")
    _, _, ledger = read_file(tmp_path / "holed.parquet")
    [entry] = ledger.to_dict()["entries"]
    assert (entry["row"], entry["field"], entry["file"]) == (6, "attempt", str(tmp_path / "holed.parquet"))


def test_the_reader_returns_editable_tables(tmp_path):
    steps, events, _ = synth_timeline(50, seed=2)
    path = write_timeline(steps, events, tmp_path / "t.parquet")
    s1, e1, _ = read_file(path)
    s1.loc[0, "attempt"] = 9
    s1["input_wait_s"] += 1.0
    e1.loc[0, "attempt"] = 9
    s2, _, _ = read_file(path)
    assert s1.loc[0, "attempt"] == 9 and s2.loc[0, "attempt"] == steps["attempt"].iloc[0]
    np.testing.assert_array_equal(s1["input_wait_s"].to_numpy(), s2["input_wait_s"].to_numpy() + 1.0)
