"""Regenerate the Nsight Systems SQLite corpus (run from the repository root).

``python tests/corpus/program/nsys/make_corpus.py`` writes the files beside this script with
:func:`fleetlib.program.synth.write_nsys_sqlite`, which creates the tables of the Nsight Systems
SQLite export schema reference.  The good file is one rank of a two-step data-parallel job:
GEMM kernels, an NCCL all-reduce launched inside NCCL's own NVTX range, a copy, a fill, a
``cudaStreamSynchronize`` and two ``ProfilerStep#N`` NVTX ranges.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from fleetlib.program import write_nsys_sqlite

HERE = Path(__file__).resolve().parent
US = 1000
BASE_NS = 1_700_000_000_000_000_000


def good_records() -> dict:
    kernels, runtime, nvtx, copies, fills = [], [], [], [], []
    corr = 1
    for step in range(2):
        t0 = 1_000 + step * 1_000
        nvtx.append(
            {
                "start": t0 * US,
                "end": (t0 + 900) * US,
                "text": f"ProfilerStep#{step + 5}",
                "pid": 41,
                "tid": 41,
                "registered": step == 1,
            }
        )
        for name, stream, a, b in (
            ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", 7, 50, 350),
            ("void at::native::vectorized_elementwise_kernel<4>(int)", 7, 360, 400),
        ):
            runtime.append(
                {
                    "start": (t0 + a - 30) * US,
                    "end": (t0 + a - 25) * US,
                    "name": "cudaLaunchKernel_v7000",
                    "correlation": corr,
                    "pid": 41,
                    "tid": 41,
                }
            )
            kernels.append(
                {
                    "start": (t0 + a) * US,
                    "end": (t0 + b) * US,
                    "name": name,
                    "stream": stream,
                    "correlation": corr,
                    "pid": 41,
                }
            )
            corr += 1
        # NCCL's own NVTX range around the launch of the all-reduce kernel
        nvtx.append(
            {
                "start": (t0 + 395) * US,
                "end": (t0 + 405) * US,
                "text": "ncclAllReduce",
                "pid": 41,
                "tid": 41,
                "domain": "NCCL",
            }
        )
        runtime.append(
            {
                "start": (t0 + 398) * US,
                "end": (t0 + 402) * US,
                "name": "cudaLaunchKernel_v7000",
                "correlation": corr,
                "pid": 41,
                "tid": 41,
            }
        )
        kernels.append(
            {
                "start": (t0 + 410) * US,
                "end": (t0 + 700) * US,
                "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
                "stream": 13,
                "correlation": corr,
                "pid": 41,
            }
        )
        corr += 1
        runtime.append(
            {
                "start": (t0 + 420) * US,
                "end": (t0 + 425) * US,
                "name": "cudaMemcpyAsync_v3020",
                "correlation": corr,
                "pid": 41,
                "tid": 41,
            }
        )
        copies.append(
            {
                "start": (t0 + 700) * US,
                "end": (t0 + 750) * US,
                "bytes": 1 << 20,
                "stream": 7,
                "correlation": corr,
                "pid": 41,
                "copy_kind": 2,
            }
        )
        corr += 1
        runtime.append(
            {
                "start": (t0 + 10) * US,
                "end": (t0 + 12) * US,
                "name": "cudaMemsetAsync_v3020",
                "correlation": corr,
                "pid": 41,
                "tid": 41,
            }
        )
        fills.append(
            {
                "start": (t0 + 20) * US,
                "end": (t0 + 30) * US,
                "bytes": 4096,
                "stream": 7,
                "correlation": corr,
                "pid": 41,
            }
        )
        corr += 1
        runtime.append(
            {
                "start": (t0 + 760) * US,
                "end": (t0 + 800) * US,
                "name": "cudaStreamSynchronize_v3020",
                "correlation": corr,
                "pid": 41,
                "tid": 41,
            }
        )
        corr += 1
        runtime.append(
            {
                "start": (t0 + 850) * US,
                "end": (t0 + 851) * US,
                "name": "cudaGetDevice_v3020",
                "correlation": corr,
                "pid": 41,
                "tid": 41,
            }
        )
        corr += 1
    nvtx.append({"start": 100 * US, "end": 200 * US, "text": "dataloader", "pid": 41, "tid": 41})
    return {
        "kernels": kernels,
        "runtime": runtime,
        "nvtx": nvtx,
        "memcpys": copies,
        "memsets": fills,
        "gpus": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
        "session_start_ns": BASE_NS,
    }


def main() -> None:
    good = write_nsys_sqlite(HERE / "good_rank0.sqlite", **good_records())
    (HERE / "good_rank0.sqlite.gz").write_bytes(gzip.compress(good.read_bytes(), mtime=0))
    (HERE / "not_sqlite.sqlite").write_text('{"traceEvents": []}\n')
    (HERE / "truncated.sqlite").write_bytes(good.read_bytes()[:3000])
    recs = good_records()
    write_nsys_sqlite(
        HERE / "no_activity.sqlite", nvtx=recs["nvtx"], tables=("StringIds", "NVTX_EVENTS", "TARGET_INFO_GPU")
    )
    write_nsys_sqlite(
        HERE / "no_stringids.sqlite", kernels=recs["kernels"], tables=("CUPTI_ACTIVITY_KIND_KERNEL",)
    )
    bad = good_records()
    bad["kernels"][1] = {**bad["kernels"][1], "end": bad["kernels"][1]["start"] - 5 * US}  # rowid 2
    write_nsys_sqlite(HERE / "negative_duration.sqlite", **bad)


if __name__ == "__main__":
    main()
