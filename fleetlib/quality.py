"""Errors, the one row ledger and the one row-book that every reader and formula in fleetlib reports through.

Three kinds of failure are kept apart so that a caller can tell them apart:

* :class:`InputError` -- a record (file row, log line, JSON entry) that cannot be read or repaired.
  Its message names the file, the row or line, the field and what was expected.
* :class:`DomainError` -- an argument outside the domain where a formula means anything (a goodput
  above one, a negative duration, a checkpoint interval longer than the MTBF).  Raised instead of
  returning NaN or a silently clipped number.
* :class:`WindowMismatchError` -- factors measured over different calendar windows were multiplied.
* :class:`ChainMismatchError` -- a factor's denominator is not the previous factor's numerator.

All four derive from :class:`FleetlibError` and from :class:`ValueError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "LEDGER_ACTIONS",
    "ChainMismatchError",
    "DomainError",
    "Flag",
    "FleetlibError",
    "InputError",
    "Ledger",
    "LedgerEntry",
    "RowBook",
    "WindowMismatchError",
    "check_fraction",
    "check_nonnegative",
    "check_positive",
]


class FleetlibError(ValueError):
    """Base class of every error fleetlib raises on purpose."""


#: The longest message, reason or flag text fleetlib keeps (characters).  Readers quote a field's
#: value shortened (:func:`fleetlib._io.excerpt`); this bound holds for every text whatever it quotes,
#: so no error, ledger or report carries more than a glimpse of a file's contents.
MESSAGE_LIMIT = 600


def bounded_text(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Return ``text``, or its head and tail with the middle cut and counted when it exceeds ``limit``.

    The tail is kept because messages end with what was expected.
    """
    if len(text) <= limit:
        return text
    head, tail = (limit * 2) // 3, limit // 6
    return f"{text[:head]} [... {len(text) - head - tail:,} characters cut ...] {text[-tail:]}"


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
        message = bounded_text(str(message))
        self.message = message
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


class ChainMismatchError(FleetlibError):
    """A factor's denominator is not the previous factor's numerator, so the product does not telescope."""


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


#: The two things a reader may do to a row other than keep it unchanged.  A row kept with a note is
#: *kept* and carries a :class:`Flag`; a flag is never a third action.
LEDGER_ACTIONS: tuple[str, ...] = ("repaired", "rejected")


@dataclass(frozen=True)
class LedgerEntry:
    """One repaired or rejected input row.

    Attributes
    ----------
    action
        ``"repaired"`` or ``"rejected"``.
    file, row, field
        Where the row came from (row or line number as the format counts them, 1-based).
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
        object.__setattr__(self, "reason", bounded_text(str(self.reason)))

    def to_dict(self) -> dict[str, object]:
        """Return the entry as a JSON-ready dictionary."""
        return {"action": self.action, "file": self.file, "row": self.row, "field": self.field,
                "reason": self.reason}


@dataclass(frozen=True)
class Flag:
    """A note beside the tables: a row kept with a remark, or an interpretation a user should know.

    A flag changes no row count.  It says what was found and what was done about it, and where:
    as many of ``file``, ``row`` (1-based, as the file counts rows or lines), ``field``, ``job_id``,
    ``attempt``, ``rank`` and ``time`` as the reader knows.

    Attributes
    ----------
    code
        Short machine-readable name, e.g. ``"restart_inferred_from_step_numbers"``.
    message
        What was found and what was done about it.
    file, row, field
        Where in the input (each optional).
    job_id, attempt, rank
        Which job, attempt or rank it concerns (each optional).
    time
        When, as an ISO-8601 UTC string (None when not tied to an instant).
    """

    code: str
    message: str
    file: str | None = None
    row: int | None = None
    field: str | None = None
    job_id: str | None = None
    attempt: int | None = None
    rank: int | None = None
    time: str | None = None

    def __post_init__(self) -> None:
        if not self.code or not self.message:
            raise DomainError("a flag needs a code and a message")
        object.__setattr__(self, "message", bounded_text(str(self.message)))

    def to_dict(self) -> dict[str, Any]:
        """Return the flag as a JSON-ready dictionary (every key present; unknown ones are None)."""
        return {"code": self.code, "message": self.message, "file": self.file, "row": self.row,
                "field": self.field, "job_id": self.job_id, "attempt": self.attempt,
                "rank": self.rank, "time": self.time}


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        if value != value:  # NaN / NaT
            return None
    except (TypeError, ValueError):  # pragma: no cover - exotic scalars
        pass
    return int(value)


def _opt_time(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    import pandas as pd  # local: keeps `import fleetlib.quality` light

    if pd.isna(value):
        return None
    return pd.Timestamp(value).isoformat()


@dataclass
class Ledger:
    """Accounts for every input row a reader saw: read = kept + repaired + rejected.

    Repaired rows are also kept in the output table; ``kept`` counts rows kept unchanged.  ``flags``
    are notes beside the tables (kept-with-a-note rows and interpretations); they change no count.
    ``unused`` counts, by kind, the records that were read and kept but that no measurement uses
    (a trace's flow arrows, metadata and instant events, say): they are part of ``kept``, so the
    ledger's ``read`` equals the number of records in the file.
    """

    read: int = 0
    kept: int = 0
    entries: list[LedgerEntry] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    unused: dict[str, int] = field(default_factory=dict)

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

    def flag(self, code: str, message: str, *, file: str | None = None, row: int | None = None,
             field: str | None = None, job_id: Any = None, attempt: Any = None, rank: Any = None,
             time: Any = None) -> None:
        """Record a :class:`Flag` (a note beside the tables; it changes no row count).

        Parameters
        ----------
        code, message
            What kind of note and what it says.
        file, row, field, job_id, attempt, rank, time
            Where it applies; ``time`` may be a timestamp or ISO text, ``attempt``/``rank`` ints.
        """
        self.flags.append(Flag(code, message, None if file is None else str(file), _opt_int(row),
                               None if field is None else str(field),
                               None if job_id is None else str(job_id), _opt_int(attempt),
                               _opt_int(rank), _opt_time(time)))

    def count_unused(self, kind: str, n: int) -> None:
        """Note that ``n`` kept records of ``kind`` are not used by any measurement."""
        if n:
            self.unused[kind] = self.unused.get(kind, 0) + int(n)

    def codes(self) -> list[str]:
        """Return the distinct flag codes, in the order first raised."""
        return list(dict.fromkeys(f.code for f in self.flags))

    def extend(self, other: Ledger) -> None:
        """Add another ledger's counts, entries, flags and unused counts to this one."""
        self.read += other.read
        self.kept += other.kept
        self.entries.extend(other.entries)
        self.flags.extend(getattr(other, "flags", ()))
        for kind, n in getattr(other, "unused", {}).items():
            self.count_unused(kind, n)

    def balanced(self) -> bool:
        """Return True when every row read is kept, repaired or rejected exactly once."""
        return self.read == self.kept + self.repaired + self.rejected

    def summary(self, first: int = 3) -> str:
        """Return the counts and the first ``first`` rejections (or repairs) as one line.

        For a message that refuses because of the ledger: the reader sees why without a ledger
        printed anywhere else.
        """
        head = (f"ledger: {self.read:,} read = {self.kept:,} kept + {self.repaired:,} repaired + "
                f"{self.rejected:,} rejected")
        shown = [e for e in self.entries if e.action == "rejected"] or list(self.entries)
        parts = []
        for e in shown[:first]:
            where = ", ".join(p for p in (Path(e.file).name, f"row {e.row}" if e.row is not None else "",
                                          f"field {e.field!r}" if e.field else "") if p)
            reason = e.reason if len(e.reason) <= 120 else e.reason[:117] + "..."
            parts.append(f"{where}: {e.action} ({reason})")
        more = len(shown) - first
        tail = f"; and {more:,} more" if more > 0 else ""
        return head + ("; first: " + "; ".join(parts) + tail if parts else "")

    def to_dict(self) -> dict[str, object]:
        """Return counts, entries, flags and unused counts as a JSON-ready dictionary."""
        return {"read": self.read, "kept": self.kept, "repaired": self.repaired,
                "rejected": self.rejected, "entries": [e.to_dict() for e in self.entries],
                "flags": [f.to_dict() for f in self.flags], "unused": dict(self.unused)}

    @classmethod
    def merged(cls, ledgers: Iterable[Ledger]) -> Ledger:
        """Return one ledger holding the counts, entries and flags of all ``ledgers``."""
        out = cls()
        for ledger in ledgers:
            out.extend(ledger)
        return out


class RowBook:
    """What happened to each record of one input file, settled into a :class:`Ledger` at the end.

    Every reader uses one book per file.  Records are addressed by their *position* in the parsed
    table (0 .. n-1); ``rows`` maps positions to the row or line number the file itself shows
    (1-based), which is what every ledger entry and error reports.  Calls are vectorised: a boolean
    mask over the positions, or an integer array of positions, with one reason for all or one per
    record.

    Each record ends in exactly one of three states: rejected (the first rejection wins), repaired
    (every named repair of a kept record is joined into one entry) or kept.  Flags go beside.

    Parameters
    ----------
    file
        The file's name as the user gave it.
    rows
        The number of records (rows are then 1 .. n), or each record's row number in the file.
    """

    def __init__(self, file: str, rows: int | np.ndarray | Iterable[int]) -> None:
        self.file = str(file)
        if isinstance(rows, (int, np.integer)):
            self.rows = np.arange(1, int(rows) + 1, dtype=np.int64)
        else:
            self.rows = np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.int64)
        self.n = int(self.rows.size)
        self._reject_code = np.zeros(self.n, dtype=np.int32)  # 0: not rejected; k: self._rejects[k-1]
        self._rejects: list[tuple[str | None, str | np.ndarray, np.ndarray | None]] = []
        self._repairs: list[tuple[np.ndarray, str | None, str | np.ndarray]] = []
        self._flags: list[tuple[np.ndarray, str, str | np.ndarray, dict[str, Any]]] = []

    # -- addressing ---------------------------------------------------------------------------
    def _positions(self, where: Any) -> np.ndarray:
        arr = np.asarray(where)
        if arr.dtype == bool:
            if arr.shape != (self.n,):
                raise AssertionError(f"{self.file}: mask of length {arr.size} for {self.n} records")
            return np.flatnonzero(arr)
        return np.atleast_1d(arr.astype(np.int64, copy=False))

    def positions_of_rows(self, rows: Any) -> np.ndarray:
        """Return the positions of the given file row numbers (each must be in the book)."""
        rows = np.atleast_1d(np.asarray(rows, dtype=np.int64))
        order = np.argsort(self.rows, kind="stable")
        idx = np.searchsorted(self.rows, rows, sorter=order)
        idx = np.minimum(idx, max(self.n - 1, 0))
        pos = order[idx] if self.n else idx
        if rows.size and (self.n == 0 or not np.array_equal(self.rows[pos], rows)):
            raise AssertionError(f"{self.file}: row numbers not in the book")  # programming error
        return pos

    @staticmethod
    def _texts(reasons: Any, n: int) -> str | np.ndarray:
        if isinstance(reasons, str):
            return reasons
        out = np.asarray([str(r) for r in (reasons.tolist() if hasattr(reasons, "tolist") else reasons)],
                         dtype=object)
        if out.size != n:
            raise AssertionError("reasons and records differ in length")  # programming error
        return out

    # -- outcomes -----------------------------------------------------------------------------
    def reject(self, where: Any, field: str | None, reasons: Any) -> None:
        """Reject the records at ``where`` (mask or positions) unless already rejected."""
        pos = self._positions(where)
        if pos.size == 0:
            return
        texts = self._texts(reasons, pos.size)
        fresh = self._reject_code[pos] == 0
        if not fresh.any():
            return
        # a position named twice in one call keeps its first reason
        _, first = np.unique(pos, return_index=True)
        keep = np.zeros(pos.size, dtype=bool)
        keep[first] = True
        keep &= fresh
        pos = pos[keep]
        self._rejects.append((field, texts if isinstance(texts, str) else texts[keep], pos))
        self._reject_code[pos] = len(self._rejects)

    def repair(self, where: Any, field: str | None, reasons: Any) -> None:
        """Record a named repair of the records at ``where`` (joined with their other repairs)."""
        pos = self._positions(where)
        if pos.size:
            self._repairs.append((pos, field, self._texts(reasons, pos.size)))

    def flag(self, where: Any, code: str, reasons: Any, **context: Any) -> None:
        """Flag the records at ``where``: kept, with a note (one :class:`Flag` per record).

        ``context`` may give ``field`` and per-record (or scalar) ``job_id``, ``attempt``, ``rank``
        and ``time`` for the flags.
        """
        pos = self._positions(where)
        if pos.size:
            self._flags.append((pos, code, self._texts(reasons, pos.size), context))

    @property
    def rejected(self) -> np.ndarray:
        """Boolean mask of the records rejected so far."""
        return self._reject_code > 0

    @property
    def any_rejected(self) -> bool:
        """True once any record has been rejected."""
        return bool(self._rejects)

    # -- settlement ---------------------------------------------------------------------------
    def close(self, ledger: Ledger) -> np.ndarray:
        """Write this file's counts, entries and flags into ``ledger``; return the keep mask.

        Entries are written in file order: rejections first, then repairs, then flags.
        """
        ledger.read += self.n
        rejected = self.rejected
        if self._rejects:
            pos = np.flatnonzero(rejected)
            codes = self._reject_code[pos]
            # the text of each rejected record: its chunk's scalar reason or its own entry
            where_in_chunk: dict[int, dict[int, int]] = {}
            for k, (_, texts, cpos) in enumerate(self._rejects, start=1):
                if not isinstance(texts, str):
                    where_in_chunk[k] = {int(p): i for i, p in enumerate(cpos.tolist())}
            for p, k in zip(pos.tolist(), codes.tolist(), strict=True):
                fld, texts, _ = self._rejects[k - 1]
                text = texts if isinstance(texts, str) else str(texts[where_in_chunk[k][p]])
                ledger.reject(self.file, int(self.rows[p]), fld, text)
        n_repaired = 0
        if self._repairs:
            per_row: dict[int, list[tuple[str | None, str]]] = {}
            for pos, fld, texts in self._repairs:
                live = ~rejected[pos]
                if not live.any():
                    continue
                if isinstance(texts, str):
                    for p in pos[live].tolist():
                        per_row.setdefault(p, []).append((fld, texts))
                else:
                    for p, t in zip(pos[live].tolist(), texts[live].tolist(), strict=True):
                        per_row.setdefault(p, []).append((fld, t))
            for p in sorted(per_row):
                items = per_row[p]
                fields = ",".join(dict.fromkeys(f for f, _ in items if f)) or None
                reasons = "; ".join(dict.fromkeys(t for _, t in items))
                ledger.repair(self.file, int(self.rows[p]), fields, reasons)
            n_repaired = len(per_row)
        ledger.kept += self.n - int(rejected.sum()) - n_repaired
        for pos, code, texts, ctx in self._flags:
            per = {k: v for k, v in ctx.items() if k != "field"}
            for i, p in enumerate(pos.tolist()):
                extra = {k: (v[i] if isinstance(v, (list, tuple, np.ndarray)) else v) for k, v in per.items()}
                ledger.flag(code, texts if isinstance(texts, str) else str(texts[i]), file=self.file,
                            row=int(self.rows[p]), field=ctx.get("field"), **extra)
        return ~rejected
