"""Kueue Workload objects (YAML or JSON) -> canonical allocations, capacity and queue tables."""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike

import numpy as np
import pandas as pd

from fleetlib._io import excerpt, input_files
from fleetlib.quality import DomainError, InputError, Ledger, RowBook
from fleetlib.scheduling.readers._common import (
    GPU_RESOURCE,
    ReadBook,
    allocations_frame,
    as_mask,
    attempts_from_events,
    capacity_from_out_of_service,
    load_objects,
    nested_get,
    overlapping,
    parse_time_columns,
    quantity,
    queue_from_pending,
    record_window,
    requeue_submit,
    row_ids,
    settle_attempts,
)
from fleetlib.scheduling.records import (
    SchedulerRecords,
)
from fleetlib.scheduling.schema import PENDING, TIME_DTYPE

# ================================================================================================
# Kueue Workloads
# ================================================================================================

#: The condition field whose transition times a Workload records.
_LTT = "status.conditions.lastTransitionTime"
_KUEUE_END_RANK = {"Finished": 0, "Preempted": 1, "Evicted": 2, "Admitted": 3}
#: Finished-condition reasons -> canonical end state.
KUEUE_FINISHED_STATES: dict[str, str] = {
    "Succeeded": "completed",
    "Failed": "failed",
    "WorkloadSliceReplaced": "completed",
    "FailedToStart": "failed",
    "OwnerNotFound": "cancelled",
    "OutOfSync": "cancelled",
}
#: Evicted-condition reasons -> canonical end state (the Preempted condition is always ``preempted``).
KUEUE_EVICTED_STATES: dict[str, str] = {
    "Preempted": "preempted",
    "PodsReadyTimeout": "failed",
    "NodeFailures": "node_fail",
    "ClusterQueueStopped": "cancelled",
    "LocalQueueStopped": "cancelled",
    "Deactivated": "cancelled",
    "InactiveWorkload": "cancelled",
    "DeactivatedDueToAdmissionCheck": "cancelled",
    "AdmissionCheck": "cancelled",
}


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    pool_by: str = "cluster_queue",
    gpu_resource: str = GPU_RESOURCE,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Kueue ``Workload`` objects (and ``ClusterQueue`` / ``LocalQueue`` objects) into tables.

    Accepts YAML (one or many documents, or a ``kind: List``) and JSON (an object, a ``List``, or JSON
    lines).  Several snapshots of one Workload (an exporter saving it at each change) are merged: the
    condition transitions they show are collected once each, so an eviction seen in a later snapshot
    closes an attempt whose admission only an earlier snapshot shows.

    Parameters
    ----------
    paths
        One file or several.
    tz
        Not used: RFC 3339 times carry their zone (a naive time is rejected).
    window
        The record window (anything :meth:`fleetlib.accounting.Window.parse` takes); attempts still
        holding and Workloads still pending at its end are censored there (named repairs).  Default:
        the earliest to the latest time in the objects.
    pool_by
        ``"cluster_queue"`` (``status.admission.clusterQueue``, default) or ``"flavor"`` (the
        ResourceFlavor assigned to ``gpu_resource``).  With ``"flavor"`` no queue table is built and
        never-admitted Workloads are left out (a pending Workload has no flavor yet).
    gpu_resource
        Resource name counted as devices.

    Returns
    -------
    records : SchedulerRecords
        ``allocations``: one row per admission (``Admitted=True`` -> first_assigned; ``PodsReady=True``
        -> gang_complete; the first of ``Finished`` / ``Evicted`` / ``Preempted`` / ``Admitted=False``
        -> release, with the end state mapped through :data:`KUEUE_FINISHED_STATES` and
        :data:`KUEUE_EVICTED_STATES`), plus one row per Workload never admitted (no first_assigned;
        release when it left the queue).  Devices come from ``status.admission.podSetAssignments[]
        .resourceUsage``; job_id is ``namespace/owner`` so the elastic slices of one job share it;
        elastic when the Workload carries ``kueue.x-k8s.io/elastic-job: "true"``; an attempt after an
        eviction is submitted at the eviction.  ``queue``: waits from submit to gang completion.
        ``capacity``: ClusterQueue ``nominalQuota`` of ``gpu_resource`` over the window (a quota, not
        physical nodes; borrowing is not modelled), when ClusterQueue objects are present.
    ledger : Ledger
        Rows are objects.  A rigid Workload with no PodsReady condition at all gets gang_complete =
        admission (admitted at its full requested size; flagged); an elastic one is rejected (its
        complete time cannot be inferred); PodsReady never True before release means the gang never
        completed: gang_complete = release (the whole hold was partial; a named repair).
    """
    del tz  # RFC 3339 times carry their zone
    if pool_by not in ("cluster_queue", "flavor"):
        raise DomainError(f"pool_by must be 'cluster_queue' or 'flavor'; got {pool_by!r}")
    win = record_window(window)
    book = ReadBook()
    wl_rows, cond_rows, cq_rows, lq_map = [], [], [], {}
    files = input_files(paths)
    for path in files:
        file = str(path)
        seen: dict[str, int] = {}
        for row, obj, canon in load_objects(path, book):
            if canon in seen:
                book.reject(file, row, None, f"duplicate object (same as row {seen[canon]})")
                continue
            seen[canon] = row
            kind = nested_get(obj, "kind")
            if kind == "ClusterQueue":
                cq_rows.append((file, row, obj))
            elif kind == "LocalQueue":
                ns, name = nested_get(obj, "metadata", "namespace"), nested_get(obj, "metadata", "name")
                cq = nested_get(obj, "spec", "clusterQueue")
                if not (name and cq):
                    book.reject(
                        file, row, "spec.clusterQueue", "LocalQueue without name or spec.clusterQueue"
                    )
                    continue
                lq_map[(ns or "default", name)] = cq
            elif kind == "Workload":
                try:
                    _kueue_workload(file, row, obj, gpu_resource, wl_rows, cond_rows, book)
                except _Shape as bad:
                    book.reject(file, row, bad.field, bad.reason)
            else:
                book.reject(file, row, "kind", f"kind {kind!r} is not Workload, ClusterQueue or LocalQueue")
    if not wl_rows:
        raise InputError(f"no usable Workload objects in the input ({book.settle().summary()})",
                         file=str(files[0]))
    wl = pd.DataFrame(wl_rows)
    cond = pd.DataFrame(cond_rows, columns=["file", "row", "key", "type", "status", "time", "reason"])
    records = _kueue_tables(
        wl, cond, cq_rows, lq_map, pool_by, gpu_resource, win, book, ",".join(str(p) for p in files)
    )
    return records, book.settle()


class _Shape(Exception):
    """A Workload field of the wrong shape (a mapping where a list belongs, a text for a mapping)."""

    def __init__(self, field: str, expected: str, value: object) -> None:
        super().__init__(field)
        self.field = field
        self.reason = f"{field} is {type(value).__name__} {excerpt(value)}; expected {expected}"


def _mapping(value: object, field: str) -> dict:
    """``value`` as a mapping (absent or empty: {}); anything else is a :class:`_Shape`."""
    if not value:
        return {}
    if not isinstance(value, dict):
        raise _Shape(field, "a mapping", value)
    return value


def _mappings(value: object, field: str) -> list[dict]:
    """``value`` as a list of mappings (absent or empty: []); anything else is a :class:`_Shape`."""
    if not value:
        return []
    if not isinstance(value, list):
        raise _Shape(field, "a list of mappings", value)
    for k, item in enumerate(value):
        if not isinstance(item, dict):
            raise _Shape(f"{field}[{k}]", "a mapping", item)
    return value


def _kueue_workload(
    file: str, row: int, obj: dict, gpu: str, wl_rows: list, cond_rows: list, book: ReadBook
) -> None:
    meta = _mapping(obj.get("metadata"), "metadata")
    ns, name = meta.get("namespace") or "default", meta.get("name")
    created = meta.get("creationTimestamp")
    if not name:
        book.reject(file, row, "metadata.name", "Workload without metadata.name")
        return
    if not created:
        book.reject(file, row, "metadata.creationTimestamp", "Workload without metadata.creationTimestamp")
        return
    owners = meta.get("ownerReferences") or []
    first = owners[0] if isinstance(owners, list) and owners else None
    owner = first.get("name") if isinstance(first, dict) else None
    annotations = _mapping(meta.get("annotations"), "metadata.annotations")
    elastic = str(annotations.get("kueue.x-k8s.io/elastic-job", "")).lower() == "true"
    requested = 0.0
    for k, ps in enumerate(_mappings(nested_get(obj, "spec", "podSets"), "spec.podSets")):
        count = quantity(ps.get("count", 1))
        per_pod = 0.0
        at = f"spec.podSets[{k}].template.spec.containers"
        for j, c in enumerate(_mappings(nested_get(ps, "template", "spec", "containers"), at)):
            res = _mapping(c.get("resources"), f"{at}[{j}].resources")
            requests = _mapping(res.get("requests"), f"{at}[{j}].resources.requests")
            limits = _mapping(res.get("limits"), f"{at}[{j}].resources.limits")
            q = quantity(requests.get(gpu, limits.get(gpu)))
            per_pod += 0.0 if np.isnan(q) else q
        requested += (0.0 if np.isnan(count) else count) * per_pod
    adm = _mapping(nested_get(obj, "status", "admission"), "status.admission")
    devices, flavor = 0.0, None
    at = "status.admission.podSetAssignments"
    for k, psa in enumerate(_mappings(adm.get("podSetAssignments"), at)):
        q = quantity(_mapping(psa.get("resourceUsage"), f"{at}[{k}].resourceUsage").get(gpu))
        devices += 0.0 if np.isnan(q) else q
        flavor = flavor or _mapping(psa.get("flavors"), f"{at}[{k}].flavors").get(gpu)
    conditions = nested_get(obj, "status", "conditions") or []
    if not isinstance(conditions, list):  # checked before the Workload's row is added
        raise _Shape("status.conditions", "a list of mappings", conditions)
    key = meta.get("uid") or f"{ns}/{name}"
    prio = nested_get(obj, "spec", "priority")
    wl_rows.append(
        {
            "file": file,
            "row": row,
            "key": key,
            "job_id": f"{ns}/{owner or name}",
            "namespace": ns,
            "queue_name": nested_get(obj, "spec", "queueName"),
            "created": str(created),
            "elastic": elastic,
            "requested": requested,
            "devices": devices if adm else np.nan,
            "cluster_queue": adm.get("clusterQueue"),
            "flavor": flavor,
            "priority": float(prio)
            if isinstance(prio, (int, float)) and not isinstance(prio, bool)
            else np.nan,
        }
    )
    for c in conditions:
        if isinstance(c, dict):
            cond_rows.append(
                (
                    file,
                    row,
                    key,
                    c.get("type"),
                    str(c.get("status")),
                    c.get("lastTransitionTime"),
                    c.get("reason") or "",
                )
            )


def _kueue_tables(
    wl: pd.DataFrame,
    cond: pd.DataFrame,
    cq_rows: list,
    lq_map: dict,
    pool_by: str,
    gpu: str,
    win: tuple[pd.Timestamp, pd.Timestamp] | None,
    book: ReadBook,
    source: str,
) -> SchedulerRecords:
    wl, cond = _kueue_times(wl, cond, book, source)
    # --- window
    times = pd.concat([wl["submit"], cond["t"]]).dropna()
    if win is None:
        win = (times.min(), max(times.max(), times.min() + pd.Timedelta(seconds=1)))
    win_end = win[1]

    # --- transition events -> attempts, each judged (rejected, repaired or flagged)
    att, ev = _kueue_attempts(wl, cond, pool_by)
    keep = _judge_kueue_attempts(att, ev, cond, gpu, win_end, book)
    # --- never-admitted Workloads, waits, queue
    never_adm = _kueue_never_admitted(wl, att, ev, lq_map, pool_by, win_end, book)
    req_never = never_adm["requested"].where(never_adm["requested"] > 0, 0.0)
    allocations = allocations_frame(
        {
            "job_id": pd.concat([keep["job_id"], never_adm["job_id"]], ignore_index=True),
            "attempt": 0,
            "pool": pd.concat([keep["pool"], never_adm["pool"]], ignore_index=True),
            "devices": pd.concat([keep["devices"], pd.Series(0.0, index=never_adm.index)], ignore_index=True)
            .round()
            .astype("int64"),
            "submit": pd.concat([keep["submit"], never_adm["submit"]], ignore_index=True),
            "first_assigned": pd.concat(
                [keep["first_assigned"], pd.Series(pd.NaT, index=never_adm.index, dtype=TIME_DTYPE)],
                ignore_index=True,
            ),
            "gang_complete": pd.concat(
                [keep["gang_complete"], pd.Series(pd.NaT, index=never_adm.index, dtype=TIME_DTYPE)],
                ignore_index=True,
            ),
            "release": pd.concat([keep["release"], never_adm["release"]], ignore_index=True),
            "priority": pd.concat([keep["priority"], never_adm["priority"]], ignore_index=True),
            "elastic": pd.concat([keep["elastic"], never_adm["elastic"]], ignore_index=True).astype(bool),
            "end_state": pd.concat([keep["end_state"], never_adm["end_state"]], ignore_index=True),
            "requested_devices": pd.concat(
                [keep["requested"].where(keep["requested"] > 0, keep["devices"]), req_never],
                ignore_index=True,
            )
            .round()
            .astype("int64"),
        }
    )
    queue = None
    if pool_by == "cluster_queue":
        a = allocations
        end = a["gang_complete"].where(a["gang_complete"].notna(), a["release"])
        queue = queue_from_pending(a["pool"], a["submit"], end.clip(upper=win_end), a["requested_devices"])
    capacity = _kueue_capacity(cq_rows, pool_by, gpu, win, book) if cq_rows else None
    notes = {
        "gang_complete": "Workload condition PodsReady=True (Admitted=True marks the first assignment)",
        "time_zone": "RFC 3339 times as written by the API server",
        "window": f"{win[0].isoformat()} .. {win[1].isoformat()}",
        "queue": "Workloads waiting from submit (creation, or the last eviction) to gang completion",
        "capacity": (
            "ClusterQueue nominalQuota (a quota, not physical nodes; borrowing not modelled)"
            if cq_rows
            else "no ClusterQueue objects given: capacity not known"
        ),
    }
    return SchedulerRecords.from_tables(source, notes,
                                       allocations=allocations, queue=queue, capacity=capacity)


def _kueue_times(
    wl: pd.DataFrame, cond: pd.DataFrame, book: ReadBook, source: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parse creation and transition times (RFC 3339 required); a bad time rejects its object whole."""
    wl = wl.reset_index(drop=True)
    wl["row_id"] = row_ids(wl)
    bad: set[str] = set()
    wl["submit"] = pd.Series(pd.NaT, index=wl.index, dtype=TIME_DTYPE)
    for file, sub in wl.groupby("file", sort=False):
        t, rej = parse_time_columns(
            sub[["created"]].rename(columns={"created": "metadata.creationTimestamp"}),
            ["metadata.creationTimestamp"],
            tz=None,
            file=str(file),
            rows=sub["row"].to_numpy(),
            book=book,
            format_hint="Kubernetes",
            naive_allowed=False,
        )
        wl.loc[sub.index, "submit"] = t.parsed["metadata.creationTimestamp"]
        bad |= set(sub["row_id"][rej])
    cond = cond.reset_index(drop=True)
    cond["row_id"] = row_ids(cond)
    cond["t"] = pd.Series(pd.NaT, index=cond.index, dtype=TIME_DTYPE)
    for file, sub in cond.groupby("file", sort=False):
        rows = sub["row"].to_numpy()
        t, rej = parse_time_columns(
            sub[["time"]].astype(str).rename(columns={"time": _LTT}),
            [_LTT],
            tz=None,
            file=str(file),
            rows=rows,
            book=book,
            format_hint="Kubernetes",
            naive_allowed=False,
        )
        cond.loc[sub.index, "t"] = t.parsed[_LTT]
        miss = t.missing[_LTT] & ~rej
        book.reject(
            str(file),
            rows[miss],
            "status.conditions.lastTransitionTime",
            "condition without lastTransitionTime",
        )
        bad |= set(sub["row_id"][rej | miss])
    wl = wl[~wl["row_id"].isin(bad)].reset_index(drop=True)
    cond = cond[~cond["row_id"].isin(bad)].reset_index(drop=True)
    if wl.empty:
        raise InputError(f"every Workload object was rejected ({book.settle().summary()})",
                         file=source.split(",")[0])
    return wl, cond


def _kueue_attempts(wl: pd.DataFrame, cond: pd.DataFrame, pool_by: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Turn Workload conditions into transition events and the attempts they delimit."""
    typ, reason = cond["type"].astype(str), cond["reason"].astype(str)
    is_true = cond["status"].str.lower() == "true"
    is_false = cond["status"].str.lower() == "false"
    fin = (typ == "Finished") & is_true
    pre = (typ == "Preempted") & is_true
    evi = (typ == "Evicted") & is_true
    adm_false = (typ == "Admitted") & is_false
    end_state = np.select(
        [fin, pre, evi],
        [reason.map(KUEUE_FINISHED_STATES), "preempted", reason.map(KUEUE_EVICTED_STATES)],
        default="unknown",
    )
    end_state = pd.Series(end_state, index=cond.index).fillna("unknown").replace({"nan": "unknown"})
    ev = pd.DataFrame(
        {
            "key": cond["key"],
            "row": cond["row_id"],
            "time": cond["t"],
            "kind": np.select(
                [(typ == "Admitted") & is_true, (typ == "PodsReady") & is_true, fin | pre | evi | adm_false],
                ["start", "gang", "end"],
                default="",
            ),
            "end_state": end_state,
            "end_kind": np.where(fin, "finished", "evicted"),
            "raw_end": typ + ":" + reason,
            "rank": typ.map(_KUEUE_END_RANK).fillna(9).astype(int),
        }
    )
    ev = ev[ev["kind"] != ""]
    att, ev = attempts_from_events(ev, ("end_state", "end_kind", "raw_end"))
    info = wl.drop(columns=["key"]).rename(columns={"row_id": "primary_row"})
    att = att.merge(info, on="primary_row", how="left")
    att["pool"] = att["cluster_queue"] if pool_by == "cluster_queue" else att["flavor"]

    return att, ev


def _judge_kueue_attempts(
    att: pd.DataFrame,
    ev: pd.DataFrame,
    cond: pd.DataFrame,
    gpu: str,
    win_end: pd.Timestamp,
    book: ReadBook,
) -> pd.DataFrame:
    """Reject, repair or flag each attempt (a RowBook over the attempts); return the kept ones.

    Repairs fill ``gang_complete`` / ``release`` / ``end_state`` of ``att`` in place; the outcomes
    land on each attempt's primary row in ``book``.
    """
    podsready_seen = set(cond.loc[cond["type"].astype(str) == "PodsReady", "key"])
    v = RowBook("<attempts>", len(att))  # position i: attempt i
    v.reject(
        as_mask(~(att["devices"] > 0)), None,
        f"no {gpu} in status.admission.podSetAssignments: not GPU capacity",
    )
    v.reject(
        as_mask(att["pool"].isna()), None,
        "admitted Workload without status.admission.clusterQueue (or flavor)",
    )
    no_gang = att["gang_complete"].isna()
    has_pr = att["key"].isin(podsready_seen)
    ended = att["release"].notna()
    v.reject(
        as_mask(no_gang & ~has_pr & att["elastic"]),
        None,
        "elastic Workload with no PodsReady condition: the time its gang became complete cannot be inferred",
    )
    partial_adm = att["devices"] < att["requested"]
    v.reject(
        as_mask(no_gang & ~has_pr & partial_adm),
        None,
        "no PodsReady condition and admitted below the requested size: gang completion cannot be inferred",
    )
    infer = no_gang & ~has_pr & (~v.rejected)
    v.flag(
        as_mask(infer),
        "gang_complete_inferred_at_admission",
        "no PodsReady condition; gang_complete inferred at admission (a rigid Workload admitted at "
        "its full requested size)",
    )
    att.loc[infer, "gang_complete"] = att.loc[infer, "first_assigned"]
    never = att["gang_complete"].isna() & ended & (~v.rejected)
    v.repair(
        as_mask(never),
        None,
        "gang never completed (PodsReady never True before release): gang_complete set to release, "
        "the whole hold was partial",
    )
    att.loc[never, "gang_complete"] = att.loc[never, "release"]
    v.reject(as_mask(att["release"] < att["gang_complete"]), None, "released before its gang completed")
    # an end condition stamped before the first admission: the conditions are out of order, and the
    # attempt after it is not "still holding"
    early = ev[(ev["attempt"] < 0) & (ev["kind"] == "end")].groupby("key").first()
    if len(early):
        first_att = att["attempt"] == 0
        hit = first_att & att["key"].isin(early.index) & ~ended & (~v.rejected)
        if hit.any():
            e = early.reindex(att.loc[hit, "key"])
            kind = e["raw_end"].astype(str).where(e["raw_end"].notna(), "end")
            reasons = (kind.to_numpy(dtype=object) + " at " + e["time"].astype(str).to_numpy(dtype=object)
                       + " is stamped before Admitted at "
                       + att.loc[hit, "first_assigned"].astype(str).to_numpy(dtype=object)
                       + ": conditions out of order, the hold cannot be timed")
            v.reject(np.flatnonzero(as_mask(hit)), None, reasons)
    still = ~ended & (~v.rejected)
    v.reject(
        as_mask(still & (att["first_assigned"] > win_end)), None,
        "admitted after the window end and still open",
    )
    still = ~ended & (~v.rejected)
    v.repair(
        as_mask(still), None,
        f"still holding at the end of the record: release censored at {win_end.isoformat()}",
    )
    att.loc[still, "release"] = win_end
    att.loc[still, "end_state"] = "running"
    att.loc[still, "end_kind"] = "open"
    open_gang = still & att["gang_complete"].isna()
    v.repair(
        as_mask(open_gang),
        None,
        "gang not complete at the end of the record: gang_complete set to the window end",
    )
    att.loc[open_gang, "gang_complete"] = win_end
    unknown_end = att["end_state"].eq("unknown") & ended
    v.flag(
        as_mask(unknown_end),
        "unknown_end_reason",
        "end reason not recognised; end_state 'unknown'",
    )
    ok = ~v.rejected
    if ok.any():
        sub = att[ok]
        el = sub["elastic"].to_numpy()
        ov = overlapping(
            sub["job_id"], sub["gang_complete"].where(el, sub["first_assigned"]), sub["release"]
        )
        v.reject(
            as_mask(pd.Series(ov, index=sub.index).reindex(att.index, fill_value=False)),
            None,
            "overlaps an earlier attempt of the same job (admitted before it was released)",
        )
    settle_attempts(v, att, ev, book)
    keep = att[~v.rejected].copy()
    keep["submit"] = requeue_submit(keep)
    return keep


def _kueue_never_admitted(
    wl: pd.DataFrame,
    att: pd.DataFrame,
    ev: pd.DataFrame,
    lq_map: dict,
    pool_by: str,
    win_end: pd.Timestamp,
    book: ReadBook,
) -> pd.DataFrame:
    """Return the Workloads never admitted (waits only), with their pool, release and end state."""
    first = wl.sort_values(["file", "row"]).groupby("key", as_index=False).last()
    learned = first.dropna(subset=["cluster_queue"]).drop_duplicates(["namespace", "queue_name"])
    lq = {
        **dict(
            zip(
                zip(learned["namespace"], learned["queue_name"], strict=True),
                learned["cluster_queue"],
                strict=True,
            )
        ),
        **lq_map,
    }
    lq_frame = pd.DataFrame(
        [(n, q, c) for (n, q), c in lq.items()], columns=["namespace", "queue_name", "_cq"], dtype=object
    )
    mapped = first[["namespace", "queue_name"]].merge(lq_frame, on=["namespace", "queue_name"], how="left")[
        "_cq"
    ]
    mapped.index = first.index
    first["pool"] = (
        first["cluster_queue"].where(first["cluster_queue"].notna(), mapped)
        if pool_by == "cluster_queue"
        else first["flavor"]
    )
    never_adm = first[~first["key"].isin(att["key"])].copy()
    orphan = ev[(ev["attempt"] < 0) & (ev["kind"] == "end")].groupby("key").first()
    never_adm["release"] = (
        pd.Series(orphan["time"].reindex(never_adm["key"]).to_numpy(), index=never_adm.index,
                  dtype=TIME_DTYPE)
        if len(orphan)
        else pd.Series(pd.NaT, index=never_adm.index, dtype=TIME_DTYPE)
    )
    never_adm["end_state"] = pd.Series(
        orphan["end_state"].reindex(never_adm["key"]).to_numpy(dtype=object) if len(orphan) else None,
        index=never_adm.index,
        dtype=object,
    )
    waiting = never_adm["release"].isna()
    rid = never_adm["row_id"]
    no_pool = never_adm["pool"].isna()
    for r in rid[no_pool]:
        f, n = r.split("\x00")
        book.reject(
            f,
            int(n),
            "spec.queueName",
            "Workload never admitted and its LocalQueue maps to no known ClusterQueue: its wait has no pool"
            if pool_by == "cluster_queue"
            else "Workload never admitted: it has no flavor, so no pool when pool_by='flavor'",
        )
    late = waiting & (never_adm["submit"] > win_end) & ~no_pool
    for r in rid[late]:
        f, n = r.split("\x00")
        book.reject(f, int(n), "metadata.creationTimestamp", "still pending but created after the window end")
    never_adm = never_adm[~no_pool & ~late]
    waiting = never_adm["release"].isna()
    for r in never_adm["row_id"][waiting]:
        f, n = r.split("\x00")
        book.repair(
            f,
            int(n),
            None,
            f"still pending at the end of the record: leaves the queue at {win_end.isoformat()} (censored)",
        )
    never_adm.loc[waiting, "release"] = win_end
    never_adm.loc[waiting, "end_state"] = PENDING
    never_adm["end_state"] = never_adm["end_state"].fillna("unknown")
    return never_adm


def _kueue_capacity(
    cq_rows: list, pool_by: str, gpu: str, win: tuple[pd.Timestamp, pd.Timestamp], book: ReadBook
) -> pd.DataFrame:
    quota: dict[str, float] = {}
    for file, row, obj in cq_rows:
        name = nested_get(obj, "metadata", "name")
        total = 0.0
        for rg in nested_get(obj, "spec", "resourceGroups") or []:
            for fl in rg.get("flavors") or []:
                for res in fl.get("resources") or []:
                    if res.get("name") == gpu:
                        q = quantity(res.get("nominalQuota"))
                        if np.isnan(q):
                            continue
                        pool = name if pool_by == "cluster_queue" else fl.get("name")
                        quota[str(pool)] = quota.get(str(pool), 0.0) + q
                        total += q
        if total <= 0:
            book.reject(file, row, "spec.resourceGroups", f"ClusterQueue {name!r} has no {gpu} nominalQuota")
    return capacity_from_out_of_service(
        pd.Series(quota, dtype=float), pd.DataFrame(columns=["pool", "start", "end", "devices"]), win
    )
