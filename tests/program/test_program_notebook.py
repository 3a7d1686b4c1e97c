"""The step-trace case study ``notebooks/case_studies/03_trace_samples.ipynb`` and its HTA comparison.

Static checks read the committed ``.ipynb`` only: outputs stripped (``tests/golden.py's check_committed``
with ``course=False`` and ``nbstripout --verify``), one ``parameters`` cell of typed literals whose names
are ``traces_*`` keys of *both* parameter files with the running example's values as defaults, every
``traces_*`` key of the files declared, every declared parameter used, figures saved under unique names
through ``fleetlib.report.save_figure``, and the notebook in the report chain right after the job-timeline
notebook.

The HTA checks recompute HTA's temporal-breakdown definitions from the raw trace JSON with plain Python
(interval unions by a sorted sweep, kernel types by HTA's name rule) and compare them with HTA 0.5's
published figures (``data/traces/hta_reference.yaml``) and with
:func:`fleetlib.program.breakdown.hta_style_temporal_breakdown`.

The papermill runs (marked ``notebook``) execute it with each parameter file and once on the pipeline
pair with the widgets, checking the figures it writes and the numbers it prints against values computed
here from the raw JSON, the model configuration and the reference file.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import yaml
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

from fleetlib.program.breakdown import (
    HTA_SOURCES,
    PARTITION_PARTS,
    hta_comparison_table,
    hta_reference_differences,
    hta_style_temporal_breakdown,
    load_hta_reference,
)
from fleetlib.program.readers.kineto import read_traces
from fleetlib.quality import DomainError, InputError
from fleetlib.report import (
    CASE_STUDY_NOTEBOOKS,
    COURSE_NOTEBOOKS,
    RUNG_NOTEBOOKS,
    _resolve_notebooks,
    project_root,
)

NOTEBOOK = ROOT / "notebooks" / "case_studies" / "03_trace_samples.ipynb"
TIMELINE = "notebooks/case_studies/02_timeline_samples.ipynb"
REFERENCE = yaml.safe_load((ROOT / "data" / "traces" / "hta_reference.yaml").read_text())


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
    check_parameters_match_files(nb, "traces_")


def test_parameter_files_name_bundled_data(nb):
    for scenario in map(load_yaml, PARAMETER_FILES):
        assert all((ROOT / p).exists() and p.startswith("data/traces/") for p in scenario["traces_files"])
        assert (ROOT / scenario["traces_model"]).is_file()
        assert set(scenario["traces_hta_sets"]) <= set(REFERENCE)
        assert all(re.fullmatch(r"[a-z]+:\d+", item) for item in scenario["traces_expected_collectives"])
        assert -1 <= scenario["traces_synth_straggler_rank"] < scenario["traces_synth_ranks"]


def test_every_declared_parameter_is_used(nb):
    (param_cell,) = parameter_cells(nb)
    later = "\n".join(source(c) for c in nb.cells if c.cell_type == "code" and c is not param_cell)
    names = {n.id for n in ast.walk(ast.parse(later)) if isinstance(n, ast.Name)}
    assert set(declared_parameters(nb)) - names == set()


def test_figures_saved_through_save_figure(nb):
    code = "\n".join(source(c) for c in nb.cells if c.cell_type == "code")
    assert "fleetlib.plots.use_theme()" in code and "if output_dir:" in code
    for plot in ("step_partition_bars", "rank_step_heatmap", "straggler_bars", "collective_audit_bars",
                 "roofline_scatter", "hta_comparison_bars"):
        assert f"fleetlib.plots.{plot}(" in code
    assert "cache=False" in code and "cache=True" not in code   # a report run writes no trace cache
    names = figure_names(nb)
    assert len(names) >= 6 and len(names) == len(set(names))
    assert all(n.startswith("traces_") for n in names)
    mine = NOTEBOOK.relative_to(ROOT).as_posix()
    others = {n for p in [*COURSE_NOTEBOOKS, *RUNG_NOTEBOOKS, *CASE_STUDY_NOTEBOOKS]
              if (ROOT / p).is_file() and p != mine
              for n in figure_names(nbformat.read(ROOT / p, as_version=4))}
    assert not set(names) & others
    assert code.count("save_figure(") == len(names)  # every save names output_dir


def test_notebook_follows_the_timeline_case_study_in_the_report_chain():
    rel = NOTEBOOK.relative_to(ROOT).as_posix()
    assert CASE_STUDY_NOTEBOOKS.index(rel) == CASE_STUDY_NOTEBOOKS.index(TIMELINE) + 1
    chain = _resolve_notebooks(None, project_root())
    assert chain.index(NOTEBOOK) == len(RUNG_NOTEBOOKS) + CASE_STUDY_NOTEBOOKS.index(rel)


# ---------------------------------------------------------------------------------------------------
# HTA's definitions from the raw JSON, against HTA 0.5's figures and fleetlib
# ---------------------------------------------------------------------------------------------------


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -np.inf
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def _raw_breakdown(path: Path, include_last: bool) -> dict[str, float]:
    """HTA's temporal breakdown of one rank from its raw events, with plain Python."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    kept = steps if include_last else steps[:-1]
    gpu = [(float(e["ts"]), float(e["ts"] + e["dur"]), e["name"]) for e in events
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and e.get("args", {}).get("stream", -1) != -1]
    gpu = [g for g in gpu if any(s <= g[0] < e for s, e in kept)]
    comm = [(s, e) for s, e, n in gpu if n.startswith("nccl") or "gloo:" in n]
    comp = [(s, e) for s, e, n in gpu if not (n.startswith("nccl") or "gloo:" in n or "Memcpy" in n
                                              or "Memset" in n)]
    window = max(e for _, e, _ in gpu) - min(s for s, _, _ in gpu)
    idle = window - _union([(s, e) for s, e, _ in gpu])
    compute = _union(comp)
    overlap = compute + _union(comm) - _union(comp + comm)
    return {"idle_pct": 100 * idle / window, "compute_pct": 100 * compute / window,
            "non_compute_pct": 100 * (window - compute - idle) / window,
            "comm_comp_overlap_pct": 100 * overlap / _union(comm)}


def _files(name: str) -> list[Path]:
    out: list[Path] = []
    for f in REFERENCE[name]["files"]:
        p = ROOT / f
        out += sorted(p.glob("*.json.gz")) if p.is_dir() else [p]
    return out


#: Largest gap to HTA 0.5's printed figures: the figures are printed to 0.1 point (0.05 of rounding);
#: on the single-rank AllReduce trace a residual of up to 0.57 point stays unexplained (see the notebook).
TOLERANCE_POINTS = {"dlrm_8rank": 0.05 + 1e-9, "hta_pp_pair": 0.05 + 1e-9, "hta_nccl_allreduce": 0.6}


@pytest.mark.parametrize("name", sorted(TOLERANCE_POINTS))
def test_hta_definitions_reproduce_the_published_figures(name):
    ref = REFERENCE[name]
    include_last = ref["hta_options"]["include_last_profiler_step"]
    files = _files(name)
    raw = pd.DataFrame([_raw_breakdown(p, include_last) for p in files])
    traces = read_traces(files, cache=False, progress=False)
    ours = hta_style_temporal_breakdown(traces.kernels, traces.steps, include_last_step=include_last)
    # fleetlib implements the definitions exactly as the plain-Python sweep over the raw events does
    for col in raw.columns:
        np.testing.assert_allclose(ours[col].to_numpy(), raw[col].to_numpy(), atol=1e-6, err_msg=col)
    diff = hta_reference_differences(ours, load_hta_reference(name))
    assert diff["difference"].abs().max() <= TOLERANCE_POINTS[name]
    published = ref["temporal_breakdown_pct"]
    np.testing.assert_allclose(raw["idle_pct"], published["idle"], atol=TOLERANCE_POINTS[name])
    np.testing.assert_allclose(raw["comm_comp_overlap_pct"], ref["comm_comp_overlap_pct"],
                               atol=TOLERANCE_POINTS[name])


def test_dropping_the_last_step_is_what_makes_the_pair_match():
    traces = read_traces(_files("hta_pp_pair"), cache=False, progress=False)
    kept_all = hta_style_temporal_breakdown(traces.kernels, traces.steps, include_last_step=True)
    gap = hta_reference_differences(kept_all, load_hta_reference("hta_pp_pair"))["difference"].abs().max()
    assert gap > 1.0   # with both steps the figures differ by points, not rounding


def test_hta_style_by_hand():
    # one rank: compute [0, 10), nccl [5, 20), memcpy [30, 35), a sync record [40, 41); window 41 us
    k = pd.DataFrame({"rank": 0, "stream": [7, 13, 7, 7, -1], "step": 1,
                      "start_us": [0.0, 5.0, 30.0, 40.0, 0.0], "end_us": [10.0, 20.0, 35.0, 41.0, 50.0],
                      "name": ["gemm", "ncclDevKernel_AllReduce", "Memcpy DtoH", "Stream Wait Event", "x"],
                      "kind": ["compute", "comm", "memcpy", "sync", "other"]})
    row = hta_style_temporal_breakdown(k).iloc[0]
    # busy: [0, 20) + [30, 35) + [40, 41) = 26 -> idle 15; HTA counts the sync record as compute: 11
    assert row["window_us"] == 41.0 and row["idle_us"] == 15.0 and row["compute_us"] == 11.0
    assert row["non_compute_us"] == 15.0
    assert row["comm_comp_overlap_pct"] == pytest.approx(100 * 5 / 15)
    by_kind = hta_style_temporal_breakdown(k, classify="kind").iloc[0]
    assert by_kind["compute_us"] == 10.0 and by_kind["non_compute_us"] == 16.0
    steps = pd.DataFrame({"rank": [0, 0], "step": [1, 2], "start_us": [0.0, 50.0], "end_us": [50.0, 60.0]})
    later = k.assign(step=2, start_us=k["start_us"] + 50, end_us=k["end_us"] + 50)
    k2 = pd.concat([k, later], ignore_index=True)
    assert hta_style_temporal_breakdown(k2, steps, include_last_step=False)["kernels"].iloc[0] == 4
    with pytest.raises(DomainError):
        hta_style_temporal_breakdown(k, classify="names")
    with pytest.raises(DomainError):
        hta_style_temporal_breakdown(k[k["stream"] == -1])


def test_comparison_table_bars_add_up_and_a_missing_compute_is_derived():
    traces = read_traces(_files("dlrm_8rank"), cache=False, progress=False)
    hta = hta_style_temporal_breakdown(traces.kernels, traces.steps)
    part = pd.DataFrame({"rank": range(8), **{p: 10.0 for p in PARTITION_PARTS}, "step_wall_us": 60.0})
    table = hta_comparison_table(hta, part, reference=load_hta_reference("dlrm_8rank"))
    assert list(dict.fromkeys(table["source"])) == list(HTA_SOURCES)
    sums = table.groupby(["rank", "source"])["pct"].sum()
    np.testing.assert_allclose(sums.to_numpy(), 100.0)
    derived = table[table["derived"]]
    assert set(derived["category"]) == {"compute"} and set(derived["source"]) == {HTA_SOURCES[0]}
    with pytest.raises(DomainError, match="no HTA reference"):
        load_hta_reference("nope")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"dlrm_8rank: {files: [a\xff]}\n", "byte 0xff at offset 22 is not UTF-8"),
        (b"a: &a [1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
         + b"".join(b"%c: &%c [%s]\n" % (c, c, b", ".join([b"*" + bytes([c - 1])] * 9))
                    for c in range(ord("c"), ord("k")))
         + b"dlrm_8rank: *j\n", "alias"),
        (b"dlrm_8rank: [1, 2]\n", "must be a mapping, not list"),
        (b"- 1\n", "must be a mapping of trace sets"),
        (b"dlrm_8rank: {files: [\n", "not valid YAML"),
    ],
)
def test_a_bad_hta_reference_file_is_refused_naming_it(tmp_path, content, message):
    path = tmp_path / "reference.yaml"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as err:
        load_hta_reference("dlrm_8rank", path)
    assert err.value.file == str(path)
    with pytest.raises(InputError, match=r"missing/reference\.yaml"):
        load_hta_reference("dlrm_8rank", tmp_path / "missing" / "reference.yaml")


# ---------------------------------------------------------------------------------------------------
# Papermill runs
# ---------------------------------------------------------------------------------------------------


def _profiler_step_us(path: Path) -> float:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    (dur,) = [e["dur"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    return float(dur)


def _first_shaped_gemm(path: Path) -> tuple[str, float]:
    """The earliest CPU matrix op with shapes on a rank, and its FLOPs by hand."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = sorted((e["ts"], e["name"], e["args"]["Input Dims"]) for e in events
                 if e.get("cat") == "cpu_op" and e.get("name") in ("aten::linear", "aten::addmm", "aten::mm")
                 and "Input Dims" in e.get("args", {}))
    _ts, name, dims = ops[0]
    if name == "aten::linear":     # x [rows, in], W [out, in], bias [out]
        (rows, k), (out, _k) = dims[0], dims[1]
        return name, 2.0 * rows * k * out + (rows * out if dims[2] else 0.0)
    if name == "aten::addmm":      # bias, A [m, k], B [k, n]
        (m, k), (_k, n) = dims[1], dims[2]
        return name, 2.0 * m * k * n + m * n
    (m, k), (_k, n) = dims
    return name, 2.0 * m * k * n


@pytest.mark.notebook
@pytest.mark.parametrize("params_path", PARAMETER_FILES, ids=lambda p: p.stem)
def test_runs_with_each_parameter_file(params_path, tmp_path, nb):
    declared = declared_parameters(nb)
    scenario = load_yaml(params_path)
    params = {k: v for k, v in scenario.items() if k in declared}  # as the report passes them
    params["output_dir"] = str(tmp_path / "figures")
    result = run_notebook(NOTEBOOK, tmp_path, params)
    for name in figure_names(nb):
        for ext in ("png", "svg"):
            written = tmp_path / "figures" / f"{name}.{ext}"
            assert written.is_file() and written.stat().st_size > 1000, written
    text = printed(result)
    assert scenario["traces_files"] == ["data/traces/dlrm_8rank"]   # the checks below are the DLRM step's
    # acceptance: first all-to-all, from the kernel durations recorded in the reference file
    durs = REFERENCE["dlrm_8rank"]["first_alltoall"]["dur_us"]
    last, longest = int(np.argmin(durs)), int(np.argmax(durs))
    assert (last, longest) == (7, 1)
    wait_ms = (max(durs) - min(durs)) / 1000.0
    assert (f"first alltoall in stream 84 (8 ranks): last arriver rank {last}; longest waiter rank "
            f"{longest}, {wait_ms:.3f} ms") in text
    assert "the parts add up to the step wall time within 0 us" in text
    assert "audit of 8 rank-steps: {'ok': 16}" in text
    # synthetic set: exact recovery and the injected straggler flagged
    assert "largest difference from the injected partition: 0 us" in text
    s = scenario["traces_synth_straggler_rank"]
    assert f"injected straggler: rank {s}; flagged: [{s}]" in text
    # MFU from the model configuration and the raw ProfilerStep durations
    model = yaml.safe_load((ROOT / scenario["traces_model"]).read_text())
    steps_s = np.mean([_profiler_step_us(p) for p in _files("dlrm_8rank")]) / 1e6
    mfu = model["useful_flops_per_step"] / (model["devices"] * 125e12 * steps_s)   # V100 dense FP16 peak
    assert f"MFU = {mfu:.4f}" in text and f"P = {mfu:.4f}" in text
    # MBU: weights-only floor at the H100's 3.35 TB/s against the decode step
    floor_s = scenario["traces_decode_n_params"] * scenario["traces_decode_bytes_per_param"] \
        / scenario["traces_decode_devices"] / 3.35e12
    assert f"MBU = {floor_s / (scenario['traces_decode_step_ms'] / 1000.0):.4f}" in text
    assert "averaging the two is refused" in text
    # roofline: the first shaped GEMM of rank 0, by hand from its Input Dims
    name, flops = _first_shaped_gemm(_files("dlrm_8rank")[0])
    assert f"first counted op: {name} on rank 0" in text and f"{flops:,.0f} FLOPs" in text
    # HTA: each set within its tolerance of the published figures
    for set_name, tol in TOLERANCE_POINTS.items():
        found = re.search(rf"{set_name}: HTA-style breakdown .* largest difference ([\d.]+)", text)
        assert float(found.group(1)) <= tol + 0.005


@pytest.mark.notebook
def test_runs_on_the_pipeline_pair_with_widgets(tmp_path):
    pair = [str(p.relative_to(ROOT)) for p in _files("hta_pp_pair")]
    params = {"traces_files": pair,
              "traces_expected_collectives": ["alltoall:2", "allreduce:2", "allgather:1"],
              "traces_hta_sets": ["hta_pp_pair"], "traces_synth_ranks": 3, "traces_synth_steps": 2,
              "traces_synth_straggler_rank": -1, "interactive": True}
    result = run_notebook(NOTEBOOK, tmp_path, params)
    text = printed(result)
    assert "2 ranks read" in text and "flag missing_ranks" in text
    assert "audit of 4 rank-steps: {'ok': 12}" in text
    assert "injected straggler: rank None; flagged: []" in text
    # the pair ran on a faster device than the model configuration's V100: its placement is refused
    assert "not placed against V100 SXM dense FP32" in text
    state = result.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert state.get("state"), "no widget was created"


# ---------------------------------------------------------------------------------------------------
# fleetlib.program.views: the pipelines the notebook runs
# ---------------------------------------------------------------------------------------------------


def test_measure_step_traces_recovers_the_injected_partition(tmp_path):
    from fleetlib.program.synth import synth_step_traces
    from fleetlib.program.views import StepTraceMeasurement, measure_step_traces

    synth = synth_step_traces(tmp_path, ranks=4, steps=2, seed=1, straggler_rank=2)
    traces = read_traces(tmp_path, cache=False, progress=False)
    measured = measure_step_traces(traces.kernels, traces.steps)
    assert isinstance(measured, StepTraceMeasurement)
    matched, waits, partition = measured  # unpacks as the notebook's three tables
    assert matched.attrs["matched_by"] and set(waits["rank"]) == {0, 1, 2, 3}
    columns = ["rank", "step", *PARTITION_PARTS, "step_wall_us"]
    got = partition[columns].set_index(["rank", "step"]).sort_index()
    want = synth.partition[columns].set_index(["rank", "step"]).sort_index()
    assert (got - want).abs().to_numpy().max() == 0


def test_model_program_factor_names_its_convention():
    from fleetlib.program.views import measure_step_traces, model_program_factor

    traces = read_traces(_files("dlrm_8rank"), cache=False, progress=False)
    partition = measure_step_traces(traces.kernels, traces.steps).partition
    model = ROOT / "data" / "traces" / "models" / "dlrm_example.yaml"
    factor, config = model_program_factor(partition, model)
    assert 0 < factor.value < 1 and factor.convention == config["convention"].label
    assert factor.window.label == config["name"]
