"""Microsoft Philly ``cluster_job_log`` (msr-fiddle/philly-traces) -> canonical allocations.

The log is one JSON array of job objects, each with ``jobid``, ``vc`` (the virtual cluster, used as
the pool), ``user``, ``status`` (``Pass``, ``Killed`` or ``Failed``), ``submitted_time`` and
``attempts``: every scheduling attempt that ran, with ``start_time``, ``end_time`` and ``detail``
(one ``{ip, gpus}`` entry per server the attempt held).  Times are naive wall-clock text
(``2017-10-07 01:12:09``); the trace's utilisation files print ``PDT`` / ``PST``, so the default zone
is ``America/Los_Angeles`` (stated in the notes; pass ``tz`` to override).

What the format gives and what it does not:

* **Attempts, GPUs, times, waits and size cohorts.**  One allocation row per attempt; its devices are
  the GPUs listed in ``detail``.  The first attempt is submitted at ``submitted_time``; a later attempt
  re-entered the queue when the previous one ended (Philly retries a job after a failure), so its
  wait runs from that end to its start.
* **Gang completion is inferred.**  An attempt has one ``start_time``: it is taken as both the first
  device assignment and gang completion.  For an attempt on one server that is exact (the server's
  GPUs are granted together); for an attempt spanning several servers it is an inference, flagged
  ``gang_complete_inferred_at_start``.
* **No time-based scheduling goodput.**  The trace is a sanitised subset of Philly's jobs and carries
  no per-VC quota or outage history, so no capacity table is built: waits, held time and job-size
  cohorts only (:func:`fleetlib.scheduling.views.queue_waits`, ``cohort_goodput``).
"""

from __future__ import annotations

import itertools
import json
import zoneinfo
from collections.abc import Callable, Iterable
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import (
    check_whole_text,
    collector_paused,
    current_limits,
    input_files,
    json_depth_rows,
    nesting_message,
    read_text,
    time_range,
)
from fleetlib.localtime import AMBIGUOUS_RULE, localize
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling.readers._common import (
    ReadBook,
    record_window,
)
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS, TIME_DTYPE

__all__ = ["PHILLY_STATES", "read", "sniff"]

#: Philly job ``status`` -> canonical end state of the job's last attempt.
PHILLY_STATES: dict[str, str] = {"Pass": "completed", "Killed": "cancelled", "Failed": "failed"}
#: The zone Philly's logs print their wall-clock times in (the utilisation files say PDT / PST).
DEFAULT_TZ = "America/Los_Angeles"
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_MISSING = ("", "none", "null", "nan")


def sniff(head: bytes) -> bool:
    """Return True when ``head`` (a file's first bytes) looks like a Philly ``cluster_job_log``.

    Parameters
    ----------
    head
        The first bytes of the file, decompressed.

    Returns
    -------
    bool
        True for a JSON array (or object) whose first job carries ``attempts`` and ``submitted_time``.
    """
    text = head.decode("utf-8", errors="replace").lstrip()
    return text[:1] in "[{" and '"attempts"' in text and '"submitted_time"' in text


def _load(path: Path, book: ReadBook) -> tuple[list[object], np.ndarray]:
    """Return the job objects of one log file and their 1-based object numbers (the ledger's rows)."""
    file = str(path)
    text = read_text(path)
    if not text.strip():
        raise InputError(
            "empty file: expected a Philly cluster_job_log (a JSON array of jobs)", file=file, row=1
        )
    deep = json_depth_rows(text)
    if len(deep):  # json.loads would recurse past Python's limit
        raise InputError(nesting_message(at=f" at line {int(deep[0])}"), file=file)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON ({exc.msg} at line {exc.lineno}); a truncated cluster_job_log?",
            file=file,
            row=None,
        ) from exc
    try:
        check_whole_text(data, text, file=file)
    except InputError as exc:  # the ledger's rows are job objects, not lines: the line goes in the text
        raise InputError(f"{exc.message} (line {exc.row})", file=file, field=exc.field) from None
    jobs = data if isinstance(data, list) else [data]
    if not jobs:
        raise InputError("no job objects: the cluster_job_log array is empty", file=file, row=1)
    rows = np.arange(1, len(jobs) + 1, dtype=np.int64)
    book.open(file, rows)
    return jobs, rows


def _bad_time(text: str) -> str:
    """Why a time text was not read: not a time in the format, or a time outside the plausible range."""
    when = pd.to_datetime(text, format=_TIME_FORMAT, errors="coerce")
    if pd.isna(when):
        return f"{text!r} is not a time {_TIME_FORMAT!r}"
    lim = current_limits()
    return (f"{text!r} is outside the plausible range [{lim.earliest_year}-01-01, {lim.latest_year}-01-01) "
            "(limits earliest_year, latest_year)")


def _text(values: list[object]) -> pd.Series:
    return pd.Series(["" if v is None else str(v).strip() for v in values], dtype=object)


def _local_times(text: pd.Series, tz: str, field: str) -> tuple[pd.Series, np.ndarray, np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """Parse naive Philly times in ``tz`` (:mod:`fleetlib.localtime`'s rule for DST nights).

    Returns (UTC times, missing mask, unreadable mask, DST-resolved mask, repair text per time).
    """
    missing = text.str.lower().isin(_MISSING).to_numpy()
    local = pd.to_datetime(text.where(~missing, None), format=_TIME_FORMAT, errors="coerce")
    lo, hi = (t.tz_localize(None) for t in time_range())
    local = local.where((local >= lo) & (local < hi))  # year 2300 would overflow in tz
    try:
        zoneinfo.ZoneInfo(tz)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError) as exc:
        raise DomainError(f"tz must be an IANA zone name such as 'America/Los_Angeles'; got {tz!r}") from exc
    placed = localize(local, tz)
    utc = placed.utc.astype(TIME_DTYPE)
    fixed, reasons = placed.repairs(field, text.to_numpy())
    why = np.full(len(text), "", dtype=object)
    why[fixed] = reasons
    return utc, missing, (~missing) & utc.isna().to_numpy(), fixed, why


def _attempt_frame(jobs: list[object], rows: np.ndarray, tz: str) -> pd.DataFrame:
    """Flatten the attempts of every job object into one frame (one row per attempt)."""
    lists = [o.get("attempts") if isinstance(o, dict) else None for o in jobs]
    counts = np.array([len(a) if isinstance(a, list) else 0 for a in lists], dtype=np.int64)
    flat = list(itertools.chain.from_iterable(a for a in lists if isinstance(a, list)))
    dicts = [a if isinstance(a, dict) else {} for a in flat]
    details = [d.get("detail") if isinstance(d.get("detail"), list) else [] for d in dicts]
    gpus = [sum(len(s.get("gpus") or []) for s in det if isinstance(s, dict)) for det in details]
    att = pd.DataFrame(
        {
            "row": np.repeat(rows, counts),
            "index": np.concatenate([np.arange(c) for c in counts]) if counts.size else np.zeros(0, int),
            "is_object": np.asarray([isinstance(a, dict) for a in flat], dtype=bool),
            "gpus": np.asarray(gpus, dtype=np.int64),
            "servers": np.asarray([len(det) for det in details], dtype=np.int64),
        }
    )
    for col in ("start_time", "end_time"):
        raw = _text([d.get(col) for d in dicts])
        (att[col], att[f"{col}_missing"], att[f"{col}_bad"], att[f"{col}_dst"],
         att[f"{col}_dst_why"]) = _local_times(raw, tz, col)
        att[f"{col}_text"] = raw.to_numpy()
    att["last"] = att["index"] == np.repeat(counts, counts) - 1
    return att


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Philly ``cluster_job_log`` files into canonical allocations (attempts, waits, cohorts).

    Parameters
    ----------
    paths
        One or more ``cluster_job_log`` JSON files (plain or gzip).
    tz
        Zone of the log's naive times; default ``"America/Los_Angeles"`` (Philly's zone).
    window
        The record window (anything :meth:`fleetlib.accounting.Window.parse` takes): attempts still
        running at the end of the log are censored at its end (default: the latest time in the log).
    **options
        None: the format has no options (any given is refused).

    Returns
    -------
    records : SchedulerRecords
        ``allocations`` (one row per attempt, pool = VC, devices = the GPUs listed in ``detail``);
        no capacity (see the module docstring); ``extra["notes"]`` names the conventions.
    ledger : Ledger
        One record per job object.  Rejected: a job that is not an object, lacks ``jobid`` or
        ``submitted_time``, repeats a ``jobid``, has no usable attempt (the log does not say when it
        left the queue), an unreadable time, an attempt ending before it starts or
        starting before submission, or overlapping attempts.  Repaired (named): attempts left out for
        a logging gap (no ``start_time``, no ``end_time`` before a later attempt, no GPUs listed), a
        time ambiguous or nonexistent on a DST night (:mod:`fleetlib.localtime`'s rule) and
        the last attempt still running, censored at the window end.  Flagged: unknown ``status``
        (``unknown_job_status``) and multi-server attempts (``gang_complete_inferred_at_start``).
    """
    if options:
        raise DomainError(f"the philly format takes no options; got {sorted(options)}")
    zone = tz or DEFAULT_TZ
    win = record_window(window)
    book = ReadBook()
    parts = []
    for path in input_files(paths):
        with collector_paused():  # the parsed jobs and their tables: many containers, no cycles
            jobs, rows = _load(path, book)
            parts.append(_philly_file(str(path), jobs, rows, zone, win, book))
            del jobs
    alloc = pd.concat([p[0] for p in parts], ignore_index=True)
    end = max(p[1] for p in parts)
    notes = {
        "use": "attempts, waits and size cohorts only: the trace is a subset of Philly's jobs with no "
        "per-VC quota or outage history (no capacity table, no time-based goodput)",
        "gang_complete": "an attempt's start_time (one server: its GPUs are granted together; several "
        "servers: inferred, flagged gang_complete_inferred_at_start)",
        "time_zone": f"naive log times localised to {zone}" + ("" if tz else " (Philly's zone, the default)")
        + f"; DST nights: an ambiguous time by {AMBIGUOUS_RULE}, a nonexistent one shifted forward by "
        "the gap (each a named repair)",
        "attempts": "a later attempt is submitted when the previous one ended (a retry); earlier attempts "
        "end 'failed', the last one by the job's status",
        "record_end": "" if pd.isna(end) else pd.Timestamp(end).isoformat(),
    }
    source = ",".join(str(p) for p in input_files(paths))
    return SchedulerRecords.from_tables(source, notes, allocations=alloc), book.settle()


def _philly_file(
    file: str,
    jobs: list[object],
    rows: np.ndarray,
    tz: str,
    win: tuple[pd.Timestamp, pd.Timestamp] | None,
    book: ReadBook,
) -> tuple[pd.DataFrame, pd.Timestamp]:
    """Judge one file's jobs and attempts; return its allocations and the latest time it holds."""
    n = len(jobs)
    alive = np.ones(n, dtype=bool)

    def reject(mask: np.ndarray, fld: str | None, why: object) -> None:
        nonlocal alive
        m = np.asarray(mask, dtype=bool) & alive
        if isinstance(why, pd.Series | np.ndarray):
            why = np.asarray(why, dtype=object)[m]
        book.reject(file, rows[m], fld, why)
        alive &= ~m

    is_obj = np.array([isinstance(o, dict) for o in jobs])
    reject(~is_obj, None, "not a JSON object (each cluster_job_log entry is one job)")

    def key(k: str) -> pd.Series:
        return _text([o.get(k) if isinstance(o, dict) else None for o in jobs])

    jobid, vc, status, user = key("jobid"), key("vc"), key("status"), key("user")
    reject((jobid == "").to_numpy(), "jobid", "jobid missing")
    reject(jobid.duplicated(keep="first").to_numpy(), "jobid", "duplicate jobid (an earlier object has it)")
    sub_text = key("submitted_time")
    submit, sub_missing, sub_bad, sub_dst, sub_why = _local_times(sub_text, tz, "submitted_time")
    reject(sub_missing, "submitted_time", "submitted_time missing")
    reject(sub_bad, "submitted_time", _texts(sub_bad, lambda i: [
        f"submitted_time {_bad_time(t)}" for t in sub_text.to_numpy()[i]]))
    book.repair(file, rows[sub_dst], "submitted_time", sub_why[sub_dst])
    has_list = np.array([isinstance(o, dict) and isinstance(o.get("attempts"), list) for o in jobs])
    reject(~has_list, "attempts", "attempts missing or not a list")

    att = _attempt_frame(jobs, rows, tz)
    pos = np.searchsorted(rows, att["row"].to_numpy())  # job position of each attempt
    number = att["index"].to_numpy()  # the attempt's place in its job's list, for the messages
    bad_obj = ~att["is_object"].to_numpy()
    _reject_by_attempt(reject, n, pos, bad_obj, None,
                       lambda i: [f"attempts[{k}] is not an object" for k in number[i]])
    for col in ("start_time", "end_time"):
        m = att[f"{col}_bad"].to_numpy()
        raw = att[f"{col}_text"].to_numpy()
        _reject_by_attempt(reject, n, pos, m, col, lambda i, col=col, raw=raw: [
            f"attempts[{k}].{col} {_bad_time(t)}" for k, t in zip(number[i], raw[i],
                                                                                        strict=True)])
        dst = att[f"{col}_dst"].to_numpy()
        book.repair(file, att["row"].to_numpy()[dst], col, np.array(
            [f"attempts[{k}]: {w}" for k, w in zip(number[dst], att[f"{col}_dst_why"].to_numpy()[dst],
                                                   strict=True)], dtype=object))
    # attempts left out for a logging gap (named repairs on the job)
    no_start = att["start_time_missing"].to_numpy() & ~bad_obj
    no_end_mid = att["end_time_missing"].to_numpy() & ~att["last"].to_numpy() & ~no_start & ~bad_obj
    no_gpu = (att["gpus"].to_numpy() == 0) & ~no_start & ~no_end_mid & ~bad_obj
    for m, why in (
        (no_start, " has no start_time (a logging gap): left out"),
        (no_end_mid, " has no end_time but a later attempt follows (a logging gap): left out"),
        (no_gpu, " lists no GPUs in detail: left out"),
    ):
        live = m & alive[pos]
        book.repair(file, att["row"].to_numpy()[live], "attempts",
                    np.array([f"attempts[{k}]{why}" for k in number[live]], dtype=object))
    use = ~(no_start | no_end_mid | no_gpu | bad_obj)
    att = att[use].reset_index(drop=True)
    pos = pos[use]
    number = number[use]
    has_use = np.bincount(pos, minlength=n) > 0
    never = has_list & (
        np.array([len(o.get("attempts") or []) if isinstance(o, dict) else 0 for o in jobs]) == 0
    )
    reject(
        never, "attempts", "no recorded scheduling attempt: the log does not say when the job left the queue"
    )
    reject(~has_use, "attempts", "no usable scheduling attempt (every attempt was left out): no allocation")

    start, end = att["start_time"], att["end_time"]
    sub_a = _naive(submit)[pos]
    _reject_by_attempt(
        reject,
        n,
        pos,
        (end < start).to_numpy(),
        "end_time",
        lambda i: [f"attempts[{k}] ends before it starts" for k in number[i]],
    )
    _reject_by_attempt(
        reject,
        n,
        pos,
        (_naive(start) < sub_a),
        "start_time",
        lambda i: [f"attempts[{k}] starts before the job was submitted" for k in number[i]],
    )
    prev_end = end.groupby(pos).shift(1)
    _reject_by_attempt(
        reject,
        n,
        pos,
        (start < prev_end).to_numpy(),
        "start_time",
        lambda i: [f"attempts[{k}] starts before the previous attempt ended" for k in number[i]],
    )

    times = pd.concat([submit[alive], start[alive[pos]], end[alive[pos]]]).dropna()
    record_end = win[1] if win is not None else (times.max() if len(times) else pd.NaT)
    running = end.isna().to_numpy() & alive[pos]
    late = running & (start > record_end).to_numpy()
    _reject_by_attempt(reject, n, pos, late, "end_time", "still running but starts after the window end")
    running &= alive[pos]
    if running.any():
        book.repair(
            file,
            att["row"].to_numpy()[running],
            "end_time",
            f"last attempt still running at the end of the record: release censored at "
            f"{pd.Timestamp(record_end).isoformat()}",
        )
    unknown = ~status.isin(list(PHILLY_STATES)).to_numpy() & alive
    book.flag(
        file,
        rows[unknown],
        "unknown_job_status",
        np.array([f"unknown job status '{v}': not mapped to an end state"
                  for v in status.to_numpy()[unknown]], dtype=object),
        field="status",
    )
    multi = (att["servers"].to_numpy() > 1) & alive[pos]
    if multi.any():
        servers = att["servers"].to_numpy()[multi]
        msg = np.array([f"attempts[{k}] spans {m} servers: the log gives one start_time, taken as gang "
                        "completion" for k, m in zip(number[multi], servers, strict=True)], dtype=object)
        book.flag(file, att["row"].to_numpy()[multi], "gang_complete_inferred_at_start", msg,
                  field="start_time")
    keep = alive[pos]
    columns = {"job_id": jobid, "pool": vc, "user": user, "status": status, "submit": submit}
    return _philly_table(att[keep].reset_index(drop=True), pos[keep], running[keep], columns, record_end)


def _philly_table(
    a: pd.DataFrame,
    p: np.ndarray,
    running: np.ndarray,
    jobs: dict[str, pd.Series],
    record_end: pd.Timestamp,
) -> tuple[pd.DataFrame, pd.Timestamp]:
    """Build the allocations of the kept attempts ``a`` (``p``: their job positions, in file order)."""
    rel = a["end_time"].where(a["end_time"].notna(), record_end)
    prev_rel = rel.groupby(p).shift(1)
    first = prev_rel.isna().to_numpy()
    # .array.take keeps the zone-aware values (to_numpy would box each one as an object)
    sub = pd.Series(jobs["submit"].array.take(p), dtype=TIME_DTYPE).where(
        first, prev_rel.reset_index(drop=True))
    last_state = pd.Series(jobs["status"].to_numpy(dtype=object)[p]).map(PHILLY_STATES).fillna("unknown")
    is_last = np.r_[p[1:] != p[:-1], True] if p.size else np.zeros(0, dtype=bool)
    end_state = np.where(running, "running", np.where(is_last, last_state.to_numpy(dtype=object), "failed"))
    alloc = pd.DataFrame(
        {
            "job_id": jobs["job_id"].to_numpy(dtype=object)[p],
            "attempt": a["index"].astype("int64").to_numpy(),
            "pool": jobs["pool"].to_numpy(dtype=object)[p],
            "devices": a["gpus"].astype("int64").to_numpy(),
            "submit": sub,
            "first_assigned": a["start_time"],
            "gang_complete": a["start_time"],
            "release": rel.reset_index(drop=True).astype(TIME_DTYPE),
            "priority": np.nan,
            "elastic": False,
            "end_state": end_state.astype(object),
            "requested_devices": a["gpus"].astype("int64").to_numpy(),
            "user": jobs["user"].to_numpy(dtype=object)[p],
            "servers": a["servers"].astype("int64").to_numpy(),
        }
    )
    return alloc[[*ALLOCATION_COLUMNS, "user", "servers"]], record_end


def _naive(times: pd.Series) -> np.ndarray:
    """Return UTC times as naive ``datetime64[ns]`` (NaT kept) for fast comparisons."""
    return times.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy()


def _texts(mask: np.ndarray, build: Callable[[np.ndarray], list[str]]) -> np.ndarray:
    """Return one message per row, built (``build(positions)``) only where ``mask`` holds; None elsewhere."""
    m = np.asarray(mask, dtype=bool)
    out = np.full(m.size, None, dtype=object)
    if m.any():
        out[m] = np.array(build(np.flatnonzero(m)), dtype=object)
    return out


def _reject_by_attempt(
    reject: Any, n: int, pos: np.ndarray, mask: np.ndarray, fld: str | None,
    why: str | Callable[[np.ndarray], list[str]],
) -> None:
    """Reject each job with an attempt in ``mask`` (its first such attempt's reason).

    ``why`` is one reason for all, or builds the reasons of the attempts at the positions it is given
    (only the attempts that reject a job get a message).
    """
    m = np.asarray(mask, dtype=bool)
    if not m.any():
        return
    first = pd.Series(np.flatnonzero(m)).groupby(pos[m]).first()
    job_mask = np.zeros(n, dtype=bool)
    job_mask[first.index.to_numpy()] = True
    reasons = np.empty(n, dtype=object)
    reasons[first.index.to_numpy()] = why if isinstance(why, str) else np.array(why(first.to_numpy()),
                                                                                  dtype=object)
    reject(job_mask, fld, reasons)
