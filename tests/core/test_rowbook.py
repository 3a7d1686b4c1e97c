"""The one row-book and the one ledger every reader settles into (fleetlib.quality)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib.quality import Flag, Ledger, RowBook


def test_rows_default_to_one_based_line_numbers():
    book = RowBook("a.csv", 3)
    assert book.rows.tolist() == [1, 2, 3]
    book.reject(np.array([False, True, False]), "start", "no start time")
    led = Ledger()
    keep = book.close(led)
    assert keep.tolist() == [True, False, True]
    assert led.to_dict()["entries"] == [
        {"action": "rejected", "file": "a.csv", "row": 2, "field": "start", "reason": "no start time"}
    ]
    assert (led.read, led.kept, led.repaired, led.rejected) == (3, 2, 0, 1)


def test_first_rejection_wins_and_rejected_rows_lose_their_repairs():
    book = RowBook("f.txt", np.array([10, 12, 15]))  # file lines, as the file shows them
    book.repair([0, 1], "end", "release inferred from the next start")
    book.reject([1], "end", "end before start")
    book.reject([1, 2], "devices", ["ignored: already rejected", "no devices"])
    led = Ledger()
    book.close(led)
    rows = {(e.action, e.row): (e.field, e.reason) for e in led.entries}
    assert rows == {
        ("rejected", 12): ("end", "end before start"),
        ("rejected", 15): ("devices", "no devices"),
        ("repaired", 10): ("end", "release inferred from the next start"),
    }
    assert led.balanced() and led.kept == 0


def test_repairs_of_one_row_are_joined_into_one_entry():
    book = RowBook("f", 2)
    book.repair([0], "start", "zone taken from --tz")
    book.repair([0], "end", "end clipped to the window")
    book.repair([0], "end", "end clipped to the window")
    led = Ledger()
    book.close(led)
    (entry,) = led.entries
    assert entry.field == "start,end"
    assert entry.reason == "zone taken from --tz; end clipped to the window"
    assert (led.kept, led.repaired) == (1, 1)


def test_flags_keep_the_row_and_carry_where_it_is():
    book = RowBook("k.yaml", np.array([4, 9]))
    book.flag([1], "unknown_phase", "phase 'Weird' kept verbatim", field="phase", job_id=["j-1"], attempt=2)
    led = Ledger()
    keep = book.close(led)
    assert keep.all() and led.kept == 2 and led.repaired == 0
    (flag,) = led.flags
    assert flag == Flag("unknown_phase", "phase 'Weird' kept verbatim", "k.yaml", 9, "phase", "j-1", 2)
    assert led.codes() == ["unknown_phase"]


def test_positions_of_rows_maps_unsorted_row_numbers():
    book = RowBook("f", np.array([7, 3, 5]))
    assert book.positions_of_rows([5, 7]).tolist() == [2, 0]
    with pytest.raises(AssertionError):
        book.positions_of_rows([4])


def test_ledger_merge_keeps_flags_and_unused_counts():
    a, b = Ledger(read=3, kept=3), Ledger(read=2, kept=2)
    a.count_unused("flow", 2)
    b.count_unused("flow", 1)
    b.count_unused("metadata", 4)
    b.flag("rank_from_file_name", "rank 3 taken from the file name", file="r3.json", rank=3)
    m = Ledger.merged([a, b])
    assert (m.read, m.kept) == (5, 5)
    assert m.unused == {"flow": 3, "metadata": 4}
    assert m.flags[0].rank == 3
    assert json.loads(json.dumps(m.to_dict()))["unused"] == {"flow": 3, "metadata": 4}


def test_flag_time_is_iso_utc_text():
    import pandas as pd

    led = Ledger()
    led.flag("x", "y", time=pd.Timestamp("2024-03-04T01:02:03Z"))
    led.flag("x", "y", time=pd.NaT)
    assert [f.time for f in led.flags] == ["2024-03-04T01:02:03+00:00", None]


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 40),
    ops=st.lists(
        st.tuples(st.sampled_from(["reject", "repair", "flag"]), st.lists(st.integers(0, 39), max_size=8)),
        max_size=12,
    ),
)
def test_every_record_ends_in_exactly_one_state(n, ops):
    """Property: read = kept + repaired + rejected; one entry per touched row; keep mask agrees."""
    book = RowBook("p", n)
    rejected, repaired = set(), set()
    for op, where in ops:
        pos = np.array([p for p in where if p < n], dtype=np.int64)
        getattr(book, op)(pos, "f", "why") if op != "flag" else book.flag(pos, "code", "why")
        if op == "reject":
            rejected |= set(pos.tolist())
        elif op == "repair":
            repaired |= set(pos.tolist())
    led = Ledger()
    keep = book.close(led)
    assert led.balanced()
    assert led.read == n
    assert led.rejected == len(rejected)
    assert led.repaired == len(repaired - rejected)
    assert set(np.flatnonzero(~keep).tolist()) == rejected
    rows = [e.row for e in led.entries]
    assert len(rows) == len(set(rows))
