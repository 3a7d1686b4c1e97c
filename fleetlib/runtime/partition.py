"""The per-job partition of held time: one compiled kernel over job-sorted arrays, for every job.

The validated tables (:class:`fleetlib.runtime.timeline.TimelineArrays`: steps sorted by job and start,
events by job and time, ``offsets`` giving each job's slice) go through two loops compiled with numba
(``@njit(cache=True)``), the same for every job, simple or faulty:

* :func:`build_parts` reads each job's structure -- attempts and their held intervals, commits,
  interruptions, explicit and inferred restarts, what each interruption led to, which restart erased
  each executed step, the paired checkpoint, evaluation and idle markers -- and cuts its held time
  into labelled parts: steps (kept, steady, warm-up, stalled, erased), the chain of never-erased steps
  each commit retains, held time outside steps cut at every overlay boundary and labelled by the
  overlays' priority, and the not-held time between attempts.  The rules are those of
  :mod:`fleetlib.runtime.goodput`'s module docstring.
* :func:`window_sums` clips those parts to a window: steps by the share of their duration inside it,
  commits judged as of a time, and returns per-job and per-interruption sums.

Instants are seconds since each job's origin (its first gang completion), computed from integer
nanoseconds (``(t_ns - origin_ns) / 1e9``); a step's duration is its exact nanosecond count in seconds
and an instant reached through a logged duration is summed in nanoseconds first (durations under
:data:`EXACT_DURATION_S`), so a pause that ends where a step starts lands on the same float.

Text never enters the kernel: event kinds are coded (:func:`kind_codes`) and job ids are the tables'
codes.  Nor are errors raised with their text there: a refused record stops the loop with the check
that failed, the job and the offending record's position and numbers (:class:`KernelRefusal`), and
the interpretive flags are returned as coded notes; :func:`build_parts` writes both in Python, with
the same text, in the same order (the first offending record in job order; a job's flags in the
order of its checks).

Sums are made one term after another in each job's order (numpy made some of them pairwise), so a
sum may differ from the per-job numpy code it replaced in its last bits; the pinned numbers of the
bundled timelines agree to 1e-12 of their scale (``tests/runtime/test_runtime_pinned.py``).

The loops are compiled by numba on first use and cached on disk (``cache=True``): next to this
module, or -- when that folder cannot be written, as in a read-only installation -- in numba's
user-wide cache (``~/.cache/numba``, or ``NUMBA_CACHE_DIR``); with neither, every process compiles
them again.  The first compilation takes tens of seconds; a cached load about a second.  Arguments
always have the same types (int64, float64, bool and int8 arrays; writeable and contiguous, see
:class:`fleetlib.runtime.timeline.TimelineArrays`), so each function is compiled once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numba import njit

from fleetlib._io import excerpt
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.runtime.schema import AUXILIARY_EVENT_KINDS, AUXILIARY_KIND_PREFIXES, BREAKDOWN, NO_TIME

__all__ = [
    "EXACT_DURATION_S",
    "FINE",
    "NFINE",
    "JobParts",
    "KernelRefusal",
    "WindowSums",
    "build_parts",
    "kind_codes",
    "window_sums",
    "window_sums_over",
]

_NS = 1_000_000_000
#: Logged durations shorter than this (about 32 years) are added to instants in integer nanoseconds.
EXACT_DURATION_S = 1e9

#: The fine parts of held time (:data:`fleetlib.runtime.schema.BREAKDOWN`), in order; the kernel's labels.
FINE: tuple[str, ...] = tuple(BREAKDOWN)
#: Number of fine parts.
NFINE = len(FINE)

# fine labels (module constants: compiled in)
_PRODUCTIVE = FINE.index("productive")
_SLOW_STEP = FINE.index("slow_step")
_AT_RISK = FINE.index("progress_at_risk")
_SLOW_AT_RISK = FINE.index("slow_step_at_risk")
_INPUT_WAIT = FINE.index("input_wait")
_STARTUP_LAUNCH = FINE.index("startup_launch")
_STARTUP_WARMUP = FINE.index("startup_warmup")
_CHECKPOINT = FINE.index("checkpoint")
_EVALUATION = FINE.index("evaluation")
_STALL = FINE.index("stall")
_IDLE_MARKED = FINE.index("idle_marked")
_IDLE_AFTER = FINE.index("idle_after_progress")
_DETECTION = FINE.index("recovery_detection")
_RECOVERY_RESTART = FINE.index("recovery_restart")
_RECOVERY_WARMUP = FINE.index("recovery_warmup")
_REWORK_STEPS = FINE.index("rework_steps")
_REWORK_PARTIAL = FINE.index("rework_partial_step")
_PREEMPT_LOST = FINE.index("preemption_lost_steps")
_PREEMPT_PARTIAL = FINE.index("preemption_partial_step")
_PREEMPT_RESTART = FINE.index("preemption_restart")
_PREEMPT_WARMUP = FINE.index("preemption_warmup")
_ELASTIC_WAIT = FINE.index("elastic_wait")
_ELASTIC_REINIT = FINE.index("elastic_reinit")
_UNATTRIBUTED = FINE.index("unattributed")

# event kind codes (kind_codes)
_K_OTHER = 0  # a kind the partition does not know (kept, flagged by the table checks)
_K_AUX = 1  # a documented auxiliary marker (kept, ignored)
_K_GANG = 2
_K_RELEASE = 3
_K_COMPLETED = 4
_K_FIRST_STEP = 5
_K_COLD = 6
_K_CKPT_BEGIN = 7
_K_CKPT_COMMIT = 8
_K_FAILURE = 9
_K_DETECTED = 10
_K_RESTORE = 11
_K_PREEMPT = 12
_K_EVAL_BEGIN = 13
_K_EVAL_END = 14
_K_HANG = 15
_K_IDLE = 16
_K_RESIZE_BEGIN = 17
_K_RESIZE_END = 18
_KIND_CODE = {"gang_complete": _K_GANG, "release": _K_RELEASE, "job_completed": _K_COMPLETED,
              "first_step": _K_FIRST_STEP, "cold_start": _K_COLD, "checkpoint_begin": _K_CKPT_BEGIN,
              "checkpoint_commit": _K_CKPT_COMMIT, "failure": _K_FAILURE, "failure_detected": _K_DETECTED,
              "restore": _K_RESTORE, "preempt": _K_PREEMPT, "eval_begin": _K_EVAL_BEGIN,
              "eval_end": _K_EVAL_END, "hang_begin": _K_HANG, "idle_begin": _K_IDLE,
              "resize_begin": _K_RESIZE_BEGIN, "resize_end": _K_RESIZE_END}

# checks that refuse a record (KernelRefusal; the message is written by _refusal)
_E_NO_GANG = 1
_E_GANG_TWICE = 2
_E_RELEASE_TWICE = 3
_E_ATTEMPT_NO_GANG = 4
_E_RELEASE_BEFORE_GANG = 5
_E_ATTEMPTS_OVERLAP = 6
_E_STEP_OUTSIDE = 7
_E_EVENT_OUTSIDE = 8
_E_COMMIT_NO_STEP = 9
_E_COMMIT_EARLY = 10
_E_STEP_ACROSS = 11
_E_RESTORE_UNCOMMITTED = 12
_E_RESTORE_FIRST_STEP = 13
_E_NO_RESTART = 14

# notes (flags and repairs; written by _write_note)
_N_RELEASE_MISSING = 1
_N_AUX_OUTSIDE = 2
_N_FIRST_STEP_MISMATCH = 3
_N_DETECTED_REPAIRED = 4
_N_RESTORE_STEPS_MISSING = 5
_N_RESTART_INFERRED = 6
_N_STEP_JUMPS = 7
_N_ROLLBACK_INFERRED = 8
_N_TERMINAL = 9
_N_UNLOGGED = 10

# per-step bits of JobParts.step_flags
_KEPT = 1  # not erased by a later restart
_STEADY = 2  # kept and not warm-up
_STALLED = 4  # steady, compute time above the stall bound
_WARM = 8  # kept, warm-up after a (re)start
_RUN_START = 16  # the first step of a run: a cold launch, a new attempt or a resume after an interruption


class KernelRefusal(Exception):
    """Raised inside the kernel when a record is refused; the error array says which and where."""


def kind_codes(kinds: np.ndarray) -> np.ndarray:
    """Code event kinds for the kernel (int8): the partition's kinds, auxiliary markers, anything else.

    Parameters
    ----------
    kinds
        Event kinds as text (an object array).

    Returns
    -------
    numpy.ndarray
        One code per event.
    """
    if kinds.size == 0:
        return np.zeros(0, dtype=np.int8)
    codes, uniques = pd.factorize(kinds)
    table = np.zeros(len(uniques), dtype=np.int8)
    for i, k in enumerate(uniques.tolist()):
        k = str(k)
        if k in _KIND_CODE:
            table[i] = _KIND_CODE[k]
        elif k in AUXILIARY_EVENT_KINDS or k.startswith(AUXILIARY_KIND_PREFIXES):
            table[i] = _K_AUX
    return table[codes]


# ---------------------------------------------------------------------------------------------------
# Small compiled helpers.  The kernel is written as plain loops over int64, float64 and bool arrays (each
# numpy construct and each distinct argument type is one more function numba compiles on first use)
# ---------------------------------------------------------------------------------------------------


@njit(cache=True)
def _lt(a: Any, b: Any) -> bool:
    """Numpy's sort order: ``a < b``, NaN after every number."""
    return a < b or (b != b and a == a)


@njit(cache=True)
def _left_in(a: np.ndarray, lo: int, hi: int, x: Any) -> int:
    """Return ``lo + np.searchsorted(a[lo:hi], x, side="left")`` (numpy's bisection)."""
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if _lt(a[mid], x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _right_in(a: np.ndarray, lo: int, hi: int, x: Any) -> int:
    """Return ``lo + np.searchsorted(a[lo:hi], x, side="right")`` (numpy's bisection)."""
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if not _lt(x, a[mid]):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _left(a: np.ndarray, x: Any) -> int:
    """Return ``np.searchsorted(a, x, side="left")``."""
    return _left_in(a, 0, a.shape[0], x)


@njit(cache=True)
def _right(a: np.ndarray, x: Any) -> int:
    """Return ``np.searchsorted(a, x, side="right")``."""
    return _right_in(a, 0, a.shape[0], x)


@njit(cache=True)
def _next_at_or_after(sorted_times: np.ndarray, t: float) -> float:
    """Return the first of ``sorted_times`` at or after ``t`` (inf: none)."""
    i = _left(sorted_times, t)
    return sorted_times[i] if i < sorted_times.shape[0] else np.inf


@njit(cache=True)
def _grow(buf: np.ndarray, need: int) -> np.ndarray:
    """Return ``buf``, or a copy at least twice as long when ``need`` entries do not fit."""
    if need <= buf.shape[0]:
        return buf
    out = np.empty(max(need, 2 * buf.shape[0]), dtype=buf.dtype)
    for i in range(buf.shape[0]):
        out[i] = buf[i]
    return out


@njit(cache=True)
def _rel_ns(ns: int, origin: int, add_s: float) -> float:
    """Return the seconds since ``origin`` of ``ns`` plus a logged duration, summed in nanoseconds.

    NaN when no duration is logged; beyond :data:`EXACT_DURATION_S`, plain float seconds.
    """
    if add_s != add_s:
        return np.nan
    if abs(add_s) < EXACT_DURATION_S:
        return (ns + np.int64(np.rint(add_s * _NS)) - origin) / _NS
    return (ns - origin) / _NS + add_s


@njit(cache=True, inline="always")
def _refuse(err: np.ndarray, errf: np.ndarray, code: int, job: int, table: int, pos: int, a: int, b: int,
            c: int, t: float) -> None:
    """Fill the error record and stop the kernel (:class:`KernelRefusal`)."""
    err[0], err[1], err[2], err[3], err[4], err[5], err[6] = code, job, table, pos, a, b, c
    errf[0] = t
    raise KernelRefusal()


@njit(cache=True, inline="always")
def _note(notes: Any, code: int, job: int, a: Any, b: Any, c: Any, d: Any, t: float) -> None:
    """Append a coded flag or repair (written in Python by :func:`_write_note`)."""
    notes.append((np.int64(code), np.int64(job), np.int64(a), np.int64(b), np.int64(c), np.int64(d),
                  np.float64(t)))


@njit(cache=True)
def _stable_order(keys: np.ndarray) -> np.ndarray:
    """Return a stable argsort of float keys (numpy's ``kind="stable"``, NaN last): a merge sort."""
    n = keys.shape[0]
    src = np.arange(n)
    if n < 2:
        return src
    dst = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _lt(keys[src[j]], keys[src[i]]):
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2
    return src


@njit(cache=True)
def _take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Return ``a[idx]``."""
    out = np.empty(idx.shape[0], a.dtype)
    for i in range(idx.shape[0]):
        out[i] = a[idx[i]]
    return out


@njit(cache=True)
def _sorted(values: np.ndarray) -> np.ndarray:
    """Return ``np.sort`` of float values."""
    return _take(values, _stable_order(values))


@njit(cache=True)
def _as_float(a: np.ndarray) -> np.ndarray:
    """Return an integer array as floats."""
    out = np.empty(a.shape[0])
    for i in range(a.shape[0]):
        out[i] = a[i]
    return out


@njit(cache=True)
def _where(kind: np.ndarray, code: int) -> np.ndarray:
    """Return the positions of the events of one kind."""
    n = 0
    for i in range(kind.shape[0]):
        if kind[i] == code:
            n += 1
    out = np.empty(n, np.int64)
    n = 0
    for i in range(kind.shape[0]):
        if kind[i] == code:
            out[n] = i
            n += 1
    return out


@njit(cache=True)
def _select(a: np.ndarray, k: int) -> float:
    """Return the ``k``-th smallest of ``a`` (reordered in place): Hoare's selection."""
    lo, hi = 0, a.shape[0] - 1
    while hi > lo:
        mid = (lo + hi) >> 1
        if a[mid] < a[lo]:
            a[mid], a[lo] = a[lo], a[mid]
        if a[hi] < a[lo]:
            a[hi], a[lo] = a[lo], a[hi]
        if a[hi] < a[mid]:
            a[hi], a[mid] = a[mid], a[hi]
        pivot = a[mid]
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while pivot < a[j]:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            break
    return a[k]


@njit(cache=True)
def _median(sample: np.ndarray) -> float:
    """Return ``np.median`` of a sample (reordered in place): the middle value, or two's mean."""
    n = sample.shape[0]
    h = n >> 1
    if n % 2:
        return _select(sample, h)
    a = _select(sample, h - 1)
    b = sample[h]
    for i in range(h + 1, n):  # the h-th smallest: the least of those above the (h-1)-th
        if sample[i] < b:
            b = sample[i]
    return (a + b) / 2.0


@njit(cache=True)
def _attempt_index(numbers_sorted: np.ndarray, index_of_sorted: np.ndarray, number: int) -> int:
    """Return the position (in gang order) of the attempt ``number``; -1: no gang completion."""
    i = _left(numbers_sorted, number)
    if i < numbers_sorted.shape[0] and numbers_sorted[i] == number:
        return index_of_sorted[i]
    return -1


# ---------------------------------------------------------------------------------------------------
# One job's structure: attempts, commits, interruptions, restarts, erasure, markers
# ---------------------------------------------------------------------------------------------------


@njit(cache=True)
def _attempts(j: int, s_lo: int, e_lo: int, s_att: np.ndarray, s_num: np.ndarray, s_t0: np.ndarray,
              s_t1: np.ndarray, e_att: np.ndarray, e_t: np.ndarray, kind: np.ndarray, aux_out: np.ndarray,
              err: np.ndarray, errf: np.ndarray, notes: Any) -> Any:
    """Check the attempts; return their numbers, gang completions, releases and cold flags (gang order).

    Also each event's attempt (its position in gang order) and the first-step markers' times.
    """
    n, m = s_num.shape[0], kind.shape[0]
    # gang completions and releases by attempt number (first occurrence in event order)
    g_pos = _where(kind, np.int64(_K_GANG))
    g_by = _take(g_pos, _stable_order(_as_float(_take(e_att, g_pos))))
    n_g = 0
    g_att = np.empty(g_by.shape[0], np.int64)
    g_first = np.empty(g_by.shape[0], np.int64)
    g_cnt = np.zeros(g_by.shape[0], np.int64)
    most = 0
    for p in g_by:
        a = e_att[p]
        if n_g == 0 or g_att[n_g - 1] != a:
            g_att[n_g] = a
            g_first[n_g] = p
            n_g += 1
        g_cnt[n_g - 1] += 1
        most = max(most, g_cnt[n_g - 1])
    g_att, g_first = g_att[:n_g], g_first[:n_g]
    for i in range(n_g):
        if g_cnt[i] > 1:
            seen = 0
            for p in g_pos:  # its second gang completion, in event order
                if e_att[p] == g_att[i]:
                    seen += 1
                    if seen == 2:
                        _refuse(err, errf, np.int64(_E_GANG_TWICE), j, np.int64(1), e_lo + p, g_att[i], most,
                                np.int64(0), 0.0)
    r_pos = _where(kind, np.int64(_K_RELEASE))
    r_by = _take(r_pos, _stable_order(_as_float(_take(e_att, r_pos))))
    for i in range(1, r_by.shape[0]):
        if e_att[r_by[i]] == e_att[r_by[i - 1]]:
            # the smallest attempt released twice; its second release in event order
            _refuse(err, errf, np.int64(_E_RELEASE_TWICE), j, np.int64(1), e_lo + r_by[i], e_att[r_by[i]],
                    np.int64(0), np.int64(0), 0.0)
    # the smallest attempt with records but no gang completion
    missing = np.int64(0)
    found = False
    for i in range(m + n):
        a = e_att[i] if i < m else s_att[i - m]
        k = _left(g_att, a)
        if (k >= n_g or g_att[k] != a) and (not found or a < missing):
            missing, found = a, True
    if found:
        for i in range(n):
            if s_att[i] == missing:
                _refuse(err, errf, np.int64(_E_ATTEMPT_NO_GANG), j, np.int64(0), s_lo + i, missing,
                        np.int64(0), np.int64(0), 0.0)
        for i in range(m):
            if e_att[i] == missing:
                _refuse(err, errf, np.int64(_E_ATTEMPT_NO_GANG), j, np.int64(1), e_lo + i, missing,
                        np.int64(0), np.int64(0), 0.0)
    gang = _take(e_t, g_first)
    release = np.full(n_g, np.nan)
    for p in r_pos:
        release[_left(g_att, e_att[p])] = e_t[p]
    for i in range(n_g):
        if release[i] != release[i]:
            a = g_att[i]
            last = -np.inf
            for p in range(m):
                if e_att[p] == a and e_t[p] > last:
                    last = e_t[p]
            s_last = -np.inf
            any_step = False
            for p in range(n):
                if s_att[p] == a:
                    any_step = True
                    if s_t1[p] > s_last:
                        s_last = s_t1[p]
            if any_step:
                last = max(last, s_last)
            release[i] = last
            _note(notes, _N_RELEASE_MISSING, j, a, 0, 0, 0, last)
    for i in range(n_g):
        if release[i] < gang[i]:
            for p in r_pos:
                if e_att[p] == g_att[i]:
                    _refuse(err, errf, np.int64(_E_RELEASE_BEFORE_GANG), j, np.int64(1), e_lo + p, g_att[i],
                            np.int64(0), np.int64(0), 0.0)
    order = _stable_order(gang)
    att_num, gang, release, g_first = _take(g_att, order), _take(gang, order), _take(release, order), \
        _take(g_first, order)
    for i in range(1, n_g):
        if gang[i] < release[i - 1]:
            _refuse(err, errf, np.int64(_E_ATTEMPTS_OVERLAP), j, np.int64(1), e_lo + g_first[i], att_num[i],
                    att_num[i - 1], np.int64(0), 0.0)
    # attempt number -> position in gang order
    by_number = _stable_order(_as_float(att_num))
    numbers = _take(att_num, by_number)
    e_pos = np.empty(m, np.int64)
    for i in range(m):
        e_pos[i] = _attempt_index(numbers, by_number, e_att[i])
    # steps are in time order: each block of one attempt's steps lies inside its held interval iff
    # its first start and last end do (the ends increase, since steps do not overlap)
    lo = 0
    while lo < n:
        hi = lo + 1
        while hi < n and s_att[hi] == s_att[lo]:
            hi += 1
        pos = _attempt_index(numbers, by_number, s_att[lo])
        if s_t0[lo] < gang[pos] or s_t1[hi - 1] > release[pos]:
            for i in range(lo, hi):
                if s_t0[i] < gang[pos] or s_t1[i] > release[pos]:
                    _refuse(err, errf, np.int64(_E_STEP_OUTSIDE), j, np.int64(0), s_lo + i, s_num[i],
                            s_att[i], np.int64(0), 0.0)
        lo = hi
    n_aux = 0
    first_bad = -1
    for i in range(m):
        if e_t[i] < gang[e_pos[i]] or e_t[i] > release[e_pos[i]]:
            if kind[i] == _K_AUX:
                # phase markers the partition does not use: outside held time they are noted, not fatal
                aux_out[e_lo + i] = True
                n_aux += 1
            elif first_bad < 0:
                first_bad = i
    if n_aux:
        _note(notes, _N_AUX_OUTSIDE, j, n_aux, 0, 0, 0, 0.0)
    if first_bad >= 0:
        _refuse(err, errf, np.int64(_E_EVENT_OUTSIDE), j, np.int64(1), e_lo + first_bad, e_att[first_bad],
                np.int64(0), np.int64(0), 0.0)
    cold = np.zeros(n_g, np.bool_)
    n_fs = 0
    n_stops = 0
    for i in range(m):
        if kind[i] == _K_COLD:
            cold[e_pos[i]] = True
        elif kind[i] == _K_FIRST_STEP:
            n_fs += 1
        elif kind[i] == _K_FAILURE or kind[i] == _K_PREEMPT or kind[i] == _K_DETECTED:
            n_stops += 1
    fs_t = _take(e_t, _where(kind, np.int64(_K_FIRST_STEP)))
    if n_fs:
        # a first_step marker should start a step row, unless that step was cut off by an interruption
        stops = np.empty(n_stops)
        q = 0
        for i in range(m):
            if kind[i] == _K_FAILURE or kind[i] == _K_PREEMPT or kind[i] == _K_DETECTED:
                stops[q] = e_t[i]
                q += 1
        n_odd = 0
        first_odd = 0.0
        for f in fs_t:
            nxt_step = _next_at_or_after(s_t0, f)
            nxt_stop = _next_at_or_after(stops, f)
            if abs(nxt_step - f) > 1e-3 and not (nxt_stop < nxt_step):
                if n_odd == 0:
                    first_odd = f
                n_odd += 1
        if n_odd:
            _note(notes, _N_FIRST_STEP_MISMATCH, j, n_odd, 0, 0, 0, first_odd)
    return att_num, gang, release, cold, e_pos, fs_t


@njit(cache=True)
def _commits(j: int, e_lo: int, s_num: np.ndarray, s_t1: np.ndarray, e_t: np.ndarray, e_step: np.ndarray,
             kind: np.ndarray, err: np.ndarray, errf: np.ndarray) -> Any:
    """Return the time and step of each checkpoint commit (a commit of a step not yet finished is refused)."""
    c_pos = _where(kind, np.int64(_K_CKPT_COMMIT))
    for p in c_pos:
        if e_step[p] != e_step[p]:
            _refuse(err, errf, np.int64(_E_COMMIT_NO_STEP), j, np.int64(1), e_lo + p, np.int64(0),
                    np.int64(0), np.int64(0), 0.0)
    commit_t, commit_s = _take(e_t, c_pos), _take(e_step, c_pos)
    done = -np.inf  # the highest step finished by each commit (commits are in time order)
    finished = 0
    for k in range(c_pos.shape[0]):
        idx = _right(s_t1, commit_t[k])
        while finished < idx:
            done = max(done, float(s_num[finished]))
            finished += 1
        if commit_s[k] > done:
            _refuse(err, errf, np.int64(_E_COMMIT_EARLY), j, np.int64(1), e_lo + c_pos[k],
                    np.int64(commit_s[k]), np.int64(0), np.int64(0), 0.0)
    return commit_t, commit_s


@njit(cache=True)
def _interruptions(j: int, s_lo: int, e_lo: int, s_num: np.ndarray, s_t0: np.ndarray, s_t1: np.ndarray,
                   e_att: np.ndarray, e_t: np.ndarray, kind: np.ndarray, e_pos: np.ndarray, n_att: int,
                   err: np.ndarray, errf: np.ndarray, notes: Any) -> Any:
    """Return the interruptions (failure, preempt) by time: time, kind (1: preempt), attempt, detection."""
    m = kind.shape[0]
    cap = 0
    for i in range(m):
        if kind[i] == _K_FAILURE or kind[i] == _K_PREEMPT or kind[i] == _K_DETECTED:
            cap += 1
    if cap == 0:
        return np.empty(0), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    it = np.empty(cap)
    ik = np.zeros(cap, np.int64)
    ia = np.empty(cap, np.int64)
    idet = np.full(cap, np.nan)
    count = 0
    for i in range(m):
        if kind[i] == _K_FAILURE or kind[i] == _K_PREEMPT:
            it[count] = e_t[i]
            ik[count] = 1 if kind[i] == _K_PREEMPT else 0
            ia[count] = e_att[i]
            count += 1
    last_of_attempt = np.full(n_att, -1, np.int64)  # the latest interruption so far, per attempt
    k = 0
    for i in range(m):
        if kind[i] == _K_FAILURE or kind[i] == _K_PREEMPT:
            last_of_attempt[e_pos[i]] = k
            k += 1
        elif kind[i] == _K_DETECTED:
            prior = last_of_attempt[e_pos[i]]
            if prior >= 0 and ik[prior] == 0:
                if idet[prior] != idet[prior]:
                    idet[prior] = e_t[i]
                continue
            _note(notes, _N_DETECTED_REPAIRED, j, e_lo + i, 0, 0, 0, 0.0)
            it[count] = e_t[i]
            ik[count] = 0
            ia[count] = e_att[i]
            idet[count] = e_t[i]
            count += 1
    order = _stable_order(it[:count])
    it, ik, ia, idet = _take(it, order), _take(ik, order), _take(ia, order), _take(idet, order)
    if s_num.shape[0]:
        for k in range(count):
            i = _left(s_t0, it[k]) - 1
            if i >= 0 and s_t1[i] > it[k]:
                _refuse(err, errf, np.int64(_E_STEP_ACROSS), j, np.int64(0), s_lo + i, s_num[i], ik[k],
                        np.int64(0), it[k])
    return it, ik, ia, idet


@njit(cache=True)
def _restores(j: int, s_lo: int, e_lo: int, s_att: np.ndarray, s_num: np.ndarray, s_t0: np.ndarray,
              e_t: np.ndarray, e_step: np.ndarray, kind: np.ndarray, commit_t: np.ndarray,
              commit_s: np.ndarray, err: np.ndarray, errf: np.ndarray, notes: Any) -> Any:
    """Check the explicit restores; return their times and rollback steps (-inf: the initial state)."""
    n = s_num.shape[0]
    rs_idx = _where(kind, np.int64(_K_RESTORE))
    n_rs = rs_idx.shape[0]
    rs_time = _take(e_t, rs_idx)
    rs_roll = np.empty(n_rs)
    for k in range(n_rs):
        v = e_step[rs_idx[k]]
        rs_roll[k] = -np.inf if v != v else v
    for k in range(n_rs):
        roll = rs_roll[k]
        if np.isfinite(roll):
            ok = False
            for c in range(commit_s.shape[0]):
                if commit_s[c] == roll and commit_t[c] <= rs_time[k]:
                    ok = True
                    break
            if not ok:
                _refuse(err, errf, np.int64(_E_RESTORE_UNCOMMITTED), j, np.int64(1), e_lo + rs_idx[k],
                        np.int64(roll), np.int64(0), np.int64(0), 0.0)
        nxt = _left(s_t0, rs_time[k])
        if nxt >= n or (k + 1 < n_rs and rs_time[k + 1] <= s_t0[nxt]):
            continue  # no step, or another restore, before the next step
        first = s_num[nxt]
        if first <= roll:
            _refuse(err, errf, np.int64(_E_RESTORE_FIRST_STEP), j, np.int64(0), s_lo + nxt, np.int64(roll),
                    first, np.int64(0), 0.0)
        if np.isfinite(roll) and first > roll + 1:
            _note(notes, _N_RESTORE_STEPS_MISSING, j, np.int64(roll), first, s_att[nxt], 0, s_t0[nxt])
    return rs_time, rs_roll


@njit(cache=True)
def _inferred_restarts(j: int, s_att: np.ndarray, s_num: np.ndarray, s_t0: np.ndarray, rs_time: np.ndarray,
                       rs_roll: np.ndarray, notes: Any) -> Any:
    """Add the restarts inferred from a step number that does not increase (no restore in between).

    Returns the time, rollback step and explicitness of every restart.
    """
    n = s_num.shape[0]
    seg_first = np.zeros(n, np.bool_)  # a restore falls between step i - 1 and step i
    for k in range(rs_time.shape[0]):
        f = _left(s_t0, rs_time[k])
        if 0 < f < n:
            seg_first[f] = True
    n_inf = 0
    jumps = 0
    for i in range(1, n):
        if not seg_first[i]:
            d = s_num[i] - s_num[i - 1]
            if d <= 0:
                n_inf += 1
                _note(notes, _N_RESTART_INFERRED, j, s_num[i], s_num[i - 1], s_att[i], 0, s_t0[i])
            elif d > 1:
                jumps += 1
    if jumps:
        _note(notes, _N_STEP_JUMPS, j, jumps, 0, 0, 0, 0.0)
    r = rs_time.shape[0]
    r_time = np.empty(r + n_inf)
    r_roll = np.empty(r + n_inf)
    r_explicit = np.zeros(r + n_inf, np.bool_)
    for k in range(r):
        r_time[k] = rs_time[k]
        r_roll[k] = rs_roll[k]
        r_explicit[k] = True
    q = r
    for i in range(1, n):
        if not seg_first[i] and s_num[i] - s_num[i - 1] <= 0:
            r_time[q] = s_t0[i]
            r_roll[q] = float(s_num[i] - 1)
            q += 1
    return r_time, r_roll, r_explicit


@njit(cache=True)
def _resumes(s_t0: np.ndarray, it: np.ndarray) -> Any:
    """Return, per interruption, the first step starting at or after it and that step's start (inf: none)."""
    n, n_int = s_t0.shape[0], it.shape[0]
    resume = np.empty(n_int, np.int64)
    resume_start = np.full(n_int, np.inf)
    for k in range(n_int):
        resume[k] = _left(s_t0, it[k])
        if resume[k] < n:
            resume_start[k] = s_t0[resume[k]]
    return resume, resume_start


@njit(cache=True)
def _outcomes(j: int, s_lo: int, s_att: np.ndarray, s_num: np.ndarray, s_t0: np.ndarray, it: np.ndarray,
              ik: np.ndarray, ia: np.ndarray, commit_t: np.ndarray, commit_s: np.ndarray, r_time: np.ndarray,
              r_roll: np.ndarray, r_explicit: np.ndarray, err: np.ndarray, errf: np.ndarray,
              notes: Any) -> Any:
    """Match each interruption to its restart, an implied rollback, or a terminal rollback.

    Returns ``cause`` (the interruption each restart recovers from), ``implied`` (the rollback step
    implied for each interruption) and the restarts' times and rollback points (sorted by time,
    explicit ones first), extended by the terminal rollbacks.
    """
    n = s_num.shape[0]
    n_int = it.shape[0]
    if n_int == 0 and r_time.shape[0] == 0:  # nothing to match
        return np.empty(0, np.int64), np.empty(0), r_time, r_roll
    resume, resume_start = _resumes(s_t0, it)
    implied = np.full(n_int, np.nan)
    r_sorted = _sorted(r_time)
    n_r = r_time.shape[0]
    term_t = np.empty(n_int)
    term_roll = np.empty(n_int)
    n_term = 0
    for k in range(n_int):
        lo = _left(r_sorted, it[k])
        if lo < n_r and r_sorted[lo] <= resume_start[k]:
            continue
        if resume[k] < n:
            q = resume[k]
            if s_att[q] == ia[k]:
                _refuse(err, errf, np.int64(_E_NO_RESTART), j, np.int64(0), s_lo + q, ik[k], ia[k], s_num[q],
                        it[k])
            implied[k] = float(s_num[q] - 1)
            _note(notes, _N_ROLLBACK_INFERRED, j, ik[k], s_num[q], s_att[q], 0, it[k])
        else:
            best = -1
            for c in range(commit_t.shape[0]):
                if commit_t[c] <= it[k] and (best < 0 or commit_t[c] > commit_t[best]):
                    best = c
            term_t[n_term] = it[k]
            term_roll[n_term] = commit_s[best] if best >= 0 else -np.inf
            n_term += 1
            _note(notes, _N_TERMINAL, j, ik[k], ia[k], 0, 0, it[k])
    total = n_r + n_term
    rt = np.empty(total)
    rr = np.empty(total)
    late = np.ones(total)  # explicit restarts first among simultaneous ones
    for k in range(n_r):
        rt[k] = r_time[k]
        rr[k] = r_roll[k]
        late[k] = 0.0 if r_explicit[k] else 1.0
    for k in range(n_term):
        rt[n_r + k] = term_t[k]
        rr[n_r + k] = term_roll[k]
    o1 = _stable_order(late)
    order = _take(o1, _stable_order(_take(rt, o1)))
    rt, rr = _take(rt, order), _take(rr, order)
    # cause of each restart: the latest interruption before it with no step in between
    cause = np.full(total, -1, np.int64)
    for r in range(total):
        cand = _right(it, rt[r]) - 1
        if cand >= 0 and resume_start[cand] >= rt[r]:
            cause[r] = cand
    return cause, implied, rt, rr


@njit(cache=True)
def _erasure(j: int, s_att: np.ndarray, s_num: np.ndarray, s_t0: np.ndarray, s_t1: np.ndarray,
             cause: np.ndarray, implied: np.ndarray, it: np.ndarray, ik: np.ndarray, ia: np.ndarray,
             idet: np.ndarray, r_time: np.ndarray, r_roll: np.ndarray, notes: Any) -> Any:
    """Find the restart that erased each executed step (the live chain as a stack of segments).

    Returns ``erased_by`` per step (an interruption index; -1: never erased), the interruptions (with
    any unlogged one added, by time), which were inferred, and each one's rollback point.
    """
    n = s_num.shape[0]
    n_r = r_time.shape[0]
    erased_by = np.full(n, -1, np.int64)
    if n_r == 0:  # no restart: nothing erased
        return erased_by, it, ik, ia, idet, np.zeros(it.shape[0], np.bool_), implied.copy()
    stack_a = np.empty(n_r + 1, np.int64)
    stack_b = np.empty(n_r + 1, np.int64)
    top = 0
    unlogged = np.empty(n_r, np.int64)
    n_unlogged = 0
    for k in range(n_r):
        # segment k holds the steps that start after restart k - 1 and before restart k
        a = 0 if k == 0 else _left(s_t0, r_time[k - 1])
        b = _left(s_t0, r_time[k])
        if b > a:
            stack_a[top], stack_b[top] = a, b
            top += 1
        erased_any = False
        roll = r_roll[k]
        while top > 0:
            a_, b_ = stack_a[top - 1], stack_b[top - 1]
            if np.isfinite(roll):
                cut = _right_in(s_num, a_, b_, np.int64(roll))
            else:
                cut = a_ if roll < 0 else b_
            if cut < b_:
                for i in range(cut, b_):
                    erased_by[i] = k  # restart index for now
                erased_any = True
            if cut == a_:
                top -= 1
                continue
            stack_b[top - 1] = cut
            break
        if erased_any and cause[k] < 0:
            unlogged[n_unlogged] = k
            n_unlogged += 1
    n_int = it.shape[0]
    total = n_int + n_unlogged
    inferred = np.zeros(total, np.bool_)
    if n_unlogged:
        it2 = np.empty(total)
        ik2 = np.zeros(total, np.int64)
        ia2 = np.empty(total, np.int64)
        idet2 = np.full(total, np.nan)
        implied2 = np.full(total, np.nan)
        for i in range(n_int):
            it2[i], ik2[i], ia2[i], idet2[i], implied2[i] = it[i], ik[i], ia[i], idet[i], implied[i]
        for u in range(n_unlogged):
            k = unlogged[u]
            last = _left(s_t0, r_time[k]) - 1
            it2[n_int + u] = s_t1[last]
            ia2[n_int + u] = s_att[last]
            inferred[n_int + u] = True
            cause[k] = n_int + u
            _note(notes, _N_UNLOGGED, j, s_att[last], 0, 0, 0, s_t1[last])
        order = _stable_order(it2)
        inv = np.empty(total, np.int64)
        for i in range(total):
            inv[order[i]] = i
        it, ik, ia = _take(it2, order), _take(ik2, order), _take(ia2, order)
        idet, implied, inferred = _take(idet2, order), _take(implied2, order), _take(inferred, order)
        for r in range(n_r):
            if cause[r] >= 0:
                cause[r] = inv[cause[r]]
    for i in range(n):
        if erased_by[i] >= 0:
            erased_by[i] = cause[erased_by[i]]
    restore = implied.copy()
    for r in range(n_r):
        if cause[r] >= 0:
            restore[cause[r]] = r_roll[r]
    return erased_by, it, ik, ia, idet, inferred, restore


@njit(cache=True)
def _paired_markers(begin_code: int, end_code: int, kind: np.ndarray, e_pos: np.ndarray, e_step: np.ndarray,
                    e_ns: np.ndarray, e_t: np.ndarray, e_dur: np.ndarray, origin: int) -> Any:
    """Pair the begin and end markers of one kind of pause; return the pauses' starts and ends.

    A begin pairs with the next end record of its attempt -- of the same step when the begin carries
    one -- and an end closes only the latest begin before it.  Returns each begin's time, paired end
    (NaN: none) and logged end (begin + ``duration_s``; NaN: none), and the pauses known only from an
    unpaired end's ``duration_s``.
    """
    m = kind.shape[0]
    b_idx = _where(kind, begin_code)
    x_idx = _where(kind, end_code)
    nb, nx = b_idx.shape[0], x_idx.shape[0]
    if nb == 0 and nx == 0:
        none = np.empty(0)
        return none, none, none, none, none
    match = np.full(nb, -1, np.int64)
    if nb and nx:
        n_att = 0
        for i in range(m):
            n_att = max(n_att, e_pos[i] + 1)
        # begins without a step: the next end of their attempt, by one backward sweep
        next_end = np.full(n_att, -1, np.int64)
        b = nb - 1
        x = nx - 1
        for p in range(m - 1, -1, -1):
            if x >= 0 and x_idx[x] == p:
                next_end[e_pos[p]] = x
                x -= 1
            elif b >= 0 and b_idx[b] == p:
                if not (e_step[p] >= 0):
                    match[b] = next_end[e_pos[p]]
                b -= 1
        # begins with a step: the next end of their attempt and step (ends sorted by attempt, step)
        x_att = np.empty(nx, np.int64)
        x_step = np.empty(nx, np.int64)
        for i in range(nx):
            v = e_step[x_idx[i]]
            x_step[i] = np.int64(v) if v == v else -2
            x_att[i] = e_pos[x_idx[i]]
        o1 = _stable_order(_as_float(x_step))
        order = _take(o1, _stable_order(_as_float(_take(x_att, o1))))
        for bi in range(nb):
            p = b_idx[bi]
            if not (e_step[p] >= 0):
                continue
            a, s = e_pos[p], np.int64(e_step[p])
            lo, hi = 0, nx
            while lo < hi:  # first end with (attempt, step, position) after (a, s, p)
                mid = lo + ((hi - lo) >> 1)
                q = order[mid]
                if x_att[q] < a or (x_att[q] == a and (x_step[q] < s or (x_step[q] == s and x_idx[q] <= p))):
                    lo = mid + 1
                else:
                    hi = mid
            if lo < nx:
                q = order[lo]
                if x_att[q] == a and x_step[q] == s:
                    match[bi] = q
    # several begins may reach one end: only the latest of them pairs with it
    owner = np.full(nx, -1, np.int64)
    for bi in range(nb):
        if match[bi] >= 0:
            owner[match[bi]] = bi
    pair_end = np.full(nb, np.nan)
    for q in range(nx):
        if owner[q] >= 0:
            pair_end[owner[q]] = e_t[x_idx[q]]
    b_time = _take(e_t, b_idx)
    b_logged = np.empty(nb)
    for bi in range(nb):
        b_logged[bi] = _rel_ns(e_ns[b_idx[bi]], origin, e_dur[b_idx[bi]])
    n_lone = 0
    lone_s = np.empty(nx)
    lone_e = np.empty(nx)
    for q in range(nx):
        p = x_idx[q]
        if owner[q] < 0 and np.isfinite(e_dur[p]):
            lone_s[n_lone] = _rel_ns(e_ns[p], origin, -e_dur[p])
            lone_e[n_lone] = e_t[p]
            n_lone += 1
    return b_time, pair_end, b_logged, lone_s[:n_lone], lone_e[:n_lone]


# ---------------------------------------------------------------------------------------------------
# One job's parts: runs, warm-up, stalls, retention, overlays, labelled held time
# ---------------------------------------------------------------------------------------------------


@njit(cache=True)
def _merge(starts: np.ndarray, ends: np.ndarray) -> Any:
    """Return the union of intervals as sorted disjoint intervals (empty ones dropped)."""
    n = 0
    for i in range(starts.shape[0]):
        if ends[i] > starts[i]:
            n += 1
    s = np.empty(n)
    e = np.empty(n)
    n = 0
    for i in range(starts.shape[0]):
        if ends[i] > starts[i]:
            s[n], e[n] = starts[i], ends[i]
            n += 1
    order = _stable_order(s)
    out_s = np.empty(n)
    out_e = np.empty(n)
    k = -1
    run = -np.inf  # running maximum of the ends
    for q in range(n):
        i = order[q]
        new = k < 0 or s[i] > run
        run = e[i] if k < 0 else max(run, e[i])
        if new:
            k += 1
            out_s[k] = s[i]
        out_e[k] = run
    return out_s[:k + 1], out_e[:k + 1]


@njit(cache=True)
def _pause_windows(b: np.ndarray, paired_end: np.ndarray, logged_end: np.ndarray, ds: np.ndarray,
                   de: np.ndarray, s0: np.ndarray, it: np.ndarray, gang: np.ndarray, release: np.ndarray,
                   markers: np.ndarray) -> Any:
    """Return the merged pause windows of one kind.

    A begin lasts until its own end record, the next step, the next interruption, its attempt's
    release or the next pause marker, whichever is first.
    """
    nb = b.shape[0]
    if nb == 0 and ds.shape[0] == 0:
        return np.empty(0), np.empty(0)
    starts = np.empty(nb + ds.shape[0])
    ends = np.empty(nb + ds.shape[0])
    for i in range(nb):
        end = np.inf
        if paired_end.shape[0] and paired_end[i] == paired_end[i]:
            end = paired_end[i]
        if logged_end[i] == logged_end[i]:
            end = min(end, logged_end[i])
        end = min(end, _next_at_or_after(s0, b[i]))
        end = min(end, _next_at_or_after(it, b[i]))
        a = min(max(_right(gang, b[i]) - 1, 0), max(gang.shape[0] - 1, 0))
        end = min(end, release[a])
        k = _right(markers, b[i])
        if k < markers.shape[0]:
            end = min(end, markers[k])
        starts[i] = b[i]
        ends[i] = end
    for i in range(ds.shape[0]):
        starts[nb + i] = ds[i]
        ends[nb + i] = de[i]
    return _merge(starts, ends)


@njit(cache=True)
def _cover_labels(mid: np.ndarray, s_: np.ndarray, e_: np.ndarray, lab: np.ndarray, own: np.ndarray,
                  label: np.ndarray, owner: np.ndarray) -> None:
    """Label each point inside one overlay (overwriting lower-priority labels).

    A point lies inside the last interval starting at or before it when it lies before that
    interval's end.
    """
    order = _stable_order(s_)
    n = 0
    for q in range(order.shape[0]):
        if e_[order[q]] > s_[order[q]]:
            n += 1
    keep = np.empty(n, np.int64)
    starts = np.empty(n)
    n = 0
    for q in range(order.shape[0]):
        i = order[q]
        if e_[i] > s_[i]:
            keep[n] = i
            starts[n] = s_[i]
            n += 1
    if n == 0:
        return
    for p in range(mid.shape[0]):
        k = _right(starts, mid[p]) - 1
        if k >= 0 and mid[p] < e_[keep[k]]:
            label[p] = lab[keep[k]]
            owner[p] = own[keep[k]]


@njit(cache=True)
def _clean_end(n: int, s_t1: np.ndarray, gang: np.ndarray, it: np.ndarray, ends: np.ndarray) -> float:
    """Return the time the job ended cleanly (its result retained); else NaN.

    The clean-end rule (:mod:`fleetlib.runtime.goodput`, "Clean end"): ``ends`` are the job's end
    markers -- its ``job_completed`` events, its last attempt's recorded ``release`` and the time a
    scheduler recorded it ``COMPLETED`` (:func:`build_parts`' ``completed_ns``).  The clean end is
    the earliest marker at or after the job's last step and its last attempt's gang completion with
    no failure or preemption between that step and the marker.
    """
    if ends.shape[0] == 0 or n == 0 or gang.shape[0] == 0:
        return np.nan
    last = 0
    for a in range(gang.shape[0]):  # the first greatest gang completion
        if gang[a] > gang[last]:
            last = a
    last_end = s_t1[n - 1]
    first_cut = np.inf  # the first interruption at or after the last step
    for t in it:
        if t >= last_end and t < first_cut:
            first_cut = t
    done = np.inf
    for e in ends:
        if e >= last_end and e >= gang[last] and e < first_cut and e < done:
            done = e
    return np.nan if done == np.inf else done


@njit(cache=True)
def _end_markers(e_att: np.ndarray, e_t: np.ndarray, kind: np.ndarray, att_num: np.ndarray, gang: np.ndarray,
                 completed_ns: np.int64, origin: np.int64) -> np.ndarray:
    """Return a job's end markers (seconds from its origin), the input of :func:`_clean_end`.

    Its ``job_completed`` events, its last attempt's recorded ``release`` (an inferred one is not a
    marker) and ``completed_ns`` (a scheduler's ``COMPLETED``, :data:`NO_TIME`: none).
    """
    n_c = 0
    for i in range(kind.shape[0]):
        if kind[i] == _K_COMPLETED:
            n_c += 1
    out = np.empty(n_c + 2)
    q = 0
    for i in range(kind.shape[0]):
        if kind[i] == _K_COMPLETED:
            out[q] = e_t[i]
            q += 1
    if gang.shape[0]:
        last = 0
        for a in range(gang.shape[0]):  # the first greatest gang completion
            if gang[a] > gang[last]:
                last = a
        for i in range(kind.shape[0]):
            if kind[i] == _K_RELEASE and e_att[i] == att_num[last]:
                out[q] = e_t[i]
                q += 1
                break
    if completed_ns != NO_TIME:
        out[q] = (completed_ns - origin) / _NS
        q += 1
    return out[:q]


@njit(cache=True)
def _fault_free(compute: np.ndarray, is_start: np.ndarray, n_starts: int, median: bool) -> float:
    """Return the median (or mean) compute time of the steps but each run's first (all, if none left)."""
    n = compute.shape[0]
    m = n - n_starts
    if m > 0:
        sample = np.empty(m)
        q = 0
        for i in range(n):
            if not is_start[i]:
                sample[q] = compute[i]
                q += 1
    else:
        sample = compute.copy()
    if median:
        return _median(sample)
    total = 0.0
    for v in sample:
        total += v
    return total / sample.shape[0]


@njit(cache=True)
def _fill(n: int, value: int) -> np.ndarray:
    """Return an int64 array of ``n`` copies of ``value``."""
    out = np.empty(n, np.int64)
    for i in range(n):
        out[i] = value
    return out


@njit(cache=True)
def _job_parts(s_att: np.ndarray, s_num: np.ndarray, s_t0: np.ndarray, s_t1: np.ndarray, s_dur: np.ndarray,
               s_wait: np.ndarray, att_num: np.ndarray, gang: np.ndarray, release: np.ndarray,
               cold: np.ndarray, fs_t: np.ndarray, it: np.ndarray, ik: np.ndarray, idet: np.ndarray,
               erased_by: np.ndarray, commit_t: np.ndarray, commit_s: np.ndarray, ck: Any, ev: Any,
               idle_b: np.ndarray, idle_logged: np.ndarray, resize_b: np.ndarray, resize_e: np.ndarray,
               completed: np.ndarray, ff_given: float, median: bool, tol: float, stall_factor: float,
               clean_end_commit: bool, flags: np.ndarray,
               xlab: np.ndarray, xown: np.ndarray) -> Any:
    """Cut one job's held time into labelled parts (the steps' parts are written into the step arrays).

    Returns the fault-free step time (NaN: none; given, or estimated from the steady steps), the
    clean end (NaN: none), the commits in landing order (time, the step index their chain cut
    reaches, the chain length they retain, whether it is the clean end), the labelled pieces of held
    time outside steps, the not-held stretches between attempts and the merged checkpoint pauses.
    """
    n = s_num.shape[0]
    n_att = gang.shape[0]
    n_int = it.shape[0]
    compute = np.empty(n)  # the estimate, warm-up and stalls all judge compute time
    for i in range(n):
        compute[i] = s_dur[i] - s_wait[i]
    # --- runs: the steps from each (re)start, and what triggered each ---------------------------
    resume, resume_start = _resumes(s_t0, it)
    n_runs = 0
    run_bounds = np.empty(n, np.int64)
    for i in range(n):
        if i == 0 or s_att[i] != s_att[i - 1]:
            run_bounds[n_runs] = i
            n_runs += 1
    run_att = np.empty(n_runs, np.int64)
    for r in range(n_runs):
        a = s_att[run_bounds[r]]
        x = 0
        while att_num[x] != a:  # the run's attempt, in gang order (every step's attempt has one)
            x += 1
        run_att[r] = x
    is_start = np.zeros(n, np.bool_)
    for r in range(n_runs):
        is_start[run_bounds[r]] = True
    has_any = False
    for k in range(n_int):
        if resume[k] < n:
            is_start[resume[k]] = True
            has_any = True
    n_starts = 0
    for i in range(n):
        if is_start[i]:
            n_starts += 1
    starts = np.empty(n_starts, np.int64)
    q = 0
    for i in range(n):
        if is_start[i]:
            starts[q] = i
            q += 1
    trigger = np.full(n_starts, -1, np.int64)  # interruption index, -1 = cold launch
    if has_any:
        # the latest interruption whose resume is a run's first step triggers that run
        for k in range(n_int):
            if resume[k] < n:
                trigger[_left(starts, resume[k])] = k
        for r in range(n_runs):
            if cold[run_att[r]]:
                trigger[_left(starts, run_bounds[r])] = -1
    if ff_given == ff_given:
        ff = ff_given
    elif n == 0:
        ff = np.nan
    else:
        ff = _fault_free(compute, is_start, n_starts, median)
    ffz = 0.0 if ff != ff else ff
    # --- warm-up and erased steps ----------------------------------------------------------------
    for i in range(n):
        flags[i] = 0
        xlab[i] = -1
        xown[i] = -1
        if erased_by[i] < 0:
            flags[i] = _KEPT
        else:
            xlab[i] = _PREEMPT_LOST if ik[erased_by[i]] == 1 else _REWORK_STEPS
            xown[i] = erased_by[i]
    if n:
        threshold = ff * (1.0 + tol)
        for r in range(n_starts):
            lo = starts[r]
            hi = starts[r + 1] if r + 1 < n_starts else n
            owner = trigger[r]
            i = lo
            # warm-up is judged on compute time: an input wait is an input wait in every step
            while i < hi and not (compute[i] <= threshold):
                if flags[i] & _KEPT:
                    flags[i] |= _WARM
                    xown[i] = owner
                    if owner < 0:
                        xlab[i] = _STARTUP_WARMUP
                    elif ik[owner] == 1:
                        xlab[i] = _PREEMPT_WARMUP
                    else:
                        xlab[i] = _RECOVERY_WARMUP
                i += 1
    for r in range(n_starts):
        flags[starts[r]] |= _RUN_START
    bound = stall_factor * ffz
    for i in range(n):
        if (flags[i] & _KEPT) and not (flags[i] & _WARM):
            flags[i] |= _STEADY
            if compute[i] > bound:
                flags[i] |= _STALLED
    # --- retention: the chain of never-erased steps each commit covers ---------------------------
    clean = _clean_end(n, s_t1, gang, it, completed) if clean_end_commit else np.nan
    n_raw = commit_t.shape[0]
    n_c = n_raw + (1 if clean == clean else 0)
    ct = np.empty(n_c)
    cs = np.empty(n_c)
    for c in range(n_raw):
        ct[c], cs[c] = commit_t[c], commit_s[c]
    if clean == clean:
        ct[n_c - 1] = clean
        cs[n_c - 1] = np.inf
    c_order = _stable_order(ct)
    is_clean = np.zeros(n_c, np.bool_)
    for c in range(n_c):
        is_clean[c] = c_order[c] == n_raw
    ct, cs = _take(ct, c_order), _take(cs, c_order)
    n_chain = 0
    n_erased = 0
    for i in range(n):
        if erased_by[i] < 0:
            n_chain += 1
        else:
            n_erased += 1
    chain = np.empty(n_chain, np.int64)
    chain_num = np.empty(n_chain)
    erased_end = np.empty(n_erased)
    a = b = 0
    for i in range(n):
        if erased_by[i] < 0:
            chain[a] = i
            chain_num[a] = s_num[i]
            a += 1
        else:
            erased_end[b] = s_t1[i]
            b += 1
    reach = np.zeros(n_c, np.int64)
    if n and n_c:
        # commit j retains the prefix of the chain with step <= its step that ended before it landed
        run = 0
        for c in range(n_c):
            done = _right(s_t1, ct[c]) - _right(erased_end, ct[c])
            covered = min(_right(chain_num, cs[c]), done)
            run = max(run, covered)
            reach[c] = run
    cut = np.empty(n_c, np.int64)
    for c in range(n_c):
        cut[c] = chain[reach[c]] if reach[c] < n_chain else n
    # --- overlays on held time outside steps, lowest priority first ------------------------------
    n_cold = 0
    for x in range(n_att):
        if cold[x]:
            n_cold += 1
    cold_gang = np.empty(n_cold)  # sorted, as the gang completions are
    q = 0
    for x in range(n_att):
        if cold[x]:
            cold_gang[q] = gang[x]
            q += 1
    outage_end = np.empty(n_int)
    det_end = np.empty(n_int)
    part_start = np.empty(n_int)
    out_label = np.empty(n_int, np.int64)
    part_label = np.empty(n_int, np.int64)
    prev = -np.inf
    for k in range(n_int):
        # an outage ends when a step begins again: the next step row, or a first_step marker whose
        # step never finished (cut off by the next interruption); fs_t is sorted, as the events are
        begins = min(resume_start[k], _next_at_or_after(fs_t, it[k]))
        nxt = it[k + 1] if k + 1 < n_int else np.inf
        end = min(min(begins, nxt), _next_at_or_after(cold_gang, it[k]))
        outage_end[k] = max(end, it[k])
        d = min(idet[k], outage_end[k]) if idet[k] == idet[k] else it[k]
        det_end[k] = max(d, it[k])
        out_label[k] = _PREEMPT_RESTART if ik[k] == 1 else _RECOVERY_RESTART
        part_label[k] = _PREEMPT_PARTIAL if ik[k] == 1 else _REWORK_PARTIAL
        x = min(max(_right(gang, it[k]) - 1, 0), max(n_att - 1, 0))
        last_end = s_t1[resume[k] - 1] if n and resume[k] - 1 >= 0 else -np.inf
        part_start[k] = min(max(max(last_end, gang[x]), prev), it[k])
        prev = it[k]
    n_mark = ck[0].shape[0] + ev[0].shape[0] + idle_b.shape[0] + resize_b.shape[0] + resize_e.shape[0]
    markers = np.empty(n_mark)
    q = 0
    for arr in (ck[0], ev[0], idle_b, resize_b, resize_e):
        for v in arr:
            markers[q] = v
            q += 1
    markers = _sorted(markers)
    ck_s, ck_e = _pause_windows(ck[0], ck[1], ck[2], ck[3], ck[4], s_t0, it, gang, release, markers)
    ev_s, ev_e = _pause_windows(ev[0], ev[1], ev[2], ev[3], ev[4], s_t0, it, gang, release, markers)
    empty = np.empty(0)
    id_s, id_e = _pause_windows(idle_b, empty, idle_logged, empty, empty, s_t0, it, gang, release, markers)
    # elastic resizes: the wait from losing or regaining devices until re-initialisation starts (the
    # resize_end marker), then re-initialisation until the next step, release or pause marker; neither
    # logged durations nor interruptions (a rollback's inferred one lands on the resize itself) end them
    ew_s, ew_e = _pause_windows(resize_b, empty, np.full(resize_b.shape[0], np.nan), empty, empty, s_t0,
                                empty, gang, release, markers)
    er_s, er_e = _pause_windows(resize_e, empty, np.full(resize_e.shape[0], np.nan), empty, empty, s_t0,
                                empty, gang, release, markers)
    # startup and trailing idle per attempt
    first_start = np.full(n_att, np.inf)
    su_e = np.empty(n_att)
    tr_s = np.empty(n_att)
    for x in range(n_att):
        f = _left(s_t0, gang[x])
        if f < n:
            first_start[x] = s_t0[f]
        # startup ends at the attempt's first step -- or at a first_step marker, when that step was cut
        # off before it finished
        su_e[x] = min(min(first_start[x], _next_at_or_after(fs_t, gang[x])), release[x])
        last = _left(s_t0, release[x]) - 1
        tr_s[x] = s_t1[last] if (last >= f and last >= 0) else release[x]
    # --- held time outside steps: cut at every overlay boundary, labelled by priority -------------
    g0 = np.empty(n_att + n)
    g1 = np.empty(n_att + n)
    n_g = 0
    for x in range(n_att):
        g0[n_g] = gang[x]
        g1[n_g] = min(first_start[x], release[x]) if n else release[x]
        n_g += 1
    # after each step, held time runs to the next step of its attempt, or to the release
    r = 0
    for i in range(n):
        while r + 1 < n_runs and run_bounds[r + 1] <= i:
            r += 1
        if (r + 1 < n_runs and run_bounds[r + 1] == i + 1) or i == n - 1:
            g0[n_g] = s_t1[i]
            g1[n_g] = release[run_att[r]]
            n_g += 1
        elif s_t0[i + 1] > s_t1[i]:
            g0[n_g] = s_t1[i]
            g1[n_g] = s_t0[i + 1]
            n_g += 1
    every = (tr_s, release, part_start, it, gang, su_e, id_s, id_e, ev_s, ev_e, ck_s, ck_e, ew_s, ew_e, er_s,
             er_e, outage_end, det_end)
    n_cut = 0
    for arr in every:
        n_cut += arr.shape[0]
    cuts = np.empty(n_cut)
    n_cut = 0
    for arr in every:
        for v in arr:
            if np.isfinite(v):
                cuts[n_cut] = v
                n_cut += 1
    cuts = _sorted(cuts[:n_cut])
    n_cut = 0
    for i in range(cuts.shape[0]):  # distinct values
        if n_cut == 0 or cuts[i] != cuts[n_cut - 1]:
            cuts[n_cut] = cuts[i]
            n_cut += 1
    cuts = cuts[:n_cut]
    n_p = 0
    for gi in range(n_g):
        if g1[gi] > g0[gi]:
            n_p += 1 + max(_left(cuts, g1[gi]) - _right(cuts, g0[gi]), 0)
    p0 = np.empty(n_p)
    p1 = np.empty(n_p)
    q = 0
    for gi in range(n_g):
        if not g1[gi] > g0[gi]:
            continue
        lo = _right(cuts, g0[gi])
        hi = _left(cuts, g1[gi])
        start = g0[gi]
        for c in range(lo, hi):
            p0[q] = start
            p1[q] = cuts[c]
            start = cuts[c]
            q += 1
        p0[q] = start
        p1[q] = g1[gi]
        q += 1
    mid = np.empty(n_p)
    for i in range(n_p):
        mid[i] = 0.5 * (p0[i] + p1[i])
    label = _fill(n_p, np.int64(_UNATTRIBUTED))
    owner = _fill(n_p, np.int64(-1))
    int_own = np.arange(n_int)
    no_att = _fill(n_att, np.int64(-1))
    _cover_labels(mid, tr_s, release, _fill(n_att, np.int64(_IDLE_AFTER)), no_att, label, owner)
    if n_int:
        _cover_labels(mid, part_start, it, part_label, int_own, label, owner)
    _cover_labels(mid, gang, su_e, _fill(n_att, np.int64(_STARTUP_LAUNCH)), no_att, label, owner)
    for ps, pe, lab in ((id_s, id_e, _IDLE_MARKED), (ev_s, ev_e, _EVALUATION), (ck_s, ck_e, _CHECKPOINT)):
        if ps.shape[0]:
            _cover_labels(mid, ps, pe, _fill(ps.shape[0], np.int64(lab)), _fill(ps.shape[0], np.int64(-1)),
                          label, owner)
    if n_int:
        _cover_labels(mid, it, outage_end, out_label, int_own, label, owner)
        _cover_labels(mid, it, det_end, _fill(n_int, np.int64(_DETECTION)), int_own, label, owner)
    # an elastic resize is the job's answer to losing devices: its wait and re-initialisation stay
    # elastic even inside the outage of the interruption (logged or inferred from a rollback) it follows
    for ps, pe, lab in ((ew_s, ew_e, _ELASTIC_WAIT), (er_s, er_e, _ELASTIC_REINIT)):
        if ps.shape[0]:
            _cover_labels(mid, ps, pe, _fill(ps.shape[0], np.int64(lab)), _fill(ps.shape[0], np.int64(-1)),
                          label, owner)
    # --- not held: between attempts, and the interruption each wait follows -----------------------
    n_b = max(n_att - 1, 0)
    b_s = np.empty(n_b)
    b_e = np.empty(n_b)
    b_own = _fill(n_b, np.int64(-1))
    for x in range(n_b):
        b_s[x] = release[x]
        b_e[x] = gang[x + 1]
        cand = _right(it, b_s[x]) - 1
        if cand >= 0 and resume_start[cand] >= b_s[x]:
            b_own[x] = cand
    return ff, clean, ct, cut, reach, is_clean, p0, p1, label, owner, b_s, b_e, b_own, ck_s


# ---------------------------------------------------------------------------------------------------
# Every job: the structure and its parts, in job order
# ---------------------------------------------------------------------------------------------------


@njit(cache=True)
def _seconds(ns: np.ndarray, origin: int) -> np.ndarray:
    """Return ``(ns - origin) / 1e9``: instants in seconds since the origin, from nanoseconds."""
    out = np.empty(ns.shape[0])
    for i in range(ns.shape[0]):
        out[i] = (ns[i] - origin) / _NS
    return out


@njit(cache=True)
def _append_f(buf: np.ndarray, at: int, values: np.ndarray) -> np.ndarray:
    """Write ``values`` at ``buf[at:]``, growing ``buf``; return it."""
    buf = _grow(buf, at + values.shape[0])
    for i in range(values.shape[0]):
        buf[at + i] = values[i]
    return buf


@njit(cache=True)
def _build(codes: np.ndarray, s_off: np.ndarray, e_off: np.ndarray, s_att_all: np.ndarray,
           s_num_all: np.ndarray, s_start_all: np.ndarray, s_end_all: np.ndarray, s_wait_all: np.ndarray,
           e_att_all: np.ndarray, e_ns_all: np.ndarray, kind_all: np.ndarray, e_step_all: np.ndarray,
           e_dur_all: np.ndarray, ff_given: np.ndarray, completed_ns: np.ndarray, median: bool, tol: float,
           stall_factor: float, clean_end_commit: bool, err: np.ndarray, errf: np.ndarray) -> Any:
    """Build every job of ``codes`` (in order): its structure, then its parts; see :func:`build_parts`."""
    nj = codes.shape[0]
    n_s = s_num_all.shape[0]
    notes = [(np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0), np.int64(0), 0.0)]
    notes.clear()
    aux_out = np.zeros(kind_all.shape[0], np.bool_)
    step_flags = np.zeros(n_s, np.uint8)
    step_xlab = np.full(n_s, -1, np.int8)
    step_xown = np.full(n_s, -1, np.int64)
    per_job = np.zeros((nj, 4))  # fault-free step time, clean end, last release, checkpoints recorded
    origin = np.zeros(nj, np.int64)
    offsets = np.zeros((6, nj + 1), np.int64)  # attempts, interruptions, commits, gaps, between, pauses
    fb = [np.empty(0) for _ in range(11)]  # float parts: a_gang, a_rel, i_time, i_restore, c_time, g_start,
    # g_end, b_start, b_end, p_start, (unused)
    ib = [np.empty(0, np.int64) for _ in range(11)]  # int parts: a_num, a_cold, i_kind, i_inf, i_att, c_cut,
    # c_reach, c_clean, g_lab, g_own, b_own
    for k in range(nj):
        c = codes[k]
        s_lo, s_hi, e_lo, e_hi = s_off[c], s_off[c + 1], e_off[c], e_off[c + 1]
        s_att, s_num = s_att_all[s_lo:s_hi], s_num_all[s_lo:s_hi]
        s_start, s_end, s_wait = s_start_all[s_lo:s_hi], s_end_all[s_lo:s_hi], s_wait_all[s_lo:s_hi]
        e_att, e_ns, kind = e_att_all[e_lo:e_hi], e_ns_all[e_lo:e_hi], kind_all[e_lo:e_hi]
        e_step, e_dur = e_step_all[e_lo:e_hi], e_dur_all[e_lo:e_hi]
        m = kind.shape[0]
        n = s_num.shape[0]
        first_gang = -1
        for i in range(m):
            if kind[i] == _K_GANG:
                first_gang = i
                break
        if first_gang < 0:
            _refuse(err, errf, np.int64(_E_NO_GANG), k, np.int64(1 if m else 0), e_lo if m else s_lo,
                    np.int64(0), np.int64(0), np.int64(0), 0.0)
        o = e_ns[first_gang]
        origin[k] = o
        e_t = _seconds(e_ns, o)
        # step instants from integer nanoseconds relative to the origin; a duration is its exact
        # nanosecond count in seconds, not the difference of two rounded instants
        s_t0 = _seconds(s_start, o)
        s_t1 = _seconds(s_end, o)
        s_dur = np.empty(n)
        for i in range(n):
            s_dur[i] = (s_end[i] - s_start[i]) / _NS
        att_num, gang, release, cold, e_pos, fs_t = _attempts(k, s_lo, e_lo, s_att, s_num, s_t0, s_t1, e_att,
                                                              e_t, kind, aux_out, err, errf, notes)
        commit_t, commit_s = _commits(k, e_lo, s_num, s_t1, e_t, e_step, kind, err, errf)
        it, ik, ia, idet = _interruptions(k, s_lo, e_lo, s_num, s_t0, s_t1, e_att, e_t, kind, e_pos,
                                          gang.shape[0], err, errf, notes)
        rs_time, rs_roll = _restores(k, s_lo, e_lo, s_att, s_num, s_t0, e_t, e_step, kind, commit_t, commit_s,
                                     err, errf, notes)
        r_time, r_roll, r_explicit = _inferred_restarts(k, s_att, s_num, s_t0, rs_time, rs_roll, notes)
        cause, implied, r_time, r_roll = _outcomes(k, s_lo, s_att, s_num, s_t0, it, ik, ia, commit_t,
                                                   commit_s, r_time, r_roll, r_explicit, err, errf, notes)
        erased_by, it, ik, ia, idet, inferred, restore = _erasure(k, s_att, s_num, s_t0, s_t1, cause, implied,
                                                                  it, ik, ia, idet, r_time, r_roll, notes)
        ck = _paired_markers(np.int64(_K_CKPT_BEGIN), np.int64(_K_CKPT_COMMIT), kind, e_pos, e_step, e_ns,
                             e_t, e_dur, o)
        ev = _paired_markers(np.int64(_K_EVAL_BEGIN), np.int64(_K_EVAL_END), kind, e_pos, e_step, e_ns,
                             e_t, e_dur, o)
        n_idle = 0
        for i in range(m):
            if kind[i] == _K_HANG or kind[i] == _K_IDLE:
                n_idle += 1
        idle_b = np.empty(n_idle)
        idle_logged = np.empty(n_idle)
        q = 0
        for i in range(m):
            if kind[i] == _K_HANG or kind[i] == _K_IDLE:
                idle_b[q] = e_t[i]
                idle_logged[q] = _rel_ns(e_ns[i], o, e_dur[i])
                q += 1
        completed = _end_markers(e_att, e_t, kind, att_num, gang, completed_ns[k], o)
        resize_b = _take(e_t, _where(kind, np.int64(_K_RESIZE_BEGIN)))
        resize_e = _take(e_t, _where(kind, np.int64(_K_RESIZE_END)))
        (ff_k, clean_k, ct, cut, reach, is_clean, p0, p1, label, owner, b_s, b_e, b_own,
         ck_s) = _job_parts(s_att, s_num, s_t0, s_t1, s_dur, s_wait, att_num, gang, release, cold, fs_t, it,
                            ik, idet, erased_by, commit_t, commit_s, ck, ev, idle_b, idle_logged, resize_b,
                            resize_e, completed,
                            ff_given[k], median, tol, stall_factor, clean_end_commit,
                            step_flags[s_lo:s_hi], step_xlab[s_lo:s_hi], step_xown[s_lo:s_hi])
        last_release = -np.inf
        for v in release:
            last_release = max(last_release, v)
        per_job[k, 0], per_job[k, 1] = ff_k, clean_k
        per_job[k, 2], per_job[k, 3] = last_release, commit_t.shape[0]
        # append the job's ragged parts
        cold_i = np.empty(cold.shape[0], np.int64)
        for x in range(cold.shape[0]):
            cold_i[x] = 1 if cold[x] else 0
        inferred_i = np.empty(inferred.shape[0], np.int64)
        for x in range(inferred.shape[0]):
            inferred_i[x] = 1 if inferred[x] else 0
        clean_i = np.empty(is_clean.shape[0], np.int64)
        for x in range(is_clean.shape[0]):
            clean_i[x] = 1 if is_clean[x] else 0
        at = offsets[:, k]
        fb[0], fb[1] = _append_f(fb[0], at[0], gang), _append_f(fb[1], at[0], release)
        ib[0], ib[1] = _append_f(ib[0], at[0], att_num), _append_f(ib[1], at[0], cold_i)
        fb[2], fb[3] = _append_f(fb[2], at[1], it), _append_f(fb[3], at[1], restore)
        ib[2], ib[3], ib[4] = (_append_f(ib[2], at[1], ik), _append_f(ib[3], at[1], inferred_i),
                               _append_f(ib[4], at[1], ia))
        fb[4] = _append_f(fb[4], at[2], ct)
        ib[5], ib[6], ib[7] = (_append_f(ib[5], at[2], cut), _append_f(ib[6], at[2], reach),
                               _append_f(ib[7], at[2], clean_i))
        fb[5], fb[6] = _append_f(fb[5], at[3], p0), _append_f(fb[6], at[3], p1)
        ib[8], ib[9] = _append_f(ib[8], at[3], label), _append_f(ib[9], at[3], owner)
        fb[7], fb[8] = _append_f(fb[7], at[4], b_s), _append_f(fb[8], at[4], b_e)
        ib[10] = _append_f(ib[10], at[4], b_own)
        fb[9] = _append_f(fb[9], at[5], ck_s)
        sizes = (gang.shape[0], it.shape[0], ct.shape[0], p0.shape[0], b_s.shape[0], ck_s.shape[0])
        for x in range(6):
            offsets[x, k + 1] = offsets[x, k] + sizes[x]
    end = offsets[:, nj]
    floats = (fb[0][:end[0]], fb[1][:end[0]], fb[2][:end[1]], fb[3][:end[1]], fb[4][:end[2]], fb[5][:end[3]],
              fb[6][:end[3]], fb[7][:end[4]], fb[8][:end[4]], fb[9][:end[5]])
    ints = (ib[0][:end[0]], ib[1][:end[0]], ib[2][:end[1]], ib[3][:end[1]], ib[4][:end[1]], ib[5][:end[2]],
            ib[6][:end[2]], ib[7][:end[2]], ib[8][:end[3]], ib[9][:end[3]], ib[10][:end[4]])
    return notes, aux_out, step_flags, step_xlab, step_xown, origin, per_job, offsets, floats, ints


# ---------------------------------------------------------------------------------------------------
# Every job inside one window
# ---------------------------------------------------------------------------------------------------


@njit(cache=True)
def _window(codes: np.ndarray, s_off: np.ndarray, s_start_all: np.ndarray, s_end_all: np.ndarray,
            s_wait_all: np.ndarray, step_flags: np.ndarray, step_xlab: np.ndarray, step_xown: np.ndarray,
            origin: np.ndarray, ff_all: np.ndarray, end_s: np.ndarray, a_off: np.ndarray, a_gang: np.ndarray,
            a_rel: np.ndarray, i_off: np.ndarray, i_time: np.ndarray, c_off: np.ndarray, c_time: np.ndarray,
            c_cut: np.ndarray, c_reach: np.ndarray, c_clean: np.ndarray, g_off: np.ndarray,
            g_start: np.ndarray, g_end: np.ndarray, g_lab: np.ndarray, g_own: np.ndarray, b_off: np.ndarray,
            b_start: np.ndarray, b_end: np.ndarray, b_own: np.ndarray, p_off: np.ndarray, p_start: np.ndarray,
            ws_ns: int, we_ns: int, as_of_ns: int, committed: bool, closed: bool) -> Any:
    """Sum every job's parts inside ``[ws, we)``, commits judged as of ``as_of``; see :func:`window_sums`."""
    nj = codes.shape[0]
    fine = np.zeros((nj, NFINE))
    per_int = np.zeros((i_time.shape[0], NFINE))
    int_queue = np.zeros(i_time.shape[0])
    scal = np.zeros((nj, 7))  # productive committed / retrospective, committed / retained steps, held,
    # not held, queue
    counts = np.zeros((nj, 2), np.int64)  # commits, pauses
    gaps = np.empty(c_time.shape[0])
    n_gaps = 0
    for k in range(nj):
        c = codes[k]
        s_lo, s_hi = s_off[c], s_off[c + 1]
        n = s_hi - s_lo
        o = origin[k]
        ws = (ws_ns - o) / 1e9
        we = (we_ns - o) / 1e9
        ao = (as_of_ns - o) / 1e9
        ff = ff_all[k]
        ffz = 0.0 if ff != ff else ff
        i0, i1 = i_off[k], i_off[k + 1]
        c0, c1 = c_off[k], c_off[k + 1]
        # the commits landed by as_of retain the never-erased steps with index below `cut`
        last = _right_in(c_time, c0, c1, ao) - 1
        cut = c_cut[last] if last >= c0 else 0
        n_com = n_kept = wait_sum = above = above_com = stall = 0.0
        whole = ws <= 0.0 and we >= end_s[k]
        if n:
            kept_count = 0
            for i in range(n):
                g = s_lo + i
                fl = step_flags[g]
                dur = (s_end_all[g] - s_start_all[g]) / 1e9
                wait = s_wait_all[g]
                share = 1.0
                if not whole:
                    # the share of the step's duration inside the window (a zero-length step: 1 if it
                    # lies inside)
                    start = (s_start_all[g] - o) / 1e9
                    if dur == 0:
                        share = 1.0 if (start >= ws and start < we) else 0.0
                    else:
                        share = max(min(start + dur, we) - max(start, ws), 0.0) / dur
                excess = (dur - wait) - ffz
                if fl & _KEPT:
                    kept_count += 1
                    if whole:
                        wait_sum += wait
                    else:
                        n_kept += share
                        wait_sum += share * wait
                        if i < cut:
                            n_com += share
                if fl & _STEADY:
                    x = excess if whole else share * excess
                    if fl & _STALLED:
                        stall += x
                    else:
                        above += x
                        if i < cut:
                            above_com += x
                lab = step_xlab[g]
                if lab >= 0:
                    amt = excess if fl & _KEPT else dur
                    x = amt if whole else share * amt
                    fine[k, lab] += x
                    own = step_xown[g]
                    if own >= 0:
                        per_int[i0 + own, lab] += x
            if whole:
                n_com = float(c_reach[last]) if last >= c0 else 0.0
                n_kept = float(kept_count)
        # a retained step's productive time is its compute time (wall time less input wait); the part
        # above (or, negative, below) the fault-free baseline is the slow-step time handed to the program
        # rung, kept apart in the breakdown ("The walk")
        if committed:
            fine[k, _PRODUCTIVE] = ffz * n_com
            fine[k, _SLOW_STEP] = above_com
            fine[k, _AT_RISK] = ffz * (n_kept - n_com)
            fine[k, _SLOW_AT_RISK] = above - above_com
        else:
            fine[k, _PRODUCTIVE] = ffz * n_kept
            fine[k, _SLOW_STEP] = above
        fine[k, _INPUT_WAIT] = wait_sum
        fine[k, _STALL] = stall
        for q in range(g_off[k], g_off[k + 1]):
            ov = max(min(g_end[q], we) - max(g_start[q], ws), 0.0)
            fine[k, g_lab[q]] += ov
            if g_own[q] >= 0:
                per_int[i0 + g_own[q], g_lab[q]] += ov
        held = 0.0
        for a in range(a_off[k], a_off[k + 1]):
            held += max(min(a_rel[a], we) - max(a_gang[a], ws), 0.0)
        queue = 0.0
        for q in range(b_off[k], b_off[k + 1]):
            bw = max(min(b_end[q], we) - max(b_start[q], ws), 0.0)
            if b_own[q] >= 0:
                queue += bw
                int_queue[i0 + b_own[q]] += bw
        # commits inside the window; spacing across an interruption is not a checkpoint interval
        n_c = 0
        prev = 0.0
        for q in range(c0, c1):
            t = c_time[q]
            if c_clean[q] or not (t >= ws and (t <= we if closed else t < we)):
                continue
            if n_c > 0 and _left_in(i_time, i0, i1, t) <= _left_in(i_time, i0, i1, prev):
                gaps[n_gaps] = t - prev
                n_gaps += 1
            prev = t
            n_c += 1
        n_p = 0
        for q in range(p_off[k], p_off[k + 1]):
            t = p_start[q]
            if t >= ws and (t <= we if closed else t < we):
                n_p += 1
        scal[k, 0], scal[k, 1] = ffz * n_com + above_com, ffz * n_kept + above
        scal[k, 2], scal[k, 3] = n_com, n_kept
        scal[k, 4], scal[k, 5], scal[k, 6] = held, max(we - ws, 0.0) - held, queue
        counts[k, 0], counts[k, 1] = n_c, n_p
    return fine, per_int, int_queue, scal, counts, gaps[:n_gaps]


# ---------------------------------------------------------------------------------------------------
# Python: the kernel's inputs, its refusals and notes in words, its outputs
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobParts:
    """Every measured job's parts of held time, as :func:`build_parts` returns them.

    Jobs are ``codes`` (codes of ``tables.job_ids``, in job order); per-job arrays follow them.  The
    ragged parts of job ``k`` are the slices ``*_off[k]:*_off[k + 1]`` of their arrays; the step
    arrays are aligned with the tables' (sorted) steps.  Times are seconds since each job's origin.

    Attributes
    ----------
    tables
        The validated arrays (:class:`fleetlib.runtime.timeline.TimelineArrays`).
    codes
        The measured jobs.
    origin_ns, fault_free, end_s, clean_end, checkpoints
        Per job: origin (first gang completion, UTC nanoseconds), fault-free step time (NaN: none),
        last release, clean end (NaN: none) and checkpoint commits recorded.
    step_flags, step_label, step_owner
        Per step: kept / steady / stalled / warm-up / run-start bits, the fine label of its warm-up excess or
        erased time (-1: none) and the interruption it is charged to (-1: none).
    a_off, a_number, a_gang, a_release, a_cold
        Attempts in gang order.
    i_off, i_time, i_kind, i_inferred, i_attempt, i_restore
        Interruptions by time: kind 0 failure, 1 preemption; whether inferred; the rollback point
        (NaN: none / terminal; -inf: the initial state).
    c_off, c_time, c_cut, c_reach, c_clean
        Commits in landing order (the clean end included): the chain cut (a step index) and reach.
    g_off, g_start, g_end, g_label, g_owner
        Held time outside steps, cut at every overlay boundary, labelled (fine label; owner
        interruption or -1).
    b_off, b_start, b_end, b_owner
        Not-held stretches between consecutive attempts.
    p_off, p_start
        Merged checkpoint pauses' starts.
    """

    tables: Any
    codes: np.ndarray
    origin_ns: np.ndarray
    fault_free: np.ndarray
    end_s: np.ndarray
    clean_end: np.ndarray
    checkpoints: np.ndarray
    step_flags: np.ndarray
    step_label: np.ndarray
    step_owner: np.ndarray
    a_off: np.ndarray
    a_number: np.ndarray
    a_gang: np.ndarray
    a_release: np.ndarray
    a_cold: np.ndarray
    i_off: np.ndarray
    i_time: np.ndarray
    i_kind: np.ndarray
    i_inferred: np.ndarray
    i_attempt: np.ndarray
    i_restore: np.ndarray
    c_off: np.ndarray
    c_time: np.ndarray
    c_cut: np.ndarray
    c_reach: np.ndarray
    c_clean: np.ndarray
    g_off: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_label: np.ndarray
    g_owner: np.ndarray
    b_off: np.ndarray
    b_start: np.ndarray
    b_end: np.ndarray
    b_owner: np.ndarray
    p_off: np.ndarray
    p_start: np.ndarray

    @property
    def job_ids(self) -> list[str]:
        """The measured jobs' ids, in order."""
        ids = self.tables.job_ids
        return [ids[c] for c in self.codes.tolist()]

    @property
    def steps_per_job(self) -> np.ndarray:
        """Executed steps per measured job."""
        off = self.tables.s_off
        return off[self.codes + 1] - off[self.codes]

    def kept(self) -> np.ndarray:
        """Per step: never erased by a restart."""
        return (self.step_flags & _KEPT) != 0

    def steady(self) -> np.ndarray:
        """Per step: kept, past its run's warm-up and not stalled (the steps a step series is read from)."""
        return ((self.step_flags & _STEADY) != 0) & ((self.step_flags & _STALLED) == 0)

    def run_starts(self) -> np.ndarray:
        """Per step: the first step of a run (a cold launch, a new attempt, a resume after a fault)."""
        return (self.step_flags & _RUN_START) != 0


_INTERRUPTION = ("failure", "preempt")


def _utc(origin_ns: int, seconds: float) -> pd.Timestamp:
    """Return the UTC instant ``seconds`` after ``origin_ns`` (as messages name it)."""
    return pd.Timestamp(int(origin_ns), tz="UTC") + pd.Timedelta(seconds=float(seconds))


def _refusal(t: Any, codes: np.ndarray, err: np.ndarray, errf: np.ndarray) -> InputError:
    """Write the kernel's refusal as today's :class:`~fleetlib.quality.InputError`."""
    code, k, table, pos, a, b, c = (int(v) for v in err[:7])
    job = t.job_ids[int(codes[k])]
    name = excerpt(job)
    file = t.steps_file if table == 0 else t.events_file
    row = t.step_row(pos) if table == 0 else int(t.e_row[pos])

    def when() -> pd.Timestamp:
        # the job's origin: its first gang completion (the kernel stopped before returning it)
        lo, hi = int(t.e_off[codes[k]]), int(t.e_off[codes[k] + 1])
        gang = np.flatnonzero(np.asarray(t.e_kind[lo:hi] == "gang_complete"))
        return _utc(int(t.e_time[lo + gang[0]]), float(errf[0]))

    if code == _E_NO_GANG:
        return InputError(f"job {name} has no gang_complete event: held time starts when the allocation is "
                          "complete, which must be logged (rule 8), not inferred", file=file, row=row,
                          field="kind")
    if code == _E_GANG_TWICE:
        return InputError(f"attempt {a} of job {name} has {b} gang_complete events; a new allocation is a "
                          "new attempt", file=file, row=row, field="attempt")
    if code == _E_RELEASE_TWICE:
        return InputError(f"attempt {a} of job {name} is released twice", file=file, row=row, field="kind")
    if code == _E_ATTEMPT_NO_GANG:
        return InputError(f"attempt {a} of job {name} has records but no gang_complete event; held time "
                          "starts at gang completion, which must be logged (rule 8)", file=file, row=row,
                          field="attempt")
    if code == _E_RELEASE_BEFORE_GANG:
        return InputError(f"attempt {a} of job {name} is released before its gang completes", file=file,
                          row=row, field="time")
    if code == _E_ATTEMPTS_OVERLAP:
        return InputError(f"attempt {a} of job {name} becomes complete before attempt {b} is released: "
                          "attempts of one job must not overlap", file=file, row=row, field="time")
    if code == _E_STEP_OUTSIDE:
        return InputError(f"step {a} of attempt {b} lies outside the attempt's held interval "
                          "(gang_complete -> release)", file=file, row=row, field="start")
    if code == _E_EVENT_OUTSIDE:
        return InputError(f"{t.e_kind[pos]} event of attempt {a} lies outside the attempt's held interval "
                          "(gang_complete -> release)", file=file, row=row, field="time")
    if code == _E_COMMIT_NO_STEP:
        return InputError("checkpoint_commit without a step: a commit must say which step's state it holds",
                          file=file, row=row, field="step")
    if code == _E_COMMIT_EARLY:
        return InputError(f"checkpoint of step {a} committed before any step >= {a} had finished", file=file,
                          row=row, field="step")
    if code == _E_STEP_ACROSS:
        return InputError(f"step {a} runs across the {_INTERRUPTION[b]} at {when()}: a step cannot finish "
                          "after the fault or eviction that stopped progress", file=file, row=row,
                          field="end")
    if code == _E_RESTORE_UNCOMMITTED:
        return InputError(f"restore to step {a}, but no checkpoint of step {a} was committed before it",
                          file=file, row=row, field="step")
    if code == _E_RESTORE_FIRST_STEP:
        return InputError(f"the first step after a restore to step {a} is step {b}: a restored job resumes "
                          "after the restored step", file=file, row=row, field="step")
    # _E_NO_RESTART
    return InputError(f"{_INTERRUPTION[a]} at {when()} in attempt {b} is followed by step {c} in the same "
                      "attempt with no restart (no restore event, no new attempt): log the restart",
                      file=file, row=row, field="step")


def _write_note(t: Any, parts_origin: np.ndarray, codes: np.ndarray, aux_out: np.ndarray,
                note: tuple[int, int, int, int, int, int, float]) -> None:
    """Add one of the kernel's coded notes to the tables' ledger, in words."""
    code, k, a, b, c, _, x = note
    ledger: Ledger = t.ledger
    job = t.job_ids[int(codes[k])]
    origin = int(parts_origin[k])
    if code == _N_RELEASE_MISSING:
        ledger.flag("release_missing", f"attempt {a} has no release event; its held time is taken to end at "
                    "its last record", job_id=job, attempt=a, time=_utc(origin, x))
    elif code == _N_AUX_OUTSIDE:
        lo, hi = int(t.e_off[codes[k]]), int(t.e_off[codes[k] + 1])
        names = ", ".join(sorted({str(v) for v in t.e_kind[lo:hi][aux_out[lo:hi]]}))
        ledger.flag("event_outside_held_time", f"{a} auxiliary event(s) ({names}) lie outside their "
                    "attempt's held interval: kept, not charged", field="time", job_id=job)
    elif code == _N_FIRST_STEP_MISMATCH:
        ledger.flag("first_step_mismatch", f"{a} first_step marker(s) start no step in the steps table and "
                    "are not followed by an interruption; they only end outages", job_id=job,
                    time=_utc(origin, x))
    elif code == _N_DETECTED_REPAIRED:
        ledger.repair(t.events_file, int(t.e_row[a]), "kind", "failure_detected with no preceding failure in "
                      "its attempt: taken as the fault time (detection latency unknown)")
    elif code == _N_RESTORE_STEPS_MISSING:
        ledger.flag("step_records_missing", f"after a restore to step {a} the first recorded step is {b}",
                    job_id=job, attempt=c, time=_utc(origin, x))
    elif code == _N_RESTART_INFERRED:
        ledger.flag("restart_inferred_from_step_numbers",
                    f"step {a} runs again after step {b} with no restore event: a restart to step {a - 1} is "
                    "inferred (fallback; log restore events)", job_id=job, attempt=c, time=_utc(origin, x))
    elif code == _N_STEP_JUMPS:
        ledger.flag("step_records_missing", f"step numbers skip ahead {a} time(s) with no restart (missing "
                    "step records?); the skipped time is not counted as a step", job_id=job)
    elif code == _N_ROLLBACK_INFERRED:
        ledger.flag("rollback_inferred", f"the restart after the {_INTERRUPTION[a]} at {_utc(origin, x)} has "
                    f"no restore event; it resumes at step {b}, so the rollback point is taken as step "
                    f"{b - 1}", job_id=job, attempt=c)
    elif code == _N_TERMINAL:
        ledger.flag("terminal_interruption", f"the job never resumed after the {_INTERRUPTION[a]} at "
                    f"{_utc(origin, x)}; its uncommitted work is charged to it", job_id=job, attempt=b)
    elif code == _N_UNLOGGED:
        ledger.flag("unlogged_interruption", "steps were erased by a restart with no failure or preempt "
                    "logged before it: treated as an unlogged failure at the end of the last step before the "
                    "restart", job_id=job, attempt=a, time=_utc(origin, x))


def build_parts(tables: Any, codes: np.ndarray, fault_free_given: np.ndarray, *, median: bool = True,
                tol: float = 0.1, stall_factor: float = 5.0, clean_end_commit: bool = True,
                completed_ns: np.ndarray | None = None) -> JobParts:
    """Read each job's structure and cut its held time into parts, for the jobs ``codes``, in order.

    Parameters
    ----------
    tables
        The validated arrays (:class:`fleetlib.runtime.timeline.TimelineArrays`); their ledger
        receives the flags and repairs of the structure, job by job, in the order the checks make
        them.
    codes
        Job codes to measure (increasing).
    fault_free_given
        Per job of ``codes``: the fault-free step time to use; NaN estimates it.
    median
        Estimate by the median (True) or the mean of the steady steps' compute time.
    tol, stall_factor, clean_end_commit
        Warm-up tolerance, stall bound and whether a clean job end is the final commit.
    completed_ns
        Per job of ``codes``: when a scheduler recorded the job ``COMPLETED`` (UTC nanoseconds;
        :data:`NO_TIME` or None: not recorded), one more end marker of the clean-end rule.

    Returns
    -------
    JobParts

    Raises
    ------
    fleetlib.quality.InputError
        The first refused record, in job order (naming the record's position in the tables: the
        caller relocates it to the file's row).
    """
    t = tables
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    err = np.zeros(8, dtype=np.int64)
    errf = np.zeros(2)
    done = (np.full(codes.size, NO_TIME, dtype=np.int64) if completed_ns is None
            else np.ascontiguousarray(completed_ns, dtype=np.int64))
    try:
        out = _build(codes, t.s_off, t.e_off, t.s_attempt, t.s_step, t.s_start, t.s_end, t.s_wait,
                     t.e_attempt, t.e_time, t.e_code, t.e_step, t.e_dur,
                     np.ascontiguousarray(fault_free_given, dtype=np.float64), done, bool(median), float(tol),
                     float(stall_factor), bool(clean_end_commit), err, errf)
    except KernelRefusal:
        raise _refusal(t, codes, err, errf) from None
    notes, aux_out, step_flags, step_xlab, step_xown, origin, per_job, offsets, floats, ints = out
    for note in notes:
        _write_note(t, origin, codes, aux_out, note)
    a_gang, a_rel, i_time, i_restore, c_time, g_start, g_end, b_start, b_end, p_start = floats
    a_num, a_cold, i_kind, i_inf, i_att, c_cut, c_reach, c_clean, g_lab, g_own, b_own = ints
    return JobParts(
        tables=t, codes=codes, origin_ns=origin, fault_free=per_job[:, 0].copy(), end_s=per_job[:, 2].copy(),
        clean_end=per_job[:, 1].copy(), checkpoints=per_job[:, 3].astype(np.int64), step_flags=step_flags,
        step_label=step_xlab, step_owner=step_xown, a_off=offsets[0].copy(), a_number=a_num, a_gang=a_gang,
        a_release=a_rel, a_cold=a_cold.astype(bool), i_off=offsets[1].copy(), i_time=i_time, i_kind=i_kind,
        i_inferred=i_inf.astype(bool), i_attempt=i_att, i_restore=i_restore, c_off=offsets[2].copy(),
        c_time=c_time, c_cut=c_cut, c_reach=c_reach, c_clean=c_clean.astype(bool), g_off=offsets[3].copy(),
        g_start=g_start, g_end=g_end, g_label=g_lab, g_owner=g_own, b_off=offsets[4].copy(), b_start=b_start,
        b_end=b_end, b_owner=b_own, p_off=offsets[5].copy(), p_start=p_start)


@dataclass(frozen=True)
class WindowSums:
    """Every measured job's parts summed inside one window (:func:`window_sums`).

    Attributes
    ----------
    fine
        Seconds per job and fine part (``(jobs, NFINE)``; columns :data:`FINE`).
    productive_committed, productive_retrospective, committed_steps, retained_steps, held, not_held, queue
        Per job.
    per_interruption, interruption_queue
        Seconds per interruption (the parts' order) and fine part; queue wait after each.
    commits, pauses
        Per job: checkpoint commits landed and checkpoint pauses begun inside the window.
    commit_gaps
        Spacing of consecutive commits inside the window with no interruption between them (all jobs).
    """

    fine: np.ndarray
    productive_committed: np.ndarray
    productive_retrospective: np.ndarray
    committed_steps: np.ndarray
    retained_steps: np.ndarray
    held: np.ndarray
    not_held: np.ndarray
    queue: np.ndarray
    per_interruption: np.ndarray
    interruption_queue: np.ndarray
    commits: np.ndarray
    pauses: np.ndarray
    commit_gaps: np.ndarray


def window_sums(parts: JobParts, start_ns: int, end_ns: int, as_of_ns: int, *, committed: bool,
                closed: bool) -> WindowSums:
    """Sum every job's parts inside ``[start, end)`` (``closed``: ``[start, end]``), commits as of ``as_of``.

    A step the window cuts counts by the share of its duration inside it (a zero-length step: whole,
    when it starts inside); commits landed by ``as_of`` retain steps.

    Parameters
    ----------
    parts
        :func:`build_parts`' result.
    start_ns, end_ns, as_of_ns
        The window and the instant commits are judged at, UTC nanoseconds.
    committed
        The committed definition (else the retrospective one).
    closed
        Count commits and pauses at the window's end too (the whole timeline, no window given).

    Returns
    -------
    WindowSums
    """
    t = parts.tables
    fine, per_int, int_queue, scal, counts, gaps = _window(
        parts.codes, t.s_off, t.s_start, t.s_end, t.s_wait, parts.step_flags, parts.step_label,
        parts.step_owner, parts.origin_ns, parts.fault_free, parts.end_s, parts.a_off, parts.a_gang,
        parts.a_release, parts.i_off, parts.i_time, parts.c_off, parts.c_time, parts.c_cut, parts.c_reach,
        parts.c_clean, parts.g_off, parts.g_start, parts.g_end, parts.g_label, parts.g_owner, parts.b_off,
        parts.b_start, parts.b_end, parts.b_owner, parts.p_off, parts.p_start, int(start_ns), int(end_ns),
        int(as_of_ns), bool(committed), bool(closed))
    return WindowSums(fine=fine, productive_committed=scal[:, 0], productive_retrospective=scal[:, 1],
                      committed_steps=scal[:, 2], retained_steps=scal[:, 3], held=scal[:, 4],
                      not_held=scal[:, 5], queue=scal[:, 6], per_interruption=per_int,
                      interruption_queue=int_queue, commits=counts[:, 0], pauses=counts[:, 1],
                      commit_gaps=gaps)


def window_sums_over(parts: JobParts, pieces: Sequence[tuple[int, int]], as_of_ns: int, *, committed: bool,
                     closed: bool) -> WindowSums:
    """Sum every job's parts inside the union of disjoint ``pieces`` (a window less its exclusions).

    Each piece ``[a, b)`` is clipped by :func:`window_sums`, the one window rule, and the sums add
    up; one piece gives :func:`window_sums` itself.  Commits and pauses count in the piece they fall
    in; ``commit_gaps`` are the pieces' gaps together (a gap never spans an excluded stretch).

    Parameters
    ----------
    parts
        :func:`build_parts`' result.
    pieces
        ``(start_ns, end_ns)`` of each included piece, in order, not overlapping.
    as_of_ns, committed, closed
        As in :func:`window_sums` (``closed`` applies to the last piece's end).

    Returns
    -------
    WindowSums
    """
    out: WindowSums | None = None
    for k, (a, b) in enumerate(pieces):
        s = window_sums(parts, a, b, as_of_ns, committed=committed, closed=closed and k == len(pieces) - 1)
        if out is None:
            out = s
            continue
        added = {f.name: getattr(out, f.name) + getattr(s, f.name) for f in dataclasses.fields(WindowSums)
                 if f.name != "commit_gaps"}
        out = WindowSums(**added, commit_gaps=np.concatenate([out.commit_gaps, s.commit_gaps]))
    if out is None:
        raise DomainError("a window needs at least one included piece")
    return out
