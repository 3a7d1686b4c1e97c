"""Reader of MLPerf ``:::MLLOG`` result logs (format ``mlperf``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import load_json, time_range
from fleetlib.quality import DomainError, InputError, Ledger, check_nonnegative
from fleetlib.runtime.readers._common import (
    _NS_PER_S,
    _TIME_DTYPE,
    PathLike,
    TimelineTables,
    _as_paths,
    _check_events,
    _check_steps,
    _close,
    _concat,
    _drop_rejected,
    _FileBook,
    _finalise_events,
    _finalise_steps,
    _ns,
    _protocol_window,
    _read_text,
    _reject,
    _stem,
    _timeline_tables,
)
from fleetlib.runtime.timeline import (
    TimelineLedger,
)

# ---------------------------------------------------------------------------------------------------
# MLPerf :::MLLOG logs
# ---------------------------------------------------------------------------------------------------

_MLLOG_TAG = ":::MLLOG"
_MLLOG_TYPES = ("INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME")
_MLLOG_FAMILIES = ("init", "run", "block", "eval", "epoch")
#: A rank prefix before the tag: ``0: ``, ``[3] ``, ``[1,3]<stdout>:`` (the rank is the last number).
_RANK_PREFIX = re.compile(r"^.*?(?:\[(?:\d+,)?(\d+)\](?:<std(?:out|err)>)?|(?<![\w.])(\d+))\s*:?\s*$")


@dataclass
class _MllogParse:
    file: str
    job_id: str
    records: pd.DataFrame  # kept records: _row, time, event_type, key, value, metadata
    pairs: dict[str, pd.DataFrame]  # family -> matched intervals: start, end, start_row, end_row
    books: dict[str, _FileBook]


def _parse_mllog(path: Path, *, job_id: str | None, rank_copy_tolerance_s: float) -> _MllogParse:
    plausible_ms = tuple(t.value / 1e6 for t in time_range())
    text = _read_text(path)
    file = str(path)
    truncated = bool(text) and not text.endswith("\n")
    lines, rows, bad_rows, bad_reasons, bad_fields = [], [], [], [], []
    for lineno, line in enumerate(text.splitlines(), start=1):
        at = line.find(_MLLOG_TAG)
        if at < 0:
            continue  # not a record of this format (stdout, :::SYSJSON, ...)
        rows.append(lineno)
        prefix = _RANK_PREFIX.match(line[:at])
        payload = line[at + len(_MLLOG_TAG):].strip()
        try:  # bounded nesting, finite numbers only (fleetlib._io)
            obj = load_json(payload, file=file, row=lineno)
        except InputError as exc:
            bad_rows.append(lineno)
            bad_fields.append(None)
            why = str(exc).split(": ", 1)[-1].split("; expected one complete JSON")[0]
            bad_reasons.append(f"invalid JSON after {_MLLOG_TAG} ({why.removeprefix('not valid JSON (')}"
                               + ("" if why.startswith("not valid JSON (") else ")"))
            continue
        if not isinstance(obj, dict):
            bad_rows.append(lineno)
            bad_fields.append(None)
            bad_reasons.append(f"the {_MLLOG_TAG} payload is not a JSON object")
            continue
        t = obj.get("time_ms")
        problem = None
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            problem = ("time_ms", f"time_ms must be a number of milliseconds since the epoch; got {t!r}")
        elif not plausible_ms[0] <= t < plausible_ms[1]:  # fleetlib._io.Limits: no 1970, no overflow
            problem = ("time_ms", f"time_ms {t!r} is outside the plausible range (limits earliest_year, "
                                  "latest_year)")
        elif obj.get("event_type") not in _MLLOG_TYPES:
            problem = ("event_type",
                       f"event_type must be one of {_MLLOG_TYPES}; got {obj.get('event_type')!r}")
        elif not isinstance(obj.get("key"), str):
            problem = ("key", f"key must be a string; got {obj.get('key')!r}")
        if problem:
            bad_rows.append(lineno)
            bad_fields.append(problem[0])
            bad_reasons.append(problem[1])
            continue
        lines.append((lineno, obj, None if prefix is None else int(prefix.group(1) or prefix.group(2))))
    book = _FileBook(file, rows, truncated=truncated)
    for fld in dict.fromkeys(bad_fields):
        mine = [i for i, f in enumerate(bad_fields) if f == fld]
        book.reject_rows([bad_rows[i] for i in mine], fld, [bad_reasons[i] for i in mine])
    books = {file: book}
    jid = job_id if job_id is not None else _stem(path)
    if not lines:
        return _MllogParse(file, jid, pd.DataFrame(columns=["_file", "_row", "time", "event_type", "key"]),
                           {}, books)
    recs = pd.DataFrame({
        "_file": file,
        "_row": [r for r, _, _ in lines],
        "_rank": pd.array([k for _, _, k in lines], dtype="Int64"),
        "time_ms": [float(o["time_ms"]) for _, o, _ in lines],
        "event_type": [o["event_type"] for _, o, _ in lines],
        "key": [o["key"] for _, o, _ in lines],
        "value": [o.get("value") for _, o, _ in lines],
        "metadata": [o.get("metadata") for _, o, _ in lines],
        "_sig": [json.dumps({k: v for k, v in o.items() if k != "time_ms"}, sort_keys=True, default=str)
                 for _, o, _ in lines],
    })
    recs["time"] = pd.to_datetime(recs["time_ms"], unit="ms", utc=True).astype(_TIME_DTYPE)
    # 1. exact per-rank copies (identical payload, identical time)
    exact = recs.duplicated(["_sig", "time_ms"], keep="first").to_numpy()
    if exact.any():
        first = recs.groupby(["_sig", "time_ms"], sort=False)["_row"].transform("first")
        _reject(books, recs[exact], None, [f"per-rank copy of line {r}" for r in first[exact]])
    recs = recs.loc[~exact].reset_index(drop=True)
    # 1b. rank-prefixed logs: a record of another rank with the same payload as a record of the first
    # rank, within the tolerance, is that record's copy (works however the copies interleave)
    ranks = recs["_rank"].dropna().unique()
    if len(ranks) > 1:
        ref_rank = recs["_rank"].dropna().iloc[0]
        is_ref = (recs["_rank"] == ref_rank).fillna(False).to_numpy(dtype=bool)
        ref = recs.loc[is_ref, ["_sig", "time_ms", "_row"]].rename(columns={"_row": "_ref_row"})
        ref = ref.assign(_ref_t=ref["time_ms"]).sort_values("time_ms")
        other = recs.loc[~is_ref, ["_sig", "time_ms", "_row"]].sort_values("time_ms")
        m = pd.merge_asof(other, ref, on="time_ms", by="_sig", direction="nearest",
                          tolerance=rank_copy_tolerance_s * 1000.0)
        hit = m[m["_ref_row"].notna()]
        if not hit.empty:
            copies = recs.set_index("_row").loc[hit["_row"].to_numpy()].reset_index()
            _reject(books, copies, None,
                    [f"per-rank copy of line {int(r)} ({abs(t - rt):.0f} ms apart)" for r, t, rt in
                     zip(hit["_ref_row"], hit["time_ms"], hit["_ref_t"], strict=True)])
            recs = _drop_rejected(recs, books)
    # 2. interval markers: key and event type must agree
    fam = recs["key"].str.extract(r"^(init|run|block|eval|epoch)_(start|stop)$")
    is_marker = fam[0].notna().to_numpy()
    expected = np.where(fam[1].to_numpy(dtype=object) == "start", "INTERVAL_START", "INTERVAL_END")
    disagree = is_marker & (recs["event_type"].to_numpy(dtype=object) != expected)
    if disagree.any():
        d = recs[disagree]
        _reject(books, d, "event_type", [f"key {k!r} with event_type {e!r}: the two disagree"
                                         for k, e in zip(d["key"], d["event_type"], strict=True)])
    recs = recs.assign(_family=fam[0], _is_start=fam[1] == "start")
    recs = _drop_rejected(recs, books)
    markers = recs[recs["_family"].notna()].sort_values(["time_ms", "_row"], kind="stable")
    # 3. near copies: consecutive same-type markers of one family with the same payload, within tolerance
    if not markers.empty:
        fam_s = markers["_family"]
        change = markers["_is_start"].ne(markers.groupby(fam_s, sort=False)["_is_start"].shift(1))
        run_id = change.astype("int64").groupby(fam_s, sort=False).cumsum()
        grp = markers.groupby([fam_s, run_id, markers["_sig"]], sort=False)
        first_t = grp["time_ms"].transform("first")
        first_row = grp["_row"].transform("first")
        is_first = (markers["_row"] == first_row).to_numpy()
        near = ~is_first & ((markers["time_ms"] - first_t) <= rank_copy_tolerance_s * 1000.0).to_numpy()
        if near.any():
            nm = markers[near]
            _reject(books, nm, None,
                    [f"per-rank copy of line {r} ({k}, {dt:.0f} ms later)" for r, k, dt in
                     zip(first_row[near], nm["key"], (nm["time_ms"] - first_t[near]), strict=True)])
            markers = markers[~near]
    # 4. pair start/stop markers of each family; unmatched ones are reported, not guessed
    pairs: dict[str, pd.DataFrame] = {}
    for family in _MLLOG_FAMILIES:
        m = markers[markers["_family"] == family]
        if m.empty:
            continue
        s = m["_is_start"].to_numpy(dtype=bool)
        nxt = np.r_[s[1:], True]  # is the next marker a start? (a start at the end has no stop)
        prv = np.r_[False, s[:-1]]  # is the previous marker a start?
        start_ok = s & ~nxt
        stop_ok = ~s & prv
        lonely_start = s & ~start_ok
        lonely_stop = ~s & ~stop_ok
        if lonely_start.any():
            _reject(books, m[lonely_start], "key",
                    f"{family}_start with no matching {family}_stop after it: interval not counted")
        if lonely_stop.any():
            _reject(books, m[lonely_stop], "key",
                    f"{family}_stop with no matching {family}_start before it: interval not counted")
        starts, stops = m[start_ok], m[stop_ok]
        pairs[family] = pd.DataFrame({
            "start": starts["time"].array, "end": stops["time"].array,
            "start_row": starts["_row"].to_numpy(), "end_row": stops["_row"].to_numpy(),
            "start_ms": starts["time_ms"].to_numpy(), "end_ms": stops["time_ms"].to_numpy(),
            "metadata": stops["metadata"].to_numpy(),
        })
        pairs[family]["start"] = pairs[family]["start"].astype(_TIME_DTYPE)
        pairs[family]["end"] = pairs[family]["end"].astype(_TIME_DTYPE)
    recs = _drop_rejected(recs, books)
    return _MllogParse(file, jid, recs, pairs, books)


def _mllog_tables(p: _MllogParse) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Canonical steps (training blocks) and events of one parsed MLPerf log."""
    recs = p.records
    if recs.empty:
        return pd.DataFrame(), pd.DataFrame()
    init_starts = recs.loc[recs["key"] == "init_start", "time"].sort_values()
    # attempt: number of init_start markers at or before a time, minus one (a log is normally one run)
    bounds = _ns(init_starts)

    def attempt_of(times: pd.Series) -> np.ndarray:
        if bounds.size == 0:
            return np.zeros(len(times), dtype=np.int64)
        return np.maximum(np.searchsorted(bounds, _ns(times), side="right") - 1, 0).astype(np.int64)

    steps = pd.DataFrame()
    blocks = p.pairs.get("block")
    if blocks is not None and not blocks.empty:
        steps = pd.DataFrame({
            "_file": p.file, "_row": blocks["start_row"].to_numpy(), "job_id": p.job_id,
            "attempt": attempt_of(blocks["start"]), "step": np.arange(len(blocks), dtype=np.int64),
            "start": blocks["start"], "end": blocks["end"], "input_wait_s": 0.0,
        })
    ev = []
    launches = 0
    for _, r in recs[recs["key"].isin(["init_start", "run_stop"])].iterrows():  # a handful per log
        kind = "gang_complete" if r["key"] == "init_start" else "release"
        ev.append({"_file": p.file, "_row": r["_row"], "time": r["time"], "kind": kind, "step": pd.NA,
                   "duration_s": np.nan})
        if kind == "gang_complete":
            if launches:  # every MLPerf init is a cold launch, also a second run in one file
                ev.append({"_file": p.file, "_row": r["_row"], "time": r["time"], "kind": "cold_start",
                           "step": pd.NA, "duration_s": np.nan})
            launches += 1
    events = pd.DataFrame(ev)
    evals = p.pairs.get("eval")
    if evals is not None and not evals.empty:
        blocks_done = (np.searchsorted(_ns(blocks["end"]), _ns(evals["start"]), side="right")
                       if blocks is not None else np.zeros(len(evals), dtype=np.int64))
        step_ref = pd.array(np.asarray(blocks_done, dtype=np.int64) - 1, dtype="Int64")
        step_ref[np.asarray(blocks_done) == 0] = pd.NA
        dur = (_ns(evals["end"]) - _ns(evals["start"])) / _NS_PER_S
        events = _concat([events, pd.DataFrame({
            "_file": p.file, "_row": evals["start_row"].to_numpy(), "time": evals["start"],
            "kind": "eval_begin", "step": step_ref, "duration_s": np.nan}), pd.DataFrame({
            "_file": p.file, "_row": evals["end_row"].to_numpy(), "time": evals["end"],
            "kind": "eval_end", "step": step_ref, "duration_s": dur})])
    if not steps.empty:
        firsts = steps.sort_values("start").groupby("attempt", as_index=False).first()
        events = _concat([events, pd.DataFrame({
            "_file": p.file, "_row": firsts["_row"].to_numpy(), "time": firsts["start"],
            "kind": "first_step", "step": pd.array(firsts["step"].to_numpy(), dtype="Int64"),
            "duration_s": np.nan})])
    if not events.empty:
        events["time"] = events["time"].astype(_TIME_DTYPE)
        events["job_id"] = p.job_id
        events["attempt"] = attempt_of(events["time"])
    return steps, events


def read_mlperf(paths: PathLike | Sequence[PathLike], *, job_id: str | None = None,
                rank_copy_tolerance_s: float = 10.0) -> tuple[TimelineTables, TimelineLedger]:
    """Read MLPerf ``:::MLLOG`` result logs into canonical steps and events.

    Each file is one job (``job_id`` defaults to the file name without suffix).  Lines without the
    ``:::MLLOG`` tag (other output, ``:::SYSJSON``) are not records of this format and are not
    counted; text before the tag on a line (a rank prefix such as ``0: ``) is ignored.

    * Per-rank copies are removed and rejected as such (the first is kept): identical payloads at
      the same time; in a log whose lines carry rank prefixes, a record of another rank with the same
      payload as a record of the first rank within ``rank_copy_tolerance_s``; and, in any log,
      consecutive same-type interval markers of one kind with the same payload within the tolerance.
    * ``*_start`` / ``*_stop`` markers are paired in time order; a start with no stop after it, or a
      stop with no start before it, is rejected as unmatched and its interval is not counted.
    * Mapping: ``init_start`` -> ``gang_complete`` (a second run in one file also gets a
      ``cold_start``: every MLPerf init is a cold launch); each training block -> one step
      (``step`` = the block's ordinal, input wait 0);
      first block start -> ``first_step``; ``eval_start``/``eval_stop`` -> ``eval_begin``/
      ``eval_end`` (``step`` = ordinal of the last block before it, ``duration_s`` on the end);
      ``run_stop`` -> ``release``.  Other keys are kept in the parse but produce no rows.

    Parameters
    ----------
    paths
        One path or several.
    job_id
        Job id for a single file (default: the file name without suffix).
    rank_copy_tolerance_s
        Largest time difference, seconds, between per-rank copies of one marker.

    Returns
    -------
    tuple of (TimelineTables, TimelineLedger)
        The canonical tables and the ledger over all ``:::MLLOG`` records.
    """
    files = _as_paths(paths)
    tol = check_nonnegative("rank_copy_tolerance_s", rank_copy_tolerance_s)
    if job_id is not None and len(files) > 1:
        raise DomainError("job_id= names one job; several files are several jobs (leave job_id unset)")
    all_steps, all_events, books = [], [], {}
    for f in files:
        p = _parse_mllog(f, job_id=job_id, rank_copy_tolerance_s=tol)
        books.update(p.books)
        steps, events = _mllog_tables(p)
        all_steps.append(steps)
        all_events.append(events)
    steps = _check_steps(_concat(all_steps), books, reorder_is_repair=False) if any(
        not s.empty for s in all_steps) else pd.DataFrame()
    events = _check_events(_concat(all_events), books, reorder_is_repair=False) if any(
        not e.empty for e in all_events) else pd.DataFrame()
    ledger = _close(books)
    return TimelineTables(_finalise_steps(steps), _finalise_events(events)), ledger


def read(paths: PathLike | Sequence[PathLike], *, tz: str | None = None, window: Any = None,
         job_id: str | None = None, rank_copy_tolerance_s: float = 10.0
         ) -> tuple[dict[str, pd.DataFrame], Ledger]:
    """Read MLPerf result logs: the reader protocol's form of :func:`read_mlperf`.

    Parameters
    ----------
    paths
        One log or several (plain or gzip); each is one job.
    tz
        Not used: ``time_ms`` is milliseconds since the epoch, in UTC by definition.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; checked here, applied by the
        measurement (every record is kept).
    job_id, rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    tuple of (dict, Ledger)
        ``{"steps": ..., "events": ...}`` canonical tables and the ledger over every ``:::MLLOG`` record.
    """
    _protocol_window(window)
    tables, ledger = read_mlperf(paths, job_id=job_id, rank_copy_tolerance_s=rank_copy_tolerance_s)
    return _timeline_tables(tables), ledger
