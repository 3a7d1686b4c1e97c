"""Scheduling goodput from records: hand-computed partitions, views, denominators and per-job views.

Every expected number below is worked out by hand from the fixture (device-hours x 3600), not by
the library.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, InputError, Ledger
from fleetlib.scheduling import goodput as gp
from fleetlib.scheduling.goodput import scheduling_goodput, scheduling_partition, scheduling_summary
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS, LOSS_KEYS, PARTITION_COLUMNS
from fleetlib.scheduling.sweep import EventBlock, sort_events
from fleetlib.scheduling.views import (
    cohort_goodput,
    derive_queue,
    fragmentation_index,
    goodput_timeseries,
    held_time,
    occupancy,
    queue_waits,
    silent_stretches,
    stranded_devices,
)

T0 = pd.Timestamp("2025-03-03", tz="UTC")
H = 3600.0


def t(h: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(hours=h)


def allocs(*rows: tuple) -> pd.DataFrame:
    """Rows (job, pool, devices, submit, first_assigned, gang_complete, release) in hours."""
    out = []
    for i, (job, pool, dev, s, fa, gc, rel) in enumerate(rows):
        out.append({"job_id": job, "attempt": 0, "pool": pool, "devices": dev, "submit": t(s),
                    "first_assigned": None if fa is None else t(fa),
                    "gang_complete": None if gc is None else t(gc), "release": t(rel), "priority": i,
                    "elastic": False, "end_state": "completed", "requested_devices": max(dev, 1)})
    df = pd.DataFrame(out)[list(ALLOCATION_COLUMNS)]
    for c in ("submit", "first_assigned", "gang_complete", "release"):
        df[c] = pd.to_datetime(df[c], utc=True)
    return df


def caps(*rows: tuple) -> pd.DataFrame:
    return pd.DataFrame([{"pool": p, "start": t(s), "end": t(e), "devices_in_service": i,
                          "devices_out_of_service": o} for p, s, e, i, o in rows])


# Two pools over [0, 10) h.
#   pool a: 10 in service + 2 out; job 1 (8 devices): waits 0-0, partial 0-2, held 2-10.
#   pool b: 4 in service; job 2 (4 devices): submitted 1, assigned and complete 3, released 5.
#   Pending: a on [0, 2) (job 1 partial), b on [1, 3).  Any pool pending: [0, 3).
TWO = dict(allocations=allocs((1, "a", 8, 0, 0, 2, 10), (2, "b", 4, 1, 3, 3, 5)),
           capacity=caps(("a", 0, 10, 10, 2), ("b", 0, 10, 4, 0)))


def test_two_pool_partition_by_hand():
    part = scheduling_partition(**TWO)
    a, b = part.table.loc["a"], part.table.loc["b"]
    assert a["capacity_device_s"] == 100 * H and a["installed_device_s"] == 120 * H
    assert a["held_device_s"] == 64 * H and a["partial_gang_hold"] == 16 * H
    # 2 free devices all along; pending in a on [0, 2) -> 4 device-h with queue, 16 without
    assert a["idle_with_queue"] == 4 * H and a["idle_empty_queue"] == 16 * H
    # cross-pool: any pool pending on [0, 3) -> 6 device-h
    assert a["cross_pool_idle_with_queue"] == 6 * H and a["cross_pool_idle_empty_queue"] == 14 * H
    assert b["held_device_s"] == 8 * H and b["partial_gang_hold"] == 0
    assert b["idle_with_queue"] == 8 * H and b["idle_empty_queue"] == 24 * H
    assert b["cross_pool_idle_with_queue"] == 12 * H
    assert (part.table["unattributed"] == 0).all() and (part.table["over_allocated_device_s"] == 0).all()
    assert part.scheduling_goodput == pytest.approx(72 / 140)
    assert part.availability == pytest.approx(140 / 160)
    assert part.flags == ()


def test_factor_contract_and_views():
    f = scheduling_goodput(**TWO)
    assert isinstance(f, Factor) and f.boundary == "scheduling"
    assert f.numerator == 72 * H and f.denominator == 140 * H and f.numerator_unit == "device-s"
    assert f.convention == "scheduling, in-service denominator, per-pool idle view"
    assert f.window.same_as(Window.between(t(0), t(10)))
    assert f.losses["idle_with_queue"] == 12 * H and f.losses["unattributed"] == 0
    fc = scheduling_goodput(**TWO, view="cross_pool")
    assert fc.value == f.value and fc.losses["idle_with_queue"] == 18 * H
    assert "cross-pool" in fc.convention
    fa = scheduling_goodput(**TWO, pool="a")
    assert fa.value == pytest.approx(0.64)
    with pytest.raises(DomainError, match="unknown pool"):
        scheduling_goodput(**TWO, pool="zz")
    with pytest.raises(DomainError, match="view"):
        scheduling_goodput(**TWO, view="global")


def test_installed_denominator_is_explicit_and_adds_out_of_service():
    f = scheduling_goodput(**TWO, denominator="installed")
    assert f.denominator == 160 * H and f.value == pytest.approx(72 / 160)
    assert f.losses["out_of_service"] == 20 * H and f.losses["unattributed"] == pytest.approx(0, abs=1e-6)
    assert "installed denominator" in f.convention
    s = scheduling_summary(**TWO, denominator="installed")
    assert s["capacity_device_s"] == 160 * H and s["losses"]["out_of_service"] == 20 * H
    with pytest.raises(DomainError, match="denominator"):
        scheduling_summary(**TWO, denominator="quota")


def test_napkin_pool_snapshot_from_records_rule_6():
    # 100 devices for 10 h: 65 held by complete gangs, 15 by a gang waiting for members (that
    # never completes), 20 unassigned -> S = 0.65, not the 0.80 a dashboard shows as assigned.
    a = allocs((1, "p", 65, 0, 0, 0, 10), (2, "p", 15, 0, 0, 10, 10))
    part = scheduling_partition(a, caps(("p", 0, 10, 100, 0)))
    assert part.scheduling_goodput == pytest.approx(0.65)
    assert part.table.loc["p", "partial_gang_hold"] / (1000 * H) == pytest.approx(0.15)
    assert part.scheduling_goodput != pytest.approx(0.80)
    # the waiting gang keeps the queue non-empty: the 20 free devices are a policy loss
    assert part.table.loc["p", "idle_with_queue"] == 200 * H


def test_reservations_are_their_own_loss():
    a = allocs((1, "p", 4, 0, 2, 2, 10))
    res = pd.DataFrame({"pool": ["p"], "start": [t(0)], "end": [t(2)], "devices": [4], "for_job_id": [1]})
    part = scheduling_partition(a, caps(("p", 0, 10, 8, 0)), reservations=res)
    row = part.table.loc["p"]
    assert row["reservation"] == 8 * H and row["held_device_s"] == 32 * H
    # 4 devices free on [0, 2) while job 1 waited, 4 free on [2, 10) with an empty queue
    assert row["idle_with_queue"] == 8 * H and row["idle_empty_queue"] == 32 * H
    assert row["unattributed"] == 0


def test_allocated_above_capacity_is_reported_not_clipped():
    a = allocs((1, "p", 6, 0, 0, 0, 10), (2, "p", 6, 0, 4, 4, 6))
    part = scheduling_partition(a, caps(("p", 0, 10, 10, 0)))
    row = part.table.loc["p"]
    assert row["held_device_s"] == 72 * H
    assert row["over_allocated_device_s"] == 4 * H and row["unattributed"] == -4 * H
    # 4 free devices outside [4, 6): with job 2 waiting on [0, 4), without a queue on [6, 10)
    assert row["idle_with_queue"] == 16 * H and row["idle_empty_queue"] == 16 * H
    assert len(part.flags) == 1 and "allocated above capacity" in part.flags[0]
    assert t(4).isoformat() in part.flags[0]
    s = scheduling_summary(a, caps(("p", 0, 10, 10, 0)), ledger=Ledger(read=2, kept=2))
    assert s["losses"]["unattributed"] == -4 * H and s["ledger"]["flags"] == list(part.flags)
    assert s["ledger"]["read"] == 2
    # held above the whole capacity: no factor, a clear error
    big = allocs((1, "p", 12, 0, 0, 0, 10))
    with pytest.raises(DomainError, match="inconsistent"):
        scheduling_goodput(big, caps(("p", 0, 10, 10, 0)))


def test_allocations_in_a_pool_without_capacity_are_flagged():
    a = allocs((1, "p", 2, 0, 0, 0, 5), (2, "ghost", 1, 0, 0, 0, 5))
    part = scheduling_partition(a, caps(("p", 0, 10, 4, 0)))
    assert part.table.loc["ghost", "over_allocated_device_s"] == 5 * H
    assert any("'ghost'" in f for f in part.flags)
    with pytest.raises(DomainError, match="no in-service capacity"):
        part.factor("ghost")


def test_summary_has_exactly_the_cli_keys_and_is_json_ready():
    s = scheduling_summary(**TWO)
    assert set(s) == {"scheduling_goodput", "capacity_device_s", "held_device_s", "availability", "losses",
                      "cross_pool_losses", "pools", "ledger"}
    assert list(s["losses"]) == list(LOSS_KEYS)
    assert set(s["cross_pool_losses"]) == {"idle_with_queue", "idle_empty_queue"}
    assert set(s["pools"]) == {"a", "b"}
    assert set(s["pools"]["a"]) == set(s) - {"pools", "ledger"}
    assert s["scheduling_goodput"] == pytest.approx(72 / 140)
    assert s["held_device_s"] + sum(s["losses"].values()) == pytest.approx(s["capacity_device_s"])
    json.dumps(s)


def test_window_cuts_every_interval():
    part = scheduling_partition(**TWO, window=(t(2), t(4)))
    a, b = part.table.loc["a"], part.table.loc["b"]
    assert a["capacity_device_s"] == 20 * H and a["held_device_s"] == 16 * H and a["partial_gang_hold"] == 0
    assert b["held_device_s"] == 4 * H and b["idle_with_queue"] == 4 * H and b["idle_empty_queue"] == 0
    assert part.window.same_as(Window.between(t(2), t(4)))
    same = scheduling_partition(**TWO, window=Window.between(t(2), t(4)))
    pd.testing.assert_frame_equal(part.table, same.table)


def test_bad_windows_and_missing_capacity():
    with pytest.raises(DomainError, match="measured window"):
        scheduling_partition(**TWO, window=Window.nominal("a week"))
    with pytest.raises(DomainError, match="has no zone"):  # Window.parse's message
        scheduling_partition(**TWO, window=(pd.Timestamp("2025-03-03"), pd.Timestamp("2025-03-04")))
    with pytest.raises(DomainError, match="capacity"):
        scheduling_partition(TWO["allocations"], None)
    with pytest.raises(DomainError, match="no in-service capacity"):
        scheduling_goodput(**TWO, window=(t(20), t(30)))  # empty window
    with pytest.raises(DomainError, match="not both"):
        scheduling_partition(**TWO, occupancy=occupancy(**TWO))


def test_unvalidated_tables_are_refused():
    bad = TWO["allocations"].copy()
    bad.loc[0, "release"] = t(1)  # before gang completion
    with pytest.raises(DomainError, match="validate"):
        scheduling_partition(bad, TWO["capacity"])
    nopool = TWO["allocations"].copy()
    nopool.loc[1, "pool"] = None
    with pytest.raises(DomainError, match="no pool"):
        scheduling_partition(nopool, TWO["capacity"])
    naive = TWO["allocations"].copy()
    naive["submit"] = naive["submit"].dt.tz_localize(None)
    with pytest.raises(ValueError, match="naive"):
        scheduling_partition(naive, TWO["capacity"])


def test_given_queue_equals_derived_queue():
    q = derive_queue(TWO["allocations"])
    assert q["pending_jobs"].tolist() == [1, 1] and q["pending_devices"].tolist() == [8, 4]
    assert q["start"].tolist() == [t(0), t(1)] and q["end"].tolist() == [t(2), t(3)]
    p1 = scheduling_partition(**TWO)
    p2 = scheduling_partition(**TWO, queue=q)
    pd.testing.assert_frame_equal(p1.table, p2.table)
    # an explicit queue decides the idle split: a queue that is never empty makes all idle policy loss
    busy = pd.DataFrame({"pool": ["a", "b"], "start": [t(0)] * 2, "end": [t(10)] * 2, "pending_jobs": [3, 1],
                         "pending_devices": [9, 1]})
    p3 = scheduling_partition(**TWO, queue=busy)
    assert (p3.table["idle_empty_queue"] == 0).all()
    assert p3.table.loc["a", "idle_with_queue"] == 20 * H


def test_occupancy_path_and_argsort_fallback_agree_with_the_sweep():
    occ = occupancy(**TWO)
    assert list(occ.columns) == ["pool", "start", "end", "in_service", "out_of_service", "held_complete",
                                 "partial_gang", "reserved", "pending_jobs", "pending_devices"]
    first = occ.iloc[0]
    got = (first["pool"], first["held_complete"], first["partial_gang"], first["pending_jobs"])
    assert got == ("a", 0, 8, 1)
    p_sweep = scheduling_partition(**TWO)
    pd.testing.assert_frame_equal(p_sweep.table, scheduling_partition(occupancy=occ).table)
    pd.testing.assert_frame_equal(p_sweep.table, scheduling_partition(**TWO, _force_argsort=True).table)
    assert p_sweep.record.startswith("scheduler records (allocations")
    assert scheduling_partition(occupancy=occ).record == "scheduler records (occupancy)"


def test_sub_second_times_use_nanoseconds_and_still_agree():
    a = allocs((1, "p", 3, 0, 1, 2, 5))
    for c in ("submit", "first_assigned", "gang_complete", "release"):
        a[c] = a[c] + pd.Timedelta(nanoseconds=7)
    for devices in (1000, 100000):  # packed key at ns resolution; too wide for the key (lexsort)
        cap = caps(("p", 0, 10, devices, 0))
        p1 = scheduling_partition(a, cap)
        p2 = scheduling_partition(a, cap, _force_argsort=True)
        pd.testing.assert_frame_equal(p1.table, p2.table)
        row = p1.table.loc["p"]
        assert row["held_device_s"] == pytest.approx(9 * H, rel=1e-15)
        # pending from 7 ns to 2 h + 7 ns: all devices free for 1 h, then 3 fewer for 1 h
        assert row["idle_with_queue"] == pytest.approx((2 * devices - 3) * H, rel=1e-12)
        assert row["idle_empty_queue"] == pytest.approx((devices - 3) * 3 * H + devices * 5 * H, rel=1e-12)


def test_packed_key_falls_back_when_it_does_not_fit():
    # ns resolution over ~100 days (53 bits) and a 2**20 device magnitude cannot share 63 bits
    blocks = [EventBlock(np.array([0, 0]), np.array([5, 100 * 86400 * 10**9 + 3]), 1,
                         np.array([2**20, 1]))]
    _, tt, _, mag = sort_events(blocks, 0, 100 * 86400 * 10**9 + 10, 1, 4)
    assert tt.tolist() == [5, 100 * 86400 * 10**9 + 3] and mag.tolist() == [2**20, 1]


def test_helios_like_occupancy_reproduces_the_raw_arithmetic():
    # minute rows in the style of the Helios per-VC sequences: total, running, idle, pending jobs
    rng = np.random.default_rng(4)
    n = 600
    total = rng.choice([64, 64, 64, 72], size=n)
    running = np.minimum(rng.integers(20, 80, size=n), total)
    idle = total - running
    pending = rng.integers(0, 3, size=n) * (rng.random(n) < 0.4)
    start = pd.date_range(t(0), periods=n, freq="1min")
    occ = pd.DataFrame({"pool": "vcX", "start": start, "end": start + pd.Timedelta(minutes=1),
                        "in_service": total, "out_of_service": 0, "held_complete": running,
                        "partial_gang": 0, "reserved": 0, "pending_jobs": pending,
                        "pending_devices": pending * 8})
    assert (occ["held_complete"] + idle == occ["in_service"]).all()
    row = scheduling_partition(occupancy=occ).table.loc["vcX"]
    assert row["held_device_s"] / row["capacity_device_s"] == pytest.approx(running.sum() / total.sum())
    assert row["idle_with_queue"] == idle[pending > 0].sum() * 60.0
    assert row["idle_empty_queue"] == idle[pending == 0].sum() * 60.0


def test_timeseries_sums_to_the_partition_and_shows_missing_capacity_as_na():
    ts = goodput_timeseries(**TWO)
    assert len(ts) == 2 * 10 and ts["start"].iloc[0] == t(0) and ts["end"].iloc[-1] == t(10)
    part = scheduling_partition(**TWO)
    sums = ts.groupby("pool", observed=True)[[c for c in PARTITION_COLUMNS if c in ts.columns]].sum()
    for c in sums.columns:
        np.testing.assert_allclose(sums[c].to_numpy(), part.table[c].to_numpy())
    a = ts[ts["pool"] == "a"].reset_index(drop=True)
    assert a["scheduling_goodput"].iloc[0] == 0 and a["scheduling_goodput"].iloc[5] == pytest.approx(0.8)
    assert a["idle_with_queue"].iloc[1] == 2 * H and a["cross_pool_idle_with_queue"].iloc[2] == 2 * H
    gap = goodput_timeseries(**TWO, window=(t(8), t(12)), freq="2h")
    assert len(gap) == 4 and gap["scheduling_goodput"].isna().sum() == 2
    daily = goodput_timeseries(**TWO, freq="1D")
    assert len(daily) == 2
    with pytest.raises(DomainError, match="freq"):
        goodput_timeseries(**TWO, freq="-1h")


def test_held_time_per_job_and_attempt():
    a = allocs((1, "p", 8, 0, 1, 2, 5), (2, "p", 4, 0, 0, 0, 3))
    a = pd.concat([a, allocs((1, "p", 8, 6, 6, 7, 9))]).reset_index(drop=True)
    a.loc[2, "attempt"] = 1
    h = held_time(a).set_index("job_id")
    assert h.loc[1, "held_s"] == 5 * H and h.loc[1, "held_device_s"] == 40 * H
    assert h.loc[1, "partial_hold_s"] == 2 * H and h.loc[1, "attempts"] == 2
    assert h.loc[1, "first_gang_complete"] == t(2) and h.loc[1, "last_release"] == t(9)
    assert h.loc[2, "held_device_s"] == 12 * H
    per = held_time(a, by="attempt")
    assert len(per) == 3 and per["held_s"].tolist() == [3 * H, 3 * H, 2 * H]
    cut = held_time(a, window=(t(0), t(4))).set_index("job_id")
    assert cut.loc[1, "held_s"] == 2 * H


def test_queue_wait_costs_time_to_result_not_goodput_while_the_pool_is_full_rule_9():
    # pool of 8 held completely by job 1 on [0, 6); job 2 waits from 1 to 6 then runs to 8
    a = allocs((1, "p", 8, 0, 0, 0, 6), (2, "p", 8, 1, 6, 6, 8), (3, "p", 2, 9, 9, 9, 10))
    cap = caps(("p", 0, 10, 8, 0))
    w = queue_waits(a, capacity=cap).set_index("job_id")
    assert w.loc[2, "wait_s"] == 5 * H and w.loc[2, "wait_while_pool_full_s"] == 5 * H
    assert w.loc[2, "wait_while_pool_idle_s"] == 0 and w.loc[2, "completed"]
    # the same wait while 6 devices sat free is (partly) a scheduling loss
    cap2 = caps(("p", 0, 10, 14, 0))
    w2 = queue_waits(a, capacity=cap2).set_index("job_id")
    assert w2.loc[2, "wait_while_pool_idle_s"] == 5 * H
    per_job = queue_waits(a, by="job")
    assert per_job["wait_s"].tolist() == [0, 5 * H, 0]


def test_queue_wait_split_into_pending_and_partial_hold():
    a = allocs((1, "p", 4, 0, 2, 3, 5), (2, "p", 4, 1, None, None, 4))
    w = queue_waits(a).set_index("job_id")
    assert (w.loc[1, "pending_s"], w.loc[1, "partial_hold_s"], w.loc[1, "wait_s"]) == (2 * H, H, 3 * H)
    assert w.loc[2, "wait_s"] == 3 * H and not w.loc[2, "completed"]


def test_cohorts_job_centric_and_capacity_shares():
    a = allocs((1, "p", 1, 0, 0, 0, 10), (2, "p", 8, 0, 2, 2, 10), (3, "p", 64, 0, 5, 5, 10))
    c = cohort_goodput(a, capacity=caps(("p", 0, 10, 100, 0))).set_index("cohort")
    assert list(c.index) == ["1", "2-8", "9-64"]
    assert c.loc["1", "job_scheduling_goodput"] == 1.0
    assert c.loc["2-8", "job_scheduling_goodput"] == pytest.approx(0.8)
    assert c.loc["9-64", "job_scheduling_goodput"] == pytest.approx(0.5)
    assert c["capacity_share"].sum() == pytest.approx(scheduling_partition(a, caps(("p", 0, 10, 100, 0)))
                                                      .scheduling_goodput)
    assert c.loc["9-64", "mean_wait_s"] == 5 * H
    with pytest.raises(DomainError, match="strictly increasing"):
        cohort_goodput(a, edges=(8, 4))
    big = cohort_goodput(a, edges=(4,)).set_index("cohort")
    assert list(big.index) == ["1-4", ">4"] and big.loc[">4", "jobs"] == 2


def test_stranded_devices_rule():
    assert stranded_devices([8, 3, 3, 2, 0], 8, 4) == 8
    assert stranded_devices([8, 3, 3, 2, 0], 8, 2) == 0
    assert stranded_devices([8, 3, 3, 2, 0], 8, 16) == 8
    assert stranded_devices([1, 1], [1, 2], 2) == 1
    with pytest.raises(DomainError):
        stranded_devices([9], 8, 1)
    with pytest.raises(DomainError):
        stranded_devices([1], 8, 0)


def test_fragmentation_index_from_node_data():
    # two 8-device nodes; on [0, 4) each has 3 free, on [4, 8) node n1 has 8 free.
    # a 4-device gang waits on [0, 6): stranded 6 of 6 free on [0, 4), 0 of 11 on [4, 6).
    nf = pd.DataFrame({"pool": "p", "node": ["n1", "n2", "n1", "n2"], "start": [t(0), t(0), t(4), t(4)],
                       "end": [t(4), t(4), t(8), t(8)], "node_devices": 8, "free_devices": [3, 3, 8, 3]})
    a = allocs((1, "p", 4, 0, 6, 6, 8))
    fi = fragmentation_index(nf, a).set_index("pool")
    assert fi.loc["p", "pending_s"] == 6 * H
    assert fi.loc["p", "free_device_s_while_pending"] == (6 * 4 + 11 * 2) * H
    assert fi.loc["p", "stranded_device_s"] == (6 * 4 + 3 * 2) * H
    assert fi.loc["p", "fragmentation_index"] == pytest.approx(30 / 46)
    # with a 1-device gang nothing is stranded; with no pending gang the index is missing
    fi1 = fragmentation_index(nf, allocs((1, "p", 1, 0, 6, 6, 8))).set_index("pool")
    assert fi1.loc["p", "stranded_device_s"] == 0
    fi0 = fragmentation_index(nf, allocs((1, "p", 1, 0, 0, 0, 8))).set_index("pool")
    assert pd.isna(fi0.loc["p", "fragmentation_index"])


def _block_fleet(sub_ns: bool) -> dict:
    """A few hundred rows over 4 pools: retries, elastic segments, partial gangs, reservations, plus
    never-assigned rows and (with ``sub_ns``) one time off the whole second in the middle."""
    from fleetlib.scheduling.synth import synthetic_fleet

    f = synthetic_fleet(300, seed=7, days=1, partial_share=0.5, reservation_share=0.5, elastic_share=0.3)
    a = f.allocations.copy()
    # rows 10..14 waited and left the queue without a device
    for c in ("first_assigned", "gang_complete"):
        a.loc[10:14, c] = pd.NaT
    if sub_ns:
        a.loc[150, "release"] = a.loc[150, "release"] + pd.Timedelta(nanoseconds=3)
    return {"allocations": a, "capacity": f.capacity, "reservations": f.reservations}


@pytest.mark.parametrize("sub_ns", [False, True])
@pytest.mark.parametrize("force_argsort", [False, True])
def test_blocked_passes_give_the_same_partition_as_one_block(monkeypatch, sub_ns, force_argsort):
    # the sweep writes, sorts and decodes its events in blocks of gp._BLOCK; blocks of 7 events cut
    # runs, pools and the time-unit check at arbitrary places and must change nothing
    fleet = _block_fleet(sub_ns)
    whole = scheduling_partition(**fleet, _force_argsort=force_argsort)
    monkeypatch.setattr(gp, "_BLOCK", 7)
    seen = []
    split = gp._idle_split_blocks

    def spy(blocks, n, unit, sweep=None):
        out = split(blocks, n, unit, sweep)
        seen.append((sweep.key is not None, len(sweep._kept), sweep._spill is not None))
        return out

    monkeypatch.setattr(gp, "_idle_split_blocks", spy)
    cut = scheduling_partition(**fleet, _force_argsort=force_argsort)
    monkeypatch.setattr(gp, "_idle_split_blocks", split)
    # with packed keys the second pass read blocks back from the keys and decoded the rest again;
    # without (argsort, or ns times too wide for the key) it decoded every block again
    ((packed, kept, spilled),) = seen
    assert packed == (not force_argsort and not sub_ns)
    assert spilled and (kept > 0) == packed
    if sub_ns:  # sums in another order: equal to rounding
        pd.testing.assert_frame_equal(cut.table, whole.table, check_exact=False, rtol=1e-12)
    else:  # whole seconds: every partial sum is an exact integer
        pd.testing.assert_frame_equal(cut.table, whole.table, check_exact=True)
    assert cut.flags == whole.flags
    # and the one-block result is what the occupancy path (a second method) gives
    monkeypatch.setattr(gp, "_BLOCK", 1 << 20)
    occ = occupancy(**fleet)
    pd.testing.assert_frame_equal(scheduling_partition(occupancy=occ).table, whole.table, rtol=1e-12)


def test_blocked_sweep_reports_over_allocation_in_its_first_block(monkeypatch):
    # pool a holds 12 devices on 10 from hour 4: flagged once, at hour 4, whichever block sees it
    fleet = dict(allocations=allocs(*[(j, "a", 3, 0, 0, 0, 10) for j in range(2)],
                                    *[(j, "a", 3, 4, 4, 4, 10) for j in range(2, 4)],
                                    (9, "b", 1, 0, 1, 1, 2)),
                 capacity=caps(("a", 0, 10, 10, 0), ("b", 0, 10, 2, 0)))
    whole = scheduling_partition(**fleet)
    monkeypatch.setattr(gp, "_BLOCK", 2)
    cut = scheduling_partition(**fleet)
    pd.testing.assert_frame_equal(cut.table, whole.table, check_exact=True)
    assert cut.table.loc["a", "over_allocated_device_s"] == 2 * 6 * H
    assert cut.flags == whole.flags and len(cut.flags) == 1 and t(4).isoformat() in cut.flags[0]


def _minutes(pool: str, n: int, held: np.ndarray, pending: np.ndarray, in_service: int = 8) -> pd.DataFrame:
    start = pd.date_range(t(0), periods=n, freq="1min")
    return pd.DataFrame({"pool": pool, "start": start, "end": start + pd.Timedelta(minutes=1),
                         "in_service": in_service, "out_of_service": 0, "held_complete": held,
                         "partial_gang": 0, "reserved": 0, "pending_jobs": pending,
                         "pending_devices": pending})


def _spans(found: pd.DataFrame) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    return list(zip(found["start"], found["end"], strict=True))


def test_silent_stretches_need_every_pool_silent_at_once():
    # pool a is silent in minutes [60, 150), pool b in [30, 120): the fleet is silent in [60, 120) only
    n = 180
    held_a = np.where((np.arange(n) >= 60) & (np.arange(n) < 150), 0, 3)
    held_b = np.where((np.arange(n) >= 30) & (np.arange(n) < 120), 0, 5)
    occ = pd.concat([_minutes("a", n, held_a, np.zeros(n, int)),
                     _minutes("b", n, held_b, np.zeros(n, int), in_service=16)], ignore_index=True)
    found = silent_stretches(occ, min_duration="1h")
    assert _spans(found) == [(t(1), t(2))]
    assert found["duration_h"].tolist() == [1.0] and found["pools"].tolist() == [2]
    assert found["in_service_device_s"].iloc[0] == (8 + 16) * 3600.0
    held_s = (held_a.sum() + held_b.sum()) * 60.0
    assert found["scheduling_goodput_without"].iloc[0] == pytest.approx(held_s / ((8 + 16) * 60.0 * (n - 60)))
    # the factor itself still counts the stretch as idle with an empty queue
    part = scheduling_partition(occupancy=occ).totals
    assert part["held_device_s"] / part["capacity_device_s"] < found["scheduling_goodput_without"].iloc[0]
    assert silent_stretches(occ, min_duration="61min").empty


def test_a_queued_job_or_a_missing_pool_breaks_the_silence():
    n = 120
    quiet = np.zeros(n, int)
    pending = np.where(np.arange(n) == 70, 1, 0)  # one queued job in minute 70 splits the stretch
    occ = pd.concat([_minutes("a", n, quiet, pending), _minutes("b", n, quiet, quiet)], ignore_index=True)
    found = silent_stretches(occ, min_duration="10min")
    assert _spans(found) == [(t(0), t(70 / 60)), (t(71 / 60), t(2))]
    # pool b has no rows in the second hour: not known to be silent there
    gap = pd.concat([_minutes("a", n, quiet, quiet), _minutes("b", 60, quiet[:60], quiet[:60])],
                    ignore_index=True)
    assert _spans(silent_stretches(gap, min_duration="10min")) == [(t(0), t(1))]


def test_silent_stretches_refuse_bad_arguments():
    n = 90
    busy = _minutes("a", n, np.ones(n, int), np.zeros(n, int))
    assert silent_stretches(busy).empty
    assert list(silent_stretches(busy).columns) == ["start", "end", "duration_h", "pools",
                                                    "in_service_device_s", "scheduling_goodput_without"]
    for bad in ("0s", "-5min", "soon"):
        with pytest.raises(DomainError, match="min_duration"):
            silent_stretches(busy, min_duration=bad)
    with pytest.raises(DomainError, match="silent from end to end"):
        silent_stretches(_minutes("a", n, np.zeros(n, int), np.zeros(n, int)))


# ---------------------------------------------------------------------------------------------------
# measure(): the rung's measurement room
# ---------------------------------------------------------------------------------------------------


def test_measure_gives_scheduling_goodputs_factor_on_the_bundled_helios_data():
    from pathlib import Path

    from fleetlib.scheduling import measure, read, unobserved_losses

    helios = Path(__file__).resolve().parents[2] / "data" / "scheduler" / "helios_earth_may2020"
    vcs = sorted(helios.glob("vc*.csv.gz"))
    m = measure(vcs, format="helios-sequence")
    records, ledger = read(vcs, "helios-sequence")
    want = scheduling_goodput(occupancy=records.occupancy)
    got = m.factor()
    assert got.value == want.value and round(got.value, 4) == 0.7091
    assert (got.numerator, got.denominator, got.losses) == (want.numerator, want.denominator, want.losses)
    assert m.window.same_as(want.window) and m.scheduling_goodput == want.value
    # the reader's ledger, plus the measurement's two collection gaps (test_scheduling_gaps.py)
    mine = m.ledger.to_dict()
    assert [f["code"] for f in mine["flags"]].count("collection_gap") == 2
    mine["flags"] = [f for f in mine["flags"] if f["code"] != "collection_gap"]
    assert mine == ledger.to_dict() and m.format == "helios-sequence"
    # the same from the records, and from the tables a reader's read() returns
    again = measure(records, ledger=ledger)
    assert again.factor().value == want.value and again.to_dict() == m.to_dict()
    assert measure({"occupancy": records.occupancy}).factor().value == want.value
    # to_dict is the CLI's object
    d = m.to_dict()
    # what the Helios sequences cannot observe is null, with the reason (the partition keeps its 0)
    assert d["unobserved"] == unobserved_losses("helios-sequence", {"occupancy": records.occupancy})
    assert set(d["unobserved"]) == {"partial_gang_hold", "reservation"}
    plain = scheduling_summary(occupancy=records.occupancy, ledger=m.ledger)
    for part in (plain, *plain["pools"].values()):
        assert part["losses"]["partial_gang_hold"] == 0.0 and part["losses"]["reservation"] == 0.0
        part["losses"].update(partial_gang_hold=None, reservation=None)
    assert d == {**plain, "window": m.window.to_dict(), "collection_gaps": d["collection_gaps"],
                 "unobserved": d["unobserved"]}
    assert m.factor("vc3sl").value == scheduling_goodput(occupancy=records.occupancy, pool="vc3sl").value


def test_measure_refuses_what_it_cannot_measure(tmp_path):
    from fleetlib.scheduling import measure

    unknown = tmp_path / "x.csv"
    unknown.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="format cannot be told from the file's bytes"):
        measure([unknown])  # the format is detected from the bytes, as read() does
    with pytest.raises(DomainError, match="denominator"):
        measure(TWO, denominator="wall")
    with pytest.raises(DomainError, match="openb"):
        measure(["x.csv"], format="openb")
    with pytest.raises(DomainError, match="files"):
        measure(TWO, format="slurm")
    m = measure(TWO, window=(t(0), t(10)), denominator="installed")
    assert m.factor().value == scheduling_goodput(**TWO, window=(t(0), t(10)), denominator="installed").value
