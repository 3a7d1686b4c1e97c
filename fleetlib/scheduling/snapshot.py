"""Scheduling goodput from a pool snapshot given as shares of in-service capacity.

A snapshot states how the pool's in-service capacity splits at one moment (or averaged over a
window): the share assigned to jobs, and inside it the share held by gangs still waiting for their
remaining members.  Only complete allocations cross the scheduling boundary, so

* scheduling goodput ``S = assigned - incomplete``;
* the scheduling loss ``1 - S`` splits into capacity no job holds (``1 - assigned``) and capacity
  held by incomplete gangs (``incomplete``);
* atomic gang admission returns the incomplete share to the pool as free capacity, so it can lift
  S at most to ``S + incomplete`` -- and only if other jobs' complete allocations take every
  device it frees.

Time that complete allocations spend waiting for input has already crossed the scheduling boundary:
it is a runtime loss.  It is therefore not an argument of :func:`snapshot_scheduling_goodput`;
:func:`data_stall_from_capacity_share` converts it into the share of held time that runtime goodput
charges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, check_fraction

__all__ = [
    "CEILING_CONDITION",
    "SnapshotScheduling",
    "data_stall_from_capacity_share",
    "snapshot_scheduling_goodput",
]

#: The condition under which the atomic-admission ceiling is reached.
CEILING_CONDITION = (
    "upper bound: reached only if other jobs' complete allocations take every device that atomic "
    "gang admission frees; devices left free stay a scheduling loss"
)


@dataclass(frozen=True)
class SnapshotScheduling:
    """Scheduling goodput of a pool snapshot, its loss partition and its atomic-admission ceiling.

    Attributes
    ----------
    assigned_share
        Share of in-service capacity assigned to jobs, complete or not.
    incomplete_gang_share
        Share of in-service capacity held by gangs still waiting for members (inside
        ``assigned_share``).
    scheduling_goodput
        ``assigned_share - incomplete_gang_share``: the share held by complete allocations.
    losses
        ``{"unheld": 1 - assigned_share, "partial_gang_hold": incomplete_gang_share}``; with
        ``scheduling_goodput`` the parts sum to one.
    atomic_admission_ceiling
        ``scheduling_goodput + incomplete_gang_share``: the most atomic gang admission alone can
        reach (see ``ceiling_condition``).
    ceiling_condition
        When the ceiling holds.
    """

    assigned_share: float
    incomplete_gang_share: float
    scheduling_goodput: float
    losses: dict[str, float]
    atomic_admission_ceiling: float
    ceiling_condition: str = CEILING_CONDITION

    @property
    def S(self) -> float:
        """Scheduling goodput, the chapter's S."""
        return self.scheduling_goodput

    @property
    def scheduling_loss(self) -> float:
        """``1 - S``: the share of in-service capacity lost before any complete allocation."""
        return self.losses["unheld"] + self.losses["partial_gang_hold"]

    def to_factor(self, window: Window, *, convention: str = "scheduling, in-service capacity") -> Factor:
        """Return the snapshot as a scheduling :class:`~fleetlib.accounting.Factor` (denominator 1).

        Parameters
        ----------
        window
            The window the snapshot describes.
        convention
            Denominator convention; the snapshot's shares are of in-service capacity.

        Returns
        -------
        Factor
            Scheduling factor whose losses are ``unheld`` and ``partial_gang_hold``.
        """
        return Factor(boundary="scheduling", numerator=self.scheduling_goodput, denominator=1.0,
                      window=window, record="scheduler records (pool snapshot shares)",
                      convention=convention, numerator_unit="share of in-service capacity",
                      denominator_unit="share of in-service capacity", losses=dict(self.losses))

    def to_dict(self) -> dict[str, Any]:
        """Return the snapshot result as a JSON-ready dictionary."""
        out = dict(self.__dict__)
        out["losses"] = dict(self.losses)
        out["scheduling_loss"] = self.scheduling_loss
        return out


def snapshot_scheduling_goodput(assigned_share: float, incomplete_gang_share: float, *,
                                input_wait_share: None = None) -> SnapshotScheduling:
    """Scheduling goodput of a pool snapshot: assigned capacity minus partial-gang holds.

    A gang still waiting for members cannot run a synchronous step, so the capacity it holds is a
    scheduling loss even though a dashboard counts it as allocated.  Input waits inside complete
    allocations are not a scheduling loss at all (they are runtime loss), so they are not accepted.

    Parameters
    ----------
    assigned_share
        Share of in-service capacity assigned to jobs, including incomplete gangs; in [0, 1].
    incomplete_gang_share
        Share of in-service capacity held by incomplete gangs; in [0, ``assigned_share``].
    input_wait_share
        Refused.  Input waits lie inside complete allocations and are charged to runtime goodput;
        use :func:`data_stall_from_capacity_share`.

    Returns
    -------
    SnapshotScheduling
        S, the loss partition ``{unheld, partial_gang_hold}`` and the atomic-admission ceiling.

    Raises
    ------
    DomainError
        When a share lies outside [0, 1], the incomplete share exceeds the assigned share, or input
        waits are passed.

    Examples
    --------
    >>> snap = snapshot_scheduling_goodput(0.80, 0.15)
    >>> round(snap.S, 2), round(snap.losses["unheld"], 2), round(snap.atomic_admission_ceiling, 2)
    (0.65, 0.2, 0.8)
    """
    if input_wait_share is not None:
        raise DomainError(
            "input waits inside complete allocations have crossed the scheduling boundary: they are "
            "a runtime loss, not a scheduling loss. Leave them out of scheduling goodput and convert "
            "them with data_stall_from_capacity_share(input_wait_share, S)."
        )
    assigned = check_fraction("assigned share", assigned_share)
    incomplete = check_fraction("incomplete-gang share", incomplete_gang_share)
    if incomplete > assigned:
        raise DomainError(
            f"incomplete-gang share {incomplete} exceeds the assigned share {assigned}: capacity held by "
            "incomplete gangs is part of the assigned capacity"
        )
    s = assigned - incomplete
    return SnapshotScheduling(
        assigned_share=assigned,
        incomplete_gang_share=incomplete,
        scheduling_goodput=s,
        losses={"unheld": 1.0 - assigned, "partial_gang_hold": incomplete},
        # S + incomplete is the assigned share; taken directly so it never rounds above one.
        atomic_admission_ceiling=assigned,
    )


def data_stall_from_capacity_share(input_wait_share: float,
                                   scheduling_goodput: float | SnapshotScheduling) -> float:
    """Convert input waits given as a share of pool capacity into a share of held time.

    Input waits happen inside complete allocations, so runtime goodput charges them against held
    time, not against offered capacity: ``held-time share = capacity share / S``.

    Parameters
    ----------
    input_wait_share
        Share of in-service capacity spent by complete allocations waiting for input; in
        [0, ``scheduling_goodput``].
    scheduling_goodput
        The pool's scheduling goodput S (greater than zero), or a :class:`SnapshotScheduling`.

    Returns
    -------
    float
        Data stall ratio: the share of held time lost to input waits (a runtime loss).

    Examples
    --------
    >>> round(data_stall_from_capacity_share(0.05, 0.65), 4)
    0.0769
    """
    s_value = (scheduling_goodput.scheduling_goodput if isinstance(scheduling_goodput, SnapshotScheduling)
               else scheduling_goodput)
    s = check_fraction("scheduling goodput", s_value, allow_zero=False)
    wait = check_fraction("input-wait share of capacity", input_wait_share)
    if wait > s:
        raise DomainError(
            f"input-wait share {wait} exceeds scheduling goodput {s}: input waits lie inside complete "
            "allocations, which hold only the share S of capacity"
        )
    return wait / s
