"""Fleet-scale trace reading: Dask batches of rank files, and one CLI line per distinct flag."""

from __future__ import annotations

from pathlib import Path

from fleetlib.program.commands import flag_summary, render_program, run_program
from fleetlib.program.readers import kineto
from fleetlib.quality import Flag

DLRM = Path("data/traces/dlrm_8rank")


def test_flag_summary_one_line_per_code_with_rank_runs():
    flags = [Flag("a", "same text", rank=r) for r in (0, 1, 2, 3, 5, 9, 10)]
    flags += [Flag("b", f"rank {r} differs", rank=r) for r in (4, 2)]
    flags += [Flag("c", "set level")]
    assert flag_summary(flags) == [
        "a (7 ranks: 0-3, 5, 9-10): same text",
        "b (2 ranks: 2, 4): rank 4 differs (messages differ by rank)",
        "c: set level",
    ]
    assert flag_summary([Flag("d", "x", rank=7)]) == ["d (1 rank: 7): x"]


def test_program_text_prints_each_reader_flag_code_once(tmp_path):
    res = run_program([DLRM], cache=False)
    per_rank = [f for f in res["flags"] if "(rank " in f]
    assert len(per_rank) > len({f.split(" ")[0] for f in per_rank})  # several ranks share a code
    text = render_program(res)
    shown = [line for line in text.splitlines() if line.startswith("  flag: ")]
    codes = [line.split()[1] for line in shown]
    assert len(codes) == len(set(codes))
    assert len(shown) == len(res["flag_lines"]) < len(res["flags"])


def test_batches_bound_files_and_bytes(tmp_path, monkeypatch):
    sizes = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 30, 1, 1]
    files = []
    for i, n in enumerate(sizes):
        f = tmp_path / f"r{i:02d}.json"
        f.write_bytes(b"x" * n)
        files.append(f)
    monkeypatch.setattr(kineto, "_BATCH_BYTES", 10)
    monkeypatch.setattr(kineto, "_BATCH_FILES", 4)
    got = kineto._batches(files, threads=1)  # at least 4 batches per thread: <= ceil(13 / 4) = 4 files each
    assert [list(b) for b in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], [10], [11, 12]]
    assert [list(b) for b in kineto._batches(files, threads=8)] == [[i] for i in range(13)]
    assert kineto._batches([], threads=2) == []
