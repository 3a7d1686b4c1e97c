"""A job's step series along time: its regimes, where it slowed down, and its fault-free step time.

Each measured job's *step series* is the compute time (wall time less input wait) of its steady
steps, in order: kept (never erased by a restart), past their run's warm-up and first step, not
stalled, so that input waits, warm-up and stalls -- each a runtime loss of its own -- are out of it;
checkpoint and evaluation pauses lie between steps and never enter it.
:func:`fleetlib.regimes.stacked_regimes` cuts every job's series into regimes (change points by
PELT, shifts of at least :data:`~fleetlib.regimes.MIN_SHIFT` in each regime's lower tail, so that a
burst of isolated slow steps is none) and names the healthy one: the fastest sustained regime the
job starts in (at launch or at any restart) or returns to.  The job's
fault-free step time is the healthy regime's median (or mean) compute time, so a slow-down that
starts mid-job stays above the baseline -- slow-step time handed to the program rung -- instead of
becoming the baseline.

Warm-up and stalls are judged first, against the job's median compute time of the steps but each
run's first (the runtime kernel, :mod:`fleetlib.runtime.partition`); a job with no steady step keeps
that estimate as its fault-free step time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numba import njit

from fleetlib.regimes import StackedRegimes, stacked_regimes
from fleetlib.runtime.partition import JobParts
from fleetlib.runtime.schema import CHANGE_POINT_COLUMNS, REGIME_COLUMNS, STEP_SERIES_COLUMNS

__all__ = ["StepRegimes", "step_regimes"]

@dataclass(frozen=True)
class StepRegimes:
    """Every measured job's step series cut into regimes (:func:`step_regimes`).

    Attributes
    ----------
    job_ids
        The measured jobs, in order.
    cut
        The regimes of every job's series (:class:`~fleetlib.regimes.StackedRegimes`, indices into
        each job's series).
    offsets
        Job ``k``'s series is ``positions[offsets[k]:offsets[k + 1]]``.
    positions
        The series' steps, as positions in the validated step arrays.
    compute_s
        Beside ``positions``: each step's compute time (wall time less input wait), seconds.
    tables
        The validated step arrays (:class:`fleetlib.runtime.timeline.TimelineArrays`): step numbers,
        attempts and start times are read from them where a table needs them.
    """

    job_ids: list[str]
    cut: StackedRegimes
    offsets: np.ndarray
    positions: np.ndarray
    compute_s: np.ndarray
    tables: Any

    def _column(self, name: str, at: np.ndarray) -> np.ndarray:
        """Return a step column (``s_step``, ``s_attempt``, ``s_start``) at series indices ``at``."""
        return getattr(self.tables, name)[self.positions[at]]

    def baselines(self) -> np.ndarray:
        """Return each job's healthy level in seconds (NaN: a job whose series is empty)."""
        return self.cut.baseline

    def _regime_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per regime: its job, its index among the job's regimes, its first value in the stacked series."""
        c = self.cut
        job = np.repeat(np.arange(len(self.job_ids)), np.diff(c.offsets))
        index = np.arange(c.first.size) - c.offsets[job]
        return job, index, self.offsets[job] + c.first

    def change_points(self) -> pd.DataFrame:
        """Return one row per change point.

        Each row names the job, the attempt, step number and start time of the new regime's first
        step, and the levels before and after it (seconds).
        """
        job, index, at = self._regime_rows()
        new = np.flatnonzero(index > 0)
        ids = np.asarray(self.job_ids, dtype=object)
        at = at[new]
        return pd.DataFrame({
            "job_id": ids[job[new]].astype(str) if new.size else np.zeros(0, dtype=object),
            "attempt": self._column("s_attempt", at).astype(np.int64),
            "step": self._column("s_step", at).astype(np.int64),
            "time": pd.to_datetime(self._column("s_start", at), utc=True),
            "before_s": self.cut.levels[new - 1], "after_s": self.cut.levels[new]},
            columns=list(CHANGE_POINT_COLUMNS))

    def series(self, job_id: str | None = None) -> pd.DataFrame:
        """Return the step series: one row per steady step, with its regime and the regime's level.

        Parameters
        ----------
        job_id
            One job's series; None for every job's, one after another.

        Returns
        -------
        pandas.DataFrame
            Columns :data:`fleetlib.runtime.schema.STEP_SERIES_COLUMNS`: job, attempt, step number,
            start time (UTC), compute time (wall time less input wait, seconds), the regime's index in
            the job, its level (seconds) and whether it is the healthy regime.

        Raises
        ------
        KeyError
            ``job_id`` names no measured job.
        """
        if job_id is not None and job_id not in self.job_ids:
            raise KeyError(f"no measured job {job_id!r}")
        keys = range(len(self.job_ids)) if job_id is None else [self.job_ids.index(job_id)]
        parts = []
        for k in keys:
            lo, hi = int(self.offsets[k]), int(self.offsets[k + 1])
            r = self.cut.of(k)
            regime = np.repeat(np.arange(r.levels.size), np.diff(r.bounds))
            span = np.arange(lo, hi)
            parts.append(pd.DataFrame({
                "job_id": self.job_ids[k], "attempt": self._column("s_attempt", span),
                "step": self._column("s_step", span),
                "time": pd.to_datetime(self._column("s_start", span), utc=True),
                "compute_s": self.compute_s[lo:hi],
                "regime": regime, "level_s": r.levels[regime], "healthy": regime == r.healthy}))
        if not parts:
            return pd.DataFrame({c: [] for c in STEP_SERIES_COLUMNS})
        return pd.concat(parts, ignore_index=True)

    def regimes(self) -> pd.DataFrame:
        """Return one row per regime of every job: its steps, span, level and whether it is healthy."""
        job, index, at = self._regime_rows()
        last = at + self.cut.length - 1
        ids = np.asarray(self.job_ids, dtype=object)
        return pd.DataFrame({
            "job_id": ids[job].astype(str) if job.size else np.zeros(0, dtype=object),
            "regime": index.astype(np.int64),
            "first_step": self._column("s_step", at).astype(np.int64),
            "last_step": self._column("s_step", last).astype(np.int64),
            "start": pd.to_datetime(self._column("s_start", at), utc=True),
            "end": pd.to_datetime(self._column("s_start", last), utc=True),
            "steps": self.cut.length.astype(np.int64), "level_s": self.cut.levels,
            "healthy": index == self.cut.healthy[job]}, columns=list(REGIME_COLUMNS))


def step_regimes(parts: JobParts, *, estimator: str = "median") -> StepRegimes:
    """Cut each measured job's step series into regimes (the module docstring's rule).

    Parameters
    ----------
    parts
        The runtime kernel's parts of the measured jobs (:func:`fleetlib.runtime.partition.build_parts`).
    estimator
        ``"median"`` or ``"mean"``: how a regime's level is read from its compute times.

    Returns
    -------
    StepRegimes
    """
    t = parts.tables
    # each run's first step is left out (compilation and cache warm-up land there, within tolerance
    # or not); the run's first value in the series starts a run
    starts = parts.run_starts()
    offsets, pos, compute, opens = _series(parts.codes, t.s_off, parts.steady() & ~starts, starts, t.s_start,
                                           t.s_end, t.s_wait)
    cut = stacked_regimes(compute, offsets, opens, estimator=estimator)
    return StepRegimes(job_ids=parts.job_ids, cut=cut, offsets=offsets, positions=pos, compute_s=compute,
                       tables=t)


@njit(cache=True)
def _series(codes: np.ndarray, s_off: np.ndarray, keep: np.ndarray, starts: np.ndarray, s_start: np.ndarray,
            s_end: np.ndarray, s_wait: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gather the jobs' series: offsets, step positions, compute times and where a run opens."""
    n_jobs = codes.shape[0]
    offsets = np.zeros(n_jobs + 1, np.int64)
    for k in range(n_jobs):
        c = codes[k]
        n = 0
        for i in range(s_off[c], s_off[c + 1]):
            if keep[i]:
                n += 1
        offsets[k + 1] = offsets[k] + n
    pos = np.empty(offsets[n_jobs], np.int64)
    compute = np.empty(offsets[n_jobs])
    opens = np.zeros(offsets[n_jobs], np.bool_)
    q = 0
    for k in range(n_jobs):
        c = codes[k]
        fresh = True  # the job's first value opens its first run
        for i in range(s_off[c], s_off[c + 1]):
            if starts[i]:
                fresh = True
            if keep[i]:
                pos[q] = i
                compute[q] = (s_end[i] - s_start[i]) / 1e9 - s_wait[i]
                opens[q] = fresh
                fresh = False
                q += 1
    return offsets, pos, compute, opens
