"""Baselines kept as Parquet per (pool, architecture, software version), built and checked.

:func:`build_baselines` pools the units of one or more measured bundles and writes, per
(pool, architecture, software version) of their jobs, a folder
``DIR/pool=P/architecture=A/software_version=V/`` with ``jobs.parquet``, ``commits.parquet``,
``steps.parquet`` and ``rank_steps.parquet``, and per pool ``DIR/pool=P/cycles.parquet`` (the
allocation tier's whole demand cycles); ``DIR/baselines.json`` lists them with the contract they
were built under.

:func:`check_baselines` splits a bundle the same way and compares each group with its baseline
(:func:`fleetlib.regress.compare.compare`): the program and runtime tiers per (pool, architecture,
software version), the allocation tier per pool.  A group without a baseline is named, never
compared with another group's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fleetlib.contract import Contract
from fleetlib.quality import InputError
from fleetlib.regress.tiers import rank_step_table

__all__ = ["build_baselines", "check_baselines", "load_baseline", "read_index"]

_GROUP = ("pool", "architecture", "software_version")
_JOB_DROP = ("timeline", "model", "model_name")


#: The longest name part a group's folder takes from the data (a file name holds 255 bytes).
_NAME_CHARS = 64


def _safe(value: Any) -> str:
    """Return a folder-name part for a value from the data: one value, one name; bounded in length.

    A value made only of ``A-Za-z0-9._+-`` and at most :data:`_NAME_CHARS` long is its own name.  Any
    other is cut to a readable stem and followed by ``~`` and 12 hex digits of its SHA-256: two values
    that differ only in a character the stem replaces (``"gpu a"``, ``"gpu_a"``) get two folders, and a
    300-character partition name a name the file system takes.
    """
    text = str(value)
    stem = re.sub(r"[^A-Za-z0-9._+-]", "_", text)
    if stem == text and len(text) <= _NAME_CHARS:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{stem[:_NAME_CHARS - 13]}~{digest}"


def _stack(units_list: Sequence[Any]) -> dict[str, pd.DataFrame]:
    """Pool several bundles' units; job ids prefixed by the bundle's index, cycles renumbered."""
    jobs, commits, steps, ranks, cycles = [], [], [], [], []
    offset = 0
    for i, u in enumerate(units_list):
        prefix = f"b{i}:" if len(units_list) > 1 else ""
        j = u.jobs.drop(columns=[c for c in _JOB_DROP if c in u.jobs.columns]).copy()
        j.index = prefix + j.index.astype(str)
        j["cycle"] = j["cycle"] + offset
        jobs.append(j)
        k = u.commits.copy()
        k["job_id"] = prefix + k["job_id"].astype(str)
        commits.append(k)
        s = u.steps.copy()
        s["job_id"] = prefix + s["job_id"].astype(str)
        steps.append(s)
        r = u.rank_steps if u.rank_steps is not None else rank_step_table(u.rank_timers)
        r = r.copy()
        r["job_id"] = prefix + r["job_id"].astype(str)
        ranks.append(r)
        c = u.cycles.copy()
        c["cycle"] = c["cycle"] + offset
        cycles.append(c)
        offset += int(u.cycles["cycle"].max()) + 1 if len(u.cycles) else 0
    return {
        "jobs": pd.concat(jobs),
        "commits": pd.concat(commits, ignore_index=True),
        "steps": pd.concat(steps, ignore_index=True),
        "rank_steps": pd.concat(ranks, ignore_index=True),
        "cycles": pd.concat(cycles, ignore_index=True),
    }


def build_baselines(units_list: Sequence[Any], out_dir: str | Path) -> dict[str, Any]:
    """Write baselines per (pool, architecture, software version) from measured bundles.

    Parameters
    ----------
    units_list
        :class:`~fleetlib.regress.units.FleetUnits` of the bundles (one cycle length).
    out_dir
        Folder to write (created).

    Returns
    -------
    dict
        ``groups`` (each with its folder, jobs, steps and the units' contract), ``pools``, ``cycle``.

    Raises
    ------
    InputError
        No bundle, or bundles with different cycle lengths.
    """
    if not units_list:
        raise InputError("baseline build needs at least one bundle", field="BUNDLE")
    cycles_len = {str(u.cycle) for u in units_list}
    if len(cycles_len) > 1:
        raise InputError(f"bundles measured with different cycles {sorted(cycles_len)}: measure them "
                         "with one --cycle", field="cycle")
    out = Path(out_dir)
    stacked = _stack(units_list)
    jobs, steps, cycles = stacked["jobs"], stacked["steps"], stacked["cycles"]
    groups = []
    for key, sel in jobs.groupby(list(_GROUP), sort=True):
        pool, arch, ver = (str(k) for k in key)
        folder = (
            out / f"pool={_safe(pool)}" / f"architecture={_safe(arch)}" / f"software_version={_safe(ver)}"
        )
        folder.mkdir(parents=True, exist_ok=True)
        sel.rename_axis("job_id").reset_index().to_parquet(folder / "jobs.parquet", index=False)
        for name in ("commits", "steps", "rank_steps"):
            t = stacked[name]
            t[t["job_id"].isin(sel.index)].to_parquet(folder / f"{name}.parquet", index=False)
        groups.append(
            {
                "pool": pool,
                "architecture": arch,
                "software_version": ver,
                "folder": str(folder.relative_to(out)),
                "jobs": len(sel),
                "steps": int(steps["job_id"].isin(sel.index).sum()),
            }
        )
    pools = []
    for pool, sel in cycles.groupby("pool", sort=True):
        folder = out / f"pool={_safe(pool)}"
        folder.mkdir(parents=True, exist_ok=True)
        sel.to_parquet(folder / "cycles.parquet", index=False)
        pools.append({"pool": str(pool), "cycles": int(sel["cycle"].nunique())})
    contract = units_list[0].contract
    index = {
        "format": _FORMAT,
        "cycle": str(units_list[0].cycle),
        "bundles": [u.name for u in units_list],
        "windows": [u.window.label for u in units_list],
        "contract": {
            "stated": dict(contract.stated),
            "sources": dict(contract.sources),
            "other": dict(contract.other),
        },
        "groups": groups,
        "pools": pools,
    }
    (out / "baselines.json").write_text(json.dumps(index, indent=1, default=str) + "\n", encoding="utf-8")
    return index


_FORMAT = "fleetlib baselines 2"  # 2: checkpoint commits as units, jobs with their submit time
#: JSON's names for the decoded kinds, for messages
_JSON_KINDS: dict[Any, str] = {dict: "an object", list: "an array", str: "text", int: "a number",
                               float: "a number", bool: "true or false"}


def read_index(baselines_dir: str | Path) -> dict[str, Any]:
    """Return a baselines folder's ``baselines.json``, checked: what :func:`load_baseline` reads of it.

    Raises
    ------
    InputError
        No ``baselines.json``; bytes that are not UTF-8 JSON (or past the input limits); another
        ``format``; a field :func:`build_baselines` writes that is missing or of the wrong kind (named
        by its path in the document); a cycle that is no duration; a group folder outside the folder.
    """
    from fleetlib._io import confined, load_json, read_text

    base = Path(baselines_dir)
    index_file = base / "baselines.json"
    if not index_file.is_file():
        raise InputError("not a baselines folder (no baselines.json)", file=str(base))
    file = str(index_file)
    index = load_json(read_text(index_file), file=file)

    def need(value: Any, kind: type, where: str) -> Any:
        if not isinstance(value, kind):
            want = _JSON_KINDS.get(kind, getattr(kind, "__name__", str(kind)))
            shown = "missing" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)
            raise InputError(f"{where} is {shown}; expected {want}, as fleetlib baseline build writes it",
                             file=file, field=None if where == "the document" else where)
        return value

    need(index, dict, "the document")
    if index.get("format") != _FORMAT:
        raise InputError(f"format is {index.get('format')!r}; expected {_FORMAT!r} (a folder written by "
                         "fleetlib baseline build)", file=file, field="format")
    try:
        pd.Timedelta(need(index.get("cycle"), str, "cycle"))
    except ValueError:
        raise InputError(f"cycle {index['cycle']!r} is no duration (e.g. '1D', '2h')", file=file,
                         field="cycle") from None
    for i, w in enumerate(need(index.get("windows"), list, "windows")):
        need(w, str, f"windows[{i}]")
    contract = need(index.get("contract"), dict, "contract")
    for key in ("stated", "sources"):
        need(contract.get(key), dict, f"contract.{key}")
    need(contract.get("other", {}), dict, "contract.other")
    for i, g in enumerate(need(index.get("groups"), list, "groups")):
        need(g, dict, f"groups[{i}]")
        for key in (*_GROUP, "folder"):
            need(g.get(key), str, f"groups[{i}].{key}")
        confined(base, g["folder"], what=f"baseline group folder (groups[{i}].folder)", allow=())
    return index


def _read_parquet(path: Path) -> pd.DataFrame:
    """Read one baseline table; a missing or unreadable file is an :class:`InputError` naming it."""
    try:
        return pd.read_parquet(path)
    except FileNotFoundError:
        raise InputError("missing from the baselines folder (rebuild it with fleetlib baseline build)",
                         file=str(path)) from None
    except Exception as exc:  # pyarrow's errors for a damaged file have no common base
        raise InputError(f"cannot be read as Parquet ({type(exc).__name__}: {exc})", file=str(path)) from None


def load_baseline(baselines_dir: str | Path, pool: str, architecture: str, software_version: str) -> Any:
    """Return a stored baseline group as :class:`~fleetlib.regress.units.FleetUnits` (None if absent).

    Raises
    ------
    InputError
        The folder's index is not one :func:`build_baselines` wrote (:func:`read_index`), or a table
        of the group is missing, unreadable or lacks ``job_id``.
    """
    from fleetlib.accounting import Window
    from fleetlib.regress.units import FleetUnits

    base = Path(baselines_dir)
    index = read_index(base)
    hit = [
        g
        for g in index["groups"]
        if (g["pool"], g["architecture"], g["software_version"])
        == (str(pool), str(architecture), str(software_version))
    ]
    if not hit:
        return None
    folder = base / hit[0]["folder"]
    tables = {
        name: _read_parquet(folder / f"{name}.parquet") for name in ("jobs", "commits", "steps", "rank_steps")
    }
    for name, frame in tables.items():
        if "job_id" not in frame.columns:
            raise InputError("has no job_id column (rebuild the folder with fleetlib baseline build)",
                             file=str(folder / f"{name}.parquet"), field="job_id")
    cyc_file = base / f"pool={_safe(pool)}" / "cycles.parquet"
    cycles = _read_parquet(cyc_file) if cyc_file.is_file() else pd.DataFrame()
    c = index["contract"]
    contract = Contract(stated=c["stated"], sources=c["sources"], other=c.get("other", {})).with_fields(
        {"pool": pool, "architecture": architecture, "software_version": software_version},
        source="baseline group",
    )
    return FleetUnits(
        name=f"baseline {pool} x {architecture} x {software_version}",
        window=Window.nominal("; ".join(index["windows"])),
        contract=contract,
        cycles=cycles,
        jobs=tables["jobs"].set_index("job_id"),
        commits=tables["commits"],
        steps=tables["steps"],
        cycle=pd.Timedelta(index["cycle"]),
        rank_steps=tables["rank_steps"],
    )


def check_baselines(units: Any, baselines_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Compare each (pool, architecture, software version) group of a bundle with its stored baseline.

    Parameters
    ----------
    units
        The bundle's :class:`~fleetlib.regress.units.FleetUnits`.
    baselines_dir
        A folder written by :func:`build_baselines`.
    **kwargs
        Passed to :func:`fleetlib.regress.compare.compare` (``allow_confounded``, ``boot``, ...).

    Returns
    -------
    dict
        ``groups``: per group the comparison (or ``"no baseline"``); ``regressions``: every
        significant regression with its group.
    """
    from fleetlib.regress.compare import compare

    out, regressions = [], []
    for key, sel in units.jobs.groupby(list(_GROUP), sort=True):
        pool, arch, ver = (str(k) for k in key)
        group = {"pool": pool, "architecture": arch, "software_version": ver}
        base = load_baseline(baselines_dir, pool, arch, ver)
        if base is None:
            out.append({**group, "result": "no baseline for this (pool, architecture, software version)"})
            continue
        cand = units.subset(jobs=sel.index, label=f"[{pool} x {arch} x {ver}]", contract=group)
        cand.cycles = units.cycles[units.cycles["pool"] == pool]
        res = compare(base, cand, **kwargs)
        d = res.to_dict()
        out.append({**group, "result": d})
        regressions += [{**group, **v} for v in d["verdicts"] if v["verdict"] == "regression"]
    return {"baselines": str(baselines_dir), "bundle": units.name, "groups": out, "regressions": regressions}
