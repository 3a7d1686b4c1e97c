"""Readers: scheduler records in their real formats -> canonical tables and a row ledger.

One module per format (:mod:`~fleetlib.scheduling.readers.slurm`, ``kueue``, ``volcano``, ``helios``,
``openb``, ``philly``, ``pai``, ``canonical``), each with the reader protocol of :mod:`fleetlib.registry`,
``read(paths, *, tz=None, window=None, **options) -> (tables, Ledger)``, and registered in
:data:`READERS` under its ``--format`` name; :func:`read_records` dispatches through the registry.
Shared helpers live in :mod:`~fleetlib.scheduling.readers._common`.

The format readers ``read_<format>(path_or_paths, ...) -> (SchedulerRecords, Ledger)`` keep their
own signatures.
:class:`~fleetlib.scheduling.records.SchedulerRecords` holds the canonical tables the scheduling factor
is computed on (columns in :mod:`fleetlib.scheduling.records`); format-specific extras go in its
``extra`` dict: ``extra["notes"]`` (the conventions the reader applied: zone, window, what capacity
means), and for openb ``extra["waits"]`` and ``extra["installed"]``.  The ledger accounts for every
input row: rows read = kept + repaired (the repair named) + rejected (file, row or line, field,
reason).  Rows and lines are numbered as the format counts them: text files by 1-based line (the
header is line 1), YAML/JSON files by object (1-based), JSON-lines files by line.  A row carries at
most one ledger entry; when several repairs apply they are named together.  A row that is kept but
carries a warning (an unknown job state, running GPUs above the total) is *kept* and carries a flag
(``ledger.flags``: a code such as ``unknown_job_state``, the message, file, row and field).  Flag
codes: ``unknown_job_state`` (Slurm), ``gang_complete_inferred_at_admission`` and
``unknown_end_reason`` (Kueue), ``unknown_podgroup_phase`` and ``gang_complete_from_running_count``
(Volcano), ``allocated_above_capacity`` (Helios), ``unknown_pod_phase`` (openb).

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
1. Write ``readers/<format>.py`` with ``read_<format>(paths, ...) -> (SchedulerRecords, Ledger)``:
   open each file with :func:`fleetlib._io.read_text` (plain or gzip by
   its bytes), open its row-book with ``book.open(file, rows)`` (the 1-based line / object numbers
   of its records), and reject, repair or flag records by those numbers; build the canonical tables
   (:mod:`fleetlib.scheduling.schema`) and return ``_records(...), book.settle()``.
2. Add ``records(paths, *, tz=None, window=None, **options)`` and ``read(...)`` (copy them from
   ``slurm.py``; ``read`` returns ``tables_of(records)`` and the ledger).
3. Register it in :data:`READERS` below with one good sample (its independently counted record
   count in ``records=``) and one broken corpus file (``bad=True``); ``--format`` and
   :func:`read_records` pick it up, and ``tests/core/test_reader_conformance.py -k scheduling`` checks it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from os import PathLike
from types import ModuleType
from typing import Any

from fleetlib._io import as_paths
from fleetlib._sniff import first_line, is_parquet
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.registry import ReaderSpec, Sample, head_bytes
from fleetlib.scheduling.readers import canonical, helios, kueue, openb, pai, philly, slurm, volcano
from fleetlib.scheduling.readers._common import queue_from_pending
from fleetlib.scheduling.readers.helios import detect_quota_glitch_days, read_helios
from fleetlib.scheduling.readers.kueue import KUEUE_EVICTED_STATES, KUEUE_FINISHED_STATES, read_kueue
from fleetlib.scheduling.readers.openb import read_openb
from fleetlib.scheduling.readers.pai import read_pai
from fleetlib.scheduling.readers.philly import read_philly
from fleetlib.scheduling.readers.slurm import SLURM_END_STATES, SLURM_STATES, expand_hostlist, read_slurm
from fleetlib.scheduling.readers.volcano import VOLCANO_PHASES, read_volcano
from fleetlib.scheduling.records import SchedulerRecords
from fleetlib.scheduling.schema import (
    ALLOCATION_COLUMNS,
    CAPACITY_COLUMNS,
    INSTALLED_COLUMNS,
    OCCUPANCY_COLUMNS,
    QUEUE_COLUMNS,
    WAIT_COLUMNS,
)
from fleetlib.scheduling.views import openb_cohorts

__all__ = [
    "FORMATS",
    "INSTALLED_COLUMNS",
    "KUEUE_EVICTED_STATES",
    "KUEUE_FINISHED_STATES",
    "READERS",
    "SLURM_END_STATES",
    "SLURM_INPUTS",
    "SLURM_STATES",
    "VOLCANO_PHASES",
    "WAIT_COLUMNS",
    "SchedulingReaderSpec",
    "check_slurm_inputs",
    "detect_quota_glitch_days",
    "expand_hostlist",
    "missing_slurm_inputs",
    "openb_cohorts",
    "queue_from_pending",
    "read_helios",
    "read_kueue",
    "read_openb",
    "read_pai",
    "read_philly",
    "read_records",
    "read_slurm",
    "read_volcano",
    "scheduling_command",
]


# ================================================================================================
# The registry: one entry per format, as the CLI names them
# ================================================================================================

_DATA = "data/scheduler"
_CORPUS = "tests/corpus/scheduling"
_ALLOC = ALLOCATION_COLUMNS
_CAP = CAPACITY_COLUMNS
_QUEUE = QUEUE_COLUMNS
_OCC = OCCUPANCY_COLUMNS


@dataclass(frozen=True)
class SchedulingReaderSpec(ReaderSpec):
    """A :class:`~fleetlib.registry.ReaderSpec` that also gives the records bundle.

    Attributes
    ----------
    records
        ``records(paths, *, tz=None, window=None, **options) -> (SchedulerRecords, Ledger)``: the same
        read as ``read`` with the tables kept together with the reader's notes (what
        :func:`read_records` returns).
    """

    records: Callable[..., tuple[SchedulerRecords, Ledger]] | None = None


def _spec(
    name: str, module: ModuleType, summary: str, tables: dict[str, tuple[str, ...]], *samples: Sample
) -> SchedulingReaderSpec:
    read, recs = module.read, module.records
    if module is canonical:
        read, recs = _parquet_only(read), _parquet_only(recs)
    return SchedulingReaderSpec(
        name=name, read=read, summary=summary, tables=tables, samples=samples, records=recs,
        sniff=getattr(module, "sniff", None),
    )


def _parquet_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap the canonical reader: a file that is not Parquet is refused with a line that says so."""

    @functools.wraps(fn)
    def wrapped(paths: Any, *args: Any, **kwargs: Any) -> Any:
        for p in as_paths(paths):
            head = head_bytes(p, 256)
            if not is_parquet(head):
                first = first_line(head)[:60]
                raise InputError(
                    "not a Parquet file (it starts with " + repr(first) + "): --format canonical reads the "
                    "Parquet file 'fleetlib synth allocations' writes; for scheduler text records give their "
                    "format (--format slurm, kueue, ...) or omit --format to detect it",
                    file=str(p),
                )
        return fn(paths, *args, **kwargs)

    return wrapped


#: What each Slurm input is, and the command that writes it.
SLURM_INPUTS: dict[str, str] = {
    "sacct": "jobs: sacct -P -D -a --starttime S --endtime E --format=JobID,JobIDRaw,User,Account,Partition,"
    "QOS,Priority,Submit,Eligible,Start,End,Elapsed,State,ExitCode,AllocTRES,ReqTRES,NodeList > sacct.txt",
    "nodes": "node inventory: sinfo -N -o '%N|%P|%G' > sinfo_nodes.txt",
    "events": "node outages (optional when no node was down): sacctmgr -P show event Start=S End=E "
    "> sacctmgr_events.txt",
}


def missing_slurm_inputs(paths: str | PathLike[str] | Iterable[str | PathLike[str]]) -> list[str]:
    """Return which of Slurm's three inputs are missing among ``paths`` (by their header lines).

    Parameters
    ----------
    paths
        The files given for ``--format slurm``.

    Returns
    -------
    list of str
        Keys of :data:`SLURM_INPUTS` (``"sacct"``, ``"nodes"``, ``"events"``) not found, in that order.
    """
    from fleetlib.scheduling.readers.slurm import _sniff_slurm

    seen = {_sniff_slurm(first_line(head_bytes(p))) for p in as_paths(paths)}
    return [k for k in SLURM_INPUTS if k not in seen]


def check_slurm_inputs(paths: str | PathLike[str] | Iterable[str | PathLike[str]]) -> None:
    """Raise one :class:`~fleetlib.quality.InputError` naming every Slurm input scheduling goodput lacks.

    sacct output and the sinfo node inventory are needed (jobs and capacity); sacctmgr events are
    named too when they are missing along with one of those, so one run of the error lists all.

    Raises
    ------
    InputError
        sacct or sinfo output is missing; the message gives the command that writes each missing file.
    """
    missing = missing_slurm_inputs(paths)
    if "sacct" in missing or "nodes" in missing:
        need = "; ".join(f"{k} -- {SLURM_INPUTS[k]}" for k in missing)
        raise InputError(
            "scheduling goodput from Slurm needs sacct output and the sinfo node inventory; missing "
            f"{len(missing)} of the 3 inputs: {need}",
            file=str(as_paths(paths)[0]),
        )


_HELIOS_VCS = tuple(
    f"{_DATA}/helios_earth_may2020/{vc}.csv.gz" for vc in ("vc3sl", "vc6YE", "vcMod", "vchbv", "vcvlY")
)

#: Every scheduler format, keyed by its ``--format`` name.
READERS: dict[str, SchedulingReaderSpec] = {
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

#: Formats :func:`read_records` understands, as the CLI names them (the keys of :data:`READERS`).
FORMATS: tuple[str, ...] = tuple(READERS)


def read_records(
    path_or_paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    format: str | None = None,
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[SchedulerRecords, Ledger]:
    """Read scheduler records in the named format.

    Parameters
    ----------
    path_or_paths
        The input files (for ``"canonical"``: exactly one Parquet file).
    format
        One of :data:`FORMATS` (a key of :data:`READERS`); None: detected from the files' bytes
        (:func:`fleetlib.registry.detect`), an :class:`~fleetlib.quality.InputError` when not exactly
        one format fits.
    tz
        Zone of naive wall-clock times: required for Slurm files with naive times; for Helios the
        default ``"Asia/Shanghai"`` applies when None; ignored by the other formats.
    window
        The record window, anything :meth:`fleetlib.accounting.Window.parse` takes (a timezone-aware
        ``(start, end)`` pair, ``"START/END"`` text): where open jobs are censored (Slurm, Kueue,
        Volcano; for the canonical format it is the ``open_end`` of still-open allocations).
    **options
        The format's own options (``pool_by``, ``gpu_resource``, ``glitch``, ``resolution_s``).

    Returns
    -------
    tuple of (SchedulerRecords, Ledger)
        As returned by the format's reader.
    """
    if format is None:
        from fleetlib.registry import detect

        format = detect(path_or_paths, "scheduling")
    spec = READERS.get(format)
    if spec is None or spec.records is None:
        raise DomainError(f"format must be one of {list(FORMATS)}; got {format!r}")
    return spec.records(path_or_paths, tz=tz, window=window, **options)


def __getattr__(name: str) -> Any:
    # the CLI's JSON lives in fleetlib.scheduling.commands (readers never build CLI output); the old
    # import path fleetlib.scheduling.readers.scheduling_command keeps working, resolved lazily
    # because commands imports this package
    if name == "scheduling_command":
        from fleetlib.scheduling.commands import scheduling_command

        return scheduling_command
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
