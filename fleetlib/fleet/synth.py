"""A joint synthetic fleet with known truth: scheduler records, job timelines, traces and model configs.

:func:`synth_fleet` writes a fleet bundle (a folder with ``fleet.yaml``) in the *real* formats the
rungs read, and ``truth.json``: S, R, P, MPG and every loss category in device-seconds, computed from
the generator's own pieces (what it injected), never by calling the measuring code.

The simulated fleet
-------------------
* ``devices / 8`` nodes of 8 H100 GPUs in one pool (``train``), or two (``train`` and ``dev``, a
  quarter of the nodes) from 4 nodes up.  One node of ``train`` is drained for a stretch (a
  ``sacctmgr`` ``IDLE+DRAIN`` event: out of service, so outside the in-service denominator) and is
  otherwise left idle.
* Jobs of 1, 2 or 4 whole nodes arrive over the window and are placed greedily on the nodes that free
  up first; a job that cannot start on arrival waits (Slurm ``Eligible`` to ``Start``), which makes
  idle-while-queued capacity when a pool has free nodes but too few.  Slurm allocates atomically, so
  a Slurm record has no partial-gang hold (that loss is 0 in the truth, not unmatched).
* Every job but a few writes a canonical timeline (``write_timeline``) whose ``gang_complete`` is the
  allocation's ``Start`` and whose ``release`` is its ``End`` -- or up to a minute earlier (the job's
  logger stopped before the scheduler released it: the reconciliation residual).  Its steps run at a
  fault-free step time, after a cold launch (startup) whose first step is warm-up; some steps carry
  input waits (runtime loss) and some run slow (above the fault-free baseline: a *program* loss);
  synchronous checkpoints; some jobs fail once mid-step and restart from the last commit (detection
  and relaunch are recovery, the first step after the restart is warm-up charged to recovery, the
  erased steps and the partial step are rework); every job ends with a teardown (idle).
* Zombies: a complete gang held whose timeline has no step.  Unobserved: allocations with no
  timeline at all.
* Model configs (``useful_flops_per_step`` for an MFU the generator picks) for most timed jobs, and
  Kineto traces (:func:`fleetlib.program.synth.synth_step_traces`) for a stratified sample (the
  smallest and the largest job of each pool that has a model config).

Every time is a whole second, so the records represent the injected durations exactly.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.quality import DomainError

__all__ = ["FLEET_START", "INJECTION_KEYS", "SERVING_MODEL", "SERVING_POOL", "SyntheticFleetBundle",
           "synth_fleet"]

#: First instant of every synthetic fleet's window.
FLEET_START = pd.Timestamp("2024-05-01T00:00:00Z")
_GPUS_PER_NODE = 8
_ACCELERATOR = "H100 SXM"
#: H100 SXM dense BF16 peak (fleetlib.program.flops.PEAK_RATES), FLOP/s; stated here so the truth does
#: not depend on the measuring code.
_PEAK_FLOPS = 989e12
#: H100 SXM HBM bandwidth, bytes/s (the same datasheet), for the serving pool's decode floor truth.
_HBM_BYTES_PER_S = 3.35e12

#: The served model of a bundle's serving pool (``synth_fleet(serving=True)``): a 70B model in BF16 on one
#: 8-GPU node, with a 4,096-token grouped-query KV cache (80 layers x 8 KV heads x 128 x K,V x 2 bytes).
SERVING_MODEL: dict[str, Any] = {"name": "synthetic 70B replica", "accelerator": _ACCELERATOR,
                                 "n_params": 70.0e9, "bytes_per_param": 2.0, "devices": 8,
                                 "kv_cache_bytes": 2 * 80 * 8 * 128 * 2 * 4096}
#: Partition and nodes of the serving pool.
SERVING_POOL = "serve"
_SERVING_NODES = ("s001", "s002")
_RUNTIME_LOSSES = ("startup", "input_wait", "checkpoint", "recovery", "rework", "idle")
#: Runtime losses of an injected elastic resize (in the truth only when a job resized).
_ELASTIC_LOSSES = ("elastic_wait", "elastic_reinit")


@dataclass
class _Timeline:
    """One job's timeline in seconds after its gang completion, and the seconds injected per category."""

    steps: list[tuple[Any, ...]]
    events: list[tuple[Any, ...]]
    duration_s: int
    truth_s: dict[str, float]
    retained_steps: int
    step_s: int
    #: per entry of ``steps``: "" (healthy), "slow" (one rank, background) or "episode" (injected straggler)
    causes: list[str] = field(default_factory=list)
    fault_free_s: int = 0  # the job's fault-free step (step_s plus an injected kernel regression)
    #: an injected elastic resize (:func:`_elastic`): (shrink, regain) in seconds after gang completion and
    #: the devices lost between them; None: rigid
    resize: tuple[int, int, int] | None = None
    #: seconds of each category spent on the smaller mesh (device-weighted by the devices left)
    small_s: dict[str, float] = field(default_factory=dict)


@dataclass
class _Job:
    job_id: str
    pool: str
    nodes_n: int
    submit: int
    duration_s: int
    kind: str  # "timeline", "zombie" or "unobserved"
    timeline: _Timeline | None = None
    residual_s: int = 0
    partial_s: int = 0  # first node assigned -> gang complete (canonical records only)
    start: int = -1
    nodes: list[str] = field(default_factory=list)
    mfu: float | None = None
    traced: bool = False
    version: str | None = None  # software version (injection runs only)
    episodes: tuple[tuple[int, int], ...] = ()  # injected straggler step ranges (first, last)
    slow_node: int | None = None  # index in ``nodes`` of its slow node (injected gray failure)
    slowdown: float = 0.0  # the slow node's slowdown (injected gray failure)

    @property
    def devices(self) -> int:
        return self.nodes_n * _GPUS_PER_NODE

    @property
    def end(self) -> int:
        return self.start + self.duration_s

    @property
    def gang_complete(self) -> int:
        return self.start + self.partial_s

    @property
    def held_s(self) -> int:
        return self.duration_s - self.partial_s


@dataclass
class SyntheticFleetBundle:
    """What :func:`synth_fleet` wrote.

    Attributes
    ----------
    manifest
        Path of ``fleet.yaml``.
    truth
        The truth object (also written to ``truth.json``).
    files
        Every file written, relative to the bundle folder, sorted.
    """

    manifest: Path
    truth: dict[str, Any]
    files: list[str]


def _timeline(
    rng: np.random.Generator,
    *,
    fail: bool,
    inj: _Injection | None = None,
    episodes: tuple[tuple[int, int], ...] = (),
    kernel_extra: int = 0,
) -> _Timeline:
    """Simulate one job's timeline; return it with the seconds injected into each category.

    With an injection: ``compile_extra_s`` lengthens the startup, ``checkpoint_factor`` the
    checkpoint pause, ``kernel_extra`` seconds are added to every step (a slower fault-free step), and
    the steps of ``episodes`` run ``ceil(slowdown x step)`` longer (one node of the job is slow).  No
    extra random number is drawn, so the rest of the fleet is drawn as without the injection.
    """
    b0 = int(rng.choice([5, 10, 20]))
    n = int(rng.integers(40, 160))
    every = int(rng.choice([10, 20]))
    ckpt = int(rng.integers(5, 30))
    startup = int(rng.integers(60, 300))
    b = b0 + kernel_extra
    slow_extra = 0
    if inj is not None:
        startup += inj.compile_extra_s
        ckpt = round(ckpt * inj.checkpoint_factor)
        slow_extra = math.ceil(inj.slowdown * b)
    causes: list[str] = []
    truth = dict.fromkeys(("productive", "step_time_above_baseline", *_RUNTIME_LOSSES), 0.0)
    fail_step = int(rng.integers(every + 1, 2 * every + 1)) if fail and n > 2 * every + 2 else None
    steps: list[tuple[Any, ...]] = []
    events: list[tuple[Any, ...]] = [(0, 0.0, "gang_complete")]
    t = startup
    truth["startup"] += startup
    step, last_commit, in_run, cause = 1, 0, 0, "startup"
    pending: list[dict[str, float]] = []  # tentative contributions of steps since the last commit
    while step <= n:
        dur, wait, extra = b, 0, 0
        if in_run == 0:
            dur = 2 * b  # warm-up: the excess goes to what caused the (re)start
        elif in_run >= 2:
            u = rng.random()
            if u < 0.15:
                wait = int(rng.integers(1, 3 * b0))
            elif u < 0.30:
                extra = int(rng.integers(1, 2 * b0))
            dur = b + wait + extra
        why = "slow" if extra else ""
        if in_run >= 2 and any(a <= step <= z for a, z in episodes):  # not in a (re)start's warm-up
            # the slow node sets the step: its slowdown replaces a background slow step (drawn all the same)
            dur += slow_extra - extra
            extra, why = slow_extra, "episode"
        if fail_step is not None and step == fail_step:
            partial = int(rng.integers(1, b0))
            detect, restart = int(rng.integers(10, 60)), int(rng.integers(60, 240))
            events.append((0, float(t + partial), "failure"))
            events.append((0, float(t + partial + detect), "failure_detected"))
            events.append((0, float(t + partial + detect + restart), "restore", last_commit))
            for c in pending:  # erased: the whole step is rework
                for k, v in c.items():
                    truth[k] -= v
                truth["rework"] += sum(c.values())
            pending = []
            truth["rework"] += partial
            truth["recovery"] += detect + restart
            t += partial + detect + restart
            step, in_run, cause, fail_step = last_commit + 1, 0, "recovery", None
            continue
        steps.append((0, step, float(t), float(t + dur), float(wait)))
        causes.append(why)
        contrib = {
            "productive": float(b),
            "input_wait": float(wait),
            "step_time_above_baseline": float(extra),
        }
        if in_run == 0:
            contrib[cause] = float(dur - b)
        for k, v in contrib.items():
            truth[k] += v
        pending.append(contrib)
        t += dur
        if step % every == 0:
            events.append((0, float(t), "checkpoint_begin", step))
            events.append((0, float(t + ckpt), "checkpoint_commit", step))
            truth["checkpoint"] += ckpt
            t += ckpt
            last_commit, pending = step, []
        step += 1
        in_run += 1
    teardown = int(rng.integers(5, 120))
    truth["idle"] += teardown
    t += teardown
    events.append((0, float(t), "release"))
    return _Timeline(steps, events, t, truth, n, b0, causes, b)


def _place(
    jobs: list[_Job], pool_nodes: dict[str, list[str]], horizon: int, slow: frozenset[str] = frozenset()
) -> list[_Job]:
    """Place jobs greedily (earliest-free nodes); return those that fit inside the window.

    ``slow`` nodes (an injected gray failure) take only jobs drawn as slowed, each on one slow node.
    """
    free_at = {p: np.zeros(len(names), dtype=np.int64) for p, names in pool_nodes.items()}
    placed = []
    for job in sorted(jobs, key=lambda j: (j.submit, j.job_id)):
        fa = free_at[job.pool]
        if job.nodes_n > fa.size:
            continue
        order = np.argsort(fa, kind="stable")[: job.nodes_n]
        if slow:
            is_slow = np.array([n in slow for n in pool_nodes[job.pool]])
            key = np.where(is_slow, np.iinfo(np.int64).max, fa)
            order = np.argsort(key, kind="stable")[: job.nodes_n]
            if job.episodes:  # one slow node (the earliest free) and the rest healthy
                slow_i = np.flatnonzero(is_slow)
                pick = slow_i[np.argsort(fa[slow_i], kind="stable")[:1]]
                order = np.concatenate([pick, order[: job.nodes_n - 1]])
            if (is_slow[order].sum() != (1 if job.episodes else 0)) or order.size < job.nodes_n:
                continue
        start = max(job.submit, int(fa[order].max()))
        if start + job.duration_s > horizon:
            continue
        job.start = start
        fa[order] = start + job.duration_s
        job.nodes = [pool_nodes[job.pool][i] for i in sorted(order.tolist())]
        placed.append(job)
    return placed


def _scheduling_truth(
    jobs: list[_Job], pool_nodes: dict[str, list[str]], drains: list[tuple[str, str, int, int]], horizon: int
) -> dict[str, dict[str, float]]:
    """Per pool, per-second free and pending counts -> the scheduling partition in device-seconds."""
    out = {}
    for pool, names in pool_nodes.items():
        in_service = np.zeros(horizon + 1, dtype=np.int64)
        held = np.zeros(horizon + 1, dtype=np.int64)
        partial = np.zeros(horizon + 1, dtype=np.int64)
        pending = np.zeros(horizon + 1, dtype=np.int64)
        in_service[0] += len(names) * _GPUS_PER_NODE
        in_service[horizon] -= len(names) * _GPUS_PER_NODE
        for p, _node, a, b in drains:
            if p == pool:
                in_service[a] -= _GPUS_PER_NODE
                in_service[b] += _GPUS_PER_NODE
        for j in jobs:
            if j.pool != pool:
                continue
            partial[j.start] += j.devices
            partial[j.gang_complete] -= j.devices
            held[j.gang_complete] += j.devices
            held[j.end] -= j.devices
            rz = _resize(j)
            if rz is not None:  # the lost devices go back to the pool over the resize
                held[j.gang_complete + rz[0]] -= rz[2]
                held[j.gang_complete + rz[1]] += rz[2]
            pending[j.submit] += 1  # pending until the gang is complete (Slurm: Eligible -> Start)
            pending[j.gang_complete] -= 1
        cap = np.cumsum(in_service)[:horizon]
        hold = np.cumsum(held)[:horizon]
        part = np.cumsum(partial)[:horizon]
        queued = np.cumsum(pending)[:horizon] > 0
        free = cap - hold - part
        if (free < 0).any():
            raise AssertionError("the generator placed a job on a drained node")
        installed = len(names) * _GPUS_PER_NODE * horizon
        out[pool] = {
            "installed_device_s": float(installed),
            "capacity_device_s": float(cap.sum()),
            "out_of_service_device_s": float(installed - cap.sum()),
            "held_device_s": float(hold.sum()),
            "partial_gang_hold": float(part.sum()),
            "reservation": 0.0,
            "idle_with_queue": float(free[queued].sum()),
            "idle_empty_queue": float(free[~queued].sum()),
        }
    return out


def _sacct_time(seconds: int) -> str:
    return (FLEET_START + pd.Timedelta(seconds=seconds)).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(seconds: int) -> str:
    d, rem = divmod(seconds, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{s:02d}"


def _write_slurm(
    out: Path, jobs: list[_Job], pool_nodes: dict[str, list[str]], drains: list[tuple[str, str, int, int]]
) -> list[str]:
    head = (
        "JobID|JobIDRaw|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|State|"
        "ExitCode|AllocTRES|ReqTRES|NodeList"
    )
    lines = [head]
    for j in sorted(jobs, key=lambda j: j.start):
        tres = (
            f"billing={j.devices * 8},cpu={j.devices * 8},gres/gpu={j.devices},mem={j.nodes_n * 1000}G,"
            f"node={j.nodes_n}"
        )
        lines.append(
            "|".join(
                [
                    j.job_id,
                    j.job_id,
                    "synth",
                    "ml",
                    j.pool,
                    "normal",
                    "1000",
                    _sacct_time(j.submit),
                    _sacct_time(j.submit),
                    _sacct_time(j.start),
                    _sacct_time(j.end),
                    _elapsed(j.duration_s),
                    "COMPLETED",
                    "0:0",
                    tres,
                    tres,
                    ",".join(j.nodes),
                ]
            )
        )
    sched = out / "scheduler"
    sched.mkdir(parents=True, exist_ok=True)
    (sched / "sacct.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ev = ["Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User"]
    for _pool, node, a, b in drains:
        ev.append(f"synth|{node}|{_sacct_time(a)}|{_sacct_time(b)}|IDLE+DRAIN|firmware update|root(0)")
    (sched / "sacctmgr_events.txt").write_text("\n".join(ev) + "\n", encoding="utf-8")
    nodes = ["NODELIST|PARTITION|GRES"]
    for pool, names in pool_nodes.items():
        nodes += [f"{n}|{pool}|gpu:h100:8(S:0-1)" for n in names]
    (sched / "sinfo_nodes.txt").write_text("\n".join(nodes) + "\n", encoding="utf-8")
    return ["scheduler/sacct.txt", "scheduler/sacctmgr_events.txt", "scheduler/sinfo_nodes.txt"]


def _write_canonical_scheduler(
    out: Path,
    jobs: list[_Job],
    pool_nodes: dict[str, list[str]],
    drains: list[tuple[str, str, int, int]],
    horizon: int,
) -> list[str]:
    """Write allocations and capacity as the scheduling rung's canonical Parquet file."""
    from fleetlib.scheduling import write_allocations

    def at(seconds: Any) -> pd.Series:
        return pd.Series(FLEET_START + pd.to_timedelta(np.asarray(seconds, dtype=np.int64), unit="s"))

    ordered = sorted(jobs, key=lambda j: j.start)
    alloc = pd.DataFrame(
        {
            "job_id": [j.job_id for j in ordered],
            "attempt": 0,
            "pool": [j.pool for j in ordered],
            "devices": [j.devices for j in ordered],
            "submit": at([j.submit for j in ordered]),
            "first_assigned": at([j.start for j in ordered]),
            "gang_complete": at([j.gang_complete for j in ordered]),
            "release": at([j.end for j in ordered]),
            "priority": 0,
            "elastic": False,
            "end_state": "completed",
            "requested_devices": [j.devices for j in ordered],
        }
    )
    if any(_resize(j) is not None for j in ordered):
        alloc = _elastic_segments(alloc, ordered, at)
    rows = []
    for pool, names in pool_nodes.items():
        full = len(names) * _GPUS_PER_NODE
        cuts = sorted({0, horizon, *(t for p, _n, a, b in drains if p == pool for t in (a, b))})
        for a, b in itertools.pairwise(cuts):
            down = sum(_GPUS_PER_NODE for p, _n, d0, d1 in drains if p == pool and d0 <= a and b <= d1)
            rows.append((pool, a, b, full - down, down))
    cap = pd.DataFrame(rows, columns=["pool", "start", "end", "devices_in_service", "devices_out_of_service"])
    cap["start"], cap["end"] = at(cap["start"]), at(cap["end"])
    rel = "scheduler/allocations.parquet"
    (out / "scheduler").mkdir(parents=True, exist_ok=True)
    write_allocations(alloc, cap, out / rel)
    return [rel]


def _resize(job: _Job) -> tuple[int, int, int] | None:
    """Return an elastic job's resize (shrink, regain, devices lost; seconds after gang complete) or None."""
    return job.timeline.resize if job.kind == "timeline" and job.timeline is not None else None


def _elastic_segments(alloc: pd.DataFrame, ordered: list[_Job], at: Any) -> pd.DataFrame:
    """Return the allocations with each elastic job's row cut into its three size segments.

    Full mesh until the shrink, the devices left until the regain, the full mesh again until the
    release (attempts 0, 1, 2; a later segment is submitted, assigned and complete at its start).
    """
    rows = []
    for i, j in enumerate(ordered):
        row = alloc.iloc[[i]]
        rz = _resize(j)
        if rz is None:
            rows.append(row)
            continue
        shrink, regain = j.gang_complete + rz[0], j.gang_complete + rz[1]
        seg = pd.concat([row] * 3, ignore_index=True)
        seg["attempt"] = [0, 1, 2]
        seg["devices"] = seg["requested_devices"] = [j.devices, j.devices - rz[2], j.devices]
        seg["elastic"] = True
        for col in ("submit", "first_assigned", "gang_complete"):
            seg.loc[1:, col] = at([shrink, regain]).to_numpy()
        seg["release"] = at([shrink, regain, j.end])
        rows.append(seg)
    return pd.concat(rows, ignore_index=True)


def _write_timeline(out: Path, job: _Job) -> str:
    from fleetlib.runtime import tables_from_seconds, write_timeline

    tl = job.timeline
    assert tl is not None
    origin = FLEET_START + pd.Timedelta(seconds=job.gang_complete)
    steps, events = tables_from_seconds(tl.steps, tl.events, job_id=job.job_id, origin=origin.isoformat())
    if tl.resize is not None:  # the devices held before and after each resize event, in time order
        n, left = job.devices, job.devices - tl.resize[2]
        counts = iter([(n, left), (left, left), (left, n), (n, n)])
        before = pd.array([None] * len(events), dtype="Int64")
        after = pd.array([None] * len(events), dtype="Int64")
        for i in np.flatnonzero(events["kind"].astype(str).isin(["resize_begin", "resize_end"]).to_numpy()):
            before[i], after[i] = next(counts)
        events["devices_before"], events["devices_after"] = before, after
    rel = f"timelines/{job.job_id}.parquet"
    write_timeline(steps, events, out / rel)
    return rel


def _write_model(out: Path, job: _Job) -> str:
    assert job.timeline is not None and job.mfu is not None
    flops = job.mfu * job.timeline.step_s * job.devices * _PEAK_FLOPS
    rel = f"models/{job.job_id}.yaml"
    (out / "models").mkdir(parents=True, exist_ok=True)
    (out / rel).write_text(
        f"name: synthetic model ({job.devices} GPUs)\naccelerator: {_ACCELERATOR}\ndevices: {job.devices}\n"
        f"useful_flops_per_step: {flops!r}\nconvention: synthetic model count\n",
        encoding="utf-8",
    )
    return rel


def _write_traces(out: Path, job: _Job, seed: int) -> tuple[str, dict[str, float], int]:
    from fleetlib.program import synth_step_traces

    rel = f"traces/{job.job_id}"
    tr = synth_step_traces(out / rel, ranks=2, steps=2, seed=seed, straggler_rank=1)
    parts = ("compute", "exposed_comm", "peer_wait", "exposed_memcpy", "host_dispatch", "idle")
    sums = tr.partition[list(parts)].sum()
    wall = float(tr.partition["step_wall_us"].sum())
    return rel, {p: float(sums[p]) / wall for p in parts}, len(tr.partition)


def _yaml_list(items: list[str], indent: str) -> str:
    return "".join(f"{indent}- {i}\n" for i in items)


def _inj_timeline(rng: np.random.Generator, fail: bool, inj: _Injection, job: _Job) -> _Timeline:
    """:func:`_timeline` with the injection, the kernel regression sized on the step time it draws."""
    state = rng.bit_generator.state
    probe = int(rng.choice([5, 10, 20]))  # the step time _timeline draws first
    rng.bit_generator.state = state
    extra = math.ceil(inj.kernel_slowdown * probe) if job.version == inj.kernel_version else 0
    return _timeline(rng, fail=fail, inj=inj, episodes=job.episodes, kernel_extra=extra)


def _elastic(tl: _Timeline, devices: int, wait_s: int, reinit_s: int) -> _Timeline:
    """Return ``tl`` with an elastic resize after its first checkpoint commit (an injected elastic job).

    A quarter of the devices (``devices // 4``) is lost at the first commit: ``wait_s`` of elastic wait
    (``resize_begin``), ``reinit_s`` of re-initialisation (``resize_end``), then the next three steps run
    on the smaller mesh, their compute time ``ceil(step x devices / devices_left)`` (perfect scaling,
    rounded up) plus what was drawn above it; the devices come back before the fourth: another wait and
    re-initialisation on the full mesh, and the rest runs as drawn, later by the time added.  The
    scheduler releases the lost devices over ``[shrink, regain)``.  A timeline with a failure, an
    episode, fewer than four devices or too few steps after the first commit is returned as it is.  No
    random number is drawn.
    """
    lost = devices // 4
    commits = [e for e in tl.events if e[2] == "checkpoint_commit"]
    if (lost == 0 or not commits or any(e[2] == "failure" for e in tl.events) or "episode" in tl.causes
            or tl.retained_steps < int(commits[0][3]) + 5):
        return tl
    left = devices - lost
    b = tl.fault_free_s or tl.step_s
    b2 = -(-b * devices // left)
    first = int(commits[0][3])
    shrink = float(commits[0][1])
    truth = dict(tl.truth_s)
    small = dict.fromkeys(("productive", "input_wait"), 0.0)
    small.update(elastic_wait=float(wait_s), elastic_reinit=float(reinit_s))
    truth.update(elastic_wait=float(wait_s), elastic_reinit=float(reinit_s))  # the regain, on the full mesh
    scaling = 0.0
    steps: list[tuple[Any, ...]] = []
    shift, regain = float(wait_s + reinit_s), 0.0
    for st in tl.steps:
        _a, k, t0, t1, wait = st
        if k <= first:
            steps.append(st)
            continue
        if k == first + 4:
            regain = t0 + shift
            shift += wait_s + reinit_s
        if k <= first + 3:  # on the smaller mesh
            extra = (t1 - t0) - wait - b  # drawn above the step (a slow step)
            truth["productive"] -= b
            truth["input_wait"] -= wait
            truth["step_time_above_baseline"] -= extra
            small["productive"] += b2 + extra
            small["input_wait"] += wait
            scaling += (b2 + extra) * left - b * devices
            steps.append((0, k, t0 + shift, t1 + shift + b2 - b, wait))
            shift += b2 - b
            continue
        steps.append((0, k, t0 + shift, t1 + shift, wait))
    events = [e if e[1] <= shrink else (e[0], e[1] + shift, *e[2:]) for e in tl.events]
    events += [(0, shrink, "resize_begin"), (0, shrink + wait_s, "resize_end"), (0, regain, "resize_begin"),
               (0, regain + wait_s, "resize_end")]
    events.sort(key=lambda e: e[1])
    small["elastic_scaling"] = scaling  # device-seconds
    return _Timeline(steps, events, tl.duration_s + int(shift), truth, tl.retained_steps, tl.step_s,
                     tl.causes, tl.fault_free_s, (int(shrink), int(regain), lost), small)


def _draw_jobs(
    rng: np.random.Generator,
    placeable: dict[str, list[str]],
    horizon: int,
    n_nodes: int,
    has_dev: bool,
    scheduler: str,
    inj: _Injection | None = None,
    irng: np.random.Generator | None = None,
) -> list[_Job]:
    """Draw the jobs that arrive over the window (kind, size, timeline, residual, partial gang).

    With an injection, its own generator ``irng`` draws each job's software version and whether a
    train job lands on a slow node (with its straggler episodes), so ``rng`` draws the same fleet.
    """
    jobs: list[_Job] = []
    p_slow = 0.0
    if inj is not None and inj.slow_nodes:
        p_slow = min(1.0, 2.0 * inj.slow_nodes / max(len(placeable["train"]) - inj.quota_nodes, 1))
    t, i = 0, 0
    mean_gap = max(horizon / (6.0 * n_nodes), 60.0)
    while t < horizon:
        pool = "dev" if has_dev and rng.random() < 0.25 else "train"
        sizes = [1] if pool == "dev" else [s for s in (1, 2, 4) if s <= len(placeable["train"])]
        r = rng.random()
        kind = "zombie" if r < 0.06 else "unobserved" if r < 0.12 else "timeline"
        job = _Job(
            job_id=str(70001 + i),
            pool=pool,
            nodes_n=int(rng.choice(sizes)),
            submit=int(t),
            duration_s=0,
            kind=kind,
        )
        if inj is not None and irng is not None:
            job.version = str(irng.choice(list(inj.versions))) if inj.versions else inj.software_version
            if kind == "timeline" and pool == "train" and irng.random() < p_slow and job.nodes_n >= 2:
                a = int(irng.integers(3, 20))
                first = (a, a + int(irng.integers(2, 5)))
                b = int(irng.integers(first[1] + 5, 36))
                job.episodes = (first, (b, b + int(irng.integers(2, 4))))
        if kind == "timeline":
            fail = rng.random() < 0.35
            job.timeline = _timeline(rng, fail=fail) if inj is None else _inj_timeline(rng, fail, inj, job)
            if inj is not None and inj.elastic_wait_s:
                job.timeline = _elastic(job.timeline, job.devices, inj.elastic_wait_s, inj.elastic_reinit_s)
            job.residual_s = int(rng.integers(1, 61)) if rng.random() < 0.3 else 0
            job.duration_s = job.timeline.duration_s + job.residual_s
            job.mfu = float(rng.choice([0.3, 0.35, 0.4, 0.45])) if rng.random() < 0.85 else None
        else:
            job.duration_s = int(rng.integers(600, 4 * 3600))
        if scheduler == "canonical" and rng.random() < 0.3:  # a gang that completes after its first node
            job.partial_s = int(rng.integers(30, 900))
            job.duration_s += job.partial_s
        jobs.append(job)
        t += int(rng.exponential(mean_gap)) + 1
        i += 1
    return jobs


def _sample_traces(
    out: Path, jobs: list[_Job], pool_nodes: dict[str, list[str]], models: dict[str, str], seed: int
) -> tuple[dict[str, list[str]], dict[str, tuple[dict[str, float], int]]]:
    """Trace a stratified sample: the smallest and the largest job with a model config in each pool."""
    traces: dict[str, list[str]] = {}
    trace_truth: dict[str, tuple[dict[str, float], int]] = {}
    for pool in pool_nodes:
        cands = [j for j in jobs if j.pool == pool and j.job_id in models]
        if not cands:
            continue
        picks = {
            min(cands, key=lambda j: (j.devices, j.job_id)).job_id,
            max(cands, key=lambda j: (j.devices, j.job_id)).job_id,
        }
        for jid in sorted(picks):
            job = next(j for j in jobs if j.job_id == jid)
            job.traced = True
            rel, shares, rank_steps = _write_traces(out, job, seed + int(job.job_id))
            traces[jid] = [rel + "/"]
            trace_truth[jid] = (shares, rank_steps)
    return traces, trace_truth


def synth_fleet(
    out_dir: str | Path,
    *,
    devices: int = 64,
    days: float = 1.0,
    seed: int = 0,
    scheduler: str = "slurm",
    inject: Mapping[str, Any] | None = None,
    serving: bool = False,
) -> SyntheticFleetBundle:
    """Write a synthetic fleet bundle with its truth file.

    Parameters
    ----------
    out_dir
        Folder to write into (created; files of an earlier bundle there are overwritten).
    devices
        GPUs of the fleet, a multiple of 8, at least 16.
    days
        Length of the window, days (> 0; at least one hour).
    seed
        Seed of the random generator: the same arguments write the same files.
    scheduler
        ``"slurm"`` (sacct / sacctmgr / sinfo text; Slurm allocates atomically, so no partial gangs) or
        ``"canonical"`` (the scheduling rung's Parquet file, written by
        :func:`fleetlib.scheduling.synth.write_allocations`, in which some gangs complete minutes after
        their first node is assigned: partial-gang hold).
    inject
        Regressions and contract statements for a synthetic pair (None: the plain fleet, unchanged).
        Keys: ``software_version`` (stated in the contract; default ``"synthetic"``), ``versions``
        (a list: each job is given one at random, stated per job under ``contract.jobs``),
        ``compile_extra_s`` (seconds added to every job's startup: a compiler release),
        ``checkpoint_factor`` (checkpoint pause multiplied: a storage change), ``slow_nodes`` and
        ``slowdown`` (that many train nodes run ``slowdown`` slower -- ``ceil(slowdown x step)``
        seconds per step -- in two straggler episodes of each multi-node job placed on them; only
        such jobs use them), ``quota_nodes`` (that many train nodes are in service but no job may use them: a
        quota change that strands them), ``kernel_regression`` (``{version, slowdown}``: jobs of that
        version run every step ``ceil(slowdown x step)`` seconds longer), ``rank_timers`` (write
        per-rank step timers of every timed job, ``rank_timers/JOB.parquet``),
        ``scheduler_policy``, ``compiler_version`` and ``storage`` (stated in the contract),
        ``elastic`` (``{wait_s, reinit_s}``, canonical records only: every timeline job of at least four
        devices with no failure or episode loses a quarter of its devices at its first commit, waits
        ``wait_s`` and re-initialises ``reinit_s``, runs three steps on the smaller mesh and regains
        them with another wait and re-initialisation; its allocation is three size segments, and the
        truth gains ``elastic_wait`` and ``elastic_reinit`` and, per resized job, ``resize`` and
        ``elastic_scaling_device_s``).
        Injection draws use their own generator, so the same seed draws the same jobs;
        ``truth.json`` gains ``injected``.
    serving
        Also write a serving pool (:func:`_write_serving`): two 8-GPU nodes of a ``serve`` partition in
        scheduler files of their own, a replica lifecycle log, measured decode steps and the served
        model, named by the manifest's ``serving:`` section; ``truth.json`` gains ``serving`` (replica
        S, R and MBU under both conventions).  The training records and truth are unchanged.

    Returns
    -------
    SyntheticFleetBundle
        The manifest path, the truth object and the files written.

    Raises
    ------
    DomainError
        ``devices`` not a multiple of 8 or below 16; ``days`` under an hour; an unknown ``scheduler``;
        ``inject.elastic`` with Slurm records.
    """
    if scheduler not in ("slurm", "canonical"):
        raise DomainError(f"scheduler must be 'slurm' or 'canonical'; got {scheduler!r}")
    if (
        isinstance(devices, bool)
        or not isinstance(devices, (int, np.integer))
        or devices < 16
        or devices % _GPUS_PER_NODE
    ):
        raise DomainError(f"devices must be a whole multiple of 8, at least 16; got {devices!r}")
    horizon = round(float(days) * 86400)
    if not math.isfinite(float(days)) or horizon < 3600:
        raise DomainError(f"days must be at least one hour (1/24); got {days!r}")
    rng = np.random.default_rng(seed)
    n_nodes = int(devices) // _GPUS_PER_NODE
    n_dev = n_nodes // 4 if n_nodes >= 4 else 0
    pool_nodes = {"train": [f"h{i:03d}" for i in range(1, n_nodes - n_dev + 1)]}
    if n_dev:
        pool_nodes["dev"] = [f"h{i:03d}" for i in range(n_nodes - n_dev + 1, n_nodes + 1)]
    spare = pool_nodes["train"][-1]
    placeable = {p: [n for n in names if n != spare] for p, names in pool_nodes.items()}
    d0 = int(rng.integers(0, horizon // 2))
    drains = [("train", spare, d0, d0 + int(rng.integers(horizon // 8, horizon // 3)))]

    inj = None if inject is None else _Injection.parse(inject)
    if inj is not None and inj.elastic_wait_s and scheduler != "canonical":
        raise DomainError("inject.elastic needs scheduler='canonical': Slurm records carry no size segments")
    irng = np.random.default_rng([seed, 11])
    jobs = _draw_jobs(rng, placeable, horizon, n_nodes, bool(n_dev), scheduler, inj, irng)
    slow: frozenset[str] = frozenset()
    stranded: list[str] = []
    if inj is not None:
        usable = placeable["train"]
        if inj.quota_nodes + inj.slow_nodes >= len(usable):
            raise DomainError(
                f"inject: quota_nodes + slow_nodes must leave a usable train node; the pool has {len(usable)}"
            )
        stranded = usable[len(usable) - inj.quota_nodes:] if inj.quota_nodes else []
        placeable = {**placeable, "train": [n for n in usable if n not in stranded]}
        slow = frozenset(usable[: inj.slow_nodes])
    jobs = _place(jobs, placeable, horizon, slow)
    for job in jobs:
        job.slow_node = _slow_node_index(job, slow)
        job.slowdown = inj.slowdown if inj is not None else 0.0
    # the first job of each kind is kept whatever the draw, so every category shows up
    _ensure_kinds(jobs, rng, inj)
    jobs.sort(key=lambda j: j.job_id)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if scheduler == "slurm":
        files = _write_slurm(out, jobs, pool_nodes, drains)
        sched_yaml = "scheduler:\n  format: slurm\n  tz: UTC\n  files:\n" + _yaml_list(files, "    ")
    else:
        files = _write_canonical_scheduler(out, jobs, pool_nodes, drains, horizon)
        sched_yaml = "scheduler:\n  format: canonical\n  files:\n" + _yaml_list(files, "    ")
    timelines: list[str] = []
    models: dict[str, str] = {}
    for job in jobs:
        if job.kind == "zombie":
            job.timeline = _Timeline(
                [],
                [(0, 0.0, "gang_complete"), (0, float(job.held_s), "release")],
                job.held_s,
                {},
                0,
                0,
            )
        if job.timeline is not None:
            timelines.append(_write_timeline(out, job))
        if job.kind == "timeline" and job.mfu is not None:
            models[job.job_id] = _write_model(out, job)
    traces, trace_truth = _sample_traces(out, jobs, pool_nodes, models, seed)
    rank_files = _write_rank_timers(out, jobs, models, seed) if inj is not None and inj.rank_timers else []
    files += rank_files
    files += timelines + list(models.values())
    for rels in traces.values():
        files += sorted(str(p.relative_to(out)) for p in (out / rels[0]).iterdir())
    window = [
        FLEET_START.isoformat().replace("+00:00", "Z"),
        (FLEET_START + pd.Timedelta(seconds=horizon)).isoformat().replace("+00:00", "Z"),
    ]
    serving_yaml, serving_truth = "", None
    if serving:
        serving_files, serving_yaml, serving_truth = _write_serving(out, horizon, seed)
        files += serving_files
    arg = "" if scheduler == "slurm" else f", scheduler={scheduler!r}"
    arg += ", serving=True" if serving else ""
    manifest = (
        f"# A synthetic fleet written by fleetlib.fleet.synth.synth_fleet(devices={int(devices)}, "
        f"days={float(days)!r}, seed={seed}{arg}); truth.json holds what was injected.\n"
        f"name: synthetic fleet {int(devices)} GPUs, {float(days)!r} days, seed {seed}\n"
        f"window: ['{window[0]}', '{window[1]}']\n"
        + sched_yaml
        + "timelines:\n  format: canonical\n  files:\n"
        + _yaml_list(timelines, "    ")
        + "models:\n"
        + "".join(f"  '{k}': {v}\n" for k, v in models.items())
        + "traces:\n"
        + "".join(f"  '{k}': [{v[0]}]\n" for k, v in traces.items())
        + "price_per_device_hour: 2.0\n"
        + (
            "contract:\n  software_version: synthetic\n  pool: all\n"
            if inj is None
            else _inj_yaml(inj, jobs, rank_files)
        )
        + serving_yaml
    )
    (out / "fleet.yaml").write_text(manifest, encoding="utf-8")
    truth = _truth(
        jobs, pool_nodes, drains, horizon, window, trace_truth, int(devices), float(days), seed, scheduler
    )
    if inj is not None:
        truth["injected"] = _inj_truth(inj, jobs, stranded, slow)
    if serving_truth is not None:
        truth["serving"] = serving_truth
    (out / "truth.json").write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    files += ["fleet.yaml", "truth.json"]
    return SyntheticFleetBundle(out / "fleet.yaml", truth, sorted(files))


def _ensure_kinds(jobs: list[_Job], rng: np.random.Generator, inj: _Injection | None = None) -> None:
    """Turn the first placed jobs into the kinds the draw missed (zombie, unobserved, a failure)."""
    kinds = {j.kind for j in jobs}
    timed = [j for j in jobs if j.kind == "timeline"]
    for kind in ("zombie", "unobserved"):
        if kind not in kinds and len(timed) > 2:
            victim = timed.pop()
            victim.kind, victim.timeline, victim.mfu, victim.residual_s = kind, None, None, 0
    if timed and all(j.timeline is not None and j.timeline.truth_s["rework"] == 0 for j in timed):
        # keep the duration: a failing timeline of at most the same length, padded by teardown idle
        j = timed[0]
        assert j.timeline is not None
        for attempt in range(50):
            g = np.random.default_rng(int(rng.integers(1 << 30)) + attempt)
            tl = _timeline(g, fail=True) if inj is None else _inj_timeline(g, True, inj, j)
            if tl.truth_s["rework"] > 0 and tl.duration_s <= j.held_s - j.residual_s:
                pad = j.held_s - j.residual_s - tl.duration_s
                time_, kind = tl.events[-1][1], tl.events[-1][2]
                tl.events[-1] = (0, time_ + pad, kind)
                tl.truth_s["idle"] += pad
                tl.duration_s += pad
                j.timeline = tl
                break


def _elastic_truth(j: _Job, rz: tuple[int, int, int], runtime: dict[str, float], per_job: dict[str, Any],
                   trace_truth: dict[str, tuple[dict[str, float], int]]) -> None:
    """Add an elastic job's truth: each second weighted by the devices held then (full mesh or the rest).

    Its smaller mesh's steps are no slow-step time: what they take above the full mesh's fault-free
    device-time is ``elastic_scaling_device_s``, a part of P's ``below_ideal_rate``.
    """
    tl = j.timeline
    assert tl is not None
    d, left = j.devices, j.devices - rz[2]
    held = float(d * j.held_s - rz[2] * (rz[1] - rz[0]))
    for k in (*_RUNTIME_LOSSES, *_ELASTIC_LOSSES):
        runtime[k] += d * tl.truth_s.get(k, 0.0) + left * tl.small_s.get(k, 0.0)
    runtime["reconciliation_residual"] += float(d * j.residual_s)
    above = d * tl.truth_s["step_time_above_baseline"]
    prod = (d * (tl.truth_s["productive"] + tl.truth_s["step_time_above_baseline"])
            + left * tl.small_s["productive"])
    row: dict[str, Any] = {
        "pool": j.pool, "devices": d, "held_device_s": held, "kind": j.kind, "productive_device_s": prod,
        "runtime_goodput": prod / held, "step_time_above_baseline_device_s": above,
        "reconciliation_residual_device_s": float(d * j.residual_s), "retained_steps": tl.retained_steps,
        "elastic_scaling_device_s": tl.small_s["elastic_scaling"],
        "resize": {"shrink_s": rz[0], "regain_s": rz[1], "devices_lost": rz[2]},
    }
    _program_truth(row, j, tl, prod, trace_truth)
    per_job[j.job_id] = row


def _program_truth(row: dict[str, Any], j: _Job, tl: _Timeline, prod: float,
                   trace_truth: dict[str, tuple[dict[str, float], int]]) -> float | None:
    """Add a timed job's program truth to its row (ideal time, P, trace shares); return its ideal time.

    None (and no ideal time in the row) for a job without a model configuration.
    """
    if j.mfu is None:
        row.update(ideal_device_s=None, program_goodput=None)
        return None
    d = j.devices
    job_ideal = tl.retained_steps * (j.mfu * tl.step_s * d * _PEAK_FLOPS) / _PEAK_FLOPS
    row.update(ideal_device_s=job_ideal, program_goodput=job_ideal / prod)
    if j.job_id in trace_truth:
        shares, rank_steps = trace_truth[j.job_id]
        row["trace_partition_device_s"] = {k: v * prod for k, v in shares.items()}
        row["trace_coverage"] = rank_steps / (tl.retained_steps * d)
    return job_ideal


def _truth(
    jobs: list[_Job],
    pool_nodes: dict[str, list[str]],
    drains: list[tuple[str, str, int, int]],
    horizon: int,
    window: list[str],
    trace_truth: dict[str, tuple[dict[str, float], int]],
    devices: int,
    days: float,
    seed: int,
    scheduler: str,
) -> dict[str, Any]:
    sched = _scheduling_truth(jobs, pool_nodes, drains, horizon)
    tot = {k: math.fsum(p[k] for p in sched.values()) for k in next(iter(sched.values()))}
    elastic = any(_resize(j) is not None for j in jobs)
    kept = (*_RUNTIME_LOSSES, *(_ELASTIC_LOSSES if elastic else ()))
    runtime = dict.fromkeys((*kept, "zombie", "unobserved", "reconciliation_residual"), 0.0)
    productive = above = ideal = unobserved_p = 0.0
    per_job = {}
    for j in jobs:
        d = j.devices
        held = float(d * j.held_s)
        rz = _resize(j)
        if rz is not None:
            _elastic_truth(j, rz, runtime, per_job, trace_truth)
            row = per_job[j.job_id]
            productive += row["productive_device_s"]
            above += row["step_time_above_baseline_device_s"]
            if j.mfu is not None:
                ideal += row["ideal_device_s"]
            else:
                unobserved_p += row["productive_device_s"] - row["step_time_above_baseline_device_s"]
            continue
        row: dict[str, Any] = {"pool": j.pool, "devices": d, "held_device_s": held, "kind": j.kind}
        if j.kind == "unobserved":
            runtime["unobserved"] += held
            row.update(runtime_goodput=0.0, productive_device_s=0.0)
        elif j.kind == "zombie":
            runtime["zombie"] += held
            row.update(runtime_goodput=0.0, productive_device_s=0.0)
        else:
            tl = j.timeline
            assert tl is not None
            for k in _RUNTIME_LOSSES:
                runtime[k] += d * tl.truth_s[k]
            runtime["reconciliation_residual"] += float(d * j.residual_s)
            prod = d * (tl.truth_s["productive"] + tl.truth_s["step_time_above_baseline"])
            productive += prod
            above += d * tl.truth_s["step_time_above_baseline"]
            row.update(
                productive_device_s=prod,
                runtime_goodput=prod / held,
                step_time_above_baseline_device_s=d * tl.truth_s["step_time_above_baseline"],
                reconciliation_residual_device_s=float(d * j.residual_s),
                retained_steps=tl.retained_steps,
            )
            job_ideal = _program_truth(row, j, tl, prod, trace_truth)
            if job_ideal is None:
                unobserved_p += d * tl.truth_s["productive"]
            else:
                ideal += job_ideal
        per_job[j.job_id] = row
    held_total = tot["held_device_s"]
    program_losses = {
        "step_time_above_baseline": above,
        "below_ideal_rate": productive - above - ideal - unobserved_p,
        "unobserved": unobserved_p,
    }
    if held_total <= 0 or productive <= 0:
        raise DomainError(
            f"the generated fleet ({devices} devices, {days:g} days, seed {seed}) holds no productive step, "
            "so R's numerator and P's denominator are zero; generate more days or devices, or another seed")
    s = held_total / tot["capacity_device_s"]
    r = productive / held_total
    p = ideal / productive
    return {
        "generator": {
            "function": "fleetlib.fleet.synth.synth_fleet",
            "devices": devices,
            "days": days,
            "seed": seed,
            "scheduler": scheduler,
        },
        "window": window,
        "mpg": s * r * p,
        "ideal_device_s": ideal,
        "in_service_capacity_device_s": tot["capacity_device_s"],
        "factors": {
            "scheduling": {
                "value": s,
                "numerator_device_s": held_total,
                "denominator_device_s": tot["capacity_device_s"],
                "losses": {
                    k: tot[k]
                    for k in ("partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue")
                },
                "out_of_service_device_s": tot["out_of_service_device_s"],
            },
            "runtime": {
                "value": r,
                "numerator_device_s": productive,
                "denominator_device_s": held_total,
                "losses": runtime,
            },
            "program": {
                "value": p,
                "numerator_device_s": ideal,
                "denominator_device_s": productive,
                "losses": program_losses,
            },
        },
        "pools": sched,
        "jobs": per_job,
        "notes": [
            "Slurm allocates atomically: the records carry no partial-gang hold, so partial_gang_hold is 0."
            if scheduler == "slurm"
            else "Canonical records: partial_gang_hold is device-time from first node to gang complete.",
            "Drained node time is out of service: outside the in-service denominator "
            "(out_of_service_device_s), not a loss inside S.",
            "Runtime losses are the job timelines' categories times the job's devices; zombie = held time "
            "of a complete gang whose timeline has no step; unobserved = held time with no timeline; "
            "reconciliation_residual = scheduler held time the timeline does not cover.",
            "Productive time is retained steps' wall time less input waits (warm-up excess is startup or "
            "recovery); step_time_above_baseline is a program loss.",
        ],
    }


# ---------------------------------------------------------------------------------------------------
# Injected regressions (synth_fleet(inject=...)): options, rank timers, contract and truth blocks
# ---------------------------------------------------------------------------------------------------


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
    "elastic",
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
    elastic_wait_s: int = 0
    elastic_reinit_s: int = 0

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
        el = inject.get("elastic") or {}
        if not isinstance(el, Mapping) or (el and set(el) != {"wait_s", "reinit_s"}):
            raise DomainError("inject.elastic must be {wait_s: seconds, reinit_s: seconds}")
        for key in ("wait_s", "reinit_s"):
            v = el.get(key, 1)
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "wait_s" else 0):
                raise DomainError(f"inject.elastic.{key} must be a whole number of seconds >= "
                                  f"{1 if key == 'wait_s' else 0}; got {v!r}")
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
            elastic_wait_s=int(el["wait_s"]) if el else 0,
            elastic_reinit_s=int(el["reinit_s"]) if el else 0,
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
    opts = {k: getattr(inj, k) for k in inj.__dataclass_fields__
            if not (k.startswith("elastic_") and not inj.elastic_wait_s)}  # elastic keys: only when injected
    opts["versions"] = list(inj.versions)
    return {
        "options": opts,
        "stranded_nodes": list(stranded),
        "slow_nodes": sorted(slow),
        "straggler_episodes": episodes,
        "single_slow_steps": singles,
        "job_versions": {j.job_id: j.version for j in jobs},
    }


def _write_serving(out: Path, horizon: int, seed: int) -> tuple[list[str], str, dict[str, Any]]:
    """Write the serving pool (Slurm files, lifecycle log, decode steps, model); return files, YAML, truth.

    Each node of :data:`SERVING_POOL` hosts replicas one after another, each one Slurm allocation of the
    whole node: placed, loading (30-60 s after placement), warm-up, ready, then draining before release.
    The second replica of the second node fails while loading (released, never ready).  Each ready
    replica logs 40 decode steps, whole microseconds, around a bandwidth efficiency drawn per replica.
    The truth is computed here from the written durations: S = allocated / in-service device-time of
    the pool, R = ready / held replica-time, MBU = steps x floor / measured step time under the
    weights-only floor and the weights + KV-cache floor (:data:`SERVING_MODEL`, H100 SXM 3.35 TB/s).
    """
    rng = np.random.default_rng([seed, 31])
    model = SERVING_MODEL
    floor_w = model["n_params"] * model["bytes_per_param"] / model["devices"] / _HBM_BYTES_PER_S
    floor_kv = floor_w + model["kv_cache_bytes"] / model["devices"] / _HBM_BYTES_PER_S
    sacct = ["JobID|JobIDRaw|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|Elapsed|State|"
             "ExitCode|AllocTRES|ReqTRES|NodeList"]
    life = ["time,replica_id,phase,node,model"]
    steps = ["replica_id,step_us"]
    held_s = ready_s = 0
    step_count, step_total_us = 0, 0
    job_id = 90001
    for n, node in enumerate(_SERVING_NODES):
        t = int(rng.integers(0, 1800))
        k = 0
        while True:
            lifetime = int(rng.integers(3600, 5 * 3600))
            if t + lifetime > horizon:
                break
            replica = f"{node}-r{k}"
            failed = n == 1 and k == 1
            loading = t + int(rng.integers(30, 61))
            warmup = loading + int(rng.integers(240, 301))
            ready = warmup + int(rng.integers(40, 61))
            end = loading + int(rng.integers(120, 181)) if failed else t + lifetime
            phases = [(t, "placed"), (loading, "loading")]
            if not failed:
                draining = end - int(rng.integers(60, 91))
                phases += [(warmup, "warmup"), (ready, "ready"), (draining, "draining")]
                ready_s += draining - ready
                efficiency = float(rng.uniform(0.78, 0.9))
                drawn = floor_w / efficiency * 1e6 * rng.lognormal(0.0, 0.03, 40)
                us = np.maximum(np.round(drawn).astype(int), 1)
                steps += [f"{replica},{v}" for v in us]
                step_count += len(us)
                step_total_us += int(us.sum())
            phases.append((end, "released"))
            life += [f"{_sacct_time(a)}Z,{replica},{phase},{node},{model['name']}" for a, phase in phases]
            held_s += end - t
            tres = "billing=64,cpu=64,gres/gpu=8,mem=1000G,node=1"
            sacct.append("|".join([str(job_id), str(job_id), "serve", "inference", SERVING_POOL, "normal",
                                   "1000", _sacct_time(t), _sacct_time(t), _sacct_time(t), _sacct_time(end),
                                   _elapsed(end - t), "COMPLETED", "0:0", tres, tres, node]))
            job_id += 1
            k += 1
            t = end + int(rng.integers(300, 1801))
    folder = out / "serving"
    folder.mkdir(parents=True, exist_ok=True)
    written = {
        "sacct.txt": sacct,
        "sacctmgr_events.txt": ["Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User"],
        "sinfo_nodes.txt": ["NODELIST|PARTITION|GRES"] + [f"{n}|{SERVING_POOL}|gpu:h100:8(S:0-1)"
                                                          for n in _SERVING_NODES],
        "replica_lifecycle.csv": life,
        "decode_steps.csv": steps,
    }
    for name, lines in written.items():
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "model.yaml").write_text(
        "".join(f"{k}: {v!r}\n" if isinstance(v, str) else f"{k}: {v}\n" for k, v in model.items()),
        encoding="utf-8")
    files = [f"serving/{name}" for name in [*written, "model.yaml"]]
    yaml_text = ("serving:\n  scheduler:\n    format: slurm\n    tz: UTC\n    files:\n"
                 + _yaml_list(files[:3], "      ")
                 + "  lifecycle: serving/replica_lifecycle.csv\n  decode_steps: serving/decode_steps.csv\n"
                 + "  model: serving/model.yaml\n")
    truth = {
        "pool": SERVING_POOL,
        "devices": _GPUS_PER_NODE * len(_SERVING_NODES),
        "replicas": job_id - 90001,
        "scheduling": held_s * _GPUS_PER_NODE / (_GPUS_PER_NODE * len(_SERVING_NODES) * horizon),
        "runtime": ready_s / held_s,
        "held_s": held_s,
        "ready_s": ready_s,
        "decode_steps": step_count,
        "floor_s": {"weights-only": floor_w, "weights+kv": floor_kv},
        "mbu": {"weights-only": step_count * floor_w * 1e6 / step_total_us,
                "weights+kv": step_count * floor_kv * 1e6 / step_total_us},
    }
    return files, yaml_text, truth
