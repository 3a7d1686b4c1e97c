"""The compiled per-job kernel changes no number: runtime goodput of every bundled timeline, pinned.

For every bundled timeline sample (the three MLPerf logs, the ml-goodput-measurement demo, the canonical
demo, the torchtitan demo, and the timelines of the two bundled fleets measured together) and both
definitions, :func:`fleetlib.runtime.goodput.runtime_goodput`'s totals, fine breakdown, interruptions,
per-job table and ledger flag codes are compared with ``pinned_runtime_e017516.json``.  Those numbers
were computed by running the same reads and the same calls against main at e017516 (the per-job numpy
path and its cross-job fast path, before the kernel); they are not typed in from elsewhere.  Two
samples were pinned again when the fault-free step time became the healthy regime's of each job's
step series (issue 27): the theia MLPerf log, whose fifth block is a real +50 % level shift
(checked against the raw lines in ``test_runtime_mlperf_steps.py``), and the canonical demo, whose
estimate no longer includes a warm-up step.  Every sample was pinned again for the one clean-end rule
(issue 31): a job whose last step is followed by its last attempt's release with no interruption between
has retained its steps, so its committed steps, committed productive time and progress at risk moved
(the retrospective numbers did not), and a ``clean_end_commit`` flag is raised (committed definition) only
where the clean end retains steps no checkpoint covered.

The kernel makes its sums in another order (one loop per job, where numpy made pairwise reductions),
so a value agrees to 1e-12 of its scale -- the larger of the value itself and the held time it is a
part of -- rather than bit for bit (a signed slow-step time is a difference of sums).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from fleetlib.runtime.goodput import runtime_goodput
from fleetlib.runtime.readers import READERS

ROOT = Path(__file__).resolve().parents[2]
PINNED = json.loads((Path(__file__).with_name("pinned_runtime_e017516.json")).read_text())
COLUMNS: list[str] = PINNED["columns"]


def _close(got: float | None, want: float | None, scale: float, what: str) -> None:
    if want is None or got is None:
        assert got is None and want is None, what
        return
    bound = 1e-12 * max(abs(want), abs(got), scale)
    assert abs(got - want) <= bound, f"{what}: {got!r} != {want!r}"


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


@pytest.mark.parametrize("key", sorted(PINNED["samples"]))
def test_bundled_timelines_measure_as_pinned(key: str) -> None:
    want = PINNED["samples"][key]
    definition = key.rsplit("|", 1)[1]
    tables, _ = READERS[want["format"]].read([str(ROOT / p) for p in want["paths"]])
    m = runtime_goodput(tables["steps"], tables["events"], definition=definition)
    held = want["totals"]["held_s"]
    for name, value in want["totals"].items():
        _close(_num(getattr(m, name)), value, held, name)
    for name, value in want["breakdown"].items():
        _close(m.breakdown[name], value, held, f"breakdown {name}")
    got_int = [[str(r["kind"]), _num(r["lost_work_s"]), _num(r["recovery_s"])]
               for r in m.interruptions.to_dict(orient="records")]
    assert [r[0] for r in got_int] == [r[0] for r in want["interruptions"]]
    for g, w in zip(got_int, want["interruptions"], strict=True):
        _close(g[1], w[1], held, "interruption lost work")
        _close(g[2], w[2], held, "interruption recovery")
    assert [f.code for f in m.ledger.flags] == want["flags"]
    per = m.per_job
    assert [str(j) for j in per.index] == list(want["per_job"])
    for job, row in want["per_job"].items():
        job_held = row[COLUMNS.index("held_s")]
        for column, value in zip(COLUMNS, row, strict=True):
            _close(_num(per.loc[job, column]), value, job_held, f"{job} {column}")
