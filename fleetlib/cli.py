"""Command line: ``fleetlib mpg | model young|daly|ettr | report | synth ...`` and the rungs' commands.

Every subcommand prints a short human-readable answer with units, or, with ``--json``, exactly one
JSON object with full-precision numbers.  Arguments outside a formula's domain (a factor outside
[0, 1], a negative duration, a checkpoint interval longer than the MTBF) end the command with a
one-line message on standard error and exit status 2 -- never a traceback, never a NaN.

Examples
--------
.. code-block:: console

    $ fleetlib mpg --scheduling 0.65 --runtime 0.90 --program 0.48 --price 2
    $ fleetlib model young --checkpoint-s 9.8 --mtbf-h 302 --json
    $ fleetlib report --params parameters/running_example.yaml --out reports/running_example
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from fleetlib.commands_common import add_scheduler_argument, input_path
from fleetlib.quality import DomainError, FleetlibError

__all__ = ["EXIT_BAD_ARGUMENTS", "EXIT_BROKEN_PIPE", "EXIT_FAILED", "build_parser", "main"]

#: Modules that add a rung's subcommands: each defines ``register(subparsers, synth_subparsers,
#: add_json)`` and sets ``func`` / ``render`` on its leaf parsers like the commands here.
RUNG_COMMAND_MODULES: tuple[str, ...] = ("fleetlib.fleet.commands", "fleetlib.scheduling.commands",
                                          "fleetlib.runtime.commands", "fleetlib.program.commands",
                                          "fleetlib.regress.commands")

#: Exit status for arguments outside a formula's domain or unreadable input (argparse's own code).
EXIT_BAD_ARGUMENTS = 2

#: Exit status when a well-formed command fails while running (a notebook raises).
EXIT_FAILED = 1

#: Exit status when stdout's reader closed the pipe early (as a shell reports SIGPIPE: 128 + 13).
EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` and exit with status 2."""
        self.exit(EXIT_BAD_ARGUMENTS, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------


def _silence_stdout() -> None:
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (e.g. captured by a test)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _non_finite_at(obj: Any, path: str = "") -> str | None:
    """Return the key path of the first non-finite float in a result (None when all are finite)."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        cur, where = stack.pop()
        if isinstance(cur, float) and not math.isfinite(cur):
            return where or "<result>"
        if isinstance(cur, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in cur.items())
        elif isinstance(cur, (list, tuple)):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(cur))
    return None


def _emit(result: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], str]) -> None:
    bad = _non_finite_at(result)
    if bad is not None:  # never print inf or NaN as if it were a measurement, in either output
        raise DomainError(f"the result's {bad} is not a finite number (input values whose sums overflow a "
                          "float?); nothing is printed")
    from fleetlib._io import url_named  # an object read through a fetched copy is named by its URL

    if as_json:
        print(url_named(json.dumps(result, indent=2, allow_nan=False)))
    else:
        print(url_named(render(result)))


def _pct(x: float) -> str:
    return f"{100.0 * x:5.1f} %"


# ---------------------------------------------------------------------------------------------------
# fleetlib mpg
# ---------------------------------------------------------------------------------------------------


def _cmd_mpg(args: argparse.Namespace) -> dict[str, Any]:
    from fleetlib.accounting import (
        BOUNDARIES,
        Factor,
        Window,
        cost_per_useful_hour,
        held_hours_chargeback,
        mpg,
    )

    window = Window.nominal("command line")
    values = {"scheduling": args.scheduling, "runtime": args.runtime, "program": args.program}
    factors = {b: Factor.from_value(b, values[b], window=window, record="stated on the command line")
               for b in BOUNDARIES}
    product = mpg(factors["scheduling"], factors["runtime"], factors["program"])
    result: dict[str, Any] = {
        "factors": {b: factors[b].value for b in BOUNDARIES},
        "mpg": product.value,
        "job_product": product.job_product,
        "loss_shares": {b: product.loss_shares[b] for b in BOUNDARIES},
        "marginal_value": {b: product.marginal_values[b] for b in BOUNDARIES},
    }
    if args.price is not None:
        s, r, p = (values[b] for b in BOUNDARIES)
        result["price_per_hour"] = float(args.price)
        result["cost_per_useful_hour"] = cost_per_useful_hour(args.price, s, r, p)
        result["held_hours_chargeback"] = held_hours_chargeback(args.price, r, p)
    return result


def _render_mpg(res: dict[str, Any]) -> str:
    f = res["factors"]
    lines = [
        f"S x R x P = {f['scheduling']:.4g} x {f['runtime']:.4g} x {f['program']:.4g}",
        f"MPG (S x R x P)          {res['mpg']:.4f}  ({_pct(res['mpg']).strip()} of in-service capacity "
        "becomes ideal-rate progress)",
        f"job product (R x P)      {res['job_product']:.4f}",
        "loss shares of fleet capacity (equation 2, boundary order):",
    ]
    lines += [f"  {b:<22} {_pct(v)}" for b, v in res["loss_shares"].items()]
    lines.append("marginal value of one point of each factor (MPG points per point):")
    lines += [f"  {b:<22} {v:.3f}" for b, v in res["marginal_value"].items()]
    if "cost_per_useful_hour" in res:
        lines += [
            f"cost per useful accelerator-hour   {res['cost_per_useful_hour']:.2f} USD/h "
            f"(at {res['price_per_hour']:.2f} USD per in-service accelerator-hour)",
            f"held-hours chargeback              {res['held_hours_chargeback']:.2f} USD/h "
            "(billing held hours only leaves the scheduling loss unbilled)",
        ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# fleetlib model young | daly | ettr
# ---------------------------------------------------------------------------------------------------


def _cmd_young(args: argparse.Namespace) -> dict[str, Any]:
    from fleetlib.runtime import young_interval_s, young_waste

    mtbf_s = args.mtbf_h * 3600.0
    interval_s = young_interval_s(args.checkpoint_s, mtbf_s)
    result: dict[str, Any] = {
        "interval_min": interval_s / 60.0,
        "waste": young_waste(args.checkpoint_s, interval_s, mtbf_s),
    }
    if args.interval_min is not None:
        result["interval_in_use_min"] = float(args.interval_min)
        result["waste_at_interval_in_use"] = young_waste(args.checkpoint_s, args.interval_min * 60.0,
                                                         mtbf_s)
    return result


def _render_young(res: dict[str, Any]) -> str:
    lines = [
        f"Young optimum checkpoint interval   {res['interval_min']:.2f} min",
        f"checkpoint waste at that interval   {100.0 * res['waste']:.2f} % of held time "
        "(write pauses + expected rework)",
    ]
    if "interval_in_use_min" in res:
        lines.append(f"waste at {res['interval_in_use_min']:g} min               "
                     f"{100.0 * res['waste_at_interval_in_use']:.2f} % of held time")
    return "\n".join(lines)


def _cmd_daly(args: argparse.Namespace) -> dict[str, Any]:
    from fleetlib.runtime import daly_interval_s

    interval_s = daly_interval_s(args.checkpoint_s, args.restart_s, args.mtbf_h * 3600.0)
    return {"interval_min": interval_s / 60.0}


def _render_daly(res: dict[str, Any]) -> str:
    return f"Daly optimum checkpoint interval   {res['interval_min']:.2f} min"


def _cmd_ettr(args: argparse.Namespace) -> dict[str, Any]:
    from fleetlib.runtime import expected_ettr

    ettr = expected_ettr(mttf_s=args.mttf_h * 3600.0, restart_s=args.restart_min * 60.0,
                         checkpoint_write_s=args.checkpoint_write_s, interval_s=args.interval_min * 60.0,
                         queue_s=args.queue_min * 60.0)
    return {"ettr": ettr}


def _render_ettr(res: dict[str, Any]) -> str:
    return (f"expected ETTR   {res['ettr']:.4f}  ({_pct(res['ettr']).strip()} of wall-clock time is "
            "productive training)")


# ---------------------------------------------------------------------------------------------------
# fleetlib report
# ---------------------------------------------------------------------------------------------------


def _cmd_report(args: argparse.Namespace) -> dict[str, Any]:
    from fleetlib.report import checkout_root, parse_overrides, run_report

    params = args.params or checkout_root() / "parameters" / "running_example.yaml"
    out = run_report(params, args.out, notebooks=args.notebook or None, progress=not args.quiet,
                     fleet=args.fleet, overrides=parse_overrides(args.param), scheduler=args.scheduler)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"out_dir": str(out), **summary}


def _render_report(res: dict[str, Any]) -> str:
    out = Path(res["out_dir"])
    measured = res.get("measured")
    subject = (f"fleet bundle {res['fleet_manifest']}" if res.get("fleet_manifest")
               else f"scenario {res['scenario']['name']}")
    lines = [f"report on {subject} written to {out}"]
    if measured:
        lines.append(f"  measured ({measured['name']}): {measured['headline']}")
    lines += [
        f"  stated in the scenario file: MPG {res['mpg']:.4f}; cost per useful accelerator-hour "
        f"{res['cost_per_useful_hour']:.2f} USD/h",
        f"  {len(res['notebooks'])} notebooks in "
        f"{sum(n['seconds'] for n in res['notebooks']):.1f} s; {len(res['figures'])} figure files",
        f"  summary: {out / 'summary.json'}",
        f"open in a browser: {out / 'index.html'}",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Parser and entry point
# ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Return the ``fleetlib`` argument parser with every subcommand.

    Returns
    -------
    argparse.ArgumentParser
        The parser; each leaf subcommand sets ``func`` (compute) and ``render`` (text output).
    """
    from fleetlib import __version__

    parser = _Parser(prog="fleetlib",
                     description="ML fleet goodput: scheduling x runtime x program goodput.")
    parser.add_argument("--version", action="version", version=f"fleetlib {__version__}")
    from fleetlib._io import LIMIT_HELP, Limits

    defaults = Limits()
    parser.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                        help="raise (or lower) one input limit for this run, before the command; "
                             + "; ".join(f"{k} ({v}, default {getattr(defaults, k):,})"
                                         for k, v in LIMIT_HELP.items()))
    parser.add_argument("--allow-path", action="append", default=[], metavar="DIR",
                        help="let paths in scenario files and fleet manifests name files under DIR "
                             "(or a URL prefix such as s3://bucket/other; by default only the project "
                             "root or the manifest's folder)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def add_json(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print one JSON object with full precision")

    p = sub.add_parser("mpg", help="multiply the three factors; loss shares, marginal values, cost",
                       description="MPG = S x R x P with its loss shares (equation 2), the marginal "
                                   "value of each factor and, given a price, the cost of a useful "
                                   "accelerator-hour (equation 6).")
    p.add_argument("--scheduling", type=float, required=True, metavar="S", help="scheduling goodput, 0..1")
    p.add_argument("--runtime", type=float, required=True, metavar="R", help="runtime goodput, 0..1")
    p.add_argument("--program", type=float, required=True, metavar="P", help="program goodput, 0..1")
    p.add_argument("--price", type=float, metavar="USD_PER_HOUR",
                   help="price of one in-service accelerator-hour")
    add_json(p)
    p.set_defaults(func=_cmd_mpg, render=_render_mpg)

    model = sub.add_parser("model", help="analytical runtime models: young, daly, ettr",
                           description="Checkpoint-interval and ETTR models of runtime loss.")
    msub = model.add_subparsers(dest="model", metavar="MODEL", parser_class=_Parser)
    msub.required = True

    p = msub.add_parser("young", help="Young's optimum checkpoint interval and its waste",
                        description="Young's first-order optimum interval sqrt(2 C M) and the "
                                    "checkpoint waste C/tau + tau/(2M) there.")
    p.add_argument("--checkpoint-s", type=float, required=True, metavar="C",
                   help="synchronous checkpoint write time, seconds")
    p.add_argument("--mtbf-h", type=float, required=True, metavar="M",
                   help="mean time between failures, hours")
    p.add_argument("--interval-min", type=float, metavar="T",
                   help="also give the waste at this interval in use, minutes")
    add_json(p)
    p.set_defaults(func=_cmd_young, render=_render_young)

    p = msub.add_parser("daly", help="Daly's higher-order optimum checkpoint interval",
                        description="Daly's (2006) higher-order optimum checkpoint interval.")
    p.add_argument("--checkpoint-s", type=float, required=True, metavar="C",
                   help="synchronous checkpoint write time, seconds")
    p.add_argument("--restart-s", type=float, required=True, metavar="R", help="restart time, seconds")
    p.add_argument("--mtbf-h", type=float, required=True, metavar="M",
                   help="mean time between failures, hours")
    add_json(p)
    p.set_defaults(func=_cmd_daly, render=_render_daly)

    p = msub.add_parser("ettr", help="expected effective training time ratio (Kokolis et al. 2025)",
                        description="Expected ETTR (1 - (u0 + T/2)/MTTF) / (1 + W/T) of a long job.")
    p.add_argument("--mttf-h", type=float, required=True, metavar="M", help="job mean time to failure, hours")
    p.add_argument("--restart-min", type=float, required=True, metavar="U",
                   help="restart overhead per failure, minutes")
    p.add_argument("--checkpoint-write-s", type=float, required=True, metavar="W",
                   help="checkpoint write time, seconds")
    p.add_argument("--interval-min", type=float, required=True, metavar="T",
                   help="checkpoint interval, minutes")
    p.add_argument("--queue-min", type=float, default=0.0, metavar="Q",
                   help="queue wait after each interruption, minutes (default 0)")
    add_json(p)
    p.set_defaults(func=_cmd_ettr, render=_render_ettr)

    p = sub.add_parser("report", help="run the notebook chain on a scenario file into a report folder",
                       description="Run the report chain (rung notebooks, then the course) with "
                                   "papermill on one scenario file and write executed notebooks, "
                                   "HTML pages, figures, summary.json and index.html.")
    p.add_argument("--params", type=input_path, metavar="FILE",
                   help="scenario YAML file or its URL (s3://bucket/x/scenario.yaml; default "
                   "parameters/running_example.yaml)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="report folder")
    p.add_argument("--fleet", type=input_path, metavar="MANIFEST",
                   help="your fleet bundle's fleet.yaml: the rung notebooks read its records")
    p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                   help="override one parameter, the value read as YAML (repeatable)")
    p.add_argument("--notebook", action="append", metavar="IPYNB",
                   help="run this notebook instead of the report chain (repeatable, in order)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_scheduler_argument(p)
    add_json(p)
    p.set_defaults(func=_cmd_report, render=_render_report)

    synth = sub.add_parser("synth", help="write synthetic records with known ground truth",
                           description="Generate canonical records whose losses are known exactly, "
                                       "for tests, demonstrations and scale runs.")
    synth_sub = synth.add_subparsers(dest="synth", metavar="RECORD", parser_class=_Parser)
    synth_sub.required = True
    for module_name in RUNG_COMMAND_MODULES:
        if importlib.util.find_spec(module_name) is not None:
            importlib.import_module(module_name).register(sub, synth_sub, add_json)
    return parser


@contextlib.contextmanager
def _exported_limits(limit_texts: Sequence[str], allow: Sequence[Path]) -> Iterator[None]:
    """Hold ``--limit`` and ``--allow-path`` in the environment for the command's duration.

    The processes the command starts (the report's notebook kernels) then hold the same limits.
    """
    from fleetlib._environ import environment
    from fleetlib._io import ALLOW_ENV, LIMITS_ENV, is_url

    values = {}
    if limit_texts:
        values[LIMITS_ENV] = ",".join(filter(None, [os.environ.get(LIMITS_ENV), *limit_texts]))
    if allow:
        values[ALLOW_ENV] = os.pathsep.join(
            filter(None, [os.environ.get(ALLOW_ENV),
                          *(a if is_url(a) else str(Path(a).resolve()) for a in allow)]))
    with environment(values):
        yield


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``fleetlib`` command line and return its exit status.

    Parameters
    ----------
    argv
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success, 2 for bad arguments or unreadable input, 1 when a report notebook fails,
        141 when the reader of stdout closed the pipe early (`fleetlib ... | head`).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_ARGUMENTS
    # The leaf command's name: groups (model, synth) store their chosen subcommand under their own name.
    group_choice = {"model": "model", "synth": "synth", "baseline": "baseline"}.get(args.command)
    command = " ".join(filter(None, ["fleetlib", args.command,
                                      getattr(args, group_choice, None) if group_choice else None]))
    try:
        from fleetlib._io import parse_limit, using_limits

        limit_texts, allow = getattr(args, "limit", []), getattr(args, "allow_path", [])
        overrides = dict(parse_limit(text) for text in limit_texts)
        with _exported_limits(limit_texts, allow), using_limits(allow=allow, **overrides):
            result = args.func(args)
            _emit(result, args.json, args.render)
    except BrokenPipeError:
        # The reader went away (``fleetlib ... | head``): not an error of ours.  Point stdout at
        # /dev/null so the interpreter's final flush does not raise again, and exit quietly.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except FleetlibError as exc:
        from fleetlib._io import url_named
        from fleetlib.report import ReportError

        message = url_named(" ".join(str(exc).split()))
        print(f"{command}: error: {message}", file=sys.stderr)
        return EXIT_FAILED if isinstance(exc, ReportError) else EXIT_BAD_ARGUMENTS
    except (RecursionError, MemoryError, OverflowError, UnicodeError) as exc:
        # A last line of defence: every reader checks its input first (fleetlib._io's limits), so
        # reaching here means an input found a gap in those checks.  Say so in one line, not a traceback.
        # The explanation is in words (never an exception's name); which input it was is not known here.
        what = {RecursionError: "it is nested too deeply to follow",
                MemoryError: "it asks for more memory than this machine has",
                OverflowError: "it holds a number too large for the quantity it stands for",
                }.get(type(exc), "it holds text that is not valid Unicode")
        print(f"{command}: error: an input could not be read: {what}; no reader check named the file, row "
              "and field, please report the input", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    return 0
