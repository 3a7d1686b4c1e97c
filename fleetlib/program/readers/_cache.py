"""The trace cache: one uncompressed Parquet file per (content, options, reader version)."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.program.readers._frames import frame as build_frame
from fleetlib.program.readers._tables import READER_VERSION, _Built, _empty, _Options
from fleetlib.program.schema import _dtypes
from fleetlib.quality import Flag, Ledger, LedgerEntry

#: Environment variable naming the cache directory (default ``~/.cache/fleetlib/traces``).
CACHE_ENV = "FLEETLIB_TRACE_CACHE"
def default_cache_dir() -> Path:
    """Return the trace cache directory: ``$FLEETLIB_TRACE_CACHE`` or ``~/.cache/fleetlib/traces``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fleetlib" / "traces"

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


#: The categorical dtype of each set of free categories read back (the ranks of a job share their
#: sets of names, so one dtype serves every file's reload; building one is a fifth of a reload).
_FREE_DTYPES: dict[tuple[str, ...], pd.CategoricalDtype] = {}


def _free_dtype(categories: tuple[str, ...]) -> pd.CategoricalDtype:
    """Return the dtype of categories written from a valid categorical (not validated again)."""
    dtype = _FREE_DTYPES.get(categories)
    if dtype is None:
        cats = pd.Index(list(categories), dtype="str")
        fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)
        dtype = fast(cats, False) if fast is not None else pd.CategoricalDtype(cats)
        if len(_FREE_DTYPES) > 4096:
            _FREE_DTYPES.clear()
        _FREE_DTYPES[categories] = dtype
    return dtype


def _column_from_arrow(table: Any, name: str, dtype: Any, n: int) -> Any:
    """Return the first ``n`` rows of a column written by :func:`_column_to_arrow`, as pandas."""
    chunked = table.column(name)
    col = (chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()).slice(0, n)
    if isinstance(dtype, pd.CategoricalDtype) or dtype == "category":
        codes = col.fill_null(-1).to_numpy(zero_copy_only=False) if col.null_count else col.to_numpy()
        if not isinstance(dtype, pd.CategoricalDtype):
            dtype = _free_dtype(tuple(table.column(name + ".categories").drop_null().to_pylist()))
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


def _write_cache(path: Path, built: _Built, ledger: Ledger) -> None:
    """Write all four tables to one Parquet file (columns ``table.column``, padded to one length).

    Metadata and ledger travel as JSON in the file's key-value metadata; the ledger's entries and
    flags without their file name, which is the name of whichever copy is read (a renamed copy of
    a trace is a cache hit).
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
        "metadata": built.metadata, "read": ledger.read, "kept": ledger.kept,
        "entries": [[e.action, e.row, e.field, e.reason] for e in ledger.entries],
        "flags": [{k: v for k, v in f.to_dict().items() if k != "file"} for f in ledger.flags],
        "unused": ledger.unused,
    }
    table = pa.table(arrays).replace_schema_metadata(
        {b"fleetlib.trace": json.dumps(payload, default=str).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    # a name no other process or thread writes: workers sharing the directory never mix their bytes,
    # and the rename is atomic, so a reader sees a whole file or none
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}.tmp")
    # uncompressed, plain-encoded, no statistics: a larger file that decodes several times faster
    try:
        pq.write_table(table, tmp, compression="none", use_dictionary=False, write_statistics=False)
        os.replace(tmp, path)
    finally:
        if tmp.exists():  # a failed write leaves no partial file behind
            tmp.unlink()


def _read_cache(path: Path, file: str) -> tuple[_Built, Ledger] | None:
    """Return the tables and ledger of a cache file (entries and flags naming ``file``), or None."""
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
            frames[t] = build_frame(columns) if n else _empty(dtypes)
        ledger = Ledger(read=int(payload["read"]), kept=int(payload["kept"]),
                        entries=[LedgerEntry(a, file, r, f, why) for a, r, f, why in payload["entries"]],
                        flags=[Flag(**{**f, "file": file}) for f in payload["flags"]],
                        unused={str(k): int(v) for k, v in payload["unused"].items()})
    except Exception:  # a damaged or foreign cache entry is ignored and rewritten
        return None
    return _Built(frames["kernels"], frames["steps"], frames["host_syncs"], payload["metadata"],
                  frames["ops"]), ledger
