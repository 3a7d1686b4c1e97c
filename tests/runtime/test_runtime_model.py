"""Unit and property tests for fleetlib.runtime.model (equation 4, Young/Daly, ETTR, size sweep)."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.quality import DomainError
from fleetlib.runtime import model

MIN = 60.0
HOUR = 3600.0
DAY = 86400.0

# the running example (napkin 9.3), in seconds
EXAMPLE = {
    "held_s": 7 * DAY,
    "startup_s": 5.2 * MIN,
    "data_stall": 0.05 / 0.65,
    "checkpoint_write_s": 9.8,
    "mtbf_s": 302 * HOUR,
    "recovery_s": 6.2 * MIN,
    "preemptions_per_s": 1 / DAY,
    "preemption_tax_s": 20.2 * MIN,
}
SWEEP = {
    "base_devices": 128,
    "mtbf_h_at_base": 302.0,
    "checkpoint_write_s": 9.8,
    "recovery_s": 6.2 * MIN,
    "startup_s": 5.2 * MIN,
    "held_s": 7 * DAY,
    "data_stall": 0.05 / 0.65,
    "preemptions_per_s": 1 / DAY,
    "preemption_tax_s": 20.2 * MIN,
}


def terms(**overrides):
    return model.runtime_loss_terms(**{**EXAMPLE, **overrides})


# ---------------------------------------------------------------------------------------------------
# Equation 4
# ---------------------------------------------------------------------------------------------------


def test_terms_by_hand():
    t = terms(interval_s=77 * MIN)
    assert t.startup == pytest.approx(312 / 604800)
    assert t.input_wait == pytest.approx(1 / 13)
    assert t.checkpoint_write == pytest.approx(9.8 / 4620)
    assert t.checkpoint_rework == pytest.approx(4620 / (2 * 302 * 3600))
    assert t.checkpoint == pytest.approx(t.checkpoint_write + t.checkpoint_rework)
    assert t.recovery == pytest.approx(372 / (302 * 3600))
    assert t.preemption == pytest.approx(1212 / 86400)
    assert t.total == pytest.approx(312 / 604800 + 1 / 13 + 9.8 / 4620 + 4620 / 2174400 + 372 / 1087200
                                    + 1212 / 86400)
    assert t.runtime_goodput == pytest.approx(1 - t.total)
    assert t.interval_s == 77 * MIN
    assert list(t.terms()) == ["startup", "input_wait", "checkpoint", "recovery", "preemption"]


def test_interval_none_is_young_on_hardware_mtbf():
    t = terms()
    assert t.interval_s == pytest.approx(math.sqrt(2 * 9.8 * 302 * 3600))
    # at Young's optimum the write and rework shares are equal
    assert t.checkpoint_write == pytest.approx(t.checkpoint_rework)
    assert t.checkpoint == pytest.approx(math.sqrt(2 * 9.8 / (302 * 3600)))


def test_preemption_aware_interval_trades_writes_for_rework():
    tau = model.interval_with_preemptions_s(9.8, 302 * HOUR, 1 / DAY)
    t = terms(interval_s=tau)
    base = terms()
    # shorter interval: more write pauses, less hardware rework (preemption rework stays in the tax)
    assert t.checkpoint_write > base.checkpoint_write
    assert t.checkpoint_rework < base.checkpoint_rework
    assert t.preemption == base.preemption


def test_to_dict_is_json_ready():
    t = terms(preemptions_per_s=12 / DAY)
    d = t.to_dict()
    assert set(d) == {"startup", "input_wait", "checkpoint_write", "checkpoint_rework", "checkpoint",
                      "recovery", "preemption", "total", "runtime_goodput", "interval_s", "warnings"}
    assert isinstance(d["warnings"], list) and len(d["warnings"]) == 1
    assert json.loads(json.dumps(d))["total"] == pytest.approx(t.total)


def test_warning_only_above_ten_percent():
    # preemption share exactly 10 %: no warning; just above: a warning naming the term
    at = terms(preemptions_per_s=1 / DAY, preemption_tax_s=0.10 * DAY)
    assert at.preemption == pytest.approx(0.10)
    assert at.warnings == ()
    above = terms(preemptions_per_s=1 / DAY, preemption_tax_s=0.11 * DAY)
    assert len(above.warnings) == 1 and above.warnings[0].startswith("preemption")
    two = terms(data_stall=0.2, startup_s=0.15 * 7 * DAY)
    assert [w.split()[0] for w in two.warnings] == ["startup", "input_wait"]


def test_each_input_moves_only_its_own_term():
    """Junction rules: no input reaches two terms, so no lost second is charged twice."""
    base = terms(interval_s=60 * MIN).terms()
    changes = {
        "startup_s": ("startup", 20 * MIN),
        "data_stall": ("input_wait", 0.2),
        "checkpoint_write_s": ("checkpoint", 30.0),
        "recovery_s": ("recovery", 30 * MIN),
        "preemption_tax_s": ("preemption", 40 * MIN),
        "preemptions_per_s": ("preemption", 3 / DAY),
    }
    for arg, (term, value) in changes.items():
        moved = terms(interval_s=60 * MIN, **{arg: value}).terms()
        differing = [k for k in base if moved[k] != base[k]]
        assert differing == [term], arg
    # a restart after a failure is in recovery_s only: the startup term is untouched by recovery
    assert terms(recovery_s=0.0).startup == terms(recovery_s=1 * HOUR).startup


def test_preemption_tax_composition():
    assert model.preemption_tax_s(900, 312) == pytest.approx(1212)
    assert model.preemption_tax_s(0, 0) == 0
    with pytest.raises(DomainError, match="lost_work_s"):
        model.preemption_tax_s(-1, 312)
    with pytest.raises(DomainError, match="startup_s"):
        model.preemption_tax_s(900, -1)


@pytest.mark.parametrize(("override", "match"), [
    ({"held_s": 0.0}, "held_s"),
    ({"held_s": -5.0}, "held_s"),
    ({"startup_s": -1.0}, "startup_s"),
    ({"startup_s": 8 * DAY}, "longer than held_s"),
    ({"data_stall": 1.0}, r"\[0, 1\)"),
    ({"data_stall": -0.01}, "data_stall"),
    ({"data_stall": 1.2}, "data_stall"),
    ({"checkpoint_write_s": -9.8}, "checkpoint_write_s"),
    ({"mtbf_s": 0.0}, "mtbf_s"),
    ({"mtbf_s": float("nan")}, "finite"),
    ({"recovery_s": -1.0}, "recovery_s"),
    ({"preemptions_per_s": -1e-6}, "preemptions_per_s"),
    ({"preemption_tax_s": -1.0}, "preemption_tax_s"),
    ({"interval_s": 0.0}, "interval_s"),
    ({"interval_s": 303 * HOUR}, "longer than the MTBF"),
    ({"checkpoint_write_s": 0.0}, "checkpoint_s"),  # Young's optimum of a free checkpoint
    ({"preemptions_per_s": 2 / DAY, "preemption_tax_s": 0.5 * DAY}, "measure runtime goodput"),
])
def test_runtime_loss_terms_rejects(override, match):
    with pytest.raises(DomainError, match=match):
        terms(**override)


def test_free_checkpoint_with_explicit_interval_is_rework_only():
    t = terms(checkpoint_write_s=0.0, interval_s=30 * MIN)
    assert t.checkpoint_write == 0.0
    assert t.checkpoint == pytest.approx(1800 / (2 * 302 * 3600))


durations = st.floats(min_value=0.0, max_value=600.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(
    held_h=st.floats(min_value=1.0, max_value=2000.0),
    startup_frac=st.floats(min_value=0.0, max_value=0.1),
    stall=st.floats(min_value=0.0, max_value=0.3),
    write_s=st.floats(min_value=0.1, max_value=120.0),
    mtbf_h=st.floats(min_value=2.0, max_value=5000.0),
    recovery_s=durations,
    per_day=st.floats(min_value=0.0, max_value=5.0),
    tax_s=durations,
)
def test_terms_nonnegative_and_sum(held_h, startup_frac, stall, write_s, mtbf_h, recovery_s, per_day,
                                   tax_s):
    t = model.runtime_loss_terms(held_s=held_h * HOUR, startup_s=startup_frac * held_h * HOUR,
                                 data_stall=stall, checkpoint_write_s=write_s, mtbf_s=mtbf_h * HOUR,
                                 recovery_s=recovery_s, preemptions_per_s=per_day / DAY,
                                 preemption_tax_s=tax_s)
    five = t.terms()
    assert all(v >= 0.0 for v in five.values())
    assert t.total == pytest.approx(sum(five.values()), rel=1e-12, abs=1e-15)
    assert t.checkpoint == pytest.approx(t.checkpoint_write + t.checkpoint_rework, rel=1e-12)
    assert t.runtime_goodput == pytest.approx(1.0 - t.total, abs=1e-15)
    assert 0.0 < t.runtime_goodput <= 1.0
    flagged = {w.split()[0] for w in t.warnings}
    assert flagged == {k for k, v in five.items() if v > model.FIRST_ORDER_TERM_LIMIT}


# ---------------------------------------------------------------------------------------------------
# Young and Daly
# ---------------------------------------------------------------------------------------------------


def test_young_interval_and_waste_by_hand():
    assert model.young_interval_s(50.0, 10_000.0) == pytest.approx(1000.0)
    assert model.young_waste(50.0, 1000.0, 10_000.0) == pytest.approx(0.05 + 0.05)
    assert model.young_waste(0.0, 1000.0, 10_000.0) == pytest.approx(0.05)
    # interval equal to the MTBF is the edge of the domain, still allowed
    assert model.young_waste(50.0, 10_000.0, 10_000.0) == pytest.approx(0.005 + 0.5)


@pytest.mark.parametrize(("args", "match"), [
    ((10.0, 1001.0, 1000.0), "longer than the MTBF"),
    ((-1.0, 100.0, 1000.0), "checkpoint_s"),
    ((10.0, 0.0, 1000.0), "interval_s"),
    ((10.0, -5.0, 1000.0), "interval_s"),
    ((10.0, 100.0, 0.0), "mtbf_s"),
])
def test_young_waste_rejects(args, match):
    with pytest.raises(DomainError, match=match):
        model.young_waste(*args)


@pytest.mark.parametrize(("args", "match"), [
    ((0.0, 1000.0), "checkpoint_s"),
    ((-1.0, 1000.0), "checkpoint_s"),
    ((10.0, 0.0), "mtbf_s"),
    ((501.0, 1000.0), "daly_interval_s"),  # optimum would exceed the MTBF
])
def test_young_interval_rejects(args, match):
    with pytest.raises(DomainError, match=match):
        model.young_interval_s(*args)


@settings(max_examples=60, deadline=None)
@given(
    c=st.floats(min_value=1e-2, max_value=1e3),
    ratio=st.floats(min_value=2.0, max_value=1e7),
    k=st.floats(min_value=0.01, max_value=100.0),
)
def test_young_waste_minimised_at_young_interval(c, ratio, k):
    m = c * ratio
    tau_star = model.young_interval_s(c, m)
    best = model.young_waste(c, tau_star, m)
    tau = min(tau_star * k, m)
    assert model.young_waste(c, tau, m) >= best * (1 - 1e-12)
    assert best == pytest.approx(math.sqrt(2 * c / m), rel=1e-9)


@pytest.mark.parametrize(("mtbf_min", "published_min"), [(24 * 60, 117), (6 * 60, 57), (15, 9.1)])
def test_daly_published_checks(mtbf_min, published_min):
    # Daly (2006): delta = 5 min, R = 10 min
    tau = model.daly_interval_s(5 * MIN, 10 * MIN, mtbf_min * MIN) / MIN
    assert tau == pytest.approx(published_min, abs=0.5 if published_min > 10 else 0.05)


def test_daly_large_checkpoint_branch():
    assert model.daly_interval_s(2000.0, 0.0, 1000.0) == 1000.0
    assert model.daly_interval_s(5000.0, 60.0, 1000.0) == 1000.0
    # just below the branch point the formula still applies and stays finite and positive
    assert 0 < model.daly_interval_s(1999.0, 0.0, 1000.0) < 5000


@pytest.mark.parametrize(("args", "match"), [
    ((0.0, 10.0, 1000.0), "checkpoint_s"),
    ((10.0, -1.0, 1000.0), "restart_s"),
    ((10.0, 10.0, 0.0), "mtbf_s"),
])
def test_daly_interval_rejects(args, match):
    with pytest.raises(DomainError, match=match):
        model.daly_interval_s(*args)


@pytest.mark.parametrize(("c", "r", "m"), [
    (300.0, 600.0, 24 * HOUR), (300.0, 600.0, 6 * HOUR), (300.0, 600.0, 15 * MIN),
    (9.8, 372.0, 302 * HOUR), (100.0, 0.0, 1000.0), (600.0, 60.0, 1200.0),
])
def test_daly_interval_minimises_expected_wall_time(c, r, m):
    """Second method: a dense numeric scan of Daly's expected wall time."""
    grid = np.geomspace(1e-3 * m, 5 * m, 200_001)
    wall = model.daly_expected_wall_s(1000 * HOUR, c, r, m, grid)
    assert isinstance(wall, np.ndarray) and wall.shape == grid.shape
    best_tau = grid[np.argmin(wall)]
    tau = model.daly_interval_s(c, r, m)
    at_daly = model.daly_expected_wall_s(1000 * HOUR, c, r, m, tau)
    assert isinstance(at_daly, float)
    # Daly's estimate is within 1 % of the true minimiser and costs < 0.01 % extra wall time
    assert tau == pytest.approx(best_tau, rel=0.01)
    assert at_daly <= wall.min() * (1 + 1e-4)
    # restart scales the wall time but does not move its minimiser
    no_restart = model.daly_expected_wall_s(1000 * HOUR, c, 0.0, m, grid)
    assert grid[np.argmin(no_restart)] == best_tau


def test_daly_expected_wall_time_by_hand_and_limits():
    # M e^{R/M} (e^{(tau+C)/M} - 1) W / tau with M=1000, R=0, tau=100, C=10, W=1000
    got = model.daly_expected_wall_s(1000.0, 10.0, 0.0, 1000.0, 100.0)
    assert got == pytest.approx(1000 * math.expm1(0.11) * 10)
    # failure-free limit: wall time -> work x (1 + C / tau)
    assert model.daly_expected_wall_s(1000.0, 10.0, 0.0, 1e12, 100.0) == pytest.approx(1100.0, rel=1e-6)
    with pytest.raises(DomainError, match="overflows"):
        model.daly_expected_wall_s(1000.0, 10.0, 0.0, 1.0, 1e4)
    with pytest.raises(DomainError, match="work_s"):
        model.daly_expected_wall_s(-1.0, 10.0, 0.0, 1000.0, 100.0)
    with pytest.raises(DomainError, match="interval_s"):
        model.daly_expected_wall_s(1.0, 10.0, 0.0, 1000.0, [100.0, 0.0])


@settings(max_examples=40, deadline=None)
@given(c=st.floats(min_value=1e-2, max_value=1e3), ratio=st.floats(min_value=50.0, max_value=1e8))
def test_daly_approaches_young_for_small_checkpoints(c, ratio):
    m = c * ratio
    x = c / (2 * m)
    rel_gap = abs(model.daly_interval_s(c, 0.0, m) / model.young_interval_s(c, m) - 1)
    # exact difference is (2/3) sqrt(x) - x/9, so it vanishes like sqrt(C / 2M)
    assert rel_gap <= math.sqrt(x)


# ---------------------------------------------------------------------------------------------------
# Preemptions as interruptions
# ---------------------------------------------------------------------------------------------------


def test_effective_mtbf_and_interval():
    assert model.effective_interruption_mtbf_s(1000.0, 0.0) == 1000.0
    assert model.effective_interruption_mtbf_s(1000.0, 1 / 1000) == pytest.approx(500.0)
    assert model.interval_with_preemptions_s(10.0, 1000.0, 1 / 1000) == pytest.approx(100.0)
    with pytest.raises(DomainError, match="preemptions_per_s"):
        model.effective_interruption_mtbf_s(1000.0, -1.0)
    with pytest.raises(DomainError, match="mtbf_s"):
        model.interval_with_preemptions_s(10.0, 0.0, 0.0)


@settings(max_examples=40, deadline=None)
@given(
    lam1=st.floats(min_value=0.0, max_value=10.0),
    extra=st.floats(min_value=1e-3, max_value=10.0),
    mtbf_h=st.floats(min_value=1.0, max_value=1e4),
)
def test_interval_shrinks_as_preemption_rate_grows(lam1, extra, mtbf_h):
    c, m = 9.8, mtbf_h * HOUR
    slow = model.interval_with_preemptions_s(c, m, lam1 / DAY)
    fast = model.interval_with_preemptions_s(c, m, (lam1 + extra) / DAY)
    assert fast < slow <= model.young_interval_s(c, m) * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------------
# Meta's expected ETTR
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("gpus", "mttf_h"), [(16_384, 1.80), (131_072, 0.225), (1024, 28.8)])
def test_kokolis_mttf_projections(gpus, mttf_h):
    # RSC-1: 6.50 failures per 1000 node-days, 8 GPUs per node
    assert model.mttf_from_node_failure_rate_s(gpus / 8, 6.5e-3) / HOUR == pytest.approx(mttf_h, rel=0.005)


@pytest.mark.parametrize(("interval_min", "published"), [(60, 0.7), (5, 0.93)])
def test_kokolis_16k_example(interval_min, published):
    m = model.mttf_from_node_failure_rate_s(2048, 6.5e-3)
    e = model.expected_ettr(mttf_s=m, restart_s=5 * MIN, checkpoint_write_s=0.0,
                            interval_s=interval_min * MIN)
    assert e == pytest.approx(published, abs=0.025)
    # by hand: 1 - (u0 + dt/2) / MTTF
    assert e == pytest.approx(1 - (5 + interval_min / 2) * MIN / m)


def test_expected_ettr_write_and_queue_factors():
    base = model.expected_ettr(mttf_s=10 * HOUR, restart_s=600, checkpoint_write_s=0, interval_s=1800)
    assert base == pytest.approx(1 - (600 + 900) / 36000)
    with_write = model.expected_ettr(mttf_s=10 * HOUR, restart_s=600, checkpoint_write_s=60,
                                     interval_s=1800)
    assert with_write == pytest.approx(base / (1 + 60 / 1800))
    with_queue = model.expected_ettr(mttf_s=10 * HOUR, restart_s=600, checkpoint_write_s=60,
                                     interval_s=1800, queue_s=1 * HOUR)
    assert with_queue == pytest.approx(with_write / 1.1)


@pytest.mark.parametrize(("kw", "match"), [
    ({"mttf_s": 0.0}, "mttf_s"),
    ({"restart_s": -1.0}, "restart_s"),
    ({"checkpoint_write_s": -1.0}, "checkpoint_write_s"),
    ({"interval_s": 0.0}, "interval_s"),
    ({"queue_s": -1.0}, "queue_s"),
    ({"interval_s": 20 * HOUR}, "longer than the MTTF"),
    ({"interval_s": 10 * HOUR + 1.0}, "longer than the MTTF"),
    ({"interval_s": 10 * HOUR, "restart_s": 5 * HOUR}, "no progress"),
    ({"restart_s": 10 * HOUR}, "no progress"),
])
def test_expected_ettr_rejects(kw, match):
    args = {"mttf_s": 10 * HOUR, "restart_s": 600.0, "checkpoint_write_s": 30.0, "interval_s": 1800.0}
    with pytest.raises(DomainError, match=match):
        model.expected_ettr(**{**args, **kw})


@pytest.mark.parametrize(("mttf_h", "w", "u0", "q"), [
    (302.0, 9.8, 0.0, 0.0), (1.8, 30.0, 300.0, 600.0), (0.5, 120.0, 600.0, 0.0), (10.0, 900.0, 0.0, 0.0),
])
def test_ettr_optimum_maximises_expected_ettr(mttf_h, w, u0, q):
    """Second method: a numeric scan of expected_ettr over admissible intervals."""
    m = mttf_h * HOUR
    best = model.ettr_optimal_interval_s(mttf_s=m, checkpoint_write_s=w, restart_s=u0, queue_s=q)
    # admissible intervals: at most the MTTF, and restart + half an interval below it
    grid = np.geomspace(1.0, min(m, 2 * (m - u0) * (1 - 1e-9)), 4001)
    values = np.array([model.expected_ettr(mttf_s=m, restart_s=u0, checkpoint_write_s=w, interval_s=x,
                                           queue_s=q) for x in grid])
    at_best = model.expected_ettr(mttf_s=m, restart_s=u0, checkpoint_write_s=w, interval_s=best, queue_s=q)
    assert at_best >= values.max() - 1e-12
    assert best == pytest.approx(grid[np.argmax(values)], rel=0.01)


def test_ettr_optimum_approaches_young_form():
    # the notes' closed form sqrt(2 w MTTF) for w, u0 << MTTF
    m, w = 302 * HOUR, 9.8
    best = model.ettr_optimal_interval_s(mttf_s=m, checkpoint_write_s=w)
    assert best == pytest.approx(math.sqrt(2 * w * m), rel=3e-3)
    assert best == pytest.approx(math.sqrt(w * w + 2 * w * m) - w, rel=1e-12)
    with pytest.raises(DomainError, match="checkpoint_write_s"):
        model.ettr_optimal_interval_s(mttf_s=m, checkpoint_write_s=0.0)
    with pytest.raises(DomainError, match="restart_s"):
        model.ettr_optimal_interval_s(mttf_s=m, checkpoint_write_s=w, restart_s=m)


# ---------------------------------------------------------------------------------------------------
# Figure 5 sweep and crossover
# ---------------------------------------------------------------------------------------------------


def test_sweep_shape_and_model():
    sizes = np.array([128, 256, 512, 1024])
    df = model.runtime_loss_by_size(sizes, **SWEEP)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == list(model.SIZE_SWEEP_COLUMNS)
    assert len(df) == 4
    assert df["mtbf_h"].to_numpy() == pytest.approx(302 * 128 / sizes)
    assert df["interval_min"].to_numpy() == pytest.approx(np.sqrt(2 * 9.8 * 302 * 128 / sizes * HOUR) / MIN)
    # each row equals the scalar equation-4 call at that size (second code path)
    for n, row in zip(sizes, df.itertuples(index=False), strict=True):
        t = model.runtime_loss_terms(
            held_s=SWEEP["held_s"], startup_s=SWEEP["startup_s"], data_stall=SWEEP["data_stall"],
            checkpoint_write_s=9.8, mtbf_s=302 * HOUR * 128 / n, recovery_s=SWEEP["recovery_s"],
            preemptions_per_s=SWEEP["preemptions_per_s"], preemption_tax_s=SWEEP["preemption_tax_s"])
        assert row.total == pytest.approx(t.total, rel=1e-12)
        assert row.checkpoint == pytest.approx(t.checkpoint, rel=1e-12)


def test_sweep_accepts_generator():
    a = model.runtime_loss_by_size([1024, 128], **SWEEP)
    assert a["devices"].tolist() == [1024, 128]  # input order kept
    b = model.runtime_loss_by_size((x for x in (1024, 128)), **SWEEP)
    pd.testing.assert_frame_equal(a, b)
    assert model.runtime_loss_by_size(pd.Series([512.0]), **SWEEP)["devices"].tolist() == [512.0]


@pytest.mark.parametrize(("devices", "kw", "match"), [
    ([128, 0], {}, "devices"),
    ([128, -4], {}, "devices"),
    ([[128, 256]], {}, "one-dimensional"),
    ([128, float("inf")], {}, "finite"),
    ([128], {"base_devices": 0}, "base_devices"),
    ([128], {"mtbf_h_at_base": 0.0}, "mtbf_h_at_base"),
    ([128], {"checkpoint_write_s": 0.0}, "checkpoint_write_s"),
    ([128], {"data_stall": 1.0}, "data_stall"),
    ([128], {"recovery_s": -1.0}, "recovery_s"),
    ([10_000_000], {}, "Young's interval would exceed the MTBF"),
])
def test_sweep_rejects(devices, kw, match):
    with pytest.raises(DomainError, match=match):
        model.runtime_loss_by_size(devices, **{**SWEEP, **kw})


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=50_000), min_size=2, max_size=12, unique=True))
def test_sweep_monotone_in_device_count(sizes):
    df = model.runtime_loss_by_size(sorted(sizes), **SWEEP)
    for col in ("checkpoint", "recovery", "total"):
        assert np.all(np.diff(df[col].to_numpy()) > 0), col
    assert np.all(np.diff(df["interval_min"].to_numpy()) < 0)
    for col in ("startup", "input_wait", "preemption"):
        assert np.all(df[col].to_numpy() == df[col].iloc[0]), col
    # with Young's interval the checkpoint share grows as sqrt(N) and recovery as N
    n = df["devices"].to_numpy()
    ratio_c = df["checkpoint"].to_numpy() / np.sqrt(n)
    ratio_r = df["recovery"].to_numpy() / n
    assert np.allclose(ratio_c, ratio_c[0], rtol=1e-9)
    assert np.allclose(ratio_r, ratio_r[0], rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    stall=st.floats(min_value=0.005, max_value=0.4),
    write_s=st.floats(min_value=0.5, max_value=60.0),
    recovery_s=st.floats(min_value=0.0, max_value=3600.0),
)
def test_crossover_balances_failure_terms_and_input(stall, write_s, recovery_s):
    kw = {**SWEEP, "data_stall": stall, "checkpoint_write_s": write_s, "recovery_s": recovery_s}
    try:
        n_star = model.crossover_devices(**kw)
    except DomainError:
        # only when the crossover lies outside Young's model (MTBF under 2 C): check that directly
        x = 2 * stall / (math.sqrt(2 * write_s) + math.sqrt(2 * write_s + 4 * recovery_s * stall))
        assert write_s > 1 / (x * x) / 2
        return
    df = model.runtime_loss_by_size([n_star], **kw)
    failure = df["checkpoint"].iloc[0] + df["recovery"].iloc[0]
    assert failure == pytest.approx(stall, rel=1e-9)


def test_crossover_bisection_agrees():
    """Second method: bisection on the vectorised sweep."""
    lo, hi = 128.0, 1e6
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        row = model.runtime_loss_by_size([mid], **SWEEP).iloc[0]
        lo, hi = (mid, hi) if row["checkpoint"] + row["recovery"] < row["input_wait"] else (lo, mid)
    assert model.crossover_devices(**SWEEP) == pytest.approx(lo, rel=1e-9)


def test_crossover_ignores_flat_terms_and_rejects():
    base = model.crossover_devices(**SWEEP)
    other = model.crossover_devices(**{**SWEEP, "preemptions_per_s": 5 / DAY, "startup_s": 3600.0})
    assert other == base
    # without recovery the quadratic degenerates to sqrt(2C/M) = f
    no_rec = model.crossover_devices(**{**SWEEP, "recovery_s": 0.0})
    m_star = 2 * 9.8 / SWEEP["data_stall"] ** 2
    assert no_rec == pytest.approx(128 * 302 * HOUR / m_star)
    with pytest.raises(DomainError, match="no crossover"):
        model.crossover_devices(**{**SWEEP, "data_stall": 0.0})
    with pytest.raises(DomainError, match="startup_s"):
        model.crossover_devices(**{**SWEEP, "startup_s": -1.0})


# ---------------------------------------------------------------------------------------------------
# Serving replica, measurement window, input derivations
# ---------------------------------------------------------------------------------------------------


def test_serving_runtime_goodput():
    assert model.serving_runtime_goodput(342, 3600) == pytest.approx(1 - 342 / 3600)
    assert model.serving_runtime_goodput(342, 3600, lifetime_includes_cold_start=False) == pytest.approx(
        3600 / 3942)
    assert model.serving_runtime_goodput(0, 3600) == 1.0
    assert model.serving_runtime_goodput(3600, 3600) == 0.0
    with pytest.raises(DomainError, match="longer than the held lifetime"):
        model.serving_runtime_goodput(3601, 3600)
    with pytest.raises(DomainError, match="cold_start_s"):
        model.serving_runtime_goodput(-1, 3600)
    with pytest.raises(DomainError, match="lifetime_s"):
        model.serving_runtime_goodput(10, 0)


@settings(max_examples=40, deadline=None)
@given(cold=st.floats(min_value=0.0, max_value=600.0), life=st.floats(min_value=600.0, max_value=1e6),
       extra=st.floats(min_value=1.0, max_value=1e6))
def test_serving_goodput_rises_with_lifetime(cold, life, extra):
    for flag in (True, False):
        short = model.serving_runtime_goodput(cold, life, lifetime_includes_cold_start=flag)
        long = model.serving_runtime_goodput(cold, life + extra, lifetime_includes_cold_start=flag)
        assert long >= short
    # the ready-time convention always reads higher than the held-time one
    assert model.serving_runtime_goodput(cold, life, lifetime_includes_cold_start=False) >= \
        model.serving_runtime_goodput(cold, life)


def test_check_runtime_window():
    assert model.check_runtime_window(1000.0, 1000.0) == 1.0
    assert model.check_runtime_window(5000.0, 1000.0, min_interruptions=5) == 5.0
    with pytest.raises(DomainError, match="shorter than 1 x the MTBF"):
        model.check_runtime_window(999.0, 1000.0)
    with pytest.raises(DomainError, match="window_s"):
        model.check_runtime_window(0.0, 1000.0)
    with pytest.raises(DomainError, match="mtbf_s"):
        model.check_runtime_window(1000.0, 0.0)
    with pytest.raises(DomainError, match="min_interruptions"):
        model.check_runtime_window(1000.0, 10.0, min_interruptions=0)


def test_input_derivation_helpers():
    assert model.held_share_from_capacity_share(0.05, 0.65) == pytest.approx(1 / 13)
    assert model.held_share_from_capacity_share(0.0, 0.65) == 0.0
    with pytest.raises(DomainError, match="cannot exceed"):
        model.held_share_from_capacity_share(0.7, 0.65)
    with pytest.raises(DomainError, match="scheduling_goodput"):
        model.held_share_from_capacity_share(0.0, 0.0)
    assert model.checkpoint_write_time_s(980e9, 100e9) == pytest.approx(9.8)
    with pytest.raises(DomainError, match="write_bandwidth"):
        model.checkpoint_write_time_s(980e9, 0.0)
