"""Golden outputs of the course notebooks (course tooling, not part of the installed package).

Execute, keep only the checked cells' outputs, strip the rest.

A course notebook teaches one worked example of the chapter.  The numbers that example must reproduce
are printed in *golden cells*: code cells whose first line is ``# NBVAL_CHECK_OUTPUT`` and that carry
the ``keep_output`` cell tag.  Committed course notebooks keep outputs (and execution counts) only in
those cells, so ``pytest --nbval-lax notebooks/course`` re-executes every notebook and compares the
printed numbers with what the library computed when the golden outputs were last refreshed.  Every
other cell is committed without outputs and without an execution count.

Golden outputs are never typed in: :func:`refresh_golden_outputs` executes the notebook with its
default parameters (papermill, kernel ``python3``, working directory = the project root) and copies
the golden cells' outputs back into the source notebook, with consecutive chunks of printed text merged
(:func:`coalesce_streams`), so that refreshing an unchanged notebook changes nothing.

Command line::

    python tests/golden.py notebooks/course/*.ipynb          # refresh in place
    python tests/golden.py --check notebooks/course/*.ipynb  # only verify the committed state
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nbformat

from fleetlib.quality import DomainError

__all__ = [
    "GOLDEN_MARKER",
    "KEEP_OUTPUT_TAG",
    "PROJECT_ROOT",
    "check_committed",
    "coalesce_streams",
    "is_golden_cell",
    "main",
    "refresh_golden_outputs",
    "strip_outputs",
]

#: First line of a cell whose printed output nbval compares (``--nbval-lax``).
GOLDEN_MARKER = "# NBVAL_CHECK_OUTPUT"

#: Cell tag that tells nbstripout-style tools to keep the cell's outputs.
KEEP_OUTPUT_TAG = "keep_output"

#: The project root: notebooks execute with this as their working directory.
PROJECT_ROOT = Path(__file__).resolve().parents[1]

#: Output types a golden cell may hold: printed text only, so the comparison is deterministic.
_TEXT_OUTPUTS = {"stream"}


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def is_golden_cell(cell: Any) -> bool:
    """Return True when ``cell`` is a golden cell (marker on its first line and the keep tag).

    Parameters
    ----------
    cell
        A notebook cell (``nbformat.NotebookNode`` or a plain dict).

    Returns
    -------
    bool
        True for a code cell whose first line is :data:`GOLDEN_MARKER` and whose tags include
        :data:`KEEP_OUTPUT_TAG`.
    """
    if cell.get("cell_type") != "code":
        return False
    first = _source(cell).lstrip("\n").split("\n", 1)[0].strip()
    tags = cell.get("metadata", {}).get("tags", [])
    return first == GOLDEN_MARKER and KEEP_OUTPUT_TAG in tags


def _clean_cell_metadata(cell: Any) -> None:
    # papermill and nbclient write timing and status metadata; none of it belongs in git.
    for key in ("papermill", "execution", "collapsed", "scrolled", "ExecuteTime"):
        cell.get("metadata", {}).pop(key, None)


def strip_outputs(nb: nbformat.NotebookNode, *, keep_golden: bool = True) -> nbformat.NotebookNode:
    """Return a copy of ``nb`` with outputs and execution counts removed, except in golden cells.

    Execution metadata written by papermill/nbclient (cell ``papermill`` and ``execution`` entries,
    the notebook's ``papermill`` and ``widgets`` entries) is removed as well.  Golden cells keep their
    outputs *and* their execution count (nbval rejects a cell with outputs but no count).

    Parameters
    ----------
    nb
        The notebook to strip; it is not modified.
    keep_golden
        Keep the golden cells' outputs (default).  False strips every output.

    Returns
    -------
    nbformat.NotebookNode
        The stripped copy.
    """
    out = copy.deepcopy(nb)
    for key in ("papermill", "widgets"):
        out.metadata.pop(key, None)
    for cell in out.cells:
        _clean_cell_metadata(cell)
        if cell.cell_type != "code":
            continue
        if keep_golden and is_golden_cell(cell):
            continue
        cell.outputs = []
        cell.execution_count = None
    return out


def check_committed(nb: nbformat.NotebookNode, *, course: bool = True) -> list[str]:
    """List what is wrong with a notebook's committed state (empty list: nothing).

    Parameters
    ----------
    nb
        The notebook as committed.
    course
        True for a course notebook (golden cells may and must hold outputs); False for any other
        notebook (no outputs at all).

    Returns
    -------
    list of str
        One message per problem: outputs outside golden cells, an execution count on a non-golden
        cell, a golden cell without output or count, non-text golden output, no golden cell at all.
    """
    problems: list[str] = []
    golden = 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        gold = course and is_golden_cell(cell)
        if gold:
            golden += 1
            if not cell.outputs:
                problems.append(f"cell {i}: golden cell has no committed output")
            if cell.execution_count is None:
                problems.append(f"cell {i}: golden cell has no execution count (nbval needs one)")
            kinds = {o.get("output_type") for o in cell.outputs}
            if not kinds <= _TEXT_OUTPUTS:
                problems.append(f"cell {i}: golden cell holds {sorted(kinds - _TEXT_OUTPUTS)} output; "
                                "print plain text only")
        else:
            if cell.outputs:
                problems.append(f"cell {i}: committed outputs outside a golden cell")
            if cell.execution_count is not None:
                problems.append(f"cell {i}: execution count outside a golden cell")
    if course and golden == 0:
        problems.append(f"no golden cell (first line {GOLDEN_MARKER!r} and tag {KEEP_OUTPUT_TAG!r})")
    return problems


def coalesce_streams(outputs: Sequence[Any]) -> list[Any]:
    """Merge consecutive stream outputs of the same stream into one, keeping every other output.

    A kernel may deliver one cell's printed text in chunks that split differently on every run;
    merging them makes the committed golden output depend only on the text, so refreshing an unchanged
    notebook leaves it byte-for-byte unchanged.

    Parameters
    ----------
    outputs
        A code cell's outputs (``nbformat.NotebookNode`` or plain dicts); not modified.

    Returns
    -------
    list
        Copies of the outputs, with each run of same-named ``stream`` outputs joined into one whose
        text is the concatenation (stored as a single string).
    """
    merged: list[Any] = []
    for output in outputs:
        out = copy.deepcopy(output)
        if out.get("output_type") == "stream":
            text = out.get("text", "")
            out["text"] = "".join(text) if isinstance(text, list) else str(text)
            last = merged[-1] if merged else None
            if (last is not None and last.get("output_type") == "stream"
                    and last.get("name") == out.get("name")):
                last["text"] += out["text"]
                continue
        merged.append(out)
    return merged


def _execute(path: Path, *, cwd: Path, timeout_s: float) -> nbformat.NotebookNode:
    import papermill as pm  # imported here: papermill is heavy and only this step needs it

    with tempfile.TemporaryDirectory(prefix="fleetlib-golden-") as tmp:
        executed = Path(tmp) / path.name
        pm.execute_notebook(
            str(path), str(executed), parameters={}, kernel_name="python3", cwd=str(cwd),
            execution_timeout=timeout_s, progress_bar=False, log_output=False,
        )
        return nbformat.read(executed, as_version=4)


def refresh_golden_outputs(path: str | Path, *, cwd: str | Path | None = None,
                           timeout_s: float = 600.0) -> list[str]:
    """Execute a course notebook with its default parameters and write back only golden outputs.

    The notebook runs under papermill (kernel ``python3``) with no parameters injected, in ``cwd``
    (default: the project root).  The source notebook is then rewritten: golden cells get the outputs
    and execution counts just computed (printed chunks merged by :func:`coalesce_streams`), every other
    cell is stripped (:func:`strip_outputs`).  Cells are matched by cell id.

    Parameters
    ----------
    path
        The ``.ipynb`` file; rewritten in place.
    cwd
        Working directory of the kernel; the project root by default.
    timeout_s
        Per-cell execution timeout in seconds.

    Returns
    -------
    list of str
        The printed text of each golden cell, in order (for logging).

    Raises
    ------
    DomainError
        If the notebook has no golden cell, if a golden cell printed nothing or produced
        non-text output, or if cells cannot be matched after execution.
    """
    path = Path(path)
    source = nbformat.read(path, as_version=4)
    if not any(is_golden_cell(c) for c in source.cells):
        raise DomainError(f"{path}: no golden cell (first line {GOLDEN_MARKER!r} and tag "
                          f"{KEEP_OUTPUT_TAG!r}); nothing to refresh")
    executed = _execute(path, cwd=Path(cwd) if cwd is not None else PROJECT_ROOT, timeout_s=timeout_s)
    by_id = {c.get("id"): c for c in executed.cells
             if "injected-parameters" not in c.get("metadata", {}).get("tags", [])}
    printed: list[str] = []
    for i, cell in enumerate(source.cells):
        if not is_golden_cell(cell):
            continue
        ran = by_id.get(cell.get("id"))
        if ran is None:
            raise DomainError(f"{path}: cell {i} (id {cell.get('id')!r}) not found in the executed copy")
        kinds = {o.get("output_type") for o in ran.outputs}
        if not ran.outputs or not kinds <= _TEXT_OUTPUTS:
            raise DomainError(f"{path}: golden cell {i} must print plain text; it produced "
                              f"{sorted(kinds) or 'nothing'}")
        cell.outputs = coalesce_streams(ran.outputs)
        cell.execution_count = ran.execution_count
        printed.append("".join(o.get("text", "") for o in ran.outputs))
    stripped = strip_outputs(source)
    nbformat.validate(stripped)
    nbformat.write(stripped, path)
    return printed


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: refresh (default) or check the golden outputs of notebooks.

    Parameters
    ----------
    argv
        Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        0 on success, 1 when ``--check`` found problems.
    """
    parser = argparse.ArgumentParser(prog="python tests/golden.py", description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="course notebooks (.ipynb)")
    parser.add_argument("--check", action="store_true",
                        help="do not execute; report committed outputs outside golden cells")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per-cell timeout (s)")
    args = parser.parse_args(argv)
    status = 0
    for nb_path in args.notebooks:
        if args.check:
            problems = check_committed(nbformat.read(nb_path, as_version=4))
            for p in problems:
                print(f"{nb_path}: {p}")
            status |= bool(problems)
            continue
        printed = refresh_golden_outputs(nb_path, timeout_s=args.timeout_s)
        print(f"{nb_path}: {len(printed)} golden cell(s) refreshed")
    return status


if __name__ == "__main__":
    sys.exit(main())
