"""Read PyTorch profiler (Kineto) Chrome-trace JSON into the canonical kernel and step tables.

One file is one rank.  :func:`read_trace` reads a file, :func:`read_traces` a directory or list of
files (one rank at a time with a progress bar, or one Dask task per file given a
``distributed.Client``), both with a Parquet cache keyed by the file's content.  What comes back:

``kernels`` -- one row per GPU activity (:data:`KERNEL_COLUMNS`, then :data:`KERNEL_EXTRA_COLUMNS`)
    ``rank`` (int64), ``step`` (Int64: the ``ProfilerStep`` window the activity *starts* in;
    ``<NA>`` outside every window), ``stream`` (int64; -1 for device-wide records), ``start_us``,
    ``end_us``, ``dur_us`` (float64 microseconds, see *Time base*), ``name`` (category), ``kind``
    (category, :data:`fleetlib.program.classify.KINDS`), ``collective`` (category,
    :data:`fleetlib.program.classify.COLLECTIVES`), ``process_group`` (category; ``""`` when the
    trace carries no process-group information), ``seq`` (Int64 collective sequence number, from
    the args when present), ``bytes`` (Int64: a collective's input message size -- ``In msg
    nelems`` x dtype size, or the first input shape of its host annotation; a copy's or fill's
    ``bytes`` arg; ``<NA>`` otherwise), ``cuda_graph`` (bool: launched by a graph replay).
    Extra columns: ``device`` (int64 GPU index), ``correlation`` (Int64 launch correlation id),
    ``launch_us`` (float64 start of the runtime call that launched it; NaN when the trace has no
    such call -- needed to tell a host-dispatch gap from a dependency wait),
    ``collective_source`` (category: ``args``, ``host_annotation``, ``name`` or ``none``) and
    ``external_id`` (Int64: the ``External id`` of the innermost CPU op that launched it, the key
    into ``ops``; see *Operators*).  Sorted by rank, start, end, stream.

``steps`` -- step windows (:data:`STEP_COLUMNS`): ``rank, step, start_us, end_us, source``.
    ``source`` is ``profiler_step`` (CPU ``ProfilerStep#N`` annotations), ``marker`` (user
    annotations matching ``step_marker``), ``gpu_span`` (no step annotation: first GPU activity
    start to last GPU activity end, as step 0) or ``trace_span`` (no GPU activity either: the
    span of all timed events).  The last three are flagged; the table is never empty.

``host_syncs`` -- host runtime calls that synchronise with the device (:data:`HOST_SYNC_COLUMNS`):
    ``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, ``cudaEventSynchronize``,
    ``cudaStreamWaitEvent`` (not blocking), synchronous ``cudaMemcpy``, HIP and driver equivalents.

``ops`` -- CPU operators with recorded input shapes (:data:`OPS_COLUMNS`): one row per CPU op
    (category ``cpu_op``, legacy ``Operator``) whose args carry ``Input Dims`` (the profiler ran
    with ``record_shapes=True``): ``rank`` (int64), ``external_id`` (Int64, the op's
    ``External id``), ``name`` (category), ``start_us``, ``dur_us`` (float64, the kernels' time
    base), ``input_dims`` and ``input_types`` (object: the JSON text of the ``Input Dims`` and
    ``Input type`` lists as ``json.dumps`` writes them, e.g. ``"[[64, 128], [128, 256]]"``;
    ``input_types`` is None when the op has no ``Input type``).  Sorted by rank and start.  Empty
    (with these dtypes) when the trace recorded no shapes.

Operators
---------
A kernel's ``external_id`` joins it to the ``ops`` row of the operator that launched it.  Kineto
writes that id into the kernel's args (``External id``), and that value is used -- except in
traces where every kernel's ``External id`` equals its ``correlation`` (PyTorch 2.0-2.1 era
Kineto, e.g. the bundled DLRM traces): there the id names the launch call, not the operator, so
``external_id`` is taken from the innermost CPU op whose span encloses the launching runtime call
on the launching thread (flag ``external_id_from_launch``).  A kernel with no ``External id`` arg
takes the enclosing op's id the same way; with neither it is ``<NA>``.  The enclosing op may
have no recorded shapes (then the id matches no ``ops`` row).

Time base
---------
``start_us`` counts microseconds on the rank's own clock from ``metadata["base_time_ns"]``: the
trace's ``baseTimeNanoseconds`` when it has one (Kineto writes ``ts`` relative to it), otherwise
the earliest timestamp floored to a whole second (older traces write absolute unix
microseconds, which a float cannot hold to the nanosecond).  Timestamps in nanoseconds are
recognised by magnitude (relative values above 1e13 -- more than the three months a Kineto base
spans -- or absolute values above 1e17, i.e. unix nanoseconds) or forced with
``time_unit="ns"``, and converted.  :func:`read_traces` moves every rank onto the earliest base of
the set; no clock-skew correction is made (cross-rank measures should rely on collective
durations, which need none).

Classification
--------------
``kind`` and ``collective`` come from :mod:`fleetlib.program.classify` (configurable name patterns).
A communication kernel's collective type, bytes, process group and sequence number are taken from
its own args (``Collective name``, ``In msg nelems`` x ``dtype``, ``Process Group Name``, ``Seq``);
when it has none (older PyTorch), from the host annotation that encloses its launch on the
launching thread (``record_param_comms`` with a ``Collective name``, else ``nccl:<collective>``
with its ``Input Dims`` / ``Input type``); only then from the kernel name.  So an NCCL
``SendRecv`` kernel launched inside ``nccl:all_to_all`` is an ``alltoall`` (NCCL runs all-to-all
as grouped send/receive), and ``collective_source`` says which source decided.  Kernels launched
by a ``cudaGraphLaunch`` / ``hipGraphLaunch`` call (or carrying a graph id) have ``cuda_graph``
True and the trace is flagged: profilers under-record graph kernels, so a kernel-based breakdown
of such a trace is less reliable.

Ledger and flags
----------------
The rows a reader accounts for are the entries that become table rows -- GPU activities, step
annotations, host sync calls, CPU ops with ``Input Dims`` (the ``ops`` rows; CPU ops without
shapes, used only to find a kernel's launching op, are not counted) -- plus entries of
``traceEvents`` that are not JSON objects (always rejected).  ``ledger.read == kept + repaired +
rejected``; a row is the entry's position in ``traceEvents`` counting from 1 (for a JSON syntax
error, the :class:`InputError` row is the line).  Rejected: a missing or non-numeric ``ts`` /
``dur``, a negative duration, or a duration above ``max_event_us`` (default one hour: no profiler
window records one GPU activity that long; corrupt CUPTI records show durations of days or more).
Repaired (one entry per row, naming the repair): overlaps of at most ``overlap_tolerance_us``
(default 1 µs) between consecutive activities on one stream -- a stream runs one activity at a
time, so this is timestamp rounding (pytorch#122425) -- by ending the earlier activity where the
next begins (``ns_rounding_overlap``); numeric text converted to numbers; invalid UTF-8 bytes
replaced by U+FFFD; an integer beyond int64 in an id column (``correlation``, ``Seq``,
``External id``) set to missing with its exact digits kept in the ledger (never wrapped); a
missing name replaced by ``<unnamed>`` (GPU and ``ops`` rows alike).  Flags (``ledger.flags``)
note interpretations that change no row: ``legacy_format``, ``timestamps_in_ns``,
``rank_from_file_name`` / ``rank_from_mapping`` / ``rank_override`` / ``rank_assumed_zero``,
``no_profiler_step`` / ``steps_from_markers``, ``cuda_graph``, ``unknown_category`` (once per
category), ``stream_overlap`` (overlaps above the tolerance, kept as recorded), ``invalid_utf8``,
``integer_beyond_int64``, ``external_id_from_launch``, ``unknown_collective_name``,
``unknown_dtype``, ``no_gpu_activity``, and from :func:`read_traces` ``missing_ranks``,
``world_size_mismatch``, ``time_base_shifted``.
Input nothing can make sense of (a truncated gzip stream, invalid JSON, no events at all)
raises :class:`fleetlib.quality.InputError` naming the file, line and field.

Decoding and cache
------------------
gzip is recognised by its magic bytes and decompressed slice by slice into one buffer.  The event
array is then decoded in pieces of a sixteenth of the file (256 KiB to 1 MiB), cut between
top-level events (a cut anywhere else fails to decode and is moved on, so only valid cuts are
used), and each piece is reduced to numpy columns of the few fields the tables need before the
next is decoded; equal names share one string.  A piece is decoded by ``msgspec`` into typed
records that declare only the fields the tables use (``ph``, ``cat``, ``name``, ``pid``, ``tid``,
``ts``, ``dur`` and a few ``args`` keys): every other field is skipped without building Python
objects.  Wherever the typed decoder could differ from the standard library -- invalid UTF-8
anywhere in the piece, malformed JSON, ``NaN`` or lone-surrogate escapes, a non-object entry or
``args`` -- that piece is decoded by :mod:`json` instead, so rows, ledger entries and errors are
the same either way (without ``msgspec`` installed every piece takes the :mod:`json` path).  Peak
memory stays near the size of the JSON text plus one piece's objects (about 1.5-1.9x the text on
the 9.8 MB bundled trace; the first read in a process adds some one-time initialisation).  The
Parquet cache (one file per trace under :func:`default_cache_dir`, holding all four tables as
plain uncompressed columns, the metadata and the ledger) is keyed by the SHA-256 of the file's
bytes, :data:`READER_VERSION` and the options that change the tables; the rank is resolved after
loading, so a renamed copy of a file is a cache hit that still takes its rank from its own name.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

try:  # typed, column-projected decoding; the stdlib path below is complete without it
    import msgspec
except ImportError:  # pragma: no cover - msgspec is a declared dependency
    msgspec = None

from fleetlib.program.classify import (
    COLLECTIVES,
    KINDS,
    Classifier,
    collective_from_annotation,
    collective_from_arg,
    collective_from_kernel_name,
    host_sync_kinds,
    is_graph_launch,
    message_bytes,
    shape_bytes,
)
from fleetlib.quality import DomainError, InputError, Ledger, check_nonnegative, check_positive

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

#: Version of the reader's output; part of every cache key (bump when the tables change).
READER_VERSION = "2"
#: Environment variable naming the cache directory (default ``~/.cache/fleetlib/traces``).
CACHE_ENV = "FLEETLIB_TRACE_CACHE"
#: Events longer than this (µs) are rejected as corrupt: one hour.
DEFAULT_MAX_EVENT_US = 3.6e9
#: Same-stream overlaps up to this (µs) are timestamp rounding and are trimmed.
DEFAULT_OVERLAP_TOLERANCE_US = 1.0

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

PathLike = str | os.PathLike[str]

_CHUNK_BYTES = 1 << 20        # largest piece of the event array decoded at once
_MIN_CHUNK_BYTES = 256 << 10  # smallest (a file is cut into about 16 pieces between the two)
_KEY_RE = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT_RE = re.compile(rb"\}\s*,\s*\{")
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_STREAM_RE = re.compile(r"(?:stream|queue)\s*(-?\d+)", re.IGNORECASE)
_GPU_LABEL_RE = re.compile(r"^\s*(?:GPU|HIP|XPU|MTIA|Device)\s*(\d+)", re.IGNORECASE)
_RANK_NAME_RE = re.compile(r"(?:^|[^a-z0-9])(?:rank|worker)[-_ ]?(\d+)(?!\d)", re.IGNORECASE)
_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")

# Kineto activity categories (libkineto ActivityType.h) by role in the tables
_GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"})
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "xpu_runtime", "xpu_driver",
                           "privateuse1_runtime", "privateuse1_driver", "mtia_runtime"})
_SPAN_CATS = frozenset({"user_annotation", "cpu_op"})
_IGNORED_CATS = frozenset({
    "gpu_user_annotation", "external_correlation", "cpu_instant_event", "python_function",
    "overhead", "mtia_ccp_events", "mtia_insight", "cuda_event", "mtia_counters", "glow_runtime",
    "cuda_profiler_range", "hpu_op", "collective_comm", "xpu_scope_profiler", "xpu_sync",
    "hardware_counters", "Trace", "ac2g", "fwdbwd", "async_cpu_to_gpu", "async", "async_gpu",
    "Python", "python", "Memory", "memory", "",
})
# 2021-era capitalised categories and their modern names
_LEGACY_CATS = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset",
                "Runtime": "cuda_runtime", "Driver": "cuda_driver", "Operator": "cpu_op",
                "User annotation": "user_annotation", "user annotation": "user_annotation"}
_ROLE_IGNORE, _ROLE_GPU, _ROLE_RUNTIME, _ROLE_SPAN, _ROLE_UNKNOWN = 0, 1, 2, 3, 4

_SEQ_KEYS = ("Seq", "seq", "Seq num", "seq_num", "sequence_num")
_GRAPH_KEYS = ("graph id", "graphId", "graph_id", "graph node id", "graphNodeId")
_INT64_MAX = np.iinfo(np.int64).max

# The keys of an event's args that the tables use (JSON key -> attribute of the typed record)
_ARG_KEYS: dict[str, str] = {
    "device": "device", "stream": "stream", "correlation": "correlation",
    "Collective name": "collective_name", "In msg nelems": "in_msg_nelems", "dtype": "dtype",
    "Process Group Name": "pg_name", "Process Group Description": "pg_desc", "bytes": "bytes",
    "External id": "external_id", "Input Dims": "input_dims", "Input type": "input_type",
    "Seq": "seq_", "seq": "seq", "Seq num": "seq_num_", "seq_num": "seq_num", "sequence_num": "sequence_num",
    "graph id": "graph_id_", "graphId": "graphid", "graph_id": "graph_id", "graph node id": "graph_node_id_",
    "graphNodeId": "graphnodeid",
}
_EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
_ATTRS: dict[str, Any] = {k: attrgetter(a) for k, a in {**_ARG_KEYS, **{k: k for k in _EVENT_KEYS}}.items()}

if msgspec is not None:
    _ArgsStruct = msgspec.defstruct(
        "_ArgsStruct",
        [(a, Any, msgspec.field(default=None, name=k)) for k, a in _ARG_KEYS.items()]
        # metadata events: GPU labels and thread names (UNSET tells an absent key from a null)
        + [("labels", Any, msgspec.UNSET), ("name", Any, msgspec.UNSET)],
        gc=False,
    )
    _EventStruct = msgspec.defstruct(
        "_EventStruct", [(k, Any, None) for k in _EVENT_KEYS[:-1]] + [("args", _ArgsStruct | None, None)],
        gc=False,
    )
    _DECODER: Any = msgspec.json.Decoder(list[_EventStruct])
    _NO_ARGS: Any = _ArgsStruct()
    _TYPED: tuple[type, ...] = (_EventStruct,)
else:  # pragma: no cover
    _DECODER = _NO_ARGS = None
    _TYPED = ()
_TRAILING_RE = re.compile(r"trailing characters \(byte (\d+)\)")


# ---------------------------------------------------------------------------------------------------
# Ledger with flags
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceFlag:
    """An interpretation the reader made that a user of its tables should know about.

    Attributes
    ----------
    code
        Short machine-readable name (``rank_from_file_name``, ``no_profiler_step``, ``cuda_graph``,
        ``unknown_category``, ``timestamps_in_ns``, ``legacy_format``, ``missing_ranks`` ...).
    message
        What was found and what was done.
    file
        The trace file (None for a flag about a set of files).
    rank
        The rank concerned, when known.
    """

    code: str
    message: str
    file: str | None = None
    rank: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the flag as a JSON-ready dictionary."""
        return {"code": self.code, "message": self.message, "file": self.file, "rank": self.rank}


@dataclass
class TraceLedger(Ledger):
    """A :class:`fleetlib.quality.Ledger` plus the flags raised while reading traces."""

    flags: list[TraceFlag] = field(default_factory=list)

    def flag(self, code: str, message: str, *, file: str | None = None, rank: int | None = None) -> None:
        """Record a flag (a note beside the tables; it changes no row count)."""
        self.flags.append(TraceFlag(code, message, file, None if rank is None else int(rank)))

    def codes(self) -> list[str]:
        """Return the distinct flag codes, in the order first raised."""
        return list(dict.fromkeys(f.code for f in self.flags))

    def extend(self, other: Ledger) -> None:
        """Add another ledger's counts, entries and (if any) flags to this one."""
        super().extend(other)
        self.flags.extend(getattr(other, "flags", []))

    def to_dict(self) -> dict[str, object]:
        """Return counts, entries and flags as a JSON-ready dictionary."""
        out = super().to_dict()
        out["flags"] = [f.to_dict() for f in self.flags]
        return out


# ---------------------------------------------------------------------------------------------------
# Result objects
# ---------------------------------------------------------------------------------------------------


@dataclass
class TraceRead:
    """What :func:`read_trace` returns for one file (one rank).

    Attributes
    ----------
    path
        The file read.
    rank
        The rank the rows carry.
    kernels, steps, host_syncs, ops
        The tables described in the module docstring.
    metadata
        ``distributed_info``, ``device_properties``, ``base_time_ns``, ``time_unit``,
        ``time_origin``, ``format``, ``platform``, ``world_size``, ``rank_source``,
        ``events_total``, ``events_by_category``, ``window_us``, ``sha256``, ``trace_name``,
        ``schema_version``, ``display_time_unit`` and ``other`` (any further top-level keys).
    ledger
        Rows read / kept / repaired / rejected, with flags.
    from_cache
        True when the tables came from the Parquet cache.
    read_s
        Wall seconds this call took.
    """

    path: Path
    rank: int
    kernels: pd.DataFrame
    steps: pd.DataFrame
    host_syncs: pd.DataFrame
    metadata: dict[str, Any]
    ledger: TraceLedger
    from_cache: bool = False
    read_s: float = 0.0
    ops: pd.DataFrame = field(default_factory=lambda: empty_ops())

    @property
    def flags(self) -> list[TraceFlag]:
        """The ledger's flags."""
        return self.ledger.flags


@dataclass
class TraceSet:
    """What :func:`read_traces` returns: the tables of all ranks on one time base.

    Attributes
    ----------
    kernels, steps, host_syncs, ops
        The per-rank tables concatenated (times shifted onto ``base_time_ns``).
    metadata
        Per rank, the :attr:`TraceRead.metadata` of its file.
    ledger
        All files' ledgers merged, plus set-level flags (``missing_ranks`` ...).
    base_time_ns
        The common time origin of ``start_us`` / ``end_us`` (unix ns when the traces carry one).
    reads
        The per-file results (their tables keep their own time base).
    """

    kernels: pd.DataFrame
    steps: pd.DataFrame
    host_syncs: pd.DataFrame
    metadata: dict[int, dict[str, Any]]
    ledger: TraceLedger
    base_time_ns: int
    reads: list[TraceRead]
    ops: pd.DataFrame = field(default_factory=lambda: empty_ops())

    @property
    def ranks(self) -> list[int]:
        """The ranks read, sorted."""
        return sorted(self.metadata)

    @property
    def flags(self) -> list[TraceFlag]:
        """The merged ledger's flags."""
        return self.ledger.flags


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


def _kernel_dtypes() -> dict[str, Any]:
    return _dtypes("kernels")


def _step_dtypes() -> dict[str, Any]:
    return _dtypes("steps")


def _sync_dtypes() -> dict[str, Any]:
    return _dtypes("host_syncs")


def _has_dtypes(frame: pd.DataFrame, dtypes: Mapping[str, Any]) -> bool:
    if list(frame.columns) != list(dtypes):
        return False
    for c, d in dtypes.items():
        got = frame[c].dtype
        if isinstance(d, pd.CategoricalDtype):
            if not isinstance(got, pd.CategoricalDtype) or list(got.categories) != list(d.categories):
                return False
        elif d == "category":
            if not isinstance(got, pd.CategoricalDtype):
                return False
        elif str(got) != d:
            return False
    return True


def _categorical(values: np.ndarray, dtype: pd.CategoricalDtype | None = None) -> pd.Categorical:
    """``pd.Categorical(values)`` (or with a fixed ``dtype``), built from codes: several times faster.

    Free categories are the sorted distinct text values, as ``pd.Categorical`` makes them.
    """
    if dtype is not None:
        return pd.Categorical.from_codes(dtype.categories.get_indexer(values), dtype=dtype, validate=False)
    codes, uniques = pd.factorize(values, sort=True)
    if not all(isinstance(u, str) for u in uniques):
        return pd.Categorical(values)
    cats = pd.Index(uniques, dtype="str")
    fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)  # distinct by construction: no re-check
    return pd.Categorical.from_codes(codes, dtype=fast(cats, False) if fast else pd.CategoricalDtype(cats),
                                     validate=False)


_EMPTY: dict[tuple[str, ...], pd.DataFrame] = {}


def _empty(dtypes: Mapping[str, Any]) -> pd.DataFrame:
    """Return a table with no rows (built once per column set -- milliseconds -- then copied)."""
    key = tuple(dtypes)
    if key not in _EMPTY:
        _EMPTY[key] = pd.DataFrame({c: pd.Series([], dtype=d) for c, d in dtypes.items()})
    return _EMPTY[key].copy()


def empty_kernels() -> pd.DataFrame:
    """Return a kernel table with no rows and the canonical columns and dtypes (plus the extras)."""
    return _empty(_kernel_dtypes())


def empty_steps() -> pd.DataFrame:
    """Return a step-window table with no rows."""
    return _empty(_step_dtypes())


def empty_host_syncs() -> pd.DataFrame:
    """Return a host-sync table with no rows."""
    return _empty(_sync_dtypes())


def empty_ops() -> pd.DataFrame:
    """Return a CPU-operator table (:data:`OPS_COLUMNS`) with no rows."""
    return _empty(_dtypes("ops"))


# ---------------------------------------------------------------------------------------------------
# Paths, ranks, cache location
# ---------------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """Return the trace cache directory: ``$FLEETLIB_TRACE_CACHE`` or ``~/.cache/fleetlib/traces``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fleetlib" / "traces"


def rank_from_file_name(name: str | os.PathLike[str]) -> int | None:
    """Return the rank a trace file's name states (``worker3_...``, ``rank-1``, ``rank_1``), or None.

    Parameters
    ----------
    name
        File name or path (only the last component is used).

    Returns
    -------
    int or None
        The number after ``rank`` or ``worker`` (separated by nothing, ``-``, ``_`` or a space).

    Examples
    --------
    >>> rank_from_file_name("worker3_step_12.1694128201557.pt.trace.json.gz")
    3
    >>> rank_from_file_name("sampled_rank-1.json.gz")
    1
    >>> rank_from_file_name("trace.json") is None
    True
    """
    m = _RANK_NAME_RE.search(Path(name).name)
    return int(m.group(1)) if m else None


def trace_files(paths_or_dir: PathLike | Iterable[PathLike]) -> list[Path]:
    """Expand a directory, a file or a list of them into trace files.

    Parameters
    ----------
    paths_or_dir
        A trace file, a directory (its ``*.json`` and ``*.json.gz`` files, not recursing), or
        an iterable of either.

    Returns
    -------
    list of Path
        Files in the order given; a directory's files sorted by name.

    Raises
    ------
    DomainError
        If nothing is given or a directory holds no trace file.
    InputError
        If a path does not exist.
    """
    items = [paths_or_dir] if isinstance(paths_or_dir, (str, os.PathLike)) else list(paths_or_dir)
    if not items:
        raise DomainError("no trace files were given")
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = sorted(q for q in p.iterdir()
                           if q.is_file() and q.name.lower().endswith((".json", ".json.gz")))
            if not found:
                raise DomainError(f"directory {p} holds no *.json or *.json.gz trace file")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise InputError("file not found", file=str(p))
    return out


# ---------------------------------------------------------------------------------------------------
# Bytes -> events, in chunks
# ---------------------------------------------------------------------------------------------------


def _load_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(path)) from exc
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc})", file=str(path)) from exc


def _gunzip(raw: bytes, file: str) -> bytes | bytearray:
    """Decompress gzip (all members) into one growing buffer, a slice of input at a time.

    ``gzip.decompress`` joins its output blocks at the end, briefly holding the text twice; this
    keeps peak memory near the decompressed size.  The buffer is sized up front from the gzip
    trailer's length field (exact for a single member under 4 GiB, capped at 64x the compressed
    size; a growing buffer over-allocates by an eighth), and written in place.
    """
    if raw[:2] != b"\x1f\x8b":
        return raw
    # trust the trailer only within a plausible ratio: a truncated file ends in arbitrary bytes
    out = bytearray(min(int.from_bytes(raw[-4:], "little"), 64 * len(raw)) if len(raw) >= 18 else 0)
    size = 0
    view = memoryview(raw)
    pos, n, step = 0, len(raw), 1 << 16
    try:
        while pos < n:
            member = zlib.decompressobj(wbits=31)
            while not member.eof:
                if pos >= n:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                piece = view[pos:pos + step]
                data = member.decompress(piece)
                out[size:size + len(data)] = data  # in place while it fits, then it extends
                size += len(data)
                pos += len(piece)
            pos -= len(member.unused_data)
            while pos < n and raw[pos] == 0:  # zero padding between members is allowed
                pos += 1
            if pos < n and raw[pos:pos + 2] != b"\x1f\x8b":
                raise EOFError(f"{n - pos} bytes of trailing garbage after the gzip stream")
    except (EOFError, zlib.error) as exc:
        raise InputError(f"truncated or corrupt gzip stream ({exc}); expected a complete gzip file",
                         file=file, field="gzip") from exc
    del out[size:]  # a multi-member file's trailer gives only the last member's length
    return out


def _line_col(buf: bytes | bytearray, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(buf)))
    line = buf.count(b"\n", 0, offset) + 1
    return line, offset - (buf.rfind(b"\n", 0, offset) + 1) + 1


def _json_error(buf: bytes | bytearray, offset: int, exc: Exception, file: str, what: str) -> InputError:
    line, col = _line_col(buf, offset)
    msg = getattr(exc, "msg", str(exc))
    hint = " (the file looks truncated)" if offset >= len(buf.rstrip()) - 1 else ""
    return InputError(f"invalid JSON in {what}: {msg} at line {line} column {col}{hint}; expected a "
                      f"Chrome-trace JSON object or array of events", file=file, row=line, field="json")


_ESCAPED_RE = re.compile("[\udc80-\udcff]")


def _text(piece: bytes) -> tuple[str, int]:
    """Decode UTF-8; each invalid byte becomes a lone surrogate (``surrogateescape``), counted.

    Surrogates keep one character per undecodable byte, so character positions still map back to
    byte offsets exactly; :func:`_clean` turns them into U+FFFD for the tables.
    """
    try:
        return piece.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = piece.decode("utf-8", errors="surrogateescape")
        return text, len(_ESCAPED_RE.findall(text))


def _byte_offset(text: str, char_pos: int) -> int:
    return char_pos if text.isascii() else len(text[:char_pos].encode("utf-8", errors="surrogateescape"))


def _clean_one(value: Any) -> Any:
    if isinstance(value, str) and _ESCAPED_RE.search(value):
        return value.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    return value


def _clean(values: np.ndarray) -> np.ndarray:
    """Replace escaped invalid UTF-8 bytes in text values by U+FFFD (one distinct value at a time)."""
    return _map_unique(values, _clean_one, None) if len(values) else values


def _clean_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {_clean_one(k): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v) for v in value]
    return _clean_one(value)


def _skip_ws(buf: bytes | bytearray, pos: int) -> int:
    n = len(buf)
    while pos < n and buf[pos] in b" \t\r\n":
        pos += 1
    return pos


def _valid_utf8(data: bytes | bytearray) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _typed_events(data: bytes | bytearray) -> list[Any] | None:
    """Decode a JSON array of events into typed records holding only the fields the tables use.

    Returns None where the typed decoder cannot stand in exactly for the stdlib one -- invalid
    UTF-8 anywhere (the stdlib path counts and repairs it), malformed JSON, a value of another
    shape (``args`` not an object, a non-object entry), ``NaN`` or lone-surrogate escapes --
    and the caller decodes the same text with :mod:`json`.
    """
    if _DECODER is None or not _valid_utf8(data):
        return None
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError:  # ValidationError is a DecodeError too
        return None


def _bracketed(buf: bytes | bytearray, start: int, end: int, close: bool = True) -> bytearray:
    """``[`` + ``buf[start:end]`` (+ ``]``) built with a single copy of the slice."""
    data = bytearray(b"[")
    data += memoryview(buf)[start:end]
    if close:
        data += b"]"
    return data


class _Source:
    """Splits a trace document into chunks of events; keeps the top-level keys and the format."""

    def __init__(self, buf: bytes | bytearray, file: str, typed: bool = True) -> None:
        self.buf = buf
        self.file = file
        self.format = "object"
        self.top: dict[str, Any] = {}
        self.replaced = 0
        self.typed = typed and _DECODER is not None

    def chunks(self) -> Iterator[list[Any]]:
        buf = self.buf
        start = _skip_ws(buf, 0)
        if buf[start:start + 3] == b"\xef\xbb\xbf":
            start = _skip_ws(buf, start + 3)
        if start >= len(buf):
            raise InputError("empty file: expected a Chrome-trace JSON object or array", file=self.file,
                             row=1)
        first = buf[start:start + 1]
        if first == b"[":
            self.format = "bare_array"
            yield from self._array(start + 1)
            return
        if first != b"{":
            line, _ = _line_col(buf, start)
            raise InputError(f"not JSON: the file starts with {buf[start:start + 16]!r}; expected a "
                             f"Chrome-trace JSON object or array", file=self.file, row=line, field="json")
        m = _KEY_RE.search(buf, start)
        head = None
        if m is not None:
            # the key is top-level iff everything before it is a run of complete "key": value pairs
            piece = buf[start + 1:m.start()].rstrip()
            piece = piece[:-1] if piece.endswith(b",") else piece
            try:
                text, bad = _text(b"{" + piece + b"}")
                head = json.loads(text)
                self.replaced += bad
            except ValueError:
                head = None
        if not isinstance(head, dict):
            yield from self._whole()
            return
        self.top = head
        yield from self._array(m.end())

    def _array(self, pos: int) -> Iterator[list[Any]]:
        buf = self.buf
        n = len(buf)
        chunk = min(_CHUNK_BYTES, max(_MIN_CHUNK_BYTES, n // 16))
        while True:
            target = pos + chunk
            m = _CUT_RE.search(buf, target) if target < n else None
            misses = 0
            while m is not None:
                events = _typed_events(_bracketed(buf, pos, m.start() + 1)) if self.typed else None
                if events is not None:
                    yield events
                    pos = m.end() - 1
                    break
                text, bad = _text(buf[pos:m.start() + 1])
                try:
                    events = json.loads("[" + text + "]")
                except ValueError:
                    # not a cut between two top-level events (or broken text before it): try a later
                    # candidate, skipping further each time so that a long run of false candidates
                    # costs a logarithmic number of attempts
                    misses += 1
                    skip = 0 if misses <= 4 else 256 << min(misses - 4, 40)
                    m = _CUT_RE.search(buf, m.end() + skip)
                    continue
                self.replaced += bad
                yield events
                pos = m.end() - 1
                break
            else:
                break
        # the last piece: decode up to the array's closing bracket, then the rest of the object
        last = self._typed_last(pos)
        if last is not None:
            events, tail = last
        else:
            text, bad = _text(buf[pos:])
            text = "[" + text
            try:
                events, end = json.JSONDecoder().raw_decode(text)
            except ValueError as exc:
                err = int(getattr(exc, "pos", 1) or 1)
                raise _json_error(buf, pos + _byte_offset(text[1:], max(0, err - 1)), exc, self.file,
                                  "traceEvents") from exc
            self.replaced += bad
            tail = pos + _byte_offset(text[1:], end - 1)
            del text
        yield events
        rest = buf[tail:]
        if self.format == "bare_array":
            if rest.strip():
                raise _json_error(buf, _skip_ws(buf, tail), ValueError("extra data after the event array"),
                                  self.file, "the document")
            return
        body = rest.lstrip()
        body = body[1:] if body.startswith(b",") else body
        text, bad = _text(b"{" + body)
        try:
            more, end = json.JSONDecoder().raw_decode(text)
        except ValueError as exc:
            err = int(getattr(exc, "pos", 1) or 1)
            lead = len(rest) - len(rest.lstrip()) + (1 if rest.lstrip().startswith(b",") else 0)
            raise _json_error(buf, tail + lead + _byte_offset(text[1:], max(0, err - 1)), exc, self.file,
                              "the keys after traceEvents") from exc
        if text[end:].strip():
            raise _json_error(buf, len(buf.rstrip()), ValueError("extra data after the JSON object"),
                              self.file, "the document")
        self.replaced += bad
        self.top.update(more)

    def _typed_last(self, pos: int) -> tuple[list[Any], int] | None:
        """Typed decode of the last piece: the events and the offset just past the array's end."""
        if not self.typed:
            return None
        data = _bracketed(self.buf, pos, len(self.buf), close=False)
        if not _valid_utf8(data):
            return None
        try:
            return _DECODER.decode(data), len(self.buf)  # a bare array ends the document
        except msgspec.DecodeError as exc:
            m = _TRAILING_RE.search(str(exc))  # the array ended before the document did
            if m is None:
                return None
        end = int(m.group(1)) - 1  # msgspec names the byte after the first trailing character
        del data[end:]  # in place: no second copy of the piece
        try:
            return _DECODER.decode(data), pos + end - 1
        except msgspec.DecodeError:
            return None

    def _whole(self) -> Iterator[list[Any]]:
        """Decode the whole document at once (fallback; also names the place of a syntax error)."""
        text, bad = _text(self.buf)
        try:
            doc = json.loads(text)
        except ValueError as exc:
            err = int(getattr(exc, "pos", 0) or 0)
            raise _json_error(self.buf, _byte_offset(text, err), exc, self.file, "the document") from exc
        del text
        self.replaced += bad
        if isinstance(doc, list):
            self.format = "bare_array"
            yield doc
            return
        if not isinstance(doc, dict):
            raise InputError(f"the top-level JSON value is a {type(doc).__name__}; expected an object "
                             f"with traceEvents or an array of events", file=self.file, field="json")
        events = doc.pop("traceEvents", None)
        self.top = doc
        if events is None:
            raise InputError("the JSON object has no traceEvents array", file=self.file, field="traceEvents")
        if not isinstance(events, list):
            raise InputError(f"traceEvents is a {type(events).__name__}; expected an array", file=self.file,
                             field="traceEvents")
        yield events


# ---------------------------------------------------------------------------------------------------
# Events -> columns
# ---------------------------------------------------------------------------------------------------


def _objects(values: Iterable[Any], n: int) -> np.ndarray:
    return np.fromiter(values, dtype=object, count=n)


def _get(items: Sequence[Any] | np.ndarray, key: str) -> np.ndarray:
    """Return the value of ``key`` in each event or args record (None where absent).

    Items are all dicts (the stdlib decoder) or all typed records (msgspec), never mixed.
    """
    n = len(items)
    if n and not isinstance(items[0], dict):
        return _objects(map(_ATTRS[key], items), n)
    return _objects(map(dict.get, items, repeat(key)), n)


def _present(args: np.ndarray) -> set[str]:
    """Return the arg keys any of these records carries (typed records: every key they declare)."""
    if len(args) and not isinstance(args[0], dict):
        return set(_ARG_KEYS)
    return set().union(*args)  # one C-level pass over the dicts


_NUM_OK, _NUM_MISSING, _NUM_TEXT, _NUM_BAD, _NUM_HUGE = 0, 1, 2, 3, 4


def _numbers(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (int64 or float64 array, status) for an object array of JSON scalars.

    Status: 0 number, 1 missing, 2 numeric text converted, 3 not a number, 4 integer beyond int64.
    Values stay int64 when every present value is an int in range (exact for nanoseconds).
    """
    n = len(values)
    status = np.zeros(n, dtype=np.int8)
    if not n:
        return np.zeros(0, dtype=np.float64), status
    kinds = set(map(type, values))
    if kinds <= {int}:
        try:
            return values.astype(np.int64), status
        except OverflowError:
            pass
    elif kinds <= {int, float}:
        if int not in kinds or max(map(abs, values)) < 2 ** 53:
            return values.astype(np.float64), status
    elif kinds <= {int, type(None)}:
        miss = np.equal(values, None)
        try:
            arr = np.where(miss, 0, values).astype(np.int64)
            status[miss] = _NUM_MISSING
            return arr, status
        except OverflowError:
            pass
    elif kinds <= {int, float, type(None)} and (int not in kinds or max(
            (abs(v) for v in values if v is not None), default=0) < 2 ** 53):
        miss = np.equal(values, None)
        arr = np.where(miss, np.nan, values).astype(np.float64)
        status[miss] = _NUM_MISSING
        return arr, status
    # the rare path (text, booleans, huge integers, nested values): value by value
    out = np.full(n, np.nan)
    for i, v in enumerate(values):
        if v is None:
            status[i] = _NUM_MISSING
        elif isinstance(v, (bool, list, dict)):
            status[i] = _NUM_BAD
        elif isinstance(v, int):
            if -_INT64_MAX - 1 <= v <= _INT64_MAX:
                out[i] = float(v)
            else:
                status[i] = _NUM_HUGE
        elif isinstance(v, float):
            out[i] = v
        elif isinstance(v, str):
            try:
                out[i] = float(v)
                status[i] = _NUM_TEXT
            except ValueError:
                status[i] = _NUM_BAD
        else:
            status[i] = _NUM_BAD
    return out, status


def _args(args: np.ndarray) -> tuple[np.ndarray, int]:
    """Return events' ``args`` values as objects ({} when missing) and how many were not objects."""
    kinds = set(map(type, args))
    if kinds <= {dict}:
        return args, 0
    if _TYPED and kinds - {type(None)} <= {type(_NO_ARGS)}:  # typed records: args was an object or absent
        return np.where(np.equal(args, None), _NO_ARGS, args), 0
    is_dict = np.fromiter(map(isinstance, args, repeat(dict)), dtype=bool, count=len(args))
    odd = int((~is_dict & ~np.equal(args, None)).sum())
    fixed = args.copy()
    fixed[~is_dict] = [{} for _ in range(int((~is_dict).sum()))]
    return fixed, odd


def _first_present(args: np.ndarray, keys: Sequence[str]) -> np.ndarray:
    out = _get(args, keys[0])
    for key in keys[1:]:
        miss = np.equal(out, None)
        if not miss.any():
            break
        out = np.where(miss, _get(args, key), out)
    return out


def _shared(values: np.ndarray) -> np.ndarray:
    """Point equal values at one object (the decoder makes a new string per event; names are long)."""
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    except TypeError:  # unhashable values in a malformed trace: keep them as they are
        return values
    table = np.append(np.asarray(uniques, dtype=object), _objects([None], 1))
    return table[np.where(codes < 0, len(uniques), codes)]


def _timing(x: Mapping[str, np.ndarray], pos: np.ndarray) -> dict[str, np.ndarray]:
    """``ts`` and ``dur`` of the events at ``pos`` as numbers with their parse status.

    Converted per role and chunk (see :func:`_numbers`: integers stay exact int64 when a group
    holds nothing else).
    """
    ts, ts_status = _numbers(x["ts"][pos])
    dur, dur_status = _numbers(x["dur"][pos])
    return {"ts": ts, "ts_status": ts_status, "dur": dur, "dur_status": dur_status}


def _meta_dict(event: Any) -> dict[str, Any]:
    """Return a metadata event as a dict (a typed record: only the keys :func:`_device_maps` reads)."""
    if isinstance(event, dict):
        return event
    out = {"ph": event.ph, "name": event.name, "pid": event.pid, "tid": event.tid}
    if event.args is not None:
        out["args"] = {k: v for k, v in (("labels", event.args.labels), ("name", event.args.name))
                       if v is not msgspec.UNSET}
    return out


class _Collector:
    """Reduces chunks of events to the columns the tables need (per chunk, then concatenated)."""

    _GPU_ARGS = ("device", "stream", "correlation", "Collective name", "In msg nelems", "dtype",
                 "Process Group Name", "Process Group Description", "bytes", "External id")
    _SPAN_ARGS = ("Collective name", "In msg nelems", "dtype", "Process Group Name",
                  "Process Group Description", "Input Dims", "Input type")

    def __init__(self, step_marker: re.Pattern[str] | None) -> None:
        self.step_marker = step_marker
        self.offset = 0
        self.parts: dict[str, list[dict[str, np.ndarray]]] = {"gpu": [], "runtime": [], "spans": [],
                                                              "ops": []}
        self.meta_events: list[dict[str, Any]] = []
        self.cat_counts: Counter[str] = Counter()
        self.phase_counts: Counter[str] = Counter()
        self.legacy_cats: set[str] = set()
        self.unknown_cats: Counter[str] = Counter()
        self.not_objects: list[int] = []
        self.odd_args = 0
        self.window = [np.inf, -np.inf]
        self.n_timed = 0
        self.ts_samples: list[np.ndarray] = []

    def add(self, events: list[Any]) -> None:
        n = len(events)
        base = self.offset
        self.offset += n
        if not n:
            return
        evs = _objects(events, n)
        rows = np.arange(base + 1, base + n + 1, dtype=np.int64)
        kinds = set(map(type, events))
        if kinds != {dict} and not (_TYPED and kinds <= set(_TYPED)):
            is_dict = np.fromiter(map(isinstance, events, repeat(dict)), dtype=bool, count=n)
            self.not_objects.extend(rows[~is_dict].tolist())
            evs, rows = evs[is_dict], rows[is_dict]
            if not len(evs):
                return
        ph = _get(evs, "ph")
        ph_codes, ph_uniques = pd.factorize(ph, use_na_sentinel=True)
        for u, c in zip(ph_uniques, np.bincount(ph_codes[ph_codes >= 0], minlength=len(ph_uniques)),
                        strict=True):
            self.phase_counts[str(u)] += int(c)
        is_x = ph == "X"
        cat_codes, cat_uniques = pd.factorize(_get(evs, "cat"), use_na_sentinel=True)
        counts = np.bincount(cat_codes[cat_codes >= 0], minlength=len(cat_uniques))
        norm = np.empty(len(cat_uniques) + 1, dtype=object)
        role = np.zeros(len(cat_uniques) + 1, dtype=np.int8)
        norm[-1], role[-1] = "", _ROLE_SPAN  # a complete event with no category: a step candidate
        for j, (u, c) in enumerate(zip(cat_uniques, counts, strict=True)):
            key = str(u)
            self.cat_counts[key] += int(c)
            if key in _LEGACY_CATS:
                self.legacy_cats.add(key)
                key = _LEGACY_CATS[key]
            norm[j] = key
            role[j] = (_ROLE_GPU if key in _GPU_CATS else _ROLE_RUNTIME if key in _RUNTIME_CATS
                       else _ROLE_SPAN if key in _SPAN_CATS else _ROLE_IGNORE if key in _IGNORED_CATS
                       else _ROLE_UNKNOWN)
            if role[j] == _ROLE_UNKNOWN:
                self.unknown_cats[key] += int(np.sum(is_x & (cat_codes == j)))
        code = np.where(cat_codes < 0, len(cat_uniques), cat_codes)
        self.cat_counts["<none>"] += int((cat_codes < 0).sum())
        ev_role = np.where(is_x, role[code], _ROLE_IGNORE)
        cat_norm = norm[code]
        m_idx = np.flatnonzero(ph == "M")
        if len(m_idx):
            self.meta_events.extend(map(_meta_dict, evs[m_idx].tolist()))
        xi = np.flatnonzero(is_x)
        if not len(xi):
            return
        # the fields every role uses, taken once for all complete events
        xs = evs[xi]
        x = {"ts": _get(xs, "ts"), "dur": _get(xs, "dur"), "name": _shared(_get(xs, "name")),
             "tid": _get(xs, "tid"), "args": _get(xs, "args")}
        # the span of all timed events, and a sample of timestamps for the unit check
        ts, st = _numbers(x["ts"])
        du, sd = _numbers(x["dur"])
        ok = (st == _NUM_OK) | (st == _NUM_TEXT)
        if not np.issubdtype(ts.dtype, np.integer):
            ok &= np.isfinite(ts)
        self.n_timed += int(ok.sum())
        if ok.any():
            tsf = ts[ok].astype(np.float64)
            d_ok = ((sd[ok] == _NUM_OK) | (sd[ok] == _NUM_TEXT))
            duf = np.where(d_ok, du[ok].astype(np.float64), 0.0)
            duf = np.where(np.isfinite(duf) & (duf > 0), duf, 0.0)
            self.window[0] = min(self.window[0], float(tsf.min()))
            self.window[1] = max(self.window[1], float((tsf + duf).max()))
            self.ts_samples.append(tsf[:: max(1, len(tsf) // 64)])
        x_role, x_cat, x_rows = ev_role[xi], cat_norm[xi], rows[xi]
        sel = np.flatnonzero((x_role == _ROLE_GPU) | (x_role == _ROLE_UNKNOWN))
        if len(sel):
            self.parts["gpu"].append(self._gpu(x, sel, x_rows[sel], x_cat[sel], _get(xs[sel], "pid")))
        sel = np.flatnonzero(x_role == _ROLE_RUNTIME)
        if len(sel):
            self.parts["runtime"].append(self._runtime(x, sel, x_rows[sel]))
        sel = np.flatnonzero((x_role == _ROLE_SPAN) & (x_cat == "cpu_op"))
        if len(sel):
            self.parts["ops"].append(self._op(x, sel, x_rows[sel]))
        sel = np.flatnonzero(x_role == _ROLE_SPAN)
        if len(sel):
            keep = _map_unique(x["name"][sel], self._wanted_span, False).astype(bool)
            if keep.any():
                self.parts["spans"].append(self._span(x, sel[keep], x_rows[sel][keep]))

    def _wanted_span(self, name: Any) -> bool:
        if not isinstance(name, str):
            return False
        return (name.startswith(("ProfilerStep#", "nccl:", "rccl:")) or name == "record_param_comms"
                or (self.step_marker is not None and self.step_marker.search(name) is not None))

    def _gpu(self, x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray, cat_norm: np.ndarray,
             pid: np.ndarray) -> dict[str, np.ndarray]:
        args, odd = _args(x["args"][pos])
        self.odd_args += odd
        cols = {"row": rows, "cat": cat_norm, "name": x["name"][pos], **_timing(x, pos), "pid": pid,
                "tid": x["tid"][pos]}
        present = _present(args)
        none = np.full(len(args), None, dtype=object)
        for key in self._GPU_ARGS:
            cols[key] = _get(args, key) if key in present else none
        seq_keys = [k for k in _SEQ_KEYS if k in present]
        cols["seq"] = _first_present(args, seq_keys) if seq_keys else none
        graph = np.zeros(len(args), dtype=bool)
        for key in _GRAPH_KEYS:
            if key in present:
                graph |= ~np.equal(_get(args, key), None)
        cols["graph_arg"] = graph
        return cols

    def _runtime(self, x: Mapping[str, np.ndarray], pos: np.ndarray,
                 rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        return {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos],
                "correlation": _get(args, "correlation")}

    def _span(self, x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        cols = {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos]}
        for key in self._SPAN_ARGS:
            cols[key] = _get(args, key)
        cols["seq"] = _first_present(args, _SEQ_KEYS)
        return cols

    def _op(self, x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        present = _present(args)
        none = np.full(len(args), None, dtype=object)
        cols = {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos]}
        typed = len(args) > 0 and not isinstance(args[0], dict)
        cols["External id"] = _get(args, "External id") if "External id" in present else none
        for key in ("Input Dims", "Input type"):
            cols[key] = _json_texts(_get(args, key), typed) if key in present else none
        return cols

    def table(self, which: str) -> dict[str, np.ndarray]:
        parts = self.parts[which]
        if not parts:
            return {}
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


# ---------------------------------------------------------------------------------------------------
# Row book-keeping
# ---------------------------------------------------------------------------------------------------


class _Book:
    """Per-row rejections and repairs (one ledger entry per row) and the flags of one file."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.rejected: dict[int, tuple[str | None, str]] = {}
        self.repaired: dict[int, list[tuple[str | None, str]]] = {}
        self.flags: list[TraceFlag] = []
        self.read = 0

    @staticmethod
    def _pairs(rows: Iterable[int], reasons: str | Sequence[str]) -> Iterable[tuple[int, str]]:
        rows = [int(r) for r in rows]
        texts = [reasons] * len(rows) if isinstance(reasons, str) else list(reasons)
        return zip(rows, texts, strict=True)

    def reject(self, rows: Iterable[int], field_: str | None, reasons: str | Sequence[str]) -> None:
        for r, t in self._pairs(rows, reasons):
            self.rejected.setdefault(r, (field_, t))

    def repair(self, rows: Iterable[int], field_: str | None, reasons: str | Sequence[str]) -> None:
        for r, t in self._pairs(rows, reasons):
            self.repaired.setdefault(r, []).append((field_, t))

    def flag(self, code: str, message: str) -> None:
        self.flags.append(TraceFlag(code, message, self.file))

    def ledger(self) -> TraceLedger:
        led = TraceLedger()
        led.read = self.read
        for r in sorted(self.rejected):
            f, t = self.rejected[r]
            led.reject(self.file, r, f, t)
        repaired = sorted(r for r in self.repaired if r not in self.rejected)
        for r in repaired:
            items = self.repaired[r]
            fields = ",".join(dict.fromkeys(f for f, _ in items if f)) or None
            led.repair(self.file, r, fields, "; ".join(dict.fromkeys(t for _, t in items)))
        led.kept = led.read - len(self.rejected) - len(repaired)
        led.flags.extend(self.flags)
        return led


def _times(table: Mapping[str, np.ndarray], book: _Book | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (ts, dur, ok); rows without a usable ts/dur are rejected when a book is given."""
    rows = table["row"]
    ts, st = table["ts"], table["ts_status"]
    du, sd = table["dur"], table["dur_status"]
    ok = np.ones(len(rows), dtype=bool)
    if not np.issubdtype(ts.dtype, np.integer):
        st = np.where((st <= _NUM_TEXT) & (st != _NUM_MISSING) & ~np.isfinite(ts), _NUM_BAD, st)
    if not np.issubdtype(du.dtype, np.integer):
        sd = np.where((sd <= _NUM_TEXT) & (sd != _NUM_MISSING) & ~np.isfinite(du), _NUM_BAD, sd)
    checks = (
        (st == _NUM_MISSING, "ts", "no timestamp (ts missing)"),
        (st == _NUM_BAD, "ts", "timestamp is not a finite number"),
        (st == _NUM_HUGE, "ts", "timestamp is an integer beyond int64"),
        (sd == _NUM_MISSING, "dur", "complete event without a duration (dur missing)"),
        (sd == _NUM_BAD, "dur", "duration is not a finite number"),
        (sd == _NUM_HUGE, "dur", "duration is an integer beyond int64"),
    )
    for mask, fld, why in checks:
        hit = mask & ok
        if book is not None and hit.any():
            book.reject(rows[hit], fld, why)
        ok &= ~mask
    text = ((st == _NUM_TEXT) | (sd == _NUM_TEXT)) & ok
    if book is not None and text.any():
        book.repair(rows[text], "ts,dur", "numeric text converted to a number")
    return ts, du, ok


def _ids(values: np.ndarray, rows: np.ndarray, book: _Book | None, field_: str) -> pd.arrays.IntegerArray:
    """Nullable Int64 ids; integers beyond int64 become <NA>, their digits kept in the ledger."""
    arr, st = _numbers(values)
    out = np.zeros(len(values), dtype=np.int64)
    valid = (st == _NUM_OK) | (st == _NUM_TEXT)
    if np.issubdtype(arr.dtype, np.integer):
        out[valid] = arr[valid]
    else:
        valid &= np.isfinite(arr) & (np.abs(arr) < 2.0 ** 63)
        valid &= np.floor(np.where(valid, arr, 0.0)) == np.where(valid, arr, 0.0)
        out[valid] = arr[valid].astype(np.int64)
    huge = st == _NUM_HUGE
    if book is not None and huge.any():
        book.repair(rows[huge], field_, [f"integer {values[i]} in {field_!r} is beyond int64: set to "
                                         f"missing, not wrapped (exact value kept here)"
                                         for i in np.flatnonzero(huge)])
        book.flag("integer_beyond_int64", f"{int(huge.sum())} value(s) of {field_!r} exceed int64: missing "
                                          f"in the table, exact digits in the ledger")
    return pd.arrays.IntegerArray(out, ~valid)


# ---------------------------------------------------------------------------------------------------
# Building the tables
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Options:
    classifier: Classifier
    step_marker: str | None
    time_unit: str
    max_event_us: float
    overlap_tolerance_us: float

    def digest(self) -> str:
        text = "\n".join((self.classifier.fingerprint(), str(self.step_marker), self.time_unit,
                          repr(self.max_event_us), repr(self.overlap_tolerance_us)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _small_int(value: Any) -> int | None:
    """Return an int from an int, an integral float or digit text (|value| < 2**31); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2 ** 31 else None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 31:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,10}\s*", value):
        return int(value)
    return None


def _map_unique(values: np.ndarray, fn: Any, missing: Any) -> np.ndarray:
    """Apply ``fn`` once per distinct value; missing values get ``missing``."""
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    except TypeError:  # unhashable values (lists, objects) in a malformed trace
        return _objects((missing if isinstance(v, (list, dict)) or v is None else fn(v) for v in values),
                        len(values))
    per = _objects((fn(u) for u in uniques), len(uniques))
    per = np.append(per, _objects([missing], 1))
    return per[np.where(codes < 0, len(uniques), codes)]


def _device_maps(meta_events: list[dict[str, Any]]) -> tuple[dict[Any, int], dict[tuple[Any, Any], int]]:
    """From metadata events: pid -> GPU index (``process_labels`` "GPU n"), (pid, tid) -> stream."""
    pid_gpu: dict[Any, int] = {}
    tid_stream: dict[tuple[Any, Any], int] = {}
    for e in meta_events:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        name = e.get("name")
        try:
            if name in ("process_labels", "process_name"):
                m = _GPU_LABEL_RE.match(str(args.get("labels", args.get("name", ""))))
                if m:
                    pid_gpu[e.get("pid")] = int(m.group(1))
            elif name == "thread_name":
                m = _STREAM_RE.search(str(args.get("name", "")))
                if m:
                    tid_stream[(e.get("pid"), e.get("tid"))] = int(m.group(1))
        except TypeError:  # an unhashable pid/tid: no mapping from this record
            continue
    return pid_gpu, tid_stream


def _devices_and_streams(g: Mapping[str, np.ndarray], is_unknown: np.ndarray,
                         meta_events: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPU index and stream of each activity: args first, then pid / tid (CUDA and ROCm layouts)."""
    pid_gpu, tid_stream = _device_maps(meta_events)
    pid, tid = g["pid"], g["tid"]
    dev_arg = _map_unique(g["device"], _small_int, None)
    stream_arg = _map_unique(g["stream"], _small_int, None)
    try:
        gpu_pids = set(pd.unique(pd.Series(pid[~is_unknown], dtype=object)).tolist())
    except TypeError:  # an unhashable pid in a malformed trace: no process counts as a GPU by pid
        gpu_pids = set()

    def pid_device(p: Any) -> int | None:
        return pid_gpu[p] if p in pid_gpu else _small_int(p)

    def tid_to_stream(t: Any) -> int | None:
        v = _small_int(t)
        if v is None and isinstance(t, str):
            m = _STREAM_RE.search(t)
            v = int(m.group(1)) if m else None
        return v

    device = np.where(np.equal(dev_arg, None), _map_unique(pid, pid_device, None), dev_arg)
    stream = np.where(np.equal(stream_arg, None), _map_unique(tid, tid_to_stream, None), stream_arg)
    missing = np.flatnonzero(np.equal(stream, None))
    if tid_stream and len(missing):  # tids named "stream N" by thread_name metadata (rare layout)
        stream[missing] = [tid_stream.get((pid[i], tid[i])) for i in missing]
    # an unknown category on a process that is not a GPU keeps no device or stream
    on_gpu = _map_unique(pid, lambda p: p in gpu_pids or p in pid_gpu, False).astype(bool)
    foreign = is_unknown & ~on_gpu & np.equal(dev_arg, None) & np.equal(stream_arg, None)
    device[foreign] = None
    stream[foreign] = None
    no_stream = np.equal(stream, None)
    device_i = np.where(np.equal(device, None), -1, device).astype(np.int64)
    stream_i = np.where(no_stream, -1, stream).astype(np.int64)
    return device_i, stream_i, no_stream & ~is_unknown


def _int_value(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def _time_base(samples: np.ndarray, earliest: float, top: Mapping[str, Any], time_unit: str,
               book: _Book) -> tuple[float, int, str, str, int]:
    """Return (divisor to µs, origin in trace units, unit, origin kind, origin in unix ns)."""
    base_ns = _int_value(top.get("baseTimeNanoseconds"))
    finite = samples[np.isfinite(samples)]
    size = float(np.median(np.abs(finite))) if len(finite) else 0.0
    if time_unit == "auto":
        unit = "ns" if size > (1e13 if base_ns is not None else 1e17) else "us"
    else:
        unit = time_unit
    scale = 1000.0 if unit == "ns" else 1.0
    if unit == "ns":
        how = "recognised by magnitude" if time_unit == "auto" else "as requested"
        book.flag("timestamps_in_ns", f"timestamps are in nanoseconds ({how}); converted to µs")
    if base_ns is not None:
        return scale, 0, unit, "baseTimeNanoseconds", base_ns
    per_second = 1e9 if unit == "ns" else 1e6
    origin = int(np.floor(earliest / per_second)) * int(per_second) if np.isfinite(earliest) else 0
    return scale, origin, unit, "earliest_second", origin * (1 if unit == "ns" else 1000)


def _to_us(values: np.ndarray, origin: int, scale: float) -> np.ndarray:
    if np.issubdtype(values.dtype, np.integer):
        return (values - np.int64(origin)).astype(np.float64) / scale
    return (values.astype(np.float64) - float(origin)) / scale


def _assign_steps(t: np.ndarray, steps: pd.DataFrame) -> pd.arrays.IntegerArray:
    """Step of each time: the window whose [start, end) holds it (the latest-starting on overlap)."""
    n = len(t)
    if steps.empty or not n:
        return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
    order = np.argsort(steps["start_us"].to_numpy(), kind="stable")
    s = steps["start_us"].to_numpy()[order]
    e = steps["end_us"].to_numpy()[order]
    k = steps["step"].to_numpy(dtype=np.int64)[order]
    j = np.searchsorted(s, t, side="right") - 1
    jj = np.maximum(j, 0)
    inside = (j >= 0) & (t < e[jj])
    return pd.arrays.IntegerArray(np.where(inside, k[jj], 0).astype(np.int64), ~inside)


@dataclass
class _Built:
    kernels: pd.DataFrame
    steps: pd.DataFrame
    host_syncs: pd.DataFrame
    metadata: dict[str, Any]
    ops: pd.DataFrame


def _parse(held: list[bytes], file: str, sha: str, opts: _Options) -> tuple[_Built, _Book]:
    """Parse the file's bytes, handed over in ``held`` (emptied once decompressed, to free them)."""
    book = _Book(file)
    marker = re.compile(opts.step_marker) if opts.step_marker else None
    col = _Collector(marker)
    source = _Source(_gunzip(held.pop(), file), file)
    for events in source.chunks():
        if not isinstance(events, list):
            raise InputError("traceEvents is not an array", file=file, field="traceEvents")
        col.add(events)
    del events
    source.buf = b""  # the decompressed text is no longer needed
    top = source.top
    if col.offset == 0:
        raise InputError("the trace has no events (traceEvents is empty); expected GPU and CPU activity "
                         "records", file=file, field="traceEvents")
    if col.n_timed == 0:
        raise InputError(f"the trace has {col.offset} events but none is a complete event with a valid "
                         f"timestamp (ph 'X' with ts); nothing to analyse", file=file, field="traceEvents")
    _format_flags(col, source, book)

    g = col.table("gpu")
    r = col.table("runtime")
    s = col.table("spans")
    g_rows = g.get("row", np.zeros(0, dtype=np.int64))
    samples = np.concatenate(col.ts_samples) if col.ts_samples else np.zeros(0)
    scale, origin, unit, origin_kind, base_time_ns = _time_base(samples, col.window[0], top, opts.time_unit,
                                                                book)

    # --- GPU activities ----------------------------------------------------------------------------
    if len(g_rows):
        g_ts, g_du, g_ok = _times(g, book)
        start_all = _to_us(g_ts, origin, scale)
        dur_all = g_du.astype(np.float64) / scale
    else:
        start_all = dur_all = np.zeros(0)
        g_ok = np.zeros(0, dtype=bool)
    neg = g_ok & (dur_all < 0)
    if neg.any():
        book.reject(g_rows[neg], "dur", [f"negative duration ({d:g} µs)" for d in dur_all[neg]])
    g_ok &= ~neg
    long_ = g_ok & (dur_all > opts.max_event_us)
    if long_.any():
        book.reject(g_rows[long_], "dur", [f"duration {d:.6g} µs exceeds max_event_us={opts.max_event_us:g} "
                                           f"(a corrupt record)" for d in dur_all[long_]])
    g_ok &= ~long_
    book.read += len(g_rows)

    keep = np.flatnonzero(g_ok)
    n_k = len(keep)
    gk = {k: v[keep] for k, v in g.items()} if n_k else {}
    rows_k = g_rows[keep]
    start = start_all[keep]
    end = start + dur_all[keep]
    if source.replaced:
        _utf8_repairs(gk, r, s, rows_k, source.replaced, book)
        top = _clean_json(top)
    names = gk["name"] if n_k else _objects([], 0)
    bad_name = ~_map_unique(names, lambda v: isinstance(v, str), False).astype(bool)
    if bad_name.any():
        book.repair(rows_k[bad_name], "name", "missing or non-text name replaced by '<unnamed>'")
        names = np.where(bad_name, "<unnamed>", names)
    cats = gk["cat"] if n_k else _objects([], 0)
    is_unknown = ~np.isin(cats, list(_GPU_CATS))
    if n_k:
        device, stream, no_stream = _devices_and_streams(gk, is_unknown, col.meta_events)
    else:
        device = stream = np.zeros(0, dtype=np.int64)
        no_stream = np.zeros(0, dtype=bool)
    if no_stream.any():
        book.flag("stream_unknown", f"{int(no_stream.sum())} GPU activities carry no stream (no args.stream, "
                                    f"no numeric tid): stream set to -1")
    kind = opts.classifier.kinds(names, cats)
    if col.odd_args:
        book.flag("args_not_object", f"{col.odd_args} GPU events have 'args' that is not an object: ignored")

    comm = _comm_semantics(gk, kind, names, rows_k, book, n_k)
    corr = _ids(gk["correlation"], rows_k, book, "correlation") if n_k else pd.array([], dtype="Int64")
    launch_us, graph, launch_tid = _launches(r, origin, scale, corr, gk, n_k, comm, s, book)
    dur = dur_all[keep]
    end, trimmed = _repair_overlaps(start, end, stream, device, kind, rows_k, book, opts.overlap_tolerance_us)
    dur = np.where(trimmed, end - start, dur)  # untouched rows keep their recorded duration exactly

    # --- steps and host syncs ----------------------------------------------------------------------
    steps = _steps_table(s, origin, scale, marker, book, opts)
    if steps.empty:
        steps = _fallback_steps(start, end, kind, col, origin, scale, marker, book)
    if not n_k or not np.isin(kind, ("compute", "comm", "memcpy", "memset")).any():
        book.flag("no_gpu_activity", "the trace holds no GPU kernel, copy or fill (a CPU-only trace?)")
    host_syncs = _host_sync_table(r, origin, scale, steps, book, opts)
    ops, links = _ops_table(col.table("ops"), origin, scale, book, opts, bool(source.replaced))
    external_id = _external_ids(gk, rows_k, corr, launch_us, launch_tid, links, book, n_k)

    kernels = pd.DataFrame({
        "rank": np.zeros(n_k, dtype=np.int64),
        "step": _assign_steps(start, steps),
        "stream": stream,
        "start_us": start, "end_us": end, "dur_us": dur,
        "name": _categorical(names),
        "kind": _categorical(kind, _kernel_dtypes()["kind"]),
        "collective": _categorical(comm["collective"], _kernel_dtypes()["collective"]),
        "process_group": _categorical(comm["pg"]),
        "seq": comm["seq"],
        "bytes": comm["bytes"],
        "cuda_graph": graph,
        "device": device, "correlation": corr, "launch_us": launch_us,
        "collective_source": _categorical(comm["source"], _kernel_dtypes()["collective_source"]),
        "external_id": external_id,
    })
    kernels = kernels.sort_values(["rank", "start_us", "end_us", "stream"], kind="stable", ignore_index=True)

    dist = top.get("distributedInfo") if isinstance(top.get("distributedInfo"), dict) else {}
    devices = top.get("deviceProperties")
    metadata = {
        "sha256": sha, "reader_version": READER_VERSION, "format": source.format,
        "platform": _platform(top, r.get("name", _objects([], 0))),
        "distributed_info": dist, "device_properties": devices if isinstance(devices, list) else [],
        "world_size": _small_int(dist.get("world_size")),
        "base_time_ns": int(base_time_ns), "time_unit": unit, "time_origin": origin_kind,
        "display_time_unit": top.get("displayTimeUnit"), "schema_version": top.get("schemaVersion"),
        "trace_name": top.get("traceName"), "events_total": col.offset,
        "events_by_category": dict(sorted(col.cat_counts.items())),
        "window_us": [(col.window[0] - origin) / scale, (col.window[1] - origin) / scale],
        "other": {k: v for k, v in top.items() if k not in (
            "deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceName", "schemaVersion",
            "displayTimeUnit")},
    }
    return _Built(kernels, steps, host_syncs, metadata, ops), book


_NOT_INTEGER_LISTS = re.compile(rb'["{.eEtfn]')  # text, objects, floats, true / false / null


def _json_texts(values: np.ndarray, typed: bool) -> np.ndarray:
    """JSON text of each value (``json.dumps`` separators), None where the value is missing.

    Values are grouped by an exact key (the typed decoder's values by their compact JSON encoding,
    others by ``repr``) and each distinct value is written once: lists of integers (shapes) by
    spacing the compact encoding, anything else by ``json.dumps``.  Escaped invalid UTF-8 bytes
    (lone surrogates, stdlib path only) pass through as they are, for :func:`_clean`.
    """
    n = len(values)
    if not n:
        return _objects([], 0)
    have = ~np.equal(values, None)
    if not have.all():  # most CPU ops carry no shapes (or the trace recorded none): skip them
        out = np.full(n, None, dtype=object)
        if have.any():
            out[have] = _json_texts(values[have], typed)
        return out
    keys = _objects(map(msgspec.json.encode if typed else repr, values), n)
    codes, uniques = pd.factorize(keys)
    first = np.zeros(len(uniques), dtype=np.int64)
    first[codes[::-1]] = np.arange(n)[::-1]  # a row holding each distinct value
    texts = np.empty(len(uniques), dtype=object)
    for j, (key, i) in enumerate(zip(uniques, first, strict=True)):  # distinct values: a handful
        v = values[i]
        if v is None:
            texts[j] = None
        elif typed and not _NOT_INTEGER_LISTS.search(key):
            texts[j] = key.decode().replace(",", ", ")
        else:
            texts[j] = json.dumps(v, ensure_ascii=False)
    return texts[codes]


def _ops_table(o: dict[str, np.ndarray], origin: int, scale: float, book: _Book, opts: _Options,
               replaced: bool) -> tuple[pd.DataFrame, dict[str, np.ndarray] | None]:
    """Build the ``ops`` table (CPU ops with ``Input Dims``); return it with all CPU ops' spans.

    The spans (start, end, thread, External id) locate the op that launched a kernel.
    """
    if not o:
        return empty_ops(), None
    ts, du, ok_all = _times(o, None)
    start_all = _to_us(ts, origin, scale)
    end_all = start_all + du.astype(np.float64) / scale
    ext_all = _ids(o["External id"], o["row"], None, "External id")
    use = ok_all & (end_all >= start_all) & ~np.asarray(pd.isna(ext_all))
    links = {"start": start_all[use], "end": end_all[use], "tid": o["tid"][use],
             "ext": ext_all[use].to_numpy(dtype=np.int64)} if use.any() else None
    has_dims = ~np.equal(o["Input Dims"], None)
    if not has_dims.any():
        return empty_ops(), links
    sub = {k: v[has_dims] for k, v in o.items()}
    start, dur, ok = _timed_rows(sub, book, origin, scale, opts, "CPU op")
    rows = sub["row"][ok]
    ext = _ids(sub["External id"][ok], rows, book, "External id")
    names = sub["name"][ok]
    dims = sub["Input Dims"][ok]  # JSON text already (see _Collector._op)
    types = sub["Input type"][ok]
    if replaced:
        dirty = np.zeros(len(rows), dtype=bool)
        for values in (names, dims, types):
            dirty |= _map_unique(values, lambda v: isinstance(v, str) and bool(_ESCAPED_RE.search(v)),
                                 False).astype(bool)
        names, dims, types = _clean(names), _clean(dims), _clean(types)
        if dirty.any():
            book.repair(rows[dirty], "name,Input Dims,Input type", "invalid UTF-8 bytes replaced by U+FFFD")
    bad_name = ~_map_unique(names, lambda v: isinstance(v, str), False).astype(bool)
    if bad_name.any():
        book.repair(rows[bad_name], "name", "missing or non-text name replaced by '<unnamed>'")
        names = np.where(bad_name, "<unnamed>", names)
    frame = pd.DataFrame({
        "rank": np.zeros(len(rows), dtype=np.int64), "external_id": ext,
        "name": _categorical(names), "start_us": start[ok], "dur_us": dur[ok],
        "input_dims": pd.Series(dims, dtype=object), "input_types": pd.Series(types, dtype=object),
    })
    return frame.sort_values("start_us", kind="stable", ignore_index=True), links


def _parents(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Index of each span's innermost enclosing span (-1 for none); spans sorted by start, end desc.

    The parent is the nearest earlier span that ends no earlier; found by pointer jumping (each
    pass at least doubles the distance skipped), so the passes are logarithmic in the span count.
    """
    cand = np.arange(len(start)) - 1
    while True:
        c = np.maximum(cand, 0)
        open_ = (cand >= 0) & (end[c] < end)
        if not open_.any():
            return cand
        cand[open_] = cand[cand[open_]]


def _enclosing_ids(t: np.ndarray, tid: np.ndarray, links: Mapping[str, np.ndarray]) -> pd.arrays.IntegerArray:
    """External id of the innermost CPU op that encloses time ``t`` on thread ``tid`` (<NA> if none)."""
    n = len(t)
    out = np.zeros(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    q = np.flatnonzero(np.isfinite(t) & ~np.equal(tid, None))
    if not len(q):
        return pd.arrays.IntegerArray(out, ~found)
    try:
        codes, _ = pd.factorize(np.concatenate([tid[q], links["tid"]]))
    except TypeError:  # unhashable thread ids in a malformed trace
        return pd.arrays.IntegerArray(out, ~found)
    lt, at = codes[:len(q)], codes[len(q):]
    for thread in np.unique(lt):  # a handful of host threads
        qi = q[lt == thread]
        aj = np.flatnonzero(at == thread)
        if not len(aj):
            continue
        aj = aj[np.lexsort((-links["end"][aj], links["start"][aj]))]
        s_, e_ = links["start"][aj], links["end"][aj]
        parent = _parents(s_, e_)
        tq = t[qi]
        k = np.searchsorted(s_, tq, side="right") - 1
        while True:  # climb to the first ancestor still open at t (at most the nesting depth)
            up = (k >= 0) & (e_[np.maximum(k, 0)] < tq)
            if not up.any():
                break
            k[up] = parent[k[up]]
        hit = k >= 0
        out[qi[hit]] = links["ext"][aj[k[hit]]]
        found[qi[hit]] = True
    return pd.arrays.IntegerArray(out, ~found)


def _external_ids(gk: Mapping[str, np.ndarray], rows_k: np.ndarray, corr: pd.arrays.IntegerArray,
                  launch_us: np.ndarray, launch_tid: np.ndarray, links: Mapping[str, np.ndarray] | None,
                  book: _Book, n_k: int) -> pd.arrays.IntegerArray:
    """Each kernel's launching CPU op: its ``External id`` arg, else the op enclosing its launch call."""
    if not n_k:
        return pd.array([], dtype="Int64")
    ext = _ids(gk["External id"], rows_k, book, "External id")
    both = ~np.asarray(pd.isna(ext)) & ~np.asarray(pd.isna(corr))
    from_launch = bool(both.any()) and bool(
        (ext[both].to_numpy(dtype=np.int64) == corr[both].to_numpy(dtype=np.int64)).all())
    if from_launch:
        book.flag("external_id_from_launch", "every kernel's 'External id' equals its correlation id (older "
                                             "Kineto): external_id taken from the innermost CPU op enclosing "
                                             "each launch call instead")
        ext = pd.array(np.zeros(n_k, dtype=np.int64), dtype="Int64")
        ext[:] = pd.NA
    missing = np.asarray(pd.isna(ext))
    if links is not None and missing.any():
        idx = np.flatnonzero(missing)
        got = _enclosing_ids(launch_us[idx], launch_tid[idx], links)
        have = ~np.asarray(pd.isna(got))
        if have.any():
            ext[idx[have]] = got[have].to_numpy(dtype=np.int64)
    return ext


_TEXT_KEYS = ("name", "cat", "tid", "Collective name", "dtype", "Process Group Name",
              "Process Group Description")


def _utf8_repairs(gk: dict[str, np.ndarray], r: dict[str, np.ndarray], s: dict[str, np.ndarray],
                  rows_k: np.ndarray, replaced: int, book: _Book) -> None:
    """Replace escaped invalid UTF-8 in text columns by U+FFFD; kept GPU rows touched are repairs."""
    dirty = np.zeros(len(rows_k), dtype=bool)
    fields: list[str] = []
    for key in _TEXT_KEYS:
        if key in gk:
            hit = _map_unique(gk[key], lambda v: isinstance(v, str) and bool(_ESCAPED_RE.search(v)),
                              False).astype(bool)
            if hit.any():
                dirty |= hit
                fields.append(key)
                gk[key] = _clean(gk[key])
    for table in (r, s):
        for key in _TEXT_KEYS:
            if key in table:
                table[key] = _clean(table[key])
    if dirty.any():
        book.repair(rows_k[dirty], ",".join(fields), "invalid UTF-8 bytes replaced by U+FFFD")
    book.flag("invalid_utf8", f"{replaced} undecodable byte(s) replaced by U+FFFD"
              + (f"; {int(dirty.sum())} kept GPU rows affected ({', '.join(fields)})" if dirty.any()
                 else " (none in a kept GPU row)"))


def _format_flags(col: _Collector, source: _Source, book: _Book) -> None:
    if col.not_objects:
        book.read += len(col.not_objects)
        book.reject(col.not_objects, None, "entry of traceEvents is not a JSON object")
    if source.format == "bare_array" or col.legacy_cats:
        layout = "a bare event array" if source.format == "bare_array" else "the object form"
        cats = f"; capitalised categories {sorted(col.legacy_cats)} normalised" if col.legacy_cats else ""
        book.flag("legacy_format", f"legacy trace layout ({layout}{cats})")
    for cat, count in sorted(col.unknown_cats.items()):
        book.flag("unknown_category", f"category {cat!r} is not a known Kineto activity type: its {count} "
                                      f"complete events are kept with kind 'other'")
    paired = {p: c for p, c in col.phase_counts.items() if p in ("B", "E")}
    if paired:
        book.flag("unsupported_phase", f"begin/end events {paired} are not read (only complete 'X' events "
                                       f"are)")


def _comm_semantics(gk: Mapping[str, np.ndarray], kind: np.ndarray, names: np.ndarray, rows_k: np.ndarray,
                    book: _Book, n_k: int) -> dict[str, Any]:
    """Return collective type, bytes, process group and sequence from the kernels' own args."""
    collective = np.full(n_k, "none", dtype=object)
    source = np.full(n_k, "none", dtype=object)
    if not n_k:
        return {"collective": collective, "source": source, "bytes": np.zeros(0),
                "pg": np.zeros(0, dtype=object), "seq": pd.array([], dtype="Int64"),
                "is_comm": np.zeros(0, dtype=bool)}
    comm = kind == "comm"
    raw = gk["Collective name"]
    from_arg, recognised = collective_from_arg(raw)
    unrec = comm & ~np.equal(raw, None) & ~recognised
    if unrec.any():
        values = sorted({str(v) for v in raw[unrec]})
        book.flag("unknown_collective_name", f"'Collective name' values {values} not recognised: collective "
                                             f"taken from the host annotation or the kernel name instead")
    has_arg = comm & recognised
    collective[has_arg] = from_arg[has_arg]
    source[has_arg] = "args"
    nbytes = message_bytes(gk["In msg nelems"], gk["dtype"]).to_numpy(dtype=float, na_value=np.nan)
    unknown_dtype = comm & ~np.equal(gk["In msg nelems"], None) & np.isnan(nbytes)
    if unknown_dtype.any():
        book.flag("unknown_dtype", f"{int(unknown_dtype.sum())} collectives have a dtype of unknown size "
                                   f"({sorted({str(d) for d in gk['dtype'][unknown_dtype]})}): bytes missing")
    copy_bytes = pd.to_numeric(pd.Series(gk["bytes"], dtype=object), errors="coerce").to_numpy(dtype=float)
    is_copy = (kind == "memcpy") | (kind == "memset")
    nbytes = np.where(is_copy, copy_bytes, np.where(comm, nbytes, np.nan))
    pg = np.where(np.equal(gk["Process Group Name"], None), gk["Process Group Description"],
                  gk["Process Group Name"])
    seq = _ids(gk["seq"], rows_k, book, "Seq")
    return {"collective": collective, "source": source, "bytes": nbytes, "pg": pg, "seq": seq,
            "is_comm": comm}


def _launches(r: Mapping[str, np.ndarray], origin: int, scale: float, corr: pd.arrays.IntegerArray,
              gk: Mapping[str, np.ndarray], n_k: int, comm: dict[str, Any], s: Mapping[str, np.ndarray],
              book: _Book) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Launch time and thread of each kernel (by correlation), graph-replay flags, host-annotation semantics.

    Completes ``comm`` in place: collectives still without a source take the innermost enclosing
    host annotation of their launch, then the kernel name; bytes become Int64, process groups text.
    """
    launch_us = np.full(n_k, np.nan)
    launch_tid = np.full(n_k, None, dtype=object)
    graph = gk["graph_arg"].astype(bool).copy() if n_k else np.zeros(0, dtype=bool)
    n_launch = 0
    if r:
        r_ts, _, r_ok = _times(r, None)
        r_start = _to_us(r_ts, origin, scale)
        r_corr = _ids(r["correlation"], r["row"], None, "correlation")
        graph_call = is_graph_launch(r["name"]) & r_ok
        n_launch = int(graph_call.sum())
        valid = r_ok & ~np.asarray(pd.isna(r_corr))
        if n_k and valid.any():
            index = pd.Index(r_corr[valid].to_numpy(dtype=np.int64))
            first = ~index.duplicated(keep="first")
            index, sub = index[first], np.flatnonzero(valid)[first]
            have = ~np.asarray(pd.isna(corr))
            pos = np.full(n_k, -1)
            pos[have] = index.get_indexer(corr[have].to_numpy(dtype=np.int64))
            found = pos >= 0
            launch_us[found] = r_start[sub[pos[found]]]
            launch_tid[found] = r["tid"][sub[pos[found]]]
            graph[found] |= graph_call[sub[pos[found]]]
    if graph.any() or n_launch:
        book.flag("cuda_graph", f"{n_launch} graph launch call(s), {int(graph.sum())} kernel(s) attributed "
                                f"to graph replay: the per-kernel breakdown is less reliable (profilers "
                                f"under-record graph kernels and lose their host linkage)")
    collective, source = comm["collective"], comm["source"]
    nbytes, pg, seq = comm["bytes"], comm["pg"], comm["seq"]
    need = comm["is_comm"] & (source == "none")
    if need.any() and s:
        ann = _host_annotations(s, origin, scale)
        if ann is not None:
            got = _match_annotations(launch_us, launch_tid, need, ann)
            take = need & (got["collective"] != "none")
            collective[take] = got["collective"][take]
            source[take] = "host_annotation"
            fill = take & np.isnan(nbytes) & np.isfinite(got["bytes"])
            nbytes[fill] = got["bytes"][fill]
            fill = take & np.equal(pg, None) & ~np.equal(got["pg"], None)
            pg[fill] = got["pg"][fill]
            fill = take & np.asarray(pd.isna(seq)) & np.isfinite(got["seq"])
            if fill.any():
                seq[fill] = got["seq"][fill].astype(np.int64)
    left = comm["is_comm"] & (source == "none")
    if left.any():
        guess = collective_from_kernel_name(gk["name"][left])
        collective[left] = guess
        source[left] = np.where(guess != "none", "name", "none")
    comm["bytes"] = pd.array(np.where(np.isfinite(nbytes), np.round(nbytes), np.nan),
                             dtype="Float64").astype("Int64")
    comm["pg"] = np.where(np.equal(pg, None), "", pg).astype(str) if n_k else np.zeros(0, dtype=str)
    return launch_us, graph, launch_tid


def _platform(top: Mapping[str, Any], runtime_names: np.ndarray) -> str:
    keys = " ".join(map(str, top)).lower()
    if "roctracer" in keys or "rocm" in keys or "hip_" in keys:
        return "rocm"
    if "cuda" in keys or "cupti" in keys:
        return "cuda"
    runtime = [str(x) for x in pd.unique(pd.Series(runtime_names, dtype=object).dropna())]
    if any(x.startswith("hip") for x in runtime):
        return "rocm"
    if any(x.startswith("cu") for x in runtime):
        return "cuda"
    return "unknown"


def _repair_overlaps(start: np.ndarray, end: np.ndarray, stream: np.ndarray, device: np.ndarray,
                     kind: np.ndarray, rows: np.ndarray, book: _Book,
                     tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Trim rounding overlaps between consecutive activities on one stream; flag larger ones.

    Returns the new end times and a mask of the rows whose end was moved.
    """
    trimmed = np.zeros(len(start), dtype=bool)
    idx = np.flatnonzero((stream >= 0) & np.isin(kind, ("compute", "comm", "memcpy", "memset")))
    if len(idx) < 2:
        return end, trimmed
    order = idx[np.lexsort((end[idx], start[idx], stream[idx], device[idx]))]
    prev, nxt = order[:-1], order[1:]
    same = (device[prev] == device[nxt]) & (stream[prev] == stream[nxt])
    over = np.where(same, end[prev] - start[nxt], 0.0)
    small = (over > 0) & (over <= tol)
    large = over > tol
    if small.any():
        end = end.copy()
        p, q = prev[small], nxt[small]
        book.repair(rows[p], "dur", [f"ns_rounding_overlap: end moved back {o * 1000:.4g} ns to the start of "
                                     f"the next activity on stream {st}"
                                     for o, st in zip(over[small], stream[p], strict=True)])
        end[p] = np.maximum(start[q], start[p])
        trimmed[p] = True
    if large.any():
        book.flag("stream_overlap", f"{int(large.sum())} activities overlap the next one on the same stream "
                                    f"by more than {tol:g} µs (largest {float(over[large].max()):.6g} µs): "
                                    f"kept as recorded")
    return end, trimmed


def _host_annotations(s: Mapping[str, np.ndarray], origin: int, scale: float) -> dict[str, Any] | None:
    """Host collective annotations: ``nccl:<name>`` spans and ``record_param_comms`` with args."""
    names = s["name"]
    is_nccl = _map_unique(names, lambda v: isinstance(v, str) and v.startswith(("nccl:", "rccl:")),
                          False).astype(bool)
    is_param = (names == "record_param_comms") & ~np.equal(s["Collective name"], None)
    ts, du, ok = _times(s, None)
    use = np.flatnonzero(ok & (is_nccl | is_param))
    if not len(use):
        return None
    coll = np.full(len(use), "none", dtype=object)
    from_arg, recognised = collective_from_arg(s["Collective name"][use])
    coll[recognised] = from_arg[recognised]
    nccl = is_nccl[use]
    coll[nccl] = collective_from_annotation(names[use][nccl])
    b_arg = message_bytes(s["In msg nelems"][use], s["dtype"][use]).to_numpy(dtype=float, na_value=np.nan)
    b_shape = shape_bytes(list(s["Input Dims"][use]), list(s["Input type"][use]))
    nbytes = np.where(np.isnan(b_arg), b_shape.to_numpy(dtype=float, na_value=np.nan), b_arg)
    pg = np.where(np.equal(s["Process Group Name"][use], None), s["Process Group Description"][use],
                  s["Process Group Name"][use])
    seq = pd.to_numeric(pd.Series(s["seq"][use], dtype=object), errors="coerce").to_numpy(dtype=float)
    start = _to_us(ts, origin, scale)[use]
    return {"start": start, "end": start + du[use].astype(np.float64) / scale, "tid": s["tid"][use],
            "collective": coll, "bytes": nbytes, "pg": pg, "seq": seq, "param": is_param[use]}


def _match_annotations(launch_us: np.ndarray, launch_tid: np.ndarray, need: np.ndarray,
                       ann: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """For each launch, the latest-starting host collective annotation on its thread that encloses it.

    ``nccl:<name>`` annotations are matched first; a ``record_param_comms`` carrying a
    ``Collective name`` argument (explicit) then overrides them where it encloses the launch.
    """
    n = len(launch_us)
    out = {"collective": np.full(n, "none", dtype=object), "bytes": np.full(n, np.nan),
           "pg": np.full(n, None, dtype=object), "seq": np.full(n, np.nan)}
    q = np.flatnonzero(need & np.isfinite(launch_us) & ~np.equal(launch_tid, None))
    if not len(q):
        return out
    try:
        codes, _ = pd.factorize(np.concatenate([launch_tid[q], ann["tid"]]))
    except TypeError:
        return out
    lt, at = codes[:len(q)], codes[len(q):]
    t = launch_us[q]
    for explicit in (False, True):
        for thread in np.unique(lt):  # a handful of host threads
            qi = np.flatnonzero(lt == thread)
            aj = np.flatnonzero((ann["param"] == explicit) & (at == thread))
            if not len(aj):
                continue
            aj = aj[np.argsort(ann["start"][aj], kind="stable")]
            k = np.searchsorted(ann["start"][aj], t[qi], side="right") - 1
            j = aj[np.maximum(k, 0)]
            good = (k >= 0) & (ann["end"][j] >= t[qi]) & (ann["collective"][j] != "none")
            target, j = q[qi[good]], j[good]
            out["collective"][target] = ann["collective"][j]
            out["bytes"][target] = ann["bytes"][j]
            out["pg"][target] = ann["pg"][j]
            out["seq"][target] = ann["seq"][j]
    return out


def _marker_number(marker: re.Pattern[str] | None, value: Any) -> int | None:
    if marker is None or not isinstance(value, str):
        return None
    m = marker.search(value)
    if m and m.groups() and m.group(1) is not None and m.group(1).isdigit():
        return int(m.group(1))
    return None


def _steps_table(s: Mapping[str, np.ndarray], origin: int, scale: float, marker: re.Pattern[str] | None,
                 book: _Book, opts: _Options) -> pd.DataFrame:
    """Step windows from ``ProfilerStep#N`` annotations, else from annotations matching the marker."""
    if not s:
        return empty_steps()
    names = s["name"]
    numbers = _map_unique(names, lambda v: (int(m.group(1)) if isinstance(v, str)
                                            and (m := _STEP_RE.match(v)) else None), None)
    is_step = ~np.equal(numbers, None)
    source = "profiler_step"
    if not is_step.any() and marker is not None:
        is_step = _map_unique(names, lambda v: isinstance(v, str) and marker.search(v) is not None,
                              False).astype(bool)
        source = "marker"
    if not is_step.any():
        return empty_steps()
    sub = {k: v[is_step] for k, v in s.items()}
    start, dur, ok = _timed_rows(sub, book, origin, scale, opts, "step annotation")
    if not ok.any():
        return empty_steps()
    start, dur = start[ok], dur[ok]
    if source == "profiler_step":
        number = numbers[is_step][ok].astype(np.int64)
    else:
        number = np.empty(len(start), dtype=np.int64)
        number[np.argsort(start, kind="stable")] = np.arange(len(start))
        captured = _map_unique(sub["name"][ok], lambda v: _marker_number(marker, v), None)
        if not np.equal(captured, None).any() and len(set(captured.tolist())) == len(captured):
            number = captured.astype(np.int64)
        book.flag("steps_from_markers", f"no ProfilerStep#N annotation: {len(start)} step windows from "
                                        f"annotations matching {opts.step_marker!r}")
    return _step_frame(number, start, start + dur, source, book)


def _step_frame(number: np.ndarray, start: np.ndarray, end: np.ndarray, source: str,
                book: _Book | None) -> pd.DataFrame:
    """Step windows, one per step number (a step annotated twice is their union), sorted by start."""
    steps, inverse, counts = np.unique(number, return_inverse=True, return_counts=True)
    if book is not None and (counts > 1).any():
        book.flag("duplicate_step_annotation", f"steps {steps[counts > 1].tolist()} are annotated more than "
                                               f"once: each window is their union")
    lo = np.full(len(steps), np.inf)
    hi = np.full(len(steps), -np.inf)
    np.minimum.at(lo, inverse, start)
    np.maximum.at(hi, inverse, end)
    order = np.argsort(lo, kind="stable")
    steps, lo, hi = steps[order].astype(np.int64), lo[order], hi[order]
    if book is not None and (lo[1:] < hi[:-1]).any():
        book.flag("overlapping_steps", "step windows overlap: an activity belongs to the latest window that "
                                       "starts at or before it")
    n = len(steps)
    dtypes = _step_dtypes()
    return pd.DataFrame({
        "rank": np.zeros(n, dtype=np.int64), "step": pd.arrays.IntegerArray(steps, np.zeros(n, dtype=bool)),
        "start_us": lo, "end_us": hi,
        "source": pd.Categorical.from_codes(np.full(n, STEP_SOURCES.index(source)), dtype=dtypes["source"]),
    }, copy=False)


def _fallback_steps(start: np.ndarray, end: np.ndarray, kind: np.ndarray, col: _Collector, origin: int,
                    scale: float, marker: re.Pattern[str] | None, book: _Book) -> pd.DataFrame:
    """One documented window when the trace has no step annotation (never an empty table)."""
    work = np.isin(kind, ("compute", "comm", "memcpy", "memset"))
    also = " and no annotation matching the step marker" if marker is not None else ""
    if work.any():
        lo, hi, source = float(start[work].min()), float(end[work].max()), "gpu_span"
        book.flag("no_profiler_step", f"no ProfilerStep#N annotation{also}: step 0 is the span from the "
                                      f"first GPU activity's start to the last one's end")
    else:
        lo, hi, source = (col.window[0] - origin) / scale, (col.window[1] - origin) / scale, "trace_span"
        book.flag("no_profiler_step", f"no ProfilerStep#N annotation{also} and no GPU activity: step 0 is "
                                      f"the span of all timed events")
    return _step_frame(np.zeros(1, dtype=np.int64), np.array([lo]), np.array([hi]), source, None)


def _host_sync_table(r: Mapping[str, np.ndarray], origin: int, scale: float, steps: pd.DataFrame,
                     book: _Book, opts: _Options) -> pd.DataFrame:
    if not r:
        return empty_host_syncs()
    sync_kind, blocking = host_sync_kinds(r["name"])
    is_sync = ~np.equal(sync_kind, None)
    if not is_sync.any():
        return empty_host_syncs()
    sub = {k: v[is_sync] for k, v in r.items()}
    start, dur, ok = _timed_rows(sub, book, origin, scale, opts, "sync call")
    order = np.flatnonzero(ok)
    order = order[np.argsort(start[order], kind="stable")]
    tids = _map_unique(sub["tid"][order], _small_int, None)
    missing = np.equal(tids, None)
    return pd.DataFrame({
        "rank": np.zeros(len(order), dtype=np.int64),
        "step": _assign_steps(start[order], steps),
        "tid": pd.arrays.IntegerArray(np.where(missing, 0, tids).astype(np.int64), missing),
        "start_us": start[order], "end_us": start[order] + dur[order], "dur_us": dur[order],
        "name": _categorical(sub["name"][order].astype(str)),
        "sync_kind": _categorical(sync_kind[is_sync][order].astype(str)),
        "blocking": blocking[is_sync][order].astype(bool),
    }, copy=False)


# ---------------------------------------------------------------------------------------------------
# Cache: one Parquet file per (content, options, reader version)
# ---------------------------------------------------------------------------------------------------


_TABLES = ("kernels", "steps", "host_syncs", "ops")


def _column_to_arrow(pa: Any, values: pd.Series, dtype: Any, length: int) -> dict[str, Any]:
    """One table column as Arrow arrays padded with nulls to ``length`` rows.

    A categorical becomes its int32 codes (null where missing); a free-form categorical also
    stores its categories, in order, as a second string column -- exact, unused ones included.
    """
    n = len(values)
    pad = length - n
    mask = np.zeros(length, dtype=bool)
    mask[n:] = True
    out: dict[str, Any] = {}
    if isinstance(dtype, pd.CategoricalDtype) or dtype == "category":
        codes = np.zeros(length, dtype=np.int32)
        codes[:n] = values.cat.codes.to_numpy()
        out[""] = pa.array(codes, mask=mask | (codes < 0))
        if not isinstance(dtype, pd.CategoricalDtype):
            cats = values.cat.categories.to_numpy(dtype=object).tolist()
            out[".categories"] = pa.array(cats + [None] * (length - len(cats)), type=pa.string())
    elif dtype == "Int64":
        data = np.zeros(length, dtype=np.int64)
        data[:n] = values.to_numpy(dtype=np.int64, na_value=0)
        mask[:n] = values.isna().to_numpy()
        out[""] = pa.array(data, mask=mask)
    elif dtype == "object":
        out[""] = pa.array(values.tolist() + [None] * pad, type=pa.string())
    else:
        data = np.zeros(length, dtype=dtype)
        data[:n] = values.to_numpy(dtype=dtype)
        out[""] = pa.array(data, mask=mask) if pad else pa.array(data)
    return out


def _column_from_arrow(table: Any, name: str, dtype: Any, n: int) -> Any:
    """Return the first ``n`` rows of a column written by :func:`_column_to_arrow`, as pandas."""
    chunked = table.column(name)
    col = (chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()).slice(0, n)
    if isinstance(dtype, pd.CategoricalDtype) or dtype == "category":
        codes = col.fill_null(-1).to_numpy(zero_copy_only=False) if col.null_count else col.to_numpy()
        if not isinstance(dtype, pd.CategoricalDtype):
            cats = pd.Index(table.column(name + ".categories").drop_null().to_pylist(), dtype="str")
            # written from a valid categorical: skip re-validating the categories (a third of the cost)
            fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)
            dtype = fast(cats, False) if fast is not None else pd.CategoricalDtype(cats)
        return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)
    if dtype == "Int64":
        if not col.null_count:
            return pd.arrays.IntegerArray(col.to_numpy(), np.zeros(n, dtype=bool))
        mask = col.is_null().to_numpy(zero_copy_only=False)
        return pd.arrays.IntegerArray(col.fill_null(0).to_numpy(), mask)
    if dtype == "object":
        return pd.Series(col.to_numpy(zero_copy_only=False), dtype=object)  # a bare array would infer str
    return col.to_numpy(zero_copy_only=False)


def _cache_path(cache_dir: Path, sha: str, opts: _Options) -> Path:
    return cache_dir / f"{sha}-{opts.digest()}-r{READER_VERSION}.parquet"


def _write_cache(path: Path, built: _Built, book: _Book) -> None:
    """Write all four tables to one Parquet file (columns ``table.column``, padded to one length).

    Metadata and ledger travel as JSON in the file's key-value metadata.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    frames = {t: getattr(built, t) for t in _TABLES}
    length = max(len(f) for f in frames.values())
    arrays: dict[str, Any] = {}
    for t, frame in frames.items():
        for c, d in _dtypes(t).items():
            for suffix, arr in _column_to_arrow(pa, frame[c], d, length).items():
                arrays[f"{t}.{c}{suffix}"] = arr
    payload = {
        "lengths": {t: len(f) for t, f in frames.items()},
        "metadata": built.metadata, "read": book.read,
        "rejected": [[r, f, t] for r, (f, t) in book.rejected.items()],
        "repaired": [[r, items] for r, items in book.repaired.items()],
        "flags": [[f.code, f.message] for f in book.flags],
    }
    table = pa.table(arrays).replace_schema_metadata(
        {b"fleetlib.trace": json.dumps(payload, default=str).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    # uncompressed, plain-encoded, no statistics: a larger file that decodes several times faster
    pq.write_table(table, tmp, compression="none", use_dictionary=False, write_statistics=False)
    os.replace(tmp, path)


def _read_cache(path: Path, file: str) -> tuple[_Built, _Book] | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(pa.BufferReader(path.read_bytes())).read(use_threads=False)
        payload = json.loads(table.schema.metadata[b"fleetlib.trace"])
        frames = {}
        for t in _TABLES:
            n = int(payload["lengths"][t])
            dtypes = _dtypes(t)
            columns = {c: _column_from_arrow(table, f"{t}.{c}", d, n) for c, d in dtypes.items()} if n else {}
            frames[t] = pd.DataFrame(columns, copy=False) if n else _empty(dtypes)
        book = _Book(file)
        book.read = int(payload["read"])
        book.rejected = {int(r): (f, t) for r, f, t in payload["rejected"]}
        book.repaired = {int(r): [(f, t) for f, t in items] for r, items in payload["repaired"]}
        book.flags = [TraceFlag(c, m, file) for c, m in payload["flags"]]
    except Exception:  # a damaged or foreign cache entry is ignored and rewritten
        return None
    return _Built(frames["kernels"], frames["steps"], frames["host_syncs"], payload["metadata"],
                  frames["ops"]), book


# ---------------------------------------------------------------------------------------------------
# Public readers
# ---------------------------------------------------------------------------------------------------


def _options(classifier: Classifier | None, step_marker: str | None, time_unit: str, max_event_us: float,
             overlap_tolerance_us: float) -> _Options:
    if classifier is None:
        classifier = Classifier()
    elif not isinstance(classifier, Classifier):
        raise DomainError(f"classifier must be a fleetlib.program.classify.Classifier; got "
                          f"{type(classifier).__name__}")
    if time_unit not in ("auto", "us", "ns"):
        raise DomainError(f"time_unit must be 'auto', 'us' or 'ns'; got {time_unit!r}")
    if step_marker is not None:
        if not isinstance(step_marker, str) or not step_marker:
            raise DomainError(f"step_marker must be a non-empty regular expression; got {step_marker!r}")
        try:
            re.compile(step_marker)
        except re.error as exc:
            raise DomainError(f"step_marker {step_marker!r} is not a valid regular expression: "
                              f"{exc}") from exc
    check_positive("max_event_us", max_event_us)
    check_nonnegative("overlap_tolerance_us", overlap_tolerance_us)
    return _Options(classifier, step_marker, time_unit, float(max_event_us), float(overlap_tolerance_us))


def _resolve_rank(path: Path, metadata: Mapping[str, Any], rank: int | None, book: _Book) -> tuple[int, str]:
    dist = metadata.get("distributed_info") or {}
    raw = dist.get("rank") if isinstance(dist, dict) else None
    content = _small_int(raw)
    if content is not None and content < 0:
        content = None
    if raw is not None and content is None:
        book.flag("invalid_distributed_rank", f"distributedInfo.rank is {raw!r}, not a rank: ignored")
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 0:
            raise DomainError(f"rank must be an integer >= 0; got {rank!r}")
        if content is not None and content != rank:
            book.flag("rank_override", f"rank {rank} given explicitly; the trace's distributedInfo says "
                                       f"{content}")
        elif content is None:
            book.flag("rank_from_mapping", f"no distributedInfo.rank: rank {rank} from the explicit mapping")
        return int(rank), "explicit"
    if content is not None:
        return content, "distributedInfo"
    named = rank_from_file_name(path)
    if named is not None:
        book.flag("rank_from_file_name", f"no distributedInfo.rank: rank {named} taken from the file name")
        return named, "file_name"
    book.flag("rank_assumed_zero", "no distributedInfo.rank, no rank in the file name and no mapping: rank 0 "
                                   "assumed (pass rank= or ranks= to say otherwise)")
    return 0, "assumed"


def read_trace(path: PathLike, *, cache: bool = True, rank: int | None = None,
               cache_dir: PathLike | None = None, classifier: Classifier | None = None,
               step_marker: str | None = None, time_unit: str = "auto",
               max_event_us: float = DEFAULT_MAX_EVENT_US,
               overlap_tolerance_us: float = DEFAULT_OVERLAP_TOLERANCE_US) -> TraceRead:
    """Read one Kineto / PyTorch profiler trace file (one rank) into the canonical tables.

    Parameters
    ----------
    path
        A Chrome-trace JSON file, gzipped or not (recognised by its bytes, not its name): the object
        form ``{"traceEvents": [...], ...}`` or the 2021 bare array of events.
    cache
        Use and fill the Parquet cache (keyed by the SHA-256 of the file's bytes, the reader version
        and the options below).
    rank
        The rank to give the rows; overrides ``distributedInfo.rank`` (flagged when they differ).
        Without it the rank is ``distributedInfo.rank``, else the number in the file name (flagged),
        else 0 (flagged).
    cache_dir
        Cache directory (default :func:`default_cache_dir`).
    classifier
        Name patterns for communication, copy and fill kernels (default :class:`Classifier`).
    step_marker
        A regular expression for user annotations to use as step windows when the trace has no
        ``ProfilerStep#N`` (e.g. ``r"^execute_model"``); a numeric first group numbers the steps.
    time_unit
        ``"auto"`` (nanoseconds recognised by magnitude), ``"us"`` or ``"ns"``.
    max_event_us
        Longest credible activity (µs); longer ones are rejected as corrupt.
    overlap_tolerance_us
        Largest same-stream overlap (µs) treated as timestamp rounding and trimmed.

    Returns
    -------
    TraceRead
        The kernel, step, host-sync and CPU-operator (``ops``) tables, metadata and ledger.

    Raises
    ------
    InputError
        The file is missing, a truncated or corrupt gzip stream, invalid JSON (line and column
        named), or holds no timed event.
    DomainError
        An option is out of its domain.

    Examples
    --------
    >>> tr = read_trace("data/traces/dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz",
    ...                 cache=False)  # doctest: +SKIP
    >>> tr.kernels.groupby("kind", observed=True)["dur_us"].sum()  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    p = Path(path)
    opts = _options(classifier, step_marker, time_unit, max_event_us, overlap_tolerance_us)
    file = str(p)
    raw = _load_bytes(p)
    sha = hashlib.sha256(raw).hexdigest()
    cpath = _cache_path(Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir(),
                        sha, opts)
    hit = _read_cache(cpath, file) if cache and cpath.is_file() else None
    if hit is None:
        collecting = gc.isenabled()
        gc.disable()  # decoding builds many containers and no cycles: collections would only cost time
        try:
            held = [raw]
            del raw  # _parse drops the compressed bytes once they are decompressed
            built, book = _parse(held, file, sha, opts)
        finally:
            if collecting:
                gc.enable()
        if cache:
            try:
                _write_cache(cpath, built, book)
            except OSError as exc:
                book.flag("cache_not_written", f"could not write the cache file {cpath} ({exc})")
    else:
        built, book = hit
    r, source = _resolve_rank(p, built.metadata, rank, book)
    metadata = {**built.metadata, "rank": r, "rank_source": source, "file": file}
    for frame in (built.kernels, built.steps, built.host_syncs, built.ops):
        frame["rank"] = np.full(len(frame), r, dtype=np.int64)
    ledger = book.ledger()
    ledger.flags = [TraceFlag(f.code, f.message, f.file, r) for f in ledger.flags]
    return TraceRead(p, r, built.kernels, built.steps, built.host_syncs, metadata, ledger, hit is not None,
                     time.perf_counter() - t0, built.ops)


def _progress(items: Iterable[Any], enabled: bool, total: int) -> Iterable[Any]:
    if not enabled:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the bar is a convenience: reading works without it
        return items
    return tqdm(items, desc="traces", unit="file", total=total)


def _read_all(files: list[Path], kwargs: list[dict[str, Any]], progress: bool, errors: str,
              client: Any) -> tuple[list[TraceRead], TraceLedger]:
    """Read every file, serially or as one Dask task per file; return the reads in file order.

    An :class:`InputError` raises (``errors="raise"``) or becomes a rejected ``file`` row.
    """
    results: list[TraceRead | InputError | None] = [None] * len(files)
    if client is None:
        for i in _progress(range(len(files)), progress, len(files)):
            try:
                results[i] = read_trace(files[i], **kwargs[i])
            except InputError as exc:
                if errors == "raise":
                    raise
                results[i] = exc
    else:
        from distributed import as_completed

        futures = [client.submit(read_trace, f, pure=False, **kw)
                   for f, kw in zip(files, kwargs, strict=True)]
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for fut in _progress(as_completed(futures), progress, len(futures)):
                i = index[fut.key]
                try:
                    results[i] = fut.result()
                except InputError as exc:
                    if errors == "raise":
                        raise
                    results[i] = exc
        finally:
            client.cancel([f for f in futures if not f.done()])
    reads: list[TraceRead] = []
    failures = TraceLedger()
    for p, res in zip(files, results, strict=True):
        if isinstance(res, TraceRead):
            reads.append(res)
        else:
            failures.read += 1
            failures.reject(str(p), getattr(res, "row", None), "file", str(res))
    return reads, failures


def _concat(frames: list[pd.DataFrame], empty: pd.DataFrame, free_categories: Sequence[str]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty
    out = pd.concat(frames, ignore_index=True)
    for c in free_categories:  # categories that differ between ranks: union them
        if not isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = out[c].astype("category")
    return out


def read_traces(paths_or_dir: PathLike | Iterable[PathLike], *, cache: bool = True, progress: bool = True,
                ranks: Mapping[str, int] | None = None, cache_dir: PathLike | None = None,
                errors: str = "raise", classifier: Classifier | None = None, step_marker: str | None = None,
                time_unit: str = "auto", max_event_us: float = DEFAULT_MAX_EVENT_US,
                overlap_tolerance_us: float = DEFAULT_OVERLAP_TOLERANCE_US, client: Any = None) -> TraceSet:
    """Read many trace files (one per rank), one at a time or in parallel on Dask, onto one time base.

    Parameters
    ----------
    paths_or_dir
        A directory (its ``*.json`` / ``*.json.gz`` files), a file, or an iterable of either.
    cache
        Use and fill the Parquet cache.
    progress
        Show a progress bar over files (tqdm, when installed).
    ranks
        Explicit rank per file, keyed by path or by file name; overrides ``distributedInfo``.
    cache_dir
        Cache directory (default :func:`default_cache_dir`).
    errors
        ``"raise"`` (default): an unreadable file raises :class:`fleetlib.quality.InputError`.
        ``"skip"``: it becomes a rejected row (field ``file``) of the merged ledger and the other
        files are read.
    classifier, step_marker, time_unit, max_event_us, overlap_tolerance_us
        As in :func:`read_trace`.
    client
        A ``distributed.Client``: each file becomes one task (:func:`read_trace` on a worker, which
        also reads and fills the cache there -- a shared cache directory lets workers and later
        serial reads reuse it), gathered as they complete with the same progress bar; the merge,
        time-base shift and flags are those of the serial path, so the result is identical.
        None (default) reads the files one at a time in this process.

    Returns
    -------
    TraceSet
        All ranks' tables on the earliest ``base_time_ns`` of the set, metadata per rank and the
        merged ledger; flags ``missing_ranks`` when fewer ranks than ``world_size`` were read.

    Raises
    ------
    InputError
        Two files claim the same rank (the message names them; pass ``ranks=`` to resolve), or no
        file could be read.
    DomainError
        ``errors`` is not ``"raise"`` or ``"skip"``, ``client`` has no ``submit`` method, or no
        file was given.
    """
    if errors not in ("raise", "skip"):
        raise DomainError(f"errors must be 'raise' or 'skip'; got {errors!r}")
    if client is not None and not callable(getattr(client, "submit", None)):
        raise DomainError(f"client must be a distributed.Client (or None); got {type(client).__name__}")
    files = trace_files(paths_or_dir)
    mapping = {str(k): int(v) for k, v in (ranks or {}).items()}
    _options(classifier, step_marker, time_unit, max_event_us, overlap_tolerance_us)  # fail before any task
    common = {"cache": cache, "cache_dir": cache_dir, "classifier": classifier, "step_marker": step_marker,
              "time_unit": time_unit, "max_event_us": max_event_us,
              "overlap_tolerance_us": overlap_tolerance_us}
    kwargs = [{**common, "rank": mapping.get(str(p), mapping.get(p.name))} for p in files]
    reads, failures = _read_all(files, kwargs, progress, errors, client)
    if not reads:
        raise InputError(f"none of the {len(files)} trace files could be read", file=str(files[0]))
    by_rank: dict[int, list[str]] = {}
    for tr in reads:
        by_rank.setdefault(tr.rank, []).append(str(tr.path))
    dups = {r: fs for r, fs in by_rank.items() if len(fs) > 1}
    if dups:
        text = "; ".join(f"rank {r}: {', '.join(fs)}" for r, fs in sorted(dups.items()))
        raise InputError(f"duplicate ranks ({text}); expected one file per rank -- pass ranks={{file: rank}} "
                         f"to say which is which", file=dups[min(dups)][0], field="rank")
    ledger = TraceLedger()
    for tr in reads:
        ledger.extend(tr.ledger)
    ledger.extend(failures)
    base = min(int(tr.metadata["base_time_ns"]) for tr in reads)
    kernels, steps, syncs, ops = [], [], [], []
    for tr in reads:
        shift = (int(tr.metadata["base_time_ns"]) - base) / 1000.0
        k, s, h, o = tr.kernels, tr.steps, tr.host_syncs, tr.ops
        if shift:
            k = k.assign(start_us=k["start_us"] + shift, end_us=k["end_us"] + shift,
                         launch_us=k["launch_us"] + shift)
            s = s.assign(start_us=s["start_us"] + shift, end_us=s["end_us"] + shift)
            h = h.assign(start_us=h["start_us"] + shift, end_us=h["end_us"] + shift)
            o = o.assign(start_us=o["start_us"] + shift)
        kernels.append(k)
        steps.append(s)
        syncs.append(h)
        ops.append(o)
    shifted = sum(int(tr.metadata["base_time_ns"]) != base for tr in reads)
    if shifted:
        ledger.flag("time_base_shifted", f"{shifted} file(s) moved onto the common time base {base} ns (no "
                                         f"clock-skew correction)")
    sizes = {tr.metadata.get("world_size") for tr in reads} - {None}
    if len(sizes) > 1:
        ledger.flag("world_size_mismatch", f"the files disagree on world_size: {sorted(sizes)}")
    if sizes:
        world = max(sizes)
        missing = sorted(set(range(world)) - set(by_rank))
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            ledger.flag("missing_ranks", f"{len(by_rank)} of {world} ranks read (missing {len(missing)}: "
                                         f"{shown}); cross-rank results cover the ranks read only")
    k_all = _concat(kernels, empty_kernels(), ("name", "process_group"))
    k_all = k_all.sort_values(["rank", "start_us", "end_us", "stream"], kind="stable", ignore_index=True)
    s_all = _concat(steps, empty_steps(), ()).sort_values(["rank", "start_us"], ignore_index=True)
    h_all = _concat(syncs, empty_host_syncs(), ("name", "sync_kind")).sort_values(
        ["rank", "start_us"], kind="stable", ignore_index=True)
    o_all = _concat(ops, empty_ops(), ("name",)).sort_values(["rank", "start_us"], kind="stable",
                                                             ignore_index=True)
    return TraceSet(k_all, s_all, h_all, {tr.rank: tr.metadata for tr in reads}, ledger, base, reads, o_all)


def _timed_rows(sub: dict[str, np.ndarray], book: _Book, origin: Any, scale: float, opts: _Options,
                what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Count ``sub``'s rows as read; return start (µs), duration (µs) and the rows still valid.

    Rows with a negative duration, or one longer than ``opts.max_event_us``, are rejected in the
    ledger with ``what`` naming the kind of event.
    """
    rows = sub["row"]
    book.read += len(rows)
    ts, du, ok = _times(sub, book)
    start = _to_us(ts, origin, scale)
    dur = du.astype(np.float64) / scale
    neg = ok & (dur < 0)
    if neg.any():
        book.reject(rows[neg], "dur", f"{what} with a negative duration")
    ok &= ~neg
    long_ = ok & (dur > opts.max_event_us)
    if long_.any():
        book.reject(rows[long_], "dur", f"{what} longer than max_event_us={opts.max_event_us:g}")
    return start, dur, ok & ~long_
