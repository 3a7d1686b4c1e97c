"""Helios per-VC minute sequences and the daily quota file -> occupancy and capacity tables."""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib._io import PathArg, input_files, path_view, read_text
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling.readers._common import (
    ReadBook,
    csv_lines,
    header_line,
    parse_time_columns,
)
from fleetlib.scheduling.records import (
    SchedulerRecords,
)
from fleetlib.scheduling.schema import TIME_DTYPE

# ================================================================================================
# Helios per-VC minute sequences and daily quotas
# ================================================================================================

_HELIOS_REQUIRED = (
    "time",
    "total_gpu_num",
    "running_gpu_num",
    "idle_gpu_num",
    "pending_gpu_num",
    "pending_gpujob_num",
)
_HELIOS_TZ = "Asia/Shanghai"
#: The size-split parts of ``running_gpu_num`` the artifact carries beside it (jobs of >= 8 GPUs and < 8).
_HELIOS_PARTS = ("running_gpu_num_noless_8", "running_gpu_num_less_8")


def _helios_pool(path: PathArg) -> str:
    stem = path_view(path).name.split(".")[0]
    if stem.startswith(
        "cluster_sequence"
    ):  # the artifact's own layout: Earth_vcs/<vc>/cluster_sequence_vc.csv
        return path_view(path).parent.name
    return stem


def detect_quota_glitch_days(quota: pd.DataFrame, *, min_share: float = 0.5, min_pools: int = 2) -> pd.Series:
    """Flag days on which most pools' quota changes for that day only.

    A pool *blips* on day d when its value differs from day d-1 while days d-1 and d+1 agree.  A day is a
    glitch when at least ``min_pools`` pools blip and they are at least ``min_share`` of the pools with a
    non-zero quota on day d-1 or d.  A real re-partitioning lasts longer than a day, so it is not flagged.

    Parameters
    ----------
    quota
        One row per consecutive day (sorted), one column per pool, numeric quotas.
    min_share
        Fraction of active pools that must blip, in (0, 1].
    min_pools
        Minimum number of blipping pools.

    Returns
    -------
    pandas.Series of bool
        True on glitch days, aligned with ``quota``'s index.
    """
    if not 0.0 < min_share <= 1.0:
        raise DomainError(f"min_share must be in (0, 1]; got {min_share!r}")
    if min_pools < 1:
        raise DomainError(f"min_pools must be >= 1; got {min_pools!r}")
    q = quota.astype(float)
    prev, nxt = q.shift(1), q.shift(-1)
    blip = (q != prev) & (prev == nxt) & prev.notna() & nxt.notna()
    active = (prev > 0) | (q > 0)
    n_blip = blip.sum(axis=1)
    n_active = active.sum(axis=1).replace(0, np.nan)
    return ((n_blip >= min_pools) & (n_blip / n_active >= min_share)).fillna(False).astype(bool)


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    *,
    tz: str | None = None,
    window: object = None,
    glitch: str = "carry",
    resolution_s: float = 60.0,
) -> tuple[SchedulerRecords, Ledger]:
    """Read Helios per-VC minute sequences (``vc*.csv.gz``) and the daily quota file.

    The quota file (``Earth_gpu_number.csv``: ``date`` + one column per VC + ``total``) is recognised
    by its ``date`` column; every other file is a sequence whose pool is the file name without its
    extensions (or the folder name for the artifact's ``<vc>/cluster_sequence_vc.csv`` layout).

    Parameters
    ----------
    paths
        Sequence files and, optionally, the quota file.
    tz
        Zone of the naive wall-clock times (None: ``"Asia/Shanghai"``: the Helios clusters are
        SenseTime's, in China, UTC+8 with no daylight saving, so every minute maps to one instant).
    window
        Not used: an aggregate record has no open job to censor (the measurement applies the window).
    glitch
        What to do with a quota glitch day (see :func:`detect_quota_glitch_days`; Helios Earth has one on
        2020-05-09, every VC at 0 but one at 840): ``"carry"`` (default) carries the previous day's
        quotas forward, a named repair; ``"reject"`` rejects the day, leaving a gap in capacity.  The
        default is ``"carry"`` because the minute sequences show the VCs' GPUs in service that day.
    resolution_s
        Length of one sequence sample in seconds (the artifact samples every minute).

    Returns
    -------
    records : SchedulerRecords
        ``occupancy`` (one row per pool and minute: in_service = ``total_gpu_num``, held_complete =
        ``running_gpu_num`` because Slurm allocates atomically, partial_gang = reserved =
        out_of_service = 0, pending_jobs = ``pending_gpujob_num``, pending_devices =
        ``pending_gpu_num``) and, when the quota file is given, ``extra["quota"]`` (capacity columns,
        one row per pool and day; restricted to the sequences' pools when sequences are given too).
        The quota is not put in ``capacity``: the sequences carry their own in-service totals, and
        scheduling goodput takes either an occupancy table or allocations with capacity.
        ``extra["notes"]`` records the zone and how many minutes' totals differ from the quota.
    ledger : Ledger
        Every sequence row is checked: ``running + idle == total`` (rejected if not), counts
        non-negative integers, one row per minute.  A row with ``running > total`` (negative idle) is
        kept unchanged and flagged: allocated above capacity is reported, never clipped.  Where the
        size-split parts (``running_gpu_num_noless_8 + running_gpu_num_less_8``) exceed the VC's total
        -- the artifact clips ``running_gpu_num`` to the quota but not its parts -- one
        ``allocated_above_quota`` flag per file gives the count of such minutes and the device-time
        above the total (at the first such row); ``extra["above_quota"]`` has them per pool
        (``pool, minutes, device_s``).  The measured numbers keep ``running_gpu_num``.
    """
    del window  # an aggregate record: nothing to censor; the measurement applies the window
    tz = tz or _HELIOS_TZ
    if glitch not in ("carry", "reject"):
        raise DomainError(f"glitch must be 'carry' or 'reject'; got {glitch!r}")
    res = float(resolution_s)
    if not res > 0:
        raise DomainError(f"resolution_s must be > 0; got {resolution_s!r}")
    book = ReadBook()
    seqs, quotas, above = [], [], []
    for path in input_files(paths):
        text = read_text(path)
        header = header_line(text, path)
        first_col = header.split(",")[0].strip().lower()
        if first_col == "date":
            quotas.append(read_quota(path, text, tz, glitch, book))
        else:
            seq, over = _helios_sequence(path, text, tz, res, book)
            seqs.append(seq)
            above.append(over)
    notes = {
        "gang_complete": "running GPUs are complete allocations (Slurm allocates atomically)",
        "time_zone": f"naive Helios times localised to {tz}",
        "pool": "file name without extensions (a Helios virtual cluster)",
        "glitch": f"quota glitch days: {glitch}",
    }
    occupancy = quota = None
    if seqs:
        occupancy = pd.concat(seqs, ignore_index=True) if len(seqs) > 1 else seqs[0]
    if quotas:
        quota = pd.concat(quotas, ignore_index=True)
        if occupancy is not None:
            quota = quota[quota["pool"].isin(occupancy["pool"].unique())].reset_index(drop=True)
            notes["quota_check"] = _quota_check(occupancy, quota)
    source = ",".join(str(p) for p in input_files(paths))
    extra: dict[str, pd.DataFrame] = {}
    if above:
        extra["above_quota"] = pd.DataFrame(above, columns=["pool", "minutes", "device_s"])
    records = SchedulerRecords.from_tables(source, notes, occupancy=occupancy, quota=quota, **extra)
    return records, book.settle()


def _helios_sequence(path: Path, text: str, tz: str, res: float,
                     book: ReadBook) -> tuple[pd.DataFrame, tuple[str, int, float]]:
    file = str(path)
    raw, rows = csv_lines(path, text, book, _HELIOS_REQUIRED, "a Helios sequence", dtype={"time": str})
    times, rejected = parse_time_columns(
        raw, ["time"], tz=tz, file=file, rows=rows, book=book, format_hint="Helios sequence"
    )
    alive = ~rejected
    miss_t = times.missing["time"] & alive
    book.reject(file, rows[miss_t], "time", "no time")
    alive &= ~miss_t
    nums = {}
    for c in _HELIOS_REQUIRED[1:]:
        v = pd.to_numeric(raw[c], errors="coerce").astype(float)
        # inf, and counts beyond int64 (which would wrap when stored), are not whole numbers here
        with np.errstate(invalid="ignore"):
            bad = (v.isna() | ~np.isfinite(v) | (v.abs() >= 2.0**63) | (v != np.round(v))).to_numpy() & alive
        if c != "idle_gpu_num":
            bad |= (v < 0).to_numpy() & alive
        book.reject(file, rows[bad], c, "not a non-negative whole number")
        alive &= ~bad
        nums[c] = v
    total, running, idle = nums["total_gpu_num"], nums["running_gpu_num"], nums["idle_gpu_num"]
    mismatch = (running + idle != total).to_numpy() & alive
    book.reject(
        file,
        rows[mismatch],
        "idle_gpu_num",
        [
            f"running + idle != total ({int(r)} + {int(i)} != {int(t)})"
            for r, i, t in zip(running[mismatch], idle[mismatch], total[mismatch], strict=True)
        ],
    )
    alive &= ~mismatch
    t = times.parsed["time"]
    dup_exact = raw.duplicated(keep="first").to_numpy() & alive
    book.reject(file, rows[dup_exact], None, "duplicate row")
    alive &= ~dup_exact
    tt = t.where(pd.Series(alive, index=t.index))
    dup_time = tt.duplicated(keep="first").to_numpy() & tt.notna().to_numpy() & alive
    book.reject(file, rows[dup_time], "time", "second row for the same minute with different counts")
    alive &= ~dup_time
    above = (running > total).to_numpy() & alive
    book.flag(
        file,
        rows[above],
        "allocated_above_capacity",
        "running GPUs above total (allocated above capacity); kept unchanged, never clipped",
        field="running_gpu_num",
    )
    pool = _helios_pool(path)
    over = _above_quota(raw, total, alive, rows, res, file, book)
    a = alive
    out = pd.DataFrame(
        {
            "pool": np.full(int(a.sum()), pool, dtype=object),
            "start": t[a].reset_index(drop=True),
            "end": (t[a] + pd.Timedelta(seconds=res)).reset_index(drop=True),
            "in_service": total[a].astype("int64").to_numpy(),
            "out_of_service": np.zeros(int(a.sum()), dtype=np.int64),
            "held_complete": running[a].astype("int64").to_numpy(),
            "partial_gang": np.zeros(int(a.sum()), dtype=np.int64),
            "reserved": np.zeros(int(a.sum()), dtype=np.int64),
            "pending_jobs": nums["pending_gpujob_num"][a].astype("int64").to_numpy(),
            "pending_devices": nums["pending_gpu_num"][a].astype("int64").to_numpy(),
        }
    ).astype({"start": TIME_DTYPE, "end": TIME_DTYPE})
    return out.sort_values("start", kind="stable").reset_index(drop=True), (pool, *over)


def _above_quota(raw: pd.DataFrame, total: pd.Series, alive: np.ndarray, rows: np.ndarray, res: float,
                 file: str, book: ReadBook) -> tuple[int, float]:
    """Flag the minutes whose size-split running GPUs exceed the total; return (minutes, device-s above)."""
    if not all(c in raw.columns for c in _HELIOS_PARTS):
        return 0, 0.0
    parts = sum(pd.to_numeric(raw[c], errors="coerce").astype(float) for c in _HELIOS_PARTS)
    excess = (parts - total).to_numpy()
    above = np.nan_to_num(excess, nan=0.0) > 0
    above &= alive
    n = int(above.sum())
    if not n:
        return 0, 0.0
    device_s = float(excess[above].sum()) * res
    book.flag(
        file,
        rows[above][:1],
        "allocated_above_quota",
        f"{n:,} minutes where the size-split running GPUs ({' + '.join(_HELIOS_PARTS)}) exceed "
        f"total_gpu_num, {device_s / 3600.0:,.2f} device-h ({device_s:,.0f} device-s) above it in all; "
        "running_gpu_num is clipped to the total there and is what S measures (first such row given)",
        field="running_gpu_num",
    )
    return n, device_s


def read_quota(path: Path, text: str, tz: str, glitch: str, book: ReadBook) -> pd.DataFrame:
    """Read a Helios daily quota file (``date`` + one column per VC + ``total``) into capacity rows.

    Parameters
    ----------
    path, text
        The file and its text.
    tz
        Zone of the naive dates (a day runs from local midnight to the next).
    glitch
        ``"carry"`` or ``"reject"`` for a quota glitch day (:func:`detect_quota_glitch_days`).
    book
        The read's row-books (the file's book is opened here).

    Returns
    -------
    pandas.DataFrame
        Capacity columns, one row per pool and day.
    """
    file = str(path)
    raw, rows = csv_lines(path, text, book, ("date",), "a Helios quota file")
    date_col = raw.columns[0]
    pools = [c for c in raw.columns[1:] if c.strip().lower() != "total"]
    if not pools:
        raise InputError("quota file has no pool columns after 'date'", file=file, row=1)
    times, rejected = parse_time_columns(
        raw, [date_col], tz=tz, file=file, rows=rows, book=book, format_hint="Helios quota file"
    )
    alive = ~rejected
    vals = raw[pools].apply(pd.to_numeric, errors="coerce")
    vals = vals.astype(float)
    bad = (vals.isna() | (vals < 0) | (vals >= 2.0**63) | ~np.isfinite(vals)).any(axis=1).to_numpy() & alive
    book.reject(file, rows[bad], None, "a quota is not a finite non-negative number")
    alive &= ~bad
    if "total" in raw.columns:
        tot = pd.to_numeric(raw["total"], errors="coerce")
        off = (vals.sum(axis=1) != tot).to_numpy() & alive
        book.reject(file, rows[off], "total", "total differs from the sum of the pool columns")
        alive &= ~off
    day = times.parsed[date_col]
    dup = day.duplicated(keep="first").to_numpy() & alive & day.notna().to_numpy()
    book.reject(file, rows[dup], date_col, "second row for the same day")
    alive &= ~dup
    v = vals[alive].copy()
    d = day[alive]
    order = np.argsort(d.to_numpy(), kind="stable")
    v, d, r = v.iloc[order], d.iloc[order], rows[alive][order]
    # blips only count between consecutive days
    consecutive = (d.diff() == pd.Timedelta(days=1)) & (d.diff(-1) == -pd.Timedelta(days=1))
    glitchy = detect_quota_glitch_days(v.reset_index(drop=True)).to_numpy() & consecutive.to_numpy()
    if glitchy.any():
        prev_total = v.shift(1).sum(axis=1).to_numpy()
        why = []
        for i in np.flatnonzero(glitchy):
            changed = int((v.iloc[i] != v.iloc[i - 1]).sum())
            why.append(
                f"capacity glitch day: {changed} pools change for this day only and return the next day "
                f"(total {v.iloc[i].sum():g} vs {prev_total[i]:g} on the day before)"
            )
        why_arr = np.asarray(why, dtype=object)
        if glitch == "carry":
            book.repair(
                file,
                r[glitchy],
                None,
                np.char.add(why_arr.astype(str), "; previous day's quotas carried forward"),
            )
            v.iloc[np.flatnonzero(glitchy)] = v.iloc[np.flatnonzero(glitchy) - 1].to_numpy()
        else:
            book.reject(
                file,
                r[glitchy],
                None,
                np.char.add(why_arr.astype(str), "; day rejected (capacity left unknown)"),
            )
            v, d = v[~glitchy], d[~glitchy]
    long = v.assign(_day=d.to_numpy()).melt(id_vars="_day", var_name="pool", value_name="q")
    local_day = long["_day"].astype(TIME_DTYPE).dt.tz_convert(tz)  # typed even when no day is left
    end = (local_day + pd.DateOffset(days=1)).dt.tz_convert("UTC")
    out = pd.DataFrame(
        {
            "pool": long["pool"].astype(object).to_numpy(),
            "start": long["_day"].astype(TIME_DTYPE).reset_index(drop=True),
            "end": end.dt.as_unit("ns").reset_index(drop=True),
            "devices_in_service": long["q"].astype(float).round().astype("int64").to_numpy(),
            "devices_out_of_service": np.zeros(len(long), dtype=np.int64),
        }
    )
    return out.sort_values(["pool", "start"], kind="stable").reset_index(drop=True)


def _quota_check(occ: pd.DataFrame, cap: pd.DataFrame) -> str:
    # one dtype for the keys on both sides, even when a side is empty
    c = cap.sort_values("start").astype({"pool": object, "start": TIME_DTYPE})
    o = occ.sort_values("start").astype({"pool": object, "start": TIME_DTYPE})
    m = pd.merge_asof(
        o[["pool", "start", "in_service"]],
        c[["pool", "start", "end", "devices_in_service"]],
        on="start",
        by="pool",
        direction="backward",
        suffixes=("", "_q"),
    )
    covered = m["end"].notna() & (m["start"] < m["end"])
    differ = covered & (m["in_service"] != m["devices_in_service"])
    return (
        f"{int(differ.sum())} of {int(covered.sum())} sequence minutes have a total that differs from the "
        f"daily quota; {int((~covered).sum())} minutes have no quota day"
    )
