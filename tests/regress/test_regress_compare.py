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
from fleetlib.regress.compare import compare
from fleetlib.regress.synth import EXPECTED
from fleetlib.regress.tiers import straggler_episodes

#: The regression pairs are written once per process: under pytest-xdist these modules share one worker.
pytestmark = pytest.mark.xdist_group("regress_pairs")


@pytest.fixture(scope="module")
def pairs() -> dict[str, Any]:
    return regression_units()


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


def test_self_comparison_is_paired_and_gives_no_verdict(pairs: dict[str, Any]) -> None:
    u = pairs["units"]["baseline"]
    res = compare(u, u, boot=60)
    assert all(p["paired"] for p in res.settings["pairing"].values())
    deltas = [v["delta"] for v in res.verdicts if v["delta"] is not None]
    assert deltas and np.allclose(deltas, 0.0)
    assert not any(v["significant"] for v in res.verdicts)
    assert res.settings["tested_metrics"] == 0
    measured = [v for v in res.verdicts if v["delta"] is not None]
    quiet = {"no change on any unit", "no events on either side: nothing to test"}
    assert {v["verdict"] for v in measured} <= quiet


def test_bad_options_are_refused(pairs: dict[str, Any]) -> None:
    u = pairs["units"]["baseline"]
    with pytest.raises(DomainError):
        compare(u, u, level=1.5)
    with pytest.raises(DomainError):
        compare(u, u, tiers=["no such tier"])


def test_events_rates_compared_by_the_conditional_test() -> None:
    import pandas as pd

    from fleetlib.regress.compare import POWER, _interval, _mde, _test
    from fleetlib.regress.tiers import Metric

    m = Metric(
        "episodes", "program", "gray_failure", "jobs", "k", "n", "lower", "per rank-step", kind="events"
    )

    def side(k: list[float]) -> dict[str, pd.DataFrame]:
        return {"jobs": pd.DataFrame({"job_key": ["a", "b"], "k": k, "n": [5000.0, 5000.0]})}

    quiet, loud = side([0.0, 0.0]), side([9.0, 7.0])
    r = _test(m, quiet, loud, False, 50, 0)
    # 16 of 16 events on one side of equal exposures: p = 2 x 0.5 ** 16 (two-sided, exact)
    assert r["p"] == pytest.approx(2 * 0.5**16)
    assert r["vb"] - r["va"] == pytest.approx(16 / 10_000)
    lo, hi = _interval(m, r, 0.05)
    # Clopper-Pearson at 16 of 16: p >= 0.025 ** (1 / 16), mapped onto the rates' delta
    pl = 0.025 ** (1 / 16)
    assert lo == pytest.approx(16 * (pl / 10_000 - (1 - pl) / 10_000)) and hi == pytest.approx(16 / 10_000)
    same = _test(m, loud, loud, False, 50, 0)
    assert same["p"] == pytest.approx(1.0)
    lo, hi = _interval(m, same, 0.05)
    assert lo < 0 < hi
    assert _test(m, quiet, quiet, False, 50, 0)["p"] is None
    # normal-approximation MDE of two Poisson rates at the pooled rate
    from scipy.stats import norm

    rate = 32 / 20_000  # 16 events on each side
    z = norm.ppf(1 - 0.05 / 2) + norm.ppf(POWER)
    assert _mde(m, same, 0.05) == pytest.approx(z * (2 * rate / 10_000) ** 0.5)


def test_a_boot_count_that_would_exhaust_memory_is_refused(pairs):
    message = (r"^boot=1000000000 draws over the [\d,]+ units of the \w+ table would hold [\d,]+ bootstrap "
               r"indices \(at most 268,435,456")
    with pytest.raises(DomainError, match=message):  # refused before a weight is drawn
        compare(pairs["units"]["baseline"], pairs["units"]["storage"], boot=10**9)
