"""Measured versus modelled runtime goodput: the chi-square machinery, input estimates, residuals."""

import itertools
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.quality import DomainError
from fleetlib.runtime import model
from fleetlib.runtime.compare import (
    chi2_quantile,
    compare_measurement,
    compare_to_model,
    estimate_model_inputs,
    mtbf_interval_s,
    poisson_rate_interval,
    regularized_gamma_p,
)
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.schema import EQ4_TERMS, UNMODELLED_TERMS
from fleetlib.runtime.synth import synth_timeline
from fleetlib.runtime.timeline import tables_from_seconds

T0 = pd.Timestamp("2024-01-01T00:00:00Z")

# ---------------------------------------------------------------------------------------------------
# Incomplete gamma and chi-square quantiles (no scipy)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("p", "dof", "table"), [
    (0.95, 1, 3.841459), (0.975, 2, 7.377759), (0.025, 2, 0.05063562), (0.05, 10, 3.940299),
    (0.025, 10, 3.246973), (0.975, 12, 23.33666), (0.99, 20, 37.56623), (0.5, 1, 0.4549364),
    (0.90, 5, 9.236357), (0.999, 100, 149.4493),
])
def test_chi2_quantile_matches_published_tables(p, dof, table):
    assert chi2_quantile(p, dof) == pytest.approx(table, rel=2e-6)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 60), x=st.floats(0.01, 120.0))
def test_regularized_gamma_equals_the_poisson_tail(k, x):
    # for integer shape k, P(k, x) = 1 - sum_{j<k} e^-x x^j / j!  (a Poisson count of mean x reaches k)
    cdf = math.fsum(math.exp(-x + j * math.log(x) - math.lgamma(j + 1)) for j in range(k))
    assert regularized_gamma_p(k, x) == pytest.approx(1.0 - cdf, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(dof=st.floats(0.5, 200.0), p=st.floats(0.001, 0.999))
def test_chi2_quantile_inverts_the_distribution(dof, p):
    x = chi2_quantile(p, dof)
    assert regularized_gamma_p(dof / 2, x / 2) == pytest.approx(p, abs=1e-10)


def test_gamma_closed_forms_and_domain():
    assert regularized_gamma_p(1.0, 2.0) == pytest.approx(1 - math.exp(-2.0), abs=1e-15)
    assert regularized_gamma_p(0.5, 3.0) == pytest.approx(math.erf(math.sqrt(3.0)), abs=1e-14)
    assert regularized_gamma_p(3.0, 0.0) == 0.0
    assert chi2_quantile(0.0, 4) == 0.0
    with pytest.raises(DomainError):
        chi2_quantile(1.0, 4)
    with pytest.raises(DomainError):
        chi2_quantile(0.5, 0)
    with pytest.raises(DomainError):
        regularized_gamma_p(-1.0, 1.0)


@pytest.mark.parametrize(("k", "lo", "hi"), [
    (0, 0.0, 3.688879), (1, 0.02531781, 5.571643), (5, 1.623486, 11.66833), (10, 4.795389, 18.39036),
])
def test_poisson_interval_matches_the_garwood_table(k, lo, hi):
    low, high = poisson_rate_interval(k, 1.0, 0.95)
    assert low == pytest.approx(lo, rel=2e-6, abs=1e-12)
    assert high == pytest.approx(hi, rel=2e-6)


def test_poisson_interval_scales_with_exposure_and_level():
    low, high = poisson_rate_interval(0, 3600.0, 0.90)
    assert low == 0.0 and high == pytest.approx(-math.log(0.05) / 3600.0, rel=1e-9)
    with pytest.raises(DomainError):
        poisson_rate_interval(-1, 1.0)
    with pytest.raises(DomainError):
        poisson_rate_interval(2, 0.0)
    with pytest.raises(DomainError):
        poisson_rate_interval(2, 1.0, 1.0)


def test_mtbf_interval():
    point, low, high = mtbf_interval_s(5, 10 * 3600.0)
    assert point == pytest.approx(7200.0)
    assert low == pytest.approx(10 * 3600.0 / 11.66833, rel=1e-6)
    assert high == pytest.approx(10 * 3600.0 / 1.623486, rel=1e-6)
    point, low, high = mtbf_interval_s(0, 3600.0)
    assert point is None and high is None and low == pytest.approx(3600.0 / 3.688879, rel=1e-6)


# ---------------------------------------------------------------------------------------------------
# Estimating equation 4's inputs
# ---------------------------------------------------------------------------------------------------

STEP_S, EVERY, WRITE, DETECT, RESTART = 1.0, 60, 4.0, 20.0, 100.0


@pytest.fixture(scope="module")
def run():
    steps, events, truth = synth_timeline(
        30_000, seed=5, step_s=STEP_S, failure_rate_per_h=2.0, preemption_rate_per_h=0.5,
        checkpoint_every_steps=EVERY, checkpoint_write_s=WRITE, warmup_steps=0, detect_s=DETECT,
        failure_restart_s=RESTART, preemption_drain_s=5.0, preemption_queue_s=300.0,
        preemption_restart_s=50.0, input_wait_prob=0.1, startup_s=90.0)
    return steps, events, truth, runtime_goodput(steps, events, fault_free_step_s=STEP_S)


def test_inputs_are_read_off_the_timeline(run):
    _steps, events, truth, m = run
    inp = estimate_model_inputs(m)
    assert truth["n_failures"] >= 3 and truth["n_preemptions"] >= 1
    n_begins = int((events["kind"] == "checkpoint_begin").sum())
    assert inp.held_s == pytest.approx(truth["held_s"])
    assert inp.startup_s == pytest.approx(90.0)
    assert inp.failures == truth["n_failures"] and inp.preemptions == truth["n_preemptions"]
    assert inp.mtbf_s == pytest.approx(truth["held_s"] / truth["n_failures"])
    assert inp.recovery_s == pytest.approx(DETECT + RESTART)  # no warm-up: detection + relaunch only
    assert inp.preemption_tax_s == pytest.approx(truth["preemption"] / truth["n_preemptions"])
    assert inp.preemptions_per_s == pytest.approx(truth["n_preemptions"] / truth["held_s"])
    assert inp.checkpoint_write_s == pytest.approx(truth["checkpoint"] / n_begins)
    # cadence: median spacing of consecutive commits with no interruption between them, minus the pause
    t = events["time"]
    commits = t[events["kind"] == "checkpoint_commit"].reset_index(drop=True)
    stops = t[events["kind"].isin(["failure", "preempt"])]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(commits)
            if not ((stops > a) & (stops < b)).any()]
    assert inp.interval_s == pytest.approx(pd.Series(gaps).median() - inp.checkpoint_write_s, abs=1e-9)
    assert inp.interval_s == pytest.approx(EVERY * STEP_S, rel=0.05)
    wait = truth["input_wait"]
    assert inp.data_stall == pytest.approx(wait / (truth["productive_retrospective_s"] + wait))
    lo, hi = inp.mtbf_low_s, inp.mtbf_high_s
    assert lo < inp.mtbf_s < hi
    assert inp.to_dict()["failures"] == inp.failures


def test_model_is_equation_4_on_those_inputs(run):
    _, _, _, m = run
    cmp = compare_measurement(m)
    inp = cmp.inputs
    expected = model.runtime_loss_terms(
        held_s=inp.held_s, startup_s=inp.startup_s, data_stall=inp.data_stall,
        checkpoint_write_s=inp.checkpoint_write_s, mtbf_s=inp.mtbf_s, recovery_s=inp.recovery_s,
        preemptions_per_s=inp.preemptions_per_s, preemption_tax_s=inp.preemption_tax_s,
        interval_s=inp.interval_s)
    assert cmp.model == expected
    assert cmp.model_runtime_goodput == pytest.approx(expected.runtime_goodput)
    # startup, recovery and preemption use rates and means of the same timeline: no residual there
    for term in ("startup", "recovery", "preemption"):
        assert cmp.residual[term] == pytest.approx(0.0, abs=1e-12)
    # checkpoint compares measured pauses + rework with C / tau + tau / 2M
    c = m.categories
    assert cmp.measured["checkpoint"] == pytest.approx((c["checkpoint"] + c["rework"]) / m.held_s)
    assert cmp.residual["checkpoint"] == pytest.approx(cmp.measured["checkpoint"] - expected.checkpoint)
    # the total residual is the term residuals plus everything the model has no term for
    parts = math.fsum(cmp.residual[t] for t in EQ4_TERMS) + math.fsum(cmp.unmodelled.values())
    assert cmp.residual["total"] == pytest.approx(parts, abs=1e-12)
    assert cmp.residual["total"] == pytest.approx((1 - m.runtime_goodput) - expected.total, abs=1e-12)


def test_intervals_beside_the_one_used(run):
    _, _, _, m = run
    cmp = compare_measurement(m)
    inp = cmp.inputs
    assert cmp.intervals["used"] == pytest.approx(inp.interval_s)
    assert cmp.intervals["young"] == pytest.approx(model.young_interval_s(inp.checkpoint_write_s, inp.mtbf_s))
    assert cmp.intervals["daly"] == pytest.approx(
        model.daly_interval_s(inp.checkpoint_write_s, inp.recovery_s, inp.mtbf_s))
    assert cmp.intervals["young_with_preemptions"] == pytest.approx(
        model.interval_with_preemptions_s(inp.checkpoint_write_s, inp.mtbf_s, inp.preemptions_per_s))
    assert cmp.intervals["young_with_preemptions"] < cmp.intervals["young"]
    frame = cmp.frame()
    assert list(frame.index) == list(EQ4_TERMS) + list(UNMODELLED_TERMS)
    assert set(cmp.to_dict()) >= {"inputs", "model", "residual", "intervals", "notes"}
    import json
    json.dumps(cmp.to_dict())


def test_no_failure_means_an_unbounded_mtbf():
    steps, events, _ = synth_timeline(5000, seed=2, checkpoint_every_steps=100, checkpoint_write_s=5.0,
                                      input_wait_prob=0.1)
    cmp = compare_to_model(steps, events)
    assert cmp.inputs.failures == 0 and cmp.inputs.mtbf_s is None and cmp.inputs.mtbf_high_s is None
    assert cmp.model is not None and cmp.model.recovery == pytest.approx(0.0, abs=1e-200)
    assert cmp.intervals["young"] is None and cmp.intervals["daly"] is None
    assert any("unbounded" in n for n in cmp.notes)


def test_model_needs_a_checkpoint_cadence():
    steps = [(0, i, 1.0 + i, 2.0 + i) for i in range(10)]
    events = [(0, 0.0, "gang_complete"), (0, 11.0, "checkpoint_commit", 9), (0, 12.0, "release")]
    cmp = compare_to_model(*tables_from_seconds(steps, events))
    assert cmp.model is None and cmp.model_runtime_goodput is None and cmp.residual == {}
    assert cmp.inputs.interval_s is None
    assert cmp.frame()["modelled"].isna().all()
    with pytest.raises(DomainError, match="no held time"):
        late = (T0 + pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=2))
        estimate_model_inputs(runtime_goodput(*tables_from_seconds(steps, events), window=late))
