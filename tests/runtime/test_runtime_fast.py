"""The cross-job fast path of the runtime rung equals the per-job path, number for number and error for error.

:func:`fleetlib.runtime._fast.runtime_per_job` measures the common jobs (one attempt, no fault) all at
once and the rest with the per-job code.  Its table must be exactly ``runtime_goodput(...).per_job``
(the per-job path, independently built), and ``fast=False`` (every job per job) must be too.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.fleet.synth import synth_fleet
from fleetlib.quality import DomainError, InputError
from fleetlib.runtime._fast import _simple_jobs, runtime_per_job
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.job_structure import _event_origins
from fleetlib.runtime.readers import READERS
from fleetlib.runtime.timeline import _prepare_tables, tables_from_seconds

_T0 = pd.Timestamp("2024-03-01T00:00:00Z")


def _fast_jobs(steps: pd.DataFrame, events: pd.DataFrame) -> int:
    """How many jobs the fast path takes (before the fault-free check)."""
    t = _prepare_tables(steps, events, source="t", build_frames=False)
    s_b = np.searchsorted(t.s_job, np.arange(len(t.job_ids) + 1, dtype=t.s_job.dtype), side="left")
    return int(_simple_jobs(t, s_b.astype(np.int64), _event_origins(t))[0].sum())


def assert_same(steps: pd.DataFrame, events: pd.DataFrame, **kw: Any) -> None:
    """Fast path, per-job path and ``runtime_goodput`` give the same table and the same flags."""
    m = runtime_goodput(steps, events, **kw)
    ref = m.per_job.copy()
    ref.index = ref.index.astype(str)
    fast, fast_ledger = runtime_per_job(steps, events, **kw)
    slow, _ = runtime_per_job(steps, events, fast=False, **kw)
    pd.testing.assert_frame_equal(fast, ref, check_exact=True)
    pd.testing.assert_frame_equal(slow, ref, check_exact=True)
    flags = [(f.code, f.message, f.job_id) for f in fast_ledger.flags]
    assert flags == [(f.code, f.message, f.job_id) for f in m.ledger.flags]
    assert [e.reason for e in fast_ledger.entries] == [e.reason for e in m.ledger.entries]


def _windows(steps: pd.DataFrame, events: pd.DataFrame) -> list[Any]:
    """No window, one around everything, and two that cut through jobs."""
    t0, t1 = events["time"].min(), events["time"].max()
    span = t1 - t0
    return [None, (t0 - pd.Timedelta("1h"), t1 + pd.Timedelta("1h")), (t0 + span * 0.3, t0 + span * 0.7),
            (t0 + span * 0.013, t1 - span * 0.21)]


def _bundled() -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    out = []
    for name in ("mlperf", "mlgoodput", "canonical"):
        for sample in READERS[name].samples:
            if not sample.bad:
                tables, _ = READERS[name].read(list(sample.paths))
                out.append((f"{name}:{sample.paths[0]}", tables["steps"], tables["events"]))
    for bundle in ("data/fleet/synthetic", "data/fleet/slurm_sample"):
        tables, _ = READERS["canonical"].read(sorted(glob.glob(f"{bundle}/timelines/*")))
        out.append((bundle, tables["steps"], tables["events"]))
    return out


@pytest.mark.parametrize("name, steps, events", _bundled(), ids=lambda v: v if isinstance(v, str) else "")
def test_fast_path_equals_the_per_job_path_on_the_bundled_timelines(name, steps, events):
    for window in _windows(steps, events):
        for definition in ("committed", "retrospective"):
            assert_same(steps, events, window=window, definition=definition)


def test_the_bundled_fleet_takes_both_paths():
    tables, _ = READERS["canonical"].read(sorted(glob.glob("data/fleet/synthetic/timelines/*")))
    n_jobs = tables["events"]["job_id"].nunique()
    fast = _fast_jobs(tables["steps"], tables["events"])
    assert 0 < fast < n_jobs  # clean jobs fast; restarts, failures, preemptions per job


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_path_equals_the_per_job_path_on_synthetic_fleets_with_faults(tmp_path: Path, seed: int):
    bundle = synth_fleet(tmp_path / "fleet", devices=96, days=1.0, seed=seed)
    files = sorted(glob.glob(str(Path(bundle.manifest).parent / "timelines" / "*")))
    tables, _ = READERS["canonical"].read(files)
    steps, events = tables["steps"], tables["events"]
    assert 0 < _fast_jobs(steps, events) < events["job_id"].nunique()
    for window in _windows(steps, events):
        assert_same(steps, events, window=window, definition="retrospective")
    assert_same(steps, events, window=None, definition="committed", as_of="data_end")


def test_fast_path_equals_the_per_job_path_on_fleet_scale_partitions(tmp_path: Path):
    synth_fleet_scale(tmp_path / "scale", devices=128, days=1.0, seed=5, partitions=2, steps_per_job=(20, 60))
    for part in sorted((tmp_path / "scale" / "timelines").glob("*.parquet")):
        tables, _ = READERS["canonical"].read([part])
        steps, events = tables["steps"], tables["events"]
        n_jobs = events["job_id"].nunique()
        assert _fast_jobs(steps, events) >= 0.9 * n_jobs  # no faults at this size: nearly all fast
        for window in _windows(steps, events):
            assert_same(steps, events, window=window, definition="retrospective")


# ---------------------------------------------------------------------------------------------------
# Random multi-job timelines: fast jobs of every shape beside jobs the per-job code must take
# ---------------------------------------------------------------------------------------------------


def _random_job(rng: np.random.Generator, job: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One job: a cold launch, steps (some zero-length, some waits, gaps), checkpoints of every form."""
    n = int(rng.integers(0, 25))
    t = float(rng.integers(0, 60))
    gang = float(rng.choice([0.0, 5.0]))
    t = max(t, gang)
    steps, events = [], [(0, gang, "gang_complete")]
    step0 = int(rng.integers(0, 5))
    for k in range(n):
        dur = float(rng.choice([0.0, 1.0, 2.0, 2.0, 2.0, 2.5, 9.0, 40.0]))
        wait = float(min(dur, rng.choice([0.0, 0.0, 0.5, 1.0])))
        steps.append((0, step0 + k, t, t + dur, wait))
        t += dur
        if rng.random() < 0.25:  # a checkpoint after this step
            form = int(rng.integers(0, 4))
            if form == 0:
                events += [(0, t, "checkpoint_begin", step0 + k),
                           (0, t + 1.5, "checkpoint_commit", step0 + k)]
            elif form == 1:
                events += [(0, t, "checkpoint_begin", None, 0.7),
                           (0, t + 3.0, "checkpoint_commit", step0 + k)]
            elif form == 2:
                events += [(0, t + 1.0, "checkpoint_commit", step0 + k, 1.0)]
            else:
                events += [(0, t, "checkpoint_begin")]
            t += float(rng.choice([0.0, 1.0, 3.0]))
        t += float(rng.choice([0.0, 0.0, 0.0, 0.5, 4.0]))
    last = max([t, *(ev[1] for ev in events)])
    events.append((0, last + float(rng.choice([0.0, 2.0, 30.0])), "release"))
    origin = _T0 + pd.Timedelta(seconds=int(rng.integers(0, 500)))
    return tables_from_seconds(steps, events, job_id=job, origin=origin)


def _faulty_job(rng: np.random.Generator, job: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A job the per-job code takes: a failure and a restart in a second attempt, or an eval pause."""
    if rng.random() < 0.5:
        s = [(0, 1, 10.0, 12.0), (0, 2, 12.0, 14.0), (0, 3, 14.0, 16.0), (1, 3, 40.0, 42.0),
             (1, 4, 42.0, 44.0)]
        e = [(0, 0.0, "gang_complete"), (0, 14.5, "checkpoint_commit", 2), (0, 17.0, "failure"),
             (0, 18.0, "release"), (1, 30.0, "gang_complete"), (1, 35.0, "restore", 2), (1, 50.0, "release")]
    else:
        s = [(0, 1, 1.0, 3.0), (0, 2, 3.0, 5.0), (0, 3, 9.0, 11.0)]
        e = [(0, 0.0, "gang_complete"), (0, 5.0, "eval_begin"), (0, 8.0, "eval_end"), (0, 12.0, "release")]
    origin = _T0 + pd.Timedelta(seconds=int(rng.integers(0, 500)))
    return tables_from_seconds(s, e, job_id=job, origin=origin)


def _random_fleet(seed: int, n_jobs: int = 40) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    parts = [(_faulty_job if rng.random() < 0.2 else _random_job)(rng, f"j{i:03d}") for i in range(n_jobs)]
    steps = pd.concat([p[0] for p in parts], ignore_index=True)
    events = pd.concat([p[1] for p in parts], ignore_index=True)
    order = rng.permutation(len(steps))  # the validator sorts; the fast path must not rely on input order
    return steps.iloc[order].reset_index(drop=True), events


@pytest.mark.parametrize("seed", range(12))
def test_fast_path_equals_the_per_job_path_on_random_fleets(seed: int):
    steps, events = _random_fleet(seed)
    assert _fast_jobs(steps, events) > 0
    # no tolerance too: a step exactly at the fault-free time ends the warm-up (the boundary is <=)
    cases = [(w, d, 0.1) for w in _windows(steps, events) for d in ("committed", "retrospective")]
    for window, definition, tol in [*cases, (None, "retrospective", 0.0)]:
        kw = {"window": window, "definition": definition, "warmup_tolerance": tol}
        try:
            runtime_goodput(steps, events, **kw)
        except DomainError as exc:  # a job whose every step is input wait: refused by both paths
            with pytest.raises(DomainError) as got:
                runtime_per_job(steps, events, **kw)
            assert str(got.value) == str(exc)
            continue
        assert_same(steps, events, **kw)


# ---------------------------------------------------------------------------------------------------
# Errors: the same first offending record as the per-job path
# ---------------------------------------------------------------------------------------------------


def _clean_fleet() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(7)
    parts = [_random_job(rng, f"j{i:03d}") for i in range(30)]
    steps = pd.concat([p[0] for p in parts], ignore_index=True)
    events = pd.concat([p[1] for p in parts], ignore_index=True)
    return steps, events


def _corrupt(steps: pd.DataFrame, events: pd.DataFrame, how: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    s, e = steps.copy(), events.copy()
    jobs = sorted(set(s["job_id"]))
    second, fifth = jobs[1], jobs[4]  # two bad jobs: the error must name the first
    for job in (fifth, second):
        js = s.index[s["job_id"] == job]
        je = e.index[e["job_id"] == job]
        if how == "commit_early":
            e.loc[len(e)] = [job, 0, s.loc[js[0], "start"], "checkpoint_commit", int(s.loc[js[-1], "step"]),
                             np.nan]
        elif how == "step_after_release":
            rel = je[e.loc[je, "kind"] == "release"][0]
            e.loc[rel, "time"] = s.loc[js[-1], "end"] - pd.Timedelta("1s")
        elif how == "release_before_gang":
            rel = je[e.loc[je, "kind"] == "release"][0]
            gang = je[e.loc[je, "kind"] == "gang_complete"][0]
            e.loc[rel, "time"] = e.loc[gang, "time"] - pd.Timedelta("1s")
            s = s[s["job_id"] != job]
        elif how == "two_gangs":
            gang = je[e.loc[je, "kind"] == "gang_complete"][0]
            e.loc[len(e)] = e.loc[gang].tolist()
        elif how == "all_input_wait":
            s.loc[js, "input_wait_s"] = (s.loc[js, "end"] - s.loc[js, "start"]).dt.total_seconds()
        elif how == "no_gang":
            e = e[~((e["job_id"] == job) & (e["kind"] == "gang_complete"))]
    e["step"] = e["step"].astype("Int64")
    return s.reset_index(drop=True), e.reset_index(drop=True)


@pytest.mark.parametrize("how", ["commit_early", "step_after_release", "release_before_gang", "two_gangs",
                                 "all_input_wait", "no_gang"])
def test_errors_name_the_same_first_record_as_the_per_job_path(how: str):
    steps, events = _clean_fleet()
    steps = steps[steps.groupby("job_id")["step"].transform("size") >= 3].reset_index(drop=True)
    events = events[events["job_id"].isin(set(steps["job_id"]))].reset_index(drop=True)
    assert_same(steps, events, window=None, definition="retrospective")  # clean: no error
    s, e = _corrupt(steps, events, how)
    with pytest.raises((InputError, DomainError)) as want:
        runtime_goodput(s, e, definition="retrospective")
    for fast in (True, False):
        with pytest.raises(type(want.value)) as got:
            runtime_per_job(s, e, definition="retrospective", fast=fast)
        assert str(got.value) == str(want.value)
        for attr in ("file", "row", "field"):
            assert getattr(got.value, attr, None) == getattr(want.value, attr, None)
