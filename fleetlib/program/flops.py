"""The named ideals of program goodput: peak rates, model FLOPs, MFU, scaling efficiency and MBU.

Program goodput P is the ideal time of the retained steps over their actual time.  Which ideal is
meant must always be named, because two choices move the number:

* **the ideal** -- the arithmetic ideal (MFU, equation 3 of the chapter) for training and prefill,
  or the bandwidth floor (MBU) for small-batch decode, where no kernel can make the step
  compute-bound;
* **the counting convention and the peak** -- how the required FLOPs (or bytes) are counted and
  which published peak rate divides them.

:class:`ProgramGoodputConvention` carries both choices as one label (for example
``"MFU, PaLM 6N+12LHQT, H100 SXM dense BF16 989 TFLOP/s"``), which is what a
:class:`fleetlib.accounting.Factor` stores as its ``convention``.

Two mistakes are refused here rather than documented only:

* scaling a fleet MFU by a scaling efficiency a second time (:func:`program_goodput_from_mfu`);
* averaging MFU-based with MBU-based program goodput (:func:`combine_program_rows`).

Every function accepts numpy arrays where that is meaningful (one value per step, per job or per
kernel) and returns a plain ``float`` for scalar input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from fleetlib.program._arrays import (
    UNIT_SLACK,
    ArrayLike,
    FloatOrArray,
    at_most_one,
    bad_position,
    checked_counts,
    checked_values,
    first_bad,
    scalar_or_array,
)
from fleetlib.program.peaks import PEAK_RATES, PeakRate, peak_label, peak_rate
from fleetlib.quality import DomainError, InputError

__all__ = [
    "FLOP_CONVENTIONS",
    "PEAK_RATES",
    "CombinedProgramGoodput",
    "DecodeFloor",
    "FlopConvention",
    "PeakRate",
    "ProgramGoodputConvention",
    "UtilizationAboveOneError",
    "combine_program_rows",
    "decode_floor",
    "decode_floor_s",
    "equivalent_devices_at_peak",
    "fleet_mfu_from_node",
    "flop_convention_label",
    "hfu",
    "mbu",
    "mbu_convention",
    "mfu",
    "mfu_at_floor",
    "mfu_convention",
    "mfu_from_throughput",
    "model_flops_per_token",
    "peak_rate",
    "peak_work_flops",
    "program_goodput_from_mfu",
    "program_rows_by_ideal",
    "scaling_efficiency",
    "scaling_efficiency_from_mfu",
]

class UtilizationAboveOneError(InputError, DomainError):
    """An MFU or MBU above one: the FLOP (or byte) count, the peak or its precision is wrong.

    It is an :class:`~fleetlib.quality.InputError` (the inputs describing the model or the device do
    not fit the measured steps; the CLI prints one line and exits 2) and, for callers that catch
    domain errors, a :class:`~fleetlib.quality.DomainError`.  The message names the convention when
    one was given.
    """


def _refuse_above_one(name: str, arr: np.ndarray, hint: str, convention: object = None,
                      file: str | None = None) -> np.ndarray:
    """Refuse a utilization above one (beyond float round-off), naming the convention if known."""
    bad = arr > 1.0 + UNIT_SLACK
    if bad.any():
        under = f" under convention {str(convention)!r}" if convention is not None else ""
        raise UtilizationAboveOneError(f"{name} = {first_bad(arr, bad):.4g} exceeds 1"
                                       f"{bad_position(arr, bad)}{under}: {hint}", file=file,
                                       field="convention" if file else None)
    return arr


FlopConvention = Literal["palm", "megatron", "6n"]
Ideal = Literal["MFU", "MBU"]

#: FLOP-counting conventions understood by :func:`model_flops_per_token`.
FLOP_CONVENTIONS: tuple[str, ...] = ("palm", "megatron", "6n")




# ---------------------------------------------------------------------------------------------------
# Model FLOPs
# ---------------------------------------------------------------------------------------------------


def model_flops_per_token(n_params: ArrayLike, *, convention: FlopConvention,
                          n_layers: int | None = None, n_heads: int | None = None,
                          head_dim: int | None = None, seq_len: int | None = None,
                          causal: bool | None = None) -> FloatOrArray:
    """Count required training FLOPs per token (forward + backward) under a named convention.

    Every convention counts ``6N`` for the parameter matrix multiplications: two FLOPs per
    multiply-add, once in the forward pass and twice in the backward pass (input gradient and
    weight gradient), for each of the ``N`` parameters.  They differ in the attention term, the
    score (Q K^T) and value (P V) products that have no parameters:

    ``"palm"``
        PaLM appendix B (also nanoGPT, torchtitan): ``6N + 12 L H Q T`` -- each layer's two
        attention products cost ``2 T (H Q)`` FLOPs per token each in the forward pass, times three
        for forward plus backward, over the *full* ``T x T`` score matrix.  Causal masking is not
        credited, so ``causal=True`` is refused; no recomputation is counted.
    ``"megatron"``
        Megatron-LM's causal accounting of the same products: ``6N + 6 L H Q T`` when ``causal``
        (the default), because on average a query attends to half the sequence; ``6N + 12 L H Q T``
        when ``causal=False``.  Megatron-LM's own total also counts the output-logits GEMM; here
        that is inside ``6N`` exactly when ``n_params`` includes the output embedding, so the
        caller decides and names it.
    ``"6n"``
        ``6N`` only: the attention products are ignored (a lower bound that undercounts long
        sequences).  Attention-shape arguments, if given, are not used.

    ``N`` is whatever parameter count is passed (PaLM uses non-embedding parameters in practice);
    report it beside the convention.

    Parameters
    ----------
    n_params
        Parameter count ``N`` (scalar or array).
    convention
        ``"palm"``, ``"megatron"`` or ``"6n"``.
    n_layers, n_heads, head_dim, seq_len
        ``L``, ``H``, ``Q`` and ``T``; required by ``"palm"`` and ``"megatron"``.
    causal
        Only for ``"megatron"`` (default True); ``"palm"`` refuses True.

    Returns
    -------
    float or numpy.ndarray
        FLOPs per token.

    Examples
    --------
    >>> model_flops_per_token(1e9, convention="palm", n_layers=2, n_heads=4, head_dim=8, seq_len=16)
    6000012288.0
    >>> model_flops_per_token(1e9, convention="megatron", n_layers=2, n_heads=4, head_dim=8, seq_len=16)
    6000006144.0
    """
    n = checked_values("n_params", n_params, positive=True)
    if convention not in FLOP_CONVENTIONS:
        raise DomainError(f"convention must be one of {FLOP_CONVENTIONS}; got {convention!r}")
    dense = 6.0 * n
    if convention == "6n":
        if causal:
            raise DomainError("the '6n' convention has no attention term to halve; causal does not apply")
        return scalar_or_array(dense)
    shape = {"n_layers": n_layers, "n_heads": n_heads, "head_dim": head_dim, "seq_len": seq_len}
    missing = [k for k, v in shape.items() if v is None]
    if missing:
        raise DomainError(f"convention {convention!r} counts attention and needs {missing}; "
                          "use convention='6n' to count parameter FLOPs only")
    dims = [checked_counts(k, v) for k, v in shape.items()]
    attention_full = 12.0 * dims[0] * dims[1] * dims[2] * dims[3]
    if convention == "palm":
        if causal:
            raise DomainError("the PaLM convention counts the full T x T attention matrix and does not "
                              "halve it for causal masking; use convention='megatron' for that")
        return scalar_or_array(dense + attention_full)
    halve = True if causal is None else bool(causal)
    return scalar_or_array(dense + (0.5 if halve else 1.0) * attention_full)


def flop_convention_label(convention: FlopConvention, *, causal: bool | None = None) -> str:
    """Return the short name of a FLOP-counting convention used in convention labels.

    Parameters
    ----------
    convention
        ``"palm"``, ``"megatron"`` or ``"6n"``.
    causal
        As in :func:`model_flops_per_token`.

    Returns
    -------
    str
        ``"PaLM 6N+12LHQT"``, ``"Megatron causal 6N+6LHQT"``, ``"Megatron full 6N+12LHQT"`` or
        ``"6N"``.
    """
    if convention == "palm":
        if causal:
            raise DomainError("the PaLM convention does not halve attention for causal masking")
        return "PaLM 6N+12LHQT"
    if convention == "megatron":
        return "Megatron causal 6N+6LHQT" if causal in (None, True) else "Megatron full 6N+12LHQT"
    if convention == "6n":
        return "6N"
    raise DomainError(f"convention must be one of {FLOP_CONVENTIONS}; got {convention!r}")


# ---------------------------------------------------------------------------------------------------
# MFU and HFU (equation 3)
# ---------------------------------------------------------------------------------------------------

_MFU_HINT = ("the useful FLOP count is too large (hardware FLOPs with recomputation counted, a "
             "convention that overcounts, tokens counted globally against a per-device peak) or the "
             "peak is too small (sparse vs dense datasheet figure, wrong precision, per-node peak, "
             "too few devices); check the FLOP count and the peak")


def peak_work_flops(devices: ArrayLike, peak_flops_per_device: ArrayLike,
                    step_time_s: ArrayLike) -> FloatOrArray:
    """FLOPs the devices could execute at peak in one step's wall time: ``N R_peak T_step``.

    Parameters
    ----------
    devices
        Accelerators in the job, ``N``.
    peak_flops_per_device
        Per-device dense peak rate in FLOP/s, ``R_peak``.
    step_time_s
        Wall-clock duration of one retained step, seconds.

    Returns
    -------
    float or numpy.ndarray
        Peak work in FLOPs.
    """
    n = checked_counts("devices", devices)
    peak = checked_values("peak_flops_per_device", peak_flops_per_device, positive=True)
    t = checked_values("step_time_s", step_time_s, positive=True)
    return scalar_or_array(n * peak * t)


def mfu(useful_flops_per_step: ArrayLike, devices: ArrayLike, peak_flops_per_device: ArrayLike,
        step_time_s: ArrayLike, *, convention: object = None) -> FloatOrArray:
    """Model FLOPs utilization, which is program goodput under the arithmetic ideal (equation 3).

    ``MFU = F_useful / (N R_peak T_step)``.  It equals program goodput only when ``step_time_s``
    is the time of *retained* steps with input waits already carved out, and ``F_useful`` is the
    model's required work fixed before compilation (no recomputation, no padding).

    Parameters
    ----------
    useful_flops_per_step
        Required model FLOPs of one step, summed over all devices, ``F_useful``.
    devices
        Accelerators the step runs on, ``N``.
    peak_flops_per_device
        Per-device dense peak in FLOP/s.
    step_time_s
        Wall-clock time of the step, seconds.
    convention
        The convention the numbers follow (a :class:`ProgramGoodputConvention` or its label),
        named in the error when the result exceeds one.

    Returns
    -------
    float or numpy.ndarray
        MFU in [0, 1].  A value above one raises :class:`UtilizationAboveOneError`: the FLOP
        count, the peak or its precision is wrong (FP8 work against a BF16 peak, the model's
        maximum sequence length instead of the training one).

    Examples
    --------
    >>> round(mfu(14.9e15, 128, 989e12, 0.245), 3)
    0.48
    """
    flops = checked_values("useful_flops_per_step", useful_flops_per_step, nonnegative=True)
    work = np.asarray(peak_work_flops(devices, peak_flops_per_device, step_time_s))
    return scalar_or_array(_refuse_above_one("MFU", flops / work, _MFU_HINT, convention))


def mfu_from_throughput(tokens_per_s: ArrayLike, flops_per_token: ArrayLike, devices: ArrayLike,
                        peak_flops_per_device: ArrayLike) -> FloatOrArray:
    """MFU from a job's token throughput: ``tokens/s x FLOPs/token / (N R_peak)``.

    Parameters
    ----------
    tokens_per_s
        Tokens the whole job processes per second of retained step time.
    flops_per_token
        Required FLOPs per token (see :func:`model_flops_per_token`).
    devices
        Accelerators in the job.
    peak_flops_per_device
        Per-device dense peak, FLOP/s.

    Returns
    -------
    float or numpy.ndarray
        MFU in [0, 1].
    """
    rate = checked_values("tokens_per_s", tokens_per_s, nonnegative=True)
    per_token = checked_values("flops_per_token", flops_per_token, nonnegative=True)
    n = checked_counts("devices", devices)
    peak = checked_values("peak_flops_per_device", peak_flops_per_device, positive=True)
    return scalar_or_array(at_most_one("MFU", rate * per_token / (n * peak), _MFU_HINT))


def hfu(useful_flops_per_step: ArrayLike, recompute_flops_per_step: ArrayLike, devices: ArrayLike,
        peak_flops_per_device: ArrayLike, step_time_s: ArrayLike) -> FloatOrArray:
    """Hardware FLOPs utilization: all executed FLOPs, recomputation included, over peak work.

    ``HFU - MFU`` is the share of peak work spent recomputing activations.  That gap is a program
    goodput *loss* even when recomputation is what lets the layout fit in memory; HFU is a
    diagnostic beside MFU, never the program goodput itself.

    Parameters
    ----------
    useful_flops_per_step
        Required model FLOPs of one step (the MFU numerator).
    recompute_flops_per_step
        FLOPs executed again to rematerialize activations in that step.
    devices, peak_flops_per_device, step_time_s
        As in :func:`mfu`.

    Returns
    -------
    float or numpy.ndarray
        HFU in [0, 1].
    """
    useful = checked_values("useful_flops_per_step", useful_flops_per_step, nonnegative=True)
    extra = checked_values("recompute_flops_per_step", recompute_flops_per_step, nonnegative=True)
    work = np.asarray(peak_work_flops(devices, peak_flops_per_device, step_time_s))
    return scalar_or_array(at_most_one("HFU", (useful + extra) / work, _MFU_HINT))


def equivalent_devices_at_peak(devices: ArrayLike, mfu_gain: ArrayLike) -> FloatOrArray:
    """Express an MFU change as devices running at peak: ``N x delta MFU``.

    Parameters
    ----------
    devices
        Identical devices the MFU applies to.
    mfu_gain
        Change in MFU as a fraction (0.01 is one percentage point); negative for a loss.

    Returns
    -------
    float or numpy.ndarray
        Equivalent devices at peak (negative for a loss).

    Examples
    --------
    >>> equivalent_devices_at_peak(10_000, 0.01)
    100.0
    """
    n = checked_counts("devices", devices)
    gain = checked_values("mfu_gain", mfu_gain)
    bad = np.abs(gain) > 1.0
    if bad.any():
        raise DomainError(f"mfu_gain is a change in a fraction and must lie in [-1, 1]; got "
                          f"{first_bad(gain, bad)!r} (pass 0.01 for one percentage point)")
    return scalar_or_array(n * gain)


# ---------------------------------------------------------------------------------------------------
# Scaling efficiency and the double-scaling rule
# ---------------------------------------------------------------------------------------------------


def scaling_efficiency(node_step_s: ArrayLike, fleet_step_s: ArrayLike) -> FloatOrArray:
    """Scaling efficiency referenced to one node: ``T_node / T_fleet`` at equal per-device work.

    Parameters
    ----------
    node_step_s
        Step time of the single-node baseline carrying the same per-device work, seconds.
    fleet_step_s
        Step time at fleet scale, seconds.

    Returns
    -------
    float or numpy.ndarray
        Efficiency in (0, 1]; ``1 - efficiency`` is the share of the fleet step spent beyond the
        node baseline.
    """
    node = checked_values("node_step_s", node_step_s, positive=True)
    fleet = checked_values("fleet_step_s", fleet_step_s, positive=True)
    return scalar_or_array(at_most_one(
        "scaling efficiency", node / fleet,
        "the fleet step is shorter than the node step; with equal per-device work that cannot happen, "
        "so the node baseline probably carries different per-device work"))


def scaling_efficiency_from_mfu(node_mfu: ArrayLike, fleet_mfu: ArrayLike) -> FloatOrArray:
    """Scaling efficiency as the MFU ratio ``MFU_fleet / MFU_node`` (equal per-device work).

    With equal per-device work this equals :func:`scaling_efficiency` of the two step times.

    Parameters
    ----------
    node_mfu
        MFU of the single-node baseline.
    fleet_mfu
        MFU of the same work per device at fleet scale.

    Returns
    -------
    float or numpy.ndarray
        Efficiency in (0, 1].
    """
    node = checked_values("node_mfu", node_mfu, fraction=True)
    fleet = checked_values("fleet_mfu", fleet_mfu, fraction=True)
    if (node == 0.0).any():
        raise DomainError("node_mfu is 0; the ratio is undefined")
    return scalar_or_array(at_most_one("scaling efficiency", fleet / node,
                             "fleet MFU above node MFU: the two configurations do not carry the same "
                             "per-device work"))


def fleet_mfu_from_node(node_mfu: ArrayLike, scaling_eff: ArrayLike) -> FloatOrArray:
    """Fleet MFU from the node baseline: ``MFU_node x efficiency`` (never ``MFU_fleet x efficiency``).

    The first argument must be the *single-node* MFU.  A fleet MFU already contains the scaling
    loss; multiplying it by the scaling efficiency charges that loss twice (rule 31).  When it is
    not obvious which MFU a caller holds, use :func:`program_goodput_from_mfu`, which takes both by
    name and refuses the double-scaled product.

    Parameters
    ----------
    node_mfu
        MFU of the single-node baseline.
    scaling_eff
        Node-referenced scaling efficiency, :func:`scaling_efficiency`.

    Returns
    -------
    float or numpy.ndarray
        Fleet MFU, which over retained steps is the job's program goodput.
    """
    node = checked_values("node_mfu", node_mfu, fraction=True)
    eff = checked_values("scaling_eff", scaling_eff, fraction=True)
    return scalar_or_array(node * eff)


def program_goodput_from_mfu(*, fleet_mfu: float | None = None, node_mfu: float | None = None,
                             scaling_eff: float | None = None, consistency_abs: float = 0.01) -> float:
    """Program goodput from MFU figures, by either valid route and never the double-scaled one.

    Accepted routes (rule 31):

    * ``fleet_mfu`` alone -- the fleet MFU of the retained steps *is* the program goodput;
    * ``node_mfu`` and ``scaling_eff`` -- their product is the fleet MFU;
    * all three -- the fleet MFU is returned after checking that the node route reproduces it
      within ``consistency_abs`` (otherwise per-device work differed between the two runs).

    Refused: ``fleet_mfu`` with ``scaling_eff`` and no node baseline, which can only mean scaling
    the fleet MFU a second time; ``node_mfu`` alone, which omits the scaling loss.

    Parameters
    ----------
    fleet_mfu
        MFU of the job's retained steps at fleet scale.
    node_mfu
        MFU of the single-node baseline with equal per-device work.
    scaling_eff
        Node-referenced scaling efficiency.
    consistency_abs
        Allowed absolute difference between ``fleet_mfu`` and ``node_mfu x scaling_eff``.

    Returns
    -------
    float
        Program goodput under the arithmetic ideal.

    Examples
    --------
    >>> round(program_goodput_from_mfu(node_mfu=0.65, scaling_eff=0.74), 3)
    0.481
    """
    fleet = None if fleet_mfu is None else float(checked_values("fleet_mfu", fleet_mfu, fraction=True))
    node = None if node_mfu is None else float(checked_values("node_mfu", node_mfu, fraction=True))
    eff = None if scaling_eff is None else float(checked_values("scaling_eff", scaling_eff, fraction=True))
    tol = float(checked_values("consistency_abs", consistency_abs, nonnegative=True))
    if fleet is not None and eff is not None and node is None:
        raise DomainError(
            f"refusing fleet_mfu x scaling_eff ({fleet:g} x {eff:g} = {fleet * eff:.3g}): the fleet MFU "
            "already contains the scaling loss, so this charges it twice (rule 31). Report the fleet "
            "MFU, or the node MFU x scaling efficiency"
        )
    if fleet is not None:
        if node is not None and eff is not None and abs(node * eff - fleet) > tol:
            raise DomainError(
                f"node_mfu x scaling_eff = {node * eff:.4g} does not reproduce fleet_mfu = {fleet:.4g} "
                f"(tolerance {tol:g}): the node baseline and the fleet run do not carry the same "
                "per-device work, or the efficiency was computed from different runs"
            )
        return fleet
    if node is None:
        raise DomainError("give fleet_mfu, or node_mfu together with scaling_eff")
    if eff is None:
        raise DomainError("node_mfu alone is not the job's program goodput: it omits the loss to "
                          "scale; pass scaling_eff (node step / fleet step) as well")
    return node * eff


# ---------------------------------------------------------------------------------------------------
# The bandwidth ideal: decode floor and MBU
# ---------------------------------------------------------------------------------------------------

MbuConvention = Literal["weights-only", "weights+kv"]


@dataclass(frozen=True)
class DecodeFloor:
    """The bandwidth floor of one decode step and the convention it was computed under.

    Attributes
    ----------
    floor_s
        Minimum step time: required bytes per device over peak HBM bandwidth, seconds.
    convention
        ``"weights-only"`` (no KV-cache bytes in the floor) or ``"weights+kv"``.
    weight_bytes, kv_cache_bytes
        Required bytes of the whole replica per step (summed over devices).
    devices
        Devices the replica is sharded over (bytes are assumed evenly sharded).
    hbm_bytes_per_s
        Per-device peak HBM bandwidth.
    """

    floor_s: float
    convention: MbuConvention
    weight_bytes: float
    kv_cache_bytes: float
    devices: int
    hbm_bytes_per_s: float

    @property
    def bytes_per_device(self) -> float:
        """Required bytes each device streams per step."""
        return (self.weight_bytes + self.kv_cache_bytes) / self.devices

    def mbu(self, measured_step_s: ArrayLike) -> FloatOrArray:
        """MBU of measured steps against this floor; see :func:`mbu`."""
        return mbu(self.floor_s, measured_step_s)


def decode_floor(n_params: float, bytes_per_param: float, devices: int, hbm_bytes_per_s: float,
                 kv_cache_bytes: float = 0.0) -> DecodeFloor:
    """Bandwidth floor of a decode step with its convention named.

    ``T_floor = (N b + KV) / devices / BW``: every weight (and, under ``"weights+kv"``, every
    KV-cache byte the step reads) must cross HBM once per step, spread evenly over the devices of
    the replica.  The floor does not depend on the peak arithmetic rate.

    Parameters
    ----------
    n_params
        Parameters of the model, ``N``.
    bytes_per_param
        Bytes per stored parameter (2 for BF16/FP16, 1 for 8-bit weights).
    devices
        Devices the replica's weights are sharded over.
    hbm_bytes_per_s
        Per-device peak HBM bandwidth, bytes/s.
    kv_cache_bytes
        KV-cache bytes the whole replica reads in the step; 0 gives the weights-only floor.

    Returns
    -------
    DecodeFloor
        Floor time and its convention.
    """
    n = float(checked_values("n_params", n_params, positive=True))
    b = float(checked_values("bytes_per_param", bytes_per_param, positive=True))
    d = int(checked_counts("devices", devices))
    bw = float(checked_values("hbm_bytes_per_s", hbm_bytes_per_s, positive=True))
    kv = float(checked_values("kv_cache_bytes", kv_cache_bytes, nonnegative=True))
    weights = n * b
    return DecodeFloor(floor_s=(weights + kv) / d / bw,
                       convention="weights+kv" if kv > 0.0 else "weights-only",
                       weight_bytes=weights, kv_cache_bytes=kv, devices=d, hbm_bytes_per_s=bw)


def decode_floor_s(n_params: float, bytes_per_param: float, devices: int, hbm_bytes_per_s: float,
                   kv_cache_bytes: float = 0.0) -> float:
    """Bandwidth floor of a decode step in seconds; see :func:`decode_floor` for the convention.

    Parameters
    ----------
    n_params, bytes_per_param, devices, hbm_bytes_per_s, kv_cache_bytes
        As in :func:`decode_floor`; ``kv_cache_bytes=0`` is the weights-only convention.

    Returns
    -------
    float
        Floor time, seconds.

    Examples
    --------
    >>> round(decode_floor_s(70e9, 2, 8, 3.35e12) * 1e3, 2)
    5.22
    """
    return decode_floor(n_params, bytes_per_param, devices, hbm_bytes_per_s, kv_cache_bytes).floor_s


def mbu(floor_s: ArrayLike, measured_step_s: ArrayLike, *, convention: object = None) -> FloatOrArray:
    """Model bandwidth utilization: ``T_floor / T_measured``, program goodput under the bandwidth ideal.

    Equivalently, achieved rate of required bytes over peak bandwidth.  Name the floor's
    convention (weights-only or weights+KV) with the result; KV reads, per-layer AllReduce and host
    dispatch lower a weights-only MBU.

    Parameters
    ----------
    floor_s
        Bandwidth floor of the step, seconds (:func:`decode_floor_s`).
    measured_step_s
        Measured step time, seconds.
    convention
        The floor's convention (:func:`mbu_convention`), named in the error above one.

    Returns
    -------
    float or numpy.ndarray
        MBU in (0, 1]; a measured step faster than its floor raises
        :class:`UtilizationAboveOneError`.
    """
    floor = checked_values("floor_s", floor_s, positive=True)
    measured = checked_values("measured_step_s", measured_step_s, positive=True)
    return scalar_or_array(_refuse_above_one(
        "MBU", floor / measured,
        "the measured step is faster than its bandwidth floor; the floor counts more bytes than the "
        "step must move (wrong bytes per parameter or sharding) or uses too low a bandwidth", convention))


def mfu_at_floor(n_params: float, devices: int, floor_s: float, peak_flops_per_device: float, *,
                 flops_per_param_per_token: float = 2.0, tokens_per_step: float = 1.0) -> float:
    """MFU a decode step would reach if it ran exactly at its bandwidth floor.

    Decode does about two FLOPs per parameter per generated token (one multiply-add), so
    ``MFU = (2 N tokens / devices) / T_floor / R_peak``.  Doubling ``R_peak`` halves this and
    leaves the floor unchanged -- the reason MFU is uninformative for bandwidth-bound decode.

    Parameters
    ----------
    n_params
        Parameters of the model.
    devices
        Devices the replica is sharded over.
    floor_s
        Bandwidth floor, seconds.
    peak_flops_per_device
        Per-device dense peak, FLOP/s.
    flops_per_param_per_token
        FLOPs per parameter per generated token (2 for a dense forward pass).
    tokens_per_step
        Tokens generated per step (the batch size for single-token decode).

    Returns
    -------
    float
        MFU at the floor.
    """
    n = float(checked_values("n_params", n_params, positive=True))
    d = float(checked_counts("devices", devices))
    floor = float(checked_values("floor_s", floor_s, positive=True))
    peak = float(checked_values("peak_flops_per_device", peak_flops_per_device, positive=True))
    per = float(checked_values("flops_per_param_per_token", flops_per_param_per_token, positive=True))
    tokens = float(checked_values("tokens_per_step", tokens_per_step, positive=True))
    return float(at_most_one("MFU at the floor", np.asarray(per * n * tokens / d / floor / peak),
                              "the step would be compute-bound at this batch; the bandwidth floor is "
                              "not its ideal"))


# ---------------------------------------------------------------------------------------------------
# Conventions and the no-averaging guard
# ---------------------------------------------------------------------------------------------------


#: How each part of a convention's provenance field starts (what it states the source of).
_PROVENANCE_HEADS: tuple[str, ...] = ("seq_len", "step time", "tokens", "FLOPs")


@dataclass(frozen=True)
class ProgramGoodputConvention:
    """Both choices behind a program-goodput number: the ideal with its counting rule, and the peak.

    Its string form is the label a :class:`fleetlib.accounting.Factor` carries, three fields
    separated by ``", "``: ``"MFU, PaLM 6N+12LHQT, H100 SXM dense BF16 989 TFLOP/s"`` or
    ``"MBU, weights-only floor, H100 SXM HBM 3.35 TB/s"``.

    Attributes
    ----------
    ideal
        ``"MFU"`` (arithmetic ideal) or ``"MBU"`` (bandwidth floor).
    counting
        How the required work is counted: a FLOP convention (:func:`flop_convention_label`) or
        the floor's byte convention.
    reference
        The peak the work is divided by, with the device named.
    """

    ideal: Ideal
    counting: str
    reference: str
    provenance: str = ""

    def __post_init__(self) -> None:
        if self.ideal not in ("MFU", "MBU"):
            raise DomainError(f"ideal must be 'MFU' or 'MBU'; got {self.ideal!r}")
        for name in ("counting", "reference"):
            text = getattr(self, name)
            if not isinstance(text, str) or not text.strip() or "," in text:
                raise DomainError(f"convention {name} must be a non-empty string without commas; "
                                  f"got {text!r}")
        if not isinstance(self.provenance, str) or "," in self.provenance:
            raise DomainError(f"convention provenance must be a string without commas; "
                              f"got {self.provenance!r}")
        parts = [p.strip() for p in self.provenance.split(";")] if self.provenance.strip() else []
        odd = [p for p in parts if not p.startswith(_PROVENANCE_HEADS)]
        if odd:
            raise DomainError(f"convention provenance states sources as '; '-separated parts starting with "
                              f"{list(_PROVENANCE_HEADS)}; got {odd[0]!r}")

    @property
    def label(self) -> str:
        """The convention as one string (the provenance, when stated, is its fourth field)."""
        base = f"{self.ideal}, {self.counting}, {self.reference}"
        return f"{base}, {self.provenance}" if self.provenance else base

    def with_provenance(self, provenance: str) -> ProgramGoodputConvention:
        """Return this convention stating where its inputs came from (sequence length, step time).

        Parameters
        ----------
        provenance
            e.g. ``"seq_len 4096 from the training config; step time from 12 traced step windows"``
            (no commas).
        """
        return ProgramGoodputConvention(self.ideal, self.counting, self.reference, provenance)

    def __str__(self) -> str:
        return self.label

    @classmethod
    def parse(cls, label: str | ProgramGoodputConvention) -> ProgramGoodputConvention:
        """Read a convention back from its label (or return it unchanged).

        Parameters
        ----------
        label
            ``"IDEAL, counting, reference"``.

        Returns
        -------
        ProgramGoodputConvention
            The parsed convention.
        """
        if isinstance(label, ProgramGoodputConvention):
            return label
        parts = [p.strip() for p in str(label).split(",")]
        if len(parts) not in (3, 4):
            raise DomainError(f"a program-goodput convention has three comma-separated fields "
                              f"(ideal, counting, peak) and optionally a fourth (provenance); got {label!r}")
        return cls(parts[0], parts[1], parts[2], parts[3] if len(parts) == 4 else "")  # type: ignore[arg-type]


def mfu_convention(flop_convention: FlopConvention, peak: PeakRate | str, *,
                   causal: bool | None = None) -> ProgramGoodputConvention:
    """Convention of an MFU-based program goodput: FLOP counting rule and arithmetic peak.

    Parameters
    ----------
    flop_convention
        ``"palm"``, ``"megatron"`` or ``"6n"``.
    peak
        A :class:`PeakRate` (its arithmetic label is used) or a label string.
    causal
        As in :func:`model_flops_per_token`.

    Returns
    -------
    ProgramGoodputConvention
        e.g. ``MFU, PaLM 6N+12LHQT, H100 SXM dense BF16 989 TFLOP/s``.

    Examples
    --------
    >>> str(mfu_convention("palm", peak_rate("H100 SXM")))
    'MFU, PaLM 6N+12LHQT, H100 SXM dense BF16 989 TFLOP/s'
    """
    return ProgramGoodputConvention("MFU", flop_convention_label(flop_convention, causal=causal),
                                    peak_label(peak, bandwidth=False))


def mbu_convention(peak: PeakRate | str, *, include_kv_cache: bool) -> ProgramGoodputConvention:
    """Convention of an MBU-based program goodput: floor byte rule and bandwidth peak.

    Parameters
    ----------
    peak
        A :class:`PeakRate` (its bandwidth label is used) or a label string.
    include_kv_cache
        True when the floor counts KV-cache reads as well as weights.

    Returns
    -------
    ProgramGoodputConvention
        e.g. ``MBU, weights-only floor, H100 SXM HBM 3.35 TB/s``.
    """
    counting = "weights+KV floor" if include_kv_cache else "weights-only floor"
    return ProgramGoodputConvention("MBU", counting, peak_label(peak, bandwidth=True))


@dataclass(frozen=True)
class CombinedProgramGoodput:
    """Program goodput of several rows that share one ideal and one counting rule.

    Attributes
    ----------
    value
        ``sum(P_i t_i) / sum(t_i)`` = total ideal time over total retained step time.
    ideal, counting
        The shared ideal and counting rule.
    references
        The peaks the rows were divided by (each row against its own device's peak).
    retained_s
        Total retained step time the rows cover, seconds.
    rows
        Number of rows combined.
    """

    value: float
    ideal: str
    counting: str
    references: tuple[str, ...]
    retained_s: float
    rows: int

    @property
    def convention(self) -> str:
        """Label of the combined figure."""
        ref = self.references[0] if len(self.references) == 1 else "each row against its own device peak"
        return f"{self.ideal}, {self.counting}, {ref}"


def _conventions(conventions: object, n: int) -> list[ProgramGoodputConvention]:
    if isinstance(conventions, (str, ProgramGoodputConvention)):
        return [ProgramGoodputConvention.parse(conventions)] * n
    items = list(conventions)  # type: ignore[call-overload]
    if len(items) != n:
        raise DomainError(f"got {n} program-goodput values but {len(items)} conventions")
    cache: dict[object, ProgramGoodputConvention] = {}
    out = []
    for c in items:
        key = c if isinstance(c, ProgramGoodputConvention) else str(c)
        if key not in cache:
            cache[key] = ProgramGoodputConvention.parse(c)
        out.append(cache[key])
    return out


def combine_program_rows(values: ArrayLike, retained_s: ArrayLike,
                         conventions: Sequence[str | ProgramGoodputConvention] | str
                         | ProgramGoodputConvention) -> CombinedProgramGoodput:
    """Combine program goodput of several jobs or replicas -- only when they share one ideal.

    The combination weights each row by the retained step time it covers, so it equals the total
    ideal time over the total retained time.  Rows measured against different ideals (MFU against
    peak arithmetic, MBU against peak bandwidth) divide by different physical resources and are
    refused (rule 32): keep one row per workload class (:func:`program_rows_by_ideal`) or restate
    every class against the arithmetic ideal.  Rows under different FLOP or byte counting rules
    are refused too, since the conventions differ by up to 2x on attention.  Different peaks
    (different accelerator types, each against its own peak) are allowed.

    Parameters
    ----------
    values
        Program goodput of each row, fractions in [0, 1].
    retained_s
        Retained step time each row covers, seconds (> 0).
    conventions
        One convention for all rows, or one per row (labels or objects).

    Returns
    -------
    CombinedProgramGoodput
        The time-weighted program goodput with its convention.
    """
    v = np.atleast_1d(checked_values("program goodput", values, fraction=True))
    w = np.atleast_1d(checked_values("retained_s", retained_s, positive=True))
    if v.ndim != 1 or w.shape != v.shape:
        raise DomainError(f"values and retained_s must be 1-d and of equal length; got shapes "
                          f"{v.shape} and {w.shape}")
    convs = _conventions(conventions, v.size)
    ideals = sorted({c.ideal for c in convs})
    if len(ideals) > 1:
        raise DomainError(
            "refusing to average MFU-based and MBU-based program goodput (rule 32): the arithmetic "
            "ideal and the bandwidth floor divide by different resources. Keep one row per workload "
            "class (program_rows_by_ideal) or restate every class against the arithmetic ideal"
        )
    countings = sorted({c.counting for c in convs})
    if len(countings) > 1:
        raise DomainError(f"refusing to combine rows counted under different conventions {countings}; "
                          "recount them under one convention first")
    refs = tuple(dict.fromkeys(c.reference for c in convs))
    total = float(w.sum())
    return CombinedProgramGoodput(value=float((v * w).sum() / total), ideal=ideals[0],
                                  counting=countings[0], references=refs, retained_s=total,
                                  rows=int(v.size))


def program_rows_by_ideal(frame: pd.DataFrame, *, value_col: str = "program_goodput",
                          retained_col: str = "retained_s",
                          convention_col: str = "convention") -> pd.DataFrame:
    """Keep one program-goodput row per (ideal, counting rule): the fleet report's per-class view.

    Parameters
    ----------
    frame
        One row per job or replica with its program goodput, retained time and convention label.
    value_col, retained_col, convention_col
        Column names.

    Returns
    -------
    pandas.DataFrame
        Columns ``ideal, counting, program_goodput, retained_s, rows, references``; MFU and MBU
        rows never share a line.
    """
    for col in (value_col, retained_col, convention_col):
        if col not in frame.columns:
            raise DomainError(f"column {col!r} is missing; have {list(frame.columns)}")
    v = checked_values(value_col, frame[value_col].to_numpy(), fraction=True)
    w = checked_values(retained_col, frame[retained_col].to_numpy(), positive=True)
    labels = frame[convention_col].astype(str)
    parsed = {lab: ProgramGoodputConvention.parse(lab) for lab in labels.unique()}
    work = pd.DataFrame({
        "ideal": labels.map(lambda s: parsed[s].ideal).to_numpy(),
        "counting": labels.map(lambda s: parsed[s].counting).to_numpy(),
        "reference": labels.map(lambda s: parsed[s].reference).to_numpy(),
        "ideal_s": v * w,
        "retained_s": w,
    })
    grouped = work.groupby(["ideal", "counting"], sort=True)
    out = grouped[["ideal_s", "retained_s"]].sum()
    out["rows"] = grouped.size()
    out["references"] = grouped["reference"].agg(lambda s: "; ".join(dict.fromkeys(s)))
    out["program_goodput"] = out["ideal_s"] / out["retained_s"]
    return out.reset_index()[["ideal", "counting", "program_goodput", "retained_s", "rows", "references"]]
