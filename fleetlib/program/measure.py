"""Program goodput measured from step traces: one result with its factor, ledger and window.

:func:`measure` reads the traces (or takes a :class:`~fleetlib.program.readers.kineto.TraceSet`
already read), matches collectives across ranks, partitions every rank's traced steps
(:func:`fleetlib.program.collectives.analyse_traced_steps`) and, given a model configuration,
builds the program factor against the arithmetic ideal
(:func:`fleetlib.program.breakdown.program_goodput_factor`).  The
:class:`ProgramMeasurement` it returns carries the per-rank, per-step partition it used, the
reader's ledger and the calendar window of the traced steps.

The window
----------
A trace carries a calendar clock when its timestamps count from the unix epoch: Kineto's
``baseTimeNanoseconds`` (the HTA AllReduce trace), or absolute unix microseconds (the bundled DLRM
and pipeline traces, whose earliest second is their origin).  Then the window is the measured span
of the traced steps in UTC -- the first step start to the last step end over all ranks, on the
common time base of :func:`~fleetlib.program.readers.kineto.read_traces` (no clock-skew correction).
A trace whose timestamps count from an unknown origin (a synthetic trace, a relative clock) has no
calendar clock: the window is then nominal, and its label says so.  A ``window`` given by the
caller (anything :meth:`fleetlib.accounting.Window.parse` takes) is the window the sampled steps
belong to -- the calendar window of the other two factors, say; the measured span must lie inside
it.

Examples
--------
>>> from fleetlib.program import measure  # doctest: +SKIP
>>> m = measure("data/traces/dlrm_8rank", model="data/traces/models/dlrm_example.yaml")  # doctest: +SKIP
>>> m.factor().value, m.window.start  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

import pandas as pd

from fleetlib.accounting import Factor, Window
from fleetlib.quality import DomainError, Ledger

if TYPE_CHECKING:
    from fleetlib.program.readers.kineto import TraceSet
    from fleetlib.program.triage import Triage

__all__ = ["NO_CLOCK_LABEL", "ProgramMeasurement", "device_ridge", "measure", "traced_window"]

#: What the label of a nominal window says when the traces carry no calendar clock.
NO_CLOCK_LABEL: str = "the traces carry no calendar clock"


@dataclass
class ProgramMeasurement:
    """What :func:`measure` returns: the partition of the traced steps and what it rests on.

    Attributes
    ----------
    partition
        One row per rank and traced step: the six parts of
        :data:`fleetlib.program.schema.PARTITION_PARTS`, ``step_wall_us`` (their sum),
        ``overlapped_comm_us``, ``cuda_graph`` and ``dispatch_rule``.
    waits
        Each rank's wait in each matched collective instance.
    stragglers
        One row per rank (:func:`fleetlib.program.collectives.straggler_report`).
    audit
        The collective audit (:func:`fleetlib.program.collectives.collective_audit`).
    ledger
        The reader's ledger (every event of every file accounted for).
    window
        The calendar window of the traced steps (see the module docstring).
    traces
        The trace set measured.
    model
        The model configuration (:func:`fleetlib.program.model_config.load_model_config`), or None.
    matched_by
        How collectives were matched across ranks (``seq`` or ``occurrence``).
    matched
        The matched collective kernels.
    """

    partition: pd.DataFrame
    waits: pd.DataFrame
    stragglers: pd.DataFrame
    audit: pd.DataFrame
    ledger: Ledger
    window: Window
    traces: TraceSet
    model: Mapping[str, Any] | None = None
    matched_by: str = "auto"
    matched: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    @property
    def has_clock(self) -> bool:
        """True when the window is the measured calendar span of the traced steps."""
        return not self.window.is_nominal

    def factor(self) -> Factor:
        """Return program goodput of the traced steps under the arithmetic ideal.

        Built by :func:`fleetlib.program.breakdown.program_goodput_factor` from :attr:`partition`,
        the model's useful FLOPs per step, devices, peak and convention, over :attr:`window`.

        Raises
        ------
        DomainError
            No model configuration was given, or it does not fit the traces (fewer devices than
            traced ranks, a step without wall time).
        """
        from fleetlib.program.breakdown import program_goodput_factor

        if self.model is None:
            raise DomainError("program goodput needs the useful FLOPs per step: measure(..., model=CONFIG)")
        m = self.model
        conv = m["convention"]
        sources = sorted(set(self.traces.steps["source"].astype(str))) if len(self.traces.steps) else []
        step_time = (f"step time from {len(self.partition)} traced rank-step windows "
                     f"({' and '.join(sources) or 'no steps'})")
        return program_goodput_factor(self.partition, useful_flops_per_step=m["useful_flops_per_step"],
                                      devices=m["devices"], peak=m["peak"],
                                      convention=getattr(conv, "label", conv), window=self.window,
                                      step_time_source=step_time, config_file=m.get("file"))

    def fleet_law(self) -> pd.DataFrame:
        """Return the Fleet Law terms of every traced rank-step.

        See :func:`fleetlib.program.fleet_law.fleet_law_terms`.

        Ranks with point-to-point transfers among their matched collectives are pipeline stages:
        their idle at the edges of a step is a bubble, charged to ``sync``.
        """
        from fleetlib.program.fleet_law import fleet_law_terms, pipeline_ranks

        return fleet_law_terms(self.partition, pipeline=pipeline_ranks(self.matched))

    def findings(self, input_wait: pd.DataFrame | None = None, memory: pd.DataFrame | None = None) -> Triage:
        """Return the Table 7 patterns found in the traced steps, ranked by evidence.

        See :func:`fleetlib.program.triage.triage`.

        Parameters
        ----------
        input_wait
            The job timeline's input-wait field (``rank, step, input_wait_us``), to confirm or rule
            out an input stall; None leaves one unconfirmed.
        memory
            Device memory events (:func:`fleetlib.program.memory.read_memory_events`), for the two
            memory patterns; None: they are not observable.
        """
        from fleetlib.program.triage import triage

        return triage(self.traces.kernels, self.traces.steps, self.partition, matched=self.matched,
                      ops=self.traces.ops, input_wait=input_wait, memory=memory,
                      thresholds={"ridge_flop_per_byte": self.ridge[0]})

    @property
    def ridge(self) -> tuple[float, str]:
        """The ridge point (FLOP/byte) the kernels' roofs were decided by, and where it comes from.

        See :func:`device_ridge`: the model configuration's peak when one is given.
        """
        return device_ridge(self.model)

    def utilisation(self, bin_us: float = 1000.0) -> pd.DataFrame:
        """Return each rank's time-binned compute, communication, overlap and idle.

        See :func:`fleetlib.program.utilisation.utilisation_map`.
        """
        from fleetlib.program.utilisation import utilisation_map

        return utilisation_map(self.traces.kernels, self.traces.steps, bin_us=bin_us)

    def summary(self) -> dict[str, Any]:
        """Return the per-rank sums, stragglers, collectives, flags and partition records.

        The dictionary :func:`fleetlib.program.collectives.program_summary` returns for the same
        tables.
        """
        from fleetlib.program.collectives import summarise_traced_steps
        parts = {"matched": self.matched, "waits": self.waits, "partition": self.partition,
                 "stragglers": self.stragglers, "audit": self.audit}
        return summarise_traced_steps(parts, by=self.matched_by)

    def to_dict(self) -> dict[str, Any]:
        """Return the measurement as a JSON-ready dictionary.

        Returns
        -------
        dict
            ``window``, ``has_clock``, ``files``, ``ranks``, ``steps`` (traced rank-steps),
            the :meth:`summary` keys (``ranks``, ``stragglers``, ``collectives``, ``flags``,
            ``partition``), ``findings`` and ``not_observable`` (:meth:`findings`), ``ledger``
            (complete) and ``factor`` (None without a model).
        """
        out: dict[str, Any] = {"window": self.window.to_dict(), "has_clock": self.has_clock,
                               "files": [str(tr.path) for tr in self.traces.reads],
                               "steps": len(self.partition)}
        out.update(self.summary())
        out.update(self.findings().to_dict())
        ridge, source = self.ridge
        out["fleet_law_ridge"] = {"flop_per_byte": ridge, "source": source}
        out["ledger"] = self.ledger.to_dict()
        out["factor"] = self.factor().to_dict() if self.model is not None else None
        return out


def device_ridge(model: Mapping[str, Any] | None) -> tuple[float, str]:
    """Return the ridge point that puts a shaped kernel on the compute roof, and its source.

    Parameters
    ----------
    model
        A model configuration (:func:`fleetlib.program.model_config.load_model_config`), or None.

    Returns
    -------
    tuple of (float, str)
        The configured peak's ridge (dense arithmetic peak over HBM bandwidth, FLOP/byte) and its
        named peak; without a configured :class:`~fleetlib.program.peaks.PeakRate`, the default
        (:data:`fleetlib.program.roofline.DEFAULT_RIDGE_FLOP_PER_BYTE`, the H100 SXM's dense BF16).
    """
    from fleetlib.program.peaks import PeakRate
    from fleetlib.program.roofline import DEFAULT_RIDGE_FLOP_PER_BYTE

    peak = None if model is None else model.get("peak")
    if isinstance(peak, PeakRate):
        return peak.ridge_flop_per_byte, f"{peak.named} over {peak.bandwidth_label} (the model configuration)"
    return DEFAULT_RIDGE_FLOP_PER_BYTE, "H100 SXM dense BF16 over its HBM (default: no configured peak)"


def traced_window(traces: TraceSet, *, label: str | None = None) -> Window:
    """Return the calendar window of the traced steps, or a nominal one when there is no clock.

    Parameters
    ----------
    traces
        What :func:`~fleetlib.program.readers.kineto.read_traces` returned.
    label
        The window's label (default: the span itself, or for a nominal window a description of the
        traced steps that says they carry no calendar clock).

    Returns
    -------
    Window
        ``[first step start, last step end)`` in UTC when every file's time base is a calendar clock
        (:func:`fleetlib.program.readers.kineto.has_calendar_clock`); otherwise a nominal window.
    """
    from fleetlib.program.readers.kineto import has_calendar_clock, utc

    steps = traces.steps
    if steps.empty or not has_calendar_clock(traces):
        ranks = len(traces.metadata)
        what = label or f"{len(steps)} traced rank-step(s) of {ranks} rank(s)"
        return Window.nominal(f"{what} ({NO_CLOCK_LABEL})")
    start, end = utc(traces, [steps["start_us"].min(), steps["end_us"].max()])
    return Window.between(start, end, label=label)


def _model(model: str | PathLike[str] | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if model is None or isinstance(model, Mapping):
        if model is not None:
            needed = ("useful_flops_per_step", "devices", "peak", "convention")
            missing = [k for k in needed if k not in model]
            if missing:
                raise DomainError(f"model configuration lacks {missing}; read it with "
                                  "fleetlib.program.model_config.load_model_config")
        return model
    from fleetlib.program.model_config import load_model_config

    return load_model_config(model)


def measure(traces_or_paths: TraceSet | str | PathLike[str] | Iterable[str | PathLike[str]], *,
            model: str | PathLike[str] | Mapping[str, Any] | None = None, window: Any = None,
            cache: bool = True, cache_dir: str | PathLike[str] | None = None, progress: bool = False,
            by: str = "auto", dispatch_gap_us: float | None = None,
            threshold: float | None = None, client: Any = None,
            classifier: Any = None) -> ProgramMeasurement:
    """Measure the traced steps: partition, stragglers, ledger, window and (with a model) the factor.

    Parameters
    ----------
    traces_or_paths
        A :class:`~fleetlib.program.readers.kineto.TraceSet`, or trace files and/or folders of
        them (one file per rank), read with
        :func:`~fleetlib.program.readers.kineto.read_traces`.
    model
        A model configuration file (:func:`fleetlib.program.model_config.load_model_config`) or the
        mapping it returns; without one, :meth:`ProgramMeasurement.factor` is refused.
    window
        The calendar window the traced steps belong to (anything
        :meth:`fleetlib.accounting.Window.parse` takes).  None: the measured span of the traced
        steps in UTC, or a nominal window when the traces carry no calendar clock.  When given and
        the traces carry a clock, their span must lie inside it (inside one included piece when the
        window has exclusions: a sample across an excluded stretch is refused); its label then names
        the window.
    cache, cache_dir, progress, client
        Passed to :func:`~fleetlib.program.readers.kineto.read_traces` when paths are given; with a
        ``distributed.Client`` the rank files are parsed as Dask tasks (same tables).
    classifier
        A :class:`~fleetlib.program.classify.Classifier` for the readers (extra communication
        patterns); None: the default patterns.
    by, dispatch_gap_us, threshold
        Collective matching rule, fallback host-dispatch gap (µs) and straggler threshold
        (:func:`fleetlib.program.collectives.analyse_traced_steps`; None: their defaults).

    Returns
    -------
    ProgramMeasurement
        With ``.factor()``, ``.ledger``, ``.window``, ``.partition`` and ``.to_dict()``.

    Raises
    ------
    InputError
        A trace or the model configuration cannot be read.
    DomainError
        The traced steps lie outside the given window, or an option is out of its domain.
    """
    from fleetlib.program.collectives import DEFAULT_STRAGGLER_THRESHOLD, analyse_traced_steps
    from fleetlib.program.readers.kineto import TraceSet, read_traces, trace_files

    config = _model(model)  # fail fast, before parsing traces
    asked = Window.parse(window)
    if isinstance(traces_or_paths, TraceSet):
        traces = traces_or_paths
    else:
        paths = [traces_or_paths] if isinstance(traces_or_paths, (str, PathLike)) else list(traces_or_paths)
        files = trace_files(list(paths))  # paths and fsspec URLs (read where the task runs)
        if all(str(f).lower().endswith((".sqlite", ".sqlite.gz")) for f in files):  # Nsight Systems exports
            from fleetlib.program.readers.nsys import read_nsys

            traces = read_nsys(files, classifier=classifier)
        else:
            traces = read_traces(files, cache=cache, cache_dir=cache_dir, progress=progress, client=client,
                                 classifier=classifier)
    if config is not None and "peak" in config:
        from fleetlib.program.model_config import check_model_fits

        names = [str(d.get("name")) for md in traces.metadata.values()
                 for d in (md.get("device_properties") or []) if isinstance(d, Mapping) and d.get("name")]
        have = {(f.code, f.message) for f in traces.ledger.flags}
        for code, message in check_model_fits(config, len(traces.metadata), names):
            if (code, message) not in have:
                traces.ledger.flag(code, message, file=config.get("file"))
    name = None if config is None else config.get("name")
    measured = traced_window(traces, label=name)
    if asked is None:
        used = measured
    elif measured.is_nominal or asked.is_nominal:
        used = asked
    elif asked.contains(measured):
        used = asked
    else:
        span = f"{measured.start.isoformat()} .. {measured.end.isoformat()}"  # type: ignore[union-attr]
        raise DomainError(f"the traced steps span {span}, which is not inside the window "
                          f"{asked.describe()!r}")
    from fleetlib.program.breakdown import DEFAULT_DISPATCH_GAP_US

    parts = analyse_traced_steps(
        traces.kernels, traces.steps, by=by,  # type: ignore[arg-type]
        dispatch_gap_us=DEFAULT_DISPATCH_GAP_US if dispatch_gap_us is None else dispatch_gap_us,
        threshold=DEFAULT_STRAGGLER_THRESHOLD if threshold is None else threshold, ops=traces.ops,
        ridge_flop_per_byte=device_ridge(config)[0])
    matched = parts["matched"]
    from fleetlib.program.breakdown import steps_without_device_activity

    flagged = {(f.code, f.rank, f.message) for f in traces.ledger.flags}
    for r, s, wall in steps_without_device_activity(parts["partition"]).itertuples(index=False):
        message = (f"rank {int(r)} step {int(s)}: no kernel, copy or collective ran in its {float(wall):g} "
                   f"µs window (all host dispatch and idle): a step without device activity, not a slow one")
        if ("step_without_device_activity", int(r), message) not in flagged:
            traces.ledger.flag("step_without_device_activity", message, rank=int(r))
    return ProgramMeasurement(parts["partition"], parts["waits"], parts["stragglers"], parts["audit"],
                              traces.ledger, used, traces, config, matched.attrs.get("matched_by", by),
                              matched)
