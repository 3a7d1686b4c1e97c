"""Naive local wall-clock times placed in a zone by one stated rule, daylight-saving nights included.

Some formats print the cluster's local wall clock without an offset (Philly, Slurm, Helios, the
BLOOM chronicle); a reader given the zone (``tz=``) places each time in it.  Two kinds of wall time
have no single instant, and none is rejected for it:

* **Ambiguous** (clocks fall back, e.g. 2017-11-05 01:00-01:59 America/Los_Angeles happens twice):
  decided by *record order, then the earlier offset*.  Within one field of one file, the ambiguous
  times of one night are read in record order at the offset in force before the change (the first
  pass, the earlier instant) until a record's wall time steps back below one already seen that
  night; from that record on, the night's ambiguous times take the offset after the change (the
  second pass).  A night with no step back is read wholly at the earlier offset.
* **Nonexistent** (clocks spring forward, e.g. 2017-03-12 02:00-02:59 America/Los_Angeles): read at
  the offset in force before the gap, which is the wall time shifted forward by the gap
  (02:30 PST = 03:30 PDT = 10:30 UTC).

Each such time is a named repair of its record (file, row, field and the value as written):
:meth:`LocalTimes.repairs` gives the reasons a reader books.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: The rule, in the words the ledger and the docs use.
AMBIGUOUS_RULE = "record order, then the earlier offset"


@dataclass
class LocalTimes:
    """Naive wall times placed in a zone (:func:`localize`).

    Attributes
    ----------
    utc : pandas.Series
        The instants (``datetime64[ns, UTC]``, NaT where the wall time is NaT), on the input's index.
    first_pass, second_pass : numpy.ndarray
        Ambiguous wall times read at the offset before / after the clocks fell back.
    shifted : numpy.ndarray
        Nonexistent wall times shifted forward by the gap.
    wall : pandas.Series
        The wall times as given.
    tz : str
        The zone.
    """

    utc: pd.Series
    first_pass: np.ndarray
    second_pass: np.ndarray
    shifted: np.ndarray
    wall: pd.Series
    tz: str

    @property
    def resolved(self) -> np.ndarray:
        """Mask of the times resolved by the rule (ambiguous or nonexistent)."""
        return self.first_pass | self.second_pass | self.shifted

    def repairs(self, field: str,
                written: pd.Series | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(mask, reasons)``: the resolved times and one repair text each.

        Parameters
        ----------
        field
            The field's name, as the ledger names it.
        written
            The values as the file wrote them (aligned with the input; default: the wall times).
        """
        mask = self.resolved
        pos = np.flatnonzero(mask)
        if written is None:
            text = [str(t) for t in self.wall.iloc[pos]]
        else:
            text = [str(v) for v in np.asarray(written, dtype=object)[pos]]
        utc = self.utc.iloc[pos]
        local = utc.dt.tz_convert(self.tz)
        reasons = []
        for i, p in enumerate(pos):
            at = local.iloc[i].isoformat()
            if self.shifted[p]:
                gap = local.iloc[i].tz_localize(None) - self.wall.iloc[p]
                reasons.append(f"{field} {text[i]!r} does not exist in {self.tz} (clocks sprang forward): "
                               f"shifted forward by the {_span(gap)} gap to {at}")
            else:
                which = "first" if self.first_pass[p] else "second"
                reasons.append(f"{field} {text[i]!r} is ambiguous in {self.tz} (clocks fell back): read as "
                               f"{at}, the {which} pass ({AMBIGUOUS_RULE})")
        return mask, np.asarray(reasons, dtype=object)


def _span(delta: pd.Timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def localize(wall: pd.Series, tz: str) -> LocalTimes:
    """Place naive wall-clock times in ``tz`` by the module's rule (never NaT for a DST change).

    Parameters
    ----------
    wall
        Naive ``datetime64`` times in record order (NaT allowed).
    tz
        An IANA zone name.

    Returns
    -------
    LocalTimes
        The UTC instants and the masks of the times the rule resolved.

    Raises
    ------
    Exception
        Whatever pandas raises for a zone it does not know (callers name the zone in their error).
    """
    wall = pd.Series(wall)
    n = len(wall)
    placed = wall.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    values = _ns(placed).copy()
    first = np.zeros(n, dtype=bool)
    second = np.zeros(n, dtype=bool)
    shifted = np.zeros(n, dtype=bool)
    open_ = placed.isna().to_numpy() & wall.notna().to_numpy()
    if open_.any():
        idx = np.flatnonzero(open_)
        sub = wall.iloc[idx].reset_index(drop=True)
        ambiguous = sub.dt.tz_localize(tz, ambiguous="NaT", nonexistent="shift_forward").isna().to_numpy()
        if ambiguous.any():
            amb = sub[ambiguous].reset_index(drop=True)
            later = _second_pass(amb)
            values[idx[ambiguous]] = _ns(amb.dt.tz_localize(tz, ambiguous=~later, nonexistent="NaT"))
            second[idx[ambiguous][later]] = True
            first[idx[ambiguous][~later]] = True
        if (~ambiguous).any():
            gap = sub[~ambiguous].reset_index(drop=True)
            before = gap.dt.tz_localize(tz, nonexistent="shift_backward")  # the last instant before the gap
            offset = before.dt.tz_localize(None) - before.dt.tz_convert("UTC").dt.tz_localize(None)
            values[idx[~ambiguous]] = _ns((gap - offset).dt.tz_localize("UTC"))
            shifted[idx[~ambiguous]] = True
    utc = pd.Series(values.view("datetime64[ns]"), index=wall.index).dt.tz_localize("UTC")
    return LocalTimes(utc=utc, first_pass=first, second_pass=second, shifted=shifted, wall=wall, tz=tz)


def _second_pass(amb: pd.Series) -> np.ndarray:
    """Ambiguous wall times (record order) -> mask of those read after the clocks fell back.

    Per night (local date), the second pass starts at the first time below the running maximum
    of the night's earlier times and lasts to the night's end.
    """
    night = amb.dt.normalize().to_numpy()
    ns = pd.Series(_wall_ns(amb))
    prior = ns.groupby(night).cummax().groupby(night).shift(1, fill_value=np.iinfo(np.int64).min)
    back = pd.Series(ns.to_numpy() < prior.to_numpy())
    return back.groupby(night).cummax().to_numpy(dtype=bool)


def _wall_ns(wall: pd.Series) -> np.ndarray:
    """Naive times as int64 nanoseconds (NaT: the int64 minimum)."""
    return wall.astype("datetime64[ns]").to_numpy().view("int64")


def _ns(aware: pd.Series) -> np.ndarray:
    """Zone-aware times as int64 UTC nanoseconds (NaT: the int64 minimum)."""
    return aware.dt.as_unit("ns").to_numpy(dtype="datetime64[ns]").view("int64")
