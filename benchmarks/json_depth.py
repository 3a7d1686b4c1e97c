"""Benchmark: a big Philly-shaped ``cluster_job_log`` read by fleetlib against plain ``json.loads``.

The log (default 168 MB, the size that took 112 s and 8.6 GiB before the nesting scan streamed) is
generated once under the temporary folder and reused; it is not committed.  Each measurement runs in
a fresh child process (``python -c``), imports done before the clock starts:

* **json.loads** -- ``json.loads(Path(log).read_text())``: the floor any JSON reader pays.
* **guarded parse** -- the nesting scan (``fleetlib._io.json_depth_rows``) then ``json.loads``: what
  the Philly, Kueue, Volcano, torchtitan and ml-goodput readers do before they look at the jobs.
* **fleetlib** -- ``fleetlib.scheduling.read(log, "philly")``: the whole reader (file read, nesting
  scan, parse, attempts flattened, times localised, ledger).

*Time* is wall-clock seconds of the call alone, the median over ``--repeats`` interleaved children;
*memory* is the peak resident set during the call minus the resident set just before it (Linux:
``VmHWM`` reset through ``/proc/self/clear_refs`` right before the call), the largest over the
repeats.  Printed line, for the whole reader (issue 28, item 5; targets: both ratios <= 2)::

    json: rss_over_json_loads=X time_over_json_loads=Y

and, on standard error, the seconds and memory of each tool with their ratios.

Run as ``python benchmarks/json_depth.py [--mb 168] [--repeats 3]`` on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys, time
from pathlib import Path
{imports}
def rss(field):
    for line in open('/proc/self/status'):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    return 0
path = sys.argv[1]
{warm}
try:
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
except OSError:
    pass
before = rss('VmRSS:')
t0 = time.perf_counter()
result = {call}
seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "peak": rss('VmHWM:') - before}}))
"""

TOOLS = {
    "json.loads": ("", "", "json.loads(Path(path).read_text())"),
    "guarded parse": ("from fleetlib._io import json_depth_rows", "json_depth_rows('[1]')",
                      "(lambda text: (json_depth_rows(text), json.loads(text)))(Path(path).read_text())"),
    # the warm-up reads the bundled sample: numba's cached kernel and pandas' lazy parts load before the clock
    "fleetlib": ("import fleetlib.scheduling as s",
                 "s.read('data/scheduler/philly_sample/cluster_job_log.json', 'philly')",
                 "s.read(path, 'philly')"),
}


def generate(path: Path, megabytes: int, seed: int) -> None:
    """Write a Philly-shaped log of about ``megabytes`` MB: jobs with 1-3 attempts on 1-4 servers."""
    rng = random.Random(seed)
    target = megabytes * 1_000_000
    written = 0
    with path.open("w") as out:
        out.write("[\n")
        job = 0
        while written < target:
            submitted = 1_506_800_000 + job * 30
            attempts = []
            start = submitted + rng.randint(10, 3_000)
            for _ in range(rng.randint(1, 3)):
                end = start + rng.randint(60, 86_400)
                detail = [{"ip": f"m{rng.randint(1, 550)}",
                           "gpus": [f"gpu{g}" for g in range(rng.choice((1, 2, 4, 8)))]}
                          for _ in range(rng.choice((1, 1, 1, 2, 4)))]
                attempts.append({"start_time": _stamp(start), "end_time": _stamp(end), "detail": detail})
                start = end + rng.randint(5, 600)
            text = json.dumps({"status": rng.choice(("Pass", "Killed", "Failed")),
                               "vc": f"{rng.randrange(16**6):06x}",
                               "jobid": f"application_1506638472019_{job}",
                               "attempts": attempts, "submitted_time": _stamp(submitted),
                               "user": f"{rng.randrange(16**6):06x}"}, indent=4)
            out.write(("" if job == 0 else ",\n") + text)
            written += len(text) + 2
            job += 1
        out.write("\n]\n")


def _stamp(seconds: int) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def measure(tool: str, path: Path) -> dict[str, float]:
    """Run one tool on ``path`` in a fresh interpreter; return its seconds and peak memory increase."""
    imports, warm, call = TOOLS[tool]
    code = CHILD.format(imports=imports, warm=warm, call=call)
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parent.parent)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Generate the log if needed, time both tools interleaved and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=168, help="size of the generated log in MB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved children per tool")
    parser.add_argument("--path", type=Path, help="log to reuse or create (default: under the temp folder)")
    args = parser.parse_args()
    path = args.path or Path(tempfile.gettempdir()) / f"fleetlib_philly_{args.mb}mb_{args.seed}.json"
    if not path.exists():
        generate(path, args.mb, args.seed)
    runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in TOOLS}
    for _ in range(args.repeats):
        for tool in TOOLS:
            runs[tool].append(measure(tool, path))
    seconds = {tool: statistics.median(r["seconds"] for r in rs) for tool, rs in runs.items()}
    peak = {tool: max(r["peak"] for r in rs) for tool, rs in runs.items()}
    floor_s, floor_b = seconds["json.loads"], peak["json.loads"]
    for tool in TOOLS:
        print(f"# {tool}: {seconds[tool]:.2f} s, peak +{peak[tool] / 2**20:.0f} MiB "
              f"({peak[tool] / floor_b:.2f}x memory, {seconds[tool] / floor_s:.2f}x time)", file=sys.stderr)
    print(f"# {path}: {path.stat().st_size / 1e6:.0f} MB", file=sys.stderr)
    print(f"json: rss_over_json_loads={peak['fleetlib'] / peak['json.loads']:.2f} "
          f"time_over_json_loads={seconds['fleetlib'] / seconds['json.loads']:.2f}")


if __name__ == "__main__":
    main()
