"""One way in: open any input by its bytes, whatever its name.

Every reader of every rung opens its files through this module, so that a file is handled the same
way everywhere:

* plain or gzip-compressed input is recognised by its first bytes, never by its suffix
  (``log.txt.gz``, ``log.gz`` and a gzip file named ``log.txt`` all read the same);
* other compressions (bzip2, xz, zstd, zip, lz4) are refused with one clear line naming the format,
  rather than decoded as garbage text;
* a path that is not a regular file (a folder, ``/dev/zero``, a FIFO) is refused before any byte is
  read, and decompressed input is bounded (``max_bytes``);
* text must be UTF-8 (a byte-order mark is dropped); an undecodable byte is reported with its line.

:func:`confined` resolves a path named inside a manifest or scenario file against that file's
folder and refuses one that leaves it.
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from collections.abc import Iterable
from os import PathLike
from pathlib import Path

from fleetlib.quality import DomainError, InputError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "GZIP_MAGIC",
    "as_paths",
    "compression_of",
    "confined",
    "read_bytes",
    "read_text",
]

#: The most bytes one input may hold once decompressed (16 GiB): far above any real log or trace
#: file of one rank, far below what would exhaust memory silently.
DEFAULT_MAX_BYTES = 16 * 1024**3

GZIP_MAGIC = b"\x1f\x8b"

#: Compressions recognised by their leading bytes and refused with their name.
_REFUSED = (
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"PK\x03\x04", "zip"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
)

PathArg = str | PathLike[str]

#: gunzip works through its input and output in slices this large, so memory stays near the output.
_IN_SLICE = 1 << 18
_OUT_SLICE = 1 << 20


def as_paths(path_or_paths: PathArg | Iterable[PathArg]) -> list[Path]:
    """Return one path or an iterable of paths as a non-empty list of :class:`~pathlib.Path`.

    Raises
    ------
    DomainError
        No path was given.
    """
    if isinstance(path_or_paths, (str, PathLike)):
        paths = [Path(path_or_paths)]
    else:
        paths = [Path(p) for p in path_or_paths]
    if not paths:
        raise DomainError("no input files given")
    return paths


def compression_of(head: bytes) -> str | None:
    """Return ``"gzip"``, the name of a refused compression, or None for plain bytes."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    for magic, name in _REFUSED:
        if head.startswith(magic):
            return name
    return None


def _check_regular(path: Path) -> int:
    """Refuse anything but an existing regular file; return its size in bytes."""
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise InputError("file not found", file=str(path)) from exc
    except OSError as exc:
        raise InputError(f"cannot open the file ({exc.strerror or exc})", file=str(path)) from exc
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a folder, not a file (name the files inside it)", file=str(path))
    if not stat.S_ISREG(st.st_mode):
        raise InputError("is not a regular file (a device, pipe or socket is never read)", file=str(path))
    return int(st.st_size)


def read_bytes(path: PathArg, *, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes | bytearray:
    """Return the content of ``path``, gunzipped when its bytes say gzip.

    Parameters
    ----------
    path
        The input file.
    max_bytes
        The most bytes the (decompressed) content may hold.

    Returns
    -------
    bytes or bytearray
        The plain content (a bytearray when it was decompressed, to avoid a copy).

    Raises
    ------
    InputError
        A missing file or not a regular file; a compression other than gzip; a truncated or corrupt
        gzip stream; content beyond ``max_bytes``.
    """
    p = Path(path)
    size = _check_regular(p)
    try:
        with open(p, "rb") as fh:
            # read what the file holds (one byte more shows growth past the limit); never ask the OS
            # for max_bytes up front
            raw = fh.read(min(size, max_bytes) + 1)
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror or exc})", file=str(p)) from exc
    kind = compression_of(raw[:8])
    if kind is None:
        if len(raw) > max_bytes:
            raise InputError(f"larger than the {max_bytes:,}-byte input limit", file=str(p))
        return raw
    if kind != "gzip":
        raise InputError(f"{kind}-compressed input is not read; decompress it, or gzip it instead",
                         file=str(p))
    return _gunzip(raw, str(p), max_bytes)


def _gunzip(raw: bytes, file: str, max_bytes: int) -> bytearray:
    """Decompress every gzip member of ``raw`` in bounded slices (a small bomb stops at the limit).

    The output buffer is sized up front from the last member's ISIZE trailer (the uncompressed size
    modulo 2**32) when that is plausible, so a large trace is held once, not grown by doubling.
    """
    hint = int.from_bytes(raw[-4:], "little") if len(raw) >= 18 else 0
    out = bytearray(hint if 0 < hint <= max_bytes else 0)
    filled = 0
    view = memoryview(raw)
    pos = 0

    def put(chunk: bytes) -> None:
        nonlocal filled
        end = filled + len(chunk)
        if end > max_bytes:
            raise InputError(f"decompresses to more than the {max_bytes:,}-byte input limit",
                             file=file, field="gzip")
        out[filled:end] = chunk
        filled = end

    try:
        while pos < len(raw):  # one pass per gzip member
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not d.eof:
                if pos >= len(raw):
                    raise EOFError("the gzip stream ends before its end marker")
                piece = view[pos:pos + _IN_SLICE]
                pos += len(piece)
                put(d.decompress(piece, _OUT_SLICE))
                while d.unconsumed_tail and not d.eof:  # a tail is at most one input slice
                    put(d.decompress(d.unconsumed_tail, _OUT_SLICE))
            pos -= len(d.unused_data)  # the next member (or trailing bytes) starts here
            rest = view[pos:]
            if rest.nbytes and bytes(rest[:2]) != GZIP_MAGIC:
                if bytes(rest).strip(b"\x00"):
                    raise EOFError(f"{rest.nbytes} bytes of trailing garbage after the gzip stream")
                break
    except (zlib.error, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"truncated or corrupt gzip stream ({exc}); expected a complete gzip file",
                         file=file, field="gzip") from exc
    del out[filled:]  # a hint larger than the content (several members, a lying trailer) is trimmed
    return out  # the buffer itself: a bytes copy would briefly hold the text twice


def read_text(path: PathArg, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Return ``path`` as UTF-8 text (plain or gzip, by its bytes; a byte-order mark is dropped).

    Raises
    ------
    InputError
        As :func:`read_bytes`, or a byte that is not UTF-8 (the message gives its line).
    """
    data = read_bytes(path, max_bytes=max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8 text; "
                         "expected UTF-8, optionally gzipped", file=str(path), row=line) from exc


def confined(base: PathArg, name: PathArg, *, what: str = "path") -> Path:
    """Resolve ``name`` against the folder ``base`` and refuse it if it leaves that folder.

    Parameters
    ----------
    base
        The folder of the manifest or scenario file that names the path.
    name
        The path as written there (relative; an absolute path must still lie inside ``base``).
    what
        What the path is, for the message (``"scheduler file"``).

    Returns
    -------
    Path
        The resolved path (existence is not checked).

    Raises
    ------
    InputError
        The path resolves outside ``base`` (``..``, an absolute path elsewhere, a link out).
    """
    root = Path(base).resolve()
    target = (root / Path(name)).resolve() if not Path(name).is_absolute() else Path(name).resolve()
    if target != root and root not in target.parents:
        raise InputError(f"{what} {os.fspath(name)!r} lies outside {root} (only paths inside the "
                         "folder that names them are read)", file=str(name))
    return target
