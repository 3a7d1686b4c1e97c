"""Command line of the regressions: ``fleetlib compare``, ``baseline build | check``, ``trace-plan``.

.. code-block:: console

    $ fleetlib compare BASELINE CANDIDATE --json                  # two bundles
    $ fleetlib compare B B --window-a S0 E0 --window-b S1 E1       # two windows of one bundle
    $ fleetlib compare B --split-by software_version --groups 2.1 2.2
    $ fleetlib baseline build B1 B2 --out baselines/
    $ fleetlib baseline check B --baselines baselines/
    $ fleetlib trace-plan B --json                                 # which jobs, ranks, steps to trace

:func:`register` has the signature :mod:`fleetlib.cli` calls on every module of
``RUNG_COMMAND_MODULES``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fleetlib._environ import attached_client, progress_wanted
from fleetlib.commands_common import add_exclude_argument, add_scheduler_argument, exclusion_lines, input_path
from fleetlib.quality import DomainError, InputError

__all__ = [
    "register",
    "render_baseline",
    "render_compare",
    "run_baseline_build",
    "run_baseline_check",
    "run_compare",
    "run_trace_plan",
]


#: The factor a verdict is charged to, as the one letter the product uses.
_FACTOR_LETTER = {"scheduling": "S", "runtime": "R", "program": "P"}

def run_compare(
    baseline: str | Path,
    candidate: str | Path | None = None,
    *,
    window_a: Sequence[str] | None = None,
    window_b: Sequence[str] | None = None,
    exclude_a: Sequence[Sequence[str]] | None = None,
    exclude_b: Sequence[Sequence[str]] | None = None,
    split_by: str | None = None,
    groups: Sequence[str] | None = None,
    under_test: Sequence[str] = (),
    allow_confounded: bool = False,
    cycle: str = "1D",
    tiers: Sequence[str] | None = None,
    boot: int = 400,
    seed: int = 0,
    paired: bool | None = None,
    scheduler: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Return the JSON object of ``fleetlib compare``.

    Parameters
    ----------
    baseline, candidate
        Bundles (``fleet.yaml`` or folders); without ``candidate``, two groups of ``baseline``
        split by ``split_by`` (or its two windows).
    window_a, window_b
        ``(START, END)`` windows of the baseline and the candidate (two windows of one bundle).
    exclude_a, exclude_b
        ``(START, END)`` stretches left out of the baseline's and the candidate's window
        (``--exclude-a``, ``--exclude-b``; as ``fleetlib fleet --exclude``; None: each manifest's
        ``exclude:``).  With ``split_by`` both groups share ``exclude_a``.
    split_by, groups
        A contract field of the jobs (``software_version``, ``architecture``, ``pool``) and the two
        values to compare; the field is under test.
    under_test, allow_confounded, tiers, boot, seed, paired
        As :func:`fleetlib.regress.compare.compare`.
    cycle
        Demand-cycle length, S's resampling unit.
    scheduler
        Measure the bundles on the running Dask cluster of this address (``--scheduler``; left
        running); None: Dask's ``scheduler-address`` configuration when it names one.
    progress
        A bar over the bootstrap's metrics on stderr, and the cluster's dashboard link.

    Returns
    -------
    dict
        :meth:`fleetlib.regress.compare.Comparison.to_dict` and ``windows``: each side's measured
        window with its exclusions.
    """
    from fleetlib.regress.compare import compare
    from fleetlib.regress.units import fleet_units

    if split_by is not None:
        if candidate is not None:
            raise InputError(
                "--split-by compares two groups of one bundle: give one BUNDLE", field="CANDIDATE"
            )
        if not groups or len(groups) != 2:
            raise InputError("--split-by needs --groups A B (two values of the field)", field="--groups")
    elif candidate is None and window_b is None:
        raise InputError(
            "give a CANDIDATE bundle, --window-b for a second window, or --split-by", field="CANDIDATE"
        )
    with attached_client(scheduler, progress=progress) as client:  # a cluster named: left running
        if split_by is not None:
            assert groups is not None
            units = fleet_units(baseline, window=window_a, exclude=_pairs(exclude_a), cycle=cycle,
                                client=client)
            parts = units.split(split_by)
            missing = [g for g in groups if g not in parts]
            if missing:
                raise InputError(
                    f"no job has {split_by}={missing[0]!r}; the bundle's values are {sorted(parts)}",
                    file=str(baseline),
                    field=split_by,
                )
            a, b = parts[groups[0]], parts[groups[1]]
            tested = [*under_test, split_by]
        else:
            a = fleet_units(baseline, window=window_a, exclude=_pairs(exclude_a), cycle=cycle,
                            client=client)
            b = fleet_units(candidate or baseline, window=window_b, exclude=_pairs(exclude_b), cycle=cycle,
                            client=client)
            tested = list(under_test)
    res = compare(
        a,
        b,
        under_test=tested,
        allow_confounded=allow_confounded,
        tiers=tiers,
        boot=boot,
        seed=seed,
        paired=paired,
        progress=progress,
    )
    out = res.to_dict()
    # each side's measured window, with what was left out of it
    out["windows"] = {"baseline": a.window.to_dict(), "candidate": b.window.to_dict()}
    return out


def _pairs(exclude: Sequence[Sequence[str]] | None) -> list[tuple[str, ...]] | None:
    """Return ``--exclude``-style pairs as tuples (None when none were given)."""
    return None if not exclude else [tuple(p) for p in exclude]


def _num(v: Any, unit: str) -> str:
    if v is None:
        return "n/a"
    return f"{v:.4f}" if "fraction" in unit else f"{v:.4g}"


def render_compare(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib compare``'s result as text: differences, pairing, then the verdicts by tier.

    Each metric's line: baseline -> candidate, the delta, its interval at the confidence Holm's
    step-down judged it at, the minimum detectable effect (MDE), the verdict and the resampling unit
    with its count.
    """
    lines = [f"compare {res['baseline']!r} (baseline) -> {res['candidate']!r} (candidate)"]
    for side, window in res.get("windows", {}).items():
        lines += [f"{side}: {line}" for line in exclusion_lines(window)]
    diffs = res["contract_differences"]
    if diffs:
        lines.append("contract differences:")
        lines += [
            f"  {d['field']}: {d['baseline']!r} -> {d['candidate']!r} ({d['kind']}"
            f"{', under test' if d['under_test'] else ''})"
            for d in diffs
        ]
    if res["refused"]:
        lines.append(
            "NO VERDICT: the contracts differ on "
            + ", ".join(res["confounders"])
            + " (name it with --under-test, or --allow-confounded)"
        )
    s = res["settings"]
    lines.append("pairing: " + "; ".join(f"{k}s {p['text']}" for k, p in s["pairing"].items()))
    lines.append(
        f"family: {100 * s['level']:.0f} % family-wise, Holm step-down over {s['tested_metrics']} metrics "
        f"tested (each interval at the confidence Holm judged it at); MDE: the delta found with "
        f"{100 * s['power']:.0f} % power; {s['boot']} bootstrap resamples; at least {s['min_units']} units "
        f"to test; cycle {s['cycle']}"
    )
    current = None
    for v in res["verdicts"]:
        if v["tier"] != current:
            current = v["tier"]
            lines.append(f"\n[{current}]")
        ci = (
            ""
            if v["ci_low"] is None
            else f" [{_num(v['ci_low'], v['unit'])}, {_num(v['ci_high'], v['unit'])}]"
            f" at {100 * v['ci_level']:.2f} %"
        )
        mde = "" if v["mde"] is None else f", MDE {_num(v['mde'], v['unit'])}"
        delta = "n/a" if v["delta"] is None else f"{v['delta']:+.4g}"
        letter = _FACTOR_LETTER.get(v["factor"], v["factor"])
        lines.append(
            f"  {letter} {v['metric']:<48} {_num(v['baseline'], v['unit']):>9} -> "
            f"{_num(v['candidate'], v['unit']):>9}  {delta:>10}{ci}{mde}  {v['verdict']}"
            f"  ({v['units']} {_UNIT_WORD.get(v['resampling'], 'units')})"
        )
    for n in res.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)


#: The resampling unit's short name in a verdict line.
_UNIT_WORD = {
    "whole demand cycles": "cycles",
    "whole demand cycles (their jobs summed)": "cycles",
    "jobs": "jobs",
    "checkpoint commits": "commits",
    "jobs (their retained steps summed)": "jobs",
    "jobs (their per-rank timer steps summed)": "jobs",
    "exact conditional binomial test (events over exposure)": "events",
}


def run_baseline_build(
    bundles: Sequence[str | Path], out: str | Path, *, cycle: str = "1D", scheduler: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Measure bundles and write baselines per (pool, architecture, software version) into ``out``.

    With ``scheduler`` (``--scheduler``; None: Dask's ``scheduler-address`` configuration) the
    bundles are measured on that running cluster, which is left running (its dashboard link printed
    on stderr when ``progress``).
    """
    from fleetlib.regress.baselines import build_baselines
    from fleetlib.regress.units import fleet_units

    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InputError("cannot write baselines: it is a file, not a folder", file=str(path))
    if not path.parent.is_dir():
        raise InputError(
            f"cannot write baselines: folder {str(path.parent)!r} does not exist", file=str(path)
        )
    with attached_client(scheduler, progress=progress) as client:
        units = [fleet_units(b, cycle=cycle, client=client) for b in bundles]
    return build_baselines(units, path)


def run_baseline_check(
    bundle: str | Path,
    baselines: str | Path,
    *,
    allow_confounded: bool = False,
    boot: int = 400,
    seed: int = 0,
    scheduler: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Compare each group of a bundle with its stored baseline (see ``check_baselines``).

    With ``scheduler`` (``--scheduler``; None: Dask's ``scheduler-address`` configuration) the
    bundle is measured on that running cluster, which is left running (its dashboard link printed
    on stderr when ``progress``).

    Returns
    -------
    dict
        Per (pool, architecture, software version): the comparison or ``"no baseline"``.
    """
    from fleetlib.regress.baselines import check_baselines, read_index
    from fleetlib.regress.units import fleet_units

    cycle = read_index(baselines)["cycle"]
    with attached_client(scheduler, progress=progress) as client:
        units = fleet_units(bundle, cycle=cycle, client=client)
    return check_baselines(units, baselines, allow_confounded=allow_confounded, boot=boot, seed=seed)


def render_baseline(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib baseline build`` or ``check`` as text."""
    if "regressions" not in res:
        lines = [f"wrote baselines of {len(res['bundles'])} bundle(s), cycle {res['cycle']}:"]
        lines += [
            f"  {g['pool']} x {g['architecture']} x {g['software_version']}: {g['jobs']} jobs, "
            f"{g['steps']} steps -> {g['folder']}"
            for g in res["groups"]
        ]
        return "\n".join(lines)
    lines = [f"baseline check of {res['bundle']!r} against {res['baselines']}"]
    for g in res["groups"]:
        r = g["result"]
        state = (
            r
            if isinstance(r, str)
            else (
                "no verdict: " + ", ".join(r["confounders"])
                if r["refused"]
                else f"{sum(v['verdict'] == 'regression' for v in r['verdicts'])} regression(s)"
            )
        )
        lines.append(f"  {g['pool']} x {g['architecture']} x {g['software_version']}: {state}")
    for v in res["regressions"]:
        lines.append(
            f"  REGRESSION {v['pool']} x {v['architecture']} x {v['software_version']} [{v['tier']}] "
            f"{v['metric']}: {v['baseline']:.4g} -> {v['candidate']:.4g}"
        )
    return "\n".join(lines)


def run_trace_plan(manifest: str | Path, *, window: Sequence[str] | None = None,
                   exclude: Sequence[Sequence[str]] | None = None) -> dict[str, Any]:
    """Return the JSON object of ``fleetlib trace-plan``: the bundle's measurement and its trace plan.

    Parameters
    ----------
    manifest
        ``fleet.yaml`` or the bundle folder.
    window
        ``(START, END)`` ISO 8601 times with a zone; default the manifest's window.
    exclude
        ``(START, END)`` pairs inside the window left out (``--exclude``; as ``fleetlib fleet``).

    Returns
    -------
    dict
        :meth:`fleetlib.fleet.measure.FleetMeasurement.to_dict` plus ``trace_plan``
        (:func:`fleetlib.regress.sampling.trace_plan`: stratified jobs, ranks and step ranges,
        triggered episodes with a healthy peer, P's sampling error).
    """
    from fleetlib.regress.sampling import trace_plan
    from fleetlib.regress.units import fleet_units

    units = fleet_units(manifest, window=None if window is None else list(window), exclude=_pairs(exclude),
                        cycle=None)
    res = units.measurement.to_dict()
    res["trace_plan"] = trace_plan(units)
    return res


def render_trace_plan(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib trace-plan``'s result: the fleet's text, then the plan's coverage."""
    from fleetlib.fleet.commands import render_fleet

    plan = res["trace_plan"]
    return (
        render_fleet(res)
        + f"\ntrace plan: {plan['coverage']['strata_covered']} of {plan['coverage']['strata_present']} "
        f"strata, {len(plan['continuous'])} jobs sampled, {len(plan['triggered'])} triggered episodes"
    )


def _cmd_trace_plan(args: argparse.Namespace) -> dict[str, Any]:
    return run_trace_plan(args.manifest, window=args.window, exclude=args.exclude)


def _cmd_compare(args: argparse.Namespace) -> dict[str, Any]:
    if args.boot < 50:
        raise DomainError(f"--boot must be at least 50; got {args.boot}")
    return run_compare(
        args.baseline,
        args.candidate,
        window_a=args.window_a,
        window_b=args.window_b,
        exclude_a=args.exclude_a,
        exclude_b=args.exclude_b,
        split_by=args.split_by,
        groups=args.groups,
        under_test=args.under_test or (),
        allow_confounded=args.allow_confounded,
        cycle=args.cycle,
        tiers=args.tier,
        boot=args.boot,
        seed=args.seed,
        paired={"auto": None, "paired": True, "independent": False}[args.pairing],
        scheduler=args.scheduler,
        progress=progress_wanted(args.json),
    )


def _cmd_build(args: argparse.Namespace) -> dict[str, Any]:
    return run_baseline_build(args.bundles, args.out, cycle=args.cycle, scheduler=args.scheduler,
                              progress=progress_wanted(getattr(args, "json", False)))


def _cmd_check(args: argparse.Namespace) -> dict[str, Any]:
    return run_baseline_check(
        args.bundle, args.baselines, allow_confounded=args.allow_confounded, boot=args.boot, seed=args.seed,
        scheduler=args.scheduler, progress=progress_wanted(getattr(args, "json", False)),
    )


def register(
    subparsers: Any, synth_subparsers: Any, add_json: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add ``fleetlib compare``, ``baseline build | check`` and ``trace-plan`` (called by fleetlib.cli).

    Parameters
    ----------
    subparsers, synth_subparsers
        The ``fleetlib`` and ``fleetlib synth`` sub-command actions (no synth command here).
    add_json
        Adds the common ``--json`` flag to a parser.
    """
    from fleetlib.regress.tiers import TIERS

    p = subparsers.add_parser(
        "compare",
        help="two bundles, two windows or two groups -> per factor, loss and tier: delta, CI, verdict",
        description="Compare two measurements under their contracts: per factor, loss category and "
        "Table 4 tier, the baseline, candidate, delta, an interval resampled at the metric's own unit "
        "(demand cycles for S and its losses, jobs for R and per-job timings, commits for the checkpoint "
        "pause, jobs' retained steps for P), paired by unit id where the sides share units, the minimum "
        "detectable effect and a verdict, family-wise by Holm's step-down; 'too few units (n=2) to test' "
        "where a metric has too few units. Contract fields that differ and are not under test are named "
        "and block the verdict.",
    )
    p.add_argument("baseline", type=input_path, metavar="BASELINE", help="fleet.yaml or bundle folder")
    p.add_argument("candidate", type=input_path, nargs="?", metavar="CANDIDATE",
                   help="second bundle (optional)")
    p.add_argument("--window-a", nargs=2, metavar=("START", "END"), help="the baseline's window")
    p.add_argument("--window-b", nargs=2, metavar=("START", "END"), help="the candidate's window")
    p.add_argument("--exclude-a", nargs=2, action="append", metavar=("START", "END"),
                   help="left out of the baseline's window (repeatable; as fleetlib fleet --exclude)")
    p.add_argument("--exclude-b", nargs=2, action="append", metavar=("START", "END"),
                   help="left out of the candidate's window (repeatable; as fleetlib fleet --exclude)")
    p.add_argument("--split-by", metavar="FIELD", help="compare two groups of one bundle by this job field")
    p.add_argument("--groups", nargs=2, metavar=("A", "B"), help="the two values of --split-by")
    p.add_argument("--under-test", action="append", metavar="FIELD", help="contract field under test")
    p.add_argument("--allow-confounded", action="store_true", help="verdicts even when other fields differ")
    p.add_argument("--cycle", default="1D", help="demand-cycle length, S's resampling unit (default 1D)")
    p.add_argument("--tier", action="append", choices=list(TIERS), help="only these tiers (repeatable)")
    p.add_argument("--boot", type=int, default=400, help="bootstrap resamples (default 400)")
    p.add_argument("--seed", type=int, default=0, help="resampling seed (default 0)")
    p.add_argument(
        "--pairing",
        choices=["auto", "paired", "independent"],
        default="auto",
        help="auto (default): pair by unit id where the sides share their jobs (same id and submit time), "
        "commits and cycles; paired: pair whatever they share; independent: never pair",
    )
    add_scheduler_argument(p)
    add_json(p)
    p.set_defaults(func=_cmd_compare, render=render_compare)

    b = subparsers.add_parser(
        "baseline",
        help="baselines per (pool, architecture, software version)",
        description="Build baselines as Parquet per (pool, architecture, software "
        "version) from bundles, or check a bundle against them.",
    )
    bsub = b.add_subparsers(dest="baseline", metavar="ACTION")
    bsub.required = True
    pb = bsub.add_parser("build", help="measure bundles and write baselines")
    pb.add_argument("bundles", type=input_path, nargs="+", metavar="BUNDLE")
    pb.add_argument("--out", type=Path, required=True, metavar="DIR")
    pb.add_argument("--cycle", default="1D", help="demand-cycle length (default 1D)")
    add_scheduler_argument(pb)
    add_json(pb)
    pb.set_defaults(func=_cmd_build, render=render_baseline)
    pc = bsub.add_parser("check", help="compare a bundle with stored baselines")
    pc.add_argument("bundle", type=input_path, metavar="BUNDLE")
    pc.add_argument("--baselines", type=Path, required=True, metavar="DIR")
    pc.add_argument("--allow-confounded", action="store_true")
    pc.add_argument("--boot", type=int, default=400)
    pc.add_argument("--seed", type=int, default=0)
    add_scheduler_argument(pc)
    add_json(pc)
    pc.set_defaults(func=_cmd_check, render=render_baseline)

    t = subparsers.add_parser(
        "trace-plan",
        help="one fleet bundle -> which jobs, ranks and steps to trace (stratified, with triggered episodes)",
        description="Measure a fleet bundle and plan its step traces: jobs stratified by size, "
        "architecture, software version and hour, one rank per node (never rank 0 alone), triggered "
        "captures for each straggler episode in the rank timers with a healthy peer of the same group, "
        "and P's sampling error.",
    )
    t.add_argument("manifest", type=input_path, metavar="MANIFEST", help="fleet.yaml or its bundle folder")
    t.add_argument("--window", nargs=2, metavar=("START", "END"),
                   help="ISO 8601 times with a zone (default: the manifest's window)")
    add_exclude_argument(t)
    add_json(t)
    t.set_defaults(func=_cmd_trace_plan, render=render_trace_plan)
