"""A measured fleet as the resampling units of its metrics: demand cycles, jobs, commits, steps.

:func:`fleet_units` measures a bundle with :func:`fleetlib.fleet.measure_fleet` and keeps three
tables whose sums are the measured factors:

* ``cycles`` -- one row per (pool, cycle): the scheduling partition of that whole demand cycle
  (:func:`fleetlib.scheduling.scheduling_partition` clipped to it), device-seconds.  Summed over
  the rows it is S's numerator, denominator and losses.
* ``jobs`` -- :attr:`FleetMeasurement.jobs` plus the timings Table 4's runtime and allocation tiers
  read: queue wait to gang completion, startup seconds, restarts, elastic resizes,
  the cycle the gang completed in, and each job's contract fields (software version,
  architecture, pool) and its submit time (with the job id, the job's identity across two
  bundles).  Summed it is R's numerator, denominator and losses.
* ``commits`` -- one row per synchronous checkpoint pause inside the window: the runtime's own
  ``checkpoint`` stretches (:func:`fleetlib.runtime.held_intervals`, clipped to the window), keyed by
  job, attempt and the pause's ordinal in its attempt.  Summed it is each job's checkpoint pause.
* ``steps`` -- one row per retained step of an observed job (the last execution of each step
  number): compute seconds (wall less input wait), its share of the job's productive device-seconds
  and of its ideal device-seconds.  Summed it is P's numerator and denominator.

Subsets (:meth:`FleetUnits.subset`) select cycles and jobs together -- two windows of one bundle,
two interleaved sets of cycles, or two groups split by a contract field.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Window
from fleetlib.contract import Contract, contract_from_records
from fleetlib.quality import DomainError, Ledger

__all__ = ["COMMIT_COLUMNS", "JOB_FIELDS", "FleetUnits", "fleet_units", "parse_cycle"]

#: Contract fields known per job (a manifest's ``contract.jobs`` or the job's records).
JOB_FIELDS: tuple[str, ...] = ("software_version", "architecture", "pool")


def parse_cycle(cycle: str | pd.Timedelta) -> pd.Timedelta:
    """Return a demand cycle's length (``"1D"``, ``"2h"``, ...), refusing one under a minute."""
    try:
        length = pd.Timedelta(cycle)
    except (ValueError, TypeError) as exc:
        raise DomainError(f"cycle must be a duration such as '1D' or '2h'; got {cycle!r}") from exc
    if length < pd.Timedelta(minutes=1):
        raise DomainError(f"cycle must be at least a minute; got {cycle!r}")
    return length


@dataclass
class FleetUnits:
    """A measured bundle's factors as resampling units.

    Attributes
    ----------
    name, window
        The bundle and the measured window.
    contract
        The bundle's contract (manifest ``contract:`` merged with the records).
    cycles, jobs, commits, steps
        The unit tables (see the module docstring).
    cycle
        The demand-cycle length of ``cycles``.
    rank_timers
        ``{job id: rank-timer table}`` for the jobs the bundle has per-rank timers of.
    measurement
        The :class:`~fleetlib.fleet.measure.FleetMeasurement` (None for a subset).
    notes
        What a subset left out (e.g. S when a split field has no capacity of its own).
    rank_steps
        Per (job, step) straggler counts (:func:`fleetlib.regress.tiers.rank_step_table`; a stored
        baseline keeps only these); None: computed from ``rank_timers`` when needed.
    """

    name: str
    window: Window
    contract: Contract
    cycles: pd.DataFrame
    jobs: pd.DataFrame
    commits: pd.DataFrame
    steps: pd.DataFrame
    cycle: pd.Timedelta
    rank_timers: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    measurement: Any = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)
    rank_steps: pd.DataFrame | None = field(default=None, repr=False)

    def subset(
        self,
        *,
        jobs: Iterable[str] | None = None,
        cycles: Iterable[int] | None = None,
        label: str = "",
        contract: Mapping[str, Any] | None = None,
        scheduling: bool = True,
    ) -> FleetUnits:
        """Return the units of some jobs and cycles (None: all); ``scheduling=False`` drops S's cycles.

        Parameters
        ----------
        jobs
            Job ids to keep (their steps go with them).
        cycles
            Cycle indices to keep; without ``jobs``, the jobs whose gang completed in them.
        label
            Appended to the name.
        contract
            Fields the subset states (e.g. the split field's value).
        scheduling
            False when the subset has no capacity of its own (a split by software version).
        """
        cyc = self.cycles
        job_tab = self.jobs
        if cycles is not None:
            keep = set(int(c) for c in cycles)
            cyc = cyc[cyc["cycle"].isin(keep)]
            if jobs is None:
                job_tab = job_tab[job_tab["cycle"].isin(keep)]
        if jobs is not None:
            job_tab = job_tab[job_tab.index.isin(list(jobs))]
        notes = list(self.notes)
        if not scheduling:
            cyc = cyc.iloc[0:0]
            notes.append("S not split: the split field has no capacity of its own")
        steps = self.steps[self.steps["job_id"].isin(job_tab.index)]
        commits = self.commits[self.commits["job_id"].isin(job_tab.index)]
        c = self.contract
        if contract is not None:
            c = c.with_fields(contract, source=label or "split")
        return replace(
            self,
            name=f"{self.name}{' ' + label if label else ''}",
            contract=c,
            cycles=cyc,
            jobs=job_tab,
            commits=commits,
            steps=steps,
            rank_timers={j: t for j, t in self.rank_timers.items() if j in job_tab.index},
            rank_steps=None
            if self.rank_steps is None
            else self.rank_steps[self.rank_steps["job_id"].isin(job_tab.index)],
            measurement=None,
            notes=notes,
        )

    def split(self, by: str) -> dict[str, FleetUnits]:
        """Return ``{value: units}`` of the jobs grouped by a contract field (``pool`` splits S too)."""
        if by not in self.jobs.columns:
            raise DomainError(f"cannot split by {by!r}: jobs carry {list(JOB_FIELDS)}")
        out = {}
        for value, sel in self.jobs.groupby(by, sort=True):
            sub = self.subset(
                jobs=sel.index, label=f"[{by}={value}]", contract={by: value}, scheduling=by == "pool"
            )
            if by == "pool":
                sub.cycles = self.cycles[self.cycles["pool"] == value]
            out[str(value)] = sub
        return out


def _cycles(records: Any, window: Window, cycle: pd.Timedelta) -> pd.DataFrame:
    """Per (pool, cycle): the scheduling partition clipped to that cycle (whole cycles only).

    The window's exclusions are cut to each cycle (a cycle wholly excluded has no row), so the
    cycles' partitions add up to the window's.
    """
    from fleetlib.scheduling import scheduling_partition

    edges = pd.date_range(window.start, window.end, freq=cycle)
    if len(edges) < 2:
        raise DomainError(f"the window {window.label} holds no whole cycle of {cycle}: compare shorter "
                          "demand cycles (--cycle, e.g. --cycle 1h) or a longer window")
    rows = []
    tables = records.tables()
    for i, (a, b) in enumerate(itertools.pairwise(edges)):
        piece = Window.between(a, b)
        if window.exclusions:
            if any(x <= a and b <= y for x, y in window.exclusions):
                continue  # wholly excluded: nothing of it is measured
            piece = piece.excluding(window.exclusions, clip=True)
        part = scheduling_partition(**tables, window=piece)
        t = part.table.copy()
        t["cycle"] = i
        t["cycle_start"] = a
        rows.append(t.rename_axis("pool").reset_index())
    out = pd.concat(rows, ignore_index=True)
    out["pool"] = out["pool"].astype(str)
    return out


def _events_per_job(events: pd.DataFrame, kinds: Iterable[str]) -> pd.Series:
    """Return the number of events of ``kinds`` per job id (as text)."""
    if not len(events):
        return pd.Series(dtype=float)
    kind = events["kind"].astype(str)
    return kind.isin(list(kinds)).groupby(events["job_id"].astype(str)).sum().astype(float)


#: Columns of the ``commits`` unit table.
COMMIT_COLUMNS: tuple[str, ...] = ("job_id", "attempt", "pause", "start", "pause_s", "one")


def _commit_pauses(
    steps: pd.DataFrame, events: pd.DataFrame, jobs: pd.DataFrame, window: Window
) -> pd.DataFrame:
    """One row per synchronous checkpoint pause of the window (the runtime's ``checkpoint`` stretches).

    ``pause`` is the stretch's ordinal within its attempt over the whole timeline, so one commit keeps
    its key in any window and in a replay of the same job; ``pause_s`` is its part inside the window.
    """
    from fleetlib.runtime import held_intervals

    if not len(events):
        return pd.DataFrame({c: pd.Series(dtype=object if c == "job_id" else float) for c in COMMIT_COLUMNS})
    h = held_intervals(steps, events)
    h = h[h["category"].astype(str) == "checkpoint"].copy()
    h["job_id"] = h["job_id"].astype(str)
    h = h[h["job_id"].isin(jobs.index)].sort_values(["job_id", "attempt", "start"], kind="stable")
    h["pause"] = h.groupby(["job_id", "attempt"]).cumcount()
    a = h["start"].clip(lower=window.start, upper=window.end)
    z = h["end"].clip(lower=window.start, upper=window.end)
    h["pause_s"] = (z - a).dt.total_seconds().to_numpy(float)
    h = h[h["pause_s"].to_numpy(float) > 0]
    h["one"] = 1.0
    return h[list(COMMIT_COLUMNS)].reset_index(drop=True)


def _retained_steps(steps: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """Return the retained steps (last execution per step number) with productive and ideal shares."""
    if not len(steps):
        return pd.DataFrame(columns=["job_id", "step", "compute_s", "productive_device_s", "ideal_device_s"])
    s = steps[["job_id", "attempt", "step", "start", "end", "input_wait_s"]].copy()
    s["job_id"] = s["job_id"].astype(str)
    s = s[s["job_id"].isin(jobs.index)]
    s = s.sort_values(["job_id", "step", "start"], kind="stable")
    s = s.drop_duplicates(["job_id", "step"], keep="last")
    wall = (s["end"] - s["start"]).dt.total_seconds().to_numpy(float)
    s["compute_s"] = np.maximum(wall - s["input_wait_s"].fillna(0.0).to_numpy(float), 0.0)
    tot = s.groupby("job_id")["compute_s"].transform("sum").to_numpy(float)
    n = s.groupby("job_id")["step"].transform("size").to_numpy(float)
    prod = jobs.loc[s["job_id"], "productive_device_s"].to_numpy(float)
    ideal = jobs.loc[s["job_id"], "ideal_device_s"].fillna(0.0).to_numpy(float)
    ff = jobs.loc[s["job_id"], "fault_free_step_s"].to_numpy(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        s["productive_device_s"] = np.where(tot > 0, s["compute_s"].to_numpy() / tot * prod, prod / n)
        s["ideal_device_s"] = ideal / n
        s["step_ratio"] = np.where(ff > 0, s["compute_s"].to_numpy() / ff, np.nan)
    s["devices"] = jobs.loc[s["job_id"], "devices"].to_numpy(int)
    return s[
        ["job_id", "step", "compute_s", "step_ratio", "productive_device_s", "ideal_device_s", "devices"]
    ].reset_index(drop=True)


def _episode_columns(jobs: pd.DataFrame, timers: Mapping[str, pd.DataFrame]) -> None:
    """Per job: straggler episodes its per-rank timers show and the rank-steps they cover (exposure)."""
    from fleetlib.regress.tiers import straggler_episodes

    eps = pd.Series([e["job_id"] for e in straggler_episodes(timers)], dtype=object).value_counts()
    jobs["straggler_episodes"] = eps.reindex(jobs.index).fillna(0).to_numpy(float)
    jobs["rank_steps"] = [float(len(timers[j])) if j in timers else 0.0 for j in jobs.index]


def _rank_timers(man: Any, jobs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Rank timers per job: a file named after its job id (``rank_timers/JOB.parquet``)."""
    from fleetlib.program import read_rank_timers

    out = {}
    for path in man.rank_timer_files:
        job = Path(path).name.split(".")[0]
        if job in jobs.index:
            table, _ledger = read_rank_timers(path)
            out[job] = table
    return out


def fleet_units(
    source: str | Path | Any, *, window: Any = None, exclude: Any = None,
    cycle: str | pd.Timedelta | None = "1D", client: Any = None,
) -> FleetUnits:
    """Measure a bundle and return its factors' resampling units.

    Parameters
    ----------
    source
        A ``fleet.yaml`` path, its folder, or a :class:`~fleetlib.fleet.manifest.FleetManifest`.
    window
        Override of the manifest's window (as :func:`fleetlib.fleet.measure_fleet`).
    exclude
        Stretches of the window left out (as :func:`fleetlib.fleet.measure_fleet`).
    cycle
        Length of one demand cycle (S's resampling unit); the window must hold a whole number of
        them (a remainder is left out of ``cycles`` and named in ``notes``).  None: the whole window
        is one cycle (S is then not resampled).
    client
        A ``distributed.Client``: the bundle is measured on its cluster (``engine="dask"``; left
        open); None: in this process.

    Returns
    -------
    FleetUnits
        Unit tables whose sums are the measured S, R and P.

    Raises
    ------
    InputError
        A bad bundle (see :func:`~fleetlib.fleet.manifest.load_manifest`).
    """
    from fleetlib.fleet.manifest import FleetManifest, load_manifest
    from fleetlib.fleet.measure import job_fields, measure_fleet, read_scheduler, read_timelines

    man = source if isinstance(source, FleetManifest) else load_manifest(source)
    fm = (measure_fleet(man, window=window, exclude=exclude) if client is None
          else measure_fleet(man, window=window, exclude=exclude, engine="dask", client=client))
    win = fm.window
    length = (win.end - win.start) if cycle is None else parse_cycle(cycle)
    records, _ledger, _ = read_scheduler(man, win)
    cycles = _cycles(records, win, length)
    notes = []
    covered = cycles["cycle"].nunique() * length
    if covered < (win.end - win.start):
        rest = (win.end - win.start) - covered
        notes.append(f"the window's last {rest} is not a whole cycle: left out of S's units")
    jobs = fm.jobs.copy()
    alloc = records.allocations.copy()
    alloc["job_id"] = alloc["job_id"].astype(str)
    first = alloc.sort_values("attempt").drop_duplicates("job_id").set_index("job_id")
    gc = first["gang_complete"].reindex(jobs.index)
    jobs["gang_complete"] = gc
    jobs["submit"] = first["submit"].reindex(jobs.index)
    jobs["queue_wait_s"] = (gc - first["submit"].reindex(jobs.index)).dt.total_seconds()
    rel = ((gc - win.start) / length).to_numpy(float)
    last = max(int(cycles["cycle"].max()), 0)
    jobs["cycle"] = np.clip(np.floor(np.nan_to_num(rel, nan=0.0)), 0, last).astype(int)
    scheduled = set(alloc["job_id"])
    steps, events, _joined, _owner = read_timelines(man, set(jobs.index), scheduled, Ledger())
    d = jobs["devices"].to_numpy(float)
    for col, kinds in (("restarts", ["restore", "restart"]), ("resizes", ["resize_begin"])):
        jobs[col] = _events_per_job(events, kinds).reindex(jobs.index).fillna(0.0).to_numpy(float)
    jobs["startup_s"] = jobs["startup"].to_numpy(float) / d
    jobs["one"] = 1.0
    jobs["timed"] = (jobs["observed"] & ~jobs["zombie_job"]).astype(float)
    jobs["held_device_h"] = jobs["held_device_s"] / 3600.0
    records_contract = contract_from_records(
        scheduler_files=man.scheduler_files, scheduler_format=man.scheduler_format, relative=man.relative
    )
    base = Contract.from_mapping(man.contract).merged(records_contract)
    # the fields a fleet is segmented by, read by the one rule (contract.jobs, model config, records)
    fields = job_fields(man, records.allocations, jobs.index, ["software_version", "architecture", "pool"])
    for col, values in fields.items():
        jobs[col] = values.to_numpy()
    from fleetlib.regress.tiers import rank_step_table

    timers = _rank_timers(man, jobs)
    _episode_columns(jobs, timers)
    return FleetUnits(
        name=fm.name,
        window=win,
        contract=base,
        cycles=cycles,
        jobs=jobs,
        commits=_commit_pauses(steps, events, jobs, win),
        steps=_retained_steps(steps, jobs),
        cycle=length,
        rank_timers=timers,
        measurement=fm,
        notes=notes,
        rank_steps=rank_step_table(timers),
    )
