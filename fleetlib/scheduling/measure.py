"""Measure scheduling goodput S: scheduler records (or their files) -> :class:`SchedulingMeasurement`.

The one call of the rung's measurement room::

    m = measure(paths, format="helios-sequence")            # or measure(records, ledger=ledger)
    m.factor()        # S as a fleetlib.accounting.Factor (numerator, denominator, losses, window)
    m.partition       # the exact per-pool partition of capacity-time (SchedulingPartition)
    m.ledger          # every input row accounted for (read = kept + repaired + rejected; flags)
    m.to_dict()       # the JSON object ``fleetlib scheduling --json`` prints

It reads through :data:`fleetlib.scheduling.readers.READERS` when given paths, parses the window
with :meth:`fleetlib.accounting.Window.parse` (the record window and the measured window are the
same), and computes the partition with :func:`fleetlib.scheduling.goodput.scheduling_partition`;
nothing here formats text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, Ledger
from fleetlib.registry import detect
from fleetlib.scheduling.goodput import SchedulingPartition, scheduling_partition
from fleetlib.scheduling.readers import read
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import (
    DENOMINATORS,
    LOSS_KEYS,
    SILENT_CHANNELS,
    TABLE_COLUMNS,
    UNOBSERVABLE_LOSSES,
    Denominator,
    IdleView,
)

__all__ = ["COLLECTION_GAP_S", "SchedulingMeasurement", "collection_gap_note", "collection_gap_records",
           "collection_gaps", "measure", "unobserved_losses"]

_TABLES = tuple(TABLE_COLUMNS)

#: The shortest stretch without any job record (while capacity persists) flagged as a collection gap.
COLLECTION_GAP_S = 3600.0


@dataclass(frozen=True)
class SchedulingMeasurement:
    """Scheduling goodput measured over one window, with the records' ledger.

    Attributes
    ----------
    partition
        The exact partition of capacity-time per pool (:class:`SchedulingPartition`).
    ledger
        The readers' ledger (an empty one when tables were handed in without a ledger).
    denominator
        ``"in_service"`` (the accounting's) or ``"installed"``.
    records
        The tables measured (None when only tables were handed in as a mapping).
    format
        The reader's format name, or None when records were handed in.
    gaps
        The collection gaps found in the measured window (:func:`collection_gaps`), or None.
    unobserved
        Loss key -> why the records cannot observe it (:func:`unobserved_losses`); those losses are
        ``null`` in :meth:`to_dict`, never a measured 0.
    """

    partition: SchedulingPartition
    ledger: Ledger
    denominator: Denominator = "in_service"
    records: SchedulerRecords | None = None
    format: str | None = None
    gaps: pd.DataFrame | None = None
    unobserved: Mapping[str, str] = field(default_factory=dict)

    @property
    def window(self) -> Window:
        """The measured window (the one the partition covers)."""
        return self.partition.window

    @property
    def scheduling_goodput(self) -> float:
        """S over the whole fleet, with this measurement's denominator."""
        return self.factor().value

    def factor(self, pool: str | None = None, *, view: IdleView = "pool") -> Factor:
        """Return S as a :class:`~fleetlib.accounting.Factor`.

        Parameters
        ----------
        pool
            One pool, or None for the whole fleet.
        view
            ``"pool"`` (idle split by the pool's own queue) or ``"cross_pool"``.

        Returns
        -------
        Factor
            As :meth:`SchedulingPartition.factor` with this measurement's denominator.
        """
        return self.partition.factor(pool, view=view, denominator=self.denominator)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready object of ``fleetlib scheduling --json``.

        Returns
        -------
        dict
            ``scheduling_goodput, capacity_device_s, held_device_s, availability, losses,
            cross_pool_losses, pools, ledger`` (:meth:`SchedulingPartition.summary`), the
            ``window`` and ``collection_gaps`` (one object per gap: ``start``, ``end``, ``seconds``,
            ``device_s``, in-window capacity-time of the gap; empty when none was found).  A loss the
            records cannot observe is ``null`` in ``losses`` (the fleet's and each pool's) and named
            with its reason in ``unobserved``.
        """
        out = self.partition.summary(denominator=self.denominator, ledger=self.ledger)
        out["unobserved"] = dict(self.unobserved)
        for part in (out, *out["pools"].values()):
            for key in self.unobserved:
                part["losses"][key] = None
        out["window"] = self.window.to_dict()
        out["collection_gaps"] = collection_gap_records(self.gaps)
        return out


def unobserved_losses(format: str | None, tables: Mapping[str, pd.DataFrame | None]) -> dict[str, str]:
    """Return the scheduling losses these records cannot observe, each with its reason.

    Two sources: the format's entry of :data:`~fleetlib.scheduling.schema.UNOBSERVABLE_LOSSES`, and
    ``reservation`` whenever there is neither a ``reservations`` table nor an ``occupancy`` table
    (whose ``reserved`` channel the format fills): without either, devices kept idle for a waiting
    gang are inside the idle losses and cannot be told apart.

    Parameters
    ----------
    format
        The reader's format name, or None when tables were handed in.
    tables
        The canonical tables measured (absent or None ones are missing).

    Returns
    -------
    dict
        Loss key -> ``"not observable in <format> records: <why>"``, in the order of
        :data:`~fleetlib.scheduling.schema.LOSS_KEYS`.
    """
    where = f"{format} records" if format else "these records"
    why = dict(UNOBSERVABLE_LOSSES.get(format or "", {}))
    if tables.get("reservations") is None and tables.get("occupancy") is None:
        why.setdefault("reservation", "no record of devices kept idle for a waiting gang (such time is "
                                      "inside the idle losses)")
    return {k: f"not observable in {where}: {why[k]}" for k in LOSS_KEYS if k in why}


def collection_gap_records(gaps: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Return collection gaps (:func:`collection_gaps`' table) as JSON-ready objects.

    Parameters
    ----------
    gaps
        The table of :func:`collection_gaps`, or None (not looked for).

    Returns
    -------
    list of dict
        One object per gap, in time order: ``start``, ``end`` (ISO 8601, UTC), ``seconds`` and
        ``device_s`` (the in-service capacity-time inside the gap); empty when none.
    """
    rows = () if gaps is None else gaps.itertuples(index=False)
    return [{"start": g.start.isoformat(), "end": g.end.isoformat(), "seconds": float(g.seconds),
             "device_s": float(g.device_s)} for g in rows]


def _ns(values: Any) -> np.ndarray:
    return pd.DatetimeIndex(pd.to_datetime(pd.Series(values), utc=True)).as_unit("ns").asi8


def _holes(start: np.ndarray, end: np.ndarray, w0: int, w1: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the stretches [a, b) of [w0, w1) that no interval [start, end) covers (one sort)."""
    keep = end > start
    start, end = start[keep], end[keep]
    order = np.argsort(start, kind="stable")
    reach = np.maximum.accumulate(end[order]) if order.size else np.empty(0, np.int64)
    a = np.concatenate([[w0], reach]).astype(np.int64)
    b = np.concatenate([start[order], [w1]]).astype(np.int64)
    return a[b > a], b[b > a]


def _step_sum(bounds: np.ndarray, start: np.ndarray, end: np.ndarray,
              weight: np.ndarray | None) -> np.ndarray:
    """Return the sum of the weights (None: counts) of [start, end) over each [bounds[i], bounds[i+1])."""
    n = len(bounds)
    up = np.bincount(np.searchsorted(bounds, start), weights=weight, minlength=n)
    down = np.bincount(np.searchsorted(bounds, end), weights=weight, minlength=n)
    return np.cumsum(up - down)[: n - 1]


def collection_gaps(tables: Mapping[str, pd.DataFrame | None], window: Window, *,
                    min_gap_s: float = COLLECTION_GAP_S) -> pd.DataFrame:
    """Find the stretches of a window where no pool has any record of any job while capacity persists.

    A job record is an allocation from its submission to its release (an open one runs to the window's
    end), a queue row with pending jobs or devices, or an occupancy row with devices held, partially
    held or reserved, or with pending jobs (:data:`~fleetlib.scheduling.schema.SILENT_CHANNELS`); where
    a pool of the occupancy table has no row, it is not known to be silent, so there is no gap.
    Capacity is the in-service devices of the
    ``capacity`` table, or of the ``occupancy`` table when there is no capacity table.  A stretch with
    capacity above zero and no job record, at least ``min_gap_s`` long, is a gap: collectors that stop
    leave capacity without jobs, which a measurement would otherwise count as idle with an empty queue.
    Time the window already excludes is never part of a gap.

    Parameters
    ----------
    tables
        Canonical tables by name (``allocations``, ``capacity``, ``queue``, ``occupancy``; absent or None
        ones are skipped).
    window
        The measured window (with ``start`` and ``end``; its exclusions are left out).
    min_gap_s
        The shortest gap reported, in seconds (> 0).

    Returns
    -------
    pandas.DataFrame
        One row per gap, in time order: ``start``, ``end`` (UTC), ``seconds`` and ``device_s`` (the
        in-service capacity-time inside the gap).

    Raises
    ------
    DomainError
        ``min_gap_s`` not positive or a window without bounds.
    """
    if not (min_gap_s > 0):
        raise DomainError(f"the shortest collection gap must be > 0 s; got {min_gap_s!r}")
    if window.start is None or window.end is None:
        raise DomainError("collection gaps need a window with a start and an end")
    w0, w1 = int(window.start.value), int(window.end.value)
    act: list[tuple[np.ndarray, np.ndarray]] = []  # [start, end) of job records
    cap: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # [start, end) and in-service devices
    alloc = tables.get("allocations")
    if alloc is not None and len(alloc):
        end = _ns(alloc["release"])
        end = np.where(pd.isna(alloc["release"]).to_numpy(), w1, end)
        act.append((_ns(alloc["submit"]), end))
    queue = tables.get("queue")
    if queue is not None and len(queue):
        busy = ((queue["pending_jobs"] > 0) | (queue["pending_devices"] > 0)).to_numpy()
        act.append((_ns(queue["start"])[busy], _ns(queue["end"])[busy]))
    capacity = tables.get("capacity")
    if capacity is not None and len(capacity):
        cap.append((_ns(capacity["start"]), _ns(capacity["end"]),
                    capacity["devices_in_service"].to_numpy(float)))
    occ = tables.get("occupancy")
    known: list[tuple[np.ndarray, np.ndarray]] = []  # per occupancy pool: [start, end) of its rows
    if occ is not None and len(occ):
        s, e = _ns(occ["start"]), _ns(occ["end"])
        busy = (occ[list(SILENT_CHANNELS)].to_numpy(float) > 0).any(axis=1)
        act.append((s[busy], e[busy]))
        if capacity is None or not len(capacity):
            cap.append((s, e, occ["in_service"].to_numpy(float)))
        codes = pd.factorize(occ["pool"])[0]
        known = [(s[codes == p], e[codes == p]) for p in range(int(codes.max()) + 1)]  # a handful of pools
    for a, b in window.exclusions:  # excluded time is never a gap
        act.append((np.array([a.value], dtype=np.int64), np.array([b.value], dtype=np.int64)))
    empty = pd.DataFrame({"start": pd.Series([], dtype="datetime64[ns, UTC]"),
                          "end": pd.Series([], dtype="datetime64[ns, UTC]"),
                          "seconds": pd.Series([], dtype=float), "device_s": pd.Series([], dtype=float)})
    if not cap:
        return empty
    cs = np.concatenate([c[0] for c in cap]).clip(w0, w1)
    ce = np.concatenate([c[1] for c in cap]).clip(w0, w1)
    cd = np.concatenate([c[2] for c in cap])
    as_ = np.concatenate([a[0] for a in act]).clip(w0, w1) if act else np.empty(0, np.int64)
    ae = np.concatenate([a[1] for a in act]).clip(w0, w1) if act else np.empty(0, np.int64)
    hs, he = _holes(as_, ae, w0, w1)
    long = (he - hs) >= min_gap_s * 1e9  # a gap lies inside one hole of the job records
    hs, he = hs[long], he[long]
    if not hs.size:
        return empty
    bounds = np.unique(np.concatenate([[w0, w1], cs, ce, hs, he]))
    cap_n = _step_sum(bounds, cs, ce, cd)
    dur = np.diff(bounds).astype(float)
    gap = (_step_sum(bounds, hs, he, None) > 0.5) & (cap_n > 1e-9)
    for ks, ke in known:  # a pool of the occupancy table without a row is not known to be silent
        gap &= _step_sum(bounds, ks.clip(w0, w1), ke.clip(w0, w1), None) > 0.5
    if not gap.any():
        return empty
    edges = np.diff(np.concatenate([[0], gap.astype(np.int8), [0]]))
    first, last = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # runs [first, last)
    run_dur = np.concatenate([[0.0], np.cumsum(np.where(gap, dur, 0.0))])
    run_dev = np.concatenate([[0.0], np.cumsum(np.where(gap, dur * cap_n, 0.0))])
    sec = (run_dur[last] - run_dur[first]) / 1e9
    dev = (run_dev[last] - run_dev[first]) / 1e9
    keep = sec >= min_gap_s
    return pd.DataFrame({
        "start": pd.to_datetime(bounds[first[keep]], utc=True),
        "end": pd.to_datetime(bounds[last[keep]], utc=True),
        "seconds": sec[keep],
        "device_s": dev[keep],
    })


def collection_gap_note(gap: Any, window: Window) -> str:
    """Return the ledger message of one collection gap, with the ``--exclude`` that removes it.

    Parameters
    ----------
    gap
        One row of :func:`collection_gaps`' table (``start``, ``end``, ``seconds``, ``device_s``).
    window
        The measured window (its exclusions are repeated in the suggested command).

    Returns
    -------
    str
        One line: the gap's bounds, length and capacity-time, and the ``--window ... --exclude ...``
        arguments that leave it out.
    """
    excl = "".join(f" --exclude {a.isoformat()} {b.isoformat()}" for a, b in window.exclusions)
    return (f"no pool has any record of any job from {gap.start.isoformat()} to {gap.end.isoformat()} "
            f"({gap.seconds / 60.0:,.0f} min) while {gap.device_s / 3600.0:,.1f} device-h of capacity "
            "persist; counted as idle capacity (S keeps its all-records value); if the collector stopped, "
            "leave it out: "
            f"--window {window.start.isoformat()} {window.end.isoformat()}{excl} "
            f"--exclude {gap.start.isoformat()} {gap.end.isoformat()}")


def _tables_of(source: SchedulerRecords | Mapping[str, Any]) -> dict[str, pd.DataFrame | None]:
    if isinstance(source, SchedulerRecords):
        return source.tables()
    unknown = sorted(set(source) - set(_TABLES))
    tables = {name: source.get(name) for name in _TABLES}
    if unknown and all(v is None for v in tables.values()):
        raise DomainError(f"no scheduler tables among {unknown}; expected some of {list(_TABLES)}")
    return tables


Source = SchedulerRecords | Mapping[str, Any] | str | PathLike[str] | Iterable[str | PathLike[str]]


def measure(
    records_or_paths: Source,
    *,
    format: str | None = None,
    tz: str | None = None,
    window: Any = None,
    exclude: Any = None,
    denominator: Denominator = "in_service",
    ledger: Ledger | None = None,
    collection_gap_s: float | None = COLLECTION_GAP_S,
    **options: Any,
) -> SchedulingMeasurement:
    """Measure scheduling goodput from scheduler records or their files.

    Parameters
    ----------
    records_or_paths
        A :class:`~fleetlib.scheduling.records.SchedulerRecords`, a mapping of canonical tables
        (what a reader's ``read`` returns), or the input file(s) (then ``format`` is required).
    format
        A key of :data:`fleetlib.scheduling.readers.READERS` (files only); None: detected from the
        files' bytes (:func:`fleetlib.registry.detect`).
    tz
        Zone of naive times in the files (see :func:`fleetlib.scheduling.readers.read`).
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes: the record window (where open jobs
        are censored) and the window S is measured over.  None: the span of the capacity records.
    exclude
        Stretches of the window to leave out of S's numerator and denominator (see
        :meth:`fleetlib.accounting.Window.excluding`); they need a window.  The ledger gets an
        ``excluded_time`` flag saying what was left out.
    denominator
        ``"in_service"`` (default) or ``"installed"`` (adds an ``out_of_service`` loss).
    ledger
        The ledger of records handed in (files bring their own).
    collection_gap_s
        The shortest stretch without any job record, while capacity persists, flagged
        ``collection_gap`` in the ledger (:func:`collection_gaps`; default 3,600 s); None: not looked
        for.  A gap stays in S until it is excluded.
    **options
        The format's own options (``pool_by``, ``glitch``, ...), for files.

    Returns
    -------
    SchedulingMeasurement
        The partition, the ledger, the window and the denominator.

    Raises
    ------
    DomainError
        An unknown format or denominator, a format without time-based
        goodput (openb), or no capacity in the window.
    InputError
        A file that cannot be read (from the reader).

    """
    if denominator not in DENOMINATORS:
        raise DomainError(f"denominator must be one of {list(DENOMINATORS)}; got {denominator!r}")
    win = Window.parse(window, exclude=exclude)
    if isinstance(records_or_paths, Mapping):  # SchedulerRecords is a mapping of tables too
        if format is not None or options:
            raise DomainError("format and reader options apply to files; records were handed in")
        records = records_or_paths if isinstance(records_or_paths, SchedulerRecords) else None
        tables = _tables_of(records_or_paths)
        book = ledger if ledger is not None else Ledger()
    else:
        if format is None:
            format = detect(records_or_paths, "scheduling")
        if format == "openb":
            raise DomainError("the openb pod list never fills its cluster: it gives waits and size cohorts "
                              "(fleetlib.scheduling.views.openb_cohorts), not time-based scheduling goodput")
        records, book = read(records_or_paths, format, tz=tz, window=win, **options)
        if ledger is not None:
            book = Ledger.merged([ledger, book])
        tables = records.tables()
    partition = scheduling_partition(**tables, window=win)
    note = partition.window.exclusion_note()
    gaps = None
    if collection_gap_s is not None:
        gaps = collection_gaps(tables, partition.window, min_gap_s=collection_gap_s)
    if note is not None or (gaps is not None and len(gaps)):
        book = Ledger.merged([book])  # a ledger handed in is not written to
    if note is not None:
        book.flag("excluded_time", note)
    for gap in gaps.itertuples(index=False) if gaps is not None else ():
        book.flag("collection_gap", collection_gap_note(gap, partition.window), time=gap.start)
    return SchedulingMeasurement(partition=partition, ledger=book, denominator=denominator, records=records,
                                 format=format, gaps=gaps,
                                 unobserved=unobserved_losses(format or (records.format if records else None),
                                                              tables))
