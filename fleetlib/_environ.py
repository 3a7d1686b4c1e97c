"""The environment a piece of work runs in: its variables, and the local clusters it may start.

Environment variables are set for the length of one piece of work, then put back as they were; the
size of a local Dask cluster is checked in one place for the fleet and program rungs.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["environment", "local_worker_count"]


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
