"""Command line of rung 2: ``fleetlib runtime FILE...`` and ``fleetlib synth timeline``.

:func:`register` adds both commands to the ``fleetlib`` parser (:mod:`fleetlib.cli` calls it).  The
measuring is done by :mod:`fleetlib.runtime` (readers, :func:`fleetlib.runtime.goodput.runtime_summary`,
:func:`mlperf_runtime_json`, :func:`fleetlib.runtime.synth.synth_timeline_file`); this module picks the
reader for ``--format``, checks the paths and options, turns what cannot be read into
:class:`~fleetlib.quality.InputError` or :class:`~fleetlib.quality.DomainError` -- which the command
line prints as one line with exit status 2 -- and renders the result as text with units.

Examples
--------
.. code-block:: console

    $ fleetlib runtime data/timelines/asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt --format mlperf
    $ fleetlib runtime data/timelines/maxtext-llama3-8b-demo_timeline.jsonl --format mlgoodput --json
    $ fleetlib synth timeline --steps 100000 --seed 1 --failure-rate-per-h 0.2 --out /tmp/job.parquet
    $ fleetlib runtime /tmp/job.parquet --format canonical --definition retrospective --json
"""

from __future__ import annotations

import argparse
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._io import as_paths, excerpt, is_url, listed_files, stored_size
from fleetlib.commands_common import (
    add_exclude_argument,
    cli_window,
    exclusion_lines,
    input_path,
    writable_output_path,
)
from fleetlib.quality import DomainError, InputError, check_nonnegative
from fleetlib.runtime.readers import READERS
from fleetlib.runtime.readers._common import NS_PER_S, PathLike, close_books, utc_ns
from fleetlib.runtime.readers.mlperf import parse_mllog
from fleetlib.runtime.schema import CLEAN_END_RULE, DEFINITION_TEXT, DEFINITIONS, ISSUE_TERMS, TERM_LABELS

__all__ = [
    "FORMATS",
    "mlperf_runtime_json",
    "mlperf_step_statistics",
    "mlperf_summary",
    "mlperf_summary_table",
    "register",
    "render_runtime",
    "render_synth_timeline",
    "run_runtime",
    "run_synth_timeline",
]

#: Input formats of ``fleetlib runtime``: the keys of :data:`fleetlib.runtime.readers.READERS`.
FORMATS: tuple[str, ...] = tuple(READERS)

#: Row labels of the loss terms in the text rendering.
_TERM_LABELS = {k: TERM_LABELS[k] for k in ISSUE_TERMS}
_ELASTIC_TERMS = ("elastic_wait", "elastic_reinit")


# ---------------------------------------------------------------------------------------------------
# Argument handling
# ---------------------------------------------------------------------------------------------------


def _check_files(paths: Sequence[str | Path]) -> list[Any]:
    files = [p if is_url(p) else Path(p) for p in paths]  # a URL stays a URL (read through fsspec)
    if not files:
        raise DomainError("no input file was given")
    for p in files:
        if isinstance(p, str):
            stored_size(p)  # a missing object or a folder is refused, naming the URL
        elif p.is_dir():
            raise InputError("is a folder; give the files in it", file=str(p))
        elif not p.is_file():
            raise InputError("file not found", file=str(p))
    return files


def _ledger_of(m: Any) -> dict[str, Any]:
    """Return a measurement's ledger for the output; a reader's also counts the canonical rows."""
    out = m.ledger.to_dict()
    table = getattr(m, "table_ledger", None)
    if table is not None:
        # rows of the canonical tables the reader produced, as the measurement validated them
        out["canonical_rows"] = {"read": table.read, "kept": table.kept, "repaired": table.repaired,
                                 "rejected": table.rejected}
    return out


def _serving_output(m: Any) -> dict[str, Any]:
    """Return the output object of a serving measurement (ready / held, the phases as terms)."""
    return {"runtime_goodput": m.runtime_goodput, "held_s": m.held_s, "productive_s": m.ready_s,
            "terms": dict(m.terms), "unattributed_s": m.unattributed_s, "fault_free_step_s": None,
            "definition": "ready / held (serving)", "window": m.window.to_dict(),
            "replicas": len(m.by_replica), "ledger": _ledger_of(m)}


def run_runtime(paths: Sequence[str | Path], format: str, *, job: str | None = None,
                window: Sequence[str] | None = None, exclude: Sequence[Sequence[str]] | None = None,
                definition: str = "committed", stall_factor: float = 5.0,
                clean_end_commit: bool = True) -> dict[str, Any]:
    """Compute the object ``fleetlib runtime`` prints, from command-line style arguments.

    Parameters
    ----------
    paths
        Input files.  ``mlperf``: one result log (one run).  ``mlgoodput``: one or more
        ``*_timeline.jsonl`` files.  ``canonical``: CSV / Parquet steps and events files, or
        one Parquet file in the one-file layout of :func:`fleetlib.runtime.synth.write_timeline`
        (all read by :func:`fleetlib.runtime.readers.read_canonical`).  ``bloom``: a
        BLOOM-style event table.  ``serving``: replica lifecycle logs.  ``torchtitan``: every rank's
        structured-log JSONL files of one job (each rank is the job ``<source>/rank<r>``).  Every
        format but ``mlperf`` is read and measured by :func:`fleetlib.runtime.measure.measure`.
    format
        One of :data:`FORMATS` (the keys of :data:`fleetlib.runtime.readers.READERS`).
    job
        Measure only this job; None for every job in the input.  For an MLPerf log (one run, job id =
        the file name without suffix) it must name that run.
    window
        ``(start, end)``: ISO 8601 times with a zone, e.g. ``"2024-01-01T00:00Z"``; None for the whole
        timeline.  Not available for MLPerf logs, whose result is the raw interval sums of one run.
    exclude
        ``(start, end)`` pairs inside ``window`` left out of held time and all its parts
        (``--exclude``; they need ``window``; not for MLPerf logs).
    definition
        ``"committed"`` (default) or ``"retrospective"``.
    stall_factor, clean_end_commit
        As in :func:`fleetlib.runtime.goodput.runtime_goodput` (the stall bound, default 5x the
        fault-free step time; whether a clean job end counts as the final commit, default yes).

    Returns
    -------
    dict
        ``runtime_goodput`` (None when the window holds no held time), ``held_s``, ``productive_s``,
        ``terms`` (seconds: progress_at_risk, startup, input_wait, checkpoint, recovery, rework,
        preemption, elastic_wait, elastic_reinit, evaluation, stall, idle, unattributed;
        ``productive_s + sum(terms) == held_s``), ``stepping_slice_efficiency`` and
        ``available_slice_efficiency`` (None unless the timeline logs device counts),
        ``fault_free_step_s``, ``definition`` and ``ledger``, plus ``format``,
        ``files`` and what the measurement adds (see :func:`fleetlib.runtime.goodput.runtime_summary`).
        For MLPerf: held = ``init_start`` -> ``run_stop``, productive = the training blocks, runtime
        goodput = productive / held.  For formats read through a reader, ``ledger`` accounts for the
        input records and carries the measurement's flags too (``canonical_rows`` counts the rows of the
        canonical tables the measurement validated).  For serving logs: productive = ready time,
        held from placement, ``terms`` = seconds in each phase.

    Raises
    ------
    DomainError
        An unknown format or definition, a malformed window, or an option the format cannot honour.
    InputError
        A file that is missing, a folder, or cannot be read as the format.
    """
    if format not in FORMATS:
        raise DomainError(f"format must be one of {list(FORMATS)}; got {format!r}")
    if definition not in DEFINITIONS:
        raise DomainError(f"definition must be one of {list(DEFINITIONS)}; got {definition!r}")
    if window is not None and len(window) != 2:
        raise DomainError(f"window needs a start and an end; got {list(window)!r}")
    win = None if window is None else (str(window[0]), str(window[1]))
    files = _check_files(paths)
    names = [str(p) for p in files]
    try:
        if format == "mlperf":
            if exclude:
                raise DomainError("--exclude is not available for --format mlperf: a result log is measured "
                                  "as the raw interval sums of its one run (init_start -> run_stop)")
            return _run_mlperf(files, job=job, window=win, definition=definition)
        from fleetlib.runtime.goodput import summary_of
        from fleetlib.runtime.measure import measure

        m = measure(files, format=format, window=cli_window(win, exclude), definition=definition, job_id=job,
                    **({} if format == "serving" else {"stall_factor": stall_factor,
                                                       "clean_end_commit": clean_end_commit}))
        if format == "serving":
            return {"format": format, "files": names, **_serving_output(m)}
        res = summary_of(m)  # type: ignore[arg-type]
        res["ledger"] = _ledger_of(m)
        return {"format": format, "files": names, **res}
    except OSError as exc:  # a file that vanished or cannot be opened between the checks and the read
        raise InputError(f"cannot read the file ({exc.strerror or exc})",
                         file=getattr(exc, "filename", None) or names[0]) from exc


def _run_mlperf(files: list[Path], *, job: str | None, window: tuple[str, str] | None,
                definition: str) -> dict[str, Any]:
    if len(files) != 1:
        raise DomainError(f"--format mlperf measures one result log (one run); got {len(files)} files -- "
                          "run the command once per log")
    if window is not None:
        raise DomainError("--window is not available for --format mlperf: a result log is measured as the "
                          "raw interval sums of its one run (init_start -> run_stop)")
    res = mlperf_runtime_json(files[0], definition=definition)
    if job is not None and job != res["job_id"]:
        raise DomainError(f"job {job!r} is not in {str(files[0])!r}: an MLPerf log holds one run, "
                          f"{res['job_id']!r}")
    return {"files": [str(files[0])], **res}


def run_synth_timeline(steps: int, seed: int, out: str | Path, **options: Any) -> dict[str, Any]:
    """Write a synthetic job timeline as a one-file canonical Parquet; return it with its ground truth.

    Parameters
    ----------
    steps
        Steps the job must retain (at least 1).
    seed
        Random seed.
    out
        Output ``.parquet`` file; its folder must exist.
    **options
        Keyword arguments of :func:`fleetlib.runtime.synth.synth_timeline` (rates, checkpoint cadence,
        step time, ...); None values are left at the generator's defaults.

    Returns
    -------
    dict
        :func:`fleetlib.runtime.synth.synth_timeline_file`'s object: ``path``, ``steps``, ``events``,
        ``seed`` and ``truth`` (the injected seconds per category, held time, counts).

    Raises
    ------
    DomainError
        ``steps`` below 1 or an option outside its domain.
    InputError
        The output file cannot be written.
    """
    from fleetlib.runtime.synth import synth_timeline_file

    path = writable_output_path(out)
    if path.suffix.lower() not in (".parquet", ".pq"):
        raise DomainError(f"the output file must end in .parquet; got {str(path)!r}")
    kwargs = {k: v for k, v in options.items() if v is not None}
    try:
        return synth_timeline_file(steps, seed=seed, out=path, **kwargs)
    except OSError as exc:
        raise InputError(f"cannot write the output file ({exc.strerror or exc})", file=str(path)) from exc


# ---------------------------------------------------------------------------------------------------
# MLPerf result logs: the raw interval sums that ``--format mlperf`` prints
# ---------------------------------------------------------------------------------------------------


def _interval_measure(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of intervals, seconds (inputs in ns)."""
    if starts.size == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > run_end[:-1]]
    grp = np.cumsum(new) - 1
    gs = s[new]
    ge = np.zeros(gs.size, dtype=np.int64)
    np.maximum.at(ge, grp, e)
    return float((ge - gs).sum()) / NS_PER_S


def _overlap_s(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> float:
    """Total overlap, seconds, between two sets of intervals that are each disjoint (inputs in ns)."""
    if a_s.size == 0 or b_s.size == 0:
        return 0.0
    lo = np.maximum(a_s[:, None], b_s[None, :])
    hi = np.minimum(a_e[:, None], b_e[None, :])
    return float(np.clip(hi - lo, 0, None).sum()) / NS_PER_S


def _meta_value(recs: pd.DataFrame, key: str) -> Any:
    hit = recs.loc[recs["key"] == key, "value"]
    return None if hit.empty else hit.iloc[0]


def mlperf_summary(path: PathLike, *, rank_copy_tolerance_s: float = 10.0) -> dict[str, Any]:
    """Raw interval sums of one MLPerf result log, and the runtime goodput they imply.

    Held time runs from ``init_start`` to ``run_stop``; it is partitioned into startup (the init
    interval), evaluation (eval intervals), productive (training blocks, less any part inside an eval
    interval: evaluation takes precedence) and ``unattributed_s`` (held time in none of them, e.g. the
    gap between ``init_stop`` and the first block).  When a log has no training blocks the epoch
    intervals are used instead (``productive_source`` says which).

    Parameters
    ----------
    path
        The log file.
    rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    dict
        ``held_s, startup_s, run_s, productive_s, evaluation_s, unattributed_s, runtime_goodput
        (= productive / held), blocks, evals, productive_source, benchmark, org, platform, status,
        job_id, file, ledger``.

    Raises
    ------
    InputError
        If the log lacks a matched ``init_start`` or ``run_stop``, or holds more than one run:
        held time is then undefined, and it is not guessed.
    """
    p = parse_mllog(Path(path), job_id=None, rank_copy_tolerance_s=check_nonnegative(
        "rank_copy_tolerance_s", rank_copy_tolerance_s))
    recs = p.records
    ledger = close_books(p.books)
    inits = recs[recs["key"] == "init_start"] if not recs.empty else recs
    stops = recs[recs["key"] == "run_stop"] if not recs.empty else recs
    if len(inits) != 1 or len(stops) != 1:
        # the ledger is not printed when the command refuses: name its first rejections here
        rejected = [e for e in ledger.entries if e.action == "rejected"][:3]
        shown = "; ".join(f"row {e.row}: {e.reason if len(e.reason) <= 100 else e.reason[:97] + '...'}"
                          for e in rejected)
        raise InputError(f"held time needs exactly one kept init_start and one kept run_stop; found "
                         f"{len(inits)} and {len(stops)}"
                         + (f" ({ledger.rejected} row(s) rejected, first: {shown})" if rejected else ""),
                         file=p.file, field="key")
    t0 = int(utc_ns(inits["time"])[0])
    t1 = int(utc_ns(stops["time"])[0])
    if t1 <= t0:
        raise InputError("run_stop is not after init_start", file=p.file, row=int(stops["_row"].iloc[0]),
                         field="time_ms")

    def clipped(family: str) -> tuple[np.ndarray, np.ndarray]:
        df = p.pairs.get(family)
        if df is None or df.empty:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        s, e = np.clip(utc_ns(df["start"]), t0, t1), np.clip(utc_ns(df["end"]), t0, t1)
        keep = e > s
        return s[keep], e[keep]

    held = (t1 - t0) / NS_PER_S
    i_s, i_e = clipped("init")
    e_s, e_e = clipped("eval")
    b_s, b_e = clipped("block")
    source = "block"
    if b_s.size == 0:
        b_s, b_e = clipped("epoch")
        source = "epoch" if b_s.size else "none"
    startup = _interval_measure(i_s, i_e)
    evaluation = _interval_measure(e_s, e_e) - _overlap_s(e_s, e_e, i_s, i_e)
    productive = (_interval_measure(b_s, b_e) - _overlap_s(b_s, b_e, e_s, e_e)
                  - _overlap_s(b_s, b_e, i_s, i_e))
    run = p.pairs.get("run")
    run_s = (float((utc_ns(run["end"]) - utc_ns(run["start"])).sum()) / NS_PER_S if run is not None
             else math.nan)
    status = None
    meta = stops["metadata"].iloc[0]
    if isinstance(meta, dict):
        status = meta.get("status")
    return {
        "file": p.file,
        "job_id": p.job_id,
        "benchmark": _meta_value(recs, "submission_benchmark"),
        "org": _meta_value(recs, "submission_org"),
        "platform": _meta_value(recs, "submission_platform"),
        "status": status,
        "held_s": held,
        "startup_s": startup,
        "run_s": run_s,
        "productive_s": productive,
        "evaluation_s": evaluation,
        "unattributed_s": held - startup - productive - evaluation,
        "runtime_goodput": productive / held,
        "blocks": int(b_s.size),
        "evals": int(e_s.size),
        "productive_source": source,
        "ledger": ledger.to_dict(),
    }


def mlperf_summary_table(paths: PathLike | Sequence[PathLike], *,
                         rank_copy_tolerance_s: float = 10.0) -> pd.DataFrame:
    """One row of :func:`mlperf_summary` per log (ledger reduced to its counts).

    Parameters
    ----------
    paths
        One path, several paths, or a directory (its ``*.txt`` files are read).
    rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    pandas.DataFrame
        Columns as the summary keys, with ``rejected`` and ``flagged`` counts instead of the ledger.
    """
    if isinstance(paths, (str, Path)) and Path(paths).is_dir():
        files = listed_files(paths, (".txt",))
    else:
        files = as_paths(paths)
    rows = []
    for f in files:
        s = mlperf_summary(f, rank_copy_tolerance_s=rank_copy_tolerance_s)
        led = s.pop("ledger")
        s["rejected"] = led["rejected"]
        s["flagged"] = len(led["flags"])
        rows.append(s)
    return pd.DataFrame(rows)


def mlperf_runtime_json(path: PathLike, *, definition: str = "retrospective",
                        rank_copy_tolerance_s: float = 10.0) -> dict[str, Any]:
    """Return the ``fleetlib runtime FILE --format mlperf --json`` object for one MLPerf log.

    Held = ``init_start`` -> ``run_stop``; productive = the training blocks; runtime goodput =
    productive / held; startup and evaluation as in :func:`mlperf_summary`.  A result log records no
    checkpoints, failures or input waits, so those terms are 0 and the committed and retrospective
    definitions coincide.

    Parameters
    ----------
    path
        The log file.
    definition
        ``"committed"`` or ``"retrospective"`` (reported back; both give the same number here).
    rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    dict
        Keys ``runtime_goodput, held_s, productive_s, terms, definition, ledger`` and the step
        statistics of :func:`mlperf_step_statistics` (``step_dialect``, ``steps``,
        ``fault_free_step_s``, ``slow_step_s``, ``stall_s``, ``step_time_s``, ``logged_step_s``; None
        where the log times no steps).  The ledger is the reader's, with the step dialect flagged.
    """
    if definition not in ("committed", "retrospective"):
        raise DomainError(f"definition must be 'committed' or 'retrospective'; got {definition!r}")
    s = mlperf_summary(path, rank_copy_tolerance_s=rank_copy_tolerance_s)
    steps = mlperf_step_statistics(path, rank_copy_tolerance_s=rank_copy_tolerance_s)
    terms = {"progress_at_risk": 0.0, "startup": s["startup_s"], "input_wait": 0.0, "checkpoint": 0.0,
             "recovery": 0.0, "rework": 0.0, "preemption": 0.0, "elastic_wait": 0.0, "elastic_reinit": 0.0,
             "evaluation": s["evaluation_s"], "stall": 0.0,
             "idle": 0.0, "unattributed": s["unattributed_s"]}
    ledger = steps.pop("ledger")
    return {"format": "mlperf", "job_id": s["job_id"], "runtime_goodput": s["runtime_goodput"],
            "held_s": s["held_s"], "productive_s": s["productive_s"], "terms": terms,
            **steps, "definition": definition, "ledger": ledger}


def mlperf_step_statistics(path: PathLike, *, rank_copy_tolerance_s: float = 10.0) -> dict[str, Any]:
    """Measure the step series of one MLPerf log with the runtime rung's estimators.

    The log is read with :func:`fleetlib.runtime.readers.mlperf.read_mlperf_series` (steps that tile
    the training blocks, per the log's step-timing dialect) and measured by
    :func:`fleetlib.runtime.goodput.runtime_goodput` under the retrospective definition (a result log
    records no checkpoint; every step of the run is retained): the fault-free step time (the healthy
    regime's median compute time, :mod:`fleetlib.runtime.slowdown`), the change points of the step
    series, the slow-step time above the baseline (program loss handed to the program rung, inside
    the blocks' productive time) and any stall time.

    Parameters
    ----------
    path
        The log file.
    rank_copy_tolerance_s
        As in :func:`read_mlperf`.

    Returns
    -------
    dict
        ``step_dialect`` (a key of :data:`fleetlib.runtime.readers.mlperf.STEP_DIALECTS`), ``steps``,
        ``fault_free_step_s``, ``slow_step_s``, ``stall_s``, ``step_time_s`` (``mean``, ``p50``,
        ``p90``, ``p99``, ``max`` of the step durations, seconds), ``logged_step_s`` (median and count
        of the step times the log states), ``change_points`` (``{job: [{attempt, step, time, before_s,
        after_s}]}``) and ``ledger`` (the reader's, the dialect flagged in it).  A
        log with no step timing (dialect ``blocks``) has None for the step statistics: its blocks are
        not steps.
    """
    from fleetlib.runtime.goodput import runtime_goodput
    from fleetlib.runtime.readers.mlperf import read_mlperf_series

    tables, ledger, series = read_mlperf_series(path, rank_copy_tolerance_s=rank_copy_tolerance_s)
    out: dict[str, Any] = {"step_dialect": series.dialect, "steps": len(tables.steps),
                           "fault_free_step_s": None, "slow_step_s": None, "stall_s": None,
                           "step_time_s": None, "logged_step_s": None, "change_points": {},
                           "ledger": ledger.to_dict()}
    if series.dialect == "blocks" or tables.steps.empty:
        return out
    m = runtime_goodput(tables.steps, tables.events, definition="retrospective")
    dur = (utc_ns(tables.steps["end"]) - utc_ns(tables.steps["start"])) / NS_PER_S
    q = np.quantile(dur, [0.5, 0.9, 0.99])
    logged = series.logged_step_s
    out.update({
        "fault_free_step_s": next(iter(m.fault_free_step_s.values())),
        "slow_step_s": m.slow_step_s,
        "stall_s": m.categories.get("stall", 0.0),
        "step_time_s": {"mean": float(dur.mean()), "p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2]),
                        "max": float(dur.max())},
        "logged_step_s": {"median": float(np.median(logged)) if logged.size else None,
                          "count": int(logged.size)},
        "change_points": m.change_points_by_job(),
    })
    return out


# ---------------------------------------------------------------------------------------------------
# Text rendering
# ---------------------------------------------------------------------------------------------------


def _share(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:6.2f} %" if whole else "     - "


def _seconds(x: float) -> str:
    return f"{x:,.1f} s" if abs(x) < 36_000 else f"{x:,.0f} s ({x / 3600.0:,.1f} h)"


def _render_ledger(led: Mapping[str, Any]) -> list[str]:
    lines = [f"ledger: {led['read']:,} records read = {led['kept']:,} kept + {led['repaired']:,} repaired + "
             f"{led['rejected']:,} rejected"]
    entries = list(led.get("entries", []))
    for e in entries[:5]:
        where = f"{e['file']}" + (f" row {e['row']}" if e.get("row") is not None else "")
        lines.append(f"  {e['action']}: {where}: {e['reason']}")
    if len(entries) > 5:
        lines.append(f"  ... {len(entries) - 5} more entries (--json lists them all)")
    flags = list(led.get("flags", []))
    for f in flags[:5]:
        lines.append(f"  flag {f['code']}: {f['message']}")
    if len(flags) > 5:
        lines.append(f"  ... {len(flags) - 5} more flags (--json lists them all)")
    return lines


def _render_serving(res: Mapping[str, Any]) -> str:
    held = float(res["held_s"])
    r = res["runtime_goodput"]
    lines = ["runtime goodput R        " + ("-  (no replica held in the window)" if r is None else
                                          f"{r:.4f}  (ready / held, held from placement)"),
             f"{res['replicas']} replica(s); window {res['window'].get('start')} .. "
             f"{res['window'].get('end')}",
             *exclusion_lines(res["window"]),
             f"{'held':<24} {_seconds(held)}",
             "phases (seconds, share of held time):"]
    for phase, v in res["terms"].items():
        lines.append(f"  {phase:<26} {_seconds(float(v)):>22}  {_share(float(v), held)}")
    lines.append(f"  {'unattributed':<26} {_seconds(float(res['unattributed_s'])):>22}  "
                 f"{_share(float(res['unattributed_s']), held)}")
    lines += _render_ledger(res["ledger"])
    return "\n".join(lines)


def render_runtime(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib runtime``'s result as text with units.

    Parameters
    ----------
    res
        The object :func:`run_runtime` returns.

    Returns
    -------
    str
        Runtime goodput, held and productive seconds, each loss term in seconds and as a share of held
        time, the fault-free step time and definition, and the ledger's counts and first entries.
    """
    if res.get("format") == "serving":
        return _render_serving(res)
    held = float(res["held_s"])
    r = res["runtime_goodput"]
    head = "runtime goodput R        " + ("-  (no held time in the window)" if r is None else
                                         f"{r:.4f}  (productive / held, {res['definition']} definition)")
    lines = [head]
    if res.get("checkpoints_recorded") == 0 and res.get("fault_free_step_s") is not None:
        lines.append("no checkpoint recorded: " + (
            "only the clean job end (if any) retains work, counted as the final commit"
            if res.get("clean_end_commit", True) else "nothing is retained under the committed definition"))
    if r is not None and res.get("definition") in DEFINITION_TEXT:
        clean = (CLEAN_END_RULE if res.get("clean_end_commit", True) else
                 "Clean end not counted (--no-clean-end-commit): the last steps count only once a checkpoint "
                 "covers them.")
        definition = res["definition"]
        lines += textwrap.wrap(f"  {definition} definition: {DEFINITION_TEXT[definition]}. {clean}",
                               width=110, subsequent_indent="  ")
    if res.get("format") == "mlperf":
        lines.append(f"MLPerf run {res['job_id']}: held = init_start -> run_stop, productive = training "
                     "blocks")
    elif "window" in res:
        lines.append(f"window                   {res['window']['start']} .. {res['window']['end']}")
        lines += exclusion_lines(res["window"])
    lines += [
        f"{'held':<24} {_seconds(held)}",
        f"{'productive':<24} {_seconds(float(res['productive_s']))}  {_share(res['productive_s'], held)}",
        "loss terms (seconds, share of held time):",
    ]
    # the longest label sets the column; the seconds column shrinks so that the line keeps its width
    width = max(26, *(len(label) for label in _TERM_LABELS.values()))
    # the elastic terms are printed for a job that resizes (the JSON always has them)
    elastic = any(res["terms"].get(k) for k in _ELASTIC_TERMS) or \
        res.get("stepping_slice_efficiency") is not None
    for k, label in _TERM_LABELS.items():
        if k in _ELASTIC_TERMS and not elastic:
            continue
        v = float(res["terms"][k])
        lines.append(f"  {label:<{width}} {_seconds(v):>{max(10, 48 - width)}}  {_share(v, held)}")
    if res.get("stepping_slice_efficiency") is not None:
        lines.append(f"{'slice efficiency':<24} stepping {res['stepping_slice_efficiency']:.3f}, available "
                     f"{res['available_slice_efficiency']:.3f}  (time-weighted devices stepping / held "
                     "over the most held)")
    if res.get("slow_step_s") is not None:
        slow = float(res["slow_step_s"])
        sign = "" if slow >= 0 else "; negative: the retained steps ran faster than it on the whole"
        lines.append(f"{'slow-step time':<24} {_seconds(slow)}  {_share(slow, held)}  (inside productive: "
                     f"retained steps above the fault-free baseline, handed to the program rung{sign})")
    ff = res.get("fault_free_step_s")
    if res.get("format") == "mlperf":
        lines += _render_mlperf_steps(res)
    elif ff is None:
        lines.append("fault-free step time     - (the format has no steps)")
    elif isinstance(ff, Mapping):
        lines.append("fault-free step time     " + ", ".join(
            f"{j}: {'-' if v is None else f'{v:.6g} s'}" for j, v in ff.items()))
    else:
        lines.append(f"fault-free step time     {ff:.6g} s")
    if res.get("format") != "mlperf":
        lines += _render_change_points(res.get("change_points") or {})
    if res.get("queue_after_interruption_s"):
        lines.append(f"queue after interruptions {_seconds(float(res['queue_after_interruption_s']))} "
                     "(not held: a time-to-result cost)")
    if res.get("interruptions"):
        counts = ", ".join(f"{n} {k}" for k, n in res["interruptions"].items())
        lines.append(f"interruptions            {counts}")
    lines += _render_ledger(res["ledger"])
    return "\n".join(lines)


def _render_mlperf_steps(res: Mapping[str, Any]) -> list[str]:
    """Return the step-series lines of an MLPerf log's rendering."""
    dialect = res.get("step_dialect", "blocks")
    if res.get("fault_free_step_s") is None:
        return [f"step series              - (dialect {dialect}: the log times no steps; its "
                f"{res.get('steps', 0)} training blocks are the intervals)",
                "fault-free step time     - (the log has no step series)"]
    st, logged = res["step_time_s"], res["logged_step_s"]
    lines = [f"step series              {res['steps']:,} steps (dialect {dialect})",
             f"fault-free step time     {res['fault_free_step_s']:.6g} s  (median of the healthy regime; "
             + (f"median logged step time {logged['median']:.6g} s over {logged['count']} points)"
                if logged.get("median") is not None else "no step time logged)"),
             f"step time                p50 {st['p50']:.4g} s, p90 {st['p90']:.4g} s, p99 {st['p99']:.4g} s, "
             f"max {st['max']:.4g} s, mean {st['mean']:.4g} s"]
    lines += _render_change_points(res.get("change_points") or {})
    if res.get("stall_s"):
        lines.append(f"{'stalled steps':<24} {_seconds(float(res['stall_s']))}  (steps over the stall bound, "
                     "inside productive here; a runtime loss in the timeline measurement)")
    return lines


def _render_change_points(shifts: Mapping[str, Any]) -> list[str]:
    """Return one line per level shift of a job's step series (none: one line saying so)."""
    named = [(job, c) for job, cs in shifts.items() for c in cs]
    if not named:
        return ["change points            none (every job's step series kept one level)"] if shifts else []
    lines = [f"change points            {len(named)} (level shifts of a job's step series, compute time)"]
    for job, c in named:
        change = c["after_s"] / c["before_s"] - 1.0
        lines.append(f"  {excerpt(str(job))}: step {c['step']} (attempt {c['attempt']}, {c['time']}): "
                     f"{c['before_s']:.6g} s -> {c['after_s']:.6g} s ({change:+.1%})")
    return lines


def render_synth_timeline(res: Mapping[str, Any]) -> str:
    """Render ``fleetlib synth timeline``'s result as text.

    Parameters
    ----------
    res
        The object :func:`run_synth_timeline` returns.

    Returns
    -------
    str
        What was written where, the injected runtime goodput and the command that measures it.
    """
    t = res["truth"]
    held = float(t["held_s"])
    r = t["productive"] / held if held > 0 else math.nan
    lines = [
        f"wrote {res['steps']:,} step rows and {res['events']:,} event rows to {res['path']} "
        f"(seed {res['seed']})",
        f"injected: held {_seconds(held)}, productive {_seconds(t['productive'])} (committed), "
        f"runtime goodput R = {r:.6f}",
        f"  {int(t['n_failures'])} failures, {int(t['n_preemptions'])} preemptions, "
        f"{int(t['n_checkpoints'])} checkpoint commits; --json gives every injected category in seconds",
        f"measure it: fleetlib runtime {res['path']} --format canonical",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------------

#: ``fleetlib synth timeline`` options passed through to :func:`fleetlib.runtime.synth.synth_timeline`:
#: (flag, keyword, type, metavar, help).
_SYNTH_OPTIONS: tuple[tuple[str, str, type, str, str], ...] = (
    ("--step-s", "step_s", float, "S", "fault-free step time, seconds (default 1)"),
    ("--failure-rate-per-h", "failure_rate_per_h", float, "RATE", "failures per running hour (default 0)"),
    ("--preemption-rate-per-h", "preemption_rate_per_h", float, "RATE",
     "preemptions per running hour (default 0)"),
    ("--checkpoint-every-steps", "checkpoint_every_steps", int, "N",
     "steps between checkpoints (default 100)"),
    ("--checkpoint-write-s", "checkpoint_write_s", float, "S",
     "checkpoint begin -> commit, seconds (default 10)"),
    ("--input-wait-prob", "input_wait_prob", float, "P",
     "probability that a step waits for input (default 0)"),
    ("--eval-every-steps", "eval_every_steps", int, "N", "steps between evaluations; 0 for none (default 0)"),
    ("--hang-s", "hang_s", float, "S", "zombie time held at the end, seconds (default 0)"),
)


def _cmd_runtime(args: argparse.Namespace) -> dict[str, Any]:
    from fleetlib.registry import detect  # --format omitted: named from the files' bytes

    fmt = args.format or detect(args.files, "runtime")
    return run_runtime(args.files, fmt, job=args.job, window=args.window, exclude=args.exclude,
                       definition=args.definition,
                       stall_factor=args.stall_factor, clean_end_commit=not args.no_clean_end_commit)


def _cmd_synth_timeline(args: argparse.Namespace) -> dict[str, Any]:
    options = {kw: getattr(args, kw) for _, kw, _, _, _ in _SYNTH_OPTIONS}
    if args.async_checkpoint:
        options["async_checkpoint"] = True
    return run_synth_timeline(args.steps, args.seed, args.out, **options)


def register(subparsers: Any, synth_subparsers: Any,
             add_json: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``fleetlib runtime`` and ``fleetlib synth timeline`` to the command line.

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
        "runtime", help="runtime goodput and its partition of held time from a job timeline",
        description="Read a job timeline and compute runtime goodput R (retained steps' compute time "
                    "over held time) with every held second charged once: progress at risk, startup, "
                    "input wait, checkpoint, recovery, rework, preemption, evaluation, stall, idle, "
                    "unattributed; plus the "
                    "fault-free step time, the definition of productive time and the reader's ledger. "
                    "For an MLPerf result log: held = init_start -> run_stop, productive = the training "
                    "blocks.")
    p.add_argument("files", nargs="+", type=input_path, metavar="FILE",
                   help="input file(s) of one format (canonical: a one-file Parquet timeline, or steps and "
                        "events CSV/Parquet files)")
    p.add_argument("--format", choices=FORMATS,
                   help="input format (default: detected from the files' bytes when only one fits): "
                        + "; ".join(f"{k}: {spec.summary}" for k, spec in READERS.items()))
    p.add_argument("--job", metavar="ID", help="measure only this job (default: every job in the input)")
    p.add_argument("--window", nargs=2, metavar=("START", "END"),
                   help="ISO 8601 times with a zone, e.g. 2024-01-01T00:00Z (default: the whole timeline)")
    add_exclude_argument(p)
    p.add_argument("--definition", choices=DEFINITIONS, default="committed",
                   help="productive steps: retained by a checkpoint (committed, default) or not erased by a "
                        "restart (retrospective)")
    p.add_argument("--stall-factor", type=float, default=5.0, metavar="K",
                   help="stall bound: a retained step whose compute time exceeds K x the fault-free "
                        "step time is a stall, a runtime loss (default 5); below it, slow-step time "
                        "belongs to the program rung")
    p.add_argument("--no-clean-end-commit", action="store_true",
                   help="do not count a clean job end as the final commit (by default a job whose last step "
                        "is followed, with no failure or preemption between, by its last attempt's release, "
                        "a job_completed event or a scheduler COMPLETED state counts that end as its final "
                        "commit: no progress at risk)")
    add_json(p)
    p.set_defaults(func=_cmd_runtime, render=render_runtime)

    p = synth_subparsers.add_parser(
        "timeline", help="a synthetic job timeline with known losses (canonical Parquet)",
        description="Simulate one training job (cold launch, steps, checkpoints, Poisson failures and "
                    "preemptions with restarts to the last commit, input waits, evaluations) and write its "
                    "canonical steps and events to one Parquet file; print the injected partition of held "
                    "time.")
    p.add_argument("--steps", type=int, required=True, metavar="N", help="steps the job must retain")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--out", type=Path, required=True, metavar="FILE.parquet", help="output file")
    for flag, kw, typ, metavar, text in _SYNTH_OPTIONS:
        p.add_argument(flag, dest=kw, type=typ, metavar=metavar, help=text)
    p.add_argument("--async-checkpoint", action="store_true",
                   help="asynchronous periodic checkpoints (a short staging pause; the write continues)")
    add_json(p)
    p.set_defaults(func=_cmd_synth_timeline, render=render_synth_timeline)
