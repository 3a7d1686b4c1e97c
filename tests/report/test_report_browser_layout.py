"""Every page of the default report at 1400 px: figures at a readable size, nothing wider than the page.

The default report (the session's :func:`default_report`, built once) is opened page by page -- the
index and whatever pages the run wrote into ``html/``, not a fixed list -- in headless Chromium with a
1400 px wide window, after MathJax has typeset it.  Each page's full height is saved as a screenshot under
the test's temporary folder (``screenshots/<page>.png``) and checked:

* the index's waterfall is drawn at least :func:`waterfall_min_height` CSS px tall: the height at which
  its 8 pt labels, rendered at :data:`fleetlib.report.FIGURE_DPI`, are still :data:`MIN_LABEL_PX` px;
* no figure (``<img>``, or an ``<svg>`` output) is drawn below half its natural width;
* the page body does not overflow sideways (wide tables scroll inside their cell).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from report_browser import CHROMEDRIVER, CHROMIUM, INSTALL

from fleetlib.report import FIGURE_DPI

pytestmark = [
    pytest.mark.slow,
    pytest.mark.notebook,
    pytest.mark.skipif(not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
                       reason=f"headless Chromium not installed: run `{INSTALL}` as root"),
]

#: Page width the layout is checked at, CSS px.
WIDTH = 1400

#: Tallest screenshot taken (a longer page is cut there).
MAX_SCREENSHOT_PX = 12000

#: Font size of the waterfall's bar labels (fleetlib.plots.fleet.fleet_waterfall), points.
WATERFALL_LABEL_PT = 8.0

#: Smallest readable label, CSS px.
MIN_LABEL_PX = 12.0

#: The smallest share of its natural width any figure may be drawn at.
MIN_FIGURE_SCALE = 0.5


def waterfall_min_height(natural_height_px: float) -> int:
    """Return the least CSS height of the waterfall at which its labels are :data:`MIN_LABEL_PX` px.

    A label of :data:`WATERFALL_LABEL_PT` points is ``pt x dpi / 72`` pixels in the PNG; the figure may be
    scaled down until that is :data:`MIN_LABEL_PX`, and no further.
    """
    label_px = WATERFALL_LABEL_PT * FIGURE_DPI / 72.0
    return math.ceil(natural_height_px * MIN_LABEL_PX / label_px)


#: Wait until MathJax has typeset the page (pages without MathJax return at once).
_TYPESET = ("const done = arguments[arguments.length - 1];"
            "if (window.MathJax && MathJax.Hub) { MathJax.Hub.Queue(() => done(true)); }"
            " else { done(false); }")

_MEASURE = """
const root = document.documentElement;
const figures = [];
for (const e of document.querySelectorAll('img, svg')) {
  const box = e.getBoundingClientRect();
  let natural = 0, naturalHeight = 0;
  if (e.tagName.toLowerCase() === 'img') {
    natural = e.naturalWidth; naturalHeight = e.naturalHeight;
  } else if (e.closest('.jp-OutputArea-output') && !e.closest('.MathJax, .MathJax_Display, mjx-container')
             && e.getAttribute('width')) {
    natural = e.width.baseVal.value; naturalHeight = e.height.baseVal.value;
  }
  figures.push({tag: e.tagName.toLowerCase(), id: e.id, src: (e.getAttribute('src') || '').slice(0, 60),
                width: box.width, height: box.height, natural: natural, naturalHeight: naturalHeight});
}
return {innerWidth: window.innerWidth, clientWidth: root.clientWidth, scrollWidth: root.scrollWidth,
        bodyScrollWidth: document.body.scrollWidth, height: root.scrollHeight, figures: figures};
"""


def _pages(report: Path) -> list[Path]:
    return [report / "index.html", *sorted((report / "html").glob("*.html"))]


@pytest.fixture(scope="module")
def measured(default_report: Path, browser, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Open every page at 1400 px, save its screenshot and return what was measured, by page name."""
    shots = tmp_path_factory.mktemp("screenshots")
    found: dict[str, dict] = {}
    for page in _pages(default_report):
        browser.set_window_size(WIDTH, 900)
        browser.get(page.as_uri())
        browser.execute_async_script(_TYPESET)
        # the window's outer width may differ from the page's; widen until the page itself is 1400 px
        inner = browser.execute_script("return window.innerWidth;")
        height = min(browser.execute_script("return document.documentElement.scrollHeight;"),
                     MAX_SCREENSHOT_PX)
        browser.set_window_size(WIDTH + (WIDTH - inner), height)
        browser.execute_script("window.scrollTo(0, 0);")
        result = browser.execute_script(_MEASURE)
        result["screenshot"] = shots / f"{page.stem}.png"
        assert browser.save_screenshot(str(result["screenshot"])), page.name
        found[page.name] = result
    return found


def test_every_page_is_measured_at_1400_px(default_report: Path, measured: dict[str, dict]) -> None:
    assert set(measured) == {p.name for p in _pages(default_report)}
    assert len(measured) > 1
    for name, page in measured.items():
        assert page["innerWidth"] == WIDTH, (name, page["innerWidth"])
        assert page["screenshot"].stat().st_size > 0, name


def test_the_index_waterfall_is_drawn_readable(measured: dict[str, dict]) -> None:
    (waterfall,) = [f for f in measured["index.html"]["figures"] if f["id"] == "waterfall"]
    assert waterfall["naturalHeight"] > 0, "the waterfall image did not load"
    least = waterfall_min_height(waterfall["naturalHeight"])
    assert waterfall["height"] >= least, (
        f"waterfall drawn {waterfall['height']:.0f} px tall, below {least} px: its "
        f"{WATERFALL_LABEL_PT:g} pt labels are under {MIN_LABEL_PX:g} px")


def test_no_figure_is_drawn_below_half_its_natural_width(measured: dict[str, dict]) -> None:
    squeezed = [f"{name}: {f['tag']} {f['id'] or f['src']} drawn {f['width']:.0f} px of {f['natural']:.0f}"
                for name, page in measured.items() for f in page["figures"]
                if f["natural"] > 0 and f["width"] < MIN_FIGURE_SCALE * f["natural"]]
    assert not squeezed, "\n".join(squeezed)


def test_no_page_overflows_sideways(measured: dict[str, dict]) -> None:
    wide = [f"{name}: {page['scrollWidth']} px of {page['clientWidth']}" for name, page in measured.items()
            if max(page["scrollWidth"], page["bodyScrollWidth"]) > page["clientWidth"] + 1]
    assert not wide, "\n".join(wide)
