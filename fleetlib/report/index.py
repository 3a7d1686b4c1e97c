"""The report's ``index.html``: the measured headline first, then levers and cost, the pages, the ledgers.

Beside the headline stand the fleet's ledger in brief (rows read = kept + repaired + rejected, rows kept but
unused by kind, the first rejections with file and row: :func:`fleetlib.commands_common.ledger_lines`, the
text ``fleetlib fleet`` prints) and the ``-p`` overrides the run applied.  The pages are listed in three
parts: the walk (the report's fleet), the case studies (the bundled public samples) and the course.

Everything on the page comes from ``summary.json`` (the measured block, the stated scenario, the pages the
run wrote, with the titles and one-line summaries taken from the executed notebooks) and the figures folder;
every text is escaped with :func:`html.escape`.  No number is written by hand here: each is a value of the
summary, formatted.  MathJax typesets only the pages' titles and summaries (the notebooks' own Markdown):
the body is ``tex2jax_ignore``, so TeX in a manifest's name or a contract value stays text.  A notebook
that failed has no page: the index names it, its error and its partial notebook instead.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fleetlib.commands_common import ledger_lines
from fleetlib.report.html import MATHJAX_CONFIG, REPORT_CSS, mathjax_src

__all__ = ["LEDGER_PREVIEW_ROWS", "render_index", "write_index"]

#: Ledger entries shown under each input's summary before the rest are folded away.
LEDGER_PREVIEW_ROWS = 10

_FACTORS = ("scheduling", "runtime", "program")
_SYMBOL = {"scheduling": "S", "runtime": "R", "program": "P"}
_S_PER_H = 3600.0

_INDEX_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
  padding: 0.6rem 1.2rem 2rem; line-height: 1.4; color: #1b1b1b; }
h1 { font-size: 1.45rem; margin: 0.3rem 0 0.2rem; }
h2 { font-size: 1.15rem; margin: 1.4rem 0 0.4rem; border-bottom: 1px solid #ddd; }
.headline { font-size: 1.35rem; margin: 0.3rem 0; }
.label { font-size: 0.78rem; padding: 0 0.35rem; border-radius: 0.25rem; background: #e8eef7; }
.label.stated { background: #f6ead8; }
table.fleetlib-table { border-collapse: collapse; font-size: 0.86rem; margin: 0.3rem 0; }
table.fleetlib-table th, table.fleetlib-table td { border: 1px solid #ddd; padding: 0.15rem 0.45rem;
  text-align: left; vertical-align: top; }
table.fleetlib-table td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.top { display: flex; gap: 1rem; align-items: flex-start; flex-wrap: wrap; }
.top > div { flex: 1 1 520px; min-width: 0; }
figure.waterfall { margin: 0.8rem 0; }
figure.waterfall img { display: block; max-width: 100%; height: auto; }
.note { color: #555; font-size: 0.85rem; }
.warning { background: #fff4e0; border-left: 3px solid #d08a00; padding: 0.3rem 0.5rem; }
ol.pages li { margin: 0.25rem 0; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100.0 * float(value):.1f} %"


def _hours(device_s: float | None) -> str:
    return "n/a" if device_s is None else f"{float(device_s) / _S_PER_H:,.1f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[tuple[str, bool]]], *, table_id: str = "") -> str:
    """Return an HTML table; each cell is (escaped-or-built html, numeric?)."""
    ident = f' id="{_e(table_id)}"' if table_id else ""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if num else f"<td>{c}</td>" for c, num in row)
                   + "</tr>" for row in rows)
    return f'<table class="fleetlib-table"{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _label(text: str) -> str:
    kind = "stated" if text.startswith("stated") else "measured"
    return f'<span class="label {kind}">{_e(text)}</span>'


#: The contract's own bookkeeping keys, shown through the fields they describe rather than as categories.
_CONTRACT_META = ("sources", "conflicts")
_NOT_STATED = "not stated"


def _contract(factor: Mapping[str, Any]) -> str:
    """Return the factor's contract: each category's stated fields with their source, then the rest."""
    contract = factor.get("contract")
    if not contract:
        return _NOT_STATED
    if not isinstance(contract, Mapping):
        return _e(contract)
    sources = contract.get("sources") or {}
    parts = []
    for category, fields in contract.items():
        if category in _CONTRACT_META:
            continue
        if not isinstance(fields, Mapping):
            parts.append(f"<b>{_e(category)}</b>: {_e(fields)}")
            continue
        stated = [(k, v) for k, v in fields.items() if v != _NOT_STATED]
        unstated = [k for k, v in fields.items() if v == _NOT_STATED]
        items = [f"{_e(k)} = {_e(v)}" + (f" ({_e(sources[k])})" if k in sources else "") for k, v in stated]
        if unstated:
            items.append(f"<i>not stated</i>: {_e(', '.join(unstated))}")
        parts.append(f"<b>{_e(category.replace('_', ' '))}</b>: " + "; ".join(items))
    conflicts = contract.get("conflicts")
    if conflicts:
        parts.append(f"<b>conflicts</b>: {_e(conflicts)}")
    return "<br>".join(parts)


def _files(files: Sequence[str]) -> str:
    """Return a record's files: all of them up to three, else a count with the list folded."""
    if len(files) <= 3:
        return _e(", ".join(files) or "none")
    listed = "".join(f"<li>{_e(f)}</li>" for f in files)
    return f"<details><summary>{len(files):,} files</summary><ul>{listed}</ul></details>"


def _headline_measured(measured: Mapping[str, Any]) -> str:
    factors = measured["factors"]
    product = " × ".join(f"{_SYMBOL[f]} {_pct(factors[f]['value'])}" for f in _FACTORS)
    holds = all(c.get("holds") for c in measured.get("chain", {}).values())
    rows = [[(f"<b>{_SYMBOL[name]}</b> {_e(name)}", False), (_pct(factors[name]["value"]), True),
             (_label(factors[name].get("label", "measured")), False),
             (_e(factors[name].get("record", "")), False), (_pct(factors[name].get("coverage")), True)]
            for name in _FACTORS]
    rows.append([("<b>MPG</b>", False), (_pct(measured["mpg"]), True), (_label("measured"), False),
                 ("S × R × P, chain checked" if holds else "S × R × P (chain NOT verified)", False),
                 ("", True)])
    if "availability" in measured:
        rows.append([("availability", False), (_pct(measured["availability"]), True),
                     (_label("measured"), False),
                     ("in-service / installed capacity-time (outside S)", False), ("", True)])
    table = _table(["factor", "value", "label", "measured from", "coverage"], rows, table_id="factors")
    return (f'<p class="headline" id="headline"><b>MPG {_pct(measured["mpg"])}</b> = {_e(product)} '
            f'{_label("measured")}</p>'
            f'<p class="note">{_e(measured.get("name", ""))}, window {_e(measured["window"]["label"])}; '
            f'fleet bundle {_e(measured.get("manifest", ""))}.</p>{table}'
            + _collection_gaps(measured))


def _collection_gaps(measured: Mapping[str, Any]) -> str:
    """Return the collection gaps found in the scheduler records, each with what leaves it out."""
    gaps = measured.get("collection_gaps") or []
    if not gaps:
        return ""
    capacity = measured["factors"]["scheduling"]["denominator_device_s"]
    total = sum(float(g["device_s"]) for g in gaps)
    rows = [[(_e(g["start"]), False), (_e(g["end"]), False), (f"{float(g['seconds']) / 60.0:,.0f}", True),
             (f"{float(g['device_s']) / 3600.0:,.1f}", True),
             (f"<code>--exclude {_e(g['start'])} {_e(g['end'])}</code>", False)] for g in gaps]
    return (f'<p class="warning" id="collection-gaps"><b>Collection gaps:</b> {len(gaps):,} stretch(es) of '
            "the window hold no record of any job in any pool while capacity persists; S counts their "
            f"{total / 3600.0:,.1f} device-h ({_pct(total / capacity if capacity else None)} of in-service "
            "capacity) as idle with an empty queue. If the collector stopped there, leave them out with the "
            "manifest's <code>exclude:</code> or the commands' <code>--exclude</code>:</p>"
            + _table(["start", "end", "minutes", "device-h", "leave out with"], rows,
                     table_id="collection-gaps-table"))


def _conventions(measured: Mapping[str, Any]) -> str:
    factors = measured["factors"]
    rows = [[(f"{_SYMBOL[name]} {_e(name)}", False), (_e(f.get("window", {}).get("label", "")), False),
             (_files(f.get("files", [])), False), (_e(f.get("convention", "")), False), (_contract(f), False)]
            for name, f in ((n, factors[n]) for n in _FACTORS)]
    return ("<h2>Windows, records, conventions and contracts</h2>"
            + _table(["factor", "window", "records", "convention", "contract"], rows, table_id="conventions"))


def _headline_stated(summary: Mapping[str, Any]) -> str:
    factors = summary["factors"]
    params_file = summary.get("params_file", "the scenario file")
    product = " × ".join(f"{_SYMBOL[f]} {_pct(factors[f]['value'])}" for f in _FACTORS)
    return (f'<p class="headline" id="headline"><b>MPG {_pct(summary["mpg"])}</b> = {_e(product)} '
            f'{_label("stated")}</p><p class="note">No fleet bundle was measured: these factors are stated '
            f'by the scenario file {_e(params_file)} ({_e(summary["scenario"]["title"])}).</p>')


def _stated_block(summary: Mapping[str, Any]) -> str:
    factors = summary["factors"]
    params_file = summary.get("params_file", "")
    rows = [[(f"{_SYMBOL[f]} {_e(f)}", False), (_pct(factors[f]["value"]), True),
             (_label(f"stated by {params_file}"), False)] for f in _FACTORS]
    rows.append([("MPG", False), (_pct(summary["mpg"]), True), (_label(f"stated by {params_file}"), False)])
    return (f"<h2>The course's scenario (stated)</h2><p>{_e(summary['scenario']['title'])} — "
            f"{_e(summary['window']['label'])}. The course pages work from these stated factors.</p>"
            + _table(["factor", "value", "label"], rows, table_id="stated"))


def _levers(measured: Mapping[str, Any] | None, summary: Mapping[str, Any]) -> str:
    parts = ["<h2>Levers and cost</h2>"]
    if measured and measured.get("levers"):
        rows = [[(_e(r["rank"]), True), (_e(r["factor"]), False), (_pct(r["current"]), True),
                 (_pct(r["ceiling"]), True), (_e(r.get("ceiling_source", "")), False),
                 (_pct(r["mpg_at_ceiling"]), True), (f"{100 * r['relative_gain']:+.1f} %", True)]
                for r in measured["levers"]]
        parts.append("<p>Each factor raised to a ceiling the records show, ranked by the relative gain in "
                     f"MPG {_label('measured')}:</p>")
        parts.append(_table(["rank", "factor", "now", "ceiling", "ceiling from", "MPG at ceiling",
                             "relative gain"], rows, table_id="levers"))
        cost = measured.get("cost") or {}
        if cost.get("cost_per_useful_device_hour") is not None:
            useful = cost["cost_per_useful_device_hour"]
            parts.append(f'<p id="cost">Cost of a useful device-hour: <b>{useful:,.2f}'
                         f"</b> at {cost['price_per_device_hour']:,.2f} per in-service device-hour "
                         f"{_label('measured')} (price from the manifest).</p>")
        else:
            parts.append('<p id="cost">Cost: the manifest states no price per device-hour.</p>')
    rows = [[(_e(r["rank"]), True), (_e(r["factor"]), False), (_pct(r["current"]), True),
             (_pct(r["ceiling"]), True), (_pct(r["mpg_at_ceiling"]), True),
             (f"{100 * r['relative_gain']:+.1f} %", True)] for r in summary.get("lever_ranking", [])]
    if rows:
        stated = _label("stated by " + str(summary.get("params_file")))
        parts.append(f"<p>The course scenario's levers {stated}"
                     f"; cost of a useful accelerator-hour {summary['cost_per_useful_hour']:,.2f} at "
                     f"{summary['price_per_device_hour']:,.2f} per in-service hour:</p>")
        parts.append(_table(["rank", "factor", "now", "ceiling", "MPG at ceiling", "relative gain"], rows,
                            table_id="stated-levers"))
    return "".join(parts)


def _page_items(pages: Iterable[Mapping[str, Any]]) -> str:
    return "".join(
        f'<li><a href="{_e(p["html"])}"><span class="tex2jax_process">{_e(p["title"])}</span></a>'
        + (f' — <span class="summary tex2jax_process">{_e(p["summary"])}</span>' if p.get("summary") else "")
        + "</li>" for p in pages)


def _failed(failed: Mapping[str, Any] | None) -> str:
    """Return the notice naming the notebook that failed (it has no page), or ''."""
    if not failed:
        return ""
    partial = (f' The executed notebook up to the failure is <code>{_e(failed["notebook"])}</code>.'
               if failed.get("notebook") else "")
    return (f'<p class="warning" id="failed"><b>{_e(failed["name"])} failed</b>; its page was not written '
            f"and the notebooks after it did not run: {_e(failed['error'])}.{partial}</p>")


def _ledger_brief(measured: Mapping[str, Any] | None) -> str:
    """Return the fleet ledger's counts and first rejections (as ``fleetlib fleet`` prints them), or ''."""
    if not measured or not measured.get("ledger"):
        return ""
    first, *rest = ledger_lines(measured["ledger"])
    rest = [line.strip().replace("(all of them in --json)", "(all of them under Ledgers below)")
            for line in rest]
    listed = "".join(f"<li>{_e(line)}</li>" for line in rest)
    return (f'<div class="note" id="ledger-brief"><p>{_e(first[0].upper() + first[1:])}.</p>'
            + (f"<ul>{listed}</ul>" if listed else "") + "</div>")


def _overrides(overrides: Mapping[str, Any] | None) -> str:
    """Return the ``-p`` overrides the run applied (key = value), or a line saying there were none."""
    if not overrides:
        return ('<p class="note" id="overrides">No <code>-p</code> overrides: every parameter as the '
                "scenario file states it.</p>")
    items = "".join(f"<li><code>{_e(k)} = {_e(repr(v))}</code></li>" for k, v in overrides.items())
    return (f'<div class="note" id="overrides"><p>Parameters overridden with <code>-p</code>:</p>'
            f"<ul>{items}</ul></div>")


def _pages(pages: Sequence[Mapping[str, Any]], skipped: Sequence[Mapping[str, str]], params_file: str,
           failed: Mapping[str, Any] | None = None) -> str:
    walk = [p for p in pages if p.get("part", "walk") == "walk"]
    cases = [p for p in pages if p.get("part") == "case"]
    course = [p for p in pages if p.get("part") == "course"]
    left_out = "".join(f"<li>{_e(s['name'])}: not run — {_e(s['reason'])}</li>" for s in skipped)
    note = f'<ul class="note">{left_out}</ul>' if left_out else ""
    parts = ['<h2>The walk: measured from the records</h2>'
             f'<ol class="pages" id="pages">{_page_items(walk)}</ol>{note}{_failed(failed)}']
    if cases:
        parts.append("<h2>Case studies: the bundled public samples</h2><p>Real records of other fleets, read "
                     "by the same rungs: each page names the data it reads and what that data can and cannot "
                     "measure. Their numbers are those fleets', not the walk's.</p>"
                     f'<ol class="pages" id="case-studies">{_page_items(cases)}</ol>')
    if course:
        parts.append(f'<h2>The course: the stated scenario {_label("stated by " + params_file)}</h2>'
                     f'<ol class="pages" id="course">{_page_items(course)}</ol>')
    return "".join(parts)


def _ledger(measured: Mapping[str, Any] | None) -> str:
    if not measured or not measured.get("ledger"):
        return ""
    ledger = measured["ledger"]
    totals = (f"<p>Rows read {ledger['read']:,} = kept {ledger['kept']:,} + repaired "
              f"{ledger['repaired']:,} + rejected {ledger['rejected']:,}; {ledger['flags']:,} flags.</p>")
    rows = [[(_e(i["record"]), False), (_e(i["file"]), False), (f"{i['repaired']:,}", True),
             (f"{i['rejected']:,}", True)] for i in ledger["inputs"]]
    parts = ["<h2>Ledgers</h2>", totals,
             _table(["record", "input", "rows repaired", "rows rejected"], rows, table_id="ledger")]
    entries = ledger.get("entries", [])
    if entries:
        preview = entries[:LEDGER_PREVIEW_ROWS]
        rows = [[(_e(x["action"]), False), (_e(x["file"]), False), (_e(x.get("row", "")), True),
                 (_e(x.get("field") or ""), False), (_e(x["reason"]), False)] for x in preview]
        more = len(entries) - len(preview)
        parts.append(f"<details><summary>{len(entries):,} ledger entries (first {len(preview)} shown"
                     f"{f'; {more:,} more in the pages' if more else ''})</summary>"
                     + _table(["action", "file", "row", "field", "reason"], rows) + "</details>")
    return "".join(parts)


def render_index(summary: Mapping[str, Any], *, figures: Iterable[str] = ()) -> str:
    """Return the report index page for a report's summary.

    Parameters
    ----------
    summary
        The content of ``summary.json`` (see :func:`fleetlib.report.run_report`), with ``pages``: one
        mapping per page written (``html``, ``title``, ``summary``), in the walk's order.
    figures
        Figure files of the report, relative to its folder; ``figures/fleet_waterfall.png`` is shown under
        the headline, at the page's full width, when present.

    Returns
    -------
    str
        The page.
    """
    measured = summary.get("measured")
    title = measured["name"] if measured else summary["scenario"]["title"]
    headline = _headline_measured(measured) if measured else _headline_stated(summary)
    figures = list(figures)
    waterfall = next((f for f in figures if f.endswith("fleet_waterfall.png")), None)
    # Below the headline at the page's full width: the figure keeps at least 80 % of its natural width on
    # a 1400 px page (beside the headline it would be squeezed to ~40 %, its labels to ~6 px).
    figure = (f'<figure class="waterfall"><img id="waterfall" src="{_e(waterfall)}" alt="fleet waterfall: '
              f'capacity to useful work, in device-hours"></figure>' if waterfall else "")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
        f"<title>fleetlib report: {_e(title)}</title>\n"
        f'<script type="text/x-mathjax-config">{MATHJAX_CONFIG}</script>\n'
        f'<script src="{_e(mathjax_src(""))}"></script>\n'
        f"<style>{REPORT_CSS}{_INDEX_CSS}</style>\n</head>\n<body class=\"tex2jax_ignore\">\n"
        f"<h1>fleetlib report: {_e(title)}</h1>\n"
        f'<div class="top"><div>{headline}{_ledger_brief(measured)}'
        f'{_overrides(summary.get("overrides"))}</div></div>\n{figure}\n'
        + (_conventions(measured) if measured else "") + "\n"
        + _levers(measured, summary) + "\n" + _pages(summary.get("pages", []), summary.get("skipped", []),
                                                   str(summary.get("params_file", "")), summary.get("failed"))
        + "\n" + _ledger(measured) + "\n" + (_stated_block(summary) if measured else "")
        + "\n</body>\n</html>\n"
    )


def write_index(report_dir: str | Path, summary: Mapping[str, Any]) -> Path:
    """Write ``<report_dir>/index.html`` from the summary; return its path.

    Parameters
    ----------
    report_dir
        The report folder.
    summary
        The content of ``summary.json`` with its ``pages`` (see :func:`render_index`).

    Returns
    -------
    Path
        The index page.
    """
    path = Path(report_dir) / "index.html"
    path.write_text(render_index(summary, figures=summary.get("figures", [])), encoding="utf-8")
    return path
