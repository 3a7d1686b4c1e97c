"""Reader of serving replica lifecycle logs (format ``serving``).

The measurement of the phases (:func:`~fleetlib.runtime.goodput.replica_runtime_goodput`) lives
with the other measurements in :mod:`fleetlib.runtime.goodput`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from fleetlib._io import as_paths
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.runtime.readers._common import (
    NS_PER_S,
    FileBook,
    Part,
    PathLike,
    apply_aliases,
    blank_rows,
    close_books,
    concat_frames,
    drop_rejected,
    load_table,
    originals,
    out_of_order,
    parse_times,
    parse_window,
    reject,
    repair,
    text_column,
    utc_ns,
)
from fleetlib.runtime.schema import (
    REPLICA_PHASE_ALIASES,
    REPLICA_PHASES,
    TIME_DTYPE,
)

# ---------------------------------------------------------------------------------------------------
# Serving replica lifecycle
# ---------------------------------------------------------------------------------------------------

_REPLICA_ALIASES: dict[str, tuple[str, ...]] = {
    "time": ("timestamp", "ts", "at", "event_time"),
    "replica_id": ("replica", "instance", "instance_id", "pod"),
    "phase": ("state", "event", "status", "transition"),
}


def read(paths: PathLike | Sequence[PathLike], *, tz: str | None = None, window: Any = None,
         end: Any = None) -> tuple[dict[str, pd.DataFrame], Ledger]:
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
        CSV or Parquet logs (plain or gzip).
    tz
        Zone naive times were written in (as in :func:`fleetlib.runtime.readers.canonical.read`).
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; checked here and applied by
        :func:`fleetlib.runtime.goodput.replica_runtime_goodput` (every record is kept).
    end
        Time that closes replicas still open at the end of the log (zone-aware).

    Returns
    -------
    tuple of (dict, Ledger)
        ``{"phases": ...}``: the phases ``replica_id, phase, start, end, duration_s`` (one row per phase
        entered before release, contiguous per replica), and the ledger.
    """
    parse_window(window)
    books: dict[str, FileBook] = {}
    parts = []
    for path in as_paths(paths):
        table, rows, truncated = load_table(path)
        file = str(path)
        books[file] = FileBook(file, rows, truncated=truncated)
        if table.num_rows == 0 or table.num_columns == 0:
            continue
        table = apply_aliases(table, _REPLICA_ALIASES, file)
        for col in ("time", "replica_id", "phase"):
            if col not in table.column_names:
                raise InputError(f"a replica lifecycle log needs column {col!r}", file=file, row=1, field=col)
        part = Part(books[file], rows)
        blank = blank_rows(table)
        part.reject(blank, None, "blank line")
        rid = text_column(table.column("replica_id"))
        part.reject((rid.isna() | (rid == "")).to_numpy() & ~blank, "replica_id", "missing replica_id")
        raw = text_column(table.column("phase")).fillna("").str.lower().str.replace(" ", "_")
        phase = raw.map(lambda v: REPLICA_PHASE_ALIASES.get(v, v))  # vocabulary lookup
        unknown = ~phase.isin(REPLICA_PHASES).to_numpy() & ~blank
        if unknown.any():
            part.reject(unknown, "phase", [f"unknown phase {p!r}; expected one of {REPLICA_PHASES}"
                                           for p in originals(table.column("phase"), unknown)])
        t = parse_times(table.column("time"), part=part, field="time", tz=tz)
        parts.append(pd.DataFrame({"_file": file, "_row": rows, "replica_id": rid.to_numpy(dtype=object),
                                   "phase": phase.to_numpy(dtype=object), "time": t}))
    cols = ["replica_id", "phase", "start", "end", "duration_s"]
    tr = drop_rejected(concat_frames(parts), books)
    if tr.empty:
        return {"phases": _empty_phases(cols)}, close_books(books)
    tr["time"] = tr["time"].astype(TIME_DTYPE)
    tr["_idx"] = tr["phase"].map({p: i for i, p in enumerate(REPLICA_PHASES)}).astype("int64")
    late = out_of_order(tr, ["replica_id"], "time")
    if late.any():
        repair(books, tr[late], "time", "listed out of time order: moved into time order")
    tr = tr.sort_values(["replica_id", "time", "_idx"], kind="stable").reset_index(drop=True)
    seen = tr.groupby("replica_id", sort=False)["_idx"].cummax()
    prev_max = seen.groupby(tr["replica_id"], sort=False).shift(1)
    back = (tr["_idx"] <= prev_max).fillna(False).to_numpy(dtype=bool)
    if back.any():
        b = tr[back]
        reject(books, b, "phase", [f"phase {p!r} after {REPLICA_PHASES[int(q)]!r}: a replica's phases "
                                    "only move forward"
                                    for p, q in zip(b["phase"], prev_max[back], strict=True)])
    tr = tr[~back]
    first_phase = tr.groupby("replica_id")["phase"].transform("first")
    unplaced = (first_phase != "placed").to_numpy()
    if unplaced.any():
        reject(books, tr[unplaced], "phase", "the replica has no 'placed' row before this one: its held "
                                              "time has no start")
        tr = tr[~unplaced]
    if tr.empty:
        return {"phases": _empty_phases(cols)}, close_books(books)
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
        repair(books, o, "phase", why)
        tr.loc[open_last, "end"] = close_at
    phases = tr[tr["phase"] != "released"].copy()
    phases["start"] = phases["time"].astype(TIME_DTYPE)
    phases["end"] = phases["end"].astype(TIME_DTYPE)
    phases["duration_s"] = (utc_ns(phases["end"]) - utc_ns(phases["start"])) / NS_PER_S
    ledger = close_books(books)
    out = phases[cols].reset_index(drop=True)
    out["replica_id"] = out["replica_id"].astype("str")
    out["phase"] = out["phase"].astype("str")
    return {"phases": out}, ledger




def _empty_phases(cols: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({"replica_id": pd.Series([], dtype="str"), "phase": pd.Series([], dtype="str"),
                         "start": pd.Series([], dtype=TIME_DTYPE), "end": pd.Series([], dtype=TIME_DTYPE),
                         "duration_s": pd.Series([], dtype="float64")})[list(cols)]


#: The replica lifecycle reader under the name it is exported by (the same callable as :func:`read`).
read_replica_lifecycle = read
