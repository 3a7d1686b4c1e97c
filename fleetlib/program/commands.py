"""Command line of rung 3: ``fleetlib program``, ``fleetlib stragglers`` and ``fleetlib synth rank-timers``.

``fleetlib program FILE_OR_DIR... [--model CONFIG.yaml] [--no-cache]`` reads step traces;
``fleetlib stragglers PATH [--engine pandas|dask] [--workers N] [--top K]`` finds stragglers from
per-rank step timers (:func:`run_stragglers`, :mod:`fleetlib.program.stragglers`); ``fleetlib synth
rank-timers`` writes synthetic timers with injected stragglers (:func:`run_synth_rank_timers`).

:func:`register` adds the commands to the ``fleetlib`` parser (:mod:`fleetlib.cli` calls it).  The work
is done by :func:`fleetlib.program.measure.measure` (the Kineto reader's tables and ledger, the
per-rank partition of step wall time, stragglers, collective audit, the window of the traced steps
and, when a model configuration gives the useful FLOPs, the program goodput factor).  This module
checks the paths and the model configuration, turns what cannot be read into
:class:`~fleetlib.quality.InputError` or :class:`~fleetlib.quality.DomainError` -- which the command
line prints as one line with exit status 2 -- and renders the result as text with units.

Model configuration
-------------------
See :mod:`fleetlib.program.model_config` (``data/traces/models/dlrm_example.yaml`` is an example).

Examples
--------
.. code-block:: console

    $ fleetlib program data/traces/dlrm_8rank
    $ fleetlib program data/traces/dlrm_8rank --model data/traces/models/dlrm_example.yaml --json
    $ fleetlib program data/traces/hta_pp_pair_rank-*.json.gz --no-cache
    $ fleetlib synth rank-timers --ranks 16384 --steps 10000 --seed 0 --out /tmp/timers.parquet
    $ fleetlib stragglers /tmp/timers.parquet --engine dask --workers 2 --top 5 --json
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetlib._environ import attached_client, progress_wanted
from fleetlib.commands_common import add_scheduler_argument, input_path, ledger_lines, writable_output_path
from fleetlib.program.classify import Classifier
from fleetlib.program.fleet_law import FLEET_LAW_TERMS
from fleetlib.program.model_config import MODEL_KEYS, load_model_config
from fleetlib.program.schema import CLASSIFIED_BY, PARTITION_PARTS, PARTITION_SHORT_LABELS
from fleetlib.quality import DomainError, InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_LEDGER_ENTRIES",
    "MODEL_KEYS",
    "communication_classified",
    "load_model_config",
    "parse_stragglers",
    "register",
    "render_program",
    "render_stragglers",
    "render_synth_rank_timers",
    "run_program",
    "run_stragglers",
    "run_synth_rank_timers",
]

#: Ledger entries (repairs and rejections) printed in full; the rest are counted.
MAX_LEDGER_ENTRIES: int = 100



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


def _rank_list(ranks: Sequence[int], shown: int = 8) -> str:
    """``0-3, 5, 9-11``: sorted ranks as runs, at most ``shown`` runs then ``...``."""
    runs: list[list[int]] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    return ", ".join(text[:shown]) + (", ..." if len(text) > shown else "")


def flag_summary(flags: Sequence[Any]) -> list[str]:
    """One line per distinct flag code, with the ranks that raised it (for the text output).

    Parameters
    ----------
    flags
        The ledger's :class:`~fleetlib.quality.Flag` objects (each with ``code``, ``message``, ``rank``).

    Returns
    -------
    list of str
        ``code (N ranks: 0-7): message`` in first-seen order; the message is the first rank's, with
        ``(messages differ by rank)`` when the ranks' messages are not all the same.  Flags with no
        rank keep their own line.  The JSON output keeps every flag.
    """
    groups: dict[str, list[Any]] = {}
    lines: list[tuple[str, str]] = []
    for f in flags:
        if f.rank is None:
            lines.append(("", f"{f.code}: {f.message}"))
            continue
        if f.code not in groups:
            groups[f.code] = []
            lines.append((f.code, ""))
        groups[f.code].append(f)
    out = []
    for code, text in lines:
        if not code:
            out.append(text)
            continue
        members = groups[code]
        ranks = [int(f.rank) for f in members]
        n = len(set(ranks))
        same = len({f.message for f in members}) == 1
        note = "" if same else " (messages differ by rank)"
        plural = "s" if n != 1 else ""
        out.append(f"{code} ({n} rank{plural}: {_rank_list(ranks)}): {members[0].message}{note}")
    return out


def run_program(paths: Sequence[str | Path], *, model: str | Path | None = None, cache: bool = True,
                cache_dir: str | Path | None = None, progress: bool = False,
                workers: int | None = None, comm_patterns: Sequence[str] = (),
                memory: bool = False, scheduler: str | None = None) -> dict[str, Any]:
    """Compute the object ``fleetlib program`` prints, from command-line style arguments.

    Parameters
    ----------
    paths
        Trace files and/or directories of trace files (one file per rank).
    model
        Optional model configuration YAML (see the module docstring); with it the result carries
        ``program_goodput``.
    cache
        Use and fill the reader's trace cache (``$FLEETLIB_TRACE_CACHE`` or
        ``~/.cache/fleetlib/traces`` unless ``cache_dir`` is given).
    cache_dir
        Cache directory.
    progress
        Show a progress bar over files on standard error.
    workers
        Parse the rank files on a local Dask cluster of this many worker processes (one thread each,
        bounded memory); None parses them in this process.  The result is the same.
    comm_patterns
        More communication-kernel name patterns (regular expressions, searched case-insensitively),
        added to :data:`fleetlib.program.classify.DEFAULT_COMM_PATTERNS` (``--comm-pattern``).
    memory
        Also read the Kineto ``[memory]`` events and the nsys ``CUDA_GPU_MEMORY_USAGE_EVENTS``
        table (``--memory``; a second pass over the files):
        the result gains ``memory`` (per rank: peak allocated, churn; and the events' ledger) and
        the two memory patterns of the triage become observable.
    scheduler
        Parse the rank files on the running Dask cluster of this scheduler address (``--scheduler``;
        left running; ``workers`` is then not used); None: Dask's ``scheduler-address``
        configuration (``DASK_SCHEDULER_ADDRESS``) when it names one.

    Returns
    -------
    dict
        ``findings`` (the Table 7 patterns found, ranked by evidence: ``pattern, factor, term, lever,
        trade_off, evidence_us, ranks, steps, status``; :func:`fleetlib.program.triage.triage`) and
        ``not_observable`` (patterns the trace cannot show, and why); ``files``; ``window`` (the
        calendar window of the traced steps,
        :func:`fleetlib.program.measure.measure`: their measured UTC span when the traces carry a
        clock, else nominal); ``ranks`` ({rank: {``steps``, ``step_wall_us``, ``partition_us`` {compute,
        exposed_comm, peer_wait, exposed_memcpy, host_dispatch, idle}, ``overlapped_comm_us``,
        ``fleet_law_us`` {the six Fleet Law terms, :mod:`fleetlib.program.fleet_law`}}},
        sums over each rank's steps); ``stragglers`` (one record per rank); ``collectives``
        (``matched_by``, ``instances``, ``first`` -- last arriver and longest waiter of each group's
        first collective of each type -- and ``audit``); ``flags`` (the analysis' notes, then the
        reader's flags as ``code (rank r): message``); ``flag_lines`` (the same flags, one line per
        distinct reader flag code with its rank count, :func:`flag_summary`: what the text prints);
        ``ledger`` (rows read / kept / repaired /
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
    from fleetlib.program.measure import measure
    from fleetlib.program.readers.kineto import trace_files

    if not paths:
        raise DomainError("no trace file or directory was given")
    config = load_model_config(model) if model is not None else None  # fail fast, before parsing traces
    files = trace_files(list(paths))  # paths and fsspec URLs (read where the task runs)
    classifier = Classifier(extra_comm_patterns=tuple(comm_patterns)) if comm_patterns else None
    with attached_client(scheduler, progress=progress) as attached:  # a cluster named: left running
        if attached is not None:
            measured = measure(files, model=config, cache=cache, cache_dir=cache_dir, progress=progress,
                               client=attached, classifier=classifier)
        elif workers is None:
            measured = measure(files, model=config, cache=cache, cache_dir=cache_dir, progress=progress,
                               classifier=classifier)
        else:
            from distributed import Client

            from fleetlib.program.stragglers import local_cluster

            with local_cluster(workers) as cluster, Client(cluster) as client:
                measured = measure(files, model=config, cache=cache, cache_dir=cache_dir, progress=progress,
                                   client=client, classifier=classifier)
    summary = measured.summary()
    events = None
    memory_out = None
    if memory:
        from fleetlib.program.memory import memory_by_rank, memory_by_step, read_memory_events

        events, mem_ledger = read_memory_events(files)  # nsys exports: their CUDA memory table
        memory_out = {"ranks": memory_by_rank(memory_by_step(events, measured.traces.steps)),
                      "ledger": _ledger_dict(mem_ledger)}
    diagnosis = measured.findings(memory=events).to_dict()
    flags = [*summary["flags"], *(_flag_line(f) for f in measured.ledger.flags)]
    flag_lines = [*summary["flags"], *flag_summary(measured.ledger.flags)]
    result: dict[str, Any] = {
        "findings": diagnosis["findings"],
        "not_observable": diagnosis["not_observable"],
        "files": [str(f) for f in files],
        "window": measured.window.to_dict(),
        "ranks": summary["ranks"],
        "stragglers": summary["stragglers"],
        "collectives": summary["collectives"],
        "communication": communication_classified(measured.traces.kernels),
        "flags": flags,
        "flag_lines": flag_lines,
        "ledger": _ledger_dict(measured.ledger),
        "partition": summary["partition"],
        "fleet_law_ridge": dict(zip(("flop_per_byte", "source"), measured.ridge, strict=True)),
        "program_goodput": None,
    }
    if memory_out is not None:
        result["memory"] = memory_out
    if config is not None:
        try:
            factor = measured.factor()
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


def communication_classified(kernels: pd.DataFrame) -> dict[str, Any]:
    """Count the communication kernels by the rule that found them (the kernel table's ``classified_by``).

    Parameters
    ----------
    kernels
        A kernel table (:func:`~fleetlib.program.readers.kineto.read_traces`,
        :func:`~fleetlib.program.readers.nsys.read_nsys`).

    Returns
    -------
    dict
        ``kernels`` (how many are communication) and ``classified_by``: the count per rule
        (``metadata``, ``launcher``, ``name``), zero included.
    """
    by = kernels.loc[kernels["kind"] == "comm", "classified_by"].astype(str)
    return {"kernels": len(by), "classified_by": {c: int((by == c).sum()) for c in CLASSIFIED_BY[:3]}}


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
    lines = []
    if "findings" in res:
        lines.append(f"findings (Table 7 patterns, largest evidence first): {len(res['findings'])}")
        for f in res["findings"]:
            where = f"ranks {_rank_list(f['ranks'])}, {len(f['steps'])} step(s)"
            lines.append(f"  {f['pattern']}: {_ms(f['evidence_us'])} ms on the critical path ({where}); "
                         f"{f['factor']} / {f['term']}; {f['status']}")
            lines.append(f"    lever: {f['lever']}; check: {f['trade_off']}")
        for pattern, why in res.get("not_observable", {}).items():
            lines.append(f"  {pattern}: {why}")
    lines.append(f"{len(res['ranks'])} rank(s) from {len(res['files'])} file(s); times in ms, summed over "
                 "each rank's traced steps")
    window = res.get("window")
    if window is not None:
        span = f"{window['start']} .. {window['end']}" if window.get("start") else "nominal"
        lines.append(f"window: {window['label']}" + ("" if span == window["label"] else f" ({span})"))
    head = f"  {'rank':>5} {'steps':>5} {'step wall':>10} " + " ".join(
        f"{PARTITION_SHORT_LABELS[p]:>10}" for p in PARTITION_PARTS) + f" {'overlapped':>10}"
    lines.append(head)
    for rank, r in sorted(res["ranks"].items(), key=lambda kv: int(kv[0])):
        parts = " ".join(f"{_ms(r['partition_us'][p]):>10}" for p in PARTITION_PARTS)
        lines.append(f"  {rank:>5} {r['steps']:>5} {_ms(r['step_wall_us']):>10} {parts} "
                     f"{_ms(r['overlapped_comm_us']):>10}")
    if all("fleet_law_us" in r for r in res["ranks"].values()):
        ridge = res.get("fleet_law_ridge") or {}
        if ridge:
            lines.append(f"  Fleet Law terms (compute roof from {ridge['flop_per_byte']:,.1f} FLOP/byte: "
                         f"{ridge['source']})")
        lines.append(f"  Fleet Law terms: {'rank':>5} " + " ".join(f"{t:>13}" for t in FLEET_LAW_TERMS))
        for rank, r in sorted(res["ranks"].items(), key=lambda kv: int(kv[0])):
            terms = r["fleet_law_us"]
            lines.append(f"  {'':>16} {rank:>5} " + " ".join(f"{_ms(terms[t]):>13}" for t in FLEET_LAW_TERMS))
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
    comm = res.get("communication")
    if comm is not None and comm["kernels"]:
        by = comm["classified_by"]
        lines.append(f"communication kernels: {comm['kernels']:,} ({by['metadata']:,} by metadata, "
                     f"{by['launcher']:,} by launcher, {by['name']:,} by name only)")
    lines += ledger_lines(res["ledger"])
    lines += [f"  flag: {f}" for f in res.get("flag_lines", res["flags"])]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# fleetlib stragglers / fleetlib synth rank-timers
# ---------------------------------------------------------------------------------------------------


def run_stragglers(path: str | Path, *, engine: str | None = None, workers: int = 2, top: int = 10,
                   threshold: float | None = None, client: Any = None,
                   progress: bool = False) -> dict[str, Any]:
    """Compute the object ``fleetlib stragglers`` prints, from command-line style arguments.

    Parameters
    ----------
    path
        A Parquet or CSV file of per-rank step timers (``rank, step, duration_s``), or a folder of
        such files.
    engine
        ``"pandas"`` or ``"dask"``; None picks pandas up to
        :data:`fleetlib.program.stragglers.AUTO_DASK_ROWS` rows and Dask above.
    workers
        Worker processes of the local Dask cluster (Dask engine, when ``client`` is None).
    top
        Ranks listed (at least 1).
    threshold
        Relative score below which a rank is a straggler (default
        :data:`fleetlib.program.collectives.DEFAULT_STRAGGLER_THRESHOLD`).
    client
        An existing :class:`distributed.Client` for the Dask engine.
    progress
        Progress bars on standard error (Dask engine).

    Returns
    -------
    dict
        :meth:`fleetlib.program.stragglers.FleetStragglers.to_dict` (``engine``, ``files``, ``rows``,
        ``ranks``, ``steps``, ``threshold``, ``top``, ``stragglers``, ``straggler_ranks``,
        ``last_arriver_counts``, ``last_arriver_ranks``, ``wait_totals``, ``ledger``) plus
        ``workers`` (None for pandas) and ``path``.

    Raises
    ------
    InputError
        A missing or unreadable path or row (see :func:`fleetlib.program.stragglers.read_rank_timers`).
    DomainError
        ``top`` or ``workers`` below 1, an unknown engine, a threshold outside [0, 1], or CSV with
        the Dask engine.
    """
    from fleetlib.program.collectives import DEFAULT_STRAGGLER_THRESHOLD
    from fleetlib.program.stragglers import straggler_analysis

    for name, v in (("top", top), ("workers", workers)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise DomainError(f"{name} must be a whole number >= 1; got {v!r}")
    thr = DEFAULT_STRAGGLER_THRESHOLD if threshold is None else threshold
    res = straggler_analysis(path, engine=engine, client=client, workers=int(workers),  # type: ignore[arg-type]
                             threshold=thr, progress=progress)
    out = res.to_dict(int(top), max_ledger_entries=MAX_LEDGER_ENTRIES)
    out["workers"] = None if res.engine == "pandas" else (int(workers) if client is None else
                                                          len(client.scheduler_info().get("workers", {})))
    out["path"] = str(path)
    return out


def render_stragglers(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib stragglers``' result as text with units.

    Parameters
    ----------
    res
        The object :func:`run_stragglers` returns.

    Returns
    -------
    str
        Size and engine, the top ranks (steps, times last, share, wait caused and own wait in
        seconds, mean duration, relative score, individual score), the ranks that slowed down against
        their own history, the most frequent last arrivers, the wait totals and
        the ledger's counts.
    """
    engine = res["engine"] + (f", {res['workers']} worker(s)" if res.get("workers") else "")
    lines = [f"{res['ranks']:,} rank(s) x {res['steps']:,} step(s), {res['rows']:,} timers from "
             f"{len(res['files'])} file(s) ({engine})",
             f"top {len(res['stragglers'])} by relative score (best rank mean / rank mean; straggler below "
             f"{res['threshold']:g}):",
             f"  {'rank':>7} {'steps':>7} {'last':>7} {'share':>7} {'caused s':>12} {'wait s':>12} "
             f"{'mean s':>9} {'score':>6} {'own':>6}"]
    for s in res["stragglers"]:
        mark = "".join(m for m, on in (("  straggler", s["straggler"]), ("  slowed down", s["slowed_down"]))
                       if on)
        lines.append(f"  {s['rank']:>7} {s['steps']:>7,} {s['arrived_last']:>7,} "
                     f"{s['arrived_last_share']:>7.1%} {s['wait_caused_s']:>12,.3f} {s['wait_s']:>12,.3f} "
                     f"{s['mean_duration_s']:>9.4f} {s['relative_score']:>6.3f} {s['individual_score']:>6.3f}"
                     f"{mark}")
    slowed = res.get("slowed_down_ranks", [])
    lines.append("slowed down against their own history (individual score, best step window / last, "
                 f"below {res['threshold']:g}): " + (", ".join(f"rank {r}" for r in slowed) if slowed
                                                     else "none"))
    counts = ", ".join(f"rank {r} ({c:,})" for r, c in res["last_arriver_counts"].items())
    lines.append(f"last arrivers ({res['last_arriver_ranks']:,} distinct rank(s)): {counts}")
    wt = res["wait_totals"]
    lines.append(f"barrier wait, all ranks: {wt['all_ranks_s']:,.3f} s ({wt['per_step_mean_s']:,.3f} s "
                 "per step); longest waiters: " + ", ".join(f"rank {w['rank']} ({w['wait_s']:,.3f} s)"
                                                 for w in wt["top_waiters"][:3]))
    flagged = res["straggler_ranks"]
    lines.append(f"stragglers: {', '.join(map(str, flagged[:20]))}" + (" ..." if len(flagged) > 20 else "")
                 if flagged else "stragglers: none below the threshold")
    lines += ledger_lines(res["ledger"])
    return "\n".join(lines)


def parse_stragglers(text: str | None) -> dict[int, float] | None:
    """Parse ``--stragglers``: ``RANK:SLOWDOWN[,RANK:SLOWDOWN...]``, ``none``, or None (the default set).

    Parameters
    ----------
    text
        E.g. ``"17:1.5,4242:1.2"``; ``"none"`` injects no straggler; None keeps the generator's
        default (:data:`fleetlib.program.stragglers.DEFAULT_STRAGGLERS` on ranks drawn from the seed).

    Returns
    -------
    dict or None
        ``{rank: slowdown}``, ``{}`` or None.

    Raises
    ------
    DomainError
        A malformed item or a rank given twice.
    """
    if text is None:
        return None
    if text.strip().lower() == "none":
        return {}
    out: dict[int, float] = {}
    for item in text.split(","):
        rank, sep, slow = item.strip().partition(":")
        try:
            r, s = int(rank), float(slow)
        except ValueError:
            r, s = -1, float("nan")
        if not sep or r < 0 or s != s:
            raise DomainError(f"--stragglers items are RANK:SLOWDOWN (e.g. 17:1.5); got {item.strip()!r}")
        if r in out:
            raise DomainError(f"--stragglers names rank {r} twice")
        out[r] = s
    return out


def run_synth_rank_timers(ranks: int, steps: int, seed: int, out: str | Path, *,
                          stragglers: str | Mapping[int, float] | None = None, transient_rate: float = 0.0,
                          noise_sigma: float = 0.05, progress: bool = False) -> dict[str, Any]:
    """Write synthetic per-rank step timers with injected stragglers; return the description.

    Parameters
    ----------
    ranks, steps
        Grid size (each at least 1).
    seed
        Random seed.
    out
        Output ``.parquet`` file; its folder must exist.
    stragglers
        ``--stragglers`` text (see :func:`parse_stragglers`) or a ``{rank: slowdown}`` mapping;
        None: the default set.
    transient_rate
        Probability of a transient slow (rank, step).
    noise_sigma
        Per-rank log-normal noise.
    progress
        A progress bar over row groups on standard error.

    Returns
    -------
    dict
        :func:`fleetlib.program.stragglers.synth_rank_timers`' object (``path``, ``rows``, ``ranks``,
        ``steps``, ``row_groups``, ``bytes``, ``parameters``, ``truth``).

    Raises
    ------
    DomainError
        Sizes below 1, a malformed straggler list, a rank outside the grid, a slowdown below 1.
    InputError
        The output file cannot be written.
    """
    from fleetlib.program.stragglers import synth_rank_timers

    slow = parse_stragglers(stragglers) if isinstance(stragglers, str) else stragglers
    path = writable_output_path(out)
    try:
        return synth_rank_timers(path, ranks=ranks, steps=steps, seed=seed, stragglers=slow,
                                 transient_rate=transient_rate, noise_sigma=noise_sigma, progress=progress)
    except OSError as exc:
        raise InputError(f"cannot write the output file ({exc})", file=str(path)) from exc


def render_synth_rank_timers(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib synth rank-timers``' result as text.

    Parameters
    ----------
    res
        The object :func:`run_synth_rank_timers` returns.

    Returns
    -------
    str
        What was written where and the injected stragglers.
    """
    truth = res["truth"]
    slow = ", ".join(f"rank {s['rank']} x{s['slowdown']:g}" for s in truth["stragglers"]) or "none"
    return "\n".join([
        f"wrote {res['rows']:,} step timers ({res['ranks']:,} ranks x {res['steps']:,} steps, "
        f"{res['row_groups']:,} row group(s), {res['bytes'] / 1e6:,.1f} MB) to {res['path']}",
        f"injected persistent stragglers: {slow}; transient slow rank-steps: {truth['transient']:,}",
        f"measure it: fleetlib stragglers {res['path']}",
    ])


# ---------------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------------


def _cmd_stragglers(args: argparse.Namespace) -> dict[str, Any]:
    return run_stragglers(args.path, engine=args.engine, workers=args.workers, top=args.top,
                          threshold=args.threshold, progress=progress_wanted(args.json))


def _cmd_synth_rank_timers(args: argparse.Namespace) -> dict[str, Any]:
    return run_synth_rank_timers(args.ranks, args.steps, args.seed, args.out, stragglers=args.stragglers,
                                 transient_rate=args.transient_rate,
                                 progress=progress_wanted(args.json))


def _cmd_program(args: argparse.Namespace) -> dict[str, Any]:
    return run_program(args.paths, model=args.model_config, cache=not args.no_cache,
                       progress=progress_wanted(args.json), workers=args.workers,
                       comm_patterns=tuple(args.comm_pattern or ()), memory=args.memory,
                       scheduler=args.scheduler)


def register(subparsers: Any, synth_subparsers: Any,
             add_json: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``fleetlib program``, ``fleetlib stragglers`` and ``fleetlib synth rank-timers``.

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
        "program", help="step-time partition, stragglers and program goodput from step traces",
        description="Read PyTorch profiler (Kineto) traces or Nsight Systems SQLite exports, one file per "
                    "rank, and split each rank's "
                    "step wall time into compute, exposed communication, peer wait, exposed copies, "
                    "host dispatch and idle; match collectives across ranks (last arriver, longest "
                    "waiter, straggler scores, collective audit); with --model, program goodput "
                    "against the arithmetic ideal with its convention.")
    p.add_argument("paths", nargs="+", type=input_path, metavar="FILE_OR_DIR",
                   help="trace files (.json / .json.gz; Nsight Systems .sqlite exports) or directories of "
                        "trace files")
    # dest is not "model": fleetlib.cli reads args.model as the `fleetlib model` sub-command's name
    p.add_argument("--model", dest="model_config", type=input_path, metavar="CONFIG.yaml",
                   help="model configuration giving the useful FLOPs per step (accelerator, devices, "
                        "useful_flops_per_step or n_params + tokens_per_step, convention)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the trace cache ($FLEETLIB_TRACE_CACHE)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="parse the rank files on a local Dask cluster of N worker processes (default: "
                        "in this process)")
    add_scheduler_argument(p)
    p.add_argument("--comm-pattern", action="append", metavar="REGEX",
                   help="a kernel-name pattern that marks communication, added to the defaults (NCCL, "
                        "RCCL, DeepEP, NVSHMEM, custom all-reduce ...); repeat for more. Kernel metadata "
                        "(Collective name args, NCCL NVTX ranges) still wins over names")
    p.add_argument("--memory", action="store_true",
                   help="also read the traces' [memory] events (nsys: CUDA_GPU_MEMORY_USAGE_EVENTS):"
                        " per-rank peak allocated and allocation "
                        "churn, and the two memory patterns of the triage")
    add_json(p)
    p.set_defaults(func=_cmd_program, render=render_program)

    p = subparsers.add_parser(
        "stragglers", help="stragglers from per-rank step timers (pandas, or out of core on Dask)",
        description="Read per-rank step timers (rank, step, duration_s; Parquet or CSV) and find the "
                    "stragglers: each step's last arriver (longest duration), every rank's barrier wait "
                    "(step max - own duration), the share of steps each rank arrived last and a relative "
                    "score against the best rank.  --engine dask analyses Parquet out of core on a local "
                    "Dask cluster.")
    p.add_argument("path", type=Path, metavar="PATH", help="a Parquet/CSV file or a folder of them")
    p.add_argument("--engine", choices=("pandas", "dask"),
                   help="pandas (in memory) or dask (out of core, Parquet); default: pandas up to 20 "
                        "million rows, dask above")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="Dask worker processes (default 2; dask engine only)")
    p.add_argument("--top", type=int, default=10, metavar="K", help="ranks listed (default 10)")
    p.add_argument("--threshold", type=float, metavar="SCORE",
                   help="relative score below which a rank is a straggler (default 0.75)")
    add_json(p)
    p.set_defaults(func=_cmd_stragglers, render=render_stragglers)

    p = synth_subparsers.add_parser(
        "rank-timers", help="synthetic per-rank step timers with injected stragglers (Parquet)",
        description="Write per-rank step timers (rank, step, duration_s) of a synchronous job: "
                    "log-normal per-rank noise, a per-step common component, persistent stragglers "
                    "with given slowdowns and optional transient slow steps; written a row group at a "
                    "time, so the file may be far larger than memory.")
    p.add_argument("--ranks", type=int, required=True, metavar="R", help="ranks")
    p.add_argument("--steps", type=int, required=True, metavar="S", help="steps")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    p.add_argument("--stragglers", metavar="RANK:SLOWDOWN,...",
                   help="persistent stragglers, e.g. 17:1.5,4242:1.2, or 'none' (default: three ranks "
                        "drawn from the seed, slowdowns 1.5, 1.35, 1.2)")
    p.add_argument("--transient-rate", type=float, default=0.0, metavar="P",
                   help="probability of a transient 3x slow rank-step (default 0)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.parquet", help="output file")
    add_json(p)
    p.set_defaults(func=_cmd_synth_rank_timers, render=render_synth_rank_timers)
