"""Reader and writer of the canonical steps and events tables as CSV or Parquet (format ``canonical``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from fleetlib._io import input_files
from fleetlib.quality import InputError, Ledger
from fleetlib.runtime.readers._common import (
    FileBook,
    Part,
    PathLike,
    TimelineTables,
    apply_aliases,
    attempts_from_bounds,
    blank_rows,
    check_events,
    check_steps,
    close_books,
    concat_frames,
    cross_checks,
    distinct,
    distinct_text,
    drop_rejected,
    file_column,
    finalise_events,
    finalise_steps,
    flag,
    float_column,
    int_column,
    job_column,
    load_table,
    na_ints,
    parse_times,
    parse_window,
    take_rows,
)
from fleetlib.runtime.schema import (
    DEVICE_COLUMNS,
    EVENT_ALIASES,
    EVENT_COLUMNS,
    STEP_ALIASES,
    STEP_COLUMNS,
    TIME_DTYPE,
)

__all__ = ["read", "read_canonical", "write_canonical"]


def read(paths: PathLike | Sequence[PathLike], *, tz: str | None = None, window: Any = None,
         job_id: str | None = None) -> tuple[TimelineTables, Ledger]:
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
        One path or several, CSV or Parquet (plain or gzip); steps and events may be in separate
        files.
    tz
        IANA zone (``"Europe/Paris"``) or fixed offset naive times were written in.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; checked here, applied by the
        measurement (every record is kept).
    job_id
        Job id for files without a ``job_id`` column.

    Returns
    -------
    tuple of (TimelineTables, Ledger)
        The canonical tables (``{"steps": ..., "events": ...}``) and the ledger over every data row.

    Notes
    -----
    One path for every file: each is read into one Arrow table (Parquet as typed; a CSV by pandas'
    tokenizer, every cell text, so that rows keep their line numbers), its aliases applied and each
    column cast to the canonical type.  Columns already canonical-typed are checked on their Arrow
    buffers; text is parsed once per distinct value.  The checks of the steps and events
    (:func:`~fleetlib.runtime.readers._common.check_steps`,
    :func:`~fleetlib.runtime.readers._common.check_events`) cost a pass over rows already in order,
    and every repair and rejection is booked with its file, row, field and value.
    """
    parse_window(window)
    books: dict[str, FileBook] = {}
    steps_parts, event_parts = [], []
    for path in input_files(paths):  # a URL is read where it lies (fsspec), never copied
        file_steps, file_events = _read_file(path, books, tz, job_id)
        steps_parts += file_steps
        event_parts += file_events
    steps = drop_rejected(concat_frames(steps_parts), books)
    events = drop_rejected(concat_frames(event_parts), books)
    steps, events = _assign_missing_attempts(steps, events, books)
    if not steps.empty:
        steps = check_steps(steps, books, reorder_is_repair=True)
    if not events.empty:
        events = check_events(events, books, reorder_is_repair=True)
    cross_checks(steps if not steps.empty else pd.DataFrame(columns=["job_id", "attempt"]), events, books)
    ledger = close_books(books)
    return TimelineTables(finalise_steps(steps), finalise_events(events, in_order=True)), ledger


#: The canonical reader under the name it is exported by (the same callable as :func:`read`).
read_canonical = read


def _read_file(path: Path, books: dict[str, FileBook], tz: str | None, job_id: str | None,
               ) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """Open a book for one file and return the working frames of its steps and events.

    A table with a ``record`` column is split by it (any row order); a row whose record is neither
    ``step`` nor ``event`` is rejected.  The file's Arrow table lives only as long as this call: the
    frames hold their own copies of its columns.
    """
    table, rows, truncated = load_table(path)
    file = str(path)
    books[file] = FileBook(file, rows, truncated=truncated)
    if table.num_rows == 0 or table.num_columns == 0:
        return [], []
    part = Part(books[file], rows)
    blank = blank_rows(table)
    part.reject(blank, None, "blank line")
    names = table.column_names
    if "record" in names:
        codes, texts = distinct_text(table.column("record"))
        lower = texts.str.lower()
        is_s = _coded(codes, (lower == "step").to_numpy(dtype=bool))  # a blank row is neither
        is_e = _coded(codes, (lower == "event").to_numpy(dtype=bool))
        if np.count_nonzero(is_s) + np.count_nonzero(is_e) + np.count_nonzero(blank) < table.num_rows:
            part.reject(~is_s & ~is_e & ~blank, "record", "record must be 'step' or 'event'")
        parts = [(is_s, "steps"), (is_e, "events")]
    else:
        cols = set(names)
        has_s = any(a in cols for a in ("start", *STEP_ALIASES["start"], "start_unix_s", "start_unix_ms"))
        has_e = any(a in cols for a in ("kind", *EVENT_ALIASES["kind"]))
        if has_s == has_e:
            raise InputError(f"cannot tell a steps table (start, end, ...) from an events table (time, "
                             f"kind, ...) by its columns {sorted(cols)}; a combined table needs a "
                             "'record' column", file=file, row=1)
        parts = [(~blank, "steps" if has_s else "events")]
    # each record's rows with only its own columns (the other record's, null in a combined file, go),
    # before anything is cast: the file's whole table is not kept while the casts make their copies
    pieces = []
    for mask, what in parts:
        if mask.any():
            sub, sub_part = take_rows(table, part, mask)
            aliases, columns = ((STEP_ALIASES, STEP_COLUMNS) if what == "steps"
                                else (EVENT_ALIASES, EVENT_COLUMNS))
            sub = apply_aliases(sub, aliases, file)
            keep = (*columns, *DEVICE_COLUMNS) if what == "events" else columns
            pieces.append((what, sub.select([c for c in sub.column_names if c in keep]), sub_part))
            del sub
    del table
    steps = [_steps(sub, sub_part, tz, job_id) for what, sub, sub_part in pieces if what == "steps"]
    events = [_events(sub, sub_part, tz, job_id) for what, sub, sub_part in pieces if what == "events"]
    del pieces
    pa.default_memory_pool().release_unused()  # hand the table's freed memory back at once
    return steps, events


def _coded(codes: np.ndarray, which: np.ndarray) -> np.ndarray:
    """Return the rows whose code is one of the distinct values ``which`` marks."""
    chosen = np.flatnonzero(which)
    return codes == chosen[0] if chosen.size == 1 else np.isin(codes, chosen)


def _keys(table: pa.Table, part: Part, what: str, required: Sequence[str], aliases: Mapping[str, Any],
          job_default: str | None) -> tuple[Any, np.ndarray, Any]:
    """Refuse a table without a required column; return its job ids, their ranks and its attempts."""
    names = table.column_names
    for col in required:
        if col not in names:
            raise InputError(f"{what} needs column {col!r} (or an alias: {aliases[col]})", file=part.file,
                             row=1, field=col)
    jobs, ranks = job_column(table, part, job_default)
    attempt = (int_column(table.column("attempt"), part=part, field="attempt", required=True)
               if "attempt" in names else na_ints(len(part)))
    return jobs, ranks, attempt


def _steps(table: pa.Table, part: Part, tz: str | None, job_default: str | None) -> pd.DataFrame:
    """Return the working frame of one steps table: its columns cast, what they hold booked."""
    names, n = table.column_names, len(part)
    jobs, ranks, attempt = _keys(table, part, "a steps table", ("step", "start", "end"), STEP_ALIASES,
                                 job_default)
    step = int_column(table.column("step"), part=part, field="step", required=True)
    start = parse_times(table.column("start"), part=part, field="start", tz=tz)
    end = parse_times(table.column("end"), part=part, field="end", tz=tz)
    if "input_wait_s" in names:
        column = table.column("input_wait_s")
        wait = float_column(column, part=part, field="input_wait_s")
        nan = np.isnan(wait)
        if nan.any():
            part.repair(nan & (distinct(column)[0] < 0), "input_wait_s",
                        "blank input_wait_s taken as 0 (no wait measured)")
            wait = np.where(nan, 0.0, wait)
    else:
        wait = np.zeros(n, dtype=np.float64)  # the column is optional: no measured wait
    return pd.DataFrame({"_file": file_column(part.file, n), "_row": part.rows, "job_id": jobs, "_job": ranks,
                         "attempt": attempt, "step": step, "start": start, "end": end,
                         "input_wait_s": wait}, copy=False)


def _events(table: pa.Table, part: Part, tz: str | None, job_default: str | None) -> pd.DataFrame:
    """Return the working frame of one events table: its columns cast, what they hold booked."""
    names, n = table.column_names, len(part)
    jobs, ranks, attempt = _keys(table, part, "an events table", ("time", "kind"), EVENT_ALIASES, job_default)
    time = parse_times(table.column("time"), part=part, field="time", tz=tz)
    kind = _kinds(table.column("kind"), part)
    step = (int_column(table.column("step"), part=part, field="step", required=False)
            if "step" in names else na_ints(n))
    duration = (float_column(table.column("duration_s"), part=part, field="duration_s")
                if "duration_s" in names else np.full(n, np.nan))
    # an elastic job's device counts (optional): nullable integers >= 0
    devices = {col: int_column(table.column(col), part=part, field=col, required=False)
               for col in DEVICE_COLUMNS if col in names}
    return pd.DataFrame({"_file": file_column(part.file, n), "_row": part.rows, "job_id": jobs, "_job": ranks,
                         "attempt": attempt, "time": time, "kind": kind, "step": step,
                         "duration_s": duration, **devices}, copy=False)


def _kinds(column: pa.ChunkedArray, part: Part) -> pd.arrays.ArrowStringArray:
    """Event kinds, lower case with ``_`` for runs of spaces and dashes (a named repair); blank: rejected."""
    codes, texts = distinct_text(column)
    raw = pd.concat([texts, pd.Series([""], dtype="str")], ignore_index=True)
    at = np.where(codes < 0, len(raw) - 1, codes)  # a missing kind reads as ""
    norm = raw.str.lower().str.replace(r"[\s\-]+", "_", regex=True)
    missing = (raw == "").to_numpy(dtype=bool)[at]
    part.reject(missing, "kind", "missing kind")
    changed = (norm != raw).to_numpy(dtype=bool)[at] & ~missing
    if changed.any():
        was, now = raw.array.take(at[changed]), norm.array.take(at[changed])
        part.repair(changed, "kind", [f"kind {a!r} normalised to {b!r}"
                                      for a, b in zip(was, now, strict=True)])
    return norm.array.take(at)


def _has_missing(values: pd.Series) -> bool:
    """Whether a column holds a missing value (an int64 column holds none: no pass over it)."""
    return values.dtype != np.int64 and bool(values.isna().any())


def _assign_missing_attempts(steps: pd.DataFrame, events: pd.DataFrame, books: Mapping[str, FileBook],
                             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fill the attempt of rows from files without an attempt column, from gang_complete markers.

    A row belongs to the attempt of the last ``gang_complete`` of its job at or before it (0 before
    the first).  Where a job has no markers, a step number that repeats is flagged as a restart the
    partition will have to infer; the attempt stays 0.
    """
    need_s = (not steps.empty) and _has_missing(steps["attempt"])
    need_e = (not events.empty) and _has_missing(events["attempt"])
    if not (need_s or need_e):
        return steps, events
    markers = events.loc[events["kind"] == "gang_complete", ["job_id", "time"]] if not events.empty else \
        pd.DataFrame(columns=["job_id", "time"])
    if need_s:
        m = steps["attempt"].isna().to_numpy()
        sub = steps.loc[m, ["job_id", "start"]].rename(columns={"start": "time"})
        steps.loc[m, "attempt"] = attempts_from_bounds(sub, markers)
        s = steps[m & ~steps["job_id"].isin(set(markers["job_id"])).to_numpy()].sort_values(
            ["job_id", "start", "_row"], kind="stable")
        prev = s.groupby("job_id", sort=False)["step"].shift(1)
        repeat = (s["step"] <= prev).fillna(False).to_numpy(dtype=bool)
        if repeat.any():
            r = s[repeat]
            flag(books, r, "restart_inferred_from_step_numbers",
                  [f"step {a} follows step {int(b)} with no attempt column or gang_complete marker: a "
                   "restart is assumed here (fallback from repeated step numbers)"
                   for a, b in zip(r["step"], prev[repeat], strict=True)], "start")
    if need_e:
        m = events["attempt"].isna().to_numpy()
        events.loc[m, "attempt"] = attempts_from_bounds(events.loc[m, ["job_id", "time"]], markers)
    return steps, events



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
    devices = [c for c in DEVICE_COLUMNS if c in tables.events.columns]  # an elastic job's, when logged
    e = tables.events[[*EVENT_COLUMNS, *devices]].assign(record="event")
    cols = ["record", "job_id", "attempt", "step", "start", "end", "input_wait_s", "time", "kind",
            "duration_s", *devices]
    both = pd.concat([s, e], ignore_index=True).reindex(columns=cols)
    for col in ("step", *devices):
        both[col] = both[col].astype("Int64")
    for col in ("start", "end", "time"):
        both[col] = both[col].astype(TIME_DTYPE)
    if path.suffix.lower() in (".parquet", ".pq"):
        both.to_parquet(path, index=False)
    else:
        out = both.copy()
        for col in ("start", "end", "time"):
            out[col] = out[col].map(lambda t: "" if pd.isna(t) else t.isoformat())  # small files only
        out.to_csv(path, index=False)
    return path
