"""Progress bars: shown on stderr when forced (``FLEETLIB_PROGRESS=1``) or on a terminal, never in the output.

The fleet walk's timeline files and traced jobs, a folder of many rank traces (``fleetlib program``) and
compare's bootstrap each have a bar.  Forced, the bar is written to stderr while ``--json`` output on
stdout stays the JSON alone (it parses, and equals the run without bars); unforced and off a terminal
(pytest's captured stderr), no bar is drawn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetlib import cli
from fleetlib._environ import PROGRESS_ENV, progress_wanted

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "data" / "fleet" / "synthetic"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    capsys.readouterr()
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    return out.out, out.err


def test_progress_is_wanted_when_forced_or_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "1")
    assert progress_wanted(as_json=True) and progress_wanted()
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert not progress_wanted()
    monkeypatch.delenv(PROGRESS_ENV)
    assert not progress_wanted()  # pytest's stderr is no terminal


@pytest.mark.parametrize(("argv", "bars"), [
    pytest.param(["fleet", str(SYNTHETIC / "fleet.yaml")], ["fleet timelines", "fleet traces"],
                 marks=pytest.mark.slow, id="fleet"),
    pytest.param(["program", str(SYNTHETIC / "traces" / "70003"), "--no-cache"], ["traces"], id="program"),
    pytest.param(["compare", str(SYNTHETIC), str(SYNTHETIC), "--boot", "50", "--cycle", "6h"],
                 ["compare bootstrap"], marks=pytest.mark.slow, id="compare"),
])
def test_a_forced_bar_goes_to_stderr_and_never_into_the_json(
    argv: list[str], bars: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    plain, quiet = _run([*argv, "--json"], capsys)
    assert not any(f"{bar}: " in quiet for bar in bars)  # off a terminal: no bar unless asked
    monkeypatch.setenv(PROGRESS_ENV, "1")
    out, err = _run([*argv, "--json"], capsys)
    for bar in bars:
        assert f"{bar}: 100%" in err, err[-500:]
    assert json.loads(out) == json.loads(plain)  # stdout is the JSON alone, as without the bar
    assert not any(f"{bar}: " in out for bar in bars)
