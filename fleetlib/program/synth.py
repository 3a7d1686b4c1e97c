"""Synthetic step traces with a known per-step partition and an injected straggler.

:func:`synth_step_traces` writes one Kineto trace per rank (the modern object form:
``distributedInfo``, ``baseTimeNanoseconds``, ``traceEvents``) and returns, computed while the events
are laid down and independently of the reader and the partition, what every rank spent each step
on.  Every step of every rank runs the same program:

0. ``lead_us`` of device idle while the host launches the step's first kernel (host dispatch);
1. a GEMM kernel (``aten::mm`` of shape ``gemm_mnk`` with recorded ``Input Dims``, so the roofline
   can be computed from shapes); its length varies from rank to rank and step to step (uniform
   integer jitter), and the straggler rank's is longer by ``straggler_extra_us``;
2. a *host-dispatch gap*: the next compute kernel (an ``aten::relu``, which has no FLOP rule) is
   launched by the host only when the first one has ended, so the device sits idle for
   ``dispatch_gap_us`` waiting for work;
3. the second compute kernel;
4. a blocking AllReduce (an ``ncclDevKernel_AllReduce_*`` kernel with its collective args: type,
   message size, process group and sequence number).  Each rank enters it when its compute ends
   and all leave together ``transfer_us`` after the last one arrived, so each rank's kernel lasts
   its peer wait plus the transfer;
5. a device-to-host copy of ``memcpy_us``;
6. ``tail_us`` of idle time (the host is busy elsewhere) before the next step starts.

Every launch call sits inside a CPU op (``cpu_op`` events with ``External id``, ``Input Dims`` and
``Input type``) whose id the kernel carries.  All ranks share one clock and one step grid, as on
one host.  Times are whole microseconds, so
the reader loses nothing to rounding and the measured partition should equal the truth exactly.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.quality import DomainError

__all__ = ["SYNTH_PARTS", "SynthTraces", "synth_step_traces"]

#: Parts of the injected truth, as :func:`fleetlib.program.breakdown.step_partition` names them.
SYNTH_PARTS: tuple[str, ...] = ("compute", "exposed_comm", "peer_wait", "exposed_memcpy", "host_dispatch",
                                "idle")

_BASE_NS = 1_700_000_000_000_000_000  # a whole-second unix time in ns; event times are relative to it
_COMPUTE_NAME = "void synth_gemm_kernel<float>(float const*, float const*, float*)"
_COMPUTE2_NAME = "void synth_elementwise_kernel<float>(float*)"
_COMM_NAME = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_COPY_NAME = "Memcpy DtoH (Device -> Pinned)"


class SynthTraces:
    """Files written by :func:`synth_step_traces` and the injected truth.

    Attributes
    ----------
    paths
        One trace file per rank, in rank order.
    partition
        Injected partition: one row per (rank, step) with ``rank, step``, the parts of
        :data:`SYNTH_PARTS` and ``step_wall_us`` (microseconds).
    gemm_us
        Length of each rank's GEMM kernel per step (``rank, step, gemm_us``).
    last_arriver
        Per step, the rank that entered the AllReduce last (``step, rank``).
    straggler_rank
        The rank with the injected extra compute (None when none was injected).
    params
        The arguments the traces were made with.
    """

    def __init__(self, paths: list[Path], partition: pd.DataFrame, gemm_us: pd.DataFrame,
                 last_arriver: pd.DataFrame, straggler_rank: int | None, params: dict[str, Any]) -> None:
        self.paths = paths
        self.partition = partition
        self.gemm_us = gemm_us
        self.last_arriver = last_arriver
        self.straggler_rank = straggler_rank
        self.params = params

    def __repr__(self) -> str:
        return (f"SynthTraces({len(self.paths)} ranks, {self.partition['step'].nunique()} steps, "
                f"straggler_rank={self.straggler_rank})")


def _whole(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DomainError(f"{name} must be a whole number >= {minimum}; got {value!r}")
    return int(value)


def synth_step_traces(out_dir: str | Path, *, ranks: int = 4, steps: int = 3, seed: int = 0,
                      straggler_rank: int | None = 3, straggler_extra_us: int = 4000,
                      compute_us: int = 6000, compute2_us: int = 1500, jitter_us: int = 300,
                      dispatch_gap_us: int = 40, transfer_us: int = 1200, memcpy_us: int = 300,
                      tail_us: int = 500, lead_us: int = 30, first_step: int = 1,
                      gemm_mnk: tuple[int, int, int] = (16384, 8192, 16384), dtype: str = "c10::BFloat16",
                      gz: bool = True) -> SynthTraces:
    """Write synthetic Kineto traces for ``ranks`` ranks and return the injected per-step truth.

    Parameters
    ----------
    out_dir
        Folder to write ``rank-<r>.pt.trace.json[.gz]`` into (created when missing).
    ranks
        Number of ranks (>= 2: a collective needs peers).
    steps
        Profiler steps per rank (>= 1).
    seed
        Seed of the compute jitter.
    straggler_rank
        Rank whose first compute kernel is ``straggler_extra_us`` longer every step; None for none.
    straggler_extra_us
        Extra compute of the straggler, microseconds (>= 0).
    compute_us, compute2_us
        Lengths of the GEMM kernel (before jitter and the straggler's extra) and of the elementwise
        kernel, microseconds (the second at least 50: its launch sits inside it).
    jitter_us
        The first kernel varies uniformly in ``[0, jitter_us]`` per rank and step (whole microseconds).
    dispatch_gap_us
        Device idle before the second kernel, waiting for the host to launch it, microseconds.
    transfer_us
        Time all ranks spend in the AllReduce after the last arrives, microseconds (>= 1).
    memcpy_us
        Device-to-host copy after the collective, microseconds.
    tail_us
        Idle time at the end of each step, microseconds.
    lead_us
        Device idle at the start of each step before the first kernel, while the host launches it
        (>= 15: the launch call runs in it); charged to host dispatch.
    first_step
        Number of the first ``ProfilerStep#``.
    gemm_mnk
        ``(m, k, n)`` of the GEMM ``A[m, k] @ B[k, n]`` recorded on its CPU op.
    dtype
        Element type recorded for the ops' inputs, as a trace writes it.
    gz
        Write gzipped files.

    Returns
    -------
    SynthTraces
        The paths and the injected truth (:attr:`SynthTraces.partition`, the last arriver per step).

    Raises
    ------
    DomainError
        A count or duration that is not a whole number in its domain, or a straggler rank outside
        ``[0, ranks)``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     synth = synth_step_traces(d, ranks=2, steps=1, straggler_rank=1)
    ...     synth.last_arriver["rank"].tolist()
    [1]
    """
    n = _whole("ranks", ranks, 2)
    n_steps = _whole("steps", steps, 1)
    durations = {name: _whole(name, value, 0) for name, value in (
        ("straggler_extra_us", straggler_extra_us), ("compute_us", compute_us), ("compute2_us", compute2_us),
        ("jitter_us", jitter_us), ("dispatch_gap_us", dispatch_gap_us), ("memcpy_us", memcpy_us),
        ("tail_us", tail_us), ("lead_us", lead_us), ("first_step", first_step))}
    xfer = _whole("transfer_us", transfer_us, 1)
    if durations["compute_us"] < 1 or durations["compute2_us"] < 50 or durations["lead_us"] < 15:
        raise DomainError("compute_us must be >= 1, compute2_us >= 50 and lead_us >= 15 (launch calls "
                          "and their CPU ops sit inside them)")
    if len(gemm_mnk) != 3:
        raise DomainError(f"gemm_mnk must be (m, k, n); got {gemm_mnk!r}")
    m, k, n_cols = (_whole("gemm_mnk", v, 1) for v in gemm_mnk)
    if straggler_rank is not None and not (0 <= _whole("straggler_rank", straggler_rank, 0) < n):
        raise DomainError(f"straggler_rank must lie in [0, {n}); got {straggler_rank!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(seed)
    jitter = rng.integers(0, durations["jitter_us"] + 1, size=(n_steps, n))
    first = durations["compute_us"] + jitter
    if straggler_rank is not None:
        first[:, straggler_rank] += durations["straggler_extra_us"]
    gap, second, lead = durations["dispatch_gap_us"], durations["compute2_us"], durations["lead_us"]
    arrive = lead + first + gap + second                # step-relative entry into the collective
    last = arrive.max(axis=1)                           # the last arriver's entry, per step
    comm_end = last + xfer
    copy_end = comm_end + durations["memcpy_us"]
    wall = copy_end + durations["tail_us"]
    starts = np.concatenate([[1000], 1000 + np.cumsum(wall + 50)[:-1]])  # 50 us between steps

    truth = pd.DataFrame({
        "rank": np.tile(np.arange(n), n_steps),
        "step": np.repeat(np.arange(n_steps) + durations["first_step"], n),
        "compute": (first + second).ravel().astype(float),
        "exposed_comm": np.full(n * n_steps, float(xfer)),
        "peer_wait": (last[:, None] - arrive).ravel().astype(float),
        "exposed_memcpy": np.full(n * n_steps, float(durations["memcpy_us"])),
        "host_dispatch": np.full(n * n_steps, float(gap + lead)),
        "idle": np.full(n * n_steps, float(durations["tail_us"])),
        "step_wall_us": np.repeat(wall, n).astype(float),
    }).sort_values(["rank", "step"], ignore_index=True)
    late = arrive.argmax(axis=1)
    last_arriver = pd.DataFrame({"step": np.arange(n_steps) + durations["first_step"], "rank": late})

    mat = {"A": [m, k], "B": [k, n_cols], "C": [m, n_cols]}
    paths = []
    for r in range(n):
        events: list[dict[str, Any]] = []
        corr = 1
        for s in range(n_steps):
            t0 = int(starts[s])
            step_no = s + durations["first_step"]
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step_no}", "pid": 1,
                           "tid": 1, "ts": t0, "dur": int(wall[s]), "args": {"External id": 0}})
            a_start = t0 + lead
            a_end = a_start + int(first[s, r])
            b_start = a_end + gap
            b_end = b_start + second
            # (op, its Input Dims, kernel name, category, start, duration, launch call, launch time, args)
            acts = [
                ("aten::mm", [mat["A"], mat["B"]], _COMPUTE_NAME, "kernel", a_start, int(first[s, r]),
                 "cudaLaunchKernel", t0 + 5, {}),
                # launched by the host only once the device is idle: a dispatch gap
                ("aten::relu", [mat["C"]], _COMPUTE2_NAME, "kernel", b_start, second, "cudaLaunchKernel",
                 a_end, {}),
                ("c10d::allreduce_", [[1 << 20]], _COMM_NAME, "kernel", b_end, t0 + int(comm_end[s]) - b_end,
                 "cudaLaunchKernel", b_end - 30,
                 {"Collective name": "allreduce", "In msg nelems": 1 << 20, "dtype": "Float",
                  "Process Group Name": "0", "Process Group Description": "default_pg", "Seq": s}),
                ("aten::copy_", [mat["C"], mat["C"]], _COPY_NAME, "gpu_memcpy", t0 + int(comm_end[s]),
                 durations["memcpy_us"], "cudaMemcpyAsync", b_end - 20, {"bytes": 4 << 20}),
            ]
            for op, dims, name, cat, ts, dur, call, launch, extra in acts:
                if cat == "gpu_memcpy" and dur == 0:
                    continue
                stream = 13 if name == _COMM_NAME else 7
                ext = 10_000 + corr
                events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": launch - 3,
                               "dur": 10, "args": {"External id": ext, "Input Dims": dims,
                                                   "Input type": [dtype] * len(dims)}})
                events.append({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": 1, "tid": 1,
                               "ts": launch, "dur": 5, "args": {"correlation": corr, "External id": ext}})
                events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts,
                               "dur": dur, "args": {"device": 0, "stream": stream, "correlation": corr,
                                                    "External id": ext, **extra}})
                corr += 1
        doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": r, "world_size": n},
               "deviceProperties": [{"id": 0, "name": "synthetic GPU"}],
               "baseTimeNanoseconds": _BASE_NS, "traceEvents": events}
        path = out / f"rank-{r}.pt.trace.json{'.gz' if gz else ''}"
        data = json.dumps(doc).encode()
        path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
        paths.append(path)
    params = {"ranks": n, "steps": n_steps, "seed": seed, "straggler_rank": straggler_rank,
              "transfer_us": xfer, "gemm_mnk": (m, k, n_cols), "dtype": dtype, **durations}
    gemm = pd.DataFrame({"rank": np.tile(np.arange(n), n_steps),
                         "step": np.repeat(np.arange(n_steps) + durations["first_step"], n),
                         "gemm_us": first.ravel().astype(float)})
    gemm = gemm.sort_values(["rank", "step"], ignore_index=True)
    return SynthTraces(paths, truth, gemm, last_arriver, straggler_rank, params)
