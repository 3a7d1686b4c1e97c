"""Helpers shared by the command-line modules of the rungs (``fleetlib.*.commands``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fleetlib._io import is_url
from fleetlib.accounting import Window
from fleetlib.quality import DomainError, InputError

__all__ = ["add_exclude_argument", "add_scheduler_argument", "cli_window", "exclusion_lines", "input_path",
           "writable_output_path"]

#: The help of ``--exclude`` on every command that takes ``--window``.
EXCLUDE_HELP = ("leave [START, END) out of every factor's numerator and denominator (ISO 8601 times with a "
                "zone, inside the window; repeatable; overlapping exclusions are refused, not merged)")


def input_path(text: str) -> Path | str:
    """Return a command's input argument: an fsspec URL (``s3://bucket/key``) as written, else a Path.

    The ``type=`` of every file argument that may name object storage: a URL must stay a string (a
    :class:`~pathlib.Path` would fold its ``//``); the readers open it through fsspec.
    """
    return text if is_url(text) else Path(text)


def add_exclude_argument(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--exclude START END`` option beside a command's ``--window``."""
    parser.add_argument("--exclude", nargs=2, action="append", metavar=("START", "END"), help=EXCLUDE_HELP)


def add_scheduler_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--scheduler ADDRESS`` (a running Dask cluster to attach to; implies ``--engine dask``)."""
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", default=None,
        help="attach to the running Dask scheduler at ADDRESS (tcp://host:port; implies --engine dask; "
        "default: Dask's scheduler-address configuration, DASK_SCHEDULER_ADDRESS); its cluster is left "
        "running",
    )


def add_allow_empty_window_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--allow-empty-window`` beside a command's ``--window``."""
    parser.add_argument(
        "--allow-empty-window", action="store_true",
        help="measure a window reaching hours beyond the scheduler records (refused by default: the "
        "time no record covers would count as idle capacity)",
    )


def add_collection_gap_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--collection-gap MINUTES`` to a command that reads scheduler records."""
    parser.add_argument(
        "--collection-gap", type=float, default=60.0, metavar="MINUTES",
        help="flag a stretch of at least MINUTES (default 60) where no pool has any record of any job while "
        "capacity persists (a collection gap; it stays in S until --exclude'd)",
    )


def collection_gap_seconds(minutes: float) -> float:
    """Return ``--collection-gap MINUTES`` in seconds, refusing a value that is not a positive number.

    Parameters
    ----------
    minutes
        The option's value.

    Returns
    -------
    float
        ``60 * minutes``.

    Raises
    ------
    DomainError
        Zero, negative, NaN or infinite.
    """
    if not (0 < minutes < float("inf")):
        raise DomainError(f"--collection-gap must be a positive number of minutes; got {minutes!r}")
    return 60.0 * float(minutes)


def cli_window(window: Sequence[str] | None, exclude: Sequence[Sequence[str]] | None) -> Window | None:
    """Return ``--window START END`` with its ``--exclude`` intervals as one :class:`Window`.

    Parameters
    ----------
    window
        The two texts of ``--window``, or None.
    exclude
        The ``--exclude`` pairs (None or empty: none).

    Returns
    -------
    Window or None
        None when neither option was given.

    Raises
    ------
    DomainError
        A malformed window or exclusion (:meth:`fleetlib.accounting.Window.excluding`), or
        ``--exclude`` without ``--window``.
    """
    pairs = [tuple(p) for p in exclude or ()]
    if window is None:
        if pairs:
            raise DomainError("--exclude needs --window START END: the exclusions lie inside the window")
        return None
    if len(window) != 2:
        raise DomainError(f"window needs a start and an end; got {list(window)!r}")
    win = Window.parse((str(window[0]), str(window[1])))
    assert win is not None
    return win.excluding(pairs) if pairs else win


def exclusion_lines(window: Mapping[str, Any] | None) -> list[str]:
    """Return the text lines listing a window's exclusions (none when nothing is excluded).

    Parameters
    ----------
    window
        A window's dictionary (:meth:`fleetlib.accounting.Window.to_dict`), or None.

    Returns
    -------
    list of str
        ``excluded ...`` with the total, then one indented line per interval.
    """
    if window is None or not window.get("exclusions"):
        return []
    excl = window["exclusions"]
    hours = float(window.get("excluded_s", 0.0)) / 3600.0
    lines = [f"excluded                 {hours:,.2f} h in {len(excl)} interval(s), out of every numerator "
             "and denominator:"]
    lines += [f"  [{e['start']}, {e['end']})  {float(e['seconds']) / 3600.0:,.2f} h" for e in excl]
    return lines


def collection_gap_lines(gaps: Sequence[Mapping[str, Any]] | None, window: Mapping[str, Any] | None,
                         capacity_device_s: float) -> list[str]:
    """Return the text lines of a result's collection gaps, each with the ``--exclude`` leaving it out.

    Parameters
    ----------
    gaps
        The ``collection_gaps`` objects of a result (``start``, ``end``, ``seconds``, ``device_s``;
        :func:`fleetlib.scheduling.collection_gap_records`), or None.
    window
        The measured window's dictionary (:meth:`fleetlib.accounting.Window.to_dict`).
    capacity_device_s
        The in-service capacity-time of the window (the gaps' share is of it).

    Returns
    -------
    list of str
        None when there is no gap; else a heading with the total and one line per gap.
    """
    if not gaps:
        return []
    total = sum(float(g["device_s"]) for g in gaps)
    w = window or {}
    share = f"{100.0 * total / capacity_device_s:.1f} %" if capacity_device_s else "-"
    lines = [f"collection gaps: {len(gaps)} stretch(es) with no record of any job while capacity persists, "
             f"{total / 3600.0:,.1f} device-h counted as idle ({share} of capacity); if the collector "
             f"stopped, exclude them (beside --window {w.get('start')} {w.get('end')}):"]
    lines += [f"  [{g['start']}, {g['end']})  {float(g['seconds']) / 60.0:,.0f} min  "
              f"{float(g['device_s']) / 3600.0:,.1f} device-h  --exclude {g['start']} {g['end']}"
              for g in gaps]
    return lines


def ledger_lines(ledger: Mapping[str, Any], *, rejections: int = 5) -> list[str]:
    """Return a ledger's text: counts (read = kept + repaired + rejected; unused by kind), first rejections.

    Parameters
    ----------
    ledger
        A ledger's dictionary (:meth:`fleetlib.quality.Ledger.to_dict`).
    rejections
        How many rejected rows to list (file, row, field, reason); the rest are counted.

    Returns
    -------
    list of str
        The counts line, then one indented line per rejection shown and one for those not shown.
    """
    line = (f"ledger: {ledger['read']:,} rows read = {ledger['kept']:,} kept + {ledger['repaired']:,} "
            f"repaired + {ledger['rejected']:,} rejected")
    unused = ledger.get("unused") or {}
    if unused:
        line += "; kept but unused: " + ", ".join(f"{n:,} {kind}" for kind, n in unused.items())
    rejected = [e for e in ledger.get("entries", []) if e.get("action") == "rejected"]
    out = [line]
    for e in rejected[:rejections]:
        where = ", ".join(part for part in (
            str(e.get("file") or ""), f"row {e['row']}" if e.get("row") is not None else "",
            f"field {e['field']!r}" if e.get("field") else "") if part)
        out.append(f"  rejected: {where}: {e.get('reason')}")
    if len(rejected) > rejections:
        out.append(f"  ... {len(rejected) - rejections:,} more rejected rows (all of them in --json)")
    return out


def writable_output_path(out: str | Path) -> Path:
    """Check that an output file can be created at ``out`` before any work is done.

    Parameters
    ----------
    out
        The output file a ``fleetlib synth ...`` command is asked to write.

    Returns
    -------
    pathlib.Path
        ``out`` as a path.

    Raises
    ------
    InputError
        The folder of ``out`` does not exist, or ``out`` is itself a folder.
    """
    path = Path(out)
    if not path.parent.is_dir():
        raise InputError(f"cannot write the output file: folder {str(path.parent)!r} does not exist",
                         file=str(path))
    if path.is_dir():
        raise InputError("cannot write the output file: it is a folder", file=str(path))
    return path
