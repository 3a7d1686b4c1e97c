"""Kernel classification for step traces: what each GPU activity is, and what a collective moved.

Every row of the kernel table (:mod:`fleetlib.program.readers.kineto`) gets a ``kind``:

``compute``
    a kernel that is not communication;
``comm``
    a communication kernel: first by its metadata (its own ``Collective name`` argument in a Kineto
    trace, NCCL's own NVTX range around its launch in an Nsight Systems export), whatever its name
    says; otherwise by the configurable name patterns of a :class:`Classifier` (NCCL, RCCL,
    ``ncclDevKernel_*``, ``ncclSymk*``, HCCL, MSCCL++, DeepEP's ``deep_ep::`` dispatch / combine /
    notify kernels, NVSHMEM, custom all-reduce / all-gather / all-to-all ...).  Between the two,
    the readers try the launcher: the op, annotation or Python function that launched the kernel,
    when its name says a collective (:data:`LAUNCHER_RULES`, :func:`collective_from_launcher`).
    The readers' kernel table says which rule decided in ``comm_rule``: ``"metadata:<field>"``
    (:func:`comm_rule_metadata`), ``"launcher:<name>"`` (:func:`comm_rule_launcher`) or
    ``"name:<pattern>"`` (:meth:`Classifier.comm_rules`), empty for kernels that are not
    communication; and in ``classified_by`` (:data:`CLASSIFIED_BY`, :func:`classified_by`);
``memcpy`` / ``memset``
    ``gpu_memcpy`` / ``gpu_memset`` activities (and copy or fill kernels named as such);
``sync``
    a device-side synchronisation record (Kineto's ``cuda_sync`` category: event sync, stream
    wait, context sync);
``other``
    an activity whose category the reader does not know; kept, never counted as compute.

Communication kernels also get a ``collective`` type (:data:`COLLECTIVES`).  The type is taken,
in this order, from the kernel's own ``Collective name`` argument, from the host-side collective
annotation that launched it (``record_param_comms`` with a ``Collective name`` argument, or a
``nccl:<collective>`` user annotation), and only last from the kernel name -- NCCL maintainers say
kernel names do not reliably reveal the operation, and NCCL runs an all-to-all as grouped
send/receive, so a ``ncclKernel_SendRecv`` launched inside ``nccl:all_to_all`` is an all-to-all.

The functions here work on arrays of names and argument values: patterns are matched once per
distinct name and the result is broadcast back with category codes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fleetlib.program.schema import CLASSIFIED_BY, COLLECTIVES, KINDS, SYNC_KINDS
from fleetlib.quality import DomainError

__all__ = [
    "CLASSIFIED_BY",
    "COLLECTIVES",
    "DEFAULT_COMM_PATTERNS",
    "DEFAULT_MEMCPY_PATTERNS",
    "DEFAULT_MEMSET_PATTERNS",
    "DTYPE_BYTES",
    "GRAPH_LAUNCH_PATTERN",
    "KINDS",
    "LAUNCHER_RULES",
    "SYNC_KINDS",
    "Classifier",
    "classified_by",
    "collective_from_annotation",
    "collective_from_arg",
    "collective_from_kernel_name",
    "collective_from_launcher",
    "comm_rule_launcher",
    "comm_rule_metadata",
    "dtype_size_bytes",
    "host_sync_kinds",
    "is_graph_launch",
    "message_bytes",
    "shape_bytes",
]

_PREFIX = r"^(?:void\s+)?(?:[\w<>]+::)*"

#: Default communication-kernel patterns (regular expressions, searched case-insensitively).
#: Library prefixes are anchored at the start of the (possibly namespaced) name; the custom
#: all-reduce families are searched anywhere in it.  Names starting with ``hip`` are *not*
#: communication (HIP runtime and library kernels start that way).
DEFAULT_COMM_PATTERNS: tuple[str, ...] = (
    _PREFIX + r"nccl",            # ncclKernel_*, ncclDevKernel_*, ncclSymkDevKernel_*, ncclSymk*
    _PREFIX + r"rccl",
    _PREFIX + r"hccl",
    _PREFIX + r"msccl",           # MSCCL and MSCCL++
    r"cross_device_reduce",       # vLLM custom all-reduce
    r"custom_?all_?reduce",
    r"(?:one|two)_?shot_?all_?reduce",   # symmetric-memory and TensorRT-LLM all-reduce
    r"multimem_?all_?(?:reduce|gather)",
    r"allreduce_?fusion",
    r"deep_?ep::",                # DeepEP dispatch / combine / notify_dispatch / cached_notify*
    r"nvshmem",                   # NVSHMEM collectives and NVSHMEM-based all-to-all
    r"custom_?all_?(?:gather|to_?all)",  # custom all-gather / all-to-all kernels
)

#: Kernel-name patterns that mark a copy kernel as ``memcpy`` (searched case-insensitively).
DEFAULT_MEMCPY_PATTERNS: tuple[str, ...] = (r"^memcpy\b", r"^dma", r"__amd_rocclr_copybuffer")
#: Kernel-name patterns that mark a fill kernel as ``memset`` (searched case-insensitively).
DEFAULT_MEMSET_PATTERNS: tuple[str, ...] = (r"^memset\b", r"__amd_rocclr_fillbuffer")

#: Runtime calls that replay a captured graph (their kernels are flagged ``cuda_graph``).
GRAPH_LAUNCH_PATTERN = r"^(?:cuda|hip|cu)GraphLaunch"

# order matters: the first match wins (reduce-scatter before all-reduce before reduce)
_NAME_COLLECTIVE_RULES: tuple[tuple[str, str], ...] = (
    (r"reduce_?scatter", "reducescatter"),
    (r"all_?reduce|cross_device_reduce", "allreduce"),
    (r"all_?gather", "allgather"),
    (r"all_?to_?all|deep_?ep::.*(?:dispatch|combine)", "alltoall"),
    (r"broadcast|bcast", "broadcast"),
    (r"send_?recv|(?:^|_)(?:send|recv)(?:_|\(|$)", "sendrecv"),
    (r"(?:^|_)reduce(?:_|\(|$)", "reduce"),
)
_NAME_RULES = tuple((re.compile(p, re.IGNORECASE), c) for p, c in _NAME_COLLECTIVE_RULES)

#: What the name of a launching CPU op, user annotation or Python function must say for the kernels
#: it launches to be communication: ``(pattern, collective)``, searched case-insensitively, the first
#: match wins.  A word is matched whole (``broadcast_tensors``, ``__torch_dispatch__``,
#: ``_python_dispatch.py``, ``Dispatcher`` and ``combinations`` say nothing); expert-parallel
#: ``dispatch`` / ``combine`` (DeepEP, ``dispatch(F)``, ``moe_dispatch``) are token all-to-alls.
LAUNCHER_RULES: tuple[tuple[str, str], ...] = (
    (r"(?<![a-z])reduce[_\- ]?scatter", "reducescatter"),
    (r"(?<![a-z])all[_\- ]?reduce", "allreduce"),
    (r"(?<![a-z])all[_\- ]?gather", "allgather"),
    (r"(?<![a-z])all[_\- ]?to[_\- ]?all", "alltoall"),
    (r"(?<![a-z])broadcast(?![a-z]|_(?:tensors|to|shapes)\b)", "broadcast"),
    (r"(?<![a-z])(?:send[_\- ]?recv|i?send|i?recv)(?![a-z])", "sendrecv"),
    (r"(?:^|[^a-z0-9_]|(?<![a-z0-9])(?:moe|ep|token|expert)_)(?:dispatch|combine)(?![a-z])", "alltoall"),
)
_LAUNCHER_RES = tuple((re.compile(p, re.IGNORECASE), c) for p, c in LAUNCHER_RULES)

# rules for an argument value or annotation suffix with everything but letters and digits removed
_ARG_COLLECTIVE_RULES: tuple[tuple[str, str], ...] = (
    ("reducescatter", "reducescatter"),
    ("allreduce", "allreduce"),
    ("allgather", "allgather"),
    ("alltoall", "alltoall"),
    ("broadcast", "broadcast"),
    ("bcast", "broadcast"),
    ("barrier", "allreduce"),    # a NCCL barrier is a one-element all-reduce
    ("sendrecv", "sendrecv"),
    ("send", "sendrecv"),
    ("recv", "sendrecv"),
    ("gather", "sendrecv"),      # NCCL has no gather/scatter: they run as grouped send/receive
    ("scatter", "sendrecv"),
    ("p2p", "sendrecv"),
    ("reduce", "reduce"),
)

#: Bytes per element, by normalised dtype name (lower case, ``c10::``/``torch.`` and spaces removed).
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "f32": 4, "fp32": 4, "tf32": 4,
    "double": 8, "float64": 8, "f64": 8, "fp64": 8,
    "half": 2, "float16": 2, "f16": 2, "fp16": 2,
    "bfloat16": 2, "bf16": 2,
    "int": 4, "int32": 4, "i32": 4, "unsignedint": 4, "uint32": 4,
    "long": 8, "longint": 8, "int64": 8, "i64": 8, "longlong": 8, "uint64": 8, "unsignedlong": 8,
    "short": 2, "int16": 2, "uint16": 2,
    "char": 1, "int8": 1, "i8": 1, "signedchar": 1, "int8t": 1,
    "byte": 1, "uint8": 1, "u8": 1, "unsignedchar": 1, "uint8t": 1,
    "bool": 1,
    "float8e4m3fn": 1, "float8e5m2": 1, "float8e4m3fnuz": 1, "float8e5m2fnuz": 1, "fp8": 1,
    "float8": 1, "e4m3": 1, "e5m2": 1,
    "complexhalf": 4, "complexfloat": 8, "complex64": 8, "complexdouble": 16, "complex128": 16,
}

_SYNC_RULES: tuple[tuple[str, str, bool], ...] = (
    (r"^(?:cuda|hip)DeviceSynchronize$|^cuCtxSynchronize", "device", True),
    (r"^(?:cuda|hip)StreamSynchronize$|^cuStreamSynchronize", "stream", True),
    (r"^(?:cuda|hip)EventSynchronize$|^cuEventSynchronize", "event", True),
    (r"^(?:cuda|hip)StreamWaitEvent$|^cuStreamWaitEvent", "stream_wait_event", False),
    (r"^(?:cuda|hip)Memcpy$|^cuMemcpy(?:DtoH|HtoD|DtoD)?(?:_v2)?$", "sync_memcpy", True),
)
_SYNC_COMPILED = tuple((re.compile(p), k, b) for p, k, b in _SYNC_RULES)
_GRAPH_RE = re.compile(GRAPH_LAUNCH_PATTERN)


def _compile(patterns: Iterable[str], what: str) -> tuple[re.Pattern[str], ...]:
    # one compiled pattern each: a ``^``-anchored pattern then fails after one position, where an
    # alternation of all of them would be tried at every position of a long templated kernel name
    out = []
    for p in patterns:
        if not isinstance(p, str) or not p:
            raise DomainError(f"{what} patterns must be non-empty regular expressions; got {p!r}")
        try:
            out.append(re.compile(p, re.IGNORECASE))
        except re.error as exc:
            raise DomainError(f"{what} pattern {p!r} is not a valid regular expression: {exc}") from exc
    return tuple(out)


def _uniques(values: Sequence[object] | np.ndarray | pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Return (codes, unique values) of a 1-D sequence; missing values get code -1."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return codes, np.asarray(uniques, dtype=object)


def _broadcast(codes: np.ndarray, per_unique: np.ndarray, missing: object) -> np.ndarray:
    out = np.empty(len(codes), dtype=per_unique.dtype if len(per_unique) else object)
    if len(per_unique):
        out[:] = per_unique[np.where(codes >= 0, codes, 0)]
    out[codes < 0] = missing
    return out


def _match_uniques(uniques: np.ndarray, regexes: tuple[re.Pattern[str], ...]) -> np.ndarray:
    if not regexes:
        return np.zeros(len(uniques), dtype=bool)
    return np.fromiter((any(r.search(str(u)) for r in regexes) for u in uniques), dtype=bool,
                       count=len(uniques))


@dataclass(frozen=True)
class Classifier:
    """Configurable name patterns that decide a GPU activity's ``kind``.

    Parameters
    ----------
    comm_patterns
        Regular expressions (searched case-insensitively) that mark a kernel as communication.
        Defaults to :data:`DEFAULT_COMM_PATTERNS`.
    extra_comm_patterns
        More communication patterns added to ``comm_patterns`` (e.g. an in-house all-reduce).
    memcpy_patterns, memset_patterns
        Kernel-name patterns for copy and fill kernels (activities in the ``gpu_memcpy`` /
        ``gpu_memset`` categories are memcpy / memset whatever their name).

    Examples
    --------
    >>> c = Classifier(extra_comm_patterns=(r"^my_allreduce",))
    >>> c.kinds(["my_allreduce_bf16", "sgemm"], ["kernel", "kernel"]).tolist()
    ['comm', 'compute']
    """

    comm_patterns: tuple[str, ...] = DEFAULT_COMM_PATTERNS
    extra_comm_patterns: tuple[str, ...] = ()
    memcpy_patterns: tuple[str, ...] = DEFAULT_MEMCPY_PATTERNS
    memset_patterns: tuple[str, ...] = DEFAULT_MEMSET_PATTERNS
    _compiled: tuple[tuple[re.Pattern[str], ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("comm_patterns", "extra_comm_patterns", "memcpy_patterns", "memset_patterns"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise DomainError(f"Classifier.{name} must be a sequence of patterns, not one string")
            object.__setattr__(self, name, tuple(value))
        compiled = (
            _compile(self.comm_patterns + self.extra_comm_patterns, "communication"),
            _compile(self.memcpy_patterns, "memcpy"),
            _compile(self.memset_patterns, "memset"),
        )
        object.__setattr__(self, "_compiled", compiled)

    def fingerprint(self) -> str:
        """Return a string that changes whenever the classification would (used in cache keys)."""
        return "|".join(("comm", *self.comm_patterns, *self.extra_comm_patterns, "memcpy",
                         *self.memcpy_patterns, "memset", *self.memset_patterns))

    def is_comm_name(self, names: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
        """Return whether each kernel name matches a communication pattern.

        Parameters
        ----------
        names
            Kernel names (missing names never match).

        Returns
        -------
        numpy.ndarray
            One boolean per name.
        """
        return self._match(names, self._compiled[0])

    def comm_rules(self, names: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
        """Return, per kernel name, the communication rule that matches it (``""`` when none does).

        Parameters
        ----------
        names
            Kernel names (missing names never match).

        Returns
        -------
        numpy.ndarray
            Object array: ``"name:<pattern>"`` naming the first pattern (in the order of
            ``comm_patterns`` then ``extra_comm_patterns``) that the name matches, else ``""``.
            This is the ``comm_rule`` column of a kernel classified by its name; a kernel whose
            metadata decided carries ``"metadata:<field>"`` instead (:func:`comm_rule_metadata`).

        Examples
        --------
        >>> Classifier().comm_rules(["void deep_ep::intranode::dispatch<8>(int*)", "sgemm"]).tolist()
        ['name:deep_?ep::', '']
        """
        codes, uniques = _uniques(names)
        patterns = self.comm_patterns + self.extra_comm_patterns
        per = np.array([next((f"name:{p}" for p, r in zip(patterns, self._compiled[0], strict=True)
                              if r.search(str(u))), "") for u in uniques], dtype=object)
        return _broadcast(codes, per, "")

    def _match(self, names: Sequence[object] | np.ndarray | pd.Series,
               regexes: tuple[re.Pattern[str], ...]) -> np.ndarray:
        codes, uniques = _uniques(names)
        return _broadcast(codes, _match_uniques(uniques, regexes), False).astype(bool)

    def kinds(self, names: Sequence[object] | np.ndarray | pd.Series,
              categories: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
        """Return the ``kind`` (:data:`KINDS`) of each GPU activity.

        Parameters
        ----------
        names
            Activity names.
        categories
            Normalised Kineto categories (``kernel``, ``gpu_memcpy``, ``gpu_memset``,
            ``cuda_sync``; anything else is ``other``).

        Returns
        -------
        numpy.ndarray
            Object array of kind labels.
        """
        cats = np.asarray(pd.Series(categories, dtype=object).fillna("").to_numpy(), dtype=object)
        if len(cats) != len(names):
            raise DomainError(f"names and categories differ in length ({len(names)} != {len(cats)})")
        is_kernel = cats == "kernel"
        codes, uniques = _uniques(names)
        comm, copy, fill = (_broadcast(codes, _match_uniques(uniques, regexes), False).astype(bool)
                            for regexes in self._compiled)
        kind = np.full(len(cats), "other", dtype=object)
        kind[is_kernel] = "compute"
        kind[is_kernel & copy] = "memcpy"
        kind[is_kernel & fill] = "memset"
        kind[is_kernel & comm] = "comm"
        kind[cats == "gpu_memcpy"] = "memcpy"
        kind[cats == "gpu_memset"] = "memset"
        kind[cats == "cuda_sync"] = "sync"
        return kind


def comm_rule_metadata(field_name: str) -> str:
    """Return the ``comm_rule`` of a kernel its metadata classified: ``"metadata:<field>"``.

    Metadata wins over the name patterns: a kernel whose own arguments (or its launching NCCL
    range) name a collective is communication whatever its name says, and its collective type is
    the one the metadata names.

    Parameters
    ----------
    field_name
        The field that decided, e.g. ``"Collective name"`` (Kineto kernel args) or
        ``"nvtx:NCCL"`` (an NCCL-domain NVTX range enclosing the launch, Nsight Systems).
    """
    if not isinstance(field_name, str) or not field_name:
        raise DomainError(f"a metadata rule needs the field's name; got {field_name!r}")
    return f"metadata:{field_name}"


def comm_rule_launcher(name: str) -> str:
    """Return the ``comm_rule`` of a kernel its launcher classified: ``"launcher:<name>"``.

    The launcher is the CPU op, user annotation or Python function enclosing the kernel's launch
    call whose name says a collective (:func:`collective_from_launcher`); it wins over the name
    patterns, and metadata wins over it.

    Parameters
    ----------
    name
        The launcher's name, e.g. ``"dispatch(F)"`` or ``"nccl:all_reduce"``.
    """
    if not isinstance(name, str) or not name:
        raise DomainError(f"a launcher rule needs the launcher's name; got {name!r}")
    return f"launcher:{name}"


def collective_from_launcher(names: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
    """Map the names of launching CPU ops, annotations or Python functions to :data:`COLLECTIVES`.

    Parameters
    ----------
    names
        Names such as ``c10d::allreduce_``, ``nccl:all_to_all``, ``dispatch(F)``, ``combine(B)``,
        ``deep_ep/buffer.py(512): dispatch``.

    Returns
    -------
    numpy.ndarray
        The collective type per name by :data:`LAUNCHER_RULES` (``"none"`` when the name says no
        collective, or is missing).

    Examples
    --------
    >>> collective_from_launcher(["dispatch(F)", "combine(B)", "aten::sum", "__torch_dispatch__"]).tolist()
    ['alltoall', 'alltoall', 'none', 'none']
    """
    codes, uniques = _uniques(names)
    per = np.array([_first_rule(str(u), _LAUNCHER_RES) for u in uniques], dtype=object)
    return _broadcast(codes, per, "none")


def classified_by(rules: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
    """Return which rule made each kernel communication (:data:`CLASSIFIED_BY`), from its ``comm_rule``.

    Parameters
    ----------
    rules
        ``comm_rule`` values: ``"metadata:<field>"``, ``"launcher:<name>"``, ``"name:<pattern>"``,
        or ``""`` for a kernel that is not communication.

    Returns
    -------
    numpy.ndarray
        Object array of ``metadata``, ``launcher``, ``name`` or ``none``.
    """
    codes, uniques = _uniques(rules)
    per = np.array([next((c for c in CLASSIFIED_BY[:3] if str(u).startswith(c + ":")), "none")
                    for u in uniques], dtype=object)
    return _broadcast(codes, per, "none")


def _first_rule(text: str, rules: Sequence[tuple[re.Pattern[str], str]]) -> str:
    for regex, label in rules:
        if regex.search(text):
            return label
    return "none"


def collective_from_kernel_name(names: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
    """Guess the collective type of communication kernels from their names.

    Parameters
    ----------
    names
        Kernel names (``ncclKernel_AllReduce_RING_LL_Sum_float``,
        ``ncclDevKernel_AllGather_RING_LL``, ``ncclDevKernel_SendRecv`` ...).

    Returns
    -------
    numpy.ndarray
        One of :data:`COLLECTIVES` per name; ``"none"`` when the name says nothing
        (``ncclDevKernel_Generic``) or is missing.

    Notes
    -----
    The name is the weakest source: prefer :func:`collective_from_arg` on the kernel's
    ``Collective name`` argument or :func:`collective_from_annotation` on its host annotation.
    """
    codes, uniques = _uniques(names)
    per = np.array([_first_rule(str(u), _NAME_RULES) for u in uniques], dtype=object)
    return _broadcast(codes, per, "none")


def _normalise_label(value: object) -> str:
    return re.sub(r"[^a-z0-9]", "", str(value).lower())


def _arg_rule(value: object) -> str | None:
    text = _normalise_label(value)
    if not text:
        return None
    for key, label in _ARG_COLLECTIVE_RULES:
        if key in text:
            return label
    return None


def collective_from_arg(values: Sequence[object] | np.ndarray | pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Map ``Collective name`` argument values to :data:`COLLECTIVES`.

    Parameters
    ----------
    values
        Values as c10d writes them (``allreduce``, ``_allgather_base``, ``all_to_all``,
        ``reduce_scatter_tensor_coalesced``, ``send``, ``barrier`` ...); missing values allowed.

    Returns
    -------
    collective : numpy.ndarray
        The collective type per value (``"none"`` where missing or not recognised).
    recognised : numpy.ndarray
        Boolean: a non-missing value that was recognised.  A non-missing value that was not
        recognised has ``collective == "none"`` and ``recognised == False``; callers flag it.

    Notes
    -----
    ``barrier`` maps to ``allreduce`` (NCCL runs a barrier as a one-element all-reduce), and
    ``gather`` / ``scatter`` to ``sendrecv`` (NCCL has no such collective; c10d runs them as grouped
    point-to-point operations).
    """
    codes, uniques = _uniques(values)
    labels = [_arg_rule(u) for u in uniques]
    per = np.array([lab if lab is not None else "none" for lab in labels], dtype=object)
    ok = np.array([lab is not None for lab in labels], dtype=bool)
    return _broadcast(codes, per, "none"), _broadcast(codes, ok, False).astype(bool)


def collective_from_annotation(names: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
    """Map host-side ``nccl:<collective>`` annotation names to :data:`COLLECTIVES`.

    Parameters
    ----------
    names
        Annotation names such as ``nccl:all_reduce``, ``nccl:all_to_all``,
        ``nccl:_all_gather_base``, ``nccl:send 0->1``.

    Returns
    -------
    numpy.ndarray
        The collective type per name (``"none"`` when not recognised or not a ``nccl:`` name).
    """
    codes, uniques = _uniques(names)
    per = []
    for u in uniques:
        text = str(u)
        head, sep, tail = text.partition(":")
        lab = _arg_rule(tail.split(" ")[0]) if sep and head.lower() in ("nccl", "rccl", "gloo") else None
        per.append(lab if lab is not None else "none")
    return _broadcast(codes, np.array(per, dtype=object), "none")


def dtype_size_bytes(dtypes: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
    """Bytes per element of each dtype name; NaN where the name is missing or unknown.

    Parameters
    ----------
    dtypes
        Names as traces write them: ``Float``, ``BFloat16``, ``c10::Half``, ``long int``,
        ``unsigned char`` ...

    Returns
    -------
    numpy.ndarray
        float64 sizes (NaN marks an unknown dtype, which callers flag rather than guess).
    """
    codes, uniques = _uniques(dtypes)
    per = np.array([float(DTYPE_BYTES.get(_dtype_key(u), np.nan)) for u in uniques], dtype=float)
    return _broadcast(codes, per, np.nan).astype(float)


def _dtype_key(value: object) -> str:
    text = str(value).lower().strip()
    for prefix in ("c10::", "torch.", "at::", "std::"):
        text = text.replace(prefix, "")
    text = text.replace("_t", "t") if text.endswith("_t") else text
    return re.sub(r"[^a-z0-9]", "", text)


def message_bytes(nelems: Sequence[object] | np.ndarray | pd.Series,
                  dtypes: Sequence[object] | np.ndarray | pd.Series) -> pd.arrays.IntegerArray:
    """Message size in bytes: element count times element size.

    Parameters
    ----------
    nelems
        Element counts (``In msg nelems``); missing values allowed.
    dtypes
        dtype names (``dtype``).

    Returns
    -------
    pandas.arrays.IntegerArray
        ``Int64`` bytes; ``<NA>`` where the count is missing or the dtype unknown.

    Raises
    ------
    DomainError
        If a count is negative.
    """
    n = pd.to_numeric(pd.Series(nelems, dtype=object), errors="coerce").to_numpy(dtype=float)
    if np.any(n[np.isfinite(n)] < 0):
        raise DomainError("message element counts must be >= 0")
    size = dtype_size_bytes(dtypes)
    if len(size) != len(n):
        raise DomainError(f"nelems and dtypes differ in length ({len(n)} != {len(size)})")
    out = n * size
    return pd.array(np.where(np.isfinite(out), out, np.nan), dtype="Float64").round().astype("Int64")


def shape_bytes(dims: Sequence[object], types: Sequence[object]) -> pd.arrays.IntegerArray:
    """Bytes of the first tensor of host ops from their ``Input Dims`` and ``Input type`` args.

    Parameters
    ----------
    dims
        Per op, the ``Input Dims`` list (e.g. ``[[394241]]``); the first entry is used.
    types
        Per op, the ``Input type`` list (e.g. ``["float"]``); the first entry is used.

    Returns
    -------
    pandas.arrays.IntegerArray
        ``Int64`` bytes (product of the first shape times its element size); ``<NA>`` where the
        first shape is empty or missing, or the dtype is unknown.
    """
    if len(dims) != len(types):
        raise DomainError(f"dims and types differ in length ({len(dims)} != {len(types)})")
    count, first_type = first_shape_elements(dims, types)
    return message_bytes(count, first_type)


def first_shape_elements(dims: Sequence[object], types: Sequence[object]) -> tuple[np.ndarray, np.ndarray]:
    """Return each annotation's element count of its first shape (NaN if none) and its first dtype.

    Parameters
    ----------
    dims, types
        ``Input Dims`` and ``Input type`` of host collective annotations, of equal length.

    Returns
    -------
    count : numpy.ndarray
        Float element counts (the product of the first shape's dimensions); NaN where the first
        shape is empty, missing or not a list of integers.
    first_type : numpy.ndarray
        Object array of the first dtype name of each annotation (None where there is none).
    """
    count = np.full(len(dims), np.nan)
    first_type = np.full(len(dims), None, dtype=object)
    # host collective annotations are few (tens per step): a plain loop is clearest here
    for i, (d, t) in enumerate(zip(dims, types, strict=True)):
        if isinstance(d, list) and d and isinstance(d[0], list) and d[0] \
                and all(isinstance(x, int) and not isinstance(x, bool) for x in d[0]):
            count[i] = float(np.prod(np.asarray(d[0], dtype=float)))
        if isinstance(t, list) and t:
            first_type[i] = t[0]
    return count, first_type


def host_sync_kinds(runtime_names: Sequence[object] | np.ndarray | pd.Series,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Classify host runtime calls that synchronise with the device.

    Parameters
    ----------
    runtime_names
        Runtime / driver API names (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
        ``cudaEventSynchronize``, ``cudaStreamWaitEvent``, ``cudaMemcpy``, their ``hip`` and driver
        equivalents ...).

    Returns
    -------
    sync_kind : numpy.ndarray
        One of :data:`SYNC_KINDS`, or ``None`` for a call that does not synchronise.
    blocking : numpy.ndarray
        Boolean: the host thread waits in this call (``stream_wait_event`` only enqueues a
        device-side wait and is not blocking).
    """
    codes, uniques = _uniques(runtime_names)
    kinds: list[object] = []
    blocks: list[bool] = []
    for u in uniques:
        text = str(u)
        hit = next(((k, b) for regex, k, b in _SYNC_COMPILED if regex.search(text)), (None, False))
        kinds.append(hit[0])
        blocks.append(hit[1])
    return (_broadcast(codes, np.array(kinds, dtype=object), None),
            _broadcast(codes, np.array(blocks, dtype=bool), False).astype(bool))


def is_graph_launch(runtime_names: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
    """Return whether each runtime call is a CUDA or HIP graph launch.

    Parameters
    ----------
    runtime_names
        Runtime / driver API names.

    Returns
    -------
    numpy.ndarray
        True for ``cudaGraphLaunch``, ``hipGraphLaunch``, ``cuGraphLaunch`` (and suffixed variants).
    """
    codes, uniques = _uniques(runtime_names)
    per = np.array([_GRAPH_RE.search(str(u)) is not None for u in uniques], dtype=bool)
    return _broadcast(codes, per, False).astype(bool)
