"""Measured runtime goodput: hand-built partitions, definitions, windows, the factor, and properties."""

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, InputError
from fleetlib.runtime.goodput import runtime_goodput, runtime_goodput_windows, runtime_summary
from fleetlib.runtime.schema import BREAKDOWN, CATEGORIES, ISSUE_TERMS
from fleetlib.runtime.synth import synth_timeline
from fleetlib.runtime.timeline import tables_from_seconds

T0 = pd.Timestamp("2024-01-01T00:00:00Z")


def at(seconds):
    return T0 + pd.Timedelta(seconds=seconds)


def job_a(job_id="a"):
    """Cold start, warm-up, input wait, a slow step, a sync checkpoint, an evaluation, a hang.

    Fault-free step 2 s.  Held 40 s, partitioned by hand:
    startup 10 (launch) + 4 + 0.5 (warm-up of steps 0, 1); productive 5 committed steps x 2 = 10;
    progress at risk 2 x 2 = 4 (steps 5, 6 never checkpointed); input wait 0.5 (step 3); above
    baseline 0.2 (step 4); checkpoint 3; evaluation 5; idle 2.8 (hang).  The release at 40 s follows
    the last step (37.2 s) with no interruption between (a hang is none): by default that clean end
    commits steps 5 and 6 too, so productive is 14.2 and nothing is at risk; the progress at risk
    above is what ``clean_end_commit=False`` charges.
    """
    steps = [(0, 0, 10.0, 16.0), (0, 1, 16.0, 18.5), (0, 2, 18.5, 20.5), (0, 3, 20.5, 23.0, 0.5),
             (0, 4, 23.0, 25.2), (0, 5, 33.2, 35.2), (0, 6, 35.2, 37.2)]
    events = [(0, 0.0, "gang_complete"), (0, 10.0, "first_step"), (0, 25.2, "checkpoint_begin", 4),
              (0, 28.2, "checkpoint_commit", 4), (0, 28.2, "eval_begin"), (0, 33.2, "eval_end"),
              (0, 37.2, "hang_begin"), (0, 40.0, "release")]
    return tables_from_seconds(steps, events, job_id=job_id, origin=T0)


def job_b(job_id="b", cold=False):
    """A preemption with a requeue: held 23 s, 19 s of queue between the attempts (not held)."""
    steps = [(0, i, 1.0 + 2 * i, 3.0 + 2 * i) for i in range(4)] + [(1, 2, 36.0, 39.0), (1, 3, 39.0, 41.0)]
    events = [(0, 0.0, "gang_complete"), (0, 5.0, "checkpoint_commit", 1), (0, 10.0, "preempt"),
              (0, 11.0, "release"), (1, 30.0, "gang_complete"), (1, 35.0, "restore", 1),
              (1, 41.0, "checkpoint_commit", 3), (1, 42.0, "release")]
    if cold:
        events.append((1, 30.0, "cold_start"))
    return tables_from_seconds(steps, events, job_id=job_id, origin=T0)


def job_c():
    """An in-place failure with detection: held 14 s (see test_runtime_timeline.restart_job)."""
    steps = [(0, i, 1.0 + i, 2.0 + i) for i in range(6)] + [(0, 3, 11.0, 12.0), (0, 4, 12.0, 13.0)]
    events = [(0, 0.0, "gang_complete"), (0, 4.0, "checkpoint_commit", 2), (0, 7.5, "failure"),
              (0, 8.0, "failure_detected"), (0, 10.0, "restore", 2), (0, 13.0, "checkpoint_commit", 4),
              (0, 14.0, "release")]
    return tables_from_seconds(steps, events, origin=T0)


def assert_categories(m, expected):
    for k in CATEGORIES:
        assert m.categories[k] == pytest.approx(expected.get(k, 0.0), abs=1e-9), k
    assert m.partition_error_s == pytest.approx(0.0, abs=1e-9)


# ---------------------------------------------------------------------------------------------------
# Hand-built partitions
# ---------------------------------------------------------------------------------------------------


def test_job_a_partition_by_hand():
    m = runtime_goodput(*job_a(), clean_end_commit=False)
    assert m.held_s == pytest.approx(40.0)
    assert m.fault_free_step_s == {"a": pytest.approx(2.0)}  # median of 2.5, 2, 2, 2.2, 2, 2
    # productive: 5 committed steps' compute time, 10 s at the baseline + 0.2 s slow-step time
    assert_categories(m, {"productive": 10.2, "progress_at_risk": 4.0,
                          "startup": 14.5, "input_wait": 0.5, "checkpoint": 3.0, "evaluation": 5.0,
                          "idle": 2.8})
    assert m.breakdown["startup_launch"] == pytest.approx(10.0)
    assert m.breakdown["startup_warmup"] == pytest.approx(4.5)
    assert m.breakdown["idle_marked"] == pytest.approx(2.8)
    assert m.slow_step_s == pytest.approx(0.2) and m.program_handoff_s == m.slow_step_s
    assert m.runtime_goodput == pytest.approx(10.2 / 40)
    assert m.productive_retrospective_s == pytest.approx(14.2)
    assert m.progress_at_risk_s == pytest.approx(4.0)
    assert m.committed_steps == pytest.approx(5) and m.retained_steps == pytest.approx(7)
    assert m.checkpoint_commits == 1 and m.checkpoint_pauses == 1 and m.commit_spacing_s is None


def test_a_release_after_the_last_step_is_a_clean_end():
    # job A's release (40 s) follows its last step (37.2 s) with no interruption: the final commit
    m = runtime_goodput(*job_a())
    assert_categories(m, {"productive": 14.2, "startup": 14.5, "input_wait": 0.5, "checkpoint": 3.0,
                          "evaluation": 5.0, "idle": 2.8})
    assert m.progress_at_risk_s == pytest.approx(0.0, abs=1e-12)
    assert m.committed_steps == pytest.approx(7) and m.runtime_goodput == pytest.approx(14.2 / 40)
    assert m.per_job.loc["a", "clean_end"]
    (flag,) = [f for f in m.ledger.flags if f.code == "clean_end_commit"]
    assert "retains 2 step(s) no checkpoint covered" in flag.message
    assert flag.time.startswith("2024-01-01T00:00:40")
    # retrospective: the clean end changes nothing and is not flagged
    retro = runtime_goodput(*job_a(), definition="retrospective")
    assert retro.productive_s == pytest.approx(m.productive_s) and not retro.ledger.flags


def test_a_release_after_an_interruption_is_not_a_clean_end():
    # job A preempted at 38 s, after its last step (37.2 s), then released at 40 s: not clean, so
    # steps 5 and 6 are not committed -- with no restart they are the terminal preemption's lost
    # steps (2 x 2 s), plus its partial step 37.2 -> 38 and the drain 38 -> 40: 4 + 0.8 + 2 = 6.8
    steps = [(0, 0, 10.0, 16.0), (0, 1, 16.0, 18.5), (0, 2, 18.5, 20.5), (0, 3, 20.5, 23.0, 0.5),
             (0, 4, 23.0, 25.2), (0, 5, 33.2, 35.2), (0, 6, 35.2, 37.2)]
    events = [(0, 0.0, "gang_complete"), (0, 10.0, "first_step"), (0, 25.2, "checkpoint_begin", 4),
              (0, 28.2, "checkpoint_commit", 4), (0, 28.2, "eval_begin"), (0, 33.2, "eval_end"),
              (0, 38.0, "preempt"), (0, 40.0, "release")]
    m = runtime_goodput(*tables_from_seconds(steps, events, job_id="a", origin=T0))
    assert_categories(m, {"productive": 10.2, "startup": 14.5, "input_wait": 0.5, "checkpoint": 3.0,
                          "evaluation": 5.0, "preemption": 6.8})
    assert m.breakdown["preemption_lost_steps"] == pytest.approx(4.0)
    assert not m.per_job.loc["a", "clean_end"]
    assert m.ledger.codes() == ["terminal_interruption"]


def test_a_scheduler_completed_state_is_an_end_marker():
    # job A without its release: held time ends at the last record (the hang marker at 37.2 s) and
    # that inferred release is no end marker; a scheduler's COMPLETED there (its release) is one
    s, e = job_a()
    e = e[e["kind"] != "release"].reset_index(drop=True)
    bare = runtime_goodput(s, e)
    assert bare.categories["progress_at_risk"] == pytest.approx(4.0)
    done = runtime_goodput(s, e, completed_at={"a": at(37.2)})
    assert done.categories["progress_at_risk"] == pytest.approx(0.0, abs=1e-12)
    assert done.categories["productive"] == pytest.approx(14.2)
    # a COMPLETED before the last step ended is no clean end
    early = runtime_goodput(s, e, completed_at={"a": at(36)})
    assert early.categories["progress_at_risk"] == pytest.approx(4.0)


def test_job_a_retrospective_definition():
    m = runtime_goodput(*job_a(), definition="retrospective")
    assert m.productive_s == pytest.approx(14.2)
    assert m.categories["progress_at_risk"] == 0.0
    assert m.runtime_goodput == pytest.approx(14.2 / 40)
    assert m.partition_error_s == pytest.approx(0.0, abs=1e-9)


def test_preemption_with_requeue():
    m = runtime_goodput(*job_b())
    assert m.held_s == pytest.approx(23.0)
    assert m.queue_after_interruption_s == pytest.approx(19.0)
    assert m.not_held_s == pytest.approx(19.0)
    assert_categories(m, {"startup": 1.0, "productive": 8.0, "preemption": 13.0, "idle": 1.0})
    assert m.breakdown["preemption_lost_steps"] == pytest.approx(4.0)
    assert m.breakdown["preemption_partial_step"] == pytest.approx(1.0)
    assert m.breakdown["preemption_restart"] == pytest.approx(7.0)
    assert m.breakdown["preemption_warmup"] == pytest.approx(1.0)
    row = m.interruptions.iloc[0]
    assert row["kind"] == "preempt" and row["restore_step"] == 1 and bool(row["in_window"])
    got = (row["lost_steps_s"], row["partial_step_s"], row["restart_s"], row["warmup_s"], row["queue_s"])
    assert got == pytest.approx((4.0, 1.0, 7.0, 1.0, 19.0))
    assert row["lost_work_s"] == pytest.approx(5.0)


def test_cold_start_marker_moves_the_relaunch_to_startup():
    m = runtime_goodput(*job_b(cold=True))
    assert_categories(m, {"startup": 1.0 + 6.0 + 1.0, "productive": 8.0, "preemption": 6.0, "idle": 1.0})


def test_in_place_failure_with_detection():
    m = runtime_goodput(*job_c())
    assert_categories(m, {"startup": 1.0, "productive": 5.0, "rework": 3.5, "recovery": 3.5, "idle": 1.0})
    assert m.breakdown["recovery_detection"] == pytest.approx(0.5)
    assert m.breakdown["recovery_restart"] == pytest.approx(3.0)
    assert m.breakdown["rework_steps"] == pytest.approx(3.0)
    assert m.breakdown["rework_partial_step"] == pytest.approx(0.5)
    assert m.interruptions.iloc[0]["recovery_s"] == pytest.approx(3.5)


def test_breakdown_rolls_up_to_categories():
    m = runtime_goodput(*job_b())
    for cat in CATEGORIES:
        parts = [v for k, v in m.breakdown.items() if BREAKDOWN[k] == cat]
        assert math.fsum(parts) == pytest.approx(m.categories[cat])


def test_estimators_and_a_given_baseline():
    mean = runtime_goodput(*job_a(), estimator="mean")
    # the steady steps 2..6 (steps 0 and 1 are warm-up): compute 2, 2, 2.2, 2, 2 s
    assert mean.fault_free_step_s["a"] == pytest.approx(10.2 / 5)
    assert mean.estimator == "mean"
    given_ = runtime_goodput(*job_a(), fault_free_step_s=2.0)
    assert given_.estimator == "given"
    assert given_.categories == pytest.approx(runtime_goodput(*job_a()).categories)
    assert runtime_goodput(*job_a(), fault_free_step_s={"a": 2.0}).productive_s == pytest.approx(14.2)


def test_a_long_warm_up_is_followed_to_its_end():
    # 70 slow steps (3 s) after the cold start, then 200 steps at the 2 s baseline
    steps = [(0, i, 3.0 * i, 3.0 * (i + 1)) for i in range(70)]
    steps += [(0, 70 + i, 210.0 + 2 * i, 212.0 + 2 * i) for i in range(200)]
    events = [(0, 0.0, "gang_complete"), (0, 610.0, "checkpoint_commit", 269), (0, 610.0, "release")]
    m = runtime_goodput(*tables_from_seconds(steps, events))
    assert m.fault_free_step_s["job"] == pytest.approx(2.0)
    assert m.categories["startup"] == pytest.approx(70 * 1.0)
    assert m.productive_s == pytest.approx(270 * 2.0)


def test_warm_up_tolerance_changes_only_the_warm_up_split():
    loose = runtime_goodput(*job_a(), warmup_tolerance=0.3)  # step 1 (2.5 s) is now steady state
    assert loose.categories["startup"] == pytest.approx(14.0)
    assert loose.slow_step_s == pytest.approx(0.7) and loose.productive_s == pytest.approx(14.7)  # 10.7 + 4
    assert loose.partition_error_s == pytest.approx(0.0, abs=1e-9)


# ---------------------------------------------------------------------------------------------------
# Windows and the closing rule
# ---------------------------------------------------------------------------------------------------


def test_window_clips_steps_in_proportion():
    m = runtime_goodput(*job_a(), window=(at(20), at(30)))
    assert m.held_s == pytest.approx(10.0)
    assert_categories(m, {"productive": 4.7, "input_wait": 0.5,
                          "checkpoint": 3.0, "evaluation": 1.8})


def test_closing_rule_and_as_of():
    # the window closes before the commit that covers steps 0-4 lands (t = 28.2)
    early = runtime_goodput(*job_a(), window=(at(0), at(26)))
    assert early.productive_s == 0.0
    assert early.categories["progress_at_risk"] == pytest.approx(10.2)
    later = runtime_goodput(*job_a(), window=(at(0), at(26)), as_of="data_end")
    assert later.productive_s == pytest.approx(10.2)
    fixed = runtime_goodput(*job_a(), window=(at(0), at(26)), as_of=at(28.2))  # a commit at as_of counts
    assert fixed.productive_s == pytest.approx(10.2)
    # a window closing at the commit counts it
    at_commit = runtime_goodput(*job_a(), window=Window.between(at(0), at(28.2)))
    assert at_commit.productive_s == pytest.approx(10.2)


def test_windows_of_one_read_add_up():
    edges = [at(0), at(12.5), at(26), at(33), at(40)]
    parts = runtime_goodput_windows(*job_a(), edges, as_of="data_end")
    whole = runtime_goodput(*job_a())
    for k in CATEGORIES:
        assert math.fsum(p.categories[k] for p in parts) == pytest.approx(whole.categories[k], abs=1e-9)
    with pytest.raises(DomainError):
        runtime_goodput_windows(*job_a(), [at(0)])
    with pytest.raises(DomainError):
        runtime_goodput_windows(*job_a(), [at(5), at(5)])


# ---------------------------------------------------------------------------------------------------
# Factor, summary, several jobs, options
# ---------------------------------------------------------------------------------------------------


def test_factor_carries_the_contract():
    m = runtime_goodput(*job_a(), clean_end_commit=False)
    f = m.to_factor()
    assert isinstance(f, Factor) and f.boundary == "runtime"
    assert f.value == pytest.approx(10.2 / 40)
    assert f.numerator_unit == "s" and f.record == "job timeline"
    assert f.window.same_as(Window.between(at(0), at(40)))
    assert "committed" in f.convention and "median" in f.convention
    assert f.losses["progress_at_risk"] == pytest.approx(4.0)
    assert f.losses["unattributed"] == pytest.approx(0.0, abs=1e-9)


def test_factor_with_steps_faster_than_the_baseline():
    steps = [(0, 0, 1.0, 3.0), (0, 1, 3.0, 5.0), (0, 2, 5.0, 6.9)]
    events = [(0, 0.0, "gang_complete"), (0, 6.9, "checkpoint_commit", 2), (0, 7.0, "release")]
    m = runtime_goodput(*tables_from_seconds(steps, events), fault_free_step_s=2.0)
    # the slow-step time is signed and lies inside productive time: nothing to hide in unattributed
    assert m.slow_step_s == pytest.approx(-0.1) and m.productive_s == pytest.approx(5.9)
    assert m.partition_error_s == pytest.approx(0.0, abs=1e-9)
    f = m.to_factor()
    assert f.numerator == pytest.approx(5.9)
    assert f.losses["unattributed"] == pytest.approx(0.0, abs=1e-9)
    assert "slow-step time" in f.convention


def test_factor_refuses_a_window_without_held_time():
    m = runtime_goodput(*job_b(), window=(at(15), at(25)))
    assert m.runtime_goodput is None and m.not_held_s == pytest.approx(10.0)
    assert m.queue_after_interruption_s == pytest.approx(10.0)
    with pytest.raises(DomainError, match="no held time"):
        m.to_factor()
    with pytest.raises(DomainError):
        m.shares()


def test_measurement_to_dict_is_json_ready():
    import json
    d = runtime_goodput(*job_b()).to_dict()
    text = json.dumps(d)
    assert '"restore_step": 1.0' in text and d["interruptions"][0]["in_window"] is True
    assert d["per_job"][0]["job_id"] == "b" and d["categories"]["preemption"] == pytest.approx(13.0)
    assert json.loads(text)["ledger"]["read"] == 14


def test_runtime_summary_is_the_cli_object():
    out = runtime_summary(*job_a())
    for key in ("runtime_goodput", "held_s", "productive_s", "terms", "fault_free_step_s", "definition",
                "ledger"):
        assert key in out
    assert tuple(out["terms"]) == ISSUE_TERMS
    assert out["fault_free_step_s"] == pytest.approx(2.0)
    total = out["productive_s"] + sum(out["terms"].values())
    assert total == pytest.approx(out["held_s"])
    assert out["ledger"]["read"] == 15 and out["definition"] == "committed"
    import json
    json.dumps(out)
    retro = runtime_summary(*job_a(), definition="retrospective", window=(at(0), at(20)))
    assert retro["held_s"] == pytest.approx(20.0)


def test_several_jobs_add_their_held_time():
    sa, ea = job_a()
    sb, eb = job_b()
    m = runtime_goodput(pd.concat([sa, sb], ignore_index=True), pd.concat([ea, eb], ignore_index=True))
    assert m.held_s == pytest.approx(63.0)
    assert m.productive_s == pytest.approx(22.2)  # job a 14.2 (its clean end commits steps 5, 6) + job b 8
    assert set(m.per_job.index) == {"a", "b"}
    assert m.per_job.loc["b", "preemption"] == pytest.approx(13.0)
    assert m.not_held_s == pytest.approx((42 - 40) + 19.0)  # each job over the span [0, 42)
    only_b = runtime_goodput(pd.concat([sa, sb]), pd.concat([ea, eb]), job_id="b")
    assert only_b.held_s == pytest.approx(23.0)


def test_bad_options():
    s, e = job_a()
    with pytest.raises(DomainError, match="definition"):
        runtime_goodput(s, e, definition="final")
    with pytest.raises(DomainError, match="estimator"):
        runtime_goodput(s, e, estimator="mode")
    with pytest.raises(DomainError):
        runtime_goodput(s, e, warmup_tolerance=-0.1)
    with pytest.raises(DomainError, match="has no zone"):
        runtime_goodput(s, e, window=("2024-01-01", "2024-01-02"))
    with pytest.raises(DomainError, match="after"):
        runtime_goodput(s, e, window=(at(10), at(5)))
    with pytest.raises(DomainError, match="nominal"):
        runtime_goodput(s, e, window=Window.nominal("a week"))
    with pytest.raises(DomainError, match="> 0"):
        runtime_goodput(s, e, fault_free_step_s=0.0)


def test_job_with_no_steps_is_all_startup():
    s, e = tables_from_seconds([], [(0, 0.0, "gang_complete"), (0, 50.0, "release")])
    m = runtime_goodput(s, e)
    assert m.categories["startup"] == pytest.approx(50.0) and m.fault_free_step_s == {"job": None}
    assert m.runtime_goodput == 0.0


# ---------------------------------------------------------------------------------------------------
# Properties on synthetic timelines
# ---------------------------------------------------------------------------------------------------

timelines = st.fixed_dictionaries({
    "n": st.integers(1, 120),
    "seed": st.integers(0, 10_000),
    "failure_rate_per_h": st.sampled_from([0.0, 40.0, 150.0]),
    "preemption_rate_per_h": st.sampled_from([0.0, 40.0]),
    "checkpoint_every_steps": st.integers(1, 25),
    "async_checkpoint": st.booleans(),
    "input_wait_prob": st.sampled_from([0.0, 0.4]),
    "eval_every_steps": st.sampled_from([0, 9]),
    "hang_s": st.sampled_from([0.0, 15.0]),
    "final_checkpoint": st.booleans(),
    "failure_requeue_s": st.sampled_from([None, 50.0]),
})


def make(p):
    return synth_timeline(p["n"], seed=p["seed"], step_s=1.0, failure_rate_per_h=p["failure_rate_per_h"],
                          preemption_rate_per_h=p["preemption_rate_per_h"],
                          checkpoint_every_steps=p["checkpoint_every_steps"], checkpoint_write_s=3.0,
                          async_checkpoint=p["async_checkpoint"] and p["checkpoint_every_steps"] > 3,
                          checkpoint_stage_s=0.5, input_wait_prob=p["input_wait_prob"], startup_s=20.0,
                          eval_every_steps=p["eval_every_steps"], eval_s=4.0, hang_s=p["hang_s"],
                          final_checkpoint=p["final_checkpoint"], failure_requeue_s=p["failure_requeue_s"],
                          detect_s=5.0, failure_restart_s=30.0, preemption_queue_s=40.0,
                          preemption_restart_s=20.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=timelines, definition=st.sampled_from(["committed", "retrospective"]),
       a=st.floats(0, 1), b=st.floats(0, 1))
def test_partition_sums_to_held_time_in_any_window(p, definition, a, b):
    steps, events, truth = make(p)
    whole = runtime_goodput(steps, events, definition=definition)
    assert whole.held_s == pytest.approx(truth["held_s"], abs=1e-6)
    assert math.fsum(whole.categories.values()) == pytest.approx(whole.held_s, abs=1e-6)
    span = (whole.window_end - whole.window_start).total_seconds()
    lo, hi = sorted((a, b))
    if hi - lo < 1e-6:
        return
    m = runtime_goodput(steps, events, definition=definition,
                        window=(at(lo * span), at(hi * span)))
    assert math.fsum(m.categories.values()) == pytest.approx(m.held_s, abs=1e-6)
    assert m.held_s + m.not_held_s == pytest.approx((hi - lo) * span, abs=1e-6)
    assert all(m.categories[k] >= -1e-9 for k in CATEGORIES if k != "productive")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=timelines, cuts=st.lists(st.floats(0.01, 0.99), min_size=1, max_size=4, unique=True))
def test_adjacent_windows_add_up_to_the_whole(p, cuts):
    steps, events, _ = make(p)
    whole = runtime_goodput(steps, events, as_of="data_end")
    span = (whole.window_end - whole.window_start).total_seconds()
    edges = [whole.window_start] + [at(c * span) for c in sorted(cuts)] + [whole.window_end]
    # two cuts closer than a nanosecond land on one edge; the windows need strictly rising edges
    edges = list(dict.fromkeys(edges))
    fixed = runtime_goodput_windows(steps, events, edges, as_of="data_end")
    for k in CATEGORIES:
        assert math.fsum(w.categories[k] for w in fixed) == pytest.approx(whole.categories[k], abs=1e-6), k
    assert math.fsum(w.queue_after_interruption_s for w in fixed) == \
        pytest.approx(whole.queue_after_interruption_s, abs=1e-6)
    # with the closing rule (commits judged at each window's end) only productive time may move
    # to progress at risk; every other category still adds up
    closing = runtime_goodput_windows(steps, events, edges)
    for k in CATEGORIES:
        if k in ("productive", "progress_at_risk"):
            continue
        assert math.fsum(w.categories[k] for w in closing) == pytest.approx(whole.categories[k], abs=1e-6), k
    retained = math.fsum(w.categories["productive"] + w.categories["progress_at_risk"] for w in closing)
    assert retained == pytest.approx(whole.categories["productive"] + whole.categories["progress_at_risk"],
                                     abs=1e-6)
    assert math.fsum(w.categories["productive"] for w in closing) <= whole.categories["productive"] + 1e-6


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), extra=st.floats(1.0, 500.0))
def test_longer_downtime_never_raises_runtime_goodput(seed, extra):
    base = dict(seed=seed, step_s=1.0, failure_rate_per_h=60.0, checkpoint_every_steps=10, startup_s=5.0)
    s1, e1, _ = synth_timeline(80, failure_restart_s=10.0, **base)
    s2, e2, _ = synth_timeline(80, failure_restart_s=10.0 + extra, **base)
    r1 = runtime_goodput(s1, e1).runtime_goodput
    r2 = runtime_goodput(s2, e2).runtime_goodput
    assert r2 <= r1 + 1e-12


def test_held_intervals_cover_held_time_without_overlap():
    from fleetlib.runtime.goodput import held_intervals
    from fleetlib.runtime.schema import HELD_INTERVAL_COLUMNS
    from fleetlib.runtime.synth import synth_timeline

    steps, events, _truth = synth_timeline(3000, seed=3, step_s=2.0, failure_rate_per_h=0.8,
                                           preemption_rate_per_h=0.3, checkpoint_every_steps=100,
                                           checkpoint_write_s=5.0, input_wait_prob=0.05)
    intervals = held_intervals(steps, events)
    assert tuple(intervals.columns) == HELD_INTERVAL_COLUMNS
    held = intervals[intervals["record"] != "between"]
    measured = runtime_goodput(steps, events, definition="committed")
    # second method: the labelled pieces of held time add up to the measured held time
    assert held["duration_s"].sum() == pytest.approx(measured.held_s, rel=1e-9)
    ordered = intervals.sort_values("start")
    overlap = (ordered["start"].iloc[1:].to_numpy() < ordered["end"].iloc[:-1].to_numpy()).sum()
    assert overlap == 0
    assert set(held["category"]) >= {"productive", "checkpoint"}


def test_checkpoint_and_evaluation_markers_pair_by_hand():
    # keyed and unkeyed begins, two begins reaching one commit (the later pairs), a commit whose logged
    # duration is its only pause, an evaluation closed by its end and one never closed, a second
    # attempt continuing the run with its own checkpoint
    ev = [(0, 0.0, "gang_complete"), (0, 5.0, "checkpoint_begin", 1), (0, 6.0, "checkpoint_begin", 1),
          (0, 7.0, "checkpoint_commit", 1), (0, 8.0, "checkpoint_begin"), (0, 9.0, "checkpoint_commit", 2),
          (0, 11.0, "checkpoint_commit", 3, 0.5), (0, 12.0, "eval_begin", None, 1.25), (0, 13.0, "eval_end"),
          (0, 14.0, "eval_begin"), (0, 20.0, "release"), (1, 30.0, "gang_complete"),
          (1, 31.0, "checkpoint_begin", 4), (1, 33.0, "checkpoint_commit", 4), (1, 40.0, "release")]
    st_ = [(0, 1, 1.0, 4.0), (0, 2, 4.0, 5.0), (0, 3, 9.5, 10.5), (1, 4, 30.5, 30.9)]
    m = runtime_goodput(*tables_from_seconds(st_, ev), fault_free_step_s=1.0, definition="retrospective")
    # checkpoint: 5-6 (the begin the later one outruns, cut at the next marker) and 6-7 merge into 5-7;
    # 8-9 (no step: the next commit); 10.5-11 (the commit's 0.5 s); 31-33 in the second attempt
    # evaluation: 12-13 (its end before its 1.25 s), 14-20 (never closed: to the release)
    # startup: 0-1 and 30-30.5, plus the first step's warm-up excess (3 s at a 1 s baseline: 2 s)
    # idle: 11-12 and 13-14 after the attempt's last step, 30.9-31 and 33-40 in the second
    # unattributed: 7-8 and 9-9.5 between steps, explained by no record
    assert_categories(m, {"productive": 3.4, "startup": 3.5, "checkpoint": 5.5, "evaluation": 7.0,
                          "idle": 9.1, "unattributed": 1.5})
    assert m.held_s == pytest.approx(30.0) and m.checkpoint_pauses == 4 and m.checkpoint_commits == 4


def _single_jobs(steps: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    rows = [runtime_goodput(steps[steps["job_id"] == j], events[events["job_id"] == j]).per_job
            for j in sorted(set(events["job_id"]))]
    return pd.concat(rows)


def test_jobs_measured_together_measure_as_each_alone():
    # every category is a per-job sum and the baseline is estimated per job: a job's numbers do not
    # depend on the jobs measured beside it (what lets the fleet walk measure one partition per task)
    parts = [job_a("a"), job_b("b"), job_c(), job_b("d", cold=True)]
    parts.append(synth_timeline(300, seed=4, failure_rate_per_h=6.0, preemption_rate_per_h=3.0,
                                checkpoint_every_steps=20, input_wait_prob=0.2, eval_every_steps=60,
                                job_id="e")[:2])
    steps = pd.concat([p[0] for p in parts], ignore_index=True).sample(frac=1.0, random_state=1)
    events = pd.concat([p[1] for p in parts], ignore_index=True)
    together = runtime_goodput(steps, events).per_job
    alone = _single_jobs(steps, events)
    pd.testing.assert_frame_equal(together, alone, check_exact=False, rtol=1e-12, atol=1e-9)


def test_the_first_bad_job_in_job_order_is_the_one_named():
    s1, e1 = job_a("a")
    s2, e2 = job_a("b")
    s3, e3 = job_a("c")
    # job c: a commit of a step not yet run; job b: released before its gang completes
    e3 = pd.concat([e3, tables_from_seconds([], [(0, 0.5, "checkpoint_commit", 9)], job_id="c")[1]])
    e2 = e2.assign(time=e2["time"].where(e2["kind"] != "release", at(-1)))
    steps = pd.concat([s3, s2, s1], ignore_index=True)
    events = pd.concat([e3, e2, e1], ignore_index=True)
    with pytest.raises(InputError, match="attempt 0 of job 'b' is released before its gang completes"):
        runtime_goodput(steps, events)
