"""Benchmark: the walk at fleet scale on Dask -- floor, 1 worker, 2 workers, peak memory, in one run.

* **input** -- :func:`fleetlib.fleet.scale.synth_fleet_scale`: a month of a 16,384-device fleet
  (about 200,000 allocations in the canonical allocations Parquet, about 100 million canonical
  timeline steps in partitioned Parquet, shared model configs, sampled Kineto traces), generated
  once into ``/tmp/fleetlib_bench`` (keyed by devices, days and seed) in a child process and reused
  by later runs (``--regenerate`` writes it again).  Generation is outside every timed window.
* **floor** -- reading every Parquet column the measurement needs, once: every timeline partition
  (all its columns: the runtime rung reads them all) and the scheduler's allocations file, with
  pyarrow, one file after another, in a fresh process.
* **measurement** -- :func:`fleetlib.fleet.measure.measure_fleet` with ``engine="dask"`` on a new
  LocalCluster of 2 and then 1 worker processes (started inside the timed window), each run in a
  fresh process.  A thread samples the resident memory (RSS) of this process and all its
  descendants (the measuring process, the nannies, the workers) every 0.2 s; the peak of the sum is
  reported (shared pages are counted once per process, so it is an upper bound).
* The 1- and 2-worker results must agree (S, R, P, MPG to 1e-12) and equal the generator's truth.
* Two fixed costs inside each timed window are timed again alone, after it, in the same child: the
  manifest load and a LocalCluster of that many workers started (every worker answering) and closed.

* ``--repeats N`` (default 3) rounds of floor, 2 workers and 1 worker, alternating, so that a busy
  spell of the shared machine touches each kind alike; each kind reports its median wall time (every
  run's is printed) and its largest peak memory.

* ``--scheduler ADDRESS`` -- the same walk on a cluster fleetlib did not start (its workers
  importing this checkout): each round times the 2-worker LocalCluster run and the run attached to
  ``ADDRESS`` (``measure_fleet(scheduler=ADDRESS)``), alternating, each in a fresh process, and the
  last line is ``fleet_cluster: ratio_to_local_cluster=R`` (the attached run's median wall time over
  the LocalCluster's; target R <= 1.1: attaching costs no more than starting a cluster).  The
  cluster should match the LocalCluster's size: 2 worker processes of one thread.
  ``--start-cluster`` starts that cluster itself -- ``dask scheduler`` and 2 ``dask worker``
  processes on loopback, with the LocalCluster's worker settings
  (:data:`~fleetlib.fleet.engine.WORKER_MALLOC`, no profiler, the same memory limit) -- and stops it
  at the end.

The last line is ``fleet: ratio_to_floor=X peak_rss_gb=Y speedup_2_workers=Z`` (X: the 2-worker
measurement's median wall time over the floor's; Y: the largest peak of the measurements, GB decimal;
Z: 1-worker median time over 2-worker median time).  Targets: X <= 3, Y <= 8, Z >= 1.6.  The load
average before and after is printed: the machine is shared, and a loaded machine lowers Z and raises X.

Usage::

    .venv/bin/python benchmarks/fleet.py                          # 16,384 devices x 30 days
    .venv/bin/python benchmarks/fleet.py --devices 1024 --days 2  # a quick run
    .venv/bin/python benchmarks/fleet.py --start-cluster          # attached vs LocalCluster
    .venv/bin/python benchmarks/fleet.py --scheduler tcp://host:8786
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _timing import PeakRSS, median_run

CACHE = Path("/tmp/fleetlib_bench")
FACTORS = ("scheduling", "runtime", "program")


def _generate(path: Path, devices: int, days: float, seed: int) -> dict[str, Any]:
    from fleetlib.fleet.scale import synth_fleet_scale

    t0 = time.perf_counter()
    bundle = synth_fleet_scale(path, devices=devices, days=days, seed=seed)
    return {"seconds": time.perf_counter() - t0, "allocations": bundle.truth["generator"]["allocations"]}


def _floor(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    rows = 0
    files = [*sorted((path / "timelines").glob("*.parquet")), path / "scheduler" / "allocations.parquet"]
    for f in files:
        rows += pq.read_table(f).num_rows
    return {"seconds": time.perf_counter() - t0, "rows": rows, "files": len(files)}


def _measure(path: Path, workers: int, scheduler: str | None = None) -> dict[str, Any]:
    import resource

    from fleetlib.fleet import measure_fleet

    def cpu(who: int) -> float:
        use = resource.getrusage(who)
        return use.ru_utime + use.ru_stime

    own0, children0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    if scheduler is None:
        m = measure_fleet(path, engine="dask", workers=workers, progress=True)
    else:  # a cluster this process did not start (left running)
        m = measure_fleet(path, engine="dask", scheduler=scheduler, progress=True)
    seconds = time.perf_counter() - t0
    # the worker processes are this process's children, reaped when the cluster closed
    own, children = cpu(resource.RUSAGE_SELF) - own0, cpu(resource.RUSAGE_CHILDREN) - children0
    steps = int(m.jobs["steps_in_timeline"].sum())
    return {
        "seconds": seconds,
        "cpu_s": {"client": own, "workers": children},
        "fixed": _fixed_costs(path, workers) if scheduler is None else {},
        "mpg": m.mpg,
        "factors": {f.boundary: f.value for f in (m.scheduling, m.runtime, m.program)},
        "jobs": len(m.jobs),
        "steps": steps,
        "chain": {k: bool(v["holds"]) for k, v in m.product.chain.items()},
    }


def _fixed_costs(path: Path, workers: int) -> dict[str, float]:
    """Two fixed costs inside the timed window, timed again alone (after it): the manifest, the cluster."""
    from fleetlib.fleet.engine import dask_client
    from fleetlib.fleet.manifest import load_manifest

    t0 = time.perf_counter()
    load_manifest(path)
    t1 = time.perf_counter()
    with dask_client(None, workers) as client:
        client.run(lambda: None)  # every worker up
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    return {"manifest_s": t1 - t0, "cluster_start_s": t2 - t1, "cluster_close_s": t3 - t2}


@contextlib.contextmanager
def _started_cluster(workers: int = 2) -> Iterator[str]:
    """Start ``dask scheduler`` and ``workers`` ``dask worker`` processes on loopback; yield the address.

    The workers are the LocalCluster's (:func:`fleetlib.fleet.engine.dask_client`): one thread each,
    behind a nanny, :data:`~fleetlib.fleet.engine.WORKER_MALLOC` in their environment, no profiler,
    the same memory limit; they import this checkout's fleetlib.  All are stopped on exit.
    """
    import distributed

    from fleetlib.fleet.engine import DEFAULT_MEMORY_PER_WORKER, WORKER_MALLOC

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, **WORKER_MALLOC, "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
           "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    with tempfile.TemporaryDirectory(prefix="fleetlib-bench-cluster-") as folder:
        file = Path(folder) / "scheduler.json"
        quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                                   "127.0.0.1", "--port", "0", "--dashboard-address", ":0",
                                   "--scheduler-file", str(file)], **quiet)]
        try:
            deadline = time.monotonic() + 60
            while not file.exists():
                if time.monotonic() > deadline or procs[0].poll() is not None:
                    raise SystemExit("the dask scheduler did not start")
                time.sleep(0.1)
            time.sleep(0.2)
            address = json.loads(file.read_text())["address"]
            procs += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                        "--nthreads", "1", "--memory-limit", DEFAULT_MEMORY_PER_WORKER,
                                        "--name", f"bench-{i}"], **quiet)
                      for i in range(workers)]
            with distributed.Client(address, timeout=60) as client:
                client.wait_for_workers(workers, timeout=120)
            yield address
        finally:
            for p in reversed(procs):  # the workers, then the scheduler
                if p.poll() is None:
                    p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _attached_rounds(args: argparse.Namespace, address: str) -> int:
    """Time the 2-worker LocalCluster walk against the walk attached to ``address``; print the ratio."""
    samples: dict[str, list[dict[str, Any]]] = {"local": [], "attached": []}
    for r in range(args.repeats):  # alternating, so that a busy spell touches both alike
        for kind, extra in (("local", ["--workers", "2"]), ("attached", ["--scheduler", address])):
            res, _ = _child(args, "measure", extra)
            samples[kind].append(res)
            print(f"round {r + 1} of {args.repeats}: {kind:8s} {res['seconds']:.2f} s, MPG {res['mpg']:.6f}")
    runs = {k: median_run(v, "seconds") for k, v in samples.items()}
    same = all(math.isclose(r["factors"][f], runs["local"]["factors"][f], rel_tol=1e-12)
               for v in samples.values() for r in v for f in FACTORS)
    ratio = runs["attached"]["seconds"] / runs["local"]["seconds"]
    print(f"medians of {args.repeats} round(s): LocalCluster (2 workers) {runs['local']['seconds']:.2f} s "
          f"({_spread(samples['local'])}); attached to {address} {runs['attached']['seconds']:.2f} s "
          f"({_spread(samples['attached'])}); the same factors (every run): {same}")
    print(f"load average after: {_load()}")
    print(f"fleet_cluster: ratio_to_local_cluster={ratio:.2f}")
    return 0 if same else 1


def _child(args: argparse.Namespace, what: str, extra: list[str]) -> tuple[dict[str, Any], int]:
    """Run this script as ``--child WHAT`` in a fresh process; return its JSON and the peak summed RSS."""
    command = [sys.executable, __file__, "--child", what, "--path", str(args.path), "--devices",
               str(args.devices), "--days", str(args.days), "--seed", str(args.seed), *extra]
    with PeakRSS() as mem:
        child = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if child.returncode != 0:
        raise SystemExit(f"{what} failed (exit {child.returncode})")
    return json.loads(child.stdout.strip().splitlines()[-1]), mem.peak_bytes


def _median_run(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median wall time (:func:`_timing.median_run`); its memory the largest of all."""
    run = median_run(samples, "seconds")
    run["peak_rss_gb"] = max(r["peak_rss_gb"] for r in samples)
    return run


def _spread(samples: list[dict[str, Any]]) -> str:
    return " ".join(f"{r['seconds']:.2f}" for r in samples) + " s"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    """Run the benchmark; print the report and the last line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=16384, help="GPUs (default 16,384)")
    parser.add_argument("--days", type=float, default=30.0, help="window length in days (default 30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--path", type=Path, help="bundle folder to reuse or create")
    parser.add_argument("--regenerate", action="store_true", help="write the bundle even if it exists")
    parser.add_argument("--json", action="store_true", help="also print one JSON object")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds of floor, 2-worker and 1-worker runs; medians are reported (default 3)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="time the walk on this running Dask cluster against a 2-worker LocalCluster")
    parser.add_argument("--start-cluster", action="store_true",
                        help="start a dask scheduler and 2 dask workers here, and run as --scheduler on it")
    parser.add_argument("--child", choices=("generate", "floor", "measure"), help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.path is None:
        args.path = CACHE / f"fleet_{args.devices}dev_{args.days:g}d_seed{args.seed}"
    if args.child:
        fn = {"generate": lambda: _generate(args.path, args.devices, args.days, args.seed),
              "floor": lambda: _floor(args.path),
              "measure": lambda: _measure(args.path, args.workers, args.scheduler)}
        print(json.dumps(fn[args.child]()))
        return 0
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    report: dict[str, Any] = {"devices": args.devices, "days": args.days, "seed": args.seed,
                              "bundle": str(args.path), "cpus": os.cpu_count(), "load_before": _load()}
    print(f"load average before: {report['load_before']} ({os.cpu_count()} CPUs)")
    if args.regenerate or not (args.path / "truth.json").is_file():
        gen, _ = _child(args, "generate", [])
        print(f"generated {gen['allocations']:,} allocations in {gen['seconds']:.1f} s -> {args.path}")
    else:
        print(f"reusing {args.path}")
    if args.start_cluster:
        with _started_cluster() as address:
            print(f"started a dask scheduler at {address} and 2 dask workers")
            return _attached_rounds(args, address)
    if args.scheduler:
        return _attached_rounds(args, args.scheduler)
    truth = json.loads((args.path / "truth.json").read_text())
    floors: list[dict[str, Any]] = []
    samples: dict[int, list[dict[str, Any]]] = {2: [], 1: []}
    for r in range(args.repeats):  # rounds alternate floor, 2 workers, 1 worker: a busy spell touches all
        floor, floor_rss = _child(args, "floor", [])
        floor["peak_rss_gb"] = floor_rss / 1e9
        floors.append(floor)
        print(f"round {r + 1} of {args.repeats}: floor: {floor['rows']:,} Parquet rows in {floor['files']} "
              f"files read in {floor['seconds']:.2f} s (peak RSS {floor['peak_rss_gb']:.2f} GB)")
        for workers in (2, 1):  # 2 first: on a busy machine its figures (ratio, memory) matter most
            res, peak = _child(args, "measure", ["--workers", str(workers)])
            res["peak_rss_gb"] = peak / 1e9
            samples[workers].append(res)
            print(f"  measure_fleet(engine='dask', workers={workers}): {res['seconds']:.1f} s, "
                  f"{res['jobs']:,} jobs held, {res['steps']:,} steps, MPG {res['mpg']:.6f}, "
                  f"peak RSS (all processes) {res['peak_rss_gb']:.2f} GB; CPU (user + system) "
                  f"{res['cpu_s']['client']:.1f} s in the measuring process, {res['cpu_s']['workers']:.1f} s "
                  f"in its workers")
            fixed = res["fixed"]
            print(f"    fixed costs inside it (timed again alone): manifest load {fixed['manifest_s']:.2f} "
                  f"s, LocalCluster start {fixed['cluster_start_s']:.2f} s + close "
                  f"{fixed['cluster_close_s']:.2f} s")
    floor = _median_run(floors)
    runs = {w: _median_run(v) for w, v in samples.items()}
    print(f"medians of {args.repeats} round(s): floor {floor['seconds']:.2f} s, 2 workers "
          f"{runs[2]['seconds']:.1f} s, 1 worker {runs[1]['seconds']:.1f} s (every run: floor "
          f"{_spread(floors)}; 2 workers {_spread(samples[2])}; 1 worker {_spread(samples[1])})")
    everything = [*samples[1], *samples[2]]
    same = all(math.isclose(r["factors"][f], runs[2]["factors"][f], rel_tol=1e-12)
               for r in everything for f in FACTORS)
    exact = all(math.isclose(runs[2]["factors"][f], truth["factors"][f]["value"], rel_tol=1e-9)
                for f in FACTORS)
    print(f"1 and 2 workers agree (every run): {same}; equal to the truth file: {exact}; chain holds: "
          f"{all(all(r['chain'].values()) for r in everything)}")
    ratio = runs[2]["seconds"] / floor["seconds"]
    peak_gb = max(r["peak_rss_gb"] for r in runs.values())
    speedup = runs[1]["seconds"] / runs[2]["seconds"]
    report.update(floor=floor, runs=runs, same=same, equals_truth=exact, load_after=_load(),
                  allocations=truth["generator"]["allocations"])
    print(f"load average after: {report['load_after']}")
    if args.json:
        print(json.dumps(report))
    print(f"fleet: ratio_to_floor={ratio:.2f} peak_rss_gb={peak_gb:.2f} speedup_2_workers={speedup:.2f}")
    return 0 if same and exact else 1


if __name__ == "__main__":
    sys.exit(main())
