"""Readers: job timelines from real formats into the canonical steps and events tables.

The canonical tables, their columns, dtypes and event kinds are defined in
:mod:`fleetlib.runtime.timeline` (``STEP_COLUMNS``, ``EVENT_COLUMNS``, ``EVENT_KINDS``); this
module turns files into them.  Every reader returns the tables together with a
:class:`fleetlib.runtime.timeline.TimelineLedger` that accounts for every input record:
``read == kept + repaired + rejected``.  A rejected record names its file, its row or line, the field
and the reason; a repaired one names the repair.  Records that are kept but deserve a second look are
*flagged* (``ledger.flags``: a code such as ``unknown_event_kind``, ``restore_uncommitted``,
``failure_without_restart``, ``restart_inferred_from_step_numbers``, ``failure_time_inferred``,
``asynchronous_commit``; the message starts with ``<file> row <n>:``).  A flag is a note beside a
kept record and does not change the counts.  Input no repair can make sense of raises
:class:`fleetlib.quality.InputError` naming file, row, field and expectation.

What the readers hand over: times are ``datetime64[ns, UTC]``; ``steps`` holds finished steps only
(``end > start``, ``0 <= input_wait_s <= end - start``, no two steps of one job overlapping); a step
number may appear again after a restart; ``events`` are sorted by job and time (simultaneous events
in a natural order: an interval's end before the next one's begin, ``release`` last).  Besides the
canonical kinds, readers emit a few documented auxiliary kinds (:data:`AUXILIARY_EVENT_KINDS`, and
``custom_badput:<type>`` / ``elastic_wait:<type>``) for phases the partition does not need; any
other kind is kept and flagged.

Readers (one module per format)
-------------------------------
* :func:`read_mlperf` -- MLPerf ``:::MLLOG`` result logs.  The raw interval sums of one log
  (held = ``init_start`` -> ``run_stop``, startup = init, productive = training blocks,
  evaluation = evals) are command output: :func:`fleetlib.runtime.commands.mlperf_summary`,
  re-exported here.
* :func:`read_mlgoodput` -- ml-goodput-measurement ``<job>_timeline.jsonl`` cache entries.
* :func:`read_canonical` -- the canonical columns (with documented aliases) as CSV or Parquet.
* :func:`read_bloom_events` -- the hand-transcribed BLOOM-176B event table in ``data/timelines``.
* :func:`read_replica_lifecycle` and :func:`replica_runtime_goodput` -- a serving replica's
  lifecycle log (placed -> loading -> warmup -> ready -> draining -> released).

Row numbers are counted as each format counts them: a CSV row is its line number (the header is
line 1), a Parquet row is its index + 1, a JSON-lines or log record is its line number.
"""

from __future__ import annotations

from fleetlib.runtime.readers._common import PathLike, TimelineTables, bundled_path
from fleetlib.runtime.readers.bloom import read_bloom_events
from fleetlib.runtime.readers.canonical import read_canonical, write_canonical
from fleetlib.runtime.readers.mlgoodput import read_mlgoodput
from fleetlib.runtime.readers.mlperf import read_mlperf
from fleetlib.runtime.readers.serving import ReplicaGoodput, read_replica_lifecycle, replica_runtime_goodput
from fleetlib.runtime.schema import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    EVENT_ALIASES,
    REPLICA_PHASE_ALIASES,
    REPLICA_PHASES,
    STEP_ALIASES,
)

__all__ = [
    "AUXILIARY_EVENT_KINDS",
    "AUXILIARY_KIND_PREFIXES",
    "EVENT_ALIASES",
    "REPLICA_PHASES",
    "REPLICA_PHASE_ALIASES",
    "STEP_ALIASES",
    "PathLike",
    "ReplicaGoodput",
    "TimelineTables",
    "bundled_path",
    "mlperf_runtime_json",
    "mlperf_summary",
    "mlperf_summary_table",
    "read_bloom_events",
    "read_canonical",
    "read_mlgoodput",
    "read_mlperf",
    "read_replica_lifecycle",
    "replica_runtime_goodput",
    "write_canonical",
]

#: Names that moved to :mod:`fleetlib.runtime.commands` (they assemble command output, which no reader
#: does); still importable from here.
_MOVED_TO_COMMANDS = ("mlperf_runtime_json", "mlperf_summary", "mlperf_summary_table")


def __getattr__(name: str) -> object:
    # resolved lazily: commands imports the readers, so the readers do not import commands up front
    if name in _MOVED_TO_COMMANDS:
        from fleetlib.runtime import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
