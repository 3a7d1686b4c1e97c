"""Table 7 triage: the chapter's nine trace patterns found in a step trace, ranked by evidence.

Each detector looks at the kernel table, the step windows, the partition and its Fleet Law terms
(:mod:`fleetlib.program.fleet_law`) for one pattern of the chapter's Table 7.  A finding names the
pattern, the goodput factor and Fleet Law term it lengthens, the lever to try first and the
trade-off to check before pulling it, and its evidence: the time, in microseconds summed over the
rank-steps where the pattern holds, that the pattern occupies on the critical path (the rank's own
time line, where every instant is charged once).  Findings are ranked by evidence, largest first.

The detectors and their evidence:

``small_kernel_gaps``
    Rank-steps with many short activities (at least ``min_kernels`` with a median at most
    ``short_kernel_us``) whose ``dispatch`` term is at least ``dispatch_share`` of the wall.
    Evidence: ``dispatch``.
``large_memory_spikes``
    Needs memory events (:mod:`fleetlib.program.memory`; without them: not observable).  Rank-steps
    whose allocated memory rises above its level at the step's start by at least ``spike_share`` of
    the peak and by at least ``large_bytes``.  Evidence: the ``local_memory`` term of those steps
    (the time the materialised intermediates' traffic lengthens).
``repeated_large_allocations``
    Needs memory events.  Rank-steps with at least ``min_churn`` allocations of a repeated size of at
    least ``large_bytes``.  Evidence: the device-idle time of those steps (``dispatch`` and
    ``other``), the most allocator calls could hold the critical path.
``low_flops_high_bandwidth``
    Rank-steps where kernels of shaped ops (recorded input shapes, :func:`~fleetlib.program.
    roofline.op_flops_bytes`) with an intensity below the ridge point take at least
    ``bandwidth_share`` of the wall.  Evidence: those kernels' time.  Without shapes: not observable.
``non_gemm_kernels``
    Rank-steps where non-GEMM compute kernels are at least ``non_gemm_share`` of compute-kernel
    time and ``non_gemm_of_step`` of the wall (:func:`~fleetlib.program.roofline.gemm_time_split`).
    Evidence: the ``local_memory`` term's compute part (``memory_roof_us``).
``exposed_collectives``
    Rank-steps whose ``exposed_comm`` is at least ``exposed_share`` of the wall.  Evidence:
    ``exposed_comm``.
``barrier_straggler``
    Steps where every rank but one waits at a collective for at least ``barrier_share`` of its wall
    (the one not waiting is the straggler).  Evidence: the waiting ranks' ``sync_barrier_us``.
``pipeline_bubbles``
    Rank-steps of pipeline stages whose bubble (``sync_bubble_us``) is at least ``bubble_share``
    of the wall.  Evidence: ``sync_bubble_us``.
``input_wait``
    Ranks with a gap between consecutive step windows in at least half of them, the gaps averaging
    at least ``input_gap_share`` of the mean step wall.  Evidence: the gaps.  A runtime loss, not a
    program one: confirmed only when the job timeline's input-wait field shows waiting in those
    steps (``input_wait``); otherwise the finding says it is unconfirmed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.program.breakdown import require_table_columns
from fleetlib.program.fleet_law import fleet_law_terms, pipeline_ranks
from fleetlib.program.memory import DEFAULT_LARGE_BYTES, memory_by_step
from fleetlib.program.roofline import (
    DEFAULT_RIDGE_FLOP_PER_BYTE,
    gemm_time_split,
    kernel_roofline,
    op_flops_bytes,
)
from fleetlib.quality import DomainError

__all__ = ["FINDING_COLUMNS", "TABLE7_PATTERNS", "TRIAGE_THRESHOLDS", "Triage", "triage"]

#: The nine patterns of Table 7, in the chapter's order: pattern -> (factor, term, lever, trade-off).
TABLE7_PATTERNS: Mapping[str, tuple[str, str, str, str]] = {
    "small_kernel_gaps": (
        "program", "dispatch",
        "replay the step as a graph, fuse kernels, or compile the step",
        "compilation time (a runtime cost) and a variant per input shape"),
    "large_memory_spikes": (
        "program", "local_memory",
        "fuse operators, or use tiled attention that never materialises its score matrix",
        "numerical validation and kernel maintenance"),
    "low_flops_high_bandwidth": (
        "program", "local_memory",
        "move fewer bytes per step: fusion, a narrower representation, a larger per-device batch",
        "accuracy, cache pressure and quality guardrails"),
    "non_gemm_kernels": (
        "program", "local_memory",
        "fuse normalisation, activation, softmax and optimizer work into neighbouring kernels",
        "fusion legality and kernel maintenance"),
    "exposed_collectives": (
        "program", "exposed_comm",
        "overlap collectives with independent work; let the compiler choose the partitioning",
        "bucket size, contention for device resources, schedule complexity"),
    "barrier_straggler": (
        "program", "sync",
        "even out the partitioning (capacity limits for MoE experts); replace a degrading node",
        "restart cost (a runtime cost) against the recovered step time"),
    "pipeline_bubbles": (
        "program", "sync",
        "more microbatches or an interleaved pipeline schedule",
        "activation memory and per-microbatch efficiency"),
    "repeated_large_allocations": (
        "program", "dispatch",
        "plan memory in the compiler or preallocate buffer pools",
        "allocator behaviour; recomputation cost if activations are dropped instead"),
    "input_wait": (
        "runtime", "input wait (not a program loss)",
        "more data workers, a preprocessing service, or pretokenised data",
        "storage cost and data freshness"),
}

#: Thresholds of the detectors (shares are of the rank-step's wall time unless said otherwise).
TRIAGE_THRESHOLDS: Mapping[str, float] = {
    "min_kernels": 50, "short_kernel_us": 50.0, "dispatch_share": 0.10,
    "bandwidth_share": 0.20, "ridge_flop_per_byte": DEFAULT_RIDGE_FLOP_PER_BYTE,
    "non_gemm_share": 0.50, "non_gemm_of_step": 0.25,
    "exposed_share": 0.15, "barrier_share": 0.05, "bubble_share": 0.10, "input_gap_share": 0.05,
    "spike_share": 0.20, "large_bytes": float(DEFAULT_LARGE_BYTES), "min_churn": 3,
}

#: Keys of one finding, in order.
FINDING_COLUMNS: tuple[str, ...] = ("pattern", "factor", "term", "lever", "trade_off", "evidence_us", "ranks",
                                    "steps", "status")

_MEMORY_PATTERNS = ("large_memory_spikes", "repeated_large_allocations")


@dataclass
class Triage:
    """What :func:`triage` found.

    Attributes
    ----------
    findings
        One row per pattern that holds, columns :data:`FINDING_COLUMNS`, largest evidence first.
    not_observable
        Pattern -> why the trace cannot show it (no memory events, no recorded shapes).
    """

    findings: pd.DataFrame
    not_observable: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return ``findings`` (records, ranks and steps as lists) and ``not_observable``."""
        records = [{k: (float(v) if k == "evidence_us" else v) for k, v in row.items()}
                   for row in self.findings.to_dict(orient="records")]
        return {"findings": records, "not_observable": dict(self.not_observable)}


def _finding(pattern: str, evidence: pd.DataFrame, value: str, status: str = "observed") -> dict[str, Any]:
    factor, term, lever, trade = TABLE7_PATTERNS[pattern]
    return {"pattern": pattern, "factor": factor, "term": term, "lever": lever, "trade_off": trade,
            "evidence_us": float(evidence[value].sum()),
            "ranks": sorted(int(r) for r in evidence["rank"].unique()),
            "steps": sorted(int(s) for s in evidence["step"].unique()) if "step" in evidence else [],
            "status": status}


def triage(kernels: pd.DataFrame, steps: pd.DataFrame, partition: pd.DataFrame, *,
           matched: pd.DataFrame | None = None, ops: pd.DataFrame | None = None,
           input_wait: pd.DataFrame | None = None, memory: pd.DataFrame | None = None,
           thresholds: Mapping[str, float] | None = None) -> Triage:
    """Run the nine Table 7 detectors over one trace set and rank what they find.

    Parameters
    ----------
    kernels
        Kernel table (``rank, step, stream, start_us, end_us, kind, name, collective``; ``external_id``
        with ``ops``).
    steps
        Step windows ``rank, step, start_us, end_us``.
    partition
        :func:`fleetlib.program.breakdown.step_partition` of the same tables (with peer waits).
    matched
        Matched collectives (pipeline stages are the ranks with ``sendrecv`` among them); None: the
        kernel table's collectives.
    ops
        Host ops with recorded shapes, for the intensity of shaped kernels.
    input_wait
        The job timeline's input-wait field: ``rank, step, input_wait_us``.  Confirms or rules out
        the ``input_wait`` pattern; None: it stays unconfirmed.
    memory
        Device memory events (:func:`fleetlib.program.memory.read_memory_events`); None or empty:
        the two memory patterns are not observable.
    thresholds
        Overrides of :data:`TRIAGE_THRESHOLDS`.

    Returns
    -------
    Triage
        The ranked findings and the patterns the trace cannot show.

    Raises
    ------
    DomainError
        A missing column or an unknown threshold.
    """
    th = dict(TRIAGE_THRESHOLDS)
    unknown = sorted(set(thresholds or {}) - set(th))
    if unknown:
        raise DomainError(f"unknown triage thresholds {unknown}; they are {sorted(th)}")
    th.update(thresholds or {})
    require_table_columns(kernels, ("rank", "step", "start_us", "end_us", "kind", "name"), "kernels")
    require_table_columns(steps, ("rank", "step", "start_us", "end_us"), "steps")
    terms = fleet_law_terms(partition, pipeline=pipeline_ranks(kernels if matched is None else matched))
    terms = terms.assign(memory_roof_us=partition["memory_roof_us"].to_numpy())
    wall = terms["step_wall_us"]
    found: list[dict[str, Any]] = []
    hidden: dict[str, str] = {}
    if memory is None or memory.empty:
        hidden.update({p: "not observable: no memory events in the trace" for p in _MEMORY_PATTERNS})
    else:
        per = memory_by_step(memory, steps, large_bytes=int(th["large_bytes"]))
        t = terms.merge(per, on=["rank", "step"])
        hit = t[(t["spike_bytes"] >= th["spike_share"] * t["peak_allocated_bytes"])
                & (t["spike_bytes"] >= th["large_bytes"])]
        if not hit.empty:
            found.append(_finding("large_memory_spikes", hit, "local_memory"))
        hit = t[t["churn_count"] >= th["min_churn"]]
        if not hit.empty:
            idle = hit.assign(idle=hit["dispatch"] + hit["other"])
            found.append(_finding("repeated_large_allocations", idle, "idle"))

    # small gaps between many short kernels
    active = kernels["kind"].astype("string").isin(["compute", "comm", "memcpy", "memset"])
    work = kernels[active.to_numpy(dtype=bool)].dropna(subset=["step"])
    dur = pd.to_numeric(work["end_us"]) - pd.to_numeric(work["start_us"])
    per = dur.groupby([work["rank"].astype("int64"), work["step"].astype("int64")]).agg(["size", "median"])
    per.index.names = ["rank", "step"]
    t = terms.merge(per.reset_index(), on=["rank", "step"], how="left").fillna({"size": 0, "median": np.inf})
    hit = t[(t["size"] >= th["min_kernels"]) & (t["median"] <= th["short_kernel_us"])
            & (t["dispatch"] >= th["dispatch_share"] * wall)]
    if not hit.empty:
        found.append(_finding("small_kernel_gaps", hit, "dispatch"))

    # low FLOP/s at high bandwidth: shaped kernels below the ridge point
    if ops is None or ops.empty or "external_id" not in kernels.columns:
        hidden["low_flops_high_bandwidth"] = "not observable: no recorded input shapes (record_shapes)"
    else:
        placed = kernel_roofline(kernels[kernels["kind"].astype("string") == "compute"], op_flops_bytes(ops))
        low = placed[placed["intensity_flop_per_byte"] < th["ridge_flop_per_byte"]].dropna(subset=["step"])
        low_us = (pd.to_numeric(low["end_us"]) - pd.to_numeric(low["start_us"])).groupby(
            [low["rank"].astype("int64"), low["step"].astype("int64")]).sum().rename("low_us")
        low_us.index.names = ["rank", "step"]
        t = terms.merge(low_us.reset_index(), on=["rank", "step"], how="left").fillna({"low_us": 0.0})
        hit = t[t["low_us"] >= th["bandwidth_share"] * t["step_wall_us"]]
        if not hit.empty:
            found.append(_finding("low_flops_high_bandwidth", hit, "low_us"))

    # much of the step in non-GEMM kernels
    split = gemm_time_split(kernels, steps, ops=ops)
    t = terms.merge(split[["rank", "step", "non_gemm_share", "non_gemm_share_of_step"]], on=["rank", "step"])
    hit = t[(t["non_gemm_share"] >= th["non_gemm_share"])
            & (t["non_gemm_share_of_step"] >= th["non_gemm_of_step"])]
    if not hit.empty:
        found.append(_finding("non_gemm_kernels", hit, "memory_roof_us"))

    # collectives during device idle gaps: communication not hidden under compute
    hit = terms[terms["exposed_comm"] >= th["exposed_share"] * wall]
    if not hit.empty:
        found.append(_finding("exposed_collectives", hit, "exposed_comm"))

    # all ranks but one wait at a barrier
    waiting = terms["sync_barrier_us"] >= th["barrier_share"] * wall
    n_ranks = terms.groupby("step")["rank"].transform("size")
    n_wait = waiting.groupby(terms["step"]).transform("sum")
    hit = terms[waiting & (n_ranks >= 2) & (n_wait == n_ranks - 1)]
    if not hit.empty:
        late = terms[~waiting & terms["step"].isin(hit["step"])]["rank"].unique()
        named = ", ".join(str(int(r)) for r in sorted(late))
        found.append(_finding("barrier_straggler", hit, "sync_barrier_us",
                              f"observed; not waiting: rank {named}"))

    # stages idle at the start and end of each step
    hit = terms[terms["sync_bubble_us"] >= th["bubble_share"] * wall]
    if not hit.empty:
        found.append(_finding("pipeline_bubbles", hit, "sync_bubble_us"))

    # periodic drops between steps
    win = steps.assign(rank=steps["rank"].astype("int64"), step=steps["step"].astype("int64")).sort_values(
        ["rank", "start_us"])
    nxt = win.groupby("rank")["start_us"].shift(-1)
    win = win.assign(gap_us=(nxt - win["end_us"]).clip(lower=0.0), wall_us=win["end_us"] - win["start_us"])
    win = win[nxt.notna().to_numpy()]
    win = win.assign(has_gap=win["gap_us"] > 0)
    by_rank = win.groupby("rank").agg(gaps=("has_gap", "mean"), mean_gap=("gap_us", "mean"),
                                      mean_wall=("wall_us", "mean"))
    drops = by_rank[(by_rank["gaps"] >= 0.5)
                    & (by_rank["mean_gap"] >= th["input_gap_share"] * by_rank["mean_wall"])]
    hit = win[win["rank"].isin(drops.index) & (win["gap_us"] > 0)]
    if not hit.empty:
        status = "unconfirmed: no input-wait field from the job timeline"
        if input_wait is not None:
            require_table_columns(input_wait, ("rank", "step", "input_wait_us"), "input_wait")
            got = hit.merge(input_wait, on=["rank", "step"], how="left")
            waited = (got["input_wait_us"].fillna(0) > 0).any()
            status = ("confirmed by the timeline's input-wait field" if waited
                      else "ruled out: the timeline's input-wait field shows no wait in these steps")
        if not status.startswith("ruled out"):
            found.append(_finding("input_wait", hit, "gap_us", status))

    findings = pd.DataFrame(found, columns=list(FINDING_COLUMNS))
    findings = findings.sort_values("evidence_us", ascending=False, kind="stable").reset_index(drop=True)
    return Triage(findings, hidden)
