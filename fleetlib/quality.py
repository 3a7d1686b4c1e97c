"""Errors and the row ledger that every reader and every formula in fleetlib reports through.

Three kinds of failure are kept apart so that a caller can tell them apart:

* :class:`InputError` -- a record (file row, log line, JSON entry) that cannot be read or repaired.
  Its message names the file, the row or line, the field and what was expected.
* :class:`DomainError` -- an argument outside the domain where a formula means anything (a goodput
  above one, a negative duration, a checkpoint interval longer than the MTBF).  Raised instead of
  returning NaN or a silently clipped number.
* :class:`WindowMismatchError` -- factors measured over different calendar windows were multiplied.

All three derive from :class:`FleetlibError` and from :class:`ValueError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "LEDGER_ACTIONS",
    "DomainError",
    "FleetlibError",
    "InputError",
    "Ledger",
    "LedgerEntry",
    "WindowMismatchError",
    "check_fraction",
    "check_nonnegative",
    "check_positive",
]


class FleetlibError(ValueError):
    """Base class of every error fleetlib raises on purpose."""


class InputError(FleetlibError):
    """A record that cannot be read or repaired.

    Parameters
    ----------
    message
        What was wrong and what was expected.
    file, row, field
        Where the problem is; each is optional but readers always give as many as they know.
    """

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 field: str | None = None) -> None:
        self.file = file
        self.row = row
        self.field = field
        where = ", ".join(
            part for part in (
                f"file {file}" if file is not None else "",
                f"row {row}" if row is not None else "",
                f"field {field!r}" if field is not None else "",
            ) if part
        )
        super().__init__(f"{where}: {message}" if where else message)


class DomainError(FleetlibError):
    """An argument outside the domain in which a formula has meaning."""


class WindowMismatchError(FleetlibError):
    """Factors measured over different calendar windows were combined without saying so."""


def check_fraction(name: str, value: float, *, allow_zero: bool = True) -> float:
    """Return ``value`` as a float if it lies in [0, 1]; raise :class:`DomainError` otherwise.

    Parameters
    ----------
    name
        Argument name used in the error message.
    value
        The number to check.
    allow_zero
        When False, zero is rejected too (for a factor that is divided by).

    Returns
    -------
    float
        The value, unchanged.
    """
    v = _finite(name, value)
    if v < 0.0 or v > 1.0:
        raise DomainError(f"{name} must be a fraction in [0, 1]; got {value!r}")
    if not allow_zero and v == 0.0:
        raise DomainError(f"{name} must be greater than 0 (it is divided by); got {value!r}")
    return v


def check_nonnegative(name: str, value: float) -> float:
    """Return ``value`` as a float if it is finite and >= 0; raise :class:`DomainError` otherwise."""
    v = _finite(name, value)
    if v < 0.0:
        raise DomainError(f"{name} must be >= 0; got {value!r}")
    return v


def check_positive(name: str, value: float) -> float:
    """Return ``value`` as a float if it is finite and > 0; raise :class:`DomainError` otherwise."""
    v = _finite(name, value)
    if v <= 0.0:
        raise DomainError(f"{name} must be > 0; got {value!r}")
    return v


def _finite(name: str, value: float) -> float:
    # float() would quietly accept True (as 1.0) and numeric text such as "0.48"; neither is a number
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):
        raise DomainError(f"{name} must be a number; got the boolean {value!r}")
    if isinstance(value, (str, bytes)):
        raise DomainError(f"{name} must be a number, not text; got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} must be a number; got {value!r}") from exc
    if not math.isfinite(v):
        raise DomainError(f"{name} must be finite; got {value!r}")
    return v


#: The two things a reader may do to a row other than keep it unchanged.
LEDGER_ACTIONS: tuple[str, ...] = ("repaired", "rejected")


@dataclass(frozen=True)
class LedgerEntry:
    """One repaired or rejected input row.

    Attributes
    ----------
    action
        ``"repaired"`` or ``"rejected"``.
    file, row, field
        Where the row came from (row or line number as the format counts them).
    reason
        For a rejection, why; for a repair, the named repair applied.
    """

    action: str
    file: str
    row: int | None
    field: str | None
    reason: str

    def __post_init__(self) -> None:
        if self.action not in LEDGER_ACTIONS:
            raise DomainError(f"ledger action must be one of {LEDGER_ACTIONS}; got {self.action!r}")
        if not self.reason:
            raise DomainError("a ledger entry must name its repair or its reason for rejection")

    def to_dict(self) -> dict[str, object]:
        """Return the entry as a JSON-ready dictionary."""
        return {"action": self.action, "file": self.file, "row": self.row, "field": self.field,
                "reason": self.reason}


@dataclass
class Ledger:
    """Accounts for every input row a reader saw: read = kept + repaired + rejected.

    Repaired rows are also kept in the output table; ``kept`` counts rows kept unchanged.
    """

    read: int = 0
    kept: int = 0
    entries: list[LedgerEntry] = field(default_factory=list)

    @property
    def repaired(self) -> int:
        """Number of rows kept after a named repair."""
        return sum(1 for e in self.entries if e.action == "repaired")

    @property
    def rejected(self) -> int:
        """Number of rows rejected, each with file, row, field and reason."""
        return sum(1 for e in self.entries if e.action == "rejected")

    def repair(self, file: str, row: int | None, field: str | None, repair: str) -> None:
        """Record a row kept after the named ``repair``."""
        self.entries.append(LedgerEntry("repaired", file, row, field, repair))

    def reject(self, file: str, row: int | None, field: str | None, reason: str) -> None:
        """Record a row rejected for ``reason``."""
        self.entries.append(LedgerEntry("rejected", file, row, field, reason))

    def extend(self, other: Ledger) -> None:
        """Add another ledger's counts and entries to this one."""
        self.read += other.read
        self.kept += other.kept
        self.entries.extend(other.entries)

    def balanced(self) -> bool:
        """Return True when every row read is kept, repaired or rejected exactly once."""
        return self.read == self.kept + self.repaired + self.rejected

    def to_dict(self) -> dict[str, object]:
        """Return counts and entries as a JSON-ready dictionary."""
        return {"read": self.read, "kept": self.kept, "repaired": self.repaired,
                "rejected": self.rejected, "entries": [e.to_dict() for e in self.entries]}

    @classmethod
    def merged(cls, ledgers: Iterable[Ledger]) -> Ledger:
        """Return one ledger holding the counts and entries of all ``ledgers``."""
        out = cls()
        for ledger in ledgers:
            out.extend(ledger)
        return out
