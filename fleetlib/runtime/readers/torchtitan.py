"""Reader of torchtitan's structured logs (format ``torchtitan``): per-rank JSONL span records.

torchtitan's structured logger (``torchtitan/observability/structured_logger``) writes one JSONL file
per process, ``{output_dir}/structured_logs/{source}.global_rank_{rank}.{timestamp}-{random}.jsonl``.
Each line is one record: ``rank``, ``source``, ``step`` (once the trainer has set it), ``relative_step``,
``time_us`` (POSIX microseconds), ``log_type`` (``event`` for spans, ``instant`` for markers and
scalars), ``log_type_name`` and ``event_name`` among other fields.  ``log_trace_span(name)`` writes
``<name>_start`` and ``<name>_end`` (the end's ``value`` is the elapsed milliseconds); when the block
raises, ``<name>_error`` comes before the ``_end``.  The trainer's spans include
``torch_distributed_init``, ``model_parallelism_init``, ``<Class>.build``, ``checkpoint_load``,
``checkpoint_save``, ``fetching_batch``, ``fwd_bwd``, ``optim``, ``eval`` and ``step`` (the whole training
step; it contains the batch fetches, and the checkpoint save and evaluation of that step).

Mapping, per rank (job id ``<job>/rank<r>``, a ``rank`` column beside the canonical ones):

* each file is one attempt of its rank (files of one rank in time order: a restart is a new process);
  held time runs from the file's first record (``gang_complete``) to its last (``release``), flagged
  ``held_from_process_records``: the scheduler's allocation times are not in this log;
* ``step`` spans -> steps (``step`` = the record's step).  A step ends where its checkpoint save or
  evaluation begins, so those pauses are not counted as training; its ``fetching_batch`` spans are its
  input wait.  A step span with an ``_error`` inside it is not a finished step;
* ``checkpoint_save`` -> ``checkpoint_begin`` / ``checkpoint_commit``; ``eval`` -> ``eval_begin`` /
  ``eval_end``; the first step span -> ``first_step``;
* ``checkpoint_load`` in a resumed process -> ``restore`` to the step it loaded (``step - relative_step``
  of the process's first step, flagged ``restore_step_from_relative_step``); init spans
  (``torch_distributed_init``, ``model_parallelism_init``, ``*.build``) and ``checkpoint_load`` ->
  ``custom_badput:<span>`` events (with ``duration_s``) -- startup covers them;
* every ``_error`` record -> ``failure`` (its ``step``); other spans, instants and scalars are kept and
  make no rows.

Rejected: lines that are not JSON objects (a truncated last line among them), records without an
integer ``rank`` or with a rank other than the file's (an unknown rank), records whose ``time_us`` is
earlier than a record before them in the file (non-monotonic time), span ends with no start before
them.  A span start with no end is kept and flagged ``span_open_at_end`` when the file ends inside it
(the process stopped there), rejected otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import as_paths, check_whole_text, json_depth_rows, nesting_message, read_text
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.runtime.readers._common import (
    NS_PER_S,
    FileBook,
    PathLike,
    TimelineTables,
    check_events,
    check_steps,
    close_books,
    concat_frames,
    cross_checks,
    finalise_events,
    finalise_steps,
    parse_window,
    utc_times,
)

__all__ = ["INIT_SPANS", "read", "read_torchtitan"]

#: Spans of process start-up, reported as ``custom_badput:<span>`` events (``*.build`` too).
INIT_SPANS: tuple[str, ...] = ("torch_distributed_init", "model_parallelism_init", "checkpoint_load")
_SUFFIX = re.compile(r"^(?P<span>.+)_(?P<side>start|end|error)$")
_FILE_RANK = re.compile(r"global_rank_(\d+)")


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _parse_file(path: Any, books: dict[str, FileBook]) -> pd.DataFrame:
    """Parse one rank file into its kept records (``_row``, rank, step, relative_step, time, name, side)."""
    text = read_text(path)
    file = str(path)
    lines = text.splitlines()
    rows = [n for n, line in enumerate(lines, start=1) if line.strip()]
    book = FileBook(file, rows, truncated=bool(text) and not text.endswith("\n"))
    books[file] = book
    objs: list[dict[str, Any]] = []
    kept_rows: list[int] = []
    bad_rows, bad_reasons = [], []
    too_deep = set(json_depth_rows(text, per_line=True).tolist())
    for n in rows:  # json.loads is per line by nature; everything after it is vectorised
        if n in too_deep:
            bad_rows.append(n)
            bad_reasons.append(nesting_message())
            continue
        try:
            # json's own reading (a metric may be NaN in a real log), text of whole characters only
            obj = json.loads(lines[n - 1])
            check_whole_text(obj, lines[n - 1], file=file, row=n)
        except json.JSONDecodeError as exc:
            bad_rows.append(n)
            bad_reasons.append(f"invalid JSON ({exc.msg} at column {exc.colno})")
            continue
        except InputError as exc:
            bad_rows.append(n)
            bad_reasons.append(exc.message)
            continue
        if not isinstance(obj, dict):
            bad_rows.append(n)
            bad_reasons.append("the line is not a JSON object")
            continue
        objs.append(obj)
        kept_rows.append(n)
    book.reject_rows(bad_rows, None, bad_reasons)
    rec = pd.DataFrame({
        "_file": file, "_row": np.asarray(kept_rows, dtype=np.int64),
        "rank": [_int_or_none(o.get("rank")) for o in objs],
        "step": [_int_or_none(o.get("step")) for o in objs],
        "relative_step": [_int_or_none(o.get("relative_step")) for o in objs],
        "time_us": [_int_or_none(o.get("time_us")) for o in objs],
        "name": [str(o.get("log_type_name")) if o.get("log_type_name") is not None else "" for o in objs],
        "source": [str(o.get("source") or "") for o in objs],
        "log_type": [str(o.get("log_type") or "event") for o in objs],
    })
    if rec.empty:
        return rec
    # the file's rank: from its name (global_rank_<r>), else the first record's
    named = _FILE_RANK.search(path.name)
    ranks = rec["rank"]
    first_rank = int(ranks.dropna().iloc[0]) if ranks.notna().any() else None
    file_rank = int(named.group(1)) if named else first_rank
    no_rank = ranks.isna().to_numpy()
    if no_rank.any():
        book.reject_rows(rec.loc[no_rank, "_row"].to_numpy(), "rank", "missing or non-integer rank")
    other = ~no_rank & (ranks.to_numpy(dtype=object) != file_rank)
    if other.any():
        book.reject_rows(rec.loc[other, "_row"].to_numpy(), "rank",
                         [f"unknown rank {int(r)} in the file of rank {file_rank}"
                          for r in rec.loc[other, "rank"]])
    no_time = rec["time_us"].isna().to_numpy()
    if no_time.any():
        book.reject_rows(rec.loc[no_time, "_row"].to_numpy(), "time_us",
                         "time_us must be an integer count of microseconds since the epoch")
    rec = rec[~(no_rank | other | no_time)].reset_index(drop=True)
    t = rec["time_us"].to_numpy(dtype=np.int64)
    prev_max = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(t)[:-1]] if t.size else t
    back = t < prev_max
    if back.any():
        book.reject_rows(rec.loc[back, "_row"].to_numpy(), "time_us",
                         [f"non-monotonic time: time_us {a} is {(b - a) / 1e6:.6g} s earlier than a record "
                          "before it in the file" for a, b in zip(t[back], prev_max[back], strict=True)])
        rec = rec[~back].reset_index(drop=True)
    parts = rec["name"].str.extract(_SUFFIX)  # span records only: an instant may be named "x_start"
    parts = parts[rec["log_type"] == "event"].reindex(rec.index)
    return rec.assign(rank=rec["rank"].astype("int64"), span=parts["span"], side=parts["side"],
                      time_ns=rec["time_us"].to_numpy(dtype=np.int64) * 1000)


def _pair_spans(rec: pd.DataFrame, book: FileBook) -> pd.DataFrame:
    """Pair ``_start`` / ``_end`` records of each span name in one file; report the unpaired."""
    m = rec[rec["side"].isin(["start", "end"])]
    if m.empty:
        return pd.DataFrame(columns=["span", "start_ns", "end_ns", "step", "relative_step", "_row"])
    m = m.sort_values(["span", "time_ns", "_row"], kind="stable")
    is_s = (m["side"] == "start").to_numpy()
    g = m["span"]
    nxt_s = m["side"].eq("start").groupby(g, sort=False).shift(-1)
    prv_s = m["side"].eq("start").groupby(g, sort=False).shift(1).fillna(False).to_numpy(dtype=bool)
    last_of_span = nxt_s.isna().to_numpy()
    start_ok = is_s & ~nxt_s.fillna(True).to_numpy(dtype=bool)
    end_ok = ~is_s & prv_s
    lonely_end = ~is_s & ~end_ok
    if lonely_end.any():
        book.reject_rows(m.loc[lonely_end, "_row"].to_numpy(), "log_type_name",
                         [f"span end without start: {s}_end has no {s}_start before it" for s in
                          m.loc[lonely_end, "span"]])
    open_start = is_s & ~start_ok
    at_end = open_start & last_of_span  # nothing of this span follows it: the file ends inside it
    if (open_start & at_end).any():
        o = m[open_start & at_end]
        book.flag_rows(o["_row"].to_numpy(), "span_open_at_end",
                       [f"the file ends inside span {s}" + ("" if pd.isna(st) else f" (step {int(st)})")
                        + ": the process stopped there" for s, st in zip(o["span"], o["step"], strict=True)])
    if (open_start & ~at_end).any():
        book.reject_rows(m.loc[open_start & ~at_end, "_row"].to_numpy(), "log_type_name",
                         [f"span start without end: {s}_start is followed by another {s}_start" for s in
                          m.loc[open_start & ~at_end, "span"]])
    s, e = m[start_ok], m[end_ok]
    return pd.DataFrame({"span": s["span"].to_numpy(), "start_ns": s["time_ns"].to_numpy(),
                         "end_ns": e["time_ns"].to_numpy(), "step": s["step"].to_numpy(dtype=object),
                         "relative_step": s["relative_step"].to_numpy(dtype=object),
                         "_row": s["_row"].to_numpy()})


def _inside(outer_s: np.ndarray, outer_e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the interval (sorted, disjoint) containing each time, or -1."""
    i = np.searchsorted(outer_s, t, side="right") - 1
    ok = (i >= 0) & (t <= outer_e[np.maximum(i, 0)]) if outer_s.size else np.zeros(t.size, bool)
    return np.where(ok, i, -1)


def _attempt_tables(rec: pd.DataFrame, book: FileBook, job: str, attempt: int
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build the steps and events of one process (one rank file = one attempt of its rank)."""
    file, rank = book.file, int(rec["rank"].iloc[0])
    spans = _pair_spans(rec, book)
    errors = rec[rec["side"] == "error"]
    if len(errors) > 1:  # one exception leaves an _error in every span it passes through: the first counts
        again = errors["step"].astype("object").duplicated(keep="first").to_numpy()
        errors = errors.assign(step=pd.array(errors["step"].to_numpy(dtype=object), dtype="Int64"))
        if again.any():
            book.flag_rows(errors.loc[again, "_row"].to_numpy(), "error_propagated",
                           [f"{n}: the exception of an earlier _error of step {st} leaving an enclosing "
                            "span (one failure)" for n, st in
                            zip(errors.loc[again, "name"], errors.loc[again, "step"], strict=True)])
            errors = errors[~again]
    steps = spans[spans["span"] == "step"].sort_values("start_ns").reset_index(drop=True)
    s_s = steps["start_ns"].to_numpy(dtype=np.int64)
    s_e = steps["end_ns"].to_numpy(dtype=np.int64)
    # a step ends where its checkpoint save or evaluation begins
    pauses = spans[spans["span"].isin(["checkpoint_save", "eval"])]
    cut = s_e.copy()
    if not pauses.empty and s_s.size:
        k = _inside(s_s, s_e, pauses["start_ns"].to_numpy(dtype=np.int64))
        hit = k >= 0
        np.minimum.at(cut, k[hit], pauses["start_ns"].to_numpy(dtype=np.int64)[hit])
    # input wait: the batch fetches inside the (cut) step
    fetch = spans[spans["span"] == "fetching_batch"]
    wait = np.zeros(s_s.size)
    if not fetch.empty and s_s.size:
        f_s, f_e = fetch["start_ns"].to_numpy(dtype=np.int64), fetch["end_ns"].to_numpy(dtype=np.int64)
        k = _inside(s_s, cut, f_s)
        hit = k >= 0
        np.add.at(wait, k[hit], (np.minimum(f_e[hit], cut[k[hit]]) - f_s[hit]) / NS_PER_S)
    failed = np.zeros(s_s.size, dtype=bool)
    if not errors.empty and s_s.size:
        k = _inside(s_s, s_e, errors["time_ns"].to_numpy(dtype=np.int64))
        failed[k[k >= 0]] = True
    keep = ~failed
    step_rows = pd.DataFrame({
        "_file": file, "_row": steps["_row"].to_numpy(dtype=np.int64)[keep], "job_id": job,
        "attempt": attempt, "step": pd.array(steps["step"].to_numpy(dtype=object)[keep], dtype="Int64"),
        "start": utc_times(s_s[keep]), "end": utc_times(cut[keep]),
        "input_wait_s": np.minimum(wait[keep], (cut[keep] - s_s[keep]) / NS_PER_S), "rank": rank})
    missing_step = step_rows["step"].isna().to_numpy()
    if missing_step.any():
        book.reject_rows(step_rows.loc[missing_step, "_row"].to_numpy(), "step", "step span without a step")
        step_rows = step_rows[~missing_step]
    step_rows["step"] = step_rows["step"].astype("int64")
    t0, t1 = int(rec["time_ns"].iloc[0]), int(rec["time_ns"].iloc[-1])
    ev = [pd.DataFrame({"_row": [int(rec["_row"].iloc[0]), int(rec["_row"].iloc[-1])], "time_ns": [t0, t1],
                        "kind": ["gang_complete", "release"], "step": [None, None], "duration_s": np.nan})]
    book.flag_rows([int(rec["_row"].iloc[0])], "held_from_process_records",
                   f"rank {rank} attempt {attempt}: held time runs from this process's first structured "
                   "record to its last (the allocation's own times are not in this log)")
    if s_s.size:
        ev.append(pd.DataFrame({"_row": [int(steps["_row"].iloc[0])], "time_ns": [int(s_s[0])],
                                "kind": ["first_step"], "step": [steps["step"].iloc[0]],
                                "duration_s": np.nan}))
    for name, begin, end in (("checkpoint_save", "checkpoint_begin", "checkpoint_commit"),
                             ("eval", "eval_begin", "eval_end")):
        p = spans[spans["span"] == name]
        dur = (p["end_ns"].to_numpy() - p["start_ns"].to_numpy()) / NS_PER_S
        ev += [pd.DataFrame({"_row": p["_row"].to_numpy(), "time_ns": p["start_ns"].to_numpy(),
                             "kind": begin, "step": p["step"].to_numpy(dtype=object), "duration_s": np.nan}),
               pd.DataFrame({"_row": p["_row"].to_numpy(), "time_ns": p["end_ns"].to_numpy(), "kind": end,
                             "step": p["step"].to_numpy(dtype=object), "duration_s": dur})]
    init = spans[spans["span"].isin(INIT_SPANS) | spans["span"].str.endswith(".build")]
    ev.append(pd.DataFrame({"_row": init["_row"].to_numpy(), "time_ns": init["start_ns"].to_numpy(),
                            "kind": "custom_badput:" + init["span"].astype(str),
                            "step": init["step"].to_numpy(dtype=object),
                            "duration_s": (init["end_ns"].to_numpy() - init["start_ns"].to_numpy())
                            / NS_PER_S}))
    loads = spans[spans["span"] == "checkpoint_load"]
    if not loads.empty and not steps.empty:
        first = steps.iloc[0]
        if first["step"] is not None and first["relative_step"] is not None:
            loaded = int(first["step"]) - int(first["relative_step"])
            if loaded > 0:
                last = loads.iloc[[-1]]
                ev.append(pd.DataFrame({"_row": last["_row"].to_numpy(),
                                        "time_ns": last["end_ns"].to_numpy(), "kind": "restore",
                                        "step": [loaded], "duration_s": np.nan}))
                book.flag_rows(last["_row"].to_numpy(), "restore_step_from_relative_step",
                               f"checkpoint_load restored step {loaded} (the first step {int(first['step'])} "
                               f"less its relative_step {int(first['relative_step'])})")
    if not errors.empty:
        ev.append(pd.DataFrame({"_row": errors["_row"].to_numpy(), "time_ns": errors["time_ns"].to_numpy(),
                                "kind": "failure", "step": errors["step"].to_numpy(dtype=object),
                                "duration_s": np.nan}))
    events = concat_frames(ev)
    events = events.assign(_file=file, job_id=job, attempt=attempt, rank=rank,
                           time=utc_times(events["time_ns"].to_numpy(dtype=np.int64)).array,
                           step=pd.array(events["step"].to_numpy(dtype=object), dtype="Int64"))
    return step_rows, events.drop(columns="time_ns")


def read(paths: PathLike | Sequence[PathLike], *, tz: str | None = None, window: Any = None,
         job_id: str | None = None) -> tuple[TimelineTables, Ledger]:
    """Read torchtitan structured-log JSONL files (one per rank and process) into canonical tables.

    See the module docstring for the mapping.  Files of one rank are its attempts, in the order of
    their first record.

    Parameters
    ----------
    paths
        One file or several (plain or gzip): every rank's files of one job.
    tz
        Not used: ``time_us`` is POSIX microseconds (UTC).
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; checked here, applied by the
        measurement (every record is kept).
    job_id
        The job's name; each rank is the job ``<job_id>/rank<r>`` (default: the records' ``source``,
        e.g. ``training``).

    Returns
    -------
    tuple of (TimelineTables, Ledger)
        ``{"steps": ..., "events": ...}`` (with a ``rank`` column each) and the ledger over every
        non-blank line.
    """
    parse_window(window)
    if job_id is not None and not str(job_id).strip():
        raise DomainError("job_id must not be blank")
    files = as_paths(paths)
    books: dict[str, FileBook] = {}
    parsed = []
    for f in files:
        rec = _parse_file(f, books)
        if not rec.empty:
            parsed.append((f, rec))
    order = sorted(parsed, key=lambda fr: (int(fr[1]["rank"].iloc[0]), int(fr[1]["time_ns"].iloc[0])))
    all_steps, all_events = [], []
    attempts: dict[int, int] = {}
    for f, rec in order:  # one iteration per process file
        rank = int(rec["rank"].iloc[0])
        attempt = attempts.get(rank, 0)
        attempts[rank] = attempt + 1
        source = rec["source"].iloc[0] or "torchtitan"
        job = f"{job_id if job_id is not None else source}/rank{rank}"
        s, e = _attempt_tables(rec, books[str(f)], job, attempt)
        all_steps.append(s)
        all_events.append(e)
    steps = concat_frames(all_steps)
    events = concat_frames(all_events)
    steps = check_steps(steps, books, reorder_is_repair=False) if not steps.empty else steps
    events = check_events(events, books, reorder_is_repair=False) if not events.empty else events
    if not events.empty:
        no_steps = pd.DataFrame(columns=["job_id", "attempt"])
        cross_checks(steps if not steps.empty else no_steps, events, books)
    ledger = close_books(books)
    out_steps = finalise_steps(steps)
    out_steps["rank"] = steps["rank"].to_numpy(dtype=np.int64) if not steps.empty else np.zeros(0, np.int64)
    out_events = finalise_events(events, extra=("rank",))
    out_events["rank"] = out_events["rank"].astype("int64")
    return TimelineTables(out_steps, out_events), ledger


#: The torchtitan reader under the name it is exported by (the same callable as :func:`read`).
read_torchtitan = read
