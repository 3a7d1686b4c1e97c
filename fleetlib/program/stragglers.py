"""Fleet-scale stragglers from per-rank step timers, on pandas or out of core on Dask.

A synchronous data-parallel job ends every step at a barrier (the gradient all-reduce): no rank
starts step ``s + 1`` before the slowest rank has finished step ``s``.  When each rank records only
how long its own work in a step took -- a *step timer* -- the barrier gives everything else:

* the step's **last arriver** is the rank with the longest duration (ties go to the smallest rank,
  so the answer never depends on row order);
* every other rank **waits** ``step max - own duration`` at the barrier;
* a rank that keeps arriving last, or whose mean duration is well above the best rank's, is a
  straggler.

This is the timer view of :func:`fleetlib.program.collectives.straggler_report`, which reads the same
facts from kernel traces (there the last arriver has the *shortest* collective kernel, because the
kernel includes the wait; here the timer excludes it, so the last arriver has the *longest* timer).
The per-rank columns use the same names and meaning where the two views overlap:

========================  ===========================================================================
``steps``                 steps the rank has a timer for (``collectives`` in the trace view)
``arrived_last``          steps at which it was the last arriver
``arrived_last_share``    ``arrived_last / steps``
``wait_caused_s``         the other ranks' waits summed over the steps it arrived last at
``wait_s``                its own barrier wait summed over its steps (``peer_wait_us``)
``mean_wait_s``           ``wait_s / steps``
``mean_duration_s``       mean of its own step durations (its own work per step)
``relative_score``        best (smallest) rank mean duration / this rank's mean duration: the
                          fastest rank scores 1, a rank needing a third longer 0.75 (as the trace
                          view, which uses medians of own work; means are used here because an
                          exact mean takes two streaming passes and an exact median does not)
``straggler``             ``relative_score < threshold`` (default
                          :data:`~fleetlib.program.collectives.DEFAULT_STRAGGLER_THRESHOLD`)
``individual_score``      the rank against its own history (the temporal score beside the relative
                          one): the steps are cut into :data:`HISTORY_WINDOWS` consecutive windows of
                          equal step counts, and the score is the rank's best (smallest) window
                          mean duration / its mean duration in its last window -- 1 when it ends as
                          fast as it ever ran, 0.75 when it now needs a third longer
``slowed_down``           ``individual_score < threshold``: the rank slowed down during the run,
                          whether or not it is slower than the other ranks
========================  ===========================================================================

Every step with at least one timer has a last arriver (a one-rank step's last arriver waits for
nobody and causes no wait), so ``arrived_last`` sums to the number of steps.

The rank-timer table and its reader are in :mod:`fleetlib.program.readers.rank_timers`.

Engines
-------
Both engines run the same two-pass reduction, block by block:

1. per block, per step: count, max, min, sum and last arriver (plus a bitmap of the ranks seen, to
   catch a ``(rank, step)`` that appears in two blocks); blocks are combined pairwise in a tree.
2. per block, with the per-step maxima broadcast: per rank the count, the sum of durations and the
   sum of waits ``step max - duration``; per step the sum of waits.  Combined the same way.

``engine="pandas"`` reads the whole table into memory and treats it as one block;
``engine="dask"`` builds a :mod:`dask.dataframe` of blocks of whole Parquet row groups
(:func:`rank_timers_dask`) and runs the blocks on a :class:`distributed.Client` (a
:class:`distributed.LocalCluster` of worker processes is started when none is given), so only a
few blocks and the small per-step and per-rank partials are ever in memory.  No shuffle, no
``set_index`` and no approximate quantile is used.  Counts, maxima, minima and last arrivers are
identical between the engines; sums are the same up to the order of floating-point addition
(relative differences near 1e-15).

Examples
--------
>>> t = pd.DataFrame({"rank": [0, 1, 2, 0, 1, 2], "step": [0, 0, 0, 1, 1, 1],
...                   "duration_s": [1.0, 1.5, 1.2, 1.1, 1.1, 1.0]})
>>> res = straggler_analysis(t)
>>> res.per_step["last_arriver"].tolist(), res.per_rank["wait_s"].round(6).tolist()
([1, 0], [0.5, 0.0, 0.4])
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from fleetlib.program.collectives import DEFAULT_STRAGGLER_THRESHOLD
from fleetlib.program.readers.rank_timers import (
    DEFAULT_PARTITION_ROWS,
    MAX_RANK,
    MAX_REJECTED_ROWS,
    TimerBlock,
    check_block,
    dask_frame,
    duplicate_pair,
    is_csv,
    rank_timer_files,
    rank_timers_dask,
    read_rank_timers,
    row_of,
)
from fleetlib.program.schema import PER_RANK_COLUMNS, PER_STEP_COLUMNS, RANK_TIMER_COLUMNS
from fleetlib.quality import DomainError, InputError, Ledger, check_fraction

__all__ = [
    "AUTO_DASK_ROWS",
    "DEFAULT_PARTITION_ROWS",
    "DEFAULT_STRAGGLERS",
    "HISTORY_WINDOWS",
    "MAX_RANK",
    "MAX_REJECTED_ROWS",
    "PER_RANK_COLUMNS",
    "PER_STEP_COLUMNS",
    "RANK_TIMER_COLUMNS",
    "FleetStragglers",
    "local_cluster",
    "rank_timer_files",
    "rank_timers_dask",
    "read_rank_timers",
    "straggler_analysis",
    "synth_rank_timers",
]

#: Consecutive step windows of a rank's history behind its individual score.
HISTORY_WINDOWS: int = 10
#: ``engine=None`` picks pandas up to this many rows and Dask above.
AUTO_DASK_ROWS: int = 20_000_000
#: Slowdowns of the stragglers injected when :func:`synth_rank_timers` is not told which.
DEFAULT_STRAGGLERS: tuple[float, ...] = (1.5, 1.35, 1.2)
_ENGINES = ("pandas", "dask")
_NO_RANK = np.iinfo(np.int64).max


# ---------------------------------------------------------------------------------------------------
# Pass 1: per-step partials
# ---------------------------------------------------------------------------------------------------


@dataclass
class _StepPartial:
    """Per-step sufficient statistics of some blocks (sorted by step), and their ledger."""

    steps: np.ndarray
    count: np.ndarray
    max_s: np.ndarray
    min_s: np.ndarray
    sum_s: np.ndarray
    last: np.ndarray
    # (steps, bytes) bitmap of the ranks seen: bit k % 8 of byte k // 8 stands for rank bit_ranks[k], so
    # its size follows the ranks present, not the largest rank id
    bits: np.ndarray | None
    ledger: Ledger
    files: tuple[str, ...] = field(default_factory=tuple)
    bit_ranks: np.ndarray | None = None


def _segments(step: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, step[1:] != step[:-1]]) if step.size else np.zeros(0, np.int64)




def _pass1_block(frame: pd.DataFrame, block: TimerBlock, *, check_duplicates: bool = True) -> _StepPartial:
    """Per-step count, max, min, sum, last arriver and rank bitmap of one block.

    With ``check_duplicates=False`` (a single block whose duplicates the reader already refused)
    neither the duplicate check nor the rank bitmap is computed.
    """
    clean = check_block(frame, block)
    n = clean.dur.size
    if n == 0:
        empty = np.zeros(0)
        return _StepPartial(np.zeros(0, np.int64), np.zeros(0, np.int64), empty, empty, empty,
                            np.zeros(0, np.int64), np.zeros((0, 1), np.uint8), clean.ledger, (block.file,))
    step, rank, dur = clean.step, clean.rank, clean.dur
    if not np.all(step[1:] >= step[:-1]):
        order = np.argsort(step, kind="stable")
        step, rank, dur = step[order], rank[order], dur[order]
    starts = _segments(step)
    count = np.diff(np.r_[starts, n])
    max_s = np.maximum.reduceat(dur, starts)
    min_s = np.minimum.reduceat(dur, starts)
    sum_s = np.add.reduceat(dur, starts)
    at_max = dur == np.repeat(max_s, count)
    last = np.minimum.reduceat(np.where(at_max, rank, _NO_RANK), starts)
    pair = duplicate_pair(clean.rank, clean.step) if check_duplicates else None  # file order: rows
    if pair is not None:
        a, b = pair
        raise InputError(f"two rows for rank {int(clean.rank[a])} at step {int(clean.step[a])} (the other "
                         f"is row {row_of(clean, block.first_row, a)}); one timer per (rank, step) is "
                         "expected", file=block.file, row=row_of(clean, block.first_row, b),
                         field="rank, step")
    if not check_duplicates:  # one block checked by the reader: no other block to compare ranks with
        return _StepPartial(step[starts].copy(), count, max_s, min_s, sum_s, last, None, clean.ledger,
                            (block.file,))
    present, dense = np.unique(rank, return_inverse=True)
    width = int(present.size) // 8 + 1
    seg = np.repeat(np.arange(starts.size), count)
    if starts.size * width * 8 <= 8 * n:
        flat = np.zeros(starts.size * width * 8, bool)
        flat[seg * (width * 8) + dense] = True
        bits = np.packbits(flat, bitorder="little").reshape(starts.size, width)
    else:
        bits = np.zeros(starts.size * width, np.uint8)
        np.bitwise_or.at(bits, seg * width + (dense >> 3), (1 << (dense & 7)).astype(np.uint8))
        bits = bits.reshape(starts.size, width)
    return _StepPartial(step[starts].copy(), count, max_s, min_s, sum_s, last, bits, clean.ledger,
                        (block.file,), present.astype(np.int64))


def _spread(bits: np.ndarray, ranks: np.ndarray, union: np.ndarray) -> np.ndarray:
    """Re-index a bitmap over ``ranks`` as a boolean table over the sorted ``union`` of ranks."""
    seen = np.unpackbits(bits, axis=1, bitorder="little")[:, :ranks.size].astype(bool)
    out = np.zeros((bits.shape[0], union.size), bool)
    out[:, np.searchsorted(union, ranks)] = seen
    return out


def _combine_steps(a: _StepPartial, b: _StepPartial) -> _StepPartial:
    """Combine the partials of two runs of blocks (``a`` precedes ``b`` in file order)."""
    steps = np.union1d(a.steps, b.steps)
    ia, ib = np.searchsorted(steps, a.steps), np.searchsorted(steps, b.steps)
    m = steps.size
    count = np.zeros(m, np.int64)
    count[ia] += a.count
    count[ib] += b.count
    max_s = np.full(m, -np.inf)
    max_s[ia] = a.max_s
    max_s[ib] = np.maximum(max_s[ib], b.max_s)
    min_s = np.full(m, np.inf)
    min_s[ia] = a.min_s
    min_s[ib] = np.minimum(min_s[ib], b.min_s)
    sum_s = np.zeros(m)
    sum_s[ia] = a.sum_s
    sum_s[ib] += b.sum_s
    last = np.full(m, _NO_RANK, np.int64)
    last[ia] = np.where(a.max_s == max_s[ia], a.last, _NO_RANK)
    last[ib] = np.minimum(last[ib], np.where(b.max_s == max_s[ib], b.last, _NO_RANK))
    bits = union = None
    if a.bits is not None and b.bits is not None:
        ra = a.bit_ranks if a.bit_ranks is not None else np.arange(a.bits.shape[1] * 8)
        rb = b.bit_ranks if b.bit_ranks is not None else np.arange(b.bits.shape[1] * 8)
        union = np.union1d(ra, rb)
        seen = np.zeros((m, union.size), bool)
        seen[ia] = _spread(a.bits, ra, union)
        sb = _spread(b.bits, rb, union)
        clash = seen[ib] & sb
        if clash.any():
            i, col = (int(x[0]) for x in np.nonzero(clash))
            r = int(union[col])
            raise InputError(f"two rows for rank {r} at step {int(b.steps[i])}, in different row groups "
                             f"or files (among {_names(a.files)} and {_names(b.files)}); one timer per "
                             "(rank, step) is expected", file=b.files[0] if len(b.files) == 1 else None,
                             field="rank, step")
        seen[ib] |= sb
        bits = np.packbits(seen, axis=1, bitorder="little")
    files = a.files + tuple(f for f in b.files if f not in a.files)
    ledger = Ledger.merged([a.ledger, b.ledger])
    return _StepPartial(steps, count, max_s, min_s, sum_s, last, bits, ledger, files, union)


def _names(files: Sequence[str]) -> str:
    shown = ", ".join(Path(f).name for f in files[:3])
    return shown + (f" and {len(files) - 3} more" if len(files) > 3 else "")


def _strip_bits(p: _StepPartial) -> _StepPartial:
    p.bits = None
    return p


# ---------------------------------------------------------------------------------------------------
# Pass 2: per-rank partials against the broadcast per-step maxima
# ---------------------------------------------------------------------------------------------------


@dataclass
class _RankPartial:
    ranks: np.ndarray
    count: np.ndarray
    sum_s: np.ndarray
    wait_s: np.ndarray
    step_wait_s: np.ndarray  # dense over the per-step table's positions
    window_count: np.ndarray  # (ranks, HISTORY_WINDOWS): timers per step window
    window_sum_s: np.ndarray  # (ranks, HISTORY_WINDOWS): their durations summed


def _pass2_block(frame: pd.DataFrame, block: TimerBlock, steps: np.ndarray, max_s: np.ndarray
                 ) -> _RankPartial:
    """Per-rank count, duration sum and barrier-wait sum of one block; per-step wait sums."""
    clean = check_block(frame, block)
    pos = np.searchsorted(steps, clean.step)
    wait = max_s[pos] - clean.dur
    # dense over the ranks present: memory follows them, not the largest rank id
    ranks, dense = np.unique(clean.rank, return_inverse=True)
    size = ranks.size
    # the step window of each timer: HISTORY_WINDOWS runs of consecutive steps, of equal step counts
    cell = dense * HISTORY_WINDOWS + pos * HISTORY_WINDOWS // max(steps.size, 1)
    cells = size * HISTORY_WINDOWS
    return _RankPartial(
        ranks.astype(np.int64), np.bincount(dense, minlength=size).astype(np.int64),
        np.bincount(dense, weights=clean.dur, minlength=size),
        np.bincount(dense, weights=wait, minlength=size),
        np.bincount(pos, weights=wait, minlength=steps.size),
        np.bincount(cell, minlength=cells).astype(np.int64).reshape(size, HISTORY_WINDOWS),
        np.bincount(cell, weights=clean.dur, minlength=cells).reshape(size, HISTORY_WINDOWS),
    )


def _combine_ranks(a: _RankPartial, b: _RankPartial) -> _RankPartial:
    ranks = np.union1d(a.ranks, b.ranks)
    ia, ib = np.searchsorted(ranks, a.ranks), np.searchsorted(ranks, b.ranks)
    out = []
    for name, dtype in (("count", np.int64), ("sum_s", np.float64), ("wait_s", np.float64)):
        v = np.zeros(ranks.size, dtype)
        v[ia] = getattr(a, name)
        v[ib] += getattr(b, name)
        out.append(v)
    windows = []
    for name, dtype in (("window_count", np.int64), ("window_sum_s", np.float64)):
        w = np.zeros((ranks.size, HISTORY_WINDOWS), dtype)
        w[ia] = getattr(a, name)
        w[ib] += getattr(b, name)
        windows.append(w)
    return _RankPartial(ranks, *out, a.step_wait_s + b.step_wait_s, *windows)


def _tree(items: list[Any], combine: Callable[[Any, Any], Any], fanin: int = 2) -> Any:
    """Combine ``items`` pairwise, keeping their order (left before right)."""
    while len(items) > 1:
        items = [combine(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), fanin)]
    return items[0]


# ---------------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------------


@dataclass
class FleetStragglers:
    """Stragglers of a fleet of ranks from their step timers.

    Attributes
    ----------
    per_rank
        One row per rank, columns :data:`PER_RANK_COLUMNS` (see the module docstring), by rank.
    per_step
        One row per step, columns :data:`PER_STEP_COLUMNS`: ``ranks`` with a timer, the step's
        ``max_s`` / ``min_s`` / ``mean_s`` duration, its ``last_arriver`` and ``wait_s`` (all ranks'
        barrier waits together).
    ledger
        Rows read / kept / rejected, with file, row, field and reason of every rejection.
    engine
        ``"pandas"`` or ``"dask"``.
    files
        The files read (empty for a table given directly).
    threshold
        Relative score below which ``straggler`` is True.
    """

    per_rank: pd.DataFrame
    per_step: pd.DataFrame
    ledger: Ledger
    engine: str
    files: list[str]
    threshold: float

    def top(self, k: int = 10) -> pd.DataFrame:
        """Return the ``k`` worst ranks: lowest relative score, then most often last, then rank.

        Parameters
        ----------
        k
            How many ranks (at least 1).

        Returns
        -------
        pandas.DataFrame
            ``k`` rows (fewer when there are fewer ranks) of :attr:`per_rank`.
        """
        if isinstance(k, bool) or int(k) != k or k < 1:
            raise DomainError(f"k must be a whole number >= 1; got {k!r}")
        order = np.lexsort((self.per_rank["rank"].to_numpy(), -self.per_rank["arrived_last"].to_numpy(),
                            self.per_rank["relative_score"].to_numpy()))
        return self.per_rank.iloc[order[:int(k)]].reset_index(drop=True)

    def to_dict(self, top: int = 10, *, max_ledger_entries: int = 100) -> dict[str, Any]:
        """Return a JSON-ready summary (what ``fleetlib stragglers --json`` prints).

        Parameters
        ----------
        top
            Ranks listed in ``stragglers``, ``last_arriver_counts`` and ``top_waiters``.
        max_ledger_entries
            Ledger entries printed in full; the rest are counted in ``entries_not_shown``.

        Returns
        -------
        dict
            ``engine``, ``files``, ``rows``, ``ranks``, ``steps``, ``threshold``, ``top``,
            ``stragglers`` (the :meth:`top` ranks as records), ``straggler_ranks`` (every rank
            below the threshold), ``slowed_down_ranks`` (every rank whose individual score is below
            it), ``last_arriver_counts`` ({rank: steps it was last} for the ``top``
            most frequent, ties by rank), ``last_arriver_ranks`` (how many ranks were ever last),
            ``wait_totals`` (``all_ranks_s``, ``per_step_mean_s``, ``top_waiters``) and ``ledger``.
        """
        pr = self.per_rank
        counts = pr[pr["arrived_last"] > 0].sort_values(["arrived_last", "rank"], ascending=[False, True])
        waiters = pr.sort_values(["wait_s", "rank"], ascending=[False, True]).head(top)
        led = self.ledger.to_dict()
        entries = list(led["entries"])  # type: ignore[arg-type]
        led["entries"] = entries[:max_ledger_entries]
        led["entries_not_shown"] = max(len(entries) - max_ledger_entries, 0)
        total_wait = float(self.per_step["wait_s"].sum())
        return {
            "engine": self.engine,
            "files": list(self.files),
            "rows": int(pr["steps"].sum()),
            "ranks": len(pr),
            "steps": len(self.per_step),
            "threshold": self.threshold,
            "top": int(top),
            "stragglers": _records(self.top(top)),
            "straggler_ranks": [int(r) for r in pr.loc[pr["straggler"], "rank"]],
            "slowed_down_ranks": [int(r) for r in pr.loc[pr["slowed_down"], "rank"]],
            "last_arriver_counts": {str(int(r)): int(c) for r, c in zip(
                counts["rank"].head(top), counts["arrived_last"].head(top), strict=True)},
            "last_arriver_ranks": len(counts),
            "wait_totals": {
                "all_ranks_s": total_wait,
                "per_step_mean_s": total_wait / len(self.per_step) if len(self.per_step) else 0.0,
                "top_waiters": [{"rank": int(r), "wait_s": float(w)}
                                for r, w in zip(waiters["rank"], waiters["wait_s"], strict=True)],
            },
            "ledger": led,
        }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for rec in frame.to_dict(orient="records"):
        out.append({k: (bool(v) if isinstance(v, (bool, np.bool_)) else
                        int(v) if isinstance(v, (int, np.integer)) else float(v)) for k, v in rec.items()})
    return out


def _individual_scores(count: np.ndarray, total_s: np.ndarray) -> np.ndarray:
    """Each rank's best step-window mean duration over its last window's (1: a rank seen in one window)."""
    seen = count > 0
    means = np.divide(total_s, count, out=np.full(count.shape, np.inf), where=seen)
    last = HISTORY_WINDOWS - 1 - np.argmax(seen[:, ::-1], axis=1)
    current = means[np.arange(count.shape[0]), last]
    return np.divide(means.min(axis=1), current, out=np.ones(count.shape[0]), where=current > 0)


def _finish(sp: _StepPartial, rp: _RankPartial, ledger: Ledger, engine: str, files: list[str],
            threshold: float) -> FleetStragglers:
    if sp.steps.size == 0:
        raise InputError(f"no usable rank-timer rows (every row was rejected; {ledger.summary()})",
                         file=files[0] if len(files) == 1 else None)
    per_step = pd.DataFrame({
        "step": sp.steps, "ranks": sp.count, "max_s": sp.max_s, "min_s": sp.min_s,
        "mean_s": sp.sum_s / sp.count, "last_arriver": sp.last, "wait_s": rp.step_wait_s,
    })
    last_ranks, last_pos = np.unique(sp.last, return_inverse=True)
    pos = np.searchsorted(rp.ranks, last_ranks)
    arrived = np.zeros(rp.ranks.size, np.int64)
    np.add.at(arrived, pos, np.bincount(last_pos))
    caused = np.zeros(rp.ranks.size)
    caused[pos] = np.bincount(last_pos, weights=rp.step_wait_s)
    mean = rp.sum_s / rp.count
    best = float(mean.min())
    if best <= 0.0:
        r = int(rp.ranks[int(np.argmin(mean))])
        raise DomainError(f"rank {r} has a mean step duration of 0 s; a relative score against the best rank "
                          "needs positive durations")
    score = best / mean
    individual = _individual_scores(rp.window_count, rp.window_sum_s)
    per_rank = pd.DataFrame({
        "rank": rp.ranks, "steps": rp.count, "arrived_last": arrived,
        "arrived_last_share": arrived / rp.count,
        "wait_caused_s": caused, "wait_s": rp.wait_s, "mean_wait_s": rp.wait_s / rp.count,
        "mean_duration_s": mean, "relative_score": score, "straggler": score < threshold,
        "individual_score": individual, "slowed_down": individual < threshold,
    })
    return FleetStragglers(per_rank, per_step, ledger, engine, files, threshold)

# ---------------------------------------------------------------------------------------------------
# The analysis
# ---------------------------------------------------------------------------------------------------


def local_cluster(workers: int = 2, *, memory_limit_bytes: int | None = None,
                  processes: bool = True) -> Any:
    """Start a :class:`distributed.LocalCluster` sized for the straggler analysis.

    Parameters
    ----------
    workers
        Worker processes, one thread each.
    memory_limit_bytes
        Per-worker memory limit; default ``min(2 GiB, 6 GB / workers)``, which keeps the workers,
        the scheduler and the client together under 8 GB.
    processes
        Worker processes (True) or threads of this process (False, for quick tests).

    Returns
    -------
    distributed.LocalCluster
        The cluster (close it, or use it as a context manager).
    """
    import dask
    from distributed import LocalCluster

    from fleetlib._environ import environment, local_worker_count

    if isinstance(workers, float) and workers.is_integer():  # 2.0 is taken as 2, as before
        workers = int(workers)
    workers = local_worker_count(workers)
    limit = memory_limit_bytes if memory_limit_bytes is not None else min(2 * 2**30, int(6e9 / workers))
    # glibc's own (dynamic) malloc thresholds in the workers, as in fleetlib.fleet.engine.dask_client:
    # distributed's MALLOC_TRIM_THRESHOLD_ makes every large temporary a fresh mmap (slower parses).
    # Its nannies also write that value into this process's environment and leave it there, where a
    # later cluster's workers would inherit it: so it is unset while the workers start, and put back
    # as it was afterwards.  No statistical profiler in the workers: it samples every thread's stack
    # 100 times a second for the dashboard's profile page, which this cluster does not serve (2 % of
    # an idle worker's core).
    with (environment({"MALLOC_TRIM_THRESHOLD_": None}),
          dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                           "distributed.worker.profile.enabled": False})):
        return LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=processes,
                            memory_limit=limit, dashboard_address=None, silence_logs=logging.ERROR)


def _progress(futures: list[Any], label: str, enabled: bool) -> None:
    if not enabled:
        return
    from distributed import as_completed
    from tqdm.auto import tqdm

    for _ in tqdm(as_completed(futures), total=len(futures), desc=label, unit="block", file=sys.stderr):
        pass


def _run_dask(frame: Any, blocks: list[TimerBlock], client: Any,
              progress: bool) -> tuple[_StepPartial, _RankPartial]:
    parts = frame.to_delayed()
    p1 = client.compute([_delayed(_pass1_block)(p, b) for p, b in zip(parts, blocks, strict=True)])
    root = _tree(list(p1), lambda a, b: client.submit(_combine_steps, a, b))
    root = client.submit(_strip_bits, root)
    _progress(p1, "pass 1 (per step)", progress)
    sp = root.result()
    steps_f, max_f = client.scatter([sp.steps, sp.max_s], broadcast=True)
    p2 = client.compute([_delayed(_pass2_block)(p, b, steps_f, max_f)
                         for p, b in zip(parts, blocks, strict=True)])
    root2 = _tree(list(p2), lambda a, b: client.submit(_combine_ranks, a, b))
    _progress(p2, "pass 2 (per rank)", progress)
    rp = root2.result()
    del p1, p2, root, root2
    return sp, rp


def _delayed(fn: Callable[..., Any]) -> Any:
    import dask

    return dask.delayed(fn, pure=True)


def _check_table(table: pd.DataFrame) -> TimerBlock:
    if not isinstance(table, pd.DataFrame):
        raise DomainError(f"source must be a path or a pandas DataFrame; got {type(table).__name__}")
    return TimerBlock("<table>", None, 1, len(table))


def straggler_analysis(source: str | Path | pd.DataFrame, *,
                       engine: Literal["pandas", "dask"] | None = "pandas", client: Any = None,
                       workers: int = 2, threshold: float = DEFAULT_STRAGGLER_THRESHOLD,
                       partition_rows: int = DEFAULT_PARTITION_ROWS,
                       progress: bool = False) -> FleetStragglers:
    """Find stragglers from per-rank step timers: last arrivers, barrier waits, relative scores.

    Parameters
    ----------
    source
        A Parquet/CSV file or folder of files (see :func:`rank_timer_files`), or a table with
        columns ``rank, step, duration_s`` (pandas engine; rows with a bad duration are rejected
        into the ledger with ``file="<table>"`` and 1-based row positions).
    engine
        ``"pandas"`` (in memory), ``"dask"`` (out of core, Parquet only), or None: pandas up to
        :data:`AUTO_DASK_ROWS` rows (from the Parquet metadata), Dask above.
    client
        A :class:`distributed.Client` for the Dask engine; when None a :func:`local_cluster` of
        ``workers`` processes is started and closed again.
    workers
        Worker processes of the cluster started when ``client`` is None.
    threshold
        Relative score below which a rank is flagged ``straggler`` (a fraction in [0, 1]).
    partition_rows
        Rows per Dask partition (whole row groups are packed up to this).
    progress
        Show a progress bar per pass over the blocks on standard error (Dask engine).

    Returns
    -------
    FleetStragglers
        Per-rank and per-step tables, the ledger, the engine used and the files read.

    Raises
    ------
    InputError
        Unreadable input (see :func:`read_rank_timers`); also no usable row at all.
    DomainError
        An unknown engine, a threshold outside [0, 1], a DataFrame given to the Dask engine, CSV
        given to the Dask engine, or a rank whose mean duration is 0.
    """
    thr = check_fraction("threshold", threshold)
    if engine not in (*_ENGINES, None):
        raise DomainError(f"engine must be one of {_ENGINES} or None; got {engine!r}")
    if isinstance(source, pd.DataFrame):
        if engine == "dask":
            raise DomainError("the dask engine reads Parquet files; give a path, or use engine='pandas' "
                              "for a table")
        block = _check_table(source)
        sp = _pass1_block(source, block)
        rp = _pass2_block(source, block, sp.steps, sp.max_s)
        return _finish(sp, rp, sp.ledger, "pandas", [], thr)
    files = rank_timer_files(source)
    if engine is None:
        engine = "dask" if _parquet_rows(files) > AUTO_DASK_ROWS else "pandas"
    if engine == "pandas":
        table, ledger = read_rank_timers(source)
        block = TimerBlock("<table>", None, 1, len(table))
        sp = _pass1_block(table, block, check_duplicates=False)  # the reader checked them
        rp = _pass2_block(table, block, sp.steps, sp.max_s)
        return _finish(sp, rp, ledger, "pandas", [str(f) for f in files], thr)
    frame, blocks = dask_frame(files, partition_rows)  # checks the files before a cluster starts
    own = None
    if client is None:
        from distributed import Client

        own = local_cluster(workers)
        client = Client(own)
    try:
        sp, rp = _run_dask(frame, blocks, client, progress)
    finally:
        if own is not None:
            client.close()
            own.close()
    return _finish(sp, rp, sp.ledger, "dask", [str(f) for f in files], thr)


def _parquet_rows(files: Iterable[Path]) -> int:
    import pyarrow.parquet as pq

    total = 0
    for f in files:
        if is_csv(f):
            return 0  # CSV goes to pandas
        try:
            total += pq.ParquetFile(f).metadata.num_rows
        except Exception:  # unreadable files are reported by the reader itself
            return 0
    return total


# ---------------------------------------------------------------------------------------------------
# Synthetic rank timers with known stragglers
# ---------------------------------------------------------------------------------------------------


def _parse_stragglers(stragglers: Mapping[int, float] | None, ranks: int, seed: int) -> dict[int, float]:
    if stragglers is None:
        k = min(len(DEFAULT_STRAGGLERS), ranks)
        chosen = np.random.default_rng([seed, 0xF1EE7]).choice(ranks, size=k, replace=False)
        return {int(r): s for r, s in zip(sorted(chosen.tolist()), DEFAULT_STRAGGLERS[:k], strict=True)}
    out: dict[int, float] = {}
    for r, s in stragglers.items():
        if isinstance(r, bool) or int(r) != r or not 0 <= int(r) < ranks:
            raise DomainError(f"straggler rank must be a whole number in [0, {ranks}); got {r!r}")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < 1.0:
            raise DomainError(f"slowdown of rank {r} must be a finite number >= 1; got {s!r}")
        out[int(r)] = float(s)
    return out


def synth_rank_timers(out: str | Path, *, ranks: int, steps: int, seed: int = 0,
                      stragglers: Mapping[int, float] | None = None, base_step_s: float = 1.0,
                      noise_sigma: float = 0.05, common_sigma: float = 0.02, transient_rate: float = 0.0,
                      transient_slowdown: float = 3.0, rows_per_group: int = DEFAULT_PARTITION_ROWS,
                      progress: bool = False) -> dict[str, Any]:
    """Write synthetic per-rank step timers with injected stragglers to one Parquet file.

    Rank ``r``'s duration at step ``s`` is ``base_step_s * exp(c_s) * exp(noise_sigma * z_rs) *
    slowdown_r * t_rs`` where ``c_s ~ N(0, common_sigma)`` is shared by every rank of the step (a
    slow data batch, a slow all-reduce), ``z_rs ~ N(0, 1)`` is per-rank noise (lognormal), the
    persistent ``slowdown_r`` is 1 except for the injected stragglers, and ``t_rs`` is
    ``transient_slowdown`` with probability ``transient_rate`` (a one-off slow step) and 1
    otherwise.  Each step's random numbers come from a generator seeded by ``(seed, step)``, so the
    values do not depend on the row-group size.  The file is written a block of whole steps at a
    time (rows in step-major order, ranks ascending), as int32 ``rank`` and ``step`` and float32
    ``duration_s``, so the rows never sit in memory together.

    Parameters
    ----------
    out
        Output Parquet file (its folder must exist).
    ranks, steps
        Grid size (each at least 1); ``ranks`` at most :data:`MAX_RANK` + 1.
    seed
        Random seed.
    stragglers
        ``{rank: slowdown >= 1}``; None injects :data:`DEFAULT_STRAGGLERS` on ranks drawn from the
        seed; ``{}`` injects none.
    base_step_s
        Median step duration of a healthy rank, seconds (> 0).
    noise_sigma, common_sigma
        Standard deviations of the per-rank and per-step log-normal factors (>= 0).
    transient_rate
        Probability of a transient slow (rank, step), in [0, 1].
    transient_slowdown
        Factor of a transient slow step (>= 1).
    rows_per_group
        Target rows per Parquet row group (whole steps, at least one step per group).
    progress
        Show a progress bar over row groups on standard error.

    Returns
    -------
    dict
        ``path``, ``rows``, ``ranks``, ``steps``, ``row_groups``, ``seed``, ``bytes`` (file size),
        ``parameters`` and ``truth``: ``stragglers`` (list of ``{rank, slowdown}``), ``transient``
        (count of transient slow rank-steps) and ``dtypes``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name, v in (("ranks", ranks), ("steps", steps), ("rows_per_group", rows_per_group)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise DomainError(f"{name} must be a whole number >= 1; got {v!r}")
    if ranks > MAX_RANK + 1:
        raise DomainError(f"ranks must be at most {MAX_RANK + 1}; got {ranks}")
    if steps > np.iinfo(np.int32).max:
        raise DomainError(f"steps must fit in int32; got {steps}")
    if not (isinstance(base_step_s, (int, float)) and math.isfinite(base_step_s) and base_step_s > 0):
        raise DomainError(f"base_step_s must be a positive finite number; got {base_step_s!r}")
    for name, v in (("noise_sigma", noise_sigma), ("common_sigma", common_sigma)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise DomainError(f"{name} must be a finite number >= 0; got {v!r}")
    rate = check_fraction("transient_rate", transient_rate)
    if not (isinstance(transient_slowdown, (int, float)) and math.isfinite(transient_slowdown)
            and transient_slowdown >= 1):
        raise DomainError(f"transient_slowdown must be a finite number >= 1; got {transient_slowdown!r}")
    slow = _parse_stragglers(stragglers, int(ranks), int(seed))
    ranks, steps = int(ranks), int(steps)
    factor = np.ones(ranks, np.float64)
    for r, s in slow.items():
        factor[r] = s
    per_group = max(1, int(rows_per_group) // ranks)
    schema = pa.schema([("rank", pa.int32()), ("step", pa.int32()), ("duration_s", pa.float32())])
    rank_col = np.arange(ranks, dtype=np.int32)
    transient = 0
    groups = range(0, steps, per_group)
    if progress:
        from tqdm.auto import tqdm

        groups = tqdm(groups, desc="rank timers", unit="row group", file=sys.stderr)
    path = Path(out)
    with pq.ParquetWriter(path, schema, compression="snappy", use_dictionary=["rank", "step"]) as writer:
        for s0 in groups:
            k = min(per_group, steps - s0)
            dur = np.empty((k, ranks), np.float32)
            for j in range(k):  # one generator per step: values independent of the row-group size
                rng = np.random.default_rng([int(seed), s0 + j])
                common = rng.standard_normal() * common_sigma
                z = rng.standard_normal(ranks, dtype=np.float64)
                row = base_step_s * np.exp(common + noise_sigma * z) * factor
                if rate > 0.0:
                    hits = rng.integers(0, ranks, rng.binomial(ranks, rate))
                    hits = np.unique(hits)
                    row[hits] *= transient_slowdown
                    transient += hits.size
                dur[j] = row
            table = pa.table({"rank": np.tile(rank_col, k),
                              "step": np.repeat(np.arange(s0, s0 + k, dtype=np.int32), ranks),
                              "duration_s": dur.ravel()}, schema=schema)
            writer.write_table(table, row_group_size=k * ranks)
    return {
        "path": str(path),
        "rows": ranks * steps,
        "ranks": ranks,
        "steps": steps,
        "row_groups": len(range(0, steps, per_group)),
        "seed": int(seed),
        "bytes": path.stat().st_size,
        "parameters": {"base_step_s": float(base_step_s), "noise_sigma": float(noise_sigma),
                       "common_sigma": float(common_sigma), "transient_rate": rate,
                       "transient_slowdown": float(transient_slowdown)},
        "truth": {"stragglers": [{"rank": r, "slowdown": s} for r, s in sorted(slow.items())],
                  "transient": int(transient),
                  "dtypes": {"rank": "int32", "step": "int32", "duration_s": "float32"}},
    }
