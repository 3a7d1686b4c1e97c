"""Issue 33, item 5: a longer resize pause is a runtime regression (``fleetlib.regress.synth.elastic_twin``).

A 2-day, 4-node synthetic fleet of elastic jobs (canonical records with size segments) and its twin in
which every elastic wait is doubled (60 s -> 120 s per resize, re-initialisation 90 s in both).  Truths
come from the generator's ``truth.json``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fleetlib.regress import fleet_units
from fleetlib.regress.compare import MIN_UNITS, compare
from fleetlib.regress.synth import elastic_twin

pytestmark = [pytest.mark.xdist_group("elastic_twin"), pytest.mark.slow]


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    a, b = elastic_twin(tmp_path_factory.mktemp("elastic_twin"))
    units = (fleet_units(a), fleet_units(b))
    return {"truth": tuple(json.loads((m.parent / "truth.json").read_text()) for m in (a, b)),
            "units": units, "result": compare(*units)}


def test_the_units_hold_the_generators_elastic_terms(twin: dict[str, Any]) -> None:
    for units, truth in zip(twin["units"], twin["truth"], strict=True):
        for k in ("elastic_wait", "elastic_reinit"):
            total = truth["factors"]["runtime"]["losses"][k]
            assert float(units.jobs[k].sum()) == pytest.approx(total, rel=1e-12)
    resized = [j for j, row in twin["truth"][0]["jobs"].items() if "resize" in row]
    assert len(resized) >= MIN_UNITS


def test_a_doubled_elastic_wait_is_a_runtime_regression(twin: dict[str, Any]) -> None:
    by = {v["metric"]: v for v in twin["result"].verdicts}
    wait = by["elastic wait per resize"]
    assert wait["verdict"] == "regression" and wait["factor"] == "runtime"
    assert wait["tier"] == "startup_recovery"
    truth = twin["truth"][0]
    resized = [j for j, row in truth["jobs"].items() if "resize" in row]
    per_resize = truth["factors"]["runtime"]["losses"]["elastic_wait"] / (2 * len(resized))
    assert wait["baseline"] == pytest.approx(per_resize, rel=1e-12)
    assert wait["candidate"] == pytest.approx(2 * wait["baseline"], rel=1e-12)
    assert 0 < wait["ci_low"] <= wait["delta"] <= wait["ci_high"] and wait["units"] >= MIN_UNITS
    # the share of held time rises as well (its verdict, on 23 jobs of which half resize, is left to power)
    share = by["runtime.elastic_wait share"]
    assert share["candidate"] > share["baseline"] > 0 and share["factor"] == "runtime"
