"""Rung 1: scheduler records -> scheduling goodput S and its loss partition.

The rung's door: everything code outside ``fleetlib/scheduling/`` uses is named here.

* :func:`read` -- scheduler records of one format (named, or detected from the files' bytes) through
  :data:`READERS` (one :class:`~fleetlib.registry.ReaderSpec` per format) -> the tables
  (:class:`SchedulerRecords`) and a row ledger;
* :func:`measure` -> :class:`SchedulingMeasurement`: S with its exact partition of in-service
  capacity-time (:class:`SchedulingPartition`: partial-gang hold, reservation, idle with / without a
  queue, per pool and across pools, unattributed), the ledger and the window;
  :func:`scheduling_partition`, :func:`scheduling_goodput` and :func:`scheduling_summary` compute
  it from tables;
* the views (:mod:`fleetlib.scheduling.views`): held time and queue wait per job, size cohorts, the
  occupancy step function, an hourly time series, the fragmentation index, silent stretches and
  the openb waits by cohort;
* the canonical tables (:mod:`fleetlib.scheduling.schema` names their columns;
  :mod:`fleetlib.scheduling.records` validates them into a ledger), synthetic fleets with injected
  ground truth and the canonical Parquet file (:mod:`fleetlib.scheduling.synth`), and the snapshot
  arithmetic (:mod:`fleetlib.scheduling.snapshot`).
"""

from fleetlib.scheduling.goodput import (
    SchedulingPartition,
    scheduling_goodput,
    scheduling_partition,
    scheduling_summary,
)
from fleetlib.scheduling.measure import (
    COLLECTION_GAP_S,
    SchedulingMeasurement,
    collection_gap_note,
    collection_gap_records,
    collection_gaps,
    measure,
    unobserved_losses,
)
from fleetlib.scheduling.readers import READERS, read
from fleetlib.scheduling.records import (
    WINDOW_SLACK,
    SchedulerRecords,
    check_window_within_records,
    infer_gang_complete,
    validate_allocations,
    validate_capacity,
    validate_occupancy,
    validate_queue,
    validate_reservations,
)
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    END_STATES,
    INSTALLED_COLUMNS,
    LOSS_KEYS,
    OCCUPANCY_COLUMNS,
    PARTITION_COLUMNS,
    QUEUE_COLUMNS,
    RESERVATION_COLUMNS,
    TABLE_COLUMNS,
    UNOBSERVABLE_LOSSES,
    WAIT_COLUMNS,
)
from fleetlib.scheduling.snapshot import (
    CEILING_CONDITION,
    SnapshotScheduling,
    data_stall_from_capacity_share,
    snapshot_scheduling_goodput,
)
from fleetlib.scheduling.synth import (
    SyntheticFleet,
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
    openb_cohorts,
    queue_waits,
    silent_stretches,
    status_mix,
    stranded_devices,
)

__all__ = [
    "ALLOCATION_COLUMNS",
    "CAPACITY_COLUMNS",
    "CEILING_CONDITION",
    "COLLECTION_GAP_S",
    "END_STATES",
    "INSTALLED_COLUMNS",
    "LOSS_KEYS",
    "OCCUPANCY_COLUMNS",
    "PARTITION_COLUMNS",
    "QUEUE_COLUMNS",
    "READERS",
    "RESERVATION_COLUMNS",
    "TABLE_COLUMNS",
    "UNOBSERVABLE_LOSSES",
    "WAIT_COLUMNS",
    "WINDOW_SLACK",
    "SchedulerRecords",
    "SchedulingMeasurement",
    "SchedulingPartition",
    "SnapshotScheduling",
    "SyntheticFleet",
    "check_window_within_records",
    "cohort_goodput",
    "collection_gap_note",
    "collection_gap_records",
    "collection_gaps",
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
    "read",
    "scheduling_goodput",
    "scheduling_partition",
    "scheduling_summary",
    "silent_stretches",
    "snapshot_scheduling_goodput",
    "status_mix",
    "stranded_devices",
    "synth_allocations_command",
    "synthetic_fleet",
    "unobserved_losses",
    "validate_allocations",
    "validate_capacity",
    "validate_occupancy",
    "validate_queue",
    "validate_reservations",
    "write_allocations",
]
