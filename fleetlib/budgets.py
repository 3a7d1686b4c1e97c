"""Orchestrator tiers, the planning shortfall and mixed overhead budgets (accounting helpers).

These read what an orchestrator or a planning sheet reports and say what it means in the three-factor
accounting: which ratio of allocated, active and productive tiers is runtime goodput (rule 29), how many
days a shortfall costs, and how a mixed overhead budget splits by factor before it is summed (rule 44).
Moved out of :mod:`fleetlib.accounting`, which re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from fleetlib._boundaries import BOUNDARIES, Boundary
from fleetlib._boundaries import PARTITION_RTOL as _PARTITION_RTOL
from fleetlib.quality import DomainError, check_fraction, check_nonnegative, check_positive

__all__ = [
    "OVERHEAD_FACTOR",
    "PRODUCTIVE_REFERENCES",
    "OverheadsByFactor",
    "TierRatios",
    "days_at_shortfall",
    "group_overheads_by_factor",
    "tier_ratios",
]

# ---------------------------------------------------------------------------------------------------
# Orchestrator tiers, planning shortfall and mixed overhead budgets
# ---------------------------------------------------------------------------------------------------

ProductiveReference = Literal["fault-free step rate", "hardware peak"]

#: Reference rates an orchestrator's productive tier can be normalised to.
PRODUCTIVE_REFERENCES: tuple[str, ...] = ("fault-free step rate", "hardware peak")


@dataclass(frozen=True)
class TierRatios:
    """Ratios between an orchestrator's allocated, active and productive tiers, with their meaning.

    Attributes
    ----------
    allocated, active, productive
        The three tiers as given (one unit for all three: devices or device-time).
    productive_reference
        The rate the productive tier was normalised to.
    active_to_allocated
        Kernel-active share of allocated capacity: evidence only, not a goodput boundary.
    productive_to_active
        Productive over active, or None when nothing was active; evidence only.
    productive_to_allocated
        The headline ratio.  Runtime goodput R when the productive tier is normalised to the job's
        fault-free step rate; R x P collapsed into one number when it is normalised to hardware peak.
    measures
        What ``productive_to_allocated`` is: ``"runtime goodput"`` or
        ``"runtime x program goodput (collapsed)"``.
    notes
        Caveats that travel with the numbers.
    """

    allocated: float
    active: float
    productive: float
    productive_reference: str
    active_to_allocated: float
    productive_to_active: float | None
    productive_to_allocated: float
    measures: str
    notes: tuple[str, ...]

    @property
    def is_runtime_goodput(self) -> bool:
        """True when ``productive_to_allocated`` is runtime goodput."""
        return self.productive_reference == "fault-free step rate"

    @property
    def runtime_goodput(self) -> float:
        """Runtime goodput R; refused when the productive tier is normalised to hardware peak."""
        if not self.is_runtime_goodput:
            raise DomainError(
                f"productive/allocated = {self.productive_to_allocated:.4g} is normalised to hardware "
                "peak, so it is runtime x program goodput collapsed into one number, not runtime "
                "goodput; renormalise the productive tier to the job's fault-free step rate"
            )
        return self.productive_to_allocated

    @property
    def job_product(self) -> float:
        """R x P; available only when the productive tier is normalised to hardware peak."""
        if self.is_runtime_goodput:
            raise DomainError(
                "productive/allocated is normalised to the fault-free step rate, so it is runtime "
                "goodput R alone; R x P needs program goodput from step traces"
            )
        return self.productive_to_allocated

    def to_dict(self) -> dict[str, Any]:
        """Return the ratios and their meaning as a JSON-ready dictionary."""
        out = dict(self.__dict__)
        out["notes"] = list(self.notes)
        return out


def tier_ratios(allocated: float, active: float, productive: float, *,
                productive_reference: ProductiveReference) -> TierRatios:
    """Read an orchestrator's allocated / active / productive tiers onto the goodput boundaries.

    Productive over allocated is runtime goodput only when the productive tier counts retained work
    at the job's own fault-free step rate; normalised to hardware peak, the same ratio folds runtime
    and program goodput into one number and hides which boundary lost the capacity.  The active tier
    (kernel-active devices) is diagnostic evidence, not a boundary.

    Parameters
    ----------
    allocated
        Capacity held by complete allocations (partial gangs are a scheduling loss and must not be
        counted here), greater than zero.
    active
        Kernel-active capacity, between zero and ``allocated``.
    productive
        Retained work expressed as capacity at the reference rate, between zero and ``allocated``.
    productive_reference
        ``"fault-free step rate"`` or ``"hardware peak"``; there is no default because the answer
        changes meaning with it.

    Returns
    -------
    TierRatios
        The three ratios, what the headline ratio measures, and notes.

    Examples
    --------
    >>> t = tier_ratios(500, 350, 280, productive_reference="fault-free step rate")
    >>> round(t.runtime_goodput, 2)
    0.56
    """
    if productive_reference not in PRODUCTIVE_REFERENCES:
        raise DomainError(f"productive_reference must be one of {PRODUCTIVE_REFERENCES}; "
                          f"got {productive_reference!r}")
    alloc = check_positive("allocated capacity", allocated)
    act = check_nonnegative("active capacity", active)
    prod = check_nonnegative("productive capacity", productive)
    if act > alloc:
        raise DomainError(f"active capacity {act} exceeds allocated capacity {alloc}")
    if prod > alloc:
        raise DomainError(f"productive capacity {prod} exceeds allocated capacity {alloc}")
    notes = ["active tier is evidence (kernel-active counters), not a goodput boundary",
             "allocated must count complete allocations only"]
    if productive_reference == "fault-free step rate":
        measures = "runtime goodput"
    else:
        measures = "runtime x program goodput (collapsed)"
        notes.append("productive tier normalised to hardware peak: productive/allocated is R x P, "
                     "not runtime goodput")
    return TierRatios(
        allocated=alloc, active=act, productive=prod, productive_reference=productive_reference,
        active_to_allocated=act / alloc,
        productive_to_active=None if act == 0.0 else prod / act,
        productive_to_allocated=prod / alloc,
        measures=measures, notes=tuple(notes),
    )


def days_at_shortfall(planned_days: float | ArrayLike, shortfall: float | ArrayLike) -> float | np.ndarray:
    """Days a fixed amount of work takes when useful throughput falls short of the planned rate.

    Work is fixed, so time scales with the inverse of throughput: ``planned_days / (1 - shortfall)``.
    The tempting ``planned_days * (1 + shortfall)`` understates it (33 rather than 33.3 days at a
    10 % shortfall on 30 days, 36 rather than 37.5 at 20 %).

    Parameters
    ----------
    planned_days
        Duration the plan assumed, in days, >= 0 (scalar or array).
    shortfall
        Fraction by which useful throughput falls below the planned rate, in [0, 1) (scalar or array;
        broadcast against ``planned_days``).

    Returns
    -------
    float or numpy.ndarray
        Days the same work takes; a float when both inputs are scalars.

    Examples
    --------
    >>> round(days_at_shortfall(30, 0.10), 2), days_at_shortfall(30, 0.20)
    (33.33, 37.5)
    """
    days = np.asarray(planned_days, dtype=float)
    short = np.asarray(shortfall, dtype=float)
    if not (np.all(np.isfinite(days)) and np.all(np.isfinite(short))):
        raise DomainError("planned_days and shortfall must be finite")
    if np.any(days < 0.0):
        raise DomainError(f"planned_days must be >= 0; got {planned_days!r}")
    if np.any((short < 0.0) | (short >= 1.0)):
        raise DomainError(f"shortfall must lie in [0, 1) (at 1 no useful work is done and the work never "
                          f"finishes); got {shortfall!r}")
    out = days / (1.0 - short)
    if out.ndim == 0:
        return float(out)
    return out


#: Overhead categories of a planning budget and the boundary whose factor each one lowers.
OVERHEAD_FACTOR: dict[str, Boundary] = {
    # before a complete allocation exists
    "scheduling_delay": "scheduling",
    "partial_gang_hold": "scheduling",
    "fragmentation": "scheduling",
    "reservation_drain": "scheduling",
    "unallocated": "scheduling",
    "topology_wait": "scheduling",
    # inside a complete allocation, no retained step
    "checkpoints": "runtime",
    "checkpoint": "runtime",
    "synchronous_checkpoint": "runtime",
    "recovery": "runtime",
    "failure_recovery": "runtime",
    "preemption": "runtime",
    "startup": "runtime",
    "input_wait": "runtime",
    "input_stall": "runtime",
    "rework": "runtime",
    "idle_reservation": "runtime",
    "zombie": "runtime",
    "rescale_pause": "runtime",
    # inside retained steps, below the ideal rate
    "bubbles": "program",
    "pipeline_bubbles": "program",
    "pipeline_bubble": "program",
    "exposed_communication": "program",
    "stragglers": "program",
    "straggler": "program",
    "recomputation": "program",
    "memory_stalls": "program",
    "host_dispatch": "program",
    "async_checkpoint_contention": "program",
    "steady_state_recompilation": "program",
}


@dataclass(frozen=True)
class OverheadsByFactor:
    """A mixed overhead budget split by boundary before anything is summed.

    Attributes
    ----------
    terms
        Each category as given, with the boundary it was assigned to.
    by_factor
        Summed loss per boundary (``scheduling``, ``runtime``, ``program``; 0.0 where none was given).
    first_order_factors
        ``1 - by_factor[b]`` per boundary: the first-order factor value the budget implies.
    naive_total
        The sum of every term across boundaries -- what the pitfall subtracts from one ratio.  Shown
        for contrast only; it is not a loss of any single factor.
    """

    terms: dict[str, str]
    by_factor: dict[str, float]
    first_order_factors: dict[str, float]
    naive_total: float

    def to_dict(self) -> dict[str, Any]:
        """Return the grouped budget as a JSON-ready dictionary."""
        return dict(self.__dict__)


def _overhead_key(name: str) -> str:
    return "_".join(str(name).strip().lower().replace("-", " ").split())


def group_overheads_by_factor(overheads: Mapping[str, float], *,
                              extra_categories: Mapping[str, Boundary] | None = None) -> OverheadsByFactor:
    """Split a mixed overhead budget into its goodput factors, then sum within each factor.

    A planning budget that reserves a few percent each for bubbles, checkpoints, recovery,
    scheduling delay and preemption cannot be subtracted from one ratio: bubbles lie inside
    retained steps (program), scheduling delay precedes the complete allocation (scheduling), and
    only checkpoints, recovery and preemption are runtime losses.

    Parameters
    ----------
    overheads
        Category -> loss as a fraction of that category's own factor denominator (first-order
        shares).  Names are matched case-insensitively with spaces and hyphens read as underscores;
        known names are the keys of :data:`OVERHEAD_FACTOR`.
    extra_categories
        Additional category -> boundary assignments for names the vocabulary lacks.

    Returns
    -------
    OverheadsByFactor
        Per-term assignment, per-factor sums and the first-order factor values they imply.

    Raises
    ------
    DomainError
        For an unknown category, a share outside [0, 1], or a factor whose shares sum above one.

    Examples
    --------
    >>> g = group_overheads_by_factor({"pipeline bubbles": 0.05, "checkpoints": 0.03,
    ...                                "recovery": 0.02, "scheduling delay": 0.04, "preemption": 0.01})
    >>> {k: round(v, 2) for k, v in g.by_factor.items()}
    {'scheduling': 0.04, 'runtime': 0.06, 'program': 0.05}
    """
    vocabulary: dict[str, str] = dict(OVERHEAD_FACTOR)
    for name, boundary in (extra_categories or {}).items():
        if boundary not in BOUNDARIES:
            raise DomainError(f"extra category {name!r} must map to one of {BOUNDARIES}; got {boundary!r}")
        vocabulary[_overhead_key(name)] = boundary
    terms: dict[str, str] = {}
    by_factor = dict.fromkeys(BOUNDARIES, 0.0)
    total = 0.0
    for name, amount in overheads.items():
        key = _overhead_key(name)
        if key not in vocabulary:
            hint = ""
            if key in ("queue_wait", "queue_delay"):
                hint = (" A job's queue wait costs time to result, not fleet goodput, unless capacity "
                        "sat outside complete allocations meanwhile; call that part 'scheduling delay'.")
            raise DomainError(
                f"overhead category {name!r} is not assigned to a goodput factor; known categories: "
                f"{sorted(vocabulary)}; pass extra_categories={{{name!r}: <boundary>}} to assign it.{hint}"
            )
        share = check_fraction(f"overhead {name!r}", amount)
        boundary = vocabulary[key]
        terms[str(name)] = boundary
        by_factor[boundary] += share
        total += share
    for boundary, loss in by_factor.items():
        if loss > 1.0 + _PARTITION_RTOL:
            raise DomainError(f"{boundary} overheads sum to {loss:.4g}, more than the whole denominator")
    # sums within rounding of one leave a factor of zero, not a tiny negative number
    first_order = {b: max(0.0, 1.0 - v) for b, v in by_factor.items()}
    return OverheadsByFactor(terms=terms, by_factor=by_factor, first_order_factors=first_order,
                             naive_total=total)
