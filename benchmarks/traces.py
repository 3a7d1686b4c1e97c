"""Benchmark: fleetlib's Kineto trace reader against HTA 0.5's ``TraceAnalysis`` load, same traces, same run.

For each trace, in alternating fresh child processes (so imports, allocator state and peak resident
memory are comparable):

* **HTA** -- ``hta.trace_analysis.TraceAnalysis(trace_dir=...)`` from ``holistictraceanalysis==0.5.0``,
  installed by this script into its own virtual environment (default
  ``$TMPDIR/fleetlib_bench/hta-venv``, created once with ``pip``; PyPI must be reachable the first
  time).  The trace files are linked into a temporary folder, which HTA loads (one rank per file).
* **fleetlib** -- :func:`fleetlib.program.read_trace` (:func:`~fleetlib.program.read_traces` for a
  folder) with ``cache=False``; then, in the same child, one read with a fresh cache folder (parse
  and write) and reloads from the Parquet cache.

Each tool loads the trace twice per child: *cold* is the first load in the process (after the
imports: it also pays one-time lazy initialisation inside the libraries), *warm* the second.
*Time* is wall-clock seconds of the call alone, the median over ``--repeats`` children.  *Peak
memory* is the process's peak resident set during the call minus its resident set just before it
(Linux: the peak, ``VmHWM``, is reset through ``/proc/self/clear_refs`` right before each load),
i.e. the memory the load itself added; it is compared with the size of the decompressed JSON
text.  Children spawned by HTA (it parses several ranks in a process pool) are reported separately
(``getrusage`` ``RUSAGE_CHILDREN``, the largest child's peak).

Printed ratios and targets (issue 5, item 11), cold and warm:

* HTA time / fleetlib time >= 5
* fleetlib peak-memory increase / raw JSON size <= 2
* fleetlib parse (median of warm in-process repeats) / cached reload (median of 5) >= 20

Traces: the bundled real ones (``data/traces``: the HTA AllReduce trace, 9.8 MB of JSON; one DLRM
rank, 0.9 MB; the 8-rank DLRM folder) and, with ``--scale K`` (default 5), a larger
*synthetic-from-real* trace: the AllReduce trace's events repeated K times back to back (each copy
shifted by the trace's span plus 1 ms, with correlation, External id and flow ids offset so they stay
unique; metadata events once).  It has a real trace's shape and mix of events, but is not a
recorded trace.

Usage::

    .venv/bin/python benchmarks/traces.py                 # all traces, 3 repeats
    .venv/bin/python benchmarks/traces.py --repeats 1 --scale 0 --json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "traces"
HTA_VERSION = "0.5.0"
BENCH_DIR = Path(tempfile.gettempdir()) / "fleetlib_bench"
TARGETS = {"hta_over_ours": 5.0, "peak_over_json": 2.0, "parse_over_reload": 20.0}

# The children print one JSON line.  Memory in KiB.  Linux: writing "5" to /proc/self/clear_refs
# resets the peak resident set (VmHWM) to the current one, so the peak after the call, minus the
# resident set just before it (after the imports), is what the call itself added.
_MEMORY = r"""
import gc, resource
def _status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))
def baseline():
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")
def peak():
    return _status("VmHWM")
def children_peak():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
"""

_HTA_CHILD = _MEMORY + r"""
import json, logging, sys, time
logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
out = {}
for run in ("cold", "warm"):  # the first load in the process, then a second one
    base = baseline()
    t0, c0 = time.perf_counter(), time.process_time()
    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    out[run + "_s"], out[run + "_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out[run + "_peak_kib"] = peak() - base
    out["rows"] = sum(len(analysis.t.get_trace(r)) for r in analysis.t.get_all_traces())
    del analysis
out["children_peak_kib"] = children_peak()
print(json.dumps(out))
"""

_OURS_CHILD = _MEMORY + r"""
import json, statistics, sys, tempfile, time
import pyarrow.parquet  # noqa: F401  (the cache's reader: part of the baseline, like HTA's imports)
from fleetlib.program.traces import read_trace, read_traces
paths, parse_repeats, reload_repeats = sys.argv[1:-2], int(sys.argv[-2]), int(sys.argv[-1])
one = len(paths) == 1
def read(**kw):
    return read_trace(paths[0], **kw) if one else read_traces(paths, progress=False, **kw)
out = {}
for run in ("cold", "warm"):  # the first parse in the process, then a second one
    base = baseline()
    t0, c0 = time.perf_counter(), time.process_time()
    tr = read(cache=False)
    out[run + "_s"], out[run + "_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out[run + "_peak_kib"] = peak() - base
    out["rows"] = len(tr.kernels)
    del tr
warm = [out["warm_s"]]
for _ in range(parse_repeats - 1):
    t0 = time.perf_counter(); read(cache=False); warm.append(time.perf_counter() - t0)
with tempfile.TemporaryDirectory() as d:
    t0 = time.perf_counter()
    read(cache=True, cache_dir=d)
    out["parse_and_write_s"] = time.perf_counter() - t0
    reload = []
    for _ in range(reload_repeats):
        t0 = time.perf_counter(); hit = read(cache=True, cache_dir=d); reload.append(time.perf_counter() - t0)
    out["cached"] = hit.from_cache if one else all(r.from_cache for r in hit.reads)
out["warm_s"] = statistics.median(warm)
out["reload_s"] = statistics.median(reload)
print(json.dumps(out))
"""


def hta_python(venv: Path) -> Path:
    """Return the HTA virtual environment's interpreter, creating the environment if needed."""
    python = venv / "bin" / "python"
    check = [str(python), "-c", f"import hta, importlib.metadata as m; "
                                f"assert m.version('holistictraceanalysis') == '{HTA_VERSION}'"]
    if python.exists() and subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return python
    print(f"creating {venv} with holistictraceanalysis=={HTA_VERSION} (once) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"holistictraceanalysis=={HTA_VERSION}"],
                   check=True)
    subprocess.run(check, check=True)
    return python


def json_size(path: Path) -> int:
    """Size in bytes of a trace's JSON text (decompressed when gzipped)."""
    data = path.read_bytes()
    return len(gzip.decompress(data)) if data[:2] == b"\x1f\x8b" else len(data)


def scaled_trace(src: Path, copies: int, out: Path) -> Path:
    """Write the synthetic-from-real trace: ``src``'s events repeated ``copies`` times back to back."""
    if out.exists():
        return out
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    lo = min(e["ts"] for e in timed)
    hi = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    shift = (hi - lo) + 1000.0
    ids = [e.get("args", {}).get(k) for e in events for k in ("correlation", "External id")]
    stride = max((v for v in ids if isinstance(v, int)), default=0) + 1
    flow = max((e["id"] for e in events if isinstance(e.get("id"), int)), default=0) + 1
    out_events: list[dict[str, Any]] = []
    for c in range(copies):
        for e in events:
            if e.get("ph") == "M":
                if c == 0:
                    out_events.append(e)
                continue
            e = dict(e)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = e["ts"] + c * shift
            if isinstance(e.get("id"), int):
                e["id"] = e["id"] + c * flow
            if isinstance(e.get("args"), dict):
                a = dict(e["args"])
                for k in ("correlation", "External id"):
                    if isinstance(a.get(k), int):
                        a[k] = a[k] + c * stride
                e["args"] = a
            out_events.append(e)
    doc["traceEvents"] = out_events
    doc["traceName"] = f"synthetic-from-real: {src.name} x{copies}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_bytes(gzip.compress(json.dumps(doc).encode(), compresslevel=6))
    os.replace(tmp, out)
    return out


def run_child(command: list[str]) -> dict[str, Any]:
    """Run a child that prints one JSON line last; return it."""
    res = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    if res.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def measure(name: str, files: list[Path], hta: Path, repeats: int) -> dict[str, Any]:
    """Measure HTA and fleetlib on ``files`` (one rank each) in alternating fresh children."""
    size = sum(json_size(f) for f in files)
    hta_runs, our_runs = [], []
    with tempfile.TemporaryDirectory(prefix="hta_dir_") as d:
        for i, f in enumerate(files):
            suffix = ".json.gz" if f.read_bytes()[:2] == b"\x1f\x8b" else ".json"
            os.symlink(f.resolve(), Path(d) / f"rank-{i}{suffix}")
        for _ in range(repeats):
            hta_runs.append(run_child([str(hta), "-c", _HTA_CHILD, d]))
            our_runs.append(run_child([sys.executable, "-c", _OURS_CHILD, *map(str, files), "3", "5"]))
    med = statistics.median
    row: dict[str, Any] = {"trace": name, "files": len(files), "json_bytes": size, "repeats": repeats}
    for run in ("cold", "warm"):
        hta_s, ours_s = med(r[run + "_s"] for r in hta_runs), med(r[run + "_s"] for r in our_runs)
        hta_cpu, ours_cpu = med(r[run + "_cpu_s"] for r in hta_runs), med(r[run + "_cpu_s"] for r in our_runs)
        hta_peak = med(r[run + "_peak_kib"] * 1024 for r in hta_runs)
        ours_peak = med(r[run + "_peak_kib"] * 1024 for r in our_runs)
        row.update({
            f"hta_{run}_s": hta_s, f"ours_{run}_s": ours_s, f"hta_over_ours_{run}": hta_s / ours_s,
            f"hta_{run}_cpu_s": hta_cpu, f"ours_{run}_cpu_s": ours_cpu,
            f"hta_over_ours_{run}_cpu": hta_cpu / ours_cpu,
            f"hta_{run}_peak_bytes": hta_peak, f"ours_{run}_peak_bytes": ours_peak,
            f"peak_over_json_{run}": ours_peak / size, f"hta_peak_over_json_{run}": hta_peak / size,
        })
    reload = med(r["reload_s"] for r in our_runs)
    row.update({
        "reload_s": reload, "parse_and_write_s": med(r["parse_and_write_s"] for r in our_runs),
        "parse_over_reload": row["ours_warm_s"] / reload,
        "hta_children_peak_bytes": max(r["children_peak_kib"] for r in hta_runs) * 1024,
        "hta_rows": hta_runs[0]["rows"], "our_kernel_rows": our_runs[0]["rows"],
        "cache_hit": all(r["cached"] for r in our_runs),
    })
    return row


def report(rows: list[dict[str, Any]]) -> str:
    """Format the results as a text table with the targets."""
    mb = 1 / 1e6
    head = (f"{'trace':26} {'JSON MB':>7} {'run':>4} {'HTA s':>7} {'ours s':>7} {'HTA/ours':>8} "
            f"{'(CPU)':>7} {'HTA MB':>7} {'ours MB':>7} {'ours/JSON':>9} {'HTA/JSON':>8}")
    lines = [head]
    for r in rows:
        for run in ("cold", "warm"):
            lines.append(
                f"{r['trace'][:26]:26} {r['json_bytes'] * mb:7.2f} {run:>4} {r[f'hta_{run}_s']:7.3f} "
                f"{r[f'ours_{run}_s']:7.3f} {r[f'hta_over_ours_{run}']:7.1f}x "
                f"{r[f'hta_over_ours_{run}_cpu']:6.1f}x "
                f"{r[f'hta_{run}_peak_bytes'] * mb:7.1f} {r[f'ours_{run}_peak_bytes'] * mb:7.1f} "
                f"{r[f'peak_over_json_{run}']:8.2f}x {r[f'hta_peak_over_json_{run}']:7.2f}x")
    lines.append("")
    lines.append(f"{'trace':26} {'parse ms (warm)':>15} {'parse+write ms':>14} {'reload ms':>9} "
                 f"{'parse/reload':>12}")
    for r in rows:
        lines.append(f"{r['trace'][:26]:26} {r['ours_warm_s'] * 1e3:15.1f} "
                     f"{r['parse_and_write_s'] * 1e3:14.1f} {r['reload_s'] * 1e3:9.1f} "
                     f"{r['parse_over_reload']:11.1f}x")
    lines.append("")
    lines.append(f"targets: HTA/ours >= {TARGETS['hta_over_ours']:g}x, ours/JSON (peak memory) <= "
                 f"{TARGETS['peak_over_json']:g}x, parse/reload >= {TARGETS['parse_over_reload']:g}x.  cold: "
                 f"the first load in a fresh process (after imports); warm: a second load in the same "
                 f"process; (CPU): the ratio of process CPU seconds, less sensitive to a busy machine.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table (or JSON) and return 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh child processes per tool and trace")
    parser.add_argument("--scale", type=int, default=5,
                        help="copies in the synthetic-from-real trace (0: skip it)")
    parser.add_argument("--venv", type=Path, default=BENCH_DIR / "hta-venv", help="HTA virtual environment")
    parser.add_argument("--only", nargs="*", help="trace names to run (allreduce, dlrm_rank0, dlrm_8rank, "
                                                  "synthetic)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.scale < 0:
        parser.error("--repeats must be >= 1 and --scale >= 0")
    hta = hta_python(args.venv)
    allreduce = DATA / "hta_nccl_allreduce_rank-0.json.gz"
    dlrm = sorted((DATA / "dlrm_8rank").glob("*.json.gz"))
    cases: list[tuple[str, list[Path]]] = [
        ("allreduce", [allreduce]), ("dlrm_rank0", dlrm[:1]), ("dlrm_8rank", dlrm),
    ]
    if args.scale:
        out = BENCH_DIR / f"synthetic_from_real_allreduce_x{args.scale}.json.gz"
        cases.append(("synthetic", [scaled_trace(allreduce, args.scale, out)]))
    if args.only:
        cases = [c for c in cases if c[0] in args.only]
    rows = []
    for name, files in cases:
        label = name if name != "synthetic" else f"synthetic-from-real x{args.scale}"
        rows.append(measure(label, files, hta, args.repeats))
        if not args.json:
            print(f"measured {label}", file=sys.stderr)
    if args.json:
        print(json.dumps({"targets": TARGETS, "hta_version": HTA_VERSION, "results": rows}, indent=1))
    else:
        print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
