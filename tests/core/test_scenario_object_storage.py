"""A scenario file in object storage: ``fleetlib report --params s3://bucket/x/running_example.yaml``.

moto's S3 server on loopback (:func:`cluster_support.s3_server`) holds a copy of ``parameters/``
(the scenario, its include ``shared/defaults.yaml`` and its data locations ``data/bundled.yaml``).
Loaded through fsspec it gives the mapping of the local files; the data paths inside it stay relative
to the project root, as for a local scenario.  An include outside the URL's prefix is refused, naming
it; the credentials are never in a message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_support import bucket_in_environment, s3_server

from fleetlib._io import using_limits
from fleetlib.quality import InputError
from fleetlib.scenario import load_parameters, parameter_sources

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PARAMETERS = ROOT / "parameters"
PREFIX = "s3://scenarios/x"  # a bucket of its own: moto keeps one store per process


@pytest.fixture(scope="module")
def bucket() -> Iterator[tuple[dict[str, str], Any]]:
    """A moto S3 server holding ``parameters/`` under ``s3://scenarios/x/``."""
    pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    with s3_server(PARAMETERS, prefix="scenarios/x") as (env, fs):
        fs.pipe_file("scenarios/other/defaults.yaml", (PARAMETERS / "shared" / "defaults.yaml").read_bytes())
        yield env, fs
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3(bucket: tuple[dict[str, str], Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The bucket, its server and credentials named by this process's environment (as a user's would be)."""
    yield from bucket_in_environment(bucket, monkeypatch)


def test_a_scenario_in_a_bucket_loads_as_the_local_one(s3: Any) -> None:
    local = load_parameters(PARAMETERS / "running_example.yaml")
    remote = load_parameters(f"{PREFIX}/running_example.yaml")
    assert list(remote) == list(local)  # the same keys in the same order
    assert remote == local  # data paths (fleet_manifest, scheduling_files ...) stay relative to the project
    # independently: the three files' own keys, read with plain yaml, are all there with their values
    for name in ("running_example.yaml", "shared/defaults.yaml", "data/bundled.yaml"):
        raw = yaml.safe_load((PARAMETERS / name).read_text(encoding="utf-8"))
        for key, value in raw.items():
            if key not in ("include", "data") and not isinstance(value, float):
                assert remote[key] == value, (name, key)
    sources = parameter_sources(f"{PREFIX}/running_example.yaml")
    assert sources["scenario_name"] == f"{PREFIX}/running_example.yaml"
    assert sources["fleet_manifest"] == f"{PREFIX}/data/bundled.yaml"
    assert {v for v in sources.values() if not v.startswith("derived")} == {
        f"{PREFIX}/running_example.yaml", f"{PREFIX}/shared/defaults.yaml", f"{PREFIX}/data/bundled.yaml"}


def _scenario(s3: Any, name: str, include: str) -> str:
    text = (PARAMETERS / "running_example.yaml").read_text(encoding="utf-8")
    text = text.replace("include: shared/defaults.yaml", f"include: {include}")
    s3.pipe_file(f"scenarios/x/{name}", text.encode())
    return f"{PREFIX}/{name}"


@pytest.mark.parametrize("include", ["../other/defaults.yaml", "s3://scenarios/other/defaults.yaml",
                                     "/etc/hostname"])
def test_an_include_outside_the_prefix_is_refused_naming_it(s3: Any, include: str) -> None:
    url = _scenario(s3, "escape.yaml", include)
    with pytest.raises(InputError) as caught:
        load_parameters(url)
    message = str(caught.value)
    assert message.startswith(f"file {url}, field 'include': ")
    assert include in message and f"lies outside {PREFIX}" in message
    assert "testing-secret" not in message


def test_allow_path_opens_another_prefix_for_an_include(s3: Any) -> None:
    url = _scenario(s3, "opened.yaml", "s3://scenarios/other/defaults.yaml")
    with using_limits(allow=["s3://scenarios/other"]):  # fleetlib --allow-path s3://scenarios/other
        opened = load_parameters(url)
    assert opened == load_parameters(PARAMETERS / "running_example.yaml")


def test_a_missing_include_or_data_set_is_named(s3: Any) -> None:
    url = _scenario(s3, "missing.yaml", "shared/nothing.yaml")
    with pytest.raises(InputError, match=r"names 'shared/nothing.yaml', but there is no such file "
                                         r"\(s3://scenarios/x/shared/nothing.yaml\)"):
        load_parameters(url)
    text = (PARAMETERS / "running_example.yaml").read_text(encoding="utf-8")
    s3.pipe_file("scenarios/x/nodata.yaml", text.replace("data: bundled", "data: mine").encode())
    with pytest.raises(InputError, match=r"no data locations named 'mine' \(looked for "
                                         r"s3://scenarios/x/data/mine.yaml; known: bundled\)"):
        load_parameters(f"{PREFIX}/nodata.yaml")


def test_report_takes_a_url_for_its_params() -> None:
    from fleetlib.cli import build_parser

    args = build_parser().parse_args(["report", "--params", f"{PREFIX}/running_example.yaml", "--out", "r"])
    assert args.params == f"{PREFIX}/running_example.yaml"


def test_a_report_on_a_scenario_in_a_bucket_says_what_the_local_one_says(s3: Any, tmp_path: Path) -> None:
    import json

    import nbformat

    from fleetlib.report import run_report

    cell = nbformat.v4.new_code_cell('scenario_name = ""\nscheduling_goodput = 0.0')
    cell.metadata["tags"] = ["parameters"]
    shown = nbformat.v4.new_code_cell("print(scenario_name, scheduling_goodput)")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# One page"), cell, shown])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    page = tmp_path / "one_page.ipynb"
    nbformat.write(nb, page)
    url = f"{PREFIX}/running_example.yaml"
    summaries = {}
    for name, params in (("local", PARAMETERS / "running_example.yaml"), ("url", url)):
        out = run_report(params, tmp_path / name, notebooks=[page], progress=False)
        summaries[name] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    local, remote = summaries["local"], summaries["url"]
    assert remote["params_file"] == url and local["params_file"] == "parameters/running_example.yaml"
    assert remote["scenario"]["name"] == "running_example" and remote["failed"] is None
    timed = {"params_file", "notebooks"}  # the file named, and each notebook's seconds
    assert ({k: v for k, v in remote.items() if k not in timed}
            == {k: v for k, v in local.items() if k not in timed})
