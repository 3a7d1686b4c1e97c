"""The nsys reader does not depend on the order of exported rows (Nsight Systems 2025.6+ no longer
guarantees timestamp order): every table of an export is shuffled into a copy and every output compared.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.program.readers.nsys import read, read_nsys
from fleetlib.program.synth import write_nsys_sqlite

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests/corpus/program/nsys/good_rank0.sqlite"
US = 1000


def _shuffled_copy(src: Path, dst: Path, seed: int) -> Path:
    """Copy ``src`` to ``dst`` with the rows of every table re-inserted in a random order."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    rng = random.Random(seed)
    con = sqlite3.connect(dst)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND name NOT LIKE 'sqlite_%'")]
        for table in tables:
            rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
            before = list(rows)
            for _ in range(5):  # a permutation that actually moves something when it can
                rng.shuffle(rows)
                if len(rows) < 2 or rows != before:
                    break
            con.execute(f'DELETE FROM "{table}"')
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                con.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)
        con.commit()
    finally:
        con.close()
    return dst


def _moe_export(path: Path) -> Path:
    """Two steps, two processes, comm by name, by NCCL range and by launcher, copies, fills, syncs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    kernels, runtime, nvtx, memcpys, memsets = [], [], [], [], []
    corr = 0
    for pid in (11, 12):
        for step in range(2):
            t0 = step * 1000 * US
            nvtx.append({"start": t0, "end": t0 + 900 * US, "text": f"ProfilerStep#{step}", "pid": pid,
                         "tid": pid})
            nvtx.append({"start": t0 + 10 * US, "end": t0 + 400 * US, "text": "dispatch(F)", "pid": pid,
                         "tid": pid})
            nvtx.append({"start": t0 + 500 * US, "end": t0 + 800 * US, "text": "combine(B)", "pid": pid,
                         "tid": pid})
            nvtx.append({"start": t0 + 600 * US, "end": t0 + 700 * US, "text": "ncclGroupEnd", "pid": pid,
                         "tid": pid, "domain": "NCCL"})
            spec = [
                (20, 120, "void acme::moe::xfer<8>(void*)", 7),
                (20, 120, "sm90_gemm_bf16_reduce_tile", 8),  # same start on another stream
                (130, 300, "ampere_bf16_gemm", 8),
                (520, 580, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 13),
                (610, 690, "custom_kernel_in_nccl_range", 13),
                (700, 760, "void acme::moe::xfer<8>(void*)", 7),
            ]
            for a, b, name, stream in spec:
                corr += 1
                launch = t0 + (a - 5) * US
                kernels.append({"start": t0 + a * US, "end": t0 + b * US, "name": name, "stream": stream,
                                "correlation": corr, "pid": pid})
                runtime.append({"start": launch, "end": launch + 2 * US, "name": "cudaLaunchKernel_v7000",
                                "correlation": corr, "pid": pid, "tid": pid})
            corr += 1
            memcpys.append({"start": t0 + 320 * US, "end": t0 + 340 * US, "bytes": 4096, "stream": 9,
                            "correlation": corr, "pid": pid})
            runtime.append({"start": t0 + 315 * US, "end": t0 + 345 * US, "name": "cudaMemcpyAsync_v3020",
                            "correlation": corr, "pid": pid, "tid": pid})
            corr += 1
            memsets.append({"start": t0 + 350 * US, "end": t0 + 355 * US, "bytes": 512, "stream": 9,
                            "correlation": corr, "pid": pid})
            runtime.append({"start": t0 + 346 * US, "end": t0 + 347 * US, "name": "cudaMemsetAsync_v3020",
                            "correlation": corr, "pid": pid, "tid": pid})
            runtime.append({"start": t0 + 850 * US, "end": t0 + 880 * US,
                            "name": "cudaStreamSynchronize_v3020", "correlation": 0, "pid": pid,
                            "tid": pid})
    return write_nsys_sqlite(path, kernels=kernels, runtime=runtime, nvtx=nvtx, memcpys=memcpys,
                             memsets=memsets, gpus=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                             session_start_ns=1_700_000_000_000_000_000)


def _assert_same_traces(a, b, path_a: Path, path_b: Path) -> None:
    for table in ("kernels", "steps", "host_syncs", "ops"):
        pd.testing.assert_frame_equal(getattr(a, table), getattr(b, table), check_exact=True)
    meta_b = {r: {**m, "path": str(m["path"]).replace(str(path_b), str(path_a))}
              for r, m in b.metadata.items()}
    assert a.metadata == meta_b
    assert str(a.ledger.to_dict()) == str(b.ledger.to_dict()).replace(str(path_b), str(path_a))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_bundled_export_reads_the_same_shuffled(tmp_path, seed):
    copy = _shuffled_copy(GOOD, tmp_path / "shuffled" / GOOD.name, seed)
    _assert_same_traces(read_nsys(GOOD), read_nsys(copy), GOOD, copy)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_synthetic_moe_export_reads_the_same_shuffled(tmp_path, seed):
    src = _moe_export(tmp_path / "ordered" / "trace_rank0.sqlite")
    copy = _shuffled_copy(src, tmp_path / "shuffled" / "trace_rank0.sqlite", seed)
    a, b = read_nsys(src), read_nsys(copy)
    assert len(a.kernels) == 32 and len(a.steps) == 4  # 2 processes x 2 steps x (6 kernels, a copy, a fill)
    _assert_same_traces(a, b, src, copy)
    tables_a, ledger_a = read(src, window=None)
    tables_b, ledger_b = read(copy, window=None)
    for name, frame in tables_a.items():
        pd.testing.assert_frame_equal(frame, tables_b[name], check_exact=True)
    assert ledger_a.codes() == ledger_b.codes()


def test_the_shuffle_moves_rows(tmp_path):
    src = _moe_export(tmp_path / "ordered" / "trace_rank0.sqlite")
    copy = _shuffled_copy(src, tmp_path / "shuffled" / "trace_rank0.sqlite", 0)
    q = "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL"
    with sqlite3.connect(src) as ca, sqlite3.connect(copy) as cb:
        ordered = [r[0] for r in ca.execute(q)]
        shuffled = [r[0] for r in cb.execute(q)]
    assert sorted(ordered) == sorted(shuffled) and ordered != shuffled
