"""Roofline placement of kernels: arithmetic intensity, ridge point, attainable rate and regime.

The roofline bounds a kernel of arithmetic intensity ``I`` (FLOP per byte across a named memory
boundary, usually HBM) by ``min(R_peak, I x BW)``; the ridge ``R_peak / BW`` separates the
bandwidth slope from the compute plateau.  It is a *diagnostic* for individual kernels: program
goodput itself is measured against the whole program's ideal (:mod:`fleetlib.program.flops`),
never against per-kernel roofline ceilings, which would penalize a rewrite that executes fewer
operations at lower utilization while finishing sooner.

All functions are vectorised: pass one value per kernel as numpy arrays.  The FLOP convention and
memory boundary of a measured point must match the ceilings it is compared with.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from fleetlib.program._arrays import ArrayLike, FloatOrArray, at_most_one, checked_values, scalar_or_array
from fleetlib.program.classify import dtype_size_bytes
from fleetlib.program.flops import PeakRate
from fleetlib.program.peaks import PEAK_RATES
from fleetlib.quality import DomainError

__all__ = [
    "BAD_SHAPES",
    "COMPUTE_ROOF_KERNEL_PATTERN",
    "DEFAULT_RIDGE_FLOP_PER_BYTE",
    "DIAGNOSES",
    "GEMM_KERNEL_PATTERN",
    "NO_RULE",
    "OP_COLUMNS",
    "OP_FLOP_RULES",
    "REGIMES",
    "REGIME_LABELS",
    "ROOFLINE_KERNEL_COLUMNS",
    "UNKNOWN_DTYPE",
    "RooflinePlacement",
    "arithmetic_intensity",
    "attainable_flops",
    "bandwidth_fraction",
    "bandwidth_headroom",
    "compute_fraction",
    "gemm_time_split",
    "kernel_roof",
    "kernel_roofline",
    "measured_intensity",
    "name_matches",
    "op_flops_bytes",
    "place_kernels",
    "ridge_point",
    "roofline_diagnosis",
    "roofline_placement",
    "roofline_regime",
    "shaped_op_kernels",
]

#: Labels returned by :func:`roofline_regime`.
REGIMES: tuple[str, str] = ("memory-bound", "compute-bound")

#: Labels returned by :func:`roofline_diagnosis`, one per regime of a measured kernel.
DIAGNOSES: tuple[str, str, str] = ("below both ceilings", "near bandwidth ceiling", "near compute ceiling")


def arithmetic_intensity(flops: ArrayLike, n_bytes: ArrayLike) -> FloatOrArray:
    """Arithmetic intensity: FLOPs per byte moved across one memory boundary.

    Parameters
    ----------
    flops
        Floating-point operations executed (or required, for algorithmic intensity).
    n_bytes
        Bytes crossing the boundary (> 0).

    Returns
    -------
    float or numpy.ndarray
        Intensity in FLOP/byte.
    """
    f = checked_values("flops", flops, nonnegative=True)
    b = checked_values("n_bytes", n_bytes, positive=True)
    return scalar_or_array(f / b)


def measured_intensity(achieved_flops_per_s: ArrayLike, achieved_bytes_per_s: ArrayLike) -> FloatOrArray:
    """Measured arithmetic intensity from a kernel's achieved rates (counters over the same interval).

    Parameters
    ----------
    achieved_flops_per_s
        Achieved arithmetic rate, FLOP/s.
    achieved_bytes_per_s
        Achieved traffic across the named boundary, bytes/s (> 0).

    Returns
    -------
    float or numpy.ndarray
        Intensity in FLOP/byte; below the algorithmic estimate it exposes traffic the algorithm did
        not require.

    Examples
    --------
    >>> round(measured_intensity(5e12, 2.8e12), 2)
    1.79
    """
    f = checked_values("achieved_flops_per_s", achieved_flops_per_s, nonnegative=True)
    b = checked_values("achieved_bytes_per_s", achieved_bytes_per_s, positive=True)
    return scalar_or_array(f / b)


def ridge_point(peak_flops_per_s: ArrayLike, peak_bytes_per_s: ArrayLike) -> FloatOrArray:
    """Roofline ridge point ``R_peak / BW`` in FLOP/byte.

    Parameters
    ----------
    peak_flops_per_s
        Peak arithmetic rate, FLOP/s.
    peak_bytes_per_s
        Peak bandwidth of the same boundary the intensity is measured on, bytes/s.

    Returns
    -------
    float or numpy.ndarray
        Ridge intensity, FLOP/byte.

    Examples
    --------
    >>> round(ridge_point(989e12, 3.35e12))
    295
    """
    peak = checked_values("peak_flops_per_s", peak_flops_per_s, positive=True)
    bw = checked_values("peak_bytes_per_s", peak_bytes_per_s, positive=True)
    return scalar_or_array(peak / bw)


def attainable_flops(intensity: ArrayLike, peak_flops_per_s: ArrayLike,
                     peak_bytes_per_s: ArrayLike) -> FloatOrArray:
    """Roofline ceiling at an intensity: ``min(R_peak, I x BW)``, in FLOP/s.

    Parameters
    ----------
    intensity
        Arithmetic intensity, FLOP/byte (>= 0); array for many kernels.
    peak_flops_per_s
        Peak arithmetic rate, FLOP/s.
    peak_bytes_per_s
        Peak bandwidth, bytes/s.

    Returns
    -------
    float or numpy.ndarray
        Attainable FLOP/s.
    """
    i = checked_values("intensity", intensity, nonnegative=True)
    peak = checked_values("peak_flops_per_s", peak_flops_per_s, positive=True)
    bw = checked_values("peak_bytes_per_s", peak_bytes_per_s, positive=True)
    return scalar_or_array(np.minimum(peak, i * bw))


def roofline_regime(intensity: ArrayLike, ridge: ArrayLike) -> str | np.ndarray:
    """Which ceiling bounds a kernel: ``"memory-bound"`` below the ridge, ``"compute-bound"`` at or above.

    Parameters
    ----------
    intensity
        Arithmetic intensity, FLOP/byte.
    ridge
        Ridge point, FLOP/byte (:func:`ridge_point`).

    Returns
    -------
    str or numpy.ndarray
        One label per kernel (an array of str for array input).
    """
    i = checked_values("intensity", intensity, nonnegative=True)
    r = checked_values("ridge", ridge, positive=True)
    labels = np.where(i < r, REGIMES[0], REGIMES[1])
    return str(labels) if labels.ndim == 0 else labels


def bandwidth_fraction(achieved_bytes_per_s: ArrayLike, peak_bytes_per_s: ArrayLike) -> FloatOrArray:
    """Achieved bandwidth as a fraction of peak.

    Parameters
    ----------
    achieved_bytes_per_s
        Achieved traffic, bytes/s.
    peak_bytes_per_s
        Peak bandwidth of the same boundary, bytes/s.

    Returns
    -------
    float or numpy.ndarray
        Fraction in [0, 1]; above one is refused (wrong boundary or peak).
    """
    a = checked_values("achieved_bytes_per_s", achieved_bytes_per_s, nonnegative=True)
    p = checked_values("peak_bytes_per_s", peak_bytes_per_s, positive=True)
    return scalar_or_array(at_most_one("bandwidth fraction", a / p,
                             "achieved bandwidth above peak: the counter and the peak describe "
                             "different memory boundaries (e.g. L2 traffic against an HBM peak)"))


def bandwidth_headroom(achieved_bytes_per_s: ArrayLike, peak_bytes_per_s: ArrayLike) -> FloatOrArray:
    """Remaining bandwidth headroom ``1 - achieved/peak``: the most a better access pattern can recover.

    Parameters
    ----------
    achieved_bytes_per_s
        Achieved traffic, bytes/s.
    peak_bytes_per_s
        Peak bandwidth, bytes/s.

    Returns
    -------
    float or numpy.ndarray
        Headroom fraction in [0, 1].
    """
    return scalar_or_array(1.0 - np.asarray(bandwidth_fraction(achieved_bytes_per_s, peak_bytes_per_s)))


def compute_fraction(achieved_flops_per_s: ArrayLike, peak_flops_per_s: ArrayLike) -> FloatOrArray:
    """Achieved arithmetic rate as a fraction of peak.

    Parameters
    ----------
    achieved_flops_per_s
        Achieved rate, FLOP/s.
    peak_flops_per_s
        Peak rate at the kernel's precision, FLOP/s.

    Returns
    -------
    float or numpy.ndarray
        Fraction in [0, 1].
    """
    a = checked_values("achieved_flops_per_s", achieved_flops_per_s, nonnegative=True)
    p = checked_values("peak_flops_per_s", peak_flops_per_s, positive=True)
    return scalar_or_array(at_most_one("compute fraction", a / p,
                             "achieved FLOP/s above peak: the peak is for a different precision or "
                             "a sparse datasheet figure was halved twice"))


def roofline_diagnosis(achieved_flops_per_s: ArrayLike, achieved_bytes_per_s: ArrayLike,
                       peak_flops_per_s: ArrayLike, peak_bytes_per_s: ArrayLike, *,
                       near: float = 0.7) -> str | np.ndarray:
    """Place measured kernels in one of three regimes, each pointing to its own lever.

    * ``"near bandwidth ceiling"`` -- below the ridge and achieving at least ``near`` of the
      attainable rate: only moving fewer bytes (fusion, tiling, narrower formats) helps;
    * ``"near compute ceiling"`` -- at or above the ridge and at least ``near`` of peak: only fewer
      operations or a faster format helps;
    * ``"below both ceilings"`` -- otherwise: an execution inefficiency (dependencies, instruction
      mix, too little parallelism) in how the kernel is written or chosen.

    Parameters
    ----------
    achieved_flops_per_s, achieved_bytes_per_s
        Kernel counters, FLOP/s and bytes/s (> 0).
    peak_flops_per_s, peak_bytes_per_s
        Device ceilings for the same precision and memory boundary.
    near
        Fraction of the attainable rate that counts as near a ceiling, in (0, 1].

    Returns
    -------
    str or numpy.ndarray
        One diagnosis per kernel.
    """
    threshold = float(checked_values("near", near, fraction=True))
    if threshold == 0.0:
        raise DomainError("near must be > 0 (every kernel would be near a ceiling)")
    placement = place_kernels(achieved_flops_per_s, achieved_bytes_per_s, peak_flops_per_s,
                              peak_bytes_per_s)
    ratio = np.asarray(placement.fraction_of_attainable)
    memory = np.asarray(placement.regime) == REGIMES[0]
    labels = np.select([ratio < threshold, memory], [DIAGNOSES[0], DIAGNOSES[1]], default=DIAGNOSES[2])
    return str(labels) if labels.ndim == 0 else labels


@dataclass(frozen=True)
class RooflinePlacement:
    """Roofline quantities of measured kernels (floats for one kernel, arrays for many).

    Attributes
    ----------
    intensity
        Measured arithmetic intensity, FLOP/byte.
    ridge
        Ridge point of the ceilings, FLOP/byte.
    below_ridge_factor
        ``ridge / intensity``: how many times below the ridge the kernel sits (``inf`` at zero
        intensity, < 1 above the ridge).
    regime
        ``"memory-bound"`` or ``"compute-bound"``.
    attainable_flops_per_s
        Roofline ceiling at the measured intensity.
    fraction_of_attainable
        Achieved FLOP/s over the attainable ceiling.
    bandwidth_fraction, bandwidth_headroom
        Achieved bandwidth over peak, and what is left.
    compute_fraction
        Achieved FLOP/s over peak.
    """

    intensity: FloatOrArray
    ridge: FloatOrArray
    below_ridge_factor: FloatOrArray
    regime: str | np.ndarray
    attainable_flops_per_s: FloatOrArray
    fraction_of_attainable: FloatOrArray
    bandwidth_fraction: FloatOrArray
    bandwidth_headroom: FloatOrArray
    compute_fraction: FloatOrArray


def place_kernels(achieved_flops_per_s: ArrayLike, achieved_bytes_per_s: ArrayLike,
                  peak_flops_per_s: ArrayLike, peak_bytes_per_s: ArrayLike) -> RooflinePlacement:
    """Place measured kernels on the roofline from their achieved FLOP and byte rates.

    Parameters
    ----------
    achieved_flops_per_s
        Achieved arithmetic rate of each kernel, FLOP/s.
    achieved_bytes_per_s
        Achieved traffic of each kernel across the named boundary, bytes/s (> 0).
    peak_flops_per_s, peak_bytes_per_s
        Ceilings of the device for the same precision and boundary.

    Returns
    -------
    RooflinePlacement
        Intensity, ridge, regime, ceiling and fractions.
    """
    i = np.asarray(measured_intensity(achieved_flops_per_s, achieved_bytes_per_s))
    ridge = np.asarray(ridge_point(peak_flops_per_s, peak_bytes_per_s))
    ceiling = np.asarray(attainable_flops(i, peak_flops_per_s, peak_bytes_per_s))
    achieved = np.asarray(achieved_flops_per_s, dtype=float)
    with np.errstate(divide="ignore"):
        below = np.where(i > 0.0, ridge / np.where(i > 0.0, i, 1.0), np.inf)
    bw = np.asarray(bandwidth_fraction(achieved_bytes_per_s, peak_bytes_per_s))
    ratio = np.divide(achieved, ceiling, out=np.zeros(np.broadcast(achieved, ceiling).shape),
                      where=ceiling > 0.0)
    frac = at_most_one("fraction of attainable", ratio,
                        "achieved FLOP/s above the roofline ceiling: the counters and the peaks "
                        "describe different precisions or memory boundaries")
    return RooflinePlacement(
        intensity=scalar_or_array(i), ridge=scalar_or_array(ridge), below_ridge_factor=scalar_or_array(below),
        regime=roofline_regime(i, ridge), attainable_flops_per_s=scalar_or_array(ceiling),
        fraction_of_attainable=scalar_or_array(frac), bandwidth_fraction=scalar_or_array(bw),
        bandwidth_headroom=scalar_or_array(1.0 - bw),
        compute_fraction=compute_fraction(achieved_flops_per_s, peak_flops_per_s),
    )


# ===================================================================================================
# Roofline from recorded shapes: FLOPs and bytes per host op, joined to the kernels it launched
# ===================================================================================================
#
# A Kineto trace recorded with ``record_shapes=True`` gives every host op its ``Input Dims`` (one
# shape per argument, ``[]`` for a scalar or None) and ``Input type`` (one dtype name per argument).
# For the matrix-multiply family the arithmetic follows from the shapes alone, so each kernel such an
# op launched can be placed on the roofline from its duration, without hardware counters.

#: Columns :func:`op_flops_bytes` needs from the ops table.
OP_COLUMNS: tuple[str, ...] = ("rank", "external_id", "name", "input_dims", "input_types")

#: Host ops whose FLOPs follow from their input shapes, with the rule used (mult-add = 2 FLOPs).
#: Argument order is PyTorch's: ``mm(A, B)``, ``addmm(bias, A, B, beta, alpha)``, ``bmm(A, B)``,
#: ``baddbmm(C, A, B, beta, alpha)``, ``matmul(A, B)``, ``linear(x, W, bias)``.
OP_FLOP_RULES: dict[str, str] = {
    "aten::mm": "2*m*k*n for A[m,k] @ B[k,n]",
    "aten::addmm": "2*m*k*n + m*n for bias + A[m,k] @ B[k,n] (the bias addition counted once)",
    "aten::bmm": "2*b*m*k*n for A[b,m,k] @ B[b,k,n]",
    "aten::baddbmm": "2*b*m*k*n + b*m*n for C[b,m,n] + A[b,m,k] @ B[b,k,n]",
    "aten::matmul": "2*batch*m*k*n, torch.matmul broadcasting (a 1-D operand is a row or column vector)",
    "aten::linear": "2*rows*in*out (+ rows*out with a bias) for x[..., in] @ W[out, in].T",
}

#: Why an op has no FLOP count (``flops_rule`` of those rows).  Convolutions are left out on purpose:
#: their output size depends on stride, padding and dilation, which ``Input Dims`` does not record.
NO_RULE = "no shape rule for this op"
BAD_SHAPES = "shapes do not fit the rule"
UNKNOWN_DTYPE = "unknown dtype"

#: Kernel names of matrix-multiply kernels (cuBLAS, CUTLASS, rocBLAS / hipBLASLt, Triton matmuls),
#: for kernels that no shaped op claims.
GEMM_KERNEL_PATTERN: str = (r"(?i)gemm|gemv|cutlass|cublas|xmma|hgemm|sgemm|wgmma|rocblas|hipblaslt"
                            r"|matmul|_mm_")

#: Kernel names of kernels on the compute roof without measured or shape-derived intensity: the
#: matrix multiplications of :data:`GEMM_KERNEL_PATTERN` and convolutions (cuDNN, implicit GEMM,
#: Winograd).  Every other compute kernel (elementwise, normalisation, softmax, reductions, optimizer
#: updates) is taken to sit on the bandwidth slope.
COMPUTE_ROOF_KERNEL_PATTERN: str = GEMM_KERNEL_PATTERN + r"|conv|cudnn|winograd|implicit_gemm"

#: Ridge point a shaped kernel's intensity is compared with when the device is not named: the H100
#: SXM's dense BF16 peak over its HBM3 bandwidth (989 TFLOP/s / 3.35 TB/s, about 295 FLOP/byte).
DEFAULT_RIDGE_FLOP_PER_BYTE: float = PEAK_RATES["H100 SXM"].ridge_flop_per_byte

#: Columns added by :func:`kernel_roofline`.
ROOFLINE_KERNEL_COLUMNS: tuple[str, ...] = (
    "op_name", "flops", "bytes_moved", "dtype", "intensity_flop_per_byte", "achieved_flops_per_s",
    "achieved_bytes_per_s",
)

#: The three regimes of a placed kernel (:func:`roofline_placement`), named as in the chapter.
REGIME_LABELS: dict[str, str] = {
    "below both ceilings": "below both ceilings (execution inefficiency)",
    "near bandwidth ceiling": "near the bandwidth ceiling (move fewer bytes)",
    "near compute ceiling": "near the compute ceiling (do fewer operations)",
}


def _parse_json_list(text: object) -> list[Any] | None:
    if isinstance(text, list):
        return text
    if text is None or (isinstance(text, float) and np.isnan(text)) or text is pd.NA:
        return None
    try:
        value = json.loads(str(text))
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, list) else None


def _shape(dims: list[Any], i: int) -> tuple[int, ...] | None:
    if i >= len(dims) or not isinstance(dims[i], list):
        return None
    d = dims[i]
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in d):
        return None
    return tuple(d)


def _n(shape: tuple[int, ...]) -> float:
    return float(np.prod(np.asarray(shape, dtype=float))) if shape else 1.0


def _matmul_out(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[float, tuple[int, ...]] | None:
    """FLOPs and output shape of ``torch.matmul(a, b)`` (broadcast batch), or None when they do not fit."""
    if not a or not b:
        return None
    a2 = (1, a[0]) if len(a) == 1 else a
    b2 = (b[0], 1) if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    k2, n = b2[-2], b2[-1]
    if k != k2:
        return None
    ba, bb = a2[:-2], b2[:-2]
    width = max(len(ba), len(bb))
    ba, bb = (1,) * (width - len(ba)) + ba, (1,) * (width - len(bb)) + bb
    batch: list[int] = []
    for x, y in zip(ba, bb, strict=True):
        if x != y and 1 not in (x, y):
            return None
        batch.append(max(x, y))
    out: tuple[int, ...] = (*batch, *((m,) if len(a) > 1 else ()), *((n,) if len(b) > 1 else ()))
    return 2.0 * _n(tuple(batch)) * m * k * n, out


def _op_rule(name: str, dims: list[Any]) -> tuple[float, tuple[int, ...], list[int]] | None:
    """(FLOPs, output shape, indices of the tensor inputs read) of one op, or None when shapes do not fit."""
    if name == "aten::mm":
        a, b = _shape(dims, 0), _shape(dims, 1)
        if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
            return None
        return 2.0 * a[0] * a[1] * b[1], (a[0], b[1]), [0, 1]
    if name in ("aten::addmm", "aten::baddbmm"):
        c, a, b = _shape(dims, 0), _shape(dims, 1), _shape(dims, 2)
        rank = 2 if name == "aten::addmm" else 3
        if a is None or b is None or c is None or len(a) != rank or len(b) != rank:
            return None
        if a[-1] != b[-2] or (rank == 3 and a[0] != b[0]):
            return None
        out = (a[0], b[1]) if rank == 2 else (a[0], a[1], b[2])
        return 2.0 * _n(a) * b[-1] + _n(out), out, [0, 1, 2]
    if name == "aten::bmm":
        a, b = _shape(dims, 0), _shape(dims, 1)
        if a is None or b is None or len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
            return None
        return 2.0 * _n(a) * b[2], (a[0], a[1], b[2]), [0, 1]
    if name == "aten::matmul":
        a, b = _shape(dims, 0), _shape(dims, 1)
        if a is None or b is None:
            return None
        got = _matmul_out(a, b)
        return None if got is None else (got[0], got[1], [0, 1])
    if name == "aten::linear":
        x, w = _shape(dims, 0), _shape(dims, 1)
        bias = _shape(dims, 2)
        if x is None or w is None or not x or len(w) != 2 or x[-1] != w[1]:
            return None
        rows = _n(x[:-1])
        has_bias = bias is not None and len(bias) >= 1
        if has_bias and bias != (w[0],):
            return None
        out = (*x[:-1], w[0])
        return 2.0 * rows * x[-1] * w[0] + (rows * w[0] if has_bias else 0.0), out, \
            ([0, 1, 2] if has_bias else [0, 1])
    return None  # pragma: no cover - callers pass only names in OP_FLOP_RULES


def op_flops_bytes(ops: pd.DataFrame) -> pd.DataFrame:
    """FLOPs and minimum bytes of every host op whose arithmetic follows from its recorded shapes.

    The rules are :data:`OP_FLOP_RULES` (a multiply-add counts 2 FLOPs).  ``bytes_moved`` is the
    op's *compulsory* traffic: every tensor input read once plus the output written once, each at
    its dtype's size (:func:`fleetlib.program.classify.dtype_size_bytes`; the output takes the
    dtype of the first matrix operand).  Real kernels move at least this much, so an intensity
    computed from it is an upper bound on the kernel's true intensity.

    Ops without a rule (elementwise, reductions, convolutions -- whose output size needs stride and
    padding the trace does not record -- and everything else) get NaN, as do ops whose shapes do
    not fit their rule or whose dtype is unknown: nothing is guessed, and ``flops_rule`` says why.

    Ops nest (``aten::linear`` calls ``aten::addmm``; ``aten::matmul`` calls ``aten::mm``), and both
    levels get a count, so summing this table's ``flops`` double-counts; sum per kernel instead
    (:func:`kernel_roofline` gives each kernel the count of the innermost op that launched it).

    Parameters
    ----------
    ops
        Host-op table with columns :data:`OP_COLUMNS`: ``input_dims`` and ``input_types`` are the
        JSON text of the op's ``Input Dims`` and ``Input type`` lists (missing where the trace did
        not record shapes).

    Returns
    -------
    pandas.DataFrame
        ``ops`` plus ``flops`` and ``bytes_moved`` (float, NaN when unknown), ``dtype`` (the first
        matrix operand's dtype name, or missing) and ``flops_rule`` (the rule used, or the reason
        there is none).  ``attrs["unknown_ops"]`` counts the rows left NaN by reason.

    Raises
    ------
    DomainError
        When ``ops`` is not a DataFrame or lacks a column.

    Examples
    --------
    >>> ops = pd.DataFrame({"rank": [0], "external_id": [7], "name": ["aten::addmm"],
    ...                     "input_dims": ["[[256], [16, 13], [13, 256], [], []]"],
    ...                     "input_types": ['["float", "float", "float", "Scalar", "Scalar"]']})
    >>> row = op_flops_bytes(ops).iloc[0]
    >>> int(row["flops"]), int(row["bytes_moved"])
    (110592, 31552)
    """
    if not isinstance(ops, pd.DataFrame):
        raise DomainError(f"ops must be a pandas DataFrame; got {type(ops).__name__}")
    missing = [c for c in OP_COLUMNS if c not in ops.columns]
    if missing:
        raise DomainError(f"ops lacks column(s) {missing}; it needs {list(OP_COLUMNS)}")
    names = ops["name"].astype("string").fillna("")
    has_rule = names.isin(list(OP_FLOP_RULES)).to_numpy()
    flops = np.full(len(ops), np.nan)
    nbytes = np.full(len(ops), np.nan)
    dtype = np.full(len(ops), None, dtype=object)
    rule = np.where(has_rule, "", NO_RULE).astype(object)
    idx = np.flatnonzero(has_rule)
    if idx.size:
        sub = pd.DataFrame({"name": names.to_numpy()[idx],
                            "dims": ops["input_dims"].astype("string").to_numpy()[idx],
                            "types": ops["input_types"].astype("string").to_numpy()[idx]})
        # One evaluation per distinct (op, shapes, dtypes) signature: a step repeats a few signatures.
        codes, uniques = pd.factorize(pd.MultiIndex.from_frame(sub.fillna("")))
        u_f = np.full(len(uniques), np.nan)
        u_b = np.full(len(uniques), np.nan)
        u_d = np.full(len(uniques), None, dtype=object)
        u_r = np.full(len(uniques), "", dtype=object)
        for j, (name, dims_text, types_text) in enumerate(uniques):
            dims = _parse_json_list(dims_text)
            types = _parse_json_list(types_text)
            got = None if dims is None else _op_rule(str(name), dims)
            if got is None or types is None:
                u_r[j] = BAD_SHAPES
                continue
            f, out, inputs = got
            first = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
            sizes = dtype_size_bytes([types[i] if i < len(types) else None for i in inputs])
            tensor = np.array([_shape(dims, i) is not None and len(dims[i]) > 0 for i in inputs])
            need = tensor & np.isnan(sizes)
            out_size = float(dtype_size_bytes([types[first] if first < len(types) else None])[0])
            if need.any() or np.isnan(out_size):
                u_r[j] = UNKNOWN_DTYPE
                continue
            read = sum(_n(_shape(dims, i) or ()) * s for i, s, t in zip(inputs, sizes, tensor, strict=True)
                       if t)
            u_f[j] = f
            u_b[j] = read + _n(out) * out_size
            u_d[j] = str(types[first])
            u_r[j] = OP_FLOP_RULES[str(name)]
        flops[idx], nbytes[idx], dtype[idx], rule[idx] = u_f[codes], u_b[codes], u_d[codes], u_r[codes]
    out = ops.copy()
    out["flops"] = flops
    out["bytes_moved"] = nbytes
    out["dtype"] = pd.array(dtype, dtype="string")
    out["flops_rule"] = pd.array(rule, dtype="string")
    unknown = out.loc[np.isnan(flops), "flops_rule"].value_counts()
    out.attrs["unknown_ops"] = {str(k): int(v) for k, v in unknown.items()}
    return out


def kernel_roofline(kernels: pd.DataFrame, ops: pd.DataFrame, *,
                    split: Literal["duration", "longest"] = "duration") -> pd.DataFrame:
    """Give each kernel the FLOPs and bytes of the shaped op that launched it, and its achieved rates.

    Kernels are joined to ops on ``(rank, external_id)``.  An op that launched several kernels (a
    GEMM plus a split-K reduction, say) shares its FLOPs and bytes among them:

    * ``split="duration"`` (default): in proportion to each kernel's duration, so every kernel of
      the op shows the op's average rate -- nothing is invented about which kernel did what;
    * ``split="longest"``: all to the op's longest kernel (normally the GEMM itself), zero to the
      others.

    Parameters
    ----------
    kernels
        Kernel table: ``rank, external_id, start_us, end_us, name`` (``kind`` and ``step`` kept when
        present).  Index labels are kept.
    ops
        Output of :func:`op_flops_bytes` (``rank, external_id, name, flops, bytes_moved, dtype``).
        ``(rank, external_id)`` must be unique.
    split
        How an op's FLOPs and bytes are shared among its kernels.

    Returns
    -------
    pandas.DataFrame
        ``kernels`` plus :data:`ROOFLINE_KERNEL_COLUMNS`: the launching op's name (missing when no
        op matched), the kernel's share of FLOPs and bytes (NaN when unknown), the op's dtype, the
        intensity (FLOP/byte) and achieved FLOP/s and bytes/s over the kernel's duration (NaN for a
        zero-length kernel).  ``attrs`` records ``split`` and the counts ``kernels_with_flops``,
        ``kernels_without_op`` and ``kernels_with_unknown_op``.

    Raises
    ------
    DomainError
        Missing columns, an unknown ``split``, a negative duration or an op key repeated.
    """
    if split not in ("duration", "longest"):
        raise DomainError(f"split must be 'duration' or 'longest'; got {split!r}")
    for frame, what, cols in ((kernels, "kernels", ("rank", "external_id", "start_us", "end_us", "name")),
                              (ops, "ops", ("rank", "external_id", "name", "flops", "bytes_moved", "dtype"))):
        if not isinstance(frame, pd.DataFrame):
            raise DomainError(f"{what} must be a pandas DataFrame; got {type(frame).__name__}")
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise DomainError(f"{what} lacks column(s) {missing}; call op_flops_bytes on the ops first"
                              if what == "ops" and "flops" in missing else
                              f"{what} lacks column(s) {missing}; it needs {list(cols)}")
    start = pd.to_numeric(kernels["start_us"]).to_numpy(dtype=float)
    dur = pd.to_numeric(kernels["end_us"]).to_numpy(dtype=float) - start
    if (dur < 0).any():
        i = int(np.flatnonzero(dur < 0)[0])
        raise DomainError(f"kernel {kernels.index[i]!r} has a negative duration {dur[i]!r} us")
    keys = ops[["rank", "external_id"]].astype({"rank": "int64", "external_id": "Int64"})
    known_keys = keys.dropna()
    dup = known_keys.duplicated()
    if dup.any():
        r = known_keys[dup].iloc[0]
        raise DomainError(f"ops repeats the key (rank, external_id) = ({r['rank']}, {r['external_id']}); "
                          "each host op needs its own external id")
    table = pd.DataFrame({"rank": kernels["rank"].astype("int64").to_numpy(),
                          "external_id": kernels["external_id"].astype("Int64").to_numpy(),
                          "dur_us": dur})
    lookup = pd.DataFrame({"rank": keys["rank"].to_numpy(), "external_id": keys["external_id"].to_numpy(),
                           "op_name": ops["name"].astype("string").to_numpy(),
                           "op_flops": pd.to_numeric(ops["flops"]).to_numpy(dtype=float),
                           "op_bytes": pd.to_numeric(ops["bytes_moved"]).to_numpy(dtype=float),
                           "dtype": ops["dtype"].astype("string").to_numpy()}).dropna(subset=["external_id"])
    joined = table.merge(lookup, on=["rank", "external_id"], how="left", validate="many_to_one")
    matched = joined["op_name"].notna().to_numpy()
    group = joined.groupby(["rank", "external_id"], dropna=True)["dur_us"]
    if split == "duration":
        total = group.transform("sum").to_numpy(dtype=float)
        count = group.transform("size").to_numpy(dtype=float)
        share = np.divide(dur, total, out=np.zeros_like(dur), where=total > 0)
        share = np.where(total > 0, share, np.divide(1.0, count, out=np.zeros_like(dur), where=count > 0))
    else:
        longest = joined.assign(pos=np.arange(len(joined))).sort_values(
            ["dur_us", "pos"], ascending=[False, True]).dropna(subset=["external_id"]).drop_duplicates(
            ["rank", "external_id"])["pos"].to_numpy()
        share = np.zeros(len(joined))
        share[longest] = 1.0
    share = np.where(matched, share, np.nan)
    flops = joined["op_flops"].to_numpy(dtype=float) * share
    nbytes = joined["op_bytes"].to_numpy(dtype=float) * share
    dur_s = dur * 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        f_rate = np.where(dur_s > 0, flops / np.where(dur_s > 0, dur_s, 1.0), np.nan)
        b_rate = np.where(dur_s > 0, nbytes / np.where(dur_s > 0, dur_s, 1.0), np.nan)
        inten = np.where(nbytes > 0, flops / np.where(nbytes > 0, nbytes, 1.0), np.nan)
    out = kernels.copy()
    out["op_name"] = joined["op_name"].to_numpy()
    out["flops"] = flops
    out["bytes_moved"] = nbytes
    out["dtype"] = joined["dtype"].to_numpy()
    out["intensity_flop_per_byte"] = inten
    out["achieved_flops_per_s"] = f_rate
    out["achieved_bytes_per_s"] = b_rate
    out.attrs.update(split=split, kernels_with_flops=int(np.isfinite(flops).sum()),
                     kernels_without_op=int((~matched).sum()),
                     kernels_with_unknown_op=int((matched & ~np.isfinite(flops)).sum()))
    return out


def _precision_key(text: object) -> str:
    key = re.sub(r"[^a-z0-9]", "", str(text).lower().replace("c10::", ""))
    return {"float": "fp32", "float32": "fp32", "half": "fp16", "float16": "fp16", "bfloat16": "bf16",
            "double": "fp64", "float64": "fp64"}.get(key, key)


def roofline_placement(table: pd.DataFrame, peak: PeakRate, *, near: float = 0.7) -> pd.DataFrame:
    """Place kernels with known FLOPs and bytes on the roofline of one device, in the three regimes.

    Uses :func:`place_kernels` and :func:`roofline_diagnosis` on the rows of ``table`` with finite,
    positive achieved rates; the other rows keep NaN and a missing regime.  The regimes:

    * ``near bandwidth ceiling`` -- below the ridge and at least ``near`` of the slope's ceiling;
    * ``near compute ceiling`` -- at or above the ridge and at least ``near`` of peak;
    * ``below both ceilings`` -- everything else: neither resource is the limit.

    Intensities here come from shapes (compulsory bytes), so they are upper bounds; a kernel placed
    above the ridge may still be memory-bound if it moves more than the compulsory bytes.

    Parameters
    ----------
    table
        Output of :func:`kernel_roofline`.
    peak
        Device ceilings (:class:`fleetlib.program.flops.PeakRate`): its dense arithmetic peak and
        HBM bandwidth.  The peak is for ``peak.precision``; rows whose ``dtype`` is another precision
        are placed all the same and marked in ``precision_matches`` (a float32 GEMM measured against
        a tensor-core FP16 peak sits lower than against the FP32 peak).
    near
        Fraction of the attainable rate that counts as near a ceiling, in (0, 1].

    Returns
    -------
    pandas.DataFrame
        ``table`` plus ``ridge_flop_per_byte``, ``side`` (``memory-bound`` / ``compute-bound`` by the
        ridge), ``attainable_flops_per_s``, ``fraction_of_attainable``, ``regime`` (one of
        :data:`DIAGNOSES`, missing when not placed) and ``precision_matches``.  ``attrs`` names the
        peak and its source.

    Raises
    ------
    DomainError
        Missing columns, a ``peak`` that is not a PeakRate, ``near`` outside (0, 1], or an achieved
        rate above the ceilings (the peak is for another precision or memory boundary).
    """
    if not isinstance(peak, PeakRate):
        raise DomainError(f"peak must be a PeakRate with its source; got {type(peak).__name__}")
    if not isinstance(table, pd.DataFrame):
        raise DomainError(f"table must be a pandas DataFrame; got {type(table).__name__}")
    need = ("achieved_flops_per_s", "achieved_bytes_per_s", "dtype")
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise DomainError(f"table lacks column(s) {missing}; pass the output of kernel_roofline")
    f = pd.to_numeric(table["achieved_flops_per_s"]).to_numpy(dtype=float)
    b = pd.to_numeric(table["achieved_bytes_per_s"]).to_numpy(dtype=float)
    ok = np.isfinite(f) & np.isfinite(b) & (b > 0) & (f >= 0)
    ridge = float(ridge_point(peak.peak_flops_per_s, peak.hbm_bytes_per_s))
    out = table.copy()
    out["ridge_flop_per_byte"] = ridge
    side = np.full(len(out), None, dtype=object)
    attainable = np.full(len(out), np.nan)
    fraction = np.full(len(out), np.nan)
    regime = np.full(len(out), None, dtype=object)
    if ok.any():
        placed = place_kernels(f[ok], b[ok], peak.peak_flops_per_s, peak.hbm_bytes_per_s)
        side[ok] = np.atleast_1d(placed.regime)
        attainable[ok] = np.atleast_1d(placed.attainable_flops_per_s)
        fraction[ok] = np.atleast_1d(placed.fraction_of_attainable)
        regime[ok] = np.atleast_1d(roofline_diagnosis(f[ok], b[ok], peak.peak_flops_per_s,
                                                      peak.hbm_bytes_per_s, near=near))
    else:
        float(checked_values("near", near, fraction=True))
    out["side"] = pd.array(side, dtype="string")
    out["attainable_flops_per_s"] = attainable
    out["fraction_of_attainable"] = fraction
    out["regime"] = pd.array(regime, dtype="string")
    dt = out["dtype"].astype("string")
    want = _precision_key(peak.precision)
    out["precision_matches"] = pd.array([None if pd.isna(d) else _precision_key(d) == want for d in dt],
                                        dtype="boolean")
    out.attrs.update(peak=peak.arithmetic_label, peak_source=peak.source, near=float(near))
    return out


def name_matches(names: pd.Series, pattern: str) -> np.ndarray:
    """Return, per name, whether ``pattern`` matches it (each distinct name searched once).

    Parameters
    ----------
    names
        Kernel names (missing names match nothing).
    pattern
        Regular expression, searched (not anchored).

    Returns
    -------
    numpy.ndarray
        Boolean, one value per name.

    Raises
    ------
    DomainError
        ``pattern`` is not a valid regular expression.
    """
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise DomainError(f"pattern is not a valid regular expression: {exc}") from exc
    text = names.astype("string").fillna("")
    uniq = pd.Series(text.unique())
    by_name = pd.Series([bool(rx.search(str(u))) for u in uniq], index=uniq.to_numpy(), dtype=bool)
    return text.map(by_name).fillna(False).to_numpy(dtype=bool)


def shaped_op_kernels(kernels: pd.DataFrame, ops: pd.DataFrame | None) -> np.ndarray:
    """Return, per kernel, whether the op that launched it has a FLOP shape rule (:data:`OP_FLOP_RULES`).

    Parameters
    ----------
    kernels
        Kernel table with ``rank`` and ``external_id`` (without ``external_id``: nothing matches).
    ops
        Host-op table ``rank, external_id, name``, or None.

    Returns
    -------
    numpy.ndarray
        Boolean, one value per kernel row.
    """
    if ops is None or ops.empty or "external_id" not in kernels.columns or kernels.empty:
        return np.zeros(len(kernels), dtype=bool)
    shaped = ops[ops["name"].astype("string").isin(list(OP_FLOP_RULES))]
    key = pd.MultiIndex.from_arrays([shaped["rank"].astype("int64"), shaped["external_id"].astype("Int64")])
    mine = pd.MultiIndex.from_arrays([kernels["rank"].astype("int64"),
                                      kernels["external_id"].astype("Int64")])
    return np.asarray(mine.isin(key), dtype=bool)


def kernel_roof(kernels: pd.DataFrame, ops: pd.DataFrame | None = None, *,
                pattern: str = COMPUTE_ROOF_KERNEL_PATTERN,
                ridge_flop_per_byte: float = DEFAULT_RIDGE_FLOP_PER_BYTE) -> np.ndarray:
    """Return the roof each kernel is bound by: ``"compute"`` or ``"memory"`` (NaN-free strings).

    A compute kernel launched by an op whose recorded shapes give its FLOPs and bytes
    (:func:`op_flops_bytes`, needs ``ops`` and ``external_id``) is on the compute roof when that
    intensity reaches ``ridge_flop_per_byte`` and on the bandwidth slope below it.  Without a
    shape-derived intensity, a kernel is on the compute roof when its op has a shape rule or its
    name matches ``pattern`` (GEMM and convolution kernels); every other compute kernel is on the
    bandwidth slope (``"memory"``).  Copies and memsets are ``"memory"``; collectives, syncs and
    unclassified activity are ``"compute"`` (the value is not used for them).  Without a ``name``
    column every compute kernel is on the compute roof.

    Parameters
    ----------
    kernels
        Kernel table: ``rank, kind`` (``name``; ``external_id`` with ``ops``).
    ops
        Optional host-op table (``rank, external_id, name``).
    pattern
        Regular expression for compute-roof kernel names.
    ridge_flop_per_byte
        The device's ridge point (default :data:`DEFAULT_RIDGE_FLOP_PER_BYTE`).

    Returns
    -------
    numpy.ndarray
        Object array of ``"compute"`` / ``"memory"``, one per kernel row.
    """
    kind = kernels["kind"].astype("string").fillna("").to_numpy(dtype=object)
    by_op = shaped_op_kernels(kernels, ops)
    if "name" in kernels.columns:
        on_roof = name_matches(kernels["name"], pattern) | by_op
    else:
        on_roof = np.ones(len(kernels), dtype=bool)
    shaped = by_op & (kind == "compute")
    if shaped.any():
        sub = kernels[shaped]
        placed = kernel_roofline(sub.set_axis(np.arange(len(sub))), op_flops_bytes(ops))
        intensity = placed["intensity_flop_per_byte"].to_numpy(dtype=float, na_value=np.nan)
        known = np.isfinite(intensity)
        at = np.flatnonzero(shaped)[known]
        on_roof[at] = intensity[known] >= ridge_flop_per_byte
    memory = ((kind == "compute") & ~on_roof) | (kind == "memcpy") | (kind == "memset")
    return np.where(memory, "memory", "compute").astype(object)


def gemm_time_split(kernels: pd.DataFrame, steps: pd.DataFrame, *, ops: pd.DataFrame | None = None,
                    pattern: str = GEMM_KERNEL_PATTERN) -> pd.DataFrame:
    """Time in matrix multiplications versus the other compute kernels, per rank and step.

    A compute kernel is a GEMM when the op that launched it has a shape rule
    (:data:`OP_FLOP_RULES`; needs ``ops`` and the kernels' ``external_id``), or else when its name
    matches ``pattern``.  Kernel time is the sum of durations of the kernels whose ``step`` is the
    step (concurrent streams can make the sum exceed the step's wall time; the share of compute is
    then still a fraction).

    Parameters
    ----------
    kernels
        Kernel table: ``rank, step, start_us, end_us, kind, name`` (``external_id`` with ``ops``).
    steps
        Step windows ``rank, step, start_us, end_us``.
    ops
        Optional host-op table (``rank, external_id, name``).
    pattern
        Regular expression for GEMM kernel names.

    Returns
    -------
    pandas.DataFrame
        One row per step window: ``rank, step, step_wall_us, gemm_us, non_gemm_us`` (compute kernels
        that are not GEMMs), ``non_gemm_share`` (of compute-kernel time; NaN without compute) and
        ``non_gemm_share_of_step`` (non-GEMM kernel time over the step's wall time).

    Raises
    ------
    DomainError
        Missing columns, an invalid pattern, or a step window with no wall time.
    """
    for frame, what, cols in ((kernels, "kernels", ("rank", "step", "start_us", "end_us", "kind", "name")),
                              (steps, "steps", ("rank", "step", "start_us", "end_us"))):
        if not isinstance(frame, pd.DataFrame):
            raise DomainError(f"{what} must be a pandas DataFrame; got {type(frame).__name__}")
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise DomainError(f"{what} lacks column(s) {missing}; it needs {list(cols)}")
    comp = kernels[kernels["kind"].astype("string") == "compute"]
    gemm = name_matches(comp["name"], pattern) | shaped_op_kernels(comp, ops)
    dur = (pd.to_numeric(comp["end_us"]).to_numpy(dtype=float)
           - pd.to_numeric(comp["start_us"]).to_numpy(dtype=float))
    frame = pd.DataFrame({"rank": comp["rank"].astype("int64").to_numpy(),
                          "step": comp["step"].astype("Int64").to_numpy(),
                          "gemm_us": np.where(gemm, dur, 0.0), "non_gemm_us": np.where(gemm, 0.0, dur)})
    sums = frame.dropna(subset=["step"]).astype({"step": "int64"}).groupby(["rank", "step"])[
        ["gemm_us", "non_gemm_us"]].sum()
    win = steps.assign(rank=steps["rank"].astype("int64"), step=steps["step"].astype("int64"))
    wall = (pd.to_numeric(win["end_us"]).to_numpy(dtype=float)
            - pd.to_numeric(win["start_us"]).to_numpy(dtype=float))
    if (wall <= 0).any():
        raise DomainError("a step window has no wall time")
    out = pd.DataFrame({"rank": win["rank"].to_numpy(), "step": win["step"].to_numpy(), "step_wall_us": wall})
    out = out.merge(sums.reset_index(), on=["rank", "step"], how="left").fillna({"gemm_us": 0.0,
                                                                                   "non_gemm_us": 0.0})
    compute = out["gemm_us"] + out["non_gemm_us"]
    out["non_gemm_share"] = np.where(compute > 0, out["non_gemm_us"] / compute.where(compute > 0, 1.0),
                                     np.nan)
    out["non_gemm_share_of_step"] = out["non_gemm_us"] / out["step_wall_us"]
    return out.sort_values(["rank", "step"], ignore_index=True)
