"""The serving twin: the bundled serving pool's S, R and MBU against the generator's truth and the raw files.

The synthetic bundle's ``serving:`` section names its own scheduler files, so the training walk (its
numbers pinned by the other fleet tests) never reads them.  Each factor is checked three ways: the
measurement, the generator's truth, and a small independent reading of the raw file in the test.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fleetlib.fleet import load_manifest, measure_fleet, measure_serving
from fleetlib.fleet.serving import read_decode_steps, read_serving_model
from fleetlib.quality import DomainError, InputError

BUNDLE = Path(__file__).resolve().parents[2] / "data" / "fleet" / "synthetic"
TRUTH = json.loads((BUNDLE / "truth.json").read_text())["serving"]


@pytest.fixture(scope="module")
def served():
    return measure_serving(BUNDLE / "fleet.yaml")


def test_factors_equal_the_generator_truth(served) -> None:
    assert served.factors() == pytest.approx(
        {"scheduling": TRUTH["scheduling"], "runtime": TRUTH["runtime"],
         "program": TRUTH["mbu"]["weights-only"]}, abs=1e-12)
    assert served.mbu == pytest.approx(TRUTH["mbu"], abs=1e-12)
    assert served.floors_s == pytest.approx(TRUTH["floor_s"], abs=1e-15)
    assert served.decode_steps == TRUTH["decode_steps"]
    assert served.runtime.held_s == TRUTH["held_s"] and served.runtime.ready_s == TRUTH["ready_s"]
    assert served.mbu["weights+kv"] > served.mbu["weights-only"]  # the larger floor scores higher
    assert "weights-only" in served.labels["weights-only"] and "KV" in served.labels["weights+kv"]
    assert served.ledger.read == served.ledger.kept


def test_factors_from_the_raw_files_by_hand(served) -> None:
    folder = BUNDLE / "serving"
    # S: allocated node-seconds x 8 over the two serve nodes' 8 GPUs for the 12-hour window.
    with open(folder / "sacct.txt") as f:
        rows = list(csv.DictReader(f, delimiter="|"))
    held = sum((pd.Timestamp(r["End"]) - pd.Timestamp(r["Start"])).total_seconds() for r in rows)
    assert {r["Partition"] for r in rows} == {"serve"}
    assert served.factors()["scheduling"] == pytest.approx(held * 8 / (16 * 12 * 3600), abs=1e-12)
    # R: ready (ready -> draining) over held (placed -> released), replica by replica.
    life = pd.read_csv(folder / "replica_lifecycle.csv", parse_dates=["time"])
    at = {(r.replica_id, r.phase): r.time for r in life.itertuples()}
    replicas = sorted(life["replica_id"].unique())
    held_s = sum((at[(r, "released")] - at[(r, "placed")]).total_seconds() for r in replicas)
    ready_s = sum((at[(r, "draining")] - at[(r, "ready")]).total_seconds()
                  for r in replicas if (r, "ready") in at)
    assert served.factors()["runtime"] == pytest.approx(ready_s / held_s, abs=1e-12)
    # P: MBU = steps x floor / measured time; floor = 70e9 x 2 B / 8 GPUs / 3.35 TB/s.
    steps = pd.read_csv(folder / "decode_steps.csv")
    floor = 70e9 * 2 / 8 / 3.35e12
    assert served.factors()["program"] == pytest.approx(len(steps) * floor / (steps["step_us"].sum() / 1e6),
                                                        abs=1e-12)


def test_training_walk_leaves_the_serving_pool_out() -> None:
    truth = json.loads((BUNDLE / "truth.json").read_text())
    m = measure_fleet(BUNDLE / "fleet.yaml")
    assert m.mpg == pytest.approx(truth["mpg"], abs=1e-12)
    manifest = load_manifest(BUNDLE)
    assert not set(manifest.serving.scheduler_files) & set(manifest.scheduler_files)
    assert manifest.to_dict()["serving"]["lifecycle"] == "serving/replica_lifecycle.csv"


def _bundle(tmp_path: Path, serving: str) -> Path:
    text = (BUNDLE / "fleet.yaml").read_text().split("serving:")[0]
    out = tmp_path / "b"
    shutil.copytree(BUNDLE, out)
    (out / "fleet.yaml").write_text(text + serving)
    return out / "fleet.yaml"


def test_a_bundle_without_serving_is_refused_by_name(tmp_path: Path) -> None:
    path = _bundle(tmp_path, "")
    assert load_manifest(path).serving is None and "serving" not in load_manifest(path).to_dict()
    with pytest.raises(DomainError, match="no serving: section"):
        measure_serving(path)


@pytest.mark.parametrize(("section", "match"), [
    ("serving:\n  lifecycle: serving/replica_lifecycle.csv\n", "serving.scheduler.*is required"),
    ("serving:\n  pools: x\n", "serving.pools.*unknown key"),
    ("serving:\n  scheduler: {format: slurm, files: [scheduler/sacct.txt]}\n"
     "  lifecycle: serving/replica_lifecycle.csv\n  decode_steps: serving/decode_steps.csv\n"
     "  model: serving/model.yaml\n", "names the training scheduler file"),
])
def test_manifest_serving_section_errors(tmp_path: Path, section: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        load_manifest(_bundle(tmp_path, section))


def test_bad_decode_step_names_file_row_field_value(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("replica_id,step_us\nr0,6000\nr0,-3\n")
    with pytest.raises(InputError, match=r"row 3.*step_us.*'-3'|step_us.*'-3'") as info:
        read_decode_steps(path)
    assert info.value.row == 3 and info.value.field == "step_us" and str(path) in str(info.value)
    table, ledger = read_decode_steps(BUNDLE / "serving" / "decode_steps.csv")
    assert ledger.read == ledger.kept == len(table)


def test_bad_model_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text("accelerator: H100 SXM\nn_params: 7.0e+10\nbytes_per_param: 2\ndevices: 8\n")
    with pytest.raises(InputError, match="kv_cache_bytes"):
        read_serving_model(path)
    assert read_serving_model(BUNDLE / "serving" / "model.yaml")["devices"] == 8


@pytest.mark.notebook
def test_serving_page_prints_the_truth_and_leaves_mpg_alone(tmp_path: Path) -> None:
    import nbformat
    import papermill as pm

    root = BUNDLE.parents[2]
    executed = tmp_path / "05_serving.ipynb"
    pm.execute_notebook(str(root / "notebooks" / "05_serving.ipynb"), str(executed),
                        parameters={"output_dir": str(tmp_path / "figures")}, kernel_name="python3",
                        cwd=str(root), execution_timeout=300, progress_bar=False)
    shown = "".join(o.get("text", "") + str(o.get("data", {}).get("text/markdown", ""))
                    for c in nbformat.read(executed, as_version=4).cells if c.cell_type == "code"
                    for o in c.get("outputs", [])).replace("\\", "")
    assert f"S {100 * TRUTH['scheduling']:.1f}%" in shown and f"R {100 * TRUTH['runtime']:.1f}%" in shown
    assert f"P (MBU, weights only) {100 * TRUTH['mbu']['weights-only']:.1f}%" in shown
    assert "not averaged into the training MPG" in shown
    assert (tmp_path / "figures" / "serving_pool_factors.png").stat().st_size > 1000
