"""Synthetic job timelines with known ground truth, and the one-file Parquet form of a timeline.

:func:`synth_timeline` simulates one training job and returns the canonical steps and events tables
(:mod:`fleetlib.runtime.timeline`) together with ``truth``: the held seconds it injected into each
category of :data:`fleetlib.runtime.goodput.CATEGORIES`.  The measurement
(:func:`fleetlib.runtime.goodput.runtime_goodput`) must recover every one of them.

The simulated job
-----------------
* A cold launch: ``gang_complete``, then ``startup_s`` of launch and compilation, then the first step.
* Steps of ``step_s`` compute (times ``1 + u``, ``u`` uniform in ``[-step_jitter, step_jitter]``),
  each preceded with probability ``input_wait_prob`` by an input wait drawn from an exponential
  distribution of mean ``input_wait_mean_s``.
* After every (re)start the first ``warmup_steps`` steps run slow: step ``j`` of the run takes
  ``1 + warmup_excess * (warmup_steps - j) / warmup_steps`` times ``step_s``.
* A checkpoint after every ``checkpoint_every_steps``-th step: synchronous (the job pauses
  ``checkpoint_write_s`` and the commit lands at the end of the pause) or asynchronous (the job
  pauses ``checkpoint_stage_s`` to stage, and the commit lands ``checkpoint_write_s`` after the
  checkpoint began, while training continues).  The last step is always followed by a synchronous
  final checkpoint when ``final_checkpoint`` is true.
* An evaluation pause of ``eval_s`` after every ``eval_every_steps``-th step (after the checkpoint).
* Interruptions arrive as a Poisson process of rate ``failure_rate_per_h + preemption_rate_per_h``
  on the *running* clock (from each run's first step, through steps and pauses, to the next
  interruption); each is a failure or a preemption in proportion to the two rates.  An interruption
  can land inside a step (the partial step is lost), a checkpoint pause (its commit never lands) or
  an evaluation.  The job rolls back to the last commit that had landed.

  - failure: ``failure``; after ``detect_s`` a ``failure_detected``; after ``failure_restart_s`` more
    of relaunch and reload (held), a ``restore`` and the first step of the next run.  With
    ``failure_requeue_s`` set, the allocation is released at detection and the job waits that long
    for a new one (a new attempt), then spends ``failure_restart_s`` reloading.
  - preemption: ``preempt``; ``preemption_drain_s`` later a ``release``; ``preemption_queue_s`` of
    queue (not held); a new attempt's ``gang_complete``; ``preemption_restart_s`` of reload; a
    ``restore``; the first step.
* Optionally a zombie at the end: after the final checkpoint a ``hang_begin`` and ``hang_s`` of held
  time with no progress before the ``release``.

All durations are rounded to whole nanoseconds before they are laid end to end, so the tables'
timestamps represent them exactly and the truth is exact.

Truth follows the accounting rules of :mod:`fleetlib.runtime.goodput` with the *true* fault-free step
time ``step_s``: retained steps' compute time is productive (``step_s`` for a warm-up step); warm-up is
the leading run of steps after each (re)start that take longer than ``(1 + warmup_tolerance) * step_s``,
and everything in them above ``step_s`` goes to the event that caused the restart (startup for the cold
launch); the input waits of retained steady-state steps go to ``input_wait``, and their jitter stays in
productive time and is reported as ``slow_step_s`` (the program handoff);
steps a rollback erased go whole to ``rework`` (failure) or ``preemption``.  Committed steps follow the
clean-end rule: every kept step of a job that ended cleanly is committed (``clean_end_commit``).

One-file layout
---------------
:func:`write_timeline` stores both tables in **one Parquet file**, row-stacked with a ``record``
column (``"step"`` or ``"event"``) and the union of their columns: ``record, job_id, attempt, step,
start, end, input_wait_s, time, kind, duration_s``.  Step rows leave ``time, kind, duration_s`` null;
event rows leave ``start, end, input_wait_s`` null.  The canonical reader
(``fleetlib.runtime.READERS["canonical"]``) splits them back by ``record`` and validates them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import current_limits
from fleetlib.quality import (
    DomainError,
    check_fraction,
    check_nonnegative,
    check_positive,
)
from fleetlib.runtime.schema import CATEGORIES, DEVICE_COLUMNS
from fleetlib.runtime.timeline import validate_timeline

__all__ = [
    "synth_timeline",
    "synth_timeline_file",
    "write_timeline",
]


_NS = 1_000_000_000
_COLD, _FAIL, _PRE = 0, 1, 2
# order of event kinds that share one instant (a begin before its commit, a commit before a fault)
_KIND_ORDER = {k: i for i, k in enumerate((
    "gang_complete", "cold_start", "restore", "first_step", "checkpoint_begin", "checkpoint_commit",
    "eval_begin", "eval_end", "hang_begin", "failure", "failure_detected", "preempt", "release"))}


def _ns(seconds: float) -> int:
    return round(seconds * _NS)


def synth_timeline(n_steps: int, *, seed: int, step_s: float = 1.0, failure_rate_per_h: float = 0.0,
                   preemption_rate_per_h: float = 0.0, checkpoint_every_steps: int = 100,
                   checkpoint_write_s: float = 10.0, async_checkpoint: bool = False,
                   checkpoint_stage_s: float = 1.0, input_wait_prob: float = 0.0,
                   input_wait_mean_s: float | None = None, step_jitter: float = 0.0,
                   startup_s: float = 120.0, warmup_steps: int = 3, warmup_excess: float = 1.5,
                   detect_s: float = 30.0, failure_restart_s: float = 120.0,
                   failure_requeue_s: float | None = None, preemption_drain_s: float = 10.0,
                   preemption_queue_s: float = 600.0, preemption_restart_s: float = 120.0,
                   eval_every_steps: int = 0, eval_s: float = 60.0, hang_s: float = 0.0,
                   final_checkpoint: bool = True, warmup_tolerance: float = 0.1, stall_factor: float = 5.0,
                   clean_end_commit: bool = True,
                   job_id: str = "synthetic-0", start: Any = "2024-01-01T00:00:00Z",
                   slowdowns: Sequence[tuple[int, int | None, float]] = (),
                   ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float]]:
    """Simulate one job's timeline and return it with the seconds injected into each category.

    See the module docstring for the simulated process.

    Parameters
    ----------
    n_steps
        Steps the job must retain to finish, >= 1.
    seed
        Seed of the random generator (the same seed gives the same timeline).
    step_s
        Fault-free step compute time, seconds, > 0.
    failure_rate_per_h, preemption_rate_per_h
        Poisson rates of failures and preemptions per running hour, >= 0.
    checkpoint_every_steps
        A checkpoint after every this-many steps, >= 1.
    checkpoint_write_s
        Time from checkpoint begin to durable commit, seconds, >= 0.  For a synchronous checkpoint
        it is also the pause.
    async_checkpoint
        Asynchronous periodic checkpoints (pause ``checkpoint_stage_s``; the write continues in the
        background and must finish within one checkpoint interval).
    checkpoint_stage_s
        Staging pause of an asynchronous checkpoint, seconds, >= 0.
    input_wait_prob
        Probability that a step waits for input, in [0, 1].
    input_wait_mean_s
        Mean input wait when it happens, seconds, > 0 (default ``0.2 * step_s``).
    step_jitter
        Half-width of the uniform relative jitter of steady-state steps, in [0, ``warmup_tolerance``).
    startup_s
        Cold launch from gang completion to the first step, seconds, >= 0.
    warmup_steps
        Slow steps after every (re)start, >= 0.
    warmup_excess
        Relative excess of the first warm-up step (decreasing linearly); the smallest,
        ``warmup_excess / warmup_steps``, must exceed ``warmup_tolerance + step_jitter`` so that the
        warm-up is visible to the measurement.
    detect_s, failure_restart_s
        Failure detection latency and relaunch-plus-reload time, seconds, >= 0.
    failure_requeue_s
        None: failures restart in place.  A number: the allocation is released at detection and the
        job waits this long (not held) for a new one.
    preemption_drain_s, preemption_queue_s, preemption_restart_s
        Held time from eviction to release; queue wait before readmission (not held); reload after
        readmission (held); seconds, >= 0.
    eval_every_steps
        An evaluation after every this-many steps; 0 for none.
    eval_s
        Evaluation pause, seconds, >= 0.
    hang_s
        Zombie time at the end (held, no progress), seconds, >= 0.
    final_checkpoint
        Commit the final weights (a synchronous checkpoint after the last step).
    warmup_tolerance
        The warm-up threshold the truth uses (pass the same value to the measurement), >= 0.
    stall_factor
        The stall bound the truth uses (the measurement's default, 5x the step time).
    clean_end_commit
        Whether the truth counts the job's clean end as its final commit, as the measurement's option
        of that name does (default True): the generator knows whether the job ended cleanly -- its
        final ``release`` follows the last step with no interruption between, which holds unless an
        interruption lands after every step is durable -- and then no step is progress at risk.
    job_id
        Job identifier.
    start
        UTC time of the first gang completion.
    slowdowns
        Level shifts of the step time: ``(first, end, factor)`` multiplies the compute time of every
        step numbered ``first <= step < end`` (``end`` None: to the last step) by ``factor`` -- a node
        that turns slow and stays slow, or a slow episode that ends.  Their excess is slow-step time
        (above ``step_s``), reported apart as ``slowdown_s``.

    Returns
    -------
    steps : pandas.DataFrame
        Canonical steps table.
    events : pandas.DataFrame
        Canonical events table.
    truth : dict
        Seconds per category (every key of :data:`~fleetlib.runtime.goodput.CATEGORIES`, as the
        committed definition measured on the whole timeline reports them), plus ``held_s``,
        ``queue_after_interruption_s``, ``productive_retrospective_s``, ``slow_step_s`` (committed) and
        ``slow_step_retrospective_s`` (the slow-step time inside productive), ``fault_free_step_s``,
        ``n_failures``, ``n_preemptions``, ``n_checkpoints``, ``executed_steps`` and ``slowdown_s``
        (the compute time ``slowdowns`` added to retained steady steps below the stall bound, committed
        or not).

    Raises
    ------
    DomainError
        On arguments outside their domain, or a warm-up too small to detect.
    """
    if isinstance(n_steps, bool) or int(n_steps) != n_steps or n_steps < 1:
        raise DomainError(f"n_steps must be a positive integer; got {n_steps!r}")
    n_steps = int(n_steps)
    most = current_limits().max_steps
    if n_steps > most:
        raise DomainError(f"n_steps {n_steps:,} is more than the {most:,} steps allowed "
                          "(limit max_steps; raise it with --limit max_steps=N)")
    step_s = check_positive("step_s", step_s)
    lam_f = check_nonnegative("failure_rate_per_h", failure_rate_per_h) / 3600.0
    lam_p = check_nonnegative("preemption_rate_per_h", preemption_rate_per_h) / 3600.0
    every = int(check_positive("checkpoint_every_steps", checkpoint_every_steps))
    write_s = check_nonnegative("checkpoint_write_s", checkpoint_write_s)
    stage_s = check_nonnegative("checkpoint_stage_s", checkpoint_stage_s)
    iw_prob = check_fraction("input_wait_prob", input_wait_prob)
    iw_mean = 0.2 * step_s if input_wait_mean_s is None else check_positive("input_wait_mean_s",
                                                                            input_wait_mean_s)
    tol = check_nonnegative("warmup_tolerance", warmup_tolerance)
    jitter = check_nonnegative("step_jitter", step_jitter)
    if jitter >= max(tol, 1e-12) or jitter >= 1.0:
        raise DomainError(f"step_jitter {jitter!r} must be below warmup_tolerance {tol!r} (and 1): larger "
                          "jitter would make steady-state steps look like warm-up")
    n_warm = int(check_nonnegative("warmup_steps", warmup_steps))
    excess = check_nonnegative("warmup_excess", warmup_excess)
    if n_warm and excess / n_warm <= tol + jitter:
        raise DomainError(f"the smallest warm-up excess {excess / n_warm!r} must exceed warmup_tolerance + "
                          f"step_jitter = {tol + jitter!r}, or the measurement cannot see the warm-up")
    for name, value in (("startup_s", startup_s), ("detect_s", detect_s),
                        ("failure_restart_s", failure_restart_s), ("preemption_drain_s", preemption_drain_s),
                        ("preemption_queue_s", preemption_queue_s),
                        ("preemption_restart_s", preemption_restart_s), ("eval_s", eval_s),
                        ("hang_s", hang_s)):
        check_nonnegative(name, value)
    if failure_requeue_s is not None:
        check_nonnegative("failure_requeue_s", failure_requeue_s)
    eval_every = int(check_nonnegative("eval_every_steps", eval_every_steps))
    shifts = []
    for shift in slowdowns:
        first, end, factor = shift
        if int(first) != first or first < 0 or (end is not None and (int(end) != end or end <= first)):
            raise DomainError(f"a slowdown is (first step, end step or None, factor) with 0 <= first < end; "
                              f"got {shift!r}")
        shifts.append((int(first), n_steps if end is None else int(end), check_positive("slowdown factor",
                                                                                      factor)))
    if async_checkpoint and write_s < stage_s:
        raise DomainError(f"checkpoint_write_s {write_s!r} must be at least checkpoint_stage_s {stage_s!r}: "
                          "the staging pause is part of the write")
    if async_checkpoint and write_s >= every * step_s:
        raise DomainError("an asynchronous checkpoint write must finish within one checkpoint interval: "
                          f"checkpoint_write_s {write_s!r} >= checkpoint_every_steps x step_s")
    origin = pd.Timestamp(start)
    if origin.tzinfo is None:
        raise DomainError(f"start must be timezone-aware; got {start!r}")
    origin_ns = int(origin.tz_convert("UTC").as_unit("ns").value)

    rng = np.random.default_rng(seed)
    lam = lam_f + lam_p
    step_ns, write_ns, stage_ns, eval_ns = _ns(step_s), _ns(write_s), _ns(stage_s), _ns(eval_s)

    ev_att: list[int] = []
    ev_t: list[int] = []
    ev_kind: list[str] = []
    ev_step: list[float] = []
    # (attempt, time, kind, step, duration_s) column blocks
    arr_events: list[tuple[np.ndarray, np.ndarray, str, np.ndarray, np.ndarray]] = []
    ex: dict[str, list[np.ndarray]] = {k: [] for k in ("step", "start", "end", "wait", "comp", "base", "att",
                                                        "run", "trigger", "erased")}
    truth_ns = dict.fromkeys(("startup_launch", "checkpoint", "evaluation", "recovery", "rework_partial",
                              "preemption_gap", "idle", "queue"), 0)
    commits_t: list[np.ndarray] = []
    commits_s: list[np.ndarray] = []
    n_fail = n_pre = 0

    def event(att: int, t: int, kind: str, step: float = math.nan) -> None:
        ev_att.append(att)
        ev_t.append(t)
        ev_kind.append(kind)
        ev_step.append(step)

    attempt = 0
    durable = -1  # step of the last commit that landed before the current segment
    finished_early = False
    event(attempt, 0, "gang_complete")
    t = _ns(startup_s)
    truth_ns["startup_launch"] += t
    p = 0
    run = 0
    trigger = _COLD
    while True:
        seg_start = t
        if p < n_steps:
            event(attempt, t, "first_step")
        t_int = seg_start + _ns(rng.exponential(1.0 / lam)) if lam > 0 else None
        j = 0  # steps run in this segment
        seg_first_chunk = len(ex["step"])
        seg_commit_first = len(commits_t)
        interrupted = False
        while p < n_steps:
            # size the chunk to reach the (already drawn) interruption: steps never run faster than step_s
            k_count = n_steps - p if t_int is None else \
                min(n_steps - p, max(256, int(1.02 * (t_int - t) / step_ns) + 64))
            k = p + np.arange(k_count, dtype=np.int64)
            jj = j + np.arange(k_count, dtype=np.int64)
            warm = jj < n_warm
            mult = np.where(warm, 1.0 + excess * (n_warm - jj) / max(n_warm, 1),
                            1.0 + jitter * rng.uniform(-1.0, 1.0, k_count))
            base = np.rint(step_s * mult * _NS).astype(np.int64)
            for first, end, factor in shifts:
                mult = np.where((k >= first) & (k < end), mult * factor, mult)
            comp = np.rint(step_s * mult * _NS).astype(np.int64)
            waits = rng.random(k_count) < iw_prob
            wait = np.where(waits, np.rint(rng.exponential(iw_mean, k_count) * _NS), 0).astype(np.int64)
            dur = comp + wait
            last = k == n_steps - 1
            is_ck = ((k + 1) % every == 0) | (last & final_checkpoint)
            ck_pause = np.where(is_ck, np.where(async_checkpoint & ~last, stage_ns, write_ns), 0)
            is_ev = ((k + 1) % eval_every == 0) if eval_every else np.zeros(k_count, bool)
            ev_pause = np.where(is_ev, eval_ns, 0)
            block = dur + ck_pause + ev_pause
            block_end = t + np.cumsum(block)
            s0 = block_end - block
            s1 = s0 + dur
            ck_t = s1[is_ck]
            ck_commit = ck_t + write_ns
            ev_b = (s1 + ck_pause)[is_ev]
            ev_e = ev_b + eval_ns
            cut = k_count
            if t_int is not None and t_int < block_end[-1]:
                cut = int(np.searchsorted(block_end, t_int, side="right"))  # block `cut` is interrupted
                interrupted = True
            n_done = cut
            if interrupted and cut < k_count and t_int >= s1[cut]:
                n_done = cut + 1  # the step itself finished; a pause after it was cut
            sl = slice(0, n_done)
            ex["step"].append(k[sl])
            ex["start"].append(s0[sl])
            ex["end"].append(s1[sl])
            ex["wait"].append(wait[sl])
            ex["comp"].append(comp[sl])
            ex["base"].append(base[sl])
            ex["att"].append(np.full(n_done, attempt, dtype=np.int64))
            ex["run"].append(np.full(n_done, run, dtype=np.int64))
            ex["trigger"].append(np.full(n_done, trigger, dtype=np.int64))
            ex["erased"].append(np.full(n_done, -1, dtype=np.int64))
            limit = t_int if interrupted else np.iinfo(np.int64).max
            # pauses: completed ones whole, the interrupted one up to the interruption
            ck_end = ck_t + np.where(async_checkpoint & ~last[is_ck], stage_ns, write_ns)
            truth_ns["checkpoint"] += int(np.clip(np.minimum(ck_end, limit) - ck_t, 0, None).sum())
            truth_ns["evaluation"] += int(np.clip(np.minimum(ev_e, limit) - ev_b, 0, None).sum())
            keep_b = ck_t <= limit
            arr_events.append((np.full(int(keep_b.sum()), attempt), ck_t[keep_b], "checkpoint_begin",
                               k[is_ck][keep_b].astype(float), (ck_end - ck_t)[keep_b] / _NS))
            commits_t.append(ck_commit)
            commits_s.append(k[is_ck])
            keep_e = ev_b <= limit
            arr_events.append((np.full(int(keep_e.sum()), attempt), ev_b[keep_e], "eval_begin",
                               np.full(int(keep_e.sum()), np.nan), np.full(int(keep_e.sum()), np.nan)))
            keep_e = ev_e <= limit
            arr_events.append((np.full(int(keep_e.sum()), attempt), ev_e[keep_e], "eval_end",
                               np.full(int(keep_e.sum()), np.nan), np.full(int(keep_e.sum()), np.nan)))
            if interrupted:
                if cut < k_count and t_int < s1[cut]:
                    partial = t_int - s0[cut]
                else:
                    partial = 0
                break
            t = int(block_end[-1])
            p += k_count
            j += k_count
        if not interrupted:
            break
        # ---- interruption at t_int -----------------------------------------------------------------
        assert t_int is not None
        # commits of this segment land only if before the interruption
        seg_ct = np.concatenate(commits_t[seg_commit_first:]) if len(commits_t) > seg_commit_first else \
            np.zeros(0, np.int64)
        seg_cs = np.concatenate(commits_s[seg_commit_first:]) if len(commits_s) > seg_commit_first else \
            np.zeros(0, np.int64)
        landed = seg_ct <= t_int
        commits_t[seg_commit_first:] = [seg_ct[landed]]
        commits_s[seg_commit_first:] = [seg_cs[landed]]
        # the last durable commit: this segment's latest landed one, else the one before the segment
        rollback = int(seg_cs[landed][np.argmax(seg_ct[landed])]) if landed.any() else durable
        kind = _FAIL if rng.random() < lam_f / lam else _PRE
        if rollback == n_steps - 1:
            # every step is already durable: the job is done and simply stops here
            n_fail += kind == _FAIL
            n_pre += kind == _PRE
            event(attempt, t_int, "failure" if kind == _FAIL else "preempt")
            t = t_int
            finished_early = True
            break
        # erase this segment's steps after the rollback point
        for c in range(seg_first_chunk, len(ex["step"])):
            ex["erased"][c] = np.where(ex["step"][c] > rollback, kind, -1)
        if kind == _FAIL:
            n_fail += 1
            truth_ns["rework_partial"] += int(partial)
            event(attempt, t_int, "failure")
            det = t_int + _ns(detect_s)
            event(attempt, det, "failure_detected")
            truth_ns["recovery"] += det - t_int
            if failure_requeue_s is None:
                t = det + _ns(failure_restart_s)
            else:
                event(attempt, det, "release")
                attempt += 1
                gang = det + _ns(failure_requeue_s)
                truth_ns["queue"] += gang - det
                event(attempt, gang, "gang_complete")
                t = gang + _ns(failure_restart_s)
            truth_ns["recovery"] += _ns(failure_restart_s)
        else:
            n_pre += 1
            truth_ns["preemption_gap"] += int(partial)
            event(attempt, t_int, "preempt")
            rel = t_int + _ns(preemption_drain_s)
            event(attempt, rel, "release")
            attempt += 1
            gang = rel + _ns(preemption_queue_s)
            truth_ns["queue"] += gang - rel
            event(attempt, gang, "gang_complete")
            t = gang + _ns(preemption_restart_s)
            truth_ns["preemption_gap"] += (rel - t_int) + (t - gang)
        event(attempt, t, "restore", float(rollback) if rollback >= 0 else math.nan)
        durable = rollback
        p = rollback + 1
        run += 1
        trigger = kind
    end_t = t
    if not finished_early:
        # the job waits for an asynchronous write still in flight (held, no progress: idle)
        all_ct = np.concatenate(commits_t) if commits_t else np.zeros(0, np.int64)
        if all_ct.size and int(all_ct.max()) > end_t:
            truth_ns["idle"] += int(all_ct.max()) - end_t
            end_t = int(all_ct.max())
    if hang_s > 0 and not finished_early:
        event(attempt, end_t, "hang_begin")
        truth_ns["idle"] += _ns(hang_s)
        end_t += _ns(hang_s)
    event(attempt, end_t, "release")

    # ---- tables --------------------------------------------------------------------------------------
    cat = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in ex.items()}
    steps = pd.DataFrame({
        "job_id": pd.Categorical.from_codes(np.zeros(cat["step"].size, np.int8), categories=[job_id]),
        "attempt": cat["att"],
        "step": cat["step"],
        "start": _utc(origin_ns + cat["start"]),
        "end": _utc(origin_ns + cat["end"]),
        "input_wait_s": cat["wait"] / _NS,
    })
    ct = np.concatenate(commits_t) if commits_t else np.zeros(0, np.int64)
    cs = np.concatenate(commits_s) if commits_s else np.zeros(0, np.int64)
    c_att = _attempt_at(ct, ev_t, ev_kind, ev_att)
    arr_events.append((c_att, ct, "checkpoint_commit", cs.astype(float), np.full(ct.size, np.nan)))
    e_att = np.concatenate([np.asarray(ev_att, np.int64)] + [a[0].astype(np.int64) for a in arr_events])
    e_t = np.concatenate([np.asarray(ev_t, np.int64)] + [a[1].astype(np.int64) for a in arr_events])
    e_kind = np.concatenate([np.asarray(ev_kind, dtype=object)]
                            + [np.full(a[1].size, a[2], dtype=object) for a in arr_events])
    e_step = np.concatenate([np.asarray(ev_step, float)] + [a[3] for a in arr_events])
    e_dur = np.concatenate([np.full(len(ev_t), np.nan)] + [a[4] for a in arr_events])
    prio = np.array([_KIND_ORDER[k] for k in e_kind], dtype=np.int64) if e_kind.size else np.zeros(0, int)
    order = np.lexsort((prio, e_t))
    events = pd.DataFrame({
        "job_id": pd.Categorical.from_codes(np.zeros(order.size, np.int8), categories=[job_id]),
        "attempt": e_att[order],
        "time": _utc(origin_ns + e_t[order]),
        "kind": pd.Series(e_kind[order], dtype="str"),
        "step": pd.Series(e_step[order]).astype("Int64"),
        "duration_s": pd.Series(e_dur[order]).astype("Float64"),
    })

    # ---- truth ---------------------------------------------------------------------------------------
    dur = cat["end"] - cat["start"]
    keep = cat["erased"] < 0
    run_start = np.concatenate([[True], cat["run"][1:] != cat["run"][:-1]]) if dur.size else np.zeros(0, bool)
    comp = dur - cat["wait"]  # warm-up is judged on compute time (an input wait is an input wait)
    slow = comp > step_ns * (1.0 + tol)
    idx = np.arange(dur.size)
    starts = np.flatnonzero(run_start)
    first_fast = np.minimum.reduceat(np.where(slow, dur.size, idx), starts) if dur.size else np.zeros(0, int)
    warm_truth = idx < first_fast[np.cumsum(run_start) - 1] if dur.size else np.zeros(0, bool)
    wk = keep & warm_truth
    steady = keep & ~warm_truth
    warm_excess = np.where(wk, comp - step_ns, 0)
    trig = cat["trigger"]
    last_commit = int(cs.max()) if cs.size else -1
    # the clean-end rule (fleetlib.runtime.goodput, "Clean end"): a job whose release follows its last
    # step with no interruption between has retained every step it kept
    committed = keep if clean_end_commit and not finished_early else keep & (cat["step"] <= last_commit)
    stalled = steady & (comp > stall_factor * step_ns)
    slow_ns = np.where(steady & ~stalled, comp - step_ns, 0)
    slow_truth = {"slow_step_s": float(slow_ns[committed].sum()) / _NS,
                  "slow_step_retrospective_s": float(slow_ns.sum()) / _NS}
    truth = {
        "productive": (committed.sum() * step_ns + int(slow_ns[committed].sum())) / _NS,
        "progress_at_risk": ((keep & ~committed).sum() * step_ns
                             + int(slow_ns[keep & ~committed].sum())) / _NS,
        "startup": (truth_ns["startup_launch"] + int(warm_excess[trig == _COLD].sum())) / _NS,
        "input_wait": float(cat["wait"][keep].sum()) / _NS,
        "checkpoint": truth_ns["checkpoint"] / _NS,
        "recovery": (truth_ns["recovery"] + int(warm_excess[trig == _FAIL].sum())) / _NS,
        "rework": (truth_ns["rework_partial"] + int(dur[cat["erased"] == _FAIL].sum())) / _NS,
        "preemption": (truth_ns["preemption_gap"] + int(warm_excess[trig == _PRE].sum())
                       + int(dur[cat["erased"] == _PRE].sum())) / _NS,
        "elastic_wait": 0.0,  # the generator writes no resizes
        "elastic_reinit": 0.0,
        "evaluation": truth_ns["evaluation"] / _NS,
        "stall": float((comp - step_ns)[stalled].sum()) / _NS,
        "idle": truth_ns["idle"] / _NS,
        "unattributed": 0.0,
    }
    assert tuple(truth) == CATEGORIES
    gang_t = np.asarray(ev_t)[np.asarray(ev_kind) == "gang_complete"]
    rel_t = np.asarray(ev_t)[np.asarray(ev_kind) == "release"]
    truth.update({
        "held_s": float((rel_t - gang_t).sum()) / _NS,
        "queue_after_interruption_s": truth_ns["queue"] / _NS,
        "productive_retrospective_s": (keep.sum() * step_ns + int(slow_ns.sum())) / _NS,
        **slow_truth,
        "fault_free_step_s": step_ns / _NS,
        "n_failures": float(n_fail),
        "n_preemptions": float(n_pre),
        "n_checkpoints": float(ct.size),
        "executed_steps": float(dur.size),
        "slowdown_s": float((comp - cat["base"])[steady & ~stalled].sum()) / _NS,
    })
    return steps, events, {k: float(v) for k, v in truth.items()}


def _utc(ns: np.ndarray) -> pd.Series:
    return pd.Series(np.asarray(ns, dtype=np.int64).view("datetime64[ns]")).dt.tz_localize("UTC")


def _attempt_at(times: np.ndarray, ev_t: list[int], ev_kind: list[str], ev_att: list[int]) -> np.ndarray:
    gang = np.asarray([t for t, k in zip(ev_t, ev_kind, strict=True) if k == "gang_complete"], np.int64)
    atts = np.asarray([a for a, k in zip(ev_att, ev_kind, strict=True) if k == "gang_complete"], np.int64)
    return atts[np.clip(np.searchsorted(gang, times, side="right") - 1, 0, None)]


# ---------------------------------------------------------------------------------------------------
# One-file Parquet layout
# ---------------------------------------------------------------------------------------------------


def write_timeline(steps: pd.DataFrame, events: pd.DataFrame, path: str | Path) -> Path:
    """Write a canonical timeline to one Parquet file (steps and events row-stacked).

    The tables are validated first, so a file written here always reads back.  Text columns are
    dictionary-encoded, so ten million step rows stay small and fast to read.

    Parameters
    ----------
    steps, events
        Canonical tables.
    path
        Output file (``.parquet``); parent directories are created.

    Returns
    -------
    pathlib.Path
        The path written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    steps, events, _ = validate_timeline(steps, events, source=str(path))
    n_s, n_e = len(steps), len(events)
    ts_type = pa.timestamp("ns", tz="UTC")

    def text(values: pd.Series) -> pa.Array:
        if not isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype("str")
        codes, uniques = pd.factorize(values)
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                              pa.array([str(u) for u in uniques], pa.string()))

    def times(values: pd.Series) -> pa.Array:
        return pa.array(values.dt.as_unit("ns").array.asi8, pa.int64()).cast(ts_type)

    def stack(a: pa.Array, b: pa.Array) -> pa.ChunkedArray:
        return pa.chunked_array([a, b])

    record = pa.DictionaryArray.from_arrays(
        pa.array(np.concatenate([np.zeros(n_s, np.int32), np.ones(n_e, np.int32)])),
        pa.array(["step", "event"]))
    job = pa.chunked_array([text(steps["job_id"]), text(events["job_id"])]).unify_dictionaries() \
        if n_s + n_e else pa.chunked_array([], pa.dictionary(pa.int32(), pa.string()))
    step_ev = events["step"].astype("Float64")
    dur_ev = events["duration_s"].astype("Float64").to_numpy(np.float64, na_value=np.nan)
    table = pa.table({
        "record": record,
        "job_id": pa.concat_arrays(job.chunks) if job.num_chunks else pa.array([], pa.dictionary(
            pa.int32(), pa.string())),
        "attempt": stack(pa.array(steps["attempt"].to_numpy(np.int64)),
                         pa.array(events["attempt"].to_numpy(np.int64))),
        "step": stack(pa.array(steps["step"].to_numpy(np.int64)),
                      pa.array(step_ev.to_numpy(np.float64, na_value=np.nan), pa.float64(),
                               mask=step_ev.isna().to_numpy()).cast(pa.int64())),
        "start": stack(times(steps["start"]), pa.nulls(n_e, ts_type)),
        "end": stack(times(steps["end"]), pa.nulls(n_e, ts_type)),
        "input_wait_s": stack(pa.array(steps["input_wait_s"].to_numpy(np.float64)),
                              pa.nulls(n_e, pa.float64())),
        "time": stack(pa.nulls(n_s, ts_type), times(events["time"])),
        "kind": stack(pa.nulls(n_s, pa.string()),
                      pa.array(events["kind"].astype("str").tolist(), pa.string())),
        "duration_s": stack(pa.nulls(n_s, pa.float64()),
                            pa.array(dur_ev, pa.float64(), mask=np.isnan(dur_ev))),
    })
    for col in DEVICE_COLUMNS:  # an elastic job's device counts, when its events log them
        if col in events.columns:
            v = pd.to_numeric(events[col], errors="coerce").astype("Float64")
            counts = pa.array(v.to_numpy(np.float64, na_value=np.nan), pa.float64(), mask=v.isna().to_numpy())
            table = table.append_column(col, stack(pa.nulls(n_s, pa.int64()), counts.cast(pa.int64())))
    table = table.replace_schema_metadata({b"fleetlib.timeline": b"1"})
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # sorted integers and timestamps delta-encode to a fraction of their size and decode fast
    delta = dict.fromkeys(("attempt", "step", "start", "end", "time"), "DELTA_BINARY_PACKED")
    pq.write_table(table, out, compression="zstd", use_dictionary=["record", "job_id", "kind"],
                   column_encoding=delta)
    return out


# ---------------------------------------------------------------------------------------------------
# Command-line logic (the argparse glue lives in fleetlib.cli)
# ---------------------------------------------------------------------------------------------------


def synth_timeline_file(n_steps: int, *, seed: int, out: str | Path, **options: Any) -> dict[str, Any]:
    """Generate a synthetic timeline and write it to one Parquet file (``fleetlib synth timeline``).

    Parameters
    ----------
    n_steps, seed
        As in :func:`synth_timeline`.
    out
        Output Parquet path.
    **options
        Any other keyword argument of :func:`synth_timeline`.

    Returns
    -------
    dict
        JSON-ready: ``path``, ``steps`` and ``events`` (row counts), ``seed`` and ``truth`` (the
        injected seconds per category, see :func:`synth_timeline`).
    """
    steps, events, truth = synth_timeline(n_steps, seed=seed, **options)
    path = write_timeline(steps, events, out)
    return {"path": str(path), "steps": len(steps), "events": len(events), "seed": seed, "truth": truth}
