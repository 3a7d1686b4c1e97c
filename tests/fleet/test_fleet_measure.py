"""The walk on the bundled synthetic fleet: every factor and loss equals the generator's truth file."""

from __future__ import annotations

import argparse
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from fleetlib.accounting import mpg
from fleetlib.fleet import FleetMeasurement, load_manifest, measure_fleet, synth_fleet
from fleetlib.fleet import commands as fleet_commands
from fleetlib.quality import ChainMismatchError, DomainError

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "data" / "fleet" / "synthetic"
RTOL = 1e-9


def close(a: float, b: float, rtol: float = RTOL) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-6)


@pytest.fixture(scope="module")
def truth() -> dict:
    return json.loads((BUNDLE / "truth.json").read_text())


@pytest.fixture(scope="module")
def measured() -> FleetMeasurement:
    return measure_fleet(BUNDLE / "fleet.yaml")


def test_every_factor_equals_the_truth(measured: FleetMeasurement, truth: dict) -> None:
    for f in (measured.scheduling, measured.runtime, measured.program):
        t = truth["factors"][f.boundary]
        assert close(f.value, t["value"]), f.boundary
        assert close(f.numerator, t["numerator_device_s"]), f.boundary
        assert close(f.denominator, t["denominator_device_s"]), f.boundary
    assert close(measured.mpg, truth["mpg"])


def test_every_loss_equals_the_truth(measured: FleetMeasurement, truth: dict) -> None:
    for f in (measured.scheduling, measured.runtime, measured.program):
        injected = truth["factors"][f.boundary]["losses"]
        for name, value in f.losses.items():
            # a category the generator did not inject is 0 in the measurement (unattributed included)
            assert close(value, injected.get(name, 0.0)), (f.boundary, name, value, injected.get(name))
        for name in injected:
            assert name in f.losses, (f.boundary, name)
    oos = measured.to_dict()["pools"]
    assert close(sum(p["capacity_device_s"] for p in oos.values()), truth["in_service_capacity_device_s"])


def test_every_injected_category_shows_up(truth: dict) -> None:
    r = truth["factors"]["runtime"]["losses"]
    for name in ("startup", "input_wait", "checkpoint", "recovery", "rework", "idle", "zombie", "unobserved",
                 "reconciliation_residual"):
        assert r[name] > 0, name
    p = truth["factors"]["program"]["losses"]
    assert p["step_time_above_baseline"] > 0 and p["below_ideal_rate"] > 0 and p["unobserved"] > 0
    s = truth["factors"]["scheduling"]
    assert s["losses"]["idle_with_queue"] > 0 and s["losses"]["idle_empty_queue"] > 0
    assert s["out_of_service_device_s"] > 0  # the drained node


def test_per_job_and_per_pool_equal_the_truth(measured: FleetMeasurement, truth: dict) -> None:
    jobs = measured.to_dict()["jobs"]
    assert set(jobs) == set(truth["jobs"])
    for job, t in truth["jobs"].items():
        m = jobs[job]
        assert close(m["held_device_s"], t["held_device_s"]), job
        assert close(m["productive_device_s"], t["productive_device_s"]), job
        assert close(m["runtime_goodput"], t["runtime_goodput"]), job
        if t.get("program_goodput") is not None:
            assert close(m["program_goodput"], t["program_goodput"]), job
        else:
            assert m["program_goodput"] is None
        assert m["observed"] == (t["kind"] != "unobserved")
        assert m["zombie"] == (t["kind"] == "zombie")
    for pool, t in truth["pools"].items():
        m = measured.pools[pool]
        assert close(m["capacity_device_s"], t["capacity_device_s"])
        assert close(m["held_device_s"], t["held_device_s"])
        for k in ("idle_with_queue", "idle_empty_queue", "partial_gang_hold"):
            assert close(m["scheduling_losses"][k], t[k]), (pool, k)


def test_trace_partitions_and_coverage_equal_the_truth(measured: FleetMeasurement, truth: dict) -> None:
    traced = {j: t for j, t in truth["jobs"].items() if "trace_partition_device_s" in t}
    assert traced and set(measured.traces) == set(traced)
    for job, t in traced.items():
        m = measured.traces[job]
        assert close(m["coverage"], t["trace_coverage"])
        for part, value in t["trace_partition_device_s"].items():
            assert close(m["partition_device_s"][part], value), (job, part)
        assert close(sum(m["partition_device_s"].values()), t["productive_device_s"])


def test_trace_fleet_law_terms_regroup_the_truths_partition(measured: FleetMeasurement, truth: dict) -> None:
    """The Fleet Law terms of a traced job regroup the generator's partition and add up to productive time."""
    traced = {j: t for j, t in truth["jobs"].items() if "trace_partition_device_s" in t}
    for job, t in traced.items():
        law = measured.traces[job]["fleet_law_device_s"]
        part = t["trace_partition_device_s"]
        assert close(sum(law.values()), t["productive_device_s"]), job
        local = law["local_compute"] + law["local_memory"]
        assert close(local, part["compute"] + part["exposed_memcpy"]), job
        assert close(law["exposed_comm"], part["exposed_comm"]), job
        assert close(law["dispatch"], part["host_dispatch"]), job
        assert close(law["sync"] + law["other"], part["peer_wait"] + part["idle"]), job
        assert close(sum(measured.traces[job]["fleet_law_shares"].values()), 1.0), job


def test_fleet_kernel_ranking_of_the_traced_jobs(measured: FleetMeasurement) -> None:
    """Every traced job's kernels are ranked; with every kernel in every job, the error is small."""
    k = measured.kernels
    assert len(k) and list(k["rank"]) == list(range(1, len(k) + 1))
    assert (k["share"].diff().dropna() <= 0).all()
    assert (k["jobs"] <= len(measured.traces)).all()
    assert np.isfinite(k["standard_error"]).all() and (k["standard_error"] < k["share"]).all()
    # the shares are of device-time: the kernels' busy time is below the traced wall time
    assert 0 < k["share"].sum() <= 1.0 + 1e-12
    records = measured.to_dict()["kernels"]
    assert [r["name"] for r in records] == list(k["name"])


def test_mpg_is_ideal_time_over_in_service_capacity_computed_directly(measured: FleetMeasurement) -> None:
    from fleetlib.scheduling import read as read_records

    man = load_manifest(BUNDLE)
    records, _ = read_records([str(p) for p in man.scheduler_files], "slurm", tz="UTC",
                              window=(man.window.start, man.window.end))
    cap = records.capacity
    w0, w1 = man.window.start, man.window.end
    lo = cap["start"].where(cap["start"] > w0, w0)
    hi = cap["end"].where(cap["end"] < w1, w1)
    capacity = float((cap["devices_in_service"] * (hi - lo).dt.total_seconds().clip(lower=0)).sum())
    ideal = float(measured.jobs["ideal_device_s"].fillna(0.0).sum())
    assert close(measured.mpg, ideal / capacity)
    assert close(measured.mpg, measured.ideal_device_s / measured.capacity_device_s)


def test_the_chain_is_checked_and_the_observed_only_estimate_breaks_it(measured: FleetMeasurement) -> None:
    chain = measured.product.chain
    assert chain["scheduling->runtime"]["holds"] and chain["runtime->program"]["holds"]
    est = measured.observed_runtime_factor()
    assert est.value > measured.runtime.value  # unobserved held time is counted as not productive in R
    with pytest.raises(ChainMismatchError, match="scheduling->runtime"):
        mpg(measured.scheduling, est, measured.program)


def test_removing_one_timeline_moves_its_job_to_unobserved(tmp_path: Path,
                                                          measured: FleetMeasurement) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle)
    man = (bundle / "fleet.yaml").read_text()
    # a job with a timeline but no model config or traces, so the manifest stays valid without it
    jobs = measured.jobs
    candidates = jobs[jobs["observed"] & ~jobs["zombie_job"] & jobs["ideal_device_s"].isna()].index
    job = sorted(candidates)[0] if len(candidates) else None
    if job is None:
        pytest.skip("no timed job without a model config in the bundle")
    man = man.replace(f"    - timelines/{job}.parquet\n", "")
    (bundle / "fleet.yaml").write_text(man)
    again = measure_fleet(bundle)
    moved = float(jobs.loc[job, "held_device_s"])
    assert close(again.runtime.losses["unobserved"], measured.runtime.losses["unobserved"] + moved)
    assert close(again.runtime.denominator, measured.runtime.denominator)  # the chain still holds
    assert again.runtime.value < measured.runtime.value
    assert again.coverage["runtime"] < measured.coverage["runtime"]
    # the old R (with the job observed) no longer chains into the new P
    with pytest.raises(ChainMismatchError, match="runtime->program"):
        mpg(again.scheduling, measured.runtime, again.program)


def test_unknown_engines_and_dask_options_on_pandas_are_refused() -> None:
    with pytest.raises(DomainError, match="engine must be"):
        measure_fleet(BUNDLE, engine="spark")
    with pytest.raises(DomainError, match="options of engine='dask'"):
        measure_fleet(BUNDLE, workers=2)


def test_the_json_object_has_the_issue_keys(measured: FleetMeasurement) -> None:
    d = measured.to_dict()
    for key in ("mpg", "factors", "loss_shares", "waterfall_device_s", "pools", "jobs", "reconciliation",
                "levers", "ledger"):
        assert key in d, key
    for f in ("scheduling", "runtime", "program"):
        assert set(d["factors"][f]) >= {"value", "numerator_device_s", "denominator_device_s", "coverage",
                                        "convention", "losses"}
    for job in d["jobs"].values():
        assert set(job) >= {"held_device_s", "runtime_goodput", "program_goodput", "coverage"}
    json.dumps(d, allow_nan=False)
    wf = d["waterfall_device_s"]

    def lost(boundary: str) -> float:  # a loss the records cannot observe is null: inside another term
        return sum(v for k, v in wf.items() if k.startswith(f"loss:{boundary}.") and v is not None)

    unobserved = d["factors"]["scheduling"]["unobserved"]
    assert {k for k, v in wf.items() if v is None} == {f"loss:scheduling.{k}" for k in unobserved}

    assert close(wf["total:in_service_capacity"] - lost("scheduling"), wf["total:held"])
    assert close(wf["total:held"] - lost("runtime"), wf["total:productive"])
    assert close(wf["total:productive"] - lost("program"), wf["total:ideal"])
    assert d["cost_per_useful_device_hour"] == pytest.approx(2.0 / d["mpg"], rel=1e-12)
    ranked = d["levers"]["ranked"]
    assert [g["rank"] for g in ranked] == [1, 2, 3]
    assert ranked[0]["relative_gain"] >= ranked[-1]["relative_gain"]


def test_window_override_clips_every_factor_and_the_chain_still_holds() -> None:
    m = measure_fleet(BUNDLE, window=("2024-05-01T02:00:00Z", "2024-05-01T08:00:00Z"))
    assert m.window.duration_s == 6 * 3600
    assert m.product.chain["scheduling->runtime"]["holds"]
    assert m.product.chain["runtime->program"]["holds"]
    full = measure_fleet(BUNDLE)
    assert m.scheduling.denominator < full.scheduling.denominator


def test_regenerating_the_bundle_gives_identical_files(tmp_path: Path) -> None:
    out = tmp_path / "regen"
    bundle = synth_fleet(out, devices=32, days=0.5, seed=0, serving=True)
    committed = sorted(str(p.relative_to(BUNDLE)) for p in BUNDLE.rglob("*") if p.is_file())
    assert bundle.files == committed
    for rel in committed:
        assert (out / rel).read_bytes() == (BUNDLE / rel).read_bytes(), rel


def test_cli_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    synth = sub.add_parser("synth").add_subparsers(dest="synth")
    fleet_commands.register(sub, synth, lambda p: p.add_argument("--json", action="store_true"))
    args = parser.parse_args(["synth", "fleet", "--devices", "16", "--days", "0.125", "--seed", "1", "--out",
                              str(tmp_path / "b")])
    res = args.func(args)
    assert "truth: MPG" in args.render(res)
    args = parser.parse_args(["fleet", str(tmp_path / "b" / "fleet.yaml"), "--json"])
    res = args.func(args)
    assert close(res["mpg"], json.loads((tmp_path / "b" / "truth.json").read_text())["mpg"])
    text = args.render(res)
    assert text.splitlines()[1].startswith("MPG")
    args = parser.parse_args(["fleet", str(tmp_path / "b" / "fleet.yaml"), "--kernels"])
    res = args.func(args)
    lines = args.render(res).splitlines()
    assert "retained device-time" in lines[1]
    if res["traces"]:
        assert lines[3].split()[0] == "1" and res["kernels"][0]["name"] in lines[3]
    with pytest.raises(DomainError):
        fleet_commands.run_fleet(tmp_path / "b", workers=0)


def test_a_model_config_stating_other_devices_is_flagged_and_changes_nothing(
    tmp_path: Path, measured: FleetMeasurement
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle)
    config = bundle / "models" / "70002.yaml"
    text = config.read_text()
    held = int(measured.jobs.loc["70002", "devices"])
    assert f"devices: {held}\n" in text
    config.write_text(text.replace(f"devices: {held}\n", f"devices: {held + 8}\n"))
    again = measure_fleet(bundle)
    flags = [f for f in again.ledger.flags if f.code == "model_devices_mismatch"]
    assert [(f.job_id, f.file) for f in flags] == [("70002", "models/70002.yaml")]
    assert f"states {held + 8} devices, the scheduler held {held}" in flags[0].message
    assert again.program.numerator == measured.program.numerator  # ideal time: useful FLOPs / peak
    assert again.jobs["ideal_device_s"].equals(measured.jobs["ideal_device_s"])
    assert again.jobs.loc["70002", "model_name"] == f"synthetic model ({held} GPUs) / {held + 8} devices"
