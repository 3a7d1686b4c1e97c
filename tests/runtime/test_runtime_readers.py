"""Tests for fleetlib.runtime.readers: real formats -> canonical tables, ledgers, bad-input corpus."""

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetlib.quality import DomainError, InputError
from fleetlib.runtime import commands, model
from fleetlib.runtime import readers as R
from fleetlib.runtime.goodput import replica_runtime_goodput
from fleetlib.runtime.schema import EVENT_COLUMNS, PROVENANCE_COLUMNS, STEP_COLUMNS

DATA = Path(__file__).resolve().parents[2] / "data" / "timelines"
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "runtime"
ASUS = DATA / "asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt"
EOS = DATA / "nvidia_eos_n128_llama2_70b_lora_result_0.txt"
DEMO_JSONL = DATA / "maxtext-llama3-8b-demo_timeline.jsonl"
UTC = "datetime64[ns, UTC]"


def balanced(ledger):
    """Nothing lost: every record read is kept, repaired or rejected exactly once."""
    return ledger.read == ledger.kept + ledger.repaired + ledger.rejected


def rejected_rows(ledger):
    return {e.row: e for e in ledger.entries if e.action == "rejected"}


def repaired_rows(ledger):
    return {e.row: e for e in ledger.entries if e.action == "repaired"}


def flag_codes(ledger):
    return [f.code for f in ledger.flags]


def ts(text):
    return pd.Timestamp(text).tz_convert("UTC")


# ---------------------------------------------------------------------------------------------------
# MLPerf :::MLLOG logs
# ---------------------------------------------------------------------------------------------------

_MLLOG_RE = re.compile(r'"time_ms": (\d+), "event_type": "(\w+)", "key": "(\w+)"')


def regex_intervals(path):
    """Second method: a plain regex pass over the file, pairing each start with the next stop."""
    spans = {}
    opened = {}
    for t, _etype, key in _MLLOG_RE.findall(Path(path).read_text()):
        kind, _, edge = key.rpartition("_")
        if edge == "start":
            opened[kind] = int(t)
        elif edge == "stop" and kind in opened:
            spans.setdefault(kind, []).append((int(t) - opened.pop(kind)) / 1000.0)
    return spans


def mllog_count(path):
    return sum(1 for line in Path(path).read_text().splitlines() if ":::MLLOG" in line)


def test_asustek_summary_matches_the_raw_intervals():
    s = commands.mlperf_summary(ASUS)
    # acceptance numbers (issue 4 / field notes section 7)
    assert round(s["startup_s"], 1) == 66.3
    assert round(s["run_s"], 1) == 1773.3
    assert s["blocks"] == 5 and round(s["productive_s"], 1) == 1582.6
    assert s["evals"] == 5 and round(s["evaluation_s"], 1) == 190.7
    # to the millisecond, from the log's own time stamps (hand-read: init 1715848254167 -> 1715848320424,
    # run 1715848320425 -> 1715850093688)
    assert s["startup_s"] == pytest.approx(66.257, abs=1e-9)
    assert s["run_s"] == pytest.approx(1773.263, abs=1e-9)
    assert s["held_s"] == pytest.approx(1715850093.688 - 1715848254.167, abs=1e-6)
    assert s["runtime_goodput"] == pytest.approx(s["productive_s"] / s["held_s"], rel=1e-12)
    assert s["runtime_goodput"] == pytest.approx(1582.568 / 1839.521, rel=1e-9)
    # the partition of held time adds up; the 1 ms between init_stop and run_start is unattributed
    parts = s["startup_s"] + s["productive_s"] + s["evaluation_s"] + s["unattributed_s"]
    assert parts == pytest.approx(s["held_s"], abs=1e-9)
    assert s["unattributed_s"] == pytest.approx(0.001, abs=1e-6)
    assert (s["org"], s["benchmark"], s["status"]) == ("ASUSTeK", "llama2_70b_lora", "success")
    assert s["ledger"]["rejected"] == 0 and s["ledger"]["read"] == mllog_count(ASUS)


@pytest.mark.parametrize("path", [ASUS, EOS], ids=["asustek", "nvidia_eos"])
def test_summary_agrees_with_a_plain_regex_pass(path):
    spans = regex_intervals(path)
    s = commands.mlperf_summary(path)
    assert s["startup_s"] == pytest.approx(sum(spans["init"]), abs=1e-9)
    assert s["run_s"] == pytest.approx(sum(spans["run"]), abs=1e-9)
    assert s["productive_s"] == pytest.approx(sum(spans["block"]), abs=1e-9)
    assert s["evaluation_s"] == pytest.approx(sum(spans["eval"]), abs=1e-9)
    assert (s["blocks"], s["evals"]) == (len(spans["block"]), len(spans["eval"]))


def test_nvidia_eos_numbers():
    s = commands.mlperf_summary(EOS)
    # field notes section 7: init 55.4 s, run 89.2 s, 11 blocks = 76.3 s, 11 evals = 12.9 s
    assert (round(s["startup_s"], 1), round(s["run_s"], 1)) == (55.4, 89.2)
    assert (s["blocks"], round(s["productive_s"], 1)) == (11, 76.3)
    assert (s["evals"], round(s["evaluation_s"], 1)) == (11, 12.9)
    # at 128 nodes init takes longer than a third of held time; the 8-GPU run spends 3.6 % on it
    assert s["startup_s"] / s["held_s"] > 0.38
    assert commands.mlperf_summary(ASUS)["startup_s"] / commands.mlperf_summary(ASUS)["held_s"] < 0.04


def test_read_mlperf_tables():
    tables, ledger = R.read_mlperf(ASUS, job_id="asus")
    s = commands.mlperf_summary(ASUS)
    steps, events = tables.steps, tables.events
    assert list(steps.columns) == [*STEP_COLUMNS, *PROVENANCE_COLUMNS, "samples"]
    assert list(events.columns) == [*EVENT_COLUMNS, *PROVENANCE_COLUMNS]
    # each record names the log line it came from
    assert (steps["source_file"].astype(str) == str(ASUS)).all() and (steps["source_row"] > 0).all()
    assert str(steps["start"].dtype) == UTC and str(events["time"].dtype) == UTC
    # issue 13: the per-block throughput dialect cuts each block into its steps: (samples since the last
    # block) / global batch 8 = 192, 48, 48, 48, 48 steps
    assert len(steps) == 384 and steps["step"].tolist() == list(range(384))
    dur = (steps["end"] - steps["start"]).dt.total_seconds()
    assert dur.sum() == pytest.approx(s["productive_s"], abs=1e-9)
    kinds = events["kind"].tolist()
    assert kinds[0] == "gang_complete" and kinds[1] == "first_step" and kinds[-1] == "release"
    assert kinds.count("eval_begin") == kinds.count("eval_end") == 5
    assert "cold_start" not in kinds  # one run: attempt 0 is cold by definition
    gang = events.loc[events["kind"] == "gang_complete", "time"].iloc[0]
    release = events.loc[events["kind"] == "release", "time"].iloc[0]
    assert (release - gang).total_seconds() == pytest.approx(s["held_s"], abs=1e-9)
    evals = events[events["kind"] == "eval_end"]
    assert evals["duration_s"].sum() == pytest.approx(s["evaluation_s"], abs=1e-9)
    assert evals["step"].tolist() == [191, 239, 287, 335, 383]  # the last step before each eval
    assert balanced(ledger) and ledger.read == mllog_count(ASUS) and ledger.rejected == 0


def test_mlperf_runtime_json_is_a_partition_of_held_time():
    out = commands.mlperf_runtime_json(EOS)
    assert set(out) >= {"runtime_goodput", "held_s", "productive_s", "terms", "fault_free_step_s",
                        "definition", "ledger"}
    assert set(out["terms"]) == {"progress_at_risk", "startup", "input_wait", "checkpoint", "recovery",
                                 "rework", "preemption", "elastic_wait", "elastic_reinit", "evaluation",
                                 "stall", "idle", "unattributed"}
    assert out["productive_s"] + sum(out["terms"].values()) == pytest.approx(out["held_s"], abs=1e-9)
    assert out["runtime_goodput"] == pytest.approx(out["productive_s"] / out["held_s"])
    json.dumps(out)  # JSON-ready
    with pytest.raises(DomainError):
        commands.mlperf_runtime_json(EOS, definition="optimistic")


def test_mlperf_summary_table_reads_a_folder():
    table = commands.mlperf_summary_table(DATA)
    assert sorted(table["org"]) == ["ASUSTeK", "NVIDIA"]
    assert (table["rejected"] == 0).all()


def test_mlperf_prefixed_per_rank_copies_are_removed():
    path = CORPUS / "mlperf_rank_copies.txt"
    copies = sum(1 for line in path.read_text().splitlines()
                 if ":::MLLOG" in line and line.startswith(("1: ", "2: ")))
    tables, ledger = R.read_mlperf(path)
    assert balanced(ledger)
    assert ledger.rejected == copies and ledger.kept == mllog_count(EOS)
    assert all("per-rank copy" in e.reason for e in ledger.entries)
    clean, dirty = commands.mlperf_summary(EOS), commands.mlperf_summary(path)
    for key in ("held_s", "startup_s", "run_s", "productive_s", "evaluation_s", "blocks", "evals"):
        assert dirty[key] == pytest.approx(clean[key], abs=1e-9), key
    assert len(tables.steps) == len(R.read_mlperf(EOS)[0].steps) == 87  # issue 13: the blocks' steps


def test_mlperf_unprefixed_copies_next_to_each_other_are_removed():
    path = CORPUS / "mlperf_unprefixed_copies.txt"
    _, ledger = R.read_mlperf(path)
    assert balanced(ledger) and ledger.kept == mllog_count(ASUS)
    clean, dirty = commands.mlperf_summary(ASUS), commands.mlperf_summary(path)
    for key in ("held_s", "startup_s", "productive_s", "evaluation_s", "blocks", "evals"):
        assert dirty[key] == pytest.approx(clean[key], abs=1e-9), key


def test_mlperf_unmatched_markers_are_reported_not_guessed():
    path = CORPUS / "mlperf_unmatched_markers.txt"
    tables, ledger = R.read_mlperf(path)
    assert balanced(ledger) and ledger.read == 13
    bad = rejected_rows(ledger)
    assert set(bad) == {8, 9, 12}
    assert "block_start with no matching block_stop" in bad[8].reason
    assert "eval_stop with no matching eval_start" in bad[9].reason
    assert bad[12].field == "event_type" and "disagree" in bad[12].reason
    s = commands.mlperf_summary(path)
    # only the matched intervals count: blocks 0-100 s and 280-380 s of the run, one 10 s eval
    assert (s["blocks"], s["evals"]) == (2, 1)
    assert s["productive_s"] == pytest.approx(200.0) and s["evaluation_s"] == pytest.approx(10.0)
    assert s["held_s"] == pytest.approx(390.001)
    assert s["unattributed_s"] == pytest.approx(390.001 - 60.0 - 200.0 - 10.0)
    assert len(tables.steps) == 2


def test_mlperf_truncated_log_has_no_held_time():
    path = CORPUS / "mlperf_truncated.txt"
    tables, ledger = R.read_mlperf(path)  # reading works: the records before the cut are kept
    assert balanced(ledger)
    last = rejected_rows(ledger)[13]
    assert last.reason.startswith("truncated last line") and "invalid JSON" in last.reason
    assert "release" not in tables.events["kind"].tolist()
    with pytest.raises(InputError, match="run_stop"):
        commands.mlperf_summary(path)


def test_mlperf_bad_arguments():
    with pytest.raises(DomainError):
        R.read_mlperf(ASUS, rank_copy_tolerance_s=-1.0)
    with pytest.raises(DomainError):
        R.read_mlperf([ASUS, EOS], job_id="one")
    with pytest.raises(InputError, match="not found"):
        R.read_mlperf(CORPUS / "no_such_file.txt")


# ---------------------------------------------------------------------------------------------------
# ml-goodput-measurement <job>_timeline.jsonl
# ---------------------------------------------------------------------------------------------------


def raw_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def test_mlgoodput_sample_timeline():
    tables, ledger = R.read_mlgoodput(DEMO_JSONL)
    steps, events = tables.steps, tables.events
    raw = raw_jsonl(DEMO_JSONL)
    assert balanced(ledger) and ledger.read == len(raw)
    assert set(steps["job_id"]) == {"maxtext-llama3-8b-demo"}
    # two explicit attempts (two job_start_time records), no inferred restart
    assert events.loc[events["kind"] == "gang_complete", "attempt"].tolist() == [0, 1]
    assert "restart_inferred_from_step_numbers" not in flag_codes(ledger)
    # the crash: step 27 of attempt 0 never finished; a failure is placed at its start and flagged
    bad = rejected_rows(ledger)
    assert len(bad) == 1 and "did not finish" in next(iter(bad.values())).reason
    assert steps.loc[steps["attempt"] == 0, "step"].max() == 26
    failure = events[events["kind"] == "failure"]
    step27 = next(r["step_start_time"] for r in raw if r.get("step_count") == 27)
    assert len(failure) == 1
    assert failure["time"].iloc[0] == pd.Timestamp(step27, unit="s", tz="UTC").round("us")
    assert flag_codes(ledger).count("failure_time_inferred") == 1
    # restart from the checkpoint of step 20; the next step is 21
    restore = events[events["kind"] == "restore"]
    assert restore["step"].tolist() == [20] and restore["attempt"].tolist() == [1]
    first = events[events["kind"] == "first_step"]
    assert first["step"].tolist() == [0, 21]
    # a step ends where the blocking checkpoint save of its state begins
    save10 = next(r for r in raw if r.get("event_type") == "save" and r["step"] == 10)
    end10 = steps.loc[(steps["attempt"] == 0) & (steps["step"] == 10), "end"].iloc[0]
    save_start = save10["checkpoint_manager_blocking_start_time"]
    assert end10 == pd.Timestamp(save_start, unit="s", tz="UTC").round("us")
    begin = events[(events["kind"] == "checkpoint_begin") & (events["step"] == 10)]
    assert begin["duration_s"].iloc[0] == pytest.approx(save10["checkpoint_manager_blocking_duration_secs"])
    # input wait of a step = the data-loading interval recorded inside it
    s12 = next(r["step_start_time"] for r in raw if r.get("step_count") == 12)
    i = next(k for k, r in enumerate(raw) if r.get("step_count") == 12)
    wait = raw[i + 2]["data_loading_end_time"] - raw[i + 1]["data_loading_start_time"]
    assert raw[i + 1]["data_loading_start_time"] >= s12
    got = steps.loc[(steps["attempt"] == 0) & (steps["step"] == 12), "input_wait_s"].iloc[0]
    assert got == pytest.approx(wait, abs=2e-6)
    # the eval (custom badput EVAL) ends the step before it
    ev = events[events["kind"] == "eval_begin"]
    end35 = steps.loc[(steps["attempt"] == 1) & (steps["step"] == 35), "end"].iloc[0]
    assert len(ev) == 1 and ev["time"].iloc[0] == end35
    # auxiliary phase markers are kept, not flagged as unknown
    assert {"tpu_init_begin", "training_prep_end", "data_loading_begin"} <= set(events["kind"])
    assert "unknown_event_kind" not in flag_codes(ledger)
    assert (steps["end"] > steps["start"]).all()


def test_mlgoodput_restart_at_the_next_step_comes_from_explicit_markers():
    """Field notes 3.5: a restart that resumes at the next step is invisible to step-number inference."""
    tables, ledger = R.read_mlgoodput(CORPUS / "mlgoodput_restart_next_step_timeline.jsonl")
    steps, events = tables.steps, tables.events
    assert balanced(ledger) and ledger.rejected == 0
    assert sorted(steps.groupby("attempt")["step"].apply(list).to_dict().items()) == [
        (0, list(range(10))), (1, list(range(10, 20)))]
    assert "restart_inferred_from_step_numbers" not in flag_codes(ledger)
    gang = events[events["kind"] == "gang_complete"]
    t0 = gang["time"].iloc[0]
    assert ((gang["time"] - t0).dt.total_seconds().tolist()) == [0.0, 175.0]
    # step 9 finished: it ends where the emergency checkpoint of its state begins (t = 110 s)
    s9 = steps[steps["step"] == 9].iloc[0]
    assert (s9["end"] - t0).total_seconds() == pytest.approx(110.0)
    restore = events[events["kind"] == "restore"]
    assert restore["step"].tolist() == [9] and restore["attempt"].tolist() == [1]
    fail = events[events["kind"] == "failure"]
    assert fail["attempt"].tolist() == [0]
    assert (fail["time"].iloc[0] - t0).total_seconds() == pytest.approx(112.0)  # lower bound of 115 s
    # the format's total time is continuous: the crashed attempt holds its resources until the restart
    release = events[events["kind"] == "release"]
    assert release["attempt"].tolist() == [0, 1]
    assert (release["time"] - t0).dt.total_seconds().tolist() == [175.0, 295.0]
    assert flag_codes(ledger) == ["failure_time_inferred", "release_inferred"]


def test_mlgoodput_repeated_step_numbers_are_a_flagged_fallback():
    tables, ledger = R.read_mlgoodput(CORPUS / "mlgoodput_repeated_steps_timeline.jsonl")
    steps = tables.steps
    assert balanced(ledger)
    assert flag_codes(ledger).count("restart_inferred_from_step_numbers") == 1
    assert set(steps["attempt"]) == {0}  # no gang_complete is invented for the inferred restart
    # step 5 was cut by the silent restart: it did not finish, and no step spans the outage
    assert 7 in rejected_rows(ledger) and "did not finish" in rejected_rows(ledger)[7].reason
    assert (steps["end"] - steps["start"]).dt.total_seconds().max() <= 20.0
    assert steps["step"].tolist() == [0, 1, 2, 3, 4, 3, 4, 5, 6, 7]


def test_mlgoodput_invalid_lines():
    path = CORPUS / "mlgoodput_invalid_json_timeline.jsonl"
    tables, ledger = R.read_mlgoodput(path)
    assert balanced(ledger) and ledger.read == 14
    bad = rejected_rows(ledger)
    assert set(bad) == {4, 8, 9, 11, 13}  # line 10, an elastic slice count, is read (issue 33)
    assert "invalid JSON" in bad[4].reason
    assert "duplicate of line 7" in bad[8].reason
    assert "per-host copy" in bad[9].reason
    count = tables.events[tables.events["kind"] == "device_count"]
    assert count["source_row"].tolist() == [10] and count["devices_after"].tolist() == [2]
    assert "unrecognised record" in bad[11].reason
    assert bad[13].field == "step_start_time"
    steps = tables.steps
    assert steps["step"].tolist() == [0, 1, 2, 3, 4]
    t0 = tables.events.loc[tables.events["kind"] == "gang_complete", "time"].iloc[0]
    s3 = steps[steps["step"] == 3].iloc[0]
    assert (s3["end"] - t0).total_seconds() == pytest.approx(48.0)  # ends at the save's blocking start


def test_mlgoodput_truncated_last_line():
    tables, ledger = R.read_mlgoodput(CORPUS / "mlgoodput_truncated_timeline.jsonl")
    assert balanced(ledger)
    last = rejected_rows(ledger)[7]
    assert last.reason.startswith("truncated last line") and "invalid JSON" in last.reason
    assert "no_job_end" in flag_codes(ledger)
    assert tables.steps["step"].tolist() == [0, 1, 2, 3]


def test_mlgoodput_window_with_no_steps():
    tables, ledger = R.read_mlgoodput(CORPUS / "mlgoodput_no_steps_timeline.jsonl")
    assert balanced(ledger) and ledger.kept == 2
    assert tables.steps.empty and list(tables.steps.columns) == list(STEP_COLUMNS)
    assert str(tables.steps["start"].dtype) == UTC
    assert tables.events["kind"].tolist() == ["gang_complete", "job_completed", "release"]


# ---------------------------------------------------------------------------------------------------
# Generic canonical CSV / Parquet
# ---------------------------------------------------------------------------------------------------


def test_demo_csv_pair():
    tables, ledger = R.read_canonical([DATA / "demo-7b-ft_steps.csv", DATA / "demo-7b-ft_events.csv"])
    assert balanced(ledger) and ledger.kept == ledger.read == 36 and not ledger.flags
    steps, events = tables.steps, tables.events
    assert str(steps["end"].dtype) == UTC and steps["attempt"].dtype == np.int64
    assert str(events["step"].dtype) == "Int64"
    first = pd.read_csv(DATA / "demo-7b-ft_steps.csv").iloc[0]
    assert steps["start"].iloc[0] == ts(first["start"])
    assert steps["input_wait_s"].iloc[0] == first["input_wait_s"]
    assert events["kind"].iloc[-1] == "release"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_write_canonical_round_trip(tmp_path, suffix):
    tables, _ = R.read_canonical([DATA / "demo-7b-ft_steps.csv", DATA / "demo-7b-ft_events.csv"])
    path = R.write_canonical(tables, tmp_path / f"timeline{suffix}")
    back, ledger = R.read_canonical(path)
    assert balanced(ledger) and ledger.kept == len(tables.steps) + len(tables.events)
    pd.testing.assert_frame_equal(back.steps[list(STEP_COLUMNS)], tables.steps[list(STEP_COLUMNS)])
    pd.testing.assert_frame_equal(back.events[list(EVENT_COLUMNS)], tables.events[list(EVENT_COLUMNS)])
    # the provenance is the file read: the written file, a CSV's data rows below its header line
    assert (back.steps["source_file"].astype(str) == str(path)).all()
    assert back.steps["source_row"].min() == (2 if suffix == ".csv" else 1)


def test_aliases_and_units(tmp_path):
    steps = tmp_path / "s.csv"
    steps.write_text("Job,Iteration,Start_Time,End_Time,data_wait_ms\n"
                     "j,1,2025-01-06T08:00:00Z,2025-01-06T08:00:30Z,250\n"
                     "j,2,2025-01-06T08:00:30Z,2025-01-06T08:01:00Z,\n")
    events = tmp_path / "e.csv"
    events.write_text("job,time_unix_s,event,step\nj,1736150400,gang_complete,\nj,1736150460.5,release,\n")
    tables, ledger = R.read_canonical([steps, events])
    assert balanced(ledger)
    assert tables.steps["step"].tolist() == [1, 2]
    assert tables.steps["input_wait_s"].tolist() == [0.25, 0.0]
    assert repaired_rows(ledger)[3].reason.startswith("blank input_wait_s taken as 0")
    assert tables.events["time"].tolist() == [ts("2025-01-06T08:00:00Z"), ts("2025-01-06T08:01:00.5Z")]
    # no attempt column: attempts follow the gang_complete markers (one here)
    assert set(tables.steps["attempt"]) == {0}


def test_attempts_from_gang_complete_markers(tmp_path):
    steps = tmp_path / "s.csv"
    steps.write_text("job_id,step,start,end,input_wait_s\n"
                     "j,1,2025-01-06T08:01:00Z,2025-01-06T08:01:30Z,0\n"
                     "j,2,2025-01-06T08:01:30Z,2025-01-06T08:02:00Z,0\n"
                     "j,2,2025-01-06T08:10:00Z,2025-01-06T08:10:30Z,0\n")
    events = tmp_path / "e.csv"
    events.write_text("job_id,time,kind,step\n"
                      "j,2025-01-06T08:00:00Z,gang_complete,\n"
                      "j,2025-01-06T08:05:00Z,gang_complete,\n"
                      "j,2025-01-06T08:06:00Z,restore,1\n")
    tables, ledger = R.read_canonical([steps, events])
    assert tables.steps["attempt"].tolist() == [0, 0, 1]
    assert tables.events["attempt"].tolist() == [0, 1, 1]
    assert "restart_inferred_from_step_numbers" not in flag_codes(ledger)
    assert flag_codes(ledger) == ["restore_uncommitted"]


def test_repeated_steps_without_attempts_or_markers_are_flagged(tmp_path):
    steps = tmp_path / "s.csv"
    steps.write_text("job_id,step,start,end,input_wait_s\n"
                     "j,1,2025-01-06T08:01:00Z,2025-01-06T08:01:30Z,0\n"
                     "j,2,2025-01-06T08:01:30Z,2025-01-06T08:02:00Z,0\n"
                     "j,2,2025-01-06T08:10:00Z,2025-01-06T08:10:30Z,0\n")
    tables, ledger = R.read_canonical(steps)
    assert len(tables.steps) == 3 and set(tables.steps["attempt"]) == {0}
    assert flag_codes(ledger) == ["restart_inferred_from_step_numbers"]


# --- the bad-input corpus ---------------------------------------------------------------------------


def test_corpus_events_out_of_order():
    tables, ledger = R.read_canonical(CORPUS / "events_out_of_order.csv")
    assert balanced(ledger) and (ledger.kept, ledger.repaired, ledger.rejected) == (4, 1, 0)
    assert "out of time order" in repaired_rows(ledger)[5].reason
    assert tables.events["time"].is_monotonic_increasing
    assert tables.events["kind"].tolist()[2:4] == ["checkpoint_begin", "checkpoint_commit"]


def test_corpus_duplicate_step_records():
    tables, ledger = R.read_canonical(CORPUS / "steps_duplicate.csv")
    assert balanced(ledger) and (ledger.kept, ledger.rejected) == (3, 3)
    bad = rejected_rows(ledger)
    assert "duplicate of the record of step 2" in bad[4].reason
    assert "conflicting records of step 3" in bad[5].reason and "conflicting" in bad[6].reason
    assert tables.steps["step"].tolist() == [1, 2, 4]


def test_corpus_step_ending_before_it_starts():
    tables, ledger = R.read_canonical(CORPUS / "steps_end_before_start.csv")
    assert balanced(ledger) and ledger.rejected == 1
    bad = rejected_rows(ledger)[3]
    assert bad.field == "end" and "not after its start" in bad.reason
    assert tables.steps["step"].tolist() == [1, 3]


def test_corpus_restore_to_a_step_never_committed():
    tables, ledger = R.read_canonical(CORPUS / "events_restore_uncommitted.csv")
    assert balanced(ledger) and ledger.kept == 6  # flagged, not dropped
    assert flag_codes(ledger) == ["restore_uncommitted"]
    assert "row 6" in ledger.flags[0].message and "step 8" in ledger.flags[0].message
    assert 8 in tables.events["step"].dropna().tolist()


def test_corpus_failure_with_no_restart():
    _, ledger = R.read_canonical(CORPUS / "events_failure_no_restart.csv")
    assert balanced(ledger) and ledger.kept == 5
    assert flag_codes(ledger) == ["failure_without_restart"]
    assert ledger.flags[0].attempt == 0 and ledger.flags[0].time == "2025-01-06T09:15:00+00:00"
    # a failure followed by a restart is not flagged
    _, ok = R.read_canonical(CORPUS / "events_restore_uncommitted.csv")
    assert "failure_without_restart" not in flag_codes(ok)


def test_corpus_truncated_last_line():
    tables, ledger = R.read_canonical(CORPUS / "steps_truncated_last_line.csv")
    assert balanced(ledger) and (ledger.kept, ledger.rejected) == (2, 1)
    assert rejected_rows(ledger)[4].reason.startswith("truncated last line")
    assert tables.steps["step"].tolist() == [1, 2]


def test_corpus_mixed_timezones():
    path = CORPUS / "events_mixed_timezones.csv"
    tables, ledger = R.read_canonical(path)
    # offsets differ (Z, +02:00, -05:00) but are all zone-aware: converted; the naive row is rejected
    assert balanced(ledger) and (ledger.kept, ledger.rejected) == (3, 1)
    assert "mixed zones" in rejected_rows(ledger)[4].reason
    assert tables.events["time"].tolist() == [ts("2025-01-06T08:00:00Z"), ts("2025-01-06T08:04:00Z"),
                                              ts("2025-01-06T08:40:00Z")]
    # naming the zone repairs the naive row instead (named repair)
    tables, ledger = R.read_canonical(path, tz="Europe/Paris")
    assert balanced(ledger) and ledger.repaired == 1 and ledger.rejected == 0
    assert "localised to tz=Europe/Paris" in repaired_rows(ledger)[4].reason
    assert ts("2025-01-06T07:30:00Z") in tables.events["time"].tolist()


def test_corpus_naive_times():
    path = CORPUS / "events_naive.csv"
    with pytest.raises(InputError, match="pass tz=") as err:
        R.read_canonical(path)
    assert err.value.row == 2 and err.value.field == "time" and err.value.file == str(path)
    tables, ledger = R.read_canonical(path, tz="Europe/Paris")
    # 02:30 on 2025-03-30 does not exist in Paris (clocks jump from 02:00 to 03:00): shifted forward by
    # the hour's gap to 03:30 CEST, i.e. read at CET (UTC+1): 01:30Z, a named repair
    assert balanced(ledger) and (ledger.repaired, ledger.rejected) == (4, 0)
    assert "does not exist in Europe/Paris" in repaired_rows(ledger)[4].reason
    assert "shifted forward by the 1:00 gap" in repaired_rows(ledger)[4].reason
    assert tables.events["time"].tolist() == [ts("2025-03-30T00:30:00Z"), ts("2025-03-30T00:45:00Z"),
                                              ts("2025-03-30T01:30:00Z"), ts("2025-03-30T02:00:00Z")]
    with pytest.raises(DomainError, match="time zone"):
        R.read_canonical(path, tz="Mars/Olympus_Mons")


def test_corpus_window_with_no_events():
    tables, ledger = R.read_canonical([CORPUS / "steps_empty_window.csv", CORPUS / "events_empty_window.csv"])
    assert (ledger.read, ledger.kept) == (0, 0) and balanced(ledger)
    assert tables.steps.empty and tables.events.empty
    assert list(tables.events.columns) == list(EVENT_COLUMNS) and str(tables.events["time"].dtype) == UTC
    demo, _ = R.read_canonical(DATA / "demo-7b-ft_events.csv")
    assert demo.select("no-such-job").events.empty


def test_corpus_unknown_event_kind():
    tables, ledger = R.read_canonical(CORPUS / "events_unknown_kind.csv")
    assert balanced(ledger) and (ledger.kept, ledger.repaired) == (3, 1)
    assert "normalised to 'first_step'" in repaired_rows(ledger)[3].reason
    assert flag_codes(ledger) == ["unknown_event_kind"] and "coffee_break" in ledger.flags[0].message
    assert "coffee_break" in tables.events["kind"].tolist()  # kept


def test_corpus_overlapping_steps():
    tables, ledger = R.read_canonical(CORPUS / "steps_overlap.csv")
    assert balanced(ledger) and ledger.rejected == 1
    assert "overlaps" in rejected_rows(ledger)[3].reason
    assert tables.steps["step"].tolist() == [1, 3]


def test_corpus_bad_values():
    tables, ledger = R.read_canonical(CORPUS / "steps_bad_values.csv")
    assert balanced(ledger) and ledger.read == 9
    bad = rejected_rows(ledger)
    assert set(bad) == {3, 4, 5, 6, 7, 9, 10}
    assert bad[3].field == "step" and "not an integer" in bad[3].reason
    assert bad[4].field == "input_wait_s" and ">= 0" in bad[4].reason
    assert "longer than the step" in bad[5].reason
    assert bad[6].field == "end" and "not an ISO 8601 time" in bad[6].reason
    assert bad[7].field == "job_id"
    assert bad[9].reason == "blank line"
    assert bad[10].field == "attempt"
    assert tables.steps["step"].tolist() == [1, 7]


def test_corpus_unreadable_inputs(tmp_path):
    with pytest.raises(InputError, match="'end'") as err:
        R.read_canonical(CORPUS / "steps_missing_end.csv")
    assert err.value.field == "end"
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="Parquet"):
        R.read_canonical(broken)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="no header"):
        R.read_canonical(empty)
    neither = tmp_path / "neither.csv"
    neither.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="cannot tell"):
        R.read_canonical(neither)


# ---------------------------------------------------------------------------------------------------
# BLOOM-176B case study
# ---------------------------------------------------------------------------------------------------


def test_bloom_event_table():
    tables, ledger = R.read_bloom_events(DATA / "bloom_176b_events.csv")
    events = tables.events
    with open(DATA / "bloom_176b_events.csv", newline="") as f:
        raw = list(csv.DictReader(f))
    day_only = sum(1 for r in raw if not r["time_of_day"])
    assert balanced(ledger) and ledger.read == len(raw) == len(events)
    assert ledger.repaired == day_only and ledger.rejected == 0
    assert all(f.code == "unknown_event_kind" for f in ledger.flags)
    assert len(ledger.flags) == sum(1 for r in raw if r["kind"] in ("config_change", "slowdown",
                                                                     "checkpoint_conversion"))
    # launch 2022-03-11 11:42 PST; the GPU crash 2022-03-21 13:34:34 in Paris (CET, UTC+1)
    assert events.loc[events["kind"] == "gang_complete", "time"].iloc[0] == ts("2022-03-11T19:42:00Z")
    crash = events[(events["kind"] == "failure") & (events["time_precision"] == "second")]
    assert crash["time"].tolist() == [ts("2022-03-21T12:34:34Z")]
    # work lost to failures as the chronicle states it: 7.3 h + 18 h + 6 h + 11 h
    lost = events.loc[events["kind"] == "failure", "lost_work_s"].sum()
    assert lost == pytest.approx((7.3 + 18 + 6 + 11) * 3600)
    # every restore goes back to a checkpoint the table records (no restore_uncommitted flag)
    restores = events[(events["kind"] == "restore") & events["step"].notna()]
    commits = set(events.loc[events["kind"] == "checkpoint_commit", "step"].dropna())
    assert set(restores["step"]) <= commits
    conv = events[events["kind"] == "checkpoint_conversion"]
    assert conv["duration_s"].tolist() == [47 * 60 + 55.47]
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}( .+)?", s) for s in events["source"])
    # attempts count the restarts the chronicle states, in the order it states them
    attempts = [int(r["attempt"]) for r in raw]
    assert attempts == sorted(attempts) and attempts[-1] == 13


def test_bloom_default_path_is_the_bundled_copy():
    a, _ = R.read_bloom_events()
    b, _ = R.read_bloom_events(DATA / "bloom_176b_events.csv")
    pd.testing.assert_frame_equal(a.events, b.events)


# ---------------------------------------------------------------------------------------------------
# Serving replica lifecycle
# ---------------------------------------------------------------------------------------------------


def test_replica_lifecycle_sample():
    tables, ledger = R.read_replica_lifecycle(DATA / "serving_replica_lifecycle.csv")
    phases = tables["phases"]
    assert balanced(ledger) and ledger.read == 19 and ledger.repaired == 1  # r3 still ready at the end
    assert "open at the end of the log" in next(iter(repaired_rows(ledger).values())).reason
    g = replica_runtime_goodput(phases)
    # hand sums of the sample (seconds): placed 41+65+38+40, loading 272+283+157+262, warm-up 49+52+53,
    # ready 12238+4400+4835, draining 90+70
    assert g.terms == {"placed": 184.0, "loading": 974.0, "warmup": 154.0, "ready": 21473.0,
                       "draining": 160.0}
    assert g.held_s == pytest.approx(22945.0) and g.unattributed_s == pytest.approx(0.0)
    assert g.runtime_goodput == pytest.approx(21473.0 / 22945.0)
    r = g.by_replica.set_index("replica_id")
    assert r.loc["llama-70b-r2", "runtime_goodput"] == 0.0  # failed while loading: never ready
    # second method: a replica with no draining is the model's serving goodput (cold start = 355 s)
    expected = model.serving_runtime_goodput(355.0, 5190.0)
    assert r.loc["llama-70b-r3", "runtime_goodput"] == pytest.approx(expected)
    f = g.factor()
    assert f.value == pytest.approx(g.runtime_goodput) and f.losses["unattributed"] == pytest.approx(0.0)


def test_replica_window_clips_and_empty_window_is_not_an_error():
    phases = R.read_replica_lifecycle(DATA / "serving_replica_lifecycle.csv")[0]["phases"]
    g = replica_runtime_goodput(phases, window=(ts("2025-03-20T10:00:00Z"), ts("2025-03-20T10:10:00Z")))
    # only r0 is held in the first ten minutes: placed 41 s, loading 272 s, warm-up 49 s, ready 238 s
    assert g.held_s == pytest.approx(600.0) and g.ready_s == pytest.approx(238.0)
    empty = replica_runtime_goodput(phases, window=(ts("2025-03-21T00:00:00Z"), ts("2025-03-21T01:00:00Z")))
    assert empty.held_s == 0.0 and empty.runtime_goodput is None and empty.by_replica.empty
    with pytest.raises(DomainError, match="no replica was held"):
        empty.factor()
    log = DATA / "serving_replica_lifecycle.csv"
    closed = R.read_replica_lifecycle(log, end=ts("2025-03-20T14:00:00Z"))[0]["phases"]
    assert closed["end"].max() == ts("2025-03-20T14:00:00Z")
    with pytest.raises(DomainError):
        R.read_replica_lifecycle(DATA / "serving_replica_lifecycle.csv", end=ts("2025-03-20T12:00:00Z"))


def test_corpus_replica_phases_going_backwards():
    tables, ledger = R.read_replica_lifecycle(CORPUS / "replica_backwards.csv")
    phases = tables["phases"]
    assert balanced(ledger) and ledger.read == 11
    bad, fixed = rejected_rows(ledger), repaired_rows(ledger)
    assert "only move forward" in bad[5].reason  # loading again after ready
    assert {8, 9, 10} <= set(bad) and "no 'placed' row" in bad[8].reason  # r1 was never placed
    assert "unknown phase" in bad[12].reason
    assert "out of time order" in fixed[6].reason  # the warm-up row listed late
    assert "open at the end of the log" in fixed[11].reason  # r2 never released
    r0 = phases[phases["replica_id"] == "r0"]
    assert r0["phase"].tolist() == ["placed", "loading", "warmup", "ready"]
    assert r0["end"].iloc[-1] == ts("2025-03-20T11:00:00Z")


# ---------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------

_T0 = pd.Timestamp("2025-01-06T08:00:00Z")

lifecycle = st.lists(
    st.tuples(st.lists(st.integers(0, 400), min_size=5, max_size=5), st.integers(0, 3600),
              st.booleans()),
    min_size=1, max_size=4)


def lifecycle_frame(spec):
    rows = []
    t = 0
    for i, (durs, gap, released) in enumerate(spec):
        t += gap
        for phase, d in zip(R.REPLICA_PHASES[:-1], durs, strict=True):
            rows.append((t, f"r{i}", phase))
            t += d
        if released:
            rows.append((t, f"r{i}", "released"))
    return rows


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=lifecycle, cut=st.floats(0.0, 1.0))
def test_replica_partition_adds_up_and_windows_add(tmp_path, spec, cut):
    rows = lifecycle_frame(spec)
    path = tmp_path / "life.csv"
    with open(path, "w") as f:
        f.write("time,replica_id,phase\n")
        for t, rid, ph in rows:
            f.write(f"{(_T0 + pd.Timedelta(seconds=t)).isoformat()},{rid},{ph}\n")
    tables, ledger = R.read_replica_lifecycle(path)
    phases = tables["phases"]
    assert balanced(ledger) and ledger.rejected == 0
    if phases.empty:
        return
    lo, hi = phases["start"].min(), phases["end"].max()
    whole = replica_runtime_goodput(phases, window=(lo, hi + pd.Timedelta(seconds=1)))
    assert sum(whole.terms.values()) + whole.unattributed_s == pytest.approx(whole.held_s)
    assert abs(whole.unattributed_s) < 1e-6
    assert whole.held_s == pytest.approx(phases["duration_s"].sum())
    if whole.runtime_goodput is not None:
        assert 0.0 <= whole.runtime_goodput <= 1.0
    mid = lo + (hi - lo) * cut
    if lo < mid < hi:
        a = replica_runtime_goodput(phases, window=(lo, mid))
        b = replica_runtime_goodput(phases, window=(mid, hi + pd.Timedelta(seconds=1)))
        assert a.held_s + b.held_s == pytest.approx(whole.held_s)
        for k in whole.terms:
            assert a.terms[k] + b.terms[k] == pytest.approx(whole.terms[k])


step_rows = st.lists(st.tuples(st.integers(0, 30), st.integers(1, 60), st.integers(0, 3),
                               st.sampled_from(["ok", "dup", "swap", "neg_wait", "blank"])),
                     min_size=0, max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=step_rows, shuffle_seed=st.integers(0, 10_000))
def test_generic_reader_never_loses_a_row(tmp_path, rows, shuffle_seed):
    lines = []
    t = 0
    for step, dur, att, how in rows:
        start, end = _T0 + pd.Timedelta(seconds=t), _T0 + pd.Timedelta(seconds=t + dur)
        t += dur
        if how == "swap":
            start, end = end, start
        wait = "-1" if how == "neg_wait" else f"{dur / 10:g}"
        line = f"job,{att},{step},{start.isoformat()},{end.isoformat()},{wait}"
        lines.append("" if how == "blank" else line)
        if how == "dup":
            lines.append(line)
    order = np.random.default_rng(shuffle_seed).permutation(len(lines))
    path = tmp_path / "steps.csv"
    path.write_text("job_id,attempt,step,start,end,input_wait_s\n" + "".join(lines[i] + "\n" for i in order))
    tables, ledger = R.read_canonical(path)
    assert balanced(ledger)
    assert ledger.read == len(lines)
    assert len(tables.steps) == ledger.read - ledger.rejected
    s = tables.steps
    assert (s["end"] > s["start"]).all() and (s["input_wait_s"] >= 0).all()
    ordered = s.sort_values("start")
    assert (ordered["start"].iloc[1:].to_numpy() >= ordered["end"].iloc[:-1].to_numpy()).all()  # no overlap
    expected_bad = sum(1 for *_, how in rows if how in ("swap", "neg_wait", "blank")) + \
        sum(1 for *_, how in rows if how == "dup")
    assert ledger.rejected == expected_bad


mlperf_spans = st.lists(st.tuples(st.integers(1, 500_000), st.integers(0, 60_000), st.integers(0, 5_000)),
                        min_size=1, max_size=8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(init_ms=st.integers(1, 600_000), spans=mlperf_spans)
def test_mlperf_partition_of_a_synthetic_log(tmp_path, init_ms, spans):
    def rec(t, et, key, **meta):
        return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": et, "key": key,
                                         "value": None, "metadata": meta})
    t = 1_700_000_000_000
    lines = [rec(t, "INTERVAL_START", "init_start"), rec(t + init_ms, "INTERVAL_END", "init_stop"),
             rec(t + init_ms, "INTERVAL_START", "run_start")]
    t += init_ms
    for i, (block, ev, gap) in enumerate(spans):
        lines += [rec(t, "INTERVAL_START", "block_start", samples_count=i),
                  rec(t + block, "INTERVAL_END", "block_stop", samples_count=i + 1)]
        t += block
        if ev:
            lines += [rec(t, "INTERVAL_START", "eval_start", samples_count=i + 1),
                      rec(t + ev, "INTERVAL_END", "eval_stop", samples_count=i + 1)]
            t += ev
        t += gap
    lines.append(rec(t, "INTERVAL_END", "run_stop", status="success"))
    path = tmp_path / "result_0.txt"
    path.write_text("\n".join(lines) + "\n")
    s = commands.mlperf_summary(path)
    assert s["startup_s"] == pytest.approx(init_ms / 1000)
    assert s["productive_s"] == pytest.approx(sum(b for b, _, _ in spans) / 1000)
    assert s["evaluation_s"] == pytest.approx(sum(e for _, e, _ in spans) / 1000)
    assert s["unattributed_s"] == pytest.approx(sum(g for _, _, g in spans) / 1000, abs=1e-6)
    parts = s["startup_s"] + s["productive_s"] + s["evaluation_s"] + s["unattributed_s"]
    assert parts == pytest.approx(s["held_s"])
    assert 0.0 < s["runtime_goodput"] <= 1.0
    assert math.isclose(s["runtime_goodput"], s["productive_s"] / s["held_s"])
