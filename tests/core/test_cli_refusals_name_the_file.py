"""Issue 30 item 5: every refusal the CLI prints names the file (and row and field where one exists).

A list of bad inputs, each built here, is run through ``fleetlib.cli.main``; the one line on standard
error must name the input's path, the row and field where the fault has them, and never show a
Python exception's class name or a traceback as its explanation.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from fleetlib import cli
from fleetlib.program.synth import write_nsys_sqlite

ROOT = Path(__file__).resolve().parents[2]
PYTHON_NAMES = re.compile(r"Traceback|Exception|Error\(|\b[A-Z][a-zA-Z]+Error\b")


def _generated_strings(path: Path) -> Path:
    """An nsys export whose string 2 is computed on read, 3 MB long, from a file of a few KB."""
    write_nsys_sqlite(path, kernels=[{"start": 10_000, "end": 20_000, "name": "gemm", "stream": 7,
                                      "correlation": 1, "pid": 5}])
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE StringIds RENAME TO StoredStrings")
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, stored TEXT, value TEXT GENERATED ALWAYS "
                "AS (CASE WHEN id = 2 THEN hex(zeroblob(1500000)) ELSE stored END) VIRTUAL)")
    con.execute("INSERT INTO StringIds (id, stored) SELECT id, value FROM StoredStrings")
    con.execute("INSERT INTO StringIds (id, stored) VALUES (2, 'x')")
    con.commit()
    con.close()
    return path


def _mlperf_nan(path: Path) -> Path:
    text = (ROOT / "data/timelines/asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt").read_text()
    path.write_text(re.sub(r'"time_ms": \d+', '"time_ms": NaN', text))
    return path


def _write(name: str, text: str):
    return lambda folder: (folder / name).write_text(text)


CASES = {
    # name: (build(folder), file name, argv before the path, argv after it, row, field)
    "philly truncated": (_write("cluster_job_log.json", '[{"jobid": "a"'), "cluster_job_log.json",
                         ["scheduling"], ["--format", "philly"], None, None),
    "sacct without inventory": (_write("sacct.txt", "JobID|Partition|State\n1|gpu|COMPLETED\n"), "sacct.txt",
                                ["scheduling"], ["--format", "slurm"], None, None),
    "mlgoodput all NaN": (_write("job_timeline.jsonl", '{"job_name": "j", "job_start_time": NaN}\n'),
                          "job_timeline.jsonl", ["runtime"], ["--format", "mlgoodput"], 1, None),
    "mlperf every time NaN": (lambda p: _mlperf_nan(p / "result_0.txt"), "result_0.txt",
                              ["runtime"], ["--format", "mlperf"], 1, None),
    "kineto junk": (_write("trace.json", "junk"), "trace.json", ["program"], [], 1, "json"),
    "nsys string expands on read": (lambda p: _generated_strings(p / "rank0.sqlite"), "rank0.sqlite",
                                    ["--limit", "max_line_bytes=1000000", "program"], [], 2,
                                    "StringIds.value"),
    "manifest missing": (lambda p: None, "fleet.yaml", ["fleet"], [], None, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refusal_names_the_file_row_and_field_and_no_python_name(tmp_path, capsys, case):
    build, name, before, after, row, field = CASES[case]
    build(tmp_path)
    path = tmp_path / name
    code = cli.main([*before, str(path), *after])
    err = capsys.readouterr().err.strip()
    assert code != 0 and err, err
    assert len(err.splitlines()) == 1, err
    assert f"file {path}" in err, err
    if row is not None:
        assert f"row {row}" in err, err
    if field is not None:
        assert f"field '{field}'" in err, err
    assert not PYTHON_NAMES.search(err), err

