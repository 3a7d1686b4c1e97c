"""Helpers shared by the command-line modules of the rungs (``fleetlib.*.commands``)."""

from __future__ import annotations

from pathlib import Path

from fleetlib.quality import InputError

__all__ = ["writable_output_path"]


def writable_output_path(out: str | Path) -> Path:
    """Check that an output file can be created at ``out`` before any work is done.

    Parameters
    ----------
    out
        The output file a ``fleetlib synth ...`` command is asked to write.

    Returns
    -------
    pathlib.Path
        ``out`` as a path.

    Raises
    ------
    InputError
        The folder of ``out`` does not exist, or ``out`` is itself a folder.
    """
    path = Path(out)
    if not path.parent.is_dir():
        raise InputError(f"cannot write the output file: folder {str(path.parent)!r} does not exist",
                         file=str(path))
    if path.is_dir():
        raise InputError("cannot write the output file: it is a folder", file=str(path))
    return path
