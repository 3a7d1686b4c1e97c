"""The HeliosData job log and the AcmeTrace job traces: waits, durations, cohorts, status mix, capacity.

Every expected number is computed here from the raw fixture with the ``csv`` module and plain Python
(the fixtures are in the published column layouts and time formats), not by fleetlib.
"""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from fleetlib.quality import DomainError, InputError
from fleetlib.registry import detect
from fleetlib.scheduling import READERS, read
from fleetlib.scheduling.commands import render_scheduling, run_scheduling

ROOT = Path(__file__).resolve().parents[2]
JOBLOG = ROOT / "tests/corpus/scheduling/joblog"
HELIOS = JOBLOG / "cluster_log.csv"
QUOTA = JOBLOG / "cluster_gpu_number.csv"
SEREN, KALOS = JOBLOG / "trace_seren.csv", JOBLOG / "trace_kalos.csv"
STATE_NAMES = {"COMPLETED": "completed", "CANCELLED": "cancelled", "FAILED": "failed", "TIMEOUT": "timeout",
               "NODE_FAIL": "node_fail"}


def _rows(*paths: Path) -> list[dict[str, str]]:
    out = []
    for p in paths:
        with open(p, newline="") as fh:
            out += [r for r in csv.DictReader(fh) if int(r["gpu_num"]) > 0]  # GPU jobs only
    return out


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text)  # naive Helios times: Asia/Shanghai has no DST, differences hold


def _truth(*paths: Path) -> dict[str, object]:
    rows = _rows(*paths)
    started = [r for r in rows if r["start_time"]]
    waits = [(_t(r["start_time"]) - _t(r["submit_time"])).total_seconds() for r in started]
    durations = [(_t(r["end_time"]) - _t(r["start_time"])).total_seconds() for r in started if r["end_time"]]
    held = sum(int(r["gpu_num"]) * (_t(r["end_time"]) - _t(r["start_time"])).total_seconds()
               for r in started if r["end_time"])
    return {"jobs": len(rows), "never": len(rows) - len(started), "wait_p50": statistics.median(waits),
            "duration_p50": statistics.median(durations), "held": held,
            "states": Counter(STATE_NAMES[r["state"]] for r in rows)}


def _check_job_view(res: dict, truth: dict) -> None:
    assert res["jobs"] == res["attempts"] == truth["jobs"]
    assert res["never_assigned"] == truth["never"]
    assert res["wait_p50_s"] == truth["wait_p50"]
    assert res["duration_p50_s"] == truth["duration_p50"]
    assert {m["end_state"]: m["attempts"] for m in res["status_mix"]} == truth["states"]
    assert sum(m["held_device_s"] for m in res["status_mix"]) == pytest.approx(truth["held"], rel=1e-12)
    assert sum(c["jobs"] for c in res["cohorts"]) == truth["jobs"]


def test_helios_job_log_medians_and_status_mix():
    truth = _truth(HELIOS)
    res = run_scheduling([HELIOS], "helios-joblog")
    _check_job_view(res, truth)
    # the published queue column agrees with the times on this fixture
    queue = [float(r["queue"]) for r in _rows(HELIOS) if r["start_time"]]
    assert res["wait_p50_s"] == statistics.median(queue)
    led = res["ledger"]
    assert (led["read"], led["rejected"], led["unused"]) == (30, 0, {"CPU-only jobs (gpu_num 0)": 3})
    assert "no capacity" in res["note"]
    text = render_scheduling(res)
    assert "status mix" in text and "capacity: not known" in text


def test_helios_job_log_with_quota_file_measures_goodput():
    truth = _truth(HELIOS)
    res = run_scheduling([HELIOS, QUOTA], "helios-joblog")
    # three Asia/Shanghai days of 64 + 96 GPUs
    assert res["capacity_device_s"] == 3 * 86_400 * (64 + 96)
    assert res["held_device_s"] == pytest.approx(truth["held"], rel=1e-12)
    assert res["scheduling_goodput"] == pytest.approx(truth["held"] / (3 * 86_400 * 160), rel=1e-12)
    _check_job_view(res["job_log"], truth)
    assert "quota" in res["job_log"]["capacity_note"]
    assert res["ledger"]["read"] == 33


def test_acme_traces_medians_status_mix_and_kalos_duration_flag():
    truth = _truth(SEREN, KALOS)
    res = run_scheduling([SEREN, KALOS], "acme")
    _check_job_view(res, truth)
    flags = [f for f in res["ledger"]["flags"] if f["code"] == "derived_column_mismatch"]
    assert [f["file"] for f in flags] == [str(KALOS)]  # Kalos's duration runs from submission
    assert "equal end_time - submit_time" in flags[0]["message"]
    records, _ = read([SEREN, KALOS], "acme")
    assert sorted(records.allocations["pool"].unique()) == ["kalos", "seren"]


def _peak(rows: list[dict[str, str]]) -> int:
    events = sorted([(_t(r["start_time"]), int(r["gpu_num"])) for r in rows if r["start_time"]]
                    + [(_t(r["end_time"]), -int(r["gpu_num"])) for r in rows if r["start_time"]],
                    key=lambda e: (e[0], e[1]))
    level = peak = 0
    for _, d in events:
        level += d
        peak = max(peak, level)
    return peak


def test_acme_capacity_derived_stated_and_flagged_below_the_held_peak():
    peak = _peak(_rows(SEREN))
    rec, _ = read([SEREN], "acme", capacity="derived")
    assert rec.capacity["devices_in_service"].tolist() == [peak]
    assert "lower bound" in rec.extra["notes"]["capacity"]
    res = run_scheduling([SEREN], "acme", capacity=f"seren={peak + 16}")
    rows = _rows(SEREN)
    span = (max(_t(r["end_time"]) for r in rows) - min(_t(r["submit_time"]) for r in rows)).total_seconds()
    assert res["capacity_device_s"] == pytest.approx((peak + 16) * span, rel=1e-12)
    assert res["job_log"]["capacity_note"].startswith(f"stated: seren {peak + 16}")
    low = run_scheduling([SEREN], "acme", capacity=str(peak - 1))  # the rung's rule: flagged, not clipped
    assert any("allocated above capacity: pool 'seren'" in str(f) for f in low["ledger"]["flags"])
    assert low["losses"]["unattributed"] < 0
    with pytest.raises(DomainError, match="applies to the job logs"):
        run_scheduling([HELIOS], "philly", capacity="derived")


def test_formats_detected_from_header_bytes():
    assert detect([HELIOS], "scheduling") == "helios-joblog"
    assert detect([SEREN, KALOS], "scheduling") == "acme"
    assert detect([HELIOS, QUOTA], "scheduling") == "helios-joblog"  # the log with its quota file
    with pytest.raises(InputError, match="ambiguous"):  # the quota file alone: either Helios format
        detect([QUOTA], "scheduling")
    assert READERS["acme"].sniff(SEREN.read_bytes()[:4096])
    assert not READERS["acme"].sniff(HELIOS.read_bytes()[:4096])


def test_bad_rows_are_rejected_with_file_row_field():
    _, ledger = read([JOBLOG / "helios_bad_rows.csv"], "helios-joblog")
    got = [(e.row, e.field, e.reason) for e in ledger.entries]
    assert got == [
        (3, "start_time", "starts before it was submitted"),
        (4, "gpu_num", "gpu_num 'two' is not a whole number >= 0"),
        (5, "job_id", "duplicate job_id (an earlier row has it)"),
        (6, None, "9 fields where the header has 12 (a truncated line?)"),
    ]
    assert [(f.row, f.code) for f in ledger.flags] == [(7, "unknown_job_state")]
    _, ledger = read([JOBLOG / "acme_bad_rows.csv"], "acme")
    assert [(e.row, e.field) for e in ledger.entries] == [
        (3, "end_time"), (4, "start_time"), (5, "submit_time")]
    assert (ledger.read, ledger.kept, ledger.rejected) == (5, 2, 3)


def test_open_jobs_censored_at_the_window_end(tmp_path):
    text = SEREN.read_text().splitlines()
    head, first = text[0], text[1].split(",")
    running = first.copy()
    running[0], running[9], running[10], running[12] = "9000001", "", "", ""
    waiting = first.copy()
    waiting[0], waiting[8], waiting[9], waiting[10], waiting[11], waiting[12] = "9000002", "", "", "", "", ""
    f = tmp_path / "trace_seren.csv"
    f.write_text("\n".join([head, text[1], ",".join(running), ",".join(waiting)]) + "\n")
    end = "2023-03-02T00:00:00+08:00"
    rec, ledger = read([f], "acme", window=("2023-03-01T00:00:00+08:00", end))
    states = dict(zip(rec.allocations["job_id"], rec.allocations["end_state"], strict=True))
    assert states["9000001"] == "running" and states["9000002"] == "pending"
    assert ledger.repaired == 2
    assert all("censored" in e.reason for e in ledger.entries)


@pytest.mark.parametrize("fmt", ["helios-joblog", "acme"])
def test_an_empty_log_is_refused_in_one_line(tmp_path, fmt):
    empty = tmp_path / "trace_seren.csv"
    empty.write_text("\n  \n")
    with pytest.raises(InputError, match=r"empty file: expected .* header line") as info:
        read([empty], fmt)
    assert info.value.file == str(empty) and info.value.row == 1
