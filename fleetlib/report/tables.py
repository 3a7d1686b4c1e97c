"""What a report page shows of the data: tables formatted for reading, and sentences built from the data.

:func:`frame` formats a DataFrame for display (a pandas ``Styler``): whole numbers with separators, reals
with a fixed number of decimals and never in scientific notation (device-hours of a large fleet stay
``52,829,420.0``, not ``5.282942e+07``), named share columns as percentages, and, when only the first rows
are shown, a caption that says how many there are.  :func:`folded` puts a long table (a ledger) under a
``<details>`` summary line with its first rows.  Wide tables scroll sideways through the page's CSS.
:func:`say` shows one narrative sentence as Markdown, each value from the data formatted by the
template and escaped, so that a job id or a file name is shown as text and never read as markup.
:func:`factor_text` is the one form a measured factor takes in a sentence (``S = 49.5 %``), so the index and
every page of the walk print the same digits; a subset's number names its subset (``S(pool dev) = 21.7 %``).

Everything a page shows from the data passes through here: table cells, labels and captions are
HTML-escaped (the Styler's own ``escape="html"``) and the table marked ``tex2jax_ignore`` (:data:`NO_MATH`);
sentence values are Markdown-escaped, each holding a ``$`` or a backslash also marked :data:`NO_MATH`, so
MathJax never typesets TeX from the data.
"""

from __future__ import annotations

import html
import math
import string
from collections.abc import Iterable
from typing import Any

import pandas as pd

from fleetlib.quality import DomainError

__all__ = ["FACTOR_SYMBOLS", "NO_MATH", "escape_markdown", "factor_text", "folded", "frame", "say"]

#: The class that keeps MathJax out of an element (its ``tex2jax.ignoreClass``): every value from the data
#: is shown inside one, so TeX in a job id or a pool name (``$\\href{...}{x}$``) stays text.
NO_MATH = "tex2jax_ignore"

#: The symbols :func:`factor_text` writes: the three factors and their product.
FACTOR_SYMBOLS = ("S", "R", "P", "MPG")


def _formats(data: pd.DataFrame, percent: set[Any], digits: int) -> dict[Any, str]:
    formats: dict[Any, str] = {}
    for column in data.columns:
        values = data[column]
        if isinstance(values, pd.DataFrame):  # a duplicated label: leave those columns as they are
            continue
        if column in percent:
            formats[column] = "{:.1%}"
        elif pd.api.types.is_bool_dtype(values):
            continue
        elif pd.api.types.is_integer_dtype(values):
            formats[column] = "{:,}"
        elif pd.api.types.is_float_dtype(values):
            largest = values.abs().max() if values.notna().any() else 0.0
            formats[column] = "{:,.1f}" if largest >= 1000 else f"{{:,.{digits}f}}"
    return formats


def frame(table: pd.DataFrame | pd.Series, *, digits: int = 4, percent: Iterable[Any] = (),
          head: int | None = None, caption: str | None = None) -> Any:
    """Return a table formatted for a report page.

    Parameters
    ----------
    table
        The table (a Series is shown as a one-column table named after it).
    digits
        Decimals of real columns whose largest magnitude is below 1,000 (larger ones get one decimal).
    percent
        Columns holding shares, shown as percentages with one decimal.
    head
        Show only the first ``head`` rows; the caption then says how many rows there are.
    caption
        Text above the table.

    Returns
    -------
    pandas.io.formats.style.Styler
        The formatted table (it renders as HTML in a notebook and in the report's pages): cells, row and
        column labels and the caption HTML-escaped, the table marked :data:`NO_MATH`.
    """
    data = table.to_frame() if isinstance(table, pd.Series) else table
    total = len(data)
    if head is not None and total > head:
        data = data.head(head)
        caption = f"{caption + ': ' if caption else ''}first {head:,} of {total:,} rows"
    styler = data.style.format(_formats(data, set(percent), digits), na_rep="–", escape="html")
    styler = styler.format_index(escape="html", axis=0).format_index(escape="html", axis=1)
    styler = styler.set_table_attributes(f'class="{NO_MATH}"')
    if caption:
        styler = styler.set_caption(html.escape(caption))
    return styler


def folded(table: pd.DataFrame, what: str, *, first: int = 10) -> Any:
    """Return a long table folded under a one-line summary that shows its first rows when opened.

    Parameters
    ----------
    table
        The table (e.g. a ledger's entries).
    what
        What one row is, plural (``"ledger entries"``), for the summary line.
    first
        Rows shown when the summary is opened.

    Returns
    -------
    IPython.display.HTML
        ``<details><summary>N what (first k shown)</summary> table </details>``; an empty table gives one
        line saying there are none.
    """
    from IPython.display import HTML

    if table.empty:
        return HTML(f"<p>no {html.escape(what)}</p>")
    shown = min(first, len(table))
    body = frame(table.head(shown)).to_html()
    return HTML(f'<details class="{NO_MATH}"><summary>{len(table):,} {html.escape(what)} (first {shown:,} '
                f"shown)</summary>{body}</details>")


#: ASCII punctuation Markdown (CommonMark) lets a backslash escape; ``$`` also starts MathJax math.
_MARKDOWN_PUNCTUATION = frozenset(string.punctuation)


def escape_markdown(text: str) -> str:
    """Return ``text`` escaped for Markdown: HTML special characters as entities, punctuation backslashed.

    Parameters
    ----------
    text
        Text from the data (a job id, a file name, a number already formatted).

    Returns
    -------
    str
        Markdown that renders as ``text`` itself: no emphasis, link, code span, heading, math or raw HTML.
    """
    out = []
    for ch in text:
        if ch in "&<>\"":
            out.append(html.escape(ch))
        elif ch in _MARKDOWN_PUNCTUATION:
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


class _Escaped:
    """A value that formats itself with the template's spec, then escapes the result for Markdown."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __format__(self, spec: str) -> str:
        text = format(self.value, spec)
        if "$" in text or "\\" in text:  # what could open math (``$``, ``\\(``, ``\\[``, ``\\begin``)
            return f'<span class="{NO_MATH}">{escape_markdown(text)}</span>'
        return escape_markdown(text)


def say(template: str, /, **values: Any) -> Any:
    """Show one narrative sentence in a notebook as Markdown, its values taken from the data.

    The template is the notebook's own Markdown (emphasis and math allowed); every value is formatted
    with the template's format spec (``{rows:,}``, ``{share:.1%}``), then escaped, and kept out of math
    (:data:`NO_MATH`) when it holds a ``$`` or a backslash, so whatever text the data holds is shown as
    text.  A value never stands inside the template's math or code spans (``$...{x}...$``, ```{x}```):
    there no escape holds.

    Parameters
    ----------
    template
        A :meth:`str.format` template naming the values (``"{ranks} ranks read"``).
    **values
        The values.

    Returns
    -------
    IPython.display.Markdown
        The sentence (shown when it is a cell's last expression, or passed to ``display``).
    """
    from IPython.display import Markdown

    return Markdown(template.format_map({k: _Escaped(v) for k, v in values.items()}))


def factor_text(symbol: str, value: float | None, *, of: str = "") -> str:
    """Return a measured factor as a page prints it: ``S = 49.5 %``, one decimal of a percent.

    The report's index and the pages of the walk print the fleet's S, R, P and MPG only through this
    function, so the same measurement reads the same to the printed digit everywhere.  A number measured on
    a subset (one pool, one job, the traced steps of one job) names that subset and so never reads as the
    fleet's: ``factor_text("S", 0.217, of="pool dev")`` is ``S(pool dev) = 21.7 %``.

    Parameters
    ----------
    symbol
        One of :data:`FACTOR_SYMBOLS`.
    value
        The factor, a fraction; None or not finite: ``n/a``.
    of
        The subset the value was measured on; empty for the report's fleet.

    Returns
    -------
    str
        The text.

    Raises
    ------
    fleetlib.quality.DomainError
        When ``symbol`` is not one of :data:`FACTOR_SYMBOLS`.
    """
    if symbol not in FACTOR_SYMBOLS:
        raise DomainError(f"factor symbol must be one of {', '.join(FACTOR_SYMBOLS)}; got {symbol!r}")
    name = f"{symbol}({of})" if of else symbol
    if value is None or not math.isfinite(float(value)):
        return f"{name} = n/a"
    return f"{name} = {100.0 * float(value):.1f} %"
