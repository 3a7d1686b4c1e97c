"""Rung 2: job timeline -> runtime goodput (measured) and its analytical model (equation 4).

* :mod:`fleetlib.runtime.schema` -- the vocabulary: columns, event kinds, partition terms and labels;
* :mod:`fleetlib.runtime.readers` -- one module per format and the ``READERS`` registry;
* :mod:`fleetlib.runtime.timeline` -- validation of the canonical tables and the restart structure;
* :mod:`fleetlib.runtime.goodput` -- the exact partition of held time (``runtime_goodput``);
* :func:`measure` (module ``fleetlib/runtime/measure.py``) -- read and measure in one call; the result
  answers to ``.factor()``, ``.ledger``, ``.window`` and ``.to_dict()``;
* :mod:`fleetlib.runtime.model`, :mod:`fleetlib.runtime.compare` -- equation 4 and the comparison of a
  measurement with it; :mod:`fleetlib.runtime.synth` -- timelines with ground truth;
  :mod:`fleetlib.runtime.commands` -- the command line.

:func:`read_records` reads files of any registered format (named, or detected from the bytes) into
the canonical tables and a ledger.

``fleetlib.runtime.measure`` is the function (it shadows the module of the same name as an attribute;
``from fleetlib.runtime.measure import ...`` still reaches the module).
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import Any

from fleetlib.runtime.measure import measure
from fleetlib.runtime.readers import READERS

__all__ = ["READERS", "measure", "read_records"]


def read_records(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    format: str | None = None,
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[dict[str, Any], Any]:
    """Read job-timeline files into the runtime rung's canonical tables and a ledger.

    Parameters
    ----------
    paths
        The input files of one format.
    format
        A key of :data:`READERS` (``mlperf``, ``mlgoodput``, ``canonical``, ...); None: detected from
        the files' bytes (:func:`fleetlib.registry.detect`).
    tz, window, **options
        Passed to the format's reader.

    Returns
    -------
    tuple of (dict, Ledger)
        The canonical tables by name (``steps``, ``events``; ``phases`` for serving logs) and the
        reader's ledger.
    """
    from fleetlib.registry import read_tables

    tables, ledger = read_tables("runtime", paths, format, tz=tz, window=window, **options)
    return dict(tables), ledger
