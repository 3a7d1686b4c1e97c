r"""Read Nsight Systems SQLite exports (``nsys export --type sqlite``) into the program rung's tables.

One file is one ``nsys profile`` report; it may hold one process (one rank, the usual
``nsys profile ... torchrun`` per-rank capture) or several.  The tables returned are those of the
Kineto reader (:mod:`fleetlib.program.readers.kineto`), so the step partition, the collective
matching and the program factor run on them unchanged:

``kernels`` (:data:`~fleetlib.program.schema.KERNEL_COLUMNS` + extras)
    one row per ``CUPTI_ACTIVITY_KIND_KERNEL``, ``CUPTI_ACTIVITY_KIND_MEMCPY`` and
    ``CUPTI_ACTIVITY_KIND_MEMSET`` record.  Kernel names come from ``StringIds`` through
    ``demangledName`` (``kernel_names="short"``: ``shortName``); copies are named ``Memcpy <kind>``
    from ``copyKind`` and fills ``Memset``.  ``stream`` is ``streamId``, ``device`` ``deviceId``,
    ``correlation`` ``correlationId``; ``launch_us`` is the start of the
    ``CUPTI_ACTIVITY_KIND_RUNTIME`` call with the same correlation id *in the same process*
    (links are keyed by (process, correlation), so ranks that reuse ids never cross);
    ``cuda_graph`` is set for kernels with a non-zero ``graphNodeId`` / ``graphId`` or launched by
    ``cudaGraphLaunch``.  ``kind`` follows :class:`~fleetlib.program.classify.Classifier`, metadata
    first (below); ``comm_rule`` names the rule that made a kernel communication.
``steps``
    NVTX ranges (``NVTX_EVENTS`` push/pop and start/end ranges, text from ``text`` or
    ``textId``) named ``ProfilerStep#N``; without any, ranges matching ``step_marker`` (a regular
    expression; a number it captures is the step), flagged ``steps_from_markers``; without either,
    one step 0 spanning the rank's GPU activity (``gpu_span``, flagged ``no_profiler_step``).
``host_syncs``
    runtime calls that synchronise with the device (``cudaDeviceSynchronize``,
    ``cudaStreamSynchronize``, ...; nsys's ``_v<version>`` suffix is dropped before matching).
``ops``
    empty: the export carries no operator shapes.

Communication by metadata first
-------------------------------
A kernel launched inside an NVTX range of the ``NCCL`` domain (NCCL's own NVTX ranges,
``ncclAllReduce``, ``ncclAllGather``, ``ncclReduceScatter``, ``ncclSend`` ...) whose name says a
collective is ``comm`` with that collective type (``collective_source`` ``host_annotation``,
``comm_rule`` ``metadata:nvtx:NCCL``), whatever its kernel name says.  A kernel launched in an
``nccl*`` range of another domain (PyTorch's ``nccl:all_reduce`` under ``emit_nvtx``) takes the
range's collective type if its name makes it communication.  Then the launcher: a kernel launched
inside an NVTX range (any domain) whose text says a collective (``dispatch(F)``, ``combine(B)``,
``nccl:all_reduce`` ...; :func:`fleetlib.program.classify.collective_from_launcher`) is ``comm``
(``comm_rule`` ``launcher:<text>``).  ``classified_by`` says which rule decided (``metadata``,
``launcher``, ``name``, ``none``); kernels found by name only are flagged ``comm_by_name_only``.
Everything else is classified by the
name patterns (``comm_rule`` ``name:<pattern>``; DeepEP, NVSHMEM, RCCL, symmetric-memory and custom
all-reduce kernels included), and the collective type of a name-classified kernel falls back to its
name.  Message bytes of collectives are not read (NCCL's NVTX payloads are binary schemas): ``bytes``
is missing for them, set for copies and fills.

Schema followed
---------------
The table and column names are those of the Nsight Systems "SQLite Export Schema Reference"
(``nsys-exporter/exported_data.html``), as documented for the 2021.5 release and kept by later
releases (2022-2025 exports add columns such as ``greenContextId``, ``graphNodeId``, ``graphId``;
none is required).  Columns are looked up by name (``PRAGMA table_info``), so extra columns and
column order do not matter; the ones read are: ``StringIds(id, value)``;
``CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId, streamId, correlationId, globalPid,
demangledName, shortName[, graphNodeId, graphId])``; ``CUPTI_ACTIVITY_KIND_MEMCPY(start, end,
deviceId, streamId, correlationId, globalPid, bytes, copyKind)``; ``CUPTI_ACTIVITY_KIND_MEMSET(...,
bytes)``; ``CUPTI_ACTIVITY_KIND_RUNTIME(start, end, globalTid, correlationId, nameId)``;
``NVTX_EVENTS(start, end, eventType, text, textId, globalTid, domainId)`` (event types 59
push/pop range, 60 start/end range, 75 domain creation); ``TARGET_INFO_GPU(id, name)`` and
``TARGET_INFO_CUDA_DEVICE(gpuId, cudaId[, pid])`` for device names;
``TARGET_INFO_SESSION_START_TIME(utcEpochNs)`` when present for the calendar clock.  A process id is
``globalPid`` (or ``globalTid``) ``// 0x1000000 % 0x1000000``, as the reference's recipes compute it.
The tests build files with exactly these tables; no real nsys binary was run here.

Time base and ranks
-------------------
nsys times are integer nanoseconds from the session start; ``start_us`` is that divided by 1000.
With ``TARGET_INFO_SESSION_START_TIME`` the session start is ``metadata["base_time_ns"]`` (a
calendar clock); otherwise the base is 0 (a relative clock) and a window selects nothing.  Files
of several ranks are moved onto the earliest base.  A file's rank comes from ``ranks=`` (by path or
file name), else from its name (``rank3``, ``worker_3``), else its position among the files; a file
with several processes that ran GPU work gives each process its own rank (in process-id order,
flag ``ranks_from_processes``).

Ledger
------
Records are the rows of the activity tables read -- kernels, copies, fills, runtime calls and NVTX
events -- so ``ledger.read`` is their ``COUNT(*)`` sum; dictionary tables (``StringIds``,
``TARGET_INFO_*``) are not records.  Each table keeps its own :class:`~fleetlib.quality.RowBook`:
an entry's row is the record's ``rowid`` in that table and its field is ``TABLE.column``.
Rejected: a missing or non-integer ``start``/``end``, both zero (CUPTI could not time it), a
negative duration, or a duration above ``max_event_us``.  Repaired: a kernel name id missing from
``StringIds`` or naming a NULL text (``<unnamed>``); a kernel, runtime call or NVTX range whose text
(its own or through ``StringIds``) holds bytes that are not UTF-8, read with U+FFFD in their place
(the field is the column that names the text).  Runtime calls that neither launch nor synchronise
and NVTX events that are neither steps nor collectives are kept and counted in ``ledger.unused``.
Bytes that are not an SQLite database (the first 16 bytes must be ``SQLite format 3\0``; gzip is
read through :mod:`fleetlib._io` and deserialised), a database without any CUDA activity table, or
one without ``StringIds`` raise :class:`~fleetlib.quality.InputError` naming the file.  Databases are opened
read-only (``file:...?mode=ro``).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from fleetlib._io import (
    GZIP_MAGIC,
    INFLATION_FLOOR,
    as_paths,
    check_regular,
    current_limits,
    read_bytes,
    time_range,
)
from fleetlib.accounting import Window
from fleetlib.program.classify import (
    Classifier,
    classified_by,
    collective_from_arg,
    collective_from_kernel_name,
    collective_from_launcher,
    comm_rule_launcher,
    comm_rule_metadata,
    host_sync_kinds,
    is_graph_launch,
)
from fleetlib.program.readers.kineto import (
    DEFAULT_MAX_EVENT_US,
    TraceSet,
    empty_host_syncs,
    empty_kernels,
    empty_ops,
    empty_steps,
    rank_from_file_name,
    select_window,
)
from fleetlib.program.schema import MEMORY_COLUMNS, table_dtypes
from fleetlib.quality import DomainError, InputError, Ledger, RowBook

__all__ = ["MEMORY_TABLE", "SQLITE_MAGIC", "TABLES", "read", "read_memory_usage", "read_nsys"]

PathLike = str | os.PathLike[str]

# ---------------------------------------------------------------------------------------------------
# The SQL side: opening an export and reading its tables into frames
# ---------------------------------------------------------------------------------------------------

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_MAGIC = b"SQLite format 3\x00"

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
#: The CUDA memory table ``nsys profile --cuda-memory-usage=true`` exports: one row per allocation or free.
MEMORY_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
#: ``memKind`` values of host memory (pageable, pinned): not device memory.
_HOST_MEM_KINDS = (0, 1)
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
    # no single value longer than a line may be: SQLite refuses it ("string or blob too big") before
    # it is made, whether stored or computed on read (a generated column, printf in a default)
    con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, min(current_limits().max_line_bytes, 2**31 - 1))
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
        return [row[1] for row in con.execute(f'PRAGMA table_xinfo("{table}")')]  # generated ones too
    except sqlite3.DatabaseError as exc:
        raise InputError(f"the schema of table {table} cannot be read ({exc})", field=table) from exc


def _bounded_text(con: sqlite3.Connection, table: str, cols: list[str], file: str) -> None:
    """Refuse ``table`` when reading ``cols`` would make more text than the file can hold.

    A tiny export can expand on read: a generated column, or a column added with a long default
    that every older row then carries, is text the file does not store.  Two bounds, each refused
    with the file, the table's row (its ``rowid``), the field and the limit: one value longer than
    ``max_line_bytes`` (SQLite refuses to make it), and the text of the table's rows, summed in row
    order, beyond ``max_inflation`` times the file's stored bytes (and the first 64 MiB, as for a
    gzip input).
    """
    if not cols:
        return
    lim = current_limits()
    stored = os.stat(file).st_size
    budget = min(lim.max_bytes, max(lim.max_inflation * stored, INFLATION_FLOOR))
    sizes = [f"(CASE WHEN typeof(\"{c}\") IN ('text', 'blob') THEN length(CAST(\"{c}\" AS BLOB)) ELSE 0 END)"
             for c in cols]
    try:
        over = con.execute(
            f'SELECT _row, _run FROM (SELECT rowid AS _row, sum({" + ".join(sizes)}) OVER (ORDER BY rowid) '
            f'AS _run FROM "{table}") WHERE _run > ? LIMIT 1', (budget,)).fetchone()
    except sqlite3.DataError as exc:  # a value longer than max_line_bytes
        row, col = _first_too_long(con, table, cols, sizes)
        raise InputError(f"a value longer than {lim.max_line_bytes:,} bytes (limit max_line_bytes; raise "
                         "it with --limit max_line_bytes=N)", file=file, row=row,
                         field=f"{table}.{col}") from exc
    if over is None:
        return
    row, run = int(over[0]), int(over[1])
    each = con.execute(f'SELECT {", ".join(sizes)} FROM "{table}" WHERE rowid = ?', (row,)).fetchone()
    col = cols[int(np.argmax(np.asarray(each, dtype=float)))]
    raise InputError(f"the text of rows up to this one is {run:,} bytes, more than {lim.max_inflation} times "
                     f"the file's {stored:,} stored bytes (limit max_inflation; raise it with --limit "
                     "max_inflation=N)", file=file, row=row, field=f"{table}.{col}")


def _first_too_long(con: sqlite3.Connection, table: str, cols: list[str],
                    sizes: list[str]) -> tuple[int, str]:
    """Return the first (rowid, column) whose value SQLite refuses as too big (a bisection on rowid)."""
    lo, hi = con.execute(f'SELECT min(rowid), max(rowid) FROM "{table}"').fetchone()
    for col, size in zip(cols, sizes, strict=True):
        a, b = int(lo), int(hi)
        try:
            con.execute(f'SELECT sum({size}) FROM "{table}"').fetchone()
            continue
        except sqlite3.DataError:
            pass
        while a < b:
            mid = (a + b) // 2
            try:
                con.execute(f'SELECT sum({size}) FROM "{table}" WHERE rowid BETWEEN ? AND ?',
                            (a, mid)).fetchone()
                a = mid + 1
            except sqlite3.DataError:
                b = mid
        return a, col
    return int(lo), cols[0]


def _frame(con: sqlite3.Connection, table: str, wanted: Iterable[str], file: str) -> pd.DataFrame:
    """Rows of ``table`` with ``rowid`` and the wanted columns that exist (absent ones are None)."""
    have = set(_columns(con, table))
    cols = [c for c in wanted if c in have]
    _bounded_text(con, table, cols, file)
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
    _bounded_text(con, "StringIds", ["value"], file)
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
    if not (row and isinstance(row[0], int) and row[0] > 0):
        return 0
    lo, hi = time_range()
    if not lo.value <= row[0] < hi.value:  # near int64's maximum it would wrap into 1677 once times are added
        lim = current_limits()
        raise InputError(f"session start {row[0]} ns is outside the plausible range "
                         f"[{lim.earliest_year}-01-01, {lim.latest_year}-01-01) UTC (limits earliest_year, "
                         "latest_year)",
                         field="TARGET_INFO_SESSION_START_TIME.utcEpochNs", row=1)
    return int(row[0])


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
        gpid = pd.to_numeric(f["globalPid"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        no_pid = ~((gpid >= 0) & (gpid < 2.0**63))  # NULL, text or out of range: no process to give it to
        book.reject(no_pid, f"{table}.globalPid", "globalPid is NULL or not a process id: the activity "
                                                  "belongs to no process (no rank is made up for it)")
        keep = book.close(ledger)
        numeric = pd.to_numeric(f["globalPid"], errors="coerce")
        pid = numeric.where(~no_pid, 0).fillna(0).to_numpy(dtype=np.int64) // _PID_SHIFT
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


# ---------------------------------------------------------------------------------------------------
# The tables built from those frames
# ---------------------------------------------------------------------------------------------------

#: The tables :func:`read` returns.
TABLES: tuple[str, ...] = ("kernels", "steps", "host_syncs", "ops")


def _launch_links(act: pd.DataFrame, rt: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per activity: launch start ns, launching thread and graph-launch flag, keyed by (pid, correlation)."""
    n = len(act)
    launch = np.full(n, np.nan)
    tid = np.full(n, -1, dtype=np.int64)
    graph_launch = np.zeros(n, dtype=bool)
    if not n or rt.empty:
        return launch, tid, graph_launch
    r = rt.dropna(subset=["correlation"]).drop_duplicates(["pid", "correlation"], keep="first")
    keys = pd.MultiIndex.from_arrays(
        [r["pid"].to_numpy(dtype=np.int64), r["correlation"].to_numpy(dtype=np.int64)]
    )
    have = act["correlation"].notna().to_numpy()
    want = pd.MultiIndex.from_arrays(
        [act["pid"].to_numpy(dtype=np.int64), act["correlation"].fillna(-1).to_numpy(dtype=np.int64)]
    )
    pos = np.where(have, keys.get_indexer(want), -1)
    found = pos >= 0
    launch[found] = r["start_ns"].to_numpy(dtype=float)[pos[found]]
    tid[found] = r["tid"].to_numpy(dtype=np.int64)[pos[found]]
    graph_launch[found] = is_graph_launch(r["name"].to_numpy(dtype=object))[pos[found]]
    return launch, tid, graph_launch


def _enclosing(t: np.ndarray, t_tid: np.ndarray, ranges: pd.DataFrame) -> np.ndarray:
    """Per time, the index in ``ranges`` of the latest-starting range on its thread holding it; -1 if none."""
    out = np.full(len(t), -1, dtype=np.int64)
    if ranges.empty or not len(t):
        return out
    r_tid = ranges["tid"].to_numpy(dtype=np.int64)
    for thread in np.intersect1d(np.unique(t_tid), np.unique(r_tid)):  # a handful of host threads
        qi = np.flatnonzero((t_tid == thread) & np.isfinite(t))
        aj = np.flatnonzero(r_tid == thread)
        aj = aj[np.argsort(ranges["start_ns"].to_numpy()[aj], kind="stable")]
        k = np.searchsorted(ranges["start_ns"].to_numpy()[aj], t[qi], side="right") - 1
        j = aj[np.maximum(k, 0)]
        good = (k >= 0) & (ranges["end_ns"].to_numpy()[j] >= t[qi])
        out[qi[good]] = j[good]
    return out


def _classify(
    act: pd.DataFrame, launch: np.ndarray, launch_tid: np.ndarray, nvtx: pd.DataFrame, classifier: Classifier
) -> dict[str, np.ndarray]:
    """kind, collective, collective_source and comm_rule of each activity (metadata first, then names)."""
    names = act["name"].to_numpy(dtype=object)
    kind = classifier.kinds(names, act["cat"].to_numpy(dtype=object)).astype(object)
    rule = np.where(kind == "comm", classifier.comm_rules(names), "").astype(object)
    n = len(act)
    collective = np.full(n, "none", dtype=object)
    source = np.full(n, "none", dtype=object)
    text = nvtx["text"].astype(str).to_numpy(dtype=object) if len(nvtx) else np.zeros(0, dtype=object)
    is_nccl = _per_unique(text, lambda t: t.lower().startswith("nccl")).astype(bool)
    ranges = nvtx.loc[is_nccl].reset_index(drop=True)
    if len(ranges) and n:
        labels, ok = collective_from_arg(ranges["text"].astype(str).str[4:])
        ranges = ranges.assign(collective=labels, recognised=ok)
        ranges = ranges.loc[ranges["recognised"]].reset_index(drop=True)
        j = _enclosing(launch, launch_tid, ranges)
        hit = (j >= 0) & (act["cat"].to_numpy() == "kernel")
        if hit.any():
            jj = j[hit]
            nccl_domain = ranges["domain"].astype(str).str.upper().to_numpy()[jj] == "NCCL"
            idx = np.flatnonzero(hit)
            take = idx[nccl_domain | (kind[idx] == "comm")]
            upgrade = idx[nccl_domain]
            kind[upgrade] = "comm"
            rule[upgrade] = comm_rule_metadata("nvtx:NCCL")
            collective[take] = ranges["collective"].to_numpy(dtype=object)[j[take]]
            source[take] = "host_annotation"
    _by_launcher(act, launch, launch_tid, nvtx, text, kind, rule, collective, source)
    left = (kind == "comm") & (source == "none")
    if left.any():
        guess = collective_from_kernel_name(names[left])
        collective[left] = guess
        source[left] = np.where(guess != "none", "name", "none")
    return {"kind": kind, "collective": collective, "source": source, "rule": rule}


def _by_launcher(act: pd.DataFrame, launch: np.ndarray, launch_tid: np.ndarray, nvtx: pd.DataFrame,
                 text: np.ndarray, kind: np.ndarray, rule: np.ndarray, collective: np.ndarray,
                 source: np.ndarray) -> None:
    """Kernels launched inside an NVTX range whose text says a collective are ``comm`` (in place).

    The second rule, after NCCL's own ranges (metadata) and before the name patterns: the range is
    the latest-starting one on the launching thread that holds the launch among those whose text
    says a collective (:func:`~fleetlib.program.classify.collective_from_launcher`: ``dispatch(F)``,
    ``combine(B)``, ``nccl:all_reduce`` under ``emit_nvtx`` ...); ``comm_rule`` is
    ``launcher:<text>``, and its collective type is taken where no NCCL range gave one.
    Except where PyTorch's own operator range (``aten::...`` under ``emit_nvtx``, saying no
    collective) lies inside that range and holds the launch: the kernel is that operator's work (a
    copy-in, a permute), as in the Kineto reader.
    """
    if not len(text) or not len(act):
        return
    label = collective_from_launcher(text)
    says = label != "none"
    if not says.any():
        return
    ranges = nvtx.loc[says].reset_index(drop=True)
    j = _enclosing(launch, launch_tid, ranges)
    own_op = ~says & _per_unique(text, lambda t: t.startswith("aten::")).astype(bool)
    if own_op.any() and (j >= 0).any():
        ops = nvtx.loc[own_op].reset_index(drop=True)
        h = np.flatnonzero(j >= 0)
        o = _enclosing(launch[h], launch_tid[h], ops)
        inner = o >= 0
        ls = ranges["start_ns"].to_numpy()[j[h][inner]]
        le = ranges["end_ns"].to_numpy()[j[h][inner]]
        os_ = ops["start_ns"].to_numpy()[o[inner]]
        oe = ops["end_ns"].to_numpy()[o[inner]]
        nested = (os_ > ls) | ((os_ == ls) & (oe < le))
        j[h[inner][nested]] = -1
    open_ = ((act["cat"].to_numpy() == "kernel") & np.isin(kind, ("compute", "comm"))
             & ~pd.Series(rule, dtype=object).astype(str).str.startswith("metadata:").to_numpy())
    idx = np.flatnonzero(open_ & (j >= 0))
    if not len(idx):
        return
    jj = j[idx]
    kind[idx] = "comm"
    rule[idx] = [comm_rule_launcher(str(x)) for x in text[says][jj]]
    take = np.isin(source[idx], ("name", "none"))
    collective[idx[take]] = label[says][jj][take]
    source[idx[take]] = "host_annotation"


def _marker_number(marker: re.Pattern[str], text: Any) -> int | None:
    m = marker.search(text) if isinstance(text, str) else None
    return int(m.group(1)) if m and m.groups() and (m.group(1) or "").isdigit() else None


def _steps(nvtx: pd.DataFrame, marker: re.Pattern[str] | None) -> tuple[pd.DataFrame, str | None]:
    """Step ranges (pid, step, start_ns, end_ns) from ProfilerStep#N, else the marker; and the source."""
    cols = ["pid", "step", "start_ns", "end_ns"]
    if nvtx.empty:
        return pd.DataFrame(columns=cols), None
    text = nvtx["text"].astype(object).to_numpy()
    numbers = _per_unique(text, lambda t: int(m.group(1)) if isinstance(t, str) and (m := _STEP_RE.match(t))
                          else None)
    is_step = ~np.equal(numbers, None)
    source = "profiler_step"
    if not is_step.any() and marker is not None:
        is_step = _per_unique(text, lambda t: isinstance(t, str) and bool(marker.search(t))).astype(bool)
        source = "marker"
        numbers = _per_unique(text, lambda t: _marker_number(marker, t))
    if not is_step.any():
        return pd.DataFrame(columns=cols), None
    sub = nvtx.loc[is_step].reset_index(drop=True)
    num = np.array(numbers, dtype=object)[is_step]
    if source == "marker" and (
        pd.isna(pd.Series(num, dtype=object)).any() or len(set(num.tolist())) < len(num)
    ):
        # number the marked ranges per process in start order when the marker captures no unique number
        order = sub.groupby("pid")["start_ns"].rank(method="first").to_numpy(dtype=np.int64) - 1
        num = order
    sub = sub.assign(step=np.asarray(num, dtype=np.int64))
    # a step annotated twice (several threads) is their union
    out = sub.groupby(["pid", "step"], as_index=False).agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max")
    )
    return out[cols], source


def _assign_steps(rank: np.ndarray, t: np.ndarray, steps: pd.DataFrame) -> pd.arrays.IntegerArray:
    """Step of each (rank, time): the latest-starting window of that rank holding it, else <NA>."""
    n = len(t)
    value = np.zeros(n, dtype=np.int64)
    inside = np.zeros(n, dtype=bool)
    for r, win in steps.groupby("rank"):
        q = np.flatnonzero(rank == r)
        s = win["start_us"].to_numpy(dtype=float)
        order = np.argsort(s, kind="stable")
        s, e = s[order], win["end_us"].to_numpy(dtype=float)[order]
        k = win["step"].to_numpy(dtype=np.int64)[order]
        j = np.searchsorted(s, t[q], side="right") - 1
        jj = np.maximum(j, 0)
        ok = (j >= 0) & (t[q] < e[jj])
        value[q[ok]] = k[jj[ok]]
        inside[q[ok]] = True
    return pd.arrays.IntegerArray(value, ~inside)


def _read_file(path: Path, position: int, options: Mapping[str, Any], ledger: Ledger) -> dict[str, Any]:
    """Read one export into ns-based frames keyed by process id, settling its rows into ``ledger``."""
    file = str(path)
    con = _connect(path)
    try:
        tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables & set(_ACTIVITY_TABLES):
            raise InputError(
                f"the database has none of the CUDA activity tables {list(_ACTIVITY_TABLES)}; "
                f"profile with 'nsys profile --trace=cuda' (and nvtx) and export again",
                file=file,
                field=KERNEL_TABLE,
            )
        if "StringIds" not in tables:
            raise InputError(
                "the database has no StringIds table, so kernel and range names cannot be "
                "resolved; is this an nsys SQLite export?",
                file=file,
                field="StringIds",
            )
        strings = _strings(con, file)
        mx = float(options["max_event_us"])
        act = _activities(con, tables, strings, file, options["kernel_names"], mx, ledger)
        rt = _runtime(con, tables, strings, file, mx, ledger)
        nvtx = _nvtx(con, tables, strings, file, mx, ledger)
        devices = _devices(con, tables)
        base_ns = _session_start_ns(con, tables)
    except InputError as exc:
        if exc.file is not None:
            raise
        raise InputError(exc.message, file=file, row=exc.row, field=exc.field) from exc
    except (sqlite3.DatabaseError, ValueError, TypeError, OverflowError) as exc:
        # a damaged database can break any query: one line naming the file, never a traceback
        raise InputError(f"the SQLite database cannot be read ({exc})", file=file) from exc
    finally:
        con.close()
    return {
        "path": path,
        "position": position,
        "act": act,
        "rt": rt,
        "nvtx": nvtx,
        "devices": devices,
        "base_ns": base_ns,
    }


def _ranks_of(reads: list[dict[str, Any]], mapping: Mapping[str, int], ledger: Ledger) -> None:
    """Set ``read["ranks"]``: pid -> rank for the processes that ran GPU work (or the file's first one)."""
    per_file = []
    for rd in reads:
        pids = sorted(set(rd["act"]["pid"].tolist())) or sorted(set(rd["nvtx"]["pid"].tolist()))[:1] or [0]
        per_file.append(pids)
    if all(len(p) == 1 for p in per_file):
        for rd, pids in zip(reads, per_file, strict=True):
            path = rd["path"]
            named = mapping.get(str(path), mapping.get(path.name))
            rank = named if named is not None else rank_from_file_name(path.name)
            if rank is None:
                rank = rd["position"]
                if len(reads) > 1:
                    ledger.flag(
                        "rank_from_position",
                        f"{path.name} names no rank: rank {rank} from its position among the files",
                        file=str(path),
                    )
            rd["ranks"] = {pids[0]: int(rank)}
    else:
        rank = 0
        for rd, pids in zip(reads, per_file, strict=True):
            rd["ranks"] = {}
            for pid in pids:
                rd["ranks"][pid] = rank
                rank += 1
            ledger.flag(
                "ranks_from_processes",
                f"{rd['path'].name}: processes {pids} with GPU work are ranks "
                f"{list(rd['ranks'].values())} (files, then process ids, in "
                f"order)",
                file=str(rd["path"]),
            )
    seen: dict[int, str] = {}
    for rd in reads:
        for r in rd["ranks"].values():
            if r in seen:
                raise InputError(
                    f"duplicate ranks (rank {r}: {seen[r]}, {rd['path']}); expected one file per "
                    f"rank -- pass ranks={{file: rank}} to say which is which",
                    file=str(rd["path"]),
                    field="rank",
                )
            seen[r] = str(rd["path"])


def _options(
    classifier: Classifier | None, step_marker: str | None, kernel_names: str, max_event_us: float
) -> dict[str, Any]:
    if classifier is None:
        classifier = Classifier()
    elif not isinstance(classifier, Classifier):
        raise DomainError(
            f"classifier must be a fleetlib.program.classify.Classifier; got {type(classifier).__name__}"
        )
    if kernel_names not in ("demangled", "short"):
        raise DomainError(f"kernel_names must be 'demangled' or 'short'; got {kernel_names!r}")
    marker = None
    if step_marker is not None:
        if not isinstance(step_marker, str) or not step_marker:
            raise DomainError(f"step_marker must be a non-empty regular expression; got {step_marker!r}")
        try:
            marker = re.compile(step_marker)
        except re.error as exc:
            raise DomainError(
                f"step_marker {step_marker!r} is not a valid regular expression: {exc}"
            ) from exc
    mx = float(max_event_us)
    if not mx > 0:
        raise DomainError(f"max_event_us must be > 0; got {max_event_us!r}")
    return {"classifier": classifier, "marker": marker, "kernel_names": kernel_names, "max_event_us": mx}


# ---------------------------------------------------------------------------------------------------
# All files: the canonical tables
# ---------------------------------------------------------------------------------------------------


def _span_steps(kern: pd.DataFrame) -> pd.DataFrame:
    g = kern.groupby("rank")
    return pd.DataFrame(
        {
            "rank": g["start_us"].min().index.to_numpy(dtype=np.int64),
            "step": 0,
            "start_us": g["start_us"].min().to_numpy(),
            "end_us": g["end_us"].max().to_numpy(),
            "source": "gpu_span",
        }
    )


def _one_read(
    rd: dict[str, Any], base: int, opts: Mapping[str, Any], ledger: Ledger
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Kernels, steps and host syncs of one file in µs on the common base, ranks resolved."""
    shift = rd["base_ns"] - base
    ranks = rd["ranks"]
    single = len(ranks) == 1
    only = next(iter(ranks.values()))

    def rank_of(pid: pd.Series) -> np.ndarray:
        if single:
            return np.full(len(pid), only, dtype=np.int64)
        return pid.map(ranks).fillna(-1).to_numpy(dtype=np.int64)

    act, rt, nvtx = rd["act"], rd["rt"], rd["nvtx"]
    launch, launch_tid, graph_launch = _launch_links(act, rt)
    cls = _classify(act, launch, launch_tid, nvtx, opts["classifier"])
    k_rank = rank_of(act["pid"])
    start = (act["start_ns"].to_numpy(dtype=np.int64) + shift) / 1000.0
    end = (act["end_ns"].to_numpy(dtype=np.int64) + shift) / 1000.0
    nbytes = act["bytes"].to_numpy(dtype=float)
    kern = pd.DataFrame(
        {
            "rank": k_rank,
            "stream": act["stream"].to_numpy(dtype=np.int64),
            "start_us": start,
            "end_us": end,
            "dur_us": (act["end_ns"].to_numpy(dtype=np.int64) - act["start_ns"].to_numpy(dtype=np.int64))
            / 1000.0,
            "name": act["name"].to_numpy(dtype=object),
            "kind": cls["kind"],
            "collective": cls["collective"],
            "process_group": "",
            "seq": pd.array([pd.NA] * len(act), dtype="Int64"),
            "bytes": pd.array(
                np.where(np.isfinite(nbytes), np.round(nbytes), np.nan), dtype="Float64"
            ).astype("Int64"),
            "cuda_graph": act["graph"].to_numpy(dtype=bool) | graph_launch,
            "device": act["device"].to_numpy(dtype=np.int64),
            "correlation": act["correlation"].array,
            "launch_us": (launch + shift) / 1000.0,
            "collective_source": cls["source"],
            "external_id": pd.array([pd.NA] * len(act), dtype="Int64"),
            "comm_rule": cls["rule"],
            "classified_by": classified_by(cls["rule"]),
        }
    )
    by_name = (cls["kind"] == "comm") & (kern["classified_by"].to_numpy() == "name")
    if by_name.any():
        top = pd.Series(kern["name"].to_numpy(dtype=object)[by_name]).value_counts().index[:3].tolist()
        us = float(kern["dur_us"].to_numpy()[by_name].sum())
        ledger.flag(
            "comm_by_name_only",
            f"{int(by_name.sum())} communication kernels ({us:.6g} µs) "
            f"were found by their name only (no collective metadata, no launching range naming a "
            f"collective), e.g. {top}",
            file=str(rd["path"]),
        )
    if kern["cuda_graph"].any():
        ledger.flag(
            "cuda_graph",
            f"{int(kern['cuda_graph'].sum())} activities ran in CUDA graphs: the "
            f"per-kernel breakdown is less reliable",
            file=str(rd["path"]),
        )
    raw_steps, source = _steps(nvtx, opts["marker"])
    steps = pd.DataFrame(
        {
            "rank": rank_of(raw_steps["pid"]),
            "step": raw_steps["step"].to_numpy(dtype=np.int64),
            "start_us": (raw_steps["start_ns"].to_numpy(dtype=np.int64) + shift) / 1000.0,
            "end_us": (raw_steps["end_ns"].to_numpy(dtype=np.int64) + shift) / 1000.0,
            "source": source or "profiler_step",
        }
    )
    steps = steps.loc[steps["rank"] >= 0]
    if source == "marker":
        ledger.flag(
            "steps_from_markers",
            f"no ProfilerStep#N range: {len(steps)} step windows from NVTX ranges "
            f"matching {opts['marker'].pattern!r}",
            file=str(rd["path"]),
        )
    bare = sorted(set(kern["rank"].tolist()) - set(steps["rank"].tolist()))
    if bare:
        ledger.flag(
            "no_profiler_step",
            f"rank(s) {bare}: no ProfilerStep#N NVTX range: one step 0 spanning "
            f"the GPU activity (first start to last end)",
            file=str(rd["path"]),
        )
        steps = pd.concat([steps, _span_steps(kern.loc[kern["rank"].isin(bare)])], ignore_index=True)
    # host syncs and the runtime calls no table uses
    names = rt["name"].to_numpy(dtype=object)
    sync_kind, blocking = host_sync_kinds(names)
    is_sync = ~np.equal(sync_kind, None)
    launched = np.zeros(len(rt), dtype=bool)
    if len(rt) and len(act):
        pairs = pd.MultiIndex.from_arrays(
            [act["pid"].to_numpy(dtype=np.int64), act["correlation"].fillna(-1).to_numpy(dtype=np.int64)]
        )
        rkeys = pd.MultiIndex.from_arrays(
            [rt["pid"].to_numpy(dtype=np.int64), rt["correlation"].fillna(-2).to_numpy(dtype=np.int64)]
        )
        launched = rkeys.isin(pairs)
    ledger.count_unused("runtime:other_call", int((~is_sync & ~launched).sum()))
    sync = rt.loc[is_sync]
    syncs = pd.DataFrame(
        {
            "rank": rank_of(sync["pid"]),
            "tid": sync["tid"].to_numpy(dtype=np.int64) % _PID_SHIFT,
            "start_us": (sync["start_ns"].to_numpy(dtype=np.int64) + shift) / 1000.0,
            "end_us": (sync["end_ns"].to_numpy(dtype=np.int64) + shift) / 1000.0,
            "name": sync["name"].to_numpy(dtype=object),
            "sync_kind": sync_kind[is_sync].astype(str),
            "blocking": blocking[is_sync],
        }
    )
    syncs["dur_us"] = syncs["end_us"] - syncs["start_us"]
    used_ranges = len(raw_steps) if source else 0
    nccl = int(nvtx["text"].astype(str).str.lower().str.startswith("nccl").sum()) if len(nvtx) else 0
    ledger.count_unused("nvtx:other_range", max(len(nvtx) - nccl - used_ranges, 0))
    return kern, steps, syncs


def _typed(frame: pd.DataFrame, table: str, empty: pd.DataFrame) -> pd.DataFrame:
    if frame.empty:
        return empty
    dtypes = table_dtypes(table)
    out = frame[[c for c in empty.columns]].copy()
    for col, dt in dtypes.items():
        if col in out.columns:
            out[col] = out[col].astype(dt)
    if table == "kernels":
        out["comm_rule"] = out["comm_rule"].astype(str).astype("category")
    return out


def read_nsys(
    paths: PathLike | Iterable[PathLike],
    *,
    ranks: Mapping[str, int] | None = None,
    classifier: Classifier | None = None,
    step_marker: str | None = None,
    kernel_names: str = "demangled",
    max_event_us: float = DEFAULT_MAX_EVENT_US,
) -> TraceSet:
    """Read Nsight Systems SQLite exports onto one time base (the Kineto reader's :class:`TraceSet`).

    Parameters
    ----------
    paths
        One export or several (one per rank, or one holding several processes); plain or gzip.
    ranks
        Explicit rank per file, keyed by path or file name (overrides the names).
    classifier
        Name patterns for communication, copies and fills (default
        :class:`~fleetlib.program.classify.Classifier`); NCCL NVTX ranges win over them.
    step_marker
        A regular expression for NVTX step ranges when there is no ``ProfilerStep#N`` range.
    kernel_names
        ``"demangled"`` (default, ``demangledName``) or ``"short"`` (``shortName``).
    max_event_us
        Longest believable activity, µs (longer records are rejected as corrupt).

    Returns
    -------
    TraceSet
        ``kernels``, ``steps``, ``host_syncs`` and an empty ``ops`` table, ``metadata`` per rank
        (``device_properties`` from ``TARGET_INFO_GPU``, ``base_time_ns``, ``format`` ``"nsys"``,
        ``platform`` ``"cuda"``, ``world_size`` None) and the ledger of every row read.

    Raises
    ------
    InputError
        A file that is not an SQLite database, holds no CUDA activity table or no ``StringIds``,
        or two files that claim one rank.
    """
    files = as_paths(paths)
    opts = _options(classifier, step_marker, kernel_names, max_event_us)
    mapping = {str(k): int(v) for k, v in (ranks or {}).items()}
    ledger = Ledger()
    reads = [_read_file(p, i, opts, ledger) for i, p in enumerate(files)]
    _ranks_of(reads, mapping, ledger)
    bases = [rd["base_ns"] for rd in reads]
    base = min(bases)
    if len(set(bases)) > 1:
        ledger.flag(
            "time_base_shifted",
            f"{sum(b != base for b in bases)} file(s) moved onto the common "
            f"session start {base} ns (no clock-skew correction)",
        )
    kernels, steps, syncs = [], [], []
    metadata: dict[int, dict[str, Any]] = {}
    for rd in reads:
        k, s, h = _one_read(rd, base, opts, ledger)
        kernels.append(k)
        steps.append(s)
        syncs.append(h)
        for rank in rd["ranks"].values():
            metadata[rank] = {
                "path": str(rd["path"]),
                "format": "nsys",
                "platform": "cuda",
                "base_time_ns": int(rd["base_ns"]),
                "device_properties": rd["devices"],
                "world_size": None,
                "distributed_info": {},
            }
    k_all = pd.concat(kernels, ignore_index=True)
    s_all = pd.concat(steps, ignore_index=True)
    if len(k_all) and not np.isin(k_all["kind"], ("compute", "comm", "memcpy", "memset")).any():
        ledger.flag("no_gpu_activity", "the exports hold no GPU kernel, copy or fill")
    k_all["step"] = _assign_steps(k_all["rank"].to_numpy(), k_all["start_us"].to_numpy(), s_all)
    h_all = pd.concat(syncs, ignore_index=True)
    h_all["step"] = _assign_steps(h_all["rank"].to_numpy(), h_all["start_us"].to_numpy(), s_all)
    k_all = _typed(k_all, "kernels", empty_kernels()).sort_values(
        ["rank", "start_us", "end_us", "stream"], kind="stable", ignore_index=True
    )
    s_all = _typed(s_all, "steps", empty_steps()).sort_values(["rank", "start_us"], ignore_index=True)
    h_all = _typed(h_all, "host_syncs", empty_host_syncs()).sort_values(
        ["rank", "start_us"], kind="stable", ignore_index=True
    )
    if s_all.empty:
        raise InputError(
            "no step window and no GPU activity in the exports: nothing to analyse",
            file=str(files[0]),
            field=KERNEL_TABLE,
        )
    return TraceSet(k_all, s_all, h_all, metadata, ledger, base, [], empty_ops())


def read_memory_usage(paths: PathLike | Iterable[PathLike], *, ranks: Mapping[str | Path, int] | None = None,
                      ) -> tuple[pd.DataFrame, Ledger]:
    """Read the CUDA memory table (``CUDA_GPU_MEMORY_USAGE_EVENTS``) of Nsight Systems exports.

    The exports are read once more as :func:`read_nsys` reads them (the activity tables decide the
    ranks and the time base, so the events land on the kernel table's ranks and clock).  Each row
    of the memory table is one allocation (``memoryOperationType`` 0) or free (1) of ``bytes`` at
    ``address``; ``memKind`` 0 and 1 (pageable and pinned host memory) become ``device_type`` 0, every
    other kind device memory.  nsys records no allocator total, so ``total_allocated`` is the running
    sum of the signed sizes of the rank's device (or host) events, counted from zero at the first
    event of the capture; ``total_reserved`` is unknown (NaN).

    Parameters
    ----------
    paths
        Export files, as for :func:`read_nsys`.
    ranks
        As for :func:`read_nsys`.

    Returns
    -------
    tuple
        The event table (:data:`fleetlib.program.schema.MEMORY_COLUMNS`, sorted by rank and time) and
        the ledger of the memory table's rows: a row with no time, no size, an unknown operation or
        no process of a rank is rejected naming file, row (the table's rowid) and field.  A file
        without the table adds no rows.

    Raises
    ------
    InputError
        As :func:`read_nsys`.
    """
    files = as_paths(paths)
    opts = _options(None, None, "demangled", DEFAULT_MAX_EVENT_US)
    mapping = {str(k): int(v) for k, v in (ranks or {}).items()}
    reads = [_read_file(p, i, opts, Ledger()) for i, p in enumerate(files)]
    _ranks_of(reads, mapping, Ledger())
    base = min(rd["base_ns"] for rd in reads)
    ledger = Ledger()
    parts = []
    for rd in reads:
        file = str(rd["path"])
        con = _connect(rd["path"])
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if MEMORY_TABLE not in tables:
                continue
            cols = set(_columns(con, MEMORY_TABLE))
            want = ["start", "bytes", "memoryOperationType", "globalPid", "memKind", "deviceId", "address"]
            sel = ", ".join(f'"{c}"' if c in cols else f'NULL AS "{c}"' for c in want)
            f = pd.read_sql_query(f'SELECT rowid AS row_id, {sel} FROM "{MEMORY_TABLE}"', con)
        except (sqlite3.DatabaseError, ValueError, TypeError, OverflowError) as exc:
            raise InputError(f"the SQLite database cannot be read ({exc})", file=file,
                             field=MEMORY_TABLE) from exc
        finally:
            con.close()
        num = {c: pd.to_numeric(f[c], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
               for c in want}
        single = len(rd["ranks"]) == 1
        gpid = np.where(np.isfinite(num["globalPid"]), num["globalPid"], 0).astype(np.int64)
        pid = gpid // _PID_SHIFT % _PID_SHIFT
        rank = np.array([rd["ranks"].get(int(p), -1) for p in pid], dtype=np.int64)
        if single:
            rank[:] = next(iter(rd["ranks"].values()))
        checks = (("start", ~np.isfinite(num["start"]), "no numeric start time"),
                  ("bytes", ~(num["bytes"] >= 0), "no numeric, non-negative size"),
                  ("memoryOperationType", ~np.isin(num["memoryOperationType"], (0, 1)),
                   "not 0 (allocation) or 1 (free)"),
                  ("globalPid", ~np.isfinite(num["globalPid"]) | (rank < 0),
                   "NULL or a process of no rank (no rank is made up for it)"))
        bad = np.zeros(len(f), dtype=bool)
        rows = f["row_id"].to_numpy(dtype=np.int64)
        for field, mask, why in checks:
            for i in np.flatnonzero(mask & ~bad):
                value = f[field].iloc[i]
                ledger.reject(file, int(rows[i]), f"{MEMORY_TABLE}.{field}", f"{why} (value {value!r})")
            bad |= mask
        ledger.read += len(f)
        ledger.kept += int((~bad).sum())
        ok = ~bad
        size = num["bytes"][ok]
        parts.append(pd.DataFrame({
            "rank": rank[ok],
            "ts_us": (num["start"][ok] + (rd["base_ns"] - base)) / 1000.0,
            "bytes": np.where(num["memoryOperationType"][ok] == 1, -size, size),
            "total_allocated": np.nan,
            "total_reserved": np.nan,
            "addr": num["address"][ok],
            "device_type": np.where(np.isin(num["memKind"][ok], _HOST_MEM_KINDS), 0.0, 1.0),
            "device_id": num["deviceId"][ok],
        }))
    cols = list(MEMORY_COLUMNS)
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        {c: pd.Series(dtype="int64" if c == "rank" else "float64") for c in cols})
    table = table.sort_values(["rank", "ts_us"], kind="stable").reset_index(drop=True)
    table["total_allocated"] = table.groupby(["rank", "device_type"])["bytes"].cumsum().to_numpy(dtype=float)
    return table[cols], ledger


def read(
    paths: PathLike | Iterable[PathLike], *, tz: Any = None, window: Any = None, **format_options: Any
) -> tuple[dict[str, pd.DataFrame], Ledger]:
    """Read Nsight Systems SQLite exports the way every fleetlib reader reads (:mod:`fleetlib.registry`).

    Parameters
    ----------
    paths
        Export files (one per rank, or one holding several processes).
    tz
        Not used: nsys times count from the session start (UTC when the export says when that was).
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes: with a calendar clock
        (``TARGET_INFO_SESSION_START_TIME``) only the steps inside it are kept with their
        activities (flag ``outside_window``); without one nothing is selected
        (``window_not_applied``).
    **format_options
        Keyword arguments of :func:`read_nsys`.

    Returns
    -------
    tables : dict of DataFrame
        ``kernels``, ``steps``, ``host_syncs``, ``ops`` (:data:`TABLES`).
    ledger : Ledger
        Every row of every activity table read: read = kept + repaired + rejected.
    """
    del tz
    w = Window.parse(window)
    traces = read_nsys(paths, **format_options)
    if w is not None and not w.is_nominal:
        select_window(traces, w)
    return {t: getattr(traces, t) for t in TABLES}, traces.ledger
