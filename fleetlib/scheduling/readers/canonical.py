"""The canonical Parquet file (:func:`fleetlib.scheduling.synth.write_allocations`) as a reader."""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import Any

import pandas as pd

from fleetlib._io import PathArg, excerpt, input_files, load_json, parquet_file
from fleetlib._sniff import first_line, is_parquet
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.registry import head_bytes
from fleetlib.scheduling.readers._common import record_window
from fleetlib.scheduling.records import (
    SchedulerRecords,
    validate_allocations,
    validate_capacity,
    validate_queue,
    validate_reservations,
)
from fleetlib.scheduling.schema import CANONICAL_FORMAT, CANONICAL_TABLES, TABLE_COLUMNS

__all__ = ["read"]

_TABLE_COLUMNS = {name: TABLE_COLUMNS[name] for name in CANONICAL_TABLES}


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    validate: bool = True,
) -> tuple[SchedulerRecords, Ledger]:
    """Read a canonical Parquet file written by :func:`~fleetlib.scheduling.synth.write_allocations`.

    Parameters
    ----------
    paths
        Exactly one Parquet file.
    tz
        Not used: the file stores UTC times.
    window
        The record window (anything :meth:`fleetlib.accounting.Window.parse` takes): its end is the
        ``open_end`` of allocations still open (see
        :func:`~fleetlib.scheduling.records.validate_allocations`).
    validate
        Validate every table (default); the ledger then accounts for every row.  With False the
        tables are returned as stored and the ledger counts rows as kept.

    Returns
    -------
    tuple of (SchedulerRecords, Ledger)
        The tables (allocations, capacity and, where stored, reservations and queue) and one ledger
        over all of them.

    Raises
    ------
    InputError
        A file that is not Parquet (named as such, with its first line), not a canonical scheduler
        file (missing ``fleetlib`` metadata), or a table that fails structurally.
    DomainError
        More than one file.
    """
    import pyarrow as pa

    del tz  # UTC on disk
    files = input_files(paths)  # a URL is read through pyarrow's filesystem, never copied
    for f in files:  # a folder, a device or a pipe is refused here, before Arrow opens it
        head = head_bytes(f, 256)
        if not is_parquet(head):
            raise InputError(
                "not a Parquet file (it starts with " + repr(first_line(head)[:60]) + "): --format canonical "
                "reads the Parquet file 'fleetlib synth allocations' writes; for scheduler text records give "
                "their format (--format slurm, kueue, ...) or omit --format to detect it",
                file=str(f),
            )
    if len(files) != 1:
        raise DomainError(f"the canonical format is one Parquet file; got {len(files)} files")
    win = record_window(window)
    open_end = None if win is None else win[1]
    p = files[0]
    pf = parquet_file(p)
    kv = pf.metadata.metadata or {}
    raw = kv.get(b"fleetlib")
    if raw is None:
        raise InputError("not a canonical scheduler file: the 'fleetlib' metadata (written by "
                         "fleetlib.scheduling.synth.write_allocations) is missing", file=str(p))
    meta = load_json(raw, file=str(p))
    if not isinstance(meta, dict) or meta.get("format") != CANONICAL_FORMAT:
        shown = meta.get("format") if isinstance(meta, dict) else meta
        raise InputError(f"unknown canonical format {excerpt(shown)}", file=str(p), field="fleetlib")
    tables = meta.get("tables")
    if not isinstance(tables, dict) or not all(
            isinstance(v, list) and len(v) == 3 and all(type(x) is int and 0 <= x < 2**62 for x in v)
            for v in tables.values()):
        raise InputError("the 'fleetlib' metadata's tables are not name -> [first row group, end row "
                         "group, rows]", file=str(p), field="fleetlib")
    try:
        return _read_tables(pf, p, tables, validate=validate, open_end=open_end)
    except (pa.ArrowException, OSError) as exc:  # a corrupt page, a column of another type
        raise InputError(f"cannot read the Parquet data ({excerpt(exc, 120)}); expected a file written by "
                         "fleetlib.scheduling.synth.write_allocations", file=str(p)) from None


def _read_tables(pf: Any, p: PathArg, tables: dict[str, list[int]], *, validate: bool,
                 open_end: Any) -> tuple[SchedulerRecords, Ledger]:
    """Read and validate each canonical table named in the metadata."""
    ledger = Ledger()
    out: dict[str, pd.DataFrame | None] = dict.fromkeys(CANONICAL_TABLES)
    for name, (g0, g1, rows) in tables.items():
        if g1 > pf.num_row_groups:
            raise InputError(f"table {name!r} names row group {g1 - 1}, but the file has "
                             f"{pf.num_row_groups}", file=str(p), field="fleetlib")
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
