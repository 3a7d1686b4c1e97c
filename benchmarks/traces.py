"""Benchmark: fleetlib's Kineto trace reader against HTA 0.5's ``TraceAnalysis`` load, same traces, same run.

For each trace, in alternating fresh child processes (so imports, allocator state and peak resident
memory are comparable):

* **HTA** -- ``hta.trace_analysis.TraceAnalysis(trace_dir=...)`` from ``holistictraceanalysis==0.5.0``,
  installed by this script into its own virtual environment (default
  ``$TMPDIR/fleetlib_bench/hta-venv``, created once with ``pip``; PyPI must be reachable the first
  time).  The trace files are linked into a temporary folder, which HTA loads (one rank per file).
* **fleetlib** -- :func:`fleetlib.program.readers.kineto.read_trace` (``read_traces`` for a
  folder) with ``cache=False``; then, in the same child, one read with a fresh cache folder (parse
  and write) and reloads from the cache (``read_trace(..., cache=True)``: hash, file read, tables).

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

Fleet shape (issue 15), ``--ranks N``: one run times

* HTA and fleetlib, as above, on one *small* file (DLRM rank 0, 0.9 MB of JSON) and one *large*
  one (the synthetic-from-real AllReduce trace, ``--scale`` copies: 49 MB of JSON at 5);
* a set of N rank files built from the bundled 8-rank DLRM job (file ``r`` is rank ``r % 8``'s
  trace with ``distributedInfo`` rank ``r`` of N and its timestamps shifted by a per-rank jitter of
  0-50 µs; its events, fields and size stay those of the real file), read by
  :func:`~fleetlib.program.read_traces` (``cache=False``) on a local Dask cluster of 1 and of 2
  worker processes (one thread each, started and warmed -- imports and a first read done --
  before the clock);
  the workers' and this process's peak resident memory are reported;
* the *floor* for the same set, in this one process: read the bytes, gunzip, and decode the events
  with the reader's own typed decoder (the fields the tables need, nothing built from them).
* the floor and the two set runs ``--set-repeats`` times (default 3), in alternating rounds; each
  reports its median wall time (every run's is printed too) and its largest memory.

The last line printed is::

    traces: hta_ratio_small=A hta_ratio_large=B rss_over_json=C speedup_2_workers=D ratio_to_floor_1024=E

A and B: HTA's load time over fleetlib's, *warm* (the second load in a child: the per-file cost a
pass over many files pays; the cold figures are in the table); C: fleetlib's peak memory above its
imports over the large file's JSON size, *cold* (the first load in a fresh process, the higher
one); D: the N-file set on 1 worker over on 2; E: the N-file set on 1 worker over the floor (both
one process at a time; each a median over the rounds).  Targets: A >= 4, B >= 8, C <= 1.5, D >= 1.6, E <= 3.5
(issue 26: restated from 2, the price of one decoding path).

Usage::

    .venv/bin/python benchmarks/traces.py                 # all traces, 3 repeats
    .venv/bin/python benchmarks/traces.py --repeats 1 --scale 0 --json
    .venv/bin/python benchmarks/traces.py --ranks 1024    # fleet shape; the last line as above
    .venv/bin/python benchmarks/traces.py --fixed-cost    # a small file's fixed cost and cost per event
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _timing import median_run

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "traces"
HTA_VERSION = "0.5.0"
BENCH_DIR = Path(tempfile.gettempdir()) / "fleetlib_bench"
TARGETS = {"hta_over_ours": 5.0, "peak_over_json": 2.0, "parse_over_reload": 20.0}
FLEET_TARGETS = {"hta_ratio_small": (">=", 4.0), "hta_ratio_large": (">=", 8.0), "rss_over_json": ("<=", 1.5),
                 "speedup_2_workers": (">=", 1.6), "ratio_to_floor_1024": ("<=", 3.5)}
FLEET_VERSION = "1"  # bump when the way the rank files are built changes

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
import pyarrow.parquet  # noqa: F401  (imported before the baseline as when it read the cache, so memory
                        # figures stay comparable with earlier runs; the cache no longer needs it)
from fleetlib.program.readers.kineto import read_trace, read_traces
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


_TS_RE = re.compile(rb'"ts": (\d+)')
_DIST_RE = re.compile(rb'"distributedInfo": \{[^}]*\}')


def _rank_file(args: tuple[Path, int, int, Path]) -> None:
    """Write rank ``rank`` of ``world``: ``src`` with its rank rewritten and timestamps jittered."""
    src, rank, world, out = args
    text = gzip.decompress(src.read_bytes())
    jitter = random.Random(rank).randint(0, 50)  # µs, the same for every event of the rank
    text = _TS_RE.sub(lambda m: b'"ts": %d' % (int(m.group(1)) + jitter), text)
    dist = b'"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d}' % (rank, world)
    text = _DIST_RE.sub(lambda m: dist, text, count=1)
    tmp = out.with_name(out.name + ".partial")
    tmp.write_bytes(gzip.compress(text, compresslevel=6))
    os.replace(tmp, out)


def rank_set(ranks: int, out: Path) -> list[Path]:
    """Build (once) ``ranks`` rank files from the bundled 8-rank DLRM job; return them, by rank."""
    sources = sorted((DATA / "dlrm_8rank").glob("*.json.gz"))
    out.mkdir(parents=True, exist_ok=True)
    files = [out / f"rank{r:05d}.pt.trace.json.gz" for r in range(ranks)]
    todo = [(sources[r % len(sources)], r, ranks, f) for r, f in enumerate(files) if not f.exists()]
    if todo:
        print(f"building {len(todo)} rank files in {out} (once) ...", file=sys.stderr)
        with multiprocessing.get_context("spawn").Pool(min(len(todo), os.cpu_count() or 1)) as pool:
            pool.map(_rank_file, todo, chunksize=16)
    return files


# The fleet children: the set on a local Dask cluster, and the floor.  Memory in KiB.
_FLEET_CHILD = _MEMORY + r"""
import json, logging, sys, time
logging.getLogger("distributed").setLevel(logging.ERROR)
import distributed
from fleetlib.program.readers.kineto import read_traces
folder, workers = sys.argv[1], int(sys.argv[2])
def warm():
    import fleetlib.program.readers.kineto  # noqa: F401  (imports done before the clock)
def worker_peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
from fleetlib.program.stragglers import local_cluster  # the cluster `fleetlib program --workers` starts
with local_cluster(workers) as cluster, distributed.Client(cluster) as client:
    client.run(warm)
    # warm: the imports and a first read on every worker (a long-lived cluster has done both)
    from pathlib import Path
    read_traces(sorted(Path(folder).iterdir())[:2 * workers], cache=False, progress=False, client=client)
    base = baseline()
    t0, c0 = time.perf_counter(), time.process_time()
    traces = read_traces(folder, cache=False, progress=False, client=client)
    out = {"s": time.perf_counter() - t0, "client_cpu_s": time.process_time() - c0,
           "client_peak_kib": peak() - base, "kernels": len(traces.kernels), "ranks": len(traces.ranks),
           "partitioned_by_rank": bool(traces.kernels["rank"].is_monotonic_increasing),
           "worker_peak_kib": sorted(client.run(worker_peak).values())}
print(json.dumps(out))
"""

_FLOOR_CHILD = r"""
import json, sys, time, zlib
import msgspec
from fleetlib.program.readers.kineto import EVENT_DECODER
TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])  # the document's top-level values, not built
files = sys.argv[1:]
events = 0
t0, c0 = time.perf_counter(), time.process_time()
for f in files:
    with open(f, "rb") as fh:
        raw = fh.read()
    text = zlib.decompress(raw, wbits=31)
    events += len(EVENT_DECODER.decode(TOP.decode(text)["traceEvents"]))
print(json.dumps({"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "events": events}))
"""


def fleet(files: list[Path], workers: tuple[int, ...] = (1, 2), repeats: int = 1) -> dict[str, Any]:
    """Time the set on 1 and 2 Dask workers and the floor, each in a fresh child, ``repeats`` rounds.

    The rounds alternate (floor, 1 worker, 2 workers, then again), so a busy spell of the machine
    touches every kind alike; each kind reports the run of median wall time (``s_all``: every
    run's), its memory the largest of its runs.
    """
    folder = files[0].parent
    sample = files[:8]
    out: dict[str, Any] = {"files": len(files), "gz_bytes": sum(f.stat().st_size for f in files),
                           "json_bytes": sum(json_size(f) for f in sample) * len(files) / len(sample),
                           "repeats": repeats}
    runs: dict[str, list[dict[str, Any]]] = {"floor": [], **{f"workers_{w}": [] for w in workers}}
    for r in range(repeats):
        runs["floor"].append(run_child([sys.executable, "-c", _FLOOR_CHILD, *map(str, files)]))
        for w in workers:
            runs[f"workers_{w}"].append(run_child([sys.executable, "-c", _FLEET_CHILD, str(folder), str(w)]))
            print(f"measured {len(files)} files on {w} worker(s) (round {r + 1} of {repeats})",
                  file=sys.stderr)
    for key, samples in runs.items():
        out[key] = _median_run(samples)
    return out


def _median_run(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median wall time (:func:`_timing.median_run`); its memory the largest of its runs."""
    run = median_run(samples, "s")
    if "client_peak_kib" in run:
        run["client_peak_kib"] = max(r["client_peak_kib"] for r in samples)
    if "worker_peak_kib" in run:
        run["worker_peak_kib"] = [max(p) for p in zip(*(r["worker_peak_kib"] for r in samples), strict=True)]
    return run


def fleet_line(small: dict[str, Any], large: dict[str, Any],
               sets: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """The last line: ``traces: hta_ratio_small=A ...`` and its values."""
    values = {
        "hta_ratio_small": small["hta_over_ours_warm"],
        "hta_ratio_large": large["hta_over_ours_warm"],
        "rss_over_json": large["peak_over_json_cold"],
        "speedup_2_workers": sets["workers_1"]["s"] / sets["workers_2"]["s"],
        "ratio_to_floor_1024": sets["workers_1"]["s"] / sets["floor"]["s"],
    }
    return "traces: " + " ".join(f"{k}={v:.2f}" for k, v in values.items()), values


def fleet_report(small: dict[str, Any], large: dict[str, Any], sets: dict[str, Any]) -> str:
    """The fleet-shape table: the two files, the set on 1 and 2 workers, the floor, the targets."""
    lines = [report([small, large]), ""]
    n, floor = sets["files"], sets["floor"]
    lines.append(f"{n} rank files: {sets['gz_bytes'] / 1e6:.1f} MB gzipped, about "
                 f"{sets['json_bytes'] / 1e6:.0f} MB of JSON, {floor['events']:,} events")
    lines.append(f"{'run':28} {'wall s':>7} {'ms/file':>8} {'client MB':>9} {'worker peak MB':>15} "
                 f"{'every run s':>18} {'client CPU ms/file':>18}")

    def spread(r: dict[str, Any]) -> str:
        return " ".join(f"{x:.2f}" for x in r.get("s_all", [r["s"]]))

    lines.append(f"{'floor (gunzip + decode)':28} {floor['s']:7.2f} {floor['s'] / n * 1e3:8.2f} "
                 f"{'':9} {'':15} {spread(floor):>18}")
    for key in sorted(k for k in sets if k.startswith("workers_")):
        r = sets[key]
        peaks = "/".join(f"{p / 1024:.0f}" for p in r["worker_peak_kib"])
        lines.append(f"{'fleetlib, ' + key.split('_')[1] + ' Dask worker(s)':28} {r['s']:7.2f} "
                     f"{r['s'] / n * 1e3:8.2f} {r['client_peak_kib'] / 1024:9.0f} {peaks:>15} "
                     f"{spread(r):>18} {r['client_cpu_s'] / n * 1e3:18.2f}")
    lines.append(f"(wall s: the median of {sets.get('repeats', 1)} alternating rounds; memory: the largest)")
    lines.append("")
    lines.append("targets: " + ", ".join(f"{k} {op} {v:g}" for k, (op, v) in FLEET_TARGETS.items()))
    return "\n".join(lines)


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


def main_fleet(args: argparse.Namespace, hta: Path, allreduce: Path, dlrm: list[Path]) -> int:
    """The fleet-shape run (``--ranks N``): print the table, then the ``traces:`` line last."""
    large_file = scaled_trace(allreduce, args.scale,
                              BENCH_DIR / f"synthetic_from_real_allreduce_x{args.scale}.json.gz")
    small = measure("small: dlrm_rank0", dlrm[:1], hta, args.repeats)
    print("measured the small file", file=sys.stderr)
    large = measure(f"large: allreduce x{args.scale}", [large_file], hta, args.repeats)
    print("measured the large file", file=sys.stderr)
    files = rank_set(args.ranks, BENCH_DIR / f"fleet_dlrm_{args.ranks}_v{FLEET_VERSION}")
    sets = fleet(files, repeats=args.set_repeats)
    line, values = fleet_line(small, large, sets)
    if args.json:
        print(json.dumps({"targets": FLEET_TARGETS, "hta_version": HTA_VERSION, "small": small,
                          "large": large, "set": sets, "values": values}, indent=1))
    else:
        print(fleet_report(small, large, sets))
    print(line)
    return 0


# The fixed-cost child: the floor and fleetlib's read of one file, each the median of warm repeats.
_FIXED_CHILD = r"""
import json, sys, time, zlib
from pathlib import Path
import msgspec
from fleetlib.program.readers.kineto import EVENT_DECODER, read_trace
TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
f, repeats = Path(sys.argv[1]), int(sys.argv[2])
def floor():
    EVENT_DECODER.decode(TOP.decode(zlib.decompress(f.read_bytes(), wbits=31))["traceEvents"])
def ours():
    read_trace(f, cache=False)
out = {}
for name, fn in (("floor", floor), ("ours", ours)):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    out[name + "_ms"] = sorted(times)[len(times) // 2] * 1e3
print(json.dumps(out))
"""


def fixed_cost(src: Path, copies: tuple[int, ...] = (1, 2, 4, 8), repeats: int = 9) -> str:
    """Split a small file's read into a fixed cost per file and a cost per event, by a least-squares line.

    ``src``'s events written ``k`` times back to back (:func:`scaled_trace`, the same JSON layout for
    every ``k``), each read in a fresh child: the floor (gunzip + typed decode) and
    :func:`~fleetlib.program.read_trace` (``cache=False``), the median of ``repeats`` warm reads.
    Returns the table and, last, ``fixed cost: per_file_ms=F ratio_at_most_copies=R`` (F: the
    intercept of fleetlib's line; R: fleetlib over the floor on the largest file, where the fixed
    cost is a few per cent of the read -- what the reader costs per event against the decode).  The
    floor's own time grows faster than its events (its line's intercept can be negative), so no
    slope ratio is printed.
    """
    import numpy as np

    rows = []
    for k in copies:
        f = scaled_trace(src, k, BENCH_DIR / f"fixed_cost_{src.name.split('.')[0]}_x{k}.json.gz")
        rows.append((k, run_child([sys.executable, "-c", _FIXED_CHILD, str(f), str(repeats)])))
    ks = np.array([k for k, _ in rows], dtype=float)
    slope, intercept = np.polyfit(ks, [r["ours_ms"] for _, r in rows], 1)
    lines = [f"fixed cost per file: {src.name}'s events written 1-{max(copies)} times (median of {repeats})",
             f"{'copies':>6} {'floor ms':>9} {'fleetlib ms':>12} {'ratio':>6}"]
    lines += [f"{k:>6} {r['floor_ms']:9.2f} {r['ours_ms']:12.2f} {r['ours_ms'] / r['floor_ms']:6.2f}"
              for k, r in rows]
    last = rows[-1][1]
    lines.append(f"fleetlib's line: {intercept:.2f} ms + {slope:.2f} ms a copy")
    lines.append(f"fixed cost: per_file_ms={intercept:.2f} "
                 f"ratio_at_most_copies={last['ours_ms'] / last['floor_ms']:.2f}")
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
    parser.add_argument("--set-repeats", type=int, default=3,
                        help="with --ranks: rounds of the floor and the 1- and 2-worker runs of the set "
                             "(the median of each is reported)")
    parser.add_argument("--ranks", type=int, default=0,
                        help="fleet shape: this many rank files built from the DLRM job, read on 1 and 2 "
                             "Dask workers against the floor, with HTA on one small and one large file (0: "
                             "the per-trace table above)")
    parser.add_argument("--fixed-cost", action="store_true",
                        help="only split DLRM rank 0's read into a fixed cost per file and a cost per event")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.set_repeats < 1 or args.scale < 0 or args.ranks < 0:
        parser.error("--repeats and --set-repeats must be >= 1, --scale and --ranks >= 0")
    if args.ranks and not args.scale:
        parser.error("--ranks needs the large file: --scale >= 1")
    if args.fixed_cost:  # fleetlib alone: HTA is not needed
        print(fixed_cost(sorted((DATA / "dlrm_8rank").glob("*.json.gz"))[0]))
        return 0
    hta = hta_python(args.venv)
    allreduce = DATA / "hta_nccl_allreduce_rank-0.json.gz"
    dlrm = sorted((DATA / "dlrm_8rank").glob("*.json.gz"))
    if args.ranks:
        return main_fleet(args, hta, allreduce, dlrm)
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
