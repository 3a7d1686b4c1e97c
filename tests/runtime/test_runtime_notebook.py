"""The job-timeline case study ``notebooks/case_studies/02_timeline_samples.ipynb``: static checks and runs.

Static checks read the committed ``.ipynb`` only: outputs stripped (``tests/golden.py's check_committed``
with ``course=False`` and ``nbstripout --verify``), one ``parameters`` cell of typed literals whose names
are ``timeline_*`` keys of *both* parameter files with the running example's values as defaults, every
``timeline_*`` key of the files declared, every declared parameter used, figures saved under unique names
through ``fleetlib.report.save_figure``, and the notebook in the report chain right after the scheduler
records notebook.

The papermill runs (marked ``notebook``) execute it with each parameter file, checking the figures it
writes and numbers it prints against values computed here (the MLPerf logs' raw markers, parsed with
``json``; the synthetic job's injected truth as the printed comparison states it), and once on the
ml-goodput-measurement sample with an extra MLPerf folder and the widgets.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from notebook_support import (
    NBSTRIPOUT,
    PARAMETER_FILES,
    ROOT,
    check_nbstripout_clean,
    check_parameters_match_files,
    check_stripped,
    declared_parameters,
    figure_names,
    load_yaml,
    parameter_cells,
    printed,
    run_notebook,
    source,
)

from fleetlib.report import (
    CASE_STUDY_NOTEBOOKS,
    COURSE_NOTEBOOKS,
    RUNG_NOTEBOOKS,
    _resolve_notebooks,
    checkout_root,
)

NOTEBOOK = ROOT / "notebooks" / "case_studies" / "02_timeline_samples.ipynb"
SCHEDULER = "notebooks/case_studies/01_scheduler_samples.ipynb"
MLPERF_LOGS = sorted((ROOT / "data" / "timelines").glob("*_result_0.txt"))


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
    check_parameters_match_files(nb, "timeline_")


def test_parameter_files_name_bundled_data(nb):
    declared = declared_parameters(nb)
    assert declared["timeline_format"] in ("canonical", "mlgoodput", "mlperf")
    assert declared["timeline_definition"] in ("committed", "retrospective")
    for scenario in map(load_yaml, PARAMETER_FILES):
        files = scenario["timeline_files"]
        assert files and all((ROOT / p).is_file() and p.startswith("data/timelines/") for p in files)
        folder = scenario["timeline_mlperf_folder"]
        assert folder == "" or (ROOT / folder).is_dir()


def test_every_declared_parameter_is_used(nb):
    (param_cell,) = parameter_cells(nb)
    later = "\n".join(source(c) for c in nb.cells if c.cell_type == "code" and c is not param_cell)
    names = {n.id for n in ast.walk(ast.parse(later)) if isinstance(n, ast.Name)}
    assert set(declared_parameters(nb)) - names == set()


def test_figures_saved_through_save_figure(nb):
    code = "\n".join(source(c) for c in nb.cells if c.cell_type == "code")
    assert "fleetlib.plots.use_theme()" in code and "if output_dir:" in code
    for plot in ("attempt_gantt", "cumulative_goodput", "step_time_distribution"):
        assert f"fleetlib.plots.{plot}(" in code
    names = figure_names(nb)
    assert len(names) >= 7 and len(names) == len(set(names))
    assert all(n.startswith("timeline_") for n in names)
    others = {n for p in [*COURSE_NOTEBOOKS, SCHEDULER] if (ROOT / p).is_file()
              for n in figure_names(nbformat.read(ROOT / p, as_version=4))}
    assert not set(names) & others
    assert code.count("save_figure(") == len(names)  # every save names output_dir


def test_notebook_follows_the_scheduler_case_study_in_the_report_chain():
    rel = NOTEBOOK.relative_to(ROOT).as_posix()
    assert CASE_STUDY_NOTEBOOKS.index(rel) == CASE_STUDY_NOTEBOOKS.index(SCHEDULER) + 1
    chain = _resolve_notebooks(None, checkout_root())
    assert chain.index(NOTEBOOK) == len(RUNG_NOTEBOOKS) + CASE_STUDY_NOTEBOOKS.index(rel)


# ---------------------------------------------------------------------------------------------------
# Papermill runs
# ---------------------------------------------------------------------------------------------------


def _displayed(result: nbformat.NotebookNode) -> str:
    return "".join(o.get("data", {}).get("text/plain", "") for c in result.cells if c.cell_type == "code"
                   for o in c.outputs if o.get("output_type") in ("execute_result", "display_data"))


def _held_s(log: Path) -> float:
    """init_start -> run_stop of an MLPerf log, from its markers, with nothing but json."""
    t = {}
    for line in log.read_text().splitlines():
        if ":::MLLOG" in line:
            rec = json.loads(line.split(":::MLLOG", 1)[1])
            if rec["key"] in ("init_start", "run_stop"):
                t[rec["key"]] = rec["time_ms"] / 1000.0
    return t["run_stop"] - t["init_start"]


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
    # the synthetic job: measured and injected R agree, and no category differs by more than rounding
    measured, injected = re.search(r"R = ([\d.]+) measured, ([\d.]+) injected", text).groups()
    assert measured == injected
    assert float(re.search(r"largest difference in any category: (\S+) s", text).group(1)) < 1e-6
    # the cumulative pieces and the rolling windows add up to the whole
    held_gap = float(re.search(r"add up to the whole: held (\S+) s", text).group(1))
    assert held_gap == pytest.approx(0.0, abs=1e-6)
    assert float(re.search(r"add up to the whole's within (\S+) s", text).group(1)) < 1e-6
    shown = _displayed(result)
    for log in MLPERF_LOGS:  # held time of each bundled MLPerf log, to the millisecond
        assert f"{_held_s(log):.3f}" in shown, log.name


@pytest.mark.notebook
def test_runs_on_mlgoodput_with_extra_mlperf_folder_and_widgets(tmp_path):
    extra = tmp_path / "more_logs"
    extra.mkdir()
    shutil.copy(MLPERF_LOGS[0], extra / "copy_of_a_bundled_log.txt")
    params = {
        "timeline_format": "mlgoodput",
        "timeline_files": ["data/timelines/maxtext-llama3-8b-demo_timeline.jsonl"],
        "timeline_definition": "retrospective",
        "timeline_synth_steps": 5000,
        "timeline_mlperf_folder": str(extra),
        "interactive": True,
    }
    result = run_notebook(NOTEBOOK, tmp_path, params)
    text = printed(result)
    assert "mlgoodput: 159 records read" in text and "retrospective definition" in text
    assert _displayed(result).count("llama2_70b_lora") >= 3  # two bundled logs and the added one
    state = result.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert state.get("state"), "no widget was created"


# ---------------------------------------------------------------------------------------------------
# fleetlib.runtime.views: the tables the notebook shows
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synth_job():
    from fleetlib.runtime.goodput import runtime_goodput
    from fleetlib.runtime.synth import synth_timeline

    steps, events, _truth = synth_timeline(3000, seed=2, step_s=0.5, failure_rate_per_h=1.0,
                                           checkpoint_every_steps=200, checkpoint_write_s=2.0)
    return steps, events, runtime_goodput(steps, events, fault_free_step_s=0.5)


def test_partition_table_adds_up_to_held(synth_job):
    from fleetlib.runtime.views import partition_table

    table = partition_table(synth_job[2])
    assert table["seconds"].sum() == pytest.approx(synth_job[2].held_s)
    assert table["share of held"].sum() == pytest.approx(1.0)


def test_cumulative_series_and_rolling_windows_add_up_to_the_whole(synth_job):
    from fleetlib.runtime.views import cumulative_series, rolling_windows, windows_gap_s

    steps, events, whole = synth_job
    series = cumulative_series(steps, events, start=whole.window_start, end=whole.window_end, points=50,
                               fault_free_step_s=0.5)
    assert len(series) == 50 and list(series.columns[:2]) == ["time", "cumulative_goodput"]
    assert series["held_s"].iloc[-1] == pytest.approx(whole.held_s, abs=1e-6)
    assert series["productive_s"].iloc[-1] == pytest.approx(whole.productive_s, abs=1e-6)
    windows = rolling_windows(steps, events, start=whole.window_start, end=whole.window_end, window_min=10.0,
                              fault_free_step_s=0.5)
    assert windows["end"].iloc[-1] >= whole.window_end
    assert windows["held_s"].sum() == pytest.approx(whole.held_s)
    assert windows_gap_s(windows, whole) < 1e-6


def test_the_runtime_door_reads_each_format_through_its_reader():
    from fleetlib import runtime
    from fleetlib.quality import DomainError

    files = [str(ROOT / "data/timelines" / f) for f in ("demo-7b-ft_steps.csv", "demo-7b-ft_events.csv")]
    tables, ledger = runtime.read(files, "canonical")
    direct, direct_ledger = runtime.READERS["canonical"].read(files)
    assert tables["steps"].equals(direct["steps"]) and ledger.read == direct_ledger.read
    detected, _ = runtime.read(files)  # the format told by the files' bytes
    assert detected["steps"].equals(direct["steps"])
    mlperf, _ = runtime.read(MLPERF_LOGS[0], "mlperf")
    assert len(mlperf["steps"]) > 0
    with pytest.raises(DomainError):
        runtime.read(files, "csv")
