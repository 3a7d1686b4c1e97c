"""Canonical scheduler tables and their validation.

Every scheduler format fleetlib reads (Slurm, Kueue, Volcano, Helios sequences, openb pod lists, the
canonical Parquet file) is turned into the tables below.  Times are timezone-aware UTC pandas
timestamps, device counts are integers, and every interval is half-open ``[start, end)``.

``allocations`` -- one row per allocation attempt, or per size segment of an elastic job
    ``job_id, attempt, pool, devices, submit, first_assigned, gang_complete, release, priority,
    elastic, end_state, requested_devices``.

    * ``submit``: when this attempt (or this resize of an elastic job) entered the queue.
    * ``first_assigned``: when the first device of the attempt was bound; from then on the row's
      ``devices`` are out of the free pool.
    * ``gang_complete``: when the gang became complete (every member needed for one synchronous
      step held).  ``first_assigned -> gang_complete`` is a partial-gang hold.
    * ``release``: when the devices went back to the pool.  ``gang_complete -> release`` is the
      held time of a complete allocation, the scheduling numerator and the runtime denominator.
    * A row that never got a device (waited, then left the queue) has ``first_assigned`` and
      ``gang_complete`` missing (NaT); it only counts as queue demand from ``submit`` to
      ``release``.
    * A gang that never completed has ``gang_complete == release``: its whole hold is partial.
    * Elastic jobs: ``devices`` is the active gang size of the segment.  Held intervals
      (``gang_complete -> release``) of one elastic job never overlap; a partial piece (new
      members arriving for a grow while the old gang still runs) may overlap the previous
      segment, because it holds different devices.  Attempts of a rigid job never overlap at all.

``capacity`` -- a step function per pool
    ``pool, start, end, devices_in_service, devices_out_of_service``.  Rows of one pool do not
    overlap; time not covered by any row has no capacity (nothing installed).

``queue`` (optional) -- a step function per pool
    ``pool, start, end, pending_jobs, pending_devices``; when absent it is derived from the
    allocations (a row is pending from ``submit`` to ``gang_complete``, or to ``release`` when it
    never completed).

``reservations`` (optional)
    ``pool, start, end, devices, for_job_id``: free devices kept idle so that a waiting gang can
    assemble (a head-of-line reservation), not a reserved block granted as an allocation (that is
    an allocation and its idleness a runtime loss).

``occupancy`` -- the step function the sweep produces, and what aggregate formats provide directly
    ``pool, start, end, in_service, out_of_service, held_complete, partial_gang, reserved,
    pending_jobs, pending_devices``: device counts (and pending jobs) over ``[start, end)``.

The ``validate_*`` functions check a table, repair what has a named repair and reject what cannot
be used, and return the clean table with a :class:`~fleetlib.quality.Ledger` (through
:class:`~fleetlib.quality.RowBook`).  Ledger rows are 1-based row numbers of the table handed in
(row 1 is its first row), as every reader counts a file's rows.  Structural problems (a missing
column, naive or mixed times, an elastic allocation without a gang-complete time) raise
:class:`~fleetlib.quality.InputError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import excerpt
from fleetlib.quality import InputError, Ledger, RowBook
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    ALLOCATION_TIME_COLUMNS,
    CAPACITY_COLUMNS,
    END_STATES,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    RESERVATION_COLUMNS,
    TABLE_COLUMNS,
    require_columns,
)

__all__ = [
    "WINDOW_SLACK",
    "SchedulerRecords",
    "check_window_within_records",
    "infer_gang_complete",
    "records_span",
    "times_ns",
    "validate_allocations",
    "validate_capacity",
    "validate_occupancy",
    "validate_queue",
    "validate_reservations",
]


_NAT = np.iinfo(np.int64).min
_AWARE_TEXT = r"\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:Z|[+-]\d{2}(?::?\d{2})?)$"


# ---------------------------------------------------------------------------------------------------
# The bundle of tables
# ---------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class SchedulerRecords(Mapping[str, pd.DataFrame]):
    """The tables read from one source: what every scheduling reader's ``read`` returns.

    A mapping of table name -> DataFrame (the reader protocol's ``tables``, see
    :mod:`fleetlib.registry`): the canonical tables the format gives (``allocations``, ``capacity``,
    ``queue``, ``reservations``, ``occupancy``) and the format's own tables kept in ``extra``
    (openb ``waits`` and ``installed``, the Helios ``quota``).  Tables the format does not give are
    not keys (``records.get("queue")`` is None).

    Attributes
    ----------
    allocations, capacity, queue, reservations, occupancy
        Canonical tables (see the module docstring); any may be None.  Scheduling goodput needs
        either ``allocations`` with ``capacity``, or ``occupancy``.
    source
        Where the tables came from (file name or format), for reports.
    extra
        The format's own tables and ``extra["notes"]``: the conventions the reader applied (zone,
        window, what capacity means), name -> one line.
    format
        The format the tables were read in (set by :func:`fleetlib.scheduling.read`; empty when the
        tables were built another way): what the records can observe follows from it
        (:func:`fleetlib.scheduling.unobserved_losses`).
    """

    allocations: pd.DataFrame | None = None
    capacity: pd.DataFrame | None = None
    queue: pd.DataFrame | None = None
    reservations: pd.DataFrame | None = None
    occupancy: pd.DataFrame | None = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    format: str = ""

    @classmethod
    def from_tables(cls, source: str, notes: dict[str, str],
                    **tables: pd.DataFrame | None) -> SchedulerRecords:
        """Bundle a reader's tables: canonical names become attributes, the others go in ``extra``.

        Parameters
        ----------
        source
            Where the tables came from.
        notes
            The conventions the reader applied, stored as ``extra["notes"]``.
        **tables
            Table name -> DataFrame (None: the format does not give it).

        Returns
        -------
        SchedulerRecords
        """
        out = cls(source=source)
        for name, table in tables.items():
            if name in TABLE_COLUMNS:
                setattr(out, name, table)
            else:
                out.extra[name] = table
        out.extra["notes"] = notes
        return out

    def __getitem__(self, name: str) -> pd.DataFrame:
        table = getattr(self, name) if name in TABLE_COLUMNS else self.extra.get(name)
        if not isinstance(table, pd.DataFrame):
            raise KeyError(name)
        return table

    def __iter__(self) -> Iterator[str]:
        yield from (name for name in TABLE_COLUMNS if getattr(self, name) is not None)
        yield from (name for name, t in self.extra.items() if isinstance(t, pd.DataFrame))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def tables(self) -> dict[str, pd.DataFrame | None]:
        """Return the five canonical tables (None where absent), as keyword arguments for the sweep."""
        return {name: getattr(self, name) for name in TABLE_COLUMNS}


# ---------------------------------------------------------------------------------------------------
# Small helpers shared by the validators
# ---------------------------------------------------------------------------------------------------


#: How far a measured window may reach beyond the times its scheduler records name before it is
#: refused (``allow_empty_window`` lifts the refusal): an idle tail after the last job, or before the
#: first, is ordinary; days of it are a window the records do not cover.
WINDOW_SLACK = pd.Timedelta(hours=6)


def records_span(records: Mapping[str, pd.DataFrame | None]) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """Return the first and last time the job records name (None without a record).

    Allocations: every submit and gang-complete time, and the release of each attempt that ended
    (the release of a job still running or pending is the window's end -- the reader's censoring --
    not a time the records name).  Occupancy (sampled series such as Helios sequences): each
    sample's start and end.  Capacity is not a job record: an inventory holds for any window.

    Parameters
    ----------
    records
        The tables read (a :class:`SchedulerRecords` or a mapping with ``allocations`` and/or
        ``occupancy``).

    Returns
    -------
    tuple of (Timestamp, Timestamp) or None
        The span (UTC).
    """
    times = []
    alloc = records.get("allocations")
    if alloc is not None and not alloc.empty:
        ended = ~alloc["end_state"].astype(str).isin(["running", "pending"]).to_numpy()
        times += [alloc["submit"], alloc["gang_complete"], alloc["release"][ended]]
    occ = records.get("occupancy")
    if occ is not None and not occ.empty:
        times += [occ["start"], occ["end"]]
    every = pd.concat(times).dropna() if times else pd.Series([], dtype=object)
    if every.empty:
        return None
    return every.min(), every.max()


def check_window_within_records(records: Mapping[str, pd.DataFrame | None], start: pd.Timestamp,
                                end: pd.Timestamp, *, file: str | None = None) -> None:
    """Refuse a window that reaches beyond the scheduler records' span by more than :data:`WINDOW_SLACK`.

    Capacity in a stretch no record covers would count as idle: S would fall without a word.

    Parameters
    ----------
    records
        The tables read for the window (:func:`records_span`).
    start, end
        The window's bounds (UTC).
    file
        The file the window was stated in (a manifest), for the message.

    Raises
    ------
    InputError
        One line naming the window's span and the records' span, and ``--allow-empty-window``.
    """
    span = records_span(records)
    if span is not None and start >= span[0] - WINDOW_SLACK and end <= span[1] + WINDOW_SLACK:
        return
    named = "no job record" if span is None else f"{span[0].isoformat()} .. {span[1].isoformat()}"
    hours = WINDOW_SLACK / pd.Timedelta(hours=1)
    raise InputError(
        f"the window {start.isoformat()} .. {end.isoformat()} reaches more than {hours:g} h beyond the "
        f"scheduler records ({named}): the uncovered time would count as idle capacity; narrow the "
        "window, or pass --allow-empty-window (allow_empty_window=True) to measure it as stated",
        file=file,
        field="window",
    )


def _first_row(mask: np.ndarray) -> int | None:
    """Return the 1-based row number of the first True of ``mask`` (as the ledger counts rows)."""
    idx = np.flatnonzero(mask)
    return int(idx[0]) + 1 if idx.size else None


def _replace(mask: np.ndarray, other: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return ``numpy.where(mask, other, values)``, or ``values`` itself when the mask is all False."""
    return np.where(mask, other, values) if bool(mask.any()) else values


#: Rows per block of the blocked checks (only small temporaries are made).
_BLOCK = 1 << 16


def _factorize(col: pd.Series) -> tuple[np.ndarray, Any]:
    """Return what ``pandas.factorize(col, use_na_sentinel=True)`` returns, cheaply for categoricals.

    For a categorical column the codes come from the category codes (compact integers, no
    hashing): uniques are the categories that occur, in order of first occurrence, found block by
    block, so no full-length temporary is made but the codes themselves.
    """
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return pd.factorize(col, use_na_sentinel=True)
    cats = col.cat.categories
    raw = col.cat.codes.to_numpy()
    k = len(cats)
    first = np.full(k, -1, dtype=np.int64)
    for lo in range(0, raw.size, _BLOCK):
        blk = raw[lo:lo + _BLOCK]
        seen = np.bincount(blk[blk >= 0], minlength=k) > 0 if k else np.zeros(0, dtype=bool)
        for c in np.flatnonzero(seen & (first < 0)).tolist():
            first[c] = lo + int(np.argmax(blk == c))
        if bool((first >= 0).all()):
            break
    used = np.flatnonzero(first >= 0)
    used = used[np.argsort(first[used], kind="stable")]
    dtype = np.int8 if used.size < 127 else np.int16 if used.size < 32767 else np.int32
    mapping = np.full(k + 1, -1, dtype=dtype)  # the last entry serves code -1 (missing)
    mapping[used] = np.arange(used.size, dtype=dtype)
    return mapping[raw], cats[used]


def times_ns(values: pd.Series | pd.Index | np.ndarray, *, file: str = "<table>",
             field: str = "time") -> np.ndarray:
    """Return timezone-aware times as int64 UTC nanoseconds (NaT as the int64 minimum).

    Parameters
    ----------
    values
        A datetime column.  Timezone-aware datetimes (any zone) are converted to UTC; text or
        objects are parsed and must carry their zone.
    file, field
        Named in the error message.

    Returns
    -------
    numpy.ndarray
        int64 nanoseconds since the Unix epoch, UTC; missing times are ``numpy.iinfo(int64).min``.

    Raises
    ------
    InputError
        Naive times (the zone is unknown), or naive and aware times mixed in one column.
    """
    s = pd.Series(values) if not isinstance(values, pd.Series) else values
    dtype = s.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        if dtype.unit != "ns" or str(dtype.tz) != "UTC":
            s = s.dt.tz_convert("UTC").dt.as_unit("ns")
        out = s.array.asi8.view()
        out.flags.writeable = False
        return out
    if pd.api.types.is_datetime64_dtype(dtype):
        raise InputError(
            "naive timestamps: canonical scheduler tables carry timezone-aware UTC times; localize the "
            "column with the zone the source defines (e.g. .dt.tz_localize('UTC'))",
            file=file, row=1 if len(s) else None, field=field)
    nonnull = s.notna().to_numpy()
    if not nonnull.any():
        return np.full(len(s), _NAT, dtype=np.int64)
    is_text = s[nonnull].map(lambda x: isinstance(x, str)).to_numpy()
    if is_text.all():
        aware = s.astype("string").str.strip().str.contains(_AWARE_TEXT, regex=True)
        aware = aware.to_numpy(dtype=bool, na_value=False)
    elif not is_text.any():
        aware = s.map(lambda x: getattr(x, "tzinfo", None) is not None).to_numpy(dtype=bool)
    else:
        raise InputError("times mix text and datetime objects", file=file,
                         row=_first_row(nonnull), field=field)
    if not (aware | ~nonnull).all():
        if not (aware & nonnull).any():
            raise InputError("naive timestamps: the zone is unknown; give timezone-aware UTC times",
                             file=file, row=_first_row(nonnull), field=field)
        first = int(np.flatnonzero(nonnull)[0])
        disagree = nonnull & (aware != aware[first])
        raise InputError("naive and timezone-aware times mixed in one column; the zone of the naive "
                         "ones is unknown", file=file, row=_first_row(disagree), field=field)
    try:
        if is_text.all():
            parsed = pd.to_datetime(s, utc=True, format="ISO8601")
        else:
            parsed = pd.to_datetime(s, utc=True)
    except (ValueError, TypeError) as exc:
        # name the first value that does not parse, by its row, as written (shortened and escaped)
        coerced = pd.to_datetime(s.astype("string") if is_text.all() else s, utc=True, errors="coerce",
                                 format="ISO8601" if is_text.all() else None)
        bad = nonnull & coerced.isna().to_numpy()
        row = _first_row(bad) if bad.any() else None
        shown = f"{excerpt(s.iloc[row - 1])} " if row is not None else ""
        raise InputError(f"time {shown}cannot be parsed; expected an ISO 8601 time with a zone between "
                         "1677 and 2262", file=file, row=row, field=field) from exc
    return parsed.dt.as_unit("ns").array.asi8.copy()


def _to_utc_series(ns: np.ndarray) -> pd.Series:
    return pd.Series(pd.to_datetime(ns, unit="ns", utc=True))


def _int_column(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return (int64 values with 0 for bad, ok mask) for a count column."""
    if values.dtype.kind in "iu":
        return values.to_numpy(dtype=np.int64), np.ones(len(values), dtype=bool)
    num = pd.to_numeric(values, errors="coerce")
    arr = num.to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        # a count beyond int64 would wrap when stored: not a count
        ok = np.isfinite(arr) & (np.floor(arr) == arr) & (np.abs(arr) < 2.0**63)
    out = np.where(ok, arr, 0).astype(np.int64)
    return out, ok


# ---------------------------------------------------------------------------------------------------
# Allocations
# ---------------------------------------------------------------------------------------------------


def validate_allocations(df: pd.DataFrame, *, file: str = "<allocations>", open_end: Any = None,
                         ledger: Ledger | None = None) -> tuple[pd.DataFrame, Ledger]:
    """Check a canonical allocations table, repair what has a named repair, reject the rest.

    Repairs (the row is kept, the ledger names the repair):

    * a rigid allocation without ``gang_complete`` -- the gang-complete time is inferred from the
      requested size: an allocation that holds its ``requested_devices`` is taken as complete at
      ``first_assigned``; one that holds fewer never completed (``gang_complete := release``,
      its whole hold is partial);
    * ``first_assigned`` missing while ``gang_complete`` is known -- atomic allocation,
      ``first_assigned := gang_complete``;
    * ``submit`` missing -- ``submit := first_assigned`` (queue wait unknown, counted as zero);
    * ``release`` missing (still holding at the end of the record) -- ``release := open_end`` when
      ``open_end`` is given;
    * ``requested_devices`` missing -- ``requested_devices := devices``;
    * an end state outside :data:`END_STATES` -- kept as ``"unknown"``.

    Rejections (the row is dropped, the ledger names the field and the reason): missing pool, job
    id, attempt or elastic flag; a device count that is not a non-negative integer (or zero on an
    assigned row); times out of order (assigned before submit, gang complete before first
    assignment, release before gang completion or before submit); a duplicate row or a second
    row for the same ``(job_id, attempt)``; an attempt that overlaps an earlier attempt of the
    same rigid job, or an elastic segment whose held interval overlaps an earlier one.

    Parameters
    ----------
    df
        The table; every column of :data:`ALLOCATION_COLUMNS` is required.
    file
        Source name used in ledger entries and errors.
    open_end
        Timezone-aware time that closes allocations still holding at the end of the record; when
        None, such rows are rejected.
    ledger
        Ledger to add to (a new one when None).

    Returns
    -------
    tuple of (pandas.DataFrame, Ledger)
        The clean table (canonical dtypes, times as ``datetime64[ns, UTC]``, original index
        reset) and the ledger.

    Raises
    ------
    InputError
        A missing column, naive or mixed times, or an elastic allocation without a gang-complete
        time: elastic jobs change their valid size, so completeness cannot be inferred.
    """
    require_columns(df, ALLOCATION_COLUMNS, file, "allocations")
    ledger = ledger if ledger is not None else Ledger()
    n = len(df)
    log = RowBook(file, n)
    t = {c: times_ns(df[c], file=file, field=c) for c in ALLOCATION_TIME_COLUMNS}
    sub, fa, gc, rel = t["submit"], t["first_assigned"], t["gang_complete"], t["release"]
    nat = {c: t[c] == _NAT for c in ("first_assigned", "gang_complete")}

    pool_codes, pool_names = _factorize_pool(df["pool"])
    log.reject(pool_codes < 0, "pool", "pool missing")
    log.reject(df["job_id"].isna().to_numpy(), "job_id", "job_id missing")
    log.reject(df["attempt"].isna().to_numpy(), "attempt", "attempt missing")
    attempt, attempt_ok = _int_column(df["attempt"])
    log.reject(~attempt_ok, "attempt", "attempt is not an integer")

    el_raw = df["elastic"]
    el_na = el_raw.isna().to_numpy()
    log.reject(el_na, "elastic",
               "elastic flag missing: rigid or elastic decides how gang completeness is read")
    elastic = el_raw.fillna(False).astype(bool).to_numpy()

    devices, dev_ok = _int_column(df["devices"])
    log.reject(~dev_ok | (devices < 0), "devices", "devices must be a non-negative integer")
    req_raw = df["requested_devices"]
    req_na = req_raw.isna().to_numpy()
    requested, req_ok = _int_column(req_raw)
    log.reject(~req_na & (~req_ok | (requested < 0)), "requested_devices",
               "requested_devices must be a non-negative integer")
    log.repair(req_na, "requested_devices", "requested_devices missing: set to devices")
    requested = _replace(req_na, devices, requested)

    # elastic allocation without a gang-complete marker: refuse (cannot be inferred)
    bad_el = elastic & ~nat["first_assigned"] & nat["gang_complete"] & ~log.rejected
    if bad_el.any():
        r = _first_row(bad_el)
        raise InputError(
            "elastic allocation without a gang-complete time: an elastic job's valid gang size changes, "
            "so completeness cannot be inferred from its size; the scheduler must log the moment the gang "
            "became complete", file=file, row=r, field="gang_complete")

    # first_assigned missing while gang_complete known: atomic allocation
    m = nat["first_assigned"] & ~nat["gang_complete"]
    log.repair(m, "first_assigned", "first_assigned missing: atomic allocation, set to gang_complete")
    fa = _replace(m, gc, fa)
    # rigid allocation without gang-complete marker: infer from requested size
    m = ~elastic & ~nat["first_assigned"] & nat["gang_complete"]
    full = m & (devices >= requested)
    short = m & (devices < requested)
    log.repair(full, "gang_complete", "gang_complete inferred from requested size (rigid, flagged): the "
               "allocation holds its requested devices, taken as complete at first_assigned")
    log.repair(short, "gang_complete", "gang_complete inferred from requested size (rigid, flagged): fewer "
               "devices than requested, the gang never completed; gang_complete set to release")
    gc = _replace(full, fa, gc)
    gc = _replace(short, rel, gc)
    # release missing
    m = rel == _NAT
    if open_end is not None:
        end_ns = int(times_ns(pd.Series([pd.Timestamp(open_end)]), file=file, field="open_end")[0])
        log.repair(m, "release", f"release missing (still holding at the end of the record): set to "
                   f"open_end {pd.Timestamp(end_ns, unit='ns', tz='UTC').isoformat()}")
        rel = np.where(m, end_ns, rel)
        gc = np.where(short & m, rel, gc)
    else:
        log.reject(m, "release", "release missing: pass open_end= to close allocations still holding at "
                   "the end of the record")
    # submit missing
    m = sub == _NAT
    log.repair(m & (fa != _NAT), "submit", "submit missing: set to first_assigned (queue wait unknown, "
               "counted as zero)")
    log.reject(m & (fa == _NAT), "submit", "submit missing on a row that never got a device")
    sub = _replace(m, fa, sub)

    assigned = fa != _NAT
    log.reject(assigned & (devices == 0), "devices", "an assigned allocation holds at least one device")
    log.reject(assigned & (fa < sub), "first_assigned", "first_assigned before submit")
    log.reject(assigned & (gc < fa), "gang_complete", "gang_complete before first_assigned")
    log.reject(assigned & (rel < gc), "release", "release before gang completion")
    log.reject(~assigned & (rel < sub), "release", "release before submit")

    state_codes = _end_state_codes(df["end_state"], log)

    _reject_duplicates_and_overlaps(df, log, elastic, attempt, fa, gc, rel)

    keep = log.close(ledger)
    out = _kept_allocations(df, keep, t, attempt=attempt, pool_codes=pool_codes, pool_names=pool_names,
                            devices=devices, sub=sub, fa=fa, gc=gc, rel=rel, elastic=elastic,
                            state_codes=state_codes, requested=requested)
    return out, ledger


def _end_state_codes(end_state: pd.Series, log: RowBook) -> np.ndarray:
    """Return each row's code in END_STATES; an unknown or missing state is kept as 'unknown' (a repair)."""
    st_codes, st_uniques = _factorize(end_state)
    norm = np.array([str(u).strip().lower() for u in st_uniques] + ["unknown"], dtype=object)
    norm_known = np.isin(norm, END_STATES)
    if bool(np.any(st_codes < 0)):
        st_codes = np.where(st_codes < 0, len(norm) - 1, st_codes)
    for k in np.flatnonzero(~norm_known).tolist():
        log.repair(st_codes == k, "end_state", f"end state {str(st_uniques[k])!r} not recognised: kept as "
                   "'unknown'")
    log.repair(np.asarray(end_state.isna()), "end_state", "end state missing: kept as 'unknown'")
    canon = {v: i for i, v in enumerate(END_STATES)}
    to_canon = np.array([canon[v] if k else canon["unknown"] for v, k in zip(norm, norm_known, strict=True)],
                        dtype=np.int8)
    state_codes = to_canon[st_codes]
    return state_codes


def _kept_allocations(df: pd.DataFrame, keep: np.ndarray, t: dict[str, np.ndarray], *, attempt: np.ndarray,
                      pool_codes: np.ndarray, pool_names: pd.Index, devices: np.ndarray, sub: np.ndarray,
                      fa: np.ndarray, gc: np.ndarray, rel: np.ndarray, elastic: np.ndarray,
                      state_codes: np.ndarray, requested: np.ndarray) -> pd.DataFrame:
    """Return the validated allocations table: the kept rows, repaired values, UTC times."""
    every = bool(keep.all())

    def take(x: Any) -> Any:
        x = x if every else x[keep]
        # pandas' copy-on-write hands out read-only views of the input's columns (to_numpy); a column
        # passed through unchanged is copied once so the caller gets an editable table of its own
        if isinstance(x, np.ndarray) and not x.flags.writeable:
            x = x.copy()
        return x

    def utc(name: str, values: np.ndarray) -> Any:
        col = df[name]
        same = ((values is t[name] or bool(np.array_equal(values, t[name])))
                and isinstance(col.dtype, pd.DatetimeTZDtype))
        if same and str(col.dtype.tz) == "UTC" and col.dtype.unit == "ns":
            return take(col.array)
        return _to_utc_series(take(values)).array

    out = pd.DataFrame({
        "job_id": take(df["job_id"].to_numpy()),
        "attempt": take(attempt),
        "pool": pd.Categorical.from_codes(take(np.maximum(pool_codes, 0)), categories=pool_names)
        if len(pool_names) else pd.Categorical([]),
        "devices": take(devices),
        "submit": utc("submit", sub),
        "first_assigned": utc("first_assigned", fa),
        "gang_complete": utc("gang_complete", gc),
        "release": utc("release", rel),
        "priority": take(df["priority"].to_numpy()),
        "elastic": take(elastic),
        "end_state": pd.Categorical.from_codes(take(state_codes), categories=list(END_STATES)),
        "requested_devices": take(requested),
    }, copy=False)
    return out


def _reject_duplicates_and_overlaps(df: pd.DataFrame, log: RowBook, elastic: np.ndarray,
                                    attempt: np.ndarray, fa: np.ndarray, gc: np.ndarray,
                                    rel: np.ndarray) -> None:
    """Reject duplicate keys and overlapping attempts; only jobs with several rows are examined."""
    alive = ~log.rejected
    jid = df["job_id"].to_numpy()
    if jid.dtype.kind in "iu" and jid.size > 1 and _is_sorted(jid):
        # sorted integer ids (as fleetlib writes them): a job's rows are neighbours
        multi = np.zeros(jid.size, dtype=bool)
        np.equal(jid[1:], jid[:-1], out=multi[1:])
        multi[:-1] |= multi[1:]
        multi &= alive
        rows = np.flatnonzero(multi)
        del multi
        jr = jid[rows]
        codes_rows = np.cumsum(np.r_[True, jr[1:] != jr[:-1]]) - 1 if rows.size else rows
    else:
        codes, _ = pd.factorize(df["job_id"], use_na_sentinel=True)
        ok = alive & (codes >= 0)
        counts = np.bincount(codes[ok]) if ok.any() else np.zeros(1, np.int64)
        multi = ok.copy()
        multi[ok] = counts[codes[ok]] > 1
        rows = np.flatnonzero(multi)
        codes_rows = codes[rows]
    if rows.size < 2:
        return
    # duplicates of the key (job_id, attempt)
    a_rows = attempt[rows] - attempt[rows].min()
    key = pd.Series(codes_rows.astype(np.int64) * (int(a_rows.max()) + 1) + a_rows)
    kv = key.to_numpy()
    # keys that strictly increase (each job's attempts in order, as usual) cannot repeat
    dup = None if bool(np.all(kv[1:] > kv[:-1])) else key.duplicated(keep="first").to_numpy()
    if dup is not None and dup.any():
        sub = df.iloc[rows]
        first_of = pd.factorize(key)[0]
        first_row: dict[int, int] = {}
        for g, r in zip(first_of.tolist(), rows.tolist(), strict=True):
            first_row.setdefault(g, r)
        identical = sub.astype(str).duplicated(keep="first").to_numpy()
        reasons = []
        for i in np.flatnonzero(dup).tolist():
            orig = first_row[first_of[i]]
            reasons.append(f"duplicate of row {orig + 1}" if identical[i]
                           else f"second row for the same job_id and attempt as row {orig + 1}")
        log.reject(rows[dup], "attempt", reasons)
    alive_rows = rows[~log.rejected[rows] & (fa[rows] != _NAT)]
    if alive_rows.size < 2:
        return
    c = codes_rows[np.searchsorted(rows, alive_rows)]  # rows is ascending, alive_rows a subset
    el = elastic[alive_rows]
    # rigid: [first_assigned, release) must not overlap; elastic: [gang_complete, release)
    start = np.where(el, gc[alive_rows], fa[alive_rows])
    end = rel[alive_rows]
    in_order = (c[1:] > c[:-1]) | ((c[1:] == c[:-1]) & (start[1:] >= start[:-1]))
    order = None if bool(np.all(in_order)) else np.lexsort((start, c))
    c_o, s_o, e_o, r_o = ((c, start, end, alive_rows) if order is None
                          else (c[order], start[order], end[order], alive_rows[order]))
    # running max of end within each job (the ends themselves when they never decrease in a job)
    same = np.r_[False, c_o[1:] == c_o[:-1]]
    if bool(np.all((e_o[1:] >= e_o[:-1]) | ~same[1:])):
        cm = e_o
    else:
        cm = pd.Series(e_o).groupby(np.cumsum(~same)).cummax().to_numpy()
    prev_end = np.r_[_NAT, cm[:-1]]
    overlap = same & (s_o < prev_end) & (e_o > s_o)
    if overlap.any():
        # position (in sorted order) of the row that set the running maximum of release
        setter = pd.Series(np.where(e_o == cm, np.arange(len(e_o)), np.nan)).ffill().to_numpy()
        idx = np.flatnonzero(overlap)
        el_o = el if order is None else el[order]
        reasons = [
            (f"held interval overlaps an earlier segment (row {int(r_o[int(setter[i - 1])]) + 1}) of the "
             "same elastic job: one active gang size at a time") if el_o[i] else
            (f"overlaps an earlier attempt (row {int(r_o[int(setter[i - 1])]) + 1}) of the same job: "
             "attempts of a job hold devices one after another")
            for i in idx.tolist()]
        log.reject(r_o[idx], "first_assigned", reasons)


def _is_sorted(x: np.ndarray) -> bool:
    """Return True when ``x`` is non-decreasing (checked block by block)."""
    for lo in range(0, max(x.size - 1, 0), _BLOCK):
        hi = min(lo + _BLOCK, x.size - 1)
        if not bool(np.all(x[lo + 1:hi + 1] >= x[lo:hi])):
            return False
    return True


def _factorize_pool(pool: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Return pool codes (-1 for missing or empty names) and the pool names as strings."""
    codes, uniques = _factorize(pool)
    names = pd.Index([str(u) for u in uniques], dtype=object)
    empty = np.flatnonzero(names == "")
    if empty.size:
        codes = np.where(np.isin(codes, empty), -1, codes)
    return codes, names


def infer_gang_complete(bindings: pd.DataFrame, requested: pd.DataFrame, *,
                        file: str = "<bindings>") -> pd.DataFrame:
    """Infer gang-complete times of rigid jobs from individual device bindings.

    When a scheduler logs node or pod bindings but no gang-complete event, a rigid job's gang is
    complete at the first binding that brings its bound devices up to the requested size.  Elastic
    jobs cannot be inferred this way (their valid size changes); pass only rigid attempts.

    Parameters
    ----------
    bindings
        Columns ``job_id, attempt, time, devices``: each row binds ``devices`` devices at ``time``.
    requested
        Columns ``job_id, attempt, requested_devices``.
    file
        Source name for errors.

    Returns
    -------
    pandas.DataFrame
        ``job_id, attempt, first_assigned, gang_complete, bound_devices``: first binding, the
        inferred gang-complete time (NaT when the bound devices never reach the requested size)
        and the total devices bound.
    """
    require_columns(bindings, ("job_id", "attempt", "time", "devices"), file, "bindings")
    require_columns(requested, ("job_id", "attempt", "requested_devices"), file, "requested")
    b = bindings[["job_id", "attempt", "devices"]].copy()
    b["time"] = times_ns(bindings["time"], file=file, field="time")
    b = b.sort_values(["job_id", "attempt", "time"], kind="stable")
    b["bound"] = b.groupby(["job_id", "attempt"], sort=False)["devices"].cumsum()
    b = b.merge(requested[["job_id", "attempt", "requested_devices"]], on=["job_id", "attempt"], how="left")
    first = b.groupby(["job_id", "attempt"], sort=False).agg(first_assigned=("time", "min"),
                                                              bound_devices=("bound", "max"))
    reached = b[b["bound"] >= b["requested_devices"]]
    done = reached.groupby(["job_id", "attempt"], sort=False)["time"].min().rename("gang_complete")
    out = first.join(done, how="left").reset_index()
    out["first_assigned"] = _to_utc_series(out["first_assigned"].to_numpy(np.int64))
    gcv = out["gang_complete"].to_numpy(dtype=float, na_value=np.nan)
    out["gang_complete"] = _to_utc_series(np.where(np.isnan(gcv), _NAT, np.nan_to_num(gcv)).astype(np.int64))
    return out[["job_id", "attempt", "first_assigned", "gang_complete", "bound_devices"]]


# ---------------------------------------------------------------------------------------------------
# Interval tables: capacity, queue, reservations, occupancy
# ---------------------------------------------------------------------------------------------------


def _text_key(col: pd.Series) -> np.ndarray:
    """Values that are equal exactly where ``col.astype(str)`` is equal (missing values equal to each other).

    Integer and boolean columns are their own key, a categorical column compares the text of its
    categories through its codes; only other columns are turned into text.
    """
    if isinstance(col.dtype, np.dtype) and col.dtype.kind in "iub":
        return col.to_numpy()
    if isinstance(col.dtype, pd.CategoricalDtype):
        text = pd.Index([str(c) for c in col.cat.categories], dtype=object)
        ids = np.append(pd.factorize(text)[0], -1)  # the last entry serves code -1 (missing)
        return ids[col.cat.codes.to_numpy()]
    return col.astype(str).to_numpy()


def _validate_intervals(df: pd.DataFrame, columns: tuple[str, ...], counts: Mapping[str, str], *,
                        table: str, file: str, ledger: Ledger | None, no_overlap: bool,
                        positive: tuple[str, ...] = ()) -> tuple[pd.DataFrame, Ledger]:
    require_columns(df, columns, file, table)
    ledger = ledger if ledger is not None else Ledger()
    n = len(df)
    log = RowBook(file, n)
    start = times_ns(df["start"], file=file, field="start")
    end = times_ns(df["end"], file=file, field="end")
    log.reject(df["pool"].isna().to_numpy(), "pool", "pool missing")
    log.reject(start == _NAT, "start", "start missing")
    log.reject(end == _NAT, "end", "end missing")
    log.reject((start != _NAT) & (end != _NAT) & (end <= start), "end", "end not after start")
    ints = {}
    for col, what in counts.items():
        v, ok = _int_column(df[col])
        log.reject(~ok | (v < 0), col, f"{what} must be a non-negative integer")
        if col in positive:
            log.reject(ok & (v == 0), col, f"{what} must be at least 1")
        ints[col] = v
    alive = ~log.rejected
    if n and alive.any():
        key = pd.DataFrame({"pool": _text_key(df["pool"]), "start": start, "end": end,
                            **{c: ints[c] for c in counts},
                            **{c: _text_key(df[c]) for c in columns
                               if c not in counts and c not in ("pool", "start", "end")}})
        dup = key.duplicated(keep="first").to_numpy() & alive
        if dup.any():
            log.reject(dup, "start", f"duplicate {table} row")
        alive = ~log.rejected
        if no_overlap and alive.sum() > 1:
            rows = np.flatnonzero(alive)
            pc, _ = pd.factorize(key["pool"].to_numpy()[rows])
            order = np.lexsort((start[rows], pc))
            p_o, s_o, e_o, r_o = pc[order], start[rows][order], end[rows][order], rows[order]
            same = np.r_[False, p_o[1:] == p_o[:-1]]
            cm = pd.Series(e_o).groupby(np.cumsum(~same)).cummax().to_numpy()
            prev_end = np.r_[_NAT, cm[:-1]]
            ov = same & (s_o < prev_end)
            if ov.any():
                idx = np.flatnonzero(ov)
                pools = df["pool"].astype(str).to_numpy()
                log.reject(r_o[idx], "start", [
                    f"overlaps an earlier {table} row of pool {pools[int(r_o[i - 1])]!r} "
                    f"(row {int(r_o[i - 1]) + 1}); a pool's {table} is one step function"
                    for i in idx.tolist()])
    keep = log.close(ledger)
    out = {"pool": df["pool"].to_numpy()[keep], "start": _to_utc_series(start[keep]),
           "end": _to_utc_series(end[keep])}
    for c in columns:
        if c in out:
            continue
        out[c] = ints[c][keep] if c in ints else df[c].to_numpy()[keep]
    return pd.DataFrame(out, columns=list(columns)), ledger


def validate_capacity(df: pd.DataFrame, *, file: str = "<capacity>",
                      ledger: Ledger | None = None) -> tuple[pd.DataFrame, Ledger]:
    """Check a capacity step function; reject bad, duplicate and overlapping rows.

    Parameters
    ----------
    df
        Columns :data:`CAPACITY_COLUMNS`.
    file
        Source name for the ledger.
    ledger
        Ledger to add to (a new one when None).

    Returns
    -------
    tuple of (pandas.DataFrame, Ledger)
        Clean table and ledger.  A row that overlaps an earlier row of its pool is rejected: a
        pool's capacity is one step function.
    """
    return _validate_intervals(df, CAPACITY_COLUMNS,
                               {"devices_in_service": "devices_in_service",
                                "devices_out_of_service": "devices_out_of_service"},
                               table="capacity", file=file, ledger=ledger, no_overlap=True)


def validate_queue(df: pd.DataFrame, *, file: str = "<queue>",
                   ledger: Ledger | None = None) -> tuple[pd.DataFrame, Ledger]:
    """Check a queue step function (``pool, start, end, pending_jobs, pending_devices``).

    Parameters
    ----------
    df
        Columns :data:`QUEUE_COLUMNS`.
    file
        Source name for the ledger.
    ledger
        Ledger to add to (a new one when None).

    Returns
    -------
    tuple of (pandas.DataFrame, Ledger)
        Clean table and ledger.
    """
    return _validate_intervals(df, QUEUE_COLUMNS, {"pending_jobs": "pending_jobs",
                                                    "pending_devices": "pending_devices"},
                               table="queue", file=file, ledger=ledger, no_overlap=True)


def validate_reservations(df: pd.DataFrame, *, file: str = "<reservations>",
                          ledger: Ledger | None = None) -> tuple[pd.DataFrame, Ledger]:
    """Check a reservations table (devices kept idle for a waiting gang).

    Parameters
    ----------
    df
        Columns :data:`RESERVATION_COLUMNS`; reservations may overlap each other.
    file
        Source name for the ledger.
    ledger
        Ledger to add to (a new one when None).

    Returns
    -------
    tuple of (pandas.DataFrame, Ledger)
        Clean table and ledger.
    """
    return _validate_intervals(df, RESERVATION_COLUMNS, {"devices": "devices"}, table="reservations",
                               file=file, ledger=ledger, no_overlap=False, positive=("devices",))


def validate_occupancy(df: pd.DataFrame, *, file: str = "<occupancy>",
                       ledger: Ledger | None = None) -> tuple[pd.DataFrame, Ledger]:
    """Check an occupancy step function (device counts per pool over intervals).

    Allocated counts above in-service capacity are kept: the goodput computation reports them
    (negative ``unattributed`` and a flag) instead of clipping them.

    Parameters
    ----------
    df
        Columns :data:`OCCUPANCY_COLUMNS`.
    file
        Source name for the ledger.
    ledger
        Ledger to add to (a new one when None).

    Returns
    -------
    tuple of (pandas.DataFrame, Ledger)
        Clean table and ledger.
    """
    counts = {c: c for c in OCCUPANCY_COLUMNS[3:]}
    return _validate_intervals(df, OCCUPANCY_COLUMNS, counts, table="occupancy", file=file, ledger=ledger,
                               no_overlap=True)
