"""Device memory of a step trace: Kineto ``[memory]`` events read, ledgered and summed per rank and step.

PyTorch's profiler with ``profile_memory=True`` writes one instant event named ``[memory]`` per
allocation or free (``args``: ``Bytes`` -- negative for a free --, ``Total Allocated``, ``Total
Reserved``, ``Addr``, ``Device Type``, ``Device Id``).  :func:`read_memory_events` reads them from
the trace files into one table (with its own ledger: every ``[memory]`` event is counted, an event
without a numeric ``Bytes`` or ``ts`` is rejected naming file, event and field);
:func:`memory_by_step` sums them per rank and step:

``peak_allocated_bytes``
    the most ``Total Allocated`` reached inside the step;
``spike_bytes``
    that peak above the allocated level at the step's start;
``churn_count`` / ``churn_bytes``
    allocations of at least ``large_bytes`` whose size is allocated more than once in the step
    (buffers recreated rather than reused): how many and how many bytes.

Only device memory (``Device Type`` other than 0, the CPU) is counted.

Nsight Systems SQLite exports among the paths (told by their bytes) are read through
:func:`fleetlib.program.readers.nsys.read_memory_usage` into the same table: their
``CUDA_GPU_MEMORY_USAGE_EVENTS`` rows, with ``total_allocated`` the running sum of the captured
allocations and frees (nsys records no allocator total).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import GZIP_MAGIC, as_paths, load_json, read_bytes
from fleetlib.program.breakdown import require_table_columns
from fleetlib.program.readers.nsys import SQLITE_MAGIC, read_memory_usage
from fleetlib.program.schema import MEMORY_COLUMNS
from fleetlib.quality import Ledger

__all__ = ["DEFAULT_LARGE_BYTES", "MEMORY_STEP_COLUMNS", "memory_by_rank", "memory_by_step",
           "read_memory_events"]


#: Columns of :func:`memory_by_step`.
MEMORY_STEP_COLUMNS: tuple[str, ...] = ("rank", "step", "events", "peak_allocated_bytes", "spike_bytes",
                                        "churn_count", "churn_bytes")

#: Allocations at least this large count towards churn (64 MiB).
DEFAULT_LARGE_BYTES: int = 64 * 2**20

_ARGS = {"Total Allocated": "total_allocated", "Total Reserved": "total_reserved", "Addr": "addr",
         "Device Type": "device_type", "Device Id": "device_id"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if np.isfinite(value) else None


def read_memory_events(paths: str | PathLike[str] | Iterable[str | PathLike[str]],
                       ) -> tuple[pd.DataFrame, Ledger]:
    """Read the ``[memory]`` events of Kineto trace files (one file per rank).

    Parameters
    ----------
    paths
        Trace files (``.json`` or ``.json.gz``).  The rank is the file's ``distributedInfo.rank``,
        else its position in ``paths``.  Nsight Systems SQLite exports (plain or gzipped) are read
        by :func:`fleetlib.program.readers.nsys.read_memory_usage` (ranks as ``read_nsys`` gives them).

    Returns
    -------
    tuple
        The table (:data:`MEMORY_COLUMNS`, rank-local microseconds as the kernel table's, sorted by
        rank and time) and the ledger of the ``[memory]`` events (read = kept + rejected).

    Raises
    ------
    InputError
        A file that cannot be read or is not JSON.
    """
    ledger = Ledger()
    rows: list[tuple[Any, ...]] = []
    files = as_paths(paths)
    exports = [p for p in files if _is_sqlite(p)]
    for i, path in enumerate(p for p in files if p not in exports):
        doc = load_json(read_bytes(path), file=str(path))
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        dist = doc.get("distributedInfo") if isinstance(doc, dict) else None
        rank = dist.get("rank") if isinstance(dist, dict) and isinstance(dist.get("rank"), int) else i
        for n, ev in enumerate(events if isinstance(events, list) else []):
            if not isinstance(ev, dict) or ev.get("name") != "[memory]":
                continue
            ledger.read += 1
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            ts, size = _number(ev.get("ts")), _number(args.get("Bytes"))
            if ts is None or size is None:
                ledger.reject(str(path), n, "ts" if ts is None else "args.Bytes",
                              "a [memory] event needs a numeric time and size")
                continue
            ledger.kept += 1
            extra = [_number(args.get(k)) for k in _ARGS]
            rows.append((rank, ts, size, *extra))
    table = pd.DataFrame(rows, columns=list(MEMORY_COLUMNS))
    table = table.astype({"rank": "int64", "ts_us": "float64", "bytes": "float64"})
    if exports:
        nsys_table, nsys_ledger = read_memory_usage(exports)
        ledger.extend(nsys_ledger)
        table = nsys_table if table.empty else pd.concat([table, nsys_table], ignore_index=True)
    return table.sort_values(["rank", "ts_us"], kind="stable").reset_index(drop=True), ledger


def _is_sqlite(path: Path) -> bool:
    """Whether the (possibly gzipped) bytes of ``path`` open an SQLite database."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
        if head.startswith(GZIP_MAGIC):
            with gzip.open(path, "rb") as fh:
                head = fh.read(16)
    except (OSError, EOFError):  # unreadable: the JSON path names the file
        return False
    return head.startswith(SQLITE_MAGIC)


def memory_by_step(memory: pd.DataFrame, steps: pd.DataFrame, *,
                   large_bytes: int = DEFAULT_LARGE_BYTES) -> pd.DataFrame:
    """Per rank and step: peak allocated, the spike above the step's start, and allocation churn.

    Parameters
    ----------
    memory
        Memory-event table (:data:`MEMORY_COLUMNS`; ``device_type`` 0 rows, the CPU, are left out).
    steps
        Step windows ``rank, step, start_us, end_us``.
    large_bytes
        Smallest allocation counted towards churn.

    Returns
    -------
    pandas.DataFrame
        One row per step window with at least one device memory event, columns
        :data:`MEMORY_STEP_COLUMNS`.
    """
    require_table_columns(memory, ("rank", "ts_us", "bytes", "total_allocated"), "memory")
    require_table_columns(steps, ("rank", "step", "start_us", "end_us"), "steps")
    dev = memory
    if "device_type" in memory.columns:
        dev = memory[memory["device_type"].fillna(1).to_numpy() != 0]
    dev = dev.sort_values(["rank", "ts_us"], kind="stable")
    out = []
    for w in steps.itertuples(index=False):
        mine = dev[(dev["rank"].to_numpy() == w.rank) & (dev["ts_us"].to_numpy() >= w.start_us)
                   & (dev["ts_us"].to_numpy() < w.end_us)]
        if mine.empty:
            continue
        total = mine["total_allocated"].to_numpy(dtype=float)
        size = mine["bytes"].to_numpy(dtype=float)
        start_level = total[0] - size[0]
        big = size[size >= large_bytes]
        sizes, counts = np.unique(big, return_counts=True)
        repeated = np.isin(big, sizes[counts > 1])
        out.append((int(w.rank), int(w.step), len(mine), float(np.nanmax(total)),
                    float(np.nanmax(total) - start_level), int(repeated.sum()), float(big[repeated].sum())))
    return pd.DataFrame(out, columns=list(MEMORY_STEP_COLUMNS))


def memory_by_rank(by_step: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per rank: peak allocated over its steps and churn summed over them (JSON-ready).

    Parameters
    ----------
    by_step
        Output of :func:`memory_by_step`.

    Returns
    -------
    dict
        ``{rank: {"peak_allocated_bytes", "churn_count", "churn_bytes", "steps"}}``.
    """
    g = by_step.groupby("rank")
    return {str(int(r)): {"peak_allocated_bytes": float(rows["peak_allocated_bytes"].max()),
                          "churn_count": int(rows["churn_count"].sum()),
                          "churn_bytes": float(rows["churn_bytes"].sum()), "steps": len(rows)}
            for r, rows in g}
