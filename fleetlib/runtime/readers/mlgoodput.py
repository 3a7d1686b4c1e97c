"""Reader of ml-goodput-measurement ``<job>_timeline.jsonl`` cache entries (format ``mlgoodput``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import as_paths, json_depth_rows, load_json, nesting_message, out_of_range_int, read_text
from fleetlib.quality import InputError, Ledger
from fleetlib.runtime.readers._common import (
    MAX_POSIX_S,
    NS_PER_S,
    FileBook,
    PathLike,
    TimelineTables,
    attempts_from_bounds,
    check_events,
    check_steps,
    close_books,
    concat_frames,
    cross_checks,
    drop_rejected,
    file_stem,
    finalise_events,
    finalise_steps,
    flag,
    format_time,
    parse_window,
    posix_s_to_utc,
    reject,
    reject_implausible_seconds,
    sort_events,
    utc_ns,
)
from fleetlib.runtime.schema import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    TIME_DTYPE,
)

# ---------------------------------------------------------------------------------------------------
# ml-goodput-measurement <job>_timeline.jsonl
# ---------------------------------------------------------------------------------------------------

_PHASE_KEYS = {
    "tpu_init_start_time": "tpu_init_begin", "tpu_init_end_time": "tpu_init_end",
    "training_prep_start_time": "training_prep_begin", "training_prep_end_time": "training_prep_end",
    "data_loading_start_time": "data_loading_begin", "data_loading_end_time": "data_loading_end",
}
_SLICE_KEYS = ("active_slices", "total_slices", "available_slices", "elastic_slice_counts_timestamp")


def _num(obj: Mapping[str, Any], key: str) -> float | None:
    v = obj.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _classify_mlgoodput(obj: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Return (fields, None, None) for a usable record, or (None, field, reason) for a rejected one."""
    et = obj.get("event_type")
    if et in ("save", "restore", "emergency_restore"):
        step = obj.get("step")
        try:
            step_i = int(step) if step is not None and not isinstance(step, bool) else None
        except (TypeError, ValueError):
            step_i = None
        if step_i is None or step_i < 0 or (isinstance(step, float) and step != step_i):
            return None, "step", f"checkpoint {et} record needs an integer step; got {step!r}"
        directory = str(obj.get("directory") or "")
        if et == "save":
            t = _num(obj, "checkpoint_manager_blocking_start_time")
            d = _num(obj, "checkpoint_manager_blocking_duration_secs")
            if t is None:
                return None, "checkpoint_manager_blocking_start_time", (
                    "save record without checkpoint_manager_blocking_start_time: it cannot be placed in time")
            if d is None or d < 0:
                return None, "checkpoint_manager_blocking_duration_secs", (
                    "save record needs a duration >= 0; got "
                    f"{obj.get('checkpoint_manager_blocking_duration_secs')!r}")
            return {"rtype": "save", "t": t, "dur": d, "step": step_i,
                    "where": "persistent" if directory.startswith("gs://") else "local",
                    "sync": obj.get("synchronous"), "preempt_t": _num(obj, "preemption_received_at")
                    if obj.get("reached_preemption") else None}, None, None
        t = _num(obj, "checkpoint_manager_start_time")
        d = _num(obj, "checkpoint_manager_duration_secs")
        if t is None:
            t, d = _num(obj, "checkpointer_start_time"), _num(obj, "checkpointer_duration_secs")
        if t is None:
            return None, "checkpoint_manager_start_time", (
                f"{et} record without a start time: it cannot be placed in time")
        if d is not None and d < 0:
            return None, "checkpoint_manager_duration_secs", "restore duration must be >= 0"
        return {"rtype": "restore", "t": t, "dur": d, "step": step_i,
                "where": "persistent" if directory.startswith("gs://") else "local"}, None, None
    found = []
    if "step_count" in obj or "step_start_time" in obj:
        found.append("step")
    for key in ("job_start_time", "job_end_time", *_PHASE_KEYS, "custom_badput_event_type",
                "elastic_wait_event_type"):
        if key in obj:
            found.append(key)
    if ("elastic_reinit_start_time" in obj or "elastic_reinit_end_time" in obj) and \
            "elastic_wait_event_type" not in obj:
        found.append("elastic_reinit_start_time")
    if len(found) > 1:
        return None, None, f"record mixes several timeline fields ({', '.join(found)})"
    if not found and "elastic_slice_counts_timestamp" in obj:
        return _slice_counts(obj)
    if not found:
        if any(k in obj for k in _SLICE_KEYS):
            return None, "elastic_slice_counts_timestamp", "elastic slice-count record without its timestamp"
        keys = sorted(k for k in obj if k != "job_name")
        return None, None, f"unrecognised record (keys {keys})"
    kind = found[0]
    if kind == "step":
        sc, t = obj.get("step_count"), _num(obj, "step_start_time")
        if isinstance(sc, bool) or not isinstance(sc, int) or sc < 0:
            return None, "step_count", f"step_count must be an integer >= 0; got {sc!r}"
        if t is None:
            return None, "step_start_time", (
                f"step_start_time must be POSIX seconds; got {obj.get('step_start_time')!r}")
        return {"rtype": "step", "t": t, "step": sc}, None, None
    if kind in ("job_start_time", "job_end_time") or kind in _PHASE_KEYS:
        t = _num(obj, kind)
        if t is None:
            return None, kind, f"{kind} must be POSIX seconds; got {obj.get(kind)!r}"
        rtype = {"job_start_time": "job_start", "job_end_time": "job_end"}.get(kind, _PHASE_KEYS.get(kind))
        return {"rtype": rtype, "t": t}, None, None
    prefix = {"custom_badput_event_type": "custom_badput_event", "elastic_wait_event_type": "elastic_wait",
              "elastic_reinit_start_time": "elastic_reinit"}[kind]
    rtype = {"custom_badput_event_type": "custom", "elastic_wait_event_type": "elastic_wait",
             "elastic_reinit_start_time": "elastic_reinit"}[kind]
    label = str(obj.get(kind, "")).strip() if kind != "elastic_reinit_start_time" else ""
    has_start, has_end = f"{prefix}_start_time" in obj, f"{prefix}_end_time" in obj
    t, t2 = _num(obj, f"{prefix}_start_time"), _num(obj, f"{prefix}_end_time")
    if has_start and has_end:  # the combined form (one record for the interval)
        if t is None or t2 is None or t2 < t:
            return None, f"{prefix}_start_time", (
                f"{prefix} record needs POSIX start and end times with end >= start")
        return {"rtype": rtype, "t": t, "t2": t2, "label": label}, None, None
    # the recorder's form: the start and the end of the interval are two records, paired later
    side, value = ("start", t) if has_start else ("end", t2)
    if value is None:
        key = f"{prefix}_{side}_time"
        return None, key, f"{key} must be POSIX seconds; got {obj.get(key)!r}"
    return {"rtype": f"{rtype}_{side}", "t": value, "label": label}, None, None


def _slice_counts(obj: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Read an ``elastic_slice_counts`` record: its time and the slices available (held)."""
    t = _num(obj, "elastic_slice_counts_timestamp")
    if t is None:
        return None, "elastic_slice_counts_timestamp", (
            "elastic_slice_counts_timestamp must be POSIX seconds; got "
            f"{obj.get('elastic_slice_counts_timestamp')!r}")
    for key in ("available_slices", "active_slices", "total_slices"):
        v = obj.get(key)
        if key in obj and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            return None, key, f"{key} must be an integer >= 0; got {v!r}"
    if "available_slices" not in obj:
        return None, "available_slices", "elastic slice-count record without available_slices"
    return {"rtype": "slices", "t": t, "available": int(obj["available_slices"])}, None, None


def _pair_begin_end(frame: pd.DataFrame, begin: str, end: str,
                    books: Mapping[str, FileBook]) -> pd.DataFrame:
    """Pair begin/end marker rows of one phase per (job, attempt); flag unpaired ones."""
    m = frame[frame["kind"].isin([begin, end])].sort_values(["job_id", "attempt", "time", "_row"],
                                                            kind="stable")
    if m.empty:
        return pd.DataFrame(columns=["job_id", "attempt", "start", "end"])
    is_b = (m["kind"] == begin).to_numpy()
    g = [m["job_id"], m["attempt"]]
    nxt_b = m["kind"].eq(begin).groupby(g, sort=False).shift(-1).fillna(True).to_numpy(dtype=bool)
    prv_b = m["kind"].eq(begin).groupby(g, sort=False).shift(1).fillna(False).to_numpy(dtype=bool)
    ok_b = is_b & ~nxt_b
    ok_e = ~is_b & prv_b
    lonely = (is_b & ~ok_b) | (~is_b & ~ok_e)
    if lonely.any():
        flag(books, m[lonely], "unpaired_phase_marker",
              [f"{k} marker has no partner: the interval is not used"
                                         for k in m.loc[lonely, "kind"]])
    b, e = m[ok_b], m[ok_e]
    return pd.DataFrame({"job_id": b["job_id"].to_numpy(), "attempt": b["attempt"].to_numpy(),
                         "start": b["time"].array, "end": e["time"].array})


_HALF_FAMILIES = {"custom": "custom badput event", "elastic_wait": "elastic wait",
                  "elastic_reinit": "elastic re-initialisation"}


def _pair_halves(rec: pd.DataFrame, books: Mapping[str, FileBook]) -> pd.DataFrame:
    """Pair the recorder's split start/end records of one interval (custom badput, elastic events).

    ml-goodput-measurement writes ``record_custom_badput_event_start_time`` and ``..._end_time`` (and
    the elastic wait / re-init recorders) as two records.  Per job, interval family and event type, in
    time order, a start followed by an end is one interval (the peer's own calculator pairs them the
    same way: a later start replaces an unfinished one).  The pair becomes one record placed at the
    start's line; the end's line is kept as read (it carries no other information).  Unpaired halves
    are rejected, each with its reason.
    """
    half = rec["rtype"].str.endswith(("_start", "_end")) & rec["rtype"].str.rsplit("_", n=1).str[0].isin(
        list(_HALF_FAMILIES))
    if not half.any():
        return rec
    h = rec[half].copy()
    h["_family"] = h["rtype"].str.rsplit("_", n=1).str[0]
    h["_is_start"] = h["rtype"].str.endswith("_start")
    h = h.sort_values(["job_id", "_family", "label", "t", "_is_start", "_file", "_row"],
                      ascending=[True, True, True, True, False, True, True], kind="stable")
    g = [h["job_id"], h["_family"], h["label"]]
    nxt_end = (~h["_is_start"]).groupby(g, sort=False).shift(-1).fillna(False).to_numpy(dtype=bool)
    prv_start = h["_is_start"].groupby(g, sort=False).shift(1).fillna(False).to_numpy(dtype=bool)
    is_s = h["_is_start"].to_numpy()
    ok_s, ok_e = is_s & nxt_end, ~is_s & prv_start
    lonely = ~(ok_s | ok_e)
    if lonely.any():
        lo = h[lonely]
        reject(books, lo, "time", [
            f"{'start' if st else 'end'} of a {_HALF_FAMILIES[f]}"
            f"{f' ({lab!r})' if lab else ''} with no matching "
            f"{'end' if st else 'start'} record: the interval cannot be placed"
            for st, f, lab in zip(lo["_is_start"], lo["_family"], lo["label"], strict=True)])
    starts, ends = h[ok_s], h[ok_e]
    pairs = starts.assign(rtype=starts["_family"].to_numpy(), t2=ends["t"].to_numpy())
    pairs = pairs.drop(columns=["_family", "_is_start"])
    rest = rec[~half.to_numpy()]
    return pd.concat([rest, pairs], ignore_index=True).sort_values(["time", "_file", "_row"], kind="stable") \
        .reset_index(drop=True)


def _default_job(lines: Sequence[str], stem: str) -> str:
    """Job of records with no ``job_name`` (the checkpoint logger writes none): the file's one job name.

    When the file's records name exactly one job, that is it; otherwise the file name less
    ``_timeline.jsonl``.
    """
    names = set(re.findall(r'"job_name"\s*:\s*"((?:[^"\\]|\\.)*)"', "\n".join(lines[:100_000])))
    return json.loads(f'"{next(iter(names))}"') if len(names) == 1 else stem


def _note(bad: dict[str | None, tuple[list[int], list[str]]], row: int, field: str | None,
          reason: str) -> None:
    """Collect a rejected line under its field (the book is told once per field, vectorised)."""
    rows, reasons = bad.setdefault(field, ([], []))
    rows.append(row)
    reasons.append(reason)


def read(paths: PathLike | Sequence[PathLike], *, tz: str | None = None, window: Any = None,
         job_id: str | None = None) -> tuple[TimelineTables, Ledger]:
    """Read ml-goodput-measurement ``<job>_timeline.jsonl`` cache entries into canonical tables.

    One JSON object per line, as the recorder writes them (POSIX seconds, UTC):

    * ``job_start_time`` -> a new attempt and its ``gang_complete``.  Attempts come only from these
      explicit markers.  A step number that repeats (or goes back) inside one attempt is flagged as
      an inferred restart (the fallback); no step is taken to last across it.
    * ``job_end_time`` -> ``release`` and ``job_completed`` (the job finished: with the default
      ``clean_end_commit`` the measurement counts it as the final commit).
    * ``step_count`` + ``step_start_time`` -> a step that ends at the next step's start, or earlier
      at the first pause after it (a checkpoint save's blocking section, an eval, a custom badput
      interval, an elastic wait, a preemption) or at ``job_end_time``.  A step with none of these
      after it did not finish; it is rejected (its time is lost work for the partition to charge).
      Time inside a step that lies in a ``data_loading_start/end_time`` interval is its
      ``input_wait_s`` (the recorder wraps the blocking batch fetch).
    * TPU init, training prep and data loading markers -> auxiliary ``*_begin``/``*_end`` events.
    * Orbax ``save`` -> ``checkpoint_begin`` (``duration_s`` = the checkpoint manager's blocking time)
      and ``checkpoint_commit`` at the end of the blocking section (flagged when the save was
      asynchronous: the log has no later commit time); ``reached_preemption`` adds a ``preempt``
      at ``preemption_received_at``.  Orbax ``restore``/``emergency_restore`` -> ``restore``.
      Per-host copies of one save or restore in one attempt are rejected (the first is kept).
    * ``custom_badput_event_type`` -> ``eval_begin``/``eval_end`` when the type names an eval,
      otherwise one ``custom_badput:<type>`` event with its duration.
    * Elastic records: an elastic wait (``slice_down``, ``scale_up``, any type) -> ``resize_begin`` at its
      start, a re-initialisation -> ``resize_end`` at its start (their logged durations are kept as
      ``duration_s``; the partition runs the wait to the re-initialisation and that to the next
      step); ``elastic_slice_counts`` -> ``device_count`` markers whose ``devices_after`` is the slices
      available.  Resizes carry ``devices_before`` / ``devices_after``: the job's slice count just
      before and at their start.
    * An attempt that ends with neither ``job_end_time`` nor a preemption but is followed by another
      attempt gets a ``failure`` event at its last record (flagged: the format records no failure
      time, so this is a lower bound) and a ``release`` at the next ``job_start_time`` (flagged: the
      format's total time runs from job start to job end, so the outage is held time).  An attempt
      that ends with a preemption and no ``job_end_time`` gets no release: the time until the next
      start is queue wait, not held time.

    Parameters
    ----------
    paths
        One path or several (plain or gzip).
    tz
        Not used: the recorder writes POSIX seconds (UTC).
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; checked here, applied by the
        measurement (every record is kept).
    job_id
        Job id for records without ``job_name`` (default: the file name less ``_timeline.jsonl``).

    Returns
    -------
    tuple of (TimelineTables, Ledger)
        The canonical tables (``{"steps": ..., "events": ...}``) and the ledger over every non-blank
        line.
    """
    parse_window(window)
    files = as_paths(paths)
    books: dict[str, FileBook] = {}
    parsed: list[dict[str, Any]] = []
    for path in files:
        text = read_text(path)
        file = str(path)
        lines = text.splitlines()
        stem = re.sub(r"_timeline$", "", file_stem(path))
        default_job = job_id if job_id is not None else _default_job(lines, stem)
        rows = [i for i, ln in enumerate(lines, start=1) if ln.strip()]
        book = FileBook(file, rows, truncated=bool(text) and not text.endswith("\n"))
        books[file] = book
        bad: dict[str | None, tuple[list[int], list[str]]] = {}  # field -> (rows, reasons)
        too_deep = set(json_depth_rows(text, per_line=True).tolist())
        for lineno in rows:
            if lineno in too_deep:
                _note(bad, lineno, None, nesting_message())
                continue
            try:
                obj = load_json(lines[lineno - 1], file=file, row=lineno, depth_checked=True)
            except InputError as exc:
                why = str(exc).split(": ", 1)[-1].split(" (a truncated line?)")[0]
                _note(bad, lineno, exc.field, why.replace("not valid JSON (", "invalid JSON (", 1))
                continue
            if not isinstance(obj, dict):
                _note(bad, lineno, None, "the line is not a JSON object")
                continue
            fields, bad_field, reason = _classify_mlgoodput(obj)
            if fields is not None:  # a time no timestamp can hold (1e20 s): refused under its own key
                beyond = [k for k, v in obj.items() if k.endswith(("_time", "_timestamp"))
                          and isinstance(v, (int, float)) and not isinstance(v, bool)
                          and abs(v) >= MAX_POSIX_S]
                if beyond:
                    fields, bad_field = None, beyond[0]
                    reason = (f"{beyond[0]} {obj[beyond[0]]:g} (POSIX seconds) is beyond the years a time "
                              "can hold (about 2262); expected seconds since 1970")
            if fields is None:
                _note(bad, lineno, bad_field, str(reason))
                continue
            jn = obj.get("job_name")
            fields.update({"_file": file, "_row": lineno,
                           "job_id": str(jn) if isinstance(jn, str) and jn else default_job})
            parsed.append(fields)
        for fld, (bad_rows, reasons) in bad.items():
            book.reject_rows(bad_rows, fld, reasons)
    if not parsed:
        return TimelineTables.empty(), close_books(books)
    rec = pd.DataFrame(parsed)
    for col in ("t2", "dur", "step", "label", "where", "sync", "preempt_t", "available"):
        if col not in rec.columns:
            rec[col] = None
    # a time no timestamp can hold is refused here (it would wrap to 1970); a merely early one is
    # judged against its attempt's job_start_time below, which says more
    rec = reject_implausible_seconds(rec, books, ("t", "t2", "preempt_t"), representable_only=True)
    huge_step = out_of_range_int(rec["step"])
    if huge_step.any():
        reject(books, rec[huge_step], "step", [f"step {v} is beyond the int64 range (it would wrap)"
                                                for v in rec["step"][huge_step].tolist()])
        rec = rec.loc[~huge_step].reset_index(drop=True)
    if rec.empty:
        return TimelineTables.empty(), close_books(books)
    rec["step"] = pd.array(rec["step"].to_numpy(dtype=object), dtype="Int64")
    rec["time"] = posix_s_to_utc(rec["t"])
    # exact duplicates (same job, type, times, step) are copies
    sig = ["job_id", "rtype", "t", "t2", "dur", "step", "label", "where"]
    exact = rec.astype({c: "object" for c in sig}).duplicated(sig, keep="first").to_numpy()
    if exact.any():
        first = rec.astype({c: "str" for c in sig}).groupby(sig, sort=False, dropna=False)["_row"].transform(
            "first")
        reject(books, rec[exact], None, [f"duplicate of line {r}" for r in first[exact]])
        rec = rec.loc[~exact].reset_index(drop=True)
    rec = _pair_halves(rec, books)
    rec = _assign_attempts_mlgoodput(rec, books)
    # per-host copies of one checkpoint operation in one attempt
    ck = rec["rtype"].isin(["save", "restore"]).to_numpy()
    if ck.any():
        c = rec[ck]
        copy = c.duplicated(["job_id", "attempt", "rtype", "step", "where"], keep="first").to_numpy()
        if copy.any():
            first = c.groupby(["job_id", "attempt", "rtype", "step", "where"], sort=False, dropna=False)[
                "_row"].transform("first")
            cc = c[copy]
            reject(books, cc, "step", [f"per-host copy of the {t} of step {s} at line {r}" for t, s, r in
                                        zip(cc["rtype"], cc["step"], first[copy], strict=True)])
            rec = drop_rejected(rec, books)
    events = _outside_held(_mlgoodput_events(rec, books), books)
    steps = _mlgoodput_steps(rec, events, books)
    steps = check_steps(steps, books, reorder_is_repair=False)
    events = check_events(events, books, reorder_is_repair=False)
    events = sort_events(concat_frames([events, _derived_events(steps, events, rec, books)]))
    cross_checks(steps, events, books)
    ledger = close_books(books)
    return TimelineTables(finalise_steps(steps), finalise_events(events)), ledger


#: The ml-goodput-measurement reader under the name it is exported by (the same callable as :func:`read`).
read_mlgoodput = read


def _assign_attempts_mlgoodput(rec: pd.DataFrame, books: Mapping[str, FileBook]) -> pd.DataFrame:
    """Attempt of each record from job_start markers; repeated step numbers are flagged.

    A step number that repeats (or goes back) inside one attempt starts a new *segment* of that
    attempt: a step never ends across a segment boundary.  The attempt number is not changed (the
    canonical tables give every attempt a gang_complete, which such a restart lacks); the runtime
    partition infers the restart from the repeated numbers itself, and flags it.
    """
    rec = rec.sort_values(["time", "_file", "_row"], kind="stable").reset_index(drop=True)
    starts = rec.loc[rec["rtype"] == "job_start", ["job_id", "time"]]
    no_start = sorted(set(rec["job_id"]) - set(starts["job_id"]))
    for job in no_start:  # one flag per job
        first = rec[rec["job_id"] == job].head(1)
        flag(books, first, "no_job_start", f"job {job!r} has no job_start_time record: restarts can be "
                                            "seen only from repeated step numbers", "time")
    rec["attempt"] = attempts_from_bounds(rec, starts)
    steps = rec[rec["rtype"] == "step"].sort_values(["job_id", "attempt", "time", "_row"], kind="stable")
    prev = steps.groupby(["job_id", "attempt"], sort=False)["step"].shift(1)
    repeat = (steps["step"] <= prev).fillna(False).to_numpy(dtype=bool)
    rec["_segment"] = 0
    if repeat.any():
        r = steps[repeat]
        flag(books, r, "restart_inferred_from_step_numbers",
              [f"step {s} follows step {int(p)} with no job_start_time between them: a restart is "
               "assumed here (fallback from repeated step numbers)" for s, p in
               zip(r["step"], prev[repeat], strict=True)], "time")
        seg = pd.Series(repeat.astype(np.int64), index=steps.index).groupby(
            [steps["job_id"], steps["attempt"]], sort=False).cumsum()
        rec.loc[seg.index, "_segment"] = seg.to_numpy()
    return rec




def _mlgoodput_events(rec: pd.DataFrame, books: Mapping[str, FileBook]) -> pd.DataFrame:
    parts = []

    def add(sel: pd.DataFrame, kind: Any, time: Any, step: Any = pd.NA, dur: Any = np.nan,
            devices: tuple[Any, Any] | None = None) -> None:
        if sel.empty:
            return
        before, after = devices if devices is not None else (np.full(len(sel), np.nan),) * 2
        parts.append(pd.DataFrame({
            "devices_before": pd.array(before, dtype="Float64").astype("Int64"),
            "devices_after": pd.array(after, dtype="Float64").astype("Int64"),
            "_file": sel["_file"].to_numpy(), "_row": sel["_row"].to_numpy(),
            "job_id": sel["job_id"].to_numpy(), "attempt": sel["attempt"].to_numpy(),
            "time": pd.Series(time).astype(TIME_DTYPE).array,
            "kind": kind, "step": pd.array(np.asarray(step, dtype=object) if not isinstance(step, type(pd.NA))
                                           else [pd.NA] * len(sel), dtype="Int64"),
            "duration_s": np.asarray(dur, dtype="float64") if np.ndim(dur) else np.full(len(sel), dur)}))

    r = rec
    js = r[r["rtype"] == "job_start"]
    add(js, "gang_complete", js["time"])
    je = r[r["rtype"] == "job_end"]
    add(je, "release", je["time"])
    add(je, "job_completed", je["time"])  # job_end_time is written when the job finished cleanly
    for rtype in _PHASE_KEYS.values():
        sel = r[r["rtype"] == rtype]
        add(sel, rtype, sel["time"])
    sv = r[r["rtype"] == "save"]
    if not sv.empty:
        add(sv, "checkpoint_begin", sv["time"], sv["step"].to_numpy(), sv["dur"].astype("float64").to_numpy())
        commit_t = posix_s_to_utc(sv["t"].astype("float64").to_numpy()
                                   + sv["dur"].astype("float64").to_numpy())
        add(sv, "checkpoint_commit", commit_t, sv["step"].to_numpy())
        asyn = sv[sv["sync"].map(lambda v: v is not True).to_numpy(dtype=bool)]
        if not asyn.empty:
            flag(books, asyn, "asynchronous_commit",
                  [f"asynchronous save of step {s}: the log has no commit time; commit placed at the end "
                   "of the blocking section" for s in asyn["step"]])
        pre = sv[sv["preempt_t"].notna()]
        add(pre, "preempt", posix_s_to_utc(pre["preempt_t"].astype("float64").to_numpy()),
            pre["step"].to_numpy())
    rs = r[r["rtype"] == "restore"]
    add(rs, "restore", rs["time"], rs["step"].to_numpy(), rs["dur"].astype("float64").to_numpy())
    cu = r[r["rtype"] == "custom"]
    if not cu.empty:
        is_eval = cu["label"].astype("str").str.upper().str.contains("EVAL").to_numpy()
        dur = (cu["t2"].astype("float64") - cu["t"].astype("float64")).to_numpy()
        ev, other = cu[is_eval], cu[~is_eval]
        add(ev, "eval_begin", ev["time"])
        add(ev, "eval_end", posix_s_to_utc(ev["t2"].astype("float64").to_numpy()), pd.NA, dur[is_eval])
        add(other, ("custom_badput:" + other["label"].astype("str").str.lower()).to_numpy(), other["time"],
            pd.NA, dur[~is_eval])
    # elastic: slice counts -> device_count markers (slices held); a wait -> resize_begin, a
    # re-initialisation -> resize_end, with the slices held just before and at their start
    sl = r[r["rtype"] == "slices"].sort_values(["job_id", "t"], kind="stable")
    avail = sl["available"].astype("float64")
    add(sl, "device_count", sl["time"], devices=(
        avail.groupby(sl["job_id"], sort=False).shift(1).to_numpy(), avail.to_numpy()))
    for rtype, kind in (("elastic_wait", "resize_begin"), ("elastic_reinit", "resize_end")):
        sel = r[r["rtype"] == rtype]
        dur = (sel["t2"].astype("float64") - sel["t"].astype("float64")).to_numpy()
        add(sel, kind, sel["time"], pd.NA, dur,
            devices=(_slices_at(sel, sl, strict=True), _slices_at(sel, sl, strict=False)))
    return concat_frames(parts)


def _slices_at(sel: pd.DataFrame, slices: pd.DataFrame, *, strict: bool) -> np.ndarray:
    """Return the slices available at each record of ``sel``.

    Its job's last slice count at -- or, ``strict``, before -- the record's time; NaN: none.
    """
    if sel.empty or slices.empty:
        return np.full(len(sel), np.nan)
    left = pd.DataFrame({"job_id": sel["job_id"].to_numpy(), "t": sel["t"].astype("float64").to_numpy(),
                         "_i": np.arange(len(sel))}).sort_values("t", kind="stable")
    right = pd.DataFrame({"job_id": slices["job_id"].to_numpy(),
                          "t": slices["t"].astype("float64").to_numpy(),
                          "_n": slices["available"].astype("float64").to_numpy()})
    right = right.sort_values("t", kind="stable")
    m = pd.merge_asof(left, right, on="t", by="job_id", allow_exact_matches=not strict)
    out = np.full(len(sel), np.nan)
    out[m["_i"].to_numpy()] = m["_n"].to_numpy(dtype="float64", na_value=np.nan)
    return out


def _outside_held(events: pd.DataFrame, books: Mapping[str, FileBook]) -> pd.DataFrame:
    """Events that lie outside their attempt's held time (before its job start, after its job end).

    A phase marker the calculation does not use (TPU init, training prep, data loading, custom badput
    and elastic types) is flagged ``event_outside_held_time`` and kept (its time is not held time, so
    it is not charged anywhere).  Any other event cannot be placed: it is rejected with its line.
    """
    if events.empty:
        return events
    key = ["job_id", "attempt"]
    gang = events[events["kind"] == "gang_complete"].groupby(key)["time"].min().rename("_gang")
    rel = events[events["kind"] == "release"].groupby(key)["time"].min().rename("_rel")
    e = events.join(gang, on=key).join(rel, on=key)
    t = e["time"].astype(TIME_DTYPE)
    before = (e["_gang"].notna() & (t < e["_gang"].astype(TIME_DTYPE))).to_numpy(dtype=bool)
    after = (e["_rel"].notna() & (t > e["_rel"].astype(TIME_DTYPE))).to_numpy(dtype=bool)
    out = before | after
    if not out.any():
        return events
    kinds = e["kind"].astype("str")
    aux = (kinds.isin(AUXILIARY_EVENT_KINDS) | kinds.str.startswith(AUXILIARY_KIND_PREFIXES)).to_numpy()
    where = np.where(before, "before its attempt's job_start_time", "after its attempt's job_end_time")
    o = e[out & aux]
    if not o.empty:
        flag(books, o, "event_outside_held_time",
              [f"{k} at {format_time(tt)} lies {w}: not held time, kept and not charged" for k, tt, w in
               zip(o["kind"], o["time"], where[out & aux], strict=True)], "time")
    r = e[out & ~aux]
    if not r.empty:
        reject(books, r, "time",
                [f"{k} at {format_time(tt)} lies {w}: it cannot be placed in the attempt's held time"
                 for k, tt, w in zip(r["kind"], r["time"], where[out & ~aux], strict=True)])
        events = drop_rejected(events, books)
    return events


def _mlgoodput_steps(rec: pd.DataFrame, events: pd.DataFrame, books: Mapping[str, FileBook]) -> pd.DataFrame:
    s = rec[rec["rtype"] == "step"].sort_values(["job_id", "attempt", "time", "_row"], kind="stable")
    if s.empty:
        return pd.DataFrame()
    s = s[["_file", "_row", "job_id", "attempt", "_segment", "step", "time"]].rename(
        columns={"time": "start"})
    s["step"] = s["step"].astype("int64")
    s["start"] = s["start"].astype(TIME_DTYPE)
    s["_next"] = s.groupby(["job_id", "attempt", "_segment"], sort=False)["start"].shift(-1)
    # nothing that happens after the next segment began (a silent restart) can end a step before it
    seg_first = s.groupby(["job_id", "attempt", "_segment"], as_index=False, sort=False)["start"].min()
    seg_first["_limit"] = seg_first.groupby(["job_id", "attempt"], sort=False)["start"].shift(-1)
    s = s.merge(seg_first[["job_id", "attempt", "_segment", "_limit"]], on=["job_id", "attempt", "_segment"],
                how="left")
    pause_kinds = ["checkpoint_begin", "eval_begin", "preempt", "resize_begin", "resize_end"]
    if events.empty:
        pauses = pd.DataFrame(columns=["job_id", "attempt", "time"])
    else:
        is_pause = events["kind"].isin(pause_kinds) | events["kind"].str.startswith(AUXILIARY_KIND_PREFIXES)
        pauses = events.loc[is_pause, ["job_id", "attempt", "time"]].sort_values("time")
    ends = (events.loc[events["kind"] == "release", ["job_id", "attempt", "time"]]
            if not events.empty else pauses)
    s = s.sort_values("start", kind="stable")
    if not pauses.empty:
        p = pauses.rename(columns={"time": "_pause"}).copy()
        p["_pause"] = p["_pause"].astype(TIME_DTYPE)
        p["_key"] = p["_pause"]
        s = pd.merge_asof(s, p.sort_values("_key"), left_on="start", right_on="_key",
                          by=["job_id", "attempt"], direction="forward", allow_exact_matches=False)
        s = s.drop(columns="_key")
    else:
        s["_pause"] = pd.Series(pd.NaT, index=s.index, dtype=TIME_DTYPE)
    if not ends.empty:
        e = ends.groupby(["job_id", "attempt"], as_index=False)["time"].min().rename(
            columns={"time": "_release"})
        s = s.merge(e, on=["job_id", "attempt"], how="left")
    else:
        s["_release"] = pd.Series(pd.NaT, index=s.index, dtype=TIME_DTYPE)
    limit = s["_limit"].astype(TIME_DTYPE)
    pause = s["_pause"].astype(TIME_DTYPE)
    release = s["_release"].astype(TIME_DTYPE).where(s["_release"] > s["start"])
    cand = pd.concat([s["_next"].astype(TIME_DTYPE), pause.where(limit.isna() | (pause < limit)),
                      release.where(limit.isna() | (release < limit))], axis=1)
    s["end"] = cand.min(axis=1).astype(TIME_DTYPE)
    open_ = s["end"].isna().to_numpy()
    if open_.any():
        o = s[open_]
        reject(books, o, "step_count",
                [f"step {st} started at {format_time(t)} but attempt {a} recorded no later step, pause or "
                 "job_end_time before it stopped: the step did not finish"
                 for st, t, a in zip(o["step"], o["start"], o["attempt"], strict=True)])
        s = s[~open_]
    s["input_wait_s"] = 0.0
    if not events.empty and not s.empty:
        loads = _pair_begin_end(events, "data_loading_begin", "data_loading_end", books)
        if not loads.empty:
            s = s.sort_values("start", kind="stable").reset_index(drop=True)
            lo = loads.sort_values("start").copy()
            lo["start"] = lo["start"].astype(TIME_DTYPE)
            lo["end"] = lo["end"].astype(TIME_DTYPE)
            right = s[["job_id", "attempt", "start", "end"]].assign(_i=np.arange(len(s))).rename(
                columns={"start": "_s", "end": "_e"})
            m = pd.merge_asof(lo, right, left_on="start", right_on="_s", by=["job_id", "attempt"],
                              direction="backward")
            m = m[m["_i"].notna()]
            if not m.empty:
                lo_ns = np.maximum(utc_ns(m["start"]), utc_ns(m["_s"]))
                hi_ns = np.minimum(utc_ns(m["end"]), utc_ns(m["_e"]))
                ov = np.clip(hi_ns - lo_ns, 0, None) / NS_PER_S
                add = pd.Series(ov).groupby(m["_i"].astype("int64").to_numpy()).sum()
                s.loc[add.index, "input_wait_s"] = add.to_numpy()
    return s[["_file", "_row", "job_id", "attempt", "step", "start", "end", "input_wait_s"]]


def _derived_events(steps: pd.DataFrame, events: pd.DataFrame, rec: pd.DataFrame,
                    books: Mapping[str, FileBook]) -> pd.DataFrame:
    """first_step per attempt, and a failure for each attempt that died without a record."""
    parts = []
    if not steps.empty:
        f = steps.sort_values("start", kind="stable").groupby(["job_id", "attempt"], as_index=False).first()
        parts.append(pd.DataFrame({"_file": f["_file"], "_row": f["_row"], "job_id": f["job_id"],
                                   "attempt": f["attempt"], "time": f["start"].astype(TIME_DTYPE),
                                   "kind": "first_step", "step": pd.array(f["step"], dtype="Int64"),
                                   "duration_s": np.nan}))
    if events.empty:
        return concat_frames(parts)
    # attempts followed by another attempt that ended with neither job_end nor a preemption
    times = pd.concat([events[["job_id", "attempt", "time", "_file", "_row"]],
                       steps.rename(columns={"end": "time"})[["job_id", "attempt", "time", "_file", "_row"]]
                       if not steps.empty else None], ignore_index=True)
    times["time"] = times["time"].astype(TIME_DTYPE)
    last = times.sort_values("time", kind="stable").groupby(["job_id", "attempt"], as_index=False).last()
    max_attempt = last.groupby("job_id")["attempt"].transform("max")
    ended = events[events["kind"].isin(["release", "preempt", "failure"])].groupby(
        ["job_id", "attempt"]).size()
    has_end = pd.MultiIndex.from_frame(last[["job_id", "attempt"]]).isin(ended.index)
    dead = last[(last["attempt"] < max_attempt).to_numpy() & ~has_end]
    if not dead.empty:
        starts = events[events["kind"] == "gang_complete"][["job_id", "attempt", "_file", "_row", "time"]]
        starts = starts.rename(columns={"time": "_next_gang"})
        nxt = dead.assign(attempt=dead["attempt"] + 1)[["job_id", "attempt"]].merge(
            starts, on=["job_id", "attempt"], how="left")
        where = dead[["_file", "_row"]].reset_index(drop=True)
        has_next = nxt["_row"].notna().to_numpy()
        where.loc[has_next, "_file"] = nxt.loc[has_next, "_file"].to_numpy()
        where.loc[has_next, "_row"] = nxt.loc[has_next, "_row"].astype("int64").to_numpy()
        flag(books, where.assign(job_id=dead["job_id"].to_numpy(), attempt=dead["attempt"].to_numpy(),
                                  time=dead["time"].to_numpy()),
              "failure_time_inferred", [f"attempt {a} of job {j!r} ended with no job_end_time: a failure is "
                                   f"assumed at its last record, {format_time(t)} (the format records no "
                                   "failure time; this is a lower bound)" for a, j, t in
                                   zip(dead["attempt"], dead["job_id"], dead["time"], strict=True)], "time")
        parts.append(pd.DataFrame({"_file": dead["_file"].to_numpy(), "_row": dead["_row"].to_numpy(),
                                   "job_id": dead["job_id"].to_numpy(), "attempt": dead["attempt"].to_numpy(),
                                   "time": dead["time"].astype(TIME_DTYPE).array, "kind": "failure",
                                   "step": pd.array([pd.NA] * len(dead), dtype="Int64"),
                                   "duration_s": np.nan}))
        # the format's held time runs from job start to job end across restarts (its "total time"):
        # the dead attempt holds its resources until the next job start
        rel = nxt[has_next]
        if not rel.empty:
            d = dead[has_next]
            w = where[has_next].assign(job_id=d["job_id"].to_numpy(), attempt=d["attempt"].to_numpy(),
                                       time=rel["_next_gang"].to_numpy())
            flag(books, w, "release_inferred",
                  [f"attempt {a} of job {j!r}: release placed at the next job_start_time, as the format "
                   "counts the outage as held time" for a, j in zip(d["attempt"], d["job_id"], strict=True)],
                  "time")
            parts.append(pd.DataFrame({"_file": d["_file"].to_numpy(), "_row": d["_row"].to_numpy(),
                                       "job_id": d["job_id"].to_numpy(), "attempt": d["attempt"].to_numpy(),
                                       "time": rel["_next_gang"].astype(TIME_DTYPE).array, "kind": "release",
                                       "step": pd.array([pd.NA] * len(d), dtype="Int64"),
                                       "duration_s": np.nan}))
    last_attempts = last[(last["attempt"] == max_attempt).to_numpy() & ~has_end]
    if not last_attempts.empty:
        flag(books, last_attempts, "no_job_end",
              [f"attempt {a} of job {j!r} has no job_end_time: the job is still "
               "running or stopped without a record" for a, j in
               zip(last_attempts["attempt"], last_attempts["job_id"], strict=True)])
    return concat_frames(parts)
