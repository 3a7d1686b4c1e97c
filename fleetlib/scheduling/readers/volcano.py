"""Volcano PodGroup watch records (JSON lines) -> canonical allocations and queue tables."""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib._io import input_files
from fleetlib.quality import InputError, Ledger, RowBook
from fleetlib.scheduling.readers._common import (
    GPU_RESOURCE,
    ReadBook,
    allocations_frame,
    as_mask,
    attempts_from_events,
    capacity_from_out_of_service,
    load_objects,
    nested_get,
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
# Volcano PodGroup watch records
# ================================================================================================

VOLCANO_PHASES = frozenset({"Pending", "Inqueue", "Running", "Unknown", "Completed"})


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    gpu_resource: str = GPU_RESOURCE,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Volcano PodGroup phase transitions recorded from a watch.

    The format is JSON lines, one watch event per line, stamped by the recorder:
    ``{"time": "<RFC 3339>", "type": "ADDED|MODIFIED|DELETED", "object": {<PodGroup or Queue>}}``
    (a PodGroup does not timestamp its phase, so the recorder's time is the transition time).

    Parameters
    ----------
    paths
        One file or several (JSON lines of watch events).
    tz
        Not used: the recorder's times carry their offset (a naive time is rejected).
    window
        The record window (anything :meth:`fleetlib.accounting.Window.parse` takes); groups still
        holding or waiting at its end are censored there.
    gpu_resource
        Resource in ``spec.minResources`` counted as devices (the gang's GPUs).

    Returns
    -------
    records : SchedulerRecords
        ``allocations``: one row per held spell of a PodGroup (pool = ``spec.queue``).  A spell starts
        at the first record with pods running (``status.running > 0``) or phase Running/Unknown
        (first_assigned); its gang completes when the phase is ``Running`` (or, flagged, when
        ``status.running`` reaches ``minMember`` first); it ends when the phase leaves Running/Unknown:
        Completed (``completed``, or ``failed`` when ``status.failed > 0``), back to Pending/Inqueue
        (``preempted``: the group was reclaimed and waits again) or a DELETED event (``cancelled``).
        A group that never held devices is a row without first_assigned.  ``queue``: waits from submit
        (creation, or the last requeue) to gang completion.  ``capacity``: Queue ``spec.capability`` of
        ``gpu_resource`` (a quota, not physical nodes) when Queue records are given.
    ledger : Ledger
        Rows are lines.  A spell that never reaches minMember gets gang_complete = release (the whole
        hold was partial; a named repair).  Unknown phases are kept and flagged.
    """
    del tz  # RFC 3339 times carry their zone
    win = record_window(window)
    book = ReadBook()
    files = input_files(paths)
    recs, queues = _volcano_records(files, gpu_resource, book)
    df = _volcano_frame(recs, files, gpu_resource, book)
    if win is None:
        times = pd.concat([df["t"], df["submit"]]).dropna()
        win = (times.min(), max(times.max(), times.min() + pd.Timedelta(seconds=1)))
    att, kept, first_submit = _volcano_attempts(df, win, book)
    never = _volcano_never_held(df, att, first_submit, win, book)
    n_never = len(never)
    allocations = allocations_frame(
        {
            "job_id": pd.concat([kept["job_id"], never["job_id"]], ignore_index=True),
            "attempt": 0,
            "pool": pd.concat([kept["pool"], never["pool"]], ignore_index=True),
            "devices": np.r_[kept["devices"].round().to_numpy(), np.zeros(n_never)].astype(np.int64),
            "submit": pd.concat([kept["submit"], never["submit"]], ignore_index=True),
            "first_assigned": pd.concat(
                [kept["first_assigned"], pd.Series(pd.NaT, index=never.index, dtype=TIME_DTYPE)],
                ignore_index=True,
            ),
            "gang_complete": pd.concat(
                [kept["gang_complete"], pd.Series(pd.NaT, index=never.index, dtype=TIME_DTYPE)],
                ignore_index=True,
            ),
            "release": pd.concat([kept["release"], never["release"]], ignore_index=True),
            "priority": np.nan,
            "elastic": False,
            "end_state": pd.concat(
                [kept["end_state"], pd.Series(never["end_state"].to_numpy())], ignore_index=True
            ),
            "requested_devices": np.r_[
                kept["devices"].round().to_numpy(), never["devices"].round().to_numpy()
            ].astype(np.int64),
        }
    )
    a = allocations
    qend = a["gang_complete"].where(a["gang_complete"].notna(), a["release"])
    queue = queue_from_pending(a["pool"], a["submit"], qend.clip(upper=win[1]), a["requested_devices"])
    capacity = _volcano_capacity(queues, gpu_resource, win, book) if queues else None
    notes = {
        "gang_complete": "PodGroup phase Running (minMember pods running); Unknown is a partial gang",
        "time_zone": "RFC 3339 times stamped by the watch recorder",
        "window": f"{win[0].isoformat()} .. {win[1].isoformat()}",
        "queue": "PodGroups waiting from submit (creation, or the last requeue) to gang completion",
        "capacity": (
            "Queue spec.capability (a quota, not physical nodes)"
            if queues
            else "no Queue records given: capacity not known"
        ),
    }
    return SchedulerRecords.from_tables(
        ",".join(str(p) for p in files), notes, allocations=allocations, queue=queue, capacity=capacity
    ), book.settle()


def _volcano_records(
    paths: list[Path], gpu_resource: str, book: ReadBook
) -> tuple[list[dict[str, object]], list[tuple[str, int, dict]]]:
    """Return the PodGroup watch records (one dict each) and the Queue objects of the files."""
    recs: list[dict[str, object]] = []
    queues: list[tuple[str, int, dict]] = []
    for path in paths:
        file = str(path)
        seen: dict[str, int] = {}
        for row, rec, canon in load_objects(path, book):
            if canon in seen:
                book.reject(file, row, None, f"duplicate record (same as line {seen[canon]})")
                continue
            seen[canon] = row
            obj = nested_get(rec, "object")
            when = nested_get(rec, "time")
            if not isinstance(obj, dict) or when is None:
                book.reject(
                    file,
                    row,
                    "time" if when is None else "object",
                    "a watch record needs 'time' and 'object'",
                )
                continue
            kind = obj.get("kind")
            if kind == "Queue":
                queues.append((file, row, obj))
                continue
            if kind != "PodGroup":
                book.reject(file, row, "object.kind", f"kind {kind!r} is not PodGroup or Queue")
                continue
            meta = obj.get("metadata") or {}
            ns, name = meta.get("namespace") or "default", meta.get("name")
            if not name:
                book.reject(file, row, "object.metadata.name", "PodGroup without a name")
                continue
            st = obj.get("status") or {}
            spec = obj.get("spec") or {}
            recs.append(
                {
                    "file": file,
                    "row": row,
                    "time": str(when),
                    "type": str(rec.get("type", "MODIFIED")),
                    "key": meta.get("uid") or f"{ns}/{name}",
                    "job_id": f"{ns}/{name}",
                    "created": str(meta.get("creationTimestamp") or when),
                    "pool": spec.get("queue") or "default",
                    "min_member": quantity(spec.get("minMember", 1)),
                    "devices": quantity((spec.get("minResources") or {}).get(gpu_resource)),
                    "phase": str(st.get("phase") or ""),
                    "running": quantity(st.get("running", 0)),
                    "failed": quantity(st.get("failed", 0)),
                }
            )
    return recs, queues


def _volcano_frame(
    recs: list[dict[str, object]], paths: list[Path], gpu_resource: str, book: ReadBook
) -> pd.DataFrame:
    """Parse times, reject records without GPU demand, flag unknown phases; return the kept records."""
    if not recs:
        raise InputError(f"no usable PodGroup records in the input ({book.settle().summary()})",
                         file=str(paths[0]))
    df = pd.DataFrame(recs)
    keep = np.ones(len(df), dtype=bool)
    df["t"] = pd.Series(pd.NaT, index=df.index, dtype=TIME_DTYPE)
    df["submit"] = pd.Series(pd.NaT, index=df.index, dtype=TIME_DTYPE)
    for file, sub in df.groupby("file", sort=False):
        t, rej = parse_time_columns(
            sub[["time", "created"]].rename(columns={"created": "object.metadata.creationTimestamp"}),
            ["time", "object.metadata.creationTimestamp"],
            tz=None,
            file=str(file),
            rows=sub["row"].to_numpy(),
            book=book,
            format_hint="the watch recorder",
            naive_allowed=False,
        )
        df.loc[sub.index, "t"] = t.parsed["time"]
        df.loc[sub.index, "submit"] = t.parsed["object.metadata.creationTimestamp"]
        keep[sub.index.to_numpy()[rej]] = False
    no_gpu = ~(df["devices"] > 0).to_numpy() & keep
    for file, sub in df[no_gpu].groupby("file", sort=False):
        book.reject(
            str(file),
            sub["row"].to_numpy(),
            "object.spec.minResources",
            f"no {gpu_resource} in spec.minResources: not GPU demand",
        )
    keep &= ~no_gpu
    unknown = ~df["phase"].isin(VOLCANO_PHASES).to_numpy() & keep & (df["type"] != "DELETED").to_numpy()
    for file, sub in df[unknown].groupby("file", sort=False):
        book.flag(
            str(file),
            sub["row"].to_numpy(),
            "unknown_podgroup_phase",
            [f"unknown PodGroup phase {p!r} kept; held while pods run" for p in sub["phase"]],
            field="object.status.phase",
        )
    df = df[keep].sort_values(["key", "t", "row"], kind="stable").reset_index(drop=True)
    if df.empty:
        raise InputError(f"every PodGroup record was rejected ({book.settle().summary()})",
                         file=str(paths[0]))
    df["row_id"] = row_ids(df)
    return df


def _volcano_attempts(
    df: pd.DataFrame, win: tuple[pd.Timestamp, pd.Timestamp], book: ReadBook
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """Turn phases into attempts and judge each (a RowBook over the attempts).

    Returns the attempts, the kept attempts (with their submit times) and each
    PodGroup's first creation time.
    """
    deleted = df["type"].eq("DELETED")
    held = (
        df["phase"].isin(["Running", "Unknown"]) | ((df["running"] > 0) & df["phase"].ne("Completed"))
    ) & ~deleted
    prev_held = held.groupby(df["key"]).shift(1, fill_value=False).astype(bool)
    by_count = (df["running"] >= df["min_member"]) & held & df["phase"].ne("Running")
    gang_m = held & (df["phase"].eq("Running") | by_count)
    end_state = np.select(
        [
            deleted,
            df["phase"].eq("Completed") & (df["failed"] > 0),
            df["phase"].eq("Completed"),
            df["phase"].isin(["Pending", "Inqueue"]),
        ],
        ["cancelled", "failed", "completed", "preempted"],
        default="unknown",
    )
    end_kind = np.where(df["phase"].isin(["Pending", "Inqueue"]) & ~deleted, "evicted", "finished")
    parts = []
    for mask, kind in ((held & ~prev_held, "start"), (gang_m, "gang"), (~held & prev_held, "end")):
        m = mask.to_numpy()
        parts.append(
            pd.DataFrame(
                {
                    "key": df["key"][m],
                    "row": df["row_id"][m],
                    "time": df["t"][m],
                    "kind": kind,
                    "end_state": end_state[m],
                    "end_kind": end_kind[m],
                    "rank": 0,
                    "by_count": by_count[m].to_numpy(),
                }
            )
        )
    ev = pd.concat(parts, ignore_index=True)
    att, ev = attempts_from_events(ev, ("end_state", "end_kind"))
    gang_by_count = (
        ev[ev["kind"] == "gang"].sort_values("time").groupby(["key", "attempt"])["by_count"].first()
    )
    att = att.merge(
        df[["row_id", "job_id", "pool", "devices"]].rename(columns={"row_id": "primary_row"}),
        on="primary_row",
        how="left",
    )
    first_submit = df.groupby("key")["submit"].min()
    att["submit"] = att["key"].map(first_submit)
    att = att.merge(gang_by_count.rename("by_count").reset_index(), on=["key", "attempt"], how="left")
    att["by_count"] = att["by_count"].fillna(False).astype(bool)
    v = RowBook("<attempts>", len(att))  # position i: attempt i
    no_gang = att["gang_complete"].isna()
    ended = att["release"].notna()
    v.flag(
        as_mask(att["by_count"] & ~no_gang),
        "gang_complete_from_running_count",
        "gang_complete taken from status.running reaching minMember (the phase had not yet said Running)",
    )
    m = no_gang & ended
    v.repair(
        as_mask(m),
        None,
        "gang never completed (minMember never running): gang_complete set to release, the whole hold "
        "was partial",
    )
    att.loc[m, "gang_complete"] = att.loc[m, "release"]
    still = ~ended
    v.repair(
        as_mask(still), None,
        f"still holding at the end of the record: release censored at {win[1].isoformat()}",
    )
    att.loc[still, "release"] = win[1]
    att.loc[still, "end_state"] = "running"
    att.loc[still, "end_kind"] = "open"
    m = still & att["gang_complete"].isna()
    v.repair(as_mask(m), None,
             "gang not complete at the end of the record: gang_complete set to the window end")
    att.loc[m, "gang_complete"] = win[1]
    settle_attempts(v, att, ev, book)
    kept = att[~v.rejected].copy()
    kept["submit"] = requeue_submit(kept)
    return att, kept, first_submit


def _volcano_never_held(
    df: pd.DataFrame,
    att: pd.DataFrame,
    first_submit: pd.Series,
    win: tuple[pd.Timestamp, pd.Timestamp],
    book: ReadBook,
) -> pd.DataFrame:
    """Return the PodGroups that never held devices: waited, then left or still wait (censored)."""
    last = df.groupby("key").last()
    never = last[~last.index.isin(att["key"])].copy()
    gone = never["type"].eq("DELETED") | never["phase"].eq("Completed")
    never["release"] = never["t"].where(gone, win[1])
    never["end_state"] = np.where(
        gone, np.where(never["type"].eq("DELETED"), "cancelled", "unknown"), PENDING
    )
    for rid in never.loc[~gone, "row_id"]:
        f, n = rid.split("\x00")
        book.repair(
            f,
            int(n),
            None,
            f"still pending at the end of the record: leaves the queue at {win[1].isoformat()} (censored)",
        )
    never["submit"] = never.index.map(first_submit)
    return never


def _volcano_capacity(
    queues: list[tuple[str, int, dict]],
    gpu_resource: str,
    win: tuple[pd.Timestamp, pd.Timestamp],
    book: ReadBook,
) -> pd.DataFrame:
    """Capacity per Queue from ``spec.capability`` (a quota), constant over the window."""
    cap: dict[str, float] = {}
    for file, row, obj in queues:
        q = quantity((nested_get(obj, "spec", "capability") or {}).get(gpu_resource))
        if np.isnan(q):
            book.reject(file, row, "object.spec.capability", f"Queue without {gpu_resource} capability")
            continue
        cap[str(nested_get(obj, "metadata", "name"))] = q
    capacity = capacity_from_out_of_service(
        pd.Series(cap, dtype=float), pd.DataFrame(columns=["pool", "start", "end", "devices"]), win
    )
    return capacity
