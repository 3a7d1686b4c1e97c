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

The figures live in one module per rung plus the accounting chapter: :mod:`fleetlib.plots.accounting`,
:mod:`fleetlib.plots.scheduling`, :mod:`fleetlib.plots.runtime`, :mod:`fleetlib.plots.program`; the
palette, hatches, markers, formatters and theme in :mod:`fleetlib.plots._style`.  Every public figure,
its column constants and the theme helpers are exported here, so ``fleetlib.plots.X`` reaches all of them.
"""
from __future__ import annotations

from fleetlib.plots._style import data_text, palette, theme, use_theme
from fleetlib.plots.accounting import (
    BOUNDARY_ORDER,
    EFFICIENCY_FRONTIER_COLUMNS,
    LEVER_COLUMNS,
    RUNTIME_BY_SIZE_COLUMNS,
    RUNTIME_TERMS,
    capacity_waterfall,
    efficiency_frontier,
    factor_chain,
    iso_goodput,
    lever_ranking,
    runtime_loss_by_size,
    runtime_terms_bar,
)
from fleetlib.plots.fleet import factor_series, fleet_waterfall, job_goodput_map, kernel_ranking
from fleetlib.plots.program import (
    PARTITION_PARTS,
    ROOFLINE_REGIMES,
    collective_audit_bars,
    fleet_law_bars,
    hta_comparison_bars,
    rank_step_heatmap,
    roofline_scatter,
    step_partition_bars,
    straggler_bars,
    utilisation_heatmap,
)
from fleetlib.plots.runtime import (
    CUMULATIVE_COLUMNS,
    GANTT_COLUMNS,
    RESTART_COLUMNS,
    RESULT_LOG_PARTS,
    STEP_TIME_COLUMNS,
    TIMELINE_CATEGORIES,
    WINDOW_COLUMNS,
    attempt_gantt,
    checkpoint_interval_bars,
    cumulative_goodput,
    device_series,
    event_chronicle,
    held_time_shares,
    model_terms_bars,
    step_series,
    step_time_distribution,
)
from fleetlib.plots.scheduling import (
    TRUTH_CATEGORIES,
    cohort_goodput_bars,
    daily_capacity_table,
    daily_series,
    goodput_by_hour,
    hour_of_day_profile,
    idle_by_hour,
    idle_views,
    injected_vs_computed,
    openb_wait_bars,
    partition_waterfall,
    pool_shares,
)

__all__ = [
    "BOUNDARY_ORDER",
    "CUMULATIVE_COLUMNS",
    "EFFICIENCY_FRONTIER_COLUMNS",
    "GANTT_COLUMNS",
    "LEVER_COLUMNS",
    "PARTITION_PARTS",
    "RESTART_COLUMNS",
    "RESULT_LOG_PARTS",
    "ROOFLINE_REGIMES",
    "RUNTIME_BY_SIZE_COLUMNS",
    "RUNTIME_TERMS",
    "STEP_TIME_COLUMNS",
    "TIMELINE_CATEGORIES",
    "TRUTH_CATEGORIES",
    "WINDOW_COLUMNS",
    "attempt_gantt",
    "capacity_waterfall",
    "checkpoint_interval_bars",
    "cohort_goodput_bars",
    "collective_audit_bars",
    "cumulative_goodput",
    "daily_capacity_table",
    "daily_series",
    "data_text",
    "device_series",
    "efficiency_frontier",
    "event_chronicle",
    "factor_chain",
    "factor_series",
    "fleet_law_bars",
    "fleet_waterfall",
    "goodput_by_hour",
    "held_time_shares",
    "hour_of_day_profile",
    "hta_comparison_bars",
    "idle_by_hour",
    "idle_views",
    "injected_vs_computed",
    "iso_goodput",
    "job_goodput_map",
    "kernel_ranking",
    "lever_ranking",
    "model_terms_bars",
    "openb_wait_bars",
    "palette",
    "partition_waterfall",
    "pool_shares",
    "rank_step_heatmap",
    "roofline_scatter",
    "runtime_loss_by_size",
    "runtime_terms_bar",
    "step_partition_bars",
    "step_series",
    "step_time_distribution",
    "straggler_bars",
    "theme",
    "use_theme",
    "utilisation_heatmap",
]
