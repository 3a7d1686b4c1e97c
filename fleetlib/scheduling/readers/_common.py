"""Helpers every scheduler-record reader shares.

The row-books of one read (:class:`ReadBook`), time parsing (:func:`parse_time_columns`), the
record window, step functions (:func:`queue_from_pending`, :func:`capacity_from_out_of_service`),
the canonical allocations frame, comma-separated text, and the Kubernetes-object parsing Kueue and
Volcano have in common.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib._io import (
    PathArg,
    excerpt,
    far_times,
    json_depth_rows,
    load_json,
    load_yaml_all,
    nesting_message,
    path_view,
    read_text,
    time_range,
)
from fleetlib._io import current_limits as _limits
from fleetlib.accounting import Window
from fleetlib.localtime import localize
from fleetlib.quality import DomainError, InputError, Ledger, RowBook
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS, QUEUE_COLUMNS, TIME_DTYPE

_MISSING_TIME = ("", "unknown", "none", "n/a", "nat", "nan", "null")
_AWARE = r"(?:[Zz]|[+-]\d{2}:?\d{2})$"
#: The Kubernetes extended resource that counts GPUs.
GPU_RESOURCE = "nvidia.com/gpu"


# ================================================================================================
# Shared helpers: text, ledger settlement, time parsing, step functions
# ================================================================================================


def header_line(text: str, path: Path) -> str:
    """Return the first non-blank line of a file's text (its header).

    Raises
    ------
    InputError
        The file holds nothing but blank lines.
    """
    for line in text.splitlines():
        if line.strip():
            return line
    raise InputError("empty file: expected a header line and records", file=str(path), row=1)


def record_window(window: object) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """Return the record window as UTC ``(start, end)``, or None (:meth:`Window.parse` takes it)."""
    win = Window.parse(window)
    if win is None:
        return None
    if win.start is None or win.end is None:
        raise DomainError(f"the record window needs a start and an end; got the nominal window {win.label!r}")
    return win.start.as_unit("ns"), win.end.as_unit("ns")


class ReadBook:
    """The row-books of one read: a :class:`fleetlib.quality.RowBook` per input file.

    A reader opens each file's book with the row (or line, or object) number of every record it
    found there, then rejects, repairs and flags records by those file row numbers; :meth:`settle`
    closes every book, in the order the files were opened, into one :class:`~fleetlib.quality.Ledger`.
    A flag on a record that ends up rejected is dropped (the rejection says more).  Records kept but
    used by no measurement (job steps, a cluster's registration line) are counted by kind with
    :meth:`unused`.
    """

    def __init__(self) -> None:
        self.books: dict[str, RowBook] = {}
        self._flags: list[tuple[str, np.ndarray, str, object, str | None]] = []
        self._unused: dict[str, int] = {}

    def unused(self, kind: str, n: int) -> None:
        """Count ``n`` kept records of ``kind`` that no measurement uses (see :attr:`Ledger.unused`)."""
        if n:
            self._unused[kind] = self._unused.get(kind, 0) + int(n)

    def open(self, file: str, rows: object) -> None:
        """Start the book of ``file`` with the 1-based row numbers of its records."""
        if file in self.books:
            raise DomainError(f"the file {file} is given twice; name each input file once")
        self.books[file] = RowBook(file, np.atleast_1d(np.asarray(rows, dtype=np.int64)))

    def _where(self, file: str, rows: object) -> tuple[RowBook, np.ndarray]:
        book = self.books[file]
        return book, book.positions_of_rows(rows)

    def reject(self, file: str, rows: object, field_: str | None, reason: object) -> None:
        """Reject the records at ``rows`` of ``file`` (one reason, or one per record)."""
        if np.size(rows):
            book, pos = self._where(file, rows)
            book.reject(pos, field_, reason)

    def repair(self, file: str, rows: object, field_: str | None, reason: object) -> None:
        """Record a named repair of the records at ``rows`` of ``file``."""
        if np.size(rows):
            book, pos = self._where(file, rows)
            book.repair(pos, field_, reason)

    def flag(self, file: str, rows: object, code: str, message: object, *, field: str | None = None) -> None:
        """Flag the records at ``rows`` of ``file``: kept, with a note (``code`` + ``message``)."""
        if np.size(rows):
            self._where(file, rows)  # the rows must be in the book
            self._flags.append((file, np.atleast_1d(np.asarray(rows, dtype=np.int64)), code, message, field))

    def settle(self) -> Ledger:
        """Close every file's book into one ledger (counts, entries and flags)."""
        ledger = Ledger()
        for file, book in self.books.items():
            for f, rows, code, message, fld in self._flags:
                if f != file:
                    continue
                pos = book.positions_of_rows(rows)
                live = ~book.rejected[pos]
                texts = message if isinstance(message, str) else np.asarray(list(message), dtype=object)[live]
                book.flag(pos[live], code, texts, field=fld)
            book.close(ledger)
        for kind, n in self._unused.items():
            ledger.count_unused(kind, n)
        return ledger


@dataclass
class ParsedTimes:
    """Parsed time columns of one file plus the masks a reader needs to judge them."""

    parsed: dict[str, pd.Series]
    missing: dict[str, np.ndarray]
    bad: dict[str, np.ndarray]
    aware: dict[str, np.ndarray]
    naive: dict[str, np.ndarray]


def parse_time_columns(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    tz: str | None,
    file: str,
    rows: np.ndarray,
    book: ReadBook,
    format_hint: str,
    naive_allowed: bool = True,
) -> tuple[ParsedTimes, np.ndarray]:
    """Parse text time columns into UTC; reject mixed-style rows; return (times, rejected-row mask).

    The file's style (naive or aware) is that of its first non-missing time in row order.  Rows with a
    time of the other style are rejected.  Naive times need ``tz``; without it the reader raises.
    """
    n = len(frame)
    out = ParsedTimes({}, {}, {}, {}, {})
    rejected = np.zeros(n, dtype=bool)
    first_style: tuple[int, str, bool] | None = None  # (position, column, aware)
    for col in columns:
        s = frame[col].astype("str").fillna("").str.strip()
        missing = s.str.lower().isin(_MISSING_TIME).to_numpy()
        aware = (~missing) & s.str.contains(_AWARE, regex=True).to_numpy()
        naive = (~missing) & (~aware)
        out.missing[col], out.aware[col], out.naive[col] = missing, aware, naive
        present = np.flatnonzero(~missing)
        if present.size and (first_style is None or present[0] < first_style[0]):
            first_style = (int(present[0]), col, bool(aware[present[0]]))
    file_aware = first_style[2] if first_style is not None else True
    if not naive_allowed:
        for col in columns:
            bad_rows = out.naive[col] & ~rejected
            book.reject(
                file,
                rows[bad_rows],
                col,
                f"time without a UTC offset; {format_hint} writes RFC 3339 times with 'Z' or an offset",
            )
            rejected |= bad_rows
    else:
        for col in columns:
            other = out.naive[col] if file_aware else out.aware[col]
            bad_rows = other & ~rejected
            style = "naive" if file_aware else "timezone-aware"
            first = "timezone-aware" if file_aware else "naive"
            book.reject(
                file,
                rows[bad_rows],
                col,
                f"mixed naive and timezone-aware times: this row has a {style} time in a file whose "
                f"first time is {first}",
            )
            rejected |= bad_rows
        if not file_aware and tz is None and first_style is not None:
            pos, col, _ = first_style
            raise InputError(
                f"naive local time {frame[col].iloc[pos]!r} and no tz given: {format_hint} prints the "
                "cluster's local wall-clock time; pass tz= the zone it runs in (for example tz='UTC')",
                file=file,
                row=int(rows[pos]),
                field=col,
            )
    for col in columns:
        s = frame[col].astype("str").fillna("").str.strip()
        vals = pd.Series(pd.NaT, index=frame.index, dtype=TIME_DTYPE)
        aw = out.aware[col] & ~rejected
        if aw.any():
            parsed = pd.to_datetime(s[aw], utc=True, errors="coerce", format="ISO8601")
            rejected |= _reject_implausible(book, file, rows, col, aw, parsed, s)
            vals[aw & ~rejected] = parsed[~rejected[aw]].dt.as_unit("ns")
        nv = out.naive[col] & ~rejected
        if nv.any() and tz is not None:
            local = pd.to_datetime(s[nv], errors="coerce", format="ISO8601")
            rejected |= _reject_implausible(book, file, rows, col, nv, local, s)
            local = local[~rejected[nv]]
            nv = nv & ~rejected
            try:
                placed = localize(local, tz)  # DST nights: the module's stated rule, a named repair each
            except Exception as exc:  # an unknown zone name
                raise DomainError(
                    f"tz must be an IANA zone name such as 'UTC' or 'Europe/Berlin'; got {tz!r}"
                ) from exc
            vals[nv] = placed.utc
            fixed, reasons = placed.repairs(col, s[nv].to_numpy())
            book.repair(file, rows[np.flatnonzero(nv)[fixed]], col, reasons)
        bad = (~out.missing[col]) & (~rejected) & vals.isna().to_numpy()
        book.reject(file, rows[bad], col, f"not a time: expected ISO 8601 ({format_hint})")
        rejected |= bad
        lo, hi = time_range()
        implausible = vals.notna().to_numpy() & ~rejected & ((vals < lo) | (vals >= hi)).to_numpy()
        if implausible.any():
            lim = _limits()
            book.reject(file, rows[implausible], col,
                        [f"time {excerpt(v, 32)} is outside the plausible range [{lim.earliest_year}-01-01, "
                         f"{lim.latest_year}-01-01) UTC (limits earliest_year, latest_year)"
                         for v in frame[col][implausible].tolist()])
            rejected |= implausible
            vals = vals.where(~implausible)
        out.parsed[col] = vals
        out.bad[col] = bad
    rejected |= _reject_far(book, file, rows, out.parsed, columns)
    return out, rejected


def _reject_far(book: ReadBook, file: str, rows: np.ndarray, parsed: dict[str, pd.Series],
                columns: Sequence[str]) -> np.ndarray:
    """Reject the rows with a time impossible for the file, flag those far from the rest (:func:`far_times`).

    The times of all ``columns`` of the file are judged together; a rejected row's times become NaT.
    Returns the mask of the rows rejected.
    """
    cols = [c for c in columns if c in parsed]
    if not cols:
        return np.zeros(len(rows), dtype=bool)
    times = np.stack([parsed[c].to_numpy(dtype="datetime64[ns]") for c in cols], axis=1)
    far, impossible, bulk = far_times(times)
    out = impossible.any(axis=1)
    for j, col in enumerate(cols):
        at = impossible[:, j] & ~impossible[:, :j].any(axis=1)  # each row once, by its first such time
        if at.any():
            book.reject(file, rows[at], col, [f"time {t} is decades from the file's other times (most lie in "
                                              f"{bulk} UTC): a clock reset or a damaged time"
                                              for t in parsed[col][at].tolist()])
        flag = far[:, j] & ~out & ~far[:, :j].any(axis=1)
        if flag.any():
            book.flag(file, rows[flag], "time_far_from_the_rest",
                      [f"{col} {t} lies far outside the file's other times (most lie in {bulk} UTC)"
                       for t in parsed[col][flag].tolist()], field=col)
    if out.any():
        for c in cols:
            parsed[c] = parsed[c].where(~out)
    return out


def _reject_implausible(book: ReadBook, file: str, rows: np.ndarray, col: str, where: np.ndarray,
                        parsed: pd.Series, written: pd.Series) -> np.ndarray:
    """Reject parsed times (any unit) outside the plausible range, before any cast to nanoseconds.

    Returns the mask (over all rows) of those rejected.
    """
    t = parsed.dt.tz_convert("UTC").dt.tz_localize(None) if parsed.dt.tz is not None else parsed
    arr = t.to_numpy()
    lim = _limits()
    lo, hi = np.datetime64(f"{lim.earliest_year}-01-01"), np.datetime64(f"{lim.latest_year}-01-01")
    out = np.zeros(len(where), dtype=bool)
    out[where] = ~np.isnat(arr) & ((arr < lo) | (arr >= hi))
    if out.any():
        book.reject(file, rows[out], col,
                    [f"time {excerpt(v, 32)} is outside the plausible range [{lim.earliest_year}-01-01, "
                     f"{lim.latest_year}-01-01) UTC (limits earliest_year, latest_year)"
                     for v in written[out].tolist()])
    return out


def queue_from_pending(
    pool: pd.Series | np.ndarray,
    start: pd.Series | np.ndarray,
    end: pd.Series | np.ndarray,
    devices: pd.Series | np.ndarray,
) -> pd.DataFrame:
    """Build the queue step function from pending intervals with a sweep over start/end events.

    Parameters
    ----------
    pool
        Pool of each pending interval.
    start, end
        UTC start and end of each interval (a job waiting from eligibility to gang completion, or to
        the end of the record).  Intervals with ``end <= start`` contribute nothing.
    devices
        Devices the waiting job asks for.

    Returns
    -------
    pandas.DataFrame
        :data:`QUEUE_COLUMNS`: for each pool, consecutive segments between the interval boundaries
        with the number of pending jobs and devices in each (zero segments between busy spells kept).
    """
    iv = pd.DataFrame(
        {
            "pool": np.asarray(pool, dtype=object),
            "start": pd.to_datetime(start, utc=True),
            "end": pd.to_datetime(end, utc=True),
            "devices": np.asarray(devices, dtype=float),
        }
    )
    iv = iv[iv["end"] > iv["start"]]
    if iv.empty:
        return _empty(QUEUE_COLUMNS, {"pending_jobs": "int64", "pending_devices": "int64"})
    ev = pd.concat(
        [
            pd.DataFrame({"pool": iv["pool"], "time": iv["start"], "dj": 1, "dd": iv["devices"]}),
            pd.DataFrame({"pool": iv["pool"], "time": iv["end"], "dj": -1, "dd": -iv["devices"]}),
        ],
        ignore_index=True,
    )
    ev = ev.groupby(["pool", "time"], as_index=False, sort=True)[["dj", "dd"]].sum()
    ev["pending_jobs"] = ev.groupby("pool")["dj"].cumsum()
    ev["pending_devices"] = ev.groupby("pool")["dd"].cumsum()
    ev["end"] = ev.groupby("pool")["time"].shift(-1)
    ev = ev[ev["end"].notna()]
    out = pd.DataFrame(
        {
            "pool": ev["pool"].astype(str).to_numpy(),
            "start": ev["time"].dt.as_unit("ns").reset_index(drop=True),
            "end": pd.to_datetime(ev["end"], utc=True).dt.as_unit("ns").reset_index(drop=True),
            "pending_jobs": ev["pending_jobs"].astype("int64").to_numpy(),
            "pending_devices": ev["pending_devices"].round().astype("int64").to_numpy(),
        }
    )
    return out.reset_index(drop=True)


def _empty(columns: Sequence[str], dtypes: dict[str, str] | None = None) -> pd.DataFrame:
    time_cols = {"start", "end", "submit", "first_assigned", "gang_complete", "release"}
    out = pd.DataFrame({c: pd.Series(dtype=TIME_DTYPE if c in time_cols else object) for c in columns})
    for c, d in (dtypes or {}).items():
        out[c] = out[c].astype(d)
    return out


def capacity_from_out_of_service(
    installed: pd.Series, out_iv: pd.DataFrame, window: tuple[pd.Timestamp, pd.Timestamp]
) -> pd.DataFrame:
    """Sweep out-of-service intervals (pool, start, end, devices) against installed devices per pool."""
    ws, we = window
    iv = out_iv.copy()
    iv["start"] = iv["start"].clip(lower=ws)
    iv["end"] = iv["end"].clip(upper=we)
    iv = iv[iv["end"] > iv["start"]]
    pools = installed.index.astype(str)
    ev = pd.concat(
        [
            pd.DataFrame({"pool": pools, "time": ws, "d": 0.0}),
            pd.DataFrame({"pool": pools, "time": we, "d": 0.0}),
            pd.DataFrame(
                {"pool": iv["pool"].astype(str), "time": iv["start"], "d": iv["devices"].astype(float)}
            ),
            pd.DataFrame(
                {"pool": iv["pool"].astype(str), "time": iv["end"], "d": -iv["devices"].astype(float)}
            ),
        ],
        ignore_index=True,
    )
    ev["time"] = pd.to_datetime(ev["time"], utc=True).dt.as_unit("ns")
    ev = ev.groupby(["pool", "time"], as_index=False, sort=True)["d"].sum()
    ev["out"] = ev.groupby("pool")["d"].cumsum().round(9)
    ev["end"] = ev.groupby("pool")["time"].shift(-1)
    ev = ev[ev["end"].notna()]
    inst = ev["pool"].map(installed.astype(float)).astype(float)  # float even when no node is listed
    return pd.DataFrame(
        {
            "pool": ev["pool"].to_numpy(dtype=object),
            "start": ev["time"].reset_index(drop=True),
            "end": ev["end"].reset_index(drop=True),
            "devices_in_service": (inst - ev["out"]).round().astype("int64").to_numpy(),
            "devices_out_of_service": ev["out"].round().astype("int64").to_numpy(),
        }
    )


def allocations_frame(data: dict[str, object]) -> pd.DataFrame:
    """Assemble the canonical allocations table (never-assigned rows keep NaT first/gang times)."""
    out = pd.DataFrame({c: data[c] for c in ALLOCATION_COLUMNS})
    if out.empty:
        return _empty(
            ALLOCATION_COLUMNS,
            {
                "attempt": "int64",
                "devices": "int64",
                "priority": "float64",
                "elastic": bool,
                "requested_devices": "int64",
            },
        )
    for c in ("submit", "first_assigned", "gang_complete", "release"):
        out[c] = pd.to_datetime(out[c], utc=True).dt.as_unit("ns")
    out = out.astype(
        {
            "job_id": object,
            "pool": object,
            "devices": "int64",
            "priority": "float64",
            "elastic": bool,
            "end_state": object,
            "requested_devices": "int64",
        }
    )
    out["attempt"] = _renumber_attempts(out)
    order = out["first_assigned"].fillna(out["release"])
    out = out.assign(_o=order).sort_values(["pool", "_o", "job_id", "attempt"], kind="stable")
    return out.drop(columns="_o").reset_index(drop=True)


def _renumber_attempts(alloc: pd.DataFrame) -> pd.Series:
    """Return attempt numbers 0, 1, ... per job, ordered by when the devices came (never-assigned last)."""
    key = alloc["first_assigned"].fillna(alloc["release"])
    order = alloc.assign(_k=key).sort_values(["job_id", "_k", "submit"], kind="stable")
    return order.groupby("job_id").cumcount().reindex(alloc.index).astype("int64")


def overlapping(job: pd.Series, start: pd.Series, end: pd.Series) -> np.ndarray:
    """Mask of rows whose interval starts before an earlier interval of the same job has ended."""
    f = pd.DataFrame(
        {"job": job.to_numpy(), "start": start.array, "end": end.array}, index=job.index
    ).sort_values(["job", "start"], kind="stable")
    prev_end = f.groupby("job")["end"].cummax()
    prev_end = prev_end.groupby(f["job"]).shift(1)
    mask = (f["start"] < prev_end).fillna(False)
    return mask.reindex(job.index).to_numpy(dtype=bool)


# ================================================================================================
# Kubernetes objects: shared parsing for Kueue and Volcano
# ================================================================================================


def load_objects(path: PathArg, book: ReadBook) -> list[tuple[int, object, str]]:
    """Return (row, object, canonical text) for each object in a YAML/JSON/JSON-lines file.

    A ``kind: *List`` document contributes its items, each counted as a row.  JSON-lines files count
    rows by line; a line that is not JSON is rejected (a truncated export).
    """
    file = str(path)
    text = read_text(path)
    if not text.strip():
        raise InputError(
            "empty file: expected Kubernetes objects (YAML, JSON or JSON lines)", file=file, row=1
        )
    docs: list[tuple[int, object]] = []
    stripped = text.lstrip()
    if path_view(path).name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        lines = text.splitlines()
        present: list[int] = []
        broken: list[tuple[int, str]] = []
        too_deep = set(json_depth_rows(text, per_line=True).tolist())
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            present.append(i)
            if i in too_deep:
                broken.append((i, nesting_message()))
                continue
            try:
                docs.append((i, load_json(line, file=file, row=i, depth_checked=True)))
            except InputError as exc:
                broken.append((i, str(exc).split(": ", 1)[-1]))
        book.open(file, present)
        if broken:
            book.reject(file, [i for i, _ in broken], None, [why for _, why in broken])
        return [(r, o, json.dumps(o, sort_keys=True)) for r, o in docs]
    if stripped.startswith(("{", "[")):
        loaded = [load_json(text, file=file)]
    else:
        loaded = [d for _, d in load_yaml_all(text, file=file, invalid="malformed YAML")]
    if not loaded:
        raise InputError("empty file: no objects", file=file, row=1)
    row = 0
    for doc in loaded:
        items = (
            doc
            if isinstance(doc, list)
            else (
                doc["items"]
                if isinstance(doc, dict)
                and str(doc.get("kind", "")).endswith("List")
                and isinstance(doc.get("items"), list)
                else [doc]
            )
        )
        for item in items:
            row += 1
            docs.append((row, item))
    book.open(file, np.arange(1, row + 1))
    return [(r, o, json.dumps(o, sort_keys=True, default=str)) for r, o in docs]


def quantity(value: object) -> float:
    """Return a Kubernetes quantity of a countable resource ('8', 8, '500m') as a float, NaN if unreadable."""
    if value is None:
        return float("nan")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            return float("nan")
        return number if np.isfinite(number) else float("nan")
    s = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(m|k)?", s)
    if m is None:
        return float("nan")
    scale = {"m": 1e-3, "k": 1e3, None: 1.0}[m.group(2)]
    return float(m.group(1)) * scale


def nested_get(obj: object, *keys: str) -> object:
    """Return ``obj[k1][k2]...``, or None where a level is missing or not a mapping."""
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def attempts_from_events(
    ev: pd.DataFrame, end_cols: Sequence[str] = ("end_state",)
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Assemble attempts from transition events.

    ``ev`` has columns key, row, time, kind ('start' | 'gang' | 'end'), rank (lower = the more specific
    end reason when several ends share a time) and ``end_cols``.  The same transition seen in several
    snapshots counts once.  Returns (attempts, events with their attempt number; -1 = before any start).
    """
    korder = ev["kind"].map({"end": 0, "start": 1, "gang": 2})
    ev = ev.assign(_k=korder).sort_values(["key", "time", "_k", "rank", "row"], kind="stable")
    ev = ev.drop_duplicates(["key", "time", "kind"], keep="first").drop(columns="_k")
    ev["attempt"] = (ev["kind"] == "start").astype(int).groupby(ev["key"]).cumsum() - 1
    real = ev[ev["attempt"] >= 0]
    starts = real[real["kind"] == "start"][["key", "attempt", "time", "row"]].rename(
        columns={"time": "first_assigned", "row": "primary_row"}
    )
    gang = (
        real[real["kind"] == "gang"]
        .groupby(["key", "attempt"], as_index=False)["time"]
        .min()
        .rename(columns={"time": "gang_complete"})
    )
    ends = (
        real[real["kind"] == "end"]
        .groupby(["key", "attempt"], as_index=False)
        .first()[["key", "attempt", "time", *end_cols]]
        .rename(columns={"time": "release"})
    )
    att = starts.merge(gang, on=["key", "attempt"], how="left").merge(ends, on=["key", "attempt"], how="left")
    for c in ("first_assigned", "gang_complete", "release"):
        att[c] = pd.to_datetime(att[c], utc=True).dt.as_unit("ns")
    return att.reset_index(drop=True), ev


def as_mask(mask: pd.Series | np.ndarray) -> np.ndarray:
    """Return a boolean mask as numpy, missing values False (for a RowBook over the attempts)."""
    if isinstance(mask, pd.Series):
        return mask.fillna(False).astype(bool).to_numpy()
    return np.asarray(mask, dtype=bool)


def settle_attempts(attempts: RowBook, att: pd.DataFrame, ev: pd.DataFrame, book: ReadBook) -> None:
    """Write the outcome of each attempt onto the file rows it came from.

    ``attempts`` is a :class:`~fleetlib.quality.RowBook` over the rows of ``att`` (position i is
    attempt i).  Each attempt's rejection, repairs and flags land on its primary row (the record
    that opened it); the other rows of a rejected attempt are rejected as part of it.
    """
    scratch = Ledger()
    attempts.close(scratch)
    primary = att["primary_row"].to_numpy()
    rejected_why: dict[int, str] = {}
    for e in scratch.entries:
        f, r = primary[e.row - 1].split("\x00")
        if e.action == "rejected":
            book.reject(f, int(r), None, e.reason)
            rejected_why[e.row - 1] = e.reason
        else:
            book.repair(f, int(r), None, e.reason)
    for fl in scratch.flags:
        f, r = primary[fl.row - 1].split("\x00")
        book.flag(f, int(r), fl.code, fl.message)
    if rejected_why:
        pos = np.fromiter(rejected_why, dtype=np.int64)
        rej = att.iloc[pos][["key", "attempt", "primary_row"]].assign(_why=list(rejected_why.values()))
        other = ev.merge(rej, on=["key", "attempt"])
        other = other[other["row"] != other["primary_row"]].drop_duplicates("row")
        for rid, prim, why in other[["row", "primary_row", "_why"]].itertuples(index=False, name=None):
            f, r = rid.split("\x00")
            book.reject(f, int(r), None, f"part of an attempt rejected at row {prim.split(chr(0))[1]}: {why}")


def requeue_submit(att: pd.DataFrame) -> pd.Series:
    """Return each attempt's submit time.

    It is the object's creation, or the release of the previous attempt of the same object when that
    one was evicted (the attempt re-entered the queue then).
    """
    a = att.sort_values(["key", "first_assigned"], kind="stable")
    prev_rel = a.groupby("key")["release"].shift(1)
    prev_evicted = a.groupby("key")["end_kind"].shift(1).eq("evicted")
    sub = a["submit"].where(~(prev_evicted & prev_rel.notna()), prev_rel)
    return sub.reindex(att.index)


def row_ids(df: pd.DataFrame) -> pd.Series:
    """Return ``file NUL row`` per record: the key :func:`settle_attempts` splits back into file and row."""
    return df["file"].astype(str) + "\x00" + df["row"].astype(str)


def csv_lines(
    path: Path, text: str, book: ReadBook, required: Sequence[str], what: str, dtype: object = str
) -> tuple[pd.DataFrame, np.ndarray]:
    """Read comma-separated text as string columns; reject lines whose field count differs from the header."""
    import io

    file = str(path)
    lines = pd.Series(text.splitlines(), dtype="str")
    nonblank = (lines.str.strip() != "").to_numpy()
    if not nonblank.any():
        raise InputError(f"empty file: expected {what} (a header line naming {list(required)}, then rows)",
                         file=file, row=1)
    header_pos = int(np.flatnonzero(nonblank)[0])
    header = [h.strip() for h in lines.iloc[header_pos].split(",")]
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"missing required column(s) {missing}; {what} needs {list(required)}",
            file=file,
            row=header_pos + 1,
            field=missing[0],
        )
    body = lines.iloc[header_pos + 1 :][nonblank[header_pos + 1 :]]
    line_no = body.index.to_numpy(dtype=np.int64) + 1
    book.open(file, line_no)
    counts = (body.str.len() - body.str.replace(",", "", regex=False).str.len()).to_numpy(dtype=np.int64) + 1
    wrong = counts != len(header)
    book.reject(
        file,
        line_no[wrong],
        None,
        [f"{k} fields where the header has {len(header)} (a truncated line?)" for k in counts[wrong]],
    )
    good = "\n".join([lines.iloc[header_pos], *body[~wrong].tolist()])
    raw = pd.read_csv(io.StringIO(good), dtype=dtype, keep_default_na=False)
    return raw, line_no[~wrong]
