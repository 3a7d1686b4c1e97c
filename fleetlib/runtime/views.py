"""Derived tables of a job timeline for analysts: the partition table, cumulative and rolling goodput.

These are the tables notebook ``02_job_timeline`` shows and draws.  They reshape what
:func:`fleetlib.runtime.goodput.runtime_goodput` and
:func:`~fleetlib.runtime.goodput.runtime_goodput_windows` measured; they add no accounting rule.

* :func:`partition_table` -- a measurement's categories in seconds and as shares of held time;
* :func:`cumulative_series` -- goodput from the start of the record up to each of ``points`` instants,
  built from window pieces that add up to the whole (commits judged as of the end of the record);
* :func:`rolling_windows` -- fixed windows, each judged at its own end, one row per window.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from fleetlib.quality import DomainError
from fleetlib.runtime.goodput import RuntimeMeasurement, runtime_goodput_windows
from fleetlib.runtime.schema import CATEGORIES

__all__ = [
    "cumulative_series",
    "partition_table",
    "rolling_windows",
    "windows_gap_s",
]

def partition_table(measurement: RuntimeMeasurement) -> pd.DataFrame:
    """Return a measurement's categories in seconds and as shares of held time.

    Parameters
    ----------
    measurement
        A :class:`fleetlib.runtime.goodput.RuntimeMeasurement`.

    Returns
    -------
    pandas.DataFrame
        Indexed by category (report order), columns ``seconds`` and ``share of held``.
    """
    seconds = pd.Series(measurement.categories, dtype=float)
    held = float(measurement.held_s)
    return pd.DataFrame({"seconds": seconds, "share of held": seconds / held if held > 0 else np.nan})


def cumulative_series(steps: pd.DataFrame, events: pd.DataFrame, *, start: Any, end: Any, points: int = 240,
                      **options: Any) -> pd.DataFrame:
    """Return cumulative runtime goodput from ``start`` up to each of ``points`` evenly spaced instants.

    The record is cut into ``points`` pieces measured with commits judged as of the end of the data
    (``as_of="data_end"``), so the pieces add up exactly to the whole; the running sums of their
    productive and held seconds give the curve.

    Parameters
    ----------
    steps, events
        Canonical timeline tables.
    start, end
        Timezone-aware bounds, usually the whole measurement's ``window_start`` / ``window_end``.
    points
        Number of instants (pieces); at least 1.
    **options
        Passed to :func:`~fleetlib.runtime.goodput.runtime_goodput_windows` (``fault_free_step_s``,
        ``definition``, ``job_id``, ...).

    Returns
    -------
    pandas.DataFrame
        ``time`` (end of each piece), ``cumulative_goodput`` (productive over held so far; NaN while
        nothing is held), ``held_s`` and ``productive_s`` (running sums, seconds).
    """
    if not isinstance(points, int) or points < 1:
        raise DomainError(f"points must be an integer >= 1; got {points!r}")
    edges = list(pd.date_range(start, end, periods=points + 1))
    pieces = runtime_goodput_windows(steps, events, edges, as_of="data_end", **options)
    productive = np.cumsum([w.productive_s for w in pieces])
    held = np.cumsum([w.held_s for w in pieces])
    with np.errstate(invalid="ignore", divide="ignore"):
        goodput = productive / np.where(held > 0, held, np.nan)
    return pd.DataFrame({"time": edges[1:], "cumulative_goodput": goodput, "held_s": held,
                         "productive_s": productive})


def rolling_windows(steps: pd.DataFrame, events: pd.DataFrame, *, start: Any, end: Any,
                    window_min: float, **options: Any) -> pd.DataFrame:
    """Measure consecutive windows of ``window_min`` minutes from ``start``, each judged at its own end.

    Parameters
    ----------
    steps, events
        Canonical timeline tables.
    start, end
        Timezone-aware bounds; the last window covers ``end``.
    window_min
        Window length in minutes, > 0.
    **options
        Passed to :func:`~fleetlib.runtime.goodput.runtime_goodput_windows`.

    Returns
    -------
    pandas.DataFrame
        One row per window: ``start``, ``end``, ``runtime_goodput``, ``held_s``,
        ``progress_at_risk_s`` and one ``<category>_s`` column per category of
        :data:`~fleetlib.runtime.goodput.CATEGORIES` (seconds).
    """
    if not (isinstance(window_min, int | float) and np.isfinite(window_min) and window_min > 0):
        raise DomainError(f"window_min must be a finite number of minutes > 0; got {window_min!r}")
    size = pd.Timedelta(minutes=float(window_min))
    edges = list(pd.date_range(start, pd.Timestamp(end) + size, freq=size))
    measured = runtime_goodput_windows(steps, events, edges, **options)
    frame = pd.DataFrame({"start": edges[:-1], "end": edges[1:],
                          "runtime_goodput": [w.runtime_goodput for w in measured],
                          "held_s": [w.held_s for w in measured],
                          "progress_at_risk_s": [w.progress_at_risk_s for w in measured]})
    parts = pd.DataFrame([w.categories for w in measured], columns=list(CATEGORIES)).add_suffix("_s")
    return pd.concat([frame, parts], axis=1)


def windows_gap_s(windows: pd.DataFrame, whole: RuntimeMeasurement) -> float:
    """Return the largest difference between the windows' summed losses and the whole's, in seconds.

    Productive time and progress at risk are left out: a window judges commits at its own end, so a
    step at risk in one window may be productive in the whole.

    Parameters
    ----------
    windows
        :func:`rolling_windows`' frame.
    whole
        The measurement of the whole timeline with the same options.

    Returns
    -------
    float
        Max over loss categories of ``|sum over windows - whole|``.
    """
    losses = [c for c in CATEGORIES if c not in ("productive", "progress_at_risk")]
    summed = windows[[f"{c}_s" for c in losses]].sum().to_numpy(dtype=float)
    own = np.array([whole.categories[c] for c in losses], dtype=float)
    return float(np.abs(summed - own).max())
