"""Per rank, per step partition of step wall time, and the program goodput factor built on it.

A step trace gives, for every rank, the device activities (kernels, copies, collectives) on each
stream and the step windows.  :func:`step_partition` splits each rank's step wall time into six
parts that never overlap and always add up to the wall time:

``compute``
    Time at least one compute kernel runs on any stream of the rank.
``exposed_comm``
    Time a collective is moving data while no compute kernel runs.
``peer_wait``
    Time the rank sits inside a collective only waiting for a later peer to arrive (no compute, no
    collective transferring).  The wait of a rank in a matched collective comes from
    :func:`fleetlib.program.collectives.collective_waits`; it occupies the *start* of the rank's
    collective kernel, because the rank enters early and everyone leaves together.
``exposed_memcpy``
    Time a memory copy or memset runs with neither compute nor a collective running.
``host_dispatch``
    Time no activity runs because the host had not yet launched the next one.
``idle``
    Every other moment without device activity (waiting on an event or another resource, the end
    of a step after the last kernel, a rank with no work).

Beside the partition, ``overlapped_comm_us`` reports collective time (waiting or transferring)
hidden under compute; it is not a part of the sum.  Two refinements of parts are reported beside
them for the Fleet Law terms (:mod:`fleetlib.program.fleet_law`): ``memory_roof_us``, the part of
``compute`` during which every running compute kernel is on the bandwidth slope
(:func:`fleetlib.program.roofline.kernel_roof`), and ``edge_idle_us``, the part of ``idle`` before
the window's first activity starts and after its last one ends.

How the sweep works
-------------------
Activities are clipped to each step window and turned into start/end boundaries carrying a +1 or
-1 in one of four layers (compute, collective transfer, collective wait, copy).  After sorting the
boundaries of every window together, a cumulative sum gives, between consecutive boundaries, how
many activities of each layer are running; each such segment is charged to the first part whose
layer is non-empty in the order above.  Segments with nothing running are split between
``host_dispatch`` and ``idle`` as described in :func:`step_partition`.  Everything is computed in
integer nanoseconds relative to each rank's first window, so the six parts add up to the wall time
exactly; the reported microseconds are those integers divided by 1000.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.program.flops import (
    FlopConvention,
    PeakRate,
    ProgramGoodputConvention,
    UtilizationAboveOneError,
    mfu,
    mfu_convention,
)
from fleetlib.program.roofline import DEFAULT_RIDGE_FLOP_PER_BYTE, kernel_roof
from fleetlib.program.schema import PARTITION_PARTS
from fleetlib.quality import DomainError

__all__ = [
    "DEFAULT_DISPATCH_GAP_US",
    "DEFAULT_KIND_LAYERS",
    "HTA_BREAKDOWN_COLUMNS",
    "HTA_REFERENCE_PATH",
    "HTA_SOURCES",
    "KERNEL_COLUMNS",
    "PARTITION_PARTS",
    "STEP_COLUMNS",
    "hta_comparison_table",
    "hta_reference_differences",
    "hta_style_temporal_breakdown",
    "load_hta_reference",
    "program_goodput_factor",
    "step_partition",
    "steps_without_device_activity",
]


#: Columns :func:`step_partition` needs from the kernel table (``launch_us`` and ``cuda_graph`` are used
#: when present).
KERNEL_COLUMNS: tuple[str, ...] = ("rank", "stream", "start_us", "end_us", "kind")

#: Columns of the step-window table.
STEP_COLUMNS: tuple[str, ...] = ("rank", "step", "start_us", "end_us")

#: Without launch times, a device-idle gap between the end of one activity and the start of the next
#: is charged to host dispatch when it is at most this long.  10 us is the order of the host cost of
#: one eager kernel launch (a few microseconds for the runtime call plus framework overhead); longer
#: gaps are taken to be something else (synchronisation, Python, input) and charged to idle.  This is
#: an approximation and every row that used it says so in ``dispatch_rule``.
DEFAULT_DISPATCH_GAP_US: float = 10.0

#: How each kernel ``kind`` enters the sweep: as compute, as a collective, as a copy, or not at all.
#: Synchronisation events (``sync``) mark a stream waiting, not work, and ``other`` (unclassified
#: device activity such as annotations) is not assumed to be work either; both are left out so that
#: the time under them falls to the gap rules.
DEFAULT_KIND_LAYERS: Mapping[str, str | None] = {
    "compute": "compute",
    "comm": "comm",
    "memcpy": "memcpy",
    "memset": "memcpy",
    "sync": None,
    "other": None,
}

_LAYERS = ("compute", "comm", "memcpy")
# Sweep layer codes; the collective layer is split into transfer and wait.
_C, _T, _W, _M = 0, 1, 2, 3
# Order of boundaries at one instant: window start, activity ends, activity starts, window end.
_WIN_START, _END, _START, _WIN_END = 0, 1, 2, 3
_NS_PER_US = 1000.0
#: Peer waits may exceed the kernel duration by this much (float round-off of the wait arithmetic).
_WAIT_SLACK_US = 1e-3


# ---------------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------------


def require_table_columns(frame: Any, columns: tuple[str, ...], what: str) -> pd.DataFrame:
    if not isinstance(frame, pd.DataFrame):
        raise DomainError(f"{what} must be a pandas DataFrame; got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DomainError(f"{what} lacks column(s) {missing}; it needs {list(columns)}")
    return frame


def float_column(frame: pd.DataFrame, col: str, what: str, *, allow_na: bool = False) -> np.ndarray:
    try:
        arr = pd.to_numeric(frame[col], errors="raise").to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{what} column {col!r} must be numeric") from exc
    bad = ~np.isfinite(arr)
    if allow_na:
        bad &= ~np.isnan(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DomainError(f"{what} column {col!r} must be finite; row {frame.index[i]!r} has {arr[i]!r}")
    return arr


def int_column(frame: pd.DataFrame, col: str, what: str) -> np.ndarray:
    arr = float_column(frame, col, what)
    bad = arr != np.round(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DomainError(f"{what} column {col!r} must hold whole numbers; row {frame.index[i]!r} has "
                          f"{arr[i]!r}")
    return arr.astype(np.int64)


def _layers_of(kinds: pd.Series, kind_layers: Mapping[str, str | None]) -> np.ndarray:
    for kind, layer in kind_layers.items():
        if layer is not None and layer not in _LAYERS:
            raise DomainError(f"kind_layers maps {kind!r} to {layer!r}; layers are {_LAYERS} or None")
    kinds = kinds.astype("string")
    unknown = sorted(set(kinds.dropna().unique()) - set(kind_layers))
    if unknown or kinds.isna().any():
        raise DomainError(f"kernel kinds {unknown or ['<missing>']} are not in kind_layers "
                          f"{sorted(kind_layers)}; classify them or extend kind_layers")
    code = {"compute": _C, "comm": _T, "memcpy": _M}
    mapping = {k: (code[v] if v is not None else -1) for k, v in kind_layers.items()}
    return kinds.map(mapping).to_numpy(dtype=np.int64)


def _check_steps(steps: pd.DataFrame) -> pd.DataFrame:
    require_table_columns(steps, STEP_COLUMNS, "steps")
    if steps.empty:
        raise DomainError("steps has no windows; a partition needs at least one step window")
    out = pd.DataFrame({
        "rank": int_column(steps, "rank", "steps"),
        "step": int_column(steps, "step", "steps"),
        "start_us": float_column(steps, "start_us", "steps"),
        "end_us": float_column(steps, "end_us", "steps"),
    })
    bad = out["end_us"].to_numpy() <= out["start_us"].to_numpy()
    if bad.any():
        r = out[bad].iloc[0]
        raise DomainError(f"step window of rank {int(r['rank'])} step {int(r['step'])} has end "
                          f"{r['end_us']!r} us not after start {r['start_us']!r} us")
    dup = out.duplicated(["rank", "step"])
    if dup.any():
        r = out[dup].iloc[0]
        raise DomainError(f"rank {int(r['rank'])} has more than one window for step {int(r['step'])}")
    return out


# ---------------------------------------------------------------------------------------------------
# The partition
# ---------------------------------------------------------------------------------------------------


def _pairs(k_rank: np.ndarray, ks: np.ndarray, ke: np.ndarray, w_rank: np.ndarray, w0: np.ndarray,
           w1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (kernel, window) index pairs whose intervals overlap; windows sorted by (rank, start).

    Within a rank the windows' starts and ends are both non-decreasing (checked by the caller), so
    the windows overlapping one activity form a contiguous run found with two binary searches on a
    key that places every rank in its own block of the time axis.
    """
    ranks, w_pos = np.unique(w_rank, return_inverse=True)
    k_pos = np.searchsorted(ranks, k_rank)
    known = (k_pos < ranks.size) & (ranks[np.minimum(k_pos, ranks.size - 1)] == k_rank)
    lo_t = min(int(w0.min()), int(ks.min()) if ks.size else 0)
    hi_t = max(int(w1.max()), int(ke.max()) if ke.size else 0)
    span = hi_t - lo_t + 1
    if span * (ranks.size + 1) >= 2**62:
        raise DomainError("the trace spans too long a time for nanosecond arithmetic across its ranks; "
                          "partition fewer ranks or a shorter window at a time")
    w_start_key = w_pos * span + (w0 - lo_t)
    w_end_key = w_pos * span + (w1 - lo_t)
    idx = np.flatnonzero(known)
    kb = k_pos[idx] * span
    lo = np.searchsorted(w_end_key, kb + (ks[idx] - lo_t), side="right")
    hi = np.searchsorted(w_start_key, kb + (ke[idx] - lo_t), side="left")
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    kern = np.repeat(idx, counts)
    offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    win = np.repeat(lo, counts) + offsets
    return kern, win


def step_partition(kernels: pd.DataFrame, steps: pd.DataFrame, *,
                   collective_wait: pd.DataFrame | None = None,
                   dispatch_gap_us: float = DEFAULT_DISPATCH_GAP_US,
                   kind_layers: Mapping[str, str | None] | None = None,
                   ops: pd.DataFrame | None = None,
                   ridge_flop_per_byte: float = DEFAULT_RIDGE_FLOP_PER_BYTE) -> pd.DataFrame:
    """Partition every rank's step wall time into compute, exposed comm, peer wait, copies, dispatch, idle.

    Each (rank, step) window is swept on its own; activities are clipped to the window by time
    (a kernel's ``step`` column is not used, so time of a kernel that runs past its step's window
    falls in the window it actually ran in).  At every instant the rank is charged to exactly one
    part, the first that applies:

    1. ``compute`` -- a compute kernel runs on some stream of the rank;
    2. ``exposed_comm`` -- a collective runs and is past its wait, i.e. moving data;
    3. ``peer_wait`` -- the only collectives running are still waiting for a later peer; the wait
       of each matched collective is ``collective_wait`` (the first ``peer_wait_us`` of the kernel);
    4. ``exposed_memcpy`` -- only a memory copy or memset runs;
    5. ``host_dispatch`` or ``idle`` -- nothing runs.  A gap that ends when an activity starts is
       ``host_dispatch`` when the activity's host launch (``launch_us``) came at or after the moment
       the device went idle (the device drained and waited for the host); it is ``idle`` when the
       activity was already launched (it waited on something else) and when the gap runs to the
       window's end.  Activities without a launch time fall back to a gap rule: a gap between the
       end of one activity and the start of the next lasting at most ``dispatch_gap_us`` is
       ``host_dispatch``, longer ones are ``idle`` -- an approximation, named in ``dispatch_rule``.

    ``overlapped_comm_us`` (beside the partition) is collective time, waiting or transferring, under
    compute.

    Parameters
    ----------
    kernels
        Kernel table: ``rank, stream, start_us, end_us, kind`` (``compute | comm | memcpy | memset |
        sync | other``), rank-local microseconds; optional ``launch_us`` (host launch of each
        activity, same clock; missing values allowed) and ``cuda_graph`` (bool).  The index labels
        identify kernels for ``collective_wait`` and must be unique.
    steps
        Step windows: ``rank, step, start_us, end_us`` in the same rank-local clock.  Within a rank,
        windows may overlap but not nest.
    collective_wait
        Per-kernel peer waits: columns ``kernel_index`` (an index label of ``kernels``, a ``comm``
        kernel) and ``peer_wait_us`` in ``[0, dur]``, as returned by
        :func:`fleetlib.program.collectives.collective_waits`.  ``None``: no wait is known and all
        exposed collective time is ``exposed_comm``.
    dispatch_gap_us
        Longest gap charged to ``host_dispatch`` by the fallback rule, microseconds.
    kind_layers
        How each ``kind`` enters the sweep (``"compute"``, ``"comm"``, ``"memcpy"`` or ``None`` to
        leave it out); default :data:`DEFAULT_KIND_LAYERS`.
    ops
        Host ops with recorded shapes (``rank, external_id, name``): a compute kernel launched by a
        shaped matrix multiplication or convolution is on the compute roof (``memory_roof_us``).
    ridge_flop_per_byte
        The device's ridge point a shaped kernel's intensity is compared with
        (:func:`~fleetlib.program.roofline.kernel_roof`; default the H100 SXM's dense BF16 one).

    Returns
    -------
    pandas.DataFrame
        One row per (rank, step), sorted: ``rank, step``, the six parts of
        :data:`PARTITION_PARTS` in microseconds, ``step_wall_us`` (their exact sum, at 1 ns
        resolution), ``overlapped_comm_us``, ``cuda_graph`` (a CUDA-graph launch ran in the window:
        the profiler under-records graph kernels, so the split is less reliable) and
        ``dispatch_rule`` (``"launch_us"``, the fallback's label, or ``"mixed: ..."``),
        ``memory_roof_us`` (the part of ``compute`` with only bandwidth-slope compute kernels running:
        the kernel table's ``roof`` column where given, else :func:`~fleetlib.program.roofline.kernel_roof`)
        and ``edge_idle_us`` (the part of ``idle`` before the first and after the last activity).

    Examples
    --------
    >>> k = pd.DataFrame({"rank": [0, 0], "stream": [7, 9], "start_us": [0.0, 8.0],
    ...                   "end_us": [8.0, 14.0], "kind": ["compute", "comm"]})
    >>> s = pd.DataFrame({"rank": [0], "step": [1], "start_us": [0.0], "end_us": [16.0]})
    >>> p = step_partition(k, s)
    >>> p.loc[0, ["compute", "exposed_comm", "idle", "step_wall_us"]].tolist()
    [8.0, 6.0, 2.0, 16.0]
    """
    layers = dict(DEFAULT_KIND_LAYERS if kind_layers is None else kind_layers)
    gap_us = float(dispatch_gap_us)
    if not np.isfinite(gap_us) or gap_us < 0:
        raise DomainError(f"dispatch_gap_us must be a finite number >= 0; got {dispatch_gap_us!r}")
    require_table_columns(kernels, KERNEL_COLUMNS, "kernels")
    if not kernels.index.is_unique:
        raise DomainError("kernels index labels must be unique (they identify kernels for peer waits)")
    win = _check_steps(steps).sort_values(["rank", "start_us", "end_us"], kind="stable")
    win = win.reset_index(drop=True)

    k_rank = int_column(kernels, "rank", "kernels")
    k_start = float_column(kernels, "start_us", "kernels")
    k_end = float_column(kernels, "end_us", "kernels")
    neg = k_end < k_start
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        raise DomainError(f"kernel {kernels.index[i]!r} (rank {k_rank[i]}) ends at {k_end[i]!r} us before "
                          f"it starts at {k_start[i]!r} us: a negative duration")
    layer = _layers_of(kernels["kind"], layers)
    has_launch = "launch_us" in kernels.columns
    launch = (float_column(kernels, "launch_us", "kernels", allow_na=True) if has_launch
              else np.full(k_rank.size, np.nan))
    if "roof" in kernels.columns:
        roof = kernels["roof"].astype("string").fillna("compute").to_numpy(dtype=object)
    else:
        roof = kernel_roof(kernels, ops, ridge_flop_per_byte=ridge_flop_per_byte)
    on_roof = roof != "memory"
    graph = (kernels["cuda_graph"].fillna(False).astype(bool).to_numpy() if "cuda_graph" in kernels.columns
             else np.zeros(k_rank.size, dtype=bool))

    # Peer waits per kernel, microseconds.
    wait_us = np.zeros(k_rank.size)
    if collective_wait is not None:
        require_table_columns(collective_wait, ("kernel_index", "peer_wait_us"), "collective_wait")
        pos = kernels.index.get_indexer(collective_wait["kernel_index"])
        if (pos < 0).any():
            lab = collective_wait["kernel_index"].iloc[int(np.flatnonzero(pos < 0)[0])]
            raise DomainError(f"collective_wait names kernel {lab!r}, which is not in the kernel table")
        if pd.Index(pos).duplicated().any():
            raise DomainError("collective_wait names a kernel more than once")
        w = float_column(collective_wait, "peer_wait_us", "collective_wait")
        not_comm = layer[pos] != _T
        if not_comm.any():
            raise DomainError(f"collective_wait gives a wait for kernel {kernels.index[pos[not_comm][0]]!r}, "
                              "which is not a communication kernel")
        dur = k_end[pos] - k_start[pos]
        bad = (w < 0) | (w > dur + _WAIT_SLACK_US)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DomainError(f"peer wait {w[i]!r} us of kernel {kernels.index[pos[i]]!r} lies outside "
                              f"[0, its duration {dur[i]!r} us]")
        wait_us[pos] = w

    # Window checks: within a rank, ends must not decrease when starts increase (no nesting).
    w_rank = win["rank"].to_numpy()
    w_s, w_e = win["start_us"].to_numpy(), win["end_us"].to_numpy()
    same_rank = w_rank[1:] == w_rank[:-1]
    nested = same_rank & (w_e[1:] < w_e[:-1])
    if nested.any():
        i = int(np.flatnonzero(nested)[0])
        raise DomainError(f"rank {w_rank[i]}: step window {int(win['step'].iloc[i + 1])} lies inside step "
                          f"window {int(win['step'].iloc[i])}; step windows may not nest")

    # Integer nanoseconds relative to each rank's first window start.
    ranks = np.unique(w_rank)
    origin_by_rank = pd.Series(w_s, index=w_rank).groupby(level=0).min()
    w_origin = origin_by_rank.to_numpy()[np.searchsorted(ranks, w_rank)]
    w0 = np.rint((w_s - w_origin) * _NS_PER_US).astype(np.int64)
    w1 = np.rint((w_e - w_origin) * _NS_PER_US).astype(np.int64)

    k_pos = np.searchsorted(ranks, k_rank)
    k_known = (k_pos < ranks.size) & (ranks[np.minimum(k_pos, ranks.size - 1)] == k_rank)
    keep = np.flatnonzero(k_known & (layer >= 0))
    k_origin = origin_by_rank.to_numpy()[k_pos[keep]]
    ks = np.rint((k_start[keep] - k_origin) * _NS_PER_US).astype(np.int64)
    ke = np.rint((k_end[keep] - k_origin) * _NS_PER_US).astype(np.int64)
    kl = (launch[keep] - k_origin) * _NS_PER_US
    kw = np.minimum(np.rint(wait_us[keep] * _NS_PER_US).astype(np.int64), ke - ks)
    klayer = layer[keep]

    kern, wid = _pairs(k_rank[keep], ks, ke, w_rank, w0, w1)

    # Clip to windows; a collective with a wait becomes a wait piece then a transfer piece.
    ps, pe, pw = ks[kern], ke[kern], kw[kern]
    a0, a1 = w0[wid], w1[wid]
    pl = klayer[kern]
    split = pl == _T
    mid = ps + np.where(split, pw, 0)
    # piece 1: [ps, mid) as wait (collectives) -- empty for others; piece 2: [mid, pe) as the layer.
    p1s, p1e = np.maximum(ps, a0), np.minimum(mid, a1)
    p2s, p2e = np.maximum(mid, a0), np.minimum(pe, a1)
    one = split & (p1e > p1s)
    two = p2e > p2s
    # The launch of a kernel belongs to its first piece only.
    first_is_one = one
    seg_start = np.concatenate([p1s[one], p2s[two]])
    seg_end = np.concatenate([p1e[one], p2e[two]])
    seg_win = np.concatenate([wid[one], wid[two]])
    seg_layer = np.concatenate([np.full(int(one.sum()), _W), pl[two]])
    seg_launch = np.concatenate([kl[kern][one], np.where(first_is_one[two], np.nan, kl[kern][two])])
    seg_roof = np.concatenate([np.zeros(int(one.sum()), dtype=bool), on_roof[keep][kern][two]])

    n_win = len(win)
    n_seg = seg_start.size
    g = np.concatenate([seg_win, seg_win, np.arange(n_win), np.arange(n_win)])
    t = np.concatenate([seg_start, seg_end, w0, w1])
    lay = np.concatenate([seg_layer, seg_layer, np.full(2 * n_win, -1)])
    delta = np.concatenate([np.ones(n_seg, np.int64), -np.ones(n_seg, np.int64),
                            np.zeros(2 * n_win, np.int64)])
    order = np.concatenate([np.full(n_seg, _START), np.full(n_seg, _END),
                            np.full(n_win, _WIN_START), np.full(n_win, _WIN_END)])
    lau = np.concatenate([seg_launch, np.full(n_seg + 2 * n_win, np.nan)])
    rf = np.concatenate([seg_roof, seg_roof, np.zeros(2 * n_win, dtype=bool)])
    lau_key = np.where(np.isnan(lau), np.inf, lau)
    o = np.lexsort((lau_key, order, t, g))
    g, t, lay, delta, order, lau, rf = g[o], t[o], lay[o], delta[o], order[o], lau[o], rf[o]

    cnt = {c: np.cumsum(np.where(lay == c, delta, 0))[:-1] for c in (_C, _T, _W, _M)}
    dt = np.where(g[1:] == g[:-1], t[1:] - t[:-1], 0)
    gg = g[:-1]
    comp = cnt[_C] > 0
    xfer = ~comp & (cnt[_T] > 0)
    wait = ~comp & ~xfer & (cnt[_W] > 0)
    copy = ~comp & (cnt[_T] == 0) & (cnt[_W] == 0) & (cnt[_M] > 0)
    gap = ~comp & (cnt[_T] == 0) & (cnt[_W] == 0) & (cnt[_M] == 0) & (dt > 0)
    next_start = order[1:] == _START
    nxt_launch = lau[1:]
    by_launch = gap & next_start & ~np.isnan(nxt_launch)
    by_rule = gap & next_start & np.isnan(nxt_launch)
    dispatch = (by_launch & (nxt_launch >= t[:-1])) | (
        by_rule & (order[:-1] == _END) & (dt <= gap_us * _NS_PER_US))
    overlapped = comp & ((cnt[_T] > 0) | (cnt[_W] > 0))
    memory_roof = comp & (np.cumsum(np.where(rf & (lay == _C), delta, 0))[:-1] == 0)
    # starts seen in the window up to each segment, and starts still to come after it
    is_start = (order == _START).astype(np.int64)
    seen = np.cumsum(is_start)
    first = np.searchsorted(g, g, side="left")
    last = np.searchsorted(g, g, side="right") - 1
    before = seen - (seen[first] - is_start[first])
    after = seen[last] - seen
    edge = (before[:-1] == 0) | (after[:-1] == 0)

    def total(mask: np.ndarray) -> np.ndarray:
        return np.bincount(gg[mask], weights=dt[mask], minlength=n_win).astype(np.int64)

    parts_ns = {
        "compute": total(comp),
        "exposed_comm": total(xfer),
        "peer_wait": total(wait),
        "exposed_memcpy": total(copy),
        "host_dispatch": total(dispatch),
    }
    wall_ns = w1 - w0
    parts_ns["idle"] = total(gap & ~dispatch)
    covered = sum(parts_ns.values())
    if not np.array_equal(covered, wall_ns):  # pragma: no cover - the sweep telescopes by construction
        raise AssertionError("internal error: step partition does not add up to the wall time")

    n_launch = np.bincount(gg[by_launch], minlength=n_win)
    n_rule = np.bincount(gg[by_rule], minlength=n_win)
    rule_label = f"gap<={gap_us:g}us (approximation)"
    base = "launch_us" if has_launch else rule_label
    rule = np.where((n_launch > 0) & (n_rule > 0), f"mixed: launch_us and {rule_label}",
                    np.where(n_rule > 0, rule_label, np.where(n_launch > 0, "launch_us", base)))
    graph_win = np.bincount(wid[graph[keep][kern]], minlength=n_win) > 0

    out = pd.DataFrame({"rank": win["rank"].to_numpy(), "step": win["step"].to_numpy()})
    for name in PARTITION_PARTS:
        out[name] = parts_ns[name] / _NS_PER_US
    out["step_wall_us"] = wall_ns / _NS_PER_US
    out["overlapped_comm_us"] = total(overlapped) / _NS_PER_US
    out["cuda_graph"] = graph_win
    out["dispatch_rule"] = rule
    out["memory_roof_us"] = total(memory_roof) / _NS_PER_US
    out["edge_idle_us"] = total(gap & ~dispatch & edge) / _NS_PER_US
    return out.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)


def steps_without_device_activity(partition: pd.DataFrame) -> pd.DataFrame:
    """Return the (rank, step) rows of a partition during which no device activity ran at all.

    Such a step is all ``host_dispatch`` and ``idle``: nothing was traced on the device in its
    window (a profiler that lost the device buffer, a rank that skipped the step).  Averaged with
    the other steps it would show only as a small idle share; callers flag it per step instead
    (:func:`fleetlib.program.measure.measure` writes one ``step_without_device_activity`` flag per
    row into the ledger).

    Parameters
    ----------
    partition
        Output of :func:`step_partition`.

    Returns
    -------
    pandas.DataFrame
        ``rank, step, step_wall_us`` of those rows (empty when every step saw device activity).
    """
    require_table_columns(partition, ("rank", "step", *PARTITION_PARTS, "step_wall_us"), "partition")
    active = partition[["compute", "exposed_comm", "peer_wait", "exposed_memcpy"]].sum(axis=1)
    quiet = (active <= 0) & (partition["step_wall_us"] > 0)
    return partition.loc[quiet, ["rank", "step", "step_wall_us"]].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------
# Program goodput from the partition
# ---------------------------------------------------------------------------------------------------


def program_goodput_factor(partition: pd.DataFrame, *, useful_flops_per_step: float, devices: int,
                           peak: PeakRate,
                           convention: FlopConvention | ProgramGoodputConvention | str,
                           window: Window, causal: bool | None = None, step_time_source: str | None = None,
                           config_file: str | None = None) -> Factor:
    """Program goodput of the traced steps under the arithmetic ideal, with the partition as its losses.

    Every row of ``partition`` is one rank's share of one traced step.  The factor is kept in
    device-seconds:

    * denominator -- the traced device time, the sum of ``step_wall_us`` over all rows;
    * numerator -- the ideal device time of the same rows: each row would need
      ``useful_flops_per_step / (devices x peak)`` seconds at peak (the step's required work spread
      evenly over the job's devices), so the value equals :func:`fleetlib.program.flops.mfu` at the
      mean traced step time;
    * losses -- the partition's non-compute parts (``exposed_comm``, ``peer_wait``,
      ``exposed_memcpy``, ``host_dispatch``, ``idle``) summed over rows and converted to seconds,
      entered unchanged (they are already in the denominator's unit, so no rescaling is needed),
      plus ``compute_below_peak`` = compute time minus ideal time, the time compute kernels ran
      beyond what the required FLOPs need at peak.  These add up to the gap exactly; the factor's
      computed ``unattributed`` is then zero up to rounding.  If the ideal time exceeds the measured
      compute time (FLOPs overcounted, or arithmetic inside kernels classified as non-compute),
      ``compute_below_peak`` is zero and ``unattributed`` shows the over-explained remainder as a
      negative number -- shown, not clipped.

    Parameters
    ----------
    partition
        Output of :func:`step_partition` (the rows to count: retained, traced steps).
    useful_flops_per_step
        Required model FLOPs of one step, summed over all devices of the job.
    devices
        Devices of the job (at least the number of ranks in ``partition``).
    peak
        Dense peak of one device (:data:`fleetlib.program.flops.PEAK_RATES`).
    convention
        A FLOP-counting convention name (``"palm"``, ``"megatron"``, ``"6n"``), combined with ``peak``
        into the label, or a full MFU :class:`~fleetlib.program.flops.ProgramGoodputConvention` /
        label whose reference names ``peak``.
    window
        Calendar window the traced steps belong to.
    causal
        Passed to :func:`fleetlib.program.flops.mfu_convention` for a convention name.
    step_time_source
        Where the step time comes from (e.g. ``"step time from 6 traced ProfilerStep windows"``),
        recorded in the convention's provenance field after any provenance it already states
        (no commas).
    config_file
        The model configuration the FLOPs and peak came from, named by the error below.

    Returns
    -------
    Factor
        Program factor in device-s, its convention naming the FLOP rule, the peak with its precision
        and, when stated, where the sequence length and the step time come from.

    Raises
    ------
    UtilizationAboveOneError
        The MFU exceeds one (an :class:`~fleetlib.quality.InputError` naming the convention and
        ``config_file``): the FLOPs are overcounted or the peak (its precision) is too low.
    """
    require_table_columns(partition, (*PARTITION_PARTS, "step_wall_us", "rank"), "partition")
    if partition.empty:
        raise DomainError("partition has no rows; trace at least one step")
    if not isinstance(peak, PeakRate):
        raise DomainError(f"peak must be a PeakRate with its source; got {type(peak).__name__}")
    if isinstance(convention, str) and convention in ("palm", "megatron", "6n"):
        conv = mfu_convention(convention, peak, causal=causal)  # type: ignore[arg-type]
    else:
        conv = ProgramGoodputConvention.parse(convention)
        if conv.ideal != "MFU":
            raise DomainError(f"the step partition measures against the arithmetic ideal; convention "
                              f"{conv.label!r} is {conv.ideal}-based")
        if conv.reference != peak.arithmetic_label:
            raise DomainError(f"convention reference {conv.reference!r} does not name the peak used "
                              f"({peak.arithmetic_label!r})")
    n_ranks = int(partition["rank"].nunique())
    if int(devices) != devices or devices < n_ranks:
        raise DomainError(f"devices must be a whole number >= the {n_ranks} traced ranks; got {devices!r}")
    wall_us = float_column(partition, "step_wall_us", "partition")
    if (wall_us <= 0).any():
        raise DomainError("partition has a step with no wall time")
    rows = len(partition)
    wall_s = float(wall_us.sum()) / 1e6
    if step_time_source:
        stated = "; ".join(p for p in (conv.provenance, step_time_source) if p)
        conv = conv.with_provenance(stated)
    try:
        value = float(mfu(useful_flops_per_step, devices, peak.peak_flops_per_s, wall_s / rows,
                          convention=conv))
    except UtilizationAboveOneError as exc:
        if config_file is None:
            raise
        raise UtilizationAboveOneError(str(exc), file=config_file, field="useful_flops_per_step") from exc
    ideal_s = value * wall_s
    parts_s = {p: float(float_column(partition, p, "partition").sum()) / 1e6 for p in PARTITION_PARTS}
    losses = {p: parts_s[p] for p in PARTITION_PARTS if p != "compute"}
    losses["compute_below_peak"] = max(parts_s["compute"] - ideal_s, 0.0)
    return Factor(boundary="program", numerator=ideal_s, denominator=wall_s, window=window,
                  record="step traces", convention=conv.label, numerator_unit="device-s",
                  denominator_unit="device-s", losses=losses)


# ---------------------------------------------------------------------------------------------------
# HTA-style temporal breakdown (for comparison with Holistic Trace Analysis)
# ---------------------------------------------------------------------------------------------------

#: Columns of :func:`hta_style_temporal_breakdown`.
HTA_BREAKDOWN_COLUMNS: tuple[str, ...] = ("rank", "kernels", "window_us", "idle_us", "compute_us",
                                          "non_compute_us", "idle_pct", "compute_pct", "non_compute_pct",
                                          "comm_us", "comm_comp_overlap_pct")


def _union_us(rank: np.ndarray, start: np.ndarray, end: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Length of the union of intervals per rank (one value per entry of sorted ``ranks``)."""
    out = np.zeros(ranks.size)
    if rank.size == 0:
        return out
    order = np.lexsort((start, rank))
    r, s, e = rank[order], start[order], end[order]
    reach = pd.Series(e).groupby(r).cummax().to_numpy()
    prev = np.concatenate([[-np.inf], reach[:-1]])
    new = np.concatenate([[True], r[1:] != r[:-1]]) | (s > prev)
    seg = np.cumsum(new) - 1
    seg_start = s[new]
    seg_end = pd.Series(e).groupby(seg).max().to_numpy()
    seg_rank = r[new]
    lengths = pd.Series(seg_end - seg_start).groupby(seg_rank).sum()
    out[np.searchsorted(ranks, lengths.index.to_numpy())] = lengths.to_numpy()
    return out


def hta_style_temporal_breakdown(kernels: pd.DataFrame, steps: pd.DataFrame | None = None, *,
                                 include_last_step: bool = True, classify: str = "hta") -> pd.DataFrame:
    """Idle / compute / non-compute shares per rank, as HTA 0.5's temporal breakdown defines them.

    Holistic Trace Analysis (``TraceAnalysis.get_temporal_breakdown`` and
    ``get_comm_comp_overlap``) does not partition a step.  Per rank it takes every GPU activity on a
    stream (device-wide records excluded) and:

    * the *window* runs from the first activity's start to the last activity's end -- so gaps
      between profiled steps, and the time before the first kernel of a step, are outside or inside
      it by accident of where kernels fall;
    * ``idle`` = window - |union of all activities|;
    * ``compute`` = |union of compute activities|, where "compute" is decided by the *kernel name*:
      communication is a name starting with ``nccl`` (or containing ``gloo:``), memory is a name
      containing ``Memcpy`` or ``Memset``, and everything else -- including synchronisation records,
      custom all-reduce kernels and any non-NCCL communication -- is compute;
    * ``non_compute`` = window - compute - idle: communication and copies not hidden under compute
      (peer waits and transfers together, with no split);
    * comm-comp overlap = |union of communication ∩ union of compute| / |union of communication|.

    Shares are percentages of the window.  Compare with :func:`step_partition`, which works per
    step window, classifies kernels by :mod:`fleetlib.program.classify`, splits collective time into
    peer wait and transfer, and charges device-idle time to host dispatch or idle.

    Parameters
    ----------
    kernels
        Kernel table: ``rank, stream, start_us, end_us, name`` (``kind`` with ``classify="kind"``;
        ``step`` with ``steps``).
    steps
        Optional step windows (``rank, step``): only activities whose ``step`` is one of the rank's
        listed steps are counted, like HTA restricted to its kept iterations.  None: every activity.
    include_last_step
        With ``steps``: keep each rank's last step (HTA's ``include_last_profiler_step=True``).
        HTA's default drops it (the last step of a profiler window is often cut short); pass False
        to do the same.  A rank with a single step keeps it only when this is True.
    classify
        ``"hta"``: HTA's name rule above.  ``"kind"``: the kernel table's ``kind`` (``compute`` is
        compute, ``comm`` is communication, everything else non-compute), to isolate the effect of
        the classification.

    Returns
    -------
    pandas.DataFrame
        One row per rank with activities, columns :data:`HTA_BREAKDOWN_COLUMNS` (``comm_comp_overlap_pct``
        is NaN for a rank without communication).

    Raises
    ------
    DomainError
        Missing columns, an unknown ``classify``, a negative duration, or no activity on a stream.
    """
    if classify not in ("hta", "kind"):
        raise DomainError(f"classify must be 'hta' or 'kind'; got {classify!r}")
    need = ("rank", "stream", "start_us", "end_us", "name") + (("kind",) if classify == "kind" else ())
    require_table_columns(kernels, need, "kernels")
    k = kernels[int_column(kernels, "stream", "kernels") != -1]
    if steps is not None:
        require_table_columns(steps, ("rank", "step"), "steps")
        require_table_columns(k, ("step",), "kernels")
        s_rank, s_step = int_column(steps, "rank", "steps"), int_column(steps, "step", "steps")
        if not include_last_step:
            last = pd.Series(s_step).groupby(s_rank).transform("max").to_numpy()
            s_rank, s_step = s_rank[s_step < last], s_step[s_step < last]
        keep = pd.MultiIndex.from_arrays([s_rank, s_step])
        has_step = k["step"].notna().to_numpy()
        k = k[has_step]
        mine = pd.MultiIndex.from_arrays([int_column(k, "rank", "kernels"),
                                          k["step"].astype("int64").to_numpy()])
        k = k[mine.isin(keep)]
    if k.empty:
        raise DomainError("no GPU activity on a stream to break down (after the step filter)")
    rank = int_column(k, "rank", "kernels")
    start = float_column(k, "start_us", "kernels")
    end = float_column(k, "end_us", "kernels")
    if (end < start).any():
        raise DomainError("kernels has an activity with a negative duration")
    if classify == "hta":
        names = k["name"].astype("string").fillna("")
        comm = (names.str.startswith("nccl") | names.str.contains("gloo:", regex=False)).to_numpy(dtype=bool)
        memory = ~comm & (names.str.contains("Memcpy", regex=False)
                          | names.str.contains("Memset", regex=False)).to_numpy(dtype=bool)
        compute = ~comm & ~memory
    else:
        kind = k["kind"].astype("string").fillna("")
        compute = (kind == "compute").to_numpy(dtype=bool)
        comm = (kind == "comm").to_numpy(dtype=bool)
    ranks = np.unique(rank)
    window = (pd.Series(end).groupby(rank).max() - pd.Series(start).groupby(rank).min()).to_numpy()
    busy = _union_us(rank, start, end, ranks)
    comp = _union_us(rank[compute], start[compute], end[compute], ranks)
    comm_u = _union_us(rank[comm], start[comm], end[comm], ranks)
    both = comm | compute
    either = _union_us(rank[both], start[both], end[both], ranks)
    overlap = comp + comm_u - either
    idle = window - busy
    non_compute = window - comp - idle
    pct = np.divide(100.0, window, out=np.full(window.size, np.nan), where=window > 0)
    out = pd.DataFrame({
        "rank": ranks, "kernels": np.bincount(np.searchsorted(ranks, rank), minlength=ranks.size),
        "window_us": window, "idle_us": idle, "compute_us": comp, "non_compute_us": non_compute,
        "idle_pct": idle * pct, "compute_pct": comp * pct, "non_compute_pct": non_compute * pct,
        "comm_us": comm_u,
        "comm_comp_overlap_pct": np.divide(100.0 * overlap, comm_u, out=np.full(window.size, np.nan),
                                           where=comm_u > 0),
    })
    out.attrs["classify"] = classify
    return out


#: The bundled HTA 0.5 outputs (cross-checks, not ground truth).
HTA_REFERENCE_PATH: Path = Path(__file__).resolve().parents[2] / "data" / "traces" / "hta_reference.yaml"

#: Sources of :func:`hta_comparison_table`, in drawing order.
HTA_SOURCES: tuple[str, ...] = ("HTA 0.5 (published)", "HTA definitions (fleetlib)",
                                "step partition (fleetlib)")


def load_hta_reference(name: str, path: str | Path | None = None) -> dict[str, Any]:
    """One trace set's entry of the HTA reference file (``data/traces/hta_reference.yaml``).

    Parameters
    ----------
    name
        Key of the trace set (``dlrm_8rank``, ``hta_pp_pair``, ``hta_nccl_allreduce``).
    path
        Reference file; default :data:`HTA_REFERENCE_PATH`.

    Returns
    -------
    dict
        The entry as written (``files``, ``hta_options``, ``temporal_breakdown_pct`` lists per rank,
        ``comm_comp_overlap_pct`` ...).

    Raises
    ------
    InputError
        The file is missing, not UTF-8, not YAML (or nested or aliased past the input limits), not
        a mapping, or ``name``'s entry is not a mapping.
    DomainError
        ``name`` is not in the file.
    """
    from fleetlib._io import load_yaml, read_text
    from fleetlib.quality import InputError

    p = Path(path) if path is not None else HTA_REFERENCE_PATH
    # read and parsed as every other input: bytes that are not UTF-8, deep nesting and alias
    # bombs are refused with the file named, not raised as tracebacks
    data = load_yaml(read_text(p), file=str(p), invalid="not valid YAML (the HTA reference)")
    if not isinstance(data, Mapping):
        raise InputError("the HTA reference must be a mapping of trace sets", file=str(p))
    if name not in data:
        raise DomainError(f"no HTA reference for {name!r}; the file has {sorted(map(str, data))}")
    if not isinstance(data[name], Mapping):
        raise InputError(f"the HTA reference for {name!r} must be a mapping, not "
                         f"{type(data[name]).__name__}", file=str(p), field=str(name))
    return dict(data[name])


def hta_comparison_table(hta_style: pd.DataFrame, partition: pd.DataFrame | None = None, *,
                         reference: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Long table of per-rank shares (%) from HTA, from HTA's definitions in fleetlib, and the partition.

    Parameters
    ----------
    hta_style
        Output of :func:`hta_style_temporal_breakdown`.
    partition
        Optional output of :func:`step_partition`; each rank's parts are summed over its steps and
        shown as percentages of its summed step wall time.
    reference
        Optional entry of :func:`load_hta_reference`.  Its ``temporal_breakdown_pct`` lists are per
        rank in rank order (rank ``i`` is the ``i``-th rank of ``hta_style``); where the reference
        gives no ``compute``, it is derived as ``100 - idle - non_compute`` and marked ``derived``.

    Returns
    -------
    pandas.DataFrame
        ``rank, source`` (one of :data:`HTA_SOURCES`), ``category`` (``idle``, ``compute``,
        ``non_compute`` for HTA; the six parts for the partition), ``pct`` and ``derived`` (bool).

    Raises
    ------
    DomainError
        Missing columns, or a reference whose lists do not have one value per rank.
    """
    require_table_columns(hta_style, ("rank", "idle_pct", "compute_pct", "non_compute_pct"), "hta_style")
    ranks = int_column(hta_style, "rank", "hta_style")
    cats = ("idle", "compute", "non_compute")
    frames = []
    if reference is not None:
        ref = reference.get("temporal_breakdown_pct")
        if not isinstance(ref, Mapping) or "idle" not in ref or "non_compute" not in ref:
            raise DomainError("reference needs temporal_breakdown_pct with idle and non_compute lists")
        values: dict[str, np.ndarray] = {}
        for c in cats:
            if c in ref:
                v = np.asarray(ref[c], dtype=float)
                if v.size != ranks.size:
                    raise DomainError(f"reference {c} has {v.size} values for {ranks.size} ranks")
                values[c] = v
        derived = "compute" not in values
        if derived:
            values["compute"] = 100.0 - values["idle"] - values["non_compute"]
        for c in cats:
            frames.append(pd.DataFrame({"rank": ranks, "source": HTA_SOURCES[0], "category": c,
                                        "pct": values[c], "derived": derived and c == "compute"}))
    for c in cats:
        frames.append(pd.DataFrame({"rank": ranks, "source": HTA_SOURCES[1], "category": c,
                                    "pct": float_column(hta_style, f"{c}_pct", "hta_style"),
                                    "derived": False}))
    if partition is not None:
        require_table_columns(partition, ("rank", *PARTITION_PARTS, "step_wall_us"), "partition")
        sums = partition.groupby("rank")[[*PARTITION_PARTS, "step_wall_us"]].sum()
        for c in PARTITION_PARTS:
            frames.append(pd.DataFrame({"rank": sums.index.to_numpy(), "source": HTA_SOURCES[2],
                                        "category": c, "derived": False,
                                        "pct": 100.0 * sums[c].to_numpy() / sums["step_wall_us"].to_numpy()}))
    return pd.concat(frames, ignore_index=True)


def hta_reference_differences(hta_style: pd.DataFrame, reference: Mapping[str, Any]) -> pd.DataFrame:
    """Per rank and measure, HTA's published figure beside fleetlib's HTA-style figure and the gap.

    Parameters
    ----------
    hta_style
        Output of :func:`hta_style_temporal_breakdown` (one row per rank, in rank order).
    reference
        Entry of :func:`load_hta_reference`; its per-rank lists are matched to ``hta_style``'s ranks in
        order.

    Returns
    -------
    pandas.DataFrame
        ``rank, measure`` (``idle_pct``, ``compute_pct``, ``non_compute_pct``,
        ``comm_comp_overlap_pct`` -- those the reference gives), ``published``, ``fleetlib`` and
        ``difference`` (fleetlib - published, percentage points).

    Raises
    ------
    DomainError
        Missing columns, or a reference list without one value per rank.
    """
    require_table_columns(hta_style, ("rank", "idle_pct", "compute_pct", "non_compute_pct",
                                      "comm_comp_overlap_pct"), "hta_style")
    ranks = int_column(hta_style, "rank", "hta_style")
    table = dict(reference.get("temporal_breakdown_pct") or {})
    given: dict[str, Any] = {f"{k}_pct": v for k, v in table.items()}
    if reference.get("comm_comp_overlap_pct") is not None:
        given["comm_comp_overlap_pct"] = reference["comm_comp_overlap_pct"]
    frames = []
    for measure in ("idle_pct", "compute_pct", "non_compute_pct", "comm_comp_overlap_pct"):
        if measure not in given:
            continue
        pub = np.asarray(given[measure], dtype=float)
        if pub.size != ranks.size:
            raise DomainError(f"reference {measure} has {pub.size} values for {ranks.size} ranks")
        ours = float_column(hta_style, measure, "hta_style", allow_na=True)
        frames.append(pd.DataFrame({"rank": ranks, "measure": measure, "published": pub, "fleetlib": ours,
                                    "difference": ours - pub}))
    if not frames:
        raise DomainError("reference gives no temporal breakdown or overlap figures")
    return pd.concat(frames, ignore_index=True)
