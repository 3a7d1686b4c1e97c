"""Hostile values in a Kineto trace's fields, each repaired and named in the row book.

Text that is no text (a JSON array or object where a name or an arg is read; a lone surrogate
escape, which no UTF-8 text can hold) and counts no message has (a negative ``In msg nelems``, or
one that is no whole number):
found on the rare path or by one C pass over a column, so a valid trace pays next to nothing,
and each touched row is a repair naming its field in the ledger.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from itertools import repeat
from typing import Any

import numpy as np

from fleetlib._io import clean_text, excerpt
from fleetlib.program.readers import _memo, _numeric
from fleetlib.program.readers._columns import _Book, _Collector, _nested_reason
from fleetlib.program.readers._decode import (
    _ESCAPED_RE,
    _LONE_RE,
    _SURROGATE_RE,
    _clean,
    _clean_json,
    _map_unique,
    _Source,
)
from fleetlib.quality import DomainError

#: Args read as text (factorised, compared, looked up) by the GPU and host-annotation tables.
_ARG_TEXT_KEYS = ("Collective name", "dtype", "Process Group Name", "Process Group Description")


def _nested_text(table: dict[str, np.ndarray], keys: tuple[str, ...], book: _Book) -> None:
    """Read a JSON array or object where ``table`` holds text as absent, each a named repair of its row.

    Such a value has no text to classify or look up, and hashes as nothing; the event itself is
    sound, so it is kept with the value ignored.  One C pass per column when all its values are
    text or missing (every valid trace); only a column holding something else is looked through.
    """
    for key in keys:
        values = table.get(key)
        if values is None or not len(values) or (
                _memo.is_string_array is not None and _memo.is_string_array(values, skipna=True)):
            continue
        hit = np.fromiter(map(isinstance, values, repeat((list, dict))), dtype=bool, count=len(values))
        if hit.any():
            book.repair_rows(table["row"][hit], key, [f"{_nested_reason(key, v)}; read as absent"
                                                     for v in values[hit]])
            values = values.copy()
            values[hit] = None
            table[key] = values


_COUNT_TEXT_RE = re.compile(r"[+-]?[0-9]+")


def _element_counts(nelems: np.ndarray, rows: np.ndarray, book: _Book | None) -> np.ndarray:
    """``In msg nelems`` as whole numbers; each value that is not one is a named repair of its row.

    Integral text (``"256"``) is converted, as numeric text in ``ts`` / ``dur`` is; any other value
    that is no whole number of elements -- other text, a boolean, a fraction, an infinity, an
    array -- leaves the message size unknown: read as absent, its value shown (it was read as a
    dtype of unknown size, or a boolean as one element).  A valid trace's counts are integers or
    missing: one pass over their types, nothing else.
    """
    values = nelems.tolist()
    if set(map(type, values)) <= {int, type(None)}:
        return nelems
    out = nelems.copy()
    converted: list[int] = []
    odd: list[int] = []
    reasons: list[str] = []
    for i, v in enumerate(values):
        if v is None or type(v) is int or (type(v) is float and math.isfinite(v) and v.is_integer()):
            continue
        if isinstance(v, str) and _COUNT_TEXT_RE.fullmatch(v.strip()):
            out[i] = int(v.strip())
            if out[i] >= 0:  # a negative one is named by the negative-count repair
                converted.append(i)
            continue
        out[i] = None
        odd.append(i)
        shown = excerpt(v if isinstance(v, str) else json.dumps(v))
        reasons.append(f"not a whole number of elements ({shown}): message bytes unknown (read as absent)")
    if book is not None:
        if converted:
            book.repair_rows(rows[converted], "In msg nelems", "numeric text converted to a number")
        if odd:
            book.repair_rows(rows[odd], "In msg nelems", reasons)
    return out


def _message_bytes(nelems: np.ndarray, dtypes: np.ndarray, rows: np.ndarray,
                   book: _Book | None) -> tuple[np.ndarray, np.ndarray]:
    """Message bytes from ``In msg nelems`` and ``dtype``, and the counts they were computed from.

    Counts that are no whole number are read as absent first (:func:`_element_counts`).  A
    negative element count (no message has one) leaves the size unknown: read as absent, a named
    repair of its row.  Found only where :func:`fleetlib.program.classify.message_bytes` refuses
    one (the rare path), so a valid trace's counts are converted once, as before.
    """
    nelems = _element_counts(nelems, rows, book)
    try:
        return _numeric.message_bytes(nelems, dtypes), nelems
    except DomainError:
        neg = _numeric.to_floats(nelems) < 0  # NaN (missing, not a number) compares False
        if book is not None:
            book.repair_rows(rows[neg], "In msg nelems", [
                f"negative element count {excerpt(v)}: message bytes unknown (read as absent)"
                for v in nelems[neg]])
        nelems = nelems.copy()
        nelems[neg] = None
        return _numeric.message_bytes(nelems, dtypes), nelems


_UTF8_REASON = "invalid UTF-8 bytes replaced by U+FFFD"
_LONE_REASON = "lone surrogate escape (\\uD800-\\uDFFF without its pair: not text) replaced by U+FFFD"


def _dirty(values: np.ndarray, pattern: re.Pattern[str]) -> np.ndarray:
    """Mask of the text values ``pattern`` finds something in (one search per distinct value)."""
    return _map_unique(values, lambda v: isinstance(v, str) and bool(pattern.search(v)), False).astype(bool)


def _text_repairs(source: _Source) -> list[tuple[re.Pattern[str], str]]:
    """Return what to replace by U+FFFD in the file's text, each with its ledger reason (lone ones last).

    Invalid UTF-8 bytes were decoded as escaped bytes (U+DC80-U+DCFF); a JSON escape of a lone
    surrogate decodes to any of U+D800-U+DFFF.  Where the file held no invalid byte every surrogate
    is such an escape; where it did, those of the escaped bytes' range count as bytes.
    """
    out = [(_ESCAPED_RE, _UTF8_REASON)] if source.replaced else []
    if source.surrogates:
        out.append((_LONE_RE if source.replaced else _SURROGATE_RE, _LONE_REASON))
    return out


def _lone_repairs(gk: Mapping[str, np.ndarray], r: Mapping[str, np.ndarray], s: Mapping[str, np.ndarray],
                  o: Mapping[str, np.ndarray], top: Mapping[str, Any], rows_k: np.ndarray,
                  pattern: re.Pattern[str], keys: tuple[str, ...], book: _Book) -> Mapping[str, Any]:
    """Replace the lone surrogates (``pattern``) in the text columns ``keys`` by U+FFFD, in place, named.

    Returns the top-level keys with theirs replaced.  Lone surrogates are repaired as invalid
    UTF-8 bytes are (:func:`_utf8_repairs`): kept GPU rows holding one are repairs, and a
    ``lone_surrogate`` note counts them; CPU-op rows are repaired by ``_tables._ops_table``;
    runtime calls, annotations and the top-level keys are replaced as they are.  Escaped invalid
    bytes (outside ``pattern`` where the file has any) are left for ``_utf8_repairs``.
    Called only where text decoded by :mod:`json` had a surrogate escape (the rare path).
    """
    dirty = np.zeros(len(rows_k), dtype=bool)
    fields = []
    for key in keys:
        if key in gk:
            hit = _dirty(gk[key], pattern)
            if hit.any():
                dirty |= hit
                fields.append(key)
                book.repair_rows(rows_k[hit], key, _LONE_REASON)  # each row names its own fields
    found = _dirty_keys(o, ("name", "Input Dims", "Input type"), pattern) != []
    for table in (gk, r, s):
        for key in _dirty_keys(table, keys, pattern):
            table[key] = _map_unique(table[key], lambda v: pattern.sub("\ufffd", v) if type(v) is str else v,
                                     None)
            found = True
    if pattern.search(json.dumps(top, ensure_ascii=False)):  # written as they are: lone ones too
        top = _clean_json(dict(top))
        found = True
    if not found:
        return top
    book.note("lone_surrogate", "lone surrogate escapes (\\uD800-\\uDFFF without its pair: not text) "
                                "replaced by U+FFFD" + (f"; {int(dirty.sum())} kept GPU rows affected "
                                                        f"({', '.join(fields)})" if dirty.any()
                                                        else " (none in a kept GPU row)"))
    return top


def _clean_counts(col: _Collector) -> None:
    """Replace invalid UTF-8 and lone surrogates by U+FFFD in the collector's counts by phase and category.

    Their keys become the ledger's unused kinds, ``events_by_category`` and the unknown-category
    notes, which are written out as text: a lone surrogate there cannot be encoded.  Counts of keys
    that become equal are added.  Called only where the file's text held such bytes or escapes.
    """
    for name in ("phase_counts", "cat_counts", "unknown_cats", "unused_complete"):
        counts: Counter[str] = Counter()
        for key, n in getattr(col, name).items():
            counts[clean_text(key)] += n
        setattr(col, name, counts)
    col.legacy_cats = {clean_text(c) for c in col.legacy_cats}


def _dirty_keys(table: Mapping[str, np.ndarray], keys: tuple[str, ...],
                pattern: re.Pattern[str]) -> list[str]:
    return [key for key in keys if key in table and _dirty(table[key], pattern).any()]


def _ops_text_repairs(rows: np.ndarray, columns: tuple[np.ndarray, ...],
                      text_repairs: list[tuple[re.Pattern[str], str]], book: _Book) -> None:
    """Name the CPU-op rows whose ``name``, ``Input Dims``, ``Input type`` (``columns``) hold bad text."""
    for pattern, reason in text_repairs:
        hits = [_dirty(values, pattern) for values in columns]
        if reason == _LONE_REASON:  # each row names its own fields
            for key, hit in zip(("name", "Input Dims", "Input type"), hits, strict=True):
                book.repair_rows(rows[hit], key, reason)
        elif np.logical_or.reduce(hits).any():  # as before: the three fields together
            book.repair_rows(rows[np.logical_or.reduce(hits)], "name,Input Dims,Input type", reason)


#: Text columns the GPU, runtime and span tables may hold escaped invalid UTF-8 in.
_TEXT_KEYS = ("name", "cat", "tid", "Collective name", "dtype", "Process Group Name",
              "Process Group Description")


def _utf8_repairs(gk: dict[str, np.ndarray], r: dict[str, np.ndarray], s: dict[str, np.ndarray],
                  rows_k: np.ndarray, replaced: int, book: _Book) -> None:
    """Replace escaped invalid UTF-8 in text columns by U+FFFD; kept GPU rows touched are repairs."""
    dirty = np.zeros(len(rows_k), dtype=bool)
    fields: list[str] = []
    for key in _TEXT_KEYS:
        if key in gk:
            hit = _dirty(gk[key], _ESCAPED_RE)
            if hit.any():
                dirty |= hit
                fields.append(key)
                gk[key] = _clean(gk[key])
    for table in (r, s):
        for key in _TEXT_KEYS:
            if key in table:
                table[key] = _clean(table[key])
    if dirty.any():
        book.repair_rows(rows_k[dirty], ",".join(fields), "invalid UTF-8 bytes replaced by U+FFFD")
    book.note("invalid_utf8", f"{replaced} undecodable byte(s) replaced by U+FFFD"
              + (f"; {int(dirty.sum())} kept GPU rows affected ({', '.join(fields)})" if dirty.any()
                 else " (none in a kept GPU row)"))
