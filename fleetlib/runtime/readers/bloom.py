"""Reader of the hand-transcribed BLOOM-176B event table in ``data/timelines`` (format ``bloom``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import as_paths
from fleetlib.localtime import localize
from fleetlib.quality import InputError, Ledger
from fleetlib.runtime.readers._common import (
    FileBook,
    Part,
    PathLike,
    TimelineTables,
    bundled_path,
    check_events,
    close_books,
    cross_checks,
    finalise_events,
    float_column,
    int_column,
    job_column,
    load_table,
    outside_plausible,
    parse_window,
    reject,
    reject_outside,
    sort_events,
    text_column,
)
from fleetlib.runtime.schema import TIME_DTYPE
from fleetlib.runtime.timeline import (
    empty_steps,
)

# ---------------------------------------------------------------------------------------------------
# BLOOM-176B hand-transcribed event table
# ---------------------------------------------------------------------------------------------------

#: Columns of ``data/timelines/bloom_176b_events.csv``.
_BLOOM_COLUMNS = ("job_id", "attempt", "date", "time_of_day", "tz", "kind", "step", "duration_s",
                  "lost_work_s", "source", "note")


def _read_one(path: PathLike | None) -> tuple[TimelineTables, Ledger]:
    """Read one BLOOM-style event table (None: the bundled copy)."""
    path = Path(path) if path is not None else bundled_path("bloom_176b_events.csv")
    table, rows, truncated = load_table(path)
    file = str(path)
    books = {file: FileBook(file, rows, truncated=truncated)}
    missing = [c for c in _BLOOM_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(f"the BLOOM event table lacks columns {missing}", file=file, row=1, field=missing[0])
    if table.num_rows == 0:
        return TimelineTables.empty(), close_books(books)
    part = Part(books[file], rows)
    column = table.column
    date = text_column(column("date"))
    tod = text_column(column("time_of_day"))
    tz = text_column(column("tz"))
    no_tz = (tz.isna() | (tz == "")).to_numpy()
    part.reject(no_tz, "tz", "missing tz: the zone the chronicle stated the time in")
    day_only = (tod.isna() | (tod == "")).to_numpy()
    local_text = date.fillna("") + "T" + tod.where(~day_only, "12:00:00").fillna("12:00:00")
    naive = pd.to_datetime(local_text, format="ISO8601", errors="coerce")
    beyond = outside_plausible(naive) & ~no_tz
    naive = reject_outside(part, "date", naive.where(~no_tz), local_text)
    bad = naive.isna().to_numpy() & ~no_tz & ~beyond
    part.reject(bad, "date", "date/time_of_day is not an ISO 8601 date and time")
    utc = pd.Series(pd.NaT, index=range(len(rows)), dtype=TIME_DTYPE)
    ok = ~bad & ~no_tz & ~beyond
    for zone in pd.unique(tz[ok]):  # a handful of zones
        m = ok & (tz == zone).to_numpy()
        try:
            placed = localize(naive[m], zone)  # DST nights: the stated rule, a named repair each
        except Exception as exc:
            raise InputError(f"tz {zone!r} is not a time zone", file=file, row=int(rows[np.argmax(m)]),
                             field="tz") from exc
        utc[m] = placed.utc.astype(TIME_DTYPE).to_numpy()
        fixed, reasons = placed.repairs("time_of_day", local_text[m].to_numpy())
        dst = np.zeros(len(rows), dtype=bool)
        dst[np.flatnonzero(m)[fixed]] = True
        part.repair(dst, "time_of_day", reasons)
    nat = utc.isna().to_numpy() & ok
    part.reject(nat, "time_of_day", "local time is not a time in its zone")
    placed = day_only & ok & ~nat
    if placed.any():
        part.repair(placed, "time_of_day", [f"no time of day stated: placed at 12:00 {z}"
                                            for z in tz[placed]])
    attempt = int_column(column("attempt"), part=part, field="attempt", required=True)
    jobs, _ = job_column(table, part, None)
    kind = text_column(column("kind")).str.lower().to_numpy(dtype=object)
    step = int_column(column("step"), part=part, field="step", required=False)
    duration = float_column(column("duration_s"), part=part, field="duration_s")
    lost = float_column(column("lost_work_s"), part=part, field="lost_work_s")
    events = pd.DataFrame({
        "_file": file, "_row": rows, "job_id": jobs, "attempt": attempt, "time": utc, "kind": kind,
        "step": step, "duration_s": duration, "lost_work_s": lost,
        "time_precision": np.where(day_only, "day", "second"),
        "source": text_column(column("source")).to_numpy(dtype=object),
        "note": text_column(column("note")).to_numpy(dtype=object),
    })
    no_kind = events["kind"].isna().to_numpy()
    if no_kind.any():
        reject(books, events[no_kind], "kind", "missing kind")
    events = check_events(events, books, reorder_is_repair=True)
    cross_checks(pd.DataFrame(columns=["job_id", "attempt"]), events, books)
    ledger = close_books(books)
    extra = ("lost_work_s", "time_precision", "source", "note")
    return TimelineTables(empty_steps(), finalise_events(events, extra)), ledger


def read(paths: PathLike | Sequence[PathLike] | None = None, *, tz: str | None = None, window: Any = None
         ) -> tuple[TimelineTables, Ledger]:
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
    paths
        One table or several (None: the bundled ``data/timelines/bloom_176b_events.csv``).
    tz
        Not used: every row names the zone its time was stated in (``tz`` column).
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; checked here, applied by the
        measurement (every record is kept).

    Returns
    -------
    tuple of (TimelineTables, Ledger)
        ``{"steps": ..., "events": ...}``: no steps; events with the canonical columns followed by
        ``lost_work_s, time_precision, source, note``; and the ledger.
    """
    parse_window(window)
    files = [None] if paths is None else as_paths(paths)
    if len(files) == 1:
        return _read_one(files[0])
    steps, events, ledger = [], [], Ledger()
    for path in files:
        tables, one = _read_one(path)
        steps.append(tables.steps)
        events.append(tables.events)
        ledger.extend(one)
    return TimelineTables(steps[0], sort_events(pd.concat(events, ignore_index=True))), ledger


#: The BLOOM event-table reader under the name it is exported by (the same callable as :func:`read`).
read_bloom_events = read
