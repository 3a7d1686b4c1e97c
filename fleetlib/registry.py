"""The reader protocol every rung follows, and the entry each format registers.

A reader is one module per format under ``fleetlib/<rung>/readers/``.  It exposes one call::

    read(paths, *, tz=None, window=None, **format_options) -> (tables, Ledger)

``paths`` is one path or a list of them (opened through :mod:`fleetlib._io`, so plain or gzip by the
bytes); ``tz`` is the zone of naive times where the format writes them (None: naive times are
refused); ``window`` is anything :meth:`fleetlib.accounting.Window.parse` takes; ``tables`` maps a
canonical table name (``"allocations"``, ``"steps"``, ``"kernels"`` ...) to a DataFrame with the
rung's canonical columns and UTC times; the :class:`~fleetlib.quality.Ledger` accounts for every
record of every file.

Each rung keeps one ``READERS`` mapping of format name -> :class:`ReaderSpec`.  The CLI's
``--format`` choices, the notebooks and the conformance tests (``tests/core/test_reader_conformance.py``)
all take the formats from it, so adding a format is one module and one line in the registry.

:func:`detect` names the format of a set of files from their first bytes: it asks each registered
reader's ``sniff`` (``ReaderSpec.sniff``, or the built-in one in :mod:`fleetlib._sniff`) and answers
only when exactly one format fits every file; otherwise it raises an
:class:`~fleetlib.quality.InputError` listing the candidates and the ``--format`` choices.
"""

from __future__ import annotations

import importlib
import posixpath
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from fleetlib import _sniff
from fleetlib.quality import DomainError, InputError

__all__ = ["RUNGS", "ReaderSpec", "Sample", "detect", "head_bytes", "read_tables", "sniff_of"]

#: The rungs that keep a reader registry (``fleetlib.<rung>.readers.READERS``).
RUNGS: tuple[str, ...] = ("scheduling", "runtime", "program")


@dataclass(frozen=True)
class Sample:
    """One input the conformance suite feeds a reader.

    Attributes
    ----------
    paths
        Files passed together as one ``paths`` argument, relative to the repository root.
    options
        Keyword arguments for ``read`` (``tz``, format options).
    records
        The number of records the files hold, counted independently of the reader (lines, JSON
        objects, trace events), when the sample states it: the ledger's ``read`` must equal it.
    bad
        True for a broken input: the reader must either raise :class:`~fleetlib.quality.InputError`
        naming the file, or reject at least one record with its file and 1-based row.
    """

    paths: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)
    records: int | None = None
    bad: bool = False


@dataclass(frozen=True)
class ReaderSpec:
    """A registered format: its reader, what it returns, and the samples it is checked on.

    Attributes
    ----------
    name
        The format's name, as ``--format`` takes it.
    read
        ``read(paths, *, tz=None, window=None, **format_options) -> (tables, Ledger)``.
    summary
        One line for ``--help`` and the docs.
    tables
        Table name -> the canonical columns that table always carries.
    samples
        Inputs for the conformance suite (bundled data and the bad-input corpus).
    sniff
        ``sniff(head: bytes) -> bool``: True when a file's first bytes (decompressed) look like one
        file of this format; cheap and never raising.  None: :func:`detect` uses the built-in sniff
        of :mod:`fleetlib._sniff` if there is one, else never proposes the format.
    """

    name: str
    read: Callable[..., tuple[Mapping[str, Any], Any]]
    summary: str
    tables: Mapping[str, tuple[str, ...]]
    samples: tuple[Sample, ...] = ()
    sniff: Callable[[bytes], bool] | None = None


def head_bytes(path: str | PathLike[str], n: int = _sniff.HEAD_BYTES) -> bytes:
    """Return the first ``n`` bytes of a file, gunzipped when its bytes say gzip.

    Parameters
    ----------
    path
        The file (a regular file; see :mod:`fleetlib._io`).
    n
        How many (decompressed) bytes at most.

    Returns
    -------
    bytes
        The head of the plain content.

    Raises
    ------
    InputError
        A missing file, not a regular file, or a compression other than gzip.
    """
    from fleetlib import _io

    p = path if _io.is_url(path) else Path(path)
    with _io.open_stored(p) as fh:  # a URL's head is read through fsspec, never a local copy
        try:
            raw = fh.read(n)
        except OSError as exc:
            raise InputError(f"cannot read the file ({exc.strerror or exc})", file=str(p)) from exc
    kind = _io.compression_of(raw[:8])
    if kind is None:
        return raw
    if kind != "gzip":
        raise InputError(f"{kind}-compressed input is not read; decompress it, or gzip it instead",
                         file=str(p))
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, n)
    except zlib.error as exc:
        raise InputError(f"corrupt gzip stream ({exc})", file=str(p), field="gzip") from exc


def _readers(rung: str) -> Mapping[str, ReaderSpec]:
    if rung not in RUNGS:
        raise DomainError(f"rung must be one of {list(RUNGS)}; got {rung!r}")
    return importlib.import_module(f"fleetlib.{rung}.readers").READERS


def sniff_of(rung: str, name: str, spec: ReaderSpec) -> Callable[[bytes], bool] | None:
    """Return the sniff :func:`detect` uses for a registered format (its own, else the built-in one)."""
    return spec.sniff or _sniff.SNIFFS.get((rung, name))


def detect(paths: str | PathLike[str] | Iterable[str | PathLike[str]], rung: str) -> str:
    """Name the one registered format of ``rung`` that every file's first bytes fit.

    Parameters
    ----------
    paths
        The input files given together (one format; several files where the format has several,
        such as Slurm's sacct / sacctmgr / sinfo or PAI's job / task / instance tables).
    rung
        ``"scheduling"``, ``"runtime"`` or ``"program"``.

    Returns
    -------
    str
        The format name, a key of the rung's ``READERS``.

    Raises
    ------
    InputError
        No format fits a file, the files fit different formats, or the bytes fit several formats:
        the message lists what each file fits and the ``--format`` choices.
    """
    from fleetlib._io import input_files

    readers = _readers(rung)
    sniffs = {name: f for name, spec in readers.items() if (f := sniff_of(rung, name, spec)) is not None}
    choices = f"name it with --format, one of {list(readers)}"
    fits: dict[str | PathLike[str], set[str]] = {}
    for p in input_files(paths):
        head = head_bytes(p)
        fits[p] = {name for name, f in sniffs.items() if _safe(f, head)}
    unknown = [p for p, f in fits.items() if not f]
    if unknown:
        detectable = sorted(sniffs)
        raise InputError(
            f"the format cannot be told from the file's bytes (formats detected by their bytes: "
            f"{detectable}); {choices}",
            file=str(unknown[0]),
        )
    common = set.intersection(*fits.values())
    if len(common) == 1:
        return next(iter(common))
    first = next(iter(fits))
    if not common:
        each = "; ".join(f"{posixpath.basename(str(p))}: {sorted(f)}" for p, f in fits.items())
        raise InputError(f"the files are of different formats ({each}): give the files of one format "
                         f"and {choices}", file=str(first))
    raise InputError(f"ambiguous: the bytes fit several formats {sorted(common)}; {choices}", file=str(first))


def _safe(sniff: Callable[[bytes], bool], head: bytes) -> bool:
    try:
        return bool(sniff(head))
    except Exception:  # a sniff that breaks on odd bytes proposes nothing
        return False


def read_tables(
    rung: str,
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    format: str | None = None,
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[Mapping[str, Any], Any]:
    """Read files with a rung's registered reader (the format detected from the bytes when None).

    Parameters
    ----------
    rung
        ``"scheduling"``, ``"runtime"`` or ``"program"``.
    paths
        The input files.
    format
        A key of the rung's ``READERS``; None: :func:`detect` names it.
    tz, window, **options
        Passed to the reader (see :mod:`fleetlib.registry`).

    Returns
    -------
    tuple of (tables, Ledger)
        The reader's canonical tables by name and its ledger.

    Raises
    ------
    DomainError
        An unknown format name.
    InputError
        The format cannot be detected, or a file cannot be read as the format.
    """
    readers = _readers(rung)
    name = format if format is not None else detect(paths, rung)
    spec = readers.get(name)
    if spec is None:
        raise DomainError(f"format must be one of {list(readers)}; got {name!r}")
    return spec.read(paths, tz=tz, window=window, **options)
