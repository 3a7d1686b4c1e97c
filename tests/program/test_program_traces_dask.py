"""read_traces on Dask: batches merged as they complete, in any completion order; the local cluster."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fleetlib.program.readers import kineto

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
DLRM = sorted((DATA / "dlrm_8rank").glob("*.json.gz"))
PP = [DATA / "hta_pp_pair_rank-0.json.gz", DATA / "hta_pp_pair_rank-1.json.gz"]


def test_dask_batches_joined_as_they_arrive_equal_the_serial_read(monkeypatch):
    distributed = pytest.importorskip("distributed")
    files = [DLRM[3], PP[0], DLRM[6], DLRM[1], PP[1], DLRM[4], DLRM[0]]  # not in rank order; two bases
    ranks = {f.name: r for f, r in zip(files, [3, 8, 6, 1, 9, 4, 0], strict=True)}
    monkeypatch.setattr(kineto, "_BATCH_FILES", 2)
    serial = kineto.read_traces(files, cache=False, progress=False, ranks=ranks)
    added: list[tuple[int, int]] = []
    original_add = kineto._Merger.add

    def spy(self, batch, reads):
        added.append((batch, len(reads)))
        return original_add(self, batch, reads)

    monkeypatch.setattr(kineto._Merger, "add", spy)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
        as cluster,
        distributed.Client(cluster) as client,
    ):
        par = kineto.read_traces(files, cache=False, progress=False, ranks=ranks, client=client)
    # 7 files, at most 2 per batch (and >= 4 batches per thread): 7 one-file batches, each joined once
    assert sorted(added) == [(b, 1) for b in range(7)]
    for table in ("kernels", "steps", "host_syncs", "ops"):
        pd.testing.assert_frame_equal(getattr(serial, table), getattr(par, table))
    assert serial.ledger.to_dict() == par.ledger.to_dict()
    assert [tr.path for tr in par.reads] == files and par.ranks == sorted(ranks.values())


def test_dask_error_in_a_batch_cancels_the_rest(tmp_path):
    distributed = pytest.importorskip("distributed")
    bad = tmp_path / "rank_3.json"
    bad.write_bytes(b'{"traceEvents": [{"ph": "X", ')
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
        as cluster,
        distributed.Client(cluster) as client,
    ):
        with pytest.raises(kineto.InputError, match=r"rank_3\.json"):
            kineto.read_traces([DLRM[0], bad, DLRM[1]], cache=False, progress=False, client=client)
        got = kineto.read_traces([DLRM[0], bad, DLRM[1]], cache=False, progress=False, client=client,
                                 errors="skip")
    serial = kineto.read_traces([DLRM[0], bad, DLRM[1]], cache=False, progress=False, errors="skip")
    assert got.ranks == [0, 1] and got.ledger.to_dict() == serial.ledger.to_dict()
    assert [e.field for e in got.ledger.entries if e.file == str(bad)] == ["file"]
    pd.testing.assert_frame_equal(got.kernels, serial.kernels)


def test_local_cluster_workers_run_no_statistical_profiler_and_keep_glibc_malloc_defaults():
    import os

    distributed = pytest.importorskip("distributed")
    from fleetlib.program.stragglers import local_cluster

    def settings() -> tuple[bool, str | None]:
        import os

        import dask

        profiling = bool(dask.config.get("distributed.worker.profile.enabled"))
        return profiling, os.environ.get("MALLOC_TRIM_THRESHOLD_")

    # what an earlier cluster's nannies left in this process's environment (distributed writes its
    # MALLOC_TRIM_THRESHOLD_ there) reaches neither these workers nor is lost afterwards
    monkey = pytest.MonkeyPatch()
    monkey.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    try:
        with local_cluster(1) as cluster, distributed.Client(cluster) as client:
            assert list(client.run(settings).values()) == [(False, None)]
        assert os.environ.get("MALLOC_TRIM_THRESHOLD_") == "65536"
    finally:
        monkey.undo()


def test_a_batch_task_pickles_what_each_file_reads(tmp_path):
    import pickle

    from fleetlib.quality import InputError

    bad = tmp_path / "rank7.json"
    bad.write_text('{"traceEvents": [')
    files = [DLRM[2], bad, PP[0]]
    packed = kineto._read_batch(files, [{"cache": False}] * 3)
    assert isinstance(packed, bytes)  # one frame for Dask to move, not one per array
    got = pickle.loads(packed)
    with pytest.raises(InputError) as err:
        kineto.read_trace(bad, cache=False)
    assert isinstance(got[1], InputError) and str(got[1]) == str(err.value)
    for g, f in zip([got[0], got[2]], [DLRM[2], PP[0]], strict=True):
        w = kineto.read_trace(f, cache=False)
        for table in ("kernels", "steps", "host_syncs", "ops"):
            pd.testing.assert_frame_equal(getattr(g, table), getattr(w, table), check_exact=True)
        assert g.ledger.to_dict() == w.ledger.to_dict() and g.rank == w.rank
        assert {k: v for k, v in g.metadata.items()} == w.metadata
