"""The program rung's schema: table columns, dtypes, kinds, collective names and partition parts.

Constants and validators only (no reading, no measuring):

* the Kineto reader's tables (:mod:`fleetlib.program.readers.kineto`) -- :data:`KERNEL_COLUMNS`
  (+ :data:`KERNEL_EXTRA_COLUMNS`), :data:`STEP_COLUMNS`, :data:`HOST_SYNC_COLUMNS`,
  :data:`OPS_COLUMNS`, and their dtypes (:func:`table_dtypes`);
* the kernel table's category values -- :data:`KINDS`, :data:`COLLECTIVES`, :data:`SYNC_KINDS`,
  :data:`STEP_SOURCES`, :data:`COLLECTIVE_SOURCES`;
* the per-step partition of :func:`fleetlib.program.breakdown.step_partition` --
  :data:`PARTITION_PARTS` and their labels (:data:`PARTITION_LABELS`, :data:`PARTITION_SHORT_LABELS`);
* the rank-timer table (:mod:`fleetlib.program.readers.rank_timers`) -- :data:`RANK_TIMER_COLUMNS`,
  and the straggler result columns :data:`PER_RANK_COLUMNS`, :data:`PER_STEP_COLUMNS`.

:func:`missing_columns` and :func:`require_columns` check a frame against one of these tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from fleetlib.quality import DomainError

__all__ = [
    "CLASSIFIED_BY",
    "COLLECTIVES",
    "COLLECTIVE_SOURCES",
    "HOST_SYNC_COLUMNS",
    "KERNEL_COLUMNS",
    "KERNEL_EXTRA_COLUMNS",
    "KINDS",
    "MEMORY_COLUMNS",
    "OPS_COLUMNS",
    "PARTITION_LABELS",
    "PARTITION_PARTS",
    "PARTITION_SHORT_LABELS",
    "PER_RANK_COLUMNS",
    "PER_STEP_COLUMNS",
    "RANK_TIMER_COLUMNS",
    "STEP_COLUMNS",
    "STEP_SOURCES",
    "SYNC_KINDS",
    "TABLE_COLUMNS",
    "missing_columns",
    "require_columns",
    "table_dtypes",
]

# ---------------------------------------------------------------------------------------------------
# Category values
# ---------------------------------------------------------------------------------------------------

#: Values of the kernel table's ``kind`` column.
KINDS: tuple[str, ...] = ("compute", "comm", "memcpy", "memset", "sync", "other")

#: Values of the kernel table's ``collective`` column (``none``: not communication, or unknown).
COLLECTIVES: tuple[str, ...] = (
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "sendrecv", "reduce", "none",
)

#: Values of the host-sync table's ``sync_kind`` column.
SYNC_KINDS: tuple[str, ...] = ("device", "stream", "event", "stream_wait_event", "sync_memcpy")

#: Where a kernel's collective type came from (the kernel table's ``collective_source``).
COLLECTIVE_SOURCES: tuple[str, ...] = ("args", "host_annotation", "name", "none")

#: What made a kernel communication (the kernel table's ``classified_by``), in the order the rules
#: are tried: its own collective metadata, the op or annotation that launched it, its name; ``none``
#: for a kernel that is not communication.
CLASSIFIED_BY: tuple[str, ...] = ("metadata", "launcher", "name", "none")

# ---------------------------------------------------------------------------------------------------
# Trace tables
# ---------------------------------------------------------------------------------------------------

#: The canonical kernel-table columns, in order.
KERNEL_COLUMNS: tuple[str, ...] = (
    "rank", "step", "stream", "start_us", "end_us", "dur_us", "name", "kind", "collective",
    "process_group", "seq", "bytes", "cuda_graph",
)
#: Columns the reader adds after the canonical ones.
KERNEL_EXTRA_COLUMNS: tuple[str, ...] = ("device", "correlation", "launch_us", "collective_source",
                                         "external_id", "comm_rule", "classified_by")
#: CPU-operator table columns (ops with recorded input shapes).
OPS_COLUMNS: tuple[str, ...] = ("rank", "external_id", "name", "start_us", "dur_us", "input_dims",
                                "input_types")
#: Step-window table columns.
STEP_COLUMNS: tuple[str, ...] = ("rank", "step", "start_us", "end_us", "source")
#: Where a step window came from.
STEP_SOURCES: tuple[str, ...] = ("profiler_step", "marker", "gpu_span", "trace_span")
#: Host synchronisation table columns.
HOST_SYNC_COLUMNS: tuple[str, ...] = (
    "rank", "step", "tid", "start_us", "end_us", "dur_us", "name", "sync_kind", "blocking",
)
# ---------------------------------------------------------------------------------------------------
# The step partition
# ---------------------------------------------------------------------------------------------------

#: The six parts of a step, in the order they are charged (they add up to the step wall time).
PARTITION_PARTS: tuple[str, ...] = ("compute", "exposed_comm", "peer_wait", "exposed_memcpy",
                                    "host_dispatch", "idle")

#: A label per part, for legends and tables.
PARTITION_LABELS: Mapping[str, str] = {
    "compute": "compute",
    "exposed_comm": "exposed comm (transfer)",
    "peer_wait": "peer wait",
    "exposed_memcpy": "exposed copy",
    "host_dispatch": "host dispatch",
    "idle": "idle",
}

#: A label of at most ten characters per part, for fixed-width text columns.
PARTITION_SHORT_LABELS: Mapping[str, str] = {
    "compute": "compute",
    "exposed_comm": "exp. comm",
    "peer_wait": "peer wait",
    "exposed_memcpy": "exp. copy",
    "host_dispatch": "dispatch",
    "idle": "idle",
}

# ---------------------------------------------------------------------------------------------------
# Rank timers and stragglers
# ---------------------------------------------------------------------------------------------------

#: Columns of the canonical rank-timer table, in order.
RANK_TIMER_COLUMNS: tuple[str, ...] = ("rank", "step", "duration_s")

#: Columns of :attr:`fleetlib.program.stragglers.FleetStragglers.per_rank`.
PER_RANK_COLUMNS: tuple[str, ...] = ("rank", "steps", "arrived_last", "arrived_last_share", "wait_caused_s",
                                     "wait_s", "mean_wait_s", "mean_duration_s", "relative_score",
                                     "straggler", "individual_score", "slowed_down")

#: Columns of :attr:`fleetlib.program.stragglers.FleetStragglers.per_step`.
PER_STEP_COLUMNS: tuple[str, ...] = ("step", "ranks", "max_s", "min_s", "mean_s", "last_arriver", "wait_s")

#: Each table's canonical columns, by table name (the names the readers return them under).
TABLE_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "kernels": KERNEL_COLUMNS,
    "steps": STEP_COLUMNS,
    "host_syncs": HOST_SYNC_COLUMNS,
    "ops": OPS_COLUMNS,
    "rank_timers": RANK_TIMER_COLUMNS,
    "partition": ("rank", "step", *PARTITION_PARTS, "step_wall_us"),
}

# ---------------------------------------------------------------------------------------------------
# Dtypes and validators
# ---------------------------------------------------------------------------------------------------

_DTYPES: dict[str, dict[str, Any]] = {}


def table_dtypes(table: str) -> dict[str, Any]:
    """Column dtypes of a table (built once: categorical dtypes are costly to construct)."""
    if not _DTYPES:
        _DTYPES["kernels"] = {
            "rank": "int64", "step": "Int64", "stream": "int64", "start_us": "float64",
            "end_us": "float64", "dur_us": "float64", "name": "category",
            "kind": pd.CategoricalDtype(KINDS), "collective": pd.CategoricalDtype(COLLECTIVES),
            "process_group": "category", "seq": "Int64", "bytes": "Int64", "cuda_graph": "bool",
            "device": "int64", "correlation": "Int64", "launch_us": "float64",
            "collective_source": pd.CategoricalDtype(COLLECTIVE_SOURCES), "external_id": "Int64",
            "comm_rule": "category", "classified_by": pd.CategoricalDtype(CLASSIFIED_BY),
        }
        _DTYPES["steps"] = {"rank": "int64", "step": "Int64", "start_us": "float64", "end_us": "float64",
                            "source": pd.CategoricalDtype(STEP_SOURCES)}
        _DTYPES["host_syncs"] = {"rank": "int64", "step": "Int64", "tid": "Int64", "start_us": "float64",
                                 "end_us": "float64", "dur_us": "float64", "name": "category",
                                 "sync_kind": "category", "blocking": "bool"}
        _DTYPES["ops"] = {"rank": "int64", "external_id": "Int64", "name": "category", "start_us": "float64",
                          "dur_us": "float64", "input_dims": "object", "input_types": "object"}
    return _DTYPES[table]



def missing_columns(frame: pd.DataFrame, table: str | Iterable[str]) -> list[str]:
    """Return the columns of ``table`` that ``frame`` lacks, in canonical order.

    ``table`` is a name of :data:`TABLE_COLUMNS` or the columns themselves.
    """
    columns = TABLE_COLUMNS[table] if isinstance(table, str) else tuple(table)
    return [c for c in columns if c not in frame.columns]


def require_columns(frame: pd.DataFrame, table: str | Iterable[str], what: str | None = None) -> None:
    """Raise :class:`~fleetlib.quality.DomainError` naming the columns ``frame`` lacks.

    Parameters
    ----------
    frame
        The table to check.
    table
        A name of :data:`TABLE_COLUMNS`, or the columns themselves.
    what
        The name of the argument, for the message (default: the table's name).
    """
    if not isinstance(frame, pd.DataFrame):
        raise DomainError(f"{what or table} must be a pandas DataFrame; got {type(frame).__name__}")
    missing = missing_columns(frame, table)
    if missing:
        raise DomainError(f"{what or table} lacks the columns {missing}")


#: Columns of the memory-event table (Kineto ``[memory]`` events and the nsys
#: ``CUDA_GPU_MEMORY_USAGE_EVENTS`` table alike; :mod:`fleetlib.program.memory`).
MEMORY_COLUMNS: tuple[str, ...] = ("rank", "ts_us", "bytes", "total_allocated", "total_reserved", "addr",
                                   "device_type", "device_id")
