"""Regressions under a contract: comparisons with intervals, Table 4's tiers, baselines, trace plans.

* :mod:`fleetlib.regress.units` -- a measured bundle as its factors' resampling units (demand
  cycles for S, jobs within days for R, steps within jobs for P);
* :mod:`fleetlib.regress.compare` -- :func:`compare`: per factor, loss category and tier metric,
  baseline, candidate, delta, a bootstrap interval and a verdict, refused when the contracts differ
  on a field not under test;
* :mod:`fleetlib.regress.tiers` -- Table 4's tiers as metric sets and findings;
* :mod:`fleetlib.regress.baselines` -- baselines as Parquet per (pool, architecture, software
  version), built and checked;
* :mod:`fleetlib.regress.sampling` -- a stratified step-trace plan with triggered episodes;
* :mod:`fleetlib.regress.synth` -- synthetic regression pairs with what was injected.
"""

from fleetlib.regress.units import FleetUnits, fleet_units

__all__ = ["FleetUnits", "fleet_units"]
