"""Regimes of a series along time: where its level shifts, and which level is the healthy one.

A training job's step time is not one number. A node that turns slow and stays slow, a stretch of
slow steps that ends, a restart onto better hardware: each moves the level of the series for a
while. This module cuts one series -- or many, stacked with offsets -- into *regimes* of constant
level and names the *healthy* one, the level the job's fault-free step time is read from.

The rule, for each series (in order):

1. **Robust copy.** A Hampel filter (a window of ``2 * min_size + 1`` values) replaces each value
   more than :data:`HAMPEL_K` scaled median absolute deviations from its window's median by that
   median. Isolated slow steps are then no regime; a level held for more than ``min_size`` values
   is kept.  (Where isolated values fill half a window or more, the window's median is theirs and
   they stay: step 4 tells such a burst from a level.)
2. **Shortcut.** When the robust copy's range is under ``min_shift`` of its smallest value, no two
   regimes can differ by ``min_shift`` (every regime's level lies inside that range): the series is
   one regime, and the search is skipped (the filter too, when the raw range is that narrow: the
   robust copy's values lie inside it).
3. **Change points.** PELT with the squared-error cost (``ruptures.KernelCPD`` with the linear
   kernel, compiled in C) on the robust copy scaled by its noise: ``1.4826 x`` the median absolute
   first difference over ``sqrt(2)`` (first differences do not see level shifts), at least
   :data:`NOISE_FLOOR` of the median. The penalty per change point is ``PENALTY_PER_LOG_N x ln(n)``
   (a modified BIC: on a scaled series a change needs its cost reduction above that many times
   ``ln(n)``); no regime is shorter than ``min_size``. A series longer than :data:`SEARCH_POINTS`
   is searched on the medians of consecutive blocks (at most that many; PELT's cost grows faster
   than the series), and each change point found is then moved to the value that splits its two
   neighbouring blocks with the least squared error.
4. **Effect.** Adjacent regimes whose robust copies' lower tails -- their
   :data:`COMPARE_QUANTILE` quantiles, a tenth of the way up -- differ by less than ``min_shift``
   of the smaller one are merged, the closest pair first, until every boundary left is a shift of
   at least ``min_shift``: a detectable but immaterial drift is not a slow-down.  The lower tail,
   not the median, because slow steps only add time.  Where isolated slow values cluster (half a
   Hampel window or more, most easily in the short one-sided window at a series' ends) the filter
   keeps them, PELT cuts the cluster off as a regime, and its median lands on the slow values.
   While at least a tenth of such a stretch still sits at its neighbour's level, though, its lower
   tail stays there: a stretch that mixes its neighbour's level with isolated slow values is no
   level shift.  A level the job ran at moves every value, the lower tail with them.  (A stretch
   ramping down into a faster level merges into it the same way.)
5. **Healthy regime.** A regime is a *start* when it begins the series or at a given run start (a
   restart), and a *return* when its level is within ``min_shift`` of an earlier regime's. Among the
   starts and returns that are *sustained* (together with the regimes of the same level, at least
   ``min(SUSTAINED_STEPS, n / 10)`` values and ``min_size``), the fastest is healthy; with none
   sustained, the longest start or return. Its level is the median (or mean) of the raw values of
   every regime within ``min_shift`` of it.

Each regime's level is the median (or mean) of its raw values, so a regime's level is what the
records say, not the robust copy's.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

__all__ = [
    "COMPARE_QUANTILE",
    "HAMPEL_K",
    "MIN_SHIFT",
    "MIN_SIZE",
    "NOISE_FLOOR",
    "PENALTY_PER_LOG_N",
    "SEARCH_POINTS",
    "SUSTAINED_STEPS",
    "Regimes",
    "StackedRegimes",
    "find_regimes",
    "stacked_regimes",
]

#: Smallest relative level shift reported as a change (5 %: below, a drift, not a slow-down).
MIN_SHIFT = 0.05
#: Quantile of a regime's robust copy that the effect rule compares (a low one: a burst of isolated
#: slow values that leaves a tenth of a stretch at its neighbour's level does not move it).
COMPARE_QUANTILE = 0.1
#: Fewest values of one regime (and the Hampel filter's half window).
MIN_SIZE = 10
#: Hampel filter threshold, in scaled median absolute deviations of the window.
HAMPEL_K = 3.0
#: Floor of the noise scale, as a share of the series' median (a constant series has no noise).
NOISE_FLOOR = 1e-3
#: PELT penalty per change point on the noise-scaled series, in units of ln(n).
PENALTY_PER_LOG_N = 3.0
#: Values a regime needs (or a tenth of the series, if fewer) to be a candidate for the healthy one.
SUSTAINED_STEPS = 50
#: Longest series PELT searches value by value; a longer one is searched on block medians and refined.
SEARCH_POINTS = 4096

_MAD_SCALE = 1.4826  # a normal distribution's standard deviation per median absolute deviation


@dataclass(frozen=True)
class Regimes:
    """One series cut into regimes of constant level.

    Attributes
    ----------
    bounds
        Index of each regime's first value, then the series' length (``len(levels) + 1`` values,
        increasing; an empty series has ``[0]``).
    levels
        Each regime's level: the median (or mean) of its raw values.
    healthy
        Index of the healthy regime (-1: empty series).
    baseline
        The healthy level: the median (or mean) of the raw values of every regime within
        ``min_shift`` of the healthy one (NaN: empty series).
    """

    bounds: np.ndarray
    levels: np.ndarray
    healthy: int
    baseline: float

    @property
    def change_points(self) -> np.ndarray:
        """Index of the first value of each regime but the first."""
        return self.bounds[1:-1]


@njit(cache=True)
def _insert(buf: np.ndarray, count: int, value: float) -> None:
    """Insert ``value`` into the sorted ``buf[:count]`` (room for one more)."""
    i = count
    while i > 0 and buf[i - 1] > value:
        buf[i] = buf[i - 1]
        i -= 1
    buf[i] = value


@njit(cache=True)
def _remove(buf: np.ndarray, count: int, value: float) -> None:
    """Remove one copy of ``value`` from the sorted ``buf[:count]``."""
    i = np.searchsorted(buf[:count], value)
    for q in range(i, count - 1):
        buf[q] = buf[q + 1]


@njit(cache=True)
def _median_and_mad(buf: np.ndarray, count: int) -> tuple[float, float]:
    """Median of the sorted ``buf[:count]`` and median absolute deviation from it (as ``np.median``)."""
    h = count // 2
    m = buf[h] if count % 2 else 0.5 * (buf[h - 1] + buf[h])
    # the distances from the median, ascending, are two sorted runs merged: below it and above it
    lo, hi = (h, h + 1) if count % 2 else (h - 1, h)
    first, second = (count - 1) // 2, count // 2
    d_first = d = 0.0
    for t in range(second + 1):
        if hi >= count or (lo >= 0 and m - buf[lo] <= buf[hi] - m):
            d = m - buf[lo]
            lo -= 1
        else:
            d = buf[hi] - m
            hi += 1
        if t == first:
            d_first = d
    return m, 0.5 * (d_first + d)


@njit(cache=True)
def _robust_copies(values: np.ndarray, offsets: np.ndarray, half: int, k: float,
                   min_shift: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hampel-filter each series; return the copy, whether to search each series, its median and mean.

    The window slides over a sorted buffer (one value in, one out per step). A series is not searched
    where the shortcut applies (one regime: the copy's range is under ``min_shift`` of its smallest
    value, or the series is shorter than two regimes).
    """
    n_series = offsets.shape[0] - 1
    out = values.copy()
    search = np.zeros(n_series, np.bool_)
    medians = np.full(n_series, np.nan)
    means = np.full(n_series, np.nan)
    buf = np.empty(2 * half + 2)
    for j in range(n_series):
        lo, hi = offsets[j], offsets[j + 1]
        n = hi - lo
        if n == 0:
            continue
        x = values[lo:hi]
        medians[j] = np.median(x)
        means[j] = x.mean()
        # the robust copy's values lie within the raw range: a narrow raw range is one regime already
        if n < 2 * half or x.max() - x.min() < min_shift * x.min():
            continue
        count = 0
        for q in range(min(n, half)):  # the first window is [0, half]; each step adds i + half
            _insert(buf, count, x[q])
            count += 1
        for i in range(n):
            if i + half < n:
                _insert(buf, count, x[i + half])
                count += 1
            if i - half - 1 >= 0:
                _remove(buf, count, x[i - half - 1])
                count -= 1
            m, mad = _median_and_mad(buf, count)
            if abs(x[i] - m) > k * _MAD_SCALE * mad:
                out[lo + i] = m
        y = out[lo:hi]
        low, high = y.min(), y.max()
        search[j] = not high - low < min_shift * low
    return out, search, medians, means


def _merge_small_shifts(bounds: list[int], y: np.ndarray, min_shift: float) -> list[int]:
    """Merge adjacent regimes whose robust lower tails differ by under ``min_shift``, closest first."""
    marks = [float(np.quantile(y[a:b], COMPARE_QUANTILE)) for a, b in _pairs(bounds)]
    while len(marks) > 1:
        gaps = [abs(marks[i + 1] - marks[i]) / max(min(marks[i], marks[i + 1]), 1e-300)
                for i in range(len(marks) - 1)]
        i = int(np.argmin(gaps))
        if gaps[i] >= min_shift:
            break
        del bounds[i + 1]
        marks[i:i + 2] = [float(np.quantile(y[bounds[i]:bounds[i + 1]], COMPARE_QUANTILE))]
    return bounds


def _pelt(y: np.ndarray, min_size: int) -> list[int]:
    """Return PELT's regime bounds of ``y`` (``[0, ..., len(y)]``) on its noise-scaled values."""
    import ruptures  # imported on the first search, not with the package

    n = y.shape[0]
    noise = max(_MAD_SCALE * float(np.median(np.abs(np.diff(y)))) / math.sqrt(2.0),
                NOISE_FLOOR * abs(float(np.median(y))))
    if not noise > 0.0:
        return [0, n]
    algo = ruptures.KernelCPD(kernel="linear", min_size=min_size, jump=1)
    found = algo.fit((y / noise).reshape(-1, 1)).predict(pen=PENALTY_PER_LOG_N * math.log(n))
    return [0, *(int(b) for b in found)]


def _refine(y: np.ndarray, at: int, lo: int, hi: int) -> int:
    """Return the split of ``y[lo:hi]`` with the least squared error of two constant pieces, near ``at``."""
    piece = y[lo:hi]
    if piece.size < 2:
        return at
    s1, s2 = np.cumsum(piece), np.cumsum(piece * piece)
    k = np.arange(1, piece.size)  # split after k values
    left = s2[k - 1] - s1[k - 1] ** 2 / k
    right = (s2[-1] - s2[k - 1]) - (s1[-1] - s1[k - 1]) ** 2 / (piece.size - k)
    return lo + int(k[np.argmin(left + right)])


def _pairs(bounds: list[int]) -> list[tuple[int, int]]:
    """Return consecutive pairs ``(bounds[i], bounds[i + 1])``."""
    return list(itertools.pairwise(bounds))


def _level(x: np.ndarray, median: bool) -> float:
    return float(np.median(x)) if median else float(x.mean())


def _healthy(bounds: list[int], levels: np.ndarray, starts: set[int], n: int, min_shift: float,
             min_size: int) -> int:
    """Index of the healthy regime (see the module docstring, step 5)."""
    m = levels.shape[0]
    close = np.abs(levels[:, None] - levels[None, :]) < min_shift * np.minimum(levels[:, None],
                                                                             levels[None, :])
    sizes = np.diff(np.asarray(bounds))
    candidates = [r for r in range(m) if bounds[r] in starts or close[r, :r].any()]
    need = max(min(SUSTAINED_STEPS, n / 10.0), float(min_size))
    sustained = [r for r in candidates if sizes[close[r]].sum() >= need]
    if sustained:
        return min(sustained, key=lambda r: (levels[r], r))
    return max(candidates, key=lambda r: (sizes[r], -r))


@dataclass(frozen=True)
class StackedRegimes:
    """Many series cut into regimes (:func:`stacked_regimes`), regime by regime, series after series.

    Attributes
    ----------
    offsets
        Series ``j``'s regimes are rows ``offsets[j]:offsets[j + 1]`` (none for an empty series).
    first, length
        Per regime: index of its first value in its series, and its number of values.
    levels
        Per regime: the median (or mean) of its raw values.
    healthy
        Per series: index of the healthy regime among its own (-1: empty series).
    baseline
        Per series: the healthy level (NaN: empty series).
    """

    offsets: np.ndarray
    first: np.ndarray
    length: np.ndarray
    levels: np.ndarray
    healthy: np.ndarray
    baseline: np.ndarray

    def of(self, j: int) -> Regimes:
        """Return series ``j``'s regimes."""
        lo, hi = int(self.offsets[j]), int(self.offsets[j + 1])
        if hi == lo:
            return Regimes(np.zeros(1, np.int64), np.zeros(0), -1, math.nan)
        bounds = np.append(self.first[lo:hi], self.first[hi - 1] + self.length[hi - 1])
        return Regimes(bounds, self.levels[lo:hi].copy(), int(self.healthy[j]), float(self.baseline[j]))


def stacked_regimes(values: np.ndarray, offsets: np.ndarray, run_starts: np.ndarray | None = None, *,
                    min_shift: float = MIN_SHIFT, min_size: int = MIN_SIZE,
                    estimator: str = "median") -> StackedRegimes:
    """Cut each of many stacked series into regimes (the module docstring's rule).

    Parameters
    ----------
    values
        The series one after another (float).
    offsets
        Series ``j`` is ``values[offsets[j]:offsets[j + 1]]`` (``n_series + 1`` increasing values).
    run_starts
        Optional booleans beside ``values``: True where a run begins (a restart); a regime that
        begins there is a start, as the first regime is.
    min_shift
        Smallest relative level shift kept as a change (default :data:`MIN_SHIFT`).
    min_size
        Fewest values of one regime (default :data:`MIN_SIZE`).
    estimator
        ``"median"`` or ``"mean"``: how a regime's level is read from its raw values.

    Returns
    -------
    StackedRegimes
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    median = estimator != "mean"
    robust, search, medians, means = _robust_copies(values, offsets, int(min_size), HAMPEL_K,
                                                    float(min_shift))
    sizes = np.diff(offsets)
    whole = medians if median else means  # a series of one regime: its level is the whole series'
    searched = {}
    for j in np.flatnonzero(search).tolist():
        lo, hi = int(offsets[j]), int(offsets[j + 1])
        starts = None if run_starts is None else run_starts[lo:hi]
        searched[j] = _search(values[lo:hi], robust[lo:hi], starts, min_shift, int(min_size), median)
    count = (sizes > 0).astype(np.int64)
    for j, (bounds, _, _, _) in searched.items():
        count[j] = len(bounds) - 1
    reg_off = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(count, out=reg_off[1:])
    one = (count == 1) & ~np.isin(np.arange(sizes.size), list(searched))
    first = np.zeros(int(reg_off[-1]), np.int64)
    length = np.zeros(int(reg_off[-1]), np.int64)
    levels = np.zeros(int(reg_off[-1]))
    length[reg_off[:-1][one]] = sizes[one]
    levels[reg_off[:-1][one]] = whole[one]
    healthy = np.where(sizes > 0, 0, -1).astype(np.int64)
    baseline = np.where(sizes > 0, whole, np.nan)
    for j, (bounds, lv, h, base) in searched.items():
        r = slice(int(reg_off[j]), int(reg_off[j + 1]))
        first[r] = bounds[:-1]
        length[r] = np.diff(bounds)
        levels[r] = lv
        healthy[j], baseline[j] = h, base
    return StackedRegimes(reg_off, first, length, levels, healthy, baseline)


def _search(x: np.ndarray, y: np.ndarray, run_starts: np.ndarray | None, min_shift: float, min_size: int,
            median: bool) -> tuple[list[int], np.ndarray, int, float]:
    """Cut one series (raw ``x``, robust copy ``y``) into regimes: bounds, levels, healthy, baseline.

    A series longer than :data:`SEARCH_POINTS` is searched on the medians of consecutive blocks of
    values (at most that many), and each change point found is then placed at the value that splits
    its two neighbouring blocks with the least squared error.
    """
    n = x.shape[0]
    block = max(1, math.ceil(n / SEARCH_POINTS))
    if block == 1:
        bounds = _merge_small_shifts(_pelt(y, min_size), y, min_shift)
    else:
        m = n // block
        coarse = np.median(y[:m * block].reshape(m, block), axis=1)
        coarse[-1] = np.median(y[(m - 1) * block:])  # the last block takes the remainder
        cut = _merge_small_shifts(_pelt(coarse, max(2, math.ceil(min_size / block))), coarse, min_shift)
        bounds = [0]
        for b in cut[1:-1]:
            lo = max(bounds[-1] + min_size, (b - 1) * block)
            hi = min(n - min_size, (b + 1) * block)
            bounds.append(_refine(y, b * block, lo, hi) if hi - lo >= 2 else b * block)
        bounds.append(n)
    levels = np.array([_level(x[a:b], median) for a, b in _pairs(bounds)])
    starts = {0} if run_starts is None else {0, *np.flatnonzero(run_starts).tolist()}
    h = _healthy(bounds, levels, starts, n, min_shift, min_size)
    family = [r for r in range(levels.shape[0])
              if abs(levels[r] - levels[h]) < min_shift * min(levels[r], levels[h])]
    base = _level(np.concatenate([x[bounds[r]:bounds[r + 1]] for r in family]), median)
    return bounds, levels, h, base


def find_regimes(values: np.ndarray, run_starts: np.ndarray | None = None, *, min_shift: float = MIN_SHIFT,
                 min_size: int = MIN_SIZE, estimator: str = "median") -> Regimes:
    """Cut one series into regimes; see :func:`stacked_regimes` (this is its one-series case).

    Parameters
    ----------
    values
        The series, in order.
    run_starts
        Optional booleans beside ``values``: True where a run begins.
    min_shift, min_size, estimator
        As :func:`stacked_regimes`.

    Returns
    -------
    Regimes
    """
    values = np.asarray(values, dtype=np.float64)
    starts = None if run_starts is None else np.asarray(run_starts, dtype=bool)
    return stacked_regimes(values, np.array([0, values.shape[0]]), starts, min_shift=min_shift,
                           min_size=min_size, estimator=estimator).of(0)
