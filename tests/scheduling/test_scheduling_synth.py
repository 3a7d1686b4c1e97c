"""Synthetic fleets with injected losses, and the canonical Parquet round trip."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fleetlib.quality import DomainError, InputError
from fleetlib.scheduling.goodput import scheduling_partition, scheduling_summary
from fleetlib.scheduling.readers import READERS
from fleetlib.scheduling.records import validate_allocations, validate_reservations
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS, PARTITION_COLUMNS
from fleetlib.scheduling.synth import (
    synth_allocations_command,
    synthetic_fleet,
    write_allocations,
)
from fleetlib.scheduling.views import goodput_timeseries, held_time


@pytest.fixture(scope="module")
def fleet():
    return synthetic_fleet(3000, seed=11)


def test_exactly_n_rows_canonical_and_valid(fleet):
    a = fleet.allocations
    assert len(a) == 3000 and list(a.columns) == list(ALLOCATION_COLUMNS)
    _, led = validate_allocations(a)
    assert led.kept == 3000 and not led.entries
    _, led = validate_reservations(fleet.reservations)
    assert led.kept == len(fleet.reservations) and not led.entries
    assert set(fleet.truth.columns) == set(PARTITION_COLUMNS)


def test_every_loss_category_is_injected(fleet):
    tr = fleet.truth.sum()
    for c in ("held_device_s", "partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue",
              "out_of_service_device_s"):
        assert tr[c] > 0, c
    assert fleet.allocations["elastic"].any() and (fleet.allocations["attempt"] > 0).any()
    # the cross-pool view finds more policy loss than the per-pool view
    assert tr["cross_pool_idle_with_queue"] > tr["idle_with_queue"]


def test_truth_is_a_partition(fleet):
    tr = fleet.truth
    parts = tr[["held_device_s", "partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue"]]
    np.testing.assert_array_equal(parts.sum(axis=1).to_numpy(), tr["capacity_device_s"].to_numpy())
    assert (tr["unattributed"] == 0).all()


def test_computed_partition_equals_injected_exactly(fleet):
    part = scheduling_partition(fleet.allocations, fleet.capacity, reservations=fleet.reservations)
    pd.testing.assert_frame_equal(part.table, fleet.truth, check_exact=True)


@pytest.mark.parametrize("kwargs", [
    {"seed": 1, "reservation_share": 0.0, "out_of_service_share": 0.0},
    {"seed": 2, "elastic_share": 1.0, "partial_share": 1.0},
    {"seed": 3, "slot_s": 600, "days": 2, "mean_job_slots": 1.0, "mean_gap_slots": 0.0},
    {"seed": 4, "pools": {"solo": {"share": 1.0, "widths": (4, 16)}}, "retry_share": 0.5},
])
def test_exact_for_fleet_variants(kwargs):
    f = synthetic_fleet(800, **kwargs)
    assert len(f.allocations) == 800
    part = scheduling_partition(f.allocations, f.capacity, reservations=f.reservations)
    pd.testing.assert_frame_equal(part.table, f.truth, check_exact=True)


def test_without_reservations_table_the_reserved_time_is_idle_with_queue(fleet):
    part = scheduling_partition(fleet.allocations, fleet.capacity)
    tr = fleet.truth
    np.testing.assert_array_equal(part.table["reservation"].to_numpy(), 0.0)
    np.testing.assert_array_equal(part.table["idle_with_queue"].to_numpy(),
                                  (tr["idle_with_queue"] + tr["reservation"]).to_numpy())


def test_same_seed_same_fleet_other_seed_other_fleet():
    a, b, c = synthetic_fleet(300, seed=5), synthetic_fleet(300, seed=5), synthetic_fleet(300, seed=6)
    pd.testing.assert_frame_equal(a.allocations, b.allocations)
    assert not a.allocations.equals(c.allocations)


def test_demand_is_diurnal():
    f = synthetic_fleet(20000, seed=9)
    ts = goodput_timeseries(f.allocations, f.capacity, reservations=f.reservations)
    hour = ts["start"].dt.hour
    g = ts.groupby(hour)[["held_device_s", "capacity_device_s"]].sum()
    s_by_hour = g["held_device_s"] / g["capacity_device_s"]
    assert s_by_hour.loc[12:16].mean() > s_by_hour.loc[0:4].mean() + 0.05


def test_elastic_shrink_rows_and_held_time():
    f = synthetic_fleet(2000, seed=8, elastic_share=1.0)
    a = f.allocations
    seg = a[a["elastic"] & (a["attempt"] == 1)]
    first = a[a["elastic"] & (a["attempt"] == 0)].set_index("job_id").loc[seg["job_id"]]
    assert (seg["devices"].to_numpy() == first["devices"].to_numpy() // 2).all()
    assert (seg["gang_complete"].to_numpy() == first["release"].to_numpy()).all()
    h = held_time(a)
    assert h["held_device_s"].sum() == pytest.approx(f.truth["held_device_s"].sum())


def test_bad_arguments():
    for kwargs in ({"n": 0}, {"n": 2.5}, {"n": 10, "partial_share": 1.5}, {"n": 10, "slot_s": 4},
                   {"n": 10, "start": "2025-01-01"}, {"n": 10, "pools": {}},
                   {"n": 10, "pools": {"x": {"widths": (0,)}}}):
        with pytest.raises(DomainError):
            synthetic_fleet(**kwargs)


# --- the canonical Parquet file ------------------------------------------------------------------


def test_parquet_round_trip_and_summary(tmp_path, fleet):
    path = write_allocations(fleet.allocations, fleet.capacity, tmp_path / "f.parquet",
                             reservations=fleet.reservations, row_group_size=1000)
    recs, led = READERS["canonical"].read(path)
    n_rows = len(fleet.allocations) + len(fleet.capacity) + len(fleet.reservations)
    assert led.read == led.kept == n_rows and not led.entries
    for got, want in ((recs.allocations, fleet.allocations), (recs.capacity, fleet.capacity),
                      (recs.reservations, fleet.reservations)):
        assert len(got) == len(want)
        for c in want.columns:
            assert (got[c].astype(str).to_numpy() == want[c].astype(str).to_numpy()).all(), c
    assert recs.queue is None and recs.source == str(path)
    s = scheduling_summary(**recs.tables(), ledger=led)
    tr = fleet.truth.sum()
    assert s["held_device_s"] == tr["held_device_s"]
    assert s["losses"]["idle_with_queue"] == tr["idle_with_queue"]
    assert s["cross_pool_losses"]["idle_with_queue"] == tr["cross_pool_idle_with_queue"]
    assert s["ledger"]["read"] == n_rows


def test_string_job_ids_round_trip(tmp_path):
    f = synthetic_fleet(50, seed=3)
    a = f.allocations.copy()
    a["job_id"] = "job-" + a["job_id"].astype(str)
    path = write_allocations(a, f.capacity, tmp_path / "s.parquet")
    recs, led = READERS["canonical"].read(path)
    assert recs.allocations["job_id"].tolist() == a["job_id"].tolist() and led.kept == led.read
    assert recs.reservations is None


def test_canonical_reader_refuses_other_parquet(tmp_path):
    p = tmp_path / "plain.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(p)
    with pytest.raises(InputError, match="fleetlib"):
        READERS["canonical"].read(p)
    q = tmp_path / "notparquet.parquet"
    q.write_text("hello")
    with pytest.raises(InputError, match="Parquet"):
        READERS["canonical"].read(q)


def test_canonical_reader_without_validation_counts_rows(tmp_path):
    f = synthetic_fleet(40, seed=2)
    _, led = READERS["canonical"].read(write_allocations(f.allocations, f.capacity, tmp_path / "v.parquet"),
                               validate=False)
    assert led.read == led.kept == 40 + len(f.capacity)


def test_synth_command_writes_a_file_the_canonical_reader_reads(tmp_path):
    out = synth_allocations_command(500, 4, tmp_path / "cmd.parquet")
    json.dumps(out)
    assert out["allocations"] == 500 and out["path"].endswith("cmd.parquet")
    recs, led = READERS["canonical"].read(out["path"])
    assert len(recs.allocations) == 500 and led.rejected == 0
    s = scheduling_summary(**recs.tables(), ledger=led)
    assert s["scheduling_goodput"] == pytest.approx(out["truth"]["scheduling_goodput"], rel=1e-12)
    for pool, row in out["truth"]["pools"].items():
        assert s["pools"][pool]["losses"]["partial_gang_hold"] == row["partial_gang_hold"]
