"""Synthetic regression pairs: one baseline fleet and a candidate per injected regression.

:func:`regression_pairs` writes, with :func:`fleetlib.fleet.synth.synth_fleet` on one seed (so every
bundle draws the same jobs), a baseline and one candidate per regression of the chapter's Table 4:

==================  =====================================================  =================  ==========
candidate           injected                                               tier               factor
==================  =====================================================  =================  ==========
``compiler``        a compiler release adds ``compile_extra_s`` to every   startup_recovery   runtime
                    job's startup (compiler version stated: under test)
``storage``         a storage change doubles the checkpoint pause          startup_recovery   runtime
``gray_failure``    one train node slowed by ``slowdown`` in straggler     gray_failure       program
                    episodes of the jobs placed on it
``quota``           a quota change strands ``quota_nodes`` train nodes     allocation         scheduling
                    (scheduler policy stated: under test)
``kernel``          a kernel regression on (H100 SXM, version 2.2)         fleet_baseline     program
==================  =====================================================  =================  ==========

Every bundle has two software versions (2.1 and 2.2, per job) and per-rank timers.

:func:`checkpoint_twin` writes a fleet and its twin in which every synchronous checkpoint pause is
multiplied and nothing else; :func:`elastic_twin` a fleet of elastic jobs and its twin in which every
resize waits longer (the same seed: the same jobs, steps and failures); :func:`unchanged_pairs`
writes pairs of fleets drawn with the same parameters and different seeds, in which nothing changed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "EXPECTED", "RegressionPair", "checkpoint_twin", "elastic_twin", "regression_pairs", "unchanged_pairs",
]

#: Per candidate: the tier that must catch it, the factor it is charged to, the fields under test.
EXPECTED: dict[str, dict[str, Any]] = {
    "compiler": {
        "tier": "startup_recovery",
        "factor": "runtime",
        "under_test": ["compiler_version"],
        "metric": "startup per job (gang complete -> first step)",
    },
    "storage": {
        "tier": "startup_recovery",
        "factor": "runtime",
        "under_test": [],
        "metric": "checkpoint pause per commit",
    },
    "gray_failure": {
        "tier": "gray_failure",
        "factor": "program",
        "under_test": [],
        "metric": "straggler episodes per million rank-steps",
    },
    "quota": {
        "tier": "allocation",
        "factor": "scheduling",
        "under_test": ["scheduler_policy"],
        "metric": "idle while queued (stranded) share of capacity",
    },
    "kernel": {
        "tier": "fleet_baseline",
        "factor": "program",
        "under_test": [],
        "metric": "program goodput, H100 SXM x 2.2",
    },
}
_BASE: dict[str, Any] = {
    "versions": ["2.1", "2.2"],
    "rank_timers": True,
    "compiler_version": "xla-1",
    "scheduler_policy": "fair-share",
    "storage": "fs-a",
}


@dataclass
class RegressionPair:
    """A baseline and its candidates.

    Attributes
    ----------
    baseline
        The baseline bundle's ``fleet.yaml``.
    candidates
        ``{name: fleet.yaml}``.
    truth
        ``{name: truth.json object}`` (``"baseline"`` too); each candidate's ``injected`` block.
    expected
        :data:`EXPECTED` for the candidates written.
    """

    baseline: Path
    candidates: dict[str, Path]
    truth: dict[str, dict[str, Any]]
    expected: dict[str, dict[str, Any]]


def candidate_injections(
    *,
    compile_extra_s: int = 300,
    checkpoint_factor: float = 2.0,
    slowdown: float = 0.10,
    quota_nodes: int = 3,
    kernel_slowdown: float = 0.25,
) -> dict[str, dict[str, Any]]:
    """Return the ``inject=`` options of the baseline and of each candidate."""
    return {
        "baseline": dict(_BASE),
        "compiler": {**_BASE, "compiler_version": "xla-2", "compile_extra_s": compile_extra_s},
        "storage": {**_BASE, "storage": "fs-b", "checkpoint_factor": checkpoint_factor},
        "gray_failure": {**_BASE, "slow_nodes": 1, "slowdown": slowdown},
        "quota": {**_BASE, "scheduler_policy": "quota-v2", "quota_nodes": quota_nodes},
        "kernel": {**_BASE, "kernel_regression": {"version": "2.2", "slowdown": kernel_slowdown}},
    }


def regression_pairs(
    out_dir: str | Path,
    *,
    devices: int = 96,
    days: float = 1.0,
    seed: int = 0,
    candidates: Any = None,
    **options: Any,
) -> RegressionPair:
    """Write a baseline fleet and one candidate per injected regression.

    Parameters
    ----------
    out_dir
        Folder; each bundle is written to ``out_dir/NAME``.
    devices, days, seed
        As :func:`fleetlib.fleet.synth.synth_fleet` (the same for every bundle).
    candidates
        Names to write (default all of :data:`EXPECTED`).
    **options
        Sizes of the injections (:func:`candidate_injections`).

    Returns
    -------
    RegressionPair
        Manifest paths, truths and what each candidate must be caught by.
    """
    from fleetlib.fleet.synth import synth_fleet

    inj = candidate_injections(**options)
    names = list(EXPECTED) if candidates is None else list(candidates)
    out = Path(out_dir)
    truth = {}
    paths = {}
    for name in ["baseline", *names]:
        b = synth_fleet(out / name, devices=devices, days=days, seed=seed, inject=inj[name])
        paths[name], truth[name] = b.manifest, b.truth
    return RegressionPair(
        baseline=paths.pop("baseline"),
        candidates=paths,
        truth=truth,
        expected={n: EXPECTED[n] for n in names},
    )


def checkpoint_twin(
    out_dir: str | Path, *, devices: int = 32, days: float = 2.0, seed: int = 0, factor: float = 2.0
) -> tuple[Path, Path]:
    """Write a fleet and its twin with every synchronous checkpoint pause multiplied by ``factor``.

    Both are drawn from one seed with the same (empty) contract, so the same jobs arrive with the same
    steps, failures and commits; the twin's pauses are ``round(factor x pause)`` seconds (its jobs last
    longer, so placement and queueing follow from that alone).

    Parameters
    ----------
    out_dir
        Folder; the bundles are written to ``out_dir/baseline`` and ``out_dir/twin``.
    devices, days, seed
        As :func:`fleetlib.fleet.synth.synth_fleet` (default: 4 nodes, two days).
    factor
        Multiplier of every checkpoint pause.

    Returns
    -------
    tuple of Path
        The two ``fleet.yaml`` paths (baseline, twin).
    """
    from fleetlib.fleet.synth import synth_fleet

    out = Path(out_dir)
    a = synth_fleet(out / "baseline", devices=devices, days=days, seed=seed, inject={})
    b = synth_fleet(out / "twin", devices=devices, days=days, seed=seed, inject={"checkpoint_factor": factor})
    return a.manifest, b.manifest


def elastic_twin(
    out_dir: str | Path, *, devices: int = 32, days: float = 2.0, seed: int = 0, wait_s: int = 60,
    reinit_s: int = 90, factor: int = 2
) -> tuple[Path, Path]:
    """Write a fleet of elastic jobs and its twin in which every resize's elastic wait is ``factor`` x longer.

    Both are drawn from one seed on canonical scheduler records (size segments), so the same jobs
    arrive with the same steps; each eligible job loses a quarter of its devices after its first
    commit and regains them three steps later (:func:`fleetlib.fleet.synth.synth_fleet`'s
    ``inject={"elastic": ...}``), waiting ``wait_s`` (the twin: ``factor x wait_s``) and
    re-initialising ``reinit_s`` at each resize.

    Parameters
    ----------
    out_dir
        Folder; the bundles are written to ``out_dir/baseline`` and ``out_dir/twin``.
    devices, days, seed
        As :func:`fleetlib.fleet.synth.synth_fleet`.
    wait_s, reinit_s
        The baseline's elastic wait and re-initialisation per resize, seconds.
    factor
        Whole multiplier of the wait in the twin.

    Returns
    -------
    tuple of Path
        The two ``fleet.yaml`` paths (baseline, twin).
    """
    from fleetlib.fleet.synth import synth_fleet

    out = Path(out_dir)
    kw: dict[str, Any] = {"devices": devices, "days": days, "seed": seed, "scheduler": "canonical"}
    a = synth_fleet(out / "baseline", **kw, inject={"elastic": {"wait_s": wait_s, "reinit_s": reinit_s}})
    b = synth_fleet(out / "twin", **kw, inject={"elastic": {"wait_s": factor * wait_s, "reinit_s": reinit_s}})
    return a.manifest, b.manifest


def unchanged_pairs(
    out_dir: str | Path,
    *,
    pairs: int = 20,
    fleets: int = 7,
    devices: int = 32,
    days: float = 2.0,
    seed: int = 0,
) -> list[tuple[Path, Path]]:
    """Write unchanged pairs: fleets drawn with the same parameters and different seeds, paired.

    ``fleets`` fleets are written (seeds ``seed`` to ``seed + fleets - 1``) and the first ``pairs``
    of their pairs are returned, in order (0, 1), (0, 2), ... (7 fleets hold 21 pairs: a seventh of
    the fleets to write and measure that 20 disjoint pairs would need; a fleet is in several pairs).
    Nothing differs between the two fleets of a pair but the draw (their job ids coincide, their jobs
    do not: a job is identified by its id and submit time), so any significant change is a false
    alarm.

    Returns
    -------
    list of (Path, Path)
        The ``fleet.yaml`` paths of each pair.

    Raises
    ------
    DomainError
        More pairs than ``fleets`` hold.
    """
    from fleetlib.fleet.synth import synth_fleet
    from fleetlib.quality import DomainError

    if pairs > fleets * (fleets - 1) // 2:
        raise DomainError(f"{fleets} fleets hold {fleets * (fleets - 1) // 2} pairs; asked for {pairs}")
    out = Path(out_dir)
    written = [
        synth_fleet(out / f"seed{seed + i}", devices=devices, days=days, seed=seed + i, inject={}).manifest
        for i in range(fleets)
    ]
    return list(itertools.combinations(written, 2))[:pairs]
