"""The runtime rung's cross-job (vectorised) passes equal the per-job code they replaced.

``_reference_paired_markers`` is the per-job pairing of checkpoint and evaluation markers that
``fleetlib.runtime.job_structure`` ran once per job (two ``merge_asof`` per job) before it paired every
job's markers in one pass; it is kept here, private, as the reference.
"""

from __future__ import annotations

import glob
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fleetlib.runtime import job_structure
from fleetlib.runtime.readers import READERS
from fleetlib.runtime.timeline import _prepare_tables, job_timelines, tables_from_seconds

_NS = 1_000_000_000


def _reference_paired_markers(j: SimpleNamespace, begin_kind: str, end_kind: str) -> tuple[np.ndarray, ...]:
    """The former per-job pairing (verbatim logic): begins, paired ends, logged durations and lone ends."""
    kind, e_att, e_step, e_t = j.kind, j.e_att, j.e_step, j.e_t
    e_dur, e_ns, rel_ns = j.e_dur, j.e_ns, j.rel_ns
    b_idx = np.flatnonzero(kind == begin_kind)
    x_idx = np.flatnonzero(kind == end_kind)
    pair_end = np.full(b_idx.size, np.nan)
    used = np.zeros(x_idx.size, dtype=bool)
    if b_idx.size and x_idx.size:
        b_key = np.where(np.isnan(e_step[b_idx]), -1, e_step[b_idx]).astype(np.int64)
        match = np.full(b_idx.size, -1, dtype=np.int64)
        for keyed in (True, False):
            sel = (b_key >= 0) if keyed else (b_key < 0)
            if not sel.any():
                continue
            left = pd.DataFrame({"pos": b_idx[sel], "a": e_att[b_idx[sel]],
                                 "s": b_key[sel] if keyed else 0, "i": np.flatnonzero(sel)})
            x_step = np.where(np.isnan(e_step[x_idx]), -2, e_step[x_idx]).astype(np.int64)
            right = pd.DataFrame({"pos": x_idx, "a": e_att[x_idx], "s": x_step if keyed else 0,
                                  "j": np.arange(x_idx.size)})
            m = pd.merge_asof(left, right, on="pos", by=["a", "s"], direction="forward",
                              allow_exact_matches=False)
            jj = m["j"].to_numpy(dtype=np.float64, na_value=np.nan)
            ok = np.isfinite(jj)
            match[m["i"].to_numpy()[ok]] = jj[ok].astype(np.int64)
        has = np.flatnonzero(match >= 0)
        last = np.ones(has.size, dtype=bool)
        if has.size > 1:
            order = np.lexsort((b_idx[has], match[has]))
            dup = np.zeros(has.size, dtype=bool)
            dup[order[:-1]] = match[has][order[:-1]] == match[has][order[1:]]
            last = ~dup
        keep = has[last]
        pair_end[keep] = e_t[x_idx[match[keep]]]
        used[match[keep]] = True
    lone = x_idx[~used]
    dur = e_dur[lone]
    fin = np.isfinite(dur)
    return (e_t[b_idx], pair_end, e_dur[b_idx], rel_ns(e_ns[b_idx], e_dur[b_idx]),
            rel_ns(e_ns[lone][fin], -dur[fin]), e_t[lone][fin])


def _job_slice(t: job_structure._Tables, code: int) -> SimpleNamespace:
    """One job's event arrays, relative to its own origin, as the former per-job build made them."""
    lo, hi = np.searchsorted(t.e_job, np.array([code, code + 1], dtype=t.e_job.dtype))
    kind, e_ns = t.e_kind[lo:hi], t.e_time[lo:hi]
    origin_ns = int(e_ns[kind == "gang_complete"].min())

    def rel_ns(ns: np.ndarray, add_s: np.ndarray) -> np.ndarray:
        out = np.full(ns.size, np.nan)
        fin = np.isfinite(add_s)
        exact = fin & (np.abs(add_s) < 1e9)
        out[exact] = (ns[exact] + np.rint(add_s[exact] * _NS).astype(np.int64) - origin_ns) / _NS
        huge = fin & ~exact
        out[huge] = (ns[huge] - origin_ns) / _NS + add_s[huge]
        return out

    return SimpleNamespace(kind=kind, e_att=t.e_attempt[lo:hi], e_step=t.e_step[lo:hi],
                           e_t=(e_ns - origin_ns) / _NS, e_dur=t.e_dur[lo:hi], e_ns=e_ns, rel_ns=rel_ns)


_FIELDS = {
    ("checkpoint_begin", "checkpoint_commit"): ("ckpt_begin_time", "ckpt_begin_commit", "ckpt_begin_duration",
                                                "ckpt_begin_logged_end", "ckpt_duration_start",
                                                "ckpt_duration_end"),
    ("eval_begin", "eval_end"): ("eval_begin_time", "eval_begin_end", "eval_begin_duration",
                                 "eval_begin_logged_end", "eval_duration_start", "eval_duration_end"),
}


def _assert_same_as_reference(steps: pd.DataFrame, events: pd.DataFrame) -> int:
    """Every job's paired markers equal the per-job reference bit for bit; return the pairs compared."""
    jobs, _ = job_timelines(steps, events)
    t = _prepare_tables(steps, events, source="reference", build_frames=False)
    compared = 0
    for job in jobs:
        ref = _job_slice(t, t.job_ids.index(job.job_id))
        for (b, x), names in _FIELDS.items():
            expected = _reference_paired_markers(ref, b, x)
            for name, want in zip(names, expected, strict=True):
                got = getattr(job, name)
                np.testing.assert_array_equal(got, want, err_msg=f"{job.job_id} {name}")
            compared += int(np.isfinite(expected[1]).sum())
    return compared


def _bundled_timelines() -> list[tuple[str, pd.DataFrame, pd.DataFrame]]:
    out = []
    for name in ("mlperf", "mlgoodput", "canonical"):  # bloom: events only, no held time
        for sample in READERS[name].samples:
            if sample.bad:
                continue
            tables, _ = READERS[name].read(list(sample.paths))
            out.append((f"{name}:{sample.paths[0]}", tables["steps"], tables["events"]))
    for bundle in ("data/fleet/synthetic", "data/fleet/slurm_sample"):
        files = sorted(glob.glob(f"{bundle}/timelines/*"))
        tables, _ = READERS["canonical"].read(files)
        out.append((bundle, tables["steps"], tables["events"]))
    return out


@pytest.mark.parametrize("name, steps, events", _bundled_timelines(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_paired_markers_equal_the_per_job_reference_on_bundled_timelines(name, steps, events):
    _assert_same_as_reference(steps, events)


def test_paired_markers_equal_the_reference_on_tricky_pairings():
    # two jobs; keyed and unkeyed begins, two begins reaching one end, an end with a logged duration and
    # no begin, a begin with no end, a keyed commit of another step, markers in a second attempt
    ev = [(0, 0.0, "gang_complete"), (0, 5.0, "checkpoint_begin", 1), (0, 6.0, "checkpoint_begin", 1),
          (0, 7.0, "checkpoint_commit", 1), (0, 8.0, "checkpoint_begin"), (0, 9.0, "checkpoint_commit", 2),
          (0, 11.0, "checkpoint_commit", 3, 0.5), (0, 12.0, "eval_begin", None, 1.25), (0, 13.0, "eval_end"),
          (0, 14.0, "eval_begin"), (0, 20.0, "release"), (1, 30.0, "gang_complete"),
          (1, 31.0, "checkpoint_begin", 4), (1, 33.0, "checkpoint_commit", 4), (1, 40.0, "release")]
    st = [(0, 1, 1.0, 4.0), (0, 2, 4.0, 5.0), (0, 3, 9.5, 10.5), (1, 4, 30.5, 30.9)]
    s1, e1 = tables_from_seconds(st, ev, job_id="a")
    s2, e2 = tables_from_seconds(st[:2], [*ev[:6], (0, 20.0, "release")], job_id="b",
                                 origin="2024-01-02T00:00:00Z")
    steps, events = pd.concat([s1, s2], ignore_index=True), pd.concat([e1, e2], ignore_index=True)
    assert _assert_same_as_reference(steps, events) >= 6
    jobs, _ = job_timelines(steps, events)
    a = jobs[0]
    # hand-checked: begin@5 loses to begin@6 for the commit@7; begin@8 (no step) closes with commit@9
    np.testing.assert_array_equal(a.ckpt_begin_time, [5.0, 6.0, 8.0, 31.0])
    np.testing.assert_array_equal(a.ckpt_begin_commit, [np.nan, 7.0, 9.0, 33.0])
    np.testing.assert_array_equal(a.ckpt_duration_start, [10.5])
    np.testing.assert_array_equal(a.eval_begin_end, [13.0, np.nan])
