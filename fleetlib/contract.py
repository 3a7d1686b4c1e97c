"""The measurement contract (chapter Table 2) carried by every measured factor.

A :class:`Contract` holds Table 2's five categories -- workload and correctness, system state,
timing boundary, statistical report, load generation (serving) -- each a fixed list of fields.  A
field is filled only from what someone stated: the manifest's ``contract:`` block, or a record that
carries it (MLPerf ``submission_*`` keys, Kineto ``deviceProperties``, Slurm partition and QOS).
Every other field reads :data:`NOT_STATED` -- never a default.  Each stated field names its source.

:func:`contract_differences` lists the fields two contracts state differently (and the fields only
one of them states), which :mod:`fleetlib.regress.compare` uses to refuse a confounded verdict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fleetlib._io import check_whole_text
from fleetlib.quality import InputError

__all__ = [
    "CATEGORIES",
    "FIELD_ALIASES",
    "NOT_STATED",
    "Contract",
    "contract_differences",
    "contract_from_records",
]

#: What a field nobody stated reads.
NOT_STATED = "not stated"

#: Table 2's five categories and the fields each carries, in report order.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "workload": (
        "model_revision",
        "input_distribution",
        "sequence_length_distribution",
        "global_batch",
        "concurrency",
        "quality_gate",
    ),
    "system_state": (
        "devices",
        "architecture",
        "topology",
        "clocks",
        "power_limit",
        "software_version",
        "compiler_version",
        "driver_version",
        "precision",
        "kernel_version",
        "pool",
        "scheduler_policy",
        "qos",
    ),
    "timing_boundary": (
        "included_setup",
        "device_synchronization",
        "warmup",
        "cold_start",
        "steady_state",
    ),
    "statistical_report": (
        "factor",
        "denominator",
        "window",
        "trial_count",
        "central_value",
        "dispersion",
        "step_time_percentiles",
    ),
    "load_generation": ("load_generation",),
}
#: Other spellings accepted in a manifest's ``contract:`` block.
FIELD_ALIASES: dict[str, str] = {
    "model": "model_revision",
    "batch": "global_batch",
    "global_batch_size": "global_batch",
    "framework_version": "software_version",
    "software": "software_version",
    "compiler": "compiler_version",
    "driver": "driver_version",
    "kernels": "kernel_version",
    "device": "architecture",
    "accelerator": "architecture",
    "partition": "pool",
    "policy": "scheduler_policy",
}
_CATEGORY_OF = {f: c for c, fields in CATEGORIES.items() for f in fields}
#: Fields that describe the measurement itself, not what it held fixed (never a confounder).
_REPORT_FIELDS = set(CATEGORIES["statistical_report"])


def _plain(value: Any) -> Any:
    """Return a JSON-ready, comparable form of a stated value (lists sorted, numbers plain)."""
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, (list, tuple, set)):
        items = [_plain(v) for v in value]
        try:
            items = sorted(set(items)) if all(isinstance(v, (str, int, float)) for v in items) else items
        except TypeError:
            pass
        return items[0] if len(items) == 1 else items
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Contract:
    """Table 2's measurement contract: stated fields with their sources; everything else not stated.

    Attributes
    ----------
    stated
        ``{field: value}`` for every stated field of :data:`CATEGORIES`.
    sources
        ``{field: where it was stated}`` (``"manifest"``, or a record file and key).
    other
        Manifest ``contract:`` keys that are not Table 2 fields (e.g. ``program_ceiling``), kept as given.
    conflicts
        Fields a record states differently from the manifest (the manifest's value is kept).
    """

    stated: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)
    conflicts: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, *, source: str = "manifest") -> Contract:
        """Read a manifest's ``contract:`` block: flat field names, aliases, or nested by category.

        Parameters
        ----------
        mapping
            The block (None or empty: nothing stated).
        source
            What to name as each field's source.

        Returns
        -------
        Contract
            Table 2 fields found; keys that are not Table 2 fields are kept in :attr:`other`.
        """
        stated: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for key, value in (mapping or {}).items():
            name = FIELD_ALIASES.get(str(key), str(key))
            if name == "jobs" and isinstance(value, Mapping):
                other["jobs"] = f"{len(value)} jobs state their own fields (contract.jobs)"
            elif name in CATEGORIES and isinstance(value, Mapping):
                for sub, v in value.items():
                    sub_name = FIELD_ALIASES.get(str(sub), str(sub))
                    (stated if sub_name in _CATEGORY_OF else other)[sub_name] = _plain(v)
            elif name in _CATEGORY_OF:
                stated[name] = _plain(value)
            else:
                other[str(key)] = _plain(value)
        stated = {k: v for k, v in stated.items() if v is not None and v != ""}
        return cls(stated=stated, sources=dict.fromkeys(stated, source), other=other)

    def get(self, name: str) -> Any:
        """Return a field's value, or :data:`NOT_STATED`."""
        return self.stated.get(FIELD_ALIASES.get(name, name), NOT_STATED)

    def merged(self, records: Contract) -> Contract:
        """Return this contract with the fields ``records`` states and this one does not.

        A field both state differently keeps this contract's value and is listed in :attr:`conflicts`.
        """
        stated, sources = dict(self.stated), dict(self.sources)
        conflicts = list(self.conflicts)
        for k, v in records.stated.items():
            if k not in stated:
                stated[k], sources[k] = v, records.sources.get(k, "records")
            elif stated[k] != v:
                conflicts.append(
                    f"{k}: {sources.get(k)} states {stated[k]!r}, {records.sources.get(k)} {v!r}"
                )
        return Contract(stated, sources, dict(self.other), tuple(conflicts))

    def with_fields(self, values: Mapping[str, Any], *, source: str) -> Contract:
        """Return a copy with ``values`` stated (replacing earlier values), each from ``source``."""
        stated, sources = dict(self.stated), dict(self.sources)
        for k, v in values.items():
            if v is not None:
                stated[k], sources[k] = _plain(v), source
        return Contract(stated, sources, dict(self.other), self.conflicts)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{category: {field: value or "not stated"}}``, ``sources``, ``other``, ``conflicts``."""
        out: dict[str, Any] = {
            cat: {f: self.stated.get(f, NOT_STATED) for f in fields} for cat, fields in CATEGORIES.items()
        }
        out["sources"] = {k: self.sources[k] for k in sorted(self.sources)}
        if self.other:
            out["other"] = dict(self.other)
        if self.conflicts:
            out["conflicts"] = list(self.conflicts)
        return out


def contract_differences(
    baseline: Contract, candidate: Contract, *, under_test: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """Fields (other than the statistical report's) two contracts state differently.

    Parameters
    ----------
    baseline, candidate
        The two contracts.
    under_test
        Fields the comparison is about (listed with ``under_test=True``; never a confounder).

    Returns
    -------
    list of dict
        ``field``, ``category``, ``baseline``, ``candidate``, ``kind`` (``"differs"``: both state it
        differently -- a confounder unless under test; ``"stated_once"``: only one states it, so it
        cannot be checked), ``under_test``.
    """
    tested = {FIELD_ALIASES.get(f, f) for f in under_test}
    out = []
    for cat, fields in CATEGORIES.items():
        for f in fields:
            if f in _REPORT_FIELDS:
                continue
            a, b = baseline.get(f), candidate.get(f)
            if a == b:
                continue
            kind = "stated_once" if NOT_STATED in (a, b) else "differs"
            out.append(
                {
                    "field": f,
                    "category": cat,
                    "baseline": a,
                    "candidate": b,
                    "kind": kind,
                    "under_test": f in tested,
                }
            )
    return out


# ---------------------------------------------------------------------------------------------------
# Fields the records carry
# ---------------------------------------------------------------------------------------------------

_MLLOG = re.compile(r":::MLLOG\s+(\{.*\})\s*$")
_MLPERF_KEYS = {
    "submission_benchmark": "model_revision",
    "submission_platform": "architecture",
    "submission_division": "quality_gate",
    "submission_org": None,
    "submission_status": None,
    "global_batch_size": "global_batch",
}


def _mlperf_fields(path: Path) -> dict[str, Any]:
    from fleetlib._io import read_text

    found: dict[str, Any] = {}
    for line in read_text(path).splitlines():
        at = line.find(":::MLLOG")
        if at < 0:
            continue
        m = _MLLOG.search(line[at:])
        if not m:
            continue
        try:
            rec = json.loads(m.group(1))
            check_whole_text(rec, m.group(1), file=str(path))
        except (json.JSONDecodeError, RecursionError, InputError):
            continue  # not a record the MLPerf reader keeps either (it rejects the line)
        key = rec.get("key") if isinstance(rec, dict) else None
        if key in _MLPERF_KEYS and key not in found:
            found[key] = rec.get("value")
    out: dict[str, Any] = {}
    for key, name in _MLPERF_KEYS.items():
        if name is not None and key in found:
            value = found[key]
            out[name] = f"MLPerf division {value}" if key == "submission_division" else value
    return out


def _kineto_fields(path: Path) -> dict[str, Any]:
    from fleetlib._io import clean_text, json_depth_rows, nesting_message, read_text

    text = read_text(path)
    deep = json_depth_rows(text)
    if len(deep):
        raise InputError(nesting_message(), file=str(path), row=int(deep[0]))
    try:
        top = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg}", file=str(path), row=exc.lineno) from exc
    props = top.get("deviceProperties") if isinstance(top, dict) else None
    if not isinstance(props, list) or not props:
        return {}
    names = sorted(
        {
            clean_text(str(p["name"]))  # the trace reader's own U+FFFD repair
            + (
                f" (sm_{p['computeMajor']}{p['computeMinor']})"
                if "computeMajor" in p and "computeMinor" in p
                else ""
            )
            for p in props
            if isinstance(p, dict) and p.get("name")
        }
    )
    return {"architecture": names} if names else {}


def _slurm_fields(path: Path) -> dict[str, Any]:
    from fleetlib._io import read_text

    lines = read_text(path).split("\n")
    head = lines[0].split("|")
    out: dict[str, Any] = {}
    for col, name in (("Partition", "pool"), ("QOS", "qos")):
        if col not in head:
            continue
        # sacct quotes nothing: a field is the text between two '|' (a leading '"' is a character)
        at = head.index(col)
        fields = (line.split("|") for line in lines[1:])
        vals = sorted({f[at].strip() for f in fields if len(f) == len(head)} - {""})
        if vals:
            out[name] = vals
    return out


def contract_from_records(
    *,
    scheduler_files: Sequence[Path] = (),
    scheduler_format: str = "",
    timeline_files: Sequence[Path] = (),
    timeline_format: str = "",
    trace_files: Sequence[Path] = (),
    relative: Any = str,
) -> Contract:
    """Return the contract fields the records themselves carry.

    Parameters
    ----------
    scheduler_files, scheduler_format
        Slurm ``sacct`` text: the ``Partition`` (pool) and ``QOS`` columns (other formats: nothing).
    timeline_files, timeline_format
        MLPerf result logs: ``submission_benchmark`` (model revision), ``submission_platform``
        (architecture), ``submission_division`` (the quality gate's rules), ``global_batch_size``.
    trace_files
        Kineto traces: ``deviceProperties`` (device names with their compute capability).
    relative
        Turns a path into the text named as the source.

    Returns
    -------
    Contract
        Each field found, its source the first file that carries it.
    """
    found: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def add(values: Mapping[str, Any], path: Path, what: str) -> None:
        for k, v in values.items():
            if k not in found:
                found[k], sources[k] = v, f"{relative(path)} ({what})"
            elif found[k] != v:  # several files: the union of what they state
                merged = set(found[k] if isinstance(found[k], list) else [found[k]])
                merged |= set(v if isinstance(v, list) else [v])
                found[k] = sorted(merged, key=str)

    if scheduler_format == "slurm":
        for p in scheduler_files:
            name = str(p).rsplit("/", 1)[-1]  # a path or a URL
            if name.startswith("sacct") and "events" not in name:
                add(_slurm_fields(p), p, "Slurm Partition/QOS")
    if timeline_format == "mlperf":
        for p in timeline_files:
            add(_mlperf_fields(p), p, "MLPerf submission_*")
    for p in trace_files:
        add(_kineto_fields(p), p, "Kineto deviceProperties")
    stated = {k: _plain(v) for k, v in found.items()}
    return Contract(stated=stated, sources=sources)
