"""Scenario files: read one ``parameters/*.yaml`` and summarise what it says about the fleet.

A scenario file is a YAML mapping whose keys are the notebooks' parameter names.  Every value is a
plain literal -- text, a whole number, a real number, a boolean, a list of numbers or a list of texts
(file paths, say) -- so the mapping can be handed to papermill unchanged and read here without
surprises.  The values several scenarios share live once, in a file each of them includes
(``include: shared/defaults.yaml``), and where the records are lives apart from what the scenario
states (``data: bundled`` reads ``parameters/data/bundled.yaml``).  :func:`load_parameters` flattens a
scenario, its includes and its data locations into the one mapping the notebooks receive, computes the
values that would otherwise be stated twice (:data:`DERIVED_PARAMETERS`) and checks that every path
stays inside the project root (:data:`PATH_KEYS`).

:func:`scenario_summary` turns the stated factors and model inputs of a scenario into the content
of a report's ``summary.json``: the product and its loss shares, the levers ranked by what their
ceilings are worth, the cost of a useful accelerator-hour, and the runtime loss terms of
equation 4.  Every number in it is a plain Python float, so the dictionary serialises to JSON as is.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetlib._environ import project_root
from fleetlib._io import (
    Yaml12FloatLoader,
    confined,
    current_limits,
    excerpt,
    is_url,
    link_note,
    listed_files,
    load_yaml,
    read_text,
    url_confined,
    url_kind,
)
from fleetlib.accounting import (
    BOUNDARIES,
    Factor,
    Window,
    cost_per_useful_hour,
    held_hours_chargeback,
    mpg,
    rank_levers,
)
from fleetlib.quality import DomainError, InputError

if TYPE_CHECKING:
    from fleetlib.runtime import RuntimeLossTerms

__all__ = [
    "DATA_FOLDER",
    "DATA_KEY",
    "DERIVED_PARAMETERS",
    "INCLUDE_KEY",
    "PATH_KEYS",
    "RUNTIME_MODEL_KEYS",
    "SECONDS_PER_DAY",
    "STATED_RECORD",
    "DerivedParameter",
    "load_parameters",
    "parameter_sources",
    "runtime_model_inputs",
    "runtime_terms",
    "scenario_summary",
    "with_overrides",
]

#: Seconds in one day (scenario files give held time in days and preemption rates per day).
SECONDS_PER_DAY = 86_400.0

#: The record named on factors that a scenario file states rather than measures.
STATED_RECORD = "stated in the scenario file"

#: Scenario keys the runtime model of equation 4 reads (see :func:`runtime_model_inputs`).
RUNTIME_MODEL_KEYS = (
    "held_days",
    "startup_min",
    "data_stall",
    "checkpoint_write_s",
    "mtbf_h",
    "recovery_min",
    "preemptions_per_day",
    "lost_work_per_preemption_min",
    "checkpoint_interval_min",
)




#: A scenario file is a page of parameters; anything larger is not one (and is not read into memory).
_MAX_SCENARIO_BYTES = 16 * 1024**2


def _shown(value: Any, width: int = 60) -> str:
    """Return a value as Python writes it, escaped and cut to ``width`` characters (never a whole file)."""
    text = ascii(value)
    return text if len(text) <= width else f"{text[:width - 3]}... ({len(text):,} characters)"


def _describe(value: Any) -> str:
    """Name the YAML type of a rejected value for an error message."""
    if value is None:
        return "an empty value (null)"
    if isinstance(value, Mapping):
        return "a nested mapping"
    if isinstance(value, list):
        return "a list that is neither all numbers nor all text"
    return f"a {type(value).__name__} ({_shown(value)})"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------------
# Scenario files: one file, its includes and its data locations, flattened into one mapping
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DerivedParameter:
    """A parameter computed from others when a scenario is loaded, so that the two cannot disagree.

    Parameters
    ----------
    key
        The parameter the notebooks receive.
    sources
        The parameters it is computed from, in the order ``compute`` takes them.
    rule
        The formula in words, for messages and the scenario files' comments.
    compute
        The formula.
    """

    key: str
    sources: tuple[str, ...]
    rule: str
    compute: Callable[..., float]


#: Parameters that restated another value exactly; :func:`load_parameters` derives them and refuses a file
#: that states them alongside their sources.
DERIVED_PARAMETERS: tuple[DerivedParameter, ...] = (
    # Input waits are 5 % of capacity, measured inside S = 0.65 of it: the share of held time is the ratio
    # (Napkin Math 9.2 -> 9.3), kept at full precision.
    DerivedParameter("data_stall", ("input_wait_share", "scheduling_goodput"),
                     "input_wait_share / scheduling_goodput", lambda wait, s: _held_share(wait, s)),
    # The synthetic job's synchronous checkpoint pause is the scenario's.
    DerivedParameter("timeline_synth_checkpoint_write_s", ("checkpoint_write_s",), "checkpoint_write_s",
                     lambda write_s: write_s),
)

#: Keys whose values name files or folders, relative to the project root (the notebooks' working
#: directory).  :func:`load_parameters` refuses a path that leaves it; an empty text means "none".
PATH_KEYS: tuple[str, ...] = (
    "fleet_manifest",
    "scheduling_files",
    "scheduling_openb_files",
    "timeline_files",
    "timeline_mlperf_folder",
    "traces_files",
    "traces_model",
)

#: Key naming further files whose values a file takes (relative to that file's folder, inside it).
INCLUDE_KEY = "include"

#: Key of a scenario file naming its data locations: ``data: NAME`` reads ``data/NAME.yaml`` beside it.
DATA_KEY = "data"

#: Folder, beside a scenario file, holding the sets of data locations its ``data`` key names.
DATA_FOLDER = "data"

_DATA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _held_share(capacity_share: float, scheduling_goodput: float) -> float:
    """Re-express a share of capacity as a share of held time (the runtime model's own conversion)."""
    from fleetlib.runtime import held_share_from_capacity_share  # the runtime model loads on use

    return held_share_from_capacity_share(capacity_share, scheduling_goodput)


#: Where a scenario file lies: a local path, or an fsspec URL (``s3://bucket/x/scenario.yaml``) as written.
Location = Path | str


def _location(path: str | Path) -> Location:
    """Return a scenario file's location: an fsspec URL stays text (a Path would fold its ``//``)."""
    return path if is_url(path) else Path(path)


@dataclass
class _Layer:
    """The values one file contributes, each with the file that stated it."""

    values: dict[str, Any] = field(default_factory=dict)
    stated_in: dict[str, str] = field(default_factory=dict)


def _read_mapping(path: Location, *, what: str = "scenario file") -> dict[Any, Any]:
    """Read one YAML file that must hold a mapping."""
    file = str(path)
    # regular files only, bounded, UTF-8 checked with the line of a bad byte; YAML bounded in depth and
    # alias expansion (fleetlib._io)
    try:
        text = read_text(path, max_bytes=min(current_limits().max_bytes, _MAX_SCENARIO_BYTES))
    except InputError as exc:
        why = str(exc).split(": ", 1)[-1] if exc.file is not None else str(exc)
        raise InputError(f"cannot read the {what} ({why})", file=file, row=exc.row) from None
    data = load_yaml(text, file=file, loader=Yaml12FloatLoader)
    if data is None:
        raise InputError(f"the {what} is empty; expected a mapping of parameter names to values", file=file)
    if not isinstance(data, dict):
        raise InputError(f"expected a mapping of parameter names to values; got {_describe(data)}",
                         file=file)
    return data


def _checked_value(value: Any, *, file: str, key: str) -> Any:
    """Return a parameter value if it is a plain typed literal; raise :class:`InputError` otherwise."""
    if isinstance(value, bool | str):
        return value
    if _is_number(value):
        if not math.isfinite(value):
            raise InputError(f"expected a finite number; got {value!r}", file=file, field=key)
        return value
    if isinstance(value, list) and all(_is_number(v) for v in value):
        if not all(math.isfinite(v) for v in value):
            raise InputError(f"expected a list of finite numbers; got {_shown(value)}", file=file,
                             field=key)
        return list(value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return list(value)
    raise InputError(
        f"expected text, a number, a boolean, a list of numbers or a list of texts; got {_describe(value)}",
        file=file, field=key,
    )


def _texts(value: Any, *, file: str, key: str) -> list[str]:
    """Return ``value`` (one text or a non-empty list of texts) as a list of texts."""
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise InputError(f"expected a file name or a list of file names; got {_describe(value)}", file=file,
                     field=key)


def _folder(path: Location) -> Location:
    """Return the folder (or URL prefix) holding a scenario file."""
    return path.rsplit("/", 1)[0] if isinstance(path, str) else path.parent


def _is_file(path: Location) -> bool:
    """Return whether a file (or an object at a URL) is there."""
    return url_kind(path) == "file" if isinstance(path, str) else path.is_file()


def _identity(path: Location) -> Location:
    """Return what tells two files apart for the cycle check: the resolved path, or the URL as normalised."""
    return path if isinstance(path, str) else path.resolve()


def _name(path: Location) -> str:
    return posixpath.basename(path) if isinstance(path, str) else path.name


def _included_path(folder: Location, name: str, *, file: str, key: str) -> Location:
    """Resolve a file named by ``include`` or ``data`` inside ``folder``; refuse one outside or missing.

    Beside a scenario read from a URL, ``folder`` is the URL's prefix and the file must lie under it
    (:func:`fleetlib._io.url_confined`; ``--allow-path URL`` opens another prefix).
    """
    what = f"the file named by {key!r}"
    try:
        path = url_confined(folder, name, what=what) if isinstance(folder, str) else confined(folder, name,
                                                                                             what=what)
    except InputError as exc:
        raise InputError(str(exc).split(": ", 1)[-1], file=file, field=key) from None
    if not _is_file(path):
        raise InputError(f"names {name!r}, but there is no such file ({path})", file=file, field=key)
    return path


def _data_path(folder: Location, value: Any, *, file: str) -> Location:
    """Resolve ``data: NAME`` to ``data/NAME.yaml`` beside the scenario file (or under its URL prefix)."""
    if not isinstance(value, str) or not _DATA_NAME.fullmatch(value):
        raise InputError(f"expected the name of a set of data locations (a file stem such as 'bundled'); "
                         f"got {_describe(value)}", file=file, field=DATA_KEY)
    if isinstance(folder, str):
        base: Location = f"{folder}/{DATA_FOLDER}"
        path: Location = f"{base}/{value}.yaml"
    else:
        base = folder / DATA_FOLDER
        path = base / f"{value}.yaml"
    if not _is_file(path):
        if isinstance(base, str):
            found = listed_files(base, (".yaml",)) if url_kind(base) == "directory" else []
            known = sorted(posixpath.basename(str(p))[:-len(".yaml")] for p in found)
        else:
            known = sorted(p.stem for p in base.glob("*.yaml")) if base.is_dir() else []
        listed = f"known: {', '.join(known)}" if known else f"{base} holds none"
        raise InputError(f"no data locations named {value!r} (looked for {path}; {listed})",
                         file=file, field=DATA_KEY)
    return path


def _read_layer(path: Location, chain: tuple[Location, ...], *, scenario: bool) -> _Layer:
    """Read one file and everything it includes; its own keys replace included ones.

    ``chain`` holds the files that include this one (outermost first), to refuse a cycle.  Two included
    files stating the same key are refused: neither would clearly win.
    """
    file = str(path)
    data = _read_mapping(path, what="scenario file" if scenario else "included parameter file")
    own = _Layer()
    for key, value in data.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise InputError(f"parameter names must be Python identifiers; got {key!r}", file=file,
                             field=str(key))
        if key in (INCLUDE_KEY, DATA_KEY):
            continue
        own.values[key] = _checked_value(value, file=file, key=key)
        own.stated_in[key] = file

    included: list[Location] = []
    if INCLUDE_KEY in data:
        names = _texts(data[INCLUDE_KEY], file=file, key=INCLUDE_KEY)
        included += [_included_path(_folder(path), name, file=file, key=INCLUDE_KEY) for name in names]
    if DATA_KEY in data:
        if not scenario:
            raise InputError("only a scenario file names its data locations; move 'data' there", file=file,
                             field=DATA_KEY)
        included.append(_data_path(_folder(path), data[DATA_KEY], file=file))

    merged = _Layer()
    for sub in included:
        resolved = _identity(sub)
        if resolved in chain or resolved == _identity(path):
            cycle = " -> ".join(_name(p) for p in (*chain, _identity(path), resolved))
            raise InputError(f"include cycle: {cycle}", file=file, field=INCLUDE_KEY)
        layer = _read_layer(sub, (*chain, _identity(path)), scenario=False)
        for key, value in layer.values.items():
            if key in merged.values:
                raise InputError(f"{key!r} is stated by two included files, {merged.stated_in[key]} and "
                                 f"{layer.stated_in[key]}; state it in one of them or in {path.name}",
                                 file=file, field=key)
            merged.values[key] = value
            merged.stated_in[key] = layer.stated_in[key]
    for key in own.values:  # the file's own keys first, in file order; then the included keys it keeps
        merged.values.pop(key, None)
        merged.stated_in.pop(key, None)
    return _Layer({**own.values, **merged.values}, {**own.stated_in, **merged.stated_in})


def _derive(layer: _Layer) -> None:
    """Add every :data:`DERIVED_PARAMETERS` entry whose sources are all present."""
    for derived in DERIVED_PARAMETERS:
        if not all(source in layer.values for source in derived.sources):
            continue
        if derived.key in layer.values:
            raise InputError(f"{derived.key!r} is derived when the scenario is loaded ({derived.key} = "
                             f"{derived.rule}); remove it from the file or change its sources",
                             file=layer.stated_in[derived.key], field=derived.key)
        args = []
        for source in derived.sources:
            value = layer.values[source]
            if not _is_number(value):
                raise InputError(f"expected a number ({derived.key} = {derived.rule} is derived from it); "
                                 f"got {_describe(value)}", file=layer.stated_in[source], field=source)
            args.append(value)
        try:
            value = derived.compute(*args)
        except (DomainError, ZeroDivisionError) as exc:
            raise InputError(f"cannot derive {derived.key} = {derived.rule}: {exc}",
                             file=layer.stated_in[derived.sources[-1]], field=derived.sources[-1]) from None
        layer.values[derived.key] = value
        layer.stated_in[derived.key] = layer.stated_in[derived.sources[0]]


def with_overrides(params: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``params`` with ``overrides`` (``fleetlib report -p``) applied, derived values kept true.

    A :data:`DERIVED_PARAMETERS` entry is computed again from its sources when an override replaces
    one of them (``-p input_wait_share=0.1`` changes ``data_stall``); overriding a derived key itself
    is refused, as in a scenario file, when its sources are there to derive it from.

    Parameters
    ----------
    params
        The scenario's parameters (:func:`load_parameters`).
    overrides
        Key to value, each already typed (:func:`fleetlib.report.own_fleet.parse_overrides`).

    Returns
    -------
    dict
        The parameters the notebooks receive.

    Raises
    ------
    InputError
        A derived key overridden, a source that is no number, a value its rule refuses, or a path
        (:data:`PATH_KEYS`) outside the project root (symbolic links followed; ``--allow-path`` widens it).
    """
    _confine_paths(overrides, lambda key: {}, "-p {key}: ")  # the scenario file's own rule
    out = {**params, **overrides}
    for derived in DERIVED_PARAMETERS:
        if not all(source in out for source in derived.sources):
            continue
        if derived.key in overrides:
            raise InputError(f"-p {derived.key}: derived when the scenario is loaded ({derived.key} = "
                             f"{derived.rule}); override {' or '.join(derived.sources)} instead")
        changed = [source for source in derived.sources if source in overrides]
        if not changed:
            continue
        args = [out[source] for source in derived.sources]
        for source, value in zip(derived.sources, args, strict=True):
            if not _is_number(value):
                raise InputError(f"-p {source}: expected a number ({derived.key} = {derived.rule} is derived "
                                 f"from it); got {_describe(value)}")
        try:
            out[derived.key] = derived.compute(*args)
        except (DomainError, ZeroDivisionError) as exc:
            raise InputError(f"-p {changed[0]}: cannot derive {derived.key} = {derived.rule}: "
                             f"{exc}") from None
    return out


def _project_root() -> Path:
    """Return the folder the notebooks run in: the fleetlib checkout, or else the current directory."""
    return project_root() or Path.cwd().resolve()


def _check_paths(layer: _Layer) -> None:
    """Refuse a path under one of :data:`PATH_KEYS` that leaves the project root."""
    _confine_paths(layer.values, lambda key: {"file": layer.stated_in[key], "field": key})


def _confine_paths(values: Mapping[str, Any], where: Callable[[str], dict[str, Any]],
                   prefix: str = "") -> None:
    """Refuse a value under one of :data:`PATH_KEYS` that is no path or resolves outside the project root.

    ``where(key)`` gives the error's ``file``/``field``; ``prefix`` starts its message (``"-p key: "``).
    """
    present = [key for key in PATH_KEYS if key in values]
    if not present:
        return
    root = _project_root()
    for key in present:
        value = values[key]
        lead = prefix.format(key=key)
        for name in value if isinstance(value, list) else [value]:
            if not isinstance(name, str):
                raise InputError(f"{lead}expected a path (text) or a list of paths; got {_describe(value)}",
                                 **where(key))
            if not name:
                continue
            try:
                confined(root, name, what="path")
            except InputError:
                raise InputError(f"{lead}path {excerpt(name, 80)} lies outside the project root {root}"
                                 f"{link_note(root, name)} (paths here are relative to it, and only paths "
                                 "inside it are read, unless --allow-path names another folder)",
                                 **where(key)) from None


def load_parameters(path: str | Path) -> dict[str, Any]:
    """Read a scenario file, with the files it includes, as one flat mapping of parameter names to values.

    A scenario file is a YAML mapping of parameter names to plain typed literals: text, whole numbers,
    real numbers, booleans, lists of numbers and non-empty lists of texts (the types a notebook's
    ``parameters`` cell declares).  Anything else -- an empty value, a nested mapping, a date, a list
    mixing text with numbers or holding booleans, a non-finite number -- is refused rather than guessed at.

    Two keys assemble a scenario from several files, and are not parameters themselves:

    ``include``
        A file name or a list of them, relative to the including file's folder and inside it (e.g.
        ``shared/defaults.yaml``); their keys are taken, and included files may include others.  A key the
        including file states itself replaces the included one; two included files stating the same key
        are refused.
    ``data``
        In the scenario file only: the name of a set of data locations, ``data/NAME.yaml`` beside the
        scenario file (e.g. ``data: bundled``), read like an include.

    Then every :data:`DERIVED_PARAMETERS` entry is computed from its sources, and every path under
    :data:`PATH_KEYS` is checked to lie inside the project root, against which the notebooks resolve it
    (the values are returned as written).

    A scenario in object storage is read through fsspec (``s3://bucket/x/scenario.yaml``; credentials
    from the environment or fsspec's configuration only): its includes and data locations resolve
    against the URL's prefix and must lie under it (or under an ``--allow-path`` URL prefix).  Its
    :data:`PATH_KEYS` stay relative to the project root, as for a local scenario.

    Parameters
    ----------
    path
        The scenario file, e.g. ``parameters/running_example.yaml``, or its fsspec URL.

    Returns
    -------
    dict
        Parameter name -> value: the scenario file's own keys in file order, then the included ones in
        include order, then the derived ones.

    Raises
    ------
    fleetlib.quality.InputError
        When a file is missing, is not valid YAML, is not a mapping, or holds a value of a type listed above
        as refused; an include or data name names no file or one outside its folder; the includes form a
        cycle; a derived key is stated; or a path leaves the project root.  The one-line message names the
        file and the key.

    Examples
    --------
    >>> params = load_parameters("parameters/running_example.yaml")  # doctest: +SKIP
    >>> params["scheduling_goodput"]  # doctest: +SKIP
    0.65
    """
    layer = _read_layer(_location(path), (), scenario=True)
    _derive(layer)
    _check_paths(layer)
    return layer.values


def parameter_sources(path: str | Path) -> dict[str, str]:
    """Say which file states each parameter of a scenario (for reports that label stated values).

    Parameters
    ----------
    path
        The scenario file, as for :func:`load_parameters`.

    Returns
    -------
    dict
        Parameter name -> the path of the file that states it, in the order of
        :func:`load_parameters`; a derived parameter maps to ``"derived: KEY = RULE"``.

    Raises
    ------
    fleetlib.quality.InputError
        As :func:`load_parameters`.
    """
    layer = _read_layer(_location(path), (), scenario=True)
    stated = set(layer.values)
    _derive(layer)
    _check_paths(layer)
    rules = {d.key: d.rule for d in DERIVED_PARAMETERS}
    return {key: (file if key in stated else f"derived: {key} = {rules[key]}")
            for key, file in layer.stated_in.items()}


def _get(params: Mapping[str, Any], key: str) -> Any:
    try:
        return params[key]
    except KeyError:
        raise InputError(f"the scenario has no {key!r} parameter, which the summary needs",
                         field=key) from None


def _number(params: Mapping[str, Any], key: str) -> float:
    value = _get(params, key)
    if not _is_number(value):
        raise InputError(f"expected a number; got {_describe(value)}", field=key)
    return float(value)


def _plain(obj: Any) -> Any:
    """Return ``obj`` with every number a plain Python float or int (JSON-ready)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, bool | str) or obj is None:
        return obj
    if hasattr(obj, "item") and callable(obj.item):  # a numpy scalar
        return _plain(obj.item())
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    return obj


def runtime_model_inputs(params: Mapping[str, Any]) -> dict[str, float]:
    """Convert a scenario's runtime-model parameters to the seconds-based keyword arguments of eq. 4.

    Parameters
    ----------
    params
        Scenario parameters with ``held_days``, ``startup_min``, ``data_stall``,
        ``checkpoint_write_s``, ``mtbf_h``, ``recovery_min``, ``preemptions_per_day``,
        ``lost_work_per_preemption_min`` and ``checkpoint_interval_min``.

    Returns
    -------
    dict
        ``held_s``, ``startup_s``, ``data_stall``, ``checkpoint_write_s``, ``mtbf_s``,
        ``recovery_s``, ``preemptions_per_s``, ``lost_work_s`` and ``interval_s``.
    """
    return {
        "held_s": _number(params, "held_days") * SECONDS_PER_DAY,
        "startup_s": _number(params, "startup_min") * 60.0,
        "data_stall": _number(params, "data_stall"),
        "checkpoint_write_s": _number(params, "checkpoint_write_s"),
        "mtbf_s": _number(params, "mtbf_h") * 3600.0,
        "recovery_s": _number(params, "recovery_min") * 60.0,
        "preemptions_per_s": _number(params, "preemptions_per_day") / SECONDS_PER_DAY,
        "lost_work_s": _number(params, "lost_work_per_preemption_min") * 60.0,
        "interval_s": _number(params, "checkpoint_interval_min") * 60.0,
    }


def runtime_terms(params: Mapping[str, Any], **overrides: float) -> RuntimeLossTerms:
    """Evaluate equation 4 for a scenario, optionally with some of its runtime inputs replaced.

    The three steps every caller would otherwise repeat are done here: the scenario's units (days,
    minutes, hours, per day) are converted to seconds by :func:`runtime_model_inputs`, the
    preemption tax is composed from the lost work and one restart
    (:func:`fleetlib.runtime.preemption_tax_s`), and
    :func:`fleetlib.runtime.runtime_loss_terms` is evaluated at the scenario's checkpoint
    interval.  Overrides are given in the scenario's own units, under the scenario's key names, so
    a variant reads like an edit of the parameter file.

    Parameters
    ----------
    params
        Scenario parameters holding every key of :data:`RUNTIME_MODEL_KEYS` (other keys are
        ignored), e.g. the result of :func:`load_parameters`.
    **overrides
        Replacement values for some of :data:`RUNTIME_MODEL_KEYS`, in the scenario's units,
        e.g. ``preemptions_per_day=12.0`` or ``held_days=1 / 24``.

    Returns
    -------
    fleetlib.runtime.RuntimeLossTerms
        The five shares of held time, their total, the runtime goodput they leave, the interval used
        and any first-order warnings.

    Raises
    ------
    fleetlib.quality.DomainError
        An override names a key the runtime model does not read (a typo would otherwise be ignored
        silently), or a value lies outside the domain of equation 4 (a negative duration, a data stall
        of one or more, an interval longer than the MTBF ...).
    fleetlib.quality.InputError
        A key the model needs is missing from ``params`` or is not a number.

    Examples
    --------
    >>> params = load_parameters("parameters/running_example.yaml")  # doctest: +SKIP
    >>> round(runtime_terms(params).runtime_goodput, 3)  # doctest: +SKIP
    0.904
    >>> round(runtime_terms(params, preemptions_per_day=12.0).preemption, 3)  # doctest: +SKIP
    0.168
    """
    # Imported here: the runtime model is a sibling module and need not load with the accounting.
    from fleetlib.runtime import preemption_tax_s, runtime_loss_terms

    unknown = sorted(set(overrides) - set(RUNTIME_MODEL_KEYS))
    if unknown:
        raise DomainError(f"runtime_terms cannot override {', '.join(map(repr, unknown))}: the runtime "
                          f"model reads only {', '.join(RUNTIME_MODEL_KEYS)}")
    inputs = runtime_model_inputs({**params, **overrides})
    tax_s = preemption_tax_s(inputs["lost_work_s"], inputs["startup_s"])
    return runtime_loss_terms(
        held_s=inputs["held_s"],
        startup_s=inputs["startup_s"],
        data_stall=inputs["data_stall"],
        checkpoint_write_s=inputs["checkpoint_write_s"],
        mtbf_s=inputs["mtbf_s"],
        recovery_s=inputs["recovery_s"],
        preemptions_per_s=inputs["preemptions_per_s"],
        preemption_tax_s=tax_s,
        interval_s=inputs["interval_s"],
    )


def scenario_summary(params: Mapping[str, Any]) -> dict[str, Any]:
    """Summarise a scenario: its stated product, levers, cost and runtime loss terms.

    The three stated factors share the scenario's nominal window (``window_label``) and are
    recorded as stated in the scenario file; they are multiplied with :func:`fleetlib.accounting.mpg`.
    Levers are ranked by the relative gain each reaches at the scenario's ceiling.  The runtime
    loss terms come from :func:`runtime_terms`: equation 4 at the scenario's checkpoint interval,
    with the preemption tax built from the lost work and the startup time.

    Parameters
    ----------
    params
        Scenario parameters as returned by :func:`load_parameters`.

    Returns
    -------
    dict
        JSON-ready: ``scenario`` (name, title), ``window``, ``label`` (``"stated"``: every factor
        here comes from the scenario file, none from records), ``factors`` (one contract per
        boundary, each labelled ``"stated"``), ``mpg``, ``job_product``, ``loss_shares``,
        ``marginal_value``, ``windows_mixed``, ``notes``, ``lever_ranking`` (list, best first),
        ``price_per_device_hour``,
        ``cost_per_useful_hour`` and ``held_hours_chargeback`` (in the price's currency per
        accelerator-hour), ``runtime_model`` (the loss terms) and ``runtime_model_inputs``.

    Raises
    ------
    fleetlib.quality.InputError
        A parameter the summary needs is missing or is not a number.
    fleetlib.quality.DomainError
        A value lies outside the domain of its formula (a factor above one, a ceiling below the
        current factor, a negative duration ...).
    """
    # Imported here: the runtime model is a sibling module and need not load with the accounting.
    from fleetlib.runtime import preemption_tax_s

    window = Window.nominal(str(_get(params, "window_label")))
    values = {b: _number(params, f"{b}_goodput") for b in BOUNDARIES}
    factors = {
        b: Factor.from_value(b, values[b], window=window, record=STATED_RECORD) for b in BOUNDARIES
    }
    product = mpg(factors["scheduling"], factors["runtime"], factors["program"])
    ceilings = {b: _number(params, f"{b}_ceiling") for b in BOUNDARIES}
    levers = rank_levers(values, ceilings)
    price = _number(params, "price_per_device_hour")
    s, r, p = values["scheduling"], values["runtime"], values["program"]

    inputs = runtime_model_inputs(params)
    tax_s = preemption_tax_s(inputs["lost_work_s"], inputs["startup_s"])
    terms = runtime_terms(params)
    product_dict = product.to_dict()
    summary: dict[str, Any] = {
        "scenario": {
            "name": str(_get(params, "scenario_name")),
            "title": str(params.get("scenario_title", _get(params, "scenario_name"))),
        },
        "window": window.to_dict(),
        "label": "stated",
        "factors": {b: {**factors[b].to_dict(), "label": "stated"} for b in BOUNDARIES},
        "mpg": product_dict["mpg"],
        "job_product": product_dict["job_product"],
        "loss_shares": product_dict["loss_shares"],
        "marginal_value": product_dict["marginal_value"],
        "windows_mixed": product_dict["windows_mixed"],
        "notes": product_dict["notes"],
        "lever_ranking": [lever.to_dict() for lever in levers],
        "price_per_device_hour": price,
        "cost_per_useful_hour": cost_per_useful_hour(price, s, r, p),
        "held_hours_chargeback": held_hours_chargeback(price, r, p),
        "runtime_model_inputs": {**inputs, "preemption_tax_s": tax_s},
        "runtime_model": terms.to_dict(),
    }
    return _plain(summary)
