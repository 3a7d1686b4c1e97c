"""Report pages and index: offline assets, fixed cell ids, byte-identical re-runs, one's own fleet, overrides.

Fast tests work on hand-built notebooks and summaries; the ``notebook`` ones run papermill on small chains
(a tiny notebook twice for byte identity; the whole-fleet walk and the two record rungs on the Slurm sample
bundle for the own-fleet report).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from report_factors import printed_factors

from fleetlib.quality import InputError
from fleetlib.report import checkout_root, run_report
from fleetlib.report.html import clean_notebook, notebook_summary, notebook_title, remote_references
from fleetlib.report.index import LEDGER_PREVIEW_ROWS, render_index
from fleetlib.report.own_fleet import BUNDLED_TAG, fleet_parameters, parse_overrides

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "parameters" / "running_example.yaml"
SLURM_BUNDLE = ROOT / "data" / "fleet" / "slurm_sample" / "fleet.yaml"
#: Words that name the bundled samples; none may appear on a page of a report on another bundle.
STALE = ["Helios", "DLRM", "rank 7", "demo-7b", "Alibaba", "openb", "BLOOM", "Earth_gpu_number", "V100",
         "synthetic fleet 32 GPUs"]


# ---------------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------------


def test_remote_references_are_found_in_scripts_links_images_and_css() -> None:
    page = ('<script src="https://cdn.example/x.js"></script>'
            '<link rel="stylesheet" href="//cdn.example/a.css"><img src="http://img.example/p.png">'
            '<style>@import url("https://fonts.example/f.css");</style>'
            '<script src="../assets/mathjax/MathJax.js"></script><a href="https://example.org/">a link</a>'
            '<img src="data:image/png;base64,AAAA">')
    assert remote_references(page) == ["https://cdn.example/x.js", "//cdn.example/a.css",
                                       "http://img.example/p.png", "https://fonts.example/f.css"]


def test_title_and_summary_come_from_the_notebook() -> None:
    nb = new_notebook(cells=[new_code_cell("x = 1"),
                             new_markdown_cell("# 07 · A **bold** title `here`\n\nFirst sentence with $S$ in "
                                               "it. Second sentence.\n\nMore.")])
    assert notebook_title(nb, "fallback") == "07 · A bold title here"
    assert notebook_summary(nb) == "First sentence with $S$ in it."
    assert notebook_title(new_notebook(cells=[new_code_cell("x = 1")]), "stem") == "stem"


def test_clean_notebook_fixes_ids_and_drops_timestamps() -> None:
    injected = new_code_cell("x = 2", metadata={"tags": ["injected-parameters"],
                                                "papermill": {"start_time": "2026-01-01T00:00:00"}})
    injected["id"] = "a3f9c0de"  # papermill's random id
    ran = new_code_cell("print(x)", metadata={"execution": {"iopub.execute_input": "2026-01-01T00:00:01Z"}})
    ran["id"] = "c1"
    twin = new_markdown_cell("# again")
    nb = new_notebook(cells=[injected, ran, twin], metadata={"papermill": {"duration": 1.5}, "widgets": {}})
    nb.cells[2]["id"] = "c1"  # set after new_notebook, which would correct it
    styled = {"text/html": '<style>#T_ab12c_row0_col0 {}</style><table id="T_ab12c">'
                           '<td id="T_ab12c_row0_col0">'}
    nb.cells[1]["outputs"] = [nbformat.v4.new_output("execute_result", data=styled),
                              nbformat.v4.new_output("stream", name="stdout", text="one\n"),
                              nbformat.v4.new_output("stream", name="stdout", text="two\n"),
                              nbformat.v4.new_output("stream", name="stderr", text="warn\n")]
    clean_notebook(nb)
    assert [(o.get("name"), o.get("text")) for o in nb.cells[1].outputs[1:]] == [("stdout", "one\ntwo\n"),
                                                                                ("stderr", "warn\n")]
    assert nb.cells[1].outputs[0].data["text/html"] == (
        '<style>#T_fl1_0_0_row0_col0 {}</style><table id="T_fl1_0_0"><td id="T_fl1_0_0_row0_col0">')
    assert [c["id"] for c in nb.cells] == ["injected-parameters", "c1", "cell-2"]
    assert "papermill" not in nb.metadata and "widgets" not in nb.metadata
    assert all("papermill" not in c.metadata and "execution" not in c.metadata for c in nb.cells)


def test_overrides_are_typed_as_yaml() -> None:
    got = parse_overrides(["devices=256", "price_per_device_hour=2.5", "scheduling_tz=UTC",
                           "timeline_files=[a.csv, b.csv]", "interactive=true", "start=2024-03-04",
                           "devices=512"])
    assert got == {"devices": 512, "price_per_device_hour": 2.5, "scheduling_tz": "UTC",
                   "timeline_files": ["a.csv", "b.csv"], "interactive": True, "start": "2024-03-04"}
    for bad in ["novalue", "=3", "2x=1", "key=", "key={a: 1}", "key=[unclosed"]:
        with pytest.raises(InputError, match="-p"):
            parse_overrides([bad])
    with pytest.raises(InputError, match=r"^-p key: value 'a: b: c' is not valid YAML \(mapping values are "
                       r"not allowed here\)$"):
        parse_overrides(["key=a: b: c"])
    # nested past the input limit: refused in one line (it was a RecursionError)
    with pytest.raises(InputError, match=r"^-p deep: value '\[{60}\.\.\.' YAML nested more than 64 deep"):
        parse_overrides(["deep=" + "[" * 5000 + "]" * 5000])


def test_fleet_parameters_point_the_walk_at_the_bundle() -> None:
    assert fleet_parameters(SLURM_BUNDLE, ROOT) == {"fleet_manifest": "data/fleet/slurm_sample/fleet.yaml",
                                                    "fleet_has_traces": False, "fleet_has_serving": False}
    synthetic = fleet_parameters(ROOT / "data" / "fleet" / "synthetic" / "fleet.yaml", ROOT)
    assert synthetic == {"fleet_manifest": "data/fleet/synthetic/fleet.yaml", "fleet_has_traces": True,
                         "fleet_has_serving": True}


def _summary(measured: bool) -> dict:
    from fleetlib.report import _measured_block
    from fleetlib.scenario import load_parameters, scenario_summary

    params = load_parameters(PARAMS)
    params["fleet_manifest"] = "data/fleet/slurm_sample/fleet.yaml"
    summary = scenario_summary(params)
    summary.update(measured=_measured_block(params) if measured else None, params_file="parameters/x.yaml",
                   pages=[{"html": "html/00_whole_fleet.html", "title": "00 · <Whole> fleet",
                           "summary": "One."},
                          {"html": "html/01_napkin_maths.html", "title": "01 · Napkin", "summary": "",
                           "part": "course"}],
                   skipped=[{"name": "03_step_traces", "reason": "no traces"}])
    return summary


def test_index_puts_the_measured_headline_first_with_its_records() -> None:
    summary = _summary(measured=True)
    page = render_index(summary, figures=["figures/fleet_waterfall.png"])
    measured = summary["measured"]
    headline = page[page.index('id="headline"'):]
    assert headline.index(f"MPG {100 * measured['mpg']:.1f} %") < headline.index('id="levers"')
    for symbol, factor in (("S", "scheduling"), ("R", "runtime"), ("P", "program")):
        assert f"{symbol} {100 * measured['factors'][factor]['value']:.1f} %" in headline
        assert measured["factors"][factor]["record"] in page
    assert page.index('id="headline"') < page.index('id="levers"') < page.index('id="pages"') < page.index(
        'id="ledger"')
    assert "00 · &lt;Whole&gt; fleet" in page and "<Whole>" not in page  # escaped
    assert page.index("html/00_whole_fleet.html") < page.index('id="course"') < page.index(
        "html/01_napkin_maths.html")
    assert "03_step_traces: not run — no traces" in page
    assert 'src="figures/fleet_waterfall.png"' in page
    assert "not stated" in page  # no factor carries a contract yet
    ledger = measured["ledger"]
    assert f"Rows read {ledger['read']:,} = kept {ledger['kept']:,}" in page
    assert ledger["read"] == ledger["kept"] + ledger["repaired"] + ledger["rejected"]
    assert sum(i["rejected"] for i in ledger["inputs"]) == ledger["rejected"]
    entries = ledger["entries"]
    shown = min(len(entries), LEDGER_PREVIEW_ROWS)
    assert entries and page.count("<details><summary>") >= 1
    assert f"{len(entries):,} ledger entries (first {shown} shown" in page
    assert remote_references(page) == []


def test_index_shows_availability_beside_mpg() -> None:
    summary = _summary(measured=True)
    page = render_index(summary)
    row = page[page.index(">availability<"):]
    row = row[:row.index("</tr>")]
    assert f"{100 * summary['measured']['availability']:.1f} %" in row and "installed capacity-time" in row
    assert page.index(">MPG<") < page.index(">availability<") < page.index('id="levers"')


def test_index_renders_a_contract_when_the_factor_states_one() -> None:
    summary = _summary(measured=True)
    summary["measured"]["factors"]["runtime"]["contract"] = {
        "system_state": {"software_version": "v1.2", "clocks": "not stated"},
        "workload": {"model_revision": "not stated"},
        "sources": {"software_version": "manifest"},
    }
    page = render_index(summary)
    assert "<b>system state</b>: software_version = v1.2 (manifest); <i>not stated</i>: clocks" in page
    assert "<b>workload</b>: <i>not stated</i>: model_revision" in page
    assert "<b>sources</b>" not in page  # the sources show beside the fields they name


def test_index_without_a_bundle_labels_the_factors_stated_by_the_scenario_file() -> None:
    page = render_index(_summary(measured=False))
    assert "stated by the scenario file parameters/x.yaml" in page
    assert "MPG 28.1 %" in page  # Table 8: 0.65 x 0.90 x 0.48


# ---------------------------------------------------------------------------------------------------
# Papermill runs
# ---------------------------------------------------------------------------------------------------


def _tiny_notebook(path: Path) -> Path:
    nb = new_notebook(cells=[
        new_markdown_cell("# A tiny page\n\nIt shows $S \\times R$ and a table."),
        new_code_cell("devices: int = 1\noutput_dir: str = ''", metadata={"tags": ["parameters"]}),
        new_code_cell("import pandas as pd\nimport matplotlib.pyplot as plt\n"
                      "from fleetlib.report import save_figure\n"
                      "fig, ax = plt.subplots(figsize=(3, 2))\nax.plot([0, 1], [0, devices])\n"
                      "save_figure(fig, 'tiny', output_dir)\nplt.show()\n"
                      "pd.DataFrame({'device-hours': [1234.5, 6.0]}).style.format('{:,.1f}')"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.notebook
def test_two_runs_give_byte_identical_pages(tmp_path: Path) -> None:
    notebook = _tiny_notebook(tmp_path / "tiny.ipynb")
    names = ("index.html", "html/tiny.html", "notebooks/tiny.ipynb", "figures/tiny.png", "figures/tiny.svg")
    first = run_report(PARAMS, tmp_path / "report", notebooks=[notebook], progress=False)
    written = {name: (first / name).read_bytes() for name in names}
    second = run_report(PARAMS, tmp_path / "report", notebooks=[notebook], progress=False)
    for name in names:
        assert (second / name).read_bytes() == written[name], name
    page = (first / "html" / "tiny.html").read_text()
    assert "<title>A tiny page</title>" in page
    assert 'id="cell-id=injected-parameters"' in page
    assert remote_references(page) == []
    assert (first / "assets" / "mathjax" / "MathJax.js").is_file()
    assert 'src="../assets/mathjax/MathJax.js' in page
    assert "1,234.5" in page


@pytest.mark.notebook
def test_a_report_on_the_slurm_sample_talks_only_about_that_bundle(tmp_path: Path) -> None:
    chain = ["notebooks/00_whole_fleet.ipynb", "notebooks/01_scheduler_records.ipynb",
             "notebooks/02_job_timeline.ipynb"]
    out = run_report(PARAMS, tmp_path / "slurm", notebooks=chain, progress=False, fleet=SLURM_BUNDLE,
                     overrides={"timeline_window_min": 30.0})
    summary = json.loads((out / "summary.json").read_text())
    assert summary["measured"]["name"] == "slurm sample, one day (hand-built)"
    assert summary["overrides"] == {"timeline_window_min": 30.0}
    for nb_path in (out / "notebooks").glob("*.ipynb"):
        nb = nbformat.read(nb_path, as_version=4)
        assert not [c for c in nb.cells if BUNDLED_TAG in c.metadata.get("tags", [])], nb_path.name
        injected = next(c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", []))
        assert "slurm_sample" in injected.source
    for page in [out / "index.html", *sorted((out / "html").glob("*.html"))]:
        text = re.sub(r"<(script|style)\b.*?</\1>", "", page.read_text(), flags=re.S)
        stale = [w for w in STALE if w.lower() in text.lower()]
        assert not stale, f"{page.name} still mentions {stale}"
        assert ("41001" if page.stem == "02_job_timeline" else "slurm") in text.lower(), page.name
    scheduler_page = (out / "html" / "01_scheduler_records.html").read_text()
    s_value = summary["measured"]["factors"]["scheduling"]["value"]
    assert ("S", f"{100 * s_value:.1f}") in printed_factors(scheduler_page)  # the page opens on the fleet's S


def test_unknown_override_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="-p no_such_parameter"):
        run_report(PARAMS, tmp_path / "r", notebooks=["notebooks/course/04_trades_and_iso_goodput.ipynb"],
                   progress=False, overrides={"no_such_parameter": 1})
    assert not (tmp_path / "r").exists()


def test_unknown_override_gets_the_closest_declared_parameter(tmp_path: Path) -> None:
    # a typo of a parameter the chain declares (02_job_timeline: timeline_window_min) is named back
    with pytest.raises(InputError, match=r"-p timline_window_min: .*; did you mean timeline_window_min\?$"):
        run_report(PARAMS, tmp_path / "r", notebooks=["notebooks/02_job_timeline.ipynb"], progress=False,
                   overrides={"timline_window_min": 30.0})
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"devices": "abc"}, r"^-p devices: value 'abc' is text; the parameter is a whole number "
                             r"\(the scenario file has devices: \d+\)$"),
        ({"devices": 12.5}, r"^-p devices: value 12\.5 is a number; the parameter is a whole number"),
        ({"interactive": 1}, r"^-p interactive: value 1 is a whole number; the parameter is true or false "
                             r"\(01_napkin_maths declares interactive = False\)$"),
        ({"sweep_devices": ["a"]}, r"^-p sweep_devices: value \['a'\] is a list of text; the parameter is a "
                                   r"list of numbers"),
    ],
)
def test_an_override_of_another_kind_is_refused_before_anything_runs(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    chain = ["notebooks/course/01_napkin_maths.ipynb", "notebooks/course/06_runtime_loss_vs_job_size.ipynb"]
    with pytest.raises(InputError, match=message):
        run_report(PARAMS, tmp_path / "r", notebooks=chain, progress=False, overrides=overrides)
    assert not (tmp_path / "r").exists()


def test_overrides_of_the_parameter_kind_are_taken() -> None:
    from fleetlib.report import _fits

    assert _fits(3, 2.5) and _fits(2.5, 2.5) and not _fits(2.5, 3) and not _fits(True, 3)
    assert not _fits(1, False) and _fits(False, True) and _fits("x", None) and _fits([1, 2.5], [1])
    assert not _fits(["a"], [1]) and not _fits([1], ["a"]) and _fits([], ["a"]) and not _fits("a", ["a"])


def test_project_root_is_the_checkout() -> None:
    assert checkout_root() == ROOT


def test_frame_formats_device_hours_without_scientific_notation() -> None:
    import pandas as pd

    from fleetlib.report import folded, frame

    table = pd.DataFrame({"device-h": [52_829_420.0, 3.25], "share": [0.1234, 0.8766], "jobs": [1200, 3],
                          "ratio": [0.123456, 1.0]})
    markup = frame(table, percent=["share"]).to_html()
    assert "52,829,420.0" in markup and "e+07" not in markup
    assert "12.3%" in markup and "1,200" in markup and "0.1235" in markup
    shown = frame(table, head=1, caption="jobs").to_html()
    assert "jobs: first 1 of 2 rows" in shown and "3.2" not in shown
    series = frame(pd.Series([1.5], name="share of time")).to_html()
    assert ">share of time</th>" in series and "dtype" not in series  # a named column, not a Series dump
    box = folded(pd.DataFrame({"row": range(25)}), "ledger entries", first=10).data
    assert box.startswith('<details class="tex2jax_ignore"><summary>25 ledger entries (first 10 shown)'
                          '</summary>')
    assert box.count("<tr>") == 11  # header + 10 rows
    assert folded(pd.DataFrame(), "ledger entries").data == "<p>no ledger entries</p>"


def test_cli_report_refuses_a_bad_override_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from fleetlib.cli import main

    assert main(["report", "--out", str(tmp_path / "r"), "--fleet", str(SLURM_BUNDLE), "-p", "devices"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "-p 'devices'" in err and "key=value" in err
    assert main(["report", "--out", str(tmp_path / "r"), "--fleet", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "missing.yaml" in err


def test_a_report_on_a_bundle_in_object_storage_is_refused_in_one_line(tmp_path: Path) -> None:
    from fleetlib.quality import InputError
    from fleetlib.report import run_report

    with pytest.raises(InputError, match=r"^--fleet s3://bucket/x/fleet.yaml: a report reads its fleet"):
        run_report(ROOT / "parameters" / "running_example.yaml", tmp_path / "out",
                   fleet="s3://bucket/x/fleet.yaml")
    assert not (tmp_path / "out").exists()  # refused before anything is written
