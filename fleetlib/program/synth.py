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

from fleetlib._io import current_limits
from fleetlib.quality import DomainError

__all__ = [
    "MOE_KERNELS",
    "MOE_UNLISTED_KERNELS",
    "NSYS_SCHEMA",
    "SYNTH_PARTS",
    "TRIAGE_CASES",
    "SynthMoETraces",
    "SynthTraces",
    "nsys_global_tid",
    "synth_moe_traces",
    "synth_step_traces",
    "synth_triage_tables",
    "write_nsys_sqlite",
]

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
    limit = current_limits().max_steps
    if n * n_steps > limit:
        raise DomainError(f"ranks x steps = {n:,} x {n_steps:,} rank-steps, more than the {limit:,} allowed "
                          "(limit max_steps; raise it with --limit max_steps=N)")
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


# ---------------------------------------------------------------------------------------------------
# Nsight Systems SQLite exports, written to the documented schema
# ---------------------------------------------------------------------------------------------------

#: The tables :func:`write_nsys_sqlite` creates, with the columns of the Nsight Systems "SQLite Export
#: Schema Reference" (a subset of each table's documented columns; the reader looks columns up by name).
NSYS_SCHEMA: dict[str, str] = {
    "StringIds": "id INTEGER PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "demangledName INTEGER NOT NULL, "
        "shortName INTEGER NOT NULL, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, "
        "blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER, graphNodeId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "bytes INTEGER NOT NULL, "
        "copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER, graphNodeId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "value INTEGER NOT NULL, "
        "bytes INTEGER NOT NULL, graphNodeId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
        "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
        "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, "
        "textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, "
        "uint32Value INTEGER, int32Value INTEGER, "
        "floatValue REAL, jsonTextId INTEGER, jsonText TEXT"
    ),
    "TARGET_INFO_GPU": (
        "id INTEGER NOT NULL, name TEXT NOT NULL, busLocation TEXT, totalMemory INTEGER, smCount INTEGER, "
        "chipName TEXT, memoryBandwidth INTEGER"
    ),
    "TARGET_INFO_CUDA_DEVICE": "gpuId INTEGER NOT NULL, cudaId INTEGER NOT NULL, pid INTEGER, uuid TEXT, "
    "numMultiprocessors INTEGER",
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
    "CUDA_GPU_MEMORY_USAGE_EVENTS": (
        "start INTEGER NOT NULL, globalPid INTEGER, deviceId INTEGER NOT NULL, contextId INTEGER, "
        "address INTEGER NOT NULL, pc INTEGER, bytes INTEGER, memKind INTEGER NOT NULL, "
        "memoryOperationType INTEGER, name TEXT, correlationId INTEGER, streamId INTEGER"
    ),
}

_PID_SHIFT = 0x1000000


def nsys_global_tid(pid: int, tid: int) -> int:
    """``globalTid`` as nsys encodes it: the process id times 0x1000000 plus the thread id."""
    return int(pid) * _PID_SHIFT + int(tid)


def _nsys_rows(kernels: Any, memcpys: Any, memsets: Any, runtime: Any, nvtx: Any, memory: Any,
               sid: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Rows of the activity and NVTX tables in :data:`NSYS_SCHEMA` column order (``sid`` interns text)."""
    gtid = nsys_global_tid
    out: dict[str, list[tuple[Any, ...]]] = {
        "CUPTI_ACTIVITY_KIND_KERNEL": [
            (k["start"], k["end"], k.get("device", 0), 1, k["stream"], k.get("correlation"),
             gtid(k.get("pid", 1), 0), sid(k["name"]), sid(k.get("short", k["name"])), 1, 1, 1, 128, 1, 1,
             32, k.get("graph_node")) for k in kernels],
        "CUPTI_ACTIVITY_KIND_MEMCPY": [
            (c["start"], c["end"], c.get("device", 0), 1, c["stream"], c.get("correlation"),
             gtid(c.get("pid", 1), 0), c["bytes"], c.get("copy_kind", 2), 1, 3, None) for c in memcpys],
        "CUPTI_ACTIVITY_KIND_MEMSET": [
            (m["start"], m["end"], m.get("device", 0), 1, m["stream"], m.get("correlation"),
             gtid(m.get("pid", 1), 0), 0, m["bytes"], None) for m in memsets],
        "CUPTI_ACTIVITY_KIND_RUNTIME": [
            (r["start"], r["end"], 1, gtid(r.get("pid", 1), r.get("tid", 1)), r.get("correlation"),
             sid(r["name"]), 0, None) for r in runtime],
        "NVTX_EVENTS": [],
        "CUDA_GPU_MEMORY_USAGE_EVENTS": [
            (m["start"], m.get("global_pid", gtid(m.get("pid", 1), 0)), m.get("device", 0), 1,
             m.get("address", 0), 0, m["bytes"], m.get("mem_kind", 2), m["op"], None, m.get("correlation"),
             None) for m in memory],
    }
    domains: dict[str, int] = {}
    for e in nvtx:
        dom = e.get("domain")
        tid = gtid(e.get("pid", 1), e.get("tid", 1))
        if dom and dom not in domains:  # a domain-creation event (type 75) names the domain
            domains[dom] = len(domains) + 1
            out["NVTX_EVENTS"].append((0, None, 75, None, None, None, dom, tid, None, None, domains[dom],
                                       *(None,) * 8))
        text, text_id = (None, sid(e["text"])) if e.get("registered") else (e["text"], None)
        out["NVTX_EVENTS"].append((e["start"], e["end"], e.get("event_type", 59), None, None, None, text, tid,
                                   None, text_id, domains.get(dom, 0), *(None,) * 8))
    return out


def write_nsys_sqlite(
    path: str | Path,
    *,
    kernels: list[dict[str, Any]] = (),  # type: ignore[assignment]
    memcpys: list[dict[str, Any]] = (),
    memsets: list[dict[str, Any]] = (),  # type: ignore[assignment]
    runtime: list[dict[str, Any]] = (),
    nvtx: list[dict[str, Any]] = (),  # type: ignore[assignment]
    memory: list[dict[str, Any]] = (),  # type: ignore[assignment]
    gpus: list[dict[str, Any]] = (),
    session_start_ns: int | None = None,  # type: ignore[assignment]
    tables: tuple[str, ...] | None = None,
) -> Path:
    """Write a small Nsight Systems SQLite export (the documented tables) from plain records.

    Parameters
    ----------
    path
        The file to create (replaced if it exists).
    kernels
        Dicts with ``start``, ``end`` (ns), ``name`` (text; stored through ``StringIds`` as both
        ``demangledName`` and ``shortName`` unless ``short`` is given), ``stream``, ``correlation``,
        ``pid`` and optionally ``device`` (0), ``graph_node``.
    memcpys, memsets
        Dicts with ``start``, ``end``, ``bytes``, ``stream``, ``correlation``, ``pid`` (and
        ``copy_kind`` for copies, default 2 = DtoH).
    runtime
        Dicts with ``start``, ``end``, ``name`` (e.g. ``cudaLaunchKernel_v7000``), ``correlation``,
        ``pid``, ``tid``.
    nvtx
        Dicts with ``start``, ``end``, ``text``, ``pid``, ``tid`` and optionally ``domain`` (a name:
        a domain-creation event is written for it) and ``registered`` (store the text through
        ``textId`` instead of ``text``).
    memory
        Rows of ``CUDA_GPU_MEMORY_USAGE_EVENTS``: dicts with ``start`` (ns), ``bytes``, ``op``
        (``memoryOperationType``: 0 allocation, 1 free), ``pid`` and optionally ``address``,
        ``device`` (0), ``mem_kind`` (2, device memory), ``correlation`` and ``global_pid`` (written
        as given, e.g. None, in place of the one ``pid`` makes).
    gpus
        Dicts with ``id``, ``name`` and optionally ``cuda_id`` (default ``id``).
    session_start_ns
        When given, ``TARGET_INFO_SESSION_START_TIME.utcEpochNs``.
    tables
        Only create these tables (default: all of :data:`NSYS_SCHEMA`); for broken-input tests.

    Returns
    -------
    Path
        ``path``.
    """
    import sqlite3

    out = Path(path)
    if out.exists():
        out.unlink()
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(str(text), len(strings) + 1)

    wanted = tuple(NSYS_SCHEMA) if tables is None else tables
    con = sqlite3.connect(out)
    try:
        for name in wanted:
            con.execute(f"CREATE TABLE {name} ({NSYS_SCHEMA[name]})")
        rows = _nsys_rows(kernels, memcpys, memsets, runtime, nvtx, memory, sid)
        for name, table_rows in rows.items():
            if table_rows and name in wanted:
                marks = ", ".join("?" * len(table_rows[0]))
                con.executemany(f"INSERT INTO {name} VALUES ({marks})", table_rows)
        if "TARGET_INFO_GPU" in wanted:
            con.executemany(
                "INSERT INTO TARGET_INFO_GPU VALUES (?, ?, '0000:00:00.0', 0, 132, '', 0)",
                [(g["id"], g["name"]) for g in gpus],
            )
        if "TARGET_INFO_CUDA_DEVICE" in wanted:
            con.executemany(
                "INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, 0, '', 132)",
                [(g["id"], g.get("cuda_id", g["id"])) for g in gpus],
            )
        if session_start_ns is not None and "TARGET_INFO_SESSION_START_TIME" in wanted:
            con.execute(
                "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (int(session_start_ns),)
            )
        if "StringIds" in wanted:
            con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
        con.commit()
    finally:
        con.close()
    return out


# ---------------------------------------------------------------------------------------------------
# A mixture-of-experts step whose communication is DeepEP's (no "nccl" in any name)
# ---------------------------------------------------------------------------------------------------

#: DeepEP-style kernel names (the ``deep_ep::intranode`` namespace of its expert-parallel kernels).
MOE_KERNELS: dict[str, str] = {
    "attention": "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, __nv_bfloat16>>"
    "(Flash_fwd_params)",
    "notify_dispatch": "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*, "
    "int, int, int, int*, int*, int**, int)",
    "dispatch": "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, "
    "int*, int4 const*, float const*, long const*, float const*, bool const*, int const*, int, "
    "int, int, int, int, int, void**, int, int, int)",
    "shared_expert": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute",
    "experts": "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<grouped_moe_gemm_bf16>>"
    "(Params)",
    "combine": "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768, 4096>(__nv_bfloat16*, float*, "
    "__nv_bfloat16 const*, float const*, int const*, int const*, int const*, int, int, int, int)",
    "next_layer": "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::BFloat16>>"
    "(int)",
}

#: The same step with its expert-parallel kernels in a namespace no pattern list knows, and the next
#: layer a reduction whose name says "reduce" (compute): written by ``synth_moe_traces(names="unlisted")``.
MOE_UNLISTED_KERNELS: dict[str, str] = {
    **MOE_KERNELS,
    "notify_dispatch": "void acme::moe::xfer<0, 8>(int const*, int*, int)",
    "dispatch": "void acme::moe::xfer<1, 8>(int4*, float*, int const*, int)",
    "combine": "void acme::moe::xfer<2, 8>(__nv_bfloat16*, float const*, int const*, int)",
    "next_layer": "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>>, unsigned int, "
    "float, 4>>"
    "(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>>, unsigned int, float, 4>)",
}
# the CPU op that launches each role, and the annotation around it (unlisted names only)
_MOE_LAUNCHERS: dict[str, tuple[str, str | None]] = {
    "attention": ("aten::_flash_attention_forward", None),
    "notify_dispatch": ("acme::moe::xfer", "dispatch(F)"),
    "dispatch": ("acme::moe::xfer", "dispatch(F)"),
    "shared_expert": ("aten::mm", None),
    "experts": ("acme::moe::grouped_gemm", None),
    "combine": ("acme::moe::xfer", "combine(B)"),
    "next_layer": ("aten::sum", None),
}

# (role, stream, start, end) in µs from the step start; comm on stream 20, compute on stream 7
_MOE_LAYOUT: tuple[tuple[str, int, int, int], ...] = (
    ("attention", 7, 0, 100),
    ("notify_dispatch", 20, 100, 110),  # exposed: nothing else runs
    ("dispatch", 20, 110, 170),  # the shared expert hides 40 of its 60 µs
    ("shared_expert", 7, 110, 150),
    ("experts", 7, 170, 270),
    ("combine", 20, 270, 330),  # the next layer's elementwise work hides 30 of its 60 µs
    ("next_layer", 7, 270, 300),
)
_MOE_WALL_US = 340  # 10 µs idle after the combine


class SynthMoETraces:
    """Files written by :func:`synth_moe_traces` and the per-step truth.

    Attributes
    ----------
    paths
        One file per rank (Kineto JSON or nsys SQLite).
    truth
        Per (rank, step): ``compute``, ``exposed_comm``, ``idle``, ``step_wall_us`` and
        ``overlapped_comm_us`` in µs, from the layout (the other parts are zero).
    """

    def __init__(self, paths: list[Path], truth: pd.DataFrame) -> None:
        self.paths = paths
        self.truth = truth


def _moe_truth(ranks: int, steps: int) -> pd.DataFrame:
    comm = [(s, e) for role, _, s, e in _MOE_LAYOUT if role in ("notify_dispatch", "dispatch", "combine")]
    comp = [(s, e) for role, _, s, e in _MOE_LAYOUT if role not in ("notify_dispatch", "dispatch", "combine")]
    covered = np.zeros(_MOE_WALL_US, dtype=int)  # 1 µs cells: 1 compute, 2 comm only
    for s, e in comp:
        covered[s:e] = 1
    hidden = sum(int((covered[s:e] == 1).sum()) for s, e in comm)
    for s, e in comm:
        covered[s:e] = np.where(covered[s:e] == 1, 1, 2)
    one = {
        "compute": float((covered == 1).sum()),
        "exposed_comm": float((covered == 2).sum()),
        "idle": float((covered == 0).sum()),
        "step_wall_us": float(_MOE_WALL_US),
        "overlapped_comm_us": float(hidden),
    }
    rows = [{"rank": r, "step": s, **one} for r in range(ranks) for s in range(steps)]
    return pd.DataFrame(rows)


def synth_moe_traces(
    out_dir: str | Path, *, ranks: int = 2, steps: int = 3, output: str = "kineto", names: str = "deepep"
) -> SynthMoETraces:
    """Write a synthetic mixture-of-experts training trace whose communication is DeepEP's.

    Every step of every rank runs :data:`MOE_KERNELS` on two streams: attention, DeepEP's
    ``notify_dispatch`` and ``dispatch`` (token all-to-all) partly under the shared expert's GEMM,
    the grouped expert GEMM, and DeepEP's ``combine`` partly under the next layer's elementwise
    kernel, then 10 µs idle.  No kernel carries collective metadata and none has ``nccl`` in its
    name, so only the communication name patterns can find the 130 µs of communication per step,
    of which 70 µs are overlapped with compute and 60 µs exposed.

    With ``names="unlisted"`` the step is the same but its kernels are
    :data:`MOE_UNLISTED_KERNELS`: the expert-parallel kernels are ``acme::moe::xfer<...>`` (a
    namespace no name pattern knows), each launched by an ``acme::moe::xfer`` CPU op inside a
    ``dispatch(F)`` or ``combine(B)`` user annotation (an NVTX range in the nsys output), so only
    their launcher says they are communication; the next layer is a reduction kernel launched by
    ``aten::sum`` (compute, whatever its name says).  The truth is unchanged.

    Parameters
    ----------
    out_dir
        Folder for the files (created).
    ranks, steps
        How many rank files and ``ProfilerStep#N`` windows.
    output
        ``"kineto"`` (Chrome-trace JSON) or ``"nsys"`` (an SQLite export following
        :data:`NSYS_SCHEMA`).
    names
        ``"deepep"`` (:data:`MOE_KERNELS`, launched by bare runtime calls) or ``"unlisted"``
        (:data:`MOE_UNLISTED_KERNELS`, launched under their ops and annotations).

    Returns
    -------
    SynthMoETraces
        The files and the truth per (rank, step), computed from the layout on a 1 µs grid.
    """
    n, n_steps = _whole("ranks", ranks, 1), _whole("steps", steps, 1)
    if output not in ("kineto", "nsys"):
        raise DomainError(f"output must be 'kineto' or 'nsys'; got {output!r}")
    if names not in ("deepep", "unlisted"):
        raise DomainError(f"names must be 'deepep' or 'unlisted'; got {names!r}")
    unlisted = names == "unlisted"
    kernel_names = MOE_UNLISTED_KERNELS if unlisted else MOE_KERNELS
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(n):
        kern, launches, ranges, ops = [], [], [], []
        corr = 1
        for s in range(n_steps):
            t0 = 1000 + s * (_MOE_WALL_US + 60)
            ranges.append((f"ProfilerStep#{s}", t0, t0 + _MOE_WALL_US))
            for i, (role, stream, a, b) in enumerate(_MOE_LAYOUT):
                # all launched before the device needs them; with unlisted names 8 µs apart, each
                # launch 1 µs inside its op and the op 1 µs inside its annotation
                ts = t0 - 60 + 8 * i if unlisted else t0 - 40 + corr % 30
                launches.append((ts, corr))
                kern.append((kernel_names[role], stream, t0 + a, t0 + b, corr))
                if unlisted:
                    op, note = _MOE_LAUNCHERS[role]
                    ops.append((op, ts - 1, ts + 3, corr))
                    if note is not None:
                        ranges.append((note, ts - 2, ts + 4))
                corr += 1
        if output == "kineto":
            events: list[dict[str, Any]] = [
                {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": a, "dur": b - a}
                for name, a, b in ranges
            ]
            events += [
                {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": a, "dur": b - a,
                 "args": {"External id": ext}}
                for name, a, b, ext in ops
            ]
            for (ts, c), (name, stream, a, b, _) in zip(launches, kern, strict=True):
                events.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 1,
                        "tid": 1,
                        "ts": ts,
                        "dur": 2,
                        "args": {"correlation": c},
                    }
                )
                events.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": name,
                        "pid": 0,
                        "tid": stream,
                        "ts": a,
                        "dur": b - a,
                        "args": {"device": 0, "stream": stream, "correlation": c},
                    }
                )
            doc = {
                "schemaVersion": 1,
                "distributedInfo": {"backend": "nccl", "rank": r, "world_size": n},
                "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                "baseTimeNanoseconds": _BASE_NS,
                "traceEvents": events,
            }
            path = out / f"moe_rank-{r}.pt.trace.json"
            path.write_text(json.dumps(doc))
        else:
            us = 1000
            path = write_nsys_sqlite(
                out / f"moe_rank{r}.sqlite",
                kernels=[
                    {
                        "start": a * us,
                        "end": b * us,
                        "name": name,
                        "stream": stream,
                        "correlation": c,
                        "pid": 100 + r,
                    }
                    for name, stream, a, b, c in kern
                ],
                runtime=[
                    {
                        "start": ts * us,
                        "end": ts * us + 2000,
                        "name": "cudaLaunchKernel_v7000",
                        "correlation": c,
                        "pid": 100 + r,
                        "tid": 7,
                    }
                    for ts, c in launches
                ],
                nvtx=[
                    {"start": a * us, "end": b * us, "text": name, "pid": 100 + r, "tid": 7}
                    for name, a, b in ranges + [(op, a, b) for op, a, b, _ in ops]
                ],
                gpus=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
                session_start_ns=_BASE_NS,
            )
        paths.append(path)
    return SynthMoETraces(paths, _moe_truth(n, n_steps))


# ---------------------------------------------------------------------------------------------------
# Table 7 trace patterns, one synthetic case each (kernel, step and op tables)
# ---------------------------------------------------------------------------------------------------

#: The cases :func:`synth_triage_tables` builds: a clean step and one per trace pattern of Table 7.
TRIAGE_CASES: tuple[str, ...] = ("clean", "small_kernel_gaps", "large_memory_spikes",
                                 "low_flops_high_bandwidth", "non_gemm_kernels", "exposed_collectives",
                                 "barrier_straggler", "pipeline_bubbles", "repeated_large_allocations",
                                 "input_wait")

_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
_ELEMENTWISE = "vectorized_elementwise_kernel<add>"
_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
_SENDRECV = "ncclDevKernel_SendRecv"
_STEP_US = 10_000


def synth_triage_tables(case: str, *, steps: int = 3) -> dict[str, pd.DataFrame]:
    """Build the kernel, step and op tables of one Table 7 case, with its pattern and no other.

    Every step lasts 10 ms.  The clean case: each of two ranks runs one GEMM (7 ms), one elementwise
    kernel (1 ms) and a 0.6 ms AllReduce that both ranks enter together, then idles 1.4 ms.  Each
    other case changes one thing:

    ``small_kernel_gaps``
        the work is 250 GEMMs of 20 us, each launched by the host only when the previous one ended
        (20 us of host dispatch before each);
    ``low_flops_high_bandwidth``
        the GEMM is launched by an ``aten::mm`` of shapes [16, 8192] x [8192, 16] (about 8 FLOP per
        byte, far below any accelerator's ridge point);
    ``non_gemm_kernels``
        the 7 ms GEMM becomes 2 ms, and 5 ms of elementwise kernels follow it;
    ``exposed_collectives``
        the AllReduce takes 3 ms and the elementwise kernel is gone (nothing to overlap with);
    ``barrier_straggler``
        four ranks; rank 3's GEMM is 1.2 ms longer and the others wait for it in the AllReduce;
    ``pipeline_bubbles``
        two pipeline stages: stage 0 computes then sends, stage 1 receives then computes, each idle
        for 3.5 ms at one end of the step;
    ``input_wait``
        2 ms with no device activity between consecutive steps;
    ``large_memory_spikes``
        a 4 GiB buffer allocated and freed inside each step (the clean memory table: 10 GiB held, one
        64 MiB buffer allocated at the step's start and freed near its end);
    ``repeated_large_allocations``
        a 256 MiB buffer allocated and freed four times in each step.

    Parameters
    ----------
    case
        One of :data:`TRIAGE_CASES`.
    steps
        Steps per rank (>= 2).

    Returns
    -------
    dict of DataFrame
        ``kernels`` (canonical kernel columns plus ``launch_us``), ``steps`` (``rank, step,
        start_us, end_us, source``), ``ops`` (empty unless the case records shapes) and ``memory``
        (device memory events: ``rank, ts_us, bytes, total_allocated, device_type``).
    """
    if case not in TRIAGE_CASES:
        raise DomainError(f"case must be one of {TRIAGE_CASES}; got {case!r}")
    n_steps = _whole("steps", steps, 2)
    ranks = 4 if case == "barrier_straggler" else 2
    period = _STEP_US + (2_000 if case == "input_wait" else 0)
    rows: list[tuple[Any, ...]] = []
    step_rows: list[tuple[int, int, float, float, str]] = []
    op_rows: list[tuple[Any, ...]] = []
    seq = 0

    def add(rank: int, step: int, name: str, kind: str, start: float, end: float, launch: float,
            collective: str = "none", pg: str | None = None, s: int | None = None,
            xid: int | None = None) -> None:
        rows.append((rank, step, 7 if kind != "comm" else 9, start, end, end - start, name, kind, collective,
                     pg, s, None, False, launch, xid))

    mem_rows: list[tuple[int, float, float, float, int]] = []
    held, mib = float(10 * 2**30), float(2**20)

    def alloc(rank: int, at: float, size: float) -> None:
        level = (mem_rows[-1][3] if mem_rows and mem_rows[-1][0] == rank else held) + size
        mem_rows.append((rank, at, size, level, 1))

    for step in range(n_steps):
        t0 = float(step * period)
        for rank in range(ranks):
            step_rows.append((rank, step, t0, t0 + _STEP_US, "profiler_step"))
            alloc(rank, t0 + 10, 64 * mib)
            if case == "large_memory_spikes":
                alloc(rank, t0 + 2_000, 4 * 1024 * mib)
                alloc(rank, t0 + 5_000, -4 * 1024 * mib)
            if case == "repeated_large_allocations":
                for i in range(4):
                    alloc(rank, t0 + 1_000 + 500 * i, 256 * mib)
                    alloc(rank, t0 + 1_200 + 500 * i, -256 * mib)
            alloc(rank, t0 + 9_000, -64 * mib)
            if case == "small_kernel_gaps":
                t = t0
                for _ in range(250):
                    add(rank, step, _GEMM, "compute", t + 20, t + 40, t)   # launched as the device drains
                    t += 40
            elif case == "pipeline_bubbles":
                if rank == 0:
                    add(rank, step, _GEMM, "compute", t0, t0 + 6_000, t0 - 5)
                else:
                    add(rank, step, _GEMM, "compute", t0 + 6_500, t0 + _STEP_US, t0 - 5)
                add(rank, step, _SENDRECV, "comm", t0 + 6_000, t0 + 6_500, t0 - 5, "sendrecv", "pp", seq)
            else:
                extra = 1_200 if case == "barrier_straggler" else 0
                gemm = 2_000 if case == "non_gemm_kernels" else 7_000
                gemm += extra if rank == 3 else 0
                xid = 1_000 * step + rank if case == "low_flops_high_bandwidth" else None
                add(rank, step, _GEMM, "compute", t0, t0 + gemm, t0 - 5, xid=xid)
                if xid is not None:
                    op_rows.append((rank, xid, "aten::mm", t0 - 10, 5.0, "[[16, 8192], [8192, 16]]",
                                    '["c10::BFloat16", "c10::BFloat16"]'))
                t = t0 + gemm
                elementwise = {"non_gemm_kernels": 6_000, "exposed_collectives": 0}.get(case, 1_000)
                if elementwise:
                    add(rank, step, _ELEMENTWISE, "compute", t, t + elementwise, t0 - 5)
                    t += elementwise
                # every rank leaves together, after the last one has arrived and the transfer ran
                last = t0 + (7_000 if case == "exposed_collectives" else 8_000 + extra)
                transfer = 3_000 if case == "exposed_collectives" else 600
                add(rank, step, _ALLREDUCE, "comm", t, last + transfer, t0 - 5, "allreduce", "dp", seq)
        seq += 1
    columns = ["rank", "step", "stream", "start_us", "end_us", "dur_us", "name", "kind", "collective",
               "process_group", "seq", "bytes", "cuda_graph", "launch_us", "external_id"]
    kernels = pd.DataFrame(rows, columns=columns)
    kernels = kernels.astype({"seq": "Int64", "bytes": "Int64", "external_id": "Int64",
                              "process_group": "string", "collective": "string", "kind": "string",
                              "name": "string"})
    steps_frame = pd.DataFrame(step_rows, columns=["rank", "step", "start_us", "end_us", "source"])
    ops = pd.DataFrame(op_rows, columns=["rank", "external_id", "name", "start_us", "dur_us", "input_dims",
                                         "input_types"]).astype({"external_id": "Int64"})
    memory = pd.DataFrame(mem_rows, columns=["rank", "ts_us", "bytes", "total_allocated", "device_type"])
    memory = memory.sort_values(["rank", "ts_us"], kind="stable").reset_index(drop=True)
    return {"kernels": kernels, "steps": steps_frame, "ops": ops, "memory": memory}
