"""Issue 30 item 3, Nsight: a tiny SQLite export whose text expands on read is refused by a named limit.

The exports are hand-built: the synthetic writer's small database, then one column made to expand -- a
column added with a long default that every older row carries (stored once in the schema), or a
generated column that computes a huge string on read.  The refusal names the file, the table's row
(its ``rowid``), the field and the limit.
"""

from __future__ import annotations

import sqlite3

import pytest

from fleetlib._io import INFLATION_FLOOR, using_limits
from fleetlib.program.readers.nsys import read_nsys
from fleetlib.program.synth import write_nsys_sqlite
from fleetlib.quality import InputError

US = 1000


def _export(tmp_path, kernels: int):
    rows = [{"start": (10 + 3 * k) * US, "end": (11 + 3 * k) * US, "name": "gemm_kernel", "stream": 7,
             "correlation": k + 1, "pid": 5} for k in range(kernels)]
    return write_nsys_sqlite(tmp_path / "rank0.sqlite", kernels=rows)


def test_a_long_default_repeated_by_every_row_is_refused_at_the_row_that_crosses_the_budget(tmp_path):
    path = _export(tmp_path, 1)
    con = sqlite3.connect(path)
    con.execute("CREATE TEMP TABLE one AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    for _ in range(15):  # 2**15 copies of the one kernel (the copies' times overlap: never read)
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName")
    default = "x" * 4000
    con.execute(f"ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN demangledName TEXT DEFAULT '{default}'")
    con.commit()
    rowids = [r for r, in con.execute("SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid")]
    con.close()
    stored = path.stat().st_size
    assert len(rowids) == 2**15 and stored < 4_000_000  # 131 MB of text from a file of about 1 MB
    budget = max(10 * stored, INFLATION_FLOOR)  # max_inflation=10 below: the 64 MiB floor applies
    with using_limits(max_inflation=10), pytest.raises(InputError) as info:
        read_nsys(path)
    e = info.value
    crossing = rowids[budget // 4000]  # the first row whose running sum of 4,000-byte names exceeds it
    assert (e.file, e.row, e.field) == (str(path), crossing, "CUPTI_ACTIVITY_KIND_KERNEL.demangledName")
    run = (budget // 4000 + 1) * 4000
    assert e.message == (f"the text of rows up to this one is {run:,} bytes, more than 10 times the file's "
                         f"{stored:,} stored bytes (limit max_inflation; raise it with --limit "
                         "max_inflation=N)")


def test_a_generated_column_longer_than_a_line_is_refused_before_it_is_made(tmp_path):
    path = _export(tmp_path, 2)
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE StringIds RENAME TO StoredStrings")
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, stored TEXT, "
                "value TEXT GENERATED ALWAYS AS (CASE WHEN id = 2 THEN hex(zeroblob(1500000)) "
                "ELSE stored END) VIRTUAL)")
    con.execute("INSERT INTO StringIds (id, stored) SELECT id, value FROM StoredStrings")
    con.execute("INSERT INTO StringIds (id, stored) VALUES (2, 'stored short, computed 3 MB long'), (3, 'x')")
    con.commit()
    ids = [i for i, in con.execute("SELECT id FROM StringIds ORDER BY id")]
    con.close()
    assert ids == [1, 2, 3] and path.stat().st_size < 100_000
    with using_limits(max_line_bytes=1_000_000), pytest.raises(InputError) as info:
        read_nsys(path)
    e = info.value
    assert (e.file, e.row, e.field) == (str(path), 2, "StringIds.value")
    assert e.message == "a value longer than 1,000,000 bytes (limit max_line_bytes; raise it with --limit " \
                        "max_line_bytes=N)"
