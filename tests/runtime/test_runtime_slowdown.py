"""A job's slow-down found where it starts (issue 27): change points, healthy regime, slow-step time.

The fixture is the issue's fail-slow case, generated with its truth by
:func:`fleetlib.runtime.synth.synth_timeline`: one job whose steps take 10.0 s until step 300 and
11.5 s after (a node that turns slow and stays slow), one whose steps take 10.0 s but for a 30-step
episode at 13.0 s.  The truth is the generator's: where the shifts are, the fault-free step time
(10 s), and the excess compute time the slow-downs added.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib.cli import main
from fleetlib.runtime import READERS, runtime_goodput, synth_timeline, write_timeline

ROOT = Path(__file__).resolve().parents[2]
SHIFT, EPISODE = 300, (200, 230)


def fail_slow_jobs() -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, float]]]:
    common = {"step_s": 10.0, "step_jitter": 0.02, "checkpoint_every_steps": 50, "startup_s": 60.0}
    s1, e1, t1 = synth_timeline(800, seed=1, job_id="shift", slowdowns=[(SHIFT, None, 1.15)], **common)
    s2, e2, t2 = synth_timeline(600, seed=2, job_id="episode", slowdowns=[(*EPISODE, 1.3)], **common)
    steps = pd.concat([s1, s2], ignore_index=True)
    events = pd.concat([e1, e2], ignore_index=True)
    for frame in (steps, events):
        frame["job_id"] = frame["job_id"].astype(str)
    return steps, events, {"shift": t1, "episode": t2}


def test_the_fail_slow_case_is_found_where_it_starts():
    steps, events, truth = fail_slow_jobs()
    m = runtime_goodput(steps, events)
    cp = m.change_points
    shift = cp[cp["job_id"] == "shift"]
    episode = cp[cp["job_id"] == "episode"]
    # change points within 3 steps of the truth
    assert len(shift) == 1 and abs(int(shift["step"].iloc[0]) - SHIFT) <= 3
    assert len(episode) == 2
    assert abs(int(episode["step"].iloc[0]) - EPISODE[0]) <= 3
    assert abs(int(episode["step"].iloc[1]) - EPISODE[1]) <= 3
    assert shift["after_s"].iloc[0] / shift["before_s"].iloc[0] == pytest.approx(1.15, rel=0.02)
    for job in ("shift", "episode"):
        # the fault-free step time is the healthy regime's, within 1 %
        assert m.fault_free_step_s[job] == pytest.approx(truth[job]["fault_free_step_s"], rel=0.01)
        # slow-step time within 10 % of the excess the generator added
        assert m.slow_step_by_job_s[job] == pytest.approx(truth[job]["slowdown_s"], rel=0.10)
        assert m.slow_step_by_job_s[job] > 0.0
    assert m.slow_step_s == pytest.approx(sum(m.slow_step_by_job_s.values()))
    healthy = m.regimes[m.regimes["healthy"]].set_index("job_id")
    assert int(healthy.loc["shift", "first_step"]) < SHIFT <= int(healthy.loc["shift", "last_step"]) + 4


def test_the_old_estimate_made_the_slow_down_the_baseline():
    # the median of all steps is the slow level when most steps ran slow: the estimate this replaces
    steps, events, _ = fail_slow_jobs()
    job = steps[steps["job_id"] == "shift"]
    compute = ((job["end"] - job["start"]).dt.total_seconds() - job["input_wait_s"]).to_numpy()
    assert np.median(compute[1:]) > 11.0
    m = runtime_goodput(steps, events, job_id="shift")
    assert m.fault_free_step_s["shift"] < 10.2


def test_the_cli_reports_change_points_and_slow_step_per_job(tmp_path, capsys):
    steps, events, truth = fail_slow_jobs()
    path = write_timeline(steps, events, tmp_path / "fail_slow.parquet")
    assert main(["runtime", str(path), "--format", "canonical", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert set(res["change_points"]) == {"shift", "episode"}
    [point] = res["change_points"]["shift"]
    assert set(point) >= {"step", "time", "before_s", "after_s"}
    assert abs(point["step"] - SHIFT) <= 3
    assert pd.Timestamp(point["time"]).tzinfo is not None
    assert res["slow_step_by_job_s"]["shift"] == pytest.approx(truth["shift"]["slowdown_s"], rel=0.10)
    assert main(["runtime", str(path), "--format", "canonical"]) == 0
    text = capsys.readouterr().out
    assert "change points            3 (level shifts" in text
    assert "  'shift': step " in text and "(+15." in text


def _bundled_timelines() -> list[tuple[str, list[str]]]:
    # every bundled timeline sample, as the pinned runtime numbers list them
    pinned = json.loads((Path(__file__).with_name("pinned_runtime_e017516.json")).read_text())["samples"]
    return [(v["format"], [str(ROOT / p) for p in v["paths"]]) for k, v in sorted(pinned.items())
            if k.endswith("|committed")]


#: Bundled timelines whose step series shifts in the raw records (checked in the test).
_SHIFTED = {"result_0.txt": (336, 1.4), "nvidia_eos_n128_llama2_70b_lora_result_0.txt": (57, 0.8)}


@pytest.mark.parametrize("fmt,paths", _bundled_timelines())
def test_no_change_point_on_a_bundled_timeline_without_a_shift(fmt, paths):
    tables, _ = READERS[fmt].read(paths)
    steps = tables["steps"]
    m = runtime_goodput(steps, tables["events"])
    name = Path(paths[0]).name
    if name not in _SHIFTED:
        assert m.change_points.empty, m.change_points
        return
    # the raw step durations shift at that step by more than the rule's 5 %: a true positive
    at, ratio = _SHIFTED[name]
    dur = (steps["end"] - steps["start"]).dt.total_seconds().to_numpy()
    before, after = np.median(dur[1:at]), np.median(dur[at:at + 10])
    assert (after / before > ratio) if ratio > 1 else (after / before < ratio)
    assert int(m.change_points["step"].iloc[0]) == at
