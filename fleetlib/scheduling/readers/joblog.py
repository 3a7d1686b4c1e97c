"""The published CSV job logs of HeliosData and AcmeTrace -> canonical allocations (and capacity).

Both are one row per job, exported from Slurm (Helios; Acme Seren) or a Kubernetes job service
(Acme Kalos), with the job's GPUs, final state and three times:

* **HeliosData** ``cluster_log.csv`` (S-Lab-System-Group/HeliosData, SC'21), ``--format
  helios-joblog``: ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,
  duration,queue``.  Times are naive wall-clock text (``2020-04-01 00:00:08``) in the clusters' zone,
  ``Asia/Shanghai`` by default (stated in the notes; ``tz`` overrides it).  The pool is the ``vc``.
* **AcmeTrace** ``trace_seren.csv`` / ``trace_kalos.csv`` (InternLM/AcmeTrace, NSDI'24), ``--format
  acme``: ``job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,
  queue,gpu_time`` (Kalos adds ``mem_per_pod_GB,shared_mem_per_pod,fail_time,stop_time``).  Times
  carry their UTC offset (``2023-03-01 00:18:22+08:00``).  The files name no partition: the pool is
  the cluster, the file name without ``trace_`` and its extensions (``seren``, ``kalos``).

What the formats give and what they do not:

* **Waits, durations, size cohorts, status mix.**  One allocation row per job that asked for GPUs:
  submitted at ``submit_time``, its ``gpu_num`` GPUs assigned (and the gang complete: the scheduler
  allocates a job's nodes at once) at ``start_time``, released at ``end_time``.  The end state is
  the Slurm state word mapped as the Slurm reader maps it (COMPLETED, CANCELLED, FAILED, TIMEOUT,
  NODE_FAIL).  The times are what is measured; the derived ``duration`` and ``queue`` columns are
  only checked against them (one flag per file says how many rows differ: Kalos's ``duration``
  runs from submission, not from the start).
* **No capacity.**  Neither log carries the GPUs a pool had, so time-based scheduling goodput needs
  one stated by the user (``capacity``: GPUs per pool), the Helios daily quota file
  (``cluster_gpu_number.csv``, given with the log), or ``capacity="derived"``: each pool's peak of
  concurrently held GPUs in the log itself, a lower bound on what it had (S is then an upper
  bound).  Which was used is named in ``extra["notes"]["capacity"]``; without any, the records give
  waits, cohorts and the status mix only.  A stated capacity below what the jobs held is kept: the
  measurement flags "allocated above capacity" and shows the excess as negative unattributed.
* **No queue of never-started jobs beyond the row.**  A job cancelled while waiting has no
  ``start_time``: it is an allocation row that never got devices, leaving the queue at its
  ``end_time``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import PathArg, input_files, path_view, read_text
from fleetlib._sniff import header_columns, helios_quota
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling.readers._common import (
    ReadBook,
    allocations_frame,
    csv_lines,
    header_line,
    parse_time_columns,
    record_window,
)
from fleetlib.scheduling.readers.helios import read_quota
from fleetlib.scheduling.readers.slurm import SLURM_END_STATES
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import CAPACITY_COLUMNS, PENDING, TIME_DTYPE

__all__ = [
    "ACME_COLUMNS",
    "HELIOS_COLUMNS",
    "JOBLOG_STATES",
    "read_acme",
    "read_helios",
    "sniff_acme",
    "sniff_helios",
]

#: The published header of HeliosData's ``cluster_log.csv``.
HELIOS_COLUMNS: tuple[str, ...] = (
    "job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "start_time",
    "end_time", "duration", "queue",
)
#: The columns every AcmeTrace job trace has (``trace_kalos.csv`` adds four after ``cpu_num``).
ACME_COLUMNS: tuple[str, ...] = (
    "job_id", "user", "node_num", "gpu_num", "cpu_num", "type", "state", "submit_time", "start_time",
    "end_time", "duration", "queue", "gpu_time",
)
#: The final states the two traces publish; any other is kept, flagged ``unknown_job_state``.
JOBLOG_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL"})
_HELIOS_TZ = "Asia/Shanghai"
_TIMES = ("submit_time", "start_time", "end_time")
#: How far (seconds) a derived ``duration`` / ``queue`` may differ from the times before it is counted.
_SLACK_S = 1.0


def sniff_helios(head: bytes) -> bool:
    """Return True when ``head`` (a file's first bytes) looks like a HeliosData ``cluster_log.csv``.

    Parameters
    ----------
    head
        The first bytes of the file, decompressed.

    Returns
    -------
    bool
        True for a comma-separated header with the job log's ``vc``, ``gpu_num``, ``state``,
        ``submit_time``, ``start_time``, ``end_time`` and ``queue`` columns, or for the daily quota
        file given beside it (which the minute sequences' format takes too: alone, it is ambiguous).
    """
    cols = header_columns(head)
    log = {"job_id", "vc", "gpu_num", "state", "submit_time", "start_time", "end_time", "queue"} <= cols
    return log or helios_quota(head)


def sniff_acme(head: bytes) -> bool:
    """Return True when ``head`` (a file's first bytes) looks like an AcmeTrace job trace.

    Parameters
    ----------
    head
        The first bytes of the file, decompressed.

    Returns
    -------
    bool
        True for a comma-separated header with ``job_id``, ``gpu_num``, ``type``, ``state``, the three
        times and ``gpu_time``, and no ``vc`` column.
    """
    cols = header_columns(head)
    need = {"job_id", "gpu_num", "type", "state", "submit_time", "start_time", "end_time", "gpu_time"}
    return need <= cols and "vc" not in cols


def read_helios(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    capacity: int | Mapping[str, int] | str | None = None,
    glitch: str = "carry",
) -> tuple[SchedulerRecords, Ledger]:
    """Read HeliosData ``cluster_log.csv`` files (and, optionally, the daily quota file).

    Parameters
    ----------
    paths
        Job logs and, optionally, a ``cluster_gpu_number.csv`` quota file (recognised by its first
        column ``date``): its daily per-VC quotas become the capacity.
    tz
        Zone of the naive times; default ``"Asia/Shanghai"`` (SenseTime's clusters).
    window
        The record window (anything :meth:`fleetlib.accounting.Window.parse` takes): jobs still
        running or waiting at the end of the log are censored at its end (default: the latest time
        in the log).
    capacity
        A stated capacity (GPUs per pool: a mapping ``{vc: gpus}``; a number when the log has one
        pool), ``"derived"`` (each pool's peak of concurrently held GPUs), or None (the quota file if
        given, else no capacity).
    glitch
        The quota file's glitch-day rule (see :func:`fleetlib.scheduling.readers.helios.read`).

    Returns
    -------
    records : SchedulerRecords
        ``allocations`` (one row per GPU job, pool = ``vc``) and ``capacity`` when one is stated,
        derived or given by the quota file; ``extra["notes"]`` names the conventions.
    ledger : Ledger
        One record per line (see :func:`read_acme` for what is rejected, repaired and flagged).
    """
    zone = tz or _HELIOS_TZ
    book = ReadBook()
    logs, quotas = [], []
    for path in input_files(paths):
        text = read_text(path)
        if header_line(text, path).split(",")[0].strip().lower() == "date":
            quotas.append(read_quota(path, text, zone, glitch, book))
        else:
            logs.append((path, text))
    if not logs:
        raise InputError("no job log given: the quota file alone has no jobs (give cluster_log.csv with it)",
                         file=str(next(iter(input_files(paths)))))
    if quotas and capacity is not None:
        raise DomainError("capacity is given twice: by the quota file and by the capacity option; give one")
    stated = pd.concat(quotas, ignore_index=True) if quotas else None
    tz_note = f"naive log times localised to {zone}" + ("" if tz else " (SenseTime's zone, the default)")
    return _read(logs, HELIOS_COLUMNS, "a HeliosData cluster_log.csv", lambda _p, raw: raw["vc"],
                 tz=zone, tz_note=tz_note, window=window, capacity=capacity, quota=stated, book=book)


def read_acme(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    capacity: int | Mapping[str, int] | str | None = None,
) -> tuple[SchedulerRecords, Ledger]:
    """Read AcmeTrace job traces (``trace_seren.csv``, ``trace_kalos.csv``) into canonical allocations.

    Parameters
    ----------
    paths
        One or more job traces; each file is one cluster, its pool named by the file
        (``trace_seren.csv`` -> ``seren``).
    tz
        Zone of naive times (the published traces carry offsets; a naive file needs ``tz``).
    window
        The record window: jobs still running or waiting at its end are censored there (default: the
        latest time in the files).
    capacity
        A stated capacity (GPUs per pool: ``{"seren": gpus, ...}``, or a number when one file is
        read), ``"derived"`` (each pool's peak of concurrently held GPUs), or None (no capacity:
        waits, cohorts and the status mix only).

    Returns
    -------
    records : SchedulerRecords
        ``allocations`` (one row per GPU job) and ``capacity`` when stated or derived.
    ledger : Ledger
        One record per line.  Rejected: a field count differing from the header, a duplicate
        ``job_id``, a ``gpu_num`` that is not a whole number >= 0, a missing or unreadable
        ``submit_time``, an unreadable time, a start before submission or an end before the start (or
        before submission).  Repaired (named): a job still running (``start_time`` but no
        ``end_time``) or still waiting (neither) at the end of the record, censored there.  Unused
        (counted by kind): CPU-only jobs (``gpu_num`` 0).  Flagged: an unknown ``state``
        (``unknown_job_state``), and once per file the rows whose ``duration`` or ``queue`` differs
        from the times by more than a second (``derived_column_mismatch``; the times are used).
    """
    book = ReadBook()
    logs = [(path, read_text(path)) for path in input_files(paths)]
    return _read(logs, ACME_COLUMNS, "an AcmeTrace job trace", _acme_pool, tz=tz,
                 tz_note="times carry their UTC offset" if tz is None else f"naive times localised to {tz}",
                 window=window, capacity=capacity, quota=None, book=book)


def _acme_pool(path: PathArg, raw: pd.DataFrame) -> pd.Series:
    stem = path_view(path).name.split(".")[0]
    name = stem.removeprefix("trace_") or stem
    return pd.Series(name, index=raw.index, dtype=object)


def _read(logs: list[tuple[Path, str]], required: tuple[str, ...], what: str, pool_of: Any, *, tz: str | None,
          tz_note: str, window: object, capacity: object, quota: pd.DataFrame | None,
          book: ReadBook) -> tuple[SchedulerRecords, Ledger]:
    """Judge every log file, censor open jobs at the record end, attach the capacity; return the records."""
    hint = ", give the quota file cluster_gpu_number.csv" if required == HELIOS_COLUMNS else ""
    win = record_window(window)
    jobs = pd.concat([_judge(path, text, required, what, pool_of, tz, book) for path, text in logs],
                     ignore_index=True)
    times = pd.concat([jobs[c] for c in _TIMES]).dropna()
    record_end = win[1] if win is not None else (times.max() if len(times) else pd.NaT)
    record_start = win[0] if win is not None else (times.min() if len(times) else pd.NaT)
    late = jobs["end_time"].isna() & (jobs["submit_time"] > record_end)
    for file, rows in jobs.loc[late].groupby("file")["row"]:
        book.reject(file, rows.to_numpy(), "submit_time", "still open but submitted after the window end")
    jobs = jobs[~late].reset_index(drop=True)
    running = jobs["end_time"].isna() & jobs["start_time"].notna()
    waiting = jobs["end_time"].isna() & jobs["start_time"].isna()
    end_text = "" if pd.isna(record_end) else pd.Timestamp(record_end).isoformat()
    for mask, why in ((running, "still running at the end of the record: release censored at "),
                      (waiting, "still waiting at the end of the record: censored (never assigned) at ")):
        for file, rows in jobs.loc[mask].groupby("file")["row"]:
            book.repair(file, rows.to_numpy(), "end_time", why + end_text)
    state = jobs["state"]
    end_state = state.map(SLURM_END_STATES).where(state.isin(list(JOBLOG_STATES)), "unknown")
    end_state = end_state.where(~running, "running").where(~waiting, PENDING)
    alloc = allocations_frame({
        "job_id": jobs["job_id"].to_numpy(dtype=object),
        "attempt": np.zeros(len(jobs), dtype=np.int64),
        "pool": jobs["pool"].to_numpy(dtype=object),
        "devices": jobs["gpus"].to_numpy(dtype=np.int64),
        "submit": jobs["submit_time"],
        "first_assigned": jobs["start_time"],
        "gang_complete": jobs["start_time"],
        "release": jobs["end_time"].fillna(record_end),
        "priority": np.nan,
        "elastic": False,
        "end_state": end_state.to_numpy(dtype=object),
        "requested_devices": jobs["gpus"].to_numpy(dtype=np.int64),
    })
    cap, cap_note = _capacity(alloc, capacity, quota, (record_start, record_end, win is not None))
    notes = {
        "gang_complete": "start_time (the scheduler allocates a job's nodes at once)",
        "time_zone": tz_note,
        "measured": "submit_time, start_time and end_time; duration and queue are checked against them",
        "capacity": cap_note,
        "use": "waits, durations, size cohorts and the status mix" + (
            "; time-based scheduling goodput against the capacity above" if cap is not None
            else f" only: no capacity (state one{hint}, or capacity='derived' / --capacity derived)"),
        "record_end": end_text,
    }
    source = ",".join(str(p) for p, _ in logs)
    return SchedulerRecords.from_tables(source, notes, allocations=alloc, capacity=cap), book.settle()


def _judge(path: Path, text: str, required: tuple[str, ...], what: str, pool_of: Any, tz: str | None,
           book: ReadBook) -> pd.DataFrame:
    """Read one log file, reject/flag its rows; return the GPU jobs kept (file, row, pool, times, gpus)."""
    file = str(path)
    raw, rows = csv_lines(path, text, book, required, what)
    t, rejected = parse_time_columns(raw, list(_TIMES), tz=tz, file=file, rows=rows, book=book,
                                     format_hint=what)
    alive = ~rejected

    def reject(mask: Any, fld: str | None, why: object) -> None:
        nonlocal alive
        m = np.asarray(mask, dtype=bool) & alive
        if not isinstance(why, str):
            why = np.asarray(why, dtype=object)[m]
        book.reject(file, rows[m], fld, why)
        alive &= ~m

    job_id = raw["job_id"].str.strip()
    reject(job_id.eq("").to_numpy(), "job_id", "job_id missing")
    reject(job_id.duplicated(keep="first").to_numpy(), "job_id", "duplicate job_id (an earlier row has it)")
    gpus = pd.to_numeric(raw["gpu_num"].str.strip(), errors="coerce")
    with np.errstate(invalid="ignore"):
        bad_gpu = (gpus.isna() | (gpus < 0) | (gpus != np.round(gpus)) | (gpus >= 2.0**31)).to_numpy()
    reject(bad_gpu, "gpu_num", "gpu_num " + raw["gpu_num"].map(repr) + " is not a whole number >= 0")
    reject(t.missing["submit_time"], "submit_time", "submit_time missing")
    sub, start, end = (t.parsed[c] for c in _TIMES)
    reject((start < sub).to_numpy(), "start_time", "starts before it was submitted")
    reject((end < start).to_numpy(), "end_time", "ends before it starts")
    reject((end < sub).to_numpy() & t.missing["start_time"], "end_time", "ends before it was submitted")
    cpu = (gpus == 0).to_numpy() & alive
    book.unused("CPU-only jobs (gpu_num 0)", int(cpu.sum()))
    state = raw["state"].str.strip()
    unknown = ~state.isin(list(JOBLOG_STATES)).to_numpy() & alive & ~cpu
    book.flag(file, rows[unknown], "unknown_job_state",
              ("unknown job state '" + state + "': end state 'unknown'").to_numpy(dtype=object)[unknown],
              field="state")
    keep = alive & ~cpu
    _flag_derived(raw, sub, start, end, keep, rows, file, book)
    return pd.DataFrame({
        "file": file,
        "row": rows[keep],
        "job_id": job_id[keep].to_numpy(dtype=object),
        "pool": pool_of(path, raw)[keep].astype(str).str.strip().to_numpy(dtype=object),
        "gpus": gpus[keep].astype("int64").to_numpy(),
        "state": state[keep].to_numpy(dtype=object),
        "submit_time": sub[keep].reset_index(drop=True),
        "start_time": start[keep].reset_index(drop=True),
        "end_time": end[keep].reset_index(drop=True),
    })


def _flag_derived(raw: pd.DataFrame, sub: pd.Series, start: pd.Series, end: pd.Series, keep: np.ndarray,
                  rows: np.ndarray, file: str, book: ReadBook) -> None:
    """Flag, once per column and file, the kept rows whose ``duration`` / ``queue`` differ from the times."""
    for col, lo, hi, rule in (("duration", start, end, "end_time - start_time"),
                              ("queue", sub, start, "start_time - submit_time")):
        given = pd.to_numeric(raw[col].str.strip(), errors="coerce").to_numpy(dtype=float)
        from_times = ((hi - lo).dt.total_seconds()).to_numpy(dtype=float)
        both = keep & ~np.isnan(given) & ~np.isnan(from_times)
        off = both & (np.abs(given - from_times) > _SLACK_S)
        n = int(off.sum())
        if not n:
            continue
        text = f"{n:,} of {int(both.sum()):,} rows have a {col} that differs from {rule} by more than " \
               f"{_SLACK_S:g} s (first such row given); the times are measured, {col} is not"
        if col == "duration":
            from_submit = ((end - sub).dt.total_seconds()).to_numpy(dtype=float)
            k = int((off & (np.abs(given - from_submit) <= _SLACK_S)).sum())
            if k:
                text += f"; {k:,} of them equal end_time - submit_time"
        book.flag(file, rows[off][:1], "derived_column_mismatch", text, field=col)


def _capacity(alloc: pd.DataFrame, capacity: object, quota: pd.DataFrame | None,
              span: tuple[pd.Timestamp, pd.Timestamp, bool]) -> tuple[pd.DataFrame | None, str]:
    """Return the capacity table (or None) and the note saying where it came from."""
    if quota is not None:
        return quota, "the daily per-VC quotas of the Helios quota file (cluster_gpu_number.csv)"
    if capacity is None:
        return None, "not known: the job log carries no capacity"
    pools = sorted(alloc["pool"].astype(str).unique())
    if isinstance(capacity, str) and capacity.strip() == "derived":
        per_pool = _peak_held(alloc)
        note = ("derived from the log: each pool's peak of concurrently held GPUs, a lower bound on its "
                "capacity (S is an upper bound): " + ", ".join(f"{p} {per_pool[p]:,}" for p in pools))
    elif isinstance(capacity, Mapping):
        missing = [p for p in pools if p not in capacity]
        if missing:
            raise DomainError(f"the stated capacity names no GPUs for pool(s) {missing}; it names "
                              f"{sorted(map(str, capacity))}")
        per_pool = {p: _gpus(capacity[p], p) for p in pools}
        note = "stated: " + ", ".join(f"{p} {per_pool[p]:,} GPUs" for p in pools)
    else:
        if len(pools) != 1:
            raise DomainError(f"a capacity of one number needs a log with one pool; this one has "
                              f"{len(pools)} ({pools[:5]}...): state GPUs per pool")
        per_pool = {pools[0]: _gpus(capacity, pools[0])}
        note = f"stated: {pools[0]} {per_pool[pools[0]]:,} GPUs"
    lo, hi = _pool_spans(alloc, span)
    cap = pd.DataFrame({
        "pool": np.asarray(pools, dtype=object),
        "start": pd.Series([lo[p] for p in pools], dtype=TIME_DTYPE),
        "end": pd.Series([hi[p] for p in pools], dtype=TIME_DTYPE),
        "devices_in_service": np.asarray([per_pool[p] for p in pools], dtype=np.int64),
        "devices_out_of_service": np.zeros(len(pools), dtype=np.int64),
    })
    where = "the window" if span[2] else "each pool's span, its first submission to its last release"
    return cap[list(CAPACITY_COLUMNS)], note + f"; constant over {where}"


def _pool_spans(alloc: pd.DataFrame, span: tuple[pd.Timestamp, pd.Timestamp, bool]
                ) -> tuple[dict[str, pd.Timestamp], dict[str, pd.Timestamp]]:
    """Return each pool's capacity span: the window if given, else first submission to last release."""
    pools = alloc["pool"].astype(str)
    if span[2]:
        return ({p: span[0] for p in pools.unique()}, {p: span[1] for p in pools.unique()})
    lo = alloc["submit"].groupby(pools).min()
    hi = alloc["release"].groupby(pools).max()
    return lo.to_dict(), hi.to_dict()


def _gpus(value: object, pool: str) -> int:
    try:
        n = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        n = float("nan")
    if not (n > 0 and n == round(n)):
        raise DomainError(f"the stated capacity of pool {pool!r} must be a whole number of GPUs > 0; "
                          f"got {value!r}")
    return int(n)


def _peak_held(alloc: pd.DataFrame) -> dict[str, int]:
    """Each pool's peak of concurrently held GPUs (a release at t frees before a start at t takes)."""
    held = alloc[alloc["gang_complete"].notna()]
    ev = pd.concat([
        pd.DataFrame({"pool": held["pool"], "t": held["gang_complete"], "d": held["devices"]}),
        pd.DataFrame({"pool": held["pool"], "t": held["release"], "d": -held["devices"]}),
    ]).sort_values(["pool", "t", "d"], kind="stable")
    peak = ev.groupby("pool")["d"].cumsum().groupby(ev["pool"]).max()
    out = {str(p): int(v) for p, v in peak.items()}
    for p in alloc["pool"].astype(str).unique():
        out.setdefault(p, 0)  # no job of the pool got devices: nothing shows it had any
    return out
