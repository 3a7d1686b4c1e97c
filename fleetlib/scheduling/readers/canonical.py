"""The canonical Parquet file (:func:`fleetlib.scheduling.synth.write_allocations`) as a reader.

:func:`read_canonical` moved here from :mod:`fleetlib.scheduling.synth` (which re-exports it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import Any

import pandas as pd

from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling.readers._common import _paths, _window, protocol_read
from fleetlib.scheduling.records import (
    SchedulerRecords,
    validate_allocations,
    validate_capacity,
    validate_queue,
    validate_reservations,
)
from fleetlib.scheduling.schema import CANONICAL_FORMAT, CANONICAL_TABLES, TABLE_COLUMNS

__all__ = ["read", "read_canonical", "records"]

_TABLE_COLUMNS = {name: TABLE_COLUMNS[name] for name in CANONICAL_TABLES}


def read_canonical(path: str | Path, *, validate: bool = True, open_end: Any = None
                   ) -> tuple[SchedulerRecords, Ledger]:
    """Read a canonical Parquet file written by :func:`write_allocations`.

    Parameters
    ----------
    path
        The Parquet file.
    validate
        Validate every table (default); the ledger then accounts for every row.  With False the
        tables are returned as stored and the ledger counts rows as kept.
    open_end
        Passed to :func:`~fleetlib.scheduling.records.validate_allocations`.

    Returns
    -------
    tuple of (SchedulerRecords, Ledger)
        The tables and one ledger over all of them.

    Raises
    ------
    InputError
        The file is not a canonical scheduler file (missing ``fleetlib`` metadata) or a table fails
        structurally.
    """
    import pyarrow.parquet as pq

    p = Path(path)
    try:
        pf = pq.ParquetFile(p)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot open as Parquet: {exc}", file=str(p)) from exc
    kv = pf.metadata.metadata or {}
    raw = kv.get(b"fleetlib")
    if raw is None:
        raise InputError("not a canonical scheduler file: the 'fleetlib' metadata (written by "
                         "fleetlib.scheduling.synth.write_allocations) is missing", file=str(p))
    meta = json.loads(raw)
    if meta.get("format") != CANONICAL_FORMAT:
        raise InputError(f"unknown canonical format {meta.get('format')!r}", file=str(p))
    ledger = Ledger()
    out: dict[str, pd.DataFrame | None] = dict.fromkeys(CANONICAL_TABLES)
    for name, (g0, g1, rows) in meta["tables"].items():
        if name not in _TABLE_COLUMNS:
            raise InputError(f"unknown table {name!r} in the metadata", file=str(p))
        cols = list(_TABLE_COLUMNS[name])
        tab = pf.read_row_groups(list(range(g0, g1)), columns=cols) if g1 > g0 else None
        df = (tab.to_pandas(categories=["pool", "end_state"] if name == "allocations" else ["pool"])
              if tab is not None else pd.DataFrame(columns=cols))
        df = df.iloc[:rows] if len(df) > rows else df
        where = f"{p}#{name}"
        if validate:
            if name == "allocations":
                df, _ = validate_allocations(df, file=where, open_end=open_end, ledger=ledger)
            elif name == "capacity":
                df, _ = validate_capacity(df, file=where, ledger=ledger)
            elif name == "reservations":
                df, _ = validate_reservations(df, file=where, ledger=ledger)
            else:
                df, _ = validate_queue(df, file=where, ledger=ledger)
        else:
            ledger.read += len(df)
            ledger.kept += len(df)
        out[name] = df
    if out["capacity"] is None:
        raise InputError("the canonical file has no capacity table", file=str(p))
    recs = SchedulerRecords(allocations=out["allocations"], capacity=out["capacity"],
                            reservations=out["reservations"], queue=out["queue"], source=str(p))
    return recs, ledger


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
        ``validate``, as :func:`read_canonical` takes it.

    Returns
    -------
    tuple of (SchedulerRecords, Ledger)
        As :func:`read_canonical` returns them.
    """
    del tz  # UTC on disk
    files = _paths(paths)
    if len(files) != 1:
        raise DomainError(f"the canonical format is one Parquet file; got {len(files)} files")
    win = _window(window)
    return read_canonical(files[0], open_end=None if win is None else win[1], **options)


read = protocol_read(
    records, "a canonical Parquet file (allocations, capacity and, where stored, reservations and queue)")
