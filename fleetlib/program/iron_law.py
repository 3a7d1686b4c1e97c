"""Step-time relations: the iron law, the Fleet Law terms, collectives, traffic models and waits.

The single-device iron law (equation 5 of the chapter) splits a step into data movement across one
memory boundary, arithmetic at the realized rate, and overhead::

    T = D_vol / BW + O / (R_peak eta_hw) + L_lat

At fleet scale the overhead splits into host dispatch (local), communication ``T_comm(N)`` and
synchronization ``T_sync(N)``, with an overlap credit ``T_overlap`` for what hides behind
computation::

    T_step ~= T_local / N + T_comm(N) + T_sync(N) - T_overlap

A change shortens a step only through the term it shrinks and only by the exposed part of it.
Every loss inside a retained step -- exposed communication, barrier waits for a straggler, memory
stalls, dispatch gaps -- is a *program* goodput loss; the functions here say which term it lengthens.

Byte counts use decimal units (1 KB = 1e3 bytes, 1 GB = 1e9 bytes) unless a caller converts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fleetlib.program._arrays import (
    ArrayLike,
    FloatOrArray,
    bad_position,
    checked_counts,
    checked_values,
    first_bad,
    scalar_or_array,
)
from fleetlib.quality import DomainError

__all__ = [
    "COLLECTIVES",
    "CollectiveWaitSplit",
    "attention_hbm_traffic_bytes",
    "collective_time_s",
    "dispatch_to_floor_ratio",
    "fleet_law_step_s",
    "fusion_hbm_traffic_bytes",
    "fusion_traffic_ratio",
    "iron_law_terms_s",
    "iron_law_time_s",
    "ring_allreduce_bytes_per_rank",
    "ring_wire_bytes_per_rank",
    "speedup_from_term_scaling",
    "split_collective_wait",
    "straggler_mfu",
    "synchronous_rate_factor",
    "tiled_attention_traffic_ratio",
    "tp_allreduce_bytes_per_layer",
    "trace_volume_bytes",
]

Collective = Literal["allreduce", "allgather", "reducescatter"]

#: Collectives whose ring wire volume :func:`ring_wire_bytes_per_rank` knows.
COLLECTIVES: tuple[str, ...] = ("allreduce", "allgather", "reducescatter")

#: Shares of a step must sum to one within this tolerance.
_SHARE_SUM_ABS = 1e-6


# ---------------------------------------------------------------------------------------------------
# Iron law (equation 5)
# ---------------------------------------------------------------------------------------------------


def iron_law_terms_s(data_bytes: ArrayLike, bandwidth_bytes_per_s: ArrayLike, ops: ArrayLike,
                     peak_ops_per_s: ArrayLike, efficiency: ArrayLike,
                     overhead_s: ArrayLike) -> dict[str, FloatOrArray]:
    """Return the three terms of the iron law, in seconds.

    Parameters
    ----------
    data_bytes
        Data volume crossing the chosen memory boundary, ``D_vol``.
    bandwidth_bytes_per_s
        Bandwidth of that boundary, ``BW``.
    ops
        Operation count, ``O``.
    peak_ops_per_s
        Peak rate, ``R_peak``.
    efficiency
        Hardware compute efficiency ``eta_hw`` in (0, 1]; ``R_peak eta_hw`` is the realized rate.
    overhead_s
        Overhead ``L_lat`` (host dispatch locally), seconds.

    Returns
    -------
    dict
        ``{"data_s", "compute_s", "overhead_s", "total_s"}``.
    """
    d = checked_values("data_bytes", data_bytes, nonnegative=True)
    bw = checked_values("bandwidth_bytes_per_s", bandwidth_bytes_per_s, positive=True)
    o = checked_values("ops", ops, nonnegative=True)
    peak = checked_values("peak_ops_per_s", peak_ops_per_s, positive=True)
    eta = checked_values("efficiency", efficiency, fraction=True)
    if (eta == 0.0).any():
        raise DomainError("efficiency must be > 0: a realized rate of zero never finishes the step")
    lat = checked_values("overhead_s", overhead_s, nonnegative=True)
    data_s, compute_s = d / bw, o / (peak * eta)
    return {"data_s": scalar_or_array(data_s), "compute_s": scalar_or_array(compute_s),
            "overhead_s": scalar_or_array(lat), "total_s": scalar_or_array(data_s + compute_s + lat)}


def iron_law_time_s(data_bytes: ArrayLike, bandwidth_bytes_per_s: ArrayLike, ops: ArrayLike,
                    peak_ops_per_s: ArrayLike, efficiency: ArrayLike,
                    overhead_s: ArrayLike) -> FloatOrArray:
    """Single-device step time by the iron law: ``D/BW + O/(R_peak eta) + L`` (equation 5).

    Parameters
    ----------
    data_bytes, bandwidth_bytes_per_s, ops, peak_ops_per_s, efficiency, overhead_s
        As in :func:`iron_law_terms_s`.

    Returns
    -------
    float or numpy.ndarray
        Step time, seconds.

    Examples
    --------
    >>> round(iron_law_time_s(6e9, 1e12, 3e12, 1e15, 1.0, 1e-3), 9)
    0.01
    """
    return iron_law_terms_s(data_bytes, bandwidth_bytes_per_s, ops, peak_ops_per_s, efficiency,
                            overhead_s)["total_s"]


def speedup_from_term_scaling(shares: Mapping[str, float], scale: Mapping[str, float]) -> float:
    """Whole-step speedup when some terms of the step are scaled in time (Amdahl over iron-law terms).

    Parameters
    ----------
    shares
        Each term's share of the current step time, e.g. ``{"data": 0.6, "compute": 0.3,
        "overhead": 0.1}``; non-negative and summing to one.
    scale
        Time multiplier for the terms a change touches (``0.5`` halves a term: doubling peak
        compute gives ``{"compute": 0.5}``); terms not named keep their time.

    Returns
    -------
    float
        ``old / new`` step time.

    Examples
    --------
    >>> round(speedup_from_term_scaling({"data": 0.6, "compute": 0.3, "overhead": 0.1}, {"compute": 0.5}), 3)
    1.176
    """
    if not shares:
        raise DomainError("shares is empty; give each term's share of the step")
    names = list(shares)
    s = checked_values("shares", [shares[k] for k in names], nonnegative=True)
    if abs(float(s.sum()) - 1.0) > _SHARE_SUM_ABS:
        raise DomainError(f"shares must sum to 1 (they partition the step); they sum to {float(s.sum()):g}")
    unknown = sorted(set(scale) - set(shares))
    if unknown:
        raise DomainError(f"scale names terms {unknown} that are not in shares {names}")
    m = checked_values("scale", [scale.get(k, 1.0) for k in names], nonnegative=True)
    new = float((s * m).sum())
    if new == 0.0:
        raise DomainError("every term was scaled to zero time; the speedup is unbounded")
    return 1.0 / new


# ---------------------------------------------------------------------------------------------------
# Fleet Law
# ---------------------------------------------------------------------------------------------------


def fleet_law_step_s(t_local_s: ArrayLike, devices: ArrayLike, t_comm_s: ArrayLike,
                     t_sync_s: ArrayLike = 0.0, t_overlap_s: ArrayLike = 0.0, *,
                     local_is_per_device: bool = False) -> FloatOrArray:
    """Distributed step time from the Fleet Law terms: ``T_local/N + T_comm + T_sync - T_overlap``.

    Parameters
    ----------
    t_local_s
        Unsharded local execution time (data + compute + dispatch), seconds.  When it was measured
        on an already partitioned device shard, pass ``local_is_per_device=True`` so it is not
        divided by ``N`` a second time.
    devices
        Devices ``N``; an array gives a scaling curve (with matching per-``N`` terms).
    t_comm_s
        Communication time ``T_comm(N)``, seconds.
    t_sync_s
        Synchronization time ``T_sync(N)`` (barrier and pipeline-stage waits), seconds.
    t_overlap_s
        Communication and synchronization hidden behind computation, seconds; it cannot exceed
        ``T_comm + T_sync``.
    local_is_per_device
        True when ``t_local_s`` is already the per-device share.

    Returns
    -------
    float or numpy.ndarray
        Step time, seconds.
    """
    local = checked_values("t_local_s", t_local_s, nonnegative=True)
    n = checked_counts("devices", devices)
    comm = checked_values("t_comm_s", t_comm_s, nonnegative=True)
    sync = checked_values("t_sync_s", t_sync_s, nonnegative=True)
    overlap = checked_values("t_overlap_s", t_overlap_s, nonnegative=True)
    over = overlap > comm + sync
    if over.any():
        raise DomainError("t_overlap_s exceeds t_comm_s + t_sync_s: only communication and "
                          "synchronization that exist can be hidden" + bad_position(overlap, over))
    share = local if local_is_per_device else local / n
    hidden_beyond_local = overlap > share
    if hidden_beyond_local.any():
        raise DomainError("t_overlap_s exceeds the local execution it hides behind"
                          + bad_position(overlap, hidden_beyond_local))
    return scalar_or_array(share + comm + sync - overlap)


# ---------------------------------------------------------------------------------------------------
# Collectives
# ---------------------------------------------------------------------------------------------------

_RING_FACTOR = {"allreduce": 2.0, "allgather": 1.0, "reducescatter": 1.0}


def ring_wire_bytes_per_rank(message_bytes: ArrayLike, ranks: ArrayLike,
                             collective: Collective = "allreduce") -> FloatOrArray:
    """Bytes each rank sends under a ring algorithm.

    AllReduce sends ``2 (n-1)/n`` of the message (a reduce-scatter followed by an all-gather);
    AllGather and ReduceScatter send ``(n-1)/n`` of the full (gathered) buffer.

    Parameters
    ----------
    message_bytes
        Size of the full buffer being reduced or gathered, bytes.
    ranks
        Ranks in the ring, ``n`` >= 1 (one rank sends nothing).
    collective
        ``"allreduce"``, ``"allgather"`` or ``"reducescatter"``.

    Returns
    -------
    float or numpy.ndarray
        Bytes sent per rank.
    """
    if collective not in _RING_FACTOR:
        raise DomainError(f"collective must be one of {COLLECTIVES}; got {collective!r}")
    b = checked_values("message_bytes", message_bytes, nonnegative=True)
    n = checked_counts("ranks", ranks)
    return scalar_or_array(_RING_FACTOR[collective] * (n - 1.0) / n * b)


def ring_allreduce_bytes_per_rank(message_bytes: ArrayLike, ranks: ArrayLike) -> FloatOrArray:
    """Bytes each rank sends in a ring AllReduce: ``2 (n-1)/n x message``.

    Parameters
    ----------
    message_bytes
        Size of the buffer being reduced, bytes.
    ranks
        Ranks in the ring.

    Returns
    -------
    float or numpy.ndarray
        Bytes sent per rank.

    Examples
    --------
    >>> ring_allreduce_bytes_per_rank(36e6, 8)
    63000000.0
    """
    return ring_wire_bytes_per_rank(message_bytes, ranks, "allreduce")


def collective_time_s(message_bytes: ArrayLike, ranks: ArrayLike, link_bytes_per_s: ArrayLike, *,
                      collective: Collective = "allreduce", latency_s: ArrayLike = 0.0,
                      count: ArrayLike = 1) -> FloatOrArray:
    """Bandwidth-floor time of ``count`` ring collectives: ``count x (latency + wire bytes / BW)``.

    With ``latency_s = 0`` this is the bandwidth floor the chapter uses to bound model-axis
    AllReduce time; a small message is latency-bound instead, and then the fixed per-launch
    overhead dominates.

    Parameters
    ----------
    message_bytes
        Buffer size per collective, bytes.
    ranks
        Ranks taking part.
    link_bytes_per_s
        Per-rank, per-direction link bandwidth, bytes/s.
    collective
        ``"allreduce"``, ``"allgather"`` or ``"reducescatter"``.
    latency_s
        Fixed launch and protocol time per collective, seconds.
    count
        Number of collectives (exchange points per step).

    Returns
    -------
    float or numpy.ndarray
        Time, seconds.
    """
    wire = np.asarray(ring_wire_bytes_per_rank(message_bytes, ranks, collective))
    bw = checked_values("link_bytes_per_s", link_bytes_per_s, positive=True)
    lat = checked_values("latency_s", latency_s, nonnegative=True)
    k = checked_counts("count", count, minimum=0)
    return scalar_or_array(k * (lat + wire / bw))


def tp_allreduce_bytes_per_layer(hidden: ArrayLike, bytes_per_element: ArrayLike, *,
                                 tokens: ArrayLike = 1, allreduces_per_layer: ArrayLike = 2) -> FloatOrArray:
    """Activation bytes a tensor-parallel layer reduces per step: ``tokens x hidden x b x allreduces``.

    A Megatron-style layer reduces its activations once after attention and once after the MLP
    (two AllReduces per layer in the forward pass).

    Parameters
    ----------
    hidden
        Hidden size (elements per token).
    bytes_per_element
        Bytes per activation element (2 for BF16/FP16).
    tokens
        Tokens in the step (the batch at single-token decode).
    allreduces_per_layer
        AllReduces per layer per step.

    Returns
    -------
    float or numpy.ndarray
        Bytes per layer per step.

    Examples
    --------
    >>> tp_allreduce_bytes_per_layer(8192, 2)
    32768.0
    """
    h = checked_counts("hidden", hidden)
    b = checked_values("bytes_per_element", bytes_per_element, positive=True)
    t = checked_counts("tokens", tokens)
    k = checked_counts("allreduces_per_layer", allreduces_per_layer)
    return scalar_or_array(t * h * b * k)


# ---------------------------------------------------------------------------------------------------
# HBM traffic models of kernel levers
# ---------------------------------------------------------------------------------------------------


def fusion_hbm_traffic_bytes(tokens: ArrayLike, hidden: ArrayLike, bytes_per_element: ArrayLike, *,
                             elementwise_ops: ArrayLike = 2,
                             weight_bytes: ArrayLike | None = None) -> tuple[FloatOrArray, FloatOrArray]:
    """Modeled HBM traffic of a linear layer followed by element-wise ops, unfused and fused.

    With activation size ``A = tokens x hidden x b`` and weight size ``W``: unfused, the linear
    layer reads its input and weight and writes its output (``W + 2A``) and each following
    element-wise op reads and writes one activation (``2A`` each); fused, only the input, the
    weight and the final output cross HBM (``W + 2A``).

    Parameters
    ----------
    tokens
        Tokens in the batch.
    hidden
        Hidden size; also the weight's side when ``weight_bytes`` is not given.
    bytes_per_element
        Bytes per element.
    elementwise_ops
        Element-wise ops after the linear layer (2 for activation + normalization).
    weight_bytes
        Weight size in bytes; default a square ``hidden x hidden`` matrix.

    Returns
    -------
    tuple
        ``(unfused_bytes, fused_bytes)``.
    """
    t = checked_counts("tokens", tokens)
    h = checked_counts("hidden", hidden)
    b = checked_values("bytes_per_element", bytes_per_element, positive=True)
    k = checked_counts("elementwise_ops", elementwise_ops, minimum=0)
    w = h * h * b if weight_bytes is None else checked_values("weight_bytes", weight_bytes, nonnegative=True)
    a = t * h * b
    fused = w + 2.0 * a
    return scalar_or_array(fused + 2.0 * k * a), scalar_or_array(fused)


def fusion_traffic_ratio(tokens: ArrayLike, hidden: ArrayLike, bytes_per_element: ArrayLike, *,
                         elementwise_ops: ArrayLike = 2,
                         weight_bytes: ArrayLike | None = None) -> FloatOrArray:
    """Unfused over fused HBM traffic of a linear + element-wise chain (:func:`fusion_hbm_traffic_bytes`).

    Parameters
    ----------
    tokens, hidden, bytes_per_element, elementwise_ops, weight_bytes
        As in :func:`fusion_hbm_traffic_bytes`.

    Returns
    -------
    float or numpy.ndarray
        Traffic reduction factor (>= 1).

    Examples
    --------
    >>> round(fusion_traffic_ratio(2048, 8192, 2), 3)
    1.667
    """
    unfused, fused = fusion_hbm_traffic_bytes(tokens, hidden, bytes_per_element,
                                              elementwise_ops=elementwise_ops, weight_bytes=weight_bytes)
    return scalar_or_array(np.asarray(unfused) / np.asarray(fused))


def attention_hbm_traffic_bytes(seq_len: ArrayLike, head_dim: ArrayLike, bytes_per_element: ArrayLike, *,
                                tiled: bool) -> FloatOrArray:
    """Idealized HBM traffic of one attention head, standard or tiled.

    Both read Q, K and V and write the output (``4 N d b``).  Standard attention also writes the
    ``N x N`` score matrix, reads it for the softmax, writes the probabilities and reads them for
    the value product (``4 N^2 b``); tiled attention keeps those blocks on chip.

    Parameters
    ----------
    seq_len
        Sequence length ``N``.
    head_dim
        Head dimension ``d``.
    bytes_per_element
        Bytes per element.
    tiled
        True for tiled (IO-aware) attention.

    Returns
    -------
    float or numpy.ndarray
        Bytes.
    """
    n = checked_counts("seq_len", seq_len)
    d = checked_counts("head_dim", head_dim)
    b = checked_values("bytes_per_element", bytes_per_element, positive=True)
    io = 4.0 * n * d * b
    return scalar_or_array(io if tiled else io + 4.0 * n * n * b)


def tiled_attention_traffic_ratio(seq_len: ArrayLike, head_dim: ArrayLike) -> FloatOrArray:
    """Return standard over tiled attention HBM traffic: ``1 + N/d`` (element size cancels).

    Parameters
    ----------
    seq_len
        Sequence length ``N``.
    head_dim
        Head dimension ``d``.

    Returns
    -------
    float or numpy.ndarray
        Traffic reduction factor.

    Examples
    --------
    >>> tiled_attention_traffic_ratio(8192, 128)
    65.0
    """
    n = checked_counts("seq_len", seq_len)
    d = checked_counts("head_dim", head_dim)
    return scalar_or_array(1.0 + n / d)


# ---------------------------------------------------------------------------------------------------
# Waits inside a collective: synchronization vs exposed communication
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CollectiveWaitSplit:
    """How a collective's time divides into waiting for peers and transferring data.

    Floats for one collective; arrays (one entry per collective) for many.

    Attributes
    ----------
    barrier_wait_s
        Last arrival minus first arrival: time the earliest rank waits for the latest -- the
        synchronization term ``T_sync`` (a straggler or uneven work).
    per_rank_wait_s
        Each rank's own wait, last arrival minus its arrival (shape ``(..., ranks)``).
    late_rank
        Index of the last rank to enter.
    transfer_s
        Common finish minus last arrival: the collective's duration once every rank is present.
    added_transfer_s
        ``transfer_s - baseline_transfer_s``: exposed communication added beyond the baseline
        (``T_comm``); negative when the transfer ran faster than the baseline.
    added_s
        ``barrier_wait_s + added_transfer_s``: how much later the collective finishes, seen from
        the first rank to arrive, than a baseline collective entered at the same time.
    term
        ``"synchronization"``, ``"communication"``, ``"both"`` or ``"none"``: which Fleet Law
        term(s) the added time lengthens.  Both are program goodput losses inside a retained step.
    """

    barrier_wait_s: FloatOrArray
    per_rank_wait_s: np.ndarray
    late_rank: int | np.ndarray
    transfer_s: FloatOrArray
    added_transfer_s: FloatOrArray
    added_s: FloatOrArray
    term: str | np.ndarray


def split_collective_wait(enter_s: ArrayLike, finish_s: ArrayLike, baseline_transfer_s: ArrayLike, *,
                          resolution_s: float = 0.0) -> CollectiveWaitSplit:
    """Split a collective's added time into barrier wait (late arrival) and added transfer.

    Ranks of an implicitly synchronizing collective (AllReduce, AllGather ...) all finish together.
    Time between the first and the last rank's entry is a wait for a peer, the signature of a
    straggler in the synchronization term; time from the last entry to the finish is the transfer
    itself, and whatever exceeds the baseline transfer is exposed communication.  Use clock-aligned
    traces (aligned on the common finish) so cross-host skew does not read as waiting.

    Parameters
    ----------
    enter_s
        Each rank's entry time, seconds; shape ``(ranks,)`` for one collective or
        ``(collectives, ranks)`` for many.
    finish_s
        The common finish time of each collective, seconds (scalar or shape ``(collectives,)``).
    baseline_transfer_s
        The collective's duration in a matched baseline where all ranks entered together, seconds.
    resolution_s
        Added times at or below this are treated as zero when naming the term (timer resolution).

    Returns
    -------
    CollectiveWaitSplit
        Barrier wait, transfer and the term each lengthens.

    Examples
    --------
    >>> a = split_collective_wait([8e-3] * 7 + [12e-3], 14e-3, 2e-3)
    >>> round(a.barrier_wait_s * 1e3, 6), round(a.added_transfer_s * 1e3, 6), a.term
    (4.0, 0.0, 'synchronization')
    """
    enter = checked_values("enter_s", enter_s)
    if enter.ndim == 0:
        raise DomainError("enter_s needs one entry time per rank (an array with a ranks axis)")
    finish = checked_values("finish_s", finish_s)
    base = checked_values("baseline_transfer_s", baseline_transfer_s, nonnegative=True)
    res = float(checked_values("resolution_s", resolution_s, nonnegative=True))
    try:
        finish_b = np.broadcast_to(finish, enter.shape[:-1])
    except ValueError as exc:
        raise DomainError(f"finish_s has shape {finish.shape}; expected one finish per collective, "
                          f"shape {enter.shape[:-1]}") from exc
    last = enter.max(axis=-1)
    early = finish_b < last
    if early.any():
        raise DomainError("a collective finishes before its last rank enters "
                          f"(finish {first_bad(finish_b, early)!r} s){bad_position(finish_b, early)}; "
                          "the ranks' clocks are not aligned or the events belong to different collectives")
    first = enter.min(axis=-1)
    barrier = last - first
    transfer = finish_b - last
    added_transfer = transfer - base
    sync = barrier > res
    comm = added_transfer > res
    term = np.select([sync & comm, sync, comm], ["both", "synchronization", "communication"], default="none")
    late = np.argmax(enter, axis=-1)
    return CollectiveWaitSplit(
        barrier_wait_s=scalar_or_array(barrier),
        per_rank_wait_s=last[..., None] - enter,
        late_rank=int(late) if late.ndim == 0 else late,
        transfer_s=scalar_or_array(transfer),
        added_transfer_s=scalar_or_array(added_transfer),
        added_s=scalar_or_array(barrier + added_transfer),
        term=str(term) if term.ndim == 0 else term,
    )


# ---------------------------------------------------------------------------------------------------
# Trace volume, gray failure and host dispatch
# ---------------------------------------------------------------------------------------------------


def trace_volume_bytes(per_device_bytes: ArrayLike, devices: ArrayLike) -> FloatOrArray:
    """Trace volume of one capture window across all devices: ``per-device bytes x devices``.

    Parameters
    ----------
    per_device_bytes
        Bytes one device's trace occupies for the window.
    devices
        Devices traced over the same window.

    Returns
    -------
    float or numpy.ndarray
        Total bytes.

    Examples
    --------
    >>> trace_volume_bytes(500e6, 1024) / 1e9
    512.0
    """
    b = checked_values("per_device_bytes", per_device_bytes, nonnegative=True)
    n = checked_counts("devices", devices)
    return scalar_or_array(b * n)


def synchronous_rate_factor(per_node_throughputs: ArrayLike, nominal_throughput: float = 1.0) -> float:
    """Rate factor of a synchronous job: the slowest node sets every step.

    In synchronous data parallelism every step waits for the slowest rank, so the job runs at
    ``min(throughput) / nominal`` of its healthy rate.  The loss is a program goodput loss (the
    synchronization term), not a runtime one: the job keeps its allocation and retains its steps.

    Parameters
    ----------
    per_node_throughputs
        Each node's throughput, as a fraction of nominal (or in the unit of ``nominal_throughput``).
    nominal_throughput
        The healthy per-node throughput in the same unit (1.0 for fractions).

    Returns
    -------
    float
        Job rate as a fraction of its healthy rate, ``<= 1``.

    Examples
    --------
    >>> synchronous_rate_factor([1.0] * 124 + [0.9])
    0.9
    """
    t = checked_values("per_node_throughputs", per_node_throughputs, positive=True)
    nominal = float(checked_values("nominal_throughput", nominal_throughput, positive=True))
    return min(float(t.min()) / nominal, 1.0)


def straggler_mfu(healthy_mfu: float, per_node_throughputs: ArrayLike,
                  nominal_throughput: float = 1.0) -> float:
    """MFU of a synchronous job with slow nodes: ``healthy MFU x slowest / nominal``.

    Parameters
    ----------
    healthy_mfu
        MFU with every node at nominal throughput.
    per_node_throughputs, nominal_throughput
        As in :func:`synchronous_rate_factor`.

    Returns
    -------
    float
        MFU with the slow node(s) present.
    """
    m = float(checked_values("healthy_mfu", healthy_mfu, fraction=True))
    return m * synchronous_rate_factor(per_node_throughputs, nominal_throughput)


def dispatch_to_floor_ratio(host_dispatch_s: ArrayLike, floor_s: ArrayLike) -> FloatOrArray:
    """Host dispatch time over the device's floor time for the same work.

    A ratio above one means the eager step is dispatch-bound before it is bandwidth- or
    compute-bound: graph replay (one launch for the captured sequence) is the lever, and no kernel
    or bandwidth change can reach the floor until dispatch is cut.

    Parameters
    ----------
    host_dispatch_s
        Host time to submit the step's kernels, seconds.
    floor_s
        Device floor of the step (e.g. the decode bandwidth floor), seconds.

    Returns
    -------
    float or numpy.ndarray
        Ratio.
    """
    d = checked_values("host_dispatch_s", host_dispatch_s, nonnegative=True)
    f = checked_values("floor_s", floor_s, positive=True)
    return scalar_or_array(d / f)
