"""The trace sampling plan, baselines per (pool, architecture, software version), and the CLI JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from regress_support import regression_units

from fleetlib.quality import DomainError, InputError
from fleetlib.regress.baselines import build_baselines, check_baselines, load_baseline, read_index
from fleetlib.regress.compare import compare
from fleetlib.regress.sampling import check_plan, trace_plan

#: The regression pairs are written once per process: under pytest-xdist these modules share one worker.
pytestmark = pytest.mark.xdist_group("regress_pairs")


@pytest.fixture(scope="module")
def pairs() -> dict[str, Any]:
    return regression_units()


def test_trace_plan_stratified_never_rank_zero_alone(pairs: dict[str, Any]) -> None:
    u = pairs["units"]["gray_failure"]
    plan = trace_plan(u)
    # every stratum present among the timed jobs is covered
    present = {
        (int(d) // 8, a, v)
        for d, a, v in u.jobs.loc[
            u.jobs.index.isin(u.steps["job_id"]), ["devices", "architecture", "software_version"]
        ].itertuples(index=False, name=None)
    }
    covered = {(s["nodes"], s["architecture"], s["software_version"]) for s in plan["strata"] if s["chosen"]}
    assert present == covered
    assert plan["coverage"]["strata_present"] == plan["coverage"]["strata_covered"]
    for entry in plan["continuous"]:
        assert entry["ranks"] != [0] and len(entry["ranks"]) >= 2
        devices = int(u.jobs.loc[entry["job_id"], "devices"])
        assert len({r // 8 for r in entry["ranks"]}) == devices // 8  # one rank per node
        assert entry["warmup_steps"][0] == 1 and entry["steady_steps"][0] > 1
    # P's sampling error is shown beside the measured P
    ps = plan["program_sampling"]
    assert ps["standard_error"] > 0 and ps["sampled_steps"] > 0
    assert abs(ps["value"] - ps["measured_jobs_with_a_model_config"]) < 6 * ps["standard_error"] + 0.02


def test_triggered_episodes_include_every_injected_one_with_a_healthy_peer(pairs: dict[str, Any]) -> None:
    plan = trace_plan(pairs["units"]["gray_failure"])
    truth = pairs["pairs"].truth["gray_failure"]["injected"]["straggler_episodes"]
    for ep in truth:
        a, z = ep["steps"]
        hits = [
            t
            for t in plan["triggered"]
            if t["job_id"] == ep["job_id"]
            and t["steps"][0] <= z
            and t["steps"][1] >= a
            and set(ep["ranks"]) <= set(t["ranks"])
        ]
        assert hits, ep
        for t in hits:
            assert t["healthy_peer"] is not None and t["healthy_peer"] not in ep["ranks"]
    assert trace_plan(pairs["units"]["baseline"])["triggered"] == []


def test_a_plan_of_rank_zero_alone_is_refused() -> None:
    with pytest.raises(DomainError, match="rank 0 alone"):
        check_plan({"continuous": [{"job_id": "1", "ranks": [0]}]})


def test_baselines_build_and_check(pairs: dict[str, Any], tmp_path: Path) -> None:
    base = pairs["units"]["baseline"]
    index = build_baselines([base], tmp_path / "bl")
    groups = {(g["pool"], g["architecture"], g["software_version"]) for g in index["groups"]}
    assert groups == set(base.jobs.groupby(["pool", "architecture", "software_version"]).groups)
    for g in index["groups"]:
        assert (tmp_path / "bl" / g["folder"] / "jobs.parquet").is_file()
    stored = load_baseline(tmp_path / "bl", "train", "H100 SXM", "2.2")
    want = next(g["jobs"] for g in index["groups"] if (g["pool"], g["software_version"]) == ("train", "2.2"))
    assert stored is not None and len(stored.jobs) == want
    assert load_baseline(tmp_path / "bl", "train", "H100 SXM", "9.9") is None
    # the kernel regression is flagged on (train, H100 SXM, 2.2) by the fleet-baseline tier only there
    res = check_baselines(pairs["units"]["kernel"], tmp_path / "bl", boot=200)
    flagged = {
        (r["pool"], r["software_version"], r["tier"])
        for r in res["regressions"]
        if r["tier"] == "fleet_baseline"
    }
    assert ("train", "2.2", "fleet_baseline") in flagged
    assert not any(v == "2.1" for _p, v, _t in flagged)
    # the unchanged baseline checks clean
    clean = check_baselines(base, tmp_path / "bl", boot=200)
    assert clean["regressions"] == []


@pytest.fixture(scope="module")
def built(pairs: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("baselines")
    build_baselines([pairs["units"]["baseline"]], out)
    return out


def _damaged_copy(built: Path, tmp_path: Path, edit: Any) -> Path:
    import shutil

    copy = tmp_path / "bl"
    shutil.copytree(built, copy)
    index = json.loads((copy / "baselines.json").read_text())
    text = edit(index, copy)
    (copy / "baselines.json").write_text(text if isinstance(text, str) else json.dumps(index))
    return copy


def _first_group_folder(index: dict[str, Any], copy: Path) -> Path:
    return copy / index["groups"][0]["folder"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda i, c: '{"groups": [', r"baselines\.json, row 1: not valid JSON"),
        (lambda i, c: "[1]", r"baselines\.json: the document is an array; expected an object"),
        (lambda i, c: i.update(format="something else"), r"format is 'something else'; expected"),
        (lambda i, c: i.update(cycle="soon"), r"cycle 'soon' is no duration"),
        (lambda i, c: i.pop("windows"), r"windows is missing; expected an array"),
        (lambda i, c: i["groups"].__setitem__(0, [1]), r"groups\[0\] is an array; expected an object"),
        (lambda i, c: i["groups"][0].update(pool=7), r"groups\[0\]\.pool is a number; expected text"),
        (lambda i, c: i["contract"].update(stated="x"), r"contract\.stated is text; expected an object"),
        (lambda i, c: i["groups"][0].update(folder="../../etc"), r"lies outside"),
        (lambda i, c: _first_group_folder(i, c).joinpath("steps.parquet").unlink(),
         r"steps\.parquet: missing from the baselines folder"),
        (lambda i, c: _first_group_folder(i, c).joinpath("jobs.parquet").write_bytes(b"PAR1 not really"),
         r"jobs\.parquet: cannot be read as Parquet"),
    ],
)
def test_a_damaged_baselines_folder_is_refused_in_one_line(
    pairs: dict[str, Any], built: Path, tmp_path: Path, edit: Any, message: str
) -> None:
    copy = _damaged_copy(built, tmp_path, edit)
    with pytest.raises(InputError, match=message):
        check_baselines(pairs["units"]["baseline"], copy, boot=20)
    assert read_index(built)["format"] == "fleetlib baselines 2"  # the folder as built reads


def test_cli_compare_json_and_refusal(pairs: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from fleetlib.cli import main

    rp = pairs["pairs"]
    code = main(
        [
            "compare",
            str(rp.baseline),
            str(rp.candidates["storage"]),
            "--json",
            "--cycle",
            "2h",
            "--boot",
            "100",
            "--tier",
            "startup_recovery",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"contract_differences", "verdicts"}
    keys = {"factor", "tier", "metric", "baseline", "candidate", "delta", "ci_low", "ci_high", "significant"}
    assert all(keys <= set(v) for v in out["verdicts"])
    assert any(v["metric"] == "checkpoint pause per commit" and v["significant"] for v in out["verdicts"])
    assert [d["field"] for d in out["contract_differences"]] == ["storage"]
    # the same jobs drawn on both sides: paired by job, and every verdict says so
    assert out["settings"]["pairing"]["job"]["paired"] and out["settings"]["family"] == "Holm step-down"
    assert all(v["pairing"].startswith("paired by") for v in out["verdicts"] if v["factor"] == "runtime")
    from fleetlib.cli import build_parser
    from fleetlib.regress.commands import render_compare

    args = build_parser().parse_args(["compare", "A", "B", "--pairing", "independent"])
    assert args.pairing == "independent"
    alone = compare(pairs["units"]["baseline"], pairs["units"]["storage"], tiers=["startup_recovery"],
                    boot=60, paired=False)
    text = render_compare(alone.to_dict())
    assert "pairing: jobs independent (asked); cycles independent (asked)" in text
    assert "Holm step-down" in text and "MDE" in text
    # the text rendering of a refused comparison says so
    refused = compare(
        pairs["units"]["baseline"], pairs["units"]["compiler"], tiers=["startup_recovery"], boot=60
    )
    text = render_compare(refused.to_dict())
    assert "NO VERDICT" in text and "compiler_version" in text


def test_cli_trace_plan_json_carries_contract_and_trace_plan(
    pairs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from fleetlib.cli import main

    code = main(["trace-plan", str(pairs["pairs"].candidates["gray_failure"]), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["contract"]) == {"scheduling", "runtime", "program"}
    assert out["contract"]["program"]["system_state"]["compiler_version"] == "xla-1"
    plan = out["trace_plan"]
    assert plan["continuous"] and plan["triggered"]
    assert all({"job_id", "ranks", "reason"} <= set(e) for e in plan["continuous"] + plan["triggered"])


def test_cli_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fleetlib.cli import main

    assert main(["baseline", "check", str(tmp_path), "--baselines", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "baselines.json" in err[0]


def test_injected_bundle_measures_its_truth(tmp_path: Path) -> None:
    from fleetlib.fleet import measure_fleet, synth_fleet

    inject = {
        "slow_nodes": 1,
        "rank_timers": True,
        "compile_extra_s": 60,
        "checkpoint_factor": 1.5,
        "versions": ["a", "b"],
        "kernel_regression": {"version": "b", "slowdown": 0.2},
        "quota_nodes": 1,
    }
    b = synth_fleet(tmp_path / "f", devices=48, days=0.5, seed=4, inject=inject)
    fm = measure_fleet(b.manifest)
    for name in ("scheduling", "runtime", "program"):
        truth = b.truth["factors"][name]
        factor = getattr(fm, name)
        assert factor.value == pytest.approx(truth["value"], rel=1e-9)
        for k, v in truth["losses"].items():
            assert factor.losses.get(k, 0.0) == pytest.approx(v, rel=1e-9, abs=1e-6), (name, k)
    assert b.truth["injected"]["stranded_nodes"] and b.truth["injected"]["slow_nodes"] == ["h001"]
