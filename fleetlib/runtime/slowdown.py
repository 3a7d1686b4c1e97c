"""A job's step series along time: its regimes, where it slowed down, and its fault-free step time.

Each measured job's *step series* is the compute time (wall time less input wait) of its steady
steps, in order: kept (never erased by a restart), past their run's warm-up and first step, not
stalled, so that input waits, warm-up and stalls -- each a runtime loss of its own -- are out of it;
checkpoint and evaluation pauses lie between steps and never enter it.
:func:`fleetlib.regimes.stacked_regimes` cuts every job's series into regimes (change points by
PELT, shifts of at least :data:`~fleetlib.regimes.MIN_SHIFT`) and names the healthy one: the
fastest sustained regime the job starts in (at launch or at any restart) or returns to.  The job's
fault-free step time is the healthy regime's median (or mean) compute time, so a slow-down that
starts mid-job stays above the baseline -- slow-step time handed to the program rung -- instead of
becoming the baseline.

Warm-up and stalls are judged first, against the job's median compute time of the steps but each
run's first (the runtime kernel, :mod:`fleetlib.runtime.partition`); a job with no steady step keeps
that estimate as its fault-free step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

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
    step, attempt, start_ns, compute_s
        Beside ``positions``: step number, attempt, start (UTC nanoseconds) and compute time.
    """

    job_ids: list[str]
    cut: StackedRegimes
    offsets: np.ndarray
    positions: np.ndarray
    step: np.ndarray
    attempt: np.ndarray
    start_ns: np.ndarray
    compute_s: np.ndarray

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
        return pd.DataFrame({
            "job_id": ids[job[new]].astype(str) if new.size else np.zeros(0, dtype=object),
            "attempt": self.attempt[at[new]].astype(np.int64), "step": self.step[at[new]].astype(np.int64),
            "time": pd.to_datetime(self.start_ns[at[new]], utc=True),
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
            parts.append(pd.DataFrame({
                "job_id": self.job_ids[k], "attempt": self.attempt[lo:hi], "step": self.step[lo:hi],
                "time": pd.to_datetime(self.start_ns[lo:hi], utc=True), "compute_s": self.compute_s[lo:hi],
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
            "first_step": self.step[at].astype(np.int64), "last_step": self.step[last].astype(np.int64),
            "start": pd.to_datetime(self.start_ns[at], utc=True),
            "end": pd.to_datetime(self.start_ns[last], utc=True),
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
    codes = parts.codes
    lo, hi = t.s_off[codes], t.s_off[codes + 1]
    n_steps = hi - lo
    every = np.arange(int(n_steps.sum()), dtype=np.int64)
    first = np.cumsum(n_steps) - n_steps
    pos = every - np.repeat(first, n_steps) + np.repeat(lo, n_steps)
    job = np.repeat(np.arange(codes.size), n_steps)
    starts = parts.run_starts()[pos]
    # each run's first step is left out (compilation and cache warm-up land there, within tolerance
    # or not); the run's first value in the series starts a run
    steady = parts.steady()[pos] & ~starts
    run = np.cumsum(starts)
    pos, job, run = pos[steady], job[steady], run[steady]
    opens = np.ones(pos.size, dtype=bool)
    opens[1:] = (run[1:] != run[:-1]) | (job[1:] != job[:-1])
    offsets = np.zeros(codes.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(job, minlength=codes.size), out=offsets[1:])
    compute = (t.s_end[pos] - t.s_start[pos]) / 1e9 - t.s_wait[pos]
    cut = stacked_regimes(compute, offsets, opens, estimator=estimator)
    return StepRegimes(job_ids=parts.job_ids, cut=cut, offsets=offsets, positions=pos,
                       step=t.s_step[pos], attempt=t.s_attempt[pos], start_ns=t.s_start[pos],
                       compute_s=compute)
