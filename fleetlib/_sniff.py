"""Cheap byte sniffs for the formats whose reader module does not carry its own ``sniff``.

Each sniff takes the first bytes of a file (decompressed, at most :data:`HEAD_BYTES`) and answers
whether they look like one file of the format.  :func:`fleetlib.registry.detect` asks a registered
reader's own ``ReaderSpec.sniff`` first and falls back to :data:`SNIFFS`, keyed by ``(rung, format)``.
A sniff must be cheap, never raise, and say False when unsure: detection that guesses wrong is worse
than asking for ``--format``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

__all__ = ["HEAD_BYTES", "PARQUET_MAGIC", "SNIFFS", "first_line", "header_columns", "is_parquet"]

#: How many (decompressed) bytes of a file a sniff sees.
HEAD_BYTES = 1 << 16
#: The first (and last) four bytes of every Parquet file.
PARQUET_MAGIC = b"PAR1"


def is_parquet(head: bytes) -> bool:
    """Return True when ``head`` starts with the Parquet magic bytes."""
    return head[:4] == PARQUET_MAGIC


def first_line(head: bytes) -> str:
    """Return the first non-blank, non-comment line of ``head`` as text ('' when there is none)."""
    text = head.decode("utf-8", errors="replace")
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()
    return ""


def header_columns(head: bytes, sep: str = ",") -> set[str]:
    """Return the lower-cased column names of the first line of ``head`` split by ``sep``."""
    return {c.strip().strip('"').lower() for c in first_line(head).split(sep)}


def _text(head: bytes) -> str:
    return head.decode("utf-8", errors="replace")


# -- scheduling ------------------------------------------------------------------------------------


def _slurm(head: bytes) -> bool:
    cols = header_columns(head, "|")
    return (
        "jobid" in cols
        or {"nodename", "timestart"} <= cols
        or ("partition" in cols and "gres" in cols and bool({"nodelist", "hostnames"} & cols))
    )


def _kueue(head: bytes) -> bool:
    text = _text(head)
    return "kueue.x-k8s.io" in text and ("Workload" in text or "ClusterQueue" in text)


def _volcano(head: bytes) -> bool:
    text = _text(head)
    return text.lstrip()[:1] == "{" and "scheduling.volcano.sh" in text


def helios_quota(head: bytes) -> bool:
    """Return True when ``head`` looks like a Helios daily quota file (``date,...,vc*,...,total``).

    Both Helios formats take it beside their main files (the minute sequences, the job log).
    """
    cols = header_columns(head)
    return first_line(head).lower().startswith("date,") and "total" in cols and any(
        c.startswith("vc") for c in cols
    )


def _helios(head: bytes) -> bool:
    cols = header_columns(head)
    return {"time", "total_gpu_num", "running_gpu_num", "idle_gpu_num"} <= cols or helios_quota(head)


def _openb(head: bytes) -> bool:
    cols = header_columns(head)
    return {"name", "num_gpu", "gpu_milli", "creation_time"} <= cols or {"sn", "gpu", "model"} <= cols


# -- runtime ---------------------------------------------------------------------------------------


def _mlperf(head: bytes) -> bool:
    return ":::MLLOG" in _text(head)


def _mlgoodput(head: bytes) -> bool:
    line = first_line(head)
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and "job_name" in obj and any(str(k).endswith("_time") for k in obj)


def _runtime_canonical(head: bytes) -> bool:
    cols = header_columns(head)
    steps = {"job_id", "attempt", "step", "start", "end"} <= cols
    events = {"job_id", "attempt", "time", "kind"} <= cols and "time_of_day" not in cols
    return is_parquet(head) or steps or events


def _bloom(head: bytes) -> bool:
    return {"date", "time_of_day", "tz", "kind"} <= header_columns(head)


def _serving(head: bytes) -> bool:
    return {"time", "replica_id", "phase"} <= header_columns(head)


# -- program ---------------------------------------------------------------------------------------


def _torchtitan(head: bytes) -> bool:
    line = first_line(head)
    if not line.startswith("{"):
        return False
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return (
        isinstance(obj, dict)
        and "log_type_name" in obj
        and "time_us" in obj
        and str(obj.get("logger_name", "")).startswith("torchtitan")
    )


def _nsys_sqlite(head: bytes) -> bool:
    # Every SQLite 3 database opens with this 16-byte header.
    return head[:16] == b"SQLite format 3\x00"


def _kineto(head: bytes) -> bool:
    text = _text(head).lstrip()
    return text[:1] == "{" and ('"traceEvents"' in text or '"deviceProperties"' in text)


def _rank_timers(head: bytes) -> bool:
    return is_parquet(head) or {"rank", "step", "duration_s"} <= header_columns(head)


#: ``(rung, format) -> sniff`` for the formats whose ``ReaderSpec`` has no ``sniff`` of its own.
SNIFFS: dict[tuple[str, str], Callable[[bytes], bool]] = {
    ("scheduling", "slurm"): _slurm,
    ("scheduling", "kueue"): _kueue,
    ("scheduling", "volcano"): _volcano,
    ("scheduling", "helios-sequence"): _helios,
    ("scheduling", "openb"): _openb,
    ("scheduling", "canonical"): is_parquet,
    ("runtime", "mlperf"): _mlperf,
    ("runtime", "mlgoodput"): _mlgoodput,
    ("runtime", "canonical"): _runtime_canonical,
    ("runtime", "bloom"): _bloom,
    ("runtime", "serving"): _serving,
    ("runtime", "torchtitan"): _torchtitan,
    ("program", "kineto"): _kineto,
    ("program", "nsys"): _nsys_sqlite,
    ("program", "rank_timers"): _rank_timers,
}
