"""The vocabulary of the runtime rung: one place for its column names, event kinds and partition terms.

Constants and validators only -- no reading, no measuring.  Every other runtime module (readers,
timeline, goodput, compare, model, synth, commands) imports these names from here; code outside the
rung reads them from its door, :mod:`fleetlib.runtime`.

* Tables: :data:`STEP_COLUMNS`, :data:`EVENT_COLUMNS` (times are :data:`TIME_DTYPE`), the accepted
  column aliases of each, the one-file Parquet layout (:data:`PARQUET_COLUMNS`) and the held-interval
  table (:data:`HELD_INTERVAL_COLUMNS`).
* Event kinds: :data:`EVENT_KINDS` (what the partition does with each), the auxiliary markers readers
  emit on purpose, :data:`INTERRUPTION_KINDS`, and the order of simultaneous events.
* The partition of held time: :data:`CATEGORIES` in report order, :data:`ISSUE_TERMS` (the loss terms
  the command prints), :data:`BREAKDOWN` (fine part -> category), :data:`EQ4_TERMS` (the terms of the
  chapter's equation 4) and :data:`TERM_LABELS`, the one label of each term.  The checkpoint term is
  called **"checkpoint pauses"** everywhere (the measured held time is the synchronous pauses; "checkpoint
  waste" names Young's model fraction, not this term).
* Serving replicas: :data:`REPLICA_PHASES` and their synonyms.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from fleetlib.quality import DomainError

__all__ = [
    "AUXILIARY_EVENT_KINDS",
    "AUXILIARY_KIND_PREFIXES",
    "BREAKDOWN",
    "CATEGORIES",
    "CHANGE_POINT_COLUMNS",
    "CLEAN_END_RULE",
    "DEFINITIONS",
    "DEFINITION_TEXT",
    "DEVICE_COLUMNS",
    "DEVICE_SERIES_COLUMNS",
    "EQ4_TERMS",
    "EVENT_ALIASES",
    "EVENT_COLUMNS",
    "EVENT_KINDS",
    "HELD_INTERVAL_COLUMNS",
    "INTERRUPTION_KINDS",
    "ISSUE_TERMS",
    "NO_TIME",
    "PARQUET_COLUMNS",
    "PROVENANCE_COLUMNS",
    "REGIME_COLUMNS",
    "REPLICA_PHASES",
    "REPLICA_PHASE_ALIASES",
    "RESIZE_KINDS",
    "SIMULTANEOUS_EVENT_ORDER",
    "STALL_FACTOR",
    "STEP_ALIASES",
    "STEP_COLUMNS",
    "STEP_SERIES_COLUMNS",
    "TERM_LABELS",
    "TIME_DTYPE",
    "UNMODELLED_TERMS",
    "check_definition",
    "known_event_kinds",
]

#: Dtype of every time column of the canonical tables.
TIME_DTYPE = "datetime64[ns, UTC]"


# ---------------------------------------------------------------------------------------------------
# Canonical tables and their column aliases
# ---------------------------------------------------------------------------------------------------

#: Columns of the canonical steps table, in order.
STEP_COLUMNS: tuple[str, ...] = ("job_id", "attempt", "step", "start", "end", "input_wait_s")

#: Columns of the canonical events table, in order.
EVENT_COLUMNS: tuple[str, ...] = ("job_id", "attempt", "time", "kind", "step", "duration_s")

#: Optional provenance columns a reader appends to both tables: the file each record came from
#: (categorical) and its 1-based row or line as the file counts it.  Checks of the timeline's
#: structure name this file and row; tables without them are named by table and 1-based position.
PROVENANCE_COLUMNS: tuple[str, ...] = ("source_file", "source_row")


#: Accepted alternative column names of a steps file (lower case), by canonical column.
STEP_ALIASES: dict[str, tuple[str, ...]] = {
    "job_id": ("job", "job_name", "run_id", "run"),
    "attempt": ("attempt_id", "attempt_index", "restart", "incarnation"),
    "step": ("step_count", "step_id", "iteration", "global_step"),
    "start": ("start_time", "step_start", "step_start_time", "begin"),
    "end": ("end_time", "step_end", "step_end_time", "finish"),
    "input_wait_s": ("input_wait", "data_wait_s", "input_stall_s", "data_loading_s"),
}
#: Accepted alternative column names of an events file (lower case), by canonical column.
EVENT_ALIASES: dict[str, tuple[str, ...]] = {
    "job_id": STEP_ALIASES["job_id"],
    "attempt": STEP_ALIASES["attempt"],
    "time": ("timestamp", "ts", "event_time", "at"),
    "kind": ("event", "type", "event_type", "event_kind"),
    "step": STEP_ALIASES["step"],
    "duration_s": ("duration", "dur_s", "elapsed_s"),
}

#: Columns of the one-file Parquet layout, in order.
PARQUET_COLUMNS: tuple[str, ...] = ("record", "job_id", "attempt", "step", "start", "end", "input_wait_s",
                                    "time", "kind", "duration_s")

#: Columns of :func:`held_intervals` (the input of :func:`fleetlib.plots.attempt_gantt`).
HELD_INTERVAL_COLUMNS: tuple[str, ...] = ("job_id", "attempt", "start", "end", "category", "record", "phase",
                                          "duration_s")


# ---------------------------------------------------------------------------------------------------
# Event kinds
# ---------------------------------------------------------------------------------------------------

#: Every event kind the partition understands, with what it means and how it is used.
EVENT_KINDS: dict[str, str] = {
    "gang_complete": "the allocation became complete: held time of the attempt starts here (required, "
                     "one per attempt; logged by the scheduler, never inferred from the first step)",
    "release": "the allocation was released: held time of the attempt ends here (one per attempt; "
               "when missing, held time ends at the attempt's last record and a flag says so); the last "
               "attempt's recorded release is an end marker of the clean-end rule (CLEAN_END_RULE)",
    "job_completed": "the job finished its work cleanly (e.g. ml-goodput-measurement's job_end_time): "
                     "an end marker of the clean-end rule (CLEAN_END_RULE), as the last attempt's release "
                     "is: with clean_end_commit (the default) the first end marker after the last step, "
                     "with no interruption between them, is the final commit of every step before it",
    "first_step": "the first step after a gang completion or a restart began; it ends the recovery "
                  "outage even when that step never finished (its partial time is then charged to the "
                  "next interruption)",
    "cold_start": "the attempt's launch is a cold launch charged to startup even though it follows "
                  "a failure or preemption (e.g. a deliberate relaunch with new software)",
    "checkpoint_begin": "a checkpoint of state after `step` started; the job pauses from here until "
                        "the commit lands, training resumes, or `duration_s` (the blocking part, when "
                        "known -- e.g. Orbax's blocking duration) has passed, whichever is first: the "
                        "synchronous pause, or an asynchronous checkpoint's staging pause",
    "checkpoint_commit": "the checkpoint of state after `step` is durable: steps up to `step` are "
                         "retained (committed definition); `duration_s` gives the pause when no "
                         "checkpoint_begin was logged",
    "failure": "a fault stopped progress at this instant (start of the recovery outage)",
    "failure_detected": "the fault was detected (detection latency = this minus the failure)",
    "restore": "the job reloaded the state after `step` (null: the initial state); live steps after "
               "`step` are erased and charged to the interruption being recovered from",
    "preempt": "the scheduler evicted the job: progress stopped at this instant (start of the "
               "preemption outage; the queue wait until the next gang_complete is not held time)",
    "eval_begin": "an evaluation pause began (`duration_s`, when given, bounds it)",
    "eval_end": "the evaluation pause ended (`duration_s` gives the pause when no eval_begin exists)",
    "hang_begin": "progress stopped with the allocation still held (hang, zombie): idle until the "
                  "next step, interruption, release or `duration_s`",
    "idle_begin": "the allocation is held with no work to run (idle reservation): idle until the "
                  "next step, interruption, release or `duration_s`",
    "resize_begin": "an elastic job lost or regained devices (`devices_before` -> `devices_after` held): "
                    "the elastic wait runs from here until re-initialisation starts (resize_end), the "
                    "next step, interruption, release or pause marker",
    "resize_end": "the resized mesh (`devices_after` devices) starts re-initialising: elastic "
                  "re-initialisation runs from here until the next step, interruption, release or "
                  "pause marker",
}

#: The clean-end rule, in one sentence (the R factor's convention prints it; the runtime goodput
#: module's "Clean end" section explains it).
CLEAN_END_RULE = (
    "Clean end: a job whose last step is followed, with no failure or preemption between, by its last "
    "attempt's release, a job_completed event or a scheduler COMPLETED state has retained its result, "
    "so that end counts as its final commit (no progress at risk; clean_end_commit=False turns this off)."
)

#: "No time recorded" in an int64 nanosecond array (a scheduler's COMPLETED time per job, the
#: clean-end rule's input: :func:`fleetlib.runtime.partition.build_parts`' ``completed_ns``).
NO_TIME: int = int(np.iinfo(np.int64).min)

#: What each definition of productive time counts, in one clause (R's convention prints it).
DEFINITION_TEXT: dict[str, str] = {
    "committed": "a finished step counts once a checkpoint commit (or the job's clean end) covering it has "
                 "landed",
    "retrospective": "every finished step not erased by a later restart counts",
}

#: Phase markers readers emit on purpose (:mod:`fleetlib.runtime.readers`): kept, not flagged, ignored
#: by the partition.
AUXILIARY_EVENT_KINDS: tuple[str, ...] = (
    "tpu_init_begin", "tpu_init_end", "training_prep_begin", "training_prep_end",
    "data_loading_begin", "data_loading_end", "device_count",
)
#: Kind prefixes of auxiliary events that carry a free-form type after the colon (kept, not flagged).
AUXILIARY_KIND_PREFIXES: tuple[str, ...] = ("custom_badput:",)

#: Optional columns of the events table that carry an elastic job's device counts (nullable integers,
#: set on ``resize_begin`` / ``resize_end``): the devices held before and after the resize.
DEVICE_COLUMNS: tuple[str, ...] = ("devices_before", "devices_after")

#: Event kinds of an elastic resize, in the order one resize logs them.
RESIZE_KINDS: tuple[str, ...] = ("resize_begin", "resize_end")

#: Event kinds that interrupt progress and are followed by a recovery outage.
INTERRUPTION_KINDS: tuple[str, ...] = ("failure", "preempt")

#: Order of simultaneous events (an interval's end before the next one's begin; release last).
SIMULTANEOUS_EVENT_ORDER: dict[str, int] = {k: i for i, k in enumerate((
    "gang_complete", "cold_start", "restore", "first_step", "eval_end", "resize_end", "checkpoint_commit",
    "failure_detected", "checkpoint_begin", "eval_begin", "resize_begin", "failure", "preempt",
    "job_completed", "release"))}


# ---------------------------------------------------------------------------------------------------
# The partition of held time: term names, their order and labels
# ---------------------------------------------------------------------------------------------------

#: Definitions of productive time: steps retained by a checkpoint, or steps no restart erased.
DEFINITIONS: tuple[str, ...] = ("committed", "retrospective")

#: The partition of held time, in report order; these sum to held time exactly.
CATEGORIES: tuple[str, ...] = (
    "productive", "progress_at_risk", "startup", "input_wait", "checkpoint",
    "recovery", "rework", "preemption", "elastic_wait", "elastic_reinit", "evaluation", "stall", "idle",
    "unattributed",
)

#: The terms of the CLI object: every category but ``productive``, so that
#: ``productive_s + sum(terms) == held_s`` (issue 16).
ISSUE_TERMS: tuple[str, ...] = (
    "progress_at_risk", "startup", "input_wait", "checkpoint", "recovery", "rework", "preemption",
    "elastic_wait", "elastic_reinit", "evaluation", "stall", "idle", "unattributed",
)

#: Default stall bound: a retained step whose compute time exceeds this many fault-free step times
#: held the gang without progressing; its time above the baseline is the runtime loss ``stall``.
STALL_FACTOR: float = 5.0

#: Fine-grained parts and the category each belongs to.
BREAKDOWN: dict[str, str] = {
    "productive": "productive",
    "slow_step": "productive",
    "progress_at_risk": "progress_at_risk",
    "slow_step_at_risk": "progress_at_risk",
    "input_wait": "input_wait",
    "startup_launch": "startup",
    "startup_warmup": "startup",
    "checkpoint": "checkpoint",
    "evaluation": "evaluation",
    "stall": "stall",
    "idle_marked": "idle",
    "idle_after_progress": "idle",
    "recovery_detection": "recovery",
    "recovery_restart": "recovery",
    "recovery_warmup": "recovery",
    "rework_steps": "rework",
    "rework_partial_step": "rework",
    "preemption_lost_steps": "preemption",
    "preemption_partial_step": "preemption",
    "preemption_restart": "preemption",
    "preemption_warmup": "preemption",
    "elastic_wait": "elastic_wait",
    "elastic_reinit": "elastic_reinit",
    "unattributed": "unattributed",
}

#: Equation-4 terms, in the order the chapter lists them.
EQ4_TERMS: tuple[str, ...] = ("startup", "input_wait", "checkpoint", "recovery", "preemption")

#: Measured categories with no equation-4 term.
UNMODELLED_TERMS: tuple[str, ...] = ("elastic_wait", "elastic_reinit", "evaluation", "stall", "idle",
                                     "progress_at_risk", "unattributed")

#: The one label of each term of the partition (text output, tables, figure legends).
TERM_LABELS: dict[str, str] = {
    "productive": "productive",
    "progress_at_risk": "progress at risk",
    "startup": "startup (cold launches)",
    "input_wait": "input wait",
    "checkpoint": "checkpoint pauses",
    "recovery": "failure recovery",
    "rework": "rework after failures",
    "preemption": "preemption",
    "elastic_wait": "elastic wait",
    "elastic_reinit": "elastic re-initialisation",
    "evaluation": "evaluation",
    "stall": "stalled steps (above the stall bound)",
    "idle": "idle (held, no progress)",
    "unattributed": "unattributed",
}

#: Labels of the five terms of equation 4, the *model* of runtime loss.  Its checkpoint term is
#: Young's waste fraction -- the synchronous pauses plus the rework expected after failures -- so it
#: is named "checkpoint waste", while the measured partition's checkpoint term is only the pauses.
MODEL_TERM_LABELS: dict[str, str] = {
    "startup": "startup",
    "input_wait": "input wait",
    "preemption": "preemption",
    "checkpoint": "checkpoint waste (pauses + rework)",
    "recovery": "failure recovery",
}

#: Serving replica phases, in the only order a replica moves through them.
REPLICA_PHASES: tuple[str, ...] = ("placed", "loading", "warmup", "ready", "draining", "released")
#: Accepted synonyms of the replica phase names (lower case).
REPLICA_PHASE_ALIASES: dict[str, str] = {
    "scheduled": "placed", "bound": "placed", "placement": "placed",
    "load": "loading", "weights_loading": "loading", "model_loading": "loading",
    "warm-up": "warmup", "warm_up": "warmup", "warming": "warmup", "warming_up": "warmup",
    "serving": "ready", "healthy": "ready",
    "drain": "draining",
    "release": "released", "terminated": "released", "deleted": "released", "stopped": "released",
}



# ---------------------------------------------------------------------------------------------------
# Validators
# ---------------------------------------------------------------------------------------------------


def check_definition(definition: str) -> str:
    """Return ``definition`` if it is one of :data:`DEFINITIONS`; raise :class:`DomainError` otherwise.

    Parameters
    ----------
    definition
        ``"committed"`` or ``"retrospective"``.

    Returns
    -------
    str
        The definition, unchanged.
    """
    if definition not in DEFINITIONS:
        raise DomainError(f"definition must be 'committed' or 'retrospective'; got {definition!r}")
    return definition


def known_event_kinds(kinds: Iterable[str] | pd.Series) -> np.ndarray:
    """Return a mask of the kinds the partition knows or ignores on purpose (not flagged).

    Parameters
    ----------
    kinds
        Event kinds.

    Returns
    -------
    numpy.ndarray
        True for a canonical kind (:data:`EVENT_KINDS`), an auxiliary kind or one with an auxiliary
        prefix; False for a kind that is kept and flagged ``unknown_event_kind``.
    """
    k = pd.Series(kinds if isinstance(kinds, pd.Series) else list(kinds), dtype="object").astype("str")
    known = k.isin((*EVENT_KINDS, *AUXILIARY_EVENT_KINDS)) | k.str.startswith(AUXILIARY_KIND_PREFIXES)
    return known.to_numpy(dtype=bool)

#: Columns of an elastic job's device counts over time (:func:`fleetlib.runtime.elastic.device_series`).
DEVICE_SERIES_COLUMNS = ("job_id", "attempt", "time", "devices_held", "devices_stepping", "devices_total")
#: Columns of a measurement's change points (:attr:`fleetlib.runtime.RuntimeMeasurement.change_points`).
CHANGE_POINT_COLUMNS = ("job_id", "attempt", "step", "time", "before_s", "after_s")
#: Columns of a measurement's step series (:meth:`fleetlib.runtime.RuntimeMeasurement.step_series`).
STEP_SERIES_COLUMNS = ("job_id", "attempt", "step", "time", "compute_s", "regime", "level_s", "healthy")
#: Columns of a measurement's regimes (:attr:`fleetlib.runtime.RuntimeMeasurement.regimes`).
REGIME_COLUMNS = ("job_id", "regime", "first_step", "last_step", "start", "end", "steps", "level_s",
                  "healthy")
