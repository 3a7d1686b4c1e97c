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

from dataclasses import dataclass

import numpy as np

from fleetlib.program.flops import ArrayLike, FloatOrArray, _at_most_one, _out, _values
from fleetlib.quality import DomainError

__all__ = [
    "REGIMES",
    "RooflinePlacement",
    "arithmetic_intensity",
    "attainable_flops",
    "bandwidth_fraction",
    "bandwidth_headroom",
    "compute_fraction",
    "measured_intensity",
    "place_kernels",
    "ridge_point",
    "roofline_diagnosis",
    "roofline_regime",
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
    f = _values("flops", flops, nonnegative=True)
    b = _values("n_bytes", n_bytes, positive=True)
    return _out(f / b)


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
    f = _values("achieved_flops_per_s", achieved_flops_per_s, nonnegative=True)
    b = _values("achieved_bytes_per_s", achieved_bytes_per_s, positive=True)
    return _out(f / b)


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
    peak = _values("peak_flops_per_s", peak_flops_per_s, positive=True)
    bw = _values("peak_bytes_per_s", peak_bytes_per_s, positive=True)
    return _out(peak / bw)


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
    i = _values("intensity", intensity, nonnegative=True)
    peak = _values("peak_flops_per_s", peak_flops_per_s, positive=True)
    bw = _values("peak_bytes_per_s", peak_bytes_per_s, positive=True)
    return _out(np.minimum(peak, i * bw))


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
    i = _values("intensity", intensity, nonnegative=True)
    r = _values("ridge", ridge, positive=True)
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
    a = _values("achieved_bytes_per_s", achieved_bytes_per_s, nonnegative=True)
    p = _values("peak_bytes_per_s", peak_bytes_per_s, positive=True)
    return _out(_at_most_one("bandwidth fraction", a / p,
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
    return _out(1.0 - np.asarray(bandwidth_fraction(achieved_bytes_per_s, peak_bytes_per_s)))


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
    a = _values("achieved_flops_per_s", achieved_flops_per_s, nonnegative=True)
    p = _values("peak_flops_per_s", peak_flops_per_s, positive=True)
    return _out(_at_most_one("compute fraction", a / p,
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
    threshold = float(_values("near", near, fraction=True))
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
    frac = _at_most_one("fraction of attainable", ratio,
                        "achieved FLOP/s above the roofline ceiling: the counters and the peaks "
                        "describe different precisions or memory boundaries")
    return RooflinePlacement(
        intensity=_out(i), ridge=_out(ridge), below_ridge_factor=_out(below),
        regime=roofline_regime(i, ridge), attainable_flops_per_s=_out(ceiling),
        fraction_of_attainable=_out(frac), bandwidth_fraction=_out(bw),
        bandwidth_headroom=_out(1.0 - bw),
        compute_fraction=compute_fraction(achieved_flops_per_s, peak_flops_per_s),
    )
