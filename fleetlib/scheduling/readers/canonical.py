"""The canonical Parquet file (:func:`fleetlib.scheduling.synth.write_allocations`) as a reader."""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import Any

import pandas as pd

from fleetlib.quality import DomainError, Ledger
from fleetlib.scheduling.readers._common import _paths, _window, tables_of
from fleetlib.scheduling.records import SchedulerRecords

__all__ = ["read", "records"]


def records(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[SchedulerRecords, Ledger]:
    """Read one canonical Parquet file with the protocol's arguments.

    Parameters
    ----------
    paths
        Exactly one Parquet file written by :func:`~fleetlib.scheduling.synth.write_allocations`.
    tz
        Not used: the file stores UTC times.
    window
        The record window (anything :meth:`fleetlib.accounting.Window.parse` takes): its end is the
        ``open_end`` of allocations still open.
    **options
        ``validate``, as :func:`~fleetlib.scheduling.synth.read_canonical` takes it.

    Returns
    -------
    tuple of (SchedulerRecords, Ledger)
        As :func:`~fleetlib.scheduling.synth.read_canonical` returns them.
    """
    from fleetlib.scheduling.synth import read_canonical  # synth imports the schema, not the readers

    del tz  # UTC on disk
    files = _paths(paths)
    if len(files) != 1:
        raise DomainError(f"the canonical format is one Parquet file; got {len(files)} files")
    win = _window(window)
    return read_canonical(files[0], open_end=None if win is None else win[1], **options)


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[dict[str, pd.DataFrame], Ledger]:
    """Read a canonical Parquet file into tables and a ledger (the protocol of :mod:`fleetlib.registry`).

    Takes the arguments of :func:`records`; returns ``(tables, ledger)`` with ``allocations``,
    ``capacity`` and, where stored, ``reservations`` and ``queue``.
    """
    recs, ledger = records(paths, tz=tz, window=window, **options)
    return tables_of(recs), ledger
