"""Issue 30 item 4: folder names derived from data are unique and bounded (baseline groups)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from regress_support import regression_units

from fleetlib.regress.baselines import build_baselines, load_baseline

LONG = "p" * 300  # a 300-character partition name (was an OSError traceback: file name too long)


def _renamed(units: Any, names: dict[str, str]) -> Any:
    """The units with the pools renamed job by job: job i of pool 'train' gets names[i % len]."""
    jobs = units.jobs.copy()
    train = jobs.index[jobs["pool"] == "train"]
    choices = list(names.values())
    jobs.loc[train, "pool"] = [choices[i % len(choices)] for i in range(len(train))]
    cycles = units.cycles.copy()
    return dataclasses.replace(units, jobs=jobs, cycles=cycles)


def test_pools_differing_by_space_and_underscore_and_a_300_character_pool_get_their_own_folders(tmp_path):
    base = regression_units()["units"]["baseline"]
    names = {"space": "gpu a", "underscore": "gpu_a", "long": LONG}
    units = _renamed(base, names)
    index = build_baselines([units], tmp_path / "bl")
    folders = [g["folder"] for g in index["groups"]]
    assert len(set(folders)) == len(folders)  # no two groups share a folder
    assert all(len(part) <= 255 for f in folders for part in Path(f).parts)
    for pool in names.values():
        groups = [g for g in index["groups"] if g["pool"] == pool]
        assert groups, pool
        for g in groups:
            stored = load_baseline(tmp_path / "bl", pool, g["architecture"], g["software_version"])
            assert stored is not None and len(stored.jobs) == g["jobs"]
            assert set(stored.jobs["pool"]) == {pool}  # read back its own jobs, not the other pool's
