"""Derived tables of a step-trace set for analysts: the three-stage measurement and the MFU factor.

These are the pipelines notebook ``03_step_traces`` runs on every trace set.  They chain functions of
:mod:`fleetlib.program.collectives` and :mod:`fleetlib.program.breakdown`; they add no accounting rule.

* :func:`measure_step_traces` -- match collectives across ranks, derive each rank's peer wait per
  collective, and partition each (rank, step) window with those waits;
* :func:`model_program_factor` -- program goodput (MFU) of a partition against a model configuration
  file (useful FLOPs per step, devices, the named peak and its convention).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.program.breakdown import program_goodput_factor, step_partition
from fleetlib.program.collectives import collective_waits, match_collectives

__all__ = ["StepTraceMeasurement", "measure_step_traces", "model_program_factor"]


class StepTraceMeasurement(NamedTuple):
    """The three tables of one trace set's measurement (unpacks as ``matched, waits, partition``)."""

    #: One row per collective kernel matched across ranks (:func:`match_collectives`).
    matched: pd.DataFrame
    #: Each rank's peer wait per matched collective (:func:`collective_waits`).
    waits: pd.DataFrame
    #: One row per (rank, step): the six parts, ``step_wall_us`` and ``overlapped_comm_us``.
    partition: pd.DataFrame


def measure_step_traces(kernels: pd.DataFrame, steps: pd.DataFrame) -> StepTraceMeasurement:
    """Measure one trace set: matched collectives, per-rank peer waits and the step partition.

    Parameters
    ----------
    kernels
        The canonical kernels table (``read_traces(...).kernels``).
    steps
        The canonical steps table (``read_traces(...).steps``): one ``ProfilerStep`` window per rank
        and step.

    Returns
    -------
    StepTraceMeasurement
        ``matched`` (:func:`fleetlib.program.collectives.match_collectives`; its ``attrs`` name how
        the collectives were matched), ``waits`` (:func:`~fleetlib.program.collectives.collective_waits`)
        and ``partition`` (:func:`fleetlib.program.breakdown.step_partition` with those waits), whose
        six parts add up to each step's wall time.
    """
    matched = match_collectives(kernels)
    waits = collective_waits(matched)
    partition = step_partition(kernels, steps, collective_wait=waits[["kernel_index", "peer_wait_us"]])
    return StepTraceMeasurement(matched, waits, partition)


def model_program_factor(partition: pd.DataFrame, model: str | Path) -> tuple[Factor, dict[str, Any]]:
    """Return program goodput (MFU) of a step partition against a model configuration file.

    Parameters
    ----------
    partition
        :func:`measure_step_traces`' ``partition``.
    model
        A model configuration YAML (useful FLOPs per step, devices, accelerator and FLOP convention;
        see :mod:`fleetlib.program.commands`).

    Returns
    -------
    factor, config
        The program :class:`~fleetlib.accounting.Factor` (its convention names the FLOP rule and the
        peak; its window is the nominal window named after the model) and the checked configuration
        (``peak``, ``devices``, ``useful_flops_per_step``, ``convention``, ``name``, ...).
    """
    from fleetlib.program.model_config import load_model_config  # the one reader of model files today

    config = load_model_config(model)
    factor = program_goodput_factor(partition, useful_flops_per_step=config["useful_flops_per_step"],
                                    devices=config["devices"], peak=config["peak"],
                                    convention=config["convention"].label,
                                    window=Window.nominal(config["name"]))
    return factor, config
