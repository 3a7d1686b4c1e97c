"""Elastic jobs: the device count of each job and attempt over held time, and its slice efficiencies.

An elastic job logs its resizes in the events table (:data:`~fleetlib.runtime.schema.RESIZE_KINDS`,
with the optional :data:`~fleetlib.runtime.schema.DEVICE_COLUMNS`); ml-goodput-measurement's
``elastic_slice_counts`` records arrive as ``device_count`` markers carrying the slices available.
The partition charges the resize pauses (``elastic_wait``, ``elastic_reinit``); this module reads
the device counts against the partition's labelled parts -- it measures no time of its own:

* ``devices_held``: the devices the allocation holds (the last ``devices_after`` logged; before the
  first, that event's ``devices_before``, else its ``devices_after``);
* ``devices_stepping``: the devices of the mesh that steps -- the held count at the first record,
  changed by each ``resize_end`` -- and zero inside the parts the partition labelled
  ``elastic_wait`` or ``elastic_reinit`` (nothing steps while the job resizes);
* ``devices_total``: the most devices the job held (the peer's ``total_slices``); zero between
  attempts (not held time).

Stepping and available slice efficiency are ml-goodput-measurement 0.2.3's time-weighted averages
(``ElasticGoodputCalculator._compute_time_weighted_efficiency``): the integral of
``devices_stepping`` (``devices_held``) over the integral of ``devices_total``, over the held time of
every job that logs device counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetlib.runtime.schema import BREAKDOWN, DEVICE_SERIES_COLUMNS

if TYPE_CHECKING:
    from fleetlib.runtime.partition import JobParts

__all__ = ["device_series", "slice_efficiency", "slice_integrals"]

_FINE = tuple(BREAKDOWN)
_ELASTIC_LABELS = np.array([_FINE.index("elastic_wait"), _FINE.index("elastic_reinit")])


def _empty() -> pd.DataFrame:
    return pd.DataFrame({
        "job_id": pd.Series([], dtype="str"), "attempt": pd.Series([], dtype="int64"),
        "time": pd.Series([], dtype="datetime64[ns, UTC]"),
        **{c: pd.Series([], dtype="float64") for c in DEVICE_SERIES_COLUMNS[3:]}})


def _step_function(at: np.ndarray, change_t: np.ndarray, change_v: np.ndarray, initial: float) -> np.ndarray:
    """Return a step function's value at each instant of ``at``.

    The function starts at ``initial`` and takes ``change_v`` at ``change_t`` (sorted; right-continuous).
    """
    if change_t.size == 0:
        return np.full(at.shape, initial)
    i = np.searchsorted(change_t, at, side="right") - 1
    return np.where(i >= 0, change_v[np.clip(i, 0, None)], initial)


def device_series(parts: JobParts) -> pd.DataFrame:
    """Return the device counts of every measured job that logs them, as a step function over time.

    Parameters
    ----------
    parts
        The partition's parts (:func:`fleetlib.runtime.partition.build_parts`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`~fleetlib.runtime.schema.DEVICE_SERIES_COLUMNS`: one row per change point
        (attempt gang completions and releases, device-count events, the ends of the elastic parts),
        each value holding until the job's next row; the last row of each job is its last release
        (all counts zero).  Empty when no job logs device counts.
    """
    t = parts.tables
    dev = t.e_devices
    if dev is None or not np.isfinite(dev[:, 1]).any():
        return _empty()
    frames = []
    ids = parts.job_ids
    for k, code in enumerate(parts.codes.tolist()):
        lo, hi = int(t.e_off[code]), int(t.e_off[code + 1])
        d = dev[lo:hi]
        has = np.isfinite(d[:, 1])
        if not has.any():
            continue
        origin = int(parts.origin_ns[k])
        et = (t.e_time[lo:hi][has] - origin) / 1e9
        before, after = d[has, 0], d[has, 1]
        kinds = np.asarray(t.e_kind[lo:hi], dtype=object)[has]
        held0 = before[0] if np.isfinite(before[0]) else after[0]
        is_end = kinds == "resize_end"
        a = slice(int(parts.a_off[k]), int(parts.a_off[k + 1]))
        gang, rel, number = parts.a_gang[a], parts.a_release[a], parts.a_number[a]
        g = slice(int(parts.g_off[k]), int(parts.g_off[k + 1]))
        elastic = np.isin(parts.g_label[g], _ELASTIC_LABELS)
        el_s, el_e = parts.g_start[g][elastic], parts.g_end[g][elastic]
        at = np.unique(np.concatenate([gang, rel, et, el_s, el_e]))
        at = at[(at >= gang.min()) & (at <= rel.max())]
        held = _step_function(at, et, after, held0)
        mesh = _step_function(at, et[is_end], after[is_end], held0)
        x = np.searchsorted(gang, at, side="right") - 1
        inside = (x >= 0) & (at < rel[np.clip(x, 0, None)])
        e = np.searchsorted(el_s, at, side="right") - 1
        in_el = (e >= 0) & (at < el_e[np.clip(e, 0, None)]) if el_s.size else np.zeros(at.size, bool)
        total = float(np.nanmax(np.concatenate([after, before[np.isfinite(before)]])))
        frames.append(pd.DataFrame({
            "job_id": ids[k], "attempt": number[np.clip(x, 0, None)].astype(np.int64),
            "time": pd.to_datetime(origin + np.round(at * 1e9).astype(np.int64), utc=True),
            "devices_held": np.where(inside, held, 0.0),
            "devices_stepping": np.where(inside & ~in_el, mesh, 0.0),
            "devices_total": np.where(inside, total, 0.0)}))
    if not frames:
        return _empty()
    return pd.concat(frames, ignore_index=True)[list(DEVICE_SERIES_COLUMNS)]


def slice_integrals(series: pd.DataFrame, pieces: Sequence[tuple[int, int]] | None = None) -> pd.DataFrame:
    """Return, per job of a device series, the time integrals of its device counts.

    Parameters
    ----------
    series
        :func:`device_series`'s table.
    pieces
        Stretches ``[a, b)`` in UTC nanoseconds to weigh (a window less its exclusions); None: all of
        the series.

    Returns
    -------
    pandas.DataFrame
        Index ``job_id`` (the series' order); columns ``stepping_s``, ``held_s`` and ``total_s``
        (device-count x seconds of ``devices_stepping``, ``devices_held`` and ``devices_total``
        inside the pieces) and ``most`` (the most devices the job held: its ``devices_total``).
    """
    rows = []
    ids = []
    for job, frame in series.groupby("job_id", sort=False):
        t = frame["time"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
        t0, t1 = t[:-1], t[1:]
        if pieces is None:
            w = (t1 - t0).astype(np.float64)
        else:
            w = np.zeros(t0.size)
            for a, b in pieces:
                w += np.clip(np.minimum(t1, b) - np.maximum(t0, a), 0, None)
        w = w / 1e9
        rows.append((float(np.dot(frame["devices_stepping"].to_numpy()[:-1], w)),
                     float(np.dot(frame["devices_held"].to_numpy()[:-1], w)),
                     float(np.dot(frame["devices_total"].to_numpy()[:-1], w)),
                     float(frame["devices_total"].max())))
        ids.append(str(job))
    return pd.DataFrame(rows, columns=["stepping_s", "held_s", "total_s", "most"],
                        index=pd.Index(ids, name="job_id", dtype=object))


def slice_efficiency(series: pd.DataFrame, pieces: Sequence[tuple[int, int]] | None = None
                     ) -> tuple[float | None, float | None]:
    """Return the stepping and available slice efficiency of a device series, time-weighted.

    Parameters
    ----------
    series
        :func:`device_series`'s table.
    pieces
        Stretches ``[a, b)`` in UTC nanoseconds to weigh (a window less its exclusions); None: all of
        the series.

    Returns
    -------
    stepping, available : float or None
        ``integral(devices_stepping) / integral(devices_total)`` and the same of ``devices_held``
        (ml-goodput-measurement's ``stepping_slice_efficiency`` and ``available_slice_efficiency``);
        None when no job logs device counts inside the pieces.
    """
    if series.empty:
        return None, None
    sums = slice_integrals(series, pieces)
    den = math.fsum(sums["total_s"])
    if den <= 0:
        return None, None
    return math.fsum(sums["stepping_s"]) / den, math.fsum(sums["held_s"]) / den
