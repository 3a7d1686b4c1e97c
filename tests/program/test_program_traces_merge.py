"""The client's merge of many rank files: joined while batches arrive, the same tables as one join.

:func:`fleetlib.program.readers.kineto.read_traces` joins each batch of reads as it comes back and
the batch pieces at the end, shifting each rank onto the common time base by rank and skipping a
sort when the rows are already in order.  These tests compare the result with a reference built
independently, the way the reader did before (each file's times shifted on its own frame, one
``pd.concat`` of all files, free categoricals re-derived with ``astype("category")``, then the
reader's ``sort_values``), with batches small enough that the pieces differ in their categories, with
files out of rank order (the sort is needed) and with a file on another time base (the shift is
made).  The sort that is skipped when the rows are in order is checked against ``sort_values``
itself on random frames.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib.program.readers import kineto

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
DLRM = sorted((DATA / "dlrm_8rank").glob("*.json.gz"))
PP = [DATA / "hta_pp_pair_rank-0.json.gz", DATA / "hta_pp_pair_rank-1.json.gz"]

FREE = {"kernels": ("name", "process_group", "comm_rule"), "steps": (), "host_syncs": ("name", "sync_kind"),
        "ops": ("name",)}
SORTS = {"kernels": (["rank", "start_us", "end_us", "stream"], "stable"),
         "steps": (["rank", "start_us"], None),
         "host_syncs": (["rank", "start_us"], "stable"),
         "ops": (["rank", "start_us"], "stable")}
TIMES = {"kernels": ("start_us", "end_us", "launch_us"), "steps": ("start_us", "end_us"),
         "host_syncs": ("start_us", "end_us"), "ops": ("start_us",)}


def reference(reads: list[kineto.TraceRead]) -> dict[str, pd.DataFrame]:
    """The four set tables as one pandas join of the per-file tables, each shifted on its own."""
    base = min(int(tr.metadata["base_time_ns"]) for tr in reads)
    out = {}
    for table in FREE:
        frames = []
        for tr in reads:
            frame = getattr(tr, table).copy()
            shift = (int(tr.metadata["base_time_ns"]) - base) / 1000.0
            if shift:
                for c in TIMES[table]:
                    frame[c] = frame[c] + shift
            frames.append(frame)
        joined = pd.concat([f for f in frames if len(f)], ignore_index=True)
        for c in FREE[table]:
            if not isinstance(joined[c].dtype, pd.CategoricalDtype):
                joined[c] = joined[c].astype("category")
        keys, kind = SORTS[table]
        out[table] = joined.sort_values(keys, ignore_index=True, **({"kind": kind} if kind else {}))
    return out


@pytest.mark.parametrize("batch_files", [1, 3, 32])
def test_merge_equals_one_pandas_join(monkeypatch, batch_files):
    monkeypatch.setattr(kineto, "_BATCH_FILES", batch_files)
    files = [DLRM[5], PP[1], DLRM[0], DLRM[7], PP[0], DLRM[2]]  # out of rank order; PP on its own base
    ranks = {f.name: r for f, r in zip(files, [5, 1, 0, 7, 3, 2], strict=True)}
    got = kineto.read_traces(files, cache=False, progress=False, ranks=ranks)
    assert "time_base_shifted" in got.ledger.codes()
    want = reference(got.reads)
    for table in FREE:
        pd.testing.assert_frame_equal(getattr(got, table), want[table])
    # the DLRM ranks share their kernel names' categories, the PP files do not: a union was made
    assert set(got.kernels["name"].cat.categories) == set().union(
        *(set(tr.kernels["name"].astype(str)) for tr in got.reads))


def test_merge_in_rank_order_skips_no_row():
    got = kineto.read_traces(DLRM, cache=False, progress=False)
    want = reference(got.reads)
    for table in FREE:
        pd.testing.assert_frame_equal(getattr(got, table), want[table])
    assert got.kernels["rank"].is_monotonic_increasing and len(got.kernels) == sum(
        len(tr.kernels) for tr in got.reads)


def test_the_merge_sort_agrees_with_sort_values():
    rng = np.random.default_rng(15)
    for trial in range(300):
        n = int(rng.integers(0, 12))
        frame = pd.DataFrame({"a": rng.integers(0, 3, n), "b": rng.integers(0, 3, n).astype(float),
                              "c": rng.integers(0, 2, n)})
        if trial % 3 == 0:  # many frames already sorted, some with ties on every key
            frame = frame.sort_values(["a", "b", "c"], kind="stable", ignore_index=True)
        if trial % 7 == 0 and n:
            frame.loc[int(rng.integers(0, n)), "b"] = np.nan
        keys = ["a", "b", "c"]
        pd.testing.assert_frame_equal(kineto._sort(frame, keys),
                                      frame.sort_values(keys, kind="stable", ignore_index=True))


def test_the_merge_sort_hand_cases():
    ordered = pd.DataFrame({"rank": [0, 0, 1, 1], "start_us": [1.0, 2.0, 0.5, 0.5], "stream": [7, 3, 1, 2]})
    assert kineto._sort(ordered, ["rank", "start_us", "stream"]) is ordered  # in order: not sorted again
    swapped = ordered.iloc[[0, 1, 3, 2]].reset_index(drop=True)
    assert kineto._sort(swapped, ["rank", "start_us"]) is swapped  # a tie on the keys: a stable sort keeps it
    assert kineto._sort(swapped, ["rank", "start_us", "stream"])["stream"].tolist() == [7, 3, 1, 2]
