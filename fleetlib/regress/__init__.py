"""Regressions under a contract: comparisons with intervals, Table 4's tiers, baselines, trace plans.

* :mod:`fleetlib.regress.units` -- a measured bundle as its metrics' resampling units (demand
  cycles, jobs, checkpoint commits, retained steps);
* :mod:`fleetlib.regress.compare` -- :func:`compare`: per factor, loss category and tier metric,
  baseline, candidate, delta, an interval at the metric's own unit (paired by job where the sides
  share jobs), the minimum detectable effect and a verdict, family-wise by Holm's step-down; refused
  when the contracts differ on a field not under test;
* :mod:`fleetlib.regress.tiers` -- Table 4's tiers as metric sets and findings;
* :mod:`fleetlib.regress.baselines` -- baselines as Parquet per (pool, architecture, software
  version), built and checked;
* :mod:`fleetlib.regress.sampling` -- a stratified step-trace plan with triggered episodes;
* :mod:`fleetlib.regress.synth` -- synthetic regression pairs with what was injected, the checkpoint
  twin and unchanged pairs.
"""

from fleetlib.regress.units import FleetUnits, fleet_units

__all__ = ["FleetUnits", "fleet_units"]
