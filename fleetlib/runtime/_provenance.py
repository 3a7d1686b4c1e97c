"""Where a timeline record came from: table positions translated to the file and row a reader saw.

The timeline's checks (:mod:`fleetlib.runtime.timeline`, :mod:`fleetlib.runtime.partition`) work
on the two canonical tables and name a record by its *position* in the table it was given (0-based,
before any sorting) under the label ``"<source> (steps)"`` or ``"<source> (events)"``.  Users need
the file and the row as the file counts them.  Readers keep both in the optional provenance columns
(:data:`~fleetlib.runtime.schema.PROVENANCE_COLUMNS`) -- or, for a large one-file table, as its
index named ``source_row`` -- and :class:`Provenance` looks a position up in them;
:func:`relocate_error` and :func:`relocate_ledger` rewrite an error or the ledger's entries at the
boundary of the public entry points.  A table without provenance (built in code) is named by its
label and the record's 1-based position in it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.quality import InputError, Ledger
from fleetlib.runtime.schema import PROVENANCE_COLUMNS


class Provenance:
    """The file and 1-based row of each record of one canonical table.

    Parameters
    ----------
    frame
        The table as given to the timeline's checks.
    label
        The name the checks use for the table (``"<source> (steps)"``).
    """

    __slots__ = ("file", "files", "label", "n", "rows")

    def __init__(self, frame: pd.DataFrame, label: str, file: str | None = None) -> None:
        self.label = label
        self.file = file
        self.n = len(frame)
        self.files: pd.Categorical | None = None
        self.rows: Any = None
        if all(c in frame.columns for c in PROVENANCE_COLUMNS):
            self.files = pd.Categorical(frame[PROVENANCE_COLUMNS[0]])
            self.rows = frame[PROVENANCE_COLUMNS[1]].to_numpy(dtype=np.int64)
        elif file is not None and frame.index.name == PROVENANCE_COLUMNS[1]:
            # a large one-file table keeps its file rows as its index (a RangeIndex costs nothing)
            self.rows = frame.index

    @classmethod
    def of_rows(cls, label: str, file: str, rows: np.ndarray) -> Provenance:
        """Return the provenance of a table of one file whose records have the 1-based file ``rows``.

        What the constructor finds in a table whose provenance columns hold ``file`` and ``rows``.
        """
        prov = cls.__new__(cls)
        prov.label, prov.file, prov.n, prov.files, prov.rows = label, file, int(rows.size), None, rows
        return prov

    def locate(self, position: int) -> tuple[str, int]:
        """Return ``(file, row)`` of the record at a 0-based table position."""
        position = int(position)
        if self.rows is None or not 0 <= position < self.n or int(self.rows[position]) <= 0:
            return self.label, position + 1
        file = self.file if self.files is None else self.files[position]
        return str(file), int(self.rows[position])

    def describe(self, position: int) -> str:
        """Return ``"row R of FILE"`` (or ``"row P of LABEL"``) for a message's text."""
        file, row = self.locate(position)
        return f"row {row} of {file}"


def relocate_error(err: InputError, tables: tuple[Provenance, ...]) -> InputError:
    """Return ``err`` naming the file and row of its record (``err`` itself when it names neither)."""
    for prov in tables:
        if err.file == prov.label and err.row is not None:
            file, row = prov.locate(err.row)
            return InputError(err.message, file=file, row=row, field=err.field)
    return err


def relocate_ledger(ledger: Ledger, tables: tuple[Provenance, ...]) -> None:
    """Rewrite, in place, the ledger entries and flags that name a table position."""
    by_label = {prov.label: prov for prov in tables}
    for i, entry in enumerate(ledger.entries):
        prov = by_label.get(entry.file)
        if prov is not None and entry.row is not None:
            file, row = prov.locate(entry.row)
            ledger.entries[i] = dataclasses.replace(entry, file=file, row=row)
    for i, flag in enumerate(ledger.flags):
        prov = by_label.get(flag.file) if flag.file is not None else None
        if prov is not None and flag.row is not None:
            file, row = prov.locate(flag.row)
            ledger.flags[i] = dataclasses.replace(flag, file=file, row=row)
