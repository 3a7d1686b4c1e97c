"""The trace sample's strata, and fleet-wide estimates from the stratified sample of traced jobs.

Chapter 9.3.3: a trace sample is stratified across job sizes and architectures, software versions,
hours of the day and pipeline stages.  :func:`trace_strata` gives every timed job its stratum (the
trace plan, :func:`fleetlib.regress.sampling.trace_plan`, chooses jobs within them).

Pipeline stages are not in a fleet bundle's records: that stratum is one (``"not stated"``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetlib.contract import NOT_STATED

__all__ = ["GPUS_PER_NODE", "STRATUM_KEYS", "trace_strata"]

#: Devices per node, for a job's size in nodes.
GPUS_PER_NODE = 8

#: The columns that name a stratum, in the plan's order.
STRATUM_KEYS: tuple[str, ...] = ("nodes", "architecture", "software_version", "hours", "pipeline_stage")


def trace_strata(jobs: pd.DataFrame) -> pd.DataFrame:
    """Return each job's stratum of the trace sample.

    Parameters
    ----------
    jobs
        One row per job (indexed by job id) with ``devices``, ``architecture``, ``software_version``,
        ``gang_complete`` (a timestamp) and ``retained_steps``.

    Returns
    -------
    pandas.DataFrame
        Same index: the columns of :data:`STRATUM_KEYS` (size in nodes, architecture, software
        version, six-hour block of the gang-complete hour, pipeline stage), ``devices`` and
        ``retained_steps``.
    """
    hour = jobs["gang_complete"].dt.hour.to_numpy()
    return pd.DataFrame(
        {
            "nodes": np.maximum(jobs["devices"].to_numpy(int) // GPUS_PER_NODE, 1),
            "architecture": jobs["architecture"].astype(str).to_numpy(),
            "software_version": jobs["software_version"].astype(str).to_numpy(),
            "hours": [f"{6 * (h // 6):02d}-{6 * (h // 6) + 6:02d} UTC" for h in hour],
            "pipeline_stage": NOT_STATED,
            "devices": jobs["devices"].to_numpy(int),
            "retained_steps": jobs["retained_steps"].to_numpy(float),
        },
        index=jobs.index,
    )
