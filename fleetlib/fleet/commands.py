"""Command line of the roof: ``fleetlib fleet`` and ``fleetlib synth fleet``.

``fleetlib fleet MANIFEST [--window START END] [--exclude START END ...] [--by day|week] [--segment-by FIELD]
[--engine pandas|dask] [--workers N] [--scheduler ADDRESS] [--kernels] [--json]`` measures one fleet bundle
(:func:`fleetlib.fleet.measure.measure_fleet`), with one row per calendar window or per segment when
asked (``--kernels``: the fleet-wide kernel and collective ranking of the traced jobs, with standard
errors, :func:`fleetlib.fleet.sampling.kernel_ranking`; ``--json`` always carries it as ``kernels``);
``fleetlib synth fleet --devices N --days D --seed S --out DIR`` writes a synthetic bundle with its truth file
(:func:`fleetlib.fleet.synth.synth_fleet`).

:func:`register` has the signature :mod:`fleetlib.cli` calls on every module of
``RUNG_COMMAND_MODULES``; :func:`add_parser` and :func:`add_synth_parser` add one command each.

Examples
--------
.. code-block:: console

    $ fleetlib synth fleet --devices 64 --days 1 --seed 0 --out /tmp/fleet
    $ fleetlib fleet /tmp/fleet/fleet.yaml --json
    $ fleetlib fleet /tmp/fleet/fleet.yaml --by day --segment-by software_version
    $ fleetlib fleet /tmp/fleet/fleet.yaml --scheduler tcp://10.0.0.5:8786
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fleetlib._environ import progress_wanted
from fleetlib.commands_common import (
    add_allow_empty_window_argument,
    add_collection_gap_argument,
    add_exclude_argument,
    add_scheduler_argument,
    collection_gap_lines,
    collection_gap_seconds,
    exclusion_lines,
    ledger_lines,
)
from fleetlib.quality import DomainError, InputError

__all__ = [
    "add_parser",
    "add_synth_parser",
    "register",
    "render_fleet",
    "render_kernels",
    "render_synth_fleet",
    "run_fleet",
    "run_synth_fleet",
    "slice_lines",
]


def run_fleet(
    manifest: str | Path,
    *,
    window: Sequence[str] | None = None,
    exclude: Sequence[Sequence[str]] | None = None,
    engine: str = "pandas",
    workers: int = 2,
    scheduler: str | None = None,
    progress: bool = False,
    by: str | None = None,
    segment_by: str | None = None,
    allow_empty_window: bool = False,
    collection_gap_min: float = 60.0,
) -> dict[str, Any]:
    """Return the JSON object of ``fleetlib fleet``.

    Parameters
    ----------
    manifest
        ``fleet.yaml`` or the bundle folder.
    window
        ``(START, END)`` ISO 8601 times with a zone; default the manifest's window.
    exclude
        ``(START, END)`` pairs inside the window left out of every factor (``--exclude``); they replace
        the manifest's ``exclude:``.  None: the manifest's.
    engine
        ``"pandas"`` or ``"dask"`` (a LocalCluster of ``workers`` processes; a progress bar on stderr).
    workers
        Dask worker processes (``engine="dask"`` only; ignored by the pandas engine).
    scheduler
        A running Dask scheduler's address to attach to (``--scheduler``; implies ``engine="dask"``);
        None: Dask's ``scheduler-address`` configuration (``DASK_SCHEDULER_ADDRESS``) when it names
        one, which implies ``engine="dask"`` as well.
    progress
        Show a progress bar over timeline files on stderr (read, or measured as Dask tasks).
    by, segment_by
        One row per UTC day or week (``windows``), one row per value of a job field (``segments``):
        as :func:`fleetlib.fleet.measure.measure_fleet`.
    allow_empty_window
        Measure a window reaching beyond the scheduler records (``--allow-empty-window``).
    collection_gap_min
        The shortest stretch, in minutes, without any job record while capacity persists that is
        flagged as a collection gap (``--collection-gap``; default 60).

    Returns
    -------
    dict
        :meth:`fleetlib.fleet.measure.FleetMeasurement.to_dict` (with its ``contract`` per factor, and
        ``windows`` / ``segments`` when asked for).
    """
    from fleetlib._environ import scheduler_address
    from fleetlib.fleet.measure import measure_fleet

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise DomainError(f"--workers must be a whole number >= 1; got {workers!r}")
    win = None if window is None else list(window)
    excl = None if not exclude else [tuple(p) for p in exclude]
    gap_s = collection_gap_seconds(collection_gap_min)
    address = scheduler_address(scheduler)
    if address is not None or engine == "dask":
        return measure_fleet(manifest, window=win, exclude=excl, engine="dask",
                             workers=None if address is not None else workers, scheduler=address,
                             progress=progress, by=by, segment_by=segment_by,
                             allow_empty_window=allow_empty_window, collection_gap_s=gap_s).to_dict()
    return measure_fleet(manifest, window=win, exclude=excl, engine=engine, progress=progress, by=by,
                         segment_by=segment_by, allow_empty_window=allow_empty_window,
                         collection_gap_s=gap_s).to_dict()


def run_synth_fleet(
    devices: int, days: float, seed: int, out: str | Path, *, scheduler: str = "slurm", serving: bool = False
) -> dict[str, Any]:
    """Write a synthetic bundle and return what was written with its truth.

    Parameters
    ----------
    devices, days, seed, scheduler, serving
        As :func:`fleetlib.fleet.synth.synth_fleet`.
    out
        Output folder; its parent must exist.

    Returns
    -------
    dict
        ``manifest``, ``files`` and ``truth``.
    """
    from fleetlib.fleet.synth import synth_fleet

    path = Path(out)
    if not path.parent.is_dir():
        raise InputError(
            f"cannot write the bundle: folder {str(path.parent)!r} does not exist", file=str(path)
        )
    if path.exists() and not path.is_dir():
        raise InputError("cannot write the bundle: it is a file, not a folder", file=str(path))
    bundle = synth_fleet(path, devices=devices, days=days, seed=seed, scheduler=scheduler, serving=serving)
    return {"manifest": str(bundle.manifest), "files": bundle.files, "truth": bundle.truth}


def _pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100.0 * x:5.1f} %"


def _h(device_s: float) -> str:
    return f"{device_s / 3600.0:12,.1f}"


def _num_h(device_s: float) -> str:
    return f"{device_s / 3600.0:,.1f}"


def slice_lines(rows: Sequence[Mapping[str, Any]], key: str, title: str) -> list[str]:
    """Return the text table of per-window or per-segment rows: S, R, P, MPG and each denominator.

    Parameters
    ----------
    rows
        ``windows`` or ``segments`` of ``fleetlib fleet --json``.
    key
        The row's name (``label`` or ``value``).
    title
        The table's heading.

    Returns
    -------
    list of str
        The heading, a header line and one line per row (device-hours; the chain's state).
    """
    width = max([len(str(r[key])) for r in rows] + [len(key)])
    out = [title, f"  {key:<{width}} {'jobs':>5} {'MPG':>8} {'S':>8} {'R':>8} {'P':>8} "
                  f"{'capacity h':>12} {'held h':>12} {'productive h':>13} {'ideal h':>10}  chain"]
    for r in rows:
        f = r["factors"]
        chain = "checked" if all(c["holds"] for c in r["chain"].values()) else "BROKEN"
        out.append(
            f"  {r[key]!s:<{width}} {r['jobs']:>5} {_pct(r['mpg']):>8} {_pct(r['scheduling']):>8} "
            f"{_pct(r['runtime']):>8} {_pct(r['program']):>8} "
            f"{_num_h(f['scheduling']['denominator_device_s']):>12} "
            f"{_num_h(f['runtime']['denominator_device_s']):>12} "
            f"{_num_h(f['program']['denominator_device_s']):>13} "
            f"{_num_h(f['program']['numerator_device_s']):>10}  {chain}"
        )
    return out


def render_fleet(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib fleet``'s result as text (device-hours; shares in percent)."""
    f = res["factors"]
    w = res["window"]
    lines = [
        f"fleet {res['name']!r}, window {w.get('start')} .. {w.get('end')}",
        *exclusion_lines(w),
        f"MPG {_pct(res['mpg'])}  =  S {_pct(f['scheduling']['value'])}  x  R {_pct(f['runtime']['value'])}"
        f"  x  P {_pct(f['program']['value'])}   (measured; chain checked)",
        f"availability {_pct(res['availability'])} (in-service / installed capacity-time; outside S)",
        *textwrap.wrap(f"R's definition: {f['runtime'].get('convention', '')}", width=110,
                       subsequent_indent="  "),
        *collection_gap_lines(res.get("collection_gaps"), w, res["in_service_capacity_device_s"]),
        f"coverage: runtime {_pct(res['coverage']['runtime'])} of held time has a timeline; program "
        f"{_pct(res['coverage']['program'])} of productive time has a model config",
        f"observed-only R (estimate, not in the product): {_pct(res['runtime_observed_only']['value'])}",
        *_slice_lines(res.get("slice_efficiency") or {}),
        "",
        "waterfall (device-hours):",
    ]
    unobserved = res["factors"]["scheduling"].get("unobserved") or {}
    for key, value in res["waterfall_device_s"].items():
        kind, stage = key.split(":", 1)
        if value is None:
            lines.append(f"    - {stage:<36} {'-':>12}  {unobserved.get(stage.split('.', 1)[1], '')}")
            continue
        lines.append(f"  {stage:<40} {_h(value)}" if kind == "total" else f"    - {stage:<36} {_h(value)}")
    if res.get("windows"):
        lines += ["", *slice_lines(res["windows"], "label", f"by {res['by']} (UTC, clipped to the window; "
                                   "rows add up to the whole):")]
    if res.get("segments"):
        split = {r["scheduling_split"] for r in res["segments"]}
        lines += ["", *slice_lines(res["segments"], "value", f"by {res['segment_by']} (S: "
                                   f"{'; '.join(sorted(split))}; rows add up to the whole):")]
    ranked = res["levers"]["ranked"]
    if ranked:
        lines += ["", "levers (relative gain at the measured ceiling):"]
        lines += [
            f"  {g['rank']}. {g['factor']:<11} {g['current']:.3f} -> {g['ceiling']:.3f}  "
            f"+{100 * g['relative_gain']:.1f} %"
            for g in ranked
        ]
    if res.get("cost_per_useful_device_hour") is not None:
        lines.append(
            f"\ncost per useful device-hour: {res['cost_per_useful_device_hour']:.2f} "
            f"(at {res['price_per_device_hour']:.2f} per in-service device-hour)"
        )
    contract = res.get("contract", {}).get("program", {})
    state = contract.get("system_state", {})
    if state:
        stated = {k: v for k, v in state.items() if v != "not stated"}
        lines.append(
            "\ncontract (system state): "
            + (", ".join(f"{k}={v}" for k, v in stated.items()) or "nothing stated")
            + f"; {len(state) - len(stated)} fields not stated"
        )
    lines += ["", *ledger_lines(res["ledger"])]
    flags = res["ledger"].get("flags", [])
    if flags:
        lines += ["", f"ledger flags ({len(flags)}):"]
        lines += [
            f"  {fl['code']}: {fl['message']}" if isinstance(fl, Mapping) else f"  {fl}" for fl in flags[:10]
        ]
    return "\n".join(lines)


def _slice_lines(eff: Mapping[str, Any]) -> list[str]:
    """Return the elastic jobs' slice-efficiency line beside R (none when no job logs device counts)."""
    if not eff.get("jobs"):
        return []
    return [f"slice efficiency of {eff['jobs']} elastic job(s): stepping {_pct(eff['stepping'])}, available "
            f"{_pct(eff['available'])} (devices stepping, held / the most each job held; time-weighted)"]


def render_kernels(res: Mapping[str, Any], *, top: int = 25) -> str:
    """Render the fleet-wide kernel and collective ranking of ``fleetlib fleet --kernels`` as text.

    Parameters
    ----------
    res
        ``fleetlib fleet``'s result (its ``kernels`` records).
    top
        Rows shown; the rest are counted.

    Returns
    -------
    str
        One line per kernel: rank, share of retained device-time +- its standard error, kind, jobs, name.
    """
    rows = res.get("kernels") or []
    w = res["window"]
    lines = [
        f"fleet {res['name']!r}, window {w.get('start')} .. {w.get('end')}",
        "kernels and collectives by share of the traced strata's retained device-time (stratified sample "
        "of traced jobs; +- one standard error)",
    ]
    if not rows:
        return "\n".join([*lines, "  no traced job: nothing to rank"])
    lines.append(f"  {'#':>3}  {'share':>8}  {'+- se':>8}  {'kind':<10} {'jobs':>4}  name")
    for r in rows[:top]:
        se = "-" if r["standard_error"] is None else f"{100 * r['standard_error']:.2f} %"
        lines.append(f"  {r['rank']:>3}  {100 * r['share']:6.2f} %  {se:>8}  {r['kind']:<10} {r['jobs']:>4}  "
                     f"{r['name']}")
    if len(rows) > top:
        lines.append(f"  ... {len(rows) - top} more (--json lists all)")
    return "\n".join(lines)


def render_synth_fleet(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib synth fleet``'s result as text."""
    t = res["truth"]
    f = t["factors"]
    return (
        f"wrote {len(res['files'])} files; manifest {res['manifest']}\n"
        f"truth: MPG {_pct(t['mpg'])} = S {_pct(f['scheduling']['value'])} x R {_pct(f['runtime']['value'])}"
        f" x P {_pct(f['program']['value'])}"
    )


def _cmd_fleet(args: argparse.Namespace) -> dict[str, Any]:
    if getattr(args, "kernels", False):
        args.render = render_kernels
    # bars only for a person watching: stderr a terminal, and not while printing JSON for a program
    return run_fleet(
        args.manifest,
        window=args.window,
        exclude=args.exclude,
        engine=args.engine,
        workers=args.workers,
        scheduler=args.scheduler,
        progress=progress_wanted(getattr(args, "json", False)),
        by=args.by,
        segment_by=args.segment_by,
        allow_empty_window=args.allow_empty_window,
        collection_gap_min=args.collection_gap,
    )


def _cmd_synth_fleet(args: argparse.Namespace) -> dict[str, Any]:
    return run_synth_fleet(args.devices, args.days, args.seed, args.out, scheduler=args.scheduler,
                           serving=args.serving)


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object with full precision")


def add_parser(subparsers: Any, add_json: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """Add ``fleetlib fleet`` to the command line.

    Parameters
    ----------
    subparsers
        The ``fleetlib`` sub-command action.
    add_json
        Adds the common ``--json`` flag (default: a local one of the same form).
    """
    p = subparsers.add_parser(
        "fleet",
        help="one fleet bundle -> measured S, R, P and MPG with the chain checked",
        description="Read a fleet bundle (fleet.yaml: scheduler records, job timelines, model configs, "
        "traces), measure S from the scheduler records, R over the held time they hand over "
        "(with unobserved time, zombies and the reconciliation residual), P over R's productive "
        "time, MPG through the chain check; the waterfall, levers and cost.",
    )
    p.add_argument("manifest", metavar="MANIFEST",
                   help="fleet.yaml or its bundle folder (a path, or an fsspec URL such as s3://bucket/prefix/fleet.yaml)")
    p.add_argument(
        "--window",
        nargs=2,
        metavar=("START", "END"),
        help="ISO 8601 times with a zone (default: the manifest's window)",
    )
    add_exclude_argument(p)
    add_allow_empty_window_argument(p)
    add_collection_gap_argument(p)
    p.add_argument(
        "--by", choices=("day", "week"), default=None,
        help="also one row per UTC day or ISO week (clipped to the window; rows add up to the whole)",
    )
    p.add_argument(
        "--segment-by", metavar="FIELD", default=None,
        help="also one row per value of a job field: pool, architecture, software_version, or one the "
        "bundle states per job (contract.jobs) or its scheduler records carry",
    )
    p.add_argument(
        "--engine", choices=("pandas", "dask"), default="pandas", help="engine (dask: a task per file)"
    )
    p.add_argument("--workers", type=int, default=2, metavar="N", help="Dask worker processes (default 2)")
    add_scheduler_argument(p)
    p.add_argument(
        "--kernels", action="store_true",
        help="print the traced jobs' kernels and collectives ranked fleet-wide by share of retained "
        "device-time, each with its sampling standard error",
    )
    (add_json or _json_flag)(p)
    p.set_defaults(func=_cmd_fleet, render=render_fleet)


def add_synth_parser(
    synth_subparsers: Any, add_json: Callable[[argparse.ArgumentParser], None] | None = None
) -> None:
    """Add ``fleetlib synth fleet`` to the command line.

    Parameters
    ----------
    synth_subparsers
        The ``fleetlib synth`` sub-command action.
    add_json
        Adds the common ``--json`` flag (default: a local one of the same form).
    """
    p = synth_subparsers.add_parser(
        "fleet",
        help="a joint synthetic fleet bundle (Slurm, timelines, traces, model configs) with truth",
        description="Write a fleet bundle in real formats -- Slurm sacct/sacctmgr/sinfo text, canonical "
        "timelines matching the allocations, Kineto traces for a stratified sample, model configs "
        "-- and truth.json with S, R, P, MPG and every loss in device-seconds.",
    )
    p.add_argument("--devices", type=int, required=True, metavar="N", help="GPUs, a multiple of 8 (>= 16)")
    p.add_argument("--days", type=float, default=1.0, metavar="D", help="window length, days (default 1)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--scheduler",
        choices=("slurm", "canonical"),
        default="slurm",
        help="scheduler record format (default slurm; canonical Parquet adds partial gangs)",
    )
    p.add_argument("--serving", action="store_true",
                   help="also write a serving pool (its own scheduler files, replica lifecycle log, decode "
                        "steps, model) under serving/, named by the manifest's serving: section")
    (add_json or _json_flag)(p)
    p.set_defaults(func=_cmd_synth_fleet, render=render_synth_fleet)


def register(
    subparsers: Any, synth_subparsers: Any, add_json: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add ``fleetlib fleet`` and ``fleetlib synth fleet`` (the signature :mod:`fleetlib.cli` calls).

    Parameters
    ----------
    subparsers, synth_subparsers
        The ``fleetlib`` and ``fleetlib synth`` sub-command actions.
    add_json
        Adds the common ``--json`` flag to a parser.
    """
    add_parser(subparsers, add_json)
    add_synth_parser(synth_subparsers, add_json)
