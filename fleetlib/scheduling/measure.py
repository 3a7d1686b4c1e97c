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
from dataclasses import dataclass
from os import PathLike
from typing import Any

import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, Ledger
from fleetlib.registry import detect
from fleetlib.scheduling.goodput import SchedulingPartition, scheduling_partition
from fleetlib.scheduling.readers import read
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import DENOMINATORS, TABLE_COLUMNS, Denominator, IdleView

__all__ = ["SchedulingMeasurement", "measure"]

_TABLES = tuple(TABLE_COLUMNS)


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
    """

    partition: SchedulingPartition
    ledger: Ledger
    denominator: Denominator = "in_service"
    records: SchedulerRecords | None = None
    format: str | None = None

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
            cross_pool_losses, pools, ledger`` (:meth:`SchedulingPartition.summary`).
        """
        out = self.partition.summary(denominator=self.denominator, ledger=self.ledger)
        out["window"] = self.window.to_dict()
        return out


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
    if note is not None:
        book = Ledger.merged([book])  # a ledger handed in is not written to
        book.flag("excluded_time", note)
    return SchedulingMeasurement(partition=partition, ledger=book, denominator=denominator, records=records,
                                 format=format)
