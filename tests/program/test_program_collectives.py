"""Tests of fleetlib.program.collectives: matching, peer waits, stragglers, heat map, audit, summary."""

from __future__ import annotations

import doctest
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fleetlib.program.collectives as collectives_mod
from fleetlib.program.breakdown import PARTITION_PARTS, step_partition
from fleetlib.program.collectives import (
    collective_audit,
    collective_waits,
    expected_collectives,
    match_collectives,
    program_summary,
    step_heatmap_table,
    straggler_report,
    traced_step_partition,
)
from fleetlib.quality import DomainError


def comm_table(rows, *, compute=()) -> pd.DataFrame:
    """Kernel table from (rank, step, collective, group, seq, start_us, end_us) comm rows."""
    out = []
    for rank, step, coll, group, seq, s, e in rows:
        out.append({"rank": rank, "step": step, "stream": 20, "start_us": float(s), "end_us": float(e),
                    "dur_us": float(e - s), "name": f"nccl_{coll}", "kind": "comm", "collective": coll,
                    "process_group": group, "seq": seq, "bytes": 1024, "cuda_graph": False})
    for rank, step, s, e in compute:
        out.append({"rank": rank, "step": step, "stream": 7, "start_us": float(s), "end_us": float(e),
                    "dur_us": float(e - s), "name": "gemm", "kind": "compute", "collective": "none",
                    "process_group": None, "seq": pd.NA, "bytes": pd.NA, "cuda_graph": False})
    frame = pd.DataFrame(out)
    frame["seq"] = frame["seq"].astype("Int64")
    frame["bytes"] = frame["bytes"].astype("Int64")
    frame["step"] = frame["step"].astype("Int64")
    return frame


def three_ranks() -> pd.DataFrame:
    # Each rank runs alltoall, allreduce, alltoall in group "dp"; rank-local clocks differ on purpose.
    # Durations (us): alltoall#0: 50, 30, 10 -> rank 2 last; allreduce: 5, 25, 15 -> rank 0 last;
    # alltoall#1: 8, 8, 40 -> ranks 0 and 1 tie for last (lowest rank, 0, named).
    rows = []
    offsets = {0: 0.0, 1: 1e6, 2: -5e5}
    durs = {0: (50, 5, 8), 1: (30, 25, 8), 2: (10, 15, 40)}
    for r, off in offsets.items():
        t = off + 100.0
        for (coll, seq), d in zip([("alltoall", 1), ("allreduce", 2), ("alltoall", 3)], durs[r], strict=True):
            rows.append((r, 1, coll, "dp", seq, t, t + d))
            t += 200.0
    return comm_table(rows)


def test_doctests():
    assert doctest.testmod(collectives_mod).failed == 0


# ------------------------------------------------------------------------------------------- matching


@pytest.mark.parametrize("by", ["occurrence", "seq", "auto"])
def test_matching_pairs_the_same_collective_on_every_rank(by):
    k = three_ranks()
    m = match_collectives(k, by=by)
    assert m.attrs["matched_by"] == ("occurrence" if by == "occurrence" else "seq")
    assert len(m) == 9 and m["instance"].nunique() == 3 and (m["ranks"] == 3).all()
    # instance ids follow program order, so instance 1 is the allreduce on every rank
    assert [set(v) for v in m.groupby("instance")["collective"].agg(list)] == [{"alltoall"}, {"allreduce"},
                                                                            {"alltoall"}]
    assert (m.groupby("instance")["occurrence"].first().tolist()) == [0, 0, 1]
    # kernel_index points back to the kernel table
    back = k.loc[m["kernel_index"], ["rank", "start_us"]].to_numpy()
    np.testing.assert_array_equal(back, m[["rank", "start_us"]].to_numpy())


def test_seq_order_wins_over_time_order():
    # rank 1's kernels are listed in seq order 2 then 1 in time (its clock is odd); seq still pairs them.
    rows = [(0, 1, "allreduce", "g", 1, 0, 10), (0, 1, "allreduce", "g", 2, 20, 30),
            (1, 1, "allreduce", "g", 2, 0, 4), (1, 1, "allreduce", "g", 1, 20, 21)]
    m = match_collectives(comm_table(rows), by="seq")
    pairs = m.groupby("instance")["dur_us"].agg(list).tolist()
    assert pairs == [[10.0, 1.0], [10.0, 4.0]]
    by_time = match_collectives(comm_table(rows), by="occurrence")
    assert by_time.groupby("instance")["dur_us"].agg(list).tolist() == [[10.0, 4.0], [10.0, 1.0]]


def test_groups_with_different_ranks_match_separately():
    rows = [(0, 1, "allreduce", "tp0", 1, 0, 5), (1, 1, "allreduce", "tp0", 1, 0, 9),
            (2, 1, "allreduce", "tp1", 1, 0, 2), (3, 1, "allreduce", "tp1", 1, 0, 3)]
    w = collective_waits(match_collectives(comm_table(rows)))
    assert w.groupby("group")["last_arriver"].first().to_dict() == {"tp0": 0, "tp1": 2}
    assert w.set_index("rank")["peer_wait_us"].to_dict() == {0: 0.0, 1: 4.0, 2: 0.0, 3: 1.0}


def test_missing_group_falls_back_to_the_stream():
    k = comm_table([(0, 1, "allreduce", None, None, 0, 5), (1, 1, "allreduce", None, None, 0, 2)])
    m = match_collectives(k)
    assert m.attrs["matched_by"] == "occurrence" and set(m["group"]) == {"stream 20"}
    assert m["process_group"].isna().all()


def test_count_disagreement_is_refused_naming_the_group():
    k = three_ranks()
    k = k.drop(index=k.index[(k["rank"] == 1) & (k["collective"] == "allreduce")])
    with pytest.raises(DomainError, match=r"allreduce collectives in group 'dp'.*\{0: 1, 1: 0, 2: 1\}"):
        match_collectives(k, by="occurrence")
    with pytest.raises(DomainError, match="group 'dp'"):
        match_collectives(k, by="seq")


@pytest.mark.parametrize(("rows", "match"), [
    ([(0, 1, "allreduce", "g", 1, 0, 5), (0, 1, "allreduce", "g", 1, 6, 9),
      (1, 1, "allreduce", "g", 1, 0, 5), (1, 1, "allreduce", "g", 2, 6, 9)], "two communication kernels"),
    ([(0, 1, "allreduce", "g", 1, 0, 5), (1, 1, "allgather", "g", 1, 0, 5)],
     "allgather collectives|different"),
    ([(0, 1, "allreduce", "g", 1, 0, 5), (0, 1, "allreduce", "g", 2, 6, 9),
      (1, 1, "allreduce", "g", 1, 0, 5), (1, 1, "allreduce", "g", 3, 6, 9)], "missing on some ranks"),
    ([(0, 1, "gather", "g", 1, 0, 5)], "not among"),
])
def test_seq_matching_refusals(rows, match):
    with pytest.raises(DomainError, match=match):
        match_collectives(comm_table(rows), by="seq")


def test_seq_requested_without_seq_and_other_refusals():
    k = comm_table([(0, 1, "allreduce", "g", None, 0, 5)])
    with pytest.raises(DomainError, match="by='seq' needs"):
        match_collectives(k, by="seq")
    with pytest.raises(DomainError, match="by must be"):
        match_collectives(k, by="time")  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="unique"):
        match_collectives(pd.concat([k, k]))
    bad = comm_table([(0, 1, "allreduce", "g", 1, 5, 0)])
    with pytest.raises(DomainError, match="negative duration"):
        match_collectives(bad)


def test_no_communication_gives_empty_results():
    k = comm_table([], compute=[(0, 1, 0, 5)])
    m = match_collectives(k)
    assert m.empty and list(m.columns)[:3] == ["instance", "group", "process_group"]
    w = collective_waits(m)
    assert w.empty and "peer_wait_us" in w.columns


# ------------------------------------------------------------------------------------------- waits


def test_waits_are_duration_minus_minimum_and_name_the_last_arriver():
    w = collective_waits(match_collectives(three_ranks()))
    table = w.pivot_table(index="instance", columns="rank", values="peer_wait_us")
    np.testing.assert_array_equal(table.to_numpy(), [[40.0, 20.0, 0.0], [0.0, 20.0, 10.0], [0.0, 0.0, 32.0]])
    assert w.groupby("instance")["last_arriver"].first().tolist() == [2, 0, 0]  # tie -> lowest rank
    assert w.groupby("instance")["is_last_arriver"].sum().tolist() == [1, 1, 1]
    assert w.groupby("instance")["instance_wait_us"].first().tolist() == [60.0, 30.0, 32.0]
    assert w["min_dur_us"].tolist()[:3] == [10.0, 10.0, 10.0]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.floats(0, 1e5), min_size=4, max_size=4), min_size=1, max_size=6))
def test_peer_waits_are_nonnegative_and_zero_for_the_last_arriver(durations):
    rows = []
    for i, per_rank in enumerate(durations):
        for r, d in enumerate(per_rank):
            rows.append((r, 1, "allreduce", "g", i + 1, 1e3 * i, 1e3 * i + d))
    w = collective_waits(match_collectives(comm_table(rows)))
    assert (w["peer_wait_us"] >= 0).all()
    assert (w.loc[w["is_last_arriver"], "peer_wait_us"] == 0.0).all()
    assert (w.groupby("instance")["is_last_arriver"].sum() == 1).all()
    expected = w["dur_us"] - w.groupby("instance")["dur_us"].transform("min")
    np.testing.assert_allclose(w["peer_wait_us"], expected, rtol=1e-9, atol=1e-6)
    last = w[w["is_last_arriver"]]
    np.testing.assert_array_equal(last["dur_us"], last["min_dur_us"])


def test_waits_refuse_inconsistent_matches():
    m = match_collectives(three_ranks())
    with pytest.raises(DomainError, match="twice"):
        collective_waits(pd.concat([m, m.iloc[:1]]))
    with pytest.raises(DomainError, match="not every rank"):
        collective_waits(m.iloc[1:])
    with pytest.raises(DomainError, match="negative"):
        collective_waits(m.assign(dur_us=-1.0))


# ------------------------------------------------------------------------------------- stragglers


def straggling_job():
    """Four ranks, four steps, one allreduce per step; rank 2 computes longer and arrives last 3 times."""
    rows, compute, steps = [], [], []
    work = {0: [80, 80, 80, 80], 1: [82, 81, 80, 85], 2: [110, 112, 70, 111], 3: [81, 80, 79, 80]}
    for step in range(4):
        t0 = step * 200.0
        finish = t0 + max(w[step] for w in work.values()) + 20.0
        for r, w in work.items():
            compute.append((r, step, t0, t0 + w[step]))
            rows.append((r, step, "allreduce", "dp", step + 1, t0 + w[step], finish))
            steps.append((r, step, t0, finish))
    k = comm_table(rows, compute=compute)
    s = pd.DataFrame(steps, columns=["rank", "step", "start_us", "end_us"])
    return k, s


def test_straggler_report_names_the_late_rank():
    k, s = straggling_job()
    w = collective_waits(match_collectives(k))
    p = step_partition(k, s, collective_wait=w[["kernel_index", "peer_wait_us"]])
    rep = straggler_report(w, p).set_index("rank")
    # step 2: ranks 0 and 1 both finish work at 80 and tie as last arrivers; the lowest rank is named.
    assert rep["arrived_last"].tolist() == [1, 0, 3, 0]
    assert rep["collectives"].tolist() == [4, 4, 4, 4]
    assert rep.loc[2, "arrived_last_share"] == 0.75
    # waits rank 2 caused: step0 (110-80)+(110-82)+(110-81)=87, step1 (112-80)+(112-81)+(112-80)=95,
    # step3 (111-80)+(111-85)+(111-80)=88
    assert rep.loc[2, "wait_caused_us"] == 87 + 95 + 88
    assert rep.loc[2, "median_wait_caused_us"] == 88
    assert rep.loc[2, "peer_wait_us"] == 10.0  # it waited once, at step 2 (80 - 70)
    # own work = wall - peer wait: every step of rank 0 is 100 us of own work; rank 2's are
    # 130, 132, 90, 131 (median 130.5); rank 1's 102, 101, 100, 105 (median 101.5).
    assert rep["median_own_work_us"].tolist() == [100.0, 101.5, 130.5, 100.0]
    assert rep.loc[2, "relative_score"] == pytest.approx(100.0 / 130.5)
    assert rep.loc[0, "relative_score"] == 1.0
    assert not rep["straggler"].any()  # 0.766 is above the default 0.75
    strict = straggler_report(w, p, threshold=0.8).set_index("rank")
    assert strict["straggler"].tolist() == [False, False, True, False]
    assert "relative_score" not in straggler_report(w).columns


def test_straggler_report_counts_only_multi_rank_instances_and_refuses_bad_threshold():
    k = comm_table([(0, 1, "allreduce", "solo", 1, 0, 5), (0, 1, "allreduce", "dp", 1, 0, 9),
                    (1, 1, "allreduce", "dp", 1, 0, 3)])
    w = collective_waits(match_collectives(k))
    rep = straggler_report(w).set_index("rank")
    assert rep["collectives"].tolist() == [1, 1] and rep["arrived_last"].tolist() == [0, 1]
    assert rep.loc[0, "median_wait_caused_us"] == 0.0 and rep.loc[0, "arrived_last_share"] == 0.0
    with pytest.raises(DomainError, match="threshold"):
        straggler_report(w, threshold=1.5)


# ---------------------------------------------------------------------------------------- heat map


def test_heatmap_table_is_rank_by_step_with_missing_cells_missing():
    p = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 2, 1], "peer_wait": [1.0, 2.0, 3.0],
                      "step_wall_us": [10.0, 10.0, 20.0]})
    t = step_heatmap_table(p)
    assert t.index.tolist() == [0, 1] and t.columns.tolist() == [1, 2]
    assert t.loc[0, 2] == 2.0 and np.isnan(t.loc[1, 2])
    assert step_heatmap_table(p, share=True).loc[1, 1] == 0.15
    with pytest.raises(DomainError, match="value must be"):
        step_heatmap_table(p, value="gpu_util")
    with pytest.raises(DomainError, match="two rows"):
        step_heatmap_table(pd.concat([p, p]))


# ------------------------------------------------------------------------------------------- audit


def layout_job() -> pd.DataFrame:
    rows = []
    for r in (0, 1):
        for step in (1, 2):
            t = step * 1e3
            rows += [(r, step, "alltoall", "dp", None, t, t + 1),
                     (r, step, "alltoall", "dp", None, t + 2, t + 3),
                     (r, step, "allreduce", "dp", None, t + 4, t + 5)]
    # rank 1, step 2 gains an AllGather in group "tp" that the layout does not have
    rows.append((1, 2, "allgather", "tp", None, 2e3 + 10, 2e3 + 11))
    k = comm_table(rows, compute=[(0, 3, 3e3, 3e3 + 5)])
    k.loc[len(k) - 2, "bytes"] = pd.NA
    return k


def test_collective_audit_counts_per_rank_step_type_and_group():
    a = collective_audit(layout_job())
    row = a[(a["rank"] == 0) & (a["step"] == 1) & (a["collective"] == "alltoall")].iloc[0]
    assert (row["group"], row["count"], row["bytes"], row["dur_us"]) == ("dp", 2, 2048, 2.0)
    ag = a[a["collective"] == "allgather"]
    assert len(ag) == 1 and ag["group"].item() == "tp" and pd.isna(ag["bytes"].item())
    assert a["count"].sum() == 13


def test_expected_collectives_diff_flags_missing_extra_and_unexpected():
    d = expected_collectives(layout_job(), {"alltoall": 2, "allreduce": 2})
    cols = ["rank", "step", "collective", "status"]
    status = {(r, s, c): v for r, s, c, v in d[cols].itertuples(index=False)}
    assert status[(0, 1, "alltoall")] == "ok"
    assert status[(0, 1, "allreduce")] == "missing"
    assert status[(1, 2, "allgather")] == "unexpected"
    # rank 0 step 3 has compute only: every expected collective is missing there
    assert status[(0, 3, "alltoall")] == "missing" and status[(0, 3, "allreduce")] == "missing"
    row = d[(d["rank"] == 0) & (d["step"] == 3) & (d["collective"] == "alltoall")].iloc[0]
    assert (row["expected"], row["observed"], row["difference"]) == (2, 0, -2)
    extra = expected_collectives(layout_job(), {"alltoall": 1, "allreduce": 1, "allgather": 0})
    assert extra.set_index(["rank", "step", "collective"]).loc[(1, 2, "allgather"), "status"] == "extra"
    by_group = expected_collectives(layout_job(), {("dp", "alltoall"): 2, ("dp", "allreduce"): 1})
    bg = by_group.set_index(["rank", "step", "group", "collective"])["status"]
    assert bg.loc[(1, 2, "tp", "allgather")] == "unexpected" and bg.loc[(0, 1, "dp", "allreduce")] == "ok"


@pytest.mark.parametrize(("expected", "match"), [
    ({}, "empty"), ({"gather": 1}, "not one of"), ({"allreduce": -1}, "whole number"),
    ({"allreduce": 1.5}, "whole number"), ({"allreduce": 1, ("dp", "alltoall"): 1}, "all be"),
])
def test_expected_collectives_refusals(expected, match):
    with pytest.raises(DomainError, match=match):
        expected_collectives(layout_job(), expected)


def test_expected_collectives_needs_steps():
    k = layout_job().assign(step=pd.array([pd.NA] * 14, dtype="Int64"))
    with pytest.raises(DomainError, match="no kernel carries a step"):
        expected_collectives(k, {"allreduce": 1})


# ------------------------------------------------------------------------------------------ summary


def test_traced_step_partition_is_the_partition_the_summary_reports():
    # the fleet walk reads the partition alone: the same rows and values as program_summary's records,
    # which step_partition gives when handed collective_waits of match_collectives
    k, s = straggling_job()
    matched, waits, part = traced_step_partition(k, s)
    by_hand = step_partition(k, s, collective_wait=collective_waits(match_collectives(k))[
        ["kernel_index", "peer_wait_us"]])
    pd.testing.assert_frame_equal(part, by_hand, check_exact=True)
    records = pd.DataFrame.from_records(program_summary(k, s)["partition"])
    cols = [*PARTITION_PARTS, "step_wall_us"]
    assert (records[cols].to_numpy(float) == part[cols].to_numpy(float)).all()
    assert len(matched) == len(k[k["kind"] == "comm"]) and len(waits) == len(matched)


def test_program_summary_is_json_ready_and_adds_up():
    k, s = straggling_job()
    out = program_summary(k, s)
    text = json.dumps(out)
    assert json.loads(text)["collectives"]["matched_by"] == "seq"
    assert set(out) == {"ranks", "stragglers", "collectives", "flags", "partition"}
    for r, entry in out["ranks"].items():
        assert entry["steps"] == 4
        assert sum(entry["partition_us"].values()) == pytest.approx(entry["step_wall_us"])
        wall = s[s["rank"] == int(r)].eval("end_us - start_us").sum()
        assert entry["step_wall_us"] == pytest.approx(wall)
    first = out["collectives"]["first"][0]
    assert (first["last_arriver"], first["longest_waiter"], first["longest_wait_us"]) == (2, 0, 30.0)
    assert out["collectives"]["instances"] == 4
    assert any("gap rule" in f for f in out["flags"])
    assert set(out["partition"][0]) >= {*PARTITION_PARTS, "step_wall_us", "overlapped_comm_us"}
