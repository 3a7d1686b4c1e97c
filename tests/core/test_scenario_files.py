"""Scenario files assembled from several files: includes, data locations, derived values, confined paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetlib.quality import InputError
from fleetlib.scenario import (
    DERIVED_PARAMETERS,
    PATH_KEYS,
    load_parameters,
    parameter_sources,
    with_overrides,
)

ROOT = Path(__file__).resolve().parents[2]
PARAMETERS = ROOT / "parameters"
SCENARIOS = sorted(PARAMETERS.glob("*.yaml"))


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def refused(path: Path, *, match: str) -> InputError:
    with pytest.raises(InputError, match=match) as info:
        load_parameters(path)
    assert "\n" not in str(info.value)  # one line
    return info.value


# --- the bundled layout -----------------------------------------------------------------------------


def test_bundled_scenarios_include_the_shared_defaults_and_bundled_data():
    assert [p.name for p in SCENARIOS] == ["llama3_405b.yaml", "running_example.yaml"]
    for path in SCENARIOS:
        text = path.read_text()
        assert "include: shared/defaults.yaml" in text and "data: bundled" in text
        params = load_parameters(path)
        assert "include" not in params and "data" not in params
        assert next(iter(params)) == "scenario_name"


def test_data_locations_are_apart_from_scenario_values():
    from fleetlib.scenario import _read_mapping

    data = _read_mapping(PARAMETERS / "data" / "bundled.yaml")
    defaults = _read_mapping(PARAMETERS / "shared" / "defaults.yaml")
    assert set(PATH_KEYS) <= set(data)  # every path lives with the data locations
    assert not set(PATH_KEYS) & set(defaults)
    assert not set(data) & set(defaults)
    for path in SCENARIOS:
        own = _read_mapping(path)
        assert not set(PATH_KEYS) & set(own), path.name
        # The shared values are stated once: no scenario restates a default or a data location.
        assert not (set(own) & (set(defaults) | set(data))), path.name


def test_bundled_paths_exist():
    for path in SCENARIOS:
        params = load_parameters(path)
        for key in PATH_KEYS:
            value = params[key]
            for name in value if isinstance(value, list) else [value]:
                assert name == "" or (ROOT / name).exists(), (path.name, key, name)


# --- include ------------------------------------------------------------------------------------------


def test_include_takes_keys_and_own_keys_replace_them(tmp_path):
    write(tmp_path, "shared/base.yaml", "a: 1\nb: two\nc: [1, 2]\n")
    scenario = write(tmp_path, "s.yaml", "z: 0.5\ninclude: shared/base.yaml\nb: mine\n")
    params = load_parameters(scenario)
    assert params == {"z": 0.5, "b": "mine", "a": 1, "c": [1, 2]}
    assert list(params) == ["z", "b", "a", "c"]  # own keys in file order, then the included ones


def test_includes_nest_and_a_list_is_read_in_order(tmp_path):
    write(tmp_path, "one.yaml", "include: sub/two.yaml\na: 1\n")
    write(tmp_path, "sub/two.yaml", "b: 2\n")
    write(tmp_path, "three.yaml", "c: 3\n")
    params = load_parameters(write(tmp_path, "s.yaml", "include: [one.yaml, three.yaml]\n"))
    assert list(params.items()) == [("a", 1), ("b", 2), ("c", 3)]


def test_two_includes_stating_one_key_are_refused(tmp_path):
    write(tmp_path, "one.yaml", "a: 1\n")
    write(tmp_path, "two.yaml", "a: 2\n")
    err = refused(write(tmp_path, "s.yaml", "include: [one.yaml, two.yaml]\n"), match="two included files")
    assert err.field == "a" and "one.yaml" in str(err) and "two.yaml" in str(err)


def test_missing_include_names_the_file_and_key(tmp_path):
    err = refused(write(tmp_path, "s.yaml", "a: 1\ninclude: shared/nope.yaml\n"), match="no such file")
    assert err.file == str(tmp_path / "s.yaml") and err.field == "include"
    assert "shared/nope.yaml" in str(err)


@pytest.mark.parametrize("name", ["../outside.yaml", "/etc/hostname"])
def test_include_outside_the_folder_is_refused(tmp_path, name):
    write(tmp_path, "outside.yaml", "a: 1\n")
    err = refused(write(tmp_path, "inner/s.yaml", f"include: {name}\n"), match="outside")
    assert err.field == "include" and err.file.endswith("s.yaml")


@pytest.mark.parametrize("value", ["3", "[]", "[a.yaml, 2]", "''", "{a: b}"])
def test_include_must_name_files(tmp_path, value):
    err = refused(write(tmp_path, "s.yaml", f"include: {value}\n"), match="file name")
    assert err.field == "include"


def test_include_cycles_are_refused(tmp_path):
    err = refused(write(tmp_path, "s.yaml", "include: s.yaml\n"), match="cycle")
    assert err.field == "include"
    write(tmp_path, "a.yaml", "include: b.yaml\n")
    write(tmp_path, "b.yaml", "include: a.yaml\n")
    err = refused(write(tmp_path, "t.yaml", "include: a.yaml\n"), match="cycle: t.yaml -> a.yaml -> b.yaml")
    assert err.file == str(tmp_path / "b.yaml") and err.field == "include"


def test_a_bad_value_in_an_included_file_names_that_file(tmp_path):
    write(tmp_path, "base.yaml", "ok: 1\nwhen: 2024-01-01\n")
    err = refused(write(tmp_path, "s.yaml", "include: base.yaml\n"), match="date")
    assert err.file == str(tmp_path / "base.yaml") and err.field == "when"


def test_an_empty_included_file_is_refused(tmp_path):
    write(tmp_path, "base.yaml", "")
    err = refused(write(tmp_path, "s.yaml", "include: base.yaml\n"), match="included parameter file is empty")
    assert err.file == str(tmp_path / "base.yaml")


# --- data ---------------------------------------------------------------------------------------------


def test_data_names_a_set_of_locations_beside_the_scenario(tmp_path):
    write(tmp_path, "data/mine.yaml", "timeline_files: [data/timelines/demo-7b-ft_steps.csv]\n")
    params = load_parameters(write(tmp_path, "s.yaml", "data: mine\na: 1\n"))
    assert params == {"a": 1, "timeline_files": ["data/timelines/demo-7b-ft_steps.csv"]}


def test_unknown_data_name_lists_the_known_ones(tmp_path):
    write(tmp_path, "data/bundled.yaml", "a: 1\n")
    write(tmp_path, "data/other.yaml", "a: 2\n")
    err = refused(write(tmp_path, "s.yaml", "data: mine\n"), match="no data locations named 'mine'")
    assert err.field == "data" and "known: bundled, other" in str(err)


@pytest.mark.parametrize("value", ["../bundled", "data/bundled", "3", "''"])
def test_data_is_a_name_not_a_path(tmp_path, value):
    write(tmp_path, "data/bundled.yaml", "a: 1\n")
    err = refused(write(tmp_path, "s.yaml", f"data: {value}\n"), match="name of a set of data locations")
    assert err.field == "data"


def test_only_the_scenario_file_names_its_data(tmp_path):
    write(tmp_path, "data/bundled.yaml", "a: 1\n")
    write(tmp_path, "base.yaml", "data: bundled\n")
    err = refused(write(tmp_path, "s.yaml", "include: base.yaml\n"), match="only a scenario file")
    assert err.file == str(tmp_path / "base.yaml") and err.field == "data"


# --- derived values -----------------------------------------------------------------------------------


def test_derived_values_are_computed_from_their_sources(tmp_path):
    params = load_parameters(write(tmp_path, "s.yaml", "input_wait_share: 0.05\nscheduling_goodput: 0.65\n"
                                                       "checkpoint_write_s: 9.8\n"))
    assert params["data_stall"] == 0.05 / 0.65
    assert params["timeline_synth_checkpoint_write_s"] == 9.8
    # Without their sources the derived keys are plain values (and absent when not stated).
    assert "data_stall" not in load_parameters(write(tmp_path, "t.yaml", "input_wait_share: 0.05\n"))
    assert load_parameters(write(tmp_path, "u.yaml", "data_stall: 0.1\n")) == {"data_stall": 0.1}


@pytest.mark.parametrize("derived", DERIVED_PARAMETERS, ids=lambda d: d.key)
def test_a_derived_value_stated_beside_its_sources_is_refused(tmp_path, derived):
    sources = "".join(f"{source}: 0.5\n" for source in derived.sources)
    write(tmp_path, "base.yaml", f"{derived.key}: 0.5\n")
    err = refused(write(tmp_path, "s.yaml", f"include: base.yaml\n{sources}"), match="is derived")
    assert err.field == derived.key and err.file == str(tmp_path / "base.yaml")
    assert derived.rule in str(err)


def test_overrides_of_a_source_derive_again_and_a_derived_key_is_refused(tmp_path):
    params = load_parameters(write(tmp_path, "s.yaml", "input_wait_share: 0.05\nscheduling_goodput: 0.65\n"
                                                       "checkpoint_write_s: 9.8\ndevices: 8\n"))
    got = with_overrides(params, {"input_wait_share": 0.1, "checkpoint_write_s": 20})
    assert got["data_stall"] == 0.1 / 0.65 and got["timeline_synth_checkpoint_write_s"] == 20
    assert with_overrides(params, {"scheduling_goodput": 0.5})["data_stall"] == 0.05 / 0.5
    assert with_overrides(params, {"devices": 16}) == {**params, "devices": 16}
    assert params["data_stall"] == 0.05 / 0.65  # the scenario's own mapping is left as it was
    derived = (r"^-p data_stall: derived when the scenario is loaded \(data_stall = input_wait_share / "
               r"scheduling_goodput\); override input_wait_share or scheduling_goodput instead$")
    with pytest.raises(InputError, match=derived):
        with_overrides(params, {"data_stall": 0.2})
    with pytest.raises(InputError, match=r"^-p input_wait_share: cannot derive data_stall .*cannot exceed"):
        with_overrides(params, {"input_wait_share": 0.9})
    with pytest.raises(InputError, match=r"^-p input_wait_share: expected a number"):
        with_overrides(params, {"input_wait_share": "5 %"})
    # without its sources a derived key is a plain parameter, overridden as any other
    alone = load_parameters(write(tmp_path, "u.yaml", "data_stall: 0.1\n"))
    assert with_overrides(alone, {"data_stall": 0.2}) == {"data_stall": 0.2}


def test_derived_value_sources_must_be_numbers(tmp_path):
    err = refused(write(tmp_path, "s.yaml", "input_wait_share: '5 %'\nscheduling_goodput: 0.65\n"),
                  match="data_stall")
    assert err.field == "input_wait_share"
    err = refused(write(tmp_path, "t.yaml", "input_wait_share: 0.05\nscheduling_goodput: 0\n"),
                  match="cannot derive data_stall")
    assert err.field == "scheduling_goodput"
    err = refused(write(tmp_path, "u.yaml", "input_wait_share: 0.7\nscheduling_goodput: 0.65\n"),
                  match="cannot exceed")
    assert err.field == "scheduling_goodput" and "\n" not in str(err)


# --- paths --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", PATH_KEYS)
@pytest.mark.parametrize("name", ["../elsewhere.csv", "/etc/hostname", "data/../../elsewhere.csv"])
def test_paths_leaving_the_project_root_are_refused(tmp_path, key, name):
    write(tmp_path, "data/mine.yaml", f"{key}: ['{name}']\n")
    err = refused(write(tmp_path, "s.yaml", "data: mine\n"), match="outside the project root")
    assert err.field == key and err.file == str(tmp_path / "data" / "mine.yaml")


def test_paths_are_returned_as_written(tmp_path):
    text = "traces_model: data/traces/models/dlrm_example.yaml\ntimeline_mlperf_folder: ''\n" \
           f"traces_files: ['{ROOT / 'data' / 'traces' / 'dlrm_8rank'}']\n"
    params = load_parameters(write(tmp_path, "s.yaml", text))
    assert params["traces_model"] == "data/traces/models/dlrm_example.yaml"
    assert params["timeline_mlperf_folder"] == ""  # empty: none
    assert params["traces_files"] == [str(ROOT / "data" / "traces" / "dlrm_8rank")]  # absolute, inside


# --- where each value comes from ----------------------------------------------------------------------


def test_parameter_sources_name_the_file_of_every_key():
    running = PARAMETERS / "running_example.yaml"
    sources = parameter_sources(running)
    assert list(sources) == list(load_parameters(running))
    assert sources["scheduling_goodput"] == str(running)
    assert sources["startup_min"] == str(PARAMETERS / "shared" / "defaults.yaml")
    assert sources["timeline_files"] == str(PARAMETERS / "data" / "bundled.yaml")
    assert sources["data_stall"] == "derived: data_stall = input_wait_share / scheduling_goodput"
