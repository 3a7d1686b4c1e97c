"""The JSON nesting scan: one compiled pass over the bytes, carrying its state from chunk to chunk.

A JSON parser written as recursion (Python's ``json``) fails with a ``RecursionError`` on text nested
a few thousand deep.  Readers therefore scan the nesting first and refuse such text with a one-line
message naming its line.  The scan keeps five numbers (depth, inside a string, after an escaping
backslash, line, last line reported), so its memory does not grow with the input: text is fed to it
in chunks (:data:`CHUNK` characters of a ``str`` or bytes of a buffer at a time).

The rules: ``[`` and ``{`` open, ``]`` and ``}`` close, brackets inside strings do not count, and a
quote preceded by an odd run of backslashes is escaped.  With ``per_line`` every line is its own
document (JSON lines): a newline resets the depth and the string state.

The scan is vectorised numpy over the bytes that matter (no numba: a reader that parses JSON does
not load LLVM, so every reader runs within a 512 MiB address space).
"""

from __future__ import annotations

import numpy as np

CHUNK = 1 << 18
"""Characters of a ``str`` (or bytes of a buffer) scanned at a time (at most 1 MiB of UTF-8 bytes)."""

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


def scan_depth(buf: np.ndarray, limit: int, per_line: bool, state: np.ndarray) -> np.ndarray:
    """Scan ``buf`` (uint8) from ``state`` (updated in place); return the lines that nest past ``limit``.

    Only the bytes that matter (backslashes, quotes, newlines, brackets) are picked out, and every
    rule is a cumulative sum over them: a quote is escaped when the run of backslashes right before
    it is odd, a string is open while the count of unescaped quotes is odd, the depth is the sum of
    opening minus closing brackets outside strings.  With ``per_line`` the sums restart after each
    newline.

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
        once; without ``per_line`` only the first, and ``state[4]`` holds it).
    """
    depth_in, inside_in, escaped_in, line_in, reported = (int(x) for x in state)
    kinds = KINDS[buf]
    pos = np.flatnonzero(kinds)
    kind = kinds[pos]
    del kinds
    if escaped_in:  # the run of backslashes ending the previous chunk goes on: one virtual backslash
        pos = np.concatenate(([-1], pos))
        kind = np.concatenate(([1], kind)).astype(np.uint8)
    if pos.size == 0:
        state[2] = 0 if buf.size else escaped_in
        return np.zeros(0, dtype=np.int64)
    slash = kind == 1
    follows = np.zeros(pos.size, dtype=bool)  # the entry right before is a backslash at the byte before
    follows[1:] = slash[:-1] & (pos[:-1] == pos[1:] - 1)
    run_start = np.maximum.accumulate(np.where(slash & ~follows, pos, np.iinfo(np.int64).min))
    escaped = np.zeros(pos.size, dtype=bool)
    escaped[1:] = follows[1:] & ((pos[1:] - run_start[:-1]) % 2 == 1)
    newline = kind == 3
    segment = np.cumsum(newline) if per_line else np.zeros(pos.size, dtype=np.int64)
    quotes = np.cumsum((kind == 2) & ~escaped)  # unescaped quotes up to and including each entry
    quote_base = np.concatenate(([-inside_in], quotes[newline])) if per_line else np.array([-inside_in])
    inside = (quotes - quote_base[segment]) % 2 == 1  # after the entry; a bracket is no quote: same before
    step = ((kind == 4) & ~inside).astype(np.int64) - ((kind == 5) & ~inside)
    depth = np.cumsum(step)
    depth_base = np.concatenate(([-depth_in], depth[newline])) if per_line else np.array([-depth_in])
    depth -= depth_base[segment]
    lines = line_in + np.cumsum(newline)
    deep = np.unique(lines[(step == 1) & (depth > limit)])
    deep = deep[deep != reported]
    if not per_line:
        deep = deep[:1]
    last = pos.size - 1
    state[0] = depth[last]
    state[1] = int(inside[last])
    state[2] = (pos[last] + 1 - run_start[last]) % 2 if slash[last] and pos[last] == buf.size - 1 else 0
    state[3] = lines[last]
    state[4] = deep[-1] if deep.size else reported
    return deep.astype(np.int64)
