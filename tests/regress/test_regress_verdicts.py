"""Verdicts with power: the checkpoint twin, a bundle against itself, unchanged pairs, Holm, units.

The acceptance pair of issue 27: a 2-day, 4-node synthetic fleet and its twin in which every
synchronous checkpoint pause is doubled and nothing else (``fleetlib.regress.synth.checkpoint_twin``).
Truths come from the generator (its ``truth.json`` and the doubling itself) and from hand-worked
Holm examples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleetlib.regress import fleet_units
from fleetlib.regress.compare import MIN_UNITS, compare, false_alarm_rate, holm, pairing, unit_tables
from fleetlib.regress.synth import checkpoint_twin, unchanged_pairs

#: The twin is written and measured once per process: under pytest-xdist this module keeps one worker.
pytestmark = pytest.mark.xdist_group("checkpoint_twin")


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    a, b = checkpoint_twin(tmp_path_factory.mktemp("twin"))
    return {
        "paths": (a, b),
        "truth": tuple(json.loads((m.parent / "truth.json").read_text()) for m in (a, b)),
        "units": (fleet_units(a), fleet_units(b)),
    }


@pytest.fixture(scope="module")
def twin_result(twin: dict[str, Any]) -> Any:
    return compare(*twin["units"])


def _by_metric(res: Any) -> dict[str, dict[str, Any]]:
    return {v["metric"]: v for v in res.verdicts}


def test_commit_pauses_are_the_generators_checkpoint_time(twin: dict[str, Any]) -> None:
    for units, truth in zip(twin["units"], twin["truth"], strict=True):
        c = units.commits
        devices = units.jobs.loc[c["job_id"], "devices"].to_numpy(float)
        assert float((c["pause_s"].to_numpy() * devices).sum()) == pytest.approx(
            truth["factors"]["runtime"]["losses"]["checkpoint"], rel=1e-12
        )
    # every commit of the twin is the baseline's commit with its pause doubled
    a, b = (u.commits.set_index(["job_id", "attempt", "pause"])["pause_s"] for u in twin["units"])
    shared = a.index.intersection(b.index)
    assert len(shared) == len(a) == len(b)
    assert np.array_equal(b.loc[shared].to_numpy(), 2.0 * a.loc[shared].to_numpy())


def test_the_twin_is_paired_by_job_and_cycle(twin: dict[str, Any], twin_result: Any) -> None:
    p = twin_result.settings["pairing"]
    assert p["job"]["paired"] and p["cycle"]["paired"]
    assert p["job"]["shared"] == len(twin["units"][0].jobs)
    by = _by_metric(twin_result)
    assert by["checkpoint pause per commit"]["pairing"].startswith("paired by job")
    assert by["checkpoint pause per commit"]["resampling"] == "jobs (their checkpoint commits summed)"
    assert by["runtime goodput"]["pairing"].startswith("paired by job")
    assert by["scheduling goodput"]["pairing"].startswith("paired by cycle")


def test_a_doubled_checkpoint_pause_is_flagged_and_nothing_in_scheduling(
    twin: dict[str, Any], twin_result: Any
) -> None:
    by = _by_metric(twin_result)
    pause = by["checkpoint pause per commit"]
    assert pause["verdict"] == "regression" and pause["tier"] == "startup_recovery"
    assert pause["candidate"] == pytest.approx(2.0 * pause["baseline"], rel=1e-12)
    assert pause["ci_low"] <= pause["delta"] <= pause["ci_high"] and pause["ci_low"] > 0
    assert pause["units"] == twin["units"][0].commits["job_id"].nunique() >= MIN_UNITS  # jobs, not days
    share = by["runtime.checkpoint share"]
    assert share["verdict"] == "regression" and 0 < share["ci_low"] <= share["ci_high"] <= 1
    assert twin_result.significant(tier="startup_recovery")
    scheduling = [v for v in twin_result.verdicts if v["factor"] == "scheduling"]
    assert scheduling and not any(v["significant"] for v in scheduling)
    # two days are two demand cycles: S says so instead of giving an interval
    s = by["scheduling goodput"]
    assert s["verdict"] == "too few units (n=2) to test" and s["ci_low"] is None and s["mde"] is None
    # P is untouched by a checkpoint pause: the same steps on every job
    assert by["program goodput"]["verdict"] == "no change on any unit"
    print(
        "checkpoint twin: pause per commit {baseline:.2f} -> {candidate:.2f} s, delta {delta:+.2f} "
        "[{ci_low:.2f}, {ci_high:.2f}] at {ci_level:.4f}, MDE {mde:.2f} s over {units} jobs; ".format(**pause)
        + "runtime.checkpoint share {baseline:.4f} -> {candidate:.4f} [{ci_low:.4f}, {ci_high:.4f}], "
        "MDE {mde:.4f}".format(**share)
    )
    print("significant:", [(v["metric"], v["verdict"]) for v in twin_result.verdicts if v["significant"]])


def test_every_interval_lies_in_its_metrics_range_and_matches_its_verdict(twin_result: Any) -> None:
    for v in twin_result.verdicts:
        if v["ci_low"] is None:
            continue
        assert v["ci_low"] >= -v["baseline"] - 1e-12  # the candidate cannot be below 0
        if "fraction" in v["unit"]:
            assert v["ci_high"] <= 1.0 - v["baseline"] + 1e-12 and -1 <= v["ci_low"] <= v["ci_high"] <= 1
        # Holm's level for each interval: it excludes 0 exactly when the metric is significant
        assert v["significant"] == (v["ci_low"] > 0 or v["ci_high"] < 0), v
        assert v["mde"] is not None and v["mde"] >= 0


def test_a_bundle_against_itself_gives_no_verdict(twin: dict[str, Any]) -> None:
    u = twin["units"][0]
    res = compare(u, u)
    assert not any(v["significant"] for v in res.verdicts)
    assert res.settings["tested_metrics"] == 0 and all(p["paired"] for p in res.settings["pairing"].values())


def test_independent_pairing_is_named_and_too_few_units_are_counted(twin: dict[str, Any]) -> None:
    res = compare(*twin["units"], paired=False)
    assert {p["text"] for p in res.settings["pairing"].values()} == {"independent (asked)"}
    pause = _by_metric(res)["checkpoint pause per commit"]
    assert pause["pairing"] == "independent (asked)" and pause["verdict"] == "regression"
    # fewer than MIN_UNITS jobs on a side: no interval, the count named
    few = twin["units"][0].subset(jobs=list(twin["units"][0].jobs.index[: MIN_UNITS - 1]))
    res = compare(few, twin["units"][1], paired=False)
    r = _by_metric(res)["runtime goodput"]
    assert r["verdict"] == f"too few units (n={len(few.jobs)}) to test" and r["ci_low"] is None


def test_jobs_of_another_seed_are_not_the_same_jobs(twin: dict[str, Any], tmp_path: Path) -> None:
    from fleetlib.fleet.synth import synth_fleet

    other = synth_fleet(tmp_path / "other", devices=16, days=0.5, seed=11, inject={})
    ta, tb = unit_tables(twin["units"][0]), unit_tables(fleet_units(other.manifest, cycle="1h"))
    shared_ids = set(ta["jobs"]["job_id"]) & set(tb["jobs"]["job_id"])
    assert shared_ids  # the generator numbers jobs alike...
    p = pairing(ta, tb)
    assert not p["job"]["paired"] and not p["cycle"]["paired"]  # ...they are not the same jobs


def test_sides_sharing_half_their_jobs_are_paired_by_job(twin: dict[str, Any]) -> None:
    u = twin["units"][0]
    ids = list(u.jobs.index)
    n = len(ids)
    # two overlapping sets of the same bundle's jobs (as two windows of long-running jobs would be)
    early, late = u.subset(jobs=ids[: 3 * n // 4]), u.subset(jobs=ids[n // 4 :])
    p = pairing(unit_tables(early), unit_tables(late))
    shared = len(set(ids[: 3 * n // 4]) & set(ids[n // 4 :]))
    assert p["job"]["paired"] and p["job"]["shared"] == shared
    assert p["job"]["text"] == f"paired by job ({shared} shared of {3 * n // 4} | {n - n // 4})"
    halves = pairing(unit_tables(u.subset(jobs=ids[: n // 2])), unit_tables(u.subset(jobs=ids[n // 2 :])))
    assert not halves["job"]["paired"] and halves["job"]["text"].startswith("independent (0 of")
    res = compare(early, late)
    assert all(v["pairing"].startswith("paired by job") for v in res.verdicts if v["factor"] == "runtime")


def test_holm_step_down_by_hand() -> None:
    # sorted 0.01, 0.012, 0.03, 0.04 at alpha 0.05: 0.01 <= 0.05/4, 0.012 <= 0.05/3, 0.03 > 0.05/2: stop
    reject, level, adjusted = holm([0.03, 0.01, 0.04, 0.012], 0.05)
    assert reject == [False, True, False, True]
    assert level == pytest.approx([0.025, 0.0125, 0.025, 0.05 / 3])  # the rest at the step that stopped
    assert adjusted == pytest.approx([0.06, 0.04, 0.06, 0.04])
    # Holm rejects what Bonferroni (0.05 / 3 each) does not
    assert holm([0.012, 0.02, 0.03], 0.05)[0] == [True, True, True]
    assert holm([], 0.05) == ([], [], [])


def test_a_share_interval_is_cut_to_its_range() -> None:
    from fleetlib.regress.compare import _interval
    from fleetlib.regress.tiers import Metric

    m = Metric("x share", "runtime", "loss", "jobs", "n", "d", "lower", "fraction", upper=1.0)
    # a noisy share near 0 that went near 1: delta +- t x se would leave [-baseline, 1 - baseline]
    r = {"va": 0.05, "vb": 0.95, "se": 0.6, "df": 9.0}
    lo, hi = _interval(m, r, 0.05)
    assert lo == pytest.approx(-0.05) and hi == pytest.approx(0.95)
    t = Metric("pause", "runtime", "startup_recovery", "commits", "n", "d", "lower", "s")
    lo, hi = _interval(t, {"va": 19.8, "vb": 39.5, "se": 400.0, "df": 1.0}, 0.05)
    assert lo == pytest.approx(-19.8) and hi > 1000  # a time's delta: never below minus the baseline


@pytest.mark.slow
def test_false_alarms_over_twenty_unchanged_pairs(tmp_path: Path) -> None:
    paths = unchanged_pairs(tmp_path, pairs=20)  # 7 fleets, 20 of their 21 pairs
    measured = {p: fleet_units(p) for p in dict.fromkeys(p for pair in paths for p in pair)}
    pairs = [(measured[a], measured[b]) for a, b in paths]
    fa = false_alarm_rate(pairs)
    print(
        f"false-alarm rate {fa['rate']:.3f} over {fa['pairs']} unchanged pairs "
        f"(up to {fa['tested_per_pair']} of {fa['metrics_per_pair']} metrics tested each): {fa['alarmed']}"
    )
    assert fa["pairs"] == 20 and fa["rate"] <= 0.05
    one = compare(*pairs[0])
    assert not one.settings["pairing"]["job"]["paired"]  # other seeds: other jobs, compared independently
    assert all(v["pairing"].startswith("independent") for v in one.verdicts if v["factor"] == "runtime")
