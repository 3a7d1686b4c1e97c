"""Reader and writer of the canonical steps and events tables as CSV or Parquet (format ``canonical``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import as_paths
from fleetlib.quality import InputError, Ledger
from fleetlib.runtime.readers._common import (
    FileBook,
    PathLike,
    TimelineTables,
    apply_aliases,
    check_events,
    check_steps,
    close_books,
    concat_frames,
    cross_checks,
    drop_rejected,
    file_column,
    finalise_events,
    finalise_steps,
    float_column,
    int_column,
    job_column,
    load_table,
    na_ints,
    parse_times,
    parse_window,
    reject,
    repair,
    text_column,
)
from fleetlib.runtime.readers._parquet_fast import _assign_missing_attempts, read_fast
from fleetlib.runtime.schema import (
    EVENT_ALIASES,
    EVENT_COLUMNS,
    STEP_ALIASES,
    STEP_COLUMNS,
    TIME_DTYPE,
)

# ---------------------------------------------------------------------------------------------------
# Generic canonical CSV / Parquet
# ---------------------------------------------------------------------------------------------------








def _steps_from_frame(df: pd.DataFrame, base: pd.DataFrame, books: Mapping[str, FileBook], tz: str | None,
                      job_default: str | None) -> pd.DataFrame:
    file = str(base["_file"].iloc[0]) if len(base) else ""
    for col in ("step", "start", "end"):
        if col not in df.columns:
            raise InputError(f"a steps table needs column {col!r} (or an alias: {STEP_ALIASES[col]})",
                             file=file, row=1, field=col)
    out = base.copy()
    out["job_id"] = job_column(df, base, books, job_default, file)
    out["attempt"] = int_column(df["attempt"], frame=base, books=books, field="attempt", required=True) \
        if "attempt" in df.columns else na_ints(len(df))
    out["step"] = int_column(df["step"], frame=base, books=books, field="step", required=True)
    out["start"] = parse_times(df["start"], frame=base, books=books, field="start", tz=tz).array
    out["end"] = parse_times(df["end"], frame=base, books=books, field="end", tz=tz).array
    out["start"] = out["start"].astype(TIME_DTYPE)
    out["end"] = out["end"].astype(TIME_DTYPE)
    if "input_wait_s" in df.columns:
        w = float_column(df["input_wait_s"], frame=base, books=books, field="input_wait_s", minimum=0.0)
        blank = w.isna().to_numpy() & df["input_wait_s"].isna().to_numpy()
        if blank.any():
            repair(books, base[blank], "input_wait_s", "blank input_wait_s taken as 0 (no wait measured)")
        out["input_wait_s"] = w.fillna(0.0).to_numpy()
    else:
        out["input_wait_s"] = 0.0  # the column is optional: no measured wait
    out["_has_attempt"] = "attempt" in df.columns
    return out




def _events_from_frame(df: pd.DataFrame, base: pd.DataFrame, books: Mapping[str, FileBook], tz: str | None,
                       job_default: str | None) -> pd.DataFrame:
    file = str(base["_file"].iloc[0]) if len(base) else ""
    for col in ("time", "kind"):
        if col not in df.columns:
            raise InputError(f"an events table needs column {col!r} (or an alias: {EVENT_ALIASES[col]})",
                             file=file, row=1, field=col)
    out = base.copy()
    out["job_id"] = job_column(df, base, books, job_default, file)
    out["attempt"] = int_column(df["attempt"], frame=base, books=books, field="attempt", required=True) \
        if "attempt" in df.columns else na_ints(len(df))
    out["time"] = parse_times(df["time"], frame=base, books=books, field="time", tz=tz).array
    out["time"] = out["time"].astype(TIME_DTYPE)
    raw = text_column(df["kind"])
    missing = (raw.isna() | (raw == "")).to_numpy()
    if missing.any():
        reject(books, base[missing], "kind", "missing kind")
    norm = raw.fillna("").str.lower().str.replace(r"[\s\-]+", "_", regex=True)
    changed = ~missing & (norm != raw.fillna("")).to_numpy()
    if changed.any():
        repair(books, base[changed], "kind", [f"kind {a!r} normalised to {b!r}" for a, b in
                                               zip(raw[changed], norm[changed], strict=True)])
    out["kind"] = norm.to_numpy(dtype=object)
    out["step"] = int_column(df["step"], frame=base, books=books, field="step", required=False) \
        if "step" in df.columns else na_ints(len(df))
    out["duration_s"] = (
        float_column(df["duration_s"], frame=base, books=books, field="duration_s").to_numpy()
        if "duration_s" in df.columns else np.nan)
    out["_has_attempt"] = "attempt" in df.columns
    return out


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
    Parquet files whose columns are already canonical-typed and pass every check are read by a fast
    path (:mod:`fleetlib.runtime.readers._parquet_fast`) that returns the same tables and ledger;
    anything else is read by the general path, which names every row it rejects or repairs.
    """
    parse_window(window)
    fast = read_fast(paths, tz=tz, job_id=job_id)
    if fast is not None:
        return fast
    return _read_general(paths, tz=tz, job_id=job_id)


#: The canonical reader under the name it is exported by (the same callable as :func:`read`).
read_canonical = read


def _read_general(paths: PathLike | Sequence[PathLike], *, tz: str | None,
                  job_id: str | None) -> tuple[TimelineTables, Ledger]:
    """Read by the general path of :func:`read_canonical`: any CSV or Parquet, each row booked."""
    books: dict[str, FileBook] = {}
    steps_parts, event_parts = [], []
    for path in as_paths(paths):
        df, rows, truncated = load_table(path)
        file = str(path)
        books[file] = FileBook(file, rows, truncated=truncated)
        base = pd.DataFrame({"_file": file_column(file, len(rows)), "_row": rows})
        if df.empty:
            continue
        blank = df.isna().all(axis=1).to_numpy()
        if blank.any():
            reject(books, base[blank], None, "blank line")
        if "record" in df.columns:
            rec = text_column(df["record"]).str.lower()
            is_s = (rec == "step").to_numpy()
            is_e = (rec == "event").to_numpy()
            other = ~is_s & ~is_e & ~blank
            if other.any():
                reject(books, base[other], "record", "record must be 'step' or 'event'")
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
                sub = apply_aliases(sub, STEP_ALIASES, file)
                steps_parts.append(_steps_from_frame(sub, sub_base, books, tz, job_id))
            else:
                sub = apply_aliases(sub, EVENT_ALIASES, file)
                event_parts.append(_events_from_frame(sub, sub_base, books, tz, job_id))
    steps = drop_rejected(concat_frames(steps_parts), books)
    events = drop_rejected(concat_frames(event_parts), books)
    steps, events = _assign_missing_attempts(steps, events, books)
    if not steps.empty:
        steps = check_steps(steps, books, reorder_is_repair=True)
    if not events.empty:
        events = check_events(events, books, reorder_is_repair=True)
    cross_checks(steps if not steps.empty else pd.DataFrame(columns=["job_id", "attempt"]), events, books)
    ledger = close_books(books)
    return TimelineTables(finalise_steps(steps), finalise_events(events)), ledger




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
        both[col] = both[col].astype(TIME_DTYPE)
    if path.suffix.lower() in (".parquet", ".pq"):
        both.to_parquet(path, index=False)
    else:
        out = both.copy()
        for col in ("start", "end", "time"):
            out[col] = out[col].map(lambda t: "" if pd.isna(t) else t.isoformat())  # small files only
        out.to_csv(path, index=False)
    return path
