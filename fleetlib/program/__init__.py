"""Rung 3: step traces -> program goodput; analytical FLOP, bandwidth and roofline relations.

``read_trace`` / ``read_traces`` (Kineto Chrome-trace JSON -> kernel table + ledger) live in
:mod:`fleetlib.program.traces`; the per-step partition in :mod:`fleetlib.program.breakdown`;
collective matching and stragglers in :mod:`fleetlib.program.collectives`; MFU/MBU in
:mod:`fleetlib.program.flops`.  They are imported lazily so that ``import fleetlib.program`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_trace", "read_traces"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from fleetlib.program import traces

        return getattr(traces, name)
    raise AttributeError(f"module 'fleetlib.program' has no attribute {name!r}")
