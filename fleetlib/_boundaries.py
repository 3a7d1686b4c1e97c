"""The three boundaries and the tolerances shared by the accounting modules (no imports of them)."""

from __future__ import annotations

from typing import Literal

Boundary = Literal["scheduling", "runtime", "program"]

#: The three boundaries in the chronological order a job meets them (equation 2's order).
BOUNDARIES: tuple[Boundary, ...] = ("scheduling", "runtime", "program")

#: The record that settles each factor (Table 3 of the chapter).
DEFAULT_RECORD: dict[str, str] = {
    "scheduling": "scheduler records",
    "runtime": "job timeline",
    "program": "step traces",
}

#: Relative tolerance used when checking that a loss partition sums to its gap.
PARTITION_RTOL = 1e-9
