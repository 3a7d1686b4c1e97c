"""Tests for fleetlib.program.classify: kernel kinds, collective types, message sizes, host syncs."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.program.classify import (
    COLLECTIVES,
    DEFAULT_COMM_PATTERNS,
    DTYPE_BYTES,
    KINDS,
    SYNC_KINDS,
    Classifier,
    collective_from_annotation,
    collective_from_arg,
    collective_from_kernel_name,
    dtype_size_bytes,
    host_sync_kinds,
    is_graph_launch,
    message_bytes,
    shape_bytes,
)
from fleetlib.quality import DomainError

# (kernel name as traces write it, is communication by default, collective from the name)
NAMES = [
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", True, "allreduce"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", True, "sendrecv"),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", True, "broadcast"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", True, "allgather"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", True, "reducescatter"),
    ("ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", True, "reduce"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", True, "sendrecv"),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", True, "none"),
    ("ncclSymkDevKernel_AllReduce_LL_sum_bf16(ncclSymkDevWorkArgs4K)", True, "allreduce"),
    ("ncclSymk_AllGather_ST(ncclSymkDevWorkArgs4K)", True, "allgather"),
    ("rcclGenericKernel<1, false>(ncclDevComm*, unsigned long, ncclWork*)", True, "none"),
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals)",
        True,
        "allreduce",
    ),
    (
        "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<bf16>()",
        True,
        "allreduce",
    ),
    ("void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>(float**)", True, "allreduce"),
    ("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)", True, "alltoall"),
    ("void deep_ep::internode::combine<nv_bfloat16, 8>(int4*)", True, "alltoall"),
    ("nvshmemi_transfer_rma_kernel", True, "none"),
    ("mscclpp::AllreduceAllpairs", True, "allreduce"),
    # not communication: compute kernels whose names contain collective-like words or 'hip'
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(float*)", False, "none"),
    ("hipKernel_gemm_bf16", False, "none"),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(Params)",
        False,
        "none",
    ),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1", False, "none"),
]


@pytest.mark.parametrize(("name", "comm", "collective"), NAMES)
def test_default_patterns_and_name_collectives(name, comm, collective):
    c = Classifier()
    assert bool(c.is_comm_name([name])[0]) is comm
    assert c.kinds([name], ["kernel"]).tolist() == ["comm" if comm else "compute"]
    assert collective_from_kernel_name([name]).tolist() == [collective]


def test_kinds_follow_the_category_first():
    names = [
        "Memcpy DtoD (Device -> Device)",
        "Memset (Device)",
        "anything",
        "ncclDevKernel_SendRecv()",
        "Event Sync",
        "mystery",
        "__amd_rocclr_copyBuffer",
        "__amd_rocclr_fillBufferAligned",
        "dma_copy",
    ]
    cats = [
        "gpu_memcpy",
        "gpu_memset",
        "gpu_memcpy",
        "kernel",
        "cuda_sync",
        "acme",
        "kernel",
        "kernel",
        "kernel",
    ]
    assert Classifier().kinds(names, cats).tolist() == [
        "memcpy",
        "memset",
        "memcpy",
        "comm",
        "sync",
        "other",
        "memcpy",
        "memset",
        "memcpy",
    ]
    assert Classifier().kinds([None, "x"], ["kernel", None]).tolist() == ["compute", "other"]
    with pytest.raises(DomainError, match="length"):
        Classifier().kinds(["a", "b"], ["kernel"])


def test_configurable_patterns():
    c = Classifier(extra_comm_patterns=(r"^my_allreduce",))
    assert c.kinds(["my_allreduce_bf16", "sgemm"], ["kernel", "kernel"]).tolist() == ["comm", "compute"]
    only_nccl = Classifier(comm_patterns=(r"^nccl",))
    assert only_nccl.kinds(["ncclKernel_x", "rcclKernel_x"], ["kernel"] * 2).tolist() == ["comm", "compute"]
    none = Classifier(comm_patterns=(), memcpy_patterns=(), memset_patterns=())
    assert none.kinds(["ncclKernel_x", "Memcpy HtoD"], ["kernel"] * 2).tolist() == ["compute", "compute"]
    assert (
        c.fingerprint() != Classifier().fingerprint()
        and Classifier().fingerprint() == Classifier().fingerprint()
    )
    assert Classifier() == Classifier() and c.comm_patterns == DEFAULT_COMM_PATTERNS
    with pytest.raises(DomainError, match="not a valid regular expression"):
        Classifier(extra_comm_patterns=("(",))
    with pytest.raises(DomainError, match="sequence of patterns"):
        Classifier(comm_patterns="nccl")  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="non-empty"):
        Classifier(memcpy_patterns=("",))


@pytest.mark.parametrize(
    ("value", "collective"),
    [
        ("allreduce", "allreduce"),
        ("all_reduce", "allreduce"),
        ("allreduce_coalesced", "allreduce"),
        ("_allgather_base", "allgather"),
        ("allgather_into_tensor_coalesced", "allgather"),
        ("reduce_scatter_tensor_coalesced", "reducescatter"),
        ("_reduce_scatter_base", "reducescatter"),
        ("all_to_all", "alltoall"),
        ("alltoall_base", "alltoall"),
        ("all_to_allv", "alltoall"),
        ("broadcast", "broadcast"),
        ("send", "sendrecv"),
        ("recv", "sendrecv"),
        ("gather", "sendrecv"),
        ("scatter", "sendrecv"),
        ("reduce", "reduce"),
        ("barrier", "allreduce"),
        ("AllReduce", "allreduce"),
    ],
)
def test_collective_from_arg(value, collective):
    got, ok = collective_from_arg([value])
    assert got.tolist() == [collective] and ok.tolist() == [True]


def test_collective_from_arg_unknown_and_missing():
    got, ok = collective_from_arg(["mystery_op", None, ""])
    assert got.tolist() == ["none"] * 3 and ok.tolist() == [False] * 3


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["allreduce", "allgather", "reducescatter", "alltoall", "broadcast"]),
    st.lists(st.booleans(), min_size=13, max_size=13),
    st.lists(st.integers(0, 2), min_size=13, max_size=13),
)
def test_collective_from_arg_ignores_case_and_separators(base, upper, seps):
    spelled = {
        "reducescatter": "reduce_scatter",
        "alltoall": "all_to_all",
        "allreduce": "all_reduce",
        "allgather": "all_gather",
        "broadcast": "broadcast",
    }[base]
    chars = []
    for ch, up, sep in zip(spelled, upper, seps, strict=False):
        chars.append((ch.upper() if up else ch) if ch != "_" else ["_", "", "-"][sep])
    got, ok = collective_from_arg(["".join(chars) + spelled[len(chars) :]])
    assert got.tolist() == [base] and ok.all()


def test_collective_from_annotation():
    names = [
        "nccl:all_reduce",
        "nccl:all_to_all",
        "nccl:_all_gather_base",
        "nccl:send 0->1",
        "nccl:recv 1<-0",
        "nccl:broadcast",
        "nccl:_reduce_scatter_base",
        "aten::add",
        "nccl:whatever",
        None,
    ]
    assert collective_from_annotation(names).tolist() == [
        "allreduce",
        "alltoall",
        "allgather",
        "sendrecv",
        "sendrecv",
        "broadcast",
        "reducescatter",
        "none",
        "none",
        "none",
    ]


def test_dtype_sizes_and_message_bytes():
    assert dtype_size_bytes(
        [
            "Float",
            "BFloat16",
            "c10::Half",
            "long int",
            "unsigned char",
            "Float8_e4m3fn",
            "int8_t",
            "Bool",
            "Double",
            "ComplexFloat",
        ]
    ).tolist() == [4, 2, 2, 8, 1, 1, 1, 1, 8, 8]
    sizes = dtype_size_bytes(["mystery", None])
    assert np.isnan(sizes).all()
    out = message_bytes([1000, "12", None, 5], ["BFloat16", "Float", "Float", "mystery"])
    assert out.tolist()[:2] == [2000, 48] and pd.isna(out[2]) and pd.isna(out[3])
    assert str(out.dtype) == "Int64"
    with pytest.raises(DomainError, match=">= 0"):
        message_bytes([-1], ["Float"])
    with pytest.raises(DomainError, match="length"):
        message_bytes([1, 2], ["Float"])
    assert all(v in (1, 2, 4, 8, 16) for v in DTYPE_BYTES.values())


def test_shape_bytes_from_input_dims():
    out = shape_bytes(
        [[[6144]], [[24, 2]], [[]], [], None, [[3]]],
        [["float"], ["long int"], ["float"], [], None, ["mystery"]],
    )
    assert out.tolist()[:2] == [6144 * 4, 48 * 8] and all(pd.isna(v) for v in out.tolist()[2:])
    with pytest.raises(DomainError, match="length"):
        shape_bytes([[[1]]], [])


def test_host_sync_kinds_and_graph_launches():
    names = [
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "hipDeviceSynchronize",
        "cuStreamSynchronize",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "cudaLaunchKernel",
        "cudaEventQuery",
        None,
    ]
    kind, blocking = host_sync_kinds(names)
    assert kind.tolist() == [
        "device",
        "stream",
        "event",
        "stream_wait_event",
        "device",
        "stream",
        "sync_memcpy",
        None,
        None,
        None,
        None,
    ]
    assert blocking.tolist() == [True, True, True, False, True, True, True, False, False, False, False]
    assert set(k for k in kind if k is not None) <= set(SYNC_KINDS)
    assert is_graph_launch(
        [
            "cudaGraphLaunch",
            "cudaGraphLaunch_v10000",
            "hipGraphLaunch",
            "cuGraphLaunch",
            "cudaLaunchKernel",
            None,
        ]
    ).tolist() == [True, True, True, True, False, False]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.sampled_from([n for n, _, _ in NAMES] + ["Memcpy HtoD", "x"]), min_size=1, max_size=40),
    st.lists(
        st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "foo"]), min_size=40, max_size=40
    ),
)
def test_kinds_are_valid_and_depend_only_on_name_and_category(names, cats):
    cats = cats[: len(names)]
    kinds = Classifier().kinds(names, cats)
    assert set(kinds) <= set(KINDS)
    pairs = {}
    for n, c, k in zip(names, cats, kinds, strict=True):
        assert pairs.setdefault((n, c), k) == k
    # element-wise equal to classifying each activity on its own
    assert kinds.tolist() == [Classifier().kinds([n], [c])[0] for n, c in zip(names, cats, strict=True)]
    colls = collective_from_kernel_name(names)
    assert set(colls) <= set(COLLECTIVES)


def test_default_patterns_are_valid_regexes():
    for p in DEFAULT_COMM_PATTERNS:
        re.compile(p)
