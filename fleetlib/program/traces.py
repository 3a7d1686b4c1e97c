"""Old home of the Kineto trace reader, kept so that existing imports keep working.

The reader now lives in :mod:`fleetlib.program.readers.kineto` (with its decoding, table-building
and cache modules beside it); the table columns in :mod:`fleetlib.program.schema`.  Every name this
module used to define is re-exported from there.
"""

from __future__ import annotations

from fleetlib.program.readers._cache import _cache_path, _read_cache, _write_cache  # noqa: F401
from fleetlib.program.readers._columns import _Book, _Collector, _numbers  # noqa: F401
from fleetlib.program.readers._decode import _DECODER, _gunzip, _Source, _text  # noqa: F401
from fleetlib.program.readers._tables import _Options, _parse  # noqa: F401
from fleetlib.program.readers.kineto import (
    CACHE_ENV,
    DEFAULT_MAX_EVENT_US,
    DEFAULT_OVERLAP_TOLERANCE_US,
    HOST_SYNC_COLUMNS,
    KERNEL_COLUMNS,
    KERNEL_EXTRA_COLUMNS,
    OPS_COLUMNS,
    READER_VERSION,
    STEP_COLUMNS,
    STEP_SOURCES,
    TraceFlag,
    TraceLedger,
    TraceRead,
    TraceSet,
    default_cache_dir,
    empty_host_syncs,
    empty_kernels,
    empty_ops,
    empty_steps,
    rank_from_file_name,
    read_trace,
    read_traces,
    trace_files,
)

__all__ = [
    "CACHE_ENV",
    "DEFAULT_MAX_EVENT_US",
    "DEFAULT_OVERLAP_TOLERANCE_US",
    "HOST_SYNC_COLUMNS",
    "KERNEL_COLUMNS",
    "KERNEL_EXTRA_COLUMNS",
    "OPS_COLUMNS",
    "READER_VERSION",
    "STEP_COLUMNS",
    "STEP_SOURCES",
    "TraceFlag",
    "TraceLedger",
    "TraceRead",
    "TraceSet",
    "default_cache_dir",
    "empty_host_syncs",
    "empty_kernels",
    "empty_ops",
    "empty_steps",
    "rank_from_file_name",
    "read_trace",
    "read_traces",
    "trace_files",
]
