"""Tests of fleetlib.program.breakdown: the per-rank per-step partition and the program goodput factor."""

from __future__ import annotations

import doctest
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleetlib.program.breakdown as breakdown_mod
from fleetlib.accounting import Window
from fleetlib.program.breakdown import (
    PARTITION_PARTS,
    program_goodput_factor,
    step_partition,
)
from fleetlib.program.collectives import collective_waits, match_collectives
from fleetlib.program.flops import PEAK_RATES, mfu, mfu_convention
from fleetlib.program.iron_law import split_collective_wait
from fleetlib.quality import DomainError

CASES = {c["id"]: c for c in yaml.safe_load(
    (Path(__file__).resolve().parents[1] / "reference" / "seed_reference_cases.yaml").read_text())}
H100 = PEAK_RATES["H100 SXM"]
WINDOW = Window.nominal("traced steps")


def kernels(rows, **extra) -> pd.DataFrame:
    """Kernel table from (rank, stream, start_us, end_us, kind[, collective]) tuples."""
    out = []
    for r in rows:
        rank, stream, s, e, kind, *rest = r
        out.append({"rank": rank, "step": pd.NA, "stream": stream, "start_us": float(s), "end_us": float(e),
                    "dur_us": float(e - s), "name": f"{kind}_{len(out)}", "kind": kind,
                    "collective": rest[0] if rest else ("allreduce" if kind == "comm" else "none"),
                    "process_group": None, "seq": pd.NA, "bytes": pd.NA, "cuda_graph": False})
    frame = pd.DataFrame(out)
    for k, v in extra.items():
        frame[k] = v
    return frame


def windows(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["rank", "step", "start_us", "end_us"])


def parts(p: pd.DataFrame, i: int = 0) -> dict[str, float]:
    return {k: float(p.loc[i, k]) for k in (*PARTITION_PARTS, "overlapped_comm_us")}


def test_doctests():
    assert doctest.testmod(breakdown_mod).failed == 0


# --------------------------------------------------------------------------------------- categories


def test_each_category_on_a_hand_built_step():
    # One rank, window [0, 100):
    #   compute 10-30 on stream 7, comm 20-40 on stream 9 (10 overlapped, 10 exposed),
    #   memcpy 35-50 (5 under comm, 10 exposed), memcpy 60-65 under compute 55-70,
    #   gap 50-55 (5 us, back-to-back -> dispatch by the gap rule), gap 0-10 (leading -> idle),
    #   gap 70-100 (trailing -> idle).
    k = kernels([(0, 7, 10, 30, "compute"), (0, 9, 20, 40, "comm"), (0, 11, 35, 50, "memcpy"),
                 (0, 7, 55, 70, "compute"), (0, 11, 60, 65, "memset")])
    p = step_partition(k, windows([(0, 1, 0, 100)]))
    assert parts(p) == {"compute": 35.0, "exposed_comm": 10.0, "peer_wait": 0.0, "exposed_memcpy": 10.0,
                        "host_dispatch": 5.0, "idle": 40.0, "overlapped_comm_us": 10.0}
    assert p.loc[0, "step_wall_us"] == 100.0
    assert p.loc[0, "dispatch_rule"] == "gap<=10us (approximation)"
    assert not p.loc[0, "cuda_graph"]


def test_compute_on_several_streams_counts_once():
    k = kernels([(0, 7, 0, 50, "compute"), (0, 8, 10, 60, "compute"), (0, 9, 20, 30, "compute")])
    p = step_partition(k, windows([(0, 1, 0, 60)]))
    assert p.loc[0, "compute"] == 60.0 and p.loc[0, "idle"] == 0.0


def test_fully_overlapped_comm_is_not_exposed():
    k = kernels([(0, 7, 0, 100, "compute"), (0, 9, 10, 90, "comm")])
    p = step_partition(k, windows([(0, 1, 0, 100)]))
    assert p.loc[0, "exposed_comm"] == 0.0 and p.loc[0, "overlapped_comm_us"] == 80.0


def test_gap_threshold_rule_without_launch_times():
    # gaps: 10-13 (3 us) dispatch; 20-40 (20 us > 10) idle; leading 0-5 idle (no previous kernel).
    k = kernels([(0, 7, 5, 10, "compute"), (0, 7, 13, 20, "compute"), (0, 7, 40, 50, "compute")])
    p = step_partition(k, windows([(0, 1, 0, 50)]))
    assert (p.loc[0, "host_dispatch"], p.loc[0, "idle"]) == (3.0, 25.0)
    wide = step_partition(k, windows([(0, 1, 0, 50)]), dispatch_gap_us=20.0)
    assert (wide.loc[0, "host_dispatch"], wide.loc[0, "idle"]) == (23.0, 5.0)
    assert wide.loc[0, "dispatch_rule"] == "gap<=20us (approximation)"


def test_launch_times_split_dispatch_from_idle():
    # k0 runs 0-10; k1 launched at 15 (after the device drained at 10) starts at 20 -> 10 us dispatch;
    # k2 was launched at 5 (queued) but starts at 30 after k1 ends at 25 -> 5 us idle;
    # k3 launched at 31 >= 30? no gap before it (k2 runs 30-40, k3 40-45 back to back);
    # leading gap: none; trailing gap 45-60 idle.
    k = kernels([(0, 7, 0, 10, "compute"), (0, 7, 20, 25, "compute"), (0, 8, 30, 40, "compute"),
                 (0, 7, 40, 45, "compute")], launch_us=[-5.0, 15.0, 5.0, 31.0])
    p = step_partition(k, windows([(0, 1, 0, 60)]))
    assert (p.loc[0, "host_dispatch"], p.loc[0, "idle"], p.loc[0, "compute"]) == (10.0, 20.0, 30.0)
    assert p.loc[0, "dispatch_rule"] == "launch_us"


def test_leading_gap_with_late_launch_is_dispatch():
    k = kernels([(0, 7, 30, 40, "compute")], launch_us=[25.0])
    p = step_partition(k, windows([(0, 1, 0, 40)]))
    assert p.loc[0, "host_dispatch"] == 30.0 and p.loc[0, "idle"] == 0.0


def test_missing_launch_falls_back_and_says_mixed():
    k = kernels([(0, 7, 0, 10, "compute"), (0, 7, 20, 25, "compute"), (0, 7, 28, 30, "compute")],
                launch_us=[-1.0, 15.0, np.nan])
    p = step_partition(k, windows([(0, 1, 0, 30)]))
    assert p.loc[0, "host_dispatch"] == 13.0  # 10 by launch, 3 by the gap rule
    assert p.loc[0, "dispatch_rule"].startswith("mixed")


def test_sync_and_other_kinds_are_not_work_unless_mapped():
    k = kernels([(0, -1, 0, 40, "sync"), (0, 7, 10, 20, "other"), (0, 7, 20, 30, "compute")])
    p = step_partition(k, windows([(0, 1, 0, 40)]))
    assert p.loc[0, "compute"] == 10.0 and p.loc[0, "idle"] == 30.0
    mapped = step_partition(k, windows([(0, 1, 0, 40)]),
                            kind_layers={**breakdown_mod.DEFAULT_KIND_LAYERS, "other": "compute"})
    assert mapped.loc[0, "compute"] == 20.0


def test_kernels_are_clipped_to_windows_and_outside_time_is_ignored():
    k = kernels([(0, 7, -50, -10, "compute"), (0, 7, 80, 130, "compute"), (0, 9, 125, 140, "comm"),
                 (1, 7, 0, 10, "compute"), (5, 7, 0, 10, "compute")])
    s = windows([(0, 1, 0, 100), (0, 2, 100, 150), (1, 1, 0, 20)])
    p = step_partition(k, s)
    assert list(zip(p["rank"], p["step"], strict=True)) == [(0, 1), (0, 2), (1, 1)]
    assert parts(p, 0)["compute"] == 20.0 and parts(p, 0)["idle"] == 80.0
    assert parts(p, 1)["compute"] == 30.0 and parts(p, 1)["overlapped_comm_us"] == 5.0
    assert parts(p, 1)["exposed_comm"] == 10.0 and parts(p, 1)["idle"] == 10.0
    assert parts(p, 2)["compute"] == 10.0  # rank 5 has no window and is not reported


def test_overlapping_windows_each_get_their_own_partition():
    k = kernels([(0, 7, 0, 30, "compute")])
    p = step_partition(k, windows([(0, 1, 0, 20), (0, 2, 10, 40)]))
    assert p["compute"].tolist() == [20.0, 20.0] and p["idle"].tolist() == [0.0, 10.0]


def test_window_without_kernels_is_idle():
    p = step_partition(kernels([(0, 7, 0, 5, "compute")]), windows([(0, 1, 100, 150)]))
    assert parts(p)["idle"] == 50.0 and p.loc[0, "step_wall_us"] == 50.0


def test_cuda_graph_flag():
    k = kernels([(0, 7, 0, 5, "compute"), (0, 7, 50, 60, "compute")], cuda_graph=[False, True])
    p = step_partition(k, windows([(0, 1, 0, 40), (0, 2, 40, 80)]))
    assert p["cuda_graph"].tolist() == [False, True]


def test_absolute_epoch_microseconds_keep_nanosecond_resolution():
    t0 = 1694128201421205.0
    k = kernels([(3, 7, t0 + 1.25, t0 + 3.5, "compute")])
    p = step_partition(k, windows([(3, 10, t0, t0 + 19901.0)]))
    assert p.loc[0, "compute"] == 2.25
    assert p.loc[0, "step_wall_us"] == 19901.0


# --------------------------------------------------------------------------------- peer wait (9.6 Q3)


def collective_case(enter_ms: list[float], finish_ms: float, *, compute_from_ms: float = 0.0):
    """Ranks compute until they enter one AllReduce that all leave at finish_ms; window ends then."""
    rows = []
    for r, enter in enumerate(enter_ms):
        rows.append((r, 7, compute_from_ms * 1e3, enter * 1e3, "compute"))
        rows.append((r, 9, enter * 1e3, finish_ms * 1e3, "comm"))
    k = kernels(rows)
    s = windows([(r, 1, 0.0, finish_ms * 1e3) for r in range(len(enter_ms))])
    waits = collective_waits(match_collectives(k))
    return step_partition(k, s, collective_wait=waits[["kernel_index", "peer_wait_us"]]), waits


def test_selfcheck_9_6_q3_late_arriver_is_peer_wait_and_slow_transfer_is_exposed_comm():
    c = CASES["selfcheck_9_6_trace_cases_A_B"]
    base_enter, base_finish = c["inputs"]["baseline"]["value"]
    others, late, finish_a = c["inputs"]["case_A"]["value"]
    enter_b, finish_b = c["inputs"]["case_B"]["value"]
    ranks = 8
    base, _ = collective_case([base_enter] * ranks, base_finish)
    a, waits_a = collective_case([others] * (ranks - 1) + [late], finish_a)
    b, _ = collective_case([enter_b] * ranks, finish_b)

    # Baseline: a 2 ms transfer, exposed, on every rank.
    assert (base["exposed_comm"] == 2000.0).all() and (base["peer_wait"] == 0.0).all()
    # Case A: the 7 early ranks wait 4 ms for rank 7 (synchronization term), then the same 2 ms transfer.
    early, last = a[a["rank"] < ranks - 1], a[a["rank"] == ranks - 1]
    assert (early["peer_wait"] == 4000.0).all() and (early["exposed_comm"] == 2000.0).all()
    assert last["peer_wait"].item() == 0.0 and last["exposed_comm"].item() == 2000.0
    assert (waits_a["last_arriver"] == ranks - 1).all()
    added_a_ms = (early["peer_wait"] + early["exposed_comm"] - base["exposed_comm"].iloc[0]).iloc[0] / 1e3
    assert added_a_ms == c["expected"]["case_A_added"]["value"]
    # Case B: nobody waits; the collective itself takes 6 ms, all of it exposed communication.
    assert (b["peer_wait"] == 0.0).all()
    assert (b["exposed_comm"] / 1e3 == c["expected"]["case_B_collective_duration"]["value"]).all()
    # Cross-check against the iron-law split of the same collectives (clock-aligned form).
    split_a = split_collective_wait([others * 1e-3] * (ranks - 1) + [late * 1e-3], finish_a * 1e-3,
                                    (base_finish - base_enter) * 1e-3)
    assert split_a.barrier_wait_s * 1e6 == pytest.approx(early["peer_wait"].max())
    assert split_a.term == "synchronization"
    split_b = split_collective_wait([enter_b * 1e-3] * ranks, finish_b * 1e-3,
                                    (base_finish - base_enter) * 1e-3)
    assert split_b.term == "communication"
    assert split_b.added_transfer_s * 1e6 == pytest.approx(b["exposed_comm"].iloc[0] - 2000.0)
    # Both cases lengthen the step by the same 4 ms inside a retained step: same factor (program).
    assert a["step_wall_us"].iloc[0] == b["step_wall_us"].iloc[0]


def test_peer_wait_under_compute_is_overlapped_not_charged():
    k = kernels([(0, 7, 0, 100, "compute"), (0, 9, 10, 60, "comm")])
    w = pd.DataFrame({"kernel_index": [1], "peer_wait_us": [30.0]})
    p = step_partition(k, windows([(0, 1, 0, 100)]), collective_wait=w)
    assert p.loc[0, "peer_wait"] == 0.0 and p.loc[0, "overlapped_comm_us"] == 50.0


def test_a_transfer_on_another_stream_outranks_waiting():
    # comm A waits 0-30 then transfers 30-40; comm B (other group) transfers 20-35 on stream 10.
    k = kernels([(0, 9, 0, 40, "comm"), (0, 10, 20, 35, "comm")])
    w = pd.DataFrame({"kernel_index": [0], "peer_wait_us": [30.0]})
    p = step_partition(k, windows([(0, 1, 0, 40)]), collective_wait=w)
    assert (p.loc[0, "peer_wait"], p.loc[0, "exposed_comm"]) == (20.0, 20.0)


# ------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(("k", "s", "w", "match"), [
    (kernels([(0, 7, 10, 5, "compute")]), windows([(0, 1, 0, 20)]), None, "negative duration"),
    (kernels([(0, 7, 0, 5, "gemm")]), windows([(0, 1, 0, 20)]), None, "not in kind_layers"),
    (kernels([(0, 7, 0, 5, "compute")]), windows([(0, 1, 20, 20)]), None, "not after start"),
    (kernels([(0, 7, 0, 5, "compute")]), windows([(0, 1, 0, 20), (0, 1, 20, 30)]), None, "more than one"),
    (kernels([(0, 7, 0, 5, "compute")]), windows([(0, 1, 0, 20), (0, 2, 5, 10)]), None, "nest"),
    (kernels([(0, 7, 0, 5, "compute")]), windows([]), None, "no windows"),
    (kernels([(0, 7, 0, 5, "compute")]).drop(columns="kind"), windows([(0, 1, 0, 20)]), None, "lacks"),
    (kernels([(0, 9, 0, 5, "comm")]), windows([(0, 1, 0, 20)]),
     pd.DataFrame({"kernel_index": [0], "peer_wait_us": [6.0]}), "outside"),
    (kernels([(0, 9, 0, 5, "comm")]), windows([(0, 1, 0, 20)]),
     pd.DataFrame({"kernel_index": [0], "peer_wait_us": [-1.0]}), "outside"),
    (kernels([(0, 7, 0, 5, "compute")]), windows([(0, 1, 0, 20)]),
     pd.DataFrame({"kernel_index": [0], "peer_wait_us": [1.0]}), "not a communication kernel"),
    (kernels([(0, 9, 0, 5, "comm")]), windows([(0, 1, 0, 20)]),
     pd.DataFrame({"kernel_index": [7], "peer_wait_us": [1.0]}), "not in the kernel table"),
    (kernels([(0, 7, np.nan, 5, "compute")]), windows([(0, 1, 0, 20)]), None, "finite"),
])
def test_bad_inputs_are_refused(k, s, w, match):
    with pytest.raises(DomainError, match=match):
        step_partition(k, s, collective_wait=w)


def test_duplicate_kernel_labels_and_bad_gap_are_refused():
    k = kernels([(0, 7, 0, 5, "compute"), (0, 7, 6, 9, "compute")])
    with pytest.raises(DomainError, match="unique"):
        step_partition(k.set_axis([1, 1]), windows([(0, 1, 0, 20)]))
    with pytest.raises(DomainError, match="dispatch_gap_us"):
        step_partition(k, windows([(0, 1, 0, 20)]), dispatch_gap_us=-1.0)


# ------------------------------------------------------------------------------- property: reference


def reference_partition(rows, waits, launch, w0, w1, gap_us):
    """Independent per-microsecond rasterisation of one window (integer times)."""
    n = w1 - w0
    layer = {c: np.zeros(n, dtype=int) for c in ("C", "T", "W", "M")}
    starts: dict[int, list[float]] = {}
    ends: set[int] = set()
    for i, (_, _, s, e, kind) in enumerate(rows):
        code = {"compute": "C", "comm": "T", "memcpy": "M", "memset": "M"}.get(kind)
        if code is None or e <= s:
            continue
        pieces = [(s, e, code)]
        if code == "T" and waits.get(i, 0):
            pieces = [(s, s + waits[i], "W"), (s + waits[i], e, "T")]
        first = True
        for ps, pe, c in pieces:
            a, b = max(ps, w0), min(pe, w1)
            if b > a:
                layer[c][a - w0:b - w0] += 1
                if first:
                    starts.setdefault(a, []).append(launch[i])
                ends.add(b)
            first = False
    out = dict.fromkeys(PARTITION_PARTS, 0.0)
    out["overlapped_comm_us"] = 0.0
    busy = (layer["C"] + layer["T"] + layer["W"] + layer["M"]) > 0
    for u in range(n):
        if layer["C"][u]:
            out["compute"] += 1
            if layer["T"][u] or layer["W"][u]:
                out["overlapped_comm_us"] += 1
        elif layer["T"][u]:
            out["exposed_comm"] += 1
        elif layer["W"][u]:
            out["peer_wait"] += 1
        elif layer["M"][u]:
            out["exposed_memcpy"] += 1
        else:
            a = u
            while a > 0 and not busy[a - 1]:
                a -= 1
            b = u
            while b < n and not busy[b]:
                b += 1
            dispatch = False
            if b < n:
                known = [x for x in starts.get(b + w0, []) if not np.isnan(x)]
                if known:
                    dispatch = min(known) >= a + w0
                else:
                    dispatch = a > 0 and (a + w0) in ends and (b - a) <= gap_us
            out["host_dispatch" if dispatch else "idle"] += 1
    return out


kernel_row = st.tuples(st.integers(0, 1), st.integers(0, 3), st.integers(-3, 30), st.integers(0, 8),
                       st.sampled_from(["compute", "compute", "comm", "comm", "comm", "memcpy", "memset",
                                        "sync", "other"]))


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(kernel_row, min_size=0, max_size=16),
       wait_frac=st.lists(st.floats(0, 1), min_size=16, max_size=16),
       launch_off=st.lists(st.one_of(st.none(), st.integers(-2, 8)), min_size=16, max_size=16),
       bounds=st.tuples(st.integers(0, 5), st.integers(3, 18), st.integers(1, 15), st.integers(0, 6)),
       gap_us=st.sampled_from([0.0, 2.0, 5.0]), with_launch=st.booleans())
def test_partition_matches_an_independent_rasterisation(rows, wait_frac, launch_off, bounds, gap_us,
                                                        with_launch):
    table = [(r, s, t0, t0 + d, kind) for r, s, t0, d, kind in rows]
    waits = {i: int(wait_frac[i] * (e - s)) for i, (_, _, s, e, kind) in enumerate(table)
             if kind == "comm" and e > s}
    launch = [np.nan if (not with_launch or launch_off[i] is None) else float(s - launch_off[i])
              for i, (_, _, s, _, _) in enumerate(table)]
    first, length, second, overlap = bounds
    # the second window may overlap the first (never nest inside it)
    ov = min(overlap, second, length - 1)
    start2 = first + length - ov
    wins = [(r, 1, first, first + length) for r in (0, 1)] + [(r, 2, start2, start2 + second + ov)
                                                            for r in (0, 1)]
    k = kernels(table) if table else kernels([(0, 0, 0, 0, "compute")]).iloc[:0]
    if with_launch:
        k["launch_us"] = launch if table else []
    w = pd.DataFrame({"kernel_index": list(waits), "peer_wait_us": [float(v) for v in waits.values()]})
    p = step_partition(k, windows(wins), collective_wait=w, dispatch_gap_us=gap_us)

    total = p[list(PARTITION_PARTS)].sum(axis=1)
    np.testing.assert_allclose(total, p["step_wall_us"], rtol=0, atol=1e-9)
    assert (p[list(PARTITION_PARTS)] >= 0).all().all()
    for i, (rank, step, a, b) in enumerate(sorted(wins)):
        assert (p.loc[i, "rank"], p.loc[i, "step"]) == (rank, step)
        mine = [row for row in table if row[0] == rank]
        idx = [j for j, row in enumerate(table) if row[0] == rank]
        ref = reference_partition(mine, {n: waits[j] for n, j in enumerate(idx) if j in waits},
                                  [launch[j] for j in idx], a, b, gap_us)
        assert parts(p, i) == ref


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 1e4), st.floats(0, 500),
                          st.sampled_from(["compute", "comm", "memcpy"])), min_size=1, max_size=40),
       st.floats(1.0, 2e4))
def test_parts_sum_to_wall_time_with_float_times(rows, wall):
    k = kernels([(0, s, t, t + d, kind) for s, t, d, kind in rows])
    p = step_partition(k, windows([(0, 1, 0.0, wall)]))
    assert p[list(PARTITION_PARTS)].sum(axis=1).iloc[0] == pytest.approx(p["step_wall_us"].iloc[0],
                                                                       rel=1e-12, abs=1e-9)
    assert p.loc[0, "step_wall_us"] == pytest.approx(wall, abs=5e-4)


def test_vectorised_sweep_handles_many_kernels_quickly():
    rng = np.random.default_rng(3)
    n = 200_000
    start = np.sort(rng.uniform(0, 1e6, n))
    frame = pd.DataFrame({"rank": rng.integers(0, 8, n), "stream": rng.integers(0, 4, n), "start_us": start,
                          "end_us": start + rng.uniform(0, 50, n),
                          "kind": rng.choice(["compute", "comm", "memcpy"], n)})
    s = windows([(r, j, j * 1e5, (j + 1) * 1e5) for r in range(8) for j in range(10)])
    p = step_partition(frame, s)
    assert len(p) == 80
    np.testing.assert_allclose(p[list(PARTITION_PARTS)].sum(axis=1), p["step_wall_us"], atol=1e-6)


# ----------------------------------------------------------------------------------- goodput factor


def hand_partition() -> pd.DataFrame:
    # two ranks x two steps, each 100 ms: 60 compute, 20 exposed comm, 10 peer wait, 5 memcpy,
    # 3 dispatch, 2 idle (microseconds below).
    row = {"compute": 60e3, "exposed_comm": 20e3, "peer_wait": 10e3, "exposed_memcpy": 5e3,
           "host_dispatch": 3e3, "idle": 2e3, "step_wall_us": 100e3, "overlapped_comm_us": 7e3}
    return pd.DataFrame([{"rank": r, "step": s, **row} for r in (0, 1) for s in (1, 2)])


def test_program_goodput_factor_partitions_the_gap():
    p = hand_partition()
    # 2 devices x 989 TFLOP/s x 0.1 s = 197.8 PFLOP of peak work per step; ask for 40 % of it.
    flops = 0.4 * 2 * H100.peak_flops_per_s * 0.1
    f = program_goodput_factor(p, useful_flops_per_step=flops, devices=2, peak=H100, convention="palm",
                               window=WINDOW)
    assert f.value == pytest.approx(0.4) == pytest.approx(mfu(flops, 2, H100.peak_flops_per_s, 0.1))
    assert f.denominator == pytest.approx(0.4)  # 4 rank-steps x 0.1 s, device-seconds
    assert f.numerator == pytest.approx(0.16)
    assert f.losses["exposed_comm"] == pytest.approx(0.08)
    assert f.losses["peer_wait"] == pytest.approx(0.04)
    assert f.losses["compute_below_peak"] == pytest.approx(0.24 - 0.16)
    assert f.losses["unattributed"] == pytest.approx(0.0, abs=1e-12)
    assert "compute" not in f.losses
    assert f.convention == str(mfu_convention("palm", H100))
    assert f.boundary == "program" and f.denominator_unit == "device-s"


def test_program_goodput_factor_shows_over_explained_gap_as_negative_unattributed():
    p = hand_partition()
    flops = 0.7 * 2 * H100.peak_flops_per_s * 0.1  # ideal 70 ms > 60 ms of measured compute
    f = program_goodput_factor(p, useful_flops_per_step=flops, devices=2, peak=H100, convention="6n",
                               window=WINDOW)
    assert f.losses["compute_below_peak"] == 0.0
    assert f.losses["unattributed"] == pytest.approx(-0.04)


def test_program_goodput_factor_refusals():
    p = hand_partition()
    common = {"useful_flops_per_step": 1e14, "peak": H100, "window": WINDOW}
    with pytest.raises(DomainError, match="devices"):
        program_goodput_factor(p, devices=1, convention="palm", **common)
    with pytest.raises(DomainError, match="MBU"):
        program_goodput_factor(p, devices=2, convention="MBU, weights-only floor, H100 SXM HBM 3.35 TB/s",
                               **common)
    with pytest.raises(DomainError, match="does not name the peak"):
        program_goodput_factor(p, devices=2, convention="MFU, 6N, A100 SXM dense BF16 312 TFLOP/s", **common)
    with pytest.raises(DomainError, match="MFU"):  # more FLOPs than the peak allows
        program_goodput_factor(p, devices=2, convention="palm", **{**common, "useful_flops_per_step": 1e18})
    with pytest.raises(DomainError, match="no rows"):
        program_goodput_factor(p.iloc[:0], devices=2, convention="palm", **common)
    label = str(mfu_convention("megatron", H100))
    f = program_goodput_factor(p, devices=2, convention=label, **common)
    assert f.convention == label
