"""The runtime rung's per-job numbers for many jobs at once: segment operations across jobs.

:func:`runtime_per_job` returns exactly the ``per_job`` table of
:func:`fleetlib.runtime.goodput.runtime_goodput` (held time, the coarse categories, slow-step time,
retained and committed steps, the fault-free step time, per job) without building one
:class:`~fleetlib.runtime.timeline.JobTimeline` per job for the common job.

* **Which jobs take the fast path** (:func:`_simple_jobs`): one attempt (one ``gang_complete``, one
  ``release``, every record in that attempt), only checkpoint begin and commit markers besides, every
  record inside the held interval, step numbers rising by exactly one, every commit of a step already
  finished, a last step that starts before the release, and a positive fault-free step time.  Such a
  job can raise no error and raise no flag in the per-job build (:mod:`fleetlib.runtime.job_structure`):
  it has no interruption, restore, restart or erasure.
* **Every other job** -- restarts, failures, preemptions, evaluation or idle markers, a missing release,
  an error -- runs through the per-job code unchanged, in job order, before any fast job is measured,
  so an error names the same first offending record as the per-job path does.
* **The same arithmetic.** Every elementwise expression is the per-job code's, applied to all jobs'
  rows at once; searches within a job are global searches on complex keys (job + i*value: numpy
  orders complex numbers by real part, then imaginary part); medians are read off one sort; label sums
  are one ``bincount`` in the per-job order.  The few order-sensitive floating-point sums
  (``np.add.reduce`` with ``where=``, pairwise) are made per job on slices by the same reduction
  (:func:`_whole_sums`; a job the window cuts by the per-job code's own
  :func:`fleetlib.runtime.partition._step_sums`), so every number is bit-for-bit the per-job path's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import excerpt
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.runtime._provenance import Provenance, relocate_error, relocate_ledger
from fleetlib.runtime.job_structure import (
    _BLOCK,
    _NS,
    _build_job,
    _event_origins,
    _lexsort,
    _pair_markers_all,
    _PairedMarkers,
    _Tables,
)
from fleetlib.runtime.partition import _FINE, _L, _NFINE, _clean_end, _job_parts, _step_sums, _window_sums
from fleetlib.runtime.schema import BREAKDOWN, CATEGORIES, STALL_FACTOR
from fleetlib.runtime.timeline import _prepare_tables, _provenances

__all__ = ["runtime_per_job", "runtime_per_job_tables"]

#: Event kinds a fast-path job may carry.
_FAST_KINDS = ("gang_complete", "release", "checkpoint_begin", "checkpoint_commit")
_PER_JOB_COLUMNS = ("held_s", *CATEGORIES, "slow_step", "retained_steps", "committed_steps",
                    "fault_free_step_s")


# ---------------------------------------------------------------------------------------------------
# Searches within groups
# ---------------------------------------------------------------------------------------------------


def _key(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Complex keys ``group + i*values``: sorted by group, then by value (set part by part: no inf*0)."""
    k = np.empty(np.shape(values), dtype=np.complex128)
    k.real = group
    k.imag = values
    return k


def _gsearch(sorted_key: np.ndarray, group: np.ndarray, values: np.ndarray, side: str) -> np.ndarray:
    """Global position of ``searchsorted`` of each value among its own group's (sorted) entries."""
    return np.searchsorted(sorted_key, _key(group, values), side=side)  # type: ignore[call-overload]


def _search_within(sorted_values: np.ndarray, lo: np.ndarray, hi: np.ndarray, targets: np.ndarray,
                   side: str) -> np.ndarray:
    """Global position of ``searchsorted`` of each target in its own sorted run ``sorted_values[lo:hi]``.

    A bisection of all targets at once (about log2 of the longest run steps): what :func:`_gsearch`
    finds, without a complex key over every value.  A NaN target lands after its run, as in numpy.
    """
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    top = max(sorted_values.size - 1, 0)
    while True:
        # every target steps each round (a finished one, lo == hi, stays put): no compaction of the
        # unfinished ones, which cost more than the rounds they save on runs of similar lengths
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) >> 1
        v = sorted_values[np.minimum(mid, top)]
        right = ~(v >= targets) if side == "left" else ~(v > targets)
        lo = np.where(active & right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique`` of NaN-free keys by one sort (numpy's hashed unique of complex keys is slower)."""
    k = np.sort(keys)
    if k.size < 2:
        return k
    new = np.ones(k.size, dtype=bool)
    np.not_equal(k[1:], k[:-1], out=new[1:])
    return k[new]


def _next_in_group(sorted_key: np.ndarray, sorted_values: np.ndarray, group_end: np.ndarray,
                   group: np.ndarray, values: np.ndarray, side: str) -> np.ndarray:
    """Return each value's next entry in its group, at or after it (side 'left') or after it; inf: none."""
    i = _gsearch(sorted_key, group, values, side)
    out = np.full(values.size, np.inf)
    ok = i < group_end[group]
    out[ok] = sorted_values[i[ok]]
    return out


def _group_cummax(values: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Return the running maximum within each (contiguous) group."""
    if values.size == 0:
        return values.copy()
    if not np.isnan(values).any() and bool((group[1:] >= group[:-1]).all()):
        # groups in order: the running lexicographic maximum of (group, value) is each group's own
        # running maximum once the group starts (numpy orders complex numbers by real, then imaginary
        # part; nothing is added to a value)
        return np.maximum.accumulate(_key(group, values)).imag.copy()
    return pd.Series(values).groupby(group, sort=False).cummax().to_numpy()


def _merge_grouped(starts: np.ndarray, ends: np.ndarray, group: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`fleetlib.runtime.partition._merge` within each group: sorted disjoint unions."""
    keep = ends > starts
    s, e, g = starts[keep], ends[keep], group[keep]
    if s.size == 0:
        return s, e, g
    order = _lexsort((s, g))
    s, e, g = s[order], e[order], g[order]
    e = _group_cummax(e, g)
    new = np.ones(s.size, dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > e[:-1])
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx), g[idx]


# ---------------------------------------------------------------------------------------------------
# Which jobs take the fast path
# ---------------------------------------------------------------------------------------------------


def _simple_jobs(t: _Tables, s_b: np.ndarray, e_origin: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Per job code: whether the job has one attempt, only fast kinds and no record the build refuses.

    Every test is the per-job build's own comparison (in seconds since the job's origin, as the build
    compares them), so a job marked here raises no error and no flag there.  Also returns what the
    fast path reuses: each step's start and end in seconds since its job's origin, and for each
    checkpoint commit the number of its job's steps ended by then.
    """
    n_jobs = len(t.job_ids)
    kind, e_job = t.e_kind, t.e_job.astype(np.int64)
    s_job = t.s_job  # the narrow codes index as well as int64 ones (no full-length int64 copy)
    is_kind = {k: kind == k for k in _FAST_KINDS}
    other = ~(is_kind["gang_complete"] | is_kind["release"] | is_kind["checkpoint_begin"]
              | is_kind["checkpoint_commit"])
    ok = ((np.bincount(e_job[is_kind["gang_complete"]], minlength=n_jobs) == 1)
          & (np.bincount(e_job[is_kind["release"]], minlength=n_jobs) == 1)
          & (np.bincount(e_job[other], minlength=n_jobs) == 0))
    shared: dict[str, Any] = {}
    if not ok.any():
        return ok, shared
    gang = np.flatnonzero(is_kind["gang_complete"])
    rel = np.flatnonzero(is_kind["release"])
    attempt = np.zeros(n_jobs, dtype=np.int64)
    attempt[e_job[gang]] = t.e_attempt[gang]
    origin = np.zeros(n_jobs, dtype=np.int64)
    origin[e_job[gang]] = t.e_time[gang]
    release = np.zeros(n_jobs)
    release[e_job[rel]] = (t.e_time[rel] - e_origin[rel]) / _NS
    e_t = (t.e_time - e_origin) / _NS
    bad_e = (t.e_attempt != attempt[e_job]) | (e_t < 0.0) | (e_t > release[e_job])
    ok &= np.bincount(e_job[bad_e], minlength=n_jobs) == 0
    ok &= release >= 0.0
    n = np.diff(s_b)
    # each step's job origin: the steps are grouped by job and s_b bounds every job's run, so a repeat
    # is ``origin[s_job]`` (no gather); one integer buffer serves both differences and the step jumps
    o = np.repeat(origin, n)
    d = np.subtract(t.s_start, o)
    s_t0 = np.divide(d, _NS)
    s_t1 = np.divide(np.subtract(t.s_end, o, out=d), _NS)
    del o
    # a job's steps are in start order and do not overlap (the table checks): its first step starts
    # first and its last ends last, so the held-interval test of every step is one of two per job;
    # every step in the job's attempt: the attempts' least and greatest, per job
    held = np.flatnonzero(n > 0)
    if held.size:
        first, final = s_b[held], s_b[held + 1] - 1
        bad = (s_t0[first] < 0.0) | (s_t1[final] > release[held])
        bad |= np.minimum.reduceat(t.s_attempt, first) != attempt[held]
        bad |= np.maximum.reduceat(t.s_attempt, first) != attempt[held]
        ok[held[bad]] = False
    if t.s_step.size > 1:
        jump = np.not_equal(np.subtract(t.s_step[1:], t.s_step[:-1], out=d[:-1]), 1)  # np.diff(step) != 1
        jump[s_b[1:-1][(s_b[1:-1] > 0) & (s_b[1:-1] < t.s_step.size)] - 1] = False  # across two jobs
        ok &= np.bincount(s_job[1:][jump], minlength=n_jobs) == 0
    last = s_b[1:] - 1
    has = n > 0
    ok[has] &= s_t0[last[has]] < release[has]
    # a commit holds a step already finished: the step of the last step ended by its time
    com = np.flatnonzero(is_kind["checkpoint_commit"])
    done_count = np.zeros(com.size, dtype=np.int64)
    if com.size:
        c_job = e_job[com]
        c_step = t.e_step[com]
        end_idx = _search_within(s_t1, s_b[c_job], s_b[c_job + 1], e_t[com], "right")
        done_count = end_idx - s_b[c_job]
        done = np.full(com.size, -np.inf)
        inside = done_count > 0
        done[inside] = t.s_step[end_idx[inside] - 1]
        bad_c = np.isnan(c_step) | (c_step > done)
        ok &= np.bincount(c_job[bad_c], minlength=n_jobs) == 0
    shared.update(origin=origin, s_t0=s_t0, s_t1=s_t1, commit_pos=com, commit_done=done_count,
                  release=release)
    return ok, shared


# ---------------------------------------------------------------------------------------------------
# The fast jobs, all at once
# ---------------------------------------------------------------------------------------------------


class _FastSteps:
    """The fast jobs' steps and per-job scalars (jobs by rank ``0 .. m - 1``, steps job-major)."""

    def __init__(self, t: _Tables, codes: np.ndarray, s_b: np.ndarray, shared: dict[str, Any]) -> None:
        self.codes = codes
        m = codes.size
        rank_of = np.full(len(t.job_ids), -1, dtype=np.int64)
        rank_of[codes] = np.arange(m)
        self.rank_of = rank_of
        self.event_job = t.e_job.astype(np.int64)
        every = m == len(t.job_ids)  # every job is fast: every step is
        s_sel = None if every else rank_of[t.s_job] >= 0

        def pick(a: np.ndarray) -> np.ndarray:
            return a if every else a[s_sel]

        # each step's job rank: with every job fast, the job codes themselves (narrow: index with it,
        # widen before arithmetic)
        self.g = t.s_job if every else rank_of[t.s_job[s_sel]]
        self.n = (s_b[codes + 1] - s_b[codes]).astype(np.int64)
        self.lo = np.concatenate([[0], np.cumsum(self.n)]).astype(np.int64)
        self.origin = shared["origin"][codes]
        self.release = shared["release"][codes]
        self.s0, self.s1 = pick(shared["s_t0"]), pick(shared["s_t1"])
        # (end - origin) - (start - origin), in integer nanoseconds; a reader's own (the same operations)
        # where it made them
        self.dur = pick(t.s_dur) if t.s_dur is not None else (pick(t.s_end) - pick(t.s_start)) / _NS
        self.wait = pick(t.s_wait)
        self.step = pick(t.s_step)
        self.compute = np.subtract(self.dur, self.wait)
        self.first_start = np.full(m, np.inf)
        has = self.n > 0
        self.first_start[has] = self.s0[self.lo[:-1][has]]
        self.first_step = np.zeros(m, dtype=np.int64)
        self.first_step[has] = self.step[self.lo[:-1][has]]
        c_sel = rank_of[self.event_job[shared["commit_pos"]]] >= 0
        self.commit_pos = shared["commit_pos"][c_sel]
        self.commit_done = shared["commit_done"][c_sel]


def _fault_free(f: _FastSteps) -> np.ndarray:
    """Per job: the median compute time of its steps but the first (a one-step job: its step); NaN: none.

    ``np.median``'s value, as the per-job estimate takes it: the middle order statistic, or the mean
    ``(a + b) / 2`` of the two middle ones (the median does not depend on the order of the sample).
    Jobs with samples of one size are partitioned together, one row each (an order statistic is one
    value however it is found): one ``np.partition`` per sample size, not per job.
    """
    ff = np.full(f.codes.size, np.nan)
    n = f.n
    has = n >= 1
    size = np.where(n == 1, 1, n - 1)  # the sample: every step but the first (one step: itself)
    start = np.where(n == 1, f.lo[:-1], f.lo[:-1] + 1)
    jobs = np.flatnonzero(has)
    by_size = jobs[np.argsort(size[jobs], kind="stable")]
    sizes = size[by_size]
    cuts = np.flatnonzero(np.diff(sizes)) + 1
    for group in np.split(by_size, cuts):
        if group.size == 0:
            continue
        k = int(size[group[0]])
        # each job's sample as one row: rows of a strided window view (no index array is built)
        sample = np.lib.stride_tricks.sliding_window_view(f.compute, k)[start[group]]
        h = k // 2
        # partitioned in place: the rows are a fresh copy already (np.partition copies, then does this)
        if k % 2:
            sample.partition(h, axis=1)
            ff[group] = sample[:, h]
        else:
            sample.partition((h - 1, h), axis=1)
            ff[group] = (sample[:, h - 1] + sample[:, h]) / 2.0
    return ff


def _first_fast(f: _FastSteps, threshold: np.ndarray, probe: int = 16) -> np.ndarray:
    """Per job: the index of its first step whose compute time is at most ``threshold`` (none: its end).

    The first ``probe`` steps of every job are looked at together (a warm-up is short); a job with no
    such step among them is searched on to its end alone.
    """
    lo, hi = f.lo[:-1], f.lo[1:]
    first = hi.copy()
    pending = np.flatnonzero(hi > lo)
    for j in range(probe):
        if pending.size == 0:
            return first
        pos = lo[pending] + j
        inside = pos < hi[pending]
        hit = np.zeros(pending.size, dtype=bool)
        hit[inside] = f.compute[pos[inside]] <= threshold[pending[inside]]
        first[pending[hit]] = pos[hit]
        pending = pending[inside & ~hit]
    for r in pending.tolist():
        rest = f.compute[lo[r] + probe:hi[r]] <= threshold[r]
        if rest.any():
            first[r] = lo[r] + probe + int(np.argmax(rest))
    return first


def _steps_parts(f: _FastSteps, ff: np.ndarray, tol: float, stall_factor: float) -> dict[str, np.ndarray]:
    """Warm-up, steady and stalled steps of every fast job (one run each, from its cold launch).

    Each threshold is made once per job (the same product the per-job code makes) and compared per
    step; a job's warm-up is its steps before the first one within tolerance of its fault-free time.
    """
    first = _first_fast(f, ff * (1.0 + tol))
    length = first - f.lo[:-1]
    total = int(length.sum())
    x_idx = np.repeat(f.lo[:-1], length) + (np.arange(total) - np.repeat(np.cumsum(length) - length, length))
    steady = np.ones(f.g.size, dtype=bool)
    steady[x_idx] = False
    stalled, stalled_jobs = _stalled(f, stall_factor * np.where(np.isnan(ff), 0.0, ff), steady)
    ffs = ff[f.g[x_idx]]
    x_amt = f.dur[x_idx] - f.wait[x_idx] - ffs
    return {"steady": steady, "stalled": stalled, "x_idx": x_idx, "x_amt": x_amt, "warm_len": length,
            "stalled_jobs": stalled_jobs}


def _stalled(f: _FastSteps, threshold: np.ndarray, steady: np.ndarray, loop_jobs: int = 256
             ) -> tuple[np.ndarray, np.ndarray]:
    """Steady steps whose compute time exceeds their job's stall threshold, and the jobs that have one.

    A job's longest compute time is compared first (one reduction): only jobs above their threshold
    are compared step by step -- the same comparison, on their own steps.
    """
    m = f.codes.size
    stalled = np.zeros(f.g.size, dtype=bool)
    jobs = np.zeros(m, dtype=bool)
    nonempty = np.flatnonzero(f.n > 0)
    if nonempty.size == 0:
        return stalled, jobs
    over = nonempty[np.maximum.reduceat(f.compute, f.lo[nonempty]) > threshold[nonempty]]
    if over.size > loop_jobs:
        stalled = f.compute > threshold[f.g]
        stalled &= steady
        jobs[nonempty] = np.logical_or.reduceat(stalled, f.lo[nonempty])
        return stalled, jobs
    lo_all = f.lo.tolist()
    for r in over.tolist():
        lo, hi = lo_all[r], lo_all[r + 1]
        np.logical_and(f.compute[lo:hi] > threshold[r], steady[lo:hi], out=stalled[lo:hi])
        jobs[r] = bool(stalled[lo:hi].any())
    return stalled, jobs


def _commit_reach(t: _Tables, f: _FastSteps, e_origin: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each fast job's commits (landing time, job rank) and the steps each retains once landed.

    A commit retains the steps with number up to its own that ended before it landed; a fast job's
    step numbers rise by one, so the count of steps up to a number is arithmetic.
    """
    pos = f.commit_pos
    g = f.rank_of[f.event_job[pos]]
    ct = (t.e_time[pos] - e_origin[pos]) / _NS
    cs = t.e_step[pos]
    by_step = np.clip(cs - f.first_step[g] + 1, 0, f.n[g]).astype(np.int64)
    covered = np.minimum(by_step, f.commit_done).astype(np.int64)
    big = int(f.g.size) + 1
    reach = np.maximum.accumulate(covered + g * big) - g * big if covered.size else covered
    return ct, g, reach


def _pause_windows(f: _FastSteps, mk: _PairedMarkers) -> tuple[np.ndarray, ...]:
    """Each fast job's checkpoint pause windows (merged), as ``_job_overlays`` builds them."""
    b_sel = f.rank_of[f.event_job[mk.begin]] >= 0
    x_sel = f.rank_of[f.event_job[mk.lone]] >= 0
    bg = f.rank_of[f.event_job[mk.begin[b_sel]]]
    b = mk.begin_time[b_sel]
    paired, logged = mk.pair_end[b_sel], mk.begin_logged_end[b_sel]
    end = np.where(np.isnan(paired), np.inf, paired)
    end = np.minimum(end, np.where(np.isnan(logged), np.inf, logged))
    i = _search_within(f.s0, f.lo[bg], f.lo[bg + 1], b, "left")
    nxt = np.full(b.size, np.inf)
    ok = i < f.lo[bg + 1]
    nxt[ok] = f.s0[i[ok]]
    end = np.minimum(end, nxt)
    end = np.minimum(end, f.release[bg])
    if b.size:
        m_key = np.sort(_key(bg, b))
        m_end = np.searchsorted(m_key.real, np.arange(f.codes.size) + 0.5)
        end = np.minimum(end, _next_in_group(m_key, m_key.imag, m_end, bg, b, "right"))
    xg = f.rank_of[f.event_job[mk.lone[x_sel]]]
    return _merge_grouped(np.concatenate([b, mk.lone_start[x_sel]]),
                          np.concatenate([end, mk.lone_end[x_sel]]),
                          np.concatenate([bg, xg]))


def _gap_labels(f: _FastSteps, ck_s: np.ndarray, ck_e: np.ndarray, ck_g: np.ndarray
                ) -> tuple[np.ndarray, ...]:
    """Held time outside steps, cut at every overlay boundary and labelled by priority (``_job_gaps``).

    A fast job's overlays, lowest priority first: trailing idle after its last step, startup before its
    first, its checkpoint pauses.  Returns each piece's job rank, label, start and end (job-major, in
    the per-job order).
    """
    m = f.codes.size
    ranks = np.arange(m)
    has = f.n > 0
    last = f.lo[1:] - 1
    tr_s = f.release.copy()
    tr_s[has] = f.s1[last[has]]
    su_e = np.minimum(f.first_start, f.release)
    overlays = [(tr_s, f.release, _L["idle_after_progress"], ranks),
                (np.zeros(m), su_e, _L["startup_launch"], ranks),
                (ck_s, ck_e, _L["checkpoint"], ck_g)]
    cut_g = np.concatenate([o[3] for o in overlays for _ in (0, 1)])
    cut_v = np.concatenate([o[i] for o in overlays for i in (0, 1)])
    fin = np.isfinite(cut_v)
    cut_key = _sorted_unique(_key(cut_g[fin], cut_v[fin]))
    cuts = cut_key.imag
    # the gaps: startup (gang -> first step or release), then after each step followed by a gap (in order)
    s_last = np.zeros(f.g.size, dtype=bool)
    s_last[last[has]] = True
    follows = np.zeros(f.g.size, dtype=bool)
    if f.g.size > 1:
        np.greater(f.s0[1:], f.s1[:-1], out=follows[:-1])
    follows |= s_last
    gi = np.flatnonzero(follows)
    nxt = np.empty(gi.size)
    inner = ~s_last[gi]
    nxt[inner] = f.s0[gi[inner] + 1]
    nxt[~inner] = f.release[f.g[gi[~inner]]]
    order = np.argsort(np.concatenate([ranks, f.g[gi]]), kind="stable")
    gr = np.concatenate([ranks, f.g[gi]])[order]
    g0 = np.concatenate([np.zeros(m), f.s1[gi]])[order]
    g1 = np.concatenate([su_e, nxt])[order]
    keep = g1 > g0
    gr, g0, g1 = gr[keep], g0[keep], g1[keep]
    lo = _gsearch(cut_key, gr, g0, "right")
    hi = _gsearch(cut_key, gr, g1, "left")
    inner_n = np.maximum(hi - lo, 0)
    count = inner_n + 1
    gap_of = np.repeat(np.arange(g0.size), count)
    offset = np.arange(gap_of.size) - np.repeat(np.cumsum(count) - count, count)
    cut_idx = lo[gap_of] + offset
    top = max(cuts.size - 1, 0)
    p0 = np.where(offset == 0, g0[gap_of], cuts[np.clip(cut_idx - 1, 0, top)] if cuts.size else g0[gap_of])
    p1 = np.where(offset == inner_n[gap_of], g1[gap_of], cuts[np.clip(cut_idx, 0, top)] if cuts.size
                  else g1[gap_of])
    pr = gr[gap_of]
    mid = 0.5 * (p0 + p1)
    label = np.full(mid.size, _L["unattributed"], dtype=np.int64)
    finite_mid = bool(np.isfinite(mid).all())
    for s_, e_, lab, grp in overlays:
        if grp is ranks and finite_mid and bool(np.isfinite(s_).all()):
            # one interval per job: the search below finds a piece's own job's interval exactly where
            # that interval is not empty and starts at or before the piece's midpoint
            s_p, e_p = s_[pr], e_[pr]
            label[(e_p > s_p) & (s_p <= mid) & (mid < e_p)] = lab
            continue
        order = _lexsort((s_, grp))
        s_, e_, grp = s_[order], e_[order], grp[order]
        nonempty = e_ > s_
        s_, e_, grp = s_[nonempty], e_[nonempty], grp[nonempty]
        if s_.size == 0:
            continue
        idx = _gsearch(_key(grp, s_), pr, mid, "right") - 1
        safe = np.maximum(idx, 0)
        hit = (idx >= 0) & (grp[safe] == pr) & (mid < e_[safe])
        label[hit] = lab
    return pr, label, p0, p1


def _whole_sums(f: _FastSteps, steps: dict[str, np.ndarray], kept: np.ndarray, ffz: np.ndarray,
                cut: np.ndarray, whole: np.ndarray, committed: bool) -> np.ndarray:
    """:func:`~fleetlib.runtime.partition._step_sums` of every job the window covers whole, as rows.

    The same numbers by the same operations: the time above the baseline is the same elementwise
    ``(dur - wait) - ff`` (made once for every step), and each sum the same ufunc reduction
    (``np.add.reduce`` with ``where=``) on the same slice, one call per job and sum.  Sums whose mask
    holds no step of a job are the reduction's identity, 0.0, without a call; the committed share of
    the time above the baseline is summed only for ``definition="committed"`` (nothing reads it
    otherwise: it stays 0.0).  Rows: committed and retained steps, input wait, time above the
    baseline (all, committed), stall time.  A job that is not ``whole`` (or has more steps than one
    block) gets zeros here: the caller sums it by the per-job code.
    """
    m = f.codes.size
    sums = np.zeros((6, m))
    do = whole & (f.n > 0) & (f.n <= _BLOCK)
    sums[0, do] = cut[do].astype(float)
    sums[1, do] = f.n[do].astype(float)  # every step of a fast job is kept
    stalled, any_stalled = steps["stalled"], steps["stalled_jobs"]
    # per job: whether any step is slow (steady, not stalled), stalled, or waited
    nonempty = np.flatnonzero(f.n > 0)
    any_wait = np.zeros(m, dtype=bool)
    if any_stalled.any():
        slow = steps["steady"] & ~stalled
        any_slow = np.zeros(m, dtype=bool)
        if nonempty.size:
            any_slow[nonempty] = np.logical_or.reduceat(slow, f.lo[nonempty])
    else:  # no stalled step: the slow steps are the steady ones, the steps after each warm-up
        slow = steps["steady"]
        any_slow = f.n - steps["warm_len"] > 0
    if nonempty.size:  # waits are >= 0: a job waited where its longest wait is above 0
        any_wait[nonempty] = np.maximum.reduceat(f.wait, f.lo[nonempty]) > 0.0
    add, wait, compute, lo_all = np.add.reduce, f.wait, f.compute, f.lo.tolist()
    ff_all, cut_all = ffz.tolist(), cut.tolist()
    wait_sum, above, above_com, stall = sums[2], sums[3], sums[4], sums[5]
    rows = np.flatnonzero(do & (any_wait | any_slow | any_stalled))
    # the per-job flags as Python booleans (a numpy scalar read costs more than the test it feeds)
    for r, waited, is_slow, is_stalled in zip(rows.tolist(), any_wait[rows].tolist(), any_slow[rows].tolist(),
                                              any_stalled[rows].tolist(), strict=True):
        lo, hi = lo_all[r], lo_all[r + 1]
        if waited:  # else every wait is zero: the sum is 0.0
            wait_sum[r] = add(wait[lo:hi], axis=None, where=kept[lo:hi])
        if not (is_slow or is_stalled):
            continue
        excess = compute[lo:hi] - ff_all[r]  # (dur - wait) - ff, as _step_sums makes it
        if is_slow:
            above[r] = 0.0 + add(excess, axis=None, where=slow[lo:hi])  # 0.0 +: as _step_sums
            c = cut_all[r]
            if committed and c > 0:
                c_hi = min(hi, lo + c)
                above_com[r] = 0.0 + add(excess[:c_hi - lo], axis=None, where=slow[lo:c_hi])
        if is_stalled:
            stall[r] = 0.0 + add(excess, axis=None, where=stalled[lo:hi])
    return sums


def _fast_rows(t: _Tables, f: _FastSteps, markers: tuple[_PairedMarkers, _PairedMarkers],
               e_origin: np.ndarray,
               ff: np.ndarray, tol: float, stall_factor: float, definition: str, ws_ns: int, we_ns: int,
               as_of_ns: int) -> dict[str, np.ndarray]:
    """Return the per-job columns of every fast job inside one window (``_job_parts``, ``_window_sums``)."""
    m = f.codes.size
    steps = _steps_parts(f, ff, tol, stall_factor)
    ct, cg, reach = _commit_reach(t, f, e_origin)
    ck_s, ck_e, ck_g = _pause_windows(f, markers[0])
    pr, label, p0, p1 = _gap_labels(f, ck_s, ck_e, ck_g)
    # the window in seconds since each job's origin, as goodput._rel computes it
    ws = (ws_ns - f.origin) / 1e9
    we = (we_ns - f.origin) / 1e9
    ao = (as_of_ns - f.origin) / 1e9
    whole = (ws <= 0.0) & (we >= f.release)
    c_last = _gsearch(_key(cg, ct), np.arange(m), ao, "right") - 1
    c_first = np.searchsorted(cg, np.arange(m), side="left")
    landed = c_last >= c_first
    cut = np.zeros(m, dtype=np.int64)
    cut[landed] = reach[c_last[landed]] if reach.size else 0
    x_idx = steps["x_idx"]
    fx = np.ones(x_idx.size)  # each warm-up step's share inside the window (1 but where the window cuts)
    ffz = np.where(np.isnan(ff), 0.0, ff)
    kept = np.ones(f.g.size, dtype=bool)  # no step of a fast job is erased
    sums = _whole_sums(f, steps, kept, ffz, cut, whole, definition == "committed")
    for r in np.flatnonzero((f.n > 0) & ~(whole & (f.n <= _BLOCK))).tolist():
        # a job the window cuts (or longer than one block): the per-job code's own sums
        lo, hi = int(f.lo[r]), int(f.lo[r + 1])
        w = bool(whole[r])
        c = int(cut[r])
        *vals, share = _step_sums(f.s0[lo:hi], f.dur[lo:hi], f.wait[lo:hi], kept[lo:hi],
                                  steps["steady"][lo:hi], steps["stalled"][lo:hi], float(ffz[r]), c,
                                  float(c) if w else 0.0, float(ws[r]), float(we[r]), w)
        sums[:, r] = vals
        if share is not None:
            a, b = np.searchsorted(x_idx, (lo, hi))
            fx[a:b] = share[x_idx[a:b] - lo]
    n_com, n_kept, wait_sum, above, above_com, stall = sums
    fine = np.zeros((m, _NFINE))
    if definition == "committed":
        fine[:, _L["productive"]] = ffz * n_com
        fine[:, _L["slow_step"]] = above_com
        fine[:, _L["progress_at_risk"]] = ffz * (n_kept - n_com)
        fine[:, _L["slow_step_at_risk"]] = above - above_com
    else:
        fine[:, _L["productive"]] = ffz * n_kept
        fine[:, _L["slow_step"]] = above
    fine[:, _L["input_wait"]] = wait_sum
    fine[:, _L["stall"]] = stall
    x = fx * steps["x_amt"]
    fine = fine + np.bincount(f.g[steps["x_idx"]].astype(np.int64) * _NFINE + _L["startup_warmup"], weights=x,
                              minlength=m * _NFINE).reshape(m, _NFINE)
    ov = np.clip(np.minimum(p1, we[pr]) - np.maximum(p0, ws[pr]), 0.0, None)
    fine = fine + np.bincount(pr * _NFINE + label, weights=ov, minlength=m * _NFINE).reshape(m, _NFINE)
    held = np.clip(np.minimum(f.release, we) - np.maximum(0.0, ws), 0.0, None)
    out = {"held_s": held}
    out.update(_coarse_columns(fine))
    out.update(slow_step=fine[:, _L["slow_step"]], retained_steps=n_kept, committed_steps=n_com)
    return out


def _coarse_columns(fine: np.ndarray) -> dict[str, np.ndarray]:
    """``goodput._coarse`` for every row: each category the running sum of its fine labels, in order."""
    out = {c: np.zeros(fine.shape[0]) for c in CATEGORIES}
    for i, name in enumerate(_FINE):
        out[BREAKDOWN[name]] = out[BREAKDOWN[name]] + fine[:, i]
    return out


# ---------------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------------


def _window_ns(window: Any, t: _Tables, jobs: list[Any], f: _FastSteps | None
               ) -> tuple[pd.Timestamp, pd.Timestamp]:
    """Return the window's bounds; with none, the span of every job's held time (as ``goodput._measure``)."""
    from fleetlib.runtime.goodput import _window_bounds

    bounds = _window_bounds(window)
    if bounds is not None:
        return bounds
    starts = [j.to_utc(j.start_s) for j in jobs]
    ends = [j.to_utc(j.end_s) for j in jobs]
    if f is not None and f.codes.size:
        starts.append(pd.Timestamp(int(f.origin.min()), tz="UTC"))
        last = f.origin + np.rint(f.release * _NS).astype(np.int64)
        ends.append(pd.Timestamp(int(last.max()), tz="UTC"))
    return min(starts), max(ends)


def runtime_per_job(steps: pd.DataFrame, events: pd.DataFrame, *, window: Any = None,
                    definition: str = "committed", estimator: str = "median", warmup_tolerance: float = 0.1,
                    as_of: Any = None, source: str = "timeline", stall_factor: float = STALL_FACTOR,
                    clean_end_commit: bool = True, fast: bool = True,
                    steps_checked: bool = False) -> tuple[pd.DataFrame, Ledger]:
    """Measure each job of a canonical timeline: ``runtime_goodput(...).per_job``, many jobs at once.

    Parameters
    ----------
    steps, events
        Canonical timeline tables (validated here, as by
        :func:`~fleetlib.runtime.timeline.job_timelines`).
    window, definition, estimator, warmup_tolerance, as_of, source, stall_factor, clean_end_commit
        As for :func:`fleetlib.runtime.goodput.runtime_goodput` (a fixed fault-free step time is not
        offered: it is estimated per job).
    fast
        Measure the common jobs (see the module docstring) all at once; False runs every job through
        the per-job code (the reference the fast path is tested against).
    steps_checked
        The steps are the canonical Parquet reader's fast-path table, unchanged but for dropped rows:
        the per-row value checks it made are not repeated
        (:func:`~fleetlib.runtime.timeline._prepare_tables`).

    Returns
    -------
    per_job : pandas.DataFrame
        Index ``job_id`` (job-id order); the columns of ``RuntimeMeasurement.per_job``.
    ledger : Ledger
        The timeline's ledger, with the per-job build's flags.

    Raises
    ------
    fleetlib.quality.InputError
        An invalid timeline: the same error, naming the same record, as the per-job path.
    fleetlib.quality.DomainError
        Invalid options or window, a non-positive estimated fault-free step time, no job.
    """
    where = _provenances(steps, events, source)
    try:
        frame, ledger = _runtime_per_job(
            steps, events, window=window, definition=definition, estimator=estimator,
            warmup_tolerance=warmup_tolerance, as_of=as_of, source=source, stall_factor=stall_factor,
            clean_end_commit=clean_end_commit, fast=fast, steps_checked=steps_checked)
    except InputError as err:
        raise relocate_error(err, where) from None
    relocate_ledger(ledger, where)
    return frame, ledger


def _runtime_per_job(steps: pd.DataFrame, events: pd.DataFrame, *, window: Any = None,
                     definition: str = "committed", estimator: str = "median", warmup_tolerance: float = 0.1,
                     as_of: Any = None, source: str = "timeline", stall_factor: float = STALL_FACTOR,
                     clean_end_commit: bool = True, fast: bool = True,
                     steps_checked: bool = False) -> tuple[pd.DataFrame, Ledger]:
    """:func:`runtime_per_job` on table positions (errors and ledger name them; the caller relocates)."""
    t = _prepare_tables(steps, events, source=source, build_frames=False, steps_checked=steps_checked)
    return _measure_tables(t, window=window, definition=definition, estimator=estimator,
                           warmup_tolerance=warmup_tolerance, as_of=as_of, stall_factor=stall_factor,
                           clean_end_commit=clean_end_commit, fast=fast)


def runtime_per_job_tables(tables: _Tables, where: tuple[Provenance, ...], *, window: Any = None,
                           definition: str = "committed", estimator: str = "median",
                           warmup_tolerance: float = 0.1, as_of: Any = None,
                           stall_factor: float = STALL_FACTOR, clean_end_commit: bool = True,
                           fast: bool = True) -> tuple[pd.DataFrame, Ledger]:
    """Measure each job of tables already prepared: :func:`runtime_per_job` without the frames.

    The tables come from :func:`fleetlib.runtime._handoff.tables_from_parsed`.

    Parameters
    ----------
    tables
        The measurement's arrays, as ``_prepare_tables`` makes them (their ledger is extended here).
    where
        The provenance of the steps and events tables: errors and the ledger name the file and row.
    window, definition, estimator, warmup_tolerance, as_of, stall_factor, clean_end_commit, fast
        As for :func:`runtime_per_job`.

    Returns
    -------
    per_job : pandas.DataFrame
        As :func:`runtime_per_job`.
    ledger : Ledger
        As :func:`runtime_per_job`.
    """
    try:
        frame, ledger = _measure_tables(
            tables, window=window, definition=definition, estimator=estimator,
            warmup_tolerance=warmup_tolerance, as_of=as_of, stall_factor=stall_factor,
            clean_end_commit=clean_end_commit, fast=fast)
    except InputError as err:
        raise relocate_error(err, where) from None
    relocate_ledger(ledger, where)
    return frame, ledger


def _measure_tables(t: _Tables, *, window: Any, definition: str, estimator: str, warmup_tolerance: float,
                    as_of: Any, stall_factor: float, clean_end_commit: bool, fast: bool
                    ) -> tuple[pd.DataFrame, Ledger]:
    """Return the per-job columns of prepared tables (on table positions; the caller relocates)."""
    from fleetlib.runtime.goodput import _check_options, _coarse, _rel, _ts

    n_jobs = len(t.job_ids)
    s_b = np.searchsorted(t.s_job, np.arange(n_jobs + 1, dtype=t.s_job.dtype), side="left").astype(np.int64)
    e_b = np.searchsorted(t.e_job, np.arange(n_jobs + 1, dtype=t.e_job.dtype), side="left").astype(np.int64)
    e_origin = _event_origins(t)
    markers = (_pair_markers_all(t, e_origin, "checkpoint_begin", "checkpoint_commit"),
               _pair_markers_all(t, e_origin, "eval_begin", "eval_end"))
    if fast and estimator == "median":
        simple, shared = _simple_jobs(t, s_b, e_origin)
    else:
        simple, shared = np.zeros(n_jobs, bool), {}
    f = _FastSteps(t, np.flatnonzero(simple), s_b, shared) if simple.any() else None
    ff = _fault_free(f) if f is not None else np.zeros(0)
    if f is not None and (f.n > 0).any() and not (ff[f.n > 0] > 0.0).all():
        # a non-positive fault-free time is refused by the per-job code, in job order: leave it there
        simple[f.codes[(f.n > 0) & ~(ff > 0.0)]] = False
        f = _FastSteps(t, np.flatnonzero(simple), s_b, shared) if simple.any() else None
        ff = _fault_free(f) if f is not None else np.zeros(0)
    slow_codes = np.flatnonzero(~simple).tolist()
    built = {c: _build_job(t, c, int(s_b[c]), int(s_b[c + 1]), int(e_b[c]), int(e_b[c + 1]), markers)
             for c in slow_codes}
    tol = _check_options(definition, estimator, warmup_tolerance)
    if not (isinstance(stall_factor, (int, float)) and math.isfinite(stall_factor) and stall_factor >= 1.0):
        raise DomainError(f"stall_factor must be a number >= 1 (fault-free step times); got {stall_factor!r}")
    if not n_jobs:
        raise DomainError("the timeline holds no job")
    parts = {c: _job_parts(j, None, estimator, tol, float(stall_factor), clean_end_commit)
             for c, j in built.items()}
    for j in built.values():
        end = _clean_end(j) if clean_end_commit else None
        if end is not None:
            t.ledger.flag("clean_end_commit",
                          f"job {excerpt(j.job_id)} ended cleanly at {j.to_utc(end).isoformat()}: the clean "
                          "end counts as its final commit (clean_end_commit=False turns this off)",
                          job_id=j.job_id, time=j.to_utc(end))
    ws_t, we_t = _window_ns(window, t, list(built.values()), f)
    span1 = _window_ns(None, t, list(built.values()), f)[1]
    if as_of is None or (isinstance(as_of, str) and as_of == "window_end"):
        as_of_t = we_t
    elif isinstance(as_of, str) and as_of == "data_end":
        as_of_t = span1
    else:
        as_of_t = _ts(as_of, "as_of")
    closed = window is None
    cols: dict[str, np.ndarray] = {c: np.zeros(n_jobs) for c in _PER_JOB_COLUMNS}
    ff_col = np.full(n_jobs, None, dtype=object)
    for c, p in parts.items():
        o = p.job.origin
        s = _window_sums(p, _rel(ws_t, o), _rel(we_t, o), _rel(as_of_t, o), definition, closed)
        row = {"held_s": s.held, **_coarse(s.fine), "slow_step": float(s.fine[_L["slow_step"]]),
               "retained_steps": s.retained_steps, "committed_steps": s.committed_steps}
        for k, v in row.items():
            cols[k][c] = v
        ff_col[c] = p.ff
    if f is not None:
        rows = _fast_rows(t, f, markers, e_origin, ff, tol, float(stall_factor), definition,
                          ws_t.as_unit("ns").value, we_t.as_unit("ns").value, as_of_t.as_unit("ns").value)
        for k, v in rows.items():
            cols[k][f.codes] = v
        has = f.n > 0
        ff_col[f.codes[has]] = ff[has].tolist()
    frame = pd.DataFrame({k: cols[k] for k in _PER_JOB_COLUMNS[:-1]},
                         index=pd.Index(list(t.job_ids), name="job_id"))
    frame["fault_free_step_s"] = pd.Series(list(ff_col), index=frame.index).infer_objects() \
        if any(v is not None for v in ff_col) else pd.Series(list(ff_col), index=frame.index, dtype=object)
    return frame, t.ledger
