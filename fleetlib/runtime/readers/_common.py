"""Shared parts of the runtime readers.

The canonical tables a reader returns, the row-book helpers, column parsing and the vectorised checks
every format runs on its steps and events.

Row numbers are counted as each format counts them: a CSV row is its line number (the header is
line 1), a Parquet row is its index + 1, a JSON-lines or log record is its line number.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import (
    current_limits,
    excerpt,
    out_of_range_int,
    read_bytes,
    time_range,
)
from fleetlib.accounting import Window
from fleetlib.quality import DomainError, InputError, Ledger, RowBook
from fleetlib.runtime.schema import (
    EVENT_COLUMNS,
    SIMULTANEOUS_EVENT_ORDER,
    STEP_COLUMNS,
    TIME_DTYPE,
    known_event_kinds,
)
from fleetlib.runtime.timeline import empty_events, empty_steps

PathLike = str | Path

# The vocabulary (column names and aliases, event kinds, replica phases) is fleetlib.runtime.schema's.
#: Order of simultaneous events (:data:`fleetlib.runtime.schema.SIMULTANEOUS_EVENT_ORDER`).
_KIND_RANK = SIMULTANEOUS_EVENT_ORDER
_ZONE_SUFFIX = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[zZ]|[+-]\d{2}(?::?\d{2})?)$"
_NAT = np.iinfo(np.int64).min
NS_PER_S = 1_000_000_000


# ---------------------------------------------------------------------------------------------------
# The pair of canonical tables a reader returns
# ---------------------------------------------------------------------------------------------------


class TimelineTables(dict):
    """The canonical steps and events of one or more jobs, as a reader returns them.

    The tables of the reader protocol, ``{"steps": ..., "events": ...}``, as a dict whose two tables
    are also its attributes: ``tables["steps"]`` is ``tables.steps``.  Pass ``tables.steps,
    tables.events`` to :func:`fleetlib.runtime.timeline.validate_timeline` or to the measurement in
    :mod:`fleetlib.runtime.goodput`.

    Parameters
    ----------
    steps
        Canonical steps table (``fleetlib.runtime.schema.STEP_COLUMNS``; extra columns may follow).
    events
        Canonical events table (``fleetlib.runtime.schema.EVENT_COLUMNS``; extra columns may follow).

    Raises
    ------
    DomainError
        A table that is not a DataFrame, lacks a canonical column, or holds times not in UTC.
    """

    def __init__(self, steps: pd.DataFrame, events: pd.DataFrame) -> None:
        for name, frame, cols in (("steps", steps, STEP_COLUMNS), ("events", events, EVENT_COLUMNS)):
            if not isinstance(frame, pd.DataFrame):
                raise DomainError(f"TimelineTables.{name} must be a DataFrame; got {type(frame).__name__}")
            missing = [c for c in cols if c not in frame.columns]
            if missing:
                raise DomainError(f"TimelineTables.{name} lacks canonical columns {missing}")
        for name, frame, cols in (("steps", steps, ("start", "end")), ("events", events, ("time",))):
            for col in cols:
                dtype = frame[col].dtype
                if not (isinstance(dtype, pd.DatetimeTZDtype) and str(dtype.tz) == "UTC"):
                    raise DomainError(f"TimelineTables.{name}.{col} must hold UTC timestamps; got {dtype}")
        super().__init__(steps=steps, events=events)

    @property
    def steps(self) -> pd.DataFrame:
        """The canonical steps table."""
        return self["steps"]

    @property
    def events(self) -> pd.DataFrame:
        """The canonical events table."""
        return self["events"]

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
    return Path(__file__).resolve().parents[3] / "data" / "timelines" / name


# ---------------------------------------------------------------------------------------------------
# Row book: one fleetlib.quality.RowBook per input file, addressed here by the file's row numbers
# ---------------------------------------------------------------------------------------------------


class FileBook(RowBook):
    """The :class:`~fleetlib.quality.RowBook` of one input file, addressed by its row numbers.

    The readers of this rung carry each record's file and 1-based row (``_file``, ``_row``) through
    their frames, so this book takes row numbers and finds their positions.  A file that does not end
    with a newline has a truncated last line: a rejection of that line says so.

    Parameters
    ----------
    file
        The file's name as the user gave it.
    rows
        The row (or line) number of each record, ascending; or the number of records (rows 1 .. n).
    truncated
        True when the file's last line lacks its newline.
    """

    def __init__(self, file: str, rows: int | Iterable[int] | np.ndarray, *, truncated: bool = False) -> None:
        counted = isinstance(rows, (int, np.integer))
        super().__init__(file, rows if counted or isinstance(rows, np.ndarray)
                         else np.asarray(list(rows), np.int64))
        self.truncated_row = int(self.rows[-1]) if truncated and self.n else None
        # rows counted 1 .. n ascend (no pass over them)
        ascending = counted or bool(self.n < 2 or (np.diff(self.rows) > 0).all())
        # rows 1..n or 2..n+1 (a CSV under its header): a position is the row less an offset
        self._offset = (int(self.rows[0]) if self.n and ascending
                        and int(self.rows[-1]) - int(self.rows[0]) == self.n - 1 else None)
        self._ascending = ascending

    def at_rows(self, rows: Any) -> np.ndarray:
        """Return the positions of the given row numbers (each must be in the book)."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if self._offset is None:
            if not self._ascending:
                return self.positions_of_rows(rows)
            pos = np.minimum(np.searchsorted(self.rows, rows), max(self.n - 1, 0))  # log lines: ascending
            if rows.size and (self.n == 0 or not np.array_equal(self.rows[pos], rows)):
                raise AssertionError(f"{self.file}: row numbers not in the book")  # programming error
            return pos
        pos = rows - self._offset
        if pos.size and (pos.min() < 0 or pos.max() >= self.n):
            raise AssertionError(f"{self.file}: row numbers not in the book")  # programming error
        return pos

    def reject_rows(self, rows: Any, field: str | None, reasons: Any) -> None:
        """Reject the records at these row numbers (the first rejection of a record wins)."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        texts = np.asarray(_broadcast_text(reasons, rows.size), dtype=object)
        if self.truncated_row is not None:
            last = rows == self.truncated_row
            if last.any():
                texts[last] = [f"truncated last line (the file does not end with a newline): {t}"
                               for t in texts[last]]
        self.reject(self.at_rows(rows), field, texts)

    def repair_rows(self, rows: Any, field: str | None, reasons: Any) -> None:
        """Record a named repair of the records at these row numbers."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if rows.size:
            self.repair(self.at_rows(rows), field, _broadcast_text(reasons, rows.size))

    def flag_rows(self, rows: Any, code: str, reasons: Any, jobs: Any = None, attempts: Any = None,
                  times: Any = None) -> None:
        """Flag the records at these row numbers; each message starts with ``<file> row <n>:``."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        given = _broadcast_text(reasons, rows.size)
        texts = [f"{self.file} row {r}: {t}" for r, t in zip(rows.tolist(), given, strict=True)]
        context: dict[str, Any] = {}
        if jobs is not None:
            context["job_id"] = [None if j is None else str(j) for j in list(jobs)]
        if attempts is not None:
            context["attempt"] = [None if a is None or pd.isna(a) else int(a) for a in list(attempts)]
        if times is not None:
            context["time"] = [None if t is None or pd.isna(t) else pd.Timestamp(t) for t in list(times)]
        self.flag(self.at_rows(rows), code, texts, **context)

    def rejected_rows(self, rows: Any) -> np.ndarray:
        """Return which of the records at these row numbers are rejected."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return np.zeros(0, dtype=bool)
        return self.rejected[self.at_rows(rows)]


def _broadcast_text(reasons: Any, n: int) -> list[str]:
    if isinstance(reasons, str):
        return [reasons] * n
    out = [str(r) for r in (reasons.tolist() if hasattr(reasons, "tolist") else list(reasons))]
    if len(out) != n:
        raise AssertionError("reasons and rows differ in length")  # programming error
    return out


def _by_file(books: Mapping[str, FileBook], frame: pd.DataFrame, field: str | None, reasons: Any,
             action: str) -> None:
    if frame.empty:
        return
    texts = np.asarray(_broadcast_text(reasons, len(frame)), dtype=object)
    files = frame["_file"].to_numpy(dtype=object)
    rows = frame["_row"].to_numpy(dtype=np.int64)
    for f in pd.unique(files):
        m = files == f
        getattr(books[f], action)(rows[m], field, texts[m])


def reject(books: Mapping[str, FileBook], frame: pd.DataFrame, field: str | None, reasons: Any) -> None:
    _by_file(books, frame, field, reasons, "reject_rows")


def repair(books: Mapping[str, FileBook], frame: pd.DataFrame, field: str | None, reasons: Any) -> None:
    _by_file(books, frame, field, reasons, "repair_rows")


def flag(books: Mapping[str, FileBook], frame: pd.DataFrame, code: str, reasons: Any,
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
        books[f].flag_rows(rows[m], code, texts[m], None if jobs is None else jobs[m],
                           None if atts is None else atts[m], None if times is None else times[m])


def drop_rejected(frame: pd.DataFrame, books: Mapping[str, FileBook]) -> pd.DataFrame:
    if frame.empty or not any(b.any_rejected for b in books.values()):
        return frame
    mask = np.zeros(len(frame), dtype=bool)
    rows = frame["_row"].to_numpy(dtype=np.int64)
    for f, book in books.items():  # a handful of files
        if not book.any_rejected:
            continue
        m = (frame["_file"] == f).to_numpy(dtype=bool)
        if m.any():
            mask[m] = book.rejected_rows(rows[m])
    return frame.loc[~mask].reset_index(drop=True)


def file_column(file: str, n: int) -> pd.Categorical:
    """Return the source-file column of ``n`` rows, stored once (a file may have millions of rows)."""
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[file])


def close_books(books: Mapping[str, FileBook]) -> Ledger:
    ledger = Ledger()
    for book in books.values():
        book.close(ledger)
    return ledger


# ---------------------------------------------------------------------------------------------------
# Shared column parsing
# ---------------------------------------------------------------------------------------------------


def format_time(t: Any) -> str:
    return "NaT" if pd.isna(t) else pd.Timestamp(t).isoformat()


def posix_s_to_utc(values: Any) -> pd.Series:
    """Convert POSIX float seconds to UTC, rounded to the microsecond; NaN becomes NaT.

    A float count of seconds near 2^31 carries no finer digits than the microsecond.
    """
    arr = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype="float64")
    ok = np.isfinite(arr)
    ns = np.full(arr.size, _NAT, dtype=np.int64)
    # a count of seconds beyond what a time can hold is pinned to the edge (year 1677 or 2262), where
    # the plausible-range check rejects it, instead of wrapping round to 1970
    edge = _MAX_POSIX_S
    ns[ok] = np.rint(np.clip(arr[ok], -edge, edge) * 1e6).astype(np.int64) * 1000
    return utc_times(ns)


#: The largest count of POSIX seconds a nanosecond time can hold (about 2262-04-11), less a margin.
_MAX_POSIX_S = 9.2e9


def implausible_ns(ns: np.ndarray) -> np.ndarray:
    """Mask of int64-nanosecond times (NaT excluded) outside the plausible range of :class:`Limits`."""
    lo, hi = (t.value for t in time_range())
    return (ns != _NAT) & ((ns < lo) | (ns >= hi))


def _plausible_reason(field: str, ns: np.ndarray) -> list[str]:
    """Why each time of ``ns`` is refused: what it reads as, and the range it should lie in."""
    lim = current_limits()
    span = f"[{lim.earliest_year}-01-01, {lim.latest_year}-01-01) UTC"
    edge = int(_MAX_POSIX_S * 1e9)
    out = []
    for v in ns.tolist():
        shown = ("beyond the years a time can hold" if abs(v) >= edge
                 else f"reads as {pd.Timestamp(v, tz='UTC').isoformat()}")
        out.append(f"{field} {shown}: outside the plausible range {span} (limits earliest_year, "
                   "latest_year; a number in the wrong unit?)")
    return out


def reject_implausible_seconds(rec: pd.DataFrame, books: Mapping[str, FileBook],
                                columns: Sequence[str], *, representable_only: bool = False) -> pd.DataFrame:
    """Reject rows whose POSIX-seconds columns are non-finite or outside the plausible time range.

    With ``representable_only`` only the values no time can hold (beyond about 2262, which would
    otherwise wrap round to 1970) are rejected here; the reader's own checks judge the rest.
    """
    lim = current_limits()
    lo, hi = ((-_MAX_POSIX_S, _MAX_POSIX_S) if representable_only
              else tuple(t.timestamp() for t in time_range(lim)))
    bad_any = np.zeros(len(rec), dtype=bool)
    for col in columns:
        if col not in rec.columns:
            continue
        arr = pd.to_numeric(rec[col], errors="coerce").to_numpy(dtype="float64")
        present = rec[col].notna().to_numpy()
        with np.errstate(invalid="ignore"):
            bad = present & ~bad_any & (~np.isfinite(arr) | (arr < lo) | (arr >= hi))
        if bad.any():
            reject(books, rec[bad], col,
                    [f"{col} {excerpt(v, 24)} (POSIX seconds) is not a time in the plausible range "
                     f"[{lim.earliest_year}-01-01, {lim.latest_year}-01-01) UTC (limits earliest_year, "
                     "latest_year)" for v in rec[col][bad].tolist()])
            bad_any |= bad
    return rec.loc[~bad_any].reset_index(drop=True) if bad_any.any() else rec


def parse_times(values: pd.Series, *, frame: pd.DataFrame, books: Mapping[str, FileBook], field: str,
                 tz: str | None, required: bool = True) -> pd.Series:
    """Parse one time column to UTC; reject or repair rows through the books.

    Zone-aware text or timestamps are converted to UTC.  Naive values are localised to ``tz`` as a
    named repair; without ``tz`` a column that is naive throughout raises :class:`InputError`, and
    naive rows among zone-aware ones (mixed) are rejected.  Rejected rows come back as NaT.
    """
    values = values.reset_index(drop=True)
    n = len(values)
    if n == 0:
        return utc_times(np.zeros(0, dtype=np.int64))
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        out = values.dt.tz_convert("UTC").astype(TIME_DTYPE)
        missing = out.isna().to_numpy()
        if required and missing.any():
            reject(books, frame[missing], field, f"missing {field}")
        return _drop_implausible(out, frame=frame, books=books, field=field)
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
        reject(books, frame[missing], field, f"missing {field}")
    if text is not None and aware_mask.any():
        parsed = pd.to_datetime(text[aware_mask], utc=True, format="ISO8601", errors="coerce")
        beyond = aware_mask.copy()
        beyond[aware_mask] = outside_plausible(parsed)
        parsed = reject_outside(books, frame[aware_mask], field, parsed, text[aware_mask])
        out_ns[aware_mask] = utc_ns(parsed)
        bad = aware_mask.copy()
        bad[aware_mask] = parsed.isna().to_numpy()
        bad &= ~beyond
        if bad.any():
            reject(books, frame[bad], field,
                    [f"{field} {excerpt(v)} is not an ISO 8601 time" for v in text[bad].tolist()])
    naive_mask = ~aware_mask & ~missing
    if not naive_mask.any():
        return _drop_implausible(utc_times(out_ns), frame=frame, books=books, field=field)
    if text is None:
        naive_parsed = values[naive_mask]
    else:
        naive_parsed = pd.to_datetime(text[naive_mask], format="ISO8601", errors="coerce")
        beyond = naive_mask.copy()
        beyond[naive_mask] = outside_plausible(naive_parsed)
        naive_parsed = reject_outside(books, frame[naive_mask], field, naive_parsed, text[naive_mask])
        unparsed = naive_mask.copy()
        unparsed[naive_mask] = naive_parsed.isna().to_numpy()
        if unparsed.any():
            plain = unparsed & ~beyond
            reject(books, frame[plain], field,
                    [f"{field} {excerpt(v)} is not an ISO 8601 time" for v in text[plain].tolist()])
            naive_parsed = naive_parsed[~unparsed[naive_mask]]
            naive_mask = naive_mask & ~unparsed
            if not naive_mask.any():
                return _drop_implausible(utc_times(out_ns), frame=frame, books=books, field=field)
    if tz is None:
        if not aware_mask.any():
            row = int(frame["_row"].iloc[int(np.argmax(naive_mask))])
            raise InputError("times carry no zone (naive); pass tz= to name the zone they were written "
                             "in, or write them with an offset such as 'Z'",
                             file=str(frame["_file"].iloc[0]), row=row, field=field)
        reject(books, frame[naive_mask], field,
                f"naive {field} among zone-aware times (mixed zones): the zone is unknown; pass tz= "
                "to name it")
        return _drop_implausible(utc_times(out_ns), frame=frame, books=books, field=field)
    try:
        localised = naive_parsed.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    except Exception as exc:  # an unknown zone name
        raise DomainError(f"tz={tz!r} is not a time zone pandas knows ({exc})") from exc
    out_ns[naive_mask] = utc_ns(localised)
    bad = naive_mask.copy()
    bad[naive_mask] = localised.isna().to_numpy()
    if bad.any():
        reject(books, frame[bad], field,
                f"{field} is not a valid time, or does not exist / is ambiguous in zone {tz}")
    good = naive_mask & ~bad
    if good.any():
        repair(books, frame[good], field, f"naive {field} localised to tz={tz}")
    return _drop_implausible(utc_times(out_ns), frame=frame, books=books, field=field)


def outside_plausible(times: Any) -> np.ndarray:
    """Mask of parsed times (any unit, zone-aware or naive) outside the plausible range; NaT is not marked.

    Works before the cast to nanoseconds, so a year such as -1 or 99999 is caught instead of
    overflowing the cast.
    """
    s = pd.Series(times)
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        s = s.dt.tz_convert("UTC").dt.tz_localize(None)
    if not pd.api.types.is_datetime64_dtype(s.dtype):
        return np.zeros(len(s), dtype=bool)
    arr = s.to_numpy()
    lim = current_limits()
    lo, hi = np.datetime64(f"{lim.earliest_year}-01-01"), np.datetime64(f"{lim.latest_year}-01-01")
    return ~np.isnat(arr) & ((arr < lo) | (arr >= hi))


def reject_outside(books: Mapping[str, FileBook], frame: pd.DataFrame, field: str, parsed: pd.Series,
                    written: pd.Series) -> pd.Series:
    """Reject the rows of ``parsed`` outside the plausible range (quoting ``written``); blank them."""
    out = outside_plausible(parsed)
    if not out.any():
        return parsed
    lim = current_limits()
    reject(books, frame[out], field,
            [f"{field} {excerpt(v, 32)} is outside the plausible range [{lim.earliest_year}-01-01, "
             f"{lim.latest_year}-01-01) UTC (limits earliest_year, latest_year)"
             for v in pd.Series(written).to_numpy(dtype=object)[out].tolist()])
    return pd.Series(parsed).where(~out)


def _drop_implausible(times: pd.Series, *, frame: pd.DataFrame, books: Mapping[str, FileBook],
                      field: str) -> pd.Series:
    """Reject (and blank) the times outside the plausible range of :class:`fleetlib._io.Limits`."""
    ns = utc_ns(times)
    bad = implausible_ns(ns)
    if not bad.any():
        return times
    reject(books, frame[bad], field, _plausible_reason(field, ns[bad]))
    ns = ns.copy()
    ns[bad] = _NAT
    return utc_times(ns)


def int_column(values: pd.Series, *, frame: pd.DataFrame, books: Mapping[str, FileBook], field: str,
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
    huge = ~blank & ~notint & (out_of_range_int(values) | (np.abs(np.where(finite, num, 0.0)) >= 2.0**63))
    if huge.any():
        reject(books, frame[huge], field,
                [f"{field} {excerpt(v, 24)} is beyond the int64 range (it would wrap)"
                 for v in values[huge].tolist()])
        notint = notint | huge
    if notint.any():
        plain = notint & ~huge
        reject(books, frame[plain], field,
                [f"{field} {v!r} is not an integer" for v in values[plain].tolist()])
    if below.any():
        reject(books, frame[below], field, f"{field} must be >= {minimum}")
    if required and blank.any():
        reject(books, frame[blank], field, f"missing {field}")
    ok = ~blank & ~notint & ~below
    ints = np.where(ok, np.nan_to_num(num.to_numpy(), nan=0.0, posinf=0.0, neginf=0.0), 0.0).astype(np.int64)
    return pd.Series(pd.arrays.IntegerArray(ints, ~ok))


def na_ints(n: int) -> pd.arrays.IntegerArray:
    """Return a nullable integer array of ``n`` missing values."""
    return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))


def float_column(values: pd.Series, *, frame: pd.DataFrame, books: Mapping[str, FileBook], field: str,
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
        reject(books, frame[bad], field,
                [f"{field} {v!r} is not a finite number" for v in values[bad].tolist()])
    if minimum is not None:
        below = ~blank & np.isfinite(arr) & (arr < minimum)
        if below.any():
            reject(books, frame[below], field, f"{field} must be >= {minimum:g}")
    return num.where(~bad)


# ---------------------------------------------------------------------------------------------------
# Shared checks on the canonical tables (vectorised)
# ---------------------------------------------------------------------------------------------------


def utc_ns(series: pd.Series) -> np.ndarray:
    """UTC times as int64 nanoseconds (NaT becomes the int64 minimum)."""
    naive = pd.Series(series).astype(TIME_DTYPE).dt.tz_convert(None)
    return naive.to_numpy(dtype="datetime64[ns]").view("int64")


def utc_times(ns: np.ndarray) -> pd.Series:
    """Int64 nanoseconds (int64 minimum = NaT) as a UTC time Series."""
    return pd.Series(np.asarray(ns, dtype=np.int64).view("datetime64[ns]")).dt.tz_localize("UTC")


def out_of_order(frame: pd.DataFrame, keys: list[str], time_col: str) -> np.ndarray:
    """Rows whose time is earlier than a row listed before them in the same group (input order)."""
    if frame.empty:
        return np.zeros(0, dtype=bool)
    order = frame.sort_values(["_file", "_row"], kind="stable")
    t = pd.Series(utc_ns(order[time_col]), index=order.index)
    grouped = t.groupby([order[k] for k in keys], sort=False)
    prev_max = grouped.cummax().groupby([order[k] for k in keys], sort=False).shift(1)
    late = (t < prev_max).reindex(frame.index).fillna(False).to_numpy(dtype=bool)
    return late


def check_steps(steps: pd.DataFrame, books: Mapping[str, FileBook], *,
                 reorder_is_repair: bool) -> pd.DataFrame:
    """Reject impossible steps, duplicates and overlaps; repair (or just sort) out-of-order rows.

    Works on integer arrays (job codes, nanoseconds) so that a table of millions of steps costs a
    few sorts; Python-level work is spent only on the rows that are rejected or repaired.
    """
    steps = drop_rejected(steps, books)
    if steps.empty:
        return steps
    start, end = utc_ns(steps["start"]), utc_ns(steps["end"])
    wait = steps["input_wait_s"].to_numpy(dtype=np.float64)
    bad = end <= start
    if bad.any():
        b = steps[bad]
        reject(books, b, "end", [f"step {s} ends at {format_time(e)}, not after its start {format_time(t)}"
                                  for s, e, t in zip(b["step"], b["end"], b["start"], strict=True)])
    over = (wait > (end - start) / NS_PER_S) & ~bad
    if over.any():
        reject(books, steps[over], "input_wait_s", "input wait is longer than the step itself")
    if bad.any() or over.any():
        steps = drop_rejected(steps, books)
        if steps.empty:
            return steps
        start, end = utc_ns(steps["start"]), utc_ns(steps["end"])
        wait = steps["input_wait_s"].to_numpy(dtype=np.float64)
    job = pd.factorize(steps["job_id"], sort=True)[0].astype(np.int64)
    att = steps["attempt"].to_numpy(dtype=np.int64)
    num = steps["step"].to_numpy(dtype=np.int64)
    # rows out of time order within (job, attempt), in input order
    if reorder_is_repair:
        late = _late_rows(steps, job, att, start)
        if late.any():
            repair(books, steps[late], "start", "listed out of time order: moved into time order")
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
            reject(books, c, "step", [f"duplicate of the record of step {n} (attempt {a}) at {f} row {r}"
                                       for n, a, f, r in
                                       zip(c["step"], c["attempt"], src["_file"], src["_row"], strict=True)])
        if conflict.any():
            c = steps[conflict]
            rows_of = c.groupby(run[conflict], sort=False)["_row"].transform(
                lambda r: ", ".join(str(x) for x in r))  # only the few conflicting groups
            reject(books, c, "step",
                    [f"conflicting records of step {n} (attempt {a}) starting at the same time, rows {rs}: "
                     "none is taken" for n, a, rs in zip(c["step"], c["attempt"], rows_of, strict=True)])
        keep = ~(copy | conflict)
        steps = steps[keep].reset_index(drop=True)
        job, num, start, end = job[keep], num[keep], start[keep], end[keep]
    overlap = np.r_[False, (job[1:] == job[:-1]) & (start[1:] < end[:-1])]
    if overlap.any():
        o = steps[overlap]
        i = np.flatnonzero(overlap)
        gap = (end[i - 1] - start[i]) / NS_PER_S
        reject(books, o, "start", [f"step {s} overlaps the step before it (step {int(p)}) by {g:.6g} s: "
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


def check_events(events: pd.DataFrame, books: Mapping[str, FileBook], *, reorder_is_repair: bool,
                  flag_unknown: bool = True) -> pd.DataFrame:
    """Reject duplicate events, flag unknown kinds, repair (or just sort) out-of-order rows."""
    events = drop_rejected(events, books)
    if events.empty:
        return events
    key = ["job_id", "attempt", "time", "kind", "step", "duration_s"]
    dup = events.fillna({"duration_s": -1.0}).duplicated(key, keep="first").to_numpy()
    if dup.any():
        filled = events.fillna({"duration_s": -1.0})
        first = filled.groupby(key, sort=False, dropna=False)["_row"].transform("first")
        d = events[dup]
        reject(books, d, "kind", [f"duplicate of the {k} event at row {r}"
                                   for k, r in zip(d["kind"], first[dup], strict=True)])
        events = drop_rejected(events, books)
    if flag_unknown:
        unknown = ~known_event_kinds(events["kind"])
        if unknown.any():
            u = events[unknown]
            flag(books, u, "unknown_event_kind",
                  [f"event kind {str(k)!r} is not one the runtime partition knows: kept, not charged to any "
                   "category" for k in u["kind"]], "time")
    late = out_of_order(events, ["job_id"], "time")
    if reorder_is_repair and late.any():
        repair(books, events[late], "time", "listed out of time order: moved into time order")
    return sort_events(events)


def sort_events(events: pd.DataFrame) -> pd.DataFrame:
    """Sort by job, time, attempt and, among simultaneous events, a natural kind order."""
    if events.empty:
        return events
    rank = events["kind"].map(_KIND_RANK).fillna(len(_KIND_RANK) // 2).to_numpy()
    return (events.assign(_rank=rank).sort_values(["job_id", "time", "attempt", "_rank"], kind="stable")
            .drop(columns="_rank").reset_index(drop=True))


def cross_checks(steps: pd.DataFrame, events: pd.DataFrame, books: Mapping[str, FileBook]) -> None:
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
            flag(books, r, "restore_uncommitted",
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
            flag(books, a, "failure_without_restart",
                  [f"failure at {format_time(t)} (attempt {at}) has no restart after it: the job ended on "
                   "this failure" for t, at in zip(a["time"], a["attempt"], strict=True)], "time")


def _provenance(frame: pd.DataFrame) -> dict[str, Any]:
    """Return the provenance columns (``source_file``, ``source_row``) of a reader's working frame.

    The readers carry each record's file and 1-based row as ``_file`` and ``_row``; the canonical
    tables keep them under :data:`~fleetlib.runtime.schema.PROVENANCE_COLUMNS`, so that the timeline's
    structure checks can name the file and row a record came from.  Empty when the frame lacks them.
    """
    if "_file" not in frame.columns or "_row" not in frame.columns:
        return {}
    files = frame["_file"]
    source_file = files.array if isinstance(files.dtype, pd.CategoricalDtype) else pd.Categorical(files)
    rows = pd.to_numeric(frame["_row"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
    return {"source_file": source_file, "source_row": rows}


def finalise_steps(steps: pd.DataFrame) -> pd.DataFrame:
    if steps.empty:
        return empty_steps()
    # check_steps has already sorted the rows by job id and start
    return pd.DataFrame({
        "job_id": steps["job_id"].astype("str").array,
        "attempt": steps["attempt"].to_numpy(dtype=np.int64),
        "step": steps["step"].to_numpy(dtype=np.int64),
        "start": steps["start"].astype(TIME_DTYPE).array,
        "end": steps["end"].astype(TIME_DTYPE).array,
        "input_wait_s": steps["input_wait_s"].to_numpy(dtype=np.float64),
        **_provenance(steps),
    })


def finalise_events(events: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    if events.empty:
        out = empty_events()
        for col in extra:
            out[col] = pd.Series([], dtype="object")
        return out
    out = pd.DataFrame({
        "job_id": pd.Series(events["job_id"].astype("str").to_numpy(), dtype="str"),
        "attempt": events["attempt"].astype("int64").to_numpy(),
        "time": events["time"].astype(TIME_DTYPE).array,
        "kind": pd.Series(events["kind"].astype("str").to_numpy(), dtype="str"),
        "step": pd.array(events["step"].to_numpy(dtype=object), dtype="Int64"),
        "duration_s": pd.array(events["duration_s"].astype("float64").to_numpy(), dtype="Float64"),
        **_provenance(events),
    })
    for col in extra:
        out[col] = events[col].to_numpy()
    return sort_events(out)


def file_stem(path: Path) -> str:
    """Return the file name without its suffix, and without ``.gz`` first (``log.txt.gz`` -> ``log``)."""
    name = path.name[:-3] if path.name.lower().endswith(".gz") else path.name
    return Path(name).stem


def _suffix(path: Path) -> str:
    """Return the file's suffix in lower case, under a ``.gz`` (``steps.csv.gz`` -> ``.csv``)."""
    name = path.name[:-3] if path.name.lower().endswith(".gz") else path.name
    return Path(name).suffix.lower()


def concat_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------------
# Shared table loading (CSV / Parquet) and attempt assignment
# ---------------------------------------------------------------------------------------------------


#: The first bytes of a Parquet file.
PARQUET_MAGIC = b"PAR1"


def load_table(path: Path) -> tuple[pd.DataFrame, np.ndarray, bool]:
    """Read a CSV (all text) or Parquet file; return the frame, its row numbers and truncation."""
    raw = read_bytes(path)  # plain or gzip, by the bytes; a missing or irregular file is refused
    if _suffix(path) in (".parquet", ".pq") or bytes(raw[:4]) == PARQUET_MAGIC:
        try:
            df = pd.read_parquet(io.BytesIO(raw))
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise InputError(f"not a readable Parquet file ({exc})", file=str(path)) from exc
        rows = np.arange(1, len(df) + 1, dtype=np.int64)
        truncated = False
    else:
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


def apply_aliases(df: pd.DataFrame, aliases: Mapping[str, Sequence[str]], file: str) -> pd.DataFrame:
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
                    df[canon] = posix_s_to_utc(secs)
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


def text_column(values: pd.Series) -> pd.Series:
    """Strip text values (missing stays missing); the work is done once per distinct value."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    stripped = pd.array(pd.Series(uniques, dtype="object").astype("str").str.strip(), dtype="str")
    out = pd.Series(stripped.take(np.where(codes < 0, 0, codes)) if len(stripped) else
                    pd.array([None] * len(values), dtype="str"), index=values.index)
    return out.where(codes >= 0, None)


def job_column(df: pd.DataFrame, base: pd.DataFrame, books: Mapping[str, FileBook], job_default: str | None,
                file: str) -> np.ndarray:
    if "job_id" not in df.columns:
        if job_default is None:
            raise InputError("no job_id column (or alias) and no job_id= default", file=file, row=1,
                             field="job_id")
        return pd.array(np.full(len(df), job_default, dtype=object), dtype="str")
    jobs = text_column(df["job_id"])
    missing = jobs.isna() | (jobs == "")
    if missing.any():
        if job_default is not None:
            repair(books, base[missing.to_numpy()], "job_id",
                    f"blank job_id taken as job_id={job_default!r}")
            jobs = jobs.where(~missing, job_default)
        else:
            reject(books, base[missing.to_numpy()], "job_id", "missing job_id")
    return jobs.array


def attempts_from_bounds(rec: pd.DataFrame, bounds: pd.DataFrame) -> np.ndarray:
    """Index of the last bound at or before each record's time in its job (0 before the first)."""
    if bounds.empty:
        return np.zeros(len(rec), dtype=np.int64)
    b = bounds.sort_values(["job_id", "time"]).drop_duplicates().copy()
    b["_attempt"] = b.groupby("job_id").cumcount().astype("int64")
    b = b.sort_values("time", kind="stable")  # merge_asof needs the right keys sorted by time alone
    left = pd.DataFrame({"job_id": rec["job_id"].to_numpy(), "time": rec["time"].astype(TIME_DTYPE).array,
                         "_pos": np.arange(len(rec))}).sort_values("time", kind="stable")
    left["time"] = left["time"].astype(TIME_DTYPE)
    b["time"] = b["time"].astype(TIME_DTYPE)
    m = pd.merge_asof(left, b[["job_id", "time", "_attempt"]], on="time", by="job_id", direction="backward")
    out = np.zeros(len(rec), dtype=np.int64)
    out[m["_pos"].to_numpy()] = m["_attempt"].fillna(0).astype("int64").to_numpy()
    return out


# ---------------------------------------------------------------------------------------------------
# The reader protocol: read(paths, *, tz, window, **options) -> (tables, Ledger)
# ---------------------------------------------------------------------------------------------------


def parse_window(window: Any) -> Window | None:
    """Read the ``window`` of a ``read`` call with :meth:`~fleetlib.accounting.Window.parse`.

    The runtime readers keep every record whatever the window: held time inside a window depends on
    records before it (the ``gang_complete`` that opened the attempt, the commit a restore returns to),
    so the measurement clips to the window, not the reader.  A malformed window still fails here, at
    the read.
    """
    parsed = Window.parse(window)
    if parsed is not None and parsed.is_nominal:
        raise DomainError("a runtime window needs start and end times, not a nominal label")
    return parsed
