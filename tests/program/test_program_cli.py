"""``fleetlib program``: the bundled DLRM step through the command, model configurations, bad input.

Independent figures for the 8-rank DLRM step come from the raw trace events (see
tests/program/test_program_dlrm.py): the first all-to-all kernel lasts 10 us on rank 7 and 7,635 us on rank 1,
and each rank's ``ProfilerStep#10`` lasts the ``STEP_US`` below.  Every test points the trace cache at
a temporary folder or disables it, so nothing is written to the home cache.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from fleetlib.cli import EXIT_BAD_ARGUMENTS, main
from fleetlib.program.breakdown import PARTITION_PARTS
from fleetlib.program.commands import load_model_config, render_program, run_program
from fleetlib.quality import DomainError, FleetlibError, InputError

ROOT = Path(__file__).resolve().parents[2]
DLRM = ROOT / "data" / "traces" / "dlrm_8rank"
DLRM_MODEL = ROOT / "data" / "traces" / "models" / "dlrm_example.yaml"
PP_PAIR = [ROOT / "data" / "traces" / f"hta_pp_pair_rank-{r}.json.gz" for r in (0, 1)]
CORPUS = ROOT / "tests" / "corpus" / "traces"

#: ProfilerStep#10 duration per rank, microseconds, from the raw trace events.
STEP_US = {0: 14455, 1: 19901, 2: 13017, 3: 19313, 4: 17979, 5: 17797, 6: 13091, 7: 12509}
#: V100 SXM dense FP16 peak, FLOP/s (NVIDIA datasheet, 125 TFLOP/s).
V100_PEAK = 125e12


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    """Keep every test away from the home trace cache."""
    monkeypatch.setenv("FLEETLIB_TRACE_CACHE", str(tmp_path / "cache"))


def run_cli(*argv: str) -> tuple[int, str, str]:
    """Run ``fleetlib`` in-process; return (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def dlrm_json(tmp_path_factory):
    """The DLRM directory through ``fleetlib program --json`` with the sample model configuration."""
    rc, out, err = run_cli("program", str(DLRM), "--model", str(DLRM_MODEL), "--no-cache", "--json")
    assert rc == 0, err
    return json.loads(out)


def test_dlrm_through_the_command(dlrm_json):
    res = dlrm_json
    assert set(res) >= {"ranks", "stragglers", "collectives", "flags", "ledger", "program_goodput"}
    assert sorted(res["ranks"], key=int) == [str(r) for r in range(8)]
    first = next(f for f in res["collectives"]["first"] if f["collective"] == "alltoall")
    assert first["ranks"] == 8
    assert first["last_arriver"] == 7
    assert first["longest_waiter"] == 1
    assert first["longest_wait_us"] == 7635.0 - 10.0  # ~7.6 ms: rank 1's kernel minus rank 7's
    # rank 7 is the last arriver most often and caused the most waiting
    stragglers = {s["rank"]: s for s in res["stragglers"]}
    assert max(stragglers, key=lambda r: stragglers[r]["arrived_last_share"]) == 7
    assert max(stragglers, key=lambda r: stragglers[r]["wait_caused_us"]) == 7


def test_partitions_sum_to_step_wall_time(dlrm_json):
    for rank, entry in dlrm_json["ranks"].items():
        assert entry["steps"] == 1
        assert set(entry["partition_us"]) == set(PARTITION_PARTS)
        assert entry["step_wall_us"] == STEP_US[int(rank)]
        assert sum(entry["partition_us"].values()) == pytest.approx(entry["step_wall_us"], abs=1e-6)
        assert min(entry["partition_us"].values()) >= 0.0
        assert entry["overlapped_comm_us"] >= 0.0
    for row in dlrm_json["partition"]:
        assert sum(row[p] for p in PARTITION_PARTS) == pytest.approx(row["step_wall_us"], abs=1e-6)


def test_ledger_accounts_for_every_row(dlrm_json):
    led = dlrm_json["ledger"]
    assert led["read"] > 0
    assert led["read"] == led["kept"] + led["repaired"] + led["rejected"]
    assert led["entries_not_shown"] == 0 and len(led["entries"]) == led["repaired"] + led["rejected"]


def test_model_config_gives_program_goodput_with_convention(dlrm_json):
    pg = dlrm_json["program_goodput"]
    # the fourth field (issue 13 item 6) records where the step time comes from
    assert pg["convention"] == ("MFU, illustrative DLRM MLP count, V100 SXM dense FP16 125 TFLOP/s, "
                                "step time from 8 traced rank-step windows (profiler_step)")
    # MFU at the mean traced step: 5e11 FLOP / (8 devices x 125 TFLOP/s x mean step time)
    mean_step_s = sum(STEP_US.values()) / len(STEP_US) / 1e6
    assert pg["value"] == pytest.approx(5.0e11 / (8 * V100_PEAK * mean_step_s), rel=1e-12)
    assert 0.0 < pg["value"] < 0.05
    factor = pg["factor"]
    assert factor["convention"] == pg["convention"]
    assert factor["denominator"] == pytest.approx(sum(STEP_US.values()) / 1e6, rel=1e-12)
    # the partition's losses explain the gap, up to rounding
    assert factor["losses"]["unattributed"] == pytest.approx(0.0, abs=1e-9)
    assert factor["losses"]["peer_wait"] == pytest.approx(
        sum(r["partition_us"]["peer_wait"] for r in dlrm_json["ranks"].values()) / 1e6, rel=1e-12)


def test_text_rendering(dlrm_json):
    text = render_program(dlrm_json)
    assert "first alltoall" in text
    assert "last arriver rank 7; longest waiter rank 1 (7.625 ms)" in text
    assert "program goodput P" in text and "V100 SXM dense FP16 125 TFLOP/s" in text
    assert "peer wait" in text and "ledger:" in text
    # rank 1's row in ms: step wall 19.901
    assert any(line.split()[:3] == ["1", "1", "19.901"] for line in text.splitlines())
    rc, out, err = run_cli("program", str(DLRM), "--no-cache")
    assert rc == 0 and err == ""
    assert "longest waiter rank 1 (7.625 ms)" in out and "program goodput" not in out


def test_n_params_config_counts_palm_flops(tmp_path):
    cfg = tmp_path / "model.yaml"
    cfg.write_text("accelerator: h100 sxm\ndevices: 2\nn_params: 1e6\ntokens_per_step: 1000\n"
                   "convention: palm\nn_layers: 2\nn_heads: 4\nhead_dim: 8\nseq_len: 16\n", encoding="utf-8")
    res = run_program(PP_PAIR, model=cfg, cache=False)
    pg = res["program_goodput"]
    # the fourth field (issue 13 item 6) records where seq_len and the step time come from
    steps = len(res["partition"])
    assert pg["convention"] == ("MFU, PaLM 6N+12LHQT, H100 SXM dense BF16 989 TFLOP/s, seq_len 16 "
                                "(source not stated); step time from "
                                f"{steps} traced rank-step windows (profiler_step)")
    per_token = 6 * 1e6 + 12 * 2 * 4 * 8 * 16  # PaLM: 6N + 12 L H Q T, by hand
    assert pg["flops_per_token"] == per_token
    assert pg["useful_flops_per_step"] == per_token * 1000
    rows = res["partition"]
    mean_step_s = sum(r["step_wall_us"] for r in rows) / len(rows) / 1e6
    assert pg["value"] == pytest.approx(per_token * 1000 / (2 * 989e12 * mean_step_s), rel=1e-12)


def test_megatron_config_halves_attention_when_causal(tmp_path):
    cfg = tmp_path / "model.yaml"
    cfg.write_text("accelerator: A100 SXM\ndevices: 2\nn_params: 1e6\ntokens_per_step: 10\n"
                   "convention: megatron\nn_layers: 2\nn_heads: 4\nhead_dim: 8\nseq_len: 16\n",
                   encoding="utf-8")
    conf = load_model_config(cfg)
    assert conf["flops_per_token"] == 6 * 1e6 + 6 * 2 * 4 * 8 * 16  # causal halves the attention term
    # the fourth field (issue 13 item 6): seq_len was given without its source
    assert conf["convention"].label == ("MFU, Megatron causal 6N+6LHQT, A100 SXM dense BF16 312 TFLOP/s, "
                                        "seq_len 16 (source not stated)")


def test_cache_goes_to_the_configured_folder(tmp_path):
    cache = tmp_path / "cache"  # FLEETLIB_TRACE_CACHE (autouse fixture)
    first = run_program(PP_PAIR, cache=True)
    written = sorted(cache.rglob("*"))
    assert any(p.is_file() for p in written)
    again = run_program(PP_PAIR, cache=True)
    assert again["ranks"] == first["ranks"] and again["stragglers"] == first["stragglers"]
    none = run_program(PP_PAIR, cache=False)
    assert none["ranks"] == first["ranks"]


# ---------------------------------------------------------------------------------------------------
# Bad input: exit status 2 and one line on stderr
# ---------------------------------------------------------------------------------------------------


def assert_one_line_error(argv: list[str], *needles: str) -> str:
    rc, out, err = run_cli(*argv)
    assert rc == EXIT_BAD_ARGUMENTS
    assert out == ""
    assert err.startswith("fleetlib program: error: ")
    assert err.count("\n") == 1, err
    for needle in needles:
        assert needle in err
    return err


def test_bad_paths_exit_2(tmp_path):
    assert_one_line_error(["program", str(tmp_path / "missing.json.gz"), "--no-cache"], "file not found")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(["program", str(empty), "--no-cache"], "holds no")
    assert_one_line_error(["program", str(CORPUS / "invalid_json.json"), "--no-cache"], "invalid_json.json")
    assert_one_line_error(["program", str(CORPUS / "truncated.json.gz"), "--no-cache"], "truncated.json.gz")


def test_usage_error_exit_2():
    rc, out, err = run_cli("program")
    assert rc == EXIT_BAD_ARGUMENTS and out == ""
    assert "FILE_OR_DIR" in err


BAD_CONFIGS = {
    "unknown_key": ("accelerator: V100 SXM\ndevices: 8\nuseful_flops_per_step: 1e11\nconvention: x\n"
                    "flop_per_step: 3\n", "flop_per_step"),
    "missing_accelerator": ("devices: 8\nuseful_flops_per_step: 1e11\nconvention: x\n", "accelerator"),
    "unknown_accelerator": ("accelerator: Z9000\ndevices: 8\nuseful_flops_per_step: 1e11\nconvention: x\n",
                            "Z9000"),
    "both_flop_sources": ("accelerator: V100 SXM\ndevices: 8\nuseful_flops_per_step: 1e11\nn_params: 1e6\n"
                          "tokens_per_step: 10\nconvention: 6n\n", "either"),
    "no_flop_source": ("accelerator: V100 SXM\ndevices: 8\nconvention: 6n\n", "either"),
    "palm_without_shape": ("accelerator: V100 SXM\ndevices: 8\nn_params: 1e6\ntokens_per_step: 10\n"
                           "convention: palm\n", "n_layers"),
    "free_convention_with_params": ("accelerator: V100 SXM\ndevices: 8\nn_params: 1e6\ntokens_per_step: 10\n"
                                    "convention: my rule\n", "convention"),
    "negative_devices": ("accelerator: V100 SXM\ndevices: -8\nuseful_flops_per_step: 1e11\nconvention: x\n",
                         "devices"),
    "fractional_devices": ("accelerator: V100 SXM\ndevices: 2.5\nuseful_flops_per_step: 1e11\n"
                           "convention: x\n", "devices"),
    "text_flops": ("accelerator: V100 SXM\ndevices: 8\nuseful_flops_per_step: lots\nconvention: x\n",
                   "useful_flops_per_step"),
    "comma_in_convention": ("accelerator: V100 SXM\ndevices: 8\nuseful_flops_per_step: 1e11\n"
                            "convention: 'a, b'\n", "comma"),
    "not_a_mapping": ("- accelerator\n- devices\n", "mapping"),
    "invalid_yaml": ("accelerator: [V100\n", "YAML"),
    "fewer_devices_than_ranks": ("accelerator: V100 SXM\ndevices: 4\nuseful_flops_per_step: 1e11\n"
                                 "convention: x\n", "devices"),
    "mfu_above_one": ("accelerator: V100 SXM\ndevices: 8\nuseful_flops_per_step: 1e20\nconvention: x\n",
                      "exceeds 1"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_model_config_exit_2(tmp_path, case):
    text, needle = BAD_CONFIGS[case]
    cfg = tmp_path / "model.yaml"
    cfg.write_text(text, encoding="utf-8")
    # DLRM has 8 ranks; the two late checks need the traces, the others fail before they are read
    err = assert_one_line_error(["program", str(DLRM), "--model", str(cfg), "--no-cache"], needle)
    assert f"file {cfg}" in err  # the message names the configuration file


def test_missing_model_config_exit_2(tmp_path):
    assert_one_line_error(["program", str(DLRM), "--model", str(tmp_path / "nope.yaml"), "--no-cache"],
                          "nope.yaml", "not found")


def test_run_program_raises_fleetlib_errors(tmp_path):
    with pytest.raises(DomainError, match="no trace"):
        run_program([], cache=False)
    with pytest.raises(InputError, match="file not found"):
        run_program([tmp_path / "missing.json"], cache=False)
    cfg = tmp_path / "model.yaml"
    cfg.write_text("accelerator: V100 SXM\n", encoding="utf-8")
    with pytest.raises(FleetlibError, match="devices"):
        run_program([DLRM], model=cfg, cache=False)


# ---------------------------------------------------------------------------------------------------
# fleetlib synth rank-timers / fleetlib stragglers (fleetlib.program.stragglers)
# ---------------------------------------------------------------------------------------------------

FLEET_CORPUS = ROOT / "tests" / "corpus" / "fleet"


@pytest.fixture(scope="module")
def timers(tmp_path_factory):
    """40 ranks x 30 steps with rank 7 slowed 1.6x, through ``fleetlib synth rank-timers --json``."""
    out = tmp_path_factory.mktemp("timers") / "timers.parquet"
    rc, text, err = run_cli("synth", "rank-timers", "--ranks", "40", "--steps", "30", "--seed", "4",
                            "--stragglers", "7:1.6", "--out", str(out), "--json")
    assert rc == 0, err
    return json.loads(text)


def test_synth_rank_timers_command(timers):
    assert timers["truth"]["stragglers"] == [{"rank": 7, "slowdown": 1.6}]
    assert (timers["rows"], timers["ranks"], timers["steps"]) == (1200, 40, 30)
    assert Path(timers["path"]).stat().st_size == timers["bytes"]


def test_stragglers_command_finds_the_injected_rank(timers):
    rc, text, err = run_cli("stragglers", timers["path"], "--top", "3", "--json")
    assert rc == 0, err
    res = json.loads(text)
    assert set(res) >= {"stragglers", "last_arriver_counts", "wait_totals", "steps", "ranks", "engine",
                        "ledger"}
    assert (res["engine"], res["workers"]) == ("pandas", None)
    assert (res["ranks"], res["steps"], res["rows"]) == (40, 30, 1200)
    assert len(res["stragglers"]) == 3
    assert res["stragglers"][0]["rank"] == 7 and res["stragglers"][0]["straggler"] is True
    assert res["straggler_ranks"] == [7]
    # slowed 1.6x from the first step on: slower than the others, not than its own history
    assert res["slowed_down_ranks"] == []
    assert next(iter(res["last_arriver_counts"])) == "7"  # most often last
    assert sum(res["last_arriver_counts"].values()) <= 30
    assert res["ledger"]["read"] == res["ledger"]["kept"] == 1200


def test_stragglers_text_rendering(timers):
    rc, text, err = run_cli("stragglers", timers["path"], "--top", "2", "--threshold", "0.5")
    assert rc == 0, err
    assert "40 rank(s) x 30 step(s), 1,200 timers" in text
    assert "stragglers: none below the threshold" in text  # 1/1.6 = 0.625 is above 0.5
    assert ("slowed down against their own history (individual score, best step window / last, "
            "below 0.5): none") in text
    lines = text.splitlines()
    assert lines[3].split()[0] == "7"  # the first ranked row
    rc, text, _ = run_cli("synth", "rank-timers", "--ranks", "3", "--steps", "2", "--stragglers", "none",
                          "--out", str(Path(timers["path"]).with_name("small.parquet")))
    assert rc == 0 and "injected persistent stragglers: none" in text


def test_stragglers_ledger_rejections_are_printed():
    rc, text, err = run_cli("stragglers", str(FLEET_CORPUS / "negative_duration.csv"), "--json")
    assert rc == 0, err
    led = json.loads(text)["ledger"]
    assert (led["read"], led["kept"], led["rejected"]) == (4, 3, 1)
    assert led["entries"][0]["row"] == 4 and led["entries"][0]["field"] == "duration_s"


@pytest.mark.parametrize(("argv", "needles"), [
    (["stragglers", "MISSING"], ("fleetlib stragglers: error:", "no such file")),
    (["stragglers", str(FLEET_CORPUS / "duplicate_rank_step.csv")], ("row 5", "rank 1 at step 0")),
    (["stragglers", str(FLEET_CORPUS / "wrong_dtype.csv")], ("row 3", "duration_s")),
    (["stragglers", str(FLEET_CORPUS / "negative_duration.csv"), "--engine", "dask"], ("Parquet",)),
    (["stragglers", str(FLEET_CORPUS / "negative_duration.csv"), "--top", "0"], ("top must be",)),
    (["synth", "rank-timers", "--ranks", "4", "--steps", "2", "--stragglers", "5-1.5", "--out", "x.parquet"],
     ("fleetlib synth rank-timers: error:", "RANK:SLOWDOWN")),
    (["synth", "rank-timers", "--ranks", "4", "--steps", "2", "--out", "/no/such/folder/x.parquet"],
     ("does not exist",)),
])
def test_fleet_commands_bad_input_exit_2(argv, needles, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(*argv)
    assert rc == EXIT_BAD_ARGUMENTS and out == ""
    assert err.count("\n") == 1, err
    for needle in needles:
        assert needle in err


def test_the_command_reports_the_window_of_the_traced_steps(dlrm_json):
    # fleetlib program runs fleetlib.program.measure: the DLRM traces carry absolute unix time
    w = dlrm_json["window"]
    assert w["start"].startswith("2023-09-07T23:10:01") and w["end"] > w["start"]
    assert dlrm_json["program_goodput"]["factor"]["window"] == w
    assert dlrm_json["ledger"]["read"] == 26538  # every event of the eight rank files
    text = render_program(dlrm_json)
    assert f"window: {w['label']} ({w['start']} .. {w['end']})" in text


def test_program_workers_parses_on_dask_with_the_same_result():
    """``run_program(workers=2)`` (``--workers 2``: rank files as Dask tasks) gives the serial result."""
    serial = run_program([DLRM], model=DLRM_MODEL, cache=False)
    on_dask = run_program([DLRM], model=DLRM_MODEL, cache=False, workers=2)
    assert on_dask["partition"] == serial["partition"]
    assert on_dask["program_goodput"] == serial["program_goodput"]
    assert on_dask["ledger"]["read"] == serial["ledger"]["read"] == 26538


def test_program_workers_flag_reaches_the_cluster(monkeypatch):
    seen = {}

    def fake_run(paths, **kwargs):
        seen.update(kwargs)
        return run_program(paths, **{k: v for k, v in kwargs.items() if k != "workers"})

    monkeypatch.setattr("fleetlib.program.commands.run_program", fake_run)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["program", str(DLRM), "--no-cache", "--workers", "3", "--json"]) == 0
    assert seen["workers"] == 3
