"""The trace cache: one file per (content, options, reader version) of raw, aligned column blocks.

A reload must cost a small fraction of a parse (a rank file parses in about 10 ms), so the file
holds each table as the blocks pandas keeps it in -- every ``float64`` column of a table in one
``(columns, rows)`` array, the ``int64`` ones in another, the ``bool`` ones in a third, the
masked ``Int64`` columns as one data and one mask array, a categorical as its codes, the text
columns as codes into one dictionary -- and a reload is one read of the file into one buffer,
array views into it and pandas blocks made from the views (:func:`_frame`): no per-column
conversion, no copy.  Text (free categories, the dictionaries) is stored once per distinct set;
the dtype or dictionary each set decodes to is kept per process (:data:`_STRINGS`), since the
ranks of a job share their sets of names.

Layout (little-endian), format :data:`CACHE_FORMAT`:

* 16 bytes: :data:`_MAGIC`, the format (``uint32``) and the header's length ``H`` (``uint32``);
* ``H`` bytes: the header, a JSON object -- the file's key (its name), the row count of each
  table, the count and byte length of each string set, and the metadata and ledger;
* the regions the header's counts imply (:func:`_layout`), each at the next multiple of 64 bytes,
  and nothing after the last.

A cache file is untrusted input (another user's folder may hold it): it is never unpickled; its
layout is computed from the counts, not read from it, and must end exactly at the file's end; the
bytes of every ``bool``, every code and every string set are checked before use (a bad code would
make pandas read outside its categories).  Anything wrong makes the file a miss -- the trace is
parsed again and the entry rewritten.  Values are stored bit for bit; a table, metadata or ledger
the format cannot reproduce exactly (an unexpected dtype, a non-JSON value) is not cached at all.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import struct
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import current_limits
from fleetlib.program.readers import _memo
from fleetlib.program.readers._frames import frame as build_frame
from fleetlib.program.readers._tables import READER_VERSION, _Built, _Options
from fleetlib.program.schema import table_dtypes
from fleetlib.quality import Flag, Ledger, LedgerEntry

try:  # pandas >= 3: tables built from their blocks; older pandas builds them column by column
    from pandas.api.internals import create_dataframe_from_blocks as _from_blocks
except ImportError:  # pragma: no cover - depends on the pandas installed
    _from_blocks = None
try:  # the block classes themselves: what create_dataframe_from_blocks calls, without its checks
    from pandas._libs.internals import BlockPlacement as _BlockPlacement
    from pandas.core.internals.blocks import get_block_type as _block_type
    from pandas.core.internals.managers import BlockManager as _BlockManager

    _FAST: tuple[Any, Any, Any] | None = (_block_type, _BlockPlacement, _BlockManager)
except ImportError:  # pragma: no cover - depends on the pandas installed
    _FAST = None
try:
    import msgspec

    _MSGSPEC_DECODE: Callable[[bytes], Any] | None = msgspec.json.Decoder().decode
except ImportError:  # pragma: no cover - msgspec is a declared dependency
    _MSGSPEC_DECODE = None

#: Environment variable naming the cache directory (default ``~/.cache/fleetlib/traces``).
CACHE_ENV = "FLEETLIB_TRACE_CACHE"
#: Version of the file layout below; part of every cache file's name and header.
CACHE_FORMAT = 1
#: Suffix of the cache files (the Parquet files of earlier versions are never looked up).
CACHE_SUFFIX = ".fltrace"

#: The parse's memo of sorted-text categorical dtypes (see _decode_set), where it has one.
_TEXT_DTYPE: Callable[[np.ndarray], pd.CategoricalDtype] | None = getattr(_memo, "text_dtype", None)
_MAGIC = b"FLTRACE\x00"
_PREFIX = struct.Struct("<8sII")
_ALIGN = 64
_TABLES = ("kernels", "steps", "host_syncs", "ops")
_STR = pd.Index([], dtype="str").dtype  # the dtype of the readers' free categories
_LIMIT = 1 << 40  # no count in a header is larger (a larger one is a damaged file)
_NATIVE = sys.byteorder == "little"  # the regions are little-endian; elsewhere nothing is cached


def default_cache_dir() -> Path:
    """Return the trace cache directory: ``$FLEETLIB_TRACE_CACHE`` or ``~/.cache/fleetlib/traces``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fleetlib" / "traces"


def _cache_path(cache_dir: Path, sha: str, opts: _Options) -> Path:
    return cache_dir / f"{sha}-{opts.digest()}-r{READER_VERSION}-c{CACHE_FORMAT}{CACHE_SUFFIX}"


# ---------------------------------------------------------------------------------------------------
# The block plan of each table (from its schema) and the layout of a file
# ---------------------------------------------------------------------------------------------------

_I64, _U8, _BOOL, _I32 = np.dtype(np.int64), np.dtype(np.uint8), np.dtype(np.bool_), np.dtype(np.int32)


@dataclass(frozen=True)
class _Plan:
    """How a table's columns map to stored regions and pandas blocks (built once per table).

    ``numeric``: per numpy dtype, in order of first appearance, the column positions and their
    placement (one 2-D block each); ``rank``: (index into ``numeric``, row) of the ``rank``
    column, filled on reload; ``masked``: the ``Int64`` columns; ``cats``: each categorical
    column with its fixed dtype (None for free categories, stored as a string set); ``objects``:
    the text columns (one block, codes into one dictionary); ``kinds``: the kind of each string
    set the table stores (its free categories, then its dictionary); ``regions``: per region, its
    dtype (None: a free categorical's codes, sized by its set) and rows (None: one-dimensional).
    Placements are shared by every table built from the plan, so they are read-only.
    """

    columns: pd.Index
    names: tuple[str, ...]
    numeric: tuple[tuple[np.dtype, tuple[int, ...], np.ndarray], ...]
    rank: tuple[int, int] | None
    masked: tuple[tuple[int, np.ndarray], ...]
    cats: tuple[tuple[int, pd.CategoricalDtype | None, np.ndarray], ...]
    objects: tuple[int, ...]
    objects_placement: np.ndarray
    kinds: tuple[str, ...]
    regions: tuple[tuple[np.dtype | None, int | None], ...]
    block_places: tuple[Any, ...] | None  # pandas' placement of each block, in order (see _frame)


_PLANS: dict[str, _Plan] = {}


def _placement(positions: tuple[int, ...] | list[int]) -> np.ndarray:
    out = np.array(positions, dtype=np.intp)
    out.flags.writeable = False
    return out


_CODE_DTYPES = tuple((int(np.iinfo(d).max), np.dtype(d)) for d in (np.int8, np.int16, np.int32))


def _codes_dtype(categories: int) -> np.dtype:
    """Return the dtype of a categorical's codes as pandas makes it (``coerce_indexer_dtype``)."""
    for bound, dtype in _CODE_DTYPES:
        if categories < bound:
            return dtype
    return _I64


def _plan(table: str) -> _Plan:
    """Return the block plan of ``table``'s schema; a dtype the format does not know raises."""
    plan = _PLANS.get(table)
    if plan is not None:
        return plan
    dtypes = table_dtypes(table)
    groups: dict[np.dtype, list[int]] = {}
    masked, cats, objects = [], [], []
    for j, d in enumerate(dtypes.values()):
        if isinstance(d, pd.CategoricalDtype):
            cats.append((j, d, _placement([j])))
        elif d == "category":
            cats.append((j, None, _placement([j])))
        elif d == "Int64":
            masked.append((j, _placement([j])))
        elif d == "object":
            objects.append(j)
        elif np.dtype(d).kind in "biuf":
            groups.setdefault(np.dtype(d), []).append(j)
        else:
            raise TypeError(f"the trace cache cannot store a {d} column")
    names = tuple(dtypes)
    numeric = tuple((d, tuple(ps), _placement(ps)) for d, ps in groups.items())
    rank = None
    if dtypes.get("rank") == "int64":
        j = names.index("rank")
        rank = next((g, ps.index(j)) for g, (_, ps, _) in enumerate(numeric) if j in ps)
    regions: list[tuple[np.dtype | None, int | None]] = [(d, len(ps)) for d, ps, _ in numeric]
    if masked:
        regions += [(_I64, len(masked)), (_BOOL, len(masked))]
    regions += [(None if d is None else _codes_dtype(len(d.categories)), None) for _, d, _ in cats]
    if objects:
        regions.append((_I32, len(objects)))
    kinds = ("categories",) * sum(d is None for _, d, _ in cats) + ("dictionary",) * bool(objects)
    order = [ps for _, ps, _ in numeric] + [[j] for j, _ in masked] + [[j] for j, _, _ in cats]
    places = None if _FAST is None else tuple(_FAST[1](np.array(ps, dtype=np.intp))
                                              for ps in order + ([objects] if objects else []))
    plan = _PLANS[table] = _Plan(pd.Index(list(names)), names, numeric, rank, tuple(masked), tuple(cats),
                                 tuple(objects), _placement(objects), kinds, tuple(regions), places)
    return plan


def _string_kinds() -> list[str]:
    """Return the kind of each string set of a file, in order: ``categories`` or ``dictionary``."""
    return [kind for t in _TABLES for kind in _plan(t).kinds]


def _layout(rows: list[int], strings: list[list[Any]]) -> list[tuple[np.dtype, tuple[int, ...]]]:
    """Return the regions a file holds, in order: (dtype, shape) of each, from the header's counts.

    Per table: one ``(k, n)`` region per numeric dtype, the ``Int64`` data and mask, each
    categorical's codes, the dictionary codes of the text columns; then per string set its end
    offsets (characters, ``int64``) and its UTF-8 bytes.  ``strings``: (count, bytes, text dtype)
    of each string set, in the order of :func:`_string_kinds`.
    """
    out: list[tuple[np.dtype, tuple[int, ...]]] = []
    first = 0  # the table's first string set
    for table, n in zip(_TABLES, rows, strict=True):
        plan = _plan(table)
        free = iter(strings[first:first + len(plan.kinds)])  # its free categories come first
        first += len(plan.kinds)
        for dtype, k in plan.regions:
            if dtype is None:
                dtype = _codes_dtype(next(free)[0])
            out.append((dtype, (n,) if k is None else (k, n)))
    for count, nbytes, _ in strings:
        out += [(_I64, (count,)), (_U8, (nbytes,))]
    return out


def _align(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def _offsets(start: int, layout: list[tuple[np.dtype, tuple[int, ...]]]) -> tuple[list[int], int]:
    """Return the offset of each region (64-aligned) after ``start``, and the file's total size."""
    offsets, end = [], start
    for dtype, shape in layout:
        end = _align(end)
        offsets.append(end)
        end += dtype.itemsize * math.prod(shape)
    return offsets, end


# ---------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------


class _Uncacheable(Exception):
    """A table, metadata or ledger the format cannot reproduce exactly: the entry is not written."""


def _text_set(strings: list[str]) -> tuple[np.ndarray, bytes]:
    """Return a string set as stored: each string's end offset (in characters), and the UTF-8 text."""
    ends = np.cumsum(np.array([len(s) for s in strings], dtype=np.int64))
    # surrogatepass: a lone surrogate (a trace may escape one) is kept, not refused or replaced
    return ends, "".join(strings).encode("utf-8", "surrogatepass")


def _encode_table(plan: _Plan, frame: pd.DataFrame, out: list[np.ndarray],
                  strings: list[tuple[np.ndarray, bytes, str, Any]]) -> int:
    """Append ``frame``'s regions to ``out`` and its string sets to ``strings``; return its rows.

    A string set comes with what a reload decodes it to (the column's dtype, or the dictionary's
    strings and None), for the memo of :func:`_decode_set`.
    """
    n = len(frame)
    index = frame.index
    if (tuple(frame.columns) != plan.names or type(index) is not pd.RangeIndex or index.start != 0
            or index.step != 1 or index.name is not None or frame.columns.name is not None):
        raise _Uncacheable("columns or index")
    cols = [frame[c] for c in plan.names]
    for d, ps, _ in plan.numeric:
        if any(cols[j].dtype != d for j in ps):
            raise _Uncacheable("dtype")
        out.append(np.stack([cols[j].to_numpy() for j in ps]) if ps else np.empty((0, n), d))
    if plan.masked:
        arrays = [cols[j].array for j, _ in plan.masked]
        if any(cols[j].dtype != pd.Int64Dtype() for j, _ in plan.masked):
            raise _Uncacheable("dtype")
        # the data under the mask too: a reload is the parse bit for bit, not just equal to it
        out += [np.stack([a._data for a in arrays]), np.stack([a._mask for a in arrays])]
    for j, fixed, _ in plan.cats:
        dtype = cols[j].dtype
        if not isinstance(dtype, pd.CategoricalDtype) or dtype.ordered is not False:
            raise _Uncacheable("dtype")
        cats = dtype.categories
        if fixed is not None:
            if not (cats.dtype == fixed.categories.dtype and cats.equals(fixed.categories)):
                raise _Uncacheable("dtype")
        elif cats.dtype == _STR or (cats.dtype == object and all(type(c) is str for c in cats)):
            strings.append((*_text_set(cats.tolist()), "str" if cats.dtype == _STR else "object", dtype))
        else:  # an empty table's categories are an empty object index: those are kept as they are
            raise _Uncacheable("dtype")
        out.append(np.asarray(cols[j].array.codes, dtype=_codes_dtype(len(cats))))
    if plan.objects:
        if any(cols[j].dtype != object for j in plan.objects):
            raise _Uncacheable("dtype")
        values = np.concatenate([cols[j].to_numpy() for j in plan.objects])
        try:
            codes, uniques = pd.factorize(values, use_na_sentinel=True)
        except TypeError as exc:  # an unhashable value (a list): not text
            raise _Uncacheable("text values") from exc
        missing = values[codes < 0]
        if (any(v is not None for v in missing) or any(type(u) is not str for u in uniques)
                or len(uniques) >= np.iinfo(np.int32).max):
            raise _Uncacheable("text values")  # only text and None are stored
        out.append(codes.astype(np.int32).reshape(len(plan.objects), n))
        strings.append((*_text_set(uniques.tolist()), "object", np.array([*uniques, None], dtype=object)))
    return n


def _same(a: Any, b: Any) -> bool:
    """Whether two JSON-like values are identical: types, key order and float bits included."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def _payload(built: _Built, ledger: Ledger, file: str | None) -> dict[str, Any]:
    """Return the metadata and ledger as JSON values; ``True`` stands for the file read."""
    def where(f: str | None) -> str | bool | None:
        return True if file is not None and f == file else f

    return {"metadata": built.metadata, "read": ledger.read, "kept": ledger.kept,
            "entries": [[e.action, where(e.file), e.row, e.field, e.reason] for e in ledger.entries],
            "flags": [{**f.to_dict(), "file": where(f.file)} for f in ledger.flags],
            "unused": ledger.unused}


def _encode(key: str, built: _Built, ledger: Ledger, file: str | None
            ) -> tuple[list[bytes | np.ndarray], list[tuple[str, Any]]]:
    """Return the pieces of a cache file (the prefix with the header, then each region), in order.

    With them, per string set, its memo kind and what it decodes to (see :func:`_decode_set`).
    """
    regions: list[np.ndarray] = []
    strings: list[tuple[np.ndarray, bytes, str, Any]] = []
    rows = [_encode_table(_plan(t), getattr(built, t), regions, strings) for t in _TABLES]
    counts = [[len(ends), len(blob), text] for ends, blob, text, _ in strings]
    for ends, blob, _, _ in strings:
        regions += [ends, np.frombuffer(blob, dtype=np.uint8)]
    header = {"key": key, "rows": rows, "strings": counts, **_payload(built, ledger, file)}
    try:
        text = json.dumps(header, ensure_ascii=True, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise _Uncacheable("metadata") from exc
    # a tuple, a non-text key, a NaN msgspec does not read ...: not reproducible, not cached
    if not _same(json.loads(text), header):
        raise _Uncacheable("metadata")
    if _MSGSPEC_DECODE is not None:  # the reader's first decoder: what it reads must be exact too
        try:
            again = _MSGSPEC_DECODE(text.encode())
        except ValueError:  # NaN, Infinity, a lone surrogate: the reader falls back to json
            again = header
        if not _same(again, header):
            raise _Uncacheable("metadata")
    head = text.encode()
    layout = _layout(rows, counts)
    if [(r.dtype, r.shape) for r in regions] != layout:  # the writer and the reader agree
        raise AssertionError("trace cache: regions differ from their layout")
    decoded = [(f"{kind}:{text_dtype}", value)
               for kind, (_, _, text_dtype, value) in zip(_string_kinds(), strings, strict=True)]
    return [_PREFIX.pack(_MAGIC, CACHE_FORMAT, len(head)) + head, *regions], decoded


def _write_cache(path: Path, built: _Built, ledger: Ledger, file: str | None = None) -> bool:
    """Write the tables, metadata and ledger of one parse to the cache file ``path``.

    Parameters
    ----------
    path
        The entry (:func:`_cache_path`); its folder is created if needed.
    built, ledger
        What the parse returned, before the rank is resolved.
    file
        The file parsed: ledger entries and flags naming it are stored as naming "the file read",
        so a renamed copy of the trace (a cache hit) gets its own name in them.

    Returns
    -------
    bool
        False when the format cannot reproduce the tables, metadata or ledger exactly (nothing is
        written: the file is parsed again next time).

    Raises
    ------
    OSError
        The folder or file cannot be written.
    """
    if not _NATIVE:
        return False
    try:
        pieces, decoded = _encode(path.name, built, ledger, file)
    except _Uncacheable:
        return False
    layout_start = len(pieces[0])
    offsets, size = _offsets(layout_start, [(r.dtype, r.shape) for r in pieces[1:]])
    buf = np.zeros(size, dtype=np.uint8)  # zero padding: two writers of one entry write the same bytes
    buf[:layout_start] = np.frombuffer(pieces[0], dtype=np.uint8)
    for offset, region in zip(offsets, pieces[1:], strict=True):
        buf[offset:offset + region.nbytes] = np.ascontiguousarray(region).reshape(-1).view(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a name no other process or thread writes: workers sharing the directory never mix their bytes,
    # and the rename is atomic, so a reader sees a whole file or none
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(memoryview(buf))
        os.replace(tmp, path)
    finally:
        if tmp.exists():  # a failed write leaves no partial file behind
            tmp.unlink()
    # what this process would decode the string sets to, it has: a reload here need not decode them
    first = len(offsets) - 2 * len(decoded)
    for s, (kind, value) in enumerate(decoded):
        at = first + 2 * s
        stored = buf[offsets[at]:offsets[at + 1] + pieces[1 + at + 1].nbytes].tobytes()
        _remember((kind, stored), value)
        _remember_recent((path.name, s), stored, value)
    return True


# ---------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------


class _Damaged(Exception):
    """A cache file that is not a whole, valid entry of this format and key."""


#: (kind and text dtype, stored bytes of a string set) -> what they decode to: a categorical dtype
#: (free categories) or an object array of the strings plus None (a dictionary).  Bounded.
_STRINGS: dict[tuple[str, bytes], Any] = {}
_STRINGS_LIMIT = 4096
#: (cache file name, string set) -> (its stored bytes, what they decode to), the last seen: a
#: reload of the same entry compares its bytes (no hash of them) to find what it decoded before.
_RECENT: dict[tuple[str, int], tuple[bytes, Any]] = {}


def _decode_set(kind: str, ends: np.ndarray, blob: np.ndarray, stored: bytes) -> Any:
    """Decode (once per process and content) one string set; ``stored`` is its two regions' bytes."""
    key = (kind, stored)
    hit = _STRINGS.get(key)
    if hit is not None:
        return hit
    text = blob.tobytes().decode("utf-8", "surrogatepass")
    bounds = ends.tolist()
    if bounds:  # each string ends where the next begins, the last at the end of the text
        whole = bounds[0] >= 0 and bounds[-1] == len(text) and not (np.diff(ends) < 0).any()
    else:
        whole = not text
    if not whole:
        raise _Damaged("string offsets")
    strings = [text[a:b] for a, b in itertools.pairwise([0, *bounds])]
    if kind == "categories:str" and _TEXT_DTYPE is not None and all(
            a < b for a, b in itertools.pairwise(strings)):
        # sorted strictly, so distinct: the readers' own memo of such dtypes (the one the parse
        # fills) needs no second check -- and a reload shares the parse's dtype objects
        out: Any = _TEXT_DTYPE(np.array(strings, dtype=object))
    elif kind.startswith("categories:"):  # validated: distinct, no missing value (else it raises)
        out = pd.CategoricalDtype(pd.Index(strings, dtype=kind.partition(":")[2]), ordered=False)
    else:
        out = np.array([*strings, None], dtype=object)
    _remember(key, out)
    return out


def _remember(key: tuple[str, bytes], value: Any) -> None:
    if isinstance(value, np.ndarray):
        value.flags.writeable = False  # shared by every reload: never handed out, only taken from
    if len(_STRINGS) >= _STRINGS_LIMIT:
        _STRINGS.clear()
    _STRINGS[key] = value


def _remember_recent(entry: tuple[str, int], stored: bytes, value: Any) -> None:
    if len(_RECENT) >= _STRINGS_LIMIT:
        _RECENT.clear()
    _RECENT[entry] = (stored, value)


#: ``IntegerArray(data, mask)`` without its checks of what the layout guarantees (int64 data, a
#: checked bool mask of the same length), where pandas has the constructor that skips them.
_masked = getattr(pd.arrays.IntegerArray, "_simple_new", pd.arrays.IntegerArray)


def _checked_codes(codes: np.ndarray, count: int) -> np.ndarray:
    """Return ``codes`` if each is -1 (missing) or a valid position in ``count`` values."""
    if codes.size and (codes.min() < -1 or codes.max() >= count):
        raise _Damaged("codes out of range")  # pandas would read outside the categories
    return codes


def _checked_bools(values: np.ndarray) -> np.ndarray:
    if values.size and values.view(np.uint8).max() > 1:
        raise _Damaged("bool bytes")
    return values


def _read_whole(path: Path) -> np.ndarray:
    """Return the file's bytes in one writable, aligned buffer (the tables' arrays view it).

    A file larger than the input limit (``max_bytes`` of :func:`fleetlib._io.current_limits`) is
    not read at all: an entry is far smaller than the trace it holds, and a huge foreign file in a
    shared folder must not cost its size in memory.
    """
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if size > current_limits().max_bytes:
            raise _Damaged("larger than the input limit")
        buf = np.empty(size, dtype=np.uint8)
        if f.readinto(memoryview(buf)) != size:
            raise _Damaged("short read")
    return buf


def _decode_json(text: bytes) -> Any:
    """Decode a header: by msgspec where installed, else (or where it refuses the text) by json.

    The writer checked that both give back exactly what was written, or that msgspec refuses it
    (it reads no ``NaN``, ``Infinity`` or lone surrogate escape).
    """
    if _MSGSPEC_DECODE is not None:
        try:
            return _MSGSPEC_DECODE(text)
        except ValueError:  # msgspec.DecodeError
            pass
    return json.loads(text)


def _count(value: Any) -> bool:
    return type(value) is int and 0 <= value < _LIMIT


def _header(buf: np.ndarray, name: str) -> tuple[dict[str, Any], list[np.ndarray], list[int]]:
    """Return the header of a cache file and a view of each region, with the regions' offsets.

    The header is checked against the format, the file's name, the schema and the file's size:
    the regions its counts imply must end exactly at the end of the file.
    """
    if len(buf) < _PREFIX.size:
        raise _Damaged("too short")
    magic, version, length = _PREFIX.unpack(buf[:_PREFIX.size].tobytes())
    if magic != _MAGIC or version != CACHE_FORMAT or _PREFIX.size + length > len(buf):
        raise _Damaged("not a cache file of this format")
    head = _decode_json(buf[_PREFIX.size:_PREFIX.size + length].tobytes())
    if type(head) is not dict or head.get("key") != name:
        raise _Damaged("another entry's file")  # copied or renamed: not the content its name says
    rows, strings, kinds = head["rows"], head["strings"], _string_kinds()
    if (type(rows) is not list or len(rows) != len(_TABLES) or not all(_count(n) for n in rows)
            or type(strings) is not list or len(strings) != len(kinds)
            or not all(type(s) is list and len(s) == 3 and _count(s[0]) and _count(s[1])
                       and s[2] in (("str", "object") if kind == "categories" else ("object",))
                       for s, kind in zip(strings, kinds, strict=True))):
        raise _Damaged("counts")
    views, offsets, end = [], [], _PREFIX.size + length
    for dtype, shape in _layout(rows, strings):
        end = -(-end // _ALIGN) * _ALIGN
        size = dtype.itemsize * (shape[0] if len(shape) == 1 else shape[0] * shape[1])
        if end + size > len(buf):
            raise _Damaged("truncated")
        views.append(np.ndarray(shape, dtype, buf, end))  # a view: no copy
        offsets.append(end)
        end += size
    if end != len(buf):
        raise _Damaged("bytes after the last region")
    return head, views, offsets


def _table_blocks(plan: _Plan, regions: Iterator[np.ndarray],
                  sets: Iterator[Any]) -> tuple[list[tuple[Any, np.ndarray]], np.ndarray | None]:
    """Return the blocks of one table (array, placement), checked, and its ``rank`` row."""
    blocks: list[tuple[Any, np.ndarray]] = []
    rank_row = None
    for g, (dtype, _, placement) in enumerate(plan.numeric):
        values = next(regions)
        if dtype.kind == "b":
            _checked_bools(values)
        if plan.rank is not None and plan.rank[0] == g:
            rank_row = values[plan.rank[1]]
        blocks.append((values, placement))
    if plan.masked:
        data, mask = next(regions), _checked_bools(next(regions))
        blocks += [(_masked(data[k], mask[k]), placement) for k, (_, placement) in enumerate(plan.masked)]
    for _, fixed, placement in plan.cats:
        dtype = fixed if fixed is not None else next(sets)
        codes = _checked_codes(next(regions), len(dtype.categories))
        blocks.append((pd.Categorical.from_codes(codes, dtype=dtype, validate=False), placement))
    if plan.objects:
        uniques = next(sets)
        codes = _checked_codes(next(regions), len(uniques) - 1)
        blocks.append((uniques[codes], plan.objects_placement))  # -1 takes the trailing None
    return blocks, rank_row


def _decode_tables(buf: np.ndarray, head: Mapping[str, Any], views: list[np.ndarray], offsets: list[int]
                   ) -> tuple[list[list[tuple[Any, np.ndarray]]], list[np.ndarray | None]]:
    """Decode and check every region: per table its blocks and the row of its rank column."""
    first = len(views) - 2 * len(head["strings"])  # the string sets follow the tables' regions
    sets = []
    for s, (kind, (_, nbytes, text)) in enumerate(zip(_string_kinds(), head["strings"], strict=True)):
        at = first + 2 * s
        stored = buf[offsets[at]:offsets[at + 1] + nbytes].tobytes()
        recent = _RECENT.get((head["key"], s))
        if recent is not None and recent[0] == stored:  # the same bytes: what they decoded to
            sets.append(recent[1])
            continue
        value = _decode_set(f"{kind}:{text}", views[at], views[at + 1], stored)
        _remember_recent((head["key"], s), stored, value)
        sets.append(value)
    regions, set_iter = iter(views[:first]), iter(sets)
    tables, rank_rows = [], []
    for t in _TABLES:
        blocks, rank_row = _table_blocks(_plan(t), regions, set_iter)
        tables.append(blocks)
        rank_rows.append(rank_row)
    return tables, rank_rows


def _frame(plan: _Plan, n: int, blocks: list[tuple[Any, np.ndarray]]) -> pd.DataFrame:
    """Return the table built from its blocks.

    With pandas' block classes at hand (:data:`_FAST`) each block is made directly (a third of
    the cost of :func:`pandas.api.internals.create_dataframe_from_blocks`, which checks and
    converts what the plan guarantees); otherwise that function, or on pandas < 3
    :func:`_frames.frame`, column by column.
    """
    if plan.block_places is not None:
        block_type, _, manager = _FAST
        made = [block_type(values.dtype)(values, ndim=2, placement=place)
                for (values, _), place in zip(blocks, plan.block_places, strict=True)]
        mgr = manager(made, [plan.columns, pd.RangeIndex.from_range(range(n))], verify_integrity=False)
        return pd.DataFrame._from_mgr(mgr, mgr.axes)
    if _from_blocks is not None:
        return _from_blocks(blocks, pd.RangeIndex.from_range(range(n)), plan.columns)
    columns: dict[int, Any] = {}
    for values, placement in blocks:
        for k, j in enumerate(placement.tolist()):
            column = values[k] if isinstance(values, np.ndarray) else values
            columns[j] = pd.Series(column, dtype=object) if column.dtype == object else column
    return build_frame({plan.names[j]: columns[j] for j in range(len(plan.names))})


def _ledger(head: Mapping[str, Any], file: str) -> Ledger:
    def where(f: Any) -> Any:
        return file if f is True else f

    read, kept, unused = head["read"], head["kept"], head["unused"]
    if not (_count(read) and _count(kept) and type(unused) is dict
            and all(type(k) is str and _count(v) for k, v in unused.items())):
        raise _Damaged("ledger counts")
    return Ledger(read=read, kept=kept,
                  entries=[LedgerEntry(a, where(f), r, fd, why) for a, f, r, fd, why in head["entries"]],
                  flags=[Flag(**{**f, "file": where(f["file"])}) for f in head["flags"]],
                  unused=dict(unused))


def _read_cache(path: Path, file: str, rank_of: Callable[[dict[str, Any], Ledger], tuple[int, str]]
                ) -> tuple[_Built, Ledger, tuple[int, str]] | None:
    """Return the tables, ledger and rank of a cache file, or None for a missing or damaged one.

    Parameters
    ----------
    path
        The entry (:func:`_cache_path`).
    file
        The file being read: ledger entries and flags of "the file read" name it.
    rank_of
        Called with the metadata and ledger once the whole file is checked; returns the rank and
        its source (it may flag the ledger).  The rank fills each table's ``rank`` column; what it
        raises is raised.

    Returns
    -------
    tuple or None
        The tables with their ``rank`` filled, the ledger, and what ``rank_of`` returned; None when
        the file is missing, damaged, of another format or another entry's (the caller parses the
        trace again and rewrites the entry).
    """
    if not _NATIVE:
        return None
    try:
        buf = _read_whole(path)
        head, views, offsets = _header(buf, path.name)
        tables, rank_rows = _decode_tables(buf, head, views, offsets)
        ledger = _ledger(head, file)
        metadata = head["metadata"]
        if type(metadata) is not dict:
            raise _Damaged("metadata")
    except Exception:  # a damaged or foreign cache entry is ignored and rewritten
        return None
    resolved = rank_of(metadata, ledger)
    try:
        frames = []
        for t, blocks, rank_row, n in zip(_TABLES, tables, rank_rows, head["rows"], strict=True):
            if rank_row is not None:
                rank_row[:] = resolved[0]
            frames.append(_frame(_plan(t), n, blocks))
    except Exception:  # as above (a pandas that refuses the blocks)
        return None
    kernels, steps, host_syncs, ops = frames
    return _Built(kernels, steps, host_syncs, metadata, ops), ledger, resolved
