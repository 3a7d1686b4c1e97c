"""Scenario files may hold lists of texts (file paths for the scheduler-records notebook)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetlib.quality import InputError
from fleetlib.scenario import load_parameters

ROOT = Path(__file__).resolve().parents[2]


def test_list_of_texts_is_read_as_a_list_of_str(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("files:\n  - data/a.csv.gz\n  - 'data/b.csv'\nsizes: [1, 2]\nnone: []\n")
    params = load_parameters(f)
    assert params["files"] == ["data/a.csv.gz", "data/b.csv"]
    assert all(type(v) is str for v in params["files"])
    assert params["sizes"] == [1, 2] and params["none"] == []


@pytest.mark.parametrize(
    "text",
    ["files: [a.csv, 2]\n", "files: [a.csv, true]\n", "files: [a.csv, null]\n", "files: [a.csv, [b]]\n",
     "files: [a.csv, 2024-01-01]\n"],
)
def test_mixed_lists_are_refused(tmp_path, text):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match="list") as info:
        load_parameters(f)
    assert info.value.field == "files"


@pytest.mark.parametrize("name", ["running_example.yaml", "llama3_405b.yaml"])
def test_bundled_scenarios_name_existing_scheduler_files(name):
    params = load_parameters(ROOT / "parameters" / name)
    for key in ("scheduling_files", "scheduling_openb_files"):
        files = params[key]
        assert isinstance(files, list)
        for path in files:
            assert isinstance(path, str) and (ROOT / path).is_file(), path
