"""A synthetic fleet at fleet scale: a month of 16,384 devices, vectorised, in partitioned Parquet.

:func:`synth_fleet_scale` writes a fleet bundle :func:`fleetlib.fleet.measure.measure_fleet` reads with
either engine, at a size :func:`fleetlib.fleet.synth.synth_fleet` (per-job Python, Slurm text, one
timeline file per job) cannot reach: about 200,000 allocations and 100 million timeline steps for
16,384 devices over 30 days.

* **Scheduler records**: the scheduling rung's canonical allocations Parquet
  (:func:`fleetlib.scheduling.synth.write_allocations`), one pool ``train`` in service throughout.
  Slurm ``sacct`` text for 200,000 jobs is possible but slow to write and to parse for no gain here;
  the small bundles keep the Slurm text.
* **Placement**: the nodes are cut into *lanes* of 1, 2, 4 or 8 nodes; each lane runs its jobs back
  to back with an idle gap between them, so a whole month is placed with cumulative sums, no per-job
  Python.  A job waits up to 15 minutes between submit and start.
* **Timelines**: canonical timelines (the Parquet layout of :func:`fleetlib.runtime.synth.write_timeline`,
  steps and events row-stacked), one file per *partition* -- a group of lanes -- holding every job of
  those lanes.  Each job: a cold launch (startup) whose first step is warm-up (twice the fault-free
  step time; the excess is startup), steps of a fault-free time with some input waits (runtime loss)
  and some slow steps (above the baseline: a program loss) from the third step on, synchronous
  checkpoints, a teardown (idle), and in some jobs a scheduler release up to a minute after the
  timeline's own (the reconciliation residual).  A few percent of allocations are zombies (a
  complete gang, a timeline with no step) and a few have no timeline (unobserved).  No failures or
  restarts at this size (the small bundles have them).
* **Model configs**: one file per (devices, step time, MFU) combination -- a few dozen files shared
  by the jobs, mapped per job by ``models.csv`` (``job_id,model``; the manifest's table form
  ``models: {file: models.csv}``, so ``fleet.yaml`` stays a page); a sixth of the timed jobs have
  none (P unobserved).
* **Traces**: Kineto traces (:func:`fleetlib.program.synth.synth_step_traces`) for the smallest and
  the largest job with a model config.
* ``truth.json``: the factors' numerators and denominators and the runtime and program losses, summed
  from the generator's own pieces.

Every partition draws its random numbers from ``(seed, partition)``, so the same arguments write the
same files, and memory stays at one partition's steps.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.fleet.synth import FLEET_START, SyntheticFleetBundle
from fleetlib.quality import DomainError

__all__ = ["synth_fleet_scale"]

_GPUS_PER_NODE = 8
_ACCELERATOR = "H100 SXM"
_PEAK_FLOPS = 989e12  # H100 SXM dense BF16 (stated here so the truth does not use the measuring code)
_LANE_NODES = (8, 4, 2, 1)
_LANE_SHARE = {8: 0.125, 4: 0.125, 2: 0.25}  # share of the nodes in lanes of that size; the rest: 1
_STEP_S = np.array([15, 20, 25, 30])
_MFU = np.array([0.3, 0.35, 0.4, 0.45])
_RUNTIME_LOSSES = ("startup", "input_wait", "checkpoint", "idle", "zombie", "unobserved",
                   "reconciliation_residual")


def _lanes(nodes: int) -> np.ndarray:
    """Nodes per lane (8-, 4-, 2-node lanes first, then single nodes)."""
    sizes: list[int] = []
    left = nodes
    for size in _LANE_NODES[:-1]:
        n = int(nodes * _LANE_SHARE[size]) // size
        sizes += [size] * n
        left -= n * size
    sizes += [1] * left
    return np.array(sizes, dtype=np.int64)


def _partition_jobs(rng: np.random.Generator, lane_nodes: np.ndarray, horizon: int,
                    steps_per_job: tuple[int, int]) -> dict[str, np.ndarray]:
    """Draw and place the jobs of a group of lanes; return job-level arrays (seconds from the start)."""
    lo, hi = steps_per_job
    mean_span = (lo + hi) / 2 * (_STEP_S.mean() + 2.0) + 1200.0
    per_lane = math.ceil(horizon / mean_span * 1.5) + 4
    n = lane_nodes.size * per_lane
    lane = np.repeat(np.arange(lane_nodes.size), per_lane)
    u = rng.random(n)
    kind = np.where(u < 0.03, 1, np.where(u < 0.06, 2, 0))  # 0 timeline, 1 zombie, 2 unobserved
    b = rng.choice(_STEP_S, n)
    steps = np.where(kind == 0, rng.integers(lo, hi + 1, n), 0)
    every = rng.choice(np.array([50, 100]), n)
    ckpt = rng.integers(5, 30, n)
    startup = rng.integers(60, 300, n)
    teardown = rng.integers(5, 120, n)
    residual = np.where(rng.random(n) < 0.3, rng.integers(1, 61, n), 0) * (kind == 0)
    mfu = np.where(rng.random(n) < 5 / 6, rng.choice(_MFU, n), np.nan)
    other = rng.integers(600, 4 * 3600, n)
    gap = rng.exponential(600.0, n).astype(np.int64) + 1
    wait = rng.integers(0, 900, n)
    return {"lane": lane, "kind": kind, "b": b, "steps": steps, "every": every, "ckpt": ckpt,
            "startup": startup, "teardown": teardown, "residual": residual, "mfu": mfu, "other": other,
            "gap": gap, "wait": wait, "devices": lane_nodes[lane] * _GPUS_PER_NODE}


def _steps(rng: np.random.Generator, jobs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every step of the timed jobs, vectorised: number, start offset, duration, input wait, extra."""
    n_steps = jobs["steps"]
    job = np.repeat(np.arange(n_steps.size), n_steps)
    first = np.cumsum(n_steps) - n_steps
    step = np.arange(job.size) - first[job] + 1
    b = jobs["b"][job]
    u = rng.random(job.size)
    late = step >= 3
    wait = np.where(late & (u < 0.1), rng.integers(1, 3 * b), 0)
    extra = np.where(late & (u >= 0.1) & (u < 0.2), rng.integers(1, 2 * b), 0)
    dur = np.where(step == 1, 2 * b, b + wait + extra)
    pause = np.where(step % jobs["every"][job] == 0, jobs["ckpt"][job], 0)
    span = dur + pause
    csum = np.cumsum(span)
    job_base = np.where(first > 0, csum[np.maximum(first - 1, 0)] if job.size else 0, 0)
    start = jobs["startup"][job] + (csum - span) - job_base[job]
    return {"job": job, "step": step, "start": start, "dur": dur, "wait": wait, "extra": extra,
            "pause": pause}


def _timestamps(seconds: np.ndarray) -> Any:
    import pyarrow as pa

    ns = FLEET_START.value + seconds.astype(np.int64) * 1_000_000_000
    return pa.array(ns, pa.int64()).cast(pa.timestamp("ns", tz="UTC"))


def _write_partition(path: Path, ids: np.ndarray, gc: np.ndarray, tl_end: np.ndarray,
                     jobs_with_tl: np.ndarray, st: dict[str, np.ndarray],
                     jobs: dict[str, np.ndarray]) -> None:
    """Write one partition's canonical timelines (steps and events row-stacked, as write_timeline)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sj = st["job"]
    s_start = gc[sj] + st["start"]
    ck = st["pause"] > 0
    ck_job, ck_step = sj[ck], st["step"][ck]
    ck_t = s_start[ck] + st["dur"][ck]
    tl = jobs_with_tl
    ev_job = np.concatenate([tl, ck_job, ck_job, tl])
    ev_time = np.concatenate([gc[tl], ck_t, ck_t + jobs["ckpt"][ck_job], tl_end[tl]])
    ev_kind = np.concatenate([np.zeros(tl.size, np.int32), np.ones(ck_job.size, np.int32),
                              np.full(ck_job.size, 2, np.int32), np.full(tl.size, 3, np.int32)])
    ev_step = np.concatenate([np.full(tl.size, -1), ck_step, ck_step, np.full(tl.size, -1)])
    order = np.lexsort((ev_kind, ev_time, ev_job))
    ev_job, ev_time, ev_kind, ev_step = ev_job[order], ev_time[order], ev_kind[order], ev_step[order]
    n_s, n_e = sj.size, ev_job.size
    codes = np.concatenate([sj, ev_job]).astype(np.int32)
    ts = pa.timestamp("ns", tz="UTC")
    step_ev = pa.array(ev_step, pa.int64(), mask=ev_step < 0)
    table = pa.table({
        "record": pa.DictionaryArray.from_arrays(
            pa.array(np.concatenate([np.zeros(n_s, np.int32), np.ones(n_e, np.int32)])),
            pa.array(["step", "event"])),
        "job_id": pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(ids.tolist(), pa.string())),
        "attempt": pa.array(np.zeros(n_s + n_e, np.int64)),
        "step": pa.chunked_array([pa.array(st["step"].astype(np.int64)), step_ev]),
        "start": pa.chunked_array([_timestamps(s_start), pa.nulls(n_e, ts)]),
        "end": pa.chunked_array([_timestamps(s_start + st["dur"]), pa.nulls(n_e, ts)]),
        "input_wait_s": pa.chunked_array([pa.array(st["wait"].astype(np.float64)),
                                          pa.nulls(n_e, pa.float64())]),
        "time": pa.chunked_array([pa.nulls(n_s, ts), _timestamps(ev_time)]),
        "kind": pa.chunked_array([pa.nulls(n_s, pa.string()), pa.DictionaryArray.from_arrays(
            pa.array(ev_kind), pa.array(["gang_complete", "checkpoint_begin", "checkpoint_commit",
                                         "release"])).cast(pa.string())]),
        "duration_s": pa.nulls(n_s + n_e, pa.float64()),
    })
    table = table.replace_schema_metadata({b"fleetlib.timeline": b"1"})
    path.parent.mkdir(parents=True, exist_ok=True)
    delta = dict.fromkeys(("attempt", "step", "start", "end", "time"), "DELTA_BINARY_PACKED")
    pq.write_table(table, path, compression="zstd", use_dictionary=["record", "job_id", "kind"],
                   column_encoding=delta)


def _model_name(devices: int, b: int, mfu: float) -> str:
    return f"models/g{devices}_s{b}_mfu{round(mfu * 100)}.yaml"


def synth_fleet_scale(out_dir: str | Path, *, devices: int = 16384, days: float = 30.0, seed: int = 0,
                      partitions: int | None = None,
                      steps_per_job: tuple[int, int] = (450, 650),
                      models_form: str = "table") -> SyntheticFleetBundle:
    """Write a fleet-scale synthetic bundle (canonical Parquet, partitioned timelines) with its truth.

    Parameters
    ----------
    out_dir
        Folder to write into (created).
    devices
        GPUs, a multiple of 8, at least 16 (default 16,384).
    days
        Window length in days, at least one hour (default 30).
    seed
        Seed; partition ``p`` draws from ``(seed, p)``.
    partitions
        Timeline files (default ``max(2, devices // 256)``: 64 for 16,384 devices, about two million
        steps each).
    steps_per_job
        Inclusive range of steps of a timed job (default 450..650).
    models_form
        How ``fleet.yaml`` names each job's model config: ``"table"`` (default) writes ``models.csv``
        (``job_id,model``, one row per job) and ``models: {file: models.csv}`` -- at 16,384 devices the
        manifest then loads in about 0.3 s instead of 2-4 s for the 175,000-entry YAML mapping;
        ``"mapping"`` writes the entries in ``fleet.yaml`` itself.

    Returns
    -------
    SyntheticFleetBundle
        The manifest, the truth and the files written.

    Raises
    ------
    DomainError
        Bad ``devices``, ``days``, ``partitions``, ``steps_per_job`` or ``models_form``.
    """
    if models_form not in ("table", "mapping"):
        raise DomainError(f"models_form must be 'table' or 'mapping'; got {models_form!r}")
    if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or devices < 16 \
            or devices % _GPUS_PER_NODE:
        raise DomainError(f"devices must be a whole multiple of 8, at least 16; got {devices!r}")
    horizon = round(float(days) * 86400)
    if not math.isfinite(float(days)) or horizon < 3600:
        raise DomainError(f"days must be at least one hour (1/24); got {days!r}")
    lo, hi = steps_per_job
    if not 3 <= lo <= hi:
        raise DomainError(f"steps_per_job must be (lo, hi) with 3 <= lo <= hi; got {steps_per_job!r}")
    lanes = _lanes(int(devices) // _GPUS_PER_NODE)
    n_parts = max(2, int(devices) // 256) if partitions is None else int(partitions)
    if n_parts < 1:
        raise DomainError(f"partitions must be >= 1; got {partitions!r}")
    n_parts = min(n_parts, lanes.size)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = np.array_split(np.arange(lanes.size), n_parts)
    allocs, models, model_files, timelines = [], {}, {}, []
    truth = dict.fromkeys(("held", "productive", "above", "ideal", "program_unobserved", "startup",
                           "input_wait", "checkpoint", "idle", "zombie", "unobserved",
                           "reconciliation_residual"), 0.0)
    traced_pick: dict[str, tuple[int, str, dict[str, Any]]] = {}
    next_id = 1_000_001
    for p, group in enumerate(groups):
        rng = np.random.default_rng([seed, p])
        jobs = _partition_jobs(rng, lanes[group], horizon, (lo, hi))
        st = _steps(rng, jobs)
        n = jobs["kind"].size
        body = np.zeros(n, np.int64)
        np.add.at(body, st["job"], st["dur"] + st["pause"])
        tl_len = np.where(jobs["kind"] == 0, jobs["startup"] + body + jobs["teardown"], jobs["other"])
        held_s = tl_len + jobs["residual"]
        span = jobs["gap"] + held_s
        # lanes run their jobs back to back: start = lane's cumulative span before + this job's gap
        csum = np.cumsum(span)
        lane_first = np.searchsorted(jobs["lane"], np.arange(group.size))
        lane_base = np.where(lane_first > 0, csum[lane_first - 1], 0)
        start = csum - span - lane_base[jobs["lane"]] + jobs["gap"]
        keep = start + held_s <= horizon
        idx = np.flatnonzero(keep)
        ids = np.array([str(next_id + i) for i in range(idx.size)], dtype=object)
        next_id += idx.size
        remap = np.full(n, -1)
        remap[idx] = np.arange(idx.size)
        kind, dev = jobs["kind"][idx], jobs["devices"][idx]
        gc, tl_end = start[idx], start[idx] + tl_len[idx]
        allocs.append(pd.DataFrame({
            "job_id": ids, "devices": dev, "submit": np.maximum(gc - jobs["wait"][idx], 0),
            "start": gc, "release": gc + held_s[idx]}))
        # steps of kept jobs only, renumbered to the kept jobs
        sk = keep[st["job"]]
        st = {k: v[sk] for k, v in st.items()}
        st["job"] = remap[st["job"]]
        sub = {k: v[idx] for k, v in jobs.items()}
        with_tl = np.flatnonzero(kind != 2)
        rel = f"timelines/part-{p:05d}.parquet"
        _write_partition(out / rel, ids, gc, tl_end, with_tl, st, sub)
        timelines.append(rel)
        # truth, from the generator's pieces
        d_s = dev[st["job"]].astype(float)
        timed = kind == 0
        held = (dev * held_s[idx]).astype(float)
        truth["held"] += math.fsum(held)
        truth["zombie"] += math.fsum(held[kind == 1])
        truth["unobserved"] += math.fsum(held[kind == 2])
        truth["reconciliation_residual"] += math.fsum((dev * sub["residual"]).astype(float))
        truth["startup"] += math.fsum((dev * (sub["startup"] + sub["b"]) * timed).astype(float))
        truth["idle"] += math.fsum((dev * sub["teardown"] * timed).astype(float))
        truth["input_wait"] += math.fsum(d_s * st["wait"])
        truth["checkpoint"] += math.fsum(d_s * st["pause"])
        retained = d_s * (np.where(st["step"] == 1, sub["b"][st["job"]], st["dur"] - st["wait"]))
        truth["productive"] += math.fsum(retained)
        truth["above"] += math.fsum(d_s * st["extra"])
        has_cfg = timed & ~np.isnan(sub["mfu"])
        ideal = np.where(has_cfg, sub["steps"] * np.nan_to_num(sub["mfu"]) * sub["b"] * dev, 0.0)
        truth["ideal"] += math.fsum(ideal)
        no_cfg = timed & ~has_cfg
        truth["program_unobserved"] += math.fsum((sub["steps"] * sub["b"] * dev)[no_cfg].astype(float))
        for j in np.flatnonzero(has_cfg):
            name = _model_name(int(dev[j]), int(sub["b"][j]), float(sub["mfu"][j]))
            models[str(ids[j])] = name
            model_files.setdefault(name, (int(dev[j]), float(sub["mfu"][j]) * int(sub["b"][j]) * int(dev[j])
                                          * _PEAK_FLOPS))
            for key, better in (("small", lambda a, c: a < c), ("large", lambda a, c: a > c)):
                if key not in traced_pick or better(int(dev[j]), traced_pick[key][0]):
                    traced_pick[key] = (int(dev[j]), str(ids[j]), {})
        del st, jobs
    (out / "models").mkdir(parents=True, exist_ok=True)
    for name, (dev_n, flops) in sorted(model_files.items()):
        (out / name).write_text(
            f"name: synthetic model ({dev_n} GPUs)\naccelerator: {_ACCELERATOR}\ndevices: {dev_n}\n"
            f"useful_flops_per_step: {flops!r}\nconvention: synthetic model count\n", encoding="utf-8")
    alloc = pd.concat(allocs, ignore_index=True)
    files = _write_scheduler(out, alloc, int(devices), horizon)
    traces = _write_traces(out, sorted({v[1] for v in traced_pick.values()}), seed)
    files += timelines + sorted(model_files) + [f for v in traces.values() for f in v[1]]
    window = [FLEET_START.isoformat().replace("+00:00", "Z"),
              (FLEET_START + pd.Timedelta(seconds=horizon)).isoformat().replace("+00:00", "Z")]
    if models_form == "table":
        pd.DataFrame({"job_id": list(models), "model": list(models.values())}).to_csv(
            out / _MODELS_TABLE, index=False)
        files.append(_MODELS_TABLE)
    _write_manifest(out, devices, days, seed, window, files[:1], timelines,
                    _MODELS_TABLE if models_form == "table" else models, {j: v[0] for j, v in traces.items()})
    capacity = float(devices) * horizon
    result = _truth(truth, capacity, window, int(devices), float(days), seed, len(alloc))
    (out / "truth.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    files += ["fleet.yaml", "truth.json"]
    return SyntheticFleetBundle(out / "fleet.yaml", result, sorted(files))


def _write_scheduler(out: Path, alloc: pd.DataFrame, devices: int, horizon: int) -> list[str]:
    from fleetlib.scheduling import write_allocations

    def at(seconds: Any) -> pd.Series:
        return pd.Series(FLEET_START + pd.to_timedelta(np.asarray(seconds, dtype=np.int64), unit="s"))

    table = pd.DataFrame({
        "job_id": alloc["job_id"].astype(str), "attempt": 0, "pool": "train", "devices": alloc["devices"],
        "submit": at(alloc["submit"]), "first_assigned": at(alloc["start"]),
        "gang_complete": at(alloc["start"]), "release": at(alloc["release"]), "priority": 0,
        "elastic": False, "end_state": "completed", "requested_devices": alloc["devices"]})
    cap = pd.DataFrame({"pool": ["train"], "start": at([0]), "end": at([horizon]),
                        "devices_in_service": [devices], "devices_out_of_service": [0]})
    rel = "scheduler/allocations.parquet"
    (out / "scheduler").mkdir(parents=True, exist_ok=True)
    write_allocations(table, cap, out / rel)
    return [rel]


def _write_traces(out: Path, jobs: list[str], seed: int) -> dict[str, tuple[str, list[str]]]:
    from fleetlib.program import synth_step_traces

    traces = {}
    for job in jobs:
        rel = f"traces/{job}"
        synth_step_traces(out / rel, ranks=2, steps=2, seed=seed + int(job) % 1000, straggler_rank=1)
        traces[job] = (rel + "/", sorted(str(p.relative_to(out)) for p in (out / rel).iterdir()))
    return traces


#: The table of job -> model config the manifest names (``models: {file: models.csv}``).
_MODELS_TABLE = "models.csv"


def _write_manifest(out: Path, devices: int, days: float, seed: int, window: list[str],
                    scheduler: list[str], timelines: list[str], models: dict[str, str] | str,
                    traces: dict[str, str]) -> None:
    lines = [
        f"# A synthetic fleet at scale written by fleetlib.fleet.scale.synth_fleet_scale(devices={devices},"
        f" days={float(days)!r}, seed={seed}); truth.json holds what was injected.",
        f"name: synthetic fleet at scale, {devices} GPUs, {float(days)!r} days, seed {seed}",
        f"window: ['{window[0]}', '{window[1]}']",
        "scheduler:", "  format: canonical", "  files:", *[f"    - {f}" for f in scheduler],
        "timelines:", "  format: canonical", "  files:", *[f"    - {f}" for f in timelines],
        *([f"models: {{file: {models}}}"] if isinstance(models, str)
          else ["models:", *[f"  '{k}': {v}" for k, v in models.items()]]),
        "traces:", *[f"  '{k}': [{v}]" for k, v in traces.items()],
        "price_per_device_hour: 2.0",
    ]
    (out / "fleet.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _truth(t: dict[str, float], capacity: float, window: list[str], devices: int, days: float, seed: int,
           allocations: int) -> dict[str, Any]:
    productive = t["productive"]
    runtime_losses = {k: t[k] for k in _RUNTIME_LOSSES}
    program_losses = {"step_time_above_baseline": t["above"],
                      "below_ideal_rate": productive - t["above"] - t["ideal"] - t["program_unobserved"],
                      "unobserved": t["program_unobserved"]}
    s, r, p = t["held"] / capacity, productive / t["held"], t["ideal"] / productive
    return {
        "generator": {"function": "fleetlib.fleet.scale.synth_fleet_scale", "devices": devices, "days": days,
                      "seed": seed, "allocations": allocations},
        "window": window,
        "mpg": s * r * p,
        "ideal_device_s": t["ideal"],
        "in_service_capacity_device_s": capacity,
        "factors": {
            "scheduling": {"value": s, "numerator_device_s": t["held"], "denominator_device_s": capacity},
            "runtime": {"value": r, "numerator_device_s": productive, "denominator_device_s": t["held"],
                        "losses": runtime_losses},
            "program": {"value": p, "numerator_device_s": t["ideal"], "denominator_device_s": productive,
                        "losses": program_losses},
        },
    }
