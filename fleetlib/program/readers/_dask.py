"""Reading a job's trace files as Dask tasks, merging the results on the client while they arrive.

:func:`fleetlib.program.readers.kineto.read_traces` cuts the files into batches
(:func:`~fleetlib.program.readers.kineto._batches`); :func:`_gather` submits one task per batch
(:func:`_read_batch_packed`: :func:`~fleetlib.program.readers.kineto.read_trace` on each file,
the results pickled into one frame), keeps a
bounded window of tasks in flight, and hands each finished batch to a callback as soon as it is
back -- the reader joins that batch's tables there, so the client's share of the work runs while
the workers parse the next batches instead of after the last one.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from fleetlib.quality import InputError

__all__: list[str] = []


def _read_batch(files: Sequence[Path], kwargs: Sequence[dict[str, Any]]) -> list[Any]:
    """Read several files in one task; an unreadable file's :class:`InputError` is returned in its place."""
    from fleetlib.program.readers.kineto import read_trace

    out: list[Any] = []
    for f, kw in zip(files, kwargs, strict=True):
        try:
            out.append(read_trace(f, **kw))
        except InputError as exc:
            out.append(exc)
    return out


def _read_batch_packed(files: Sequence[Path], kwargs: Sequence[dict[str, Any]]) -> bytes:
    """:func:`_read_batch`, its results pickled into one bytes object on the worker.

    Handed back as it is, a batch's results are serialised by Dask with every numpy array of
    every table as a frame of its own (about 70 frames a rank file, 2,200 for a batch of 32), on
    the worker's and the client's communication threads -- which compete for the interpreter
    with the next parse -- at about three times the cost of one pickle.  One pickle made in the
    task and loaded by the client moves the same objects (pickle is what Dask uses for them) as
    a single frame.
    """
    return pickle.dumps(_read_batch(files, kwargs), protocol=pickle.HIGHEST_PROTOCOL)


def _gather(client: Any, files: Sequence[Path], kwargs: Sequence[dict[str, Any]], batches: Sequence[range],
            window: int, on_batch: Callable[[int, list[Any]], None], bar: Any = None) -> None:
    """Read ``batches`` of ``files`` as Dask tasks; call ``on_batch(b, results)`` as each completes.

    At most ``window`` tasks are in flight: a finished batch is handed over (and its result freed on
    its worker) before the next is submitted, so no worker holds more than a few batches' tables.
    ``results`` are the batch's :class:`~fleetlib.program.readers.kineto.TraceRead` objects or
    :class:`InputError` in file order; ``on_batch`` may raise, which cancels the tasks in flight.
    """
    from distributed import as_completed

    pending = iter(range(len(batches)))
    live: dict[str, tuple[int, Any]] = {}  # the futures not yet handed over, by key

    def submit(b: int) -> Any:
        idx = batches[b]
        fut = client.submit(_read_batch_packed, [files[i] for i in idx], [kwargs[i] for i in idx], pure=False)
        live[fut.key] = (b, fut)
        return fut

    running = as_completed([submit(b) for b in islice(pending, max(1, window))])
    try:
        for fut in running:
            b, _ = live.pop(fut.key)
            packed = fut.result()
            del fut  # the last reference: the worker frees the result
            results = pickle.loads(packed) if isinstance(packed, (bytes, bytearray)) else packed
            del packed
            nxt = next(pending, None)
            if nxt is not None:  # keep the workers busy before the client's own work on this batch
                running.add(submit(nxt))
            on_batch(b, results)
            if bar is not None:
                bar.update(len(batches[b]))
    finally:
        if live:
            client.cancel([f for _, f in live.values()])
        running.clear()
