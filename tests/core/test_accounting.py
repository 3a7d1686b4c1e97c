"""Unit tests of the accounting core: windows, factors, the product, shares, levers, trades and cost.

Expected numbers are worked by hand in the comments (running example S=0.65, R=0.90, P=0.48) or
come from a second computation, never from the function under test.
"""

from __future__ import annotations

import json
import math
import re
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.accounting import (
    BOUNDARIES,
    LEVER_COLUMNS,
    Factor,
    GoodputProduct,
    LeverGain,
    Window,
    cost_per_useful_hour,
    days_at_shortfall,
    group_overheads_by_factor,
    held_hours_chargeback,
    job_product,
    levers_frame,
    loss_shares,
    marginal_values,
    mpg,
    rank_levers,
    spot_cost_per_useful_hour,
    tier_ratios,
    time_to_result,
    trade,
)
from fleetlib.quality import DomainError, FleetlibError, WindowMismatchError
from fleetlib.scheduling import (
    SnapshotScheduling,
    data_stall_from_capacity_share,
    snapshot_scheduling_goodput,
)

S, R, P = 0.65, 0.90, 0.48
RUNNING = {"scheduling": S, "runtime": R, "program": P}
CEILINGS = {"scheduling": 0.80, "runtime": 0.98, "program": 0.65}

WEEK = Window.between("2024-03-04T00:00:00Z", "2024-03-11T00:00:00Z", label="week 10")
OTHER_WEEK = Window.between("2024-03-11T00:00:00Z", "2024-03-18T00:00:00Z", label="week 11")
SAMPLE = Window.between("2024-03-06T12:00:00Z", "2024-03-06T13:00:00Z", label="trace sample")


def _factors(window_s=WEEK, window_r=WEEK, window_p=WEEK, values=(S, R, P)):
    s, r, p = values
    return (Factor.from_value("scheduling", s, window_s), Factor.from_value("runtime", r, window_r),
            Factor.from_value("program", p, window_p))


# ------------------------------------------------------------------------------------------------
# Window
# ------------------------------------------------------------------------------------------------


class TestWindow:
    def test_measured_window_is_utc_and_has_duration(self):
        w = Window.between("2024-03-04T01:00:00+01:00", "2024-03-04T02:00:00+01:00")
        assert str(w.start.tz) == "UTC"
        assert w.start == pd.Timestamp("2024-03-04T00:00:00Z")
        assert w.duration_s == 3600.0
        assert not w.is_nominal

    def test_nominal_window_has_no_duration(self):
        w = Window.nominal("running example, one held week")
        assert w.is_nominal
        assert w.duration_s is None
        assert w.to_dict() == {"label": "running example, one held week", "start": None, "end": None,
                               "exclusions": [], "excluded_s": 0.0}

    def test_tz_naive_rejected(self):
        with pytest.raises(DomainError, match="timezone-aware"):
            Window.between("2024-03-04 00:00", "2024-03-05 00:00")

    def test_one_naive_bound_rejected(self):
        with pytest.raises(DomainError, match="timezone-aware"):
            Window.between("2024-03-04T00:00:00Z", "2024-03-05 00:00")

    def test_end_must_follow_start(self):
        with pytest.raises(DomainError, match="after start"):
            Window.between("2024-03-05T00:00:00Z", "2024-03-04T00:00:00Z")
        with pytest.raises(DomainError, match="after start"):
            Window.between("2024-03-05T00:00:00Z", "2024-03-05T00:00:00Z")

    def test_start_without_end_rejected(self):
        with pytest.raises(DomainError, match="both start and end"):
            Window(label="half", start=pd.Timestamp("2024-03-04T00:00:00Z"))

    def test_same_as_for_nominal_and_measured(self):
        assert Window.nominal("a").same_as(Window.nominal("a"))
        assert not Window.nominal("a").same_as(Window.nominal("b"))
        # a nominal window is never the same as a measured one, even with the same label
        assert not Window.nominal("week 10").same_as(WEEK)
        # measured windows compare by bounds, not by label
        relabelled = Window.between(WEEK.start, WEEK.end, label="another name")
        assert WEEK.same_as(relabelled)
        assert not WEEK.same_as(OTHER_WEEK)

    def test_contains(self):
        assert WEEK.contains(SAMPLE)
        assert WEEK.contains(WEEK)
        assert not SAMPLE.contains(WEEK)
        assert not WEEK.contains(OTHER_WEEK)
        straddling = Window.between("2024-03-10T23:00:00Z", "2024-03-11T01:00:00Z")
        assert not WEEK.contains(straddling)
        assert not WEEK.contains(Window.nominal("week 10"))
        assert Window.nominal("x").contains(Window.nominal("x"))
        assert not Window.nominal("x").contains(SAMPLE)

    def test_to_dict_is_json_ready(self):
        d = json.loads(json.dumps(WEEK.to_dict()))
        assert d["start"].startswith("2024-03-04T00:00:00")
        assert d["label"] == "week 10"


# ------------------------------------------------------------------------------------------------
# Factor
# ------------------------------------------------------------------------------------------------


class TestFactor:
    def test_value_and_unattributed_remainder(self):
        # 1000 device-h offered, 650 held; named losses 200 + 120 explain 320 of the 350 gap
        f = Factor("scheduling", numerator=650.0, denominator=1000.0, window=WEEK,
                   numerator_unit="device-h", denominator_unit="device-h",
                   losses={"unheld": 200.0, "partial_gang_hold": 120.0})
        assert f.value == pytest.approx(0.65)
        assert f.losses["unattributed"] == pytest.approx(30.0)
        assert sum(f.losses.values()) == pytest.approx(350.0)
        assert f.loss_fractions == pytest.approx({"unheld": 0.20, "partial_gang_hold": 0.12,
                                                  "unattributed": 0.03})
        assert f.record == "scheduler records"  # the default record of the boundary

    def test_unattributed_shown_even_when_zero(self):
        f = Factor("runtime", numerator=90.0, denominator=100.0, window=WEEK, losses={"input_wait": 10.0})
        assert "unattributed" in f.losses
        assert f.losses["unattributed"] == pytest.approx(0.0, abs=1e-12)

    def test_unattributed_negative_when_named_losses_over_explain(self):
        # gap is 10, the named losses claim 13: the 3 of double counting is shown, not clipped
        f = Factor("runtime", numerator=90.0, denominator=100.0, window=WEEK,
                   losses={"input_wait": 8.0, "checkpoint": 5.0})
        assert f.losses["unattributed"] == pytest.approx(-3.0)
        assert f.to_dict()["losses"]["unattributed"] == pytest.approx(-3.0)

    def test_unattributed_passed_in_is_refused(self):
        with pytest.raises(DomainError, match="unattributed"):
            Factor("runtime", numerator=90.0, denominator=100.0, window=WEEK, losses={"unattributed": 10.0})

    def test_numerator_above_denominator_is_refused_with_a_reason(self):
        with pytest.raises(DomainError, match=r"exceeds its denominator.*double-counted"):
            Factor("runtime", numerator=101.0, denominator=100.0, window=WEEK)

    def test_numerator_above_denominator_by_rounding_only_is_equal(self):
        den = 0.1 + 0.2  # 0.30000000000000004
        f = Factor("runtime", numerator=0.3 * (1 + 1e-12) * (den / 0.3), denominator=den, window=WEEK)
        assert f.value == 1.0
        # and the product accepts it (a value of 1 + 1e-16 would fail the fraction check)
        s, _, p = _factors()
        assert mpg(s, f, p).value == pytest.approx(S * P)

    @pytest.mark.parametrize("den", [0.0, -1.0, math.nan, math.inf])
    def test_bad_denominator(self, den):
        with pytest.raises(DomainError, match="denominator"):
            Factor("program", numerator=0.0, denominator=den, window=WEEK)

    def test_negative_numerator_and_loss(self):
        with pytest.raises(DomainError, match="numerator"):
            Factor("program", numerator=-1.0, denominator=10.0, window=WEEK)
        with pytest.raises(DomainError, match="exposed_comm"):
            Factor("program", numerator=5.0, denominator=10.0, window=WEEK, losses={"exposed_comm": -1.0})

    def test_unknown_boundary(self):
        with pytest.raises(DomainError, match="boundary"):
            Factor("serving", numerator=1.0, denominator=2.0, window=WEEK)  # type: ignore[arg-type]

    def test_window_must_be_a_window(self):
        with pytest.raises(DomainError, match="Window"):
            Factor("program", numerator=1.0, denominator=2.0, window="week 10")  # type: ignore[arg-type]

    def test_from_value(self):
        f = Factor.from_value("program", 0.48, WEEK, convention="MFU, 6N FLOPs, 989 TFLOP/s",
                              losses={"exposed_communication": 0.30})
        assert f.value == 0.48
        assert f.record == "stated"
        assert f.losses["unattributed"] == pytest.approx(0.22)
        with pytest.raises(DomainError):
            Factor.from_value("program", 1.2, WEEK)

    def test_to_dict_carries_the_contract(self):
        f = Factor("program", numerator=14.9, denominator=31.0, window=WEEK, convention="MFU",
                   numerator_unit="PFLOP at peak", denominator_unit="PFLOP at peak")
        d = json.loads(json.dumps(f.to_dict()))
        assert d["value"] == pytest.approx(14.9 / 31.0)
        assert d["convention"] == "MFU"
        assert d["record"] == "step traces"
        assert d["window"]["label"] == "week 10"
        assert d["losses"] == {"unattributed": pytest.approx(31.0 - 14.9)}


# ------------------------------------------------------------------------------------------------
# mpg(): the contract-checked product
# ------------------------------------------------------------------------------------------------


class TestMpg:
    def test_running_example(self):
        g = mpg(*_factors())
        assert isinstance(g, GoodputProduct)
        assert g.value == pytest.approx(0.2808)  # 0.65 * 0.432
        assert g.job_product == pytest.approx(0.432)
        assert g.windows_mixed is False
        assert g.notes == ()
        assert list(g.loss_shares) == ["scheduling", "runtime", "program", "useful"]
        assert g.loss_shares["useful"] == pytest.approx(g.value)
        assert g.cost_per_useful_hour(2.0) == pytest.approx(2.0 / 0.2808)
        d = json.loads(json.dumps(g.to_dict()))
        assert d["mpg"] == pytest.approx(0.2808)
        assert set(d["factors"]) == set(BOUNDARIES)

    def test_different_windows_raise_with_a_clear_message(self):
        with pytest.raises(WindowMismatchError) as info:
            mpg(*_factors(window_r=OTHER_WEEK))
        msg = str(info.value)
        assert "'week 10'" in msg and "'week 11'" in msg
        assert "allow_mixed_windows=True" in msg
        assert isinstance(info.value, FleetlibError)

    def test_program_outside_the_window_raises(self):
        outside = Window.between("2024-03-12T00:00:00Z", "2024-03-12T01:00:00Z", label="later trace")
        with pytest.raises(WindowMismatchError, match="later trace"):
            mpg(*_factors(window_p=outside))

    def test_nominal_windows_with_different_labels_raise(self):
        a, b = Window.nominal("Llama 3 snapshot"), Window.nominal("Llama 3 scaling table")
        with pytest.raises(WindowMismatchError):
            mpg(*_factors(window_s=a, window_r=a, window_p=b))

    def test_allow_mixed_windows_returns_a_labelled_estimate(self):
        g = mpg(*_factors(window_r=OTHER_WEEK), allow_mixed_windows=True)
        assert g.windows_mixed is True
        assert len(g.notes) == 1 and g.notes[0].startswith("ESTIMATE")
        assert "week 11" in g.notes[0]
        assert g.value == pytest.approx(S * R * P)
        assert g.to_dict()["windows_mixed"] is True

    def test_allow_mixed_windows_on_matching_windows_is_not_an_estimate(self):
        g = mpg(*_factors(), allow_mixed_windows=True)
        assert g.windows_mixed is False and g.notes == ()

    def test_program_sampled_inside_the_window_is_accepted(self):
        g = mpg(*_factors(window_p=SAMPLE))
        assert g.windows_mixed is False
        assert g.value == pytest.approx(0.2808)

    def test_factor_in_the_wrong_slot_raises(self):
        s, r, p = _factors()
        with pytest.raises(DomainError, match="runtime factor was passed as the scheduling"):
            mpg(r, s, p)
        with pytest.raises(DomainError, match="program factor was passed as the runtime"):
            mpg(s, p, r)

    def test_plain_floats_are_refused(self):
        with pytest.raises(DomainError, match=r"Factor\.from_value"):
            mpg(S, R, P)  # type: ignore[arg-type]
        s, r, _ = _factors()
        with pytest.raises(DomainError, match="program must be a Factor"):
            mpg(s, r, 0.48)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# Plain-number accounting
# ------------------------------------------------------------------------------------------------


class TestSharesAndMarginalValues:
    def test_loss_shares_running_example(self):
        shares = loss_shares(S, R, P)
        # 1 - 0.65; 0.65 * 0.10; 0.585 * 0.52; 0.585 * 0.48
        assert shares == pytest.approx({"scheduling": 0.35, "runtime": 0.065, "program": 0.3042,
                                        "useful": 0.2808})
        assert sum(shares.values()) == pytest.approx(1.0)

    def test_marginal_values_running_example(self):
        assert marginal_values(S, R, P) == pytest.approx({"scheduling": 0.432, "runtime": 0.312,
                                                          "program": 0.585})

    def test_job_product(self):
        assert job_product(0.9, 0.41) == pytest.approx(0.369)


class TestRankLevers:
    def test_ranks_by_relative_gain_not_loss_share(self):
        levers = rank_levers(RUNNING, CEILINGS)
        assert [lv.factor for lv in levers] == ["program", "scheduling", "runtime"]
        assert [lv.rank for lv in levers] == [1, 2, 3]
        by = {lv.factor: lv for lv in levers}
        # scheduling loses the biggest share of capacity, yet is not the top lever
        assert max(by, key=lambda k: by[k].loss_share) == "scheduling"
        assert by["program"].relative_gain == pytest.approx(0.65 / 0.48 - 1)
        assert by["scheduling"].relative_gain == pytest.approx(0.80 / 0.65 - 1)
        assert by["runtime"].relative_gain == pytest.approx(0.98 / 0.90 - 1)
        assert by["program"].mpg_at_ceiling == pytest.approx(0.65 * 0.90 * 0.65)
        assert by["scheduling"].added_useful == pytest.approx((0.80 - 0.65) * 0.432)
        assert all(lv.mpg_before == pytest.approx(0.2808) for lv in levers)

    def test_subset_of_ceilings(self):
        levers = rank_levers(RUNNING, {"runtime": 0.98})
        assert len(levers) == 1 and levers[0].rank == 1

    def test_ceiling_below_current_raises(self):
        with pytest.raises(DomainError, match="below the current value"):
            rank_levers(RUNNING, {"program": 0.40})

    def test_unknown_factor_and_missing_factor(self):
        with pytest.raises(DomainError, match="unknown factor"):
            rank_levers(RUNNING, {"useful": 0.5})
        with pytest.raises(DomainError, match="missing factor"):
            rank_levers({"scheduling": 0.65, "runtime": 0.9}, {"runtime": 0.98})

    def test_zero_current_value(self):
        with pytest.raises(DomainError, match="relative gain is undefined"):
            rank_levers({"scheduling": 0.65, "runtime": 0.0, "program": 0.48}, {"runtime": 0.5})

    def test_to_dict(self):
        d = rank_levers(RUNNING, CEILINGS)[0].to_dict()
        assert json.loads(json.dumps(d))["factor"] == "program"


class TestLeversFrame:
    def test_columns_and_order(self):
        levers = rank_levers(RUNNING, CEILINGS)
        frame = levers_frame(reversed(levers))  # order of input does not matter: sorted by rank
        assert tuple(frame.columns) == LEVER_COLUMNS == (
            "factor", "current", "ceiling", "relative_gain", "mpg_before", "mpg_at_ceiling",
            "added_useful", "loss_share", "rank")
        assert frame["factor"].tolist() == ["program", "scheduling", "runtime"]
        assert frame["rank"].tolist() == [1, 2, 3]
        assert frame["relative_gain"].to_numpy() == pytest.approx(
            [0.65 / 0.48 - 1, 0.80 / 0.65 - 1, 0.98 / 0.90 - 1])
        assert frame["loss_share"].to_numpy() == pytest.approx([0.3042, 0.35, 0.065])
        assert frame["rank"].dtype == np.int64
        assert frame["ceiling"].dtype == np.float64

    def test_empty(self):
        frame = levers_frame([])
        assert frame.empty and tuple(frame.columns) == LEVER_COLUMNS

    def test_refuses_other_objects(self):
        with pytest.raises(DomainError, match="LeverGain"):
            levers_frame([{"factor": "program"}])  # type: ignore[list-item]

    def test_lever_gain_is_what_the_frame_holds(self):
        lever = rank_levers(RUNNING, {"program": 0.65})[0]
        assert isinstance(lever, LeverGain)
        row = levers_frame([lever]).iloc[0].to_dict()
        expected = lever.to_dict()
        assert set(row) == set(expected)
        assert row.pop("factor") == expected.pop("factor")
        assert row == pytest.approx(expected)


class TestTrade:
    def test_tenth_twelfth(self):
        # P up by a tenth, R down by a twelfth: 1.1 * 11/12 = 1.00833 (S not needed)
        before = {"runtime": R, "program": P}
        after = {"runtime": R * 11 / 12, "program": P * 1.1}
        t = trade(before, after, scope="job")
        assert t.product_ratio == pytest.approx(1.1 * 11 / 12)
        assert t.helps is True
        assert t.ratios == pytest.approx({"runtime": 11 / 12, "program": 1.1})
        assert t.first_order_change == pytest.approx(0.1 - 1 / 12)

    def test_job_scope_refuses_a_change_in_scheduling(self):
        with pytest.raises(DomainError, match="scope='pool'"):
            trade({"scheduling": 0.65, "runtime": 0.9}, {"scheduling": 0.70, "runtime": 0.88}, scope="job")

    def test_job_scope_accepts_unchanged_scheduling(self):
        t = trade({"scheduling": 0.65, "runtime": 0.9}, {"scheduling": 0.65, "runtime": 0.88}, scope="job")
        assert t.product_ratio == pytest.approx(0.88 / 0.9)
        assert t.helps is False

    def test_job_scope_refuses_one_sided_or_invalid_scheduling(self):
        with pytest.raises(DomainError, match="only on one side"):
            trade({"scheduling": 0.65, "runtime": 0.9}, {"runtime": 0.88}, scope="job")
        with pytest.raises(DomainError, match="fraction"):
            trade({"scheduling": 1.5, "runtime": 0.9}, {"scheduling": 1.5, "runtime": 0.88}, scope="job")

    def test_pool_scope_includes_scheduling(self):
        # a preemption: the urgent gang's scheduling gain against the victims' runtime loss
        t = trade({"scheduling": 0.65, "runtime": 0.90, "program": 0.48},
                  {"scheduling": 0.70, "runtime": 0.80, "program": 0.48}, scope="pool")
        assert t.product_ratio == pytest.approx((0.70 / 0.65) * (0.80 / 0.90))
        assert t.helps is False
        assert t.ratios["program"] == 1.0

    def test_missing_factor_on_both_sides_is_unchanged(self):
        t = trade({"program": 0.48}, {"program": 0.52})
        assert t.ratios == pytest.approx({"scheduling": 1.0, "runtime": 1.0, "program": 0.52 / 0.48})

    def test_bad_trades(self):
        with pytest.raises(DomainError, match="only on one side"):
            trade({"program": 0.48}, {"runtime": 0.9})
        with pytest.raises(DomainError, match="unknown factor"):
            trade({"useful": 0.2}, {"useful": 0.3})
        with pytest.raises(DomainError, match="greater than 0"):
            trade({"program": 0.0}, {"program": 0.5})
        with pytest.raises(DomainError, match="scope"):
            trade({"program": 0.4}, {"program": 0.5}, scope="fleet")  # type: ignore[arg-type]


class TestCostAndTime:
    def test_cost_per_useful_hour(self):
        assert cost_per_useful_hour(2.0, S, R, P) == pytest.approx(2.0 / 0.2808)
        assert cost_per_useful_hour(0.0, S, R, P) == 0.0

    def test_cost_with_a_zero_factor_is_refused(self):
        with pytest.raises(DomainError, match="unbounded"):
            cost_per_useful_hour(2.0, 0.0, R, P)

    def test_held_hours_chargeback_and_spot(self):
        assert held_hours_chargeback(2.0, R, P) == pytest.approx(2.0 / 0.432)
        assert spot_cost_per_useful_hour(3.0, 0.75) == pytest.approx(4.0)
        with pytest.raises(DomainError):
            held_hours_chargeback(2.0, 0.0, P)
        with pytest.raises(DomainError):
            spot_cost_per_useful_hour(3.0, 0.0)

    def test_time_to_result(self):
        # 4 h queue + 10 000 ideal accelerator-h on 128 devices at R P = 0.432
        assert time_to_result(4.0, 10_000.0, 128, R, P) == pytest.approx(4.0 + 10_000.0 / (128 * 0.432))
        with pytest.raises(DomainError, match="never reaches"):
            time_to_result(4.0, 10.0, 8, 0.0, P)

    def test_time_to_result_has_no_scheduling_term(self):
        import inspect

        params = set(inspect.signature(time_to_result).parameters)
        assert "scheduling" not in params


# Bad arguments anywhere raise DomainError, never NaN or a clipped number.
BAD_CALLS = [
    ("S above one", lambda: loss_shares(1.2, R, P)),
    ("R negative", lambda: loss_shares(S, -0.1, P)),
    ("P NaN", lambda: loss_shares(S, R, math.nan)),
    ("P infinite", lambda: marginal_values(S, R, math.inf)),
    ("P a string", lambda: marginal_values(S, R, "0.48")),
    ("P a boolean", lambda: marginal_values(S, R, True)),
    ("job product R above one", lambda: job_product(1.01, P)),
    ("negative price", lambda: cost_per_useful_hour(-2.0, S, R, P)),
    ("NaN price", lambda: cost_per_useful_hour(math.nan, S, R, P)),
    ("chargeback negative price", lambda: held_hours_chargeback(-1.0, R, P)),
    ("spot negative price", lambda: spot_cost_per_useful_hour(-1.0, R)),
    ("negative queue wait", lambda: time_to_result(-1.0, 100.0, 8, R, P)),
    ("negative work", lambda: time_to_result(1.0, -100.0, 8, R, P)),
    ("zero devices", lambda: time_to_result(1.0, 100.0, 0, R, P)),
    ("negative devices", lambda: time_to_result(1.0, 100.0, -8, R, P)),
    ("ceiling above one", lambda: rank_levers(RUNNING, {"program": 1.5})),
    ("factor outside in rank_levers", lambda: rank_levers({**RUNNING, "runtime": 1.1}, {"program": 0.65})),
    ("after above one", lambda: trade({"program": 0.48}, {"program": 1.3})),
    ("from_value above one", lambda: Factor.from_value("runtime", 1.0001, WEEK)),
    ("tiers allocated zero", lambda: tier_ratios(0, 0, 0, productive_reference="hardware peak")),
    ("days negative", lambda: days_at_shortfall(-30, 0.1)),
    ("shortfall one", lambda: days_at_shortfall(30, 1.0)),
    ("overhead above one", lambda: group_overheads_by_factor({"checkpoints": 1.5})),
    ("snapshot share above one", lambda: snapshot_scheduling_goodput(1.2, 0.1)),
    ("stall with S zero", lambda: data_stall_from_capacity_share(0.0, 0.0)),
]


@pytest.mark.parametrize("call", [c for _, c in BAD_CALLS], ids=[n for n, _ in BAD_CALLS])
def test_bad_arguments_raise_domain_error(call):
    with pytest.raises(DomainError):
        call()


# ------------------------------------------------------------------------------------------------
# Orchestrator tiers, planning shortfall, mixed overhead budgets
# ------------------------------------------------------------------------------------------------


class TestTierRatios:
    def test_fault_free_reference_gives_runtime_goodput(self):
        t = tier_ratios(500, 350, 280, productive_reference="fault-free step rate")
        assert t.runtime_goodput == pytest.approx(0.56)
        assert t.is_runtime_goodput and t.measures == "runtime goodput"
        assert t.active_to_allocated == pytest.approx(0.70)
        assert t.productive_to_active == pytest.approx(0.80)
        with pytest.raises(DomainError, match="R alone"):
            _ = t.job_product

    def test_hardware_peak_reference_is_refused_as_runtime_goodput(self):
        t = tier_ratios(500, 350, 280, productive_reference="hardware peak")
        assert t.productive_to_allocated == pytest.approx(0.56)
        assert t.job_product == pytest.approx(0.56)
        assert "collapsed" in t.measures
        with pytest.raises(DomainError, match="not runtime goodput"):
            _ = t.runtime_goodput
        assert any("R x P" in n for n in t.notes)

    def test_reference_is_required_and_checked(self):
        with pytest.raises(TypeError):
            tier_ratios(500, 350, 280)  # type: ignore[call-arg]
        with pytest.raises(DomainError, match="productive_reference"):
            tier_ratios(500, 350, 280, productive_reference="peak")  # type: ignore[arg-type]

    def test_tiers_cannot_exceed_allocated(self):
        with pytest.raises(DomainError, match="active capacity"):
            tier_ratios(500, 600, 280, productive_reference="hardware peak")
        with pytest.raises(DomainError, match="productive capacity"):
            tier_ratios(500, 350, 501, productive_reference="hardware peak")

    def test_nothing_active(self):
        t = tier_ratios(500, 0, 0, productive_reference="fault-free step rate")
        assert t.productive_to_active is None
        assert json.loads(json.dumps(t.to_dict()))["productive_to_active"] is None


class TestDaysAtShortfall:
    def test_scalars(self):
        assert days_at_shortfall(30, 0.10) == pytest.approx(100 / 3)
        assert days_at_shortfall(30, 0.20) == pytest.approx(37.5)
        assert days_at_shortfall(30, 0.0) == 30.0
        assert isinstance(days_at_shortfall(30, 0.1), float)

    def test_not_the_naive_form(self):
        assert days_at_shortfall(30, 0.20) != pytest.approx(30 * 1.2)

    def test_arrays_broadcast(self):
        out = days_at_shortfall(30, np.array([0.0, 0.1, 0.2, 0.5]))
        assert isinstance(out, np.ndarray)
        assert out == pytest.approx([30.0, 100 / 3, 37.5, 60.0])
        with pytest.raises(DomainError, match=r"\[0, 1\)"):
            days_at_shortfall(30, np.array([0.1, 1.0]))
        with pytest.raises(DomainError, match="finite"):
            days_at_shortfall(30, np.array([0.1, np.nan]))


class TestGroupOverheads:
    BUDGET: ClassVar[dict[str, float]] = {
        "pipeline bubbles": 0.05, "checkpoints": 0.03, "failure recovery": 0.02,
        "scheduling delay": 0.04, "preemption": 0.01,
    }

    def test_pitfall_budget_is_split_before_summing(self):
        g = group_overheads_by_factor(self.BUDGET)
        assert g.by_factor == pytest.approx({"scheduling": 0.04, "runtime": 0.06, "program": 0.05})
        assert g.first_order_factors == pytest.approx({"scheduling": 0.96, "runtime": 0.94, "program": 0.95})
        assert g.terms == {"pipeline bubbles": "program", "checkpoints": "runtime",
                           "failure recovery": "runtime", "scheduling delay": "scheduling",
                           "preemption": "runtime"}
        # the pitfall subtracts 0.15 from one ratio; only 0.06 of it is runtime loss
        assert g.naive_total == pytest.approx(0.15)
        assert g.by_factor["runtime"] < g.naive_total

    def test_missing_factors_are_zero(self):
        g = group_overheads_by_factor({"Checkpoints": 0.02})
        assert g.by_factor == {"scheduling": 0.0, "runtime": 0.02, "program": 0.0}

    def test_unknown_category_raises(self):
        with pytest.raises(DomainError, match="'cosmic rays' is not assigned"):
            group_overheads_by_factor({"cosmic rays": 0.01})

    def test_queue_wait_gets_a_hint(self):
        with pytest.raises(DomainError, match="time to result"):
            group_overheads_by_factor({"queue wait": 0.05})

    def test_extra_categories(self):
        g = group_overheads_by_factor({"cosmic rays": 0.01}, extra_categories={"cosmic rays": "runtime"})
        assert g.by_factor["runtime"] == pytest.approx(0.01)
        with pytest.raises(DomainError, match="must map to one of"):
            group_overheads_by_factor({}, extra_categories={"x": "fleet"})  # type: ignore[dict-item]

    def test_a_factor_cannot_lose_more_than_everything(self):
        with pytest.raises(DomainError, match="more than the whole"):
            group_overheads_by_factor({"checkpoints": 0.6, "preemption": 0.5})


# ------------------------------------------------------------------------------------------------
# Scheduling snapshot arithmetic (fleetlib.scheduling.snapshot)
# ------------------------------------------------------------------------------------------------


class TestSnapshot:
    def test_pool_snapshot(self):
        snap = snapshot_scheduling_goodput(0.80, 0.15)
        assert isinstance(snap, SnapshotScheduling)
        assert snap.S == pytest.approx(0.65)
        assert snap.losses == pytest.approx({"unheld": 0.20, "partial_gang_hold": 0.15})
        assert snap.scheduling_loss == pytest.approx(0.35)
        assert snap.S + sum(snap.losses.values()) == pytest.approx(1.0)
        assert snap.atomic_admission_ceiling == pytest.approx(0.80)
        assert "every device" in snap.ceiling_condition

    def test_distractors_are_not_reachable(self):
        snap = snapshot_scheduling_goodput(0.80, 0.15)
        assert snap.S != pytest.approx(0.80)  # counting partial gangs as held
        assert snap.S != pytest.approx(0.60)  # also subtracting input waits
        with pytest.raises(DomainError, match="runtime loss"):
            snapshot_scheduling_goodput(0.80, 0.15, input_wait_share=0.05)  # type: ignore[arg-type]

    def test_incomplete_cannot_exceed_assigned(self):
        with pytest.raises(DomainError, match="part of the assigned"):
            snapshot_scheduling_goodput(0.10, 0.15)

    def test_edges(self):
        assert snapshot_scheduling_goodput(1.0, 0.0).S == 1.0
        full = snapshot_scheduling_goodput(1.0, 1.0)
        assert full.S == 0.0 and full.atomic_admission_ceiling == 1.0

    def test_to_factor_has_no_unattributed_loss(self):
        f = snapshot_scheduling_goodput(0.80, 0.15).to_factor(WEEK)
        assert f.boundary == "scheduling" and f.value == pytest.approx(0.65)
        assert f.losses["unattributed"] == pytest.approx(0.0, abs=1e-12)
        assert f.losses["partial_gang_hold"] == pytest.approx(0.15)

    def test_to_dict(self):
        d = json.loads(json.dumps(snapshot_scheduling_goodput(0.80, 0.15).to_dict()))
        assert d["scheduling_loss"] == pytest.approx(0.35)

    def test_data_stall(self):
        assert data_stall_from_capacity_share(0.05, 0.65) == pytest.approx(1 / 13)
        snap = snapshot_scheduling_goodput(0.80, 0.15)
        assert data_stall_from_capacity_share(0.05, snap) == pytest.approx(0.05 / 0.65)
        with pytest.raises(DomainError, match="inside complete"):
            data_stall_from_capacity_share(0.70, 0.65)


# --- Window.parse: the one window parser ------------------------------------------------------------

def test_window_parse_takes_every_documented_shape():
    from fleetlib.accounting import Window

    w = Window.parse(("2024-03-04T00:00Z", "2024-03-05T08:00+08:00"))
    assert w is not None and w.duration_s == 86_400.0
    assert Window.parse("2024-03-04T00:00Z/2024-03-05T00:00Z").same_as(w)
    assert Window.parse("2024-03-04T00:00Z .. 2024-03-05T00:00Z").same_as(w)
    assert Window.parse(w) is w
    assert Window.parse(None) is None
    assert str(w.start.tz) == "UTC"


@pytest.mark.parametrize(("value", "message"), [
    (("2024-03-04", "2024-03-05T00:00Z"), "has no zone; write it with one, for example '2024-03-04T00:00Z'"),
    (("2024-03-05T00:00Z", "2024-03-04T00:00Z"), "must be after its start"),
    ("2024-03-04T00:00Z", "must be 'START/END'"),
    (("not a time", "2024-03-04T00:00Z"), "is not an ISO 8601 time"),
    (3, "must be None, a Window"),
    (("0001-01-01T00:00Z", "2024-03-04T00:00Z"), "window start '0001-01-01T00:00Z' is outside the times "
                                                 "nanoseconds can hold (1677-09-21"),
    (("2024-03-04T00:00Z", "9999-01-01T00:00Z"), "window end '9999-01-01T00:00Z' is outside"),
])
def test_window_parse_refuses_with_a_clear_message(value, message):
    from fleetlib.accounting import Window

    with pytest.raises(DomainError, match=re.escape(message)):
        Window.parse(value)


# --- mpg(): the chain check --------------------------------------------------------------------------

def _chain(capacity=1000.0, held=700.0, productive=560.0, ideal=280.0, *, r_den=None, p_den=None,
           window=None):
    from fleetlib.accounting import Factor, Window

    w = window or Window.between("2024-03-04T00:00Z", "2024-03-11T00:00Z")
    unit = {"numerator_unit": "device-s", "denominator_unit": "device-s"}
    s = Factor("scheduling", held, capacity, w, **unit)
    r = Factor("runtime", productive, held if r_den is None else r_den, w, **unit)
    p = Factor("program", ideal, productive if p_den is None else p_den, w, **unit)
    return s, r, p


def test_a_chained_product_telescopes_to_ideal_over_capacity():
    from fleetlib.accounting import mpg

    g = mpg(*_chain())
    assert g.value == pytest.approx(280.0 / 1000.0, rel=1e-12)
    assert set(g.chain) == {"scheduling->runtime", "runtime->program"}
    assert all(c["holds"] and c["residual"] == 0.0 for c in g.chain.values())
    assert g.to_dict()["chain"]["runtime->program"]["unit"] == "device-s"


@settings(max_examples=200, deadline=None)
@given(st.floats(1.0, 1e12), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_chained_mpg_equals_the_direct_ratio(capacity, s, r, p):
    """Property: with each denominator the previous numerator, S x R x P = ideal / capacity to 1e-9."""
    from fleetlib.accounting import mpg

    held = capacity * s
    productive = held * r
    ideal = productive * p
    if held <= 0 or productive <= 0:
        return  # a zero numerator cannot be the next factor's (positive) denominator
    g = mpg(*_chain(capacity, held, productive, ideal))
    assert g.value == pytest.approx(ideal / capacity, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize(("kwargs", "where"), [
    ({"r_den": 690.0}, "scheduling->runtime"),
    ({"p_den": 600.0}, "runtime->program"),
])
def test_a_broken_chain_names_its_boundary_and_residual(kwargs, where):
    from fleetlib.accounting import mpg
    from fleetlib.quality import ChainMismatchError

    with pytest.raises(ChainMismatchError, match=rf"^{where}: .* residual [+-]") as exc:
        mpg(*_chain(**kwargs))
    assert ("-10" if where.startswith("sched") else "+40") in str(exc.value)


def test_the_chain_is_checked_in_one_unit():
    from fleetlib.accounting import Factor, mpg
    from fleetlib.quality import ChainMismatchError

    s, r, p = _chain()
    r_hours = Factor("runtime", r.numerator / 3600, r.denominator / 3600, r.window,
                     numerator_unit="device-h", denominator_unit="device-h")
    with pytest.raises(ChainMismatchError, match="in device-s but the runtime denominator is in device-h"):
        mpg(s, r_hours, p)


def test_measured_factors_do_not_match_by_a_nominal_label():
    from fleetlib.accounting import Window, mpg

    with pytest.raises(WindowMismatchError, match="is nominal; a measured factor needs a measured window"):
        mpg(*_chain(window=Window.nominal("one week")))
