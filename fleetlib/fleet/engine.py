"""Fleet scale on Dask: the per-job timeline work of :func:`fleetlib.fleet.measure.measure_fleet` as tasks.

With ``engine="dask"`` the scheduler records are read once, in the calling process, exactly as the
pandas engine reads them.  Each timeline file of the manifest -- at fleet scale one partition of a
partitioned Parquet data set holding many jobs' canonical timelines -- becomes one task on a
``distributed`` worker process: the task reads the file with the same reader, maps job ids, keeps the
jobs the scheduler held in the window and runs the same per-job runtime accounting
(:func:`fleetlib.fleet.measure._runtime_per_job`) on them.  The calling process gathers the per-job
rows as they complete (a tqdm bar on stderr), checks the owners of every job in manifest order (two
timelines for one job are refused, as by the pandas engine) and carries on with the pandas engine's
code.  Step traces are parsed in parallel on the same cluster
(:func:`fleetlib.program.readers.kineto.read_traces` with ``client=``).

What crosses the wire is small: each task is sent the held jobs' device counts (scattered once) and
sends back, per joined job, only the columns the runtime rung adds, as plain arrays; the client writes
them into its job table by position.  The runtime rung measures a file's common jobs all at once
(:mod:`fleetlib.runtime._fast`), and the client takes the results in manifest order as they come
back.  A cluster started here sets its workers' malloc to keep freed memory for the next task
(:data:`_WORKER_MALLOC`) and runs no statistical profiler.
:func:`measure_fleet` starts its cluster in a background thread (:func:`dask_client_in_background`):
the workers start and import the measuring code while the calling process reads the manifest and
the scheduler records, and the cluster closes in the background once the trace step has run, while
the results are built.

Every runtime category is a per-job sum and the fault-free step time is estimated per job, so a
timeline measured alone gives the numbers it gives among the others: the two engines agree exactly.

One constraint the pandas engine does not have: a job's steps and events must lie in one file (one
partition), since each file is measured alone.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np
import pandas as pd

from fleetlib._environ import environment, local_worker_count
from fleetlib.accounting import Window
from fleetlib.fleet.manifest import FleetManifest
from fleetlib.quality import InputError, Ledger

__all__ = [
    "DEFAULT_MEMORY_PER_WORKER",
    "BackgroundCluster",
    "dask_client",
    "dask_client_in_background",
    "dask_runtime_per_job",
    "submit_timeline_tasks",
]

#: Memory limit of each worker process of the LocalCluster :func:`dask_client` starts.
DEFAULT_MEMORY_PER_WORKER = "3GiB"
#: glibc malloc settings of those workers: arrays below 1 GiB come from the heap, which keeps up to
#: 4 GiB of freed memory (and grows 256 MiB at a time), so a task reuses the pages the previous one
#: freed.  distributed's own ``MALLOC_TRIM_THRESHOLD_`` (64 KiB) made every large temporary a fresh
#: ``mmap`` and a timeline task 35-50 % slower; glibc's dynamic defaults still returned and faulted
#: in memory between tasks (about 5 % of a task's CPU on the benchmark partitions, two at once).
_WORKER_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 32),
    "MALLOC_TOP_PAD_": str(1 << 28),
}


@contextlib.contextmanager
def dask_client(
    client: Any = None, workers: int | None = None, memory_limit: str | int | None = None
) -> Iterator[Any]:
    """Yield ``client``, or a client of a new LocalCluster of worker processes (closed on exit).

    Parameters
    ----------
    client
        A ``distributed.Client`` to use (left open); None starts a cluster.
    workers
        Worker processes of the new cluster, one thread each (default 2).
    memory_limit
        Memory limit per worker (default :data:`DEFAULT_MEMORY_PER_WORKER`); a worker above it is
        paused, then restarted, by ``distributed``.

    Yields
    ------
    distributed.Client
        The client to submit to.
    """
    if client is not None:
        yield client
        return
    n = _worker_count(workers)
    import dask
    from distributed import Client, LocalCluster

    # distributed's nannies write their pre-spawn environment into this process's own and leave it
    # there, where every later subprocess and cluster inherits it -- and a variable already in this
    # process's environment overrides the config's value.  So the variables are taken out while the
    # cluster runs (whatever an earlier cluster left; the workers get _WORKER_MALLOC) and put back
    # as they were afterwards.
    with (
        environment(dict.fromkeys(_WORKER_MALLOC)),
        # workers that keep the memory they free for their next task (_WORKER_MALLOC): each task
        # allocates and frees hundreds of MB of arrays, and pages handed back to the system are
        # faulted in again by the next one; and no statistical profiler: it samples every thread's
        # stack 100 times a second for the dashboard's profile page (as program.stragglers.local_cluster)
        dask.config.set({**{f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in _WORKER_MALLOC.items()},
                         "distributed.worker.profile.enabled": False}),
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit or DEFAULT_MEMORY_PER_WORKER,
            dashboard_address=":0",  # a free port: several clusters may run side by side
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as new,
    ):
        # the workers import the measuring code while this process reads the manifest and the
        # scheduler records (about a second of each worker's first task otherwise)
        from distributed import fire_and_forget

        for i, address in enumerate(new.scheduler_info()["workers"]):
            fire_and_forget(new.submit(_warm_imports, key=f"fleet-warm-imports-{i}", workers=[address],
                                       pure=False))
        yield new


def _worker_count(workers: int | None) -> int:
    """Return the number of worker processes to start (default 2), checked (:func:`local_worker_count`)."""
    return local_worker_count(2 if workers is None else workers)


class BackgroundCluster:
    """A :func:`dask_client` cluster started in a background thread (see :func:`dask_client_in_background`).

    :meth:`client` waits for the start and returns the client; :meth:`release` starts closing the
    cluster in the background once no more tasks will be submitted; :meth:`close` waits for the
    close (after the start, whether or not the client was asked for).
    """

    def __init__(self, workers: int | None, memory_limit: str | int | None) -> None:
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        _worker_count(workers)  # a bad count is refused here, before any thread
        self._manager = dask_client(None, workers, memory_limit)
        # entered and exited in one context: the client's "current client" is reset where it was set
        self._context = contextvars.copy_context()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="fleetlib-cluster")
        self._started = self._pool.submit(self._context.run, self._manager.__enter__)
        self._closed: Any = None

    def client(self) -> Any:
        """Return the ``distributed.Client``, waiting for the cluster to start (its error raised here)."""
        return self._started.result()

    def when_started(self, work: Callable[[Any], Any]) -> Future[Any]:
        """Run ``work(client)`` in the cluster's thread as soon as the cluster has started.

        The calling thread goes on meanwhile; the returned future holds what ``work`` returned, or
        its error (a failed start included).  ``work`` must not read anything the caller changes.
        """
        return self._pool.submit(self._context.run, self._after_start, work)

    def _after_start(self, work: Callable[[Any], Any]) -> Any:
        return work(self._started.result())  # the start ran first in this one thread: no wait

    def release(self) -> None:
        """Start closing the cluster in the background thread; no task may be submitted after."""
        if self._closed is None:
            self._closed = self._pool.submit(self._close)

    def close(self) -> None:
        """Close the cluster (wait for a close :meth:`release` started); the thread ends."""
        self.release()
        self._pool.shutdown(wait=True)
        self._closed.result()

    def _close(self) -> None:
        if self._started.exception() is None:  # waits for the start; a failed start closed itself
            self._context.run(self._manager.__exit__, None, None, None)


class _GivenClient:
    """A client given by the caller: returned as it is, never closed."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self) -> Any:
        return self._client

    def when_started(self, work: Callable[[Any], Any]) -> Future[Any]:
        """Run ``work(client)`` now (the client is given); return a finished future of its result."""
        done: Future[Any] = Future()
        try:
            done.set_result(work(self._client))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def release(self) -> None:
        return None


@contextlib.contextmanager
def dask_client_in_background(
    client: Any = None, workers: int | None = None, memory_limit: str | int | None = None
) -> Iterator[BackgroundCluster | _GivenClient]:
    """Start :func:`dask_client`'s cluster in a background thread; yield its handle.

    The worker processes spend about a second starting (and importing the measuring code); the
    calling process reads the manifest and the scheduler records meanwhile and asks for the client
    (``handle.client()``) only when it submits the first task.  After its last task it may call
    ``handle.release()``: the cluster closes while it finishes its own work.  On exit the cluster is
    closed (waiting for its start and its close), whether or not the client was asked for.

    Parameters
    ----------
    client, workers, memory_limit
        As :func:`dask_client`: a given ``client`` is returned as it is (and left open).

    Yields
    ------
    BackgroundCluster
        ``client()`` returns the ``distributed.Client`` (an error starting the cluster is raised
        there); ``release()`` starts closing it.
    """
    if client is not None:
        yield _GivenClient(client)
        return
    handle = BackgroundCluster(workers, memory_limit)
    try:
        yield handle
    finally:
        handle.close()


def _warm_imports() -> None:
    """Import what a timeline task runs (on a worker, ahead of its first task)."""
    import pyarrow.parquet  # noqa: F401

    import fleetlib.fleet.measure
    import fleetlib.program.readers.kineto  # the trace step's tasks, after the timelines
    import fleetlib.runtime._fast
    import fleetlib.runtime.readers  # noqa: F401


def _read_timeline_file(
    fmt: str, path: str, job_map: Mapping[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame, Ledger, bool]:
    """Read one timeline file; return its steps and events, job ids mapped by ``job_map``, and its ledger.

    The file is read by the manifest's reader (job ids as text).  The last value says whether the steps
    are a table already checked as the per-job measurement would check it (never, here).
    """
    from fleetlib.fleet.measure import _mapped_tables, _timeline_reader

    tables, ledger = _timeline_reader(fmt)(path)
    steps, events = _mapped_tables(tables, job_map)
    return steps, events, ledger, False


def _mapped_categorical(ids: pd.Categorical, job_map: Mapping[str, str]) -> pd.Categorical:
    """Map a categorical's categories by ``job_map`` (two ids mapped to one become one category)."""
    mapped = np.asarray([job_map.get(str(c), str(c)) for c in ids.categories], dtype=object)
    categories, inverse = np.unique(mapped, return_inverse=True)
    codes = np.asarray(ids.codes)
    return pd.Categorical.from_codes(
        inverse.astype(codes.dtype)[codes], categories=pd.Index(categories, dtype=object)
    )


def _job_row_counts(ids: pd.Series) -> pd.Series:
    """Return the rows of each job id (as text) of a job-id column, text or categorical."""
    if isinstance(ids.dtype, pd.CategoricalDtype):
        codes = np.asarray(ids.array.codes)
        k = len(ids.cat.categories)
        if codes.size and codes[0] >= 0 and bool((codes[1:] >= codes[:-1]).all()):  # rows grouped by job
            counts = np.diff(np.searchsorted(codes, np.arange(k + 1, dtype=codes.dtype)))
        else:
            counts = np.bincount(codes, minlength=k)
        used = counts > 0
        return pd.Series(counts[used], index=pd.Index([str(c) for c in ids.cat.categories[used]]))
    counts = ids.value_counts()
    counts.index = counts.index.astype(str)
    return counts


def _measure_timeline_file(
    fmt: str, path: str, rel: str, job_map: Mapping[str, str], held: pd.DataFrame, window: Window
) -> dict[str, Any]:
    """One task: read one timeline file and measure the jobs of it the scheduler held in the window."""
    from fleetlib.fleet.measure import _runtime_per_job

    s, e, tl_ledger, checked = _read_timeline_file(fmt, path, job_map)
    steps_counts, events_counts = _job_row_counts(s["job_id"]), _job_row_counts(e["job_id"])
    steps_jobs, events_jobs = sorted(steps_counts.index.tolist()), sorted(events_counts.index.tolist())
    in_file = sorted(set(steps_jobs) | set(events_jobs))
    # held's index keeps its hash table between tasks (held is scattered once to each worker): a
    # lookup per job costs ~0.5 us; a get_indexer of another dtype would rebuild it (~50 ms)
    index = held.index
    is_held = [j in index for j in in_file]
    joined = [j for j, h in zip(in_file, is_held, strict=True) if h]
    unknown = [j for j, h in zip(in_file, is_held, strict=True) if not h]
    rows: dict[str, int] = {}
    if unknown:
        counts = steps_counts.add(events_counts, fill_value=0)
        rows = {j: int(counts.get(j, 0)) for j in unknown}
    sub = held.loc[joined, ["devices"]].copy()
    if unknown:  # measure only the joined jobs (all of them: the tables as read)
        keep = set(joined)
        s = s[s["job_id"].isin(keep)].reset_index(drop=True)
        e = e[e["job_id"].isin(keep)].reset_index(drop=True)
    _runtime_per_job(s, e, window, sub, steps_checked=checked)
    # only the columns the runtime rung added, as plain arrays: no frame of objects goes back
    return {
        "steps_jobs": steps_jobs,
        "events_jobs": events_jobs,
        "unknown_rows": rows,
        "runtime_jobs": joined,
        "runtime": {c: sub[c].to_numpy() for c in sub.columns if c != "devices"},
        "ledger": tl_ledger,
    }


def _gather(client: Any, futures: list[Any], progress: bool, on_result: Callable[[int, Any], None]) -> None:
    """Hand each future's result to ``on_result(i, result)`` in submission order, as soon as it can be.

    The results are fetched as the tasks complete (``as_completed(..., with_results=True)``: the
    transfer runs on the client's communication thread, not as a blocking call per task) and handed
    over in order: result ``i`` as soon as it and every result before it are back, so the caller's
    work on the early files overlaps the workers' work on the later ones.  A task's error is raised
    when its turn comes -- the first failing file in manifest order, as the pandas engine reads them
    -- and the tasks not yet handed over are then cancelled.  A tqdm bar on stderr counts completions.
    """
    from distributed import as_completed
    from tqdm.auto import tqdm

    index = {f.key: i for i, f in enumerate(futures)}
    back: dict[int, Any] = {}  # completed, not yet handed over
    turn = 0  # the next result to hand over
    try:
        with tqdm(
            total=len(futures), desc="fleet timelines", unit="file", file=sys.stderr, disable=not progress
        ) as bar:
            for fut, result in as_completed(futures, with_results=True, raise_errors=False):
                back[index[fut.key]] = (fut, result)
                bar.update(1)
                while turn in back:
                    done, value = back.pop(turn)
                    if done.status != "finished":  # an error (or a cancellation): raised as the task's own
                        done.result()
                    on_result(turn, value)
                    turn += 1
    finally:
        live = [f for f in futures if f.status not in ("finished", "error")]
        if live:
            client.cancel(live)


def submit_timeline_tasks(man: FleetManifest, jobs: pd.DataFrame, window: Window, client: Any) -> list[Any]:
    """Submit one task per timeline file of ``man`` (manifest order); return the futures.

    Parameters
    ----------
    man
        The manifest.
    jobs
        The scheduler's jobs held in the window (index ``job_id``; ``devices``): scattered once to
        every worker.
    window
        The measured window.
    client
        A ``distributed.Client``.

    Returns
    -------
    list of distributed.Future
        One per timeline file; :func:`dask_runtime_per_job` (``submitted=``) gathers them.
    """
    # the tasks read the held jobs and devices; a random key (hash=False): dask would otherwise hash
    # the whole frame, 222,845 text ids at fleet scale, before the first task can be submitted
    held = client.scatter(jobs[["devices"]], broadcast=True, hash=False)
    job_map = dict(man.job_map)
    return [
        client.submit(
            _measure_timeline_file,
            man.timeline_format,
            str(path),
            man.relative(path),
            job_map,
            held,
            window,
            key=f"fleet-timeline-{i}-{man.relative(path)}",
            pure=False,
        )
        for i, path in enumerate(man.timeline_files)
    ]


def dask_runtime_per_job(
    man: FleetManifest,
    jobs: pd.DataFrame,
    scheduled: set[str],
    window: Window,
    ledger: Ledger,
    client: Any,
    *,
    progress: bool = False,
    submitted: list[Any] | None = None,
) -> tuple[pd.DataFrame, dict[str, str], dict[str, str]]:
    """Measure every timeline file as one Dask task; return the per-job runtime columns and the owners.

    Parameters
    ----------
    man
        The manifest.
    jobs
        The scheduler's jobs held in the window (index ``job_id``; ``pool``, ``devices``,
        ``held_device_s``).
    scheduled
        Every job id of the scheduler records (to tell jobs held outside the window from unknown ones).
    window
        The measured window.
    ledger
        Receives the timeline readers' ledgers (in manifest order) and the join's flags.
    client
        A ``distributed.Client``.
    progress
        Show a progress bar over files on stderr.
    submitted
        The tasks :func:`submit_timeline_tasks` submitted for these jobs (the caller's own work ran
        meanwhile); None submits them here.

    Returns
    -------
    tuple of (DataFrame, dict, dict)
        The runtime columns :func:`~fleetlib.fleet.measure._runtime_per_job` adds, for the joined jobs
        (index ``job_id``); ``joined`` (job -> file, jobs held in the window) and ``owner`` (job -> file,
        every job of the timelines).

    Raises
    ------
    InputError
        Two timelines for one job; a job's steps and events in different files.
    """
    from fleetlib.fleet.measure import _flag_unknown_jobs, _register_timeline

    futures = submitted if submitted is not None else submit_timeline_tasks(man, jobs, window, client)
    owner: dict[str, str] = {}
    seen: dict[str, dict[str, str]] = {}  # "steps" | "events" -> job -> file
    rows: dict[str, int] = {}
    done: list[dict[str, Any]] = []  # the results with measured jobs, in manifest order

    def register(i: int, res: dict[str, Any]) -> None:  # in manifest order, while later files run
        ledger.extend(res["ledger"])
        rel = man.relative(man.timeline_files[i])
        _register_timeline(
            man, rel, {"steps": res["steps_jobs"], "events": res["events_jobs"]}, owner, seen,
            sorted_distinct=True,  # the task's sorted lists of distinct ids
        )
        for job, n in res["unknown_rows"].items():
            rows[job] = rows.get(job, 0) + n
        if res["runtime_jobs"]:
            done.append({"runtime_jobs": res["runtime_jobs"], "runtime": res["runtime"]})

    _gather(client, list(futures), progress, register)
    in_steps, in_events = seen.get("steps", {}), seen.get("events", {})
    # jobs with steps and events whose files differ (one look-up per job with steps)
    split = sorted(j for j, f in in_steps.items() if in_events.get(j, f) != f)
    if split:
        job = split[0]
        raise InputError(
            f"engine='dask' measures each timeline file alone, but job {job!r} has its steps in "
            f"{in_steps[job]} and its events in {in_events[job]}: write one job's "
            "timeline into one file (partition), or use engine='pandas'",
            file=str(man.file),
            field="timelines.files",
        )
    known = set(jobs.index.tolist())
    _flag_unknown_jobs(owner, known, scheduled, rows, ledger)
    joined = dict(owner)
    for j in owner.keys() - known:  # the few jobs the scheduler did not hold in the window
        del joined[j]
    index = pd.Index([j for r in done for j in r["runtime_jobs"]], name=jobs.index.name)
    runtime = pd.DataFrame(
        {c: np.concatenate([r["runtime"][c] for r in done]) for c in done[0]["runtime"]} if done else {},
        index=index,
    )
    return runtime, joined, owner
