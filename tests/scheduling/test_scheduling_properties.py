"""Property tests (hypothesis) of the scheduling partition.

The second method is a brute-force count: every whole second of the window is classified on its
own (in-service, held, partial, reserved, pending per pool) and summed.  The sweep, the occupancy
path and the argsort fallback must all agree with it exactly (times are whole seconds).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.scheduling.goodput import scheduling_partition
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS
from fleetlib.scheduling.synth import synthetic_fleet
from fleetlib.scheduling.views import goodput_timeseries, occupancy, queue_waits

FAST = settings(max_examples=30, deadline=None)
MEDIUM = settings(max_examples=15, deadline=None)
SLOW = settings(max_examples=10, deadline=None)
T0 = pd.Timestamp("2025-05-01", tz="UTC")
T = 60  # window length in seconds
POOLS = ("a", "b", "c")


def ts(sec: np.ndarray | list) -> pd.Series:
    return pd.Series(pd.to_datetime(np.asarray(sec, dtype=np.int64) * 10**9 + T0.value, unit="ns", utc=True))


def alloc_frame(rows: list[tuple]) -> pd.DataFrame:
    """Rows (pool, devices, submit, first_assigned or None, gang_complete or None, release) in seconds."""
    n = len(rows)
    fa = [np.nan if r[3] is None else r[3] for r in rows]
    gc = [np.nan if r[4] is None else r[4] for r in rows]

    def opt(v: list) -> pd.Series:
        arr = np.asarray(v, dtype=float)
        out = ts(np.nan_to_num(arr).astype(np.int64))
        return out.where(~np.isnan(arr), pd.NaT)

    df = pd.DataFrame({
        "job_id": np.arange(n), "attempt": 0, "pool": [r[0] for r in rows], "devices": [r[1] for r in rows],
        "submit": ts([r[2] for r in rows]), "first_assigned": opt(fa), "gang_complete": opt(gc),
        "release": ts([r[5] for r in rows]), "priority": 0, "elastic": False, "end_state": "completed",
        "requested_devices": [r[1] for r in rows],
    })
    return df[list(ALLOCATION_COLUMNS)]


def cap_frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame({"pool": [r[0] for r in rows], "start": ts([r[1] for r in rows]),
                         "end": ts([r[2] for r in rows]), "devices_in_service": [r[3] for r in rows],
                         "devices_out_of_service": [r[4] for r in rows]})


def res_frame(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame({"pool": [r[0] for r in rows], "start": ts([r[1] for r in rows]),
                         "end": ts([r[2] for r in rows]), "devices": [r[3] for r in rows],
                         "for_job_id": np.arange(len(rows))})


@st.composite
def alloc_row(draw):
    pool = draw(st.sampled_from(POOLS))
    dev = draw(st.integers(1, 6))
    times = sorted(draw(st.lists(st.integers(-5, T + 5), min_size=4, max_size=4)))
    if draw(st.booleans()) and draw(st.booleans()):  # never assigned: queue demand only
        return (pool, dev, times[0], None, None, times[3])
    return (pool, dev, *times)


@st.composite
def capacity_rows(draw):
    rows = []
    for p in POOLS:
        cuts = sorted(set(draw(st.lists(st.integers(0, T), min_size=2, max_size=5))))
        for s, e in itertools.pairwise(cuts):
            if draw(st.integers(0, 5)) > 0:
                rows.append((p, s, e, draw(st.integers(0, 12)), draw(st.integers(0, 3))))
    return rows


@st.composite
def fleets(draw):
    allocs = draw(st.lists(alloc_row(), min_size=0, max_size=12))
    caps = draw(capacity_rows())
    if not caps:
        caps = [("a", 0, T, 4, 0)]
    res = draw(st.lists(st.tuples(st.sampled_from(POOLS), st.integers(0, T - 1), st.integers(1, 10),
                                  st.integers(1, 3)).map(lambda r: (r[0], r[1], r[1] + r[2], r[3])),
                        max_size=3))
    return allocs, caps, res


def brute_force(allocs, caps, res, window):
    """Classify every second of the window on its own."""
    w0, w1 = window
    secs = np.arange(w0, w1)
    P = len(POOLS)
    z = {k: np.zeros((P, secs.size), dtype=np.int64)
         for k in ("in", "oos", "held", "partial", "res", "pend")}

    def add(key, pool, s, e, v):
        m = (secs >= s) & (secs < e)
        z[key][POOLS.index(pool)] += np.where(m, v, 0)

    for p, s, e, i, o in caps:
        add("in", p, s, e, i)
        add("oos", p, s, e, o)
    for p, d, sub, fa, gc, rel in allocs:
        if fa is None:
            add("pend", p, sub, rel, 1)
        else:
            add("partial", p, fa, gc, d)
            add("held", p, gc, rel, d)
            add("pend", p, sub, gc, 1)
    for p, s, e, d in res:
        add("res", p, s, e, d)
    free = z["in"] - z["held"] - z["partial"] - z["res"]
    pos = np.maximum(free, 0)
    own = z["pend"] > 0
    anyp = own.any(axis=0)[None, :]
    out = pd.DataFrame({
        "capacity_device_s": z["in"].sum(1), "installed_device_s": (z["in"] + z["oos"]).sum(1),
        "out_of_service_device_s": z["oos"].sum(1), "held_device_s": z["held"].sum(1),
        "partial_gang_hold": z["partial"].sum(1), "reservation": z["res"].sum(1),
        "idle_with_queue": (pos * own).sum(1), "idle_empty_queue": (pos * ~own).sum(1),
        "unattributed": np.minimum(free, 0).sum(1),
        "cross_pool_idle_with_queue": (pos * anyp).sum(1),
        "cross_pool_idle_empty_queue": (pos * ~anyp).sum(1),
        "over_allocated_device_s": -np.minimum(free, 0).sum(1),
    }, index=pd.Index(POOLS, name="pool", dtype=object)).astype(float)
    return out


def compare(table: pd.DataFrame, brute: pd.DataFrame) -> None:
    for p in table.index:
        for c in table.columns:
            assert table.loc[p, c] == brute.loc[p, c], (p, c, table.loc[p, c], brute.loc[p, c])
    # pools absent from the tables have nothing at all
    for p in set(brute.index) - set(table.index):
        assert (brute.loc[p] == 0).all()


@FAST
@given(fleets(), st.tuples(st.integers(-3, T // 2), st.integers(1, T + 5)))
def test_sweep_equals_per_second_count(fleet, wlen):
    allocs, caps, res = fleet
    w0 = wlen[0]
    w1 = w0 + wlen[1]
    window = (T0 + pd.Timedelta(seconds=w0), T0 + pd.Timedelta(seconds=w1))
    a = alloc_frame(allocs) if allocs else None
    part = scheduling_partition(a, cap_frame(caps), reservations=res_frame(res) if res else None,
                                window=window)
    compare(part.table, brute_force(allocs, caps, res, (w0, w1)))


@MEDIUM
@given(fleets())
def test_partition_sums_to_in_service_capacity_and_paths_agree(fleet):
    allocs, caps, res = fleet
    kw = dict(allocations=alloc_frame(allocs) if allocs else None, capacity=cap_frame(caps),
              reservations=res_frame(res) if res else None)
    part = scheduling_partition(**kw)
    tab = part.table
    parts = tab[["held_device_s", "partial_gang_hold", "reservation", "idle_with_queue", "idle_empty_queue",
                 "unattributed"]].sum(axis=1)
    np.testing.assert_array_equal(parts.to_numpy(), tab["capacity_device_s"].to_numpy())
    # unattributed is exactly the device-time held above capacity, negative, never clipped
    np.testing.assert_array_equal(tab["unattributed"].to_numpy(), -tab["over_allocated_device_s"].to_numpy())
    assert bool(part.flags) == bool((tab["over_allocated_device_s"] > 0).any())
    # the two idle views split the same idle device-time
    cross = tab["cross_pool_idle_with_queue"] + tab["cross_pool_idle_empty_queue"]
    own = tab["idle_with_queue"] + tab["idle_empty_queue"]
    np.testing.assert_array_equal(own.to_numpy(), cross.to_numpy())
    assert (tab["cross_pool_idle_with_queue"] >= tab["idle_with_queue"]).all()
    # occupancy path and argsort fallback give the same table
    if kw["allocations"] is not None:
        occ = occupancy(**kw)
        pd.testing.assert_frame_equal(scheduling_partition(occupancy=occ, window=part.window).table.loc[
            tab.index[tab.abs().sum(axis=1) > 0]], tab.loc[tab.index[tab.abs().sum(axis=1) > 0]])
    pd.testing.assert_frame_equal(scheduling_partition(**kw, _force_argsort=True).table, tab)


@SLOW
@given(st.integers(1, 400), st.integers(0, 10**6), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_synthetic_fleets_recover_injected_losses_exactly(n, seed, partial, res, elastic):
    f = synthetic_fleet(n, seed=seed, days=1, partial_share=partial, reservation_share=res,
                        elastic_share=elastic)
    assert len(f.allocations) == n
    part = scheduling_partition(f.allocations, f.capacity, reservations=f.reservations)
    pd.testing.assert_frame_equal(part.table, f.truth, check_exact=True)


@MEDIUM
@given(fleets(), st.integers(1, 8), st.sampled_from(POOLS))
def test_out_of_service_capacity_leaves_s_unchanged_and_lowers_availability_rule_5(fleet, extra, pool):
    allocs, caps, _ = fleet
    a = alloc_frame(allocs) if allocs else None
    if pool not in {c[0] for c in caps}:
        pool = caps[0][0]
    # more devices out of service on every capacity row of one pool, plus a repair-only interval
    caps2 = [(p, s, e, i, o + extra if p == pool else o) for p, s, e, i, o in caps]
    caps2.append((pool, T, T + 10, 0, extra))
    window = (T0 + pd.Timedelta(seconds=min(s for _, s, *_ in caps)), T0 + pd.Timedelta(seconds=T + 10))
    before = scheduling_partition(a, cap_frame(caps), window=window)
    after = scheduling_partition(a, cap_frame(caps2), window=window)
    unchanged = [c for c in before.table.columns
                 if c not in ("installed_device_s", "out_of_service_device_s")]
    pd.testing.assert_frame_equal(before.table[unchanged], after.table[unchanged])
    assert after.totals["out_of_service_device_s"] > before.totals["out_of_service_device_s"]
    if before.totals["capacity_device_s"] > 0:
        assert after.availability < before.availability
        if before.totals["held_device_s"] <= before.totals["capacity_device_s"]:
            assert after.scheduling_goodput == before.scheduling_goodput


@MEDIUM
@given(fleets(), st.integers(1, 4), st.integers(1, T - 1))
def test_elastic_shrink_without_a_new_job_is_scheduling_loss_rule_7(fleet, half, t_shrink):
    allocs, caps, _ = fleet
    width = 2 * half
    caps = [*caps, ("e", 0, T, width, 0)]
    base = alloc_frame([*allocs, ("e", width, 0, 0, 0, T)])
    shrunk = alloc_frame([*allocs, ("e", width, 0, 0, 0, t_shrink),
                          ("e", half, t_shrink, t_shrink, t_shrink, T)])
    shrunk["elastic"] = shrunk["pool"] == "e"
    window = (T0, T0 + pd.Timedelta(seconds=T))
    p0 = scheduling_partition(base, cap_frame(caps), window=window)
    p1 = scheduling_partition(shrunk, cap_frame(caps), window=window)
    released = half * (T - t_shrink)
    assert p0.table.loc["e", "held_device_s"] - p1.table.loc["e", "held_device_s"] == released
    idle = ["idle_with_queue", "idle_empty_queue"]
    assert p1.table.loc["e", idle].sum() - p0.table.loc["e", idle].sum() == released
    assert p0.table.loc["e", "held_device_s"] / p0.table.loc["e", "capacity_device_s"] == 1.0
    assert p1.factor("e").value == pytest.approx(1 - released / (width * T))
    others = [p for p in p0.table.index if p != "e"]
    pd.testing.assert_frame_equal(p0.table.loc[others, ["held_device_s", "partial_gang_hold"]],
                                  p1.table.loc[others, ["held_device_s", "partial_gang_hold"]])


@MEDIUM
@given(fleets(), st.integers(1, T - 1), st.lists(st.integers(1, 4), min_size=1, max_size=3))
def test_queue_wait_while_the_pool_is_fully_held_changes_s_by_zero_rule_9(fleet, submit, sizes):
    allocs, caps, _ = fleet
    full = sum(sizes)
    caps = [*caps, ("f", 0, T + 20, full, 0)]
    held = [("f", s, 0, 0, 0, T) for s in sizes]  # complete gangs hold the whole pool on [0, T)
    waited = alloc_frame([*allocs, *held, ("f", full, submit, T, T, T + 20)])
    prompt = alloc_frame([*allocs, *held, ("f", full, T, T, T, T + 20)])
    window = (T0, T0 + pd.Timedelta(seconds=T + 20))
    p_w = scheduling_partition(waited, cap_frame(caps), window=window)
    p_p = scheduling_partition(prompt, cap_frame(caps), window=window)
    per_pool = [c for c in p_w.table.columns if not c.startswith("cross_pool")]
    pd.testing.assert_frame_equal(p_w.table[per_pool], p_p.table[per_pool])
    assert p_w.table.loc["f", "held_device_s"] == p_w.table.loc["f", "capacity_device_s"]
    # the wait is the job's time to result, spent while the pool was full
    w = queue_waits(waited, capacity=cap_frame(caps)).iloc[-1]
    assert w["wait_s"] == T - submit and w["wait_while_pool_full_s"] == T - submit


@MEDIUM
@given(fleets(), st.sampled_from(["7s", "13s", "1min"]))
def test_time_series_bins_add_up_to_the_partition(fleet, freq):
    allocs, caps, res = fleet
    kw = dict(allocations=alloc_frame(allocs) if allocs else None, capacity=cap_frame(caps),
              reservations=res_frame(res) if res else None)
    part = scheduling_partition(**kw)
    series = goodput_timeseries(**kw, freq=freq)
    sums = series.groupby("pool", observed=True).sum(numeric_only=True)
    for c in ("capacity_device_s", "held_device_s", "partial_gang_hold", "reservation", "idle_with_queue",
              "idle_empty_queue", "unattributed", "cross_pool_idle_with_queue",
              "cross_pool_idle_empty_queue"):
        got = sums[c].reindex(part.table.index, fill_value=0.0)
        np.testing.assert_allclose(got.to_numpy(dtype=float), part.table[c].to_numpy(), atol=1e-6, err_msg=c)


def test_sweep_with_more_masked_rows_than_events():
    # found by hypothesis: five allocations of which only one changes anything inside a one-second
    # window; the key buffer must hold a whole block of rows, masked ones included
    fleet = ([("a", 1, 0, 0, 0, 0)] * 4 + [("a", 1, 0, 0, 0, 1)], [("a", 0, 60, 4, 0)], [])
    allocs, caps, res = fleet
    window = (T0, T0 + pd.Timedelta(seconds=1))
    part = scheduling_partition(alloc_frame(allocs), cap_frame(caps), window=window)
    compare(part.table, brute_force(allocs, caps, res, (0, 1)))
