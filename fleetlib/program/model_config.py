"""The model configuration a program measurement divides by: accelerator, devices, useful FLOPs.

:func:`load_model_config` reads and checks one YAML file (``fleetlib program --model``,
:func:`fleetlib.program.measure.measure`).

Model configuration
-------------------
A YAML mapping (see ``data/traces/models/dlrm_example.yaml``):

``accelerator`` (required)
    A key of :data:`fleetlib.program.flops.PEAK_RATES`, e.g. ``"H100 SXM"`` (case-insensitive).
``devices`` (required)
    Devices of the whole job (at least the number of traced ranks).
``useful_flops_per_step``
    Required model FLOPs of one step over all devices.  With it, ``convention`` is either a FLOP
    convention name (``palm``, ``megatron``, ``6n``) the count followed, or a short free-text name of
    the counting rule (no commas), e.g. ``"DLRM MLP count"``.
``n_params`` and ``tokens_per_step``
    Instead of ``useful_flops_per_step``: the FLOPs are
    :func:`fleetlib.program.flops.model_flops_per_token` x ``tokens_per_step``, and ``convention`` must
    be ``palm``, ``megatron`` or ``6n``; ``palm`` and ``megatron`` also need ``n_layers``, ``n_heads``,
    ``head_dim`` and ``seq_len``; ``causal`` (bool) is for ``megatron``.
``name`` (optional)
    The label of the window of the traced steps (:func:`fleetlib.program.measure.measure`: their
    measured UTC span when the traces carry a calendar clock).

Any other key is refused, so that a misspelt key cannot be silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetlib.quality import DomainError, InputError

__all__ = ["MODEL_KEYS", "load_model_config"]

#: Keys a model configuration may hold.
MODEL_KEYS: tuple[str, ...] = ("accelerator", "devices", "useful_flops_per_step", "n_params",
                               "tokens_per_step", "convention", "n_layers", "n_heads", "head_dim",
                               "seq_len", "causal", "name")

_FLOP_NAMES = ("palm", "megatron", "6n")
_SHAPE_KEYS = ("n_layers", "n_heads", "head_dim", "seq_len")


def _number(cfg: Mapping[str, Any], key: str, file: str, *, whole: bool = False) -> float:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"must be a number; got {value!r}", file=file, field=key)
    if not value > 0 or value != value or value == float("inf"):
        raise InputError(f"must be a positive finite number; got {value!r}", file=file, field=key)
    if whole and float(value) != int(value):
        raise InputError(f"must be a whole number; got {value!r}", file=file, field=key)
    return float(value)


def load_model_config(path: str | Path) -> dict[str, Any]:
    """Read and check a model configuration for ``fleetlib program --model``.

    Parameters
    ----------
    path
        A YAML file with the keys of :data:`MODEL_KEYS` (see the module docstring).

    Returns
    -------
    dict
        ``peak`` (:class:`fleetlib.program.flops.PeakRate`), ``devices`` (int),
        ``useful_flops_per_step`` (float), ``flops_per_token`` (float or None), ``tokens_per_step``
        (float or None), ``n_params`` (float or None), ``convention``
        (:class:`fleetlib.program.flops.ProgramGoodputConvention`), ``name`` (str) and ``file``.

    Raises
    ------
    InputError
        The file is missing or not YAML, or a key is missing, unknown, of the wrong type, or out
        of its domain (the message names the file and the key).
    """
    from fleetlib.program.flops import (
        ProgramGoodputConvention,
        mfu_convention,
        model_flops_per_token,
        peak_rate,
    )
    from fleetlib.scenario import _ScenarioLoader

    p = Path(path)
    file = str(p)
    if p.is_dir():
        raise InputError("is a folder; give the model configuration file", file=file)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError("model configuration not found", file=file) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the model configuration ({exc})", file=file) from exc
    from fleetlib._io import load_yaml  # bounded nesting and alias expansion (a billion laughs)

    cfg = load_yaml(text, file=file, loader=_ScenarioLoader)  # a SafeLoader subclass
    if not isinstance(cfg, Mapping):
        raise InputError("a model configuration is a YAML mapping of keys to values", file=file)
    unknown = sorted(str(k) for k in cfg if k not in MODEL_KEYS)
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; allowed: {list(MODEL_KEYS)}", file=file,
                         field=unknown[0])
    for key in ("accelerator", "devices", "convention"):
        if cfg.get(key) is None:
            raise InputError("is required", file=file, field=key)
    try:
        peak = peak_rate(str(cfg["accelerator"]))
    except DomainError as exc:
        raise InputError(str(exc), file=file, field="accelerator") from exc
    devices = int(_number(cfg, "devices", file, whole=True))
    conv_text = str(cfg["convention"]).strip()
    causal = cfg.get("causal")
    if causal is not None and not isinstance(causal, bool):
        raise InputError(f"must be true or false; got {causal!r}", file=file, field="causal")

    given_flops = cfg.get("useful_flops_per_step") is not None
    given_params = cfg.get("n_params") is not None or cfg.get("tokens_per_step") is not None
    if given_flops == given_params:
        raise InputError("give either useful_flops_per_step, or n_params with tokens_per_step (not both)",
                         file=file, field="useful_flops_per_step")
    flops_per_token = tokens = n_params = None
    try:
        if given_flops:
            useful = _number(cfg, "useful_flops_per_step", file)
            if conv_text.lower() in _FLOP_NAMES:
                conv = mfu_convention(conv_text.lower(), peak, causal=causal)  # type: ignore[arg-type]
            else:
                conv = ProgramGoodputConvention("MFU", conv_text, peak.arithmetic_label)
        else:
            for key in ("n_params", "tokens_per_step"):
                if cfg.get(key) is None:
                    raise InputError("is required with n_params / tokens_per_step", file=file, field=key)
            if conv_text.lower() not in _FLOP_NAMES:
                raise InputError(f"must be one of {list(_FLOP_NAMES)} when the FLOPs are counted from "
                                 f"n_params; got {conv_text!r}", file=file, field="convention")
            name = conv_text.lower()
            shape: dict[str, int | None] = {}
            for key in _SHAPE_KEYS:
                shape[key] = None if cfg.get(key) is None else int(_number(cfg, key, file, whole=True))
            missing = [k for k, v in shape.items() if v is None]
            if name != "6n" and missing:
                raise InputError(f"convention {name!r} counts attention and needs {missing}",
                                 file=file, field=missing[0])
            n_params = _number(cfg, "n_params", file)
            tokens = _number(cfg, "tokens_per_step", file)
            flops_per_token = float(model_flops_per_token(n_params, convention=name,  # type: ignore[arg-type]
                                                          causal=causal, **shape))
            useful = flops_per_token * tokens
            conv = mfu_convention(name, peak, causal=causal)  # type: ignore[arg-type]
    except DomainError as exc:
        raise InputError(str(exc), file=file, field="convention") from exc
    label = cfg.get("name")
    return {"peak": peak, "devices": devices, "useful_flops_per_step": useful,
            "flops_per_token": flops_per_token, "tokens_per_step": tokens, "n_params": n_params,
            "convention": conv, "name": str(label) if label is not None else f"traced steps ({p.name})",
            "file": file}
