"""The canonical Parquet reader's checked columns handed straight to the measurement, with no frame.

:func:`fleetlib.runtime.readers._parquet_fast.read_parsed` decodes and checks a file and keeps its
columns as numpy arrays; :func:`read_fast` then builds pandas frames (zone-aware times, text job ids,
provenance columns) that :func:`fleetlib.runtime.timeline._prepare_tables` turns straight back into
int64 nanoseconds and job codes.  :func:`tables_from_parsed` makes the measurement's arrays
(:class:`~fleetlib.runtime.job_structure._Tables`) from the reader's arrays instead: the same values,
dtypes, order, ledger and provenance as ``_prepare_tables(read_fast(...))`` with
``steps_checked=True`` (the identity is tested), by the timeline's own sorting and flagging
functions.  Only a read with both tables and no cross check is taken (:func:`can_hand_off`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fleetlib.runtime._provenance import Provenance
from fleetlib.runtime.job_structure import _code_dtype, _Tables
from fleetlib.runtime.timeline import (
    TimelineLedger,
    _flag_overlong_durations,
    _flag_unknown_kinds,
    _recode,
    _sort_events_by_job,
    _sort_steps_by_job,
)

__all__ = ["can_hand_off", "events_job_ids", "steps_job_ids", "tables_from_parsed"]


def events_job_ids(e: dict[str, Any]) -> list[str]:
    """Return the job ids of a parsed events part that have events, in text order."""
    codes, values = e["codes"], e["values"]
    used = np.bincount(codes, minlength=len(values)) > 0 if codes.size else np.zeros(len(values), bool)
    return sorted(values[i] for i in np.flatnonzero(used).tolist())


def steps_job_ids(s: dict[str, Any]) -> list[str]:
    """Return the job ids of a parsed steps part that have steps, in text order."""
    by_rank = np.asarray(s["values"], dtype=object)[np.argsort(np.asarray(s["values"], dtype=object),
                                                               kind="stable")]
    return by_rank[s["job_rows"] > 0].tolist()


def can_hand_off(parsed: Any) -> bool:
    """Whether :func:`tables_from_parsed` takes a parsed read: both tables, no cross check to make."""
    return parsed.s is not None and parsed.e is not None and not parsed.needs_cross_checks


def tables_from_parsed(parsed: Any, source: str) -> tuple[_Tables, tuple[Provenance, Provenance]]:
    """Return the measurement's tables of a parsed fast-path read, and the provenance of both tables.

    Parameters
    ----------
    parsed
        :func:`~fleetlib.runtime.readers._parquet_fast.read_parsed`'s result (one file).
    source
        The name the tables go by in errors and the ledger (as ``source`` of
        :func:`~fleetlib.runtime._fast.runtime_per_job`).

    Returns
    -------
    tuple of (_Tables, (Provenance, Provenance))
        What ``_prepare_tables`` makes of the frames :func:`read_fast` builds from the same read (the
        steps as checked), and the provenance of its steps and events tables.

    Raises
    ------
    ValueError
        The read is not one :func:`can_hand_off` takes (build the frames).
    """
    if not can_hand_off(parsed):
        raise ValueError("this read needs its frames: no steps or no events, or cross checks to make")
    s, e = parsed.s, parsed.e
    steps_file, events_file = f"{source} (steps)", f"{source} (events)"
    n_s, n_e = int(s["rows"].size), int(e["rows"].size)
    ledger = TimelineLedger(read=n_s + n_e)
    # the steps in the reader's table order: grouped by job in text order, each job's in file order
    s_order = s["order"]

    def steps_col(name: str) -> np.ndarray:
        return s[name] if s_order is None else s[name][s_order]

    e_order = e["order"]
    prov_s = Provenance.of_rows(steps_file, s["file"], steps_col("rows"))
    prov_e = Provenance.of_rows(events_file, e["file"], e["rows"][e_order])
    e_kind = np.asarray(e["kinds"], dtype=object)[e["kind_codes"][e_order]]
    e_step = e["step"][e_order].astype(np.float64)
    e_step[e["step_na"][e_order]] = np.nan
    e_dur = e["duration"][e_order]
    e_dur = np.where(np.isnan(e_dur), np.nan, e_dur)  # a missing duration as the frame reads it back
    e_rows = np.arange(n_e, dtype=np.int64)
    _flag_unknown_kinds(ledger, prov_e, e_kind, e["kind_codes"][e_order], list(e["kinds"]), e_rows)
    # the job ids of both tables, sorted; each table's codes in the narrowest type that holds them
    s_by_rank = [s["values"][i] for i in np.argsort(np.asarray(s["values"], dtype=object), kind="stable")]
    s_present = steps_job_ids(s)
    e_present = events_job_ids(e)
    job_ids = sorted(set(s_present) | set(e_present))
    index = {j: i for i, j in enumerate(job_ids)}
    code_type = _code_dtype(len(job_ids) + 1)
    # the ranks are sorted and job_rows counts each: a repeat of each rank's code is lookup[rank]
    s_job = np.repeat(np.array([index.get(v, -1) for v in s_by_rank], dtype=code_type), s["job_rows"])
    e_job = _recode(e["codes"][e_order], np.array([index.get(v, -1) for v in e["values"]], dtype=code_type))
    e_attempt, e_dur, e_job, e_kind, e_rows, e_step, e_time = _sort_events_by_job(
        e["attempt"][e_order], e_dur, e_job, e_kind, e_rows, e_step, e["time"][e_order], events_file, ledger)
    rows, s_attempt, s_end, s_job, s_start, s_step, s_wait, _ = _sort_steps_by_job(
        ledger, None, steps_col("attempt"), steps_col("end"), s_job, steps_col("start"), steps_col("step"),
        steps_col("wait"), steps_file, prov_s, checked=True)
    _flag_overlong_durations(ledger, prov_e, job_ids, e_job, e_time, e_dur, e_rows, s_job, s_start, s_end)
    ledger.kept = ledger.read - ledger.repaired - ledger.rejected
    # the reader's step durations, (end - start) / 1e9 as the measurement makes them, while the rows
    # are the reader's (no row sorted or dropped here)
    s_dur = steps_col("span_s") if rows is None else None
    tables = _Tables(None, None, job_ids, s_job, s_attempt, s_step, s_start, s_end, s_wait, rows, e_job,
                     e_attempt, e_time, e_kind, e_step, e_dur, e_rows, ledger, steps_file, events_file, s_dur)
    return tables, (prov_s, prov_e)
