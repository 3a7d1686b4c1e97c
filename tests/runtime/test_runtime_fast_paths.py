"""The speed paths of the runtime measurement equal the paths they stand in for.

* the cross-job helpers of :mod:`fleetlib.runtime._fast` equal the numpy calls they replace;
* the fast path equals the per-job path on hypothesis-generated small timelines that exercise long
  warm-ups, jobs with no input wait, stalled steps and windows that cut jobs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_runtime_fast import _random_fleet, _windows, assert_same

from fleetlib.runtime import _fast
from fleetlib.runtime.timeline import tables_from_seconds

_T0 = pd.Timestamp("2024-03-01T00:00:00Z")


# ---------------------------------------------------------------------------------------------------
# The cross-job helpers against the numpy calls they replace
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_search_within_equals_the_complex_key_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 40, 60)
    group = np.repeat(np.arange(sizes.size), sizes)
    values = np.concatenate([np.sort(rng.choice([0.0, 1.0, 2.5, 3.0, 7.0, 9.0], n)) for n in sizes])
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    key = _fast._key(group, values)
    tg = rng.integers(0, sizes.size, 500)
    targets = rng.choice([-1.0, 0.0, 1.0, 2.0, 2.5, 3.0, 8.0, 9.0, 10.0, np.inf], 500)
    for side in ("left", "right"):
        want = _fast._gsearch(key, tg, targets, side)
        got = _fast._search_within(values, bounds[tg], bounds[tg + 1], targets, side)
        np.testing.assert_array_equal(got, want)


def test_group_cummax_equals_the_pandas_running_maximum() -> None:
    rng = np.random.default_rng(4)
    for n in (1, 2, 30, 4000):
        group = np.sort(rng.integers(0, 12, n))
        values = rng.choice([-3.0, 0.0, 1.5, 2.0, 7.0, np.inf], n)
        want = pd.Series(values).groupby(group, sort=False).cummax().to_numpy()
        np.testing.assert_array_equal(_fast._group_cummax(values, group), want)
        shuffled = rng.permutation(group)  # groups not in order: the pandas path itself
        want = pd.Series(values).groupby(shuffled, sort=False).cummax().to_numpy()
        np.testing.assert_array_equal(_fast._group_cummax(values, shuffled), want)


@pytest.mark.parametrize("seed", range(4))
def test_next_match_equals_merge_asof(seed: int) -> None:
    from fleetlib.runtime.job_structure import _next_match

    rng = np.random.default_rng(seed)
    pos = rng.permutation(400)
    b_pos, x_pos = np.sort(pos[:150]), np.sort(pos[150:])
    b_keys = [rng.integers(0, 4, 150), rng.integers(0, 2, 150), rng.integers(-1, 3, 150)]
    x_keys = [rng.integers(0, 4, 250), rng.integers(0, 2, 250), rng.integers(-2, 3, 250)]
    left = pd.DataFrame({"pos": b_pos, "job": b_keys[0], "a": b_keys[1], "s": b_keys[2]})
    right = pd.DataFrame({"pos": x_pos, "job": x_keys[0], "a": x_keys[1], "s": x_keys[2],
                          "j": np.arange(250)})
    m = pd.merge_asof(left, right, on="pos", by=["job", "a", "s"], direction="forward",
                      allow_exact_matches=False)
    want = m["j"].fillna(-1).to_numpy(dtype=np.int64)
    np.testing.assert_array_equal(_next_match(b_pos, b_keys, x_pos, x_keys), want)
    np.testing.assert_array_equal(_next_match(b_pos, b_keys[:2], x_pos, x_keys[:2]),
                                  pd.merge_asof(left, right, on="pos", by=["job", "a"], direction="forward",
                                                allow_exact_matches=False)["j"].fillna(-1).to_numpy(np.int64))


def test_sorted_unique_equals_np_unique() -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 50, 5000):
        keys = _fast._key(rng.integers(0, 9, n), rng.choice([0.0, 0.5, 1.0, 4.0, np.inf], n))
        np.testing.assert_array_equal(_fast._sorted_unique(keys), np.unique(keys))


# ---------------------------------------------------------------------------------------------------
# Hypothesis: small timelines through the fast path and the per-job path
# ---------------------------------------------------------------------------------------------------


@st.composite
def _job(draw: Any, job: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One fault-free job: a warm-up of any length (past the 16 probed steps too), waits or none, stalls."""
    warm = draw(st.integers(0, 24))
    # more steady steps than warm-up ones (the median is a steady step: the warm-up is all the slow
    # ones), or a few
    steady = warm + 1 + draw(st.integers(0, 8)) if draw(st.booleans()) else draw(st.integers(0, 6))
    waits = draw(st.booleans())
    t = float(draw(st.integers(0, 5)))
    steps, events = [], [(0, 0.0, "gang_complete")]
    for k in range(warm + steady):
        pool = [6.0, 9.0] if k < warm else [2.0, 2.0, 2.1, 7.5, 0.0]  # slow warm-up, then steady/stalled
        dur = draw(st.sampled_from(pool))
        wait = min(dur, draw(st.sampled_from([0.0, 0.25, 1.0]))) if waits else 0.0
        steps.append((0, k + 1, t, t + dur, wait))
        t += dur + draw(st.sampled_from([0.0, 0.0, 1.0]))
        if draw(st.integers(0, 5)) == 0:
            events += [(0, t, "checkpoint_begin", k + 1), (0, t + 0.5, "checkpoint_commit", k + 1)]
            t += 1.0
    events.append((0, t + draw(st.sampled_from([0.0, 3.0])), "release"))
    origin = _T0 + pd.Timedelta(seconds=draw(st.integers(0, 300)))
    return tables_from_seconds(steps, events, job_id=job, origin=origin)


@st.composite
def _fleet(draw: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    parts = [draw(_job(f"j{i:02d}")) for i in range(draw(st.integers(1, 6)))]
    return (pd.concat([p[0] for p in parts], ignore_index=True),
            pd.concat([p[1] for p in parts], ignore_index=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fleet(), st.sampled_from(["committed", "retrospective"]))
def test_fast_path_equals_the_per_job_path_on_generated_timelines(
    fleet: tuple[pd.DataFrame, pd.DataFrame], definition: str
) -> None:
    steps, events = fleet
    for window in _windows(steps, events):
        try:
            assert_same(steps, events, window=window, definition=definition)
        except Exception as exc:  # a job whose every step is input wait: both paths must refuse it alike
            from fleetlib.quality import DomainError

            if not isinstance(exc, DomainError):
                raise
            with pytest.raises(DomainError):
                _fast.runtime_per_job(steps, events, window=window, definition=definition, fast=False)


@pytest.mark.parametrize("seed", range(3))
def test_stalled_steps_compared_for_every_job_at_once_equal_the_per_job_path(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fast._stalled, "__defaults__", (0,))  # the vectorised branch, for any count
    steps, events = _random_fleet(seed)
    for window in _windows(steps, events):
        try:
            assert_same(steps, events, window=window, definition="committed")
        except Exception as exc:
            from fleetlib.quality import DomainError

            if not isinstance(exc, DomainError):
                raise
