"""Exclusion windows in the runtime rung: held time and every part of it leave the excluded stretch."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from fleetlib.accounting import Window
from fleetlib.quality import DomainError
from fleetlib.runtime import measure, runtime_goodput
from fleetlib.runtime.commands import render_runtime, run_runtime
from fleetlib.runtime.synth import synth_timeline, write_timeline
from fleetlib.runtime.timeline import tables_from_seconds

ORIGIN = pd.Timestamp("2024-01-01T00:00:00Z")


def at(seconds: float) -> pd.Timestamp:
    return ORIGIN + pd.Timedelta(seconds=seconds)


def steady_job() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Gang complete at 0 s, 80 one-second steps from 10 s to 90 s, a commit at 92 s, release at 100 s."""
    steps = [(0, k, 10.0 + k, 11.0 + k) for k in range(80)]
    events = [(0, 0.0, "gang_complete"), (0, 90.0, "checkpoint_begin", 79),
              (0, 92.0, "checkpoint_commit", 79), (0, 100.0, "release")]
    return tables_from_seconds(steps, events)


def test_an_excluded_stretch_of_steps_leaves_held_and_productive_time_as_computed_by_hand():
    steps, events = steady_job()
    whole = runtime_goodput(steps, events, window=(at(0), at(100)))
    win = Window.between(at(0), at(100)).excluding([(at(30), at(50))])
    m = runtime_goodput(steps, events, window=win)
    # by hand: the 20 s excluded hold 20 whole one-second steps, all retained by the commit at 92 s
    assert whole.held_s == 100.0 and m.held_s == 80.0
    assert whole.productive_s == 80.0 and m.productive_s == 60.0
    assert m.runtime_goodput == pytest.approx(0.75, abs=1e-15)
    assert {k: v for k, v in m.categories.items() if k != "productive"} == \
        {k: v for k, v in whole.categories.items() if k != "productive"}
    assert m.retained_steps == 60.0 and m.checkpoint_commits == 1
    f = m.factor()
    assert (f.numerator, f.denominator) == (60.0, 80.0) and f.window.same_as(win)
    assert m.to_dict()["window"]["exclusions"] == [
        {"start": "2024-01-01T00:00:30+00:00", "end": "2024-01-01T00:00:50+00:00", "seconds": 20.0}]
    assert "excluded_time" in m.ledger.codes()


def test_excluding_a_middle_stretch_gives_the_sums_of_the_two_sides_measured_apart():
    steps, events, _ = synth_timeline(3000, seed=5, failure_rate_per_h=2.0, preemption_rate_per_h=0.5,
                                      input_wait_prob=0.1, step_jitter=0.05, eval_every_steps=500)
    t0 = events["time"].min()
    t3 = events["time"].max()
    t1, t2 = t0 + pd.Timedelta(seconds=700.25), t0 + pd.Timedelta(seconds=1900.5)
    opts = {"as_of": "data_end", "definition": "committed"}  # one commit instant for all three sums
    cut = runtime_goodput(steps, events, window=Window.between(t0, t3).excluding([(t1, t2)]), **opts)
    left = runtime_goodput(steps, events, window=(t0, t1), **opts)
    right = runtime_goodput(steps, events, window=(t2, t3), **opts)
    assert cut.held_s == pytest.approx(left.held_s + right.held_s, rel=1e-12)
    for name, value in cut.breakdown.items():
        both = left.breakdown[name] + right.breakdown[name]
        assert math.isclose(value, both, rel_tol=1e-9, abs_tol=1e-6), name
    for name in ("not_held_s", "queue_after_interruption_s", "retained_steps", "committed_steps"):
        assert math.isclose(getattr(cut, name), getattr(left, name) + getattr(right, name),
                            rel_tol=1e-12, abs_tol=1e-9), name
    assert cut.checkpoint_commits == left.checkpoint_commits + right.checkpoint_commits
    assert cut.interruptions["in_window"].sum() == left.interruptions["in_window"].sum() + \
        right.interruptions["in_window"].sum()


def test_the_command_takes_exclude_and_lists_it(tmp_path):
    steps, events = steady_job()
    path = write_timeline(steps, events, tmp_path / "job.parquet")
    win = ["2024-01-01T00:00:00Z", "2024-01-01T00:01:40Z"]
    cut = ["2024-01-01T00:00:30Z", "2024-01-01T00:00:50Z"]
    res = run_runtime([path], "canonical", window=win, exclude=[cut], definition="retrospective")
    assert res["held_s"] == 80.0 and res["productive_s"] == 60.0
    assert res["window"]["excluded_s"] == 20.0
    text = render_runtime(res)
    assert "excluded                 0.01 h in 1 interval(s)" in text
    assert "[2024-01-01T00:00:30+00:00, 2024-01-01T00:00:50+00:00)" in text
    assert any(f["code"] == "excluded_time" for f in res["ledger"]["flags"])
    with pytest.raises(DomainError) as err:
        run_runtime([path], "canonical", exclude=[cut])
    assert str(err.value) == "--exclude needs --window START END: the exclusions lie inside the window"
    with pytest.raises(DomainError) as err:
        run_runtime([path], "canonical", window=win, exclude=[["2024-01-01T00:00:30", cut[1]]])
    assert str(err.value) == ("exclusion start '2024-01-01T00:00:30' has no zone; write it with one, for "
                              "example '2024-01-01T00:00:30Z' for UTC")
    m = measure(path, format="canonical", window=win, exclude=[tuple(cut)])
    assert m.held_s == 80.0 and "excluded_time" in m.ledger.codes()
