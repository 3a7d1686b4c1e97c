"""The walk: one fleet bundle's scheduler records, job timelines and step traces -> one measured MPG.

:func:`measure_fleet` follows the chapter's order on one calendar window:

1. **S** from the scheduler records (:func:`fleetlib.scheduling.scheduling_partition`): held
   device-time of complete allocations over in-service capacity-time.
2. **R over the held time the scheduler hands over.**  Per job, the scheduler's held device-seconds
   (gang complete -> release, clipped to the window; :func:`fleetlib.scheduling.held_time`) are R's
   denominator.  Each job's timeline is measured with the runtime rung
   (:func:`fleetlib.runtime.goodput.runtime_goodput`, retrospective definition) and reconciled
   against it: the scheduler's held device-time the timeline does not cover is the
   ``reconciliation_residual``.  Held time of a job with no timeline is ``unobserved`` (R is the
   bound; the observed-only estimate is reported beside it and never enters the product); a complete
   gang whose timeline has no step is a ``zombie``.
3. **The corrected chain.**  R's numerator is the retained steps' productive time -- wall time less
   input waits, warm-up excess after a (re)start still charged to startup or recovery -- times the
   job's devices, as the runtime rung measures it.  The slow-step time inside it (the rung's
   ``slow_step``, time above the fault-free baseline) is charged to P as ``step_time_above_baseline``,
   whose denominator is exactly R's numerator.
4. **P per job** = ideal time of its retained steps (useful FLOPs per step from the job's model
   config / the named peak, in device-seconds) over their productive time.  P's partition:
   ``step_time_above_baseline``, ``below_ideal_rate`` (the rest) and ``unobserved`` (productive time
   of jobs with no model config).  Where a job has traces, the trace partition (compute, exposed
   comm, peer wait, exposed memcpy, host dispatch, idle) is scaled to the job's productive time, with
   the sample's coverage (rank-steps traced / retained steps x devices).
5. **MPG** through :func:`fleetlib.accounting.mpg`, which checks S.numerator = R.denominator and
   R.numerator = P.denominator in device-seconds.

**Along time and across segments** (``by=``, ``segment_by=``): the same walk per UTC day or ISO week
(:func:`calendar_windows`, clipped to the window) and per value of a job field (:func:`job_fields`).
The runtime rung validates each timeline and cuts it into parts once, then clips the parts to each
interval between the calendar edges and the ends of each exclusion, excluded intervals left out
(:func:`fleetlib.runtime.runtime_goodput_windows`): a job held across a boundary is split there, each
step by the share of its duration inside each interval, and the whole window's per-job parts are the
sums of the intervals'.  S and each job's held time are clipped to each interval by the scheduling
rung; a row sums its intervals (one, or several around excluded time) and derives R, P and MPG with
the walk's own per-job rules (:func:`fleetlib.fleet.results.slice_row`).  A job's fault-free step
time is estimated once on its whole timeline and used in every window, so P per window is the ideal
time of the window's share of the retained steps over their productive time there.  The rows add up
to the whole window, and each day's row is what the walk gives on that day's window.

Every record is read through its rung's door: :func:`fleetlib.scheduling.read`,
:func:`fleetlib.runtime.read` and :func:`fleetlib.runtime.runtime_goodput` (the runtime rung's one
per-job kernel, :mod:`fleetlib.runtime.partition`), :func:`fleetlib.program.read_traces`.

Two engines give the same numbers: ``engine="pandas"`` reads every timeline in this process and
measures them together; ``engine="dask"`` measures each timeline file -- at fleet scale one
partition of many jobs' canonical timelines -- as one task (:func:`timeline_task`) on a
``distributed`` cluster (:mod:`fleetlib.fleet.engine` starts or receives the client) and parses the
traces there.  Every runtime category is a per-job sum and the fault-free step time is estimated per
job, so a timeline measured alone gives the numbers it gives among the others.  What crosses the
wire is small: each task is sent the held jobs' device counts (scattered once) and sends back, per
joined job, only the columns the runtime rung adds, as plain arrays; the client gathers them in
manifest order as they complete (a tqdm bar on stderr) and checks the owners of every job (two
timelines for one job are refused, as by the pandas engine).  A job whose steps and events lie in
one file is measured by that file's task; a job whose timeline is split across files (a
``steps.csv`` and an ``events.csv``) is measured once every file is read, by one task per group of
files sharing such jobs (:func:`timeline_group_task`).  The loss vocabularies and the results code
live in :mod:`fleetlib.fleet.results`.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import (
    Factor,
    GoodputProduct,
    LeverGain,
    Window,
    cost_per_useful_hour,
    mpg,
)
from fleetlib.fleet.manifest import FleetManifest, load_manifest
from fleetlib.fleet.results import (
    LOSS_OWNERS,
    PROGRAM_LOSSES,
    RUNG_LOSSES,
    RUNTIME_LOSSES,
    TRACE_PARTS,
    cohorts,
    factor_contracts,
    job_records,
    levers,
    pools,
    program_factor,
    runtime_factor,
    slice_row,
    sum_factors,
    waterfall,
)
from fleetlib.fleet.sampling import kernel_ranking, kernel_records, stratum_labels, trace_strata
from fleetlib.quality import DomainError, FleetlibError, InputError, Ledger
from fleetlib.scheduling import COLLECTION_GAP_S

#: An interval ``[start, end)`` of a measured window (UTC).
Interval = tuple[pd.Timestamp, pd.Timestamp]

__all__ = [
    "BY",
    "LOSS_OWNERS",
    "PROGRAM_LOSSES",
    "RUNTIME_LOSSES",
    "SEGMENT_FIELDS",
    "TRACE_PARTS",
    "FleetMeasurement",
    "calendar_windows",
    "check_timezones",
    "dask_runtime_per_job",
    "job_fields",
    "measure_fleet",
    "read_scheduler",
    "read_timeline_file",
    "read_timelines",
    "submit_timeline_tasks",
    "timeline_group_task",
    "timeline_spans",
    "timeline_task",
]

@dataclass
class FleetMeasurement:
    """One fleet's measured S, R, P and MPG over one window, with everything derived from them.

    Attributes
    ----------
    name
        The bundle's name.
    window
        The measured window.
    scheduling, runtime, program
        The three factors (device-seconds), chained: each denominator is the previous numerator.
    product
        :func:`fleetlib.accounting.mpg`'s result (the chain as checked).
    jobs
        One row per scheduler job holding devices in the window (index ``job_id``): pool, devices,
        held, timeline and productive device-seconds, each R and P loss, R, P, coverage.
    pools
        Per pool: the three factors, MPG and the job product, and the waterfall.
    reconciliation
        Per observed job and in total: the scheduler's held device-s, the timeline's, the residual.
    traces
        Per traced job: the trace partition scaled to its productive device-s, and the coverage.
    levers
        :func:`fleetlib.accounting.rank_levers` from measured ceilings, plus per-loss gains.
    runtime_observed
        The observed-only R estimate (labelled; never in the product).
    coverage
        ``runtime`` (observed / held device-s), ``program`` (productive device-s of jobs with a model
        config / productive device-s), ``traces``.
    price_per_device_hour, cost_per_useful_device_hour
        From the manifest (None without a price).
    ledger
        One ledger for every record read, with the join's flags.
    sources
        The records each factor was read from.
    contracts
        Per factor, its measurement contract (chapter Table 2;
        :func:`fleetlib.fleet.results.factor_contracts`).
    by, windows
        ``"day"`` or ``"week"`` and one row per calendar window (:func:`calendar_windows`; rows of
        :func:`fleetlib.fleet.results.slice_row` with ``label``, ``start``, ``end``); None and no row
        when not asked for.
    segment_by, segments
        A job field (:func:`job_fields`) and one row per value of it (``value``, ``scheduling_split``
        and :func:`~fleetlib.fleet.results.slice_row`'s keys); None and no row when not asked for.
    availability
        In-service over installed capacity-time in the window (out-of-service time is outside S's
        denominator); None when the records state no installed capacity.
    collection_gaps
        Stretches of the window with no record of any job while capacity persists
        (:func:`fleetlib.scheduling.collection_gap_records`: ``start``, ``end``, ``seconds``,
        ``device_s``), counted in S as idle; each is also a ``collection_gap`` ledger flag.
    unobserved
        Scheduling loss key -> why the scheduler records cannot observe it
        (:func:`fleetlib.scheduling.unobserved_losses`): ``null`` in :meth:`to_dict`'s losses and
        waterfall, never a measured 0 (the factor itself keeps the partition's numbers).
    kernels
        The traced jobs' kernels and collectives ranked by their share of the traced strata's
        retained device-time, each with its standard error
        (:func:`fleetlib.fleet.sampling.kernel_ranking`); empty without traces.
    """

    name: str
    window: Window
    scheduling: Factor
    runtime: Factor
    program: Factor
    product: GoodputProduct
    jobs: pd.DataFrame
    pools: dict[str, dict[str, Any]]
    reconciliation: dict[str, Any]
    traces: dict[str, dict[str, Any]]
    levers: dict[str, Any]
    runtime_observed: dict[str, Any]
    coverage: dict[str, Any]
    price_per_device_hour: float | None
    cost_per_useful_device_hour: float | None
    ledger: Ledger = field(repr=False)
    sources: dict[str, Any] = field(default_factory=dict)
    lever_gains: list[LeverGain] = field(default_factory=list, repr=False)
    contracts: dict[str, Any] = field(default_factory=dict)
    by: str | None = None
    windows: list[dict[str, Any]] = field(default_factory=list)
    segment_by: str | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)
    availability: float | None = None
    collection_gaps: list[dict[str, Any]] = field(default_factory=list)
    unobserved: dict[str, str] = field(default_factory=dict)
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    @property
    def mpg(self) -> float:
        """Measured ML productivity goodput S x R x P."""
        return self.product.value

    def factor(self, boundary: str) -> Factor:
        """Return one of the three chained factors, as each rung's ``measure()`` result returns its own.

        Parameters
        ----------
        boundary
            ``"scheduling"``, ``"runtime"`` or ``"program"``.

        Returns
        -------
        fleetlib.accounting.Factor
            S, R or P (device-seconds), each denominator the previous numerator; their product is
            :attr:`product`.

        Raises
        ------
        DomainError
            Another boundary name.
        """
        factors = {"scheduling": self.scheduling, "runtime": self.runtime, "program": self.program}
        if boundary not in factors:
            raise DomainError(f"boundary must be one of {list(factors)}; got {boundary!r}")
        return factors[boundary]

    @property
    def ideal_device_s(self) -> float:
        """Ideal-rate useful device-seconds (P's numerator)."""
        return self.program.numerator

    @property
    def capacity_device_s(self) -> float:
        """In-service capacity device-seconds (S's denominator)."""
        return self.scheduling.denominator

    def observed_runtime_factor(self) -> Factor:
        """Return the observed-only runtime estimate as a Factor (held time of observed jobs only).

        Its denominator is *not* S's numerator whenever some held time has no timeline, so
        :func:`fleetlib.accounting.mpg` refuses it: it is shown beside R, never multiplied.
        """
        est = self.runtime_observed
        return Factor(
            boundary="runtime",
            numerator=est["numerator_device_s"],
            denominator=est["denominator_device_s"],
            window=self.window,
            record="job timelines (observed jobs only)",
            convention=est["label"],
            numerator_unit="device-s",
            denominator_unit="device-s",
        )

    def slice_efficiency(self) -> dict[str, Any]:
        """Return the elastic jobs' stepping and available slice efficiency, reported beside R.

        ml-goodput-measurement's definitions (devices stepping, held, over the most devices the job
        held, time-weighted) over the jobs whose timelines log device counts, fleet-wide in the
        scheduler's device-seconds (each job's counts scaled to its largest allocation).  None when no
        job logs device counts.
        """
        if "slice_total_device_s" not in self.jobs.columns:
            return {"stepping": None, "available": None, "jobs": 0}
        total, stepping, available = (math.fsum(self.jobs[f"slice_{c}_device_s"].to_numpy(float))
                                      for c in ("total", "stepping", "available"))
        n = int(np.isfinite(self.jobs["stepping_slice_efficiency"].to_numpy(float)).sum())
        return {"stepping": stepping / total if total > 0 else None,
                "available": available / total if total > 0 else None, "jobs": n}

    def waterfall(self) -> list[dict[str, Any]]:
        """Return the fleet waterfall, one record per bar (``stage``, ``kind``, ``device_s``, ``device_h``).

        In-service capacity -> each scheduling loss -> held -> each runtime loss -> productive -> each
        program loss -> ideal-rate useful work.
        """
        return waterfall(self.scheduling, self.runtime, self.program)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON object of ``fleetlib fleet --json``."""
        cov = {"scheduling": 1.0, "runtime": self.coverage["runtime"], "program": self.coverage["program"]}
        factors = {}
        for f in (self.scheduling, self.runtime, self.program):
            factors[f.boundary] = {
                "value": f.value,
                "numerator_device_s": f.numerator,
                "denominator_device_s": f.denominator,
                "coverage": cov[f.boundary],
                "convention": f.convention,
                "record": f.record,
                "losses": dict(f.losses),
            }
        factors["scheduling"]["unobserved"] = dict(self.unobserved)
        factors["scheduling"]["losses"].update(dict.fromkeys(self.unobserved))
        bars = {f"{b['kind']}:{b['stage']}": b["device_s"] for b in self.waterfall()}
        bars.update(dict.fromkeys(f"loss:scheduling.{k}" for k in self.unobserved))
        return {
            "name": self.name,
            "window": self.window.to_dict(),
            "mpg": self.mpg,
            "availability": self.availability,
            "collection_gaps": [dict(g) for g in self.collection_gaps],
            "job_product": self.product.job_product,
            "ideal_device_s": self.ideal_device_s,
            "in_service_capacity_device_s": self.capacity_device_s,
            "factors": factors,
            "loss_shares": dict(self.product.loss_shares),
            "chain": {k: dict(v) for k, v in self.product.chain.items()},
            "waterfall_device_s": bars,
            "runtime_observed_only": dict(self.runtime_observed),
            "slice_efficiency": self.slice_efficiency(),
            "coverage": dict(self.coverage),
            "pools": self.pools,
            "cohorts": cohorts(self.jobs),
            "jobs": job_records(self.jobs),
            "reconciliation": {**self.reconciliation, "jobs": dict(self.reconciliation["jobs"])},
            "traces": self.traces,
            "kernels": kernel_records(self.kernels),
            "levers": self.levers,
            "price_per_device_hour": self.price_per_device_hour,
            "cost_per_useful_device_hour": self.cost_per_useful_device_hour,
            "sources": self.sources,
            "rank_timers": {
                "files": list(self.sources.get("rank_timers", [])),
                "note": "listed in the manifest; not read by measure_fleet yet",
            },
            "ledger": self.ledger.to_dict(),
            "contract": self.contracts,
            **({"by": self.by, "windows": self.windows} if self.by is not None else {}),
            **({"segment_by": self.segment_by, "segments": self.segments} if self.segment_by is not None
               else {}),
        }


class _JobReconciliation(Mapping[str, dict[str, float]]):
    """Per reconciled job: the scheduler's held device-s, the timeline's and the residual (read-only).

    A mapping ``job_id -> {"scheduler_held_device_s", "timeline_held_device_s", "residual_device_s"}``
    over the observed jobs that are not zombies, in the job table's order.  At fleet scale it has
    200,000 entries, so the dictionaries are built on first use (a lookup, an iteration, the JSON),
    not by every measurement.
    """

    _KEYS = ("scheduler_held_device_s", "timeline_held_device_s", "residual_device_s")

    def __init__(self, jobs: pd.DataFrame, rows: np.ndarray) -> None:
        self._ids = jobs.index[rows]
        self._values = [jobs[c].to_numpy(float)[rows] for c in
                        ("held_device_s", "timeline_held_device_s", "reconciliation_residual")]
        self._built: dict[str, dict[str, float]] | None = None

    def _records(self) -> dict[str, dict[str, float]]:
        if self._built is None:
            keys = self._KEYS
            self._built = {
                str(j): {keys[0]: held, keys[1]: timeline, keys[2]: residual}
                for j, held, timeline, residual in zip(  # tolist(): Python floats, no per-value cast
                    self._ids.tolist(), *(v.tolist() for v in self._values), strict=True
                )
            }
        return self._built

    def __getitem__(self, job: str) -> dict[str, float]:
        return self._records()[job]

    def __iter__(self) -> Iterator[str]:
        return iter(self._records())

    def __len__(self) -> int:
        return len(self._ids)

    def __repr__(self) -> str:
        return f"<reconciliation of {len(self)} jobs>"


# ---------------------------------------------------------------------------------------------------
# Reading the three records
# ---------------------------------------------------------------------------------------------------


def read_scheduler(man: FleetManifest, window: Window | None, *, allow_empty_window: bool = False
                   ) -> tuple[Any, Ledger, Window]:
    """Read the manifest's scheduler records; return them, their ledger and the window.

    Parameters
    ----------
    man
        The manifest.
    window
        The window to measure; None: the capacity records' span.
    allow_empty_window
        Measure a window that reaches beyond the records' span by more than
        :data:`fleetlib.scheduling.WINDOW_SLACK` (refused by default).

    Returns
    -------
    tuple of (SchedulerRecords, Ledger, Window)
        The records (:func:`fleetlib.scheduling.read`), the ledger and the window.

    Raises
    ------
    InputError
        Records without allocations or capacity; a window outside the records, or reaching beyond them.
    """
    from fleetlib.scheduling import check_window_within_records, read

    fmt = "helios-sequence" if man.scheduler_format == "helios-sequence" else man.scheduler_format
    bounds = None if window is None else (window.start, window.end)
    records, ledger = read(
        [str(p) for p in man.scheduler_files], fmt, tz=man.scheduler_tz, window=bounds
    )
    alloc = records.allocations
    if alloc is None or records.capacity is None:
        raise InputError(
            "the scheduler records give no allocations with capacity: scheduling goodput needs "
            "both (Slurm: sacct with the sinfo node inventory)",
            file=str(man.file),
            field="scheduler",
        )
    if window is None:
        cap = records.capacity
        window = Window.between(cap["start"].min(), cap["end"].max())
    t0, t1 = _span(alloc)
    if t0 is None or not (t0 < window.end and t1 > window.start):
        span = "no allocation" if t0 is None else f"{t0.isoformat()} .. {t1.isoformat()}"
        raise InputError(
            f"the window {window.label} lies outside the scheduler records (allocations span {span})",
            file=str(man.file),
            field="window",
        )
    if not allow_empty_window:
        check_window_within_records(records, window.start, window.end, file=str(man.file))
    return records, ledger, window


def _span(alloc: pd.DataFrame) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    started = alloc["gang_complete"].notna()
    if not bool(started.any()):
        return None, None
    return alloc.loc[started, "submit"].min(), alloc.loc[started, "release"].max()


def read_timeline_file(fmt: str, path: str | Path, job_map: Mapping[str, str]
                       ) -> tuple[pd.DataFrame, pd.DataFrame, Ledger]:
    """Read one timeline file with the runtime rung's reader; job ids as text, mapped by ``job_map``.

    Parameters
    ----------
    fmt
        The manifest's timeline format (a key of :data:`fleetlib.runtime.READERS`).
    path
        The file.
    job_map
        Timeline job id -> scheduler job id (ids not in it are kept).

    Returns
    -------
    tuple of (DataFrame, DataFrame, Ledger)
        The file's steps and events (copies) and the reader's ledger.
    """
    from fleetlib.runtime import read

    tables, ledger = read([str(path)], fmt)
    s = tables["steps"].assign(job_id=_mapped_ids(tables["steps"]["job_id"], job_map))
    e = tables["events"].assign(job_id=_mapped_ids(tables["events"]["job_id"], job_map))
    return s, e, ledger


def _mapped_ids(ids: pd.Series, job_map: Mapping[str, str]) -> pd.Categorical:
    """Return a job-id column as a categorical of text ids mapped by ``job_map``.

    Two ids mapped to one become one category.  One factorisation per column: the rows per job, the
    join and the measurement then read its codes.
    """
    if isinstance(ids.dtype, pd.CategoricalDtype):
        codes, names = np.asarray(ids.cat.codes), [str(c) for c in ids.cat.categories]
    else:
        codes, uniques = pd.factorize(ids, sort=True)  # sorted categories, as astype("category") gives
        names = [str(u) for u in uniques]
    if job_map:
        names = [job_map.get(n, n) for n in names]
    inverse, categories = pd.factorize(np.asarray(names, dtype=object))
    return pd.Categorical.from_codes(inverse.astype(codes.dtype)[codes] if len(names) else codes,
                                     categories=pd.Index(categories, dtype=object))


def _index_set(frame: pd.DataFrame) -> set[str]:
    """Return the index labels of ``frame`` as a set (one conversion: iterating an Arrow index is slow)."""
    return set(frame.index.tolist())


def _distinct(ids: Any) -> list[str]:
    """Return the sorted distinct job ids of a column or a list.

    Vectorised: iterating an Arrow-backed column costs about 2 us a row.
    """
    if isinstance(ids, pd.Series):
        return sorted(set(ids.unique().tolist()))
    return sorted(set(ids))  # a list (the Dask engine's tasks send their distinct ids)


def _register_timeline(
    man: FleetManifest,
    rel: str,
    jobs_by_table: Mapping[str, Any],
    owner: dict[str, str],
    seen: dict[str, dict[str, str]],
    *,
    sorted_distinct: bool = False,
) -> None:
    """Record which file holds each job's steps and events; refuse a job whose steps (or events) are in two.

    A steps file and an events file of one job are one timeline; two files with steps (or with events)
    of one job are two timelines.  ``seen`` maps ``"steps"`` and ``"events"`` to job -> file; ``owner``
    maps each job to the first file that named it.  Each call costs the file's distinct ids (dict
    operations over them), never the jobs of the files before it: a fleet has hundreds of thousands.
    ``sorted_distinct``: the ids are lists already sorted and distinct (the Dask engine's tasks send
    them so), taken as they are.
    """
    named: list[str] | None = None  # the ids the steps put into owner (the events usually repeat them)
    for table in ("steps", "events"):
        # the distinct ids first (vectorised): iterating an Arrow-backed column costs ~2 us a row
        ids = list(jobs_by_table[table]) if sorted_distinct else _distinct(jobs_by_table[table])
        # every test below costs the file's ids, not the jobs seen so far (``set(ids) - keys()``
        # copies the whole view: over 64 partitions of 3,500 jobs that grew quadratically)
        table_seen = seen.setdefault(table, {})
        if not table_seen.keys().isdisjoint(ids):
            for job in (j for j in ids if table_seen.get(j, rel) != rel):  # the first, in id order
                raise InputError(
                    f"two timelines for job {job!r}: {table_seen[job]} and {rel} both hold its {table} "
                    "(one job, one timeline; merge them or map one to another job with job_map)",
                    file=str(man.file),
                    field="timelines.files",
                )
        table_seen.update(dict.fromkeys(ids, rel))
        if ids == named:  # every one of them is in owner already
            continue
        if owner.keys().isdisjoint(ids):
            owner.update(dict.fromkeys(ids, rel))
        else:
            owner.update(dict.fromkeys([j for j in ids if j not in owner], rel))
        named = ids


def _flag_unknown_jobs(
    owner: Mapping[str, str], known: set[str], scheduled: set[str], rows: Mapping[str, int], ledger: Ledger
) -> None:
    """Count timeline rows of jobs held outside the window; flag (and count) jobs the scheduler lacks."""
    for job in sorted(j for j in owner if j not in known):
        n = int(rows.get(job, 0))
        if job in scheduled:  # an allocation, but none of its held time lies in the window
            ledger.count_unused("timeline rows of jobs held outside the window", n)
            continue
        ledger.flag(
            "timeline_job_unknown",
            f"timeline job {job!r} ({owner[job]}) has no allocation in the scheduler records: kept "
            f"({n} rows), not joined",
            file=owner[job],
            job_id=job,
        )
        ledger.count_unused("timeline rows of jobs unknown to the scheduler", n)


#: Time-zone offsets are multiples of a quarter hour (India +5:30, Nepal +5:45); zones differ by at most 26 h.
_TZ_QUANTUM_S = 900
_TZ_MOST_S = 26 * 3600
#: How far a timeline may reach outside its allocation before it is outside (clocks of two hosts).
_TZ_SLACK_S = 120.0


def timeline_spans(steps: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """Return each job's first and last timeline time (index ``job_id`` as text; ``first``, ``last``).

    Parameters
    ----------
    steps, events
        The runtime rung's canonical steps (``start``, ``end``) and events (``time``) of some jobs.

    Returns
    -------
    DataFrame
        One row per job with a step or an event: its earliest and latest time (UTC).
    """
    parts = [steps[["job_id", c]].set_axis(["job_id", "t"], axis=1) for c in ("start", "end") if len(steps)]
    if len(events):
        parts.append(events[["job_id", "time"]].set_axis(["job_id", "t"], axis=1))
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame({"first": pd.Series(dtype="datetime64[ns, UTC]"),
                             "last": pd.Series(dtype="datetime64[ns, UTC]")},
                            index=pd.Index([], name="job_id", dtype=object))
    both = pd.concat([p.assign(job_id=p["job_id"].astype(str),
                               t=pd.to_datetime(p["t"], utc=True)) for p in parts], ignore_index=True)
    spans = both.groupby("job_id", sort=True)["t"].agg(["min", "max"]).rename(
        columns={"min": "first", "max": "last"})
    return spans.dropna()


def _offset_text(seconds: int) -> str:
    sign = "+" if seconds > 0 else "-"
    h, m = divmod(abs(int(seconds)) // 60, 60)
    return f"{sign}{h} h" if m == 0 else f"{sign}{h}:{m:02d} h"


def check_timezones(man: FleetManifest, allocations: pd.DataFrame, spans: pd.DataFrame,
                    joined: Mapping[str, str], ledger: Ledger) -> None:
    """Flag a job whose timeline lies outside its allocation by a time-zone offset; refuse a shared one.

    A joined job's timeline (its first to its last time) that reaches more than two minutes outside
    its allocation (first gang complete to last release, over its allocation rows) and fits inside
    it once shifted by the whole number of quarter hours (1 to 26 h) its start lies from the
    allocation's start (a timeline starts at its allocation's start or within the quarter hour
    after it) was written in another zone than the scheduler records were read in: its held and
    productive seconds would be measured at the wrong times (R above 1, a residual of hours).  It
    is flagged ``timezone_mismatch`` naming the job, the offset and both files.

    Raises
    ------
    InputError
        Every joined job (at least two) shows the same offset: the scheduler's ``tz`` (or the
        timelines' zone) is wrong for the whole bundle.
    """
    jobs = [j for j in spans.index.tolist() if j in joined]
    if not jobs:
        return
    alloc = allocations[allocations["gang_complete"].notna()]
    per = alloc.groupby(alloc["job_id"].astype(str)).agg(first=("gang_complete", "min"),
                                                          last=("release", "max"))
    per = per.reindex(jobs).dropna()
    if per.empty:
        return
    tl = spans.loc[per.index]
    # the shifts d with alloc_first - slack <= tl_first - d and tl_last - d <= alloc_last + slack
    lo = (tl["last"] - per["last"]).dt.total_seconds().to_numpy() - _TZ_SLACK_S
    hi = (tl["first"] - per["first"]).dt.total_seconds().to_numpy() + _TZ_SLACK_S
    # the offset is read at the start: a timeline begins at its allocation's start (its gang complete
    # or job start event) or within its first quarter hour (startup), never before it
    start = (tl["first"] - per["first"]).dt.total_seconds().to_numpy()
    shift = np.floor((start + _TZ_SLACK_S) / _TZ_QUANTUM_S) * _TZ_QUANTUM_S
    outside = (lo > 0) | (hi < 0)
    # an hour at least: a timeline some minutes past its release is a clock, not a zone
    fits = outside & (shift >= lo) & (shift <= hi) & (np.abs(shift) >= 3600) & (np.abs(shift) <= _TZ_MOST_S)
    if not fits.any():
        return
    scheduler = ", ".join(man.relative(f) for f in man.scheduler_files)
    zone = man.scheduler_tz or "the records' own"
    found = zip(per.index.tolist(), shift.tolist(), fits.tolist(), strict=True)
    offsets = {job: int(d) for job, d, ok in found if ok}
    if len(per) >= 2 and len(offsets) == len(per) and len(set(offsets.values())) == 1:
        d = next(iter(offsets.values()))
        job = next(iter(offsets))
        raise InputError(
            f"every joined job's timeline lies {_offset_text(d)} from its allocation (e.g. job {job!r} "
            f"in {joined[job]}): the scheduler records ({scheduler}, read in time zone {zone}) and the "
            "timelines are in different time zones; set scheduler.tz to the zone the records were written in",
            file=str(man.file),
            field="scheduler.tz",
        )
    for job, d in offsets.items():
        ledger.flag(
            "timezone_mismatch",
            f"job {job!r}: its timeline ({joined[job]}) lies {_offset_text(d)} outside its allocation in "
            f"the scheduler records ({scheduler}, time zone {zone}): a time-zone offset; its held and "
            "productive seconds are measured at the wrong times",
            file=joined[job],
            job_id=job,
        )


def read_timelines(
    man: FleetManifest, known: set[str], scheduled: set[str], ledger: Ledger, progress: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], dict[str, str]]:
    """Read every timeline file; map job ids; refuse a job in two files; flag jobs the scheduler lacks.

    Parameters
    ----------
    man
        The manifest.
    known
        The jobs the scheduler held in the window (their timelines are kept).
    scheduled
        Every job id of the scheduler records (to tell jobs held outside the window from unknown ones).
    ledger
        Receives the readers' ledgers (in manifest order) and the join's flags.
    progress
        Show a progress bar over files on stderr.

    Returns
    -------
    tuple of (DataFrame, DataFrame, dict, dict)
        The kept steps and events (every file's), ``joined`` (job -> file, jobs held in the window)
        and ``owner`` (job -> file, every job of the timelines).

    Raises
    ------
    InputError
        Two timelines for one job.
    """
    from tqdm.auto import tqdm

    owner: dict[str, str] = {}
    seen: dict[str, dict[str, str]] = {}  # "steps" | "events" -> job -> file
    steps, events = [], []
    for path in tqdm(man.timeline_files, desc="fleet timelines", unit="file", file=sys.stderr,
                     disable=not progress):
        s, e, tl_ledger = read_timeline_file(man.timeline_format, path, man.job_map)
        ledger.extend(tl_ledger)
        ids = {"steps": s["job_id"], "events": e["job_id"]}
        _register_timeline(man, man.relative(path), ids, owner, seen)
        steps.append(s)
        events.append(e)
    s_all = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame()
    e_all = pd.concat(events, ignore_index=True) if events else pd.DataFrame()
    unknown = set(owner) - known
    rows: dict[str, int] = {}
    if unknown:
        counts = pd.concat([s_all["job_id"], e_all["job_id"]]).value_counts()
        rows = {j: int(counts.get(j, 0)) for j in unknown}
    _flag_unknown_jobs(owner, known, scheduled, rows, ledger)
    keep_s = s_all["job_id"].isin(known).to_numpy() if len(s_all) else np.zeros(0, bool)
    keep_e = e_all["job_id"].isin(known).to_numpy() if len(e_all) else np.zeros(0, bool)
    joined = {j: f for j, f in owner.items() if j in known}
    return s_all[keep_s].reset_index(drop=True), e_all[keep_e].reset_index(drop=True), joined, owner


def _flag_varying_devices(attempts: pd.DataFrame, ledger: Ledger) -> None:
    """Flag jobs whose attempts held different device counts (timeline seconds weigh by each row's)."""
    held = attempts[attempts["held_device_s"] > 0]
    spread = held.groupby(held["job_id"].astype(str))["devices"].agg(["min", "max"])
    for job, row in spread[spread["min"] != spread["max"]].iterrows():
        ledger.flag(
            "devices_vary_across_attempts",
            f"job {job!r} held {int(row['min'])} to {int(row['max'])} "
            "devices across attempts; its timeline's seconds are weighted by each allocation row's devices",
            job_id=job,
        )


def _check_job_keys(
    man: FleetManifest, owner: Mapping[str, str], joined: Mapping[str, str], ledger: Ledger
) -> None:
    """Refuse a model config or traces for a job with no timeline; note those of jobs outside the window."""
    for key, ids in (("models", man.models), ("traces", man.traces)):
        if not owner.keys() >= ids.keys():
            job = next(j for j in ids if j not in owner)  # the first in the manifest's order
            raise InputError(
                f"names job {job!r}, which has no timeline in the bundle: a {key[:-1]} without a "
                "timeline has no retained steps to measure",
                file=str(man.file),
                field=f"{key}.{job}",
            )
        ledger.count_unused(f"{key} of jobs not joined in the window", len(ids.keys() - joined.keys()))


# ---------------------------------------------------------------------------------------------------
# Per-job accounting
# ---------------------------------------------------------------------------------------------------


#: The runtime rung's per-job columns that are sums over a window (device-s; steps by their share inside it).
_WINDOW_COLUMNS: tuple[str, ...] = (
    *RUNG_LOSSES,
    "timeline_unattributed",
    "timeline_held_device_s",
    "rung_productive_device_s",
    "step_time_above_baseline",
    "elastic_scaling_device_s",
    "retained_steps",
)


def _runtime_per_job(steps: pd.DataFrame, events: pd.DataFrame, intervals: list[Interval],
                     jobs: pd.DataFrame) -> list[dict[str, np.ndarray]]:
    """Measure every joined timeline with the runtime rung; add its parts (device-s) to ``jobs``.

    :func:`fleetlib.runtime.runtime_goodput_windows`' per-job tables (retrospective definition), each
    job's seconds times the devices it held, one table per interval ``[start, end)`` of ``intervals``:
    the timeline is validated and cut into parts once (one run of the per-job kernel) and the parts are
    clipped to each window.  A job whose allocation changed size (``jobs``' optional
    ``device_segments``: :func:`_device_segments`) is weighted by the devices of each segment: the
    intervals are cut at its segments' ends, each piece weighted by the devices held in it (the job's
    largest count where no segment covers it), and the pieces summed back.  Inside a segment smaller
    than the job's largest, the retained steps ran on a smaller mesh: their time above the fault-free
    step time of the full mesh is not slow-step time -- P meets it as the smaller mesh's scaling
    (``elastic_scaling_device_s``: the steps' device-time less the full mesh's fault-free device-time).

    ``jobs`` receives the sum over the windows of each :data:`_WINDOW_COLUMNS` column (with one
    interval, its own), ``fault_free_step_s`` (one per job, estimated on its whole timeline),
    ``steps_in_timeline`` and the slice efficiencies of jobs that log device counts
    (:data:`_SLICE_COLUMNS`).  Every column is written once, by position (``jobs`` has one row per job
    id); a steps table whose job ids are a categorical is counted by its codes.

    Returns
    -------
    list of dict
        Per window, :data:`_WINDOW_COLUMNS` -> values in ``jobs``' row order.
    """
    from fleetlib.runtime import NO_TIME, runtime_goodput_windows, slice_integrals

    n = len(jobs)
    per_window = [{c: np.zeros(n) for c in _WINDOW_COLUMNS} for _ in range(len(intervals))]
    fault_free = np.zeros(n)
    clean_end = np.zeros(n, dtype=bool)  # the timeline ended cleanly (the runtime rung's clean-end rule)
    steps_in_timeline = np.zeros(n, dtype=np.int64)
    slices = {c: np.zeros(n) for c in _SLICE_COLUMNS}
    slices["stepping_slice_efficiency"][:] = np.nan
    slices["available_slice_efficiency"][:] = np.nan
    if not events.empty:
        segments = jobs["device_segments"] if "device_segments" in jobs.columns else None
        pieces, owner = _cut_at_segments(intervals, segments)
        completed_at = None
        if "completed_ns" in jobs.columns:  # the scheduler's COMPLETED: an end marker of the clean-end rule
            ns = jobs["completed_ns"].to_numpy(np.int64)
            done = ns != NO_TIME
            completed_at = pd.Series(pd.to_datetime(ns[done], unit="ns", utc=True), index=jobs.index[done])
        measured = runtime_goodput_windows(steps, events, windows=pieces, definition="retrospective",
                                           source="fleet timelines", completed_at=completed_at)
        first = measured[0].per_job
        pos = jobs.index.get_indexer(first.index.astype(str))
        have = pos >= 0
        at = pos[have]
        d = jobs["devices"].to_numpy()[at].astype(float)
        seg = None
        if segments is not None:
            listed = segments.to_numpy()[at]
            seg = [(i, v) for i, v in enumerate(listed.tolist()) if isinstance(v, tuple)]
        for (p0, p1), k, m in zip(pieces, owner, measured, strict=True):
            cols = per_window[k]
            per = m.per_job

            def value(column: str, per: pd.DataFrame = per) -> np.ndarray:
                return per[column].to_numpy()[have]

            w = d if seg is None else _devices_in(seg, d, p0, p1)
            smaller = w < d
            for cat in RUNG_LOSSES:
                cols[cat][at] += value(cat) * w
            cols["timeline_unattributed"][at] += value("unattributed") * w
            cols["timeline_held_device_s"][at] += value("held_s") * w
            prod = value("productive")
            slow = value("slow_step")
            cols["rung_productive_device_s"][at] += prod * w
            # inside productive: above the job's fault-free step time; a smaller mesh's steps are P's scaling
            cols["step_time_above_baseline"][at] += np.where(smaller, 0.0, slow * w)
            cols["elastic_scaling_device_s"][at] += np.where(smaller, prod * w - (prod - slow) * d, 0.0)
            v = per["retained_steps"].astype(float).to_numpy()[have]
            cols["retained_steps"][at] += np.where(np.isnan(v), 0.0, v)
        v = first["fault_free_step_s"].astype(float).to_numpy()[have]
        fault_free[at] = np.where(np.isnan(v), 0.0, v)
        clean_end[at] = first["clean_end"].to_numpy(bool)[have]
        counts = _job_row_counts(steps["job_id"]) if len(steps) else pd.Series(dtype=np.int64)
        pos = jobs.index.get_indexer(counts.index)
        steps_in_timeline[pos[pos >= 0]] = counts.to_numpy()[pos >= 0]
        series = measured[0].device_series
        if not series.empty:
            ns = [(a.as_unit("ns").value, b.as_unit("ns").value) for a, b in intervals]
            _slice_columns(slice_integrals(series, ns), jobs, slices)
    for col, values in _window_total(per_window).items():
        jobs[col] = values
    jobs["fault_free_step_s"] = fault_free
    jobs["clean_end"] = clean_end
    jobs["retained_steps"] = jobs.pop("retained_steps")  # the column order of the job table
    jobs["steps_in_timeline"] = steps_in_timeline
    for col, values in slices.items():
        jobs[col] = values
    return per_window


#: Per job, the slice efficiencies of a timeline that logs device counts (NaN: none) and their
#: time integrals in the scheduler's devices (device-s; 0: none), over the measured window.
_SLICE_COLUMNS: tuple[str, ...] = (
    "stepping_slice_efficiency", "available_slice_efficiency", "slice_stepping_device_s",
    "slice_available_device_s", "slice_total_device_s",
)


def _slice_columns(sums: pd.DataFrame, jobs: pd.DataFrame, out: dict[str, np.ndarray]) -> None:
    """Write the jobs' slice efficiencies, their integrals scaled to the scheduler's devices, into ``out``.

    ml-goodput-measurement's efficiencies per job (devices stepping, held, over the most devices
    held, time-weighted); in device-seconds each job's counts are scaled so that its most devices are
    the scheduler's largest count, and the fleet-wide efficiencies are the ratios of the sums.
    """
    pos = jobs.index.get_indexer(sums.index)
    keep = (pos >= 0) & (sums["total_s"].to_numpy() > 0)
    at = pos[keep]
    s = sums[keep]
    scale = jobs["devices"].to_numpy(float)[at] / s["most"].to_numpy()
    out["stepping_slice_efficiency"][at] = (s["stepping_s"] / s["total_s"]).to_numpy()
    out["available_slice_efficiency"][at] = (s["held_s"] / s["total_s"]).to_numpy()
    out["slice_stepping_device_s"][at] = s["stepping_s"].to_numpy() * scale
    out["slice_available_device_s"][at] = s["held_s"].to_numpy() * scale
    out["slice_total_device_s"][at] = s["total_s"].to_numpy() * scale


def _device_segments(attempts: pd.DataFrame) -> pd.Series:
    """Return, per job whose allocation rows held different device counts, its held segments.

    Parameters
    ----------
    attempts
        :func:`fleetlib.scheduling.held_time` by attempt (one row per allocation row, clipped to the window).

    Returns
    -------
    pandas.Series
        Index ``job_id`` (text); each value a tuple ``(start_ns, end_ns, devices)`` of arrays, the rows'
        gang-complete -> release stretches in time order.  Only jobs whose counts vary.
    """
    held = attempts[attempts["held_device_s"] > 0]
    ids = held["job_id"].astype(str)
    spread = held.groupby(ids)["devices"].agg(["min", "max"])
    vary = spread.index[spread["min"] != spread["max"]]
    out = {}
    for job in vary.tolist():
        rows = held[ids == job].sort_values("first_gang_complete")
        out[job] = (rows["first_gang_complete"].to_numpy(dtype="datetime64[ns]").astype(np.int64),
                    rows["last_release"].to_numpy(dtype="datetime64[ns]").astype(np.int64),
                    rows["devices"].to_numpy(float))
    return pd.Series(out, dtype=object)


def _cut_at_segments(intervals: list[Interval], segments: pd.Series | None
                     ) -> tuple[list[Interval], list[int]]:
    """Cut the intervals at the segments' ends (every elastic job's); return the pieces and their interval."""
    cuts: set[int] = set()
    if segments is not None:
        for v in segments.tolist():
            if isinstance(v, tuple):
                cuts.update(v[0].tolist())
                cuts.update(v[1].tolist())
    if not cuts:
        return list(intervals), list(range(len(intervals)))
    pieces: list[Interval] = []
    owner: list[int] = []
    for k, (a, b) in enumerate(intervals):
        inside = sorted(c for c in cuts if a.as_unit("ns").value < c < b.as_unit("ns").value)
        edges = [a, *(pd.Timestamp(c, tz="UTC") for c in inside), b]
        for x, y in itertools.pairwise(edges):
            pieces.append((x, y))
            owner.append(k)
    return pieces, owner


def _devices_in(segments: list[tuple[int, Any]], largest: np.ndarray, a: pd.Timestamp, b: pd.Timestamp
                ) -> np.ndarray:
    """Return each job's devices held in ``[a, b)`` (a piece no segment end cuts).

    ``segments``: (position, :func:`_device_segments` value) of the elastic jobs; theirs is the count
    of the segment holding the piece, else (and for every other job) the largest count.
    """
    mid = (a.as_unit("ns").value + b.as_unit("ns").value) // 2
    out = largest.copy()
    for i, (starts, ends, devices) in segments:
        hit = np.flatnonzero((starts <= mid) & (mid < ends))
        if hit.size:
            out[i] = devices[hit[0]]
    return out


def _window_total(per_window: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Return each column summed over the windows, one window after another (one window: its own arrays).

    Parameters
    ----------
    per_window
        Per window, column -> values per job.

    Returns
    -------
    dict
        Column -> values per job.
    """
    if len(per_window) == 1:
        return dict(per_window[0])
    return {c: np.cumsum(np.stack([w[c] for w in per_window]), axis=0)[-1] for c in per_window[0]}


def _job_row_counts(ids: pd.Series) -> pd.Series:
    """Return the rows of each job id (as text) of a job-id column, text or categorical."""
    if isinstance(ids.dtype, pd.CategoricalDtype):
        codes = np.asarray(ids.array.codes)
        counts = np.bincount(codes, minlength=len(ids.cat.categories))
        used = counts > 0
        return pd.Series(counts[used], index=pd.Index([str(c) for c in ids.cat.categories[used]]))
    counts = ids.value_counts()
    counts.index = counts.index.astype(str)
    return counts


def _runtime_columns(jobs: pd.DataFrame) -> None:
    """Zombies, unobserved time, the residual and the corrected productive time, per job."""
    obs = jobs["observed"].to_numpy()
    zombie = obs & (jobs["steps_in_timeline"].to_numpy() == 0)
    jobs["zombie_job"] = zombie
    held = jobs["held_device_s"].to_numpy(float)
    jobs["unobserved"] = np.where(obs, 0.0, held)
    jobs["zombie"] = np.where(zombie, held, 0.0)
    for col in (
        *RUNG_LOSSES,
        "timeline_unattributed",
        "rung_productive_device_s",
        "step_time_above_baseline",
        "elastic_scaling_device_s",
    ):
        jobs.loc[zombie, col] = 0.0
    jobs["reconciliation_residual"] = np.where(
        obs & ~zombie, held - jobs["timeline_held_device_s"].to_numpy(), 0.0
    )
    jobs["productive_device_s"] = jobs["rung_productive_device_s"]  # R's numerator, slow steps included
    with np.errstate(invalid="ignore", divide="ignore"):
        jobs["runtime_goodput"] = np.where(held > 0, jobs["productive_device_s"].to_numpy() / held, np.nan)


@dataclass(frozen=True)
class _ModelConfigs:
    """The model configurations of the held jobs, read once per file (:func:`_model_configs`).

    ``pos``: each configured job's row in the jobs table (the manifest's order); ``codes``: its config
    (index into the per-config arrays); ``per_step``: ideal device-s per step (useful FLOPs / peak
    FLOP/s); ``stated``: the devices each config states; ``paths``, ``names``, ``labels``: per config.
    """

    job_ids: list[str]
    pos: np.ndarray
    codes: np.ndarray
    paths: list[str]
    per_step: np.ndarray
    stated: np.ndarray
    names: np.ndarray
    labels: list[str]


def _model_configs(jobs: pd.DataFrame, man: FleetManifest) -> _ModelConfigs | None:
    """Read the model configs of the held jobs (None: no held job has one).

    Needs only the scheduler's jobs, not their timelines: the Dask engine reads them while the timeline
    tasks run.  At fleet scale 200,000 jobs share a few dozen configs: one read per config file, and
    every per-job value is a per-config array taken by each job's config code.
    """
    from fleetlib.program import load_model_config

    if not man.models:
        return None
    # the held jobs among the manifest's, in the manifest's order: one hash-table look-up of all ids
    every = np.empty(len(man.models), dtype=object)
    every[:] = list(man.models)
    where = jobs.index.get_indexer(every)
    held = where >= 0
    if not held.any():
        return None
    job_ids = every[held].tolist()
    configs = np.empty(len(every), dtype=object)
    configs[:] = list(man.models.values())
    # each distinct path named once (a fleet's jobs share a few dozen: factorised by the path's text)
    text = np.fromiter(map(str, configs[held]), dtype=object, count=len(job_ids))
    codes, paths_index = pd.factorize(text, sort=True)
    paths = paths_index.tolist()
    cfgs = [load_model_config(p) for p in paths]  # a path or a URL (read through fsspec)
    return _ModelConfigs(
        job_ids=job_ids,
        pos=where[held],
        codes=codes.astype(np.intp),
        paths=paths,
        # ideal device-s per step: useful FLOPs / peak FLOP/s
        per_step=np.array([c["useful_flops_per_step"] / c["peak"].peak_flops_per_s for c in cfgs]),
        stated=np.array([int(c["devices"]) for c in cfgs]),
        names=np.array([f"{c['name']} / {c['devices']} devices" for c in cfgs], dtype=object),
        labels=[c["convention"].label for c in cfgs],
    )


def _program_columns(jobs: pd.DataFrame, man: FleetManifest, ledger: Ledger,
                     configs: _ModelConfigs | Exception | None) -> dict[str, str]:
    """Ideal device-s per job from its model config; P and its partition per job; conventions.

    ``configs``: :func:`_model_configs` of these jobs, or the error reading them raised (raised here,
    so that a bundle's timeline errors still come first).
    """
    if isinstance(configs, Exception):
        raise configs
    n = len(jobs)
    ideal_device_s = np.full(n, np.nan)
    model = np.full(n, None, dtype=object)
    model_name = np.full(n, None, dtype=object)
    conventions: dict[str, str] = {}
    if configs is not None:
        c = configs
        pos, codes = c.pos, c.codes
        devices = jobs["devices"].to_numpy()[pos].astype(int)
        stated = c.stated[codes]
        for i in np.flatnonzero(stated != devices):
            rel = man.relative(c.paths[codes[i]])
            ledger.flag(
                "model_devices_mismatch",
                f"model config {rel} states {int(stated[i])} devices, the scheduler held "
                f"{int(devices[i])}; ideal device-time does not depend on it (useful FLOPs / peak)",
                file=rel,
                job_id=c.job_ids[i],
            )
        retained = jobs["retained_steps"].to_numpy(float)[pos]
        ideal_device_s[pos] = retained * c.per_step[codes]
        model[pos] = np.array([man.relative(p) for p in c.paths], dtype=object)[codes]
        model_name[pos] = c.names[codes]
        conventions = dict(zip(c.job_ids, [c.labels[k] for k in codes.tolist()], strict=True))
    jobs["ideal_device_s"] = ideal_device_s
    jobs["model"] = pd.Series(model, index=jobs.index, dtype=object)  # None where no config
    jobs["model_name"] = pd.Series(model_name, index=jobs.index, dtype=object)
    has = jobs["ideal_device_s"].notna().to_numpy()
    prod = jobs["productive_device_s"].to_numpy(float)
    above = jobs["step_time_above_baseline"].to_numpy(float)
    ideal = jobs["ideal_device_s"].fillna(0.0).to_numpy()
    jobs["program_unobserved"] = np.where(has, 0.0, prod - above)
    jobs["below_ideal_rate"] = np.where(has, prod - above - ideal, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        jobs["program_goodput"] = np.where(has & (prod > 0), ideal / prod, np.nan)
    if configs is not None:
        _refuse_mfu_above_one(jobs, configs)
    return conventions


def _refuse_mfu_above_one(jobs: pd.DataFrame, configs: _ModelConfigs) -> None:
    """Refuse the first job (in job order) whose ideal device-s exceed its productive device-s (MFU > 1).

    One line naming the job's model config file and the job: its FLOP count, the device's peak or
    the precision is wrong for the steps measured.
    """
    from fleetlib.program import UtilizationAboveOneError

    ideal = jobs["ideal_device_s"].to_numpy(float)
    prod = jobs["productive_device_s"].to_numpy(float)
    bad = np.flatnonzero(np.nan_to_num(ideal) > prod * (1.0 + 1e-9) + 1e-9)
    if not len(bad):
        return
    i = int(bad[0])
    at = int(np.flatnonzero(configs.pos == i)[0])  # the job's entry among the configured ones
    job = str(jobs.index[i])
    mfu = ideal[i] / prod[i] if prod[i] > 0 else float("inf")
    raise UtilizationAboveOneError(
        f"job {job!r}: MFU = {mfu:.4g} exceeds 1 (ideal {ideal[i]:.6g} device-s from "
        f"{int(jobs['retained_steps'].iloc[i])} retained steps, productive {prod[i]:.6g} device-s) under "
        f"convention {configs.labels[configs.codes[at]]!r}: the model config's useful FLOPs per step, the "
        "device's peak or its precision is wrong",
        file=str(configs.paths[configs.codes[at]]),
        field="useful_flops_per_step",
    )


def _traces(
    jobs: pd.DataFrame, man: FleetManifest, ledger: Ledger, client: Any = None, progress: bool = False
) -> tuple[dict[str, dict[str, Any]], pd.DataFrame]:
    """Trace partition of each traced job, scaled to its productive device-s, with the sample's coverage.

    With a Dask ``client`` each trace file is parsed as one task (the merge is the serial one).  Also
    returns each traced job's kernel device-time over its traced steps (``job_id, name, kind,
    device_us``), for :func:`fleetlib.fleet.sampling.kernel_ranking`.
    """
    from tqdm.auto import tqdm

    from fleetlib.program import (
        FLEET_LAW_TERMS,
        fleet_law_terms,
        pipeline_ranks,
        read_traces,
        trace_files,
        traced_step_partition,
    )

    out = {}
    kernel_rows = []
    traced = [(job, paths) for job, paths in man.traces.items() if job in jobs.index]
    for job, paths in tqdm(traced, desc="fleet traces", unit="job", file=sys.stderr, disable=not progress):
        files = trace_files(list(paths), ledger=ledger)
        ts = read_traces(files, cache=False, progress=False, client=client)
        ledger.extend(ts.ledger)
        # the step partition alone (program_summary's stragglers, audit and JSON are not used here),
        # its values as floats, as program_summary's records give them
        matched, _, part = traced_step_partition(ts.kernels, ts.steps)
        sums = part[list(TRACE_PARTS)].astype(float).sum()
        wall = float(part["step_wall_us"].astype(float).sum())
        prod = float(jobs.loc[job, "productive_device_s"])
        law = fleet_law_terms(part, pipeline=pipeline_ranks(matched))[list(FLEET_LAW_TERMS)].sum()
        retained = float(jobs.loc[job, "retained_steps"]) * float(jobs.loc[job, "devices"])
        out[job] = {
            "files": [man.relative(f) for f in files],
            "rank_steps_traced": len(part),
            "coverage": len(part) / retained if retained > 0 else None,
            "shares": {p: float(sums[p]) / wall for p in TRACE_PARTS},
            "partition_device_s": {p: float(sums[p]) / wall * prod for p in TRACE_PARTS},
            # the same steps regrouped into the Fleet Law's terms, scaled alike (they add up to prod)
            "fleet_law_shares": {t: float(law[t]) / wall for t in FLEET_LAW_TERMS},
            "fleet_law_device_s": {t: float(law[t]) / wall * prod for t in FLEET_LAW_TERMS},
            "note": "the traced steps' partition of step wall time, scaled to the job's productive "
            "device-time (an explanation of P's loss, sampled; not a second partition of P)",
        }
        k = ts.kernels[ts.kernels["step"].notna().to_numpy(dtype=bool)]
        per = k.groupby([k["name"].astype(str), k["kind"].astype(str)], sort=True)["dur_us"].sum()
        kernel_rows.append(pd.DataFrame({"job_id": job, "name": per.index.get_level_values(0),
                                         "kind": per.index.get_level_values(1),
                                         "device_us": per.to_numpy(float)}))
        out[job]["traced_device_us"] = wall
    kernels = (pd.concat(kernel_rows, ignore_index=True) if kernel_rows
               else pd.DataFrame(columns=["job_id", "name", "kind", "device_us"]))
    return out, kernels


def _kernel_ranking(jobs: pd.DataFrame, allocations: pd.DataFrame, man: FleetManifest,
                    traces: Mapping[str, dict[str, Any]], kernels: pd.DataFrame) -> pd.DataFrame:
    """Rank the traced jobs' kernels fleet-wide, each traced job weighed by its stratum's timed jobs."""
    if not traces:
        return kernel_ranking(kernels, pd.DataFrame(columns=["traced_device_us"]))
    timed = jobs[jobs["retained_steps"].to_numpy(float) > 0][["devices", "retained_steps"]].copy()
    first = allocations.assign(job_id=allocations["job_id"].astype(str)).sort_values("attempt")
    first = first.drop_duplicates("job_id").set_index("job_id")
    timed["gang_complete"] = first["gang_complete"].reindex(timed.index)
    fields = job_fields(man, allocations, timed.index, ["software_version", "architecture"])
    for col, values in fields.items():
        timed[col] = values.to_numpy()
    label = stratum_labels(trace_strata(timed))
    traced = pd.DataFrame(
        {
            "traced_device_us": [traces[j]["traced_device_us"] for j in traces],
            "productive_device_s": [float(jobs.loc[j, "productive_device_s"]) for j in traces],
            "stratum": label.reindex(list(traces)).to_numpy(),
        },
        index=list(traces),
    )
    traced = traced[traced["stratum"].notna()]
    traced["stratum_jobs"] = traced["stratum"].map(label.value_counts()).to_numpy(float)
    return kernel_ranking(kernels, traced)


def _timelines_into_jobs(
    man: FleetManifest,
    jobs: pd.DataFrame,
    allocations: pd.DataFrame,
    scheduled: set[str],
    intervals: list[Interval],
    ledger: Ledger,
    client: Any,
    progress: bool,
    submitted: list[Any] | None = None,
) -> list[dict[str, np.ndarray]]:
    """Read the timelines, join them to the scheduler's jobs and add the per-job runtime columns.

    Without a client every file is read here and :func:`_runtime_per_job` runs once over all joined
    timelines; with one, each file is a Dask task (:func:`dask_runtime_per_job`; ``submitted``: the
    tasks, already submitted) and the per-job rows are written into ``jobs`` -- the same columns, the
    same numbers.  Returns the runtime columns per interval of ``intervals`` (in ``jobs``' row
    order); ``jobs`` holds their sum.  A joined timeline outside its allocation (``allocations``, the
    scheduler's) by a time-zone offset is flagged, or refused when every job shows it
    (:func:`check_timezones`).
    """
    if client is None:
        steps, events, joined, owner = read_timelines(man, set(jobs.index), scheduled, ledger, progress)
        spans = timeline_spans(steps, events)
    else:
        runtime, windows, joined, owner, spans = dask_runtime_per_job(
            man, jobs, scheduled, intervals, ledger, client, progress=progress, submitted=submitted
        )
    _check_job_keys(man, owner, joined, ledger)
    check_timezones(man, allocations, spans, joined, ledger)
    # one pass over the ids as Python strings (an Arrow-backed index's isin converts each value)
    timeline = [joined.get(j) for j in jobs.index.tolist()]
    jobs["observed"] = np.fromiter((t is not None for t in timeline), dtype=bool, count=len(timeline))
    jobs["timeline"] = timeline
    if client is None:
        return _runtime_per_job(steps, events, intervals, jobs)
    before = set(jobs.columns)
    per_window = _runtime_per_job(pd.DataFrame(), pd.DataFrame(), intervals, jobs)  # every column at 0
    pos = jobs.index.get_indexer(runtime.index)  # every measured job is held: one position each
    for col in [c for c in runtime.columns if c not in before]:
        values = jobs[col].to_numpy(copy=True)
        values[pos] = runtime[col].to_numpy(dtype=values.dtype)
        jobs[col] = values
    if len(per_window) == 1:  # the one window is the whole
        return [{c: jobs[c].to_numpy() for c in _WINDOW_COLUMNS}]
    for cols, measured in zip(per_window, windows, strict=True):
        for c in _WINDOW_COLUMNS:
            cols[c][pos] = measured[c]
    return per_window


# ---------------------------------------------------------------------------------------------------
# The Dask engine: one task per timeline file
# ---------------------------------------------------------------------------------------------------


def _warm_worker() -> None:
    """Import what a timeline task runs and load the runtime kernel (on a worker, before its first task)."""
    import pyarrow.parquet  # noqa: F401

    import fleetlib.program  # noqa: F401  (the trace step's tasks, after the timelines)
    from fleetlib.runtime import warm_up

    warm_up()  # loads the compiled kernel from numba's cache (compiles it, the first time)


def timeline_task(fmt: str, path: str, job_map: Mapping[str, str], held: pd.DataFrame,
                  intervals: list[Interval]) -> dict[str, Any]:
    """Read one timeline file and measure the jobs of it the scheduler held in the window (one Dask task).

    The jobs with their steps and their events in the file are measured.  A job with only one of
    them here (its steps or events may be in another file, or it has none: a zombie) is measured
    apart, provisionally: :func:`dask_runtime_per_job` keeps that result when no other file holds
    the rest of the job's timeline, and otherwise measures it with the files it shares jobs with
    (:func:`timeline_group_task`).

    Parameters
    ----------
    fmt
        The manifest's timeline format.
    path
        The file.
    job_map
        Timeline job id -> scheduler job id.
    held
        The scheduler's jobs held in the window (index ``job_id``; ``devices``), scattered once to
        every worker (its index keeps its hash table between tasks).
    intervals
        The measured window's intervals ``[start, end)``, in order: the window itself, or its pieces
        between calendar boundaries and around excluded time.

    Returns
    -------
    dict
        ``steps_jobs`` and ``events_jobs`` (the sorted distinct job ids of each table),
        ``unknown_rows`` (rows of the jobs not held in the window), ``runtime_jobs`` (the joined
        jobs with steps and events here, measured), ``runtime`` (only the columns the runtime rung
        adds, as plain arrays), ``runtime_windows`` (with more than one interval: the window columns
        per interval; else empty), ``half`` (the jobs with only steps or only events here),
        ``half_result`` (theirs measured alone, the keys above; None when that raised), ``spans``
        (:func:`timeline_spans` of the held jobs here) and the reader's ``ledger``.
    """
    s, e, tl_ledger = read_timeline_file(fmt, path, job_map)
    steps_counts, events_counts = _job_row_counts(s["job_id"]), _job_row_counts(e["job_id"])
    steps_jobs, events_jobs = sorted(steps_counts.index.tolist()), sorted(events_counts.index.tolist())
    in_file = sorted(set(steps_jobs) | set(events_jobs))
    # held's index keeps its hash table between tasks (held is scattered once to each worker): a
    # lookup per job costs ~0.5 us; a get_indexer of another dtype would rebuild it (~50 ms)
    index = held.index
    unknown = [j for j in in_file if j not in index]
    rows: dict[str, int] = {}
    if unknown:
        counts = steps_counts.add(events_counts, fill_value=0)
        rows = {j: int(counts.get(j, 0)) for j in unknown}
    half: list[str] = []
    half_result: dict[str, Any] | None = None
    if steps_jobs == events_jobs:  # every job whole: the tables as read
        measured = _measure_held(s, e, in_file, held, intervals)
    else:
        both = set(steps_jobs) & set(events_jobs)
        half = [j for j in in_file if j not in both]
        measured = _measure_held(s, e, sorted(both), held, intervals, only=True)
        try:
            half_result = _measure_held(s, e, half, held, intervals, only=True)
        except FleetlibError:  # measured with the rest of their timelines, or raised there
            half_result = None
    spans = timeline_spans(s, e)
    spans = spans[spans.index.isin(index)]
    return {"steps_jobs": steps_jobs, "events_jobs": events_jobs, "unknown_rows": rows, **measured,
            "half": half, "half_result": half_result, "spans": spans, "ledger": tl_ledger}


def timeline_group_task(fmt: str, paths: list[str], job_map: Mapping[str, str], held: pd.DataFrame,
                        intervals: list[Interval], jobs: list[str]) -> dict[str, Any]:
    """Read the files of timelines split across files and measure those jobs together (one Dask task).

    Each file is read alone, as the pandas engine reads it (its ledger was booked by its
    :func:`timeline_task`), and their tables are joined before the measurement.

    Parameters
    ----------
    fmt, job_map, held, intervals
        As :func:`timeline_task`'s.
    paths
        The files of one group, in manifest order.
    jobs
        The jobs to measure: those with only steps or only events in one of the files.

    Returns
    -------
    dict
        ``runtime_jobs``, ``runtime`` and ``runtime_windows``, as :func:`timeline_task`'s.
    """
    read = [read_timeline_file(fmt, path, job_map) for path in paths]
    s = pd.concat([r[0] for r in read], ignore_index=True)
    e = pd.concat([r[1] for r in read], ignore_index=True)
    return _measure_held(s, e, sorted(jobs), held, intervals, only=True)


#: The scheduler's columns each timeline task receives (``device_segments`` only when a job resized).
_HELD_COLUMNS: tuple[str, ...] = ("devices", "device_segments", "completed_ns")


def _completed_ns(allocations: pd.DataFrame, index: pd.Index) -> np.ndarray:
    """Per job of ``index``: its last attempt's release when the scheduler recorded it COMPLETED.

    UTC nanoseconds, ``NO_TIME`` where the last attempt ended otherwise: the fleet walk's input to the
    clean-end rule (:func:`fleetlib.runtime.runtime_goodput_windows`' ``completed_at``).
    """
    from fleetlib.runtime import NO_TIME

    out = np.full(len(index), NO_TIME, dtype=np.int64)
    if "end_state" not in allocations.columns or not len(allocations):
        return out
    last = allocations.sort_values(["job_id", "attempt"], kind="stable")
    last = last.drop_duplicates("job_id", keep="last")
    done = last[(last["end_state"].astype(str) == "completed") & last["release"].notna()]
    pos = index.get_indexer(done["job_id"].astype(str))
    ns = done["release"].dt.as_unit("ns").astype("int64").to_numpy()
    out[pos[pos >= 0]] = ns[pos >= 0]
    return out


def _measure_held(s: pd.DataFrame, e: pd.DataFrame, jobs: list[str], held: pd.DataFrame,
                  intervals: list[Interval], *, only: bool = False) -> dict[str, Any]:
    """Measure the timelines of the jobs of ``jobs`` the scheduler held; only the columns the rung adds.

    ``only``: the tables hold other jobs too (taken out); else ``jobs`` are every job of them.
    """
    index = held.index
    joined = [j for j in jobs if j in index]
    sub = held.loc[joined, [c for c in _HELD_COLUMNS if c in held.columns]].copy()
    if only or len(joined) < len(jobs):  # measure only the joined jobs (all of them: the tables as read)
        keep = set(joined)
        s = s[s["job_id"].isin(keep)].reset_index(drop=True)
        e = e[e["job_id"].isin(keep)].reset_index(drop=True)
    per_window = _runtime_per_job(s, e, intervals, sub)
    # only the columns the runtime rung added, as plain arrays: no frame of objects goes back
    return {
        "runtime_jobs": joined,
        "runtime": {c: sub[c].to_numpy() for c in sub.columns if c not in _HELD_COLUMNS},
        "runtime_windows": per_window if len(per_window) > 1 else [],
    }


def _split_groups(parts: Mapping[int, Iterable[str]]) -> list[list[int]]:
    """Group the files that share a job; each group in file order, the groups by their first file.

    Parameters
    ----------
    parts
        File index -> the job ids of it (steps and events).

    Returns
    -------
    list of list of int
        The groups of file indices.
    """
    parent: dict[int, int] = {i: i for i in parts}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i in sorted(parts):
        for job in parts[i]:
            j = first.setdefault(job, i)
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in sorted(parts):
        groups.setdefault(root(i), []).append(i)
    return [groups[k] for k in sorted(groups)]


def _gather(client: Any, futures: list[Any], progress: bool, on_result: Callable[[int, Any], None]) -> None:
    """Hand each future's result to ``on_result(i, result)`` in submission order, as soon as it can be.

    The results are fetched as the tasks complete (``as_completed(..., with_results=True)``: the
    transfer runs on the client's communication thread, not as a blocking call per task) and handed
    over in order: result ``i`` as soon as it and every result before it are back, so the caller's
    work on the early files overlaps the workers' work on the later ones.  A task's error is raised
    when its turn comes -- the first failing file in manifest order, as the pandas engine reads them
    -- and the tasks not yet handed over are then cancelled.  A tqdm bar on stderr counts completions.
    """
    from distributed import as_completed
    from tqdm.auto import tqdm

    index = {f.key: i for i, f in enumerate(futures)}
    back: dict[int, Any] = {}  # completed, not yet handed over
    turn = 0  # the next result to hand over
    try:
        with tqdm(
            total=len(futures), desc="fleet timelines", unit="file", file=sys.stderr, disable=not progress
        ) as bar:
            for fut, result in as_completed(futures, with_results=True, raise_errors=False):
                back[index[fut.key]] = (fut, result)
                bar.update(1)
                while turn in back:
                    done, value = back.pop(turn)
                    if done.status != "finished":  # an error (or a cancellation): raised as the task's own
                        done.result()
                    on_result(turn, value)
                    turn += 1
    finally:
        live = [f for f in futures if f.status not in ("finished", "error")]
        if live:
            client.cancel(live)


def submit_timeline_tasks(man: FleetManifest, jobs: pd.DataFrame, intervals: list[Interval],
                          client: Any) -> list[Any]:
    """Submit one :func:`timeline_task` per timeline file of ``man`` (manifest order); return the futures.

    Parameters
    ----------
    man
        The manifest.
    jobs
        The scheduler's jobs held in the window (index ``job_id``; ``devices``): scattered once to
        every worker.
    intervals
        The measured window's intervals (:func:`timeline_task`).
    client
        A ``distributed.Client``.

    Returns
    -------
    list of distributed.Future
        One per timeline file; :func:`dask_runtime_per_job` (``submitted=``) gathers them.
    """
    import uuid

    # the tasks read the held jobs and devices; a random key (hash=False): dask would otherwise hash
    # the whole frame, 222,845 text ids at fleet scale, before the first task can be submitted
    held = client.scatter(jobs[[c for c in _HELD_COLUMNS if c in jobs.columns]], broadcast=True, hash=False)
    job_map = dict(man.job_map)
    # keys unique to this submission: on a client that lives on, an earlier walk's task of the same
    # file name (finished, or failed) must not stand in for this one
    run = uuid.uuid4().hex[:12]
    return [
        client.submit(
            timeline_task,
            man.timeline_format,
            str(path),
            job_map,
            held,
            list(intervals),
            key=f"fleet-timeline-{run}-{i}-{man.relative(path)}",
            pure=False,
        )
        for i, path in enumerate(man.timeline_files)
    ]


def dask_runtime_per_job(
    man: FleetManifest,
    jobs: pd.DataFrame,
    scheduled: set[str],
    intervals: list[Interval],
    ledger: Ledger,
    client: Any,
    *,
    progress: bool = False,
    submitted: list[Any] | None = None,
) -> tuple[pd.DataFrame, list[dict[str, np.ndarray]], dict[str, str], dict[str, str], pd.DataFrame]:
    """Measure every timeline on Dask (a task per file, a task per group of split files); return the columns.

    Parameters
    ----------
    man
        The manifest.
    jobs
        The scheduler's jobs held in the window (index ``job_id``; ``pool``, ``devices``,
        ``held_device_s``).
    scheduled
        Every job id of the scheduler records (to tell jobs held outside the window from unknown ones).
    intervals
        The measured window's intervals (:func:`timeline_task`).
    ledger
        Receives the timeline readers' ledgers (in manifest order) and the join's flags.
    client
        A ``distributed.Client``.
    progress
        Show a progress bar over files on stderr.
    submitted
        The tasks :func:`submit_timeline_tasks` submitted for these jobs (the caller's own work ran
        meanwhile); None submits them here.

    Returns
    -------
    tuple of (DataFrame, list, dict, dict, DataFrame)
        The runtime columns :func:`_runtime_per_job` adds, for the joined jobs (index ``job_id``);
        with more than one interval, per interval the window columns of those jobs (their order; else
        empty); ``joined`` (job -> file, jobs held in the window), ``owner`` (job -> file, every job of the
        timelines) and the held jobs' :func:`timeline_spans` over every file.

    Raises
    ------
    InputError
        Two timelines for one job.
    """
    futures = submitted if submitted is not None else submit_timeline_tasks(man, jobs, intervals, client)
    owner: dict[str, str] = {}
    seen: dict[str, dict[str, str]] = {}  # "steps" | "events" -> job -> file
    rows: dict[str, int] = {}
    done: list[dict[str, Any]] = []  # the results with measured jobs, in manifest order
    spans: list[pd.DataFrame] = []

    def register(i: int, res: dict[str, Any]) -> None:  # in manifest order, while later files run
        ledger.extend(res["ledger"])
        rel = man.relative(man.timeline_files[i])
        _register_timeline(
            man, rel, {"steps": res["steps_jobs"], "events": res["events_jobs"]}, owner, seen,
            sorted_distinct=True,  # the task's sorted lists of distinct ids
        )
        for job, n in res["unknown_rows"].items():
            rows[job] = rows.get(job, 0) + n
        spans.append(res["spans"])
        _keep(res)
        if res["half"]:  # settled once every file is read
            half[i] = (res["half"], res["half_result"])

    def _keep(res: dict[str, Any]) -> None:
        if res["runtime_jobs"]:
            done.append({"runtime_jobs": res["runtime_jobs"], "runtime": res["runtime"],
                         "windows": res["runtime_windows"]})

    half: dict[int, tuple[list[str], dict[str, Any] | None]] = {}  # file -> jobs with steps or events only
    _gather(client, list(futures), progress, register)
    in_steps, in_events = seen.get("steps", {}), seen.get("events", {})
    # a job measured alone where its steps and events are in two files (or where that raised) is
    # measured again, with the files it shares jobs with: one task per group of files
    def split(job: str) -> bool:  # its steps in one file, its events in another
        return job in in_steps and job in in_events and in_steps[job] != in_events[job]

    redo = {i: ids for i, (ids, res) in half.items() if res is None or any(split(j) for j in ids)}
    for i in sorted(half.keys() - redo.keys()):
        _keep(half[i][1])  # no other file holds the rest of these jobs' timelines
    if redo:
        columns = [c for c in _HELD_COLUMNS if c in jobs.columns]
        held = client.scatter(jobs[columns], broadcast=True, hash=False)
        groups = [
            client.submit(timeline_group_task, man.timeline_format,
                          [str(man.timeline_files[i]) for i in group], dict(man.job_map), held,
                          list(intervals), sorted({j for i in group for j in redo[i]}), pure=False)
            for group in _split_groups(redo)
        ]
        for res in client.gather(groups):
            _keep(res)
    known = set(jobs.index.tolist())
    _flag_unknown_jobs(owner, known, scheduled, rows, ledger)
    joined = dict(owner)
    for j in owner.keys() - known:  # the few jobs the scheduler did not hold in the window
        del joined[j]
    index = pd.Index([j for r in done for j in r["runtime_jobs"]], name=jobs.index.name)
    runtime = pd.DataFrame(
        {c: np.concatenate([r["runtime"][c] for r in done]) for c in done[0]["runtime"]} if done else {},
        index=index,
    )
    windows = [
        {c: np.concatenate([np.zeros(0), *(r["windows"][w][c] for r in done)]) for c in _WINDOW_COLUMNS}
        for w in range(len(intervals))
    ] if len(intervals) > 1 else []
    spans_all = (pd.concat(spans).groupby(level=0).agg({"first": "min", "last": "max"})
                 if spans else timeline_spans(pd.DataFrame(), pd.DataFrame()))
    return runtime, windows, joined, owner, spans_all


# ---------------------------------------------------------------------------------------------------
# Slices: calendar windows and segments of the fleet
# ---------------------------------------------------------------------------------------------------

#: The calendar windows :func:`measure_fleet` measures by (``by=``).
BY: tuple[str, ...] = ("day", "week")
#: The job fields every bundle can be segmented by (``segment_by=``); a bundle adds the fields its
#: manifest states per job (``contract.jobs``) and the text columns its scheduler records carry.
SEGMENT_FIELDS: tuple[str, ...] = ("pool", "architecture", "software_version")


def calendar_windows(window: Window, by: str) -> list[tuple[str, pd.Timestamp, pd.Timestamp]]:
    """Return the UTC calendar days or weeks that meet a window, each clipped to it.

    Parameters
    ----------
    window
        A measured window.
    by
        ``"day"`` (UTC midnight to midnight; label ``YYYY-MM-DD``) or ``"week"`` (ISO weeks, Monday
        00:00 UTC; label ``YYYY-Www``).

    Returns
    -------
    list of (str, Timestamp, Timestamp)
        Label, start and end of each calendar window, in order; the first and last clipped to the
        window, so that they tile it.

    Raises
    ------
    DomainError
        Another ``by``; a nominal window.
    """
    if by not in BY:
        raise DomainError(f"by must be one of {list(BY)} (or None); got {by!r}")
    if window.start is None or window.end is None:
        raise DomainError("measuring by calendar window needs a measured window (start and end)")
    first = window.start.normalize()
    step = pd.Timedelta(days=1)
    if by == "week":
        first -= pd.Timedelta(days=first.weekday())
        step = pd.Timedelta(days=7)
    out = []
    t = first
    while t < window.end:
        a, b = max(t, window.start), min(t + step, window.end)
        iso = t.isocalendar()
        label = t.strftime("%Y-%m-%d") if by == "day" else f"{iso[0]}-W{iso[1]:02d}"
        out.append((label, a, b))
        t += step
    return out


def _allocation_text_columns(alloc: pd.DataFrame) -> list[str]:
    """Return the text columns the records carry per allocation beyond the canonical ones (user, qos)."""
    from fleetlib.scheduling import ALLOCATION_COLUMNS

    return [c for c in alloc.columns
            if c not in ALLOCATION_COLUMNS and not pd.api.types.is_numeric_dtype(alloc[c].dtype)
            and not pd.api.types.is_datetime64_any_dtype(alloc[c].dtype)]


def _segment_fields(man: FleetManifest, alloc: pd.DataFrame) -> list[str]:
    """Return the job fields a bundle can be segmented by (:data:`SEGMENT_FIELDS` first)."""
    per_job = man.contract.get("jobs") if isinstance(man.contract, Mapping) else None
    stated = {str(k) for v in (per_job or {}).values() if isinstance(v, Mapping) for k in v}
    extra = sorted((stated | set(_allocation_text_columns(alloc))) - set(SEGMENT_FIELDS))
    return [*SEGMENT_FIELDS, *extra]


def job_fields(man: FleetManifest, allocations: pd.DataFrame, job_ids: pd.Index,
               fields: list[str] | None = None) -> pd.DataFrame:
    """Return each job's contract fields as text: what a fleet can be segmented by.

    A job's value of a field is, first found: ``pool`` from the scheduler records; the manifest's
    ``contract.jobs.JOB.FIELD``; for ``architecture``, the accelerator of the job's model config; a
    text column of the scheduler records (its first attempt's, e.g. ``user``); the fleet's own
    contract (the manifest's ``contract:`` merged with what the scheduler records state) when it
    states one value; else ``"not stated"``.

    Parameters
    ----------
    man
        The manifest.
    allocations
        The scheduler's canonical allocations.
    job_ids
        The jobs (text ids).
    fields
        The fields to return (default: every field the bundle carries, :data:`SEGMENT_FIELDS` first).

    Returns
    -------
    pandas.DataFrame
        One row per job (index ``job_ids``), one text column per field.

    Raises
    ------
    DomainError
        A field the bundle does not carry (the message lists those it does).
    """
    from fleetlib.contract import NOT_STATED, Contract, contract_from_records
    from fleetlib.program import load_model_config

    available = _segment_fields(man, allocations)
    wanted = available if fields is None else list(fields)
    unknown = [f for f in wanted if f not in available]
    if unknown:
        raise DomainError(f"cannot segment by {unknown[0]!r}: this bundle's jobs carry "
                          f"{', '.join(available)}")
    ids = [str(j) for j in job_ids.tolist()]
    alloc = allocations.assign(job_id=allocations["job_id"].astype(str))
    first = alloc.sort_values("attempt", kind="stable").drop_duplicates("job_id").set_index("job_id")
    per_job = man.contract.get("jobs") if isinstance(man.contract, Mapping) else None
    per_job = per_job if isinstance(per_job, Mapping) else {}
    fleet = Contract.from_mapping(man.contract).merged(contract_from_records(
        scheduler_files=man.scheduler_files, scheduler_format=man.scheduler_format, relative=man.relative))
    out = pd.DataFrame(index=pd.Index(ids, name=job_ids.name))
    for name in wanted:
        stated = fleet.get(name) if name != "pool" else None
        default = stated if isinstance(stated, str) else NOT_STATED
        values = pd.Series(default, index=out.index, dtype=object)
        if name in alloc.columns:  # pool, or a text column of the records
            values = first[name].reindex(ids).astype(object).where(lambda v: v.notna(), values)
        if name == "architecture" and man.models:
            paths = sorted(set(man.models.values()))
            accelerator = {p: str(load_model_config(p)["peak"].accelerator) for p in paths}
            arch = pd.Series({str(j): accelerator[p] for j, p in man.models.items()}, dtype=object)
            values = arch.reindex(ids).where(lambda v: v.notna(), values)
        if name != "pool":
            own = {str(j): v[name] for j, v in per_job.items() if isinstance(v, Mapping) and name in v}
            if own:
                values = pd.Series(own, dtype=object).reindex(ids).where(lambda v: v.notna(), values)
        out[name] = values.astype(str).to_numpy()
    return out


def _slice_jobs(jobs: pd.DataFrame, held: np.ndarray, columns: Mapping[str, np.ndarray], man: FleetManifest,
                configs: _ModelConfigs | None) -> pd.DataFrame:
    """Return the job table of one slice of the window: its held device-s and runtime parts, the rest derived.

    The walk's own per-job rules (:func:`_runtime_columns`, :func:`_program_columns`) on the slice's
    sums; whether a job is observed or a zombie, its devices and fault-free step time are the job's.
    """
    keep = ["pool", "devices", "observed", "timeline", "fault_free_step_s", "steps_in_timeline"]
    out = jobs[keep].copy()
    out["held_device_s"] = held
    for c, v in columns.items():
        out[c] = v
    _runtime_columns(out)
    _program_columns(out, man, Ledger(), configs)  # its flags are the whole walk's, already in its ledger
    return out


def _intervals(win: Window, by: str | None) -> tuple[list[Interval],
                                                     list[tuple[str, pd.Timestamp, pd.Timestamp, list[int]]]]:
    """Return the window's included intervals and, with ``by``, each calendar window's among them.

    The intervals are the window's pieces between its exclusions cut again at every calendar
    boundary; a calendar window lists the intervals inside it (a wholly excluded one has no row).
    """
    calendar = [] if by is None else calendar_windows(win, by)
    cuts = sorted({a for _, a, _ in calendar[1:]})
    intervals = []
    for a, b in win.pieces:
        inner = [t for t in cuts if a < t < b]
        intervals += list(itertools.pairwise([a, *inner, b]))
    slices = [(label, a, b, [i for i, (x, y) in enumerate(intervals) if a <= x and y <= b])
              for label, a, b in calendar]
    return intervals, [row for row in slices if row[3]]


def _window_rows(
    records: Any,
    jobs: pd.DataFrame,
    per_interval: list[dict[str, np.ndarray]],
    intervals: list[Interval],
    rows: list[tuple[str, pd.Timestamp, pd.Timestamp, list[int]]],
    man: FleetManifest,
    configs: _ModelConfigs | None,
    conventions: Mapping[str, str],
    exclusions: tuple[tuple[pd.Timestamp, pd.Timestamp], ...] = (),
) -> list[dict[str, Any]]:
    """Measure each calendar window as the sum of its intervals (``rows``: indices into ``intervals``).

    Per interval: S from the scheduling partition of that interval, each job's held device-s
    clipped to it (:func:`fleetlib.scheduling.held_time`), the runtime parts the rung clipped to it
    (``per_interval``, from one build of the parts); a row sums its intervals (one each, until a
    window has excluded time) and derives R, P and MPG from the sums with the walk's own rules
    (:func:`fleetlib.fleet.results.slice_row`, the chain checked).
    """
    from fleetlib.scheduling import held_time, scheduling_partition

    tables = records.tables()
    s_parts: dict[int, Factor] = {}
    held_parts: dict[int, np.ndarray] = {}
    for i in sorted({i for *_, idx in rows for i in idx}):
        sub = Window.between(*intervals[i])
        s_parts[i] = scheduling_partition(**tables, window=sub).factor()
        h = held_time(records.allocations, window=sub, by="job")
        h = h.assign(job_id=h["job_id"].astype(str)).set_index("job_id")["held_device_s"]
        held_parts[i] = h.reindex(jobs.index).fillna(0.0).to_numpy(float)
    out = []
    for label, start, end, idx in rows:
        win = Window.between(start, end).excluding(exclusions, clip=True)
        held = np.cumsum(np.stack([held_parts[i] for i in idx]), axis=0)[-1]
        columns = _window_total([per_interval[i] for i in idx])
        part = _slice_jobs(jobs, held, columns, man, configs)
        row = slice_row(sum_factors([s_parts[i] for i in idx], win), part, win, conventions)
        out.append({"label": label, "start": start.isoformat(), "end": end.isoformat(), **row})
    return out


def _segment_rows(
    partition: Any, s: Factor, jobs: pd.DataFrame, values: pd.Series, field_name: str, window: Window,
    conventions: Mapping[str, str],
) -> list[dict[str, Any]]:
    """One row per value of a job field: S, R, P and MPG of its jobs, adding up to the whole.

    ``pool`` has capacity of its own: each pool's S is the scheduling partition's for that pool
    (pools with capacity and no job included).  Any other field has none: a segment's S is the
    fleet's, its in-service capacity and scheduling losses the fleet's apportioned by the segment's
    share of held device-s (so its MPG is its ideal device-s over that capacity).
    """
    out = []
    if field_name == "pool":
        names = sorted({*map(str, partition.pools), *values.tolist()})
        for name in names:
            sel = jobs[(values == name).to_numpy()]
            row = slice_row(partition.factor(name), sel, window, conventions)
            out.append({"value": name, "scheduling_split": "the pool's own capacity", **row})
        return out
    held_total = math.fsum(jobs["held_device_s"].to_numpy(float))
    for name in sorted(set(values.tolist())):
        sel = jobs[(values == name).to_numpy()]
        held = math.fsum(sel["held_device_s"].to_numpy(float))
        share = held / held_total if held_total > 0 else 0.0
        seg_s = Factor(
            boundary="scheduling", numerator=held, denominator=s.denominator * share, window=window,
            record=s.record, numerator_unit="device-s", denominator_unit="device-s",
            convention=f"the fleet's S: in-service capacity and its losses apportioned by held device-s "
            f"({field_name} has no capacity of its own)",
            losses={k: v * share for k, v in s.losses.items() if k != "unattributed"},
        )
        row = slice_row(seg_s, sel, window, conventions)
        out.append({"value": name, "scheduling_split": "apportioned by held device-s", **row})
    return out


# ---------------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------------


def measure_fleet(
    manifest_or_path: str | Path | FleetManifest,
    *,
    window: Any = None,
    exclude: Any = None,
    engine: str = "pandas",
    workers: int | None = None,
    client: Any = None,
    scheduler: str | None = None,
    memory_limit: str | int | None = None,
    progress: bool | None = None,
    by: str | None = None,
    segment_by: str | None = None,
    allow_empty_window: bool = False,
    collection_gap_s: float | None = COLLECTION_GAP_S,
) -> FleetMeasurement:
    """Measure one fleet bundle: S, R, P and MPG on one window, with the chain checked.

    Parameters
    ----------
    manifest_or_path
        A :class:`~fleetlib.fleet.manifest.FleetManifest`, a ``fleet.yaml`` path, or the bundle folder.
    window
        Override of the manifest's window (anything :meth:`fleetlib.accounting.Window.parse` takes);
        default the manifest's, else the scheduler records' capacity span.
    exclude
        Stretches of the window left out of S, R and P, numerators and denominators alike (see
        :meth:`fleetlib.accounting.Window.excluding`); each must lie inside the window.  None: the
        manifest's ``exclude:`` (cut to a ``window`` override), or a :class:`~fleetlib.accounting.Window`
        override's own exclusions.  The ledger gets an ``excluded_time`` flag saying what was left out.
    engine
        ``"pandas"`` (one process) or ``"dask"`` (fleet scale: each timeline file -- a partition of
        many jobs' canonical timelines -- is one task on a ``distributed`` worker, traces are parsed in
        parallel, the scheduler records are read once here; :mod:`fleetlib.fleet.engine` starts the
        cluster).  Both give the same numbers.
    workers
        ``engine="dask"`` without ``client``: worker processes of the LocalCluster started for this
        call (one thread each; default 2).
    client
        ``engine="dask"``: a ``distributed.Client`` to run on (left open).
    scheduler
        ``engine="dask"`` without ``client``: the address of a running Dask scheduler to attach to
        (``tcp://host:port``; its cluster is left running, and a worker importing another fleetlib
        version is named in one line on stderr).  None: Dask's ``scheduler-address`` configuration
        (``DASK_SCHEDULER_ADDRESS``), else a LocalCluster of ``workers`` processes is started.
    memory_limit
        ``engine="dask"`` without ``client``: memory limit per worker (default
        :data:`fleetlib.fleet.engine.DEFAULT_MEMORY_PER_WORKER`).
    progress
        Show a progress bar over timeline files on stderr (read by the pandas engine, measured as tasks
        by the Dask one; default: when stderr is a terminal), and the cluster's dashboard link.
    by
        ``"day"`` or ``"week"``: also measure each UTC calendar window of the window
        (:func:`calendar_windows`, clipped to it) -- one row each in :attr:`FleetMeasurement.windows`
        with S, R, P, MPG and every numerator and denominator, the chain checked per row.  A job
        running across a boundary is split there: the runtime rung cuts each timeline into parts once
        and clips them to each window (a step by the share of its duration inside it), the scheduler's
        held time and the scheduling partition are clipped the same way, so the rows add up to the
        whole window.  P per window is the ideal time of the window's share of retained steps over
        their productive time in it; each job's fault-free step time (the baseline of its slow-step
        time) is estimated once, on its whole timeline, for every window alike.
    segment_by
        A job field (``pool``, ``architecture``, ``software_version``, or one the bundle carries:
        :func:`job_fields`): also measure the jobs of each value of it -- one row each in
        :attr:`FleetMeasurement.segments`.  ``pool`` splits capacity (each pool's own S); a field
        with no capacity of its own gives each segment the fleet's S, capacity apportioned by held
        device-s.  The rows add up to the whole.
    allow_empty_window
        Measure a window that reaches beyond the scheduler records' span by more than
        :data:`fleetlib.scheduling.WINDOW_SLACK` (refused by default: the uncovered time would count
        as idle capacity).
    collection_gap_s
        The shortest stretch without any record of any job while capacity persists that is flagged
        ``collection_gap`` (:func:`fleetlib.scheduling.collection_gaps`; default 3,600 s; None: not
        looked for).  S keeps its all-records value: a gap is named, with the ``--exclude`` that
        leaves it out, never excluded unasked.

    Returns
    -------
    FleetMeasurement
        The three chained factors, MPG, per-pool / per-job / per-cohort results, the reconciliation,
        the trace partitions, levers, cost and one ledger.

    Raises
    ------
    InputError
        A bad bundle: see :func:`~fleetlib.fleet.manifest.load_manifest`; two timelines for one job; a
        model config or traces for a job with no timeline; a window outside the records.
    DomainError
        An unknown engine; ``workers``, ``client``, ``scheduler`` or ``memory_limit`` with
        ``engine="pandas"``; a scheduler that cannot be reached; an
        unknown ``by``; a ``segment_by`` field the bundle does not carry (the message lists those it
        does; refused before any timeline is read).
    fleetlib.quality.ChainMismatchError
        The factors do not chain (a bug in the join, never expected here).
    """
    if engine not in ("pandas", "dask"):
        raise DomainError(f"engine must be 'pandas' or 'dask'; got {engine!r}")
    if engine == "pandas" and (workers is not None or client is not None or memory_limit is not None
                               or scheduler is not None):
        raise DomainError("workers=, client=, scheduler= and memory_limit= are options of engine='dask'")
    show = sys.stderr.isatty() if progress is None else bool(progress)
    if engine == "dask":
        from fleetlib._environ import scheduler_address
        from fleetlib.fleet.engine import dask_client_in_background

        address = None if client is not None else scheduler_address(scheduler)
        # the cluster starts (and its workers import the measuring code) while this process reads the
        # manifest and the scheduler records
        with dask_client_in_background(client, workers, memory_limit, warm=_warm_worker,
                                       scheduler=address) as cluster:
            return _measure(manifest_or_path, window, exclude, cluster, show, by, segment_by,
                            allow_empty_window, collection_gap_s)
    return _measure(manifest_or_path, window, exclude, None, show, by, segment_by, allow_empty_window,
                    collection_gap_s)


def _excluding(win: Window, man: FleetManifest, window: Any, exclude: Any) -> Window:
    """Return the measured window with its exclusions: ``exclude``, the override's, or the manifest's."""
    if exclude is not None:
        try:
            return win.excluding(exclude)
        except DomainError as exc:  # the caller's (--exclude): no file named
            raise InputError(str(exc), field="exclude") from exc
    if isinstance(window, Window) and window.exclusions:
        return win
    if not man.exclude:
        return win
    try:  # a window override narrower than the manifest's: its exclusions cut to it
        return win.excluding(man.exclude, clip=window is not None)
    except DomainError as exc:
        raise InputError(str(exc), file=str(man.file), field="exclude") from exc


def _column_sum(jobs: pd.DataFrame, column: str, rows: np.ndarray) -> float:
    """Return the pandas sum of ``column`` over the ``rows`` mask (no rows of the whole table selected)."""
    return float(pd.Series(jobs[column].to_numpy()[rows]).sum())


def _measure(
    manifest_or_path: str | Path | FleetManifest,
    window: Any,
    exclude: Any,
    cluster: Any,
    progress: bool,
    by: str | None = None,
    segment_by: str | None = None,
    allow_empty_window: bool = False,
    collection_gap_s: float | None = COLLECTION_GAP_S,
) -> FleetMeasurement:
    """:func:`measure_fleet` on the pandas engine (``cluster`` None) or on Dask.

    ``cluster`` (:func:`fleetlib.fleet.engine.dask_client_in_background`'s handle) submits the
    timeline tasks from its own thread as soon as it has started, once the held jobs are known; this
    thread settles S and reads the model configs meanwhile, while the cluster starts and the tasks
    run.  It is released after the last task (the trace step): the cluster closes while the results
    are built.
    """
    from fleetlib.scheduling import (
        collection_gap_note,
        collection_gap_records,
        collection_gaps,
        held_time,
        scheduling_partition,
        unobserved_losses,
    )

    if collection_gap_s is not None and not collection_gap_s > 0:
        raise DomainError(f"the shortest collection gap must be > 0 s; got {collection_gap_s!r}")
    man = manifest_or_path if isinstance(manifest_or_path, FleetManifest) else load_manifest(manifest_or_path)
    try:
        win = Window.parse(window) if window is not None else man.window
    except DomainError as exc:  # the caller's window (--window), not the manifest's: no file named
        raise InputError(str(exc), field="window") from exc
    if by is not None and by not in BY:
        raise DomainError(f"by must be one of {list(BY)} (or None); got {by!r}")
    records, ledger, win = read_scheduler(man, win, allow_empty_window=allow_empty_window)
    win = _excluding(win, man, window, exclude)
    note = win.exclusion_note()
    if note is not None:
        ledger.flag("excluded_time", note)
    if segment_by is not None and segment_by not in _segment_fields(man, records.allocations):
        raise DomainError(f"cannot segment by {segment_by!r}: this bundle's jobs carry "
                          f"{', '.join(_segment_fields(man, records.allocations))}")
    # the runtime rung measures each interval between consecutive calendar boundaries and exclusion
    # ends (one build of the parts); the excluded intervals are not measured
    intervals, slices = _intervals(win, by)
    held = held_time(records.allocations, window=win, by="job")
    held["job_id"] = held["job_id"].astype(str)
    held = held[held["held_device_s"] > 0].set_index("job_id")
    jobs = held[["pool", "devices", "held_device_s"]].copy()
    jobs["completed_ns"] = _completed_ns(records.allocations, jobs.index)
    attempts = held_time(records.allocations, window=win, by="attempt")
    segments = _device_segments(attempts)
    if len(segments):  # an elastic job resized: its device-time follows its segments
        jobs["device_segments"] = segments.reindex(jobs.index)
    pending = None
    if cluster is not None:  # submitted by the cluster's thread once it has started: this one settles S
        devices = jobs[[c for c in _HELD_COLUMNS if c in jobs.columns]].copy()  # this thread adds to jobs

        def submit(client: Any) -> list[Any]:
            if progress:
                from fleetlib._environ import dashboard_note

                note = dashboard_note(client)
                if note is not None:
                    print(note, file=sys.stderr)
            return submit_timeline_tasks(man, devices, intervals, client)

        pending = cluster.when_started(submit)
    partition = scheduling_partition(**records.tables(), window=win)
    s = partition.factor()
    installed = float(partition.totals["installed_device_s"])
    availability = float(partition.totals["capacity_device_s"]) / installed if installed > 0 else None
    gaps = (collection_gaps(records.tables(), partition.window, min_gap_s=collection_gap_s)
            if collection_gap_s is not None else None)
    for gap in gaps.itertuples(index=False) if gaps is not None else ():
        ledger.flag("collection_gap", collection_gap_note(gap, partition.window), time=gap.start)
    _flag_varying_devices(attempts, ledger)
    scheduled = set(records.allocations["job_id"].astype(str).tolist())
    try:  # needs no timeline: read while the timeline tasks run
        configs: _ModelConfigs | Exception | None = _model_configs(jobs, man)
    except Exception as exc:  # raised where it was before, after the timelines' own errors
        configs = exc
    client = cluster.client() if cluster is not None else None
    submitted = pending.result() if pending is not None else None
    per_interval = _timelines_into_jobs(man, jobs, records.allocations, scheduled, intervals, ledger,
                                        client, progress, submitted)
    for col in ("device_segments", "completed_ns"):
        if col in jobs.columns:
            del jobs[col]
    _runtime_columns(jobs)
    conventions = _program_columns(jobs, man, ledger, configs)
    model_configs = configs if isinstance(configs, _ModelConfigs) else None
    held_total = math.fsum(jobs["held_device_s"].to_numpy(float))
    sums: dict[str, float] = {}  # the job columns' exact sums, shared with a pool holding every job
    r = runtime_factor(jobs, win, held_total, sums)
    p = program_factor(jobs, win, r, conventions, sums)
    product = mpg(s, r, p)
    traces, traced_kernels = _traces(jobs, man, ledger, client, progress)
    if cluster is not None:
        cluster.release()  # no task after this one
    # sums over the observed jobs' columns, not over a copy of the job table (200,000 rows at scale)
    observed = jobs["observed"].to_numpy(bool)
    obs_held = _column_sum(jobs, "held_device_s", observed)
    obs_prod = _column_sum(jobs, "productive_device_s", observed)
    runtime_observed = {
        "label": "ESTIMATE, observed jobs only (held time with a timeline); not in the product",
        "value": obs_prod / obs_held if obs_held > 0 else None,
        "numerator_device_s": obs_prod,
        "denominator_device_s": obs_held,
    }
    prod_total = r.numerator
    with_cfg = _column_sum(jobs, "productive_device_s", jobs["ideal_device_s"].notna().to_numpy())
    coverage = {
        "runtime": obs_held / held_total if held_total > 0 else None,
        "program": with_cfg / prod_total if prod_total > 0 else None,
        "traces": {j: t["coverage"] for j, t in traces.items()},
    }
    recon = {
        "total_residual_device_s": float(jobs["reconciliation_residual"].sum()),
        "jobs": _JobReconciliation(jobs, observed & ~jobs["zombie_job"].to_numpy(bool)),
        "note": "scheduler held device-time (gang complete -> release) the job's timeline does not "
        "cover; a named runtime loss, never absorbed",
    }
    lever_table, gains = levers(s, r, p, jobs, man.contract)
    price = man.price_per_device_hour
    cost = (
        cost_per_useful_hour(price, s.value, r.value, p.value)
        if price is not None and product.value > 0
        else None
    )
    sources = {
        "scheduling": [man.relative(f) for f in man.scheduler_files],
        "runtime": [man.relative(f) for f in man.timeline_files],
        # each model configuration file once (a fleet's jobs share a few): not one entry per job
        "program": sorted({man.relative(f) for f in set(man.models.values())}),
        "traces": {j: [man.relative(f) for f in v] for j, v in man.traces.items()},
        "rank_timers": [man.relative(f) for f in man.rank_timer_files],
    }
    kernels = _kernel_ranking(jobs, records.allocations, man, traces, traced_kernels)
    pool_results = pools(partition, jobs, win, sums)
    contracts = factor_contracts(man, {"scheduling": s, "runtime": r, "program": p}, jobs, pool_results)
    windows = _window_rows(records, jobs, per_interval, intervals, slices, man, model_configs, conventions,
                           win.exclusions)
    segments = []
    if segment_by is not None:
        values = job_fields(man, records.allocations, jobs.index, [segment_by])[segment_by]
        segments = _segment_rows(partition, s, jobs, values, segment_by, win, conventions)
    return FleetMeasurement(
        name=man.name,
        window=win,
        scheduling=s,
        runtime=r,
        program=p,
        product=product,
        jobs=jobs,
        pools=pool_results,
        reconciliation=recon,
        traces=traces,
        levers=lever_table,
        runtime_observed=runtime_observed,
        coverage=coverage,
        price_per_device_hour=price,
        cost_per_useful_device_hour=cost,
        ledger=ledger,
        sources=sources,
        lever_gains=gains,
        contracts=contracts,
        by=by,
        windows=windows,
        segment_by=segment_by,
        segments=segments,
        availability=availability,
        collection_gaps=collection_gap_records(gaps),
        unobserved=unobserved_losses(man.scheduler_format, records.tables()),
        kernels=kernels,
    )
