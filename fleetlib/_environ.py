"""Environment variables set for the length of one piece of work, then put back as they were."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["environment"]


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
