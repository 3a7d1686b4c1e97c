"""Step-trace figures (rung 3).

The step partition, rank x step heat maps, stragglers, the collective audit, the roofline and the
comparison with HTA's temporal breakdown.
"""

from __future__ import annotations

from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from fleetlib.plots._style import (
    HATCHES,
    PERCENT_AXIS,
    POW10,
    darker,
    data_text,
    legend_beside,
    new_axes,
    palette,
    require_fractions,
    require_frame,
    require_numeric,
    require_positive,
)
from fleetlib.program import DIAGNOSES, FLEET_LAW_LABELS, FLEET_LAW_TERMS, PARTITION_PARTS
from fleetlib.quality import DomainError

# ---------------------------------------------------------------------------------------------------
# Step traces (rung 3): partition, heat map, stragglers, collective audit, roofline, HTA comparison
# ---------------------------------------------------------------------------------------------------

PART_LABEL = {
    "compute": "compute",
    "exposed_comm": "exposed comm (transfer)",
    "peer_wait": "peer wait",
    "exposed_memcpy": "exposed copy",
    "host_dispatch": "host dispatch",
    "idle": "idle",
    "non_compute": "non-compute (HTA)",
}

#: Regimes of a placed kernel (:func:`fleetlib.program.roofline.roofline_placement`), best first.
ROOFLINE_REGIMES: tuple[str, ...] = tuple(reversed(DIAGNOSES))


def _part_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    return {"compute": (c[2], ""), "exposed_comm": (c[3], "//"), "peer_wait": (c[1], "xx"),
            "exposed_memcpy": (c[4], ".."), "host_dispatch": (c[8], "\\\\"), "idle": (c[7], "--"),
            "non_compute": (c[0], "++")}


def _bar_labels(data: pd.DataFrame) -> list[str]:
    if "label" in data.columns:
        return [str(v) for v in data["label"]]
    ranks = require_numeric(data["rank"], "partition['rank']").astype(int)
    if "step" in data.columns and pd.Series(ranks).duplicated().any():
        steps = require_numeric(data["step"], "partition['step']").astype(int)
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
    style = _part_style()
    return _stacked_bars(partition, "partition", PARTITION_PARTS,
                         {p: (PART_LABEL[p], *style[p]) for p in PARTITION_PARTS}, unit=unit, ax=ax)


def _stacked_bars(frame: pd.DataFrame, what: str, parts_names: tuple[str, ...],
                  style: dict[str, tuple[str, Any, str]], *, unit: str, ax: Axes | None) -> Axes:
    data = require_frame(frame, what, ("rank", *parts_names, "step_wall_us"))
    scale = {"ms": 1e-3, "us": 1.0}.get(unit)
    if scale is None:
        raise DomainError(f"unit must be 'ms' or 'us'; got {unit!r}")
    parts = np.column_stack([require_numeric(data[p], f"{what}[{p!r}]") for p in parts_names])
    if (parts < 0).any():
        raise DomainError(f"{what} parts must be >= 0")
    wall = require_numeric(data["step_wall_us"], f"{what}['step_wall_us']")
    gap = np.abs(parts.sum(axis=1) - wall)
    if (gap > 1e-6 * np.maximum(wall, 1.0) + 1e-3).any():
        i = int(np.argmax(gap))
        raise DomainError(f"{what} row {data.index[i]!r}: the parts add up to {parts[i].sum()!r} us, "
                          f"not the step wall time {wall[i]!r} us")
    labels = _bar_labels(data)
    y = np.arange(len(data))
    ax = new_axes(ax, (10.0, 1.4 + 0.42 * len(data)))
    left = np.zeros(len(data))
    for j, part in enumerate(parts_names):
        label, color, hatch = style[part]
        width = parts[:, j] * scale
        ax.barh(y, width, left=left, height=0.7, color=color, edgecolor=darker(color), linewidth=0.6,
                hatch=hatch or None, label=label, gid=f"part:{part}")
        left = left + width
    ax.plot(wall * scale, y, linestyle="none", marker="o", markersize=4, color="black", gid="step-wall",
            label="step wall time")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"time in the step ({unit})")
    ax.set_ylabel("")
    ax.grid(axis="y", visible=False)
    legend_beside(ax, frameon=False)
    return ax


def fleet_law_bars(terms: pd.DataFrame, *, unit: str = "ms", ax: Axes | None = None) -> Axes:
    """Draw each row's step wall time as a horizontal bar stacked from the six Fleet Law terms.

    Parameters
    ----------
    terms
        Rows of :func:`fleetlib.program.fleet_law.fleet_law_terms` (or sums of them per rank):
        ``rank``, the terms of :data:`~fleetlib.program.FLEET_LAW_TERMS` and ``step_wall_us``,
        microseconds; ``step`` labels the bars when a rank has several rows, a ``label`` column (e.g.
        :func:`fleetlib.program.compose_fixes`) replaces the rank labels.
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
        Missing columns, a negative term, terms that do not add up to the wall time, or an unknown
        unit.
    """
    c = palette()
    colors = {"local_compute": (c[2], ""), "local_memory": (c[9], ".."), "dispatch": (c[8], "\\\\"),
              "exposed_comm": (c[3], "//"), "sync": (c[1], "xx"), "other": (c[7], "--")}
    style = {t: (FLEET_LAW_LABELS[t], *colors[t]) for t in FLEET_LAW_TERMS}
    return _stacked_bars(terms, "terms", FLEET_LAW_TERMS, style, unit=unit, ax=ax)


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
        require_fractions(vals[finite], "table")
    ax = new_axes(ax, (1.8 + 0.9 * vals.shape[1], 1.2 + 0.45 * vals.shape[0]))
    ax.add_patch(mpl.patches.Rectangle((-0.5, -0.5), vals.shape[1], vals.shape[0], facecolor="white",
                                       edgecolor=palette()[7], hatch="//", zorder=0, gid="missing-cells"))
    masked = np.ma.masked_invalid(vals)
    mesh = ax.imshow(masked, aspect="auto", cmap="rocket_r", interpolation="nearest",
                     vmin=0.0, vmax=1.0 if share else float(np.nanmax(vals)) or 1.0, zorder=1)
    bar = ax.figure.colorbar(mesh, ax=ax, pad=0.02)
    bar.set_label(value_label)
    if share:
        bar.formatter = PERCENT_AXIS
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
    ax.set_xticks(np.arange(vals.shape[1]), [data_text(c) for c in table.columns])
    ax.set_yticks(np.arange(vals.shape[0]), [data_text(r) for r in table.index])
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    ax.grid(False)
    return ax


def utilisation_heatmap(table: pd.DataFrame, *, value_label: str, share: bool = True,
                        ax: Axes | None = None) -> Axes:
    """Draw a rank x time-bin table (:func:`fleetlib.program.utilisation.utilisation_table`) as a heat map.

    Parameters
    ----------
    table
        Index: ranks; columns: bin starts in milliseconds; NaN where a bin holds no step-window time
        (drawn as a hatched empty cell, never as zero).
    value_label
        What a cell holds (e.g. ``"compute share of the bin"``); the colour bar's label.
    share
        Cells are fractions (drawn as percentages; they must lie in [0, 1]).
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes containing the plot; time runs left to right, one row per rank.

    Raises
    ------
    DomainError
        A table that is not a DataFrame, has no finite cell, or has negative cells (or cells outside
        [0, 1] with ``share``).
    """
    if not isinstance(table, pd.DataFrame) or table.empty:
        raise DomainError("table must be a non-empty pandas DataFrame (index ranks, columns bin starts)")
    try:
        vals = table.to_numpy(dtype=float, na_value=np.nan)
        starts = np.asarray(table.columns, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DomainError("table cells and bin starts must be numeric") from exc
    finite = np.isfinite(vals)
    if not finite.any():
        raise DomainError("table has no finite cell to draw")
    if (vals[finite] < 0).any():
        raise DomainError("table cells must be >= 0")
    if share:
        require_fractions(vals[finite], "table")
    width = float(starts[1] - starts[0]) if starts.size > 1 else 1.0
    ax = new_axes(ax, (10.0, 1.2 + 0.35 * vals.shape[0]))
    extent = (starts[0], starts[-1] + width, vals.shape[0] - 0.5, -0.5)
    ax.add_patch(mpl.patches.Rectangle((extent[0], -0.5), extent[1] - extent[0], vals.shape[0],
                                       facecolor="white", edgecolor=palette()[7], hatch="//", zorder=0,
                                       gid="missing-cells"))
    mesh = ax.imshow(np.ma.masked_invalid(vals), aspect="auto", cmap="rocket_r", interpolation="nearest",
                     vmin=0.0, vmax=1.0 if share else float(np.nanmax(vals)) or 1.0, extent=extent, zorder=1)
    bar = ax.figure.colorbar(mesh, ax=ax, pad=0.02)
    bar.set_label(value_label)
    if share:
        bar.formatter = PERCENT_AXIS
        bar.update_ticks()
    ax.set_yticks(np.arange(vals.shape[0]), [data_text(r) for r in table.index])
    ax.set_xlabel("time from the rank's first step (ms)")
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
    data = require_frame(report, "report", ("rank", value))
    vals = require_numeric(data[value], f"report[{value!r}]")
    if (vals < 0).any():
        raise DomainError(f"report[{value!r}] must be >= 0")
    fraction = value in ("arrived_last_share", "relative_score")
    if fraction:
        require_fractions(vals, f"report[{value!r}]")
    shown = vals if fraction else vals / 1000.0
    flagged = (data["straggler"].fillna(False).astype(bool).to_numpy() if "straggler" in data.columns
               else np.zeros(len(data), dtype=bool))
    ranks = require_numeric(data["rank"], "report['rank']").astype(int)
    ax = new_axes(ax, (max(4.0, 0.6 * len(data) + 2.0), 3.4))
    c = palette()
    x = np.arange(len(data))
    bars = ax.bar(x, shown, color=[c[3] if f else c[0] for f in flagged],
                  edgecolor=["black" if f else darker(c[0]) for f in flagged],
                  linewidth=[1.6 if f else 0.6 for f in flagged], gid=f"bars:{value}")
    for bar, f in zip(bars, flagged, strict=True):
        if f:
            bar.set_hatch("xx")
    if threshold is not None:
        t = float(require_numeric(threshold, "threshold"))
        ax.axhline(t if fraction else t / 1000.0, color="black", linestyle="--", linewidth=1.2,
                   label=f"threshold {t:g}", gid="threshold")
    handles = [Patch(facecolor=c[0], edgecolor=darker(c[0]), label="rank")]
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
        ax.yaxis.set_major_formatter(PERCENT_AXIS)
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
    data = require_frame(audit, "audit", ("rank", "group", "collective", "count"))
    if data.duplicated(["rank", "group", "collective"]).any():
        raise DomainError("audit lists a (rank, group, collective) twice; pass the rows of one step")
    count = require_numeric(data["count"], "audit['count']")
    if (count < 0).any():
        raise DomainError("audit['count'] must be >= 0")
    expected = require_numeric(data["expected"], "audit['expected']") if "expected" in data.columns else None
    ranks = np.unique(require_numeric(data["rank"], "audit['rank']").astype(int))
    keys = list(dict.fromkeys(zip(data["collective"].astype(str), data["group"].astype(str), strict=True)))
    ax = new_axes(ax, (max(5.0, 0.9 * ranks.size + 3.0), 3.6))
    c = palette()
    width = 0.8 / max(len(keys), 1)
    rank_pos = {r: i for i, r in enumerate(ranks)}
    r_of = require_numeric(data["rank"], "audit['rank']").astype(int)
    coll = data["collective"].astype(str).to_numpy()
    grp = data["group"].astype(str).to_numpy()
    for j, (kc, kg) in enumerate(keys):
        sel = (coll == kc) & (grp == kg)
        x = np.array([rank_pos[r] for r in r_of[sel]]) - 0.4 + width * (j + 0.5)
        color = c[j % len(c)]
        ax.bar(x, count[sel], width=width * 0.95, color=color, edgecolor=darker(color),
               hatch=HATCHES[j % len(HATCHES)], label=data_text(f"{kc} ({kg})"), gid=f"audit:{kc}:{kg}")
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
    data = require_frame(placed, "placed", ("intensity_flop_per_byte", "achieved_flops_per_s", "regime"))
    peak = float(require_positive(peak_flops_per_s, "peak_flops_per_s"))
    bw = float(require_positive(peak_bytes_per_s, "peak_bytes_per_s"))
    regime = data["regime"].astype("string")
    drawn = data[regime.notna().to_numpy()]
    if drawn.empty:
        raise DomainError("placed has no kernel with a regime to draw")
    reg = drawn["regime"].astype(str).to_numpy()
    unknown = sorted(set(reg) - set(ROOFLINE_REGIMES))
    if unknown:
        raise DomainError(f"placed['regime'] holds unknown regimes {unknown}; "
                          f"expected {list(ROOFLINE_REGIMES)}")
    x = require_positive(drawn["intensity_flop_per_byte"], "placed['intensity_flop_per_byte']")
    y = require_positive(drawn["achieved_flops_per_s"], "placed['achieved_flops_per_s']")
    ridge = peak / bw
    lo = min(float(x.min()), ridge) / 4.0
    hi = max(float(x.max()), ridge) * 4.0
    ax = new_axes(ax, (8.0, 5.0))
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
        axis.set_major_formatter(POW10)
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
    data = require_frame(table, "table", ("rank", "source", "category", "pct"))
    pct = require_numeric(data["pct"], "table['pct']")
    if (pct < -0.05).any():
        raise DomainError("table['pct'] must be >= 0")
    cats = data["category"].astype(str).to_numpy()
    order = ("compute", "non_compute", *PARTITION_PARTS[1:])
    unknown = sorted(set(cats) - set(order))
    if unknown:
        raise DomainError(f"table['category'] holds unknown categories {unknown}; "
                          f"expected some of {list(order)}")
    ranks = require_numeric(data["rank"], "table['rank']").astype(int)
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
    ax = new_axes(ax, (min(16.0, max(6.0, 0.6 * uranks.size * n_src + 3.0)), 4.4))
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
                       edgecolor=darker(color), linestyle=":" if dotted else "-",
                       label=PART_LABEL[cat] if cat not in seen and not dotted else None,
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
