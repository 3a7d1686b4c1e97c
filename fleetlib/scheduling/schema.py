"""The scheduling rung's schema: table columns, dtypes, end states, loss keys and their labels.

Constants and validators only -- no reading, no measuring.  Readers, validation
(:mod:`fleetlib.scheduling.records`), the partition (:mod:`fleetlib.scheduling.goodput`), the views,
the generators and the command line all take their names from here, so a column or a loss category
is spelled once.  The meaning of each table and column is documented in
:mod:`fleetlib.scheduling.records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import pandas as pd

from fleetlib.quality import InputError

__all__ = [
    "ALLOCATION_COLUMNS",
    "ALLOCATION_DTYPES",
    "ALLOCATION_TIME_COLUMNS",
    "CANONICAL_FORMAT",
    "CANONICAL_TABLES",
    "CAPACITY_COLUMNS",
    "DEFAULT_COHORT_EDGES",
    "DENOMINATORS",
    "END_STATES",
    "INSTALLED_COLUMNS",
    "LOSS_KEYS",
    "LOSS_LABELS",
    "OCCUPANCY_COLUMNS",
    "PARTITION_COLUMNS",
    "PENDING",
    "QUEUE_COLUMNS",
    "RESERVATION_COLUMNS",
    "SILENT_CHANNELS",
    "TABLE_COLUMNS",
    "TIME_DTYPE",
    "UNOBSERVABLE_LOSSES",
    "WAIT_COLUMNS",
    "Denominator",
    "IdleView",
    "require_columns",
]

# ---------------------------------------------------------------------------------------------------
# Canonical tables
# ---------------------------------------------------------------------------------------------------

#: Columns of the allocations table (one row per allocation attempt, or per elastic size segment).
ALLOCATION_COLUMNS: tuple[str, ...] = (
    "job_id", "attempt", "pool", "devices", "submit", "first_assigned", "gang_complete", "release",
    "priority", "elastic", "end_state", "requested_devices",
)
#: The time columns of the allocations table, in the order they must hold.
ALLOCATION_TIME_COLUMNS: tuple[str, ...] = ("submit", "first_assigned", "gang_complete", "release")
#: Capacity step function per pool.
CAPACITY_COLUMNS: tuple[str, ...] = ("pool", "start", "end", "devices_in_service", "devices_out_of_service")
#: Queue step function per pool.
QUEUE_COLUMNS: tuple[str, ...] = ("pool", "start", "end", "pending_jobs", "pending_devices")
#: Devices kept idle for a waiting gang.
RESERVATION_COLUMNS: tuple[str, ...] = ("pool", "start", "end", "devices", "for_job_id")
#: The step function the sweep produces and aggregate formats (Helios) give directly.
OCCUPANCY_COLUMNS: tuple[str, ...] = (
    "pool", "start", "end", "in_service", "out_of_service", "held_complete", "partial_gang", "reserved",
    "pending_jobs", "pending_devices",
)
#: Every canonical table by name.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "allocations": ALLOCATION_COLUMNS, "capacity": CAPACITY_COLUMNS, "queue": QUEUE_COLUMNS,
    "reservations": RESERVATION_COLUMNS, "occupancy": OCCUPANCY_COLUMNS,
}

#: Name written in the ``fleetlib`` metadata of a canonical Parquet file.
CANONICAL_FORMAT = "fleetlib canonical scheduler records"
#: The tables of a canonical Parquet file, in the order they are written.
CANONICAL_TABLES: tuple[str, ...] = ("allocations", "capacity", "reservations", "queue")

#: The dtype of every time column: timezone-aware UTC nanoseconds.
TIME_DTYPE = "datetime64[ns, UTC]"
#: Dtypes of the allocations table's non-time columns, as readers emit it.
ALLOCATION_DTYPES: dict[str, object] = {
    "job_id": object, "attempt": "int64", "pool": object, "devices": "int64", "priority": "float64",
    "elastic": bool, "end_state": object, "requested_devices": "int64",
}

#: Canonical end states of an allocation; anything else is kept as ``"unknown"``.  ``"running"``
#: and ``"pending"`` mark rows censored at the end of the record (still holding, still waiting).
END_STATES: tuple[str, ...] = (
    "completed", "failed", "cancelled", "timeout", "preempted", "node_fail", "out_of_memory",
    "running", "pending", "unknown",
)
#: End state of a job that was still waiting for devices at the end of the record.
PENDING = "pending"

#: Columns of the openb waits table (one row per pod; times are seconds from the trace start).
WAIT_COLUMNS: tuple[str, ...] = (
    "pod", "pod_phase", "qos", "num_gpu", "gpu_milli", "devices", "cohort", "creation_s", "scheduled_s",
    "deletion_s", "wait_s", "scheduled",
)
#: Columns of the installed-capacity table (openb node list: no times, one row per GPU model).
INSTALLED_COLUMNS: tuple[str, ...] = ("model", "nodes", "devices")

# ---------------------------------------------------------------------------------------------------
# The partition: loss keys in report order, their labels, denominators
# ---------------------------------------------------------------------------------------------------

#: Loss keys of the scheduling partition, in the order a report shows them (the term order).
LOSS_KEYS: tuple[str, ...] = ("partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue",
                              "unattributed")
#: How each loss (and the installed denominator's ``out_of_service``) is labelled in text and plots.
LOSS_LABELS: dict[str, str] = {
    "partial_gang_hold": "partial-gang hold",
    "reservation": "reservation for a waiting gang",
    "idle_with_queue": "idle while jobs queued (policy)",
    "idle_empty_queue": "idle, queue empty (demand)",
    "unattributed": "unattributed",
    "out_of_service": "out of service",
}
#: The scheduling losses a record format cannot observe, and why: the docs' capability table.  Their
#: time is not lost from the partition (it lies inside another term: a partial gang's hold inside held
#: time or idle, a reservation inside the idle losses) but the format cannot tell it apart, so the loss
#: is reported as ``null`` with the reason, never as a measured 0.  Besides these, every format
#: without a ``reservations`` table (or an occupancy table's ``reserved`` channel) cannot observe
#: ``reservation`` (:func:`fleetlib.scheduling.measure.unobserved_losses`).
UNOBSERVABLE_LOSSES: dict[str, dict[str, str]] = {
    "slurm": {
        "partial_gang_hold": "sacct's Start is both the first device assignment and gang completion "
                             "(Slurm allocates atomically), so no partial gang is ever recorded",
    },
    "helios-sequence": {
        "partial_gang_hold": "the minute sequences count the GPUs of running jobs only",
        "reservation": "the minute sequences carry no devices kept idle for a waiting job",
    },
    "helios-joblog": {
        "partial_gang_hold": "a job's start_time is its only assignment time (Slurm allocates atomically)",
    },
    "acme": {
        "partial_gang_hold": "a job's start_time is its only assignment time",
    },
    "philly": {
        "partial_gang_hold": "an attempt's start_time is its only assignment time (a multi-server "
                             "attempt's gang completion is inferred at it)",
    },
}
#: Columns of the partition table (device-seconds, one row per pool).
PARTITION_COLUMNS: tuple[str, ...] = (
    "capacity_device_s", "installed_device_s", "out_of_service_device_s", "held_device_s",
    "partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue", "unattributed",
    "cross_pool_idle_with_queue", "cross_pool_idle_empty_queue", "over_allocated_device_s",
)
#: Denominators: in-service capacity (the accounting's) or installed capacity.
DENOMINATORS: tuple[str, ...] = ("in_service", "installed")
Denominator = Literal["in_service", "installed"]
#: Idle views: per pool, or across pools (what quota lending could recover).
IdleView = Literal["pool", "cross_pool"]

#: Upper bounds (devices, inclusive) of the default job-size cohorts: 1, 2-8, 9-64, 65-512, >512.
DEFAULT_COHORT_EDGES: tuple[int, ...] = (1, 8, 64, 512)
#: Occupancy channels that are all zero in a silent stretch (every pool reports nothing).
SILENT_CHANNELS: tuple[str, ...] = ("held_complete", "partial_gang", "reserved", "pending_jobs")

# ---------------------------------------------------------------------------------------------------
# Validators
# ---------------------------------------------------------------------------------------------------


def require_columns(df: pd.DataFrame, columns: Sequence[str], file: str, table: str) -> None:
    """Raise :class:`~fleetlib.quality.InputError` unless ``df`` is a DataFrame with ``columns``.

    Parameters
    ----------
    df
        The table handed in.
    columns
        The canonical columns it must carry.
    file, table
        Where it came from and which table it is, for the message.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"the {table} table must be a pandas DataFrame; got {type(df).__name__}", file=file)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"the {table} table lacks column(s) {missing}; canonical columns are "
                         f"{list(columns)}", file=file, field=missing[0])
