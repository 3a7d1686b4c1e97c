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
``--format`` choices, the notebooks and the conformance tests (``tests/test_reader_conformance.py``)
all take the formats from it, so adding a format is one module and one line in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ReaderSpec", "Sample"]


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
    """

    name: str
    read: Callable[..., tuple[Mapping[str, Any], Any]]
    summary: str
    tables: Mapping[str, tuple[str, ...]]
    samples: tuple[Sample, ...] = ()
