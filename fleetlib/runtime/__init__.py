"""Rung 2: job timeline -> runtime goodput (measured) and its analytical model (equation 4).

The door of the rung: every name code outside it uses is exported here.

* :func:`read` -- files of any registered format (named, or detected from the bytes) into the
  canonical tables and a ledger, through :data:`READERS` (one module per format in
  :mod:`fleetlib.runtime.readers`);
* :func:`measure` -- read and measure in one call; the result (:class:`RuntimeMeasurement`, or
  :class:`ReplicaGoodput` for serving replicas) answers to ``.factor()``, ``.ledger``, ``.window``
  and ``.to_dict()``;
* :func:`runtime_goodput`, :func:`held_intervals` -- the exact partition of held time of canonical
  tables (:mod:`fleetlib.runtime.goodput`; its per-job kernel is :mod:`fleetlib.runtime.partition`);
* the views (:mod:`fleetlib.runtime.views`), the model of equation 4 and its comparison with a
  measurement (:mod:`fleetlib.runtime.model`, :mod:`fleetlib.runtime.ettr`,
  :mod:`fleetlib.runtime.compare`), timelines with ground truth (:mod:`fleetlib.runtime.synth`) and
  the vocabulary (:mod:`fleetlib.runtime.schema`).

``fleetlib.runtime.measure`` is the function (it shadows the module of the same name as an attribute;
``from fleetlib.runtime.measure import ...`` still reaches the module).
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import Any

from fleetlib.quality import DomainError, Ledger
from fleetlib.runtime.commands import mlperf_summary_table
from fleetlib.runtime.compare import compare_measurement
from fleetlib.runtime.elastic import slice_integrals
from fleetlib.runtime.ettr import ettr_optimal_interval_s, expected_ettr
from fleetlib.runtime.goodput import (
    ReplicaGoodput,
    RuntimeMeasurement,
    held_intervals,
    runtime_goodput,
    runtime_goodput_windows,
)
from fleetlib.runtime.measure import measure, warm_up
from fleetlib.runtime.model import (
    RuntimeLossTerms,
    crossover_devices,
    daly_interval_s,
    held_share_from_capacity_share,
    interval_with_preemptions_s,
    preemption_tax_s,
    runtime_loss_by_size,
    runtime_loss_terms,
    serving_runtime_goodput,
    young_interval_s,
    young_waste,
)
from fleetlib.runtime.readers import READERS, bundled_path, read_bloom_events
from fleetlib.runtime.schema import (
    AUXILIARY_EVENT_KINDS,
    AUXILIARY_KIND_PREFIXES,
    CATEGORIES,
    CHANGE_POINT_COLUMNS,
    CLEAN_END_RULE,
    DEVICE_COLUMNS,
    DEVICE_SERIES_COLUMNS,
    EQ4_TERMS,
    EVENT_COLUMNS,
    EVENT_KINDS,
    MODEL_TERM_LABELS,
    NO_TIME,
    PROVENANCE_COLUMNS,
    REGIME_COLUMNS,
    RESIZE_KINDS,
    STEP_COLUMNS,
    STEP_SERIES_COLUMNS,
    TERM_LABELS,
    known_event_kinds,
)
from fleetlib.runtime.synth import synth_timeline, write_timeline
from fleetlib.runtime.timeline import tables_from_seconds
from fleetlib.runtime.views import (
    cumulative_series,
    partition_table,
    rolling_windows,
    windows_gap_s,
)

__all__ = [
    "AUXILIARY_EVENT_KINDS",
    "AUXILIARY_KIND_PREFIXES",
    "CATEGORIES",
    "CHANGE_POINT_COLUMNS",
    "CLEAN_END_RULE",
    "DEVICE_COLUMNS",
    "DEVICE_SERIES_COLUMNS",
    "EQ4_TERMS",
    "EVENT_COLUMNS",
    "EVENT_KINDS",
    "MODEL_TERM_LABELS",
    "NO_TIME",
    "PROVENANCE_COLUMNS",
    "READERS",
    "REGIME_COLUMNS",
    "RESIZE_KINDS",
    "STEP_COLUMNS",
    "STEP_SERIES_COLUMNS",
    "TERM_LABELS",
    "ReplicaGoodput",
    "RuntimeLossTerms",
    "RuntimeMeasurement",
    "bundled_path",
    "compare_measurement",
    "crossover_devices",
    "cumulative_series",
    "daly_interval_s",
    "ettr_optimal_interval_s",
    "expected_ettr",
    "held_intervals",
    "held_share_from_capacity_share",
    "interval_with_preemptions_s",
    "known_event_kinds",
    "measure",
    "mlperf_summary_table",
    "partition_table",
    "preemption_tax_s",
    "read",
    "read_bloom_events",
    "rolling_windows",
    "runtime_goodput",
    "runtime_goodput_windows",
    "runtime_loss_by_size",
    "runtime_loss_terms",
    "serving_runtime_goodput",
    "slice_integrals",
    "synth_timeline",
    "tables_from_seconds",
    "warm_up",
    "windows_gap_s",
    "write_timeline",
    "young_interval_s",
    "young_waste",
]


def read(
    paths: str | PathLike[str] | Iterable[str | PathLike[str]],
    format: str | None = None,
    *,
    tz: str | None = None,
    window: object = None,
    **options: Any,
) -> tuple[dict[str, Any], Ledger]:
    """Read job-timeline files into the runtime rung's canonical tables and a ledger.

    Parameters
    ----------
    paths
        The input files of one format.
    format
        A key of :data:`READERS` (``mlperf``, ``mlgoodput``, ``canonical``, ...); None: detected from
        the files' bytes (:func:`fleetlib.registry.detect`).
    tz, window, **options
        Passed to the format's reader (``ReaderSpec.read``).

    Returns
    -------
    tuple of (dict, Ledger)
        The canonical tables by name (``steps``, ``events``; ``phases`` for serving logs) and the
        reader's ledger.

    Raises
    ------
    DomainError
        An unknown format name.
    fleetlib.quality.InputError
        The format cannot be detected, or a file cannot be read as the format.
    """
    from fleetlib.registry import detect

    name = format if format is not None else detect(paths, "runtime")
    spec = READERS.get(name)
    if spec is None:
        raise DomainError(f"format must be one of {list(READERS)}; got {name!r}")
    tables, ledger = spec.read(paths, tz=tz, window=window, **options)
    return dict(tables), ledger
