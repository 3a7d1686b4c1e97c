"""Losses a scheduler format cannot observe are null with a reason, never a measured 0 (issue 28 item 7)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.fleet.commands import render_fleet
from fleetlib.scheduling import UNOBSERVABLE_LOSSES, measure, unobserved_losses
from fleetlib.scheduling.commands import render_scheduling

ROOT = Path(__file__).resolve().parents[2]
SLURM = [ROOT / "data" / "scheduler" / "slurm_sample" / n
         for n in ("sacct.txt", "sacctmgr_events.txt", "sinfo_nodes.txt")]
EMPTY = pd.DataFrame()


def test_each_rule_names_the_format_and_the_reason() -> None:
    slurm = unobserved_losses("slurm", {"allocations": EMPTY, "capacity": EMPTY})
    assert list(slurm) == ["partial_gang_hold", "reservation"]
    assert slurm["partial_gang_hold"].startswith("not observable in slurm records: sacct's Start")
    # Kubernetes records see a gang complete (PodsReady, Running) but not a reservation
    assert list(unobserved_losses("kueue", {"allocations": EMPTY, "capacity": EMPTY})) == ["reservation"]
    # a reservations table makes the reservation loss observable; handed-in tables name no format
    both = unobserved_losses(None, {"allocations": EMPTY, "capacity": EMPTY, "reservations": EMPTY})
    assert both == {}
    assert unobserved_losses(None, {"allocations": EMPTY})["reservation"].startswith(
        "not observable in these records")
    assert set(UNOBSERVABLE_LOSSES["helios-sequence"]) == {"partial_gang_hold", "reservation"}


def test_slurm_records_print_no_measured_zero_for_what_they_cannot_see() -> None:
    m = measure(SLURM, format="slurm", tz="UTC", window=("2024-03-04T00:00Z", "2024-03-05T00:00Z"))
    assert m.factor().losses["partial_gang_hold"] == 0.0  # the partition still adds up
    d = m.to_dict()
    for part in (d, *d["pools"].values()):
        assert part["losses"]["partial_gang_hold"] is None and part["losses"]["reservation"] is None
        assert part["losses"]["idle_with_queue"] is not None
    text = render_scheduling(d)
    assert "partial-gang hold" in text and "not observable in slurm records" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("partial-gang hold"))
    assert "0.0" not in row.split("not observable")[0]


def test_the_fleet_walk_nulls_them_in_its_json_text_and_waterfall() -> None:
    fm = measure_fleet(ROOT / "data" / "fleet" / "slurm_sample")
    d = fm.to_dict()
    s = d["factors"]["scheduling"]
    assert set(s["unobserved"]) == {"partial_gang_hold", "reservation"}
    assert s["losses"]["partial_gang_hold"] is None and s["losses"]["reservation"] is None
    assert d["waterfall_device_s"]["loss:scheduling.reservation"] is None
    observed = sum(v for v in s["losses"].values() if v is not None)
    assert d["factors"]["scheduling"]["numerator_device_s"] + observed == pytest.approx(
        d["in_service_capacity_device_s"], rel=1e-12)
    assert "scheduling.partial_gang_hold" in render_fleet(d) and "not observable in slurm" in render_fleet(d)
