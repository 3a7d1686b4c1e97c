"""The reader's arrays handed straight to the measurement equal the frames' path, field for field.

:func:`fleetlib.runtime._handoff.tables_from_parsed` must make exactly the arrays, ledger and
provenance ``_prepare_tables`` makes of the frames :func:`read_fast` builds from the same file;
:func:`fleetlib.runtime._fast.runtime_per_job_tables` must give the per-job table of the frames' path
and of the per-job code (``fast=False``, an independent reference); and the fleet timeline task
measured from the arrays (:func:`fleetlib.fleet._parsed_task.measure_parsed`) must equal the text path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_runtime_fast_paths import _T0, _assert_task_same, _task, _text_task, _write_combined

from fleetlib.accounting import Window
from fleetlib.fleet import _parsed_task
from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.quality import InputError
from fleetlib.runtime import _fast
from fleetlib.runtime._handoff import can_hand_off, tables_from_parsed
from fleetlib.runtime.job_structure import _lexsort
from fleetlib.runtime.readers import _parquet_fast as pf
from fleetlib.runtime.timeline import _prepare_tables, _provenances, tables_from_seconds

_SOURCE = "fleet timelines"
_ARRAYS = ("s_job", "s_attempt", "s_step", "s_start", "s_end", "s_wait", "e_job", "e_attempt", "e_time",
           "e_kind", "e_step", "e_dur", "e_row")


@pytest.fixture(scope="module")
def partitions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("handoff") / "bundle"
    synth_fleet_scale(out, devices=128, days=1.0, seed=5, partitions=2, steps_per_job=(20, 80))
    return sorted((out / "timelines").glob("*.parquet"))


def _unusual_but_clean() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Steps out of job order in the file, an evaluation, an unknown kind, a long duration, no steps."""
    parts = [
        tables_from_seconds([(0, 1, 10.0, 12.0), (0, 2, 12.0, 14.0), (0, 3, 14.0, 17.0, 0.5)],
                            [(0, 0.0, "gang_complete"), (0, 14.5, "checkpoint_begin"),
                             (0, 15.0, "checkpoint_commit", 2), (0, 20.0, "release")],
                            job_id="j-b", origin=_T0),
        tables_from_seconds([(0, 1, 1.0, 3.0), (0, 2, 3.0, 5.5, 0.25), (0, 3, 8.0, 9.0)],
                            [(0, 0.0, "gang_complete"), (0, 5.5, "eval_begin"), (0, 6.0, "vendor_ping"),
                             (0, 7.5, "eval_end"), (0, 9.5, "checkpoint_begin", None, 1e6),
                             (0, 12.0, "release")],
                            job_id="j-a", origin=_T0),
        tables_from_seconds([], [(0, 0.0, "gang_complete"), (0, 30.0, "release")], job_id="j-c",
                            origin=_T0),
    ]
    return (pd.concat([p[0] for p in parts], ignore_index=True),
            pd.concat([p[1] for p in parts], ignore_index=True))


@pytest.fixture(scope="module")
def files(partitions: list[Path], tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("handoff-files")
    steps, events = _unusual_but_clean()
    return [*partitions, _write_combined(out / "clean.parquet", steps, events),
            _write_combined(out / "no-attempt.parquet", steps, events, attempt=False)]


def _frames(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    fast = pf.read_fast(path, job_codes=True)
    assert fast is not None
    return fast[0].steps, fast[0].events


def test_the_handed_off_tables_equal_the_prepared_frames(files: list[Path]) -> None:
    for path in files:
        parsed = pf.read_parsed(path)
        assert parsed is not None and can_hand_off(parsed), path.name
        got, (prov_s, prov_e) = tables_from_parsed(parsed, _SOURCE)
        steps, events = _frames(path)
        want = _prepare_tables(steps, events, source=_SOURCE, build_frames=False, steps_checked=True)
        assert got.job_ids == want.job_ids
        for name in _ARRAYS:
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype, name
            if a.dtype.kind == "f":  # bit for bit (NaN where NaN)
                np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=name)
                np.testing.assert_array_equal(np.nan_to_num(a).view(np.uint64),
                                              np.nan_to_num(b).view(np.uint64), err_msg=name)
            else:
                np.testing.assert_array_equal(a, b, err_msg=name)
        assert got.s_row is None and want.s_row is None
        # the reader's step durations: the measurement's own expression, bit for bit
        np.testing.assert_array_equal(got.s_dur.view(np.uint64),
                                      ((want.s_end - want.s_start) / 1_000_000_000).view(np.uint64))
        assert (got.steps_file, got.events_file) == (want.steps_file, want.events_file)
        assert got.ledger.to_dict() == want.ledger.to_dict()
        where_s, where_e = _provenances(steps, events, _SOURCE)
        for mine, theirs in ((prov_s, where_s), (prov_e, where_e)):
            assert mine.label == theirs.label and mine.n == theirs.n
            for pos in sorted({0, mine.n // 3, mine.n - 1, -1, mine.n}):
                assert mine.locate(pos) == theirs.locate(pos)


def test_the_clean_file_flags_what_the_frames_path_flags(files: list[Path]) -> None:
    got, _ = tables_from_parsed(pf.read_parsed(files[-2]), _SOURCE)
    assert {f.code for f in got.ledger.flags} == {"unknown_event_kind", "duration_exceeds_timeline"}


def _windows(events: pd.DataFrame) -> list[Any]:
    t0, t1 = events["time"].min(), events["time"].max()
    span = t1 - t0
    return [None, (t0 - pd.Timedelta("1h"), t1 + pd.Timedelta("1h")), (t0 + span * 0.3, t0 + span * 0.7)]


@pytest.mark.parametrize("definition", ["committed", "retrospective"])
def test_measured_from_the_handed_off_tables_equals_the_frames_and_the_per_job_path(
        files: list[Path], definition: str) -> None:
    for path in files:
        steps, events = _frames(path)
        for window in _windows(events):
            kw: dict[str, Any] = {"window": window, "definition": definition}
            prepared = tables_from_parsed(pf.read_parsed(path), _SOURCE)
            got, got_ledger = _fast.runtime_per_job_tables(*prepared, **kw)
            frames, frames_ledger = _fast.runtime_per_job(steps, events, source=_SOURCE, steps_checked=True,
                                                          **kw)
            per_job, per_job_ledger = _fast.runtime_per_job(steps, events, source=_SOURCE, fast=False, **kw)
            pd.testing.assert_frame_equal(got, frames, check_exact=True)
            pd.testing.assert_frame_equal(got, per_job, check_exact=True)
            assert got_ledger.to_dict() == frames_ledger.to_dict() == per_job_ledger.to_dict()


def test_the_timeline_task_from_the_arrays_equals_the_text_path(
        files: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    taken = []
    original = _parsed_task.measure_parsed

    def spy(*args: Any) -> Any:
        out = original(*args)
        taken.append(out is not None)
        return out

    for path in files:
        steps, events = _frames(path)
        ids = sorted(set(events["job_id"].astype(str)) | set(steps["job_id"].astype(str)))
        held = pd.DataFrame({"devices": np.arange(len(ids)) % 5 + 1}, index=pd.Index(ids, name="job_id"))
        for bounds in _windows(events)[1:]:
            window = Window.parse(list(bounds))
            with monkeypatch.context() as m:
                m.setattr(_parsed_task, "measure_parsed", spy)
                got = _task(path, {}, held, window)
            assert taken.pop(), path.name  # measured from the arrays
            _assert_task_same(got, _text_task(monkeypatch, path, {}, held, window))


@pytest.mark.parametrize("seed", range(4))
def test_lexsort_equals_numpys_on_sorted_and_unsorted_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 500
    keys = (rng.integers(0, 3, n), rng.integers(0, 4, n).astype(float), rng.integers(0, 5, n))
    np.testing.assert_array_equal(_lexsort(keys), np.lexsort(keys))
    in_order = tuple(k[np.lexsort(keys)] for k in keys)  # sorted rows, many ties: no sort needed
    np.testing.assert_array_equal(_lexsort(in_order), np.arange(n))
    np.testing.assert_array_equal(_lexsort(in_order), np.lexsort(in_order))
    swapped = tuple(k.copy() for k in in_order)
    swapped[2][[0, -1]] = swapped[2][[-1, 0]]  # one row out of order on the first key
    np.testing.assert_array_equal(_lexsort(swapped), np.lexsort(swapped))
    np.testing.assert_array_equal(_lexsort((np.zeros(1),)), [0])


def test_an_invalid_timeline_raises_the_frames_paths_error_from_the_arrays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps, events = _unusual_but_clean()
    late = tables_from_seconds([(0, 1, 1.0, 2.0), (0, 2, 25.0, 26.0)],
                               [(0, 0.0, "gang_complete"), (0, 20.0, "release")], job_id="j-d", origin=_T0)
    path = _write_combined(tmp_path / "late.parquet", pd.concat([steps, late[0]], ignore_index=True),
                           pd.concat([events, late[1]], ignore_index=True))
    parsed = pf.read_parsed(path)
    assert parsed is not None and can_hand_off(parsed)
    ids = ["j-a", "j-b", "j-c", "j-d"]
    held = pd.DataFrame({"devices": [1, 2, 3, 4]}, index=pd.Index(ids, name="job_id"))
    window = Window.parse([_T0 - pd.Timedelta("1h"), _T0 + pd.Timedelta("1h")])
    with pytest.raises(InputError) as from_arrays:
        _task(path, {}, held, window)
    with pytest.raises(InputError) as from_text:
        _text_task(monkeypatch, path, {}, held, window)
    got, want = from_arrays.value, from_text.value
    assert (got.message, got.file, got.row, got.field) == (want.message, want.file, want.row, want.field)
    assert got.file == str(path) and got.row is not None  # named by the file's own row
