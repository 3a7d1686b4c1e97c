"""The trace sample's strata, and fleet-wide estimates from the stratified sample of traced jobs.

Chapter 9.3.3: a trace sample is stratified across job sizes and architectures, software versions,
hours of the day and pipeline stages.  :func:`trace_strata` gives every timed job its stratum (the
trace plan, :func:`fleetlib.regress.sampling.trace_plan`, chooses jobs within them).

:func:`kernel_ranking` is the Google-Wide Profiling idea of 9.3.3: kernels and collectives ranked
by their share of the fleet's retained device-time, estimated from the traced jobs.  Job ``j`` of
stratum ``h`` (``N_h`` timed jobs, ``n_h`` traced) weighs ``w_j = N_h / n_h``; with ``x_j`` its
retained (productive) device-time and ``s_jk`` the share of its traced device-time kernel ``k``
holds, ``y_jk = s_jk x_j`` and the share is the combined ratio estimator
``R_k = sum_j w_j y_jk / sum_j w_j x_j`` (:func:`stratified_ratio`).  Its standard error is the
linearised (Taylor) one of the stratified design, with replacement within strata: with
``t_j = w_j (y_jk - R_k x_j) / sum_j w_j x_j``, ``var = sum_h n_h / (n_h - 1) sum_(j in h)
(t_j - mean_h t)^2``; strata holding one traced job are pooled into one collapsed stratum (the
usual remedy; NaN when that leaves a stratum of one).  A collective taking 6 % of every job's step
so outranks a kernel taking 40 % of one small job.

Pipeline stages are not in a fleet bundle's records: that stratum is one (``"not stated"``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetlib.contract import NOT_STATED

__all__ = [
    "GPUS_PER_NODE",
    "STRATUM_KEYS",
    "kernel_ranking",
    "kernel_records",
    "stratified_ratio",
    "stratum_labels",
    "trace_strata",
]

#: Devices per node, for a job's size in nodes.
GPUS_PER_NODE = 8

#: The columns that name a stratum, in the plan's order.
STRATUM_KEYS: tuple[str, ...] = ("nodes", "architecture", "software_version", "hours", "pipeline_stage")


def trace_strata(jobs: pd.DataFrame) -> pd.DataFrame:
    """Return each job's stratum of the trace sample.

    Parameters
    ----------
    jobs
        One row per job (indexed by job id) with ``devices``, ``architecture``, ``software_version``,
        ``gang_complete`` (a timestamp) and ``retained_steps``.

    Returns
    -------
    pandas.DataFrame
        Same index: the columns of :data:`STRATUM_KEYS` (size in nodes, architecture, software
        version, six-hour block of the gang-complete hour, pipeline stage), ``devices`` and
        ``retained_steps``.
    """
    hour = jobs["gang_complete"].dt.hour.to_numpy()
    return pd.DataFrame(
        {
            "nodes": np.maximum(jobs["devices"].to_numpy(int) // GPUS_PER_NODE, 1),
            "architecture": jobs["architecture"].astype(str).to_numpy(),
            "software_version": jobs["software_version"].astype(str).to_numpy(),
            "hours": [f"{6 * (h // 6):02d}-{6 * (h // 6) + 6:02d} UTC" for h in hour],
            "pipeline_stage": NOT_STATED,
            "devices": jobs["devices"].to_numpy(int),
            "retained_steps": jobs["retained_steps"].to_numpy(float),
        },
        index=jobs.index,
    )


def stratum_labels(strata: pd.DataFrame) -> pd.Series:
    """Return one text label per job naming its stratum (``key=value, ...`` over :data:`STRATUM_KEYS`).

    Parameters
    ----------
    strata
        Output of :func:`trace_strata`.

    Returns
    -------
    pandas.Series
        Same index, text.
    """
    parts = [k + "=" + strata[k].astype(str) for k in STRATUM_KEYS]
    out = parts[0]
    for p in parts[1:]:
        out = out + ", " + p
    return out.rename("stratum")


def stratified_ratio(y: np.ndarray, x: np.ndarray, stratum: np.ndarray, weight: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Return the combined ratio ``sum w y / sum w x`` of each column of ``y`` and its standard error.

    Parameters
    ----------
    y
        Sampled units x variables (or one variable, 1-D).
    x
        The units' denominators.
    stratum
        Each unit's stratum label.
    weight
        Each unit's weight (jobs of its stratum over traced jobs of its stratum).

    Returns
    -------
    tuple of numpy.ndarray
        Estimates and standard errors, one per column of ``y`` (NaN errors with fewer than two units,
        or when pooling the one-unit strata leaves a stratum of one).
    """
    y2 = np.asarray(y, dtype=float).reshape(len(x), -1)
    x = np.asarray(x, dtype=float)
    w = np.asarray(weight, dtype=float)
    total = float(np.sum(w * x))
    if total <= 0:
        nan = np.full(y2.shape[1], np.nan)
        return nan, nan.copy()
    r = (w[:, None] * y2).sum(axis=0) / total
    t = w[:, None] * (y2 - r[None, :] * x[:, None]) / total
    labels = pd.Series(np.asarray(stratum).astype(str))
    sizes = labels.map(labels.value_counts())
    groups = np.where(sizes.to_numpy() == 1, "(one-job strata, pooled)", labels.to_numpy())
    codes, uniq = pd.factorize(groups)
    counts = np.bincount(codes, minlength=len(uniq))
    if len(x) < 2 or (counts < 2).any():
        return r, np.full(r.shape, np.nan)
    var = np.zeros(r.shape)
    for g, n in enumerate(counts):
        tg = t[codes == g]
        var += n / (n - 1) * ((tg - tg.mean(axis=0)) ** 2).sum(axis=0)
    return r, np.sqrt(var)


def kernel_ranking(kernels: pd.DataFrame, traced: pd.DataFrame) -> pd.DataFrame:
    """Rank kernels and collectives by their estimated share of the fleet's retained device-time.

    Parameters
    ----------
    kernels
        One row per traced job and kernel: ``job_id``, ``name``, ``kind`` and ``device_us`` (the
        kernel's device-time summed over the job's traced rank-steps).
    traced
        One row per traced job (indexed by job id): ``traced_device_us`` (its traced rank-steps'
        wall time summed), ``productive_device_s`` (its retained device-time), ``stratum`` (a label)
        and ``stratum_jobs`` (timed jobs in that stratum, traced or not).

    Returns
    -------
    pandas.DataFrame
        One row per (``name``, ``kind``), ranked by ``share`` (largest first): ``rank``, ``name``,
        ``kind``, ``share``, ``standard_error``, ``device_s`` (the share times the estimated
        retained device-time of the traced strata) and ``jobs`` (traced jobs running it).
    """
    cols = ["rank", "name", "kind", "share", "standard_error", "device_s", "jobs"]
    traced = traced[traced["traced_device_us"].to_numpy(float) > 0]
    k = kernels[kernels["job_id"].isin(traced.index)]
    if k.empty:
        return pd.DataFrame(columns=cols)
    wide = k.pivot_table(index="job_id", columns=["name", "kind"], values="device_us", aggfunc="sum",
                         fill_value=0.0, observed=True).reindex(traced.index, fill_value=0.0)
    x = traced["productive_device_s"].to_numpy(float)
    y = wide.to_numpy(float) / traced["traced_device_us"].to_numpy(float)[:, None] * x[:, None]
    stratum = traced["stratum"].astype(str).to_numpy()
    n_h = pd.Series(stratum).map(pd.Series(stratum).value_counts()).to_numpy(float)
    w = traced["stratum_jobs"].to_numpy(float) / n_h
    share, se = stratified_ratio(y, x, stratum, w)
    out = pd.DataFrame(
        {
            "name": [str(c[0]) for c in wide.columns],
            "kind": [str(c[1]) for c in wide.columns],
            "share": share,
            "standard_error": se,
            "device_s": share * float(np.sum(w * x)),
            "jobs": (wide.to_numpy(float) > 0).sum(axis=0),
        }
    )
    out = out.sort_values(["share", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    return out[cols]


def kernel_records(ranking: pd.DataFrame) -> list[dict[str, object]]:
    """Return :func:`kernel_ranking`'s rows as JSON-ready records (a NaN error as None).

    Parameters
    ----------
    ranking
        Output of :func:`kernel_ranking` (an empty frame gives an empty list).

    Returns
    -------
    list of dict
        One record per kernel, in rank order.
    """
    out = []
    for row in ranking.itertuples(index=False):
        se = float(row.standard_error)
        out.append({"rank": int(row.rank), "name": str(row.name), "kind": str(row.kind),
                    "share": float(row.share), "standard_error": se if np.isfinite(se) else None,
                    "device_s": float(row.device_s), "jobs": int(row.jobs)})
    return out
