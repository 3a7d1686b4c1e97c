"""Figures of one fleet's walk: waterfall, per-job goodput map, factors by window, kernel ranking.

Axes-level and computation-free: each takes a table from :mod:`fleetlib.fleet.views` and draws it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from fleetlib.plots._style import HATCHES, MARKERS, data_text, legend_beside, new_axes, palette, require_frame

__all__ = ["factor_series", "fleet_waterfall", "job_goodput_map", "kernel_ranking"]

_BOUNDARY_ORDER = ("scheduling", "runtime", "program")


def _boundary_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    return {"scheduling": (c[0], "//"), "runtime": (c[1], "\\\\"), "program": (c[2], "xx"), "": (c[7], "")}


def fleet_waterfall(table: pd.DataFrame, *, ax: Axes | None = None, min_share: float = 0.0) -> Axes:
    """Draw the fleet waterfall in device-hours: capacity, every loss by boundary, every surviving total.

    Parameters
    ----------
    table
        :func:`fleetlib.fleet.views.waterfall_table` (``stage``, ``kind``, ``boundary``, ``device_h``,
        ``share_of_capacity``).
    ax
        Axes to draw on (a new figure when None).
    min_share
        Losses below this share of capacity are left out of the drawing (never out of the table);
        the totals still show what they removed.

    Returns
    -------
    matplotlib.axes.Axes
        Horizontal bars, top to bottom in the walk's order; each loss floats where the previous
        total ends, coloured *and* hatched by the factor it lowers.
    """
    frame = require_frame(table, "waterfall table", ("stage", "kind", "boundary", "device_h",
                                                       "share_of_capacity"))
    keep = (frame["kind"] == "total") | (frame["share_of_capacity"] >= min_share)
    frame = frame[keep & ~((frame["kind"] == "loss") & (frame["device_h"] == 0))].reset_index(drop=True)
    ax = new_axes(ax, (8.0, 0.32 * len(frame) + 1.2))
    style = _boundary_style()
    level = 0.0
    y = np.arange(len(frame))[::-1]
    for yi, row in zip(y, frame.itertuples(index=False), strict=True):
        color, hatch = style.get(row.boundary, style[""])
        if row.kind == "total":
            level = row.device_h
            ax.barh(yi, row.device_h, color=style[""][0], edgecolor="black", linewidth=0.6)
            ax.text(row.device_h, yi, f" {row.device_h:,.1f} h ({row.share_of_capacity:.1%})", va="center",
                    fontsize=8)
        else:
            ax.barh(yi, row.device_h, left=level - row.device_h, color=color, hatch=hatch, edgecolor="black",
                    linewidth=0.4)
            level -= row.device_h
    labels = [s.split(".", 1)[-1].replace("_", " ") if k == "loss" else s.replace("_", " ").upper()
              for s, k in zip(frame["stage"], frame["kind"], strict=True)]
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("device-hours")
    ax.set_xlim(0, float(frame["device_h"].max()) * 1.25)
    present = [b for b in _BOUNDARY_ORDER if (frame["boundary"] == b).any()]
    ax.legend(handles=[Patch(facecolor=style[b][0], hatch=style[b][1], edgecolor="black", label=f"{b} loss")
                       for b in present], loc="lower right", fontsize=8)
    ax.set_title("Where the fleet's capacity went (device-hours)")
    return ax


def job_goodput_map(jobs: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw each observed job's runtime goodput against its program goodput, sized by held time.

    Parameters
    ----------
    jobs
        :func:`fleetlib.fleet.views.job_table` (``pool``, ``held_device_h``, ``runtime_goodput``,
        ``program_goodput``); jobs without both factors are not drawn.
    ax
        Axes to draw on (a new figure when None).

    Returns
    -------
    matplotlib.axes.Axes
        One marker per job: colour *and* marker shape per pool; dashed curves of equal job product
        R x P.
    """
    frame = require_frame(jobs, "job table", ("pool", "held_device_h", "runtime_goodput", "program_goodput"))
    frame = frame.dropna(subset=["runtime_goodput", "program_goodput"])
    ax = new_axes(ax, (6.0, 4.5))
    grid = np.linspace(0.01, 1.0, 200)
    for level in (0.1, 0.2, 0.4, 0.6):
        r = grid[grid >= level]
        ax.plot(r, level / r, linestyle="--", color="0.6", linewidth=0.8)
        ax.text(1.0, level, f"R x P = {level:g}", fontsize=7, color="0.4", ha="right", va="bottom")
    colors = palette()
    scale = 300.0 / max(float(frame["held_device_h"].max()), 1e-9) if len(frame) else 1.0
    for i, (pool, sub) in enumerate(frame.groupby("pool", sort=True)):
        ax.scatter(sub["runtime_goodput"], sub["program_goodput"], s=20 + scale * sub["held_device_h"],
                   color=colors[i % len(colors)], marker=MARKERS[i % len(MARKERS)], edgecolor="black",
                   linewidth=0.5, alpha=0.8, label=f"pool {data_text(pool)}", hatch=HATCHES[i % len(HATCHES)])
    ax.set_xlim(0, 1.05)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("runtime goodput R (fraction of the job's held device-time)")
    ax.set_ylabel("program goodput P (fraction of ideal rate)")
    ax.set_title("Jobs: R against P (marker area = held device-hours)")
    if len(frame):
        ax.legend(fontsize=8, loc="upper left")
    return ax


def factor_series(table: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw S, R, P and MPG window by window (a day's or a week's measured factors as lines).

    Parameters
    ----------
    table
        :func:`fleetlib.fleet.views.window_table` (``window``, ``S``, ``R``, ``P``, ``MPG``).
    ax
        Axes to draw on (a new figure when None).

    Returns
    -------
    matplotlib.axes.Axes
        One line per factor over the windows (x: each window's label), each with its own colour and
        marker; a window without a factor's denominator leaves a gap.
    """
    frame = require_frame(table, "window table", ("window", "S", "R", "P", "MPG"))
    ax = new_axes(ax, (8.0, 4.0))
    colors = palette()
    x = np.arange(len(frame))
    for i, name in enumerate(("S", "R", "P", "MPG")):
        ax.plot(x, frame[name].to_numpy(float), marker=MARKERS[i % len(MARKERS)], color=colors[i],
                linewidth=2.0 if name == "MPG" else 1.2, label=name)
    ax.set_xticks(x, [data_text(w) for w in frame["window"]], rotation=30 if len(frame) > 6 else 0,
                  fontsize=8)
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("goodput (fraction)")
    ax.set_xlabel("window (UTC)")
    legend_beside(ax, fontsize=8)
    ax.set_title("S, R, P and MPG by window")
    return ax


def kernel_ranking(table: pd.DataFrame, *, ax: Axes | None = None, label_chars: int = 48) -> Axes:
    """Draw the fleet-wide kernel ranking: each kernel's share of retained device-time, +- one standard error.

    Parameters
    ----------
    table
        :func:`fleetlib.fleet.views.kernel_table` (``name``, ``kind``, ``share``, ``standard_error``).
    ax
        Axes to draw on (a new figure when None).
    label_chars
        Kernel names longer than this are cut (with an ellipsis).

    Returns
    -------
    matplotlib.axes.Axes
        One horizontal bar per kernel, largest on top, coloured by kind, with its standard error as an
        error bar (none where it is not estimable).
    """
    frame = require_frame(table, "kernel table", ("name", "kind", "share", "standard_error"))
    ax = new_axes(ax, (8.0, max(2.5, 0.35 * len(frame) + 1.0)))
    if frame.empty:
        ax.set_title("no traced job: nothing to rank")
        return ax
    kinds = list(dict.fromkeys(frame["kind"].astype(str)))
    cycle = palette()
    colors = {k: cycle[i % len(cycle)] for i, k in enumerate(kinds)}
    y = np.arange(len(frame))[::-1]
    share = 100.0 * frame["share"].to_numpy(float)
    err = 100.0 * np.nan_to_num(frame["standard_error"].to_numpy(float), nan=0.0)
    ax.barh(y, share, xerr=err, color=[colors[k] for k in frame["kind"].astype(str)], capsize=2)
    names = [data_text(n if len(n) <= label_chars else n[: label_chars - 1] + "\u2026")
             for n in frame["name"].astype(str)]
    ax.set_yticks(y, names, fontsize=7)
    ax.set_xlabel("share of retained device-time (%), +- one standard error")
    ax.legend(handles=[Patch(color=colors[k], label=k) for k in kinds], fontsize=8, loc="lower right")
    ax.set_title("kernels and collectives, fleet-wide")
    return ax
