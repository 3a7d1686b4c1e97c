"""Write the torchtitan structured-log sample in this folder (run once; the files are committed).

A hand-written sample for fleetlib: no public torchtitan structured log exists.  The record fields
follow torchtitan's ``TraceJsonlFormatter`` (torchtitan/observability/structured_logger/jsonl_handler.py
at pytorch/torchtitan@b5bcd76) and the spans its trainer opens (torchtitan/trainer.py); the numbers are
invented.  Two ranks, two processes each: the first crashes in step 27 on rank 0 (rank 1 is stopped
inside the same step), the second resumes from the checkpoint of step 20 and runs to step 30.

    python data/timelines/torchtitan_llama3_8b_demo/generate.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
T0_US = 1_772_445_600_000_000  # 2026-03-02T10:00:00Z


class Rank:
    """The records of one process of one rank, written in time order."""

    def __init__(self, rank: int, pid: int, start_s: float):
        self.rank, self.pid, self.t, self.seq = rank, pid, start_s, 0
        self.step: int | None = None
        self.rel: int | None = None
        self.lines: list[str] = []
        self.last_us: int | None = None

    def emit(self, log_type: str, name: str, *, value: float | None = None, event_name: str | None = None,
             message: str | None = None, func: str = "train") -> None:
        """Append one record, as TraceJsonlFormatter would write it."""
        us = T0_US + round(self.t * 1e6)
        rec = {"delta_ms": 0.0 if self.last_us is None else (us - self.last_us) / 1000.0,
               "tid": self.pid, "rank": self.rank, "global_rank": self.rank, "local_rank": self.rank,
               "source": "training", "host_name": "node-017", "pid": self.pid}
        if self.step is not None:
            rec["step"] = self.step
            rec["relative_step"] = self.rel
        rec.update({"time": us // 1_000_000, "time_ms": us // 1000, "time_us": us, "log_type": log_type,
                    "log_type_name": name, "event_name": event_name})
        if value is not None:
            rec["value"] = float(value)
        rec.update({"caller": f"torchtitan/trainer.py:1033:{func}", "log_file": "trainer.py",
                    "log_function": func, "log_level": "INFO", "logger_name": "torchtitan.structured_logger",
                    "seq_id": self.seq,
                    "message": message or f"[step {self.step if self.step is not None else 'N/A'}] {name}"})
        self.seq += 1
        self.last_us = us
        self.lines.append(json.dumps(rec))

    def span(self, name: str, seconds: float, *, error: str | None = None) -> None:
        """Append a span that lasts ``seconds`` (with an ``_error`` before its end when given)."""
        self.emit("event", f"{name}_start")
        self.t += seconds
        if error:
            self.emit("event", f"{name}_error", message=f"[step {self.step}] {name}_error: {error}")
        self.emit("event", f"{name}_end", value=seconds * 1000.0)

    def instant(self, name: str) -> None:
        """Append a point-in-time marker."""
        self.emit("instant", name)

    def write(self, stamp: str) -> None:
        """Write the records to this rank's file."""
        path = HERE / f"training.global_rank_{self.rank}.{stamp}.jsonl"
        path.write_text("\n".join(self.lines) + "\n")


def startup(r: Rank, load_s: float) -> None:
    """Append a process's start-up: distributed init, model build, checkpoint load."""
    r.instant("structured_logger_started")
    r.t += 0.2
    r.span("torch_distributed_init", 6.3)
    r.span("model_parallelism_init", 2.4)
    r.span("Transformer.build", 5.0)
    r.instant("training_start")
    r.span("checkpoint_load", load_s)


def train_step(r: Rank, step: int, loaded: int, *, fetch_s: float = 0.004, fwd_bwd_s: float = 1.32,
               checkpoint_s: float = 0.0, eval_s: float = 0.0, crash: str | None = None,
               killed: bool = False) -> None:
    """Append one training step with the trainer's nested spans."""
    r.step, r.rel = step, step - loaded
    r.emit("event", "step_start")
    r.t += 0.001
    r.span("fetching_batch", fetch_s)
    r.emit("instant", "metric_value", event_name="local_valid_tokens", value=8192.0)
    if killed:  # the launcher stopped this rank inside fwd_bwd: nothing more is written
        r.emit("event", "fwd_bwd_start")
        return
    if crash:
        r.span("fwd_bwd", 0.9, error=crash)
        r.emit("event", "step_error", message=f"[step {step}] step_error: {crash}")
        r.t += 0.002
        r.emit("event", "step_end", value=0.0)
        return
    r.span("fwd_bwd", fwd_bwd_s)
    r.span("optim", 0.11)
    r.span("collect_dist_metrics", 0.03)
    r.emit("instant", "metric_value", event_name="train.loss", value=round(7.9 - 0.12 * step, 3))
    if checkpoint_s:
        r.span("checkpoint_save", checkpoint_s)
    if eval_s:
        r.span("eval", eval_s)
    r.t += 0.002
    r.emit("event", "step_end", value=0.0)


def main() -> None:
    """Write the four files."""
    for old in HERE.glob("training.global_rank_*.jsonl"):
        old.unlink()
    for rank in (0, 1):
        # first process: fresh start, steps 1-26, crash in step 27
        r = Rank(rank, 4100 + rank, 0.0)
        startup(r, 0.05)
        for step in range(1, 28):
            kw: dict = {}
            if step == 1:
                kw["fwd_bwd_s"] = 24.0  # compilation and warm-up
            if step == 18:
                kw["fwd_bwd_s"] = 2.25  # a slow step on both ranks
            if step == 12:  # an input stall on rank 1; rank 0 waits for it in the step's collectives
                kw["fetch_s" if rank == 1 else "fwd_bwd_s"] = 2.1 if rank == 1 else 1.32 + 2.1
            if step in (10, 20):
                kw["checkpoint_s"] = 4.2
            if step == 15:
                kw["eval_s"] = 6.0
            if step == 27 and rank == 0:
                kw["crash"] = "RuntimeError: CUDA error: an illegal memory access was encountered"
            if step == 27 and rank == 1:
                kw["killed"] = True
            train_step(r, step, 0, **kw)
        r.write("20260302-100000-K7Q2ZB" if rank == 0 else "20260302-100000-M3XH8D")
        # second process: resumes from the checkpoint of step 20, runs steps 21-30
        r = Rank(rank, 5200 + rank, r.t + 95.0)
        startup(r, 3.6)
        for step in range(21, 31):
            kw = {"fwd_bwd_s": 19.0} if step == 21 else {}
            if step == 30:
                kw["checkpoint_s"] = 4.4
            train_step(r, step, 20, **kw)
        r.step = r.rel = None
        r.span("torch_distributed_teardown", 1.2)
        r.write("20260302-101400-P9TW4C" if rank == 0 else "20260302-101400-R2VN6J")


if __name__ == "__main__":
    main()
