"""The environment a piece of work runs in: its variables, the checkout it runs from, its clusters.

Environment variables are set for the length of one piece of work, then put back as they were; the
fleetlib checkout (the folder with ``pyproject.toml`` and ``notebooks/``) is found in one place for the
report and the scenario files; the size of a local Dask cluster is checked in one place for the fleet
and program rungs; and a running cluster fleetlib did not start -- named by ``--scheduler`` or Dask's
``scheduler-address`` configuration -- is attached to, and left running, in one place for every command.
"""

from __future__ import annotations

import numbers
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "PROGRESS_ENV",
    "attached_client",
    "dashboard_note",
    "environment",
    "local_worker_count",
    "progress_wanted",
    "project_root",
    "scheduler_address",
    "worker_version_note",
]


@contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` inside the ``with`` block; afterwards restore each key.

    Processes started inside the block (papermill's notebook kernels) inherit the values.  A key that
    was unset before is removed again; one that was set gets its old value back -- also when the
    block itself changed it.

    Parameters
    ----------
    values
        Variable names and the text each should hold inside the block (None: unset inside it).
    """
    saved = {key: os.environ.get(key) for key in values}
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def local_worker_count(workers: object) -> int:
    """Return ``workers`` checked as the size of a local cluster: a whole number from 1 to the bound.

    The bound, ``max(8, 4 x`` the machine's CPUs ``)``, keeps a typo (``--workers 10000``) from starting
    thousands of processes, each importing the library; a larger cluster is one's own
    ``distributed.Client``, which every Dask entry point takes.

    Raises
    ------
    fleetlib.quality.DomainError
        Not a whole number, below 1, or above the bound.
    """
    from fleetlib.quality import DomainError

    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise DomainError(f"workers must be a whole number >= 1; got {workers!r}")
    workers = int(workers)
    bound = max(8, 4 * (os.cpu_count() or 1))
    if workers > bound:
        raise DomainError(f"workers {workers} is more than the {bound} local worker processes taken on this "
                          f"{os.cpu_count() or 1}-CPU machine (4 per CPU, at least 8); for more, give a "
                          "distributed.Client of a larger cluster")
    return workers


def scheduler_address(scheduler: str | None = None) -> str | None:
    """Return the address of the scheduler to attach to: ``scheduler``, else Dask's configuration.

    Parameters
    ----------
    scheduler
        An address (``tcp://host:port``) named by the caller (``--scheduler``); None or empty: Dask's
        ``scheduler-address`` configuration (set by ``DASK_SCHEDULER_ADDRESS``), else None.

    Returns
    -------
    str or None
        The address, or None when neither names one (a LocalCluster is started).
    """
    if scheduler:
        return str(scheduler)
    import dask

    found = dask.config.get("scheduler-address", None)
    return str(found) if found else None


def _fleetlib_version() -> str:
    """Return the fleetlib version this process imports (run on each worker)."""
    import fleetlib

    return str(fleetlib.__version__)


def worker_version_note(client: Any) -> str | None:
    """Return one line when a worker of ``client``'s cluster imports another fleetlib version, or none.

    Parameters
    ----------
    client
        A ``distributed.Client``.

    Returns
    -------
    str or None
        None when every worker imports this process's fleetlib version; else one line naming the
        versions found (a worker that cannot import fleetlib reads ``missing``).
    """
    import fleetlib

    found = client.run(_fleetlib_version, on_error="return")
    versions = {w: (v if isinstance(v, str) else "missing") for w, v in found.items()}
    other = sorted({v for v in versions.values() if v != fleetlib.__version__})
    if not other:
        return None
    n = sum(v != fleetlib.__version__ for v in versions.values())
    return (f"fleetlib: {n} of {len(versions)} workers of {client.scheduler.address} import fleetlib "
            f"{', '.join(other)}, not {fleetlib.__version__} as this process does")


#: ``FLEETLIB_PROGRESS=1`` shows the progress bars on stderr even where it is no terminal (a notebook's
#: log, a CI job), ``--json`` output included (stdout stays the JSON alone); ``0`` hides them.
PROGRESS_ENV = "FLEETLIB_PROGRESS"


def progress_wanted(as_json: bool = False) -> bool:
    """Return whether a command shows progress bars (and the Dask dashboard link) on stderr.

    :data:`PROGRESS_ENV` decides when set (``1``/``0``); else bars show when stderr is a terminal and
    the output is not ``--json``.

    Parameters
    ----------
    as_json
        The command writes JSON (``--json``): no bar unless :data:`PROGRESS_ENV` asks for one.
    """
    asked = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if asked in ("1", "true", "yes", "on"):
        return True
    if asked in ("0", "false", "no", "off"):
        return False
    return not as_json and sys.stderr.isatty()


def dashboard_note(client: Any) -> str | None:
    """Return ``dask dashboard: LINK`` when ``client``'s cluster offers a dashboard, else None."""
    try:
        link = client.dashboard_link
    except (KeyError, AttributeError, OSError):  # no dashboard service (bokeh absent, --no-dashboard)
        return None
    return f"dask dashboard: {link}" if link else None


@contextmanager
def attached_client(scheduler: str | None = None, *, progress: bool = False) -> Iterator[Any]:
    """Yield a ``distributed.Client`` of the running cluster :func:`scheduler_address` names, or None.

    The client is closed on exit; the cluster, which fleetlib did not start, is left running (a
    client's ``close`` disconnects it; ``shutdown`` is never called).  A worker importing another
    fleetlib version is named in one line on stderr (:func:`worker_version_note`).

    Parameters
    ----------
    scheduler
        The scheduler's address (``--scheduler``); None: Dask's ``scheduler-address`` configuration.
    progress
        Also print the cluster's dashboard link on stderr when it offers one (:func:`dashboard_note`).

    Yields
    ------
    distributed.Client or None
        None when no scheduler is named (the caller runs as it would without a cluster).

    Raises
    ------
    fleetlib.quality.DomainError
        The scheduler cannot be reached.
    """
    address = scheduler_address(scheduler)
    if address is None:
        yield None
        return
    from distributed import Client

    from fleetlib.quality import DomainError

    try:
        client = Client(address)
    except (OSError, ValueError, TypeError) as exc:
        raise DomainError(f"cannot attach to the Dask scheduler at {address!r}: {exc}") from exc
    with client:
        note = worker_version_note(client)
        if note is not None:
            print(note, file=sys.stderr)
        link = dashboard_note(client) if progress else None
        if link is not None:
            print(link, file=sys.stderr)
        yield client


def _is_project_root(folder: Path) -> bool:
    return (folder / "pyproject.toml").is_file() and (folder / "notebooks").is_dir()


def project_root() -> Path | None:
    """Return the fleetlib checkout this code runs from, or None outside one.

    The folder above the imported package is tried first (an editable install or a checkout), then
    the current directory and its parents (a regular install run from inside a checkout).  A checkout
    is a folder holding ``pyproject.toml`` and ``notebooks/``.

    Returns
    -------
    pathlib.Path or None
        The absolute path of the checkout; None when neither place looks like one.
    """
    beside_package = Path(__file__).resolve().parents[1]
    if _is_project_root(beside_package):
        return beside_package
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if _is_project_root(folder):
            return folder
    return None
