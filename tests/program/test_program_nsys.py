"""The Nsight Systems SQLite reader: tables, ranks, links, steps, windows and the bad-input corpus.

Every file here is built with :func:`fleetlib.program.synth.write_nsys_sqlite` (the documented export
tables), and every expected value is written down from the records the test lays down.
"""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fleetlib.program.breakdown import step_partition
from fleetlib.program.classify import Classifier
from fleetlib.program.readers import READERS
from fleetlib.program.readers.nsys import read, read_nsys
from fleetlib.program.synth import write_nsys_sqlite
from fleetlib.quality import DomainError, InputError

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests/corpus/program/nsys"
US = 1000


def _count_rows(path: Path) -> int:
    con = sqlite3.connect(path)
    tables = (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "NVTX_EVENTS",
    )
    try:
        return sum(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)
    finally:
        con.close()


def test_registered_sample_count_is_the_tables_row_count():
    good = [s for s in READERS["nsys"].samples if not s.bad]
    for s in good:
        path = ROOT / s.paths[0]
        if path.suffix == ".gz":
            plain = path.with_suffix("")
            assert gzip.decompress(path.read_bytes()) == plain.read_bytes()
            path = plain
        assert _count_rows(path) == s.records == 30


def test_good_export_tables():
    t = read_nsys(CORPUS / "good_rank0.sqlite")
    k = t.kernels
    assert len(k) == 10 and (k["rank"] == 0).all()
    assert k["kind"].value_counts().to_dict() == {
        "compute": 4,
        "memcpy": 2,
        "memset": 2,
        "comm": 2,
        "sync": 0,
        "other": 0,
    }
    comm = k.loc[k["kind"] == "comm"]
    # NCCL's own NVTX range decided: metadata first, collective from the range's text
    assert comm["comm_rule"].astype(str).tolist() == ["metadata:nvtx:NCCL"] * 2
    assert comm["collective"].astype(str).tolist() == ["allreduce"] * 2
    assert comm["collective_source"].astype(str).tolist() == ["host_annotation"] * 2
    assert comm["start_us"].tolist() == [1410.0, 2410.0] and comm["dur_us"].tolist() == [290.0, 290.0]
    assert comm["launch_us"].tolist() == [1398.0, 2398.0]
    copies = k.loc[k["kind"] == "memcpy"]
    assert copies["name"].astype(str).unique().tolist() == ["Memcpy DtoH"]
    assert copies["bytes"].tolist() == [1 << 20, 1 << 20]
    assert k.loc[k["kind"] == "memset", "bytes"].tolist() == [4096, 4096]
    assert (k.loc[k["kind"] == "compute", "comm_rule"].astype(str) == "").all()
    # steps from ProfilerStep#N, the second one's text registered through StringIds (textId)
    assert t.steps[["step", "start_us", "end_us"]].to_numpy().tolist() == [
        [5, 1000.0, 1900.0],
        [6, 2000.0, 2900.0],
    ]
    assert t.steps["source"].astype(str).unique().tolist() == ["profiler_step"]
    assert k["step"].tolist() == [5] * 5 + [6] * 5
    # cudaStreamSynchronize_v3020: the version suffix is dropped, the call is a blocking stream sync
    h = t.host_syncs
    assert h["name"].astype(str).tolist() == ["cudaStreamSynchronize"] * 2
    assert h["sync_kind"].astype(str).tolist() == ["stream"] * 2 and h["blocking"].all()
    assert h["dur_us"].tolist() == [40.0, 40.0] and h["step"].tolist() == [5, 6]
    assert t.ops.empty
    md = t.metadata[0]
    assert md["device_properties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert md["base_time_ns"] == t.base_time_ns == 1_700_000_000_000_000_000
    led = t.ledger
    assert (led.read, led.kept, led.repaired, led.rejected) == (30, 30, 0, 0)
    # two cudaGetDevice calls, the 'dataloader' range and the NCCL domain-creation event are unused
    assert led.unused == {"runtime:other_call": 2, "nvtx:other_range": 1, "nvtx:other_event": 1}


def test_gzip_export_reads_the_same():
    a = read_nsys(CORPUS / "good_rank0.sqlite")
    b = read_nsys(CORPUS / "good_rank0.sqlite.gz")
    for name in ("kernels", "steps", "host_syncs"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))
    assert a.ledger.read == b.ledger.read == 30


def test_partition_of_the_good_export():
    t = read_nsys(CORPUS / "good_rank0.sqlite")
    p = step_partition(t.kernels, t.steps)
    # step window 900 µs: fill 10, GEMM 300 + elementwise 40, all-reduce 290 alone, copy 50
    row = p.iloc[0]
    assert row["compute"] == 340.0 and row["exposed_comm"] == 290.0 and row["exposed_memcpy"] == 60.0
    assert row["step_wall_us"] == 900.0
    assert (
        row[["compute", "exposed_comm", "peer_wait", "exposed_memcpy", "host_dispatch", "idle"]].sum()
        == 900.0
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("not_sqlite.sqlite", "not an SQLite database"),
        ("truncated.sqlite", "the SQLite database cannot be read"),
        ("no_activity.sqlite", "none of the CUDA activity tables"),
        ("no_stringids.sqlite", "no StringIds table"),
    ],
)
def test_bad_corpus_is_refused_by_file(name, message):
    path = CORPUS / name
    with pytest.raises(InputError) as info:
        read_nsys(path)
    assert info.value.file == str(path) and message in str(info.value)


def test_negative_duration_is_rejected_by_table_row():
    t = read_nsys(CORPUS / "negative_duration.sqlite")
    (entry,) = t.ledger.entries
    assert (entry.action, entry.row, entry.field) == ("rejected", 2, "CUPTI_ACTIVITY_KIND_KERNEL.end")
    assert entry.reason == "negative duration (-5 µs)"
    assert len(t.kernels) == 9 and t.ledger.balanced() and t.ledger.read == 30


def _kernel(pid, corr, start, end, name="gemm_kernel", stream=7):
    return {
        "start": start * US,
        "end": end * US,
        "name": name,
        "stream": stream,
        "correlation": corr,
        "pid": pid,
    }


def _launch(pid, corr, start, tid=1):
    return {
        "start": start * US,
        "end": (start + 2) * US,
        "name": "cudaLaunchKernel_v7000",
        "correlation": corr,
        "pid": pid,
        "tid": tid,
    }


def test_links_are_keyed_by_process_and_correlation(tmp_path):
    # two processes in one export reuse correlation ids 1 and 2: each kernel takes its own launch
    path = write_nsys_sqlite(
        tmp_path / "two_procs.sqlite",
        kernels=[
            _kernel(10, 1, 100, 200),
            _kernel(10, 2, 200, 250),
            _kernel(20, 1, 100, 180),
            _kernel(20, 2, 300, 400),
        ],
        runtime=[_launch(10, 1, 50), _launch(10, 2, 60), _launch(20, 1, 70), _launch(20, 2, 250)],
        nvtx=[{"start": 0, "end": 500 * US, "text": "ProfilerStep#1", "pid": p, "tid": 1} for p in (10, 20)],
    )
    t = read_nsys(path)
    k = t.kernels.sort_values(["rank", "start_us"])
    assert k["rank"].tolist() == [0, 0, 1, 1]
    assert k["launch_us"].tolist() == [50.0, 60.0, 70.0, 250.0]
    assert "ranks_from_processes" in t.ledger.codes()
    assert t.steps["rank"].tolist() == [0, 1]


def test_ranks_from_file_names_and_duplicates(tmp_path):
    paths = []
    for r in (3, 1):
        paths.append(
            write_nsys_sqlite(
                tmp_path / f"job_rank{r}.sqlite", kernels=[_kernel(5, 1, 10, 20)], runtime=[_launch(5, 1, 5)]
            )
        )
    t = read_nsys(paths)
    assert sorted(t.metadata) == [1, 3] and sorted(t.kernels["rank"].unique().tolist()) == [1, 3]
    twin = write_nsys_sqlite(tmp_path / "copy_rank3.sqlite", kernels=[_kernel(5, 1, 10, 20)])
    with pytest.raises(InputError, match="duplicate ranks"):
        read_nsys([paths[0], twin])
    assert read_nsys([paths[0], twin], ranks={"copy_rank3.sqlite": 7}).ranks == [3, 7]


def test_steps_from_a_marker_and_the_gpu_span_fallback(tmp_path):
    nvtx = [
        {
            "start": (100 + 200 * i) * US,
            "end": (250 + 200 * i) * US,
            "text": f"train step {i + 10}",
            "pid": 5,
            "tid": 1,
        }
        for i in range(2)
    ]
    kernels = [_kernel(5, 1, 120, 200), _kernel(5, 2, 320, 400)]
    path = write_nsys_sqlite(tmp_path / "marker.sqlite", kernels=kernels, nvtx=nvtx)
    t = read_nsys(path, step_marker=r"train step (\d+)")
    assert t.steps["step"].tolist() == [10, 11] and t.steps["source"].astype(str).unique().tolist() == [
        "marker"
    ]
    assert "steps_from_markers" in t.ledger.codes()
    bare = read_nsys(path)  # no marker: one step spanning the GPU activity
    assert bare.steps[["step", "start_us", "end_us"]].to_numpy().tolist() == [[0, 120.0, 400.0]]
    assert (
        bare.steps["source"].astype(str).tolist() == ["gpu_span"]
        and "no_profiler_step" in bare.ledger.codes()
    )
    with pytest.raises(DomainError):
        read_nsys(path, step_marker="(")


def test_short_names_and_cuda_graph_kernels(tmp_path):
    path = write_nsys_sqlite(
        tmp_path / "g.sqlite",
        kernels=[
            {
                **_kernel(5, 1, 10, 20, name="void ampere_sgemm_128x64_nn(float*)"),
                "short": "ampere_sgemm",
                "graph_node": 42,
            }
        ],
    )
    t = read_nsys(path, kernel_names="short")
    assert t.kernels["name"].astype(str).tolist() == ["ampere_sgemm"]
    assert t.kernels["cuda_graph"].tolist() == [True] and "cuda_graph" in t.ledger.codes()


def test_missing_name_ids_are_repaired(tmp_path):
    path = write_nsys_sqlite(tmp_path / "n.sqlite", kernels=[_kernel(5, 1, 10, 20)])
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999, shortName = 998")
    con.commit()
    con.close()
    t = read_nsys(path)
    assert t.kernels["name"].astype(str).tolist() == ["<unnamed>"]
    (entry,) = t.ledger.entries
    assert entry.action == "repaired" and entry.row == 1 and "StringIds" in entry.reason


def test_zero_timestamps_and_text_times_are_rejected(tmp_path):
    path = write_nsys_sqlite(
        tmp_path / "z.sqlite", kernels=[_kernel(5, 1, 10, 20), _kernel(5, 2, 0, 0), _kernel(5, 3, 30, 40)]
    )
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = 3")
    con.commit()
    con.close()
    t = read_nsys(path)
    rows = {(e.row, e.field): e.reason for e in t.ledger.entries}
    assert set(rows) == {(2, "CUPTI_ACTIVITY_KIND_KERNEL.start"), (3, "CUPTI_ACTIVITY_KIND_KERNEL.start")}
    assert "could not time" in rows[(2, "CUPTI_ACTIVITY_KIND_KERNEL.start")]
    assert len(t.kernels) == 1


def test_window_selects_steps_on_the_session_clock(tmp_path):
    base = 1_700_000_000_000_000_000
    nvtx = [
        {
            "start": s * 1_000_000_000,
            "end": (s * 1_000_000_000) + 500 * US,
            "text": f"ProfilerStep#{s}",
            "pid": 5,
            "tid": 1,
        }
        for s in (1, 2)
    ]
    kernels = [_kernel(5, s, s * 1_000_000 + 10, s * 1_000_000 + 20) for s in (1, 2)]
    path = write_nsys_sqlite(tmp_path / "w.sqlite", kernels=kernels, nvtx=nvtx, session_start_ns=base)
    start = pd.Timestamp(base + 1_500_000_000, unit="ns", tz="UTC")
    tables, ledger = read(path, window=(start, start + pd.Timedelta(hours=1)))
    assert tables["steps"]["step"].tolist() == [2] and len(tables["kernels"]) == 1
    assert "outside_window" in ledger.codes() and ledger.read == 4


def test_options_are_checked():
    with pytest.raises(DomainError):
        read_nsys(CORPUS / "good_rank0.sqlite", kernel_names="mangled")
    with pytest.raises(DomainError):
        read_nsys(CORPUS / "good_rank0.sqlite", classifier="nccl")
    with pytest.raises(InputError, match="file not found"):
        read_nsys(CORPUS / "missing.sqlite")


def test_extra_comm_pattern_reaches_the_reader(tmp_path):
    path = write_nsys_sqlite(
        tmp_path / "c.sqlite", kernels=[_kernel(5, 1, 10, 20, name="my_fused_a2a_kernel")]
    )
    assert read_nsys(path).kernels["kind"].astype(str).tolist() == ["compute"]
    k = read_nsys(path, classifier=Classifier(extra_comm_patterns=(r"fused_a2a",))).kernels
    assert k["kind"].astype(str).tolist() == ["comm"] and k["comm_rule"].astype(str).tolist() == [
        "name:fused_a2a"
    ]
    assert np.isnan(k["bytes"].to_numpy(dtype=float, na_value=np.nan)).all()


def test_text_that_is_not_utf8_is_read_with_replacement_and_named(tmp_path):
    path = write_nsys_sqlite(
        tmp_path / "u.sqlite",
        kernels=[_kernel(5, 1, 10, 20, name="gemm_kernel"), _kernel(5, 2, 30, 40, name="relu_kernel")],
    )
    con = sqlite3.connect(path)
    # SQLite stores a blob cast to TEXT as its bytes, unchecked: a damaged name as a real export can hold
    con.execute("UPDATE StringIds SET value = CAST(? AS TEXT) WHERE value = 'relu_kernel'",
                (b"relu_\xff\xfek",))
    con.commit()
    con.close()
    t = read_nsys(path)
    assert t.kernels["name"].astype(str).tolist() == ["gemm_kernel", "relu_\ufffd\ufffdk"]
    (entry,) = t.ledger.entries
    assert (entry.action, entry.row) == ("repaired", 2)
    assert entry.field == "CUPTI_ACTIVITY_KIND_KERNEL.demangledName"
    assert "invalid UTF-8" in entry.reason and "U+FFFD" in entry.reason
    # a text that merely holds U+FFFD, stored as valid UTF-8, is no repair
    path = write_nsys_sqlite(tmp_path / "v.sqlite", kernels=[_kernel(5, 1, 10, 20, name="gemm_\ufffd")])
    assert read_nsys(path).ledger.entries == []


def test_a_null_string_text_is_unnamed_not_the_word_none(tmp_path):
    path = write_nsys_sqlite(tmp_path / "n.sqlite", kernels=[_kernel(5, 1, 10, 20)])
    con = sqlite3.connect(path)
    # the export's schema says NOT NULL; a table rebuilt by hand need not
    ids = con.execute("SELECT id FROM StringIds").fetchall()
    con.execute("DROP TABLE StringIds")
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.executemany("INSERT INTO StringIds VALUES (?, NULL)", ids)
    con.commit()
    con.close()
    t = read_nsys(path)
    assert t.kernels["name"].astype(str).tolist() == ["<unnamed>"]
    (entry,) = t.ledger.entries
    assert entry.action == "repaired" and "NULL" in entry.reason


def test_damaged_nvtx_and_runtime_text_is_named_by_the_column_that_holds_it(tmp_path):
    nvtx = [
        {"start": 0, "end": 100 * US, "text": "ProfilerStep#1", "pid": 5, "tid": 1},
        {"start": 10 * US, "end": 20 * US, "text": "fwd_BAD", "pid": 5, "tid": 1},
        {"start": 30 * US, "end": 40 * US, "text": "bwd_BAD", "pid": 5, "tid": 1, "registered": True},
    ]
    runtime = [{"start": 9 * US, "end": 10 * US, "name": "cudaLaunchKernel_BAD", "correlation": 1,
                "pid": 5, "tid": 1}]
    path = write_nsys_sqlite(tmp_path / "t.sqlite", kernels=[_kernel(5, 1, 10, 20)], nvtx=nvtx,
                             runtime=runtime)
    con = sqlite3.connect(path)
    for table, column in (("NVTX_EVENTS", "text"), ("StringIds", "value")):
        con.execute(f"UPDATE {table} SET {column} = CAST(replace({column}, 'BAD', ?) AS TEXT) "
                    f"WHERE {column} LIKE '%BAD'", (b"\xc3",))
    con.commit()
    con.close()
    t = read_nsys(path)
    repaired = {(e.field, e.row) for e in t.ledger.entries if e.action == "repaired"}
    assert repaired == {("NVTX_EVENTS.text", 2), ("NVTX_EVENTS.textId", 3),
                        ("CUPTI_ACTIVITY_KIND_RUNTIME.nameId", 1)}
    assert all("U+FFFD" in e.reason for e in t.ledger.entries if e.action == "repaired")
