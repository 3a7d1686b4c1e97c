"""The regressions view: several comparisons in one table, each row named by its candidate, with the delta.

Hand-built comparison dicts (the shape of :meth:`Comparison.to_dict`) whose verdicts carry a ``candidate``
value of their own: the table keeps the candidate's *name*, shows both sides' values and computes nothing
but picks, so the delta is checked against candidate - baseline written by hand.
"""

from __future__ import annotations

import pytest

from fleetlib.regress.compare import REGRESSIONS_COLUMNS, regressions_table


def _verdict(metric: str, unit: str, baseline: float, candidate: float, significant: bool) -> dict:
    return {"factor": "runtime", "tier": "startup and recovery baselines", "metric": metric, "unit": unit,
            "baseline": baseline, "candidate": candidate, "delta": candidate - baseline,
            "ci_low": candidate - baseline - 1.0, "ci_high": candidate - baseline + 1.0,
            "significant": significant, "verdict": "regression" if significant else "no significant change"}


RESULTS = {
    "compiler": {"verdicts": [_verdict("startup time", "s", 120.0, 300.0, True),
                              _verdict("runtime goodput", "fraction", 0.9, 0.88, False)]},
    "storage": {"verdicts": [_verdict("checkpoint pause per commit", "s", 10.0, 20.5, True),
                             _verdict("startup time", "s", 120.0, 121.0, False)]},
}


def test_each_row_is_named_by_its_candidate_not_by_its_value() -> None:
    table = regressions_table(RESULTS, metrics={"compiler": "startup time",
                                                "storage": "checkpoint pause per commit"})
    assert list(table.columns) == list(REGRESSIONS_COLUMNS)
    assert table["candidate"].tolist() == ["compiler", "storage"]
    assert table["metric"].tolist() == ["startup time", "checkpoint pause per commit"]
    assert table["baseline value"].tolist() == [120.0, 10.0]
    assert table["candidate value"].tolist() == [300.0, 20.5]


def test_delta_is_candidate_minus_baseline_in_the_metric_unit() -> None:
    table = regressions_table(RESULTS)
    assert len(table) == 4
    assert table["delta"].tolist() == pytest.approx([180.0, -0.02, 10.5, 1.0], abs=1e-12)
    assert table["unit"].tolist() == ["s", "fraction", "s", "s"]


def test_significant_only_keeps_the_significant_rows() -> None:
    table = regressions_table(RESULTS, significant_only=True)
    assert table[["candidate", "metric"]].values.tolist() == [["compiler", "startup time"],
                                                           ["storage", "checkpoint pause per commit"]]
