"""Per-process memos of what repeats from rank file to rank file: one answer per distinct value.

The ranks of a job launch the same kernels, call the same runtime functions and write the same
category names, so a value-by-value rule (a pattern search, a dtype lookup) is worth computing once
per distinct value and process, not once per file.  Each memo is a bounded dictionary (cleared when
full); a value that is not text is never memoised and takes the rule itself, so the answers are the
rule's answers exactly.  Also the categorical dtypes of the tables' text columns: the ranks of a job
share their sets of names, and one dtype object serves every file with the same set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from fleetlib.program.classify import (
    Classifier,
    collective_from_annotation,
    collective_from_arg,
    host_sync_kinds,
    is_graph_launch,
)
from fleetlib.program.readers._identity import factorize_text

try:  # pandas' hash tables for objects and text (what pd.factorize runs on them), without its dispatch
    from pandas._libs.hashtable import PyObjectHashTable, StringHashTable
    from pandas._libs.lib import is_string_array
except ImportError:  # pragma: no cover - every supported pandas has them
    PyObjectHashTable = StringHashTable = is_string_array = None

_LIMIT = 200_000  # distinct values kept per memo before it starts over
_MEMOS: dict[tuple[str, str], dict[str, Any]] = {}


def memo(kind: str, key: str = "") -> dict[str, Any]:
    """Return the memo of one rule (``kind``) under one configuration (``key``, e.g. a fingerprint)."""
    table = _MEMOS.get((kind, key))
    if table is None:
        table = _MEMOS[(kind, key)] = {}
    return table


#: Up to this many values, text that is not an object array is factorised by a dictionary (object
#: arrays go straight to pandas' hash tables, without ``pd.factorize``'s dispatch).
_SMALL = 4096
_TEXT_OR_NONE = frozenset({str, type(None)})
#: From this many values on, text is factorised by identity first (a fifth of the dictionary's time
#: on a rank file's 2,500 event names; a quarter of pandas' on a large file's pieces).
_BY_IDENTITY = 512


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values, use_na_sentinel=True)`` of an object array, uniques as objects.

    Codes number the distinct values in order of first appearance; a missing value is -1.  Arrays
    of only text and None are factorised by the objects they point at, then by value
    (:func:`~fleetlib.program.readers._identity.factorize_text`) from :data:`_BY_IDENTITY` values
    on; anything else by the hash table ``pd.factorize`` would use (:func:`factorize_by_value`).

    Raises
    ------
    TypeError
        A value is unhashable (as ``pd.factorize`` raises).
    """
    if len(values) >= _BY_IDENTITY and isinstance(values, np.ndarray):
        found = factorize_text(values)
        if found is not None:
            return found
    return factorize_by_value(values)


#: Text longer than this (a sample of a column) is hashed as Python objects, not as UTF-8 bytes.
_SHORT_TEXT = 48


def _short_text(values: np.ndarray) -> bool:
    """Whether pandas' text table is the faster one: every value text, the sampled ones short.

    The text table hashes each value's UTF-8 bytes (a seventh of the object table's time on a
    column of phases, fresh from the decoder); the object table uses the hash a string keeps once
    computed, so on long names already hashed (the kernels', 350 characters on average) it takes
    a tenth of the text table's time.  Both give the same codes: the choice is only the speed.
    """
    n = len(values)
    if not is_string_array(values, skipna=False):
        return False
    return max(len(values[0]), len(values[n // 2]), len(values[-1])) <= _SHORT_TEXT


def factorize_by_value(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`factorize` without the identity pass: for values that are seldom one object each.

    Each decoded event holds its own string objects, so a column straight from the decoder has
    about as many objects as rows; :func:`~fleetlib.program.readers._columns._shared` factorises
    those by value (and makes equal values one object for every later :func:`factorize`).
    """
    if StringHashTable is not None and isinstance(values, np.ndarray) and values.dtype == object \
            and values.ndim == 1:
        # what pd.factorize(values, use_na_sentinel=True) runs on an object array, without its
        # dispatch (about 20 µs a call); both tables number values alike (None and NaN missing)
        table = StringHashTable if _short_text(values) else PyObjectHashTable
        uniques, codes = table(len(values)).factorize(values)
        return codes, uniques
    if len(values) <= _SMALL:
        items = values.tolist()
        if set(map(type, items)) <= _TEXT_OR_NONE:
            seen: dict[Any, int] = {None: -1}
            number = seen.setdefault
            codes = np.fromiter([number(v, len(seen) - 1) for v in items], dtype=np.intp, count=len(items))
            del seen[None]
            return codes, np.fromiter(seen, dtype=object, count=len(seen))
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    return codes, np.asarray(uniques, dtype=object)


def text_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values, use_na_sentinel=False)``: by :func:`factorize` for text.

    Without missing values the two number the values alike; anything else goes to pandas.
    """
    found = factorize(np.asarray(values, dtype=object))
    if (found[0] >= 0).all():
        return found
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return codes, np.asarray(uniques, dtype=object)


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Return (codes, distinct values) of an object array (code -1 for a missing value), or None.

    None when a value is unhashable (a malformed trace): the caller applies its rule as it is.
    """
    try:
        return factorize(values)
    except TypeError:
        return None


def per_distinct(uniques: np.ndarray, rule: Callable[[np.ndarray], Any], table: dict[str, Any]) -> list[Any]:
    """Answers of ``rule`` (a vectorised function of an object array) for each distinct text value.

    Values found in ``table`` are not computed again; the others are computed in one call of
    ``rule`` and remembered.  ``uniques`` must all be text (see :func:`all_text`).
    """
    keys = uniques.tolist()
    found = [table.get(k, _ABSENT) for k in keys]  # a local copy: another thread may clear the memo
    new = [i for i, v in enumerate(found) if v is _ABSENT]
    if new:
        if len(table) + len(new) > _LIMIT:
            table.clear()
        answers = rule(uniques[new])
        for i, answer in zip(new, answers, strict=True):
            found[i] = table[keys[i]] = answer
    return found


def all_text(uniques: np.ndarray) -> bool:
    """Whether every distinct value is a ``str`` (only text values are memoised)."""
    return all(type(u) is str for u in uniques.tolist())


def broadcast(codes: np.ndarray, per: list[Any], missing: Any, dtype: Any = object) -> np.ndarray:
    """Spread per-distinct answers over the rows (``missing`` where the code is -1)."""
    table = np.empty(len(per) + 1, dtype=dtype)
    table[:len(per)] = per
    table[-1] = missing
    return table[codes]  # code -1 indexes the last entry: the missing value


def mapped(values: np.ndarray, rule: Callable[[np.ndarray], Any], kind: str, key: str = "",
           missing: Any = None) -> np.ndarray | None:
    """``rule(values)`` computed once per distinct text value and process (object array).

    ``missing`` is what ``rule`` answers for a missing value.  None (the caller applies ``rule``
    itself) where a value is unhashable or not text.
    """
    found = _answers(values, rule, kind, key)
    return None if found is None else broadcast(found[0], found[1], missing)


def _answers(values: np.ndarray, rule: Callable[[np.ndarray], Any], kind: str,
             key: str) -> tuple[np.ndarray, list[Any]] | None:
    """(codes, the answer per distinct value) of a memoised rule; None as for :func:`mapped`."""
    found = distinct(np.asarray(values, dtype=object))
    if found is None or not all_text(found[1]):
        return None
    codes, uniques = found
    return codes, per_distinct(uniques, rule, memo(kind, key))


class _Absent:
    __slots__ = ()


_ABSENT = _Absent()

#: Sorted distinct names -> the categorical dtype of a text column with exactly those categories.
_DTYPES: dict[tuple[str, ...], pd.CategoricalDtype] = {}
_DTYPE_LIMIT = 4_096


def text_dtype(categories: np.ndarray) -> pd.CategoricalDtype:
    """Return the categorical dtype with these (sorted, distinct, text) categories, built once.

    Equal to ``pd.CategoricalDtype(pd.Index(categories, dtype="str"))``; the ranks of a job share
    their sets of names, so the second and later files reuse the dtype instead of building its
    categories' index again.
    """
    key = tuple(categories.tolist())
    dtype = _DTYPES.get(key)
    if dtype is None:
        cats = pd.Index(categories, dtype="str")
        fast = getattr(pd.CategoricalDtype, "_from_fastpath", None)  # distinct by construction
        dtype = fast(cats, False) if fast else pd.CategoricalDtype(cats)
        if len(_DTYPES) >= _DTYPE_LIMIT:
            _DTYPES.clear()
        _DTYPES[key] = dtype
    return dtype


# ---------------------------------------------------------------------------------------------------
# The classification rules the Kineto reader applies per name, memoised
# ---------------------------------------------------------------------------------------------------

def comm_rules(classifier: Classifier, names: np.ndarray) -> np.ndarray:
    """:meth:`Classifier.comm_rules`, each distinct name searched once per process and classifier."""
    out = mapped(names, classifier.comm_rules, "comm_rule", classifier.fingerprint(), "")
    return classifier.comm_rules(names) if out is None else out


def sync_kinds(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~fleetlib.program.classify.host_sync_kinds`, once per distinct runtime call name."""
    found = _answers(names, lambda u: list(zip(*host_sync_kinds(u), strict=True)), "host_sync", "")
    if found is None:
        return host_sync_kinds(names)
    codes, per = found
    return (broadcast(codes, [k for k, _ in per], None),
            broadcast(codes, [b for _, b in per], False, dtype=bool))


def graph_launches(names: np.ndarray) -> np.ndarray:
    """:func:`~fleetlib.program.classify.is_graph_launch`, once per distinct runtime call name."""
    out = mapped(names, is_graph_launch, "graph_launch", "", False)
    return is_graph_launch(names) if out is None else out.astype(bool)


def collectives_from_arg(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~fleetlib.program.classify.collective_from_arg`, once per distinct value."""
    found = _answers(values, lambda u: list(zip(*collective_from_arg(u), strict=True)), "collective_arg", "")
    if found is None:
        return collective_from_arg(values)
    codes, per = found
    return (broadcast(codes, [c for c, _ in per], "none"),
            broadcast(codes, [r for _, r in per], False, dtype=bool))


#: Categories of a fixed categorical dtype -> {category: code} (the kinds, collectives, sources).
_CODES: dict[tuple[str, ...], dict[str, int]] = {}


def fixed_codes(values: np.ndarray, dtype: pd.CategoricalDtype) -> np.ndarray:
    """``dtype.categories.get_indexer(values)`` by a dictionary per distinct value (-1: not a category)."""
    found = distinct(np.asarray(values, dtype=object))
    if found is None or not all_text(found[1]):
        return dtype.categories.get_indexer(values)
    codes, uniques = found
    key = tuple(dtype.categories.tolist())
    lookup = _CODES.get(key)
    if lookup is None:
        if len(_CODES) >= _DTYPE_LIMIT:
            _CODES.clear()
        lookup = _CODES[key] = {c: i for i, c in enumerate(key)}
    per = [lookup.get(u, -1) for u in uniques.tolist()]
    return broadcast(codes, per, -1, dtype=np.int64)


#: Distinct text values in order of first appearance -> (their sorted categorical dtype, the code
#: of each in it).  The rank files of a job name the same kernels in much the same order.
_ORDERS: dict[tuple[str, ...], tuple[pd.CategoricalDtype, np.ndarray]] = {}


def text_categorical(values: np.ndarray) -> pd.Categorical | None:
    """``pd.Categorical(values)`` for text values (categories sorted), or None for other values.

    The values are hashed once (no sort); the sort of the distinct values, and their dtype, are
    done once per process and order of first appearance.
    """
    found = distinct(np.asarray(values, dtype=object))
    if found is None:
        return None
    codes, uniques = found
    if (codes < 0).any() or not all_text(uniques):
        return None
    key = tuple(uniques.tolist())
    hit = _ORDERS.get(key)
    if hit is None:
        order = np.argsort(uniques, kind="stable")  # Python's str ordering, as pd.factorize(sort=True)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        if len(_ORDERS) >= _DTYPE_LIMIT:
            _ORDERS.clear()
        hit = _ORDERS[key] = (text_dtype(uniques[order]), rank)
    dtype, rank = hit
    return pd.Categorical.from_codes(rank[codes], dtype=dtype, validate=False)


def collectives_from_annotation(names: np.ndarray) -> np.ndarray:
    """:func:`~fleetlib.program.classify.collective_from_annotation`, once per distinct name."""
    out = mapped(names, collective_from_annotation, "collective_annotation", "", "none")
    return collective_from_annotation(names) if out is None else out
