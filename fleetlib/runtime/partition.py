"""The per-job parts of held time, computed once per job and clipped to any window.

:func:`_job_parts` turns one :class:`~fleetlib.runtime.timeline.JobTimeline` into labelled pieces --
steps (kept, steady, warm-up, erased), commits and the chain they retain, held time outside steps
cut at every overlay boundary, the not-held time between attempts -- and :func:`_window_sums` adds
them up inside a window.  Internal: :mod:`fleetlib.runtime.goodput` measures with it (and
re-exports ``_chain_index`` and ``_chain_searchsorted``, which the exactness tests import).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetlib.quality import DomainError
from fleetlib.runtime.job_structure import _BLOCK, JobTimeline, _blocks
from fleetlib.runtime.schema import BREAKDOWN

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
    stalled: np.ndarray        # steady steps whose compute time exceeds the stall bound
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


def _estimate_fault_free(compute: np.ndarray, first_of_run: np.ndarray, estimator: str) -> float | None:
    """Median (or mean) compute time (duration less input wait) of the steps other than the first of each run.

    ``first_of_run`` holds the (sorted, distinct) indices left out.  Neither statistic depends on the
    order of the sample, so it is built in one buffer -- a copy of the compute times, with the
    left-out slots filled from the tail -- and partitioned in place.
    """
    n = compute.size
    if n == 0:
        return None
    sample = compute.copy()
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


def _job_parts(job: JobTimeline, ff_given: float | None, estimator: str, tol: float,
               stall_factor: float = 5.0, clean_end_commit: bool = True) -> _JobParts:
    n = job.n_steps
    s0, s1 = job.step_start, job.step_end
    dur = job.step_duration  # exact to the nanosecond (not s1 - s0 in floating point)
    wait = job.step_input_wait
    gang, release = job.attempt_gang, job.attempt_release
    it, ikind = job.int_time, job.int_kind
    n_int = it.size
    int_is_pre = ikind == "preempt"

    compute = np.subtract(dur, wait)  # once: the estimate, warm-up and stalls all judge compute time
    ff, resume, resume_start, run_att, run_bounds, starts, trigger = _job_runs(
        compute, estimator, ff_given, it, job, n, n_int, s0)
    erased_idx, kept, steady, x_amt, x_idx, x_lab, x_owner = _job_excess_steps(
        dur, compute, ff, int_is_pre, job, n, starts, tol, trigger)
    stalled = steady & (compute > stall_factor * (ff or 0.0)) if n else np.zeros(0, bool)
    del compute
    ct, cut, reach = _job_retention(erased_idx, job, n, s1, _clean_end(job) if clean_end_commit else None)
    ck_e, ck_s, first_start, overlays = _job_overlays(
        gang, ikind, it, job, n, n_int, release, resume, resume_start, s0, s1)
    label, owner, p0, p1 = _job_gaps(first_start, gang, n, overlays, release, run_att, run_bounds, s0, s1)
    b_e, b_owner, b_s = _job_between_attempts(gang, it, release, resume_start)

    return _JobParts(job=job, ff=ff, start=s0, dur=dur, wait=wait, kept=kept, steady=steady, stalled=stalled,
                     commit_at=ct, commit_reach=reach, commit_cut=cut, x_idx=x_idx, x_amt=x_amt, x_lab=x_lab,
                     x_owner=x_owner, gap_start=p0, gap_end=p1, gap_label=label, gap_owner=owner,
                     between_start=b_s, between_end=b_e, between_owner=b_owner, pause_start=ck_s,
                     pause_end=ck_e)


def _job_runs(compute: np.ndarray, estimator: str, ff_given: float | None, it: np.ndarray, job: JobTimeline,
              n: int, n_int: int, s0: np.ndarray) -> tuple[Any, ...]:
    """Split the steps into runs (the steps from each (re)start) and find what triggered each run.

    Returns the fault-free step time (given, or estimated from the steady steps), the first step at
    or after each interruption and its start, each run's attempt, the attempts' first steps, the
    runs' first steps and each run's trigger (an interruption index; -1: a cold launch).
    """
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
    ff = ff_given if ff_given is not None else _estimate_fault_free(compute, starts, estimator)
    return ff, resume, resume_start, run_att, run_bounds, starts, trigger


def _job_excess_steps(dur: np.ndarray, compute: np.ndarray, ff: float | None, int_is_pre: np.ndarray,
                      job: JobTimeline, n: int, starts: np.ndarray, tol: float,
                      trigger: np.ndarray) -> tuple[np.ndarray, ...]:
    """Find the steps whose time is not all productive: warm-up steps and erased (re-run) steps.

    Warm-up is the leading run of slow steps after each (re)start.  Returns the erased steps, the
    kept and steady masks, and each excess amount with its step, label and owning interruption.
    """
    erased_idx = np.flatnonzero(job.erased_by >= 0)
    kept = np.ones(n, dtype=bool)
    kept[erased_idx] = False
    warm_idx = np.zeros(0, np.int64)
    warm_owner = np.zeros(0, np.int64)
    if n:
        assert ff is not None
        run_end = np.concatenate([starts[1:], [n]])
        # warm-up is judged on compute time: an input wait is an input wait in every step
        first_fast = _first_fast(compute, ff * (1.0 + tol), starts, run_end)
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
    x_amt = np.concatenate([dur[warm_idx] - job.step_input_wait[warm_idx] - (ff or 0.0), dur[erased_idx]])
    x_lab = np.concatenate([w_lab, e_lab]).astype(np.int64)
    x_owner = np.concatenate([warm_owner, e_owner]).astype(np.int64)
    return erased_idx, kept, steady, x_amt, x_idx, x_lab, x_owner


def _clean_end(job: JobTimeline) -> float | None:
    """When the job ended cleanly, the time it completed (its result retained); else None.

    A clean end is a ``job_completed`` marker (ml-goodput-measurement's ``job_end_time``; a release
    with a completed end state) in the job's last attempt, at or after its last step, with no failure
    or preemption between that step and the marker.
    """
    if job.completed_time.size == 0 or job.n_steps == 0 or job.attempt_gang.size == 0:
        return None
    last = int(np.argmax(job.attempt_gang))
    done = float(job.completed_time[-1])
    last_end = float(job.step_end[-1])
    if done < last_end or done < float(job.attempt_gang[last]):
        return None
    if job.int_time.size and ((job.int_time >= last_end) & (job.int_time <= done)).any():
        return None
    return done


def _job_retention(erased_idx: np.ndarray, job: JobTimeline, n: int, s1: np.ndarray,
                   clean_end: float | None = None) -> tuple[np.ndarray, ...]:
    """Return how much of the chain of never-erased steps each commit covers (commits in time order).

    ``clean_end``, when given, is a final commit of every step at the job's clean end.  Returns the
    commit times, the chain index each commit cuts at, and each commit's running reach.
    """
    commit_time, commit_step = job.commit_time, job.commit_step
    if clean_end is not None:
        commit_time = np.concatenate([commit_time, [clean_end]])
        commit_step = np.concatenate([commit_step, [np.inf]])
    c_order = np.argsort(commit_time, kind="stable")
    ct = commit_time[c_order]
    reach = np.zeros(ct.size, dtype=np.int64)
    if n and ct.size:
        cs = commit_step[c_order]
        # commit j retains the prefix of the chain with step <= its step that ended before it landed;
        # the first commit whose running reach covers chain element k retains it.  The chain (step
        # numbers increasing, ends increasing) is searched through its positions, never gathered.
        ends_done = np.searchsorted(s1, ct, side="right") - np.searchsorted(s1[erased_idx], ct, side="right")
        covered = np.minimum(_chain_searchsorted(job.step_number, erased_idx, cs), ends_done)
        reach = np.maximum.accumulate(covered)
    cut = _chain_index(reach, erased_idx)
    return ct, cut, reach


def _job_overlays(gang: np.ndarray, ikind: np.ndarray, it: np.ndarray, job: JobTimeline, n: int, n_int: int,
                  release: np.ndarray, resume: np.ndarray, resume_start: np.ndarray, s0: np.ndarray,
                  s1: np.ndarray) -> tuple[Any, ...]:
    """Return the labelled overlays on held time outside steps, lowest priority first.

    Outages, detection, partial steps, pauses (checkpoint, evaluation, idle markers), startup and
    trailing idle per attempt; also the checkpoint pause windows and each attempt's first step start.
    """
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
    return ck_e, ck_s, first_start, overlays


def _job_gaps(first_start: np.ndarray, gang: np.ndarray, n: int,
              overlays: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], release: np.ndarray,
              run_att: np.ndarray, run_bounds: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> tuple[Any, ...]:
    """Cut held time outside steps at every overlay boundary and label each piece by priority.

    Returns each piece's label, owning interruption, start and end.
    """
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
    return label, owner, p0, p1


def _job_between_attempts(gang: np.ndarray, it: np.ndarray, release: np.ndarray, resume_start: np.ndarray
                          ) -> tuple[np.ndarray, ...]:
    """Return the not-held intervals between attempts and the interruption each one follows (-1: none)."""
    b_s, b_e = release[:-1], gang[1:]
    cand = np.searchsorted(it, b_s, side="right") - 1
    b_owner = np.full(b_s.size, -1, dtype=np.int64)
    ok = cand >= 0
    ok[ok] = resume_start[cand[ok]] >= b_s[ok]
    b_owner[ok] = cand[ok]
    return b_e, b_owner, b_s


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
        n_com = n_kept = wait_sum = above = above_com = stall = 0.0
        fx = np.zeros(0)
    else:
        whole = ws <= job.start_s and we >= job.end_s
        reach = (float(parts.commit_reach[last]) if last >= 0 else 0.0) if whole else 0.0
        n_com, n_kept, wait_sum, above, above_com, stall, f = _step_sums(
            parts.start, parts.dur, parts.wait, parts.kept, parts.steady, parts.stalled, ff, cut, reach,
            ws, we, whole)
        fx = np.ones(parts.x_idx.size) if f is None else f[parts.x_idx]
    # a retained step's productive time is its compute time (wall time less input wait); the part
    # above (or, negative, below) the fault-free baseline is the slow-step time handed to the program
    # rung, kept apart in the breakdown ("The walk")
    p_com = ff * n_com + above_com
    p_all = ff * n_kept + above
    if definition == "committed":
        fine[_L["productive"]] = ff * n_com
        fine[_L["slow_step"]] = above_com
        fine[_L["progress_at_risk"]] = ff * (n_kept - n_com)
        fine[_L["slow_step_at_risk"]] = above - above_com
    else:
        fine[_L["productive"]] = ff * n_kept
        fine[_L["slow_step"]] = above
    fine[_L["input_wait"]] = wait_sum
    fine[_L["stall"]] = stall
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


def _sum(values: np.ndarray, where: np.ndarray) -> Any:
    """Return ``np.sum(values, where=where)``: the same ufunc reduction, called without the wrapper."""
    return np.add.reduce(values, axis=None, where=where)


def _step_sums(start: np.ndarray, dur: np.ndarray, wait: np.ndarray, kept: np.ndarray, steady: np.ndarray,
               stalled: np.ndarray, ff: float, cut: int, reach: float, ws: float, we: float, whole: bool
               ) -> tuple[float, float, float, float, float, float, np.ndarray | None]:
    """Sum one job's steps inside a window: steps, input wait, time above the baseline (one step or more).

    ``whole``: the window covers the job's held time (``reach``: the steps its last commit retains);
    otherwise each step counts by the share of its duration inside the window.  Shared by the per-job
    path (:func:`_window_sums`) and the cross-job one (:mod:`fleetlib.runtime._fast`), so both make
    the same floating-point sums.  Returns committed and retained steps, input wait, time above the
    baseline (all, committed), stall time, and the shares (None when ``whole``).
    """
    n = dur.size
    if whole:
        n_kept = float(np.count_nonzero(kept))
        wait_sum = float(_sum(wait, where=kept))
        above = above_com = stall = 0.0
        buf = np.empty(min(n, _BLOCK))
        for lo, hi in _blocks(n):
            # compute time above the baseline, in blocks of one reused buffer (no full-length temporary)
            excess = np.subtract(dur[lo:hi], wait[lo:hi], out=buf[:hi - lo])
            excess -= ff
            slow = steady[lo:hi] & ~stalled[lo:hi]
            above += float(_sum(excess, where=slow))
            stall += float(_sum(excess, where=stalled[lo:hi]))
            if lo < cut:
                c_hi = min(hi, cut)
                above_com += float(_sum(excess[:c_hi - lo], where=slow[:c_hi - lo]))
        return reach, n_kept, wait_sum, above, above_com, stall, None
    # the share of each step's duration inside the window (a zero-length step: 1 if it lies inside)
    ov = np.minimum(start + dur, we) - np.maximum(start, ws)
    np.maximum(ov, 0.0, out=ov)
    zero = dur == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(zero, ((start >= ws) & (start < we)).astype(float), ov / np.where(zero, 1.0, dur))
    n_com = float(_sum(f[:cut], where=kept[:cut]))
    n_kept = float(_sum(f, where=kept))
    wait_sum = float(_sum(f * wait, where=kept))
    weighted_excess = f * (dur - wait - ff)
    slow = steady & ~stalled
    above = float(_sum(weighted_excess, where=slow))
    stall = float(_sum(weighted_excess, where=stalled))
    above_com = float(_sum(weighted_excess[:cut], where=slow[:cut]))
    return n_com, n_kept, wait_sum, above, above_com, stall, f
