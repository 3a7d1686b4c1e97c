"""An MFU above one in a fleet bundle is refused in one line naming the model config file and the job."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fleetlib.fleet import measure_fleet
from fleetlib.program import UtilizationAboveOneError

GOOD = Path(__file__).resolve().parents[1] / "corpus" / "fleet_bundles" / "good"


def test_a_job_above_one_mfu_is_refused_naming_its_model_file_and_the_job(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(GOOD, bundle)
    config = bundle / "models" / "101.yaml"
    # 1e21 FLOPs a step: 3 retained 10-minute steps on 8 GPUs (14,400 device-s) would need ~3e6
    # device-s at any GPU's peak -- a FLOP count about 200 times too large
    config.write_text(config.read_text().replace("1.0e17", "1.0e21"))
    with pytest.raises(UtilizationAboveOneError) as err:
        measure_fleet(bundle)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"file {config}, field 'useful_flops_per_step': job '101': MFU = ")
    mfu = float(message.split("MFU = ")[1].split()[0])
    assert 100 < mfu < 400 and "exceeds 1" in message and "under convention" in message


def test_the_good_bundle_is_not_refused() -> None:
    assert 0 < measure_fleet(GOOD).program.value < 1
