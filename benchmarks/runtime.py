"""Benchmark: runtime goodput of an N-step synthetic job timeline against the floor measured in the same run.

* **floor** -- read the one-file Parquet timeline (every column, into Arrow) and sort all its
  timestamps once (step starts, step ends and event times together, one ``numpy.sort``).  Nothing that
  measures the timeline can do less than read it and put its instants in order.
* **factor** -- :func:`fleetlib.runtime.commands.run_runtime`, what ``fleetlib runtime FILE --format
  canonical --json`` prints: read the file with the canonical reader (every row validated into the
  ledger), read the restart structure and partition held time (the compiled per-job kernel,
  :mod:`fleetlib.runtime.partition`) and return the JSON-ready summary.

The timeline is generated once, in a child process (so the peak resident memory printed is that of
measuring, not of generating), with failures, preemptions, periodic checkpoints, input waits and
evaluations, and cached at ``--path`` (default: under the system temporary folder, keyed by the step
count and seed).  After one warm-up of each, floor and factor run alternately ``--repeats`` times;
the medians and their ratio are printed.  Target: factor / floor <= 1.5 (median wall-clock times).
Each call runs in a fresh interpreter that has imported the libraries before its clock starts
(``--in-process`` times them all in this one process instead; see ``_timing`` for why the default
changed).  The peak resident memory printed is then that of the largest timed child.

On a shared machine wall-clock times also measure the other processes, so two readings that they
disturb less are printed beside the target ratio (they do not replace it): the ratio of the fastest
runs, and the ratio of median CPU time (user + system) of the process.

Usage::

    .venv/bin/python benchmarks/runtime.py                       # 10 million steps
    .venv/bin/python benchmarks/runtime.py --steps 1000000 --repeats 3 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _timing import add_arguments, check_arguments, ensure_input, interleaved, peak_rss_mib, timed_cpu

#: Imported in each timed child before its clock starts (a user's kernel has them loaded already): numba
#: and the runtime kernel's module too; loading the compiled kernel from numba's cache stays on the clock.
IMPORTS = ("pyarrow.parquet", "pyarrow.compute", "fleetlib.runtime.commands", "fleetlib.runtime.goodput",
           "fleetlib.runtime.partition")

TARGET_RATIO = 1.5

#: Shape of the simulated job (besides its length and seed): a failure every ~5 running hours, a
#: preemption every ~20, a checkpoint every 500 steps, 5 % of steps waiting for input, an evaluation
#: every 20,000 steps.
TIMELINE_OPTIONS: dict[str, Any] = {
    "step_s": 1.0, "failure_rate_per_h": 0.2, "preemption_rate_per_h": 0.05, "checkpoint_every_steps": 500,
    "checkpoint_write_s": 10.0, "input_wait_prob": 0.05, "eval_every_steps": 20_000, "eval_s": 60.0,
}


def default_path(steps: int, seed: int) -> Path:
    """Return the cache file of a timeline of ``steps`` steps and ``seed``."""
    return Path(tempfile.gettempdir()) / "fleetlib_bench" / f"runtime_steps{steps}_seed{seed}.parquet"


def generate(steps: int, seed: int, path: Path) -> dict[str, Any]:
    """Write the synthetic timeline's Parquet file (run in a child process); return its description."""
    from fleetlib.runtime.synth import synth_timeline_file

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial.parquet")
    started = time.perf_counter()
    res = synth_timeline_file(steps, seed=seed, out=partial, **TIMELINE_OPTIONS)
    partial.replace(path)
    res["path"] = str(path)
    res["seconds"] = time.perf_counter() - started
    return res


def floor(path: Path) -> int:
    """Read the whole file and sort every timestamp in it once; return how many were sorted."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    stamps = [pc.drop_null(table.column(i)).cast(pa.int64()).to_numpy()
              for i, f in enumerate(table.schema) if pa.types.is_timestamp(f.type)]
    return int(np.sort(np.concatenate(stamps)).size)


def factor(path: Path) -> dict[str, Any]:
    """Measure the timeline: read, validate, partition held time, summarise."""
    from fleetlib.runtime.commands import run_runtime

    return run_runtime([path], "canonical")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the timings, their ratio and the peak resident memory."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_arguments(parser, "steps", 10_000_000, "steps to retain (default 10 million)",
                  "random seed of the synthetic timeline")
    args = parser.parse_args(argv)
    check_arguments(parser, args, "steps")
    path = args.path or default_path(args.steps, args.seed)

    if args.generate_only:
        print(json.dumps(generate(args.steps, args.seed, path)))
        return 0

    ok, generated = ensure_input(__file__, "steps", args, path,
                                 lambda g: f"{g['steps']:,} step rows and {g['events']:,} event rows")
    if not ok:
        return 1

    runs = interleaved(floor, factor, path, args.repeats, timed_cpu, isolate=not args.in_process,
                       imports=IMPORTS)
    floor_warm, n_stamps = runs["floor_warm"], runs["floor_out"]
    factor_warm, summary = runs["factor_warm"], runs["factor_out"]
    floor_runs, factor_runs = runs["floor_runs"], runs["factor_runs"]
    floors, factors = [r[0] for r in floor_runs], [r[0] for r in factor_runs]
    floor_s, factor_s = statistics.median(floors), statistics.median(factors)
    # CPU time split: system time is the kernel mapping and zeroing fresh memory pages, the part of a
    # run that varies most from one run to the next on a shared machine
    cpu = {name: {"user_s": statistics.median(r[1] for r in runs),
                  "sys_s": statistics.median(r[2] for r in runs)}
           for name, runs in (("floor", floor_runs), ("factor", factor_runs))}
    ratio = factor_s / floor_s
    fastest_ratio = min(factors) / min(floors)
    cpu_s = {name: statistics.median(r[1] + r[2] for r in runs)
             for name, runs in (("floor", floor_runs), ("factor", factor_runs))}
    cpu_ratio = cpu_s["factor"] / cpu_s["floor"] if cpu_s["floor"] > 0 else None
    peak_mib = peak_rss_mib(not args.in_process)
    led = summary["ledger"]
    result = {
        "steps": args.steps,
        "rows_read": led["read"],
        "file": str(path),
        "file_mib": path.stat().st_size / 2**20,
        "timestamps_sorted": n_stamps,
        "repeats": args.repeats,
        "warmup_s": {"floor": floor_warm, "factor": factor_warm},
        "floor_s": floor_s,
        "factor_s": factor_s,
        "floor_runs_s": floors,
        "factor_runs_s": factors,
        "cpu_median_s": cpu,
        "ratio": ratio,
        "fastest_ratio": fastest_ratio,
        "cpu_ratio": cpu_ratio,
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio <= TARGET_RATIO,
        "peak_rss_mib": peak_mib,
        "runtime_goodput": summary["runtime_goodput"],
        "held_s": summary["held_s"],
        "unattributed_s": summary["terms"]["unattributed"],
        "terms_s": summary["terms"],
        "slow_step_s": summary["slow_step_s"],
        "interruptions": summary["interruptions"],
        "generated": generated is not None,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.steps:,} retained steps ({led['read']:,} rows in {result['file_mib']:.0f} MiB of Parquet), "
          f"{n_stamps:,} timestamps; median of {args.repeats} interleaved runs after one warm-up, "
          f"{'all in this process' if args.in_process else 'each in a fresh interpreter'}")
    print(f"  floor  (read the file, sort every timestamp once)  {floor_s:8.3f} s")
    print(f"  factor (fleetlib runtime FILE --format canonical)  {factor_s:8.3f} s")
    print(f"  ratio factor / floor  {ratio:.2f}x   (target <= {TARGET_RATIO:g}x: "
          f"{'met' if result['meets_target'] else 'NOT met'})")
    print(f"  runs (s): floor {' '.join(f'{t:.2f}' for t in floors)}; "
          f"factor {' '.join(f'{t:.2f}' for t in factors)}")
    cpu_text = f"{cpu_ratio:.2f}x" if cpu_ratio is not None else "n/a"
    print(f"  less disturbed readings: fastest runs {fastest_ratio:.2f}x; median CPU time (user + sys) "
          f"{cpu_text}")
    print(f"  median CPU (s): floor user {cpu['floor']['user_s']:.2f} + sys {cpu['floor']['sys_s']:.2f}; "
          f"factor user {cpu['factor']['user_s']:.2f} + sys {cpu['factor']['sys_s']:.2f}")
    print(f"  peak resident memory  {peak_mib:,.0f} MiB")
    counts = ", ".join(f"{n} {k}" for k, n in summary["interruptions"].items()) or "none"
    print(f"  R = {summary['runtime_goodput']:.6f} over {summary['held_s'] / 3600.0:,.1f} held hours; "
          f"interruptions: {counts}; unattributed {summary['terms']['unattributed']:.3g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
