"""The report's fleet: the walk's parameters from a fleet bundle's manifest, and ``key=value`` overrides.

:func:`fleet_parameters` turns a ``fleet.yaml`` (see ``data/fleet/README.md``) into the walk's parameters:
the manifest every page of the walk measures, and whether the bundle has traced jobs.
:func:`parse_overrides` reads ``-p key=value`` arguments with YAML typing (``-p devices=256`` is a whole
number, ``-p 'traces_files=[a, b]'`` a list).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fleetlib._io import load_yaml
from fleetlib.quality import InputError

__all__ = ["BUNDLED_TAG", "fleet_parameters", "parse_overrides"]

#: Cells tagged so state facts about the bundled sample data (case studies, its named jobs and ranks): a
#: report on one's own fleet runs the notebooks without them.
BUNDLED_TAG = "bundled-data"


def _as_text(path: Path, root: Path) -> str:
    """Return ``path`` relative to the project root when it lies inside it, else absolute."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def fleet_parameters(manifest: str | Path, root: Path) -> dict[str, Any]:
    """Return the walk's parameters for a fleet bundle: its manifest, and whether it holds traced jobs.

    The report's fleet is the scenario's ``fleet_manifest`` unless ``--fleet`` names another; either way it
    goes through here, and every page of the walk (00-03) measures that one bundle.

    Parameters
    ----------
    manifest
        The bundle's ``fleet.yaml``.
    root
        The project root (a manifest inside it is given relative to it, as the notebooks resolve it).

    Returns
    -------
    dict
        ``fleet_manifest`` (the manifest's path as the notebooks take it), ``fleet_has_traces``: whether a
        job of the bundle has both step traces and a model config (the step-traces page needs one), and
        ``fleet_has_serving``: whether the manifest has a ``serving:`` section (the serving page needs one).

    Raises
    ------
    fleetlib.InputError
        The manifest cannot be read or is refused (see :func:`fleetlib.fleet.load_manifest`).
    """
    from fleetlib.fleet import load_manifest

    m = load_manifest(manifest)
    return {"fleet_manifest": _as_text(m.file, root),
            "fleet_has_traces": any(job in m.models for job in m.traces),
            "fleet_has_serving": m.serving is not None}


def shortened(text: str, limit: int = 60) -> str:
    """``text`` as it is, or its first ``limit`` characters and an ellipsis (a message stays one line)."""
    return text if len(text) <= limit else text[:limit] + "..."


def parse_overrides(pairs: Iterable[str] | None) -> dict[str, Any]:
    """Read ``key=value`` texts into a mapping, each value typed as YAML types it.

    Parameters
    ----------
    pairs
        Texts such as ``devices=256``, ``scheduling_tz=UTC``, ``'timeline_files=[a.csv, b.csv]'``.

    Returns
    -------
    dict
        Key to value, later pairs replacing earlier ones.

    Raises
    ------
    fleetlib.InputError
        A text without ``=``, an empty or malformed key, a value YAML cannot read, or a value that is a
        mapping or empty (a parameter is a plain literal or a list of them).
    """
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise InputError(f"-p {pair!r}: expected key=value with a parameter name as the key")
        try:  # the bounded loader: a value nested past max_depth is refused, not a RecursionError
            value = load_yaml(text, file="-p", invalid="is not valid YAML") if text.strip() else None
        except InputError as exc:  # a value is no file: the loader's truncated-file hint is dropped
            reason = exc.message.split("; expected complete YAML")[0]
            # a lone surrogate's message quotes the text itself; the others are about the whole value
            where = "" if reason.startswith("the text of") else f"value {shortened(text)!r} "
            raise InputError(f"-p {key}: {where}{reason}") from None
        if isinstance(value, datetime.date):  # YAML reads 2024-03-04 as a date; parameters hold text
            value = text.strip()
        if value is None or isinstance(value, Mapping):
            raise InputError(f"-p {key}: value {text!r} must be a plain literal or a list of them")
        out[key] = value
    return out
