"""The fast path of the canonical reader: Parquet files whose columns are already canonical-typed.

:func:`fleetlib.runtime.readers.read_canonical` tries :func:`read_fast` first.  It decodes the file
with pyarrow straight into numpy and runs every check the general path runs, as whole-array
operations: the columns and their types, nulls, the int64 range (the general path reads integers
through float64, so only magnitudes below 2**53 are taken here), the plausible time range, a step
ending after it starts, the input wait fitting in its step, kinds already normalised, duplicate
steps and events, overlapping steps, rows in time order.  When every check passes it builds exactly
the tables and the ledger the general path returns (the identity is tested).  When any check does
not pass, or anything is unusual (another layout or type, several steps or events tables in one
call, naive or non-UTC zones, text that needs stripping, a column pandas reads as the index), it
returns ``None`` and the general path reads the files, naming the rows it rejects or repairs.

What a clean file can still carry is recorded exactly as the general path records it, by the
general path's own functions on the same rows: attempts assigned from ``gang_complete`` markers when
the attempt column is missing (and restarts inferred from step numbers, flagged), unknown event kinds
flagged, restores to uncommitted steps and failures without a restart (the cross checks).

:func:`read_parsed` stops before the frames: the checked columns as numpy arrays, which the fleet
engine's timeline task hands straight to the measurement (:mod:`fleetlib.runtime._handoff`);
``_finish`` builds from them exactly what :func:`read_fast` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy import lexsort as _lexsort

from fleetlib._io import read_bytes, time_range
from fleetlib.quality import Ledger
from fleetlib.runtime.readers._common import (
    _KIND_RANK,
    _NS_PER_S,
    _PARQUET_MAGIC,
    _TIME_DTYPE,
    PathLike,
    TimelineTables,
    _as_paths,
    _attempts_from_bounds,
    _close,
    _cross_checks,
    _file_column,
    _FileBook,
    _finalise_events,
    _finalise_steps,
    _flag,
    _implausible_ns,
    _kind_is_known,
    _utc,
)
from fleetlib.runtime.schema import PARQUET_COLUMNS

#: Integers the general path reads exactly (it passes them through float64).
_EXACT_INT = 2**53
#: Zone names of a Parquet timestamp column taken as UTC here (anything else: the general path).
_UTC_NAMES = frozenset({"UTC", "utc", "Etc/UTC", "+00:00", "Z"})
#: The text dtype of the canonical tables' job id and kind columns.
_STR = pd.StringDtype("pyarrow", na_value=np.nan)


class _Unusual(Exception):
    """Raised inside the fast path when the general path must read the files."""


def read_fast(paths: PathLike | Sequence[PathLike], *, tz: str | None = None,
              job_id: str | None = None, job_codes: bool = False) -> tuple[TimelineTables, Ledger] | None:
    """Read canonical-typed Parquet timelines fast, or return None when the general path must.

    Parameters
    ----------
    paths
        One path or several, as :func:`~fleetlib.runtime.readers.read_canonical` takes them.
    tz, job_id
        As in :func:`~fleetlib.runtime.readers.read_canonical`; a file this path takes has zone-aware
        times and a job id on every row, so neither changes what it reads.
    job_codes
        Return the steps' ``job_id`` as a categorical (categories: the job ids in text order) instead of
        text: the same ids, the same rows and ledger, without a text value per step (what the fleet
        engine measures from; :func:`~fleetlib.runtime.timeline.job_timelines` takes either).

    Returns
    -------
    tuple of (TimelineTables, Ledger) or None
        The tables and ledger the general path would return, or None to have the general path read.
    """
    del tz, job_id  # a file this path takes never needs them
    try:
        import pyarrow as pa  # noqa: F401  (optional dependency: no pyarrow, no fast path)
    except ImportError:  # pragma: no cover
        return None
    try:
        files = _as_paths(paths)
    except Exception:  # the general path refuses the paths with its own message
        return None
    try:
        return _read(files, job_codes=job_codes)
    except _Unusual:
        return None


class _Parsed:
    """One fast-path read, checked, before any frame is built: each part's columns and the row books.

    ``s`` and ``e``: the steps and events parts (:func:`_parse_steps`, :func:`_parse_events`, with the
    events' table order and checks of :func:`_check_events`), None where the files hold none.
    """

    __slots__ = ("books", "e", "s")

    def __init__(self, s: dict[str, Any] | None, e: dict[str, Any] | None,
                 books: dict[str, _FileBook]) -> None:
        self.s, self.e, self.books = s, e, books

    @property
    def needs_cross_checks(self) -> bool:
        """Whether the reader's cross checks (restores, failures) must look at the built frames."""
        return self.e is not None and bool(set(self.e["kinds"]) & {"restore", "failure"})


def read_parsed(path: PathLike) -> _Parsed | None:
    """Return the fast path's checked columns of one file, before any frame is built (None: not this path).

    Internal (the fleet engine's timeline task measures from these arrays):
    ``_finish(read_parsed(path), job_codes)`` is exactly what :func:`read_fast` returns.
    """
    try:
        import pyarrow as pa  # noqa: F401
    except ImportError:  # pragma: no cover
        return None
    try:
        files = _as_paths(path)
    except Exception:
        return None
    try:
        return _parse(files)
    except _Unusual:
        return None


def _read(paths: list[Path], *, job_codes: bool = False) -> tuple[TimelineTables, Ledger]:
    return _finish(_parse(paths), job_codes)


def _parse(paths: list[Path]) -> _Parsed:
    """Decode and check every file (raises :class:`_Unusual`); record unknown kinds and attempts."""
    books: dict[str, _FileBook] = {}
    steps_part: tuple[str, Any, np.ndarray] | None = None
    events_part: tuple[str, Any, np.ndarray] | None = None
    for path in paths:
        file = str(path)
        if file in books:
            raise _Unusual
        table = _load(path)
        books[file] = _FileBook(file, table.num_rows)  # rows 1 .. n
        rows = books[file].rows
        for what, positions in _split(table):
            if positions is None:
                sub, part_rows = table, rows
            elif isinstance(positions, slice):  # one run of rows: a slice of the table and of its rows
                sub = table.slice(positions.start, positions.stop - positions.start)
                part_rows = rows[positions]
            else:
                sub, part_rows = _rows_of(table, positions), positions + 1
            part = (file, sub, part_rows)
            if what == "steps":
                if steps_part is not None:
                    raise _Unusual
                steps_part = part
            else:
                if events_part is not None:
                    raise _Unusual
                events_part = part
    s = _parse_steps(*steps_part) if steps_part is not None else None
    e = _parse_events(*events_part) if events_part is not None else None
    if (s is not None and s["attempt"] is None) or (e is not None and e["attempt"] is None):
        _assign_attempts(s, e, books)
    if e is not None:
        _check_events(e, books)
    return _Parsed(s, e, books)


def _finish(p: _Parsed, job_codes: bool) -> tuple[TimelineTables, Ledger]:
    """Build the canonical frames of a parsed read, run the cross checks and close the ledger."""
    s, e, books = p.s, p.e, p.books
    steps = _build_steps(s, job_codes) if s is not None else _finalise_steps(pd.DataFrame())
    events = _build_events(e) if e is not None else _finalise_events(pd.DataFrame())
    if p.needs_cross_checks:  # the cross checks look at nothing else
        work = events.assign(_file=events["source_file"], _row=events["source_row"])
        _cross_checks(_check_steps(steps, s, job_codes), work, books)
    return TimelineTables(steps, events), _close(books)


def _load(path: Path) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        raw = read_bytes(path)
    except Exception as exc:  # the general path refuses the file with its own message
        raise _Unusual from exc
    if bytes(raw[:4]) != _PARQUET_MAGIC:
        raise _Unusual
    try:
        table = pq.read_table(pa.py_buffer(raw))
    except Exception as exc:  # a damaged file: the general path names it
        raise _Unusual from exc
    meta = table.schema.pandas_metadata or {}
    if any(isinstance(c, str) for c in meta.get("index_columns", [])):  # pandas reads these as the index
        raise _Unusual
    names = [str(c).strip().lower() for c in table.column_names]
    if len(set(names)) != len(names) or not set(names) <= set(PARQUET_COLUMNS) or table.num_rows == 0:
        raise _Unusual
    return table.rename_columns(names)


def _split(table: Any) -> list[tuple[str, np.ndarray | slice | None]]:
    """Return the steps and events rows of a file: ``(what, positions, a slice of one run, or None: all)``."""
    names = set(table.column_names)
    if "record" not in names:
        has_s, has_e = "start" in names, "kind" in names
        if has_s == has_e:
            raise _Unusual
        return [("steps" if has_s else "events", None)]
    codes, values = _text_codes(table.column("record"))
    values = [v.lower() for v in values]
    if not set(values) <= {"step", "event"}:
        raise _Unusual
    out = []
    for what, word in (("steps", "step"), ("events", "event")):
        if word in values:
            which = [i for i, v in enumerate(values) if v == word]
            mask = codes == which[0] if len(which) == 1 else np.isin(codes, which)
            count = int(np.count_nonzero(mask))
            first = int(np.argmax(mask)) if count else 0
            if count and mask[first:first + count].all():  # one run of rows: not searched
                out.append((what, slice(first, first + count)))
            elif count:
                out.append((what, np.flatnonzero(mask)))
    return out


def _rows_of(table: Any, positions: np.ndarray) -> Any:
    if positions[-1] - positions[0] == positions.size - 1:  # one run of rows: a slice, no copy
        return table.slice(int(positions[0]), int(positions.size))
    import pyarrow as pa

    return table.take(pa.array(positions))


def _text_codes(column: Any) -> tuple[np.ndarray, list[str]]:
    """Codes and distinct values of a text column (no nulls, no blank or unstripped value).

    The codes keep the dictionary's own integer type (int32 from Parquet): they only index.
    """
    import pyarrow as pa

    if column.null_count:
        raise _Unusual
    t = column.type
    if pa.types.is_dictionary(t):
        if not (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)):
            raise _Unusual
        chunks = column.chunks
        if len(chunks) > 1 and not all(c.dictionary.equals(chunks[0].dictionary) for c in chunks[1:]):
            chunks = column.unify_dictionaries().chunks  # one dictionary for every chunk's codes
        values = chunks[0].dictionary.to_pylist() if chunks else []
        codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks])
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        enc = column.combine_chunks().dictionary_encode()
        values = enc.dictionary.to_pylist()
        codes = enc.indices.to_numpy(zero_copy_only=False)
    else:
        raise _Unusual
    if any(v is None or v != v.strip() or v == "" for v in values):
        raise _Unusual
    if len(set(values)) != len(values):  # one text under two codes: give it one
        uniq, inverse = np.unique(np.asarray(values, dtype=object), return_inverse=True)
        return inverse[codes], list(uniq)
    return codes, values


def _ints(column: Any, *, nullable: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Non-negative integers read exactly (and the mask of nulls, where they may be null)."""
    import pyarrow as pa

    if not pa.types.is_integer(column.type) and not (nullable and pa.types.is_null(column.type)):
        raise _Unusual
    if column.null_count and not nullable:
        raise _Unusual
    try:
        filled = column.cast(pa.int64()).fill_null(0) if column.null_count else column.cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Unusual from exc
    if len(filled) and not _within(filled, 0, _EXACT_INT):
        raise _Unusual
    values = _writable(filled.to_numpy())
    mask = column.is_null().to_numpy() if column.null_count else None
    return values, mask


def _times(column: Any) -> np.ndarray:
    """Zone-aware (UTC) times as int64 nanoseconds: none missing, all in the plausible range."""
    import pyarrow as pa

    t = column.type
    if not pa.types.is_timestamp(t) or t.tz not in _UTC_NAMES or column.null_count:
        raise _Unusual
    try:
        ns_column = column.cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64())
        ns = ns_column.to_numpy()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:  # beyond what nanoseconds hold
        raise _Unusual from exc
    # every time in range (one reduction of the arrow column, no temporaries), or the full check
    lo, hi = (t.value for t in time_range())
    if ns.size and not _within(ns_column, lo, hi) and _implausible_ns(ns).any():
        raise _Unusual
    return _writable(ns)


def _within(column: Any, lo: int, hi: int) -> bool:
    """Whether every value of a non-empty integer column (no nulls) is in ``[lo, hi)``: one pass."""
    import pyarrow.compute as pc

    bounds = pc.min_max(column)
    return bool(bounds["min"].as_py() >= lo and bounds["max"].as_py() < hi)


def _floats(column: Any, *, nullable: bool) -> np.ndarray:
    """Finite non-negative floats (NaN where null or NaN, when ``nullable``)."""
    import pyarrow as pa

    if not (pa.types.is_floating(column.type) or (nullable and pa.types.is_null(column.type))):
        raise _Unusual
    values = _writable(column.cast(pa.float64()).to_numpy(zero_copy_only=False))
    if values.size and values.min() >= 0.0 and values.max() < np.inf:  # NaN-free, finite, >= 0: no mask
        return values
    # a NaN is neither infinite nor below 0: the non-NaN values checked without selecting them
    if (not nullable and np.isnan(values).any()) or np.isinf(values).any() or (values < 0).any():
        raise _Unusual
    return values


def _writable(values: np.ndarray) -> np.ndarray:
    """Return ``values``, copied when it is a read-only view of an arrow buffer (a table owns it)."""
    return values if values.flags.writeable else values.copy()


def _utc_array(ns: np.ndarray) -> Any:
    """Return int64 nanoseconds (none missing) as a UTC time array.

    Localised from naive nanoseconds (one copy): ``pd.array(..., dtype=_TIME_DTYPE)`` makes the same
    array but took ~30 ms for two million times.
    """
    times = pd.Series(ns.view("datetime64[ns]"), copy=False).dt.tz_localize("UTC").array
    return times.astype(_TIME_DTYPE, copy=False)


def _job_strings(codes: np.ndarray, values: list[str]) -> tuple[np.ndarray, Any]:
    """Return the jobs' rank in text order, per row, and the arrow array of distinct values."""
    import pyarrow as pa

    rank = np.empty(len(values), dtype=np.int32 if len(values) < 2**31 - 1 else np.int64)
    rank[np.argsort(np.asarray(values, dtype=object), kind="stable")] = np.arange(len(values))
    if np.array_equal(rank, np.arange(len(values))):  # values in text order already: the codes are ranks
        return codes.astype(rank.dtype), pa.array(values, pa.string())
    return rank[codes], pa.array(values, pa.string())


def _text_array(dictionary: Any, codes: np.ndarray) -> Any:
    import pyarrow as pa

    return pd.Series(dictionary.take(pa.array(codes)), dtype=_STR).array


def _parse_steps(file: str, table: Any, rows: np.ndarray) -> dict[str, Any]:
    """Return the columns of one steps part as arrays, checked (attempt None when the file has none)."""
    names = set(table.column_names)
    if not {"job_id", "step", "start", "end"} <= names:
        raise _Unusual  # a missing job id or required column: the general path says which
    codes, values = _text_codes(table.column("job_id"))
    attempt = _ints(table.column("attempt"))[0] if "attempt" in names else None
    step, _ = _ints(table.column("step"))
    start, end = _times(table.column("start")), _times(table.column("end"))
    wait = (_floats(table.column("input_wait_s"), nullable=False) if "input_wait_s" in names
            else np.zeros(rows.size, dtype=np.float64))
    span = end - start
    span_s = span / _NS_PER_S  # kept: the measurement's step durations (runtime._handoff)
    if span.min(initial=1) <= 0 or (wait > span_s).any():
        raise _Unusual
    del span
    # the rows grouped by job in text order, each job's rows kept in file order (a stable sort): when
    # every job's rows are then in time order with no overlap, this is the general path's sorted
    # order, with no duplicate, overlap or late row to record
    rank, dictionary = _job_strings(codes, values)
    order = None if (rank[1:] >= rank[:-1]).all() else np.argsort(rank, kind="stable")
    r, s0, e0 = (rank, start, end) if order is None else (rank[order], start[order], end[order])
    early = np.flatnonzero(s0[1:] < e0[:-1])  # a step starting before the previous row ends
    if early.size and (r[early + 1] == r[early]).any():  # ... of its own job
        raise _Unusual
    # the rows of each job (by rank), by a search of the sorted ranks (no pass over the rows)
    job_rows = np.diff(np.searchsorted(r, np.arange(len(values) + 1, dtype=r.dtype)))
    return {"file": file, "rows": rows, "codes": codes, "values": values, "attempt": attempt, "step": step,
            "start": start, "end": end, "wait": wait, "order": order, "dictionary": dictionary, "rank": rank,
            "sorted_rank": r, "job_rows": job_rows, "span_s": span_s}


def _sorted_job_codes(p: dict[str, Any], rank: np.ndarray) -> pd.Categorical:
    """Return the steps' job ids as a categorical whose categories are the job ids in text order.

    ``rank``: each row's job rank in text order (:func:`_job_strings`), in the table's row order.
    """
    values = p["values"]
    by_text = np.argsort(np.asarray(values, dtype=object), kind="stable")
    codes = rank.astype(np.int32, copy=False) if len(values) < 2**31 - 1 else rank
    return pd.Categorical.from_codes(codes, categories=pd.Index([values[i] for i in by_text], dtype=object))


def _check_steps(steps: pd.DataFrame, p: dict[str, Any] | None, job_codes: bool) -> pd.DataFrame:
    """Return the steps frame :func:`_cross_checks` reads (it reads ``job_id`` and ``attempt`` only).

    With ``job_codes`` a frame of each job's largest attempt stands for the steps: the cross checks
    take only each job's largest attempt from them, so the flags are the same.
    """
    if steps.empty:
        return pd.DataFrame(columns=["job_id", "attempt"])
    if not job_codes or p is None:
        return steps
    codes, attempt = p["codes"], p["attempt"]
    top = np.full(len(p["values"]), -1, dtype=np.int64)
    np.maximum.at(top, codes, attempt)
    present = top >= 0
    ids = pd.array(np.asarray(p["values"], dtype=object)[present], dtype=_STR)
    return pd.DataFrame({"job_id": ids, "attempt": top[present]})


def _build_steps(p: dict[str, Any], job_codes: bool = False) -> pd.DataFrame:
    """Return the canonical steps table of a checked steps part, in the general path's order.

    ``job_codes``: the job ids as a categorical (:func:`_sorted_job_codes`), not text.
    """
    order = p["order"]
    rows, attempt, step, start, end, wait = (
        p[k] if order is None else p[k][order] for k in ("rows", "attempt", "step", "start", "end", "wait"))
    if job_codes:
        job_id = _sorted_job_codes(p, p["sorted_rank"])
    else:
        job_id = _text_array(p["dictionary"], p["codes"] if order is None else p["codes"][order])
    return pd.DataFrame({
        "job_id": job_id,
        "attempt": attempt,
        "step": step,
        "start": _utc_array(start),
        "end": _utc_array(end),
        "input_wait_s": wait,
        "source_file": _file_column(p["file"], rows.size),
        "source_row": rows,
    }, copy=False)  # fresh arrays: no copy into consolidated blocks


def _parse_events(file: str, table: Any, rows: np.ndarray) -> dict[str, Any]:
    """Return the columns of one events part as arrays, checked (attempt None when the file has none)."""
    names = set(table.column_names)
    if not {"job_id", "time", "kind"} <= names:
        raise _Unusual
    codes, values = _text_codes(table.column("job_id"))
    attempt = _ints(table.column("attempt"))[0] if "attempt" in names else None
    time = _times(table.column("time"))
    kind_codes, kinds = _text_codes(table.column("kind"))
    normal = pd.Series(kinds, dtype=object).str.lower().str.replace(r"[\s\-]+", "_", regex=True)
    if list(normal) != kinds:  # the general path repairs these
        raise _Unusual
    if "step" in names:
        step, step_na = _ints(table.column("step"), nullable=True)
    else:
        step, step_na = np.zeros(rows.size, dtype=np.int64), np.ones(rows.size, dtype=bool)
    if step_na is None:
        step_na = np.zeros(rows.size, dtype=bool)
    duration = (_floats(table.column("duration_s"), nullable=True) if "duration_s" in names
                else np.full(rows.size, np.nan))
    return {"file": file, "rows": rows, "codes": codes, "values": values, "attempt": attempt, "time": time,
            "kind_codes": kind_codes, "kinds": kinds, "step": step, "step_na": step_na, "duration": duration}


def _check_events(p: dict[str, Any], books: dict[str, _FileBook]) -> None:
    """Put a parsed events part in the canonical order (``p["order"]``); refuse what the general path repairs.

    Flags unknown kinds as the general path does.  Also keeps each row's job rank in text order and
    the arrow array of the job ids (``p["rank"]``, ``p["dictionary"]``).
    """
    file, rows, codes, values, attempt, time = (p[k] for k in ("file", "rows", "codes", "values", "attempt",
                                                                "time"))
    kind_codes, kinds, step, step_na, duration = (p[k] for k in ("kind_codes", "kinds", "step", "step_na",
                                                                 "duration"))
    rank, dictionary = _job_strings(codes, values)
    kind_rank = pd.Series(kinds, dtype=object).map(_KIND_RANK).fillna(len(_KIND_RANK) // 2).to_numpy()
    order = _lexsort((kind_rank[kind_codes], attempt, time, rank))
    # duplicates of (job, attempt, time, kind, step, duration): the general path rejects them.  Two
    # such rows tie on the table's own order (job, time, attempt, kind rank); only where rows tie there
    # is the full comparison needed
    tied = np.ones(rows.size - 1, dtype=bool)
    for a in (rank, time, attempt, kind_rank[kind_codes]):
        a = a[order]
        tied &= a[1:] == a[:-1]
    if tied.any():
        step_key = np.where(step_na, -1, step)
        dur_key = np.where(np.isnan(duration), -1.0, duration)
        by_key = np.lexsort((dur_key, step_key, kind_codes, time, attempt, codes))
        same = np.ones(rows.size - 1, dtype=bool)
        for a in (codes, attempt, time, kind_codes, step_key, dur_key):
            a = a[by_key]
            same &= a[1:] == a[:-1]
        if same.any():
            raise _Unusual
    # events of a job listed out of time order: the general path repairs them
    by_job = _lexsort((codes,))  # np.argsort(codes, kind="stable")
    jt, jc = time[by_job], codes[by_job]
    if ((jc[1:] == jc[:-1]) & (jt[1:] < jt[:-1])).any():
        raise _Unusual
    known = _kind_is_known(pd.Series(kinds, dtype=object))
    if not known.all():
        unknown = np.flatnonzero(~known[kind_codes])
        u = pd.DataFrame({"_file": file, "_row": rows[unknown],
                          "job_id": np.asarray(values, dtype=object)[codes[unknown]],
                          "attempt": attempt[unknown], "time": _utc(time[unknown]),
                          "kind": np.asarray(kinds, dtype=object)[kind_codes[unknown]]})
        _flag(books, u, "unknown_event_kind",
              [f"event kind {str(k)!r} is not one the runtime partition knows: kept, not charged to any "
               "category" for k in u["kind"]], "time")
    p.update(order=order, rank=rank, dictionary=dictionary)


def _build_events(p: dict[str, Any]) -> pd.DataFrame:
    """Return the canonical events table of a checked events part (:func:`_check_events`)."""
    import pyarrow as pa

    order = p["order"]
    rows, codes, attempt, time = (p[k] for k in ("rows", "codes", "attempt", "time"))
    kind_codes, kinds, step, step_na, duration = (p[k] for k in ("kind_codes", "kinds", "step", "step_na",
                                                                 "duration"))
    return pd.DataFrame({
        "job_id": _text_array(p["dictionary"], codes[order]),
        "attempt": attempt[order],
        "time": _utc_array(time[order]),
        "kind": _text_array(pa.array(kinds, pa.string()), kind_codes[order]),
        "step": pd.arrays.IntegerArray(step[order], step_na[order]),
        "duration_s": pd.arrays.FloatingArray(np.nan_to_num(duration[order]), np.isnan(duration[order])),
        "source_file": _file_column(p["file"], rows.size),
        "source_row": rows[order],
    }, copy=False)


def _assign_missing_attempts(steps: pd.DataFrame, events: pd.DataFrame, books: Mapping[str, _FileBook],
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


def _assign_attempts(s: dict[str, Any] | None, e: dict[str, Any] | None, books: dict[str, _FileBook]) -> None:
    """Fill a missing attempt column from the gang_complete markers, by the general path's own function.

    The frames handed to :func:`_assign_missing_attempts` hold what the general path's would (file order,
    the same values), so its attempts and its ``restart_inferred_from_step_numbers`` flags are the same.
    """
    steps = events = pd.DataFrame()
    if s is not None:
        n = s["rows"].size
        att = (pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)) if s["attempt"] is None
               else pd.arrays.IntegerArray(s["attempt"], np.zeros(n, bool)))
        steps = pd.DataFrame({"_file": _file_column(s["file"], n), "_row": s["rows"],
                              "job_id": _text_array(s["dictionary"], s["codes"]),
                              "attempt": att, "step": s["step"], "start": _utc_array(s["start"])})
    if e is not None:
        n = e["rows"].size
        att = (pd.arrays.IntegerArray(np.zeros(n, np.int64), np.ones(n, bool)) if e["attempt"] is None
               else pd.arrays.IntegerArray(e["attempt"], np.zeros(n, bool)))
        kinds = np.asarray(e["kinds"], dtype=object)[e["kind_codes"]]
        events = pd.DataFrame({"_file": _file_column(e["file"], n), "_row": e["rows"],
                               "job_id": _text_array(_job_strings(e["codes"], e["values"])[1], e["codes"]),
                               "attempt": att, "time": _utc_array(e["time"]), "kind": kinds})
    steps, events = _assign_missing_attempts(steps, events, books)
    if s is not None:
        s["attempt"] = steps["attempt"].to_numpy(dtype=np.int64)
    if e is not None:
        e["attempt"] = events["attempt"].to_numpy(dtype=np.int64)
