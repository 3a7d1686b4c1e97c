"""The scheduler case study ``notebooks/case_studies/01_scheduler_samples.ipynb``: static checks and runs.

Static checks read the committed ``.ipynb`` only: outputs stripped (``tests/golden.py's check_committed``
with ``course=False`` and ``nbstripout --verify``), one ``parameters`` cell of typed literals whose
names are keys of *both* parameter files with the running example's values as defaults, every
``scheduling_*`` key of the files declared, every declared parameter used, figures saved under unique
names through ``fleetlib.report.save_figure``, and the notebook first of the case studies.

The papermill runs (marked ``notebook``) execute it with each parameter file, and once on the Slurm
sample with a window, the cross-pool view and the widgets, and check the figures it writes and two
printed numbers against values computed here from the raw Helios files.
"""

from __future__ import annotations

import ast

import nbformat
import numpy as np
import pandas as pd
import pytest
from notebook_support import (
    NBSTRIPOUT,
    PARAMETER_FILES,
    ROOT,
    check_nbstripout_clean,
    check_parameters_match_files,
    check_stripped,
    declared_parameters,
    direct_plotting_calls,
    figure_names,
    load_yaml,
    parameter_cells,
    printed,
    run_notebook,
    source,
)

from fleetlib import Window, scheduling
from fleetlib.report import (
    CASE_STUDY_NOTEBOOKS,
    COURSE_NOTEBOOKS,
    RUNG_NOTEBOOKS,
    _resolve_notebooks,
    checkout_root,
)

NOTEBOOK = ROOT / "notebooks" / "case_studies" / "01_scheduler_samples.ipynb"
HELIOS = ROOT / "data" / "scheduler" / "helios_earth_may2020"
#: Keys of the parameter files that belong to the course, not to this notebook, despite the prefix.
COURSE_SCHEDULING_KEYS = {"scheduling_goodput", "scheduling_ceiling"}


@pytest.fixture(scope="module")
def nb() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


# ---------------------------------------------------------------------------------------------------
# Static checks
# ---------------------------------------------------------------------------------------------------


def test_committed_without_outputs(nb):
    check_stripped(nb)


@pytest.mark.skipif(NBSTRIPOUT is None, reason="nbstripout is not installed in .venv")
def test_nbstripout_would_change_nothing():
    check_nbstripout_clean(NOTEBOOK)


def test_parameters_are_keys_of_both_files_with_running_example_defaults(nb):
    check_parameters_match_files(nb, "scheduling_", not_ours=frozenset(COURSE_SCHEDULING_KEYS))


def test_parameter_files_name_bundled_data(nb):
    declared = declared_parameters(nb)
    for key in ("scheduling_files", "scheduling_openb_files"):
        assert declared[key] and all((ROOT / p).is_file() for p in declared[key])
        assert all(p.startswith("data/scheduler/") for p in declared[key])
    assert len([p for p in declared["scheduling_files"] if p.endswith(".csv.gz")]) == 5  # five Helios VCs


def test_every_declared_parameter_is_used(nb):
    (param_cell,) = parameter_cells(nb)
    later = "\n".join(source(c) for c in nb.cells if c.cell_type == "code" and c is not param_cell)
    names = {n.id for n in ast.walk(ast.parse(later)) if isinstance(n, ast.Name)}
    assert set(declared_parameters(nb)) - names == set()


def test_figures_saved_through_save_figure(nb):
    code = "\n".join(source(c) for c in nb.cells if c.cell_type == "code")
    assert "fleetlib.plots.use_theme()" in code and "if output_dir:" in code
    names = figure_names(nb)
    assert len(names) >= 5 and len(names) == len(set(names))
    course = {n for p in COURSE_NOTEBOOKS for n in figure_names(nbformat.read(ROOT / p, as_version=4))}
    assert not set(names) & course
    assert code.count("save_figure(") == len(names)  # every save names output_dir


def test_figures_are_drawn_by_fleetlib_plots(nb):
    """The notebook's code makes figures and axes, and fleetlib.plots draws on them; nothing else plots."""
    assert direct_plotting_calls(nb) == []
    code = "\n".join(source(c) for c in nb.cells if c.cell_type == "code")
    assert "import seaborn" not in code and "matplotlib.ticker" not in code
    for plot in ("partition_waterfall", "pool_shares", "idle_views", "goodput_by_hour", "idle_by_hour",
                 "daily_series", "injected_vs_computed", "openb_wait_bars", "cohort_goodput_bars"):
        assert f"fleetlib.plots.{plot}(" in code
    assert "fleetlib.widgets.scheduling_explorer(" in code


def test_notebook_opens_the_case_studies_after_the_walk():
    # the walk (00-04) measures the report's fleet; the case studies of the bundled samples follow it
    assert CASE_STUDY_NOTEBOOKS[0] == "notebooks/case_studies/01_scheduler_samples.ipynb"
    chain = _resolve_notebooks(None, checkout_root())
    assert chain[len(RUNG_NOTEBOOKS)] == NOTEBOOK
    expected = RUNG_NOTEBOOKS + CASE_STUDY_NOTEBOOKS + COURSE_NOTEBOOKS
    assert [p.relative_to(ROOT).as_posix() for p in chain] == expected


# ---------------------------------------------------------------------------------------------------
# Papermill runs
# ---------------------------------------------------------------------------------------------------


@pytest.mark.notebook
@pytest.mark.parametrize("params_path", PARAMETER_FILES, ids=lambda p: p.stem)
def test_runs_with_each_parameter_file(params_path, tmp_path, nb):
    declared = declared_parameters(nb)
    params = {k: v for k, v in load_yaml(params_path).items() if k in declared}  # as the report passes them
    params["output_dir"] = str(tmp_path / "figures")
    result = run_notebook(NOTEBOOK, tmp_path, params)
    for name in figure_names(nb):
        for ext in ("png", "svg"):
            written = tmp_path / "figures" / f"{name}.{ext}"
            assert written.is_file() and written.stat().st_size > 1000, written
    text = printed(result)
    # S over the whole May record from the raw minute files: running / total GPUs, all five VCs
    raw = [pd.read_csv(p) for p in sorted(HELIOS.glob("vc*.csv.gz"))]
    s_raw = sum(r["running_gpu_num"].sum() for r in raw) / sum(r["total_gpu_num"].sum() for r in raw)
    assert f"S = {s_raw:.4f}" in text
    assert "largest per-pool difference, any column: 0 device-s" in text  # synthetic truth reproduced
    assert "1 repaired" in text  # the quota glitch day
    # the silent stretches (logging gap of 2020-05-09/10 and a shorter one): S with them taken out of the
    # denominator, from the raw files -- minutes in which every VC has zero running and zero pending GPU jobs
    quiet = np.logical_and.reduce([(r["running_gpu_num"] == 0) & (r["pending_gpujob_num"] == 0) for r in raw])
    edges = np.diff(np.r_[0, quiet.astype(int), 0])
    runs = [(a, b) for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True)
            if b - a >= 60]
    silent_total = sum(sum(r["total_gpu_num"].iloc[a:b].sum() for a, b in runs) for r in raw)
    s_without = sum(r["running_gpu_num"].sum() for r in raw) / (
        sum(r["total_gpu_num"].sum() for r in raw) - silent_total)
    assert f"{len(runs)} silent stretch(es)" in text
    assert f"{s_without:.4f} without them" in text


@pytest.mark.notebook
def test_runs_on_slurm_with_window_cross_pool_view_and_widgets(tmp_path):
    slurm = "data/scheduler/slurm_sample/"
    params = {
        "scheduling_format": "slurm",
        "scheduling_files": [slurm + n for n in ("sacct.txt", "sacctmgr_events.txt", "sinfo_nodes.txt")],
        "scheduling_tz": "UTC",
        "scheduling_window_start": "2024-03-04T00:00Z",
        "scheduling_window_end": "2024-03-05T00:00Z",
        "scheduling_window_exclude": ["2024-03-04T06:00Z/2024-03-04T08:00Z"],
        "scheduling_pool_view": "cross_pool",
        "scheduling_synth_allocations": 2000,
        "interactive": True,
    }
    result = run_notebook(NOTEBOOK, tmp_path, params)
    text = printed(result)
    # the page measures the window less its exclusion, as the rung does given the same window
    excluded = Window.parse(("2024-03-04T00:00Z", "2024-03-05T00:00Z"),
                            exclude=["2024-03-04T06:00Z/2024-03-04T08:00Z"])
    s = scheduling.measure([ROOT / f for f in params["scheduling_files"]], format="slurm", tz="UTC",
                           window=excluded).factor().value
    full = scheduling.measure([ROOT / f for f in params["scheduling_files"]], format="slurm", tz="UTC",
                              window=("2024-03-04T00:00Z", "2024-03-05T00:00Z")).factor().value
    assert s != full and f"S = {s:.4f} over" in text
    assert "cross-pool idle view" in text and "2024-03-04T00:00:00+00:00 .. 2024-03-05T00:00:00+00:00" in text
    assert "held time of" in text and "(records)" in text  # Slurm has jobs: its own held time is handed on
    state = result.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert state.get("state"), "no widget was created"
