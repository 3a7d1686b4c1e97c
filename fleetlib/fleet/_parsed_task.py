"""The fleet timeline task of a clean canonical Parquet file, measured from the reader's arrays.

:func:`fleetlib.fleet.engine._measure_timeline_file` reads a file, keeps the jobs the scheduler held
and measures them.  For the common partition -- a file the canonical reader's fast path takes, with
steps and events, no cross check to make, no job id the manifest's job map renames and every job
held -- :func:`measure_parsed` returns the same result from the reader's checked arrays
(:func:`fleetlib.runtime._handoff.tables_from_parsed`), building no pandas frame of the rows.
Anything else returns None: the task reads the frames as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from fleetlib.accounting import Window
from fleetlib.runtime._handoff import can_hand_off, events_job_ids, steps_job_ids

__all__ = ["measure_parsed"]


def measure_parsed(parsed: Any, job_map: Mapping[str, str], held: pd.DataFrame,
                   window: Window) -> dict[str, Any] | None:
    """Return ``_measure_timeline_file``'s result of a parsed read, or None where the frames are needed.

    Parameters
    ----------
    parsed
        :func:`~fleetlib.runtime.readers._parquet_fast.read_parsed`'s result for the file.
    job_map, held, window
        As for :func:`fleetlib.fleet.engine._measure_timeline_file`.

    Returns
    -------
    dict or None
        The task's result (the same values as from the frames), or None: read the frames.
    """
    from fleetlib.fleet.measure import _runtime_per_job
    from fleetlib.runtime.readers._common import close_books

    if not can_hand_off(parsed):
        return None
    steps_jobs, events_jobs = steps_job_ids(parsed.s), events_job_ids(parsed.e)
    if job_map and any(j in job_map for j in (*parsed.s["values"], *events_jobs)):
        return None  # ids the map renames: the frames' path maps them
    in_file = sorted(set(steps_jobs) | set(events_jobs))
    index = held.index
    if not all(j in index for j in in_file):
        return None  # jobs the scheduler did not hold: the frames' path drops their rows
    ledger = close_books(parsed.books)
    sub = held.loc[in_file, ["devices"]].copy()
    _runtime_per_job(pd.DataFrame(), pd.DataFrame(), window, sub, parsed=parsed)
    return {
        "steps_jobs": steps_jobs,
        "events_jobs": events_jobs,
        "unknown_rows": {},
        "runtime_jobs": in_file,
        "runtime": {c: sub[c].to_numpy() for c in sub.columns if c != "devices"},
        "ledger": ledger,
    }
