"""Shared parts of the runtime readers.

The canonical tables a reader returns, the row-book helpers, the loading of CSV and Parquet files into
Arrow tables and the casting of their columns to the canonical types, and the vectorised checks every
format runs on its steps and events.

A table format reads each file into one Arrow table (:func:`load_table`) and casts each column
(:func:`job_column`, :func:`int_column`, :func:`float_column`, :func:`parse_times`, ...): a column
already of its canonical type is checked on its Arrow buffers; text is parsed once per distinct
value, by the same pandas parsers for a CSV cell and for Parquet text.  What a cast rejects or
repairs is booked through the rows' :class:`Part`.  The checks (:func:`check_steps`,
:func:`check_events`, :func:`cross_checks`) work on integer arrays of working frames; rows already in
order cost a scan, not a sort, and the rows to report are only looked for once a scan finds one.

Row numbers are counted as each format counts them: a CSV row is its line number (the header is
line 1), a Parquet row is its index + 1, a JSON-lines or log record is its line number.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fleetlib._io import (
    current_limits,
    excerpt,
    out_of_range_int,
    path_view,
    read_bytes,
    time_range,
)
from fleetlib.accounting import Window
from fleetlib.localtime import localize
from fleetlib.quality import DomainError, InputError, Ledger, RowBook
from fleetlib.runtime.schema import (
    DEVICE_COLUMNS,
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
        self._ascending: bool | None = True if counted else None  # rows counted 1 .. n ascend
        self._offset: int | None = None

    def _addressing(self) -> None:
        """Work out how row numbers map to positions (once, when a row is first addressed)."""
        if self._ascending is None:
            self._ascending = bool(self.n < 2 or (np.diff(self.rows) > 0).all())
        # rows 1..n or 2..n+1 (a CSV under its header): a position is the row less an offset
        self._offset = (int(self.rows[0]) if self.n and self._ascending
                        and int(self.rows[-1]) - int(self.rows[0]) == self.n - 1 else None)

    def at_rows(self, rows: Any) -> np.ndarray:
        """Return the positions of the given row numbers (each must be in the book)."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        if self._ascending is None or (self._offset is None and self._ascending):
            self._addressing()
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


class Part:
    """Rows of one file that a reader parses together: the file's book and each row's number.

    The column parsers below book what they find through a part: a boolean mask over its rows and
    one reason for all of them or one per masked row.

    Parameters
    ----------
    book
        The file's :class:`FileBook`.
    rows
        The row number of each record of the part, in the order of its columns.
    """

    __slots__ = ("book", "rows")

    def __init__(self, book: FileBook, rows: np.ndarray) -> None:
        self.book = book
        self.rows = np.asarray(rows, dtype=np.int64)

    @property
    def file(self) -> str:
        """The file's name as the user gave it."""
        return self.book.file

    def __len__(self) -> int:
        return int(self.rows.size)

    def subset(self, where: np.ndarray | slice) -> Part:
        """Return the part of the rows at ``where`` (a mask, positions or a slice)."""
        return Part(self.book, self.rows[where])

    def reject(self, mask: np.ndarray, field: str | None, reasons: Any) -> None:
        """Reject the masked rows (the first rejection of a record wins)."""
        if mask.any():
            self.book.reject_rows(self.rows[mask], field, reasons)

    def repair(self, mask: np.ndarray, field: str | None, reasons: Any) -> None:
        """Record a named repair of the masked rows."""
        if mask.any():
            self.book.repair_rows(self.rows[mask], field, reasons)


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
    """Reject the rows of a working frame (``_file``, ``_row``) in their files' books."""
    _by_file(books, frame, field, reasons, "reject_rows")


def repair(books: Mapping[str, FileBook], frame: pd.DataFrame, field: str | None, reasons: Any) -> None:
    """Record a named repair of the rows of a working frame in their files' books."""
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
    """Return the rows of a working frame that no book has rejected (the frame itself if none is)."""
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
    if not mask.any():
        return frame
    return frame.loc[~mask].reset_index(drop=True)


def file_column(file: str, n: int) -> pd.Categorical:
    """Return the source-file column of ``n`` rows, stored once (a file may have millions of rows)."""
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[file])


def close_books(books: Mapping[str, FileBook]) -> Ledger:
    """Settle every file's book into one :class:`~fleetlib.quality.Ledger`, in file order."""
    ledger = Ledger()
    for book in books.values():
        book.close(ledger)
    return ledger


# ---------------------------------------------------------------------------------------------------
# Times
# ---------------------------------------------------------------------------------------------------


def format_time(t: Any) -> str:
    """Return a time as ISO 8601 for a message (``NaT`` when missing)."""
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
    edge = MAX_POSIX_S
    ns[ok] = np.rint(np.clip(arr[ok], -edge, edge) * 1e6).astype(np.int64) * 1000
    return utc_times(ns)


#: The largest count of POSIX seconds a nanosecond time can hold (about 2262-04-11), less a margin.
MAX_POSIX_S = 9.2e9
#: The same edge in nanoseconds: a time at or beyond it is shown as beyond what a time can hold.
_EDGE_NS = int(MAX_POSIX_S * 1e9)


def implausible_ns(ns: np.ndarray) -> np.ndarray:
    """Mask of int64-nanosecond times (NaT excluded) outside the plausible range of :class:`Limits`."""
    lo, hi = (t.value for t in time_range())
    return (ns != _NAT) & ((ns < lo) | (ns >= hi))


def _plausible_reason(field: str, ns: np.ndarray) -> list[str]:
    """Why each time of ``ns`` is refused: what it reads as, and the range it should lie in."""
    lim = current_limits()
    span = f"[{lim.earliest_year}-01-01, {lim.latest_year}-01-01) UTC"
    out = []
    for v in ns.tolist():
        shown = ("beyond the years a time can hold" if abs(v) >= _EDGE_NS
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
    lo, hi = ((-MAX_POSIX_S, MAX_POSIX_S) if representable_only
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


def reject_outside(part: Part, field: str, parsed: pd.Series, written: Any) -> pd.Series:
    """Reject the rows of ``parsed`` outside the plausible range (quoting ``written``); blank them."""
    out = outside_plausible(parsed)
    if not out.any():
        return parsed
    lim = current_limits()
    part.reject(out, field,
                [f"{field} {excerpt(v, 32)} is outside the plausible range [{lim.earliest_year}-01-01, "
                 f"{lim.latest_year}-01-01) UTC (limits earliest_year, latest_year)"
                 for v in pd.Series(written).to_numpy(dtype=object)[out].tolist()])
    return pd.Series(parsed).where(~out)


def _drop_implausible(ns: np.ndarray, part: Part, field: str) -> np.ndarray:
    """Reject (and blank) the times outside the plausible range of :class:`fleetlib._io.Limits`."""
    lo, hi = (t.value for t in time_range())
    if not ns.size or (lo <= ns.min() and ns.max() < hi):  # every time present and plausible
        return ns
    bad = implausible_ns(ns)
    if not bad.any():
        return ns
    part.reject(bad, field, _plausible_reason(field, ns[bad]))
    ns = ns.copy()
    ns[bad] = _NAT
    return ns


def utc_ns(series: pd.Series) -> np.ndarray:
    """UTC times as int64 nanoseconds (NaT becomes the int64 minimum)."""
    return pd.Series(series).astype(TIME_DTYPE).to_numpy(dtype="datetime64[ns]").view("int64")


def utc_times(ns: np.ndarray) -> pd.Series:
    """Int64 nanoseconds (int64 minimum = NaT) as a UTC time Series."""
    return pd.Series(np.asarray(ns, dtype=np.int64).view("datetime64[ns]")).dt.tz_localize("UTC")


def utc_array(ns: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """Int64 nanoseconds (int64 minimum = NaT) as a UTC time array (:data:`TIME_DTYPE`).

    The array wraps ``ns`` itself (ten million times cost no copy), unless ``ns`` is a read-only view
    of an Arrow buffer: the table's own array then gets its own memory.
    """
    ns = np.asarray(ns, dtype=np.int64)
    if not ns.flags.writeable:
        ns = ns.copy()
    return pd.array(ns, dtype=TIME_DTYPE, copy=False)


# ---------------------------------------------------------------------------------------------------
# Columns of a loaded table, cast to the canonical types
#
# A column is an Arrow array.  Columns already of the canonical type are checked on their Arrow
# buffers (nulls, ranges, by pyarrow.compute); text -- every CSV cell, and Parquet text -- is parsed
# once per distinct value, by the same pandas parsers whatever the file (pd.to_numeric, ISO 8601
# pd.to_datetime), and the outcome is spread to the rows by their codes.  Each parser books what it
# rejects or repairs through the rows' :class:`Part`.
# ---------------------------------------------------------------------------------------------------


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_text(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def contiguous(column: pa.ChunkedArray) -> np.ndarray:
    """Return a column without nulls as one writeable numpy array, copied once (by numpy).

    Each chunk is a zero-copy view where Arrow allows it; joining them is the one copy.  (A chunked
    column's own ``to_numpy`` joins the chunks in Arrow's memory, which the caller would then have
    to copy again to own writeable memory: ten million rows would cost two fresh arrays, not one.)
    """
    chunks = [c.to_numpy(zero_copy_only=False) for c in column.chunks]
    if not chunks:
        return np.zeros(0, dtype=column.type.to_pandas_dtype())
    return np.concatenate(chunks)


def _plain(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    """Return a column as a chunked array, a dictionary of anything but text decoded."""
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column], type=column.type)
    t = column.type
    if pa.types.is_dictionary(t) and not _is_text(t):
        column = column.cast(t.value_type)
    return column


def distinct(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pd.Series]:
    """Return each row's code (-1 where missing) and the distinct values of a column, as pandas values.

    A value pandas counts as missing (null, NaN, NaT) gets code -1 and is not among the values.
    """
    column = _plain(column)
    if pa.types.is_null(column.type):
        return np.full(len(column), -1, dtype=np.int64), pd.Series([], dtype=object)
    if not pa.types.is_dictionary(column.type):
        flat = column.combine_chunks() if column.num_chunks > 1 else column
        try:
            encoded = pc.dictionary_encode(flat)
            column = encoded if isinstance(encoded, pa.ChunkedArray) else pa.chunked_array([encoded])
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):  # nested values: as text
            codes, uniques = pd.factorize(pd.Series([None if v is None else str(v) for v in flat.to_pylist()],
                                                    dtype=object))
            return codes.astype(np.int64), pd.Series(np.asarray(uniques, dtype=object), dtype=object)
    column = column.unify_dictionaries()
    if column.num_chunks == 0:
        return np.zeros(0, dtype=np.int64), pd.Series([], dtype=object)
    dictionary = column.chunk(0).dictionary
    indices = pa.chunked_array([c.indices for c in column.chunks], type=column.type.index_type)
    codes = (indices.fill_null(-1) if indices.null_count else indices).to_numpy()  # joined in Arrow's pool
    values = dictionary.to_pandas()
    missing = values.isna().to_numpy()
    if missing.any():  # a null or NaN inside the dictionary: its rows are missing too
        codes = np.where((codes >= 0) & missing[np.maximum(codes, 0)], -1, codes)
    return codes, values


def spread(per_value: np.ndarray, codes: np.ndarray, missing: Any) -> np.ndarray:
    """Spread a per-distinct-value array to the rows (``missing`` for code -1)."""
    out = per_value[np.maximum(codes, 0)] if per_value.size else np.full(codes.size, missing,
                                                                         dtype=per_value.dtype)
    if (codes < 0).any():
        out = out.copy()
        out[codes < 0] = missing
    return out


def _stripped(values: pd.Series) -> pd.Series:
    """Distinct values as stripped text (``str``), as a CSV cell of them would read."""
    return pd.Series(values, dtype="object").astype("str").str.strip()


def distinct_text(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pd.Series]:
    """Return each row's code (-1 where missing) and the distinct values as stripped text (``str``)."""
    codes, values = distinct(column)
    return codes, pd.Series(pd.array(_stripped(values), dtype="str"))


def text_column(column: pa.ChunkedArray | pa.Array) -> pd.Series:
    """Return a column as stripped text (``str``); missing stays missing.

    The work is done once per distinct value.
    """
    codes, texts = distinct_text(column)
    if not len(texts):
        return pd.Series(pd.array([None] * len(codes), dtype="str"))
    return pd.Series(texts.array.take(codes, allow_fill=True))


def originals(column: pa.ChunkedArray | pa.Array, mask: np.ndarray) -> list[Any]:
    """Return the masked rows' values as the file holds them (NaN where missing), for a message."""
    codes, values = distinct(column)
    picked = codes[mask]
    vals = values.to_numpy(dtype=object)
    return [np.nan if c < 0 else vals[c] for c in picked.tolist()]


def job_column(table: pa.Table, part: Part, job_default: str | None) -> tuple[pd.arrays.ArrowStringArray,
                                                                               np.ndarray]:
    """Return the job ids (``str``) of a table's rows and their ranks in text order (integers).

    A blank or missing job id is repaired to ``job_default`` when one is given, else rejected.
    Without a ``job_id`` column every row is ``job_default`` (none given: :class:`InputError`).
    """
    n = len(part)
    if "job_id" not in table.column_names:
        if job_default is None:
            raise InputError("no job_id column (or alias) and no job_id= default", file=part.file, row=1,
                             field="job_id")
        return pd.array(np.full(n, job_default, dtype=object), dtype="str"), np.zeros(n, dtype=np.int64)
    codes, values = distinct(table.column("job_id"))
    texts = _stripped(values).to_numpy(dtype=object)
    blank = np.array([t == "" for t in texts], dtype=bool)
    absent = codes < 0 if codes.size and codes.min() < 0 else np.zeros(codes.size, dtype=bool)
    missing = spread(blank, codes, True) if blank.any() else absent
    if missing.any():
        if job_default is not None:
            part.repair(missing, "job_id", f"blank job_id taken as job_id={job_default!r}")
        else:
            part.reject(missing, "job_id", "missing job_id")
    # the distinct ids in text order; a missing one reads as the default (none: stays missing)
    filled = np.where(blank, job_default, texts) if job_default is not None else texts
    ids = pd.Series(np.append(filled, job_default), dtype="str")
    rank, ordered = pd.factorize(ids, sort=True)
    if absent.any():
        row_rank = rank[np.where(absent, ids.size - 1, codes)]
    elif np.array_equal(rank[:-1], np.arange(rank.size - 1)):  # the distinct ids in text order already
        row_rank = codes
    else:
        row_rank = rank[codes]
    jobs = pd.array(ordered, dtype="str").take(row_rank, allow_fill=bool(absent.any()))
    return jobs, row_rank


def _numbers(values: pd.Series) -> np.ndarray:
    """``pd.to_numeric(values, errors="coerce")`` as float64 (NaN where not a number)."""
    return pd.to_numeric(values, errors="coerce").astype("float64").to_numpy()


def numbers(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Return a column as float64 numbers, NaN where missing or not a number.

    Numeric columns are cast; text is read as :func:`pandas.to_numeric` reads it (once per distinct
    value).
    """
    column = _plain(column)
    t = column.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t):
        return column.cast(pa.float64()).to_numpy().astype(np.float64, copy=True)
    codes, values = distinct(column)
    return spread(_numbers(values), codes, np.nan)


def int_column(column: pa.ChunkedArray | pa.Array, *, part: Part, field: str, required: bool,
               minimum: int = 0) -> np.ndarray | pd.arrays.IntegerArray:
    """Return a column as integers; reject non-integers, negatives and (if required) gaps.

    Integer columns are read exactly (a value beyond int64 is refused); floats must be whole;
    text is read as :func:`pandas.to_numeric` reads it, once per distinct value.  The result is an
    int64 array, or a nullable ``Int64`` one where a value is missing or rejected.
    """
    column = _plain(column)
    t = column.type
    n = len(column)
    if pa.types.is_null(t):
        blank = np.ones(n, dtype=bool)
        ints = np.zeros(n, dtype=np.int64)
        huge = notint = below = np.zeros(n, dtype=bool)
    elif pa.types.is_integer(t):
        blank = (column.is_null().to_numpy(zero_copy_only=False) if column.null_count
                 else np.zeros(n, dtype=bool))
        arr = contiguous(column.fill_null(0) if column.null_count else column)
        huge = arr > np.iinfo(np.int64).max if arr.dtype == np.uint64 else np.zeros(n, dtype=bool)
        if arr.dtype == np.uint64 and huge.any():
            part.reject(huge, field, [f"{field} {excerpt(v, 24)} is beyond the int64 range (it would wrap)"
                                      for v in arr[huge].tolist()])
            arr = np.where(huge, 0, arr)
        ints = arr.astype(np.int64, copy=False)
        if not column.null_count and arr.dtype != np.uint64 and (not n or ints.min() >= minimum):
            return ints  # nothing missing, nothing out of range
        below = (~blank & ~huge & (ints < minimum) if n and ints.min() < minimum
                 else np.zeros(n, dtype=bool))
        notint = np.zeros(n, dtype=bool)
    elif pa.types.is_floating(t):
        num = column.cast(pa.float64()).to_numpy().astype(np.float64, copy=False)
        blank = np.isnan(num)
        finite = np.isfinite(num)
        notint = ~blank & (~finite | (np.mod(np.where(finite, num, 0.0), 1.0) != 0.0))
        huge = ~blank & ~notint & (np.abs(np.where(finite, num, 0.0)) >= 2.0**63)
        if huge.any():
            part.reject(huge, field, [f"{field} {excerpt(v, 24)} is beyond the int64 range (it would wrap)"
                                      for v in num[huge].tolist()])
            notint = notint | huge
        plain = notint & ~huge
        if plain.any():
            part.reject(plain, field, [f"{field} {v!r} is not an integer" for v in num[plain].tolist()])
        below = ~blank & finite & (num < minimum)
        ints = np.where(~blank & ~notint & ~below, np.nan_to_num(num, nan=0.0, posinf=0.0, neginf=0.0),
                        0.0).astype(np.int64)
    else:  # text, and any other type read as its text
        codes, values = distinct(column)
        stripped = _stripped(values)
        blank_v = (stripped == "").to_numpy(dtype=bool)
        num_v = _numbers(stripped.where(~blank_v))
        finite_v = np.isfinite(num_v)
        notint_v = ~blank_v & (~finite_v | (np.mod(np.where(finite_v, num_v, 0.0), 1.0) != 0.0))
        huge_v = ~blank_v & ~notint_v & (out_of_range_int(values)
                                         | (np.abs(np.where(finite_v, num_v, 0.0)) >= 2.0**63))
        shown = values.to_numpy(dtype=object)
        blank = spread(blank_v, codes, True)
        huge = spread(huge_v, codes, False)
        if huge.any():
            part.reject(huge, field, [f"{field} {excerpt(v, 24)} is beyond the int64 range (it would wrap)"
                                      for v in shown[codes[huge]].tolist()])
        notint = spread(notint_v | huge_v, codes, False)
        plain = notint & ~huge
        if plain.any():
            part.reject(plain, field, [f"{field} {v!r} is not an integer"
                                       for v in shown[codes[plain]].tolist()])
        below = spread(~blank_v & finite_v & (num_v < minimum), codes, False)
        ok_v = ~blank_v & ~notint_v & ~huge_v & ~(finite_v & (num_v < minimum))
        ints = spread(np.where(ok_v, np.nan_to_num(num_v, nan=0.0, posinf=0.0, neginf=0.0), 0.0)
                       .astype(np.int64), codes, 0)
    if below.any():
        part.reject(below, field, f"{field} must be >= {minimum}")
    if required and blank.any():
        part.reject(blank, field, f"missing {field}")
    void = blank | notint | below | huge
    if not void.any():
        return ints if ints.flags.writeable else ints.copy()
    return pd.arrays.IntegerArray(np.where(void, 0, ints), void)


def na_ints(n: int) -> pd.arrays.IntegerArray:
    """Return a nullable integer array of ``n`` missing values."""
    return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))


def float_column(column: pa.ChunkedArray | pa.Array, *, part: Part, field: str,
                 minimum: float | None = 0.0) -> np.ndarray:
    """Return a column as float64 (NaN where blank); reject non-numbers and values below ``minimum``.

    A rejected value is NaN too.  Text is read as :func:`pandas.to_numeric` reads it.
    """
    column = _plain(column)
    t = column.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t):
        arr = contiguous(column.cast(pa.float64()))
        low, high = (arr.min(), arr.max()) if arr.size else (0.0, 0.0)
        if np.isfinite(low) and np.isfinite(high) and (minimum is None or low >= minimum):
            return arr  # every value a finite number in range (a NaN would show in both): no pass per row
        blank = np.isnan(arr)
        bad = ~blank & ~np.isfinite(arr)
        shown = arr
    else:
        codes, values = distinct(column)
        stripped = _stripped(values)
        blank_v = (stripped == "").to_numpy(dtype=bool)
        arr = spread(_numbers(stripped.where(~blank_v)), codes, np.nan)
        blank = spread(blank_v, codes, True)
        bad = ~blank & ~np.isfinite(arr)
        shown = spread(values.to_numpy(dtype=object), codes, np.nan)
    if bad.any():
        part.reject(bad, field, [f"{field} {v!r} is not a finite number" for v in shown[bad].tolist()])
    if minimum is not None:
        with np.errstate(invalid="ignore"):
            below = ~blank & np.isfinite(arr) & (arr < minimum)
        if below.any():
            part.reject(below, field, f"{field} must be >= {minimum:g}")
    if bad.any():
        arr = np.where(bad, np.nan, arr)
    return arr


def parse_times(column: pa.ChunkedArray | pa.Array, *, part: Part, field: str, tz: str | None,
                required: bool = True) -> pd.api.extensions.ExtensionArray:
    """Parse one time column to UTC times (:data:`TIME_DTYPE`); book what it finds.

    Zone-aware times are converted to UTC.  Naive ones are localised to ``tz`` as a named repair;
    without ``tz`` a column that is naive throughout raises :class:`InputError`, and naive rows among
    zone-aware ones (mixed) are rejected.  Times outside the plausible range are rejected.  A rejected
    time comes back as NaT.
    """
    return utc_array(_times_ns(_plain(column), part=part, field=field, tz=tz, required=required))


def _times_ns(column: pa.ChunkedArray, *, part: Part, field: str, tz: str | None,
              required: bool) -> np.ndarray:
    """:func:`parse_times` as int64 nanoseconds (NaT: the int64 minimum)."""
    n = len(column)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    t = column.type
    if pa.types.is_timestamp(t) and t.tz is not None and not column.null_count:  # zone-aware, none missing
        return _drop_implausible(_timestamp_ns(column)[0], part, field)
    if pa.types.is_timestamp(t):
        ns, missing = _timestamp_ns(column)
        if required and missing.any():
            part.reject(missing, field, f"missing {field}")
        naive = ~missing
        if t.tz is not None or not naive.any():
            return _drop_implausible(ns, part, field)
        beyond = naive & (np.abs(np.where(naive, ns, 0)) >= _EDGE_NS)
        if tz is not None and beyond.any():  # no zone can hold these: refused before they are placed in one
            part.reject(beyond, field, _plausible_reason(field, ns[beyond]))
            naive &= ~beyond
        return _naive_times(pd.Series(ns[naive].view("datetime64[ns]")), naive, np.zeros(n, dtype=bool),
                            np.full(n, _NAT, dtype=np.int64), part, field, tz)
    codes, values = distinct(column)
    text_v = _stripped(values)
    written = spread(text_v.to_numpy(dtype=object), codes, "")
    filled_v = (text_v != "").to_numpy(dtype=bool)
    missing = spread(~filled_v, codes, True)
    aware_v = text_v.str.contains(_ZONE_SUFFIX, regex=True).fillna(False).to_numpy(dtype=bool) & filled_v
    naive_v = filled_v & ~aware_v
    aware = spread(aware_v, codes, False)
    if required and missing.any():
        part.reject(missing, field, f"missing {field}")
    out = np.full(n, _NAT, dtype=np.int64)
    if aware.any():
        parsed = pd.to_datetime(text_v[aware_v], utc=True, format="ISO8601", errors="coerce")
        ns_rows, beyond = _spread_parsed(parsed, aware_v, codes, part, field, written)
        out[aware] = ns_rows[aware]
        bad = aware & (out == _NAT) & ~beyond
        part.reject(bad, field, [f"{field} {excerpt(v)} is not an ISO 8601 time"
                                 for v in written[bad].tolist()])
    naive = ~aware & ~missing
    if not naive.any():
        return _drop_implausible(out, part, field)
    naive_parsed = pd.to_datetime(text_v[naive_v], format="ISO8601", errors="coerce")
    ns_rows, beyond = _spread_parsed(naive_parsed, naive_v, codes, part, field, written)
    unparsed = naive & (ns_rows == _NAT)
    if unparsed.any():
        plain = unparsed & ~beyond
        part.reject(plain, field, [f"{field} {excerpt(v)} is not an ISO 8601 time"
                                   for v in written[plain].tolist()])
        naive = naive & ~unparsed
        if not naive.any():
            return _drop_implausible(out, part, field)
    if tz is not None and isinstance(naive_parsed.dtype, pd.DatetimeTZDtype):
        # pandas read a zone where the zone test found none (``14:0:15Z``): not ISO 8601 as written
        part.reject(naive, field, [f"{field} {excerpt(v)} is not an ISO 8601 time"
                                   for v in written[naive].tolist()])
        return _drop_implausible(out, part, field)
    return _naive_times(pd.Series(ns_rows[naive].view("datetime64[ns]")), naive, aware, out, part, field, tz)


def _spread_parsed(parsed: pd.Series, where: np.ndarray, codes: np.ndarray, part: Part, field: str,
                   written: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spread times parsed from the distinct texts at ``where`` to the rows; refuse those out of range.

    Returns each row's nanoseconds (NaT where not parsed or refused) and which rows were refused as
    outside the plausible range (quoting the text they were written as).
    """
    ns_v, beyond_v = _parsed_ns(parsed, where)
    beyond = spread(beyond_v, codes, False)
    if beyond.any():
        lim = current_limits()
        part.reject(beyond, field,
                    [f"{field} {excerpt(v, 32)} is outside the plausible range [{lim.earliest_year}-01-01, "
                     f"{lim.latest_year}-01-01) UTC (limits earliest_year, latest_year)"
                     for v in written[beyond].tolist()])
    return spread(ns_v, codes, _NAT), beyond


def _timestamp_ns(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Return an Arrow timestamp column as int64 nanoseconds (NaT where null; beyond the edge: pinned)."""
    per = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[column.type.unit]
    raw = column.cast(pa.int64())
    missing = (raw.is_null().to_numpy(zero_copy_only=False) if raw.null_count
               else np.zeros(len(raw), dtype=bool))
    values = contiguous(raw.fill_null(_NAT) if raw.null_count else raw)
    if per != 1:  # a time no nanosecond count can hold is pinned to the edge, where it is refused
        edge = _EDGE_NS // per
        values = np.where(missing, _NAT, np.clip(values, -edge, edge) * per)
    return values, missing


def _parsed_ns(parsed: pd.Series, where: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return parsed distinct times (any unit) as nanoseconds at ``where``, and which lie outside the range.

    The times outside the plausible range are NaT in the nanoseconds (they are refused, quoting the
    text they were written as).
    """
    size = where.size
    ns = np.full(size, _NAT, dtype=np.int64)
    beyond = np.zeros(size, dtype=bool)
    if not where.any():
        return ns, beyond
    out = outside_plausible(parsed)
    kept = pd.Series(parsed).where(~out)
    beyond[where] = out
    ns[where] = utc_ns(kept) if isinstance(kept.dtype, pd.DatetimeTZDtype) else _naive_ns(kept)
    return ns, beyond


def _naive_ns(times: pd.Series) -> np.ndarray:
    """Naive parsed times as int64 nanoseconds of their wall clock (NaT: the int64 minimum)."""
    if not pd.api.types.is_datetime64_dtype(times.dtype):  # nothing parsed: all NaT
        return np.full(len(times), _NAT, dtype=np.int64)
    return times.astype("datetime64[ns]").to_numpy().view("int64")


def _naive_times(naive_parsed: pd.Series, naive: np.ndarray, aware: np.ndarray, out: np.ndarray, part: Part,
                 field: str, tz: str | None) -> np.ndarray:
    """Place the naive times (wall clock, nanoseconds) of the ``naive`` rows in ``tz``, or refuse them."""
    if tz is None:
        if not aware.any():
            raise InputError("times carry no zone (naive); pass tz= to name the zone they were written "
                             "in, or write them with an offset such as 'Z'",
                             file=part.file, row=int(part.rows[int(np.argmax(naive))]), field=field)
        part.reject(naive, field, f"naive {field} among zone-aware times (mixed zones): the zone is unknown; "
                                  "pass tz= to name it")
        return _drop_implausible(out, part, field)
    try:
        placed = localize(naive_parsed, tz)  # DST nights: the module's stated rule, a named repair each
    except Exception as exc:  # an unknown zone name
        raise DomainError(f"tz={tz!r} is not a time zone pandas knows ({exc})") from exc
    out = out.copy()
    out[naive] = utc_ns(placed.utc)
    bad = naive & (out == _NAT)
    part.reject(bad, field, f"{field} is not a valid time in zone {tz}")
    part.repair(naive & ~bad, field, f"naive {field} localised to tz={tz}")
    fixed, reasons = placed.repairs(field)
    dst = np.zeros(naive.size, dtype=bool)
    dst[np.flatnonzero(naive)[fixed]] = True
    part.repair(dst, field, reasons)
    return _drop_implausible(out, part, field)


# ---------------------------------------------------------------------------------------------------
# Shared checks on the canonical tables (vectorised)
#
# Working frames carry each record's ``_file`` and ``_row``; a frame may also carry ``_job``, each
# row's job id as its rank in text order among the frame's job ids, which saves the checks a pass
# over the text.  A frame joined from several parts drops it (:func:`concat_frames`).
# ---------------------------------------------------------------------------------------------------


def _job_codes(frame: pd.DataFrame) -> np.ndarray:
    """Job ids as integers in text order (missing last): ``_job`` where the frame carries it."""
    if "_job" in frame.columns:
        return frame["_job"].to_numpy()
    codes, uniques = pd.factorize(frame["job_id"], sort=True)
    codes = codes.astype(np.int64, copy=False)
    if (codes < 0).any():
        codes = np.where(codes < 0, len(uniques), codes)
    return codes


def _sort_codes(values: pd.Series) -> np.ndarray:
    """Integers that sort like ``values`` does in :meth:`pandas.DataFrame.sort_values` (missing last)."""
    if isinstance(values.dtype, pd.DatetimeTZDtype) or pd.api.types.is_datetime64_dtype(values.dtype):
        ns = utc_ns(values) if isinstance(values.dtype, pd.DatetimeTZDtype) else \
            values.astype("datetime64[ns]").to_numpy().view("int64")
        return np.where(ns == _NAT, np.iinfo(np.int64).max, ns) if (ns == _NAT).any() else ns
    if values.dtype.kind in "iub":
        return values.to_numpy(dtype=np.int64)
    if isinstance(values.dtype, pd.Int64Dtype) and not values.isna().any():
        return values.to_numpy(dtype=np.int64)
    codes, uniques = pd.factorize(values, sort=True)
    codes = codes.astype(np.int64, copy=False)
    return np.where(codes < 0, len(uniques), codes) if (codes < 0).any() else codes


#: Rows per block of the scans below: their temporaries stay small (cached, no fresh pages).
_BLOCK = 1 << 16


def _blocks(n: int, overlap: int = 0) -> Iterator[tuple[int, int]]:
    """Bounds ``(i, j)`` of blocks covering ``range(n - overlap)``."""
    for i in range(0, max(n - overlap, 0), _BLOCK):
        yield i, min(i + _BLOCK, n - overlap)


def _span_flags(start: np.ndarray, end: np.ndarray, wait: np.ndarray) -> tuple[bool, bool]:
    """Whether any step ends at or before its start; whether any other's wait is longer than the step."""
    any_bad = any_over = False
    for i, j in _blocks(start.size):
        span = end[i:j] - start[i:j]
        shortest = span.min()
        if shortest <= 0:
            any_bad = True
            any_over = any_over or bool(((wait[i:j] > span / NS_PER_S) & (span > 0)).any())
        elif not any_over and wait[i:j].max() > shortest / NS_PER_S:  # a wait longer than some step here
            any_over = bool((wait[i:j] > span / NS_PER_S).any())
    return any_bad, any_over


def _any_pair(keys: Sequence[np.ndarray], test: Any = None) -> bool:
    """Whether neighbouring rows equal on every key (and passing ``test(i, j)`` over a block) exist.

    The most selective key should come first: the others are compared only where it holds.
    """
    for i, j in _blocks(keys[0].size, 1):
        hit = test(i, j) if test is not None else None
        for k in keys:
            same = k[i + 1:j + 1] == k[i:j]
            hit = same if hit is None else hit & same
            if not hit.any():
                break
        else:
            return True
    return False


def _in_order(keys: Sequence[np.ndarray]) -> bool:
    """Whether the rows are sorted by ``keys`` (major first), neighbour by neighbour."""
    for i, j in _blocks(keys[0].size, 1):
        undecided = np.ones(j - i, dtype=bool)  # pairs equal on every key so far
        for k in keys:
            before, after = k[i:j], k[i + 1:j + 1]
            if (undecided & (after < before)).any():
                return False
            undecided &= after == before
            if not undecided.any():
                break
    return True


def _sort_order(keys: Sequence[np.ndarray]) -> np.ndarray | None:
    """Return the stable sort of rows by ``keys`` (major first); None when they are in that order already."""
    return None if _in_order(keys) else np.lexsort(tuple(keys[::-1]))


def _listed_order(frame: pd.DataFrame, *, by_name: bool) -> np.ndarray | None:
    """Return the order the rows were listed in: by file, then row (None: the frame's own order).

    Files come in the order they were given (``by_name=False``) or as :meth:`pandas.DataFrame.sort_values`
    orders the ``_file`` column (``by_name=True``: a categorical's categories, else the names).
    """
    files = frame["_file"]
    rows = frame["_row"].to_numpy(dtype=np.int64)
    if isinstance(files.dtype, pd.CategoricalDtype) and len(files.cat.categories) == 1:
        return _sort_order([rows])  # one file: its rows
    if isinstance(files.dtype, pd.CategoricalDtype) and by_name:
        file_codes = np.asarray(files.array.codes, dtype=np.int64)
    else:
        file_codes = pd.factorize(files, sort=by_name)[0].astype(np.int64, copy=False)
    return _sort_order([file_codes, rows])


def _late(keys: Sequence[np.ndarray], t: np.ndarray, pos: np.ndarray | None) -> np.ndarray:
    """Rows whose time is earlier than a row of the same group (``keys``) listed before them.

    ``pos``: the order the rows were listed in (None: the frame's order).
    """
    n = t.size
    if n == 0:
        return np.zeros(0, dtype=bool)
    if pos is not None:
        keys = [k[pos] for k in keys]
        t = t[pos]
    change = np.zeros(n - 1, dtype=bool)
    for k in keys:
        change |= k[1:] != k[:-1]
    new = np.r_[True, change]
    starts = np.flatnonzero(new)
    run_keys = [k[starts] for k in keys]
    run_order = np.lexsort(tuple(run_keys[::-1]))
    same = np.ones(max(starts.size - 1, 0), dtype=bool)
    for k in run_keys:
        ks = k[run_order]
        same &= ks[1:] == ks[:-1]
    if not same.any():  # each group is one run of rows, in listed order
        late = _late_in_runs(t, new)
    else:
        grp = np.lexsort((np.arange(n), *keys[::-1]))  # stable grouping
        grp_change = np.zeros(n - 1, dtype=bool)
        for k in keys:
            kg = k[grp]
            grp_change |= kg[1:] != kg[:-1]
        late = np.zeros(n, dtype=bool)
        late[grp] = _late_in_runs(t[grp], np.r_[True, grp_change])
    if pos is None:
        return late
    out = np.zeros(n, dtype=bool)
    out[pos] = late
    return out


def _late_in_runs(t: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Within runs of rows (``new`` marks each run's first row): rows earlier than a row before them."""
    if not ((t[1:] < t[:-1]) & ~new[1:]).any():
        return np.zeros(t.size, dtype=bool)
    seg = np.cumsum(new) - 1
    s = pd.Series(t).groupby(seg).cummax().to_numpy()
    prev = np.r_[np.iinfo(np.int64).min, s[:-1]]
    prev[new] = np.iinfo(np.int64).min
    return t < prev


def out_of_order(frame: pd.DataFrame, keys: list[str], time_col: str) -> np.ndarray:
    """Rows whose time is earlier than a row listed before them in the same group (input order)."""
    if frame.empty:
        return np.zeros(0, dtype=bool)
    codes = [(_job_codes(frame) if k == "job_id" else pd.factorize(frame[k])[0].astype(np.int64))
             for k in keys]
    late = _late(codes, utc_ns(frame[time_col]), _listed_order(frame, by_name=True))
    missing = np.zeros(len(frame), dtype=bool)
    for k in keys:
        missing |= frame[k].isna().to_numpy()
    return late & ~missing


def check_steps(steps: pd.DataFrame, books: Mapping[str, FileBook], *,
                reorder_is_repair: bool) -> pd.DataFrame:
    """Reject impossible steps, duplicates and overlaps; repair (or just sort) out-of-order rows.

    Works on integer arrays (job codes, nanoseconds); rows already in order cost a pass, not a sort,
    and Python-level work is spent only on the rows that are rejected or repaired.
    """
    steps = drop_rejected(steps, books)
    if steps.empty:
        return steps
    start, end = utc_ns(steps["start"]), utc_ns(steps["end"])
    wait = steps["input_wait_s"].to_numpy(dtype=np.float64)
    any_bad, any_over = _span_flags(start, end, wait)
    if any_bad:
        bad = end <= start
        b = steps[bad]
        reject(books, b, "end", [f"step {s} ends at {format_time(e)}, not after its start {format_time(t)}"
                                 for s, e, t in zip(b["step"], b["end"], b["start"], strict=True)])
    if any_over:
        over = wait > (end - start) / NS_PER_S
        if any_bad:
            over &= ~bad
        reject(books, steps[over], "input_wait_s", "input wait is longer than the step itself")
    if any_bad or any_over:
        steps = drop_rejected(steps, books)
        if steps.empty:
            return steps
        start, end = utc_ns(steps["start"]), utc_ns(steps["end"])
    job = _job_codes(steps)
    att = steps["attempt"].to_numpy(dtype=np.int64)
    num = steps["step"].to_numpy(dtype=np.int64)
    row = steps["_row"].to_numpy(dtype=np.int64)
    # sort by job and start; a step number may repeat within an attempt (re-run after an in-place
    # restore), but two records of one step starting at the same instant are a copy or a conflict
    order = _sort_order([job, start, att, num, row])
    # rows out of time order within (job, attempt), in input order (none when the rows were listed in
    # the sorted order)
    if reorder_is_repair:
        listed = _listed_order(steps, by_name=False)
        if listed is not None or order is not None:
            late = _late([job, att], start, listed)
            if late.any():
                repair(books, steps[late], "start", "listed out of time order: moved into time order")
    if order is not None:
        steps = steps.iloc[order].reset_index(drop=True)
        job, att, num = job[order], att[order], num[order]
        start, end = start[order], end[order]
    elif not isinstance(steps.index, pd.RangeIndex) or steps.index.start != 0 or steps.index.step != 1:
        steps = steps.reset_index(drop=True)
    if _any_pair([start, job, att, num]):  # two records of one step at one start
        same_key = np.r_[False, (job[1:] == job[:-1]) & (start[1:] == start[:-1]) & (att[1:] == att[:-1])
                         & (num[1:] == num[:-1])]
        wait = steps["input_wait_s"].to_numpy(dtype=np.float64)
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
    # a step starting before the one before it in its job ends
    if _any_pair([job], lambda i, j: start[i + 1:j + 1] < end[i:j]):  # (rare, except across jobs)
        overlap = np.r_[False, (job[1:] == job[:-1]) & (start[1:] < end[:-1])]
        o = steps[overlap]
        i = np.flatnonzero(overlap)
        gap = (end[i - 1] - start[i]) / NS_PER_S
        reject(books, o, "start", [f"step {s} overlaps the step before it (step {int(p)}) by {g:.6g} s: "
                                   "steps of one job must not overlap" for s, p, g in
                                   zip(o["step"], num[i - 1], gap, strict=True)])
        steps = steps[~overlap].reset_index(drop=True)
    return steps


def _tied(keys: Sequence[np.ndarray]) -> np.ndarray:
    """Rows that share every key with another row."""
    order = _sort_order(keys)
    ks = [k if order is None else k[order] for k in keys]
    if not _any_pair(ks[::-1]):  # no two neighbours alike (the minor key first: it rarely ties)
        return np.zeros(ks[0].size, dtype=bool)
    eq = np.ones(ks[0].size - 1, dtype=bool) if ks[0].size else np.zeros(0, dtype=bool)
    for k in ks:
        eq &= k[1:] == k[:-1]
    tied = np.r_[eq, False] | np.r_[False, eq] if eq.size else np.zeros(ks[0].size, dtype=bool)
    if order is None:
        return tied
    out = np.zeros(tied.size, dtype=bool)
    out[order] = tied
    return out


def _kind_codes(events: pd.DataFrame) -> tuple[np.ndarray, pd.Series]:
    """Return each event's kind as a code and the distinct kinds (objects; a missing kind: NaN, last)."""
    codes, uniques = pd.factorize(events["kind"])
    kinds = pd.Series(np.append(np.asarray(uniques, dtype=object), np.nan), dtype=object)
    return (np.where(codes < 0, len(uniques), codes) if (codes < 0).any() else codes), kinds


def _event_order(events: pd.DataFrame, kind_codes: tuple[np.ndarray, pd.Series] | None = None
                 ) -> np.ndarray | None:
    """Return the order of :func:`sort_events` (None: the rows are in it already)."""
    codes, kinds = kind_codes if kind_codes is not None else _kind_codes(events)
    rank = kinds.map(_KIND_RANK).fillna(len(_KIND_RANK) // 2).to_numpy(dtype=np.float64)[codes]
    return _sort_order([_job_codes(events), _sort_codes(events["time"]), _sort_codes(events["attempt"]),
                        rank])


def check_events(events: pd.DataFrame, books: Mapping[str, FileBook], *, reorder_is_repair: bool,
                 flag_unknown: bool = True) -> pd.DataFrame:
    """Reject duplicate events, flag unknown kinds, repair (or just sort) out-of-order rows."""
    events = drop_rejected(events, books)
    if events.empty:
        return events
    # duplicates share job and time: only rows that tie on both are compared in full
    tied = _tied([_job_codes(events), utc_ns(events["time"])])
    if tied.any():
        key = ["job_id", "attempt", "time", "kind", "step", "duration_s"]
        sub = events[tied]
        filled = sub.fillna({"duration_s": -1.0})
        dup = filled.duplicated(key, keep="first").to_numpy()
        if dup.any():
            first = filled.groupby(key, sort=False, dropna=False)["_row"].transform("first")
            d = sub[dup]
            reject(books, d, "kind", [f"duplicate of the {k} event at row {r}"
                                      for k, r in zip(d["kind"], first[dup], strict=True)])
            events = drop_rejected(events, books)
    kind_codes = _kind_codes(events)
    if flag_unknown:
        codes, kinds = kind_codes
        unknown = ~known_event_kinds(kinds)[codes]
        if unknown.any():
            u = events[unknown]
            flag(books, u, "unknown_event_kind",
                 [f"event kind {str(k)!r} is not one the runtime partition knows: kept, not charged to any "
                  "category" for k in u["kind"]], "time")
    order = _event_order(events, kind_codes)
    if reorder_is_repair:
        # rows listed in the sorted order, with every time present, are in time order in each job
        listed = _listed_order(events, by_name=True)
        if listed is not None or order is not None or utc_ns(events["time"]).min() == _NAT:
            late = out_of_order(events, ["job_id"], "time")
            if late.any():
                repair(books, events[late], "time", "listed out of time order: moved into time order")
    return events.reset_index(drop=True) if order is None else events.iloc[order].reset_index(drop=True)


def sort_events(events: pd.DataFrame) -> pd.DataFrame:
    """Sort by job, time, attempt and, among simultaneous events, a natural kind order."""
    if events.empty:
        return events
    order = _event_order(events)
    return events.reset_index(drop=True) if order is None else events.iloc[order].reset_index(drop=True)


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
        # a failure is followed by a restart when its job has a later attempt or a later restart; the
        # events answer for almost every failure, so the steps (millions of rows) are looked at only for
        # the jobs of the failures the events leave alone
        restart_kinds = events[events["kind"].isin(["restore", "gang_complete"])]
        last_restart = restart_kinds.groupby("job_id")["time"].max()
        f = failures.assign(_last_attempt=failures["job_id"].map(events.groupby("job_id")["attempt"].max()),
                            _last_restart=failures["job_id"].map(last_restart))
        later_attempt = (f["_last_attempt"] > f["attempt"]).to_numpy()
        later_restart = (f["_last_restart"] > f["time"]).fillna(False).to_numpy(dtype=bool)
        alone = ~later_attempt & ~later_restart
        if alone.any() and not steps.empty:
            jobs = steps["job_id"]
            of_alone = jobs.isin(pd.unique(f.loc[alone, "job_id"])).to_numpy(dtype=bool)
            last_step_attempt = steps.loc[of_alone].groupby("job_id")["attempt"].max()
            alone &= ~(f["job_id"].map(last_step_attempt) > f["attempt"]).fillna(False).to_numpy(dtype=bool)
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
    rows = (frame["_row"] if frame["_row"].dtype == np.int64
            else pd.to_numeric(frame["_row"], errors="coerce").fillna(0))
    return {"source_file": source_file, "source_row": _owned(rows, np.int64)}


def _owned(column: pd.Series, dtype: Any) -> pd.Series:
    """Return a working-frame column for a canonical table, as ``dtype``, indexed by position.

    The series shares the working frame's memory without a copy, and pandas' copy-on-write gives the
    caller's first edit its own copy (a numpy view of the column would be read-only, and would make
    ``table.loc[0, "attempt"] = 9`` fail in the caller's hands).
    """
    return column.astype(dtype).set_axis(pd.RangeIndex(len(column)))


def finalise_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """Return the canonical steps table of a checked working frame (:func:`check_steps` sorted it)."""
    if steps.empty:
        return empty_steps()
    return pd.DataFrame({
        "job_id": steps["job_id"].astype("str").array,
        "attempt": _owned(steps["attempt"], np.int64),
        "step": _owned(steps["step"], np.int64),
        "start": steps["start"].astype(TIME_DTYPE).array,
        "end": steps["end"].astype(TIME_DTYPE).array,
        "input_wait_s": _owned(steps["input_wait_s"], np.float64),
        **_provenance(steps),
    }, copy=False)


def finalise_events(events: pd.DataFrame, extra: Sequence[str] = (), *,
                    in_order: bool = False) -> pd.DataFrame:
    """Return the canonical events table of a checked working frame, plus the ``extra`` columns.

    ``in_order``: the rows are in the table's order already (:func:`check_events` sorted them, job ids
    being text), so they are not sorted again.
    """
    if events.empty:
        out = empty_events()
        for col in extra:
            out[col] = pd.Series([], dtype="object")
        return out
    step = events["step"]
    out = pd.DataFrame({
        "job_id": pd.Series(events["job_id"].astype("str").array),
        "attempt": _owned(events["attempt"], np.int64),
        "time": events["time"].astype(TIME_DTYPE).array,
        "kind": pd.Series(events["kind"].astype("str").array),
        "step": (step.array.copy() if isinstance(step.dtype, pd.Int64Dtype)
                 else pd.array(step.to_numpy(), dtype="Int64") if step.dtype == np.int64
                 else pd.array(step.to_numpy(dtype=object), dtype="Int64")),
        "duration_s": pd.array(events["duration_s"].astype("float64").to_numpy(), dtype="Float64"),
        **_provenance(events),
    }, copy=False)
    for col in DEVICE_COLUMNS:  # an elastic job's device counts, when the reader found any
        if col in events.columns and events[col].notna().any():
            out[col] = pd.array(events[col].to_numpy(dtype=object), dtype="Int64")
    for col in extra:
        out[col] = events[col].to_numpy()
    return out if in_order else sort_events(out)


def file_stem(path: Path) -> str:
    """Return the file name without its suffix, and without ``.gz`` first (``log.txt.gz`` -> ``log``)."""
    name = path.name[:-3] if path.name.lower().endswith(".gz") else path.name
    return Path(name).stem


def _suffix(path: PathLike) -> str:
    """Return the file's suffix in lower case, under a ``.gz`` (``steps.csv.gz`` -> ``.csv``)."""
    name = path_view(path).name
    name = name[:-3] if name.lower().endswith(".gz") else name
    return Path(name).suffix.lower()


def concat_frames(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Join working frames (the empty ones left out); ``_job`` ranks are dropped when several are joined."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    out = pd.concat(frames, ignore_index=True)
    return out.drop(columns="_job") if "_job" in out.columns else out


# ---------------------------------------------------------------------------------------------------
# Shared table loading (CSV / Parquet) and attempt assignment
# ---------------------------------------------------------------------------------------------------


#: The first bytes of a Parquet file.
PARQUET_MAGIC = b"PAR1"


def load_table(path: PathLike) -> tuple[pa.Table, np.ndarray, bool]:
    """Read a CSV or Parquet file into one Arrow table; return it, its row numbers and truncation.

    A CSV is read by pandas' tokenizer, every cell as text (an empty cell missing), so that a row
    number is the row's line; a Parquet file keeps its column types (a column pandas would make the
    index is dropped, as pandas drops it).  Column names are stripped and lower-cased.

    Raises
    ------
    InputError
        A file that cannot be read, an empty CSV, two columns of one name.
    """
    raw = read_bytes(path)  # plain or gzip, by the bytes; a missing or irregular file is refused
    if _suffix(path) in (".parquet", ".pq") or bytes(raw[:4]) == PARQUET_MAGIC:
        try:
            table = pq.read_table(io.BytesIO(raw))
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise InputError(f"not a readable Parquet file ({exc})", file=str(path)) from exc
        meta = table.schema.pandas_metadata or {}
        index = [c for c in meta.get("index_columns", []) if isinstance(c, str)]
        if index:
            table = table.drop_columns([c for c in index if c in table.column_names])
        rows = np.arange(1, table.num_rows + 1, dtype=np.int64)
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
        table = pa.Table.from_arrays(
            [pa.array(df.iloc[:, i].to_numpy(dtype=object), type=pa.string(), from_pandas=True)
             for i in range(df.shape[1])], names=[str(c) for c in df.columns])
        rows = np.arange(2, len(df) + 2, dtype=np.int64)
    names = [str(c).strip().lower() for c in table.column_names]
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise InputError(f"two columns are named {twice[0]!r} (names are read without case or surrounding "
                         "spaces): keep one", file=str(path), row=1, field=twice[0])
    return table.rename_columns(names), rows, truncated


def blank_rows(table: pa.Table) -> np.ndarray:
    """Rows with every cell missing (a blank CSV line)."""
    n = table.num_rows
    for col in table.columns:  # a column with no missing cell has no blank row
        t = col.type
        if col.null_count == 0 and not pa.types.is_floating(t) and not pa.types.is_dictionary(t):
            return np.zeros(n, dtype=bool)
    blank = np.ones(n, dtype=bool)
    for col in table.columns:
        blank &= distinct(col)[0] < 0
        if not blank.any():
            break
    return blank


def take_rows(table: pa.Table, part: Part, mask: np.ndarray) -> tuple[pa.Table, Part]:
    """Return the masked rows of a table and of its part (slices, not copies, when they are one run)."""
    count = int(np.count_nonzero(mask))
    if count == table.num_rows:
        return table, part
    first = int(np.argmax(mask)) if count else 0
    if count and mask[first:first + count].all():  # one run of rows
        return table.slice(first, count), part.subset(slice(first, first + count))
    pos = np.flatnonzero(mask)
    return table.take(pa.array(pos)), part.subset(pos)


def apply_aliases(table: pa.Table, aliases: Mapping[str, Sequence[str]], file: str) -> pa.Table:
    """Rename alias columns to canonical names; convert unit-suffixed columns."""
    names = table.column_names
    rename = {}
    for canon, alts in aliases.items():
        present = [c for c in (canon, *alts) if c in names]
        if len(present) > 1:
            raise InputError(f"columns {present} all name {canon!r}: keep one", file=file, row=1, field=canon)
        if present and present[0] != canon:
            rename[present[0]] = canon
    if rename:
        table = table.rename_columns([rename.get(c, c) for c in names])
    for canon in ("start", "end", "time"):
        if canon in aliases and canon not in table.column_names:
            for unit, scale in (("unix_s", 1.0), ("unix_ms", 1e-3)):
                col = f"{canon}_{unit}"
                if col in table.column_names:
                    secs = numbers(table.column(col)) * scale
                    ns = utc_ns(posix_s_to_utc(secs))
                    times = pa.array(ns, type=pa.timestamp("ns", tz="UTC"), mask=ns == _NAT)
                    table = table.drop_columns([col]).append_column(canon, times)
                    break
    for canon in ("input_wait_s", "duration_s"):
        if canon not in aliases or canon in table.column_names:
            continue
        ms_names = [n[:-2] + "_ms" for n in (canon, *aliases[canon]) if n.endswith("_s")]
        present = [n for n in ms_names if n in table.column_names]
        if len(present) > 1:
            raise InputError(f"columns {present} all name {canon!r}: keep one", file=file, row=1, field=canon)
        if present:
            ms = present[0]
            secs = numbers(table.column(ms)) / 1000.0
            table = table.drop_columns([ms]).append_column(canon, pa.array(secs, type=pa.float64()))
    return table


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
