"""The canonical reader's Parquet fast path returns exactly what the general path returns.

Each case reads the same files twice: through :func:`read_fast` (None when it hands over to the
general path) and through the general path alone.  Clean canonical-typed files must take the fast
path and give equal frames and an equal ledger; mutated files must either be handed over (and the
general path's rejection or repair must show in the ledger) or, where the fast path records the
finding itself (an unknown event kind, the cross checks), give the same ledger.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pandas.testing import assert_frame_equal

from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.fleet.synth import synth_fleet
from fleetlib.quality import InputError
from fleetlib.runtime.readers import canonical, read_canonical
from fleetlib.runtime.readers._common import bundled_path
from fleetlib.runtime.readers._parquet_fast import read_fast
from fleetlib.runtime.schema import EVENT_COLUMNS, STEP_COLUMNS


def _general(paths):
    return canonical._read_general(paths, tz=None, job_id=None)


def _assert_same(fast, general) -> None:
    assert_frame_equal(fast[0].steps, general[0].steps)
    assert_frame_equal(fast[0].events, general[0].events)
    assert fast[1] == general[1]


def _fast_equals_general(paths) -> tuple:
    fast = read_fast(paths)
    assert fast is not None, "a clean canonical-typed file must take the fast path"
    general = _general(paths)
    _assert_same(fast, general)
    _assert_same(read_canonical(paths), general)  # the public reader takes the fast path
    return fast


@pytest.fixture(scope="module")
def demo_tables():
    return read_canonical([bundled_path("demo-7b-ft_steps.csv"), bundled_path("demo-7b-ft_events.csv")])[0]


@pytest.fixture(scope="module")
def scale_partitions(tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("scale")
    synth_fleet_scale(out, devices=128, days=1.0, seed=7, partitions=2, steps_per_job=(20, 60))
    return sorted((out / "timelines").glob("*.parquet"))


def test_bundled_canonical_files_as_one_combined_parquet(tmp_path, demo_tables):
    path = canonical.write_canonical(demo_tables, tmp_path / "demo.parquet")
    fast = _fast_equals_general(path)
    assert len(fast[0].steps) == len(demo_tables.steps) and len(fast[0].events) == len(demo_tables.events)
    assert fast[0].steps["source_row"].min() == 1


def test_bundled_canonical_files_as_separate_steps_and_events_parquet(tmp_path, demo_tables):
    steps, events = tmp_path / "steps.parquet", tmp_path / "events.parquet"
    demo_tables.steps[list(STEP_COLUMNS)].to_parquet(steps, index=False)
    demo_tables.events[list(EVENT_COLUMNS)].to_parquet(events, index=False)
    fast = _fast_equals_general([steps, events])
    assert set(fast[0].steps["source_file"].cat.categories) == {str(steps)}
    rows = np.sort(fast[0].steps["source_row"].to_numpy())
    np.testing.assert_array_equal(rows, np.arange(1, len(demo_tables.steps) + 1))


def test_fleet_scale_partitions(scale_partitions):
    assert scale_partitions
    for path in scale_partitions:
        fast = _fast_equals_general(path)
        assert fast[1].kept == pq.read_metadata(path).num_rows  # every row kept, none repaired


def test_fleet_scale_both_partitions_in_one_call_fall_back(scale_partitions):
    # two steps tables in one call: the general path's checks span files, so it reads them
    assert read_fast(scale_partitions) is None
    _assert_same(read_canonical(scale_partitions), _general(scale_partitions))


def test_synthetic_fleet_timelines_with_failures_and_restores(tmp_path):
    bundle = synth_fleet(tmp_path / "fleet", devices=96, days=1.0, seed=2)
    files = sorted((Path(bundle.manifest).parent / "timelines").glob("*.parquet"))
    assert files
    kinds = set()
    for path in files:
        fast = _fast_equals_general(path)
        kinds |= set(fast[0].events["kind"])
    assert {"failure", "restore"} <= kinds  # the cross checks ran on the fast path's tables


# --- mutated files -----------------------------------------------------------------------------------


def _table(path: Path) -> pa.Table:
    return pq.read_table(path)


def _write(table: pa.Table, path: Path) -> Path:
    pq.write_table(table, path)
    return path


def _steps_and_events(table: pa.Table) -> tuple[pd.DataFrame, int]:
    frame = table.to_pandas()
    return frame, int((frame["record"].astype(str) == "step").sum())


def _mutate(scale_partitions, tmp_path, change) -> Path:
    """Write the first partition changed by ``change(frame, n_steps)``, in the partition's own types."""
    original = _table(scale_partitions[0])
    frame, n_steps = _steps_and_events(original)
    frame = change(frame, n_steps)
    schema = pa.schema([f for f in original.schema if f.name in frame.columns])
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    return _write(table, tmp_path / "mutated.parquet")


def test_partition_rewritten_unchanged_takes_the_fast_path(scale_partitions, tmp_path):
    # the mutations below start from this round trip: unchanged, it is clean
    _fast_equals_general(_mutate(scale_partitions, tmp_path, lambda f, n: f))


def _ledger_says(ledger, action: str, field: str | None, words: str) -> bool:
    return any(e.action == action and (field is None or e.field == field) and words in e.reason
               for e in ledger.entries)


def _handed_over(path) -> tuple:
    assert read_fast(path) is None
    general = _general(path)
    _assert_same(read_canonical(path), general)
    return general


def test_duplicate_step_is_rejected_by_the_general_path(scale_partitions, tmp_path):
    path = _mutate(scale_partitions, tmp_path, lambda f, n: pd.concat([f, f.iloc[[5]]], ignore_index=True))
    _, ledger = _handed_over(path)
    assert _ledger_says(ledger, "rejected", "step", "duplicate of the record of step")


def test_overlapping_step_is_rejected(scale_partitions, tmp_path):
    def overlap(f, n):
        f = f.copy()
        f.loc[6, "start"] = f.loc[5, "end"] - pd.Timedelta(seconds=1)
        return f
    _, ledger = _handed_over(_mutate(scale_partitions, tmp_path, overlap))
    assert _ledger_says(ledger, "rejected", "start", "overlaps the step before it")


def test_null_start_is_rejected(scale_partitions, tmp_path):
    def null(f, n):
        f = f.copy()
        f.loc[3, "start"] = pd.NaT
        return f
    _, ledger = _handed_over(_mutate(scale_partitions, tmp_path, null))
    assert _ledger_says(ledger, "rejected", "start", "missing start")


def test_out_of_range_time_is_rejected(scale_partitions, tmp_path):
    def old(f, n):
        f = f.copy()
        f.loc[4, "start"] = pd.Timestamp("1901-01-01", tz="UTC")
        return f
    _, ledger = _handed_over(_mutate(scale_partitions, tmp_path, old))
    assert _ledger_says(ledger, "rejected", "start", "outside the plausible range")


def test_wait_longer_than_its_step_is_rejected(scale_partitions, tmp_path):
    def long_wait(f, n):
        f = f.copy()
        f.loc[7, "input_wait_s"] = 1e6
        return f
    _, ledger = _handed_over(_mutate(scale_partitions, tmp_path, long_wait))
    assert _ledger_says(ledger, "rejected", "input_wait_s", "longer than the step")


def test_unsorted_steps_are_repaired_into_order(scale_partitions, tmp_path):
    def swap(f, n):
        idx = list(range(len(f)))
        idx[8], idx[9] = idx[9], idx[8]
        return f.iloc[idx].reset_index(drop=True)
    tables, ledger = _handed_over(_mutate(scale_partitions, tmp_path, swap))
    assert _ledger_says(ledger, "repaired", "start", "out of time order")
    assert tables.steps.groupby("job_id")["start"].apply(lambda s: s.is_monotonic_increasing).all()


def test_steps_grouped_in_other_job_order_take_the_fast_path(scale_partitions, tmp_path):
    # jobs listed in reverse text order, each job's rows in time order: no repair, the output sorted
    def reverse_jobs(f, n):
        s, e = f.iloc[:n], f.iloc[n:]
        s = s.assign(_j=s["job_id"].astype(str)).sort_values("_j", ascending=False, kind="stable")
        return pd.concat([s.drop(columns="_j"), e], ignore_index=True)
    path = _mutate(scale_partitions, tmp_path, reverse_jobs)
    fast = _fast_equals_general(path)
    assert fast[0].steps["source_row"].iloc[0] != 1


def test_unknown_event_kind_is_flagged_on_the_fast_path(scale_partitions, tmp_path):
    def unknown(f, n):
        f = f.copy()
        f["kind"] = f["kind"].astype(object)
        f.loc[n + 1, "kind"] = "mystery_pause"
        return f
    fast = _fast_equals_general(_mutate(scale_partitions, tmp_path, unknown))
    codes = [g.code for g in fast[1].flags]
    assert codes == ["unknown_event_kind"]


def test_kind_needing_normalisation_is_repaired(scale_partitions, tmp_path):
    def shout(f, n):
        f = f.copy()
        f["kind"] = f["kind"].astype(object)
        f.loc[n, "kind"] = "Gang-Complete"
        return f
    _, ledger = _handed_over(_mutate(scale_partitions, tmp_path, shout))
    assert _ledger_says(ledger, "repaired", "kind", "normalised to 'gang_complete'")


def test_duplicate_event_is_rejected(scale_partitions, tmp_path):
    path = _mutate(scale_partitions, tmp_path,
                   lambda f, n: pd.concat([f, f.iloc[[n + 1]]], ignore_index=True))
    _, ledger = _handed_over(path)
    assert _ledger_says(ledger, "rejected", "kind", "duplicate of the")


def test_events_out_of_order_are_repaired(scale_partitions, tmp_path):
    def late(f, n):
        e = f.iloc[n:]
        job = e["job_id"].iloc[0]
        rows = e.index[e["job_id"] == job]
        idx = list(range(len(f)))
        a, b = rows[0], rows[-1]
        idx[a], idx[b] = idx[b], idx[a]
        return f.iloc[idx].reset_index(drop=True)
    _, ledger = _handed_over(_mutate(scale_partitions, tmp_path, late))
    assert _ledger_says(ledger, "repaired", "time", "out of time order")


def test_missing_attempt_column_is_assigned_from_markers_on_the_fast_path(scale_partitions, tmp_path):
    path = _mutate(scale_partitions, tmp_path, lambda f, n: f.drop(columns="attempt"))
    tables, ledger = _fast_equals_general(path)
    assert (tables.steps["attempt"] == 0).all() and not ledger.flags


def test_missing_attempts_without_markers_infer_a_restart(scale_partitions, tmp_path):
    # one job loses its gang_complete markers and numbers its later steps from 1 again: a restart
    # is inferred from the step numbers, and flagged, on both paths alike
    def restart(f, n):
        f = f.drop(columns="attempt")
        job = f["job_id"].iloc[0]
        steps = f.index[(f.index < n) & (f["job_id"] == job)]
        later = steps[len(steps) // 2:]
        f.loc[later, "step"] = np.arange(1, len(later) + 1)
        drop = (f.index >= n) & (f["job_id"] == job) & (f["kind"].astype(str) == "gang_complete")
        return f[~drop].reset_index(drop=True)
    _, ledger = _fast_equals_general(_mutate(scale_partitions, tmp_path, restart))
    assert [g.code for g in ledger.flags] == ["restart_inferred_from_step_numbers"]


def test_separate_steps_file_without_attempts_or_events(tmp_path, demo_tables):
    path = tmp_path / "steps.parquet"
    demo_tables.steps[["job_id", "step", "start", "end"]].to_parquet(path, index=False)
    tables, _ = _fast_equals_general(path)
    assert tables.events.empty and (tables.steps["input_wait_s"] == 0.0).all()


def test_huge_step_number_is_handed_over(scale_partitions, tmp_path):
    def huge(f, n):
        f = f.copy()
        f["step"] = f["step"].astype("Int64")
        f.loc[2, "step"] = 2**62
        return f
    path = _mutate(scale_partitions, tmp_path, huge)
    assert read_fast(path) is None
    _assert_same(read_canonical(path), _general(path))


def test_naive_times_are_handed_over_and_refused(scale_partitions, tmp_path):
    table = _table(scale_partitions[0])
    naive = pa.timestamp("ns")
    for col in ("start", "end", "time"):
        table = table.set_column(table.column_names.index(col), col, table.column(col).cast(naive))
    path = _write(table, tmp_path / "naive.parquet")
    assert read_fast(path) is None
    with pytest.raises(InputError, match="naive"):
        read_canonical(path)


def test_csv_and_damaged_files_are_handed_over(tmp_path):
    csv = bundled_path("demo-7b-ft_steps.csv")
    assert read_fast(csv) is None
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    assert read_fast(bad) is None
    with pytest.raises(InputError, match="Parquet"):
        read_canonical(bad)


def test_many_row_groups_and_plain_text_columns(scale_partitions, tmp_path):
    # small row groups: every column in many chunks, dictionaries per chunk; job ids as plain text
    table = _table(scale_partitions[0])
    i = table.column_names.index("job_id")
    table = table.set_column(i, "job_id", table.column("job_id").cast(pa.string()))
    path = tmp_path / "chunked.parquet"
    pq.write_table(table, path, row_group_size=97)
    assert pq.read_metadata(path).num_row_groups > 10
    _fast_equals_general(path)


def test_a_column_pandas_reads_as_the_index_is_handed_over(tmp_path, demo_tables):
    # written with job_id as the pandas index: pandas (the general path) reads it as the index and
    # drops it, so the file has no job_id column for it; the fast path must not read it as one
    path = tmp_path / "indexed.parquet"
    demo_tables.steps[list(STEP_COLUMNS)].set_index("job_id").to_parquet(path)
    assert read_fast(path) is None
    with pytest.raises(InputError, match="job_id"):
        read_canonical(path)


def test_random_mutations_fast_result_always_equals_the_general_path(scale_partitions, tmp_path):
    # whatever a mutation does, a result the fast path gives must be the general path's, and a file it
    # hands over must carry something the general path rejects or repairs; a job's block of steps
    # moved whole stays clean and must take the fast path
    rng = np.random.default_rng(11)
    original = _table(scale_partitions[0])
    frame, n = _steps_and_events(original)
    taken = 0
    for trial in range(24):
        f = frame.copy()
        i = int(rng.integers(1, n - 1))
        what = trial % 6
        if what == 0:  # swap two neighbouring rows
            idx = np.arange(len(f))
            idx[[i, i + 1]] = idx[[i + 1, i]]
            f = f.iloc[idx].reset_index(drop=True)
        elif what == 1:  # a start moved by up to +-3 s (may overlap, or invert the step)
            f.loc[i, "start"] += pd.Timedelta(seconds=int(rng.integers(-3, 4)))
        elif what == 2:  # an end moved earlier by up to 3 s (may end before the wait)
            f.loc[i, "end"] -= pd.Timedelta(seconds=int(rng.integers(0, 4)))
        elif what == 3:  # an event copied
            f = pd.concat([f, f.iloc[[n + int(rng.integers(0, len(f) - n))]]], ignore_index=True)
        elif what == 4:  # an event time moved
            j = n + int(rng.integers(0, len(f) - n))
            f.loc[j, "time"] += pd.Timedelta(seconds=int(rng.integers(-600, 600)))
        else:  # the steps of the first job moved to the end of the steps (a block: stays clean)
            first = f.index[(f.index < n) & (f["job_id"] == f["job_id"].iloc[0])]
            rest = f.index[(f.index < n) & ~f.index.isin(first)]
            f = f.loc[list(rest) + list(first) + list(range(n, len(f)))].reset_index(drop=True)
        schema = pa.schema(list(original.schema))
        table = pa.Table.from_pandas(f, schema=schema, preserve_index=False)
        path = _write(table, tmp_path / f"m{trial}.parquet")
        fast = read_fast(path)
        general = _general(path)
        if fast is not None:
            taken += 1
            _assert_same(fast, general)
        else:
            assert general[1].rejected or general[1].repaired  # handed over for a reason it names
        if what == 5:
            assert fast is not None
    assert taken >= 4
