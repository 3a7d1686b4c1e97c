"""Regimes of a series (fleetlib.regimes): change points, the effect rule and the healthy regime."""

from __future__ import annotations

import numpy as np
import pytest

from fleetlib.regimes import MIN_SHIFT, find_regimes, stacked_regimes


def _noisy(n: int, seed: int, level: float = 10.0, spread: float = 0.02) -> np.ndarray:
    return level * (1.0 + spread * np.random.default_rng(seed).uniform(-1.0, 1.0, n))


def test_a_level_shift_is_found_at_its_step():
    x = _noisy(600, 0)
    x[250:] *= 1.2
    r = find_regimes(x)
    assert r.change_points.tolist() == [250]
    assert r.healthy == 0 and r.baseline == pytest.approx(np.median(x[:250]))
    assert r.levels[1] == pytest.approx(np.median(x[250:]))


def test_an_episode_is_two_change_points_and_the_job_returns_to_health():
    x = _noisy(500, 1)
    x[100:140] *= 1.5
    r = find_regimes(x)
    assert r.change_points.tolist() == [100, 140]
    # both healthy stretches are one regime family: the baseline is their common median
    assert r.baseline == pytest.approx(np.median(np.r_[x[:100], x[140:]]))


def test_scattered_slow_steps_and_small_drifts_are_no_regime():
    rng = np.random.default_rng(2)
    x = np.full(500, 10.0)
    x[rng.choice(500, 50, replace=False)] += rng.uniform(1.0, 10.0, 50)  # isolated slow steps
    assert find_regimes(x).change_points.size == 0
    y = _noisy(800, 3)
    y[400:] *= 1.0 + MIN_SHIFT / 2  # a detectable drift below the effect rule
    assert find_regimes(y).change_points.size == 0


def test_a_burst_of_isolated_slow_steps_at_the_start_is_no_regime():
    # found by the fleet property (32 devices, 11 h, seed 3870, slurm): job 70018's 40 steps at a 10 s
    # fault-free step, its background slow steps (one rank slow, drawn per step) clustered early; 6 of
    # the first 11 are slow, so the Hampel filter keeps them and their median (20 s) was the start's level
    x = np.array([20, 10, 20, 17, 10, 29, 10, 21, 25, 10, 23, 10, 10, 13, 18, 28, 27, 10, 10, 10, 10, 10, 10,
                  10, 10, 22, 10, 10, 10, 10, 10, 10, 10, 28, 10, 10, 10, 10, 24, 22.0])
    r = find_regimes(x)
    assert r.change_points.size == 0 and r.baseline == 10.0
    # a burst at either end with only two of its ten values at the level is no regime either
    rng = np.random.default_rng(8)
    y = np.full(120, 5.0)
    y[rng.choice(np.arange(20, 120), 15, replace=False)] += rng.integers(1, 10, 15)
    y[:10] = [5, 9, 12, 7, 13, 5, 11, 14, 6, 10]
    y[-10:] = y[9::-1]
    assert find_regimes(y).change_points.size == 0 and find_regimes(y).baseline == 5.0


def test_a_job_that_starts_slow_keeps_its_start_unless_a_restart_begins_the_fast_regime():
    x = _noisy(400, 4)
    x[:200] *= 1.3
    assert find_regimes(x).baseline == pytest.approx(np.median(x[:200]))  # started in, never left
    starts = np.zeros(400, bool)
    starts[200] = True  # a restart (onto healthy hardware) opens the fast regime
    assert find_regimes(x, starts).baseline == pytest.approx(np.median(x[200:]))


def test_stacked_series_are_cut_independently():
    a, b, c = _noisy(300, 5), _noisy(8, 6), np.zeros(0)
    a[150:] *= 0.7
    cut = stacked_regimes(np.r_[a, b, c], np.array([0, 300, 308, 308]))
    out = [cut.of(j) for j in range(3)]
    assert out[0].change_points.tolist() == [150]
    assert out[1].change_points.size == 0 and out[1].baseline == pytest.approx(np.median(b))
    assert out[2].healthy == -1 and np.isnan(out[2].baseline)
    # a job that got faster and never returned: the start is the healthy regime (the rule's letter)
    assert out[0].healthy == 0
    assert cut.offsets.tolist() == [0, 2, 3, 3] and cut.first.tolist() == [0, 150, 0]
    assert cut.length.tolist() == [150, 150, 8] and cut.baseline[0] == out[0].baseline


def test_a_long_series_is_searched_on_blocks_and_the_change_placed_at_its_step():
    x = _noisy(100_000, 7)
    x[37_003:] *= 1.15
    r = find_regimes(x)
    # searched on medians of 25-value blocks, then placed by the least squared error between them
    assert len(r.change_points) == 1 and abs(int(r.change_points[0]) - 37_003) <= 3
    assert r.baseline == pytest.approx(np.median(x[:37_003]))
