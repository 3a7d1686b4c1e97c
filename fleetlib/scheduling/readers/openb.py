"""Alibaba GPU 2023 ``openb`` pod and node lists -> waits and installed-capacity tables."""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib._io import input_files, read_text
from fleetlib.quality import InputError, Ledger
from fleetlib.scheduling.readers._common import (
    ReadBook,
    csv_lines,
    header_line,
)
from fleetlib.scheduling.records import (
    SchedulerRecords,
)

# ================================================================================================
# Alibaba openb pod and node lists
# ================================================================================================

_OPENB_POD_REQUIRED = (
    "name",
    "num_gpu",
    "gpu_milli",
    "creation_time",
    "scheduled_time",
    "deletion_time",
    "pod_phase",
)
_OPENB_NODE_REQUIRED = ("sn", "gpu", "model")
_OPENB_PHASES = frozenset({"Pending", "Running", "Succeeded", "Failed", "Unknown"})


#: The largest GPU count one pod or node may name (2**24 - 1): beyond it a count is a damaged number
#: (2**63 would wrap to -9223372036854775808 once stored as int64).
MAX_COUNT = 2**24 - 1


def _reject_beyond(book: ReadBook, file: str, rows: np.ndarray, value: pd.Series, col: str, most: int,
                   alive: np.ndarray) -> np.ndarray:
    """Reject the live rows whose ``col`` is above ``most``, naming the value; return their mask."""
    beyond = (value > most).to_numpy() & alive
    if beyond.any():
        book.reject(file, rows[beyond], col, [f"{col} {v:.6g} is more than {most:,} (a damaged number, not a "
                                              "count)" for v in value.to_numpy()[beyond]])
    return beyond


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
) -> tuple[SchedulerRecords, Ledger]:
    """Read the Alibaba GPU 2023 ``openb`` pod list (waits, size cohorts) and node list (installed GPUs).

    The pod list is a sample that never fills the cluster (its pods overlap to a few tens of GPUs
    against about six thousand installed), so it gives **waits and size cohorts, not time-based
    scheduling goodput**: no allocations or capacity table is produced from it.  Times in the trace are
    seconds from its start, kept as seconds (``creation_s``, ``scheduled_s``, ``deletion_s``).

    Parameters
    ----------
    paths
        ``openb_pod_list_*.csv[.gz]`` and/or ``openb_node_list_*.csv`` (recognised by their headers).
    tz, window
        Not used: times are seconds from the trace start (no zone, no calendar window).

    Returns
    -------
    records : SchedulerRecords
        ``extra["waits"]`` (:data:`WAIT_COLUMNS`; ``wait_s = scheduled_time - creation_time``; pods never
        scheduled keep ``scheduled = False`` and a missing wait, a censored observation; ``devices`` is
        ``gpu_milli / 1000`` for a shared single GPU, else ``num_gpu``) and ``extra["installed"]``
        (:data:`INSTALLED_COLUMNS`, GPUs per model from the node list).
    ledger : Ledger
        Duplicate pod names, scheduling before creation, deletion before creation or scheduling, and
        inconsistent GPU fields are rejected; unknown phases are kept and flagged.
    """
    del tz, window  # seconds from the trace start: no zone, no calendar window
    book = ReadBook()
    pods, nodes = [], []
    for path in input_files(paths):
        text = read_text(path)
        header = [h.strip() for h in header_line(text, path).split(",")]
        if "creation_time" in header or "num_gpu" in header:
            pods.append(_openb_pods(path, text, book))
        elif "sn" in header or "model" in header:
            nodes.append(_openb_nodes(path, text, book))
        else:
            raise InputError(
                f"header is neither an openb pod list nor a node list: {header[:6]}", file=str(path), row=1
            )
    waits = installed = None
    if pods:
        waits = pd.concat(pods, ignore_index=True)
    if nodes:
        n = pd.concat(nodes, ignore_index=True)
        installed = n.groupby("model", as_index=False).agg(nodes=("gpu", "size"), devices=("gpu", "sum"))
        installed = installed.astype({"nodes": "int64", "devices": "int64"})
    notes = {
        "use": "waits and size cohorts only: the pod sample never fills the cluster (no time-based goodput)",
        "time_zone": "seconds from the trace start (no calendar time)",
    }
    source = ",".join(str(p) for p in input_files(paths))
    return SchedulerRecords.from_tables(source, notes, waits=waits, installed=installed), book.settle()


def _openb_pods(path: Path, text: str, book: ReadBook) -> pd.DataFrame:
    file = str(path)
    raw, rows = csv_lines(path, text, book, _OPENB_POD_REQUIRED, "an openb pod list")
    alive = np.ones(len(raw), dtype=bool)

    def num(c: str) -> pd.Series:
        return pd.to_numeric(raw[c].str.strip().replace("", np.nan), errors="coerce")

    create, sched, delete = num("creation_time"), num("scheduled_time"), num("deletion_time")
    ngpu, milli = num("num_gpu"), num("gpu_milli")
    for c, v, need in (
        ("creation_time", create, True),
        ("deletion_time", delete, False),
        ("scheduled_time", sched, False),
        ("num_gpu", ngpu, True),
        ("gpu_milli", milli, True),
    ):
        blank = raw[c].str.strip().eq("").to_numpy()
        bad = (
            (v < 0) | (v.isna() & ~pd.Series(blank)) | (v.isna() & pd.Series(need & blank))
        ).to_numpy() & alive
        book.reject(file, rows[bad], c, "not a non-negative number")
        alive &= ~bad
    for c, v, most in (("num_gpu", ngpu, MAX_COUNT), ("gpu_milli", milli, 1000 * MAX_COUNT)):
        alive &= ~_reject_beyond(book, file, rows, v, c, most, alive)
    dup = raw["name"].duplicated(keep="first").to_numpy() & alive
    book.reject(file, rows[dup], "name", "duplicate pod name")
    alive &= ~dup
    m = (sched < create).to_numpy() & alive
    book.reject(file, rows[m], "scheduled_time", "scheduled before it was created")
    alive &= ~m
    m = (delete < create).to_numpy() & alive
    book.reject(file, rows[m], "deletion_time", "deleted before it was created")
    alive &= ~m
    m = (delete < sched).to_numpy() & alive
    book.reject(file, rows[m], "deletion_time", "deleted before it was scheduled")
    alive &= ~m
    m = (
        (ngpu != np.round(ngpu))
        | (milli > 1000)
        | ((ngpu == 0) & (milli > 0))
        | ((ngpu > 1) & (milli != 1000))
        | ((ngpu >= 1) & (milli <= 0))
    ).to_numpy() & alive
    book.reject(
        file,
        rows[m],
        "gpu_milli",
        "inconsistent GPU request (whole GPUs need gpu_milli 1000; a shared GPU needs num_gpu 1, "
        "0 < gpu_milli <= 1000; CPU pods need 0)",
    )
    alive &= ~m
    phase = raw["pod_phase"].str.strip()
    unk = ~phase.isin(_OPENB_PHASES).to_numpy() & alive
    book.flag(
        file,
        rows[unk],
        "unknown_pod_phase",
        ("unknown pod phase '" + phase + "' kept verbatim").to_numpy(dtype=object)[unk],
        field="pod_phase",
    )
    a = alive
    devices = np.where(ngpu[a] == 1, milli[a] / 1000.0, ngpu[a]).astype(float)
    cohort = np.select(
        [ngpu[a] == 0, (ngpu[a] == 1) & (milli[a] < 1000), ngpu[a] == 1],
        ["CPU only", "shared (<1 GPU)", "1 GPU"],
        default=ngpu[a].astype("int64").astype(str).to_numpy() + " GPUs",
    )
    out = pd.DataFrame(
        {
            "pod": raw["name"][a].to_numpy(dtype=object),
            "pod_phase": phase[a].to_numpy(dtype=object),
            "qos": (raw["qos"][a] if "qos" in raw.columns else pd.Series("", index=raw.index)[a]).to_numpy(
                dtype=object
            ),
            "num_gpu": ngpu[a].astype("int64").to_numpy(),
            "gpu_milli": milli[a].astype("int64").to_numpy(),
            "devices": devices,
            "cohort": cohort.astype(object),
            "creation_s": create[a].to_numpy(dtype=float),
            "scheduled_s": sched[a].to_numpy(dtype=float),
            "deletion_s": delete[a].to_numpy(dtype=float),
            "wait_s": (sched[a] - create[a]).to_numpy(dtype=float),
            "scheduled": sched[a].notna().to_numpy(),
        }
    )
    return out


def _openb_nodes(path: Path, text: str, book: ReadBook) -> pd.DataFrame:
    file = str(path)
    raw, rows = csv_lines(path, text, book, _OPENB_NODE_REQUIRED, "an openb node list")
    gpu = pd.to_numeric(raw["gpu"], errors="coerce")
    alive = np.ones(len(raw), dtype=bool)
    bad = (gpu.isna() | (gpu < 0) | (gpu != np.round(gpu))).to_numpy()
    book.reject(file, rows[bad], "gpu", "not a non-negative whole number of GPUs")
    alive &= ~bad
    alive &= ~_reject_beyond(book, file, rows, gpu, "gpu", MAX_COUNT, alive)
    dup = raw["sn"].duplicated(keep="first").to_numpy() & alive
    book.reject(file, rows[dup], "sn", "duplicate node")
    alive &= ~dup
    no_gpu = (gpu == 0).to_numpy() & alive
    book.reject(file, rows[no_gpu], "gpu", "node has no GPUs: not GPU capacity")
    alive &= ~no_gpu
    return pd.DataFrame(
        {
            "sn": raw["sn"][alive].to_numpy(dtype=object),
            "model": raw["model"][alive].to_numpy(dtype=object),
            "gpu": gpu[alive].astype("int64").to_numpy(),
        }
    )
