"""Read PyTorch profiler (Kineto) Chrome-trace JSON into the canonical kernel and step tables.

One file is one rank.  :func:`read_trace` reads a file, :func:`read_traces` a directory or list of
files (one rank at a time with a progress bar, or as Dask tasks of a few files each given a
``distributed.Client``), both with a cache keyed by the file's content.  What comes back:

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
    ``collective_source`` (category: ``args``, ``host_annotation``, ``name`` or ``none``),
    ``external_id`` (Int64: the ``External id`` of the innermost CPU op that launched it, the key
    into ``ops``; see *Operators*), ``comm_rule`` (category: the rule that made it
    communication, ``metadata:Collective name``, ``launcher:<name of the launching span>`` or
    ``name:<pattern>``; ``""`` otherwise) and ``classified_by`` (category: ``metadata``,
    ``launcher``, ``name`` or ``none``, see *Classification*).  Sorted by rank, start, end, stream.

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
``kind`` and ``collective`` come from :mod:`fleetlib.program.classify`, by three rules in order
(``classified_by`` says which decided):

1. ``metadata`` -- a kernel whose own ``Collective name`` argument names a collective is ``comm``
   (``comm_rule`` ``metadata:Collective name``) whatever its name says;
2. ``launcher`` -- else, a kernel whose launch call (found by correlation) lies inside a CPU op,
   user annotation or Python function whose name says a collective
   (:func:`~fleetlib.program.classify.collective_from_launcher`: all-reduce, all-gather,
   reduce-scatter, all-to-all, send/recv, broadcast, expert-parallel dispatch / combine; the
   innermost such span on the launching thread) is ``comm`` (``comm_rule`` ``launcher:<name>``),
   unless a PyTorch operator (an ``aten::`` CPU op saying no collective) nested in that span encloses
   the launch: then it is that operator's own work (a copy-in, a permute);
3. ``name`` -- else the configurable name patterns; such kernels are flagged
   ``comm_by_name_only`` (their count, time and commonest names): a name list lags the libraries.

The spans read as launchers are read beside the tables; the ledger's ``unused`` counts of their
categories are as before.
A communication kernel's collective type, bytes, process group and sequence number are taken from
its own args (``Collective name``, ``In msg nelems`` x ``dtype``, ``Process Group Name``, ``Seq``);
when it has none (older PyTorch), from the host annotation that encloses its launch on the
launching thread (``record_param_comms`` with a ``Collective name``, else ``nccl:<collective>``
with its ``Input Dims`` / ``Input type``, else the launcher of rule 2); only then from the kernel
name.  So an NCCL
``SendRecv`` kernel launched inside ``nccl:all_to_all`` is an ``alltoall`` (NCCL runs all-to-all
as grouped send/receive), and ``collective_source`` says which source decided.  Kernels launched
by a ``cudaGraphLaunch`` / ``hipGraphLaunch`` call (or carrying a graph id) have ``cuda_graph``
True and the trace is flagged: profilers under-record graph kernels, so a kernel-based breakdown
of such a trace is less reliable.

Ledger and flags
----------------
The ledger is :class:`fleetlib.quality.Ledger` (its flags :class:`fleetlib.quality.Flag`), kept
per file by a
:class:`fleetlib.quality.RowBook`.  Every entry of ``traceEvents`` is one record, so ``ledger.read``
is the file's event count and ``read == kept + repaired + rejected``; a row is the entry's position
in ``traceEvents`` counting from 1 (for a JSON syntax error, the :class:`InputError` row is the
line).  Events no table is built from are kept and counted by kind in ``ledger.unused``: by phase
(``metadata`` -- read only to name GPUs and streams --, ``flow``, ``instant``, ``counter``,
``begin_end``, ``async`` ...; ``no_phase``) and, for complete events, ``complete:<category>`` where
the category is one no table reads (``python_function``, ``gpu_user_annotation``, ``Trace``) or an
annotation is neither a step nor a collective.  Complete events of the runtime and CPU-operator
categories are used (launch times, launching operators) and are not ``unused``.  Entries of
``traceEvents`` that are not JSON objects are rejected, and so are events whose ``ph`` or ``cat`` is a
JSON array or object (nothing says what such an event is).  Rejected: a missing or non-numeric ``ts`` /
``dur``, a negative duration, or a duration above ``max_event_us`` (default one hour: no profiler
window records one GPU activity that long; corrupt CUPTI records show durations of days or more)
-- of a GPU activity, step annotation, host sync call or CPU op with ``Input Dims``.
Repaired (one entry per row, naming the repair): overlaps of at most ``overlap_tolerance_us``
(default 1 µs) between consecutive activities on one stream -- a stream runs one activity at a
time, so this is timestamp rounding (pytorch#122425) -- by ending the earlier activity where the
next begins (``ns_rounding_overlap``) -- and on ROCm traces larger same-stream overlaps too
(``rocm_stream_overlap_clipped``, flag ``stream_overlap_clipped`` with their count and total);
numeric text converted to numbers; invalid UTF-8 bytes
replaced by U+FFFD, and so is a lone surrogate escape (a JSON escape of U+D800-U+DFFF without its
Decoding and cache
------------------
A file is read whole (gzip, recognised by its magic bytes, decompressed into one buffer by
:func:`fleetlib._io.gunzip`, within the ``max_bytes`` limit) and decoded once by ``msgspec`` into
typed records that declare only the fields the tables use (``ph``, ``cat``, ``name``, ``pid``,
``tid``, ``ts``, ``dur`` and a few ``args`` keys): every other field is skipped without building
Python objects, and CPU-op shapes (``Input Dims``, ``Input type``) stay raw JSON text, written as
the ``ops`` columns' text once per distinct value.  The keys around the event array are decoded on
their own, and the array in pieces of at most 1 MiB of text (a sixteenth of the file between 4
and 16 MiB), cut between top-level events (a cut anywhere else fails to decode and is moved on,
so only valid cuts are used); each piece is reduced to numpy columns of the fields the tables need
before the next is decoded, and equal names share one string, so memory stays near the text plus
the tables' columns.  Where ``msgspec`` refuses the document -- invalid UTF-8, a lone-surrogate
escape, ``NaN``, malformed JSON, a layout other than the usual one (a repeated or nested
``traceEvents`` key) -- the whole text is decoded by :mod:`json` instead: its events become the
same typed records, and a syntax error is named with its line and column.  The tables are built
with numpy and pandas (``factorize``, categoricals, ``concat``).

The cache (:mod:`fleetlib.program.readers._cache`: one pickle per trace in a folder only its user
can write, :func:`~fleetlib.program.readers._cache.default_cache_dir`) is keyed by the SHA-256 of
the file's bytes, :data:`READER_VERSION` and the options that change the tables; the rank is
resolved after loading, so a renamed copy of a file is a cache hit that still takes its rank from
its own name.  A damaged or foreign cache file is a miss (parsed again).  Several processes (Dask
workers) may share one cache folder: each writes a temporary file of its own and renames it into
place, so a reader sees a whole entry or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import posixpath
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice, repeat
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from fleetlib._io import (
    GZIP_MAGIC,
    clean_text,
    collector_paused,
    current_limits,
    excerpt,
    gunzip,
    is_url,
    listed_files,
    stored_bytes,
    stored_size,
    url_kind,
)
from fleetlib.accounting import Window
from fleetlib.program.classify import (
    Classifier,
    classified_by,
    collective_from_annotation,
    collective_from_arg,
    collective_from_kernel_name,
    collective_from_launcher,
    comm_rule_launcher,
    comm_rule_metadata,
    dtype_size_bytes,
    first_shape_elements,
    host_sync_kinds,
    is_graph_launch,
)
from fleetlib.program.readers import _cache
from fleetlib.program.schema import STEP_SOURCES, table_dtypes
from fleetlib.quality import DomainError, InputError, Ledger, RowBook, check_nonnegative, check_positive

__all__ = [
    "CALENDAR_EPOCH_NS",
    "DEFAULT_MAX_EVENT_US",
    "DEFAULT_OVERLAP_TOLERANCE_US",
    "EVENT_DECODER",
    "READER_VERSION",
    "TABLES",
    "TraceRead",
    "TraceSet",
    "calendar_base_ns",
    "empty_host_syncs",
    "empty_kernels",
    "empty_ops",
    "empty_steps",
    "has_calendar_clock",
    "rank_from_file_name",
    "read",
    "read_trace",
    "read_traces",
    "select_window",
    "trace_files",
    "utc",
]

PathLike = str | os.PathLike[str]

#: Version of the reader's output; part of every cache key (bump when the tables change).
READER_VERSION = "6"
#: Events longer than this (µs) are rejected as corrupt: one hour.
DEFAULT_MAX_EVENT_US = 3.6e9
#: Same-stream overlaps up to this (µs) are timestamp rounding and are trimmed.
DEFAULT_OVERLAP_TOLERANCE_US = 1.0
#: A time base at or after this instant (2000-01-01 UTC, in unix nanoseconds) is a calendar clock;
#: an earlier one is a relative clock (time since boot, a synthetic origin).
CALENDAR_EPOCH_NS: int = 946_684_800 * 10**9
#: The tables :func:`read` returns.
TABLES: tuple[str, ...] = ("kernels", "steps", "host_syncs", "ops")

_RANK_NAME_RE = re.compile(r"(?:^|[^a-z0-9])(?:rank|worker)[-_ ]?(\d+)(?!\d)", re.IGNORECASE)
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_STREAM_RE = re.compile(r"(?:stream|queue)\s*(-?\d+)", re.IGNORECASE)
_GPU_LABEL_RE = re.compile(r"^\s*(?:GPU|HIP|XPU|MTIA|Device)\s*(\d+)", re.IGNORECASE)

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
        True when the tables came from the cache.
    read_s
        Wall seconds this call took.
    """

    path: Path
    rank: int
    kernels: pd.DataFrame
    steps: pd.DataFrame
    host_syncs: pd.DataFrame
    metadata: dict[str, Any]
    ledger: Ledger
    from_cache: bool = False
    read_s: float = 0.0
    ops: pd.DataFrame = field(default_factory=lambda: empty_ops())

    @property
    def flags(self) -> list[Any]:
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
    ledger: Ledger
    base_time_ns: int
    reads: list[TraceRead]
    ops: pd.DataFrame = field(default_factory=lambda: empty_ops())

    @property
    def ranks(self) -> list[int]:
        """The ranks read, sorted."""
        return sorted(self.metadata)

    @property
    def flags(self) -> list[Any]:
        """The merged ledger's flags."""
        return self.ledger.flags


_EMPTY: dict[str, pd.DataFrame] = {}


def _empty(table: str) -> pd.DataFrame:
    """Return a table with no rows (built once per table -- milliseconds -- then copied)."""
    if table not in _EMPTY:
        _EMPTY[table] = pd.DataFrame({c: pd.Series([], dtype=d) for c, d in table_dtypes(table).items()})
    return _EMPTY[table].copy()


def empty_kernels() -> pd.DataFrame:
    """Return a kernel table with no rows and the canonical columns and dtypes (plus the extras)."""
    return _empty("kernels")


def empty_steps() -> pd.DataFrame:
    """Return a step-window table with no rows."""
    return _empty("steps")


def empty_host_syncs() -> pd.DataFrame:
    """Return a host-sync table with no rows."""
    return _empty("host_syncs")


def empty_ops() -> pd.DataFrame:
    """Return a CPU-operator table (:data:`~fleetlib.program.schema.OPS_COLUMNS`) with no rows."""
    return _empty("ops")


# ---------------------------------------------------------------------------------------------------
# Bytes -> events: decoded once by msgspec (by json where msgspec refuses the document)
# ---------------------------------------------------------------------------------------------------

#: The keys of an event's args that the tables use (JSON key -> field of the typed record).
_ARG_KEYS: dict[str, str] = {
    "device": "device", "stream": "stream", "correlation": "correlation",
    "Collective name": "collective_name", "In msg nelems": "in_msg_nelems", "dtype": "dtype",
    "Process Group Name": "pg_name", "Process Group Description": "pg_desc", "bytes": "bytes",
    "External id": "external_id", "Input Dims": "input_dims", "Input type": "input_type",
    "Seq": "seq_", "seq": "seq", "Seq num": "seq_num_", "seq_num": "seq_num", "sequence_num": "sequence_num",
    "graph id": "graph_id_", "graphId": "graphid", "graph_id": "graph_id", "graph node id": "graph_node_id_",
    "graphNodeId": "graphnodeid",
}
#: Args kept as raw JSON text (a list of lists per CPU op is the costliest value a trace holds).
_RAW_ARGS = frozenset({"Input Dims", "Input type"})
_EVENT_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
#: What an entry of ``traceEvents`` or an event's ``args`` may be besides an object.
_NOT_OBJECT = None | bool | int | float | str | list

_Args = msgspec.defstruct(
    "_Args",
    [(a, msgspec.Raw if k in _RAW_ARGS else Any, msgspec.field(default=None, name=k))
     for k, a in _ARG_KEYS.items()]
    # metadata events: GPU labels and thread names (UNSET tells an absent key from a null)
    + [("labels", Any, msgspec.UNSET), ("name", Any, msgspec.UNSET)],
    gc=False,
)
_Event = msgspec.defstruct(
    "_Event", [(k, Any, None) for k in _EVENT_FIELDS] + [("args", _Args | _NOT_OBJECT, None)], gc=False)
_NO_ARGS = _Args()

#: The typed decoder of an event array: each entry an event record (the fields the tables read) or,
#: where it is not a JSON object, the value itself.  (The floor of ``benchmarks/traces.py``.)
EVENT_DECODER = msgspec.json.Decoder(list[_Event | _NOT_OBJECT])
_KEYS_DECODER = msgspec.json.Decoder(dict[str, Any])

_CHUNK_BYTES = 1 << 20        # largest piece of the event array decoded at once
_MIN_CHUNK_BYTES = 256 << 10  # smallest (a file of 4-16 MiB is cut into 16 pieces)
_ONE_PIECE_BYTES = 4 << 20    # up to this size pieces are _CHUNK_BYTES
_JSON_WS = b" \t\n\r"         # the whitespace JSON allows between tokens (bytes.strip() takes more)
_BOM = b"\xef\xbb\xbf"
_KEY_RE = re.compile(rb'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')
_KEY_TEXT_RE = re.compile(r'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')
_CUT_RE = re.compile(rb"\}\s*,\s*\{")
_TRAILING_RE = re.compile(r"trailing characters \(byte (\d+)\)")


class _Refused(Exception):
    """msgspec refused the document, or its layout is not the usual one: :mod:`json` decides."""


def _skip_ws(buf: bytes | bytearray, pos: int) -> int:
    n = len(buf)
    while pos < n and buf[pos] in _JSON_WS:
        pos += 1
    return pos


def _valid_utf8(data: bytes | bytearray | memoryview) -> bool:
    if not isinstance(data, memoryview) and data.isascii():
        return True
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _bracketed(buf: bytes | bytearray, start: int, end: int, close: bool = True) -> bytearray:
    """``[`` + ``buf[start:end]`` (+ ``]``) built with a single copy of the slice."""
    data = bytearray(b"[")
    data += memoryview(buf)[start:end]
    if close:
        data += b"]"
    return data


def _typed_events(data: bytearray | memoryview, ascii_text: bool) -> list[Any] | None:
    """Return the events of a JSON array; None where msgspec refuses it.

    Invalid UTF-8 is refused too (unless the whole document is ASCII): msgspec skips the fields it
    does not read without checking them, and the :mod:`json` path counts the bytes.
    """
    if not ascii_text and not _valid_utf8(data):
        return None
    try:
        return EVENT_DECODER.decode(data)
    except msgspec.DecodeError:  # ValidationError is a DecodeError too
        return None


def _keys(data: bytes) -> dict[str, Any]:
    """Return the top-level keys beside the event array (``data`` is a JSON object of them)."""
    if not _valid_utf8(data):
        raise _Refused
    try:
        return _KEYS_DECODER.decode(data)
    except msgspec.DecodeError:
        raise _Refused from None


def _line_col(buf: bytes | bytearray, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(buf)))
    line = buf.count(b"\n", 0, offset) + 1
    return line, offset - (buf.rfind(b"\n", 0, offset) + 1) + 1


def _json_error(buf: bytes | bytearray, offset: int, msg: str, file: str, what: str) -> InputError:
    line, col = _line_col(buf, offset)
    hint = " (the file looks truncated)" if offset >= len(buf.rstrip()) - 1 else ""
    return InputError(f"invalid JSON in {what}: {msg} at line {line} column {col}{hint}; expected a "
                      f"Chrome-trace JSON object or array of events", file=file, row=line, field="json")


_ESCAPED_RE = re.compile("[\udc80-\udcff]")
#: A lone UTF-16 surrogate that is not an escaped byte: only a JSON ``\uD800``-``\uDFFF`` escape
#: without its pair makes one (:mod:`json` decodes it; no UTF-8 text can hold it).
_LONE_RE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
#: Any surrogate: in a file without invalid UTF-8 bytes every one is a lone escape.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _text(data: bytes | bytearray | memoryview) -> tuple[str, int]:
    """Decode UTF-8; each invalid byte becomes a lone surrogate (``surrogateescape``), counted.

    Surrogates keep one character per undecodable byte, so character positions still map back to
    byte offsets exactly; :func:`fleetlib._io.clean_text` turns them into U+FFFD for the tables.
    """
    try:
        return str(data, "utf-8"), 0
    except UnicodeDecodeError:
        text = str(data, "utf-8", "surrogateescape")
        return text, len(_ESCAPED_RE.findall(text))


def _byte_offset(text: str, char_pos: int) -> int:
    return char_pos if text.isascii() else len(text[:char_pos].encode("utf-8", errors="surrogateescape"))


def _surrogate_escape(text: str) -> bool:
    """Whether JSON text may hold a lone surrogate: it escapes one of U+D800-U+DFFF (paired or not)."""
    return "\\" in text and _SURROGATE_ESCAPE.search(text) is not None


def _record(value: Any) -> Any:
    """Return an entry decoded by :mod:`json` as the typed decoder gives it: a record, or the value.

    Shapes become raw JSON text as the typed decoder keeps them (written by :func:`json.dumps`,
    which escapes what is not ASCII: an escaped byte or a lone surrogate survives as an escape).
    """
    if not isinstance(value, dict):
        return value
    args = value.get("args")
    if isinstance(args, dict):
        fields = {a: args.get(k) for k, a in _ARG_KEYS.items()}
        for k in _RAW_ARGS:
            if k in args:
                fields[_ARG_KEYS[k]] = msgspec.Raw(json.dumps(args[k]).encode())
        args = _Args(**fields, labels=args.get("labels", msgspec.UNSET), name=args.get("name", msgspec.UNSET))
    return _Event(*(value.get(k) for k in _EVENT_FIELDS), args=args)


class _Document:
    """A trace document's events, decoded piece by piece, with its other top-level keys and format.

    :meth:`typed` decodes with ``msgspec`` and raises :class:`_Refused` where it refuses anything;
    :meth:`stdlib` decodes the whole text with :mod:`json`, or raises the :class:`InputError` that
    names the document's defect.
    """

    def __init__(self, buf: bytes | bytearray, file: str) -> None:
        self.buf = buf
        self.file = file
        self.format = "object"
        self.top: dict[str, Any] = {}
        self.replaced = 0  # bytes that were not UTF-8 (decoded by json as escaped bytes)
        self.surrogates = False  # the text json decoded escapes a surrogate (maybe a lone one)
        start = _skip_ws(buf, 0)
        if buf[start:start + 3] == _BOM:
            start = _skip_ws(buf, start + 3)
        if start >= len(buf):
            raise InputError("empty file: expected a Chrome-trace JSON object or array", file=file, row=1)
        first = buf[start:start + 1]
        if first not in (b"{", b"["):
            line, _ = _line_col(buf, start)
            raise InputError(f"not JSON: the file starts with {bytes(buf[start:start + 16])!r}; expected a "
                             f"Chrome-trace JSON object or array", file=file, row=line, field="json")
        if first == b"[":
            self.format = "bare_array"
        self.start = start
        self.ascii = isinstance(buf, (bytes, bytearray)) and buf.isascii()  # then every piece is UTF-8

    # --- msgspec --------------------------------------------------------------------------------------

    def typed(self) -> Iterator[list[Any]]:
        """Yield the events in pieces, decoded by msgspec; the keys around them go to :attr:`top`."""
        buf, start = self.buf, self.start
        if self.format == "bare_array":
            end = yield from self._array(start + 1)
            rest = _skip_ws(buf, end)
            if rest < len(buf):
                raise _json_error(buf, rest, "extra data after the event array", self.file, "the document")
            return
        m = _KEY_RE.search(buf, start)
        if m is None:  # no event array (json names what there is), or not at the top level
            raise _Refused
        head = bytes(buf[start + 1:m.start()]).strip(_JSON_WS)
        if head and not head.endswith(b","):
            raise _Refused
        top = _keys(b"{" + head[:-1] + b"}") if head else {}
        end = yield from self._array(m.end())
        tail = bytes(buf[end:]).strip(_JSON_WS)
        if tail == b"}":
            after: dict[str, Any] = {}
        elif tail.startswith(b","):
            after = _keys(b"{" + tail[1:])
        else:
            raise _Refused
        if "traceEvents" in top or "traceEvents" in after:
            raise _Refused  # a repeated key: the document's last value is the one used
        top.update(after)
        self.top = top

    def _array(self, pos: int) -> Iterator[list[Any]]:
        """Decode the event array whose first event starts at ``pos``; return the offset after it."""
        buf = self.buf
        n = len(buf)
        chunk = min(_CHUNK_BYTES, n if n <= _ONE_PIECE_BYTES else max(_MIN_CHUNK_BYTES, n // 16))
        while True:
            target = pos + chunk
            m = _CUT_RE.search(buf, target) if target < n else None
            misses = 0
            while m is not None:
                events = _typed_events(_bracketed(buf, pos, m.start() + 1), self.ascii)
                if events is not None:
                    yield events
                    events = None  # not held while the next piece is decoded
                    pos = m.end() - 1
                    break
                # not a cut between two top-level events (or text msgspec refuses): try a later
                # candidate, skipping further each time so that a long run of false candidates
                # costs a logarithmic number of attempts
                misses += 1
                skip = 0 if misses <= 4 else 256 << min(misses - 4, 40)
                m = _CUT_RE.search(buf, m.end() + skip)
            else:
                break
        # the last piece, up to the array's closing bracket: the last "]" the rest of the document may
        # follow; where that is not the one (a later key's value holds a "]"), msgspec names the byte
        # after the array's end
        end = self._closing(pos)
        if buf[pos - 1:pos] == b"[":  # the whole array in one piece: decoded where it lies, not copied
            data: bytearray | memoryview = memoryview(buf)[pos - 1:end]
        else:
            data = _bracketed(buf, pos, end, close=False)
        if not self.ascii and not _valid_utf8(data):
            raise _Refused
        try:
            events = EVENT_DECODER.decode(data)
        except msgspec.DecodeError as exc:
            found = _TRAILING_RE.search(str(exc))
            if found is None:
                raise _Refused from None
            cut = int(found.group(1)) - 1  # the first character after the array (msgspec names the next)
            data = memoryview(data)[:cut]
            try:
                events, end = EVENT_DECODER.decode(data), pos + cut - 1
            except msgspec.DecodeError:
                raise _Refused from None
        del data
        yield events
        return end

    def _closing(self, pos: int) -> int:
        """Return the offset after the last ``]`` (from ``pos`` on) the rest of the document may follow.

        The rest is nothing (a bare array), or ``}`` or a comma (the keys after the events); where it
        is not, the end of the document.
        """
        buf = self.buf
        stop = len(buf)
        while stop > pos and buf[stop - 1] in _JSON_WS:
            stop -= 1
        close = buf.rfind(b"]", pos, stop)
        if close < 0:
            return len(buf)
        rest = _skip_ws(buf, close + 1)
        if self.format == "bare_array" and rest == stop:
            return close + 1
        if self.format == "object" and buf[rest:rest + 1] in (b"}", b","):
            return close + 1
        return len(buf)

    # --- the standard library -------------------------------------------------------------------------

    def stdlib(self) -> list[Any]:
        """Return all events, decoded by :mod:`json` from the whole text, as typed records.

        The other top-level keys go to :attr:`top`.
        """
        text, bad = _text(memoryview(self.buf)[self.start:])  # no copy of the buffer
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise self._syntax_error(text, exc) from exc
        self.replaced = bad
        self.surrogates = _surrogate_escape(text)
        del text
        if isinstance(doc, dict):
            events = doc.pop("traceEvents", None)
            self.top = doc
            if events is None:
                raise InputError("the JSON object has no traceEvents array", file=self.file,
                                 field="traceEvents")
            if not isinstance(events, list):
                raise InputError(f"traceEvents is a {type(events).__name__}; expected an array",
                                 file=self.file, field="traceEvents")
        else:  # the text starts with "[": a bare event array
            events = doc
        return [_record(e) for e in events]

    def _syntax_error(self, text: str, exc: ValueError) -> InputError:
        """Return the error naming the part a syntax error is in: the events, the keys after, the rest."""
        pos, msg = int(getattr(exc, "pos", 0) or 0), getattr(exc, "msg", str(exc))
        where = "the document"
        if self.format == "bare_array":
            if msg == "Extra data":
                msg = "extra data after the event array"
            else:
                where = "traceEvents"
        elif msg == "Extra data":
            msg = "extra data after the JSON object"
        else:
            m = _KEY_TEXT_RE.search(text)
            if m is not None and pos >= m.end() - 1 and _keys_before(text[1:m.start()]):
                try:
                    _, end = json.JSONDecoder().raw_decode(text, m.end() - 1)
                except ValueError:  # the error is the array's (json.loads met it there too)
                    end = len(text) + 1
                where = "traceEvents" if pos < end else "the keys after traceEvents"
        return _json_error(self.buf, self.start + _byte_offset(text, pos), msg, self.file, where)


def _keys_before(head: str) -> bool:
    """Whether ``head`` (the text between ``{`` and a ``"traceEvents"`` key) is complete keys, or nothing."""
    head = head.strip(" \t\n\r")
    if not head:
        return True
    try:
        return head.endswith(",") and isinstance(json.loads("{" + head[:-1] + "}"), dict)
    except ValueError:
        return False


def _collect(doc: _Document, marker: re.Pattern[str] | None) -> _Collector:
    """Every event of ``doc`` reduced to columns: decoded by msgspec, or by json where it refuses."""
    limit = current_limits().max_events
    try:  # a decoder recurses per nesting level: a hostile document ends in one line, not a traceback
        try:
            col = _Collector(marker)
            for events in doc.typed():
                col.add(events)
                del events  # not held while the next piece is decoded
                if col.offset > limit:
                    break
        except _Refused:
            col = _Collector(marker)
            col.add(doc.stdlib())
    except RecursionError:
        raise InputError("JSON nested too deep to decode (a trace event is a few levels deep); expected a "
                         "Chrome-trace JSON object or array", file=doc.file, field="json") from None
    if col.offset > limit:
        raise InputError(f"more than {limit:,} trace events (limit max_events; raise it with --limit "
                         "max_events=N)", file=doc.file, field="traceEvents")
    return col


# ---------------------------------------------------------------------------------------------------
# Events -> columns: each decoded piece reduced to numpy columns of the fields the tables use
# ---------------------------------------------------------------------------------------------------

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


def _objects(values: Iterable[Any], n: int) -> np.ndarray:
    return np.fromiter(values, dtype=object, count=n)


def _arg_columns(args: list[Any], keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Return the values of these args keys in each record (None where absent), in one pass."""
    n = len(args)
    return {k: _objects(list(map(attrgetter(_ARG_KEYS[k]), args)), n) for k in keys}


def _first_present(cols: Mapping[str, np.ndarray], keys: Sequence[str]) -> np.ndarray:
    out = cols[keys[0]]
    for key in keys[1:]:
        miss = np.equal(out, None)
        if not miss.any():
            break
        out = np.where(miss, cols[key], out)
    return out


def _factorize(values: np.ndarray | list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Codes and distinct values of decoded JSON values, as :func:`pandas.factorize` numbers them.

    Codes count the distinct values in order of first appearance; a missing value (None, NaN) is
    -1.  Values are told apart by a dictionary (equal values of different types -- ``1``, ``1.0``,
    ``True`` -- are one value, as in pandas' hash table), which for the short columns of a trace
    costs a fraction of ``pd.factorize``'s inference.

    Raises
    ------
    TypeError
        A value is unhashable (a JSON array or object).
    """
    items = values.tolist() if isinstance(values, np.ndarray) else values
    uniques = list(dict.fromkeys(items))  # in order of first appearance
    index = dict(zip(uniques, range(len(uniques)), strict=True))
    codes = np.fromiter(map(index.__getitem__, items), dtype=np.intp, count=len(items))
    gone = [i for i, u in enumerate(uniques) if u is None or u != u]  # missing: None, NaN
    if gone:
        keep = np.ones(len(uniques), dtype=bool)
        keep[gone] = False
        codes = np.where(keep, np.cumsum(keep) - 1, -1)[codes]
        uniques = [u for u, k in zip(uniques, keep.tolist(), strict=True) if k]
    return codes, _objects(uniques, len(uniques))


_UNSEEN = object()
#: The answers of the per-value rules -- the classification of kernel names, runtime calls and
#: collective labels, the text of each shape, the categories of each set of names -- for each
#: distinct value met in this process, by rule: the ranks of a job name the same kernels, calls and
#: shapes, so a rule (regular expressions over names hundreds of characters long) runs once per
#: value, not once per file.  A rule's table starts over when it holds :data:`_SEEN_LIMIT` values.
_SEEN: dict[Any, dict[Any, Any]] = {}
_SEEN_LIMIT = 200_000


def _per_value(values: np.ndarray | list[Any], rule: Callable[[np.ndarray], Any], key: Any,
               missing: Any = None, dtype: Any = object) -> np.ndarray:
    """Return ``rule(values)``, computed once per distinct value and process.

    ``rule`` is a rule applied to an object array that answers per value; its answers for text,
    bytes or tuples of them are remembered (:data:`_SEEN`): a value met before costs one dictionary
    look-up.  The others are told apart as :func:`_factorize` tells them and passed to ``rule``
    together; a missing value (None, NaN) gets ``missing``.
    """
    items = values.tolist() if isinstance(values, np.ndarray) else values
    seen = _SEEN.get(key)
    if seen is None:
        seen = _SEEN[key] = {None: missing}  # a rule's missing answer: each call site has its own key
    try:
        answers = list(map(seen.get, items, repeat(_UNSEEN)))
    except TypeError:  # an unhashable value (a malformed trace): every value is new
        answers = [_UNSEEN] * len(items)
    if _UNSEEN in answers:
        new = [i for i, a in enumerate(answers) if a is _UNSEEN]
        codes, uniques = _factorize([items[i] for i in new])
        found = rule(uniques) if len(uniques) else []
        found = found.tolist() if isinstance(found, np.ndarray) else list(found)  # Python scalars
        if len(seen) + len(found) > _SEEN_LIMIT:
            seen.clear()
            seen[None] = missing
        for u, a in zip(uniques.tolist(), found, strict=True):
            if type(u) in (str, bytes, tuple):
                seen[u] = a
        found.append(missing)  # code -1: a missing value
        for i, c in zip(new, codes.tolist(), strict=True):
            answers[i] = found[c]
    return _objects(answers, len(answers)) if dtype is object else np.array(answers, dtype=dtype)


def _map_unique(values: np.ndarray, fn: Callable[[Any], Any], missing: Any) -> np.ndarray:
    """Apply ``fn`` once per distinct value (:func:`_factorize`); missing values get ``missing``."""
    try:
        codes, uniques = _factorize(values)
    except TypeError:  # unhashable values (lists, objects) in a malformed trace
        return _objects((missing if isinstance(v, (list, dict)) or v is None else fn(v) for v in values),
                        len(values))
    per = _objects((fn(u) for u in uniques), len(uniques))
    per = np.append(per, _objects([missing], 1))
    return per[np.where(codes < 0, len(uniques), codes)]


def _shared(values: np.ndarray) -> np.ndarray:
    """Point equal values at one object (the decoder makes a new string per event; names are long).

    Equal values are told apart as :func:`_factorize` tells them: the first one met stands for
    them all, and a missing value (NaN too) is None.
    """
    items = values.tolist()
    first: dict[Any, Any] = {}
    try:
        shared = list(map(first.setdefault, items, items))
    except TypeError:  # unhashable values in a malformed trace: keep them as they are
        return values
    if any(type(k) is not str for k in first):  # NaN (not equal to itself) is missing, as in _factorize
        shared = [None if v is not None and v != v else v for v in shared]
    return _objects(shared, len(shared))


_PLAIN_IDS = frozenset({int, str, type(None)})


def _shared_ids(values: np.ndarray) -> np.ndarray:
    """:func:`_shared` for thread ids, skipped where it could only change which objects hold them.

    Sharing makes equal values one object, and equal values of different types (``1``, ``1.0``,
    ``True``) one value: with only ints, text and None no two values of different types are
    equal, so every value stays what it is.  Ids that are all ints (in range) are an int64 array.
    """
    items = values.tolist()
    kinds = set(map(type, items))
    if kinds == {int}:
        try:
            return np.fromiter(items, dtype=np.int64, count=len(items))  # no int object per event
        except OverflowError:  # an id beyond int64: shared by value
            return _shared(values)
    if kinds <= _PLAIN_IDS:
        return values
    return _shared(values)


def _compact_ids(values: np.ndarray) -> np.ndarray:
    """Return an id column of only in-range ints as int64 (no int object per event); else as it is."""
    if len(values) and set(map(type, values)) == {int}:
        try:
            return values.astype(np.int64)
        except OverflowError:  # an integer beyond int64: kept exactly, for the ledger
            pass
    return values


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


_NUM_OK, _NUM_MISSING, _NUM_TEXT, _NUM_BAD, _NUM_HUGE = 0, 1, 2, 3, 4


def _numbers(values: np.ndarray | list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Return (int64 or float64 array, status) for JSON scalars (a list or an object array).

    Status: 0 number, 1 missing, 2 numeric text converted, 3 not a number, 4 integer beyond int64.
    Values stay int64 when every present value is an int in range (exact for nanoseconds).
    """
    n = len(values)
    status = np.zeros(n, dtype=np.int8)
    if not n:
        return np.zeros(0, dtype=np.float64), status
    if isinstance(values, np.ndarray) and values.dtype == np.int64:  # ids held as integers (_compact_ids)
        return values, status
    kinds = set(map(type, values))
    if kinds <= {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=n), status
        except OverflowError:
            pass
    elif kinds <= {int, float}:
        if int not in kinds or max(map(abs, values)) < 2 ** 53:
            return np.array(values, dtype=np.float64), status
    elif kinds <= {int, type(None)}:
        values = _objects(values, n)
        miss = np.equal(values, None)
        try:
            arr = np.where(miss, 0, values).astype(np.int64)
            status[miss] = _NUM_MISSING
            return arr, status
        except OverflowError:
            pass
    elif kinds <= {int, float, type(None)} and (int not in kinds or max(
            (abs(v) for v in values if v is not None), default=0) < 2 ** 53):
        values = _objects(values, n)
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


def _is_value(codes: np.ndarray, uniques: Sequence[Any], text: str) -> np.ndarray:
    """``values == text`` of factorised values (``codes`` into ``uniques``), without comparing each row."""
    for j, u in enumerate(uniques):
        if type(u) is str and u == text:
            return codes == j
    return np.zeros(len(codes), dtype=bool)


def _args(args: np.ndarray) -> tuple[list[Any], int]:
    """Return each event's args record (empty where missing or not an object), and the count of those."""
    items = args.tolist()
    kinds = set(map(type, items))
    if kinds <= {_Args}:
        return items, 0
    odd = sum(1 for a in items if a is not None and type(a) is not _Args)
    return [a if type(a) is _Args else _NO_ARGS for a in items], odd


def _nested_reason(key: str, value: Any) -> str:
    """Return the ledger reason for a JSON array or object where ``key`` must be text (with a glimpse)."""
    kind = "array" if isinstance(value, list) else "object"
    try:
        shown = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):  # pragma: no cover - decoded JSON always writes back
        shown = repr(value)
    return f"{key!r} is a JSON {kind}, not text: {excerpt(shown)}"


def _timing(x: Mapping[str, Any], pos: np.ndarray) -> dict[str, np.ndarray]:
    """``ts`` and ``dur`` of the events at ``pos`` as numbers with their parse status.

    Converted per role and piece (see :func:`_numbers`: integers stay exact int64 when a group
    holds nothing else).  Where all complete events of the piece converted to int64 (``x["ts#"]``,
    ``x["dur#"]``), every part of them converts to the same values: those are sliced instead.
    """
    out: dict[str, np.ndarray] = {}
    for key in ("ts", "dur"):
        whole = x[key + "#"]
        values, status = (whole[0][pos], whole[1][pos]) if whole is not None else _numbers(x[key][pos])
        out[key], out[key + "_status"] = values, status
    return out


def _meta_dict(event: Any) -> dict[str, Any]:
    """Return a metadata event as a dict of the keys :func:`_device_maps` reads."""
    out = {"ph": event.ph, "name": event.name, "pid": event.pid, "tid": event.tid}
    if type(event.args) is _Args:
        out["args"] = {k: v for k, v in (("labels", event.args.labels), ("name", event.args.name))
                       if v is not msgspec.UNSET}
    return out


_NOT_INTEGER_LISTS = re.compile(rb'["{.eEtfn]|-0(?![0-9])')  # text, objects, floats, literals, -0


def _raw_text(raw: bytes) -> str | None:
    """``json.dumps`` text of the JSON value ``raw`` (None for ``null``).

    Lists of integers (shapes) are written by spacing their compact form; anything else is
    decoded and written by :func:`json.dumps`.
    """
    if not _NOT_INTEGER_LISTS.search(raw):
        compact = raw.translate(None, _JSON_WS)
        if compact:
            return compact.decode().replace(",", ", ")
    value = json.loads(raw)
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _json_texts(values: np.ndarray) -> np.ndarray:
    """Return the JSON text of each raw value (``json.dumps`` separators), None where it is missing.

    Each distinct text is written once per process; escaped invalid UTF-8 and lone surrogates stay,
    for the repairs.
    """
    have = np.flatnonzero(~np.equal(values, None))
    out = np.full(len(values), None, dtype=object)
    if len(have):
        raw = b"\0".join(values[have].tolist()).split(b"\0")  # JSON text holds no NUL byte
        out[have] = _per_value(raw, lambda u: map(_raw_text, u), "shape text")
    return out


def _raw_value(value: Any) -> Any:
    """Return the value a raw JSON text holds (None stays None)."""
    return None if value is None else json.loads(bytes(value))


class _Collector:
    """Reduces pieces of events to the columns the tables need (per piece, then joined)."""

    _GPU_ARGS = ("device", "stream", "correlation", "Collective name", "In msg nelems", "dtype",
                 "Process Group Name", "Process Group Description", "bytes", "External id")
    _SPAN_ARGS = ("Collective name", "In msg nelems", "dtype", "Process Group Name",
                  "Process Group Description", "Input Dims", "Input type")

    def __init__(self, step_marker: re.Pattern[str] | None) -> None:
        self.step_marker = step_marker
        self.offset = 0
        self.parts: dict[str, list[dict[str, np.ndarray]]] = {"gpu": [], "runtime": [], "spans": [],
                                                              "ops": [], "launchers": []}
        self.meta_events: list[dict[str, Any]] = []
        self.cat_counts: Counter[str] = Counter()
        self.phase_counts: Counter[str] = Counter()
        self.legacy_cats: set[str] = set()
        self.unknown_cats: Counter[str] = Counter()
        self.unused_complete: Counter[str] = Counter()  # complete events no table reads, by category
        self.not_objects: list[int] = []
        self.nested: list[tuple[np.ndarray, str, list[str]]] = []  # rows rejected for a nested ph / cat
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
        rows = np.arange(base + 1, base + n + 1, dtype=np.int64)
        if set(map(type, events)) != {_Event}:  # entries that are not JSON objects are rejected
            is_event = np.fromiter((type(e) is _Event for e in events), dtype=bool, count=n)
            self.not_objects.extend(rows[~is_event].tolist())
            events = [e for e, ok in zip(events, is_event.tolist(), strict=True) if ok]
            rows = rows[is_event]
            if not events:
                return
        evs = _objects(events, len(events))
        ph = _objects([e.ph for e in events], len(events))
        cat = _objects([e.cat for e in events], len(events))
        try:
            ph_codes, ph_uniques = pd.factorize(ph)
            cat_codes, cat_uniques = pd.factorize(cat)
        except TypeError:  # a JSON array or object as ph or cat (malformed): those events are rejected
            keep = self._reject_nested(rows, {"ph": ph, "cat": cat})
            evs, rows, ph, cat = evs[keep], rows[keep], ph[keep], cat[keep]
            if not len(evs):
                return
            ph_codes, ph_uniques = _factorize(ph)
            cat_codes, cat_uniques = _factorize(cat)
        for u, c in zip(ph_uniques, np.bincount(ph_codes[ph_codes >= 0], minlength=len(ph_uniques)),
                        strict=True):
            self.phase_counts[str(u)] += int(c)
        is_x = _is_value(ph_codes, ph_uniques, "X")  # ph == "X", from the codes
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
        m_idx = np.flatnonzero(_is_value(ph_codes, ph_uniques, "M"))
        if len(m_idx):
            self.meta_events.extend(map(_meta_dict, evs[m_idx].tolist()))
        xi = np.flatnonzero(is_x)
        if not len(xi):
            return
        # the fields every role uses, taken once for all complete events
        xl = evs[xi].tolist()
        nx = len(xl)
        ts_values, dur_values = [e.ts for e in xl], [e.dur for e in xl]
        ts, st = _numbers(ts_values)
        du, sd = _numbers(dur_values)
        x: dict[str, Any] = {"name": _shared(_objects([e.name for e in xl], nx)),
                             "tid": _shared_ids(_objects([e.tid for e in xl], nx)),
                             "args": _objects([e.args for e in xl], nx),
                             # all int64: sliced per role by _timing; else read again per role
                             "ts#": (ts, st) if ts.dtype == np.int64 else None,
                             "dur#": (du, sd) if du.dtype == np.int64 else None,
                             "ts": None if ts.dtype == np.int64 else _objects(ts_values, nx),
                             "dur": None if du.dtype == np.int64 else _objects(dur_values, nx)}
        del ts_values, dur_values
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
            pid = _objects([xl[i].pid for i in sel.tolist()], len(sel))
            self.parts["gpu"].append(self._gpu(x, sel, x_rows[sel], x_cat[sel], pid))
        sel = np.flatnonzero(x_role == _ROLE_RUNTIME)
        if len(sel):
            self.parts["runtime"].append(self._runtime(x, sel, x_rows[sel]))
        sel = np.flatnonzero((x_role == _ROLE_SPAN) & (x_cat == "cpu_op"))
        if len(sel):
            self.parts["ops"].append(self._op(x, sel, x_rows[sel]))
        sel = np.flatnonzero((x_role == _ROLE_SPAN) | (x_cat == "python_function"))
        if len(sel):  # launchers: ops, annotations and Python functions whose name says a collective
            says = _per_value(x["name"][sel], collective_from_launcher, "launcher collective", "none")
            says = says != "none"
            if says.any():
                self.parts["launchers"].append(self._launcher(x, sel[says], x_rows[sel[says]]))
        unused = x_role == _ROLE_IGNORE
        sel = np.flatnonzero(x_role == _ROLE_SPAN)
        if len(sel):
            keep = _map_unique(x["name"][sel], self._wanted_span, False).astype(bool)
            if keep.any():
                self.parts["spans"].append(self._span(x, sel[keep], x_rows[sel][keep]))
            unused[sel[~keep & (x_cat[sel] != "cpu_op")]] = True  # annotations no table reads
        if unused.any():
            for cat_, c in Counter(x_cat[unused].tolist()).items():
                self.unused_complete[cat_ or "<no category>"] += c

    def _reject_nested(self, rows: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        """Note the events whose ``fields`` hold a JSON array or object (rejected); return the others' mask.

        A phase or category that is not text says nothing of what the event is: such events are
        rejected (:func:`_format_flags` writes the entries), the first such field of an event named.
        """
        keep = np.ones(len(rows), dtype=bool)
        for key, values in fields.items():
            nested = np.fromiter(map(isinstance, values, repeat((list, dict))), dtype=bool, count=len(rows))
            hit = keep & nested
            if hit.any():
                self.nested.append((rows[hit], key, [_nested_reason(key, v) for v in values[hit]]))
                keep &= ~hit
        return keep

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
        found = _arg_columns(args, self._GPU_ARGS + _SEQ_KEYS + _GRAPH_KEYS)
        cols.update((key, found[key]) for key in self._GPU_ARGS)
        for key in ("correlation", "External id"):
            cols[key] = _compact_ids(cols[key])
        cols["seq"] = _first_present(found, _SEQ_KEYS)
        graph = np.zeros(len(args), dtype=bool)
        for key in _GRAPH_KEYS:
            graph |= ~np.equal(found[key], None)
        cols["graph_arg"] = graph
        return cols

    def _runtime(self, x: Mapping[str, np.ndarray], pos: np.ndarray,
                 rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        correlation = [a.correlation for a in args]  # as many as the runtime calls: a plain loop
        return {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos],
                "correlation": _compact_ids(_objects(correlation, len(correlation)))}

    def _span(self, x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        cols = {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos]}
        found = _arg_columns(args, self._SPAN_ARGS + _SEQ_KEYS)
        cols.update((key, found[key]) for key in self._SPAN_ARGS)
        for key in _RAW_ARGS:  # shapes are raw JSON text: their values, for the message sizes
            cols[key] = _objects(map(_raw_value, cols[key]), len(args))
        cols["seq"] = _first_present(found, _SEQ_KEYS)
        return cols

    @staticmethod
    def _launcher(x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        return {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos]}

    def _op(self, x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        cols = {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos]}
        n = len(args)  # as many as the CPU ops: plain loops over the three fields read
        cols["External id"] = _compact_ids(_objects([a.external_id for a in args], n))
        cols["Input Dims"] = _json_texts(_objects([a.input_dims for a in args], n))
        cols["Input type"] = _json_texts(_objects([a.input_type for a in args], n))
        return cols

    def table(self, which: str) -> dict[str, np.ndarray]:
        """Return one table's columns, its pieces joined, and let go of the pieces.

        Each table is taken once: a column's pieces are freed as soon as they are joined, so the
        pieces and the joined table are not both held to the end of the parse.
        """
        parts = self.parts[which]
        self.parts[which] = []
        if not parts:
            return {}
        if len(parts) == 1:  # one piece (a sub-MiB file): its columns as they are, not copied
            return dict(parts[0])
        out = {}
        for k in list(parts[0]):
            arrays = [p.pop(k) for p in parts]
            if len({a.dtype for a in arrays}) > 1 and any(a.dtype == object for a in arrays):
                arrays = [a.astype(object) for a in arrays]  # int64 ids beside objects: ints again
            out[k] = np.concatenate(arrays)
            del arrays
        return out


# ---------------------------------------------------------------------------------------------------
# Row book-keeping
# ---------------------------------------------------------------------------------------------------


#: The kind under which the ledger counts the events of each Chrome-trace phase other than ``X``:
#: read and kept, but no table is built from them (metadata only names GPUs and streams).
PHASE_KINDS: dict[str, str] = {
    "M": "metadata", "i": "instant", "I": "instant", "s": "flow", "t": "flow", "f": "flow",
    "C": "counter", "B": "begin_end", "E": "begin_end", "b": "async", "e": "async", "n": "async",
    "S": "async", "T": "async", "F": "async", "p": "async", "P": "sample", "N": "object",
    "O": "object", "D": "object", "R": "mark", "c": "clock_sync", "(": "context", ")": "context",
}


def _count_unused(col: _Collector, ledger: Ledger) -> None:
    """Count, by kind, the kept events that no table is built from (see :data:`PHASE_KINDS`).

    Kinds: the phase names of :data:`PHASE_KINDS` (``phase <ph>`` for any other phase,
    ``no_phase`` for an event without one) and ``complete:<category>`` for complete events whose
    category no table reads (``python_function``, ``gpu_user_annotation`` ...) or annotations that
    are neither steps nor collectives.
    """
    with_phase = 0
    for ph, n in sorted(col.phase_counts.items()):
        with_phase += n
        if ph != "X":
            ledger.count_unused(PHASE_KINDS.get(ph, f"phase {ph}"), n)
    n_nested = sum(len(rows) for rows, _, _ in col.nested)
    ledger.count_unused("no_phase", col.offset - len(col.not_objects) - n_nested - with_phase)
    for cat, n in sorted(col.unused_complete.items()):
        ledger.count_unused(f"complete:{cat}", n)


class _Book(RowBook):
    """The :class:`~fleetlib.quality.RowBook` of one trace file, addressed by entry number.

    Every entry of ``traceEvents`` is one record: the file row of entry ``k`` (1-based) is ``k``,
    its position in the book ``k - 1``.  Beside the per-record outcomes the book keeps the file's
    notes (flags that concern the whole file, not one record), written after them on close.
    """

    def __init__(self, file: str, n_events: int) -> None:
        super().__init__(file, int(n_events))
        self.notes: list[tuple[str, str]] = []

    def reject_rows(self, rows: np.ndarray | Sequence[int], field_: str | None,
                    reasons: str | Sequence[str]) -> None:
        """Reject the entries with these 1-based row numbers (the first rejection wins)."""
        self.reject(np.asarray(rows, dtype=np.int64) - 1, field_, reasons)

    def repair_rows(self, rows: np.ndarray | Sequence[int], field_: str | None,
                    reasons: str | Sequence[str]) -> None:
        """Record a named repair of the entries with these 1-based row numbers."""
        self.repair(np.asarray(rows, dtype=np.int64) - 1, field_, reasons)

    def note(self, code: str, message: str) -> None:
        """Record a flag about the whole file."""
        self.notes.append((code, message))

    def close(self, ledger: Ledger) -> np.ndarray:
        """Settle the entries into ``ledger``, then the file's notes; return the keep mask."""
        keep = super().close(ledger)
        for code, message in self.notes:
            ledger.flag(code, message, file=self.file)
        return keep


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
            book.reject_rows(rows[hit], fld, why)
        ok &= ~mask
    text = ((st == _NUM_TEXT) | (sd == _NUM_TEXT)) & ok
    if book is not None and text.any():
        book.repair_rows(rows[text], "ts,dur", "numeric text converted to a number")
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
        book.repair_rows(rows[huge], field_, [f"integer {values[i]} in {field_!r} is beyond int64: set to "
                                              f"missing, not wrapped (exact value kept here)"
                                              for i in np.flatnonzero(huge)])
        book.note("integer_beyond_int64", f"{int(huge.sum())} value(s) of {field_!r} exceed int64: missing "
                                          f"in the table, exact digits in the ledger")
    return pd.arrays.IntegerArray(out, ~valid)


def _kinds(classifier: Classifier, names: np.ndarray, cats: np.ndarray) -> np.ndarray:
    """:meth:`Classifier.kinds` of each activity, once per distinct (name, category) and process."""
    pairs = _objects(zip(names.tolist(), cats.tolist(), strict=True), len(names))
    return _per_value(pairs, lambda u: classifier.kinds([n for n, _ in u], [c for _, c in u]),
                      ("kind", classifier.fingerprint()))


def _collectives_from_arg(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~fleetlib.program.classify.collective_from_arg`, once per distinct value and process."""
    found = _per_value(values, lambda u: zip(*collective_from_arg(u), strict=True), "collective of an arg",
                       ("none", False))
    collectives, recognised = zip(*found.tolist(), strict=True) if len(found) else ((), ())
    return _objects(collectives, len(found)), np.array(recognised, dtype=bool)


def _fixed_categorical(values: np.ndarray, dtype: pd.CategoricalDtype) -> pd.Categorical:
    """Return ``pd.Categorical(values, dtype=dtype)``, each distinct value's code looked up once."""
    codes = _per_value(values, dtype.categories.get_indexer, ("category code", tuple(dtype.categories)), -1,
                       dtype=np.int64)
    return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)


def _text_categorical(values: np.ndarray) -> pd.Categorical:
    """Return ``pd.Categorical(values)`` of text values: its categories the distinct values, sorted.

    The categories are ``str``; their dtype is built once per set of names and process (the ranks of
    a job share them).
    """
    codes, uniques = _factorize(values)
    order = np.argsort(uniques, kind="stable")  # Python's order of text, as pandas sorts categories
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order))
    names = tuple(uniques[order].tolist())
    seen = _SEEN.setdefault("categories", {})
    dtype = seen.get(names)
    if dtype is None:
        if len(seen) >= 4096:
            seen.clear()
        dtype = seen[names] = pd.CategoricalDtype(pd.Index(list(names), dtype="str"))
    return pd.Categorical.from_codes(np.where(codes >= 0, rank[codes], -1), dtype=dtype, validate=False)


def _to_floats(values: np.ndarray) -> np.ndarray:
    """Numbers of an object column as float64: NaN where missing or not a number (see :func:`_numbers`)."""
    numbers, status = _numbers(values)
    return np.where((status == _NUM_OK) | (status == _NUM_TEXT), numbers, np.nan).astype(np.float64)


# ---------------------------------------------------------------------------------------------------
# Hostile values: text that is no text, counts no message has -- each repaired and named
# ---------------------------------------------------------------------------------------------------

#: Args read as text (factorised, compared, looked up) by the GPU and host-annotation tables.
_ARG_TEXT_KEYS = ("Collective name", "dtype", "Process Group Name", "Process Group Description")
#: Text columns the GPU, runtime and span tables may hold escaped invalid UTF-8 in.
_TEXT_KEYS = ("name", "cat", "tid", "Collective name", "dtype", "Process Group Name",
              "Process Group Description")
_UTF8_REASON = "invalid UTF-8 bytes replaced by U+FFFD"
_LONE_REASON = "lone surrogate escape (\\uD800-\\uDFFF without its pair: not text) replaced by U+FFFD"
_COUNT_TEXT_RE = re.compile(r"[+-]?[0-9]+")


def _all_text(values: np.ndarray, skipna: bool) -> bool:
    """Whether every value is text (missing values allowed with ``skipna``): one C pass."""
    return pd.api.types.infer_dtype(values, skipna=skipna) in (("string", "empty") if skipna else ("string",))


def _not_text(values: np.ndarray) -> np.ndarray:
    """Return the mask of values that are not text (missing ones too)."""
    if _all_text(values, skipna=False):
        return np.zeros(len(values), dtype=bool)
    return ~np.fromiter(map(isinstance, values, repeat(str)), dtype=bool, count=len(values))


def _clean(values: np.ndarray) -> np.ndarray:
    """Replace escaped invalid UTF-8 bytes and lone surrogates in text by U+FFFD (per distinct value)."""
    return _map_unique(values, clean_text, None) if len(values) else values


def _clean_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {clean_text(k): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v) for v in value]
    return clean_text(value)


def _nested_text(table: dict[str, np.ndarray], keys: tuple[str, ...], book: _Book) -> None:
    """Read a JSON array or object where ``table`` holds text as absent, each a named repair of its row.

    Such a value has no text to classify or look up, and hashes as nothing; the event itself is
    sound, so it is kept with the value ignored.  A column of text and missing values (every valid
    trace's) is passed in one C pass.
    """
    for key in keys:
        values = table.get(key)
        if values is None or not len(values) or _all_text(values, skipna=True):
            continue
        hit = np.fromiter(map(isinstance, values, repeat((list, dict))), dtype=bool, count=len(values))
        if hit.any():
            book.repair_rows(table["row"][hit], key, [f"{_nested_reason(key, v)}; read as absent"
                                                     for v in values[hit]])
            values = values.copy()
            values[hit] = None
            table[key] = values


def _element_counts(nelems: np.ndarray, rows: np.ndarray, book: _Book | None) -> np.ndarray:
    """``In msg nelems`` as whole numbers; each value that is not one is a named repair of its row.

    Integral text (``"256"``) is converted, as numeric text in ``ts`` / ``dur`` is; any other value
    that is no whole number of elements -- other text, a boolean, a fraction, an infinity, an
    array -- leaves the message size unknown: read as absent, its value shown.
    """
    values = nelems.tolist()
    if set(map(type, values)) <= {int, type(None)}:
        return nelems
    out = nelems.copy()
    converted: list[int] = []
    odd: list[int] = []
    reasons: list[str] = []
    for i, v in enumerate(values):
        if v is None or type(v) is int or (type(v) is float and np.isfinite(v) and v.is_integer()):
            continue
        if isinstance(v, str) and _COUNT_TEXT_RE.fullmatch(v.strip()):
            out[i] = int(v.strip())
            if out[i] >= 0:  # a negative one is named by the negative-count repair
                converted.append(i)
            continue
        out[i] = None
        odd.append(i)
        shown = excerpt(v if isinstance(v, str) else json.dumps(v))
        reasons.append(f"not a whole number of elements ({shown}): message bytes unknown (read as absent)")
    if book is not None:
        if converted:
            book.repair_rows(rows[converted], "In msg nelems", "numeric text converted to a number")
        if odd:
            book.repair_rows(rows[odd], "In msg nelems", reasons)
    return out


def _message_bytes(nelems: np.ndarray, dtypes: np.ndarray, rows: np.ndarray,
                   book: _Book | None) -> tuple[np.ndarray, np.ndarray]:
    """Message bytes (float64, NaN unknown) from ``In msg nelems`` and ``dtype``, and the counts used.

    The bytes are :func:`fleetlib.program.classify.message_bytes`: the count times the dtype's size
    (:func:`~fleetlib.program.classify.dtype_size_bytes`), rounded.

    Counts that are no whole number are read as absent first (:func:`_element_counts`); a negative
    element count (no message has one) leaves the size unknown: read as absent, a named repair.
    """
    nelems = _element_counts(nelems, rows, book)
    count = _to_floats(nelems)
    neg = count < 0  # NaN (missing, not a number) compares False
    if neg.any():
        if book is not None:
            book.repair_rows(rows[neg], "In msg nelems", [
                f"negative element count {excerpt(v)}: message bytes unknown (read as absent)"
                for v in nelems[neg]])
        nelems = nelems.copy()
        nelems[neg] = None
        count = np.where(neg, np.nan, count)
    return _bytes(count, dtypes), nelems


def _bytes(count: np.ndarray, dtypes: np.ndarray) -> np.ndarray:
    """Bytes of ``count`` elements of each dtype (float64, NaN unknown), as ``message_bytes`` rounds them.

    A negative count (a shape with a negative dimension) leaves the size unknown.

    The size of each dtype name is classify's (:func:`~fleetlib.program.classify.dtype_size_bytes`),
    looked up once per name and process.
    """
    size = _per_value(dtypes, dtype_size_bytes, "dtype size", np.nan, dtype=np.float64)
    out = count * size
    return np.where(np.isfinite(out) & (out >= 0), np.round(out), np.nan)  # a negative shape: unknown


def _dirty(values: np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    """Mask of the text values ``pattern`` finds something in (one search per distinct value)."""
    return _map_unique(values, lambda v: isinstance(v, str) and bool(pattern.search(v)), False).astype(bool)


def _dirty_keys(table: Mapping[str, np.ndarray], keys: tuple[str, ...],
                pattern: re.Pattern[str]) -> list[str]:
    return [key for key in keys if key in table and _dirty(table[key], pattern).any()]


def _text_repairs(doc: _Document) -> list[tuple[re.Pattern[str], str]]:
    """Return what to replace by U+FFFD in the file's text, each with its ledger reason (lone ones last).

    Invalid UTF-8 bytes were decoded as escaped bytes (U+DC80-U+DCFF); a JSON escape of a lone
    surrogate decodes to any of U+D800-U+DFFF.  Where the file held no invalid byte every surrogate
    is such an escape; where it did, those of the escaped bytes' range count as bytes.
    """
    out = [(_ESCAPED_RE, _UTF8_REASON)] if doc.replaced else []
    if doc.surrogates:
        out.append((_LONE_RE if doc.replaced else _SURROGATE_RE, _LONE_REASON))
    return out


def _lone_repairs(gk: Mapping[str, np.ndarray], r: Mapping[str, np.ndarray], s: Mapping[str, np.ndarray],
                  o: Mapping[str, np.ndarray], top: Mapping[str, Any], rows_k: np.ndarray,
                  pattern: re.Pattern[str], book: _Book) -> Mapping[str, Any]:
    """Replace the lone surrogates (``pattern``) in the text columns by U+FFFD, in place, named.

    Returns the top-level keys with theirs replaced.  Lone surrogates are repaired as invalid
    UTF-8 bytes are (:func:`_utf8_repairs`): kept GPU rows holding one are repairs, and a
    ``lone_surrogate`` note counts them; CPU-op rows are repaired by :func:`_ops_table`;
    runtime calls, annotations and the top-level keys are replaced as they are.  Escaped invalid
    bytes (outside ``pattern`` where the file has any) are left for :func:`_utf8_repairs`.
    """
    dirty = np.zeros(len(rows_k), dtype=bool)
    fields = []
    for key in _TEXT_KEYS:
        if key in gk:
            hit = _dirty(gk[key], pattern)
            if hit.any():
                dirty |= hit
                fields.append(key)
                book.repair_rows(rows_k[hit], key, _LONE_REASON)  # each row names its own fields
    found = _dirty_keys(o, ("name", "Input Dims", "Input type"), pattern) != []
    for table in (gk, r, s):
        for key in _dirty_keys(table, _TEXT_KEYS, pattern):
            table[key] = _map_unique(table[key], lambda v: pattern.sub("\ufffd", v) if type(v) is str else v,
                                     None)
            found = True
    if pattern.search(json.dumps(top, ensure_ascii=False)):  # written as they are: lone ones too
        top = _clean_json(dict(top))
        found = True
    if not found:
        return top
    book.note("lone_surrogate", "lone surrogate escapes (\\uD800-\\uDFFF without its pair: not text) "
                                "replaced by U+FFFD" + (f"; {int(dirty.sum())} kept GPU rows affected "
                                                        f"({', '.join(fields)})" if dirty.any()
                                                        else " (none in a kept GPU row)"))
    return top


def _clean_counts(col: _Collector) -> None:
    """Replace invalid UTF-8 and lone surrogates by U+FFFD in the collector's counts by phase and category.

    Their keys become the ledger's unused kinds, ``events_by_category`` and the unknown-category
    notes, which are written out as text.  Counts of keys that become equal are added.
    """
    for name in ("phase_counts", "cat_counts", "unknown_cats", "unused_complete"):
        counts: Counter[str] = Counter()
        for key, n in getattr(col, name).items():
            counts[clean_text(key)] += n
        setattr(col, name, counts)
    col.legacy_cats = {clean_text(c) for c in col.legacy_cats}


def _ops_text_repairs(rows: np.ndarray, columns: tuple[np.ndarray, ...],
                      text_repairs: list[tuple[re.Pattern[str], str]], book: _Book) -> None:
    """Name the CPU-op rows whose ``name``, ``Input Dims``, ``Input type`` (``columns``) hold bad text."""
    for pattern, reason in text_repairs:
        hits = [_dirty(values, pattern) for values in columns]
        if reason == _LONE_REASON:  # each row names its own fields
            for key, hit in zip(("name", "Input Dims", "Input type"), hits, strict=True):
                book.repair_rows(rows[hit], key, reason)
        elif np.logical_or.reduce(hits).any():  # the three fields together
            book.repair_rows(rows[np.logical_or.reduce(hits)], "name,Input Dims,Input type", reason)


def _utf8_repairs(gk: dict[str, np.ndarray], r: dict[str, np.ndarray], s: dict[str, np.ndarray],
                  rows_k: np.ndarray, replaced: int, book: _Book) -> None:
    """Replace escaped invalid UTF-8 in text columns by U+FFFD; kept GPU rows touched are repairs."""
    dirty = np.zeros(len(rows_k), dtype=bool)
    fields: list[str] = []
    for key in _TEXT_KEYS:
        if key in gk:
            hit = _dirty(gk[key], _ESCAPED_RE)
            if hit.any():
                dirty |= hit
                fields.append(key)
                gk[key] = _clean(gk[key])
    for table in (r, s):
        for key in _TEXT_KEYS:
            if key in table:
                table[key] = _clean(table[key])
    if dirty.any():
        book.repair_rows(rows_k[dirty], ",".join(fields), _UTF8_REASON)
    book.note("invalid_utf8", f"{replaced} undecodable byte(s) replaced by U+FFFD"
              + (f"; {int(dirty.sum())} kept GPU rows affected ({', '.join(fields)})" if dirty.any()
                 else " (none in a kept GPU row)"))


# ---------------------------------------------------------------------------------------------------
# Columns -> the kernel, step, host-sync and ops tables of one trace file (one rank)
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
        gpu_pids = set(pid[~is_unknown].tolist())  # for membership: what pd.unique would hold
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
        book.note("timestamps_in_ns", f"timestamps are in nanoseconds ({how}); converted to µs")
    if base_ns is not None:
        return scale, 0, unit, "baseTimeNanoseconds", base_ns
    per_second = 1e9 if unit == "ns" else 1e6
    origin = int(np.floor(earliest / per_second)) * int(per_second) if np.isfinite(earliest) else 0
    return scale, origin, unit, "earliest_second", origin * (1 if unit == "ns" else 1000)


def _to_us(values: np.ndarray, origin: int, scale: float) -> np.ndarray:
    if np.issubdtype(values.dtype, np.integer):
        return (values - np.int64(origin)).astype(np.float64) / scale
    return (values.astype(np.float64) - float(origin)) / scale


def _step_index(steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Return the step windows' starts, ends and numbers sorted by start (None without windows).

    Built once per file for :func:`_assign_steps`, which the kernels and the host syncs both need.
    """
    if steps.empty:
        return None
    start = steps["start_us"].to_numpy()
    order = np.argsort(start, kind="stable")
    return start[order], steps["end_us"].to_numpy()[order], steps["step"].to_numpy(dtype=np.int64)[order]


def _assign_steps(t: np.ndarray, steps: pd.DataFrame,
                  index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> pd.arrays.IntegerArray:
    """Step of each time: the window whose [start, end) holds it (the latest-starting on overlap).

    ``index`` is :func:`_step_index` of ``steps`` when the caller has it already.
    """
    n = len(t)
    if steps.empty or not n:
        return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
    s, e, k = _step_index(steps) if index is None else index
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


def _parse(held: list[bytes | bytearray], file: str, sha: str, opts: _Options) -> tuple[_Built, Ledger]:
    """Parse the file's bytes, handed over in ``held`` (emptied once decompressed, to free them).

    Returns the tables and the file's ledger: every entry of ``traceEvents`` is one record read.
    """
    marker = re.compile(opts.step_marker) if opts.step_marker else None
    raw = held.pop()
    doc = _Document(gunzip(raw, file) if raw[:2] == GZIP_MAGIC else raw, file)
    del raw  # the compressed bytes, once decompressed
    col = _collect(doc, marker)
    doc.buf = b""  # the text is no longer needed
    top = doc.top
    if col.offset == 0:
        raise InputError("the trace has no events (traceEvents is empty); expected GPU and CPU activity "
                         "records", file=file, field="traceEvents")
    if col.n_timed == 0:
        raise InputError(f"the trace has {col.offset} events but none is a complete event with a valid "
                         f"timestamp (ph 'X' with ts); nothing to analyse", file=file, field="traceEvents")
    book = _Book(file, col.offset)
    if doc.surrogates or doc.replaced:  # counts keyed by phase and category are written as text
        _clean_counts(col)
    _format_flags(col, doc, book)

    g = col.table("gpu")
    r = col.table("runtime")
    s = col.table("spans")
    o = col.table("ops")  # each table is taken once (the collector lets go of its pieces)
    for table, keys in ((g, _ARG_TEXT_KEYS), (r, ("name",)), (s, _ARG_TEXT_KEYS)):
        _nested_text(table, keys, book)
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
        book.reject_rows(g_rows[neg], "dur", [f"negative duration ({d:g} µs)" for d in dur_all[neg]])
    g_ok &= ~neg
    long_ = g_ok & (dur_all > opts.max_event_us)
    if long_.any():
        book.reject_rows(g_rows[long_], "dur", [f"duration {d:.6g} µs exceeds max_event_us="
                                                f"{opts.max_event_us:g} (a corrupt record)"
                                                for d in dur_all[long_]])
    g_ok &= ~long_

    keep = np.flatnonzero(g_ok)
    n_k = len(keep)
    gk = {k: v[keep] for k, v in g.items()} if n_k else {}
    rows_k = g_rows[keep]
    start = start_all[keep]
    end = start + dur_all[keep]
    text_repairs = _text_repairs(doc)
    if doc.surrogates:  # first: the escaped invalid bytes stay for _utf8_repairs
        top = _lone_repairs(gk, r, s, o, top, rows_k, text_repairs[-1][0], book)
    if doc.replaced:
        _utf8_repairs(gk, r, s, rows_k, doc.replaced, book)
        top = _clean_json(top)
    names = gk["name"] if n_k else _objects([], 0)
    bad_name = _not_text(names)
    if bad_name.any():
        book.repair_rows(rows_k[bad_name], "name", "missing or non-text name replaced by '<unnamed>'")
        names = np.where(bad_name, "<unnamed>", names)
    cats = gk["cat"] if n_k else _objects([], 0)
    is_unknown = ~np.isin(cats, list(_GPU_CATS))
    if n_k:
        device, stream, no_stream = _devices_and_streams(gk, is_unknown, col.meta_events)
    else:
        device = stream = np.zeros(0, dtype=np.int64)
        no_stream = np.zeros(0, dtype=bool)
    if no_stream.any():
        book.note("stream_unknown", f"{int(no_stream.sum())} GPU activities carry no stream (no args.stream, "
                                    f"no numeric tid): stream set to -1")
    kind = _kinds(opts.classifier, names, cats)
    if col.odd_args:
        book.note("args_not_object", f"{col.odd_args} GPU events have 'args' that is not an object: ignored")

    comm = _comm_semantics(gk, kind, names, rows_k, book, n_k, opts.classifier)
    corr = _ids(gk["correlation"], rows_k, book, "correlation") if n_k else pd.array([], dtype="Int64")
    launch_us, graph, launch_tid = _launches(r, origin, scale, corr, gk, n_k, comm, s, book)
    dur = dur_all[keep]
    platform = _platform(top, r.get("name", _objects([], 0)))
    end, trimmed = _repair_overlaps(start, end, stream, device, kind, rows_k, book, opts.overlap_tolerance_us,
                                    clip=platform == "rocm")
    dur = np.where(trimmed, end - start, dur)  # untouched rows keep their recorded duration exactly

    # --- steps and host syncs ----------------------------------------------------------------------
    steps = _steps_table(s, origin, scale, marker, book, opts)
    if steps.empty:
        steps = _fallback_steps(start, end, kind, col, origin, scale, marker, book)
    if not n_k or not np.isin(kind, ("compute", "comm", "memcpy", "memset")).any():
        book.note("no_gpu_activity", "the trace holds no GPU kernel, copy or fill (a CPU-only trace?)")
    step_index = _step_index(steps)
    host_syncs = _host_sync_table(r, origin, scale, steps, book, opts, step_index)
    ops, links = _ops_table(o, origin, scale, book, opts, text_repairs)
    external_id = _external_ids(gk, rows_k, corr, launch_us, launch_tid, links, book, n_k)
    _by_launcher(col.table("launchers"), origin, scale, launch_us, launch_tid, cats, kind, comm, links)
    _flag_name_only(kind, comm["rule"], names, dur, book)

    dtypes = table_dtypes("kernels")
    columns = {
        "rank": np.zeros(n_k, dtype=np.int64),
        "step": _assign_steps(start, steps, step_index),
        "stream": stream,
        "start_us": start, "end_us": end, "dur_us": dur,
        "name": _text_categorical(names),
        "kind": _fixed_categorical(kind, dtypes["kind"]),
        "collective": _fixed_categorical(comm["collective"], dtypes["collective"]),
        "process_group": _text_categorical(comm["pg"]),
        "seq": comm["seq"],
        "bytes": comm["bytes"],
        "cuda_graph": graph,
        "device": device, "correlation": corr, "launch_us": launch_us,
        "collective_source": _fixed_categorical(comm["source"], dtypes["collective_source"]),
        "external_id": external_id,
        "comm_rule": _text_categorical(comm["rule"]),
        "classified_by": _fixed_categorical(classified_by(comm["rule"]), dtypes["classified_by"]),
    }
    # sorted by rank (one here), start, end, stream -- stable, as sort_values(kind="stable") sorts -- and
    # built once in that order
    order = np.lexsort((stream, end, start))
    kernels = pd.DataFrame({k: v[order] for k, v in columns.items()}, index=pd.RangeIndex(n_k),
                           copy=False)

    dist = top.get("distributedInfo") if isinstance(top.get("distributedInfo"), dict) else {}
    devices = top.get("deviceProperties")
    metadata = {
        "sha256": sha, "reader_version": READER_VERSION, "format": doc.format,
        "platform": platform,
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
    ledger = Ledger()
    book.close(ledger)
    _count_unused(col, ledger)
    return _Built(kernels, steps, host_syncs, metadata, ops), ledger


def _ops_table(o: dict[str, np.ndarray], origin: int, scale: float, book: _Book, opts: _Options,
               text_repairs: list[tuple[re.Pattern[str], str]]
               ) -> tuple[pd.DataFrame, dict[str, np.ndarray] | None]:
    """Build the ``ops`` table (CPU ops with ``Input Dims``); return it with all CPU ops' spans.

    ``text_repairs``: what :func:`_text_repairs` finds to replace in the file's text (none: nothing).

    The spans (start, end, thread, External id) locate the op that launched a kernel.
    """
    if not o:
        return empty_ops(), None
    ts, du, ok_all = _times(o, None)
    start_all = _to_us(ts, origin, scale)
    end_all = start_all + du.astype(np.float64) / scale
    ext_all = _ids(o["External id"], o["row"], None, "External id")
    use = ok_all & (end_all >= start_all) & ~np.asarray(pd.isna(ext_all))
    links = {"start": start_all[use], "end": end_all[use], "tid": o["tid"][use], "name": o["name"][use],
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
    if text_repairs:
        _ops_text_repairs(rows, (names, dims, types), text_repairs, book)
        names, dims, types = _clean(names), _clean(dims), _clean(types)
    bad_name = _not_text(names)
    if bad_name.any():
        book.repair_rows(rows[bad_name], "name", "missing or non-text name replaced by '<unnamed>'")
        names = np.where(bad_name, "<unnamed>", names)
    order = np.argsort(start[ok], kind="stable")  # sorted by start as sort_values(kind="stable") sorts
    table = pd.DataFrame({
        "rank": np.zeros(len(rows), dtype=np.int64), "external_id": ext[order],
        "name": _text_categorical(names[order]), "start_us": start[ok][order], "dur_us": dur[ok][order],
        "input_dims": pd.Series(dims[order], dtype=object),
        "input_types": pd.Series(types[order], dtype=object),
    }, index=pd.RangeIndex(len(rows)), copy=False)
    return table, links


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


def _enclosing(t: np.ndarray, tid: np.ndarray, spans: Mapping[str, np.ndarray]) -> np.ndarray:
    """Index into ``spans`` of the innermost span that encloses time ``t`` on thread ``tid`` (-1 if none)."""
    out = np.full(len(t), -1, dtype=np.int64)
    q = np.flatnonzero(np.isfinite(t) & ~np.equal(tid, None))
    if not len(q) or not len(spans["start"]):
        return out
    try:
        codes, _ = pd.factorize(np.concatenate([tid[q], spans["tid"]]))
    except TypeError:  # unhashable thread ids in a malformed trace
        return out
    lt, at = codes[:len(q)], codes[len(q):]
    for thread in np.unique(lt):  # a handful of host threads
        qi = q[lt == thread]
        aj = np.flatnonzero(at == thread)
        if not len(aj):
            continue
        aj = aj[np.lexsort((-spans["end"][aj], spans["start"][aj]))]
        s_, e_ = spans["start"][aj], spans["end"][aj]
        parent = _parents(s_, e_)
        tq = t[qi]
        k = np.searchsorted(s_, tq, side="right") - 1
        while True:  # climb to the first ancestor still open at t (at most the nesting depth)
            up = (k >= 0) & (e_[np.maximum(k, 0)] < tq)
            if not up.any():
                break
            k[up] = parent[k[up]]
        hit = k >= 0
        out[qi[hit]] = aj[k[hit]]
    return out


def _enclosing_ids(t: np.ndarray, tid: np.ndarray, links: Mapping[str, np.ndarray]) -> pd.arrays.IntegerArray:
    """External id of the innermost CPU op that encloses time ``t`` on thread ``tid`` (<NA> if none)."""
    j = _enclosing(t, tid, links)
    found = j >= 0
    out = np.zeros(len(t), dtype=np.int64)
    out[found] = links["ext"][j[found]]
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
        book.note("external_id_from_launch", "every kernel's 'External id' equals its correlation id (older "
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


def _format_flags(col: _Collector, doc: _Document, book: _Book) -> None:
    if col.not_objects:
        book.reject_rows(col.not_objects, None, "entry of traceEvents is not a JSON object")
    for rows, key, reasons in col.nested:
        book.reject_rows(rows, key, reasons)
    if doc.format == "bare_array" or col.legacy_cats:
        layout = "a bare event array" if doc.format == "bare_array" else "the object form"
        cats = f"; capitalised categories {sorted(col.legacy_cats)} normalised" if col.legacy_cats else ""
        book.note("legacy_format", f"legacy trace layout ({layout}{cats})")
    for cat, count in sorted(col.unknown_cats.items()):
        book.note("unknown_category", f"category {cat!r} is not a known Kineto activity type: its {count} "
                                      f"complete events are kept with kind 'other'")
    paired = {p: c for p, c in col.phase_counts.items() if p in ("B", "E")}
    if paired:
        book.note("unsupported_phase", f"begin/end events {paired} are not read (only complete 'X' events "
                                       f"are)")


def _comm_semantics(gk: Mapping[str, np.ndarray], kind: np.ndarray, names: np.ndarray, rows_k: np.ndarray,
                    book: _Book, n_k: int, classifier: Classifier) -> dict[str, Any]:
    """Return collective type, bytes, process group, sequence and ``comm_rule`` from the kernels' own args.

    Metadata first: a kernel (``compute`` by its name) whose ``Collective name`` arg names a collective
    becomes ``comm`` in place in ``kind``; its rule is ``metadata:Collective name``.
    """
    collective = np.full(n_k, "none", dtype=object)
    source = np.full(n_k, "none", dtype=object)
    if not n_k:
        return {"collective": collective, "source": source, "bytes": np.zeros(0),
                "pg": np.zeros(0, dtype=object), "seq": pd.array([], dtype="Int64"),
                "is_comm": np.zeros(0, dtype=bool), "rule": _objects([], 0)}
    comm = kind == "comm"
    raw = gk["Collective name"]
    from_arg, recognised = _collectives_from_arg(raw)
    unrec = comm & ~np.equal(raw, None) & ~recognised
    if unrec.any():
        values = sorted({str(v) for v in raw[unrec]})
        book.note("unknown_collective_name", f"'Collective name' values {values} not recognised: collective "
                                             f"taken from the host annotation or the kernel name instead")
    # metadata first: a kernel whose own args name a collective is communication whatever its name says
    has_arg = np.isin(kind, ("compute", "comm")) & recognised
    kind[has_arg] = "comm"
    comm = kind == "comm"
    rules = _per_value(names, classifier.comm_rules, ("comm rule", classifier.fingerprint()), "")
    rule = np.where(comm, rules, "").astype(object)
    rule[has_arg] = comm_rule_metadata("Collective name")
    collective[has_arg] = from_arg[has_arg]
    source[has_arg] = "args"
    nbytes, nelems = _message_bytes(gk["In msg nelems"], gk["dtype"], rows_k, book)
    unknown_dtype = comm & ~np.equal(nelems, None) & np.isnan(nbytes)
    if unknown_dtype.any():
        book.note("unknown_dtype", f"{int(unknown_dtype.sum())} collectives have a dtype of unknown size "
                                   f"({sorted({str(d) for d in gk['dtype'][unknown_dtype]})}): bytes missing")
    copy_bytes = _to_floats(gk["bytes"])
    is_copy = (kind == "memcpy") | (kind == "memset")
    nbytes = np.where(is_copy, copy_bytes, np.where(comm, nbytes, np.nan))
    pg = np.where(np.equal(gk["Process Group Name"], None), gk["Process Group Description"],
                  gk["Process Group Name"])
    seq = _ids(gk["seq"], rows_k, book, "Seq")
    return {"collective": collective, "source": source, "bytes": nbytes, "pg": pg, "seq": seq,
            "is_comm": comm, "rule": rule}


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
        graph_call = _per_value(r["name"], is_graph_launch, "graph launch", False).astype(bool) & r_ok
        n_launch = int(graph_call.sum())
        valid = r_ok & ~np.asarray(pd.isna(r_corr))
        if n_k and valid.any():
            # each correlation id's first launch call; each kernel's, looked up among them
            ids, first = np.unique(r_corr[valid].to_numpy(dtype=np.int64), return_index=True)
            sub = np.flatnonzero(valid)[first]
            have = np.flatnonzero(~np.asarray(pd.isna(corr)))
            wanted = corr[have].to_numpy(dtype=np.int64)
            at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
            hit = ids[at] == wanted
            pos = np.full(n_k, -1)
            pos[have[hit]] = at[hit]
            found = pos >= 0
            launch_us[found] = r_start[sub[pos[found]]]
            launch_tid[found] = r["tid"][sub[pos[found]]]
            graph[found] |= graph_call[sub[pos[found]]]
    if graph.any() or n_launch:
        book.note("cuda_graph", f"{n_launch} graph launch call(s), {int(graph.sum())} kernel(s) attributed "
                                f"to graph replay: the per-kernel breakdown is less reliable (profilers "
                                f"under-record graph kernels and lose their host linkage)")
    collective, source = comm["collective"], comm["source"]
    nbytes, pg, seq = comm["bytes"], comm["pg"], comm["seq"]
    need = comm["is_comm"] & (source == "none")
    if need.any() and s:
        ann = _host_annotations(s, origin, scale, book)
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
        guess = _per_value(gk["name"][left], collective_from_kernel_name, "collective of a name", "none")
        collective[left] = guess
        source[left] = np.where(guess != "none", "name", "none")
    have = np.isfinite(nbytes) & (np.abs(nbytes) < 2.0 ** 63)
    data = np.zeros(len(nbytes), dtype=np.int64)
    data[have] = np.round(nbytes[have]).astype(np.int64)
    comm["bytes"] = pd.arrays.IntegerArray(data, ~have)
    comm["pg"] = np.where(np.equal(pg, None), "", pg).astype(str) if n_k else np.zeros(0, dtype=str)
    return launch_us, graph, launch_tid


def _by_launcher(lk: Mapping[str, np.ndarray], origin: int, scale: float, launch_us: np.ndarray,
                 launch_tid: np.ndarray, cats: np.ndarray, kind: np.ndarray, comm: dict[str, Any],
                 links: Mapping[str, np.ndarray] | None) -> None:
    """Classify kernels by the op, annotation or Python function that launched them (in place).

    Second of the three rules (metadata, launcher, name): a kernel not made communication by its
    metadata whose launch call lies inside a CPU op, user annotation or Python function whose name
    says a collective (:func:`~fleetlib.program.classify.collective_from_launcher`; the innermost
    such span on the launching thread) is ``comm`` with ``comm_rule`` ``launcher:<name>``, and takes
    the launcher's collective type where neither its args nor a collective annotation gave one.
    Except where PyTorch's own operator (an ``aten::`` CPU op that says no collective) lies inside
    that span and encloses the launch: the kernel is that operator's work (a copy-in, a permute).
    """
    if not lk or not len(kind):
        return
    ts, du, ok = _times(lk, None)
    start = _to_us(ts, origin, scale)
    end = start + du.astype(np.float64) / scale
    ok &= end >= start
    spans = {"start": start[ok], "end": end[ok], "tid": lk["tid"][ok], "name": lk["name"][ok]}
    rule = comm["rule"]
    open_ = (cats == "kernel") & np.isin(kind, ("compute", "comm")) & ~_per_value(
        rule, lambda v: np.array([str(x).startswith("metadata:") for x in v]), "metadata rule", False
    ).astype(bool)
    q = np.flatnonzero(open_)
    j = _enclosing(launch_us[q], launch_tid[q], spans)
    if links is not None and (j >= 0).any():  # an aten:: op inside the launcher launched it
        h = np.flatnonzero(j >= 0)
        op = _enclosing(launch_us[q[h]], launch_tid[q[h]], links)
        inner = op >= 0
        o = op[inner]
        ls = spans["start"][j[h][inner]]
        le = spans["end"][j[h][inner]]
        nested = (links["start"][o] > ls) | ((links["start"][o] == ls) & (links["end"][o] < le))
        own = _per_value(links["name"][o], lambda v: np.array(
            [isinstance(x, str) and x.startswith("aten::") for x in v]), "aten op", False).astype(bool)
        says = _per_value(links["name"][o], collective_from_launcher, "launcher collective", "none") != "none"
        veto = h[inner][nested & own & ~says]
        j[veto] = -1
    hit = j >= 0
    if not hit.any():
        return
    idx, jj = q[hit], j[hit]
    names = spans["name"][jj]
    kind[idx] = "comm"
    comm["is_comm"][idx] = True
    rule[idx] = _per_value(names, lambda v: np.array([comm_rule_launcher(str(x)) for x in v], dtype=object),
                           "launcher rule", "")
    take = np.isin(comm["source"][idx], ("name", "none"))
    coll = _per_value(names, collective_from_launcher, "launcher collective", "none")
    comm["collective"][idx[take]] = coll[take]
    comm["source"][idx[take]] = "host_annotation"


def _flag_name_only(kind: np.ndarray, rule: np.ndarray, names: np.ndarray, dur: np.ndarray,
                    book: _Book) -> None:
    """Note the communication kernels that only their name made communication (``comm_by_name_only``)."""
    only = (kind == "comm") & (classified_by(rule) == "name")
    if not only.any():
        return
    top = Counter(names[only].tolist()).most_common(3)
    us = float(dur[only].sum())
    book.note("comm_by_name_only", f"{int(only.sum())} communication kernels ({us:.6g} µs) "
                                   f"were found by their name only (no collective metadata, no launching op "
                                   f"or annotation naming a collective), e.g. {[n for n, _ in top]}")


def _platform(top: Mapping[str, Any], runtime_names: np.ndarray) -> str:
    keys = " ".join(map(str, top)).lower()
    if "roctracer" in keys or "rocm" in keys or "hip_" in keys:
        return "rocm"
    if "cuda" in keys or "cupti" in keys:
        return "cuda"
    try:
        distinct = set(runtime_names.tolist())
    except TypeError:  # an unhashable name (a malformed trace)
        distinct = set(map(str, runtime_names.tolist()))
    runtime = [str(x) for x in distinct if x is not None and x == x]
    if any(x.startswith("hip") for x in runtime):
        return "rocm"
    if any(x.startswith("cu") for x in runtime):
        return "cuda"
    return "unknown"


def _repair_overlaps(start: np.ndarray, end: np.ndarray, stream: np.ndarray, device: np.ndarray,
                     kind: np.ndarray, rows: np.ndarray, book: _Book,
                     tol: float, clip: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Trim rounding overlaps between consecutive activities on one stream; flag larger ones.

    With ``clip`` (ROCm traces, whose same-stream durations overlap by more than rounding: a
    stream still runs one activity at a time) larger overlaps are clipped the same way, each one a
    repair ``rocm_stream_overlap_clipped`` in the ledger, and counted in a ``stream_overlap_clipped``
    note.  Returns the new end times and a mask of the rows whose end was moved.
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

    def move_back(which: np.ndarray, reasons: list[str]) -> np.ndarray:
        """End each chosen activity at the next one's start (never before its own), booked as a repair."""
        p, q = prev[which], nxt[which]
        book.repair_rows(rows[p], "dur", reasons)
        moved = end.copy()
        moved[p] = np.maximum(start[q], start[p])
        trimmed[p] = True
        return moved

    if small.any():
        end = move_back(small, [f"ns_rounding_overlap: end moved back {o * 1000:.4g} ns to the start of the "
                                f"next activity on stream {st}"
                                for o, st in zip(over[small], stream[prev[small]], strict=True)])
    if large.any() and clip:
        end = move_back(large, [f"rocm_stream_overlap_clipped: end moved back {o:.6g} µs to the start of the "
                                f"next activity on stream {st}"
                                for o, st in zip(over[large], stream[prev[large]], strict=True)])
        book.note("stream_overlap_clipped", f"{int(large.sum())} activities overlapped the next one on the "
                                            f"same stream by more than {tol:g} µs (ROCm trace; largest "
                                            f"{float(over[large].max()):.6g} µs, total "
                                            f"{float(over[large].sum()):.6g} µs): clipped")
    elif large.any():
        book.note("stream_overlap", f"{int(large.sum())} activities overlap the next one on the same stream "
                                    f"by more than {tol:g} µs (largest {float(over[large].max()):.6g} µs): "
                                    f"kept as recorded")
    return end, trimmed


def _host_annotations(s: Mapping[str, np.ndarray], origin: int, scale: float,
                      book: _Book | None = None) -> dict[str, Any] | None:
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
    from_arg, recognised = _collectives_from_arg(s["Collective name"][use])
    coll[recognised] = from_arg[recognised]
    nccl = is_nccl[use]
    coll[nccl] = _per_value(names[use][nccl], collective_from_annotation, "collective of an annotation",
                            "none")
    b_arg, _ = _message_bytes(s["In msg nelems"][use], s["dtype"][use], s["row"][use], book)
    count, first_type = first_shape_elements(s["Input Dims"][use].tolist(), s["Input type"][use].tolist())
    b_shape = _bytes(count, first_type)  # classify.shape_bytes: the first shape's elements, its dtype
    nbytes = np.where(np.isnan(b_arg), b_shape, b_arg)
    pg = np.where(np.equal(s["Process Group Name"][use], None), s["Process Group Description"][use],
                  s["Process Group Name"][use])
    seq = _to_floats(s["seq"][use])
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
        book.note("steps_from_markers", f"no ProfilerStep#N annotation: {len(start)} step windows from "
                                        f"annotations matching {opts.step_marker!r}")
    return _step_frame(number, start, start + dur, source, book)


def _step_frame(number: np.ndarray, start: np.ndarray, end: np.ndarray, source: str,
                book: _Book | None) -> pd.DataFrame:
    """Step windows, one per step number (a step annotated twice is their union), sorted by start."""
    steps, inverse, counts = np.unique(number, return_inverse=True, return_counts=True)
    if book is not None and (counts > 1).any():
        book.note("duplicate_step_annotation", f"steps {steps[counts > 1].tolist()} are annotated more than "
                                               f"once: each window is their union")
    lo = np.full(len(steps), np.inf)
    hi = np.full(len(steps), -np.inf)
    np.minimum.at(lo, inverse, start)
    np.maximum.at(hi, inverse, end)
    order = np.argsort(lo, kind="stable")
    steps, lo, hi = steps[order].astype(np.int64), lo[order], hi[order]
    if book is not None and (lo[1:] < hi[:-1]).any():
        book.note("overlapping_steps", "step windows overlap: an activity belongs to the latest window that "
                                       "starts at or before it")
    n = len(steps)
    dtypes = table_dtypes("steps")
    return pd.DataFrame({
        "rank": np.zeros(n, dtype=np.int64), "step": pd.arrays.IntegerArray(steps, np.zeros(n, dtype=bool)),
        "start_us": lo, "end_us": hi,
        "source": pd.Categorical.from_codes(np.full(n, STEP_SOURCES.index(source)), dtype=dtypes["source"]),
    }, index=pd.RangeIndex(n), copy=False)


def _fallback_steps(start: np.ndarray, end: np.ndarray, kind: np.ndarray, col: _Collector, origin: int,
                    scale: float, marker: re.Pattern[str] | None, book: _Book) -> pd.DataFrame:
    """One documented window when the trace has no step annotation (never an empty table)."""
    work = np.isin(kind, ("compute", "comm", "memcpy", "memset"))
    also = " and no annotation matching the step marker" if marker is not None else ""
    if work.any():
        lo, hi, source = float(start[work].min()), float(end[work].max()), "gpu_span"
        book.note("no_profiler_step", f"no ProfilerStep#N annotation{also}: step 0 is the span from the "
                                      f"first GPU activity's start to the last one's end")
    else:
        lo, hi, source = (col.window[0] - origin) / scale, (col.window[1] - origin) / scale, "trace_span"
        book.note("no_profiler_step", f"no ProfilerStep#N annotation{also} and no GPU activity: step 0 is "
                                      f"the span of all timed events")
    return _step_frame(np.zeros(1, dtype=np.int64), np.array([lo]), np.array([hi]), source, None)


def _host_sync_table(r: Mapping[str, np.ndarray], origin: int, scale: float, steps: pd.DataFrame,
                     book: _Book, opts: _Options,
                     step_index: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    if not r:
        return empty_host_syncs()
    found = _per_value(r["name"], lambda u: zip(*host_sync_kinds(u), strict=True), "host sync", (None, False))
    kinds, blocks = zip(*found.tolist(), strict=True) if len(found) else ((), ())
    sync_kind = _objects(kinds, len(found))
    blocking = np.array(blocks, dtype=bool)
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
        "step": _assign_steps(start[order], steps, step_index),
        "tid": pd.arrays.IntegerArray(np.where(missing, 0, tids).astype(np.int64), missing),
        "start_us": start[order], "end_us": start[order] + dur[order], "dur_us": dur[order],
        "name": _text_categorical(sub["name"][order].astype(str)),
        "sync_kind": _text_categorical(sync_kind[is_sync][order].astype(str)),
        "blocking": blocking[is_sync][order].astype(bool),
    }, index=pd.RangeIndex(len(order)), copy=False)




def _timed_rows(sub: dict[str, np.ndarray], book: _Book, origin: Any, scale: float, opts: _Options,
                what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Count ``sub``'s rows as read; return start (µs), duration (µs) and the rows still valid.

    Rows with a negative duration, or one longer than ``opts.max_event_us``, are rejected in the
    ledger with ``what`` naming the kind of event.
    """
    rows = sub["row"]
    ts, du, ok = _times(sub, book)
    start = _to_us(ts, origin, scale)
    dur = du.astype(np.float64) / scale
    neg = ok & (dur < 0)
    if neg.any():
        book.reject_rows(rows[neg], "dur", f"{what} with a negative duration")
    ok &= ~neg
    long_ = ok & (dur > opts.max_event_us)
    if long_.any():
        book.reject_rows(rows[long_], "dur", f"{what} longer than max_event_us={opts.max_event_us:g}")
    return start, dur, ok & ~long_


# ---------------------------------------------------------------------------------------------------
# Paths and ranks
# ---------------------------------------------------------------------------------------------------

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


def trace_files(paths_or_dir: PathLike | Iterable[PathLike], *, ledger: Ledger | None = None) -> list[Path]:
    """Expand a directory, a file or a list of them into trace files.

    Parameters
    ----------
    paths_or_dir
        A trace file, a directory (its ``*.json`` and ``*.json.gz`` files, not recursing), or
        an iterable of either.  A folder's entries are confined to it (a link leading out is
        refused) and a named pipe or device among them is flagged in ``ledger`` (refused without
        one); see :func:`fleetlib._io.listed_files`.  An fsspec URL (a trace or a folder of them in
        object storage) is listed through fsspec and stays a URL: whoever reads it (a Dask worker)
        opens it there, and every ledger row and file list names the URL.
    ledger
        Where special files found in a folder are noted.

    Returns
    -------
    list of Path
        Files in the order given; a directory's files sorted by name (a URL's as ``str`` URLs).

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
        if is_url(item):  # object storage: listed through fsspec, its files stay URLs (read where handed)
            kind = url_kind(str(item))
            if kind is None:
                raise InputError("file not found", file=str(item))
            found = listed_files(item, (".json", ".json.gz")) if kind == "directory" else [str(item)]
            if not found:
                raise DomainError(f"directory {item} holds no *.json or *.json.gz trace file")
            out.extend(found)
            continue
        p = Path(item)
        if p.is_dir():
            found = listed_files(p, (".json", ".json.gz"), ledger=ledger)
            if not found:
                raise DomainError(f"directory {p} holds no *.json or *.json.gz trace file")
            out.extend(found)
        elif p.exists():
            out.append(p)
        else:
            raise InputError("file not found", file=str(p))
    return out



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


def _resolve_rank(path: Path, metadata: Mapping[str, Any], rank: int | None,
                  ledger: Ledger) -> tuple[int, str]:
    file = str(path)
    dist = metadata.get("distributed_info") or {}
    raw = dist.get("rank") if isinstance(dist, dict) else None
    content = _small_int(raw)
    if content is not None and content < 0:
        content = None
    if raw is not None and content is None:
        ledger.flag("invalid_distributed_rank", f"distributedInfo.rank is {raw!r}, not a rank: ignored",
                    file=file)
    if rank is not None:
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 0:
            raise DomainError(f"rank must be an integer >= 0; got {rank!r}")
        if content is not None and content != rank:
            ledger.flag("rank_override", f"rank {rank} given explicitly; the trace's distributedInfo says "
                                         f"{content}", file=file)
        elif content is None:
            ledger.flag("rank_from_mapping", f"no distributedInfo.rank: rank {rank} from the explicit "
                                             "mapping", file=file)
        return int(rank), "explicit"
    if content is not None:
        return content, "distributedInfo"
    named = rank_from_file_name(path)
    if named is not None:
        ledger.flag("rank_from_file_name", f"no distributedInfo.rank: rank {named} taken from the file name",
                    file=file)
        return named, "file_name"
    ledger.flag("rank_assumed_zero", "no distributedInfo.rank, no rank in the file name and no mapping: "
                                     "rank 0 assumed (pass rank= or ranks= to say otherwise)", file=file)
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
        Use and fill the trace cache (keyed by the SHA-256 of the file's bytes, the reader version
        and the options below).
    rank
        The rank to give the rows; overrides ``distributedInfo.rank`` (flagged when they differ).
        Without it the rank is ``distributedInfo.rank``, else the number in the file name (flagged),
        else 0 (flagged).
    cache_dir
        Cache folder (default :func:`fleetlib.program.readers._cache.default_cache_dir`).
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
    p = path if is_url(path) else Path(path)  # a URL is read through fsspec where this runs
    opts = _options(classifier, step_marker, time_unit, max_event_us, overlap_tolerance_us)
    file = str(p)
    raw = stored_bytes(p)  # checked as every input is; hashed for the cache key before gunzip
    sha = hashlib.sha256(raw).hexdigest()
    folder = Path(cache_dir).expanduser() if cache_dir is not None else _cache.default_cache_dir()
    key = f"{sha}-{opts.digest()}-r{READER_VERSION}"
    hit = _cache.load(folder, key) if cache else None
    if hit is not None:  # the tables, metadata and ledger of the file that was read under this key
        built, ledger, cached_file = hit
        ledger = _moved(ledger, cached_file, file)
    else:
        with collector_paused():  # decoding builds many containers and no cycles
            held = [raw]
            del raw  # _parse drops the compressed bytes once they are decompressed
            built, ledger = _parse(held, file, sha, opts)
        if cache:
            try:
                _cache.store(folder, key, (built, ledger, file))
            except OSError as exc:
                ledger.flag("cache_not_written", f"could not write the cache file "
                                                 f"{_cache.entry_path(folder, key)} ({exc})", file=file)
    r, source = _resolve_rank(p, built.metadata, rank, ledger)
    for frame in (built.kernels, built.steps, built.host_syncs, built.ops):
        frame["rank"] = np.full(len(frame), r, dtype=np.int64)
    metadata = {**built.metadata, "rank": r, "rank_source": source, "file": file}
    ledger.flags = [replace(f, rank=r) for f in ledger.flags]
    return TraceRead(p, r, built.kernels, built.steps, built.host_syncs, metadata, ledger, hit is not None,
                     time.perf_counter() - t0, built.ops)


def _moved(ledger: Ledger, cached: str, file: str) -> Ledger:
    """Return the ledger of a cache entry written for file ``cached``, its rows and flags naming ``file``."""
    if cached != file:
        ledger.entries = [replace(e, file=file) if e.file == cached else e for e in ledger.entries]
        ledger.flags = [replace(f, file=file) if f.file == cached else f for f in ledger.flags]
    return ledger


def _bar(enabled: bool, total: int) -> Any:
    """Return a tqdm bar over ``total`` files (None when disabled or tqdm is missing)."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the bar is a convenience: reading works without it
        return None
    return tqdm(desc="traces", unit="file", total=total)


def _worker_threads(client: Any) -> int:
    """Return the number of worker threads of a Dask client's cluster (1 when it cannot say)."""
    try:
        workers = client.scheduler_info().get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
    except Exception:  # a client without a scheduler view (a test double): one at a time
        return 1


#: A Dask task reads files of at most this many compressed bytes together (one file when it is larger).
_BATCH_BYTES = 8 << 20
#: ... and at most this many files, so that results come back (and the bar moves) steadily.
_BATCH_FILES = 32


def _batches(files: Sequence[Path], threads: int) -> list[range]:
    """Cut the files into consecutive batches, one Dask task each.

    A batch holds at most :data:`_BATCH_BYTES` of compressed input (a larger file is a batch alone)
    and at most :data:`_BATCH_FILES` files, and there are at least four batches per worker thread
    when there are files enough: many small rank files share one task's overhead (scheduling, one
    round trip, one pickled result) while memory per task stays bounded.
    """
    n = len(files)
    per = max(1, min(_BATCH_FILES, -(-n // (4 * max(1, threads)))))
    sizes = []
    for f in files:
        try:
            sizes.append(stored_size(f))
        except InputError:  # read_trace names the missing file in its error
            sizes.append(0)
    out, lo, total = [], 0, 0
    for i, size in enumerate(sizes):
        if i > lo and (i - lo >= per or total + size > _BATCH_BYTES):
            out.append(range(lo, i))
            lo, total = i, 0
        total += size
    if lo < n:
        out.append(range(lo, n))
    return out


def _read_batch(files: Sequence[Path], kwargs: Sequence[dict[str, Any]]) -> bytes:
    """Read several files in one Dask task; return their results pickled into one bytes object.

    Each file's :class:`TraceRead` (or the :class:`InputError` it raised), in file order.

    Handed back as they are, a batch's results are serialised by Dask with every numpy array of
    every table as a frame of its own (about 70 a rank file), on communication threads that compete
    with the next parse; one pickle made in the task moves the same objects as a single frame.
    """
    out: list[TraceRead | InputError] = []
    for f, kw in zip(files, kwargs, strict=True):
        try:
            out.append(read_trace(f, **kw))
        except InputError as exc:
            out.append(exc)
    return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


def _gather(client: Any, files: Sequence[Path], kwargs: Sequence[dict[str, Any]], batches: Sequence[range],
            window: int, on_batch: Callable[[int, list[Any]], None], bar: Any = None) -> None:
    """Read ``batches`` of ``files`` as Dask tasks; call ``on_batch(b, results)`` as each completes.

    At most ``window`` tasks are in flight: a finished batch is handed over (and its result freed on
    its worker) before the next is submitted, so no worker holds more than a few batches' tables.
    ``results`` are the batch's :class:`TraceRead` objects or :class:`InputError` in file order;
    ``on_batch`` may raise, which cancels the tasks in flight.
    """
    from distributed import as_completed

    pending = iter(range(len(batches)))
    live: dict[str, tuple[int, Any]] = {}  # the futures not yet handed over, by key

    def submit(b: int) -> Any:
        idx = batches[b]
        fut = client.submit(_read_batch, [files[i] for i in idx], [kwargs[i] for i in idx], pure=False)
        live[fut.key] = (b, fut)
        return fut

    running = as_completed([submit(b) for b in islice(pending, max(1, window))])
    try:
        for fut in running:
            b, _ = live.pop(fut.key)
            packed = fut.result()
            del fut  # the last reference: the worker frees the result
            results = pickle.loads(packed)
            del packed
            nxt = next(pending, None)
            if nxt is not None:  # keep the workers busy before the client's own work on this batch
                running.add(submit(nxt))
            on_batch(b, results)
            if bar is not None:
                bar.update(len(batches[b]))
    finally:
        if live:
            client.cancel([f for _, f in live.values()])
        running.clear()


#: The tables of a trace file: name, free categorical columns (their categories are the names
#: present), time columns (moved onto a common time base) and the columns the rows are sorted by.
_TABLE_PARTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("kernels", ("name", "process_group", "comm_rule"), ("start_us", "end_us", "launch_us"),
     ("rank", "start_us", "end_us", "stream")),
    ("steps", (), ("start_us", "end_us"), ("rank", "start_us")),
    ("host_syncs", ("name", "sync_kind"), ("start_us", "end_us"), ("rank", "start_us")),
    ("ops", ("name",), ("start_us",), ("rank", "start_us")),
)


def _concat(frames: Sequence[pd.DataFrame], table: str, free: Sequence[str]) -> pd.DataFrame:
    """Return the rows of ``frames`` in one table (``pd.concat(frames, ignore_index=True)``).

    A free categorical column (``free``: names, process groups ...) whose categories differ from
    frame to frame takes the sorted union of them in every frame first, so that it stays
    categorical (``pd.concat`` would make it objects).
    """
    frames = [f for f in frames if len(f)]
    if not frames:
        return _empty(table)
    changed: dict[str, pd.CategoricalDtype] = {}
    for c in free:
        dtypes = [f[c].dtype for f in frames]
        if any(d != dtypes[0] for d in dtypes[1:]):
            union = sorted(set().union(*(d.categories.tolist() for d in dtypes)))
            changed[c] = pd.CategoricalDtype(pd.Index(union, dtype="str"))
    if changed:
        frames = [f.assign(**{c: f[c].cat.set_categories(d.categories) for c, d in changed.items()})
                  for f in frames]
    return pd.concat(frames, ignore_index=True)


class _Merger:
    """Join the per-rank tables of many trace reads in two levels, the first while reads arrive.

    :meth:`add` joins one batch of reads (a Dask task's files, in file order) into one piece per
    table, and can run while workers still parse the next batches; :meth:`finish` joins the pieces
    in batch order, moves every rank onto the common time base and sorts.
    """

    def __init__(self) -> None:
        self.pieces: dict[int, dict[str, pd.DataFrame]] = {}

    def add(self, batch: int, reads: Sequence[TraceRead]) -> None:
        """Join the tables of ``reads`` as piece ``batch``."""
        self.pieces[batch] = {name: _concat([getattr(r, name) for r in reads], name, free)
                              for name, free, _, _ in _TABLE_PARTS}

    def finish(self, shift_by_rank: Mapping[int, float]) -> dict[str, pd.DataFrame]:
        """Return the four joined tables, each rank's times moved by its shift (µs), sorted."""
        order = sorted(self.pieces)
        out = {}
        for name, free, times, keys in _TABLE_PARTS:
            # each table's pieces are dropped once joined (the client holds less at its peak)
            frame = _concat([self.pieces[b].pop(name) for b in order], name, free)
            out[name] = _sort(_shift(frame, times, shift_by_rank), list(keys))
        self.pieces.clear()
        return out


def _shift(frame: pd.DataFrame, times: Sequence[str], shift_by_rank: Mapping[int, float]) -> pd.DataFrame:
    """Add each row's rank's shift to the time columns (rows of ranks with no shift untouched)."""
    moved = {r: s for r, s in shift_by_rank.items() if s}
    if not moved or frame.empty:
        return frame
    ranks = np.fromiter(moved, dtype=np.int64, count=len(moved))
    shifts = np.fromiter(moved.values(), dtype=np.float64, count=len(moved))
    order = np.argsort(ranks)
    ranks, shifts = ranks[order], shifts[order]
    row_rank = frame["rank"].to_numpy()
    at = np.minimum(np.searchsorted(ranks, row_rank), len(ranks) - 1)
    hit = ranks[at] == row_rank
    if not hit.any():
        return frame
    frame = frame.copy(deep=False)
    for c in times:
        values = frame[c].to_numpy(dtype=np.float64, copy=True)
        values[hit] = values[hit] + shifts[at[hit]]
        frame[c] = values
    return frame


def _sort(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Return ``frame`` sorted by ``keys`` (stable), or as it is when its rows are in that order.

    Ranks read in rank order are in order: each file's table is sorted, and a shift per rank keeps it.
    """
    if len(frame) > 1:
        undecided = np.ones(len(frame) - 1, dtype=bool)  # consecutive rows tied on the keys so far
        for k in keys:
            values = frame[k].to_numpy()
            before, after = values[:-1], values[1:]
            if (undecided & ~(before <= after)).any():  # out of order (or NaN): sort
                return frame.sort_values(keys, kind="stable", ignore_index=True)
            undecided &= before == after
            if not undecided.any():
                break
    return frame


def _read_all(files: list[Path], kwargs: list[dict[str, Any]], progress: bool, errors: str,
              client: Any, in_flight: int | None = None) -> tuple[list[TraceRead], Ledger, _Merger]:
    """Read every file, serially or as Dask tasks of a few files each; return the reads in file order.

    Each batch of files read is joined into one piece per table as soon as it is back (a
    :class:`_Merger`, returned): on Dask while the workers parse the next batches.  On Dask the
    files are cut into batches (:func:`_batches`) and at most
    ``in_flight`` batches (default twice the cluster's worker threads) are submitted at a time, so
    a worker's memory holds a bounded number of files however many are read; serially a batch is
    :data:`_BATCH_FILES` consecutive files.

    An :class:`InputError` raises (``errors="raise"``) or becomes a rejected ``file`` row.
    """
    results: list[TraceRead | InputError | None] = [None] * len(files)
    merger = _Merger()

    def take(b: int, idx: range, got: list[TraceRead | InputError]) -> None:
        for i, res in zip(idx, got, strict=True):
            if isinstance(res, InputError) and errors == "raise":
                raise res
            results[i] = res
        merger.add(b, [r for r in got if isinstance(r, TraceRead)])

    bar = _bar(progress, len(files))
    try:
        if client is None:
            step = max(1, _BATCH_FILES)
            for b, lo in enumerate(range(0, len(files), step)):
                idx = range(lo, min(lo + step, len(files)))
                got: list[TraceRead | InputError] = []
                for i in idx:
                    try:
                        got.append(read_trace(files[i], **kwargs[i]))
                    except InputError as exc:
                        if errors == "raise":
                            raise
                        got.append(exc)
                    if bar is not None:
                        bar.update(1)
                take(b, idx, got)
        else:
            threads = _worker_threads(client)
            batches = _batches(files, threads)
            _gather(client, files, kwargs, batches, in_flight or 2 * threads,
                    lambda b, got: take(b, batches[b], got), bar)
    finally:
        if bar is not None:
            bar.close()
    reads: list[TraceRead] = []
    failures = Ledger()
    for p, res in zip(files, results, strict=True):
        if isinstance(res, TraceRead):
            reads.append(res)
        else:
            failures.read += 1
            failures.reject(str(p), getattr(res, "row", None), "file", str(res))
    return reads, failures, merger


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
        Use and fill the trace cache.
    progress
        Show a progress bar over files (tqdm, when installed).
    ranks
        Explicit rank per file, keyed by path or by file name; overrides ``distributedInfo``.
    cache_dir
        Cache folder (default :func:`fleetlib.program.readers._cache.default_cache_dir`).
    errors
        ``"raise"`` (default): an unreadable file raises :class:`fleetlib.quality.InputError`.
        ``"skip"``: it becomes a rejected row (field ``file``) of the merged ledger and the other
        files are read.
    classifier, step_marker, time_unit, max_event_us, overlap_tolerance_us
        As in :func:`read_trace`.
    client
        A ``distributed.Client``: the files are read as tasks of a few consecutive files each (at
        most 32 files or 8 MB of compressed input per task, one file when larger; :func:`read_trace`
        on a worker, which also reads and fills the cache there -- a shared cache directory lets
        workers and later serial reads reuse it), gathered as they complete with the same progress
        bar; the merge, time-base shift and flags are those of the serial path, so the result is
        identical.  Each batch's tables are joined on the client as soon as the batch is back,
        while the workers parse the next ones, so little is left to do after the last file (the
        batch pieces joined, each rank's rows moved onto the common base, the sorts, skipped when
        the rows are already in order).  At most twice as many tasks as the cluster has worker
        threads are in flight, and each result is released on its worker once gathered, so a
        worker's memory holds one batch being parsed and a few finished ones whatever the number
        of files.
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
    listing = Ledger()
    files = trace_files(paths_or_dir, ledger=listing)
    mapping = {str(k): int(v) for k, v in (ranks or {}).items()}
    _options(classifier, step_marker, time_unit, max_event_us, overlap_tolerance_us)  # fail before any task
    common = {"cache": cache, "cache_dir": cache_dir, "classifier": classifier, "step_marker": step_marker,
              "time_unit": time_unit, "max_event_us": max_event_us,
              "overlap_tolerance_us": overlap_tolerance_us}
    kwargs = [{**common, "rank": mapping.get(str(p), mapping.get(posixpath.basename(str(p))))} for p in files]
    reads, failures, merger = _read_all(files, kwargs, progress, errors, client)
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
    ledger = Ledger()
    for tr in reads:
        ledger.extend(tr.ledger)
    ledger.extend(failures)
    ledger.extend(listing)
    base = min(int(tr.metadata["base_time_ns"]) for tr in reads)
    # each rank's shift onto the common base; the merger adds it to that rank's rows (where not 0)
    shift_by_rank = {tr.rank: (int(tr.metadata["base_time_ns"]) - base) / 1000.0 for tr in reads}
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
    tables = merger.finish(shift_by_rank)
    k_all, s_all, h_all, o_all = (tables[t] for t in ("kernels", "steps", "host_syncs", "ops"))
    return TraceSet(k_all, s_all, h_all, {tr.rank: tr.metadata for tr in reads}, ledger, base, reads, o_all)


# ---------------------------------------------------------------------------------------------------
# The reader protocol (fleetlib.registry) and the traces' calendar clock
# ---------------------------------------------------------------------------------------------------

def calendar_base_ns(metadata: Mapping[str, Any]) -> int | None:
    """Return a file's time base in unix nanoseconds when it is a calendar clock, else None.

    A trace carries a calendar clock when its times count from the unix epoch: Kineto's
    ``baseTimeNanoseconds``, or absolute unix timestamps (then the earliest second is the base).
    A base before :data:`CALENDAR_EPOCH_NS` is a relative clock.

    Parameters
    ----------
    metadata
        One file's :attr:`TraceRead.metadata`.
    """
    base = int(metadata.get("base_time_ns") or 0)
    return base if base >= CALENDAR_EPOCH_NS else None


def has_calendar_clock(traces: TraceSet) -> bool:
    """Return True when every file of ``traces`` carries a calendar clock."""
    return bool(traces.metadata) and all(calendar_base_ns(md) is not None for md in traces.metadata.values())


def utc(traces: TraceSet, us: Any) -> pd.DatetimeIndex:
    """Return times in µs on the common time base of ``traces`` as UTC timestamps (to the ns).

    Raises
    ------
    DomainError
        The traces carry no calendar clock (see :func:`has_calendar_clock`).
    """
    if not has_calendar_clock(traces):
        raise DomainError("the traces carry no calendar clock: their times count from an unknown origin")
    ns = int(traces.base_time_ns) + np.round(np.asarray(us, dtype=np.float64) * 1000.0).astype(np.int64)
    return pd.to_datetime(ns, unit="ns", utc=True)


def select_window(traces: TraceSet, window: Window) -> None:
    """Keep the step windows that lie inside ``window``, with their kernels and host syncs (in place).

    Parameters
    ----------
    traces
        What :func:`read_traces` (or :func:`fleetlib.program.readers.nsys.read_nsys`) returned.
    window
        The calendar window.  Without a calendar clock (:func:`has_calendar_clock`) nothing is
        selected and the ledger is flagged ``window_not_applied``; steps left out are flagged
        ``outside_window`` (their events stay counted as read and kept).
    """
    steps = traces.steps
    if steps.empty:
        return
    if not has_calendar_clock(traces):
        traces.ledger.flag("window_not_applied", f"the traces carry no calendar clock, so the window "
                                                 f"{window.label!r} selects nothing: every step is kept")
        return
    inside = ((utc(traces, steps["start_us"]) >= window.start) & (utc(traces, steps["end_us"]) <= window.end))
    if inside.all():
        return
    out = steps.loc[~inside, ["rank", "step"]]
    dropped = pd.MultiIndex.from_frame(out.astype({"step": "int64"}))

    def outside(frame: pd.DataFrame) -> np.ndarray:
        have = frame["step"].notna().to_numpy()
        keys = pd.MultiIndex.from_arrays([frame["rank"].to_numpy(), frame["step"].fillna(-1).astype("int64")])
        return have & keys.isin(dropped)

    k_out, h_out = outside(traces.kernels), outside(traces.host_syncs)
    traces.steps = steps.loc[inside].reset_index(drop=True)
    traces.kernels = traces.kernels.loc[~k_out].reset_index(drop=True)
    traces.host_syncs = traces.host_syncs.loc[~h_out].reset_index(drop=True)
    traces.ledger.flag("outside_window", f"{len(out)} of {len(steps)} step window(s) lie outside "
                                         f"{window.label!r}: left out of the tables with their "
                                         f"{int(k_out.sum())} GPU activities and {int(h_out.sum())} host "
                                         f"syncs (the events stay counted as read and kept)")


def read(paths: PathLike | Iterable[PathLike], *, tz: Any = None, window: Any = None,
         **format_options: Any) -> tuple[dict[str, pd.DataFrame], Ledger]:
    """Read Kineto traces the way every fleetlib reader reads (:mod:`fleetlib.registry`).

    Parameters
    ----------
    paths
        Trace files and/or folders of them (one file per rank), as :func:`read_traces` takes them.
    tz
        Not used: Kineto times count from the unix epoch or from an unknown origin, never in a
        local zone.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes.  When the traces carry a calendar
        clock, only the step windows that lie inside it are returned, with their GPU activities
        and host syncs (flag ``outside_window``); without a clock nothing is selected (flag
        ``window_not_applied``).  The ledger still counts every event read.
    **format_options
        Keyword arguments of :func:`read_traces` (``cache`` defaults to False here, ``progress``
        to False).

    Returns
    -------
    tables : dict of DataFrame
        ``kernels``, ``steps``, ``host_syncs`` and ``ops`` (:data:`TABLES`), all ranks on one time
        base.
    ledger : Ledger
        Every event of every file: read = kept + repaired + rejected.
    """
    del tz  # Kineto writes no local times
    w = Window.parse(window)
    traces = read_traces(paths, **{"cache": False, "progress": False, **format_options})
    if w is not None and not w.is_nominal:
        select_window(traces, w)
    return {t: getattr(traces, t) for t in TABLES}, traces.ledger
