"""Fleet-wide kernel ranking: shares of retained device-time from a stratified sample of traced jobs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fleetlib.fleet.sampling import kernel_ranking

# five traced jobs: two of stratum "big" (8 timed jobs in it), one of "mid" (3 timed jobs), one of
# "small" (2 timed jobs), one of "odd" (4 timed jobs); "mid", "small" and "odd" hold one traced job each
JOBS = {
    #       stratum, timed jobs in it, productive device-s, traced device-us
    "a": ("big", 8, 1000.0, 2.0e6),
    "b": ("big", 8, 1400.0, 1.0e6),
    "c": ("mid", 3, 800.0, 4.0e6),
    "d": ("odd", 4, 600.0, 3.0e6),
    "e": ("small", 2, 10.0, 5.0e5),  # the one small job
}
# each kernel's share of each job's traced device-time
SHARES = {
    ("ncclAllReduce", "collective"): {"a": 0.06, "b": 0.06, "c": 0.06, "d": 0.06, "e": 0.06},
    ("gemm_big", "compute"): {"e": 0.40},
    ("layernorm", "compute"): {"a": 0.05, "b": 0.02, "c": 0.03, "d": 0.08},
}


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    traced = pd.DataFrame(
        [(j, s, n, x, t) for j, (s, n, x, t) in JOBS.items()],
        columns=["job_id", "stratum", "stratum_jobs", "productive_device_s", "traced_device_us"],
    ).set_index("job_id")
    rows = [
        (j, name, kind, share * JOBS[j][3])
        for (name, kind), per in SHARES.items()
        for j, share in per.items()
    ]
    return pd.DataFrame(rows, columns=["job_id", "name", "kind", "device_us"]), traced


def _expected(kernel: tuple[str, str]) -> tuple[float, float]:
    """The stratified combined ratio and its linearised standard error, written out by hand."""
    n_traced: dict[str, int] = {}
    for s, *_ in JOBS.values():
        n_traced[s] = n_traced.get(s, 0) + 1
    w = {j: n / n_traced[s] for j, (s, n, _, _) in JOBS.items()}
    y = {j: SHARES[kernel].get(j, 0.0) * x for j, (_, _, x, _) in JOBS.items()}
    total_x = sum(w[j] * JOBS[j][2] for j in JOBS)
    r = sum(w[j] * y[j] for j in JOBS) / total_x
    t = {j: w[j] * (y[j] - r * JOBS[j][2]) / total_x for j in JOBS}
    # strata with one traced job pooled into one stratum
    groups: dict[str, list[str]] = {}
    for j, (s, *_) in JOBS.items():
        groups.setdefault(s if n_traced[s] > 1 else "pooled", []).append(j)
    var = 0.0
    for members in groups.values():
        n = len(members)
        mean = sum(t[j] for j in members) / n
        var += n / (n - 1) * sum((t[j] - mean) ** 2 for j in members)
    return r, math.sqrt(var)


def test_a_collective_on_every_job_outranks_a_big_kernel_of_one_small_job() -> None:
    kernels, traced = _tables()
    out = kernel_ranking(kernels, traced).set_index("name")
    assert list(out.index) == ["ncclAllReduce", "layernorm", "gemm_big"]
    assert out.loc["ncclAllReduce", "share"] == pytest.approx(0.06, abs=1e-12)
    assert out.loc["ncclAllReduce", "standard_error"] == pytest.approx(0.0, abs=1e-12)
    assert out.loc["gemm_big", "share"] < 0.01 < 0.06
    for kernel in SHARES:
        r, se = _expected(kernel)
        assert out.loc[kernel[0], "share"] == pytest.approx(r, rel=1e-12)
        assert out.loc[kernel[0], "standard_error"] == pytest.approx(se, rel=1e-12)
        assert out.loc[kernel[0], "kind"] == kernel[1]
    assert out["jobs"].to_dict() == {"ncclAllReduce": 5, "layernorm": 4, "gemm_big": 1}
    total_x = float(np.sum(traced["stratum_jobs"] / traced.groupby("stratum")["stratum"].transform("size")
                           * traced["productive_device_s"]))
    assert out.loc["ncclAllReduce", "device_s"] == pytest.approx(0.06 * total_x, rel=1e-12)


def test_a_lone_one_job_stratum_leaves_the_error_unestimated() -> None:
    kernels, traced = _tables()
    keep = ["a", "b", "c"]  # "c" alone in its stratum, nothing to pool it with
    out = kernel_ranking(kernels[kernels["job_id"].isin(keep)], traced.loc[keep]).set_index("name")
    assert out.loc["ncclAllReduce", "share"] == pytest.approx(0.06, abs=1e-12)
    assert np.isnan(out["standard_error"]).all()
