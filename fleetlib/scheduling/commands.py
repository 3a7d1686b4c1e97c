"""Command line of rung 1: ``fleetlib scheduling FILE...`` and ``fleetlib synth allocations``.

:func:`register` adds both commands to the ``fleetlib`` parser (:mod:`fleetlib.cli` calls it).  The
work is done by :func:`scheduling_command` and
:func:`fleetlib.scheduling.synth.synth_allocations_command`; this module parses the arguments,
turns malformed arguments (a window time that is not a time, a window without a zone, an output
folder that cannot be written) into :class:`~fleetlib.quality.DomainError` /
:class:`~fleetlib.quality.InputError` -- which the command line prints as one line and exit
status 2 -- and renders the result as text with units.

Examples
--------
.. code-block:: console

    $ fleetlib scheduling data/scheduler/helios_earth_may2020/vc*.csv.gz --format helios-sequence
    $ fleetlib scheduling data/scheduler/slurm_sample/*.txt --format slurm --tz UTC --json
    $ fleetlib synth allocations --n 100000 --seed 1 --out /tmp/fleet.parquet
    $ fleetlib scheduling /tmp/fleet.parquet --format canonical --json
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Window
from fleetlib.commands_common import (
    add_allow_empty_window_argument,
    add_collection_gap_argument,
    add_exclude_argument,
    cli_window,
    collection_gap_lines,
    collection_gap_seconds,
    exclusion_lines,
    input_path,
    ledger_lines,
    writable_output_path,
)
from fleetlib.quality import DomainError, InputError
from fleetlib.registry import detect
from fleetlib.scheduling.measure import COLLECTION_GAP_S, measure
from fleetlib.scheduling.readers import READERS, read
from fleetlib.scheduling.readers.slurm import check_slurm_inputs
from fleetlib.scheduling.records import check_window_within_records
from fleetlib.scheduling.schema import DENOMINATORS, LOSS_KEYS, LOSS_LABELS
from fleetlib.scheduling.synth import synth_allocations_command
from fleetlib.scheduling.views import cohort_goodput, held_time, openb_cohorts, queue_waits, status_mix

__all__ = [
    "register",
    "render_scheduling",
    "render_synth_allocations",
    "run_scheduling",
    "run_synth_allocations",
    "scheduling_command",
]


_S_PER_H = 3600.0
#: Formats giving waits, cohorts and the status mix, and time-based goodput only against a capacity.
_JOB_LOGS = ("helios-joblog", "acme")
#: Formats giving waits and size cohorts only.
_WAITS_ONLY = ("philly", "pai", "openb")

# ---------------------------------------------------------------------------------------------------
# Argument handling
# ---------------------------------------------------------------------------------------------------


def scheduling_command(
    paths: Sequence[str | PathLike[str]],
    format: str,
    *,
    window: Any = None,
    tz: str | None = None,
    denominator: str = "in_service",
    collection_gap_s: float | None = COLLECTION_GAP_S,
    allow_empty_window: bool = False,
    capacity: object = None,
) -> dict[str, object]:
    """Return the JSON-ready object of ``fleetlib scheduling FILE... --format F [--window S E] --json``.

    Parameters
    ----------
    paths
        Input files.
    format
        A key of :data:`fleetlib.scheduling.readers.READERS`.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes (a ``(start, end)`` pair of
        timezone-aware times or ISO 8601 texts, ``"START/END"``): the record window and the window
        scheduling goodput is computed over.
    tz
        Zone of naive input times (see :func:`fleetlib.scheduling.readers.read`).
    denominator
        ``"in_service"`` (default) or ``"installed"``, passed to the goodput computation.
    collection_gap_s
        The shortest stretch without any job record flagged ``collection_gap`` (None: not looked for).
    allow_empty_window
        Measure a ``window`` that reaches beyond the records' span by more than
        :data:`fleetlib.scheduling.WINDOW_SLACK`; refused by default (time-based goodput only).
    capacity
        The job logs' capacity (``helios-joblog``, ``acme``): GPUs per pool, one number, or
        ``"derived"`` (see :mod:`fleetlib.scheduling.readers.joblog`); None: none stated.

    Returns
    -------
    dict
        For the job logs: the waits-only object below, and with a capacity the measurement's object
        with it under ``"job_log"``.  For every other format but openb:
        :meth:`fleetlib.scheduling.measure.SchedulingMeasurement.to_dict`
        (``scheduling_goodput, capacity_device_s, held_device_s, availability, losses,
        cross_pool_losses, pools, ledger``).  For openb, which gives no time-based goodput:
        ``format, note, cohorts`` (one object per size cohort, see :func:`openb_cohorts`),
        ``installed`` and ``ledger``.
    """
    parsed = Window.parse(window)
    if capacity is not None and format not in _JOB_LOGS:
        raise DomainError(f"a stated capacity applies to the job logs {list(_JOB_LOGS)}; the {format} "
                          "records bring their own or none")
    if parsed is not None and parsed.exclusions and format in _WAITS_ONLY:
        raise DomainError(f"--exclude applies to time-based scheduling goodput; the {format} records give "
                          "waits and size cohorts only")
    if format in ("philly", "pai"):
        return _waits_only(*read(paths, format, tz=tz, window=window), format)
    if format in _JOB_LOGS:
        options = {} if capacity is None else {"capacity": capacity}
        records, ledger = read(paths, format, tz=tz, window=window, **options)
        jobs = _waits_only(records, ledger, format)
        if records.capacity is None:
            if parsed is not None and parsed.exclusions:
                raise DomainError("--exclude applies to time-based scheduling goodput; without a capacity "
                                  f"the {format} records give waits, cohorts and the status mix only")
            return jobs
        measured = measure(records, ledger=ledger, window=window, denominator=denominator,
                           collection_gap_s=collection_gap_s)
        out = measured.to_dict()
        if parsed is not None and not allow_empty_window:
            check_window_within_records(records, parsed.start, parsed.end)
        out["job_log"] = {k: v for k, v in jobs.items() if k != "ledger"}
        return out
    if format != "openb":
        measured = measure(paths, format=format, tz=tz, window=window, denominator=denominator,
                           collection_gap_s=collection_gap_s)
        out = measured.to_dict()  # no capacity in the window: refused there first
        if parsed is not None and not allow_empty_window and measured.records is not None:
            check_window_within_records(measured.records, parsed.start, parsed.end)
        return out
    records, ledger = read(paths, format, tz=tz, window=window)
    waits = records.extra.get("waits")
    return {
        "format": "openb",
        "note": records.extra["notes"]["use"],
        "cohorts": _plain_rows(openb_cohorts(waits) if waits is not None else None),
        "installed": _plain_rows(records.extra.get("installed")),
        "ledger": ledger.to_dict(),
    }


def _waits_only(records: Any, ledger: Any, format: str) -> dict[str, object]:
    """Return the object of waits, durations, size cohorts and the status mix of read allocations.

    The object of the formats without time-based goodput (Philly, PAI; the job logs without a
    capacity).  Waits and durations are over the attempts that got devices; a duration runs from gang
    completion to release and leaves out attempts censored while running.
    """
    alloc = records.allocations
    waits = queue_waits(alloc)
    started = alloc["first_assigned"].notna().to_numpy()
    w = waits["wait_s"].to_numpy()[started]
    ran = started & (alloc["end_state"].to_numpy() != "running")
    d = held_time(alloc, by="attempt")["held_s"].to_numpy()[ran]
    notes = records.extra["notes"]
    return {
        "format": format,
        "note": records.extra["notes"]["use"],
        "jobs": int(alloc["job_id"].nunique()),
        "attempts": len(alloc),
        "never_assigned": int((~started).sum()),
        "wait_p50_s": float(np.median(w)) if w.size else None,
        "wait_p90_s": float(np.quantile(w, 0.9)) if w.size else None,
        "duration_p50_s": float(np.median(d)) if d.size else None,
        "duration_p90_s": float(np.quantile(d, 0.9)) if d.size else None,
        "cohorts": _plain_rows(cohort_goodput(alloc)),
        "status_mix": _plain_rows(status_mix(alloc)),
        "installed": _plain_rows(records.extra.get("installed")),
        **({"capacity_note": notes["capacity"]} if "capacity" in notes else {}),
        "ledger": ledger.to_dict(),
    }


def _installed_and_ledger(res: dict[str, Any]) -> list[str]:
    """Return the closing lines of a waits-only rendering: installed GPUs by model, then the ledger."""
    lines = []
    if res["installed"]:
        total = sum(int(r["devices"]) for r in res["installed"])
        models = ", ".join(f"{r['model']} {int(r['devices']):,}" for r in res["installed"])
        lines.append(f"installed GPUs: {total:,} ({models})")
    if "capacity_note" in res:
        lines.append(f"capacity: {res['capacity_note']}")
    return [*lines, *([_render_ledger(res["ledger"])] if "ledger" in res else [])]


def _render_waits_only(res: Mapping[str, Any]) -> str:
    def num(x: Any, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    p50, p90 = num(res["wait_p50_s"], ",.0f"), num(res["wait_p90_s"], ",.0f")
    lines = [f"{res['format']}: {res['note']}",
             f"{res['jobs']:,} jobs, {res['attempts']:,} attempts ({res['never_assigned']:,} never assigned);"
             " "
             f"wait to gang completion p50 {p50} s, p90 {p90} s (attempts that got devices)",
             f"duration (gang completion to release) p50 {num(res['duration_p50_s'], ',.0f')} s, "
             f"p90 {num(res['duration_p90_s'], ',.0f')} s (attempts that ran to an end)",
             "size cohorts (GPUs asked; held = GPU-hours held by complete gangs):",
             f"  {'cohort':<8} {'jobs':>6} {'attempts':>8} {'held GPU-h':>11} {'mean wait s':>12} "
             f"{'median wait s':>14}"]
    for c in res["cohorts"]:
        lines.append(f"  {c['cohort']:<8} {c['jobs']:>6} {c['allocations']:>8} "
                     f"{num(c['held_device_s'] / _S_PER_H, ',.1f'):>11} {num(c['mean_wait_s'], ',.0f'):>12} "
                     f"{num(c['median_wait_s'], ',.0f'):>14}")
    lines.append("status mix (end state of each attempt; held = GPU-hours held by complete gangs):")
    lines.append(f"  {'end state':<10} {'attempts':>8} {'share':>7} {'held GPU-h':>11} {'share':>7}")
    for m in res["status_mix"]:
        held_share = "-" if m["held_share"] is None else f"{100.0 * m['held_share']:.1f} %"
        lines.append(f"  {m['end_state']:<10} {m['attempts']:>8} {100.0 * m['attempt_share']:>5.1f} % "
                     f"{m['held_device_s'] / _S_PER_H:>11,.1f} {held_share:>7}")
    return "\n".join(lines + _installed_and_ledger(res))


def _plain_rows(df: pd.DataFrame | None) -> list[dict[str, object]]:
    """Return a table's rows as JSON-ready dictionaries (numpy scalars as Python ones, NaN as None)."""
    if df is None:
        return []
    obj = df.astype(object).where(df.notna(), None)
    return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()}
            for r in obj.to_dict(orient="records")]


def run_scheduling(paths: Sequence[str | Path], format: str, *, window: Sequence[str] | None = None,
                   exclude: Sequence[Sequence[str]] | None = None, tz: str | None = None,
                   denominator: str = "in_service", collection_gap_min: float = 60.0,
                   allow_empty_window: bool = False, capacity: str | None = None) -> dict[str, Any]:
    """Compute the object ``fleetlib scheduling`` prints, from command-line style arguments.

    Parameters
    ----------
    paths
        Input files.
    format
        A key of :data:`fleetlib.scheduling.readers.READERS`.
    window
        ``(start, end)`` ISO 8601 text with zones, or None for the whole record.
    exclude
        ``(start, end)`` pairs inside ``window`` left out of S (``--exclude``; they need ``window``).
    tz
        Zone of naive input times (Slurm needs one; Helios defaults to ``Asia/Shanghai``).
    denominator
        ``"in_service"`` (default) or ``"installed"``.
    collection_gap_min
        The shortest stretch, in minutes, without any job record while capacity persists that is
        flagged as a collection gap (``--collection-gap``; default 60).
    allow_empty_window
        Measure a window reaching beyond the records (``--allow-empty-window``): see
        :func:`scheduling_command`.
    capacity
        ``--capacity`` of the job logs: ``derived``, a number of GPUs (a log with one pool), or
        ``POOL=GPUS,POOL=GPUS``; None: none stated.

    Returns
    -------
    dict
        :func:`scheduling_command`'s object.

    Raises
    ------
    DomainError
        An unknown format or denominator, a malformed window or exclusion.
    InputError
        A file that cannot be read.
    """
    if format not in READERS:
        raise DomainError(f"format must be one of {list(READERS)}; got {format!r}")
    if denominator not in DENOMINATORS:
        raise DomainError(f"denominator must be one of {list(DENOMINATORS)}; got {denominator!r}")
    gap_s = collection_gap_seconds(collection_gap_min)
    win = cli_window(window, exclude)
    for p in map(Path, paths):
        if p.is_dir():
            raise InputError("is a folder; give the files in it", file=str(p))
    if format == "slurm":
        check_slurm_inputs(paths)  # every missing input in one error
    return scheduling_command(list(paths), format, window=win, tz=tz, denominator=denominator,
                              collection_gap_s=gap_s,
                              allow_empty_window=allow_empty_window, capacity=_capacity_arg(capacity))


def _capacity_arg(text: str | None) -> object:
    """Parse ``--capacity``: ``derived``, a number, or ``POOL=GPUS,...`` (the reader checks the numbers)."""
    if text is None or text.strip() == "derived" or "=" not in text:
        return None if text is None else text.strip()
    out = {}
    for part in text.split(","):
        pool, sep, gpus = part.partition("=")
        if not sep or not pool.strip():
            raise DomainError(f"--capacity must be 'derived', a number of GPUs or POOL=GPUS,...; "
                              f"got {text!r}")
        out[pool.strip()] = gpus.strip()
    return out


def run_synth_allocations(n: int, seed: int, out: str | Path, *, days: float | None = None) -> dict[str, Any]:
    """Write a synthetic fleet as a canonical Parquet file; return its description and ground truth.

    Parameters
    ----------
    n
        Allocation rows (at least 1).
    seed
        Random seed.
    out
        Output ``.parquet`` file; its folder must exist.
    days
        Record length in days (default: the generator's).

    Returns
    -------
    dict
        :func:`fleetlib.scheduling.synth.synth_allocations_command`'s object.

    Raises
    ------
    DomainError
        ``n`` below 1 or ``days`` not positive.
    InputError
        The output file cannot be written.
    """
    if days is not None and not days > 0:
        raise DomainError(f"days must be positive; got {days!r}")
    path = writable_output_path(out)
    try:
        return synth_allocations_command(n, seed, path, days=days)
    except OSError as exc:
        raise InputError(f"cannot write the output file ({exc})", file=str(path)) from exc


# ---------------------------------------------------------------------------------------------------
# Text rendering
# ---------------------------------------------------------------------------------------------------


def _h(device_s: float) -> str:
    return f"{device_s / _S_PER_H:,.1f}"


def _opt_h(device_s: float | None) -> str:
    return "-" if device_s is None else _h(device_s)


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:5.1f} %" if whole else "    - "


def _opt_pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.2f} %"


def _render_openb(res: Mapping[str, Any]) -> str:
    lines = [f"openb: {res['note']}", "size cohorts (waits from creation to scheduling, seconds; "
             "statistics over scheduled pods):",
             f"  {'cohort':<16} {'pods':>6} {'never sched.':>12} {'GPUs asked':>10} {'p50 s':>9} "
             f"{'p90 s':>9} {'max s':>10} {'waited':>7}"]

    def num(x: Any, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    for c in res["cohorts"]:
        lines.append(f"  {c['cohort']:<16} {c['pods']:>6} {c['never_scheduled']:>12} "
                     f"{num(c['devices_requested'], ',.1f'):>10} {num(c['wait_p50_s'], ',.0f'):>9} "
                     f"{num(c['wait_p90_s'], ',.0f'):>9} {num(c['wait_max_s'], ',.0f'):>10} "
                     f"{num(None if c['share_waited'] is None else 100 * c['share_waited'], '.1f'):>5} %")
    return "\n".join(lines + _installed_and_ledger(res))


def _render_ledger(led: Mapping[str, Any]) -> str:
    return "\n".join(ledger_lines(led)) + "".join(f"\n  flag: {_flag_text(f)}" for f in led.get("flags", []))


def _flag_text(flag: Any) -> str:
    """One line for a flag: a reader's (a Flag's dictionary) or the partition's (text)."""
    if not isinstance(flag, Mapping):
        return str(flag)
    where = ", ".join(part for part in (
        str(flag.get("file")) if flag.get("file") else "",
        f"row {flag['row']}" if flag.get("row") is not None else "",
        f"field {flag['field']!r}" if flag.get("field") else "",
    ) if part)
    return f"{flag.get('code')}: {flag.get('message')}" + (f" ({where})" if where else "")


def render_scheduling(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib scheduling``'s result as text with units.

    Parameters
    ----------
    res
        The object :func:`run_scheduling` returns.

    Returns
    -------
    str
        Scheduling goodput, the loss partition in device-hours and as shares of the denominator, the
        cross-pool view of idle capacity, one line per pool, and the ledger's counts (for openb: the
        size cohorts and their waits).
    """
    if res.get("format") == "openb":
        return _render_openb(res)
    if "scheduling_goodput" not in res:  # waits-only: Philly, PAI, a job log without a capacity
        return _render_waits_only(res)
    installed = "out_of_service" in res["losses"]
    den_name = "installed" if installed else "in-service"
    cap = float(res["capacity_device_s"])
    lines = [
        f"scheduling goodput S     {res['scheduling_goodput']:.4f}  (held by complete gangs / {den_name} "
        "capacity-time)",
        f"{den_name + ' capacity':<24} {_h(cap)} device-h",
        f"{'held (gang complete)':<24} {_h(res['held_device_s'])} device-h",
        f"{'availability':<24} {_opt_pct(res['availability'])} (in-service / installed capacity-time)",
        f"losses (device-h, share of {den_name} capacity):",
    ]
    keys = [*LOSS_KEYS, *(["out_of_service"] if installed else [])]
    unobserved = res.get("unobserved") or {}
    for k in keys:
        if res["losses"][k] is None:
            lines.append(f"  {LOSS_LABELS[k]:<34} {'-':>16}  {unobserved.get(k, 'not observable')}")
            continue
        v = float(res["losses"][k])
        lines.append(f"  {LOSS_LABELS[k]:<34} {_h(v):>16}  {_share(v, cap)}")
    cp = res["cross_pool_losses"]
    lines.append("idle capacity, cross-pool view (any pool had pending GPU work):")
    lines.append(f"  {'idle while any pool queued':<34} {_h(cp['idle_with_queue']):>16}  "
                 f"{_share(cp['idle_with_queue'], cap)}")
    lines.append(f"  {'idle, every queue empty':<34} {_h(cp['idle_empty_queue']):>16}  "
                 f"{_share(cp['idle_empty_queue'], cap)}")
    pools = res.get("pools", {})
    if pools:
        width = max(8, *(len(p) for p in pools))
        lines.append("per pool (device-h):")
        lines.append(f"  {'pool':<{width}} {'S':>7} {'capacity':>14} {'held':>14} {'partial':>11} "
                     f"{'reserved':>10} {'idle+queue':>12} {'idle empty':>12} {'unattr.':>9}")
        for name, p in pools.items():
            s = "-" if p["scheduling_goodput"] is None else f"{p['scheduling_goodput']:.4f}"
            lo = p["losses"]
            lines.append(f"  {name:<{width}} {s:>7} {_h(p['capacity_device_s']):>14} "
                         f"{_h(p['held_device_s']):>14} {_opt_h(lo['partial_gang_hold']):>11} "
                         f"{_opt_h(lo['reservation']):>10} {_opt_h(lo['idle_with_queue']):>12} "
                         f"{_opt_h(lo['idle_empty_queue']):>12} {_opt_h(lo['unattributed']):>9}")
    lines += exclusion_lines(res.get("window"))
    lines += collection_gap_lines(res.get("collection_gaps"), res.get("window"), res["capacity_device_s"])
    if "job_log" in res:
        lines.append(_render_waits_only(res["job_log"]))
    lines.append(_render_ledger(res["ledger"]))
    return "\n".join(lines)


def render_synth_allocations(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib synth allocations``' result as text.

    Parameters
    ----------
    res
        The object :func:`run_synth_allocations` returns.

    Returns
    -------
    str
        What was written where, the window and pools, and the injected scheduling goodput.
    """
    truth = res["truth"]
    return "\n".join([
        f"wrote {res['allocations']:,} allocations, {res['capacity_rows']:,} capacity rows and "
        f"{res['reservation_rows']:,} reservation rows to {res['path']}",
        f"window {res['window']['start']} .. {res['window']['end']}; pools: {', '.join(res['pools'])}",
        f"injected scheduling goodput S = {truth['scheduling_goodput']:.6f} (--json gives the injected "
        "loss partition per pool, in device-s)",
        f"measure it: fleetlib scheduling {res['path']} --format canonical",
    ])


# ---------------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------------


def _cmd_scheduling(args: argparse.Namespace) -> dict[str, Any]:
    fmt = args.format or detect(args.files, "scheduling")  # --format omitted: named from the bytes
    return run_scheduling(args.files, fmt, window=args.window, exclude=args.exclude, tz=args.tz,
                          denominator=args.denominator, collection_gap_min=args.collection_gap,
                          allow_empty_window=args.allow_empty_window, capacity=args.capacity)


def _cmd_synth_allocations(args: argparse.Namespace) -> dict[str, Any]:
    return run_synth_allocations(args.n, args.seed, args.out, days=args.days)


def register(subparsers: Any, synth_subparsers: Any,
             add_json: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``fleetlib scheduling`` and ``fleetlib synth allocations`` to the command line.

    Parameters
    ----------
    subparsers
        The ``fleetlib`` sub-command action (``add_parser`` is called on it).
    synth_subparsers
        The ``fleetlib synth`` sub-command action.
    add_json
        Adds the common ``--json`` flag to a parser.
    """
    p = subparsers.add_parser(
        "scheduling", help="scheduling goodput and its loss partition from scheduler records",
        description="Read scheduler records, compute scheduling goodput S (device-time held by complete "
                    "allocations over in-service capacity-time) and its loss partition in device-seconds: "
                    "partial-gang hold, reservation, idle with / without a queue (per pool and "
                    "cross-pool), unattributed; plus availability and the reader's row ledger. For openb "
                    "pod lists: waits and size cohorts (no time-based goodput).")
    p.add_argument("files", nargs="+", type=input_path, metavar="FILE", help="input files of one format")
    p.add_argument("--format", choices=list(READERS),
                   help="record format (default: detected from the files' bytes when only one fits)")
    p.add_argument("--window", nargs=2, metavar=("START", "END"),
                   help="ISO 8601 times with a zone, e.g. 2024-03-04T00:00Z (default: whole record)")
    add_exclude_argument(p)
    add_allow_empty_window_argument(p)
    p.add_argument("--tz", metavar="ZONE",
                   help="IANA zone of naive input times (Slurm: required; Helios: Asia/Shanghai)")
    p.add_argument("--denominator", choices=DENOMINATORS, default="in_service",
                   help="capacity in the denominator (default in_service; installed adds an "
                        "out_of_service loss)")
    add_collection_gap_argument(p)
    p.add_argument("--capacity", metavar="GPUS",
                   help="capacity of a job log (helios-joblog, acme), which carries none: POOL=GPUS,... "
                        "(or one number for a log with one pool), or 'derived' (each pool's peak of "
                        "concurrently held GPUs, a lower bound); Helios: or give cluster_gpu_number.csv")
    add_json(p)
    p.set_defaults(func=_cmd_scheduling, render=render_scheduling)

    p = synth_subparsers.add_parser(
        "allocations", help="a synthetic fleet's allocations with known losses (canonical Parquet)",
        description="Generate a synthetic fleet (pools, rigid and elastic gangs, partial holds, "
                    "reservations, out-of-service devices, diurnal demand) and write its canonical "
                    "allocations, capacity and reservations to one Parquet file; print the injected "
                    "loss partition.")
    p.add_argument("--n", type=int, required=True, metavar="N", help="allocation rows")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.parquet", help="output file")
    p.add_argument("--days", type=float, metavar="D",
                   help="record length, days (default 7 up to 100,000 rows, else 28)")
    add_json(p)
    p.set_defaults(func=_cmd_synth_allocations, render=render_synth_allocations)
