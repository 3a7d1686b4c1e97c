"""Tables and text an analyst reads from one fleet measurement (notebook 00, the report's headline).

Every function takes a :class:`~fleetlib.fleet.measure.FleetMeasurement` and reshapes what it
measured; none measures anything itself.  Times are shown in device-hours, shares as fractions.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fleetlib.accounting import levers_frame
from fleetlib.fleet.measure import FleetMeasurement

__all__ = [
    "FACTOR_TABLE_COLUMNS",
    "JOB_TABLE_COLUMNS",
    "SLICE_TABLE_COLUMNS",
    "WATERFALL_COLUMNS",
    "chain_table",
    "factor_table",
    "headline",
    "job_table",
    "kernel_table",
    "lever_table",
    "loss_owner_table",
    "measured_summary",
    "reconciliation_table",
    "segment_table",
    "trace_table",
    "waterfall_table",
    "window_table",
]

_H = 3600.0

#: Columns of :func:`factor_table`.
FACTOR_TABLE_COLUMNS: tuple[str, ...] = ("value", "numerator_device_h", "denominator_device_h", "coverage",
                                         "record", "convention")
#: Columns of :func:`waterfall_table`.
WATERFALL_COLUMNS: tuple[str, ...] = ("stage", "kind", "boundary", "device_h", "share_of_capacity")
#: Columns of :func:`job_table`.
JOB_TABLE_COLUMNS: tuple[str, ...] = ("pool", "devices", "held_device_h", "observed", "zombie",
                                      "runtime_goodput", "program_goodput", "job_product",
                                      "runtime_coverage", "program_coverage")
#: Columns of :func:`window_table` and :func:`segment_table` (after their own first columns).
SLICE_TABLE_COLUMNS: tuple[str, ...] = ("jobs", "S", "R", "P", "MPG", "capacity_device_h", "held_device_h",
                                        "productive_device_h", "ideal_device_h", "chain_holds")


def _coverage(fm: FleetMeasurement) -> dict[str, float]:
    return {"scheduling": 1.0, "runtime": float(fm.coverage["runtime"]),
            "program": float(fm.coverage["program"])}


def factor_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return the three measured factors and MPG, one row each, with their records and coverage.

    Parameters
    ----------
    fm
        A fleet measurement.

    Returns
    -------
    pandas.DataFrame
        Index ``S``, ``R``, ``P``, ``MPG``; columns :data:`FACTOR_TABLE_COLUMNS` (device-hours).
    """
    cov = _coverage(fm)
    rows = {}
    for name, f in (("S", fm.scheduling), ("R", fm.runtime), ("P", fm.program)):
        rows[name] = {"value": f.value, "numerator_device_h": f.numerator / _H,
                      "denominator_device_h": f.denominator / _H, "coverage": cov[f.boundary],
                      "record": f.record, "convention": f.convention}
    rows["MPG"] = {"value": fm.mpg, "numerator_device_h": fm.ideal_device_s / _H,
                   "denominator_device_h": fm.capacity_device_s / _H,
                   "coverage": min(cov.values()),
                   "record": "the three records above, joined by job id",
                   "convention": "S x R x P, chain checked: each denominator is the previous numerator"}
    return pd.DataFrame.from_dict(rows, orient="index")[list(FACTOR_TABLE_COLUMNS)]


def headline(fm: FleetMeasurement) -> str:
    """Return the one-line measured headline: MPG = S x R x P with the window and the records."""
    return (f"MPG {fm.mpg:.1%} = S {fm.scheduling.value:.1%} x R {fm.runtime.value:.1%} x "
            f"P {fm.program.value:.1%}, measured over {fm.window.describe()} from {fm.scheduling.record}, "
            f"{fm.runtime.record} and {fm.program.record}; runtime coverage {fm.coverage['runtime']:.1%}, "
            f"program coverage {fm.coverage['program']:.1%}")


def chain_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return the two boundary crossings as :func:`fleetlib.accounting.mpg` checked them.

    Returns
    -------
    pandas.DataFrame
        Index ``scheduling->runtime`` and ``runtime->program``: the previous numerator and the next
        denominator in device-hours, the residual in device-seconds, the tolerance and whether it holds.
    """
    rows = {name: {"previous_numerator_device_h": c["previous_numerator"] / _H,
                   "next_denominator_device_h": c["next_denominator"] / _H,
                   "residual_device_s": c["residual"], "relative_tolerance": f"{c['rtol']:.0e}",
                   "holds": bool(c["holds"])}
            for name, c in fm.product.chain.items()}
    return pd.DataFrame.from_dict(rows, orient="index")


def waterfall_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return the fleet waterfall: capacity, each loss by boundary, each surviving total.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`WATERFALL_COLUMNS`, in the walk's order; ``boundary`` is the factor a loss
        belongs to (``""`` for totals); ``share_of_capacity`` divides by in-service capacity.
    """
    bars = pd.DataFrame(fm.waterfall())
    bars["boundary"] = bars["stage"].where(bars["kind"] == "loss", "").str.split(".").str[0]
    bars["share_of_capacity"] = bars["device_s"] / fm.capacity_device_s
    return bars[list(WATERFALL_COLUMNS)].reset_index(drop=True)


def reconciliation_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return, per job, the scheduler's held device-hours beside its timeline's and the residual.

    A job with no timeline shows no timeline hours and is ``observed == False`` (its held time is
    R's ``unobserved`` loss).
    """
    jobs = fm.jobs
    out = pd.DataFrame({
        "pool": jobs["pool"],
        "scheduler_held_device_h": jobs["held_device_s"] / _H,
        "timeline_held_device_h": jobs["timeline_held_device_s"].where(jobs["observed"]) / _H,
        "residual_device_h": jobs["reconciliation_residual"] / _H,
        "observed": jobs["observed"].astype(bool),
        "zombie": jobs["zombie_job"].astype(bool),
    })
    return out.sort_values("scheduler_held_device_h", ascending=False)


def job_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return one row per job: held device-hours, R, P, the job product R x P and coverage.

    Returns
    -------
    pandas.DataFrame
        Index ``job_id``; columns :data:`JOB_TABLE_COLUMNS`, largest held time first.
    """
    records = fm.to_dict()["jobs"]
    rows = {
        job: {"pool": r["pool"], "devices": r["devices"], "held_device_h": r["held_device_s"] / _H,
              "observed": r["observed"], "zombie": r["zombie"], "runtime_goodput": r["runtime_goodput"],
              "program_goodput": r["program_goodput"], "job_product": r["job_product"],
              "runtime_coverage": r["coverage"]["runtime"], "program_coverage": r["coverage"]["program"]}
        for job, r in records.items()
    }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "job_id"
    return out[list(JOB_TABLE_COLUMNS)].sort_values("held_device_h", ascending=False)


def trace_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return, per traced job, its step partition scaled to the job's productive device-hours.

    Returns
    -------
    pandas.DataFrame
        Index ``job_id``; one column per part of the step (device-hours), then ``rank_steps_traced``
        and ``coverage`` (rank-steps traced / rank-steps retained).
    """
    rows = {job: {**{part: v / _H for part, v in t["partition_device_s"].items()},
                  "rank_steps_traced": t["rank_steps_traced"], "coverage": t["coverage"]}
            for job, t in fm.traces.items()}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "job_id"
    return out


def kernel_table(fm: FleetMeasurement, *, top: int | None = 20) -> pd.DataFrame:
    """Return the traced jobs' kernels and collectives ranked fleet-wide by share of retained device-time.

    Parameters
    ----------
    fm
        A fleet measurement.
    top
        Rows kept (all when None).

    Returns
    -------
    pandas.DataFrame
        :func:`fleetlib.fleet.sampling.kernel_ranking`'s columns (``rank``, ``name``, ``kind``,
        ``share``, ``standard_error``, ``jobs``) with ``device_h`` in place of ``device_s``; empty
        without traces.
    """
    k = fm.kernels
    if k.empty:
        return pd.DataFrame(columns=["rank", "name", "kind", "share", "standard_error", "device_h", "jobs"])
    out = k.assign(device_h=k["device_s"] / _H)[["rank", "name", "kind", "share", "standard_error",
                                                  "device_h", "jobs"]]
    return out if top is None else out.head(top)


def lever_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return the levers ranked by relative gain at their measured ceilings, with each ceiling's source."""
    frame = levers_frame(fm.lever_gains)
    sources = fm.levers["ceiling_sources"]
    frame["ceiling_source"] = frame["factor"].map(sources)
    return frame


def loss_owner_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return every named loss with its owner, its device-hours and the factor gain its removal is worth."""
    columns = ["factor", "loss", "owner", "device_s", "relative_gain"]
    rows = pd.DataFrame(fm.levers["per_loss"], columns=columns)
    rows["device_h"] = rows["device_s"] / _H
    return rows.drop(columns="device_s")[["factor", "loss", "owner", "device_h", "relative_gain"]]


def measured_summary(fm: FleetMeasurement, *, manifest: str) -> dict[str, Any]:
    """Return the ``measured`` block of a report's ``summary.json``.

    Parameters
    ----------
    fm
        The measurement of the report's fleet bundle.
    manifest
        The manifest path as the scenario names it.

    Returns
    -------
    dict
        JSON-ready: ``label`` ("measured"), ``manifest``, ``name``, ``window``, ``mpg``,
        ``availability`` (in-service / installed capacity-time; None without installed capacity),
        ``collection_gaps`` (stretches with no record of any job while capacity persists, counted
        as idle in S: :attr:`~fleetlib.fleet.measure.FleetMeasurement.collection_gaps`),
        and per factor its value, numerator and denominator in device-seconds, coverage,
        convention, the records it was read from (``record`` and ``files``), its losses (a scheduling
        loss the records cannot observe is ``null``, its reason in ``unobserved``) and its
        measurement ``contract`` (chapter Table 2, :func:`fleetlib.fleet.results.factor_contracts`);
        the chain as checked.
    """
    cov = _coverage(fm)
    files = fm.sources
    factors = {}
    for f in (fm.scheduling, fm.runtime, fm.program):
        factors[f.boundary] = {
            "label": "measured", "value": f.value, "numerator_device_s": f.numerator,
            "denominator_device_s": f.denominator, "coverage": cov[f.boundary], "convention": f.convention,
            "record": f.record, "files": files.get(f.boundary, []), "window": f.window.to_dict(),
            "losses": dict(f.losses),
            "contract": fm.contracts.get(f.boundary, {}),
        }
    factors["scheduling"]["losses"].update(dict.fromkeys(fm.unobserved))
    factors["scheduling"]["unobserved"] = dict(fm.unobserved)
    return {
        "label": "measured",
        "manifest": manifest,
        "name": fm.name,
        "window": fm.window.to_dict(),
        "mpg": fm.mpg,
        "availability": fm.availability,
        "collection_gaps": [dict(g) for g in fm.collection_gaps],
        "job_product": fm.product.job_product,
        "factors": factors,
        "chain": {k: dict(v) for k, v in fm.product.chain.items()},
        "headline": headline(fm),
    }


def _slice_frame(rows: list[dict[str, Any]], first: dict[str, str]) -> pd.DataFrame:
    out = []
    for r in rows:
        f = r["factors"]
        out.append({
            **{name: r[key] for name, key in first.items()},
            "jobs": r["jobs"], "S": r["scheduling"], "R": r["runtime"], "P": r["program"], "MPG": r["mpg"],
            "capacity_device_h": f["scheduling"]["denominator_device_s"] / _H,
            "held_device_h": f["runtime"]["denominator_device_s"] / _H,
            "productive_device_h": f["program"]["denominator_device_s"] / _H,
            "ideal_device_h": f["program"]["numerator_device_s"] / _H,
            "chain_holds": all(bool(c["holds"]) for c in r["chain"].values()),
        })
    columns = [*first, *SLICE_TABLE_COLUMNS]
    frame = pd.DataFrame(out, columns=columns)
    for c in ("S", "R", "P", "MPG"):
        frame[c] = frame[c].astype(float)  # None (no denominator in the slice) as NaN
    return frame


def window_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return one row per calendar window of a fleet measured ``by="day"`` or ``"week"``.

    Parameters
    ----------
    fm
        A fleet measurement with :attr:`~fleetlib.fleet.measure.FleetMeasurement.windows`.

    Returns
    -------
    pandas.DataFrame
        ``window`` (the label), ``start``, ``end`` (UTC), then :data:`SLICE_TABLE_COLUMNS`: S, R, P,
        MPG, each factor's denominator and P's numerator in device-hours, and whether the chain holds;
        empty when the measurement was not made by window.
    """
    frame = _slice_frame(fm.windows, {"window": "label", "start": "start", "end": "end"})
    for c in ("start", "end"):
        frame[c] = pd.to_datetime(frame[c], utc=True)
    return frame


def segment_table(fm: FleetMeasurement) -> pd.DataFrame:
    """Return one row per segment of a fleet measured with ``segment_by``.

    Parameters
    ----------
    fm
        A fleet measurement with :attr:`~fleetlib.fleet.measure.FleetMeasurement.segments`.

    Returns
    -------
    pandas.DataFrame
        The field's value (column named after the field), ``scheduling_split`` (how the segment's S
        was taken), then :data:`SLICE_TABLE_COLUMNS`; empty when not measured by segment.
    """
    name = fm.segment_by or "segment"
    return _slice_frame(fm.segments, {name: "value", "scheduling_split": "scheduling_split"})
