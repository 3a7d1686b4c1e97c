"""The reader's speed work changes no number: per-step partitions of every bundled trace, pinned.

For each bundled trace set (the 8-rank DLRM folder, the HTA AllReduce rank, the HTA pipeline-parallel
pair) the per-(rank, step) partition that :func:`fleetlib.program.measure.measure` computes from the
reader's tables is digested exactly (every value's ``repr``) and compared with the digest the
reader produced before the fixed-cost work (main at e451f14, the Kineto reader as its own module).
The four tables the partition rests on (kernels, steps, host syncs, CPU ops) are pinned the same
way.  The digests were computed by running :func:`partition_digest` and :func:`kernel_digest` below
against that commit; they are not typed in from elsewhere.  The serial path without a cache, a
cold-cache read, a warm-cache reload and the Dask path (two in-process workers) must all reproduce
them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "data" / "traces"

#: Bundled trace sets: name -> files (one per rank).
SETS: dict[str, list[Path]] = {
    "dlrm_8rank": sorted((TRACES / "dlrm_8rank").glob("*.json.gz")),
    "allreduce": [TRACES / "hta_nccl_allreduce_rank-0.json.gz"],
    "pp_pair": [TRACES / "hta_pp_pair_rank-0.json.gz", TRACES / "hta_pp_pair_rank-1.json.gz"],
}

TABLES = ("kernels", "steps", "host_syncs", "ops")

#: (rows, sha256 of the partition, sha256 of the four tables) computed at e451f14.
EXPECTED: dict[str, tuple[int, str, str]] = {
    "allreduce": (3, "e28ab7574b698a00456d4cb0678cda9d8626b3d043d1a6b7c90496a8034c414d",
                "acb8d3b6cc265fb37b9abca952fcab32303c3f35143ac87b9225332600cfa775"),
    "dlrm_8rank": (8, "a79feb1be601387e6bde081e2f60d9e0ae73ecbe095183f5f87f829ad8fd7e7f",
                 "fd6cb3c0519c9b4cb1319f5fefe711cbeead3f70e265352d3bf34430528aa86f"),
    "pp_pair": (4, "792556c2941492891e4cbfdd1d49c8f80e85eb8545727d1ac2745fd7885356a0",
              "f9c2b726167af4cb8646903b6452e0f012baf82634a7507a26bb0c0fdb2ee449"),
}


def _frame_digest(frame: pd.DataFrame) -> str:
    """SHA-256 of a table's columns, dtypes and every value's ``repr``, row by row."""
    h = hashlib.sha256()
    h.update(repr(list(frame.columns)).encode())
    h.update(repr([str(d) for d in frame.dtypes]).encode())
    for col in frame.columns:
        values = frame[col].astype(object).where(frame[col].notna(), None).tolist()
        h.update(col.encode())
        h.update(repr(values).encode())
    return h.hexdigest()


#: Partition columns added beside the parts by issue 29 (refinements for the Fleet Law terms), left
#: out of the digests so that every earlier column is still proven unchanged.
ADDED_BY_ISSUE_29 = ("memory_roof_us", "edge_idle_us")


def partition_digest(files: list[Path], **read_options: object) -> tuple[int, str]:
    """Row count and digest of the per-step partition :func:`~fleetlib.program.measure.measure` makes."""
    from fleetlib.program.measure import measure
    from fleetlib.program.readers.kineto import read_traces

    traces = read_traces(files, progress=False, **read_options)
    partition = measure(traces).partition.drop(columns=list(ADDED_BY_ISSUE_29))
    return len(partition), _frame_digest(partition.reset_index(drop=True))


def _tables_digest(traces: object) -> str:
    """One digest of the four merged tables (kernels, steps, host syncs, CPU ops) of a trace set.

    The kernels' ``comm_rule`` and ``classified_by`` columns (added, and changed by the launcher
    rule, after these digests were taken) are left out, so the digests still prove every other
    column unchanged; ``test_program_comm_launcher`` checks them on these traces.
    """
    added = ["comm_rule", "classified_by"]
    frames = [getattr(traces, t).drop(columns=added, errors="ignore") for t in TABLES]
    return hashlib.sha256("".join(_frame_digest(f) for f in frames).encode()).hexdigest()


def kernel_digest(files: list[Path], **read_options: object) -> str:
    """Digest of the merged tables :func:`~fleetlib.program.readers.kineto.read_traces` returns."""
    from fleetlib.program.readers.kineto import read_traces

    return _tables_digest(read_traces(files, progress=False, **read_options))


@pytest.mark.parametrize("name", sorted(SETS))
def test_partitions_of_bundled_traces_are_unchanged(name):
    rows, partition_sha, kernel_sha = EXPECTED[name]
    assert partition_digest(SETS[name], cache=False) == (rows, partition_sha)
    assert kernel_digest(SETS[name], cache=False) == kernel_sha


@pytest.mark.parametrize("name", sorted(SETS))
def test_partitions_from_the_cache_are_unchanged(name, tmp_path):
    rows, partition_sha, kernel_sha = EXPECTED[name]
    assert kernel_digest(SETS[name], cache=True, cache_dir=tmp_path) == kernel_sha  # parse and write
    assert partition_digest(SETS[name], cache=True, cache_dir=tmp_path) == (rows, partition_sha)  # reload
    assert kernel_digest(SETS[name], cache=True, cache_dir=tmp_path) == kernel_sha


def test_partitions_on_dask_are_unchanged(tmp_path):
    distributed = pytest.importorskip("distributed")
    from fleetlib.program.readers.kineto import read_traces

    name = "dlrm_8rank"
    rows, partition_sha, kernel_sha = EXPECTED[name]
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
        as cluster,
        distributed.Client(cluster) as client,
    ):
        traces = read_traces(SETS[name], cache=True, cache_dir=tmp_path, progress=False, client=client)
        assert _tables_digest(traces) == kernel_sha
        from fleetlib.program.measure import measure

        partition = measure(traces).partition.drop(columns=list(ADDED_BY_ISSUE_29))
        assert (len(partition), _frame_digest(partition.reset_index(drop=True))) == (rows, partition_sha)
        # a second pass: every worker reloads the shared cache
        again = read_traces(SETS[name], cache=True, cache_dir=tmp_path, progress=False, client=client)
        assert all(r.from_cache for r in again.reads)
        assert _tables_digest(again) == kernel_sha
