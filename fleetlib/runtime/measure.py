"""Measure runtime goodput from files or tables: the rung's one entry point, ``measure(...)``.

:func:`measure` reads the input with the format's reader (:data:`fleetlib.runtime.readers.READERS`),
measures it (:func:`fleetlib.runtime.goodput.runtime_goodput` for a job timeline,
:func:`fleetlib.runtime.goodput.replica_runtime_goodput` for serving replicas) and returns the
result, which always answers to the same calls: ``.factor()`` (the runtime
:class:`~fleetlib.accounting.Factor`), ``.ledger`` (every input record accounted for, with the
measurement's flags), ``.window`` and ``.to_dict()``.  ``fleetlib runtime`` measures through it.

Examples
--------
>>> from fleetlib.runtime import measure
>>> m = measure("data/timelines/maxtext-llama3-8b-demo_timeline.jsonl")  # doctest: +SKIP
>>> m.factor().value, m.ledger.read  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fleetlib._io import as_paths
from fleetlib.accounting import Window
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.runtime.goodput import (
    ReplicaGoodput,
    RuntimeMeasurement,
    replica_runtime_goodput,
    runtime_goodput,
)
from fleetlib.runtime.readers import READERS, TimelineTables
from fleetlib.runtime.schema import check_definition

__all__ = ["guess_format", "measure", "warm_up"]

#: Formats :func:`guess_format` infers from a file name (under any ``.gz``), for ``format=None``.
_FORMAT_BY_SUFFIX: dict[str, str] = {
    ".jsonl": "mlgoodput", ".txt": "mlperf", ".log": "mlperf",
    ".csv": "canonical", ".parquet": "canonical", ".pq": "canonical",
}


def guess_format(paths: Sequence[Path]) -> str:
    """Return the format of ``paths`` from their suffixes (all must agree).

    Parameters
    ----------
    paths
        Input files; ``.jsonl`` is ``mlgoodput``, ``.txt``/``.log`` ``mlperf``, ``.csv``/``.parquet``
        ``canonical`` (a ``.gz`` on top is looked through).  BLOOM tables and serving logs are CSV too:
        name their format.

    Returns
    -------
    str
        A key of :data:`~fleetlib.runtime.readers.READERS`.

    Raises
    ------
    DomainError
        A suffix with no format, or files of different formats.
    """
    found = set()
    for p in paths:
        name = p.name[:-3] if p.name.lower().endswith(".gz") else p.name
        fmt = _FORMAT_BY_SUFFIX.get(Path(name).suffix.lower())
        if fmt is None:
            raise DomainError(f"cannot tell the format of {str(p)!r} from its name; pass format= (one of "
                              f"{sorted(READERS)})")
        found.add(fmt)
    if len(found) != 1:
        raise DomainError(f"the files are of different formats {sorted(found)}; measure them one format at a "
                          "time")
    return found.pop()


def _with_reader_ledger(m: RuntimeMeasurement, reader: Ledger) -> RuntimeMeasurement:
    """Return ``m`` with the reader's ledger as its ledger (plus the measurement's new flags)."""
    merged = Ledger()
    merged.extend(reader)
    merged.flags.extend(f for f in m.ledger.flags if f not in reader.flags)
    return dataclasses.replace(m, ledger=merged, table_ledger=m.ledger)


def _as_tables(value: Any) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Return ``(steps, events)`` when ``value`` is tables rather than paths."""
    if isinstance(value, TimelineTables):
        return value.steps, value.events
    if isinstance(value, Mapping) and "steps" in value and "events" in value:
        return value["steps"], value["events"]
    if (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, pd.DataFrame) for v in value)):
        return value[0], value[1]
    return None


def measure(paths_or_tables: Any, *, format: str | None = None, tz: str | None = None, window: Any = None,
            exclude: Any = None, definition: str = "committed", job_id: str | None = None,
            fault_free_step_s: float | Mapping[str, float] | None = None, estimator: str = "median",
            warmup_tolerance: float = 0.1, as_of: Any = None, stall_factor: float = 5.0,
            clean_end_commit: bool = True, **format_options: Any) -> RuntimeMeasurement | ReplicaGoodput:
    """Read (if need be) and measure runtime goodput; return the rung's one result shape.

    Parameters
    ----------
    paths_or_tables
        One path or several (read with ``format``'s reader, plain or gzip); or the canonical tables
        already read: a :class:`~fleetlib.runtime.readers.TimelineTables`, a ``{"steps", "events"}``
        mapping or a ``(steps, events)`` pair.  A Parquet file in the one-file layout of
        :func:`fleetlib.runtime.synth.write_timeline` is a canonical file like any other.
    format
        A key of :data:`~fleetlib.runtime.readers.READERS` (``mlperf``, ``mlgoodput``, ``canonical``,
        ``bloom``, ``serving``, ``torchtitan``); None: from the file names (:func:`guess_format`; a
        torchtitan ``.jsonl`` must be named).  Not used for tables.
    tz
        Zone of naive times, for the formats that write them.
    window
        Anything :meth:`fleetlib.accounting.Window.parse` takes; None for the whole timeline.
    exclude
        Stretches of the window left out of held time and every part of it (see
        :meth:`fleetlib.accounting.Window.excluding`); they need a window.  The ledger gets an
        ``excluded_time`` flag saying what was left out.
    definition
        ``"committed"`` (default) or ``"retrospective"`` productive time (not used for serving).
    job_id
        Measure only this job (timelines; for ``mlperf``/``mlgoodput`` it names the job of one file).
    fault_free_step_s, estimator, warmup_tolerance, as_of, stall_factor, clean_end_commit
        As in :func:`fleetlib.runtime.goodput.runtime_goodput`.
    **format_options
        Passed to the reader (``rank_copy_tolerance_s`` for MLPerf, ``end`` for serving logs).

    Notes
    -----
    An MLPerf log measured here is a job timeline (its steps are the training blocks cut by the
    log's step timing, :data:`fleetlib.runtime.readers.mlperf.STEP_DIALECTS`, or the blocks
    themselves when it times no steps; under the committed definition nothing is retained: a result
    log records no checkpoint).  ``fleetlib runtime --format mlperf`` prints the log's raw interval sums
    instead (:func:`fleetlib.runtime.commands.mlperf_runtime_json`: productive = the blocks' total
    length), the figure MLPerf itself reports.

    Returns
    -------
    RuntimeMeasurement or ReplicaGoodput
        Either answers to ``.factor()``, ``.ledger``, ``.window`` and ``.to_dict()``.  Read from files,
        ``.ledger`` accounts for every input record and carries the measurement's flags too (a timeline
        measurement's ``.table_ledger`` keeps its own count of the canonical rows it validated).

    Raises
    ------
    DomainError
        An unknown format or definition, a malformed window.
    InputError
        A file that cannot be read as the format, or input with no record of it.
    """
    check_definition(definition)
    window = Window.parse(window, exclude=exclude)
    tables = _as_tables(paths_or_tables)
    if tables is not None:
        return runtime_goodput(tables[0], tables[1], window=window, definition=definition,
                               fault_free_step_s=fault_free_step_s, job_id=job_id,
                               estimator=estimator, warmup_tolerance=warmup_tolerance,
                               stall_factor=stall_factor, clean_end_commit=clean_end_commit, as_of=as_of)
    files = as_paths(paths_or_tables)
    fmt = guess_format(files) if format is None else format
    if fmt not in READERS:
        raise DomainError(f"format must be one of {sorted(READERS)}; got {fmt!r}")
    source = ", ".join(str(p) for p in files)
    options = dict(format_options)
    if fmt == "serving":
        if job_id is not None:
            raise DomainError("job_id selects a training job; a serving log holds replicas (measure the "
                              "whole log)")
        read, ledger = READERS[fmt].read(files, tz=tz, window=window, **options)
        result = replica_runtime_goodput(read["phases"], window=window)
        note = result.window.exclusion_note()
        if note is not None:
            ledger.flag("excluded_time", note)
        return dataclasses.replace(result, ledger=ledger)
    read, ledger = READERS[fmt].read(files, tz=tz, window=window, **options)
    steps, events = read["steps"], read["events"]
    if steps.empty and events.empty:
        first = next((e for e in ledger.entries if e.action == "rejected"), None)
        why = "" if first is None else f"; the first rejected: row {first.row}: {first.reason}"
        raise InputError(f"no {fmt} record could be read (rows read {ledger.read}, rejected "
                         f"{ledger.rejected}){why}", file=str(files[0] if first is None else first.file))
    m = runtime_goodput(steps, events, window=window, definition=definition,
                        fault_free_step_s=fault_free_step_s, job_id=job_id, estimator=estimator,
                        warmup_tolerance=warmup_tolerance, stall_factor=stall_factor,
                        clean_end_commit=clean_end_commit, as_of=as_of, source=source)
    return _with_reader_ledger(m, ledger)


def warm_up() -> None:
    """Load the compiled per-job kernel (compile it and cache it on disk the first time).

    The kernel (:mod:`fleetlib.runtime.partition`) is compiled by numba on its first call in a fresh
    checkout and then loaded from numba's cache beside the module.  One tiny measurement here makes
    that first call: ``make setup`` runs it once, so that no report or measurement pays the compile,
    and the fleet walk's Dask workers run it before their first task.
    """
    from fleetlib.runtime.timeline import tables_from_seconds

    steps, events = tables_from_seconds([(0, 0, 1.0, 2.0)], [(0, 0.0, "gang_complete"), (0, 3.0, "release")])
    runtime_goodput(steps, events)
