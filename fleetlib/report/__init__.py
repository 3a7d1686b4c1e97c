"""The report pipeline: run the notebook chain on one scenario file (and one's own fleet) and collect it.

``run_report(params_path, out_dir, fleet=None, overrides=None)`` executes each notebook of the chain with
papermill, handing it only the parameters it declares in its ``parameters`` cell, and writes one
self-contained folder::

    out_dir/
      index.html       the page to open: the measured headline (MPG, S, R, P with their windows, records,
                       coverage; the fleet waterfall; the ledger in brief and the -p overrides applied),
                       conventions and contracts, levers and cost, the pages (the walk, the case studies,
                       the course) with a one-line summary each, the ledgers, the stated scenario
      summary.json     "measured": the fleet bundle's measured S, R, P and MPG (fleet_manifest), each
                       factor naming its records and window, with the levers, cost and ledger; then the
                       scenario's *stated* summary (fleetlib.scenario.scenario_summary, labelled "stated")
                       plus the run: which notebooks ran, how long each took, the pages and figures
      notebooks/       the executed notebooks (.ipynb, outputs included, cell ids fixed, no timestamps)
      html/            one page per notebook, code hidden, titled by its first heading, linked to the index
                       and its neighbours (fleetlib.report.html)
      figures/         every figure the notebooks saved through save_figure (PNG + SVG)
      assets/mathjax/  the MathJax copy the pages typeset their formulas with: nothing is loaded remotely

Two runs of an unchanged report write byte-identical pages, notebooks and figures.

The report's fleet is the scenario's ``fleet_manifest`` unless ``fleet=MANIFEST`` names one's own bundle:
every page of the walk (00-03) measures that one bundle (fleetlib.report.own_fleet.fleet_parameters), so
each S, R, P and MPG printed in the walk is the index's.  The bundled real public samples are read by the
case studies (:data:`CASE_STUDY_NOTEBOOKS`), which a report on one's own fleet leaves out, as it leaves out
the cells tagged ``bundled-data``.
``overrides`` (``fleetlib report -p key=value``) replace any parameter.

Notebooks are found relative to the *project root*: the folder above the installed ``fleetlib``
package when that folder holds ``pyproject.toml`` and ``notebooks/`` (an editable install or a
checkout on ``sys.path``), otherwise the nearest such folder at or above the current directory.
They run with the project root as their working directory, so a notebook's relative paths
(``data/...``, ``parameters/...``) mean the same thing in JupyterLab and in a report.

:func:`save_figure` is the single exit for figures: PNG and SVG files whose bytes depend only on
the figure, so a re-run of an unchanged report leaves them identical.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fleetlib._environ import attached_client, environment, project_root
from fleetlib._io import is_url
from fleetlib.quality import DomainError, FleetlibError, InputError
from fleetlib.report.html import ASSETS_DIR, install_assets, notebook_summary, notebook_title, write_page
from fleetlib.report.index import write_index
from fleetlib.report.own_fleet import BUNDLED_TAG, fleet_parameters, parse_overrides, shortened
from fleetlib.report.tables import escape_markdown, factor_text, folded, frame, say
from fleetlib.report.walk import WalkFleet, walk_fleet
from fleetlib.scenario import load_parameters, scenario_summary, with_overrides

__all__ = [
    "CASE_STUDY_NOTEBOOKS",
    "CELL_TIMEOUT_S",
    "COURSE_NOTEBOOKS",
    "FIGURE_DPI",
    "KERNEL_NAME",
    "REGRESSIONS_NOTEBOOK",
    "RUNG_NOTEBOOKS",
    "SERVING_NOTEBOOK",
    "ReportError",
    "WalkFleet",
    "checkout_root",
    "declared_parameters",
    "escape_markdown",
    "factor_text",
    "folded",
    "frame",
    "parse_overrides",
    "run_report",
    "save_figure",
    "say",
    "walk_fleet",
]

#: The measured notebooks, in the walk's order: the whole fleet first (one bundle of the three records
#: -> measured S, R, P and MPG), then each rung drilling into the same fleet's factor (pools, jobs, traced
#: ranks), then regressions between two measurements, then the bundle's serving pool (its own S, R and
#: P = MBU, never part of MPG); they run before the case studies and the course.  Paths are relative to
#: the project root.
RUNG_NOTEBOOKS: list[str] = ["notebooks/00_whole_fleet.ipynb", "notebooks/01_scheduler_records.ipynb",
                             "notebooks/02_job_timeline.ipynb", "notebooks/03_step_traces.ipynb",
                             "notebooks/04_regressions.ipynb", "notebooks/05_serving.ipynb"]

#: The case studies: the bundled real public samples, one notebook per record kind (scheduler samples:
#: Helios, openb; job timelines: the demo job, MLPerf logs, BLOOM; step traces: DLRM, torchtitan, the HTA
#: sets), each headed by the data it reads and what that data can and cannot measure.  They measure other
#: fleets than the report's, so a report on one's own fleet leaves them out.
CASE_STUDY_NOTEBOOKS: list[str] = ["notebooks/case_studies/01_scheduler_samples.ipynb",
                                   "notebooks/case_studies/02_timeline_samples.ipynb",
                                   "notebooks/case_studies/03_trace_samples.ipynb"]

#: The notebook that measures synthetic fleet pairs of its own rather than the bundle's records; a
#: report on one's own fleet leaves it out (``fleetlib compare`` compares one's own bundles).
REGRESSIONS_NOTEBOOK = "notebooks/04_regressions.ipynb"

#: The serving pool's page; a report on a bundle without a ``serving:`` section leaves it out.
SERVING_NOTEBOOK = "notebooks/05_serving.ipynb"

#: The course chain, in the order the chapter's worked examples build on each other.  Paths are
#: relative to the project root.
COURSE_NOTEBOOKS: list[str] = [
    "notebooks/course/01_napkin_maths.ipynb",
    "notebooks/course/02_whole_fleet_and_cost.ipynb",
    "notebooks/course/03_lever_value_and_ceilings.ipynb",
    "notebooks/course/04_trades_and_iso_goodput.ipynb",
    "notebooks/course/05_efficiency_frontier.ipynb",
    "notebooks/course/06_runtime_loss_vs_job_size.ipynb",
    "notebooks/course/07_serving_replica.ipynb",
    "notebooks/course/08_iron_law_and_composing_fixes.ipynb",
]

#: Jupyter kernel the notebooks run on (the environment fleetlib is installed in).
KERNEL_NAME = "python3"

#: Resolution of saved PNG figures, dots per inch.
FIGURE_DPI = 150

#: Per-cell execution limit for report runs, seconds.
CELL_TIMEOUT_S = 600

#: Fixed salt for the ids matplotlib writes into SVG files (random per run otherwise).
_SVG_HASHSALT = "fleetlib"

#: Matplotlib backend the notebook kernels use: inline, so figures appear in the executed notebooks
#: and the HTML even when the calling process runs headless with ``MPLBACKEND=Agg``.
_KERNEL_MPLBACKEND = "module://matplotlib_inline.backend_inline"

_FIGURE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class ReportError(FleetlibError):
    """A report could not be produced: a notebook is missing or failed while running."""


# ---------------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------------


def checkout_root() -> Path:
    """Return the fleetlib checkout the report runs in (see :func:`fleetlib._environ.project_root`).

    Returns
    -------
    Path
        Absolute path of the project root.

    Raises
    ------
    ReportError
        When no fleetlib checkout is found beside the package or above the current directory.
    """
    root = project_root()
    if root is None:
        raise ReportError(
            "cannot find the fleetlib project root (a folder with pyproject.toml and notebooks/): install "
            "fleetlib in editable mode (pip install -e .) or run from inside the checkout"
        )
    return root


# ---------------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------------


def save_figure(fig: Any, name: str, out_dir: str | Path, *, dpi: int = FIGURE_DPI) -> list[Path]:
    """Save a figure as ``<name>.png`` and ``<name>.svg`` with reproducible bytes.

    This is the one place figures leave fleetlib.  Creation dates and software versions are left
    out of the files' metadata and the SVG element ids are salted with a fixed string, so saving
    the same figure twice (in the same or another process) writes identical files.

    Parameters
    ----------
    fig
        A matplotlib ``Figure`` (an ``Axes`` is accepted and its figure saved).
    name
        File stem: letters, digits, ``_``, ``-`` and ``.``, no folder and no extension.
    out_dir
        Folder to write into; created when missing.
    dpi
        Resolution of the PNG file.

    Returns
    -------
    list of Path
        The PNG and SVG paths, in that order.

    Raises
    ------
    DomainError
        When ``name`` is not a plain file stem or ``fig`` is not a figure.
    """
    import matplotlib as mpl

    if not isinstance(name, str) or not _FIGURE_NAME.fullmatch(name) or name.lower().endswith(
            (".png", ".svg")):
        raise DomainError(
            f"figure name must be a plain file stem (letters, digits, _ - .; no folder or extension); "
            f"got {name!r}"
        )
    figure = getattr(fig, "figure", None) if not hasattr(fig, "savefig") else fig
    if figure is None or not hasattr(figure, "savefig"):
        raise DomainError(f"save_figure needs a matplotlib Figure or Axes; got {type(fig).__name__}")
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    png, svg = folder / f"{name}.png", folder / f"{name}.svg"
    with mpl.rc_context({"svg.hashsalt": _SVG_HASHSALT}):
        figure.savefig(png, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
        figure.savefig(svg, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return [png, svg]


# ---------------------------------------------------------------------------------------------------
# Running notebooks
# ---------------------------------------------------------------------------------------------------


def declared_parameters(notebook: str | Path) -> list[str]:
    """Return the parameter names a notebook declares in its ``parameters`` cell.

    Parameters
    ----------
    notebook
        Path of the ``.ipynb`` file.

    Returns
    -------
    list of str
        Names in cell order; empty when the notebook has no ``parameters`` cell.
    """
    import papermill

    return list(papermill.inspect_notebook(str(notebook)))


@contextmanager
def _kernel_environment() -> Iterator[None]:
    """Set the environment the notebook kernels inherit, and restore it afterwards."""
    wanted = {
        "MPLBACKEND": _KERNEL_MPLBACKEND,
        # debugpy (in ipykernel) warns about frozen modules on every kernel start otherwise.
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        # A batch run: no front end will ever answer a widget, so the notebooks build none.
        "FLEETLIB_BATCH": "1",
    }
    with environment(wanted):
        yield


def _resolve_notebooks(notebooks: Sequence[str | Path] | None, root: Path) -> list[Path]:
    chain = RUNG_NOTEBOOKS + CASE_STUDY_NOTEBOOKS + COURSE_NOTEBOOKS if notebooks is None else list(notebooks)
    if not chain:
        raise ReportError("the notebook chain is empty: give at least one notebook")
    paths = [p if p.is_absolute() else root / p for p in map(Path, chain)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ReportError("notebook(s) not found: " + ", ".join(missing))
    names = [p.stem for p in paths]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReportError(f"two notebooks in the chain share a name ({', '.join(duplicates)}); "
                          "their outputs would overwrite each other")
    return paths


def _quiet_shutdown_kernel_manager() -> type:
    """Return a kernel manager that shuts a finished kernel down without interrupting it first.

    jupyter_client sends SIGINT before every shutdown request; a kernel that is idle between
    messages then logs ``KeyboardInterrupt caught in kernel`` on stderr, in the middle of the
    report's progress lines, though nothing went wrong.  Interrupts outside shutdown (a cell past
    its timeout) are sent as before.
    """
    from jupyter_client.manager import AsyncKernelManager

    class QuietShutdownKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return QuietShutdownKernelManager


def _run_one(source: Path | Any, executed: Path, parameters: dict[str, Any], root: Path, name: str) -> None:
    """Execute one notebook (a path or a notebook object) with papermill; raise ReportError naming it."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    try:
        papermill.execute_notebook(
            source if not isinstance(source, Path) else str(source), str(executed), parameters=parameters,
            kernel_name=KERNEL_NAME, cwd=str(root), progress_bar=False, log_output=False,
            execution_timeout=CELL_TIMEOUT_S,
            # The kernel's own log (not the notebook's output): keep errors, drop start-up chatter.
            extra_arguments=["--IPKernelApp.log_level=ERROR"],
            kernel_manager_class=_quiet_shutdown_kernel_manager(),
        )
    except PapermillExecutionError as exc:
        raise ReportError(
            f"notebook {name} failed in cell {exc.exec_count} (cell index {exc.cell_index}): "
            f"{exc.ename}: {exc.evalue}. The executed notebook up to the failure is {executed}"
        ) from exc
    except Exception as exc:  # the kernel died, a cell timed out, the notebook is unreadable ...
        raise ReportError(
            f"notebook {name} could not be run: {type(exc).__name__}: {exc}"
            + (f". Partial output: {executed}" if executed.exists() else "")
        ) from exc


def _without_bundled_cells(source: Path) -> Any:
    """Read a notebook and drop the cells tagged :data:`~fleetlib.report.own_fleet.BUNDLED_TAG`."""
    import nbformat

    nb = nbformat.read(source, as_version=4)
    nb.cells = [c for c in nb.cells if BUNDLED_TAG not in c.metadata.get("tags", [])]
    return nb


def _kind(value: Any) -> str:
    """How a message names a parameter value's kind."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return "a list of text"
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return "a list of numbers"
        return "a list"
    return type(value).__name__


def _fits(value: Any, reference: Any) -> bool:
    """Whether an override ``value`` has the kind of ``reference`` (a declared default or scenario value).

    A whole number stands for a real number, never the reverse; booleans are no numbers; a list's
    items must be text where the reference's are, numbers where its are.
    """
    if reference is None:
        return True
    if isinstance(reference, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(reference, bool)
    if isinstance(reference, int):
        return isinstance(value, int)
    if isinstance(reference, float):
        return isinstance(value, (int, float))
    if isinstance(reference, list):
        if not isinstance(value, list):
            return False
        if reference and all(isinstance(r, str) for r in reference):
            return all(isinstance(v, str) for v in value)
        if reference and all(isinstance(r, (int, float)) and not isinstance(r, bool) for r in reference):
            return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        return True
    return isinstance(value, type(reference))


def _check_overrides(overrides: Mapping[str, Any], chain: Sequence[Path], params: Mapping[str, Any]) -> None:
    """Refuse a ``-p`` key that nothing declares, or a value of another kind than the parameter's.

    A key must be declared by a notebook of the chain or held by the scenario; its value must have
    the kind of the scenario's value or of a notebook's declared default (:func:`_fits`), so that a
    wrong value is refused before any notebook runs rather than failing deep in one of them.
    """
    import ast

    import papermill

    declared: dict[str, list[tuple[str, str, Any]]] = {}
    for path in chain:
        for name, info in papermill.inspect_notebook(str(path)).items():
            try:
                default = ast.literal_eval(str(info.get("default")))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                default = None  # not a literal: any kind is taken
            declared.setdefault(name, []).append((path.stem, str(info.get("default")), default))
    unknown = sorted(k for k in overrides if k not in declared and k not in params)
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], sorted({*declared, *params}), n=1)
        hint = f"; did you mean {close[0]}?" if close else " (see the notebooks' parameters cells)"
        raise InputError(f"-p {unknown[0]}: no notebook of the report declares this parameter and the "
                         f"scenario file has no such key{hint}")
    for key, value in overrides.items():
        references = ([params[key]] if key in params else []) + [d for _, _, d in declared.get(key, [])]
        if any(_fits(value, r) for r in references):
            continue
        if key in params:
            where = f"the scenario file has {key}: {params[key]!r}"
        else:
            notebook, text, _ = declared[key][0]
            where = f"{notebook} declares {key} = {text}"
        raise InputError(f"-p {key}: value {shortened(repr(value))} is {_kind(value)}; the parameter is "
                         f"{_kind(references[0])} ({where})")


def _default_chain(own_fleet: bool, has_traces: bool,
                   has_serving: bool = True) -> tuple[list[str], list[dict[str, str]]]:
    """Return the default chain and the notebooks left out of it, each with the reason."""
    chain, skipped = RUNG_NOTEBOOKS + CASE_STUDY_NOTEBOOKS + COURSE_NOTEBOOKS, []
    if not has_traces:
        chain = [nb for nb in chain if not nb.endswith("03_step_traces.ipynb")]
        skipped.append({"name": "03_step_traces",
                        "reason": "the fleet bundle has no step traces of a job with a model config"})
    if not has_serving:
        chain = [nb for nb in chain if nb != SERVING_NOTEBOOK]
        skipped.append({"name": Path(SERVING_NOTEBOOK).stem,
                        "reason": "the fleet bundle has no serving: section (serving pool scheduler files, "
                                  "replica lifecycle log, decode steps, model)"})
    if not own_fleet:
        return chain, skipped
    chain = [nb for nb in chain if nb != REGRESSIONS_NOTEBOOK and nb not in CASE_STUDY_NOTEBOOKS]
    skipped.append({"name": Path(REGRESSIONS_NOTEBOOK).stem,
                    "reason": "it measures synthetic fleet pairs of its own; compare your bundles with "
                              "'fleetlib compare BASELINE CANDIDATE'"})
    skipped += [{"name": Path(nb).stem,
                 "reason": "a case study of the bundled public samples, not of your fleet"}
                for nb in CASE_STUDY_NOTEBOOKS]
    return chain, skipped


def run_report(params_path: str | Path, out_dir: str | Path, *,
               notebooks: Sequence[str | Path] | None = None, progress: bool = True,
               fleet: str | Path | None = None, overrides: Mapping[str, Any] | None = None,
               scheduler: str | None = None) -> Path:
    """Run the notebook chain on one scenario file (and optionally one's own fleet) and write the report.

    Each notebook runs with papermill on the ``python3`` kernel, with the project root as its
    working directory.  It receives only the scenario parameters it declares, plus ``output_dir``
    (the report's ``figures/`` folder) when it declares that name.  Notebooks that save figures
    through :func:`save_figure` into ``output_dir`` therefore fill ``figures/``.  The report's
    ``notebooks/``, ``html/``, ``figures/`` and ``assets/`` folders, ``summary.json`` and ``index.html`` are
    replaced on every run; nothing else in ``out_dir`` is touched.  The kernels run with ``FLEETLIB_BATCH=1``,
    so widget controls are never built (see :func:`fleetlib.widgets.interactive_allowed`).

    Parameters
    ----------
    params_path
        Scenario file (see :func:`fleetlib.scenario.load_parameters`: its includes and data locations are
        flattened into the one mapping each notebook takes its declared parameters from).
    out_dir
        Report folder; created when missing.
    notebooks
        The chain to run, in order; default :data:`RUNG_NOTEBOOKS`, :data:`CASE_STUDY_NOTEBOOKS`, then
        :data:`COURSE_NOTEBOOKS`.  Relative paths are taken from the project root.
    progress
        Print one line per notebook to standard error.
    fleet
        A fleet bundle's manifest (``fleet.yaml``) that replaces the scenario's ``fleet_manifest`` as the
        report's fleet (:func:`fleetlib.report.own_fleet.fleet_parameters`); the case studies, the
        regressions notebook and the cells tagged ``bundled-data`` are left out of that report.  Without a
        traced job in the report's fleet the step traces page is left out of the default chain (the index
        says so).
    overrides
        Parameter values that replace the scenario's (and the manifest's), e.g. from ``-p key=value``.
    scheduler
        Measure the fleet bundle of ``summary.json`` on the running Dask cluster of this address
        (``--scheduler``; left running); None: Dask's ``scheduler-address`` configuration
        (``DASK_SCHEDULER_ADDRESS``) when it names one, else in this process.  The numbers are the same.

    Returns
    -------
    Path
        The report folder (absolute); its ``index.html`` is the page to open.

    Raises
    ------
    fleetlib.quality.InputError
        The scenario file, the manifest, or a file either names cannot be read or holds a refused value, or
        an override names a parameter nothing declares; nothing has run yet.
    ReportError
        A notebook is missing, or fails; the message names the notebook, the failing cell and its
        error.  The partially executed notebook is kept but gets no page; the pages of the notebooks
        before it, ``summary.json`` (``failed``: name, error, partial notebook) and the index, which
        names the failure, are written.
    """
    params = load_parameters(params_path)
    root = checkout_root()
    has_traces = has_serving = True
    manifest = fleet if fleet is not None else params.get("fleet_manifest")
    if manifest and is_url(str(manifest)):
        raise InputError(f"--fleet {manifest}: a report reads its fleet bundle from local files; measure a "
                         "bundle in object storage with 'fleetlib fleet URL', or copy it here for a report")
    if manifest:  # the report's fleet: --fleet's bundle, else the scenario's, through the one path
        path = Path(manifest) if fleet is not None or Path(manifest).is_absolute() else root / manifest
        fleet_params = fleet_parameters(path, root)
        has_traces = fleet_params.pop("fleet_has_traces")
        has_serving = fleet_params.pop("fleet_has_serving")
        params.update(fleet_params)
    default, skipped = _default_chain(fleet is not None, has_traces, has_serving)
    chain = _resolve_notebooks(default if notebooks is None else notebooks, root)
    if notebooks is not None:
        skipped = []
    _check_overrides(overrides or {}, chain, params)
    params = with_overrides(params, overrides or {})  # derived values follow their overridden sources
    summary = scenario_summary(params)
    measured = _measured_block(params, scheduler, progress)

    out = Path(out_dir).resolve()
    folders = {name: out / name for name in ("notebooks", "html", "figures", ASSETS_DIR)}
    for folder in folders.values():
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    for stale in ("summary.json", "index.html"):
        (out / stale).unlink(missing_ok=True)
    install_assets(out)

    runs: list[dict[str, Any]] = []
    report = {"measured": measured, **summary, "params_file": (str(params_path) if is_url(params_path)
                                                          else _relative(Path(params_path), root)),
              "fleet_manifest": None if fleet is None else str(fleet), "overrides": dict(overrides or {}),
              "skipped": skipped, "failed": None}
    with _kernel_environment():
        for i, source in enumerate(chain, start=1):
            declared = declared_parameters(source)
            given = {k: params[k] for k in declared if k in params}
            if "output_dir" in declared:
                given["output_dir"] = str(folders["figures"])
            executed = folders["notebooks"] / source.name
            started = time.perf_counter()
            runnable = _without_bundled_cells(source) if fleet is not None else source
            try:
                _run_one(runnable, executed, given, root, source.name)
            except ReportError as exc:  # no page of a failed notebook: the index names the failure
                if progress:
                    print(f"report [{i}/{len(chain)}] {source.name}: FAILED after "
                          f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
                failed = {"name": source.stem, "source": _relative(source, root), "error": str(exc),
                          "notebook": _relative(executed, out) if executed.exists() else None}
                _finish(out, runs, {**report, "failed": failed})
                raise
            seconds = time.perf_counter() - started
            if progress:
                print(f"report [{i}/{len(chain)}] {source.name}: {seconds:.1f} s", file=sys.stderr,
                      flush=True)
            runs.append({"name": source.stem, "source": _relative(source, root), "seconds": round(seconds, 3),
                         "notebook": _relative(executed, out), "html": f"html/{source.stem}.html"})

    _finish(out, runs, report)
    return out


def _finish(out: Path, runs: Sequence[Mapping[str, Any]], report: Mapping[str, Any]) -> None:
    """Write the pages of the notebooks that ran, ``summary.json`` and the index."""
    pages = _write_pages(runs, out)
    figures = sorted(_relative(p, out) for p in (out / "figures").rglob("*") if p.is_file())
    summary = {**report, "notebooks": list(runs), "pages": pages, "figures": figures}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n",
                                      encoding="utf-8")
    write_index(out, summary)


def _write_pages(runs: Sequence[Mapping[str, Any]], out: Path) -> list[dict[str, str]]:
    """Write each executed notebook's page, linked to the index and its neighbours; return the page list."""
    import nbformat

    infos = []
    for run in runs:
        nb = nbformat.read(out / run["notebook"], as_version=4)
        infos.append({"name": run["name"], "html": run["html"], "title": notebook_title(nb, run["name"]),
                      "summary": notebook_summary(nb),
                      "part": _part(run["source"])})
    for k, (run, info) in enumerate(zip(runs, infos, strict=True)):
        nav: dict[str, Any] = {"index_href": "../index.html"}
        if k > 0:
            nav["previous"] = {"href": Path(infos[k - 1]["html"]).name, "title": infos[k - 1]["title"]}
        if k + 1 < len(infos):
            nav["next"] = {"href": Path(infos[k + 1]["html"]).name, "title": infos[k + 1]["title"]}
        write_page(out / run["notebook"], out / info["html"], nav=nav)
    return infos


def _part(source: str) -> str:
    """Return the index section a notebook's page is listed in: ``walk``, ``case`` or ``course``."""
    folder = f"/{source}"
    return "course" if "/course/" in folder else "case" if "/case_studies/" in folder else "walk"


def _measured_block(params: Mapping[str, Any], scheduler: str | None = None,
                    progress: bool = False) -> dict[str, Any] | None:
    """Measure the scenario's fleet bundle (``fleet_manifest``) for summary.json; None without one.

    Beside :func:`fleetlib.fleet.views.measured_summary` it records the measured levers, the cost of a useful
    device-hour and the ledger (totals, rows repaired and rejected per input file, the entries) for the index.
    """
    manifest = params.get("fleet_manifest")
    if not manifest:
        return None
    from fleetlib.fleet import measure_fleet
    from fleetlib.fleet.views import lever_table, measured_summary

    path = Path(manifest)
    if not path.is_absolute():
        path = checkout_root() / path
    with attached_client(scheduler, progress=progress) as client:  # a cluster named: left running
        bar = None if progress else False  # the walk's own bar: on a terminal, unless --quiet
        fleet = (measure_fleet(path, progress=bar) if client is None
                 else measure_fleet(path, engine="dask", client=client, progress=bar))
    block = measured_summary(fleet, manifest=str(manifest))
    block["levers"] = json.loads(lever_table(fleet).to_json(orient="records"))
    block["cost"] = {"price_per_device_hour": fleet.price_per_device_hour,
                     "cost_per_useful_device_hour": fleet.cost_per_useful_device_hour}
    block["ledger"] = _ledger_summary(fleet, path.parent)
    return block


def _ledger_summary(fleet: Any, folder: Path) -> dict[str, Any]:
    """Totals of a fleet's ledger, its rows repaired / rejected per input file, and its entries."""
    ledger = fleet.ledger
    record_of: dict[str, str] = {}
    for record, files in fleet.sources.items():
        for name in files if isinstance(files, list) else [f for fs in files.values() for f in fs]:
            record_of[str(name)] = record
    counts: dict[str, dict[str, int]] = {}
    entries = []
    for entry in ledger.entries:
        name = _relative(Path(entry.file), folder) if entry.file else "(no file)"
        row = counts.setdefault(name, {"repaired": 0, "rejected": 0})
        row["repaired" if entry.action == "repaired" else "rejected"] += 1
        entries.append({"action": entry.action, "file": name, "row": entry.row, "field": entry.field,
                        "reason": entry.reason})
    none = {"repaired": 0, "rejected": 0}
    inputs = [{"record": record_of.get(name, ""), "file": name, **counts.get(name, none)}
              for name in record_of]
    inputs += [{"record": "", "file": name, **c} for name, c in counts.items() if name not in record_of]
    return {"read": ledger.read, "kept": ledger.kept, "repaired": ledger.repaired,
            "rejected": ledger.rejected, "unused": dict(ledger.unused), "flags": len(ledger.flags),
            "inputs": inputs, "entries": entries}


def _relative(path: Path, base: Path) -> str:
    """Return ``path`` relative to ``base`` in POSIX form, or absolute when it lies outside."""
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()
