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
``precision`` (optional)
    The number format the work ran in (``BF16``, ``FP16``, ``FP8``, ``TF32``): the peak is the
    device's published dense peak at that precision (:func:`fleetlib.program.peaks.peak_rate`);
    default the device's default entry (BF16, FP16 on V100).  A precision the device has no peak
    for is refused, never replaced by another.
``seq_len_source`` (optional)
    Where ``seq_len`` comes from (``"training config"``, ``"data loader"``; no commas).  The
    convention's provenance field records it (``seq_len 4096 from training config``); a
    ``seq_len`` without it is recorded as ``(source not stated)``, because the model's maximum
    sequence length in place of the training one is a common cause of MFU above 100 %.
``name`` (optional)
    The label of the window of the traced steps (:func:`fleetlib.program.measure.measure`: their
    measured UTC span when the traces carry a calendar clock).

Any other key is refused, so that a misspelt key cannot be silently ignored.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fleetlib._io import Yaml12FloatLoader, is_url, load_yaml, read_text
from fleetlib.program.flops import ProgramGoodputConvention, mfu_convention, model_flops_per_token, peak_rate
from fleetlib.quality import DomainError, InputError

__all__ = ["MODEL_KEYS", "check_model_fits", "load_model_config"]

#: Keys a model configuration may hold.
MODEL_KEYS: tuple[str, ...] = ("accelerator", "devices", "useful_flops_per_step", "n_params",
                               "tokens_per_step", "convention", "n_layers", "n_heads", "head_dim",
                               "seq_len", "causal", "name", "precision", "seq_len_source")

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
    if is_url(path):  # read through fsspec where this runs (no local copy); its messages name the URL
        file = str(path)
        text = read_text(file)
    else:
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
    cfg = load_yaml(text, file=file, loader=Yaml12FloatLoader)
    if not isinstance(cfg, Mapping):
        raise InputError("a model configuration is a YAML mapping of keys to values", file=file)
    unknown = sorted(str(k) for k in cfg if k not in MODEL_KEYS)
    if unknown:
        raise InputError(f"unknown key(s) {unknown}; allowed: {list(MODEL_KEYS)}", file=file,
                         field=unknown[0])
    for key in ("accelerator", "devices", "convention"):
        if cfg.get(key) is None:
            raise InputError("is required", file=file, field=key)
    precision = cfg.get("precision")
    try:
        peak = peak_rate(str(cfg["accelerator"]), None if precision is None else str(precision))
    except DomainError as exc:
        raise InputError(str(exc), file=file, field="precision" if precision is not None else "accelerator") \
            from exc
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
    seq_source = cfg.get("seq_len_source")
    bad_source = not isinstance(seq_source, str) or not seq_source.strip() or "," in seq_source
    if seq_source is not None and bad_source:
        raise InputError(f"must be a short text without commas; got {seq_source!r}", file=file,
                         field="seq_len_source")
    if cfg.get("seq_len") is not None and conv_text.lower() in ("palm", "megatron") and given_params:
        said = f"from {seq_source.strip()}" if seq_source else "(source not stated)"
        conv = conv.with_provenance(f"seq_len {int(cfg['seq_len'])} {said}")
    label = cfg.get("name")
    shown = str(label) if label is not None else f"traced steps ({posixpath.basename(file)})"
    return {"peak": peak, "devices": devices, "useful_flops_per_step": useful,
            "flops_per_token": flops_per_token, "tokens_per_step": tokens, "n_params": n_params,
            "convention": conv, "name": shown,
            "file": file}


#: Device-name families of the peak table, as trace device names spell them.
#: Grace Blackwell names come before the Blackwell ones they contain ("GB200" holds "B200").
_FAMILIES: tuple[str, ...] = ("H100", "H200", "A100", "V100", "MI300X", "MI325X", "MI350X", "MI355X", "MI250",
                               "GB200", "GB300", "B200", "B300", "L40", "TPU", "TRAINIUM")


def check_model_fits(config: Mapping[str, Any], n_ranks: int,
                     device_names: list[str]) -> list[tuple[str, str]]:
    """Check a model configuration against the traces it is applied to.

    Parameters
    ----------
    config
        What :func:`load_model_config` returns (``devices``, ``peak``, optionally ``file``).
    n_ranks
        The number of traced ranks.
    device_names
        The device names the traces state (Kineto ``deviceProperties``, nsys ``TARGET_INFO_GPU``).

    Returns
    -------
    list of (code, message)
        Warnings for the ledger: ``model_device_mismatch`` when the traces name a device family
        other than the configuration's accelerator (the configured peak would be used for another
        device), ``model_device_unverified`` when the traces name no known device.

    Raises
    ------
    InputError
        The configuration has fewer devices than the traces have ranks (naming its file and
        ``devices``).
    """
    file = config.get("file")
    devices = int(config["devices"])
    if devices < int(n_ranks):
        raise InputError(f"devices = {devices} is fewer than the {n_ranks} traced ranks: this configuration "
                         f"describes another job", file=file, field="devices")
    accelerator = config["peak"].accelerator if hasattr(config.get("peak"), "accelerator") else ""
    family = next((f for f in _FAMILIES if f in accelerator.upper()), None)
    names = sorted({str(n) for n in device_names if n})
    known = [n for n in names if any(f in n.upper() for f in _FAMILIES)]
    if not known:
        if names:
            return [("model_device_unverified", f"the traces name the device(s) {names}, none of a known "
                                                f"family: the configured peak ({accelerator}) is not checked "
                                                f"against them")]
        return []
    if family is not None and not any(family in n.upper() for n in known):
        return [("model_device_mismatch", f"the model configuration's accelerator {accelerator!r} is not the "
                                          f"device the traces ran on ({', '.join(known)}): its peak is "
                                          f"divided into steps of another device; fix 'accelerator'")]
    return []
