"""The report's fleet as the walk's rung pages read it: one bundle, measured the way the index measures it.

Pages 01-03 of the walk drill into the fleet the index heads with (its pools, jobs and traced ranks).
:func:`walk_fleet` gives each of them the same three things: the bundle's manifest, its measurement
(:func:`fleetlib.fleet.measure_fleet`, the call behind the index's headline, so every S, R, P and MPG a
page prints is the index's), and the tables the pages draw from it. A rung page then calls its own rung's
``measure()`` on the bundle's files for what only that rung can show.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fleetlib.fleet import FleetManifest, FleetMeasurement, load_manifest, measure_fleet, views
from fleetlib.report.tables import say

__all__ = ["WalkFleet", "walk_fleet"]


@dataclass(frozen=True)
class WalkFleet:
    """One fleet bundle and its measurement, as the walk's pages use them.

    Attributes
    ----------
    manifest_text
        The manifest's path as the page was given it (shown to the reader).
    manifest
        The bundle's manifest: its files by record, the window, the model configs and traces.
    measurement
        The bundle measured by :func:`fleetlib.fleet.measure_fleet` (S, R, P, MPG and their parts).
    """

    manifest_text: str
    manifest: FleetManifest
    measurement: FleetMeasurement

    @property
    def window(self) -> Any:
        """The window a rung's ``measure()`` takes: the fleet's window, or its ends when none is left out."""
        window = self.measurement.window
        return window if window.exclusions else (window.start, window.end)

    def job_table(self) -> pd.DataFrame:
        """Return one row per job: held device-h, R, P, the job product (fleet views)."""
        return views.job_table(self.measurement)

    def trace_table(self) -> pd.DataFrame:
        """Return, per traced job, its step partition in device-hours (fleet views)."""
        return views.trace_table(self.measurement)

    def traced_jobs(self) -> list[str]:
        """Return the traced jobs that have a model config (their partition can be scaled), in id order."""
        return sorted(job for job in self.measurement.traces if job in self.manifest.models)

    def introduction(self) -> Any:
        """Return the sentence a walk page opens with: which bundle, which records, how many of each.

        Returns
        -------
        IPython.display.Markdown
            The sentence, its values escaped (:func:`fleetlib.report.say`).
        """
        m = self.manifest
        return say("**The report's fleet**: {name} (manifest {manifest}): scheduler records in {fmt} format, "
                   "{timelines:,} timeline file(s), {models:,} model config(s), {traced:,} traced job(s).",
                   name=self.measurement.name, manifest=self.manifest_text, fmt=m.scheduler_format,
                   timelines=len(m.timeline_files), models=len(m.models), traced=len(m.traces))


def walk_fleet(fleet_manifest: str | Path) -> WalkFleet:
    """Read and measure the report's fleet bundle for one page of the walk.

    Parameters
    ----------
    fleet_manifest
        The bundle's ``fleet.yaml`` (relative to the working directory, as the notebooks' parameter is).

    Returns
    -------
    WalkFleet
        The manifest, the measurement and the page's tables.

    Raises
    ------
    fleetlib.InputError
        The manifest or a record it names cannot be read (see :func:`fleetlib.fleet.measure_fleet`).
    """
    manifest = load_manifest(fleet_manifest)
    return WalkFleet(str(fleet_manifest), manifest, measure_fleet(manifest))
