"""Measured runtime goodput: an exact partition of held time, read from a job timeline.

Runtime goodput ``R`` is productive time over held time.  Held time runs from each attempt's
``gang_complete`` to its ``release``; the queue wait between an eviction and the next gang completion
is *not* held time (it is reported as ``queue_after_interruption_s``, a time-to-result cost).
Productive time is the number of retained steps times the job's fault-free step time.  Every other
held second is charged to exactly one category, so the categories add up to held time exactly (a
floating-point rounding apart) -- there is no clipping and no remainder computed by subtraction:

==========================  ========================================================================
category                    held time charged to it
==========================  ========================================================================
productive                  fault-free step time of each retained step
progress_at_risk            (committed definition only) the same for steps that finished and were not
                            erased but whose checkpoint had not landed by ``as_of``
step_time_above_baseline    time of retained steady-state steps above (or, negative, below) the
                            fault-free baseline -- see below
startup                     cold launches: gang completion to first step, plus the warm-up excess of
                            the first steps after a cold launch
input_wait                  input waits of retained steady-state steps
checkpoint                  synchronous checkpoint pauses (for an asynchronous checkpoint, its
                            staging pause; the background write is program loss)
recovery                    failures: detection (fault -> detected), relaunch and reload up to the
                            first step after the restart, and the warm-up excess after it
rework                      failures: steps the restart erased (after the last durable commit),
                            plus the partial step cut off by the fault
preemption                  evictions: erased steps, the partial step, held time from the eviction to
                            release and from readmission to the first step, and the warm-up excess
evaluation                  evaluation pauses
idle                        held with no progress: after ``hang_begin`` / ``idle_begin`` markers, and
                            after an attempt's last progress until its release (teardown, zombie)
unattributed                held time between steps that no event explains -- shown, never clipped
==========================  ========================================================================

**Fault-free step time.**  Given by the caller, or estimated robustly (``estimator="median"``, the
default): the median *compute* time (duration minus input wait) of executed steps, leaving out the
first step after every (re)start, where compilation and cache warm-up land.  ``estimator="mean"``
uses the mean of the same steps.

**Warm-up.**  After each (re)start, the leading run of steps whose duration exceeds
``(1 + warmup_tolerance)`` times the fault-free step time is warm-up: each such step's fault-free part
is productive and the rest (compute excess *and* input wait -- loader refill, rule 21) is charged to
the event that triggered the restart (rule 18; startup after a cold launch).  The run ends at the
first step within tolerance.

**Why ``step_time_above_baseline`` exists.**  The numerator is retained steps x fault-free step time,
but a retained steady-state step takes its own measured time.  The difference is not a runtime loss:
the chapter puts per-step inefficiency (stragglers, exposed collectives, contention from asynchronous
checkpoint writes) inside the fault-free baseline and charges it to program goodput (rule 17).  With a
median baseline, steps above the median still spend more held time than the numerator credits them,
and steps below it less.  That signed residual is named here instead of being hidden in productive
time or in ``unattributed``; it is zero on average when the baseline is the mean of steady-state steps
(``estimator="mean"``) and exactly zero when every steady step runs at the baseline.

**Definitions.**  ``"committed"``: a step counts once a checkpoint commit covering it has landed by
``as_of``; finished, un-erased steps still waiting for a commit are ``progress_at_risk``.
``"retrospective"``: every finished step not erased by a later restart counts.  Both productive totals
are always reported; their difference is the progress at risk.

**Held time outside steps** is labelled by the first of these rules that applies:

1. ``recovery`` (detection): from a ``failure`` to its ``failure_detected``;
2. the outage: from a ``failure`` or ``preempt`` until a step begins again (the next step row, or a
   ``first_step`` marker whose step was cut off), the next interruption, or a ``cold_start``-marked
   attempt -- ``recovery`` or ``preemption``; time between attempts is not held and is skipped;
3. ``checkpoint``: from ``checkpoint_begin`` until its commit, the next step, the next interruption,
   the next pause marker, the release, or its logged ``duration_s``, whichever is first (a pause
   known only from a commit's ``duration_s`` ends at the commit);
4. ``evaluation``: the same for ``eval_begin`` / ``eval_end``;
5. ``idle``: from ``hang_begin`` / ``idle_begin`` until the next step, interruption or release;
6. ``startup``: from gang completion to the attempt's first step (or ``first_step`` marker);
7. the partial step: from the last step's end (or the attempt's start, or the previous
   interruption) to an interruption -- ``rework`` or ``preemption``;
8. ``idle``: from an attempt's last step to its release (teardown, a zombie);
9. ``unattributed``: anything else (a gap between steps no record explains).

**Windows.**  A window ``[start, end)`` clips every category: a step crossing a boundary contributes
to each of its parts in proportion to the share of its duration inside the window.  Windows that
span or lie inside an outage are valid (the outage is charged as usual); a window with no held time
has no runtime goodput (``None``) rather than an error.  Which steps were erased is known from the
whole timeline.  Which steps are committed is judged ``as_of`` a time: by default the window's end --
the chapter's closing rule: steps after the last commit inside the window count only once the next
checkpoint lands, so they are progress at risk in that window.  With a fixed ``as_of`` (e.g.
``"data_end"``) the partitions of adjacent windows add up category by category to the whole; with the
default they add up everywhere except that progress at risk in an early window may be productive in
the whole.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, check_nonnegative
from fleetlib.runtime.schema import (
    BREAKDOWN,
    CATEGORIES,
    HELD_INTERVAL_COLUMNS,
    ISSUE_TERMS,
    check_definition,
)
from fleetlib.runtime.timeline import _BLOCK, JobTimeline, TimelineLedger, _blocks, job_timelines

__all__ = [
    "BREAKDOWN",
    "CATEGORIES",
    "HELD_INTERVAL_COLUMNS",
    "ISSUE_TERMS",
    "RuntimeMeasurement",
    "held_intervals",
    "runtime_goodput",
    "runtime_goodput_windows",
    "runtime_summary",
    "summary_of",
]

Definition = Literal["committed", "retrospective"]

_FINE = tuple(BREAKDOWN)
_L = {name: i for i, name in enumerate(_FINE)}
_NFINE = len(_FINE)
_INTERRUPTION_LABELS = {
    "failure": {"restart": _L["recovery_restart"], "warmup": _L["recovery_warmup"],
                "lost": _L["rework_steps"], "partial": _L["rework_partial_step"]},
    "preempt": {"restart": _L["preemption_restart"], "warmup": _L["preemption_warmup"],
                "lost": _L["preemption_lost_steps"], "partial": _L["preemption_partial_step"]},
}


# ---------------------------------------------------------------------------------------------------
# Per-job parts, computed once and clipped to any window
# ---------------------------------------------------------------------------------------------------


@dataclass
class _JobParts:
    """A job's partition, computed once; :func:`_window_sums` clips it to any window.

    Steps are kept dense only where every step needs a value (start, duration, input wait, masks);
    what only some steps carry -- warm-up excess and erased time -- is stored sparsely as (index,
    seconds, fine label, owning interruption).  Retention is stored per commit: the never-erased steps
    form one chain in step order, and commit ``j`` (in landing order) retains its first
    ``commit_reach[j]`` elements, the steps before index ``commit_cut[j]``.
    """

    job: JobTimeline
    ff: float | None
    start: np.ndarray          # per step
    dur: np.ndarray
    wait: np.ndarray
    kept: np.ndarray           # not erased
    steady: np.ndarray         # kept and not warm-up
    commit_at: np.ndarray      # per commit, sorted: when it landed
    commit_reach: np.ndarray   # never-erased steps retained once it landed (non-decreasing)
    commit_cut: np.ndarray     # ... which are the never-erased steps with index below this
    x_idx: np.ndarray          # sparse: warm-up excess of kept steps, whole time of erased steps
    x_amt: np.ndarray
    x_lab: np.ndarray
    x_owner: np.ndarray
    gap_start: np.ndarray      # labelled held time outside steps
    gap_end: np.ndarray
    gap_label: np.ndarray
    gap_owner: np.ndarray
    between_start: np.ndarray  # not-held intervals between attempts
    between_end: np.ndarray
    between_owner: np.ndarray  # interruption that caused the wait, or -1
    pause_start: np.ndarray    # checkpoint pauses (merged)
    pause_end: np.ndarray


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted disjoint intervals (empty ones dropped)."""
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    if s.size == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    new = np.concatenate([[True], s[1:] > e[:-1]])
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def _cover(starts: np.ndarray, ends: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Index of the (sorted, disjoint) interval containing each point, or -1."""
    if starts.size == 0:
        return np.full(points.size, -1, dtype=np.int64)
    idx = np.searchsorted(starts, points, side="right") - 1
    inside = (idx >= 0) & (points < ends[np.maximum(idx, 0)])
    return np.where(inside, idx, -1)


def _next_at_or_after(sorted_times: np.ndarray, t: np.ndarray) -> np.ndarray:
    if sorted_times.size == 0:
        return np.full(t.size, np.inf)
    i = np.searchsorted(sorted_times, t, side="left")
    out = np.full(t.size, np.inf)
    out[i < sorted_times.size] = sorted_times[i[i < sorted_times.size]]
    return out


def _first_fast(dur: np.ndarray, threshold: float, starts: np.ndarray, run_end: np.ndarray,
                probe: int = 64) -> np.ndarray:
    """Index of the first step at or after each run start whose duration is within the threshold.

    Warm-ups are short, so only the first ``probe`` steps of each run are looked at; a run still slow
    after them is searched in full.  Returns ``run_end`` for a run with no such step.
    """
    n = dur.size
    out = np.array(run_end, dtype=np.int64, copy=True)
    if starts.size == 0:
        return out
    idx = starts[:, None] + np.arange(probe)[None, :]
    inside = idx < run_end[:, None]
    fast = inside & (dur[np.minimum(idx, n - 1)] <= threshold)
    found = fast.any(axis=1)
    out[found] = idx[found, np.argmax(fast[found], axis=1)]
    for r in np.flatnonzero(~found & (starts + probe < run_end)):
        tail = np.flatnonzero(dur[starts[r] + probe:run_end[r]] <= threshold)
        if tail.size:
            out[r] = starts[r] + probe + tail[0]
    return out


def _estimate_fault_free(dur: np.ndarray, wait: np.ndarray, first_of_run: np.ndarray,
                         estimator: str) -> float | None:
    """Median (or mean) compute time of the steps other than the first of each run.

    ``first_of_run`` holds the (sorted, distinct) indices left out.  Neither statistic depends on the
    order of the sample, so it is built in one buffer -- compute times, with the left-out slots
    filled from the tail -- and partitioned in place.
    """
    n = dur.size
    if n == 0:
        return None
    sample = np.subtract(dur, wait)
    m = n - first_of_run.size
    if m > 0:
        holes = first_of_run[first_of_run < m]
        donors = np.setdiff1d(np.arange(m, n), first_of_run, assume_unique=True)
        sample[holes] = sample[donors]
        sample = sample[:m]
    if estimator == "median":
        value = float(np.median(sample, overwrite_input=True))
    else:
        value = float(np.mean(sample))
    if not value > 0.0:
        raise DomainError(f"the estimated fault-free step time is {value!r} s; steps need a positive "
                          "compute time (duration minus input wait) -- pass fault_free_step_s")
    return value


def _chain_index(pos: np.ndarray, erased_idx: np.ndarray, shifted: np.ndarray | None = None) -> np.ndarray:
    """Step index of each position in the chain of never-erased steps (the chain length: past the end).

    With erased indices ``e_0 < e_1 < ...``, chain position ``p`` is step ``p + #{j : e_j - j <= p}``
    (``shifted``: the ``e_j - j``, when already at hand).
    """
    pos = np.asarray(pos, dtype=np.int64)
    if erased_idx.size == 0:
        return pos
    if shifted is None:
        shifted = erased_idx - np.arange(erased_idx.size)
    return pos + np.searchsorted(shifted, pos, side="right")


def _chain_searchsorted(values: np.ndarray, erased_idx: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """``searchsorted(values[chain], targets, side="right")`` without gathering ``values[chain]``.

    ``values`` restricted to the never-erased steps must be non-decreasing (the live chain's step
    numbers are); a vectorised bisection over chain positions.
    """
    m = values.size - erased_idx.size
    if erased_idx.size == 0:
        return np.searchsorted(values, targets, side="right")
    shifted = erased_idx - np.arange(erased_idx.size)
    lo = np.zeros(targets.size, dtype=np.int64)
    hi = np.full(targets.size, m, dtype=np.int64)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        right = active & (values[_chain_index(np.minimum(mid, m - 1), erased_idx, shifted)] <= targets)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)


def _job_parts(job: JobTimeline, ff_given: float | None, estimator: str, tol: float) -> _JobParts:
    n = job.n_steps
    s0, s1 = job.step_start, job.step_end
    dur = job.step_duration  # exact to the nanosecond (not s1 - s0 in floating point)
    wait = job.step_input_wait
    gang, release = job.attempt_gang, job.attempt_release
    it, ikind = job.int_time, job.int_kind
    n_int = it.size
    int_is_pre = ikind == "preempt"

    # --- runs: steps from each (re)start, and who triggered each run ------------------------------
    resume = np.searchsorted(s0, it, side="left")  # first step at or after each interruption
    resume_start = np.full(n_int, np.inf)
    if n:
        resume_start[resume < n] = s0[resume[resume < n]]
    # steps are in time order and attempts do not overlap: each attempt's steps are one block
    att_change = np.flatnonzero(job.step_attempt[1:] != job.step_attempt[:-1]) + 1 if n else \
        np.zeros(0, np.int64)
    run_bounds = np.concatenate([[0], att_change]).astype(np.int64) if n else np.zeros(0, np.int64)
    by_number = np.argsort(job.attempt_number)
    run_att = by_number[np.searchsorted(job.attempt_number[by_number], job.step_attempt[run_bounds])] \
        if n else np.zeros(0, np.int64)
    has = resume < n
    starts = np.unique(np.concatenate([run_bounds, resume[has]])).astype(np.int64)
    trigger = np.full(starts.size, -1, dtype=np.int64)  # interruption index, -1 = cold launch
    if has.any():
        # the latest interruption whose resume is a run's first step triggers that run
        trigger[np.searchsorted(starts, resume[has])] = np.flatnonzero(has)
        trigger[np.searchsorted(starts, run_bounds[job.attempt_cold[run_att]])] = -1
    ff = ff_given if ff_given is not None else _estimate_fault_free(dur, wait, starts, estimator)

    # --- warm-up: the leading run of slow steps after each (re)start ------------------------------
    erased_idx = np.flatnonzero(job.erased_by >= 0)
    kept = np.ones(n, dtype=bool)
    kept[erased_idx] = False
    warm_idx = np.zeros(0, np.int64)
    warm_owner = np.zeros(0, np.int64)
    if n:
        assert ff is not None
        run_end = np.concatenate([starts[1:], [n]])
        first_fast = _first_fast(dur, ff * (1.0 + tol), starts, run_end)
        length = np.maximum(np.minimum(first_fast, run_end) - starts, 0)
        if length.any():
            offsets = np.arange(length.sum()) - np.repeat(np.cumsum(length) - length, length)
            warm_idx = np.repeat(starts, length) + offsets
            warm_owner = np.repeat(trigger, length)
            keep_w = kept[warm_idx]
            warm_idx, warm_owner = warm_idx[keep_w], warm_owner[keep_w]
    steady = kept.copy()
    steady[warm_idx] = False
    w_pre = np.zeros(warm_idx.size, bool)
    w_pre[warm_owner >= 0] = int_is_pre[warm_owner[warm_owner >= 0]]
    w_lab = np.where(warm_owner < 0, _L["startup_warmup"],
                     np.where(w_pre, _L["preemption_warmup"], _L["recovery_warmup"]))
    e_owner = job.erased_by[erased_idx]
    e_pre = int_is_pre[e_owner] if e_owner.size else np.zeros(0, bool)
    e_lab = np.where(e_pre, _L["preemption_lost_steps"], _L["rework_steps"])
    x_idx = np.concatenate([warm_idx, erased_idx]).astype(np.int64)
    x_amt = np.concatenate([dur[warm_idx] - (ff or 0.0), dur[erased_idx]])
    x_lab = np.concatenate([w_lab, e_lab]).astype(np.int64)
    x_owner = np.concatenate([warm_owner, e_owner]).astype(np.int64)

    # --- retention: how much of the chain of never-erased steps each commit covers -----------------
    c_order = np.argsort(job.commit_time, kind="stable")
    ct = job.commit_time[c_order]
    reach = np.zeros(ct.size, dtype=np.int64)
    if n and ct.size:
        cs = job.commit_step[c_order]
        # commit j retains the prefix of the chain with step <= its step that ended before it landed;
        # the first commit whose running reach covers chain element k retains it.  The chain (step
        # numbers increasing, ends increasing) is searched through its positions, never gathered.
        ends_done = np.searchsorted(s1, ct, side="right") - np.searchsorted(s1[erased_idx], ct, side="right")
        covered = np.minimum(_chain_searchsorted(job.step_number, erased_idx, cs), ends_done)
        reach = np.maximum.accumulate(covered)
    cut = _chain_index(reach, erased_idx)

    # --- labelled overlays on held time outside steps ----------------------------------------------
    next_int_after = np.concatenate([it[1:], [np.inf]]) if n_int else it
    cold_gang = np.sort(gang[job.attempt_cold])
    # an outage ends when a step begins again: the next step row, or a first_step marker whose step
    # never finished (cut off by the next interruption)
    restart_begins = np.minimum(resume_start, _next_at_or_after(np.sort(job.first_step_time), it))
    outage_end = np.minimum(np.minimum(restart_begins, next_int_after), _next_at_or_after(cold_gang, it))
    outage_end = np.maximum(outage_end, it)
    out_label = np.where(ikind == "preempt", _L["preemption_restart"], _L["recovery_restart"])
    det_end = np.where(np.isfinite(job.int_detected), np.minimum(job.int_detected, outage_end), it)
    det_end = np.maximum(det_end, it)

    def att_index(t: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(gang, t, side="right") - 1, 0, max(gang.size - 1, 0))

    int_release = release[att_index(it)] if n_int else it
    last_end_before = np.full(n_int, -np.inf)
    if n and n_int:
        k = resume - 1
        last_end_before[k >= 0] = s1[k[k >= 0]]
    prev_int = np.concatenate([[-np.inf], it[:-1]]) if n_int else it
    part_start = np.maximum(np.maximum(last_end_before, gang[att_index(it)] if n_int else it), prev_int)
    part_start = np.minimum(part_start, it)
    part_label = np.where(ikind == "preempt", _L["preemption_partial_step"], _L["rework_partial_step"])
    del int_release

    # a pause (checkpoint, evaluation, idle marker) lasts until its own end record, the next step,
    # the next interruption, the release, or the next pause marker -- whichever comes first
    markers = np.sort(np.concatenate([job.ckpt_begin_time, job.eval_begin_time, job.idle_begin_time]))

    def pause_end(b: np.ndarray, paired_end: np.ndarray | None, logged_end: np.ndarray) -> np.ndarray:
        end = np.full(b.size, np.inf) if paired_end is None else np.where(np.isnan(paired_end), np.inf,
                                                                           paired_end)
        # begin + logged duration, summed in nanoseconds by the timeline (NaN: none logged)
        end = np.minimum(end, np.where(np.isnan(logged_end), np.inf, logged_end))
        end = np.minimum(end, _next_at_or_after(s0, b))
        end = np.minimum(end, _next_at_or_after(it, b))
        end = np.minimum(end, release[att_index(b)] if b.size else end)
        if markers.size and b.size:
            i = np.searchsorted(markers, b, side="right")
            nxt = np.full(b.size, np.inf)
            nxt[i < markers.size] = markers[i[i < markers.size]]
            end = np.minimum(end, nxt)
        return end

    def pause_windows(b: np.ndarray, paired_end: np.ndarray | None, logged_end: np.ndarray, ds: np.ndarray,
                      de: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _merge(np.concatenate([b, ds]), np.concatenate([pause_end(b, paired_end, logged_end), de]))

    ck_s, ck_e = pause_windows(job.ckpt_begin_time, job.ckpt_begin_commit, job.ckpt_begin_logged_end,
                               job.ckpt_duration_start, job.ckpt_duration_end)
    ev_s, ev_e = pause_windows(job.eval_begin_time, job.eval_begin_end, job.eval_begin_logged_end,
                               job.eval_duration_start, job.eval_duration_end)
    id_s, id_e = pause_windows(job.idle_begin_time, None, job.idle_begin_logged_end, np.zeros(0),
                               np.zeros(0))

    # startup and trailing idle per attempt
    a_first = np.searchsorted(s0, gang, side="left")
    first_start = np.full(gang.size, np.inf)
    if n:
        first_start[a_first < n] = s0[a_first[a_first < n]]
    # startup ends at the first step of the attempt -- or at a first_step marker, when that step was cut
    # off before it finished
    su_e = np.minimum(np.minimum(first_start, _next_at_or_after(np.sort(job.first_step_time), gang)), release)
    a_last = np.searchsorted(s0, release, side="left") - 1
    has_steps = (a_last >= a_first) & (a_last >= 0)
    tr_s = np.where(has_steps, s1[np.maximum(a_last, 0)] if n else gang, release)
    tr_e = np.where(has_steps, release, release)

    # --- held time outside steps, cut at every overlay boundary, labelled by priority ---------------
    if n:
        # after each step, held time runs to the next step of its attempt, or to the release; only
        # the steps followed by a gap are gathered (in step order)
        last_of_run = np.concatenate([run_bounds[1:] - 1, [n - 1]])
        g_idx = np.unique(np.concatenate([np.flatnonzero(s0[lo + 1:hi + 1] > s1[lo:hi]) + lo
                                          for lo, hi in _blocks(n - 1)] + [last_of_run]))
        g_next = np.empty(g_idx.size)
        inner_gap = g_idx < n - 1
        g_next[inner_gap] = s0[g_idx[inner_gap] + 1]
        g_next[np.searchsorted(g_idx, last_of_run)] = release[run_att]
        g0 = np.concatenate([gang, s1[g_idx]])
        g1 = np.concatenate([np.minimum(first_start, release), g_next])
    else:
        g0, g1 = gang.copy(), release.copy()
    keep = g1 > g0
    g0, g1 = g0[keep], g1[keep]
    # overlays, lowest priority first (later ones overwrite earlier ones)
    overlays = [
        (tr_s, tr_e, np.full(gang.size, _L["idle_after_progress"]), np.full(gang.size, -1)),
        (part_start, it, part_label, np.arange(n_int)),
        (gang, su_e, np.full(gang.size, _L["startup_launch"]), np.full(gang.size, -1)),
        (id_s, id_e, np.full(id_s.size, _L["idle_marked"]), np.full(id_s.size, -1)),
        (ev_s, ev_e, np.full(ev_s.size, _L["evaluation"]), np.full(ev_s.size, -1)),
        (ck_s, ck_e, np.full(ck_s.size, _L["checkpoint"]), np.full(ck_s.size, -1)),
        (it, outage_end, out_label, np.arange(n_int)),
        (it, det_end, np.full(n_int, _L["recovery_detection"]), np.arange(n_int)),
    ]
    cuts = np.unique(np.concatenate([np.concatenate([o[0], o[1]]) for o in overlays]))
    cuts = cuts[np.isfinite(cuts)]
    lo = np.searchsorted(cuts, g0, side="right")
    hi = np.searchsorted(cuts, g1, side="left")
    inner = np.maximum(hi - lo, 0)
    count = inner + 1
    gap_of = np.repeat(np.arange(g0.size), count)
    offset = np.arange(gap_of.size) - np.repeat(np.cumsum(count) - count, count)
    cut_idx = lo[gap_of] + offset
    p0 = np.where(offset == 0, g0[gap_of], cuts[np.clip(cut_idx - 1, 0, max(cuts.size - 1, 0))]
                  if cuts.size else g0[gap_of])
    p1 = np.where(offset == inner[gap_of], g1[gap_of], cuts[np.clip(cut_idx, 0, max(cuts.size - 1, 0))]
                  if cuts.size else g1[gap_of])
    mid = 0.5 * (p0 + p1)
    label = np.full(mid.size, _L["unattributed"], dtype=np.int64)
    owner = np.full(mid.size, -1, dtype=np.int64)
    for s_, e_, lab, own in overlays:
        if s_.size == 0:
            continue
        order = np.argsort(s_, kind="stable")
        s_, e_, lab, own = s_[order], e_[order], np.asarray(lab)[order], np.asarray(own)[order]
        nonempty = e_ > s_
        s_, e_, lab, own = s_[nonempty], e_[nonempty], lab[nonempty], own[nonempty]
        idx = _cover(s_, e_, mid)
        hit = idx >= 0
        label[hit] = lab[idx[hit]]
        owner[hit] = own[idx[hit]]

    # --- not-held intervals between attempts -------------------------------------------------------
    b_s, b_e = release[:-1], gang[1:]
    cand = np.searchsorted(it, b_s, side="right") - 1
    b_owner = np.full(b_s.size, -1, dtype=np.int64)
    ok = cand >= 0
    ok[ok] = resume_start[cand[ok]] >= b_s[ok]
    b_owner[ok] = cand[ok]

    return _JobParts(job=job, ff=ff, start=s0, dur=dur, wait=wait, kept=kept, steady=steady,
                     commit_at=ct, commit_reach=reach, commit_cut=cut, x_idx=x_idx, x_amt=x_amt, x_lab=x_lab,
                     x_owner=x_owner, gap_start=p0, gap_end=p1, gap_label=label, gap_owner=owner,
                     between_start=b_s, between_end=b_e, between_owner=b_owner, pause_start=ck_s,
                     pause_end=ck_e)


@dataclass
class _Sums:
    fine: np.ndarray
    productive_committed: float
    productive_retrospective: float
    committed_steps: float
    retained_steps: float
    held: float
    not_held: float
    queue: float
    per_int: np.ndarray   # (n_int, _NFINE) seconds per interruption and fine label
    int_queue: np.ndarray
    n_commits: int
    n_pauses: int
    commit_gaps: np.ndarray


def _window_sums(parts: _JobParts, ws: float, we: float, as_of: float, definition: str,
                 closed: bool = False) -> _Sums:
    job = parts.job
    n = parts.dur.size
    n_int = job.int_time.size
    ff = parts.ff or 0.0
    fine = np.zeros(_NFINE)
    per_int = np.zeros((n_int + 1, _NFINE))
    # the commits landed by as_of retain the never-erased steps with index below `cut`
    last = int(np.searchsorted(parts.commit_at, as_of, side="right")) - 1
    cut = int(parts.commit_cut[last]) if last >= 0 else 0
    if n == 0:
        n_com = n_kept = wait_sum = above = 0.0
        fx = np.zeros(0)
    elif ws <= job.start_s and we >= job.end_s:
        n_com = float(parts.commit_reach[last]) if last >= 0 else 0.0
        n_kept = float(np.count_nonzero(parts.kept))
        wait_sum = float(np.sum(parts.wait, where=parts.steady))
        above = 0.0
        buf = np.empty(min(n, _BLOCK))
        for lo, hi in _blocks(n):
            # compute time above the baseline, in blocks of one reused buffer (no full-length temporary)
            excess = np.subtract(parts.dur[lo:hi], parts.wait[lo:hi], out=buf[:hi - lo])
            excess -= ff
            above += float(np.sum(excess, where=parts.steady[lo:hi]))
        fx = np.ones(parts.x_idx.size)
    else:
        # the share of each step's duration inside the window (a zero-length step: 1 if it lies inside)
        ov = np.minimum(parts.start + parts.dur, we) - np.maximum(parts.start, ws)
        np.maximum(ov, 0.0, out=ov)
        zero = parts.dur == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(zero, ((parts.start >= ws) & (parts.start < we)).astype(float),
                         ov / np.where(zero, 1.0, parts.dur))
        n_com = float(np.sum(f[:cut], where=parts.kept[:cut]))
        n_kept = float(np.sum(f, where=parts.kept))
        wait_sum = float(np.sum(f * parts.wait, where=parts.steady))
        above = float(np.sum(f * (parts.dur - parts.wait - ff), where=parts.steady))
        fx = f[parts.x_idx]
    p_com = ff * n_com
    p_all = ff * n_kept
    if definition == "committed":
        fine[_L["productive"]] = p_com
        fine[_L["progress_at_risk"]] = ff * (n_kept - n_com)
    else:
        fine[_L["productive"]] = p_all
    fine[_L["input_wait"]] = wait_sum
    fine[_L["step_time_above_baseline"]] = above
    x = fx * parts.x_amt
    fine += np.bincount(parts.x_lab, weights=x, minlength=_NFINE)
    per_int += np.bincount((parts.x_owner + 1) * _NFINE + parts.x_lab, weights=x,
                           minlength=(n_int + 1) * _NFINE).reshape(n_int + 1, _NFINE)
    ov = np.clip(np.minimum(parts.gap_end, we) - np.maximum(parts.gap_start, ws), 0.0, None)
    fine += np.bincount(parts.gap_label, weights=ov, minlength=_NFINE)
    per_int += np.bincount((parts.gap_owner + 1) * _NFINE + parts.gap_label, weights=ov,
                           minlength=(n_int + 1) * _NFINE).reshape(n_int + 1, _NFINE)
    held_parts = np.minimum(job.attempt_release, we) - np.maximum(job.attempt_gang, ws)
    held = float(np.clip(held_parts, 0.0, None).sum())
    bw = np.clip(np.minimum(parts.between_end, we) - np.maximum(parts.between_start, ws), 0.0, None)
    queue = float(bw[parts.between_owner >= 0].sum())
    int_queue = np.bincount(parts.between_owner[parts.between_owner >= 0],
                            weights=bw[parts.between_owner >= 0], minlength=n_int).astype(float)
    ct = np.sort(job.commit_time)
    ct = ct[(ct >= ws) & ((ct <= we) if closed else (ct < we))]
    gaps = np.diff(ct)
    if gaps.size and job.int_time.size:
        # spacing across an interruption is not a checkpoint interval
        between = np.searchsorted(job.int_time, ct[1:], side="left") > np.searchsorted(job.int_time, ct[:-1],
                                                                                        side="left")
        gaps = gaps[~between]
    n_pauses = int(((parts.pause_start >= ws) & ((parts.pause_start <= we) if closed else
                                                 (parts.pause_start < we))).sum())
    return _Sums(fine=fine, productive_committed=p_com, productive_retrospective=p_all,
                 committed_steps=n_com, retained_steps=n_kept,
                 held=held, not_held=max(we - ws, 0.0) - held, queue=queue, per_int=per_int[1:],
                 int_queue=int_queue, n_commits=int(ct.size), n_pauses=n_pauses, commit_gaps=gaps)


# ---------------------------------------------------------------------------------------------------
# Result object
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeMeasurement:
    """Runtime goodput measured from a job timeline, with its exhaustive partition of held time.

    Attributes
    ----------
    definition
        ``"committed"`` or ``"retrospective"`` (what ``categories["productive"]`` counts).
    window_start, window_end
        The measured window ``[start, end)`` (UTC).  Without a window: first gang completion to last
        release of the selected jobs.
    as_of
        Commits landing at or before this instant retain steps (committed definition).
    held_s
        Held time inside the window, seconds (all selected jobs together).
    not_held_s
        Window time outside held intervals (before, between or after attempts), seconds.
    queue_after_interruption_s
        The part of ``not_held_s`` spent waiting for readmission after a failure or eviction: a
        time-to-result cost, not a runtime loss.
    categories
        The partition of ``held_s`` (keys :data:`CATEGORIES`); the values sum to ``held_s``.
    breakdown
        The same time in finer parts (keys of :data:`BREAKDOWN`).
    productive_committed_s, productive_retrospective_s
        Productive time under each definition; their difference is the progress at risk.
    committed_steps, retained_steps
        Step counts behind them (fractional where a window cuts a step).
    fault_free_step_s
        Fault-free step time per job (None for a job with no steps in the timeline).
    estimator, warmup_tolerance
        How the fault-free time was obtained (``"median"``, ``"mean"`` or ``"given"``) and the warm-up
        threshold used.
    checkpoint_commits, checkpoint_pauses
        Commits that landed, and checkpoint pauses that began, inside the window.
    commit_spacing_s
        Median time between consecutive commits inside the window with no interruption between
        them (None with fewer than two): the checkpoint cadence actually used.
    interruptions
        One row per failure or preemption (logged or inferred) with the held time charged to it
        inside the window: ``detection_s, restart_s, warmup_s, lost_steps_s, partial_step_s,
        queue_s``, the rollback point, and ``in_window`` (whether the interruption itself happened
        inside the window).
    per_job
        One row per job: held time, each category, fault-free step time.
    ledger
        Row accounting and interpretive flags.  Measured from tables: the rows of the canonical
        tables.  Measured by :func:`fleetlib.runtime.measure.measure` from files: the reader's
        records, with the measurement's flags added.
    table_ledger
        When ``ledger`` is a reader's, the measurement's own accounting of the canonical rows it
        validated (None otherwise).
    """

    definition: str
    window_start: pd.Timestamp
    window_end: pd.Timestamp
    as_of: pd.Timestamp
    held_s: float
    not_held_s: float
    queue_after_interruption_s: float
    categories: dict[str, float]
    breakdown: dict[str, float]
    productive_committed_s: float
    productive_retrospective_s: float
    committed_steps: float
    retained_steps: float
    fault_free_step_s: dict[str, float | None]
    estimator: str
    warmup_tolerance: float
    checkpoint_commits: int
    checkpoint_pauses: int
    commit_spacing_s: float | None
    interruptions: pd.DataFrame
    per_job: pd.DataFrame
    ledger: TimelineLedger = field(repr=False)
    table_ledger: TimelineLedger | None = field(default=None, repr=False)

    @property
    def window(self) -> Window:
        """The measured window ``[window_start, window_end)``."""
        return Window.between(self.window_start, self.window_end)

    @property
    def productive_s(self) -> float:
        """Productive time under this measurement's definition."""
        return self.categories["productive"]

    @property
    def runtime_goodput(self) -> float | None:
        """Productive time over held time; None when the window holds no held time."""
        if self.held_s <= 0.0:
            return None
        return self.productive_s / self.held_s

    @property
    def progress_at_risk_s(self) -> float:
        """Retrospective minus committed productive time: finished work not yet checkpointed."""
        return self.productive_retrospective_s - self.productive_committed_s

    @property
    def losses(self) -> dict[str, float]:
        """Every category except ``productive``, in seconds."""
        return {k: v for k, v in self.categories.items() if k != "productive"}

    @property
    def partition_error_s(self) -> float:
        """Sum of the categories minus held time (floating-point rounding only)."""
        return math.fsum(self.categories.values()) - self.held_s

    def shares(self) -> dict[str, float]:
        """Each category as a fraction of held time."""
        if self.held_s <= 0.0:
            raise DomainError("the window contains no held time: shares of held time have no meaning")
        return {k: v / self.held_s for k, v in self.categories.items()}

    def convention(self) -> str:
        """Describe the convention in words: definition, closing rule, fault-free estimator."""
        ff = {k: (None if v is None else round(v, 9)) for k, v in self.fault_free_step_s.items()}
        ff_text = (next(iter(ff.values())) if len(ff) == 1 else ff)
        return (f"runtime goodput, {self.definition} definition (commits counted as of "
                f"{self.as_of.isoformat()}); fault-free step time {ff_text} s ({self.estimator} of "
                f"steady-state compute time, input wait removed); warm-up tolerance "
                f"{self.warmup_tolerance:g}")

    def to_factor(self) -> Factor:
        """Return :meth:`factor` (the old name, kept)."""
        return self.factor()

    def factor(self) -> Factor:
        """Return the measurement as a fleetlib runtime :class:`~fleetlib.accounting.Factor`.

        The factor's numerator is productive seconds and its denominator held seconds, over the
        measured window.  Its losses are every category except ``productive`` and ``unattributed``
        (which the factor recomputes and which therefore equals this partition's, up to rounding) --
        except that a *negative* ``step_time_above_baseline`` (retained steps faster than a median
        baseline) cannot be a loss: it is then left to the factor's ``unattributed``, which turns
        negative by the same amount, and the convention says so.

        Returns
        -------
        fleetlib.accounting.Factor

        Raises
        ------
        DomainError
            When the window contains no held time.
        """
        if self.held_s <= 0.0:
            raise DomainError("the window contains no held time: runtime goodput (productive / held) has "
                              "no value there")
        losses = {k: v for k, v in self.categories.items() if k not in ("productive", "unattributed")}
        convention = self.convention()
        if losses["step_time_above_baseline"] < 0:
            credit = losses.pop("step_time_above_baseline")
            convention += (f"; retained steps ran {-credit:.6g} s faster than the baseline in total, "
                           "shown in unattributed")
        return Factor(boundary="runtime", numerator=self.productive_s, denominator=self.held_s,
                      window=self.window, record="job timeline", convention=convention, numerator_unit="s",
                      denominator_unit="s", losses=losses)

    def to_dict(self) -> dict[str, Any]:
        """Return the measurement as a JSON-ready dictionary (tables as lists of records)."""
        return {
            "runtime_goodput": self.runtime_goodput,
            "definition": self.definition,
            "window": {"start": self.window_start.isoformat(), "end": self.window_end.isoformat()},
            "as_of": self.as_of.isoformat(),
            "held_s": self.held_s,
            "not_held_s": self.not_held_s,
            "queue_after_interruption_s": self.queue_after_interruption_s,
            "categories": dict(self.categories),
            "breakdown": dict(self.breakdown),
            "productive_committed_s": self.productive_committed_s,
            "productive_retrospective_s": self.productive_retrospective_s,
            "progress_at_risk_s": self.progress_at_risk_s,
            "committed_steps": self.committed_steps,
            "retained_steps": self.retained_steps,
            "fault_free_step_s": dict(self.fault_free_step_s),
            "checkpoint_commits": self.checkpoint_commits,
            "checkpoint_pauses": self.checkpoint_pauses,
            "commit_spacing_s": self.commit_spacing_s,
            "estimator": self.estimator,
            "warmup_tolerance": self.warmup_tolerance,
            "convention": self.convention(),
            "interruptions": _records(self.interruptions),
            "per_job": _records(self.per_job.reset_index()),
            "ledger": self.ledger.to_dict(),
        }


# ---------------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Return a JSON-ready value: numpy scalars unwrapped, missing values as None, times as text."""
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return _plain(value.item())
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _ts(value: Any, name: str) -> pd.Timestamp:
    try:
        t = pd.Timestamp(value)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} must be a timestamp; got {value!r}") from exc
    if t.tzinfo is None:
        raise DomainError(f"{name} must be timezone-aware (UTC); got the naive time {value!r}")
    return t.tz_convert("UTC")


def _window_bounds(window: Any) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """Return a window's UTC bounds, read by :meth:`fleetlib.accounting.Window.parse` (None: no window)."""
    parsed = Window.parse(window)
    if parsed is None:
        return None
    if parsed.is_nominal:
        raise DomainError("a measured runtime window needs start and end times, not a nominal label")
    assert parsed.start is not None and parsed.end is not None
    return parsed.start, parsed.end


def _check_options(definition: str, estimator: str, warmup_tolerance: float) -> float:
    check_definition(definition)
    if estimator not in ("median", "mean"):
        raise DomainError(f"estimator must be 'median' or 'mean'; got {estimator!r}")
    return check_nonnegative("warmup_tolerance", warmup_tolerance)


def _fault_free_for(job_id: str, given: float | Mapping[str, float] | None) -> float | None:
    if given is None:
        return None
    if isinstance(given, Mapping):
        if job_id not in given:
            return None
        value = given[job_id]
    else:
        value = given
    v = check_nonnegative("fault_free_step_s", value)
    if v == 0.0:
        raise DomainError("fault_free_step_s must be > 0")
    return v


_INT_COLUMNS = ("job_id", "time", "kind", "inferred", "attempt", "restore_step", "detection_s", "restart_s",
                "warmup_s", "lost_steps_s", "partial_step_s", "queue_s", "recovery_s", "lost_work_s",
                "in_window")


def _interruption_rows(parts: _JobParts, sums: _Sums, ws: float, we: float, closed: bool) -> pd.DataFrame:
    job = parts.job
    m = sums.per_int
    if job.int_time.size == 0:
        return pd.DataFrame({c: [] for c in _INT_COLUMNS})
    det = m[:, _L["recovery_detection"]]
    restart = m[:, _L["recovery_restart"]] + m[:, _L["preemption_restart"]]
    warmup = m[:, _L["recovery_warmup"]] + m[:, _L["preemption_warmup"]]
    lost = m[:, _L["rework_steps"]] + m[:, _L["preemption_lost_steps"]]
    partial = m[:, _L["rework_partial_step"]] + m[:, _L["preemption_partial_step"]]
    restore = job.int_restore_step
    return pd.DataFrame({
        "job_id": job.job_id,
        "time": [job.to_utc(t) for t in job.int_time],
        "kind": job.int_kind.astype(str),
        "inferred": job.int_inferred,
        "attempt": job.int_attempt,
        "restore_step": pd.array(np.where(np.isfinite(restore), restore, np.nan), dtype="Float64"),
        "detection_s": det,
        "restart_s": restart,
        "warmup_s": warmup,
        "lost_steps_s": lost,
        "partial_step_s": partial,
        "queue_s": sums.int_queue,
        "recovery_s": det + restart + warmup,
        "lost_work_s": lost + partial,
        "in_window": (job.int_time >= ws) & ((job.int_time <= we) if closed else (job.int_time < we)),
    })


def _measure(jobs: list[JobTimeline], ledger: TimelineLedger, *, windows: list[tuple[Any, Any]] | None,
             window: Any, definition: str, fault_free_step_s: float | Mapping[str, float] | None,
             estimator: str, warmup_tolerance: float, as_of: Any) -> list[RuntimeMeasurement]:
    tol = _check_options(definition, estimator, warmup_tolerance)
    if not jobs:
        raise DomainError("the timeline holds no job")
    parts = [_job_parts(j, _fault_free_for(j.job_id, fault_free_step_s), estimator, tol) for j in jobs]
    span0 = min(j.to_utc(j.start_s) for j in jobs)
    span1 = max(j.to_utc(j.end_s) for j in jobs)
    # the whole timeline (no window given) also counts records at its very end (a final commit, a
    # failure at release); a window [start, end) leaves records at `end` to the next window
    closed = windows is None and window is None
    if windows is None:
        bounds = _window_bounds(window)
        windows = [bounds if bounds is not None else (span0, span1)]
    est = "given" if fault_free_step_s is not None else estimator
    out = []
    for ws_t, we_t in windows:
        if as_of is None:
            as_of_t = we_t
        elif isinstance(as_of, str) and as_of == "data_end":
            as_of_t = span1
        elif isinstance(as_of, str) and as_of == "window_end":
            as_of_t = we_t
        else:
            as_of_t = _ts(as_of, "as_of")
        fine = np.zeros(_NFINE)
        held = not_held_sum = queue = p_com = p_all = c_steps = r_steps = 0.0
        per_job_rows = []
        inter_frames = []
        n_commits = n_pauses = 0
        gaps: list[np.ndarray] = []
        for p in parts:
            o = p.job.origin
            ws, we, ao = _rel(ws_t, o), _rel(we_t, o), _rel(as_of_t, o)
            s = _window_sums(p, ws, we, ao, definition, closed)
            fine += s.fine
            held += s.held
            not_held_sum += s.not_held
            queue += s.queue
            p_com += s.productive_committed
            p_all += s.productive_retrospective
            c_steps += s.committed_steps
            r_steps += s.retained_steps
            cats = _coarse(s.fine)
            per_job_rows.append({"job_id": p.job.job_id, "held_s": s.held, **cats,
                                 "fault_free_step_s": p.ff})
            inter_frames.append(_interruption_rows(p, s, ws, we, closed))
            n_commits += s.n_commits
            n_pauses += s.n_pauses
            gaps.append(s.commit_gaps)
        inter = pd.concat(inter_frames, ignore_index=True) if inter_frames else pd.DataFrame()
        out.append(RuntimeMeasurement(
            definition=definition, window_start=ws_t, window_end=we_t, as_of=as_of_t, held_s=held,
            not_held_s=not_held_sum, queue_after_interruption_s=queue, categories=_coarse(fine),
            breakdown={k: float(fine[i]) for i, k in enumerate(_FINE)}, productive_committed_s=p_com,
            productive_retrospective_s=p_all, committed_steps=c_steps, retained_steps=r_steps,
            fault_free_step_s={p.job.job_id: p.ff for p in parts}, estimator=est, warmup_tolerance=tol,
            checkpoint_commits=n_commits, checkpoint_pauses=n_pauses,
            commit_spacing_s=float(np.median(np.concatenate(gaps))) if sum(g.size for g in gaps) else None,
            interruptions=inter, per_job=pd.DataFrame(per_job_rows).set_index("job_id"), ledger=ledger))
    return out


def _rel(t: pd.Timestamp, origin: pd.Timestamp) -> float:
    """Seconds from origin, computed from integer nanoseconds exactly as the timeline arrays are."""
    return (t.as_unit("ns").value - origin.as_unit("ns").value) / 1e9


def _coarse(fine: np.ndarray) -> dict[str, float]:
    out = dict.fromkeys(CATEGORIES, 0.0)
    for i, name in enumerate(_FINE):
        out[BREAKDOWN[name]] += float(fine[i])
    return out


def runtime_goodput(steps: pd.DataFrame, events: pd.DataFrame, *, window: Any = None,
                    definition: Definition = "committed",
                    fault_free_step_s: float | Mapping[str, float] | None = None, job_id: str | None = None,
                    estimator: Literal["median", "mean"] = "median", warmup_tolerance: float = 0.1,
                    as_of: Any = None, source: str = "timeline") -> RuntimeMeasurement:
    """Measure runtime goodput from a canonical timeline as an exact partition of held time.

    See the module docstring for what each category holds, the fault-free estimator, warm-up, the two
    definitions and the window rules.

    Parameters
    ----------
    steps, events
        Canonical timeline tables (:mod:`fleetlib.runtime.timeline`); validated here.
    window
        None (the whole timeline), a measured :class:`~fleetlib.accounting.Window`, or a
        ``(start, end)`` pair of timezone-aware times; the window is ``[start, end)``.
    definition
        ``"committed"`` (checkpoint-retained steps; default) or ``"retrospective"``.
    fault_free_step_s
        Fault-free step time in seconds (a number for every job, or a mapping job -> seconds);
        None to estimate it per job.
    job_id
        Measure only this job; None measures every job in the timeline together (seconds add up
        across jobs, so each job weighs by its held time).
    estimator
        ``"median"`` (default) or ``"mean"`` of steady-state compute time, when estimating.
    warmup_tolerance
        A step after a (re)start is warm-up while its duration exceeds ``(1 + tolerance)`` times the
        fault-free time; >= 0 (default 0.1).
    as_of
        When commits are judged: None / ``"window_end"`` (the closing rule; default),
        ``"data_end"`` (everything the timeline knows) or a timezone-aware time.
    source
        Name used in error messages and the ledger.

    Returns
    -------
    RuntimeMeasurement
        The partition, both productive totals, the interruptions and the ledger.

    Raises
    ------
    fleetlib.quality.InputError
        On an invalid timeline (see :func:`~fleetlib.runtime.timeline.validate_timeline`).
    fleetlib.quality.DomainError
        On invalid options or window.
    """
    jobs, ledger = job_timelines(steps, events, job_id=job_id, source=source)
    return _measure(jobs, ledger, windows=None, window=window, definition=definition,
                    fault_free_step_s=fault_free_step_s, estimator=estimator,
                    warmup_tolerance=warmup_tolerance, as_of=as_of)[0]


def runtime_goodput_windows(steps: pd.DataFrame, events: pd.DataFrame, edges: Sequence[Any], *,
                            definition: Definition = "committed",
                            fault_free_step_s: float | Mapping[str, float] | None = None,
                            job_id: str | None = None, estimator: Literal["median", "mean"] = "median",
                            warmup_tolerance: float = 0.1, as_of: Any = None,
                            source: str = "timeline") -> list[RuntimeMeasurement]:
    """Measure consecutive windows ``[edges[i], edges[i+1])`` of one timeline, reading it once.

    Rolling or fixed windows for a dashboard: the timeline is validated and partitioned once and
    then clipped to each window.  The fault-free step time is estimated on the whole timeline, so
    every window uses the same baseline.

    Parameters
    ----------
    steps, events
        Canonical timeline tables.
    edges
        At least two increasing timezone-aware times.
    definition, fault_free_step_s, job_id, estimator, warmup_tolerance, source
        As in :func:`runtime_goodput`.
    as_of
        As in :func:`runtime_goodput`; None judges each window's commits at its own end.

    Returns
    -------
    list of RuntimeMeasurement
        One per window, in order.
    """
    times = [_ts(e, "window edge") for e in edges]
    if len(times) < 2:
        raise DomainError("runtime_goodput_windows needs at least two edges")
    if any(b <= a for a, b in itertools.pairwise(times)):
        raise DomainError("window edges must increase strictly")
    jobs, ledger = job_timelines(steps, events, job_id=job_id, source=source)
    return _measure(jobs, ledger, windows=list(itertools.pairwise(times)), window=None,
                    definition=definition, fault_free_step_s=fault_free_step_s, estimator=estimator,
                    warmup_tolerance=warmup_tolerance, as_of=as_of)


def runtime_summary(steps: pd.DataFrame, events: pd.DataFrame, *, job_id: str | None = None,
                    window: Any = None, definition: Definition = "committed",
                    fault_free_step_s: float | None = None, source: str = "timeline") -> dict[str, Any]:
    """Return the CLI object of ``fleetlib runtime ... --json`` for a canonical timeline.

    Parameters
    ----------
    steps, events
        Canonical timeline tables.
    job_id, window, definition, fault_free_step_s, source
        As in :func:`runtime_goodput`.

    Returns
    -------
    dict
        ``runtime_goodput`` (None when the window holds no held time), ``held_s``,
        ``productive_s``, ``terms`` (seconds, keys :data:`ISSUE_TERMS`), ``fault_free_step_s``
        (a number for one job, a mapping for several), ``definition`` and ``ledger``; plus
        ``retained_not_productive`` (``progress_at_risk`` and ``step_time_above_baseline``, the two
        parts of held time spent in retained steps but not credited as productive, so that
        ``productive_s + sum(terms) + sum(retained_not_productive) == held_s``),
        ``progress_at_risk_s``, ``productive_committed_s``, ``productive_retrospective_s``,
        ``queue_after_interruption_s``, ``not_held_s``, ``window``, ``as_of``, ``convention`` and
        ``interruptions`` (count by kind).
    """
    m = runtime_goodput(steps, events, window=window, definition=definition,
                        fault_free_step_s=fault_free_step_s, job_id=job_id, source=source)
    return summary_of(m)


def summary_of(m: RuntimeMeasurement) -> dict[str, Any]:
    """Return the object of :func:`runtime_summary` for a measurement already made.

    Parameters
    ----------
    m
        A runtime measurement (from :func:`runtime_goodput` or :func:`fleetlib.runtime.measure.measure`).

    Returns
    -------
    dict
        As :func:`runtime_summary`; ``ledger`` is ``m.ledger``'s dictionary.
    """
    ff: Any = m.fault_free_step_s
    if len(ff) == 1:
        ff = next(iter(ff.values()))
    kinds = m.interruptions["kind"].value_counts().to_dict() if len(m.interruptions) else {}
    return {
        "runtime_goodput": m.runtime_goodput,
        "held_s": m.held_s,
        "productive_s": m.productive_s,
        "terms": {k: m.categories[k] for k in ISSUE_TERMS},
        "retained_not_productive": {"progress_at_risk": m.categories["progress_at_risk"],
                                    "step_time_above_baseline": m.categories["step_time_above_baseline"]},
        "fault_free_step_s": ff,
        "definition": m.definition,
        "ledger": m.ledger.to_dict(),
        "progress_at_risk_s": m.progress_at_risk_s,
        "productive_committed_s": m.productive_committed_s,
        "productive_retrospective_s": m.productive_retrospective_s,
        "queue_after_interruption_s": m.queue_after_interruption_s,
        "not_held_s": m.not_held_s,
        "window": {"start": m.window_start.isoformat(), "end": m.window_end.isoformat()},
        "as_of": m.as_of.isoformat(),
        "convention": m.convention(),
        "interruptions": {str(k): int(v) for k, v in kinds.items()},
    }




def held_intervals(steps: pd.DataFrame, events: pd.DataFrame, *, job_id: str | None = None,
                   fault_free_step_s: float | None = None, estimator: str = "median",
                   warmup_tolerance: float = 0.1) -> pd.DataFrame:
    """Label every stretch of a job's timeline with the category it is charged to (for a Gantt chart).

    The same charging as :func:`runtime_goodput` over the whole timeline, kept as intervals rather than
    summed: one row per executed step (``record="step"``), per gap between steps inside held time
    (``record="gap"``), and per stretch between two attempts that is not held time, such as the queue
    wait after an eviction (``record="between"``, category ``"not_held"``).  A step is labelled
    ``productive`` when a commit retains it, ``progress_at_risk`` when nothing has committed it yet,
    or with the loss it was charged to (rework, recovery warm-up ...); ``phase`` says whether it ran
    in steady state, in a warm-up after a restart, or was erased.  Pieces shorter than the
    timestamps' nanosecond resolution are rounding, not time, and are dropped (steps are always kept).

    Parameters
    ----------
    steps, events
        Canonical timeline tables (:mod:`fleetlib.runtime.timeline`).
    job_id
        One job to draw; default every job.
    fault_free_step_s, estimator, warmup_tolerance
        As in :func:`runtime_goodput`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`HELD_INTERVAL_COLUMNS`, sorted by job and start time.
    """
    if estimator not in ("median", "mean"):
        raise DomainError(f"estimator must be 'median' or 'mean'; got {estimator!r}")
    tol = check_nonnegative("warmup_tolerance", warmup_tolerance)
    category_of = np.array([BREAKDOWN[f] for f in _FINE], dtype=object)
    frames = []
    for job in job_timelines(steps, events, job_id=job_id)[0]:
        parts = _job_parts(job, fault_free_step_s, estimator, tol)
        n = parts.dur.size
        label = np.full(n, "progress_at_risk", dtype=object)
        ever = int(parts.commit_cut[-1]) if parts.commit_cut.size else 0
        label[:ever][parts.kept[:ever]] = "productive"  # retained by a commit, whenever it landed
        label[parts.x_idx] = category_of[parts.x_lab]
        phase = np.full(n, "steady", dtype=object)
        phase[parts.x_idx] = np.where(parts.kept[parts.x_idx], "warm-up", "erased")
        start = np.concatenate([parts.start, parts.gap_start, parts.between_start])
        end = np.concatenate([parts.start + parts.dur, parts.gap_end, parts.between_end])
        which = np.clip(np.searchsorted(job.attempt_gang, start, side="right") - 1, 0, None)
        attempt = job.attempt_number[which]
        # a queue wait between attempts belongs to the attempt it leads to
        attempt[n + parts.gap_start.size:] = job.attempt_number[1:]
        frame = pd.DataFrame({
            "job_id": job.job_id,
            "attempt": attempt,
            "start": job.origin + pd.to_timedelta(np.round(start * 1e9).astype(np.int64), unit="ns"),
            "end": job.origin + pd.to_timedelta(np.round(end * 1e9).astype(np.int64), unit="ns"),
            "category": np.concatenate([label, category_of[parts.gap_label],
                                        np.full(parts.between_start.size, "not_held")]),
            "record": np.repeat(["step", "gap", "between"],
                                [n, parts.gap_start.size, parts.between_start.size]),
            "phase": np.concatenate([phase, np.full(start.size - n, "")]),
        })
        frame["duration_s"] = (frame["end"] - frame["start"]).dt.total_seconds()
        frames.append(frame[(frame["record"] == "step") | (frame["duration_s"] > 0)])
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in HELD_INTERVAL_COLUMNS})
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(["job_id", "start"], kind="stable", ignore_index=True)[list(HELD_INTERVAL_COLUMNS)]
