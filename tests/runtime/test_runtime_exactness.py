"""Exactness of the runtime partition and of its event-kind flags.

* An exactly tiled timeline (steps, pauses with logged durations, nothing unexplained) leaves
  ``unattributed`` at exactly zero -- also far from the job's origin, where seconds since the origin
  no longer hold every nanosecond -- because instants and durations are formed in integer nanoseconds.
* The documented auxiliary event kinds are kept without a flag; other kinds are flagged, named as
  plain text.
* The memory-lean internals (chain positions, narrow job codes, rows kept implicit) agree with the
  plain computations they replace.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.quality import InputError
from fleetlib.runtime import readers as R
from fleetlib.runtime.goodput import runtime_goodput, runtime_summary
from fleetlib.runtime.schema import AUXILIARY_EVENT_KINDS
from fleetlib.runtime.timeline import tables_from_seconds, validate_timeline

DATA = Path(__file__).resolve().parents[2] / "data" / "timelines"
DEMO_JSONL = DATA / "maxtext-llama3-8b-demo_timeline.jsonl"
ORIGIN = pd.Timestamp("2025-03-04T09:00:00Z")
T_A_RELEASE_EARLY = pd.Timestamp("2024-01-01T00:00:02Z")  # job "a" (categorical test): before its step ends
FAR_NS = 10**16  # 1e7 s (115 days) after the gang completes: the float ulp there is ~2 ns


def _utc(ns: list[int]) -> pd.Series:
    return pd.Series(ORIGIN + pd.to_timedelta(np.asarray(ns, dtype=np.int64), unit="ns"))


def tiled(durations_ns: list[int], pauses: list[tuple[str, int]], *, startup_ns: int = 12_345_678_901
          ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """One job whose held time is tiled exactly: startup, then steps, each followed by its pause.

    ``pauses[k]`` follows step ``k``: ``("", 0)`` none, ``("ckpt", ns)`` a checkpoint_begin with a
    logged blocking duration, ``("eval", ns)`` an eval_begin with a logged duration, ``("commit", ns)``
    a pause known only from a commit's duration.  Returns the tables and the true seconds of each
    part in nanoseconds.
    """
    steps, events = [], [(0, "gang_complete", None, None)]
    t = startup_ns
    truth = {"startup": startup_ns, "steps": 0, "checkpoint": 0, "evaluation": 0}
    events.append((t, "first_step", None, None))
    for k, (d, (kind, p)) in enumerate(zip(durations_ns, pauses, strict=True)):
        steps.append((k, t, t + d))
        t += d
        truth["steps"] += d
        if kind == "ckpt":
            events.append((t, "checkpoint_begin", k, p / 1e9))
            events.append((t + p, "checkpoint_commit", k, None))  # lands as the next step starts
        elif kind == "eval":
            events.append((t, "eval_begin", None, p / 1e9))
        elif kind == "commit":
            events.append((t + p, "checkpoint_commit", k, p / 1e9))
        t += p
        truth["checkpoint" if kind in ("ckpt", "commit") else "evaluation"] += p
    events.append((t, "release", None, None))
    events.sort(key=lambda r: r[0])
    s = pd.DataFrame({"job_id": "job", "attempt": 0, "step": [r[0] for r in steps],
                      "start": _utc([r[1] for r in steps]), "end": _utc([r[2] for r in steps]),
                      "input_wait_s": 0.0})
    e = pd.DataFrame({"job_id": "job", "attempt": 0, "time": _utc([r[0] for r in events]),
                      "kind": [r[1] for r in events], "step": pd.array([r[2] for r in events], dtype="Int64"),
                      "duration_s": pd.array([r[3] for r in events], dtype="Float64")})
    truth["held"] = t
    return s, e, truth


def _fixture(startup_ns: int) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    rng = np.random.default_rng(3)
    n = 300
    durations = [int(x) for x in rng.integers(500_000_000, 3_000_000_000, n)]
    pauses = []
    for k in range(n):
        # pauses logged to the microsecond (as Orbax and ml-goodput-measurement report them)
        us = int(rng.integers(1_000_000, 60_000_000)) * 1000
        pauses.append(("ckpt", us) if k % 7 == 6 else ("eval", us) if k % 11 == 10 else
                      ("commit", us) if k % 13 == 12 else ("", 0))
    return tiled(durations, pauses, startup_ns=startup_ns)


@pytest.mark.parametrize("startup_ns", [12_345_678_901, FAR_NS])
def test_exactly_tiled_job_has_no_unattributed_time(startup_ns):
    s, e, truth = _fixture(startup_ns)
    m = runtime_goodput(s, e, fault_free_step_s=1.0, definition="retrospective")
    # a pause logged as 6.884844 s that ends where the next step starts leaves no rounding sliver
    assert m.categories["unattributed"] == 0.0
    assert m.held_s == truth["held"] / 1e9
    # every other part against the nanosecond truth (seconds since the origin carry ~2 ns at 1e7 s)
    tol = 1e-12 if startup_ns < 10**12 else 1e-6
    assert m.categories["startup"] == pytest.approx(truth["startup"] / 1e9, abs=tol)
    assert m.categories["checkpoint"] == pytest.approx(truth["checkpoint"] / 1e9, abs=tol)
    assert m.categories["evaluation"] == pytest.approx(truth["evaluation"] / 1e9, abs=tol)
    # step time is summed from exact nanosecond durations, far from the origin too
    n = len(s)
    assert m.categories["productive"] == pytest.approx(truth["steps"] / 1e9, rel=1e-13)
    assert m.breakdown["productive"] == float(n)  # retained steps at the baseline; the rest is slow_step
    assert abs(m.partition_error_s) < 1e-6


@settings(max_examples=25, deadline=None)
# steps of at least a microsecond: 1e7 s after the origin, float seconds are ~2 ns apart, so shorter
# steps would collapse onto one instant (a limit of seconds-since-origin, not of the partition)
@given(st.lists(st.tuples(st.integers(1_000, 5_000_000_000),
                          st.sampled_from(["", "ckpt", "eval", "commit"]),
                          st.integers(1, 90_000_000)), min_size=1, max_size=40),
       st.sampled_from([1_000_000_000, FAR_NS + 123_456_789]))
def test_tiled_jobs_add_up_with_nothing_unattributed(spec, startup_ns):
    durations = [d for d, _, _ in spec]
    pauses = [(k, p * 1000 if k else 0) for _, k, p in spec]
    s, e, truth = tiled(durations, pauses, startup_ns=startup_ns)
    m = runtime_goodput(s, e, fault_free_step_s=1.0, definition="retrospective")
    assert m.categories["unattributed"] == 0.0  # computed, never clipped: exactly nothing left over
    assert m.held_s == truth["held"] / 1e9
    assert sum(m.categories.values()) == pytest.approx(m.held_s, rel=1e-12, abs=1e-6)


# ---------------------------------------------------------------------------------------------------
# Event kinds
# ---------------------------------------------------------------------------------------------------


def _with_events(extra: list[tuple[int, float, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    s, e = tables_from_seconds([(0, 0, 10.0, 20.0), (0, 1, 20.0, 30.0)],
                               [(0, 0.0, "gang_complete"), (0, 40.0, "release")])
    odd = tables_from_seconds([], extra)[1]
    return s, pd.concat([e, odd], ignore_index=True).sort_values("time", kind="stable", ignore_index=True)


def test_auxiliary_kinds_are_kept_without_a_flag():
    s, e = _with_events([(0, 2.0, "tpu_init_begin"), (0, 5.0, "tpu_init_end"),
                         (0, 31.0, "custom_badput:profiling"), (0, 32.0, "device_count")])
    _, events, ledger = validate_timeline(s, e)
    assert {"tpu_init_begin", "custom_badput:profiling", "device_count"} <= set(events["kind"])
    assert ledger.flags == [] and ledger.kept == ledger.read
    assert R.AUXILIARY_EVENT_KINDS is AUXILIARY_EVENT_KINDS  # one list, re-exported by the readers


def test_unknown_kind_is_flagged_in_plain_text():
    s, e = _with_events([(0, 3.0, "coffee_break"), (0, 4.0, "coffee_break"), (0, 5.0, "tpu_init_end")])
    _, _, ledger = validate_timeline(s, e)
    assert [f.code for f in ledger.flags] == ["unknown_event_kind"]
    msg = ledger.flags[0].message
    assert msg.startswith("2 event(s) of unknown kind 'coffee_break' (first at row ")
    assert "np.str_" not in msg


def test_mlgoodput_demo_measures_without_flags_or_rounding():
    tables, reader_ledger = R.read_mlgoodput(DEMO_JSONL)
    assert set(AUXILIARY_EVENT_KINDS[:6]) <= set(tables.events["kind"])
    res = runtime_summary(tables.steps, tables.events)
    codes = [f["code"] for f in res["ledger"]["flags"]]
    assert "unknown_event_kind" not in codes
    assert not any("np.str_" in f.message for f in reader_ledger.flags)
    # every checkpoint pause ends exactly where a step starts: nothing is left unattributed
    assert res["terms"]["unattributed"] == 0.0


def test_categorical_job_ids_with_unused_and_unsorted_categories():
    s1, e1 = tables_from_seconds([(0, 0, 1.0, 2.0), (0, 1, 2.0, 3.0)],
                                 [(0, 0.0, "gang_complete"), (0, 4.0, "release")], job_id="b")
    s2, e2 = tables_from_seconds([(0, 0, 1.0, 2.5)], [(0, 0.0, "gang_complete"), (0, 3.0, "release")],
                                 job_id="a")
    s, e = pd.concat([s1, s2], ignore_index=True), pd.concat([e1, e2], ignore_index=True)
    plain = runtime_goodput(s, e, fault_free_step_s=1.0)
    cats = pd.CategoricalDtype(["zz_unused", "b", "a"])
    sc, ec = s.assign(job_id=s["job_id"].astype(cats)), e.assign(job_id=e["job_id"].astype(cats))
    coded = runtime_goodput(sc, ec, fault_free_step_s=1.0)
    assert coded.categories == plain.categories and coded.held_s == plain.held_s == 7.0
    assert list(coded.per_job.index) == ["a", "b"]
    # a refused record is named by its row in the table as given (job "a"'s step is its third row)
    late = ec.copy()
    late.loc[(late["job_id"] == "a") & (late["kind"] == "release"), "time"] = T_A_RELEASE_EARLY
    with pytest.raises(InputError) as err:
        runtime_goodput(sc, late, fault_free_step_s=1.0)
    assert (err.value.row, err.value.field) == (3, "start")


def test_a_huge_logged_duration_still_ends_the_pause_at_its_commit():
    # 1e15 s does not fit in int64 nanoseconds: the pause end falls back to float seconds
    s, e = tables_from_seconds([(0, 0, 1.0, 2.0), (0, 1, 3.0, 4.0)],
                               [(0, 0.0, "gang_complete"), (0, 2.0, "checkpoint_begin", 0, 1e15),
                                (0, 2.5, "checkpoint_commit", 0), (0, 5.0, "release")])
    m = runtime_goodput(s, e, fault_free_step_s=1.0)
    assert m.categories["checkpoint"] == 0.5 and m.categories["unattributed"] == 0.5
