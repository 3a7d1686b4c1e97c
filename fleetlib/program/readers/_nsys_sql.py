"""SQL side of the Nsight Systems reader: opening an export and reading its tables into frames.

Private to :mod:`fleetlib.program.readers.nsys` (which documents the schema followed, the ledger
and the tables built from these frames).  Each table read keeps its own
:class:`~fleetlib.quality.RowBook`: an entry's row is the record's ``rowid`` in that table and its
field is ``TABLE.column``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from fleetlib._io import GZIP_MAGIC, check_regular, read_bytes
from fleetlib.quality import InputError, Ledger, RowBook

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
_ACTIVITY_TABLES = (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE)
#: NVTX event types (the schema reference's ENUM_NSYS_EVENT_TYPE): ranges and domain creation.
NVTX_PUSH_POP, NVTX_START_END, NVTX_DOMAIN_CREATE = 59, 60, 75
#: CUPTI_ACTIVITY_MEMCPY_KIND values -> the direction in a copy's name.
COPY_KINDS: Mapping[int, str] = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
_PID_SHIFT = 0x1000000
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_VERSION_SUFFIX = re.compile(r"_v\d+$")


# ---------------------------------------------------------------------------------------------------
# Opening a database
# ---------------------------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only; refuse bytes that are not an SQLite database with an InputError."""
    file = str(path)
    check_regular(path)
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(GZIP_MAGIC):
        data = bytes(read_bytes(path))
        if not data.startswith(SQLITE_MAGIC):
            raise InputError(
                f"the gzip content is not an SQLite database (first bytes {data[:16]!r}); "
                f"expected an 'nsys export --type sqlite' file",
                file=file,
            )
        con = sqlite3.connect(":memory:")
        con.deserialize(data)
    elif not head.startswith(SQLITE_MAGIC):
        raise InputError(
            f"not an SQLite database (first bytes {head!r}, expected {SQLITE_MAGIC!r}); "
            f"export the report with 'nsys export --type sqlite'",
            file=file,
        )
    else:
        con = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
    # text that is not UTF-8 (a damaged name or string) reads with U+FFFD in place of the bad bytes;
    # the factory keeps what it replaced, so the records that use such text are named as repaired
    con.text_factory = LenientText()
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        con.close()
        raise InputError(f"the SQLite database cannot be read ({exc})", file=file) from exc
    return con


class LenientText:
    """An SQLite ``text_factory``: UTF-8 text as it is; invalid bytes replaced by U+FFFD, and noted.

    ``damaged`` holds every value the replacement produced (each distinct one once), so a table's
    records whose text is one of them can be named as repaired.
    """

    def __init__(self) -> None:
        self.damaged: set[str] = set()

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            self.damaged.add(text)
            return text


#: The repair named for a record whose text (its own, or through ``StringIds``) was not UTF-8.
DAMAGED_TEXT = "text holds invalid UTF-8 bytes: read with U+FFFD in their place"


def _damaged(con: sqlite3.Connection, values: Any) -> np.ndarray:
    """Mask of ``values`` that are text the connection's :class:`LenientText` repaired."""
    damaged = getattr(con.text_factory, "damaged", None)
    arr = np.asarray(values, dtype=object)
    if not damaged:
        return np.zeros(arr.shape, dtype=bool)
    return np.asarray(pd.Series(arr, dtype=object).isin(damaged), dtype=bool)


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    try:
        return [row[1] for row in con.execute(f'PRAGMA table_info("{table}")')]
    except sqlite3.DatabaseError as exc:
        raise InputError(f"the schema of table {table} cannot be read ({exc})", field=table) from exc


def _frame(con: sqlite3.Connection, table: str, wanted: Iterable[str], file: str) -> pd.DataFrame:
    """Rows of ``table`` with ``rowid`` and the wanted columns that exist (absent ones are None)."""
    have = set(_columns(con, table))
    cols = [c for c in wanted if c in have]
    select = ", ".join(["rowid AS _row", *(f'"{c}"' for c in cols)])
    try:
        frame = pd.read_sql_query(f'SELECT {select} FROM "{table}"', con)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
        raise InputError(f"table {table} cannot be read ({exc})", file=file, field=table) from exc
    for c in wanted:
        if c not in frame.columns:
            frame[c] = None
    return frame


def _int_column(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, ok mask): integers (or integral floats) only; text, NULL and fractions are not ok."""
    num = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    is_text = (
        values.map(lambda v: isinstance(v, (str, bytes))).to_numpy(dtype=bool)
        if values.dtype == object
        else np.zeros(len(values), dtype=bool)
    )
    ok = np.isfinite(num) & (num == np.round(num)) & ~is_text
    return np.where(ok, num, 0).astype(np.int64), ok


# ---------------------------------------------------------------------------------------------------
# One file
# ---------------------------------------------------------------------------------------------------


def _timed(
    frame: pd.DataFrame, table: str, book: RowBook, max_event_us: float
) -> tuple[np.ndarray, np.ndarray]:
    """Start/end ns of each row; invalid rows rejected in ``book``. Returns (start, end) int64."""
    start, s_ok = _int_column(frame["start"])
    end, e_ok = _int_column(frame["end"])
    book.reject(~s_ok, f"{table}.start", "missing or non-integer start timestamp (ns)")
    book.reject(s_ok & ~e_ok, f"{table}.end", "missing or non-integer end timestamp (ns)")
    ok = s_ok & e_ok
    zero = ok & (start == 0) & (end == 0)
    book.reject(zero, f"{table}.start", "start and end are both 0: CUPTI could not time this record")
    neg = ok & ~zero & (end < start)
    if neg.any():
        book.reject(
            neg,
            f"{table}.end",
            [f"negative duration ({(e - s) / 1000:g} µs)" for s, e in zip(start[neg], end[neg], strict=True)],
        )
    long_ = ok & ~neg & ((end - start) / 1000.0 > max_event_us)
    if long_.any():
        book.reject(
            long_,
            f"{table}.end",
            [
                f"duration {(e - s) / 1000:.6g} µs exceeds max_event_us={max_event_us:g} (a corrupt record)"
                for s, e in zip(start[long_], end[long_], strict=True)
            ],
        )
    return start, end


def _strings(con: sqlite3.Connection, file: str) -> dict[int, str]:
    # a NULL text is no name: the records naming it read as '<unnamed>' (a kernel's is a named repair)
    return {int(i): str(v) for i, v in con.execute("SELECT id, value FROM StringIds WHERE value IS NOT NULL")}


def _devices(con: sqlite3.Connection, tables: set[str]) -> list[dict[str, Any]]:
    """One dict per CUDA device: ``id`` (the CUDA device id kernels carry), ``name``, ``gpu_id``."""
    if "TARGET_INFO_GPU" not in tables:
        return []
    gpu_cols = set(_columns(con, "TARGET_INFO_GPU"))
    if not {"id", "name"} <= gpu_cols:
        return []
    gpus = {int(i): str(n) for i, n in con.execute('SELECT id, name FROM "TARGET_INFO_GPU"')}
    if "TARGET_INFO_CUDA_DEVICE" in tables and {"gpuId", "cudaId"} <= set(
        _columns(con, "TARGET_INFO_CUDA_DEVICE")
    ):
        pairs = sorted(
            {(int(c), int(g)) for g, c in con.execute('SELECT gpuId, cudaId FROM "TARGET_INFO_CUDA_DEVICE"')}
        )
        return [{"id": c, "gpu_id": g, "name": gpus.get(g, "")} for c, g in pairs]
    return [{"id": g, "gpu_id": g, "name": n} for g, n in sorted(gpus.items())]


def _session_start_ns(con: sqlite3.Connection, tables: set[str]) -> int:
    if "TARGET_INFO_SESSION_START_TIME" not in tables:
        return 0
    if "utcEpochNs" not in _columns(con, "TARGET_INFO_SESSION_START_TIME"):
        return 0
    row = con.execute('SELECT utcEpochNs FROM "TARGET_INFO_SESSION_START_TIME"').fetchone()
    return int(row[0]) if row and isinstance(row[0], int) and row[0] > 0 else 0


def _activities(
    con: sqlite3.Connection,
    tables: set[str],
    strings: dict[int, str],
    file: str,
    kernel_names: str,
    max_event_us: float,
    ledger: Ledger,
) -> pd.DataFrame:
    """Kernels, copies and fills of one file as one frame (ns times, name, cat, pid ...), valid rows only."""
    parts = []
    name_col = "demangledName" if kernel_names == "demangled" else "shortName"
    other_col = "shortName" if kernel_names == "demangled" else "demangledName"
    base = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid")
    for table in _ACTIVITY_TABLES:
        if table not in tables:
            continue
        extra = {
            KERNEL_TABLE: (name_col, other_col, "graphNodeId", "graphId"),
            MEMCPY_TABLE: ("bytes", "copyKind"),
            MEMSET_TABLE: ("bytes",),
        }[table]
        f = _frame(con, table, (*base, *extra), file)
        book = RowBook(file, f["_row"].to_numpy(dtype=np.int64))
        start, end = _timed(f, table, book, max_event_us)
        if table == KERNEL_TABLE:
            ids, _ = _int_column(f[name_col])
            alt, _ = _int_column(f[other_col])
            lookup = pd.Series(strings, dtype=object)
            names = pd.Series(ids).map(lookup).to_numpy(dtype=object)
            names = np.where(pd.isna(names), pd.Series(alt).map(lookup).to_numpy(dtype=object), names)
            missing = pd.isna(names)
            book.repair(
                missing & ~book.rejected,
                f"{table}.{name_col}",
                "name id not in StringIds (or its text is NULL): name replaced by '<unnamed>'",
            )
            names = np.where(missing, "<unnamed>", names)
            book.repair(_damaged(con, names) & ~book.rejected, f"{table}.{name_col}", DAMAGED_TEXT)
            cat = np.full(len(f), "kernel", dtype=object)
            graph = (pd.to_numeric(f["graphNodeId"], errors="coerce").fillna(0).to_numpy() != 0) | (
                pd.to_numeric(f["graphId"], errors="coerce").fillna(0).to_numpy() != 0
            )
            nbytes = np.full(len(f), np.nan)
        elif table == MEMCPY_TABLE:
            kinds, _ = _int_column(f["copyKind"])
            names = _per_unique(kinds, lambda k: f"Memcpy {COPY_KINDS.get(int(k), 'unknown')}")
            cat = np.full(len(f), "gpu_memcpy", dtype=object)
            graph = np.zeros(len(f), dtype=bool)
            nbytes = pd.to_numeric(f["bytes"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        else:
            names = np.full(len(f), "Memset", dtype=object)
            cat = np.full(len(f), "gpu_memset", dtype=object)
            graph = np.zeros(len(f), dtype=bool)
            nbytes = pd.to_numeric(f["bytes"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        keep = book.close(ledger)
        pid = pd.to_numeric(f["globalPid"], errors="coerce").fillna(0).to_numpy(dtype=np.int64) // _PID_SHIFT
        parts.append(
            pd.DataFrame(
                {
                    "start_ns": start,
                    "end_ns": end,
                    "device": pd.to_numeric(f["deviceId"], errors="coerce")
                    .fillna(-1)
                    .to_numpy(dtype=np.int64),
                    "stream": pd.to_numeric(f["streamId"], errors="coerce")
                    .fillna(-1)
                    .to_numpy(dtype=np.int64),
                    "correlation": pd.to_numeric(f["correlationId"], errors="coerce").astype("Int64"),
                    "pid": pid % _PID_SHIFT,
                    "name": names,
                    "cat": cat,
                    "graph": graph,
                    "bytes": nbytes,
                }
            )[keep]
        )
    if not parts:
        return pd.DataFrame(
            columns=[
                "start_ns",
                "end_ns",
                "device",
                "stream",
                "correlation",
                "pid",
                "name",
                "cat",
                "graph",
                "bytes",
            ]
        )
    return pd.concat(parts, ignore_index=True)


def _runtime(
    con: sqlite3.Connection,
    tables: set[str],
    strings: dict[int, str],
    file: str,
    max_event_us: float,
    ledger: Ledger,
) -> pd.DataFrame:
    if RUNTIME_TABLE not in tables:
        return pd.DataFrame(columns=["start_ns", "end_ns", "tid", "pid", "correlation", "name"])
    f = _frame(con, RUNTIME_TABLE, ("start", "end", "globalTid", "correlationId", "nameId"), file)
    book = RowBook(file, f["_row"].to_numpy(dtype=np.int64))
    start, end = _timed(f, RUNTIME_TABLE, book, max_event_us)
    ids, _ = _int_column(f["nameId"])
    names = pd.Series(ids).map(pd.Series(strings, dtype=object)).fillna("<unnamed>").to_numpy(dtype=object)
    book.repair(_damaged(con, names) & ~book.rejected, f"{RUNTIME_TABLE}.nameId", DAMAGED_TEXT)
    keep = book.close(ledger)
    names = _per_unique(names, lambda n: _VERSION_SUFFIX.sub("", str(n)))
    tid = pd.to_numeric(f["globalTid"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
    return pd.DataFrame(
        {
            "start_ns": start,
            "end_ns": end,
            "tid": tid,
            "pid": tid // _PID_SHIFT % _PID_SHIFT,
            "correlation": pd.to_numeric(f["correlationId"], errors="coerce").astype("Int64"),
            "name": names,
        }
    )[keep].reset_index(drop=True)


def _nvtx(
    con: sqlite3.Connection,
    tables: set[str],
    strings: dict[int, str],
    file: str,
    max_event_us: float,
    ledger: Ledger,
) -> pd.DataFrame:
    """NVTX ranges (valid, with an end) with their text and domain name; other events only counted."""
    cols = ["start_ns", "end_ns", "tid", "pid", "text", "domain"]
    if NVTX_TABLE not in tables:
        return pd.DataFrame(columns=cols)
    f = _frame(
        con, NVTX_TABLE, ("start", "end", "eventType", "text", "textId", "globalTid", "domainId"), file
    )
    etype, _ = _int_column(f["eventType"])
    ids, has_id = _int_column(f["textId"])
    lookup = pd.Series(strings, dtype=object)
    text = f["text"].astype(object).where(f["text"].notna(), pd.Series(ids).map(lookup).where(has_id))
    text = text.to_numpy(dtype=object)
    domain_ids, _ = _int_column(f["domainId"])
    created = etype == NVTX_DOMAIN_CREATE
    domains = dict(zip(domain_ids[created].tolist(), text[created].tolist(), strict=True))
    is_range = np.isin(etype, (NVTX_PUSH_POP, NVTX_START_END))
    sub = f.loc[is_range]
    sub_book = RowBook(file, sub["_row"].to_numpy(dtype=np.int64))
    start, end = _timed(sub, NVTX_TABLE, sub_book, float("inf"))
    from_id = f["text"].isna().to_numpy(bool)[is_range]
    sub_damaged = _damaged(con, text[is_range]) & ~sub_book.rejected
    sub_book.repair(sub_damaged & ~from_id, f"{NVTX_TABLE}.text", DAMAGED_TEXT)
    sub_book.repair(sub_damaged & from_id, f"{NVTX_TABLE}.textId", DAMAGED_TEXT)
    # the ranges' outcomes are settled by the sub-book, the other events by the whole-table book
    RowBook(file, f["_row"].to_numpy(dtype=np.int64)[~is_range]).close(ledger)
    keep = sub_book.close(ledger)
    tid = pd.to_numeric(sub["globalTid"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
    out = pd.DataFrame(
        {
            "start_ns": start,
            "end_ns": end,
            "tid": tid,
            "pid": tid // _PID_SHIFT % _PID_SHIFT,
            "text": text[is_range],
            "domain": _per_unique(domain_ids[is_range], lambda d: domains.get(int(d), "")),
        }
    )[keep]
    ledger.count_unused("nvtx:other_event", int((~is_range).sum()))
    return out.reset_index(drop=True)


def _per_unique(values: Any, fn: Any) -> np.ndarray:
    """``fn`` of each value, computed once per distinct value and broadcast back (object array)."""
    arr = np.asarray(values, dtype=object)
    if not len(arr):
        return np.zeros(0, dtype=object)
    codes, uniques = pd.factorize(pd.Series(arr, dtype=object), use_na_sentinel=False)
    per = np.empty(len(uniques), dtype=object)
    per[:] = [fn(u) for u in uniques]
    return per[codes]
