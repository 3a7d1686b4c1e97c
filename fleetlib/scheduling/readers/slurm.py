"""Slurm: ``sacct --parsable2``, ``sacctmgr show event -P`` and ``sinfo -N`` -> canonical tables.

:func:`read` is the format's reader; :func:`check_slurm_inputs` names, before a read, every input
scheduling goodput needs that is missing (:data:`SLURM_INPUTS` says which command writes each).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib._io import current_limits, excerpt, input_files, read_text
from fleetlib._sniff import first_line
from fleetlib.quality import InputError, Ledger
from fleetlib.registry import head_bytes
from fleetlib.scheduling.readers._common import (
    ReadBook,
    allocations_frame,
    capacity_from_out_of_service,
    header_line,
    overlapping,
    parse_time_columns,
    queue_from_pending,
    record_window,
)
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS, PENDING, TIME_DTYPE

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
    "PENDING": PENDING,
}
_SACCT_REQUIRED = ("JobID", "Partition", "Submit", "Start", "End", "State", "AllocTRES")
_EVENT_REQUIRED = ("NodeName", "TimeStart", "TimeEnd", "State")
#: Unused-record kinds: sacct job steps and sacctmgr's cluster registration line.
_STEP_KIND = "sacct job step (123.batch, 123.0)"
_TRES_KIND = "sacctmgr Cluster Registered TRES line"
_OUT_OF_SERVICE = r"DOWN|DRAIN|FAIL|MAINT|POWER|REBOOT|NOT_RESPONDING|NO_RESPOND|\*"


def expand_hostlist(expression: str, *, max_names: int | None = None) -> list[str]:
    """Expand a Slurm hostlist expression into node names.

    Parameters
    ----------
    expression
        For example ``"gpu-a[001-003,007],gpu-h01"``; zero padding of a range is kept.
    max_names
        The most names the expression may expand to (default: the ``max_node_names`` limit in
        force); the count is computed before anything is expanded, so a 60-byte
        ``gpu-a[0000000000-9999999999]`` is refused at once instead of expanding 10^10 names.

    Returns
    -------
    list of str
        The node names in order.

    Raises
    ------
    ValueError
        When the brackets do not balance, a range is not numeric or runs backwards, or the names
        would number more than ``max_names``.
    """
    limit = current_limits().max_node_names if max_names is None else max_names
    count = _hostlist_size(expression)
    if count > limit:
        raise ValueError(f"hostlist {excerpt(expression)} expands to {count:,} node names, more than the "
                         f"{limit:,} allowed (limit max_node_names; raise it with --limit max_node_names=N)")
    return _expand_hostlist(expression)


def _hostlist_parts(expression: str) -> list[str]:
    """Split a hostlist at its top-level commas (refusing unbalanced brackets)."""
    parts: list[str] = []
    depth, cur = 0, []
    for ch in expression.strip():
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {excerpt(expression)}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in hostlist {excerpt(expression)}")
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _hostlist_size(expression: str) -> int:
    """Count the names a hostlist expands to, without expanding it (ranges multiply, parts add)."""
    total = 0
    for part in _hostlist_parts(expression):
        if not part:
            continue
        m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\](.*)", part)
        if m is None:
            total += 1
            continue
        _, ranges, suffix = m.groups()
        width = 0
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"non-numeric range {excerpt(r)} in hostlist {excerpt(expression)}")
            if hi and int(hi) < int(lo):
                raise ValueError(f"range {excerpt(r)} runs backwards in hostlist {excerpt(expression)}")
            width += int(hi or lo) - int(lo) + 1
        total += width * (_hostlist_size(suffix) if suffix else 1)
    return total


def _expand_hostlist(expression: str) -> list[str]:
    out: list[str] = []
    for part in _hostlist_parts(expression):
        if not part:
            continue
        m = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\](.*)", part)
        if m is None:
            if "[" in part or "]" in part:
                raise ValueError(f"cannot read hostlist {excerpt(expression)}")
            out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"non-numeric range {r!r} in hostlist {excerpt(expression)}")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                out.extend(_expand_hostlist(f"{prefix}{i:0{width}d}{suffix}"))
    return out


#: States of a job that has run (so its record must show a Start and an allocation).
_SLURM_RAN = frozenset({"COMPLETED", "COMPLETING", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                        "PREEMPTED", "RUNNING", "SUSPENDED", "DEADLINE"})

#: How far sacct's Elapsed may differ from End - Start before the record is flagged (Elapsed is printed
#: in whole seconds).
ELAPSED_TOLERANCE_S = 1.0


def _elapsed_seconds(text: pd.Series) -> np.ndarray:
    """Parse sacct's ``[D-]HH:MM:SS`` (or ``MM:SS``) Elapsed into seconds; NaN where unreadable."""
    m = text.fillna("").astype(str).str.strip().str.extract(
        r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$")
    parts = m.apply(pd.to_numeric, errors="coerce")
    secs = (parts["d"].fillna(0) * 86400 + parts["h"].fillna(0) * 3600 + parts["m"] * 60 + parts["s"])
    return secs.to_numpy(dtype=float)


def _flag_elapsed(df: pd.DataFrame, closed: np.ndarray, flag: Callable[..., None]) -> None:
    """Flag records whose Elapsed disagrees with End - Start (the times are kept: they are what S uses)."""
    if "Elapsed" not in df.columns or not closed.any():
        return
    elapsed = _elapsed_seconds(df["Elapsed"])
    span = (df["End_t"] - df["Start_t"]).dt.total_seconds().to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        off = (closed & np.isfinite(elapsed) & np.isfinite(span)
               & (np.abs(elapsed - span) > ELAPSED_TOLERANCE_S))
    if off.any():
        flag(off, "elapsed_disagrees", "Elapsed",
             "Elapsed " + df["Elapsed"].astype(str).str.slice(0, 24) + " is "
             + pd.Series(elapsed - span, index=df.index).round(0).astype("Int64").astype(str)
             + " s off End - Start " + pd.Series(span, index=df.index).round(0).astype("Int64").astype(str)
             + " s: the times are used, Elapsed is not")


def _pipe_table(path: Path, text: str, required: Sequence[str], book: ReadBook, what: str) -> pd.DataFrame:
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
    book.open(file, line_no)
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
        # floats: a count beyond int64 is a large number (refused by its row), never an OverflowError
        typed_sum = pd.to_numeric(typed[0]).astype("float64").groupby(level=0).sum().reindex(s.index)
        plain = plain.fillna(typed_sum)
    return plain.astype("float64")


#: The most GPUs one node's GRES may name (2**24 - 1, the largest count the project reads anywhere).
MAX_NODE_GPUS = 2**24 - 1


def _gres_gpus(gres: pd.Series) -> pd.Series:
    """GPU count in a sinfo GRES string ('gpu:a100:8(S:0-1)', 'gpu:8'); 0 when none."""
    s = gres.fillna("").astype(str).str.replace(r"\([^)]*\)", "", regex=True)
    found = s.str.extractall(r"(?:^|,)gpu(?::[^:,]+)?:(\d+)")
    if found.empty:
        return pd.Series(0.0, index=s.index)
    counts = pd.to_numeric(found[0]).astype("float64")  # beyond int64: a float, rejected by its row
    return counts.groupby(level=0).sum().reindex(s.index).fillna(0.0)


def _sniff_slurm(header: str) -> str | None:
    cols = {c.strip().lower() for c in header.split("|")}
    if "jobid" in cols:
        return "sacct"
    if "nodename" in cols and "timestart" in cols:
        return "events"
    if ("nodelist" in cols or "hostnames" in cols) and "partition" in cols and "gres" in cols:
        return "nodes"
    return None


#: What each Slurm input is, and the command that writes it.
SLURM_INPUTS: dict[str, str] = {
    "sacct": "jobs: sacct -P -D -a --starttime S --endtime E --format=JobID,JobIDRaw,User,Account,Partition,"
    "QOS,Priority,Submit,Eligible,Start,End,Elapsed,State,ExitCode,AllocTRES,ReqTRES,NodeList > sacct.txt",
    "nodes": "node inventory: sinfo -N -o '%N|%P|%G' > sinfo_nodes.txt",
    "events": "node outages (optional when no node was down): sacctmgr -P show event Start=S End=E "
    "> sacctmgr_events.txt",
}


def missing_slurm_inputs(paths: str | PathLike[str] | Iterable[str | PathLike[str]]) -> list[str]:
    """Return which of Slurm's three inputs are missing among ``paths`` (by their header lines).

    Parameters
    ----------
    paths
        The files given for ``--format slurm``.

    Returns
    -------
    list of str
        Keys of :data:`SLURM_INPUTS` (``"sacct"``, ``"nodes"``, ``"events"``) not found, in that order.
    """
    seen = {_sniff_slurm(first_line(head_bytes(p))) for p in input_files(paths)}
    return [k for k in SLURM_INPUTS if k not in seen]


def check_slurm_inputs(paths: str | PathLike[str] | Iterable[str | PathLike[str]]) -> None:
    """Raise one :class:`~fleetlib.quality.InputError` naming every Slurm input scheduling goodput lacks.

    sacct output and the sinfo node inventory are needed (jobs and capacity); sacctmgr events are
    named too when they are missing along with one of those, so one run of the error lists all.

    Raises
    ------
    InputError
        sacct or sinfo output is missing; the message gives the command that writes each missing file.
    """
    missing = missing_slurm_inputs(paths)
    if "sacct" in missing or "nodes" in missing:
        need = "; ".join(f"{k} -- {SLURM_INPUTS[k]}" for k in missing)
        raise InputError(
            "scheduling goodput from Slurm needs sacct output and the sinfo node inventory; missing "
            f"{len(missing)} of the 3 inputs: {need}",
            file=str(input_files(paths)[0]),
        )


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Slurm accounting: ``sacct --parsable2`` jobs, ``sacctmgr show event -P`` and ``sinfo -N``.

    Each file's kind is recognised from its header: sacct (has ``JobID``), sacctmgr events (``NodeName``
    and ``TimeStart``) or the node inventory (``sinfo -N -o '%N|%P|%G'``: ``NODELIST|PARTITION|GRES``).

    Parameters
    ----------
    paths
        One file or several (sacct dumps are concatenated; duplicate rows across them are rejected).
    tz
        IANA zone of the cluster's wall clock.  sacct and sacctmgr print naive local times, so this is
        required when the files hold naive times; the reader raises :class:`InputError` otherwise.
    window
        The extraction window (anything :meth:`fleetlib.accounting.Window.parse` takes, such as a
        ``(start, end)`` pair of timezone-aware times).  Jobs still running or
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
        Job steps (``123.batch``, ``123.0``) and sacctmgr's ``Cluster Registered TRES`` line are kept
        and counted in ``unused`` by kind (no measurement uses them); CPU-only jobs are
        rejected as not GPU demand; states map through :data:`SLURM_END_STATES` (``CANCELLED by N``
        is ``cancelled``) and an unknown state is kept as ``"unknown"`` and flagged; overlapping
        attempts of one job: the later one is rejected.

    Raises
    ------
    InputError
        An empty file, an unrecognised header, a missing required column, naive times without ``tz``,
        or events without a node inventory.
    """
    win = record_window(window)
    book = ReadBook()
    sacct_parts, event_parts, node_parts = [], [], []
    for path in input_files(paths):
        text = read_text(path)
        header = header_line(text, path)
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
            file=str(input_files(paths)[0]),
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
                "no usable job records (every row was rejected or the file has none): no window "
                f"({book.settle().summary()})",
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
    source = ",".join(str(p) for p in input_files(paths))
    records = _slurm_finish(alloc, pending, events, nodes, win, notes, source)
    return records, book.settle()


def _slurm_jobs(
    parts: list[pd.DataFrame], tz: str | None, win: tuple[pd.Timestamp, pd.Timestamp] | None, book: ReadBook
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """Judge the sacct records row by row; return allocations, pending intervals and the times seen."""
    df = _sacct_frame(parts, tz, book)
    if df is None:
        empty_alloc = pd.DataFrame(columns=[*_SACCT_KEEP, "devices", "state"])
        empty_pending = pd.DataFrame(columns=["pool", "start", "end", "devices"])
        return empty_alloc, empty_pending, pd.Series(dtype=TIME_DTYPE)
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

    def flag(mask: np.ndarray, code: str, field_: str | None, message: object) -> None:
        def add(file: str, rows: np.ndarray, fld: str | None, text: object) -> None:
            book.flag(file, rows, code, text, field=fld)

        emit(add, np.asarray(mask, dtype=bool) & alive, field_, message)

    # duplicates: the same record printed twice (overlapping sacct dumps)
    raw = ["JobID", "Partition", "State", "AllocTRES", "ReqTRES", "Submit", "Eligible", "Start", "End"]
    dup = df.duplicated(subset=raw, keep="first").to_numpy()
    first_of_row = df.groupby(raw, sort=False)["_line"].transform("first").to_numpy()
    reject(dup, None, "duplicate row (same as line " + pd.Series(first_of_row, dtype="str") + ")")
    # job steps (123.batch, 123.0) are not allocations: kept, used by no measurement
    step = df["JobID"].str.contains(".", regex=False).to_numpy() & alive
    book.unused(_STEP_KIND, int(step.sum()))
    alive &= ~step
    job_id = df["JobID"].astype(str)
    state_word = df["State"].fillna("").astype(str).str.split(" ").str[0].str.upper()
    unknown_state = (~state_word.isin(SLURM_STATES)).to_numpy()
    reject(state_word.eq("").to_numpy(), "State", "empty State")
    flag(
        unknown_state & state_word.ne("").to_numpy(),
        "unknown_job_state",
        "State",
        "unknown job state '" + df["State"].astype("str") + "': end_state 'unknown'",
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
    # a state that says the job ran, on a record that shows no start: not a job still waiting
    ran = state_word.isin(_SLURM_RAN).to_numpy() & ~started
    no_start = start.isna().to_numpy()
    reject(ran & no_start, "Start", "state " + state_word + " says the job ran, but it has no Start time")
    reject(ran & ~no_start, "AllocTRES",
           "state " + state_word + " says the job ran, but AllocTRES names no allocation")
    _flag_elapsed(df, started & alive & end.notna().to_numpy(), flag)
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
        overl[sub] = overlapping(job_id[sub], start[sub], rel)
    reject(overl, "Start", "overlaps an earlier attempt of the same job (starts before it was released)")

    alloc, pending = _sacct_tables(
        df, alive & (started | never), started, censor, waiting, win_end, devices, req_dev, state_word
    )
    return alloc, pending, times


_SACCT_KEEP = (
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
)


def _sacct_frame(parts: list[pd.DataFrame], tz: str | None, book: ReadBook) -> pd.DataFrame | None:
    """Parse the four sacct time columns of every file and stack the files (None when all are empty)."""
    frames = []
    for frame in parts:
        if frame.empty:
            continue
        file = str(frame["_file"].iloc[0])
        rows = frame["_line"].to_numpy()
        for opt in ("Eligible", "ReqTRES", "Priority", "NodeList"):
            if opt not in frame.columns:
                frame[opt] = ""
        times, rejected = parse_time_columns(
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
    if not frames:
        return None
    # Elapsed is optional (cross-checked against End - Start when present)
    return pd.concat([f[[c for c in (*_SACCT_KEEP, "Elapsed") if c in f.columns]] for f in frames],
                     ignore_index=True)


def _sacct_tables(
    df: pd.DataFrame,
    keep: np.ndarray,
    started: np.ndarray,
    censor: np.ndarray,
    waiting: np.ndarray,
    win_end: pd.Timestamp,
    devices: pd.Series,
    req_dev: pd.Series,
    state_word: pd.Series,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Assemble the kept sacct rows into allocations and pending intervals (Eligible -> Start or leaving)."""
    job_id = df["JobID"].astype(str)
    submit, eligible, start, end = df["Submit_t"], df["Eligible_t"], df["Start_t"], df["End_t"]
    st = pd.Series(started, index=df.index)
    release = end.where(end.notna(), win_end)
    end_state = state_word.map(SLURM_END_STATES).fillna("unknown")
    end_state = end_state.where(~pd.Series(censor, index=df.index), "running")
    end_state = end_state.where(~pd.Series(waiting, index=df.index), PENDING)
    nat = pd.Series(pd.NaT, index=df.index, dtype=TIME_DTYPE)
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
    return alloc, pending


def _slurm_nodes(parts: list[pd.DataFrame], book: ReadBook) -> pd.DataFrame:
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
        too_many = (gpus > MAX_NODE_GPUS).to_numpy()
        for line, g in zip(rows[too_many], gpus[too_many], strict=True):
            book.reject(file, line, gres_col, f"{g:.6g} GPUs on one node: more than {MAX_NODE_GPUS:,}, no "
                                              "node count")
        none = ~(gpus > 0).to_numpy()
        book.reject(file, rows[none], gres_col, "node has no GPUs in GRES: not GPU capacity")
        no_gpu = none | too_many
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
    parts: list[pd.DataFrame], tz: str | None, nodes: pd.DataFrame, book: ReadBook
) -> pd.DataFrame:
    out = []
    known = set(nodes["node"])
    for frame in parts:
        if frame.empty:
            continue
        file = str(frame["_file"].iloc[0])
        # the cluster's own registration line (no node, Reason "Cluster Registered TRES"): kept, unused
        reason = frame["Reason"] if "Reason" in frame.columns else pd.Series("", index=frame.index)
        tres = (frame["NodeName"].fillna("").astype(str).str.strip().eq("")
                & reason.fillna("").astype(str).str.strip().eq("Cluster Registered TRES")).to_numpy()
        book.unused(_TRES_KIND, int(tres.sum()))
        frame = frame[~tres].reset_index(drop=True)
        if frame.empty:
            continue
        rows = frame["_line"].to_numpy()
        times, rejected = parse_time_columns(
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
    # the times as objects first: a column of NaT only (every kept event still open) would be inferred
    # naive and refuse the zone
    frame = pd.DataFrame(out, columns=["node", "start", "end"])
    return frame.astype({"start": object, "end": object}).astype({"start": TIME_DTYPE, "end": TIME_DTYPE})


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
        allocations_frame(alloc) if len(alloc) else allocations_frame({c: [] for c in ALLOCATION_COLUMNS})
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
        capacity = capacity_from_out_of_service(installed, ev, win)
    return SchedulerRecords.from_tables(source, notes,
                                       allocations=allocations, queue=queue, capacity=capacity)


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
