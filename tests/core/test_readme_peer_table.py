"""The README's fleetlib-vs-peer table is what ``tests/runtime_peer_table.py`` computes now (never typed)."""

from __future__ import annotations

import re
from pathlib import Path

from runtime_peer_table import markdown, peer_rows

ROOT = Path(__file__).resolve().parents[2]


def test_readme_table_matches_the_script():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- peer-table:start -->\n(.*?)\n<!-- peer-table:end -->", readme, re.S)
    assert found, "README has no peer-table block"
    assert found.group(1).strip() == markdown(peer_rows()).strip()
