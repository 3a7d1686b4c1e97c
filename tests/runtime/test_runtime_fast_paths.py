"""The speed paths of one fleet timeline task equal the paths they stand in for.

* the canonical Parquet reader with ``job_codes=True`` (the steps' job ids as a categorical) returns the
  text path's tables, row for row, and the same ledger;
* the fleet engine's timeline task (:func:`fleetlib.fleet.engine._measure_timeline_file`) gives the
  same per-job columns, job lists and ledger through the categorical path as through the text path,
  with a job map and jobs the scheduler does not know;
* the cross-job helpers of :mod:`fleetlib.runtime._fast` equal the numpy calls they replace;
* the fast path equals the per-job path on hypothesis-generated small timelines that exercise long
  warm-ups, jobs with no input wait, stalled steps and windows that cut jobs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_runtime_fast import _random_fleet, _windows, assert_same

from fleetlib.accounting import Window
from fleetlib.fleet import engine
from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.runtime import _fast
from fleetlib.runtime.readers import READERS
from fleetlib.runtime.readers import _parquet_fast as pf
from fleetlib.runtime.timeline import tables_from_seconds

_T0 = pd.Timestamp("2024-03-01T00:00:00Z")


@pytest.fixture(scope="module")
def partitions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("scale") / "bundle"
    synth_fleet_scale(out, devices=128, days=1.0, seed=11, partitions=2, steps_per_job=(20, 80))
    return sorted((out / "timelines").glob("*.parquet"))


def _ledger(led: Any) -> tuple[Any, ...]:
    return (led.read, led.kept, [e.to_dict() for e in led.entries], [repr(f) for f in led.flags],
            dict(led.unused))


def _assert_codes_path_same(path: Path) -> None:
    text = pf.read_fast(path)
    codes = pf.read_fast(path, job_codes=True)
    assert text is not None and codes is not None
    (t_tables, t_led), (c_tables, c_led) = text, codes
    assert isinstance(c_tables.steps["job_id"].dtype, pd.CategoricalDtype)
    cats = list(c_tables.steps["job_id"].cat.categories)
    assert cats == sorted(cats)  # text order: the categorical's codes are the job order
    as_text = c_tables.steps.assign(job_id=c_tables.steps["job_id"].astype(str).astype(
        t_tables.steps["job_id"].dtype))
    pd.testing.assert_frame_equal(as_text, t_tables.steps, check_exact=True)
    pd.testing.assert_frame_equal(c_tables.events, t_tables.events, check_exact=True)
    assert _ledger(c_led) == _ledger(t_led)


def test_job_codes_tables_equal_the_text_tables_on_fleet_scale_partitions(partitions: list[Path]) -> None:
    for part in partitions:
        _assert_codes_path_same(part)


def _write_combined(path: Path, steps: pd.DataFrame, events: pd.DataFrame, *, attempt: bool = True) -> Path:
    """A canonical combined Parquet file (record = step | event), job ids dictionary-encoded."""
    s = steps.assign(record="step", time=pd.NaT, kind=None, duration_s=np.nan)
    e = events.assign(record="event", start=pd.NaT, end=pd.NaT, input_wait_s=np.nan)
    e["step"] = e["step"].astype("Int64")
    frame = pd.concat([s, e], ignore_index=True)
    frame["step"] = frame["step"].astype("Int64")
    cols = ["record", "job_id", "attempt", "step", "start", "end", "input_wait_s", "time", "kind",
            "duration_s"]
    if not attempt:
        cols.remove("attempt")
    table = pa.Table.from_pandas(frame[cols], preserve_index=False)
    for name in ("record", "job_id"):
        i = table.column_names.index(name)
        table = table.set_column(i, name, table.column(name).cast(pa.string()).dictionary_encode())
    pq.write_table(table, path)
    return path


def _faulty_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Jobs with a restore to an uncommitted step, a failure with no restart, and a clean job."""
    parts = [
        tables_from_seconds([(0, 1, 10.0, 12.0), (0, 2, 12.0, 14.0), (1, 3, 40.0, 42.0)],
                            [(0, 0.0, "gang_complete"), (0, 17.0, "failure"), (0, 18.0, "release"),
                             (1, 30.0, "gang_complete"), (1, 35.0, "restore", 2), (1, 50.0, "release")],
                            job_id="b-restore", origin=_T0),
        tables_from_seconds([(0, 1, 1.0, 3.0), (0, 2, 3.0, 5.0)],
                            [(0, 0.0, "gang_complete"), (0, 6.0, "failure"), (0, 7.0, "release")],
                            job_id="a-fail", origin=_T0),
        tables_from_seconds([(0, 1, 1.0, 3.0, 0.5), (0, 2, 3.0, 5.0)],
                            [(0, 0.0, "gang_complete"), (0, 9.0, "release")], job_id="c-clean", origin=_T0),
    ]
    return (pd.concat([p[0] for p in parts], ignore_index=True),
            pd.concat([p[1] for p in parts], ignore_index=True))


@pytest.mark.parametrize("attempt", [True, False], ids=["attempts", "attempts-from-markers"])
def test_job_codes_tables_equal_the_text_tables_with_cross_check_flags(tmp_path: Path, attempt: bool) -> None:
    steps, events = _faulty_tables()
    path = _write_combined(tmp_path / "t.parquet", steps, events, attempt=attempt)
    text = pf.read_fast(path)
    assert text is not None
    codes = {f.code for f in text[1].flags}
    assert "restore_uncommitted" in codes and "failure_without_restart" in codes  # the checks ran
    _assert_codes_path_same(path)


def _task(path: Path, job_map: dict[str, str], held: pd.DataFrame, window: Window) -> dict[str, Any]:
    return engine._measure_timeline_file("canonical", str(path), path.name, job_map, held, window)


def _text_task(monkeypatch: pytest.MonkeyPatch, *args: Any) -> dict[str, Any]:
    with monkeypatch.context() as m:  # no categorical path: the manifest's reader and the text ids
        m.setattr(pf, "read_fast", lambda *a, **k: None if k.get("job_codes") else _ORIGINAL(*a, **k))
        m.setattr(pf, "read_parsed", lambda *a, **k: None)  # nor the reader's arrays
        return _task(*args)


_ORIGINAL = pf.read_fast


def _assert_task_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("steps_jobs", "events_jobs", "unknown_rows", "runtime_jobs"):
        assert a[key] == b[key], key
    assert a["runtime"].keys() == b["runtime"].keys()
    for col, values in a["runtime"].items():
        assert values.dtype == b["runtime"][col].dtype, col
        np.testing.assert_array_equal(values, b["runtime"][col], err_msg=col)
    assert _ledger(a["ledger"]) == _ledger(b["ledger"])


def test_timeline_task_equals_the_text_path_with_a_job_map_and_unknown_jobs(
    partitions: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    tables, _ = READERS["canonical"].read([partitions[0]])
    jobs = sorted(set(tables["events"]["job_id"].astype(str)))
    assert len(jobs) >= 6
    # rename two jobs (one of them to a name that sorts first), and leave one out of the scheduler's
    job_map = {jobs[1]: "aaa-renamed", jobs[3]: jobs[3] + "-x"}
    held_ids = [job_map.get(j, j) for j in jobs if j != jobs[4]]
    held = pd.DataFrame({"devices": np.arange(len(held_ids)) % 7 + 1},
                        index=pd.Index(held_ids, name="job_id"))
    t0, t1 = tables["events"]["time"].min(), tables["events"]["time"].max()
    for window in (Window.parse([t0 - pd.Timedelta("1h"), t1 + pd.Timedelta("1h")]),
                   Window.parse([t0 + (t1 - t0) * 0.3, t0 + (t1 - t0) * 0.7])):
        got = _task(partitions[0], job_map, held, window)
        want = _text_task(monkeypatch, partitions[0], job_map, held, window)
        assert got["unknown_rows"] and "aaa-renamed" in got["runtime_jobs"]
        _assert_task_same(got, want)
    held_all = pd.DataFrame({"devices": 2}, index=pd.Index(jobs, name="job_id"))
    window = Window.parse([t0 - pd.Timedelta("1h"), t1 + pd.Timedelta("1h")])
    _assert_task_same(_task(partitions[1], {}, held_all, window),
                      _text_task(monkeypatch, partitions[1], {}, held_all, window))


def test_timeline_task_equals_the_text_path_on_a_file_with_a_job_with_no_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps, events = _faulty_tables()
    # the restore to an uncommitted step is refused by the measurement (both paths): leave that job out
    steps, events = steps[steps["job_id"] != "b-restore"], events[events["job_id"] != "b-restore"]
    zombie = tables_from_seconds([], [(0, 0.0, "gang_complete"), (0, 40.0, "release")], job_id="z-zombie",
                                 origin=_T0)[1]
    events = pd.concat([events, zombie], ignore_index=True)
    window = Window.parse([_T0 - pd.Timedelta("1h"), _T0 + pd.Timedelta("1h")])
    held = pd.DataFrame({"devices": [4, 2, 1]},
                        index=pd.Index(["a-fail", "c-clean", "z-zombie"], name="job_id"))
    both = _write_combined(tmp_path / "both.parquet", steps, events)
    for job_map in ({}, {"c-clean": "a-fail-2"}):
        got = _task(both, job_map, held, window)
        _assert_task_same(got, _text_task(monkeypatch, both, job_map, held, window))
    only_events = tmp_path / "events.parquet"
    pq.write_table(pa.Table.from_pandas(zombie.assign(step=zombie["step"].astype("Int64")),
                                        preserve_index=False), only_events)
    got = _task(only_events, {"z-zombie": "z"}, held.rename(index={"z-zombie": "z"}), window)
    assert got["runtime_jobs"] == ["z"]
    _assert_task_same(got, _text_task(monkeypatch, only_events, {"z-zombie": "z"},
                                      held.rename(index={"z-zombie": "z"}), window))


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
