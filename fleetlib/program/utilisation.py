"""Time-binned utilisation of every rank: compute, communication, their overlap and idle per bin.

A rank x time-bin map (Nsight Systems' ``cuda_gpu_time_util_map`` has the same shape) shows *when* in
the traced steps a rank computes, communicates, does both or neither, where the step partition
(:func:`fleetlib.program.breakdown.step_partition`) only says *how much*.  Time is counted only inside
the rank's step windows, as in the partition; bins start at the rank's first window and are
``bin_us`` wide.  In each bin:

``compute_us``
    compute kernels run and no collective does;
``comm_us``
    a collective runs (waiting or transferring) and no compute kernel does;
``overlap_us``
    both run;
``idle_us``
    neither runs (copies, host dispatch, idle), inside a step window.

So a rank's collective time over all bins, ``comm_us + overlap_us``, is the partition's
``exposed_comm + peer_wait + overlapped_comm_us`` summed over its steps.  Everything is computed in
integer nanoseconds from the union of each layer's intervals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetlib.program.breakdown import float_column, int_column, require_table_columns
from fleetlib.quality import DomainError

__all__ = ["UTILISATION_COLUMNS", "utilisation_map", "utilisation_table"]

#: Columns of :func:`utilisation_map`.
UTILISATION_COLUMNS: tuple[str, ...] = ("rank", "bin", "bin_start_us", "window_us", "compute_us", "comm_us",
                                        "overlap_us", "idle_us", "compute_share", "comm_share",
                                        "overlap_share", "idle_share")

_NS = 1000.0


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint union of the intervals ``[s, e)`` (empty ones dropped)."""
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    new = np.concatenate([[True], s[1:] > reach[:-1]])
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new))


def _intersect(a: tuple[np.ndarray, np.ndarray],
               b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two sorted disjoint interval sets, itself sorted and disjoint."""
    (as_, ae), (bs, be) = a, b
    if as_.size == 0 or bs.size == 0:
        return as_[:0], ae[:0]
    # each interval of a meets the run of b's intervals whose end is after its start and start before its end
    lo = np.searchsorted(be, as_, side="right")
    hi = np.searchsorted(bs, ae, side="left")
    n = np.maximum(hi - lo, 0)
    ia = np.repeat(np.arange(as_.size), n)
    ib = np.repeat(lo, n) + (np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n))
    s, e = np.maximum(as_[ia], bs[ib]), np.minimum(ae[ia], be[ib])
    keep = e > s
    return s[keep], e[keep]


def _covered(iv: tuple[np.ndarray, np.ndarray], edges: np.ndarray) -> np.ndarray:
    """Length of the sorted disjoint intervals ``iv`` inside each bin between consecutive ``edges``."""
    s, e = iv
    cum = np.concatenate([[0], np.cumsum(e - s)])
    k = np.searchsorted(e, edges, side="right")            # intervals wholly before each edge
    part = np.where(k < s.size, np.clip(edges - s[np.minimum(k, s.size - 1)], 0, None), 0) if s.size else 0
    cov = cum[k] + part
    return np.diff(cov)


def utilisation_map(kernels: pd.DataFrame, steps: pd.DataFrame, *, bin_us: float = 1000.0) -> pd.DataFrame:
    """Return each rank's compute, communication, overlap and idle time per time bin of its steps.

    Parameters
    ----------
    kernels
        Kernel table: ``rank, start_us, end_us, kind`` (``compute`` and ``comm`` rows are used).
    steps
        Step windows: ``rank, step, start_us, end_us``; only time inside them is counted.
    bin_us
        Bin width, microseconds (default 1 ms).

    Returns
    -------
    pandas.DataFrame
        One row per rank and bin, columns :data:`UTILISATION_COLUMNS`: ``bin_start_us`` from the
        rank's first window start, the four times (microseconds) adding up to ``window_us`` (time
        inside the rank's step windows in the bin) and their shares of it (NaN where the bin holds
        no window time).

    Raises
    ------
    DomainError
        Missing columns or a bin width that is not a positive finite number.

    Examples
    --------
    >>> k = pd.DataFrame({"rank": [0, 0], "start_us": [0.0, 1500.0], "end_us": [2000.0, 2500.0],
    ...                   "kind": ["compute", "comm"]})
    >>> s = pd.DataFrame({"rank": [0], "step": [1], "start_us": [0.0], "end_us": [3000.0]})
    >>> m = utilisation_map(k, s)
    >>> m[["compute_us", "comm_us", "overlap_us", "idle_us"]].to_numpy().tolist()
    [[1000.0, 0.0, 0.0, 0.0], [500.0, 0.0, 500.0, 0.0], [0.0, 500.0, 0.0, 500.0]]
    """
    width = float(bin_us)
    if not np.isfinite(width) or width <= 0:
        raise DomainError(f"bin_us must be a finite number > 0; got {bin_us!r}")
    require_table_columns(kernels, ("rank", "start_us", "end_us", "kind"), "kernels")
    require_table_columns(steps, ("rank", "step", "start_us", "end_us"), "steps")
    w_rank = int_column(steps, "rank", "steps")
    w_s, w_e = float_column(steps, "start_us", "steps"), float_column(steps, "end_us", "steps")
    k_rank = int_column(kernels, "rank", "kernels")
    k_s, k_e = float_column(kernels, "start_us", "kernels"), float_column(kernels, "end_us", "kernels")
    kind = kernels["kind"].astype("string").fillna("").to_numpy(dtype=object)
    step_ns = max(round(width * _NS), 1)
    frames = []
    for rank in np.unique(w_rank):
        mine = w_rank == rank
        origin = float(w_s[mine].min())

        def ns(x: np.ndarray, origin: float = origin) -> np.ndarray:
            return np.rint((x - origin) * _NS).astype(np.int64)

        windows = _union(ns(w_s[mine]), ns(w_e[mine]))
        at = k_rank == rank
        is_comp, is_comm = at & (kind == "compute"), at & (kind == "comm")
        comp = _intersect(_union(ns(k_s[is_comp]), ns(k_e[is_comp])), windows)
        comm = _intersect(_union(ns(k_s[is_comm]), ns(k_e[is_comm])), windows)
        both = _intersect(comp, comm)
        n_bins = int(-(-int(windows[1][-1]) // step_ns))
        edges = np.arange(n_bins + 1, dtype=np.int64) * step_ns
        win, c, m, b = (_covered(iv, edges) for iv in (windows, comp, comm, both))
        frame = pd.DataFrame({"rank": int(rank), "bin": np.arange(n_bins), "bin_start_us": edges[:-1] / _NS,
                              "window_us": win / _NS, "compute_us": (c - b) / _NS, "comm_us": (m - b) / _NS,
                              "overlap_us": b / _NS, "idle_us": (win - c - m + b) / _NS})
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    denom = out["window_us"].where(out["window_us"] > 0)
    for part in ("compute", "comm", "overlap", "idle"):
        out[f"{part}_share"] = out[f"{part}_us"] / denom
    return out[list(UTILISATION_COLUMNS)]


def utilisation_table(binned: pd.DataFrame, value: str = "compute_share") -> pd.DataFrame:
    """Pivot :func:`utilisation_map` into a rank x bin table of one value (for a heat map).

    Parameters
    ----------
    binned
        Output of :func:`utilisation_map`.
    value
        Column to show (a ``*_share`` or ``*_us`` column).

    Returns
    -------
    pandas.DataFrame
        Index: ranks; columns: bin start in milliseconds; NaN where a rank has no such bin.
    """
    require_table_columns(binned, ("rank", "bin_start_us", value), "binned")
    # one row per (rank, bin), so "max" only picks that row's value (NaN stays NaN)
    table = binned.pivot_table(index="rank", columns="bin_start_us", values=value, aggfunc="max",
                               dropna=False)
    table.columns = table.columns.to_numpy(dtype=float) / 1000.0
    table.columns.name = "bin start (ms)"
    return table
