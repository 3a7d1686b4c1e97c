"""Helpers shared by the rung-notebook tests: reading a notebook's parameters cell and running it.

Imported as ``from notebook_support import ...``: pytest's rootdir-based import mode puts ``tests/`` on
``sys.path`` (the folder has no ``__init__.py``).
"""

from __future__ import annotations

import ast
import html
import re
import shutil
import subprocess
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
PARAMETER_FILES = sorted((ROOT / "parameters").glob("*.yaml"))
EXTRA_PARAMETERS = {"output_dir", "interactive"}
SAVE_CALL = re.compile(r"save_figure\(\s*[\w.]+\s*,\s*[\"']([A-Za-z0-9_\-]+)[\"']\s*,\s*output_dir\s*\)")


def source(cell: nbformat.NotebookNode) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def parameter_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]


def declared_parameters(nb: nbformat.NotebookNode) -> dict[str, object]:
    (cell,) = parameter_cells(nb)
    out: dict[str, object] = {}
    for node in ast.parse(source(cell)).body:
        assert isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name), ast.dump(node)
        value = ast.literal_eval(node.value)  # raises on anything but a literal
        assert ast.unparse(node.annotation) == type(value).__name__, ast.unparse(node)
        out[node.target.id] = value
    return out


def load_yaml(path: Path) -> dict[str, object]:
    # a scenario file includes shared defaults and a data-locations file: read it as the report does
    from fleetlib.scenario import load_parameters

    return load_parameters(path)


def figure_names(nb: nbformat.NotebookNode) -> list[str]:
    return [n for c in nb.cells if c.cell_type == "code" for n in SAVE_CALL.findall(source(c))]


def run_notebook(notebook: Path, tmp_path: Path, params: dict[str, object]) -> nbformat.NotebookNode:
    import papermill as pm

    executed = tmp_path / notebook.name
    pm.execute_notebook(str(notebook), str(executed), parameters=params, kernel_name="python3", cwd=str(ROOT),
                        execution_timeout=300, progress_bar=False)
    result = nbformat.read(executed, as_version=4)
    errors = [o for c in result.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    return result


def _markdown_text(markdown: str) -> str:
    """The text a reader sees of Markdown that :func:`fleetlib.report.say` wrote (escapes undone)."""
    return html.unescape(re.sub(r"\\(.)", r"\1", markdown))


def printed(result: nbformat.NotebookNode) -> str:
    """Return what the cells printed and the sentences they displayed (``say``), one per line."""
    out = []
    for cell in result.cells:
        if cell.cell_type != "code":
            continue
        for o in cell.outputs:
            if o.get("output_type") == "stream":
                out.append(o.get("text", ""))
            elif "text/markdown" in o.get("data", {}):
                markdown = o["data"]["text/markdown"]
                markdown = markdown if isinstance(markdown, str) else "".join(markdown)
                out.append(_markdown_text(markdown) + "\n")
    return "".join(out)


# ---------------------------------------------------------------------------------------------------
# Static checks every rung notebook passes (each test file calls them with its notebook and prefix)
# ---------------------------------------------------------------------------------------------------

NBSTRIPOUT = shutil.which("nbstripout", path=str(ROOT / ".venv" / "bin"))


def check_stripped(nb: nbformat.NotebookNode) -> None:
    """Assert the committed notebook carries no outputs, counts, papermill or widget metadata."""
    from golden import check_committed

    assert check_committed(nb, course=False) == []
    assert all(c.execution_count is None and not c.outputs for c in nb.cells if c.cell_type == "code")
    assert "papermill" not in nb.metadata and "widgets" not in nb.metadata


def check_nbstripout_clean(notebook: Path) -> None:
    """Assert ``nbstripout --verify`` would change nothing in the file."""
    assert NBSTRIPOUT is not None
    done = subprocess.run([NBSTRIPOUT, "--verify", str(notebook)], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def check_parameters_match_files(nb: nbformat.NotebookNode, prefix: str, *,
                                 not_ours: frozenset[str] = frozenset()) -> dict[str, object]:
    """Assert the parameters cell and both scenario files agree on the ``prefix`` keys.

    Every declared parameter (bar ``output_dir`` / ``interactive``) starts with ``prefix``, is a key of
    every file in ``parameters/`` with the same type, and defaults to the running example's value; every
    ``prefix`` key of the files (bar ``not_ours``, keys another notebook owns) is declared.  Returns the
    declared parameters.
    """
    declared = declared_parameters(nb)
    assert declared["output_dir"] == "" and declared["interactive"] is False
    scenarios = {p.name: load_yaml(p) for p in PARAMETER_FILES}
    assert len(scenarios) >= 2
    for name, default in declared.items():
        if name in EXTRA_PARAMETERS:
            continue
        assert name.startswith(prefix), name
        for file, scenario in scenarios.items():
            assert name in scenario, f"{name} missing from {file}"
            assert type(scenario[name]) is type(default), (file, name)
        assert default == scenarios["running_example.yaml"][name], name
    for file, scenario in scenarios.items():
        ours = {k for k in scenario if k.startswith(prefix)} - not_ours
        assert ours == set(declared) - EXTRA_PARAMETERS, file
    return declared


def defined_functions(nb: nbformat.NotebookNode) -> list[str]:
    """Return ``"cell N: kind name"`` for every function, lambda or class a code cell defines.

    Notebooks hold no logic the library should own: a cell calls the library, draws a figure or shows
    a table, and never defines a function or class (a widget's callback lives in :mod:`fleetlib.widgets`).
    """
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(source(cell))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                found.append(f"cell {i}: {type(node).__name__} {getattr(node, 'name', '')}".rstrip())
    return found


#: pyplot / seaborn calls a notebook may make itself: creating a figure or axes, and showing it.
FIGURE_CALLS = frozenset({"subplots", "figure", "subplot_mosaic", "show", "close"})


def direct_plotting_calls(nb: nbformat.NotebookNode) -> list[str]:
    """Return ``"cell N: plt.name"`` for every pyplot or seaborn call other than figure/axes creation."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(source(cell))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("plt", "sns")
                    and not (node.func.value.id == "plt" and node.func.attr in FIGURE_CALLS)):
                found.append(f"cell {i}: {node.func.value.id}.{node.func.attr}")
    return found
