"""Injected regressions of :func:`fleetlib.fleet.synth.synth_fleet` (``inject=``): options and writers.

Split from :mod:`fleetlib.fleet.synth` (which imports every name): the parsed options, per-rank step
timers of the synthetic jobs, the manifest's ``contract:`` block of an injected bundle and the
``injected`` block of its truth.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fleetlib.quality import DomainError

if TYPE_CHECKING:
    from fleetlib.fleet.synth import _Job

_GPUS_PER_NODE = 8


#: Keys of ``synth_fleet(inject=...)``.
INJECTION_KEYS: tuple[str, ...] = (
    "software_version",
    "versions",
    "compile_extra_s",
    "checkpoint_factor",
    "slow_nodes",
    "slowdown",
    "quota_nodes",
    "kernel_regression",
    "rank_timers",
    "scheduler_policy",
    "storage",
    "compiler_version",
)


@dataclass(frozen=True)
class _Injection:
    """What :func:`synth_fleet`'s ``inject=`` changes (see its docstring)."""

    software_version: str = "synthetic"
    versions: tuple[str, ...] = ()
    compile_extra_s: int = 0
    checkpoint_factor: float = 1.0
    slow_nodes: int = 0
    slowdown: float = 0.10
    quota_nodes: int = 0
    kernel_version: str | None = None
    kernel_slowdown: float = 0.0
    rank_timers: bool = False
    scheduler_policy: str | None = None
    storage: str | None = None
    compiler_version: str | None = None

    @classmethod
    def parse(cls, inject: Mapping[str, Any]) -> _Injection:
        unknown = sorted(set(inject) - set(INJECTION_KEYS))
        if unknown:
            raise DomainError(f"inject: unknown key(s) {unknown}; known: {list(INJECTION_KEYS)}")

        def num(key: str, default: float, lo: float, integer: bool = False) -> Any:
            v = inject.get(key, default)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo:
                raise DomainError(f"inject.{key} must be a number >= {lo}; got {v!r}")
            if integer and int(v) != v:
                raise DomainError(f"inject.{key} must be a whole number; got {v!r}")
            return int(v) if integer else float(v)

        kr = inject.get("kernel_regression") or {}
        if not isinstance(kr, Mapping) or (kr and set(kr) != {"version", "slowdown"}):
            raise DomainError("inject.kernel_regression must be {version: V, slowdown: fraction}")
        versions = tuple(str(v) for v in inject.get("versions", ()))
        if kr and str(kr["version"]) not in versions:
            raise DomainError("inject.kernel_regression.version must be one of inject.versions")
        return cls(
            software_version=str(inject.get("software_version", "synthetic")),
            versions=versions,
            compile_extra_s=num("compile_extra_s", 0, 0, integer=True),
            checkpoint_factor=num("checkpoint_factor", 1.0, 0.0),
            slow_nodes=num("slow_nodes", 0, 0, integer=True),
            slowdown=num("slowdown", 0.10, 0.0),
            quota_nodes=num("quota_nodes", 0, 0, integer=True),
            kernel_version=str(kr["version"]) if kr else None,
            kernel_slowdown=float(kr["slowdown"]) if kr else 0.0,
            rank_timers=bool(inject.get("rank_timers", False)),
            scheduler_policy=_text(inject.get("scheduler_policy")),
            storage=_text(inject.get("storage")),
            compiler_version=_text(inject.get("compiler_version")),
        )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _slow_node_index(job: _Job, slow: frozenset[str]) -> int | None:
    hits = [i for i, n in enumerate(job.nodes) if n in slow]
    return hits[0] if hits else None


def _retained(tl: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the retained executions (last per step number): step numbers, compute seconds, causes."""
    last: dict[int, int] = {}
    for i, st in enumerate(tl.steps):
        last[int(st[1])] = i
    idx = np.array(sorted(last.values()), dtype=int)
    arr = np.array([(st[1], st[3] - st[2] - st[4]) for st in tl.steps], dtype=float)[idx]
    return arr[:, 0].astype(np.int64), arr[:, 1], np.array(tl.causes, dtype=object)[idx]


def _write_rank_timers(out: Path, jobs: list[_Job], models: Mapping[str, str], seed: int) -> list[str]:
    """Write per-rank step timers (``rank, step, duration_s``) of every timed job.

    Each retained step's compute time (wall less input wait) is the slowest rank's; the others run
    0-2 % faster.  A background slow step slows every rank alike (no straggler); in an injected
    episode step the slow node's eight ranks take the whole step, the others the step less the
    injected slowdown.
    """
    rels = []
    for job in jobs:
        tl = job.timeline
        if job.kind != "timeline" or tl is None or not tl.steps:
            continue
        g = np.random.default_rng([seed, 13, int(job.job_id)])
        steps, compute, causes = _retained(tl)
        n_steps, ranks = steps.size, job.devices
        ep = causes == "episode"
        slow_extra = math.ceil(job.slowdown * (tl.fault_free_s or tl.step_s)) if ep.any() else 0
        healthy = np.where(ep, compute - slow_extra, compute)
        dur = healthy[:, None] * g.uniform(0.98, 1.0, size=(n_steps, ranks))
        culprit = g.integers(0, ranks, size=n_steps)
        dur[np.arange(n_steps), culprit] = healthy
        node = job.slow_node
        if node is not None and ep.any():
            lo = node * _GPUS_PER_NODE
            dur[np.ix_(np.flatnonzero(ep), np.arange(lo, lo + _GPUS_PER_NODE))] = compute[ep][:, None]
        frame = pd.DataFrame(
            {
                "rank": np.tile(np.arange(ranks, dtype=np.int64), n_steps),
                "step": np.repeat(steps, ranks),
                "duration_s": dur.reshape(-1),
            }
        )
        rel = f"rank_timers/{job.job_id}.parquet"
        (out / "rank_timers").mkdir(parents=True, exist_ok=True)
        frame.to_parquet(out / rel, index=False)
        rels.append(rel)
    return rels


def _inj_yaml(inj: _Injection, jobs: list[_Job], rank_files: list[str]) -> str:
    """Return the manifest's ``contract:`` (and ``rank_timers:``) of an injected bundle."""
    text = "contract:\n"
    text += f"  software_version: {json.dumps(sorted(set(inj.versions)) or inj.software_version)}\n"
    text += "  pool: all\n  architecture: H100 SXM\n"
    if inj.scheduler_policy is not None:
        text += f"  scheduler_policy: {json.dumps(inj.scheduler_policy)}\n"
    if inj.compiler_version is not None:
        text += f"  compiler_version: {json.dumps(inj.compiler_version)}\n"
    if inj.storage is not None:
        text += f"  storage: {json.dumps(inj.storage)}\n"
    if inj.versions:
        text += "  jobs:\n" + "".join(
            f"    '{j.job_id}': {{software_version: {json.dumps(j.version)}}}\n" for j in jobs
        )
    if rank_files:
        text += "rank_timers:\n  files:\n" + "".join(f"    - {r}\n" for r in rank_files)
    return text


def _inj_truth(
    inj: _Injection, jobs: list[_Job], stranded: list[str], slow: frozenset[str]
) -> dict[str, Any]:
    """Return what was injected: the options, stranded and slow nodes, each straggler episode, versions."""
    episodes, singles = [], []
    for j in jobs:
        if not (j.episodes and j.slow_node is not None and j.kind == "timeline" and j.timeline is not None):
            continue
        lo = j.slow_node * _GPUS_PER_NODE
        steps, _compute, causes = _retained(j.timeline)
        hit = steps[causes == "episode"]
        # consecutive retained slow steps: a restart can cut an injected range (its re-run is warm-up)
        cuts = np.flatnonzero(np.diff(hit) != 1) + 1
        for run in np.split(hit, cuts) if hit.size else []:
            rec = {
                "job_id": j.job_id,
                "node": j.nodes[j.slow_node],
                "ranks": list(range(lo, lo + _GPUS_PER_NODE)),
                "steps": [int(run[0]), int(run[-1])],
                "injected_steps": [list(e) for e in j.episodes],
            }
            (episodes if run.size >= 2 else singles).append(rec)
    opts = {k: getattr(inj, k) for k in inj.__dataclass_fields__}
    opts["versions"] = list(inj.versions)
    return {
        "options": opts,
        "stranded_nodes": list(stranded),
        "slow_nodes": sorted(slow),
        "straggler_episodes": episodes,
        "single_slow_steps": singles,
        "job_versions": {j.job_id: j.version for j in jobs},
    }
