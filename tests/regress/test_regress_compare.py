"""Regressions under a contract: each injected regression caught by its tier, false alarms measured.

One synthetic baseline fleet and one candidate per injected regression (the same seed: the same jobs
are drawn), each measured once for the module.  Expected tiers and factors come from
fleetlib.regress.synth.EXPECTED, the injections' truth from each bundle's truth.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from regress_support import regression_units

from fleetlib.quality import DomainError
from fleetlib.regress import fleet_units
from fleetlib.regress.compare import compare, false_alarm_rate, t_quantile
from fleetlib.regress.synth import EXPECTED
from fleetlib.regress.tiers import straggler_episodes

#: The regression pairs are written once per process: under pytest-xdist these modules share one worker.
pytestmark = pytest.mark.xdist_group("regress_pairs")


@pytest.fixture(scope="module")
def pairs() -> dict[str, Any]:
    return regression_units()


def test_poisson_bounds_match_garwood_tables() -> None:
    from fleetlib.regress.compare import poisson_bounds

    for k, (lo, hi) in {0: (0.0, 3.689), 5: (1.623, 11.668), 20: (12.217, 30.889)}.items():
        got = poisson_bounds(k, 0.025)
        assert got[0] == pytest.approx(lo, abs=2e-3) and got[1] == pytest.approx(hi, abs=2e-3)


def test_t_quantile_matches_tables() -> None:
    # Student's t table values (two-sided 95 % and 99 %), and the normal limit
    assert t_quantile(0.975, 10) == pytest.approx(2.228, abs=2e-3)
    assert t_quantile(0.995, 5) == pytest.approx(4.032, abs=2e-2)
    assert t_quantile(0.975, 10_000) == pytest.approx(1.960, abs=1e-3)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_injected_regression_is_caught_by_its_tier(pairs: dict[str, Any], name: str) -> None:
    exp = EXPECTED[name]
    res = compare(pairs["units"]["baseline"], pairs["units"][name], under_test=exp["under_test"])
    assert not res.refused, res.confounders
    hit = [v for v in res.verdicts if v["metric"] == exp["metric"]]
    assert len(hit) == 1
    v = hit[0]
    assert v["tier"] == exp["tier"] and v["factor"] == exp["factor"]
    assert v["verdict"] == "regression", v
    assert v["significant"] is True and (v["ci_high"] < 0 or v["ci_low"] > 0)
    # the tier's section holds it, charged to the tier's factor
    assert v in res.sections[exp["tier"]]["metrics"]
    assert res.sections[exp["tier"]]["factor"] == exp["factor"]


def test_compiler_regression_size_is_the_injected_minutes(pairs: dict[str, Any]) -> None:
    extra = pairs["pairs"].truth["compiler"]["injected"]["options"]["compile_extra_s"]
    res = compare(pairs["units"]["baseline"], pairs["units"]["compiler"], under_test=["compiler_version"])
    v = next(v for v in res.verdicts if v["metric"].startswith("startup per job"))
    # same jobs drawn, every timed job's startup lengthened by exactly the injected seconds
    assert v["delta"] == pytest.approx(extra, rel=0.02)
    assert v["ci_low"] <= extra <= v["ci_high"]


def test_storage_change_doubles_checkpoint_pause(pairs: dict[str, Any]) -> None:
    res = compare(pairs["units"]["baseline"], pairs["units"]["storage"])
    v = next(v for v in res.verdicts if v["metric"] == "checkpoint pause per commit")
    assert v["candidate"] / v["baseline"] == pytest.approx(2.0, rel=0.05)


def test_kernel_regression_only_on_its_version(pairs: dict[str, Any]) -> None:
    res = compare(pairs["units"]["baseline"], pairs["units"]["kernel"])
    by = {v["metric"]: v for v in res.sections["fleet_baseline"]["metrics"]}
    assert by["program goodput, H100 SXM x 2.2"]["verdict"] == "regression"
    assert by["program goodput, H100 SXM x 2.1"]["verdict"] != "regression"
    # the 2.1 jobs are the same draws (only placement may drop one): their MFU barely moves
    assert abs(by["program goodput, H100 SXM x 2.1"]["delta"]) < 0.01


def test_a_contract_difference_not_under_test_refuses_the_verdict(pairs: dict[str, Any]) -> None:
    base, cand = pairs["units"]["baseline"], pairs["units"]["compiler"]
    res = compare(base, cand)
    assert res.refused and res.confounders == ["compiler_version"]
    assert all(v["significant"] is None for v in res.verdicts)
    both = [v for v in res.verdicts if v["baseline"] is not None and v["candidate"] is not None]
    assert all(v["verdict"].startswith("no verdict: contract differs on compiler_version") for v in both)
    told = compare(base, cand, allow_confounded=True)
    assert told.confounders == ["compiler_version"] and not told.refused
    assert told.significant(tier="startup_recovery")


def test_straddling_a_software_version_change_is_named(tmp_path: Path) -> None:
    from fleetlib.fleet.synth import synth_fleet

    a = synth_fleet(tmp_path / "a", devices=16, days=0.25, seed=5, inject={"software_version": "1.0"})
    b = synth_fleet(
        tmp_path / "b",
        devices=16,
        days=0.25,
        seed=5,
        inject={"software_version": "2.0", "checkpoint_factor": 2.0},
    )
    ua, ub = fleet_units(a.manifest, cycle="1h"), fleet_units(b.manifest, cycle="1h")
    res = compare(ua, ub)
    diff = {d["field"]: d for d in res.contract_differences}
    assert diff["software_version"]["baseline"] == "1.0" and diff["software_version"]["candidate"] == "2.0"
    assert res.refused and res.confounders == ["software_version"]
    assert not res.significant()
    assert not compare(ua, ub, under_test=["software_version"]).refused


def test_false_alarm_rate_on_unchanged_pairs(pairs: dict[str, Any]) -> None:
    fa = false_alarm_rate(pairs["units"]["baseline"], pairs=20, boot=200, seed=1)
    print(
        f"false-alarm rate {fa['rate']:.3f} over {fa['pairs']} unchanged pairs "
        f"({fa['metrics_per_pair']} metrics each): {fa['alarmed']}"
    )
    assert fa["pairs"] == 20
    assert fa["rate"] <= 0.05


def test_every_injected_straggler_episode_is_located(pairs: dict[str, Any]) -> None:
    truth = pairs["pairs"].truth["gray_failure"]["injected"]["straggler_episodes"]
    assert truth, "the generator injected no episode"
    found = straggler_episodes(pairs["units"]["gray_failure"].rank_timers)
    for ep in truth:
        a, z = ep["steps"]
        hits = [
            f
            for f in found
            if f["job_id"] == ep["job_id"]
            and f["steps"][0] <= z
            and f["steps"][1] >= a
            and set(ep["ranks"]) <= set(f["ranks"])
        ]
        assert hits, ep
    # and the baseline's background (single slow steps) is no episode
    assert straggler_episodes(pairs["units"]["baseline"].rank_timers) == []


def test_split_by_software_version_is_under_test(pairs: dict[str, Any]) -> None:
    parts = pairs["units"]["kernel"].split("software_version")
    assert set(parts) == {"2.1", "2.2"}
    assert set(parts["2.1"].jobs["software_version"]) == {"2.1"}
    res = compare(parts["2.1"], parts["2.2"], under_test=["software_version"])
    assert not res.refused
    assert any("S not split" in n for n in res.notes)
    assert next(v for v in res.verdicts if v["metric"] == "scheduling goodput")["baseline"] is None


def test_paired_self_comparison_is_exactly_zero(pairs: dict[str, Any]) -> None:
    u = pairs["units"]["baseline"]
    res = compare(u, u, paired=True, boot=60)
    deltas = [v["delta"] for v in res.verdicts if v["delta"] is not None]
    assert deltas and np.allclose(deltas, 0.0)
    assert not res.significant()


def test_bad_options_are_refused(pairs: dict[str, Any]) -> None:
    u = pairs["units"]["baseline"]
    with pytest.raises(DomainError):
        compare(u, u, level=1.5)
    with pytest.raises(DomainError):
        compare(u, u, tiers=["no such tier"])


def test_binomial_bounds_match_clopper_pearson() -> None:
    from fleetlib.regress.compare import binomial_bounds

    lo, hi = binomial_bounds(0, 10, 0.025)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 10), abs=1e-6)
    lo, hi = binomial_bounds(5, 10, 0.025)
    assert lo == pytest.approx(0.1871, abs=1e-3) and hi == pytest.approx(0.8129, abs=1e-3)


def test_events_rates_compared_by_the_conditional_test() -> None:
    import pandas as pd

    from fleetlib.regress.compare import _events_verdict
    from fleetlib.regress.tiers import Metric

    m = Metric(
        "episodes", "program", "gray_failure", "jobs", "k", "n", "lower", "per rank-step", kind="events"
    )
    quiet = pd.DataFrame({"k": [0.0, 0.0], "n": [5000.0, 5000.0]})
    loud = pd.DataFrame({"k": [9.0, 7.0], "n": [5000.0, 5000.0]})
    rec = _events_verdict(m, quiet, loud, 0.05, False, [])
    # 16 of 16 events on one side of equal exposures: p = 0.5 ** 16, far below 0.05
    assert rec["verdict"] == "regression" and rec["ci_low"] > 0
    assert rec["delta"] == pytest.approx(16 / 10_000)
    same = _events_verdict(m, loud, loud, 0.05, False, [])
    assert same["verdict"] == "no significant change" and same["ci_low"] < 0 < same["ci_high"]
    none = _events_verdict(m, quiet, quiet, 0.05, False, [])
    assert none["significant"] is None


def test_a_boot_count_that_would_exhaust_memory_is_refused(pairs):
    message = (r"^boot=1000000000 draws over the [\d,]+ rows of the \w+ table would hold [\d,]+ bootstrap "
               r"weights \(at most 268,435,456")
    with pytest.raises(DomainError, match=message):  # refused before a weight is drawn
        compare(pairs["units"]["baseline"], pairs["units"]["storage"], boot=10**9)
