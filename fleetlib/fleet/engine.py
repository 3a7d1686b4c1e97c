"""The fleet walk's Dask client: a LocalCluster of worker processes started here, or a client given.

:func:`fleetlib.fleet.measure.measure_fleet` with ``engine="dask"`` runs its per-file tasks on a
``distributed`` cluster; this module only starts (or receives) the client.  :func:`dask_client`
starts a LocalCluster of single-threaded worker processes (or yields a given ``distributed.Client``,
left open, as is the cluster of a scheduler address given); :func:`dask_client_in_background` starts it
in a background thread, so that the calling
process reads the manifest and the scheduler records while the workers start.  A cluster started
here sets its workers' malloc to keep freed memory for the next task (:data:`WORKER_MALLOC`), runs
no statistical profiler, and runs a warm-up callable on each worker as soon as it is up (the walk
imports its measuring code there while the scheduler records are read).

A cluster fleetlib did not start -- a ``client`` given, or a scheduler's address
(:func:`fleetlib._environ.scheduler_address`: the caller's, else Dask's ``scheduler-address``
configuration, which ``DASK_SCHEDULER_ADDRESS`` sets) -- is never closed: only the client fleetlib
opened to it is.
:func:`fleetlib._environ.worker_version_note` says in one line when its workers do not import this
fleetlib version.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from fleetlib._environ import attached_client, environment, local_worker_count

__all__ = [
    "DEFAULT_MEMORY_PER_WORKER",
    "WORKER_MALLOC",
    "BackgroundCluster",
    "dask_client",
    "dask_client_in_background",
]

#: Memory limit of each worker process of the LocalCluster :func:`dask_client` starts.
DEFAULT_MEMORY_PER_WORKER = "3GiB"
#: glibc malloc settings of those workers: arrays below 1 GiB come from the heap, which keeps up to
#: 4 GiB of freed memory (and grows 256 MiB at a time), so a task reuses the pages the previous one
#: freed.  distributed's own ``MALLOC_TRIM_THRESHOLD_`` (64 KiB) made every large temporary a fresh
#: ``mmap`` and a timeline task 35-50 % slower; glibc's dynamic defaults still returned and faulted
#: in memory between tasks (about 5 % of a task's CPU on the benchmark partitions, two at once).
WORKER_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 32),
    "MALLOC_TOP_PAD_": str(1 << 28),
}


def _warm_workers(client: Any, warm: Callable[[], Any] | None) -> None:
    """Run ``warm`` once on each worker of ``client``'s cluster, fire and forget."""
    if warm is None:
        return
    # the workers import the caller's code while the caller goes on (about a second of each worker's
    # first task otherwise)
    from distributed import fire_and_forget

    for i, address in enumerate(client.scheduler_info()["workers"]):
        fire_and_forget(client.submit(warm, key=f"fleet-warm-imports-{i}", workers=[address], pure=False))


@contextlib.contextmanager
def _attached(address: str, warm: Callable[[], Any] | None) -> Iterator[Any]:
    """Yield a client of the cluster at ``address`` (:func:`fleetlib._environ.attached_client`), warmed."""
    with attached_client(address) as client:
        _warm_workers(client, warm)
        yield client


@contextlib.contextmanager
def dask_client(
    client: Any = None, workers: int | None = None, memory_limit: str | int | None = None,
    warm: Callable[[], Any] | None = None, scheduler: str | None = None,
) -> Iterator[Any]:
    """Yield ``client``, a client of the scheduler at ``scheduler``, or of a new LocalCluster.

    A cluster started here is closed on exit; a cluster given (``client``) or named (``scheduler``)
    is left running: only the client opened here to a named one is closed.

    Parameters
    ----------
    client
        A ``distributed.Client`` to use (left open); None attaches to ``scheduler`` or starts a cluster.
    workers
        Worker processes of the new cluster, one thread each (default 2).
    memory_limit
        Memory limit per worker (default :data:`DEFAULT_MEMORY_PER_WORKER`); a worker above it is
        paused, then restarted, by ``distributed``.
    warm
        Run on each worker of a new cluster as soon as it is up (fire and forget): the caller's
        imports, made while the caller goes on.
    scheduler
        The address of a running scheduler to attach to (``client`` None); its workers' fleetlib
        version is checked (:func:`fleetlib._environ.worker_version_note`: one line on stderr when
        it differs).

    Yields
    ------
    distributed.Client
        The client to submit to.
    """
    if client is not None:
        yield client
        return
    if scheduler is not None:
        with _attached(scheduler, warm) as attached:
            yield attached
        return
    n = _worker_count(workers)
    import dask
    from distributed import Client, LocalCluster

    # distributed's nannies write their pre-spawn environment into this process's own and leave it
    # there, where every later subprocess and cluster inherits it -- and a variable already in this
    # process's environment overrides the config's value.  So the variables are taken out while the
    # cluster runs (whatever an earlier cluster left; the workers get WORKER_MALLOC) and put back
    # as they were afterwards.
    with (
        environment(dict.fromkeys(WORKER_MALLOC)),
        # workers that keep the memory they free for their next task (WORKER_MALLOC): each task
        # allocates and frees hundreds of MB of arrays, and pages handed back to the system are
        # faulted in again by the next one; and no statistical profiler: it samples every thread's
        # stack 100 times a second for the dashboard's profile page (as program.stragglers.local_cluster)
        dask.config.set({**{f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in WORKER_MALLOC.items()},
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
        _warm_workers(new, warm)
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

    def __init__(self, workers: int | None, memory_limit: str | int | None,
                 warm: Callable[[], Any] | None = None, scheduler: str | None = None) -> None:
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        if scheduler is None:
            _worker_count(workers)  # a bad count is refused here, before any thread
        self._manager = dask_client(None, workers, memory_limit, warm, scheduler)
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
    client: Any = None, workers: int | None = None, memory_limit: str | int | None = None,
    warm: Callable[[], Any] | None = None, scheduler: str | None = None,
) -> Iterator[BackgroundCluster | _GivenClient]:
    """Start :func:`dask_client`'s cluster in a background thread; yield its handle.

    The worker processes spend about a second starting (and importing the measuring code); the
    calling process reads the manifest and the scheduler records meanwhile and asks for the client
    (``handle.client()``) only when it submits the first task.  After its last task it may call
    ``handle.release()``: the cluster closes while it finishes its own work.  On exit the cluster is
    closed (waiting for its start and its close), whether or not the client was asked for.

    Parameters
    ----------
    client, workers, memory_limit, warm, scheduler
        As :func:`dask_client`: a given ``client`` is returned as it is (and left open); a named
        ``scheduler`` is attached to in the background thread (its cluster left running).

    Yields
    ------
    BackgroundCluster
        ``client()`` returns the ``distributed.Client`` (an error starting the cluster is raised
        there); ``release()`` starts closing it.
    """
    if client is not None:
        yield _GivenClient(client)
        return
    handle = BackgroundCluster(workers, memory_limit, warm, scheduler)
    try:
        yield handle
    finally:
        handle.close()
