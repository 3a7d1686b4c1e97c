"""Columns -> the kernel, step, host-sync and ops tables of one trace file (one rank).

:func:`_parse` is the whole path from a file's bytes to its tables and its row book; the helpers
below it each build one part (devices and streams, collective semantics, launches, overlaps,
steps, host syncs, CPU operators).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.program.classify import (
    Classifier,
    collective_from_kernel_name,
    comm_rule_metadata,
)
from fleetlib.program.readers import _memo, _numeric
from fleetlib.program.readers._columns import (
    _GPU_CATS,
    _Book,
    _collect,
    _Collector,
    _ids,
    _streamed,
    _times,
    count_unused,
)
from fleetlib.program.readers._decode import (
    _clean,
    _clean_json,
    _gunzip,
    _int_value,
    _map_unique,
    _not_text,
    _objects,
    _small_int,
    _Source,
    _Stream,
)
from fleetlib.program.readers._frames import frame
from fleetlib.program.readers._hostile import (
    _ARG_TEXT_KEYS,
    _TEXT_KEYS,
    _clean_counts,
    _lone_repairs,
    _message_bytes,
    _nested_text,
    _ops_text_repairs,
    _text_repairs,
    _utf8_repairs,
)
from fleetlib.program.schema import STEP_SOURCES, table_dtypes
from fleetlib.quality import InputError, Ledger

try:  # pandas' integer hash table (what pd.factorize runs on int64), without its dispatch
    from pandas._libs.hashtable import Int64HashTable
except ImportError:  # pragma: no cover - every supported pandas has it
    Int64HashTable = None

#: Version of the reader's output; part of every cache key (bump when the tables change).
READER_VERSION = "5"
#: Events longer than this (µs) are rejected as corrupt: one hour.
DEFAULT_MAX_EVENT_US = 3.6e9
#: Same-stream overlaps up to this (µs) are timestamp rounding and are trimmed.
DEFAULT_OVERLAP_TOLERANCE_US = 1.0
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_STREAM_RE = re.compile(r"(?:stream|queue)\s*(-?\d+)", re.IGNORECASE)
_GPU_LABEL_RE = re.compile(r"^\s*(?:GPU|HIP|XPU|MTIA|Device)\s*(\d+)", re.IGNORECASE)
def _kernel_dtypes() -> dict[str, Any]:
    return table_dtypes("kernels")


def _step_dtypes() -> dict[str, Any]:
    return table_dtypes("steps")


def _sync_dtypes() -> dict[str, Any]:
    return table_dtypes("host_syncs")


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

    Free categories are the sorted distinct text values, as ``pd.Categorical`` makes them; the sort
    and the dtype are done once per process and set of names (:func:`~._memo.text_categorical`).
    """
    if dtype is not None:
        return pd.Categorical.from_codes(_memo.fixed_codes(values, dtype), dtype=dtype, validate=False)
    fast = _memo.text_categorical(values)
    return pd.Categorical(values) if fast is None else fast


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
    return _empty(table_dtypes("ops"))

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
    size = _numeric.median(np.abs(finite)) if len(finite) else 0.0
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


#: Per classifier (by fingerprint): (name, category) -> kind, filled as traces are read.  The ranks
#: of a job launch the same kernels, so after the first file classification is a dictionary lookup
#: per distinct name instead of every pattern searched in every name.
_KIND_MEMO: dict[str, dict[tuple[str, str], str]] = {}
_KIND_MEMO_LIMIT = 200_000  # distinct (name, category) pairs kept per classifier before starting over


def _kinds(classifier: Classifier, names: np.ndarray, cats: np.ndarray) -> np.ndarray:
    """``classifier.kinds(names, cats)``, each distinct (name, category) classified once per process."""
    n = len(names)
    if not n:
        return classifier.kinds(names, cats)
    try:
        name_codes, name_uniques = _memo.text_codes(names)
        cat_codes, cat_uniques = _memo.text_codes(cats)
    except TypeError:  # unhashable values in a malformed trace: classify them as they are
        return classifier.kinds(names, cats)
    pair = name_codes.astype(np.int64) * len(cat_uniques) + cat_codes
    if Int64HashTable is not None:  # pd.factorize's table for int64, without its dispatch
        pair_uniques, pair_codes = Int64HashTable(max(1, n)).factorize(pair)
    else:  # pragma: no cover
        pair_codes, pair_uniques = pd.factorize(pair)
    u_names = np.asarray(name_uniques, dtype=object)[pair_uniques // len(cat_uniques)]
    u_cats = np.asarray(cat_uniques, dtype=object)[pair_uniques % len(cat_uniques)]
    if not all(isinstance(v, str) for v in u_names) or not all(isinstance(v, str) for v in u_cats):
        return classifier.kinds(names, cats)
    memo = _KIND_MEMO.setdefault(classifier.fingerprint(), {})
    keys = list(zip(u_names.tolist(), u_cats.tolist(), strict=True))
    found = [memo.get(k) for k in keys]  # a local copy: another thread may clear the memo meanwhile
    new = [i for i, kind in enumerate(found) if kind is None]
    if new:
        if len(memo) + len(new) > _KIND_MEMO_LIMIT:
            memo.clear()
        for i, kind in zip(new, classifier.kinds(u_names[new], u_cats[new]).tolist(), strict=True):
            found[i] = memo[keys[i]] = kind
    per = _objects(found, len(found))
    return per[pair_codes]


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
    col, source = _streamed(raw, file, marker)
    if col is None or source is None:  # not streamed, or the stream gave up: the whole text decides
        col = _Collector(marker)
        source = _Source(_gunzip(raw, file), file)
        del raw
        _collect(source, col, file)
    else:
        del raw
    source.buf = b""  # the decompressed text is no longer needed
    top = source.top
    if col.offset == 0:
        raise InputError("the trace has no events (traceEvents is empty); expected GPU and CPU activity "
                         "records", file=file, field="traceEvents")
    if col.n_timed == 0:
        raise InputError(f"the trace has {col.offset} events but none is a complete event with a valid "
                         f"timestamp (ph 'X' with ts); nothing to analyse", file=file, field="traceEvents")
    book = _Book(file, col.offset)
    if source.surrogates or source.replaced:  # counts keyed by phase and category are written as text
        _clean_counts(col)
    _format_flags(col, source, book)

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
    text_repairs = _text_repairs(source)
    if source.surrogates:  # first: the escaped invalid bytes stay for _utf8_repairs
        top = _lone_repairs(gk, r, s, o, top, rows_k, text_repairs[-1][0], _TEXT_KEYS, book)
    if source.replaced:
        _utf8_repairs(gk, r, s, rows_k, source.replaced, book)
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

    columns = {
        "rank": np.zeros(n_k, dtype=np.int64),
        "step": _assign_steps(start, steps, step_index),
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
        "comm_rule": _categorical(comm["rule"]),
    }
    # sorted by rank (one here), start, end, stream -- stable, as sort_values(kind="stable") sorts -- and
    # built once in that order
    order = np.lexsort((stream, end, start))
    kernels = frame({k: v[order] for k, v in columns.items()})

    dist = top.get("distributedInfo") if isinstance(top.get("distributedInfo"), dict) else {}
    devices = top.get("deviceProperties")
    metadata = {
        "sha256": sha, "reader_version": READER_VERSION, "format": source.format,
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
    count_unused(col, ledger)
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
    if text_repairs:
        _ops_text_repairs(rows, (names, dims, types), text_repairs, book)
        names, dims, types = _clean(names), _clean(dims), _clean(types)
    bad_name = _not_text(names)
    if bad_name.any():
        book.repair_rows(rows[bad_name], "name", "missing or non-text name replaced by '<unnamed>'")
        names = np.where(bad_name, "<unnamed>", names)
    order = np.argsort(start[ok], kind="stable")  # sorted by start as sort_values(kind="stable") sorts
    table = frame({
        "rank": np.zeros(len(rows), dtype=np.int64), "external_id": ext[order],
        "name": _categorical(names)[order], "start_us": start[ok][order], "dur_us": dur[ok][order],
        "input_dims": pd.Series(dims[order], dtype=object),
        "input_types": pd.Series(types[order], dtype=object),
    })
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


def _enclosing_ids(t: np.ndarray, tid: np.ndarray, links: Mapping[str, np.ndarray]) -> pd.arrays.IntegerArray:
    """External id of the innermost CPU op that encloses time ``t`` on thread ``tid`` (<NA> if none)."""
    n = len(t)
    out = np.zeros(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    q = np.flatnonzero(np.isfinite(t) & ~np.equal(tid, None))
    if not len(q):
        return pd.arrays.IntegerArray(out, ~found)
    try:
        codes, _ = _memo.factorize_by_value(np.concatenate([tid[q], links["tid"]]))  # as pd.factorize
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


def _format_flags(col: _Collector, source: _Source | _Stream, book: _Book) -> None:
    if col.not_objects:
        book.reject_rows(col.not_objects, None, "entry of traceEvents is not a JSON object")
    for rows, key, reasons in col.nested:
        book.reject_rows(rows, key, reasons)
    if source.format == "bare_array" or col.legacy_cats:
        layout = "a bare event array" if source.format == "bare_array" else "the object form"
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
    from_arg, recognised = _memo.collectives_from_arg(raw)
    unrec = comm & ~np.equal(raw, None) & ~recognised
    if unrec.any():
        values = sorted({str(v) for v in raw[unrec]})
        book.note("unknown_collective_name", f"'Collective name' values {values} not recognised: collective "
                                             f"taken from the host annotation or the kernel name instead")
    # metadata first: a kernel whose own args name a collective is communication whatever its name says
    has_arg = np.isin(kind, ("compute", "comm")) & recognised
    kind[has_arg] = "comm"
    comm = kind == "comm"
    rule = np.where(comm, _memo.comm_rules(classifier, names), "").astype(object)
    rule[has_arg] = comm_rule_metadata("Collective name")
    collective[has_arg] = from_arg[has_arg]
    source[has_arg] = "args"
    nbytes, nelems = _message_bytes(gk["In msg nelems"], gk["dtype"], rows_k, book)
    unknown_dtype = comm & ~np.equal(nelems, None) & np.isnan(nbytes)
    if unknown_dtype.any():
        book.note("unknown_dtype", f"{int(unknown_dtype.sum())} collectives have a dtype of unknown size "
                                   f"({sorted({str(d) for d in gk['dtype'][unknown_dtype]})}): bytes missing")
    copy_bytes = _numeric.to_floats(gk["bytes"])
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
        graph_call = _memo.graph_launches(r["name"]) & r_ok
        n_launch = int(graph_call.sum())
        valid = r_ok & ~np.asarray(pd.isna(r_corr))
        if n_k and valid.any():
            first, lookup = _numeric.first_index(r_corr[valid].to_numpy(dtype=np.int64))
            sub = np.flatnonzero(valid)[first]
            have = ~np.asarray(pd.isna(corr))
            pos = np.full(n_k, -1)
            pos[have] = lookup(corr[have].to_numpy(dtype=np.int64))
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
        guess = collective_from_kernel_name(gk["name"][left])
        collective[left] = guess
        source[left] = np.where(guess != "none", "name", "none")
    comm["bytes"] = _numeric.int64_bytes(nbytes)
    comm["pg"] = np.where(np.equal(pg, None), "", pg).astype(str) if n_k else np.zeros(0, dtype=str)
    return launch_us, graph, launch_tid


def _platform(top: Mapping[str, Any], runtime_names: np.ndarray) -> str:
    keys = " ".join(map(str, top)).lower()
    if "roctracer" in keys or "rocm" in keys or "hip_" in keys:
        return "rocm"
    if "cuda" in keys or "cupti" in keys:
        return "cuda"
    found = _memo.distinct(np.asarray(runtime_names, dtype=object))
    uniques = found[1] if found is not None else pd.unique(pd.Series(runtime_names, dtype=object).dropna())
    runtime = [str(x) for x in uniques]
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
    if small.any():
        end = end.copy()
        p, q = prev[small], nxt[small]
        book.repair_rows(rows[p], "dur", [f"ns_rounding_overlap: end moved back {o * 1000:.4g} ns to the "
                                          f"start of the next activity on stream {st}"
                                          for o, st in zip(over[small], stream[p], strict=True)])
        end[p] = np.maximum(start[q], start[p])
        trimmed[p] = True
    if large.any() and clip:
        end = end.copy()
        p, q = prev[large], nxt[large]
        book.repair_rows(rows[p], "dur", [f"rocm_stream_overlap_clipped: end moved back {o:.6g} µs to the "
                                          f"start of the next activity on stream {st}"
                                          for o, st in zip(over[large], stream[p], strict=True)])
        end[p] = np.maximum(start[q], start[p])
        trimmed[p] = True
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
    from_arg, recognised = _memo.collectives_from_arg(s["Collective name"][use])
    coll[recognised] = from_arg[recognised]
    nccl = is_nccl[use]
    coll[nccl] = _memo.collectives_from_annotation(names[use][nccl])
    b_arg, _ = _message_bytes(s["In msg nelems"][use], s["dtype"][use], s["row"][use], book)
    b_shape = _numeric.shape_bytes(s["Input Dims"][use], s["Input type"][use])
    nbytes = np.where(np.isnan(b_arg), b_shape, b_arg)
    pg = np.where(np.equal(s["Process Group Name"][use], None), s["Process Group Description"][use],
                  s["Process Group Name"][use])
    seq = _numeric.to_floats(s["seq"][use])
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
        codes, _ = _memo.factorize_by_value(np.concatenate([launch_tid[q], ann["tid"]]))  # as pd.factorize
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
    dtypes = _step_dtypes()
    return frame({
        "rank": np.zeros(n, dtype=np.int64), "step": pd.arrays.IntegerArray(steps, np.zeros(n, dtype=bool)),
        "start_us": lo, "end_us": hi,
        "source": pd.Categorical.from_codes(np.full(n, STEP_SOURCES.index(source)), dtype=dtypes["source"]),
    })


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
    sync_kind, blocking = _memo.sync_kinds(r["name"])
    is_sync = ~np.equal(sync_kind, None)
    if not is_sync.any():
        return empty_host_syncs()
    sub = {k: v[is_sync] for k, v in r.items()}
    start, dur, ok = _timed_rows(sub, book, origin, scale, opts, "sync call")
    order = np.flatnonzero(ok)
    order = order[np.argsort(start[order], kind="stable")]
    tids = _map_unique(sub["tid"][order], _small_int, None)
    missing = np.equal(tids, None)
    return frame({
        "rank": np.zeros(len(order), dtype=np.int64),
        "step": _assign_steps(start[order], steps, step_index),
        "tid": pd.arrays.IntegerArray(np.where(missing, 0, tids).astype(np.int64), missing),
        "start_us": start[order], "end_us": start[order] + dur[order], "dur_us": dur[order],
        "name": _categorical(sub["name"][order].astype(str)),
        "sync_kind": _categorical(sync_kind[is_sync][order].astype(str)),
        "blocking": blocking[is_sync][order].astype(bool),
    })




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
