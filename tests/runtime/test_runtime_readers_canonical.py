"""The canonical reader on Parquet timelines, checked against truths it does not compute itself.

* timelines written by :func:`fleetlib.runtime.synth.write_timeline` from tables built here read back
  as those tables, row for row, with a clean ledger;
* fleet-scale partitions (:func:`fleetlib.fleet.scale.synth_fleet_scale`) read back with every row
  kept, as many steps and events as the file's ``record`` column counts (counted with pyarrow), the
  job ids the file holds, in (job, start) and (job, time) order;
* a partition changed in one known place is booked at that row, with that field and reason: the
  expected ledger entry is written down from the change, not taken from the reader.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.fleet.synth import synth_fleet
from fleetlib.quality import InputError
from fleetlib.runtime.readers import bundled_path, read_canonical, write_canonical
from fleetlib.runtime.schema import EVENT_COLUMNS, STEP_COLUMNS
from fleetlib.runtime.synth import write_timeline
from fleetlib.runtime.timeline import tables_from_seconds

_T0 = pd.Timestamp("2024-03-01T00:00:00Z")


@pytest.fixture(scope="module")
def partitions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("scale")
    synth_fleet_scale(out, devices=128, days=1.0, seed=7, partitions=2, steps_per_job=(20, 60))
    return sorted((out / "timelines").glob("*.parquet"))


def _entries(ledger) -> list[tuple]:
    return [(e.action, e.row, e.field, e.reason) for e in ledger.entries]


# ---------------------------------------------------------------------------------------------------
# Clean files: the tables that were written
# ---------------------------------------------------------------------------------------------------


def _known_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two jobs with a failure, a restore to a committed step, input waits and a checkpoint."""
    a = tables_from_seconds(
        [(0, 1, 10.0, 12.0, 0.5), (0, 2, 12.0, 14.0), (0, 3, 14.0, 17.0, 1.0), (1, 3, 40.0, 42.0)],
        [(0, 0.0, "gang_complete"), (0, 14.0, "checkpoint_begin", 2), (0, 14.0, "checkpoint_commit", 2, 0.25),
         (0, 17.5, "failure"), (0, 18.0, "release"), (1, 30.0, "gang_complete"), (1, 35.0, "restore", 2),
         (1, 50.0, "release")], job_id="b-job", origin=_T0)
    b = tables_from_seconds([(0, 1, 1.0, 3.0), (0, 2, 3.0, 5.5, 2.0)],
                            [(0, 0.0, "gang_complete"), (0, 9.0, "release")], job_id="a-job", origin=_T0)
    return (pd.concat([a[0], b[0]], ignore_index=True), pd.concat([a[1], b[1]], ignore_index=True))


def test_a_written_timeline_reads_back_as_the_tables_written(tmp_path):
    steps, events = _known_tables()
    path = write_timeline(steps, events, tmp_path / "t.parquet")
    tables, ledger = read_canonical(path)
    assert (ledger.read, ledger.kept, _entries(ledger), ledger.flags) == (len(steps) + len(events),
                                                                         len(steps) + len(events), [], [])
    want = steps.sort_values(["job_id", "start"], kind="stable").reset_index(drop=True)
    got = tables.steps
    assert got["job_id"].tolist() == want["job_id"].tolist()
    for col in ("attempt", "step", "input_wait_s"):
        np.testing.assert_array_equal(got[col].to_numpy(), want[col].to_numpy(dtype=got[col].dtype))
    for col in ("start", "end"):
        assert (got[col] == want[col]).all() and str(got[col].dtype) == "datetime64[ns, UTC]"
    ev = tables.events
    assert len(ev) == len(events) and ev["job_id"].is_monotonic_increasing
    # simultaneous events in their natural order: the checkpoint's begin before its commit
    b = ev[ev["job_id"] == "b-job"]
    assert b["kind"].tolist() == ["gang_complete", "checkpoint_commit", "checkpoint_begin", "failure",
                                  "release", "gang_complete", "restore", "release"]
    assert b["duration_s"].isna().tolist() == [True, False, True, True, True, True, True, True]
    assert str(ev["step"].dtype) == "Int64" and str(ev["duration_s"].dtype) == "Float64"
    # the provenance is the file's 1-based rows: steps first, events after them
    assert sorted(got["source_row"]) == list(range(1, len(steps) + 1))
    assert sorted(ev["source_row"]) == list(range(len(steps) + 1, len(steps) + len(events) + 1))


def test_fleet_scale_partitions_read_whole(partitions):
    for path in partitions:
        table = pq.read_table(path)
        record = table.column("record").cast(pa.string())
        n_steps = pc.sum(pc.equal(record, "step")).as_py()
        n_events = pc.sum(pc.equal(record, "event")).as_py()
        jobs = set(pc.unique(table.column("job_id").cast(pa.string())).to_pylist())
        tables, ledger = read_canonical(path)
        assert (ledger.read, ledger.kept, ledger.entries, ledger.flags) == (table.num_rows, table.num_rows,
                                                                            [], [])
        assert (len(tables.steps), len(tables.events)) == (n_steps, n_events)
        assert set(tables.steps["job_id"]) | set(tables.events["job_id"]) == jobs
        s = tables.steps
        key = pd.DataFrame({"j": s["job_id"], "t": s["start"]})
        assert key.equals(key.sort_values(["j", "t"], kind="stable").reset_index(drop=True))
        e = tables.events
        assert e["job_id"].is_monotonic_increasing
        assert e.groupby("job_id")["time"].apply(lambda t: t.is_monotonic_increasing).all()
        assert list(s.columns[:6]) == list(STEP_COLUMNS) and list(e.columns[:6]) == list(EVENT_COLUMNS)


def test_two_partitions_in_one_call_are_their_union(partitions):
    both, ledger = read_canonical(partitions)
    parts = [read_canonical(p) for p in partitions]
    assert ledger.read == sum(pq.read_metadata(p).num_rows for p in partitions) == ledger.kept
    assert len(both.steps) == sum(len(t.steps) for t, _ in parts)
    assert set(both.steps["source_file"].cat.categories) == {str(p) for p in partitions}


def test_synthetic_fleet_timelines_with_failures_and_restores(tmp_path):
    bundle = synth_fleet(tmp_path / "fleet", devices=96, days=1.0, seed=2)
    files = sorted((Path(bundle.manifest).parent / "timelines").glob("*.parquet"))
    kinds = set()
    for path in files:
        tables, ledger = read_canonical(path)
        assert ledger.kept == ledger.read == pq.read_metadata(path).num_rows
        kinds |= set(tables.events["kind"])
    assert {"failure", "restore"} <= kinds


def test_the_demo_pair_as_one_combined_parquet_and_as_two_files(tmp_path):
    demo = [bundled_path("demo-7b-ft_steps.csv"), bundled_path("demo-7b-ft_events.csv")]
    tables, ledger = read_canonical(demo)
    assert ledger.read == 36  # the data rows of the two CSV files
    combined = write_canonical(tables, tmp_path / "demo.parquet")
    back, back_ledger = read_canonical(combined)
    assert back_ledger.read == back_ledger.kept == 36
    steps, events = tmp_path / "steps.parquet", tmp_path / "events.parquet"
    tables.steps[list(STEP_COLUMNS)].to_parquet(steps, index=False)
    tables.events[list(EVENT_COLUMNS)].to_parquet(events, index=False)
    two, _ = read_canonical([steps, events])
    for got in (back, two):
        for name in ("steps", "events"):
            pd.testing.assert_frame_equal(got[name].drop(columns=["source_file", "source_row"]),
                                          tables[name].drop(columns=["source_file", "source_row"]))


# ---------------------------------------------------------------------------------------------------
# One known change: the entry it must make
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def original(partitions) -> tuple[pa.Table, pd.DataFrame, int]:
    table = pq.read_table(partitions[0])
    frame = table.to_pandas()
    return table, frame, int((frame["record"].astype(str) == "step").sum())


def _write(original, tmp_path, frame: pd.DataFrame) -> Path:
    table = original[0]
    schema = pa.schema([f for f in table.schema if f.name in frame.columns])
    path = tmp_path / "changed.parquet"
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)
    return path


def _read_changed(original, tmp_path, frame):
    return read_canonical(_write(original, tmp_path, frame))


def test_a_copied_step_is_rejected_at_its_row(original, tmp_path):
    _, frame, n = original
    changed = pd.concat([frame, frame.iloc[[5]]], ignore_index=True)
    tables, ledger = _read_changed(original, tmp_path, changed)
    row = len(changed)  # the copy is the last row
    source = tmp_path / "changed.parquet"
    step, attempt = int(frame["step"][5]), int(frame["attempt"][5])
    reason = f"duplicate of the record of step {step} (attempt {attempt}) at {source} row 6"
    assert _entries(ledger) == [("rejected", row, "step", reason)]
    assert len(tables.steps) == n


def test_an_overlapping_step_is_rejected(original, tmp_path):
    _, frame, _ = original
    f = frame.copy()
    f.loc[6, "start"] = f.loc[5, "end"] - pd.Timedelta(seconds=1)
    _, ledger = _read_changed(original, tmp_path, f)
    [(action, row, field, reason)] = _entries(ledger)
    assert (action, row, field) == ("rejected", 7, "start")
    step, before = int(f["step"][6]), int(f["step"][5])
    assert reason.startswith(f"step {step} overlaps the step before it (step {before}) by 1 s")


@pytest.mark.parametrize(("row", "field", "value", "reason"), [
    (4, "start", pd.NaT, "missing start"),
    (8, "input_wait_s", 1e6, "input wait is longer than the step itself"),
    (3, "step", -3, "step must be >= 0"),
    (10, "input_wait_s", -0.5, "input_wait_s must be >= 0"),
    (10, "input_wait_s", np.inf, "input_wait_s inf is not a finite number"),
])
def test_one_bad_value_is_rejected_at_its_row(original, tmp_path, row, field, value, reason):
    _, frame, _ = original
    f = frame.copy()
    f.loc[row - 1, field] = value
    _, ledger = _read_changed(original, tmp_path, f)
    assert _entries(ledger) == [("rejected", row, field, reason)]


def test_a_time_outside_the_plausible_range_is_rejected(original, tmp_path):
    _, frame, _ = original
    f = frame.copy()
    f.loc[4, "start"] = pd.Timestamp("1901-01-01", tz="UTC")
    _, ledger = _read_changed(original, tmp_path, f)
    [(action, row, field, reason)] = _entries(ledger)
    assert (action, row, field) == ("rejected", 5, "start")
    assert reason.startswith("start reads as 1901-01-01T00:00:00+00:00: outside the plausible range")


def test_steps_listed_out_of_order_are_repaired_into_order(original, tmp_path):
    _, frame, _ = original
    idx = list(range(len(frame)))
    idx[8], idx[9] = idx[9], idx[8]
    tables, ledger = _read_changed(original, tmp_path, frame.iloc[idx].reset_index(drop=True))
    assert _entries(ledger) == [("repaired", 10, "start", "listed out of time order: moved into time order")]
    assert tables.steps["source_row"].tolist()[8:10] == [10, 9]  # back in time order


def test_jobs_listed_in_another_order_are_sorted_with_nothing_to_book(original, tmp_path):
    _, frame, n = original
    s, e = frame.iloc[:n], frame.iloc[n:]
    s = (s.assign(_j=s["job_id"].astype(str)).sort_values("_j", ascending=False, kind="stable")
         .drop(columns="_j"))
    tables, ledger = _read_changed(original, tmp_path, pd.concat([s, e], ignore_index=True))
    assert ledger.entries == [] and ledger.flags == []
    assert tables.steps["job_id"].is_monotonic_increasing and tables.steps["source_row"].iloc[0] != 1


def test_event_changes_are_booked(original, tmp_path):
    _, frame, n = original
    f = frame.copy()
    f["kind"] = f["kind"].astype(object)
    f.loc[n + 1, "kind"] = "mystery_pause"
    f.loc[n, "kind"] = "Gang-Complete"
    f = pd.concat([f, f.iloc[[n + 2]]], ignore_index=True)  # a copied event, last
    _, ledger = _read_changed(original, tmp_path, f)
    was = frame["kind"][n + 2]
    assert _entries(ledger) == [
        ("rejected", len(f), "kind", f"duplicate of the {was} event at row {n + 3}"),
        ("repaired", n + 1, "kind", "kind 'Gang-Complete' normalised to 'gang_complete'"),
    ]
    assert [(g.code, g.row) for g in ledger.flags] == [("unknown_event_kind", n + 2)]


def test_an_event_listed_late_is_repaired(original, tmp_path):
    _, frame, n = original
    e = frame.iloc[n:]
    rows = e.index[e["job_id"] == e["job_id"].iloc[0]]
    idx = list(range(len(frame)))
    idx[rows[0]], idx[rows[-1]] = idx[rows[-1]], idx[rows[0]]
    _, ledger = _read_changed(original, tmp_path, frame.iloc[idx].reset_index(drop=True))
    repaired = [e.row for e in ledger.entries if e.action == "repaired"]
    assert all(e.reason == "listed out of time order: moved into time order" for e in ledger.entries)
    assert rows[0] + 2 in repaired  # the job's last event, listed first, is now late


def test_attempts_come_from_the_gang_complete_markers(original, tmp_path):
    _, frame, n = original
    tables, ledger = _read_changed(original, tmp_path, frame.drop(columns="attempt"))
    assert ledger.entries == [] and ledger.flags == [] and (tables.steps["attempt"] == 0).all()
    f = frame.drop(columns="attempt")
    job = f["job_id"].iloc[0]
    steps = f.index[(f.index < n) & (f["job_id"] == job)]
    later = steps[len(steps) // 2:]
    f.loc[later, "step"] = np.arange(1, len(later) + 1)
    drop = (f.index >= n) & (f["job_id"] == job) & (f["kind"].astype(str) == "gang_complete")
    _, ledger = _read_changed(original, tmp_path, f[~drop].reset_index(drop=True))
    assert [(g.code, g.row) for g in ledger.flags] == [("restart_inferred_from_step_numbers", later[0] + 1)]


def test_large_step_numbers_are_read_exactly(original, tmp_path):
    _, frame, _ = original
    f = frame.copy()
    f["step"] = f["step"].astype("Int64")
    f.loc[2, "step"] = 2**62 + 1  # not a float64: read as the integer it is
    tables, ledger = _read_changed(original, tmp_path, f)
    assert ledger.entries == [] and 2**62 + 1 in set(tables.steps["step"])


def test_naive_parquet_times_need_a_zone(partitions, tmp_path):
    table = pq.read_table(partitions[0])
    for col in ("start", "end", "time"):
        naive = table.column(col).cast(pa.timestamp("ns"))
        table = table.set_column(table.column_names.index(col), col, naive)
    path = tmp_path / "naive.parquet"
    pq.write_table(table, path)
    with pytest.raises(InputError, match="pass tz=") as err:
        read_canonical(path)
    assert err.value.row == 1 and err.value.field == "start"
    _, ledger = read_canonical(path, tz="UTC")
    assert {e.reason for e in ledger.entries} == {
        "naive start localised to tz=UTC; naive end localised to tz=UTC", "naive time localised to tz=UTC"}
    assert ledger.repaired == table.num_rows


def test_chunked_files_and_plain_text_job_ids_read_as_the_original(partitions, tmp_path):
    table = pq.read_table(partitions[0])
    text = table.column("job_id").cast(pa.string())
    table = table.set_column(table.column_names.index("job_id"), "job_id", text)
    path = tmp_path / "chunked.parquet"
    pq.write_table(table, path, row_group_size=97)
    got, ledger = read_canonical(path)
    want, _ = read_canonical(partitions[0])
    assert ledger.kept == ledger.read
    for name in ("steps", "events"):
        pd.testing.assert_frame_equal(got[name].drop(columns="source_file"),
                                      want[name].drop(columns="source_file"))


def test_damaged_and_ambiguous_files_are_refused_by_name(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        read_canonical(bad)
    indexed = tmp_path / "indexed.parquet"  # a pandas index is not a column (pandas drops it too)
    demo, _ = read_canonical(bundled_path("demo-7b-ft_steps.csv"))
    demo.steps[list(STEP_COLUMNS)].set_index("job_id").to_parquet(indexed)
    with pytest.raises(InputError, match="job_id"):
        read_canonical(indexed)
    twice = tmp_path / "twice.csv"
    twice.write_text("job_id,step,Start,start,end\n")
    with pytest.raises(InputError, match="two columns are named 'start'") as err:
        read_canonical(twice)
    assert err.value.row == 1
