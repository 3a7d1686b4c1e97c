"""Readers: job timelines from real formats into the canonical steps and events tables.

The canonical tables, their columns, dtypes and event kinds are defined in
:mod:`fleetlib.runtime.timeline` (``STEP_COLUMNS``, ``EVENT_COLUMNS``, ``EVENT_KINDS``); this
module turns files into them.  Every reader returns the tables together with a
:class:`fleetlib.runtime.timeline.TimelineLedger` that accounts for every input record:
``read == kept + repaired + rejected``.  A rejected record names its file, its row or line, the field
and the reason; a repaired one names the repair.  Records that are kept but deserve a second look are
*flagged* (``ledger.flags``: a code such as ``unknown_event_kind``, ``restore_uncommitted``,
``failure_without_restart``, ``restart_inferred_from_step_numbers``, ``failure_time_inferred``,
``asynchronous_commit``; the message starts with ``<file> row <n>:``).  A flag is a note beside a
kept record and does not change the counts.  Input no repair can make sense of raises
:class:`fleetlib.quality.InputError` naming file, row, field and expectation.

What the readers hand over: times are ``datetime64[ns, UTC]``; ``steps`` holds finished steps only
(``end > start``, ``0 <= input_wait_s <= end - start``, no two steps of one job overlapping); a step
number may appear again after a restart; ``events`` are sorted by job and time (simultaneous events
in a natural order: an interval's end before the next one's begin, ``release`` last).  Besides the
canonical kinds, readers emit a few documented auxiliary kinds (:data:`AUXILIARY_EVENT_KINDS`, and
``custom_badput:<type>`` / ``elastic_wait:<type>``) for phases the partition does not need; any
other kind is kept and flagged.

Readers
-------
* :func:`read_mlperf` -- MLPerf ``:::MLLOG`` result logs; :func:`mlperf_summary` gives the raw
  interval sums (held = ``init_start`` -> ``run_stop``, startup = init, productive = training blocks,
  evaluation = evals).
* :func:`read_mlgoodput` -- ml-goodput-measurement ``<job>_timeline.jsonl`` cache entries.
* :func:`read_canonical` -- the canonical columns (with documented aliases) as CSV or Parquet.
* :func:`read_bloom_events` -- the hand-transcribed BLOOM-176B event table in ``data/timelines``.
* :func:`read_replica_lifecycle` and :func:`replica_runtime_goodput` -- a serving replica's
  lifecycle log (placed -> loading -> warmup -> ready -> draining -> released).

Row numbers are counted as each format counts them: a CSV row is its line number (the header is
line 1), a Parquet row is its index + 1, a JSON-lines or log record is its line number.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, InputError, check_nonnegative
from fleetlib.runtime.timeline import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    EVENT_COLUMNS,
    EVENT_KINDS,
    STEP_COLUMNS,
    TimelineLedger,
    empty_events,
    empty_steps,
)

__all__ = [
    "AUXILIARY_EVENT_KINDS",
    "AUXILIARY_KIND_PREFIXES",
    "EVENT_ALIASES",
    "REPLICA_PHASES",
    "REPLICA_PHASE_ALIASES",
    "STEP_ALIASES",
    "ReplicaGoodput",
    "TimelineTables",
    "bundled_path",
    "mlperf_runtime_json",
    "mlperf_summary",
    "mlperf_summary_table",
    "read_bloom_events",
    "read_canonical",
    "read_mlgoodput",
    "read_mlperf",
    "read_replica_lifecycle",
    "replica_runtime_goodput",
    "write_canonical",
]

PathLike = str | Path

# AUXILIARY_EVENT_KINDS and AUXILIARY_KIND_PREFIXES (phase markers some readers emit on purpose; kept,
# not flagged, ignored by the partition) are defined beside the canonical kinds in
# fleetlib.runtime.timeline, whose validation leaves them unflagged too, and re-exported here.

#: Accepted alternative column names of a steps file (lower case), by canonical column.
STEP_ALIASES: dict[str, tuple[str, ...]] = {
    "job_id": ("job", "job_name", "run_id", "run"),
    "attempt": ("attempt_id", "attempt_index", "restart", "incarnation"),
    "step": ("step_count", "step_id", "iteration", "global_step"),
    "start": ("start_time", "step_start", "step_start_time", "begin"),
    "end": ("end_time", "step_end", "step_end_time", "finish"),
    "input_wait_s": ("input_wait", "data_wait_s", "input_stall_s", "data_loading_s"),
}
#: Accepted alternative column names of an events file (lower case), by canonical column.
EVENT_ALIASES: dict[str, tuple[str, ...]] = {
    "job_id": STEP_ALIASES["job_id"],
    "attempt": STEP_ALIASES["attempt"],
    "time": ("timestamp", "ts", "event_time", "at"),
    "kind": ("event", "type", "event_type", "event_kind"),
    "step": STEP_ALIASES["step"],
    "duration_s": ("duration", "dur_s", "elapsed_s"),
}
#: Serving replica phases, in the only order a replica moves through them.
REPLICA_PHASES: tuple[str, ...] = ("placed", "loading", "warmup", "ready", "draining", "released")
#: Accepted synonyms of the replica phase names (lower case).
REPLICA_PHASE_ALIASES: dict[str, str] = {
    "scheduled": "placed", "bound": "placed", "placement": "placed",
    "load": "loading", "weights_loading": "loading", "model_loading": "loading",
    "warm-up": "warmup", "warm_up": "warmup", "warming": "warmup", "warming_up": "warmup",
    "serving": "ready", "healthy": "ready",
    "drain": "draining",
    "release": "released", "terminated": "released", "deleted": "released", "stopped": "released",
}

_TIME_DTYPE = "datetime64[ns, UTC]"
#: Order of simultaneous events (an interval's end before the next one's begin; release last).
_KIND_RANK = {k: i for i, k in enumerate((
    "gang_complete", "cold_start", "restore", "first_step", "eval_end", "checkpoint_commit",
    "failure_detected", "checkpoint_begin", "eval_begin", "failure", "preempt", "release"))}
_ZONE_SUFFIX = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$"
_NAT = np.iinfo(np.int64).min
_NS_PER_S = 1_000_000_000


# ---------------------------------------------------------------------------------------------------
# The pair of canonical tables a reader returns
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineTables:
    """The canonical steps and events of one or more jobs, as a reader returns them.

    Pass ``tables.steps, tables.events`` to :func:`fleetlib.runtime.timeline.validate_timeline` or to
    the measurement in :mod:`fleetlib.runtime.goodput`.

    Parameters
    ----------
    steps
        Canonical steps table (``fleetlib.runtime.timeline.STEP_COLUMNS``; extra columns may follow).
    events
        Canonical events table (``fleetlib.runtime.timeline.EVENT_COLUMNS``; extra columns may follow).
    """

    steps: pd.DataFrame
    events: pd.DataFrame

    def __post_init__(self) -> None:
        for name, frame, cols in (("steps", self.steps, STEP_COLUMNS),
                                  ("events", self.events, EVENT_COLUMNS)):
            if not isinstance(frame, pd.DataFrame):
                raise DomainError(f"TimelineTables.{name} must be a DataFrame; got {type(frame).__name__}")
            missing = [c for c in cols if c not in frame.columns]
            if missing:
                raise DomainError(f"TimelineTables.{name} lacks canonical columns {missing}")
        for name, frame, cols in (("steps", self.steps, ("start", "end")),
                                  ("events", self.events, ("time",))):
            for col in cols:
                dtype = frame[col].dtype
                if not (isinstance(dtype, pd.DatetimeTZDtype) and str(dtype.tz) == "UTC"):
                    raise DomainError(f"TimelineTables.{name}.{col} must hold UTC timestamps; got {dtype}")

    @classmethod
    def empty(cls) -> TimelineTables:
        """Return tables with no rows."""
        return cls(empty_steps(), empty_events())

    @property
    def jobs(self) -> list[str]:
        """Job ids present in either table, sorted."""
        return sorted(set(pd.unique(self.steps["job_id"])) | set(pd.unique(self.events["job_id"])))

    def select(self, job_id: str) -> TimelineTables:
        """Return the rows of one job (empty tables if the job is absent)."""
        return TimelineTables(self.steps[self.steps["job_id"] == job_id].reset_index(drop=True),
                              self.events[self.events["job_id"] == job_id].reset_index(drop=True))


def bundled_path(name: str) -> Path:
    """Return the path of a bundled timeline file, ``<repo>/data/timelines/<name>``.

    Parameters
    ----------
    name
        File name inside ``data/timelines`` (e.g. ``"bloom_176b_events.csv"``).

    Returns
    -------
    Path
        The path (existence is not checked).
    """
    return Path(__file__).resolve().parents[2] / "data" / "timelines" / name


# ---------------------------------------------------------------------------------------------------
# Row book: one per input file, resolves each record to exactly one of kept / repaired / rejected
# ---------------------------------------------------------------------------------------------------


class _RowBook:
    """Per-file record of what happened to each input row (first rejection wins)."""

    def __init__(self, file: str, rows: Iterable[int], *, truncated: bool = False) -> None:
        self.file = file
        self.rows = np.asarray(list(rows) if not isinstance(rows, np.ndarray) else rows, dtype=np.int64)
        self._rejected = np.zeros(self.rows.size, dtype=bool)
        self._reject_info: dict[int, tuple[str | None, str]] = {}
        self._repairs: dict[int, list[tuple[str | None, str]]] = {}
        self.flags: list[tuple[int, str, str, str | None, int | None, Any]] = []
        self.truncated_row = int(self.rows[-1]) if truncated and self.rows.size else None

    def _pos(self, rows: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(self.rows, rows)
        if pos.size and (pos.max() >= self.rows.size or not np.array_equal(self.rows[pos], rows)):
            raise AssertionError(f"{self.file}: row numbers not in the book")  # programming error
        return pos

    def reject(self, rows: Any, field: str | None, reasons: Any) -> None:
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        texts = _broadcast_text(reasons, rows.size)
        for p, text in zip(self._pos(rows).tolist(), texts, strict=True):
            if not self._rejected[p]:
                self._rejected[p] = True
                self._reject_info[p] = (field, text)

    def repair(self, rows: Any, field: str | None, reasons: Any) -> None:
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        texts = _broadcast_text(reasons, rows.size)
        for p, text in zip(self._pos(rows).tolist(), texts, strict=True):
            self._repairs.setdefault(p, []).append((field, text))

    def flag(self, rows: Any, code: str, reasons: Any, jobs: Any = None, attempts: Any = None,
             times: Any = None) -> None:
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        texts = _broadcast_text(reasons, rows.size)
        none = [None] * rows.size
        for row, text, job, att, t in zip(rows.tolist(), texts, none if jobs is None else list(jobs),
                                          none if attempts is None else list(attempts),
                                          none if times is None else list(times), strict=True):
            self.flags.append((int(row), code, text, None if job is None else str(job),
                               None if att is None or pd.isna(att) else int(att), t))

    @property
    def any_rejected(self) -> bool:
        return bool(self._reject_info)

    def rejected(self, rows: Any) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return np.zeros(0, dtype=bool)
        return self._rejected[self._pos(rows)]

    def close(self, ledger: TimelineLedger) -> None:
        ledger.read += int(self.rows.size)
        for p in sorted(self._reject_info):
            fld, text = self._reject_info[p]
            row = int(self.rows[p])
            if row == self.truncated_row:
                text = f"truncated last line (the file does not end with a newline): {text}"
            ledger.reject(self.file, row, fld, text)
        repaired = 0
        for p in sorted(self._repairs):
            if self._rejected[p]:
                continue
            items = self._repairs[p]
            fields = sorted({f for f, _ in items if f})
            ledger.repair(self.file, int(self.rows[p]), ",".join(fields) or None,
                          "; ".join(dict.fromkeys(t for _, t in items)))
            repaired += 1
        ledger.kept += int(self.rows.size) - len(self._reject_info) - repaired
        for row, code, text, job, att, t in self.flags:
            ledger.flag(code, f"{self.file} row {row}: {text}", job_id=job, attempt=att,
                        time=None if t is None or pd.isna(t) else pd.Timestamp(t))


def _broadcast_text(reasons: Any, n: int) -> list[str]:
    if isinstance(reasons, str):
        return [reasons] * n
    out = [str(r) for r in (reasons.tolist() if hasattr(reasons, "tolist") else list(reasons))]
    if len(out) != n:
        raise AssertionError("reasons and rows differ in length")  # programming error
    return out


def _by_file(books: Mapping[str, _RowBook], frame: pd.DataFrame, field: str | None, reasons: Any,
             action: str) -> None:
    if frame.empty:
        return
    texts = np.asarray(_broadcast_text(reasons, len(frame)), dtype=object)
    files = frame["_file"].to_numpy(dtype=object)
    rows = frame["_row"].to_numpy(dtype=np.int64)
    for f in pd.unique(files):
        m = files == f
        getattr(books[f], action)(rows[m], field, texts[m])


def _reject(books: Mapping[str, _RowBook], frame: pd.DataFrame, field: str | None, reasons: Any) -> None:
    _by_file(books, frame, field, reasons, "reject")


def _repair(books: Mapping[str, _RowBook], frame: pd.DataFrame, field: str | None, reasons: Any) -> None:
    _by_file(books, frame, field, reasons, "repair")


def _flag(books: Mapping[str, _RowBook], frame: pd.DataFrame, code: str, reasons: Any,
          time_col: str | None = None) -> None:
    """Flag kept rows (a note, not a change) with a machine-readable ``code`` and a reason each."""
    if frame.empty:
        return
    texts = np.asarray(_broadcast_text(reasons, len(frame)), dtype=object)
    files = frame["_file"].to_numpy(dtype=object)
    rows = frame["_row"].to_numpy(dtype=np.int64)
    jobs = frame["job_id"].to_numpy(dtype=object) if "job_id" in frame.columns else None
    atts = frame["attempt"].to_numpy(dtype=object) if "attempt" in frame.columns else None
    times = frame[time_col].to_numpy(dtype=object) if time_col else None
    for f in pd.unique(files):
        m = files == f
        books[f].flag(rows[m], code, texts[m], None if jobs is None else jobs[m],
                      None if atts is None else atts[m], None if times is None else times[m])


def _drop_rejected(frame: pd.DataFrame, books: Mapping[str, _RowBook]) -> pd.DataFrame:
    if frame.empty or not any(b.any_rejected for b in books.values()):
        return frame
    mask = np.zeros(len(frame), dtype=bool)
    rows = frame["_row"].to_numpy(dtype=np.int64)
    for f, book in books.items():  # a handful of files
        if not book.any_rejected:
            continue
        m = (frame["_file"] == f).to_numpy(dtype=bool)
        if m.any():
            mask[m] = book.rejected(rows[m])
    return frame.loc[~mask].reset_index(drop=True)


def _file_column(file: str, n: int) -> pd.Categorical:
    """Return the source-file column of ``n`` rows, stored once (a file may have millions of rows)."""
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[file])


def _close(books: Mapping[str, _RowBook]) -> TimelineLedger:
    ledger = TimelineLedger()
    for book in books.values():
        book.close(ledger)
    return ledger


# ---------------------------------------------------------------------------------------------------
# Shared column parsing
# ---------------------------------------------------------------------------------------------------


def _fmt_time(t: Any) -> str:
    return "NaT" if pd.isna(t) else pd.Timestamp(t).isoformat()


def _posix_s_to_utc(values: Any) -> pd.Series:
    """Convert POSIX float seconds to UTC, rounded to the microsecond; NaN becomes NaT.

    A float count of seconds near 2^31 carries no finer digits than the microsecond.
    """
    arr = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype="float64")
    ok = np.isfinite(arr)
    ns = np.full(arr.size, _NAT, dtype=np.int64)
    ns[ok] = np.rint(arr[ok] * 1e6).astype(np.int64) * 1000
    return _utc(ns)


def _parse_times(values: pd.Series, *, frame: pd.DataFrame, books: Mapping[str, _RowBook], field: str,
                 tz: str | None, required: bool = True) -> pd.Series:
    """Parse one time column to UTC; reject or repair rows through the books.

    Zone-aware text or timestamps are converted to UTC.  Naive values are localised to ``tz`` as a
    named repair; without ``tz`` a column that is naive throughout raises :class:`InputError`, and
    naive rows among zone-aware ones (mixed) are rejected.  Rejected rows come back as NaT.
    """
    values = values.reset_index(drop=True)
    n = len(values)
    if n == 0:
        return _utc(np.zeros(0, dtype=np.int64))
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        out = values.dt.tz_convert("UTC").astype(_TIME_DTYPE)
        missing = out.isna().to_numpy()
        if required and missing.any():
            _reject(books, frame[missing], field, f"missing {field}")
        return out
    out_ns = np.full(n, _NAT, dtype=np.int64)
    if pd.api.types.is_datetime64_dtype(values.dtype):
        text = None
        aware_mask = np.zeros(n, dtype=bool)
        missing = values.isna().to_numpy()
    else:
        text = values.astype("str").str.strip()
        missing = (values.isna() | (text == "")).to_numpy()
        aware_mask = text.str.contains(_ZONE_SUFFIX, regex=True).fillna(False).to_numpy(dtype=bool) & ~missing
    if required and missing.any():
        _reject(books, frame[missing], field, f"missing {field}")
    if text is not None and aware_mask.any():
        parsed = pd.to_datetime(text[aware_mask], utc=True, format="ISO8601", errors="coerce")
        out_ns[aware_mask] = _ns(parsed)
        bad = aware_mask.copy()
        bad[aware_mask] = parsed.isna().to_numpy()
        if bad.any():
            _reject(books, frame[bad], field,
                    [f"{field} {v!r} is not an ISO 8601 time" for v in text[bad].tolist()])
    naive_mask = ~aware_mask & ~missing
    if not naive_mask.any():
        return _utc(out_ns)
    if text is None:
        naive_parsed = values[naive_mask]
    else:
        naive_parsed = pd.to_datetime(text[naive_mask], format="ISO8601", errors="coerce")
        unparsed = naive_mask.copy()
        unparsed[naive_mask] = naive_parsed.isna().to_numpy()
        if unparsed.any():
            _reject(books, frame[unparsed], field,
                    [f"{field} {v!r} is not an ISO 8601 time" for v in text[unparsed].tolist()])
            naive_parsed = naive_parsed[~unparsed[naive_mask]]
            naive_mask = naive_mask & ~unparsed
            if not naive_mask.any():
                return _utc(out_ns)
    if tz is None:
        if not aware_mask.any():
            row = int(frame["_row"].iloc[int(np.argmax(naive_mask))])
            raise InputError("times carry no zone (naive); pass tz= to name the zone they were written "
                             "in, or write them with an offset such as 'Z'",
                             file=str(frame["_file"].iloc[0]), row=row, field=field)
        _reject(books, frame[naive_mask], field,
                f"naive {field} among zone-aware times (mixed zones): the zone is unknown; pass tz= "
                "to name it")
        return _utc(out_ns)
    try:
        localised = naive_parsed.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    except Exception as exc:  # an unknown zone name
        raise DomainError(f"tz={tz!r} is not a time zone pandas knows ({exc})") from exc
    out_ns[naive_mask] = _ns(localised)
    bad = naive_mask.copy()
    bad[naive_mask] = localised.isna().to_numpy()
    if bad.any():
        _reject(books, frame[bad], field,
                f"{field} is not a valid time, or does not exist / is ambiguous in zone {tz}")
    good = naive_mask & ~bad
    if good.any():
        _repair(books, frame[good], field, f"naive {field} localised to tz={tz}")
    return _utc(out_ns)


def _int_column(values: pd.Series, *, frame: pd.DataFrame, books: Mapping[str, _RowBook], field: str,
                required: bool, minimum: int = 0) -> pd.Series:
    """Parse an integer column to nullable Int64; reject non-integers, negatives and (if required) gaps."""
    values = values.reset_index(drop=True)
    if values.dtype == object or isinstance(values.dtype, pd.StringDtype) or str(values.dtype) == "str":
        stripped = values.astype("str").str.strip()
        blank = (values.isna() | (stripped == "")).to_numpy()
        num = pd.to_numeric(stripped.where(~blank), errors="coerce")
    else:
        blank = values.isna().to_numpy()
        num = pd.to_numeric(values, errors="coerce")
    num = num.astype("float64")
    finite = np.isfinite(num.to_numpy())
    notint = ~blank & (~finite | (np.mod(np.where(finite, num, 0.0), 1.0) != 0.0))
    below = ~blank & finite & (num.to_numpy() < minimum)
    if notint.any():
        _reject(books, frame[notint], field,
                [f"{field} {v!r} is not an integer" for v in values[notint].tolist()])
    if below.any():
        _reject(books, frame[below], field, f"{field} must be >= {minimum}")
    if required and blank.any():
        _reject(books, frame[blank], field, f"missing {field}")
    ok = ~blank & ~notint & ~below
    ints = np.where(ok, np.nan_to_num(num.to_numpy(), nan=0.0, posinf=0.0, neginf=0.0), 0.0).astype(np.int64)
    return pd.Series(pd.arrays.IntegerArray(ints, ~ok))


def _na_ints(n: int) -> pd.arrays.IntegerArray:
    """Return a nullable integer array of ``n`` missing values."""
    return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))


def _float_column(values: pd.Series, *, frame: pd.DataFrame, books: Mapping[str, _RowBook], field: str,
                  minimum: float | None = 0.0) -> pd.Series:
    """Parse a float column (NaN where blank); reject non-numbers and values below ``minimum``."""
    values = values.reset_index(drop=True)
    if values.dtype == object or str(values.dtype) == "str" or isinstance(values.dtype, pd.StringDtype):
        stripped = values.astype("str").str.strip()
        blank = (values.isna() | (stripped == "")).to_numpy()
        num = pd.to_numeric(stripped.where(~blank), errors="coerce").astype("float64")
    else:
        blank = values.isna().to_numpy()
        num = pd.to_numeric(values, errors="coerce").astype("float64")
    arr = num.to_numpy()
    bad = ~blank & ~np.isfinite(arr)
    if bad.any():
        _reject(books, frame[bad], field,
                [f"{field} {v!r} is not a finite number" for v in values[bad].tolist()])
    if minimum is not None:
        below = ~blank & np.isfinite(arr) & (arr < minimum)
        if below.any():
            _reject(books, frame[below], field, f"{field} must be >= {minimum:g}")
    return num.where(~bad)


# ---------------------------------------------------------------------------------------------------
# Shared checks on the canonical tables (vectorised)
# ---------------------------------------------------------------------------------------------------


def _ns(series: pd.Series) -> np.ndarray:
    """UTC times as int64 nanoseconds (NaT becomes the int64 minimum)."""
    naive = pd.Series(series).astype(_TIME_DTYPE).dt.tz_convert(None)
    return naive.to_numpy(dtype="datetime64[ns]").view("int64")


def _utc(ns: np.ndarray) -> pd.Series:
    """Int64 nanoseconds (int64 minimum = NaT) as a UTC time Series."""
    return pd.Series(np.asarray(ns, dtype=np.int64).view("datetime64[ns]")).dt.tz_localize("UTC")


def _out_of_order(frame: pd.DataFrame, keys: list[str], time_col: str) -> np.ndarray:
    """Rows whose time is earlier than a row listed before them in the same group (input order)."""
    if frame.empty:
        return np.zeros(0, dtype=bool)
    order = frame.sort_values(["_file", "_row"], kind="stable")
    t = pd.Series(_ns(order[time_col]), index=order.index)
    grouped = t.groupby([order[k] for k in keys], sort=False)
    prev_max = grouped.cummax().groupby([order[k] for k in keys], sort=False).shift(1)
    late = (t < prev_max).reindex(frame.index).fillna(False).to_numpy(dtype=bool)
    return late


def _check_steps(steps: pd.DataFrame, books: Mapping[str, _RowBook], *,
                 reorder_is_repair: bool) -> pd.DataFrame:
    """Reject impossible steps, duplicates and overlaps; repair (or just sort) out-of-order rows.

    Works on integer arrays (job codes, nanoseconds) so that a table of millions of steps costs a
    few sorts; Python-level work is spent only on the rows that are rejected or repaired.
    """
    steps = _drop_rejected(steps, books)
    if steps.empty:
        return steps
    start, end = _ns(steps["start"]), _ns(steps["end"])
    wait = steps["input_wait_s"].to_numpy(dtype=np.float64)
    bad = end <= start
    if bad.any():
        b = steps[bad]
        _reject(books, b, "end", [f"step {s} ends at {_fmt_time(e)}, not after its start {_fmt_time(t)}"
                                  for s, e, t in zip(b["step"], b["end"], b["start"], strict=True)])
    over = (wait > (end - start) / _NS_PER_S) & ~bad
    if over.any():
        _reject(books, steps[over], "input_wait_s", "input wait is longer than the step itself")
    if bad.any() or over.any():
        steps = _drop_rejected(steps, books)
        if steps.empty:
            return steps
        start, end = _ns(steps["start"]), _ns(steps["end"])
        wait = steps["input_wait_s"].to_numpy(dtype=np.float64)
    job = pd.factorize(steps["job_id"], sort=True)[0].astype(np.int64)
    att = steps["attempt"].to_numpy(dtype=np.int64)
    num = steps["step"].to_numpy(dtype=np.int64)
    # rows out of time order within (job, attempt), in input order
    if reorder_is_repair:
        late = _late_rows(steps, job, att, start)
        if late.any():
            _repair(books, steps[late], "start", "listed out of time order: moved into time order")
    # sort by job and start; a step number may repeat within an attempt (re-run after an in-place
    # restore), but two records of one step starting at the same instant are a copy or a conflict
    order = np.lexsort((steps["_row"].to_numpy(), num, att, start, job))
    steps = steps.iloc[order].reset_index(drop=True)
    job, att, num = job[order], att[order], num[order]
    start, end, wait = start[order], end[order], wait[order]
    same_key = np.r_[False, (job[1:] == job[:-1]) & (att[1:] == att[:-1]) & (num[1:] == num[:-1])
                     & (start[1:] == start[:-1])]
    if same_key.any():
        run = np.cumsum(~same_key) - 1
        first = np.flatnonzero(~same_key)[run]
        differs = (end != end[first]) | (wait != wait[first])
        conflict_run = np.zeros(run[-1] + 1, dtype=bool)
        np.logical_or.at(conflict_run, run, differs)
        conflict = conflict_run[run] & (same_key | np.r_[same_key[1:], False])
        copy = same_key & ~conflict
        if copy.any():
            c = steps[copy]
            src = steps.iloc[first[copy]]
            _reject(books, c, "step", [f"duplicate of the record of step {n} (attempt {a}) at {f} row {r}"
                                       for n, a, f, r in
                                       zip(c["step"], c["attempt"], src["_file"], src["_row"], strict=True)])
        if conflict.any():
            c = steps[conflict]
            rows_of = c.groupby(run[conflict], sort=False)["_row"].transform(
                lambda r: ", ".join(str(x) for x in r))  # only the few conflicting groups
            _reject(books, c, "step",
                    [f"conflicting records of step {n} (attempt {a}) starting at the same time, rows {rs}: "
                     "none is taken" for n, a, rs in zip(c["step"], c["attempt"], rows_of, strict=True)])
        keep = ~(copy | conflict)
        steps = steps[keep].reset_index(drop=True)
        job, num, start, end = job[keep], num[keep], start[keep], end[keep]
    overlap = np.r_[False, (job[1:] == job[:-1]) & (start[1:] < end[:-1])]
    if overlap.any():
        o = steps[overlap]
        i = np.flatnonzero(overlap)
        gap = (end[i - 1] - start[i]) / _NS_PER_S
        _reject(books, o, "start", [f"step {s} overlaps the step before it (step {int(p)}) by {g:.6g} s: "
                                    "steps of one job must not overlap" for s, p, g in
                                    zip(o["step"], num[i - 1], gap, strict=True)])
        steps = steps[~overlap].reset_index(drop=True)
    return steps


def _late_rows(frame: pd.DataFrame, job: np.ndarray, att: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Rows whose time is earlier than a row listed before them (file, row order) in the same group."""
    pos = np.lexsort((frame["_row"].to_numpy(), pd.factorize(frame["_file"])[0]))
    if np.array_equal(pos, np.arange(pos.size)):
        pos = None
    j, a, tt = (job, att, t) if pos is None else (job[pos], att[pos], t[pos])
    grp = np.lexsort((np.arange(tt.size), a, j))  # stable grouping by (job, attempt)
    g_t = tt[grp]
    new = np.r_[True, (j[grp][1:] != j[grp][:-1]) | (a[grp][1:] != a[grp][:-1])]
    seg = np.cumsum(new) - 1
    s = pd.Series(g_t).groupby(seg).cummax().to_numpy()
    prev = np.r_[np.iinfo(np.int64).min, s[:-1]]
    prev[new] = np.iinfo(np.int64).min
    late_sorted = g_t < prev
    late = np.zeros(tt.size, dtype=bool)
    late[grp] = late_sorted
    if pos is None:
        return late
    out = np.zeros(tt.size, dtype=bool)
    out[pos] = late
    return out


def _kind_is_known(kinds: pd.Series) -> np.ndarray:
    k = kinds.astype("str")
    known = k.isin((*EVENT_KINDS, *AUXILIARY_EVENT_KINDS)) | k.str.startswith(AUXILIARY_KIND_PREFIXES)
    return known.to_numpy(dtype=bool)


def _check_events(events: pd.DataFrame, books: Mapping[str, _RowBook], *, reorder_is_repair: bool,
                  flag_unknown: bool = True) -> pd.DataFrame:
    """Reject duplicate events, flag unknown kinds, repair (or just sort) out-of-order rows."""
    events = _drop_rejected(events, books)
    if events.empty:
        return events
    key = ["job_id", "attempt", "time", "kind", "step", "duration_s"]
    dup = events.fillna({"duration_s": -1.0}).duplicated(key, keep="first").to_numpy()
    if dup.any():
        filled = events.fillna({"duration_s": -1.0})
        first = filled.groupby(key, sort=False, dropna=False)["_row"].transform("first")
        d = events[dup]
        _reject(books, d, "kind", [f"duplicate of the {k} event at row {r}"
                                   for k, r in zip(d["kind"], first[dup], strict=True)])
        events = _drop_rejected(events, books)
    if flag_unknown:
        unknown = ~_kind_is_known(events["kind"])
        if unknown.any():
            u = events[unknown]
            _flag(books, u, "unknown_event_kind",
                  [f"event kind {str(k)!r} is not one the runtime partition knows: kept, not charged to any "
                   "category" for k in u["kind"]], "time")
    late = _out_of_order(events, ["job_id"], "time")
    if reorder_is_repair and late.any():
        _repair(books, events[late], "time", "listed out of time order: moved into time order")
    return _sort_events(events)


def _sort_events(events: pd.DataFrame) -> pd.DataFrame:
    """Sort by job, time, attempt and, among simultaneous events, a natural kind order."""
    if events.empty:
        return events
    rank = events["kind"].map(_KIND_RANK).fillna(len(_KIND_RANK) // 2).to_numpy()
    return (events.assign(_rank=rank).sort_values(["job_id", "time", "attempt", "_rank"], kind="stable")
            .drop(columns="_rank").reset_index(drop=True))


def _cross_checks(steps: pd.DataFrame, events: pd.DataFrame, books: Mapping[str, _RowBook]) -> None:
    """Flag restores to steps no checkpoint recorded and failures that no restart followed."""
    if events.empty:
        return
    restores = events[(events["kind"] == "restore") & events["step"].notna()]
    if not restores.empty:
        commits = events.loc[events["kind"] == "checkpoint_commit", ["job_id", "step", "time"]]
        first_commit = commits.groupby(["job_id", "step"], as_index=False)["time"].min().rename(
            columns={"time": "_commit_time"})
        m = restores.merge(first_commit, on=["job_id", "step"], how="left")
        never = (m["_commit_time"].isna() | (m["_commit_time"] > m["time"])).to_numpy()
        if never.any():
            r = m[never]
            _flag(books, r, "restore_uncommitted",
                  [f"restore to step {s}, which no checkpoint_commit in this timeline recorded before it"
                   for s in r["step"]], "time")
    failures = events[events["kind"] == "failure"]
    if not failures.empty:
        last_attempt = pd.concat([steps[["job_id", "attempt"]], events[["job_id", "attempt"]]]).groupby(
            "job_id")["attempt"].max()
        restart_kinds = events[events["kind"].isin(["restore", "gang_complete"])]
        last_restart = restart_kinds.groupby("job_id")["time"].max()
        f = failures.assign(_last_attempt=failures["job_id"].map(last_attempt),
                            _last_restart=failures["job_id"].map(last_restart))
        later_attempt = (f["_last_attempt"] > f["attempt"]).to_numpy()
        later_restart = (f["_last_restart"] > f["time"]).fillna(False).to_numpy(dtype=bool)
        alone = ~later_attempt & ~later_restart
        if alone.any():
            a = f[alone]
            _flag(books, a, "failure_without_restart",
                  [f"failure at {_fmt_time(t)} (attempt {at}) has no restart after it: the job ended on "
                   "this failure" for t, at in zip(a["time"], a["attempt"], strict=True)], "time")


def _finalise_steps(steps: pd.DataFrame) -> pd.DataFrame:
    if steps.empty:
        return empty_steps()
    # _check_steps has already sorted the rows by job id and start
    return pd.DataFrame({
        "job_id": steps["job_id"].astype("str").array,
        "attempt": steps["attempt"].to_numpy(dtype=np.int64),
        "step": steps["step"].to_numpy(dtype=np.int64),
        "start": steps["start"].astype(_TIME_DTYPE).array,
        "end": steps["end"].astype(_TIME_DTYPE).array,
        "input_wait_s": steps["input_wait_s"].to_numpy(dtype=np.float64),
    })


def _finalise_events(events: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    if events.empty:
        out = empty_events()
        for col in extra:
            out[col] = pd.Series([], dtype="object")
        return out
    out = pd.DataFrame({
        "job_id": pd.Series(events["job_id"].astype("str").to_numpy(), dtype="str"),
        "attempt": events["attempt"].astype("int64").to_numpy(),
        "time": events["time"].astype(_TIME_DTYPE).array,
        "kind": pd.Series(events["kind"].astype("str").to_numpy(), dtype="str"),
        "step": pd.array(events["step"].to_numpy(dtype=object), dtype="Int64"),
        "duration_s": pd.array(events["duration_s"].astype("float64").to_numpy(), dtype="Float64"),
    })
    for col in extra:
        out[col] = events[col].to_numpy()
    return _sort_events(out)


def _as_paths(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    if isinstance(paths, (str, Path)):
        return [Path(paths)]
    out = [Path(p) for p in paths]
    if not out:
        raise DomainError("no input files were given")
    return out


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=str(path)) from exc


def _concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------------
# MLPerf :::MLLOG logs
# ---------------------------------------------------------------------------------------------------

_MLLOG_TAG = ":::MLLOG"
_MLLOG_TYPES = ("INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME")
_MLLOG_FAMILIES = ("init", "run", "block", "eval", "epoch")
#: A rank prefix before the tag: ``0: ``, ``[3] ``, ``[1,3]<stdout>:`` (the rank is the last number).
_RANK_PREFIX = re.compile(r"^.*?(?:\[(?:\d+,)?(\d+)\](?:<std(?:out|err)>)?|(?<![\w.])(\d+))\s*:?\s*$")


@dataclass
class _MllogParse:
    file: str
    job_id: str
    records: pd.DataFrame  # kept records: _row, time, event_type, key, value, metadata
    pairs: dict[str, pd.DataFrame]  # family -> matched intervals: start, end, start_row, end_row
    books: dict[str, _RowBook]


def _parse_mllog(path: Path, *, job_id: str | None, rank_copy_tolerance_s: float) -> _MllogParse:
    text = _read_text(path)
    file = str(path)
    truncated = bool(text) and not text.endswith("\n")
    lines, rows, bad_rows, bad_reasons, bad_fields = [], [], [], [], []
    for lineno, line in enumerate(text.splitlines(), start=1):
        at = line.find(_MLLOG_TAG)
        if at < 0:
            continue  # not a record of this format (stdout, :::SYSJSON, ...)
        rows.append(lineno)
        prefix = _RANK_PREFIX.match(line[:at])
        payload = line[at + len(_MLLOG_TAG):].strip()
        try:
            obj = json.loads(payload)
        except json.JSONDecodeError as exc:
            bad_rows.append(lineno)
            bad_fields.append(None)
            bad_reasons.append(f"invalid JSON after {_MLLOG_TAG} ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            bad_rows.append(lineno)
            bad_fields.append(None)
            bad_reasons.append(f"the {_MLLOG_TAG} payload is not a JSON object")
            continue
        t = obj.get("time_ms")
        problem = None
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            problem = ("time_ms", f"time_ms must be a number of milliseconds since the epoch; got {t!r}")
        elif obj.get("event_type") not in _MLLOG_TYPES:
            problem = ("event_type",
                       f"event_type must be one of {_MLLOG_TYPES}; got {obj.get('event_type')!r}")
        elif not isinstance(obj.get("key"), str):
            problem = ("key", f"key must be a string; got {obj.get('key')!r}")
        if problem:
            bad_rows.append(lineno)
            bad_fields.append(problem[0])
            bad_reasons.append(problem[1])
            continue
        lines.append((lineno, obj, None if prefix is None else int(prefix.group(1) or prefix.group(2))))
    book = _RowBook(file, rows, truncated=truncated)
    for r, f, why in zip(bad_rows, bad_fields, bad_reasons, strict=True):
        book.reject([r], f, [why])
    books = {file: book}
    jid = job_id if job_id is not None else path.stem
    if not lines:
        return _MllogParse(file, jid, pd.DataFrame(columns=["_file", "_row", "time", "event_type", "key"]),
                           {}, books)
    recs = pd.DataFrame({
        "_file": file,
        "_row": [r for r, _, _ in lines],
        "_rank": pd.array([k for _, _, k in lines], dtype="Int64"),
        "time_ms": [float(o["time_ms"]) for _, o, _ in lines],
        "event_type": [o["event_type"] for _, o, _ in lines],
        "key": [o["key"] for _, o, _ in lines],
        "value": [o.get("value") for _, o, _ in lines],
        "metadata": [o.get("metadata") for _, o, _ in lines],
        "_sig": [json.dumps({k: v for k, v in o.items() if k != "time_ms"}, sort_keys=True, default=str)
                 for _, o, _ in lines],
    })
    recs["time"] = pd.to_datetime(recs["time_ms"], unit="ms", utc=True).astype(_TIME_DTYPE)
    # 1. exact per-rank copies (identical payload, identical time)
    exact = recs.duplicated(["_sig", "time_ms"], keep="first").to_numpy()
    if exact.any():
        first = recs.groupby(["_sig", "time_ms"], sort=False)["_row"].transform("first")
        _reject(books, recs[exact], None, [f"per-rank copy of line {r}" for r in first[exact]])
    recs = recs.loc[~exact].reset_index(drop=True)
    # 1b. rank-prefixed logs: a record of another rank with the same payload as a record of the first
    # rank, within the tolerance, is that record's copy (works however the copies interleave)
    ranks = recs["_rank"].dropna().unique()
    if len(ranks) > 1:
        ref_rank = recs["_rank"].dropna().iloc[0]
        is_ref = (recs["_rank"] == ref_rank).fillna(False).to_numpy(dtype=bool)
        ref = recs.loc[is_ref, ["_sig", "time_ms", "_row"]].rename(columns={"_row": "_ref_row"})
        ref = ref.assign(_ref_t=ref["time_ms"]).sort_values("time_ms")
        other = recs.loc[~is_ref, ["_sig", "time_ms", "_row"]].sort_values("time_ms")
        m = pd.merge_asof(other, ref, on="time_ms", by="_sig", direction="nearest",
                          tolerance=rank_copy_tolerance_s * 1000.0)
        hit = m[m["_ref_row"].notna()]
        if not hit.empty:
            copies = recs.set_index("_row").loc[hit["_row"].to_numpy()].reset_index()
            _reject(books, copies, None,
                    [f"per-rank copy of line {int(r)} ({abs(t - rt):.0f} ms apart)" for r, t, rt in
                     zip(hit["_ref_row"], hit["time_ms"], hit["_ref_t"], strict=True)])
            recs = _drop_rejected(recs, books)
    # 2. interval markers: key and event type must agree
    fam = recs["key"].str.extract(r"^(init|run|block|eval|epoch)_(start|stop)$")
    is_marker = fam[0].notna().to_numpy()
    expected = np.where(fam[1].to_numpy(dtype=object) == "start", "INTERVAL_START", "INTERVAL_END")
    disagree = is_marker & (recs["event_type"].to_numpy(dtype=object) != expected)
    if disagree.any():
        d = recs[disagree]
        _reject(books, d, "event_type", [f"key {k!r} with event_type {e!r}: the two disagree"
                                         for k, e in zip(d["key"], d["event_type"], strict=True)])
    recs = recs.assign(_family=fam[0], _is_start=fam[1] == "start")
    recs = _drop_rejected(recs, books)
    markers = recs[recs["_family"].notna()].sort_values(["time_ms", "_row"], kind="stable")
    # 3. near copies: consecutive same-type markers of one family with the same payload, within tolerance
    if not markers.empty:
        fam_s = markers["_family"]
        change = markers["_is_start"].ne(markers.groupby(fam_s, sort=False)["_is_start"].shift(1))
        run_id = change.astype("int64").groupby(fam_s, sort=False).cumsum()
        grp = markers.groupby([fam_s, run_id, markers["_sig"]], sort=False)
        first_t = grp["time_ms"].transform("first")
        first_row = grp["_row"].transform("first")
        is_first = (markers["_row"] == first_row).to_numpy()
        near = ~is_first & ((markers["time_ms"] - first_t) <= rank_copy_tolerance_s * 1000.0).to_numpy()
        if near.any():
            nm = markers[near]
            _reject(books, nm, None,
                    [f"per-rank copy of line {r} ({k}, {dt:.0f} ms later)" for r, k, dt in
                     zip(first_row[near], nm["key"], (nm["time_ms"] - first_t[near]), strict=True)])
            markers = markers[~near]
    # 4. pair start/stop markers of each family; unmatched ones are reported, not guessed
    pairs: dict[str, pd.DataFrame] = {}
    for family in _MLLOG_FAMILIES:
        m = markers[markers["_family"] == family]
        if m.empty:
            continue
        s = m["_is_start"].to_numpy(dtype=bool)
        nxt = np.r_[s[1:], True]  # is the next marker a start? (a start at the end has no stop)
        prv = np.r_[False, s[:-1]]  # is the previous marker a start?
        start_ok = s & ~nxt
        stop_ok = ~s & prv
        lonely_start = s & ~start_ok
        lonely_stop = ~s & ~stop_ok
        if lonely_start.any():
            _reject(books, m[lonely_start], "key",
                    f"{family}_start with no matching {family}_stop after it: interval not counted")
        if lonely_stop.any():
            _reject(books, m[lonely_stop], "key",
                    f"{family}_stop with no matching {family}_start before it: interval not counted")
        starts, stops = m[start_ok], m[stop_ok]
        pairs[family] = pd.DataFrame({
            "start": starts["time"].array, "end": stops["time"].array,
            "start_row": starts["_row"].to_numpy(), "end_row": stops["_row"].to_numpy(),
            "start_ms": starts["time_ms"].to_numpy(), "end_ms": stops["time_ms"].to_numpy(),
            "metadata": stops["metadata"].to_numpy(),
        })
        pairs[family]["start"] = pairs[family]["start"].astype(_TIME_DTYPE)
        pairs[family]["end"] = pairs[family]["end"].astype(_TIME_DTYPE)
    recs = _drop_rejected(recs, books)
    return _MllogParse(file, jid, recs, pairs, books)


def _mllog_tables(p: _MllogParse) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Canonical steps (training blocks) and events of one parsed MLPerf log."""
    recs = p.records
    if recs.empty:
        return pd.DataFrame(), pd.DataFrame()
    init_starts = recs.loc[recs["key"] == "init_start", "time"].sort_values()
    # attempt: number of init_start markers at or before a time, minus one (a log is normally one run)
    bounds = _ns(init_starts)

    def attempt_of(times: pd.Series) -> np.ndarray:
        if bounds.size == 0:
            return np.zeros(len(times), dtype=np.int64)
        return np.maximum(np.searchsorted(bounds, _ns(times), side="right") - 1, 0).astype(np.int64)

    steps = pd.DataFrame()
    blocks = p.pairs.get("block")
    if blocks is not None and not blocks.empty:
        steps = pd.DataFrame({
            "_file": p.file, "_row": blocks["start_row"].to_numpy(), "job_id": p.job_id,
            "attempt": attempt_of(blocks["start"]), "step": np.arange(len(blocks), dtype=np.int64),
            "start": blocks["start"], "end": blocks["end"], "input_wait_s": 0.0,
        })
    ev = []
    launches = 0
    for _, r in recs[recs["key"].isin(["init_start", "run_stop"])].iterrows():  # a handful per log
        kind = "gang_complete" if r["key"] == "init_start" else "release"
        ev.append({"_file": p.file, "_row": r["_row"], "time": r["time"], "kind": kind, "step": pd.NA,
                   "duration_s": np.nan})
        if kind == "gang_complete":
            if launches:  # every MLPerf init is a cold launch, also a second run in one file
                ev.append({"_file": p.file, "_row": r["_row"], "time": r["time"], "kind": "cold_start",
                           "step": pd.NA, "duration_s": np.nan})
            launches += 1
    events = pd.DataFrame(ev)
    evals = p.pairs.get("eval")
    if evals is not None and not evals.empty:
        blocks_done = (np.searchsorted(_ns(blocks["end"]), _ns(evals["start"]), side="right")
                       if blocks is not None else np.zeros(len(evals), dtype=np.int64))
        step_ref = pd.array(np.asarray(blocks_done, dtype=np.int64) - 1, dtype="Int64")
        step_ref[np.asarray(blocks_done) == 0] = pd.NA
        dur = (_ns(evals["end"]) - _ns(evals["start"])) / _NS_PER_S
        events = _concat([events, pd.DataFrame({
            "_file": p.file, "_row": evals["start_row"].to_numpy(), "time": evals["start"],
            "kind": "eval_begin", "step": step_ref, "duration_s": np.nan}), pd.DataFrame({
            "_file": p.file, "_row": evals["end_row"].to_numpy(), "time": evals["end"],
            "kind": "eval_end", "step": step_ref, "duration_s": dur})])
    if not steps.empty:
        firsts = steps.sort_values("start").groupby("attempt", as_index=False).first()
        events = _concat([events, pd.DataFrame({
            "_file": p.file, "_row": firsts["_row"].to_numpy(), "time": firsts["start"],
            "kind": "first_step", "step": pd.array(firsts["step"].to_numpy(), dtype="Int64"),
            "duration_s": np.nan})])
    if not events.empty:
        events["time"] = events["time"].astype(_TIME_DTYPE)
        events["job_id"] = p.job_id
        events["attempt"] = attempt_of(events["time"])
    return steps, events


def read_mlperf(paths: PathLike | Sequence[PathLike], *, job_id: str | None = None,
                rank_copy_tolerance_s: float = 10.0) -> tuple[TimelineTables, TimelineLedger]:
    """Read MLPerf ``:::MLLOG`` result logs into canonical steps and events.

    Each file is one job (``job_id`` defaults to the file name without suffix).  Lines without the
    ``:::MLLOG`` tag (other output, ``:::SYSJSON``) are not records of this format and are not
    counted; text before the tag on a line (a rank prefix such as ``0: ``) is ignored.

    * Per-rank copies are removed and rejected as such (the first is kept): identical payloads at
      the same time; in a log whose lines carry rank prefixes, a record of another rank with the same
      payload as a record of the first rank within ``rank_copy_tolerance_s``; and, in any log,
      consecutive same-type interval markers of one kind with the same payload within the tolerance.
    * ``*_start`` / ``*_stop`` markers are paired in time order; a start with no stop after it, or a
      stop with no start before it, is rejected as unmatched and its interval is not counted.
    * Mapping: ``init_start`` -> ``gang_complete`` (a second run in one file also gets a
      ``cold_start``: every MLPerf init is a cold launch); each training block -> one step
      (``step`` = the block's ordinal, input wait 0);
      first block start -> ``first_step``; ``eval_start``/``eval_stop`` -> ``eval_begin``/
      ``eval_end`` (``step`` = ordinal of the last block before it, ``duration_s`` on the end);
      ``run_stop`` -> ``release``.  Other keys are kept in the parse but produce no rows.

    Parameters
    ----------
    paths
        One path or several.
    job_id
        Job id for a single file (default: the file name without suffix).
    rank_copy_tolerance_s
        Largest time difference, seconds, between per-rank copies of one marker.

    Returns
    -------
    tuple of (TimelineTables, TimelineLedger)
        The canonical tables and the ledger over all ``:::MLLOG`` records.
    """
    files = _as_paths(paths)
    tol = check_nonnegative("rank_copy_tolerance_s", rank_copy_tolerance_s)
    if job_id is not None and len(files) > 1:
        raise DomainError("job_id= names one job; several files are several jobs (leave job_id unset)")
    all_steps, all_events, books = [], [], {}
    for f in files:
        p = _parse_mllog(f, job_id=job_id, rank_copy_tolerance_s=tol)
        books.update(p.books)
        steps, events = _mllog_tables(p)
        all_steps.append(steps)
        all_events.append(events)
    steps = _check_steps(_concat(all_steps), books, reorder_is_repair=False) if any(
        not s.empty for s in all_steps) else pd.DataFrame()
    events = _check_events(_concat(all_events), books, reorder_is_repair=False) if any(
        not e.empty for e in all_events) else pd.DataFrame()
    ledger = _close(books)
    return TimelineTables(_finalise_steps(steps), _finalise_events(events)), ledger


def _interval_measure(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of intervals, seconds (inputs in ns)."""
    if starts.size == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > run_end[:-1]]
    grp = np.cumsum(new) - 1
    gs = s[new]
    ge = np.zeros(gs.size, dtype=np.int64)
    np.maximum.at(ge, grp, e)
    return float((ge - gs).sum()) / _NS_PER_S


def _overlap_s(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> float:
    """Total overlap, seconds, between two sets of intervals that are each disjoint (inputs in ns)."""
    if a_s.size == 0 or b_s.size == 0:
        return 0.0
    lo = np.maximum(a_s[:, None], b_s[None, :])
    hi = np.minimum(a_e[:, None], b_e[None, :])
    return float(np.clip(hi - lo, 0, None).sum()) / _NS_PER_S


def _meta_value(recs: pd.DataFrame, key: str) -> Any:
    hit = recs.loc[recs["key"] == key, "value"]
    return None if hit.empty else hit.iloc[0]


def mlperf_summary(path: PathLike, *, rank_copy_tolerance_s: float = 10.0) -> dict[str, Any]:
    """Raw interval sums of one MLPerf result log, and the runtime goodput they imply.

    Held time runs from ``init_start`` to ``run_stop``; it is partitioned into startup (the init
    interval), evaluation (eval intervals), productive (training blocks, less any part inside an eval
    interval: evaluation takes precedence) and ``unattributed_s`` (held time in none of them, e.g. the
    gap between ``init_stop`` and the first block).  When a log has no training blocks the epoch
    intervals are used instead (``productive_source`` says which).

    Parameters
    ----------
    path
        The log file.
    rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    dict
        ``held_s, startup_s, run_s, productive_s, evaluation_s, unattributed_s, runtime_goodput
        (= productive / held), blocks, evals, productive_source, benchmark, org, platform, status,
        job_id, file, ledger``.

    Raises
    ------
    InputError
        If the log lacks a matched ``init_start`` or ``run_stop``, or holds more than one run:
        held time is then undefined, and it is not guessed.
    """
    p = _parse_mllog(Path(path), job_id=None, rank_copy_tolerance_s=check_nonnegative(
        "rank_copy_tolerance_s", rank_copy_tolerance_s))
    recs = p.records
    ledger = _close(p.books)
    inits = recs[recs["key"] == "init_start"] if not recs.empty else recs
    stops = recs[recs["key"] == "run_stop"] if not recs.empty else recs
    if len(inits) != 1 or len(stops) != 1:
        raise InputError(f"held time needs exactly one kept init_start and one kept run_stop; found "
                         f"{len(inits)} and {len(stops)} (see the ledger for rejected markers)",
                         file=p.file, field="key")
    t0 = int(_ns(inits["time"])[0])
    t1 = int(_ns(stops["time"])[0])
    if t1 <= t0:
        raise InputError("run_stop is not after init_start", file=p.file, row=int(stops["_row"].iloc[0]),
                         field="time_ms")

    def clipped(family: str) -> tuple[np.ndarray, np.ndarray]:
        df = p.pairs.get(family)
        if df is None or df.empty:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        s, e = np.clip(_ns(df["start"]), t0, t1), np.clip(_ns(df["end"]), t0, t1)
        keep = e > s
        return s[keep], e[keep]

    held = (t1 - t0) / _NS_PER_S
    i_s, i_e = clipped("init")
    e_s, e_e = clipped("eval")
    b_s, b_e = clipped("block")
    source = "block"
    if b_s.size == 0:
        b_s, b_e = clipped("epoch")
        source = "epoch" if b_s.size else "none"
    startup = _interval_measure(i_s, i_e)
    evaluation = _interval_measure(e_s, e_e) - _overlap_s(e_s, e_e, i_s, i_e)
    productive = (_interval_measure(b_s, b_e) - _overlap_s(b_s, b_e, e_s, e_e)
                  - _overlap_s(b_s, b_e, i_s, i_e))
    run = p.pairs.get("run")
    run_s = float((_ns(run["end"]) - _ns(run["start"])).sum()) / _NS_PER_S if run is not None else math.nan
    status = None
    meta = stops["metadata"].iloc[0]
    if isinstance(meta, dict):
        status = meta.get("status")
    return {
        "file": p.file,
        "job_id": p.job_id,
        "benchmark": _meta_value(recs, "submission_benchmark"),
        "org": _meta_value(recs, "submission_org"),
        "platform": _meta_value(recs, "submission_platform"),
        "status": status,
        "held_s": held,
        "startup_s": startup,
        "run_s": run_s,
        "productive_s": productive,
        "evaluation_s": evaluation,
        "unattributed_s": held - startup - productive - evaluation,
        "runtime_goodput": productive / held,
        "blocks": int(b_s.size),
        "evals": int(e_s.size),
        "productive_source": source,
        "ledger": ledger.to_dict(),
    }


def mlperf_summary_table(paths: PathLike | Sequence[PathLike], *,
                         rank_copy_tolerance_s: float = 10.0) -> pd.DataFrame:
    """One row of :func:`mlperf_summary` per log (ledger reduced to its counts).

    Parameters
    ----------
    paths
        One path, several paths, or a directory (its ``*.txt`` files are read).
    rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    pandas.DataFrame
        Columns as the summary keys, with ``rejected`` and ``flagged`` counts instead of the ledger.
    """
    if isinstance(paths, (str, Path)) and Path(paths).is_dir():
        files = sorted(Path(paths).glob("*.txt"))
    else:
        files = _as_paths(paths)
    rows = []
    for f in files:
        s = mlperf_summary(f, rank_copy_tolerance_s=rank_copy_tolerance_s)
        led = s.pop("ledger")
        s["rejected"] = led["rejected"]
        s["flagged"] = len(led["flags"])
        rows.append(s)
    return pd.DataFrame(rows)


def mlperf_runtime_json(path: PathLike, *, definition: str = "retrospective",
                        rank_copy_tolerance_s: float = 10.0) -> dict[str, Any]:
    """Return the ``fleetlib runtime FILE --format mlperf --json`` object for one MLPerf log.

    Held = ``init_start`` -> ``run_stop``; productive = the training blocks; runtime goodput =
    productive / held; startup and evaluation as in :func:`mlperf_summary`.  A result log records no
    checkpoints, failures or input waits, so those terms are 0 and the committed and retrospective
    definitions coincide.

    Parameters
    ----------
    path
        The log file.
    definition
        ``"committed"`` or ``"retrospective"`` (reported back; both give the same number here).
    rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    dict
        Keys ``runtime_goodput, held_s, productive_s, terms, fault_free_step_s, definition, ledger``
        (``fault_free_step_s`` is None: MLPerf blocks are not steps).
    """
    if definition not in ("committed", "retrospective"):
        raise DomainError(f"definition must be 'committed' or 'retrospective'; got {definition!r}")
    s = mlperf_summary(path, rank_copy_tolerance_s=rank_copy_tolerance_s)
    terms = {"startup": s["startup_s"], "input_wait": 0.0, "checkpoint": 0.0, "recovery": 0.0,
             "rework": 0.0, "preemption": 0.0, "evaluation": s["evaluation_s"], "idle": 0.0,
             "unattributed": s["unattributed_s"]}
    return {"format": "mlperf", "job_id": s["job_id"], "runtime_goodput": s["runtime_goodput"],
            "held_s": s["held_s"], "productive_s": s["productive_s"], "terms": terms,
            "fault_free_step_s": None, "definition": definition, "ledger": s["ledger"]}


# ---------------------------------------------------------------------------------------------------
# ml-goodput-measurement <job>_timeline.jsonl
# ---------------------------------------------------------------------------------------------------

_PHASE_KEYS = {
    "tpu_init_start_time": "tpu_init_begin", "tpu_init_end_time": "tpu_init_end",
    "training_prep_start_time": "training_prep_begin", "training_prep_end_time": "training_prep_end",
    "data_loading_start_time": "data_loading_begin", "data_loading_end_time": "data_loading_end",
}
_SLICE_KEYS = ("active_slices", "total_slices", "available_slices", "elastic_slice_counts_timestamp")


def _num(obj: Mapping[str, Any], key: str) -> float | None:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _classify_mlgoodput(obj: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Return (fields, None, None) for a usable record, or (None, field, reason) for a rejected one."""
    et = obj.get("event_type")
    if et in ("save", "restore", "emergency_restore"):
        step = obj.get("step")
        try:
            step_i = int(step) if step is not None and not isinstance(step, bool) else None
        except (TypeError, ValueError):
            step_i = None
        if step_i is None or step_i < 0 or (isinstance(step, float) and step != step_i):
            return None, "step", f"checkpoint {et} record needs an integer step; got {step!r}"
        directory = str(obj.get("directory") or "")
        if et == "save":
            t = _num(obj, "checkpoint_manager_blocking_start_time")
            d = _num(obj, "checkpoint_manager_blocking_duration_secs")
            if t is None:
                return None, "checkpoint_manager_blocking_start_time", (
                    "save record without checkpoint_manager_blocking_start_time: it cannot be placed in time")
            if d is None or d < 0:
                return None, "checkpoint_manager_blocking_duration_secs", (
                    "save record needs a duration >= 0; got "
                    f"{obj.get('checkpoint_manager_blocking_duration_secs')!r}")
            return {"rtype": "save", "t": t, "dur": d, "step": step_i,
                    "where": "persistent" if directory.startswith("gs://") else "local",
                    "sync": obj.get("synchronous"), "preempt_t": _num(obj, "preemption_received_at")
                    if obj.get("reached_preemption") else None}, None, None
        t = _num(obj, "checkpoint_manager_start_time")
        d = _num(obj, "checkpoint_manager_duration_secs")
        if t is None:
            t, d = _num(obj, "checkpointer_start_time"), _num(obj, "checkpointer_duration_secs")
        if t is None:
            return None, "checkpoint_manager_start_time", (
                f"{et} record without a start time: it cannot be placed in time")
        if d is not None and d < 0:
            return None, "checkpoint_manager_duration_secs", "restore duration must be >= 0"
        return {"rtype": "restore", "t": t, "dur": d, "step": step_i,
                "where": "persistent" if directory.startswith("gs://") else "local"}, None, None
    found = []
    if "step_count" in obj or "step_start_time" in obj:
        found.append("step")
    for key in ("job_start_time", "job_end_time", *_PHASE_KEYS, "custom_badput_event_type",
                "elastic_wait_event_type", "elastic_reinit_start_time"):
        if key in obj:
            found.append(key)
    if len(found) > 1:
        return None, None, f"record mixes several timeline fields ({', '.join(found)})"
    if not found:
        if any(k in obj for k in _SLICE_KEYS):
            return None, None, "elastic slice-count record: not a timeline event (not read by this reader)"
        keys = sorted(k for k in obj if k != "job_name")
        return None, None, f"unrecognised record (keys {keys})"
    kind = found[0]
    if kind == "step":
        sc, t = obj.get("step_count"), _num(obj, "step_start_time")
        if isinstance(sc, bool) or not isinstance(sc, int) or sc < 0:
            return None, "step_count", f"step_count must be an integer >= 0; got {sc!r}"
        if t is None:
            return None, "step_start_time", (
                f"step_start_time must be POSIX seconds; got {obj.get('step_start_time')!r}")
        return {"rtype": "step", "t": t, "step": sc}, None, None
    if kind in ("job_start_time", "job_end_time") or kind in _PHASE_KEYS:
        t = _num(obj, kind)
        if t is None:
            return None, kind, f"{kind} must be POSIX seconds; got {obj.get(kind)!r}"
        rtype = {"job_start_time": "job_start", "job_end_time": "job_end"}.get(kind, _PHASE_KEYS.get(kind))
        return {"rtype": rtype, "t": t}, None, None
    prefix = {"custom_badput_event_type": "custom_badput_event", "elastic_wait_event_type": "elastic_wait",
              "elastic_reinit_start_time": "elastic_reinit"}[kind]
    t, t2 = _num(obj, f"{prefix}_start_time"), _num(obj, f"{prefix}_end_time")
    if t is None or t2 is None or t2 < t:
        return None, f"{prefix}_start_time", (
            f"{prefix} record needs POSIX start and end times with end >= start")
    label = str(obj.get(kind, "")).strip() if kind != "elastic_reinit_start_time" else ""
    rtype = {"custom_badput_event_type": "custom", "elastic_wait_event_type": "elastic_wait",
             "elastic_reinit_start_time": "elastic_reinit"}[kind]
    return {"rtype": rtype, "t": t, "t2": t2, "label": label}, None, None


def _pair_begin_end(frame: pd.DataFrame, begin: str, end: str, books: Mapping[str, _RowBook]) -> pd.DataFrame:
    """Pair begin/end marker rows of one phase per (job, attempt); flag unpaired ones."""
    m = frame[frame["kind"].isin([begin, end])].sort_values(["job_id", "attempt", "time", "_row"],
                                                            kind="stable")
    if m.empty:
        return pd.DataFrame(columns=["job_id", "attempt", "start", "end"])
    is_b = (m["kind"] == begin).to_numpy()
    g = [m["job_id"], m["attempt"]]
    nxt_b = m["kind"].eq(begin).groupby(g, sort=False).shift(-1).fillna(True).to_numpy(dtype=bool)
    prv_b = m["kind"].eq(begin).groupby(g, sort=False).shift(1).fillna(False).to_numpy(dtype=bool)
    ok_b = is_b & ~nxt_b
    ok_e = ~is_b & prv_b
    lonely = (is_b & ~ok_b) | (~is_b & ~ok_e)
    if lonely.any():
        _flag(books, m[lonely], "unpaired_phase_marker",
              [f"{k} marker has no partner: the interval is not used"
                                         for k in m.loc[lonely, "kind"]])
    b, e = m[ok_b], m[ok_e]
    return pd.DataFrame({"job_id": b["job_id"].to_numpy(), "attempt": b["attempt"].to_numpy(),
                         "start": b["time"].array, "end": e["time"].array})


def read_mlgoodput(paths: PathLike | Sequence[PathLike], *, job_id: str | None = None,
                   ) -> tuple[TimelineTables, TimelineLedger]:
    """Read ml-goodput-measurement ``<job>_timeline.jsonl`` cache entries into canonical tables.

    One JSON object per line, as the recorder writes them (POSIX seconds, UTC):

    * ``job_start_time`` -> a new attempt and its ``gang_complete``.  Attempts come only from these
      explicit markers.  A step number that repeats (or goes back) inside one attempt is flagged as
      an inferred restart (the fallback); no step is taken to last across it.
    * ``job_end_time`` -> ``release``.
    * ``step_count`` + ``step_start_time`` -> a step that ends at the next step's start, or earlier
      at the first pause after it (a checkpoint save's blocking section, an eval, a custom badput
      interval, an elastic wait, a preemption) or at ``job_end_time``.  A step with none of these
      after it did not finish; it is rejected (its time is lost work for the partition to charge).
      Time inside a step that lies in a ``data_loading_start/end_time`` interval is its
      ``input_wait_s`` (the recorder wraps the blocking batch fetch).
    * TPU init, training prep and data loading markers -> auxiliary ``*_begin``/``*_end`` events.
    * Orbax ``save`` -> ``checkpoint_begin`` (``duration_s`` = the checkpoint manager's blocking time)
      and ``checkpoint_commit`` at the end of the blocking section (flagged when the save was
      asynchronous: the log has no later commit time); ``reached_preemption`` adds a ``preempt``
      at ``preemption_received_at``.  Orbax ``restore``/``emergency_restore`` -> ``restore``.
      Per-host copies of one save or restore in one attempt are rejected (the first is kept).
    * ``custom_badput_event_type`` -> ``eval_begin``/``eval_end`` when the type names an eval,
      otherwise one ``custom_badput:<type>`` event with its duration; elastic waits and re-inits ->
      ``elastic_wait:<type>`` / ``elastic_reinit`` events.  Elastic slice counts are rejected as not
      timeline events.
    * An attempt that ends with neither ``job_end_time`` nor a preemption but is followed by another
      attempt gets a ``failure`` event at its last record (flagged: the format records no failure
      time, so this is a lower bound) and a ``release`` at the next ``job_start_time`` (flagged: the
      format's total time runs from job start to job end, so the outage is held time).  An attempt
      that ends with a preemption and no ``job_end_time`` gets no release: the time until the next
      start is queue wait, not held time.

    Parameters
    ----------
    paths
        One path or several.
    job_id
        Job id for records without ``job_name`` (default: the file name less ``_timeline.jsonl``).

    Returns
    -------
    tuple of (TimelineTables, TimelineLedger)
        The canonical tables and the ledger over every line.
    """
    files = _as_paths(paths)
    books: dict[str, _RowBook] = {}
    parsed: list[dict[str, Any]] = []
    for path in files:
        text = _read_text(path)
        file = str(path)
        default_job = job_id if job_id is not None else re.sub(r"_timeline$", "", path.stem)
        lines = text.splitlines()
        rows = [i for i, ln in enumerate(lines, start=1) if ln.strip()]
        book = _RowBook(file, rows, truncated=bool(text) and not text.endswith("\n"))
        books[file] = book
        for lineno in rows:
            try:
                obj = json.loads(lines[lineno - 1])
            except json.JSONDecodeError as exc:
                book.reject([lineno], None, [f"invalid JSON ({exc.msg} at column {exc.colno})"])
                continue
            if not isinstance(obj, dict):
                book.reject([lineno], None, ["the line is not a JSON object"])
                continue
            fields, bad_field, reason = _classify_mlgoodput(obj)
            if fields is None:
                book.reject([lineno], bad_field, [reason])
                continue
            jn = obj.get("job_name")
            fields.update({"_file": file, "_row": lineno,
                           "job_id": str(jn) if isinstance(jn, str) and jn else default_job})
            parsed.append(fields)
    if not parsed:
        return TimelineTables.empty(), _close(books)
    rec = pd.DataFrame(parsed)
    for col in ("t2", "dur", "step", "label", "where", "sync", "preempt_t"):
        if col not in rec.columns:
            rec[col] = None
    rec["step"] = pd.array(rec["step"].to_numpy(dtype=object), dtype="Int64")
    rec["time"] = _posix_s_to_utc(rec["t"])
    # exact duplicates (same job, type, times, step) are copies
    sig = ["job_id", "rtype", "t", "t2", "dur", "step", "label", "where"]
    exact = rec.astype({c: "object" for c in sig}).duplicated(sig, keep="first").to_numpy()
    if exact.any():
        first = rec.astype({c: "str" for c in sig}).groupby(sig, sort=False, dropna=False)["_row"].transform(
            "first")
        _reject(books, rec[exact], None, [f"duplicate of line {r}" for r in first[exact]])
        rec = rec.loc[~exact].reset_index(drop=True)
    rec = _assign_attempts_mlgoodput(rec, books)
    # per-host copies of one checkpoint operation in one attempt
    ck = rec["rtype"].isin(["save", "restore"]).to_numpy()
    if ck.any():
        c = rec[ck]
        copy = c.duplicated(["job_id", "attempt", "rtype", "step", "where"], keep="first").to_numpy()
        if copy.any():
            first = c.groupby(["job_id", "attempt", "rtype", "step", "where"], sort=False, dropna=False)[
                "_row"].transform("first")
            cc = c[copy]
            _reject(books, cc, "step", [f"per-host copy of the {t} of step {s} at line {r}" for t, s, r in
                                        zip(cc["rtype"], cc["step"], first[copy], strict=True)])
            rec = _drop_rejected(rec, books)
    events = _mlgoodput_events(rec, books)
    steps = _mlgoodput_steps(rec, events, books)
    steps = _check_steps(steps, books, reorder_is_repair=False)
    events = _check_events(events, books, reorder_is_repair=False)
    events = _sort_events(_concat([events, _derived_events(steps, events, rec, books)]))
    _cross_checks(steps, events, books)
    ledger = _close(books)
    return TimelineTables(_finalise_steps(steps), _finalise_events(events)), ledger


def _assign_attempts_mlgoodput(rec: pd.DataFrame, books: Mapping[str, _RowBook]) -> pd.DataFrame:
    """Attempt of each record from job_start markers; repeated step numbers are flagged.

    A step number that repeats (or goes back) inside one attempt starts a new *segment* of that
    attempt: a step never ends across a segment boundary.  The attempt number is not changed (the
    canonical tables give every attempt a gang_complete, which such a restart lacks); the runtime
    partition infers the restart from the repeated numbers itself, and flags it.
    """
    rec = rec.sort_values(["time", "_file", "_row"], kind="stable").reset_index(drop=True)
    starts = rec.loc[rec["rtype"] == "job_start", ["job_id", "time"]]
    no_start = sorted(set(rec["job_id"]) - set(starts["job_id"]))
    for job in no_start:  # one flag per job
        first = rec[rec["job_id"] == job].head(1)
        _flag(books, first, "no_job_start", f"job {job!r} has no job_start_time record: restarts can be "
                                            "seen only from repeated step numbers", "time")
    rec["attempt"] = _attempts_from_bounds(rec, starts)
    steps = rec[rec["rtype"] == "step"].sort_values(["job_id", "attempt", "time", "_row"], kind="stable")
    prev = steps.groupby(["job_id", "attempt"], sort=False)["step"].shift(1)
    repeat = (steps["step"] <= prev).fillna(False).to_numpy(dtype=bool)
    rec["_segment"] = 0
    if repeat.any():
        r = steps[repeat]
        _flag(books, r, "restart_inferred_from_step_numbers",
              [f"step {s} follows step {int(p)} with no job_start_time between them: a restart is "
               "assumed here (fallback from repeated step numbers)" for s, p in
               zip(r["step"], prev[repeat], strict=True)], "time")
        seg = pd.Series(repeat.astype(np.int64), index=steps.index).groupby(
            [steps["job_id"], steps["attempt"]], sort=False).cumsum()
        rec.loc[seg.index, "_segment"] = seg.to_numpy()
    return rec


def _attempts_from_bounds(rec: pd.DataFrame, bounds: pd.DataFrame) -> np.ndarray:
    """Index of the last bound at or before each record's time in its job (0 before the first)."""
    if bounds.empty:
        return np.zeros(len(rec), dtype=np.int64)
    b = bounds.sort_values(["job_id", "time"]).drop_duplicates().copy()
    b["_attempt"] = b.groupby("job_id").cumcount().astype("int64")
    left = pd.DataFrame({"job_id": rec["job_id"].to_numpy(), "time": rec["time"].astype(_TIME_DTYPE).array,
                         "_pos": np.arange(len(rec))}).sort_values("time", kind="stable")
    left["time"] = left["time"].astype(_TIME_DTYPE)
    b["time"] = b["time"].astype(_TIME_DTYPE)
    m = pd.merge_asof(left, b[["job_id", "time", "_attempt"]], on="time", by="job_id", direction="backward")
    out = np.zeros(len(rec), dtype=np.int64)
    out[m["_pos"].to_numpy()] = m["_attempt"].fillna(0).astype("int64").to_numpy()
    return out


def _mlgoodput_events(rec: pd.DataFrame, books: Mapping[str, _RowBook]) -> pd.DataFrame:
    parts = []

    def add(sel: pd.DataFrame, kind: Any, time: Any, step: Any = pd.NA, dur: Any = np.nan) -> None:
        if sel.empty:
            return
        parts.append(pd.DataFrame({
            "_file": sel["_file"].to_numpy(), "_row": sel["_row"].to_numpy(),
            "job_id": sel["job_id"].to_numpy(), "attempt": sel["attempt"].to_numpy(),
            "time": pd.Series(time).astype(_TIME_DTYPE).array,
            "kind": kind, "step": pd.array(np.asarray(step, dtype=object) if not isinstance(step, type(pd.NA))
                                           else [pd.NA] * len(sel), dtype="Int64"),
            "duration_s": np.asarray(dur, dtype="float64") if np.ndim(dur) else np.full(len(sel), dur)}))

    r = rec
    js = r[r["rtype"] == "job_start"]
    add(js, "gang_complete", js["time"])
    je = r[r["rtype"] == "job_end"]
    add(je, "release", je["time"])
    for rtype in _PHASE_KEYS.values():
        sel = r[r["rtype"] == rtype]
        add(sel, rtype, sel["time"])
    sv = r[r["rtype"] == "save"]
    if not sv.empty:
        add(sv, "checkpoint_begin", sv["time"], sv["step"].to_numpy(), sv["dur"].astype("float64").to_numpy())
        commit_t = _posix_s_to_utc(sv["t"].astype("float64").to_numpy()
                                   + sv["dur"].astype("float64").to_numpy())
        add(sv, "checkpoint_commit", commit_t, sv["step"].to_numpy())
        asyn = sv[sv["sync"].map(lambda v: v is not True).to_numpy(dtype=bool)]
        if not asyn.empty:
            _flag(books, asyn, "asynchronous_commit",
                  [f"asynchronous save of step {s}: the log has no commit time; commit placed at the end "
                   "of the blocking section" for s in asyn["step"]])
        pre = sv[sv["preempt_t"].notna()]
        add(pre, "preempt", _posix_s_to_utc(pre["preempt_t"].astype("float64").to_numpy()),
            pre["step"].to_numpy())
    rs = r[r["rtype"] == "restore"]
    add(rs, "restore", rs["time"], rs["step"].to_numpy(), rs["dur"].astype("float64").to_numpy())
    cu = r[r["rtype"] == "custom"]
    if not cu.empty:
        is_eval = cu["label"].astype("str").str.upper().str.contains("EVAL").to_numpy()
        dur = (cu["t2"].astype("float64") - cu["t"].astype("float64")).to_numpy()
        ev, other = cu[is_eval], cu[~is_eval]
        add(ev, "eval_begin", ev["time"])
        add(ev, "eval_end", _posix_s_to_utc(ev["t2"].astype("float64").to_numpy()), pd.NA, dur[is_eval])
        add(other, ("custom_badput:" + other["label"].astype("str").str.lower()).to_numpy(), other["time"],
            pd.NA, dur[~is_eval])
    ew = r[r["rtype"] == "elastic_wait"]
    add(ew, ("elastic_wait:" + ew["label"].astype("str").str.lower()).to_numpy(), ew["time"], pd.NA,
        (ew["t2"].astype("float64") - ew["t"].astype("float64")).to_numpy())
    er = r[r["rtype"] == "elastic_reinit"]
    add(er, "elastic_reinit", er["time"], pd.NA,
        (er["t2"].astype("float64") - er["t"].astype("float64")).to_numpy())
    return _concat(parts)


def _mlgoodput_steps(rec: pd.DataFrame, events: pd.DataFrame, books: Mapping[str, _RowBook]) -> pd.DataFrame:
    s = rec[rec["rtype"] == "step"].sort_values(["job_id", "attempt", "time", "_row"], kind="stable")
    if s.empty:
        return pd.DataFrame()
    s = s[["_file", "_row", "job_id", "attempt", "_segment", "step", "time"]].rename(
        columns={"time": "start"})
    s["step"] = s["step"].astype("int64")
    s["start"] = s["start"].astype(_TIME_DTYPE)
    s["_next"] = s.groupby(["job_id", "attempt", "_segment"], sort=False)["start"].shift(-1)
    # nothing that happens after the next segment began (a silent restart) can end a step before it
    seg_first = s.groupby(["job_id", "attempt", "_segment"], as_index=False, sort=False)["start"].min()
    seg_first["_limit"] = seg_first.groupby(["job_id", "attempt"], sort=False)["start"].shift(-1)
    s = s.merge(seg_first[["job_id", "attempt", "_segment", "_limit"]], on=["job_id", "attempt", "_segment"],
                how="left")
    pause_kinds = ["checkpoint_begin", "eval_begin", "preempt", "elastic_reinit"]
    if events.empty:
        pauses = pd.DataFrame(columns=["job_id", "attempt", "time"])
    else:
        is_pause = events["kind"].isin(pause_kinds) | events["kind"].str.startswith(AUXILIARY_KIND_PREFIXES)
        pauses = events.loc[is_pause, ["job_id", "attempt", "time"]].sort_values("time")
    ends = (events.loc[events["kind"] == "release", ["job_id", "attempt", "time"]]
            if not events.empty else pauses)
    s = s.sort_values("start", kind="stable")
    if not pauses.empty:
        p = pauses.rename(columns={"time": "_pause"}).copy()
        p["_pause"] = p["_pause"].astype(_TIME_DTYPE)
        p["_key"] = p["_pause"]
        s = pd.merge_asof(s, p.sort_values("_key"), left_on="start", right_on="_key",
                          by=["job_id", "attempt"], direction="forward", allow_exact_matches=False)
        s = s.drop(columns="_key")
    else:
        s["_pause"] = pd.Series(pd.NaT, index=s.index, dtype=_TIME_DTYPE)
    if not ends.empty:
        e = ends.groupby(["job_id", "attempt"], as_index=False)["time"].min().rename(
            columns={"time": "_release"})
        s = s.merge(e, on=["job_id", "attempt"], how="left")
    else:
        s["_release"] = pd.Series(pd.NaT, index=s.index, dtype=_TIME_DTYPE)
    limit = s["_limit"].astype(_TIME_DTYPE)
    pause = s["_pause"].astype(_TIME_DTYPE)
    release = s["_release"].astype(_TIME_DTYPE).where(s["_release"] > s["start"])
    cand = pd.concat([s["_next"].astype(_TIME_DTYPE), pause.where(limit.isna() | (pause < limit)),
                      release.where(limit.isna() | (release < limit))], axis=1)
    s["end"] = cand.min(axis=1).astype(_TIME_DTYPE)
    open_ = s["end"].isna().to_numpy()
    if open_.any():
        o = s[open_]
        _reject(books, o, "step_count",
                [f"step {st} started at {_fmt_time(t)} but attempt {a} recorded no later step, pause or "
                 "job_end_time before it stopped: the step did not finish"
                 for st, t, a in zip(o["step"], o["start"], o["attempt"], strict=True)])
        s = s[~open_]
    s["input_wait_s"] = 0.0
    if not events.empty and not s.empty:
        loads = _pair_begin_end(events, "data_loading_begin", "data_loading_end", books)
        if not loads.empty:
            s = s.sort_values("start", kind="stable").reset_index(drop=True)
            lo = loads.sort_values("start").copy()
            lo["start"] = lo["start"].astype(_TIME_DTYPE)
            lo["end"] = lo["end"].astype(_TIME_DTYPE)
            right = s[["job_id", "attempt", "start", "end"]].assign(_i=np.arange(len(s))).rename(
                columns={"start": "_s", "end": "_e"})
            m = pd.merge_asof(lo, right, left_on="start", right_on="_s", by=["job_id", "attempt"],
                              direction="backward")
            m = m[m["_i"].notna()]
            if not m.empty:
                lo_ns = np.maximum(_ns(m["start"]), _ns(m["_s"]))
                hi_ns = np.minimum(_ns(m["end"]), _ns(m["_e"]))
                ov = np.clip(hi_ns - lo_ns, 0, None) / _NS_PER_S
                add = pd.Series(ov).groupby(m["_i"].astype("int64").to_numpy()).sum()
                s.loc[add.index, "input_wait_s"] = add.to_numpy()
    return s[["_file", "_row", "job_id", "attempt", "step", "start", "end", "input_wait_s"]]


def _derived_events(steps: pd.DataFrame, events: pd.DataFrame, rec: pd.DataFrame,
                    books: Mapping[str, _RowBook]) -> pd.DataFrame:
    """first_step per attempt, and a failure for each attempt that died without a record."""
    parts = []
    if not steps.empty:
        f = steps.sort_values("start", kind="stable").groupby(["job_id", "attempt"], as_index=False).first()
        parts.append(pd.DataFrame({"_file": f["_file"], "_row": f["_row"], "job_id": f["job_id"],
                                   "attempt": f["attempt"], "time": f["start"].astype(_TIME_DTYPE),
                                   "kind": "first_step", "step": pd.array(f["step"], dtype="Int64"),
                                   "duration_s": np.nan}))
    if events.empty:
        return _concat(parts)
    # attempts followed by another attempt that ended with neither job_end nor a preemption
    times = pd.concat([events[["job_id", "attempt", "time", "_file", "_row"]],
                       steps.rename(columns={"end": "time"})[["job_id", "attempt", "time", "_file", "_row"]]
                       if not steps.empty else None], ignore_index=True)
    times["time"] = times["time"].astype(_TIME_DTYPE)
    last = times.sort_values("time", kind="stable").groupby(["job_id", "attempt"], as_index=False).last()
    max_attempt = last.groupby("job_id")["attempt"].transform("max")
    ended = events[events["kind"].isin(["release", "preempt", "failure"])].groupby(
        ["job_id", "attempt"]).size()
    has_end = pd.MultiIndex.from_frame(last[["job_id", "attempt"]]).isin(ended.index)
    dead = last[(last["attempt"] < max_attempt).to_numpy() & ~has_end]
    if not dead.empty:
        starts = events[events["kind"] == "gang_complete"][["job_id", "attempt", "_file", "_row", "time"]]
        starts = starts.rename(columns={"time": "_next_gang"})
        nxt = dead.assign(attempt=dead["attempt"] + 1)[["job_id", "attempt"]].merge(
            starts, on=["job_id", "attempt"], how="left")
        where = dead[["_file", "_row"]].reset_index(drop=True)
        has_next = nxt["_row"].notna().to_numpy()
        where.loc[has_next, "_file"] = nxt.loc[has_next, "_file"].to_numpy()
        where.loc[has_next, "_row"] = nxt.loc[has_next, "_row"].astype("int64").to_numpy()
        _flag(books, where.assign(job_id=dead["job_id"].to_numpy(), attempt=dead["attempt"].to_numpy(),
                                  time=dead["time"].to_numpy()),
              "failure_time_inferred", [f"attempt {a} of job {j!r} ended with no job_end_time: a failure is "
                                   f"assumed at its last record, {_fmt_time(t)} (the format records no "
                                   "failure time; this is a lower bound)" for a, j, t in
                                   zip(dead["attempt"], dead["job_id"], dead["time"], strict=True)], "time")
        parts.append(pd.DataFrame({"_file": dead["_file"].to_numpy(), "_row": dead["_row"].to_numpy(),
                                   "job_id": dead["job_id"].to_numpy(), "attempt": dead["attempt"].to_numpy(),
                                   "time": dead["time"].astype(_TIME_DTYPE).array, "kind": "failure",
                                   "step": pd.array([pd.NA] * len(dead), dtype="Int64"),
                                   "duration_s": np.nan}))
        # the format's held time runs from job start to job end across restarts (its "total time"):
        # the dead attempt holds its resources until the next job start
        rel = nxt[has_next]
        if not rel.empty:
            d = dead[has_next]
            w = where[has_next].assign(job_id=d["job_id"].to_numpy(), attempt=d["attempt"].to_numpy(),
                                       time=rel["_next_gang"].to_numpy())
            _flag(books, w, "release_inferred",
                  [f"attempt {a} of job {j!r}: release placed at the next job_start_time, as the format "
                   "counts the outage as held time" for a, j in zip(d["attempt"], d["job_id"], strict=True)],
                  "time")
            parts.append(pd.DataFrame({"_file": d["_file"].to_numpy(), "_row": d["_row"].to_numpy(),
                                       "job_id": d["job_id"].to_numpy(), "attempt": d["attempt"].to_numpy(),
                                       "time": rel["_next_gang"].astype(_TIME_DTYPE).array, "kind": "release",
                                       "step": pd.array([pd.NA] * len(d), dtype="Int64"),
                                       "duration_s": np.nan}))
    last_attempts = last[(last["attempt"] == max_attempt).to_numpy() & ~has_end]
    if not last_attempts.empty:
        _flag(books, last_attempts, "no_job_end",
              [f"attempt {a} of job {j!r} has no job_end_time: the job is still "
               "running or stopped without a record" for a, j in
               zip(last_attempts["attempt"], last_attempts["job_id"], strict=True)])
    return _concat(parts)


# ---------------------------------------------------------------------------------------------------
# Generic canonical CSV / Parquet
# ---------------------------------------------------------------------------------------------------


def _load_table(path: Path) -> tuple[pd.DataFrame, np.ndarray, bool]:
    """Read a CSV (all text) or Parquet file; return the frame, its row numbers and truncation."""
    if not path.exists():
        raise InputError("file not found", file=str(path))
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            df = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise InputError(f"not a readable Parquet file ({exc})", file=str(path)) from exc
        rows = np.arange(1, len(df) + 1, dtype=np.int64)
        truncated = False
    else:
        raw = path.read_bytes()
        truncated = bool(raw) and not raw.endswith(b"\n")
        try:
            df = pd.read_csv(io.BytesIO(raw), dtype=str, skip_blank_lines=False, keep_default_na=False,
                             na_values=[""])
        except pd.errors.EmptyDataError as exc:
            raise InputError("empty file: no header row", file=str(path), row=1) from exc
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InputError(f"not a well-formed CSV file ({exc})", file=str(path)) from exc
        rows = np.arange(2, len(df) + 2, dtype=np.int64)
    df.columns = [str(c).strip().lower() for c in df.columns]
    return df.reset_index(drop=True), rows, truncated


def _apply_aliases(df: pd.DataFrame, aliases: Mapping[str, Sequence[str]], file: str) -> pd.DataFrame:
    """Rename alias columns to canonical names; convert unit-suffixed columns."""
    rename = {}
    for canon, alts in aliases.items():
        present = [c for c in (canon, *alts) if c in df.columns]
        if len(present) > 1:
            raise InputError(f"columns {present} all name {canon!r}: keep one", file=file, row=1, field=canon)
        if present and present[0] != canon:
            rename[present[0]] = canon
    df = df.rename(columns=rename)
    for canon in ("start", "end", "time"):
        if canon in aliases and canon not in df.columns:
            for unit, scale in (("unix_s", 1.0), ("unix_ms", 1e-3)):
                col = f"{canon}_{unit}"
                if col in df.columns:
                    secs = pd.to_numeric(df[col], errors="coerce") * scale
                    df[canon] = _posix_s_to_utc(secs)
                    df[canon] = df[canon].where(secs.notna(), pd.NaT)
                    df = df.drop(columns=col)
                    break
    for canon in ("input_wait_s", "duration_s"):
        if canon not in aliases or canon in df.columns:
            continue
        ms_names = [n[:-2] + "_ms" for n in (canon, *aliases[canon]) if n.endswith("_s")]
        present = [n for n in ms_names if n in df.columns]
        if len(present) > 1:
            raise InputError(f"columns {present} all name {canon!r}: keep one", file=file, row=1, field=canon)
        if present:
            ms = present[0]
            df[canon] = pd.to_numeric(df[ms], errors="coerce") / 1000.0
            df[canon] = df[canon].where(df[ms].notna(), np.nan)
            df = df.drop(columns=ms)
    return df


def _text_column(values: pd.Series) -> pd.Series:
    """Strip text values (missing stays missing); the work is done once per distinct value."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    stripped = pd.array(pd.Series(uniques, dtype="object").astype("str").str.strip(), dtype="str")
    out = pd.Series(stripped.take(np.where(codes < 0, 0, codes)) if len(stripped) else
                    pd.array([None] * len(values), dtype="str"), index=values.index)
    return out.where(codes >= 0, None)


def _steps_from_frame(df: pd.DataFrame, base: pd.DataFrame, books: Mapping[str, _RowBook], tz: str | None,
                      job_default: str | None) -> pd.DataFrame:
    file = str(base["_file"].iloc[0]) if len(base) else ""
    for col in ("step", "start", "end"):
        if col not in df.columns:
            raise InputError(f"a steps table needs column {col!r} (or an alias: {STEP_ALIASES[col]})",
                             file=file, row=1, field=col)
    out = base.copy()
    out["job_id"] = _job_column(df, base, books, job_default, file)
    out["attempt"] = _int_column(df["attempt"], frame=base, books=books, field="attempt", required=True) \
        if "attempt" in df.columns else _na_ints(len(df))
    out["step"] = _int_column(df["step"], frame=base, books=books, field="step", required=True)
    out["start"] = _parse_times(df["start"], frame=base, books=books, field="start", tz=tz).array
    out["end"] = _parse_times(df["end"], frame=base, books=books, field="end", tz=tz).array
    out["start"] = out["start"].astype(_TIME_DTYPE)
    out["end"] = out["end"].astype(_TIME_DTYPE)
    if "input_wait_s" in df.columns:
        w = _float_column(df["input_wait_s"], frame=base, books=books, field="input_wait_s", minimum=0.0)
        blank = w.isna().to_numpy() & df["input_wait_s"].isna().to_numpy()
        if blank.any():
            _repair(books, base[blank], "input_wait_s", "blank input_wait_s taken as 0 (no wait measured)")
        out["input_wait_s"] = w.fillna(0.0).to_numpy()
    else:
        out["input_wait_s"] = 0.0  # the column is optional: no measured wait
    out["_has_attempt"] = "attempt" in df.columns
    return out


def _job_column(df: pd.DataFrame, base: pd.DataFrame, books: Mapping[str, _RowBook], job_default: str | None,
                file: str) -> np.ndarray:
    if "job_id" not in df.columns:
        if job_default is None:
            raise InputError("no job_id column (or alias) and no job_id= default", file=file, row=1,
                             field="job_id")
        return pd.array(np.full(len(df), job_default, dtype=object), dtype="str")
    jobs = _text_column(df["job_id"])
    missing = jobs.isna() | (jobs == "")
    if missing.any():
        if job_default is not None:
            _repair(books, base[missing.to_numpy()], "job_id",
                    f"blank job_id taken as job_id={job_default!r}")
            jobs = jobs.where(~missing, job_default)
        else:
            _reject(books, base[missing.to_numpy()], "job_id", "missing job_id")
    return jobs.array


def _events_from_frame(df: pd.DataFrame, base: pd.DataFrame, books: Mapping[str, _RowBook], tz: str | None,
                       job_default: str | None) -> pd.DataFrame:
    file = str(base["_file"].iloc[0]) if len(base) else ""
    for col in ("time", "kind"):
        if col not in df.columns:
            raise InputError(f"an events table needs column {col!r} (or an alias: {EVENT_ALIASES[col]})",
                             file=file, row=1, field=col)
    out = base.copy()
    out["job_id"] = _job_column(df, base, books, job_default, file)
    out["attempt"] = _int_column(df["attempt"], frame=base, books=books, field="attempt", required=True) \
        if "attempt" in df.columns else _na_ints(len(df))
    out["time"] = _parse_times(df["time"], frame=base, books=books, field="time", tz=tz).array
    out["time"] = out["time"].astype(_TIME_DTYPE)
    raw = _text_column(df["kind"])
    missing = (raw.isna() | (raw == "")).to_numpy()
    if missing.any():
        _reject(books, base[missing], "kind", "missing kind")
    norm = raw.fillna("").str.lower().str.replace(r"[\s\-]+", "_", regex=True)
    changed = ~missing & (norm != raw.fillna("")).to_numpy()
    if changed.any():
        _repair(books, base[changed], "kind", [f"kind {a!r} normalised to {b!r}" for a, b in
                                               zip(raw[changed], norm[changed], strict=True)])
    out["kind"] = norm.to_numpy(dtype=object)
    out["step"] = _int_column(df["step"], frame=base, books=books, field="step", required=False) \
        if "step" in df.columns else _na_ints(len(df))
    out["duration_s"] = (
        _float_column(df["duration_s"], frame=base, books=books, field="duration_s").to_numpy()
        if "duration_s" in df.columns else np.nan)
    out["_has_attempt"] = "attempt" in df.columns
    return out


def _assign_missing_attempts(steps: pd.DataFrame, events: pd.DataFrame, books: Mapping[str, _RowBook],
                             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fill the attempt of rows from files without an attempt column, from gang_complete markers.

    A row belongs to the attempt of the last ``gang_complete`` of its job at or before it (0 before
    the first).  Where a job has no markers, a step number that repeats is flagged as a restart the
    partition will have to infer; the attempt stays 0.
    """
    need_s = (not steps.empty) and steps["attempt"].isna().any()
    need_e = (not events.empty) and events["attempt"].isna().any()
    if not (need_s or need_e):
        return steps, events
    markers = events.loc[events["kind"] == "gang_complete", ["job_id", "time"]] if not events.empty else \
        pd.DataFrame(columns=["job_id", "time"])
    if need_s:
        m = steps["attempt"].isna().to_numpy()
        sub = steps.loc[m, ["job_id", "start"]].rename(columns={"start": "time"})
        steps.loc[m, "attempt"] = _attempts_from_bounds(sub, markers)
        s = steps[m & ~steps["job_id"].isin(set(markers["job_id"])).to_numpy()].sort_values(
            ["job_id", "start", "_row"], kind="stable")
        prev = s.groupby("job_id", sort=False)["step"].shift(1)
        repeat = (s["step"] <= prev).fillna(False).to_numpy(dtype=bool)
        if repeat.any():
            r = s[repeat]
            _flag(books, r, "restart_inferred_from_step_numbers",
                  [f"step {a} follows step {int(b)} with no attempt column or gang_complete marker: a "
                   "restart is assumed here (fallback from repeated step numbers)"
                   for a, b in zip(r["step"], prev[repeat], strict=True)], "start")
    if need_e:
        m = events["attempt"].isna().to_numpy()
        events.loc[m, "attempt"] = _attempts_from_bounds(events.loc[m, ["job_id", "time"]], markers)
    return steps, events


def read_canonical(paths: PathLike | Sequence[PathLike], *, tz: str | None = None,
                   job_id: str | None = None) -> tuple[TimelineTables, TimelineLedger]:
    """Read canonical steps and/or events from CSV or Parquet files.

    A file is a steps table when it has ``start`` and ``end`` columns, an events table when it has
    ``time`` and ``kind``, and a combined table when it has a ``record`` column whose rows say
    ``step`` or ``event`` (the form :func:`write_canonical` writes).  Column names are matched case-
    insensitively, with the aliases in :data:`STEP_ALIASES` and :data:`EVENT_ALIASES`; times may also
    come as ``<col>_unix_s`` / ``<col>_unix_ms`` numbers, and ``input_wait_ms`` / ``duration_ms`` are
    converted to seconds.  Optional columns: ``attempt`` (when absent, attempts follow the
    ``gang_complete`` events; in a job with none of them a repeated step number is flagged as an
    inferred restart), ``input_wait_s`` (absent means no wait was measured: 0),
    ``step`` and ``duration_s`` of events.

    Times must carry a zone (an offset or ``Z``, or a zone-aware Parquet column).  With ``tz=``
    naive times are localised to that zone as a named repair.  Without it, a column that is naive
    throughout raises :class:`InputError`, and naive rows among zone-aware ones (mixed zones) are
    rejected.

    Checks: a step must end after it starts; its input wait must fit in it; duplicate records of one
    (job, attempt, step) are rejected (identical copies after the first; all of them when they
    disagree); overlapping steps of one attempt are rejected; rows out of time order are repaired
    into order; identical events are rejected after the first; unknown event kinds are kept and
    flagged; restores to steps no ``checkpoint_commit`` recorded, and failures no restart followed,
    are flagged.

    Parameters
    ----------
    paths
        One path or several (steps and events may be in separate files).
    tz
        IANA zone (``"Europe/Paris"``) or fixed offset naive times were written in.
    job_id
        Job id for files without a ``job_id`` column.

    Returns
    -------
    tuple of (TimelineTables, TimelineLedger)
        The canonical tables and the ledger over every data row.
    """
    books: dict[str, _RowBook] = {}
    steps_parts, event_parts = [], []
    for path in _as_paths(paths):
        df, rows, truncated = _load_table(path)
        file = str(path)
        books[file] = _RowBook(file, rows, truncated=truncated)
        base = pd.DataFrame({"_file": _file_column(file, len(rows)), "_row": rows})
        if df.empty:
            continue
        blank = df.isna().all(axis=1).to_numpy()
        if blank.any():
            _reject(books, base[blank], None, "blank line")
        if "record" in df.columns:
            rec = _text_column(df["record"]).str.lower()
            is_s = (rec == "step").to_numpy()
            is_e = (rec == "event").to_numpy()
            other = ~is_s & ~is_e & ~blank
            if other.any():
                _reject(books, base[other], "record", "record must be 'step' or 'event'")
            parts = [(is_s & ~blank, "steps"), (is_e & ~blank, "events")]
        else:
            cols = set(df.columns)
            has_s = any(a in cols for a in ("start", *STEP_ALIASES["start"], "start_unix_s", "start_unix_ms"))
            has_e = any(a in cols for a in ("kind", *EVENT_ALIASES["kind"]))
            if has_s == has_e:
                raise InputError(f"cannot tell a steps table (start, end, ...) from an events table (time, "
                                 f"kind, ...) by its columns {sorted(cols)}; a combined table needs a "
                                 "'record' column", file=file, row=1)
            parts = [(~blank, "steps" if has_s else "events")]
        for mask, what in parts:
            if not mask.any():
                continue
            sub = df[mask].reset_index(drop=True)
            sub_base = base[mask].reset_index(drop=True)
            if what == "steps":
                sub = _apply_aliases(sub, STEP_ALIASES, file)
                steps_parts.append(_steps_from_frame(sub, sub_base, books, tz, job_id))
            else:
                sub = _apply_aliases(sub, EVENT_ALIASES, file)
                event_parts.append(_events_from_frame(sub, sub_base, books, tz, job_id))
    steps = _drop_rejected(_concat(steps_parts), books)
    events = _drop_rejected(_concat(event_parts), books)
    steps, events = _assign_missing_attempts(steps, events, books)
    if not steps.empty:
        steps = _check_steps(steps, books, reorder_is_repair=True)
    if not events.empty:
        events = _check_events(events, books, reorder_is_repair=True)
    _cross_checks(steps if not steps.empty else pd.DataFrame(columns=["job_id", "attempt"]), events, books)
    ledger = _close(books)
    return TimelineTables(_finalise_steps(steps), _finalise_events(events)), ledger


def write_canonical(tables: TimelineTables, path: PathLike) -> Path:
    """Write steps and events to one combined file that :func:`read_canonical` reads back.

    The combined form has a ``record`` column (``step`` or ``event``) and the union of the canonical
    columns; times are written zone-aware (UTC).  A ``.parquet`` suffix writes Parquet, anything else
    CSV with ISO 8601 times.

    Parameters
    ----------
    tables
        The tables to write.
    path
        Destination file.

    Returns
    -------
    Path
        The path written.
    """
    path = Path(path)
    s = tables.steps[list(STEP_COLUMNS)].assign(record="step")
    e = tables.events[list(EVENT_COLUMNS)].assign(record="event")
    cols = ["record", "job_id", "attempt", "step", "start", "end", "input_wait_s", "time", "kind",
            "duration_s"]
    both = pd.concat([s, e], ignore_index=True).reindex(columns=cols)
    both["step"] = both["step"].astype("Int64")
    for col in ("start", "end", "time"):
        both[col] = both[col].astype(_TIME_DTYPE)
    if path.suffix.lower() in (".parquet", ".pq"):
        both.to_parquet(path, index=False)
    else:
        out = both.copy()
        for col in ("start", "end", "time"):
            out[col] = out[col].map(lambda t: "" if pd.isna(t) else t.isoformat())  # small files only
        out.to_csv(path, index=False)
    return path


# ---------------------------------------------------------------------------------------------------
# BLOOM-176B hand-transcribed event table
# ---------------------------------------------------------------------------------------------------

#: Columns of ``data/timelines/bloom_176b_events.csv``.
_BLOOM_COLUMNS = ("job_id", "attempt", "date", "time_of_day", "tz", "kind", "step", "duration_s",
                  "lost_work_s", "source", "note")


def read_bloom_events(path: PathLike | None = None) -> tuple[TimelineTables, TimelineLedger]:
    """Read the hand-transcribed BLOOM-176B event table (a real case study) into canonical events.

    The table (``data/timelines/bloom_176b_events.csv``, transcribed from the BigScience training
    chronicle) has one row per event with its ``date``, the ``time_of_day`` where the chronicle states
    one, the zone it was stated in (``tz``), a canonical or descriptive ``kind``, ``step``,
    ``duration_s``, ``lost_work_s`` (work the chronicle says was lost), ``source`` (the chronicle
    section heading) and ``note``.  ``attempt`` counts the restarts the chronicle states; restarts
    it does not mention are not counted, so it is a lower bound.

    A row with a date but no time of day is placed at 12:00 local time (a named repair, within 12 h
    of the truth); ``time_precision`` says ``"day"`` for those and ``"second"`` for the others.
    Descriptive kinds (``config_change``, ``slowdown``, ...) are kept and flagged.

    Parameters
    ----------
    path
        The CSV (default: the bundled copy).

    Returns
    -------
    tuple of (TimelineTables, TimelineLedger)
        No steps; events with the canonical columns followed by ``lost_work_s, time_precision,
        source, note``.
    """
    path = Path(path) if path is not None else bundled_path("bloom_176b_events.csv")
    df, rows, truncated = _load_table(path)
    file = str(path)
    books = {file: _RowBook(file, rows, truncated=truncated)}
    missing = [c for c in _BLOOM_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"the BLOOM event table lacks columns {missing}", file=file, row=1, field=missing[0])
    if df.empty:
        return TimelineTables.empty(), _close(books)
    base = pd.DataFrame({"_file": file, "_row": rows})
    date = _text_column(df["date"])
    tod = _text_column(df["time_of_day"])
    tz = _text_column(df["tz"])
    no_tz = (tz.isna() | (tz == "")).to_numpy()
    if no_tz.any():
        _reject(books, base[no_tz], "tz", "missing tz: the zone the chronicle stated the time in")
    day_only = (tod.isna() | (tod == "")).to_numpy()
    local_text = date.fillna("") + "T" + tod.where(~day_only, "12:00:00").fillna("12:00:00")
    naive = pd.to_datetime(local_text, format="ISO8601", errors="coerce")
    bad = naive.isna().to_numpy() & ~no_tz
    if bad.any():
        _reject(books, base[bad], "date", "date/time_of_day is not an ISO 8601 date and time")
    utc = pd.Series(pd.NaT, index=range(len(df)), dtype=_TIME_DTYPE)
    ok = ~bad & ~no_tz
    for zone in pd.unique(tz[ok]):  # a handful of zones
        m = ok & (tz == zone).to_numpy()
        try:
            loc = naive[m].dt.tz_localize(zone, ambiguous="NaT", nonexistent="NaT")
        except Exception as exc:
            raise InputError(f"tz {zone!r} is not a time zone", file=file, row=int(rows[np.argmax(m)]),
                             field="tz") from exc
        utc[m] = loc.dt.tz_convert("UTC").astype(_TIME_DTYPE).to_numpy()
    nat = utc.isna().to_numpy() & ok
    if nat.any():
        _reject(books, base[nat], "time_of_day", "local time does not exist or is ambiguous in its zone")
    placed = day_only & ok & ~nat
    if placed.any():
        _repair(books, base[placed], "time_of_day",
                [f"no time of day stated: placed at 12:00 {z}" for z in tz[placed]])
    attempt = _int_column(df["attempt"], frame=base, books=books, field="attempt", required=True)
    events = base.assign(
        job_id=_job_column(df, base, books, None, file), attempt=attempt, time=utc,
        kind=_text_column(df["kind"]).str.lower().to_numpy(dtype=object),
        step=_int_column(df["step"], frame=base, books=books, field="step", required=False),
        duration_s=_float_column(df["duration_s"], frame=base, books=books, field="duration_s").to_numpy(),
        lost_work_s=_float_column(df["lost_work_s"], frame=base, books=books, field="lost_work_s").to_numpy(),
        time_precision=np.where(day_only, "day", "second"),
        source=_text_column(df["source"]).to_numpy(dtype=object),
        note=_text_column(df["note"]).to_numpy(dtype=object),
    )
    no_kind = events["kind"].isna().to_numpy()
    if no_kind.any():
        _reject(books, base[no_kind], "kind", "missing kind")
    events = _check_events(events, books, reorder_is_repair=True)
    _cross_checks(pd.DataFrame(columns=["job_id", "attempt"]), events, books)
    ledger = _close(books)
    extra = ("lost_work_s", "time_precision", "source", "note")
    return TimelineTables(empty_steps(), _finalise_events(events, extra)), ledger


# ---------------------------------------------------------------------------------------------------
# Serving replica lifecycle
# ---------------------------------------------------------------------------------------------------

_REPLICA_ALIASES: dict[str, tuple[str, ...]] = {
    "time": ("timestamp", "ts", "at", "event_time"),
    "replica_id": ("replica", "instance", "instance_id", "pod"),
    "phase": ("state", "event", "status", "transition"),
}


def read_replica_lifecycle(paths: PathLike | Sequence[PathLike], *, tz: str | None = None,
                           end: Any = None) -> tuple[pd.DataFrame, TimelineLedger]:
    """Read a serving replica lifecycle log into a table of phases.

    The log (CSV or Parquet) has one row per transition: ``time``, ``replica_id`` and ``phase`` (the
    phase the replica enters; :data:`REPLICA_PHASES`, synonyms in :data:`REPLICA_PHASE_ALIASES`).  A
    replica moves forward only -- placed -> loading -> warmup -> ready -> draining -> released, where
    any phase after ``placed`` may be skipped; a row that repeats a phase or moves back is rejected,
    and so are all rows of a replica with no ``placed`` row (its held time has no start).  Rows out of
    time order are repaired into order.  A replica with no ``released`` row is closed at ``end``
    (or, without it, at the log's last timestamp) as a named repair on its last row.

    Parameters
    ----------
    paths
        One path or several.
    tz
        Zone naive times were written in (as in :func:`read_canonical`).
    end
        Time that closes replicas still open at the end of the log (zone-aware).

    Returns
    -------
    tuple of (pandas.DataFrame, TimelineLedger)
        Phases ``replica_id, phase, start, end, duration_s`` (one row per phase entered before
        release, contiguous per replica) and the ledger.
    """
    books: dict[str, _RowBook] = {}
    parts = []
    for path in _as_paths(paths):
        df, rows, truncated = _load_table(path)
        file = str(path)
        books[file] = _RowBook(file, rows, truncated=truncated)
        if df.empty:
            continue
        df = _apply_aliases(df, _REPLICA_ALIASES, file)
        for col in ("time", "replica_id", "phase"):
            if col not in df.columns:
                raise InputError(f"a replica lifecycle log needs column {col!r}", file=file, row=1, field=col)
        base = pd.DataFrame({"_file": file, "_row": rows})
        blank = df.isna().all(axis=1).to_numpy()
        if blank.any():
            _reject(books, base[blank], None, "blank line")
        rid = _text_column(df["replica_id"])
        no_id = (rid.isna() | (rid == "")).to_numpy() & ~blank
        if no_id.any():
            _reject(books, base[no_id], "replica_id", "missing replica_id")
        raw = _text_column(df["phase"]).fillna("").str.lower().str.replace(" ", "_")
        phase = raw.map(lambda v: REPLICA_PHASE_ALIASES.get(v, v))  # vocabulary lookup
        unknown = ~phase.isin(REPLICA_PHASES).to_numpy() & ~blank
        if unknown.any():
            _reject(books, base[unknown], "phase", [f"unknown phase {p!r}; expected one of {REPLICA_PHASES}"
                                                    for p in df["phase"][unknown]])
        t = _parse_times(df["time"], frame=base, books=books, field="time", tz=tz)
        parts.append(base.assign(replica_id=rid.to_numpy(dtype=object), phase=phase.to_numpy(dtype=object),
                                 time=t.to_numpy()))
    cols = ["replica_id", "phase", "start", "end", "duration_s"]
    tr = _drop_rejected(_concat(parts), books)
    if tr.empty:
        return _empty_phases(cols), _close(books)
    tr["time"] = tr["time"].astype(_TIME_DTYPE)
    tr["_idx"] = tr["phase"].map({p: i for i, p in enumerate(REPLICA_PHASES)}).astype("int64")
    late = _out_of_order(tr, ["replica_id"], "time")
    if late.any():
        _repair(books, tr[late], "time", "listed out of time order: moved into time order")
    tr = tr.sort_values(["replica_id", "time", "_idx"], kind="stable").reset_index(drop=True)
    seen = tr.groupby("replica_id", sort=False)["_idx"].cummax()
    prev_max = seen.groupby(tr["replica_id"], sort=False).shift(1)
    back = (tr["_idx"] <= prev_max).fillna(False).to_numpy(dtype=bool)
    if back.any():
        b = tr[back]
        _reject(books, b, "phase", [f"phase {p!r} after {REPLICA_PHASES[int(q)]!r}: a replica's phases "
                                    "only move forward"
                                    for p, q in zip(b["phase"], prev_max[back], strict=True)])
    tr = tr[~back]
    first_phase = tr.groupby("replica_id")["phase"].transform("first")
    unplaced = (first_phase != "placed").to_numpy()
    if unplaced.any():
        _reject(books, tr[unplaced], "phase", "the replica has no 'placed' row before this one: its held "
                                              "time has no start")
        tr = tr[~unplaced]
    if tr.empty:
        return _empty_phases(cols), _close(books)
    tr = tr.reset_index(drop=True)
    tr["end"] = tr.groupby("replica_id", sort=False)["time"].shift(-1)
    done = set(tr.loc[tr["phase"] == "released", "replica_id"])
    released = tr["replica_id"].isin(done).to_numpy(dtype=bool)
    open_last = tr["end"].isna().to_numpy() & ~released
    if open_last.any():
        if end is not None:
            close_at = pd.Timestamp(end)
            if close_at.tzinfo is None:
                raise DomainError(f"end={end!r} must be timezone-aware")
            close_at = close_at.tz_convert("UTC")
            why = f"open at the end of the log: closed at end={close_at.isoformat()}"
        else:
            close_at = tr["time"].max()
            why = f"open at the end of the log: closed at its last timestamp {close_at.isoformat()}"
        o = tr[open_last]
        if (o["time"] > close_at).any():
            raise DomainError(f"end={close_at.isoformat()} is before the last transition of an open replica")
        _repair(books, o, "phase", why)
        tr.loc[open_last, "end"] = close_at
    phases = tr[tr["phase"] != "released"].copy()
    phases["start"] = phases["time"].astype(_TIME_DTYPE)
    phases["end"] = phases["end"].astype(_TIME_DTYPE)
    phases["duration_s"] = (_ns(phases["end"]) - _ns(phases["start"])) / _NS_PER_S
    ledger = _close(books)
    out = phases[cols].reset_index(drop=True)
    out["replica_id"] = out["replica_id"].astype("str")
    out["phase"] = out["phase"].astype("str")
    return out, ledger


def _empty_phases(cols: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({"replica_id": pd.Series([], dtype="str"), "phase": pd.Series([], dtype="str"),
                         "start": pd.Series([], dtype=_TIME_DTYPE), "end": pd.Series([], dtype=_TIME_DTYPE),
                         "duration_s": pd.Series([], dtype="float64")})[list(cols)]


@dataclass(frozen=True)
class ReplicaGoodput:
    """Runtime goodput of serving replicas: ready time over held time (held from placement).

    Attributes
    ----------
    held_s
        Held seconds inside the window (placement to release, summed over replicas).
    ready_s
        Seconds in ``ready``.
    terms
        Seconds in each phase (``placed, loading, warmup, ready, draining``): the partition of held.
    unattributed_s
        ``held_s`` minus the sum of the phases (zero up to rounding; shown, never clipped).
    runtime_goodput
        ``ready_s / held_s``, or None when nothing was held in the window.
    by_replica
        One row per replica: held, each phase, and its ready / held.
    window
        The window measured.
    """

    held_s: float
    ready_s: float
    terms: dict[str, float]
    unattributed_s: float
    runtime_goodput: float | None
    by_replica: pd.DataFrame
    window: Window

    def factor(self) -> Factor:
        """Return the result as a runtime :class:`~fleetlib.accounting.Factor` (losses = non-ready phases).

        Raises
        ------
        DomainError
            If nothing was held in the window (a factor needs a positive denominator).
        """
        if self.held_s <= 0.0:
            raise DomainError("no replica was held in the window: runtime goodput is undefined there")
        losses = {k: v for k, v in self.terms.items() if k != "ready"}
        return Factor(boundary="runtime", numerator=self.ready_s, denominator=self.held_s, window=self.window,
                      record="replica lifecycle log", convention="serving: ready / held, held from placement",
                      numerator_unit="replica-s", denominator_unit="replica-s", losses=losses)

    def to_dict(self) -> dict[str, Any]:
        """Return the totals as a JSON-ready dictionary."""
        return {"held_s": self.held_s, "ready_s": self.ready_s, "runtime_goodput": self.runtime_goodput,
                "terms": dict(self.terms), "unattributed_s": self.unattributed_s,
                "window": self.window.to_dict()}


def replica_runtime_goodput(phases: pd.DataFrame, *, window: Window | tuple[Any, Any] | None = None,
                            ) -> ReplicaGoodput:
    """Ready time over held time of serving replicas, with the phases as the partition of held time.

    Parameters
    ----------
    phases
        The table :func:`read_replica_lifecycle` returns.
    window
        A measured :class:`~fleetlib.accounting.Window` or a ``(start, end)`` pair of zone-aware times;
        phases are clipped to ``[start, end)``.  Default: from the first placement to the last end.

    Returns
    -------
    ReplicaGoodput
        Totals, the partition, and one row per replica.  A window in which nothing was held gives
        ``held_s == 0`` and ``runtime_goodput`` None, not an error.
    """
    missing = [c for c in ("replica_id", "phase", "start", "end") if c not in phases.columns]
    if missing:
        raise DomainError(f"phases lack columns {missing}; pass the table read_replica_lifecycle returns")
    bad_phase = ~phases["phase"].isin(REPLICA_PHASES[:-1])
    if bad_phase.any():
        raise DomainError(f"unknown phases {sorted(set(phases.loc[bad_phase, 'phase']))}")
    if window is None:
        if phases.empty:
            raise DomainError("no phases and no window: nothing to measure")
        window = Window.between(phases["start"].min(), phases["end"].max(), label="replica lifecycle log")
    elif not isinstance(window, Window):
        window = Window.between(*window)
    if window.start is None or window.end is None:
        raise DomainError("replica_runtime_goodput needs a measured window (start and end)")
    lo, hi = window.start.value, window.end.value
    s = np.clip(_ns(phases["start"]) if len(phases) else np.zeros(0, np.int64), lo, hi)
    e = np.clip(_ns(phases["end"]) if len(phases) else np.zeros(0, np.int64), lo, hi)
    dur = np.maximum(e - s, 0) / _NS_PER_S
    frame = pd.DataFrame({"replica_id": phases["replica_id"].to_numpy(), "phase": phases["phase"].to_numpy(),
                          "seconds": dur})
    names = list(REPLICA_PHASES[:-1])
    table = frame.pivot_table(index="replica_id", columns="phase", values="seconds", aggfunc="sum",
                              fill_value=0.0).reindex(columns=names, fill_value=0.0)
    table.columns.name = None
    table.insert(0, "held_s", table[names].sum(axis=1))
    table = table[table["held_s"] > 0.0]
    with np.errstate(invalid="ignore", divide="ignore"):
        table["runtime_goodput"] = table["ready"] / table["held_s"]
    terms = {p: float(frame.loc[frame["phase"] == p, "seconds"].sum()) for p in names}
    held = float(dur.sum())
    ready = terms["ready"]
    return ReplicaGoodput(held_s=held, ready_s=ready, terms=terms, unattributed_s=held - sum(terms.values()),
                          runtime_goodput=(ready / held) if held > 0.0 else None,
                          by_replica=table.reset_index(), window=window)

