"""Readers: job timelines from real formats into the canonical steps and events tables.

The canonical tables, their columns, dtypes and event kinds are defined in
:mod:`fleetlib.runtime.timeline` (``STEP_COLUMNS``, ``EVENT_COLUMNS``, ``EVENT_KINDS``); this
module turns files into them.  Every reader returns the tables together with a
:class:`fleetlib.quality.Ledger` that accounts for every input record:
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
  evaluation = evals) are command output: :func:`fleetlib.runtime.commands.mlperf_summary`.
* :func:`read_mlgoodput` -- ml-goodput-measurement ``<job>_timeline.jsonl`` cache entries.
* :func:`read_canonical` -- the canonical columns (with documented aliases) as CSV or Parquet.
* :func:`read_bloom_events` -- the hand-transcribed BLOOM-176B event table in ``data/timelines``.
* :func:`read_torchtitan` -- torchtitan's structured logs (per-rank JSONL span records): steps,
  input waits, checkpoints, evaluations, failures and restores per rank (job ``<job>/rank<r>``).
* :func:`read_replica_lifecycle` -- a serving replica's lifecycle log (placed -> loading -> warmup
  -> ready -> draining -> released), measured by :func:`fleetlib.runtime.goodput.replica_runtime_goodput`.

Row numbers are counted as each format counts them: a CSV row is its line number (the header is
line 1), a Parquet row is its index + 1, a JSON-lines or log record is its line number.

The reader protocol
-------------------
Each format module exposes ``read(paths, *, tz=None, window=None, **format_options) -> (tables,
Ledger)`` (:mod:`fleetlib.registry`): ``tables`` is ``{"steps": ..., "events": ...}`` (serving:
``{"phases": ...}``); files are opened through :mod:`fleetlib._io` (plain or gzip, by the bytes); the
window is read by :meth:`fleetlib.accounting.Window.parse` and applied by the measurement, never by
dropping records.  :data:`READERS` maps each ``--format`` name to its :class:`~fleetlib.registry.ReaderSpec`.

The ``read`` of a format is also its ``read_<format>`` (``read_canonical``, ``read_mlperf`` ...): one
callable under two names.  The timeline readers return :class:`TimelineTables`, the protocol's dict
whose two tables are also its attributes (``tables.steps``).

Adding a format: write ``readers/<format>.py`` with ``read`` (a table format loads each file into one
Arrow table with ``load_table`` and casts its columns with the column parsers of ``_common``; any
format builds working frames carrying ``_file`` and ``_row``, reports through one ``FileBook`` per
file and runs the shared checks of ``_common``), add one ``ReaderSpec`` with a bundled good sample and
a broken one from ``tests/corpus/runtime/`` to :data:`READERS`; the command line,
:func:`fleetlib.runtime.measure.measure` and the conformance suite take it from there.
"""

from __future__ import annotations

from fleetlib.registry import ReaderSpec, Sample
from fleetlib.runtime.readers import bloom, canonical, mlgoodput, mlperf, serving, torchtitan
from fleetlib.runtime.readers._common import PathLike, TimelineTables, bundled_path
from fleetlib.runtime.readers.bloom import read_bloom_events
from fleetlib.runtime.readers.canonical import read_canonical, write_canonical
from fleetlib.runtime.readers.mlgoodput import read_mlgoodput
from fleetlib.runtime.readers.mlperf import read_mlperf
from fleetlib.runtime.readers.serving import read_replica_lifecycle
from fleetlib.runtime.readers.torchtitan import read_torchtitan
from fleetlib.runtime.schema import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    EVENT_ALIASES,
    EVENT_COLUMNS,
    REPLICA_PHASE_ALIASES,
    REPLICA_PHASES,
    STEP_ALIASES,
    STEP_COLUMNS,
)

__all__ = [
    "AUXILIARY_EVENT_KINDS",
    "AUXILIARY_KIND_PREFIXES",
    "EVENT_ALIASES",
    "READERS",
    "REPLICA_PHASES",
    "REPLICA_PHASE_ALIASES",
    "STEP_ALIASES",
    "PathLike",
    "TimelineTables",
    "bundled_path",
    "read_bloom_events",
    "read_canonical",
    "read_mlgoodput",
    "read_mlperf",
    "read_replica_lifecycle",
    "read_torchtitan",
    "write_canonical",
]

_TIMELINE_TABLES = {"steps": STEP_COLUMNS, "events": EVENT_COLUMNS}
_DATA = "data/timelines"
_CORPUS = "tests/corpus/runtime"

#: Every runtime format, by its ``--format`` name.  Each reader is its module's ``read``; the samples
#: are the bundled files (``records`` counted without the reader: ``:::MLLOG`` lines, non-blank JSON
#: lines, CSV data rows) and broken files of the test corpus.
READERS: dict[str, ReaderSpec] = {
    "mlperf": ReaderSpec(
        "mlperf", mlperf.read, "MLPerf :::MLLOG result logs (one run per file)", _TIMELINE_TABLES,
        (Sample((f"{_DATA}/asustek_esc-n8a-e12_llama2_70b_lora_result_0.txt",), records=52),
         Sample((f"{_DATA}/nvidia_eos_n128_llama2_70b_lora_result_0.txt",), records=88),
         Sample((f"{_DATA}/mlperf_v5.1_nvidia_theia_ngpu8_llama2_70b_lora/result_0.txt",), records=99),
         Sample((f"{_CORPUS}/mlperf_steps/bad_step_timing.txt",), bad=True),
         Sample((f"{_CORPUS}/mlperf_unmatched_markers.txt",), bad=True),
         Sample((f"{_CORPUS}/mlperf_truncated.txt",), bad=True))),
    "mlgoodput": ReaderSpec(
        "mlgoodput", mlgoodput.read, "ml-goodput-measurement <job>_timeline.jsonl cache entries",
        _TIMELINE_TABLES,
        (Sample((f"{_DATA}/maxtext-llama3-8b-demo_timeline.jsonl",), records=159),
         Sample((f"{_CORPUS}/mlgoodput_invalid_json_timeline.jsonl",), bad=True),
         Sample((f"{_CORPUS}/mlgoodput_truncated_timeline.jsonl",), bad=True))),
    "canonical": ReaderSpec(
        "canonical", canonical.read, "canonical steps and events tables as CSV or Parquet (aliases taken)",
        _TIMELINE_TABLES,
        (Sample((f"{_DATA}/demo-7b-ft_steps.csv", f"{_DATA}/demo-7b-ft_events.csv"), records=36),
         Sample((f"{_CORPUS}/steps_bad_values.csv",), bad=True),
         Sample((f"{_CORPUS}/events_naive.csv",), bad=True),
         Sample((f"{_CORPUS}/steps_truncated_last_line.csv",), bad=True))),
    "bloom": ReaderSpec(
        "bloom", bloom.read, "the hand-transcribed BLOOM-176B event table (date, time of day, zone)",
        _TIMELINE_TABLES,
        (Sample((f"{_DATA}/bloom_176b_events.csv",), records=30),
         Sample((f"{_CORPUS}/bloom_bad_rows.csv",), bad=True))),
    "torchtitan": ReaderSpec(
        "torchtitan", torchtitan.read, "torchtitan structured logs: per-rank JSONL span records",
        {"steps": (*STEP_COLUMNS, "rank"), "events": (*EVENT_COLUMNS, "rank")},
        (Sample(tuple(f"{_DATA}/torchtitan_llama3_8b_demo/training.global_rank_{r}.{stamp}.jsonl"
                      for r, stamp in ((0, "20260302-100000-K7Q2ZB"), (0, "20260302-101400-P9TW4C"),
                                       (1, "20260302-100000-M3XH8D"), (1, "20260302-101400-R2VN6J"))),
                records=938),
         Sample((f"{_CORPUS}/torchtitan/training.global_rank_0.truncated.jsonl",), bad=True),
         Sample((f"{_CORPUS}/torchtitan/training.global_rank_0.end_without_start.jsonl",), bad=True),
         Sample((f"{_CORPUS}/torchtitan/training.global_rank_0.non_monotonic.jsonl",), bad=True),
         Sample((f"{_CORPUS}/torchtitan/training.global_rank_0.unknown_rank.jsonl",), bad=True))),
    "serving": ReaderSpec(
        "serving", serving.read, "serving replica lifecycle logs (placed -> ... -> released)",
        {"phases": ("replica_id", "phase", "start", "end", "duration_s")},
        (Sample((f"{_DATA}/serving_replica_lifecycle.csv",), records=19),
         Sample((f"{_CORPUS}/replica_backwards.csv",), bad=True))),
}
