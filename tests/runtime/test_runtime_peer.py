"""Issue 16: the runtime rung on ml-goodput-measurement 0.2.3's own test scenarios and recorder shapes.

One regression test per finding, the property ``productive_s + sum(terms) == held_s`` on every
bundled and corpus timeline, and the README's comparison table (computed, not typed).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from fleetlib.quality import DomainError
from fleetlib.runtime.commands import render_runtime, run_runtime
from fleetlib.runtime.goodput import runtime_goodput, summary_of
from fleetlib.runtime.measure import measure
from fleetlib.runtime.readers import read_mlgoodput
from fleetlib.runtime.schema import ISSUE_TERMS
from fleetlib.runtime.timeline import tables_from_seconds

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "runtime"
PEER = CORPUS / "mlgoodput_peer"
DATA = ROOT / "data" / "timelines"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime_peer_table import DIFFERENCES, markdown, peer_rows  # noqa: E402


def _entries(ledger, action=None):
    return [e for e in ledger.to_dict()["entries"] if action is None or e.get("action") == action]


def _flag_codes(ledger):
    return [f["code"] for f in ledger.to_dict()["flags"]]


# ---------------------------------------------------------------------------------------------------
# Finding 1: split custom-badput (and elastic) records are intervals
# ---------------------------------------------------------------------------------------------------


def test_split_custom_badput_records_are_read_as_an_evaluation():
    path = PEER / "BadputTest__test_badput_calculator_custom_sync_badput_timeline.jsonl"
    m = measure(path, format="mlgoodput")
    assert m.categories["evaluation"] == pytest.approx(5.0)  # the recorder's start/end pair, 5 s apart
    assert m.ledger.rejected == 0
    assert m.runtime_goodput == pytest.approx(30.0 / 41.0)


def test_split_records_pair_by_type_and_order_and_unpaired_halves_are_ledgered():
    tables, ledger = read_mlgoodput(CORPUS / "mlgoodput_split_records_timeline.jsonl")
    kinds = tables.events["kind"].tolist()
    assert kinds.count("eval_begin") == 1 and kinds.count("eval_end") == 1
    assert "resize_begin" in kinds and "resize_end" in kinds  # the elastic wait and re-initialisation
    ev = tables.events.set_index("kind")
    assert float(ev.loc["resize_begin", "duration_s"]) == pytest.approx(4.0)
    assert float(ev.loc["resize_end", "duration_s"]) == pytest.approx(3.0)
    rejected = _entries(ledger, "rejected")
    assert len(rejected) == 1 and rejected[0]["row"] == 19 and "sdc_check" in rejected[0]["reason"]
    assert "no matching end" in rejected[0]["reason"]
    assert ledger.read == ledger.kept + ledger.rejected


def test_the_combined_form_is_still_read():
    m = measure(DATA / "maxtext-llama3-8b-demo_timeline.jsonl", format="mlgoodput")
    assert m.categories["evaluation"] > 0


# ---------------------------------------------------------------------------------------------------
# Finding 2: input waits are input waits in every step (warm-up judged on compute time)
# ---------------------------------------------------------------------------------------------------


def test_input_wait_in_every_step_is_input_wait_not_startup():
    m = measure(CORPUS / "mlgoodput_input_wait_every_step_timeline.jsonl", format="mlgoodput")
    assert m.categories["input_wait"] == pytest.approx(50 * 1.0)  # 50 steps x 1 s
    # startup: 10 s before the first step + the first step's 5 s compile excess, nothing after it
    assert m.categories["startup"] == pytest.approx(15.0)
    assert m.breakdown["startup_warmup"] == pytest.approx(5.0)
    assert m.fault_free_step_s["input-wait-job"] == pytest.approx(2.0)


def test_warm_up_ends_at_the_first_step_whose_compute_time_is_within_tolerance():
    # every step waits 1 s for input; only step 0 computes slowly
    steps = [(0, 0, 10.0, 16.0, 1.0)] + [(0, i, 13.0 + 3 * i, 16.0 + 3 * i, 1.0) for i in range(1, 20)]
    events = [(0, 0.0, "gang_complete"), (0, 73.0, "checkpoint_commit", 19), (0, 73.0, "release")]
    m = runtime_goodput(*tables_from_seconds(steps, events))
    assert m.categories["input_wait"] == pytest.approx(20.0)
    assert m.categories["startup"] == pytest.approx(10.0 + 3.0)


# ---------------------------------------------------------------------------------------------------
# Finding 3: a clean job end is the final commit (documented, flagged, optional)
# ---------------------------------------------------------------------------------------------------


def test_clean_job_end_counts_as_the_final_commit():
    path = PEER / "GoodputTest__test_goodput_calculator_timeline.jsonl"
    committed = measure(path, format="mlgoodput")
    retro = measure(path, format="mlgoodput", definition="retrospective")
    assert committed.checkpoints_recorded == 0
    assert committed.runtime_goodput == pytest.approx(retro.runtime_goodput) == pytest.approx(0.75)
    assert "clean_end_commit" in _flag_codes(committed.ledger)
    strict = measure(path, format="mlgoodput", clean_end_commit=False)
    assert strict.runtime_goodput == 0.0 and strict.categories["progress_at_risk"] == pytest.approx(15.0)


def test_text_output_says_when_no_checkpoint_was_recorded():
    path = PEER / "GoodputTest__test_goodput_calculator_timeline.jsonl"
    res = run_runtime([path], "mlgoodput")
    text = render_runtime(res).splitlines()
    assert text[0].startswith("runtime goodput R")
    assert text[1].startswith("no checkpoint recorded")
    strict = render_runtime(run_runtime([path], "mlgoodput", clean_end_commit=False))
    assert "nothing is retained" in strict
    with_ckpt = render_runtime(run_runtime([DATA / "maxtext-llama3-8b-demo_timeline.jsonl"], "mlgoodput"))
    assert "no checkpoint recorded" not in with_ckpt


def test_a_window_that_closes_before_the_clean_end_keeps_the_closing_rule():
    steps = [(0, i, 10.0 + 2 * i, 12.0 + 2 * i) for i in range(10)]
    events = [(0, 0.0, "gang_complete"), (0, 30.0, "job_completed"), (0, 30.0, "release")]
    s, e = tables_from_seconds(steps, events)
    whole = runtime_goodput(s, e)
    assert whole.productive_s == pytest.approx(20.0)
    early = runtime_goodput(s, e, window=(s["start"].iloc[0], s["end"].iloc[4]))
    assert early.productive_s == 0.0 and early.categories["progress_at_risk"] > 0


# ---------------------------------------------------------------------------------------------------
# Finding 4: events outside an attempt that the calculation does not need are flagged, not fatal
# ---------------------------------------------------------------------------------------------------


def test_a_marker_before_job_start_is_flagged_and_kept():
    m = measure(CORPUS / "mlgoodput_split_records_timeline.jsonl", format="mlgoodput")
    flags = [f for f in m.ledger.to_dict()["flags"] if f["code"] == "event_outside_held_time"]
    assert {f.get("row") for f in flags} >= {1, 2}  # the tpu_init lines, 30 s before job_start_time
    assert m.held_s == pytest.approx(43.0)


def test_an_event_that_cannot_be_placed_is_rejected_with_its_line():
    path = PEER / "BadputTest__test_badput_calculator_checkpoint_badput_timeline.jsonl"
    m = measure(path, format="mlgoodput")
    rows = {e["row"]: e["reason"] for e in _entries(m.ledger, "rejected")}
    assert "lies before its attempt's job_start_time" in rows[13] and rows[13].startswith("checkpoint_begin")
    assert rows[18].startswith("restore")


# ---------------------------------------------------------------------------------------------------
# Finding 5: stalls and every held second in one term
# ---------------------------------------------------------------------------------------------------


def test_a_stall_is_a_runtime_loss_and_a_slow_step_is_the_program_handoff():
    m = measure(CORPUS / "mlgoodput_stall_timeline.jsonl", format="mlgoodput")
    assert m.categories["stall"] == pytest.approx(30.0 - 2.0)
    assert m.slow_step_s == pytest.approx(1.0) and m.program_handoff_s == pytest.approx(1.0)
    assert m.productive_s == pytest.approx(12 * 2.0 + 1.0)
    loose = measure(CORPUS / "mlgoodput_stall_timeline.jsonl", format="mlgoodput", stall_factor=20.0)
    assert loose.categories["stall"] == 0.0 and loose.slow_step_s == pytest.approx(29.0)
    with pytest.raises(DomainError, match="stall_factor"):
        measure(CORPUS / "mlgoodput_stall_timeline.jsonl", format="mlgoodput", stall_factor=0.5)
    d = summary_of(m)
    assert d["terms"]["stall"] == pytest.approx(28.0) and d["slow_step_s"] == pytest.approx(1.0)
    assert json.loads(json.dumps(m.to_dict()))["program_handoff_s"] == pytest.approx(1.0)


def _timelines():
    yield from sorted(PEER.glob("*_timeline.jsonl"))
    yield from sorted(CORPUS.glob("mlgoodput_*_timeline.jsonl"))
    yield DATA / "maxtext-llama3-8b-demo_timeline.jsonl"


@pytest.mark.parametrize("definition", ["committed", "retrospective"])
@pytest.mark.parametrize("path", list(_timelines()), ids=lambda p: p.name)
def test_every_held_second_lands_in_one_term(path, definition):
    try:
        m = measure(path, format="mlgoodput", definition=definition)
    except Exception as exc:  # a corpus file that is meant to fail must fail with a named error
        assert type(exc).__name__ in ("InputError", "DomainError"), exc
        return
    d = summary_of(m)
    assert tuple(d["terms"]) == ISSUE_TERMS
    assert math.isclose(d["productive_s"] + sum(d["terms"].values()), d["held_s"], rel_tol=1e-12,
                        abs_tol=1e-6)


def test_every_held_second_lands_in_one_term_on_every_bundled_timeline():
    from fleetlib.quality import InputError
    from fleetlib.runtime.readers import READERS

    measured = 0
    for fmt, spec in READERS.items():
        if fmt == "serving":  # replicas: phases, not a job timeline
            continue
        for sample in spec.samples:
            if sample.bad:
                continue
            files = [ROOT / p for p in sample.paths]
            for definition in ("committed", "retrospective"):
                try:
                    m = measure(files, format=fmt, definition=definition, **sample.options)
                except InputError:
                    assert fmt == "bloom"  # the chronicle logs no gang completion: not measurable
                    continue
                d = summary_of(m)
                assert math.isclose(d["productive_s"] + sum(d["terms"].values()), d["held_s"],
                                    rel_tol=1e-12, abs_tol=1e-6), (files, definition)
                measured += 1
    assert measured >= 8


# ---------------------------------------------------------------------------------------------------
# The comparison table
# ---------------------------------------------------------------------------------------------------


def test_peer_comparison_table():
    rows = peer_rows()
    finished = [r for r in rows if r["finished"]]
    assert len(finished) == 17
    differ = {r["scenario"] for r in finished if not r["agree"]}
    assert differ == set(DIFFERENCES)  # every disagreement is explained, every other scenario agrees
    for r in finished:  # a finished job's default value is its retrospective value
        assert r["fleetlib_pct"] == pytest.approx(r["retrospective_pct"])
    assert "| who is right |" in markdown(rows)
