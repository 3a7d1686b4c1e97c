"""The trace cache shared by many writers, and the per-process memos of the Kineto reader."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pandas as pd

from fleetlib.program.classify import Classifier
from fleetlib.program.readers import _cache, _tables
from fleetlib.program.readers.kineto import read_trace

DLRM0 = (Path(__file__).resolve().parents[1] / "data" / "traces" / "dlrm_8rank"
         / "worker0_step_12.1694128201545.pt.trace.json.gz")


def test_concurrent_writers_of_one_entry_leave_one_whole_file(tmp_path):
    tr = read_trace(DLRM0, cache=True, cache_dir=tmp_path)
    (entry,) = tmp_path.glob("*.parquet")
    built, ledger = _cache._read_cache(entry, str(DLRM0))
    entry.unlink()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(5):
                _cache._write_cache(entry, built, ledger)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry.name]  # no temporary file left behind
    again = read_trace(DLRM0, cache=True, cache_dir=tmp_path)
    assert again.from_cache
    pd.testing.assert_frame_equal(again.kernels, tr.kernels)


def test_the_kind_memo_gives_what_the_classifier_gives():
    names = np.array(["ncclKernel_AllReduce_RING_LL_Sum_float", "sgemm", "Memcpy HtoD", "sgemm", "x",
                      "ncclDevKernel_SendRecv"], dtype=object)
    cats = np.array(["kernel", "kernel", "gpu_memcpy", "cuda_sync", "other", "kernel"], dtype=object)
    for classifier in (Classifier(), Classifier(extra_comm_patterns=(r"^sgemm$",))):
        expected = classifier.kinds(names, cats).tolist()
        assert _tables._kinds(classifier, names, cats).tolist() == expected
        assert _tables._kinds(classifier, names[::-1], cats[::-1]).tolist() == expected[::-1]  # from the memo
