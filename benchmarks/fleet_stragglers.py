"""Benchmark: fleet-scale stragglers on Dask within a memory bound, with a pandas anchor from the same run.

* **full run** -- :func:`fleetlib.program.stragglers.straggler_analysis` with ``engine="dask"`` on
  16,384 ranks x 10,000 steps = 163.84 million step timers (one synthetic Parquet file, ~660 MB,
  written by :func:`fleetlib.program.stragglers.synth_rank_timers` a row group at a time), on a
  :class:`distributed.LocalCluster` of ``--workers`` processes started inside the measured window.
  A thread samples the resident memory (RSS) of this process and of all its child processes (the
  workers, the nanny processes) every 0.2 s; the peak of their sum is printed with its ratio to
  the bound (8 GB, decimal).  Summing RSS counts shared pages (libraries) once per process, so the
  figure is an upper bound on the memory really used.
* **anchor** -- the first ``--subset-steps`` steps of the same grid (same values: every step's random
  numbers come from ``(seed, step)``) analysed by the pandas engine (whole table in memory) and by
  the Dask engine; their rows/s are printed beside the full run's, and the two results on the
  subset are compared (last arrivers, counts, maxima exactly; sums to 1e-12 relative).
* **ground truth** -- the injected persistent stragglers must be the top ranks of the full run.

Files are cached under ``/tmp/fleetlib_bench`` (keyed by ranks, steps and seed); ``--regenerate``
writes them again.  Generation is not part of the measured window.

Usage::

    .venv/bin/python benchmarks/fleet_stragglers.py                  # 16,384 x 10,000
    .venv/bin/python benchmarks/fleet_stragglers.py --steps 500 --subset-steps 100 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _timing import PeakRSS

from fleetlib.program.stragglers import local_cluster, straggler_analysis, synth_rank_timers

BOUND_BYTES = 8e9
CACHE = Path("/tmp/fleetlib_bench")


def generate(ranks: int, steps: int, seed: int, regenerate: bool) -> tuple[Path, dict[str, Any] | None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"rank_timers_r{ranks}_s{steps}_seed{seed}.parquet"
    if path.exists() and not regenerate:
        return path, None
    tmp = path.with_suffix(".partial")
    started = time.perf_counter()
    info = synth_rank_timers(tmp, ranks=ranks, steps=steps, seed=seed, stragglers=None,
                             transient_rate=1e-5, progress=sys.stderr.isatty())
    tmp.rename(path)
    info["path"] = str(path)
    info["seconds"] = time.perf_counter() - started
    (path.with_suffix(".json")).write_text(json.dumps(info))
    return path, info


def same_result(a: Any, b: Any) -> bool:
    exact_step = ["step", "ranks", "max_s", "min_s", "last_arriver"]
    exact_rank = ["rank", "steps", "arrived_last", "straggler"]
    if not a.per_step[exact_step].equals(b.per_step[exact_step]):
        return False
    if not a.per_rank[exact_rank].equals(b.per_rank[exact_rank]):
        return False
    for x, y in ((a.per_step, b.per_step), (a.per_rank, b.per_rank)):
        for col in x.columns:
            if x[col].dtype.kind == "f" and not np.allclose(x[col], y[col], rtol=1e-12, atol=0.0):
                return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=16_384)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--subset-steps", type=int, default=1_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if min(args.ranks, args.steps, args.subset_steps, args.workers) < 1 or args.subset_steps > args.steps:
        parser.error("sizes must be >= 1 and --subset-steps <= --steps")

    full, gen_full = generate(args.ranks, args.steps, args.seed, args.regenerate)
    subset, _ = generate(args.ranks, args.subset_steps, args.seed, args.regenerate)
    truth = json.loads(full.with_suffix(".json").read_text())["truth"]
    rows_full = args.ranks * args.steps
    rows_sub = args.ranks * args.subset_steps
    say = (lambda *a: None) if args.json else print
    say(f"file {full} ({full.stat().st_size / 1e9:.2f} GB, {rows_full:,} rows)")

    # Full run on Dask, memory sampled over the cluster's whole life.
    from distributed import Client

    with PeakRSS() as mem:
        started = time.perf_counter()
        with local_cluster(args.workers) as cluster, Client(cluster) as client:
            res = straggler_analysis(full, engine="dask", client=client, progress=not args.json)
            wall_full = time.perf_counter() - started
            started = time.perf_counter()
            sub_dask = straggler_analysis(subset, engine="dask", client=client)
            wall_sub_dask = time.perf_counter() - started
    peak = mem.peak_bytes
    # Anchor: pandas on the subset, its own peak sampled separately.
    with PeakRSS() as mem_pd:
        started = time.perf_counter()
        sub_pd = straggler_analysis(subset, engine="pandas")
        wall_sub_pd = time.perf_counter() - started

    injected = sorted(s["rank"] for s in truth["stragglers"])
    found = sorted(int(r) for r in res.top(len(injected))["rank"])
    out = {
        "rows": rows_full, "ranks": args.ranks, "steps": args.steps, "workers": args.workers,
        "file_bytes": full.stat().st_size,
        "generate_s": None if gen_full is None else gen_full["seconds"],
        "peak_rss_gb": peak / 1e9, "bound_gb": BOUND_BYTES / 1e9, "peak_to_bound": peak / BOUND_BYTES,
        "rss_samples": mem.samples,
        "dask_full_wall_s": wall_full, "dask_full_rows_per_s": rows_full / wall_full,
        "subset_rows": rows_sub,
        "dask_subset_wall_s": wall_sub_dask, "dask_subset_rows_per_s": rows_sub / wall_sub_dask,
        "pandas_subset_wall_s": wall_sub_pd, "pandas_subset_rows_per_s": rows_sub / wall_sub_pd,
        "pandas_subset_peak_rss_gb": mem_pd.peak_bytes / 1e9,
        "full_over_pandas_rows_per_s": (rows_full / wall_full) / (rows_sub / wall_sub_pd),
        "subset_dask_equals_pandas": same_result(sub_dask, sub_pd),
        "injected_stragglers": truth["stragglers"],
        "found_top": found, "ground_truth_found": found == injected,
        "top": res.top(5).to_dict(orient="records"),
    }
    if args.json:
        print(json.dumps(out, default=float))
    else:
        print(f"dask, {args.workers} workers: {rows_full:,} rows in {wall_full:.1f} s "
              f"({out['dask_full_rows_per_s'] / 1e6:.2f} M rows/s, cluster start included)")
        print(f"peak RSS, this process + children: {peak / 1e9:.2f} GB = {peak / BOUND_BYTES:.3f} x the "
              f"{BOUND_BYTES / 1e9:.0f} GB bound ({'met' if peak <= BOUND_BYTES else 'NOT met'}; "
              f"{mem.samples} samples)")
        print(f"anchor on {args.subset_steps:,} steps ({rows_sub:,} rows): pandas {wall_sub_pd:.1f} s "
              f"({out['pandas_subset_rows_per_s'] / 1e6:.2f} M rows/s, "
              f"peak {mem_pd.peak_bytes / 1e9:.2f} GB); "
              f"dask {wall_sub_dask:.1f} s ({out['dask_subset_rows_per_s'] / 1e6:.2f} M rows/s)")
        print(f"full dask rows/s over pandas-subset rows/s: {out['full_over_pandas_rows_per_s']:.2f}")
        print(f"dask result on the subset equals pandas: {out['subset_dask_equals_pandas']}")
        print(f"injected stragglers {injected}; top of the full run {found}: "
              f"{'found' if found == injected else 'NOT found'}")
        print(pd.DataFrame(out["top"]).to_string(index=False))
    ok = peak <= BOUND_BYTES and out["subset_dask_equals_pandas"] and out["ground_truth_found"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
