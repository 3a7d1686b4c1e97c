"""Regression tests: the ml-goodput-measurement failure cases of field notes job_timeline.md section 3.5.

Scenario of the field notes (every time in seconds after the job starts): the gang completes at 0;
steps 0-9 of 10 s each run from t = 10; a crash at t = 115; 60 s of downtime; the restart at t = 175;
20 s of re-initialisation; training resumes at t = 195.  The allocation stays held through the outage
(the field notes' totals include the downtime).  Our timeline logs the restart explicitly: a
``restore`` event naming the checkpointed step the job resumes after.
"""

import pandas as pd
import pytest

from fleetlib.quality import InputError
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.timeline import tables_from_seconds

T0 = pd.Timestamp("2024-01-01T00:00:00Z")


def at(seconds):
    return T0 + pd.Timedelta(seconds=seconds)


def scenario(resume_at, *, log_restart=True, log_failure=True):
    """The field-notes job, resuming at step ``resume_at`` and running to step 14."""
    steps = [(0, i, 10.0 + 10 * i, 20.0 + 10 * i) for i in range(10)]
    committed = resume_at - 1  # the checkpoint the restart resumes after
    events = [(0, 0.0, "gang_complete")]
    # the checkpoint the job resumes from: an emergency checkpoint right after step 9 (resume at 10),
    # or the periodic one after step 4 (resume at 5)
    events.append((0, 20.0 + 10 * committed, "checkpoint_commit", committed))
    if log_failure:
        events.append((0, 115.0, "failure"))
    if log_restart:
        events.append((0, 175.0, "restore", committed))
    t = 195.0
    for i in range(resume_at, 15):
        steps.append((0, i, t, t + 10.0))
        t += 10.0
    events += [(0, t, "checkpoint_commit", 14), (0, t, "release")]
    return tables_from_seconds(steps, events, origin=T0)


def test_restart_at_the_next_step_is_not_counted_as_productive():
    # ml-goodput-measurement infers restarts from a repeated step number only; resuming at step 10
    # repeats none, so it reports 0 disruptions and 95.9 % goodput (the outage becomes step 9's
    # "productive" time).  Truth: 15 retained steps x 10 s over 245 s held = 61.2 %.
    steps, events = scenario(10)
    m = runtime_goodput(steps, events)
    assert m.held_s == pytest.approx(245.0)
    assert m.runtime_goodput == pytest.approx(150 / 245)
    assert round(m.runtime_goodput, 3) == 0.612
    assert m.runtime_goodput != pytest.approx(0.959, abs=0.01)  # the tool's answer
    # the outage is charged to the failure: 5 s partial step lost, 60 s down + 20 s re-init
    assert m.categories["rework"] == pytest.approx(5.0)
    assert m.categories["recovery"] == pytest.approx(80.0)
    assert m.categories["startup"] == pytest.approx(10.0)
    assert m.partition_error_s == pytest.approx(0.0, abs=1e-9)
    assert len(m.interruptions) == 1 and not m.ledger.flags


def test_resume_at_step_five_matches_the_field_notes():
    steps, events = scenario(5)
    m = runtime_goodput(steps, events)
    assert m.runtime_goodput == pytest.approx(150 / 295)  # 50.8 %
    assert m.categories["rework"] == pytest.approx(55.0)   # steps 5-9 and the 5 s partial step
    assert m.categories["recovery"] == pytest.approx(80.0)  # 60 s downtime + 20 s re-init
    # the whole-job window gives the cumulative value (the tool's interval API gave 52.6 %)
    whole = runtime_goodput(steps, events, window=(at(0), at(295)))
    assert whole.runtime_goodput == pytest.approx(m.runtime_goodput)
    assert whole.runtime_goodput != pytest.approx(0.526, abs=0.005)


def test_window_spanning_the_outage_charges_the_outage():
    # the tool returns 0 % with an empty breakdown for [90, 200]; the truth is 5 s of 110 s
    # (retrospective), with rework 25 s (steps 8, 9 and the partial step) and 80 s of recovery
    steps, events = scenario(5)
    window = (at(90), at(200))
    retro = runtime_goodput(steps, events, window=window, definition="retrospective")
    assert retro.held_s == pytest.approx(110.0)
    assert retro.runtime_goodput == pytest.approx(5 / 110)
    assert retro.categories["rework"] == pytest.approx(25.0)
    assert retro.categories["recovery"] == pytest.approx(80.0)
    assert retro.partition_error_s == pytest.approx(0.0, abs=1e-9)
    # committed definition with the chapter's closing rule: the re-run step 5 is still uncommitted
    # when the window closes, so its 5 s are progress at risk, and the breakdown is still complete
    committed = runtime_goodput(steps, events, window=window)
    assert committed.productive_s == pytest.approx(0.0)
    assert committed.categories["progress_at_risk"] == pytest.approx(5.0)
    assert committed.categories["rework"] == pytest.approx(25.0)
    assert sum(committed.categories.values()) == pytest.approx(110.0)


def test_window_inside_the_outage_is_all_recovery():
    # the tool raises ValueError for [120, 170]; it is a valid window with zero productive time
    steps, events = scenario(5)
    m = runtime_goodput(steps, events, window=(at(120), at(170)))
    assert m.runtime_goodput == 0.0
    assert m.held_s == pytest.approx(50.0)
    assert m.categories["recovery"] == pytest.approx(50.0)
    assert m.to_factor().value == 0.0
    assert m.to_factor().losses["recovery"] == pytest.approx(50.0)


def test_window_outside_held_time_is_valid_and_has_no_goodput():
    steps, events = scenario(5)
    m = runtime_goodput(steps, events, window=(at(400), at(500)))
    assert m.held_s == 0.0 and m.runtime_goodput is None
    assert m.not_held_s == pytest.approx(100.0)


def test_an_unlogged_outage_is_never_productive():
    # with neither failure nor restore logged, the 85 s gap between step 9 and step 10 is held time
    # nothing explains: it is shown as unattributed, not credited as productive
    steps, events = scenario(10, log_restart=False, log_failure=False)
    m = runtime_goodput(steps, events)
    assert m.runtime_goodput == pytest.approx(150 / 245)
    assert m.categories["unattributed"] == pytest.approx(85.0)


def test_a_logged_failure_with_no_restart_is_refused():
    steps, events = scenario(10, log_restart=False)
    with pytest.raises(InputError, match="no restart"):
        runtime_goodput(steps, events)


def test_repeated_step_numbers_are_only_a_flagged_fallback():
    # resume at step 5 with the failure logged but no restore: the restart is inferred from the
    # repeated step number, flagged, and the numbers still come out right
    steps, events = scenario(5, log_restart=False)
    m = runtime_goodput(steps, events)
    assert m.runtime_goodput == pytest.approx(150 / 295)
    assert [f.code for f in m.ledger.flags] == ["restart_inferred_from_step_numbers"]
