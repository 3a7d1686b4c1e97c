"""Time-binned utilisation map: a hand-built rank, and conservation against the step partition.

Each rank's collective time over all bins (``comm_us + overlap_us``) must equal its partition's
exposed communication, peer wait and overlapped communication (within 0.5 %: in fact to the ns).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib.program import (
    TRIAGE_CASES,
    measure,
    synth_step_traces,
    synth_triage_tables,
    traced_step_partition,
    utilisation_map,
    utilisation_table,
)
from fleetlib.quality import DomainError

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
BUNDLED = {
    "dlrm_8rank": [DATA / "dlrm_8rank"],
    "hta_pp_pair": sorted(DATA.glob("hta_pp_pair_rank-*.json.gz")),
    "hta_nccl_allreduce": [DATA / "hta_nccl_allreduce_rank-0.json.gz"],
}
PARTS = ["compute_us", "comm_us", "overlap_us", "idle_us"]


def test_a_hand_built_rank_bin_by_bin():
    # rank 0: compute 0-2 ms, a collective 1.5-2.5 ms, one 3 ms step; rank 1: two short steps
    k = pd.DataFrame({"rank": [0, 0, 1, 0], "start_us": [0.0, 1500.0, 0.0, 100.0],
                      "end_us": [2000.0, 2500.0, 500.0, 200.0],
                      "kind": ["compute", "comm", "compute", "sync"]})
    s = pd.DataFrame({"rank": [0, 1, 1], "step": [1, 1, 2], "start_us": [0.0, 0.0, 3500.0],
                      "end_us": [3000.0, 1000.0, 3600.0]})
    m = utilisation_map(k, s)
    r0 = m[m["rank"] == 0]
    assert r0[PARTS].to_numpy().tolist() == [[1000.0, 0.0, 0.0, 0.0], [500.0, 0.0, 500.0, 0.0],
                                             [0.0, 500.0, 0.0, 500.0]]
    r1 = m[m["rank"] == 1]
    assert r1["window_us"].tolist() == [1000.0, 0.0, 0.0, 100.0]
    assert r1["idle_share"].isna().tolist() == [False, True, True, False]
    table = utilisation_table(m, "idle_share")
    assert list(table.columns) == [0.0, 1.0, 2.0, 3.0] and np.isnan(table.loc[1, 1.0])
    # a 500 us bin halves the first one
    assert utilisation_map(k, s, bin_us=500.0).iloc[0]["compute_us"] == 500.0
    with pytest.raises(DomainError, match="bin_us"):
        utilisation_map(k, s, bin_us=0)


def _conserved(m) -> None:
    _conserved_tables(m.utilisation(), m.partition)


@pytest.mark.parametrize("case", TRIAGE_CASES)
def test_communication_is_conserved_on_the_triage_cases(case):
    t = synth_triage_tables(case)
    _conserved_tables(utilisation_map(t["kernels"], t["steps"]),
                      traced_step_partition(t["kernels"], t["steps"], ops=t["ops"])[2])


def _conserved_tables(binned: pd.DataFrame, partition: pd.DataFrame) -> None:
    np.testing.assert_allclose(binned[PARTS].sum(axis=1), binned["window_us"], atol=1e-6)
    got = binned.groupby("rank")[["comm_us", "overlap_us"]].sum().sum(axis=1)
    want = partition.groupby("rank")[["exposed_comm", "peer_wait", "overlapped_comm_us"]].sum().sum(axis=1)
    assert (got.index == want.index).all()
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=0.005)
    # and the window time is the traced step time
    np.testing.assert_allclose(binned.groupby("rank")["window_us"].sum().to_numpy(),
                               partition.groupby("rank")["step_wall_us"].sum().to_numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_communication_is_conserved_on_bundled_traces(name):
    _conserved(measure(BUNDLED[name], progress=False))


def test_communication_is_conserved_on_synthetic_traces(tmp_path):
    synth_step_traces(tmp_path, ranks=3, steps=2, straggler_rank=2)
    _conserved(measure(tmp_path, cache=False, progress=False))
