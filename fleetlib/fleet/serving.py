"""The serving twin: a fleet bundle's serving pool measured as S, R and P, apart from training MPG.

A manifest's optional ``serving:`` section (:class:`fleetlib.fleet.manifest.ServingManifest`) names the
serving pool's own scheduler records, its replica lifecycle log, measured decode steps and the served
model.  :func:`measure_serving` measures, each through its rung's door:

* **S** -- the pool's allocated over in-service device-time, from its scheduler records
  (:func:`fleetlib.scheduling.measure`, the bundle's window);
* **R** -- ready over held replica-time, from the lifecycle log (:func:`fleetlib.runtime.measure`,
  format ``serving``: :class:`fleetlib.runtime.ReplicaGoodput`);
* **P** -- MBU of the measured decode steps: steps x bandwidth floor over measured step time, under
  both conventions (the weights-only floor and the weights + KV-cache floor,
  :func:`fleetlib.program.decode_floor`), each with its label.

The three are never multiplied into the training fleet's MPG nor averaged with its factors: P is a
bandwidth ideal (MBU), not MFU, and the pool's capacity is outside the training walk.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fleetlib import program, runtime, scheduling
from fleetlib._io import load_yaml, read_text
from fleetlib.accounting import Window
from fleetlib.fleet.manifest import FleetManifest, load_manifest
from fleetlib.quality import DomainError, InputError, Ledger

__all__ = [
    "DECODE_STEP_COLUMNS",
    "MBU_CONVENTIONS",
    "SERVING_MODEL_KEYS",
    "ServingMeasurement",
    "measure_serving",
    "read_decode_steps",
    "read_serving_model",
]

#: Columns of a decode-steps file: the replica and one measured decode step, whole or fractional microseconds.
DECODE_STEP_COLUMNS: tuple[str, ...] = ("replica_id", "step_us")

#: Keys of a served-model file (``name`` is optional).
SERVING_MODEL_KEYS: tuple[str, ...] = ("accelerator", "n_params", "bytes_per_param", "devices",
                                       "kv_cache_bytes")

#: The two MBU conventions, by the floor they count: ``{key: include_kv_cache}``.
MBU_CONVENTIONS: dict[str, bool] = {"weights-only": False, "weights+kv": True}


@dataclass(frozen=True)
class ServingMeasurement:
    """A serving pool's S, R and P (MBU), each from its own records; never part of training MPG.

    Attributes
    ----------
    scheduling
        The pool's :class:`fleetlib.scheduling.SchedulingMeasurement`.
    runtime
        The replicas' :class:`fleetlib.runtime.ReplicaGoodput`.
    mbu
        ``{"weights-only": MBU, "weights+kv": MBU}``.
    floors_s
        The decode floor of each convention, seconds per step.
    labels
        The convention label of each MBU (:func:`fleetlib.program.mbu_convention`).
    decode_steps, measured_s
        Decode steps read and their total measured time, seconds.
    model
        The served model as read.
    window
        The bundle's window (S is measured in it; the lifecycle log's own span is ``runtime.window``).
    ledger
        The scheduler, lifecycle and decode-step ledgers merged.
    """

    scheduling: Any
    runtime: runtime.ReplicaGoodput
    mbu: dict[str, float]
    floors_s: dict[str, float]
    labels: dict[str, str]
    decode_steps: int
    measured_s: float
    model: dict[str, Any]
    window: Window | None
    ledger: Ledger

    def factors(self, convention: str = "weights-only") -> dict[str, float]:
        """Return ``{"scheduling": S, "runtime": R, "program": MBU}`` under one MBU convention.

        Parameters
        ----------
        convention
            ``"weights-only"`` (the chapter's floor) or ``"weights+kv"``.

        Returns
        -------
        dict
            The replica pool's three factors; their product is *not* a training MPG.
        """
        if convention not in self.mbu:
            raise DomainError(f"convention must be one of {list(self.mbu)}; got {convention!r}")
        return {"scheduling": float(self.scheduling.factor().value),
                "runtime": float(self.runtime.factor().value), "program": self.mbu[convention]}

    def to_dict(self) -> dict[str, Any]:
        """Return the measurement as a JSON-ready dictionary."""
        s, r = self.scheduling.factor(), self.runtime.factor()
        return {
            "scheduling": {"value": s.value, "numerator": s.numerator, "denominator": s.denominator,
                           "record": "serving pool scheduler records"},
            "runtime": {"value": r.value, "held_s": self.runtime.held_s, "ready_s": self.runtime.ready_s,
                        "replicas": len(self.runtime.by_replica), "record": "replica lifecycle log",
                        "losses": dict(r.losses)},
            "program": {key: {"mbu": self.mbu[key], "floor_s": self.floors_s[key], "label": self.labels[key]}
                        for key in self.mbu},
            "decode_steps": self.decode_steps,
            "measured_s": self.measured_s,
            "model": dict(self.model),
            "window": None if self.window is None else self.window.to_dict(),
            "in_training_mpg": False,
            "ledger": self.ledger.to_dict(),
        }


def read_serving_model(path: str | Path) -> dict[str, Any]:
    """Read a served-model file (YAML: :data:`SERVING_MODEL_KEYS`, optional ``name``).

    Parameters
    ----------
    path
        The model file.

    Returns
    -------
    dict
        ``accelerator`` (text), ``n_params``, ``bytes_per_param``, ``kv_cache_bytes`` (floats), ``devices``
        (int) and ``name`` when given.

    Raises
    ------
    InputError
        Not a mapping, a missing or unknown key, or a value of the wrong kind -- one line naming the file
        and the key.
    """
    file = str(path)
    data = load_yaml(read_text(path), file=file)
    if not isinstance(data, dict):
        raise InputError(f"must be a mapping of {list(SERVING_MODEL_KEYS)}; got {type(data).__name__}",
                         file=file)
    unknown = sorted(set(map(str, data)) - set(SERVING_MODEL_KEYS) - {"name"})
    if unknown:
        raise InputError(f"unknown key; allowed: {', '.join(SERVING_MODEL_KEYS)}, name", file=file,
                         field=unknown[0])
    out: dict[str, Any] = {} if data.get("name") is None else {"name": str(data["name"])}
    for key in SERVING_MODEL_KEYS:
        value = data.get(key)
        if value is None:
            raise InputError("is required", file=file, field=key)
        if key == "accelerator":
            if not isinstance(value, str):
                raise InputError(f"must be an accelerator name; got {value!r}", file=file, field=key)
            out[key] = value
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            raise InputError(f"must be a finite number >= 0; got {value!r}", file=file, field=key)
        if key == "devices" and (value != int(value) or value < 1):
            raise InputError(f"must be a whole number >= 1; got {value!r}", file=file, field=key)
        out[key] = int(value) if key == "devices" else float(value)
    return out


def read_decode_steps(path: str | Path) -> tuple[pd.DataFrame, Ledger]:
    """Read measured decode steps (CSV with :data:`DECODE_STEP_COLUMNS`).

    Parameters
    ----------
    path
        The decode-steps file.

    Returns
    -------
    (pandas.DataFrame, Ledger)
        ``replica_id`` (text) and ``step_s`` (seconds) per step, and the ledger (every row kept).

    Raises
    ------
    InputError
        A missing column, no step, or a step that is not a finite number > 0 -- one line naming the file,
        the row (the file's line), the field and the value.
    """
    file = str(path)
    table = pd.read_csv(io.StringIO(read_text(path)), dtype=str, keep_default_na=False)
    missing = [c for c in DECODE_STEP_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"missing column; the file needs {list(DECODE_STEP_COLUMNS)}", file=file,
                         field=missing[0])
    if table.empty:
        raise InputError("holds no decode step", file=file)
    step_us = pd.to_numeric(table["step_us"], errors="coerce")
    bad = ~(step_us > 0) | ~step_us.map(math.isfinite)
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise InputError(f"must be a finite number of microseconds > 0; got {table['step_us'].iloc[i]!r}",
                         file=file, row=i + 2, field="step_us")
    ledger = Ledger(read=len(table), kept=len(table))
    return pd.DataFrame({"replica_id": table["replica_id"], "step_s": step_us.to_numpy(float) / 1e6}), ledger


def measure_serving(manifest: FleetManifest | str | Path) -> ServingMeasurement:
    """Measure a fleet bundle's serving pool: S, R and P as MBU under both floor conventions.

    Parameters
    ----------
    manifest
        A loaded manifest, or the path of ``fleet.yaml`` (or its folder).

    Returns
    -------
    ServingMeasurement
        The pool's three factors, each from its own record, with the MBU conventions named.

    Raises
    ------
    DomainError
        The manifest has no ``serving:`` section (say so and skip the serving page).
    InputError
        A bad record, as each reader reports it.
    """
    m = manifest if isinstance(manifest, FleetManifest) else load_manifest(manifest)
    sv = m.serving
    if sv is None:
        raise DomainError(f"the fleet bundle {m.name!r} has no serving: section; there is no serving pool "
                          "to measure")
    sched = scheduling.measure(list(sv.scheduler_files), format=sv.scheduler_format, tz=sv.scheduler_tz,
                               window=m.window)
    replicas = runtime.measure(sv.lifecycle, format="serving")
    model = read_serving_model(sv.model)
    steps, step_ledger = read_decode_steps(sv.decode_steps)
    peak = program.peak_rate(model["accelerator"])
    measured_s = float(steps["step_s"].sum())
    mbu, floors, labels = {}, {}, {}
    for key, with_kv in MBU_CONVENTIONS.items():
        kv = model["kv_cache_bytes"] if with_kv else 0.0
        floor = program.decode_floor(model["n_params"], model["bytes_per_param"], model["devices"],
                                     peak.hbm_bytes_per_s, kv_cache_bytes=kv)
        floors[key] = floor.floor_s
        mbu[key] = float(program.mbu(floor.floor_s * len(steps), measured_s))
        labels[key] = program.mbu_convention(peak, include_kv_cache=with_kv).label
    return ServingMeasurement(
        scheduling=sched, runtime=replicas, mbu=mbu, floors_s=floors, labels=labels, decode_steps=len(steps),
        measured_s=measured_s, model=model, window=m.window,
        ledger=Ledger.merged([sched.ledger, replicas.ledger, step_ledger]),
    )
