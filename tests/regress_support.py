"""One synthetic regression pair set per test session, shared by the tests/test_regress_*.py modules."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

DEVICES = 96
CYCLE = "2h"


@functools.lru_cache(maxsize=1)
def regression_units() -> dict[str, Any]:
    """Write the baseline and every candidate of fleetlib.regress.synth once; return their units."""
    from fleetlib.regress import fleet_units
    from fleetlib.regress.synth import regression_pairs

    folder = Path(tempfile.mkdtemp(prefix="fleetlib-regress-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    rp = regression_pairs(folder, devices=DEVICES, days=1.0, seed=0)
    units = {"baseline": fleet_units(rp.baseline, cycle=CYCLE)}
    units.update({k: fleet_units(v, cycle=CYCLE) for k, v in rp.candidates.items()})
    return {"pairs": rp, "units": units, "folder": folder}
