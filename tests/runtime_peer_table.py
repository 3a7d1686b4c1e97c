"""fleetlib against ml-goodput-measurement 0.2.3 on the peer's own test scenarios: the README table.

Run from the repository root: ``python tests/runtime_peer_table.py`` prints the table in Markdown.
The peer's value is what its own calculator computed in its test method (the test file is
``ml_goodput_measurement/tests/goodput_test.py`` of the 0.2.3 wheel; the line cited is the test
method's ``def``), recorded once in ``tests/corpus/runtime/mlgoodput_peer/peer_values.json`` by that
folder's ``generate.py``.  fleetlib's value is computed here, now, from the same records, with the
default (committed) definition: a clean ``job_end_time`` is the final commit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from fleetlib.runtime.measure import measure

PEER_DIR = Path(__file__).resolve().parent / "corpus" / "runtime" / "mlgoodput_peer"

#: Why fleetlib and the peer differ, for the scenarios where they do (checked by the tests: each
#: scenario listed here must differ, and every other finished scenario must agree).
DIFFERENCES: dict[str, tuple[str, str]] = {
    "GoodputPathwaysTest.test_goodput_with_anomalous_steps_single_disruption": (
        "fleetlib",
        "a 30 s step is 10x the 3 s step: a stall (held, no progress); the peer counts it productive, "
        "its own disabled assert (TODO b/400837154) expects fleetlib's value"),
    "GoodputPathwaysTest.test_goodput_with_anomalous_steps_multiple_disruptions": (
        "fleetlib",
        "two 30 s stalls; the peer counts them productive, its own disabled assert expects fleetlib's "
        "value"),
    "BadputTest.test_badput_calculator_checkpoint_badput": (
        "records inconsistent",
        "the test's save/restore records carry times of 10 s after the epoch, outside the job: the peer "
        "subtracts their durations from step time anyway; fleetlib rejects them, naming their lines"),
    "BadputTest.test_badput_calculator_async_data_loading": (
        "definitions differ",
        "data loading recorded inside every step: fleetlib charges it to input wait (the step waited), "
        "the peer calls loading after the first step asynchronous and counts it productive"),
}

#: Scenarios whose job never recorded job_end_time: the peer's denominator runs to its query time
#: (the wall clock when the test ran), so its value is not a property of the records.
UNFINISHED = "job unfinished: the peer measures up to its query time (wall clock), not comparable"


def peer_rows() -> list[dict[str, Any]]:
    """One row per peer scenario with a recorded peer goodput, fleetlib's value computed now.

    Returns
    -------
    list of dict
        ``scenario, line, peer_pct, fleetlib_pct, retrospective_pct, finished, agree, right, why``.
    """
    values = json.loads((PEER_DIR / "peer_values.json").read_text())
    rows = []
    for name, v in sorted(values.items()):
        if v["peer_goodput_pct"] is None:
            continue
        path = PEER_DIR / v["file"]
        finished = "job_end_time" in path.read_text()
        committed = measure(path, format="mlgoodput")
        retro = measure(path, format="mlgoodput", definition="retrospective")
        ours = 100.0 * (committed.runtime_goodput or 0.0)
        agree = math.isclose(ours, v["peer_goodput_pct"], abs_tol=0.05)
        if not finished:
            right, why = "-", UNFINISHED
        elif agree:
            right, why = "both", ""
        else:
            right, why = DIFFERENCES.get(name, ("?", "unexplained"))
        rows.append({"scenario": name, "line": v["test_def_line"], "peer_pct": v["peer_goodput_pct"],
                     "fleetlib_pct": ours, "retrospective_pct": 100.0 * (retro.runtime_goodput or 0.0),
                     "finished": finished, "agree": agree, "right": right, "why": why})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """Render the rows as the README's Markdown table."""
    out = ["| peer scenario (goodput_test.py line) | peer R % | fleetlib R % | who is right | why |",
           "|---|---:|---:|---|---|"]
    for r in rows:
        out.append(f"| `{r['scenario']}` ({r['line']}) | {r['peer_pct']:.2f} | {r['fleetlib_pct']:.2f} | "
                   f"{r['right']} | {r['why']} |")
    n_fin = sum(r["finished"] for r in rows)
    n_agree = sum(r["finished"] and r["agree"] for r in rows)
    out.append("")
    out.append(f"finished scenarios: {n_fin}; agreeing: {n_agree}; differing: {n_fin - n_agree}")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(peer_rows()))
