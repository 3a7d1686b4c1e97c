"""Scheduler-record figures (rung 1), drawn from what :mod:`fleetlib.scheduling` computed.

The partition waterfall of one scheduling factor, the per-pool shares, the per-pool versus cross-pool
idle views, the demand cycle by hour of day, the daily in-service capacity and goodput, the synthetic
fleet's injected-versus-computed losses and the job-size cohorts.  Every function has the shape
``f(data, *, ax=None, ...) -> Axes``; each series is told apart by colour *and* hatch or marker.

Two small reshaping helpers (:func:`hour_of_day_profile`, :func:`daily_capacity_table`) turn the
library's time series into the frames the figures draw; they derive no accounting number (a mean over
days of the hourly factor and device-seconds over a bin's seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import PercentFormatter

from fleetlib.plots._style import (
    HATCHES,
    MARKERS,
    data_text,
    grouped_bars,
    legend_beside,
    log_headroom,
    new_axes,
    palette,
    require_frame,
    require_numeric,
)
from fleetlib.quality import DomainError

__all__ = [
    "TRUTH_CATEGORIES",
    "cohort_goodput_bars",
    "daily_capacity_table",
    "daily_series",
    "goodput_by_hour",
    "hour_of_day_profile",
    "idle_by_hour",
    "idle_views",
    "injected_vs_computed",
    "openb_wait_bars",
    "partition_waterfall",
    "pool_shares",
]

S_PER_H = 3600.0
_BAR_HATCHES = ("", *HATCHES)
_LINES = ("-", "--", ":", "-.", (0, (5, 2, 1, 2)), (0, (1, 3)))


def _label(name: str) -> str:
    return name.removesuffix("_device_s").replace("_", " ")


def _lines(ax: Axes, frame: pd.DataFrame, *, x: str, y: str, by: str) -> None:
    """One line per value of ``by``, each with its own colour, marker and line style."""
    colors = palette()
    for i, (name, rows) in enumerate(frame.groupby(by, sort=True, observed=True)):
        rows = rows.sort_values(x)
        ax.plot(rows[x], require_numeric(rows[y], f"{y} of {name}"), color=colors[i % len(colors)],
                marker=MARKERS[i % len(MARKERS)], linestyle=_LINES[i % len(_LINES)], label=data_text(name),
                markeredgecolor="black", markeredgewidth=0.5)


# ---------------------------------------------------------------------------------------------------
# The partition of one factor, and per pool
# ---------------------------------------------------------------------------------------------------


def partition_waterfall(factor: Any, *, ax: Axes | None = None) -> Axes:
    """Draw capacity, then each loss, then what complete gangs held, as shares of the denominator.

    Parameters
    ----------
    factor
        A scheduling :class:`fleetlib.accounting.Factor` (``SchedulingPartition.factor(...)``): its
        ``value``, ``losses`` and ``loss_fractions`` are drawn as they are.  An ``out_of_service`` loss
        marks the installed denominator.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    for attribute in ("value", "losses", "loss_fractions"):
        if not hasattr(factor, attribute):
            raise DomainError(f"factor must be a fleetlib Factor; it has no {attribute!r}")
    ax = new_axes(ax, (7.5, 3.8))
    c = palette()
    shares = pd.Series(factor.loss_fractions, dtype=float)
    values = require_numeric(shares.to_numpy(), "factor.loss_fractions")
    left = 1.0 - np.cumsum(values)
    rows = np.arange(1, len(values) + 1)
    ax.barh(0, 1.0, color=c[7], edgecolor="black", hatch="..", label="capacity")
    ax.barh(rows, values, left=left, color=c[3], alpha=0.6, edgecolor="black", hatch="//", label="loss")
    ax.barh(len(values) + 1, float(factor.value), color=c[0], edgecolor="black", label="held (S)")
    for y, x, share in zip(rows, left + values, values, strict=True):
        ax.annotate("0" if share == 0 else f"{-share:+.1%}", xy=(x, y), xytext=(4, 0),
                    textcoords="offset points", va="center")
    ax.annotate(f"S = {factor.value:.1%}", xy=(factor.value, len(values) + 1), xytext=(4, 0),
                textcoords="offset points", va="center", fontweight="bold")
    denominator = "installed" if "out_of_service" in factor.losses else "in-service"
    ax.set_yticks(range(len(values) + 2), [f"{denominator} capacity", *map(_label, shares.index), "held (S)"])
    ax.invert_yaxis()
    ax.set_xlim(0.0, 1.18)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel(f"share of {denominator} capacity-time (%)")
    ax.grid(axis="y", visible=False)
    return ax


def pool_shares(factors: Mapping[str, Any], *, ax: Axes | None = None) -> Axes:
    """Draw each pool's held share and losses as one stacked bar (shares of its own denominator).

    Parameters
    ----------
    factors
        Pool name -> that pool's scheduling :class:`~fleetlib.accounting.Factor`; the bars stack
        ``value`` then ``loss_fractions`` in their order.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not isinstance(factors, Mapping) or not factors:
        raise DomainError("factors must be a non-empty mapping of pool -> Factor")
    table = pd.DataFrame({pool: {"held (S)": f.value, **{_label(k): v for k, v in f.loss_fractions.items()}}
                          for pool, f in factors.items()}).T.astype(float)
    ax = new_axes(ax, (7.5, 4.2))
    c = palette()
    left = np.zeros(len(table))
    y = np.arange(len(table))
    for i, column in enumerate(table.columns):
        values = require_numeric(table[column].to_numpy(), f"share {column!r}")
        ax.barh(y, values, left=left, height=0.7, color=c[i % len(c)],
                hatch=_BAR_HATCHES[i % len(_BAR_HATCHES)], edgecolor="black", label=data_text(column))
        left += values
    ax.set_yticks(y, [data_text(p) for p in table.index])
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("share of the pool's in-service capacity-time (%)")
    ax.set_ylabel("pool")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize="small", frameon=False)
    return ax


def idle_views(table: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw, per pool, idle capacity while its own queue waited beside idle while any pool's waited.

    Parameters
    ----------
    table
        ``SchedulingPartition.table``: one row per pool with ``idle_with_queue`` and
        ``cross_pool_idle_with_queue`` in device-seconds (drawn in device-hours).
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(table, "table", ("idle_with_queue", "cross_pool_idle_with_queue"))
    ax = new_axes(ax, (8.0, 4.0))
    c = palette()
    own = data["idle_with_queue"].to_numpy(float) / S_PER_H
    anyone = data["cross_pool_idle_with_queue"].to_numpy(float) / S_PER_H
    series = {"its own queue waited (per pool)": own, "any pool's queue waited (cross-pool)": anyone}
    grouped_bars(ax, [str(p) for p in data.index], series, c[:2], ("", "//"))
    ax.legend(title="idle device-time while", fontsize="small")
    ax.set_xlabel("pool")
    ax.set_ylabel("idle capacity (device-h)")
    return ax


# ---------------------------------------------------------------------------------------------------
# Time series: the demand cycle and the daily view
# ---------------------------------------------------------------------------------------------------


def hour_of_day_profile(hourly: pd.DataFrame, *, clock: str = "UTC") -> pd.DataFrame:
    """Reshape an hourly ``goodput_timeseries`` into hour-of-day rows per pool for the demand cycle.

    Parameters
    ----------
    hourly
        :func:`fleetlib.scheduling.goodput_timeseries` at ``freq="1h"``: ``pool``, ``start``,
        ``scheduling_goodput``, ``idle_with_queue`` and ``idle_empty_queue`` (device-seconds).
    clock
        IANA zone whose hour of day the rows are keyed by.

    Returns
    -------
    pandas.DataFrame
        One row per (pool, hour): ``scheduling_goodput`` (mean over the days),
        ``idle_with_queue_h`` and ``idle_empty_queue_h`` (summed over the days, device-hours).  An
        hour with no measured capacity on any day (excluded time, or out of service) has no row.
    """
    data = require_frame(hourly, "hourly", ("pool", "start", "scheduling_goodput", "idle_with_queue",
                                             "idle_empty_queue"))
    keyed = pd.DataFrame({"pool": data["pool"].to_numpy(), "hour": data["start"].dt.tz_convert(clock).dt.hour,
                          "scheduling_goodput": data["scheduling_goodput"].astype(float),
                          "idle_with_queue_h": data["idle_with_queue"].astype(float) / S_PER_H,
                          "idle_empty_queue_h": data["idle_empty_queue"].astype(float) / S_PER_H})
    grouped = keyed.groupby(["pool", "hour"], observed=True, sort=True)
    out = grouped[["idle_with_queue_h", "idle_empty_queue_h"]].sum()
    out.insert(0, "scheduling_goodput", grouped["scheduling_goodput"].mean())
    # an hour with no measured capacity on any day (left out of the window, or out of service) has
    # no S: it has no row, and the line has a gap there
    out = out[out["scheduling_goodput"].notna()]
    out.attrs["clock"] = clock
    return out.reset_index()


def goodput_by_hour(profile: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw scheduling goodput by hour of day, one line (colour, marker, dash) per pool.

    Parameters
    ----------
    profile
        :func:`hour_of_day_profile`'s frame (``pool``, ``hour``, ``scheduling_goodput``).
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(profile, "profile", ("pool", "hour", "scheduling_goodput"))
    ax = new_axes(ax, (7.0, 4.2))
    _lines(ax, data, x="hour", y="scheduling_goodput", by="pool")
    ax.set_ylabel("scheduling goodput S\n(fraction, mean over days)")
    ax.set_xlabel(f"hour of day ({profile.attrs.get('clock', 'UTC')})")
    ax.legend(title="pool", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return ax


def idle_by_hour(profile: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw idle capacity by hour of day, all pools together: while jobs queued and with the queue empty.

    Parameters
    ----------
    profile
        :func:`hour_of_day_profile`'s frame (``hour``, ``idle_with_queue_h``, ``idle_empty_queue_h``).
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(profile, "profile", ("hour", "idle_with_queue_h", "idle_empty_queue_h"))
    totals = data.groupby("hour", sort=True)[["idle_with_queue_h", "idle_empty_queue_h"]].sum()
    names = {"idle_with_queue_h": "while jobs queued", "idle_empty_queue_h": "queue empty"}
    long = totals.rename(columns=names)
    long = long.reset_index().melt(id_vars="hour", var_name="idle", value_name="device_h")
    long["idle"] = pd.Categorical(long["idle"], ["while jobs queued", "queue empty"])
    ax = new_axes(ax, (7.0, 4.2))
    _lines(ax, long, x="hour", y="device_h", by="idle")
    ax.set_ylabel("idle capacity\n(device-h, all pools and days)")
    ax.set_xlabel(f"hour of day ({profile.attrs.get('clock', 'UTC')})")
    ax.legend(title="idle", fontsize="small")
    return ax


def daily_capacity_table(daily: pd.DataFrame) -> pd.DataFrame:
    """Add the mean in-service device count per bin to a daily ``goodput_timeseries``.

    Parameters
    ----------
    daily
        :func:`fleetlib.scheduling.goodput_timeseries` at ``freq="1D"`` (``start``, ``end``,
        ``capacity_device_s``, ``scheduling_goodput``).

    Returns
    -------
    pandas.DataFrame
        ``daily`` with ``devices_in_service`` (capacity device-seconds over the bin's seconds) and
        ``scheduling_goodput`` as float.
    """
    data = require_frame(daily, "daily", ("start", "end", "capacity_device_s", "scheduling_goodput"))
    seconds = (data["end"] - data["start"]).dt.total_seconds()
    return data.assign(devices_in_service=data["capacity_device_s"] / seconds,
                       scheduling_goodput=data["scheduling_goodput"].astype(float))


_DAILY_LABEL = {"devices_in_service": "in-service devices (mean per UTC day)",
                "scheduling_goodput": "scheduling goodput S (fraction, per UTC day)"}


#: Least margin either side of the days drawn (half a day: one day alone still reads as a day).
_DAY_MARGIN = pd.Timedelta(hours=12)


def _span_the_days(ax: Axes, starts: pd.Series) -> None:
    """Set the x axis to the days drawn plus a margin (matplotlib widens one date alone to four years)."""
    days = pd.to_datetime(starts).dropna()
    if days.empty:
        return
    first, last = days.min(), days.max()
    margin = max((last - first) * 0.03, _DAY_MARGIN)
    ax.set_xlim(first - margin, last + margin)


def daily_series(daily: pd.DataFrame, *, column: str = "scheduling_goodput", legend: bool = True,
                 ax: Axes | None = None) -> Axes:
    """Draw one daily column per pool (colour, marker and dash per pool) against the UTC day.

    Parameters
    ----------
    daily
        :func:`daily_capacity_table`'s frame (``pool``, ``start`` and ``column``).
    column
        ``"scheduling_goodput"`` (fraction) or ``"devices_in_service"`` (devices).
    legend
        Draw the pool legend beside the axes.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
        The x axis spans the days drawn (half a day's margin at least), never a record's nominal range.
    """
    if column not in _DAILY_LABEL:
        raise DomainError(f"column must be one of {sorted(_DAILY_LABEL)}; got {column!r}")
    data = require_frame(daily, "daily", ("pool", "start", column))
    ax = new_axes(ax, (7.0, 4.0))
    _lines(ax, data, x="start", y=column, by="pool")
    _span_the_days(ax, data["start"])
    ax.set_ylabel(_DAILY_LABEL[column])
    ax.set_xlabel("day (UTC)")
    ax.tick_params(axis="x", labelrotation=30)
    if legend:
        ax.legend(title="pool", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return ax


# ---------------------------------------------------------------------------------------------------
# Synthetic truth and cohorts
# ---------------------------------------------------------------------------------------------------

#: The loss categories the synthetic-truth figure compares, in drawing order.
TRUTH_CATEGORIES: tuple[str, ...] = ("partial_gang_hold", "reservation", "idle_with_queue",
                                     "idle_empty_queue", "cross_pool_idle_with_queue",
                                     "out_of_service_device_s", "unattributed")


def injected_vs_computed(side_by_side: pd.DataFrame, *, categories: Sequence[str] = TRUTH_CATEGORIES,
                         ax: Axes | None = None) -> Axes:
    """Draw injected beside computed device-hours per loss category (symmetric log axis).

    Parameters
    ----------
    side_by_side
        Indexed by category with ``injected`` and ``computed`` columns in device-seconds.
    categories
        Rows to draw, in order.
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(side_by_side, "side_by_side", ("injected", "computed"))
    missing = [k for k in categories if k not in data.index]
    if missing:
        raise DomainError(f"side_by_side has no row(s) {missing}")
    rows = data.loc[list(categories)]
    c = palette()
    ax = new_axes(ax, (8.0, 4.2))
    series = {name: require_numeric(rows[name].to_numpy(), f"side_by_side[{name!r}]") / S_PER_H
              for name in ("injected", "computed")}
    grouped_bars(ax, [_label(k) for k in categories], series, (c[7], c[0]), ("..", ""), horizontal=True)
    ax.set_xscale("symlog", linthresh=10.0)
    ax.legend(title="loss", fontsize="small")
    ax.set_xlabel("device-h (symmetric log scale)")
    return ax


def openb_wait_bars(waits: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw the median and 90th-percentile queue wait per pod-size cohort (symmetric log axis).

    Parameters
    ----------
    waits
        :func:`fleetlib.scheduling.readers.openb_cohorts`' frame: ``cohort``, ``wait_p50_s``,
        ``wait_p90_s`` (seconds).
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(waits, "waits", ("cohort", "wait_p50_s", "wait_p90_s"))
    c = palette()
    ax = new_axes(ax, (7.0, 4.2))
    series = {"median": require_numeric(data["wait_p50_s"].to_numpy(), "waits['wait_p50_s']"),
              "90th percentile": require_numeric(data["wait_p90_s"].to_numpy(), "waits['wait_p90_s']")}
    grouped_bars(ax, [str(k) for k in data["cohort"]], series, c[4:6], ("", "//"))
    ax.set_yscale("symlog", linthresh=1.0)
    log_headroom(ax, np.concatenate(list(series.values())))
    ax.set_ylabel("wait, creation to scheduling\n(s, symmetric log)")
    ax.set_xlabel("pod size cohort (openb)")
    ax.tick_params(axis="x", labelrotation=20)
    legend_beside(ax, title="statistic")
    return ax


def cohort_goodput_bars(cohorts: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw goodput by job-size cohort in its two readings: job-centric and pool-centric.

    Parameters
    ----------
    cohorts
        :func:`fleetlib.scheduling.cohort_goodput`'s frame: ``cohort``, ``job_scheduling_goodput``
        (held over asked-for device-time) and ``capacity_share`` (share of in-service capacity).
    ax
        Axes to draw into; a new figure when omitted.

    Returns
    -------
    matplotlib.axes.Axes
    """
    data = require_frame(cohorts, "cohorts", ("cohort", "job_scheduling_goodput", "capacity_share"))
    c = palette()
    ax = new_axes(ax, (7.0, 4.2))
    series = {"job-centric: held / asked for": require_numeric(data["job_scheduling_goodput"].astype(float),
                                                        "cohorts['job_scheduling_goodput']"),
              "pool-centric: share of capacity": require_numeric(data["capacity_share"].astype(float),
                                                          "cohorts['capacity_share']")}
    grouped_bars(ax, [str(k) for k in data["cohort"]], series, c[0:2], ("", "//"))
    ax.set_ylabel("fraction")
    ax.set_ylim(0.0, 1.3)
    ax.set_xlabel("job size cohort (devices, synthetic fleet)")
    ax.tick_params(axis="x", labelrotation=20)
    legend_beside(ax, title="reading")
    return ax
