"""Events -> columns: each decoded piece reduced to numpy columns of the fields the tables use.

Also the row book of one trace file (rejections, repairs, flags) and the timestamp / id parsing
that writes into it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

try:  # typed, column-projected decoding; the stdlib path is complete without it
    import msgspec
except ImportError:  # pragma: no cover - msgspec is a declared dependency
    msgspec = None

from fleetlib._io import excerpt
from fleetlib.program.readers import _memo
from fleetlib.program.readers._decode import (
    _ARG_KEYS,
    _ATTRS,
    _NO_ARGS,
    _RAW_ARGS,
    _TYPED,
    _map_unique,
    _objects,
    _Source,
    _Stream,
)
from fleetlib.program.readers._identity import Int64HashTable
from fleetlib.quality import InputError, Ledger, RowBook

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

# ---------------------------------------------------------------------------------------------------
# Events -> columns
# ---------------------------------------------------------------------------------------------------


# The fields read from every complete event, plucked from typed records by a list comprehension
# (an attribute load the interpreter specialises): about 40% faster than ``map(attrgetter)`` into
# an object array, and these are the columns as long as the trace.
def _pluck_ph(items: Any) -> list[Any]:
    return [e.ph for e in items]


def _pluck_cat(items: Any) -> list[Any]:
    return [e.cat for e in items]


def _pluck_name(items: Any) -> list[Any]:
    return [e.name for e in items]


def _pluck_pid(items: Any) -> list[Any]:
    return [e.pid for e in items]


def _pluck_tid(items: Any) -> list[Any]:
    return [e.tid for e in items]


def _pluck_ts(items: Any) -> list[Any]:
    return [e.ts for e in items]


def _pluck_dur(items: Any) -> list[Any]:
    return [e.dur for e in items]


def _pluck_args(items: Any) -> list[Any]:
    return [e.args for e in items]


_PLUCK = {"ph": _pluck_ph, "cat": _pluck_cat, "name": _pluck_name, "pid": _pluck_pid, "tid": _pluck_tid,
          "ts": _pluck_ts, "dur": _pluck_dur, "args": _pluck_args}


def _arg_pluck(attr: str) -> Any:
    """Return a list comprehension loading attribute ``attr`` (a field of the typed args record).

    Written out per attribute for the same reason as the event fields above: the interpreter
    specialises a literal attribute load, not ``attrgetter``'s (a third less time a column).
    """
    if not attr.isidentifier():  # pragma: no cover - the record's own field names
        return lambda items: list(map(attrgetter(attr), items))
    return eval(compile(f"lambda items: [e.{attr} for e in items]", f"<pluck {attr}>", "eval"))


_PLUCK.update({key: _arg_pluck(attr) for key, attr in _ARG_KEYS.items() if key not in _PLUCK})


def _get(items: Sequence[Any] | np.ndarray, key: str) -> np.ndarray:
    """Return the value of ``key`` in each event or args record (None where absent).

    Items are all dicts (the stdlib decoder) or all typed records (msgspec), never mixed.
    """
    n = len(items)
    if n and not isinstance(items[0], dict):
        pluck = _PLUCK.get(key)
        if pluck is None:
            return _objects(map(_ATTRS[key], items), n)
        return _objects(pluck(items.tolist() if isinstance(items, np.ndarray) else items), n)
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
    if values.dtype == np.int64:  # ids the collector already held as integers (see _compact_ids)
        return values, status
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


def _is_value(codes: np.ndarray, uniques: Sequence[Any], text: str) -> np.ndarray:
    """``values == text`` of factorised values (``codes`` into ``uniques``), without comparing each row.

    A decoded JSON value equals a string only when it is that string, and the uniques are distinct,
    so at most one code matches.
    """
    for j, u in enumerate(uniques):
        if type(u) is str and u == text:
            return codes == j
    return np.zeros(len(codes), dtype=bool)


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


def _nested_reason(key: str, value: Any) -> str:
    """Return the ledger reason for a JSON array or object where ``key`` must be text (with a glimpse)."""
    kind = "array" if isinstance(value, list) else "object"
    try:
        shown = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):  # pragma: no cover - decoded JSON always writes back
        shown = repr(value)
    return f"{key!r} is a JSON {kind}, not text: {excerpt(shown)}"


def _shared(values: np.ndarray) -> np.ndarray:
    """Point equal values at one object (the decoder makes a new string per event; names are long)."""
    try:
        codes, uniques = _memo.factorize_by_value(values)  # one object per row: by value
    except TypeError:  # unhashable values in a malformed trace: keep them as they are
        return values
    table = np.append(np.asarray(uniques, dtype=object), _objects([None], 1))
    return table[np.where(codes < 0, len(uniques), codes)]


_PLAIN_IDS = frozenset({int, str, type(None)})


def _shared_ids(values: np.ndarray) -> np.ndarray:
    """:func:`_shared` for thread ids, skipped where it could only change which objects hold them.

    Sharing makes equal values one object, and equal values of different types (``1``, ``1.0``,
    ``True``) one value: with only ints, text and None no two values of different types are
    equal, so every value stays what it is and the pass (a hash of every event's id) is not made.
    Ids that are all ints are still made one object per distinct id, through their int64 form:
    the decoder makes an int object per event and the tables keep the column (about 3 MB of ints
    on a 200k-event file), at a fraction of the object hash's cost.
    """
    kinds = set(map(type, values.tolist()))
    if kinds == {int} and Int64HashTable is not None:
        try:
            as_int = values.astype(np.int64)
        except OverflowError:  # an id beyond int64: shared by value
            return _shared(values)
        uniques, codes = Int64HashTable(min(len(as_int), 1 << 16)).factorize(as_int)
        return uniques.astype(object)[codes]  # Python ints again, one per distinct id
    if kinds <= _PLAIN_IDS:
        return values
    return _shared(values)


def _compact_ids(values: np.ndarray) -> np.ndarray:
    """Return an id column of only in-range ints as int64 (no int object per event); else as it is.

    :func:`_numbers` reads either form alike; :meth:`_Collector.table` joins pieces of both forms
    as objects.
    """
    if len(values) and set(map(type, values)) == {int}:
        try:
            return values.astype(np.int64)
        except OverflowError:  # an integer beyond int64: kept exactly, for the ledger
            pass
    return values


def _timing(x: Mapping[str, Any], pos: np.ndarray) -> dict[str, np.ndarray]:
    """``ts`` and ``dur`` of the events at ``pos`` as numbers with their parse status.

    Converted per role and chunk (see :func:`_numbers`: integers stay exact int64 when a group
    holds nothing else).  Where all complete events of the chunk converted to int64 (``x["ts#"]``,
    ``x["dur#"]``), every part of them converts to the same values: those are sliced instead.
    """
    out: dict[str, np.ndarray] = {}
    for key in ("ts", "dur"):
        whole = x.get(key + "#")
        values, status = (whole[0][pos], whole[1][pos]) if whole is not None else _numbers(x[key][pos])
        out[key], out[key + "_status"] = values, status
    return out


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
        evs = _objects(events, n)
        rows = np.arange(base + 1, base + n + 1, dtype=np.int64)
        kinds = set(map(type, events))
        items: list[Any] | np.ndarray = events  # a list iterates faster than an object array
        if kinds != {dict} and not (_TYPED and kinds <= set(_TYPED)):
            is_dict = np.fromiter(map(isinstance, events, repeat(dict)), dtype=bool, count=n)
            self.not_objects.extend(rows[~is_dict].tolist())
            evs, rows = evs[is_dict], rows[is_dict]
            items = evs
            if not len(evs):
                return
        ph = _get(items, "ph")
        cat = _get(items, "cat")
        try:
            ph_codes, ph_uniques = _memo.factorize_by_value(ph)  # one object per event: by value
            cat_codes, cat_uniques = _memo.factorize_by_value(cat)  # one object per event
        except TypeError:  # a JSON array or object as ph or cat (malformed): those events are rejected
            keep = self._reject_nested(rows, {"ph": ph, "cat": cat})
            evs, rows, ph, cat = evs[keep], rows[keep], ph[keep], cat[keep]
            items = evs
            if not len(evs):
                return
            ph_codes, ph_uniques = _memo.factorize_by_value(ph)
            cat_codes, cat_uniques = _memo.factorize_by_value(cat)
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
        xs = evs[xi]
        xl = xs.tolist()
        x: dict[str, Any] = {"ts": _get(xl, "ts"), "dur": _get(xl, "dur"), "name": _shared(_get(xl, "name")),
                             "tid": _shared_ids(_get(xl, "tid")),  # one int object per thread
                             "args": _get(xl, "args")}
        # the span of all timed events, and a sample of timestamps for the unit check
        ts, st = _numbers(x["ts"])
        du, sd = _numbers(x["dur"])
        x["ts#"] = (ts, st) if ts.dtype == np.int64 else None  # reused by _timing
        x["dur#"] = (du, sd) if du.dtype == np.int64 else None
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
        unused = x_role == _ROLE_IGNORE
        sel = np.flatnonzero(x_role == _ROLE_SPAN)
        if len(sel):
            keep = _map_unique(x["name"][sel], self._wanted_span, False).astype(bool)
            if keep.any():
                self.parts["spans"].append(self._span(x, sel[keep], x_rows[sel][keep]))
            unused[sel[~keep & (x_cat[sel] != "cpu_op")]] = True  # annotations no table reads
        if unused.any():
            cats, counts = np.unique(x_cat[unused].astype(str), return_counts=True)
            for cat, c in zip(cats.tolist(), counts.tolist(), strict=True):
                self.unused_complete[cat or "<no category>"] += int(c)

    def _reject_nested(self, rows: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        """Note the events whose ``fields`` hold a JSON array or object (rejected); return the others' mask.

        A phase or category that is not text says nothing of what the event is: such events are
        rejected (:func:`fleetlib.program.readers._tables._format_flags` writes the entries), the
        first such field of an event named.
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
        present = _present(args)
        none = np.full(len(args), None, dtype=object)
        for key in self._GPU_ARGS:
            cols[key] = _get(args, key) if key in present else none
        for key in ("correlation", "External id"):
            cols[key] = _compact_ids(cols[key])
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
                "correlation": _compact_ids(_get(args, "correlation"))}

    def _span(self, x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        cols = {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos]}
        for key in self._SPAN_ARGS:
            cols[key] = _get(args, key)
        if len(args) and not isinstance(args[0], dict):  # typed records keep shapes as raw JSON: decode
            for key in _RAW_ARGS:
                cols[key] = _objects(map(_decode_raw, cols[key]), len(args))
        cols["seq"] = _first_present(args, _SEQ_KEYS)
        return cols

    def _op(self, x: Mapping[str, np.ndarray], pos: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        args, _ = _args(x["args"][pos])
        present = _present(args)
        none = np.full(len(args), None, dtype=object)
        cols = {"row": rows, "name": x["name"][pos], **_timing(x, pos), "tid": x["tid"][pos]}
        typed = len(args) > 0 and not isinstance(args[0], dict)
        cols["External id"] = _compact_ids(_get(args, "External id")) if "External id" in present else none
        for key in ("Input Dims", "Input type"):
            cols[key] = _json_texts(_get(args, key), typed) if key in present else none
        return cols

    def table(self, which: str) -> dict[str, np.ndarray]:
        """Return one table's columns, its pieces joined, and let go of the pieces.

        Each table is taken once: a column's pieces are freed as soon as they are joined, so the
        pieces and the joined table are not both held to the end of the parse (about 13 MB of a
        200k-event file's peak).  A second call returns no columns.
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


def _collect(source: _Source | _Stream, col: _Collector, file: str) -> None:
    """Add every piece of events ``source`` decodes to ``col``."""
    for events in source.chunks():
        if not isinstance(events, list):
            raise InputError("traceEvents is not an array", file=file, field="traceEvents")
        col.add(events)


def _streamed(raw: bytes, file: str, marker: re.Pattern[str] | None) -> tuple[_Collector | None,
                                                                            _Stream | None]:
    """Collect a large gzip file's events while it is decompressed (see :class:`_Stream`).

    Returns (None, None) where the file is not streamed, or where the stream gave up or anything
    raised on the way: nothing of it is kept, and :class:`_Source` on the whole text decides --
    the same pieces up to that point, then its own answer or error (a give-up costs only time).
    Streamed, the peak memory of a 43 MB trace is its columns and a window of text, not the text.
    """
    stream = _Stream.of(raw, file)
    if stream is None:
        return None, None
    col = _Collector(marker)
    try:
        _collect(stream, col, file)
    except Exception:  # a give-up or an error alike: the whole-text path decides
        return None, None
    stream.raw = b""
    return col, stream



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


def count_unused(col: _Collector, ledger: Ledger) -> None:
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



_NOT_INTEGER_LISTS = re.compile(rb'["{.eEtfn]|-0(?![0-9])')  # text, objects, floats, literals, -0
_JSON_WHITESPACE = b" \t\n\r"
#: Raw JSON text of a shape value -> its ``json.dumps`` text, kept across files (ranks share shapes).
_TEXT_MEMO: dict[bytes, str | None] = {}
_TEXT_MEMO_LIMIT = 100_000
_UNSEEN = object()  # a raw text not (or no longer) in the memo


def _decode_raw(value: Any) -> Any:
    """Return the value a :class:`msgspec.Raw` holds (None stays None)."""
    return None if value is None else msgspec.json.decode(value)


def _raw_text(raw: bytes) -> str | None:
    """``json.dumps`` text of the JSON value ``raw`` (None for ``null``), remembered across files.

    Lists of integers (shapes) are written by spacing their compact form; anything else is
    decoded and written by :func:`json.dumps`.
    """
    text = _TEXT_MEMO.get(raw)
    if text is not None or raw in _TEXT_MEMO:
        return text
    compact = raw.translate(None, _JSON_WHITESPACE) if not _NOT_INTEGER_LISTS.search(raw) else b""
    if compact:
        text = compact.decode().replace(",", ", ")
    else:
        value = msgspec.json.decode(raw)
        text = None if value is None else json.dumps(value, ensure_ascii=False)
    if len(_TEXT_MEMO) >= _TEXT_MEMO_LIMIT:
        _TEXT_MEMO.clear()
    _TEXT_MEMO[raw] = text
    return text


def _raw_bytes(values: np.ndarray) -> list[bytes]:
    """Return the bytes of each :class:`msgspec.Raw` value, by one join and one split.

    Valid JSON text holds no NUL byte (control characters in strings must be escaped), so NUL
    separates the values exactly; ``bytes(raw)`` one value at a time costs half as much again.
    """
    parts = b"\0".join(values.tolist()).split(b"\0")
    return parts if len(parts) == len(values) else list(map(bytes, values))


def _json_texts(values: np.ndarray, typed: bool) -> np.ndarray:
    """JSON text of each value (``json.dumps`` separators), None where the value is missing.

    The typed decoder hands over raw JSON text (:class:`msgspec.Raw`): each distinct text is
    written once per process (:func:`_raw_text`).  The :mod:`json` path's values are grouped by
    ``repr`` and each distinct value written by :func:`json.dumps`.  Escaped invalid UTF-8 bytes
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
    if typed:  # one dictionary look-up per value; a text not seen before in this process is written
        texts = list(map(_TEXT_MEMO.get, _raw_bytes(values), repeat(_UNSEEN)))
        if _UNSEEN in texts:
            for i in [i for i, t in enumerate(texts) if t is _UNSEEN]:
                texts[i] = _raw_text(bytes(values[i]))
        return _objects(texts, n)
    keys = _objects(map(repr, values), n)
    codes, uniques = pd.factorize(keys)
    first = np.zeros(len(uniques), dtype=np.int64)
    first[codes[::-1]] = np.arange(n)[::-1]  # a row holding each distinct value
    texts = np.empty(len(uniques), dtype=object)
    for j, i in enumerate(first):  # distinct values: a handful
        v = values[i]
        texts[j] = None if v is None else json.dumps(v, ensure_ascii=False)
    return texts[codes]
