"""Job-timeline figures (rung 2).

Attempts as a Gantt chart, cumulative runtime goodput with restart markers and rolling windows, the
step-time distribution around the fault-free baseline, and a job's step series with its regimes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from fleetlib.plots._style import (
    HATCHES,
    MARKERS,
    PERCENT_AXIS,
    UNATTRIBUTED,
    darker,
    data_text,
    grouped_bars,
    new_axes,
    palette,
    require_fractions,
    require_frame,
    require_numeric,
    require_positive,
    term_style,
)
from fleetlib.quality import DomainError
from fleetlib.runtime import DEVICE_SERIES_COLUMNS, STEP_SERIES_COLUMNS, TERM_LABELS

# ---------------------------------------------------------------------------------------------------
# Job timeline (rung 2): attempts as a Gantt, cumulative runtime goodput, step-time distribution
# ---------------------------------------------------------------------------------------------------

#: Categories of a job timeline's labelled intervals, in legend order: the parts of held time that
#: have a place in time (:data:`fleetlib.runtime.goodput.CATEGORIES` less ``step_time_above_baseline``,
#: which lives inside steps) and ``not_held`` (the queue between attempts).
TIMELINE_CATEGORIES: tuple[str, ...] = (
    "productive", "progress_at_risk", "startup", "input_wait", "checkpoint", "recovery", "rework",
    "preemption", "elastic_wait", "elastic_reinit", "evaluation", "idle", "unattributed", "not_held",
)
GANTT_COLUMNS: tuple[str, ...] = ("attempt", "start", "end", "category")
CUMULATIVE_COLUMNS: tuple[str, ...] = ("time", "cumulative_goodput")
WINDOW_COLUMNS: tuple[str, ...] = ("start", "end", "runtime_goodput")
RESTART_COLUMNS: tuple[str, ...] = ("time", "kind")
STEP_TIME_COLUMNS: tuple[str, ...] = ("duration_s",)

#: Timeline categories, labelled as the runtime rung names its terms (one vocabulary), plus the
#: time a Gantt chart shows outside held time.
_TIMELINE_LABEL = {**TERM_LABELS, "not_held": "not held (queue, hollow)"}
_EVENT_STYLE_KINDS = ("failure", "preempt", "restore", "failure_detected", "release", "gang_complete")


def _timeline_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    term = term_style()
    light = tuple(0.55 + 0.45 * v for v in mpl.colors.to_rgb(c[9]))
    return {"productive": (c[9], ""), "progress_at_risk": (light, "||"), "startup": term["startup"],
            "input_wait": term["input_wait"], "checkpoint": term["checkpoint"], "recovery": term["recovery"],
            "rework": (c[5], "--"), "preemption": term["preemption"], "elastic_wait": (darker(c[8]), "x"),
            "elastic_reinit": (darker(c[4]), "+"), "evaluation": (c[8], "**"),
            "idle": (c[6], "OO"), "unattributed": term[UNATTRIBUTED], "not_held": ("white", "")}


def _event_style(kinds: Sequence[str]) -> dict[str, tuple[Any, str, str]]:
    """Colour, marker and line style for each event kind (known kinds keep theirs across figures)."""
    c = palette()
    known = {"failure": (c[3], "X", "-"), "preempt": (c[4], "v", "--"), "restore": (c[8], "^", ":"),
             "failure_detected": (c[6], "D", "-."), "release": (c[7], "s", (0, (1, 3))),
             "gang_complete": (c[9], "o", (0, (5, 2, 1, 2)))}
    spare = [(c[i], MARKERS[j], ls) for i, j, ls in ((5, 7, "-"), (1, 5, "--"), (0, 6, ":"), (2, 4, "-."))]
    spare += [(c[i], m, ls) for i, m, ls in ((7, "p", (0, (3, 1))), (9, "*", (0, (1, 1))), (3, "<", "--"),
                                              (6, ">", ":"))]
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
    return require_frame(data, name, columns)


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
    data = require_frame(intervals, "intervals", GANTT_COLUMNS)
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
    attempts = require_numeric(data["attempt"], "intervals['attempt']")
    marks = None
    if markers is not None:
        marks = _optional_frame(markers, "markers", ("attempt", "time", "kind"))
    t0 = _origin(origin, start)
    x0, x1 = _hours_since(start, t0), _hours_since(end, t0)
    rows = np.unique(attempts)
    row_of = {a: i for i, a in enumerate(rows)}
    y = np.array([row_of[a] for a in attempts], dtype=float)

    ax = new_axes(ax, (11.0, 1.6 + 0.55 * rows.size))
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
                ax.broken_barh(spans, (r - height / 2, height), facecolors=color, edgecolors=darker(color),
                               linewidth=0.0, hatch=hatch or None, gid=f"interval:{cat}")
    handles: list[Any] = []
    for cat in present:
        color, hatch = style[cat]
        if cat == "not_held":
            handles.append(Patch(facecolor="white", edgecolor=palette()[7], linestyle="--",
                                 label=_TIMELINE_LABEL[cat]))
        else:
            handles.append(Patch(facecolor=color, edgecolor=darker(color), hatch=hatch or None,
                                 label=_TIMELINE_LABEL[cat]))
    if marks is not None:
        m_att = require_numeric(marks["attempt"], "markers['attempt']")
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
    data = require_frame(series, "series", CUMULATIVE_COLUMNS)
    t = _utc_times(data["time"], "series['time']")
    g = pd.to_numeric(data["cumulative_goodput"], errors="coerce").to_numpy(dtype=float)
    finite = np.isfinite(g)
    if not finite.any():
        raise DomainError("series['cumulative_goodput'] has no finite value to draw")
    require_fractions(g[finite], "series['cumulative_goodput']")
    w = None
    if windows is not None:
        w = require_frame(windows, "windows", WINDOW_COLUMNS)
        ws, we = _utc_times(w["start"], "windows['start']"), _utc_times(w["end"], "windows['end']")
        wg = pd.to_numeric(w["runtime_goodput"], errors="coerce").to_numpy(dtype=float)
        require_fractions(wg[np.isfinite(wg)], "windows['runtime_goodput']")
    r = None
    if restarts is not None:
        r = _optional_frame(restarts, "restarts", RESTART_COLUMNS)
    cands = [t]
    if w is not None:
        cands.append(ws)
    if r is not None:
        cands.append(_utc_times(r["time"], "restarts['time']"))
    t0 = _origin(origin, *cands)

    ax = new_axes(ax, (11.0, 4.2))
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
    ax.yaxis.set_major_formatter(PERCENT_AXIS)
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
    data = require_frame(steps, "steps", STEP_TIME_COLUMNS)
    dur = require_positive(data["duration_s"], "steps['duration_s']")
    ff = float(require_positive(fault_free_step_s, "fault_free_step_s"))
    thr = (None if warmup_threshold_s is None
           else float(require_positive(warmup_threshold_s, "warmup_threshold_s")))
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

    ax = new_axes(ax, (8.0, 4.0))
    c = palette()
    linestyles = ("-", "--", ":", "-.")
    for i, name in enumerate(names):
        color, hatch = c[i % len(c)], HATCHES[i % len(HATCHES)]
        ax.hist(dur[groups == name], bins=edges, histtype="stepfilled",
                color=mpl.colors.to_rgba(color, 0.35), edgecolor=darker(color), linewidth=1.4,
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


def step_series(series: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw one job's step series along its steps, with each regime's level and the healthy one.

    Parameters
    ----------
    series
        :meth:`fleetlib.runtime.RuntimeMeasurement.step_series` of one job: columns ``step``,
        ``compute_s``, ``regime``, ``level_s`` and ``healthy``
        (:data:`fleetlib.runtime.STEP_SERIES_COLUMNS`).
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        Compute time per step as points; each regime's level as a line over its steps (solid and
        thick for the healthy regime -- the fault-free step time -- dashed for the others); a
        vertical dotted line where each regime after the first begins (a change point).

    Raises
    ------
    DomainError
        A missing column, no rows, more than one job, or compute times that are not numbers.
    """
    data = require_frame(series, "series", STEP_SERIES_COLUMNS)
    jobs = data["job_id"].to_numpy()
    if (jobs != jobs[0]).any():
        raise DomainError("series holds several jobs; draw one job's step series per axes")
    step = require_numeric(data["step"], "series['step']")
    compute = require_numeric(data["compute_s"], "series['compute_s']")
    regime = data["regime"].to_numpy()
    ax = new_axes(ax, (9.0, 3.8))
    c = palette()
    ax.plot(step, compute, linestyle="none", marker=".", markersize=3, color=c[0], alpha=0.6,
            label="step compute time (wall less input wait)", gid="steps")
    bounds = np.flatnonzero(np.r_[True, regime[1:] != regime[:-1], True])
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        level = float(data["level_s"].iloc[lo])
        healthy = bool(data["healthy"].iloc[lo])
        x0, x1 = float(step[lo]), float(step[hi - 1])
        label = (f"healthy regime: fault-free step time {level:.4g} s" if healthy
                 else f"regime {int(regime[lo])}: {level:.4g} s")
        ax.hlines(level, x0, x1, colors="black" if healthy else c[1], linewidth=2.6 if healthy else 1.8,
                  linestyles="-" if healthy else "--", label=label, gid=f"regime:{int(regime[lo])}")
        if i:
            ax.axvline(x0, color="grey", linestyle=":", linewidth=1.2, gid=f"change:{int(step[lo])}")
    ax.set_xlabel("step (number)")
    ax.set_ylabel("compute time per step (s)")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def device_series(series: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw one elastic job's device counts over time: devices held, devices stepping, the most held.

    Parameters
    ----------
    series
        :attr:`fleetlib.runtime.RuntimeMeasurement.device_series` of one job: columns ``time``,
        ``devices_held``, ``devices_stepping`` and ``devices_total``
        (:data:`fleetlib.runtime.DEVICE_SERIES_COLUMNS`); each row holds until the next.
    ax
        Axes to draw into; a new figure is made when None.

    Returns
    -------
    matplotlib.axes.Axes
        Step lines of the devices held (solid) and stepping (filled below: zero while the job
        waits or re-initialises after a resize) and the most devices held (dotted), against hours since
        the series' first row.

    Raises
    ------
    DomainError
        A missing column, no rows, more than one job, or counts that are not numbers.
    """
    data = require_frame(series, "series", DEVICE_SERIES_COLUMNS)
    jobs = data["job_id"].to_numpy()
    if (jobs != jobs[0]).any():
        raise DomainError("series holds several jobs; draw one job's device counts per axes")
    times = _utc_times(data["time"], "series['time']")
    origin = times.iloc[0]
    hours = _hours_since(times, origin)
    held = require_numeric(data["devices_held"], "series['devices_held']")
    stepping = require_numeric(data["devices_stepping"], "series['devices_stepping']")
    total = require_numeric(data["devices_total"], "series['devices_total']")
    ax = new_axes(ax, (9.0, 3.2))
    c = palette()
    ax.fill_between(hours, stepping, step="post", color=c[0], alpha=0.35, linewidth=0,
                    label="devices stepping", gid="stepping")
    ax.step(hours, held, where="post", color=c[1], linewidth=2.0, label="devices held", gid="held")
    ax.step(hours, total, where="post", color="grey", linestyle=":", linewidth=1.2,
            label="most devices held", gid="total")
    ax.set_xlabel(_time_axis_label(origin))
    ax.set_ylabel("devices")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower left", fontsize="small")
    return ax


# ---------------------------------------------------------------------------------------------------
# Measured versus modelled, a chronicle of events, held time of result logs
# ---------------------------------------------------------------------------------------------------


def model_terms_bars(terms: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw equation 4's terms, measured beside modelled, as shares of held time.

    Parameters
    ----------
    terms
        Indexed by term, with ``measured`` and ``modelled`` shares of held time (fractions), e.g.
        ``compare_measurement(m).frame().loc[list(EQ4_TERMS), ["measured", "modelled"]]``.  A term
        the model has no value for (NaN) draws no modelled bar.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(terms, "terms", ("measured", "modelled"))
    c = palette()
    ax = new_axes(ax, (8.0, 4.2))
    series = {"measured": data["measured"].to_numpy(dtype=float),
              "modelled": data["modelled"].to_numpy(dtype=float)}
    grouped_bars(ax, [str(k).replace("_", " ") for k in data.index], series, (c[0], c[7]), ("", ".."),
                  horizontal=True)
    ax.xaxis.set_major_formatter(PERCENT_AXIS)
    ax.set_xlabel("share of held time (%)")
    ax.legend(title="runtime loss", fontsize="small")
    return ax


def checkpoint_interval_bars(intervals_min: pd.Series, *, ax: Axes | None = None) -> Axes:
    """Draw the checkpoint interval in use beside the optima (Young, Daly), in minutes.

    Parameters
    ----------
    intervals_min
        Interval name -> minutes (NaN for one that could not be computed; it is left out).
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    shown = pd.Series(intervals_min, dtype=float).dropna()
    if shown.empty:
        raise DomainError("intervals_min has no finite interval; nothing to draw")
    values = require_positive(shown.to_numpy(), "intervals_min")
    c = palette()
    ax = new_axes(ax, (6.0, 3.2))
    colors = [c[i] for i in (2, 4, 5, 6, 8, 9)]
    hatches = ("", "//", "\\\\", "xx", "..", "++")
    bars = ax.barh(range(len(values)), values, color=[colors[i % len(colors)] for i in range(len(values))],
                   hatch=None, edgecolor="black")
    for bar, i in zip(bars, range(len(values)), strict=True):
        bar.set_hatch(hatches[i % len(hatches)])
    ax.bar_label(bars, labels=[f"{v:.1f}" for v in values], padding=3, fontsize="small")
    ax.set_yticks(range(len(values)), [str(k).replace("_", " ") for k in shown.index])
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.15 * float(values.max()))
    ax.set_xlabel("checkpoint interval (min)")
    return ax


def event_chronicle(events: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw a chronicle of events: one row per kind, colour and marker per kind, lost work beside it.

    Parameters
    ----------
    events
        Canonical events with ``time`` (UTC) and ``kind``; an optional ``lost_work_s`` column
        (seconds of training a failure cost) is written beside its marker in hours.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(events, "events", ("time", "kind"))
    times = _utc_times(data["time"], "events['time']")
    kinds = list(dict.fromkeys(data["kind"].astype(str)))
    style = _event_style(kinds)
    ax = new_axes(ax, (11.0, 4.2))
    kind_of = data["kind"].astype(str).to_numpy()
    for y, kind in enumerate(kinds):
        color, marker, _line = style[kind]
        at = kind_of == kind
        ax.scatter(times[at].dt.tz_localize(None), np.full(int(at.sum()), y), s=90, color=color,
                   marker=marker, edgecolor="black", linewidth=0.6, label=kind, zorder=3)
    if "lost_work_s" in data.columns:
        lost = pd.to_numeric(data["lost_work_s"], errors="coerce").to_numpy(dtype=float)
        rows = np.array([kinds.index(k) for k in kind_of])
        for t, y, seconds in zip(times[np.isfinite(lost)], rows[np.isfinite(lost)], lost[np.isfinite(lost)],
                                 strict=True):
            ax.annotate(f"{round(seconds / 3600.0, 1):g} h", xy=(t.tz_localize(None), y), xytext=(7, 0),
                        textcoords="offset points", ha="left", va="center", fontsize="small",
                        fontweight="bold")
    ax.set_yticks(range(len(kinds)), kinds)
    ax.set_ylim(len(kinds) - 0.5, -0.5)
    ax.set_xlabel("date (UTC)")
    ax.set_ylabel("event kind (colour and marker)")
    ax.tick_params(axis="x", labelrotation=20)
    return ax


#: Parts of an MLPerf result log's held time, drawn in this order, with their labels.
RESULT_LOG_PARTS: dict[str, str] = {"startup_s": "startup (init)",
                                    "productive_s": "productive (training blocks)",
                                    "evaluation_s": "evaluation", "unattributed_s": "unattributed"}


def held_time_shares(summary: pd.DataFrame, *, label: str = "platform", ax: Axes | None = None) -> Axes:
    """Draw each run's held time split into startup, training blocks, evaluation and unattributed.

    Parameters
    ----------
    summary
        :func:`fleetlib.runtime.commands.mlperf_summary_table`'s frame: ``held_s`` and the seconds of
        :data:`RESULT_LOG_PARTS`, one row per run; each bar is drawn as shares of its ``held_s``.
    label
        Column that names each bar.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(summary, "summary", (label, "held_s", *RESULT_LOG_PARTS))
    held = require_positive(data["held_s"].to_numpy(), "summary['held_s']")
    c = palette()
    styles = {"startup_s": (c[4], ".."), "productive_s": (c[9], ""), "evaluation_s": (c[8], "**"),
              "unattributed_s": (c[7], "oo")}
    ax = new_axes(ax, (10.0, 1.6 + 0.6 * len(data)))
    y = np.arange(len(data))
    left = np.zeros(len(data))
    for part, name in RESULT_LOG_PARTS.items():
        share = require_numeric(data[part].to_numpy(), f"summary[{part!r}]") / held
        color, hatch = styles[part]
        ax.barh(y, share, left=left, height=0.6, color=color, hatch=hatch, edgecolor="black", label=name)
        left += share
    for i, (h, s) in enumerate(zip(held, data["startup_s"].to_numpy(dtype=float), strict=True)):
        ax.annotate(f"held {h:,.0f} s\ninit {s:,.0f} s", xy=(1.0, i), xytext=(8, 0),
                    textcoords="offset points", va="center", fontsize="small", annotation_clip=False)
    ax.set_yticks(y, [data_text(v) for v in data[label]])
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(PERCENT_AXIS)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("share of held time, init_start → run_stop (%)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), borderaxespad=4.6, ncol=4, fontsize="small",
              frameon=False)
    return ax
