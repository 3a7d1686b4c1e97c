"""Issue 30 item 4: a time a runtime reader cannot trust is rejected by row, naming file, row, field, value.

Small hand-built logs: the bundled MLPerf and ml-goodput samples with one time replaced by NaN or 1e20.
The expected row, field and value are read off the edited line by the test itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fleetlib.runtime import read

ROOT = Path(__file__).resolve().parents[2]
MLPERF = ROOT / "data/timelines/asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt"
MLGOODPUT = ROOT / "data/timelines/maxtext-llama3-8b-demo_timeline.jsonl"


def _rejected(ledger, row):
    return [(e.file, e.field, e.reason) for e in ledger.entries if e.action == "rejected" and e.row == row]


@pytest.mark.parametrize("value", ["NaN", "1e20"])
def test_an_mlperf_time_that_is_nan_or_1e20_is_rejected_naming_time_ms(tmp_path, value):
    lines = MLPERF.read_text().split("\n")
    row = 11
    assert '"time_ms": ' in lines[row - 1]
    lines[row - 1] = re.sub(r'"time_ms": \d+', f'"time_ms": {value}', lines[row - 1])
    path = tmp_path / "result_0.txt"
    path.write_text("\n".join(lines))
    _, ledger = read([path], "mlperf")
    [(file, field, reason)] = _rejected(ledger, row)
    assert (file, field) == (str(path), "time_ms")
    assert ("NaN" if value == "NaN" else "1e+20") in reason
    assert ledger.balanced()


@pytest.mark.parametrize("value", ["NaN", "1e20"])
def test_an_mlgoodput_step_time_that_is_nan_or_1e20_is_rejected_under_its_own_key(tmp_path, value):
    lines = MLGOODPUT.read_text().split("\n")
    row = 9
    assert set(json.loads(lines[row - 1])) == {"job_name", "step_count", "step_start_time"}
    lines[row - 1] = re.sub(r'"step_start_time": [\d.]+', f'"step_start_time": {value}', lines[row - 1])
    path = tmp_path / "job_timeline.jsonl"
    path.write_text("\n".join(lines))
    _, ledger = read([path], "mlgoodput")
    [(file, field, reason)] = _rejected(ledger, row)
    assert (file, field) == (str(path), "step_start_time")
    assert ("NaN" if value == "NaN" else "1e+20") in reason
    assert ledger.balanced()
