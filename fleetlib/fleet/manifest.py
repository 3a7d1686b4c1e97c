"""The fleet bundle's manifest (``fleet.yaml``): load, validate, resolve every path inside its folder.

A fleet bundle is one fleet, one window and three records joined by job id -- a folder with a
``fleet.yaml``::

    name: text
    window: ["2024-05-01T00:00:00Z", "2024-05-02T00:00:00Z"]   # ISO 8601 with a zone (or "START/END")
    exclude: [["2024-05-01T06:00:00Z", "2024-05-01T08:00:00Z"]]  # optional: stretches left out
    scheduler: {format: slurm, files: [scheduler/sacct.txt, ...], tz: UTC}
    timelines: {format: canonical, files: [timelines/70001.parquet, ...]}
    job_map: {timeline_job_id: scheduler_job_id}   # optional, when the ids differ
    models: {"70001": models/70001.yaml}           # fleetlib.program model configs (or {file: TABLE})
    traces: {"70001": [traces/70001/]}             # optional, sampled ranks / steps (or {file: TABLE})
    rank_timers: {files: [...]}                    # optional, always-on per-rank step timers
    price_per_device_hour: 2.0                     # optional
    contract: {...}                                # free-form for now

``exclude:`` lists stretches of the window left out of every factor's numerator and denominator
(maintenance, an incident), each ``[start, end]``, ``{start: ..., end: ...}`` or ``"START/END"``
(:func:`fleetlib.accounting.parse_exclusions`); overlapping exclusions are refused, and with a
``window:`` each must lie inside it.  :func:`fleetlib.fleet.measure_fleet` applies them to the
window it measures (cut to it when a ``window=`` override is narrower); its ``exclude=`` replaces
them.

Every path is relative to the manifest's folder and must stay inside it
(:func:`fleetlib._io.confined`); a named file must exist.  Any problem is one
:class:`~fleetlib.quality.InputError` naming the manifest file and the key.

**A bundle in object storage.**  The manifest may be an fsspec URL (``s3://bucket/prefix/fleet.yaml``,
``file:///...``); its paths then resolve under the manifest's own prefix (or an ``--allow-path``
URL prefix; :func:`fleetlib._io.url_confined`) and stay URLs, read through fsspec by whichever
process reads them (a Dask worker, for the walk's tasks).  Credentials come from the environment or
fsspec's configuration, never from the manifest.

**The table form of** ``models:`` **and** ``traces:`` (large fleets).  A fleet of 200,000 jobs would
put 200,000 YAML entries in ``fleet.yaml``; instead the key may name one table::

    models: {file: models.csv}     # columns job_id, model: one row per job
    traces: {file: traces.csv}     # columns job_id, path: one row per trace file or folder

A table is CSV (gzip by its bytes allowed) or Parquet (``.parquet``/``.pq`` or its magic bytes),
read whole and bounded like any input; its column names are matched without case or surrounding
space.  Cells are text, kept exactly as written (``007`` stays ``007``; Parquet whole-number job ids
are taken as their digits).  The paths in it are relative to the manifest's folder, as every path
of the manifest, and each distinct path is confined and checked once.  A ``traces`` job may have
several rows (its files in row order); a ``models`` job has one.  The result is the same
:class:`FleetManifest` the mapping form gives.  A mapping whose only key is ``file`` is the table
form, so a job named ``file`` is itself written in a table.  A bad table is one
:class:`~fleetlib.quality.InputError` naming the table file, the 1-based row (the CSV header is row
1) and the column: a missing column, an empty cell, a job given two model configs, a path outside
the folder, a missing file.  A job the bundle has no timeline for is refused by
:func:`fleetlib.fleet.measure_fleet`, as for the mapping form.
"""

from __future__ import annotations

import datetime as _dt
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from fleetlib._io import (
    confined,
    current_limits,
    excerpt,
    is_url,
    link_note,
    load_yaml,
    read_bytes,
    read_text,
    url_confined,
    url_kind,
)
from fleetlib.accounting import Window, parse_exclusions
from fleetlib.quality import DomainError, InputError

__all__ = ["MANIFEST_KEYS", "SCHEDULER_FORMATS", "SERVING_KEYS", "TABLE_COLUMNS", "TIMELINE_FORMATS",
           "FleetManifest", "ServingManifest", "load_manifest"]

#: Keys a manifest may have (any other is refused, so a misspelt key is never silently ignored).
MANIFEST_KEYS: tuple[str, ...] = (
    "name",
    "window",
    "exclude",
    "scheduler",
    "timelines",
    "job_map",
    "models",
    "traces",
    "rank_timers",
    "price_per_device_hour",
    "contract",
    "serving",
)

#: Keys of the optional ``serving:`` section (all required when the section is there).
SERVING_KEYS: tuple[str, ...] = ("scheduler", "lifecycle", "decode_steps", "model")
#: Scheduler record formats a manifest may name (readers of :mod:`fleetlib.scheduling.readers`).
SCHEDULER_FORMATS: tuple[str, ...] = ("slurm", "kueue", "volcano", "helios-sequence", "canonical")
#: Timeline formats a manifest may name (readers of :mod:`fleetlib.runtime.readers`).
TIMELINE_FORMATS: tuple[str, ...] = ("canonical", "mlgoodput", "mlperf")


@dataclass(frozen=True)
class ServingManifest:
    """The ``serving:`` section of a manifest: a serving pool, measured apart from the training fleet.

    Its scheduler records are files of their own, so the training walk never reads them; the serving
    page (:func:`fleetlib.fleet.measure_serving`) measures S from them, R from the replica lifecycle log
    and P as MBU of the measured decode steps against the served model's bandwidth floor.

    Attributes
    ----------
    scheduler_format, scheduler_files, scheduler_tz
        The serving pool's allocations (scheduler records, any format of :data:`SCHEDULER_FORMATS`).
    lifecycle
        The replica lifecycle log (``time, replica_id, phase`` CSV: the runtime rung's ``serving`` reader).
    decode_steps
        Measured decode steps (``replica_id, step_us`` CSV).
    model
        The served model (YAML: ``accelerator``, ``n_params``, ``bytes_per_param``, ``devices``,
        ``kv_cache_bytes``; optional ``name``).
    """

    scheduler_format: str
    scheduler_files: tuple[Path, ...]
    scheduler_tz: str | None
    lifecycle: Path
    decode_steps: Path
    model: Path


@dataclass(frozen=True)
class FleetManifest:
    """A validated fleet manifest; every path absolute and inside :attr:`folder`.

    Attributes
    ----------
    file, folder
        The manifest and the folder its paths are relative to (for a manifest in object storage,
        its URL and its URL prefix; every path is then a URL string).
    name
        The bundle's name.
    window
        The calendar window (None: the scheduler records' span), without exclusions.
    exclude
        The ``exclude:`` stretches as UTC ``(start, end)`` pairs, sorted (inside :attr:`window` when
        there is one).
    serving
        The optional serving pool (:class:`ServingManifest`), or None.
    scheduler_format, scheduler_files, scheduler_tz
        The scheduler records.
    timeline_format, timeline_files
        The job timelines (job ids are the scheduler's, or mapped by :attr:`job_map`).
    job_map
        ``{timeline job id: scheduler job id}``.
    models
        ``{scheduler job id: model config path}`` (from the mapping or the table form).
    traces
        ``{scheduler job id: [trace files or folders]}`` (from the mapping or the table form).
    rank_timer_files
        Optional per-rank step timers (read by nothing yet; listed in the result).
    price_per_device_hour
        Price of one in-service device-hour, or None.
    contract
        Free-form measurement contract.
    """

    file: Path
    folder: Path
    name: str
    window: Window | None
    scheduler_format: str
    scheduler_files: tuple[Path, ...]
    scheduler_tz: str | None
    timeline_format: str
    timeline_files: tuple[Path, ...]
    job_map: Mapping[str, str] = field(default_factory=dict)
    models: Mapping[str, Path] = field(default_factory=dict)
    traces: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    rank_timer_files: tuple[Path, ...] = ()
    price_per_device_hour: float | None = None
    contract: Mapping[str, Any] = field(default_factory=dict)
    exclude: tuple[tuple[pd.Timestamp, pd.Timestamp], ...] = ()
    serving: ServingManifest | None = None

    def relative(self, path: Path | str) -> str:
        """Return ``path`` relative to the bundle folder (for reports)."""
        if isinstance(path, str) or isinstance(self.folder, str):
            prefix = str(self.folder).rstrip("/") + "/"
            return str(path)[len(prefix):] if str(path).startswith(prefix) else str(path)
        try:
            return str(Path(path).relative_to(self.folder))
        except ValueError:
            return str(path)

    def to_dict(self) -> dict[str, Any]:
        """Return the manifest as a JSON-ready dictionary (paths relative to the folder)."""
        out: dict[str, Any] = {
            "file": str(self.file),
            "name": self.name,
            "window": None if self.window is None else self.window.to_dict(),
            "exclude": [{"start": a.isoformat(), "end": b.isoformat()} for a, b in self.exclude],
            "scheduler": {
                "format": self.scheduler_format,
                "tz": self.scheduler_tz,
                "files": [self.relative(p) for p in self.scheduler_files],
            },
            "timelines": {
                "format": self.timeline_format,
                "files": [self.relative(p) for p in self.timeline_files],
            },
            "job_map": dict(self.job_map),
            "models": {k: self.relative(v) for k, v in self.models.items()},
            "traces": {k: [self.relative(p) for p in v] for k, v in self.traces.items()},
            "rank_timers": [self.relative(p) for p in self.rank_timer_files],
            "price_per_device_hour": self.price_per_device_hour,
            "contract": dict(self.contract),
        }
        if self.serving is not None:
            sv = self.serving
            out["serving"] = {
                "scheduler": {"format": sv.scheduler_format, "tz": sv.scheduler_tz,
                              "files": [self.relative(p) for p in sv.scheduler_files]},
                **{key: self.relative(getattr(sv, key)) for key in SERVING_KEYS[1:]},
            }
        return out


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML without timestamp conversion: windows stay text and are parsed by Window.parse.

    libyaml's parser when PyYAML has it (a fleet-scale manifest maps 200,000 jobs to model configs).
    """


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


#: A manifest is a page of names; anything larger is not one.
_MAX_MANIFEST_BYTES = 16 * 1024**2


def _err(file: Path, key: str, message: str) -> InputError:
    return InputError(message, file=str(file), field=key)


def _mapping(data: Any, file: Path, key: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise _err(file, key, f"must be a mapping; got {type(data).__name__}")
    return data


def _path(
    folder: Path, file: Path, key: str, name: Any, *, must_exist: bool = True, folder_ok: bool = False
) -> Path:
    if not isinstance(name, str) or not name.strip():
        raise _err(file, key, f"a path must be non-empty text; got {excerpt(name)}")
    if is_url(folder):
        return _url_path(folder, file, key, name, must_exist=must_exist, folder_ok=folder_ok)
    try:
        p = confined(folder, name, what=f"{key} path")
    except InputError as exc:
        raise _err(
            file,
            key,
            f"path {excerpt(name, 80)} lies outside the manifest's folder {folder}{link_note(folder, name)} "
            "(only paths inside the bundle are read, unless --allow-path names another folder)",
        ) from exc
    if must_exist and not p.exists():
        raise _err(file, key, f"names a missing file {name!r} (resolved to {p})")
    if p.is_dir() and not folder_ok:
        raise _err(file, key, f"names a folder {name!r}; give the file")
    return p


def _url_path(folder: str, file: Path | str, key: str, name: str, *, must_exist: bool,
              folder_ok: bool) -> Any:
    """Return a path of a manifest in object storage: a URL under the manifest's prefix, checked."""
    try:
        url = url_confined(folder, name, what=f"{key} path")
    except InputError as exc:
        raise _err(file, key, f"path {excerpt(name, 80)} lies outside the manifest's prefix {folder} (only "
                   "paths under the bundle's prefix are read, unless --allow-path names another)") from exc
    kind = url_kind(url)
    if must_exist and kind is None:
        raise _err(file, key, f"names a missing file {name!r} (resolved to {url})")
    if kind == "directory" and not folder_ok:
        raise _err(file, key, f"names a folder {name!r}; give the file")
    return url


def _files(folder: Path, file: Path, key: str, value: Any, *, folder_ok: bool = False) -> tuple[Path, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise _err(file, key, f"must be a non-empty list of paths; got {value!r}")
    return tuple(_path(folder, file, key, v, folder_ok=folder_ok) for v in value)


def _job_key(file: Path, key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _err(file, key, f"job ids are text or whole numbers; got {value!r}")
    return str(value)


def load_manifest(path: str | Path) -> FleetManifest:
    """Read and check a fleet manifest (``fleet.yaml``).

    Parameters
    ----------
    path
        The manifest file, or the bundle folder holding ``fleet.yaml``.

    Returns
    -------
    FleetManifest
        The manifest with every path resolved inside the manifest's folder.

    Raises
    ------
    InputError
        A missing or unreadable manifest, invalid YAML, an unknown or missing key, a value of the
        wrong shape, a window without a zone, a path outside the folder, a missing file -- one line
        naming the manifest file and the key; a bad ``models:``/``traces:`` table -- one line naming
        the table file, its row and column.
    """
    file: Any
    if is_url(path):  # a bundle in object storage: its paths stay URLs under the manifest's prefix
        file = str(path)
        if url_kind(file) == "directory":
            file = file.rstrip("/") + "/fleet.yaml"
        found = url_kind(file) == "file"
        folder: Any = file.rsplit("/", 1)[0]
    else:
        file = Path(path)
        if file.is_dir():
            file = file / "fleet.yaml"
        found = file.is_file()
        folder = file.resolve().parent if found else None
    if not found:
        raise InputError(
            "fleet manifest not found (give fleet.yaml or the bundle folder holding it)", file=str(file)
        )
    # regular file, bounded, UTF-8 with the line of a bad byte; YAML bounded in depth and aliases
    try:
        text = read_text(file, max_bytes=min(current_limits().max_bytes, _MAX_MANIFEST_BYTES))
    except InputError as exc:
        why = str(exc).split(": ", 1)[-1] if exc.file is not None else str(exc)
        raise InputError(f"cannot read the fleet manifest ({why})", file=str(file), row=exc.row) from None
    data = load_yaml(text, file=str(file), loader=_Loader)
    data = _mapping(data, file, "<manifest>")
    unknown = sorted(str(k) for k in data if k not in MANIFEST_KEYS)
    if unknown:
        raise _err(file, unknown[0], f"unknown key(s) {unknown}; allowed: {list(MANIFEST_KEYS)}")
    for key in ("scheduler", "timelines"):
        if data.get(key) is None:
            raise _err(file, key, "is required")
    window = _window(data.get("window"), file)
    exclude = _exclude(data.get("exclude"), file, window)
    fmt, sched_files, tz = _scheduler_section(folder, file, "scheduler", data["scheduler"])
    tl = _mapping(data["timelines"], file, "timelines")
    tfmt = tl.get("format")
    if tfmt not in TIMELINE_FORMATS:
        raise _err(file, "timelines.format", f"must be one of {list(TIMELINE_FORMATS)}; got {tfmt!r}")
    extra = sorted(set(map(str, tl)) - {"format", "files"})
    if extra:
        raise _err(file, f"timelines.{extra[0]}", "unknown key; allowed: format, files")
    tl_files = _files(folder, file, "timelines.files", tl.get("files"))
    dup = sorted({str(p) for p in tl_files if tl_files.count(p) > 1})
    if dup:
        raise _err(file, "timelines.files", f"names the file {dup[0]!r} twice")
    job_map = {
        _job_key(file, "job_map", k): _job_key(file, "job_map", v)
        for k, v in _mapping(data.get("job_map") or {}, file, "job_map").items()
    }
    models_value = _mapping(data.get("models") or {}, file, "models")
    traces_value = _mapping(data.get("traces") or {}, file, "traces")
    models = (
        _models_table(folder, file, models_value)
        if _is_table_form(models_value, file, "models")
        else _models(folder, file, models_value)
    )
    traces = (
        _traces_table(folder, file, traces_value)
        if _is_table_form(traces_value, file, "traces")
        else {
            _job_key(file, "traces", k): _files(folder, file, f"traces.{k}", v, folder_ok=True)
            for k, v in traces_value.items()
        }
    )
    rank_timers: tuple[Path, ...] = ()
    if data.get("rank_timers") is not None:
        rt = _mapping(data["rank_timers"], file, "rank_timers")
        rank_timers = _files(folder, file, "rank_timers.files", rt.get("files"), folder_ok=True)
    price = data.get("price_per_device_hour")
    if price is not None:
        if (
            isinstance(price, bool)
            or not isinstance(price, (int, float))
            or not math.isfinite(price)
            or price < 0
        ):
            raise _err(file, "price_per_device_hour", f"must be a finite number >= 0; got {price!r}")
        price = float(price)
    contract = _mapping(data.get("contract") or {}, file, "contract")
    serving = None if data.get("serving") is None else _serving(folder, file, data["serving"], sched_files)
    name = data.get("name")
    return FleetManifest(
        file=file if is_url(file) else file.resolve(),
        folder=folder,
        name=str(name) if name is not None else (folder.rsplit("/", 1)[-1] if is_url(folder)
                                                 else folder.name),
        window=window,
        exclude=exclude,
        scheduler_format=fmt,
        scheduler_files=sched_files,
        scheduler_tz=tz,
        timeline_format=str(tfmt),
        timeline_files=tl_files,
        job_map=job_map,
        models=models,
        traces=traces,
        rank_timer_files=rank_timers,
        price_per_device_hour=price,
        contract=dict(contract),
        serving=serving,
    )


def _scheduler_section(folder: Path, file: Path, key: str, value: Any) -> tuple[str, tuple[Path, ...], Any]:
    """Check a ``scheduler:`` mapping (format, files, tz) under ``key``; return its three values."""
    sched = _mapping(value, file, key)
    fmt = sched.get("format")
    if fmt not in SCHEDULER_FORMATS:
        raise _err(file, f"{key}.format", f"must be one of {list(SCHEDULER_FORMATS)}; got {fmt!r}")
    extra = sorted(set(map(str, sched)) - {"format", "files", "tz"})
    if extra:
        raise _err(file, f"{key}.{extra[0]}", "unknown key; allowed: format, files, tz")
    tz = sched.get("tz")
    if tz is not None and not isinstance(tz, str):
        raise _err(file, f"{key}.tz", f"must be an IANA zone name; got {tz!r}")
    return str(fmt), _files(folder, file, f"{key}.files", sched.get("files")), tz


def _serving(folder: Path, file: Path, value: Any, training_files: tuple[Path, ...]) -> ServingManifest:
    section = _mapping(value, file, "serving")
    unknown = sorted(set(map(str, section)) - set(SERVING_KEYS))
    if unknown:
        raise _err(file, f"serving.{unknown[0]}", f"unknown key; allowed: {', '.join(SERVING_KEYS)}")
    for key in SERVING_KEYS:
        if section.get(key) is None:
            raise _err(file, f"serving.{key}", "is required")
    fmt, files, tz = _scheduler_section(folder, file, "serving.scheduler", section["scheduler"])
    shared = sorted(str(p) for p in set(files) & set(training_files))
    if shared:
        raise _err(file, "serving.scheduler.files", f"names the training scheduler file {shared[0]!r}: the "
                   "serving pool's records are files of their own, so the training walk never counts them")
    return ServingManifest(
        scheduler_format=fmt, scheduler_files=files, scheduler_tz=tz,
        lifecycle=_path(folder, file, "serving.lifecycle", section["lifecycle"]),
        decode_steps=_path(folder, file, "serving.decode_steps", section["decode_steps"]),
        model=_path(folder, file, "serving.model", section["model"]),
    )


def _models(folder: Path, file: Path, entries: Mapping[Any, Any]) -> dict[str, Path]:
    """``{job: model config path}``, each distinct path checked once (many jobs share a config)."""
    checked: dict[str, Path] = {}
    out = {}
    for k, v in entries.items():
        job = _job_key(file, "models", k)
        if not isinstance(v, str) or v not in checked:
            checked[v] = _path(folder, file, f"models.{k}", v)
        out[job] = checked[v]
    return out


# ---------------------------------------------------------------------------------------------------
# The table form of models: and traces: (a fleet-scale manifest's 200k job entries in one CSV/Parquet)
# ---------------------------------------------------------------------------------------------------

#: The columns of the table form: ``job_id`` and the path column, per key.
TABLE_COLUMNS: Mapping[str, tuple[str, str]] = {"models": ("job_id", "model"), "traces": ("job_id", "path")}

_PARQUET_MAGIC = b"PAR1"


def _is_table_form(value: Mapping[Any, Any], file: Path, key: str) -> bool:
    """``{file: TABLE}``: the one key ``file`` (so a job named ``file`` goes in a table itself)."""
    if "file" in value and len(value) > 1:
        raise _err(file, f"{key}.file", f"the table form {{file: TABLE}} takes no other key; got "
                   f"{excerpt(sorted(map(str, value)), 80)} (a job named 'file' is written in a table)")
    return "file" in value


def _read_job_table(
    folder: Path, file: Path, key: str, spec: Mapping[str, Any]
) -> tuple[pd.Series, pd.Series, np.ndarray, Path]:
    """Read ``key``'s table (CSV, gzip CSV or Parquet): job ids, path names, 1-based rows, the table file."""
    table = _path(folder, file, f"{key}.file", spec["file"])
    job_col, path_col = TABLE_COLUMNS[key]
    raw = read_bytes(table)  # bounded, regular file, gzip by its bytes
    if str(table).lower().endswith((".parquet", ".pq")) or bytes(raw[:4]) == _PARQUET_MAGIC:
        try:
            df = pd.read_parquet(io.BytesIO(raw))
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise InputError(f"not a readable Parquet file ({exc})", file=str(table)) from None
        rows = np.arange(1, len(df) + 1, dtype=np.int64)
    else:
        try:
            df = pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, na_values=[""])
        except pd.errors.EmptyDataError:
            raise InputError("empty file: no header row", file=str(table), row=1) from None
        except (pd.errors.ParserError, UnicodeDecodeError) as exc:
            raise InputError(f"not a well-formed CSV file ({exc})", file=str(table)) from None
        rows = np.arange(2, len(df) + 2, dtype=np.int64)  # the header is row 1
    df.columns = [str(c).strip().lower() for c in df.columns]
    for col in (job_col, path_col):
        if col not in df.columns:
            raise InputError(
                f"missing column {col!r}: the {key} table has the columns {job_col}, {path_col}; "
                f"found {list(df.columns)}",
                file=str(table),
                row=1,
                field=col,
            )
    jobs = _text_column(df[job_col], table, rows, job_col, whole_numbers=True)
    paths = _text_column(df[path_col], table, rows, path_col, whole_numbers=False)
    return jobs, paths, rows, table


def _text_column(
    values: pd.Series, table: Path, rows: np.ndarray, col: str, *, whole_numbers: bool
) -> pd.Series:
    """Return the column as text; a blank or non-text cell is refused by its row.

    Parquet integers are taken as their digits where ``whole_numbers`` (job ids, as the mapping form).
    """
    if whole_numbers and values.dtype.kind in "iu":
        return values.astype(str).reset_index(drop=True)
    text = values.astype(object).reset_index(drop=True)
    is_text = (
        np.ones(len(text), dtype=bool)
        if pd.api.types.infer_dtype(text, skipna=False) == "string"  # every cell text (one C pass)
        else text.map(type).eq(str).to_numpy()
    )
    bad = ~is_text
    bad[is_text] = (text[is_text].eq("") | text[is_text].str.isspace()).to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        what = "a job id (text or a whole number)" if whole_numbers else "a path"
        raise InputError(
            f"is empty or not text ({excerpt(text.iloc[i])}); every row names {what}",
            file=str(table),
            row=int(rows[i]),
            field=col,
        )
    return text


def _resolve_once(
    folder: Path, table: Path, rows: np.ndarray, col: str, names: pd.Series, *, folder_ok: bool
) -> np.ndarray:
    """Confine and check each distinct path once; return every row's resolved path (object array)."""
    codes, distinct = pd.factorize(names)
    _, first = np.unique(codes, return_index=True)
    resolved = np.empty(len(distinct), dtype=object)
    for i, name in enumerate(distinct):
        try:
            resolved[i] = _path(folder, table, col, name, folder_ok=folder_ok)
        except InputError as exc:
            raise InputError(exc.message, file=str(table), row=int(rows[first[i]]), field=col) from None
    return resolved[codes]


def _models_table(folder: Path, file: Path, spec: Mapping[str, Any]) -> dict[str, Path]:
    """``models: {file: TABLE}``: ``{job: model config path}`` from a ``job_id,model`` table."""
    jobs, names, rows, table = _read_job_table(folder, file, "models", spec)
    twice = jobs.duplicated().to_numpy()
    if twice.any():
        i = int(np.argmax(twice))
        first = int(rows[int(np.argmax((jobs == jobs.iloc[i]).to_numpy()))])
        raise InputError(
            f"job {jobs.iloc[i]!r} is given a second model config (the first in row {first}); a job has one",
            file=str(table),
            row=int(rows[i]),
            field="job_id",
        )
    resolved = _resolve_once(folder, table, rows, "model", names, folder_ok=False)
    return dict(zip(jobs.tolist(), resolved.tolist(), strict=True))


def _traces_table(folder: Path, file: Path, spec: Mapping[str, Any]) -> dict[str, tuple[Path, ...]]:
    """``traces: {file: TABLE}``: ``{job: (trace files or folders, in row order)}`` from ``job_id,path``."""
    jobs, names, rows, table = _read_job_table(folder, file, "traces", spec)
    resolved = _resolve_once(folder, table, rows, "path", names, folder_ok=True)
    paths = pd.Series(resolved, index=jobs.to_numpy())
    return {job: tuple(group) for job, group in paths.groupby(level=0, sort=False)}


def _exclude(value: Any, file: Path, window: Window | None) -> tuple[tuple[pd.Timestamp, pd.Timestamp], ...]:
    """``exclude:``: the stretches as sorted UTC pairs, each inside ``window`` when there is one."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _err(file, "exclude", f"must be a list of [start, end] pairs; got {value!r}")
    items = [[v.isoformat() if isinstance(v, (_dt.datetime, _dt.date)) else v for v in item]
             if isinstance(item, list) else item for item in value]
    try:
        pairs = parse_exclusions(items)
        if window is not None:
            window.excluding(pairs)
    except DomainError as exc:
        raise _err(file, "exclude", str(exc)) from exc
    return pairs


def _window(value: Any, file: Path) -> Window | None:
    if value is None:
        return None
    if isinstance(value, list):
        value = [v.isoformat() if isinstance(v, (_dt.datetime, _dt.date)) else v for v in value]
    try:
        return Window.parse(value)
    except DomainError as exc:
        raise _err(file, "window", str(exc)) from exc
