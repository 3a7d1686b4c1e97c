"""Rung 1: scheduler records -> scheduling goodput S and its loss partition.

* :mod:`fleetlib.scheduling.records` -- the canonical tables (allocations, capacity, queue,
  reservations, occupancy) and their validation into a row ledger;
* :mod:`fleetlib.scheduling.readers` -- one module per scheduler format and the ``READERS``
  registry (``read_records`` dispatches through it, detecting the format from the bytes when it is
  not named; every ``read_<format>`` is exported here too);
* :mod:`fleetlib.scheduling.goodput` -- the vectorised sweep: S as an exact partition of in-service
  capacity-time (partial-gang hold, reservation, idle with / without a queue, per pool and across
  pools, unattributed) and availability;
* :mod:`fleetlib.scheduling.measure` -- ``measure(records_or_paths, ...)``: S with its partition,
  ledger and window (the CLI's object);
* :mod:`fleetlib.scheduling.views` -- derived tables: held time and queue wait per job, size
  cohorts, an hourly time series, the fragmentation index and the stretches in which the whole
  fleet reports nothing;
* :mod:`fleetlib.scheduling.synth` -- synthetic fleets with injected ground truth, and the
  canonical Parquet file;
* :mod:`fleetlib.scheduling.snapshot` -- the snapshot arithmetic (S from the shares of a pool
  snapshot, the atomic-admission ceiling).
"""

from fleetlib.scheduling.goodput import (
    SchedulingPartition,
    scheduling_goodput,
    scheduling_partition,
    scheduling_summary,
)
from fleetlib.scheduling.measure import SchedulingMeasurement, measure
from fleetlib.scheduling.readers import (
    FORMATS,
    READERS,
    openb_cohorts,
    read_helios,
    read_kueue,
    read_openb,
    read_pai,
    read_philly,
    read_records,
    read_slurm,
    read_volcano,
)
from fleetlib.scheduling.records import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    END_STATES,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    RESERVATION_COLUMNS,
    SchedulerRecords,
    infer_gang_complete,
    validate_allocations,
    validate_capacity,
    validate_occupancy,
    validate_queue,
    validate_reservations,
)
from fleetlib.scheduling.schema import LOSS_KEYS, PARTITION_COLUMNS
from fleetlib.scheduling.snapshot import (
    SnapshotScheduling,
    data_stall_from_capacity_share,
    snapshot_scheduling_goodput,
)
from fleetlib.scheduling.synth import (
    SyntheticFleet,
    read_canonical,
    synth_allocations_command,
    synthetic_fleet,
    write_allocations,
)
from fleetlib.scheduling.views import (
    cohort_goodput,
    derive_queue,
    fragmentation_index,
    goodput_timeseries,
    held_time,
    occupancy,
    queue_waits,
    silent_stretches,
    stranded_devices,
)

__all__ = [
    "ALLOCATION_COLUMNS",
    "CAPACITY_COLUMNS",
    "END_STATES",
    "FORMATS",
    "LOSS_KEYS",
    "OCCUPANCY_COLUMNS",
    "PARTITION_COLUMNS",
    "QUEUE_COLUMNS",
    "READERS",
    "RESERVATION_COLUMNS",
    "SchedulerRecords",
    "SchedulingMeasurement",
    "SchedulingPartition",
    "SnapshotScheduling",
    "SyntheticFleet",
    "cohort_goodput",
    "data_stall_from_capacity_share",
    "derive_queue",
    "fragmentation_index",
    "goodput_timeseries",
    "held_time",
    "infer_gang_complete",
    "measure",
    "occupancy",
    "openb_cohorts",
    "queue_waits",
    "read_canonical",
    "read_helios",
    "read_kueue",
    "read_openb",
    "read_pai",
    "read_philly",
    "read_records",
    "read_slurm",
    "read_volcano",
    "scheduling_goodput",
    "scheduling_partition",
    "scheduling_summary",
    "silent_stretches",
    "snapshot_scheduling_goodput",
    "stranded_devices",
    "synth_allocations_command",
    "synthetic_fleet",
    "validate_allocations",
    "validate_capacity",
    "validate_occupancy",
    "validate_queue",
    "validate_reservations",
    "write_allocations",
]
