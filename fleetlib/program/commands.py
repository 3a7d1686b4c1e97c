"""Command line of rung 3: ``fleetlib program FILE_OR_DIR... [--model CONFIG.yaml] [--no-cache]``.

:func:`register` adds the command to the ``fleetlib`` parser (:mod:`fleetlib.cli` calls it).  The work
is done by :func:`fleetlib.program.traces.read_traces` (Kineto traces -> kernel and step tables, with
a ledger), :func:`fleetlib.program.collectives.program_summary` (per-rank partition of step wall time,
stragglers, collective audit) and, when a model configuration gives the useful FLOPs,
:func:`fleetlib.program.breakdown.program_goodput_factor`.  This module checks the paths and the model
configuration, turns what cannot be read into :class:`~fleetlib.quality.InputError` or
:class:`~fleetlib.quality.DomainError` -- which the command line prints as one line with exit
status 2 -- and renders the result as text with units.

Model configuration
-------------------
A YAML mapping (see ``data/traces/models/dlrm_example.yaml``):

``accelerator`` (required)
    A key of :data:`fleetlib.program.flops.PEAK_RATES`, e.g. ``"H100 SXM"`` (case-insensitive).
``devices`` (required)
    Devices of the whole job (at least the number of traced ranks).
``useful_flops_per_step``
    Required model FLOPs of one step over all devices.  With it, ``convention`` is either a FLOP
    convention name (``palm``, ``megatron``, ``6n``) the count followed, or a short free-text name of
    the counting rule (no commas), e.g. ``"DLRM MLP count"``.
``n_params`` and ``tokens_per_step``
    Instead of ``useful_flops_per_step``: the FLOPs are
    :func:`fleetlib.program.flops.model_flops_per_token` x ``tokens_per_step``, and ``convention`` must
    be ``palm``, ``megatron`` or ``6n``; ``palm`` and ``megatron`` also need ``n_layers``, ``n_heads``,
    ``head_dim`` and ``seq_len``; ``causal`` (bool) is for ``megatron``.
``name`` (optional)
    A label for the window the traced steps belong to.

Any other key is refused, so that a misspelt key cannot be silently ignored.

Examples
--------
.. code-block:: console

    $ fleetlib program data/traces/dlrm_8rank
    $ fleetlib program data/traces/dlrm_8rank --model data/traces/models/dlrm_example.yaml --json
    $ fleetlib program data/traces/hta_pp_pair_rank-*.json.gz --no-cache
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from fleetlib.program.breakdown import PARTITION_PARTS
from fleetlib.quality import DomainError, InputError

__all__ = [
    "MAX_LEDGER_ENTRIES",
    "MODEL_KEYS",
    "load_model_config",
    "register",
    "render_program",
    "run_program",
]

#: Keys a model configuration may hold.
MODEL_KEYS: tuple[str, ...] = ("accelerator", "devices", "useful_flops_per_step", "n_params",
                               "tokens_per_step", "convention", "n_layers", "n_heads", "head_dim",
                               "seq_len", "causal", "name")

#: Ledger entries (repairs and rejections) printed in full; the rest are counted.
MAX_LEDGER_ENTRIES: int = 100

_FLOP_NAMES = ("palm", "megatron", "6n")
_SHAPE_KEYS = ("n_layers", "n_heads", "head_dim", "seq_len")

#: Row labels of the partition in the text rendering.
_PART_LABELS = {
    "compute": "compute",
    "exposed_comm": "exp. comm",
    "peer_wait": "peer wait",
    "exposed_memcpy": "exp. copy",
    "host_dispatch": "dispatch",
    "idle": "idle",
}


# ---------------------------------------------------------------------------------------------------
# Model configuration
# ---------------------------------------------------------------------------------------------------


def _number(cfg: Mapping[str, Any], key: str, file: str, *, whole: bool = False) -> float:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number; got {value!r}", file=file, field=key)
    if not value > 0 or value != value or value == float("inf"):
        raise InputError(f"must be a positive finite number; got {value!r}", file=file, field=key)
    if whole and float(value) != int(value):
        raise InputError(f"must be a whole number; got {value!r}", file=file, field=key)
    return float(value)


def load_model_config(path: str | Path) -> dict[str, Any]:
    """Read and check a model configuration for ``fleetlib program --model``.

    Parameters
    ----------
    path
        A YAML file with the keys of :data:`MODEL_KEYS` (see the module docstring).

    Returns
    -------
    dict
        ``peak`` (:class:`fleetlib.program.flops.PeakRate`), ``devices`` (int),
        ``useful_flops_per_step`` (float), ``flops_per_token`` (float or None), ``tokens_per_step``
        (float or None), ``n_params`` (float or None), ``convention``
        (:class:`fleetlib.program.flops.ProgramGoodputConvention`), ``name`` (str) and ``file``.

    Raises
    ------
    InputError
        The file is missing or not YAML, or a key is missing, unknown, of the wrong type, or out
        of its domain (the message names the file and the key).
    """
    from fleetlib.program.flops import (
        ProgramGoodputConvention,
        mfu_convention,
        model_flops_per_token,
        peak_rate,
    )
    from fleetlib.scenario import _ScenarioLoader

    p = Path(path)
    file = str(p)
    if p.is_dir():
        raise InputError("is a folder; give the model configuration file", file=file)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError("model configuration not found", file=file) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the model configuration ({exc})", file=file) from exc
    try:
        cfg = yaml.load(text, Loader=_ScenarioLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML ({getattr(exc, 'problem', None) or exc})", file=file,
                         row=None if mark is None else mark.line + 1) from exc
    if not isinstance(cfg, Mapping):
        raise InputError("a model configuration is a YAML mapping of keys to values", file=file)
    unknown = sorted(str(k) for k in cfg if k not in MODEL_KEYS)
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; allowed: {list(MODEL_KEYS)}", file=file,
                         field=unknown[0])
    for key in ("accelerator", "devices", "convention"):
        if cfg.get(key) is None:
            raise InputError("is required", file=file, field=key)
    try:
        peak = peak_rate(str(cfg["accelerator"]))
    except DomainError as exc:
        raise InputError(str(exc), file=file, field="accelerator") from exc
    devices = int(_number(cfg, "devices", file, whole=True))
    conv_text = str(cfg["convention"]).strip()
    causal = cfg.get("causal")
    if causal is not None and not isinstance(causal, bool):
        raise InputError(f"must be true or false; got {causal!r}", file=file, field="causal")

    given_flops = cfg.get("useful_flops_per_step") is not None
    given_params = cfg.get("n_params") is not None or cfg.get("tokens_per_step") is not None
    if given_flops == given_params:
        raise InputError("give either useful_flops_per_step, or n_params with tokens_per_step (not both)",
                         file=file, field="useful_flops_per_step")
    flops_per_token = tokens = n_params = None
    try:
        if given_flops:
            useful = _number(cfg, "useful_flops_per_step", file)
            if conv_text.lower() in _FLOP_NAMES:
                conv = mfu_convention(conv_text.lower(), peak, causal=causal)  # type: ignore[arg-type]
            else:
                conv = ProgramGoodputConvention("MFU", conv_text, peak.arithmetic_label)
        else:
            for key in ("n_params", "tokens_per_step"):
                if cfg.get(key) is None:
                    raise InputError("is required with n_params / tokens_per_step", file=file, field=key)
            if conv_text.lower() not in _FLOP_NAMES:
                raise InputError(f"must be one of {list(_FLOP_NAMES)} when the FLOPs are counted from "
                                 f"n_params; got {conv_text!r}", file=file, field="convention")
            name = conv_text.lower()
            shape: dict[str, int | None] = {}
            for key in _SHAPE_KEYS:
                shape[key] = None if cfg.get(key) is None else int(_number(cfg, key, file, whole=True))
            missing = [k for k, v in shape.items() if v is None]
            if name != "6n" and missing:
                raise InputError(f"convention {name!r} counts attention and needs {missing}",
                                 file=file, field=missing[0])
            n_params = _number(cfg, "n_params", file)
            tokens = _number(cfg, "tokens_per_step", file)
            flops_per_token = float(model_flops_per_token(n_params, convention=name,  # type: ignore[arg-type]
                                                          causal=causal, **shape))
            useful = flops_per_token * tokens
            conv = mfu_convention(name, peak, causal=causal)  # type: ignore[arg-type]
    except DomainError as exc:
        raise InputError(str(exc), file=file, field="convention") from exc
    label = cfg.get("name")
    return {"peak": peak, "devices": devices, "useful_flops_per_step": useful,
            "flops_per_token": flops_per_token, "tokens_per_step": tokens, "n_params": n_params,
            "convention": conv, "name": str(label) if label is not None else f"traced steps ({p.name})",
            "file": file}


# ---------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------


def _ledger_dict(ledger: Any) -> dict[str, Any]:
    out = ledger.to_dict()
    entries = list(out.get("entries", []))
    out["entries"] = entries[:MAX_LEDGER_ENTRIES]
    out["entries_not_shown"] = max(len(entries) - MAX_LEDGER_ENTRIES, 0)
    return out


def _flag_line(flag: Any) -> str:
    where = f" (rank {flag.rank})" if flag.rank is not None else ""
    return f"{flag.code}{where}: {flag.message}"


def run_program(paths: Sequence[str | Path], *, model: str | Path | None = None, cache: bool = True,
                cache_dir: str | Path | None = None, progress: bool = False) -> dict[str, Any]:
    """Compute the object ``fleetlib program`` prints, from command-line style arguments.

    Parameters
    ----------
    paths
        Trace files and/or directories of trace files (one file per rank).
    model
        Optional model configuration YAML (see the module docstring); with it the result carries
        ``program_goodput``.
    cache
        Use and fill the reader's Parquet cache (``$FLEETLIB_TRACE_CACHE`` or
        ``~/.cache/fleetlib/traces`` unless ``cache_dir`` is given).
    cache_dir
        Cache directory.
    progress
        Show a progress bar over files on standard error.

    Returns
    -------
    dict
        ``files``; ``ranks`` ({rank: {``steps``, ``step_wall_us``, ``partition_us`` {compute,
        exposed_comm, peer_wait, exposed_memcpy, host_dispatch, idle}, ``overlapped_comm_us``}},
        sums over each rank's steps); ``stragglers`` (one record per rank); ``collectives``
        (``matched_by``, ``instances``, ``first`` -- last arriver and longest waiter of each group's
        first collective of each type -- and ``audit``); ``flags`` (the analysis' notes, then the
        reader's flags as ``code (rank r): message``); ``ledger`` (rows read / kept / repaired /
        rejected, at most :data:`MAX_LEDGER_ENTRIES` entries, flags); ``partition`` (one record
        per rank and step); ``program_goodput`` (None without ``model``; otherwise ``value``,
        ``convention``, the model's inputs and the factor with its losses in device-seconds).

    Raises
    ------
    InputError
        A path that does not exist, a trace or model configuration that cannot be read, or two files
        that claim one rank.
    DomainError
        No path, a directory without trace files, or collectives that cannot be matched across
        ranks.
    """
    from fleetlib.accounting import Window
    from fleetlib.program.breakdown import program_goodput_factor
    from fleetlib.program.collectives import program_summary
    from fleetlib.program.traces import read_traces, trace_files

    if not paths:
        raise DomainError("no trace file or directory was given")
    config = load_model_config(model) if model is not None else None  # fail fast, before parsing traces
    files = trace_files([Path(p) for p in paths])
    traces = read_traces(files, cache=cache, cache_dir=cache_dir, progress=progress)
    summary = program_summary(traces.kernels, traces.steps)
    flags = [*summary["flags"], *(_flag_line(f) for f in traces.flags)]
    result: dict[str, Any] = {
        "files": [str(f) for f in files],
        "ranks": summary["ranks"],
        "stragglers": summary["stragglers"],
        "collectives": summary["collectives"],
        "flags": flags,
        "ledger": _ledger_dict(traces.ledger),
        "partition": summary["partition"],
        "program_goodput": None,
    }
    if config is not None:
        import pandas as pd

        partition = pd.DataFrame.from_records(summary["partition"])
        try:
            factor = program_goodput_factor(partition, useful_flops_per_step=config["useful_flops_per_step"],
                                            devices=config["devices"], peak=config["peak"],
                                            convention=config["convention"].label,
                                            window=Window.nominal(config["name"]))
        except DomainError as exc:  # the traces are fine; the model configuration does not fit them
            raise InputError(f"does not fit the traces: {exc}", file=config["file"]) from exc
        peak = config["peak"]
        result["program_goodput"] = {
            "value": factor.value,
            "convention": factor.convention,
            "model": config["file"],
            "accelerator": peak.accelerator,
            "peak_flops_per_s": peak.peak_flops_per_s,
            "peak_source": peak.source,
            "devices": config["devices"],
            "useful_flops_per_step": config["useful_flops_per_step"],
            "flops_per_token": config["flops_per_token"],
            "tokens_per_step": config["tokens_per_step"],
            "n_params": config["n_params"],
            "factor": factor.to_dict(),
        }
    return result


# ---------------------------------------------------------------------------------------------------
# Text rendering
# ---------------------------------------------------------------------------------------------------


def _ms(us: float) -> str:
    return f"{us / 1000.0:,.3f}"


def render_program(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib program``'s result as text with units.

    Parameters
    ----------
    res
        The object :func:`run_program` returns.

    Returns
    -------
    str
        A per-rank table of the step-time partition in milliseconds (summed over the rank's traced
        steps), the last arriver and longest waiter of each first collective, the ranks whose
        relative score marks them as stragglers, program goodput with its convention when known,
        the ledger's counts and the flags.
    """
    lines = [f"{len(res['ranks'])} rank(s) from {len(res['files'])} file(s); times in ms, summed over "
             "each rank's traced steps"]
    head = f"  {'rank':>5} {'steps':>5} {'step wall':>10} " + " ".join(
        f"{_PART_LABELS[p]:>10}" for p in PARTITION_PARTS) + f" {'overlapped':>10}"
    lines.append(head)
    for rank, r in sorted(res["ranks"].items(), key=lambda kv: int(kv[0])):
        parts = " ".join(f"{_ms(r['partition_us'][p]):>10}" for p in PARTITION_PARTS)
        lines.append(f"  {rank:>5} {r['steps']:>5} {_ms(r['step_wall_us']):>10} {parts} "
                     f"{_ms(r['overlapped_comm_us']):>10}")
    coll = res["collectives"]
    lines.append(f"collectives: {coll['instances']} matched instance(s) by {coll['matched_by']}")
    for f in coll["first"]:
        if f["ranks"] < 2:
            continue
        lines.append(f"  first {f['collective']} in group {f['group']} ({f['ranks']} ranks): last arriver "
                     f"rank {f['last_arriver']}; longest waiter rank {f['longest_waiter']} "
                     f"({_ms(f['longest_wait_us'])} ms)")
    flagged = [s for s in res["stragglers"] if s.get("straggler")]
    if flagged:
        lines.append("stragglers (relative score below threshold): " + ", ".join(
            f"rank {s['rank']} ({s['relative_score']:.3f})" for s in flagged))
    elif res["stragglers"] and "relative_score" in res["stragglers"][0]:
        lines.append("stragglers: none (every rank's relative score is at or above the threshold)")
    pg = res.get("program_goodput")
    if pg is not None:
        lines.append(f"program goodput P   {pg['value']:.4f}  ({pg['convention']}; {pg['devices']} devices, "
                     f"{pg['useful_flops_per_step']:.4g} useful FLOP per step)")
    led = res["ledger"]
    lines.append(f"ledger: {led['read']:,} rows read = {led['kept']:,} kept + {led['repaired']:,} repaired + "
                 f"{led['rejected']:,} rejected")
    lines += [f"  flag: {f}" for f in res["flags"]]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------------


def _cmd_program(args: argparse.Namespace) -> dict[str, Any]:
    return run_program(args.paths, model=args.model_config, cache=not args.no_cache,
                       progress=not args.json and sys.stderr.isatty())


def register(subparsers: Any, synth_subparsers: Any,
             add_json: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``fleetlib program`` to the command line.

    Parameters
    ----------
    subparsers
        The ``fleetlib`` sub-command action (``add_parser`` is called on it).
    synth_subparsers
        The ``fleetlib synth`` sub-command action (unused here).
    add_json
        Adds the common ``--json`` flag to a parser.
    """
    del synth_subparsers
    p = subparsers.add_parser(
        "program", help="step-time partition, stragglers and program goodput from step traces",
        description="Read PyTorch profiler (Kineto) traces, one file per rank, and split each rank's "
                    "step wall time into compute, exposed communication, peer wait, exposed copies, "
                    "host dispatch and idle; match collectives across ranks (last arriver, longest "
                    "waiter, straggler scores, collective audit); with --model, program goodput "
                    "against the arithmetic ideal with its convention.")
    p.add_argument("paths", nargs="+", type=Path, metavar="FILE_OR_DIR",
                   help="trace files (.json / .json.gz) or directories of them")
    # dest is not "model": fleetlib.cli reads args.model as the `fleetlib model` sub-command's name
    p.add_argument("--model", dest="model_config", type=Path, metavar="CONFIG.yaml",
                   help="model configuration giving the useful FLOPs per step (accelerator, devices, "
                        "useful_flops_per_step or n_params + tokens_per_step, convention)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the Parquet trace cache ($FLEETLIB_TRACE_CACHE)")
    add_json(p)
    p.set_defaults(func=_cmd_program, render=render_program)
