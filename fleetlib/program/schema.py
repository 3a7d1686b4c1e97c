"""The program rung's schema: table columns, dtypes, kinds, collective names and partition parts.

Constants and validators only.  The Kineto reader (:mod:`fleetlib.program.readers.kineto`) writes
tables with these columns and dtypes; the step partition (:mod:`fleetlib.program.breakdown`) writes
:data:`PARTITION_PARTS`; the rank-timer reader (:mod:`fleetlib.program.readers.rank_timers`) writes
:data:`RANK_TIMER_COLUMNS`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fleetlib.program.classify import (
    COLLECTIVES,
    KINDS,
)

#: The canonical kernel-table columns, in order.
KERNEL_COLUMNS: tuple[str, ...] = (
    "rank", "step", "stream", "start_us", "end_us", "dur_us", "name", "kind", "collective",
    "process_group", "seq", "bytes", "cuda_graph",
)
#: Columns the reader adds after the canonical ones.
KERNEL_EXTRA_COLUMNS: tuple[str, ...] = ("device", "correlation", "launch_us", "collective_source",
                                         "external_id")
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
_COLLECTIVE_SOURCES = ("args", "host_annotation", "name", "none")
_DTYPES: dict[str, dict[str, Any]] = {}


def _dtypes(table: str) -> dict[str, Any]:
    """Column dtypes of a table (built once: categorical dtypes are costly to construct)."""
    if not _DTYPES:
        _DTYPES["kernels"] = {
            "rank": "int64", "step": "Int64", "stream": "int64", "start_us": "float64",
            "end_us": "float64", "dur_us": "float64", "name": "category",
            "kind": pd.CategoricalDtype(KINDS), "collective": pd.CategoricalDtype(COLLECTIVES),
            "process_group": "category", "seq": "Int64", "bytes": "Int64", "cuda_graph": "bool",
            "device": "int64", "correlation": "Int64", "launch_us": "float64",
            "collective_source": pd.CategoricalDtype(_COLLECTIVE_SOURCES), "external_id": "Int64",
        }
        _DTYPES["steps"] = {"rank": "int64", "step": "Int64", "start_us": "float64", "end_us": "float64",
                            "source": pd.CategoricalDtype(STEP_SOURCES)}
        _DTYPES["host_syncs"] = {"rank": "int64", "step": "Int64", "tid": "Int64", "start_us": "float64",
                                 "end_us": "float64", "dur_us": "float64", "name": "category",
                                 "sync_kind": "category", "blocking": "bool"}
        _DTYPES["ops"] = {"rank": "int64", "external_id": "Int64", "name": "category", "start_us": "float64",
                          "dur_us": "float64", "input_dims": "object", "input_types": "object"}
    return _DTYPES[table]
