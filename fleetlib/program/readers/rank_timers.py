"""Read per-rank step timers (Parquet or CSV) into the canonical rank-timer table, with a ledger.

The table feeds :func:`fleetlib.program.stragglers.straggler_analysis`, in memory
(:func:`read_rank_timers`) or as a Dask frame of whole Parquet row groups (:func:`rank_timers_dask`).

Canonical table
---------------
``rank`` int64 (0-based process index, at most :data:`MAX_RANK`), ``step`` int64 (>= 0),
``duration_s`` float64 (>= 0, finite).  Files may store narrower types -- the synthetic generator
writes int32 / int32 / float32 to keep 164 million rows near 2 GB -- and are widened on read, so the
analysis is exact with respect to the stored values.  Float32 keeps about 7 significant digits
(0.06 us resolution at 1 s).

Input rows: a duration that is missing (NaN), infinite or negative is *rejected* (ledger entry
naming file, row and field); a missing column, a column of the wrong type, a missing or negative or
too large rank or step, an empty file, and two rows for one ``(rank, step)`` raise
:class:`~fleetlib.quality.InputError` (a duplicate timer cannot be repaired: nothing says which of
the two is right).  Row numbers are 1-based data rows of the file for Parquet and line numbers
(header = line 1) for CSV.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import check_regular, excerpt, listed_files
from fleetlib.program.schema import RANK_TIMER_COLUMNS
from fleetlib.quality import DomainError, InputError, Ledger

__all__ = [
    "DEFAULT_PARTITION_ROWS",
    "MAX_RANK",
    "MAX_REJECTED_ROWS",
    "RANK_TIMER_COLUMNS",
    "TABLES",
    "rank_timer_files",
    "rank_timers_dask",
    "read",
    "read_rank_timers",
]

#: Largest rank accepted (ranks are 0-based process indices; 2**24 - 1 leaves room for any fleet).
MAX_RANK: int = 2**24 - 1

#: Rows per block (Dask partition): whole row groups are packed up to this many rows.
DEFAULT_PARTITION_ROWS: int = 2_000_000
#: More rejected rows than this means the input is not a rank-timer table at all: InputError.
MAX_REJECTED_ROWS: int = 10_000
_SUFFIXES = (".parquet", ".pq", ".csv", ".csv.gz")


# ---------------------------------------------------------------------------------------------------
# Files and blocks
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimerBlock:
    """Whole row groups of one Parquet file (or a whole CSV file) read as one partition."""

    file: str
    row_groups: tuple[int, ...] | None  # None: the whole file
    first_row: int  # 1-based data row (Parquet) or line (CSV) of the block's first row
    rows: int


def is_csv(path: Path) -> bool:
    return path.name.lower().endswith((".csv", ".csv.gz"))


def rank_timer_files(path: str | Path | Iterable[str | Path], *, ledger: Ledger | None = None) -> list[Path]:
    """Return the rank-timer files at ``path``: the file itself, or a folder's files in name order.

    Parameters
    ----------
    path
        A ``.parquet`` / ``.pq`` / ``.csv`` / ``.csv.gz`` file, or a folder holding such files (not
        searched recursively; other files are ignored), or a list of files and folders (each
        expanded in turn, in the order given).  A folder's entries are confined to it (a link
        leading out is refused) and a named pipe or device among them is flagged in ``ledger``
        (refused without one); see :func:`fleetlib._io.listed_files`.
    ledger
        Where special files found in a folder are noted.

    Returns
    -------
    list of pathlib.Path
        The files, a folder's sorted by name.

    Raises
    ------
    InputError
        The path does not exist, or the folder holds no rank-timer file.
    DomainError
        An empty list.
    """
    if not isinstance(path, (str, PathLike)):
        items = list(path)
        if not items:
            raise DomainError("no rank-timer file was given")
        return [f for item in items for f in rank_timer_files(item, ledger=ledger)]
    p = Path(path)
    if p.is_dir():
        files = listed_files(p, _SUFFIXES, ledger=ledger)
        if not files:
            raise InputError(f"folder holds no rank-timer file ({', '.join(_SUFFIXES)})", file=str(p))
        return files
    if not p.exists():
        raise InputError("no such file or folder", file=str(p))
    check_regular(p)  # a device or a pipe is refused before it is opened (a FIFO would block)
    return [p]


def _parquet_blocks(path: Path, partition_rows: int) -> list[TimerBlock]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    file = str(path)
    if path.stat().st_size == 0:
        raise InputError("empty file: expected a Parquet file of rank timers", file=file, row=1)
    try:
        meta = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable Parquet file ({exc})", file=file) from exc
    schema = meta.schema_arrow
    for name in RANK_TIMER_COLUMNS:
        if name not in schema.names:
            raise InputError(f"missing column; a rank-timer table has columns {list(RANK_TIMER_COLUMNS)}, "
                             f"this file has {schema.names}", file=file, field=name)
    for name in ("rank", "step"):
        if not pa.types.is_integer(schema.field(name).type):
            raise InputError(f"must be an integer column; the file stores {schema.field(name).type}",
                             file=file, field=name)
    dtype = schema.field("duration_s").type
    if not (pa.types.is_floating(dtype) or pa.types.is_integer(dtype)):
        raise InputError(f"must be a numeric column of seconds; the file stores {dtype}", file=file,
                         field="duration_s")
    md = meta.metadata
    if md.num_rows == 0:
        raise InputError("empty file: no rank-timer rows", file=file, row=1)
    blocks: list[TimerBlock] = []
    groups: list[int] = []
    rows = 0
    first = 1
    for g in range(md.num_row_groups):
        n = md.row_group(g).num_rows
        if groups and rows + n > partition_rows:
            blocks.append(TimerBlock(file, tuple(groups), first, rows))
            first += rows
            groups, rows = [], 0
        groups.append(g)
        rows += n
    if groups:
        blocks.append(TimerBlock(file, tuple(groups), first, rows))
    return [b for b in blocks if b.rows > 0]


def _blocks(files: Sequence[Path], partition_rows: int) -> list[TimerBlock]:
    if partition_rows < 1:
        raise DomainError(f"partition_rows must be at least 1; got {partition_rows!r}")
    out: list[TimerBlock] = []
    for f in files:
        if is_csv(f):
            out.append(TimerBlock(str(f), None, 2, -1))
        else:
            out.extend(_parquet_blocks(f, partition_rows))
    return out


def _read_block(block: TimerBlock) -> pd.DataFrame:
    """Read one block's three columns as stored (no checks beyond what the format gives)."""
    if block.row_groups is None:
        return _read_csv(block.file)
    import pyarrow.parquet as pq

    table = pq.ParquetFile(block.file).read_row_groups(list(block.row_groups),
                                                       columns=list(RANK_TIMER_COLUMNS))
    return table.to_pandas()


def _read_csv(file: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(file, comment=None, skipinitialspace=True)
    except pd.errors.EmptyDataError as exc:
        raise InputError("empty file: expected a header line 'rank,step,duration_s' and rows", file=file,
                         row=1) from exc
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise InputError(f"not a readable CSV file ({exc})", file=file) from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    for name in RANK_TIMER_COLUMNS:
        if name not in frame.columns:
            raise InputError(f"missing column; a rank-timer table has columns {list(RANK_TIMER_COLUMNS)}, "
                             f"this file has {list(frame.columns)}", file=file, row=1, field=name)
    if frame.empty:
        raise InputError("empty file: a header but no rank-timer rows", file=file, row=2)
    return frame[list(RANK_TIMER_COLUMNS)]


# ---------------------------------------------------------------------------------------------------
# Checking a block
# ---------------------------------------------------------------------------------------------------


@dataclass
class CleanBlock:
    """The kept rows of one block as arrays, with the ledger of the block."""

    rank: np.ndarray
    step: np.ndarray
    dur: np.ndarray
    rows: np.ndarray | None  # row number of each kept row, only when rows were dropped
    ledger: Ledger


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _numeric(col: pd.Series, name: str, what: str, file: str, first_row: int) -> np.ndarray:
    """Return ``col`` as float64 (NaN where missing); raise on text or booleans."""
    if pd.api.types.is_bool_dtype(col.dtype):
        raise InputError(f"must be {what}; got the boolean {col.iloc[0]!r}", file=file, row=first_row,
                         field=name)
    if pd.api.types.is_numeric_dtype(col.dtype):
        return col.to_numpy(dtype=np.float64, na_value=np.nan)
    coerced = pd.to_numeric(col, errors="coerce")
    is_bool = col.map(lambda v: isinstance(v, bool)).to_numpy(dtype=bool)
    bad = (coerced.isna() & col.notna()).to_numpy() | is_bool
    if bad.any():
        i = _first_bad(bad)
        raise InputError(f"must be {what}; got {excerpt(col.iloc[i])}", file=file, row=first_row + i,
                         field=name)
    return coerced.to_numpy(dtype=np.float64, na_value=np.nan)


def _int_array(col: pd.Series, name: str, file: str, first_row: int) -> np.ndarray:
    if pd.api.types.is_integer_dtype(col.dtype) and not col.hasnans:
        values = col.to_numpy(dtype=np.int64)
    else:
        as_float = _numeric(col, name, "a whole number", file, first_row)
        bad = ~np.isfinite(as_float) | (as_float != np.round(as_float))
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"must be a whole number; got {excerpt(col.iloc[i])}", file=file,
                             row=first_row + i, field=name)
        # check the range before the cast: a float beyond int64 would wrap (1e20 -> -9223372036854775808)
        top_f = float(MAX_RANK) if name == "rank" else 2.0**63
        over = (as_float < 0) | (as_float > top_f) | (as_float >= 2.0**63)
        if over.any():
            i = _first_bad(over)
            limit = f" and at most {MAX_RANK}" if name == "rank" else " and within the int64 range"
            raise InputError(f"must be >= 0{limit}; got {excerpt(col.iloc[i])}", file=file,
                             row=first_row + i, field=name)
        values = as_float.astype(np.int64)
    top = MAX_RANK if name == "rank" else np.iinfo(np.int64).max
    bad = (values < 0) | (values > top)
    if bad.any():
        i = _first_bad(bad)
        limit = f" and at most {MAX_RANK}" if name == "rank" else ""
        raise InputError(f"must be >= 0{limit}; got {int(values[i])}", file=file, row=first_row + i,
                         field=name)
    return values


def check_block(frame: pd.DataFrame, block: TimerBlock) -> CleanBlock:
    """Validate one block; reject bad durations into the ledger; raise on what cannot be repaired."""
    file, first = block.file, block.first_row
    for name in RANK_TIMER_COLUMNS:
        if name not in frame.columns:
            raise InputError(f"missing column; a rank-timer table has columns {list(RANK_TIMER_COLUMNS)}",
                             file=file, field=name)
    rank = _int_array(frame["rank"], "rank", file, first)
    step = _int_array(frame["step"], "step", file, first)
    dur = _numeric(frame["duration_s"], "duration_s", "a number of seconds", file, first)
    ledger = Ledger(read=len(dur))
    bad = ~np.isfinite(dur) | (dur < 0)
    rows = None
    if bad.any():
        where = np.flatnonzero(bad)
        if where.size > MAX_REJECTED_ROWS:
            raise InputError(f"{where.size:,} rows have a missing, infinite or negative duration (more than "
                             f"{MAX_REJECTED_ROWS:,}): not a usable rank-timer table", file=file,
                             row=first + int(where[0]), field="duration_s")
        for i in where.tolist():  # at most MAX_REJECTED_ROWS entries
            v = dur[i]
            reason = ("missing duration (NaN)" if math.isnan(v) else
                      f"infinite duration ({v})" if math.isinf(v) else f"negative duration ({v!r} s)")
            ledger.reject(file, first + i, "duration_s", reason)
        keep = ~bad
        rows = first + np.flatnonzero(keep)
        rank, step, dur = rank[keep], step[keep], dur[keep]
    ledger.kept = len(dur)
    return CleanBlock(rank, step, dur, rows, ledger)


def row_of(clean: CleanBlock, first_row: int, i: int) -> int:
    return int(clean.rows[i]) if clean.rows is not None else first_row + i



# ---------------------------------------------------------------------------------------------------
# Duplicates
# ---------------------------------------------------------------------------------------------------

def duplicate_pair(rank: np.ndarray, step: np.ndarray) -> tuple[int, int] | None:
    """Positions ``(first, second)`` of two rows with one ``(rank, step)``, or None.

    The usual layouts (step-major with ranks ascending, or rank-major with steps ascending) are
    recognised in one linear pass; anything else is sorted.
    """
    if rank.size < 2:
        return None
    step_up = step[1:] >= step[:-1]
    if step_up.all() and ((rank[1:] > rank[:-1]) | (step[1:] != step[:-1])).all():
        return None
    rank_up = rank[1:] >= rank[:-1]
    if rank_up.all() and ((step[1:] > step[:-1]) | (rank[1:] != rank[:-1])).all():
        return None
    order = np.lexsort((rank, step))
    r, s = rank[order], step[order]
    same = np.flatnonzero((r[1:] == r[:-1]) & (s[1:] == s[:-1]))
    if not same.size:
        return None
    j = int(same[0])
    a, b = sorted((int(order[j]), int(order[j + 1])))
    return a, b
# ---------------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------------


def read_rank_timers(path: str | Path | Iterable[str | Path]) -> tuple[pd.DataFrame, Ledger]:
    """Read rank step timers into the canonical table (pandas, in memory).

    Parameters
    ----------
    path
        A Parquet or CSV file with columns ``rank, step, duration_s``, a folder of such files, or a
        list of files and folders (see :func:`rank_timer_files`).  Other columns are ignored.

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`RANK_TIMER_COLUMNS` (int64, int64, float64), in file order.
    ledger : Ledger
        Rows read = kept + rejected; each rejection (missing, infinite or negative duration) names
        file, row and field.

    Raises
    ------
    InputError
        Missing or empty file, missing column, non-integer / negative / too large rank or step,
        non-numeric duration, two rows for one ``(rank, step)`` (naming both rows), or more than
        :data:`MAX_REJECTED_ROWS` rejections in one block.
    """
    listing = Ledger()
    files = rank_timer_files(path, ledger=listing)
    blocks = _blocks(files, np.iinfo(np.int64).max)  # whole files
    parts: list[CleanBlock] = []
    for block in blocks:
        parts.append(check_block(_read_block(block), block))
    ledger = Ledger.merged([listing, *(p.ledger for p in parts)])
    rank = np.concatenate([p.rank for p in parts])
    step = np.concatenate([p.step for p in parts])
    dur = np.concatenate([p.dur for p in parts])
    pair = duplicate_pair(rank, step)
    if pair is not None:
        a, b = pair
        offsets = np.cumsum([0] + [p.dur.size for p in parts])

        def where(i: int) -> tuple[TimerBlock, int]:
            k = int(np.searchsorted(offsets, i, side="right")) - 1
            return blocks[k], row_of(parts[k], blocks[k].first_row, i - int(offsets[k]))

        (blk_a, row_a), (blk_b, row_b) = where(a), where(b)
        other = f"row {row_a}" + ("" if blk_a.file == blk_b.file else f" of {blk_a.file}")
        raise InputError(f"two rows for rank {int(rank[a])} at step {int(step[a])} (the other is "
                         f"{other}); one timer per (rank, step) is expected", file=blk_b.file, row=row_b,
                         field="rank, step")
    table = pd.DataFrame({"rank": rank, "step": step, "duration_s": dur})
    return table, ledger


def rank_timers_dask(path: str | Path, *, partition_rows: int = DEFAULT_PARTITION_ROWS) -> Any:
    """Open Parquet rank timers as a :mod:`dask.dataframe`, one partition per run of whole row groups.

    Parameters
    ----------
    path
        A Parquet file or a folder of Parquet files.
    partition_rows
        Row groups of a file are packed into one partition up to this many rows (a row group
        larger than this is a partition of its own).

    Returns
    -------
    dask.dataframe.DataFrame
        Columns ``rank, step, duration_s`` as stored; the row checks (durations, duplicates) run
        inside :func:`straggler_analysis`, not here.

    Raises
    ------
    InputError
        A missing, empty or unreadable file, a missing column or a column of the wrong type.
    DomainError
        A CSV file (read CSV with :func:`read_rank_timers`, or convert it to Parquet).
    """
    return dask_frame(rank_timer_files(path), partition_rows)[0]


def dask_frame(files: Sequence[Path], partition_rows: int) -> tuple[Any, list[TimerBlock]]:
    csv = [f for f in files if is_csv(f)]
    if csv:
        raise DomainError(f"the dask engine reads Parquet only ({csv[0]} is CSV); use engine='pandas' "
                          "or convert the file to Parquet")
    blocks = _blocks(files, partition_rows)
    import dask.dataframe as dd  # after the checks: a refusal should not wait for the import

    meta = pd.DataFrame({"rank": pd.Series(dtype=np.int64), "step": pd.Series(dtype=np.int64),
                         "duration_s": pd.Series(dtype=np.float64)})
    frame = dd.from_map(_read_block, blocks, meta=meta, enforce_metadata=False, label="rank-timers")
    return frame, blocks


# ---------------------------------------------------------------------------------------------------
# The reader protocol (fleetlib.registry)
# ---------------------------------------------------------------------------------------------------

#: The table :func:`read` returns.
TABLES: tuple[str, ...] = ("rank_timers",)


def read(paths: str | Path | Iterable[str | Path], *, tz: Any = None, window: Any = None,
         **format_options: Any) -> tuple[dict[str, pd.DataFrame], Ledger]:
    """Read rank step timers the way every fleetlib reader reads (:mod:`fleetlib.registry`).

    Parameters
    ----------
    paths
        Files and/or folders of rank timers (see :func:`rank_timer_files`).
    tz
        Not used: a rank timer holds no time of day.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes.  Rank timers carry no timestamps,
        so a calendar window selects nothing (flag ``window_not_applied``).
    **format_options
        None are defined; any given is refused.

    Returns
    -------
    tables : dict of DataFrame
        ``rank_timers``: columns :data:`RANK_TIMER_COLUMNS`, in file order.
    ledger : Ledger
        Every data row of every file: read = kept + rejected.
    """
    from fleetlib.accounting import Window

    del tz
    if format_options:
        raise DomainError(f"the rank-timer reader takes no options; got {sorted(format_options)}")
    w = Window.parse(window)
    table, ledger = read_rank_timers(paths)
    if w is not None and not w.is_nominal:
        ledger.flag("window_not_applied", f"rank timers carry no timestamps, so the window {w.label!r} "
                                          "selects nothing: every row is kept")
    return {"rank_timers": table}, ledger
