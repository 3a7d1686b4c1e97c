"""Deprecated: rank-timer stragglers moved to :mod:`fleetlib.program.stragglers`.

The name ``fleet`` is reserved for the roof that composes the three factors (``fleetlib.fleet``).
This module re-exports every name it used to define, for one release; importing it warns with a
:class:`DeprecationWarning`.  The rank-timer reader itself is
:mod:`fleetlib.program.readers.rank_timers`.
"""

from __future__ import annotations

import warnings

import fleetlib.program.stragglers as _stragglers
from fleetlib.program.readers.rank_timers import (  # noqa: F401
    _blocks,
    _check_block,
    _Clean,
    _dask_frame,
    _duplicate_pair,
    _is_csv,
    _parquet_blocks,
    _read_block,
    _read_csv,
    _row_of,
)
from fleetlib.program.stragglers import (  # noqa: F401
    AUTO_DASK_ROWS,
    DEFAULT_PARTITION_ROWS,
    DEFAULT_STRAGGLERS,
    MAX_RANK,
    MAX_REJECTED_ROWS,
    PER_RANK_COLUMNS,
    PER_STEP_COLUMNS,
    RANK_TIMER_COLUMNS,
    FleetStragglers,
    _Block,
    _combine_ranks,
    _combine_steps,
    _finish,
    _pass1_block,
    _pass2_block,
    _RankPartial,
    _StepPartial,
    _tree,
    local_cluster,
    rank_timer_files,
    rank_timers_dask,
    read_rank_timers,
    straggler_analysis,
    synth_rank_timers,
)

__all__ = list(_stragglers.__all__)

warnings.warn("fleetlib.program.fleet is deprecated: use fleetlib.program.stragglers (and "
              "fleetlib.program.readers.rank_timers for the reader)", DeprecationWarning, stacklevel=2)
