"""Readers of the program rung: one module per format, and the ``READERS`` registry.

* :mod:`~fleetlib.program.readers.kineto` -- PyTorch profiler (Kineto) Chrome-trace JSON, one file
  per rank -> ``kernels``, ``steps``, ``host_syncs`` and ``ops`` (also :func:`read_trace` /
  :func:`read_traces`, which return the richer :class:`TraceRead` / :class:`TraceSet`);
* :mod:`~fleetlib.program.readers.nsys` -- Nsight Systems SQLite exports (``nsys export --type
  sqlite``), one file per rank or several processes per file -> the same four tables (``ops``
  empty; also :func:`read_nsys`, which returns a :class:`TraceSet`);
* :mod:`~fleetlib.program.readers.rank_timers` -- per-rank step timers (Parquet or CSV) ->
  ``rank_timers``, the input of :func:`fleetlib.program.stragglers.straggler_analysis`.

Each module's ``read(paths, *, tz=None, window=None, **format_options) -> (tables, Ledger)`` is
the protocol of :mod:`fleetlib.registry`; :data:`READERS` names them with the samples the
conformance suite (``tests/core/test_reader_conformance.py``) checks them on.  The Kineto reader's
cache of parsed files is :mod:`~fleetlib.program.readers._cache` (private).

Adding a format: write ``readers/<format>.py`` with ``read`` returning canonical tables
(:mod:`fleetlib.program.schema`) and a :class:`~fleetlib.quality.Ledger` kept with a
:class:`~fleetlib.quality.RowBook`, then add one :class:`~fleetlib.registry.ReaderSpec` below with
a bundled good sample (its record count counted independently) and a broken one.
"""

from __future__ import annotations

from fleetlib.program.readers import kineto, nsys, rank_timers
from fleetlib.program.schema import (
    HOST_SYNC_COLUMNS,
    KERNEL_COLUMNS,
    OPS_COLUMNS,
    RANK_TIMER_COLUMNS,
    STEP_COLUMNS,
)
from fleetlib.registry import ReaderSpec, Sample

__all__ = ["READERS", "kineto", "nsys", "rank_timers"]

_TRACES = "data/traces"
_DLRM = tuple(f"{_TRACES}/dlrm_8rank/worker{r}_step_12.{stamp}.pt.trace.json.gz" for r, stamp in enumerate((
    "1694128201545", "1694128201556", "1694128201554", "1694128201557", "1694128201547", "1694128201549",
    "1694128201553", "1694128201553")))
_BAD_TRACES = "tests/corpus/traces"
_BAD_TIMERS = "tests/corpus/fleet"
_NSYS = "tests/corpus/program/nsys"


#: Format name -> reader, its tables and its conformance samples.  ``records`` are the files' event
#: (row) counts counted without the reader: ``len(traceEvents)`` of the JSON, data rows of the CSV,
#: ``COUNT(*)`` of the SQLite export's activity tables.
READERS: dict[str, ReaderSpec] = {
    "kineto": ReaderSpec(
        name="kineto",
        read=kineto.read,
        summary="PyTorch profiler (Kineto) Chrome-trace JSON, plain or gzip, one file per rank",
        tables={"kernels": KERNEL_COLUMNS, "steps": STEP_COLUMNS, "host_syncs": HOST_SYNC_COLUMNS,
                "ops": OPS_COLUMNS},
        samples=(
            Sample(paths=_DLRM, records=26_538),
            Sample(paths=(f"{_TRACES}/hta_nccl_allreduce_rank-0.json.gz",), records=40_573),
            Sample(paths=(f"{_TRACES}/hta_pp_pair_rank-0.json.gz", f"{_TRACES}/hta_pp_pair_rank-1.json.gz"),
                   records=9_575),
            Sample(paths=(f"{_BAD_TRACES}/truncated.json.gz",), bad=True),
            Sample(paths=(f"{_BAD_TRACES}/truncated.json",), bad=True),
            Sample(paths=(f"{_BAD_TRACES}/invalid_json.json",), bad=True),
            Sample(paths=(f"{_BAD_TRACES}/negative_duration.json",), bad=True),
            Sample(paths=(f"{_BAD_TRACES}/absurd_duration.json",), bad=True),
            Sample(paths=(f"{_BAD_TRACES}/empty_events.json",), bad=True),
            Sample(paths=(f"{_BAD_TRACES}/empty_file.json",), bad=True),
            Sample(paths=(f"{_BAD_TRACES}/duplicate_ranks/trace_a.json",
                          f"{_BAD_TRACES}/duplicate_ranks/trace_b.json"), bad=True),
        ),
    ),
    "nsys": ReaderSpec(
        name="nsys",
        read=nsys.read,
        summary="Nsight Systems SQLite export (nsys export --type sqlite), plain or gzip, one per rank",
        tables={"kernels": KERNEL_COLUMNS, "steps": STEP_COLUMNS, "host_syncs": HOST_SYNC_COLUMNS,
                "ops": OPS_COLUMNS},
        samples=(
            # records: COUNT(*) of the kernel, memcpy, memset, runtime and NVTX tables (6 + 2 + 2 + 14 + 6)
            Sample(paths=(f"{_NSYS}/good_rank0.sqlite",), records=30),
            Sample(paths=(f"{_NSYS}/good_rank0.sqlite.gz",), records=30),
            Sample(paths=(f"{_NSYS}/not_sqlite.sqlite",), bad=True),
            Sample(paths=(f"{_NSYS}/truncated.sqlite",), bad=True),
            Sample(paths=(f"{_NSYS}/no_activity.sqlite",), bad=True),
            Sample(paths=(f"{_NSYS}/no_stringids.sqlite",), bad=True),
            Sample(paths=(f"{_NSYS}/negative_duration.sqlite",), bad=True),
        ),
    ),
    "rank_timers": ReaderSpec(
        name="rank_timers",
        read=rank_timers.read,
        summary="per-rank step timers (rank, step, duration_s), Parquet or CSV",
        tables={"rank_timers": RANK_TIMER_COLUMNS},
        samples=(
            Sample(paths=(f"{_BAD_TIMERS}/good_3_ranks_4_steps.csv",), records=12),
            Sample(paths=(f"{_BAD_TIMERS}/negative_duration.csv",), bad=True),
            Sample(paths=(f"{_BAD_TIMERS}/negative_duration.parquet",), bad=True),
            Sample(paths=(f"{_BAD_TIMERS}/nan_duration.csv",), bad=True),
            Sample(paths=(f"{_BAD_TIMERS}/missing_column.csv",), bad=True),
            Sample(paths=(f"{_BAD_TIMERS}/duplicate_rank_step.csv",), bad=True),
            Sample(paths=(f"{_BAD_TIMERS}/empty.csv",), bad=True),
            Sample(paths=(f"{_BAD_TIMERS}/wrong_dtype.parquet",), bad=True),
        ),
    ),
}
