"""Where the report's page tests find headless Chromium: Debian's, driven by selenium through chromedriver.

Selenium is told the driver's path, so selenium-manager never looks for (or downloads) a browser.
"""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL = "apt-get update && apt-get install -y chromium chromium-driver"
VIEWPORT = (1280, 800)
