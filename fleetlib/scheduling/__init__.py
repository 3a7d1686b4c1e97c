"""Rung 1: scheduler records -> scheduling goodput S and its loss partition.

For now this package holds only the snapshot arithmetic (:mod:`fleetlib.scheduling.snapshot`): scheduling
goodput from the shares of a pool snapshot, the loss split, and the atomic-admission ceiling.  The
records-based rung (canonical tables, readers, measured factor) grows alongside it.
"""

from fleetlib.scheduling.snapshot import (
    SnapshotScheduling,
    data_stall_from_capacity_share,
    snapshot_scheduling_goodput,
)

__all__ = [
    "SnapshotScheduling",
    "data_stall_from_capacity_share",
    "snapshot_scheduling_goodput",
]
