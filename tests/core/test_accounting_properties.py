"""Property tests of the accounting identities (hypothesis).

Each property is checked against a second computation: a direct sum, a finite difference, or the
ratio of two products computed without the library.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.accounting import (
    BOUNDARIES,
    Factor,
    Window,
    loss_shares,
    marginal_values,
    mpg,
    rank_levers,
    trade,
)

# per-test settings (a global profile would change other modules' hypothesis tests too)
FAST = settings(max_examples=60, deadline=None)

WINDOW = Window.nominal("property window")

fraction = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
positive_fraction = st.floats(min_value=1e-3, max_value=1.0, allow_nan=False)
triple = st.tuples(fraction, fraction, fraction)
positive_triple = st.tuples(positive_fraction, positive_fraction, positive_fraction)


@FAST
@given(triple)
def test_loss_shares_and_mpg_sum_to_one(sfp):
    s, r, p = sfp
    shares = loss_shares(s, r, p)
    assert math.fsum(shares.values()) == pytest.approx(1.0, abs=1e-12)
    assert shares["useful"] == pytest.approx(s * r * p, abs=1e-15)


@FAST
@given(triple)
def test_loss_shares_are_nonnegative_and_in_boundary_order(sfp):
    shares = loss_shares(*sfp)
    assert list(shares) == [*BOUNDARIES, "useful"]
    assert all(v >= 0.0 for v in shares.values())
    # each share is bounded by the capacity that reached its boundary
    s, r, _ = sfp
    assert shares["runtime"] <= s + 1e-15
    assert shares["program"] <= s * r + 1e-15


@FAST
@given(positive_triple, triple)
def test_ratio_rule_equals_product_ratio(before, after):
    b = dict(zip(BOUNDARIES, before, strict=True))
    a = dict(zip(BOUNDARIES, after, strict=True))
    t = trade(b, a, scope="pool")
    direct = float(np.prod(np.array(after)) / np.prod(np.array(before)))
    per_factor = math.prod(x / y for x, y in zip(after, before, strict=True))
    assert t.product_ratio == pytest.approx(per_factor, rel=1e-12, abs=1e-300)
    assert t.product_ratio == pytest.approx(direct, rel=1e-9, abs=1e-300)
    # and it is MPG_after / MPG_before of two measured products
    g_before = mpg(*(Factor.from_value(n, v, WINDOW) for n, v in b.items()))
    g_after = mpg(*(Factor.from_value(n, v, WINDOW) for n, v in a.items()))
    assert t.product_ratio == pytest.approx(g_after.value / g_before.value, rel=1e-9, abs=1e-300)
    assert t.helps == (t.product_ratio > 1.0)


@FAST
@given(positive_triple, positive_triple, st.sampled_from(BOUNDARIES), fraction)
def test_lever_relative_gain_is_independent_of_the_other_factors(first, second, lever, lift):
    # the same factor value and ceiling, embedded in two fleets that differ in the other two factors
    idx = BOUNDARIES.index(lever)
    current = first[idx]
    ceiling = current + lift * (1.0 - current)
    fleet_a = dict(zip(BOUNDARIES, first, strict=True))
    fleet_b = dict(zip(BOUNDARIES, second, strict=True))
    fleet_b[lever] = current
    gain_a = rank_levers(fleet_a, {lever: ceiling})[0]
    gain_b = rank_levers(fleet_b, {lever: ceiling})[0]
    assert gain_a.relative_gain == pytest.approx(gain_b.relative_gain, rel=1e-12, abs=1e-12)
    assert gain_a.relative_gain == pytest.approx(ceiling / current - 1.0, rel=1e-12, abs=1e-12)
    assert gain_a.mpg_at_ceiling == pytest.approx(gain_a.mpg_before * ceiling / current, rel=1e-9, abs=1e-15)


@FAST
@given(triple, st.sampled_from(BOUNDARIES))
def test_marginal_value_is_the_finite_difference_derivative(sfp, name):
    values = dict(zip(BOUNDARIES, sfp, strict=True))
    h = 1e-4
    up, down = dict(values), dict(values)
    # a one-sided difference that stays inside [0, 1]
    if values[name] + h <= 1.0:
        up[name] = values[name] + h
    else:
        down[name] = values[name] - h

    def product(v):
        return v["scheduling"] * v["runtime"] * v["program"]

    derivative = (product(up) - product(down)) / h
    assert marginal_values(*sfp)[name] == pytest.approx(derivative, rel=1e-6, abs=1e-9)


@FAST
@given(
    st.sampled_from(BOUNDARIES),
    st.floats(min_value=1e-6, max_value=1e9),
    fraction,
    st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=5),
)
def test_factor_losses_sum_to_the_gap(boundary, denominator, ratio, loss_weights):
    numerator = ratio * denominator
    # named losses may under- or over-explain the gap; unattributed absorbs the difference either way
    losses = {f"loss_{i}": w * denominator for i, w in enumerate(loss_weights)}
    f = Factor(boundary, numerator=numerator, denominator=denominator, window=WINDOW, losses=losses)
    gap = denominator - f.numerator
    assert math.fsum(f.losses.values()) == pytest.approx(gap, rel=1e-9, abs=1e-9 * denominator)
    assert set(f.losses) == {*losses, "unattributed"}
    assert 0.0 <= f.value <= 1.0


# ------------------------------------------------------------------------------------------------
# Telescoping (rule 2): a synthetic pool where every device-second is labelled once
# ------------------------------------------------------------------------------------------------

# A device's window is a sequence of segments.  Segment kinds and their boundary:
#   unheld, partial_gang           -> lost before a complete allocation (scheduling)
#   startup, input_wait, rework    -> held, no retained step (runtime)
#   step                           -> a retained step of actual length d; its ideal time is e * d
SEGMENT = st.one_of(
    st.tuples(st.sampled_from(["unheld", "partial_gang", "startup", "input_wait", "rework"]),
              st.floats(min_value=1.0, max_value=3600.0), st.just(0.0)),
    st.tuples(st.just("step"), st.floats(min_value=0.1, max_value=60.0),
              st.floats(min_value=0.05, max_value=1.0)),
)
DEVICE = st.lists(SEGMENT, min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(DEVICE, min_size=1, max_size=6), st.floats(min_value=0.0, max_value=3600.0))
def test_product_telescopes_to_ideal_time_over_offered_capacity(devices, tail_s):
    # every device is in service for the same window; a trailing idle tail pads the shorter ones
    lengths = [sum(d for _, d, _ in segs) for segs in devices]
    window_s = max(lengths) + tail_s
    offered = window_s * len(devices)

    kinds = np.array([k for segs in devices for k, _, _ in segs])
    dur = np.array([d for segs in devices for _, d, _ in segs])
    eff = np.array([e for segs in devices for _, _, e in segs])
    # unheld tail time across the devices, summed per device so that it is never below zero by rounding
    padding = math.fsum(window_s - length for length in lengths)

    def total(*names):
        return float(dur[np.isin(kinds, names)].sum())

    held = offered - padding - total("unheld", "partial_gang")
    retained = total("step")
    ideal = float((dur * eff)[kinds == "step"].sum())

    if held <= 0.0:
        # nothing was ever held by a complete allocation: S = 0 and there is no runtime denominator
        assert retained == 0.0 and ideal == 0.0
        return
    s = Factor("scheduling", numerator=held, denominator=offered, window=WINDOW,
               losses={"unheld": total("unheld") + padding, "partial_gang_hold": total("partial_gang")})
    r = Factor("runtime", numerator=retained, denominator=s.numerator, window=WINDOW,
               losses={"startup": total("startup"), "input_wait": total("input_wait"),
                       "rework": total("rework")})
    p = Factor("program", numerator=ideal, denominator=r.numerator, window=WINDOW) if retained > 0 else None
    if p is None:
        # no retained step at all: nothing reaches the program boundary, and MPG is zero directly
        assert ideal == 0.0
        return
    g = mpg(s, r, p)
    # direct: ideal-rate useful time over offered capacity-time, summed without any factor
    assert g.value == pytest.approx(ideal / offered, rel=1e-9)
    # every named loss explains its gap: nothing is unattributed in a fully labelled timeline
    assert s.losses["unattributed"] == pytest.approx(0.0, abs=1e-6 * offered)
    assert r.losses["unattributed"] == pytest.approx(0.0, abs=1e-6 * offered)
    # and the equation-2 shares are the labelled times as shares of offered capacity
    shares = g.loss_shares
    assert shares["scheduling"] == pytest.approx((offered - held) / offered, abs=1e-9)
    assert shares["runtime"] == pytest.approx((held - retained) / offered, abs=1e-9)
    assert shares["program"] == pytest.approx((retained - ideal) / offered, abs=1e-9)
