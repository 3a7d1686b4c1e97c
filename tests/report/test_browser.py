"""The report in a real browser: Debian's headless Chromium driven by selenium through /usr/bin/chromedriver.

The default report (the session's ``default_report`` of tests/report/conftest.py, built once and shared
with the layout checks) is opened, ``index.html`` and every page, at 1280×800 and checked as a reader
would see them: the measured headline is on the first screen, MathJax left no raw ``$`` behind and typeset
the formulas of every page whose notebook has some, every image decoded, every local link points at a
file that exists, and the console logged no error.

Without the browser the tests are skipped with the command that installs it; selenium is told the driver's
path, so selenium-manager never looks for (or downloads) a browser.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest
from report_browser import CHROMEDRIVER, CHROMIUM, INSTALL, VIEWPORT

pytestmark = [
    pytest.mark.notebook,
    pytest.mark.skipif(not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
                       reason=f"headless Chromium not installed (needs {CHROMIUM} and {CHROMEDRIVER}): "
                              f"run `{INSTALL}` as root"),
]


@pytest.fixture(scope="module")
def report(default_report: Path) -> Path:
    return default_report


def _pages(report: Path) -> list[Path]:
    return [report / "index.html", *sorted((report / "html").glob("*.html"))]


def _open(driver, page: Path) -> None:
    """Load a page, wait for MathJax to finish typesetting, and scroll to the top."""
    driver.get(page.as_uri())
    driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "if (window.MathJax && MathJax.Hub) { MathJax.Hub.Queue(() => done(true)); } else { done(false); }")
    driver.execute_script("window.scrollTo(0, 0);")


#: A formula in Markdown: ``$...$`` (an escaped ``\\$`` is a currency sign) or ``\\(...\\)``.
_FORMULA = re.compile(r"(?<!\\)\$[^$]+(?<!\\)\$|\\\(.+?\\\)")


def _has_math(report: Path, page: Path) -> bool:
    """Whether the page's executed notebook writes a formula (``$`` or ``\\(``) in its Markdown."""
    nb = nbformat.read(report / "notebooks" / f"{page.stem}.ipynb", as_version=4)
    return any(c.cell_type == "markdown" and _FORMULA.search(c.source) for c in nb.cells)


def test_every_page_is_built(report: Path) -> None:
    from fleetlib.report import CASE_STUDY_NOTEBOOKS, COURSE_NOTEBOOKS, RUNG_NOTEBOOKS

    names = sorted(p.stem for p in (report / "html").glob("*.html"))
    assert names == sorted(Path(n).stem for n in RUNG_NOTEBOOKS + CASE_STUDY_NOTEBOOKS + COURSE_NOTEBOOKS)


def test_headline_is_on_the_first_screen(report: Path, browser) -> None:
    from selenium.webdriver.common.by import By

    _open(browser, report / "index.html")
    headline = browser.find_element(By.ID, "headline")
    assert headline.is_displayed()
    box = browser.execute_script("const r = arguments[0].getBoundingClientRect();"
                                 "return [r.top, r.bottom, window.innerHeight];", headline)
    assert 0 <= box[0] and box[1] <= box[2] <= VIEWPORT[1], box
    text = headline.text
    measured = json.loads((report / "summary.json").read_text())["measured"]
    assert f"MPG {100 * measured['mpg']:.1f} %" in text
    for symbol, factor in (("S", "scheduling"), ("R", "runtime"), ("P", "program")):
        assert f"{symbol} {100 * measured['factors'][factor]['value']:.1f} %" in text
    assert "measured" in text
    table = browser.find_element(By.ID, "factors").text
    assert "scheduler records" in table and "job timelines" in table


@pytest.mark.parametrize("check", ["math", "images", "links", "console"])
def test_pages_render_offline(report: Path, browser, check: str) -> None:
    from selenium.webdriver.common.by import By

    problems: list[str] = []
    for page in _pages(report):
        _open(browser, page)
        if check == "math":
            # Formulas live in prose; printed output (<pre>, <code>) is not typeset, may show a currency "$".
            text = browser.execute_script(
                "const body = document.body.cloneNode(true);"
                "body.querySelectorAll('pre, code, script, style').forEach(e => e.remove());"
                "return body.innerText;")
            if "$" in text:
                at = text.index("$")
                problems.append(f"{page.name}: raw $ in {text[max(0, at - 40):at + 40]!r}")
            typeset = browser.find_elements(By.CSS_SELECTOR, ".MathJax, .MathJax_Display")
            if page.name != "index.html" and not typeset and _has_math(report, page):
                problems.append(f"{page.name}: no typeset formula")
        elif check == "images":
            for img in browser.find_elements(By.TAG_NAME, "img"):
                loaded = "return arguments[0].complete && arguments[0].naturalWidth > 0;"
                if not browser.execute_script(loaded, img):
                    problems.append(f"{page.name}: image not loaded: {img.get_attribute('src')[:80]}")
        elif check == "links":
            for anchor in browser.find_elements(By.TAG_NAME, "a"):
                href = anchor.get_attribute("href") or ""
                url = urlparse(href)
                if url.scheme in ("http", "https"):
                    problems.append(f"{page.name}: remote link {href}")
                elif url.scheme == "file" and not Path(unquote(url.path)).exists():
                    problems.append(f"{page.name}: broken link {href}")
        else:
            for entry in browser.get_log("browser"):
                if entry["level"] == "SEVERE":
                    problems.append(f"{page.name}: {entry['message'][:200]}")
    assert not problems, "\n".join(problems)
