"""The fleet-scale generator (vectorised, partitioned canonical timelines): measured equals injected."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.quality import DomainError


@pytest.mark.parametrize("seed", [0, 1])
def test_every_factor_and_loss_equals_the_truth(tmp_path: Path, seed: int) -> None:
    bundle = synth_fleet_scale(tmp_path / "b", devices=128, days=0.5, seed=seed, partitions=2,
                               steps_per_job=(10, 30))
    truth = bundle.truth
    m = measure_fleet(bundle.manifest)
    assert len(list((tmp_path / "b" / "timelines").glob("*.parquet"))) == 2
    assert math.isclose(m.mpg, truth["mpg"], rel_tol=1e-9)
    for f in (m.scheduling, m.runtime, m.program):
        t = truth["factors"][f.boundary]
        assert math.isclose(f.numerator, t["numerator_device_s"], rel_tol=1e-9), f.boundary
        assert math.isclose(f.denominator, t["denominator_device_s"], rel_tol=1e-9), f.boundary
        for k, v in t.get("losses", {}).items():
            assert math.isclose(f.losses.get(k, 0.0), v, rel_tol=1e-9, abs_tol=1e-6), (f.boundary, k)
    assert truth["factors"]["runtime"]["losses"]["zombie"] > 0
    assert truth["factors"]["runtime"]["losses"]["unobserved"] > 0


def test_same_arguments_write_the_same_files(tmp_path: Path) -> None:
    a = synth_fleet_scale(tmp_path / "a", devices=32, days=0.25, seed=5, steps_per_job=(5, 10))
    b = synth_fleet_scale(tmp_path / "b", devices=32, days=0.25, seed=5, steps_per_job=(5, 10))
    assert a.files == b.files
    for rel in a.files:
        if rel.endswith(".parquet") or rel.endswith(".json"):
            assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    assert json.loads((tmp_path / "a" / "truth.json").read_text())["generator"]["allocations"] > 0


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DomainError, match="multiple of 8"):
        synth_fleet_scale(tmp_path, devices=20)
    with pytest.raises(DomainError, match="one hour"):
        synth_fleet_scale(tmp_path, devices=16, days=0.01)
    with pytest.raises(DomainError, match="steps_per_job"):
        synth_fleet_scale(tmp_path, devices=16, days=1, steps_per_job=(2, 1))
