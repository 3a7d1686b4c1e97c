"""The headless browser the report's page tests open pages in (see tests/report/report_browser.py)."""

from __future__ import annotations

import pytest
from report_browser import CHROMEDRIVER, CHROMIUM, VIEWPORT


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
