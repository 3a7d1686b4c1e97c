"""Reader of MLPerf ``:::MLLOG`` result logs (format ``mlperf``), with the step series inside the blocks."""

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

from fleetlib._io import as_paths, current_limits, excerpt, load_json, read_text, time_range
from fleetlib.quality import DomainError, InputError, Ledger, check_nonnegative
from fleetlib.runtime.readers._common import (
    NS_PER_S,
    FileBook,
    PathLike,
    TimelineTables,
    check_events,
    check_steps,
    close_books,
    concat_frames,
    drop_rejected,
    file_stem,
    finalise_events,
    finalise_steps,
    parse_window,
    reject,
    utc_ns,
    utc_times,
)
from fleetlib.runtime.schema import TIME_DTYPE

# ---------------------------------------------------------------------------------------------------
# MLPerf :::MLLOG logs
# ---------------------------------------------------------------------------------------------------

_MLLOG_TAG = ":::MLLOG"
_MLLOG_TYPES = ("INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME")
_MLLOG_FAMILIES = ("init", "run", "block", "eval", "epoch")
#: A rank prefix before the tag: ``0: ``, ``[3] ``, ``[1,3]<stdout>:`` (the rank is the last number).
_RANK_PREFIX = re.compile(r"^.*?(?:\[(?:\d+,)?(\d+)\](?:<std(?:out|err)>)?|(?<![\w.])(\d+))\s*:?\s*$")


@dataclass
class MllogParse:
    """One MLPerf log parsed: its kept ``:::MLLOG`` records, the matched intervals and the row book.

    Attributes
    ----------
    file
        The log's name as given.
    job_id
        The job the log is read as.
    records
        Kept records: ``_row``, ``time``, ``event_type``, ``key``, ``value``, ``metadata``.
    pairs
        Interval family -> matched intervals (``start``, ``end``, ``start_row``, ``end_row``).
    books
        The row book of the log (one entry: the log's file name).
    """

    file: str
    job_id: str
    records: pd.DataFrame  # kept records: _row, time, event_type, key, value, metadata
    pairs: dict[str, pd.DataFrame]  # family -> matched intervals: start, end, start_row, end_row
    books: dict[str, FileBook]


def parse_mllog(path: Path, *, job_id: str | None, rank_copy_tolerance_s: float) -> MllogParse:
    """Parse one MLPerf result log: its ``:::MLLOG`` records, per-rank copies removed, intervals paired.

    Parameters
    ----------
    path
        The log (plain or gzip).
    job_id
        Job id of the log (None: the file name without suffix).
    rank_copy_tolerance_s
        Largest time difference, seconds, between per-rank copies of one marker.

    Returns
    -------
    MllogParse
        The kept records, the matched intervals and the row book.
    """
    plausible_ms = tuple(t.value / 1e6 for t in time_range())
    text = read_text(path)
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
            bad_fields.append(exc.field)  # the key of a NaN or Infinity time, where one is to blame
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
    book = FileBook(file, rows, truncated=truncated)
    for fld in dict.fromkeys(bad_fields):
        mine = [i for i, f in enumerate(bad_fields) if f == fld]
        book.reject_rows([bad_rows[i] for i in mine], fld, [bad_reasons[i] for i in mine])
    books = {file: book}
    jid = job_id if job_id is not None else file_stem(path)
    if not lines:
        return MllogParse(file, jid, pd.DataFrame(columns=["_file", "_row", "time", "event_type", "key"]),
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
    recs["time"] = pd.to_datetime(recs["time_ms"], unit="ms", utc=True).astype(TIME_DTYPE)
    # 1. exact per-rank copies (identical payload, identical time)
    exact = recs.duplicated(["_sig", "time_ms"], keep="first").to_numpy()
    if exact.any():
        first = recs.groupby(["_sig", "time_ms"], sort=False)["_row"].transform("first")
        reject(books, recs[exact], None, [f"per-rank copy of line {r}" for r in first[exact]])
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
            reject(books, copies, None,
                    [f"per-rank copy of line {int(r)} ({abs(t - rt):.0f} ms apart)" for r, t, rt in
                     zip(hit["_ref_row"], hit["time_ms"], hit["_ref_t"], strict=True)])
            recs = drop_rejected(recs, books)
    # 2. interval markers: key and event type must agree
    fam = recs["key"].str.extract(r"^(init|run|block|eval|epoch)_(start|stop)$")
    is_marker = fam[0].notna().to_numpy()
    expected = np.where(fam[1].to_numpy(dtype=object) == "start", "INTERVAL_START", "INTERVAL_END")
    disagree = is_marker & (recs["event_type"].to_numpy(dtype=object) != expected)
    if disagree.any():
        d = recs[disagree]
        reject(books, d, "event_type", [f"key {k!r} with event_type {e!r}: the two disagree"
                                         for k, e in zip(d["key"], d["event_type"], strict=True)])
    recs = recs.assign(_family=fam[0], _is_start=fam[1] == "start")
    recs = drop_rejected(recs, books)
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
            reject(books, nm, None,
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
            reject(books, m[lonely_start], "key",
                    f"{family}_start with no matching {family}_stop after it: interval not counted")
        if lonely_stop.any():
            reject(books, m[lonely_stop], "key",
                    f"{family}_stop with no matching {family}_start before it: interval not counted")
        starts, stops = m[start_ok], m[stop_ok]
        pairs[family] = pd.DataFrame({
            "start": starts["time"].array, "end": stops["time"].array,
            "start_row": starts["_row"].to_numpy(), "end_row": stops["_row"].to_numpy(),
            "start_ms": starts["time_ms"].to_numpy(), "end_ms": stops["time_ms"].to_numpy(),
            "metadata": stops["metadata"].to_numpy(),
        })
        pairs[family]["start"] = pairs[family]["start"].astype(TIME_DTYPE)
        pairs[family]["end"] = pairs[family]["end"].astype(TIME_DTYPE)
    recs = drop_rejected(recs, books)
    return MllogParse(file, jid, recs, pairs, books)


# ---------------------------------------------------------------------------------------------------
# Step series inside the training blocks (tracked_stats points)
# ---------------------------------------------------------------------------------------------------

#: ``tracked_stats`` value keys that carry a step time in seconds (NeMo's mlperf_common callbacks log
#: ``train_step_time``; NeMo's own trainer names the metric ``train_step_timing in s``).
STEP_TIME_KEYS = ("train_step_time", "train_step_timing in s")
#: ``tracked_stats`` value key of a per-block throughput in samples per second.
THROUGHPUT_KEY = "throughput"
#: How long after its block_stop a block's timing point may be logged and still belong to it (ns).
_POINT_TOLERANCE_NS = 1_000_000_000
#: The step-series dialects :func:`read_mlperf` recognises, and what each means.
STEP_DIALECTS: dict[str, str] = {
    "step_series": "tracked_stats step times with a step index (metadata.step, in steps or in samples): "
                   "the time between two points holds the steps between their indices",
    "block_step_time": "one tracked_stats train_step_time per training block (the block's mean step "
                       "time; metadata.samples_count samples = samples / global_batch_size steps)",
    "block_throughput": "one tracked_stats throughput (samples/s) per training block, metadata.step "
                        "counting samples: (samples since the last block) / global_batch_size steps",
    "blocks": "no step timing in the log: each training block is one step (today's block intervals)",
}


@dataclass
class StepSeries:
    """What a log's step series is made of (the reader's account of its ``steps`` rows).

    Attributes
    ----------
    dialect
        A key of :data:`STEP_DIALECTS`.
    logged_step_s
        The step times the log states (``train_step_time`` values, or global batch / throughput), one
        per timing point kept; empty for ``blocks``.
    steps
        Number of step rows the series produced.
    """

    dialect: str
    logged_step_s: np.ndarray
    steps: int


def _number(v: Any) -> float:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    return float(v) if ok else math.nan


def _timing_points(recs: pd.DataFrame) -> pd.DataFrame:
    """Return the ``tracked_stats`` records that carry a step time or a throughput, one row each."""
    t = recs[recs["key"] == "tracked_stats"]
    if t.empty:
        return pd.DataFrame(columns=["_file", "_row", "time_ms", "kind", "value", "index", "samples"])
    vals = t["value"].tolist()
    metas = [m if isinstance(m, dict) else {} for m in t["metadata"].tolist()]
    kind, value = [], []
    for v in vals:  # one small dict per timing point
        v = v if isinstance(v, dict) else {}
        key = next((k for k in STEP_TIME_KEYS if k in v), None)
        if key is not None:
            kind.append("step_time")
            value.append(v[key])
        elif THROUGHPUT_KEY in v:
            kind.append("throughput")
            value.append(v[THROUGHPUT_KEY])
        else:
            kind.append(None)
            value.append(None)
    out = pd.DataFrame({"_file": t["_file"].to_numpy(), "_row": t["_row"].to_numpy(),
                        "time_ms": t["time_ms"].to_numpy(), "kind": kind, "raw": value,
                        "index": [_number(m.get("step", math.nan)) for m in metas],
                        "samples": [_number(m.get("samples_count", math.nan)) for m in metas]})
    out = out[out["kind"].notna()].reset_index(drop=True)
    out["value"] = [_number(v) for v in out["raw"]]
    return out


#: The most samples one global batch may hold (2**40): a count beyond it is no batch size but a
#: damaged number, and it would size the step series.
MAX_BATCH_SAMPLES = 2**40


def _gbs(p: MllogParse, recs: pd.DataFrame) -> float:
    """Return the log's ``global_batch_size``: a whole number in [1, 2**40], else NaN (its row rejected)."""
    hit = recs.loc[recs["key"] == "global_batch_size", ["value", "_row"]]
    if hit.empty:
        return math.nan
    raw = hit["value"].iloc[0]
    v = _number(raw)
    if v >= 1 and v <= MAX_BATCH_SAMPLES and v == math.floor(v):
        return v
    p.books[p.file].reject_rows([int(hit["_row"].iloc[0])], "global_batch_size",
                                f"global_batch_size must be a whole number of samples in [1, 2**40]; "
                                f"got {excerpt(raw)}: steps inferred from the logged step times instead")
    return math.nan


def _count(x: Any) -> np.ndarray:
    """Round step counts to int64, clipped to +-2**62: an impossible count is checked, never wrapped."""
    x = np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, posinf=2.0**62, neginf=-2.0**62)
    return np.rint(np.clip(x, -2.0**62, 2.0**62)).astype(np.int64)


#: The shortest step a log can describe: a step count that would make a step shorter is no count.
MIN_STEP_NS = 1_000


def _check_step_counts(p: MllogParse, seg_s: np.ndarray, seg_e: np.ndarray, seg_n: np.ndarray,
                       seg_first: np.ndarray, seg_row: np.ndarray) -> None:
    """Refuse step counts the log's own times cannot hold, before any step is allocated.

    A segment holds at most one step per microsecond of its length (:data:`MIN_STEP_NS`), and a log
    at most ``max_steps`` steps (:class:`fleetlib._io.Limits`): a count field of 8e15 or a batch size
    of 1e-300 would otherwise size the step series.

    Raises
    ------
    InputError
        Naming the file, the row whose count is impossible, the field and the count.
    """
    length = (seg_e - seg_s).astype(np.float64)
    bad = (seg_n < 1) | (seg_n > np.maximum(length / MIN_STEP_NS, 1)) | (seg_first < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{int(seg_n[i]):,} step(s) from step {int(seg_first[i]):,} in "
                         f"{length[i] / NS_PER_S:g} s: "
                         f"a count the log's times cannot hold (at most one step per "
                         f"{MIN_STEP_NS:,} ns)", file=p.file, row=int(seg_row[i]), field="steps")
    limit = current_limits().max_steps
    total = np.cumsum(seg_n.astype(np.float64))
    if total.size and total[-1] > limit:
        i = int(np.searchsorted(total, limit, side="right"))
        raise InputError(f"the step series reaches {int(total[-1]):,} steps, more than the {limit:,} allowed "
                         "(limit max_steps; raise it with --limit max_steps=N)", file=p.file,
                         row=int(seg_row[i]), field="steps")


def _split_segments(seg_s: np.ndarray, seg_e: np.ndarray, seg_n: np.ndarray, seg_first: np.ndarray,
                    seg_row: np.ndarray) -> dict[str, np.ndarray]:
    """Cut each segment ``[start, end)`` (ns) into ``n`` equal steps, numbered from ``first``."""
    total = int(seg_n.sum())
    rep = np.repeat(np.arange(seg_n.size), seg_n)
    offset = np.arange(total) - np.repeat(np.cumsum(seg_n) - seg_n, seg_n)
    length = (seg_e - seg_s).astype(np.float64)[rep] / seg_n[rep]
    start = seg_s[rep] + np.rint(offset * length).astype(np.int64)
    end = seg_s[rep] + np.rint((offset + 1) * length).astype(np.int64)
    last = offset == seg_n[rep] - 1
    end[last] = seg_e[rep][last]  # the last step of a segment ends exactly at its end
    return {"start": start, "end": end, "step": seg_first[rep] + offset, "_row": seg_row[rep]}


def _step_series(p: MllogParse, blocks: pd.DataFrame) -> tuple[pd.DataFrame, StepSeries]:
    """Cut the training blocks into steps by the log's step timing (see :data:`STEP_DIALECTS`).

    The steps tile each block exactly (their durations add up to the block's length), so the
    productive time is the blocks' whatever the dialect.  Timing points that cannot be used are
    rejected; what had to be inferred is flagged.
    """
    recs = p.records
    book = p.books[p.file]
    b_s, b_e = utc_ns(blocks["start"]), utc_ns(blocks["end"])
    nb = len(blocks)
    pts = _timing_points(recs)
    gbs = _gbs(p, recs)
    if not pts.empty:
        bad = ~(pts["value"].to_numpy() > 0)
        if bad.any():
            book.reject_rows(pts.loc[bad, "_row"].to_numpy(), "value",
                             [f"tracked_stats {k.replace('_', ' ')} must be a positive number; got {r!r}"
                              for k, r in zip(pts.loc[bad, "kind"], pts.loc[bad, "raw"], strict=True)])
            pts = pts[~bad].reset_index(drop=True)
    t_ns = (np.rint(pts["time_ms"].to_numpy(dtype=np.float64) * 1e6)).astype(np.int64) if len(pts) else \
        np.zeros(0, dtype=np.int64)
    # a point belongs to the last block begun at or before it, if it is not later than that block's
    # end by more than the tolerance (loggers write the block's timing just after its block_stop)
    blk = np.searchsorted(b_s, t_ns, side="right") - 1
    late = t_ns - b_e[np.clip(blk, 0, max(nb - 1, 0))] if nb else np.zeros(len(pts), np.int64)
    inside = (blk >= 0) & (late <= _POINT_TOLERANCE_NS) if nb else np.zeros(len(pts), bool)
    if len(pts) and not inside.all():
        out = pts[~inside]
        book.flag_rows(out["_row"].to_numpy(), "step_timing_outside_block",
                       "step timing point outside every training block: not used for the step series")
    pts, t_ns, blk = pts[inside].reset_index(drop=True), t_ns[inside], blk[inside]
    kinds = set(pts["kind"])
    is_st = (pts["kind"] == "step_time").to_numpy()
    if is_st.any() and pts.loc[is_st, "index"].notna().any():
        dialect = "step_series"
        use = is_st & pts["index"].notna().to_numpy()
    elif is_st.any():
        dialect = "block_step_time"
        use = is_st
    elif "throughput" in kinds:
        dialect = "block_throughput"
        use = (pts["kind"] == "throughput").to_numpy()
    else:
        dialect = "blocks"
        use = np.zeros(len(pts), dtype=bool)
    pts, t_ns, blk = pts[use].reset_index(drop=True), t_ns[use], blk[use]
    block_rows = blocks["start_row"].to_numpy(dtype=np.int64)
    if dialect == "blocks":
        segs = (b_s, b_e, np.ones(nb, dtype=np.int64), np.arange(nb, dtype=np.int64), block_rows)
        logged = np.zeros(0)
    elif dialect == "step_series":
        segs, logged = _series_segments(p, pts, t_ns, blk, b_s, b_e, block_rows, gbs)
    else:
        segs, logged = _block_segments(p, pts, blk, b_s, b_e, block_rows, gbs, dialect)
    _check_step_counts(p, *segs)
    cut = _split_segments(*segs)
    n = cut["start"].size
    steps = pd.DataFrame({
        "_file": p.file, "_row": cut["_row"], "job_id": p.job_id, "attempt": np.zeros(n, dtype=np.int64),
        "step": cut["step"].astype(np.int64), "start": utc_times(cut["start"]), "end": utc_times(cut["end"]),
        "input_wait_s": 0.0,
        "samples": pd.array(np.full(n, gbs if dialect != "blocks" and math.isfinite(gbs) else np.nan),
                            dtype="Float64"),
    })
    first_row = int(pts["_row"].iloc[0]) if len(pts) else (int(block_rows[0]) if nb else None)
    if first_row is not None:
        book.flag_rows([first_row], "mlperf_step_dialect",
                       f"step series dialect {dialect!r} ({STEP_DIALECTS[dialect]}): {nb} training "
                       f"block(s) -> {n} step(s)")
    return steps, StepSeries(dialect, logged, n)


def _block_segments(p: MllogParse, pts: pd.DataFrame, blk: np.ndarray, b_s: np.ndarray, b_e: np.ndarray,
                    block_rows: np.ndarray, gbs: float, dialect: str
                    ) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """One segment per block; its step count from the block's timing point (or inferred)."""
    book = p.books[p.file]
    nb = b_s.size
    first = pd.Series(np.arange(len(pts))).groupby(blk).first()  # the first point of each block
    extra = np.setdiff1d(np.arange(len(pts)), first.to_numpy())
    if extra.size:
        book.flag_rows(pts["_row"].to_numpy()[extra], "step_timing_repeated",
                       "a second step timing point in one training block: the block's first one is used")
    per = np.full(nb, -1, dtype=np.int64)
    per[first.index.to_numpy()] = first.to_numpy()
    has = per >= 0
    value = np.full(nb, np.nan)
    value[has] = pts["value"].to_numpy()[per[has]]
    rows = np.where(has, pts["_row"].to_numpy()[np.maximum(per, 0)] if len(pts) else block_rows, block_rows)
    if dialect == "block_step_time":
        samples = np.full(nb, np.nan)
        samples[has] = pts["samples"].to_numpy()[per[has]]
        logged = value
    else:  # throughput: metadata.step counts the samples done at the block's end
        done = np.full(nb, np.nan)
        done[has] = pts["index"].to_numpy()[per[has]]
        before = np.r_[0.0, pd.Series(done).ffill().fillna(0.0).to_numpy()[:-1]]
        samples = done - before
        logged = gbs / value
    n = samples / gbs
    whole = np.isfinite(n) & (n >= 1) & (np.abs(n - np.rint(n)) < 1e-6)
    length = (b_e - b_s) / NS_PER_S
    guess = np.maximum(np.rint(length / np.where(np.isfinite(logged) & (logged > 0), logged,
                                                  np.nanmedian(logged) if np.isfinite(logged).any() else
                                                  np.inf)), 1)
    guess = np.where(np.isfinite(guess), guess, 1)
    inferred = ~whole
    if inferred.any():
        book.flag_rows(rows[inferred], "step_count_inferred",
                       [(f"training block {b}: the samples it holds / global_batch_size is not a whole "
                         f"number of steps ({s:g} / {gbs:g})" if h else
                         f"training block {b} has no usable step timing point")
                        + f": {int(g)} step(s) of the logged step time taken"
                        for b, s, g, h in zip(np.flatnonzero(inferred), samples[inferred], guess[inferred],
                                              has[inferred], strict=True)])
    n_steps = _count(np.where(whole, n, guess))
    firsts = np.r_[0, np.cumsum(n_steps)[:-1]].astype(np.int64)
    return (b_s, b_e, n_steps, firsts, rows), logged[np.isfinite(logged)]


def _series_segments(p: MllogParse, pts: pd.DataFrame, t_ns: np.ndarray, blk: np.ndarray, b_s: np.ndarray,
                     b_e: np.ndarray, block_rows: np.ndarray, gbs: float
                     ) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Segments between consecutive step-indexed points of each block, plus each block's tail."""
    book = p.books[p.file]
    order = np.lexsort((t_ns, blk))
    pts, t_ns, blk = pts.iloc[order].reset_index(drop=True), t_ns[order], blk[order]
    idx = pts["index"].to_numpy(dtype=np.float64)
    logged = pts["value"].to_numpy(dtype=np.float64)
    same = np.r_[False, blk[1:] == blk[:-1]]
    dt = np.r_[np.nan, np.diff(t_ns) / NS_PER_S]
    dk = np.r_[np.nan, np.diff(idx)]
    # is metadata.step a count of steps or of samples?  The one whose spacing agrees with the logged
    # step times is taken (a log that counts samples spaces its points global_batch_size apart)
    pair = same & (dk > 0)
    in_samples = False
    if pair.any() and math.isfinite(gbs) and gbs > 1:
        as_steps = np.nanmedian(np.abs(np.log(dt[pair] / dk[pair] / logged[pair])))
        as_samples = np.nanmedian(np.abs(np.log(dt[pair] / (dk[pair] / gbs) / logged[pair])))
        in_samples = bool(as_samples < as_steps)
    if in_samples:
        book.flag_rows([int(pts["_row"].iloc[0])], "step_index_in_samples",
                       f"metadata.step counts samples (its spacing matches the logged step times only "
                       f"divided by global_batch_size {gbs:g}): step index = metadata.step / {gbs:g}")
        idx = idx / gbs
        dk = np.r_[np.nan, np.diff(idx)]
    ok = same & (dk >= 1) & (np.abs(dk - np.rint(dk)) < 1e-6)
    back = same & ~ok
    if back.any():
        book.reject_rows(pts.loc[back, "_row"].to_numpy(), "metadata",
                         [f"step index {k:g} does not advance by a whole number of steps from the point "
                          f"before it ({k - d:g})" for k, d in zip(idx[back], dk[back], strict=True)])
    keep = ~back
    pts, t_ns, blk = pts[keep].reset_index(drop=True), t_ns[keep], blk[keep]
    idx, logged = idx[keep], logged[keep]
    same = np.r_[False, blk[1:] == blk[:-1]]
    rows = pts["_row"].to_numpy(dtype=np.int64)
    # inner segments: (previous point, point] of one block
    inner_s, inner_e = t_ns[:-1][same[1:]], t_ns[1:][same[1:]]
    inner_n = _count(np.diff(idx)[same[1:]])
    inner_first = _count(idx[:-1][same[1:]])
    inner_row = rows[1:][same[1:]]
    # each block's head (block start -> its first point) and tail (last point -> block end), counted in
    # the logged step time of the point next to them (flagged as inferred); one shorter than half a
    # step holds no step and is added to the segment next to it, so that the steps still tile the block
    head_i = np.flatnonzero(~same)
    tail_i = np.r_[head_i[1:] - 1, len(pts) - 1] if len(pts) else head_i
    heads_n = _count((t_ns[head_i] - b_s[blk[head_i]]) / NS_PER_S / logged[head_i])
    tails_n = _count((b_e[blk[tail_i]] - t_ns[tail_i]) / NS_PER_S / logged[tail_i])
    segs = [(b_s[blk[head_i]], t_ns[head_i], heads_n, np.maximum(np.rint(idx[head_i]) - heads_n, 0),
             rows[head_i], blk[head_i]),
            (inner_s, inner_e, inner_n, inner_first, inner_row, blk[1:][same[1:]]),
            (t_ns[tail_i], b_e[blk[tail_i]], tails_n, _count(idx[tail_i]), rows[tail_i], blk[tail_i])]
    s_, e_, n_, f_, r_, b_ = (np.concatenate([np.asarray(g[k]) for g in segs]) for k in range(6))
    o = np.lexsort((s_, b_))
    s_, e_, n_, f_, r_, b_ = s_[o], e_[o], n_[o], f_[o].astype(np.int64), r_[o], b_[o]
    empty = n_ < 1
    nxt_same = np.r_[b_[1:] == b_[:-1], False]
    prv_same = np.r_[False, b_[1:] == b_[:-1]]
    give_next = empty & nxt_same & ~np.r_[empty[1:], True]  # an empty head: the next segment starts earlier
    s_[np.flatnonzero(give_next) + 1] = s_[give_next]
    # an empty tail: the segment before it ends later
    give_prev = empty & prv_same & ~give_next & ~np.r_[True, empty[:-1]]
    e_[np.flatnonzero(give_prev) - 1] = e_[give_prev]
    keep = ~empty
    s_, e_, n_, f_, r_, b_ = s_[keep], e_[keep], n_[keep], f_[keep], r_[keep], b_[keep]
    covered = np.isin(np.arange(b_s.size), b_)
    if not covered.all():
        miss = np.flatnonzero(~covered)
        book.flag_rows(block_rows[miss], "step_count_inferred",
                       "training block without a usable step timing point: counted as one step")
        s_, e_ = np.r_[s_, b_s[miss]], np.r_[e_, b_e[miss]]
        n_ = np.r_[n_, np.ones(miss.size, np.int64)]
        f_, r_ = np.r_[f_, np.zeros(miss.size, np.int64)], np.r_[r_, block_rows[miss]]
    inferred_head = heads_n >= 1
    if inferred_head.any():
        book.flag_rows(np.unique(rows[head_i][inferred_head]), "step_count_inferred",
                       "steps between the block start and its first step timing point: counted in that "
                       "point's logged step time")
    return (s_, e_, n_, f_, r_), logged


def _mllog_tables(p: MllogParse) -> tuple[pd.DataFrame, pd.DataFrame, StepSeries]:
    """Canonical steps (training blocks) and events of one parsed MLPerf log."""
    recs = p.records
    if recs.empty:
        return pd.DataFrame(), pd.DataFrame(), StepSeries("blocks", np.zeros(0), 0)
    init_starts = recs.loc[recs["key"] == "init_start", "time"].sort_values()
    # attempt: number of init_start markers at or before a time, minus one (a log is normally one run)
    bounds = utc_ns(init_starts)

    def attempt_of(times: pd.Series) -> np.ndarray:
        if bounds.size == 0:
            return np.zeros(len(times), dtype=np.int64)
        return np.maximum(np.searchsorted(bounds, utc_ns(times), side="right") - 1, 0).astype(np.int64)

    steps = pd.DataFrame()
    blocks = p.pairs.get("block")
    series = StepSeries("blocks", np.zeros(0), 0)
    if blocks is not None and not blocks.empty:
        steps, series = _step_series(p, blocks)
        steps["attempt"] = attempt_of(steps["start"])
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
        # the step of an eval: the last step that ended at or before it began
        ends = utc_ns(steps["end"]) if not steps.empty else np.zeros(0, dtype=np.int64)
        done = np.searchsorted(np.sort(ends), utc_ns(evals["start"]), side="right")
        numbers = steps["step"].to_numpy(dtype=np.int64)[np.argsort(ends, kind="stable")] if ends.size \
            else np.zeros(0, dtype=np.int64)
        step_ref = pd.array(np.where(done > 0, numbers[np.maximum(done - 1, 0)] if numbers.size else 0, 0),
                            dtype="Int64")
        step_ref[done == 0] = pd.NA
        dur = (utc_ns(evals["end"]) - utc_ns(evals["start"])) / NS_PER_S
        events = concat_frames([events, pd.DataFrame({
            "_file": p.file, "_row": evals["start_row"].to_numpy(), "time": evals["start"],
            "kind": "eval_begin", "step": step_ref, "duration_s": np.nan}), pd.DataFrame({
            "_file": p.file, "_row": evals["end_row"].to_numpy(), "time": evals["end"],
            "kind": "eval_end", "step": step_ref, "duration_s": dur})])
    if not steps.empty:
        firsts = steps.sort_values("start").groupby("attempt", as_index=False).first()
        events = concat_frames([events, pd.DataFrame({
            "_file": p.file, "_row": firsts["_row"].to_numpy(), "time": firsts["start"],
            "kind": "first_step", "step": pd.array(firsts["step"].to_numpy(), dtype="Int64"),
            "duration_s": np.nan})])
    if not events.empty:
        events["time"] = events["time"].astype(TIME_DTYPE)
        events["job_id"] = p.job_id
        events["attempt"] = attempt_of(events["time"])
    return steps, events, series


def read(paths: PathLike | Sequence[PathLike], *, tz: str | None = None, window: Any = None,
         job_id: str | None = None, rank_copy_tolerance_s: float = 10.0) -> tuple[TimelineTables, Ledger]:
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
      ``cold_start``: every MLPerf init is a cold launch); each training block -> its steps, cut
      by the log's step timing (:data:`STEP_DIALECTS`: per-step ``train_step_time`` points with a
      step index, one ``train_step_time`` per block, or one ``throughput`` per block; the steps tile
      the block, so their durations add up to it; ``samples`` = the global batch), or one step per
      block when the log times no steps; the dialect is flagged ``mlperf_step_dialect``, inferred
      step counts ``step_count_inferred``; ``step`` = the global step index, input wait 0;
      first block start -> ``first_step``; ``eval_start``/``eval_stop`` -> ``eval_begin``/
      ``eval_end`` (``step`` = the last step before it, ``duration_s`` on the end);
      ``run_stop`` -> ``release``.  Other keys are kept in the parse but produce no rows.
    * A step-timing point that is not a positive number, or whose step index does not advance, is
      rejected (field ``value`` / ``metadata``).

    Parameters
    ----------
    paths
        One log or several (plain or gzip); each is one job.
    tz
        Not used: ``time_ms`` is milliseconds since the epoch, in UTC by definition.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; checked here, applied by the
        measurement (every record is kept).
    job_id
        Job id for a single file (default: the file name without suffix).
    rank_copy_tolerance_s
        Largest time difference, seconds, between per-rank copies of one marker.

    Returns
    -------
    tuple of (TimelineTables, Ledger)
        The canonical tables (``{"steps": ..., "events": ...}``) and the ledger over all ``:::MLLOG``
        records.
    """
    parse_window(window)
    files = as_paths(paths)
    tol = check_nonnegative("rank_copy_tolerance_s", rank_copy_tolerance_s)
    if job_id is not None and len(files) > 1:
        raise DomainError("job_id= names one job; several files are several jobs (leave job_id unset)")
    all_steps, all_events, books = [], [], {}
    for f in files:
        p = parse_mllog(f, job_id=job_id, rank_copy_tolerance_s=tol)
        books.update(p.books)
        steps, events, _ = _mllog_tables(p)
        all_steps.append(steps)
        all_events.append(events)
    steps = check_steps(concat_frames(all_steps), books, reorder_is_repair=False) if any(
        not s.empty for s in all_steps) else pd.DataFrame()
    events = check_events(concat_frames(all_events), books, reorder_is_repair=False) if any(
        not e.empty for e in all_events) else pd.DataFrame()
    ledger = close_books(books)
    return TimelineTables(_with_samples(steps), finalise_events(events)), ledger


#: The MLPerf reader under the name it is exported by (the same callable as :func:`read`).
read_mlperf = read


def _with_samples(steps: pd.DataFrame) -> pd.DataFrame:
    """Return the canonical steps plus ``samples`` (samples per step where the log says; else missing)."""
    out = finalise_steps(steps)
    out["samples"] = (pd.array(steps["samples"].to_numpy(dtype=object), dtype="Float64") if not steps.empty
                      else pd.array([], dtype="Float64"))
    return out


def read_mlperf_series(path: PathLike, *, job_id: str | None = None, rank_copy_tolerance_s: float = 10.0
                       ) -> tuple[TimelineTables, Ledger, StepSeries]:
    """Read one MLPerf log as :func:`read_mlperf` does, with the account of its step series.

    Parameters
    ----------
    path
        One log (plain or gzip).
    job_id, rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    tuple of (TimelineTables, Ledger, StepSeries)
        The canonical tables (``steps`` with a ``samples`` column), the ledger, and the
        :class:`StepSeries`: the dialect, the step times the log states, the number of steps.
    """
    tol = check_nonnegative("rank_copy_tolerance_s", rank_copy_tolerance_s)
    p = parse_mllog(as_paths(path)[0], job_id=job_id, rank_copy_tolerance_s=tol)
    steps, events, series = _mllog_tables(p)
    steps = check_steps(steps, p.books, reorder_is_repair=False) if not steps.empty else pd.DataFrame()
    events = check_events(events, p.books, reorder_is_repair=False) if not events.empty else pd.DataFrame()
    ledger = close_books(p.books)
    return TimelineTables(_with_samples(steps), finalise_events(events)), ledger, series
