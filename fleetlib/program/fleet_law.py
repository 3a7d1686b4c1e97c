"""The Fleet Law terms of each measured step: which term a fix must shorten.

The chapter's Fleet Law writes a step's time as local work on the compute roof, local work on the
bandwidth slope, host dispatch, communication not hidden under compute, and synchronisation.  The
step partition (:func:`fleetlib.program.breakdown.step_partition`) already charges every instant of
a rank's step to one part; :func:`fleet_law_terms` regroups those parts, using the two refinements
the partition reports beside them, so the terms add up to the step wall by construction:

``local_compute``
    ``compute`` minus ``memory_roof_us``: time at least one compute-roof kernel (a GEMM or
    convolution, by recorded shapes or by name; :func:`fleetlib.program.roofline.kernel_roof`) runs.
``local_memory``
    ``memory_roof_us`` plus ``exposed_memcpy``: time only bandwidth-slope kernels (elementwise,
    normalisation, softmax, optimizer updates) or copies run.
``dispatch``
    ``host_dispatch``: the device drained and waited for the host's next launch.
``exposed_comm``
    ``exposed_comm``: a collective moving data with no compute under it (T_comm(N) - T_overlap).
``sync``
    ``peer_wait`` (barrier waits: inside a collective, waiting for a later peer) plus, on pipeline
    stages, the idle time before the step's first activity and after its last (the pipeline bubble).
    The two stay told apart in ``sync_barrier_us`` and ``sync_bubble_us``.
``other``
    Every other idle moment (an event wait, the host doing something that is not a launch).

A rank is a pipeline stage when its kernel table holds point-to-point transfers (``sendrecv``) or
when the caller names it; elsewhere the idle at a step's edges is ``other``.  All arithmetic is in
integer nanoseconds (the partition's resolution), so the six terms add up to ``step_wall_us``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from fleetlib.program.breakdown import require_table_columns
from fleetlib.program.schema import PARTITION_PARTS
from fleetlib.quality import DomainError

__all__ = ["FIX_TERMS", "FLEET_LAW_LABELS", "FLEET_LAW_TERMS", "compose_fixes", "fleet_law_by_rank",
           "fleet_law_terms", "pipeline_ranks"]

#: The six terms, in the order they are drawn; they add up to the step wall time.
FLEET_LAW_TERMS: tuple[str, ...] = ("local_compute", "local_memory", "dispatch", "exposed_comm", "sync",
                                    "other")

#: A label per term, for legends and tables.
FLEET_LAW_LABELS: dict[str, str] = {
    "local_compute": "local compute (compute roof)",
    "local_memory": "local memory (bandwidth slope)",
    "dispatch": "host dispatch",
    "exposed_comm": "exposed communication",
    "sync": "synchronisation (barrier + bubble)",
    "other": "other",
}

_NS = 1000.0


def pipeline_ranks(kernels: pd.DataFrame) -> list[int]:
    """Return the ranks whose kernel table holds point-to-point (``sendrecv``) transfers.

    Parameters
    ----------
    kernels
        Kernel table with ``rank`` and ``collective``.

    Returns
    -------
    list of int
        Sorted ranks (empty without a ``collective`` column).
    """
    if "collective" not in kernels.columns or kernels.empty:
        return []
    p2p = kernels["collective"].astype("string").fillna("") == "sendrecv"
    return sorted(int(r) for r in pd.unique(kernels.loc[p2p.to_numpy(dtype=bool), "rank"]))


def fleet_law_terms(partition: pd.DataFrame, *, pipeline: Iterable[int] = ()) -> pd.DataFrame:
    """Return the Fleet Law terms of every rank's step, regrouped from the step partition.

    Parameters
    ----------
    partition
        Output of :func:`fleetlib.program.breakdown.step_partition` (with ``memory_roof_us`` and
        ``edge_idle_us``).
    pipeline
        Ranks that are pipeline stages: their idle at the step's edges is a bubble (``sync``).

    Returns
    -------
    pandas.DataFrame
        One row per (rank, step): ``rank, step``, the terms of :data:`FLEET_LAW_TERMS` in
        microseconds, ``step_wall_us`` (their exact sum), ``sync_barrier_us`` and ``sync_bubble_us``
        (the two parts of ``sync``).

    Raises
    ------
    DomainError
        A column is missing.

    Examples
    --------
    >>> p = pd.DataFrame({"rank": [0], "step": [1], "compute": [8.0], "exposed_comm": [1.0],
    ...                   "peer_wait": [2.0], "exposed_memcpy": [0.5], "host_dispatch": [1.0],
    ...                   "idle": [3.0], "step_wall_us": [15.5], "memory_roof_us": [3.0],
    ...                   "edge_idle_us": [2.0]})
    >>> fleet_law_terms(p, pipeline=[0]).loc[0, ["local_compute", "local_memory", "sync", "other"]].tolist()
    [5.0, 3.5, 4.0, 1.0]
    """
    require_table_columns(partition, ("rank", "step", *PARTITION_PARTS, "step_wall_us", "memory_roof_us",
                                      "edge_idle_us"), "partition")

    def ns(col: str) -> np.ndarray:
        return np.rint(partition[col].to_numpy(dtype=float) * _NS).astype(np.int64)

    stage = partition["rank"].isin(list(pipeline)).to_numpy(dtype=bool)
    bubble = np.where(stage, ns("edge_idle_us"), 0)
    terms = {
        "local_compute": ns("compute") - ns("memory_roof_us"),
        "local_memory": ns("memory_roof_us") + ns("exposed_memcpy"),
        "dispatch": ns("host_dispatch"),
        "exposed_comm": ns("exposed_comm"),
        "sync": ns("peer_wait") + bubble,
        "other": ns("idle") - bubble,
    }
    out = pd.DataFrame({"rank": partition["rank"].to_numpy(), "step": partition["step"].to_numpy()})
    for name in FLEET_LAW_TERMS:
        out[name] = terms[name] / _NS
    out["step_wall_us"] = sum(terms.values()) / _NS
    out["sync_barrier_us"] = ns("peer_wait") / _NS
    out["sync_bubble_us"] = bubble / _NS
    return out


def fleet_law_by_rank(terms: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Sum each rank's Fleet Law terms over its steps, as JSON-ready ``{rank: {term: us}}``.

    Parameters
    ----------
    terms
        Output of :func:`fleet_law_terms`.

    Returns
    -------
    dict
        Keyed by the rank as text; each value holds the six terms, ``step_wall_us``,
        ``sync_barrier_us`` and ``sync_bubble_us`` in microseconds.
    """
    cols = [*FLEET_LAW_TERMS, "step_wall_us", "sync_barrier_us", "sync_bubble_us"]
    sums = terms.groupby("rank")[cols].sum()
    return {str(int(r)): {c: float(row[c]) for c in cols} for r, row in sums.iterrows()}


#: The step terms :func:`compose_fixes` scales, in seconds: the iron law's data movement, compute and
#: fixed overhead, plus the step's communication (which runs beside compute).
FIX_TERMS: tuple[str, ...] = ("data", "compute", "comm", "overhead")


def compose_fixes(terms_s: Mapping[str, float], fixes: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Step time before any fix, under each program fix alone, and under all of them together.

    The step is ``data + max(compute, comm) + overhead``: communication runs beside compute (the
    gradient reduction overlapped with the backward pass) and is exposed only where it outlasts
    compute.  A fix scales the time of the terms it names; applied together, the scales of one term
    multiply.  Because of the ``max``, savings do not add: shortening compute can expose hidden
    communication (a fix alone saves less than its kernel speedup), two fixes of the same exposed
    term can both claim the same time (together less than the sum), and a communication fix can be
    worth nothing until a compute fix exposes it (together more than the sum).

    Parameters
    ----------
    terms_s
        The step's :data:`FIX_TERMS` in seconds (a missing term is zero), each >= 0.
    fixes
        ``{fix name: {term: time multiplier}}``; a multiplier of 0.5 halves that term's time.

    Returns
    -------
    pandas.DataFrame
        One row per variant: ``label`` ("before", each fix, then "all fixes" when there are two or
        more), ``rank`` (the row number), the six :data:`FLEET_LAW_TERMS` and ``step_wall_us`` in
        microseconds (data -> ``local_memory``, compute -> ``local_compute``, overhead -> ``dispatch``,
        the exposed part of comm -> ``exposed_comm``), so :func:`fleetlib.plots.fleet_law_bars` draws
        it, then ``step_s``, ``saved_s`` (against "before") and ``speedup``.

    Raises
    ------
    DomainError
        An unknown term, a negative or non-finite time or multiplier, no fix, or a step of zero time.

    Examples
    --------
    >>> t = compose_fixes({"data": 0.06, "compute": 0.11, "comm": 0.175, "overhead": 0.01},
    ...                   {"FP8": {"compute": 0.5}})
    >>> [round(v, 4) for v in t["step_s"]]
    [0.245, 0.245]
    """
    base = _fix_values("terms_s", terms_s)
    if not fixes:
        raise DomainError("fixes is empty; name at least one fix and the terms it scales")
    variants: dict[str, dict[str, float]] = {"before": {}}
    for name, scale in fixes.items():
        variants[str(name)] = _fix_values(f"fixes[{name!r}]", scale)
    if len(fixes) > 1:
        together: dict[str, float] = {}
        for scale in list(variants.values())[1:]:
            for term, m in scale.items():
                together[term] = together.get(term, 1.0) * m
        variants["all fixes"] = together
    rows = []
    for label, scale in variants.items():
        t = {term: base.get(term, 0.0) * scale.get(term, 1.0) for term in FIX_TERMS}
        exposed = max(0.0, t["comm"] - t["compute"])
        rows.append({"label": label, "local_compute": t["compute"], "local_memory": t["data"],
                     "dispatch": t["overhead"], "exposed_comm": exposed, "sync": 0.0, "other": 0.0})
    out = pd.DataFrame(rows)
    out.insert(1, "rank", np.arange(len(out)))
    step_s = out[list(FLEET_LAW_TERMS)].sum(axis=1)
    if (step_s <= 0).any():
        raise DomainError("a variant's step takes zero time; give the step's terms in seconds")
    for name in FLEET_LAW_TERMS:
        out[name] = out[name] * 1e6
    out["step_wall_us"] = step_s * 1e6
    out["step_s"] = step_s
    out["saved_s"] = step_s.iloc[0] - step_s
    out["speedup"] = step_s.iloc[0] / step_s
    return out


def _fix_values(what: str, values: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for term, v in values.items():
        if term not in FIX_TERMS:
            raise DomainError(f"{what} names {term!r}, not one of the step terms {list(FIX_TERMS)}")
        x = float(v)
        if not np.isfinite(x) or x < 0:
            raise DomainError(f"{what}[{term!r}] must be a finite number >= 0; got {v!r}")
        out[term] = x
    return out
