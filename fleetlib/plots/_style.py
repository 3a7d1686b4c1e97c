"""The house style of :mod:`fleetlib.plots`: palette, hatches, markers, formatters and theme.

It also holds the input checks every figure shares.

Nothing here changes :data:`matplotlib.rcParams` at import; :func:`use_theme` (global) and :func:`theme`
(scoped) apply the project look only when asked.  The backend is never chosen here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter

from fleetlib.quality import DomainError

#: Optional remainder term: drawn when present, so a loss nobody attributed is shown, not dropped.
UNATTRIBUTED = "unattributed"

PALETTE_NAME = "colorblind"
HATCHES = ("//", "\\\\", "xx", "..", "++", "oo", "--", "||")
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "h")


# ---------------------------------------------------------------------------------------------------
# Theme and styles
# ---------------------------------------------------------------------------------------------------


def palette() -> list[tuple[float, float, float]]:
    """Return the project's colour cycle (seaborn ``colorblind``) without touching rcParams.

    Returns
    -------
    list of tuple
        Ten RGB triples.
    """
    return list(sns.color_palette(PALETTE_NAME))


def use_theme(*, context: str = "notebook", style: str = "whitegrid", font_scale: float = 1.0,
              rc: Mapping[str, Any] | None = None) -> None:
    """Apply the project theme globally (seaborn ``set_theme`` with the colourblind palette).

    Notebooks call this once in their setup cell.  It changes :data:`matplotlib.rcParams` for the
    rest of the session; use :func:`theme` for a scoped change.

    Parameters
    ----------
    context
        Seaborn plotting context: ``"paper"``, ``"notebook"``, ``"talk"`` or ``"poster"``.
    style
        Seaborn axes style, e.g. ``"whitegrid"`` or ``"ticks"``.
    font_scale
        Multiplier on the context's font sizes; must be > 0.
    rc
        Extra rcParams layered on top of the theme.
    """
    if not (isinstance(font_scale, int | float) and math.isfinite(font_scale) and font_scale > 0):
        raise DomainError(f"font_scale must be a finite number > 0; got {font_scale!r}")
    base_rc = {"hatch.linewidth": 0.8, "legend.frameon": True}
    if rc:
        base_rc.update(rc)
    sns.set_theme(context=context, style=style, palette=PALETTE_NAME, font_scale=font_scale,
                  rc=base_rc)


@contextmanager
def theme(*, context: str = "notebook", style: str = "whitegrid", font_scale: float = 1.0,
          rc: Mapping[str, Any] | None = None) -> Iterator[None]:
    """Apply the project theme inside a ``with`` block and restore every rcParam afterwards.

    Parameters
    ----------
    context, style, font_scale, rc
        As for :func:`use_theme`.

    Yields
    ------
    None
        Figures made inside the block use the theme.
    """
    with mpl.rc_context():
        use_theme(context=context, style=style, font_scale=font_scale, rc=rc)
        yield


def term_style() -> dict[str, tuple[Any, str]]:
    c = palette()
    return {"startup": (c[4], ".."), "input_wait": (c[0], "//"), "preemption": (c[1], "\\\\"),
            "checkpoint": (c[2], "xx"), "recovery": (c[3], "++"), UNATTRIBUTED: (c[7], "oo")}


def darker(color: Any, factor: float = 0.6) -> tuple[float, float, float]:
    r, g, b = mpl.colors.to_rgb(color)
    return (r * factor, g * factor, b * factor)


def new_axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    if ax is not None:
        if not isinstance(ax, Axes):
            raise DomainError(f"ax must be a matplotlib Axes or None; got {type(ax).__name__}")
        return ax
    _, new_ax = plt.subplots(figsize=figsize, layout="constrained")
    return new_ax


def legend_beside(ax: Axes, **kwargs: Any) -> Any:
    """Place the axes' legend outside it, on the right, top-aligned: it never hides data or an axis label.

    Constrained layout (:func:`new_axes`, or the caller's figure) makes room for it.

    Parameters
    ----------
    ax
        The axes whose legend is drawn.
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.legend` (``handles``, ``title``, ...).

    Returns
    -------
    matplotlib.legend.Legend
    """
    style = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "fontsize": "small"}
    return ax.legend(**{**style, **kwargs})


def log_headroom(ax: Axes, values: Any, factor: float = 3.0) -> None:
    """Raise a log (or symmetric-log) y axis' top to ``factor`` times the largest value, so no bar is cut.

    Parameters
    ----------
    ax
        Axes with a log or symlog y scale.
    values
        The drawn values (NaN ignored).
    factor
        Headroom above the largest value, as a ratio.
    """
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    top = float(finite.max()) if finite.size else 1.0
    bottom, _ = ax.get_ylim()
    ax.set_ylim(bottom, max(top, 1.0) * factor)


def device_count(devices: float) -> str:
    """Format a device count compactly: multiples of 1,024 as ``16K`` (16,384), others in full."""
    if devices >= 1024 and devices % 1024 == 0:
        return f"{devices / 1024:g}K"
    return f"{devices:,.0f}"


def pct(value: float) -> str:
    """Format a fraction as a percentage with two significant figures below 10 %."""
    p = 100.0 * value
    if p == 0.0:
        return "0%"
    decimals = 0 if abs(p) >= 9.95 else 1 if abs(p) >= 0.995 else 2
    return f"{p:.{decimals}f}%"


def data_text(value: Any) -> str:
    r"""Write a value from the records as plain figure text: every ``$`` escaped, never mathtext.

    Matplotlib reads text holding two unescaped ``$`` as mathtext; a kernel or pool name such as
    ``$\href{...}$`` would then be parsed as TeX (and an unknown command fails the whole figure).
    An escaped ``\$`` is drawn as ``$``, so the label shows the value exactly as the records hold it.

    Parameters
    ----------
    value
        A name, id or label taken from data (converted with :class:`str`).

    Returns
    -------
    str
        The text with each ``$`` written ``\$``.
    """
    return str(value).replace("$", "\\$")


PERCENT_AXIS = FuncFormatter(lambda v, _pos: f"{100 * v:.0f}%")


SUPERSCRIPT = str.maketrans("-0123456789",
                             "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def pow10_label(value: float, _pos: Any = None) -> str:
    """``10`` with a superscript exponent for exact powers of ten, the plain number otherwise."""
    if value <= 0:
        return ""
    exponent = math.log10(value)
    if abs(exponent - round(exponent)) < 1e-9:
        return "10" + str(round(exponent)).translate(SUPERSCRIPT)
    return f"{value:.3g}"


POW10 = FuncFormatter(pow10_label)


# ---------------------------------------------------------------------------------------------------
# Validation (inputs only; nothing here derives an accounting number)
# ---------------------------------------------------------------------------------------------------


def require_frame(data: Any, name: str, columns: Iterable[str]) -> pd.DataFrame:
    if not isinstance(data, pd.DataFrame):
        raise DomainError(f"{name} must be a pandas DataFrame; got {type(data).__name__}")
    missing = [c for c in columns if c not in data.columns]
    if missing:
        raise DomainError(f"{name} is missing column(s) {missing}; it has {list(data.columns)}")
    if data.empty:
        raise DomainError(f"{name} has no rows; nothing to draw")
    return data


def require_mapping(data: Any, name: str, keys: Iterable[str]) -> dict[str, float]:
    if not isinstance(data, Mapping):
        raise DomainError(f"{name} must be a mapping; got {type(data).__name__}")
    missing = [k for k in keys if k not in data]
    if missing:
        raise DomainError(f"{name} is missing key(s) {missing}; it has {list(data)}")
    return dict(data)


def require_numeric(values: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} must be numeric; got {values!r}") from exc
    bad = ~np.isfinite(arr)
    if bad.any():
        raise DomainError(f"{name} must be finite; got {arr[bad][0]!r} at position "
                          f"{int(np.flatnonzero(bad)[0])}")
    return arr


def require_fractions(values: Any, name: str) -> np.ndarray:
    arr = require_numeric(values, name)
    bad = (arr < 0.0) | (arr > 1.0)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise DomainError(f"{name} must be fractions in [0, 1]; got {arr.ravel()[i]!r} at position {i}")
    return arr


def require_positive(values: Any, name: str) -> np.ndarray:
    arr = require_numeric(values, name)
    bad = arr <= 0.0
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise DomainError(f"{name} must be > 0; got {arr.ravel()[i]!r} at position {i}")
    return arr


def require_fraction_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> np.ndarray:
    """Return ``frame[columns]`` as a float array after checking every cell is a fraction in [0, 1]."""
    try:
        arr = frame.loc[:, list(columns)].to_numpy(dtype=float)
    except (TypeError, ValueError) as exc:
        raise DomainError(f"{name} columns {list(columns)} must be numeric") from exc
    bad = ~np.isfinite(arr) | (arr < 0.0) | (arr > 1.0)
    if bad.any():
        r, c = (int(i[0]) for i in np.nonzero(bad))
        raise DomainError(f"{name}[{columns[c]!r}] must be fractions in [0, 1]; got {arr[r, c]!r} "
                          f"in row {frame.index[r]!r}")
    return arr


def grouped_bars(ax: Axes, groups: Sequence[str], series: Mapping[str, np.ndarray], colors: Sequence[Any],
                  hatches: Sequence[str], *, horizontal: bool = False, width: float = 0.8) -> None:
    """Draw one bar per (group, series), side by side, each series in its own colour and hatch."""
    n = len(series)
    step = width / max(n, 1)
    pos = np.arange(len(groups), dtype=float)
    for i, (name, values) in enumerate(series.items()):
        offset = pos - width / 2 + step * (i + 0.5)
        style = {"color": colors[i % len(colors)], "hatch": hatches[i % len(hatches)], "edgecolor": "black",
                 "label": name}
        if horizontal:
            ax.barh(offset, values, height=step, **style)
        else:
            ax.bar(offset, values, width=step, **style)
    if horizontal:
        ax.set_yticks(pos, [data_text(g) for g in groups])
        ax.invert_yaxis()
    else:
        ax.set_xticks(pos, [data_text(g) for g in groups])
