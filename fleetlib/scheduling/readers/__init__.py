"""Readers: scheduler records in their real formats -> canonical tables and a row ledger.

One module per format (:mod:`~fleetlib.scheduling.readers.slurm`, ``kueue``, ``volcano``, ``helios``,
``openb``, ``philly``, ``pai``, ``canonical``; ``joblog`` holds the two published CSV job logs,
``helios-joblog`` and ``acme``), each with one callable, the reader protocol of
:mod:`fleetlib.registry`::

    read(paths, *, tz=None, window=None, **format_options) -> (SchedulerRecords, Ledger)

registered in :data:`READERS` under its ``--format`` name; :func:`read` dispatches through the
registry (the format detected from the files' bytes when it is not named).  Shared helpers live in
:mod:`~fleetlib.scheduling.readers._common`.

:class:`~fleetlib.scheduling.records.SchedulerRecords` is the protocol's ``tables``: a mapping of
table name -> DataFrame holding the canonical tables the scheduling factor is computed on (columns
in :mod:`fleetlib.scheduling.schema`) and the format's own tables (openb ``waits`` and
``installed``); its ``extra["notes"]`` names the conventions the reader applied (zone, window, what
capacity means).  The ledger accounts for every
input row: rows read = kept + repaired (the repair named) + rejected (file, row or line, field,
reason).  Rows and lines are numbered as the format counts them: text files by 1-based line (the
header is line 1), YAML/JSON files by object (1-based), JSON-lines files by line.  A row carries at
most one ledger entry; when several repairs apply they are named together.  A row that is kept but
carries a warning (an unknown job state, running GPUs above the total) is *kept* and carries a flag
(``ledger.flags``: a code such as ``unknown_job_state``, the message, file, row and field).  Flag
codes: ``unknown_job_state`` (Slurm), ``gang_complete_inferred_at_admission`` and
``unknown_end_reason`` (Kueue), ``unknown_podgroup_phase`` and ``gang_complete_from_running_count``
(Volcano), ``allocated_above_capacity`` (Helios), ``unknown_pod_phase`` (openb),
``unknown_job_state`` and ``derived_column_mismatch`` (Helios job log, Acme).

Formats and their gang-complete marker
--------------------------------------
* **Slurm** ``sacct --parsable2`` (+ ``sacctmgr show event -P`` and ``sinfo -N`` for capacity):
  allocation is atomic, so ``Start`` is both the first device assignment and gang completion.
* **Kueue** Workload objects: ``Admitted=True`` starts an attempt, ``PodsReady=True`` completes the
  gang, ``Finished`` / ``Evicted`` / ``Preempted`` release it.
* **Volcano** PodGroup watch records: the phase reaching ``Running`` (or ``status.running`` reaching
  ``minMember``) completes the gang; ``Unknown`` is a partial gang.
* **Helios** per-VC minute sequences: an aggregate format -> the occupancy table (running GPUs are
  complete allocations because Slurm allocates atomically); the daily quota file -> capacity.
* **Microsoft Philly** ``cluster_job_log``: an attempt's ``start_time`` (one server: exact; several
  servers: inferred, flagged ``gang_complete_inferred_at_start``); no capacity (a subset of the jobs).
* **Alibaba PAI 2020** job / task / instance tables: the job's last instance (or task) launch,
  inferred and flagged ``gang_complete_inferred``; no capacity (waits and size cohorts only).
* **HeliosData** ``cluster_log.csv`` and **AcmeTrace** ``trace_seren.csv`` / ``trace_kalos.csv``
  job logs: ``start_time`` (the scheduler allocates a job's nodes at once); no capacity of their
  own (stated, derived from the log's peak of held GPUs, or the Helios quota file; none: waits,
  durations, size cohorts and the status mix only).
* **Alibaba openb** pod and node lists: waits and size cohorts only (the sample never fills the
  cluster, so it cannot give time-based scheduling goodput).

Jobs that waited and never got a device are allocation rows with ``first_assigned`` and
``gang_complete`` missing and ``release`` when they left the queue (``end_state`` ``"pending"`` when
they still waited at the end of the record, censored there).  Jobs still holding at the end of the
record are censored there too (``end_state`` ``"running"``); both censorings are named repairs.

Times
-----
All output times are timezone-aware UTC (``datetime64[ns, UTC]``).  Formats that print naive local
wall-clock time (sacct, sacctmgr, Helios) are localised with an explicit zone: the ``tz`` argument
(Slurm: required, the files do not say which zone the cluster runs in; Helios: defaults to
``"Asia/Shanghai"``, the zone of SenseTime's clusters, stated in ``extra["notes"]``).  Kubernetes
objects must carry RFC 3339 offsets; a naive time there is rejected.  A file that mixes naive and
timezone-aware times has the rows whose style differs from the file's first time rejected.

Adding a format
---------------
1. Write ``readers/<format>.py`` with ``read(paths, *, tz=None, window=None, **options) ->
   (SchedulerRecords, Ledger)``: open each file with :func:`fleetlib._io.read_text` (plain or gzip
   by its bytes), open its row-book with ``book.open(file, rows)`` (a
   :class:`~fleetlib.scheduling.readers._common.ReadBook`; the 1-based line / object numbers of its
   records), and reject, repair or flag records by those numbers; build the canonical tables
   (:mod:`fleetlib.scheduling.schema`) and return ``SchedulerRecords.from_tables(...),
   book.settle()``.
2. Register it in :data:`READERS` below with one good sample (its independently counted record
   count in ``records=``) and one broken corpus file (``bad=True``); ``--format`` and :func:`read`
   pick it up, and ``tests/core/test_reader_conformance.py -k scheduling`` checks it.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from types import ModuleType
from typing import Any, cast

from fleetlib.quality import Ledger
from fleetlib.registry import ReaderSpec, Sample, detect, read_tables
from fleetlib.scheduling.readers import canonical, helios, joblog, kueue, openb, pai, philly, slurm, volcano
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    INSTALLED_COLUMNS,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    WAIT_COLUMNS,
)

__all__ = ["READERS", "read"]


# ================================================================================================
# The registry: one entry per format, as the CLI names them
# ================================================================================================

_DATA = "data/scheduler"
_CORPUS = "tests/corpus/scheduling"
_ALLOC = ALLOCATION_COLUMNS
_CAP = CAPACITY_COLUMNS
_QUEUE = QUEUE_COLUMNS
_OCC = OCCUPANCY_COLUMNS


def _spec(
    name: str, module: ModuleType, summary: str, tables: dict[str, tuple[str, ...]], *samples: Sample
) -> ReaderSpec:
    return ReaderSpec(name=name, read=module.read, summary=summary, tables=tables, samples=samples,
                      sniff=getattr(module, "sniff", None))


_HELIOS_VCS = tuple(
    f"{_DATA}/helios_earth_may2020/{vc}.csv.gz" for vc in ("vc3sl", "vc6YE", "vcMod", "vchbv", "vcvlY")
)

#: Every scheduler format, keyed by its ``--format`` name.
READERS: dict[str, ReaderSpec] = {
    "slurm": _spec(
        "slurm",
        slurm,
        "Slurm sacct --parsable2, sacctmgr show event -P and sinfo -N (zone via tz)",
        {"allocations": _ALLOC, "capacity": _CAP, "queue": _QUEUE},
        Sample(
            tuple(
                f"{_DATA}/slurm_sample/{n}" for n in ("sacct.txt", "sacctmgr_events.txt", "sinfo_nodes.txt")
            ),
            {"tz": "UTC"},
            records=46 + 4 + 4,
        ),  # data lines (headers not counted)
        Sample((f"{_CORPUS}/slurm_truncated.txt",), {"tz": "UTC"}, bad=True),
        Sample((f"{_CORPUS}/slurm_overlapping_attempts.txt",), {"tz": "UTC"}, bad=True),
    ),
    "kueue": _spec(
        "kueue",
        kueue,
        "Kueue Workload objects (YAML or JSON); PodsReady completes the gang",
        {"allocations": _ALLOC, "capacity": _CAP, "queue": _QUEUE},
        Sample((f"{_DATA}/kueue_sample/workloads.yaml",), records=14),  # Workload objects
        Sample((f"{_CORPUS}/kueue_naive_time.yaml",), bad=True),
    ),
    "volcano": _spec(
        "volcano",
        volcano,
        "Volcano PodGroup watch records (JSON lines); Running completes the gang",
        {"allocations": _ALLOC, "capacity": _CAP, "queue": _QUEUE},
        Sample((f"{_DATA}/volcano_sample/podgroups.jsonl",), records=28),  # JSON lines
        Sample((f"{_CORPUS}/volcano_bad_records.jsonl",), bad=True),
    ),
    "helios-sequence": _spec(
        "helios-sequence",
        helios,
        "Helios per-VC minute sequences and daily quota (Asia/Shanghai default)",
        {"occupancy": _OCC},
        Sample(
            (*_HELIOS_VCS, f"{_DATA}/helios_earth_may2020/Earth_gpu_number.csv"), records=5 * 44_640 + 181
        ),  # data lines
        Sample((f"{_CORPUS}/helios_row_mismatch.csv",), bad=True),
    ),
    "helios-joblog": ReaderSpec(
        name="helios-joblog",
        read=joblog.read_helios,
        summary="HeliosData cluster_log.csv job log (+ cluster_gpu_number.csv quota; Asia/Shanghai default)",
        tables={"allocations": _ALLOC, "capacity": _CAP},
        samples=(
            Sample((f"{_CORPUS}/joblog/cluster_log.csv", f"{_CORPUS}/joblog/cluster_gpu_number.csv"),
                   records=30 + 3),  # data lines
            Sample((f"{_CORPUS}/joblog/helios_bad_rows.csv",), bad=True),
        ),
        sniff=joblog.sniff_helios,
    ),
    "acme": ReaderSpec(
        name="acme",
        read=joblog.read_acme,
        summary="AcmeTrace trace_seren.csv / trace_kalos.csv job traces (pool = the cluster)",
        tables={"allocations": _ALLOC, "capacity": _CAP},
        samples=(
            Sample((f"{_CORPUS}/joblog/trace_seren.csv", f"{_CORPUS}/joblog/trace_kalos.csv"),
                   {"capacity": "derived"}, records=30 + 24),
            Sample((f"{_CORPUS}/joblog/acme_bad_rows.csv",), bad=True),
        ),
        sniff=joblog.sniff_acme,
    ),
    "openb": _spec(
        "openb",
        openb,
        "Alibaba GPU 2023 openb pod and node lists (waits and size cohorts only)",
        {"waits": WAIT_COLUMNS, "installed": INSTALLED_COLUMNS},
        Sample(
            (
                f"{_DATA}/alibaba_openb_2023/openb_pod_list_default.csv.gz",
                f"{_DATA}/alibaba_openb_2023/openb_node_list_gpu_node.csv",
            ),
            records=8_152 + 1_213,
        ),
        Sample((f"{_CORPUS}/openb_bad_pods.csv",), bad=True),
    ),
    "philly": _spec(
        "philly",
        philly,
        "Microsoft Philly cluster_job_log JSON (attempts, waits, cohorts; America/Los_Angeles default)",
        {"allocations": _ALLOC},
        Sample((f"{_DATA}/philly_sample/cluster_job_log.json",), records=6),  # job objects
        Sample((f"{_CORPUS}/philly/bad_jobs.json",), bad=True),
        Sample((f"{_CORPUS}/philly/truncated.json",), bad=True),
    ),
    "pai": _spec(
        "pai",
        pai,
        "Alibaba PAI 2020 job/task/instance tables, headerless CSV (waits and size cohorts only)",
        {"allocations": _ALLOC},
        Sample(
            tuple(
                f"{_DATA}/pai_sample/{n}.csv"
                for n in ("pai_job_table", "pai_task_table", "pai_instance_table", "pai_machine_spec")
            ),
            records=7 + 9 + 3 + 4,  # lines
        ),
        Sample((f"{_DATA}/pai_sample/pai_job_table.csv", f"{_CORPUS}/pai/bad_task_table.csv"), bad=True),
        Sample(
            (f"{_CORPUS}/pai/truncated_job_table.csv", f"{_DATA}/pai_sample/pai_task_table.csv"), bad=True
        ),
    ),
    "canonical": _spec(
        "canonical",
        canonical,
        "fleetlib's canonical Parquet file (fleetlib synth allocations)",
        {"allocations": _ALLOC, "capacity": _CAP},
        Sample((f"{_CORPUS}/canonical_small.parquet",), records=40 + 192 + 4),  # Parquet rows
        Sample((f"{_CORPUS}/canonical_no_metadata.parquet",), bad=True),
    ),
}

def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    format: str | None = None,
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[SchedulerRecords, Ledger]:
    """Read scheduler records in the named format, or in the one format their bytes fit.

    Parameters
    ----------
    paths
        The input files (for ``"canonical"``: exactly one Parquet file).
    format
        A key of :data:`READERS`; None: detected from the files' bytes
        (:func:`fleetlib.registry.detect`), an :class:`~fleetlib.quality.InputError` when not exactly
        one format fits.
    tz
        Zone of naive wall-clock times: required for Slurm files with naive times; for Helios the
        default ``"Asia/Shanghai"`` applies when None; ignored by the other formats.
    window
        The record window, anything :meth:`fleetlib.accounting.Window.parse` takes (a timezone-aware
        ``(start, end)`` pair, ``"START/END"`` text): where open jobs are censored (Slurm, Kueue,
        Volcano, Philly, PAI; for the canonical format it is the ``open_end`` of still-open
        allocations).
    **options
        The format's own options (``pool_by``, ``gpu_resource``, ``glitch``, ``resolution_s``,
        ``validate``).

    Returns
    -------
    tuple of (SchedulerRecords, Ledger)
        The tables by name (their :attr:`~SchedulerRecords.format` set to the format read) and the
        ledger of every input row, as the format's ``read`` returns them.

    Raises
    ------
    DomainError
        An unknown format name.
    InputError
        The format cannot be detected, or a file cannot be read as the format.
    """
    name = format if format is not None else detect(paths, "scheduling")
    tables, ledger = read_tables("scheduling", paths, name, tz=tz, window=window, **options)
    records = cast(SchedulerRecords, tables)
    records.format = name
    return records, cast(Ledger, ledger)
