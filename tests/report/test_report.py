"""The report pipeline: figure saving (fast) and papermill runs of a tiny notebook chain (``notebook``).

The chain is built here in ``tmp_path``: one notebook declares a scenario parameter and
``output_dir`` and saves a figure through ``save_figure``; one has no parameters cell; one fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from fleetlib.quality import DomainError, InputError
from fleetlib.report import (
    COURSE_NOTEBOOKS,
    ReportError,
    checkout_root,
    declared_parameters,
    run_report,
    save_figure,
)
from fleetlib.scenario import load_parameters, scenario_summary

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "parameters" / "running_example.yaml"
SOURCE_MARKER = "SOURCE_ONLY_MARKER_7f3a"


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _line_figure():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0, 1, 4], marker="o", label="a line")
    ax.set_xlabel("x (s)")
    ax.legend()
    return fig


def _write_notebook(path: Path, cells: list) -> Path:
    nb = new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture
def chain(tmp_path) -> dict[str, Path]:
    good = _write_notebook(tmp_path / "a_figure.ipynb", [
        new_markdown_cell("# A tiny report notebook"),
        new_code_cell("devices: int = 1  # number of devices\noutput_dir: str = 'unused'\n"
                      "unknown_to_yaml: float = 2.5",
                      metadata={"tags": ["parameters"]}),
        new_code_cell(
            f"# {SOURCE_MARKER}\n"
            "import matplotlib.pyplot as plt\n"
            "from fleetlib.report import save_figure\n"
            "fig, ax = plt.subplots(figsize=(4, 3))\n"
            "ax.plot([0, 1], [0, devices], marker='o')\n"
            "ax.set_xlabel('x (s)')\n"
            "save_figure(fig, 'tiny_line', output_dir)\n"
            "print(f'DEVICES={devices} UNKNOWN={unknown_to_yaml}')"
        ),
    ])
    plain = _write_notebook(tmp_path / "b_plain.ipynb", [
        new_code_cell("print('NO PARAMETERS HERE')"),
    ])
    failing = _write_notebook(tmp_path / "c_failing.ipynb", [
        new_code_cell("x: int = 1", metadata={"tags": ["parameters"]}),
        new_code_cell("print('before the failure')"),
        new_code_cell("raise ValueError('deliberate failure 42')"),
        new_code_cell("print('never reached')"),
    ])
    return {"good": good, "plain": plain, "failing": failing}


# --- fast: figures, paths, parameters ---------------------------------------------------------------


def test_save_figure_writes_png_and_svg_identically_twice(tmp_path):
    fig = _line_figure()
    first = save_figure(fig, "line", tmp_path / "one")
    second = save_figure(fig, "line", tmp_path / "two")
    assert [p.suffix for p in first] == [".png", ".svg"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in first)
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes()
    svg = first[1].read_text()
    assert "<dc:date>" not in svg and "Matplotlib v" not in svg
    assert first[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"Software" not in first[0].read_bytes()


def test_save_figure_accepts_axes(tmp_path):
    fig = _line_figure()
    paths = save_figure(fig.axes[0], "from_axes", tmp_path)
    assert [p.name for p in paths] == ["from_axes.png", "from_axes.svg"]


@pytest.mark.parametrize("name", ["", "../escape", "sub/name", "line.png", "line.SVG", " space"])
def test_save_figure_refuses_names_that_are_not_stems(tmp_path, name):
    with pytest.raises(DomainError, match="figure name"):
        save_figure(_line_figure(), name, tmp_path)


def test_save_figure_refuses_non_figures(tmp_path):
    with pytest.raises(DomainError, match="Figure"):
        save_figure(object(), "x", tmp_path)


def test_project_root_is_this_checkout():
    assert checkout_root() == ROOT


def test_course_chain_order():
    assert [Path(p).name for p in COURSE_NOTEBOOKS] == [
        "01_napkin_maths.ipynb",
        "02_whole_fleet_and_cost.ipynb",
        "03_lever_value_and_ceilings.ipynb",
        "04_trades_and_iso_goodput.ipynb",
        "05_efficiency_frontier.ipynb",
        "06_runtime_loss_vs_job_size.ipynb",
        "07_serving_replica.ipynb",
        "08_iron_law_and_composing_fixes.ipynb",
    ]
    assert all(p.startswith("notebooks/course/") for p in COURSE_NOTEBOOKS)


def test_declared_parameters(chain):
    assert declared_parameters(chain["good"]) == ["devices", "output_dir", "unknown_to_yaml"]
    assert declared_parameters(chain["plain"]) == []


def test_missing_notebook_is_named_before_anything_runs(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ReportError, match=r"nope\.ipynb"):
        run_report(PARAMS, out, notebooks=[tmp_path / "nope.ipynb"], progress=False)
    assert not (out / "summary.json").exists()


def test_bad_scenario_fails_before_any_notebook(tmp_path, chain):
    bad = tmp_path / "bad.yaml"
    bad.write_text("scheduling_goodput: [a, 1]\n")  # a list mixing text and numbers is refused
    with pytest.raises(InputError, match=r"bad\.yaml"):
        run_report(bad, tmp_path / "out", notebooks=[chain["good"]], progress=False)
    assert not (tmp_path / "out").exists()


# --- slow: papermill runs ---------------------------------------------------------------------------


@pytest.mark.notebook
def test_run_report_on_a_tiny_chain(tmp_path, chain, capsys):
    out = run_report(PARAMS, tmp_path / "report", notebooks=[chain["good"], chain["plain"]])
    assert out == (tmp_path / "report").resolve()

    # progress: one line per notebook on stderr
    err = capsys.readouterr().err
    assert len(re.findall(r"report \[\d/2\] \S+\.ipynb: [\d.]+ s", err)) == 2

    # executed notebooks: only declared scenario parameters injected, plus output_dir
    executed = nbformat.read(out / "notebooks" / "a_figure.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    src = injected[0].source
    assert "devices = 128" in src
    assert f'output_dir = "{out / "figures"}"' in src
    assert "scheduling_goodput" not in src and "unknown_to_yaml" not in src
    outputs = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.outputs)
    assert "DEVICES=128 UNKNOWN=2.5" in outputs
    plain = nbformat.read(out / "notebooks" / "b_plain.ipynb", as_version=4)
    assert not any("injected-parameters" in c.metadata.get("tags", []) for c in plain.cells)

    # HTML without input cells: outputs and markdown yes, code no
    html = (out / "html" / "a_figure.html").read_text()
    assert "DEVICES=128" in html and "A tiny report notebook" in html
    assert SOURCE_MARKER not in html and "save_figure" not in html
    code_cells = re.findall(r'class="jp-Cell jp-CodeCell[^"]*"', html)
    assert code_cells and all("jp-mod-noInput" in c for c in code_cells)

    # figures: PNG + SVG in figures/
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["tiny_line.png", "tiny_line.svg"]

    # summary.json: the scenario summary plus the run
    summary = json.loads((out / "summary.json").read_text())
    expected = scenario_summary(load_parameters(PARAMS))
    for key, value in expected.items():
        assert summary[key] == value
    assert summary["figures"] == ["figures/tiny_line.png", "figures/tiny_line.svg"]
    assert [n["name"] for n in summary["notebooks"]] == ["a_figure", "b_plain"]
    for entry in summary["notebooks"]:
        assert entry["seconds"] > 0
        assert (out / entry["html"]).is_file() and (out / entry["notebook"]).is_file()

    # a re-run replaces the report and writes byte-identical figures
    svg_before = (out / "figures" / "tiny_line.svg").read_bytes()
    png_before = (out / "figures" / "tiny_line.png").read_bytes()
    (out / "figures" / "stale.png").write_bytes(b"old")
    run_report(PARAMS, out, notebooks=[chain["good"]], progress=False)
    assert (out / "figures" / "tiny_line.svg").read_bytes() == svg_before
    assert (out / "figures" / "tiny_line.png").read_bytes() == png_before
    assert not (out / "figures" / "stale.png").exists()
    assert not (out / "notebooks" / "b_plain.ipynb").exists()


@pytest.mark.notebook
def test_failing_notebook_is_named_and_partial_output_kept(tmp_path, chain, capsys):
    out = tmp_path / "report"
    with pytest.raises(ReportError) as info:
        run_report(PARAMS, out, notebooks=[chain["good"], chain["failing"]])
    message = str(info.value)
    assert "c_failing.ipynb" in message
    assert "ValueError" in message and "deliberate failure 42" in message
    assert "\n" not in message.strip()
    assert "FAILED" in capsys.readouterr().err

    partial = nbformat.read(out / "notebooks" / "c_failing.ipynb", as_version=4)
    texts = "".join(o.get("text", "") for c in partial.cells if c.cell_type == "code" for o in c.outputs)
    assert "before the failure" in texts and "never reached" not in texts
    # no page of the failed notebook; the index names the failure, the page before it is written
    assert not (out / "html" / "c_failing.html").exists()
    assert (out / "html" / f"{Path(chain['good']).stem}.html").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"]["name"] == "c_failing" and "deliberate failure 42" in summary["failed"]["error"]
    assert summary["failed"]["notebook"] == "notebooks/c_failing.ipynb"
    assert [p["name"] for p in summary["pages"]] == [Path(chain["good"]).stem]
    index = (out / "index.html").read_text()
    assert 'id="failed"' in index and "c_failing failed" in index and "deliberate failure 42" in index


def test_the_report_kernel_is_shut_down_without_an_interrupt_but_timeouts_still_interrupt():
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from fleetlib.report import _quiet_shutdown_kernel_manager

    sent: list[str] = []

    async def record(self):
        sent.append("SIGINT")

    cls = _quiet_shutdown_kernel_manager()
    assert issubclass(cls, AsyncKernelManager)
    original = AsyncKernelManager._async_interrupt_kernel
    AsyncKernelManager._async_interrupt_kernel = record
    try:
        km = cls()
        km.shutting_down = True
        asyncio.run(km._async_interrupt_kernel())
        assert sent == []  # the shutdown request alone ends an idle kernel
        km.shutting_down = False
        asyncio.run(km._async_interrupt_kernel())
        assert sent == ["SIGINT"]  # a cell past its timeout is still interrupted
    finally:
        AsyncKernelManager._async_interrupt_kernel = original


def test_serving_page_in_the_chain_and_left_out_without_a_serving_section():
    from fleetlib.report import RUNG_NOTEBOOKS, SERVING_NOTEBOOK, _default_chain

    assert RUNG_NOTEBOOKS[-1] == SERVING_NOTEBOOK == "notebooks/05_serving.ipynb"
    chain, skipped = _default_chain(False, True)
    assert SERVING_NOTEBOOK in chain and skipped == []
    chain, skipped = _default_chain(True, True, True)
    assert SERVING_NOTEBOOK in chain
    chain, skipped = _default_chain(True, True, False)
    assert SERVING_NOTEBOOK not in chain
    reasons = {entry["name"]: entry["reason"] for entry in skipped}
    assert "no serving: section" in reasons["05_serving"]
