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
    into ``ops``; see *Operators*) and ``comm_rule`` (category: the rule that made it
    communication, ``metadata:Collective name`` or ``name:<pattern>``; ``""`` otherwise).  Sorted
    by rank, start, end, stream.

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
``kind`` and ``collective`` come from :mod:`fleetlib.program.classify`, metadata first: a kernel
whose own ``Collective name`` argument names a collective is ``comm`` (``comm_rule``
``metadata:Collective name``) whatever its name says; the others by the configurable name patterns.
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
The ledger is :class:`fleetlib.quality.Ledger` (its flags :class:`fleetlib.quality.Flag`; the old
names ``TraceLedger`` and ``TraceFlag`` remain as aliases), kept per file by a
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
pair: valid JSON, but no text; msgspec refuses it, so the :mod:`json` path reads it) -- repaired like an
undecodable byte rather than rejected, since the rest of the event is sound (a kept GPU or CPU-op
row holding one is a repair naming the field; flag ``lone_surrogate``); a JSON array or object
where text is read (``Collective name``, ``dtype``, ``Process Group Name`` / ``Description``, a
runtime call's name) read as absent; a negative ``In msg nelems`` read as absent (message bytes
unknown); an integer beyond int64 in an id column (``correlation``, ``Seq``,
``External id``) set to missing with its exact digits kept in the ledger (never wrapped); a
missing name replaced by ``<unnamed>`` (GPU and ``ops`` rows alike).  Flags (``ledger.flags``)
note interpretations that change no row: ``legacy_format``, ``timestamps_in_ns``,
``rank_from_file_name`` / ``rank_from_mapping`` / ``rank_override`` / ``rank_assumed_zero``,
``no_profiler_step`` / ``steps_from_markers``, ``cuda_graph``, ``unknown_category`` (once per
category), ``stream_overlap`` (overlaps above the tolerance, kept as recorded on CUDA traces),
``invalid_utf8``, ``lone_surrogate``, ``integer_beyond_int64``, ``external_id_from_launch``,
``unknown_collective_name``, ``unknown_dtype``, ``no_gpu_activity``, and from :func:`read_traces`
``missing_ranks``, ``world_size_mismatch``, ``time_base_shifted``.
Input nothing can make sense of (a truncated gzip stream, invalid JSON, no events at all)
raises :class:`fleetlib.quality.InputError` naming the file, line and field.

Decoding and cache
------------------
gzip is recognised by its magic bytes and decompressed slice by slice into one buffer; a single
gzip member whose trailer states more than 4 MiB of text is instead decoded piece by piece while
it is decompressed, from a window of its text (the same pieces, cut at the same places; anything
unusual -- another member, a length other than the stated one, a piece the typed decoder refuses
-- and the file is read from the whole text instead, as below).  A document
of at most 1 MiB (a typical rank file) has its event array cut out between the ``traceEvents`` key
and the array's closing bracket (the keys around it decoded on their own; anything unusual: split
into its top-level values first) and its events decoded in one call.  A larger event array is
decoded in pieces of a sixteenth of the file (256
KiB to 1 MiB; at most 1 MiB for files under 4 MiB), cut between
top-level events (a cut anywhere else fails to decode and is moved on, so only valid cuts are
used), and each piece is reduced to numpy columns of the few fields the tables need before the
next is decoded; equal names share one string.  A piece is decoded by ``msgspec`` into typed
records that declare only the fields the tables use (``ph``, ``cat``, ``name``, ``pid``, ``tid``,
``ts``, ``dur`` and a few ``args`` keys): every other field is skipped without building Python
objects, and CPU-op shapes (``Input Dims``, ``Input type``) stay raw JSON text, written as the
``ops`` columns' text once per distinct value.  What repeats from rank to rank -- the kind and
``comm_rule`` of each distinct kernel name, the sync kind of each runtime call, the collective of
each ``Collective name`` and host annotation, each dtype's size, the text of each distinct shape,
the sorted categories of each set of names -- is computed once per process (bounded memos,
:mod:`fleetlib.program.readers._memo`), so the second and later files of a job skip that work.
Wherever the typed decoder could differ from the standard library -- invalid UTF-8
anywhere in the piece, malformed JSON, ``NaN`` or lone-surrogate escapes, a non-object entry or
``args`` -- that piece is decoded by :mod:`json` instead, so rows, ledger entries and errors are
the same either way (without ``msgspec`` installed every piece takes the :mod:`json` path).  Peak
memory stays near the tables' columns plus a window of text and one piece's objects where the
file is streamed (on a 43 MB gzip trace a read adds about 1.06x the text to the resident set the
first time in a process -- one-time initialisation included -- and about 0.55x later), and near
the size of the JSON text plus that where it is not.  The
cache (one file per trace under :func:`default_cache_dir`, holding all four tables as the raw
blocks pandas keeps them in, the metadata and the ledger: ``readers._cache``) is keyed by the SHA-256
of the file's bytes, :data:`READER_VERSION`, the cache format and the options that change the
tables; the rank is resolved after loading, so a renamed copy of a file is a cache hit that still
takes its rank from its own name.  A damaged or foreign cache file is a miss (parsed again).
Several processes (Dask workers) may share one cache directory: each writes a temporary file of
its own (process and thread in the name) and renames it into place, so a reader sees a whole entry
or none, and two workers writing the same entry write the same bytes.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Window
from fleetlib.program.classify import (
    Classifier,
)
from fleetlib.quality import DomainError, Flag, InputError, Ledger, check_nonnegative, check_positive

try:  # typed, column-projected decoding; the stdlib path below is complete without it
    import msgspec
except ImportError:  # pragma: no cover - msgspec is a declared dependency
    msgspec = None
from fleetlib.program.readers._cache import (
    CACHE_ENV,
    _cache_path,
    _read_cache,
    _write_cache,
    default_cache_dir,
)
from fleetlib.program.readers._concat import _concat, _Merger  # noqa: F401  (_concat: old import path)
from fleetlib.program.readers._dask import _gather, _read_batch  # noqa: F401  (_read_batch: old path)
from fleetlib.program.readers._decode import _load_bytes, _small_int
from fleetlib.program.readers._tables import (
    DEFAULT_MAX_EVENT_US,
    DEFAULT_OVERLAP_TOLERANCE_US,
    READER_VERSION,
    _Options,
    _parse,
    empty_host_syncs,
    empty_kernels,
    empty_ops,
    empty_steps,
)
from fleetlib.program.schema import (
    HOST_SYNC_COLUMNS,
    KERNEL_COLUMNS,
    KERNEL_EXTRA_COLUMNS,
    OPS_COLUMNS,
    STEP_COLUMNS,
    STEP_SOURCES,
)

__all__ = [
    "CACHE_ENV",
    "CALENDAR_EPOCH_NS",
    "DEFAULT_MAX_EVENT_US",
    "DEFAULT_OVERLAP_TOLERANCE_US",
    "HOST_SYNC_COLUMNS",
    "KERNEL_COLUMNS",
    "KERNEL_EXTRA_COLUMNS",
    "OPS_COLUMNS",
    "READER_VERSION",
    "STEP_COLUMNS",
    "STEP_SOURCES",
    "TABLES",
    "TraceFlag",
    "TraceLedger",
    "TraceRead",
    "TraceSet",
    "calendar_base_ns",
    "default_cache_dir",
    "empty_host_syncs",
    "empty_kernels",
    "empty_ops",
    "empty_steps",
    "has_calendar_clock",
    "rank_from_file_name",
    "read",
    "read_trace",
    "read_traces",
    "trace_files",
    "utc",
]


PathLike = str | os.PathLike[str]

#: Old name of :class:`fleetlib.quality.Flag` (the trace reader's flags are the library's flags).
TraceFlag = Flag
#: Old name of :class:`fleetlib.quality.Ledger` (the trace reader keeps the library's ledger).
TraceLedger = Ledger

_RANK_NAME_RE = re.compile(r"(?:^|[^a-z0-9])(?:rank|worker)[-_ ]?(\d+)(?!\d)", re.IGNORECASE)
_TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")

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
    hit = (_read_cache(cpath, file, lambda meta, led: _resolve_rank(p, meta, rank, led))
           if cache and cpath.is_file() else None)  # a hit comes with its rank resolved and filled in
    if hit is None:
        collecting = gc.isenabled()
        gc.disable()  # decoding builds many containers and no cycles: collections would only cost time
        try:
            held = [raw]
            del raw  # _parse drops the compressed bytes once they are decompressed
            built, ledger = _parse(held, file, sha, opts)
        finally:
            if collecting:
                gc.enable()
        if cache:
            try:
                _write_cache(cpath, built, ledger, file)
            except OSError as exc:
                ledger.flag("cache_not_written", f"could not write the cache file {cpath} ({exc})", file=file)
        r, source = _resolve_rank(p, built.metadata, rank, ledger)
        for frame in (built.kernels, built.steps, built.host_syncs, built.ops):
            frame["rank"] = np.full(len(frame), r, dtype=np.int64)
    else:
        built, ledger, (r, source) = hit
    metadata = {**built.metadata, "rank": r, "rank_source": source, "file": file}
    ledger.flags = [replace(f, rank=r) for f in ledger.flags]
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
            sizes.append(f.stat().st_size)
        except OSError:  # read_trace names the missing file in its error
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


def _read_all(files: list[Path], kwargs: list[dict[str, Any]], progress: bool, errors: str,
              client: Any, in_flight: int | None = None) -> tuple[list[TraceRead], TraceLedger, _Merger]:
    """Read every file, serially or as Dask tasks of a few files each; return the reads in file order.

    Each batch of files read is joined into one piece per table as soon as it is back (a
    :class:`~fleetlib.program.readers._concat._Merger`, returned): on Dask while the workers parse
    the next batches.  On Dask the files are cut into batches (:func:`_batches`) and at most
    ``in_flight`` batches (default twice the cluster's worker threads) are submitted at a time, so
    a worker's memory holds a bounded number of files however many are read; serially a batch is
    :data:`_BATCH_FILES` consecutive files.

    An :class:`InputError` raises (``errors="raise"``) or becomes a rejected ``file`` row.
    """
    results: list[TraceRead | InputError | None] = [None] * len(files)
    merger = _Merger({"kernels": empty_kernels(), "steps": empty_steps(), "host_syncs": empty_host_syncs(),
                      "ops": empty_ops()})

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
        Cache directory (default :func:`default_cache_dir`).
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
    files = trace_files(paths_or_dir)
    mapping = {str(k): int(v) for k, v in (ranks or {}).items()}
    _options(classifier, step_marker, time_unit, max_event_us, overlap_tolerance_us)  # fail before any task
    common = {"cache": cache, "cache_dir": cache_dir, "classifier": classifier, "step_marker": step_marker,
              "time_unit": time_unit, "max_event_us": max_event_us,
              "overlap_tolerance_us": overlap_tolerance_us}
    kwargs = [{**common, "rank": mapping.get(str(p), mapping.get(p.name))} for p in files]
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

#: A time base at or after this instant (2000-01-01 UTC, in unix nanoseconds) is a calendar clock;
#: an earlier one is a relative clock (time since boot, a synthetic origin).
CALENDAR_EPOCH_NS: int = 946_684_800 * 10**9

#: The tables :func:`read` returns.
TABLES: tuple[str, ...] = ("kernels", "steps", "host_syncs", "ops")


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


def _select_window(traces: TraceSet, window: Window) -> None:
    """Keep the step windows that lie inside ``window``, with their kernels and host syncs (in place)."""
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
        _select_window(traces, w)
    return {t: getattr(traces, t) for t in TABLES}, traces.ledger
