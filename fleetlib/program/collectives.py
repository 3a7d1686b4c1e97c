"""Collectives across ranks: matching, peer waits, stragglers, heat maps and the collective audit.

A blocking collective (AllReduce, all-to-all, AllGather ...) releases all its ranks together.  A
rank that enters early therefore spends the beginning of its collective kernel waiting for the last
peer to arrive, and the rank that arrived last has the shortest kernel.  Comparing *durations* of
one collective across ranks is thus enough to split each rank's time into waiting and transfer:

* peer wait of a rank = its duration - the shortest duration of that collective across ranks;
* the last arriver = the rank with the shortest duration.

No clock alignment is needed, which matters because every host stamps its trace with its own clock.
The split itself is :func:`fleetlib.program.iron_law.split_collective_wait`, applied with the common
finish as time zero (each rank entered ``duration`` before it).

Matching one collective across ranks uses ``(process_group, seq)`` when the trace records the
process group's sequence number, and otherwise the order of occurrence of each collective type
within its process group (or, when the group is unknown, within the stream).  When ranks disagree
on how many collectives of a type a group ran, occurrence order would pair unrelated collectives,
so matching refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd

from fleetlib.program.breakdown import (
    DEFAULT_DISPATCH_GAP_US,
    PARTITION_PARTS,
    float_column,
    int_column,
    require_table_columns,
    step_partition,
)
from fleetlib.program.fleet_law import fleet_law_by_rank, fleet_law_terms, pipeline_ranks
from fleetlib.program.iron_law import split_collective_wait
from fleetlib.program.roofline import DEFAULT_RIDGE_FLOP_PER_BYTE
from fleetlib.quality import DomainError

__all__ = [
    "COLLECTIVE_TYPES",
    "DEFAULT_STRAGGLER_THRESHOLD",
    "MATCH_COLUMNS",
    "analyse_traced_steps",
    "collective_audit",
    "collective_waits",
    "expected_collectives",
    "match_collectives",
    "program_summary",
    "step_heatmap_table",
    "straggler_report",
    "summarise_traced_steps",
    "traced_step_partition",
]

#: Collective types of the kernel table's ``collective`` column.
COLLECTIVE_TYPES: tuple[str, ...] = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast",
                                     "sendrecv", "reduce", "none")

#: Columns of :func:`match_collectives`' result.
MATCH_COLUMNS: tuple[str, ...] = ("instance", "group", "process_group", "collective", "seq", "occurrence",
                                  "rank", "step", "stream", "start_us", "end_us", "dur_us", "bytes",
                                  "kernel_index", "ranks")

#: A rank whose relative score falls below this is flagged as a straggler (the default of NVIDIA
#: resiliency-ext's straggler detection, field notes section 2.2).
DEFAULT_STRAGGLER_THRESHOLD: float = 0.75

_MATCH_NEEDS = ("rank", "stream", "start_us", "end_us", "kind", "collective")


def _process_group(comm: pd.DataFrame) -> pd.Series:
    """Return the ``process_group`` column as strings, an empty name counting as unknown."""
    if "process_group" not in comm.columns:
        return pd.Series(pd.NA, index=comm.index, dtype="string")
    pg = comm["process_group"].astype("string")
    return pg.mask(pg.str.strip() == "")


def _group_label(comm: pd.DataFrame) -> pd.Series:
    """Process group name where known, otherwise ``"stream <id>"``."""
    stream_label = "stream " + comm["stream"].astype("Int64").astype("string")
    pg = _process_group(comm)
    return pg.where(pg.notna(), stream_label)


def _nullable(comm: pd.DataFrame, col: str) -> pd.Series:
    if col in comm.columns:
        return comm[col].astype("Int64")
    return pd.Series(pd.array([pd.NA] * len(comm), dtype="Int64"), index=comm.index)


def _check_counts(comm: pd.DataFrame) -> None:
    """Refuse when the ranks of one group disagree on the count of a collective type."""
    counts = comm.pivot_table(index=["group", "collective"], columns="rank", values="stream", aggfunc="size",
                              fill_value=0)
    member = comm.pivot_table(index="group", columns="rank", values="stream", aggfunc="size",
                              fill_value=0) > 0
    member = member.reindex(index=counts.index.get_level_values("group"), columns=counts.columns)
    vals = np.where(member.to_numpy(), counts.to_numpy(), np.nan)
    lo, hi = np.nanmin(vals, axis=1), np.nanmax(vals, axis=1)
    bad = np.flatnonzero(lo != hi)
    if bad.size:
        i = int(bad[0])
        group, coll = counts.index[i]
        per_rank = {int(r): int(v) for r, v, m in zip(counts.columns, counts.to_numpy()[i],
                                                       member.to_numpy()[i], strict=True) if m}
        raise DomainError(f"ranks disagree on the number of {coll} collectives in group {group!r}: "
                          f"{per_rank} (rank: count); the traces cover different windows or a rank "
                          "lost events, so collectives cannot be matched across ranks")


def match_collectives(kernels: pd.DataFrame, *,
                      by: Literal["auto", "seq", "occurrence"] = "auto") -> pd.DataFrame:
    """Match each communication kernel to the collective instance it belongs to on every rank.

    Parameters
    ----------
    kernels
        Kernel table (``rank, stream, start_us, end_us, kind, collective``; ``process_group``,
        ``seq``, ``step``, ``bytes`` used when present).  Only ``kind == "comm"`` rows are matched.
        Index labels must be unique; they are returned as ``kernel_index``.
    by
        ``"seq"``: by ``(process_group, seq)``, which every communication kernel must carry;
        ``"occurrence"``: the k-th collective of a type in a group on one rank matches the k-th on
        every other rank of the group (group = ``process_group``, or ``"stream <id>"`` where it is
        missing); ``"auto"`` (default): ``"seq"`` when every communication kernel carries both,
        otherwise ``"occurrence"``.

    Returns
    -------
    pandas.DataFrame
        One row per (instance, rank), columns :data:`MATCH_COLUMNS`: ``instance`` numbers the
        instances in program order within each group (the order each rank issued them, which needs
        no clock); ``occurrence`` is the ordinal of the collective type within its group; ``ranks`` the
        number of ranks seen in the instance.  ``attrs["matched_by"]`` records the rule used.

    Raises
    ------
    DomainError
        When ranks of a group disagree on the count of a collective type (naming the group), when
        a ``(process_group, seq)`` pair names different collective types or repeats on one rank,
        or when ``by="seq"`` and a kernel lacks its group or sequence number.
    """
    require_table_columns(kernels, _MATCH_NEEDS, "kernels")
    if by not in ("auto", "seq", "occurrence"):
        raise DomainError(f"by must be 'auto', 'seq' or 'occurrence'; got {by!r}")
    if not kernels.index.is_unique:
        raise DomainError("kernels index labels must be unique (they identify the matched kernels)")
    comm = kernels[kernels["kind"].astype("string") == "comm"]
    start = float_column(comm, "start_us", "kernels")
    end = float_column(comm, "end_us", "kernels")
    if (end < start).any():
        i = int(np.flatnonzero(end < start)[0])
        raise DomainError(f"communication kernel {comm.index[i]!r} has a negative duration")
    coll = comm["collective"].astype("string")
    unknown = sorted(set(coll.dropna().unique()) - set(COLLECTIVE_TYPES))
    if unknown or coll.isna().any():
        raise DomainError(f"collective types {unknown or ['<missing>']} are not among {COLLECTIVE_TYPES}")
    frame = pd.DataFrame({
        "group": _group_label(comm),
        "process_group": _process_group(comm),
        "collective": coll,
        "seq": _nullable(comm, "seq"),
        "rank": int_column(comm, "rank", "kernels"),
        "step": _nullable(comm, "step"),
        "stream": int_column(comm, "stream", "kernels"),
        "start_us": start,
        "end_us": end,
        "dur_us": end - start,
        "bytes": _nullable(comm, "bytes"),
        "kernel_index": comm.index.to_numpy(),
    }, index=comm.index).reset_index(drop=True)
    has_seq = bool(frame["seq"].notna().all() and frame["process_group"].notna().all())
    if by == "seq" and not has_seq:
        raise DomainError("by='seq' needs a process_group and a seq on every communication kernel; "
                          "use by='occurrence' for traces without them")
    rule = "seq" if (by == "seq" or (by == "auto" and has_seq)) else "occurrence"
    if frame.empty:
        out = frame.assign(instance=pd.Series(dtype=np.int64), occurrence=pd.Series(dtype=np.int64),
                           ranks=pd.Series(dtype=np.int64))
        out = out[list(MATCH_COLUMNS)]
        out.attrs["matched_by"] = rule
        return out

    # Program order per rank and group (clock-free), and the ordinal of each type.
    frame = frame.sort_values(["rank", "group", "seq" if rule == "seq" else "start_us", "start_us",
                               "stream"], kind="stable")
    frame["position"] = frame.groupby(["rank", "group"], sort=False).cumcount()
    frame["occurrence"] = frame.groupby(["rank", "group", "collective"], sort=False).cumcount()
    _check_counts(frame)

    if rule == "seq":
        key = ["group", "seq"]
        dup = frame.duplicated(["group", "seq", "rank"])
        if dup.any():
            r = frame[dup].iloc[0]
            raise DomainError(f"rank {r['rank']} has two communication kernels with seq {r['seq']} in group "
                              f"{r['group']!r}; one collective per sequence number is expected")
        kinds = frame.groupby(key)["collective"].nunique()
        if (kinds > 1).any():
            g, s = kinds[kinds > 1].index[0]
            raise DomainError(f"seq {s} of group {g!r} is a different collective type on different ranks")
        members = frame.groupby("group")["rank"].nunique()
        seen = frame.groupby(key)["rank"].nunique()
        short = seen.to_numpy() < members.reindex(seen.index.get_level_values("group")).to_numpy()
        if short.any():
            g, s = seen.index[int(np.flatnonzero(short)[0])]
            raise DomainError(f"seq {s} of group {g!r} is missing on some ranks of the group")
    else:
        key = ["group", "collective", "occurrence"]
    inst = frame.groupby(key, sort=False).agg(position=("position", "min"))
    inst = inst.reset_index().sort_values(["group", "position", *key[1:]], kind="stable")
    inst["instance"] = np.arange(len(inst))
    frame = frame.drop(columns="position").merge(inst[[*key, "instance"]], on=key, how="left")
    frame["ranks"] = frame.groupby("instance")["rank"].transform("nunique").astype(np.int64)
    out = frame.sort_values(["instance", "rank"], kind="stable").reset_index(drop=True)
    out = out[list(MATCH_COLUMNS)]
    out.attrs["matched_by"] = rule
    return out


def collective_waits(matched: pd.DataFrame) -> pd.DataFrame:
    """Peer wait of every rank in every matched collective, and the last arriver of each.

    Ranks leave a blocking collective together, so a rank that entered ``d`` before the common
    finish has duration ``d``; the last arriver has the shortest duration, and every other rank
    waited ``its duration - the shortest`` for it.  Computed per group with
    :func:`fleetlib.program.iron_law.split_collective_wait` on entry times relative to the finish.

    Waits are measured against the ranks *observed*: when the traces cover only some ranks of a
    group (two ranks of a 128-rank job), the true last arriver may be missing, and every wait is
    then a lower bound.

    Parameters
    ----------
    matched
        Output of :func:`match_collectives` (``instance, group, rank, dur_us`` at least).

    Returns
    -------
    pandas.DataFrame
        ``matched`` plus ``min_dur_us`` (the transfer every rank shares), ``peer_wait_us`` (>= 0,
        exactly 0 for the last arriver), ``last_arriver`` (rank with the shortest duration; the
        lowest rank among ties), ``is_last_arriver`` and ``instance_wait_us`` (the waits of all
        ranks of the instance together: what the last arriver cost the others).

    Examples
    --------
    >>> k = pd.DataFrame({"rank": [0, 1, 2], "stream": 20, "start_us": [8000.0, 8000.0, 12000.0],
    ...                   "end_us": 14000.0, "kind": "comm", "collective": "allreduce"})
    >>> w = collective_waits(match_collectives(k))
    >>> w["peer_wait_us"].tolist(), int(w["last_arriver"].iloc[0])
    ([4000.0, 4000.0, 0.0], 2)
    """
    require_table_columns(matched, ("instance", "group", "rank", "dur_us"), "matched")
    out = matched.reset_index(drop=True).copy()
    if out.empty:
        return out.assign(min_dur_us=pd.Series(dtype=float), peer_wait_us=pd.Series(dtype=float),
                          last_arriver=pd.Series(dtype=np.int64), is_last_arriver=pd.Series(dtype=bool),
                          instance_wait_us=pd.Series(dtype=float))
    dur = float_column(out, "dur_us", "matched")
    if (dur < 0).any():
        raise DomainError("matched has a negative collective duration")
    if out.duplicated(["instance", "rank"]).any():
        raise DomainError("matched lists a rank twice in one instance")
    if out.drop_duplicates(["instance", "group"])["instance"].duplicated().any():
        raise DomainError("an instance of matched spans more than one group")
    wait = np.empty(len(out))
    last = np.empty(len(out), dtype=np.int64)
    for _, block in out.groupby("group", sort=False):
        # instances x ranks matrix of durations for this group
        ri, inst = pd.factorize(block["instance"], sort=True)
        ci, rank = pd.factorize(block["rank"], sort=True)
        mat = np.full((inst.size, rank.size), np.nan)
        mat[ri, ci] = block["dur_us"].to_numpy(dtype=float)
        if np.isnan(mat).any():
            raise DomainError(f"in group {block['group'].iloc[0]!r} not every rank took part in every "
                              "instance; match with match_collectives first")
        # The split only subtracts times, so it is applied to microseconds directly (no unit
        # conversion, hence no round-off: the last arriver's wait is exactly zero).
        split = split_collective_wait(-mat, 0.0, 0.0)
        late = np.asarray(rank)[np.atleast_1d(split.late_rank)]
        wait[block.index.to_numpy()] = np.asarray(split.per_rank_wait_s)[ri, ci]
        last[block.index.to_numpy()] = late[ri]
    out["min_dur_us"] = out.groupby("instance")["dur_us"].transform("min")
    out["peer_wait_us"] = wait
    out["last_arriver"] = last
    out["is_last_arriver"] = out["rank"].to_numpy() == last
    out["instance_wait_us"] = out.groupby("instance")["peer_wait_us"].transform("sum")
    return out


# ---------------------------------------------------------------------------------------------------
# Stragglers and heat map
# ---------------------------------------------------------------------------------------------------


def straggler_report(waits: pd.DataFrame, partition: pd.DataFrame | None = None, *,
                     threshold: float = DEFAULT_STRAGGLER_THRESHOLD) -> pd.DataFrame:
    """Per-rank straggler evidence: who arrives last, what it costs the others, and a relative score.

    Only instances seen on two or more ranks count (a lone rank has nobody to wait for).

    Parameters
    ----------
    waits
        Output of :func:`collective_waits`.
    partition
        Optional output of :func:`~fleetlib.program.breakdown.step_partition`.  With it, each rank
        gets a relative score in the style of NVIDIA resiliency-ext: its *own work* per step is the
        step wall time minus its peer wait, and ``relative_score`` = the best (smallest) rank median
        of own work / this rank's median, so the fastest rank scores 1 and a rank that needs a third
        longer scores 0.75.  Without it the score columns are absent.
    threshold
        Score below which ``straggler`` is True.

    Returns
    -------
    pandas.DataFrame
        One row per rank: ``collectives`` (multi-rank instances it took part in), ``arrived_last``,
        ``arrived_last_share`` (0 when it took part in none), ``wait_caused_us`` (the others' waits
        in the instances it arrived last at), ``median_wait_caused_us`` (over those instances; 0 when
        it never arrived last), ``peer_wait_us`` and ``median_peer_wait_us`` (its own waiting), and
        with ``partition`` also ``median_own_work_us``, ``relative_score`` and ``straggler``.
    """
    require_table_columns(waits, ("instance", "rank", "ranks", "peer_wait_us", "is_last_arriver",
                                  "instance_wait_us"), "waits")
    thr = float(threshold)
    if not 0.0 <= thr <= 1.0:
        raise DomainError(f"threshold must be a fraction in [0, 1]; got {threshold!r}")
    multi = waits[waits["ranks"].to_numpy() >= 2]
    last = multi[multi["is_last_arriver"].astype(bool)]
    by_rank = multi.groupby("rank")
    out = pd.DataFrame({
        "collectives": by_rank.size(),
        "arrived_last": last.groupby("rank").size(),
        "wait_caused_us": last.groupby("rank")["instance_wait_us"].sum(),
        "median_wait_caused_us": last.groupby("rank")["instance_wait_us"].median(),
        "peer_wait_us": by_rank["peer_wait_us"].sum(),
        "median_peer_wait_us": by_rank["peer_wait_us"].median(),
    })
    ranks = pd.Index(np.unique(waits["rank"].to_numpy()), name="rank")
    if partition is not None:
        require_table_columns(partition, ("rank", "step", "step_wall_us", "peer_wait"), "partition")
        ranks = ranks.union(pd.Index(np.unique(partition["rank"].to_numpy()), name="rank"))
    out = out.reindex(ranks).fillna(0.0)
    out["collectives"] = out["collectives"].astype(np.int64)
    out["arrived_last"] = out["arrived_last"].astype(np.int64)
    share = np.divide(out["arrived_last"].to_numpy(dtype=float), out["collectives"].to_numpy(dtype=float),
                      out=np.zeros(len(out)), where=out["collectives"].to_numpy() > 0)
    out.insert(2, "arrived_last_share", share)
    if partition is not None:
        own = (float_column(partition, "step_wall_us", "partition")
               - float_column(partition, "peer_wait", "partition"))
        med = pd.Series(own, index=partition["rank"].to_numpy()).groupby(level=0).median()
        med = med.reindex(out.index)
        if (med.isna() | (med <= 0)).any():
            r = med.index[int(np.flatnonzero((med.isna() | (med <= 0)).to_numpy())[0])]
            raise DomainError(f"rank {r} has no step time outside peer waits in partition; "
                              "a relative score needs its own work time")
        out["median_own_work_us"] = med.to_numpy()
        out["relative_score"] = float(med.min()) / med.to_numpy()
        out["straggler"] = out["relative_score"].to_numpy() < thr
    return out.reset_index()


def step_heatmap_table(partition: pd.DataFrame, value: str = "peer_wait", *,
                       share: bool = False) -> pd.DataFrame:
    """Rank x step table of one partition column, ready for a heat map.

    Parameters
    ----------
    partition
        Output of :func:`~fleetlib.program.breakdown.step_partition`.
    value
        A part of :data:`~fleetlib.program.breakdown.PARTITION_PARTS`, ``"step_wall_us"`` or
        ``"overlapped_comm_us"``.
    share
        Divide by each cell's step wall time (a fraction of the step instead of microseconds).

    Returns
    -------
    pandas.DataFrame
        Index ``rank``, columns ``step``; cells with no window are missing (NaN), never zero.
    """
    allowed = (*PARTITION_PARTS, "step_wall_us", "overlapped_comm_us")
    if value not in allowed:
        raise DomainError(f"value must be one of {allowed}; got {value!r}")
    require_table_columns(partition, ("rank", "step", value, "step_wall_us"), "partition")
    if partition.duplicated(["rank", "step"]).any():
        raise DomainError("partition has two rows for one (rank, step)")
    cell = float_column(partition, value, "partition")
    if share:
        wall = float_column(partition, "step_wall_us", "partition")
        if (wall <= 0).any():
            raise DomainError("a step with no wall time has no shares")
        cell = cell / wall
    frame = pd.DataFrame({"rank": partition["rank"].to_numpy(), "step": partition["step"].to_numpy(),
                          "v": cell})
    table = frame.pivot_table(index="rank", columns="step", values="v", aggfunc="first", dropna=False)
    table.columns.name = "step"
    return table


# ---------------------------------------------------------------------------------------------------
# Collective audit
# ---------------------------------------------------------------------------------------------------


def collective_audit(kernels: pd.DataFrame) -> pd.DataFrame:
    """Count the collectives of every rank and step by type and group.

    The trace, not the source, records what a step communicates: counting its collectives by type
    and group and comparing with the intended layout (:func:`expected_collectives`) shows resharding
    collectives a compiler inserted, or exchanges a change removed.

    Parameters
    ----------
    kernels
        Kernel table; ``kind == "comm"`` rows are counted by their ``step`` (kernels without a step
        are counted under a missing step).

    Returns
    -------
    pandas.DataFrame
        ``rank, step, group, collective, count, bytes`` (sum; missing when no kernel recorded
        bytes), ``dur_us`` (summed kernel time).
    """
    require_table_columns(kernels, _MATCH_NEEDS, "kernels")
    comm = kernels[kernels["kind"].astype("string") == "comm"]
    start = float_column(comm, "start_us", "kernels")
    end = float_column(comm, "end_us", "kernels")
    frame = pd.DataFrame({
        "rank": int_column(comm, "rank", "kernels"),
        "step": _nullable(comm, "step").to_numpy(),
        "group": _group_label(comm).to_numpy(),
        "collective": comm["collective"].astype("string").to_numpy(),
        "bytes": _nullable(comm, "bytes").to_numpy(),
        "dur_us": end - start,
    })
    frame["step"] = frame["step"].astype("Int64")
    frame["bytes"] = frame["bytes"].astype("Int64")
    grouped = frame.groupby(["rank", "step", "group", "collective"], dropna=False, sort=True)
    out = grouped.agg(count=("dur_us", "size"), dur_us=("dur_us", "sum"))
    out["bytes"] = grouped["bytes"].sum(min_count=1).astype("Int64")
    return out.reset_index()[["rank", "step", "group", "collective", "count", "bytes", "dur_us"]]


def expected_collectives(kernels: pd.DataFrame,
                         expected: Mapping[str, int] | Mapping[tuple[str, str], int]) -> pd.DataFrame:
    """Compare each rank's per-step collective counts with the intended layout.

    Parameters
    ----------
    kernels
        Kernel table with a ``step`` column; every (rank, step) that has any kernel is audited.
    expected
        Collectives each rank should run per step: ``{"allreduce": 2, "alltoall": 2}`` by type (any
        group), or ``{("dp", "allreduce"): 1, ("tp", "allreduce"): 64}`` by (group, type).  Types
        not named are expected zero times.

    Returns
    -------
    pandas.DataFrame
        ``rank, step, [group,] collective, expected, observed, difference`` (observed - expected) and
        ``status``: ``"ok"``, ``"missing"`` (fewer than expected), ``"extra"`` (more than expected)
        or ``"unexpected"`` (a type the layout does not have at all).
    """
    require_table_columns(kernels, (*_MATCH_NEEDS, "step"), "kernels")
    if not expected:
        raise DomainError("expected is empty; give the collectives each step should run")
    keys = list(expected)
    by_group = isinstance(keys[0], tuple)
    if any(isinstance(k, tuple) != by_group for k in keys):
        raise DomainError("expected keys must all be types or all be (group, type) pairs")
    for k, n in expected.items():
        coll = k[1] if isinstance(k, tuple) else k
        if coll not in COLLECTIVE_TYPES:
            raise DomainError(f"expected names {coll!r}, not one of {COLLECTIVE_TYPES}")
        if isinstance(n, bool) or not float(n).is_integer() or n < 0:
            raise DomainError(f"expected count for {k!r} must be a whole number >= 0; got {n!r}")
    steps = pd.DataFrame({"rank": int_column(kernels, "rank", "kernels"),
                          "step": kernels["step"].astype("Int64").to_numpy()}).dropna()
    if steps.empty:
        raise DomainError("no kernel carries a step; the audit counts collectives per step")
    grid = steps.drop_duplicates().astype({"step": np.int64})
    audit = collective_audit(kernels).dropna(subset=["step"]).astype({"step": np.int64})
    cols = ["group", "collective"] if by_group else ["collective"]
    observed = audit.groupby(["rank", "step", *cols])["count"].sum()
    exp = pd.DataFrame([(*(k if isinstance(k, tuple) else (k,)), int(n)) for k, n in expected.items()],
                       columns=[*cols, "expected"])
    want = grid.merge(exp, how="cross").set_index(["rank", "step", *cols])["expected"]
    idx = want.index.union(observed.index)
    out = pd.DataFrame({"expected": want.reindex(idx, fill_value=0),
                        "observed": observed.reindex(idx, fill_value=0)}).astype(np.int64)
    out["difference"] = out["observed"] - out["expected"]
    declared = pd.Series(True, index=pd.MultiIndex.from_frame(exp[cols]) if by_group
                         else pd.Index(exp["collective"]))
    key = out.index.droplevel(["rank", "step"])
    in_layout = declared.reindex(key, fill_value=False).to_numpy()
    d = out["difference"].to_numpy()
    out["status"] = np.select([d == 0, d < 0, ~in_layout], ["ok", "missing", "unexpected"], default="extra")
    return out.reset_index().sort_values(["rank", "step", *cols], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------
# One JSON-ready summary (for the `fleetlib program` command)
# ---------------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def program_summary(kernels: pd.DataFrame, steps: pd.DataFrame, *,
                    by: Literal["auto", "seq", "occurrence"] = "auto",
                    dispatch_gap_us: float = DEFAULT_DISPATCH_GAP_US,
                    threshold: float = DEFAULT_STRAGGLER_THRESHOLD,
                    ops: pd.DataFrame | None = None) -> dict[str, Any]:
    """Partition, stragglers and collectives of a traced job as one JSON-ready dictionary.

    Runs :func:`match_collectives`, :func:`collective_waits`,
    :func:`~fleetlib.program.breakdown.step_partition` (with the waits), :func:`straggler_report`
    and :func:`collective_audit`.  The ``fleetlib program`` command adds the reader's ledger and,
    when a model configuration gives the FLOPs, the program goodput factor.

    Parameters
    ----------
    kernels, steps
        Kernel table and step windows (see :func:`~fleetlib.program.breakdown.step_partition`).
    by
        Matching rule for :func:`match_collectives`.
    dispatch_gap_us
        Fallback host-dispatch gap, microseconds.
    threshold
        Straggler score threshold.
    ops
        Host ops with recorded shapes, for the compute roof of each kernel (see ``step_partition``).

    Returns
    -------
    dict
        ``ranks`` ({rank: {``steps``, ``step_wall_us``, ``partition_us`` {the six parts},
        ``overlapped_comm_us``}}, sums over the rank's steps), ``stragglers`` (records of
        :func:`straggler_report`), ``collectives`` (``matched_by``, ``instances``, ``first`` -- the
        first instance of each type in each group with its last arriver and longest waiter --
        and ``audit``), ``flags`` (strings) and ``partition`` (one record per rank and step).
    """
    parts = analyse_traced_steps(kernels, steps, by=by, dispatch_gap_us=dispatch_gap_us, threshold=threshold,
                                 ops=ops)
    return summarise_traced_steps(parts, by=by)


def analyse_traced_steps(kernels: pd.DataFrame, steps: pd.DataFrame, *,
                         by: Literal["auto", "seq", "occurrence"] = "auto",
                         dispatch_gap_us: float = DEFAULT_DISPATCH_GAP_US,
                         threshold: float = DEFAULT_STRAGGLER_THRESHOLD,
                         ops: pd.DataFrame | None = None,
                         ridge_flop_per_byte: float = DEFAULT_RIDGE_FLOP_PER_BYTE) -> dict[str, pd.DataFrame]:
    """Match collectives, measure peer waits, partition every rank's steps, score stragglers.

    Runs :func:`match_collectives`, :func:`collective_waits`,
    :func:`~fleetlib.program.breakdown.step_partition` (with the waits), :func:`straggler_report`
    and :func:`collective_audit`.

    Parameters
    ----------
    kernels, steps
        Kernel table and step windows (see :func:`~fleetlib.program.breakdown.step_partition`).
    by
        Matching rule for :func:`match_collectives`.
    dispatch_gap_us
        Fallback host-dispatch gap, microseconds.
    threshold
        Straggler score threshold.
    ops
        Host ops with recorded shapes, for the compute roof of each kernel (see ``step_partition``).
    ridge_flop_per_byte
        The device's ridge point for those roofs (see ``step_partition``).

    Returns
    -------
    dict of DataFrame
        ``matched``, ``waits``, ``partition`` (one row per rank and step), ``stragglers`` and
        ``audit``; :func:`summarise_traced_steps` turns them into one JSON-ready dictionary.
    """
    matched, waits, part = traced_step_partition(kernels, steps, by=by, dispatch_gap_us=dispatch_gap_us,
                                                 ops=ops, ridge_flop_per_byte=ridge_flop_per_byte)
    return {"matched": matched, "waits": waits, "partition": part,
            "stragglers": straggler_report(waits, part, threshold=threshold),
            "audit": collective_audit(kernels)}


def traced_step_partition(kernels: pd.DataFrame, steps: pd.DataFrame, *,
                          by: Literal["auto", "seq", "occurrence"] = "auto",
                          dispatch_gap_us: float = DEFAULT_DISPATCH_GAP_US,
                          ops: pd.DataFrame | None = None,
                          ridge_flop_per_byte: float = DEFAULT_RIDGE_FLOP_PER_BYTE,
                          ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Match collectives, measure peer waits and partition every rank's steps (no stragglers, no audit).

    The part of :func:`analyse_traced_steps` a caller needs for the step partition alone (the fleet
    walk's trace step): the same three tables it computes.

    Parameters
    ----------
    kernels, steps
        Kernel table and step windows (see :func:`~fleetlib.program.breakdown.step_partition`).
    by
        Matching rule for :func:`match_collectives`.
    dispatch_gap_us
        Fallback host-dispatch gap, microseconds.
    ops
        Host ops with recorded shapes, for the compute roof of each kernel (see ``step_partition``).
    ridge_flop_per_byte
        The device's ridge point for those roofs (see ``step_partition``).

    Returns
    -------
    tuple of DataFrame
        ``matched`` (:func:`match_collectives`), ``waits`` (:func:`collective_waits`) and the
        partition (:func:`~fleetlib.program.breakdown.step_partition`, one row per rank and step).
    """
    matched = match_collectives(kernels, by=by)
    waits = collective_waits(matched)
    part = step_partition(kernels, steps, collective_wait=waits[["kernel_index", "peer_wait_us"]],
                          dispatch_gap_us=dispatch_gap_us, ops=ops, ridge_flop_per_byte=ridge_flop_per_byte)
    return matched, waits, part


def summarise_traced_steps(parts: Mapping[str, pd.DataFrame], *, by: str = "auto") -> dict[str, Any]:
    """Return what :func:`analyse_traced_steps` found as one JSON-ready dictionary.

    See :func:`program_summary` for the keys.
    """
    matched, waits, part = parts["matched"], parts["waits"], parts["partition"]
    report, audit = parts["stragglers"], parts["audit"]

    sums = part.groupby("rank")[[*PARTITION_PARTS, "step_wall_us", "overlapped_comm_us"]].sum()
    law = fleet_law_by_rank(fleet_law_terms(part, pipeline=pipeline_ranks(matched)))
    n_steps = part.groupby("rank").size()
    ranks = {
        str(int(r)): {
            "steps": int(n_steps.loc[r]),
            "step_wall_us": float(row["step_wall_us"]),
            "partition_us": {p: float(row[p]) for p in PARTITION_PARTS},
            "overlapped_comm_us": float(row["overlapped_comm_us"]),
            "fleet_law_us": law[str(int(r))],
        }
        for r, row in sums.iterrows()
    }
    first = []
    if not waits.empty:
        head = waits[waits["occurrence"].to_numpy() == 0]
        for inst, rows in head.groupby("instance", sort=True):
            longest = rows.loc[rows["peer_wait_us"].idxmax()]
            first.append({"instance": int(inst), "group": str(rows["group"].iloc[0]),
                          "collective": str(rows["collective"].iloc[0]), "ranks": len(rows),
                          "last_arriver": int(rows["last_arriver"].iloc[0]),
                          "longest_waiter": int(longest["rank"]),
                          "longest_wait_us": float(longest["peer_wait_us"])})
    flags = []
    for _, row in part[part["cuda_graph"]].iterrows():
        flags.append(f"rank {int(row['rank'])} step {int(row['step'])}: CUDA-graph launches; kernels are "
                     "under-recorded, the partition is less reliable")
    approx = part[part["dispatch_rule"] != "launch_us"]
    if not approx.empty:
        flags.append(f"host_dispatch approximated by the gap rule on {len(approx)} rank-step(s) "
                     f"({approx['dispatch_rule'].iloc[0]}); the trace reader gave no launch times")
    lone = waits[waits["ranks"] < 2] if not waits.empty else waits
    if not lone.empty:
        flags.append(f"{lone['instance'].nunique()} collective instance(s) seen on one rank only: "
                     "no peer wait can be measured for them")
    return {
        "ranks": ranks,
        "stragglers": _records(report),
        "collectives": {"matched_by": matched.attrs.get("matched_by", by),
                        "instances": int(matched["instance"].nunique()) if not matched.empty else 0,
                        "first": first, "audit": _records(audit)},
        "flags": flags,
        "partition": _records(part),
    }
