"""Axes-level figures for the fleet-goodput workbook.

Every public plot function has the shape ``f(data, *, ax=None, **options) -> Axes``.  Given an
``ax`` it draws into that axes and touches nothing else; without one it makes a fresh figure with
:func:`matplotlib.pyplot.subplots`.  The functions *draw* numbers that other modules computed
(:mod:`fleetlib.accounting`, :mod:`fleetlib.runtime`, :mod:`fleetlib.frontier`): they place bars,
stack bar bottoms, contour a given grid and sort points along an axis, but they never derive a
goodput, a share, a Pareto set or a model value.

Conventions kept by every function:

* units (or "fraction" for a dimensionless ratio) appear in every axis label;
* colours come from seaborn's ``colorblind`` palette, and each series is told apart a second way
  (hatch, marker shape or line style), so a grey-scale print still reads;
* iso-goodput contours carry their value on the line (``clabel``) rather than in a colour bar;
* importing this module changes no rcParams; :func:`use_theme` (global) and :func:`theme`
  (scoped) apply the project look only when asked.

The backend is never chosen here; tests and headless reports select ``Agg`` themselves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from fleetlib.quality import DomainError

__all__ = [
    "BOUNDARY_ORDER",
    "CUMULATIVE_COLUMNS",
    "EFFICIENCY_FRONTIER_COLUMNS",
    "GANTT_COLUMNS",
    "LEVER_COLUMNS",
    "PARTITION_PARTS",
    "RESTART_COLUMNS",
    "ROOFLINE_REGIMES",
    "RUNTIME_BY_SIZE_COLUMNS",
    "RUNTIME_TERMS",
    "STEP_TIME_COLUMNS",
    "TIMELINE_CATEGORIES",
    "WINDOW_COLUMNS",
    "attempt_gantt",
    "capacity_waterfall",
    "collective_audit_bars",
    "cumulative_goodput",
    "efficiency_frontier",
    "factor_chain",
    "hta_comparison_bars",
    "iso_goodput",
    "lever_ranking",
    "palette",
    "rank_step_heatmap",
    "roofline_scatter",
    "runtime_loss_by_size",
    "runtime_terms_bar",
    "step_partition_bars",
    "step_time_distribution",
    "straggler_bars",
    "theme",
    "use_theme",
]

#: The boundaries in the order a job meets them, then what crosses all three.
BOUNDARY_ORDER: tuple[str, ...] = ("scheduling", "runtime", "program", "useful")

#: The five runtime loss terms (equation 4).  Drawing order puts the size-independent terms at the
#: bottom of a stack so the failure-driven terms that grow with job size sit on top.
RUNTIME_TERMS: tuple[str, ...] = ("startup", "input_wait", "preemption", "checkpoint", "recovery")

#: Optional remainder term: drawn when present, so a loss nobody attributed is shown, not dropped.
_UNATTRIBUTED = "unattributed"

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

_PALETTE_NAME = "colorblind"
_HATCHES = ("//", "\\\\", "xx", "..", "++", "oo", "--", "||")
_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "h")

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
_TERM_LABEL = {
    "startup": "startup",
    "input_wait": "input waits",
    "preemption": "preemption",
    "checkpoint": "checkpoint waste",
    "recovery": "failure recovery",
    _UNATTRIBUTED: "unattributed",
}
_AXIS_LABEL = {
    "scheduling": "scheduling goodput S\n(fraction of offered capacity)",
    "runtime": "runtime goodput R\n(fraction of held time)",
    "program": "program goodput P\n(fraction of ideal rate)",
}


# ---------------------------------------------------------------------------------------------------
# Theme and styles
# ---------------------------------------------------------------------------------------------------


def palette() -> list[tuple[float, float, float]]:
    """Return the project's colour cycle (seaborn ``colorblind``) without touching rcParams.

    Returns
    -------
    list of tuple
        Ten RGB triples.
    """
    return list(sns.color_palette(_PALETTE_NAME))


def use_theme(*, context: str = "notebook", style: str = "whitegrid", font_scale: float = 1.0,
              rc: Mapping[str, Any] | None = None) -> None:
    """Apply the project theme globally (seaborn ``set_theme`` with the colourblind palette).

    Notebooks call this once in their setup cell.  It changes :data:`matplotlib.rcParams` for the
    rest of the session; use :func:`theme` for a scoped change.

    Parameters
    ----------
    context
        Seaborn plotting context: ``"paper"``, ``"notebook"``, ``"talk"`` or ``"poster"``.
    style
        Seaborn axes style, e.g. ``"whitegrid"`` or ``"ticks"``.
    font_scale
        Multiplier on the context's font sizes; must be > 0.
    rc
        Extra rcParams layered on top of the theme.
    """
    if not (isinstance(font_scale, int | float) and math.isfinite(font_scale) and font_scale > 0):
        raise DomainError(f"font_scale must be a finite number > 0; got {font_scale!r}")
    base_rc = {"hatch.linewidth": 0.8, "legend.frameon": True}
    if rc:
        base_rc.update(rc)
    sns.set_theme(context=context, style=style, palette=_PALETTE_NAME, font_scale=font_scale,
                  rc=base_rc)


@contextmanager
def theme(*, context: str = "notebook", style: str = "whitegrid", font_scale: float = 1.0,
          rc: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Apply the project theme inside a ``with`` block and restore every rcParam afterwards.

    Parameters
    ----------
    context, style, font_scale, rc
        As for :func:`use_theme`.

    Yields
    ------
    None
        Figures made inside the block use the theme.
    """
    with mpl.rc_context():
        use_theme(context=context, style=style, font_scale=font_scale, rc=rc)
        yield


def _boundary_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    return {"scheduling": (c[0], "//"), "runtime": (c[1], "\\\\"), "program": (c[2], "xx"),
            "useful": (c[4], "..")}


def _term_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    return {"startup": (c[4], ".."), "input_wait": (c[0], "//"), "preemption": (c[1], "\\\\"),
            "checkpoint": (c[2], "xx"), "recovery": (c[3], "++"), _UNATTRIBUTED: (c[7], "oo")}


def _darker(color: Any, factor: float = 0.6) -> tuple[float, float, float]:
    r, g, b = mpl.colors.to_rgb(color)
    return (r * factor, g * factor, b * factor)


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is not None:
        if not isinstance(ax, Axes):
            raise DomainError(f"ax must be a matplotlib Axes or None; got {type(ax).__name__}")
        return ax
    _, new_ax = plt.subplots(figsize=figsize, layout="constrained")
    return new_ax


def _device_count(devices: float) -> str:
    """Format a device count compactly: multiples of 1,024 as ``16K`` (16,384), others in full."""
    if devices >= 1024 and devices % 1024 == 0:
        return f"{devices / 1024:g}K"
    return f"{devices:,.0f}"


def _pct(value: float) -> str:
    """Format a fraction as a percentage with two significant figures below 10 %."""
    p = 100.0 * value
    if p == 0.0:
        return "0%"
    decimals = 0 if abs(p) >= 9.95 else 1 if abs(p) >= 0.995 else 2
    return f"{p:.{decimals}f}%"


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


_PERCENT_AXIS = FuncFormatter(lambda v, _pos: f"{100 * v:.0f}%")


# ---------------------------------------------------------------------------------------------------
# Validation (inputs only; nothing here derives an accounting number)
# ---------------------------------------------------------------------------------------------------


def _require_frame(data: Any, name: str, columns: Iterable[str]) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        raise DomainError(f"{name} must be a pandas DataFrame; got {type(data).__name__}")
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise DomainError(f"{name} is missing column(s) {missing}; it has {list(data.columns)}")
    if data.empty:
        raise DomainError(f"{name} has no rows; nothing to draw")
    return data


def _require_mapping(data: Any, name: str, keys: Iterable[str]) -> dict[str, float]:
    if not isinstance(data, Mapping):
        raise DomainError(f"{name} must be a mapping; got {type(data).__name__}")
    missing = [k for k in keys if k not in data]
    if missing:
        raise DomainError(f"{name} is missing key(s) {missing}; it has {list(data)}")
    return dict(data)


def _numeric(values: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} must be numeric; got {values!r}") from exc
    bad = ~np.isfinite(arr)
    if bad.any():
        raise DomainError(f"{name} must be finite; got {arr[bad][0]!r} at position "
                          f"{int(np.flatnonzero(bad)[0])}")
    return arr


def _fractions(values: Any, name: str) -> np.ndarray:
    arr = _numeric(values, name)
    bad = (arr < 0.0) | (arr > 1.0)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise DomainError(f"{name} must be fractions in [0, 1]; got {arr.ravel()[i]!r} at position {i}")
    return arr


def _positive(values: Any, name: str) -> np.ndarray:
    arr = _numeric(values, name)
    bad = arr <= 0.0
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise DomainError(f"{name} must be > 0; got {arr.ravel()[i]!r} at position {i}")
    return arr


def _fraction_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> np.ndarray:
    """Return ``frame[columns]`` as a float array after checking every cell is a fraction in [0, 1]."""
    try:
        arr = frame.loc[:, list(columns)].to_numpy(dtype=float)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} columns {list(columns)} must be numeric") from exc
    bad = ~np.isfinite(arr) | (arr < 0.0) | (arr > 1.0)
    if bad.any():
        r, c = (int(i[0]) for i in np.nonzero(bad))
        raise DomainError(f"{name}[{columns[c]!r}] must be fractions in [0, 1]; got {arr[r, c]!r} "
                          f"in row {frame.index[r]!r}")
    return arr


def _check_shares(shares: Any, name: str) -> np.ndarray:
    """Return the four equation-2 shares in boundary order, after checking they partition one."""
    mapping = _require_mapping(shares, name, BOUNDARY_ORDER)
    arr = _fractions([mapping[k] for k in BOUNDARY_ORDER], f"{name} values")
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
    ax = _new_axes(ax, (8.0, 4.2))
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
        ax.barh(y, after[i], height=height, color=color, edgecolor=_darker(color), linewidth=0.8,
                gid=f"remaining:{key}")
        ax.text(after[i] / 2.0, y, _pct(after[i]), ha="center", va="center", color="white",
                fontweight="bold")
        lost = before[i] - after[i]
        ax.barh(y, lost, left=after[i], height=height, color=mpl.colors.to_rgba(color, 0.22),
                edgecolor=_darker(color), linestyle="--", linewidth=1.2,
                hatch=hatch if key in illustrative else None, gid=f"lost:{key}")
        ax.annotate(f"−{_pct(arr[i])}", xy=(before[i], y), xytext=(4, 0), textcoords="offset points",
                    ha="left", va="center", color=_darker(color, 0.75), fontweight="bold",
                    gid=f"lost-label:{key}")

    if ref is not None:
        ref_after = np.concatenate(([1.0], 1.0 - np.cumsum(ref[:-1])))
        ref_y = rows + 0.32
        ax.barh(ref_y, ref_after, height=0.18, fill=False, edgecolor="black", linewidth=1.0,
                gid="reference")
        for y, value in zip(ref_y[1:], ref_after[1:], strict=True):
            ax.annotate(_pct(value), xy=(value, y), xytext=(4, 0), textcoords="offset points",
                        ha="left", va="center", fontsize="small", gid="reference-label")

    ax.set_yticks(rows, _ROW_LABEL)
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.12)
    ax.xaxis.set_major_formatter(_PERCENT_AXIS)
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
    mapping = _require_mapping(terms, "terms", RUNTIME_TERMS)
    keys = list(RUNTIME_TERMS) + ([_UNATTRIBUTED] if _UNATTRIBUTED in mapping else [])
    values = _fractions([mapping[k] for k in keys], "terms values")
    ax = _new_axes(ax, (6.0, 3.6))
    style = _term_style()
    y = np.arange(len(keys), dtype=float)
    colors = [style[k][0] for k in keys]
    bars = ax.barh(y, values, height=0.6, color=colors, edgecolor=[_darker(c) for c in colors],
                   linewidth=0.8)
    for bar, key in zip(bars, keys, strict=True):
        bar.set_hatch(style[key][1])
        bar.set_gid(f"term:{key}")
    ax.bar_label(bars, labels=[_pct(v) for v in values], padding=3, fontsize="small")
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
    frame = _require_frame(grid, "grid", (x, y, "value"))
    xs = _numeric(frame[x], f"grid[{x!r}]")
    ys = _numeric(frame[y], f"grid[{y!r}]")
    vs = _numeric(frame["value"], "grid['value']")
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
        level_arr = _numeric(list(levels), "levels")
        if level_arr.size == 0 or np.any(np.diff(level_arr) <= 0):
            raise DomainError(f"levels must be non-empty and strictly increasing; got {list(levels)!r}")
    pts = None
    if points is not None:
        pts = _require_frame(points, "points", ("label", x, y))
        _numeric(pts[x], f"points[{x!r}]")
        _numeric(pts[y], f"points[{y!r}]")
        if pts["label"].duplicated().any():
            raise DomainError(f"points labels must be unique; repeated: "
                              f"{sorted(set(pts.loc[pts['label'].duplicated(), 'label']))}")
        if "arrow_to" in pts.columns:
            targets = pts["arrow_to"].dropna()
            unknown = sorted(set(targets) - set(pts["label"]))
            if unknown:
                raise DomainError(f"points['arrow_to'] names unknown label(s) {unknown}")
    if highlight is not None:
        highlight = float(_numeric(highlight, "highlight"))

    ax = _new_axes(ax, (6.4, 5.0))
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
            ax.plot([px], [py], linestyle="none", marker=_MARKERS[i % len(_MARKERS)], markersize=10,
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
    frame = _require_frame(points, "points", EFFICIENCY_FRONTIER_COLUMNS)
    t = _positive(frame["time_to_result_h"], "points['time_to_result_h']")
    cost = _positive(frame["cost_per_useful_unit"], "points['cost_per_useful_unit']")
    rel = _positive(frame["relative_goodput"], "points['relative_goodput']")
    flags = frame["on_frontier"]
    if not (pd.api.types.is_bool_dtype(flags) or flags.map(lambda v: isinstance(v, bool | np.bool_)).all()):
        raise DomainError(f"points['on_frontier'] must be booleans; got dtype {flags.dtype}")
    on = flags.to_numpy(dtype=bool)
    if not (area_pt2 > 0 and math.isfinite(area_pt2)):
        raise DomainError(f"area_pt2 must be > 0; got {area_pt2!r}")

    ax = _new_axes(ax, (8.0, 4.8))
    colors = palette()
    tiers = list(dict.fromkeys(frame["tier"].astype(str)))
    tier_style = {tier: (colors[i % len(colors)], _MARKERS[i % len(_MARKERS)])
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
                       facecolors=[color] if flag else "none", edgecolors=[_darker(color, 0.8)],
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
    data = _require_frame(frame, "frame", RUNTIME_BY_SIZE_COLUMNS)
    devices = _positive(data["devices"], "frame['devices']")
    if np.any(np.diff(devices) <= 0):
        raise DomainError(f"frame['devices'] must be strictly increasing; got {devices.tolist()}")
    interval = _positive(data["interval_min"], "frame['interval_min']")
    _positive(data["mtbf_h"], "frame['mtbf_h']")
    keys = list(RUNTIME_TERMS) + ([_UNATTRIBUTED] if _UNATTRIBUTED in data.columns else [])
    stack = _fraction_columns(data, keys, "frame")
    total = _fractions(data["total"], "frame['total']")
    cross_x = None
    if crossover_devices is not None:
        c = float(_positive(crossover_devices, "crossover_devices"))
        if not devices[0] <= c <= devices[-1]:
            raise DomainError(f"crossover_devices {c} lies outside the drawn sizes "
                              f"[{devices[0]:g}, {devices[-1]:g}]")
        cross_x = float(np.interp(np.log2(c), np.log2(devices), np.arange(devices.size)))
    if reference_loss is not None:
        reference_loss = float(_fractions(reference_loss, "reference_loss"))

    ax = _new_axes(ax, (10.0, 4.6))
    style = _term_style()
    x = np.arange(devices.size, dtype=float)
    bottoms = np.concatenate([np.zeros((stack.shape[0], 1)), np.cumsum(stack, axis=1)[:, :-1]], axis=1)
    for j, key in enumerate(keys):
        color, hatch = style[key]
        ax.bar(x, stack[:, j], bottom=bottoms[:, j], width=0.7, color=color, edgecolor=_darker(color),
               linewidth=0.6, hatch=hatch, label=_TERM_LABEL[key], gid=f"term:{key}")
    stack_top = bottoms[:, -1] + stack[:, -1]
    ax.hlines(total, x - 0.35, x + 0.35, colors="black", linewidth=1.6, zorder=4, gid="total")
    for xi, top, tot in zip(x, np.maximum(stack_top, total), total, strict=True):
        ax.annotate(_pct(tot), xy=(xi, top), xytext=(0, 3), textcoords="offset points", ha="center",
                    va="bottom", fontsize="small", gid="total-label")

    tick_x = list(x)
    tick_labels = [f"{_device_count(d)}\n{m:.0f} min" if m >= 10 else f"{_device_count(d)}\n{m:.1f} min"
                   for d, m in zip(devices, interval, strict=True)]
    top_all = float(max(np.max(stack_top), np.max(total)))
    if reference_loss is not None:
        rx = float(devices.size) + 0.3
        ax.bar([rx], [reference_loss], width=0.7, fill=False, edgecolor="black", linewidth=1.4,
               linestyle="-", label=f"{reference_label} (hollow)", gid="reference")
        ax.annotate(f"≤ {_pct(reference_loss)}", xy=(rx, reference_loss), xytext=(0, 3),
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
    data = _require_frame(levers, "levers", LEVER_COLUMNS)
    rank = _numeric(data["rank"], "levers['rank']")
    if len(np.unique(rank)) != rank.size:
        raise DomainError(f"levers['rank'] must be unique; got {rank.tolist()}")
    order = np.argsort(rank, kind="stable")
    gain = _numeric(data["relative_gain"], "levers['relative_gain']")[order]
    if np.any(gain < 0):
        raise DomainError(f"levers['relative_gain'] must be >= 0 (a ceiling bounds a gain); "
                          f"got {gain.tolist()}")
    share = _fractions(data["loss_share"], "levers['loss_share']")[order]
    current = _fractions(data["current"], "levers['current']")[order]
    ceiling = _fractions(data["ceiling"], "levers['ceiling']")[order]
    before = _fractions(data["mpg_before"], "levers['mpg_before']")[order]
    at_ceiling = _fractions(data["mpg_at_ceiling"], "levers['mpg_at_ceiling']")[order]
    factors = data["factor"].astype(str).to_numpy()[order]

    ax = _new_axes(ax, (7.5, 1.8 + 0.9 * len(factors)))
    style = _boundary_style()
    fallback = palette()
    y = np.arange(len(factors), dtype=float)
    colors = [style.get(f, (fallback[7], ""))[0] for f in factors]
    gain_bars = ax.barh(y - 0.17, gain, height=0.34, color=colors, edgecolor=[_darker(c) for c in colors],
                        linewidth=0.8, label="relative gain at ceiling (% of current MPG)")
    for bar, f in zip(gain_bars, factors, strict=True):
        bar.set_gid(f"gain:{f}")
    share_bars = ax.barh(y + 0.17, share, height=0.22, color=[mpl.colors.to_rgba(c, 0.2) for c in colors],
                         edgecolor=[_darker(c) for c in colors], linestyle="--", linewidth=1.0, hatch="..",
                         label="loss share at boundary (% of fleet capacity, contrast only)")
    for bar, f in zip(share_bars, factors, strict=True):
        bar.set_gid(f"share:{f}")
    ax.bar_label(gain_bars, labels=[f"+{_pct(g)}   MPG {b:.3f} → {a:.3f}"
                                    for g, b, a in zip(gain, before, at_ceiling, strict=True)],
                 padding=4, fontsize="small", fontweight="bold")
    ax.bar_label(share_bars, labels=[_pct(s) for s in share], padding=4, fontsize="x-small")
    ax.set_yticks(y, [f"#{i + 1} {f}\n{c:.2f} → {m:.2f}"
                      for i, (f, c, m) in enumerate(zip(factors, current, ceiling, strict=True))])
    ax.invert_yaxis()
    top = float(max(gain.max(), share.max()))
    ax.set_xlim(0.0, max(top, 0.01) * 1.9)
    ax.xaxis.set_major_formatter(_PERCENT_AXIS)
    ax.set_xlabel("relative gain (% of current MPG) · loss share (% of fleet capacity)")
    ax.grid(axis="y", visible=False)
    grey = palette()[7]
    ax.legend(handles=[
        Patch(facecolor=grey, edgecolor=_darker(grey), label="relative gain at ceiling (% of current MPG)"),
        Patch(facecolor=mpl.colors.to_rgba(grey, 0.2), edgecolor=_darker(grey), linestyle="--", hatch="..",
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
    mapping = _require_mapping(factors, "factors", keys)
    if "mpg" in mapping:
        keys.append("mpg")
    values = _fractions([mapping[k] for k in keys], "factors values")
    ax = _new_axes(ax, (7.0, 0.9 + 0.8 * len(keys)))
    style = _boundary_style()
    style["mpg"] = style["useful"]
    y = np.arange(len(keys), dtype=float)
    names = {"scheduling": ("S", "of offered capacity-time"), "runtime": ("R", "of held time"),
             "program": ("P", "of retained step time"), "mpg": ("MPG", "of offered capacity-time")}
    for yi, key, v in zip(y, keys, values, strict=True):
        color, hatch = style[key]
        ax.barh(yi, v, height=0.55, color=color, edgecolor=_darker(color), linewidth=0.8, hatch=hatch,
                gid=f"kept:{key}")
        ax.barh(yi, 1.0 - v, left=v, height=0.55, color=mpl.colors.to_rgba(color, 0.15),
                edgecolor=_darker(color), linestyle="--", linewidth=1.0, gid=f"lost:{key}")
        # Value inside the solid bar when it is wide enough, otherwise just right of it.
        inside = v >= 0.3
        ax.annotate(f"{names[key][0]} = {v:.2f}", xy=(v, yi), xytext=(-4 if inside else 4, 0),
                    textcoords="offset points", ha="right" if inside else "left", va="center",
                    color="white" if inside else _darker(color), fontweight="bold",
                    bbox={"boxstyle": "round,pad=0.15", "fc": _darker(color) if inside else "white",
                          "ec": "none"}, gid=f"value:{key}")
    ax.set_yticks(y, [f"{'MPG' if k == 'mpg' else k}\n{names[k][1]}" for k in keys], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.0)
    ax.xaxis.set_major_formatter(_PERCENT_AXIS)
    ax.set_xlabel("share of what reached the boundary (%)")
    ax.grid(axis="y", visible=False)
    return ax


# ---------------------------------------------------------------------------------------------------
# Job timeline (rung 2): attempts as a Gantt, cumulative runtime goodput, step-time distribution
# ---------------------------------------------------------------------------------------------------

#: Categories of a job timeline's labelled intervals, in legend order: the parts of held time that
#: have a place in time (:data:`fleetlib.runtime.goodput.CATEGORIES` less ``step_time_above_baseline``,
#: which lives inside steps) and ``not_held`` (the queue between attempts).
TIMELINE_CATEGORIES: tuple[str, ...] = (
    "productive", "progress_at_risk", "startup", "input_wait", "checkpoint", "recovery", "rework",
    "preemption", "evaluation", "idle", "unattributed", "not_held",
)
GANTT_COLUMNS: tuple[str, ...] = ("attempt", "start", "end", "category")
CUMULATIVE_COLUMNS: tuple[str, ...] = ("time", "cumulative_goodput")
WINDOW_COLUMNS: tuple[str, ...] = ("start", "end", "runtime_goodput")
RESTART_COLUMNS: tuple[str, ...] = ("time", "kind")
STEP_TIME_COLUMNS: tuple[str, ...] = ("duration_s",)

_TIMELINE_LABEL = {
    "productive": "productive steps",
    "progress_at_risk": "progress at risk (no commit yet)",
    "startup": "startup",
    "input_wait": "input wait",
    "checkpoint": "checkpoint",
    "recovery": "failure recovery",
    "rework": "rework (erased steps)",
    "preemption": "preemption",
    "evaluation": "evaluation",
    "idle": "idle (held, no progress)",
    "unattributed": "unattributed",
    "not_held": "not held (queue, hollow)",
}
_EVENT_STYLE_KINDS = ("failure", "preempt", "restore", "failure_detected", "release", "gang_complete")


def _timeline_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    term = _term_style()
    light = tuple(0.55 + 0.45 * v for v in mpl.colors.to_rgb(c[9]))
    return {"productive": (c[9], ""), "progress_at_risk": (light, "||"), "startup": term["startup"],
            "input_wait": term["input_wait"], "checkpoint": term["checkpoint"], "recovery": term["recovery"],
            "rework": (c[5], "--"), "preemption": term["preemption"], "evaluation": (c[8], "**"),
            "idle": (c[6], "OO"), "unattributed": term[_UNATTRIBUTED], "not_held": ("white", "")}


def _event_style(kinds: Sequence[str]) -> dict[str, tuple[Any, str, str]]:
    """Colour, marker and line style for each event kind (known kinds keep theirs across figures)."""
    c = palette()
    known = {"failure": (c[3], "X", "-"), "preempt": (c[4], "v", "--"), "restore": (c[8], "^", ":"),
             "failure_detected": (c[6], "D", "-."), "release": (c[7], "s", (0, (1, 3))),
             "gang_complete": (c[9], "o", (0, (5, 2, 1, 2)))}
    spare = [(c[i], _MARKERS[j], ls) for i, j, ls in ((5, 7, "-"), (1, 5, "--"), (0, 6, ":"), (2, 4, "-."))]
    out: dict[str, tuple[Any, str, Any]] = {}
    for kind in kinds:
        n_spare = len([k for k in out if k not in known])
        out[kind] = known[kind] if kind in known else spare[n_spare % len(spare)]
    return out


def _utc_times(values: Any, name: str) -> pd.Series:
    """Return ``values`` as UTC timestamps; naive or non-time input is refused."""
    s = pd.Series(values)
    if isinstance(s.dtype, pd.DatetimeTZDtype):
        out = s.dt.tz_convert("UTC")
    elif s.dtype == object and len(s) and all(isinstance(v, pd.Timestamp) and v.tzinfo is not None
                                              for v in s):
        out = pd.to_datetime(s, utc=True)
    else:
        raise DomainError(f"{name} must hold timezone-aware timestamps (UTC); got dtype {s.dtype}")
    if out.isna().any():
        raise DomainError(f"{name} must not hold missing times; the first is at position "
                          f"{int(np.flatnonzero(out.isna().to_numpy())[0])}")
    return out


def _hours_since(times: pd.Series, origin: pd.Timestamp) -> np.ndarray:
    return (times - origin).dt.total_seconds().to_numpy(dtype=float) / 3600.0


def _origin(origin: Any, *candidates: pd.Series) -> pd.Timestamp:
    if origin is None:
        return min(c.min() for c in candidates if len(c))
    t = pd.Timestamp(origin)
    if t.tzinfo is None:
        raise DomainError(f"origin must be timezone-aware; got {origin!r}")
    return t.tz_convert("UTC")


def _time_axis_label(origin: pd.Timestamp) -> str:
    return f"time since {origin:%Y-%m-%d %H:%M:%S} UTC (h)"


def _optional_frame(data: Any, name: str, columns: Iterable[str]) -> pd.DataFrame | None:
    """Check an optional overlay frame's columns; return None when it has no rows (nothing to mark)."""
    if isinstance(data, pd.DataFrame) and data.empty:
        missing = [c for c in columns if c not in data.columns]
        if missing:
            raise DomainError(f"{name} is missing column(s) {missing}; it has {list(data.columns)}")
        return None
    return _require_frame(data, name, columns)


def _touching_spans(x0: np.ndarray, x1: np.ndarray) -> list[tuple[float, float]]:
    """Return ``(start, width)`` spans with intervals that touch or overlap drawn as one.

    Pure geometry: a run of ten thousand adjacent steps of one category becomes one rectangle, so a
    long timeline draws (and saves as SVG) quickly.  Intervals separated by any gap stay apart.
    """
    order = np.argsort(x0, kind="stable")
    a, b = x0[order], np.maximum.accumulate(x1[order])
    new = np.concatenate([[True], a[1:] > b[:-1]])
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:] - 1, [a.size - 1]])
    return list(zip(a[first], b[last] - a[first], strict=True))


def attempt_gantt(intervals: pd.DataFrame, *, markers: pd.DataFrame | None = None, origin: Any = None,
                  ax: Axes | None = None) -> Axes:
    """Draw a job's held time as one bar per attempt, each interval coloured by its category.

    Every row of ``intervals`` is one labelled interval of the timeline (a step, or a piece of held
    time between steps, or the queue between attempts), as a measurement of the job produced it; the
    plot places them and colours them, nothing more.  Categories are told apart by colour and hatch;
    ``not_held`` time is drawn hollow with a dashed outline.

    Parameters
    ----------
    intervals
        Columns ``attempt`` (integer), ``start`` and ``end`` (timezone-aware timestamps) and
        ``category`` (one of :data:`TIMELINE_CATEGORIES`).
    markers
        Optional events to mark on their attempt's bar: columns ``attempt``, ``time`` (timezone-aware)
        and ``kind`` (e.g. ``failure``, ``preempt``, ``restore``); each kind has its own marker and
        colour.
    origin
        Time drawn as 0 h; default: the earliest ``start``.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, an unknown category, naive or missing times, an interval ending before it
        starts, or a marker on an attempt with no interval.
    """
    data = _require_frame(intervals, "intervals", GANTT_COLUMNS)
    cats = data["category"].astype(str).to_numpy()
    unknown = sorted(set(cats) - set(TIMELINE_CATEGORIES))
    if unknown:
        raise DomainError(f"intervals['category'] holds unknown categories {unknown}; expected some of "
                          f"{list(TIMELINE_CATEGORIES)}")
    start = _utc_times(data["start"], "intervals['start']")
    end = _utc_times(data["end"], "intervals['end']")
    bad = (end < start).to_numpy()
    if bad.any():
        row = data.index[int(np.argmax(bad))]
        raise DomainError(f"intervals must not end before they start (row {row!r})")
    attempts = _numeric(data["attempt"], "intervals['attempt']")
    marks = None
    if markers is not None:
        marks = _optional_frame(markers, "markers", ("attempt", "time", "kind"))
    t0 = _origin(origin, start)
    x0, x1 = _hours_since(start, t0), _hours_since(end, t0)
    rows = np.unique(attempts)
    row_of = {a: i for i, a in enumerate(rows)}
    y = np.array([row_of[a] for a in attempts], dtype=float)

    ax = _new_axes(ax, (11.0, 1.6 + 0.55 * rows.size))
    style = _timeline_style()
    height = 0.62
    present = [c for c in TIMELINE_CATEGORIES if (cats == c).any()]
    for cat in present:
        color, hatch = style[cat]
        sel_cat = cats == cat
        for r in np.unique(y[sel_cat]):
            sel = sel_cat & (y == r)
            spans = _touching_spans(x0[sel], x1[sel])
            if cat == "not_held":
                ax.broken_barh(spans, (r - height / 4, height / 2), facecolors="white",
                               edgecolors=palette()[7], linestyles="--", linewidth=1.0, gid=f"interval:{cat}")
            else:
                ax.broken_barh(spans, (r - height / 2, height), facecolors=color, edgecolors=_darker(color),
                               linewidth=0.0, hatch=hatch or None, gid=f"interval:{cat}")
    handles: list[Any] = []
    for cat in present:
        color, hatch = style[cat]
        if cat == "not_held":
            handles.append(Patch(facecolor="white", edgecolor=palette()[7], linestyle="--",
                                 label=_TIMELINE_LABEL[cat]))
        else:
            handles.append(Patch(facecolor=color, edgecolor=_darker(color), hatch=hatch or None,
                                 label=_TIMELINE_LABEL[cat]))
    if marks is not None:
        m_att = _numeric(marks["attempt"], "markers['attempt']")
        missing = sorted(set(m_att) - set(rows))
        if missing:
            raise DomainError(f"markers name attempts with no interval: {missing}")
        m_x = _hours_since(_utc_times(marks["time"], "markers['time']"), t0)
        m_kind = marks["kind"].astype(str).to_numpy()
        kinds = list(dict.fromkeys(m_kind))
        for kind, (color, marker, _ls) in _event_style(kinds).items():
            sel = m_kind == kind
            ax.plot(m_x[sel], [row_of[a] - height / 2 - 0.08 for a in m_att[sel]], linestyle="none",
                    marker=marker, markersize=8, markerfacecolor=color, markeredgecolor="black", zorder=4,
                    clip_on=False, gid=f"marker:{kind}")
            handles.append(Line2D([], [], linestyle="none", marker=marker, markersize=8,
                                  markerfacecolor=color, markeredgecolor="black",
                                  label=kind.replace("_", " ")))
    ax.set_yticks(np.arange(rows.size), [f"attempt {int(a)}" for a in rows])
    ax.set_ylim(rows.size - 0.5, -0.75)
    span = float(np.max(x1) - np.min(x0)) or 1.0
    ax.set_xlim(float(np.min(x0)) - 0.01 * span, float(np.max(x1)) + 0.01 * span)
    ax.set_xlabel(_time_axis_label(t0))
    ax.set_ylabel("allocation attempt")
    ax.grid(axis="y", visible=False)
    # below the axis label, at a distance in font sizes whatever the axes' height
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), borderaxespad=4.6, ncol=4,
              fontsize="small", frameon=False)
    return ax


def cumulative_goodput(series: pd.DataFrame, *, restarts: pd.DataFrame | None = None,
                       windows: pd.DataFrame | None = None, origin: Any = None,
                       ax: Axes | None = None) -> Axes:
    """Draw runtime goodput accumulated over a job's life, with per-window values and restart markers.

    Parameters
    ----------
    series
        Columns ``time`` (timezone-aware) and ``cumulative_goodput``: productive over held time from
        the start of the record up to ``time``, as computed by the caller (a fraction, or NaN while
        nothing was held yet).
    restarts
        Optional interruptions and restarts to mark: columns ``time`` (timezone-aware) and ``kind``;
        each kind is a vertical line with its own colour, line style and marker.
    windows
        Optional consecutive windows: columns ``start``, ``end`` (timezone-aware) and
        ``runtime_goodput`` (a fraction, or NaN / None for a window with no held time, left blank),
        drawn as a dashed horizontal segment across each window.
    origin
        Time drawn as 0 h; default: the earliest time given.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, naive or missing times, or goodput values outside [0, 1].
    """
    data = _require_frame(series, "series", CUMULATIVE_COLUMNS)
    t = _utc_times(data["time"], "series['time']")
    g = pd.to_numeric(data["cumulative_goodput"], errors="coerce").to_numpy(dtype=float)
    finite = np.isfinite(g)
    if not finite.any():
        raise DomainError("series['cumulative_goodput'] has no finite value to draw")
    _fractions(g[finite], "series['cumulative_goodput']")
    w = None
    if windows is not None:
        w = _require_frame(windows, "windows", WINDOW_COLUMNS)
        ws, we = _utc_times(w["start"], "windows['start']"), _utc_times(w["end"], "windows['end']")
        wg = pd.to_numeric(w["runtime_goodput"], errors="coerce").to_numpy(dtype=float)
        _fractions(wg[np.isfinite(wg)], "windows['runtime_goodput']")
    r = None
    if restarts is not None:
        r = _optional_frame(restarts, "restarts", RESTART_COLUMNS)
    cands = [t]
    if w is not None:
        cands.append(ws)
    if r is not None:
        cands.append(_utc_times(r["time"], "restarts['time']"))
    t0 = _origin(origin, *cands)

    ax = _new_axes(ax, (11.0, 4.2))
    c = palette()
    x = _hours_since(t, t0)
    ax.plot(x, g, color=c[0], linestyle="-", linewidth=2.0, label="cumulative, from the start (solid)",
            gid="cumulative")
    handles, _ = ax.get_legend_handles_labels()
    if w is not None:
        wx0, wx1 = _hours_since(ws, t0), _hours_since(we, t0)
        ok = np.isfinite(wg)
        ax.hlines(wg[ok], wx0[ok], wx1[ok], colors=c[2], linestyles="--", linewidth=1.6, gid="windows")
        ax.plot(0.5 * (wx0[ok] + wx1[ok]), wg[ok], linestyle="none", marker="s", markersize=4, color=c[2],
                gid="window-centres")
        handles.append(Line2D([], [], color=c[2], linestyle="--", marker="s", markersize=4,
                              label="per window (dashed, squares)"))
    if r is not None:
        rx = _hours_since(_utc_times(r["time"], "restarts['time']"), t0)
        kinds = r["kind"].astype(str).to_numpy()
        for kind, (color, marker, ls) in _event_style(list(dict.fromkeys(kinds))).items():
            sel = kinds == kind
            ax.vlines(rx[sel], 0.0, 1.0, transform=ax.get_xaxis_transform(), colors=[color],
                      linestyles=[ls], linewidth=1.1, alpha=0.9, gid=f"restart:{kind}")
            ax.plot(rx[sel], np.full(int(sel.sum()), 1.0), transform=ax.get_xaxis_transform(),
                    linestyle="none", marker=marker, markersize=7, markerfacecolor=color,
                    markeredgecolor="black", clip_on=False, zorder=4, gid=f"restart-marker:{kind}")
            handles.append(Line2D([], [], color=color, linestyle=ls, marker=marker, markersize=7,
                                  markeredgecolor="black", label=kind.replace("_", " ")))
    ax.set_ylim(0.0, 1.02)
    ax.yaxis.set_major_formatter(_PERCENT_AXIS)
    ax.set_ylabel("runtime goodput R\n(% of held time)")
    ax.set_xlabel(_time_axis_label(t0))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return ax


def step_time_distribution(steps: pd.DataFrame, *, fault_free_step_s: float,
                           warmup_threshold_s: float | None = None, hue: str | None = "phase",
                           bins: int = 60, log_x: bool = False, ax: Axes | None = None) -> Axes:
    """Draw the distribution of step wall-clock times against the fault-free step time.

    Parameters
    ----------
    steps
        Column ``duration_s`` (each executed step's wall-clock time, seconds, > 0) and, when ``hue``
        names one, a column that groups the steps (e.g. ``phase``: steady, warm-up, erased).
    fault_free_step_s
        The baseline the measurement used, seconds (> 0); a solid black line.
    warmup_threshold_s
        Optional warm-up threshold (``(1 + tolerance)`` times the baseline), seconds; a dashed line.
    hue
        Column whose groups get their own colour and hatch; None, or a column not in ``steps``, draws
        one group.
    bins
        Number of bins (>= 2), shared by every group.
    log_x
        Logarithmic duration axis (geometric bins), for logs whose first steps take many times the
        steady ones.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot; counts are on a logarithmic axis so rare slow steps show.

    Raises
    ------
    DomainError
        A missing ``duration_s`` column, durations or baselines that are not positive, or fewer than
        two bins.
    """
    data = _require_frame(steps, "steps", STEP_TIME_COLUMNS)
    dur = _positive(data["duration_s"], "steps['duration_s']")
    ff = float(_positive(fault_free_step_s, "fault_free_step_s"))
    thr = None if warmup_threshold_s is None else float(_positive(warmup_threshold_s, "warmup_threshold_s"))
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise DomainError(f"bins must be an integer >= 2; got {bins!r}")
    groups = data[hue].astype(str).to_numpy() if hue is not None and hue in data.columns else \
        np.full(dur.size, "steps", dtype=object)
    names = list(pd.Series(groups).value_counts(sort=True).index)
    lo = min(float(dur.min()), ff, thr or ff)
    hi = max(float(dur.max()), ff, thr or ff)
    if hi <= lo:
        hi = lo * 1.01
    edges = np.geomspace(lo, hi, bins + 1) if log_x else np.linspace(lo, hi, bins + 1)

    ax = _new_axes(ax, (8.0, 4.0))
    c = palette()
    linestyles = ("-", "--", ":", "-.")
    for i, name in enumerate(names):
        color, hatch = c[i % len(c)], _HATCHES[i % len(_HATCHES)]
        ax.hist(dur[groups == name], bins=edges, histtype="stepfilled",
                color=mpl.colors.to_rgba(color, 0.35), edgecolor=_darker(color), linewidth=1.4,
                linestyle=linestyles[i % len(linestyles)], hatch=hatch,
                label=f"{name} ({int((groups == name).sum()):,} steps)", gid=f"hist:{name}")
    ax.axvline(ff, color="black", linestyle="-", linewidth=1.8, label=f"fault-free step time {ff:.4g} s",
               gid="fault-free")
    if thr is not None:
        ax.axvline(thr, color="black", linestyle="--", linewidth=1.4, label=f"warm-up threshold {thr:.4g} s",
                   gid="warmup-threshold")
    if log_x:
        ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)  # a bin holding one step still shows as a bar
    ax.set_xlabel("step wall-clock time (s)" + (", log scale" if log_x else ""))
    ax.set_ylabel("steps per bin (count, log scale)")
    ax.legend(loc="upper right", fontsize="small")
    return ax


# ---------------------------------------------------------------------------------------------------
# Step traces (rung 3): partition, heat map, stragglers, collective audit, roofline, HTA comparison
# ---------------------------------------------------------------------------------------------------

#: The six parts of a step partition, in stacking order (:mod:`fleetlib.program.breakdown`).
PARTITION_PARTS: tuple[str, ...] = ("compute", "exposed_comm", "peer_wait", "exposed_memcpy",
                                    "host_dispatch", "idle")

_PART_LABEL = {
    "compute": "compute",
    "exposed_comm": "exposed comm (transfer)",
    "peer_wait": "peer wait",
    "exposed_memcpy": "exposed copy",
    "host_dispatch": "host dispatch",
    "idle": "idle",
    "non_compute": "non-compute (HTA)",
}

#: Regimes of a placed kernel (:func:`fleetlib.program.roofline.roofline_placement`).
ROOFLINE_REGIMES: tuple[str, ...] = ("near compute ceiling", "near bandwidth ceiling", "below both ceilings")


_SUPERSCRIPT = str.maketrans("-0123456789",
                             "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _pow10_label(value: float, _pos: Any = None) -> str:
    """``10`` with a superscript exponent for exact powers of ten, the plain number otherwise."""
    if value <= 0:
        return ""
    exponent = math.log10(value)
    if abs(exponent - round(exponent)) < 1e-9:
        return "10" + str(round(exponent)).translate(_SUPERSCRIPT)
    return f"{value:.3g}"


_POW10 = FuncFormatter(_pow10_label)


def _part_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    return {"compute": (c[2], ""), "exposed_comm": (c[3], "//"), "peer_wait": (c[1], "xx"),
            "exposed_memcpy": (c[4], ".."), "host_dispatch": (c[8], "\\\\"), "idle": (c[7], ""),
            "non_compute": (c[0], "++")}


def _bar_labels(data: pd.DataFrame) -> list[str]:
    ranks = _numeric(data["rank"], "partition['rank']").astype(int)
    if "step" in data.columns and pd.Series(ranks).duplicated().any():
        steps = _numeric(data["step"], "partition['step']").astype(int)
        return [f"rank {r} · step {s}" for r, s in zip(ranks, steps, strict=True)]
    return [f"rank {r}" for r in ranks]


def step_partition_bars(partition: pd.DataFrame, *, unit: str = "ms", ax: Axes | None = None) -> Axes:
    """Draw each row's step wall time as a horizontal bar stacked from the six partition parts.

    Parameters
    ----------
    partition
        Rows of :func:`fleetlib.program.breakdown.step_partition` (or sums of them per rank): ``rank``,
        the six parts of :data:`PARTITION_PARTS` and ``step_wall_us``, microseconds; ``step`` labels
        the bars when a rank has several rows.  Each row is one bar, in the order given.
    unit
        ``"ms"`` or ``"us"`` on the time axis.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot; each bar ends at its row's ``step_wall_us`` (a dot marks it).

    Raises
    ------
    DomainError
        Missing columns, a negative part, parts that do not add up to the wall time, or an unknown
        unit.
    """
    data = _require_frame(partition, "partition", ("rank", *PARTITION_PARTS, "step_wall_us"))
    scale = {"ms": 1e-3, "us": 1.0}.get(unit)
    if scale is None:
        raise DomainError(f"unit must be 'ms' or 'us'; got {unit!r}")
    parts = np.column_stack([_numeric(data[p], f"partition[{p!r}]") for p in PARTITION_PARTS])
    if (parts < 0).any():
        raise DomainError("partition parts must be >= 0")
    wall = _numeric(data["step_wall_us"], "partition['step_wall_us']")
    gap = np.abs(parts.sum(axis=1) - wall)
    if (gap > 1e-6 * np.maximum(wall, 1.0) + 1e-3).any():
        i = int(np.argmax(gap))
        raise DomainError(f"partition row {data.index[i]!r}: the parts add up to {parts[i].sum()!r} us, "
                          f"not the step wall time {wall[i]!r} us")
    labels = _bar_labels(data)
    y = np.arange(len(data))
    ax = _new_axes(ax, (10.0, 1.4 + 0.42 * len(data)))
    left = np.zeros(len(data))
    style = _part_style()
    for j, part in enumerate(PARTITION_PARTS):
        color, hatch = style[part]
        width = parts[:, j] * scale
        ax.barh(y, width, left=left, height=0.7, color=color, edgecolor=_darker(color), linewidth=0.6,
                hatch=hatch or None, label=_PART_LABEL[part], gid=f"part:{part}")
        left = left + width
    ax.plot(wall * scale, y, linestyle="none", marker="o", markersize=4, color="black", gid="step-wall",
            label="step wall time")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"time in the step ({unit})")
    ax.set_ylabel("")
    ax.grid(axis="y", visible=False)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), borderaxespad=3.2, ncol=4, fontsize="small",
              frameon=False)
    return ax


def rank_step_heatmap(table: pd.DataFrame, *, value_label: str, share: bool = False,
                      annotate: bool | None = None, ax: Axes | None = None) -> Axes:
    """Draw a rank x step table (e.g. :func:`fleetlib.program.collectives.step_heatmap_table`) as a heat map.

    Parameters
    ----------
    table
        Index: ranks; columns: steps; cells numeric, NaN where a rank has no window for a step (drawn
        as a hatched empty cell, never as zero).
    value_label
        What a cell holds, with its unit (e.g. ``"peer wait (ms)"``); the colour bar's label.
    share
        Cells are fractions of the step (drawn as percentages; they must lie in [0, 1]).
    annotate
        Write each cell's value in it; default when the table has at most 200 cells.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        A table that is not a DataFrame, has no cells or no finite cell, or negative cells (or cells
        outside [0, 1] with ``share``).
    """
    if not isinstance(table, pd.DataFrame) or table.empty:
        raise DomainError("table must be a non-empty pandas DataFrame (index ranks, columns steps)")
    try:
        vals = table.to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError) as exc:
        raise DomainError("table cells must be numeric") from exc
    finite = np.isfinite(vals)
    if not finite.any():
        raise DomainError("table has no finite cell to draw")
    if (vals[finite] < 0).any():
        raise DomainError("table cells must be >= 0")
    if share:
        _fractions(vals[finite], "table")
    ax = _new_axes(ax, (1.8 + 0.9 * vals.shape[1], 1.2 + 0.45 * vals.shape[0]))
    ax.add_patch(mpl.patches.Rectangle((-0.5, -0.5), vals.shape[1], vals.shape[0], facecolor="white",
                                       edgecolor=palette()[7], hatch="//", zorder=0, gid="missing-cells"))
    masked = np.ma.masked_invalid(vals)
    mesh = ax.imshow(masked, aspect="auto", cmap="rocket_r", interpolation="nearest",
                     vmin=0.0, vmax=1.0 if share else float(np.nanmax(vals)) or 1.0, zorder=1)
    bar = ax.figure.colorbar(mesh, ax=ax, pad=0.02)
    bar.set_label(value_label)
    if share:
        bar.formatter = _PERCENT_AXIS
        bar.update_ticks()
    if annotate is None:
        annotate = vals.size <= 200
    if annotate:
        top = float(np.nanmax(vals)) or 1.0
        for (r, c), v in np.ndenumerate(vals):
            if np.isfinite(v):
                text = f"{100 * v:.0f}%" if share else f"{v:.3g}"
                ax.text(c, r, text, ha="center", va="center", fontsize="x-small",
                        color="white" if v > 0.55 * (1.0 if share else top) else "black")
    ax.set_xticks(np.arange(vals.shape[1]), [str(c) for c in table.columns])
    ax.set_yticks(np.arange(vals.shape[0]), [str(r) for r in table.index])
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    ax.grid(False)
    return ax


_STRAGGLER_VALUES = {
    "arrived_last_share": "arrived last (% of its collectives)",
    "peer_wait_us": "own peer wait (ms, all collectives)",
    "wait_caused_us": "waits caused in others (ms)",
    "relative_score": "relative score (best rank = 1)",
}


def straggler_bars(report: pd.DataFrame, *, value: str = "arrived_last_share", threshold: float | None = None,
                   ax: Axes | None = None) -> Axes:
    """Draw one straggler measure per rank (:func:`fleetlib.program.collectives.straggler_report`).

    Ranks flagged in a ``straggler`` column are hatched and outlined in black.

    Parameters
    ----------
    report
        ``rank`` and the ``value`` column (``straggler`` optional).
    value
        ``arrived_last_share`` (fraction, drawn as %), ``peer_wait_us`` or ``wait_caused_us``
        (microseconds, drawn in ms), or ``relative_score`` (fraction).
    threshold
        Optional reference line (e.g. the straggler threshold for ``relative_score``), in the
        column's own unit.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, an unknown ``value``, negative values, or fractions outside [0, 1].
    """
    if value not in _STRAGGLER_VALUES:
        raise DomainError(f"value must be one of {list(_STRAGGLER_VALUES)}; got {value!r}")
    data = _require_frame(report, "report", ("rank", value))
    vals = _numeric(data[value], f"report[{value!r}]")
    if (vals < 0).any():
        raise DomainError(f"report[{value!r}] must be >= 0")
    fraction = value in ("arrived_last_share", "relative_score")
    if fraction:
        _fractions(vals, f"report[{value!r}]")
    shown = vals if fraction else vals / 1000.0
    flagged = (data["straggler"].fillna(False).astype(bool).to_numpy() if "straggler" in data.columns
               else np.zeros(len(data), dtype=bool))
    ranks = _numeric(data["rank"], "report['rank']").astype(int)
    ax = _new_axes(ax, (max(4.0, 0.6 * len(data) + 2.0), 3.4))
    c = palette()
    x = np.arange(len(data))
    bars = ax.bar(x, shown, color=[c[3] if f else c[0] for f in flagged],
                  edgecolor=["black" if f else _darker(c[0]) for f in flagged],
                  linewidth=[1.6 if f else 0.6 for f in flagged], gid=f"bars:{value}")
    for bar, f in zip(bars, flagged, strict=True):
        if f:
            bar.set_hatch("xx")
    if threshold is not None:
        t = float(_numeric(threshold, "threshold"))
        ax.axhline(t if fraction else t / 1000.0, color="black", linestyle="--", linewidth=1.2,
                   label=f"threshold {t:g}", gid="threshold")
    handles = [Patch(facecolor=c[0], edgecolor=_darker(c[0]), label="rank")]
    if flagged.any():
        handles.append(Patch(facecolor=c[3], edgecolor="black", hatch="xx", label="flagged straggler"))
    if threshold is not None:
        handles.append(Line2D([], [], color="black", linestyle="--", label="threshold"))
    if len(handles) > 1:  # a lone "rank" entry would say nothing
        ax.legend(handles=handles, fontsize="small", loc="best")
    ax.set_xticks(x, [str(r) for r in ranks])
    ax.set_xlabel("rank")
    ax.set_ylabel(_STRAGGLER_VALUES[value])
    if value == "arrived_last_share":
        ax.yaxis.set_major_formatter(_PERCENT_AXIS)
    if fraction:
        ax.set_ylim(0.0, 1.05)
    ax.grid(axis="x", visible=False)
    return ax


def collective_audit_bars(audit: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw one step's collective counts per rank, a bar per (collective type, group).

    Parameters
    ----------
    audit
        Rows of :func:`fleetlib.program.collectives.collective_audit` for *one* step: ``rank, group,
        collective, count``; each (rank, group, collective) once.  An ``expected`` column (from
        :func:`fleetlib.program.collectives.expected_collectives`) adds a black tick at the
        intended count.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, negative counts, or a (rank, group, collective) listed twice (several steps
        passed at once).
    """
    data = _require_frame(audit, "audit", ("rank", "group", "collective", "count"))
    if data.duplicated(["rank", "group", "collective"]).any():
        raise DomainError("audit lists a (rank, group, collective) twice; pass the rows of one step")
    count = _numeric(data["count"], "audit['count']")
    if (count < 0).any():
        raise DomainError("audit['count'] must be >= 0")
    expected = _numeric(data["expected"], "audit['expected']") if "expected" in data.columns else None
    ranks = np.unique(_numeric(data["rank"], "audit['rank']").astype(int))
    keys = list(dict.fromkeys(zip(data["collective"].astype(str), data["group"].astype(str), strict=True)))
    ax = _new_axes(ax, (max(5.0, 0.9 * ranks.size + 3.0), 3.6))
    c = palette()
    width = 0.8 / max(len(keys), 1)
    rank_pos = {r: i for i, r in enumerate(ranks)}
    r_of = _numeric(data["rank"], "audit['rank']").astype(int)
    coll = data["collective"].astype(str).to_numpy()
    grp = data["group"].astype(str).to_numpy()
    for j, (kc, kg) in enumerate(keys):
        sel = (coll == kc) & (grp == kg)
        x = np.array([rank_pos[r] for r in r_of[sel]]) - 0.4 + width * (j + 0.5)
        color = c[j % len(c)]
        ax.bar(x, count[sel], width=width * 0.95, color=color, edgecolor=_darker(color),
               hatch=_HATCHES[j % len(_HATCHES)], label=f"{kc} ({kg})", gid=f"audit:{kc}:{kg}")
        if expected is not None:
            ax.hlines(expected[sel], x - width * 0.45, x + width * 0.45, colors="black", linewidth=2.0,
                      gid=f"expected:{kc}:{kg}")
    if expected is not None:
        ax.plot([], [], color="black", linewidth=2.0, label="intended count")
    ax.set_xticks(np.arange(ranks.size), [str(r) for r in ranks])
    ax.set_xlabel("rank")
    ax.set_ylabel("collectives in the step (count)")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(axis="x", visible=False)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), title="type (group)")
    return ax


def roofline_scatter(placed: pd.DataFrame, *, peak_flops_per_s: float, peak_bytes_per_s: float,
                     peak_label: str = "", ax: Axes | None = None) -> Axes:
    """Draw placed kernels on a log-log roofline: the bandwidth slope, the compute roof and the ridge.

    Parameters
    ----------
    placed
        Output of :func:`fleetlib.program.roofline.roofline_placement`: ``intensity_flop_per_byte``,
        ``achieved_flops_per_s`` and ``regime`` (one of :data:`ROOFLINE_REGIMES`).  Rows without a
        regime (no FLOP count) are not drawn; how many there are is said in the legend title.
    peak_flops_per_s, peak_bytes_per_s
        The ceilings the kernels were placed against (> 0).
    peak_label
        Names the ceilings in the legend (device, precision, source).
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, non-positive ceilings, an unknown regime, no placed kernel, or a placed
        kernel with a non-positive intensity or rate.
    """
    data = _require_frame(placed, "placed", ("intensity_flop_per_byte", "achieved_flops_per_s", "regime"))
    peak = float(_positive(peak_flops_per_s, "peak_flops_per_s"))
    bw = float(_positive(peak_bytes_per_s, "peak_bytes_per_s"))
    regime = data["regime"].astype("string")
    drawn = data[regime.notna().to_numpy()]
    if drawn.empty:
        raise DomainError("placed has no kernel with a regime to draw")
    reg = drawn["regime"].astype(str).to_numpy()
    unknown = sorted(set(reg) - set(ROOFLINE_REGIMES))
    if unknown:
        raise DomainError(f"placed['regime'] holds unknown regimes {unknown}; "
                          f"expected {list(ROOFLINE_REGIMES)}")
    x = _positive(drawn["intensity_flop_per_byte"], "placed['intensity_flop_per_byte']")
    y = _positive(drawn["achieved_flops_per_s"], "placed['achieved_flops_per_s']")
    ridge = peak / bw
    lo = min(float(x.min()), ridge) / 4.0
    hi = max(float(x.max()), ridge) * 4.0
    ax = _new_axes(ax, (8.0, 5.0))
    grid = np.geomspace(lo, hi, 200)
    ax.plot(grid, np.minimum(peak, grid * bw), color="black", linewidth=2.0, gid="roof",
            label=f"roof {peak_label}".strip())
    ax.axvline(ridge, color="black", linestyle=":", linewidth=1.2, gid="ridge",
               label=f"ridge {ridge:.3g} FLOP/byte")
    c = palette()
    style = {"near compute ceiling": (c[2], "s"), "near bandwidth ceiling": (c[0], "o"),
             "below both ceilings": (c[3], "^")}
    for name in ROOFLINE_REGIMES:
        sel = reg == name
        if sel.any():
            color, marker = style[name]
            ax.scatter(x[sel], y[sel], s=36, color=color, marker=marker, edgecolor="black", linewidth=0.5,
                       alpha=0.85, zorder=3, label=f"{name} ({int(sel.sum())})", gid=f"kernels:{name}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()  # unlabelled minor ticks of log axes cost thousands of text measurements per draw
    for axis in (ax.xaxis, ax.yaxis):  # plain-text powers of ten: mathtext labels are slow to lay out
        axis.set_major_formatter(_POW10)
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(float(y.min()), peak) / 10.0, peak * 3.0)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, log scale)")
    ax.set_ylabel("achieved rate (FLOP/s, log scale)")
    not_drawn = len(data) - len(drawn)
    ax.legend(fontsize="small", loc="lower right",
              title=f"{len(drawn)} kernels placed; {not_drawn} without FLOPs not drawn",
              title_fontsize="small")
    return ax


def hta_comparison_bars(table: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw, per rank, HTA's temporal breakdown beside fleetlib's step partition as stacked % bars.

    Parameters
    ----------
    table
        Output of :func:`fleetlib.program.breakdown.hta_comparison_table`: ``rank, source, category,
        pct`` (``derived`` optional: derived cells get a dotted outline).  Each (rank, source) is one
        bar whose categories must add up to 100 % (within 0.5 points, the rounding of published
        figures).
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot.

    Raises
    ------
    DomainError
        Missing columns, an unknown category, negative shares, or a bar that does not add up to 100 %.
    """
    data = _require_frame(table, "table", ("rank", "source", "category", "pct"))
    pct = _numeric(data["pct"], "table['pct']")
    if (pct < -0.05).any():
        raise DomainError("table['pct'] must be >= 0")
    cats = data["category"].astype(str).to_numpy()
    order = ("compute", "non_compute", *PARTITION_PARTS[1:])
    unknown = sorted(set(cats) - set(order))
    if unknown:
        raise DomainError(f"table['category'] holds unknown categories {unknown}; "
                          f"expected some of {list(order)}")
    ranks = _numeric(data["rank"], "table['rank']").astype(int)
    sources = list(dict.fromkeys(data["source"].astype(str)))
    src = data["source"].astype(str).to_numpy()
    totals = pd.Series(pct).groupby([ranks, src]).sum()
    bad = (totals - 100.0).abs() > 0.5
    if bad.any():
        (r, s), v = next(iter(totals[bad].items()))
        raise DomainError(f"rank {r}, {s}: the categories add up to {v:.2f} %, not 100 %")
    derived = data["derived"].fillna(False).astype(bool).to_numpy() if "derived" in data.columns else \
        np.zeros(len(data), dtype=bool)
    uranks = np.unique(ranks)
    n_src = len(sources)
    width = 0.8 / n_src
    ax = _new_axes(ax, (min(16.0, max(6.0, 0.6 * uranks.size * n_src + 3.0)), 4.4))
    style = _part_style()
    seen: set[str] = set()
    for i, s in enumerate(sources):
        for r_i, r in enumerate(uranks):
            bottom = 0.0
            x = r_i - 0.4 + width * (i + 0.5)
            for cat in order:
                sel = (ranks == r) & (src == s) & (cats == cat)
                if not sel.any():
                    continue
                v = float(pct[sel].sum())
                color, hatch = style[cat]
                dotted = bool(derived[sel].any())
                ax.bar(x, v, bottom=bottom, width=width * 0.92, color=color, hatch=hatch or None,
                       edgecolor=_darker(color), linestyle=":" if dotted else "-",
                       label=_PART_LABEL[cat] if cat not in seen and not dotted else None,
                       gid=f"hta:{s}:{r}:{cat}")
                if not dotted:
                    seen.add(cat)
                bottom += v
            ax.text(x, 101.0, "ABC"[i] if i < 3 else str(i + 1), ha="center", va="bottom", fontsize="small",
                    fontweight="bold")
    ax.set_xticks(np.arange(uranks.size), [f"rank {r}" for r in uranks])
    ax.set_ylim(0.0, 108.0)
    ax.set_ylabel("share of the rank's time (%)")
    ax.grid(axis="x", visible=False)
    key = "; ".join(f"{'ABC'[i] if i < 3 else i + 1} = {s}" for i, s in enumerate(sources))
    ax.set_title(key, fontsize="small")
    handles, _labels = ax.get_legend_handles_labels()
    if derived.any():
        handles.append(Patch(facecolor="white", edgecolor="black", linestyle=":",
                             label="derived (100 - the others)"))
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax
