"""Alibaba PAI 2020 (cluster-trace-gpu-v2020) job, task and instance tables -> canonical allocations.

The trace ships headerless CSV files whose column order is given by the ``.header`` files beside them
(a header line is accepted too):

* ``pai_job_table``: ``job_name, inst_id, user, status, start_time, end_time`` -- ``start_time`` is
  the job's *submission*;
* ``pai_task_table``: ``job_name, task_name, inst_num, status, start_time, end_time, plan_cpu,
  plan_mem, plan_gpu, gpu_type`` -- a task is a role (``worker``, ``ps``, ...) with ``inst_num``
  instances, each asking for ``plan_gpu`` per cent of a GPU; ``start_time`` is its launch;
* ``pai_instance_table`` (optional): ``job_name, task_name, inst_name, worker_name, inst_id, status,
  start_time, end_time, machine`` -- one row per launched instance;
* ``pai_machine_spec`` (optional): ``machine, gpu_type, cap_cpu, cap_mem, cap_gpu`` -> installed GPUs.

Files are recognised by their header or, headerless, by their field count (6, 10, 9, 5).  Times are
seconds shifted by a constant for anonymity; read as Unix seconds they keep the true time of day and
weekday in ``Asia/Shanghai`` but not the true date (stated in the notes).

What the format gives and what it does not:

* **One allocation per GPU job**: ``submit`` is the job's submission, ``first_assigned`` its first
  launch (instance, else task), ``gang_complete`` its last launch, ``release`` its end.  The trace
  does not record gang completion: for a job of several instances or tasks it is inferred from the
  last launch and flagged ``gang_complete_inferred``.
* **Fractional GPUs**: ``plan_gpu`` is in per cent and many tasks share a GPU.  ``gpu_share`` keeps
  the exact request (``sum(inst_num * plan_gpu) / 100``); ``devices`` rounds it up to whole GPUs,
  flagged ``fractional_gpu_rounded_up``.
* **No time-based scheduling goodput**: the trace has no capacity over time (the machine list is a
  static inventory with no outages) and GPU sharing makes held whole-GPU counts an over-count, so no
  capacity table is built: waits, held time and job-size cohorts only.  CPU-only jobs are rejected
  as not GPU demand (named in the ledger).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import far_times, input_files, read_text, time_range
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling.readers._common import (
    ReadBook,
    record_window,
)
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS, TIME_DTYPE

__all__ = ["PAI_COLUMNS", "PAI_STATES", "read", "sniff"]

#: The documented column order of each PAI table (the trace's ``.header`` files).
PAI_COLUMNS: dict[str, tuple[str, ...]] = {
    "job": ("job_name", "inst_id", "user", "status", "start_time", "end_time"),
    "task": (
        "job_name",
        "task_name",
        "inst_num",
        "status",
        "start_time",
        "end_time",
        "plan_cpu",
        "plan_mem",
        "plan_gpu",
        "gpu_type",
    ),
    "instance": (
        "job_name",
        "task_name",
        "inst_name",
        "worker_name",
        "inst_id",
        "status",
        "start_time",
        "end_time",
        "machine",
    ),
    "machine_spec": ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"),
}
_BY_COUNT = {len(cols): kind for kind, cols in PAI_COLUMNS.items()}
_TABLE = {
    "job": "pai_job_table",
    "task": "pai_task_table",
    "instance": "pai_instance_table",
    "machine_spec": "pai_machine_spec",
}
#: PAI job ``status`` -> canonical end state.
PAI_STATES: dict[str, str] = {
    "Terminated": "completed",
    "Failed": "failed",
    "Running": "running",
    "Waiting": "pending",
}
_NUMBER = r"^\s*-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?\s*$"


def sniff(head: bytes) -> bool:
    """Return True when ``head`` (a file's first bytes) looks like a PAI 2020 table.

    Parameters
    ----------
    head
        The first bytes of the file, decompressed.

    Returns
    -------
    bool
        True for a PAI header line, or a headerless first line of 6, 10, 9 or 5 comma-separated
        fields with a hexadecimal name first and numbers where the table has seconds or GPU counts.
    """
    text = head.decode("utf-8", errors="replace")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    fields = [f.strip() for f in first.split(",")]
    if tuple(fields) in PAI_COLUMNS.values():
        return True
    kind = _BY_COUNT.get(len(fields))
    if kind is None:
        return False
    row = dict(zip(PAI_COLUMNS[kind], fields, strict=True))
    name = row["machine"] if kind == "machine_spec" else row["job_name"]
    number = row["cap_gpu"] if kind == "machine_spec" else row["start_time"]
    hexname = re.fullmatch(r"[0-9a-f]{8,}", name) is not None
    return hexname and (number == "" or re.fullmatch(_NUMBER, number) is not None)


def _table(path: Path, book: ReadBook) -> tuple[str, pd.DataFrame, np.ndarray]:
    """Return (kind, string columns, 1-based file lines) of one PAI file; bad lines are rejected."""
    file = str(path)
    text = read_text(path)
    lines = pd.Series(text.splitlines(), dtype="str")
    nonblank = (lines.str.strip() != "").to_numpy()
    if not nonblank.any():
        raise InputError(
            "empty file: expected a PAI 2020 table (pai_job_table, pai_task_table, ...)", file=file, row=1
        )
    first_pos = int(np.flatnonzero(nonblank)[0])
    first = tuple(f.strip() for f in lines.iloc[first_pos].split(","))
    header = next((k for k, cols in PAI_COLUMNS.items() if cols == first), None)
    kind = header or _BY_COUNT.get(len(first))
    if kind is None:
        raise InputError(
            f"{len(first)} fields: not a PAI 2020 table (pai_job_table has 6 fields, pai_task_table 10, "
            f"pai_instance_table 9, pai_machine_spec 5)",
            file=file,
            row=first_pos + 1,
        )
    cols = PAI_COLUMNS[kind]
    start = first_pos + 1 if header else first_pos
    body = lines.iloc[start:][nonblank[start:]]
    line_no = body.index.to_numpy(dtype=np.int64) + 1
    if line_no.size == 0:
        raise InputError(f"no records: {_TABLE[kind]} with a header only", file=file, row=first_pos + 1)
    book.open(file, line_no)
    counts = body.str.count(",").to_numpy(dtype=np.int64) + 1
    wrong = counts != len(cols)
    book.reject(
        file,
        line_no[wrong],
        None,
        [f"{k} fields where {_TABLE[kind]} has {len(cols)} (a truncated line?)" for k in counts[wrong]],
    )
    raw = pd.read_csv(
        io.StringIO("\n".join(body[~wrong].tolist())),
        names=list(cols),
        header=None,
        dtype=str,
        keep_default_na=False,
    )
    return kind, raw.apply(lambda c: c.str.strip()), line_no[~wrong]


#: The largest instance or GPU count a task may name (2**24 - 1): beyond it a count is a damaged number.
MAX_COUNT = 2**24 - 1


class _Part:
    """One PAI table with its file, row numbers and alive mask, and vectorised reject/flag helpers."""

    def __init__(self, file: str, raw: pd.DataFrame, rows: np.ndarray, book: ReadBook) -> None:
        self.file, self.raw, self.rows, self.book = file, raw, rows, book
        self.alive = np.ones(len(raw), dtype=bool)

    def num(self, col: str) -> tuple[pd.Series, np.ndarray, np.ndarray]:
        """Return (numbers, blank mask, present-but-not-a-number mask) of a column."""
        s = self.raw[col]
        blank = s.eq("").to_numpy()
        value = pd.to_numeric(s.where(~blank, None), errors="coerce")
        return value, blank, (~blank) & value.isna().to_numpy()

    def reject(self, mask: Any, field: str | None, why: Any) -> None:
        m = np.asarray(mask, dtype=bool) & self.alive
        if isinstance(why, pd.Series | np.ndarray):
            why = np.asarray(why, dtype=object)[m]
        self.book.reject(self.file, self.rows[m], field, why)
        self.alive &= ~m

    def flag(self, mask: Any, code: str, why: Any, field: str | None = None) -> None:
        m = np.asarray(mask, dtype=bool) & self.alive
        if isinstance(why, pd.Series | np.ndarray):
            why = np.asarray(why, dtype=object)[m]
        self.book.flag(self.file, self.rows[m], code, why, field=field)

    def where(self, pos: int) -> str:
        return f"{self.file} line {int(self.rows[pos])}"


def _reject_beyond(part: _Part, value: pd.Series, col: str, most: float) -> None:
    """Reject the rows whose ``col`` is larger than ``most`` (a count no task holds), naming the value."""
    beyond = (value > most).to_numpy()
    if beyond.any():
        why = np.full(len(value), "", dtype=object)
        why[beyond] = [f"{col} {v:.6g} is more than {most:,} (a damaged number, not a count)"
                       for v in value.to_numpy()[beyond]]
        part.reject(beyond, col, why)


def _times(part: _Part, what: str) -> tuple[pd.Series, pd.Series]:
    """Check start/end seconds of a table; return them (NaN where blank)."""
    start, _, s_bad = part.num("start_time")
    end, _, e_bad = part.num("end_time")
    latest = time_range()[1]
    latest_s = latest.value // 10**9
    for col, value in (("start_time", start), ("end_time", end)):
        beyond = ~(value.abs() < latest_s).to_numpy() & value.notna().to_numpy()  # 1e20, inf: never a time
        if beyond.any():
            why = np.full(len(value), "", dtype=object)
            why[beyond] = [f"{col} {v:.6g} s is not a Unix time before {latest:%Y-%m-%d} (limit latest_year; "
                           f"{what})" for v in value.to_numpy()[beyond]]
            part.reject(beyond, col, why)
    part.reject(
        s_bad | (start < 0).to_numpy(),
        "start_time",
        f"start_time is not a non-negative number of seconds ({what})",
    )
    part.reject(
        e_bad | (end < 0).to_numpy(), "end_time", f"end_time is not a non-negative number of seconds ({what})"
    )
    part.reject((end < start).to_numpy(), "end_time", f"ends before it starts ({what})")
    _reject_far(part, {"start_time": start, "end_time": end}, what)
    return start, end


def _reject_far(part: _Part, seconds: dict[str, pd.Series], what: str) -> None:
    """Reject rows with a time decades from the table's others; flag those far from them (:func:`far_times`).

    PAI's seconds count from 1970 by design (shifted for anonymity): only their spread is judged, never
    their year.
    """
    cols = list(seconds)
    ok = part.alive
    times = np.stack([
        np.where(ok & seconds[c].notna().to_numpy(), seconds[c].fillna(0).to_numpy(float), np.nan)
        for c in cols], axis=1)
    stamps = np.where(np.isnan(times), np.datetime64("NaT", "ns"),
                      (np.nan_to_num(times) * 1e9).astype("int64").astype("datetime64[ns]"))
    far, impossible, bulk = far_times(stamps)
    days = "as dates from 1970: " + bulk
    for j, col in enumerate(cols):
        first = ~impossible[:, :j].any(axis=1)
        at = impossible[:, j] & first
        if at.any():
            why = np.full(len(at), "", dtype=object)
            why[at] = [f"{col} {v:.6g} s is decades from the table's other times (most lie in {days}): "
                       f"a clock reset or a damaged time ({what})" for v in times[at, j]]
            part.reject(at, col, why)
        flag = far[:, j] & ~impossible.any(axis=1) & ~far[:, :j].any(axis=1)
        if flag.any():
            why = np.full(len(flag), "", dtype=object)
            why[flag] = [f"{col} {v:.6g} s lies far outside the table's other times (most lie in {days})"
                         for v in times[flag, j]]
            part.flag(flag, "time_far_from_the_rest", why, field=col)


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[SchedulerRecords, Ledger]:
    """Read PAI 2020 job, task (and instance, machine) tables into canonical allocations.

    Parameters
    ----------
    paths
        ``pai_job_table.csv`` and ``pai_task_table.csv`` (required), ``pai_instance_table.csv`` and
        ``pai_machine_spec.csv`` (optional); plain or gzip, with or without a header line.
    tz
        Not used: the trace writes Unix seconds.
    window
        The record window: jobs still running or waiting at the end are censored at its end (default:
        the latest time in the tables).  Times are Unix seconds as the trace writes them.
    **options
        None: the format has no options (any given is refused).

    Returns
    -------
    records : SchedulerRecords
        ``allocations`` (one row per GPU job, ``attempt`` 0, pool = the GPU type of its largest GPU
        task, plus ``gpu_share`` and ``user``) and, with a machine list, ``extra["installed"]``; no
        capacity (see the module docstring).
    ledger : Ledger
        One record per file line.  Rejected: lines with the wrong field count, blank or duplicate
        names, times that are not seconds, ends before starts, launches before submission, tasks or
        instances whose job or task is not in the tables (or was rejected), jobs with a rejected task,
        CPU-only jobs and jobs without task rows.  Repaired: blank ``plan_gpu`` (no GPU), jobs still
        running or waiting, censored at the window end.  Flagged: ``unknown_job_status``,
        ``gang_complete_inferred`` and ``fractional_gpu_rounded_up``.

    Raises
    ------
    InputError
        An unrecognised or empty file, or no job or no task table among the files.
    """
    del tz  # Unix seconds: no zone to apply
    if options:
        raise DomainError(f"the pai format takes no options; got {sorted(options)}")
    win = record_window(window)
    book = ReadBook()
    parts: dict[str, list[_Part]] = {k: [] for k in PAI_COLUMNS}
    for path in input_files(paths):
        kind, raw, rows = _table(path, book)
        parts[kind].append(_Part(str(path), raw, rows, book))
    first = str(input_files(paths)[0])
    if not parts["job"]:
        raise InputError(
            "no pai_job_table among the files (6 fields: job_name,inst_id,user,status,start_time,"
            "end_time): it gives the submission times",
            file=first,
        )
    if not parts["task"]:
        raise InputError(
            "no pai_task_table among the files (10 fields: job_name,task_name,inst_num,...): it "
            "gives the launches and GPU requests",
            file=first,
        )
    jobs = _merge([_check_jobs(p) for p in parts["job"]], "job_name")
    tasks = _merge([_check_tasks(p, jobs) for p in parts["task"]], ["job_name", "task_name"])
    insts = (
        pd.concat([_check_instances(p, tasks) for p in parts["instance"]], ignore_index=True)
        if parts["instance"]
        else None
    )
    alloc, record_end = _allocations(parts, jobs, tasks, insts, win)
    installed = _installed(parts["machine_spec"]) if parts["machine_spec"] else None
    notes = {
        "use": "waits and size cohorts only: no capacity over time and fractional GPU sharing (no capacity "
        "table, no time-based goodput)",
        "gang_complete": "the job's last launch (instances when given, else tasks); inferred, flagged "
        "gang_complete_inferred, for jobs of several instances",
        "devices": "gpu_share = sum(inst_num * plan_gpu) / 100 of the job's GPU tasks; devices rounds it up",
        "time_zone": "Unix seconds as the trace writes them (shifted by a constant: true time of day and "
        "weekday in Asia/Shanghai, not the true date)",
        "record_end": "" if pd.isna(record_end) else pd.Timestamp(record_end).isoformat(),
    }
    source = ",".join(str(p) for p in input_files(paths))
    return SchedulerRecords.from_tables(source, notes, allocations=alloc, installed=installed), book.settle()


def _merge(frames: list[pd.DataFrame], key: str | list[str]) -> pd.DataFrame:
    """Concatenate per-file tables; a key seen in an earlier file rejects the later row."""
    out = pd.concat(frames, ignore_index=True)
    dup = out.duplicated(key, keep="first").to_numpy()
    _reject_rows(out, dup, None, "duplicate of a row in an earlier file")
    return out[~dup].reset_index(drop=True)


def _check_jobs(part: _Part) -> pd.DataFrame:
    raw = part.raw
    part.reject(raw["job_name"].eq("").to_numpy(), "job_name", "job_name missing")
    part.reject(raw["job_name"].duplicated(keep="first").to_numpy(), "job_name", "duplicate job_name")
    _, blank, _ = part.num("start_time")
    part.reject(blank, "start_time", "start_time (the submission) missing")
    start, end = _times(part, "pai_job_table: seconds")
    status = raw["status"]
    part.flag(
        ~status.isin(list(PAI_STATES)).to_numpy(),
        "unknown_job_status",
        "unknown job status '" + status + "': end state 'unknown'",
        field="status",
    )
    a = part.alive
    return pd.DataFrame(
        {
            "job_name": raw["job_name"][a],
            "user": raw["user"][a],
            "status": status[a],
            "submit_s": start[a],
            "end_s": end[a],
            "_part": part,
            "_pos": np.flatnonzero(a),
        }
    )


def _check_tasks(part: _Part, jobs: pd.DataFrame) -> pd.DataFrame:
    raw = part.raw
    known = raw["job_name"].isin(jobs["job_name"]).to_numpy()
    part.reject(~known, "job_name", "job_name not in pai_job_table (or its job row was rejected)")
    part.reject(
        raw.duplicated(["job_name", "task_name"], keep="first").to_numpy(),
        "task_name",
        "duplicate task of the same job",
    )
    inst, _, _ = part.num("inst_num")
    part.reject(
        (inst.isna() | (inst < 1) | (inst != np.round(inst))).to_numpy(),
        "inst_num",
        "inst_num is not a positive whole number",
    )
    _reject_beyond(part, inst, "inst_num", MAX_COUNT)
    gpu, gpu_blank, gpu_bad = part.num("plan_gpu")
    part.reject(gpu_bad | (gpu < 0).to_numpy(), "plan_gpu", "plan_gpu is not a non-negative per cent")
    _reject_beyond(part, gpu, "plan_gpu", 100 * MAX_COUNT)
    part.book.repair(
        part.file, part.rows[gpu_blank & part.alive], "plan_gpu", "plan_gpu blank: no GPU requested"
    )
    start, end = _times(part, "pai_task_table: seconds")
    submit = raw["job_name"].map(jobs.set_index("job_name")["submit_s"])
    part.reject((start < submit).to_numpy(), "start_time", "task launched before its job was submitted")
    a = part.alive
    return pd.DataFrame(
        {
            "job_name": raw["job_name"][a],
            "task_name": raw["task_name"][a],
            "inst_num": inst[a],
            "plan_gpu": gpu.fillna(0.0)[a],
            "gpu_type": raw["gpu_type"][a],
            "start_s": start[a],
            "end_s": end[a],
            "_part": part,
            "_pos": np.flatnonzero(a),
        }
    )


def _check_instances(part: _Part, tasks: pd.DataFrame) -> pd.DataFrame:
    raw = part.raw
    key = raw["job_name"] + "\x00" + raw["task_name"]
    known = key.isin(tasks["job_name"] + "\x00" + tasks["task_name"]).to_numpy()
    part.reject(
        ~known, "task_name", "(job_name, task_name) not in pai_task_table (or its task row was rejected)"
    )
    start, end = _times(part, "pai_instance_table: seconds")
    a = part.alive
    return pd.DataFrame(
        {
            "job_name": raw["job_name"][a],
            "task_name": raw["task_name"][a],
            "start_s": start[a],
            "end_s": end[a],
            "_part": part,
            "_pos": np.flatnonzero(a),
        }
    )


def _reject_rows(frame: pd.DataFrame, mask: np.ndarray, field: str | None, why: Any) -> None:
    """Reject the file rows behind the rows of ``frame`` at ``mask`` (one reason or one per row)."""
    texts = np.asarray(why, dtype=object) if not isinstance(why, str) else None
    for part in pd.unique(frame["_part"][mask]):
        sel = mask & (frame["_part"] == part).to_numpy()
        m = np.zeros(len(part.raw), dtype=bool)
        m[frame["_pos"].to_numpy()[sel]] = True
        if texts is None:
            part.reject(m, field, why)
        else:
            full = np.empty(len(part.raw), dtype=object)
            full[frame["_pos"].to_numpy()[sel]] = texts[sel]
            part.reject(m, field, full)


def _row_of(frame: pd.DataFrame) -> pd.Series:
    """Return ``file line N`` for each row of ``frame`` (where it came from)."""
    files = frame["_part"].map(lambda p: p.file)
    lines = [int(p.rows[i]) for p, i in zip(frame["_part"], frame["_pos"], strict=True)]
    return (files.astype(str) + " line " + pd.Series(lines, index=frame.index, dtype=str)).astype(object)


def _allocations(
    parts: dict[str, list[_Part]],
    jobs: pd.DataFrame,
    tasks: pd.DataFrame,
    insts: pd.DataFrame | None,
    win: tuple[pd.Timestamp, pd.Timestamp] | None,
) -> tuple[pd.DataFrame, pd.Timestamp]:
    """Join jobs, tasks and instances into one allocation per GPU job; settle each row's outcome."""
    # a job whose task row was rejected has an incomplete request: reject it (its other rows with it)
    rejected_tasks = []
    for p in parts["task"]:
        gone = ~p.alive & np.isin(p.raw["job_name"], jobs["job_name"])
        rejected_tasks.append(
            pd.DataFrame(
                {
                    "job_name": p.raw["job_name"][gone],
                    "where": [f"{p.file} line {int(r)}" for r in p.rows[gone]],
                }
            )
        )
    bad = pd.concat(rejected_tasks).drop_duplicates("job_name").set_index("job_name")["where"].astype(object)
    hit = jobs["job_name"].isin(bad.index).to_numpy()
    _reject_rows(
        jobs,
        hit,
        None,
        (
            "a task row of this job was rejected ("
            + jobs["job_name"].map(bad).astype(object).fillna("")
            + "): its GPU request is incomplete"
        ).to_numpy(dtype=object),
    )
    tasks = tasks.assign(share=tasks["inst_num"] * tasks["plan_gpu"] / 100.0)
    share = tasks.groupby("job_name")["share"].sum()
    n_tasks = tasks.groupby("job_name").size()
    hit_jobs = jobs[hit]
    jobs = jobs[~hit].reset_index(drop=True)
    no_task = ~jobs["job_name"].isin(n_tasks.index).to_numpy()
    _reject_rows(jobs, no_task, "job_name", "no task rows: the job's GPU request is unknown")
    cpu = ~no_task & (jobs["job_name"].map(share).fillna(0.0) <= 0).to_numpy()
    _reject_rows(jobs, cpu, "plan_gpu", "CPU-only job (no task asks for a GPU): not GPU demand")
    gone_jobs = jobs[no_task | cpu]
    jobs = jobs[~(no_task | cpu)].reset_index(drop=True)
    # the rows of jobs no longer kept go with them
    gone = pd.concat([hit_jobs, gone_jobs])
    where = _row_of(gone).set_axis(gone["job_name"].to_numpy()).astype(object)
    for frame in (tasks, insts):
        if frame is None:
            continue
        m = ~frame["job_name"].isin(jobs["job_name"]).to_numpy()
        _reject_rows(
            frame,
            m,
            None,
            ("part of a job rejected at " + frame["job_name"].map(where).astype(object).fillna("?")).to_numpy(
                dtype=object
            ),
        )
    gpu_tasks = tasks[tasks["job_name"].isin(jobs["job_name"]) & (tasks["plan_gpu"] > 0)]
    launches = gpu_tasks[["job_name", "start_s", "end_s"]]
    expected = gpu_tasks.groupby("job_name")["inst_num"].sum()
    from_inst = pd.Series(False, index=jobs["job_name"])
    if insts is not None:
        gi = insts.merge(gpu_tasks[["job_name", "task_name"]], on=["job_name", "task_name"])
        with_inst = gi["job_name"].unique()
        from_inst = pd.Series(jobs["job_name"].isin(with_inst).to_numpy(), index=jobs["job_name"])
        launches = pd.concat(
            [launches[~launches["job_name"].isin(with_inst)], gi[["job_name", "start_s", "end_s"]]],
            ignore_index=True,
        )
    g = launches.groupby("job_name")
    first_s = jobs["job_name"].map(g["start_s"].min()).astype(float)
    last_s = jobs["job_name"].map(g["start_s"].max()).astype(float)
    launched = jobs["job_name"].map(g["start_s"].count()).fillna(0).astype(float)
    last_end = jobs["job_name"].map(g["end_s"].max()).astype(float)
    all_ended = jobs["job_name"].map(g["end_s"].count()) == jobs["job_name"].map(g.size())
    release_s = jobs["end_s"].astype(float).where(jobs["end_s"].notna(), last_end.where(all_ended, np.nan))
    # checks across tables
    early = (first_s < jobs["submit_s"]).to_numpy()
    _reject_rows(jobs, early, "start_time", "an instance launched before the job was submitted")
    late = (last_s > release_s).to_numpy() & ~early
    _reject_rows(jobs, late, "end_time", "an instance launched after the job ended")
    all_times = pd.concat([jobs["submit_s"], jobs["end_s"], launches["start_s"], launches["end_s"]]).dropna()
    record_end = win[1] if win is not None else pd.to_datetime(all_times.max(), unit="s", utc=True)
    keep = ~(early | late)
    for f in (tasks, insts):  # the task and instance rows of jobs rejected just now
        if f is not None:
            m = f["job_name"].isin(jobs["job_name"][~keep]).to_numpy()
            _reject_rows(f, m, None, "part of a job rejected in pai_job_table")
    j = jobs[keep].reset_index(drop=True)
    first_s, last_s, release_s = (s[keep].reset_index(drop=True) for s in (first_s, last_s, release_s))
    launched = launched[keep].reset_index(drop=True)
    times = {"first": first_s, "last": last_s, "release": release_s, "launched": launched}
    return _pai_table(j, times, share, expected, from_inst, gpu_tasks, record_end)


def _pai_table(
    j: pd.DataFrame,
    times: dict[str, pd.Series],
    share: pd.Series,
    expected: pd.Series,
    from_inst: pd.Series,
    gpu_tasks: pd.DataFrame,
    record_end: pd.Timestamp,
) -> tuple[pd.DataFrame, pd.Timestamp]:
    """Build the allocations of the kept GPU jobs ``j``; censor, flag and settle their rows."""
    first_s, last_s, release_s, launched = times["first"], times["last"], times["release"], times["launched"]
    open_ = release_s.isna().to_numpy()
    end_state = j["status"].map(PAI_STATES).fillna("unknown").to_numpy(dtype=object)
    end_state = np.where(open_, np.where(first_s.notna(), "running", "pending"), end_state)
    at = pd.Timestamp(record_end).isoformat()
    _repair_rows(
        j,
        open_,
        "end_time",
        np.where(
            first_s.notna(),
            f"still running at the end of the record: release censored at {at}",
            f"still waiting at the end of the record: leaves the queue at {at} (censored)",
        ),
    )
    sh = j["job_name"].map(share).to_numpy(dtype=float)
    exp = j["job_name"].map(expected).to_numpy(dtype=float)
    devices = np.ceil(sh - 1e-9).astype(np.int64)
    frac = np.abs(devices - sh) > 1e-9
    _flag_rows(
        j,
        frac,
        "fractional_gpu_rounded_up",
        (
            "asks for "
            + pd.Series(sh).map("{:g}".format).astype(str)
            + " GPU (plan_gpu in per cent): devices counts "
            + pd.Series(devices).astype(str)
            + " whole GPU(s)"
        ).to_numpy(dtype=object),
        "plan_gpu",
    )
    fi = j["job_name"].map(from_inst).fillna(False).to_numpy(dtype=bool)
    multi = (exp > 1) & first_s.notna().to_numpy()
    src = np.where(fi, "instance", "task (no instance rows)")
    msg = (
        "gang completion taken as the last launch of its "
        + pd.Series(np.where(np.isfinite(exp), exp, 0).astype(np.int64)).astype(str)
        + " GPU instance(s), from the "
        + pd.Series(src, dtype=str)
        + " table; "
        + launched.astype(int).astype(str)
        + " launch(es) recorded"
    ).to_numpy(dtype=object)
    _flag_rows(j, multi, "gang_complete_inferred", msg, "start_time")
    pool = (
        gpu_tasks.sort_values("share", ascending=False, kind="stable").groupby("job_name")["gpu_type"].first()
    )

    def utc(sec: pd.Series) -> pd.Series:
        return pd.Series(pd.to_datetime(sec.to_numpy(dtype=float), unit="s", utc=True), dtype=TIME_DTYPE)

    release = utc(release_s).where(~open_, record_end)
    alloc = pd.DataFrame(
        {
            "job_id": j["job_name"].to_numpy(dtype=object),
            "attempt": np.zeros(len(j), dtype=np.int64),
            "pool": j["job_name"].map(pool).to_numpy(dtype=object),
            "devices": devices,
            "submit": utc(j["submit_s"]),
            "first_assigned": utc(first_s),
            "gang_complete": utc(last_s),
            "release": release.astype(TIME_DTYPE),
            "priority": np.nan,
            "elastic": False,
            "end_state": end_state.astype(object),
            "requested_devices": devices,
            "gpu_share": sh,
            "user": j["user"].to_numpy(dtype=object),
        }
    )
    return alloc[[*ALLOCATION_COLUMNS, "gpu_share", "user"]], record_end


def _repair_rows(frame: pd.DataFrame, mask: np.ndarray, field: str, why: np.ndarray) -> None:
    for part in pd.unique(frame["_part"][mask]):
        sel = mask & (frame["_part"] == part).to_numpy()
        part.book.repair(part.file, part.rows[frame["_pos"].to_numpy()[sel]], field, why[sel])


def _flag_rows(frame: pd.DataFrame, mask: np.ndarray, code: str, why: np.ndarray, field: str) -> None:
    for part in pd.unique(frame["_part"][mask]):
        sel = mask & (frame["_part"] == part).to_numpy()
        part.book.flag(part.file, part.rows[frame["_pos"].to_numpy()[sel]], code, why[sel], field=field)


def _installed(specs: list[_Part]) -> pd.DataFrame:
    """GPUs per GPU type from ``pai_machine_spec`` (static inventory, one row per type)."""
    frames = []
    for part in specs:
        gpu, _, _ = part.num("cap_gpu")
        part.reject(part.raw["machine"].eq("").to_numpy(), "machine", "machine missing")
        part.reject(
            (gpu.isna() | (gpu < 0) | (gpu != np.round(gpu))).to_numpy(),
            "cap_gpu",
            "cap_gpu is not a non-negative whole number of GPUs",
        )
        part.reject(part.raw["machine"].duplicated(keep="first").to_numpy(), "machine", "duplicate machine")
        part.reject((gpu == 0).to_numpy(), "cap_gpu", "machine has no GPUs: not GPU capacity")
        a = part.alive
        frames.append(pd.DataFrame({"model": part.raw["gpu_type"][a], "gpu": gpu[a]}))
    m = pd.concat(frames, ignore_index=True)
    out = m.groupby("model", as_index=False).agg(nodes=("gpu", "size"), devices=("gpu", "sum"))
    return out.astype({"nodes": "int64", "devices": "int64"})
