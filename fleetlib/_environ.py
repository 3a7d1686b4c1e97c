"""The environment a piece of work runs in: its variables, the checkout it runs from, its local clusters.

Environment variables are set for the length of one piece of work, then put back as they were; the
fleetlib checkout (the folder with ``pyproject.toml`` and ``notebooks/``) is found in one place for the
report and the scenario files; the size of a local Dask cluster is checked in one place for the fleet
and program rungs.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

__all__ = ["environment", "local_worker_count", "project_root"]


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
