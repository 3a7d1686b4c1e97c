"""Canonical scheduler tables: validation, named repairs, rejections and the ledger.

The computation-side bad inputs of issue 3 item 7 live here: overlapping attempts, release before
gang completion, an elastic job without a gang-complete marker (refused) versus a rigid one
(inferred and flagged), naive and mixed times, duplicate rows, unknown job states.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fleetlib.quality import InputError, Ledger
from fleetlib.scheduling.records import (
    SchedulerRecords,
    infer_gang_complete,
    times_ns,
    validate_allocations,
    validate_capacity,
    validate_occupancy,
    validate_queue,
    validate_reservations,
)
from fleetlib.scheduling.schema import ALLOCATION_COLUMNS, END_STATES

T0 = pd.Timestamp("2025-03-01", tz="UTC")


def t(h: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(hours=h)


def alloc_rows(*rows: dict) -> pd.DataFrame:
    """Allocation rows with defaults; each dict overrides fields (times given in hours)."""
    base = {"job_id": "j", "attempt": 0, "pool": "p", "devices": 8, "submit": 0.0, "first_assigned": 1.0,
            "gang_complete": 2.0, "release": 5.0, "priority": 0, "elastic": False, "end_state": "completed",
            "requested_devices": 8}
    out = []
    for r in rows:
        d = {**base, **r}
        for c in ("submit", "first_assigned", "gang_complete", "release"):
            d[c] = pd.NaT if d[c] is None else t(d[c])
        out.append(d)
    df = pd.DataFrame(out)[list(ALLOCATION_COLUMNS)]
    for c in ("submit", "first_assigned", "gang_complete", "release"):
        df[c] = pd.to_datetime(df[c], utc=True)
    return df


def balanced(led: Ledger) -> bool:
    return led.read == led.kept + led.repaired + led.rejected


def reasons(led: Ledger, action: str) -> list[str]:
    return [e.reason for e in led.entries if e.action == action]


# --- clean input -------------------------------------------------------------------------------


def test_clean_table_is_kept_unchanged_with_canonical_dtypes():
    df = alloc_rows({"job_id": "a"}, {"job_id": "b", "pool": "q", "devices": 4, "requested_devices": 4})
    out, led = validate_allocations(df)
    assert (led.read, led.kept, led.repaired, led.rejected) == (2, 2, 0, 0)
    assert list(out.columns) == list(ALLOCATION_COLUMNS)
    for c in ("submit", "first_assigned", "gang_complete", "release"):
        assert str(out[c].dtype) == "datetime64[ns, UTC]"
        assert (out[c] == df[c]).all()
    assert out["devices"].tolist() == [8, 4]
    assert list(out["pool"].astype(str)) == ["p", "q"]
    assert list(out["end_state"].cat.categories) == list(END_STATES)



def test_validated_table_is_editable_and_separate_from_the_input():
    # pandas' copy-on-write gives read-only views of the input's columns; the validated table must still
    # be the caller's own: editable, and editing it leaves the input as it was
    df = alloc_rows({"job_id": 1}, {"job_id": 2, "devices": 4, "requested_devices": 4})
    df["job_id"] = df["job_id"].astype(np.int64)
    out, _ = validate_allocations(df)
    for col in ("job_id", "attempt", "devices", "priority", "elastic", "requested_devices"):
        out.loc[0, col] = out.loc[1, col]
    assert df["job_id"].tolist() == [1, 2] and df["devices"].tolist() == [8, 4]
    assert out["job_id"].tolist() == [2, 2] and out["devices"].tolist() == [4, 4]

def test_missing_column_raises_naming_the_field():
    df = alloc_rows({}).drop(columns=["gang_complete"])
    with pytest.raises(InputError, match="gang_complete") as exc:
        validate_allocations(df, file="x.parquet")
    assert exc.value.field == "gang_complete" and exc.value.file == "x.parquet"


# --- times --------------------------------------------------------------------------------------


def test_naive_times_are_refused():
    df = alloc_rows({})
    df["submit"] = df["submit"].dt.tz_localize(None)
    with pytest.raises(InputError, match="naive") as exc:
        validate_allocations(df)
    assert exc.value.field == "submit"


def test_mixed_naive_and_aware_text_is_refused_at_the_first_odd_row():
    s = pd.Series(["2025-03-01T00:00:00Z", "2025-03-01 01:00:00", "2025-03-01T02:00:00+02:00"])
    with pytest.raises(InputError, match="mixed") as exc:
        times_ns(s, file="f.csv", field="submit")
    assert exc.value.row == 2 and exc.value.field == "submit"  # 1-based: the second time


def test_aware_text_with_different_offsets_is_converted_to_utc():
    s = pd.Series(["2025-03-01T08:00:00+08:00", "2025-03-01T00:00:00Z", None])
    ns = times_ns(s)
    assert ns[0] == ns[1] == T0.value
    assert ns[2] == np.iinfo(np.int64).min


def test_date_only_text_is_naive():
    with pytest.raises(InputError, match="naive"):
        times_ns(pd.Series(["2025-03-01", "2025-03-02"]))


# --- gang-complete marker -----------------------------------------------------------------------


def test_rigid_without_gang_complete_is_inferred_from_requested_size_and_flagged():
    df = alloc_rows({"job_id": "full", "gang_complete": None},
                    {"job_id": "short", "gang_complete": None, "devices": 4, "requested_devices": 8})
    out, led = validate_allocations(df)
    assert balanced(led) and led.repaired == 2 and led.rejected == 0
    rep = reasons(led, "repaired")
    assert all("inferred from requested size" in r and "flagged" in r for r in rep)
    # full size: complete at first assignment; fewer devices: never complete, whole hold partial
    assert out.loc[0, "gang_complete"] == t(1.0)
    assert out.loc[1, "gang_complete"] == t(5.0) == out.loc[1, "release"]


def test_elastic_without_gang_complete_is_refused():
    df = alloc_rows({"job_id": "ok"}, {"job_id": "el", "elastic": True, "gang_complete": None})
    with pytest.raises(InputError, match="elastic") as exc:
        validate_allocations(df, file="kueue.json")
    assert exc.value.row == 2 and exc.value.field == "gang_complete"  # 1-based: the table's second row


def test_first_assigned_missing_is_an_atomic_allocation():
    out, led = validate_allocations(alloc_rows({"first_assigned": None}))
    assert led.repaired == 1 and "atomic" in reasons(led, "repaired")[0]
    assert out.loc[0, "first_assigned"] == out.loc[0, "gang_complete"] == t(2.0)


def test_never_assigned_row_is_kept_as_queue_demand():
    out, led = validate_allocations(alloc_rows({"first_assigned": None, "gang_complete": None, "devices": 0}))
    assert led.kept == 1 and out["first_assigned"].isna().all()


# --- order of times ----------------------------------------------------------------------------


@pytest.mark.parametrize(("row", "field", "words"), [
    ({"release": 1.5}, "release", "release before gang completion"),
    ({"submit": 1.5}, "first_assigned", "first_assigned before submit"),
    ({"gang_complete": 0.5, "submit": 0.0, "first_assigned": 1.0}, "gang_complete", "gang_complete before"),
])
def test_times_out_of_order_are_rejected_with_field_and_reason(row, field, words):
    df = alloc_rows({"job_id": "good"}, {"job_id": "bad", **row})
    out, led = validate_allocations(df, file="f")
    assert balanced(led) and led.kept == 1 and led.rejected == 1
    entry = led.entries[0]
    assert (entry.file, entry.row, entry.field) == ("f", 2, field)  # 1-based row numbers
    assert words in entry.reason
    assert out["job_id"].tolist() == ["good"]


def test_release_missing_rejected_or_closed_at_open_end():
    df = alloc_rows({"release": None})
    _, led = validate_allocations(df)
    assert led.rejected == 1 and "open_end" in reasons(led, "rejected")[0]
    out, led = validate_allocations(df, open_end=t(9))
    assert led.repaired == 1 and out.loc[0, "release"] == t(9)


def test_submit_missing_is_repaired_from_first_assigned():
    out, led = validate_allocations(alloc_rows({"submit": None}))
    assert led.repaired == 1 and "queue wait unknown" in reasons(led, "repaired")[0]
    assert out.loc[0, "submit"] == t(1.0)


# --- duplicates, overlaps, states ---------------------------------------------------------------


def test_duplicate_rows_and_conflicting_keys_are_rejected():
    df = alloc_rows({"job_id": "a"}, {"job_id": "a"}, {"job_id": "a", "devices": 4})
    out, led = validate_allocations(df)
    assert balanced(led) and led.kept == 1 and led.rejected == 2 and len(out) == 1
    rej = reasons(led, "rejected")
    assert rej[0] == "duplicate of row 1"
    assert "same job_id and attempt as row 1" in rej[1]


def test_overlapping_attempts_of_a_rigid_job_are_rejected():
    df = alloc_rows({"job_id": "a", "attempt": 0, "first_assigned": 1, "gang_complete": 2, "release": 5},
                    {"job_id": "a", "attempt": 1, "submit": 3, "first_assigned": 4, "gang_complete": 4,
                     "release": 8},
                    {"job_id": "a", "attempt": 2, "submit": 8, "first_assigned": 8, "gang_complete": 8,
                     "release": 9})
    out, led = validate_allocations(df)
    assert led.rejected == 1 and led.entries[0].row == 2
    assert "overlaps an earlier attempt (row 1)" in led.entries[0].reason
    assert out["attempt"].tolist() == [0, 2]


def test_elastic_segments_may_overlap_only_with_a_partial_piece():
    # segment 0 holds 4 devices until 6; 4 more devices arrive at 5 (partial piece until 6);
    # segment 2 holds all 8 from 6.  A held overlap (segment 3) is rejected.
    df = alloc_rows(
        {"job_id": "e", "attempt": 0, "elastic": True, "devices": 4, "requested_devices": 4, "release": 6},
        {"job_id": "e", "attempt": 1, "elastic": True, "devices": 4, "requested_devices": 4, "submit": 5,
         "first_assigned": 5, "gang_complete": 6, "release": 6},
        {"job_id": "e", "attempt": 2, "elastic": True, "submit": 6, "first_assigned": 6, "gang_complete": 6,
         "release": 9},
        {"job_id": "e", "attempt": 3, "elastic": True, "submit": 8, "first_assigned": 8, "gang_complete": 8,
         "release": 10})
    out, led = validate_allocations(df)
    assert led.rejected == 1 and led.entries[0].row == 4
    assert "elastic" in led.entries[0].reason
    assert out["attempt"].tolist() == [0, 1, 2]


def test_unknown_end_state_kept_as_unknown_with_named_repair():
    df = alloc_rows({"job_id": "a", "end_state": "COMPLETED"}, {"job_id": "b", "end_state": "ZOMBIE"},
                    {"job_id": "c", "end_state": None})
    out, led = validate_allocations(df)
    assert out["end_state"].astype(str).tolist() == ["completed", "unknown", "unknown"]
    assert led.kept == 1 and led.repaired == 2
    assert "'ZOMBIE' not recognised" in reasons(led, "repaired")[0]


def test_bad_counts_and_missing_keys_are_rejected():
    df = alloc_rows({"job_id": "a", "devices": -1}, {"job_id": None}, {"job_id": "c", "pool": None},
                    {"job_id": "d", "elastic": None}, {"job_id": "e", "devices": 2.5})
    _, led = validate_allocations(df)
    assert led.rejected == 5 and balanced(led)
    assert [e.field for e in led.entries] == ["devices", "job_id", "pool", "elastic", "devices"]


def test_one_outcome_per_row_even_with_several_problems():
    df = alloc_rows({"submit": None, "end_state": "weird", "requested_devices": None})
    _, led = validate_allocations(df)
    assert led.repaired == 1 and len(led.entries) == 1 and balanced(led)
    assert "submit missing" in led.entries[0].reason and "'weird'" in led.entries[0].reason


def test_integer_sorted_ids_and_text_ids_give_the_same_result():
    rows = [{"job_id": 1, "attempt": 0}, {"job_id": 1, "attempt": 1, "submit": 3, "first_assigned": 4,
                                            "gang_complete": 4, "release": 8},
            {"job_id": 2}, {"job_id": 2}]
    a, la = validate_allocations(alloc_rows(*rows))
    df = alloc_rows(*rows)
    df["job_id"] = df["job_id"].astype(str)
    b, lb = validate_allocations(df.iloc[[2, 0, 3, 1]].reset_index(drop=True))
    assert (la.rejected, lb.rejected) == (2, 2)
    assert sorted(a["attempt"].tolist()) == sorted(b["attempt"].tolist()) == [0, 0]


# --- interval tables -----------------------------------------------------------------------------


def cap_rows(*rows: tuple) -> pd.DataFrame:
    return pd.DataFrame([{"pool": p, "start": t(s), "end": t(e), "devices_in_service": i,
                          "devices_out_of_service": o} for p, s, e, i, o in rows])


def test_capacity_overlaps_duplicates_and_bad_rows_are_rejected():
    df = cap_rows(("a", 0, 10, 8, 0), ("a", 5, 12, 8, 0), ("b", 0, 10, 4, 0), ("b", 0, 10, 4, 0),
                  ("b", 12, 11, 4, 0), ("b", 20, 21, -1, 0))
    _, led = validate_capacity(df, file="cap")
    assert balanced(led) and led.kept == 2 and led.rejected == 4
    by_row = {e.row: e for e in led.entries}
    assert "overlaps an earlier capacity row of pool 'a' (row 1)" in by_row[2].reason
    assert by_row[4].reason == "duplicate capacity row"
    assert by_row[5].field == "end" and by_row[6].field == "devices_in_service"


def test_reservations_for_different_jobs_on_the_same_interval_are_both_kept():
    df = pd.DataFrame({"pool": ["a", "a", "a"], "start": [t(0)] * 3, "end": [t(1)] * 3, "devices": [8, 8, 8],
                       "for_job_id": ["x", "y", "y"]})
    out, led = validate_reservations(df)
    assert led.kept == 2 and led.rejected == 1 and out["for_job_id"].tolist() == ["x", "y"]


def test_reservation_of_zero_devices_is_rejected():
    df = pd.DataFrame({"pool": ["a"], "start": [t(0)], "end": [t(1)], "devices": [0], "for_job_id": ["x"]})
    _, led = validate_reservations(df)
    assert led.rejected == 1


def test_queue_validation():
    df = pd.DataFrame({"pool": ["a", "a"], "start": [t(0), t(1)], "end": [t(2), t(3)], "pending_jobs": [1, 2],
                       "pending_devices": [8, 16]})
    out, led = validate_queue(df)
    assert led.rejected == 1 and len(out) == 1


def test_occupancy_keeps_allocated_above_capacity():
    df = pd.DataFrame({"pool": ["a"], "start": [t(0)], "end": [t(1)], "in_service": [8],
                       "out_of_service": [0], "held_complete": [10], "partial_gang": [0], "reserved": [0],
                       "pending_jobs": [0], "pending_devices": [0]})
    out, led = validate_occupancy(df)
    assert led.kept == 1 and int(out["held_complete"].iloc[0]) == 10


def test_infer_gang_complete_from_bindings():
    b = pd.DataFrame({"job_id": ["a", "a", "a", "b"], "attempt": [0, 0, 0, 0],
                      "time": [t(2), t(1), t(3), t(1)], "devices": [4, 4, 8, 2]})
    req = pd.DataFrame({"job_id": ["a", "b"], "attempt": [0, 0], "requested_devices": [8, 4]})
    out = infer_gang_complete(b, req).set_index("job_id")
    assert out.loc["a", "first_assigned"] == t(1) and out.loc["a", "gang_complete"] == t(2)
    assert pd.isna(out.loc["b", "gang_complete"]) and out.loc["b", "bound_devices"] == 2


def test_scheduler_records_bundle():
    recs = SchedulerRecords(capacity=cap_rows(("a", 0, 1, 1, 0)))
    assert set(recs.tables()) == {"allocations", "capacity", "queue", "reservations", "occupancy"}
    assert recs.tables()["allocations"] is None


def _ledger_rows(led: Ledger) -> list[tuple]:
    return [(e.action, e.row, e.field, e.reason) for e in led.entries]


def test_categorical_columns_and_blocked_checks_match_the_plain_path(monkeypatch):
    # the canonical reader hands categorical pool and end_state columns; they take a faster path (category
    # codes, first occurrences found block by block) that must give the same table and ledger as
    # text columns.  Blocks of 3 rows put first occurrences and the sorted-id check across blocks.
    from fleetlib.scheduling import records as rec

    rows = [{"job_id": 1, "pool": "p"}, {"job_id": 1, "attempt": 1, "submit": 5, "first_assigned": 5,
                                          "gang_complete": 5, "release": 8},
            {"job_id": 2, "pool": "q", "end_state": "ZOMBIE"}, {"job_id": 3, "end_state": None},
            {"job_id": 3},  # duplicate of the row above
            {"job_id": 4, "pool": None},
            # a long attempt, then one inside it that ends earlier, then one overlapping the first
            {"job_id": 5, "release": 20}, {"job_id": 5, "attempt": 1, "submit": 6, "first_assigned": 6,
                                            "gang_complete": 6, "release": 7},
            {"job_id": 5, "attempt": 2, "submit": 9, "first_assigned": 9, "gang_complete": 9,
             "release": 21},
            {"job_id": 6, "pool": "r", "end_state": "FAILED"}]
    plain = alloc_rows(*rows)
    cat = plain.copy()
    cat["pool"] = pd.Categorical(cat["pool"], categories=["unused", "r", "q", "p"])
    cat["end_state"] = pd.Categorical(cat["end_state"], categories=["FAILED", "ZOMBIE", "completed", "x"])
    want, led_want = validate_allocations(plain)
    monkeypatch.setattr(rec, "_BLOCK", 3)
    got, led_got = validate_allocations(cat)
    pd.testing.assert_frame_equal(got, want)
    assert list(got["pool"].cat.categories) == ["p", "q", "r"]  # order of first occurrence
    assert _ledger_rows(led_got) == _ledger_rows(led_want)
    assert [e.row for e in led_want.entries if e.action == "rejected"] == [5, 6, 8, 9]
    assert (led_want.read, led_want.kept, led_want.repaired, led_want.rejected) == (10, 4, 2, 4)


def test_reservation_duplicates_by_category_codes_match_text():
    df = pd.DataFrame({"pool": ["a", "b", "a", None, "a"], "start": [t(0)] * 5, "end": [t(1)] * 5,
                       "devices": [1, 1, 1, 1, 1], "for_job_id": [7, 7, 7, 7, 8]})
    want, led_want = validate_reservations(df)
    cat = df.copy()
    cat["pool"] = pd.Categorical(cat["pool"], categories=["b", "a"])
    got, led_got = validate_reservations(cat)
    assert _ledger_rows(led_got) == _ledger_rows(led_want)
    assert [e.row for e in led_want.entries] == [3, 4]  # row 3 repeats row 1; row 4 has no pool
    assert got["pool"].astype(str).tolist() == want["pool"].astype(str).tolist() == ["a", "b", "a"]
