"""Pages escape everything from data: hostile text in records, manifests and parameters stays text.

Every text field a page or the index shows from the data -- pool (partition) names, users, the fleet's
name, contract values, ledger texts, a failed notebook's error built from a ``-p`` value -- carries each
payload of :data:`PAYLOADS`: an inline script, an ``<img onerror>``, a Markdown link to ``javascript:``, TeX
``\\href{javascript:...}`` inside ``$...$`` and ``\\(...\\)``, a template ``{{...}}`` and code-span
backticks.  A page is built from a notebook whose outputs are the report's own table and sentence helpers
(fast), and a whole report is run on a bundle whose records carry the payloads (slow); both are opened in
headless Chromium after MathJax has typeset them: no payload script ran (each would set
``window.__pwned``), no link has a ``javascript:`` address, and every payload is shown as its own text.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from report_browser import CHROMEDRIVER, CHROMIUM, INSTALL

from fleetlib.report import ReportError, checkout_root, folded, frame, run_report, say
from fleetlib.report.html import install_assets, write_page
from fleetlib.report.index import render_index

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
                       reason=f"headless Chromium not installed: run `{INSTALL}` as root"),
]

#: Hostile texts; none holds ``|`` (the Slurm field separator), so each is one field of a record.
PAYLOADS = [
    "<script>window.__pwned='script'</script>",
    "<img src=x onerror=\"window.__pwned='img'\">",
    "[x](javascript:window.__pwned='md')",
    "$\\href{javascript:window.__pwned='tex'}{x}$",
    "\\(\\href{javascript:window.__pwned='paren'}{y}\\)",
    "{{7*7}} {x} `a` ``b``",
]

GOOD = Path(__file__).resolve().parents[1] / "corpus" / "fleet_bundles" / "good"


def _inspect(driver, page: Path) -> dict:
    """Open a page, let MathJax finish, and return what a reader and a script would find in it."""
    driver.get(page.as_uri())
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "if (window.MathJax && MathJax.Hub) { MathJax.Hub.Queue(() => done(true)); } else { done(false); }")
    return driver.execute_script(
        "const links = [...document.querySelectorAll('[href], [src], [action], [formaction]')]"
        "  .map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action') || '')"
        "  .filter(h => h.trim().toLowerCase().replace(/\\s/g, '').startsWith('javascript:'));"
        "return {pwned: window.__pwned === undefined ? null : String(window.__pwned), links: links,"
        "        text: document.body.innerText,"
        "        handlers: [...document.querySelectorAll('*')].filter(e => [...e.attributes].some("
        "                   a => a.name.startsWith('on'))).map(e => e.outerHTML.slice(0, 120))};")


def _assert_safe(found: dict, shown: list[str], where: str) -> None:
    assert found["pwned"] is None, f"{where}: a payload ran ({found['pwned']})"
    assert not found["links"], f"{where}: javascript: links {found['links']}"
    assert not found["handlers"], f"{where}: event handlers {found['handlers']}"
    text = " ".join(found["text"].split())
    missing = [p for p in shown if " ".join(p.split()) not in text]
    assert not missing, f"{where}: payloads not shown as text: {missing}"


def _payload_page(folder: Path) -> Path:
    """A page whose outputs are the report's own helpers showing a table and sentences of payloads."""
    table = pd.DataFrame({"pool": PAYLOADS, "user": PAYLOADS[::-1], "device_h": range(len(PAYLOADS))},
                         index=pd.Index(PAYLOADS, name="job id"))
    outputs = [new_output("display_data", data={"text/html": frame(table, caption=PAYLOADS[0])._repr_html_(),
                                                "text/plain": "table"}),
               new_output("display_data", data={"text/html": folded(table, "ledger entries").data,
                                                "text/plain": "folded"})]
    sentence = "job {job} in pool *{pool}*: $S$ = {s:.1%}"
    outputs += [new_output("display_data", data={"text/markdown": say(sentence, job=p, pool=p, s=0.5).data,
                                                 "text/plain": "sentence"}) for p in PAYLOADS]
    nb = new_notebook(cells=[new_markdown_cell("# Payload page\n\nThe fleet's $S = 1 - L$ measured."),
                             new_code_cell("shown()", outputs=outputs, execution_count=1)])
    executed = folder / "notebooks" / "payload.ipynb"
    executed.parent.mkdir(parents=True)
    nbformat.write(nb, executed)
    install_assets(folder)
    page = folder / "html" / "payload.html"
    write_page(executed, page, nav={"index_href": "../index.html"})
    return page


def test_a_page_of_tables_and_sentences_shows_payloads_as_text(tmp_path, browser):
    page = _payload_page(tmp_path)
    found = _inspect(browser, page)
    _assert_safe(found, PAYLOADS, page.name)
    assert browser.find_elements("css selector", ".MathJax, .MathJax_Display"), "the notebook's own math"


def _payload_bundle(folder: Path) -> Path:
    """The corpus's good bundle with payloads as name, contract values, pool, users, a job id, a model."""
    shutil.copytree(GOOD, folder)
    manifest = yaml.safe_load((folder / "fleet.yaml").read_text())
    manifest["name"] = PAYLOADS[3]
    manifest["contract"] = {"software_version": PAYLOADS[1], "pool": PAYLOADS[4], "storage": PAYLOADS[2]}
    (folder / "fleet.yaml").write_text(yaml.safe_dump(manifest))
    for name in ("sacct.txt", "sinfo_nodes.txt"):
        path = folder / "scheduler" / name
        text = path.read_text().replace("|gpu|", f"|{PAYLOADS[0]}|")
        path.write_text(text.replace("|ana|", f"|{PAYLOADS[5]}|").replace("|bo|", f"|{PAYLOADS[2]}|"))
    sacct = folder / "scheduler" / "sacct.txt"  # job 102 (no timeline) gets a payload id: no '.', '_' or '|'
    sacct.write_text(sacct.read_text().replace("\n102|102|", f"\n{PAYLOADS[5]}|{PAYLOADS[5]}|"))
    model = folder / "models" / "101.yaml"
    model.write_text(model.read_text().replace("name: tiny", f"name: {json.dumps(PAYLOADS[1])}"))
    traces = folder / "traces" / "101"
    traces.mkdir(parents=True)
    for rank in (0, 1):
        (traces / f"rank-{rank}.pt.trace.json").write_text(json.dumps(_payload_trace(rank, 2)))
    manifest["traces"] = {"101": ["traces/101/"]}
    (folder / "fleet.yaml").write_text(yaml.safe_dump(manifest))
    return folder / "fleet.yaml"


NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _payload_trace(rank: int, ranks: int) -> dict:
    """A Kineto trace of two steps in the shape of data/fleet/synthetic/traces: one kernel named by each
    payload, launched from the host and run back to back on one stream, then an all-reduce."""
    events, ts, corr = [], 1000, 0
    for step in (1, 2):
        start = ts
        for name in [*PAYLOADS, NCCL]:
            corr += 1
            ext = {"External id": 10000 + corr}
            host = {"ph": "X", "pid": 1, "tid": 1, "dur": 5}
            events += [{**host, "cat": "cpu_op", "name": "aten::mm", "ts": ts, "args": ext},
                       {**host, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts + 5,
                        "args": {"correlation": corr, **ext}}]
            dur, args = 1000 + 100 * corr, {"device": rank, "stream": 7, "correlation": corr, **ext}
            if name == NCCL:
                dur = 3000
                args |= {"Collective name": "allreduce", "In msg nelems": 1048576, "dtype": "Float",
                         "Process Group Name": "0", "Process Group Description": "default_pg",
                         "Seq": step - 1}
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + 20,
                           "dur": dur, "args": args})
            ts += 30 + dur
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
                       "tid": 1, "ts": start - 1, "dur": ts - start + 2, "args": {"External id": 0}})
        ts += 50
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": ranks},
            "deviceProperties": [{"id": rank, "name": "synthetic GPU"}],
            "baseTimeNanoseconds": 1700000000000000000, "traceEvents": events}


def test_the_index_shows_manifest_payloads_as_text(tmp_path, browser):
    from fleetlib.fleet import measure_fleet
    from fleetlib.fleet.views import measured_summary
    from fleetlib.scenario import load_parameters, scenario_summary

    manifest = _payload_bundle(tmp_path / "bundle")
    fleet = measure_fleet(manifest)
    summary = {"measured": measured_summary(fleet, manifest=PAYLOADS[4]),
               **scenario_summary(load_parameters(checkout_root() / "parameters" / "running_example.yaml")),
               "params_file": PAYLOADS[5], "pages": [], "figures": [],
               "skipped": [{"name": PAYLOADS[0], "reason": PAYLOADS[3]}],
               "failed": {"name": PAYLOADS[2], "error": PAYLOADS[1], "notebook": PAYLOADS[4]}}
    install_assets(tmp_path)
    index = tmp_path / "index.html"
    index.write_text(render_index(summary), encoding="utf-8")
    found = _inspect(browser, index)
    _assert_safe(found, PAYLOADS, "index")


def test_a_report_on_a_payload_bundle_and_a_failing_p_value(tmp_path, browser):
    """The whole-fleet and step-trace notebooks on the payload bundle (whose traced job's kernels are
    named by the payloads), then the same with a ``-p`` value that fails the first."""
    manifest = _payload_bundle(tmp_path / "bundle")
    params = checkout_root() / "parameters" / "running_example.yaml"
    chain = ["notebooks/00_whole_fleet.ipynb", "notebooks/03_step_traces.ipynb"]
    out = run_report(params, tmp_path / "report", notebooks=chain, fleet=manifest, progress=False)
    pages = sorted((out / "html").glob("*.html"))
    assert [p.name for p in pages] == ["00_whole_fleet.html", "03_step_traces.html"]
    for page in (out / "index.html", *pages):
        _assert_safe(_inspect(browser, page), [PAYLOADS[3]], page.name)
    page = _inspect(browser, out / "html" / "00_whole_fleet.html")
    _assert_safe(page, [PAYLOADS[0]], "00_whole_fleet.html (pool names)")
    kernels = browser.execute_script(  # the browser is still on page 00
        "return [...document.querySelectorAll('table')].filter(t => (t.caption || {}).textContent"
        "  === 'kernels and collectives, fleet-wide').map(t => t.innerText).join(' ');")
    kernels = " ".join(kernels.split())
    assert [p for p in PAYLOADS if " ".join(p.split()) not in kernels] == [], "kernel names not shown as text"
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert "fleet_kernels.png" in figures and "walk_traces_partition.png" in figures, figures
    summary = json.loads((out / "summary.json").read_text())
    assert summary["measured"]["name"] == PAYLOADS[3]  # JSON holds the text itself

    failing = tmp_path / "failing"
    with pytest.raises(ReportError):
        run_report(params, failing, notebooks=chain, fleet=manifest, progress=False,
                   overrides={"fleet_by": PAYLOADS[5] + PAYLOADS[0]})
    assert not (failing / "html" / "00_whole_fleet.html").exists()  # no page of a failed notebook
    summary = json.loads((failing / "summary.json").read_text())
    assert summary["failed"]["name"] == "00_whole_fleet"
    found = _inspect(browser, failing / "index.html")
    _assert_safe(found, ["00_whole_fleet failed"], "index of the failed report")
    _assert_safe(_inspect(browser, failing / "summary.json"), [], "summary.json")
