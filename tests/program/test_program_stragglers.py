"""Fleet-scale stragglers from per-rank step timers: hand fixture, ground truth, pandas/Dask parity,
properties and bad inputs.

Independent values come from a hand-computed fixture (below) and from :func:`reference`, a second
method written directly with pandas ``groupby`` (no two-pass blocks, no bitmaps).  The Dask tests
share one :class:`distributed.LocalCluster` of two in-process workers (module-scoped).
"""

from __future__ import annotations

import itertools
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetlib.program import stragglers as fleet
from fleetlib.program.readers.rank_timers import TimerBlock
from fleetlib.program.stragglers import (
    PER_RANK_COLUMNS,
    PER_STEP_COLUMNS,
    local_cluster,
    read_rank_timers,
    straggler_analysis,
    synth_rank_timers,
)
from fleetlib.quality import DomainError, InputError

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "fleet"

# Hand fixture: 3 ranks, 4 steps (rank 2 has no timer at step 13), a tie at step 11 (ranks 0 and 2).
#   step 10: 1.0 2.0 1.5  -> last 1, waits 1.0 0 0.5     (step wait 1.5)
#   step 11: 3.0 1.0 3.0  -> last 0 (tie, smallest rank), waits 0 2.0 0   (2.0)
#   step 12: 1.0 1.25 1.0 -> last 1, waits 0.25 0 0.25   (0.5)
#   step 13: 0.5 2.5 -    -> last 1, waits 2.0 0         (2.0)
HAND = pd.DataFrame({
    "rank": [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1],
    "step": [10, 10, 10, 11, 11, 11, 12, 12, 12, 13, 13],
    "duration_s": [1.0, 2.0, 1.5, 3.0, 1.0, 3.0, 1.0, 1.25, 1.0, 0.5, 2.5],
})


def reference(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-step and per-rank figures by plain groupby (a second method)."""
    t = table.astype({"rank": np.int64, "step": np.int64, "duration_s": np.float64})
    g = t.groupby("step")["duration_s"]
    step_max = g.transform("max")
    last = t[t["duration_s"] == step_max].groupby("step")["rank"].min()
    t = t.assign(wait=step_max - t["duration_s"])
    per_step = pd.DataFrame({"ranks": g.size(), "max_s": g.max(), "min_s": g.min(), "last_arriver": last,
                             "wait_s": t.groupby("step")["wait"].sum()}).reset_index()
    r = t.groupby("rank")
    mean = r["duration_s"].mean()
    arrived = last.value_counts().reindex(mean.index, fill_value=0)
    per_rank = pd.DataFrame({"steps": r.size(), "arrived_last": arrived, "wait_s": r["wait"].sum(),
                             "mean_duration_s": mean, "relative_score": mean.min() / mean}).reset_index()
    return per_step, per_rank


def assert_same(a: fleet.FleetStragglers, b: fleet.FleetStragglers) -> None:
    """Identical counts, maxima, minima and last arrivers; sums equal to 1e-12 relative."""
    for x, y in ((a.per_step, b.per_step), (a.per_rank, b.per_rank)):
        assert list(x.columns) == list(y.columns)
        for col in x.columns:
            if x[col].dtype.kind == "f" and col not in ("max_s", "min_s"):
                np.testing.assert_allclose(x[col].to_numpy(), y[col].to_numpy(), rtol=1e-12, atol=1e-12)
            else:
                assert np.array_equal(x[col].to_numpy(), y[col].to_numpy()), col


@pytest.fixture(scope="module")
def client():
    from distributed import Client

    with local_cluster(2, processes=False) as cluster, Client(cluster) as c:
        yield c


# ---------------------------------------------------------------------------------------------------
# Hand fixture
# ---------------------------------------------------------------------------------------------------


def test_hand_fixture_per_step():
    shuffled = HAND.sample(frac=1.0, random_state=3)  # row order must not matter
    res = straggler_analysis(shuffled, threshold=0.8)
    ps = res.per_step
    assert list(ps.columns) == list(PER_STEP_COLUMNS)
    assert ps["step"].tolist() == [10, 11, 12, 13]
    assert ps["ranks"].tolist() == [3, 3, 3, 2]
    assert ps["max_s"].tolist() == [2.0, 3.0, 1.25, 2.5]
    assert ps["min_s"].tolist() == [1.0, 1.0, 1.0, 0.5]
    assert ps["last_arriver"].tolist() == [1, 0, 1, 1]  # step 11: tie between 0 and 2 -> 0
    assert ps["wait_s"].tolist() == [1.5, 2.0, 0.5, 2.0]


def test_hand_fixture_per_rank():
    res = straggler_analysis(HAND, threshold=0.8)
    pr = res.per_rank.set_index("rank")
    assert list(res.per_rank.columns) == list(PER_RANK_COLUMNS)
    assert pr["steps"].tolist() == [4, 4, 3]
    assert pr["arrived_last"].tolist() == [1, 3, 0]
    assert pr["arrived_last_share"].tolist() == [0.25, 0.75, 0.0]
    assert pr["wait_s"].tolist() == [3.25, 2.0, 0.75]
    assert pr["wait_caused_s"].tolist() == [2.0, 4.0, 0.0]
    assert pr["mean_wait_s"].tolist() == pytest.approx([3.25 / 4, 0.5, 0.25])
    assert pr["mean_duration_s"].tolist() == pytest.approx([1.375, 1.6875, 5.5 / 3])
    assert pr["relative_score"].tolist() == pytest.approx([1.0, 1.375 / 1.6875, 0.75])
    assert pr["straggler"].tolist() == [False, False, True]
    # the worst rank by score comes first in top(); rank 1 (most often last) second
    assert res.top(2)["rank"].tolist() == [2, 1]
    d = res.to_dict(top=2)
    assert d["last_arriver_counts"] == {"1": 3, "0": 1}
    assert d["last_arriver_ranks"] == 2
    assert d["wait_totals"]["all_ranks_s"] == 6.0
    assert d["wait_totals"]["top_waiters"][0] == {"rank": 0, "wait_s": 3.25}
    assert d["straggler_ranks"] == [2]
    assert (d["rows"], d["ranks"], d["steps"]) == (11, 3, 4)


def test_hand_fixture_matches_reference():
    ps, pr = reference(HAND)
    res = straggler_analysis(HAND)
    for col in ("ranks", "max_s", "min_s", "last_arriver", "wait_s"):
        assert res.per_step[col].tolist() == ps[col].tolist()
    for col in ("steps", "arrived_last", "wait_s"):
        assert res.per_rank[col].tolist() == pr[col].tolist()


# ---------------------------------------------------------------------------------------------------
# Synthetic ground truth
# ---------------------------------------------------------------------------------------------------


def test_synth_ground_truth_found(tmp_path):
    info = synth_rank_timers(tmp_path / "t.parquet", ranks=48, steps=60, seed=5, stragglers={17: 1.5},
                             rows_per_group=500)
    assert info["truth"]["stragglers"] == [{"rank": 17, "slowdown": 1.5}]
    assert info["rows"] == 48 * 60 and info["row_groups"] == 6  # 10 steps of 48 ranks per group
    res = straggler_analysis(info["path"])
    top = res.top(1).iloc[0]
    assert int(top["rank"]) == 17
    assert bool(top["straggler"])
    assert res.per_rank["straggler"].sum() == 1
    # about 1/1.5 of the best rank's speed; the noise (sigma 0.05 over 60 steps) moves it little
    assert top["relative_score"] == pytest.approx(1 / 1.5, rel=0.05)
    # a 1.5x slower rank is the last arriver at almost every step
    assert top["arrived_last_share"] > 0.9
    assert top["wait_s"] < res.per_rank["wait_s"].median()


def test_synth_file_layout_and_determinism(tmp_path):
    grid = {"ranks": 10, "steps": 7, "seed": 2, "stragglers": {}, "transient_rate": 0.2}
    a = synth_rank_timers(tmp_path / "a.parquet", rows_per_group=20, **grid)
    b = synth_rank_timers(tmp_path / "b.parquet", rows_per_group=1000, **grid)
    pf = pq.ParquetFile(a["path"])
    assert [str(t) for t in pf.schema_arrow.types] == ["int32", "int32", "float"]
    assert pf.metadata.num_row_groups == 4 and pq.ParquetFile(b["path"]).metadata.num_row_groups == 1
    ta, tb = pq.read_table(a["path"]).to_pandas(), pq.read_table(b["path"]).to_pandas()
    pd.testing.assert_frame_equal(ta, tb)  # values depend on (seed, step), not on the row groups
    assert ta["step"].tolist() == np.repeat(np.arange(7), 10).tolist()
    assert ta["rank"].tolist() == np.tile(np.arange(10), 7).tolist()
    assert a["truth"]["stragglers"] == [] and a["truth"]["transient"] > 0
    c = synth_rank_timers(tmp_path / "c.parquet", ranks=10, steps=7, seed=3, stragglers={}, rows_per_group=20)
    assert not pq.read_table(c["path"]).to_pandas().equals(ta)


def test_synth_default_stragglers_and_bad_arguments(tmp_path):
    info = synth_rank_timers(tmp_path / "d.parquet", ranks=5, steps=2, seed=1)
    assert [s["slowdown"] for s in info["truth"]["stragglers"]] == [1.5, 1.35, 1.2]
    assert len({s["rank"] for s in info["truth"]["stragglers"]}) == 3
    with pytest.raises(DomainError, match="ranks"):
        synth_rank_timers(tmp_path / "e.parquet", ranks=0, steps=1)
    for bad in ({"stragglers": {2: 1.5}}, {"stragglers": {0: 0.5}}, {"noise_sigma": -1},
                {"transient_rate": 1.5}, {"base_step_s": 0}):
        with pytest.raises(DomainError):
            synth_rank_timers(tmp_path / "e.parquet", ranks=2, steps=1, **bad)


# ---------------------------------------------------------------------------------------------------
# pandas vs Dask
# ---------------------------------------------------------------------------------------------------


def _parity_folder(root: Path) -> Path:
    """Two files, several row groups each; steps 0..19 split across both files; ties; bad rows."""
    rng = np.random.default_rng(11)
    rank, step = np.meshgrid(np.arange(12), np.arange(30), indexing="ij")
    t = pd.DataFrame({"rank": rank.ravel(), "step": step.ravel(),
                      "duration_s": rng.integers(1, 6, rank.size) * 0.25})
    t.loc[t["rank"] == 4, "duration_s"] *= 1.75  # a straggler
    t.loc[[5, 100], "duration_s"] = np.nan
    t.loc[200, "duration_s"] = -1.0
    in_a = (t["step"] < 20) & (t["rank"] < 8)
    a = t[in_a].sample(frac=1.0, random_state=1)  # unsorted rows
    b = t[~in_a].sort_values(["rank", "step"])  # rank-major
    folder = root / "timers"
    folder.mkdir()
    for name, part, group in (("a.parquet", a, 37), ("b.parquet", b, 50)):
        table = pa.Table.from_pandas(part.astype({"rank": "int32", "step": "int64"}), preserve_index=False)
        pq.write_table(table, folder / name, row_group_size=group)
    (folder / "notes.txt").write_text("ignored")
    return folder


def test_dask_equals_pandas_on_multi_file_input(tmp_path, client):
    folder = _parity_folder(tmp_path)
    on_pandas = straggler_analysis(folder, engine="pandas")
    on_dask = straggler_analysis(folder, engine="dask", client=client, partition_rows=40)
    assert on_dask.engine == "dask" and on_pandas.engine == "pandas"
    assert_same(on_pandas, on_dask)
    assert on_pandas.ledger.to_dict() == on_dask.ledger.to_dict()
    led = on_dask.ledger
    assert (led.read, led.kept, led.rejected) == (360, 357, 3) and led.balanced()
    assert on_dask.top(1)["rank"].tolist() == [4]
    assert on_dask.files == [str(folder / "a.parquet"), str(folder / "b.parquet")]
    # and both equal the plain groupby computation of the kept rows
    table, _ = read_rank_timers(folder)
    ps, pr = reference(table)
    assert on_dask.per_step["last_arriver"].tolist() == ps["last_arriver"].tolist()
    assert on_dask.per_rank["arrived_last"].tolist() == pr["arrived_last"].tolist()
    np.testing.assert_allclose(on_dask.per_rank["wait_s"], pr["wait_s"], rtol=1e-12)
    np.testing.assert_allclose(on_dask.per_rank["relative_score"], pr["relative_score"], rtol=1e-12)


def test_run_stragglers_on_dask_equals_pandas(tmp_path, client):
    from fleetlib.program.commands import run_stragglers

    folder = _parity_folder(tmp_path)
    on_pandas = run_stragglers(folder, engine="pandas", top=5)
    on_dask = run_stragglers(folder, engine="dask", top=5, client=client)
    assert (on_dask["engine"], on_dask["workers"], on_pandas["workers"]) == ("dask", 2, None)
    assert on_dask["stragglers"][0]["rank"] == 4
    for key in ("last_arriver_counts", "straggler_ranks", "ledger", "rows", "ranks", "steps"):
        assert on_dask[key] == on_pandas[key], key
    for d, p in zip(on_dask["stragglers"], on_pandas["stragglers"], strict=True):
        assert d.keys() == p.keys()
        for k in d:
            assert d[k] == pytest.approx(p[k], rel=1e-12), k
    assert on_dask["wait_totals"]["all_ranks_s"] == pytest.approx(on_pandas["wait_totals"]["all_ranks_s"],
                                                                  rel=1e-12)


def test_dask_frame_partitions_follow_row_groups(tmp_path):
    folder = _parity_folder(tmp_path)
    frame = fleet.rank_timers_dask(folder, partition_rows=40)
    # a.parquet: 160 rows in groups of 37 -> 5 blocks; b.parquet: 200 rows in groups of 50 -> 4 blocks
    assert frame.npartitions == 9
    assert list(frame.columns) == ["rank", "step", "duration_s"]


def test_dask_finds_duplicate_across_blocks(client):
    with pytest.raises(InputError, match=r"rank 1 at step 0.*different row groups"):
        straggler_analysis(CORPUS / "duplicate_across_row_groups.parquet", engine="dask", client=client,
                           partition_rows=1)


def test_dask_refuses_tables_and_csv(client):
    with pytest.raises(DomainError, match="Parquet"):
        straggler_analysis(HAND, engine="dask", client=client)
    with pytest.raises(DomainError, match="CSV"):
        straggler_analysis(CORPUS / "negative_duration.csv", engine="dask", client=client)


# ---------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------


@st.composite
def timer_tables(draw):
    n_ranks = draw(st.integers(1, 5))
    n_steps = draw(st.integers(1, 6))
    cells = [(r, s) for r in range(n_ranks) for s in range(n_steps)]
    present = draw(st.lists(st.booleans(), min_size=len(cells), max_size=len(cells)))
    chosen = [c for c, p in zip(cells, present, strict=True) if p] or [cells[0]]
    durations = draw(st.lists(st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.75]), min_size=len(chosen),
                              max_size=len(chosen)))
    order = draw(st.permutations(range(len(chosen))))
    rows = [(*chosen[i], durations[i]) for i in order]
    return pd.DataFrame(rows, columns=["rank", "step", "duration_s"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(timer_tables())
def test_last_arrivers_and_waits(table):
    res = straggler_analysis(table)
    ps, pr = reference(table)
    # every step has exactly one last arriver
    assert res.per_rank["arrived_last"].sum() == len(res.per_step) == table["step"].nunique()
    assert res.per_step["last_arriver"].tolist() == ps["last_arriver"].tolist()
    assert res.per_rank["arrived_last"].tolist() == pr["arrived_last"].tolist()
    # each rank's wait is the sum of (step max - own duration); waits sum the same both ways
    np.testing.assert_allclose(res.per_rank["wait_s"], pr["wait_s"], rtol=1e-12, atol=1e-12)
    assert res.per_rank["wait_s"].sum() == pytest.approx(res.per_step["wait_s"].sum(), abs=1e-9)
    assert res.per_rank["wait_caused_s"].sum() == pytest.approx(res.per_step["wait_s"].sum(), abs=1e-9)
    assert (res.per_rank["wait_s"] >= 0).all()
    assert res.per_rank["relative_score"].max() == 1.0
    assert res.per_rank["steps"].sum() == len(table)


@settings(max_examples=40, deadline=None)
@given(timer_tables(), st.lists(st.integers(1, 30), max_size=5))
def test_blocks_combine_to_the_whole(table, cuts):
    """Any split into blocks gives what one block gives (what the Dask engine relies on)."""
    whole = straggler_analysis(table)
    edges = sorted({0, len(table), *(c for c in cuts if c < len(table))})
    blocks = [TimerBlock("<table>", None, 1 + lo, hi - lo) for lo, hi in itertools.pairwise(edges)]
    parts = [table.iloc[b.first_row - 1:b.first_row - 1 + b.rows] for b in blocks]
    pairs = list(zip(parts, blocks, strict=True))
    sp = fleet._tree([fleet._pass1_block(p, b) for p, b in pairs], fleet._combine_steps)
    rp = fleet._tree([fleet._pass2_block(p, b, sp.steps, sp.max_s) for p, b in pairs], fleet._combine_ranks)
    assert_same(whole, fleet._finish(sp, rp, sp.ledger, "pandas", [], whole.threshold))


@settings(max_examples=25, deadline=None)
@given(timer_tables(), st.data())
def test_duplicate_in_any_block_is_refused(table, data):
    i = data.draw(st.integers(0, len(table) - 1))
    dup = pd.concat([table, table.iloc[[i]]], ignore_index=True)
    with pytest.raises(InputError, match="one timer per"):
        straggler_analysis(dup)
    cut = data.draw(st.integers(1, len(dup) - 1))
    blocks = [TimerBlock("x", None, 1, cut), TimerBlock("x", None, 1 + cut, len(dup) - cut)]
    with pytest.raises(InputError, match="one timer per"):
        fleet._combine_steps(fleet._pass1_block(dup.iloc[:cut], blocks[0]),
                             fleet._pass1_block(dup.iloc[cut:], blocks[1]))


# ---------------------------------------------------------------------------------------------------
# Bad inputs (tests/corpus/fleet, see its README)
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "row", "reason"), [
    ("negative_duration.csv", 4, "negative duration"),
    ("negative_duration.parquet", 4, "negative duration"),
    ("nan_duration.csv", 3, "missing duration"),
])
def test_bad_durations_are_rejected_with_file_and_row(name, row, reason):
    table, ledger = read_rank_timers(CORPUS / name)
    assert (ledger.read, ledger.kept, ledger.rejected) == (4, 3, 1) and ledger.balanced()
    entry = ledger.entries[0]
    assert (entry.file, entry.row, entry.field) == (str(CORPUS / name), row, "duration_s")
    assert reason in entry.reason
    assert len(table) == 3 and (table["duration_s"] >= 0).all()
    assert list(table.dtypes.astype(str)) == ["int64", "int64", "float64"]


def test_rejections_are_the_same_on_dask(client):
    on_dask = straggler_analysis(CORPUS / "negative_duration.parquet", engine="dask", client=client,
                                 partition_rows=1)
    on_pandas = straggler_analysis(CORPUS / "negative_duration.parquet")
    assert on_dask.ledger.to_dict() == on_pandas.ledger.to_dict()
    assert_same(on_pandas, on_dask)


@pytest.mark.parametrize(("name", "row", "field", "message"), [
    ("duplicate_rank_step.csv", 5, "rank, step", "rank 1 at step 0 (the other is row 3)"),
    ("duplicate_across_row_groups.parquet", 4, "rank, step", "rank 1 at step 0 (the other is row 2)"),
    ("missing_column.csv", 1, "duration_s", "missing column"),
    ("missing_column.parquet", None, "duration_s", "missing column"),
    ("empty.csv", 1, None, "empty file"),
    ("empty.parquet", 1, None, "empty file"),
    ("header_only.csv", 2, None, "no rank-timer rows"),
    ("zero_rows.parquet", 1, None, "no rank-timer rows"),
    ("wrong_dtype.csv", 3, "duration_s", "'fast'"),
    ("wrong_dtype.parquet", None, "duration_s", "numeric"),
    ("negative_rank.csv", 3, "rank", "must be >= 0"),
    ("fractional_step.csv", 3, "step", "whole number"),
])
def test_unrepairable_input_raises_naming_where(name, row, field, message):
    with pytest.raises(InputError) as err:
        read_rank_timers(CORPUS / name)
    e = err.value
    assert e.file == str(CORPUS / name)
    assert (e.row, e.field) == (row, field)
    assert message in str(e)


def test_paths_and_arguments(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_rank_timers(tmp_path / "missing.parquet")
    with pytest.raises(InputError, match="no rank-timer file"):
        read_rank_timers(tmp_path)
    with pytest.raises(DomainError, match="engine"):
        straggler_analysis(HAND, engine="spark")  # type: ignore[arg-type]
    with pytest.raises(DomainError, match="threshold"):
        straggler_analysis(HAND, threshold=1.5)
    with pytest.raises(DomainError, match="k must be"):
        straggler_analysis(HAND).top(0)
    with pytest.raises(DomainError, match="workers"):
        local_cluster(0)
    with pytest.raises(DomainError, match="mean step duration of 0"):
        straggler_analysis(pd.DataFrame({"rank": [0, 1], "step": [0, 0], "duration_s": [0.0, 1.0]}))
    everything_bad = pd.DataFrame({"rank": [0], "step": [0], "duration_s": [np.nan]})
    with pytest.raises(InputError, match="no usable rank-timer rows"):
        straggler_analysis(everything_bad)
    with pytest.raises(InputError) as err:
        straggler_analysis(pd.DataFrame({"rank": [0, 1], "step": [0, 0], "duration_s": [True, False]}))
    assert err.value.field == "duration_s"


def test_auto_engine_picks_pandas_for_small_files(tmp_path):
    info = synth_rank_timers(tmp_path / "s.parquet", ranks=4, steps=3, seed=0, stragglers={})
    assert straggler_analysis(info["path"], engine=None).engine == "pandas"



def test_read_is_the_registry_protocol():
    from fleetlib.program.readers import READERS, rank_timers

    good = CORPUS / "good_3_ranks_4_steps.csv"
    assert READERS["rank_timers"].read is rank_timers.read
    tables, ledger = rank_timers.read(good)
    assert list(tables) == ["rank_timers"] and tables["rank_timers"].shape == (12, 3)
    assert (ledger.read, ledger.kept) == (12, 12)
    listed, led = rank_timers.read([good])
    pd.testing.assert_frame_equal(listed["rank_timers"], tables["rank_timers"])
    _, led = rank_timers.read(CORPUS / "negative_duration.csv")
    assert led.read == 4 and led.rejected == 1 and led.entries[0].row == 4
    _, led = rank_timers.read(good, window="2024-01-01T00:00Z/2024-01-02T00:00Z")
    assert led.codes() == ["window_not_applied"]
    with pytest.raises(DomainError, match="no options"):
        rank_timers.read(good, engine="dask")


def test_rank_timer_passes_hold_memory_for_the_ranks_present_not_the_largest_id():
    n = 6_000
    rank = np.where(np.arange(n) % 3 == 2, 16_777_215, np.arange(n) % 3)
    step = np.arange(n) // 3
    table = pd.DataFrame({"rank": rank, "step": step, "duration_s": 1.0 + (np.arange(n) % 3) / 10})
    blocks = [TimerBlock("t", None, 1, n // 2), TimerBlock("t", None, 1 + n // 2, n - n // 2)]
    parts = [table.iloc[: n // 2], table.iloc[n // 2:]]
    tracemalloc.start()
    try:
        pairs = list(zip(parts, blocks, strict=True))
        sp = fleet._combine_steps(*(fleet._pass1_block(p, b) for p, b in pairs))
        rp = fleet._combine_ranks(*(fleet._pass2_block(p, b, sp.steps, sp.max_s) for p, b in pairs))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # the old bitmap (2,000 steps x 2 MiB per step) needed ~4 GiB
    assert rp.ranks.tolist() == [0, 1, 16_777_215]
    assert rp.count.tolist() == [2_000, 2_000, 2_000]
    # rank 16,777,215 is slowest (1.2 s) at every step: it is every step's last arriver
    assert set(sp.last.tolist()) == {16_777_215}
    dup = pd.concat([parts[0], parts[1].iloc[:0], table.iloc[[5]]])
    with pytest.raises(InputError, match="two rows for rank 16777215 at step 1"):
        fleet._combine_steps(fleet._pass1_block(parts[0], blocks[0]),
                                  fleet._pass1_block(dup.iloc[-1:], TimerBlock("u", None, 1, 1)))


def test_the_individual_score_sees_a_rank_slow_down_against_its_own_history():
    # 4 ranks x 200 steps at 1.0 s; rank 3 runs 1.0 s until step 120 and 1.5 s after; rank 1 runs
    # 1.2 s throughout (slower than the others, but no slower than it ever was)
    steps = np.arange(200)
    rows = []
    for rank, dur in ((0, np.full(200, 1.0)), (1, np.full(200, 1.2)), (2, np.full(200, 1.0)),
                      (3, np.where(steps >= 120, 1.5, 1.0))):
        rows.append(pd.DataFrame({"rank": rank, "step": steps, "duration_s": dur}))
    res = straggler_analysis(pd.concat(rows, ignore_index=True), threshold=0.8)
    pr = res.per_rank.set_index("rank")
    # steps fall in 10 windows of 20: rank 3's best window mean is 1.0 s, its last 1.5 s
    assert pr.loc[3, "individual_score"] == pytest.approx(1.0 / 1.5)
    assert pr.loc[[0, 1, 2], "individual_score"].tolist() == [1.0, 1.0, 1.0]
    assert pr["slowed_down"].tolist() == [False, False, False, True]
    # the relative score sees rank 1 (slowest on average) and not rank 3 (mean 1.2 s as well)
    assert pr.loc[1, "relative_score"] == pytest.approx(1.0 / 1.2)
    assert pr.loc[3, "relative_score"] == pytest.approx(1.0 / 1.2)

