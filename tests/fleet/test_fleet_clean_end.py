"""The fleet walk feeds the scheduler's COMPLETED state into the runtime rung's one clean-end rule.

Two jobs with the same hand-built timeline and no ``release`` or ``job_completed`` event (held time then
ends at the last record, 50 s, and that inferred release is no end marker): four 10 s steps from 10 s,
a checkpoint commit of step 1 at 30 s.  The scheduler holds each on one device over [0, 50) s; it
recorded ``done`` COMPLETED and ``cut`` FAILED.  By the rule, ``done`` ended cleanly at 50 s (its
release, at its last step's end, with no interruption between); ``cut`` did not: under the committed
definition its steps 2 and 3 (20 s) stay progress at risk, ``done``'s are committed.  The walk's R
(retrospective) is the same for both: 40 / 50 each.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.runtime import CLEAN_END_RULE, read, runtime_goodput, tables_from_seconds, write_timeline
from fleetlib.scheduling import write_allocations

T0 = pd.Timestamp("2026-02-02T00:00:00Z")


def _bundle(root: Path) -> Path:
    frames = [tables_from_seconds([(0, k, 10.0 + 10 * k, 20.0 + 10 * k) for k in range(4)],
                                  [(0, 0.0, "gang_complete"), (0, 30.0, "checkpoint_commit", 1)],
                                  job_id=job, origin=T0.isoformat()) for job in ("done", "cut")]
    steps = pd.concat([f[0] for f in frames], ignore_index=True)
    events = pd.concat([f[1] for f in frames], ignore_index=True)
    (root / "timelines").mkdir(parents=True)
    write_timeline(steps, events, root / "timelines" / "jobs.parquet")
    at = pd.Series([T0, T0])
    alloc = pd.DataFrame({
        "job_id": ["done", "cut"], "attempt": 0, "pool": "p", "devices": 1, "submit": at,
        "first_assigned": at, "gang_complete": at, "release": at + pd.Timedelta(seconds=50),
        "priority": 0.0, "elastic": False, "end_state": ["completed", "failed"], "requested_devices": 1})
    cap = pd.DataFrame({"pool": ["p"], "start": [T0], "end": [T0 + pd.Timedelta(seconds=60)],
                        "devices_in_service": [2], "devices_out_of_service": [0]})
    (root / "scheduler").mkdir()
    write_allocations(alloc, cap, root / "scheduler" / "allocations.parquet")
    (root / "fleet.yaml").write_text(
        "name: clean end\n"
        f"window: ['{T0.isoformat()}', '{(T0 + pd.Timedelta(seconds=60)).isoformat()}']\n"
        "scheduler: {format: canonical, files: [scheduler/allocations.parquet]}\n"
        "timelines: {format: canonical, files: [timelines/jobs.parquet]}\n")
    return root / "fleet.yaml"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(tmp_path_factory.mktemp("clean_end"))


def test_completed_in_the_scheduler_is_a_clean_end_in_the_walk(bundle: Path) -> None:
    fleet = measure_fleet(bundle)
    assert bool(fleet.jobs.loc["done", "clean_end"]) and not bool(fleet.jobs.loc["cut", "clean_end"])
    # retrospective R: the clean end moves nothing there
    assert fleet.runtime.numerator == pytest.approx(80.0) and fleet.runtime.denominator == 100.0
    assert CLEAN_END_RULE in fleet.runtime.convention


def test_the_rung_gives_the_walk_s_clean_end_the_committed_meaning(bundle: Path) -> None:
    tables, _ = read([str(bundle.parent / "timelines" / "jobs.parquet")], "canonical")
    done_at = {"done": T0 + pd.Timedelta(seconds=50)}
    m = runtime_goodput(tables["steps"], tables["events"], completed_at=done_at)
    assert m.per_job.loc["done", "progress_at_risk"] == pytest.approx(0.0, abs=1e-12)
    assert m.per_job.loc["done", "productive"] == pytest.approx(40.0)
    assert m.per_job.loc["cut", "progress_at_risk"] == pytest.approx(20.0)
    assert m.per_job.loc["cut", "productive"] == pytest.approx(20.0)
    # the flag off: only the checkpoint retains steps, whatever the scheduler says
    off = runtime_goodput(tables["steps"], tables["events"], completed_at=done_at, clean_end_commit=False)
    assert off.per_job["progress_at_risk"].tolist() == pytest.approx([20.0, 20.0])
