"""The roof: one fleet bundle (scheduler records, job timelines, step traces) -> one measured MPG.

* :mod:`fleetlib.fleet.manifest` -- ``fleet.yaml``: load, validate, every path inside the bundle;
* :mod:`fleetlib.fleet.measure` -- :func:`measure_fleet`, the walk: S, R over the scheduler's held
  time, P over R's productive time, MPG with the chain checked, waterfall, levers, cost -- each record
  read and measured through its rung's door; with ``engine="dask"`` one task per timeline file;
* :mod:`fleetlib.fleet.results` -- the loss vocabularies, factors from the per-job table, pools,
  cohorts, waterfall and levers;
* :mod:`fleetlib.fleet.engine` -- ``engine="dask"``: starts a ``distributed`` LocalCluster (or takes a
  given client) for the walk's tasks;
* :mod:`fleetlib.fleet.serving` -- :func:`measure_serving`: the bundle's serving pool (its own
  scheduler records, replica lifecycle log, decode steps, model) as S, R and P = MBU, never part of MPG;
* :mod:`fleetlib.fleet.synth` -- :func:`synth_fleet`: a joint synthetic bundle in real formats with
  its truth file;
* :mod:`fleetlib.fleet.scale` -- :func:`synth_fleet_scale`: a fleet-scale bundle (a month of 16,384
  devices), vectorised, with partitioned canonical timelines;
* :mod:`fleetlib.fleet.commands` -- ``fleetlib fleet`` and ``fleetlib synth fleet``.
"""

from fleetlib.fleet.manifest import FleetManifest, load_manifest
from fleetlib.fleet.measure import FleetMeasurement, measure_fleet
from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.fleet.serving import ServingMeasurement, measure_serving
from fleetlib.fleet.synth import SyntheticFleetBundle, synth_fleet

__all__ = [
    "FleetManifest",
    "FleetMeasurement",
    "ServingMeasurement",
    "SyntheticFleetBundle",
    "load_manifest",
    "measure_fleet",
    "measure_serving",
    "synth_fleet",
    "synth_fleet_scale",
]
