"""The ``fleetlib`` command line: Table 8 numbers, the runtime models, and one-line errors.

Expected values are computed here from the formulas (or taken from published numbers), not by
calling the library functions the command line wraps.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from fleetlib.cli import main

ROOT = Path(__file__).resolve().parents[2]
TABLE_8 = ["--scheduling", "0.65", "--runtime", "0.90", "--program", "0.48"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)  # exactly one JSON document, or this raises


# --- fleetlib mpg -----------------------------------------------------------------------------------


def test_mpg_table_8_acceptance(capsys):
    res = run_json(capsys, "mpg", *TABLE_8, "--price", "2")
    assert res["mpg"] == pytest.approx(0.2808, abs=5e-5)
    assert res["job_product"] == pytest.approx(0.432, abs=5e-5)
    assert set(res["loss_shares"]) == {"scheduling", "runtime", "program"}
    assert res["loss_shares"]["scheduling"] == pytest.approx(0.35, abs=5e-5)
    assert res["loss_shares"]["runtime"] == pytest.approx(0.065, abs=5e-5)
    assert res["loss_shares"]["program"] == pytest.approx(0.3042, abs=5e-5)
    assert res["marginal_value"] == pytest.approx({"scheduling": 0.432, "runtime": 0.312, "program": 0.585},
                                                  abs=5e-5)
    assert round(res["cost_per_useful_hour"], 2) == 7.12
    # Billing held hours only: 2 / (0.9 x 0.48), the 2.3x multiplier of section 9.8.2.
    assert res["held_hours_chargeback"] == pytest.approx(2 / 0.432, rel=1e-12)


def test_mpg_json_keeps_full_precision(capsys):
    res = run_json(capsys, "mpg", *TABLE_8, "--price", "2")
    assert res["mpg"] == pytest.approx(0.65 * 0.90 * 0.48, rel=1e-12)
    assert res["cost_per_useful_hour"] == pytest.approx(2 / (0.65 * 0.90 * 0.48), rel=1e-12)
    assert res["cost_per_useful_hour"] != 7.12  # not rounded


def test_mpg_parts_sum_to_one(capsys):
    res = run_json(capsys, "mpg", "--scheduling", "0.7", "--runtime", "0.85", "--program", "0.4")
    assert sum(res["loss_shares"].values()) + res["mpg"] == pytest.approx(1.0, abs=1e-12)
    assert "cost_per_useful_hour" not in res  # only with a price
    assert "held_hours_chargeback" not in res


def test_mpg_human_output_rounds_and_names_units(capsys):
    code, out, _ = run(capsys, "mpg", *TABLE_8, "--price", "2")
    assert code == 0
    assert "0.2808" in out
    assert "7.12 USD/h" in out
    assert "35.0 %" in out and "6.5 %" in out and "30.4 %" in out
    assert "0.28080000000000005" not in out


# --- fleetlib model ---------------------------------------------------------------------------------


def test_young_running_example(capsys):
    res = run_json(capsys, "model", "young", "--checkpoint-s", "9.8", "--mtbf-h", "302")
    assert res["interval_min"] == pytest.approx(math.sqrt(2 * 9.8 * 302 * 3600) / 60, rel=1e-12)
    assert round(res["interval_min"], 2) == 76.94
    # At the optimum the two halves of the waste are equal: 2 C / tau = sqrt(2 C / M).
    assert res["waste"] == pytest.approx(math.sqrt(2 * 9.8 / (302 * 3600)), rel=1e-12)


def test_young_waste_at_interval_in_use(capsys):
    res = run_json(capsys, "model", "young", "--checkpoint-s", "9.8", "--mtbf-h", "302",
                   "--interval-min", "77")
    tau = 77 * 60
    assert res["waste_at_interval_in_use"] == pytest.approx(9.8 / tau + tau / (2 * 302 * 3600), rel=1e-12)
    assert res["waste_at_interval_in_use"] > res["waste"]  # the optimum is a minimum


@pytest.mark.parametrize(("mtbf_h", "published_min"), [(24, 116.7), (6, 56.7), (0.25, 9.1)])
def test_daly_published_optima(capsys, mtbf_h, published_min):
    # Daly (2006): delta = 5 min, R = 10 min; published optima 116.7, 56.7 and 9.1 min.
    res = run_json(capsys, "model", "daly", "--checkpoint-s", "300", "--restart-s", "600",
                   "--mtbf-h", str(mtbf_h))
    assert res["interval_min"] == pytest.approx(published_min, abs=0.05)


@pytest.mark.parametrize(("interval_min", "published"), [(60, 0.676), (5, 0.931)])
def test_ettr_kokolis_example(capsys, interval_min, published):
    # Kokolis et al. (2025): a 16k-GPU job, u0 = 5 min, w ~ 0, MTTF 1.80 h.
    res = run_json(capsys, "model", "ettr", "--mttf-h", "1.8", "--restart-min", "5",
                   "--checkpoint-write-s", "0", "--interval-min", str(interval_min))
    assert res["ettr"] == pytest.approx(published, abs=5e-4)
    assert res["ettr"] == pytest.approx(1 - (5 + interval_min / 2) / 108, rel=1e-12)


def test_ettr_write_cost_lowers_ettr(capsys):
    free = run_json(capsys, "model", "ettr", "--mttf-h", "10", "--restart-min", "5",
                    "--checkpoint-write-s", "0", "--interval-min", "30")["ettr"]
    paid = run_json(capsys, "model", "ettr", "--mttf-h", "10", "--restart-min", "5",
                    "--checkpoint-write-s", "60", "--interval-min", "30")["ettr"]
    assert paid == pytest.approx(free / (1 + 60 / 1800), rel=1e-12)


def test_model_human_output(capsys):
    code, out, _ = run(capsys, "model", "young", "--checkpoint-s", "9.8", "--mtbf-h", "302")
    assert code == 0
    assert "76.94 min" in out
    assert "0.42 %" in out


# --- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["mpg", "--scheduling", "1.2", "--runtime", "0.9", "--program", "0.5"], "scheduling"),
        (["mpg", "--scheduling", "0.6", "--runtime", "-0.1", "--program", "0.5"], "runtime"),
        (["mpg", "--scheduling", "0.6", "--runtime", "0.9", "--program", "nan"], "program"),
        (["mpg", *TABLE_8, "--price", "-2"], "price"),
        (["mpg", "--scheduling", "x", "--runtime", "0.9", "--program", "0.5"], "--scheduling"),
        (["mpg", "--runtime", "0.9", "--program", "0.5"], "--scheduling"),
        (["model", "young", "--checkpoint-s", "-9.8", "--mtbf-h", "302"], "checkpoint"),
        (["model", "young", "--checkpoint-s", "9.8", "--mtbf-h", "0"], "mtbf"),
        (["model", "young", "--checkpoint-s", "9.8", "--mtbf-h", "1", "--interval-min", "90"], "MTBF"),
        (["model", "daly", "--checkpoint-s", "300", "--restart-s", "-1", "--mtbf-h", "24"], "restart"),
        (["model", "ettr", "--mttf-h", "1.8", "--restart-min", "5", "--checkpoint-write-s", "0",
          "--interval-min", "120"], "MTTF"),
        (["model", "ettr", "--mttf-h", "1.8", "--restart-min", "-5", "--checkpoint-write-s", "0",
          "--interval-min", "60"], "restart"),
        (["model"], "MODEL"),
        (["bogus"], "bogus"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(capsys, argv, needle):
    code, out, err = run(capsys, *argv, *(["--json"] if argv[0] == "mpg" else []))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error" in lines[0] and needle in lines[0]
    assert "Traceback" not in err
    assert "nan" not in out.lower()


def test_report_missing_params_file_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, "report", "--params", str(tmp_path / "missing.yaml"), "--out",
                       str(tmp_path / "out"))
    assert code == 2
    assert "missing.yaml" in err and len(err.strip().splitlines()) == 1


def test_report_failure_exits_1_with_one_line(capsys, tmp_path):
    params = "parameters/running_example.yaml"
    code, out, err = run(capsys, "report", "--params", str(ROOT / params), "--out", str(tmp_path / "out"),
                         "--notebook", str(tmp_path / "absent.ipynb"))
    assert code == 1
    assert out == ""
    assert "absent.ipynb" in err and len(err.strip().splitlines()) == 1


def test_help_exits_0(capsys):
    code, out, _ = run(capsys, "mpg", "--help")
    assert code == 0
    assert "--scheduling" in out


def test_python_m_fleetlib_runs_the_same_cli():
    # One subprocess: the module entry point returns main()'s status and keeps errors to one line.
    bad = subprocess.run([sys.executable, "-m", "fleetlib", "mpg", "--scheduling", "2", "--runtime", "1",
                          "--program", "1", "--json"], capture_output=True, text=True, check=False,
                         timeout=60)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert "Traceback" not in bad.stderr and bad.stderr.count("\n") == 1
    assert "scheduling" in bad.stderr



class _ClosedPipe:
    """A stdout whose reader has gone away: every write raises BrokenPipeError."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_closed_pipe_exits_quietly(monkeypatch, capsys):
    # `fleetlib ... --json | head -c 1`: the reader closes the pipe; main returns 141 and prints nothing.
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    status = main(["mpg", "--scheduling", "0.65", "--runtime", "0.9", "--program", "0.48", "--json"])
    assert status == 141
    assert capsys.readouterr().err == ""


def test_closed_pipe_from_a_real_pipe():
    # The same through a real pipe, with output far larger than the pipe buffer so the write must block
    # until the reader has gone: no traceback on stderr.
    code = ("import sys; from fleetlib.cli import main; "
            "import fleetlib.cli as c; c._emit = lambda r, j, f: print('x' * 1_000_000); "
            "sys.exit(main(['mpg', '--scheduling', '0.65', '--runtime', '0.9', '--program', '0.48']))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.read(1) == b"x"
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()
