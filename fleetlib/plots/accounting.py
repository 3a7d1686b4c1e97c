"""Figures of the accounting chapter, drawn from numbers the accounting modules computed.

The capacity waterfall (Figure 10), runtime terms, iso-goodput contours (Figure 11), the efficiency
frontier (Figure 12), runtime loss by job size (Figure 5), lever ranking and the factor chain. Each
draws numbers :mod:`fleetlib.accounting`, :mod:`fleetlib.frontier` or :mod:`fleetlib.runtime.model`
computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from fleetlib.plots._style import (
    MARKERS,
    PERCENT_AXIS,
    UNATTRIBUTED,
    darker,
    device_count,
    new_axes,
    palette,
    pct,
    require_fraction_columns,
    require_fractions,
    require_frame,
    require_mapping,
    require_numeric,
    require_positive,
    term_style,
)
from fleetlib.quality import DomainError
from fleetlib.runtime import MODEL_TERM_LABELS

#: The boundaries in the order a job meets them, then what crosses all three.
BOUNDARY_ORDER: tuple[str, ...] = ("scheduling", "runtime", "program", "useful")

#: The five runtime loss terms (equation 4).  Drawing order puts the size-independent terms at the
#: bottom of a stack so the failure-driven terms that grow with job size sit on top.
RUNTIME_TERMS: tuple[str, ...] = ("startup", "input_wait", "preemption", "checkpoint", "recovery")


RUNTIME_BY_SIZE_COLUMNS: tuple[str, ...] = (
    "devices", "mtbf_h", "interval_min", "startup", "input_wait", "checkpoint", "recovery",
    "preemption", "total",
)
EFFICIENCY_FRONTIER_COLUMNS: tuple[str, ...] = (
    "label", "tier", "time_to_result_h", "cost_per_useful_unit", "relative_goodput", "on_frontier",
)
LEVER_COLUMNS: tuple[str, ...] = (
    "factor", "current", "ceiling", "relative_gain", "mpg_before", "mpg_at_ceiling", "added_useful",
    "loss_share", "rank",
)

_BOUNDARY_LABEL = {
    "scheduling": "scheduling",
    "runtime": "runtime",
    "program": "program",
    "useful": "useful",
}
_ROW_LABEL = (
    "offered\ncapacity",
    "held\n(after scheduling)",
    "retained steps\n(after runtime)",
    "ideal-rate progress\n(after program)",
)
#: Equation 4's terms, labelled as the runtime rung names them (one vocabulary).
_TERM_LABEL = {**MODEL_TERM_LABELS, UNATTRIBUTED: "unattributed"}
_AXIS_LABEL = {
    "scheduling": "scheduling goodput S\n(fraction of offered capacity)",
    "runtime": "runtime goodput R\n(fraction of held time)",
    "program": "program goodput P\n(fraction of ideal rate)",
}


def _boundary_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    return {"scheduling": (c[0], "//"), "runtime": (c[1], "\\\\"), "program": (c[2], "xx"),
            "useful": (c[4], "..")}


def _contour_cmap() -> mpl.colors.Colormap:
    """Return a perceptually uniform map without its palest end (pale lines vanish on white)."""
    return mpl.colors.ListedColormap(sns.color_palette("mako", 256)[60:215], name="fleetlib_mako")


def _label_spot(contour: Any, points: np.ndarray | None, xlim: Sequence[float],
                ylim: Sequence[float]) -> list[tuple[float, float]] | None:
    """Pick where to label one contour: the vertex farthest (in axes fractions) from every point."""
    segs = [seg for level in contour.allsegs for seg in level if len(seg)]
    if not segs or points is None or len(points) == 0:
        return None
    verts = np.concatenate(segs)
    span = np.array([xlim[1] - xlim[0], ylim[1] - ylim[0]])
    lo = np.array([xlim[0], ylim[0]])
    v = (verts - lo) / span
    inside = np.all((v > 0.05) & (v < 0.95), axis=1)
    if not inside.any():
        return None
    v, verts = v[inside], verts[inside]
    d = np.min(np.linalg.norm(v[:, None, :] - ((points - lo) / span)[None, :, :], axis=2), axis=1)
    best = int(np.argmax(d))
    return [(float(verts[best, 0]), float(verts[best, 1]))]


def _check_shares(shares: Any, name: str) -> np.ndarray:
    """Return the four equation-2 shares in boundary order, after checking they partition one."""
    mapping = require_mapping(shares, name, BOUNDARY_ORDER)
    arr = require_fractions([mapping[k] for k in BOUNDARY_ORDER], f"{name} values")
    if not math.isclose(float(arr.sum()), 1.0, rel_tol=0.0, abs_tol=1e-6):
        given = dict(zip(BOUNDARY_ORDER, arr.tolist(), strict=True))
        raise DomainError(f"{name} must sum to 1 (every unit of capacity charged once); "
                          f"got {float(arr.sum())!r} from {given}")
    return arr


# ---------------------------------------------------------------------------------------------------
# Figure 10, left: where the fleet's capacity goes
# ---------------------------------------------------------------------------------------------------


def capacity_waterfall(shares: Mapping[str, float], *, reference: Mapping[str, float] | None = None,
                       reference_label: str = "Llama 3 405B",
                       illustrative: Sequence[str] = ("scheduling",), ax: Axes | None = None) -> Axes:
    """Draw the capacity left after each boundary and the slice lost there (Figure 10, left).

    One row per boundary, top to bottom in the order a job meets them.  The solid bar is the share
    of offered capacity still in play after the boundary; the slice beside it (dashed outline,
    hatched when that boundary's number is illustrative) is the share lost at that boundary.  Bar
    ends are cumulative sums of the given shares -- pure geometry.

    Parameters
    ----------
    shares
        Equation-2 shares of fleet capacity with keys ``"scheduling"``, ``"runtime"``,
        ``"program"``, ``"useful"`` (as from :func:`fleetlib.accounting.loss_shares`); each in
        [0, 1] and summing to 1 within 1e-6.
    reference
        Optional second set of shares with the same keys (e.g. Llama 3 405B on its dedicated
        cluster), drawn as thin hollow bars under each row.
    reference_label
        Legend text for ``reference``.
    illustrative
        Boundaries whose loss slice is hatched because the number comes from a constructed, not a
        measured, record.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        A key is missing, a share lies outside [0, 1], the shares do not sum to 1, or
        ``illustrative`` names an unknown boundary.
    """
    loss_keys = BOUNDARY_ORDER[:-1]
    arr = _check_shares(shares, "shares")
    unknown = [b for b in illustrative if b not in loss_keys]
    if unknown:
        raise DomainError(f"illustrative names unknown boundary(ies) {unknown}; expected some of {loss_keys}")
    ref = _check_shares(reference, "reference") if reference is not None else None
    ax = new_axes(ax, (8.0, 4.2))
    style = _boundary_style()

    # Geometry: capacity still in play before/after each boundary = 1 - cumulative losses.
    after = 1.0 - np.cumsum(arr[:-1])            # remaining after scheduling, runtime, program
    before = np.concatenate(([1.0], after[:-1]))
    rows = np.arange(4, dtype=float)              # row 0: offered capacity, rows 1..3: boundaries
    height = 0.55 if ref is None else 0.5
    main_y = rows if ref is None else rows - 0.12

    ax.barh(main_y[0], 1.0, height=height, color=palette()[7], edgecolor="black", linewidth=0.8,
            label="_offered", gid="offered")
    ax.text(0.5, main_y[0], "100%", ha="center", va="center", color="white", fontweight="bold")
    for i, key in enumerate(loss_keys):
        color, hatch = style[key]
        y = main_y[i + 1]
        ax.barh(y, after[i], height=height, color=color, edgecolor=darker(color), linewidth=0.8,
                gid=f"remaining:{key}")
        ax.text(after[i] / 2.0, y, pct(after[i]), ha="center", va="center", color="white",
                fontweight="bold")
        lost = before[i] - after[i]
        ax.barh(y, lost, left=after[i], height=height, color=mpl.colors.to_rgba(color, 0.22),
                edgecolor=darker(color), linestyle="--", linewidth=1.2,
                hatch=hatch if key in illustrative else None, gid=f"lost:{key}")
        ax.annotate(f"−{pct(arr[i])}", xy=(before[i], y), xytext=(4, 0), textcoords="offset points",
                    ha="left", va="center", color=darker(color, 0.75), fontweight="bold",
                    gid=f"lost-label:{key}")

    if ref is not None:
        ref_after = np.concatenate(([1.0], 1.0 - np.cumsum(ref[:-1])))
        ref_y = rows + 0.32
        ax.barh(ref_y, ref_after, height=0.18, fill=False, edgecolor="black", linewidth=1.0,
                gid="reference")
        for y, value in zip(ref_y[1:], ref_after[1:], strict=True):
            ax.annotate(pct(value), xy=(value, y), xytext=(4, 0), textcoords="offset points",
                        ha="left", va="center", fontsize="small", gid="reference-label")

    ax.set_yticks(rows, _ROW_LABEL)
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.12)
    ax.xaxis.set_major_formatter(PERCENT_AXIS)
    ax.set_xlabel("share of offered fleet capacity-time (%)")
    ax.grid(axis="y", visible=False)

    handles: list[Any] = [
        Patch(facecolor=palette()[7], edgecolor="black", label="remaining after boundary (solid)"),
        Patch(facecolor="white", edgecolor="black", linestyle="--", label="lost at boundary (dashed)"),
    ]
    if illustrative:
        handles.append(Patch(facecolor="white", edgecolor="black", linestyle="--", hatch="//",
                             label="illustrative number (hatched)"))
    if ref is not None:
        handles.append(Patch(fill=False, edgecolor="black", label=f"{reference_label} (hollow)"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize="small",
              frameon=False)
    return ax


# ---------------------------------------------------------------------------------------------------
# Figure 10, right: the runtime slice opened into its terms
# ---------------------------------------------------------------------------------------------------


def runtime_terms_bar(terms: Mapping[str, float], *, ax: Axes | None = None) -> Axes:
    """Draw the runtime loss terms as shares of held time (Figure 10, right).

    Parameters
    ----------
    terms
        Mapping with keys ``"startup"``, ``"input_wait"``, ``"checkpoint"``, ``"recovery"``,
        ``"preemption"`` (fractions of held time).  An ``"unattributed"`` key is drawn as an extra
        bar when present; other keys (e.g. ``"total"``) are ignored.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        A term is missing or lies outside [0, 1].
    """
    mapping = require_mapping(terms, "terms", RUNTIME_TERMS)
    keys = list(RUNTIME_TERMS) + ([UNATTRIBUTED] if UNATTRIBUTED in mapping else [])
    values = require_fractions([mapping[k] for k in keys], "terms values")
    ax = new_axes(ax, (6.0, 3.6))
    style = term_style()
    y = np.arange(len(keys), dtype=float)
    colors = [style[k][0] for k in keys]
    bars = ax.barh(y, values, height=0.6, color=colors, edgecolor=[darker(c) for c in colors],
                   linewidth=0.8)
    for bar, key in zip(bars, keys, strict=True):
        bar.set_hatch(style[key][1])
        bar.set_gid(f"term:{key}")
    ax.bar_label(bars, labels=[pct(v) for v in values], padding=3, fontsize="small")
    ax.set_yticks(y, [_TERM_LABEL[k] for k in keys])
    ax.invert_yaxis()
    top = float(values.max()) if values.size else 0.0
    ax.set_xlim(0.0, max(top * 1.22, 0.01))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{100 * v:g}%"))
    ax.set_xlabel("share of held time (%)")
    ax.grid(axis="y", visible=False)
    return ax


# ---------------------------------------------------------------------------------------------------
# Figure 11: iso-goodput contours
# ---------------------------------------------------------------------------------------------------


def iso_goodput(grid: pd.DataFrame, *, x: str = "program", y: str = "runtime",
                levels: Sequence[float] | None = None, highlight: float | None = None,
                points: pd.DataFrame | None = None, label_format: str = "{:.2f}",
                ax: Axes | None = None) -> Axes:
    """Contour a given goodput grid and label every curve in place (Figure 11).

    Parameters
    ----------
    grid
        Tidy frame with columns ``x``, ``y`` and ``"value"`` covering a full regular grid (every
        ``x`` value paired with every ``y`` value exactly once); ``value`` is the goodput product
        already computed by the caller (e.g. :mod:`fleetlib.frontier`).
    x, y
        Column names for the horizontal and vertical axes.
    levels
        Contour levels, strictly increasing; matplotlib chooses when None.
    highlight
        One level (e.g. the product at today's operating point) drawn bold and black.
    points
        Optional frame with columns ``label``, ``x`` and ``y`` (and optionally ``arrow_to``, the
        label of the point an arrow from this one should reach).  Each point gets its own marker
        shape and colour, and a text label.
    label_format
        ``str.format`` pattern for the in-line contour labels.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, a grid that is not a complete regular grid, non-finite values, levels
        not increasing, or an ``arrow_to`` naming no point.
    """
    if x == y:
        raise DomainError(f"x and y must name different columns; both are {x!r}")
    frame = require_frame(grid, "grid", (x, y, "value"))
    xs = require_numeric(frame[x], f"grid[{x!r}]")
    ys = require_numeric(frame[y], f"grid[{y!r}]")
    vs = require_numeric(frame["value"], "grid['value']")
    ux, ix = np.unique(xs, return_inverse=True)
    uy, iy = np.unique(ys, return_inverse=True)
    if ux.size < 2 or uy.size < 2:
        raise DomainError(f"grid needs at least two distinct {x!r} and {y!r} values to contour")
    cell = iy * ux.size + ix
    counts = np.bincount(cell, minlength=ux.size * uy.size)
    if counts.min() != 1 or counts.max() != 1 or len(frame) != ux.size * uy.size:
        raise DomainError(f"grid must hold each ({x}, {y}) pair exactly once on a regular grid; "
                          f"{int((counts == 0).sum())} cells empty, {int((counts > 1).sum())} repeated")
    z = np.empty(ux.size * uy.size)
    z[cell] = vs
    z = z.reshape(uy.size, ux.size)
    level_arr = None
    if levels is not None:
        level_arr = require_numeric(list(levels), "levels")
        if level_arr.size == 0 or np.any(np.diff(level_arr) <= 0):
            raise DomainError(f"levels must be non-empty and strictly increasing; got {list(levels)!r}")
    pts = None
    if points is not None:
        pts = require_frame(points, "points", ("label", x, y))
        require_numeric(pts[x], f"points[{x!r}]")
        require_numeric(pts[y], f"points[{y!r}]")
        if pts["label"].duplicated().any():
            raise DomainError(f"points labels must be unique; repeated: "
                              f"{sorted(set(pts.loc[pts['label'].duplicated(), 'label']))}")
        if "arrow_to" in pts.columns:
            targets = pts["arrow_to"].dropna()
            unknown = sorted(set(targets) - set(pts["label"]))
            if unknown:
                raise DomainError(f"points['arrow_to'] names unknown label(s) {unknown}")
    if highlight is not None:
        highlight = float(require_numeric(highlight, "highlight"))

    ax = new_axes(ax, (6.4, 5.0))
    fmt = label_format.format
    contour_kw: dict[str, Any] = {"cmap": _contour_cmap(), "linewidths": 1.3}
    cs = ax.contour(ux, uy, z, levels=level_arr, **contour_kw) if level_arr is not None else \
        ax.contour(ux, uy, z, **contour_kw)
    ax.clabel(cs, inline=True, fontsize="small", fmt=fmt)

    # Axis limits: the grid's extent, widened a little when a point sits on or beyond an edge.
    xlim, ylim = [float(ux[0]), float(ux[-1])], [float(uy[0]), float(uy[-1])]
    if pts is not None:
        px_all = pts[x].to_numpy(dtype=float)
        py_all = pts[y].to_numpy(dtype=float)
        for lim, vals in ((xlim, px_all), (ylim, py_all)):
            pad = 0.04 * (lim[1] - lim[0])
            lim[0] = min(lim[0], float(vals.min()) - pad) if vals.min() < lim[0] + pad else lim[0]
            lim[1] = max(lim[1], float(vals.max()) + pad) if vals.max() > lim[1] - pad else lim[1]

    if highlight is not None:
        hs = ax.contour(ux, uy, z, levels=[highlight], colors="black", linewidths=2.6)
        manual = _label_spot(hs, pts[[x, y]].to_numpy(dtype=float) if pts is not None else None,
                             xlim, ylim)
        ax.clabel(hs, inline=True, fontsize="small", fmt=fmt, manual=manual)

    if pts is not None:
        colors = palette()
        where = {}
        for i, row in enumerate(pts.itertuples(index=False)):
            px, py, label = float(getattr(row, x)), float(getattr(row, y)), str(row.label)
            where[label] = (px, py)
            color = colors[(i + 1) % len(colors)]
            ax.plot([px], [py], linestyle="none", marker=MARKERS[i % len(MARKERS)], markersize=10,
                    markerfacecolor=color, markeredgecolor="black", zorder=5, label=label,
                    gid=f"point:{label}")
            # Keep each label inside the axes: below a point near the top, left of one near the right.
            near_top = (py - ylim[0]) > 0.85 * (ylim[1] - ylim[0])
            near_right = (px - xlim[0]) > 0.75 * (xlim[1] - xlim[0])
            ax.annotate(label, xy=(px, py), xytext=(-8 if near_right else 8, -10 if near_top else 8),
                        textcoords="offset points", ha="right" if near_right else "left",
                        va="top" if near_top else "bottom", fontsize="small", fontweight="bold", zorder=6,
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8},
                        gid=f"point-label:{label}")
        if "arrow_to" in pts.columns:
            for source, target in pts.loc[pts["arrow_to"].notna(), ["label", "arrow_to"]].itertuples(
                    index=False):
                ax.annotate("", xy=where[str(target)], xytext=where[str(source)], zorder=4,
                            arrowprops={"arrowstyle": "-|>", "color": "black", "lw": 1.4,
                                        "shrinkA": 7, "shrinkB": 7}, gid=f"arrow:{source}->{target}")

    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel(_AXIS_LABEL.get(x, f"{x} (fraction)"))
    ax.set_ylabel(_AXIS_LABEL.get(y, f"{y} (fraction)"))
    ax.grid(visible=False)
    return ax


# ---------------------------------------------------------------------------------------------------
# Figure 12: efficiency frontier over time to result and cost per useful unit
# ---------------------------------------------------------------------------------------------------


def efficiency_frontier(points: pd.DataFrame, *, cost_unit: str = "× baseline",
                        area_pt2: float = 320.0, ax: Axes | None = None) -> Axes:
    """Place strategies by time to result and cost per useful unit and trace the given frontier.

    Parameters
    ----------
    points
        Frame with columns ``label, tier, time_to_result_h, cost_per_useful_unit,
        relative_goodput, on_frontier``.  ``on_frontier`` (bool) comes from the caller's Pareto
        computation (:mod:`fleetlib.frontier`); this function only connects those points, sorted
        by time to result.
    cost_unit
        Unit text for the cost axis label.
    area_pt2
        Marker area in points² for a relative goodput of 1.0; area is proportional to
        ``relative_goodput``.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.  Frontier points are filled, dominated ones hollow; each
        tier has its own marker shape and colour.

    Raises
    ------
    DomainError
        Missing columns, non-positive times, costs or goodputs, or a non-boolean ``on_frontier``.
    """
    frame = require_frame(points, "points", EFFICIENCY_FRONTIER_COLUMNS)
    t = require_positive(frame["time_to_result_h"], "points['time_to_result_h']")
    cost = require_positive(frame["cost_per_useful_unit"], "points['cost_per_useful_unit']")
    rel = require_positive(frame["relative_goodput"], "points['relative_goodput']")
    flags = frame["on_frontier"]
    if not (pd.api.types.is_bool_dtype(flags) or flags.map(lambda v: isinstance(v, bool | np.bool_)).all()):
        raise DomainError(f"points['on_frontier'] must be booleans; got dtype {flags.dtype}")
    on = flags.to_numpy(dtype=bool)
    if not (area_pt2 > 0 and math.isfinite(area_pt2)):
        raise DomainError(f"area_pt2 must be > 0; got {area_pt2!r}")

    ax = new_axes(ax, (8.0, 4.8))
    colors = palette()
    tiers = list(dict.fromkeys(frame["tier"].astype(str)))
    tier_style = {tier: (colors[i % len(colors)], MARKERS[i % len(MARKERS)])
                  for i, tier in enumerate(tiers)}
    labels = frame["label"].astype(str).to_numpy()
    tier_of = frame["tier"].astype(str).to_numpy()

    if on.any():
        order = np.argsort(t[on], kind="stable")
        ax.plot(t[on][order], cost[on][order], drawstyle="steps-post", color="black", linestyle="--",
                linewidth=1.2, zorder=2, gid="frontier")
    for tier in tiers:
        color, marker = tier_style[tier]
        for flag in (True, False):
            sel = (tier_of == tier) & (on == flag)
            if not sel.any():
                continue
            ax.scatter(t[sel], cost[sel], s=area_pt2 * rel[sel], marker=marker,
                       facecolors=[color] if flag else "none", edgecolors=[darker(color, 0.8)],
                       linewidths=1.8, zorder=3, gid=f"points:{tier}:{'frontier' if flag else 'dominated'}")
    # Labels sit above-right of a point, or below-left of it in the right third (inside the axes,
    # and clear of the step that reaches a frontier point from above).
    right_side = t > t.min() + 0.66 * (t.max() - t.min())
    for i in range(len(frame)):
        ax.annotate(f"{labels[i]} · {rel[i]:.2f}", xy=(t[i], cost[i]),
                    xytext=(-9, -9) if right_side[i] else (9, 7), textcoords="offset points",
                    ha="right" if right_side[i] else "left", va="top" if right_side[i] else "bottom",
                    fontsize="small", zorder=4, gid=f"label:{labels[i]}",
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})

    ax.set_xlabel("time to result (h)")
    ax.set_ylabel(f"cost per useful unit ({cost_unit})")
    pad_t = 0.12 * (t.max() - t.min() or t.max())
    pad_c = 0.15 * (cost.max() - cost.min() or cost.max())
    ax.set_xlim(max(0.0, t.min() - pad_t), t.max() + pad_t)
    ax.set_ylim(max(0.0, cost.min() - pad_c), cost.max() + 1.5 * pad_c)
    handles: list[Any] = [Line2D([], [], linestyle="none", marker=tier_style[tier][1], markersize=9,
                                markerfacecolor=tier_style[tier][0], markeredgecolor="black", label=tier)
                          for tier in tiers]
    handles += [
        Line2D([], [], linestyle="none", marker="o", markersize=9, markerfacecolor="grey",
               markeredgecolor="black", label="on frontier (filled)"),
        Line2D([], [], linestyle="none", marker="o", markersize=9, markerfacecolor="none",
               markeredgecolor="black", label="dominated (hollow)"),
        Line2D([], [], color="black", linestyle="--", label="frontier"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
              title="area and number:\nrelative goodput", title_fontsize="small")
    return ax


# ---------------------------------------------------------------------------------------------------
# Figure 5: runtime loss versus job size
# ---------------------------------------------------------------------------------------------------


def runtime_loss_by_size(frame: pd.DataFrame, *, crossover_devices: float | None = None,
                         reference_loss: float | None = None, reference_label: str = "Llama 3 405B",
                         ax: Axes | None = None) -> Axes:
    """Stack the runtime loss terms for each job size (Figure 5).

    Parameters
    ----------
    frame
        One row per device count, columns ``devices, mtbf_h, interval_min, startup, input_wait,
        checkpoint, recovery, preemption, total`` (loss terms and ``total`` as fractions of held
        time).  An ``unattributed`` column is stacked too when present.  ``devices`` must be
        strictly increasing; sizes sit at evenly spaced positions (a log2 axis for powers of two),
        each tick labelled with its device count (multiples of 1,024 as ``K``: 16K = 16,384) and
        checkpoint interval.  ``total`` is marked by a
        black tick and a label above each stack, so a total that disagrees with its terms shows.
    crossover_devices
        Job size where checkpoint waste + recovery overtake input waits, as computed by the runtime
        model; drawn as a dotted vertical line placed on the log2 scale between the bars.
    reference_loss
        A published loss (e.g. Llama 3 405B's at most 0.10) drawn as a hollow bar after the sizes.
    reference_label
        Tick label of the reference bar.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, shares outside [0, 1], device counts not positive and increasing, or a
        crossover outside the range of device counts.
    """
    data = require_frame(frame, "frame", RUNTIME_BY_SIZE_COLUMNS)
    devices = require_positive(data["devices"], "frame['devices']")
    if np.any(np.diff(devices) <= 0):
        raise DomainError(f"frame['devices'] must be strictly increasing; got {devices.tolist()}")
    interval = require_positive(data["interval_min"], "frame['interval_min']")
    require_positive(data["mtbf_h"], "frame['mtbf_h']")
    keys = list(RUNTIME_TERMS) + ([UNATTRIBUTED] if UNATTRIBUTED in data.columns else [])
    stack = require_fraction_columns(data, keys, "frame")
    total = require_fractions(data["total"], "frame['total']")
    cross_x = None
    if crossover_devices is not None:
        c = float(require_positive(crossover_devices, "crossover_devices"))
        if not devices[0] <= c <= devices[-1]:
            raise DomainError(f"crossover_devices {c} lies outside the drawn sizes "
                              f"[{devices[0]:g}, {devices[-1]:g}]")
        cross_x = float(np.interp(np.log2(c), np.log2(devices), np.arange(devices.size)))
    if reference_loss is not None:
        reference_loss = float(require_fractions(reference_loss, "reference_loss"))

    ax = new_axes(ax, (10.0, 4.6))
    style = term_style()
    x = np.arange(devices.size, dtype=float)
    bottoms = np.concatenate([np.zeros((stack.shape[0], 1)), np.cumsum(stack, axis=1)[:, :-1]], axis=1)
    for j, key in enumerate(keys):
        color, hatch = style[key]
        ax.bar(x, stack[:, j], bottom=bottoms[:, j], width=0.7, color=color, edgecolor=darker(color),
               linewidth=0.6, hatch=hatch, label=_TERM_LABEL[key], gid=f"term:{key}")
    stack_top = bottoms[:, -1] + stack[:, -1]
    ax.hlines(total, x - 0.35, x + 0.35, colors="black", linewidth=1.6, zorder=4, gid="total")
    for xi, top, tot in zip(x, np.maximum(stack_top, total), total, strict=True):
        ax.annotate(pct(tot), xy=(xi, top), xytext=(0, 3), textcoords="offset points", ha="center",
                    va="bottom", fontsize="small", gid="total-label")

    tick_x = list(x)
    tick_labels = [f"{device_count(d)}\n{m:.0f} min" if m >= 10 else f"{device_count(d)}\n{m:.1f} min"
                   for d, m in zip(devices, interval, strict=True)]
    top_all = float(max(np.max(stack_top), np.max(total)))
    if reference_loss is not None:
        rx = float(devices.size) + 0.3
        ax.bar([rx], [reference_loss], width=0.7, fill=False, edgecolor="black", linewidth=1.4,
               linestyle="-", label=f"{reference_label} (hollow)", gid="reference")
        ax.annotate(f"≤ {pct(reference_loss)}", xy=(rx, reference_loss), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize="small",
                    gid="reference-label")
        tick_x.append(rx)
        tick_labels.append(reference_label.replace(" ", "\n", 1))
        top_all = max(top_all, reference_loss)
    if cross_x is not None:
        ax.axvline(cross_x, color="black", linestyle=":", linewidth=1.6, gid="crossover")
        ax.annotate(f"crossover ≈ {crossover_devices:,.0f} GPUs",
                    xy=(cross_x, 1.0), xycoords=("data", "axes fraction"), xytext=(-4, -4),
                    textcoords="offset points", ha="right", va="top", fontsize="small",
                    gid="crossover-label")

    ax.set_xticks(tick_x, tick_labels, fontsize="small")
    ax.set_xlim(-0.6, tick_x[-1] + 0.6)
    ax.set_ylim(0.0, top_all * 1.2)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{100 * v:g}%"))
    ax.set_ylabel("runtime loss (% of held time)")
    ax.set_xlabel("job size (GPUs, log2 spacing) · checkpoint interval (min)")
    ax.grid(axis="x", visible=False)
    handles, _ = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="black", linewidth=1.6, label="total (as given)"))
    ax.legend(handles=handles[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return ax


# ---------------------------------------------------------------------------------------------------
# Lever ranking
# ---------------------------------------------------------------------------------------------------


def lever_ranking(levers: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw each lever's relative gain at its ceiling in rank order, with its loss share beside.

    The relative gain (what the ranking is by) is a solid bar; the boundary's equation-2 loss share
    is a thinner hatched, dashed-outline bar under it, shown only for contrast because a large loss
    share does not mean a large recoverable gain.  The end of each gain bar carries the MPG before
    and at the ceiling.

    Parameters
    ----------
    levers
        Frame with columns ``factor, current, ceiling, relative_gain, mpg_before, mpg_at_ceiling,
        added_useful, loss_share, rank`` (as from ``fleetlib.accounting.rank_levers`` rows).
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, repeated ranks, negative gains, or fractions outside [0, 1].
    """
    data = require_frame(levers, "levers", LEVER_COLUMNS)
    rank = require_numeric(data["rank"], "levers['rank']")
    if len(np.unique(rank)) != rank.size:
        raise DomainError(f"levers['rank'] must be unique; got {rank.tolist()}")
    order = np.argsort(rank, kind="stable")
    gain = require_numeric(data["relative_gain"], "levers['relative_gain']")[order]
    if np.any(gain < 0):
        raise DomainError(f"levers['relative_gain'] must be >= 0 (a ceiling bounds a gain); "
                          f"got {gain.tolist()}")
    share = require_fractions(data["loss_share"], "levers['loss_share']")[order]
    current = require_fractions(data["current"], "levers['current']")[order]
    ceiling = require_fractions(data["ceiling"], "levers['ceiling']")[order]
    before = require_fractions(data["mpg_before"], "levers['mpg_before']")[order]
    at_ceiling = require_fractions(data["mpg_at_ceiling"], "levers['mpg_at_ceiling']")[order]
    factors = data["factor"].astype(str).to_numpy()[order]

    ax = new_axes(ax, (7.5, 1.8 + 0.9 * len(factors)))
    style = _boundary_style()
    fallback = palette()
    y = np.arange(len(factors), dtype=float)
    colors = [style.get(f, (fallback[7], ""))[0] for f in factors]
    gain_bars = ax.barh(y - 0.17, gain, height=0.34, color=colors, edgecolor=[darker(c) for c in colors],
                        linewidth=0.8, label="relative gain at ceiling (% of current MPG)")
    for bar, f in zip(gain_bars, factors, strict=True):
        bar.set_gid(f"gain:{f}")
    share_bars = ax.barh(y + 0.17, share, height=0.22, color=[mpl.colors.to_rgba(c, 0.2) for c in colors],
                         edgecolor=[darker(c) for c in colors], linestyle="--", linewidth=1.0, hatch="..",
                         label="loss share at boundary (% of fleet capacity, contrast only)")
    for bar, f in zip(share_bars, factors, strict=True):
        bar.set_gid(f"share:{f}")
    ax.bar_label(gain_bars, labels=[f"+{pct(g)}   MPG {b:.3f} → {a:.3f}"
                                    for g, b, a in zip(gain, before, at_ceiling, strict=True)],
                 padding=4, fontsize="small", fontweight="bold")
    ax.bar_label(share_bars, labels=[pct(s) for s in share], padding=4, fontsize="x-small")
    ax.set_yticks(y, [f"#{i + 1} {f}\n{c:.2f} → {m:.2f}"
                      for i, (f, c, m) in enumerate(zip(factors, current, ceiling, strict=True))])
    ax.invert_yaxis()
    top = float(max(gain.max(), share.max()))
    ax.set_xlim(0.0, max(top, 0.01) * 1.9)
    ax.xaxis.set_major_formatter(PERCENT_AXIS)
    ax.set_xlabel("relative gain (% of current MPG) · loss share (% of fleet capacity)")
    ax.grid(axis="y", visible=False)
    grey = palette()[7]
    ax.legend(handles=[
        Patch(facecolor=grey, edgecolor=darker(grey), label="relative gain at ceiling (% of current MPG)"),
        Patch(facecolor=mpl.colors.to_rgba(grey, 0.2), edgecolor=darker(grey), linestyle="--", hatch="..",
              label="loss share at boundary (% of fleet capacity; contrast only)"),
    ], loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, fontsize="small", frameon=False)
    return ax


# ---------------------------------------------------------------------------------------------------
# Figure 1-like: the three factors as a chain
# ---------------------------------------------------------------------------------------------------


def factor_chain(factors: Mapping[str, float], *, ax: Axes | None = None) -> Axes:
    """Draw S, R and P as a chain of bars, each as the fraction of what reached its boundary.

    Each row is one boundary: the solid part is what crossed it, the dashed remainder (to 1) is
    what it lost.  When ``factors`` also carries ``"mpg"`` (computed by the caller) a last row
    shows it against offered capacity.

    Parameters
    ----------
    factors
        ``{"scheduling": S, "runtime": R, "program": P}`` and optionally ``"mpg"``; fractions.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        A factor is missing or outside [0, 1].
    """
    keys = list(BOUNDARY_ORDER[:-1])
    mapping = require_mapping(factors, "factors", keys)
    if "mpg" in mapping:
        keys.append("mpg")
    values = require_fractions([mapping[k] for k in keys], "factors values")
    ax = new_axes(ax, (7.0, 0.9 + 0.8 * len(keys)))
    style = _boundary_style()
    style["mpg"] = style["useful"]
    y = np.arange(len(keys), dtype=float)
    names = {"scheduling": ("S", "of offered capacity-time"), "runtime": ("R", "of held time"),
             "program": ("P", "of retained step time"), "mpg": ("MPG", "of offered capacity-time")}
    for yi, key, v in zip(y, keys, values, strict=True):
        color, hatch = style[key]
        ax.barh(yi, v, height=0.55, color=color, edgecolor=darker(color), linewidth=0.8, hatch=hatch,
                gid=f"kept:{key}")
        ax.barh(yi, 1.0 - v, left=v, height=0.55, color=mpl.colors.to_rgba(color, 0.15),
                edgecolor=darker(color), linestyle="--", linewidth=1.0, gid=f"lost:{key}")
        # Value inside the solid bar when it is wide enough, otherwise just right of it.
        inside = v >= 0.3
        ax.annotate(f"{names[key][0]} = {v:.2f}", xy=(v, yi), xytext=(-4 if inside else 4, 0),
                    textcoords="offset points", ha="right" if inside else "left", va="center",
                    color="white" if inside else darker(color), fontweight="bold",
                    bbox={"boxstyle": "round,pad=0.15", "fc": darker(color) if inside else "white",
                          "ec": "none"}, gid=f"value:{key}")
    ax.set_yticks(y, [f"{'MPG' if k == 'mpg' else k}\n{names[k][1]}" for k in keys], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.0)
    ax.xaxis.set_major_formatter(PERCENT_AXIS)
    ax.set_xlabel("share of what reached the boundary (%)")
    ax.grid(axis="y", visible=False)
    return ax


