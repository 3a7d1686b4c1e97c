"""Measured runtime goodput: an exact partition of held time, read from a job timeline.

Runtime goodput ``R`` is productive time over held time.  Held time runs from each attempt's
``gang_complete`` to its ``release``; the queue wait between an eviction and the next gang completion
is *not* held time (it is reported as ``queue_after_interruption_s``, a time-to-result cost).
Productive time is the retained steps' compute time: their wall time less input waits, with the
warm-up excess after a (re)start charged to what caused it.  Every other held second is charged to
exactly one category, so the categories add up to held time exactly (a floating-point rounding apart)
-- there is no clipping and no remainder computed by subtraction:

==========================  ========================================================================
category                    held time charged to it
==========================  ========================================================================
productive                  compute time of each retained step (fault-free step time for a warm-up
                            or stalled step), including its slow-step time -- see below
progress_at_risk            (committed definition only) the same for steps that finished and were not
                            erased but whose checkpoint had not landed by ``as_of``
startup                     cold launches: gang completion to first step, plus the warm-up excess of
                            the first steps after a cold launch
input_wait                  input waits of retained steps (warm-up steps included)
checkpoint                  synchronous checkpoint pauses (for an asynchronous checkpoint, its
                            staging pause; the background write is program loss)
recovery                    failures: detection (fault -> detected), relaunch and reload up to the
                            first step after the restart, and the warm-up excess after it
rework                      failures: steps the restart erased (after the last durable commit),
                            plus the partial step cut off by the fault
preemption                  evictions: erased steps, the partial step, held time from the eviction to
                            release and from readmission to the first step, and the warm-up excess
evaluation                  evaluation pauses
stall                       retained steps longer than the stall bound (``stall_factor``, default 5x
                            the fault-free step time): their compute time above the baseline -- the
                            job held the gang without progressing
idle                        held with no progress: after ``hang_begin`` / ``idle_begin`` markers, and
                            after an attempt's last progress until its release (teardown, zombie)
unattributed                held time between steps that no event explains -- shown, never clipped
==========================  ========================================================================

**Fault-free step time.**  Given by the caller, or estimated from the job's *step series*
(:mod:`fleetlib.runtime.slowdown`): the *compute* time (duration minus input wait) of its steady
steps in order -- kept, past warm-up, not stalled, leaving out the first step after every
(re)start, where compilation and cache warm-up land -- cut into regimes at its level shifts
(:mod:`fleetlib.regimes`: PELT change points, shifts of at least 5 %).  The estimate is the median
(``estimator="median"``, the default) or mean of the healthy regime: the fastest sustained one the
job starts in or returns to.  A slow-down that starts mid-job therefore stays above the baseline
instead of becoming it.  Warm-up and stalls are judged first against the median compute time of the
steps but each run's first (a job with no steady step keeps that as its estimate).

**Warm-up.**  After each (re)start, the leading run of steps whose *compute* time (duration less input
wait) exceeds ``(1 + warmup_tolerance)`` times the fault-free step time is warm-up: each such step's
fault-free part is productive, its input wait is ``input_wait`` (an input wait is an input wait in
every step, issue 16) and its compute excess is charged to the event that triggered the restart (rule
18; startup after a cold launch).  The run ends at the first step within tolerance.

**Stalls.**  A retained steady step whose compute time exceeds ``stall_factor`` (default 5) times the
fault-free step time is a stall: the job held the gang without progressing, so its time above the
baseline is the runtime loss ``stall`` (its fault-free part stays productive).  Below the bound, time
above the baseline is slow-step time (next paragraph).

**Clean end** (the one clean-end rule; :data:`fleetlib.runtime.schema.CLEAN_END_RULE` says it in one
sentence).  A job's *end markers* are its last attempt's recorded ``release``, its ``job_completed``
events (ml-goodput-measurement's ``job_end_time``) and, where a scheduler's records are joined (the
fleet walk), the time the scheduler recorded the job ``COMPLETED``.  The job *ended cleanly* at the
first end marker at or after its last step (and its last attempt's gang completion) with no
``failure`` or ``preempt`` between that step and the marker.  With ``clean_end_commit=True`` (the
default) that clean end is the job's final commit: a job that ended has retained its result, so a
finished job's committed productive time equals its retrospective one and nothing is left as progress
at risk.  A job whose last step is followed by an interruption did not end cleanly: its steps after
the last checkpoint stay progress at risk (or are erased by a restart).  The rule is applied once, by
the per-job kernel (:mod:`fleetlib.runtime.partition`), whatever reads the markers: every command,
page and the fleet walk go through it.  The chapter's closing rule still holds for windows that close
before the clean end.  ``clean_end_commit=False`` (``--no-clean-end-commit``) judges committed steps by
checkpoint commits alone.  A clean end that retains steps no checkpoint covered is flagged
``clean_end_commit`` (committed definition).

**Slow-step time: the program handoff ("The walk").**  A retained steady-state step that runs slower
than the fault-free baseline is a *program* loss, not a runtime one: the timeline detects it, the step
traces explain it (chapter Table 3, rule 17).  So its whole compute time is productive here -- R's
numerator is P's denominator -- and the part above (or, negative, below) the baseline is reported
beside R as ``slow_step_s`` (``breakdown["slow_step"]``; the part inside progress at risk is
``breakdown["slow_step_at_risk"]``), the slow-step time handed to the program rung.  It is zero on
average when the baseline is the mean of steady-state steps (``estimator="mean"``) and exactly zero
when every steady step runs at the baseline.

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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from fleetlib._io import excerpt
from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, InputError, Ledger, check_nonnegative
from fleetlib.runtime._provenance import relocate_error, relocate_ledger
from fleetlib.runtime.elastic import device_series, slice_efficiency
from fleetlib.runtime.schema import (
    BREAKDOWN,
    CATEGORIES,
    CLEAN_END_RULE,
    DEFINITION_TEXT,
    HELD_INTERVAL_COLUMNS,
    ISSUE_TERMS,
    NO_TIME,
    REPLICA_PHASES,
    STALL_FACTOR,
    TIME_DTYPE,
    check_definition,
)
from fleetlib.runtime.timeline import prepare_tables, provenances

if TYPE_CHECKING:
    from fleetlib.runtime.partition import JobParts, WindowSums
    from fleetlib.runtime.slowdown import StepRegimes

#: The fine parts of held time, in the kernel's label order (:data:`fleetlib.runtime.partition.FINE`).
FINE: tuple[str, ...] = tuple(BREAKDOWN)
_FINE_INDEX = {name: i for i, name in enumerate(FINE)}

__all__ = [
    "ReplicaGoodput",
    "RuntimeMeasurement",
    "held_intervals",
    "replica_runtime_goodput",
    "runtime_goodput",
    "runtime_goodput_windows",
    "runtime_summary",
    "summary_of",
]

Definition = Literal["committed", "retrospective"]

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
        One row per job: held time, each category, fault-free step time and ``clean_end`` (the job
        ended cleanly by the clean-end rule and that end counted as its final commit).
    ledger
        Row accounting and interpretive flags.  Measured from tables: the rows of the canonical
        tables.  Measured by :func:`fleetlib.runtime.measure.measure` from files: the reader's
        records, with the measurement's flags added.
    table_ledger
        When ``ledger`` is a reader's, the measurement's own accounting of the canonical rows it
        validated (None otherwise).
    stall_factor, clean_end_commit
        The stall bound used and whether a clean job end counted as the final commit.
    checkpoints_recorded
        Checkpoint commits the timeline records (whole timeline, every selected job): 0 means only a
        clean end can retain work under the committed definition.
    exclusions
        Stretches ``[a, b)`` of the window left out of every sum (:attr:`window` carries them): each
        part is the sum of its clipped sums over the included pieces.
    change_points
        One row per level shift of a job's step series that starts inside the window, outside its
        exclusions (:meth:`fleetlib.runtime.slowdown.StepRegimes.change_points`: job, attempt, step,
        time, compute time before and after, seconds).
    regimes
        Every job's regimes over its whole timeline (:meth:`fleetlib.runtime.slowdown.StepRegimes.regimes`),
        the healthy one marked: its level is the job's estimated fault-free step time.
    step_regimes
        The step series behind them (:meth:`step_series` reads it).
    device_series
        Elastic jobs' device counts over time (:func:`fleetlib.runtime.elastic.device_series`; empty
        when no job logs them).
    stepping_slice_efficiency, available_slice_efficiency
        ml-goodput-measurement's time-weighted slice efficiencies of the jobs that log device counts,
        over the window less its exclusions (None when none does): devices stepping (held) over the
        most devices held (:func:`fleetlib.runtime.elastic.slice_efficiency`).
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
    ledger: Ledger = field(repr=False)
    table_ledger: Ledger | None = field(default=None, repr=False)
    stall_factor: float = STALL_FACTOR
    clean_end_commit: bool = True
    checkpoints_recorded: int = 0
    exclusions: tuple[tuple[pd.Timestamp, pd.Timestamp], ...] = ()
    change_points: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    regimes: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    step_regimes: StepRegimes | None = field(default=None, repr=False)
    device_series: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    stepping_slice_efficiency: float | None = None
    available_slice_efficiency: float | None = None

    @property
    def window(self) -> Window:
        """The measured window ``[window_start, window_end)``, with its exclusions."""
        win = Window.between(self.window_start, self.window_end)
        return win.excluding(self.exclusions) if self.exclusions else win

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
    def slow_step_s(self) -> float:
        """Slow-step time inside ``productive``: retained steps' compute time above the baseline.

        Signed (negative when steps ran faster than a median baseline).  A program loss handed to the
        program rung ("The walk"): the timeline detects it, the step traces explain it.
        """
        return self.breakdown["slow_step"]

    def step_series(self, job_id: str | None = None) -> pd.DataFrame:
        """Return the step series the fault-free step time was read from, with each step's regime.

        Parameters
        ----------
        job_id
            One job; None for every measured job.

        Returns
        -------
        pandas.DataFrame
            :data:`fleetlib.runtime.slowdown.STEP_SERIES_COLUMNS` (one row per steady step of the whole
            timeline; :func:`fleetlib.plots.step_series` draws it).
        """
        if self.step_regimes is None:
            raise DomainError("this measurement kept no step series")
        return self.step_regimes.series(job_id)

    @property
    def slow_step_by_job_s(self) -> dict[str, float]:
        """Slow-step time per job inside the window (the parts of :attr:`slow_step_s`), seconds."""
        return {str(k): float(v) for k, v in self.per_job["slow_step"].items()}

    @property
    def program_handoff_s(self) -> float:
        """The same as :attr:`slow_step_s`: the time this rung hands to the program rung to explain."""
        return self.slow_step_s

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
        """Describe the convention in words: R's definition, the clean-end rule, then the settings.

        R's definition and the clean-end rule are one short sentence each, so a page can print them
        beside R from the factor; the closing rule, fault-free estimator and bounds follow.
        """
        ff = {k: (None if v is None else round(v, 9)) for k, v in self.fault_free_step_s.items()}
        ff_text = (next(iter(ff.values())) if len(ff) == 1 else ff)
        clean = (CLEAN_END_RULE if self.clean_end_commit else
                 "Clean end not counted: only checkpoint commits retain steps (clean_end_commit=False).")
        return (f"R is productive step time (compute, input waits removed) over held time (gang complete "
                f"to release), {self.definition} definition: {DEFINITION_TEXT[self.definition]}. {clean} "
                f"Commits counted as of {self.as_of.isoformat()}; fault-free step time {ff_text} s "
                f"({self.estimator} of steady-state compute time, input wait removed); warm-up tolerance "
                f"{self.warmup_tolerance:g}; stall bound {self.stall_factor:g}x the fault-free step time")

    def to_factor(self) -> Factor:
        """Return :meth:`factor` (the old name, kept)."""
        return self.factor()

    def factor(self) -> Factor:
        """Return the measurement as a fleetlib runtime :class:`~fleetlib.accounting.Factor`.

        The factor's numerator is productive seconds and its denominator held seconds, over the
        measured window.  Its losses are every category except ``productive`` and ``unattributed``
        (which the factor recomputes and which therefore equals this partition's, up to rounding).
        The slow-step time inside the numerator (:attr:`slow_step_s`) is the program rung's to
        explain; the convention states it.

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
        convention = (f"{self.convention()}; productive time includes {self.slow_step_s:.6g} s of "
                      "slow-step time above the fault-free baseline (handed to the program rung)")
        return Factor(boundary="runtime", numerator=self.productive_s, denominator=self.held_s,
                      window=self.window, record="job timeline", convention=convention, numerator_unit="s",
                      denominator_unit="s", losses=losses)

    def to_dict(self) -> dict[str, Any]:
        """Return the measurement as a JSON-ready dictionary (tables as lists of records)."""
        return {
            "runtime_goodput": self.runtime_goodput,
            "definition": self.definition,
            "window": self.window.to_dict(),
            "as_of": self.as_of.isoformat(),
            "held_s": self.held_s,
            "not_held_s": self.not_held_s,
            "queue_after_interruption_s": self.queue_after_interruption_s,
            "categories": dict(self.categories),
            "breakdown": dict(self.breakdown),
            "productive_committed_s": self.productive_committed_s,
            "productive_retrospective_s": self.productive_retrospective_s,
            "progress_at_risk_s": self.progress_at_risk_s,
            "slow_step_s": self.slow_step_s,
            "program_handoff_s": self.program_handoff_s,
            "committed_steps": self.committed_steps,
            "retained_steps": self.retained_steps,
            "fault_free_step_s": dict(self.fault_free_step_s),
            "checkpoint_commits": self.checkpoint_commits,
            "checkpoint_pauses": self.checkpoint_pauses,
            "commit_spacing_s": self.commit_spacing_s,
            "estimator": self.estimator,
            "warmup_tolerance": self.warmup_tolerance,
            "stall_factor": self.stall_factor,
            "clean_end_commit": self.clean_end_commit,
            "checkpoints_recorded": self.checkpoints_recorded,
            "stepping_slice_efficiency": self.stepping_slice_efficiency,
            "available_slice_efficiency": self.available_slice_efficiency,
            "convention": self.convention(),
            "interruptions": _records(self.interruptions),
            "per_job": _records(self.per_job.reset_index()),
            "slow_step_by_job_s": self.slow_step_by_job_s,
            "change_points": self.change_points_by_job(),
            "ledger": self.ledger.to_dict(),
        }

    def change_points_by_job(self) -> dict[str, list[dict[str, Any]]]:
        """Return :attr:`change_points` as ``{job: [{attempt, step, time, before_s, after_s}]}``.

        Every measured job is a key: a job whose step series kept one level in the window has an
        empty list.
        """
        out: dict[str, list[dict[str, Any]]] = {str(j): [] for j in self.per_job.index}
        for row in _records(self.change_points):
            job = str(row.pop("job_id"))
            out.setdefault(job, []).append(row)
        return out


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


def _measured_window(window: Any) -> Window | None:
    """Return the window read by :meth:`fleetlib.accounting.Window.parse` (None: no window)."""
    parsed = Window.parse(window)
    if parsed is None:
        return None
    if parsed.is_nominal:
        raise DomainError("a measured runtime window needs start and end times, not a nominal label")
    return parsed


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
_KIND_NAMES = np.array(["failure", "preempt"])


def _measured_parts(steps: pd.DataFrame, events: pd.DataFrame, *, job_id: str | None, source: str,
                    given: Any, estimator: str, warmup_tolerance: float, stall_factor: float,
                    clean_end_commit: bool, options: Any, completed_at: Mapping[str, Any] | None = None
                    ) -> tuple[JobParts, Ledger, StepRegimes]:
    """Validate the tables, build the parts of each selected job and check the options.

    The errors come in this order: a refused record (the tables', then each job's, in job order),
    then ``options()`` (invalid options), then a job with no valid fault-free step time (in job
    order).  ``given(job)`` returns a job's given fault-free step time (None: estimate it), raising
    for an invalid one.  An estimated fault-free step time is the healthy regime's of the job's step
    series (:mod:`fleetlib.runtime.slowdown`), which is returned too.  The ledger's entries are
    relocated to the files' rows.
    """
    # numba loads on first measurement, not on import
    from fleetlib.runtime.partition import build_parts
    from fleetlib.runtime.slowdown import step_regimes

    median = estimator != "mean"
    tol = warmup_tolerance if _is_number(warmup_tolerance) and warmup_tolerance >= 0 else 0.1
    stall = stall_factor if _is_number(stall_factor) and stall_factor >= 1.0 else STALL_FACTOR
    where = provenances(steps, events, source)
    try:
        t = prepare_tables(steps, events, source=source, build_frames=False)
        codes = t.codes_of(job_id)
        ids = [t.job_ids[c] for c in codes.tolist()]
        ff_given = np.full(codes.size, np.nan)
        ff_error: dict[int, Exception] = {}
        for k, job in enumerate(ids):
            try:
                value = given(job)
            except DomainError as exc:
                ff_error[k] = exc
                continue
            if value is not None:
                ff_given[k] = value
        done = _completed_ns(completed_at, ids) if completed_at is not None and len(completed_at) else None
        parts = build_parts(t, codes, ff_given, median=median, tol=float(tol), stall_factor=float(stall),
                            clean_end_commit=clean_end_commit, completed_ns=done)
    except InputError as err:
        raise relocate_error(err, where) from None
    relocate_ledger(t.ledger, where)
    options()
    if not codes.size:
        raise DomainError("the timeline holds no job")
    regimes = step_regimes(parts, estimator="median" if median else "mean")
    healthy = regimes.baselines()
    estimate = np.isnan(ff_given) & ~np.isnan(healthy)
    if estimate.any():
        parts = replace(parts, fault_free=np.where(estimate, healthy, parts.fault_free))
    n_steps = parts.steps_per_job
    for k in range(codes.size):
        if k in ff_error:
            raise ff_error[k]
        value = float(parts.fault_free[k])
        if np.isnan(ff_given[k]) and n_steps[k] and not value > 0.0:
            raise DomainError(f"the estimated fault-free step time is {value!r} s; steps need a positive "
                              "compute time (duration minus input wait) -- pass fault_free_step_s")
    return parts, t.ledger, regimes


def _completed_ns(completed_at: Mapping[str, Any] | pd.Series, ids: Sequence[str]) -> np.ndarray:
    """Return per job of ``ids`` its scheduler COMPLETED time in UTC nanoseconds (:data:`NO_TIME`: none).

    A Series of timezone-aware times (the fleet walk's, one per job) is converted at once; any other
    mapping value by value, so that a time without a zone is refused as everywhere else.
    """
    ser = completed_at if isinstance(completed_at, pd.Series) else pd.Series(dict(completed_at), dtype=object)
    ser = ser.reindex(pd.Index(ids, dtype=object))
    if not isinstance(ser.dtype, pd.DatetimeTZDtype):
        times = [pd.NaT if v is None or (not isinstance(v, str) and pd.isna(v)) else _ts(v, "completed_at")
                 for v in ser.tolist()]
        ser = pd.Series(times, index=ser.index, dtype=TIME_DTYPE)
    ns = ser.dt.tz_convert("UTC").dt.as_unit("ns")
    missing = ns.isna().to_numpy()
    values = ns.fillna(pd.Timestamp(0, tz="UTC")).astype("int64").to_numpy()
    return np.where(missing, NO_TIME, values).astype(np.int64)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _sequential(values: np.ndarray) -> Any:
    """Return the sum in order, one term after another (a running total over jobs); 0.0 when empty."""
    if values.shape[0] == 0:
        return np.zeros(values.shape[1:]) if values.ndim > 1 else 0.0
    return np.cumsum(values, axis=0)[-1]


def _coarse_columns(fine: np.ndarray) -> dict[str, np.ndarray]:
    """Each category per row: the running sum of its fine parts, in :data:`FINE` order."""
    out = {c: np.zeros(fine.shape[0]) for c in CATEGORIES}
    for i, name in enumerate(FINE):
        out[BREAKDOWN[name]] = out[BREAKDOWN[name]] + fine[:, i]
    return out


def _interruption_rows(parts: JobParts, sums: WindowSums, pieces: list[tuple[int, int]], closed: bool,
                       ids: list[str]) -> pd.DataFrame:
    """One row per interruption of the measured jobs (in job order, then by time) with its window's sums."""
    empty = pd.DataFrame({c: [] for c in _INT_COLUMNS})
    if parts.i_time.size == 0:
        return empty
    n_int = np.diff(parts.i_off)
    origin = np.repeat(parts.origin_ns, n_int)
    m = sums.per_interruption
    det = m[:, _FINE_INDEX["recovery_detection"]]
    restart = m[:, _FINE_INDEX["recovery_restart"]] + m[:, _FINE_INDEX["preemption_restart"]]
    warmup = m[:, _FINE_INDEX["recovery_warmup"]] + m[:, _FINE_INDEX["preemption_warmup"]]
    lost = m[:, _FINE_INDEX["rework_steps"]] + m[:, _FINE_INDEX["preemption_lost_steps"]]
    partial = m[:, _FINE_INDEX["rework_partial_step"]] + m[:, _FINE_INDEX["preemption_partial_step"]]
    restore = parts.i_restore
    t_ns = origin + np.rint(parts.i_time * 1e9).astype(np.int64)
    in_window = np.zeros(parts.i_time.size, dtype=bool)
    for ws_ns, we_ns in pieces:  # the window, or its included pieces
        # the piece in seconds since each interruption's job origin (as the kernel compares them)
        ws = (ws_ns - origin) / 1e9
        we = (we_ns - origin) / 1e9
        in_window |= (parts.i_time >= ws) & ((parts.i_time <= we) if closed else (parts.i_time < we))
    frame = pd.DataFrame({
        "job_id": np.repeat(np.asarray(ids, dtype=object), n_int),
        "time": pd.to_datetime(t_ns, utc=True),
        "kind": _KIND_NAMES[parts.i_kind],
        "inferred": parts.i_inferred,
        "attempt": parts.i_attempt,
        "restore_step": pd.array(np.where(np.isfinite(restore), restore, np.nan), dtype="Float64"),
        "detection_s": det,
        "restart_s": restart,
        "warmup_s": warmup,
        "lost_steps_s": lost,
        "partial_step_s": partial,
        "queue_s": sums.interruption_queue,
        "recovery_s": det + restart + warmup,
        "lost_work_s": lost + partial,
        "in_window": in_window,
    })
    # the first job without interruptions stands for all of them with one empty frame in the
    # concatenation, at its place: its dtypes count in the result's as they always have
    if (n_int == 0).any():
        first = int(np.argmax(n_int == 0))
        cut = int(parts.i_off[first])
        pieces = [p for p in (frame.iloc[:cut], empty, frame.iloc[cut:]) if len(p) or p is empty]
        return pd.concat(pieces, ignore_index=True)
    return frame


def _clean_end_retained(parts: JobParts) -> list[tuple[int, int]]:
    """Return (job position, steps) for each job whose clean end retains steps no checkpoint covered."""
    out = []
    for k in np.flatnonzero(~np.isnan(parts.clean_end)).tolist():
        lo, hi = int(parts.c_off[k]), int(parts.c_off[k + 1])
        at = lo + int(np.argmax(parts.c_clean[lo:hi]))  # the clean end among the commits, in landing order
        before = int(parts.c_reach[at - 1]) if at > lo else 0  # the reach is cumulative
        if int(parts.c_reach[at]) > before:
            out.append((k, int(parts.c_reach[at]) - before))
    return out


def _measure(parts: JobParts, ledger: Ledger, regimes: StepRegimes, *, windows: list[tuple[Any, Any]] | None,
             window: Any, definition: str, fault_free_step_s: Any, estimator: str, warmup_tolerance: float,
             as_of: Any, stall_factor: float = STALL_FACTOR, clean_end_commit: bool = True
             ) -> list[RuntimeMeasurement]:
    """Sum the parts inside each window into a :class:`RuntimeMeasurement` (one per window).

    A window with exclusions is summed over its included pieces, each clipped as a window is
    (:func:`fleetlib.runtime.partition.window_sums_over`); commits are judged as of the whole
    window's end.
    """
    from fleetlib.runtime.partition import window_sums_over

    ids = parts.job_ids
    origin = parts.origin_ns
    if clean_end_commit and definition == "committed":
        for k, extra in _clean_end_retained(parts):
            end = pd.Timestamp(int(origin[k]) + round(float(parts.clean_end[k]) * 1e9), tz="UTC")
            ledger.flag("clean_end_commit", f"job {excerpt(ids[k])} ended cleanly at {end.isoformat()}: the "
                        f"clean end counts as its final commit and retains {extra} step(s) no checkpoint "
                        "covered (clean_end_commit=False turns this off)", job_id=ids[k], time=end)
    span0 = pd.Timestamp(int(origin.min()), tz="UTC")
    span1 = pd.Timestamp(int((origin + np.rint(parts.end_s * 1e9).astype(np.int64)).max()), tz="UTC")
    # the whole timeline (no window given) also counts records at its very end (a final commit, a
    # failure at release); a window [start, end) leaves records at `end` to the next window
    closed = windows is None and window is None
    excluded: tuple[tuple[pd.Timestamp, pd.Timestamp], ...] = ()
    if windows is None:
        win = _measured_window(window)
        if win is None:
            windows = [(span0, span1)]
        else:
            assert win.start is not None and win.end is not None
            windows = [(win.start, win.end)]
            excluded = win.exclusions
            note = win.exclusion_note()
            if note is not None:
                ledger.flag("excluded_time", note)
    est = "given" if fault_free_step_s is not None else estimator
    ff = parts.fault_free
    ff_list = [None if np.isnan(v) else float(v) for v in ff.tolist()]
    ff_column = pd.Series(ff, dtype=float) if not np.isnan(ff).all() else pd.Series(ff_list, dtype=object)
    shifts = regimes.change_points()
    regime_rows = regimes.regimes()
    devices = device_series(parts)
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
        pieces = Window.between(ws_t, we_t).excluding(excluded).pieces if excluded else ((ws_t, we_t),)
        pieces_ns = [(a.as_unit("ns").value, b.as_unit("ns").value) for a, b in pieces]
        s = window_sums_over(parts, pieces_ns, as_of_t.as_unit("ns").value,
                             committed=definition == "committed", closed=closed)
        fine = _sequential(s.fine)
        cats = _coarse_columns(s.fine)
        per_job = pd.DataFrame({"held_s": s.held, **cats, "slow_step": s.fine[:, _FINE_INDEX["slow_step"]],
                                "retained_steps": s.retained_steps, "committed_steps": s.committed_steps},
                               index=pd.Index(ids, name="job_id"))
        per_job["fault_free_step_s"] = ff_column.to_numpy()
        per_job["clean_end"] = ~np.isnan(parts.clean_end)  # NaN throughout with clean_end_commit=False
        total = dict.fromkeys(CATEGORIES, 0.0)
        for i, name in enumerate(FINE):
            total[BREAKDOWN[name]] += float(fine[i])
        stepping_eff, available_eff = slice_efficiency(devices, pieces_ns)
        out.append(RuntimeMeasurement(
            definition=definition, window_start=ws_t, window_end=we_t, as_of=as_of_t,
            held_s=float(_sequential(s.held)), not_held_s=float(_sequential(s.not_held)),
            queue_after_interruption_s=float(_sequential(s.queue)), categories=total,
            breakdown={k: float(fine[i]) for i, k in enumerate(FINE)},
            productive_committed_s=float(_sequential(s.productive_committed)),
            productive_retrospective_s=float(_sequential(s.productive_retrospective)),
            committed_steps=float(_sequential(s.committed_steps)),
            retained_steps=float(_sequential(s.retained_steps)),
            fault_free_step_s=dict(zip(ids, ff_list, strict=True)), estimator=est,
            warmup_tolerance=float(warmup_tolerance), checkpoint_commits=int(s.commits.sum()),
            checkpoint_pauses=int(s.pauses.sum()), stall_factor=float(stall_factor),
            clean_end_commit=clean_end_commit, checkpoints_recorded=int(parts.checkpoints.sum()),
            commit_spacing_s=float(np.median(s.commit_gaps)) if s.commit_gaps.size else None,
            interruptions=_interruption_rows(parts, s, pieces_ns, closed, ids), per_job=per_job,
            ledger=ledger, exclusions=excluded, change_points=_inside(shifts, pieces, closed),
            regimes=regime_rows, step_regimes=regimes, device_series=devices,
            stepping_slice_efficiency=stepping_eff, available_slice_efficiency=available_eff))
    return out


def _inside(shifts: pd.DataFrame, pieces: Sequence[tuple[pd.Timestamp, pd.Timestamp]],
            closed: bool) -> pd.DataFrame:
    """Return the change points whose regime starts inside one of ``pieces``.

    Each piece is ``[a, b)``; the last is closed when ``closed``.
    """
    t = shifts["time"]
    keep = np.zeros(len(shifts), dtype=bool)
    for i, (a, b) in enumerate(pieces):
        last = closed and i == len(pieces) - 1
        keep |= ((t >= a) & ((t <= b) if last else (t < b))).to_numpy()
    return shifts[keep].reset_index(drop=True)


def _options_check(definition: str, estimator: str, warmup_tolerance: float, stall_factor: float) -> Any:
    """Return the check of a measurement's options (run after the timeline's own checks)."""
    def check() -> None:
        _check_options(definition, estimator, warmup_tolerance)
        ok = isinstance(stall_factor, (int, float)) and math.isfinite(stall_factor) and stall_factor >= 1.0
        if not ok:
            raise DomainError(f"stall_factor must be a number >= 1 (fault-free step times); got "
                              f"{stall_factor!r}")
    return check


def _given(fault_free_step_s: float | Mapping[str, float] | None) -> Any:
    def given(job: str) -> float | None:
        return _fault_free_for(job, fault_free_step_s)
    return given


def runtime_goodput(steps: pd.DataFrame, events: pd.DataFrame, *, window: Any = None,
                    definition: Definition = "committed",
                    fault_free_step_s: float | Mapping[str, float] | None = None, job_id: str | None = None,
                    estimator: Literal["median", "mean"] = "median", warmup_tolerance: float = 0.1,
                    as_of: Any = None, source: str = "timeline", stall_factor: float = STALL_FACTOR,
                    clean_end_commit: bool = True,
                    completed_at: Mapping[str, Any] | None = None) -> RuntimeMeasurement:
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
    stall_factor
        The stall bound, in fault-free step times (default :data:`STALL_FACTOR`, 5): a retained
        steady step whose compute time exceeds it is a stall, and its time above the baseline is the
        runtime loss ``stall``; below it, that time is slow-step time (productive, handed to the
        program rung).  Must be >= 1.
    clean_end_commit
        Count a clean job end as the final commit (the module's "Clean end": the first of the last
        attempt's release, a ``job_completed`` event or ``completed_at`` after the last step, with no
        failure or preemption between): a job that ended has retained its result (default True;
        flagged ``clean_end_commit`` in the ledger where it retains steps no checkpoint covered).
        False keeps the strict rule: only recorded checkpoint commits retain steps.
    completed_at
        Job id -> the time a scheduler recorded the job ``COMPLETED`` (its release): one more end
        marker of the clean-end rule (the fleet walk passes its scheduler records' states); None: none.

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
    parts, ledger, regimes = _measured_parts(
        steps, events, job_id=job_id, source=source, given=_given(fault_free_step_s), estimator=estimator,
        warmup_tolerance=warmup_tolerance, stall_factor=stall_factor, clean_end_commit=clean_end_commit,
        options=_options_check(definition, estimator, warmup_tolerance, stall_factor),
        completed_at=completed_at)
    return _measure(parts, ledger, regimes, windows=None, window=window, definition=definition,
                    fault_free_step_s=fault_free_step_s, estimator=estimator,
                    warmup_tolerance=warmup_tolerance, as_of=as_of, stall_factor=stall_factor,
                    clean_end_commit=clean_end_commit)[0]


def runtime_goodput_windows(steps: pd.DataFrame, events: pd.DataFrame, edges: Sequence[Any] | None = None, *,
                            windows: Sequence[tuple[Any, Any]] | None = None,
                            definition: Definition = "committed",
                            fault_free_step_s: float | Mapping[str, float] | None = None,
                            job_id: str | None = None, estimator: Literal["median", "mean"] = "median",
                            warmup_tolerance: float = 0.1, as_of: Any = None,
                            source: str = "timeline", stall_factor: float = STALL_FACTOR,
                            clean_end_commit: bool = True,
                            completed_at: Mapping[str, Any] | None = None) -> list[RuntimeMeasurement]:
    """Measure consecutive windows ``[edges[i], edges[i+1])`` of one timeline, reading it once.

    Rolling or fixed windows for a dashboard: the timeline is validated and partitioned once and
    then clipped to each window.  The fault-free step time is estimated on the whole timeline, so
    every window uses the same baseline.

    Parameters
    ----------
    steps, events
        Canonical timeline tables.
    edges
        At least two increasing timezone-aware times: the windows ``[edges[i], edges[i+1])``.
    windows
        Instead of ``edges``: ``(start, end)`` pairs of timezone-aware times, in order and not
        overlapping (gaps allowed: a window's pieces around excluded time).
    definition, fault_free_step_s, job_id, estimator, warmup_tolerance, source, stall_factor
    clean_end_commit, completed_at
        As in :func:`runtime_goodput`.
    as_of
        As in :func:`runtime_goodput`; None judges each window's commits at its own end.

    Returns
    -------
    list of RuntimeMeasurement
        One per window, in order.
    """
    if (edges is None) == (windows is None):
        raise DomainError("runtime_goodput_windows needs edges or windows (one of them)")
    if edges is not None:
        times = [_ts(e, "window edge") for e in edges]
        if len(times) < 2:
            raise DomainError("runtime_goodput_windows needs at least two edges")
        if any(b <= a for a, b in itertools.pairwise(times)):
            raise DomainError("window edges must increase strictly")
        pairs = list(itertools.pairwise(times))
    else:
        pairs = [(_ts(a, "window start"), _ts(b, "window end")) for a, b in windows]
        if not pairs:
            raise DomainError("runtime_goodput_windows needs at least one window")
        if any(b <= a for a, b in pairs) or any(c < b for (_, b), (c, _) in itertools.pairwise(pairs)):
            raise DomainError("windows must be in order, each ending after it starts, none overlapping")
    parts, ledger, regimes = _measured_parts(
        steps, events, job_id=job_id, source=source, given=_given(fault_free_step_s), estimator=estimator,
        warmup_tolerance=warmup_tolerance, stall_factor=stall_factor, clean_end_commit=clean_end_commit,
        options=_options_check(definition, estimator, warmup_tolerance, stall_factor),
        completed_at=completed_at)
    return _measure(parts, ledger, regimes, windows=pairs, window=None,
                    definition=definition, fault_free_step_s=fault_free_step_s, estimator=estimator,
                    warmup_tolerance=warmup_tolerance, as_of=as_of, stall_factor=stall_factor,
                    clean_end_commit=clean_end_commit)


def runtime_summary(steps: pd.DataFrame, events: pd.DataFrame, *, job_id: str | None = None,
                    window: Any = None, definition: Definition = "committed",
                    fault_free_step_s: float | None = None, source: str = "timeline",
                    stall_factor: float = STALL_FACTOR, clean_end_commit: bool = True) -> dict[str, Any]:
    """Return the CLI object of ``fleetlib runtime ... --json`` for a canonical timeline.

    Parameters
    ----------
    steps, events
        Canonical timeline tables.
    job_id, window, definition, fault_free_step_s, source, stall_factor, clean_end_commit
        As in :func:`runtime_goodput`.

    Returns
    -------
    dict
        ``runtime_goodput`` (None when the window holds no held time), ``held_s``,
        ``productive_s``, ``terms`` (seconds, keys :data:`ISSUE_TERMS`: every held second not
        productive lands in exactly one, so ``productive_s + sum(terms) == held_s``), ``fault_free_step_s``
        (a number for one job, a mapping for several), ``definition`` and ``ledger``; plus
        ``slow_step_s`` = ``program_handoff_s`` (the slow-step time inside ``productive_s``, handed to
        the program rung), ``checkpoints_recorded``, ``clean_end_commit``, ``stall_factor``,
        ``progress_at_risk_s``, ``productive_committed_s``, ``productive_retrospective_s``,
        ``queue_after_interruption_s``, ``not_held_s``, ``window``, ``as_of``, ``convention`` and
        ``interruptions`` (count by kind).
    """
    m = runtime_goodput(steps, events, window=window, definition=definition,
                        fault_free_step_s=fault_free_step_s, job_id=job_id, source=source,
                        stall_factor=stall_factor, clean_end_commit=clean_end_commit)
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
        "slow_step_s": m.slow_step_s,
        "program_handoff_s": m.program_handoff_s,
        "checkpoints_recorded": m.checkpoints_recorded,
        "stepping_slice_efficiency": m.stepping_slice_efficiency,
        "available_slice_efficiency": m.available_slice_efficiency,
        "clean_end_commit": m.clean_end_commit,
        "stall_factor": m.stall_factor,
        "fault_free_step_s": ff,
        "definition": m.definition,
        "ledger": m.ledger.to_dict(),
        "progress_at_risk_s": m.progress_at_risk_s,
        "productive_committed_s": m.productive_committed_s,
        "productive_retrospective_s": m.productive_retrospective_s,
        "queue_after_interruption_s": m.queue_after_interruption_s,
        "not_held_s": m.not_held_s,
        "window": m.window.to_dict(),
        "as_of": m.as_of.isoformat(),
        "convention": m.convention(),
        "interruptions": {str(k): int(v) for k, v in kinds.items()},
        "slow_step_by_job_s": m.slow_step_by_job_s,
        "change_points": m.change_points_by_job(),
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
    given = fault_free_step_s
    parts, _, _ = _measured_parts(steps, events, job_id=job_id, source="timeline", given=lambda job: given,
                               estimator=estimator, warmup_tolerance=tol, stall_factor=STALL_FACTOR,
                               clean_end_commit=True, options=lambda: None)
    return _held_intervals(parts)


def _held_intervals(parts: JobParts) -> pd.DataFrame:
    """Return the labelled stretches of every measured job (see :func:`held_intervals`)."""
    t = parts.tables
    category_of = np.array([BREAKDOWN[f] for f in FINE], dtype=object)
    ids = np.asarray(parts.job_ids, dtype=object)
    codes = parts.codes
    # the steps of the measured jobs (all of them, or one job's slice)
    s_lo, s_hi = t.s_off[codes], t.s_off[codes + 1]
    n_steps = s_hi - s_lo
    ranges = [np.arange(lo, hi) for lo, hi in zip(s_lo.tolist(), s_hi.tolist(), strict=True)]
    step_pos = np.concatenate(ranges) if ranges else np.zeros(0, np.int64)
    step_job = np.repeat(np.arange(codes.size), n_steps)
    local = step_pos - np.repeat(s_lo, n_steps)
    origin = parts.origin_ns
    start = (t.s_start[step_pos] - origin[step_job]) / 1e9
    dur = (t.s_end[step_pos] - t.s_start[step_pos]) / 1e9
    flags = parts.step_flags[step_pos]
    xlab = parts.step_label[step_pos].astype(np.int64)
    kept = (flags & 1) != 0
    # retained by a commit, whenever it landed: the steps before the last commit's cut
    has_commit = np.diff(parts.c_off) > 0
    last_cut = np.zeros(codes.size, dtype=np.int64)
    last_cut[has_commit] = parts.c_cut[parts.c_off[1:][has_commit] - 1]
    label = np.full(step_pos.size, "progress_at_risk", dtype=object)
    label[(local < last_cut[step_job]) & kept] = "productive"
    has_x = xlab >= 0
    label[has_x] = category_of[xlab[has_x]]
    phase = np.full(step_pos.size, "steady", dtype=object)
    phase[has_x] = np.where(kept[has_x], "warm-up", "erased")
    n_gaps = np.diff(parts.g_off)
    n_between = np.maximum(np.diff(parts.a_off) - 1, 0)
    pieces = [
        # per job: its steps, its gaps, its stretches between attempts
        (step_job, start, start + dur, label, np.full(step_pos.size, 0), phase),
        (np.repeat(np.arange(codes.size), n_gaps), parts.g_start, parts.g_end,
         category_of[parts.g_label.astype(np.int64)], np.full(parts.g_start.size, 1),
         np.full(parts.g_start.size, "", dtype=object)),
        (np.repeat(np.arange(codes.size), n_between), parts.b_start, parts.b_end,
         np.full(parts.b_start.size, "not_held", dtype=object), np.full(parts.b_start.size, 2),
         np.full(parts.b_start.size, "", dtype=object)),
    ]
    job = np.concatenate([p[0] for p in pieces])
    kind = np.concatenate([p[4] for p in pieces])
    order = np.lexsort((kind, job))  # job by job: steps, gaps, between (each in its own order)
    job, kind = job[order], kind[order]
    p_start = np.concatenate([p[1] for p in pieces])[order]
    p_end = np.concatenate([p[2] for p in pieces])[order]
    category = np.concatenate([p[3] for p in pieces])[order]
    phase = np.concatenate([p[5] for p in pieces])[order]
    # the attempt each piece starts in; a queue wait between attempts belongs to the attempt it leads to
    attempt = np.zeros(job.size, np.int64)
    bounds = np.searchsorted(job, np.arange(codes.size + 1))
    for k in range(codes.size):
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        gang = parts.a_gang[parts.a_off[k]:parts.a_off[k + 1]]
        number = parts.a_number[parts.a_off[k]:parts.a_off[k + 1]]
        att = number[np.clip(np.searchsorted(gang, p_start[lo:hi], side="right") - 1, 0, None)]
        att[kind[lo:hi] == 2] = number[1:]
        attempt[lo:hi] = att
    o = origin[job]
    start_ns = o + np.round(p_start * 1e9).astype(np.int64)
    end_ns = o + np.round(p_end * 1e9).astype(np.int64)
    # a job with no piece at all leaves its text columns untyped in the concatenation of jobs
    untyped = bool((np.bincount(job, minlength=codes.size) == 0).any())
    frame = pd.DataFrame({
        "job_id": pd.Series(ids[job], dtype="str"),
        "attempt": attempt,
        "start": pd.Series(start_ns.view("datetime64[ns]")).dt.tz_localize("UTC"),
        "end": pd.Series(end_ns.view("datetime64[ns]")).dt.tz_localize("UTC"),
        "category": pd.Series(category, dtype=object if untyped else "str"),
        "record": np.array(["step", "gap", "between"])[kind],
        "phase": pd.Series(phase, dtype=object if untyped else "str"),
    })
    frame["duration_s"] = (frame["end"] - frame["start"]).dt.total_seconds()
    frame = frame[(frame["record"] == "step") | (frame["duration_s"] > 0)]
    if not codes.size:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in HELD_INTERVAL_COLUMNS})
    frame = frame.sort_values(["job_id", "start"], kind="stable", ignore_index=True)
    return frame[list(HELD_INTERVAL_COLUMNS)]


# ---------------------------------------------------------------------------------------------------
# Serving replicas: ready time over held time
# ---------------------------------------------------------------------------------------------------


_NS_PER_S = 1_000_000_000


def _ns(series: pd.Series) -> np.ndarray:
    """UTC times as int64 nanoseconds (NaT becomes the int64 minimum)."""
    naive = pd.Series(series).astype(TIME_DTYPE).dt.tz_convert(None)
    return naive.to_numpy(dtype="datetime64[ns]").view("int64")


@dataclass(frozen=True)
class ReplicaGoodput:
    """Runtime goodput of serving replicas: ready time over held time (held from placement).

    Attributes
    ----------
    held_s
        Held seconds inside the window (placement to release, summed over replicas).
    ready_s
        Seconds in ``ready``.
    terms
        Seconds in each phase (``placed, loading, warmup, ready, draining``): the partition of held.
    unattributed_s
        ``held_s`` minus the sum of the phases (zero up to rounding; shown, never clipped).
    runtime_goodput
        ``ready_s / held_s``, or None when nothing was held in the window.
    by_replica
        One row per replica: held, each phase, and its ready / held.
    window
        The window measured.
    ledger
        The lifecycle log's row accounting, when the result came from
        :func:`fleetlib.runtime.measure.measure` (empty otherwise).
    """

    held_s: float
    ready_s: float
    terms: dict[str, float]
    unattributed_s: float
    runtime_goodput: float | None
    by_replica: pd.DataFrame
    window: Window
    ledger: Ledger = field(default_factory=Ledger, repr=False)

    def to_factor(self) -> Factor:
        """Return :meth:`factor` (the name the timeline measurement also answers to)."""
        return self.factor()

    def factor(self) -> Factor:
        """Return the result as a runtime :class:`~fleetlib.accounting.Factor` (losses = non-ready phases).

        Raises
        ------
        DomainError
            If nothing was held in the window (a factor needs a positive denominator).
        """
        if self.held_s <= 0.0:
            raise DomainError("no replica was held in the window: runtime goodput is undefined there")
        losses = {k: v for k, v in self.terms.items() if k != "ready"}
        return Factor(boundary="runtime", numerator=self.ready_s, denominator=self.held_s, window=self.window,
                      record="replica lifecycle log", convention="serving: ready / held, held from placement",
                      numerator_unit="replica-s", denominator_unit="replica-s", losses=losses)

    def to_dict(self) -> dict[str, Any]:
        """Return the totals as a JSON-ready dictionary."""
        return {"held_s": self.held_s, "ready_s": self.ready_s, "runtime_goodput": self.runtime_goodput,
                "terms": dict(self.terms), "unattributed_s": self.unattributed_s,
                "window": self.window.to_dict()}


def replica_runtime_goodput(phases: pd.DataFrame, *, window: Window | tuple[Any, Any] | None = None,
                            ) -> ReplicaGoodput:
    """Ready time over held time of serving replicas, with the phases as the partition of held time.

    Parameters
    ----------
    phases
        The table :func:`read_replica_lifecycle` returns.
    window
        A measured :class:`~fleetlib.accounting.Window` or a ``(start, end)`` pair of zone-aware times;
        phases are clipped to ``[start, end)``.  Default: from the first placement to the last end.

    Returns
    -------
    ReplicaGoodput
        Totals, the partition, and one row per replica.  A window in which nothing was held gives
        ``held_s == 0`` and ``runtime_goodput`` None, not an error.
    """
    missing = [c for c in ("replica_id", "phase", "start", "end") if c not in phases.columns]
    if missing:
        raise DomainError(f"phases lack columns {missing}; pass the table read_replica_lifecycle returns")
    bad_phase = ~phases["phase"].isin(REPLICA_PHASES[:-1])
    if bad_phase.any():
        raise DomainError(f"unknown phases {sorted(set(phases.loc[bad_phase, 'phase']))}")
    if window is None:
        if phases.empty:
            raise DomainError("no phases and no window: nothing to measure")
        window = Window.between(phases["start"].min(), phases["end"].max(), label="replica lifecycle log")
    else:
        window = Window.parse(window)
    if window.start is None or window.end is None:
        raise DomainError("replica_runtime_goodput needs a measured window (start and end)")
    start_ns = _ns(phases["start"]) if len(phases) else np.zeros(0, np.int64)
    end_ns = _ns(phases["end"]) if len(phases) else np.zeros(0, np.int64)
    dur = np.zeros(start_ns.size)
    for a, b in window.pieces:  # the window itself, or its included pieces: each clips the phases alike
        lo, hi = a.value, b.value
        dur = dur + np.maximum(np.clip(end_ns, lo, hi) - np.clip(start_ns, lo, hi), 0) / _NS_PER_S
    frame = pd.DataFrame({"replica_id": phases["replica_id"].to_numpy(), "phase": phases["phase"].to_numpy(),
                          "seconds": dur})
    names = list(REPLICA_PHASES[:-1])
    table = frame.pivot_table(index="replica_id", columns="phase", values="seconds", aggfunc="sum",
                              fill_value=0.0).reindex(columns=names, fill_value=0.0)
    table.columns.name = None
    table.insert(0, "held_s", table[names].sum(axis=1))
    table = table[table["held_s"] > 0.0]
    with np.errstate(invalid="ignore", divide="ignore"):
        table["runtime_goodput"] = table["ready"] / table["held_s"]
    terms = {p: float(frame.loc[frame["phase"] == p, "seconds"].sum()) for p in names}
    held = float(dur.sum())
    ready = terms["ready"]
    return ReplicaGoodput(held_s=held, ready_s=ready, terms=terms, unattributed_s=held - sum(terms.values()),
                          runtime_goodput=(ready / held) if held > 0.0 else None,
                          by_replica=table.reset_index(), window=window)
