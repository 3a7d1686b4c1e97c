"""Readers: scheduler records in their real formats -> canonical tables and a row ledger.

Every reader has the shape ``read_<format>(path_or_paths, ...) -> (SchedulerRecords, Ledger)``.
:class:`~fleetlib.scheduling.records.SchedulerRecords` holds the canonical tables the scheduling factor
is computed on (columns in :mod:`fleetlib.scheduling.records`); format-specific extras go in its
``extra`` dict: ``extra["notes"]`` (the conventions the reader applied: zone, window, what capacity
means), and for openb ``extra["waits"]`` and ``extra["installed"]``.  The ledger accounts for every
input row: rows read = kept + repaired (the repair named) + rejected (file, row or line, field,
reason).  Rows and lines are numbered as the format counts them: text files by 1-based line (the
header is line 1), YAML/JSON files by object (1-based), JSON-lines files by line.  A row carries at
most one ledger entry; when several repairs apply they are named together.  A row that is kept but
carries a warning (an unknown job state, running GPUs above the total) is entered as repaired with a
reason that starts with ``"flagged:"``, because the ledger has no third action.

Formats and their gang-complete marker
--------------------------------------
* **Slurm** ``sacct --parsable2`` (+ ``sacctmgr show event -P`` and ``sinfo -N`` for capacity):
  allocation is atomic, so ``Start`` is both the first device assignment and gang completion.
* **Kueue** Workload objects: ``Admitted=True`` starts an attempt, ``PodsReady=True`` completes the
  gang, ``Finished`` / ``Evicted`` / ``Preempted`` release it.
* **Volcano** PodGroup watch records: the phase reaching ``Running`` (or ``status.running`` reaching
  ``minMember``) completes the gang; ``Unknown`` is a partial gang.
* **Helios** per-VC minute sequences: an aggregate format -> the occupancy table (running GPUs are
  complete allocations because Slurm allocates atomically); the daily quota file -> capacity.
* **Alibaba openb** pod and node lists: waits and size cohorts only (the sample never fills the
  cluster, so it cannot give time-based scheduling goodput).

Jobs that waited and never got a device are allocation rows with ``first_assigned`` and
``gang_complete`` missing and ``release`` when they left the queue (``end_state`` ``"pending"`` when
they still waited at the end of the record, censored there).  Jobs still holding at the end of the
record are censored there too (``end_state`` ``"running"``); both censorings are named repairs.

Times
-----
All output times are timezone-aware UTC (``datetime64[ns, UTC]``).  Formats that print naive local
wall-clock time (sacct, sacctmgr, Helios) are localised with an explicit zone: the ``tz`` argument
(Slurm: required, the files do not say which zone the cluster runs in; Helios: defaults to
``"Asia/Shanghai"``, the zone of SenseTime's clusters, stated in ``extra["notes"]``).  Kubernetes
objects must carry RFC 3339 offsets; a naive time there is rejected.  A file that mixes naive and
timezone-aware times has the rows whose style differs from the file's first time rejected.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling.records import (
    ALLOCATION_COLUMNS,
    QUEUE_COLUMNS,
    SchedulerRecords,
)

__all__ = [
    "FORMATS",
    "INSTALLED_COLUMNS",
    "KUEUE_EVICTED_STATES",
    "KUEUE_FINISHED_STATES",
    "SLURM_END_STATES",
    "SLURM_STATES",
    "VOLCANO_PHASES",
    "WAIT_COLUMNS",
    "detect_quota_glitch_days",
    "expand_hostlist",
    "openb_cohorts",
    "queue_from_pending",
    "read_helios",
    "read_kueue",
    "read_openb",
    "read_records",
    "read_slurm",
    "read_volcano",
    "scheduling_command",
]

#: Columns of the openb waits table (one row per pod; times are seconds from the trace start).
WAIT_COLUMNS: tuple[str, ...] = (
    "pod",
    "pod_phase",
    "qos",
    "num_gpu",
    "gpu_milli",
    "devices",
    "cohort",
    "creation_s",
    "scheduled_s",
    "deletion_s",
    "wait_s",
    "scheduled",
)
#: Columns of the installed-capacity table (openb node list: no times, one row per GPU model).
INSTALLED_COLUMNS: tuple[str, ...] = ("model", "nodes", "devices")

_TIME = "datetime64[ns, UTC]"
_MISSING_TIME = ("", "unknown", "none", "n/a", "nat", "nan", "null")
_AWARE = r"(?:[Zz]|[+-]\d{2}:?\d{2})$"
_GPU = "nvidia.com/gpu"
_LTT = "status.conditions.lastTransitionTime"
#: End state of a job that was still waiting for devices at the end of the record (records.END_STATES).
_PENDING = "pending"


def _records(source: str, notes: dict[str, str], **tables: object) -> SchedulerRecords:
    out = SchedulerRecords(source=source)
    for name, table in tables.items():
        if name in ("allocations", "capacity", "queue", "reservations", "occupancy"):
            setattr(out, name, table)
        else:
            out.extra[name] = table
    out.extra["notes"] = notes
    return out


# ================================================================================================
# Shared helpers: paths, ledger settlement, time parsing, step functions
# ================================================================================================


def _paths(path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]]) -> list[Path]:
    if isinstance(path_or_paths, (str, PathLike)):
        paths = [Path(path_or_paths)]
    else:
        paths = [Path(p) for p in path_or_paths]
    if not paths:
        raise DomainError("no input files given")
    return paths


def _read_text(path: Path) -> str:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                return fh.read()
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(path)) from exc
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read the file ({exc}); expected UTF-8 text, optionally gzipped", file=str(path)
        ) from exc


def _first_line(text: str, path: Path) -> str:
    for line in text.splitlines():
        if line.strip():
            return line
    raise InputError("empty file: expected a header line and records", file=str(path), row=1)


def _window(window: Sequence[object] | None) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    if window is None:
        return None
    if len(window) != 2:
        raise DomainError(f"window must be (start, end); got {window!r}")
    start, end = (pd.Timestamp(w) for w in window)  # type: ignore[arg-type]
    if start.tzinfo is None or end.tzinfo is None:
        raise DomainError(f"window times must carry a zone (for example '2024-03-04T00:00Z'); got {window!r}")
    start, end = start.tz_convert("UTC").as_unit("ns"), end.tz_convert("UTC").as_unit("ns")
    if end <= start:
        raise DomainError(f"window end must be after its start; got {window!r}")
    return start, end


def _issues(file: str, rows: object, field_: object, reason: object) -> pd.DataFrame:
    """Return ledger issues (file, row, field, reason) as a frame; scalars broadcast over ``rows``."""
    rows_arr = np.atleast_1d(np.asarray(rows, dtype=np.int64))
    n = rows_arr.size
    f = np.full(n, field_, dtype=object) if np.ndim(field_) == 0 else np.asarray(field_, dtype=object)
    r = np.full(n, reason, dtype=object) if np.ndim(reason) == 0 else np.asarray(reason, dtype=object)
    return pd.DataFrame({"file": np.full(n, file, dtype=object), "row": rows_arr, "field": f, "reason": r})


class _Book:
    """Collects rejections and repairs for a reader and settles them into one Ledger at the end."""

    def __init__(self) -> None:
        self.read = 0
        self.rejects: list[pd.DataFrame] = []
        self.repairs: list[pd.DataFrame] = []

    def reject(self, file: str, rows: object, field_: object, reason: object) -> None:
        if np.size(rows):
            self.rejects.append(_issues(file, rows, field_, reason))

    def repair(self, file: str, rows: object, field_: object, reason: object) -> None:
        if np.size(rows):
            self.repairs.append(_issues(file, rows, field_, reason))

    def settle(self) -> Ledger:
        """Give each row at most one entry (a rejection beats repairs; repairs of one row are joined)."""
        cols = ["file", "row", "field", "reason"]
        rej = pd.concat(self.rejects, ignore_index=True) if self.rejects else pd.DataFrame(columns=cols)
        rep = pd.concat(self.repairs, ignore_index=True) if self.repairs else pd.DataFrame(columns=cols)
        rej = rej.drop_duplicates(["file", "row"], keep="first")
        if len(rep):
            rep = rep.merge(rej[["file", "row"]], on=["file", "row"], how="left", indicator=True)
            rep = rep[rep["_merge"] == "left_only"].drop(columns="_merge")
            rep = rep.drop_duplicates(cols)
            rep["field"] = rep["field"].fillna("").astype(str)
            rep = rep.groupby(["file", "row"], sort=False, as_index=False).agg(
                field=("field", lambda s: ",".join(dict.fromkeys(x for x in s if x)) or None),
                reason=("reason", "; ".join),
            )
        ledger = Ledger(read=self.read)
        for f, r, fld, why in rej[cols].itertuples(index=False, name=None):
            ledger.reject(f, int(r), None if fld is None or fld == "" else str(fld), str(why))
        for f, r, fld, why in rep[cols].itertuples(index=False, name=None):
            ledger.repair(f, int(r), None if fld is None or fld == "" else str(fld), str(why))
        ledger.kept = self.read - len(rej) - len(rep)
        if ledger.kept < 0:  # pragma: no cover - guards the bookkeeping itself
            raise AssertionError("ledger bookkeeping: more entries than rows read")
        return ledger


@dataclass
class _Times:
    """Parsed time columns of one file plus the masks a reader needs to judge them."""

    parsed: dict[str, pd.Series]
    missing: dict[str, np.ndarray]
    bad: dict[str, np.ndarray]
    aware: dict[str, np.ndarray]
    naive: dict[str, np.ndarray]


def _parse_time_columns(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    tz: str | None,
    file: str,
    rows: np.ndarray,
    book: _Book,
    format_hint: str,
    naive_allowed: bool = True,
) -> tuple[_Times, np.ndarray]:
    """Parse text time columns into UTC; reject mixed-style rows; return (times, rejected-row mask).

    The file's style (naive or aware) is that of its first non-missing time in row order.  Rows with a
    time of the other style are rejected.  Naive times need ``tz``; without it the reader raises.
    """
    n = len(frame)
    out = _Times({}, {}, {}, {}, {})
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
        vals = pd.Series(pd.NaT, index=frame.index, dtype=_TIME)
        aw = out.aware[col] & ~rejected
        if aw.any():
            vals[aw] = pd.to_datetime(s[aw], utc=True, errors="coerce", format="ISO8601").dt.as_unit("ns")
        nv = out.naive[col] & ~rejected
        if nv.any() and tz is not None:
            local = pd.to_datetime(s[nv], errors="coerce", format="ISO8601")
            try:
                loc = local.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
            except Exception as exc:  # an unknown zone name
                raise DomainError(
                    f"tz must be an IANA zone name such as 'UTC' or 'Europe/Berlin'; got {tz!r}"
                ) from exc
            vals[nv] = loc.dt.tz_convert("UTC").dt.as_unit("ns")
            parsed = np.zeros(n, dtype=bool)
            parsed[nv] = local.notna().to_numpy()
            dst = parsed & vals.isna().to_numpy()
            book.reject(
                file, rows[dst], col, f"local time is ambiguous or does not exist in {tz} (a DST change)"
            )
            rejected |= dst
        bad = (~out.missing[col]) & (~rejected) & vals.isna().to_numpy()
        book.reject(file, rows[bad], col, f"not a time: expected ISO 8601 ({format_hint})")
        rejected |= bad
        out.parsed[col] = vals
        out.bad[col] = bad
    return out, rejected


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
    out = pd.DataFrame({c: pd.Series(dtype=_TIME if c in time_cols else object) for c in columns})
    for c, d in (dtypes or {}).items():
        out[c] = out[c].astype(d)
    return out


def _capacity_from_out_of_service(
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
    inst = ev["pool"].map(installed.astype(float))
    return pd.DataFrame(
        {
            "pool": ev["pool"].to_numpy(dtype=object),
            "start": ev["time"].reset_index(drop=True),
            "end": ev["end"].reset_index(drop=True),
            "devices_in_service": (inst - ev["out"]).round().astype("int64").to_numpy(),
            "devices_out_of_service": ev["out"].round().astype("int64").to_numpy(),
        }
    )


def _allocations_frame(data: dict[str, object]) -> pd.DataFrame:
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


def _overlapping(job: pd.Series, start: pd.Series, end: pd.Series) -> np.ndarray:
    """Mask of rows whose interval starts before an earlier interval of the same job has ended."""
    f = pd.DataFrame(
        {"job": job.to_numpy(), "start": start.array, "end": end.array}, index=job.index
    ).sort_values(["job", "start"], kind="stable")
    prev_end = f.groupby("job")["end"].cummax()
    prev_end = prev_end.groupby(f["job"]).shift(1)
    mask = (f["start"] < prev_end).fillna(False)
    return mask.reindex(job.index).to_numpy(dtype=bool)


# ================================================================================================
# Slurm: sacct --parsable2, sacctmgr show event -P, sinfo -N
# ================================================================================================

#: Slurm job states (long names as sacct prints them); anything else is kept and flagged.
SLURM_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PENDING",
        "PREEMPTED",
        "RUNNING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "REVOKED",
        "SPECIAL_EXIT",
        "SUSPENDED",
        "TIMEOUT",
    }
)
_SLURM_OPEN = frozenset({"RUNNING", "SUSPENDED", "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})
#: Slurm state -> canonical end state.  A record ended by a requeue is charged as ``preempted`` (an
#: interruption from outside the job); a job still waiting is ``pending``.
SLURM_END_STATES: dict[str, str] = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "SPECIAL_EXIT": "failed",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "PREEMPTED": "preempted",
    "REQUEUED": "preempted",
    "REQUEUE_FED": "preempted",
    "REQUEUE_HOLD": "preempted",
    "NODE_FAIL": "node_fail",
    "BOOT_FAIL": "node_fail",
    "OUT_OF_MEMORY": "out_of_memory",
    "RUNNING": "running",
    "SUSPENDED": "running",
    "RESIZING": "running",
    "PENDING": _PENDING,
}
_SACCT_REQUIRED = ("JobID", "Partition", "Submit", "Start", "End", "State", "AllocTRES")
_EVENT_REQUIRED = ("NodeName", "TimeStart", "TimeEnd", "State")
_OUT_OF_SERVICE = r"DOWN|DRAIN|FAIL|MAINT|POWER|REBOOT|NOT_RESPONDING|NO_RESPOND|\*"


def expand_hostlist(expression: str) -> list[str]:
    """Expand a Slurm hostlist expression into node names.

    Parameters
    ----------
    expression
        For example ``"gpu-a[001-003,007],gpu-h01"``; zero padding of a range is kept.

    Returns
    -------
    list of str
        The node names in order.

    Raises
    ------
    ValueError
        When the brackets do not balance or a range is not numeric.
    """
    parts: list[str] = []
    depth, cur = 0, []
    for ch in expression.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {expression!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in hostlist {expression!r}")
    parts.append("".join(cur))
    out: list[str] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\](.*)", part)
        if m is None:
            if "[" in part or "]" in part:
                raise ValueError(f"cannot read hostlist {expression!r}")
            out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"non-numeric range {r!r} in hostlist {expression!r}")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.extend(expand_hostlist(f"{prefix}{i:0{width}d}{suffix}"))
    return out


def _pipe_table(path: Path, text: str, required: Sequence[str], book: _Book, what: str) -> pd.DataFrame:
    """Split '|'-separated text into string columns; reject lines with the wrong field count."""
    file = str(path)
    lines = pd.Series(text.splitlines(), dtype=object)
    nonblank = lines.str.strip() != ""
    if not nonblank.any():
        raise InputError(f"empty file: expected a header line of {what}", file=file, row=1)
    header_pos = int(np.flatnonzero(nonblank.to_numpy())[0])
    header_line = lines.iloc[header_pos]
    trailing = header_line.endswith("|")  # `--parsable` (not parsable2) ends every line with '|'
    header = (header_line[:-1] if trailing else header_line).split("|")
    header = [h.strip() for h in header]
    if len(set(header)) != len(header):
        raise InputError(f"duplicate column names in the header {header}", file=file, row=header_pos + 1)
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"missing required column(s) {missing}; {what} must include {list(required)}",
            file=file,
            row=header_pos + 1,
            field=missing[0],
        )
    body = lines.iloc[header_pos + 1 :]
    body = body[body.str.strip() != ""]
    line_no = body.index.to_numpy(dtype=np.int64) + 1
    book.read += len(body)
    if trailing:
        body = body.str.replace(r"\|$", "", regex=True)
    nfields = body.str.count(r"\|").to_numpy() + 1
    wrong = nfields != len(header)
    book.reject(
        file,
        line_no[wrong],
        None,
        [
            f"{k} fields where the header has {len(header)} (a truncated line, or '|' inside a field)"
            for k in nfields[wrong]
        ],
    )
    good = body[~wrong]
    if good.empty:
        frame = pd.DataFrame({c: pd.Series(dtype=object) for c in header})
    else:
        frame = good.str.split("|", expand=True, regex=False)
        frame.columns = header
    for c in header:
        frame[c] = frame[c].str.strip()
    frame.insert(0, "_line", line_no[~wrong])
    frame.insert(0, "_file", file)
    return frame.reset_index(drop=True)


def _tres_gpus(tres: pd.Series) -> pd.Series:
    """GPU count in a TRES string ('gres/gpu=8', or the sum of typed 'gres/gpu:a100=8'); NaN if absent."""
    s = tres.fillna("").astype(str)
    plain = pd.to_numeric(s.str.extract(r"(?:^|,)gres/gpu=(\d+)", expand=False), errors="coerce")
    typed = s.str.extractall(r"(?:^|,)gres/gpu:[^=,]+=(\d+)")
    if len(typed):
        typed_sum = typed[0].astype("int64").groupby(level=0).sum().reindex(s.index)
        plain = plain.fillna(typed_sum)
    return plain.astype("float64")


def _gres_gpus(gres: pd.Series) -> pd.Series:
    """GPU count in a sinfo GRES string ('gpu:a100:8(S:0-1)', 'gpu:8'); 0 when none."""
    s = gres.fillna("").astype(str).str.replace(r"\([^)]*\)", "", regex=True)
    found = s.str.extractall(r"(?:^|,)gpu(?::[^:,]+)?:(\d+)")
    if found.empty:
        return pd.Series(0.0, index=s.index)
    return found[0].astype("int64").groupby(level=0).sum().reindex(s.index).fillna(0).astype(float)


def _sniff_slurm(header: str) -> str | None:
    cols = {c.strip().lower() for c in header.split("|")}
    if "jobid" in cols:
        return "sacct"
    if "nodename" in cols and "timestart" in cols:
        return "events"
    if ("nodelist" in cols or "hostnames" in cols) and "partition" in cols and "gres" in cols:
        return "nodes"
    return None


def read_slurm(
    path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: Sequence[object] | None = None,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Slurm accounting: ``sacct --parsable2`` jobs, ``sacctmgr show event -P`` and ``sinfo -N``.

    Each file's kind is recognised from its header: sacct (has ``JobID``), sacctmgr events (``NodeName``
    and ``TimeStart``) or the node inventory (``sinfo -N -o '%N|%P|%G'``: ``NODELIST|PARTITION|GRES``).

    Parameters
    ----------
    path_or_paths
        One file or several (sacct dumps are concatenated; duplicate rows across them are rejected).
    tz
        IANA zone of the cluster's wall clock.  sacct and sacctmgr print naive local times, so this is
        required when the files hold naive times; the reader raises :class:`InputError` otherwise.
    window
        ``(start, end)`` as timezone-aware times: the extraction window.  Jobs still running or
        pending and events still open at its end are censored there (a named repair); capacity spans
        it.  Default: from the earliest to the latest time in the sacct records.

    Returns
    -------
    records : SchedulerRecords
        ``allocations`` (one row per started job record: ``Start`` is both first assignment and gang
        completion because Slurm allocates atomically; GPUs from ``AllocTRES gres/gpu``; pool =
        ``Partition``; requeued and preempted runs appear as attempts when sacct was run with
        ``--duplicates``), ``queue`` (GPU jobs pending from ``Eligible`` to ``Start``, including jobs
        cancelled while pending and jobs still pending at the window end) and, when a node inventory
        is given, ``capacity`` (GPUs of the partition's nodes; nodes in a down/drain/fail event are
        out of service; a node in two partitions counts in both).
    ledger : Ledger
        Job steps (``123.batch``, ``123.0``) are rejected as non-allocations; CPU-only jobs are
        rejected as not GPU demand; states map through :data:`SLURM_END_STATES` (``CANCELLED by N``
        is ``cancelled``) and an unknown state is kept as ``"unknown"`` and flagged; overlapping
        attempts of one job: the later one is rejected.

    Raises
    ------
    InputError
        An empty file, an unrecognised header, a missing required column, naive times without ``tz``,
        or events without a node inventory.
    """
    win = _window(window)
    book = _Book()
    sacct_parts, event_parts, node_parts = [], [], []
    for path in _paths(path_or_paths):
        text = _read_text(path)
        header = _first_line(text, path)
        kind = _sniff_slurm(header)
        if kind == "sacct":
            sacct_parts.append(_pipe_table(path, text, _SACCT_REQUIRED, book, "sacct --parsable2 output"))
        elif kind == "events":
            event_parts.append(
                _pipe_table(path, text, _EVENT_REQUIRED, book, "sacctmgr show event -P output")
            )
        elif kind == "nodes":
            node_parts.append(_pipe_table(path, text, (), book, "sinfo -N -o '%N|%P|%G' output"))
        else:
            raise InputError(
                "header is not sacct (JobID|...), sacctmgr events (NodeName|TimeStart|...) or "
                f"sinfo nodes (NODELIST|PARTITION|GRES): {header[:120]!r}",
                file=str(path),
                row=1,
            )
    if not sacct_parts:
        raise InputError(
            "no sacct output among the files (a header with JobID|Partition|Submit|...)",
            file=str(_paths(path_or_paths)[0]),
        )
    jobs = _slurm_jobs(sacct_parts, tz, win, book)
    nodes = _slurm_nodes(node_parts, book) if node_parts else None
    if event_parts and nodes is None:
        raise InputError(
            "sacctmgr events need the node inventory (sinfo -N -o '%N|%P|%G') to map nodes to "
            "partitions and GPU counts",
            file=str(event_parts[0]["_file"].iloc[0] if len(event_parts[0]) else ""),
        )
    events = _slurm_events(event_parts, tz, nodes, book) if event_parts else None

    alloc, pending, times = jobs
    if win is None:
        times = times.dropna()
        if times.empty:
            raise InputError(
                "no usable job records (every row was rejected or the file has none): no window",
                file=str(sacct_parts[0]["_file"].iloc[0]) if len(sacct_parts[0]) else None,
            )
        win = (times.min(), max(times.max(), times.min() + pd.Timedelta(seconds=1)))
    notes = {
        "gang_complete": "sacct Start (Slurm allocates atomically: first_assigned = gang_complete)",
        "time_zone": f"naive sacct/sacctmgr times localised to {tz}" if tz else "times carried offsets",
        "window": f"{win[0].isoformat()} .. {win[1].isoformat()}",
        "queue": "GPU jobs pending from Eligible to Start (or to End / the window end if never started)",
        "capacity": (
            "GPUs of each partition's nodes (sinfo), minus nodes in down/drain/fail events"
            if nodes is not None
            else "no node inventory given: capacity not known"
        ),
    }
    source = ",".join(str(p) for p in _paths(path_or_paths))
    records = _slurm_finish(alloc, pending, events, nodes, win, notes, source)
    return records, book.settle()


def _slurm_jobs(
    parts: list[pd.DataFrame], tz: str | None, win: tuple[pd.Timestamp, pd.Timestamp] | None, book: _Book
):
    frames = []
    for frame in parts:
        if frame.empty:
            continue
        file = str(frame["_file"].iloc[0])
        rows = frame["_line"].to_numpy()
        for opt in ("Eligible", "ReqTRES", "Priority", "NodeList"):
            if opt not in frame.columns:
                frame[opt] = ""
        times, rejected = _parse_time_columns(
            frame,
            ["Submit", "Eligible", "Start", "End"],
            tz=tz,
            file=file,
            rows=rows,
            book=book,
            format_hint="sacct",
        )
        for c in ("Submit", "Eligible", "Start", "End"):
            frame[c + "_t"] = times.parsed[c]
        frame["_rejected"] = rejected
        frames.append(frame)
    cols_keep = [
        "_file",
        "_line",
        "JobID",
        "Partition",
        "State",
        "AllocTRES",
        "ReqTRES",
        "Priority",
        "NodeList",
        "Submit",
        "Eligible",
        "Start",
        "End",
        "Submit_t",
        "Eligible_t",
        "Start_t",
        "End_t",
        "_rejected",
    ]
    if not frames:
        empty_alloc = pd.DataFrame(columns=[*cols_keep, "devices", "state"])
        return empty_alloc, pd.DataFrame(columns=["pool", "start", "end", "devices"]), pd.Series(dtype=_TIME)
    df = pd.concat([f[cols_keep] for f in frames], ignore_index=True)
    alive = ~df["_rejected"].to_numpy()

    files_arr = df["_file"].to_numpy(dtype=object)
    lines_arr = df["_line"].to_numpy(dtype=np.int64)

    def emit(add, m: np.ndarray, field_: str | None, reason: object) -> None:
        if not m.any():
            return
        r = np.asarray(reason, dtype=object)[m] if isinstance(reason, (np.ndarray, pd.Series)) else reason
        f_m, l_m = files_arr[m], lines_arr[m]
        for file in pd.unique(f_m):
            sel = f_m == file
            add(str(file), l_m[sel], field_, r if isinstance(r, str) else r[sel])

    def reject(mask: np.ndarray, field_: str | None, reason: object) -> None:
        nonlocal alive
        m = np.asarray(mask, dtype=bool) & alive
        emit(book.reject, m, field_, reason)
        alive = alive & ~m

    def repair(mask: np.ndarray, field_: str | None, reason: object) -> None:
        emit(book.repair, np.asarray(mask, dtype=bool) & alive, field_, reason)

    # duplicates: the same record printed twice (overlapping sacct dumps)
    raw = ["JobID", "Partition", "State", "AllocTRES", "ReqTRES", "Submit", "Eligible", "Start", "End"]
    dup = df.duplicated(subset=raw, keep="first").to_numpy()
    first_line = df.groupby(raw, sort=False)["_line"].transform("first").to_numpy()
    reject(dup, None, "duplicate row (same as line " + pd.Series(first_line, dtype="str") + ")")
    # job steps are not allocations
    step = df["JobID"].str.contains(".", regex=False).to_numpy()
    reject(step, "JobID", "job step, not an allocation")
    job_id = df["JobID"].astype(str)
    state_word = df["State"].fillna("").astype(str).str.split(" ").str[0].str.upper()
    unknown_state = (~state_word.isin(SLURM_STATES)).to_numpy()
    reject(state_word.eq("").to_numpy(), "State", "empty State")
    repair(
        unknown_state & state_word.ne("").to_numpy(),
        "State",
        "flagged: unknown job state '" + df["State"].astype("str") + "': end_state 'unknown'",
    )
    submit, eligible, start, end = df["Submit_t"], df["Eligible_t"], df["Start_t"], df["End_t"]
    devices = _tres_gpus(df["AllocTRES"])
    requested = _tres_gpus(df["ReqTRES"])
    started = (start.notna() & df["AllocTRES"].fillna("").str.strip().ne("")).to_numpy()
    reject(submit.isna().to_numpy(), "Submit", "no Submit time")

    # --- allocations (started records)
    reject(
        started & ~(devices > 0).to_numpy(),
        "AllocTRES",
        "no gres/gpu in AllocTRES: a CPU-only allocation, not GPU capacity",
    )
    reject(started & (submit > start).to_numpy(), "Submit", "Submit after Start")
    reject(started & (end < start).to_numpy(), "End", "release (End) before gang completion (Start)")
    open_end = started & end.isna().to_numpy()
    is_open_state = state_word.isin(_SLURM_OPEN).to_numpy() | unknown_state
    reject(
        open_end & ~is_open_state,
        "End",
        "state " + state_word + " has no End time",
    )
    # --- never-started records: jobs that waited and left the queue, or still wait
    never = (~started) & alive
    req_dev = requested.fillna(devices)
    reject(
        never & ~(req_dev > 0).to_numpy(), "ReqTRES", "never started and no GPUs requested: not GPU demand"
    )
    reject(
        never & eligible.isna().to_numpy(),
        "Eligible",
        "never started and never eligible (a held job): no queue time",
    )
    reject(never & (end < submit).to_numpy(), "End", "left the queue (End) before it was submitted")
    never = (~started) & alive
    multi = df["Partition"].str.contains(",", regex=False).to_numpy()
    repair(
        never & multi,
        "Partition",
        "pending in several partitions '" + df["Partition"].astype("str") + "': counted in the first",
    )
    # times seen, for the default window; still-open rows are censored at its end
    times = pd.concat([submit[alive], eligible[alive], start[alive], end[alive]])
    win_end = win[1] if win is not None else times.max()
    censor = open_end & alive
    reject(censor & (start > win_end).to_numpy(), "Start", "still running but starts after the window end")
    censor = open_end & alive
    repair(
        censor, "End", f"still running at the end of the record: release censored at {win_end.isoformat()}"
    )
    waiting = never & end.isna().to_numpy()
    reject(
        waiting & (submit > win_end).to_numpy(), "Submit", "still pending but submitted after the window end"
    )
    waiting = never & end.isna().to_numpy() & alive
    repair(
        waiting,
        "End",
        f"still pending at the end of the record: leaves the queue at {win_end.isoformat()} (censored)",
    )
    overl = np.zeros(len(df), dtype=bool)
    started_alive = started & alive
    if started_alive.any():
        sub = df.index[started_alive]
        rel = end[sub].where(end[sub].notna(), win_end)
        overl[sub] = _overlapping(job_id[sub], start[sub], rel)
    reject(overl, "Start", "overlaps an earlier attempt of the same job (starts before it was released)")

    keep = alive & (started | never)
    st = pd.Series(started, index=df.index)
    release = end.where(end.notna(), win_end)
    end_state = state_word.map(SLURM_END_STATES).fillna("unknown")
    end_state = end_state.where(~pd.Series(censor, index=df.index), "running")
    end_state = end_state.where(~pd.Series(waiting, index=df.index), _PENDING)
    nat = pd.Series(pd.NaT, index=df.index, dtype=_TIME)
    k = pd.Series(keep, index=df.index)
    alloc = pd.DataFrame(
        {
            "job_id": job_id[k].to_numpy(),
            "attempt": 0,
            "pool": df["Partition"].str.split(",").str[0][k].to_numpy(),
            "devices": devices.where(st, 0.0)[k].fillna(0).round().astype("int64").to_numpy(),
            "submit": submit[k].reset_index(drop=True),
            "first_assigned": start.where(st, nat)[k].reset_index(drop=True),
            "gang_complete": start.where(st, nat)[k].reset_index(drop=True),
            "release": release[k].reset_index(drop=True),
            "priority": pd.to_numeric(df["Priority"][k], errors="coerce").to_numpy(dtype=float),
            "elastic": False,
            "end_state": end_state[k].to_numpy(dtype=object),
            "requested_devices": req_dev[k].fillna(0).round().astype("int64").to_numpy(),
        }
    )
    # --- pending intervals (queue): Eligible -> Start, or Eligible -> leaving the queue
    q_start = eligible.where(eligible.notna(), submit)
    q_end = start.where(st, release)
    pending = pd.DataFrame(
        {
            "pool": alloc["pool"],
            "start": q_start[k].reset_index(drop=True),
            "end": q_end[k].reset_index(drop=True),
            "devices": alloc["requested_devices"],
        }
    )
    return alloc, pending, times


def _slurm_nodes(parts: list[pd.DataFrame], book: _Book) -> pd.DataFrame:
    frames = []
    for frame in parts:
        if frame.empty:
            continue
        file = str(frame["_file"].iloc[0])
        lower = {c.lower(): c for c in frame.columns}
        node_col = lower.get("nodelist") or lower.get("hostnames")
        part_col, gres_col = lower["partition"], lower["gres"]
        gpus = _gres_gpus(frame[gres_col])
        rows = frame["_line"].to_numpy()
        no_gpu = ~(gpus > 0).to_numpy()
        book.reject(file, rows[no_gpu], gres_col, "node has no GPUs in GRES: not GPU capacity")
        expanded, bad_rows = [], []
        for line, expr, part, g in zip(
            rows[~no_gpu], frame[node_col][~no_gpu], frame[part_col][~no_gpu], gpus[~no_gpu], strict=True
        ):
            try:
                names = expand_hostlist(str(expr))
            except ValueError as exc:
                bad_rows.append((line, str(exc)))
                continue
            for name in names:
                expanded.append((file, line, name, str(part).rstrip("*"), float(g)))
        for line, why in bad_rows:
            book.reject(file, line, node_col, why)
        frames.append(pd.DataFrame(expanded, columns=["file", "line", "node", "pool", "gpus"]))
    nodes = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["file", "line", "node", "pool", "gpus"])
    )
    dup = nodes.duplicated(["node", "pool"], keep="first").to_numpy()
    for file, sub in nodes[dup].groupby("file", sort=False):
        book.reject(str(file), sub["line"].to_numpy(), None, "node listed twice in the same partition")
    nodes = nodes[~dup]
    conflict = nodes.groupby("node")["gpus"].transform("nunique").gt(1).to_numpy()
    for file, sub in nodes[conflict].groupby("file", sort=False):
        book.reject(str(file), sub["line"].to_numpy(), None, "node listed with different GPU counts")
    return nodes[~conflict].reset_index(drop=True)


def _slurm_events(
    parts: list[pd.DataFrame], tz: str | None, nodes: pd.DataFrame, book: _Book
) -> pd.DataFrame:
    out = []
    known = set(nodes["node"])
    for frame in parts:
        if frame.empty:
            continue
        file = str(frame["_file"].iloc[0])
        rows = frame["_line"].to_numpy()
        times, rejected = _parse_time_columns(
            frame, ["TimeStart", "TimeEnd"], tz=tz, file=file, rows=rows, book=book, format_hint="sacctmgr"
        )
        start, end = times.parsed["TimeStart"], times.parsed["TimeEnd"]
        alive = ~rejected
        node_expr = frame["NodeName"].fillna("").astype(str).str.strip()
        cluster = (node_expr == "").to_numpy() & alive
        book.reject(
            file, rows[cluster], "NodeName", "cluster-level event (no node): not an out-of-service interval"
        )
        alive &= ~cluster
        no_start = start.isna().to_numpy() & alive
        book.reject(file, rows[no_start], "TimeStart", "event has no start time")
        alive &= ~no_start
        state = frame["State"].fillna("").astype(str).str.upper()
        in_service = ~state.str.contains(_OUT_OF_SERVICE, regex=True).to_numpy() & alive
        book.reject(
            file,
            rows[in_service],
            "State",
            ("state '" + state + "' does not take the node out of service").to_numpy(dtype=object)[
                in_service
            ],
        )
        alive &= ~in_service
        backwards = (end < start).to_numpy() & alive
        book.reject(file, rows[backwards], "TimeEnd", "event ends before it starts")
        alive &= ~backwards
        open_end = end.isna().to_numpy() & alive
        book.repair(file, rows[open_end], "TimeEnd", "event still open: out of service until the window end")
        dups = (
            frame[["NodeName", "TimeStart", "TimeEnd", "State"]].duplicated(keep="first").to_numpy() & alive
        )
        book.reject(file, rows[dups], None, "duplicate event row")
        alive &= ~dups
        for i in np.flatnonzero(alive):
            try:
                names = expand_hostlist(node_expr.iloc[i])
            except ValueError as exc:
                book.reject(file, rows[i], "NodeName", str(exc))
                continue
            unknown = [n for n in names if n not in known]
            if unknown:
                book.reject(
                    file,
                    rows[i],
                    "NodeName",
                    f"node(s) {', '.join(unknown)} not in the node inventory (sinfo)",
                )
                continue
            for name in names:
                out.append((name, start.iloc[i], end.iloc[i]))
    return pd.DataFrame(out, columns=["node", "start", "end"]).astype({"start": _TIME, "end": _TIME})


def _slurm_finish(
    alloc: pd.DataFrame,
    pending: pd.DataFrame,
    events: pd.DataFrame | None,
    nodes: pd.DataFrame | None,
    win: tuple[pd.Timestamp, pd.Timestamp],
    notes: dict[str, str],
    source: str,
) -> SchedulerRecords:
    allocations = (
        _allocations_frame(alloc) if len(alloc) else _allocations_frame({c: [] for c in ALLOCATION_COLUMNS})
    )
    pend = pending.copy()
    if len(pend):
        pend["end"] = pend["end"].clip(upper=win[1])
    queue = queue_from_pending(pend["pool"], pend["start"], pend["end"], pend["devices"])
    capacity = None
    if nodes is not None:
        installed = nodes.groupby("pool")["gpus"].sum()
        if events is not None and len(events):
            ev = events.copy()
            ev["end"] = ev["end"].fillna(win[1])
            ev = _merge_intervals(ev, "node")
            ev = ev.merge(nodes[["node", "pool", "gpus"]], on="node").rename(columns={"gpus": "devices"})
        else:
            ev = pd.DataFrame(columns=["pool", "start", "end", "devices"])
        capacity = _capacity_from_out_of_service(installed, ev, win)
    return _records(source, notes, allocations=allocations, queue=queue, capacity=capacity)


def _merge_intervals(iv: pd.DataFrame, key: str) -> pd.DataFrame:
    """Union overlapping intervals per key (so a node down and draining at once counts once)."""
    iv = iv.sort_values([key, "start"], kind="stable").reset_index(drop=True)
    run_end = iv.groupby(key)["end"].cummax()
    prev_end = run_end.groupby(iv[key]).shift(1)
    new = (iv["start"] > prev_end) | prev_end.isna()
    grp = new.cumsum()
    return (
        iv.groupby([iv[key], grp], sort=False)
        .agg(start=("start", "min"), end=("end", "max"))
        .reset_index(level=0)
        .reset_index(drop=True)
    )


# ================================================================================================
# Kubernetes objects: shared parsing for Kueue and Volcano
# ================================================================================================


def _load_objects(path: Path, book: _Book) -> list[tuple[int, object, str]]:
    """Return (row, object, canonical text) for each object in a YAML/JSON/JSON-lines file.

    A ``kind: *List`` document contributes its items, each counted as a row.  JSON-lines files count
    rows by line; a line that is not JSON is rejected (a truncated export).
    """
    import yaml  # a dependency of the scenario files already

    file = str(path)
    text = _read_text(path)
    if not text.strip():
        raise InputError(
            "empty file: expected Kubernetes objects (YAML, JSON or JSON lines)", file=file, row=1
        )
    docs: list[tuple[int, object]] = []
    stripped = text.lstrip()
    if path.name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        lines = text.splitlines()
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            book.read += 1
            try:
                docs.append((i, json.loads(line)))
            except json.JSONDecodeError as exc:
                book.reject(file, i, None, f"not valid JSON ({exc.msg}); a truncated line?")
        return [(r, o, json.dumps(o, sort_keys=True)) for r, o in docs]
    try:
        if stripped.startswith(("{", "[")):
            loaded = [json.loads(text)]
        else:
            loaded = [d for d in yaml.safe_load_all(text) if d is not None]
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON ({exc.msg}); a truncated file?", file=file, row=exc.lineno) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(
            f"malformed YAML ({getattr(exc, 'problem', exc)}); a truncated file?",
            file=file,
            row=(mark.line + 1) if mark is not None else None,
        ) from exc
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
            book.read += 1
            docs.append((row, item))
    return [(r, o, json.dumps(o, sort_keys=True, default=str)) for r, o in docs]


def _quantity(value: object) -> float:
    """Return a Kubernetes quantity of a countable resource ('8', 8, '500m') as a float, NaN if unreadable."""
    if value is None:
        return float("nan")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    s = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(m|k)?", s)
    if m is None:
        return float("nan")
    scale = {"m": 1e-3, "k": 1e3, None: 1.0}[m.group(2)]
    return float(m.group(1)) * scale


def _get(obj: object, *keys: str) -> object:
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _attempts_from_events(
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


class _Verdict:
    """Per-attempt outcome (kept / repaired / rejected) with the reasons, written to rows at the end."""

    def __init__(self, index: pd.Index) -> None:
        self.status = pd.Series("kept", index=index, dtype=object)
        self.reason = pd.Series("", index=index, dtype=object)

    def reject(self, mask: pd.Series, why: str) -> None:
        m = mask.fillna(False).astype(bool) & (self.status != "rejected")
        self.status[m] = "rejected"
        self.reason[m] = why

    def repair(self, mask: pd.Series, why: str) -> None:
        m = mask.fillna(False).astype(bool) & (self.status != "rejected")
        joined = np.where(self.reason[m] != "", self.reason[m] + "; " + why, why)
        self.reason[m] = joined
        self.status[m] = "repaired"

    def write(self, att: pd.DataFrame, ev: pd.DataFrame, book: _Book) -> None:
        """Primary row of each attempt carries its entry; other rows of a rejected attempt point at it."""
        flagged = (self.status != "kept").to_numpy()
        for prim, st, why in zip(
            att["primary_row"][flagged], self.status[flagged], self.reason[flagged], strict=True
        ):
            f, r = prim.split("\x00")
            (book.reject if st == "rejected" else book.repair)(f, int(r), None, why)
        rej = att.loc[self.status == "rejected", ["key", "attempt", "primary_row"]].assign(
            _why=self.reason[self.status == "rejected"].to_numpy()
        )
        if len(rej):
            other = ev.merge(rej, on=["key", "attempt"])
            other = other[other["row"] != other["primary_row"]].drop_duplicates("row")
            for rid, prim, why in other[["row", "primary_row", "_why"]].itertuples(index=False, name=None):
                f, r = rid.split("\x00")
                book.reject(
                    f, int(r), None, f"part of an attempt rejected at row {prim.split(chr(0))[1]}: {why}"
                )


def _requeue_submit(att: pd.DataFrame) -> pd.Series:
    """Return each attempt's submit time.

    It is the object's creation, or the release of the previous attempt of the same object when that
    one was evicted (the attempt re-entered the queue then).
    """
    a = att.sort_values(["key", "first_assigned"], kind="stable")
    prev_rel = a.groupby("key")["release"].shift(1)
    prev_evicted = a.groupby("key")["end_kind"].shift(1).eq("evicted")
    sub = a["submit"].where(~(prev_evicted & prev_rel.notna()), prev_rel)
    return sub.reindex(att.index)


# ================================================================================================
# Kueue Workloads
# ================================================================================================

_KUEUE_END_RANK = {"Finished": 0, "Preempted": 1, "Evicted": 2, "Admitted": 3}
#: Finished-condition reasons -> canonical end state.
KUEUE_FINISHED_STATES: dict[str, str] = {
    "Succeeded": "completed",
    "Failed": "failed",
    "WorkloadSliceReplaced": "completed",
    "FailedToStart": "failed",
    "OwnerNotFound": "cancelled",
    "OutOfSync": "cancelled",
}
#: Evicted-condition reasons -> canonical end state (the Preempted condition is always ``preempted``).
KUEUE_EVICTED_STATES: dict[str, str] = {
    "Preempted": "preempted",
    "PodsReadyTimeout": "failed",
    "NodeFailures": "node_fail",
    "ClusterQueueStopped": "cancelled",
    "LocalQueueStopped": "cancelled",
    "Deactivated": "cancelled",
    "InactiveWorkload": "cancelled",
    "DeactivatedDueToAdmissionCheck": "cancelled",
    "AdmissionCheck": "cancelled",
}


def read_kueue(
    path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    pool_by: str = "cluster_queue",
    gpu_resource: str = _GPU,
    window: Sequence[object] | None = None,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Kueue ``Workload`` objects (and ``ClusterQueue`` / ``LocalQueue`` objects) into tables.

    Accepts YAML (one or many documents, or a ``kind: List``) and JSON (an object, a ``List``, or JSON
    lines).  Several snapshots of one Workload (an exporter saving it at each change) are merged: the
    condition transitions they show are collected once each, so an eviction seen in a later snapshot
    closes an attempt whose admission only an earlier snapshot shows.

    Parameters
    ----------
    path_or_paths
        One file or several.
    pool_by
        ``"cluster_queue"`` (``status.admission.clusterQueue``, default) or ``"flavor"`` (the
        ResourceFlavor assigned to ``gpu_resource``).  With ``"flavor"`` no queue table is built and
        never-admitted Workloads are left out (a pending Workload has no flavor yet).
    gpu_resource
        Resource name counted as devices.
    window
        ``(start, end)`` timezone-aware; attempts still holding and Workloads still pending at its end
        are censored there (named repairs).  Default: the earliest to the latest time in the objects.

    Returns
    -------
    records : SchedulerRecords
        ``allocations``: one row per admission (``Admitted=True`` -> first_assigned; ``PodsReady=True``
        -> gang_complete; the first of ``Finished`` / ``Evicted`` / ``Preempted`` / ``Admitted=False``
        -> release, with the end state mapped through :data:`KUEUE_FINISHED_STATES` and
        :data:`KUEUE_EVICTED_STATES`), plus one row per Workload never admitted (no first_assigned;
        release when it left the queue).  Devices come from ``status.admission.podSetAssignments[]
        .resourceUsage``; job_id is ``namespace/owner`` so the elastic slices of one job share it;
        elastic when the Workload carries ``kueue.x-k8s.io/elastic-job: "true"``; an attempt after an
        eviction is submitted at the eviction.  ``queue``: waits from submit to gang completion.
        ``capacity``: ClusterQueue ``nominalQuota`` of ``gpu_resource`` over the window (a quota, not
        physical nodes; borrowing is not modelled), when ClusterQueue objects are present.
    ledger : Ledger
        Rows are objects.  A rigid Workload with no PodsReady condition at all gets gang_complete =
        admission (admitted at its full requested size; flagged); an elastic one is rejected (its
        complete time cannot be inferred); PodsReady never True before release means the gang never
        completed: gang_complete = release (the whole hold was partial; a named repair).
    """
    if pool_by not in ("cluster_queue", "flavor"):
        raise DomainError(f"pool_by must be 'cluster_queue' or 'flavor'; got {pool_by!r}")
    win = _window(window)
    book = _Book()
    wl_rows, cond_rows, cq_rows, lq_map = [], [], [], {}
    paths = _paths(path_or_paths)
    for path in paths:
        file = str(path)
        seen: dict[str, int] = {}
        for row, obj, canon in _load_objects(path, book):
            if canon in seen:
                book.reject(file, row, None, f"duplicate object (same as row {seen[canon]})")
                continue
            seen[canon] = row
            kind = _get(obj, "kind")
            if kind == "ClusterQueue":
                cq_rows.append((file, row, obj))
            elif kind == "LocalQueue":
                ns, name = _get(obj, "metadata", "namespace"), _get(obj, "metadata", "name")
                cq = _get(obj, "spec", "clusterQueue")
                if not (name and cq):
                    book.reject(
                        file, row, "spec.clusterQueue", "LocalQueue without name or spec.clusterQueue"
                    )
                    continue
                lq_map[(ns or "default", name)] = cq
            elif kind == "Workload":
                _kueue_workload(file, row, obj, gpu_resource, wl_rows, cond_rows, book)
            else:
                book.reject(file, row, "kind", f"kind {kind!r} is not Workload, ClusterQueue or LocalQueue")
    if not wl_rows:
        raise InputError("no usable Workload objects in the input", file=str(paths[0]))
    wl = pd.DataFrame(wl_rows)
    cond = pd.DataFrame(cond_rows, columns=["file", "row", "key", "type", "status", "time", "reason"])
    records = _kueue_tables(
        wl, cond, cq_rows, lq_map, pool_by, gpu_resource, win, book, ",".join(str(p) for p in paths)
    )
    return records, book.settle()


def _kueue_workload(
    file: str, row: int, obj: dict, gpu: str, wl_rows: list, cond_rows: list, book: _Book
) -> None:
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "default", meta.get("name")
    created = meta.get("creationTimestamp")
    if not name:
        book.reject(file, row, "metadata.name", "Workload without metadata.name")
        return
    if not created:
        book.reject(file, row, "metadata.creationTimestamp", "Workload without metadata.creationTimestamp")
        return
    owners = meta.get("ownerReferences") or []
    owner = owners[0].get("name") if owners and isinstance(owners[0], dict) else None
    annotations = meta.get("annotations") or {}
    elastic = str(annotations.get("kueue.x-k8s.io/elastic-job", "")).lower() == "true"
    requested = 0.0
    for ps in _get(obj, "spec", "podSets") or []:
        count = _quantity(ps.get("count", 1))
        per_pod = 0.0
        for c in _get(ps, "template", "spec", "containers") or []:
            res = c.get("resources") or {}
            q = _quantity((res.get("requests") or {}).get(gpu, (res.get("limits") or {}).get(gpu)))
            per_pod += 0.0 if np.isnan(q) else q
        requested += (0.0 if np.isnan(count) else count) * per_pod
    adm = _get(obj, "status", "admission") or {}
    devices, flavor = 0.0, None
    for psa in adm.get("podSetAssignments") or []:
        q = _quantity((psa.get("resourceUsage") or {}).get(gpu))
        devices += 0.0 if np.isnan(q) else q
        flavor = flavor or (psa.get("flavors") or {}).get(gpu)
    key = meta.get("uid") or f"{ns}/{name}"
    prio = _get(obj, "spec", "priority")
    wl_rows.append(
        {
            "file": file,
            "row": row,
            "key": key,
            "job_id": f"{ns}/{owner or name}",
            "namespace": ns,
            "queue_name": _get(obj, "spec", "queueName"),
            "created": str(created),
            "elastic": elastic,
            "requested": requested,
            "devices": devices if adm else np.nan,
            "cluster_queue": adm.get("clusterQueue"),
            "flavor": flavor,
            "priority": float(prio)
            if isinstance(prio, (int, float)) and not isinstance(prio, bool)
            else np.nan,
        }
    )
    for c in _get(obj, "status", "conditions") or []:
        if isinstance(c, dict):
            cond_rows.append(
                (
                    file,
                    row,
                    key,
                    c.get("type"),
                    str(c.get("status")),
                    c.get("lastTransitionTime"),
                    c.get("reason") or "",
                )
            )


def _row_ids(df: pd.DataFrame) -> pd.Series:
    return df["file"].astype(str) + "\x00" + df["row"].astype(str)


def _kueue_tables(
    wl: pd.DataFrame,
    cond: pd.DataFrame,
    cq_rows: list,
    lq_map: dict,
    pool_by: str,
    gpu: str,
    win: tuple[pd.Timestamp, pd.Timestamp] | None,
    book: _Book,
    source: str,
) -> SchedulerRecords:
    # --- times (RFC 3339 required); an object with a bad time is rejected whole
    wl = wl.reset_index(drop=True)
    wl["row_id"] = _row_ids(wl)
    bad: set[str] = set()
    wl["submit"] = pd.Series(pd.NaT, index=wl.index, dtype=_TIME)
    for file, sub in wl.groupby("file", sort=False):
        t, rej = _parse_time_columns(
            sub[["created"]].rename(columns={"created": "metadata.creationTimestamp"}),
            ["metadata.creationTimestamp"],
            tz=None,
            file=str(file),
            rows=sub["row"].to_numpy(),
            book=book,
            format_hint="Kubernetes",
            naive_allowed=False,
        )
        wl.loc[sub.index, "submit"] = t.parsed["metadata.creationTimestamp"]
        bad |= set(sub["row_id"][rej])
    cond = cond.reset_index(drop=True)
    cond["row_id"] = _row_ids(cond)
    cond["t"] = pd.Series(pd.NaT, index=cond.index, dtype=_TIME)
    for file, sub in cond.groupby("file", sort=False):
        rows = sub["row"].to_numpy()
        t, rej = _parse_time_columns(
            sub[["time"]].astype(str).rename(columns={"time": _LTT}),
            [_LTT],
            tz=None,
            file=str(file),
            rows=rows,
            book=book,
            format_hint="Kubernetes",
            naive_allowed=False,
        )
        cond.loc[sub.index, "t"] = t.parsed[_LTT]
        miss = t.missing[_LTT] & ~rej
        book.reject(
            str(file),
            rows[miss],
            "status.conditions.lastTransitionTime",
            "condition without lastTransitionTime",
        )
        bad |= set(sub["row_id"][rej | miss])
    wl = wl[~wl["row_id"].isin(bad)].reset_index(drop=True)
    cond = cond[~cond["row_id"].isin(bad)].reset_index(drop=True)
    if wl.empty:
        raise InputError("every Workload object was rejected; see the ledger", file=source.split(",")[0])

    # --- window
    times = pd.concat([wl["submit"], cond["t"]]).dropna()
    if win is None:
        win = (times.min(), max(times.max(), times.min() + pd.Timedelta(seconds=1)))
    win_end = win[1]

    # --- transition events
    typ, reason = cond["type"].astype(str), cond["reason"].astype(str)
    is_true = cond["status"].str.lower() == "true"
    is_false = cond["status"].str.lower() == "false"
    fin = (typ == "Finished") & is_true
    pre = (typ == "Preempted") & is_true
    evi = (typ == "Evicted") & is_true
    adm_false = (typ == "Admitted") & is_false
    end_state = np.select(
        [fin, pre, evi],
        [reason.map(KUEUE_FINISHED_STATES), "preempted", reason.map(KUEUE_EVICTED_STATES)],
        default="unknown",
    )
    end_state = pd.Series(end_state, index=cond.index).fillna("unknown").replace({"nan": "unknown"})
    ev = pd.DataFrame(
        {
            "key": cond["key"],
            "row": cond["row_id"],
            "time": cond["t"],
            "kind": np.select(
                [(typ == "Admitted") & is_true, (typ == "PodsReady") & is_true, fin | pre | evi | adm_false],
                ["start", "gang", "end"],
                default="",
            ),
            "end_state": end_state,
            "end_kind": np.where(fin, "finished", "evicted"),
            "raw_end": typ + ":" + reason,
            "rank": typ.map(_KUEUE_END_RANK).fillna(9).astype(int),
        }
    )
    ev = ev[ev["kind"] != ""]
    att, ev = _attempts_from_events(ev, ("end_state", "end_kind", "raw_end"))
    podsready_seen = set(cond.loc[typ == "PodsReady", "key"])
    info = wl.drop(columns=["key"]).rename(columns={"row_id": "primary_row"})
    att = att.merge(info, on="primary_row", how="left")
    att["pool"] = att["cluster_queue"] if pool_by == "cluster_queue" else att["flavor"]

    v = _Verdict(att.index)
    v.reject(~(att["devices"] > 0), f"no {gpu} in status.admission.podSetAssignments: not GPU capacity")
    v.reject(att["pool"].isna(), "admitted Workload without status.admission.clusterQueue (or flavor)")
    no_gang = att["gang_complete"].isna()
    has_pr = att["key"].isin(podsready_seen)
    ended = att["release"].notna()
    v.reject(
        no_gang & ~has_pr & att["elastic"],
        "elastic Workload with no PodsReady condition: the time its gang became complete cannot be inferred",
    )
    partial_adm = att["devices"] < att["requested"]
    v.reject(
        no_gang & ~has_pr & partial_adm,
        "no PodsReady condition and admitted below the requested size: gang completion cannot be inferred",
    )
    infer = no_gang & ~has_pr & (v.status != "rejected")
    v.repair(
        infer,
        "flagged: no PodsReady condition; gang_complete inferred at admission (a rigid Workload "
        "admitted at its full requested size)",
    )
    att.loc[infer, "gang_complete"] = att.loc[infer, "first_assigned"]
    never = att["gang_complete"].isna() & ended & (v.status != "rejected")
    v.repair(
        never,
        "gang never completed (PodsReady never True before release): gang_complete set to release, "
        "the whole hold was partial",
    )
    att.loc[never, "gang_complete"] = att.loc[never, "release"]
    v.reject(att["release"] < att["gang_complete"], "released before its gang completed")
    still = ~ended & (v.status != "rejected")
    v.reject(still & (att["first_assigned"] > win_end), "admitted after the window end and still open")
    still = ~ended & (v.status != "rejected")
    v.repair(still, f"still holding at the end of the record: release censored at {win_end.isoformat()}")
    att.loc[still, "release"] = win_end
    att.loc[still, "end_state"] = "running"
    att.loc[still, "end_kind"] = "open"
    open_gang = still & att["gang_complete"].isna()
    v.repair(open_gang, "gang not complete at the end of the record: gang_complete set to the window end")
    att.loc[open_gang, "gang_complete"] = win_end
    unknown_end = att["end_state"].eq("unknown") & ended
    v.repair(unknown_end, "flagged: end reason not recognised; end_state 'unknown'")
    ok = v.status != "rejected"
    if ok.any():
        sub = att[ok]
        el = sub["elastic"].to_numpy()
        ov = _overlapping(
            sub["job_id"], sub["gang_complete"].where(el, sub["first_assigned"]), sub["release"]
        )
        v.reject(
            pd.Series(ov, index=sub.index).reindex(att.index, fill_value=False),
            "overlaps an earlier attempt of the same job (admitted before it was released)",
        )
    v.write(att, ev, book)
    keep = att[v.status != "rejected"].copy()
    keep["submit"] = _requeue_submit(keep)

    # --- never-admitted Workloads, waits, queue
    first = wl.sort_values(["file", "row"]).groupby("key", as_index=False).last()
    learned = first.dropna(subset=["cluster_queue"]).drop_duplicates(["namespace", "queue_name"])
    lq = {
        **dict(
            zip(
                zip(learned["namespace"], learned["queue_name"], strict=True),
                learned["cluster_queue"],
                strict=True,
            )
        ),
        **lq_map,
    }
    lq_frame = pd.DataFrame(
        [(n, q, c) for (n, q), c in lq.items()], columns=["namespace", "queue_name", "_cq"], dtype=object
    )
    mapped = first[["namespace", "queue_name"]].merge(lq_frame, on=["namespace", "queue_name"], how="left")[
        "_cq"
    ]
    mapped.index = first.index
    first["pool"] = (
        first["cluster_queue"].where(first["cluster_queue"].notna(), mapped)
        if pool_by == "cluster_queue"
        else first["flavor"]
    )
    never_adm = first[~first["key"].isin(att["key"])].copy()
    orphan = ev[(ev["attempt"] < 0) & (ev["kind"] == "end")].groupby("key").first()
    never_adm["release"] = (
        pd.Series(orphan["time"].reindex(never_adm["key"]).to_numpy(), index=never_adm.index, dtype=_TIME)
        if len(orphan)
        else pd.Series(pd.NaT, index=never_adm.index, dtype=_TIME)
    )
    never_adm["end_state"] = pd.Series(
        orphan["end_state"].reindex(never_adm["key"]).to_numpy(dtype=object) if len(orphan) else None,
        index=never_adm.index,
        dtype=object,
    )
    waiting = never_adm["release"].isna()
    rid = never_adm["row_id"]
    no_pool = never_adm["pool"].isna()
    for r in rid[no_pool]:
        f, n = r.split("\x00")
        book.reject(
            f,
            int(n),
            "spec.queueName",
            "Workload never admitted and its LocalQueue maps to no known ClusterQueue: its wait has no pool"
            if pool_by == "cluster_queue"
            else "Workload never admitted: it has no flavor, so no pool when pool_by='flavor'",
        )
    late = waiting & (never_adm["submit"] > win_end) & ~no_pool
    for r in rid[late]:
        f, n = r.split("\x00")
        book.reject(f, int(n), "metadata.creationTimestamp", "still pending but created after the window end")
    never_adm = never_adm[~no_pool & ~late]
    waiting = never_adm["release"].isna()
    for r in never_adm["row_id"][waiting]:
        f, n = r.split("\x00")
        book.repair(
            f,
            int(n),
            None,
            f"still pending at the end of the record: leaves the queue at {win_end.isoformat()} (censored)",
        )
    never_adm.loc[waiting, "release"] = win_end
    never_adm.loc[waiting, "end_state"] = _PENDING
    never_adm["end_state"] = never_adm["end_state"].fillna("unknown")
    req_never = never_adm["requested"].where(never_adm["requested"] > 0, 0.0)
    allocations = _allocations_frame(
        {
            "job_id": pd.concat([keep["job_id"], never_adm["job_id"]], ignore_index=True),
            "attempt": 0,
            "pool": pd.concat([keep["pool"], never_adm["pool"]], ignore_index=True),
            "devices": pd.concat([keep["devices"], pd.Series(0.0, index=never_adm.index)], ignore_index=True)
            .round()
            .astype("int64"),
            "submit": pd.concat([keep["submit"], never_adm["submit"]], ignore_index=True),
            "first_assigned": pd.concat(
                [keep["first_assigned"], pd.Series(pd.NaT, index=never_adm.index, dtype=_TIME)],
                ignore_index=True,
            ),
            "gang_complete": pd.concat(
                [keep["gang_complete"], pd.Series(pd.NaT, index=never_adm.index, dtype=_TIME)],
                ignore_index=True,
            ),
            "release": pd.concat([keep["release"], never_adm["release"]], ignore_index=True),
            "priority": pd.concat([keep["priority"], never_adm["priority"]], ignore_index=True),
            "elastic": pd.concat([keep["elastic"], never_adm["elastic"]], ignore_index=True).astype(bool),
            "end_state": pd.concat([keep["end_state"], never_adm["end_state"]], ignore_index=True),
            "requested_devices": pd.concat(
                [keep["requested"].where(keep["requested"] > 0, keep["devices"]), req_never],
                ignore_index=True,
            )
            .round()
            .astype("int64"),
        }
    )
    queue = None
    if pool_by == "cluster_queue":
        a = allocations
        end = a["gang_complete"].where(a["gang_complete"].notna(), a["release"])
        queue = queue_from_pending(a["pool"], a["submit"], end.clip(upper=win_end), a["requested_devices"])
    capacity = _kueue_capacity(cq_rows, pool_by, gpu, win, book) if cq_rows else None
    notes = {
        "gang_complete": "Workload condition PodsReady=True (Admitted=True marks the first assignment)",
        "time_zone": "RFC 3339 times as written by the API server",
        "window": f"{win[0].isoformat()} .. {win[1].isoformat()}",
        "queue": "Workloads waiting from submit (creation, or the last eviction) to gang completion",
        "capacity": (
            "ClusterQueue nominalQuota (a quota, not physical nodes; borrowing not modelled)"
            if cq_rows
            else "no ClusterQueue objects given: capacity not known"
        ),
    }
    return _records(source, notes, allocations=allocations, queue=queue, capacity=capacity)


def _kueue_capacity(
    cq_rows: list, pool_by: str, gpu: str, win: tuple[pd.Timestamp, pd.Timestamp], book: _Book
) -> pd.DataFrame:
    quota: dict[str, float] = {}
    for file, row, obj in cq_rows:
        name = _get(obj, "metadata", "name")
        total = 0.0
        for rg in _get(obj, "spec", "resourceGroups") or []:
            for fl in rg.get("flavors") or []:
                for res in fl.get("resources") or []:
                    if res.get("name") == gpu:
                        q = _quantity(res.get("nominalQuota"))
                        if np.isnan(q):
                            continue
                        pool = name if pool_by == "cluster_queue" else fl.get("name")
                        quota[str(pool)] = quota.get(str(pool), 0.0) + q
                        total += q
        if total <= 0:
            book.reject(file, row, "spec.resourceGroups", f"ClusterQueue {name!r} has no {gpu} nominalQuota")
    return _capacity_from_out_of_service(
        pd.Series(quota, dtype=float), pd.DataFrame(columns=["pool", "start", "end", "devices"]), win
    )


# ================================================================================================
# Volcano PodGroup watch records
# ================================================================================================

VOLCANO_PHASES = frozenset({"Pending", "Inqueue", "Running", "Unknown", "Completed"})


def read_volcano(
    path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    gpu_resource: str = _GPU,
    window: Sequence[object] | None = None,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Volcano PodGroup phase transitions recorded from a watch.

    The format is JSON lines, one watch event per line, stamped by the recorder:
    ``{"time": "<RFC 3339>", "type": "ADDED|MODIFIED|DELETED", "object": {<PodGroup or Queue>}}``
    (a PodGroup does not timestamp its phase, so the recorder's time is the transition time).

    Parameters
    ----------
    path_or_paths
        One file or several.
    gpu_resource
        Resource in ``spec.minResources`` counted as devices (the gang's GPUs).
    window
        ``(start, end)`` timezone-aware; groups still holding or waiting at its end are censored there.

    Returns
    -------
    records : SchedulerRecords
        ``allocations``: one row per held spell of a PodGroup (pool = ``spec.queue``).  A spell starts
        at the first record with pods running (``status.running > 0``) or phase Running/Unknown
        (first_assigned); its gang completes when the phase is ``Running`` (or, flagged, when
        ``status.running`` reaches ``minMember`` first); it ends when the phase leaves Running/Unknown:
        Completed (``completed``, or ``failed`` when ``status.failed > 0``), back to Pending/Inqueue
        (``preempted``: the group was reclaimed and waits again) or a DELETED event (``cancelled``).
        A group that never held devices is a row without first_assigned.  ``queue``: waits from submit
        (creation, or the last requeue) to gang completion.  ``capacity``: Queue ``spec.capability`` of
        ``gpu_resource`` (a quota, not physical nodes) when Queue records are given.
    ledger : Ledger
        Rows are lines.  A spell that never reaches minMember gets gang_complete = release (the whole
        hold was partial; a named repair).  Unknown phases are kept and flagged.
    """
    win = _window(window)
    book = _Book()
    recs, queues = [], []
    paths = _paths(path_or_paths)
    for path in paths:
        file = str(path)
        seen: dict[str, int] = {}
        for row, rec, canon in _load_objects(path, book):
            if canon in seen:
                book.reject(file, row, None, f"duplicate record (same as line {seen[canon]})")
                continue
            seen[canon] = row
            obj = _get(rec, "object")
            when = _get(rec, "time")
            if not isinstance(obj, dict) or when is None:
                book.reject(
                    file,
                    row,
                    "time" if when is None else "object",
                    "a watch record needs 'time' and 'object'",
                )
                continue
            kind = obj.get("kind")
            if kind == "Queue":
                queues.append((file, row, obj))
                continue
            if kind != "PodGroup":
                book.reject(file, row, "object.kind", f"kind {kind!r} is not PodGroup or Queue")
                continue
            meta = obj.get("metadata") or {}
            ns, name = meta.get("namespace") or "default", meta.get("name")
            if not name:
                book.reject(file, row, "object.metadata.name", "PodGroup without a name")
                continue
            st = obj.get("status") or {}
            spec = obj.get("spec") or {}
            recs.append(
                {
                    "file": file,
                    "row": row,
                    "time": str(when),
                    "type": str(rec.get("type", "MODIFIED")),
                    "key": meta.get("uid") or f"{ns}/{name}",
                    "job_id": f"{ns}/{name}",
                    "created": str(meta.get("creationTimestamp") or when),
                    "pool": spec.get("queue") or "default",
                    "min_member": _quantity(spec.get("minMember", 1)),
                    "devices": _quantity((spec.get("minResources") or {}).get(gpu_resource)),
                    "phase": str(st.get("phase") or ""),
                    "running": _quantity(st.get("running", 0)),
                    "failed": _quantity(st.get("failed", 0)),
                }
            )
    if not recs:
        raise InputError("no usable PodGroup records in the input", file=str(paths[0]))
    df = pd.DataFrame(recs)
    keep = np.ones(len(df), dtype=bool)
    df["t"] = pd.Series(pd.NaT, index=df.index, dtype=_TIME)
    df["submit"] = pd.Series(pd.NaT, index=df.index, dtype=_TIME)
    for file, sub in df.groupby("file", sort=False):
        t, rej = _parse_time_columns(
            sub[["time", "created"]].rename(columns={"created": "object.metadata.creationTimestamp"}),
            ["time", "object.metadata.creationTimestamp"],
            tz=None,
            file=str(file),
            rows=sub["row"].to_numpy(),
            book=book,
            format_hint="the watch recorder",
            naive_allowed=False,
        )
        df.loc[sub.index, "t"] = t.parsed["time"]
        df.loc[sub.index, "submit"] = t.parsed["object.metadata.creationTimestamp"]
        keep[sub.index.to_numpy()[rej]] = False
    no_gpu = ~(df["devices"] > 0).to_numpy() & keep
    for file, sub in df[no_gpu].groupby("file", sort=False):
        book.reject(
            str(file),
            sub["row"].to_numpy(),
            "object.spec.minResources",
            f"no {gpu_resource} in spec.minResources: not GPU demand",
        )
    keep &= ~no_gpu
    unknown = ~df["phase"].isin(VOLCANO_PHASES).to_numpy() & keep & (df["type"] != "DELETED").to_numpy()
    for file, sub in df[unknown].groupby("file", sort=False):
        book.repair(
            str(file),
            sub["row"].to_numpy(),
            "object.status.phase",
            [f"flagged: unknown PodGroup phase {p!r} kept; held while pods run" for p in sub["phase"]],
        )
    df = df[keep].sort_values(["key", "t", "row"], kind="stable").reset_index(drop=True)
    if df.empty:
        raise InputError("every PodGroup record was rejected; see the ledger", file=str(paths[0]))
    df["row_id"] = _row_ids(df)
    if win is None:
        times = pd.concat([df["t"], df["submit"]]).dropna()
        win = (times.min(), max(times.max(), times.min() + pd.Timedelta(seconds=1)))
    deleted = df["type"].eq("DELETED")
    held = (
        df["phase"].isin(["Running", "Unknown"]) | ((df["running"] > 0) & df["phase"].ne("Completed"))
    ) & ~deleted
    prev_held = held.groupby(df["key"]).shift(1, fill_value=False).astype(bool)
    by_count = (df["running"] >= df["min_member"]) & held & df["phase"].ne("Running")
    gang_m = held & (df["phase"].eq("Running") | by_count)
    end_state = np.select(
        [
            deleted,
            df["phase"].eq("Completed") & (df["failed"] > 0),
            df["phase"].eq("Completed"),
            df["phase"].isin(["Pending", "Inqueue"]),
        ],
        ["cancelled", "failed", "completed", "preempted"],
        default="unknown",
    )
    end_kind = np.where(df["phase"].isin(["Pending", "Inqueue"]) & ~deleted, "evicted", "finished")
    parts = []
    for mask, kind in ((held & ~prev_held, "start"), (gang_m, "gang"), (~held & prev_held, "end")):
        m = mask.to_numpy()
        parts.append(
            pd.DataFrame(
                {
                    "key": df["key"][m],
                    "row": df["row_id"][m],
                    "time": df["t"][m],
                    "kind": kind,
                    "end_state": end_state[m],
                    "end_kind": end_kind[m],
                    "rank": 0,
                    "by_count": by_count[m].to_numpy(),
                }
            )
        )
    ev = pd.concat(parts, ignore_index=True)
    att, ev = _attempts_from_events(ev, ("end_state", "end_kind"))
    gang_by_count = (
        ev[ev["kind"] == "gang"].sort_values("time").groupby(["key", "attempt"])["by_count"].first()
    )
    att = att.merge(
        df[["row_id", "job_id", "pool", "devices"]].rename(columns={"row_id": "primary_row"}),
        on="primary_row",
        how="left",
    )
    first_submit = df.groupby("key")["submit"].min()
    att["submit"] = att["key"].map(first_submit)
    att = att.merge(gang_by_count.rename("by_count").reset_index(), on=["key", "attempt"], how="left")
    att["by_count"] = att["by_count"].fillna(False).astype(bool)
    v = _Verdict(att.index)
    no_gang = att["gang_complete"].isna()
    ended = att["release"].notna()
    v.repair(
        att["by_count"] & ~no_gang,
        "flagged: gang_complete taken from status.running reaching minMember "
        "(the phase had not yet said Running)",
    )
    m = no_gang & ended
    v.repair(
        m,
        "gang never completed (minMember never running): gang_complete set to release, the whole hold "
        "was partial",
    )
    att.loc[m, "gang_complete"] = att.loc[m, "release"]
    still = ~ended
    v.repair(still, f"still holding at the end of the record: release censored at {win[1].isoformat()}")
    att.loc[still, "release"] = win[1]
    att.loc[still, "end_state"] = "running"
    att.loc[still, "end_kind"] = "open"
    m = still & att["gang_complete"].isna()
    v.repair(m, "gang not complete at the end of the record: gang_complete set to the window end")
    att.loc[m, "gang_complete"] = win[1]
    v.write(att, ev, book)
    kept = att[v.status != "rejected"].copy()
    kept["submit"] = _requeue_submit(kept)
    # groups that never held devices: waited, then left (completed / deleted) or still wait
    last = df.groupby("key").last()
    never = last[~last.index.isin(att["key"])].copy()
    gone = never["type"].eq("DELETED") | never["phase"].eq("Completed")
    never["release"] = never["t"].where(gone, win[1])
    never["end_state"] = np.where(
        gone, np.where(never["type"].eq("DELETED"), "cancelled", "unknown"), _PENDING
    )
    for rid in never.loc[~gone, "row_id"]:
        f, n = rid.split("\x00")
        book.repair(
            f,
            int(n),
            None,
            f"still pending at the end of the record: leaves the queue at {win[1].isoformat()} (censored)",
        )
    never["submit"] = never.index.map(first_submit)
    n_never = len(never)
    allocations = _allocations_frame(
        {
            "job_id": pd.concat([kept["job_id"], never["job_id"]], ignore_index=True),
            "attempt": 0,
            "pool": pd.concat([kept["pool"], never["pool"]], ignore_index=True),
            "devices": np.r_[kept["devices"].round().to_numpy(), np.zeros(n_never)].astype(np.int64),
            "submit": pd.concat([kept["submit"], never["submit"]], ignore_index=True),
            "first_assigned": pd.concat(
                [kept["first_assigned"], pd.Series(pd.NaT, index=never.index, dtype=_TIME)], ignore_index=True
            ),
            "gang_complete": pd.concat(
                [kept["gang_complete"], pd.Series(pd.NaT, index=never.index, dtype=_TIME)], ignore_index=True
            ),
            "release": pd.concat([kept["release"], never["release"]], ignore_index=True),
            "priority": np.nan,
            "elastic": False,
            "end_state": pd.concat(
                [kept["end_state"], pd.Series(never["end_state"].to_numpy())], ignore_index=True
            ),
            "requested_devices": np.r_[
                kept["devices"].round().to_numpy(), never["devices"].round().to_numpy()
            ].astype(np.int64),
        }
    )
    a = allocations
    qend = a["gang_complete"].where(a["gang_complete"].notna(), a["release"])
    queue = queue_from_pending(a["pool"], a["submit"], qend.clip(upper=win[1]), a["requested_devices"])
    capacity = None
    if queues:
        cap: dict[str, float] = {}
        for file, row, obj in queues:
            q = _quantity((_get(obj, "spec", "capability") or {}).get(gpu_resource))
            if np.isnan(q):
                book.reject(file, row, "object.spec.capability", f"Queue without {gpu_resource} capability")
                continue
            cap[str(_get(obj, "metadata", "name"))] = q
        capacity = _capacity_from_out_of_service(
            pd.Series(cap, dtype=float), pd.DataFrame(columns=["pool", "start", "end", "devices"]), win
        )
    notes = {
        "gang_complete": "PodGroup phase Running (minMember pods running); Unknown is a partial gang",
        "time_zone": "RFC 3339 times stamped by the watch recorder",
        "window": f"{win[0].isoformat()} .. {win[1].isoformat()}",
        "queue": "PodGroups waiting from submit (creation, or the last requeue) to gang completion",
        "capacity": (
            "Queue spec.capability (a quota, not physical nodes)"
            if queues
            else "no Queue records given: capacity not known"
        ),
    }
    return _records(
        ",".join(str(p) for p in paths), notes, allocations=allocations, queue=queue, capacity=capacity
    ), book.settle()


# ================================================================================================
# Helios per-VC minute sequences and daily quotas
# ================================================================================================

_HELIOS_REQUIRED = (
    "time",
    "total_gpu_num",
    "running_gpu_num",
    "idle_gpu_num",
    "pending_gpu_num",
    "pending_gpujob_num",
)
_HELIOS_TZ = "Asia/Shanghai"


def _helios_pool(path: Path) -> str:
    stem = path.name.split(".")[0]
    if stem.startswith(
        "cluster_sequence"
    ):  # the artifact's own layout: Earth_vcs/<vc>/cluster_sequence_vc.csv
        return path.parent.name
    return stem


def detect_quota_glitch_days(quota: pd.DataFrame, *, min_share: float = 0.5, min_pools: int = 2) -> pd.Series:
    """Flag days on which most pools' quota changes for that day only.

    A pool *blips* on day d when its value differs from day d-1 while days d-1 and d+1 agree.  A day is a
    glitch when at least ``min_pools`` pools blip and they are at least ``min_share`` of the pools with a
    non-zero quota on day d-1 or d.  A real re-partitioning lasts longer than a day, so it is not flagged.

    Parameters
    ----------
    quota
        One row per consecutive day (sorted), one column per pool, numeric quotas.
    min_share
        Fraction of active pools that must blip, in (0, 1].
    min_pools
        Minimum number of blipping pools.

    Returns
    -------
    pandas.Series of bool
        True on glitch days, aligned with ``quota``'s index.
    """
    if not 0.0 < min_share <= 1.0:
        raise DomainError(f"min_share must be in (0, 1]; got {min_share!r}")
    if min_pools < 1:
        raise DomainError(f"min_pools must be >= 1; got {min_pools!r}")
    q = quota.astype(float)
    prev, nxt = q.shift(1), q.shift(-1)
    blip = (q != prev) & (prev == nxt) & prev.notna() & nxt.notna()
    active = (prev > 0) | (q > 0)
    n_blip = blip.sum(axis=1)
    n_active = active.sum(axis=1).replace(0, np.nan)
    return ((n_blip >= min_pools) & (n_blip / n_active >= min_share)).fillna(False).astype(bool)


def read_helios(
    path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str = _HELIOS_TZ,
    glitch: str = "carry",
    resolution_s: float = 60.0,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Helios per-VC minute sequences (``vc*.csv.gz``) and the daily quota file.

    The quota file (``Earth_gpu_number.csv``: ``date`` + one column per VC + ``total``) is recognised
    by its ``date`` column; every other file is a sequence whose pool is the file name without its
    extensions (or the folder name for the artifact's ``<vc>/cluster_sequence_vc.csv`` layout).

    Parameters
    ----------
    path_or_paths
        Sequence files and, optionally, the quota file.
    tz
        Zone of the naive wall-clock times (default ``"Asia/Shanghai"``: the Helios clusters are
        SenseTime's, in China, UTC+8 with no daylight saving, so every minute maps to one instant).
    glitch
        What to do with a quota glitch day (see :func:`detect_quota_glitch_days`; Helios Earth has one on
        2020-05-09, every VC at 0 but one at 840): ``"carry"`` (default) carries the previous day's
        quotas forward, a named repair; ``"reject"`` rejects the day, leaving a gap in capacity.  The
        default is ``"carry"`` because the minute sequences show the VCs' GPUs in service that day.
    resolution_s
        Length of one sequence sample in seconds (the artifact samples every minute).

    Returns
    -------
    records : SchedulerRecords
        ``occupancy`` (one row per pool and minute: in_service = ``total_gpu_num``, held_complete =
        ``running_gpu_num`` because Slurm allocates atomically, partial_gang = reserved =
        out_of_service = 0, pending_jobs = ``pending_gpujob_num``, pending_devices =
        ``pending_gpu_num``) and, when the quota file is given, ``extra["quota"]`` (capacity columns,
        one row per pool and day; restricted to the sequences' pools when sequences are given too).
        The quota is not put in ``capacity``: the sequences carry their own in-service totals, and
        scheduling goodput takes either an occupancy table or allocations with capacity.
        ``extra["notes"]`` records the zone and how many minutes' totals differ from the quota.
    ledger : Ledger
        Every sequence row is checked: ``running + idle == total`` (rejected if not), counts
        non-negative integers, one row per minute.  A row with ``running > total`` (negative idle) is
        kept unchanged and flagged: allocated above capacity is reported, never clipped.
    """
    if glitch not in ("carry", "reject"):
        raise DomainError(f"glitch must be 'carry' or 'reject'; got {glitch!r}")
    res = float(resolution_s)
    if not res > 0:
        raise DomainError(f"resolution_s must be > 0; got {resolution_s!r}")
    book = _Book()
    seqs, quotas = [], []
    for path in _paths(path_or_paths):
        text = _read_text(path)
        header = _first_line(text, path)
        first_col = header.split(",")[0].strip().lower()
        if first_col == "date":
            quotas.append(_helios_quota(path, text, tz, glitch, book))
        else:
            seqs.append(_helios_sequence(path, text, tz, res, book))
    notes = {
        "gang_complete": "running GPUs are complete allocations (Slurm allocates atomically)",
        "time_zone": f"naive Helios times localised to {tz}",
        "pool": "file name without extensions (a Helios virtual cluster)",
        "glitch": f"quota glitch days: {glitch}",
    }
    occupancy = quota = None
    if seqs:
        occupancy = pd.concat(seqs, ignore_index=True) if len(seqs) > 1 else seqs[0]
    if quotas:
        quota = pd.concat(quotas, ignore_index=True)
        if occupancy is not None:
            quota = quota[quota["pool"].isin(occupancy["pool"].unique())].reset_index(drop=True)
            notes["quota_check"] = _quota_check(occupancy, quota)
    source = ",".join(str(p) for p in _paths(path_or_paths))
    return _records(source, notes, occupancy=occupancy, quota=quota), book.settle()


def _csv_lines(
    path: Path, text: str, book: _Book, required: Sequence[str], what: str, dtype: object = str
) -> tuple[pd.DataFrame, np.ndarray]:
    """Read comma-separated text as string columns; reject lines whose field count differs from the header."""
    import io

    file = str(path)
    lines = pd.Series(text.splitlines(), dtype="str")
    nonblank = (lines.str.strip() != "").to_numpy()
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
    book.read += len(body)
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


def _helios_sequence(path: Path, text: str, tz: str, res: float, book: _Book) -> pd.DataFrame:
    file = str(path)
    raw, rows = _csv_lines(path, text, book, _HELIOS_REQUIRED, "a Helios sequence", dtype={"time": str})
    times, rejected = _parse_time_columns(
        raw, ["time"], tz=tz, file=file, rows=rows, book=book, format_hint="Helios sequence"
    )
    alive = ~rejected
    miss_t = times.missing["time"] & alive
    book.reject(file, rows[miss_t], "time", "no time")
    alive &= ~miss_t
    nums = {}
    for c in _HELIOS_REQUIRED[1:]:
        v = pd.to_numeric(raw[c], errors="coerce")
        bad = (v.isna() | (v != np.round(v))).to_numpy() & alive
        if c != "idle_gpu_num":
            bad |= (v < 0).to_numpy() & alive
        book.reject(file, rows[bad], c, "not a non-negative whole number")
        alive &= ~bad
        nums[c] = v
    total, running, idle = nums["total_gpu_num"], nums["running_gpu_num"], nums["idle_gpu_num"]
    mismatch = (running + idle != total).to_numpy() & alive
    book.reject(
        file,
        rows[mismatch],
        "idle_gpu_num",
        [
            f"running + idle != total ({int(r)} + {int(i)} != {int(t)})"
            for r, i, t in zip(running[mismatch], idle[mismatch], total[mismatch], strict=True)
        ],
    )
    alive &= ~mismatch
    t = times.parsed["time"]
    dup_exact = raw.duplicated(keep="first").to_numpy() & alive
    book.reject(file, rows[dup_exact], None, "duplicate row")
    alive &= ~dup_exact
    tt = t.where(pd.Series(alive, index=t.index))
    dup_time = tt.duplicated(keep="first").to_numpy() & tt.notna().to_numpy() & alive
    book.reject(file, rows[dup_time], "time", "second row for the same minute with different counts")
    alive &= ~dup_time
    above = (running > total).to_numpy() & alive
    book.repair(
        file,
        rows[above],
        "running_gpu_num",
        "flagged: running GPUs above total (allocated above capacity); kept unchanged, never clipped",
    )
    pool = _helios_pool(path)
    a = alive
    out = pd.DataFrame(
        {
            "pool": np.full(int(a.sum()), pool, dtype=object),
            "start": t[a].reset_index(drop=True),
            "end": (t[a] + pd.Timedelta(seconds=res)).reset_index(drop=True),
            "in_service": total[a].astype("int64").to_numpy(),
            "out_of_service": np.zeros(int(a.sum()), dtype=np.int64),
            "held_complete": running[a].astype("int64").to_numpy(),
            "partial_gang": np.zeros(int(a.sum()), dtype=np.int64),
            "reserved": np.zeros(int(a.sum()), dtype=np.int64),
            "pending_jobs": nums["pending_gpujob_num"][a].astype("int64").to_numpy(),
            "pending_devices": nums["pending_gpu_num"][a].astype("int64").to_numpy(),
        }
    ).astype({"start": _TIME, "end": _TIME})
    return out.sort_values("start", kind="stable").reset_index(drop=True)


def _helios_quota(path: Path, text: str, tz: str, glitch: str, book: _Book) -> pd.DataFrame:

    file = str(path)
    raw, rows = _csv_lines(path, text, book, ("date",), "a Helios quota file")
    date_col = raw.columns[0]
    pools = [c for c in raw.columns[1:] if c.strip().lower() != "total"]
    if not pools:
        raise InputError("quota file has no pool columns after 'date'", file=file, row=1)
    times, rejected = _parse_time_columns(
        raw, [date_col], tz=tz, file=file, rows=rows, book=book, format_hint="Helios quota file"
    )
    alive = ~rejected
    vals = raw[pools].apply(pd.to_numeric, errors="coerce")
    bad = (vals.isna() | (vals < 0)).any(axis=1).to_numpy() & alive
    book.reject(file, rows[bad], None, "a quota is not a non-negative number")
    alive &= ~bad
    if "total" in raw.columns:
        tot = pd.to_numeric(raw["total"], errors="coerce")
        off = (vals.sum(axis=1) != tot).to_numpy() & alive
        book.reject(file, rows[off], "total", "total differs from the sum of the pool columns")
        alive &= ~off
    day = times.parsed[date_col]
    dup = day.duplicated(keep="first").to_numpy() & alive & day.notna().to_numpy()
    book.reject(file, rows[dup], date_col, "second row for the same day")
    alive &= ~dup
    v = vals[alive].copy()
    d = day[alive]
    order = np.argsort(d.to_numpy(), kind="stable")
    v, d, r = v.iloc[order], d.iloc[order], rows[alive][order]
    # blips only count between consecutive days
    consecutive = (d.diff() == pd.Timedelta(days=1)) & (d.diff(-1) == -pd.Timedelta(days=1))
    glitchy = detect_quota_glitch_days(v.reset_index(drop=True)).to_numpy() & consecutive.to_numpy()
    if glitchy.any():
        prev_total = v.shift(1).sum(axis=1).to_numpy()
        why = []
        for i in np.flatnonzero(glitchy):
            changed = int((v.iloc[i] != v.iloc[i - 1]).sum())
            why.append(
                f"capacity glitch day: {changed} pools change for this day only and return the next day "
                f"(total {v.iloc[i].sum():g} vs {prev_total[i]:g} on the day before)"
            )
        why_arr = np.asarray(why, dtype=object)
        if glitch == "carry":
            book.repair(
                file,
                r[glitchy],
                None,
                np.char.add(why_arr.astype(str), "; previous day's quotas carried forward"),
            )
            v.iloc[np.flatnonzero(glitchy)] = v.iloc[np.flatnonzero(glitchy) - 1].to_numpy()
        else:
            book.reject(
                file,
                r[glitchy],
                None,
                np.char.add(why_arr.astype(str), "; day rejected (capacity left unknown)"),
            )
            v, d = v[~glitchy], d[~glitchy]
    long = v.assign(_day=d.to_numpy()).melt(id_vars="_day", var_name="pool", value_name="q")
    local_day = long["_day"].dt.tz_convert(tz)
    end = (local_day + pd.DateOffset(days=1)).dt.tz_convert("UTC")
    out = pd.DataFrame(
        {
            "pool": long["pool"].astype(object).to_numpy(),
            "start": long["_day"].reset_index(drop=True),
            "end": end.dt.as_unit("ns").reset_index(drop=True),
            "devices_in_service": long["q"].round().astype("int64").to_numpy(),
            "devices_out_of_service": np.zeros(len(long), dtype=np.int64),
        }
    )
    return out.sort_values(["pool", "start"], kind="stable").reset_index(drop=True)


def _quota_check(occ: pd.DataFrame, cap: pd.DataFrame) -> str:
    c = cap.sort_values("start")
    o = occ.sort_values("start")
    m = pd.merge_asof(
        o[["pool", "start", "in_service"]],
        c[["pool", "start", "end", "devices_in_service"]],
        on="start",
        by="pool",
        direction="backward",
        suffixes=("", "_q"),
    )
    covered = m["end"].notna() & (m["start"] < m["end"])
    differ = covered & (m["in_service"] != m["devices_in_service"])
    return (
        f"{int(differ.sum())} of {int(covered.sum())} sequence minutes have a total that differs from the "
        f"daily quota; {int((~covered).sum())} minutes have no quota day"
    )


# ================================================================================================
# Alibaba openb pod and node lists
# ================================================================================================

_OPENB_POD_REQUIRED = (
    "name",
    "num_gpu",
    "gpu_milli",
    "creation_time",
    "scheduled_time",
    "deletion_time",
    "pod_phase",
)
_OPENB_NODE_REQUIRED = ("sn", "gpu", "model")
_OPENB_PHASES = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})


def read_openb(
    path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]],
) -> tuple[SchedulerRecords, Ledger]:
    """Read the Alibaba GPU 2023 ``openb`` pod list (waits, size cohorts) and node list (installed GPUs).

    The pod list is a sample that never fills the cluster (its pods overlap to a few tens of GPUs
    against about six thousand installed), so it gives **waits and size cohorts, not time-based
    scheduling goodput**: no allocations or capacity table is produced from it.  Times in the trace are
    seconds from its start, kept as seconds (``creation_s``, ``scheduled_s``, ``deletion_s``).

    Parameters
    ----------
    path_or_paths
        ``openb_pod_list_*.csv[.gz]`` and/or ``openb_node_list_*.csv`` (recognised by their headers).

    Returns
    -------
    records : SchedulerRecords
        ``extra["waits"]`` (:data:`WAIT_COLUMNS`; ``wait_s = scheduled_time - creation_time``; pods never
        scheduled keep ``scheduled = False`` and a missing wait, a censored observation; ``devices`` is
        ``gpu_milli / 1000`` for a shared single GPU, else ``num_gpu``) and ``extra["installed"]``
        (:data:`INSTALLED_COLUMNS`, GPUs per model from the node list).
    ledger : Ledger
        Duplicate pod names, scheduling before creation, deletion before creation or scheduling, and
        inconsistent GPU fields are rejected; unknown phases are kept and flagged.
    """
    book = _Book()
    pods, nodes = [], []
    for path in _paths(path_or_paths):
        text = _read_text(path)
        header = [h.strip() for h in _first_line(text, path).split(",")]
        if "creation_time" in header or "num_gpu" in header:
            pods.append(_openb_pods(path, text, book))
        elif "sn" in header or "model" in header:
            nodes.append(_openb_nodes(path, text, book))
        else:
            raise InputError(
                f"header is neither an openb pod list nor a node list: {header[:6]}", file=str(path), row=1
            )
    waits = installed = None
    if pods:
        waits = pd.concat(pods, ignore_index=True)
    if nodes:
        n = pd.concat(nodes, ignore_index=True)
        installed = n.groupby("model", as_index=False).agg(nodes=("gpu", "size"), devices=("gpu", "sum"))
        installed = installed.astype({"nodes": "int64", "devices": "int64"})
    notes = {
        "use": "waits and size cohorts only: the pod sample never fills the cluster (no time-based goodput)",
        "time_zone": "seconds from the trace start (no calendar time)",
    }
    source = ",".join(str(p) for p in _paths(path_or_paths))
    return _records(source, notes, waits=waits, installed=installed), book.settle()


def _openb_pods(path: Path, text: str, book: _Book) -> pd.DataFrame:
    file = str(path)
    raw, rows = _csv_lines(path, text, book, _OPENB_POD_REQUIRED, "an openb pod list")
    alive = np.ones(len(raw), dtype=bool)

    def num(c: str) -> pd.Series:
        return pd.to_numeric(raw[c].str.strip().replace("", np.nan), errors="coerce")

    create, sched, delete = num("creation_time"), num("scheduled_time"), num("deletion_time")
    ngpu, milli = num("num_gpu"), num("gpu_milli")
    for c, v, need in (
        ("creation_time", create, True),
        ("deletion_time", delete, False),
        ("scheduled_time", sched, False),
        ("num_gpu", ngpu, True),
        ("gpu_milli", milli, True),
    ):
        blank = raw[c].str.strip().eq("").to_numpy()
        bad = (
            (v < 0) | (v.isna() & ~pd.Series(blank)) | (v.isna() & pd.Series(need & blank))
        ).to_numpy() & alive
        book.reject(file, rows[bad], c, "not a non-negative number")
        alive &= ~bad
    dup = raw["name"].duplicated(keep="first").to_numpy() & alive
    book.reject(file, rows[dup], "name", "duplicate pod name")
    alive &= ~dup
    m = (sched < create).to_numpy() & alive
    book.reject(file, rows[m], "scheduled_time", "scheduled before it was created")
    alive &= ~m
    m = (delete < create).to_numpy() & alive
    book.reject(file, rows[m], "deletion_time", "deleted before it was created")
    alive &= ~m
    m = (delete < sched).to_numpy() & alive
    book.reject(file, rows[m], "deletion_time", "deleted before it was scheduled")
    alive &= ~m
    m = (
        (ngpu != np.round(ngpu))
        | (milli > 1000)
        | ((ngpu == 0) & (milli > 0))
        | ((ngpu > 1) & (milli != 1000))
        | ((ngpu >= 1) & (milli <= 0))
    ).to_numpy() & alive
    book.reject(
        file,
        rows[m],
        "gpu_milli",
        "inconsistent GPU request (whole GPUs need gpu_milli 1000; a shared GPU needs num_gpu 1, "
        "0 < gpu_milli <= 1000; CPU pods need 0)",
    )
    alive &= ~m
    phase = raw["pod_phase"].str.strip()
    unk = ~phase.isin(_OPENB_PHASES).to_numpy() & alive
    book.repair(
        file,
        rows[unk],
        "pod_phase",
        ("flagged: unknown pod phase '" + phase + "' kept verbatim").to_numpy(dtype=object)[unk],
    )
    a = alive
    devices = np.where(ngpu[a] == 1, milli[a] / 1000.0, ngpu[a]).astype(float)
    cohort = np.select(
        [ngpu[a] == 0, (ngpu[a] == 1) & (milli[a] < 1000), ngpu[a] == 1],
        ["CPU only", "shared (<1 GPU)", "1 GPU"],
        default=ngpu[a].astype("int64").astype(str).to_numpy() + " GPUs",
    )
    out = pd.DataFrame(
        {
            "pod": raw["name"][a].to_numpy(dtype=object),
            "pod_phase": phase[a].to_numpy(dtype=object),
            "qos": (raw["qos"][a] if "qos" in raw.columns else pd.Series("", index=raw.index)[a]).to_numpy(
                dtype=object
            ),
            "num_gpu": ngpu[a].astype("int64").to_numpy(),
            "gpu_milli": milli[a].astype("int64").to_numpy(),
            "devices": devices,
            "cohort": cohort.astype(object),
            "creation_s": create[a].to_numpy(dtype=float),
            "scheduled_s": sched[a].to_numpy(dtype=float),
            "deletion_s": delete[a].to_numpy(dtype=float),
            "wait_s": (sched[a] - create[a]).to_numpy(dtype=float),
            "scheduled": sched[a].notna().to_numpy(),
        }
    )
    return out


def _openb_nodes(path: Path, text: str, book: _Book) -> pd.DataFrame:
    file = str(path)
    raw, rows = _csv_lines(path, text, book, _OPENB_NODE_REQUIRED, "an openb node list")
    gpu = pd.to_numeric(raw["gpu"], errors="coerce")
    alive = np.ones(len(raw), dtype=bool)
    bad = (gpu.isna() | (gpu < 0) | (gpu != np.round(gpu))).to_numpy()
    book.reject(file, rows[bad], "gpu", "not a non-negative whole number of GPUs")
    alive &= ~bad
    dup = raw["sn"].duplicated(keep="first").to_numpy() & alive
    book.reject(file, rows[dup], "sn", "duplicate node")
    alive &= ~dup
    no_gpu = (gpu == 0).to_numpy() & alive
    book.reject(file, rows[no_gpu], "gpu", "node has no GPUs: not GPU capacity")
    alive &= ~no_gpu
    return pd.DataFrame(
        {
            "sn": raw["sn"][alive].to_numpy(dtype=object),
            "model": raw["model"][alive].to_numpy(dtype=object),
            "gpu": gpu[alive].astype("int64").to_numpy(),
        }
    )


def openb_cohorts(waits: pd.DataFrame) -> pd.DataFrame:
    """Summarise openb waits by size cohort.

    Parameters
    ----------
    waits
        The ``extra["waits"]`` table from :func:`read_openb`.

    Returns
    -------
    pandas.DataFrame
        One row per cohort (CPU only, shared, 1, 2, 4, 8 GPUs ...) with ``pods``, ``scheduled_pods``,
        ``never_scheduled`` (censored waits), ``devices_requested``, ``wait_p50_s``, ``wait_p90_s``,
        ``wait_max_s`` and ``share_waited`` (share of scheduled pods that waited more than 0 s); the
        wait statistics cover scheduled pods only.
    """
    missing = [c for c in ("cohort", "devices", "wait_s", "scheduled") if c not in waits.columns]
    if missing:
        raise DomainError(f"waits table lacks column(s) {missing}; pass the waits table read_openb returns")
    s = waits[waits["scheduled"]]
    g = s.groupby("cohort")["wait_s"]
    out = pd.DataFrame(
        {
            "pods": waits.groupby("cohort").size(),
            "scheduled_pods": g.size(),
            "devices_requested": waits.groupby("cohort")["devices"].sum(),
            "wait_p50_s": g.quantile(0.5),
            "wait_p90_s": g.quantile(0.9),
            "wait_max_s": g.max(),
            "share_waited": s.assign(w=s["wait_s"] > 0).groupby("cohort")["w"].mean(),
        }
    )
    out["scheduled_pods"] = out["scheduled_pods"].fillna(0).astype("int64")
    out["never_scheduled"] = out["pods"] - out["scheduled_pods"]
    order = {"CPU only": -2.0, "shared (<1 GPU)": -1.0}
    key = [order[c] if c in order else float(str(c).split()[0]) for c in out.index]
    out = out.iloc[np.argsort(np.asarray(key), kind="stable")]
    return out.reset_index()[
        [
            "cohort",
            "pods",
            "scheduled_pods",
            "never_scheduled",
            "devices_requested",
            "wait_p50_s",
            "wait_p90_s",
            "wait_max_s",
            "share_waited",
        ]
    ]


# ================================================================================================
# One entry point per format (for the CLI and the notebooks)
# ================================================================================================

#: Formats :func:`read_records` understands, as the CLI names them.
FORMATS: tuple[str, ...] = ("slurm", "kueue", "volcano", "helios-sequence", "openb", "canonical")


def read_records(
    path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    format: str,
    *,
    tz: str | None = None,
    window: Sequence[object] | None = None,
) -> tuple[SchedulerRecords, Ledger]:
    """Read scheduler records in the named format.

    Parameters
    ----------
    path_or_paths
        The input files (for ``"canonical"``: exactly one Parquet file).
    format
        One of :data:`FORMATS`.
    tz
        Zone of naive wall-clock times: required for Slurm files with naive times; for Helios the
        default ``"Asia/Shanghai"`` applies when None; ignored by the other formats.
    window
        ``(start, end)`` timezone-aware: the record window, where open jobs are censored (Slurm,
        Kueue, Volcano; for the canonical format it is the ``open_end`` of still-open allocations).

    Returns
    -------
    tuple of (SchedulerRecords, Ledger)
        As returned by the format's reader.
    """
    if format not in FORMATS:
        raise DomainError(f"format must be one of {list(FORMATS)}; got {format!r}")
    if format == "slurm":
        return read_slurm(path_or_paths, tz=tz, window=window)
    if format == "kueue":
        return read_kueue(path_or_paths, window=window)
    if format == "volcano":
        return read_volcano(path_or_paths, window=window)
    if format == "helios-sequence":
        return read_helios(path_or_paths, tz=tz or _HELIOS_TZ)
    if format == "openb":
        return read_openb(path_or_paths)
    from fleetlib.scheduling.synth import read_canonical

    paths = _paths(path_or_paths)
    if len(paths) != 1:
        raise DomainError(f"the canonical format is one Parquet file; got {len(paths)} files")
    win = _window(window)
    return read_canonical(paths[0], open_end=None if win is None else win[1])


def scheduling_command(
    paths: Sequence[str | PathLike[str]],
    format: str,
    *,
    window: Sequence[object] | None = None,
    tz: str | None = None,
    denominator: str = "in_service",
) -> dict[str, object]:
    """Return the JSON-ready object of ``fleetlib scheduling FILE... --format F [--window S E] --json``.

    Parameters
    ----------
    paths
        Input files.
    format
        One of :data:`FORMATS`.
    window
        ``(start, end)`` timezone-aware times (ISO 8601 text is accepted): the record window and the
        window scheduling goodput is computed over.
    tz
        Zone of naive input times (see :func:`read_records`).
    denominator
        ``"in_service"`` (default) or ``"installed"``, passed to the goodput computation.

    Returns
    -------
    dict
        For every format but openb: :func:`fleetlib.scheduling.goodput.scheduling_summary`'s object
        (``scheduling_goodput, capacity_device_s, held_device_s, availability, losses,
        cross_pool_losses, pools, ledger``).  For openb, which gives no time-based goodput:
        ``format, note, cohorts`` (one object per size cohort, see :func:`openb_cohorts`),
        ``installed`` and ``ledger``.
    """
    from fleetlib.scheduling.goodput import scheduling_summary

    records, ledger = read_records(paths, format, tz=tz, window=window)
    if format == "openb":
        waits = records.extra.get("waits")
        installed = records.extra.get("installed")

        def plain(df: pd.DataFrame | None) -> list[dict[str, object]]:
            if df is None:
                return []
            obj = df.astype(object).where(df.notna(), None)
            return [
                {k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()}
                for r in obj.to_dict(orient="records")
            ]

        return {
            "format": "openb",
            "note": records.extra["notes"]["use"],
            "cohorts": plain(openb_cohorts(waits) if waits is not None else None),
            "installed": plain(installed),
            "ledger": ledger.to_dict(),
        }
    win = _window(window)
    return scheduling_summary(**records.tables(), window=win, denominator=denominator, ledger=ledger)
