"""Issue 33, item 3: an elastic job in the fleet walk, device-time weighted by the scheduler's size segments.

The acceptance job of ``tests/runtime/test_runtime_elastic.py`` (four slices, one device each here), with
the scheduler's allocation rows as size segments: 4 devices over [0, 60) s, 3 over [60, 155) (the lost
slice is released to the pool at the slice loss), 4 over [155, 190) (regained at the regain).  The pool
has 4 devices in service over the window [0, 190).  By hand, in device-seconds:

=====================  =====================  ==========================================
piece                  devices                parts (seconds x devices)
=====================  =====================  ==========================================
[0, 60)                4                      startup 10 x 4 = 40; steps 0-4 50 x 4 = 200
[60, 155)              3                      elastic wait 20 x 3 = 60; re-init 15 x 3 = 45;
                                              steps 5-9 (12 s) 60 x 3 = 180
[155, 190)             4                      elastic wait 5 x 4 = 20; re-init 10 x 4 = 40;
                                              steps 10-11 20 x 4 = 80
=====================  =====================  ==========================================

held 665 = 4 x 60 + 3 x 95 + 4 x 35; productive 460; elastic_wait 80; elastic_reinit 85; startup 40.
S = 665 / 760 (the released slice's 95 device-s idle, returned to the pool); R = 460 / 665.  Steps 5-9
ran on the smaller mesh: not slow-step time (step_time_above_baseline 0) but P's scaling,
elastic_scaling = 180 - 5 x 10 s x 4 = -20 device-s (three slices took 36 device-s a step where the
full mesh's fault-free step takes 40).  The model config's ideal step is 20 device-s: P = 240 / 460.
Slice efficiencies (ml-goodput-measurement's): stepping 500 / 760, available 665 / 760.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.fleet.commands import render_fleet
from fleetlib.runtime import tables_from_seconds, write_timeline
from fleetlib.scheduling import write_allocations

T0 = pd.Timestamp("2026-01-05T00:00:00Z")
PEAK = 312e12  # A100 SXM dense bf16 FLOP/s, the model config's named peak


def _timeline() -> tuple[pd.DataFrame, pd.DataFrame]:
    steps = [(0, k, 10.0 + 10 * k, 20.0 + 10 * k) for k in range(5)]
    steps += [(0, k, 95.0 + 12 * (k - 5), 107.0 + 12 * (k - 5)) for k in range(5, 10)]
    steps += [(0, 10, 170.0, 180.0), (0, 11, 180.0, 190.0)]
    events = [(0, 0.0, "gang_complete"), (0, 60.0, "resize_begin"), (0, 80.0, "resize_end"),
              (0, 155.0, "resize_begin"), (0, 160.0, "resize_end"), (0, 190.0, "job_completed"),
              (0, 190.0, "release")]
    s, e = tables_from_seconds(steps, events, job_id="el1", origin=T0.isoformat())
    devices = {60.0: (4, 3), 80.0: (3, 3), 155.0: (3, 4), 160.0: (4, 4)}
    offset = (e["time"] - T0).dt.total_seconds()
    e["devices_before"] = pd.array([devices.get(x, (None, None))[0] for x in offset], dtype="Int64")
    e["devices_after"] = pd.array([devices.get(x, (None, None))[1] for x in offset], dtype="Int64")
    return s, e


def _bundle(root: Path) -> Path:
    def at(seconds: list[float]) -> pd.Series:
        return pd.Series([T0 + pd.Timedelta(seconds=x) for x in seconds])

    alloc = pd.DataFrame({
        "job_id": "el1", "attempt": [0, 1, 2], "pool": "p", "devices": [4, 3, 4],
        "submit": at([0, 60, 155]), "first_assigned": at([0, 60, 155]), "gang_complete": at([0, 60, 155]),
        "release": at([60, 155, 190]), "priority": 0.0, "elastic": True, "end_state": "completed",
        "requested_devices": [4, 3, 4]})
    cap = pd.DataFrame({"pool": ["p"], "start": at([0]), "end": at([190]), "devices_in_service": [4],
                        "devices_out_of_service": [0]})
    (root / "scheduler").mkdir(parents=True)
    write_allocations(alloc, cap, root / "scheduler" / "allocations.parquet")
    (root / "timelines").mkdir()
    write_timeline(*_timeline(), root / "timelines" / "el1.parquet")
    (root / "models").mkdir()
    (root / "models" / "el1.yaml").write_text(
        f"name: elastic sample\naccelerator: A100 SXM\ndevices: 4\nuseful_flops_per_step: {20 * PEAK!r}\n"
        "convention: 6n\n")
    (root / "fleet.yaml").write_text(
        "name: elastic acceptance job\n"
        f"window: ['{T0.isoformat()}', '{(T0 + pd.Timedelta(seconds=190)).isoformat()}']\n"
        "scheduler: {format: canonical, files: [scheduler/allocations.parquet]}\n"
        "timelines: {format: canonical, files: [timelines/el1.parquet]}\n"
        "models: {el1: models/el1.yaml}\n")
    return root / "fleet.yaml"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory):
    return measure_fleet(_bundle(tmp_path_factory.mktemp("elastic")))


def test_held_device_time_follows_the_size_segments(fleet) -> None:
    job = fleet.jobs.loc["el1"]
    assert job["held_device_s"] == 665.0 and job["timeline_held_device_s"] == pytest.approx(665.0, abs=1e-9)
    assert job["reconciliation_residual"] == pytest.approx(0.0, abs=1e-9)
    assert fleet.scheduling.numerator == 665.0 and fleet.scheduling.denominator == 760.0


def test_resizes_are_runtime_losses_in_device_seconds(fleet) -> None:
    r = fleet.runtime
    assert {k: v for k, v in r.losses.items() if v} == pytest.approx(
        {"startup": 40.0, "elastic_wait": 80.0, "elastic_reinit": 85.0}, abs=1e-9)
    assert r.numerator == pytest.approx(460.0, abs=1e-9) and r.denominator == 665.0
    assert math.fsum([r.numerator, *r.losses.values()]) == pytest.approx(r.denominator, abs=1e-9)


def test_the_smaller_mesh_goes_to_p_not_to_slow_steps(fleet) -> None:
    job = fleet.jobs.loc["el1"]
    assert job["step_time_above_baseline"] == pytest.approx(0.0, abs=1e-9)
    assert job["elastic_scaling_device_s"] == pytest.approx(-20.0, abs=1e-9)
    p = fleet.program
    assert p.denominator == fleet.runtime.numerator
    assert p.numerator == pytest.approx(240.0, rel=1e-12) and p.value == pytest.approx(240 / 460, rel=1e-12)
    assert p.losses["below_ideal_rate"] == pytest.approx(220.0, rel=1e-9)


def test_slice_efficiencies_are_reported_beside_r(fleet) -> None:
    out = fleet.to_dict()
    assert out["slice_efficiency"]["stepping"] == pytest.approx(500 / 760, abs=1e-12)
    assert out["slice_efficiency"]["available"] == pytest.approx(665 / 760, abs=1e-12)
    assert out["slice_efficiency"]["jobs"] == 1
    rec = out["jobs"]["el1"]
    assert rec["stepping_slice_efficiency"] == pytest.approx(500 / 760, abs=1e-12)
    assert rec["available_slice_efficiency"] == pytest.approx(0.875, abs=1e-12)
    assert out["factors"]["runtime"]["losses"]["elastic_wait"] == pytest.approx(80.0, abs=1e-9)
    text = render_fleet(out)
    assert "slice efficiency of 1 elastic job(s): stepping  65.8 %, available  87.5 %" in text


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-6)


def test_a_synthetic_elastic_fleet_is_measured_as_injected(tmp_path: Path) -> None:
    from fleetlib.fleet import synth_fleet

    b = synth_fleet(tmp_path, devices=32, days=0.5, seed=0, scheduler="canonical",
                    inject={"elastic": {"wait_s": 60, "reinit_s": 90}})
    truth = b.truth
    resized = [j for j, row in truth["jobs"].items() if "resize" in row]
    assert resized and truth["injected"]["options"]["elastic_wait_s"] == 60
    m = measure_fleet(b.manifest)
    for name in ("scheduling", "runtime", "program"):
        want, got = truth["factors"][name], m.factor(name)
        assert _close(got.numerator, want["numerator_device_s"]) and _close(got.value, want["value"])
        for k, v in want["losses"].items():
            assert _close(got.losses[k], v), (name, k)
    assert truth["factors"]["runtime"]["losses"]["elastic_wait"] > 0
    for j in resized:
        row, job = truth["jobs"][j], m.jobs.loc[j]
        assert _close(job["held_device_s"], row["held_device_s"])
        assert _close(job["productive_device_s"], row["productive_device_s"])
        assert _close(job["step_time_above_baseline"], row["step_time_above_baseline_device_s"])
        assert _close(job["elastic_scaling_device_s"], row["elastic_scaling_device_s"])
        assert 0 < job["stepping_slice_efficiency"] < job["available_slice_efficiency"] < 1


def test_elastic_injection_needs_size_segments(tmp_path: Path) -> None:
    from fleetlib.fleet import synth_fleet
    from fleetlib.quality import DomainError

    with pytest.raises(DomainError, match="scheduler='canonical'"):
        synth_fleet(tmp_path, inject={"elastic": {"wait_s": 60, "reinit_s": 90}})


def test_the_dask_engine_weighs_the_segments_too(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    manifest = _bundle(tmp_path / "bundle")
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
        as cluster,
        distributed.Client(cluster) as client,
    ):
        m = measure_fleet(manifest, engine="dask", client=client, progress=False)
    assert m.runtime.numerator == pytest.approx(460.0, abs=1e-9)
    assert m.runtime.losses["elastic_reinit"] == pytest.approx(85.0, abs=1e-9)
    assert m.jobs.loc["el1", "elastic_scaling_device_s"] == pytest.approx(-20.0, abs=1e-9)
    assert m.to_dict()["slice_efficiency"]["stepping"] == pytest.approx(500 / 760, abs=1e-12)
