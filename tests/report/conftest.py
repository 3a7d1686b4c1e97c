"""Fixtures of the report tests: the default report, built once per session, and the headless browser.

:func:`default_report` runs ``make report``'s chain (the walk and the course on the running example) once
for the whole session; every test that needs a whole report (the browser checks, report-wide checks)
shares it rather than running the notebooks again.  The browser is Debian's headless Chromium driven by
selenium (see tests/report/report_browser.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from report_browser import CHROMEDRIVER, CHROMIUM, VIEWPORT


@pytest.fixture(scope="session")
def default_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return the folder of the default report (every rung and course notebook on the running example)."""
    from fleetlib.report import checkout_root, run_report

    root = checkout_root()
    return run_report(root / "parameters" / "running_example.yaml", tmp_path_factory.mktemp("default_report"),
                      progress=False)


@pytest.fixture(scope="module")
def browser():
    pytest.importorskip("selenium", reason="selenium is a dev dependency (pyproject.toml [dev])")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()
