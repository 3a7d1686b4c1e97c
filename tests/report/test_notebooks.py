"""Notebook tests: static checks of the committed notebooks (fast) and papermill runs (marked ``notebook``).

Static checks read the ``.ipynb`` files only:

* each course notebook has exactly one ``parameters`` cell, holding only annotated assignments of
  literals whose names are keys of the parameter files (plus ``output_dir`` and ``interactive``), with
  the running example's values as defaults, and each declared parameter is used by a later cell;
* every key of the parameter files is declared by at least one course notebook;
* committed outputs exist only in golden cells of course notebooks, and every course notebook has
  golden cells;
* every figure a notebook saves is drawn by a ``fleetlib.plots`` function first;
* no code cell of any notebook (rung or course) defines a function, lambda or class.

The papermill runs execute every course notebook with each parameter file (only the keys the notebook
declares are passed, as the report pipeline does) into ``tmp_path`` with ``output_dir`` set, and
check that each figure the notebook saves was written as PNG and SVG.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import nbformat
import pytest
from golden import GOLDEN_MARKER, KEEP_OUTPUT_TAG, check_committed, coalesce_streams, is_golden_cell

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "notebooks" / "course"
PARAMETER_FILES = sorted((ROOT / "parameters").glob("*.yaml"))
EXTRA_PARAMETERS = {"output_dir", "interactive"}
EXPECTED_COURSE = [
    "01_napkin_maths.ipynb",
    "02_whole_fleet_and_cost.ipynb",
    "03_lever_value_and_ceilings.ipynb",
    "04_trades_and_iso_goodput.ipynb",
    "05_efficiency_frontier.ipynb",
    "06_runtime_loss_vs_job_size.ipynb",
    "07_serving_replica.ipynb",
    "08_iron_law_and_composing_fixes.ipynb",
]
COURSE_NOTEBOOKS = [COURSE / name for name in EXPECTED_COURSE]
SAVE_CALL = re.compile(r"save_figure\(\s*[\w.]+\s*,\s*[\"']([A-Za-z0-9_\-]+)[\"']\s*,\s*output_dir\s*\)")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _source(cell: nbformat.NotebookNode) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def _parameter_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]


def _declared(nb: nbformat.NotebookNode) -> dict[str, object]:
    """Names and literal defaults of the notebook's parameters cell."""
    (cell,) = _parameter_cells(nb)
    out: dict[str, object] = {}
    for node in ast.parse(_source(cell)).body:
        assert isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name), ast.dump(node)
        out[node.target.id] = ast.literal_eval(node.value)
    return out


def _yaml(path: Path) -> dict[str, object]:
    # a scenario file includes shared defaults and a data-locations file: read it as the report does
    from fleetlib.scenario import load_parameters

    return load_parameters(path)


def _figure_names(nb: nbformat.NotebookNode) -> list[str]:
    names = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            names += SAVE_CALL.findall(_source(cell))
    return names


@pytest.fixture(scope="module")
def parameter_keys() -> set[str]:
    keys: set[str] = set()
    for path in PARAMETER_FILES:
        keys |= set(_yaml(path))
    return keys


# ---------------------------------------------------------------------------------------------------
# Static checks
# ---------------------------------------------------------------------------------------------------


def test_course_notebooks_present() -> None:
    assert sorted(p.name for p in COURSE.glob("*.ipynb")) == EXPECTED_COURSE
    assert len(PARAMETER_FILES) >= 2
    # Both scenarios carry the same keys, so any notebook runs with either.
    scenarios = [_yaml(p) for p in PARAMETER_FILES]
    for scenario in scenarios[1:]:
        assert set(scenario) == set(scenarios[0])
        assert {k: type(v) for k, v in scenario.items()} == {k: type(v) for k, v in scenarios[0].items()}


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_is_typed_literals(path: Path, parameter_keys: set[str]) -> None:
    nb = _read(path)
    cells = _parameter_cells(nb)
    assert len(cells) == 1, f"{path.name}: {len(cells)} cells tagged 'parameters'"
    body = ast.parse(_source(cells[0])).body
    assert body, "empty parameters cell"
    for node in body:
        assert isinstance(node, ast.AnnAssign), f"{path.name}: not annotated: {ast.unparse(node)}"
        assert isinstance(node.target, ast.Name) and node.value is not None
        value = ast.literal_eval(node.value)  # raises on anything but a literal
        annotation = ast.unparse(node.annotation)
        assert annotation.split("[")[0] == type(value).__name__, f"{path.name}: {annotation} = {value!r}"
    declared = _declared(nb)
    unknown = set(declared) - parameter_keys - EXTRA_PARAMETERS
    assert not unknown, f"{path.name}: not keys of the parameter files: {sorted(unknown)}"
    assert declared.get("output_dir") == "" and declared.get("interactive") is False


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_parameter_defaults_are_the_running_example(path: Path) -> None:
    running = _yaml(ROOT / "parameters" / "running_example.yaml")
    declared = _declared(_read(path))
    for name, default in declared.items():
        if name in EXTRA_PARAMETERS:
            continue
        assert default == running[name], f"{path.name}: {name} = {default!r}, scenario {running[name]!r}"
        # Same type as the scenario files hold (a float stays a float even when integral).
        assert type(default) is type(running[name]), f"{path.name}: {name} is {type(default).__name__}"


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_every_declared_parameter_is_used(path: Path) -> None:
    nb = _read(path)
    (param_cell,) = _parameter_cells(nb)
    later = "\n".join(_source(c) for c in nb.cells if c.cell_type == "code" and c is not param_cell)
    names = {n.id for n in ast.walk(ast.parse(later)) if isinstance(n, ast.Name)}
    unused = set(_declared(nb)) - names
    assert not unused, f"{path.name}: declared but never used: {sorted(unused)}"


def test_every_parameter_key_is_used_by_a_notebook(parameter_keys: set[str]) -> None:
    from fleetlib.report import CASE_STUDY_NOTEBOOKS, RUNG_NOTEBOOKS

    used: set[str] = set()
    for path in COURSE_NOTEBOOKS + [ROOT / name for name in RUNG_NOTEBOOKS + CASE_STUDY_NOTEBOOKS]:
        used |= set(_declared(_read(path)))
    assert parameter_keys - used == set()


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_course_outputs_only_in_golden_cells(path: Path) -> None:
    nb = _read(path)
    assert check_committed(nb, course=True) == []
    golden = [c for c in nb.cells if is_golden_cell(c)]
    assert golden, "no golden cell"
    # The marker without the tag (or the reverse) would be silently stripped or silently unchecked.
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        marked = _source(cell).lstrip("\n").startswith(GOLDEN_MARKER)
        tagged = KEEP_OUTPUT_TAG in cell.metadata.get("tags", [])
        assert marked == tagged, f"{path.name}: golden marker and keep_output tag disagree"
    for cell in golden:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert text.strip(), "golden cell printed nothing"
        # Printed chunks are merged on refresh, so a re-run cannot reshuffle the committed outputs.
        assert len(coalesce_streams(cell.outputs)) == len(cell.outputs), f"{path.name}: unmerged chunks"
        assert "object at 0x" not in text, "object repr in golden output"
        assert not any(line.lstrip().startswith(("<", "{", "[", "(")) for line in text.splitlines()), (
            f"{path.name}: golden output should be plain printed numbers, not reprs:\n{text}")


def test_notebooks_outside_course_have_no_outputs() -> None:
    others = [p for p in (ROOT / "notebooks").rglob("*.ipynb")
              if COURSE not in p.parents and ".ipynb_checkpoints" not in p.parts]
    for path in others:
        assert check_committed(_read(path), course=False) == [], path


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_figures_drawn_by_fleetlib_plots_and_saved(path: Path) -> None:
    nb = _read(path)
    code = "\n".join(_source(c) for c in nb.cells if c.cell_type == "code")
    assert "fleetlib.plots.use_theme()" in code
    assert "fleetlib.plots." in code.replace("fleetlib.plots.use_theme()", "")
    names = _figure_names(nb)
    assert names, f"{path.name}: saves no figure"
    assert len(names) == len(set(names)), "figure names must be unique within a notebook"
    assert "if output_dir:" in code


def test_figure_names_unique_across_course() -> None:
    names = [n for p in COURSE_NOTEBOOKS for n in _figure_names(_read(p))]
    assert len(names) == len(set(names))


ALL_NOTEBOOKS = (sorted((ROOT / "notebooks").glob("*.ipynb"))
                 + sorted((ROOT / "notebooks" / "case_studies").glob("*.ipynb")) + COURSE_NOTEBOOKS)


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_no_code_cell_defines_a_function_or_class(path: Path) -> None:
    from notebook_support import defined_functions

    found = defined_functions(_read(path))
    assert found == [], f"{path.name}: {found}"


def _displayed_names(cell: nbformat.NotebookNode) -> set[str]:
    """Names in a code cell's last statement when it is a bare expression (shown as the cell's result)."""
    body = ast.parse(_source(cell)).body
    if not body or not isinstance(body[-1], ast.Expr):
        return set()
    value = body[-1].value
    if isinstance(value, ast.Call) and ast.unparse(value.func) in ("print", "display", "plt.show"):
        return set()
    return {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_no_course_result_is_shown_twice(path: Path) -> None:
    """A value a golden cell prints is not also shown as the result of the code cell before it."""
    code = [c for c in _read(path).cells if c.cell_type == "code"]
    twice = []
    for cell, after in itertools.pairwise(code):
        if not is_golden_cell(after):
            continue
        printed = {n.id for n in ast.walk(ast.parse(_source(after))) if isinstance(n, ast.Name)}
        shown = _displayed_names(cell) & printed
        if shown:
            last = _source(cell).splitlines()[-1]
            twice.append(f"{sorted(shown)} shown by {last!r} and printed by the golden cell after it")
    assert not twice, f"{path.name}: " + "; ".join(twice)


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_course_widget_cell_is_one_explorer_call(path: Path) -> None:
    """The last cell shows one :mod:`fleetlib.widgets` explorer, under the static figure drawn before it."""
    import fleetlib.widgets

    code_cells = [c for c in _read(path).cells if c.cell_type == "code"]
    widget_cell = _source(code_cells[-1])
    (statement,) = ast.parse(widget_cell).body
    assert isinstance(statement, ast.If) and ast.unparse(statement.test) == "interactive", widget_cell
    (shown,) = statement.body
    call = shown.value if isinstance(shown, ast.Expr) else None
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "display", widget_cell
    (explorer,) = call.args
    assert isinstance(explorer, ast.Call), widget_cell
    name = ast.unparse(explorer.func)
    assert name.startswith("fleetlib.widgets.") and name.split(".")[-1] in fleetlib.widgets.__all__, name
    earlier = "\n".join(_source(c) for c in code_cells[:-1])
    assert "import fleetlib.widgets" in earlier
    assert "plt.show()" in earlier, "the static figure is drawn before the widget cell"


# ---------------------------------------------------------------------------------------------------
# Papermill runs
# ---------------------------------------------------------------------------------------------------


@pytest.mark.notebook
@pytest.mark.parametrize("params_path", PARAMETER_FILES, ids=lambda p: p.stem)
@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_with_parameter_file(path: Path, params_path: Path, tmp_path: Path) -> None:
    import papermill as pm

    nb = _read(path)
    declared = _declared(nb)
    scenario = _yaml(params_path)
    # Only declared keys are passed, as the report pipeline does.
    params = {k: v for k, v in scenario.items() if k in declared}
    out_dir = tmp_path / "figures"
    params["output_dir"] = str(out_dir)
    params["interactive"] = False
    executed = tmp_path / path.name
    pm.execute_notebook(str(path), str(executed), parameters=params, kernel_name="python3", cwd=str(ROOT),
                        execution_timeout=300, progress_bar=False)
    result = _read(executed)
    errors = [o for c in result.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    for name in _figure_names(nb):
        for ext in ("png", "svg"):
            written = out_dir / f"{name}.{ext}"
            assert written.is_file() and written.stat().st_size > 1000, written
    # Every golden cell printed something under this scenario too.
    for cell in result.cells:
        if is_golden_cell(cell):
            assert "".join(o.get("text", "") for o in cell.outputs).strip()


@pytest.mark.notebook
@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=lambda p: p.stem)
def test_interactive_cell_runs_headless(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a batch run ``interactive=True`` builds the widgets; the cell ends without a front end."""
    import papermill as pm

    monkeypatch.delenv("FLEETLIB_BATCH", raising=False)
    executed = tmp_path / path.name
    pm.execute_notebook(str(path), str(executed), parameters={"interactive": True}, kernel_name="python3",
                        cwd=str(ROOT), execution_timeout=120, progress_bar=False)
    result = _read(executed)
    code_cells = [c for c in result.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code_cells)
    widget_cell = code_cells[-1]
    assert _source(widget_cell).startswith("if interactive:")
    assert not [o for o in widget_cell.outputs if o.get("output_type") == "error"]
    state = result.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert state.get("state"), "no widget was created"


BATCH_NOTEBOOKS = [ROOT / "notebooks" / "case_studies" / n for n in (
    "01_scheduler_samples.ipynb", "02_timeline_samples.ipynb", "03_trace_samples.ipynb")] + COURSE_NOTEBOOKS


@pytest.mark.notebook
@pytest.mark.parametrize("path", BATCH_NOTEBOOKS, ids=lambda p: p.stem)
def test_interactive_true_is_forced_off_in_a_batch_run(path: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``FLEETLIB_BATCH=1`` (fleetlib report, make test) ``interactive=True`` builds no widget, says
    so, and every static figure is still drawn; a short cell timeout catches a cell waiting on a front end."""
    import papermill as pm

    monkeypatch.setenv("FLEETLIB_BATCH", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")  # figures reach the outputs
    executed = tmp_path / path.name
    pm.execute_notebook(str(path), str(executed), parameters={"interactive": True}, kernel_name="python3",
                        cwd=str(ROOT), execution_timeout=120, progress_bar=False)
    result = _read(executed)
    outputs = [o for c in result.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert "widgets" not in result.metadata, "a widget was built in a batch run"
    assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert "interactive controls left out" in "".join(o.get("text", "") for o in outputs)
    drawn = sum("image/png" in o.get("data", {}) for o in outputs)
    assert drawn >= sum("plt.show()" in _source(c) for c in result.cells if c.cell_type == "code")


# ---------------------------------------------------------------------------------------------------
# tests/golden.py on hand-built notebooks
# ---------------------------------------------------------------------------------------------------


def _toy_notebook() -> nbformat.NotebookNode:
    from nbformat import v4

    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = v4.new_code_cell("share: float = 0.65  # a fraction")
    params.metadata["tags"] = ["parameters"]
    work = v4.new_code_cell(
        "from fleetlib.accounting import loss_shares\nsplit = loss_shares(share, 0.9, 0.48)\nsplit")
    gold = v4.new_code_cell(f"{GOLDEN_MARKER}\nprint(f\"useful {{split['useful']:.4f}}\")")
    gold.metadata["tags"] = [KEEP_OUTPUT_TAG]
    nb.cells = [v4.new_markdown_cell("# toy"), params, work, gold]
    for i, cell in enumerate(nb.cells):
        cell.id = f"toy{i}"
    return nb


def test_strip_outputs_keeps_only_golden_cells() -> None:
    from golden import strip_outputs

    nb = _toy_notebook()
    nb.metadata["papermill"] = {"duration": 1.0}
    for count, cell in enumerate(nb.cells[1:], start=1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"out {count}\n")]
        cell.metadata["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
    stripped = strip_outputs(nb)
    assert "papermill" not in stripped.metadata and "papermill" in nb.metadata  # input untouched
    params, work, gold = stripped.cells[1:]
    assert params.outputs == [] and params.execution_count is None
    assert work.outputs == [] and work.execution_count is None
    assert gold.execution_count == 3 and gold.outputs[0]["text"] == "out 3\n"
    assert all("execution" not in c.metadata for c in stripped.cells)
    assert check_committed(stripped) == []
    assert check_committed(nb) != []  # outputs outside golden cells are reported
    assert check_committed(strip_outputs(nb, keep_golden=False)) == [
        "cell 3: golden cell has no committed output",
        "cell 3: golden cell has no execution count (nbval needs one)",
    ]
    assert check_committed(strip_outputs(nb, keep_golden=False), course=False) == []


def test_coalesce_streams_merges_consecutive_chunks_of_one_stream() -> None:
    from nbformat.v4 import new_output

    outputs = [
        new_output("stream", name="stdout", text="a = 1"),
        new_output("stream", name="stdout", text="\nb = 2\n"),
        new_output("stream", name="stderr", text="warned\n"),
        new_output("stream", name="stdout", text="c = 3\n"),
        new_output("display_data", data={"text/plain": "x"}),
        new_output("stream", name="stdout", text=["d = 4\n", "e = 5\n"]),
    ]
    merged = coalesce_streams(outputs)
    assert [(o["output_type"], o.get("name"), o.get("text")) for o in merged] == [
        ("stream", "stdout", "a = 1\nb = 2\n"),
        ("stream", "stderr", "warned\n"),
        ("stream", "stdout", "c = 3\n"),
        ("display_data", None, None),
        ("stream", "stdout", "d = 4\ne = 5\n"),
    ]
    assert outputs[0]["text"] == "a = 1" and len(outputs) == 6  # input untouched
    assert coalesce_streams([]) == []


def test_check_committed_requires_a_golden_cell_and_plain_text() -> None:
    nb = _toy_notebook()
    nb.cells = nb.cells[:3]
    assert any("no golden cell" in p for p in check_committed(nb))
    nb = _toy_notebook()
    gold = nb.cells[3]
    gold.execution_count = 1
    gold.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "x"})]
    assert any("print plain text only" in p for p in check_committed(nb))


@pytest.mark.notebook
def test_refresh_golden_outputs_writes_what_the_library_computed(tmp_path: Path) -> None:
    from golden import refresh_golden_outputs

    from fleetlib.accounting import loss_shares

    path = tmp_path / "toy.ipynb"
    nbformat.write(_toy_notebook(), path)
    printed = refresh_golden_outputs(path, timeout_s=120)
    expected = f"useful {loss_shares(0.65, 0.9, 0.48)['useful']:.4f}\n"
    assert printed == [expected]
    written = _read(path)
    assert check_committed(written) == []
    assert written.cells[3].outputs[0]["text"] == expected
    assert written.cells[2].outputs == []  # the displayed dict was stripped
