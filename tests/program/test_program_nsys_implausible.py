"""Issue 30 item 4, Nsight: a session start near int64 max and a NULL process id (hand-built exports)."""

from __future__ import annotations

import sqlite3

import pytest

from fleetlib.program.readers.nsys import read_nsys
from fleetlib.program.synth import write_nsys_sqlite
from fleetlib.quality import InputError

US = 1000


def _kernel(pid, corr, start, end):
    return {"start": start * US, "end": end * US, "name": "gemm_kernel", "stream": 7, "correlation": corr,
            "pid": pid}


def test_a_session_start_near_int64_max_is_refused_not_wrapped_into_1677(tmp_path):
    path = write_nsys_sqlite(tmp_path / "rank0.sqlite", kernels=[_kernel(5, 1, 10, 20)],
                             session_start_ns=2**63 - 10)
    with pytest.raises(InputError) as info:
        read_nsys(path)
    e = info.value
    assert (e.file, e.row, e.field) == (str(path), 1, "TARGET_INFO_SESSION_START_TIME.utcEpochNs")
    assert e.message == (f"session start {2**63 - 10} ns is outside the plausible range [2000-01-01, "
                         "2100-01-01) UTC (limits earliest_year, latest_year)")


def test_a_null_process_id_is_rejected_by_row_and_invents_no_rank(tmp_path):
    kernels = [_kernel(5, 1, 10, 20), _kernel(5, 2, 30, 40)]
    path = write_nsys_sqlite(tmp_path / "rank0.sqlite", kernels=kernels)
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL WHERE correlationId = 2")
    con.commit()
    con.close()
    t = read_nsys(path)
    assert [(e.action, e.row, e.field) for e in t.ledger.entries] == [
        ("rejected", 2, "CUPTI_ACTIVITY_KIND_KERNEL.globalPid")]
    assert len(t.kernels) == 1 and t.kernels["rank"].nunique() == 1
