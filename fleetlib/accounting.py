"""The goodput accounting: factors with contracts, their product, loss shares, levers, trades and cost.

ML productivity goodput (MPG) is the product of three factors, each measured on one boundary:

=============  ================================================  ==========================================
factor         numerator / denominator                           record that settles it
=============  ================================================  ==========================================
scheduling S   device-time held by complete allocations /        scheduler records
               in-service capacity-time
runtime R      retained steps x fault-free step time /           job timeline
               held time (gang complete -> release)
program P      ideal time of the retained steps /                step traces (MFU, or MBU for decode)
               their actual productive time
=============  ================================================  ==========================================

Each denominator is the previous numerator, so the product telescopes to ideal-rate useful time over
offered capacity-time -- but only when the three factors share one calendar window (the program factor
may be sampled inside it).  :func:`mpg` enforces that.

Two layers live here:

* plain-number functions (``loss_shares``, ``marginal_values``, ``rank_levers``, ``trade``,
  ``cost_per_useful_hour`` ...) that take factor values as floats and validate them;
* :class:`Factor` and :func:`mpg`, which carry and check the measurement contract.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from fleetlib._boundaries import BOUNDARIES, DEFAULT_RECORD, Boundary
from fleetlib._boundaries import PARTITION_RTOL as _PARTITION_RTOL
from fleetlib.quality import (
    ChainMismatchError,
    DomainError,
    WindowMismatchError,
    check_fraction,
    check_nonnegative,
    check_positive,
)

__all__ = [
    "BOUNDARIES",
    "CHAIN_RTOL",
    "LEVER_COLUMNS",
    "OVERHEAD_FACTOR",
    "PRODUCTIVE_REFERENCES",
    "Factor",
    "GoodputProduct",
    "LeverGain",
    "OverheadsByFactor",
    "TierRatios",
    "TradeResult",
    "Window",
    "cost_per_useful_hour",
    "days_at_shortfall",
    "group_overheads_by_factor",
    "held_hours_chargeback",
    "job_product",
    "levers_frame",
    "loss_shares",
    "marginal_values",
    "mpg",
    "parse_exclusions",
    "rank_levers",
    "spot_cost_per_useful_hour",
    "tier_ratios",
    "time_to_result",
    "trade",
]



# ---------------------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The calendar window a factor was measured over, with the stretches left out of it.

    A measured window has timezone-aware ``start`` and ``end`` (``[start, end)``).  A nominal window
    (a worked example, a scenario file) has only a ``label``; two nominal windows are the same window
    when their labels are equal.

    A measured window may exclude stretches of itself (maintenance, an incident, a holiday freeze):
    ``exclusions`` are half-open intervals ``[a, b)`` inside ``[start, end)``, sorted, none
    overlapping another (overlapping exclusions are refused, not merged: give their union as one).
    Excluded time leaves every factor's numerator and denominator: each rung measures the included
    sub-windows (:attr:`pieces`) with its one window rule and adds the sums.  The window keeps its
    ``start`` and ``end``; :attr:`excluded_s` says how much time was left out.

    Parameters
    ----------
    label
        Human-readable name of the window, e.g. ``"running example, one held week"``.
    start, end
        Bounds of a measured window, timezone-aware; both or neither.
    exclusions
        ``(a, b)`` pairs of timezone-aware times inside ``[start, end)`` (measured windows only);
        see :meth:`excluding` for the accepted shapes and the errors.
    """

    label: str
    start: pd.Timestamp | None = None
    end: pd.Timestamp | None = None
    exclusions: tuple[tuple[pd.Timestamp, pd.Timestamp], ...] = ()

    def __post_init__(self) -> None:
        if (self.start is None) != (self.end is None):
            raise DomainError("a window needs both start and end, or neither (a nominal window)")
        if self.start is not None:
            start, end = pd.Timestamp(self.start), pd.Timestamp(self.end)
            if start.tzinfo is None or end.tzinfo is None:
                raise DomainError(f"window {self.label!r}: start and end must be timezone-aware")
            if end <= start:
                raise DomainError(f"window {self.label!r}: end {end} must be after start {start}")
            object.__setattr__(self, "start", start.tz_convert("UTC"))
            object.__setattr__(self, "end", end.tz_convert("UTC"))
        if self.exclusions:
            if self.start is None or self.end is None:
                raise DomainError(f"window {self.label!r} is nominal: only a measured window can exclude "
                                  "time")
            object.__setattr__(self, "exclusions", _checked_exclusions(self.start, self.end,
                                                                      self.exclusions))
        else:
            object.__setattr__(self, "exclusions", ())

    @classmethod
    def nominal(cls, label: str) -> Window:
        """Return a window known only by its label (worked examples, scenarios)."""
        return cls(label=label)

    @classmethod
    def between(cls, start: Any, end: Any, label: str | None = None) -> Window:
        """Return a measured window ``[start, end)``; naive times are rejected."""
        s, e = pd.Timestamp(start), pd.Timestamp(end)
        return cls(label=label or f"{s.isoformat()} .. {e.isoformat()}", start=s, end=e)

    @classmethod
    def parse(cls, value: Any, *, label: str | None = None, exclude: Any = None) -> Window | None:
        """Return ``value`` as a window: the one window parser of the library, CLI and notebooks.

        Parameters
        ----------
        value
            ``None`` (no window: returns None); a :class:`Window` (returned as it is); a
            ``(start, end)`` pair of ISO 8601 texts, timestamps or datetimes, each with a zone; or
            one ISO 8601 interval text ``"START/END"`` (``"START .. END"`` is taken too).
        label
            Label of the returned window (default: ``"START .. END"`` in UTC).
        exclude
            None (keep the exclusions ``value`` has: none unless it is a :class:`Window`), or the
            exclusions of the returned window, replacing any ``value`` has (see :meth:`excluding`).
            Exclusions without a window are refused.

        Returns
        -------
        Window or None
            A measured window in UTC, or None when ``value`` is None.

        Raises
        ------
        DomainError
            A time that cannot be parsed, a time without a zone, an end not after its start, or a
            value of another shape.
        """
        if value is None:
            if exclude is not None and any(True for _ in exclude):
                raise DomainError("exclusions need a measured window to lie in: give the window too")
            return None
        if isinstance(value, Window):
            return value if exclude is None else value.excluding(exclude)
        start, end = _parse_interval("window", value)
        win = cls(label=label or f"{start.isoformat()} .. {end.isoformat()}", start=start, end=end)
        return win if exclude is None else win.excluding(exclude)

    def excluding(self, exclude: Any, *, clip: bool = False) -> Window:
        """Return this window with ``exclude`` as its exclusions (replacing any it has).

        Parameters
        ----------
        exclude
            An iterable of exclusions, each a ``(start, end)`` pair, a ``{"start": ..., "end": ...}``
            mapping or a ``"START/END"`` text, with times as :meth:`parse` takes them (ISO 8601 with a
            zone, timestamps, datetimes); see :func:`parse_exclusions`.  An empty iterable leaves no
            exclusion.
        clip
            False (default): an exclusion not inside the window is an error.  True: each exclusion is
            cut to the window and one wholly outside it excludes nothing (exclusions stated for a
            fleet, applied to a sub-window of it: a day, a ``--window`` narrower than the manifest's).

        Returns
        -------
        Window
            Same label and bounds, the exclusions sorted by start.

        Raises
        ------
        DomainError
            One line for the first bad exclusion: a time that cannot be parsed or has no zone, an
            end not after its start, an exclusion not inside the window, two exclusions that overlap
            (refused, not merged), exclusions covering the whole window, or a nominal window.
        """
        pairs = parse_exclusions(exclude)
        if clip and pairs:
            if self.start is None or self.end is None:
                raise DomainError(f"window {self.label!r} is nominal: only a measured window can exclude "
                                  "time")
            lo, hi = self.start, self.end
            pairs = tuple((max(a, lo), min(b, hi)) for a, b in pairs if a < hi and b > lo)
        return Window(label=self.label, start=self.start, end=self.end, exclusions=pairs)

    @property
    def is_nominal(self) -> bool:
        """True when the window has no timestamps."""
        return self.start is None

    @property
    def duration_s(self) -> float | None:
        """Length of a measured window in seconds (``end - start``, exclusions included), or None."""
        if self.start is None or self.end is None:
            return None
        return (self.end - self.start).total_seconds()

    @property
    def excluded_s(self) -> float:
        """Seconds the exclusions leave out of the window (0.0 without exclusions)."""
        return math.fsum((b - a).total_seconds() for a, b in self.exclusions)

    @property
    def included_s(self) -> float | None:
        """Seconds the window measures: its length less :attr:`excluded_s` (None when nominal)."""
        span = self.duration_s
        return None if span is None else span - self.excluded_s

    @property
    def pieces(self) -> tuple[tuple[pd.Timestamp, pd.Timestamp], ...]:
        """The included sub-windows ``[a, b)``, in order: the window itself when nothing is excluded.

        A measurement over the window is the sum of the same measurement over these pieces.
        """
        if self.start is None or self.end is None:
            return ()
        out = []
        at = self.start
        for a, b in self.exclusions:
            if a > at:
                out.append((at, a))
            at = b
        if at < self.end:
            out.append((at, self.end))
        return tuple(out)

    def same_as(self, other: Window) -> bool:
        """Return True when both describe the same calendar window (exclusions included)."""
        if self.is_nominal or other.is_nominal:
            return self.is_nominal and other.is_nominal and self.label == other.label
        return self.start == other.start and self.end == other.end and self.exclusions == other.exclusions

    def contains(self, other: Window) -> bool:
        """Return True when ``other`` lies inside this window's included time (a sample taken within it)."""
        if self.same_as(other):
            return True
        if self.is_nominal or other.is_nominal:
            return False
        assert other.start is not None and other.end is not None
        return any(a <= other.start and other.end <= b for a, b in self.pieces)

    def describe(self) -> str:
        """Return the label, with the exclusions when there are any (for messages and text output)."""
        if not self.exclusions:
            return self.label
        return f"{self.label} excluding {_exclusions_text(self.exclusions)}"

    def exclusion_note(self) -> str | None:
        """Return the ledger's line on the excluded time (None when nothing is excluded).

        Every rung adds it to its ledger as an ``excluded_time`` flag, so excluded time is never
        dropped silently.
        """
        if not self.exclusions:
            return None
        return (f"{len(self.exclusions)} interval(s) excluded, {self.excluded_s:g} s of the window's "
                f"{self.duration_s:g} s, from every numerator and denominator: "
                f"{_exclusions_text(self.exclusions)}")

    def to_dict(self) -> dict[str, Any]:
        """Return the window as a JSON-ready dictionary.

        ``exclusions`` lists the excluded intervals (``start``, ``end``, ``seconds``) and
        ``excluded_s`` their total; both are present (empty, 0) when nothing is excluded.
        """
        return {
            "label": self.label,
            "start": None if self.start is None else self.start.isoformat(),
            "end": None if self.end is None else self.end.isoformat(),
            "exclusions": [{"start": a.isoformat(), "end": b.isoformat(), "seconds": (b - a).total_seconds()}
                           for a, b in self.exclusions],
            "excluded_s": self.excluded_s,
        }


def parse_exclusions(exclude: Any) -> tuple[tuple[pd.Timestamp, pd.Timestamp], ...]:
    """Return exclusions as ``(start, end)`` UTC pairs sorted by start, without a window to check them in.

    Parameters
    ----------
    exclude
        An iterable of exclusions, each a ``(start, end)`` pair, a ``{"start": ..., "end": ...}``
        mapping or a ``"START/END"`` text; times are ISO 8601 texts with a zone, timestamps or
        datetimes (naive times are refused, as for a window).

    Returns
    -------
    tuple
        The pairs in UTC, sorted.

    Raises
    ------
    DomainError
        One line for the first bad exclusion: a time that cannot be parsed or has no zone, an end not
        after its start, a value of another shape, or two exclusions that overlap (refused, not
        merged: two overlapping stretches are most often a typing error, and the union is one
        exclusion to write).
    """
    if isinstance(exclude, (str, Mapping)) or not isinstance(exclude, Iterable):
        raise DomainError(f"exclusions must be a list of (start, end) pairs; got {exclude!r}")
    pairs = sorted(_parse_interval("exclusion", item) for item in exclude)
    _refuse_overlaps(pairs)
    return tuple(pairs)


def _refuse_overlaps(pairs: list[tuple[pd.Timestamp, pd.Timestamp]]) -> None:
    for (a0, b0), (a1, b1) in itertools.pairwise(pairs):
        if a1 < b0:
            raise DomainError(f"exclusions [{a0.isoformat()}, {b0.isoformat()}) and [{a1.isoformat()}, "
                              f"{b1.isoformat()}) overlap; give their union as one exclusion")


def _exclusions_text(exclusions: Iterable[tuple[pd.Timestamp, pd.Timestamp]]) -> str:
    return ", ".join(f"[{a.isoformat()}, {b.isoformat()})" for a, b in exclusions)


def _parse_interval(what: str, value: Any) -> tuple[pd.Timestamp, pd.Timestamp]:
    """Return a window's or an exclusion's ``(start, end)`` in UTC from a pair, a mapping or text."""
    if isinstance(value, Mapping) and what == "exclusion":
        if set(value) != {"start", "end"}:
            raise DomainError(f"exclusion {dict(value)!r} must have exactly the keys 'start' and 'end'")
        value = (value["start"], value["end"])
    if isinstance(value, str):
        text = value.strip()
        for sep in ("/", " .. ", ".."):
            if sep in text:
                parts = [t.strip() for t in text.split(sep)]
                break
        else:
            parts = [text]
        if len(parts) != 2:
            raise DomainError(f"{what} {value!r} must be 'START/END' (ISO 8601 times with a zone, for "
                              "example '2024-03-04T00:00Z/2024-03-11T00:00Z')")
        value = parts
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        shapes = ("None, a Window, a (start, end) pair or 'START/END' text" if what == "window"
                  else "a (start, end) pair, a {start, end} mapping or 'START/END' text")
        raise DomainError(f"{what} must be {shapes}; got {value!r}")
    start, end = (_parse_instant(name, v, what) for name, v in zip(("start", "end"), value, strict=True))
    if end <= start:
        raise DomainError(f"{what} end {value[1]!r} must be after its start {value[0]!r}")
    return start, end


def _checked_exclusions(start: pd.Timestamp, end: pd.Timestamp, exclusions: Iterable[Any]
                        ) -> tuple[tuple[pd.Timestamp, pd.Timestamp], ...]:
    """Return the exclusions in UTC sorted by start; refuse any outside the window, overlapping or empty."""
    pairs = []
    for item in exclusions:
        if not isinstance(item, tuple) or len(item) != 2:
            raise DomainError(f"exclusion {item!r} must be a (start, end) pair (Window.excluding parses "
                              "other shapes)")
        a, b = pd.Timestamp(item[0]), pd.Timestamp(item[1])
        if a.tzinfo is None or b.tzinfo is None:
            raise DomainError(f"exclusion {a} .. {b}: start and end must be timezone-aware")
        a, b = a.tz_convert("UTC"), b.tz_convert("UTC")
        if b <= a:
            raise DomainError(f"exclusion end {b.isoformat()} must be after its start {a.isoformat()}")
        if a < start or b > end:
            raise DomainError(f"exclusion [{a.isoformat()}, {b.isoformat()}) is not inside the window "
                              f"[{start.isoformat()}, {end.isoformat()})")
        pairs.append((a, b))
    pairs.sort()
    _refuse_overlaps(pairs)
    if pairs and math.fsum((b - a).total_seconds() for a, b in pairs) >= (end - start).total_seconds():
        raise DomainError(f"the exclusions cover the whole window [{start.isoformat()}, {end.isoformat()}): "
                          "nothing is left to measure")
    return tuple(pairs)


def _parse_instant(name: str, value: Any, what: str = "window") -> pd.Timestamp:
    """Return one window (or exclusion) bound as a UTC timestamp; it must carry a zone."""
    try:
        t = pd.Timestamp(value.strip() if isinstance(value, str) else value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise DomainError(f"{what} {name} {value!r} is not an ISO 8601 time (for example "
                          "'2024-03-04T00:00Z')") from exc
    if t is pd.NaT or pd.isna(t):
        raise DomainError(f"{what} {name} {value!r} is not a time")
    if t.tzinfo is None:
        text = t.isoformat() if not isinstance(value, str) else value.strip()
        hint = f"{text}Z" if "T" in text else f"{text}T00:00Z"
        raise DomainError(f"{what} {name} {value!r} has no zone; write it with one, for example "
                          f"{hint!r} for UTC")
    # the records' times are nanoseconds (1677-09-21 .. 2262-04-11); a bound beyond them cannot be
    # compared with any record (a window from 1970 is fine: relative traces such as PAI's start there)
    if not _NS_MIN <= t <= _NS_MAX:
        raise DomainError(f"{what} {name} {value!r} is outside the times nanoseconds can hold "
                          f"({_NS_MIN.isoformat()} .. {_NS_MAX.isoformat()})")
    return t.tz_convert("UTC")


_NS_MIN = pd.Timestamp.min.tz_localize("UTC").ceil("s")
_NS_MAX = pd.Timestamp.max.tz_localize("UTC").floor("s")


# ---------------------------------------------------------------------------------------------------
# Factors
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Factor:
    """One goodput factor with its measurement contract.

    The value is ``numerator / denominator``.  ``losses`` partitions the gap
    ``denominator - numerator`` into named categories (same unit as the denominator); whatever the
    named losses do not explain is kept as the ``unattributed`` entry -- shown, never clipped, and
    negative if the named losses over-explain the gap.

    Parameters
    ----------
    boundary
        ``"scheduling"``, ``"runtime"`` or ``"program"``.
    numerator, denominator
        What crossed the boundary and what reached it, in ``numerator_unit`` / ``denominator_unit``.
        A numerator above the denominator is an error, except by floating-point rounding (relative
        1e-9), which is taken as equal to the denominator.
    window
        Calendar window of the measurement.
    record
        The record it was read from (default: the record that settles this boundary).
    convention
        How the factor is defined where definitions differ (e.g. ``"MFU, PaLM 6N+12LHQT,
        H100 SXM dense BF16 989 TFLOP/s"``; ``"runtime, committed"``; ``"scheduling, in-service"``).
    numerator_unit, denominator_unit
        Named units, e.g. ``"device-s"``.
    losses
        Named parts of the gap; must not contain ``"unattributed"`` (it is computed).
    """

    boundary: Boundary
    numerator: float
    denominator: float
    window: Window
    record: str = ""
    convention: str = ""
    numerator_unit: str = "fraction"
    denominator_unit: str = "fraction"
    losses: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.boundary not in BOUNDARIES:
            raise DomainError(f"boundary must be one of {BOUNDARIES}; got {self.boundary!r}")
        if not isinstance(self.window, Window):
            raise DomainError(
                f"{self.boundary} factor: window must be a fleetlib Window (Window.nominal(label) or "
                f"Window.between(start, end)); got {type(self.window).__name__}"
            )
        den = check_positive(f"{self.boundary} denominator", self.denominator)
        num = check_nonnegative(f"{self.boundary} numerator", self.numerator)
        if num > den * (1 + _PARTITION_RTOL):
            raise DomainError(
                f"{self.boundary} numerator {num} exceeds its denominator {den}: a goodput factor "
                "lies in [0, 1]; check for double-counted time or capacity missing from the denominator"
            )
        # A numerator above its denominator by floating-point rounding only (sums of many
        # intervals) is the same quantity; taking it as equal keeps the value inside [0, 1].
        num = min(num, den)
        if not self.record:
            object.__setattr__(self, "record", DEFAULT_RECORD[self.boundary])
        if self.losses is None:
            object.__setattr__(self, "losses", {})
        if not isinstance(self.losses, Mapping):
            raise DomainError(f"{self.boundary} losses must be a mapping of category -> amount")
        named = {}
        for name, amount in self.losses.items():
            if name == "unattributed":
                raise DomainError("'unattributed' is computed by the factor; do not pass it")
            named[name] = check_nonnegative(f"{self.boundary} loss {name!r}", amount)
        gap = den - num
        named["unattributed"] = gap - sum(v for k, v in named.items())
        object.__setattr__(self, "losses", named)
        object.__setattr__(self, "numerator", num)
        object.__setattr__(self, "denominator", den)

    @classmethod
    def from_value(cls, boundary: Boundary, value: float, window: Window, *, record: str = "stated",
                   convention: str = "", losses: Mapping[str, float] | None = None) -> Factor:
        """Build a factor from a stated fraction (denominator 1); ``losses`` are fractions too."""
        v = check_fraction(boundary, value)
        return cls(boundary=boundary, numerator=v, denominator=1.0, window=window, record=record,
                   convention=convention, losses=dict(losses or {}))

    @property
    def value(self) -> float:
        """The factor, numerator / denominator."""
        return self.numerator / self.denominator

    @property
    def loss_fractions(self) -> dict[str, float]:
        """Each loss (including ``unattributed``) as a fraction of the denominator."""
        return {k: v / self.denominator for k, v in self.losses.items()}

    def to_dict(self) -> dict[str, Any]:
        """Return the factor and its contract as a JSON-ready dictionary."""
        return {
            "boundary": self.boundary,
            "value": self.value,
            "numerator": self.numerator,
            "denominator": self.denominator,
            "numerator_unit": self.numerator_unit,
            "denominator_unit": self.denominator_unit,
            "window": self.window.to_dict(),
            "record": self.record,
            "convention": self.convention,
            "losses": dict(self.losses),
        }


# ---------------------------------------------------------------------------------------------------
# Plain-number accounting (equation 2, marginal values, levers, trades, cost, time to result)
# ---------------------------------------------------------------------------------------------------


def _sfp(s: float, r: float, p: float) -> tuple[float, float, float]:
    return (check_fraction("scheduling goodput", s), check_fraction("runtime goodput", r),
            check_fraction("program goodput", p))


def job_product(runtime: float, program: float) -> float:
    """Return the job's product R x P: held accelerator-time that becomes ideal-rate progress.

    Parameters
    ----------
    runtime, program
        Runtime and program goodput, fractions in [0, 1].

    Returns
    -------
    float
        ``runtime * program``.
    """
    return check_fraction("runtime goodput", runtime) * check_fraction("program goodput", program)


def loss_shares(scheduling: float, runtime: float, program: float) -> dict[str, float]:
    """Split the efficiency gap ``1 - S R P`` into shares of fleet capacity (equation 2).

    The shares follow the order a job meets the boundaries -- scheduling, runtime, program -- so
    each later loss is measured on what the earlier boundaries passed.  With ``useful`` (= MPG) the
    four parts sum to one.

    Parameters
    ----------
    scheduling, runtime, program
        The three factors, fractions in [0, 1].

    Returns
    -------
    dict
        ``{"scheduling": 1-S, "runtime": S(1-R), "program": S R (1-P), "useful": S R P}``,
        in boundary order.

    Examples
    --------
    >>> shares = loss_shares(0.65, 0.90, 0.48)
    >>> round(shares["runtime"], 4), round(shares["program"], 4)
    (0.065, 0.3042)
    """
    s, r, p = _sfp(scheduling, runtime, program)
    return {
        "scheduling": 1.0 - s,
        "runtime": s * (1.0 - r),
        "program": s * r * (1.0 - p),
        "useful": s * r * p,
    }


def marginal_values(scheduling: float, runtime: float, program: float) -> dict[str, float]:
    """Return what one point of each factor is worth in MPG points: the product of the other two.

    Parameters
    ----------
    scheduling, runtime, program
        The three factors, fractions in [0, 1].

    Returns
    -------
    dict
        ``{"scheduling": R P, "runtime": S P, "program": S R}`` (partial derivatives of S R P).
    """
    s, r, p = _sfp(scheduling, runtime, program)
    return {"scheduling": r * p, "runtime": s * p, "program": s * r}


@dataclass(frozen=True)
class LeverGain:
    """What raising one factor to its ceiling is worth.

    Attributes
    ----------
    factor
        The boundary whose lever is pulled.
    current, ceiling
        The factor now and at the lever's structural ceiling.
    relative_gain
        ``ceiling / current - 1``: MPG (and the job product) grow by this fraction whatever the
        other two factors are.
    mpg_before, mpg_at_ceiling
        The pool product before and with this one lever at its ceiling.
    added_useful
        ``mpg_at_ceiling - mpg_before``: added ideal-rate progress as a share of fleet capacity.
    loss_share
        The factor's equation-2 loss share, reported for contrast; it is *not* what the lever recovers
        and is never used for ranking.
    rank
        1 for the largest relative gain.
    """

    factor: str
    current: float
    ceiling: float
    relative_gain: float
    mpg_before: float
    mpg_at_ceiling: float
    added_useful: float
    loss_share: float
    rank: int

    def to_dict(self) -> dict[str, Any]:
        """Return the lever as a JSON-ready dictionary."""
        return dict(self.__dict__)


def rank_levers(factors: Mapping[str, float], ceilings: Mapping[str, float]) -> list[LeverGain]:
    """Rank levers by the relative gain each reaches at its ceiling (never by loss share).

    Raising one factor multiplies MPG by ``ceiling / current`` whatever the other factors are, so
    the ranking does not depend on boundary order -- unlike equation-2 loss shares.

    Parameters
    ----------
    factors
        ``{"scheduling": S, "runtime": R, "program": P}``.
    ceilings
        Structural ceiling per factor to evaluate; a subset of the three is allowed.

    Returns
    -------
    list of LeverGain
        Sorted by relative gain, largest first.
    """
    s, r, p = _factors_from_mapping(factors)
    current = {"scheduling": s, "runtime": r, "program": p}
    shares = loss_shares(s, r, p)
    base = s * r * p
    gains = []
    for name, ceiling in ceilings.items():
        if name not in current:
            raise DomainError(f"unknown factor {name!r}; expected one of {BOUNDARIES}")
        c = check_fraction(f"{name} ceiling", ceiling)
        now = current[name]
        if now == 0.0:
            raise DomainError(f"{name} goodput is 0; a relative gain is undefined")
        if c < now:
            raise DomainError(f"{name} ceiling {c} is below the current value {now}; a ceiling bounds a gain")
        after = base * c / now
        gains.append(dict(factor=name, current=now, ceiling=c, relative_gain=c / now - 1.0,
                          mpg_before=base, mpg_at_ceiling=after, added_useful=after - base,
                          loss_share=shares[name]))
    gains.sort(key=lambda g: g["relative_gain"], reverse=True)
    return [LeverGain(rank=i + 1, **g) for i, g in enumerate(gains)]


def _factors_from_mapping(factors: Mapping[str, float]) -> tuple[float, float, float]:
    missing = [b for b in BOUNDARIES if b not in factors]
    if missing:
        raise DomainError(f"missing factor(s) {missing}; give scheduling, runtime and program")
    return _sfp(factors["scheduling"], factors["runtime"], factors["program"])


#: Column order of :func:`levers_frame` (the fields of :class:`LeverGain`).
LEVER_COLUMNS: tuple[str, ...] = ("factor", "current", "ceiling", "relative_gain", "mpg_before",
                                  "mpg_at_ceiling", "added_useful", "loss_share", "rank")


def levers_frame(levers: Iterable[LeverGain]) -> pd.DataFrame:
    """Return ranked levers as a tidy table for plots and reports.

    Parameters
    ----------
    levers
        :class:`LeverGain` objects, usually the output of :func:`rank_levers`.

    Returns
    -------
    pandas.DataFrame
        One row per lever, ordered by ``rank``, with columns ``factor, current, ceiling,
        relative_gain, mpg_before, mpg_at_ceiling, added_useful, loss_share, rank``.  An empty input
        gives an empty frame with those columns.

    Examples
    --------
    >>> frame = levers_frame(rank_levers({"scheduling": 0.65, "runtime": 0.90, "program": 0.48},
    ...                                  {"program": 0.65, "scheduling": 0.80}))
    >>> list(frame["factor"])
    ['program', 'scheduling']
    """
    rows = list(levers)
    for item in rows:
        if not isinstance(item, LeverGain):
            raise DomainError(f"levers_frame takes LeverGain objects (from rank_levers); got "
                              f"{type(item).__name__}")
    frame = pd.DataFrame({col: [getattr(g, col) for g in rows] for col in LEVER_COLUMNS},
                         columns=list(LEVER_COLUMNS))
    frame = frame.astype({col: "float64" for col in LEVER_COLUMNS if col not in ("factor", "rank")})
    frame = frame.astype({"factor": "object", "rank": "int64"})
    return frame.sort_values("rank", kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class TradeResult:
    """The verdict of the product-of-ratios rule on one change.

    Attributes
    ----------
    scope
        ``"job"`` (R x P; a lever confined to one job) or ``"pool"`` (S x R x P; a lever that moves
        capacity between jobs).
    ratios
        after / before for each factor in the product.
    product_ratio
        The product of the ratios: the change multiplies the judged product by this.
    first_order_change
        Sum of the relative changes -- the small-change approximation, shown for contrast.
    helps
        True when ``product_ratio > 1``.
    """

    scope: str
    ratios: dict[str, float]
    product_ratio: float
    first_order_change: float
    helps: bool

    def to_dict(self) -> dict[str, Any]:
        """Return the verdict as a JSON-ready dictionary."""
        return dict(self.__dict__)


def trade(before: Mapping[str, float], after: Mapping[str, float],
          scope: Literal["job", "pool"] = "pool") -> TradeResult:
    """Judge a change by the product of its before/after ratios (same boundary, same window).

    Parameters
    ----------
    before, after
        Factor values, keyed ``scheduling`` / ``runtime`` / ``program``.  A factor missing from
        both is taken as unchanged (ratio one).  Every factor must be re-measured after a change,
        because a faster step raises program goodput and mechanically lowers runtime goodput.
    scope
        ``"job"`` judges a lever confined to one job on R x P; a change that moves scheduling goodput
        moves capacity between jobs and must be judged on the pool (``"pool"``), so ``"job"``
        refuses it.

    Returns
    -------
    TradeResult
        Ratios, their product and the verdict.
    """
    if scope not in ("job", "pool"):
        raise DomainError(f"scope must be 'job' or 'pool'; got {scope!r}")
    names = ("runtime", "program") if scope == "job" else BOUNDARIES
    if scope == "job" and ("scheduling" in before or "scheduling" in after):
        if ("scheduling" in before) != ("scheduling" in after):
            raise DomainError("scheduling goodput is given only on one side; give it before and after "
                              "(unchanged for a job-scope lever) or leave it out")
        b = check_fraction("scheduling goodput before", before["scheduling"])
        a = check_fraction("scheduling goodput after", after["scheduling"])
        if b != a:
            raise DomainError(
                "the change moves scheduling goodput, so it moves capacity between jobs: judge it on "
                "the pool's product (scope='pool'), including the victims' runtime loss"
            )
    for key in set(before) | set(after):
        if key not in BOUNDARIES:
            raise DomainError(f"unknown factor {key!r}; expected one of {BOUNDARIES}")
    ratios = {}
    for name in names:
        if (name in before) != (name in after):
            raise DomainError(f"{name} goodput is given only on one side; give it before and after")
        if name not in before:
            ratios[name] = 1.0
            continue
        b = check_fraction(f"{name} goodput before", before[name], allow_zero=False)
        a = check_fraction(f"{name} goodput after", after[name])
        ratios[name] = a / b
    product = math.prod(ratios.values())
    return TradeResult(scope=scope, ratios=ratios, product_ratio=product,
                       first_order_change=sum(x - 1.0 for x in ratios.values()), helps=product > 1.0)


def cost_per_useful_hour(price_per_hour: float, scheduling: float, runtime: float,
                         program: float) -> float:
    """Cost of one ideal-rate (useful) accelerator-hour (equation 6): ``price / (S R P)``.

    Parameters
    ----------
    price_per_hour
        Capacity price per in-service accelerator-hour (dividing by S charges the scheduling loss once).
    scheduling, runtime, program
        The three factors, each greater than zero.

    Returns
    -------
    float
        Price per useful accelerator-hour, in the price's currency.
    """
    price = check_nonnegative("price per hour", price_per_hour)
    s, r, p = _sfp(scheduling, runtime, program)
    if s * r * p == 0.0:
        raise DomainError("MPG is 0: no useful hour is produced, so its cost is unbounded")
    return price / (s * r * p)


def held_hours_chargeback(price_per_hour: float, runtime: float, program: float) -> float:
    """Cost per useful hour when a team is billed only for the hours its jobs hold: ``price / (R P)``.

    The pool's scheduling loss is left unbilled by this policy.

    Parameters
    ----------
    price_per_hour
        Price per held accelerator-hour.
    runtime, program
        The job's runtime and program goodput, each greater than zero.

    Returns
    -------
    float
        Price per useful accelerator-hour under held-hours chargeback.
    """
    price = check_nonnegative("price per hour", price_per_hour)
    rp = job_product(runtime, program)
    if rp == 0.0:
        raise DomainError("the job product R x P is 0: no useful hour is produced")
    return price / rp


def spot_cost_per_useful_hour(price_per_hour: float, runtime: float) -> float:
    """Spot-style cost per retained hour, ``price / R`` (the special case that ignores S and P).

    Parameters
    ----------
    price_per_hour
        Instance price per hour.
    runtime
        Runtime goodput on that capacity tier, greater than zero.

    Returns
    -------
    float
        Price per retained hour.
    """
    price = check_nonnegative("price per hour", price_per_hour)
    r = check_fraction("runtime goodput", runtime, allow_zero=False)
    return price / r


def time_to_result(queue_wait_h: float, ideal_accelerator_h: float, devices: float, runtime: float,
                   program: float) -> float:
    """Time from submission to result (equation 7): ``T_queue + A_ideal / (N R P)``.

    Scheduling goodput does not appear: pool contention reaches a job only through its queue wait.

    Parameters
    ----------
    queue_wait_h
        Queue wait in hours.
    ideal_accelerator_h
        Accelerator-hours the work needs at the ideal rate.
    devices
        Devices the job holds.
    runtime, program
        The job's runtime and program goodput, each greater than zero.

    Returns
    -------
    float
        Time to result in hours.
    """
    q = check_nonnegative("queue wait (h)", queue_wait_h)
    work = check_nonnegative("ideal accelerator-hours", ideal_accelerator_h)
    n = check_positive("devices", devices)
    rp = job_product(runtime, program)
    if rp == 0.0:
        raise DomainError("the job product R x P is 0: the job never reaches its result")
    return q + work / (n * rp)


# ---------------------------------------------------------------------------------------------------
# The contract-checked product
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GoodputProduct:
    """The product of three factors with everything derived from it.

    Attributes
    ----------
    value
        MPG = S x R x P.
    job_product
        R x P.
    loss_shares
        Equation-2 shares of fleet capacity in boundary order, plus ``useful``.
    marginal_values
        MPG points per point of each factor.
    factors
        The three :class:`Factor` objects.
    windows_mixed
        True when the caller allowed factors from different windows; the product is then an estimate.
    notes
        Caveats a reader of the number must see.
    chain
        One entry per boundary crossing (``"scheduling->runtime"``, ``"runtime->program"``): the
        previous numerator, the next denominator, their unit, the residual (next denominator less
        previous numerator) and whether it was checked; empty when the factors are stated fractions.
    """

    value: float
    job_product: float
    loss_shares: dict[str, float]
    marginal_values: dict[str, float]
    factors: dict[str, Factor]
    windows_mixed: bool
    notes: tuple[str, ...]
    chain: dict[str, dict[str, Any]] = field(default_factory=dict)

    def cost_per_useful_hour(self, price_per_hour: float) -> float:
        """Price of one ideal-rate accelerator-hour at ``price_per_hour`` (equation 6)."""
        f = self.factors
        return cost_per_useful_hour(price_per_hour, f["scheduling"].value, f["runtime"].value,
                                    f["program"].value)

    def to_dict(self) -> dict[str, Any]:
        """Return the product and its factors as a JSON-ready dictionary."""
        return {
            "mpg": self.value,
            "job_product": self.job_product,
            "loss_shares": dict(self.loss_shares),
            "marginal_value": dict(self.marginal_values),
            "factors": {k: f.to_dict() for k, f in self.factors.items()},
            "windows_mixed": self.windows_mixed,
            "notes": list(self.notes),
            "chain": {k: dict(v) for k, v in self.chain.items()},
        }


#: Relative tolerance of the chain check in :func:`mpg`: adjacent numerator and denominator are the
#: same sum of the same intervals, so they differ only by floating-point summation order.
CHAIN_RTOL = 1e-9


def mpg(scheduling: Factor, runtime: Factor, program: Factor, *,
        allow_mixed_windows: bool = False, chain_rtol: float = CHAIN_RTOL) -> GoodputProduct:
    """Multiply three factors into ML productivity goodput, enforcing the measurement contract.

    **Windows.** The scheduling and runtime factors must share one window, and the program factor's
    window must be that window or lie inside it (program goodput may be sampled within the window).
    Stated factors (fractions of 1) may use nominal windows, matched by label; a *measured* factor
    (numerator and denominator in a time unit such as ``"device-s"``) needs a measured window, so
    two measured factors never match by a label alone.  A mismatch raises
    :class:`~fleetlib.quality.WindowMismatchError` -- unless ``allow_mixed_windows`` is True, in
    which case the result carries ``windows_mixed=True`` and a note saying the product is an
    estimate.

    **The chain.** When adjacent factors carry numerators and denominators in one unit, each
    denominator must be the previous numerator: the scheduling numerator (held device-time) is the
    runtime denominator, and the runtime numerator (productive device-time) is the program
    denominator, within ``chain_rtol`` relative.  Only then does S x R x P telescope to ideal-rate
    useful device-time over in-service capacity-time.  A break raises
    :class:`~fleetlib.quality.ChainMismatchError` naming the boundary and the residual.

    Parameters
    ----------
    scheduling, runtime, program
        Factors for the three boundaries, each with the matching ``boundary``.
    allow_mixed_windows
        Accept factors from different windows and say so in the result.
    chain_rtol
        Relative tolerance of the chain check (default :data:`CHAIN_RTOL`).

    Returns
    -------
    GoodputProduct
        MPG with job product, loss shares, marginal values and the chain as checked.

    Raises
    ------
    WindowMismatchError
        Windows differ (and ``allow_mixed_windows`` is False).
    ChainMismatchError
        A denominator is not the previous numerator, or adjacent measured factors use different units.
    """
    given = {"scheduling": scheduling, "runtime": runtime, "program": program}
    for slot, f in given.items():
        if not isinstance(f, Factor):
            raise DomainError(f"{slot} must be a Factor (use Factor.from_value for a stated number)")
        if f.boundary != slot:
            raise DomainError(f"a {f.boundary} factor was passed as the {slot} factor")
    notes: list[str] = []
    mismatches = []
    if not scheduling.window.same_as(runtime.window):
        mismatches.append(f"scheduling window {scheduling.window.describe()!r} != runtime window "
                          f"{runtime.window.describe()!r}")
    if not scheduling.window.contains(program.window):
        mismatches.append(f"program window {program.window.describe()!r} is not inside the scheduling "
                          f"window {scheduling.window.describe()!r}")
    for slot, f in given.items():
        if _is_measured(f) and f.window.is_nominal:
            mismatches.append(f"the {slot} factor is measured in {f.denominator_unit} but its window "
                              f"{f.window.label!r} is nominal; a measured factor needs a measured window")
    mixed = bool(mismatches)
    if mixed and not allow_mixed_windows:
        raise WindowMismatchError(
            "factors measured over different windows cannot be multiplied: " + "; ".join(mismatches)
            + ". Re-measure on one window, or pass allow_mixed_windows=True to get an estimate "
            "that says so."
        )
    if mixed:
        notes.append("ESTIMATE: factors come from different windows (" + "; ".join(mismatches)
                     + "); the product is not a measured MPG.")
    chain = _check_chain(scheduling, runtime, program, chain_rtol)
    s, r, p = scheduling.value, runtime.value, program.value
    return GoodputProduct(
        value=s * r * p,
        job_product=r * p,
        loss_shares=loss_shares(s, r, p),
        marginal_values=marginal_values(s, r, p),
        factors=given,
        windows_mixed=mixed,
        notes=tuple(notes),
        chain=chain,
    )


def _is_measured(f: Factor) -> bool:
    return f.denominator_unit != "fraction" or f.numerator_unit != "fraction"


def _check_chain(scheduling: Factor, runtime: Factor, program: Factor,
                 rtol: float) -> dict[str, dict[str, Any]]:
    """Check that each denominator is the previous numerator; return the crossings as checked."""
    check_nonnegative("chain_rtol", rtol)
    out: dict[str, dict[str, Any]] = {}
    for before, after in ((scheduling, runtime), (runtime, program)):
        name = f"{before.boundary}->{after.boundary}"
        if not (_is_measured(before) and _is_measured(after)):
            continue
        if before.numerator_unit != after.denominator_unit:
            raise ChainMismatchError(
                f"{name}: the {before.boundary} numerator is in {before.numerator_unit} but the "
                f"{after.boundary} denominator is in {after.denominator_unit}; the chain can only be "
                "checked in one unit (device-s)")
        residual = after.denominator - before.numerator
        scale = max(abs(after.denominator), abs(before.numerator))
        ok = abs(residual) <= rtol * scale
        out[name] = {"previous_numerator": before.numerator, "next_denominator": after.denominator,
                     "unit": before.numerator_unit, "residual": residual, "rtol": rtol, "holds": ok}
        if not ok:
            raise ChainMismatchError(
                f"{name}: the {after.boundary} denominator ({after.denominator:.6g} "
                f"{after.denominator_unit}) is not the {before.boundary} numerator "
                f"({before.numerator:.6g} {before.numerator_unit}); residual {residual:+.6g} "
                f"{before.numerator_unit} ({residual / scale:+.3g} relative, tolerance {rtol:g}). "
                f"Time reached the {after.boundary} boundary that did not cross the {before.boundary} "
                "boundary, or the other way round: join the records on one window and one set of jobs"
            )
    return out


# Orchestrator tiers, the planning shortfall and mixed overhead budgets live in fleetlib.budgets;
# their names stay importable from here.
from fleetlib.budgets import (  # noqa: E402
    OVERHEAD_FACTOR,
    PRODUCTIVE_REFERENCES,
    OverheadsByFactor,
    TierRatios,
    days_at_shortfall,
    group_overheads_by_factor,
    tier_ratios,
)
