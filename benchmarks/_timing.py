"""Shared parts of the floor-versus-factor benchmark scripts: arguments, generation, interleaved timing.

The scripts are run as ``python benchmarks/NAME.py``, which puts this folder first on ``sys.path``, so
they import this module as ``_timing``.

By default every timed call runs in a fresh interpreter (``multiprocessing``'s spawn start method, with
the named modules imported before the clock starts).  In one long-lived process the floor and the factor
disturb each other: whichever runs second inherits the first one's heap and the allocator's and the
kernel's state of its freed pages, and on a small virtual machine that moved the floor's system time
by a factor of two or more from run to run.  A fresh process is also how a user meets the library
(one command, one notebook kernel).  ``--in-process`` restores the old single-process timing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil


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
    parser.add_argument("--in-process", action="store_true",
                        help="time every call in this one process instead of a fresh interpreter per call")
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


def ensure_input(script: str, size: str, args: argparse.Namespace, path: Path,
                 describe: Callable[[dict[str, Any]], str]) -> tuple[bool, dict[str, Any] | None]:
    """Generate the input in a child process unless it exists (or ``--regenerate``); say which.

    Returns ``(ok, generated)``: ``ok`` is False when generation failed (its stderr is printed);
    ``generated`` is the child's report, or None when the file was reused.
    """
    if not (args.regenerate or not path.is_file()):
        if not args.json:
            print(f"reusing {path}")
        return True, None
    child = generate_in_child(script, size, args, path)
    if child.returncode != 0:
        print(child.stderr, file=sys.stderr)
        return False, None
    generated = json.loads(child.stdout)
    if not args.json:
        print(f"generated {describe(generated)} in {generated['seconds']:.1f} s -> {path}")
    return True, generated


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


def _timed_result(fn: Callable[[Path], Any], path: Path,
                  timer: Callable[[Callable[[Path], Any], Path], Any]) -> tuple[Any, Any]:
    box: list[Any] = []
    timing = timer(lambda p: box.append(fn(p)), path)
    return timing, box[0]


def _child(conn: Any, fn: Callable[[Path], Any], path: Path,
           timer: Callable[[Callable[[Path], Any], Path], Any], imports: tuple[str, ...]) -> None:
    for name in imports:  # before the clock starts, as a warmed-up notebook kernel would have them
        importlib.import_module(name)
    conn.send(_timed_result(fn, path, timer))
    conn.close()


def _isolated(fn: Callable[[Path], Any], path: Path, timer: Callable[[Callable[[Path], Any], Path], Any],
              imports: tuple[str, ...]) -> tuple[Any, Any]:
    """Time ``fn(path)`` in a fresh spawned interpreter; return (timing, result)."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send, fn, path, timer, imports))
    child.start()
    send.close()
    try:
        out = receive.recv()
    except EOFError:
        child.join()
        raise RuntimeError(f"the timed child process died (exit code {child.exitcode})") from None
    child.join()
    return out


def interleaved(floor: Callable[[Path], Any], factor: Callable[[Path], Any], path: Path, repeats: int,
                timer: Callable[[Callable[[Path], Any], Path], Any], *, isolate: bool = True,
                imports: tuple[str, ...] = ()) -> dict[str, Any]:
    """One warm-up of each, then ``repeats`` alternating runs of floor and factor, each timed by ``timer``.

    With ``isolate`` every call (warm-ups included) runs in its own fresh interpreter that has imported
    ``imports`` first; the warm-ups then only fill the page cache.  ``factor_results`` holds what each
    timed factor call returned.
    """
    def run(fn: Callable[[Path], Any]) -> tuple[Any, Any]:
        return _isolated(fn, path, timer, imports) if isolate else _timed_result(fn, path, timer)

    (floor_warm, *_), floor_out = run(floor)
    (factor_warm, *_), factor_out = run(factor)
    floor_runs, factor_runs, factor_results = [], [], []
    for _ in range(repeats):
        floor_runs.append(run(floor)[0])
        timing, result = run(factor)
        factor_runs.append(timing)
        factor_results.append(result)
    return {"floor_warm": floor_warm, "floor_out": floor_out, "factor_warm": factor_warm,
            "factor_out": factor_out, "floor_runs": floor_runs, "factor_runs": factor_runs,
            "factor_results": factor_results}


def peak_rss_mib(isolated: bool) -> float:
    """Peak resident memory in MiB: of the largest timed child process, or of this process."""
    who = resource.RUSAGE_CHILDREN if isolated else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0  # Linux reports KiB


class PeakRSS:
    """Sample the RSS of this process plus all its descendants in a thread; keep the peak sum."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.interval_s = interval_s
        self.peak_bytes = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._me = psutil.Process()

    def _total(self) -> int:
        total = 0
        for proc in [self._me, *self._me.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._total())
            self.samples += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._total())


def median_run(samples: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Return (a copy of) the run of median ``key`` -- the lower middle one of an even count.

    The copy also holds every run's value as ``KEY_all``, in run order.
    """
    run = dict(sorted(samples, key=lambda r: r[key])[(len(samples) - 1) // 2])
    run[f"{key}_all"] = [r[key] for r in samples]
    return run
