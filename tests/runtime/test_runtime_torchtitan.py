"""torchtitan structured logs (issue 13, item 2): per-rank JSONL spans -> canonical steps and events.

The bundled sample is written by ``data/timelines/torchtitan_llama3_8b_demo/generate.py``; the expected
numbers below are that generator's parameters (a normal step: 1 ms + 4 ms batch fetch + 1.32 s fwd_bwd
+ 0.11 s optim + 0.03 s metrics + 2 ms = 1.467 s, of which 1.463 s compute).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from fleetlib.cli import main
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.measure import measure
from fleetlib.runtime.readers import READERS, read_torchtitan

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data/timelines/torchtitan_llama3_8b_demo"
FILES = sorted(DEMO.glob("training.global_rank_*.jsonl"))
CORPUS = ROOT / "tests/corpus/runtime/torchtitan"


def _lines(paths) -> int:
    return sum(1 for p in paths for line in p.read_text().splitlines() if line.strip())


def test_registered_with_the_sample_and_its_corpus():
    spec = READERS["torchtitan"]
    good = [s for s in spec.samples if not s.bad]
    assert len(good) == 1 and good[0].records == _lines(FILES) == 938
    assert sorted(str(ROOT / p) for p in good[0].paths) == [str(p) for p in FILES]
    assert sum(s.bad for s in spec.samples) == 4
    assert "hand-written" in (DEMO / "SOURCE.md").read_text()


def test_steps_per_rank_and_attempt():
    tables, ledger = read_torchtitan(FILES)
    assert ledger.balanced() and ledger.read == 938 and ledger.rejected == 0
    steps = tables.steps
    for rank in (0, 1):
        mine = steps[steps["rank"] == rank]
        assert set(mine["job_id"]) == {f"training/rank{rank}"}
        # first process: steps 1-26 (27 failed on rank 0 and was cut off on rank 1); second: 21-30
        assert mine.loc[mine["attempt"] == 0, "step"].tolist() == list(range(1, 27))
        assert mine.loc[mine["attempt"] == 1, "step"].tolist() == list(range(21, 31))
    dur = (steps["end"] - steps["start"]).dt.total_seconds()
    normal = steps["step"].isin([2, 3, 4, 5])
    assert dur[normal].to_numpy() == pytest.approx(1.467, abs=1e-9)
    wait = steps.set_index(["rank", "attempt", "step"])["input_wait_s"]
    assert wait[(1, 0, 12)] == pytest.approx(2.1, abs=1e-9)  # rank 1's input stall
    assert wait[(0, 0, 12)] == pytest.approx(0.004, abs=1e-9)


def test_checkpoint_and_eval_are_cut_out_of_their_step():
    tables, _ = read_torchtitan(FILES)
    s, e = tables.steps, tables.events
    r0 = e[(e["rank"] == 0) & (e["attempt"] == 0)]
    begin = r0.loc[(r0["kind"] == "checkpoint_begin") & (r0["step"] == 10), "time"].iloc[0]
    step10 = s[(s["rank"] == 0) & (s["attempt"] == 0) & (s["step"] == 10)].iloc[0]
    assert step10["end"] == begin
    assert (step10["end"] - step10["start"]).total_seconds() == pytest.approx(1.465, abs=1e-9)
    commits = e[(e["rank"] == 0) & (e["kind"] == "checkpoint_commit")]
    assert commits["step"].tolist() == [10, 20, 30]
    assert commits["duration_s"].astype(float).tolist() == pytest.approx([4.2, 4.2, 4.4], abs=1e-9)
    ev = e[(e["rank"] == 0) & (e["kind"] == "eval_end")]
    assert ev["step"].tolist() == [15] and float(ev["duration_s"].iloc[0]) == pytest.approx(6.0, abs=1e-9)


def test_failures_restores_and_init_spans():
    tables, ledger = read_torchtitan(FILES)
    e = tables.events
    fail = e[e["kind"] == "failure"]
    assert fail["rank"].tolist() == [0] and fail["step"].tolist() == [27]  # one failure, not one per span
    first = tables.steps[tables.steps["attempt"] == 0]  # the failed step is not a step row
    assert not ((first["rank"] == 0) & (first["step"] == 27)).any()
    restores = e[e["kind"] == "restore"]
    assert restores["attempt"].tolist() == [1, 1] and restores["step"].tolist() == [20, 20]
    init = e[(e["kind"] == "custom_badput:torch_distributed_init")]
    assert len(init) == 4 and init["duration_s"].astype(float).tolist() == pytest.approx([6.3] * 4)
    codes = [f.code for f in ledger.flags]
    assert codes.count("error_propagated") == 1  # the step_error after fwd_bwd_error
    assert codes.count("span_open_at_end") == 2  # rank 1 was stopped inside step 27's fwd_bwd
    assert codes.count("held_from_process_records") == 4


def test_the_measurement_against_the_generator():
    tables, _ = read_torchtitan(FILES)
    m = runtime_goodput(tables.steps, tables.events, definition="retrospective")
    assert m.fault_free_step_s == {f"training/rank{r}": pytest.approx(1.463) for r in (0, 1)}
    # slow steps: rank 0 waits 2.1 s for rank 1 in step 12; step 18 runs 0.93 s slow on both ranks; the
    # steps cut before a checkpoint or an eval (10, 15, 20, 30, on each rank) are 2 ms short
    assert m.slow_step_s == pytest.approx(2.1 + 2 * 0.93 - 8 * 0.002, abs=1e-6)
    # retained steps: 1-20 of the first process (21-26 are erased by the restore to 20) and 21-30 of the
    # second, on each rank: 60 steps fetching in 4 ms, but one of them (rank 1, step 12) in 2.1 s
    assert m.categories["input_wait"] == pytest.approx(2.1 + (30 * 2 - 1) * 0.004, abs=1e-6)
    assert m.categories["evaluation"] == pytest.approx(2 * 6.0, abs=1e-6)
    assert m.categories["rework"] > 0 and m.categories["recovery"] > 0
    assert sum(m.categories.values()) == pytest.approx(m.held_s, abs=1e-6)


def test_the_cli_and_measure_read_it():
    m = measure(FILES, format="torchtitan")
    assert m.ledger.read == 938
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["runtime", *map(str, FILES), "--format", "torchtitan", "--json"]) == 0
    res = json.loads(buf.getvalue())
    assert res["format"] == "torchtitan" and res["runtime_goodput"] == pytest.approx(m.factor().value)


@pytest.mark.parametrize(("name", "row", "field", "reason"), [
    ("truncated", 40, None, "truncated last line (the file does not end with a newline): invalid JSON"),
    ("end_without_start", 15, "log_type_name", "span end without start: fwd_bwd_end has no fwd_bwd_start"),
    ("non_monotonic", 30, "time_us", "non-monotonic time: time_us 1772445634532000 is 4.89 s earlier"),
    ("unknown_rank", 25, "rank", "unknown rank 7 in the file of rank 0"),
    ("unknown_rank", 26, "rank", "missing or non-integer rank"),
])
def test_bad_input_is_rejected_with_file_row_field_and_reason(name, row, field, reason):
    path = CORPUS / f"training.global_rank_0.{name}.jsonl"
    _, ledger = read_torchtitan(path)
    assert ledger.balanced() and ledger.read == _lines([path])
    entry = next(e for e in ledger.entries if e.row == row and e.action == "rejected")
    assert entry.file == str(path) and entry.field == field and entry.reason.startswith(reason)
