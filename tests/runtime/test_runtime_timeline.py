"""Canonical timeline tables: validation, ledger, flags, and the restart structure."""

import pandas as pd
import pytest

from fleetlib.quality import InputError
from fleetlib.runtime.goodput import held_intervals, runtime_goodput
from fleetlib.runtime.schema import EVENT_COLUMNS, EVENT_KINDS, STEP_COLUMNS
from fleetlib.runtime.timeline import tables_from_seconds, validate_timeline

T0 = pd.Timestamp("2024-01-01T00:00:00Z")


def basic():
    """Cold start 5 s, steps 0-3 of 2 s, commit after step 3, release."""
    steps = [(0, i, 5.0 + 2 * i, 7.0 + 2 * i) for i in range(4)]
    events = [(0, 0.0, "gang_complete"), (0, 13.0, "checkpoint_begin", 3), (0, 14.0, "checkpoint_commit", 3),
              (0, 15.0, "release")]
    return tables_from_seconds(steps, events)


def restart_job(*, restore=True):
    """Steps 0-5, commit of 2, failure, restore to 2 (or not logged), steps 3-4 again, commit, release."""
    steps = [(0, i, 1.0 + i, 2.0 + i) for i in range(6)]
    events = [(0, 0.0, "gang_complete"), (0, 4.0, "checkpoint_commit", 2), (0, 7.5, "failure"),
              (0, 8.0, "failure_detected")]
    if restore:
        events.append((0, 10.0, "restore", 2))
    steps += [(0, 3, 11.0, 12.0), (0, 4, 12.0, 13.0)]
    events += [(0, 13.0, "checkpoint_commit", 4), (0, 14.0, "release")]
    return tables_from_seconds(steps, events)


def test_clean_timeline_passes_with_a_balanced_ledger():
    s, e = basic()
    steps, events, ledger = validate_timeline(s, e)
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert list(events.columns) == list(EVENT_COLUMNS)
    assert ledger.read == 8 and ledger.kept == 8 and ledger.balanced()
    assert not ledger.flags
    assert str(steps["start"].dtype) == "datetime64[ns, UTC]"
    assert events["step"].isna().sum() == 2


def test_events_may_omit_the_nullable_columns():
    s, e = basic()
    plain = e[~e["kind"].str.startswith("checkpoint")].drop(columns=["step", "duration_s"])
    _, events, ledger = validate_timeline(s, plain)
    assert list(events.columns) == list(EVENT_COLUMNS)
    assert events["step"].isna().all() and ledger.balanced()
    with pytest.raises(InputError, match="commit must say"):
        validate_timeline(s, e.drop(columns=["step"]))


def test_every_event_kind_is_documented():
    for kind in ("gang_complete", "release", "first_step", "cold_start", "checkpoint_begin",
                 "checkpoint_commit", "failure", "failure_detected", "restore", "preempt", "eval_begin",
                 "eval_end", "hang_begin", "idle_begin"):
        assert EVENT_KINDS.get(kind)


def test_step_ending_before_it_starts():
    s, e = basic()
    s.loc[2, "end"] = s.loc[2, "start"] - pd.Timedelta(seconds=1)
    with pytest.raises(InputError) as err:
        validate_timeline(s, e, source="t.csv")
    # a table built in code has no provenance columns: it is named by label and 1-based position
    assert err.value.row == 3 and err.value.field == "end" and err.value.file == "t.csv (steps)"


def test_missing_input_wait_column_is_refused():
    s, e = basic()
    with pytest.raises(InputError, match="rule 22") as err:
        validate_timeline(s.drop(columns="input_wait_s"), e)
    assert err.value.field == "input_wait_s"


def test_input_wait_longer_than_the_step_or_negative():
    s, e = basic()
    s.loc[1, "input_wait_s"] = 3.0
    with pytest.raises(InputError, match="longer than the step"):
        validate_timeline(s, e)
    s.loc[1, "input_wait_s"] = -0.1
    with pytest.raises(InputError, match=">= 0"):
        validate_timeline(s, e)


def test_naive_and_mixed_timezones():
    s, e = basic()
    naive = s.copy()
    naive["start"] = naive["start"].dt.tz_localize(None)
    with pytest.raises(InputError, match="naive"):
        validate_timeline(naive, e)
    mixed = e.copy()
    mixed["time"] = pd.Series([t if i != 2 else t.tz_localize(None) for i, t in enumerate(e["time"])],
                              dtype=object)
    with pytest.raises(InputError, match="mixed") as err:
        validate_timeline(s, mixed)
    assert err.value.row == 3
    # other zones are the same instants and convert silently
    other = e.copy()
    other["time"] = other["time"].dt.tz_convert("Europe/Paris")
    _, events, ledger = validate_timeline(s, other)
    assert (events["time"] == e["time"]).all() and ledger.balanced()


def test_exact_duplicate_step_is_rejected_and_conflicting_one_raises():
    s, e = basic()
    dup = pd.concat([s, s.iloc[[1]]], ignore_index=True)
    steps, _, ledger = validate_timeline(dup, e)
    assert len(steps) == 4
    assert ledger.rejected == 1 and ledger.entries[0].row == 5 and "duplicate" in ledger.entries[0].reason
    assert "step row 2 of timeline (steps)" in ledger.entries[0].reason
    assert ledger.read == 9 and ledger.balanced()
    conflict = s.iloc[[1]].copy()
    conflict["end"] = conflict["end"] + pd.Timedelta(seconds=0.5)
    with pytest.raises(InputError, match="overlap"):
        validate_timeline(pd.concat([s, conflict], ignore_index=True), e)


def test_events_out_of_order_are_sorted_and_flagged_as_a_repair():
    s, e = basic()
    shuffled = e.iloc[[0, 2, 1, 3]].reset_index(drop=True)
    _, events, ledger = validate_timeline(s, shuffled)
    assert list(events["kind"]) == ["gang_complete", "checkpoint_begin", "checkpoint_commit", "release"]
    assert ledger.repaired == 1 and ledger.entries[0].row == 3
    assert "time order" in ledger.entries[0].reason and ledger.balanced()


def test_restore_to_a_step_never_committed():
    s, e = restart_job()
    e.loc[e["kind"] == "restore", "step"] = 3
    with pytest.raises(InputError, match="no checkpoint of step 3"):
        validate_timeline(s, e)


def test_failure_with_no_restart():
    s, e = restart_job(restore=False)
    s = s[~((s["step"] < 5) & (s["start"] > T0 + pd.Timedelta(seconds=10)))]  # drop the re-run steps
    s = pd.concat([s, tables_from_seconds([(0, 6, 11.0, 12.0)], [])[0]], ignore_index=True)
    e = e[~((e["kind"] == "checkpoint_commit") & (e["step"] == 4))]
    with pytest.raises(InputError, match="no restart"):
        validate_timeline(s, e)


def test_missing_gang_complete_and_records_outside_held_time():
    s, e = basic()
    with pytest.raises(InputError, match="gang_complete"):
        validate_timeline(s, e[e["kind"] != "gang_complete"])
    late = s.copy()
    late.loc[3, "end"] = T0 + pd.Timedelta(seconds=20)
    with pytest.raises(InputError, match="outside"):
        validate_timeline(late, e)


def test_overlapping_attempts_and_checkpoint_of_a_step_not_run():
    s, e = basic()
    extra = tables_from_seconds([], [(1, 10.0, "gang_complete"), (1, 20.0, "release")])[1]
    with pytest.raises(InputError, match="overlap"):
        validate_timeline(s, pd.concat([e, extra], ignore_index=True))
    early = e.copy()
    early.loc[early["kind"] == "checkpoint_commit", "step"] = 9
    with pytest.raises(InputError, match="before any step"):
        validate_timeline(s, early)


def test_step_running_across_a_failure():
    s, e = basic()
    fail = tables_from_seconds([], [(0, 8.0, "failure")])[1]
    with pytest.raises(InputError, match="across"):
        validate_timeline(s, pd.concat([e, fail], ignore_index=True))


def test_first_step_after_restore_must_follow_it():
    s, e = restart_job()
    e.loc[e["kind"] == "restore", "step"] = 2
    bad = s.copy()
    bad.loc[bad.index[-2], "step"] = 2
    with pytest.raises(InputError, match="resumes after"):
        validate_timeline(bad, e)


def test_unknown_kind_is_kept_and_flagged():
    s, e = basic()
    odd = tables_from_seconds([], [(0, 6.0, "weird_marker")])[1]
    both = pd.concat([e, odd], ignore_index=True).sort_values("time", kind="stable")
    _, events, ledger = validate_timeline(s, both)
    assert "weird_marker" in set(events["kind"])
    assert [f.code for f in ledger.flags] == ["unknown_event_kind"]
    assert ledger.kept == ledger.read


def _phases(steps: pd.DataFrame, events: pd.DataFrame) -> list[str]:
    """Each executed step's phase, in time order: steady, warm-up or erased (by a later restart)."""
    held = held_intervals(steps, events, fault_free_step_s=1.0)
    return held.loc[held["record"] == "step", "phase"].tolist()


def test_missing_release_is_flagged():
    s, e = basic()
    _, _, ledger = validate_timeline(s, e[e["kind"] != "release"])
    assert [f.code for f in ledger.flags] == ["release_missing"]
    m = runtime_goodput(s, e[e["kind"] != "release"])
    assert m.held_s == pytest.approx(14.0)  # held time ends at the last record
    assert m.window_end == T0 + pd.Timedelta(seconds=14)


def test_erasure_structure_of_a_restart():
    s, e = restart_job()
    m = runtime_goodput(s, e, fault_free_step_s=1.0)
    assert not m.ledger.flags
    # steps 3, 4, 5 of the first run were erased by the failure's restart; the re-runs were not
    assert _phases(s, e) == ["steady"] * 3 + ["erased"] * 3 + ["steady"] * 2
    (row,) = m.interruptions.to_dict(orient="records")
    assert row["kind"] == "failure" and row["detection_s"] == pytest.approx(0.5)  # detected at 8.0
    assert row["restore_step"] == 2 and not row["inferred"]
    assert row["lost_steps_s"] == pytest.approx(3.0)


def test_inferred_restart_and_terminal_failure_are_flagged():
    s, e = restart_job(restore=False)
    m = runtime_goodput(s, e, fault_free_step_s=1.0)
    assert [f.code for f in m.ledger.flags] == ["restart_inferred_from_step_numbers"]
    assert _phases(s, e) == ["steady"] * 3 + ["erased"] * 3 + ["steady"] * 2
    # a failure the job never recovers from: uncommitted work is charged to it
    steps = [(0, i, 1.0 + i, 2.0 + i) for i in range(4)]
    events = [(0, 0.0, "gang_complete"), (0, 3.0, "checkpoint_commit", 1), (0, 5.5, "failure"),
              (0, 6.0, "release")]
    s, e = tables_from_seconds(steps, events)
    m = runtime_goodput(s, e, fault_free_step_s=1.0)
    assert [f.code for f in m.ledger.flags] == ["terminal_interruption"]
    assert _phases(s, e) == ["steady"] * 2 + ["erased"] * 2
    assert m.interruptions["restore_step"].tolist() == [1]  # rolled back to the last commit


def test_restart_without_any_interruption_logged_becomes_an_unlogged_failure():
    steps = [(0, i, 1.0 + i, 2.0 + i) for i in range(4)] + [(1, 2, 21.0, 22.0), (1, 3, 22.0, 23.0)]
    events = [(0, 0.0, "gang_complete"), (0, 2.0, "checkpoint_commit", 0), (0, 3.0, "checkpoint_commit", 1),
              (0, 6.0, "release"), (1, 20.0, "gang_complete"), (1, 21.0, "restore", 1), (1, 24.0, "release")]
    s, e = tables_from_seconds(steps, events)
    m = runtime_goodput(s, e, fault_free_step_s=1.0)
    # the release at 24 s after the last step (23 s) is a clean end: it commits steps 2 and 3 again
    assert [f.code for f in m.ledger.flags] == ["unlogged_interruption", "clean_end_commit"]
    (row,) = m.interruptions.to_dict(orient="records")
    assert row["inferred"] and row["time"] == T0 + pd.Timedelta(seconds=5)  # the end of the last step
    assert _phases(s, e) == ["steady"] * 2 + ["erased"] * 2 + ["steady"] * 2


def test_chained_attempt_without_a_restore_continues_the_run():
    steps = [(0, 0, 1.0, 2.0), (0, 1, 2.0, 3.0), (1, 2, 11.0, 12.0)]
    events = [(0, 0.0, "gang_complete"), (0, 3.0, "checkpoint_commit", 1), (0, 4.0, "release"),
              (1, 10.0, "gang_complete"), (1, 12.0, "checkpoint_commit", 2), (1, 13.0, "release")]
    s, e = tables_from_seconds(steps, events)
    m = runtime_goodput(s, e, fault_free_step_s=1.0)
    assert not m.ledger.flags and "erased" not in _phases(s, e)
    assert m.interruptions.empty


def test_job_selection_and_unknown_job():
    s, e = basic()
    s2, e2 = tables_from_seconds([(0, 0, 1.0, 2.0)], [(0, 0.0, "gang_complete"), (0, 3.0, "release")],
                                 job_id="other")
    both = pd.concat([s, s2]), pd.concat([e, e2])
    assert list(runtime_goodput(*both).per_job.index) == ["job", "other"]
    assert list(runtime_goodput(*both, job_id="other").per_job.index) == ["other"]
    with pytest.raises(InputError, match="not in the timeline"):
        runtime_goodput(s, e, job_id="nope")


def test_held_intervals_round_trip_to_utc():
    s, e = basic()
    held = held_intervals(s, e)
    steps = held[held["record"] == "step"]
    assert steps["start"].tolist() == s["start"].tolist() and steps["end"].tolist() == s["end"].tolist()
    assert held["start"].iloc[0] == T0  # the gang completion starts the startup stretch
