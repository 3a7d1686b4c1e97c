"""Broken and hostile input, by class and rung (tests/corpus/hostile, written by its make_corpus.py).

Each file ends in one :class:`~fleetlib.InputError` whose text is asserted exactly, or in ledger
entries whose rows and reasons are asserted exactly -- and the rest of the file is still read.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib import cli
from fleetlib._io import (
    Limits,
    allowed_roots,
    confined,
    current_limits,
    excerpt,
    json_depth_rows,
    load_json,
    load_yaml,
    out_of_range_int,
    parse_limit,
    using_limits,
)
from fleetlib.program import READERS as PROGRAM
from fleetlib.program import load_model_config, read_trace
from fleetlib.quality import DomainError, InputError
from fleetlib.runtime.commands import mlperf_summary
from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.readers import READERS as RUNTIME
from fleetlib.scenario import load_parameters
from fleetlib.scheduling.readers import READERS as SCHEDULING
from fleetlib.scheduling.readers.slurm import expand_hostlist

ROOT = Path(__file__).resolve().parents[2]
H = Path("tests/corpus/hostile")
SLURM_SAMPLE = "data/scheduler/slurm_sample/sacct.txt"

DEPTH = "nested more than 64 deep (limit max_depth; raise it with --limit max_depth=N)"
LAUGHS = ("YAML expands to more than 1,000,000 nodes once its aliases are expanded (limit max_yaml_nodes; "
          "raise it with --limit max_yaml_nodes=N)")
PLAUSIBLE = "outside the plausible range [2000-01-01, 2100-01-01) UTC (limits earliest_year, latest_year)"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def entries(ledger, action="rejected"):
    return [(e.row, e.field, e.reason) for e in ledger.entries if e.action == action]


def refused(call, message):
    with pytest.raises(InputError) as info:
        call()
    assert str(info.value) == message
    return info.value


# ------------------------------------------------------------------------------------------------
# Scheduling
# ------------------------------------------------------------------------------------------------


def test_a_hostlist_bomb_is_counted_not_expanded_and_only_its_row_is_rejected():
    started = time.perf_counter()
    _, ledger = SCHEDULING["slurm"].read([SLURM_SAMPLE, H / "scheduling/sinfo_hostlist_bomb.txt"], tz="UTC")
    assert time.perf_counter() - started < 20
    bomb = [e for e in ledger.entries if e.file.endswith("sinfo_hostlist_bomb.txt")]
    assert [(e.action, e.row, e.field, e.reason) for e in bomb] == [(
        "rejected", 2, "NODELIST",
        "hostlist 'gpu-a[0000000000-9999999999]' expands to 10,000,000,000 node names, more than the "
        "1,000,000 allowed (limit max_node_names; raise it with --limit max_node_names=N)")]
    assert ledger.balanced()


def test_hostlist_size_is_counted_exactly_and_the_limit_can_be_raised():
    names = [f"r{r}n{n:02d}" for r in (1, 2, 3) for n in (1, 2, 3, 4)] + ["x"]
    assert expand_hostlist("r[1-3]n[01-04],x") == names
    with pytest.raises(ValueError, match="expands to 13 node names, more than the 12 allowed"):
        expand_hostlist("r[1-3]n[01-04],x", max_names=12)
    with using_limits(max_node_names=13):
        assert len(expand_hostlist("r[1-3]n[01-04],x")) == 13
    with pytest.raises(ValueError, match="range '5-1' runs backwards"):
        expand_hostlist("a[5-1]")


def test_kueue_billion_laughs_and_deep_json_are_one_line_each():
    refused(lambda: SCHEDULING["kueue"].read([H / "scheduling/kueue_billion_laughs.yaml"]),
            f"file {H}/scheduling/kueue_billion_laughs.yaml, row 7: {LAUGHS}")
    refused(lambda: SCHEDULING["kueue"].read([H / "scheduling/kueue_deep.json"]),
            f"file {H}/scheduling/kueue_deep.json, row 1: JSON {DEPTH}")


def test_kueue_finished_before_admitted_is_out_of_order_not_still_holding():
    tables, ledger = SCHEDULING["kueue"].read([H / "scheduling/kueue_finished_before_admitted.yaml"])
    assert entries(ledger) == [(2, None, "Finished:Succeeded at 2024-05-06 08:30:00+00:00 is stamped before "
                                         "Admitted at 2024-05-06 09:00:00+00:00: conditions out of order, "
                                         "the hold cannot be timed")]
    assert entries(ledger, "repaired") == []  # no "still holding ... release censored"
    assert (ledger.read, ledger.kept) == (2, 1)
    assert len(tables["allocations"]) == 1


def test_volcano_hostile_lines_are_rejected_and_the_good_line_kept():
    tables, ledger = SCHEDULING["volcano"].read([H / "scheduling/volcano_hostile_lines.jsonl"])
    assert entries(ledger) == [
        (2, None, f"JSON {DEPTH}"),
        (3, None, "NaN is not a number JSON allows; expected a finite number"),
        (4, None, "number '1e400' is beyond the range of a float; expected a finite number"),
    ]
    assert ledger.read == 4 and ledger.balanced()
    assert len(tables["allocations"]) == 1


LONE = "holds a lone surrogate escape ({}): half of a UTF-16 pair, which is no character; expected text of " \
       "whole characters"


def test_a_lone_surrogate_in_volcano_lines_rejects_those_lines_and_a_pair_is_one_character():
    tables, ledger = SCHEDULING["volcano"].read([H / "scheduling/volcano_lone_surrogate.jsonl"])
    assert entries(ledger) == [
        (2, None, "the text of object.metadata.name, 'pg-\\ud800', " + LONE.format("\\ud800")),
        (3, None, "the key object.spec.qu\\udfffeue " + LONE.format("\\udfff")),
    ]
    assert ledger.read == 4 and ledger.balanced()
    assert sorted(tables["allocations"]["job_id"]) == ["ml/pg-a", "ml/pg-\U0001f600"]


def test_a_lone_surrogate_in_kueue_yaml_or_a_philly_log_is_one_line_naming_its_line_and_field():
    f = f"{H}/scheduling/kueue_lone_surrogate.yaml"
    refused(lambda: SCHEDULING["kueue"].read([H / "scheduling/kueue_lone_surrogate.yaml"]),
            f"file {f}, row 29, field 'metadata.name': the text of metadata.name, 'wl-\\udc00', "
            + LONE.format("\\udc00"))
    f = f"{H}/scheduling/philly_lone_surrogate.json"
    refused(lambda: SCHEDULING["philly"].read([H / "scheduling/philly_lone_surrogate.json"]),
            f"file {f}, field '[1].jobid': the text of [1].jobid, 'job_\\ud800', "
            + LONE.format("\\ud800") + " (line 3)")
    refused(lambda: SCHEDULING["philly"].read([H / "scheduling/philly_deep.json"]),  # was a RecursionError
            f"file {H}/scheduling/philly_deep.json: JSON nested more than 64 deep at line 3 "
            "(limit max_depth; raise it with --limit max_depth=N)")


def test_kueue_fields_of_the_wrong_shape_reject_their_workload_and_keep_the_rest():
    tables, ledger = SCHEDULING["kueue"].read([H / "scheduling/kueue_wrong_shapes.yaml"])
    assert entries(ledger) == [
        (2, "spec.podSets", "spec.podSets is dict '{'count': 2, 'template': {'spec': {'cont...' "
                            "(119 characters); expected a list of mappings"),
        (3, "spec.podSets[0].template.spec.containers[0].resources",
         "spec.podSets[0].template.spec.containers[0].resources is list '['gpu']'; expected a mapping"),
        (4, "status.conditions",
         "status.conditions is dict '{'type': 'Admitted'}'; expected a list of mappings"),
    ]
    assert (ledger.read, ledger.kept) == (4, 1) and ledger.balanced() and len(tables["allocations"]) == 1


def test_slurm_node_events_that_are_all_still_open_are_read():
    sample = ROOT / "data/scheduler/slurm_sample"
    tables, ledger = SCHEDULING["slurm"].read(
        [sample / "sacct.txt", H / "scheduling/sacctmgr_open_event_only.txt", sample / "sinfo_nodes.txt"],
        tz="UTC")
    assert len(tables["capacity"]) > 0
    assert ledger.balanced()
    events = [(e.action, e.row, e.field, e.reason) for e in ledger.entries
              if e.file.endswith("sacctmgr_open_event_only.txt")]
    # the one event is read, open to the window's end (it was a TypeError: all its end times NaT)
    assert events == [("repaired", 2, "TimeEnd", "event still open: out of service until the window end")]


def test_slurm_out_of_range_times_a_ran_job_without_start_and_elapsed_disagreeing():
    tables, ledger = SCHEDULING["slurm"].read([H / "scheduling/slurm_out_of_range.txt"], tz="UTC")
    assert entries(ledger) == [
        (3, "Start", f"time '2150-03-04T00:01:00' is {PLAUSIBLE}"),
        (4, "Start", "state COMPLETED says the job ran, but it has no Start time"),
    ]
    flags = [(f.code, f.row, f.field, f.message) for f in ledger.flags]
    message = "Elapsed 05:00:00 is 14400 s off End - Start 3600 s: the times are used, Elapsed is not"
    assert flags == [("elapsed_disagrees", 5, "Elapsed", message)]
    alloc = tables["allocations"]
    assert len(alloc) == 2 and (alloc["release"] - alloc["first_assigned"]).max() == pd.Timedelta(hours=1)
    assert ledger.balanced()


def test_the_plausible_range_is_configurable():
    with using_limits(latest_year=2200):
        _, ledger = SCHEDULING["slurm"].read([H / "scheduling/slurm_out_of_range.txt"], tz="UTC")
    assert [r for r, *_ in entries(ledger)] == [4]


# ------------------------------------------------------------------------------------------------
# Runtime
# ------------------------------------------------------------------------------------------------


def test_mlgoodput_bad_lines_are_rejected_with_true_reasons():
    _, ledger = RUNTIME["mlgoodput"].read([H / "runtime/mlgoodput_hostile_timeline.jsonl"])
    assert entries(ledger) == [
        (2, "step_start_time", "step_start_time 1e+20 (POSIX seconds) is beyond the years a time can hold "
                               "(about 2262); expected seconds since 1970"),
        (3, "step", "step 99999999999999999999 is beyond the int64 range (it would wrap)"),
        (4, "step_start_time", "Infinity is not a number JSON allows; expected a finite number"),
        (5, None, f"JSON {DEPTH}"),
    ]
    assert (ledger.read, ledger.kept) == (6, 2)


def test_a_lone_surrogate_in_mlgoodput_or_torchtitan_lines_rejects_those_lines():
    _, ledger = RUNTIME["mlgoodput"].read([H / "runtime/mlgoodput_lone_surrogate_timeline.jsonl"])
    assert entries(ledger) == [
        (3, "job_name", "the text of job_name, 'demo\\udbff', " + LONE.format("\\udbff")),
        (4, "step_st\\ud800art_time", "the key step_st\\ud800art_time " + LONE.format("\\ud800")),
    ]
    assert (ledger.read, ledger.kept) == (6, 4)  # line 5's escaped pair is one character: kept
    titan = H / "runtime/training.global_rank_0.20260302-100000-HOSTIL.jsonl"
    _, ledger = RUNTIME["torchtitan"].read([titan])
    assert entries(ledger) == [
        (2, None, f"JSON {DEPTH}"),  # was a RecursionError
        (3, None, "the key delta\\udc80_ms " + LONE.format("\\udc80")),
    ]
    assert ledger.balanced()


def test_a_runtime_file_with_every_line_rejected_names_the_first_rejection(tmp_path, capsys):
    f = tmp_path / "all_bad_timeline.jsonl"
    f.write_text('{"job_name": "x\\ud800", "job_start_time": 1741078800.0}\n')
    assert cli.main(["runtime", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"fleetlib runtime: error: file {f}: no mlgoodput record could be read (rows read 1, rejected 1); "
        "the first rejected: row 1: the text of job_name, 'x\\ud800', " + LONE.format("\\ud800") + "\n")


def test_canonical_steps_never_wrap_and_never_become_1970():
    tables, ledger = RUNTIME["canonical"].read([H / "runtime/steps_out_of_range.csv"])
    assert entries(ledger) == [
        (3, "step", "step '99999999999999999999' is beyond the int64 range (it would wrap)"),
        (4, "start", f"start '1900-01-01T00:00:00Z' is {PLAUSIBLE}"),
        (5, "end", f"end '-0001-03-20T10:00:00Z' is {PLAUSIBLE}"),
        (6, "input_wait_s", "input_wait_s 'inf' is not a finite number"),
    ]
    steps = tables["steps"]
    assert steps["step"].tolist() == [0]
    assert steps["start"].min() >= pd.Timestamp("2000-01-01", tz="UTC")


def test_structure_errors_name_the_files_own_line_not_a_table_position():
    overlap = H / "runtime/attempts_overlap_timeline.csv"
    tables, _ = RUNTIME["canonical"].read([overlap])
    with pytest.raises(InputError) as err:
        runtime_goodput(tables["steps"], tables["events"], source=str(overlap))
    # line 5 of the file (was "row 2 of <source> (events)", the event's 0-based position)
    assert str(err.value) == (f"file {overlap}, row 5, field 'time': attempt 1 of job 'j' becomes complete "
                              "before attempt 0 is released: attempts of one job must not overlap")
    outside = H / "runtime/step_outside_held_timeline.csv"
    tables, _ = RUNTIME["canonical"].read([outside])
    with pytest.raises(InputError) as err:
        runtime_goodput(tables["steps"], tables["events"], source=str(outside))
    assert (err.value.file, err.value.row, err.value.field) == (str(outside), 5, "start")
    assert err.value.message == ("step 1 of attempt 0 lies outside the attempt's held interval "
                                 "(gang_complete -> release)")


def test_a_duration_longer_than_the_timeline_is_flagged_with_its_line_and_charges_nothing_beyond_held():
    path = H / "runtime/duration_longer_than_timeline.csv"
    tables, _ = RUNTIME["canonical"].read([path])
    result = runtime_goodput(tables["steps"], tables["events"], source=str(path))
    flags = [f for f in result.ledger.flags if f.code == "duration_exceeds_timeline"]
    assert len(flags) == 1 and (flags[0].file, flags[0].row, flags[0].field) == (str(path), 4, "duration_s")
    assert f"duration_s '1000000000.0' at row 4 of {path}" in flags[0].message
    assert "span 180 s" in flags[0].message
    # the pause the duration opens ends at the commit 10 s later; held time is the 180 s logged
    assert result.held_s == pytest.approx(180.0)
    assert result.breakdown["checkpoint"] == pytest.approx(10.0)


def test_cli_a_structure_error_is_one_line_with_the_files_line(capsys):
    path = H / "runtime/attempts_overlap_timeline.csv"
    assert cli.main(["runtime", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"file {path}, row 5, field 'time'" in err and "Traceback" not in err


def test_a_refusal_names_the_rejections_that_caused_it_since_no_ledger_is_printed(tmp_path):
    source = ROOT / "data/timelines/asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt"
    lines = source.read_text().splitlines()
    stop = next(i for i, line in enumerate(lines) if '"run_stop"' in line)
    lines[stop] = lines[stop].replace('"time_ms": 1715850093688', '"time_ms": 1e400')
    log = tmp_path / "result_0.txt"
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as err:
        mlperf_summary(log)
    message = str(err.value)
    assert ("found 1 and 0 (2 row(s) rejected, first: row 21: run_start with no matching run_stop after it: "
            "interval not counted; row 52: invalid JSON after :::MLLOG (number '1e400' is beyond") in message
    assert message.startswith(f"file {log}, field 'key': held time needs exactly one kept init_start")


def test_no_message_reason_or_flag_carries_more_than_a_glimpse_of_a_huge_field(tmp_path):
    from fleetlib.quality import MESSAGE_LIMIT

    huge = "x" * 200_000
    events = tmp_path / "events.csv"
    events.write_text("job_id,attempt,time,kind\n"
                      "j,0,2025-02-10T14:00:00Z,gang_complete\n"
                      f"j,0,2025-02-10T14:01:00Z,{huge}\n"
                      "j,0,2025-02-10T14:02:00Z,release\n")
    _, ledger = RUNTIME["canonical"].read([events])
    texts = [f.message for f in ledger.flags] + [e.reason for e in ledger.entries]
    assert texts and max(len(t) for t in texts) <= MESSAGE_LIMIT + 60
    assert any("characters cut" in t or "characters)" in t for t in texts)
    err = InputError(f"value {huge} is not a number; expected seconds", file="f.csv", row=3, field="t")
    assert len(err.message) <= MESSAGE_LIMIT + 60 and err.message.endswith("expected seconds")
    assert f"[... {200_040 - 400 - 100:,} characters cut ...]" in err.message  # the cut is counted


def test_a_gzip_bomb_stops_at_the_byte_limit_with_bounded_memory():
    tracemalloc.start()
    try:
        with using_limits(max_bytes=1_000_000):
            refused(lambda: RUNTIME["canonical"].read([H / "runtime/gzip_bomb_steps.csv.gz"]),
                    f"file {H}/runtime/gzip_bomb_steps.csv.gz, field 'gzip': decompresses to more than the "
                    "1,000,000-byte input limit (max_bytes; raise it with --limit max_bytes=N)")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20  # the 16 MiB it inflates to is never held


# ------------------------------------------------------------------------------------------------
# Program: rank timers, traces, model configurations
# ------------------------------------------------------------------------------------------------


def test_a_rank_beyond_int64_is_refused_not_wrapped():
    refused(lambda: PROGRAM["rank_timers"].read([H / "program/rank_timers_rank_beyond_int64.csv"]),
            f"file {H}/program/rank_timers_rank_beyond_int64.csv, row 3, field 'rank': must be >= 0 and at "
            "most 16777215; got '1e+20'")


def test_a_trace_nested_too_deep_is_one_line():
    refused(lambda: PROGRAM["kineto"].read([H / "program/trace_deep.json"]),
            f"file {H}/program/trace_deep.json, field 'json': JSON nested too deep to decode (a trace event "
            "is a few levels deep); expected a Chrome-trace JSON object or array")


def test_a_billion_laughs_model_configuration_is_refused_before_anything_expands_it():
    refused(lambda: load_model_config(H / "program/model_billion_laughs.yaml"),
            f"file {H}/program/model_billion_laughs.yaml, row 7: {LAUGHS}")


# ------------------------------------------------------------------------------------------------
# Scenario files: confinement, encoding, nesting
# ------------------------------------------------------------------------------------------------

OUTSIDE = ("lies outside the project root {root} (paths here are relative to it, and only paths inside it "
           "are read, unless --allow-path names another folder)")


@pytest.mark.parametrize(("name", "written"), [("outside_absolute", "/etc/passwd"),
                                                ("outside_dotdot", "../../../../../../../etc/passwd")])
def test_a_scenario_path_outside_the_project_is_refused(name, written):
    refused(lambda: load_parameters(H / f"scenario/{name}.yaml"),
            f"file {H}/scenario/{name}.yaml, field 'traces_files': path '{written}' "
            + OUTSIDE.format(root=ROOT))


def test_an_explicit_allow_list_opens_a_folder_and_only_that_folder(tmp_path):
    with using_limits(allow=["/etc"]):
        assert load_parameters(H / "scenario/outside_absolute.yaml")["traces_files"] == ["/etc/passwd"]
        assert allowed_roots() == (Path("/etc").resolve(),)
        with pytest.raises(InputError, match="lies outside"):
            confined(tmp_path, "/usr/bin/env")
    assert allowed_roots() == ()


def test_invalid_utf8_deep_and_laughing_scenarios_are_one_line_each():
    refused(lambda: load_parameters(H / "scenario/invalid_utf8.yaml"),
            f"file {H}/scenario/invalid_utf8.yaml, row 2: cannot read the scenario file (byte 0xe9 at offset "
            "34 is not UTF-8 text; expected UTF-8, optionally gzipped)")
    refused(lambda: load_parameters(H / "scenario/deep.yaml"),
            f"file {H}/scenario/deep.yaml, row 1: YAML {DEPTH}")
    refused(lambda: load_parameters(H / "scenario/billion_laughs.yaml"),
            f"file {H}/scenario/billion_laughs.yaml, row 7: {LAUGHS}")
    refused(lambda: load_parameters(H / "scenario/lone_surrogate.yaml"),
            f"file {H}/scenario/lone_surrogate.yaml, row 2, field 'note': the text of note, 'caf\\udce9', "
            + LONE.format("\\udce9"))


def test_a_device_is_never_read_as_a_scenario():
    refused(lambda: load_parameters("/dev/zero"),
            "file /dev/zero: cannot read the scenario file (is not a regular file (a device, pipe or socket "
            "is never read))")


# ------------------------------------------------------------------------------------------------
# The command line: one line, exit 2, nothing of the file beyond the offending field
# ------------------------------------------------------------------------------------------------


def test_cli_report_on_an_outside_path_is_one_line_without_the_files_contents(capsys, tmp_path):
    code = cli.main(["report", "--params", str(H / "scenario/outside_absolute.yaml"),
                     "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("fleetlib report: error: file ")
    assert "root:" not in err and "/bin/" not in err  # no line of /etc/passwd


def test_cli_limit_option_changes_the_limit_for_one_command(capsys):
    import json

    args = ["scheduling", "--format", "slurm", "--tz", "UTC", str(H / "scheduling/slurm_out_of_range.txt"),
            "data/scheduler/slurm_sample/sinfo_nodes.txt", "--json"]
    rejected = []
    for extra in ([], ["--limit", "latest_year=2200"]):
        assert cli.main([*extra, *args]) == 0
        ledger = json.loads(capsys.readouterr().out)["ledger"]
        rejected.append([e["row"] for e in ledger["entries"]
                         if e["action"] == "rejected" and e["file"].endswith("slurm_out_of_range.txt")])
    assert rejected == [[3, 4], [4]]
    assert current_limits() == Limits()  # back to the defaults after the command
    args = ["--limit", "max_nodes=1", "mpg", "--scheduling", "1", "--runtime", "1", "--program", "1"]
    assert cli.main(args) == 2
    assert "--limit expects NAME=VALUE with NAME one of max_bytes" in capsys.readouterr().err


def test_cli_a_hostile_kueue_file_is_one_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "fleetlib", "scheduling", "--format", "kueue",
                           str(H / "scheduling/kueue_billion_laughs.yaml")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == ("fleetlib scheduling: error: file "
                           f"{H}/scheduling/kueue_billion_laughs.yaml, row 7: {LAUGHS}\n")


# ------------------------------------------------------------------------------------------------
# The shared defences themselves (fleetlib._io)
# ------------------------------------------------------------------------------------------------


def test_whole_text_check_refuses_lone_halves_only():
    pair_and_backslash = '{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}'
    assert load_json(pair_and_backslash, file="f") == {"a": "\U0001f600", "b": "\\ud800"}
    assert load_yaml('a: "\\U0001F600"\n', file="f") == {"a": "\U0001f600"}
    with pytest.raises(InputError) as info:  # the document starts on line 10 of its file
        load_json('{\n "a": [1,\n  {"k": "x\\udfff"}]}', file="f", row=10)
    assert (info.value.row, info.value.field) == (12, "a[1].k")
    with pytest.raises(InputError) as info:  # a high half followed by a second high half: both lone
        load_yaml('n: 1\nb: "\\ud800\\ud800"\n', file="f")
    assert (info.value.row, info.value.field) == (2, "b")
    with pytest.raises(InputError) as info:
        load_yaml('c: "\\U0000DC00"\n', file="f")
    assert "(\\U0000DC00)" in str(info.value)
    with pytest.raises(InputError) as info:  # YAML does not pair \u escapes as JSON does
        load_yaml('d: "\\ud83d\\ude00"\n', file="f")
    assert "YAML reads as two lone surrogates" in str(info.value) and info.value.field == "d"
    from fleetlib.report.own_fleet import parse_overrides

    with pytest.raises(InputError) as info:  # report -p values, typed as YAML
        parse_overrides(['name=["ok", "x\\udc00"]'])
    assert str(info.value).startswith("-p name: the text of [1], 'x\\udc00', holds a lone surrogate escape")


def test_contract_fields_from_a_trace_or_log_with_lone_surrogates_or_deep_nesting(tmp_path):
    from fleetlib.contract import _kineto_fields, _mlperf_fields

    trace = tmp_path / "t.json"
    trace.write_text('{"deviceProperties": [{"name": "H100\\ud800", "computeMajor": 9, "computeMinor": 0}]}')
    assert _kineto_fields(trace) == {"architecture": ["H100\ufffd (sm_90)"]}  # as the trace reader repairs it
    trace.write_text("[" * 5_000 + "]" * 5_000)  # was a RecursionError
    refused(lambda: _kineto_fields(trace), f"file {trace}, row 1: JSON {DEPTH}")
    log = tmp_path / "result.txt"
    log.write_text(':::MLLOG {"key": "submission_platform", "value": "x\\ud800"}\n'
                   ':::MLLOG {"key": "submission_platform", "value": "8xH100"}\n')
    assert _mlperf_fields(log) == {"architecture": "8xH100"}  # the line the MLPerf reader rejects: skipped


def test_json_depth_scan_ignores_brackets_in_strings_and_resets_per_line():
    deep = "[" * 70 + "]" * 70
    assert json_depth_rows('{"a": "' + "[" * 100 + '"}').tolist() == []
    assert json_depth_rows('{"a": "\\"' + "[" * 100 + '"}').tolist() == []  # an escaped quote stays inside
    assert json_depth_rows(f"[1]\n{deep}\n[[2]]\n{deep[:80]}\n[3]", per_line=True).tolist() == [2, 4]
    assert json_depth_rows(deep, 70).tolist() == [] and json_depth_rows(deep, 69).tolist() == [1]
    assert load_json('{"a": [1, 2.5]}', file="x") == {"a": [1, 2.5]}


def test_json_depth_scan_of_a_large_document_stays_within_a_memory_bound():
    job = json.dumps({"jobid": "application_1_1", "attempts": [{"detail": [{"ip": "m1", "gpus": ["gpu0"]}],
                                                                "start_time": "2017-10-07 01:12:09"}]})
    lines = 200_000
    text = "\n".join([job] * (lines - 1) + ["[" * 70 + "]" * 70])  # ~24 MB; the last line too deep
    as_array = "[" + text.replace("\n", ",\n") + "]"
    json_depth_rows("[1]")  # the compiled scan loaded before measuring
    tracemalloc.start()
    try:
        per_line = json_depth_rows(text, 69, per_line=True)
        whole = json_depth_rows(as_array, 69)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert per_line.tolist() == [lines] and whole.tolist() == [lines]
    assert peak < 8 * 2**20 < len(text) / 3  # the vectorised scan held ~55 bytes per byte: ~1.3 GB here


def test_yaml_loader_is_safe_and_counts_aliases_where_they_are_used():
    assert load_yaml("a: &x [1, 2]\nb: *x\n", file="y") == {"a": [1, 2], "b": [1, 2]}
    with pytest.raises(InputError, match="could not determine a constructor"):
        load_yaml("a: !!python/object/apply:os.system [echo]\n", file="y")
    with using_limits(max_yaml_nodes=6):  # 1 mapping + 2 keys + list a (3 nodes) + b expanded (3)
        with pytest.raises(InputError, match="more than 6 nodes"):
            load_yaml("a: &x [1, 2]\nb: *x\n", file="y")
    with using_limits(max_yaml_nodes=9):
        assert load_yaml("a: &x [1, 2]\nb: *x\n", file="y")["b"] == [1, 2]


def test_int64_range_and_excerpts():
    values = pd.Series(["1", "9223372036854775807", "9223372036854775808", "-99999999999999999999", "x",
                        None], dtype=object)
    assert out_of_range_int(values).tolist() == [False, False, True, True, False, False]
    assert out_of_range_int(np.array([1e19, 1e18, np.inf])).tolist() == [True, False, False]
    assert excerpt("a\x00b") == "'a\\x00b'"
    # 40 characters shown: three lines of 11 and 7 more
    assert excerpt("root:x:0:0\n" * 10) == ("'root:x:0:0\\nroot:x:0:0\\nroot:x:0:0\\nroot:x:...' "
                                            "(110 characters)")


def test_limits_are_checked_and_parsed():
    assert parse_limit("max_bytes=4e9") == ("max_bytes", 4_000_000_000)
    assert parse_limit("max-depth=200") == ("max_depth", 200)
    for bad in ("max_depth", "max_depth=0", "max_depth=1.5", "nope=3"):
        with pytest.raises(DomainError):
            parse_limit(bad)
    with pytest.raises(DomainError, match="latest_year"):
        Limits(earliest_year=2100, latest_year=2000)
    with pytest.raises(DomainError, match="the span a nanosecond time holds"):
        Limits(latest_year=3000)


def test_cli_never_prints_a_non_finite_result(capsys):
    """A result holding inf (sums that overflowed) is refused, in text and JSON alike, before printing."""
    result = {"factors": {"scheduling": 0.5}, "cost": [1.0, float("inf")]}
    for as_json in (False, True):
        with pytest.raises(DomainError) as info:
            cli._emit(result, as_json, lambda r: "text")
        assert str(info.value) == ("the result's cost[1] is not a finite number (input values whose sums "
                                   "overflow a float?); nothing is printed")
        assert capsys.readouterr().out == ""


# --- hostile text and counts in Kineto traces (each was a traceback from read_trace) -------------------

NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def _kineto(name):
    tr = read_trace(H / f"program/{name}", cache=False)
    led = tr.ledger
    assert led.balanced() and led.read == 6, (led.read, led.kept, led.repaired, led.rejected)
    return tr, led


def test_a_json_array_or_object_as_text_is_a_rejected_or_repaired_row_not_a_type_error():
    tr, led = _kineto("trace_nested_text.json")
    assert entries(led) == [(2, "ph", """'ph' is a JSON array, not text: '["X"]'"""),
                            (3, "cat", """'cat' is a JSON object, not text: '{"kind": "kernel"}'""")]
    absent = "; read as absent"
    assert entries(led, "repaired") == [
        (4, "Collective name,dtype,Process Group Name",
         """'Collective name' is a JSON array, not text: '["allreduce"]'""" + absent
         + """; 'dtype' is a JSON array, not text: '["Float"]'""" + absent
         + """; 'Process Group Name' is a JSON object, not text: '{"id": 0}'""" + absent),
        (5, "name", """'name' is a JSON array, not text: '["cudaLaunchKernel"]'""" + absent)]
    # the repaired kernel is kept: its collective then comes from its name, its group and bytes unknown
    k = tr.kernels
    assert k["name"].astype(str).tolist() == [NCCL_KERNEL, "gemm_c"]
    assert k["collective"].astype(str).tolist() == ["allreduce", "none"]
    assert k["collective_source"].astype(str).tolist() == ["name", "none"]
    assert k["process_group"].astype(str).tolist() == ["", ""] and k["bytes"].isna().all()
    # the rejected events are not counted as unused phases or categories
    assert (led.kept, led.repaired, led.rejected) == (2, 2, 2) and led.unused == {}


def test_a_negative_element_count_leaves_the_message_size_unknown_named_in_the_ledger():
    tr, led = _kineto("trace_negative_nelems.json")
    assert entries(led) == []
    assert entries(led, "repaired") == [
        (2, "In msg nelems", "negative element count '-4': message bytes unknown (read as absent)"),
        (5, "In msg nelems", "negative element count '-1024': message bytes unknown (read as absent)")]
    k = tr.kernels
    assert k["collective"].astype(str).tolist() == ["allreduce"] * 3
    assert k["collective_source"].astype(str).tolist() == ["host_annotation", "args", "args"]
    assert k["bytes"].tolist()[:2] == [pd.NA, pd.NA] and k["bytes"].iloc[2] == 256 * 4  # Float: 4 bytes
    assert "unknown_dtype" not in led.codes()  # the dtype is known; the count is what was wrong


def test_a_lone_surrogate_in_a_phase_or_category_is_replaced_where_the_ledger_counts_it():
    tr, led = _kineto("trace_lone_surrogate_kinds.json")
    lone = "lone surrogate escape (\\uD800-\\uDFFF without its pair: not text) replaced by U+FFFD"
    assert entries(led, "repaired") == [(2, "cat", lone)]
    assert led.unused == {"phase X\ufffd": 2}  # two phases that differ only in the replaced escape
    assert tr.metadata["events_by_category"]["kern\ufffdel"] == 1
    assert any("'kern\ufffdel'" in f.message for f in led.flags if f.code == "unknown_category")
    json.dumps(led.to_dict(), ensure_ascii=False).encode("utf-8")  # nothing left that UTF-8 cannot hold
    json.dumps(tr.metadata, ensure_ascii=False).encode("utf-8")


def test_an_element_count_that_is_no_whole_number_leaves_the_message_size_unknown_named():
    tr, led = _kineto("trace_odd_nelems.json")
    unknown = "message bytes unknown (read as absent)"
    assert entries(led) == []
    assert entries(led, "repaired") == [
        (2, "In msg nelems", f"not a whole number of elements ('many'): {unknown}"),
        (3, "In msg nelems", "numeric text converted to a number"),
        (4, "In msg nelems", f"not a whole number of elements ('true'): {unknown}"),
        (5, "In msg nelems", f"not a whole number of elements ('1.5'): {unknown}")]
    k = tr.kernels
    assert k["bytes"].tolist() == [pd.NA, 256 * 4, pd.NA, pd.NA, 64 * 4]  # Float: 4 bytes
    assert "unknown_dtype" not in led.codes()  # the dtype is known; the count is what was wrong


def test_a_lone_surrogate_escape_is_replaced_by_u_fffd_and_named_not_a_unicode_error():
    tr, led = _kineto("trace_lone_surrogate.json")
    lone = "lone surrogate escape (\\uD800-\\uDFFF without its pair: not text) replaced by U+FFFD"
    assert entries(led) == []
    assert entries(led, "repaired") == [(2, "name", lone), (3, "Process Group Name", lone), (4, "name", lone)]
    assert [(f.code, f.message) for f in led.flags] == [
        ("lone_surrogate", "lone surrogate escapes (\\uD800-\\uDFFF without its pair: not text) replaced by "
                           "U+FFFD; 2 kept GPU rows affected (name, Process Group Name)")]
    k = tr.kernels
    assert k["name"].astype(str).tolist() == ["gemm_\ufffd", NCCL_KERNEL, "gemm_c"]
    assert k["process_group"].astype(str).tolist() == ["", "pg\ufffd", ""]
    assert tr.ops["name"].astype(str).tolist() == ["aten::mm\ufffd"]
    assert tr.metadata["trace_name"] == "run\ufffd"  # the top-level keys too: all of it is UTF-8 text
    # nothing the reader hands over still holds a surrogate
    texts = [str(v) for table in (tr.kernels, tr.steps, tr.host_syncs, tr.ops) for col in table.columns
             for v in table[col].dropna().tolist()] + [str(tr.metadata)]
    assert not [t for t in texts if re.search("[\ud800-\udfff]", t)]


def test_valid_surrogate_pairs_and_escaped_backslashes_are_not_repaired(tmp_path):
    """A paired escape is one character; ``\\\\ud800`` is a backslash and text: neither is a repair."""
    text = (H / "program/trace_lone_surrogate.json").read_text()
    text = text.replace('"gemm_\\ud800"', '"gemm_\\ud83d\\ude00"').replace('"pg\\udfff"', '"pg\\\\udfff"')
    text = text.replace('"aten::mm\\udbff"', '"aten::mm"')
    text = text.replace("cudaLaunch\\udc00Kernel", "cudaLaunchKernel")
    text = text.replace('"run\\ud83d"', '"run"')
    (tmp_path / "pairs.json").write_text(text)
    tr = read_trace(tmp_path / "pairs.json", cache=False)
    assert tr.ledger.entries == [] and tr.ledger.flags == [] and tr.ledger.balanced()
    assert tr.kernels["name"].astype(str).tolist()[0] == "gemm_\U0001f600"
    assert tr.kernels["process_group"].astype(str).tolist()[1] == "pg\\udfff"


def test_lone_surrogates_beside_invalid_bytes_and_in_a_file_decoded_in_pieces(tmp_path):
    """Each kind keeps its own reason; a lone escape deep in a multi-MiB file is found in its piece."""
    lines = (H / "program/trace_lone_surrogate.json").read_text().splitlines()
    head, first, events, tail = lines[0], lines[1], lines[2:-1], lines[-1]  # first ends in ","
    filler = [first.replace("ProfilerStep#1", f"annotation_{i}").replace('"ts": 0', f'"ts": {i}')
              for i in range(20_000)]  # a few MiB of annotations: the events come in several pieces
    text = "\n".join([head, first, *filler, *events, tail])
    data = text.replace('"gemm_c"', '"gemm_\xe9c"').encode("latin-1")  # one invalid UTF-8 byte
    (tmp_path / "mixed.json").write_bytes(data)
    assert len(data) > 2 << 20
    tr = read_trace(tmp_path / "mixed.json", cache=False)
    led = tr.ledger
    lone = "lone surrogate escape (\\uD800-\\uDFFF without its pair: not text) replaced by U+FFFD"
    n = 20_000  # the annotations put in before row 2 of the original
    assert entries(led, "repaired") == [(n + 2, "name", lone), (n + 3, "Process Group Name", lone),
                                        (n + 4, "name", lone),
                                        (n + 6, "name", "invalid UTF-8 bytes replaced by U+FFFD")]
    assert led.codes() == ["lone_surrogate", "invalid_utf8"] and led.balanced()
    assert tr.kernels["name"].astype(str).tolist() == ["gemm_\ufffd", NCCL_KERNEL, "gemm_\ufffdc"]


def test_a_lone_surrogate_in_a_document_decoded_whole_is_repaired_the_same(tmp_path):
    """A ``traceEvents`` key nested before the real one: the document is decoded in one piece."""
    text = (H / "program/trace_lone_surrogate.json").read_text()
    (tmp_path / "whole.json").write_text('{"odd": {"traceEvents": [0]}, ' + text[1:])
    tr = read_trace(tmp_path / "whole.json", cache=False)
    ref = read_trace(H / "program/trace_lone_surrogate.json", cache=False)
    assert [(e.row, e.field, e.reason) for e in tr.ledger.entries] == entries(ref.ledger, "repaired")
    assert tr.ledger.codes() == ["lone_surrogate"]
    pd.testing.assert_frame_equal(tr.kernels, ref.kernels, check_exact=True)
