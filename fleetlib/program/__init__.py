"""Rung 3: step traces -> program goodput; analytical FLOP, bandwidth and roofline relations.

``read_trace`` / ``read_traces`` (Kineto Chrome-trace JSON -> kernel table + ledger) live in
:mod:`fleetlib.program.traces`; the per-step partition in :mod:`fleetlib.program.breakdown`;
collective matching and stragglers in :mod:`fleetlib.program.collectives`; MFU/MBU in
:mod:`fleetlib.program.flops`; roofline placement in :mod:`fleetlib.program.roofline`; fleet-scale
stragglers from per-rank step timers (pandas or Dask) in :mod:`fleetlib.program.stragglers`.  They are
imported lazily so that ``import fleetlib.program`` stays cheap (Dask in particular).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["read_trace", "read_traces", "straggler_analysis"]

_HOME = {"read_trace": "traces", "read_traces": "traces", "straggler_analysis": "stragglers"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"fleetlib.program.{_HOME[name]}"), name)
    raise AttributeError(f"module 'fleetlib.program' has no attribute {name!r}")
