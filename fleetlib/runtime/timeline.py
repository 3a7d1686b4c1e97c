"""Canonical job-timeline tables, their validation, and the restart structure read from them.

A job timeline is two tables.  Every reader in :mod:`fleetlib.runtime` produces exactly these, and
every measurement in :mod:`fleetlib.runtime.goodput` consumes them.

**steps** -- one row per *executed* step; a step run again after a restart appears again, under the
attempt that re-ran it.

================  =================================================================================
column            meaning
================  =================================================================================
``job_id``        job identifier (text: ``str``, or a categorical of strings -- validated tables
                  use a categorical, which stays cheap at ten million rows)
``attempt``       allocation attempt (integer); a new attempt starts at each new gang completion
``step``          step number (integer); the update the step applies to the model state
``start``, ``end``  timezone-aware UTC timestamps of the step's wall-clock interval
``input_wait_s``  seconds inside the step spent blocked on the input pipeline (0.0 when none; the
                  column is required -- without it input stalls masquerade as program loss, rule 22)
================  =================================================================================

**events** -- lifecycle records: ``job_id, attempt, time`` (UTC), ``kind`` (text), ``step``
(nullable integer) and ``duration_s`` (nullable float).  The kinds, and what the partition does with
each, are listed in :data:`EVENT_KINDS`.  The documented auxiliary phase markers some readers emit
(:data:`AUXILIARY_EVENT_KINDS`, and kinds starting with one of :data:`AUXILIARY_KIND_PREFIXES`) are
kept and ignored by the partition without a flag; any other kind is kept and flagged
(``unknown_event_kind``), never dropped.

Step-number convention: a ``checkpoint_commit`` or ``restore`` with ``step = k`` refers to the model
state *after* step ``k`` finished, so a job restored to ``k`` next runs step ``k + 1``.  A ``restore``
with no step restarts from the initial state (nothing committed).

Restarts are read from explicit records -- a new attempt (a second ``gang_complete``) or a
``restore`` event.  Only where neither exists do repeated step numbers stand in for one, and every
such inference is flagged in the ledger (ml-goodput-measurement infers *all* restarts that way and
misses a restart that resumes at the next step; see the regression tests).

:func:`validate_timeline` checks both tables and returns them cleaned, with a
:class:`~fleetlib.quality.Ledger` that accounts for every row (read = kept + repaired + rejected) and
lists the interpretive flags.
:func:`job_timelines` additionally returns the per-job structure the measurement works on
(:class:`JobTimeline`): held intervals, interruptions, restarts with their rollback points, and which
interruption erased each executed step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.quality import Flag, InputError, Ledger
from fleetlib.runtime.schema import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    EVENT_COLUMNS,
    EVENT_KINDS,
    INTERRUPTION_KINDS,
    STEP_COLUMNS,
)

__all__ = [
    "AUXILIARY_EVENT_KINDS",
    "AUXILIARY_KIND_PREFIXES",
    "EVENT_COLUMNS",
    "EVENT_KINDS",
    "INTERRUPTION_KINDS",
    "STEP_COLUMNS",
    "JobTimeline",
    "TimelineFlag",
    "TimelineLedger",
    "empty_events",
    "empty_steps",
    "job_timelines",
    "tables_from_seconds",
    "validate_timeline",
]


_NS = 1_000_000_000
#: Logged durations shorter than this (about 32 years) are added to instants in integer nanoseconds.
_EXACT_DURATION_S = 1e9
_UTC_NS = pd.DatetimeTZDtype("ns", "UTC")


# ---------------------------------------------------------------------------------------------------
# Ledger and flags: the shared ones of fleetlib.quality
# ---------------------------------------------------------------------------------------------------


#: The flag of the one ledger (:class:`fleetlib.quality.Flag`); the old name is kept.
TimelineFlag = Flag

#: The timeline's ledger is the one ledger of the library (:class:`fleetlib.quality.Ledger`): row
#: accounting (read = kept + repaired + rejected) plus the flags raised while interpreting the
#: timeline (restarts inferred from repeated step numbers, unknown event kinds kept, a missing
#: release, an interruption the job never recovered from).  The old name is kept.
TimelineLedger = Ledger


# ---------------------------------------------------------------------------------------------------
# Per-job structure
# ---------------------------------------------------------------------------------------------------


class _RowIndex:
    """Input rows of a run of validated steps, looked up one at a time (for messages).

    ``rows`` is the input row of every step, or None when the steps kept their input order -- then a
    step's row is its position and no full-length index array is ever built.
    """

    __slots__ = ("hi", "lo", "rows")

    def __init__(self, rows: np.ndarray | None, lo: int, hi: int) -> None:
        self.rows, self.lo, self.hi = rows, lo, hi

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, i: Any) -> int:
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"step {i} out of range")
        return self.lo + i if self.rows is None else int(self.rows[self.lo + i])

    def to_array(self) -> np.ndarray:
        """Return every row as an int64 array."""
        if self.rows is None:
            return np.arange(self.lo, self.hi, dtype=np.int64)
        return np.asarray(self.rows[self.lo:self.hi], dtype=np.int64)


@dataclass
class JobTimeline:
    """One job's timeline as arrays of seconds since ``origin`` (the first gang completion).

    Built by :func:`job_timelines`; consumed by :mod:`fleetlib.runtime.goodput`.  Steps are sorted by
    start; attempts by gang completion; interruptions and restarts by time.

    Attributes
    ----------
    job_id, origin
        The job and the UTC instant that is time 0.
    step_attempt, step_number, step_start, step_end, step_duration, step_input_wait, step_row
        One entry per executed step (``step_row``, a property: the row in the input steps table;
        ``step_duration``: end minus start, computed in integer nanoseconds, so it is exact to the
        nanosecond even far from the origin).
    erased_by
        Per step: index of the interruption whose restart erased it, or -1 if it was never erased.
    attempt_number, attempt_gang, attempt_release, attempt_cold
        One entry per attempt: held interval ``[gang, release)`` and whether ``cold_start`` marks it.
    int_time, int_kind, int_detected, int_inferred, int_attempt
        One entry per interruption: time, ``"failure"`` or ``"preempt"``, detection time (NaN when
        not logged), whether it was inferred (an unlogged restart), and the attempt it hit.
    int_restore_step
        The rollback point of each interruption's restart (NaN: none / terminal; -inf: initial state).
    restart_time, restart_rollback, restart_cause
        Every restart (explicit restore, inferred restart, or the rollback a terminal interruption
        implies): when, to which step (-inf: the initial state) and which interruption caused it.
    commit_time, commit_step
        Durable checkpoint commits, by time.
    ckpt_begin_time, ckpt_begin_commit, ckpt_begin_duration, ckpt_begin_logged_end
        Checkpoint begins, the time their commit landed (NaN when it never did), their logged
        blocking duration (NaN when not logged) and begin plus that duration (NaN when not logged).
    ckpt_duration_start, ckpt_duration_end
        Pauses known only from a commit's ``duration_s``.
    eval_begin_time, eval_begin_end, eval_begin_duration, eval_begin_logged_end, eval_duration_start,
    eval_duration_end
        The same for evaluation pauses.
    idle_begin_time, idle_begin_duration, idle_begin_logged_end
        ``hang_begin`` / ``idle_begin`` markers, their logged durations and where those end.
    first_step_time
        ``first_step`` markers (a step began after a gang completion or restart).

    Notes
    -----
    Every instant derived from a logged duration (``*_logged_end``, ``*_duration_start``) is summed
    in integer nanoseconds (the duration rounded to the nanosecond) before it is turned into seconds
    since the origin, so a pause that ends exactly when the next step starts lands on the same float
    as that step's start and leaves no sliver of rounding between them.

    ``step_row`` is built on request from ``step_rows`` (steps that kept their input order need no
    index array); ``erased_by`` uses the narrowest integer type that holds its indices.
    """

    job_id: str
    origin: pd.Timestamp
    step_attempt: np.ndarray
    step_number: np.ndarray
    step_start: np.ndarray
    step_end: np.ndarray
    step_duration: np.ndarray
    step_input_wait: np.ndarray
    step_rows: _RowIndex = field(repr=False)
    erased_by: np.ndarray
    attempt_number: np.ndarray
    attempt_gang: np.ndarray
    attempt_release: np.ndarray
    attempt_cold: np.ndarray
    int_time: np.ndarray
    int_kind: np.ndarray
    int_detected: np.ndarray
    int_inferred: np.ndarray
    int_attempt: np.ndarray
    int_restore_step: np.ndarray
    restart_time: np.ndarray
    restart_rollback: np.ndarray
    restart_cause: np.ndarray
    commit_time: np.ndarray
    commit_step: np.ndarray
    ckpt_begin_time: np.ndarray
    ckpt_begin_commit: np.ndarray
    ckpt_begin_duration: np.ndarray
    ckpt_begin_logged_end: np.ndarray
    ckpt_duration_start: np.ndarray
    ckpt_duration_end: np.ndarray
    eval_begin_time: np.ndarray
    eval_begin_end: np.ndarray
    eval_begin_duration: np.ndarray
    eval_begin_logged_end: np.ndarray
    eval_duration_start: np.ndarray
    eval_duration_end: np.ndarray
    idle_begin_time: np.ndarray
    idle_begin_duration: np.ndarray
    idle_begin_logged_end: np.ndarray
    first_step_time: np.ndarray

    @property
    def step_row(self) -> np.ndarray:
        """Row of each step in the input steps table (built on request)."""
        return self.step_rows.to_array()

    @property
    def n_steps(self) -> int:
        """Number of executed steps."""
        return int(self.step_start.size)

    @property
    def start_s(self) -> float:
        """First gang completion (always 0.0)."""
        return float(self.attempt_gang[0]) if self.attempt_gang.size else 0.0

    @property
    def end_s(self) -> float:
        """Last release, seconds since origin."""
        return float(self.attempt_release.max()) if self.attempt_release.size else 0.0

    def to_utc(self, seconds: float) -> pd.Timestamp:
        """Convert seconds since origin back to a UTC timestamp."""
        return self.origin + pd.Timedelta(round(float(seconds) * _NS), unit="ns")


# ---------------------------------------------------------------------------------------------------
# Column coercion
# ---------------------------------------------------------------------------------------------------


def empty_steps() -> pd.DataFrame:
    """Return an empty steps table with the canonical columns and dtypes."""
    return pd.DataFrame({
        "job_id": pd.Series([], dtype="str"),
        "attempt": pd.Series([], dtype="int64"),
        "step": pd.Series([], dtype="int64"),
        "start": pd.Series([], dtype="datetime64[ns, UTC]"),
        "end": pd.Series([], dtype="datetime64[ns, UTC]"),
        "input_wait_s": pd.Series([], dtype="float64"),
    })


def empty_events() -> pd.DataFrame:
    """Return an empty events table with the canonical columns and dtypes."""
    return pd.DataFrame({
        "job_id": pd.Series([], dtype="str"),
        "attempt": pd.Series([], dtype="int64"),
        "time": pd.Series([], dtype="datetime64[ns, UTC]"),
        "kind": pd.Series([], dtype="str"),
        "step": pd.Series([], dtype="Int64"),
        "duration_s": pd.Series([], dtype="Float64"),
    })


def tables_from_seconds(steps: list[tuple[Any, ...]], events: list[tuple[Any, ...]], *, job_id: str = "job",
                        origin: Any = "2024-01-01T00:00:00Z") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build canonical tables from times given as seconds after an origin (fixtures, examples).

    Parameters
    ----------
    steps
        Tuples ``(attempt, step, start_s, end_s)`` or ``(attempt, step, start_s, end_s, input_wait_s)``.
    events
        Tuples ``(attempt, time_s, kind)``, ``(attempt, time_s, kind, step)`` or
        ``(attempt, time_s, kind, step, duration_s)``; use None for a missing step or duration.
    job_id
        The job every row belongs to.
    origin
        Timezone-aware time that second 0 stands for.

    Returns
    -------
    steps, events : pandas.DataFrame
        Canonical tables (not yet validated).

    Examples
    --------
    >>> s, e = tables_from_seconds([(0, 0, 10.0, 20.0)], [(0, 0.0, "gang_complete"), (0, 25.0, "release")])
    >>> list(s.columns), len(e)
    (['job_id', 'attempt', 'step', 'start', 'end', 'input_wait_s'], 2)
    """
    t0 = pd.Timestamp(origin)
    if t0.tzinfo is None:
        raise InputError(f"origin must be timezone-aware; got {origin!r}", field="origin")
    t0 = t0.tz_convert("UTC")

    def at(seconds: float) -> pd.Timestamp:
        return t0 + pd.Timedelta(round(float(seconds) * _NS), unit="ns")

    s_rows = [(job_id, int(r[0]), int(r[1]), at(r[2]), at(r[3]), float(r[4]) if len(r) > 4 else 0.0)
              for r in steps]
    e_rows = [(job_id, int(r[0]), at(r[1]), str(r[2])) for r in events]
    e_step = [r[3] if len(r) > 3 else None for r in events]
    e_dur = [r[4] if len(r) > 4 else None for r in events]
    s = pd.DataFrame(s_rows, columns=list(STEP_COLUMNS)) if s_rows else empty_steps()
    e = pd.DataFrame(e_rows, columns=list(EVENT_COLUMNS[:4])) if e_rows else empty_events()
    if len(s):
        s["start"] = pd.to_datetime(s["start"], utc=True).dt.as_unit("ns")
        s["end"] = pd.to_datetime(s["end"], utc=True).dt.as_unit("ns")
    if len(e):
        e["time"] = pd.to_datetime(e["time"], utc=True).dt.as_unit("ns")
        e["step"] = pd.array([None if v is None else int(v) for v in e_step], dtype="Int64")
        e["duration_s"] = pd.array([None if v is None else float(v) for v in e_dur], dtype="Float64")
    return s, e


def _times_ns(col: pd.Series, *, file: str, field: str) -> np.ndarray:
    """Return a time column as int64 UTC nanoseconds; naive or mixed-zone input raises."""
    n = len(col)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    dtype = col.dtype
    if dtype == _UTC_NS:
        ns = col.array.asi8
        if (ns == np.iinfo(np.int64).min).any():
            raise InputError("missing time; every record needs a timestamp", file=file,
                             row=int(np.argmax(ns == np.iinfo(np.int64).min)), field=field)
        return ns
    if isinstance(dtype, pd.DatetimeTZDtype):
        if col.isna().any():
            raise InputError("missing time; every record needs a timestamp", file=file,
                             row=int(np.argmax(col.isna().to_numpy())), field=field)
        return col.dt.tz_convert("UTC").dt.as_unit("ns").array.asi8.astype(np.int64, copy=False)
    if pd.api.types.is_datetime64_dtype(dtype):
        raise InputError("naive timestamps: canonical timeline times are timezone-aware UTC "
                         "(localise them in the reader, where the format says which zone they are in)",
                         file=file, row=0, field=field)
    if dtype == np.dtype(object):
        values = col.to_numpy()
        aware = np.fromiter((getattr(v, "tzinfo", None) is not None for v in values), bool, n)
        is_time = np.fromiter((isinstance(v, pd.Timestamp | np.datetime64) or hasattr(v, "tzinfo")
                               for v in values), bool, n)
        if not is_time.all():
            raise InputError(f"expected a timestamp, got {values[int(np.argmin(is_time))]!r}", file=file,
                             row=int(np.argmin(is_time)), field=field)
        if not aware.all():
            msg = ("mixed timezone-aware and naive timestamps in one column" if aware.any()
                   else "naive timestamps: canonical timeline times are timezone-aware UTC")
            raise InputError(msg, file=file, row=int(np.argmin(aware)), field=field)
        conv = pd.to_datetime(col, utc=True)
        if conv.isna().any():
            raise InputError("missing time", file=file, row=int(np.argmax(conv.isna().to_numpy())),
                             field=field)
        return conv.dt.as_unit("ns").array.asi8.astype(np.int64, copy=False)
    raise InputError(f"expected timezone-aware UTC timestamps, got column dtype {dtype}", file=file,
                     row=0, field=field)


def _int_column(col: pd.Series, *, file: str, field: str) -> np.ndarray:
    if col.isna().any():
        raise InputError("missing value; an integer is required", file=file,
                         row=int(np.argmax(col.isna().to_numpy())), field=field)
    if pd.api.types.is_bool_dtype(col.dtype) or not (pd.api.types.is_integer_dtype(col.dtype)
                                                     or pd.api.types.is_float_dtype(col.dtype)):
        raise InputError(f"expected integers, got column dtype {col.dtype}", file=file, row=0,
                         field=field)
    values = col.to_numpy(dtype=np.float64) if pd.api.types.is_float_dtype(col.dtype) else None
    if values is not None:
        bad = values != np.round(values)
        if bad.any():
            raise InputError(f"expected an integer, got {values[int(np.argmax(bad))]!r}", file=file,
                             row=int(np.argmax(bad)), field=field)
        return values.astype(np.int64)
    return col.to_numpy(dtype=np.int64)


def _text_column(col: pd.Series, *, file: str, field: str) -> pd.Series:
    if col.isna().any():
        raise InputError("missing value; text is required", file=file,
                         row=int(np.argmax(col.isna().to_numpy())), field=field)
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col
    if pd.api.types.is_string_dtype(col.dtype) and not col.dtype == object:
        return col
    return col.astype("str")


def _check_columns(frame: pd.DataFrame, required: tuple[str, ...], *, file: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(frame).__name__}", file=file)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        hint = (" -- the timeline must log input wait per step (rule 22); use 0.0 for steps that "
                "never waited" if "input_wait_s" in missing else "")
        raise InputError(f"missing column(s) {missing}; expected {list(required)}{hint}", file=file,
                         field=missing[0])


# ---------------------------------------------------------------------------------------------------
# Table-level validation
# ---------------------------------------------------------------------------------------------------


@dataclass
class _Tables:
    """Validated tables as arrays (sorted), plus the ledger; internal."""

    steps_frame: pd.DataFrame | None
    events_frame: pd.DataFrame | None
    job_ids: list[str]
    s_job: np.ndarray
    s_attempt: np.ndarray
    s_step: np.ndarray
    s_start: np.ndarray
    s_end: np.ndarray
    s_wait: np.ndarray
    s_row: np.ndarray | None  # None: the input order
    e_job: np.ndarray
    e_attempt: np.ndarray
    e_time: np.ndarray
    e_kind: np.ndarray
    e_step: np.ndarray
    e_dur: np.ndarray
    e_row: np.ndarray
    ledger: TimelineLedger
    steps_file: str
    events_file: str


def _prepare_tables(steps: pd.DataFrame, events: pd.DataFrame, *, source: str,
                    build_frames: bool) -> _Tables:
    steps_file, events_file = f"{source} (steps)", f"{source} (events)"
    _check_columns(steps, STEP_COLUMNS, file=steps_file)
    ev_required = ("job_id", "attempt", "time", "kind")
    _check_columns(events, ev_required, file=events_file)
    ledger = TimelineLedger(read=len(steps) + len(events))

    # --- steps ----------------------------------------------------------------------------------
    s_jobtext = _text_column(steps["job_id"], file=steps_file, field="job_id")
    s_attempt = _int_column(steps["attempt"], file=steps_file, field="attempt")
    s_step = _int_column(steps["step"], file=steps_file, field="step")
    s_start = _times_ns(steps["start"], file=steps_file, field="start")
    s_end = _times_ns(steps["end"], file=steps_file, field="end")
    wait_col = steps["input_wait_s"]
    if not (pd.api.types.is_numeric_dtype(wait_col.dtype) and not pd.api.types.is_bool_dtype(wait_col.dtype)):
        raise InputError(f"expected seconds (float), got column dtype {wait_col.dtype}", file=steps_file,
                         row=0, field="input_wait_s")
    s_wait = wait_col.to_numpy(dtype=np.float64, na_value=np.nan)
    # input row of each step: None while the steps are still in input order (no index array needed)
    rows: np.ndarray | None = None
    bad = s_end < s_start
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"step {int(s_step[i])} ends before it starts (start "
                         f"{pd.Timestamp(s_start[i], tz='UTC')}, end {pd.Timestamp(s_end[i], tz='UTC')})",
                         file=steps_file, row=i, field="end")
    bad = ~np.isfinite(s_wait) | (s_wait < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"input wait must be a finite number of seconds >= 0, got {s_wait[i]!r}",
                         file=steps_file, row=i, field="input_wait_s")
    ns_buf, dur_buf = np.empty(min(len(steps), _BLOCK), np.int64), np.empty(min(len(steps), _BLOCK))
    for lo, hi in _blocks(len(steps)):
        # in blocks, in two reused buffers: the durations are never a full-length temporary
        dur = dur_buf[:hi - lo]
        np.divide(np.subtract(s_end[lo:hi], s_start[lo:hi], out=ns_buf[:hi - lo]), _NS, out=dur)
        np.multiply(dur, 1 + 1e-9, out=dur)
        bad = s_wait[lo:hi] > np.add(dur, 1e-9, out=dur)
        if bad.any():
            i = int(np.argmax(bad))
            step_s = float((s_end[lo + i] - s_start[lo + i]) / _NS)
            raise InputError(f"input wait {s_wait[lo + i]!r} s is longer than the step itself ({step_s!r} s)",
                             file=steps_file, row=lo + i, field="input_wait_s")

    # --- events ---------------------------------------------------------------------------------
    e_jobtext = _text_column(events["job_id"], file=events_file, field="job_id")
    e_attempt = _int_column(events["attempt"], file=events_file, field="attempt")
    e_time = _times_ns(events["time"], file=events_file, field="time")
    e_kind = _text_column(events["kind"], file=events_file, field="kind").to_numpy(dtype=object)
    if "step" in events.columns:
        col = events["step"]
        if len(col) and not (pd.api.types.is_numeric_dtype(col.dtype) or col.isna().all()):
            raise InputError(f"expected integer steps, got column dtype {col.dtype}", file=events_file,
                             row=0, field="step")
        e_step = pd.to_numeric(col).to_numpy(dtype=np.float64, na_value=np.nan) if len(col) else \
            np.zeros(0)
        fin = np.isfinite(e_step)
        if (e_step[fin] != np.round(e_step[fin])).any():
            i = int(np.flatnonzero(fin)[np.argmax(e_step[fin] != np.round(e_step[fin]))])
            raise InputError(f"expected an integer step, got {e_step[i]!r}", file=events_file, row=i,
                             field="step")
    else:
        e_step = np.full(len(events), np.nan)
    if "duration_s" in events.columns and len(events):
        col = events["duration_s"]
        if not (pd.api.types.is_numeric_dtype(col.dtype) or col.isna().all()):
            raise InputError(f"expected seconds, got column dtype {col.dtype}", file=events_file, row=0,
                             field="duration_s")
        e_dur = pd.to_numeric(col).to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.isfinite(e_dur) & (e_dur < 0) | np.isinf(e_dur)
        if bad.any():
            raise InputError(f"duration must be >= 0 and finite, got {e_dur[int(np.argmax(bad))]!r}",
                             file=events_file, row=int(np.argmax(bad)), field="duration_s")
    else:
        e_dur = np.full(len(events), np.nan)
    e_rows = np.arange(len(events), dtype=np.int64)

    known = np.isin(e_kind, [*EVENT_KINDS, *AUXILIARY_EVENT_KINDS])
    if not known.all():
        other = np.flatnonzero(~known)
        known[other] = [str(k).startswith(AUXILIARY_KIND_PREFIXES) for k in e_kind[other]]
    if not known.all():
        kinds, counts = np.unique(e_kind[~known].astype(str), return_counts=True)
        for k, c in zip(kinds.tolist(), counts.tolist(), strict=True):
            first = int(e_rows[~known][np.argmax(e_kind[~known] == k)])
            ledger.flag("unknown_event_kind",
                        f"{c} event(s) of unknown kind {k!r} (first at row {first}) kept in the table "
                        "and not used by the partition")

    # --- job codes: the narrowest integer type that holds every job (one byte per step for < 127 jobs)
    s_codes_raw, s_uni = _text_codes(s_jobtext)
    e_codes_raw, e_uni = _text_codes(e_jobtext)
    job_ids = sorted({str(u) for u in s_uni} | {str(u) for u in e_uni})
    codes = {j: i for i, j in enumerate(job_ids)}
    code_type = _code_dtype(len(job_ids) + 1)
    s_job = _recode(s_codes_raw, np.array([codes[str(u)] for u in s_uni], dtype=code_type))
    e_job = _recode(e_codes_raw, np.array([codes[str(u)] for u in e_uni], dtype=code_type))

    # --- events out of order within an attempt: sort, and record each moved row as a repair -----
    if len(events):
        keys = [e_job, e_attempt]
        seen_max = pd.Series(e_time).groupby(keys, sort=False).cummax()
        prev_max = seen_max.groupby(keys, sort=False).shift(1, fill_value=np.iinfo(np.int64).min)
        late = e_time < prev_max.to_numpy(dtype=np.int64)
        for i in np.flatnonzero(late):
            ledger.repair(events_file, int(i), "time",
                          "event out of time order within its attempt: moved into time order")
        order = np.lexsort((e_time, e_job))
        e_job, e_attempt, e_time = e_job[order], e_attempt[order], e_time[order]
        e_kind, e_step, e_dur, e_rows = e_kind[order], e_step[order], e_dur[order], e_rows[order]

    # --- steps: sort by (job, start, end, step) and reject exact duplicates ----------------------
    steps_untouched = True
    if len(steps):
        if not _sorted_by_job_and_start(s_job, s_start):
            steps_untouched = False
            order = np.lexsort((s_attempt, s_step, s_end, s_start, s_job))
            s_job, s_attempt, s_step = s_job[order], s_attempt[order], s_step[order]
            s_start, s_end, s_wait, rows = s_start[order], s_end[order], s_wait[order], order
            same = ((s_job[1:] == s_job[:-1]) & (s_attempt[1:] == s_attempt[:-1])
                    & (s_step[1:] == s_step[:-1]) & (s_start[1:] == s_start[:-1])
                    & (s_end[1:] == s_end[:-1]) & (s_wait[1:] == s_wait[:-1]))
            if same.any():
                dup = np.concatenate([[False], same])
                for i in np.flatnonzero(dup):
                    ledger.reject(steps_file, int(rows[i]), None,
                                  f"exact duplicate of step row {int(rows[i - 1])} (same job, attempt, "
                                  "step, start, end and input wait)")
                keep = ~dup
                s_job, s_attempt, s_step = s_job[keep], s_attempt[keep], s_step[keep]
                s_start, s_end, s_wait, rows = s_start[keep], s_end[keep], s_wait[keep], rows[keep]
        i = _first_overlap(s_job, s_start, s_end)
        if i >= 0:
            row_of = _RowIndex(rows, 0, s_job.size)
            raise InputError(
                f"step {int(s_step[i])} (attempt {int(s_attempt[i])}) starts before step "
                f"{int(s_step[i - 1])} (attempt {int(s_attempt[i - 1])}, row {row_of[i - 1]}) ends: "
                "steps of one job must not overlap in time (a conflicting duplicate step record?)",
                file=steps_file, row=row_of[i], field="start")

    ledger.kept = ledger.read - ledger.repaired - ledger.rejected

    steps_frame = events_frame = None
    if build_frames and steps_untouched and _canonical_step_dtypes(steps):
        # already canonical, sorted and free of duplicates: hand the table back without copying it
        steps_frame = steps.loc[:, list(STEP_COLUMNS)].reset_index(drop=True)
    elif build_frames:
        steps_frame = pd.DataFrame({
            "job_id": pd.Categorical.from_codes(s_job, categories=job_ids) if job_ids else
            pd.Categorical([]),
            "attempt": s_attempt.astype(np.int64),
            "step": s_step.astype(np.int64),
            "start": _ns_to_series(s_start),
            "end": _ns_to_series(s_end),
            "input_wait_s": s_wait.astype(np.float64),
        })
    if build_frames:
        events_frame = pd.DataFrame({
            "job_id": pd.Categorical.from_codes(e_job, categories=job_ids) if job_ids else
            pd.Categorical([]),
            "attempt": e_attempt.astype(np.int64),
            "time": _ns_to_series(e_time),
            "kind": pd.Series(e_kind, dtype="str"),
            "step": pd.Series(e_step, dtype="float64").astype("Int64"),
            "duration_s": pd.Series(e_dur, dtype="float64").astype("Float64"),
        })
    return _Tables(steps_frame, events_frame, job_ids, s_job, s_attempt, s_step, s_start, s_end, s_wait,
                   rows, e_job, e_attempt, e_time, e_kind, e_step, e_dur, e_rows, ledger, steps_file,
                   events_file)


#: Rows per block where a full-length pass would otherwise allocate a temporary per operation.
_BLOCK = 1 << 20


def _blocks(n: int, size: int = _BLOCK) -> list[tuple[int, int]]:
    """Split ``range(n)`` into consecutive ``(lo, hi)`` blocks of at most ``size`` rows."""
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


def _sorted_by_job_and_start(job: np.ndarray, start: np.ndarray) -> bool:
    """Whether rows are sorted by job, and by strictly increasing start within a job (in blocks)."""
    n = job.size
    up, job_up = np.empty(min(n, _BLOCK), dtype=bool), np.empty(min(n, _BLOCK), dtype=bool)
    for lo, hi in _blocks(n - 1):
        m = hi - lo
        j0, j1 = job[lo:hi], job[lo + 1:hi + 1]
        if not np.greater_equal(j1, j0, out=up[:m]).all():
            return False
        np.greater(start[lo + 1:hi + 1], start[lo:hi], out=up[:m])
        if not np.logical_or(up[:m], np.greater(j1, j0, out=job_up[:m]), out=up[:m]).all():
            return False
    return True


def _first_overlap(job: np.ndarray, start: np.ndarray, end: np.ndarray) -> int:
    """Index of the first row that starts before the previous row of its job ends, or -1 (in blocks)."""
    n = job.size
    same, early = np.empty(min(n, _BLOCK), dtype=bool), np.empty(min(n, _BLOCK), dtype=bool)
    for lo, hi in _blocks(n - 1):
        m = hi - lo
        np.equal(job[lo + 1:hi + 1], job[lo:hi], out=same[:m])
        hit = np.logical_and(same[:m], np.less(start[lo + 1:hi + 1], end[lo:hi], out=early[:m]), out=same[:m])
        if hit.any():
            return lo + int(np.argmax(hit)) + 1
    return -1


def _code_dtype(n_codes: int) -> np.dtype:
    """Return the narrowest signed integer type that holds ``-1 .. n_codes``."""
    for dtype in (np.int8, np.int16, np.int32):
        if n_codes < np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _text_codes(col: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Codes into the distinct values of a text column, and those values (only the ones used).

    A categorical column hands over its own codes (no copy); a plain text column is factorized.
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        cats = list(col.cat.categories)
        used = np.zeros(len(cats), dtype=bool)
        for lo, hi in _blocks(codes.size):
            used |= np.bincount(codes[lo:hi], minlength=len(cats)).astype(bool)
        if used.all():
            return codes, cats
        keep = np.flatnonzero(used)
        remap = np.full(len(cats), -1, dtype=_code_dtype(len(cats)))
        remap[keep] = np.arange(keep.size)
        return _recode(codes, remap), [cats[i] for i in keep]
    codes, uniques = pd.factorize(col)
    return codes, list(uniques)


def _recode(codes: np.ndarray, lookup: np.ndarray) -> np.ndarray:
    """``lookup[codes]`` in the lookup's (narrow) type, without a full-length index temporary."""
    if codes.size == 0:
        return np.zeros(0, dtype=lookup.dtype)
    if np.array_equal(lookup, np.arange(lookup.size)):
        return codes.astype(lookup.dtype, copy=False)
    out = np.empty(codes.size, dtype=lookup.dtype)
    for lo, hi in _blocks(codes.size):
        np.take(lookup, codes[lo:hi], out=out[lo:hi])
    return out


def _canonical_step_dtypes(steps: pd.DataFrame) -> bool:
    job = steps["job_id"].dtype
    text = isinstance(job, pd.CategoricalDtype) or (pd.api.types.is_string_dtype(job)
                                                     and job != np.dtype(object))
    return (text and steps["attempt"].dtype == np.int64 and steps["step"].dtype == np.int64
            and steps["start"].dtype == _UTC_NS and steps["end"].dtype == _UTC_NS
            and steps["input_wait_s"].dtype == np.float64)


def _ns_to_series(ns: np.ndarray) -> pd.Series:
    return pd.Series(ns.astype(np.int64).view("datetime64[ns]")).dt.tz_localize("UTC")


# ---------------------------------------------------------------------------------------------------
# Per-job structure: attempts, interruptions, restarts, erasure
# ---------------------------------------------------------------------------------------------------


def _build_job(t: _Tables, code: int, s_lo: int, s_hi: int, e_lo: int, e_hi: int) -> JobTimeline:
    job_id = t.job_ids[code]
    ledger = t.ledger
    sf, ef = t.steps_file, t.events_file
    kind = t.e_kind[e_lo:e_hi]
    e_att = t.e_attempt[e_lo:e_hi]
    e_ns = t.e_time[e_lo:e_hi]
    e_step = t.e_step[e_lo:e_hi]
    e_dur = t.e_dur[e_lo:e_hi]
    e_row = t.e_row[e_lo:e_hi]
    s_att = t.s_attempt[s_lo:s_hi]
    s_num = t.s_step[s_lo:s_hi]
    s_wait = t.s_wait[s_lo:s_hi]
    s_row = _RowIndex(t.s_row, s_lo, s_hi)
    n = int(s_num.size)

    gang_mask = kind == "gang_complete"
    if not gang_mask.any():
        raise InputError(f"job {job_id!r} has no gang_complete event: held time starts when the "
                         "allocation is complete, which must be logged (rule 8), not inferred",
                         file=ef if e_row.size else sf, row=int(e_row[0]) if e_row.size else int(s_row[0]),
                         field="kind")
    origin_ns = int(e_ns[gang_mask].min())
    origin = pd.Timestamp(origin_ns, tz="UTC")

    def utc(seconds: float) -> pd.Timestamp:
        return origin + pd.Timedelta(seconds=float(seconds))

    e_t = (e_ns - origin_ns) / _NS
    # step times and durations from integer nanoseconds relative to the origin, in blocks: a duration
    # is its exact nanosecond count in seconds, not the difference of two rounded instants
    s_t0, s_t1, s_dur = np.empty(n), np.empty(n), np.empty(n)
    start_ns, end_ns = t.s_start[s_lo:s_hi], t.s_end[s_lo:s_hi]
    a_buf, b_buf = np.empty(min(n, _BLOCK), np.int64), np.empty(min(n, _BLOCK), np.int64)
    for lo, hi in _blocks(n):
        a = np.subtract(start_ns[lo:hi], origin_ns, out=a_buf[:hi - lo])
        np.divide(a, _NS, out=s_t0[lo:hi])
        b = np.subtract(end_ns[lo:hi], origin_ns, out=b_buf[:hi - lo])
        np.divide(b, _NS, out=s_t1[lo:hi])
        np.divide(np.subtract(b, a, out=b), _NS, out=s_dur[lo:hi])
    del start_ns, end_ns, a_buf, b_buf

    def rel_ns(ns: np.ndarray, add_s: np.ndarray | None = None) -> np.ndarray:
        # seconds since the origin of an instant (plus a logged duration), summed in nanoseconds so
        # that one instant always maps to one float, however it was reached
        if add_s is None:
            return (ns - origin_ns) / _NS
        out = np.full(ns.size, np.nan)
        fin = np.isfinite(add_s)
        exact = fin & (np.abs(add_s) < _EXACT_DURATION_S)
        out[exact] = (ns[exact] + np.rint(add_s[exact] * _NS).astype(np.int64) - origin_ns) / _NS
        huge = fin & ~exact  # beyond int64 nanoseconds: plain float seconds
        out[huge] = (ns[huge] - origin_ns) / _NS + add_s[huge]
        return out

    # --- attempts: held interval [gang_complete, release) -----------------------------------------
    g_att, g_idx, g_cnt = np.unique(e_att[gang_mask], return_index=True, return_counts=True)
    if (g_cnt > 1).any():
        a = g_att[np.argmax(g_cnt > 1)]
        raise InputError(f"attempt {int(a)} of job {job_id!r} has {int(g_cnt.max())} gang_complete events; "
                         "a new allocation is a new attempt", file=ef,
                         row=int(e_row[gang_mask][e_att[gang_mask] == a][1]), field="attempt")
    rel_mask = kind == "release"
    r_att, r_cnt = np.unique(e_att[rel_mask], return_counts=True)
    if (r_cnt > 1).any():
        a = r_att[np.argmax(r_cnt > 1)]
        raise InputError(f"attempt {int(a)} of job {job_id!r} is released twice", file=ef,
                         row=int(e_row[rel_mask][e_att[rel_mask] == a][1]), field="kind")
    # first step of each block of one attempt's steps (steps are in time order)
    blk = np.concatenate([[0], np.flatnonzero(s_att[1:] != s_att[:-1]) + 1]).astype(np.int64) if n else \
        np.zeros(0, np.int64)
    s_att_values = s_att[blk]
    missing = np.setdiff1d(np.unique(np.concatenate([e_att, s_att_values])), g_att)
    if missing.size:
        a = int(missing[0])
        in_steps = s_att == a
        raise InputError(f"attempt {a} of job {job_id!r} has records but no gang_complete event; held time "
                         "starts at gang completion, which must be logged (rule 8)",
                         file=sf if in_steps.any() else ef,
                         row=int(s_row[np.argmax(in_steps)] if in_steps.any()
                                 else e_row[np.argmax(e_att == a)]),
                         field="attempt")
    gang = e_t[gang_mask][g_idx]
    release = np.full(g_att.size, np.nan)
    release[np.searchsorted(g_att, e_att[rel_mask])] = e_t[rel_mask]
    for i in np.flatnonzero(np.isnan(release)):
        a = g_att[i]
        last = float(e_t[e_att == a].max())
        if (s_att == a).any():
            last = max(last, float(s_t1[s_att == a].max()))
        release[i] = last
        ledger.flag("release_missing", f"attempt {int(a)} has no release event; its held time is taken to "
                    "end at its last record", job_id=job_id, attempt=int(a), time=utc(last))
    if (release < gang).any():
        i = int(np.argmax(release < gang))
        raise InputError(f"attempt {int(g_att[i])} of job {job_id!r} is released before its gang completes",
                         file=ef, row=int(e_row[rel_mask][np.argmax(e_att[rel_mask] == g_att[i])]),
                         field="time")
    order = np.argsort(gang, kind="stable")
    att_num, gang, release = g_att[order], gang[order], release[order]
    if (gang[1:] < release[:-1]).any():
        i = int(np.argmax(gang[1:] < release[:-1])) + 1
        raise InputError(f"attempt {int(att_num[i])} of job {job_id!r} becomes complete before attempt "
                         f"{int(att_num[i - 1])} is released: attempts of one job must not overlap",
                         file=ef, row=int(e_row[gang_mask][e_att[gang_mask] == att_num[i]][0]), field="time")
    by_number = np.argsort(att_num)
    e_pos = by_number[np.searchsorted(att_num[by_number], e_att)]
    # steps are in time order, so each block of one attempt's steps lies inside its held interval iff
    # its first start and last end do (the ends increase, since steps do not overlap)
    blk_end = np.concatenate([blk[1:], [n]]) - 1 if n else blk
    blk_pos = by_number[np.searchsorted(att_num[by_number], s_att[blk])]
    bad_blk = (s_t0[blk] < gang[blk_pos]) | (s_t1[blk_end] > release[blk_pos])
    if bad_blk.any():
        b = int(np.argmax(bad_blk))
        lo, hi = int(blk[b]), int(blk_end[b]) + 1
        pos = blk_pos[b]
        i = lo + int(np.argmax((s_t0[lo:hi] < gang[pos]) | (s_t1[lo:hi] > release[pos])))
        raise InputError(f"step {int(s_num[i])} of attempt {int(s_att[i])} lies outside the attempt's held "
                         "interval (gang_complete -> release)", file=sf, row=int(s_row[i]), field="start")
    bad = (e_t < gang[e_pos]) | (e_t > release[e_pos])
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{kind[i]} event of attempt {int(e_att[i])} lies outside the attempt's held "
                         "interval (gang_complete -> release)", file=ef, row=int(e_row[i]), field="time")
    cold = np.zeros(att_num.size, dtype=bool)
    cold[e_pos[kind == "cold_start"]] = True
    fs_t = e_t[kind == "first_step"]
    if fs_t.size:
        # a first_step marker should start a step row, unless that step was cut off by an interruption
        k = np.searchsorted(s_t0, fs_t, side="left")
        nxt_step = np.full(fs_t.size, np.inf)
        if n:
            nxt_step[k < n] = s_t0[k[k < n]]
        stops = np.sort(e_t[np.isin(kind, (*INTERRUPTION_KINDS, "failure_detected"))])
        nxt_stop = np.full(fs_t.size, np.inf)
        j = np.searchsorted(stops, fs_t, side="left")
        nxt_stop[j < stops.size] = stops[j[j < stops.size]]
        odd = (np.abs(nxt_step - fs_t) > 1e-3) & ~(nxt_stop < nxt_step)
        if odd.any():
            ledger.flag("first_step_mismatch", f"{int(odd.sum())} first_step marker(s) start no step in the "
                        "steps table and are not followed by an interruption; they only end outages",
                        job_id=job_id, time=utc(fs_t[np.argmax(odd)]))

    # --- commits ----------------------------------------------------------------------------------
    c_mask = kind == "checkpoint_commit"
    if np.isnan(e_step[c_mask]).any():
        raise InputError("checkpoint_commit without a step: a commit must say which step's state it holds",
                         file=ef, row=int(e_row[c_mask][np.argmax(np.isnan(e_step[c_mask]))]), field="step")
    commit_t, commit_s = e_t[c_mask], e_step[c_mask]
    if commit_t.size:
        idx = np.searchsorted(s_t1, commit_t, side="right") - 1
        done = np.full(commit_t.size, -np.inf)
        if n and (idx >= 0).any():
            # the highest step finished by each commit: running maxima of the segments between the
            # (sorted) commit positions, never a full-length running maximum
            ends, inv = np.unique(idx[idx >= 0] + 1, return_inverse=True)
            seg_max = np.maximum.reduceat(s_num[:ends[-1]], np.concatenate([[0], ends[:-1]]))
            done[idx >= 0] = np.maximum.accumulate(seg_max)[inv]
        bad = commit_s > done
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"checkpoint of step {int(commit_s[i])} committed before any step >= "
                             f"{int(commit_s[i])} had finished", file=ef, row=int(e_row[c_mask][i]),
                             field="step")

    # --- interruptions (failure, preempt), with detection times -----------------------------------
    int_pos = np.flatnonzero(np.isin(kind, INTERRUPTION_KINDS))
    i_time, i_kind = list(e_t[int_pos]), list(kind[int_pos])
    i_att, i_det = list(e_att[int_pos]), [np.nan] * int_pos.size
    for d in np.flatnonzero(kind == "failure_detected"):
        prior = int_pos[(int_pos < d) & (e_att[int_pos] == e_att[d])]
        if prior.size and kind[prior[-1]] == "failure":
            k = int(np.searchsorted(int_pos, prior[-1]))
            if np.isnan(i_det[k]):
                i_det[k] = e_t[d]
            continue
        ledger.repair(ef, int(e_row[d]), "kind", "failure_detected with no preceding failure in its attempt: "
                      "taken as the fault time (detection latency unknown)")
        i_time.append(e_t[d])
        i_kind.append("failure")
        i_att.append(e_att[d])
        i_det.append(e_t[d])
    order = np.argsort(np.asarray(i_time, dtype=float), kind="stable")
    int_time = np.asarray(i_time, dtype=float)[order]
    int_kind = np.asarray(i_kind, dtype=object)[order]
    int_att = np.asarray(i_att, dtype=np.int64)[order]
    int_det = np.asarray(i_det, dtype=float)[order]
    if int_time.size and n:
        j = np.searchsorted(s_t0, int_time, side="left") - 1
        spans = (j >= 0) & (s_t1[np.maximum(j, 0)] > int_time)
        if spans.any():
            k = int(np.argmax(spans))
            raise InputError(f"step {int(s_num[j[k]])} runs across the {int_kind[k]} at {utc(int_time[k])}: "
                             "a step cannot finish after the fault or eviction that stopped progress",
                             file=sf, row=int(s_row[j[k]]), field="end")

    # --- explicit restores --------------------------------------------------------------------------
    rs_idx = np.flatnonzero(kind == "restore")
    rs_time = e_t[rs_idx]
    rs_roll = np.where(np.isnan(e_step[rs_idx]), -np.inf, e_step[rs_idx])
    for k, i in enumerate(rs_idx):
        if np.isfinite(rs_roll[k]) and not ((commit_s == rs_roll[k]) & (commit_t <= rs_time[k])).any():
            raise InputError(f"restore to step {int(rs_roll[k])}, but no checkpoint of step "
                             f"{int(rs_roll[k])} was committed before it", file=ef, row=int(e_row[i]),
                             field="step")
        nxt = int(np.searchsorted(s_t0, rs_time[k], side="left"))
        if nxt >= n or (k + 1 < rs_time.size and rs_time[k + 1] <= s_t0[nxt]):
            continue  # no step, or another restore, before the next step
        first = s_num[nxt]
        if first <= rs_roll[k]:
            raise InputError(f"the first step after a restore to step {int(rs_roll[k])} is step "
                             f"{int(first)}: a restored job resumes after the restored step", file=sf,
                             row=int(s_row[nxt]), field="step")
        if np.isfinite(rs_roll[k]) and first > rs_roll[k] + 1:
            ledger.flag("step_records_missing", f"after a restore to step {int(rs_roll[k])} the first "
                        f"recorded step is {int(first)}", job_id=job_id, attempt=int(s_att[nxt]),
                        time=utc(s_t0[nxt]))

    # --- inferred restarts: a step number that does not increase, with no restore in between -------
    # step i and i + 1 are in one segment unless a restore falls between them
    first_after = np.searchsorted(s_t0, rs_time, side="left")
    seg_first = np.unique(first_after[(first_after > 0) & (first_after < n)])
    inf_parts, jumps = [], 0
    for lo, hi in _blocks(max(n - 1, 0)):
        # in blocks: step i + 1 against step i, a restore between them excepted
        step_diff = s_num[lo + 1:hi + 1] - s_num[lo:hi]
        same_seg = np.ones(hi - lo, dtype=bool)
        cut = seg_first[(seg_first > lo) & (seg_first <= hi)]
        same_seg[cut - 1 - lo] = False
        inf_parts.append(np.flatnonzero(same_seg & (step_diff <= 0)) + lo + 1)
        jumps += int(np.count_nonzero(same_seg & (step_diff > 1)))
    inf_idx = np.concatenate(inf_parts) if inf_parts else np.zeros(0, np.int64)
    for i in inf_idx:
        ledger.flag("restart_inferred_from_step_numbers",
                    f"step {int(s_num[i])} runs again after step {int(s_num[i - 1])} with no restore event: "
                    f"a restart to step {int(s_num[i]) - 1} is inferred (fallback; log restore events)",
                    job_id=job_id, attempt=int(s_att[i]), time=utc(s_t0[i]))
    if jumps:
        ledger.flag("step_records_missing", f"step numbers skip ahead {jumps} time(s) with no restart "
                    "(missing step records?); the skipped time is not counted as a step", job_id=job_id)
    r_time = np.concatenate([rs_time, s_t0[inf_idx]])
    r_roll = np.concatenate([rs_roll, (s_num[inf_idx] - 1).astype(float)])
    r_explicit = np.concatenate([np.ones(rs_time.size, bool), np.zeros(inf_idx.size, bool)])

    # --- each interruption: its restart, an implied rollback, or a terminal rollback ---------------
    resume = np.searchsorted(s_t0, int_time, side="left")
    resume_start = np.full(int_time.size, np.inf)
    if n:
        resume_start[resume < n] = s_t0[resume[resume < n]]
    implied = np.full(int_time.size, np.nan)
    r_sorted = np.sort(r_time)
    lo = np.searchsorted(r_sorted, int_time, side="left")
    has_restart = lo < r_sorted.size
    has_restart[has_restart] = r_sorted[lo[has_restart]] <= resume_start[has_restart]
    term_t, term_roll = [], []
    for k in np.flatnonzero(~has_restart):
        if resume[k] < n:
            if s_att[resume[k]] == int_att[k]:
                raise InputError(
                    f"{int_kind[k]} at {utc(int_time[k])} in attempt {int(int_att[k])} is followed by step "
                    f"{int(s_num[resume[k]])} in the same attempt with no restart (no restore event, no new "
                    "attempt): log the restart", file=sf, row=int(s_row[resume[k]]), field="step")
            implied[k] = float(s_num[resume[k]] - 1)
            ledger.flag("rollback_inferred", f"the restart after the {int_kind[k]} at {utc(int_time[k])} "
                        f"has no restore event; it resumes at step {int(s_num[resume[k]])}, so the rollback "
                        f"point is taken as step {int(s_num[resume[k]]) - 1}", job_id=job_id,
                        attempt=int(s_att[resume[k]]))
        else:
            done = commit_t <= int_time[k]
            term_t.append(int_time[k])
            term_roll.append(float(commit_s[done][np.argmax(commit_t[done])]) if done.any() else -np.inf)
            ledger.flag("terminal_interruption", f"the job never resumed after the {int_kind[k]} at "
                        f"{utc(int_time[k])}; its uncommitted work is charged to it", job_id=job_id,
                        attempt=int(int_att[k]))
    r_time = np.concatenate([r_time, term_t])
    r_roll = np.concatenate([r_roll, term_roll])
    r_explicit = np.concatenate([r_explicit, np.zeros(len(term_t), bool)])
    order = np.lexsort((~r_explicit, r_time))
    r_time, r_roll = r_time[order], r_roll[order]

    # cause of each restart: the latest interruption before it with no step in between
    cand = np.searchsorted(int_time, r_time, side="right") - 1
    cause = np.full(r_time.size, -1, dtype=np.int64)
    ok = cand >= 0
    ok[ok] = resume_start[cand[ok]] >= r_time[ok]
    cause[ok] = cand[ok]

    # --- erasure: the live chain of executions as a stack of segments, unwound at each restart -----
    # a restart or interruption index: the narrowest integer type that holds them all
    erased_by = np.full(n, -1, dtype=_code_dtype(r_time.size + int_time.size + 1))
    # segment k holds the steps that start after restart k - 1 and before restart k
    bounds = np.concatenate([[0], np.searchsorted(s_t0, r_time, side="left"), [n]]).astype(np.int64)
    stack: list[list[int]] = []
    unlogged: list[int] = []  # restarts that erased work with no interruption logged before them
    for k in range(r_time.size):
        a, b = int(bounds[k]), int(bounds[k + 1])
        if b > a:
            stack.append([a, b])
        erased_any = False
        while stack:
            a_, b_ = stack[-1]
            roll = r_roll[k]
            # an integer target keeps the search on the integer steps (a float one copies them)
            cut = (a_ + int(np.searchsorted(s_num[a_:b_], np.int64(roll), side="right")) if np.isfinite(roll)
                   else (a_ if roll < 0 else b_))
            if cut < b_:
                erased_by[cut:b_] = k  # restart index for now
                erased_any = True
            if cut == a_:
                stack.pop()
                continue
            stack[-1][1] = cut
            break
        if erased_any and cause[k] < 0:
            unlogged.append(k)
    if unlogged:
        add_t, add_a = [], []
        for k in unlogged:
            last = int(np.searchsorted(s_t0, r_time[k], side="left")) - 1
            add_t.append(float(s_t1[last]))
            add_a.append(int(s_att[last]))
            ledger.flag("unlogged_interruption", "steps were erased by a restart with no failure or preempt "
                        "logged before it: treated as an unlogged failure at the end of the last step before "
                        "the restart", job_id=job_id, attempt=add_a[-1], time=utc(add_t[-1]))
        m = int_time.size
        int_time = np.concatenate([int_time, add_t])
        int_kind = np.concatenate([int_kind, np.array(["failure"] * len(add_t), dtype=object)])
        int_att = np.concatenate([int_att, np.asarray(add_a, dtype=np.int64)])
        int_det = np.concatenate([int_det, np.full(len(add_t), np.nan)])
        implied = np.concatenate([implied, np.full(len(add_t), np.nan)])
        inferred = np.concatenate([np.zeros(m, bool), np.ones(len(add_t), bool)])
        cause[np.asarray(unlogged)] = m + np.arange(len(add_t))
        order = np.argsort(int_time, kind="stable")
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        int_time, int_kind, int_att = int_time[order], int_kind[order], int_att[order]
        int_det, implied, inferred = int_det[order], implied[order], inferred[order]
        cause = np.where(cause >= 0, inv[np.maximum(cause, 0)], -1)
    else:
        inferred = np.zeros(int_time.size, bool)
    hit = erased_by >= 0
    erased_by[hit] = cause[erased_by[hit]]
    int_restore = implied.copy()
    has = cause >= 0
    int_restore[cause[has]] = r_roll[has]

    # --- checkpoint, evaluation and idle markers ------------------------------------------------------
    def paired(begin_kind: str, end_kind: str) -> tuple[np.ndarray, ...]:
        # a begin pairs with the next end record of its attempt -- of the same step when both carry
        # one -- and an end closes only the latest begin before it
        b_idx = np.flatnonzero(kind == begin_kind)
        x_idx = np.flatnonzero(kind == end_kind)
        pair_end = np.full(b_idx.size, np.nan)
        used = np.zeros(x_idx.size, dtype=bool)
        if b_idx.size and x_idx.size:
            b_key = np.where(np.isnan(e_step[b_idx]), -1, e_step[b_idx]).astype(np.int64)
            match = np.full(b_idx.size, -1, dtype=np.int64)
            for keyed in (True, False):
                sel = (b_key >= 0) if keyed else (b_key < 0)
                if not sel.any():
                    continue
                left = pd.DataFrame({"pos": b_idx[sel], "a": e_att[b_idx[sel]],
                                     "s": b_key[sel] if keyed else 0, "i": np.flatnonzero(sel)})
                x_step = np.where(np.isnan(e_step[x_idx]), -2, e_step[x_idx]).astype(np.int64)
                right = pd.DataFrame({"pos": x_idx, "a": e_att[x_idx], "s": x_step if keyed else 0,
                                      "j": np.arange(x_idx.size)})
                m = pd.merge_asof(left, right, on="pos", by=["a", "s"], direction="forward",
                                  allow_exact_matches=False)
                j = m["j"].to_numpy(dtype=np.float64, na_value=np.nan)
                ok = np.isfinite(j)
                match[m["i"].to_numpy()[ok]] = j[ok].astype(np.int64)
            has = np.flatnonzero(match >= 0)
            # several begins may reach one end: only the latest of them pairs with it
            last = np.ones(has.size, dtype=bool)
            if has.size > 1:
                order = np.lexsort((b_idx[has], match[has]))
                dup = np.zeros(has.size, dtype=bool)
                dup[order[:-1]] = match[has][order[:-1]] == match[has][order[1:]]
                last = ~dup
            keep = has[last]
            pair_end[keep] = e_t[x_idx[match[keep]]]
            used[match[keep]] = True
        lone = x_idx[~used]
        dur = e_dur[lone]
        fin = np.isfinite(dur)
        return (e_t[b_idx], pair_end, e_dur[b_idx], rel_ns(e_ns[b_idx], e_dur[b_idx]),
                rel_ns(e_ns[lone][fin], -dur[fin]), e_t[lone][fin])

    ck_b, ck_end, ck_bd, ck_bl, ck_ds, ck_de = paired("checkpoint_begin", "checkpoint_commit")
    ev_b, ev_end, ev_bd, ev_bl, ev_ds, ev_de = paired("eval_begin", "eval_end")
    idle_mask = np.isin(kind, ("hang_begin", "idle_begin"))

    return JobTimeline(
        job_id=job_id, origin=origin, step_attempt=s_att, step_number=s_num, step_start=s_t0, step_end=s_t1,
        step_duration=s_dur, step_input_wait=s_wait, step_rows=s_row, erased_by=erased_by,
        attempt_number=att_num,
        attempt_gang=gang, attempt_release=release, attempt_cold=cold, int_time=int_time, int_kind=int_kind,
        int_detected=int_det, int_inferred=inferred, int_attempt=int_att, int_restore_step=int_restore,
        restart_time=r_time, restart_rollback=r_roll, restart_cause=cause, commit_time=commit_t,
        commit_step=commit_s, ckpt_begin_time=ck_b, ckpt_begin_commit=ck_end, ckpt_begin_duration=ck_bd,
        ckpt_begin_logged_end=ck_bl, ckpt_duration_start=ck_ds, ckpt_duration_end=ck_de,
        eval_begin_time=ev_b, eval_begin_end=ev_end, eval_begin_duration=ev_bd, eval_begin_logged_end=ev_bl,
        eval_duration_start=ev_ds, eval_duration_end=ev_de, idle_begin_time=e_t[idle_mask],
        idle_begin_duration=e_dur[idle_mask], idle_begin_logged_end=rel_ns(e_ns[idle_mask], e_dur[idle_mask]),
        first_step_time=fs_t,
    )


def _jobs_from_tables(t: _Tables, job_id: str | None) -> list[JobTimeline]:
    codes = range(len(t.job_ids))
    if job_id is not None:
        if str(job_id) not in t.job_ids:
            raise InputError(f"job {job_id!r} is not in the timeline (jobs: {t.job_ids[:10]})",
                             file=t.events_file, field="job_id")
        codes = [t.job_ids.index(str(job_id))]
    # job codes in the tables' own (narrow) type, so the search does not widen the code arrays
    s_b = np.searchsorted(t.s_job, np.arange(len(t.job_ids) + 1, dtype=t.s_job.dtype), side="left")
    e_b = np.searchsorted(t.e_job, np.arange(len(t.job_ids) + 1, dtype=t.e_job.dtype), side="left")
    return [_build_job(t, c, int(s_b[c]), int(s_b[c + 1]), int(e_b[c]), int(e_b[c + 1])) for c in codes]


# ---------------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------------


def validate_timeline(steps: pd.DataFrame, events: pd.DataFrame, *, source: str = "timeline"
                      ) -> tuple[pd.DataFrame, pd.DataFrame, TimelineLedger]:
    """Check a canonical timeline and return it cleaned, with a ledger of every row and flag.

    Row-level checks raise :class:`fleetlib.quality.InputError` naming the table, row (0-based
    position in the table as given), field and expectation: a missing column (``input_wait_s`` is
    required), a missing value, naive or mixed-zone timestamps, a step ending before it starts, an
    input wait longer than its step, overlapping steps of one job (including conflicting duplicate
    step records), an attempt without ``gang_complete``, records outside their attempt's held
    interval, overlapping attempts, a checkpoint of a step not yet run, a restore to a step never
    committed, a first step after a restore that does not follow it, a step running across a
    failure, and a failure or preemption followed by steps in the same attempt with no restart.

    Named repairs (recorded in the ledger, row kept): events out of time order within an attempt are
    moved into order; a ``failure_detected`` with no ``failure`` before it is taken as the fault.
    Rejections (row dropped, reason recorded): exact duplicate step records.  Flags (no row changed):
    unknown event kinds (kept; the documented auxiliary kinds are kept without a flag), restarts
    inferred from repeated step numbers, rollback points inferred without a restore event, missing
    releases, interruptions the job never recovered from, step records missing, restarts that erased
    work with no logged interruption.

    Parameters
    ----------
    steps, events
        The canonical tables (see the module docstring).  ``events`` may omit the nullable ``step``
        and ``duration_s`` columns.
    source
        Name used in error messages and ledger entries (a file path, or a label).

    Returns
    -------
    steps : pandas.DataFrame
        Canonical steps sorted by job and start, duplicates removed, times ``datetime64[ns, UTC]``.
    events : pandas.DataFrame
        Canonical events sorted by job and time.
    ledger : TimelineLedger
        read = kept + repaired + rejected over both tables, plus the flags.

    Raises
    ------
    fleetlib.quality.InputError
        On any unrepairable record, as listed above.
    """
    tables = _prepare_tables(steps, events, source=source, build_frames=True)
    _jobs_from_tables(tables, None)
    assert tables.steps_frame is not None and tables.events_frame is not None
    return tables.steps_frame, tables.events_frame, tables.ledger


def job_timelines(steps: pd.DataFrame, events: pd.DataFrame, *, job_id: str | None = None,
                  source: str = "timeline") -> tuple[list[JobTimeline], TimelineLedger]:
    """Validate a timeline and return each job's structure (held intervals, restarts, erasure).

    Parameters
    ----------
    steps, events
        The canonical tables.
    job_id
        Only this job (it must be present); None for every job.
    source
        Name used in error messages and ledger entries.

    Returns
    -------
    jobs : list of JobTimeline
        One per job, in job-id order.
    ledger : TimelineLedger
        As returned by :func:`validate_timeline`.
    """
    tables = _prepare_tables(steps, events, source=source, build_frames=False)
    return _jobs_from_tables(tables, job_id), tables.ledger
