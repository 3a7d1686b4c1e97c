"""Rung 3: step traces -> program goodput; the analytical FLOP, bandwidth, roofline and Fleet Law relations.

The rung's door: everything code outside ``fleetlib/program/`` uses is exported here.

* :func:`read` reads trace files of one registered format (:data:`READERS`: ``kineto``, ``nsys``,
  ``rank_timers``; detected from the bytes when not named) into the canonical tables and a ledger;
* :func:`measure` is the rung's one result: traces (and a model configuration) in, a
  :class:`ProgramMeasurement` with ``.factor()``, ``.ledger``, ``.window``, ``.to_dict()`` and the
  per-rank, per-step partition out;
* the views (:func:`measure_step_traces`, :func:`model_program_factor`), the per-step partition
  (:func:`step_partition`), collective matching and stragglers (:func:`straggler_report`,
  :func:`straggler_analysis` for per-rank step timers at fleet scale), MFU/MBU (:func:`mfu`,
  :func:`mbu`, :func:`peak_rate`), the roofline (:func:`kernel_roofline`) and the iron law / Fleet Law
  terms, and the generators with ground truth (:func:`synth_step_traces`).

Each name lives in one module of the rung (``measure``, ``views``, ``breakdown``, ``collectives``,
``flops``, ``peaks``, ``roofline``, ``iron_law``, ``model_config``, ``synth``, ``stragglers``,
``schema``, ``readers``); that module's docstring explains it.
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike
from typing import Any

from fleetlib.program.breakdown import (
    DEFAULT_DISPATCH_GAP_US,
    DEFAULT_KIND_LAYERS,
    HTA_BREAKDOWN_COLUMNS,
    HTA_REFERENCE_PATH,
    HTA_SOURCES,
    hta_comparison_table,
    hta_reference_differences,
    hta_style_temporal_breakdown,
    load_hta_reference,
    program_goodput_factor,
    step_partition,
    steps_without_device_activity,
)
from fleetlib.program.classify import (
    Classifier,
)
from fleetlib.program.collectives import (
    COLLECTIVE_TYPES,
    DEFAULT_STRAGGLER_THRESHOLD,
    MATCH_COLUMNS,
    analyse_traced_steps,
    collective_audit,
    collective_waits,
    expected_collectives,
    match_collectives,
    program_summary,
    step_heatmap_table,
    straggler_report,
    summarise_traced_steps,
    traced_step_partition,
)
from fleetlib.program.fleet_law import (
    FLEET_LAW_LABELS,
    FLEET_LAW_TERMS,
    fleet_law_by_rank,
    fleet_law_terms,
    pipeline_ranks,
)
from fleetlib.program.flops import (
    FLOP_CONVENTIONS,
    CombinedProgramGoodput,
    DecodeFloor,
    FlopConvention,
    ProgramGoodputConvention,
    UtilizationAboveOneError,
    combine_program_rows,
    decode_floor,
    decode_floor_s,
    equivalent_devices_at_peak,
    fleet_mfu_from_node,
    flop_convention_label,
    hfu,
    mbu,
    mbu_convention,
    mfu,
    mfu_at_floor,
    mfu_convention,
    mfu_from_throughput,
    model_flops_per_token,
    peak_rate,
    peak_work_flops,
    program_goodput_from_mfu,
    program_rows_by_ideal,
    scaling_efficiency,
    scaling_efficiency_from_mfu,
)
from fleetlib.program.iron_law import (
    CollectiveWaitSplit,
    attention_hbm_traffic_bytes,
    collective_time_s,
    dispatch_to_floor_ratio,
    fleet_law_step_s,
    fusion_hbm_traffic_bytes,
    fusion_traffic_ratio,
    iron_law_terms_s,
    iron_law_time_s,
    ring_allreduce_bytes_per_rank,
    ring_wire_bytes_per_rank,
    speedup_from_term_scaling,
    split_collective_wait,
    straggler_mfu,
    synchronous_rate_factor,
    tiled_attention_traffic_ratio,
    tp_allreduce_bytes_per_layer,
    trace_volume_bytes,
)
from fleetlib.program.measure import (
    NO_CLOCK_LABEL,
    ProgramMeasurement,
    device_ridge,
    measure,
    traced_window,
)
from fleetlib.program.memory import (
    DEFAULT_LARGE_BYTES,
    MEMORY_STEP_COLUMNS,
    memory_by_rank,
    memory_by_step,
    read_memory_events,
)
from fleetlib.program.model_config import (
    MODEL_KEYS,
    check_model_fits,
    load_model_config,
)
from fleetlib.program.peaks import (
    PEAK_RATES,
    PEAK_RATES_BY_PRECISION,
    PRECISIONS,
    PeakRate,
)
from fleetlib.program.readers import (
    READERS,
)
from fleetlib.program.readers.kineto import (
    TraceSet,
    read_trace,
    read_traces,
    trace_files,
)
from fleetlib.program.readers.nsys import (
    read_nsys,
)
from fleetlib.program.readers.rank_timers import (
    read_rank_timers,
)
from fleetlib.program.roofline import (
    BAD_SHAPES,
    COMPUTE_ROOF_KERNEL_PATTERN,
    DEFAULT_RIDGE_FLOP_PER_BYTE,
    DIAGNOSES,
    GEMM_KERNEL_PATTERN,
    NO_RULE,
    OP_COLUMNS,
    OP_FLOP_RULES,
    REGIME_LABELS,
    REGIMES,
    ROOFLINE_KERNEL_COLUMNS,
    UNKNOWN_DTYPE,
    RooflinePlacement,
    arithmetic_intensity,
    attainable_flops,
    bandwidth_fraction,
    bandwidth_headroom,
    compute_fraction,
    gemm_time_split,
    kernel_roof,
    kernel_roofline,
    measured_intensity,
    op_flops_bytes,
    place_kernels,
    ridge_point,
    roofline_diagnosis,
    roofline_placement,
    roofline_regime,
)
from fleetlib.program.schema import (
    CLASSIFIED_BY,
    COLLECTIVE_SOURCES,
    COLLECTIVES,
    HOST_SYNC_COLUMNS,
    KERNEL_COLUMNS,
    KERNEL_EXTRA_COLUMNS,
    KINDS,
    MEMORY_COLUMNS,
    OPS_COLUMNS,
    PARTITION_LABELS,
    PARTITION_PARTS,
    PARTITION_SHORT_LABELS,
    PER_RANK_COLUMNS,
    PER_STEP_COLUMNS,
    RANK_TIMER_COLUMNS,
    STEP_COLUMNS,
    STEP_SOURCES,
    SYNC_KINDS,
    TABLE_COLUMNS,
    table_dtypes,
)
from fleetlib.program.stragglers import (
    AUTO_DASK_ROWS,
    DEFAULT_STRAGGLERS,
    FleetStragglers,
    local_cluster,
    straggler_analysis,
    synth_rank_timers,
)
from fleetlib.program.synth import (
    MOE_KERNELS,
    NSYS_SCHEMA,
    SYNTH_PARTS,
    TRIAGE_CASES,
    SynthMoETraces,
    SynthTraces,
    nsys_global_tid,
    synth_moe_traces,
    synth_step_traces,
    synth_triage_tables,
    write_nsys_sqlite,
)
from fleetlib.program.triage import (
    FINDING_COLUMNS,
    TABLE7_PATTERNS,
    TRIAGE_THRESHOLDS,
    Triage,
    triage,
)
from fleetlib.program.utilisation import (
    UTILISATION_COLUMNS,
    utilisation_map,
    utilisation_table,
)
from fleetlib.program.views import (
    StepTraceMeasurement,
    measure_step_traces,
    model_program_factor,
)
from fleetlib.registry import read_tables

__all__ = [
    "AUTO_DASK_ROWS",
    "BAD_SHAPES",
    "CLASSIFIED_BY",
    "COLLECTIVES",
    "COLLECTIVE_SOURCES",
    "COLLECTIVE_TYPES",
    "COMPUTE_ROOF_KERNEL_PATTERN",
    "DEFAULT_DISPATCH_GAP_US",
    "DEFAULT_KIND_LAYERS",
    "DEFAULT_LARGE_BYTES",
    "DEFAULT_RIDGE_FLOP_PER_BYTE",
    "DEFAULT_STRAGGLERS",
    "DEFAULT_STRAGGLER_THRESHOLD",
    "DIAGNOSES",
    "FINDING_COLUMNS",
    "FLEET_LAW_LABELS",
    "FLEET_LAW_TERMS",
    "FLOP_CONVENTIONS",
    "GEMM_KERNEL_PATTERN",
    "HOST_SYNC_COLUMNS",
    "HTA_BREAKDOWN_COLUMNS",
    "HTA_REFERENCE_PATH",
    "HTA_SOURCES",
    "KERNEL_COLUMNS",
    "KERNEL_EXTRA_COLUMNS",
    "KINDS",
    "MATCH_COLUMNS",
    "MEMORY_COLUMNS",
    "MEMORY_STEP_COLUMNS",
    "MODEL_KEYS",
    "MOE_KERNELS",
    "NO_CLOCK_LABEL",
    "NO_RULE",
    "NSYS_SCHEMA",
    "OPS_COLUMNS",
    "OP_COLUMNS",
    "OP_FLOP_RULES",
    "PARTITION_LABELS",
    "PARTITION_PARTS",
    "PARTITION_SHORT_LABELS",
    "PEAK_RATES",
    "PEAK_RATES_BY_PRECISION",
    "PER_RANK_COLUMNS",
    "PER_STEP_COLUMNS",
    "PRECISIONS",
    "RANK_TIMER_COLUMNS",
    "READERS",
    "REGIMES",
    "REGIME_LABELS",
    "ROOFLINE_KERNEL_COLUMNS",
    "STEP_COLUMNS",
    "STEP_SOURCES",
    "SYNC_KINDS",
    "SYNTH_PARTS",
    "TABLE7_PATTERNS",
    "TABLE_COLUMNS",
    "TRIAGE_CASES",
    "TRIAGE_THRESHOLDS",
    "UNKNOWN_DTYPE",
    "UTILISATION_COLUMNS",
    "Classifier",
    "CollectiveWaitSplit",
    "CombinedProgramGoodput",
    "DecodeFloor",
    "FleetStragglers",
    "FlopConvention",
    "PeakRate",
    "ProgramGoodputConvention",
    "ProgramMeasurement",
    "RooflinePlacement",
    "StepTraceMeasurement",
    "SynthMoETraces",
    "SynthTraces",
    "TraceSet",
    "Triage",
    "UtilizationAboveOneError",
    "analyse_traced_steps",
    "arithmetic_intensity",
    "attainable_flops",
    "attention_hbm_traffic_bytes",
    "bandwidth_fraction",
    "bandwidth_headroom",
    "check_model_fits",
    "collective_audit",
    "collective_time_s",
    "collective_waits",
    "combine_program_rows",
    "compute_fraction",
    "decode_floor",
    "decode_floor_s",
    "device_ridge",
    "dispatch_to_floor_ratio",
    "equivalent_devices_at_peak",
    "expected_collectives",
    "fleet_law_by_rank",
    "fleet_law_step_s",
    "fleet_law_terms",
    "fleet_mfu_from_node",
    "flop_convention_label",
    "fusion_hbm_traffic_bytes",
    "fusion_traffic_ratio",
    "gemm_time_split",
    "hfu",
    "hta_comparison_table",
    "hta_reference_differences",
    "hta_style_temporal_breakdown",
    "iron_law_terms_s",
    "iron_law_time_s",
    "kernel_roof",
    "kernel_roofline",
    "load_hta_reference",
    "load_model_config",
    "local_cluster",
    "match_collectives",
    "mbu",
    "mbu_convention",
    "measure",
    "measure_step_traces",
    "measured_intensity",
    "memory_by_rank",
    "memory_by_step",
    "mfu",
    "mfu_at_floor",
    "mfu_convention",
    "mfu_from_throughput",
    "model_flops_per_token",
    "model_program_factor",
    "nsys_global_tid",
    "op_flops_bytes",
    "peak_rate",
    "peak_work_flops",
    "pipeline_ranks",
    "place_kernels",
    "program_goodput_factor",
    "program_goodput_from_mfu",
    "program_rows_by_ideal",
    "program_summary",
    "read",
    "read_memory_events",
    "read_nsys",
    "read_rank_timers",
    "read_trace",
    "read_traces",
    "ridge_point",
    "ring_allreduce_bytes_per_rank",
    "ring_wire_bytes_per_rank",
    "roofline_diagnosis",
    "roofline_placement",
    "roofline_regime",
    "scaling_efficiency",
    "scaling_efficiency_from_mfu",
    "speedup_from_term_scaling",
    "split_collective_wait",
    "step_heatmap_table",
    "step_partition",
    "steps_without_device_activity",
    "straggler_analysis",
    "straggler_mfu",
    "straggler_report",
    "summarise_traced_steps",
    "synchronous_rate_factor",
    "synth_moe_traces",
    "synth_rank_timers",
    "synth_step_traces",
    "synth_triage_tables",
    "table_dtypes",
    "tiled_attention_traffic_ratio",
    "tp_allreduce_bytes_per_layer",
    "trace_files",
    "trace_volume_bytes",
    "traced_step_partition",
    "traced_window",
    "triage",
    "utilisation_map",
    "utilisation_table",
    "write_nsys_sqlite",
]


def read(paths: str | PathLike[str] | Iterable[str | PathLike[str]], format: str | None = None, *,
         tz: str | None = None, window: object = None, **options: Any) -> tuple[dict[str, Any], Any]:
    """Read step-trace files of one format into the program rung's canonical tables and a ledger.

    Parameters
    ----------
    paths
        The input files of one format (``kineto``: one trace file per rank).
    format
        A key of :data:`READERS` (``kineto``, ``nsys``, ``rank_timers``); None: detected from the files'
        bytes (:func:`fleetlib.registry.detect`).
    tz, window, **options
        Passed to the format's reader.

    Returns
    -------
    tuple of (dict, Ledger)
        The canonical tables by name (``kernels``, ``steps``, ... or ``rank_timers``) and the ledger.
    """
    tables, ledger = read_tables("program", paths, format, tz=tz, window=window, **options)
    return dict(tables), ledger
