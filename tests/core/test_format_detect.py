"""Format detection from the bytes (``--format`` may be omitted), the errors when it cannot be told,
Slurm's missing inputs in one error, a CSV given as canonical Parquet, and the readers exported at each
rung's package level."""

from __future__ import annotations

import bz2
import json
from pathlib import Path

import pandas as pd
import pytest
from test_reader_conformance import REGISTRIES

import fleetlib.program
import fleetlib.runtime
import fleetlib.scheduling
from fleetlib.cli import main
from fleetlib.quality import InputError
from fleetlib.registry import RUNGS, detect, head_bytes, sniff_of

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "data/scheduler/slurm_sample"
PHILLY = ROOT / "data/scheduler/philly_sample/cluster_job_log.json"

GOOD = [
    pytest.param(rung, name, sample, id=f"{rung}-{name}-{Path(sample.paths[0]).name}")
    for rung, readers in REGISTRIES.items()
    for name, spec in readers.items()
    for sample in spec.samples
    if not sample.bad and sniff_of(rung, name, spec) is not None
]


@pytest.mark.parametrize(("rung", "name", "sample"), GOOD)
def test_every_bundled_sample_is_detected_as_its_format(rung, name, sample):
    assert detect([ROOT / p for p in sample.paths], rung) == name


@pytest.mark.parametrize("rung", RUNGS)
def test_the_formats_there_were_before_all_sniff(rung):
    # the formats of the first registries all have a sniff; a new format may add its own later
    before = {
        "scheduling": {"slurm", "kueue", "volcano", "helios-sequence", "openb", "canonical", "philly", "pai"},
        "runtime": {"mlperf", "mlgoodput", "canonical", "bloom", "serving"},
        "program": {"kineto", "rank_timers"},
    }[rung]
    readers = REGISTRIES[rung]
    assert {n for n in before if n in readers and sniff_of(rung, n, readers[n]) is not None} == before & set(
        readers
    )


def test_unknown_bytes_list_the_format_choices(tmp_path):
    odd = tmp_path / "notes.txt"
    odd.write_text("hello, this is not a scheduler record\n")
    with pytest.raises(InputError) as info:
        detect(odd, "scheduling")
    msg = str(info.value)
    assert str(odd) in msg and "cannot be told" in msg
    for name in fleetlib.scheduling.READERS:
        assert repr(name) in msg


def test_ambiguous_bytes_list_the_candidates(tmp_path):
    both = tmp_path / "both.csv"  # a header that is both a serving lifecycle log and a canonical events table
    both.write_text("job_id,attempt,time,kind,replica_id,phase\nj,0,2025-01-01T00:00Z,placed,r0,placed\n")
    with pytest.raises(
        InputError, match=r"ambiguous: the bytes fit several formats \['canonical', 'serving'\]"
    ):
        detect(both, "runtime")


def test_files_of_different_formats_are_named(tmp_path):
    with pytest.raises(
        InputError,
        match=r"different formats \(sacct.txt: \['slurm'\]; cluster_job_log.json: "
        r"\['philly'\]\)",
    ):
        detect([SLURM / "sacct.txt", PHILLY], "scheduling")


def test_gzip_is_sniffed_and_other_compressions_refused(tmp_path):
    gz = ROOT / "data/scheduler/helios_earth_may2020/vc3sl.csv.gz"
    assert head_bytes(gz).startswith(b"time,")
    packed = tmp_path / "sacct.txt.bz2"
    packed.write_bytes(bz2.compress((SLURM / "sacct.txt").read_bytes()))
    with pytest.raises(InputError, match="bzip2-compressed input is not read"):
        detect(packed, "scheduling")


def test_pai_sniff_reads_headerless_and_header_lines():
    from fleetlib.scheduling.readers.pai import sniff

    assert sniff(b"4b3f04b66a525d2df903eb16,8cb3,58540f191766,Terminated,4550879.0,4551416.0\n")
    assert sniff(
        b"job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
    )
    assert not sniff(b"job_id,attempt,step,start,end,input_wait_s\n")  # 6 fields but not hex, not seconds
    assert not sniff(b"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n")


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_without_format_detects_it(capsys):
    code, out, _ = _cli(capsys, "scheduling", str(PHILLY), "--json")
    assert code == 0 and json.loads(out)["format"] == "philly"
    code, out, _ = _cli(capsys, "scheduling", *map(str, sorted(SLURM.glob("*.txt"))), "--tz", "UTC", "--json")
    named = main(
        ["scheduling", *map(str, sorted(SLURM.glob("*.txt"))), "--tz", "UTC", "--format", "slurm", "--json"]
    )
    out_named, _ = capsys.readouterr()
    assert code == 0 and named == 0 and json.loads(out) == json.loads(out_named)
    log = ROOT / "data/timelines/nvidia_eos_n128_llama2_70b_lora_result_0.txt"
    code, out, _ = _cli(capsys, "runtime", str(log), "--json")
    assert code == 0 and json.loads(out)["format"] == "mlperf"


def test_cli_undetectable_is_one_line_exit_2(capsys, tmp_path):
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    code, _, err = _cli(capsys, "scheduling", str(odd))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--format" in err and "Traceback" not in err


def test_slurm_missing_inputs_in_one_error(capsys):
    code, _, err = _cli(capsys, "scheduling", str(SLURM / "sacct.txt"), "--format", "slurm", "--tz", "UTC")
    assert code == 2
    assert "missing 2 of the 3 inputs" in err and "sinfo -N" in err and "sacctmgr -P show event" in err
    code, _, err = _cli(capsys, "scheduling", str(SLURM / "sinfo_nodes.txt"), "--tz", "UTC")
    assert code == 2 and "missing 2 of the 3 inputs" in err and "sacct -P" in err and "sacctmgr" in err
    # with sacct and sinfo the events are optional: it runs
    code, out, _ = _cli(
        capsys,
        "scheduling",
        str(SLURM / "sacct.txt"),
        str(SLURM / "sinfo_nodes.txt"),
        "--tz",
        "UTC",
        "--json",
    )
    assert code == 0 and 0 < json.loads(out)["scheduling_goodput"] <= 1


def test_csv_given_as_canonical_parquet_is_a_clear_error(capsys):
    with pytest.raises(InputError) as info:
        fleetlib.scheduling.read(SLURM / "sacct.txt", "canonical")
    msg = str(info.value)
    assert "not a Parquet file" in msg and "JobID|" in msg and "magic bytes" not in msg
    code, _, err = _cli(capsys, "scheduling", str(SLURM / "sacct.txt"), "--format", "canonical")
    assert code == 2 and "not a Parquet file" in err and "magic" not in err


def test_rung_packages_export_readers_and_measure():
    for module in (fleetlib.scheduling, fleetlib.runtime, fleetlib.program):
        assert callable(module.read) and callable(module.measure) and module.READERS
        assert {"read", "measure", "READERS"} <= set(module.__all__)
    assert {"philly", "pai"} <= set(fleetlib.scheduling.READERS)
    # named and detected reads agree
    steps = ROOT / "data/timelines/demo-7b-ft_steps.csv"
    (t1, l1), (t2, l2) = (
        fleetlib.runtime.read(steps),
        fleetlib.runtime.read(steps, "canonical"),
    )
    pd.testing.assert_frame_equal(t1["steps"], t2["steps"])
    assert l1.to_dict() == l2.to_dict()
    trace = ROOT / "data/traces/hta_nccl_allreduce_rank-0.json.gz"
    tables, ledger = fleetlib.program.read(trace)
    assert ledger.read == 40_573 and len(tables["kernels"]) > 0
    recs, _ = fleetlib.scheduling.read(PHILLY)
    assert len(recs.allocations) == 6
