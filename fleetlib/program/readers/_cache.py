"""The trace cache: one pickle (protocol 5) per entry in a folder only its user can write.

An entry is a value stored under a key (the trace reader's: the SHA-256 of a file's bytes, the
reader version and its options).  The value is pickled with the key beside it and a CRC-32 of the
pickle after it, written to a temporary file renamed into place, so a reader sees a whole entry or
none and several processes may share the folder.  A pickle can run code when it is loaded, so an
entry is read only from a folder that this user owns and no one else can write into (created
``0700``), only when it is a regular file of this user's within the input limit whose checksum
holds, and only when it holds its own key; anything else -- a damaged, cut, foreign or planted file
-- is a miss (the caller parses again and rewrites it), never an error.
"""

from __future__ import annotations

import os
import pickle
import stat
import threading
import zlib
from pathlib import Path
from typing import Any

from fleetlib._io import current_limits

__all__ = ["CACHE_ENV", "CACHE_SUFFIX", "default_cache_dir", "entry_path", "load", "store"]

#: Environment variable naming the cache folder (default ``~/.cache/fleetlib/traces``).
CACHE_ENV = "FLEETLIB_TRACE_CACHE"
#: Suffix of the entries (the block files ``.fltrace`` of earlier versions are never looked up).
CACHE_SUFFIX = ".pkl"


def default_cache_dir() -> Path:
    """Return the trace cache folder: ``$FLEETLIB_TRACE_CACHE`` or ``~/.cache/fleetlib/traces``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fleetlib" / "traces"


def entry_path(folder: Path, key: str) -> Path:
    """Return the file of the entry ``key`` in ``folder``."""
    return folder / f"{key}{CACHE_SUFFIX}"


def _private(folder: Path) -> bool:
    """Whether ``folder`` is a folder of this user's that no one else can write into (made ``0700``)."""
    try:
        st = os.stat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return False
        if st.st_mode & 0o077:
            os.chmod(folder, 0o700)
    except OSError:
        return False
    return True


def load(folder: Path, key: str) -> Any:
    """Return the value stored under ``key`` in ``folder``, or None when there is no usable entry.

    A missing, damaged, foreign (another key's) or oversized entry, one that is not a regular file
    of this user's, or one in a folder others can write into is a miss.
    """
    if not _private(folder):
        return None
    try:
        fd = os.open(entry_path(folder, key), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            limit = current_limits().max_bytes
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_size > limit:
                return None
            blob = fh.read()
        data, check = memoryview(blob)[:-4], blob[-4:]
        if len(blob) < 5 or zlib.crc32(data).to_bytes(4, "little") != check:  # cut, damaged, not ours
            return None
        stored = pickle.loads(data)
    except Exception:  # a damaged entry can fail to unpickle in any way: it is a miss, not an error
        return None
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key):
        return None
    return stored[1]


def store(folder: Path, key: str, value: Any) -> None:
    """Store ``value`` under ``key`` in ``folder`` (created ``0700``); a whole entry or none is seen.

    Raises
    ------
    OSError
        The folder cannot be made or written, or others can write into it.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(folder):
        raise OSError(f"the folder {folder} is not private to this user (others can write into it)")
    path = entry_path(folder, key)
    tmp = folder / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        data = pickle.dumps((key, value), protocol=5)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.write(zlib.crc32(data).to_bytes(4, "little"))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
