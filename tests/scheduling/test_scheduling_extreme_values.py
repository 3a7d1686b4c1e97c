"""Issue 30 items 3-5, scheduling: extreme numbers in records are rejected by row, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

from fleetlib.scheduling.readers import READERS

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "data/scheduler/slurm_sample"
PAI = ROOT / "data/scheduler/pai_sample"


def rejected(ledger):
    return [(Path(e.file).name, e.row, e.field, e.reason) for e in ledger.entries if e.action == "rejected"]


def test_a_gres_count_beyond_int64_rejects_its_node_row_not_an_overflow(tmp_path):
    sinfo = tmp_path / "sinfo_nodes.txt"
    sinfo.write_text((SLURM / "sinfo_nodes.txt").read_text().replace("gpu:a100:8", f"gpu:a100:{2**63}", 1))
    _, ledger = READERS["slurm"].read([SLURM / "sacct.txt", sinfo], tz="UTC")
    assert ("sinfo_nodes.txt", 3, "GRES",
            "9.22337e+18 GPUs on one node: more than 16,777,215, no node count") in rejected(ledger)
    assert ledger.balanced()


def test_a_pai_end_time_of_1e20_seconds_rejects_its_row_naming_the_field_and_value(tmp_path):
    for f in PAI.glob("*.csv"):
        shutil.copy(f, tmp_path / f.name)
    job = tmp_path / "pai_job_table.csv"
    lines = job.read_text().split("\n")
    fields = lines[0].split(",")
    fields[5] = "1e20"
    lines[0] = ",".join(fields)
    job.write_text("\n".join(lines))
    _, ledger = READERS["pai"].read(sorted(tmp_path.glob("*.csv")))
    assert ("pai_job_table.csv", 1, "end_time",
            "end_time 1e+20 s is not a Unix time before 2100-01-01 (limit latest_year; "
            "pai_job_table: seconds)") in rejected(ledger)
    assert ledger.balanced()


PHILLY = ROOT / "data/scheduler/philly_sample/cluster_job_log.json"


def test_a_philly_time_in_year_2300_rejects_its_job_naming_the_attempt_and_the_range(tmp_path):
    log = tmp_path / "cluster_job_log.json"
    log.write_text(PHILLY.read_text().replace("2017-10-07 01:13:23", "2300-10-07 01:13:23", 1))
    _, ledger = READERS["philly"].read([log])
    assert ("cluster_job_log.json", 1, "end_time",
            "attempts[0].end_time '2300-10-07 01:13:23' is outside the plausible range [2000-01-01, "
            "2100-01-01) (limits earliest_year, latest_year)") in rejected(ledger)


def test_a_philly_top_level_object_without_attempts_is_rejected_not_a_type_error(tmp_path):
    log = tmp_path / "cluster_job_log.json"
    log.write_text('{"a": 1}\n')
    _, ledger = READERS["philly"].read([log])
    assert [r[:3] for r in rejected(ledger)] == [("cluster_job_log.json", 1, "jobid")]


OPENB = ROOT / "data/scheduler/alibaba_openb_2023"


def test_an_openb_count_beyond_int64_is_rejected_by_row_never_printed_wrapped(tmp_path):
    import gzip

    nodes = (OPENB / "openb_node_list_gpu_node.csv").read_text().split("\n")
    nodes[1] = nodes[1].replace(",2,P100", f",{2**63},P100")
    pods = gzip.decompress((OPENB / "openb_pod_list_default.csv.gz").read_bytes()).decode().split("\n")
    pods[1] = pods[1].replace(",12000,16384,1,1000,", f",12000,16384,{2**63},1000,")
    (tmp_path / "openb_node_list_gpu_node.csv").write_text("\n".join(nodes))
    (tmp_path / "openb_pod_list_default.csv").write_text("\n".join(pods))
    tables, ledger = READERS["openb"].read(sorted(tmp_path.glob("*.csv")))
    tail = "9.22337e+18 is more than 16,777,215 (a damaged number, not a count)"
    assert sorted(rejected(ledger)) == [("openb_node_list_gpu_node.csv", 2, "gpu", f"gpu {tail}"),
                                        ("openb_pod_list_default.csv", 2, "num_gpu", f"num_gpu {tail}")]
    assert ledger.balanced() and tables is not None
