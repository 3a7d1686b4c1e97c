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
lists the interpretive flags.  :func:`prepare_tables` makes the same checks and returns the tables as
job-sorted arrays (:class:`TimelineArrays`), the input of the per-job partition
(:mod:`fleetlib.runtime.partition`), which reads each job's structure -- held intervals, interruptions,
restarts with their rollback points, the steps each restart erased -- and makes its checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import excerpt
from fleetlib.quality import InputError, Ledger
from fleetlib.runtime._provenance import Provenance, relocate_error, relocate_ledger
from fleetlib.runtime.schema import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    DEVICE_COLUMNS,
    EVENT_COLUMNS,
    EVENT_KINDS,
    STEP_COLUMNS,
)

__all__ = [
    "TimelineArrays",
    "empty_events",
    "empty_steps",
    "prepare_tables",
    "provenances",
    "tables_from_seconds",
    "validate_timeline",
]


_UTC_NS = pd.DatetimeTZDtype("ns", "UTC")
_NS = 1_000_000_000
#: Rows per block where a full-length pass would otherwise allocate a temporary per operation.
_BLOCK = 1 << 20


def _blocks(n: int, size: int = _BLOCK) -> list[tuple[int, int]]:
    """Split ``range(n)`` into consecutive ``(lo, hi)`` blocks of at most ``size`` rows."""
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


def _read_only(values: np.ndarray, dtype: type) -> np.ndarray:
    """Return ``values`` as a contiguous read-only array of ``dtype`` (a view; copied only to convert)."""
    out = np.ascontiguousarray(values, dtype=dtype).view()
    out.flags.writeable = False
    return out


def _code_dtype(n_codes: int) -> np.dtype:
    """Return the narrowest signed integer type that holds ``-1 .. n_codes``."""
    for dtype in (np.int8, np.int16, np.int32):
        if n_codes < np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


@dataclass
class TimelineArrays:
    """A validated timeline as arrays: steps sorted by job and start, events by job and time.

    Made by :func:`prepare_tables`; the input of the per-job partition
    (:func:`fleetlib.runtime.partition.build_parts`).  Job ids are codes into ``job_ids`` (sorted);
    ``s_off`` and ``e_off`` give each job's slice of the steps and the events.

    Attributes
    ----------
    steps_frame, events_frame
        The cleaned tables as frames (None unless asked for).
    job_ids
        Job ids, sorted.
    s_job, s_attempt, s_step, s_start, s_end, s_wait, s_row
        Per step: job code, attempt, step number, start and end (UTC nanoseconds), input wait (s), and
        its position in the input table (None: the steps kept their input order).
    e_job, e_attempt, e_time, e_kind, e_step, e_dur, e_row
        Per event: job code, attempt, time (UTC nanoseconds), kind (text), step and logged duration
        (NaN: none), position in the input table.
    e_devices
        Per event, the devices held before and after it (two columns, NaN: not logged), from the
        optional :data:`~fleetlib.runtime.schema.DEVICE_COLUMNS`; None when the events have neither.
    ledger
        Row accounting and flags so far.
    steps_file, events_file
        The names errors and the ledger give the two tables.
    s_off, e_off, e_code
        Each job's slice of the steps and events, and each event's kind coded for the kernel (made here).
    """

    steps_frame: pd.DataFrame | None
    events_frame: pd.DataFrame | None
    job_ids: list[str]
    s_job: np.ndarray
    s_attempt: np.ndarray
    s_step: np.ndarray
    s_start: np.ndarray
    s_end: np.ndarray
    s_wait: np.ndarray
    s_row: np.ndarray | None
    e_job: np.ndarray
    e_attempt: np.ndarray
    e_time: np.ndarray
    e_kind: np.ndarray
    e_step: np.ndarray
    e_dur: np.ndarray
    e_row: np.ndarray
    ledger: Ledger
    steps_file: str
    events_file: str
    e_devices: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.job_ids)
        # contiguous read-only arrays of the kernel's types, whatever they were given as (the reader's
        # columns are often read-only views of Arrow memory): one type per argument, so numba compiles
        # the kernel once -- and no column is copied to be made writeable
        self.s_attempt = _read_only(self.s_attempt, np.int64)
        self.s_step = _read_only(self.s_step, np.int64)
        self.s_start = _read_only(self.s_start, np.int64)
        self.s_end = _read_only(self.s_end, np.int64)
        self.s_wait = _read_only(self.s_wait, np.float64)
        self.e_attempt = _read_only(self.e_attempt, np.int64)
        self.e_time = _read_only(self.e_time, np.int64)
        self.e_step = _read_only(self.e_step, np.float64)
        self.e_dur = _read_only(self.e_dur, np.float64)
        codes = np.arange(n + 1)
        self.s_off = np.searchsorted(self.s_job, codes.astype(self.s_job.dtype) if self.s_job.size else codes,
                                     side="left").astype(np.int64)
        self.e_off = np.searchsorted(self.e_job, codes.astype(self.e_job.dtype) if self.e_job.size else codes,
                                     side="left").astype(np.int64)
        from fleetlib.runtime.partition import kind_codes  # numba loads on first use, not on import

        self.e_code = kind_codes(np.asarray(self.e_kind, dtype=object))

    def step_row(self, position: int) -> int:
        """Return the input-table position of the step at sorted ``position``."""
        return int(position) if self.s_row is None else int(self.s_row[position])

    def codes_of(self, job_id: str | None) -> np.ndarray:
        """Return the job codes to measure: every job, or the one named (refused if it is not there)."""
        if job_id is None:
            return np.arange(len(self.job_ids), dtype=np.int64)
        if str(job_id) not in self.job_ids:
            raise InputError(f"job {excerpt(job_id)} is not in the timeline (jobs: {self.job_ids[:10]})",
                             file=self.events_file, field="job_id")
        return np.array([self.job_ids.index(str(job_id))], dtype=np.int64)


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
                         file=file, field=field)
    if dtype == np.dtype(object):
        values = col.to_numpy()
        aware = np.fromiter((getattr(v, "tzinfo", None) is not None for v in values), bool, n)
        is_time = np.fromiter((isinstance(v, pd.Timestamp | np.datetime64) or hasattr(v, "tzinfo")
                               for v in values), bool, n)
        if not is_time.all():
            first = int(np.argmin(is_time))
            raise InputError(f"expected a timestamp, got {excerpt(values[first])}", file=file, row=first,
                             field=field)
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
                     field=field)


def _int_column(col: pd.Series, *, file: str, field: str) -> np.ndarray:
    if col.isna().any():
        raise InputError("missing value; an integer is required", file=file,
                         row=int(np.argmax(col.isna().to_numpy())), field=field)
    if pd.api.types.is_bool_dtype(col.dtype) or not (pd.api.types.is_integer_dtype(col.dtype)
                                                     or pd.api.types.is_float_dtype(col.dtype)):
        raise InputError(f"expected integers, got column dtype {col.dtype}", file=file, field=field)
    values = col.to_numpy(dtype=np.float64) if pd.api.types.is_float_dtype(col.dtype) else None
    if values is not None:
        bad = values != np.round(values)
        if bad.any():
            raise InputError(f"expected an integer, got {excerpt(values[int(np.argmax(bad))])}", file=file,
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


def prepare_tables(steps: pd.DataFrame, events: pd.DataFrame, *, source: str,
                   build_frames: bool) -> TimelineArrays:
    """Validate both tables and return their arrays, sorted by job (the measurement's input).

    Parameters
    ----------
    steps, events
        The canonical tables.
    source
        Name used in error messages and ledger entries (``"<source> (steps)"`` names the steps).
    build_frames
        Also return the cleaned tables as frames (:func:`validate_timeline`'s result).

    Returns
    -------
    TimelineArrays
        The tables as job-sorted arrays, with their ledger.  Errors and the ledger name records by
        their position in the tables as given (:func:`provenances` relocates them to file rows).

    Raises
    ------
    fleetlib.quality.InputError
        A table-level check failed (see :func:`validate_timeline`).
    """
    steps_file, events_file = f"{source} (steps)", f"{source} (events)"
    _check_columns(steps, STEP_COLUMNS, file=steps_file)
    ev_required = ("job_id", "attempt", "time", "kind")
    _check_columns(events, ev_required, file=events_file)
    ledger = Ledger(read=len(steps) + len(events))
    prov_s, prov_e = Provenance(steps, steps_file, source), Provenance(events, events_file, source)

    rows, s_attempt, s_end, s_jobtext, s_start, s_step, s_wait = _steps_arrays(steps, steps_file)
    e_attempt, e_dur, e_jobtext, e_kind, e_rows, e_step, e_time = _events_arrays(events, events_file, ledger,
                                                                                 prov_e)
    e_job, job_ids, s_job = _job_codes(e_jobtext, s_jobtext)
    e_attempt, e_dur, e_job, e_kind, e_rows, e_step, e_time = _sort_events_by_job(
        e_attempt, e_dur, e_job, e_kind, e_rows, e_step, e_time, events_file, ledger)
    rows, s_attempt, s_end, s_job, s_start, s_step, s_wait, steps_untouched = _sort_steps_by_job(
        ledger, rows, s_attempt, s_end, s_job, s_start, s_step, s_wait, steps_file, prov_s)
    _flag_overlong_durations(ledger, prov_e, job_ids, e_job, e_time, e_dur, e_rows, s_job, s_start, s_end)
    # --- row counts ----------------------------------------------------------------------------------
    ledger.kept = ledger.read - ledger.repaired - ledger.rejected
    events_frame, steps_frame = _table_frames(
        build_frames, e_attempt, e_dur, e_job, e_kind, e_step, e_time, job_ids, s_attempt, s_end, s_job,
        s_start, s_step, s_wait, steps, steps_untouched)
    devices = _device_counts(events, e_rows)
    if events_frame is not None and devices is not None:  # an elastic job's counts stay in the table
        for i, col in enumerate(DEVICE_COLUMNS):
            events_frame[col] = pd.Series(devices[:, i], dtype="float64").astype("Int64")

    return TimelineArrays(steps_frame, events_frame, job_ids, s_job, s_attempt, s_step, s_start, s_end,
                          s_wait, rows, e_job, e_attempt, e_time, e_kind, e_step, e_dur, e_rows, ledger,
                          steps_file, events_file, devices)


def _device_counts(events: pd.DataFrame, e_rows: np.ndarray) -> np.ndarray | None:
    """Return the events' device counts in sorted order (NaN: not logged), or None without the columns."""
    present = [c for c in DEVICE_COLUMNS if c in events.columns]
    if not present:
        return None
    out = np.full((len(events), len(DEVICE_COLUMNS)), np.nan)
    for i, col in enumerate(DEVICE_COLUMNS):
        if col in present:
            values = pd.to_numeric(events[col], errors="coerce").astype("float64")
            out[:, i] = values.to_numpy(na_value=np.nan)
    return out[e_rows]


def _flag_overlong_durations(ledger: Ledger, prov: Provenance, job_ids: list[str], e_job: np.ndarray,
                             e_time: np.ndarray, e_dur: np.ndarray, e_rows: np.ndarray, s_job: np.ndarray,
                             s_start: np.ndarray, s_end: np.ndarray) -> None:
    """Flag logged durations longer than their job's whole timeline (first record to last).

    Such a duration cannot be time this timeline measured.  The row is kept with a note: the
    partition never charges a logged duration beyond held time (a pause ends at the next marker or
    its attempt's release, whichever is first).  Steps are sorted by job and start and do not
    overlap, so a job's first step starts earliest and its last step ends latest.
    """
    logged = np.isfinite(e_dur) & (e_dur > 0)
    if not logged.any():
        return
    n_jobs = len(job_ids)
    lo = np.full(n_jobs, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n_jobs, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, e_job, e_time)
    np.maximum.at(hi, e_job, e_time)
    if s_job.size:
        bounds = np.searchsorted(s_job, np.arange(n_jobs + 1, dtype=s_job.dtype))
        jobs = np.flatnonzero(bounds[1:] > bounds[:-1])
        lo[jobs] = np.minimum(lo[jobs], s_start[bounds[jobs]])
        hi[jobs] = np.maximum(hi[jobs], s_end[bounds[jobs + 1] - 1])
    span_s = (hi - lo) / _NS
    over = logged & (e_dur > span_s[e_job] + 1e-9)
    if not over.any():
        return
    i = int(np.argmax(over))
    job = job_ids[int(e_job[i])]
    ledger.flag("duration_exceeds_timeline",
                f"{int(over.sum())} logged duration(s) longer than their job's whole timeline (first: "
                f"duration_s {excerpt(float(e_dur[i]))} at {prov.describe(int(e_rows[i]))}, where the "
                f"records of job {excerpt(job)} span {float(span_s[e_job[i]]):g} s): kept; no time is "
                "charged beyond held time (a pause ends at the next marker or its attempt's release)",
                file=prov.label, row=int(e_rows[i]), field="duration_s", job_id=str(job))


def _steps_arrays(steps: pd.DataFrame, steps_file: str
                  ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, pd.Series, np.ndarray, np.ndarray,
                             np.ndarray]:
    """Read and check the step columns: ends after starts, input waits finite, >= 0 and inside their step.

    Returns the input row of each step (None: input order), attempt, end, job text, start, step
    number and input wait.
    """
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
        raise InputError(f"input wait must be a finite number of seconds >= 0, got {excerpt(s_wait[i])}",
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
            raise InputError(f"input wait {excerpt(s_wait[lo + i])} s is longer than the step itself "
                             f"({step_s:g} s)", file=steps_file, row=lo + i, field="input_wait_s")
    return rows, s_attempt, s_end, s_jobtext, s_start, s_step, s_wait


def _events_arrays(events: pd.DataFrame, events_file: str, ledger: Ledger, prov: Provenance
                   ) -> tuple[np.ndarray, np.ndarray, pd.Series, np.ndarray, np.ndarray, np.ndarray,
                              np.ndarray]:
    """Read and check the event columns; flag kinds the partition does not know.

    Returns attempt, duration, job text, kind, input row, step and time of each event.
    """
    e_jobtext = _text_column(events["job_id"], file=events_file, field="job_id")
    e_attempt = _int_column(events["attempt"], file=events_file, field="attempt")
    e_time = _times_ns(events["time"], file=events_file, field="time")
    kind_col = _text_column(events["kind"], file=events_file, field="kind")
    e_kind = kind_col.to_numpy(dtype=object)
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
            raise InputError(f"expected an integer step, got {excerpt(e_step[i])}", file=events_file, row=i,
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
            raise InputError(f"duration must be >= 0 and finite, got {excerpt(e_dur[int(np.argmax(bad))])}",
                             file=events_file, row=int(np.argmax(bad)), field="duration_s")
    else:
        e_dur = np.full(len(events), np.nan)
    e_rows = np.arange(len(events), dtype=np.int64)

    kind_codes, kind_values = _text_codes(kind_col)
    _flag_unknown_kinds(ledger, prov, e_kind, kind_codes, kind_values, e_rows)
    return e_attempt, e_dur, e_jobtext, e_kind, e_rows, e_step, e_time


def _flag_unknown_kinds(ledger: Ledger, prov: Provenance, e_kind: np.ndarray, kind_codes: np.ndarray,
                        kind_values: list[Any], e_rows: np.ndarray) -> None:
    """Flag the event kinds the partition does not know (``kind_codes`` index ``kind_values``)."""
    # whether each kind is known, decided once per distinct kind (a few) and read off per row
    known_value = np.isin(np.asarray(kind_values, dtype=object), [*EVENT_KINDS, *AUXILIARY_EVENT_KINDS])
    other = np.flatnonzero(~known_value)
    known_value[other] = [str(kind_values[i]).startswith(AUXILIARY_KIND_PREFIXES) for i in other.tolist()]
    known = known_value[kind_codes] if e_kind.size else np.zeros(0, dtype=bool)
    if not known.all():
        kinds, counts = np.unique(e_kind[~known].astype(str), return_counts=True)
        for k, c in zip(kinds.tolist(), counts.tolist(), strict=True):
            first = int(e_rows[~known][np.argmax(e_kind[~known] == k)])
            ledger.flag("unknown_event_kind",
                        f"{c} event(s) of unknown kind {excerpt(k)} (first at {prov.describe(first)}) kept "
                        "in the table and not used by the partition")


def _job_codes(e_jobtext: pd.Series, s_jobtext: pd.Series) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Code the jobs of both tables in the narrowest integer type that holds them all.

    One byte per step for fewer than 127 jobs.  Returns the events' codes, the sorted job ids and the
    steps' codes.
    """
    s_codes_raw, s_uni = _text_codes(s_jobtext)
    e_codes_raw, e_uni = _text_codes(e_jobtext)
    job_ids = sorted({str(u) for u in s_uni} | {str(u) for u in e_uni})
    codes = {j: i for i, j in enumerate(job_ids)}
    code_type = _code_dtype(len(job_ids) + 1)
    s_job = _recode(s_codes_raw, np.array([codes[str(u)] for u in s_uni], dtype=code_type))
    e_job = _recode(e_codes_raw, np.array([codes[str(u)] for u in e_uni], dtype=code_type))
    return e_job, job_ids, s_job


def _sort_events_by_job(e_attempt: np.ndarray, e_dur: np.ndarray, e_job: np.ndarray, e_kind: np.ndarray,
                        e_rows: np.ndarray, e_step: np.ndarray, e_time: np.ndarray,
                        events_file: str, ledger: Ledger) -> tuple[np.ndarray, ...]:
    """Sort the events by job and time; record each row out of order within its attempt as a repair."""
    if e_time.size > 1:
        same_job = e_job[1:] == e_job[:-1]
        if bool((e_job[1:] >= e_job[:-1]).all()) and bool((~same_job | (e_time[1:] >= e_time[:-1])).all()):
            # already in (job, time) order: no row is late within its attempt, and the sort keeps them
            return e_attempt, e_dur, e_job, e_kind, e_rows, e_step, e_time
    if e_time.size:
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
    return e_attempt, e_dur, e_job, e_kind, e_rows, e_step, e_time


def _sort_steps_by_job(ledger: Ledger, rows: np.ndarray | None, s_attempt: np.ndarray,
                       s_end: np.ndarray, s_job: np.ndarray, s_start: np.ndarray, s_step: np.ndarray,
                       s_wait: np.ndarray, steps_file: str, prov: Provenance) -> tuple[Any, ...]:
    """Sort the steps by (job, start, end, step), reject exact duplicates and refuse overlaps.

    Returns the input rows (None while untouched), the sorted columns and whether the steps were
    already in order with no duplicate.
    """
    steps_untouched = True
    if s_job.size:
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
                                  f"exact duplicate of step {prov.describe(int(rows[i - 1]))} (same job, "
                                  "attempt, step, start, end and input wait)")
                keep = ~dup
                s_job, s_attempt, s_step = s_job[keep], s_attempt[keep], s_step[keep]
                s_start, s_end, s_wait, rows = s_start[keep], s_end[keep], s_wait[keep], rows[keep]
        i = _first_overlap(s_job, s_start, s_end)
        if i >= 0:
            def row_of(k: int) -> int:  # the input row of sorted step k
                return k if rows is None else int(rows[k])

            raise InputError(
                f"step {int(s_step[i])} (attempt {int(s_attempt[i])}) starts before step "
                f"{int(s_step[i - 1])} (attempt {int(s_attempt[i - 1])}, {prov.describe(row_of(i - 1))}) "
                "ends: "
                "steps of one job must not overlap in time (a conflicting duplicate step record?)",
                file=steps_file, row=row_of(i), field="start")
    return rows, s_attempt, s_end, s_job, s_start, s_step, s_wait, steps_untouched


def _table_frames(build_frames: bool, e_attempt: np.ndarray, e_dur: np.ndarray, e_job: np.ndarray,
                  e_kind: np.ndarray, e_step: np.ndarray, e_time: np.ndarray, job_ids: list[str],
                  s_attempt: np.ndarray, s_end: np.ndarray, s_job: np.ndarray, s_start: np.ndarray,
                  s_step: np.ndarray, s_wait: np.ndarray, steps: pd.DataFrame, steps_untouched: bool
                  ) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Return the cleaned steps and events as frames (None, None unless ``build_frames``)."""
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
    return events_frame, steps_frame


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


def _text_codes(col: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Codes into the distinct values of a text column, and those values (only the ones used).

    A categorical column hands over its own codes (no copy); a plain text column is factorized.
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        cats = col.cat.categories.tolist()
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
    return codes, uniques.tolist()  # tolist: iterating an arrow-backed array costs ~1.5 us a value


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
# Public entry points
# ---------------------------------------------------------------------------------------------------


def validate_timeline(steps: pd.DataFrame, events: pd.DataFrame, *, source: str = "timeline"
                      ) -> tuple[pd.DataFrame, pd.DataFrame, Ledger]:
    """Check a canonical timeline and return it cleaned, with a ledger of every row and flag.

    Row-level checks raise :class:`fleetlib.quality.InputError` naming the file and 1-based row the
    record came from (the tables' provenance columns, which every reader fills; a table built in code
    is named ``"<source> (steps)"`` or ``"<source> (events)"`` with the record's 1-based position), the
    field and the expectation: a missing column (``input_wait_s`` is
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
    ledger : Ledger
        read = kept + repaired + rejected over both tables, plus the flags.

    Raises
    ------
    fleetlib.quality.InputError
        On any unrepairable record, as listed above.
    """
    from fleetlib.runtime.partition import build_parts

    where = provenances(steps, events, source)
    try:
        tables = prepare_tables(steps, events, source=source, build_frames=True)
        codes = tables.codes_of(None)
        build_parts(tables, codes, np.full(codes.size, np.nan))  # the structure's checks and flags
    except InputError as err:
        raise relocate_error(err, where) from None
    assert tables.steps_frame is not None and tables.events_frame is not None
    relocate_ledger(tables.ledger, where)
    return tables.steps_frame, tables.events_frame, tables.ledger


def provenances(steps: Any, events: Any, source: str) -> tuple[Provenance, ...]:
    """Return the provenance of both tables (none for what is not a table: the checks refuse it)."""
    pairs = ((steps, "steps"), (events, "events"))
    return tuple(Provenance(frame, f"{source} ({name})", source) for frame, name in pairs
                 if isinstance(frame, pd.DataFrame))

