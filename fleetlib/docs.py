"""Schema pages: one Markdown page per canonical table, generated from the rung schema modules.

``python -m fleetlib.docs`` writes ``docs/schemas/<rung>_<table>.md`` and ``docs/README.md``;
``python -m fleetlib.docs --check`` exits 1 (naming the pages) when the committed pages differ from
what the code generates, and ``tests/core/test_schema_docs.py`` runs that check.  Each page gives:

* the table's columns in the order of the rung's schema module (:mod:`fleetlib.scheduling.schema`,
  :mod:`fleetlib.runtime.schema`, :mod:`fleetlib.program.schema`, or the columns a registered reader
  declares), with the dtype the reader returns, the unit, the zone or clock of times, and the meaning;
* example rows, read by the registered reader from a bundled sample (so they are what the code
  returns, not what a page says it returns);
* every registered format that produces the table, with the command (or the published source) that
  writes that format's files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["EXPORTS", "check_pages", "main", "render_pages", "write_pages"]

ROOT = Path(__file__).resolve().parents[1]
_RUNG_NUMBER = {"scheduling": 1, "runtime": 2, "program": 3}
_UTC = "UTC"
_TRACE = "trace clock"

# ---------------------------------------------------------------------------------------------------
# What each table and column means: (unit, zone or clock, meaning); the zone of a UTC time column is
# filled from its dtype.
# ---------------------------------------------------------------------------------------------------

_TABLE_INTRO: dict[tuple[str, str], str] = {
    ("scheduling", "allocations"): "One row per allocation attempt (or per size segment of an elastic job): "
    "when it was submitted, got its first device, became a complete gang and released its devices.",
    ("scheduling", "capacity"): "Step function per pool: devices in service and out of service over "
    "half-open intervals `[start, end)`.",
    ("scheduling", "queue"): "Step function per pool: jobs and devices waiting over `[start, end)` (derived "
    "from the allocations when a format gives none).",
    ("scheduling", "reservations"): "Free devices kept idle so that a waiting gang can assemble "
    "(head-of-line reservations).",
    ("scheduling", "occupancy"): "The step function the sweep produces and aggregate formats (Helios) give "
    "directly: device counts by state per pool over `[start, end)`.",
    ("scheduling", "waits"): "openb pods: waits from creation to scheduling and size cohorts (no calendar "
    "time; no time-based goodput).",
    ("scheduling", "installed"): "Installed GPUs per model from a static node inventory (no times).",
    ("runtime", "steps"): "One row per training step of one attempt of a job.",
    ("runtime", "events"): "Point events of a job's timeline: gang completion, failures, restarts, "
    "checkpoints, the first step, releases.",
    ("runtime", "phases"): "Serving replicas: one row per lifecycle phase (placed, loading, warmup, serving, "
    "draining, released).",
    ("program", "kernels"): "One row per GPU activity (kernel, copy, set) of one rank, on its stream.",
    ("program", "steps"): "One row per step window of one rank (profiler step, user marker or span).",
    ("program", "host_syncs"): "Host-side synchronisations (device, stream, event waits) per rank and step.",
    ("program", "ops"): "CPU operators with recorded input shapes (for FLOP counts).",
    ("program", "rank_timers"): "Per-rank step timers: how long each rank took for each step.",
}

_S, _N, _DEV, _US = "s", "—", "devices", "µs"
_COLUMNS: dict[tuple[str, str], dict[str, tuple[str, str, str]]] = {
    ("scheduling", "allocations"): {
        "job_id": (_N, _N, "the scheduler's job id"),
        "attempt": (_N, _N, "0-based attempt (requeue, retry) of the job"),
        "pool": (_N, _N, "partition, queue or virtual cluster the devices came from"),
        "devices": (_DEV, _N, "devices the attempt held (the active gang size of an elastic segment)"),
        "submit": ("time", _UTC, "when this attempt entered the queue"),
        "first_assigned": ("time", _UTC, "first device bound; missing when it never got one"),
        "gang_complete": (
            "time",
            _UTC,
            "every member of the gang held; first_assigned → gang_complete is a partial-gang hold",
        ),
        "release": ("time", _UTC, "devices back in the pool (or when it left the queue)"),
        "priority": (_N, _N, "scheduler priority where the format has one (else NaN)"),
        "elastic": (_N, _N, "True for a size segment of an elastic job"),
        "end_state": (
            _N,
            _N,
            "completed, failed, cancelled, timeout, preempted, node_fail, out_of_memory, "
            "running / pending (censored at the end of the record) or unknown",
        ),
        "requested_devices": (_DEV, _N, "devices the job asked for (its size cohort)"),
    },
    ("scheduling", "capacity"): {
        "pool": (_N, _N, "partition, queue or virtual cluster"),
        "start": ("time", _UTC, "start of the interval"),
        "end": ("time", _UTC, "end of the interval (exclusive)"),
        "devices_in_service": (_DEV, _N, "devices that could be allocated"),
        "devices_out_of_service": (_DEV, _N, "installed devices down, drained or in maintenance"),
    },
    ("scheduling", "queue"): {
        "pool": (_N, _N, "partition, queue or virtual cluster"),
        "start": ("time", _UTC, "start of the interval"),
        "end": ("time", _UTC, "end of the interval (exclusive)"),
        "pending_jobs": ("jobs", _N, "jobs waiting for devices"),
        "pending_devices": (_DEV, _N, "devices those jobs ask for"),
    },
    ("scheduling", "reservations"): {
        "pool": (_N, _N, "partition, queue or virtual cluster"),
        "start": ("time", _UTC, "start of the reservation"),
        "end": ("time", _UTC, "end of the reservation (exclusive)"),
        "devices": (_DEV, _N, "free devices held idle"),
        "for_job_id": (_N, _N, "the waiting job they are kept for"),
    },
    ("scheduling", "occupancy"): {
        "pool": (_N, _N, "partition, queue or virtual cluster"),
        "start": ("time", _UTC, "start of the interval"),
        "end": ("time", _UTC, "end of the interval (exclusive)"),
        "in_service": (_DEV, _N, "devices in service"),
        "out_of_service": (_DEV, _N, "installed devices out of service"),
        "held_complete": (_DEV, _N, "devices held by complete gangs (the scheduling numerator)"),
        "partial_gang": (_DEV, _N, "devices held by gangs still assembling"),
        "reserved": (_DEV, _N, "free devices reserved for a waiting gang"),
        "pending_jobs": ("jobs", _N, "jobs waiting"),
        "pending_devices": (_DEV, _N, "devices the waiting jobs ask for"),
    },
    ("scheduling", "waits"): {
        "pod": (_N, _N, "pod name"),
        "pod_phase": (_N, _N, "Kubernetes pod phase"),
        "qos": (_N, _N, "QoS class"),
        "num_gpu": ("GPUs", _N, "whole GPUs asked"),
        "gpu_milli": ("1/1000 GPU", _N, "share of one GPU asked (1000 = a whole GPU)"),
        "devices": ("GPUs", _N, "GPUs asked (gpu_milli / 1000 for a shared GPU)"),
        "cohort": (_N, _N, "size cohort (CPU only, shared, 1 GPU, n GPUs)"),
        "creation_s": (_S, "trace start", "pod created"),
        "scheduled_s": (_S, "trace start", "pod bound to a node; missing when never scheduled"),
        "deletion_s": (_S, "trace start", "pod deleted"),
        "wait_s": (_S, _N, "scheduled_s − creation_s"),
        "scheduled": (_N, _N, "False for a pod never scheduled (a censored wait)"),
    },
    ("scheduling", "installed"): {
        "model": (_N, _N, "GPU model"),
        "nodes": ("nodes", _N, "nodes with that model"),
        "devices": ("GPUs", _N, "GPUs of that model"),
    },
    ("runtime", "steps"): {
        "job_id": (_N, _N, "the job (run) id"),
        "attempt": (_N, _N, "0-based attempt: a restart after a failure or preemption starts a new one"),
        "step": (_N, _N, "training step number"),
        "start": ("time", _UTC, "step start"),
        "end": ("time", _UTC, "step end"),
        "input_wait_s": (_S, _N, "time of the step spent waiting for input data (0 when not logged)"),
        "source_file": (_N, _N, "provenance (optional; every reader fills it): the record's file"),
        "source_row": (_N, _N, "provenance (optional): the record's 1-based row or line in its file"),
    },
    ("runtime", "events"): {
        "job_id": (_N, _N, "the job (run) id"),
        "attempt": (_N, _N, "0-based attempt"),
        "time": ("time", _UTC, "when it happened"),
        "kind": (
            _N,
            _N,
            "event kind (fleetlib.runtime.schema.EVENT_KINDS: gang_complete, failure, "
            "checkpoint_begin, first_step, release, ...)",
        ),
        "step": (_N, _N, "the step it refers to, where it has one"),
        "duration_s": (_S, _N, "a duration the event carries (checkpoint blocking time, lost work)"),
        "devices_before": (_N, _N, "elastic jobs (optional, Int64): devices held before a resize"),
        "devices_after": (_N, _N, "elastic jobs (optional, Int64): devices held after it"),
        "source_file": (_N, _N, "provenance (optional; every reader fills it): the record's file"),
        "source_row": (_N, _N, "provenance (optional): the record's 1-based row or line in its file"),
    },
    ("runtime", "phases"): {
        "replica_id": (_N, _N, "serving replica"),
        "phase": (_N, _N, "lifecycle phase"),
        "start": ("time", _UTC, "phase start"),
        "end": ("time", _UTC, "phase end"),
        "duration_s": (_S, _N, "end − start"),
    },
    ("program", "kernels"): {
        "rank": (_N, _N, "the rank (one trace file per rank)"),
        "step": (_N, _N, "the step window the activity falls in (missing: outside every step)"),
        "stream": (_N, _N, "CUDA / HIP stream"),
        "start_us": (_US, _TRACE, "start, microseconds on the traces' common time base"),
        "end_us": (_US, _TRACE, "end"),
        "dur_us": (_US, _N, "duration"),
        "name": (_N, _N, "kernel (or copy / set) name"),
        "kind": (_N, _N, "compute, comm, memcpy, memset, sync or other"),
        "collective": (
            _N,
            _N,
            "allreduce, allgather, reducescatter, alltoall, broadcast, sendrecv, reduce or none",
        ),
        "process_group": (_N, _N, "process group of a collective, where the trace names it"),
        "seq": (_N, _N, "collective sequence number within its group, where known"),
        "bytes": ("bytes", _N, "message size of a collective or copy, where known"),
        "cuda_graph": (_N, _N, "True when launched from a CUDA graph"),
    },
    ("program", "steps"): {
        "rank": (_N, _N, "the rank"),
        "step": (_N, _N, "step number"),
        "start_us": (_US, _TRACE, "step window start"),
        "end_us": (_US, _TRACE, "step window end"),
        "source": (_N, _N, "profiler_step, marker, gpu_span or trace_span"),
    },
    ("program", "host_syncs"): {
        "rank": (_N, _N, "the rank"),
        "step": (_N, _N, "the step window"),
        "tid": (_N, _N, "host thread"),
        "start_us": (_US, _TRACE, "start"),
        "end_us": (_US, _TRACE, "end"),
        "dur_us": (_US, _N, "duration"),
        "name": (_N, _N, "runtime call (cudaDeviceSynchronize, cudaStreamSynchronize, ...)"),
        "sync_kind": (_N, _N, "device, stream, event, stream_wait_event or sync_memcpy"),
        "blocking": (_N, _N, "True when the host waited"),
    },
    ("program", "ops"): {
        "rank": (_N, _N, "the rank"),
        "external_id": (_N, _N, "links the op to the kernels it launched"),
        "name": (_N, _N, "operator name (aten::mm, ...)"),
        "start_us": (_US, _TRACE, "start"),
        "dur_us": (_US, _N, "duration"),
        "input_dims": (_N, _N, "input shapes as recorded"),
        "input_types": (_N, _N, "input dtypes as recorded"),
    },
    ("program", "rank_timers"): {
        "rank": (_N, _N, "the rank"),
        "step": (_N, _N, "step number"),
        "duration_s": (_S, _N, "the rank's time for the step"),
    },
}

#: ``(rung, format) ->`` how that format's files are produced (Markdown: a command block or a source).
EXPORTS: dict[tuple[str, str], str] = {
    ("scheduling", "slurm"): "```console\n"
    "$ sacct -P -D -a --starttime 2024-03-04T00:00 --endtime 2024-03-05T00:00 \\\n"
    "    --format=JobID,JobIDRaw,User,Account,Partition,QOS,Priority,Submit,Eligible,Start,End,Elapsed,"
    "State,ExitCode,AllocTRES,ReqTRES,NodeList > sacct.txt\n"
    "$ sacctmgr -P show event Start=2024-03-04 End=2024-03-05 > sacctmgr_events.txt\n"
    "$ sinfo -N -o '%N|%P|%G' > sinfo_nodes.txt\n"
    "$ fleetlib scheduling sacct.txt sacctmgr_events.txt sinfo_nodes.txt --tz UTC\n```\n"
    "sacct and sinfo are needed for scheduling goodput (jobs and capacity); the sacctmgr events add "
    "node outages. `--tz` is the zone the cluster prints its times in.",
    ("scheduling", "kueue"): "```console\n"
    "$ kubectl get workloads.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,localqueues.kueue.x-k8s.io \\\n"
    "    -A -o yaml > workloads.yaml\n```\n"
    "One snapshot per run; snapshots saved over time (appended as YAML documents) give the history "
    "of each Workload's conditions.",
    ("scheduling", "volcano"): "```console\n"
    "$ kubectl get podgroups.scheduling.volcano.sh,queues.scheduling.volcano.sh -A --watch \\\n"
    "    --output-watch-events -o json | jq -c '{time: (now | todate), type, object}' > podgroups.jsonl\n"
    "```",
    ("scheduling", "helios-sequence"): "Published files: the per-VC minute sequences and "
    "`<cluster>_gpu_number.csv` of the Helios trace (S-Lab-System-Group/HeliosData, HeliosArtifact).",
    ("scheduling", "helios-joblog"): "Published files: `<cluster>/cluster_log.csv` (one row per job) and, "
    "for capacity, `<cluster>/cluster_gpu_number.csv` (daily per-VC quotas) of the Helios trace "
    "(S-Lab-System-Group/HeliosData, `data.zip`). Without the quota file, state a capacity with "
    "`--capacity VC=GPUS,...` or `--capacity derived` (each VC's peak of held GPUs, a lower bound); "
    "otherwise waits, durations, size cohorts and the status mix only.",
    ("scheduling", "acme"): "Published files: `data/job_trace/trace_seren.csv` and `trace_kalos.csv` of "
    "InternLM/AcmeTrace (the pool is the cluster, named by the file). The traces carry no capacity: "
    "state it with `--capacity seren=GPUS,kalos=GPUS` or `--capacity derived` (each cluster's peak "
    "of held GPUs, a lower bound); otherwise waits, durations, size cohorts and the status mix only.",
    ("scheduling", "openb"): "Published files: `openb_pod_list_*.csv` and `openb_node_list_*.csv` of "
    "Alibaba cluster-trace-gpu-v2023 (alibaba/clusterdata).",
    ("scheduling", "philly"): "Published file: `cluster_job_log` from `trace-data.tar.gz` of "
    "msr-fiddle/philly-traces (`git lfs pull`, then `tar -xzf trace-data.tar.gz`).",
    ("scheduling", "pai"): "Published files: `pai_job_table.csv`, `pai_task_table.csv`, "
    "`pai_instance_table.csv` (and `pai_machine_spec.csv`) of Alibaba cluster-trace-gpu-v2020 "
    "(`bash download_data.sh` in its `data/` folder, then `tar -xzf` each archive).",
    ("scheduling", "canonical"): "```console\n$ fleetlib synth allocations --n 100000 --seed 1 --out "
    "fleet.parquet\n```\nor `fleetlib.scheduling.write_allocations(allocations, capacity, path)` from "
    "tables in the columns above.",
    ("runtime", "mlperf"): "The `result_<n>.txt` logs of an MLPerf Training submission (the `:::MLLOG` "
    "lines `mlperf_logging.mllog` writes), e.g. `results/<system>/<benchmark>/result_0.txt` in "
    "mlcommons/training_results_v4.0.",
    ("runtime", "mlgoodput"): "The `<job>_timeline.jsonl` cache entries that ml-goodput-measurement's "
    "`GoodputRecorder` writes (one JSON object per recorded event).",
    ("runtime", "canonical"): "```console\n$ fleetlib synth timeline --steps 2000 --out job.parquet\n```\n"
    "or steps / events CSV or Parquet files with the columns above, written by the training loop.",
    ("runtime", "bloom"): "A hand-transcribed event table (date, time of day, zone, kind), as "
    "`data/timelines/bloom_176b_events.csv` from the BLOOM-176B training chronicle.",
    ("runtime", "serving"): "A CSV of replica lifecycle records (`time,replica_id,phase,...`) from the "
    "serving controller's logs.",
    ("runtime", "torchtitan"): "The structured logger's per-rank JSONL files (torchtitan "
    "`--metrics.enable_structured_logging` or its logging config).",
    (
        "program",
        "kineto",
    ): "```python\nwith torch.profiler.profile(\n        activities=[ProfilerActivity.CPU, "
    "ProfilerActivity.CUDA], record_shapes=True,\n        schedule=torch.profiler.schedule(wait=1, warmup=1, "
    'active=3),\n        on_trace_ready=torch.profiler.tensorboard_trace_handler("traces/")) as prof:\n'
    "    for batch in loader:\n        train_step(batch)\n        prof.step()\n```\n"
    'One `*.pt.trace.json[.gz]` file per rank (or `prof.export_chrome_trace("rank0.json")`).',
    ("program", "rank_timers"): "A CSV or Parquet file `rank,step,duration_s` written by each rank's step "
    "timer.",
    ("program", "nsys"): "```console\n$ nsys profile -o run --trace=cuda,nvtx python train.py\n"
    "$ nsys export --type sqlite --output run.sqlite run.nsys-rep\n```",
}

#: Format whose bundled sample gives a table's example rows, where it is not the first that declares it.
_EXAMPLE_FROM: dict[tuple[str, str], str] = {
    ("scheduling", "reservations"): "canonical",
    ("runtime", "steps"): "canonical",
    ("runtime", "events"): "canonical",
}
_EXAMPLE_ROWS = 3


@dataclass(frozen=True)
class _Table:
    rung: str
    name: str
    columns: tuple[str, ...]
    formats: tuple[str, ...]


def _registries() -> dict[str, Mapping[str, Any]]:
    from fleetlib import program, runtime, scheduling

    doors = {"scheduling": scheduling, "runtime": runtime, "program": program}
    return {r: doors[r].READERS for r in _RUNG_NUMBER}


def _schema_tables() -> dict[str, dict[str, tuple[str, ...]]]:
    from fleetlib import program, runtime, scheduling

    sched = dict(scheduling.TABLE_COLUMNS)
    sched.update(waits=scheduling.WAIT_COLUMNS, installed=scheduling.INSTALLED_COLUMNS)
    prog = {k: v for k, v in program.TABLE_COLUMNS.items() if k != "partition"}
    return {
        "scheduling": sched,
        "runtime": {"steps": (*runtime.STEP_COLUMNS, *runtime.PROVENANCE_COLUMNS),
                    "events": (*runtime.EVENT_COLUMNS, *runtime.DEVICE_COLUMNS, *runtime.PROVENANCE_COLUMNS)},
        "program": prog,
    }


def _tables() -> list[_Table]:
    regs = _registries()
    out = []
    for rung, tables in _schema_tables().items():
        declared: dict[str, tuple[str, ...]] = {}
        for spec in regs[rung].values():
            for t, cols in spec.tables.items():
                declared.setdefault(t, tuple(cols))
        names = list(tables) + [t for t in declared if t not in tables]
        for t in names:
            formats = tuple(n for n, s in regs[rung].items() if t in s.tables)
            out.append(_Table(rung, t, tuple(tables.get(t, declared.get(t, ()))), formats))
    return out


def _example(table: _Table, regs: Mapping[str, Mapping[str, Any]]) -> tuple[pd.DataFrame | None, str, str]:
    """Return (rows, sample paths, format) read by a registered reader from a bundled sample."""
    readers = regs[table.rung]
    prefer = _EXAMPLE_FROM.get((table.rung, table.name))
    order = ([prefer] if prefer in readers else []) + [f for f in table.formats if f != prefer]
    for name in order:
        spec = readers[name]
        good = sorted(
            (s for s in spec.samples if not s.bad), key=lambda s: (s.records is None, s.records or 0)
        )
        for sample in good:
            tables, _ = spec.read([ROOT / p for p in sample.paths], **dict(sample.options))
            frame = tables.get(table.name)
            if frame is not None and len(frame):
                cols = [c for c in table.columns if c in frame.columns]
                return frame[cols].head(_EXAMPLE_ROWS), ", ".join(f"`{p}`" for p in sample.paths), name
    return None, "", ""


def _cell(value: Any) -> str:
    if value is None or (not isinstance(value, (list, tuple, dict)) and pd.isna(value)):
        return ""
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, float):
        if value == int(value):
            return f"{value:.0f}"
        return f"{value:.1f}" if abs(value) >= 1000 else f"{value:.6g}"
    # a sample's path as the repository names it, not this checkout's absolute path
    text = str(value).replace(f"{ROOT}/", "").replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 48 else text[:45] + "..."


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _event_kinds() -> list[str]:
    """Return the events page's section: every event kind the readers accept and what each means."""
    from fleetlib import runtime

    rows = [[f"`{k}`", text] for k, text in runtime.EVENT_KINDS.items()]
    aux = "auxiliary phase marker some readers emit: kept, not flagged, ignored by the partition"
    rows += [[f"`{k}`", aux] for k in runtime.AUXILIARY_EVENT_KINDS]
    free = "auxiliary marker with a free-form type after the colon: kept, not flagged, ignored"
    rows += [[f"`{p}...`", free] for p in runtime.AUXILIARY_KIND_PREFIXES]
    return [
        "## Event kinds",
        "",
        "Every kind the readers accept (any other kind is kept and flagged `unknown_event_kind`).",
        "",
        *_md_table(["kind", "meaning"], rows),
        "",
        runtime.CLEAN_END_RULE,
    ]


def _page(table: _Table, regs: Mapping[str, Mapping[str, Any]]) -> str:
    rung, name = table.rung, table.name
    example, where, fmt = _example(table, regs)
    meaning = _COLUMNS.get((rung, name), {})
    lines = [
        f"# `{name}` — {rung} rung (rung {_RUNG_NUMBER[rung]})",
        "",
        "<!-- generated by `python -m fleetlib.docs` from the schema modules and readers; do not edit -->",
        "",
        _TABLE_INTRO.get((rung, name), f"The `{name}` table of the {rung} rung."),
        "",
        "## Columns",
        "",
    ]
    rows = []
    for col in table.columns:
        unit, zone, text = meaning.get(col, (_N, _N, "—"))
        dtype = str(example[col].dtype) if example is not None and col in example.columns else "—"
        if dtype.startswith("datetime64") and zone == _UTC:
            zone = "UTC (timezone-aware)"
        rows.append([f"`{col}`", f"`{dtype}`", unit, zone, text])
    lines += _md_table(["column", "dtype", "unit", "zone / clock", "meaning"], rows)
    lines += ["", "## Example rows", ""]
    if example is None:
        lines.append("No bundled sample gives this table.")
    else:
        lines.append(f"The first {len(example)} rows the `{fmt}` reader returns for {where}:")
        lines.append("")
        lines += _md_table(
            [f"`{c}`" for c in example.columns],
            [[_cell(v) for v in r] for r in example.itertuples(index=False, name=None)],
        )
    if (rung, name) == ("runtime", "events"):
        lines += ["", *_event_kinds()]
    lines += ["", "## Formats that produce it", ""]
    if not table.formats:
        lines.append("No reader returns it directly; fleetlib derives it from the other tables.")
    for f in table.formats:
        spec = regs[rung][f]
        lines += [
            f"### `--format {f}`",
            "",
            spec.summary + ".",
            "",
            EXPORTS.get((rung, f), "(no export command recorded)"),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def _index(tables: Sequence[_Table], regs: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "# fleetlib documentation",
        "",
        "<!-- generated by `python -m fleetlib.docs`; do not edit -->",
        "",
        "## Canonical tables",
        "",
        "Every reader turns its format into these tables (times timezone-aware UTC) and a ledger that "
        "accounts for every input row.",
        "",
    ]
    rows = [
        [
            f"[`{t.name}`](schemas/{t.rung}_{t.name}.md)",
            f"{t.rung} ({_RUNG_NUMBER[t.rung]})",
            ", ".join(f"`{f}`" for f in t.formats) or "derived",
        ]
        for t in tables
    ]
    lines += _md_table(["table", "rung", "formats"], rows)
    lines += [
        "",
        "## Formats",
        "",
        "`--format` may be omitted where the files' bytes fit exactly one format; otherwise the error "
        "lists the candidates.",
        "",
    ]
    frows = [[f"`{n}`", r, s.summary] for r, reg in regs.items() for n, s in reg.items()]
    lines += _md_table(["format", "rung", "what it reads"], frows)
    lines += _capabilities(regs["scheduling"])
    return "\n".join(lines) + "\n"


def _capabilities(readers: Mapping[str, Any]) -> list[str]:
    """Return the section saying which scheduling losses each scheduler format can observe."""
    from fleetlib.scheduling import LOSS_KEYS, unobserved_losses

    lines = [
        "",
        "## What each scheduler format can observe",
        "",
        "Scheduling goodput partitions in-service capacity-time into held time and these losses. A loss a "
        "format's records cannot tell apart is reported as `null` with its reason (in `unobserved` of "
        "the JSON, and in the text), never as a measured 0; its time lies inside another term. "
        "`reservation` is measured only where the records carry a `reservations` table (the canonical "
        "format stores one when given). Formats without capacity give waits, durations, size cohorts "
        "and the status mix, not S.",
        "",
    ]
    rows = []
    for name, spec in readers.items():
        tables = {t: pd.DataFrame() for t in spec.tables}
        if not ({"capacity", "occupancy"} & set(tables)):
            rows.append([f"`{name}`", *(["no S (no capacity)"] * len(LOSS_KEYS))])
            continue
        missing = unobserved_losses(name, tables)
        rows.append([f"`{name}`", *(("not observable: " + missing[k].split(": ", 1)[1]).replace("|", "\\|")
                                    if k in missing else "measured" for k in LOSS_KEYS)])
    return lines + _md_table(["format", *(f"`{k}`" for k in LOSS_KEYS)], rows)


def render_pages() -> dict[str, str]:
    """Return every documentation page, ``relative path -> Markdown text``.

    Returns
    -------
    dict
        ``README.md`` (the index) and ``schemas/<rung>_<table>.md`` for each canonical table.
    """
    regs = _registries()
    tables = _tables()
    pages = {f"schemas/{t.rung}_{t.name}.md": _page(t, regs) for t in tables}
    pages["README.md"] = _index(tables, regs)
    return pages


def write_pages(out: str | Path = ROOT / "docs", pages: Mapping[str, str] | None = None) -> list[Path]:
    """Write :func:`render_pages` under ``out``; return the paths written.

    Parameters
    ----------
    out
        The documentation folder (default: the repository's ``docs/``).
    pages
        Pages already rendered (default: :func:`render_pages`).
    """
    out = Path(out)
    written = []
    for rel, text in (pages if pages is not None else render_pages()).items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def check_pages(out: str | Path = ROOT / "docs", pages: Mapping[str, str] | None = None) -> list[str]:
    """Return the pages under ``out`` that are missing or differ from :func:`render_pages`.

    Parameters
    ----------
    out
        The documentation folder.
    pages
        Pages already rendered (default: :func:`render_pages`).

    Returns
    -------
    list of str
        Relative paths of stale or missing pages (empty when all are current), plus generated-looking
        schema pages that no table produces any more.
    """
    out = Path(out)
    pages = pages if pages is not None else render_pages()
    stale = [
        rel
        for rel, text in pages.items()
        if not (out / rel).is_file() or (out / rel).read_text(encoding="utf-8") != text
    ]
    extra = [
        f"schemas/{p.name}"
        for p in sorted((out / "schemas").glob("*.md"))
        if f"schemas/{p.name}" not in pages
    ]
    return stale + extra


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fleetlib.docs [--check] [--out DIR]``: write (or check) the schema pages."""
    parser = argparse.ArgumentParser(prog="python -m fleetlib.docs", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs", help="documentation folder (default docs/)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed pages are stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = check_pages(args.out)
        if stale:
            print(
                "stale documentation pages (run `python -m fleetlib.docs`): " + ", ".join(stale),
                file=sys.stderr,
            )
            return 1
        return 0
    for path in write_pages(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
