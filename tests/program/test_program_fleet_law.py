"""Fleet Law terms of the measured step: a regrouping of the step partition that adds up to the wall.

Checked against a hand-built step (every term known by construction), the synthetic generator's
injected kernel lengths, and every bundled trace (the six terms add up to each rank-step's wall).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib.program import (
    FLEET_LAW_TERMS,
    TRIAGE_CASES,
    fleet_law_terms,
    kernel_roof,
    measure,
    pipeline_ranks,
    step_partition,
    synth_step_traces,
    synth_triage_tables,
    traced_step_partition,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
BUNDLED = {
    "dlrm_8rank": [DATA / "dlrm_8rank"],
    "hta_pp_pair": sorted(DATA.glob("hta_pp_pair_rank-*.json.gz")),
    "hta_nccl_allreduce": [DATA / "hta_nccl_allreduce_rank-0.json.gz"],
}


def _step() -> tuple[pd.DataFrame, pd.DataFrame]:
    # one 100 us step: idle 5 | gemm 20 | layernorm 10 | gap 3 (dispatch) | comm 12 | copy 8 | idle 42
    rows = [("sm90_xmma_gemm_bf16", "compute", 5, 25), ("vectorized_layer_norm_kernel", "compute", 25, 35),
            ("ncclDevKernel_AllReduce", "comm", 38, 50), ("Memcpy DtoH", "memcpy", 50, 58)]
    k = pd.DataFrame(rows, columns=["name", "kind", "start_us", "end_us"]).assign(rank=0, stream=7)
    k["collective"] = np.where(k["kind"] == "comm", "sendrecv", "none")
    s = pd.DataFrame({"rank": [0], "step": [1], "start_us": [0.0], "end_us": [100.0]})
    return k, s


def test_roof_of_each_kernel_by_name_and_kind():
    k, _ = _step()
    assert kernel_roof(k).tolist() == ["compute", "memory", "compute", "memory"]


def test_terms_of_a_hand_built_step():
    k, s = _step()
    part = step_partition(k, s)
    assert part.loc[0, "memory_roof_us"] == 10.0 and part.loc[0, "edge_idle_us"] == 47.0
    plain = fleet_law_terms(part).iloc[0]
    assert [plain[t] for t in FLEET_LAW_TERMS] == [20.0, 18.0, 3.0, 12.0, 0.0, 47.0]
    # as a pipeline stage (it sends and receives), the idle at both edges is a bubble: sync
    assert pipeline_ranks(k) == [0]
    stage = fleet_law_terms(part, pipeline=pipeline_ranks(k)).iloc[0]
    assert [stage[t] for t in FLEET_LAW_TERMS] == [20.0, 18.0, 3.0, 12.0, 47.0, 0.0]
    assert stage["sync_bubble_us"] == 47.0 and stage["sync_barrier_us"] == 0.0
    assert stage["step_wall_us"] == 100.0


def test_roof_column_overrides_the_name_rule():
    k, s = _step()
    k["roof"] = ["memory", "memory", "compute", "memory"]     # e.g. a skinny GEMM measured on the slope
    terms = fleet_law_terms(step_partition(k, s)).iloc[0]
    assert terms["local_compute"] == 0.0 and terms["local_memory"] == 38.0


def test_synthetic_terms_equal_the_injected_kernels(tmp_path):
    synth = synth_step_traces(tmp_path, ranks=2, steps=2, straggler_rank=1)
    m = measure(tmp_path, cache=False, progress=False)
    terms = m.fleet_law().set_index(["rank", "step"]).sort_index()
    truth = synth.partition.set_index(["rank", "step"]).sort_index()
    # the elementwise kernel (compute2_us = 1500) and the copy are the bandwidth slope
    np.testing.assert_array_equal(terms["local_memory"], 1500.0 + truth["exposed_memcpy"])
    np.testing.assert_array_equal(terms["local_compute"], truth["compute"] - 1500.0)
    np.testing.assert_array_equal(terms["sync"], truth["peer_wait"])
    np.testing.assert_array_equal(terms["dispatch"], truth["host_dispatch"])
    np.testing.assert_array_equal(terms[list(FLEET_LAW_TERMS)].sum(axis=1), truth["step_wall_us"])


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_terms_add_up_to_every_bundled_step_wall(name):
    m = measure(BUNDLED[name], progress=False)
    terms = m.fleet_law()
    gap = (terms[list(FLEET_LAW_TERMS)].sum(axis=1) - m.partition["step_wall_us"]).abs()
    assert (gap <= 1.0).all() and len(terms) == len(m.partition)
    assert (terms[list(FLEET_LAW_TERMS)] >= 0).all().all()
    # the JSON carries the per-rank sums
    ranks = json.loads(json.dumps(m.to_dict()))["ranks"]
    for row in ranks.values():
        law = row["fleet_law_us"]
        assert abs(sum(law[t] for t in FLEET_LAW_TERMS) - row["step_wall_us"]) <= row["steps"]


@pytest.mark.parametrize("case", TRIAGE_CASES)
def test_terms_add_up_on_the_triage_cases(case):
    t = synth_triage_tables(case)
    matched, _waits, part = traced_step_partition(t["kernels"], t["steps"], ops=t["ops"])
    terms = fleet_law_terms(part, pipeline=pipeline_ranks(matched))
    np.testing.assert_array_equal(terms[list(FLEET_LAW_TERMS)].sum(axis=1), part["step_wall_us"])


def test_shape_derived_intensity_decides_the_roof():
    # a GEMM-named kernel of an aten::mm of shapes [16, 8192] x [8192, 16]: about 8 FLOP per byte,
    # far below the ridge, so its time is on the bandwidth slope; a wide one stays on the compute roof
    t = synth_triage_tables("low_flops_high_bandwidth")
    k, ops = t["kernels"], t["ops"]
    roof = kernel_roof(k, ops)
    assert set(roof[k["name"].str.contains("gemm").to_numpy(dtype=bool)]) == {"memory"}
    assert set(kernel_roof(k)[k["name"].str.contains("gemm").to_numpy(dtype=bool)]) == {"compute"}  # by name
    wide = ops.assign(input_dims="[[8192, 8192], [8192, 8192]]")
    assert set(kernel_roof(k, wide)[k["name"].str.contains("gemm").to_numpy(dtype=bool)]) == {"compute"}
    terms = fleet_law_terms(traced_step_partition(k, t["steps"], ops=ops)[2])
    assert (terms["local_compute"] == 0.0).all() and (terms["local_memory"] == 8_000.0).all()


def test_the_roof_follows_the_device_ridge():
    # the narrow GEMM above: 2·16·8192·16 FLOP over (16·8192 + 8192·16 + 16·16)·2 bytes ≈ 8.0 FLOP/byte,
    # on the compute roof of a device whose ridge is 4 FLOP/byte, on the bandwidth slope at the default
    t = synth_triage_tables("low_flops_high_bandwidth")
    k, ops = t["kernels"], t["ops"]
    gemm = k["name"].str.contains("gemm").to_numpy(dtype=bool)
    assert set(kernel_roof(k, ops, ridge_flop_per_byte=4.0)[gemm]) == {"compute"}
    assert set(kernel_roof(k, ops, ridge_flop_per_byte=9.0)[gemm]) == {"memory"}
    low = fleet_law_terms(traced_step_partition(k, t["steps"], ops=ops, ridge_flop_per_byte=4.0)[2])
    g = k.loc[gemm]
    gemm_us = (g["end_us"] - g["start_us"]).groupby([g["rank"], g["step"]]).sum()
    np.testing.assert_array_equal(low["local_compute"].to_numpy(), gemm_us.to_numpy())  # the GEMMs move
    assert ((low["local_compute"] + low["local_memory"]) == 8_000.0).all()


def test_measure_decides_roofs_by_the_configured_peak():
    from fleetlib.program import PEAK_RATES, device_ridge

    v5e = PEAK_RATES["TPU v5e"]
    ridge, source = device_ridge({"peak": v5e})
    assert ridge == pytest.approx(197e12 / 0.819e12, rel=1e-12) and "TPU v5e dense BF16" in source
    default, why = device_ridge(None)
    assert default == pytest.approx(989 / 3.35, rel=1e-12) and "default" in why


# ---------------------------------------------------------------------------------------------------
# compose_fixes: savings of program fixes alone and together, against hand sums
# ---------------------------------------------------------------------------------------------------

#: 60 ms data, 110 ms compute, 10 ms overhead, a 175 ms reduction beside compute: 65 ms exposed, 245 ms step.
FIX_STEP = {"data": 0.060, "compute": 0.110, "comm": 0.175, "overhead": 0.010}


def test_compose_fixes_hand_sums():
    from fleetlib.program import compose_fixes

    t = compose_fixes(FIX_STEP, {"FP8": {"compute": 0.5}, "compression": {"comm": 0.5}})
    assert list(t["label"]) == ["before", "FP8", "compression", "all fixes"]
    # by hand: step = data + max(compute, comm) + overhead
    before = 0.060 + 0.175 + 0.010
    fp8 = 0.060 + max(0.055, 0.175) + 0.010
    compression = 0.060 + max(0.110, 0.0875) + 0.010
    both = 0.060 + max(0.055, 0.0875) + 0.010
    assert t["step_s"].tolist() == pytest.approx([before, fp8, compression, both], abs=1e-12)
    assert t["saved_s"].iloc[-1] > t["saved_s"].iloc[1] + t["saved_s"].iloc[2]  # reinforcing
    assert t["speedup"].iloc[-1] == pytest.approx(before / both)
    # the six Fleet Law terms add up to the wall, in microseconds
    assert t[list(FLEET_LAW_TERMS)].sum(axis=1).tolist() == pytest.approx(t["step_wall_us"].tolist())
    assert t["exposed_comm"].tolist() == pytest.approx([65e3, 120e3, 0.0, 32.5e3])


def test_compose_fixes_redundant_and_checkpoint_9_2():
    from fleetlib.program import compose_fixes, speedup_from_term_scaling

    t = compose_fixes(FIX_STEP, {"compression": {"comm": 0.5}, "bucketing": {"comm": 0.7}})
    assert t["saved_s"].iloc[-1] == pytest.approx(0.065)
    assert t["saved_s"].iloc[-1] < t["saved_s"].iloc[1] + t["saved_s"].iloc[2]  # both claim the same time
    # With no communication the model is the iron law: the same speedups as speedup_from_term_scaling.
    shares = {"data": 0.6, "compute": 0.3, "overhead": 0.1}
    one = compose_fixes(shares, {"2x compute": {"compute": 0.5}})
    assert list(one["label"]) == ["before", "2x compute"]
    assert one["speedup"].iloc[1] == pytest.approx(speedup_from_term_scaling(shares, {"compute": 0.5}))
    assert one["speedup"].iloc[1] == pytest.approx(1 / 0.85)


@pytest.mark.parametrize(("terms", "fixes", "match"), [
    ({"data": 1.0}, {}, "fixes is empty"),
    ({"memory": 1.0}, {"f": {"data": 0.5}}, "names 'memory'"),
    ({"data": 1.0}, {"f": {"data": -0.5}}, "finite number >= 0"),
    ({"data": 1.0}, {"f": {"data": 0.0}}, "zero time"),
])
def test_compose_fixes_refusals(terms, fixes, match):
    from fleetlib.program import compose_fixes
    from fleetlib.quality import DomainError

    with pytest.raises(DomainError, match=match):
        compose_fixes(terms, fixes)
