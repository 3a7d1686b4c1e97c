"""The walk pages' view of the report's fleet (fleetlib.report.walk_fleet)."""

from __future__ import annotations

from pathlib import Path

from fleetlib.fleet import measure_fleet
from fleetlib.report import walk_fleet

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "data" / "fleet" / "synthetic" / "fleet.yaml"
SLURM = ROOT / "data" / "fleet" / "slurm_sample" / "fleet.yaml"


def test_the_walk_measures_the_bundle_as_the_index_does() -> None:
    walk = walk_fleet(SLURM)
    index = measure_fleet(SLURM)  # the call behind the index's headline
    assert walk.measurement.mpg == index.mpg
    for boundary in ("scheduling", "runtime", "program"):
        assert walk.measurement.factor(boundary).value == index.factor(boundary).value
    # the window a rung's measure() takes: the fleet's own ends when no stretch is left out
    assert walk.window == (index.window.start, index.window.end)
    assert len(walk.job_table()) == len(index.jobs)


def test_traced_jobs_are_those_with_a_model_config_in_id_order() -> None:
    walk = walk_fleet(SYNTHETIC)
    expected = sorted(set(walk.manifest.traces) & set(walk.manifest.models))
    assert walk.traced_jobs() == expected and expected
    assert not walk_fleet(SLURM).traced_jobs()  # the Slurm sample carries no step traces


def test_the_introduction_names_the_bundle_and_counts_its_records() -> None:
    text = walk_fleet(SLURM).introduction().data
    assert "slurm" in text and "3 timeline file(s)" in text and "0 traced job(s)" in text
