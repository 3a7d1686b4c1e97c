"""Shared helper of the fleet tests: two fleet measurements give one answer."""

from __future__ import annotations

import math

import pandas as pd

from fleetlib.fleet import FleetMeasurement


def assert_same(a: FleetMeasurement, b: FleetMeasurement) -> None:
    """Every factor, loss and per-job value equal (to 1e-12 relative; in practice exactly)."""
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=False, rtol=1e-12)
    for fa, fb in ((a.scheduling, b.scheduling), (a.runtime, b.runtime), (a.program, b.program)):
        assert math.isclose(fa.value, fb.value, rel_tol=1e-12)
        assert math.isclose(fa.numerator, fb.numerator, rel_tol=1e-12)
        assert fa.losses.keys() == fb.losses.keys()
        for k, v in fa.losses.items():
            assert math.isclose(v, fb.losses[k], rel_tol=1e-12, abs_tol=1e-9), (fa.boundary, k)
    assert math.isclose(a.mpg, b.mpg, rel_tol=1e-12)
    assert a.ledger.to_dict() == b.ledger.to_dict()
    assert a.to_dict() == b.to_dict()  # waterfall, pools, cohorts, traces, levers and the ledger too
