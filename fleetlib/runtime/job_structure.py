"""The per-job structure of a validated timeline: attempts, interruptions, restarts and erasure.

:func:`fleetlib.runtime.timeline.job_timelines` validates the canonical tables (into :class:`_Tables`)
and calls :func:`_jobs_from_tables`, which builds one :class:`JobTimeline` per job.  The build is a
sequence of named steps over one job's arrays (:class:`_JobArrays`): attempts and their held
intervals, commits, interruptions, explicit restores, restarts inferred from step numbers, what each
interruption led to, the erasure of executed steps by later restarts, and the checkpoint, evaluation
and idle markers.  Everything here is internal; the public names are re-exported by
:mod:`fleetlib.runtime.timeline`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import excerpt
from fleetlib.quality import InputError, Ledger
from fleetlib.runtime.schema import AUXILIARY_EVENT_KINDS, AUXILIARY_KIND_PREFIXES, INTERRUPTION_KINDS

_NS = 1_000_000_000
#: Logged durations shorter than this (about 32 years) are added to instants in integer nanoseconds.
_EXACT_DURATION_S = 1e9

#: Rows per block where a full-length pass would otherwise allocate a temporary per operation.
_BLOCK = 1 << 20


def _blocks(n: int, size: int = _BLOCK) -> list[tuple[int, int]]:
    """Split ``range(n)`` into consecutive ``(lo, hi)`` blocks of at most ``size`` rows."""
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


def _lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key first), without the sort when the rows are in that order already.

    A stable sort leaves rows that are in order where they are: the order is then ``arange``.
    """
    n = keys[0].size
    if n < 2:
        return np.arange(n)
    after = np.zeros(n - 1, dtype=bool)  # row i + 1 sorts after row i on a key before this one
    ok = np.ones(n - 1, dtype=bool)  # rows i, i + 1 in order so far
    for k in keys[::-1]:
        a, b = k[:-1], k[1:]
        ok &= after | (b >= a)
        after |= b > a
    return np.arange(n) if ok.all() else np.lexsort(keys)


# ---------------------------------------------------------------------------------------------------
# Per-job structure
# ---------------------------------------------------------------------------------------------------


class _RowIndex:
    """Input rows of a run of validated steps, looked up one at a time (for messages).

    ``rows`` is the input row of every step, or None when the steps kept their input order -- then a
    step's row is its position and no full-length index array is ever built.
    """

    __slots__ = ("hi", "lo", "rows")

    def __init__(self, rows: np.ndarray | None, lo: int, hi: int) -> None:
        self.rows, self.lo, self.hi = rows, lo, hi

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, i: Any) -> int:
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"step {i} out of range")
        return self.lo + i if self.rows is None else int(self.rows[self.lo + i])

    def to_array(self) -> np.ndarray:
        """Return every row as an int64 array."""
        if self.rows is None:
            return np.arange(self.lo, self.hi, dtype=np.int64)
        return np.asarray(self.rows[self.lo:self.hi], dtype=np.int64)


@dataclass
class JobTimeline:
    """One job's timeline as arrays of seconds since ``origin`` (the first gang completion).

    Built by :func:`job_timelines`; consumed by :mod:`fleetlib.runtime.goodput`.  Steps are sorted by
    start; attempts by gang completion; interruptions and restarts by time.

    Attributes
    ----------
    job_id, origin
        The job and the UTC instant that is time 0.
    step_attempt, step_number, step_start, step_end, step_duration, step_input_wait, step_row
        One entry per executed step (``step_row``, a property: the row in the input steps table;
        ``step_duration``: end minus start, computed in integer nanoseconds, so it is exact to the
        nanosecond even far from the origin).
    erased_by
        Per step: index of the interruption whose restart erased it, or -1 if it was never erased.
    attempt_number, attempt_gang, attempt_release, attempt_cold
        One entry per attempt: held interval ``[gang, release)`` and whether ``cold_start`` marks it.
    int_time, int_kind, int_detected, int_inferred, int_attempt
        One entry per interruption: time, ``"failure"`` or ``"preempt"``, detection time (NaN when
        not logged), whether it was inferred (an unlogged restart), and the attempt it hit.
    int_restore_step
        The rollback point of each interruption's restart (NaN: none / terminal; -inf: initial state).
    restart_time, restart_rollback, restart_cause
        Every restart (explicit restore, inferred restart, or the rollback a terminal interruption
        implies): when, to which step (-inf: the initial state) and which interruption caused it.
    commit_time, commit_step
        Durable checkpoint commits, by time.
    ckpt_begin_time, ckpt_begin_commit, ckpt_begin_duration, ckpt_begin_logged_end
        Checkpoint begins, the time their commit landed (NaN when it never did), their logged
        blocking duration (NaN when not logged) and begin plus that duration (NaN when not logged).
    ckpt_duration_start, ckpt_duration_end
        Pauses known only from a commit's ``duration_s``.
    eval_begin_time, eval_begin_end, eval_begin_duration, eval_begin_logged_end, eval_duration_start,
    eval_duration_end
        The same for evaluation pauses.
    idle_begin_time, idle_begin_duration, idle_begin_logged_end
        ``hang_begin`` / ``idle_begin`` markers, their logged durations and where those end.
    first_step_time
        ``first_step`` markers (a step began after a gang completion or restart).
    completed_time
        ``job_completed`` markers (the job finished its work cleanly).

    Notes
    -----
    Every instant derived from a logged duration (``*_logged_end``, ``*_duration_start``) is summed
    in integer nanoseconds (the duration rounded to the nanosecond) before it is turned into seconds
    since the origin, so a pause that ends exactly when the next step starts lands on the same float
    as that step's start and leaves no sliver of rounding between them.

    ``step_row`` is built on request from ``step_rows`` (steps that kept their input order need no
    index array); ``erased_by`` uses the narrowest integer type that holds its indices.
    """

    job_id: str
    origin: pd.Timestamp
    step_attempt: np.ndarray
    step_number: np.ndarray
    step_start: np.ndarray
    step_end: np.ndarray
    step_duration: np.ndarray
    step_input_wait: np.ndarray
    step_rows: _RowIndex = field(repr=False)
    erased_by: np.ndarray
    attempt_number: np.ndarray
    attempt_gang: np.ndarray
    attempt_release: np.ndarray
    attempt_cold: np.ndarray
    int_time: np.ndarray
    int_kind: np.ndarray
    int_detected: np.ndarray
    int_inferred: np.ndarray
    int_attempt: np.ndarray
    int_restore_step: np.ndarray
    restart_time: np.ndarray
    restart_rollback: np.ndarray
    restart_cause: np.ndarray
    commit_time: np.ndarray
    commit_step: np.ndarray
    ckpt_begin_time: np.ndarray
    ckpt_begin_commit: np.ndarray
    ckpt_begin_duration: np.ndarray
    ckpt_begin_logged_end: np.ndarray
    ckpt_duration_start: np.ndarray
    ckpt_duration_end: np.ndarray
    eval_begin_time: np.ndarray
    eval_begin_end: np.ndarray
    eval_begin_duration: np.ndarray
    eval_begin_logged_end: np.ndarray
    eval_duration_start: np.ndarray
    eval_duration_end: np.ndarray
    idle_begin_time: np.ndarray
    idle_begin_duration: np.ndarray
    idle_begin_logged_end: np.ndarray
    first_step_time: np.ndarray
    completed_time: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def step_row(self) -> np.ndarray:
        """Row of each step in the input steps table (built on request)."""
        return self.step_rows.to_array()

    @property
    def n_steps(self) -> int:
        """Number of executed steps."""
        return int(self.step_start.size)

    @property
    def start_s(self) -> float:
        """First gang completion (always 0.0)."""
        return float(self.attempt_gang[0]) if self.attempt_gang.size else 0.0

    @property
    def end_s(self) -> float:
        """Last release, seconds since origin."""
        return float(self.attempt_release.max()) if self.attempt_release.size else 0.0

    def to_utc(self, seconds: float) -> pd.Timestamp:
        """Convert seconds since origin back to a UTC timestamp."""
        return self.origin + pd.Timedelta(round(float(seconds) * _NS), unit="ns")


def _code_dtype(n_codes: int) -> np.dtype:
    """Return the narrowest signed integer type that holds ``-1 .. n_codes``."""
    for dtype in (np.int8, np.int16, np.int32):
        if n_codes < np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


# ---------------------------------------------------------------------------------------------------
# The validated tables, as arrays
# ---------------------------------------------------------------------------------------------------


@dataclass
class _Tables:
    """Validated tables as arrays (sorted), plus the ledger; internal."""

    steps_frame: pd.DataFrame | None
    events_frame: pd.DataFrame | None
    job_ids: list[str]
    s_job: np.ndarray
    s_attempt: np.ndarray
    s_step: np.ndarray
    s_start: np.ndarray
    s_end: np.ndarray
    s_wait: np.ndarray
    s_row: np.ndarray | None  # None: the input order
    e_job: np.ndarray
    e_attempt: np.ndarray
    e_time: np.ndarray
    e_kind: np.ndarray
    e_step: np.ndarray
    e_dur: np.ndarray
    e_row: np.ndarray
    ledger: Ledger
    steps_file: str
    events_file: str
    # each step's duration in seconds, ``(s_end - s_start) / 1e9``, where a reader made it already
    s_dur: np.ndarray | None = None


# ---------------------------------------------------------------------------------------------------
# Per-job structure: attempts, interruptions, restarts, erasure
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _JobArrays:
    """One job's slices of the validated tables, in seconds from its first gang completion.

    Built once by :func:`_build_job` and read by each of its steps.
    """

    e_att: np.ndarray
    e_dur: np.ndarray
    e_ns: np.ndarray
    e_row: np.ndarray
    e_step: np.ndarray
    e_t: np.ndarray
    ef: str
    gang_mask: np.ndarray
    job_id: str
    kind: np.ndarray
    ledger: Ledger
    n: int
    rel_ns: Callable[..., np.ndarray]
    s_att: np.ndarray
    s_num: np.ndarray
    s_row: _RowIndex
    s_t0: np.ndarray
    s_t1: np.ndarray
    sf: str
    utc: Callable[[float], pd.Timestamp]


def _build_job(t: _Tables, code: int, s_lo: int, s_hi: int, e_lo: int, e_hi: int,
               markers: tuple[_PairedMarkers, _PairedMarkers]) -> JobTimeline:
    job_id = t.job_ids[code]
    ledger = t.ledger
    sf, ef = t.steps_file, t.events_file
    kind = t.e_kind[e_lo:e_hi]
    e_att = t.e_attempt[e_lo:e_hi]
    e_ns = t.e_time[e_lo:e_hi]
    e_step = t.e_step[e_lo:e_hi]
    e_dur = t.e_dur[e_lo:e_hi]
    e_row = t.e_row[e_lo:e_hi]
    s_att = t.s_attempt[s_lo:s_hi]
    s_num = t.s_step[s_lo:s_hi]
    s_wait = t.s_wait[s_lo:s_hi]
    s_row = _RowIndex(t.s_row, s_lo, s_hi)
    n = int(s_num.size)

    gang_mask = kind == "gang_complete"
    if not gang_mask.any():
        raise InputError(f"job {excerpt(job_id)} has no gang_complete event: held time starts when the "
                         "allocation is complete, which must be logged (rule 8), not inferred",
                         file=ef if e_row.size else sf, row=int(e_row[0]) if e_row.size else int(s_row[0]),
                         field="kind")
    origin_ns = int(e_ns[gang_mask].min())
    origin = pd.Timestamp(origin_ns, tz="UTC")

    def utc(seconds: float) -> pd.Timestamp:
        return origin + pd.Timedelta(seconds=float(seconds))

    e_t = (e_ns - origin_ns) / _NS
    # step times and durations from integer nanoseconds relative to the origin, in blocks: a duration
    # is its exact nanosecond count in seconds, not the difference of two rounded instants
    s_t0, s_t1, s_dur = np.empty(n), np.empty(n), np.empty(n)
    start_ns, end_ns = t.s_start[s_lo:s_hi], t.s_end[s_lo:s_hi]
    a_buf, b_buf = np.empty(min(n, _BLOCK), np.int64), np.empty(min(n, _BLOCK), np.int64)
    for lo, hi in _blocks(n):
        a = np.subtract(start_ns[lo:hi], origin_ns, out=a_buf[:hi - lo])
        np.divide(a, _NS, out=s_t0[lo:hi])
        b = np.subtract(end_ns[lo:hi], origin_ns, out=b_buf[:hi - lo])
        np.divide(b, _NS, out=s_t1[lo:hi])
        np.divide(np.subtract(b, a, out=b), _NS, out=s_dur[lo:hi])
    del start_ns, end_ns, a_buf, b_buf

    def rel_ns(ns: np.ndarray, add_s: np.ndarray | None = None) -> np.ndarray:
        # seconds since the origin of an instant (plus a logged duration), summed in nanoseconds so
        # that one instant always maps to one float, however it was reached
        if add_s is None:
            return (ns - origin_ns) / _NS
        out = np.full(ns.size, np.nan)
        fin = np.isfinite(add_s)
        exact = fin & (np.abs(add_s) < _EXACT_DURATION_S)
        out[exact] = (ns[exact] + np.rint(add_s[exact] * _NS).astype(np.int64) - origin_ns) / _NS
        huge = fin & ~exact  # beyond int64 nanoseconds: plain float seconds
        out[huge] = (ns[huge] - origin_ns) / _NS + add_s[huge]
        return out

    j = _JobArrays(e_att=e_att, e_dur=e_dur, e_ns=e_ns, e_row=e_row, e_step=e_step, e_t=e_t, ef=ef,
                   gang_mask=gang_mask, job_id=job_id, kind=kind, ledger=ledger, n=n, rel_ns=rel_ns,
                   s_att=s_att, s_num=s_num, s_row=s_row, s_t0=s_t0, s_t1=s_t1, sf=sf, utc=utc)
    att_num, cold, fs_t, gang, release = _job_attempts(j)
    commit_s, commit_t = _job_commits(j)
    int_att, int_det, int_kind, int_time = _job_interruptions(j)
    rs_roll, rs_time = _job_restores(j, commit_s, commit_t)
    r_explicit, r_roll, r_time = _job_inferred_restarts(j, rs_roll, rs_time)
    cause, implied, r_roll, r_time = _job_interruption_outcomes(
        j, commit_s, commit_t, int_att, int_kind, int_time, r_explicit, r_roll, r_time)
    cause, erased_by, inferred, int_att, int_det, int_kind, int_restore, int_time = _job_erasure(
        j, cause, implied, int_att, int_det, int_kind, int_time, r_roll, r_time)

    # --- checkpoint, evaluation and idle markers ------------------------------------------------------
    # paired for every job at once (_pair_markers_all); this job's slice
    ck_b, ck_end, ck_bd, ck_bl, ck_ds, ck_de = markers[0].job(e_lo, e_hi)
    ev_b, ev_end, ev_bd, ev_bl, ev_ds, ev_de = markers[1].job(e_lo, e_hi)
    idle_mask = np.isin(kind, ("hang_begin", "idle_begin"))

    return JobTimeline(
        job_id=job_id, origin=origin, step_attempt=s_att, step_number=s_num, step_start=s_t0, step_end=s_t1,
        step_duration=s_dur, step_input_wait=s_wait, step_rows=s_row, erased_by=erased_by,
        attempt_number=att_num,
        attempt_gang=gang, attempt_release=release, attempt_cold=cold, int_time=int_time, int_kind=int_kind,
        int_detected=int_det, int_inferred=inferred, int_attempt=int_att, int_restore_step=int_restore,
        restart_time=r_time, restart_rollback=r_roll, restart_cause=cause, commit_time=commit_t,
        commit_step=commit_s, ckpt_begin_time=ck_b, ckpt_begin_commit=ck_end, ckpt_begin_duration=ck_bd,
        ckpt_begin_logged_end=ck_bl, ckpt_duration_start=ck_ds, ckpt_duration_end=ck_de,
        eval_begin_time=ev_b, eval_begin_end=ev_end, eval_begin_duration=ev_bd, eval_begin_logged_end=ev_bl,
        eval_duration_start=ev_ds, eval_duration_end=ev_de, idle_begin_time=e_t[idle_mask],
        idle_begin_duration=e_dur[idle_mask], idle_begin_logged_end=rel_ns(e_ns[idle_mask], e_dur[idle_mask]),
        first_step_time=fs_t, completed_time=np.sort(e_t[kind == "job_completed"]),
    )


def _job_attempts(j: _JobArrays) -> tuple[np.ndarray, ...]:
    """Check the attempts and return their held intervals ``[gang_complete, release)``.

    Returns the attempt numbers, which launches are cold, the first-step times, and the gang
    completion and release time of each attempt (flagging a missing release or a stray first_step).
    """
    e_att, e_row, e_t, ef, gang_mask, job_id = j.e_att, j.e_row, j.e_t, j.ef, j.gang_mask, j.job_id
    kind, ledger, n, s_att, s_num, s_row, s_t0 = j.kind, j.ledger, j.n, j.s_att, j.s_num, j.s_row, j.s_t0
    s_t1, sf, utc = j.s_t1, j.sf, j.utc
    g_att, g_idx, g_cnt = np.unique(e_att[gang_mask], return_index=True, return_counts=True)
    if (g_cnt > 1).any():
        a = g_att[np.argmax(g_cnt > 1)]
        raise InputError(f"attempt {int(a)} of job {excerpt(job_id)} has {int(g_cnt.max())} gang_complete "
                         "events; a new allocation is a new attempt", file=ef,
                         row=int(e_row[gang_mask][e_att[gang_mask] == a][1]), field="attempt")
    rel_mask = kind == "release"
    r_att, r_cnt = np.unique(e_att[rel_mask], return_counts=True)
    if (r_cnt > 1).any():
        a = r_att[np.argmax(r_cnt > 1)]
        raise InputError(f"attempt {int(a)} of job {excerpt(job_id)} is released twice", file=ef,
                         row=int(e_row[rel_mask][e_att[rel_mask] == a][1]), field="kind")
    # first step of each block of one attempt's steps (steps are in time order)
    blk = np.concatenate([[0], np.flatnonzero(s_att[1:] != s_att[:-1]) + 1]).astype(np.int64) if n else \
        np.zeros(0, np.int64)
    s_att_values = s_att[blk]
    missing = np.setdiff1d(np.unique(np.concatenate([e_att, s_att_values])), g_att)
    if missing.size:
        a = int(missing[0])
        in_steps = s_att == a
        raise InputError(f"attempt {a} of job {excerpt(job_id)} has records but no gang_complete event; held "
                         "time starts at gang completion, which must be logged (rule 8)",
                         file=sf if in_steps.any() else ef,
                         row=int(s_row[np.argmax(in_steps)] if in_steps.any()
                                 else e_row[np.argmax(e_att == a)]),
                         field="attempt")
    gang = e_t[gang_mask][g_idx]
    release = np.full(g_att.size, np.nan)
    release[np.searchsorted(g_att, e_att[rel_mask])] = e_t[rel_mask]
    for i in np.flatnonzero(np.isnan(release)):
        a = g_att[i]
        last = float(e_t[e_att == a].max())
        if (s_att == a).any():
            last = max(last, float(s_t1[s_att == a].max()))
        release[i] = last
        ledger.flag("release_missing", f"attempt {int(a)} has no release event; its held time is taken to "
                    "end at its last record", job_id=job_id, attempt=int(a), time=utc(last))
    if (release < gang).any():
        i = int(np.argmax(release < gang))
        raise InputError(f"attempt {int(g_att[i])} of job {excerpt(job_id)} is released before its gang "
                         "completes",
                         file=ef, row=int(e_row[rel_mask][np.argmax(e_att[rel_mask] == g_att[i])]),
                         field="time")
    order = np.argsort(gang, kind="stable")
    att_num, gang, release = g_att[order], gang[order], release[order]
    if (gang[1:] < release[:-1]).any():
        i = int(np.argmax(gang[1:] < release[:-1])) + 1
        raise InputError(f"attempt {int(att_num[i])} of job {excerpt(job_id)} becomes complete before "
                         f"attempt {int(att_num[i - 1])} is released: attempts of one job must not overlap",
                         file=ef, row=int(e_row[gang_mask][e_att[gang_mask] == att_num[i]][0]), field="time")
    by_number = np.argsort(att_num)
    e_pos = by_number[np.searchsorted(att_num[by_number], e_att)]
    # steps are in time order, so each block of one attempt's steps lies inside its held interval iff
    # its first start and last end do (the ends increase, since steps do not overlap)
    blk_end = np.concatenate([blk[1:], [n]]) - 1 if n else blk
    blk_pos = by_number[np.searchsorted(att_num[by_number], s_att[blk])]
    bad_blk = (s_t0[blk] < gang[blk_pos]) | (s_t1[blk_end] > release[blk_pos])
    if bad_blk.any():
        b = int(np.argmax(bad_blk))
        lo, hi = int(blk[b]), int(blk_end[b]) + 1
        pos = blk_pos[b]
        i = lo + int(np.argmax((s_t0[lo:hi] < gang[pos]) | (s_t1[lo:hi] > release[pos])))
        raise InputError(f"step {int(s_num[i])} of attempt {int(s_att[i])} lies outside the attempt's held "
                         "interval (gang_complete -> release)", file=sf, row=int(s_row[i]), field="start")
    bad = (e_t < gang[e_pos]) | (e_t > release[e_pos])
    aux = np.zeros(bad.size, dtype=bool)
    if bad.any():
        kinds = pd.Series(kind[bad], dtype="str")
        aux[bad] = (kinds.isin(AUXILIARY_EVENT_KINDS)
                    | kinds.str.startswith(AUXILIARY_KIND_PREFIXES)).to_numpy()
    if (bad & aux).any():
        # phase markers the partition does not use: outside held time they are noted, not fatal
        names = ", ".join(sorted(set(kind[bad & aux].astype(str))))
        ledger.flag("event_outside_held_time", f"{int((bad & aux).sum())} auxiliary event(s) ({names}) lie "
                    "outside their attempt's held interval: kept, not charged", field="time",
                    job_id=job_id)
        bad &= ~aux
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{kind[i]} event of attempt {int(e_att[i])} lies outside the attempt's held "
                         "interval (gang_complete -> release)", file=ef, row=int(e_row[i]), field="time")
    cold = np.zeros(att_num.size, dtype=bool)
    cold[e_pos[kind == "cold_start"]] = True
    fs_t = e_t[kind == "first_step"]
    if fs_t.size:
        # a first_step marker should start a step row, unless that step was cut off by an interruption
        k = np.searchsorted(s_t0, fs_t, side="left")
        nxt_step = np.full(fs_t.size, np.inf)
        if n:
            nxt_step[k < n] = s_t0[k[k < n]]
        stops = np.sort(e_t[np.isin(kind, (*INTERRUPTION_KINDS, "failure_detected"))])
        nxt_stop = np.full(fs_t.size, np.inf)
        j = np.searchsorted(stops, fs_t, side="left")
        nxt_stop[j < stops.size] = stops[j[j < stops.size]]
        odd = (np.abs(nxt_step - fs_t) > 1e-3) & ~(nxt_stop < nxt_step)
        if odd.any():
            ledger.flag("first_step_mismatch", f"{int(odd.sum())} first_step marker(s) start no step in the "
                        "steps table and are not followed by an interruption; they only end outages",
                        job_id=job_id, time=utc(fs_t[np.argmax(odd)]))
    return att_num, cold, fs_t, gang, release


def _job_commits(j: _JobArrays) -> tuple[np.ndarray, np.ndarray]:
    """Return the time and step of each checkpoint commit (a commit of a step not yet finished is refused)."""
    e_row, e_step, e_t, ef, kind, n, s_num = j.e_row, j.e_step, j.e_t, j.ef, j.kind, j.n, j.s_num
    s_t1 = j.s_t1
    c_mask = kind == "checkpoint_commit"
    if np.isnan(e_step[c_mask]).any():
        raise InputError("checkpoint_commit without a step: a commit must say which step's state it holds",
                         file=ef, row=int(e_row[c_mask][np.argmax(np.isnan(e_step[c_mask]))]), field="step")
    commit_t, commit_s = e_t[c_mask], e_step[c_mask]
    if commit_t.size:
        idx = np.searchsorted(s_t1, commit_t, side="right") - 1
        done = np.full(commit_t.size, -np.inf)
        if n and (idx >= 0).any():
            # the highest step finished by each commit: running maxima of the segments between the
            # (sorted) commit positions, never a full-length running maximum
            ends, inv = np.unique(idx[idx >= 0] + 1, return_inverse=True)
            seg_max = np.maximum.reduceat(s_num[:ends[-1]], np.concatenate([[0], ends[:-1]]))
            done[idx >= 0] = np.maximum.accumulate(seg_max)[inv]
        bad = commit_s > done
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"checkpoint of step {int(commit_s[i])} committed before any step >= "
                             f"{int(commit_s[i])} had finished", file=ef, row=int(e_row[c_mask][i]),
                             field="step")
    return commit_s, commit_t


def _job_interruptions(j: _JobArrays) -> tuple[np.ndarray, ...]:
    """Return the interruptions (failure, preempt): attempt, detection time, kind and time of each."""
    e_att, e_row, e_t, ef, kind, ledger, n = j.e_att, j.e_row, j.e_t, j.ef, j.kind, j.ledger, j.n
    s_num, s_row, s_t0, s_t1, sf, utc = j.s_num, j.s_row, j.s_t0, j.s_t1, j.sf, j.utc
    int_pos = np.flatnonzero(np.isin(kind, INTERRUPTION_KINDS))
    i_time, i_kind = list(e_t[int_pos]), list(kind[int_pos])
    i_att, i_det = list(e_att[int_pos]), [np.nan] * int_pos.size
    for d in np.flatnonzero(kind == "failure_detected"):
        prior = int_pos[(int_pos < d) & (e_att[int_pos] == e_att[d])]
        if prior.size and kind[prior[-1]] == "failure":
            k = int(np.searchsorted(int_pos, prior[-1]))
            if np.isnan(i_det[k]):
                i_det[k] = e_t[d]
            continue
        ledger.repair(ef, int(e_row[d]), "kind", "failure_detected with no preceding failure in its attempt: "
                      "taken as the fault time (detection latency unknown)")
        i_time.append(e_t[d])
        i_kind.append("failure")
        i_att.append(e_att[d])
        i_det.append(e_t[d])
    order = np.argsort(np.asarray(i_time, dtype=float), kind="stable")
    int_time = np.asarray(i_time, dtype=float)[order]
    int_kind = np.asarray(i_kind, dtype=object)[order]
    int_att = np.asarray(i_att, dtype=np.int64)[order]
    int_det = np.asarray(i_det, dtype=float)[order]
    if int_time.size and n:
        j = np.searchsorted(s_t0, int_time, side="left") - 1
        spans = (j >= 0) & (s_t1[np.maximum(j, 0)] > int_time)
        if spans.any():
            k = int(np.argmax(spans))
            raise InputError(f"step {int(s_num[j[k]])} runs across the {int_kind[k]} at {utc(int_time[k])}: "
                             "a step cannot finish after the fault or eviction that stopped progress",
                             file=sf, row=int(s_row[j[k]]), field="end")
    return int_att, int_det, int_kind, int_time


def _job_restores(j: _JobArrays, commit_s: np.ndarray, commit_t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Check the explicit restores and return their rollback steps and times."""
    e_row, e_step, e_t, ef, job_id, kind = j.e_row, j.e_step, j.e_t, j.ef, j.job_id, j.kind
    ledger, n, s_att, s_num, s_row, s_t0, sf = j.ledger, j.n, j.s_att, j.s_num, j.s_row, j.s_t0, j.sf
    utc = j.utc
    rs_idx = np.flatnonzero(kind == "restore")
    rs_time = e_t[rs_idx]
    rs_roll = np.where(np.isnan(e_step[rs_idx]), -np.inf, e_step[rs_idx])
    for k, i in enumerate(rs_idx):
        if np.isfinite(rs_roll[k]) and not ((commit_s == rs_roll[k]) & (commit_t <= rs_time[k])).any():
            raise InputError(f"restore to step {int(rs_roll[k])}, but no checkpoint of step "
                             f"{int(rs_roll[k])} was committed before it", file=ef, row=int(e_row[i]),
                             field="step")
        nxt = int(np.searchsorted(s_t0, rs_time[k], side="left"))
        if nxt >= n or (k + 1 < rs_time.size and rs_time[k + 1] <= s_t0[nxt]):
            continue  # no step, or another restore, before the next step
        first = s_num[nxt]
        if first <= rs_roll[k]:
            raise InputError(f"the first step after a restore to step {int(rs_roll[k])} is step "
                             f"{int(first)}: a restored job resumes after the restored step", file=sf,
                             row=int(s_row[nxt]), field="step")
        if np.isfinite(rs_roll[k]) and first > rs_roll[k] + 1:
            ledger.flag("step_records_missing", f"after a restore to step {int(rs_roll[k])} the first "
                        f"recorded step is {int(first)}", job_id=job_id, attempt=int(s_att[nxt]),
                        time=utc(s_t0[nxt]))
    return rs_roll, rs_time


def _job_inferred_restarts(j: _JobArrays, rs_roll: np.ndarray, rs_time: np.ndarray) -> tuple[np.ndarray, ...]:
    """Add the restarts inferred from a step number that does not increase (no restore in between).

    Returns which restarts are explicit, and the rollback step and time of every restart.
    """
    job_id, ledger, n, s_att, s_num, s_t0, utc = j.job_id, j.ledger, j.n, j.s_att, j.s_num, j.s_t0, j.utc
    # step i and i + 1 are in one segment unless a restore falls between them
    first_after = np.searchsorted(s_t0, rs_time, side="left")
    seg_first = np.unique(first_after[(first_after > 0) & (first_after < n)])
    inf_parts, jumps = [], 0
    for lo, hi in _blocks(max(n - 1, 0)):
        # in blocks: step i + 1 against step i, a restore between them excepted
        step_diff = s_num[lo + 1:hi + 1] - s_num[lo:hi]
        same_seg = np.ones(hi - lo, dtype=bool)
        cut = seg_first[(seg_first > lo) & (seg_first <= hi)]
        same_seg[cut - 1 - lo] = False
        inf_parts.append(np.flatnonzero(same_seg & (step_diff <= 0)) + lo + 1)
        jumps += int(np.count_nonzero(same_seg & (step_diff > 1)))
    inf_idx = np.concatenate(inf_parts) if inf_parts else np.zeros(0, np.int64)
    for i in inf_idx:
        ledger.flag("restart_inferred_from_step_numbers",
                    f"step {int(s_num[i])} runs again after step {int(s_num[i - 1])} with no restore event: "
                    f"a restart to step {int(s_num[i]) - 1} is inferred (fallback; log restore events)",
                    job_id=job_id, attempt=int(s_att[i]), time=utc(s_t0[i]))
    if jumps:
        ledger.flag("step_records_missing", f"step numbers skip ahead {jumps} time(s) with no restart "
                    "(missing step records?); the skipped time is not counted as a step", job_id=job_id)
    r_time = np.concatenate([rs_time, s_t0[inf_idx]])
    r_roll = np.concatenate([rs_roll, (s_num[inf_idx] - 1).astype(float)])
    r_explicit = np.concatenate([np.ones(rs_time.size, bool), np.zeros(inf_idx.size, bool)])
    return r_explicit, r_roll, r_time


def _job_interruption_outcomes(j: _JobArrays, commit_s: np.ndarray, commit_t: np.ndarray,
                               int_att: np.ndarray, int_kind: np.ndarray, int_time: np.ndarray,
                               r_explicit: np.ndarray, r_roll: np.ndarray, r_time: np.ndarray
                               ) -> tuple[np.ndarray, ...]:
    """Match each interruption to its restart, an implied rollback, or a terminal rollback.

    Returns ``cause`` (the interruption each restart recovers from), ``implied`` (the rollback step
    implied for each interruption) and the restart times and rollback points, extended by the
    restarts that interruptions imply.
    """
    job_id, ledger, n, s_att, s_num, s_row = j.job_id, j.ledger, j.n, j.s_att, j.s_num, j.s_row
    s_t0, sf, utc = j.s_t0, j.sf, j.utc
    resume = np.searchsorted(s_t0, int_time, side="left")
    resume_start = np.full(int_time.size, np.inf)
    if n:
        resume_start[resume < n] = s_t0[resume[resume < n]]
    implied = np.full(int_time.size, np.nan)
    r_sorted = np.sort(r_time)
    lo = np.searchsorted(r_sorted, int_time, side="left")
    has_restart = lo < r_sorted.size
    has_restart[has_restart] = r_sorted[lo[has_restart]] <= resume_start[has_restart]
    term_t, term_roll = [], []
    for k in np.flatnonzero(~has_restart):
        if resume[k] < n:
            if s_att[resume[k]] == int_att[k]:
                raise InputError(
                    f"{int_kind[k]} at {utc(int_time[k])} in attempt {int(int_att[k])} is followed by step "
                    f"{int(s_num[resume[k]])} in the same attempt with no restart (no restore event, no new "
                    "attempt): log the restart", file=sf, row=int(s_row[resume[k]]), field="step")
            implied[k] = float(s_num[resume[k]] - 1)
            ledger.flag("rollback_inferred", f"the restart after the {int_kind[k]} at {utc(int_time[k])} "
                        f"has no restore event; it resumes at step {int(s_num[resume[k]])}, so the rollback "
                        f"point is taken as step {int(s_num[resume[k]]) - 1}", job_id=job_id,
                        attempt=int(s_att[resume[k]]))
        else:
            done = commit_t <= int_time[k]
            term_t.append(int_time[k])
            term_roll.append(float(commit_s[done][np.argmax(commit_t[done])]) if done.any() else -np.inf)
            ledger.flag("terminal_interruption", f"the job never resumed after the {int_kind[k]} at "
                        f"{utc(int_time[k])}; its uncommitted work is charged to it", job_id=job_id,
                        attempt=int(int_att[k]))
    r_time = np.concatenate([r_time, term_t])
    r_roll = np.concatenate([r_roll, term_roll])
    r_explicit = np.concatenate([r_explicit, np.zeros(len(term_t), bool)])
    order = np.lexsort((~r_explicit, r_time))
    r_time, r_roll = r_time[order], r_roll[order]

    # cause of each restart: the latest interruption before it with no step in between
    cand = np.searchsorted(int_time, r_time, side="right") - 1
    cause = np.full(r_time.size, -1, dtype=np.int64)
    ok = cand >= 0
    ok[ok] = resume_start[cand[ok]] >= r_time[ok]
    cause[ok] = cand[ok]
    return cause, implied, r_roll, r_time


def _job_erasure(j: _JobArrays, cause: np.ndarray, implied: np.ndarray, int_att: np.ndarray,
                 int_det: np.ndarray, int_kind: np.ndarray, int_time: np.ndarray, r_roll: np.ndarray,
                 r_time: np.ndarray) -> tuple[np.ndarray, ...]:
    """Find the restart that erased each executed step (the live chain as a stack of segments).

    Returns the restart causes, ``erased_by`` per step, which interruptions were inferred, the
    interruption arrays (with any unlogged interruption added) and each interruption's restore step.
    """
    job_id, ledger, n, s_att, s_num, s_t0 = j.job_id, j.ledger, j.n, j.s_att, j.s_num, j.s_t0
    s_t1, utc = j.s_t1, j.utc
    # a restart or interruption index: the narrowest integer type that holds them all
    erased_by = np.full(n, -1, dtype=_code_dtype(r_time.size + int_time.size + 1))
    # segment k holds the steps that start after restart k - 1 and before restart k
    bounds = np.concatenate([[0], np.searchsorted(s_t0, r_time, side="left"), [n]]).astype(np.int64)
    stack: list[list[int]] = []
    unlogged: list[int] = []  # restarts that erased work with no interruption logged before them
    for k in range(r_time.size):
        a, b = int(bounds[k]), int(bounds[k + 1])
        if b > a:
            stack.append([a, b])
        erased_any = False
        while stack:
            a_, b_ = stack[-1]
            roll = r_roll[k]
            # an integer target keeps the search on the integer steps (a float one copies them)
            cut = (a_ + int(np.searchsorted(s_num[a_:b_], np.int64(roll), side="right")) if np.isfinite(roll)
                   else (a_ if roll < 0 else b_))
            if cut < b_:
                erased_by[cut:b_] = k  # restart index for now
                erased_any = True
            if cut == a_:
                stack.pop()
                continue
            stack[-1][1] = cut
            break
        if erased_any and cause[k] < 0:
            unlogged.append(k)
    if unlogged:
        add_t, add_a = [], []
        for k in unlogged:
            last = int(np.searchsorted(s_t0, r_time[k], side="left")) - 1
            add_t.append(float(s_t1[last]))
            add_a.append(int(s_att[last]))
            ledger.flag("unlogged_interruption", "steps were erased by a restart with no failure or preempt "
                        "logged before it: treated as an unlogged failure at the end of the last step before "
                        "the restart", job_id=job_id, attempt=add_a[-1], time=utc(add_t[-1]))
        m = int_time.size
        int_time = np.concatenate([int_time, add_t])
        int_kind = np.concatenate([int_kind, np.array(["failure"] * len(add_t), dtype=object)])
        int_att = np.concatenate([int_att, np.asarray(add_a, dtype=np.int64)])
        int_det = np.concatenate([int_det, np.full(len(add_t), np.nan)])
        implied = np.concatenate([implied, np.full(len(add_t), np.nan)])
        inferred = np.concatenate([np.zeros(m, bool), np.ones(len(add_t), bool)])
        cause[np.asarray(unlogged)] = m + np.arange(len(add_t))
        order = np.argsort(int_time, kind="stable")
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        int_time, int_kind, int_att = int_time[order], int_kind[order], int_att[order]
        int_det, implied, inferred = int_det[order], implied[order], inferred[order]
        cause = np.where(cause >= 0, inv[np.maximum(cause, 0)], -1)
    else:
        inferred = np.zeros(int_time.size, bool)
    hit = erased_by >= 0
    erased_by[hit] = cause[erased_by[hit]]
    int_restore = implied.copy()
    has = cause >= 0
    int_restore[cause[has]] = r_roll[has]
    return cause, erased_by, inferred, int_att, int_det, int_kind, int_restore, int_time


@dataclass(frozen=True)
class _PairedMarkers:
    """The begin and end markers of one kind of pause, paired across every job at once.

    A begin pairs with the next end record of its job and attempt -- of the same step when both
    carry one -- and an end closes only the latest begin before it.  ``begin`` and ``lone`` are event
    positions (sorted) in the job-sorted events table; :meth:`job` cuts one job's slice out.
    """

    begin: np.ndarray  # event position of each begin
    begin_time: np.ndarray  # seconds since the job's origin
    pair_end: np.ndarray  # the paired end of each begin (NaN: none)
    begin_duration: np.ndarray  # the duration logged on each begin
    begin_logged_end: np.ndarray  # begin + logged duration (NaN: not logged)
    lone: np.ndarray  # event position of each unpaired end record that carries a duration
    lone_start: np.ndarray
    lone_end: np.ndarray

    def job(self, e_lo: int, e_hi: int) -> tuple[np.ndarray, ...]:
        """Return one job's arrays (its events are positions ``e_lo .. e_hi - 1``), as the build uses them."""
        b0, b1 = np.searchsorted(self.begin, (e_lo, e_hi), side="left")
        x0, x1 = np.searchsorted(self.lone, (e_lo, e_hi), side="left")
        return (self.begin_time[b0:b1], self.pair_end[b0:b1], self.begin_duration[b0:b1],
                self.begin_logged_end[b0:b1], self.lone_start[x0:x1], self.lone_end[x0:x1])


def _rel_ns_all(ns: np.ndarray, origin_ns: np.ndarray, add_s: np.ndarray) -> np.ndarray:
    """Seconds since each row's origin of an instant plus a logged duration, summed in nanoseconds.

    The same arithmetic as a job's own ``rel_ns`` (one instant always maps to one float), with one
    origin per row.
    """
    out = np.full(ns.size, np.nan)
    fin = np.isfinite(add_s)
    exact = fin & (np.abs(add_s) < _EXACT_DURATION_S)
    out[exact] = (ns[exact] + np.rint(add_s[exact] * _NS).astype(np.int64) - origin_ns[exact]) / _NS
    huge = fin & ~exact  # beyond int64 nanoseconds: plain float seconds
    out[huge] = (ns[huge] - origin_ns[huge]) / _NS + add_s[huge]
    return out


def _pair_markers_all(t: _Tables, e_origin: np.ndarray, begin_kind: str, end_kind: str) -> _PairedMarkers:
    """Pair the begin and end markers of one kind of pause (checkpoint, evaluation) of every job.

    Two ``merge_asof`` passes over the whole events table (keyed by job, attempt and step, then by job
    and attempt for begins without a step) replace two per job.  ``e_origin`` is each event's job
    origin in nanoseconds.
    """
    kind, e_job, e_att, e_step, e_ns, e_dur = t.e_kind, t.e_job, t.e_attempt, t.e_step, t.e_time, t.e_dur
    b_idx = np.flatnonzero(kind == begin_kind)
    x_idx = np.flatnonzero(kind == end_kind)
    pair_end = np.full(b_idx.size, np.nan)
    used = np.zeros(x_idx.size, dtype=bool)
    if b_idx.size and x_idx.size:
        b_key = np.where(np.isnan(e_step[b_idx]), -1, e_step[b_idx]).astype(np.int64)
        x_step = np.where(np.isnan(e_step[x_idx]), -2, e_step[x_idx]).astype(np.int64)
        match = np.full(b_idx.size, -1, dtype=np.int64)
        for keyed in (True, False):
            sel = (b_key >= 0) if keyed else (b_key < 0)
            if not sel.any():
                continue
            bs = b_idx[sel]
            b_keys = [e_job[bs], e_att[bs]] + ([b_key[sel]] if keyed else [])
            x_keys = [e_job[x_idx], e_att[x_idx]] + ([x_step] if keyed else [])
            match[np.flatnonzero(sel)] = _next_match(bs, b_keys, x_idx, x_keys)
        has = np.flatnonzero(match >= 0)
        # several begins may reach one end: only the latest of them pairs with it
        last = np.ones(has.size, dtype=bool)
        if has.size > 1:
            order = np.lexsort((b_idx[has], match[has]))
            dup = np.zeros(has.size, dtype=bool)
            dup[order[:-1]] = match[has][order[:-1]] == match[has][order[1:]]
            last = ~dup
        keep = has[last]
        xk = x_idx[match[keep]]
        pair_end[keep] = (e_ns[xk] - e_origin[xk]) / _NS
        used[match[keep]] = True
    lone = x_idx[~used]
    lone = lone[np.isfinite(e_dur[lone])]
    return _PairedMarkers(
        begin=b_idx, begin_time=(e_ns[b_idx] - e_origin[b_idx]) / _NS, pair_end=pair_end,
        begin_duration=e_dur[b_idx], begin_logged_end=_rel_ns_all(e_ns[b_idx], e_origin[b_idx], e_dur[b_idx]),
        lone=lone, lone_start=_rel_ns_all(e_ns[lone], e_origin[lone], -e_dur[lone]),
        lone_end=(e_ns[lone] - e_origin[lone]) / _NS)


def _next_match(b_pos: np.ndarray, b_keys: list[np.ndarray], x_pos: np.ndarray, x_keys: list[np.ndarray]
                ) -> np.ndarray:
    """For each ``b``: the index of the first ``x`` with the same keys and a greater position; -1: none.

    What ``pd.merge_asof(b, x, on=pos, by=keys, direction="forward", allow_exact_matches=False)``
    finds, by one sort of both sides by (keys, position) and one running minimum, from the end, of
    each group's next ``x`` (positions are distinct integers).
    """
    nb, n = b_pos.size, b_pos.size + x_pos.size
    if nb == 0 or x_pos.size == 0:
        return np.full(nb, -1, dtype=np.int64)
    keys = [np.concatenate([np.asarray(b, dtype=np.int64), np.asarray(x, dtype=np.int64)])
            for b, x in zip(b_keys, x_keys, strict=True)]
    pos = np.concatenate([b_pos, x_pos]).astype(np.int64)
    order = _lexsort((pos, *keys[::-1]))
    new_group = np.zeros(n, dtype=bool)
    new_group[0] = True
    for k in keys:
        ks = k[order]
        new_group[1:] |= ks[1:] != ks[:-1]
    gid = np.cumsum(new_group) - 1
    big = n + 1
    # each sorted row's own index where it is an x, else "none" (n); groups made disjoint by gid * big
    own = np.where(order >= nb, np.arange(n), n)
    nxt = np.minimum.accumulate((gid * big + own)[::-1])[::-1] % big  # the first x at or after each row
    out = np.full(nb, -1, dtype=np.int64)
    is_b = order < nb
    found = nxt[is_b] < n
    out[order[is_b][found]] = order[nxt[is_b][found]] - nb
    return out


def _event_origins(t: _Tables) -> np.ndarray:
    """Each event's job origin (its first gang completion) in nanoseconds; 0 for a job with none."""
    gang = np.flatnonzero(t.e_kind == "gang_complete")
    origin = np.zeros(len(t.job_ids), dtype=np.int64)
    if gang.size:
        # events are sorted by (job, time): a job's first gang_complete is its earliest
        codes, first = np.unique(t.e_job[gang], return_index=True)
        origin[codes.astype(np.int64)] = t.e_time[gang[first]]
    return origin[t.e_job.astype(np.int64)] if t.e_job.size else np.zeros(0, np.int64)


def _jobs_from_tables(t: _Tables, job_id: str | None) -> list[JobTimeline]:
    codes = range(len(t.job_ids))
    if job_id is not None:
        if str(job_id) not in t.job_ids:
            raise InputError(f"job {excerpt(job_id)} is not in the timeline (jobs: {t.job_ids[:10]})",
                             file=t.events_file, field="job_id")
        codes = [t.job_ids.index(str(job_id))]
    # job codes in the tables' own (narrow) type, so the search does not widen the code arrays
    s_b = np.searchsorted(t.s_job, np.arange(len(t.job_ids) + 1, dtype=t.s_job.dtype), side="left")
    e_b = np.searchsorted(t.e_job, np.arange(len(t.job_ids) + 1, dtype=t.e_job.dtype), side="left")
    e_origin = _event_origins(t)
    markers = (_pair_markers_all(t, e_origin, "checkpoint_begin", "checkpoint_commit"),
               _pair_markers_all(t, e_origin, "eval_begin", "eval_end"))
    return [_build_job(t, c, int(s_b[c]), int(s_b[c + 1]), int(e_b[c]), int(e_b[c + 1]), markers)
            for c in codes]
