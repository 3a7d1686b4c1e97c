"""The measurement contract (chapter Table 2): stated fields only, sources named, differences found."""

from __future__ import annotations

import json
from pathlib import Path

from fleetlib.contract import (
    CATEGORIES,
    NOT_STATED,
    Contract,
    contract_differences,
    contract_from_records,
)

DATA = Path(__file__).resolve().parents[2] / "data"


def test_every_category_of_table_2_and_nothing_defaulted() -> None:
    c = Contract.from_mapping({})
    d = c.to_dict()
    assert list(CATEGORIES) == [
        "workload",
        "system_state",
        "timing_boundary",
        "statistical_report",
        "load_generation",
    ]
    for cat, fields in CATEGORIES.items():
        assert set(d[cat]) == set(fields)
        assert all(v == NOT_STATED for v in d[cat].values())
    assert d["sources"] == {}


def test_manifest_block_flat_aliased_and_nested() -> None:
    c = Contract.from_mapping(
        {
            "software_version": "2.3",
            "compiler": "xla-7",
            "workload": {"model_revision": "r17", "quality_gate": "loss <= 2.1"},
            "program_ceiling": 0.5,
        }
    )
    d = c.to_dict()
    assert d["system_state"]["software_version"] == "2.3"
    assert d["system_state"]["compiler_version"] == "xla-7"
    assert d["workload"]["model_revision"] == "r17"
    assert d["workload"]["global_batch"] == NOT_STATED
    assert d["other"] == {"program_ceiling": 0.5}
    assert d["sources"]["compiler_version"] == "manifest"


def test_records_fill_only_what_they_carry(tmp_path: Path) -> None:
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|Partition|QOS|State\n1|gpu|high|COMPLETED\n2|gpu|normal|FAILED\n")
    mllog = tmp_path / "result_0.txt"
    mllog.write_text(
        ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", '
        '"key": "submission_benchmark", "value": "llama2_70b_lora", "metadata": {}}\n'
        "noise line\n"
        ':::MLLOG {"namespace": "", "time_ms": 2, "event_type": "POINT_IN_TIME", '
        '"key": "submission_platform", "value": "8xH100", "metadata": {}}\n'
    )
    trace = tmp_path / "rank0.json"
    trace.write_text(
        json.dumps(
            {
                "deviceProperties": [{"id": 0, "name": "H100", "computeMajor": 9, "computeMinor": 0}],
                "traceEvents": [],
            }
        )
    )
    c = contract_from_records(
        scheduler_files=[sacct],
        scheduler_format="slurm",
        timeline_files=[mllog],
        timeline_format="mlperf",
        trace_files=[trace],
    )
    assert c.get("pool") == "gpu"
    assert c.get("qos") == ["high", "normal"]
    assert c.get("model_revision") == "llama2_70b_lora"
    assert c.get("architecture") == ["8xH100", "H100 (sm_90)"]
    assert c.get("driver_version") == NOT_STATED
    assert "MLPerf" in c.sources["model_revision"] and "Slurm" in c.sources["qos"]


def test_real_mlperf_log_states_its_submission() -> None:
    log = DATA / "timelines" / "nvidia_eos_n128_llama2_70b_lora_result_0.txt"
    c = contract_from_records(timeline_files=[log], timeline_format="mlperf")
    assert c.get("model_revision") == "llama2_70b_lora"
    assert c.get("architecture") == "128xNVIDIA DGX H100"
    assert c.get("global_batch") == 128


def test_manifest_wins_and_conflict_is_named() -> None:
    man = Contract.from_mapping({"pool": "all"})
    rec = Contract(
        stated={"pool": ["dev", "train"], "qos": "normal"}, sources={"pool": "sacct", "qos": "sacct"}
    )
    m = man.merged(rec)
    assert m.get("pool") == "all" and m.get("qos") == "normal"
    assert len(m.conflicts) == 1 and "pool" in m.conflicts[0]


def test_differences_name_confounders_and_skip_the_report() -> None:
    a = Contract.from_mapping({"software_version": "1.0", "pool": "a", "factor": "x"})
    b = Contract.from_mapping({"software_version": "2.0", "pool": "a", "factor": "y", "driver": "550"})
    diffs = {d["field"]: d for d in contract_differences(a, b, under_test=["pool"])}
    assert set(diffs) == {"software_version", "driver_version"}
    assert diffs["software_version"]["kind"] == "differs" and not diffs["software_version"]["under_test"]
    assert diffs["driver_version"]["kind"] == "stated_once"
    tested = contract_differences(a, b, under_test=["software_version"])
    assert [d["under_test"] for d in tested if d["field"] == "software_version"] == [True]


def test_every_measured_factor_carries_its_contract(tmp_path: Path) -> None:
    from fleetlib.fleet import measure_fleet, synth_fleet

    b = synth_fleet(tmp_path / "f", devices=16, days=0.25, seed=3)
    fm = measure_fleet(b.manifest)
    d = fm.to_dict()["contract"]
    assert set(d) == {"scheduling", "runtime", "program"}
    for name, c in d.items():
        assert c["system_state"]["software_version"] == "synthetic"  # the manifest states it
        assert c["sources"]["software_version"] == "manifest"
        assert c["statistical_report"]["factor"] == f"{name} goodput"
        assert c["workload"]["model_revision"] == NOT_STATED
        assert f"{getattr(fm, name).value:.6g}" in c["statistical_report"]["central_value"]
    assert d["runtime"]["statistical_report"]["trial_count"] == f"1 window; {len(fm.jobs)} jobs"
