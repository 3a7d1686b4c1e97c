"""Shared parts of the floor-versus-factor benchmark scripts: arguments, generation, interleaved timing.

The scripts are run as ``python benchmarks/NAME.py``, which puts this folder first on ``sys.path``, so
they import this module as ``_timing``.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser, size: str, size_default: int, size_help: str,
                  seed_help: str) -> None:
    """Add the size option ``--SIZE`` and the options every benchmark shares."""
    parser.add_argument(f"--{size}", type=int, default=size_default, help=size_help)
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument("--path", type=Path, help="Parquet file to reuse or create (default: a cache file "
                                                  f"under the temporary folder, keyed by {size} and seed)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats after the warm-up")
    parser.add_argument("--regenerate", action="store_true", help="write the file even if it exists")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace, size: str) -> None:
    """Stop with a usage error when the size or the repeat count is below 1."""
    if getattr(args, size) < 1 or args.repeats < 1:
        parser.error(f"--{size} and --repeats must be at least 1")


def generate_in_child(script: str, size: str, args: argparse.Namespace,
                      path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script --generate-only`` in a child process with the same size and seed."""
    command = [sys.executable, script, "--generate-only", f"--{size}", str(getattr(args, size)), "--seed",
               str(args.seed), "--path", str(path)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """Wall-clock seconds and result of one call."""
    started = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - started, out


def timed_cpu(fn: Callable[[Path], Any], path: Path) -> tuple[float, float, float]:
    """Wall-clock, user-CPU and system-CPU seconds of one call."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    wall, _ = timed(fn, path)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def interleaved(floor: Callable[[Path], Any], factor: Callable[[Path], Any], path: Path, repeats: int,
                timer: Callable[[Callable[[Path], Any], Path], Any]) -> dict[str, Any]:
    """One warm-up of each, then ``repeats`` alternating runs of floor and factor, each timed by ``timer``."""
    # warm-up: imports, page cache, allocator
    floor_warm, floor_out = timed(floor, path)
    factor_warm, factor_out = timed(factor, path)
    floor_runs, factor_runs = [], []
    for _ in range(repeats):
        floor_runs.append(timer(floor, path))
        factor_runs.append(timer(factor, path))
    return {"floor_warm": floor_warm, "floor_out": floor_out, "factor_warm": factor_warm,
            "factor_out": factor_out, "floor_runs": floor_runs, "factor_runs": factor_runs}
