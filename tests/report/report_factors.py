"""Find the S, R, P and MPG a report page prints, in the page's visible text (the one-fleet test).

A page prints the report's fleet's factors through :func:`fleetlib.report.factor_text` (``S = 49.5 %``); the
index's headline and ``fleetlib.fleet.views.headline`` write ``S 49.5 %`` / ``S 49.5%``.  A subset's number
names its subset (``S(pool dev) = 21.7 %``) and is not the fleet's, so it is not found here.
"""

from __future__ import annotations

import html
import re

#: ``S = 49.5 %``: the form factor_text writes.
FACTOR_TEXT = re.compile(r"(?<![\w(])(MPG|S|R|P) = (\d+\.\d) %")
#: ``MPG 10.0 % = S 49.5 % × R ...``: the headline form (the index, views.headline).
HEADLINE = re.compile(r"(?<![\w(])(MPG|S|R|P) (\d+\.\d) ?%")


def visible_text(page: str) -> str:
    """Return a page's text as a reader sees it: scripts, styles and tags dropped, entities unescaped."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def printed_factors(page: str) -> list[tuple[str, str]]:
    """Return every (symbol, printed percent) of the fleet's factors on a page, in both printed forms."""
    text = visible_text(page)
    return FACTOR_TEXT.findall(text) + HEADLINE.findall(text)
