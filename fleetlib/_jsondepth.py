"""The JSON nesting scan: one compiled pass over the bytes, carrying its state from chunk to chunk.

A JSON parser written as recursion (Python's ``json``) fails with a ``RecursionError`` on text nested
a few thousand deep.  Readers therefore scan the nesting first and refuse such text with a one-line
message naming its line.  The scan keeps five numbers (depth, inside a string, after an escaping
backslash, line, last line reported), so its memory does not grow with the input: text is fed to it
in chunks (:data:`CHUNK` characters at a time for ``str``, the buffer itself for bytes).

The rules: ``[`` and ``{`` open, ``]`` and ``}`` close, brackets inside strings do not count, and a
quote preceded by an odd run of backslashes is escaped.  With ``per_line`` every line is its own
document (JSON lines): a newline resets the depth and the string state.

The loop is compiled by numba on first use and cached on disk (``cache=True``); numba is imported
with this module, which :func:`fleetlib._io.json_depth_rows` imports on its first call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

CHUNK = 1 << 20
"""Characters of a ``str`` encoded and scanned at a time (at most 4 MiB of UTF-8 bytes)."""

STATE_SIZE = 5
"""Length of the state array: depth, inside a string, escaped, line (1-based), last line reported."""

KINDS = np.zeros(256, dtype=np.uint8)
"""Byte classes of the scan: 0 other, 1 backslash, 2 quote, 3 newline, 4 opening and 5 closing bracket."""
KINDS[0x5C] = 1
KINDS[0x22] = 2
KINDS[0x0A] = 3
KINDS[[0x5B, 0x7B]] = 4
KINDS[[0x5D, 0x7D]] = 5


def new_state() -> np.ndarray:
    """Return the state of a scan at the start of a text (depth 0, line 1, nothing reported)."""
    return np.array([0, 0, 0, 1, 0], dtype=np.int64)


@njit(cache=True)
def scan_depth(buf: np.ndarray, limit: int, per_line: bool, state: np.ndarray) -> np.ndarray:
    """Scan ``buf`` (uint8) from ``state`` (updated in place); return the lines that nest past ``limit``.

    Parameters
    ----------
    buf
        The next bytes of the text.
    limit
        The deepest nesting allowed.
    per_line
        Each line is its own document.
    state
        From :func:`new_state` or the previous chunk's scan.

    Returns
    -------
    numpy.ndarray
        The 1-based lines, in order, where the depth first exceeds ``limit`` in this chunk (each line
        once; without ``per_line`` the scan stops at the first and ``state[4]`` holds it).
    """
    depth = state[0]
    inside = state[1]
    escaped = state[2]
    line = state[3]
    reported = state[4]
    out = np.empty(8, dtype=np.int64)
    n = 0
    for i in range(buf.size):
        kind = KINDS[buf[i]]
        if kind == 0:  # most bytes: letters, digits, spaces, punctuation
            escaped = 0
            continue
        if kind == 1:  # backslash: escapes the next byte unless itself escaped
            escaped = 1 - escaped
            continue
        if kind == 2:
            if escaped == 0:
                inside = 1 - inside
        elif kind == 3:
            line += 1
            if per_line:
                depth = 0
                inside = 0
        elif inside == 0:
            if kind == 4:
                depth += 1
                if depth > limit and reported != line:
                    if n == out.size:
                        grown = np.empty(2 * n, dtype=np.int64)
                        grown[:n] = out
                        out = grown
                    out[n] = line
                    n += 1
                    reported = line
                    if not per_line:
                        break
            else:
                depth -= 1
        escaped = 0
    state[0] = depth
    state[1] = inside
    state[2] = escaped
    state[3] = line
    state[4] = reported
    return out[:n].copy()
