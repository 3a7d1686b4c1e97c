"""The table form of the manifest's ``models:`` / ``traces:`` ({file: TABLE}): same manifest, named errors."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fleetlib.fleet import load_manifest, measure_fleet
from fleetlib.fleet.commands import run_fleet
from fleetlib.fleet.scale import synth_fleet_scale
from fleetlib.quality import DomainError, InputError

GOOD = Path(__file__).resolve().parents[1] / "corpus" / "fleet_bundles" / "good"


def _with_manifest(folder: Path, name: str, **keys: object) -> Path:
    """Write ``name`` beside the bundle's ``fleet.yaml``: the same manifest with ``keys`` replaced."""
    data = yaml.safe_load((folder / "fleet.yaml").read_text())
    data.update(keys)
    (folder / name).write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / name


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """The hand-built good bundle (job 101 with a model config), copied so tables can be written beside it."""
    folder = tmp_path / "good"
    shutil.copytree(GOOD, folder)
    (folder / "traces" / "101").mkdir(parents=True)
    for rank in (0, 1):
        (folder / "traces" / "101" / f"rank-{rank}.json").write_text("{}")
    return folder


def _same(a: object, b: object) -> bool:
    return dataclasses.replace(b, file=a.file) == a  # type: ignore[arg-type, type-var]


def test_a_models_table_gives_the_manifest_the_mapping_gives(bundle: Path) -> None:
    (bundle / "models.csv").write_text("job_id,model\n101,models/101.yaml\n")
    mapping = load_manifest(bundle)
    table = load_manifest(_with_manifest(bundle, "table.yaml", models={"file": "models.csv"}))
    assert table.models == {"101": bundle.resolve() / "models" / "101.yaml"}
    assert _same(mapping, table)
    assert table.to_dict()["models"] == {"101": "models/101.yaml"}


def test_gzip_csv_parquet_and_header_case_read_alike(bundle: Path) -> None:
    (bundle / "m.csv.gz").write_bytes(gzip.compress(b" Job_ID , MODEL \n101,models/101.yaml\n"))
    # Parquet with whole-number job ids: taken as their digits, as a YAML key 101 is
    pd.DataFrame({"job_id": [101], "model": ["models/101.yaml"]}).to_parquet(bundle / "m.parquet")
    mapping = load_manifest(bundle)
    for name in ("m.csv.gz", "m.parquet"):
        assert _same(mapping, load_manifest(_with_manifest(bundle, f"{name}.yaml", models={"file": name})))


def test_a_traces_table_keeps_each_jobs_files_in_row_order(bundle: Path) -> None:
    files = ["traces/101/rank-1.json", "traces/101/rank-0.json"]
    mapping = load_manifest(_with_manifest(bundle, "mapping.yaml", traces={"101": files}))
    (bundle / "traces.csv").write_text("job_id,path\n" + "".join(f"101,{f}\n" for f in files))
    table = load_manifest(_with_manifest(bundle, "table.yaml", traces={"file": "traces.csv"}))
    assert table.traces == {"101": tuple(bundle.resolve() / f for f in files)}
    assert _same(mapping, table)
    # a folder is taken, as in the mapping form
    (bundle / "folders.csv").write_text("job_id,path\n101,traces/101/\n")
    folder = load_manifest(_with_manifest(bundle, "folder.yaml", traces={"file": "folders.csv"}))
    assert folder.traces == {"101": (bundle.resolve() / "traces" / "101",)}


BAD_TABLES = {
    # name: (table text, file the error names, row, field, words)
    "missing_column": ("job_id,config\n101,models/101.yaml\n", "models.csv", 1, "model",
                       "missing column 'model': the models table has the columns job_id, model; "
                       "found ['job_id', 'config']"),
    "empty_job": ("job_id,model\n101,models/101.yaml\n,models/101.yaml\n", "models.csv", 3, "job_id",
                  "is empty or not text"),
    "blank_path": ("job_id,model\n101,  \n", "models.csv", 2, "model", "is empty or not text"),
    "job_twice": ("job_id,model\n101,models/101.yaml\n102,models/101.yaml\n101,models/101.yaml\n",
                  "models.csv", 4, "job_id", "job '101' is given a second model config (the first in row 2)"),
    "outside": ("job_id,model\n101,models/101.yaml\n102,../../etc/passwd\n", "models.csv", 3, "model",
                "lies outside the manifest's folder"),
    "missing_file": ("job_id,model\n101,models/101.yaml\n102,models/absent.yaml\n", "models.csv", 3, "model",
                     "names a missing file 'models/absent.yaml'"),
    "a_folder": ("job_id,model\n101,models\n", "models.csv", 2, "model", "names a folder 'models'"),
    "no_header": ("", "models.csv", 1, None, "empty file: no header row"),
}


@pytest.mark.parametrize("name", sorted(BAD_TABLES))
def test_a_bad_table_is_one_line_naming_the_table_row_and_column(bundle: Path, name: str) -> None:
    text, file, row, field, words = BAD_TABLES[name]
    (bundle / "models.csv").write_text(text)
    with pytest.raises(InputError) as info:
        load_manifest(_with_manifest(bundle, "table.yaml", models={"file": "models.csv"}))
    message = str(info.value)
    assert "\n" not in message
    assert Path(info.value.file).name == file
    assert (info.value.row, info.value.field) == (row, field)
    assert words in message


def test_the_table_itself_is_a_confined_existing_file(bundle: Path) -> None:
    for value, words in (("absent.csv", "names a missing file 'absent.csv'"),
                         ("../../elsewhere.csv", "lies outside the manifest's folder"),
                         (7, "a path must be non-empty text")):
        with pytest.raises(InputError) as info:
            load_manifest(_with_manifest(bundle, "table.yaml", models={"file": value}))
        assert info.value.field == "models.file" and Path(info.value.file).name == "table.yaml"
        assert words in str(info.value)
    pd.DataFrame({"job_id": [101.5], "model": ["models/101.yaml"]}).to_parquet(bundle / "m.parquet")
    with pytest.raises(InputError) as info:
        load_manifest(_with_manifest(bundle, "table.yaml", models={"file": "m.parquet"}))
    assert (Path(info.value.file).name, info.value.row, info.value.field) == ("m.parquet", 1, "job_id")


def test_a_table_job_unknown_to_the_bundle_is_refused_by_measure_fleet(bundle: Path) -> None:
    (bundle / "models.csv").write_text("job_id,model\n101,models/101.yaml\n555,models/101.yaml\n")
    man = _with_manifest(bundle, "table.yaml", models={"file": "models.csv"})
    assert set(load_manifest(man).models) == {"101", "555"}
    with pytest.raises(InputError) as info:
        measure_fleet(man)
    assert info.value.field == "models.555"
    assert "has no timeline in the bundle" in str(info.value)


def test_the_scale_bundle_written_both_ways_measures_identically(tmp_path: Path) -> None:
    kw = {"devices": 32, "days": 0.25, "seed": 5, "steps_per_job": (5, 10)}
    table = synth_fleet_scale(tmp_path / "table", **kw)
    mapping = synth_fleet_scale(tmp_path / "mapping", models_form="mapping", **kw)
    assert "models.csv" in table.files and "models.csv" not in mapping.files
    assert "models: {file: models.csv}" in (tmp_path / "table" / "fleet.yaml").read_text()
    a, b = load_manifest(table.manifest), load_manifest(mapping.manifest)
    assert len(a.models) > 5
    da, db = a.to_dict(), b.to_dict()
    assert da.pop("file") != db.pop("file") and da == db
    ra, rb = run_fleet(table.manifest), run_fleet(mapping.manifest)
    assert ra == rb
    assert ra["mpg"] == pytest.approx(table.truth["mpg"], rel=1e-9)
    with pytest.raises(DomainError, match="models_form"):
        synth_fleet_scale(tmp_path / "x", models_form="yaml", **kw)


def test_a_table_path_outside_is_read_only_from_an_allowed_folder(bundle: Path, tmp_path: Path) -> None:
    from fleetlib._io import using_limits

    shared = tmp_path / "shared_models"
    shared.mkdir()
    shutil.copy(bundle / "models" / "101.yaml", shared / "101.yaml")
    (bundle / "models.csv").write_text(f"job_id,model\n101,{shared / '101.yaml'}\n")
    man = _with_manifest(bundle, "table.yaml", models={"file": "models.csv"})
    with pytest.raises(InputError, match="lies outside the manifest's folder"):
        load_manifest(man)
    with using_limits(allow=[shared]):
        assert load_manifest(man).models == {"101": (shared / "101.yaml").resolve()}


def test_the_yaml_loader_restores_the_collectors_state_even_on_an_error() -> None:
    import gc

    from fleetlib._io import load_yaml

    assert gc.isenabled()
    assert load_yaml("a: [1, 2]\n", file="x.yaml") == {"a": [1, 2]}
    assert gc.isenabled()
    with pytest.raises(InputError, match="not valid YAML"):
        load_yaml("a: [\n", file="x.yaml")
    assert gc.isenabled()
    gc.disable()
    try:
        load_yaml("a: 1\n", file="x.yaml")
        assert not gc.isenabled()  # a caller's own pause is left as it was
    finally:
        gc.enable()


def test_the_table_form_takes_no_other_key(bundle: Path) -> None:
    for key in ("models", "traces"):
        with pytest.raises(InputError) as info:
            load_manifest(_with_manifest(bundle, "t.yaml", **{key: {"file": "x.csv", "101": "m.yaml"}}))
        assert info.value.field == f"{key}.file"
        assert "the table form {file: TABLE} takes no other key" in str(info.value)
