"""Issue 30 item 3: no value in the data sizes an allocation unchecked (hostile inputs built here)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fleetlib._io import check_line_bytes, gunzip, read_bytes, using_limits
from fleetlib.program import synth_step_traces
from fleetlib.quality import DomainError, InputError
from fleetlib.runtime import READERS as RUNTIME
from fleetlib.runtime.synth import synth_timeline
from fleetlib.scheduling import READERS as SCHEDULING

ROOT = Path(__file__).resolve().parents[2]
MLPERF = ROOT / "data/timelines/asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt"


def _mlperf_with(tmp_path: Path, key: str, field: str, value: str) -> Path:
    """The bundled MLPerf log, ``field`` of its first ``key`` record (or its metadata) set to ``value``."""
    lines = MLPERF.read_text().split("\n")
    for i, line in enumerate(lines):
        if f'"key": "{key}"' in line:
            head, doc = line.split("MLLOG ", 1)
            rec = json.loads(doc)
            if field == "value":
                rec["value"] = "@@"
            else:
                rec["metadata"][field] = "@@"
            lines[i] = head + "MLLOG " + json.dumps(rec).replace('"@@"', value)
            break
    out = tmp_path / "result_0.txt"
    out.write_text("\n".join(lines))
    return out


def test_an_mlperf_count_of_8e15_is_refused_naming_file_row_and_field_before_any_step_is_made(tmp_path):
    path = _mlperf_with(tmp_path, "tracked_stats", "step", "8e15")
    with pytest.raises(InputError) as info:
        RUNTIME["mlperf"].read([path])
    assert info.value.file == str(path) and info.value.row == 23 and info.value.field == "steps"
    assert "1,000,000,000,000,000 step(s)" in str(info.value)


@pytest.mark.parametrize("value", ["1e-300", "0.5", "-1", "1e300", "NaN"])
def test_an_mlperf_global_batch_size_that_is_no_count_is_rejected_by_row_not_a_traceback(tmp_path, value):
    path = _mlperf_with(tmp_path, "global_batch_size", "value", value)
    tables, ledger = RUNTIME["mlperf"].read([path])
    rejected = [(e.row, e.field) for e in ledger.entries if e.action == "rejected"]
    assert (9, "global_batch_size" if value != "NaN" else "value") in rejected  # NaN: by the JSON parser
    assert ledger.balanced() and len(tables["steps"]) > 0


def test_a_synthetic_step_count_of_10_to_the_12_is_refused_by_its_limit():
    with pytest.raises(DomainError, match=r"n_steps 1,000,000,000,000 is more than the 10,000,000 steps "
                                          r"allowed \(limit max_steps"):
        synth_timeline(10**12, seed=0)
    with pytest.raises(DomainError, match="limit max_steps"):
        synth_step_traces(Path("/nonexistent"), ranks=10**6, steps=10**6)


def test_a_small_gzip_of_many_newlines_is_refused_by_its_inflation_not_read(tmp_path):
    bomb = tmp_path / "steps.csv.gz"
    bomb.write_bytes(gzip.compress(b"\n" * 80 * 1024**2, 9))  # ~80 KB stored, 80 MiB inflated
    with pytest.raises(InputError, match=r"decompresses to more than 200 times its [\d,]+ stored bytes "
                                         r"\(limit max_inflation"):
        read_bytes(bomb)
    with using_limits(max_inflation=2000):
        assert len(read_bytes(bomb)) == 80 * 1024**2


def test_a_lying_gzip_trailer_sizes_nothing():
    body = gzip.compress(b"a,b\n" * 100_000)
    forged = body[:-4] + (2**32 - 1).to_bytes(4, "little")  # ISIZE says 4 GiB
    with pytest.raises(InputError, match="truncated or corrupt gzip stream"):
        gunzip(forged, "forged.csv.gz")  # the CRC/length check fails; nothing was sized from the trailer
    truncated = body[: len(body) // 2]
    with pytest.raises(InputError, match="truncated or corrupt gzip stream"):
        gunzip(truncated, "truncated.csv.gz")
    assert gunzip(body, "good.csv.gz") == b"a,b\n" * 100_000


def _longest_line(data: bytes) -> tuple[int, int]:
    """(line number, bytes) of the longest line, by splitting (the truth the scan is checked against)."""
    lengths = [len(x) for x in data.split(b"\n")]
    best = max(range(len(lengths)), key=lengths.__getitem__)
    return best + 1, lengths[best]


@pytest.mark.parametrize("lines", [[b"a" * 10], [b"ab", b"a" * 11, b"c"], [b"x" * 9] * 50 + [b"y" * 12],
                                   [b"z" * 10] * 30])
def test_the_line_scan_finds_the_first_line_over_the_limit(lines):
    data = b"\n".join(lines) + b"\n"
    row, longest = _longest_line(data)
    if longest <= 10:
        check_line_bytes(data, "f.txt", 10)
        return
    with pytest.raises(InputError) as info:
        check_line_bytes(data, "f.txt", 10)
    assert info.value.row == row and info.value.file == "f.txt"


@pytest.mark.parametrize("gz", [False, True])
def test_a_20_mb_csv_line_is_refused_naming_file_line_and_limit(tmp_path, gz):
    sample = (ROOT / "data/scheduler/pai_sample/pai_job_table.csv").read_bytes().split(b"\n")
    body = b"\n".join([*sample[:3], b"j" * 20_000_000, *sample[3:]])
    path = tmp_path / ("pai_job_table.csv.gz" if gz else "pai_job_table.csv")
    path.write_bytes(gzip.compress(body, 1) if gz else body)
    with using_limits(max_line_bytes=1024**2), pytest.raises(InputError) as info:
        SCHEDULING["pai"].read([path])
    assert info.value.file == str(path) and info.value.row == 4
    assert "more than the 1,048,576-byte line limit (max_line_bytes" in str(info.value)


def test_a_20_mb_json_line_is_refused_and_the_default_limit_reads_it(tmp_path):
    sample = (ROOT / "data/timelines/maxtext-llama3-8b-demo_timeline.jsonl").read_text().split("\n")
    pad = json.dumps({"job_name": "maxtext-llama3-8b-demo", "note": "n" * 20_000_000})
    path = tmp_path / "timeline.jsonl"
    path.write_text("\n".join([sample[0], pad, *sample[1:]]))
    with using_limits(max_line_bytes=1024**2), pytest.raises(InputError) as info:
        RUNTIME["mlgoodput"].read([path])
    assert info.value.file == str(path) and info.value.row == 2 and "max_line_bytes" in str(info.value)
    tables, _ = RUNTIME["mlgoodput"].read([path])  # 20 MB is under the 64 MiB default
    assert len(tables["steps"]) > 0


def test_cli_limit_max_line_bytes_refuses_a_long_sacct_line_in_one_line(tmp_path, capsys):
    from fleetlib import cli

    sample = ROOT / "data/scheduler/slurm_sample"
    lines = (sample / "sacct.txt").read_text().split("\n")
    lines[2] = lines[2] + "x" * 200_000  # line 3: a 200 kB record
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("\n".join(lines))
    args = ["scheduling", "--format", "slurm", "--tz", "UTC", str(sacct), str(sample / "sinfo_nodes.txt")]
    assert cli.main(["--limit", "max_line_bytes=100000", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(sacct) in err and "line 3" in err
    assert "more than the 100,000-byte line limit (max_line_bytes" in err
