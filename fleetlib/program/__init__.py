"""Rung 3: step traces -> program goodput; analytical FLOP, bandwidth and roofline relations.

:func:`measure` (:mod:`fleetlib.program.measure`) is the rung's one result: traces (and a model
configuration) in, a :class:`~fleetlib.program.measure.ProgramMeasurement` with ``.factor()``,
``.ledger``, ``.window`` and the per-rank per-step partition out.  The readers are in
:mod:`fleetlib.program.readers` (``kineto``: Chrome-trace JSON -> kernel table + ledger, with
``read_trace`` / ``read_traces``; ``rank_timers``: per-rank step timers), their tables' columns in
:mod:`fleetlib.program.schema`; the per-step partition in :mod:`fleetlib.program.breakdown`;
collective matching and stragglers in :mod:`fleetlib.program.collectives`; MFU/MBU in
:mod:`fleetlib.program.flops`; roofline placement in :mod:`fleetlib.program.roofline`; fleet-scale
stragglers from per-rank step timers (pandas or Dask) in :mod:`fleetlib.program.stragglers`.  The
readers and analyses are imported lazily so that ``import fleetlib.program`` stays cheap (Dask in
particular).
"""

from __future__ import annotations

import importlib
from typing import Any

from fleetlib.program.measure import ProgramMeasurement, measure

__all__ = ["READERS", "ProgramMeasurement", "load_model_config", "measure", "read_records", "read_trace",
           "read_traces", "straggler_analysis", "trace_files", "traced_step_partition"]

_HOME = {"read_trace": "readers.kineto", "read_traces": "readers.kineto", "straggler_analysis": "stragglers",
         "READERS": "readers", "trace_files": "readers.kineto", "traced_step_partition": "collectives",
         "load_model_config": "model_config"}


def read_records(paths: Any, format: str | None = None, *, tz: str | None = None, window: object = None,
                 **options: Any) -> tuple[dict[str, Any], Any]:
    """Read step-trace files into the program rung's canonical tables and a ledger.

    Parameters
    ----------
    paths
        The input files of one format (for ``kineto``: one trace file per rank).
    format
        A key of :data:`fleetlib.program.readers.READERS` (``kineto``, ``rank_timers``); None:
        detected from the files' bytes (:func:`fleetlib.registry.detect`).
    tz, window, **options
        Passed to the format's reader.

    Returns
    -------
    tuple of (dict, Ledger)
        The canonical tables by name (``kernels``, ``steps``, ... or ``rank_timers``) and the ledger.
    """
    from fleetlib.registry import read_tables

    tables, ledger = read_tables("program", paths, format, tz=tz, window=window, **options)
    return dict(tables), ledger


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"fleetlib.program.{_HOME[name]}"), name)
    raise AttributeError(f"module 'fleetlib.program' has no attribute {name!r}")
