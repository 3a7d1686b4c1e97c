"""Report pages: executed notebooks as HTML that loads nothing from the network and is byte-reproducible.

An executed notebook is first *cleaned* (:func:`clean_notebook`): papermill's injected-parameters cell gets a
fixed id instead of a random one, and the timestamps papermill and nbclient write into the notebook and each
cell's metadata are removed, so two runs of an unchanged report write identical ``.ipynb`` and ``.html``
bytes.  The page is then rendered with fleetlib's template (``templates/fleetlib``, built on JupyterLab's):
formulas are typeset by a copy of MathJax 2 shipped by the ``jupyter-server-mathjax`` package, copied next
to the pages by :func:`install_assets`; no require.js, widget manager or mermaid script is referenced; wide
tables and long output lines scroll inside their cell; and a bar links the page to the report index and to
its neighbours in the walk.
"""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "ASSETS_DIR",
    "MATHJAX_CONFIG",
    "MATHJAX_DIR",
    "REPORT_CSS",
    "clean_notebook",
    "install_assets",
    "notebook_summary",
    "notebook_title",
    "remote_references",
    "write_page",
]

#: Folder of the report (relative to its root) holding the offline assets.
ASSETS_DIR = "assets"

#: MathJax's folder inside :data:`ASSETS_DIR`.
MATHJAX_DIR = "mathjax"

#: MathJax entry point with the one combined configuration the package ships (TeX input, HTML-CSS output).
_MATHJAX_ENTRY = "MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"

#: Parts of the MathJax copy the pages never load (other languages, accessibility explorer, mhchem 3).
_MATHJAX_SKIP = ("localization", "a11y", "mhchem3", "unpacked")

#: MathJax's configuration on every page: TeX between ``$``/``$$`` (``\\$`` a literal dollar), HTML-CSS output
#: with the STIX web fonts of the local copy, no font download probe (MathJax's blank ``about:blank`` font,
#: which a ``file://`` page may not fetch), no menu, no loading messages.
#:
#: Math is typeset only in the notebooks' own Markdown and LaTeX (cells, and sentences whose values are kept
#: out of math by :data:`fleetlib.report.tables.NO_MATH`), never in other outputs (tables, printed text);
#: and no formula can link, load or style anything: ``\\href``, ``\\class``, ``\\cssId``, ``\\style`` and
#: ``\\require`` show their text only, and the ``Safe`` extension drops any URL (``javascript:`` above all).
MATHJAX_CONFIG = """MathJax.Hub.Config({
  extensions: ["Safe.js"],
  tex2jax: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
            processEscapes: true, processEnvironments: true,
            ignoreClass: "tex2jax_ignore|jp-OutputArea-output",
            processClass: "tex2jax_process|jp-RenderedMarkdown|jp-RenderedLatex"},
  TeX: {Macros: {href: ["{#2}", 2], url: ["{#1}", 1], class: ["{#2}", 2], cssId: ["{#2}", 2],
                 style: ["{#2}", 2], require: ["", 1]}},
  Safe: {allow: {URLs: "none", classes: "none", cssIDs: "none", styles: "none", require: "none"}},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null,
               styles: {"@font-face": {"font-family": "MathJax_Blank", src: "local('MathJax_Blank')"}}},
  displayAlign: "center", messageStyle: "none", showMathMenu: false, menuSettings: {assistiveMML: false}
});"""

_TEMPLATES = Path(__file__).resolve().parent / "templates"

#: Styles added to every report page and to the index: tables and long output lines scroll sideways inside
#: their cell instead of running off the page; numbers align; ledgers fold.
REPORT_CSS = """
.jp-RenderedHTMLCommon table, .fleetlib-table { display: block; max-width: 100%; overflow-x: auto; }
.jp-RenderedHTMLCommon td, .jp-RenderedHTMLCommon th { font-variant-numeric: tabular-nums; }
.jp-OutputArea-output pre { overflow-x: auto; white-space: pre; }
.jp-OutputArea-output { overflow-x: auto; }
.fleetlib-nav { font-family: system-ui, sans-serif; font-size: 0.9rem; padding: 0.4rem 1rem;
  border-bottom: 1px solid #ccc; background: #f7f7f7; }
.fleetlib-nav a { text-decoration: none; }
details > summary { cursor: pointer; }
"""

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_INLINE_MARKUP = re.compile(r"(\*\*|__|\*|`)")


def _plain(markdown: str) -> str:
    """Drop Markdown emphasis and code marks from one line (math between ``$`` is kept for MathJax)."""
    return " ".join(_INLINE_MARKUP.sub("", markdown).split())


def notebook_title(nb: Any, fallback: str) -> str:
    """Return the text of a notebook's first Markdown heading, or ``fallback`` when it has none.

    Parameters
    ----------
    nb
        A notebook (``nbformat.NotebookNode``).
    fallback
        Title to use without a heading (the file's stem).

    Returns
    -------
    str
        The heading without its ``#`` marks and inline emphasis.
    """
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            match = _HEADING.search(cell.source)
            if match:
                return _plain(match.group(1))
    return fallback


def notebook_summary(nb: Any) -> str:
    """Return the first sentence of a notebook's first paragraph after its title, as plain text.

    Parameters
    ----------
    nb
        A notebook (``nbformat.NotebookNode``).

    Returns
    -------
    str
        One sentence (empty when the notebook has no prose paragraph).
    """
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for block in re.split(r"\n\s*\n", cell.source):
            text = block.strip()
            if not text or text.startswith(("#", "|", "-", "*", "1.", "$$", ">")):
                continue
            paragraph = _plain(text)
            sentence = re.split(r"(?<=[.!?])\s+(?=[A-Z$*])", paragraph, maxsplit=1)[0]
            return sentence
    return ""


def clean_notebook(nb: Any) -> Any:
    """Give every cell a fixed id and remove run timestamps, so an unchanged re-run writes the same bytes.

    Papermill's injected-parameters cell gets the id ``injected-parameters``; a cell without an id, or with
    one already used, gets ``cell-<index>``.  The random table ids of pandas Styler output are replaced by
    ids fixed by the output's position, memory addresses in default object reprs are dropped, and
    consecutive chunks of one output stream are merged.  Removed: ``metadata.papermill`` (notebook and
    cells), ``metadata.execution`` (nbclient's per-cell timestamps) and ``metadata.widgets`` (widget state:
    model ids are random, and the static pages render no widget).

    Parameters
    ----------
    nb
        An executed notebook (``nbformat.NotebookNode``); changed in place.

    Returns
    -------
    NotebookNode
        The same notebook.
    """
    for key in ("papermill", "widgets"):
        nb.metadata.pop(key, None)
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell_id = "injected-parameters"
        else:
            cell_id = cell.get("id") or f"cell-{index}"
        if cell_id in seen:
            cell_id = f"cell-{index}"
        seen.add(cell_id)
        cell["id"] = cell_id
        if "outputs" in cell:
            cell["outputs"] = _coalesced_streams(cell["outputs"])
        for number, output in enumerate(cell.get("outputs", [])):
            data = output.get("data", {})
            if "text/html" in data:
                data["text/html"] = _fixed_styler_ids(data["text/html"], f"{index}_{number}")
            if "text/plain" in data:  # an object's default repr names its memory address
                plain = data["text/plain"]
                data["text/plain"] = _ADDRESS.sub(">", plain if isinstance(plain, str) else "".join(plain))
    return nb


def _coalesced_streams(outputs: list[Any]) -> list[Any]:
    """Merge consecutive chunks of one stream (how a kernel splits its prints depends on timing)."""
    merged: list[Any] = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (previous is not None and output.get("output_type") == "stream"
                and previous.get("output_type") == "stream" and previous.get("name") == output.get("name")):
            text = output["text"] if isinstance(output["text"], str) else "".join(output["text"])
            before = previous["text"] if isinstance(previous["text"], str) else "".join(previous["text"])
            previous["text"] = before + text
        else:
            merged.append(output)
    return merged


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")
_STYLER_ID = re.compile(r"\bT_([0-9a-f]{5})(?=[_\"'\s#{.])")


def _fixed_styler_ids(markup: Any, prefix: str) -> Any:
    """Replace pandas Styler's random table ids (``T_1a2b3``) by ids fixed by the output's position."""
    text = markup if isinstance(markup, str) else "".join(markup)
    found: dict[str, str] = {}
    fixed = _STYLER_ID.sub(lambda m: "T_" + found.setdefault(m.group(1), f"fl{prefix}_{len(found)}"), text)
    return fixed


def install_assets(report_dir: str | Path) -> Path:
    """Copy MathJax (from the ``jupyter-server-mathjax`` package) into ``<report_dir>/assets/mathjax``.

    Parameters
    ----------
    report_dir
        The report folder.

    Returns
    -------
    Path
        The MathJax folder written.
    """
    import jupyter_server_mathjax

    source = Path(jupyter_server_mathjax.__file__).resolve().parent / "static"
    target = Path(report_dir) / ASSETS_DIR / MATHJAX_DIR
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*_MATHJAX_SKIP))
    return target


def mathjax_src(prefix: str) -> str:
    """Return the MathJax script address for a page whose report root is ``prefix`` ('' or '../')."""
    return f"{prefix}{ASSETS_DIR}/{MATHJAX_DIR}/{_MATHJAX_ENTRY}"


def write_page(executed: Path, html_path: Path, *, nav: Mapping[str, Any]) -> str:
    """Clean an executed notebook (rewriting it) and render it as a report page with its code hidden.

    Parameters
    ----------
    executed
        The executed ``.ipynb``; rewritten cleaned (see :func:`clean_notebook`).
    html_path
        The page to write (in the report's ``html/`` folder).
    nav
        ``index_href`` and optional ``previous`` / ``next`` (each ``{"href", "title"}``) for the page's bar.

    Returns
    -------
    str
        The page's title (the notebook's first heading).
    """
    import nbformat
    from nbconvert import HTMLExporter

    nb = clean_notebook(nbformat.read(executed, as_version=4))
    title = notebook_title(nb, executed.stem)
    nbformat.write(nb, executed)
    nb.metadata["title"] = title
    exporter = HTMLExporter(template_name="fleetlib", extra_template_basedirs=[str(_TEMPLATES)],
                            exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    resources = {"fleetlib": {"css": REPORT_CSS, "mathjax_src": mathjax_src("../"),
                              "mathjax_config": MATHJAX_CONFIG, **nav}}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(body, encoding="utf-8")
    return title


_REMOTE = re.compile(
    r"<(script|link|img|iframe|source|audio|video)\b[^>]*?\b(src|href)\s*=\s*[\"']?\s*((?:https?:)?//[^\"'\s>]+)",
    re.IGNORECASE)
_CSS_REMOTE = re.compile(r"(?:@import\s+|url\(\s*)[\"']?\s*((?:https?:)?//[^\"')\s]+)", re.IGNORECASE)


def remote_references(page: str) -> list[str]:
    """Return every remote address a page would load: scripts, stylesheets, images, frames, CSS imports.

    Parameters
    ----------
    page
        HTML text.

    Returns
    -------
    list of str
        The addresses (``http://``, ``https://`` or protocol-relative ``//``), in page order; empty when
        the page loads only local files.
    """
    found = [html.unescape(m.group(3)) for m in _REMOTE.finditer(page)]
    found += [html.unescape(m.group(1)) for m in _CSS_REMOTE.finditer(page)]
    return found
