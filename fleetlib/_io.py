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

import atexit
import contextlib
import dataclasses
import gc
import gzip
import json
import os
import posixpath
import re
import shutil
import stat
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from os import PathLike
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

import numpy as np
import yaml

from fleetlib._jsondepth import CHUNK, new_state, scan_depth
from fleetlib.quality import DomainError, InputError, Ledger

__all__ = [
    "ALLOW_ENV",
    "DEFAULT_MAX_BYTES",
    "GZIP_MAGIC",
    "LIMITS_ENV",
    "LIMIT_HELP",
    "Limits",
    "Yaml12FloatLoader",
    "allowed_roots",
    "as_paths",
    "check_line_bytes",
    "check_regular",
    "check_whole_text",
    "clean_text",
    "collector_paused",
    "compression_of",
    "confined",
    "current_limits",
    "excerpt",
    "far_times",
    "gunzip",
    "input_files",
    "is_url",
    "json_depth_rows",
    "link_note",
    "listed_files",
    "load_json",
    "load_yaml",
    "load_yaml_all",
    "local_path",
    "nesting_message",
    "open_stored",
    "out_of_range_int",
    "parquet_file",
    "parse_limit",
    "path_view",
    "read_bytes",
    "read_text",
    "stored_bytes",
    "stored_size",
    "time_range",
    "url_confined",
    "url_named",
    "using_limits",
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
#: The bytes any gzip input may inflate to whatever its ratio (``max_inflation`` applies beyond).
INFLATION_FLOOR = 64 * 1024**2
_IN_SLICE = 1 << 18
_OUT_SLICE = 1 << 20


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (restored after, as it was).

    A parsed document (JSON, YAML, a trace) is hundreds of thousands of containers, none garbage
    until the block ends and none in a cycle: the collector's scans while they are built and turned
    into tables find nothing and cost more than the parse itself (a 40 MB Philly log: about 0.7 s of
    ``json.loads``' 0.9 s, 0.9 s of the reader's 2.0 s).  Reference counting still frees everything
    the block drops.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def as_paths(path_or_paths: PathArg | Iterable[PathArg]) -> list[Path]:
    """Return one path or an iterable of paths as a non-empty list of :class:`~pathlib.Path`.

    An fsspec URL (``s3://bucket/key``) is fetched first and stands as its local copy
    (:func:`local_path`): every reader opening its files through this function reads object storage.

    Raises
    ------
    DomainError
        No path was given.
    """
    if isinstance(path_or_paths, (str, PathLike)):
        paths = [local_path(path_or_paths)]
    else:
        paths = [local_path(p) for p in path_or_paths]
    if not paths:
        raise DomainError("no input files given")
    return paths


def input_files(path_or_paths: PathArg | Iterable[PathArg]) -> list[PathArg]:
    """Return one input or an iterable of inputs as a non-empty list, an fsspec URL kept as written.

    Local paths become :class:`~pathlib.Path`; a URL stays text and is never fetched: readers open it
    with :func:`open_stored` or :func:`parquet_file` on the process that reads it (unlike
    :func:`as_paths`, which stands a local copy for it).

    Raises
    ------
    DomainError
        No input was given.
    """
    items = [path_or_paths] if isinstance(path_or_paths, (str, PathLike)) else list(path_or_paths)
    if not items:
        raise DomainError("no input files given")
    return [p if is_url(p) else Path(p) for p in items]


def path_view(path: PathArg) -> PurePath:
    """Return an input's path for its names: a local :class:`~pathlib.Path`, or a URL's key as a posix path.

    ``path_view("s3://bucket/vc/cluster_sequence.csv").parent.name`` is ``"vc"``, as it is for the
    local file: readers that take a name from a file or its folder take the same name from a URL.
    """
    if is_url(path):
        return PurePosixPath(str(path).split("://", 1)[1])
    return Path(path)


@contextlib.contextmanager
def open_stored(path: PathArg) -> Iterator[Any]:
    """Open an input's stored bytes (still compressed) as a binary file object, read as it is used.

    A local file is opened where it lies; an fsspec URL through ``fsspec.open`` (credentials from the
    environment or fsspec's configuration only), so nothing is copied.  Anything but a regular file or
    an object is refused before a byte is read.

    Raises
    ------
    InputError
        A missing file or object, a folder, not a regular file, or storage that cannot be read.
    """
    stored_size(path)
    try:
        if is_url(path):
            fs, key = _url_fs(str(path))
            handle = fs.open(key, "rb")
        else:
            handle = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open the file ({exc.strerror or exc})", file=str(path)) from exc
    with handle:
        yield handle


def parquet_file(path: PathArg) -> Any:
    """Open a Parquet input as a :class:`pyarrow.parquet.ParquetFile`, a URL through pyarrow's filesystem.

    An fsspec URL is read through ``pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs))``: Arrow
    fetches the footer and the row groups it is asked for by range, and no local copy is made.

    Raises
    ------
    InputError
        A missing file or object, or bytes Arrow cannot open as Parquet.
    """
    import pyarrow.parquet as pq

    stored_size(path)
    try:
        if is_url(path):
            from pyarrow import fs as pafs

            fs, key = _url_fs(str(path))
            return pq.ParquetFile(pafs.PyFileSystem(pafs.FSSpecHandler(fs)).open_input_file(key))
        return pq.ParquetFile(Path(path))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot open as Parquet: {exc}", file=str(path)) from exc


#: An fsspec URL: a scheme, then ``://`` (``s3://bucket/key``, ``gs://``, ``file:///abs/path``).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: Any) -> bool:
    """Return whether ``path`` is an fsspec URL (``s3://bucket/key``, ``file:///abs``), not a local path."""
    return isinstance(path, str) and _URL.match(path) is not None


def _url_fs(url: str) -> tuple[Any, str]:
    """Return the fsspec filesystem and in-storage path of ``url``.

    Credentials come from the environment and fsspec's own configuration only, never from a manifest.
    """
    import fsspec  # only when a URL is read

    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise InputError(f"cannot open this URL's storage ({exc})", file=url) from None


def url_kind(url: str) -> str | None:
    """Return ``"file"``, ``"directory"`` or None (nothing there) for an fsspec URL.

    Raises
    ------
    InputError
        The storage cannot be reached or refuses the request (the message names the URL).
    """
    fs, key = _url_fs(url)
    try:
        info = fs.info(key)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"cannot open the file ({exc.strerror or exc})", file=url) from None
    return "directory" if info.get("type") == "directory" else "file"


def _url_file_size(url: str) -> int:
    """Return the stored size of the object at ``url``; refuse a missing one or a folder."""
    fs, key = _url_fs(url)
    try:
        info = fs.info(key)
    except FileNotFoundError as exc:
        raise InputError("file not found", file=url) from exc
    except OSError as exc:
        raise InputError(f"cannot open the file ({exc.strerror or exc})", file=url) from None
    if info.get("type") == "directory":
        raise InputError("is a folder, not a file (name the files inside it)", file=url)
    return int(info.get("size") or 0)


def local_path(path: PathArg) -> Path:
    """Return ``path`` as a local :class:`~pathlib.Path`, fetching an fsspec URL first.

    A URL's object (or, for a folder URL, every object under it) is copied into this process's own
    temporary folder, which is removed when the process exits; a Dask task that is handed a URL
    copies it on its worker.  The copy lies at ``<folder>/<scheme>/<the URL after ://>``, so
    :func:`url_named` turns any copy's path (this process's or a worker's) back into its URL in what
    is shown.  A ``file://`` URL is its local path; a plain path is returned as it is.  Readers that
    open their bytes with :func:`stored_bytes` / :func:`read_bytes` read a URL directly and need no
    copy (the trace reader does).

    Raises
    ------
    InputError
        A missing object; an object stored larger than the ``max_bytes`` limit; storage that cannot be
        reached.
    """
    if not is_url(path):
        return Path(path)
    url = str(path)
    fs, key = _url_fs(url)
    if url.startswith("file://"):
        return Path(key)
    key = key.rstrip("/")
    max_bytes = current_limits().max_bytes
    if url_kind(url) == "directory":
        try:
            found = fs.find(key, detail=True)
        except OSError as exc:
            raise InputError(f"cannot list the folder ({exc.strerror or exc})", file=url) from None
        objects = sorted((k, v) for k, v in found.items() if v.get("type") != "directory")
    else:
        _url_file_size(url)
        objects = [(key, fs.info(key))]
    for k, info in objects:
        if int(info.get("size") or 0) > max_bytes:
            raise InputError(f"larger than the {max_bytes:,}-byte input limit (max_bytes; raise it with "
                             "--limit max_bytes=N)", file=f"{url.split('://', 1)[0]}://{k}")
    scheme, _, rest = url.partition("://")
    rest = posixpath.normpath(rest.rstrip("/")).lstrip("/")
    if rest.startswith(".."):
        raise InputError("names a key outside its bucket", file=url)
    top = _fetch_folder() / scheme / rest
    for k, info in objects:
        dest = top if k == key else top / posixpath.relpath(k, key)
        if dest.is_file() and dest.stat().st_size == int(info.get("size") or 0):
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        try:
            fs.get_file(k, str(tmp))
        except OSError as exc:
            raise InputError(f"cannot read the file ({exc.strerror or exc})", file=url) from None
        os.replace(tmp, dest)
    return top


#: This process's folder of fetched URL copies (:func:`local_path`), and the process that made it.
_FETCHED: list[tuple[int, Path]] = []


def _fetch_folder() -> Path:
    """Return this process's private folder of fetched copies, made once and removed at exit."""
    if not _FETCHED or _FETCHED[-1][0] != os.getpid():  # a forked child makes (and removes) its own
        folder = Path(tempfile.mkdtemp(prefix="fleetlib-urls-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _FETCHED.append((os.getpid(), folder))
    return _FETCHED[-1][1]


#: The path of a fetched copy's folder and scheme (:func:`local_path`), in any process's temp folder.
_COPY_PREFIX = re.compile(r"(?:[^\s'\"=]*[/\\])?fleetlib-urls-[A-Za-z0-9_]+[/\\]"
                          r"([A-Za-z][A-Za-z0-9+.-]*)[/\\]")


def url_named(text: str) -> str:
    """Return ``text`` with every fetched copy's path (:func:`local_path`) written as its URL.

    What a command prints names the objects it read (``s3://bucket/key``), never the temporary copy
    a reader opened on this process or on a Dask worker.
    """
    return _COPY_PREFIX.sub(r"\1://", text) if "fleetlib-urls-" in text else text


def url_confined(base: str, name: PathArg, *, what: str = "path",
                 allow: Iterable[PathArg] | None = None) -> str:
    """Resolve ``name`` against the URL prefix ``base`` and refuse it if it leaves that prefix.

    The URL counterpart of :func:`confined`: ``name`` (relative, or a whole URL) must lie under
    ``base`` or under a URL prefix an allow-list opened (``--allow-path s3://bucket/other``).

    Returns
    -------
    str
        The normalised URL (existence is not checked).

    Raises
    ------
    InputError
        The URL lies outside ``base`` and every allowed prefix (``..``, another bucket, a local path).
    """
    text = os.fspath(name)
    written = text if is_url(text) else f"{base.rstrip('/')}/{text}"
    scheme, _, rest = written.partition("://")
    target = f"{scheme}://{posixpath.normpath(rest)}" if not text.startswith("/") else text
    roots = (base, *(r for r in (allowed_roots() if allow is None else allow) if is_url(r)))
    if not any(target == str(r).rstrip("/") or target.startswith(str(r).rstrip("/") + "/") for r in roots):
        raise InputError(f"{what} {excerpt(text, 80)} lies outside {base}; only paths under the prefix "
                         "that names them are read (name another prefix with --allow-path URL)",
                         file=excerpt(text, 80)[1:-1])
    return target


def compression_of(head: bytes) -> str | None:
    """Return ``"gzip"``, the name of a refused compression, or None for plain bytes."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    for magic, name in _REFUSED:
        if head.startswith(magic):
            return name
    return None


def check_regular(path: Path) -> int:
    """Refuse anything but an existing regular file; return its size in bytes.

    Parameters
    ----------
    path
        The input file.

    Raises
    ------
    InputError
        A missing file, a folder, or not a regular file (a device, a pipe or a socket is never
        opened: reading one could block or never end).
    """
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


def stored_size(path: PathArg) -> int:
    """Return the stored size of an input: a local regular file, or an fsspec URL's object.

    Raises
    ------
    InputError
        A missing file or object, a folder, or (locally) not a regular file.
    """
    return _url_file_size(str(path)) if is_url(path) else check_regular(Path(path))


def stored_bytes(path: PathArg, *, max_bytes: int | None = None) -> bytes:
    """Return the bytes of ``path`` as stored (still compressed), checked like every input.

    The one opener of an input's bytes: a local file, or an fsspec URL read through fsspec on the
    process that calls it (a Dask worker reads its own task's URL).  Anything but a regular file is
    refused before a byte is read; a compression other than gzip is refused by its magic bytes; plain
    content beyond ``max_bytes`` is refused (gzip content is bounded when it is inflated).

    Parameters
    ----------
    path
        The input file, or an fsspec URL (``s3://bucket/key``).
    max_bytes
        The most bytes the content may hold (default: the current ``max_bytes`` limit).

    Raises
    ------
    InputError
        A missing or irregular file; a refused compression; plain content beyond ``max_bytes``.
    """
    if max_bytes is None:
        max_bytes = current_limits().max_bytes
    p: PathArg = path if is_url(path) else Path(path)
    size = stored_size(p)
    try:
        if is_url(p):
            fs, key = _url_fs(str(p))
            with fs.open(key, "rb") as fh:
                raw = fh.read(min(size, max_bytes) + 1)
        else:
            with open(p, "rb") as fh:
                # read what the file holds (one byte more shows growth past the limit); never ask the
                # OS for max_bytes up front
                raw = fh.read(min(size, max_bytes) + 1)
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror or exc})", file=str(p)) from exc
    kind = compression_of(raw[:8])
    if kind is None and len(raw) > max_bytes:
        raise InputError(f"larger than the {max_bytes:,}-byte input limit (max_bytes; raise it with "
                         "--limit max_bytes=N)", file=str(p))
    if kind not in (None, "gzip"):
        raise InputError(f"{kind}-compressed input is not read; decompress it, or gzip it instead",
                         file=str(p))
    return raw


def read_bytes(path: PathArg, *, max_bytes: int | None = None) -> bytes | bytearray:
    """Return the content of ``path``, gunzipped when its bytes say gzip (:func:`stored_bytes`).

    Parameters
    ----------
    path
        The input file, or an fsspec URL (``s3://bucket/key``) read through fsspec.
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
    if max_bytes is None:
        max_bytes = current_limits().max_bytes
    raw = stored_bytes(path, max_bytes=max_bytes)
    if compression_of(raw[:8]) is None:
        return raw
    return gunzip(raw, str(path if is_url(path) else Path(path)), max_bytes)


def gunzip(raw: bytes | bytearray, file: str, max_bytes: int | None = None) -> bytes | bytearray:
    """Decompress every gzip member of ``raw`` in bounded slices (a small bomb stops at the limit).

    The output grows with the bytes actually produced, never from the ISIZE trailer: a truncated or
    forged file's trailer is arbitrary bytes, and sizing a buffer from it let a small file ask for
    gigabytes.  (A large bytearray grows in place by ``mremap``: the content is still held once.)

    Parameters
    ----------
    raw
        The stored bytes of a gzip file (one member or several).
    file
        The file's name, for the errors.
    max_bytes
        The most bytes the content may hold (default: the ``max_bytes`` limit in force).

    Returns
    -------
    bytes or bytearray
        The content: the one slice it came in, or the buffer it was gathered in (a bytes copy would
        briefly hold the text twice).

    Raises
    ------
    InputError
        A truncated or corrupt gzip stream, or content beyond ``max_bytes``.
    """
    if max_bytes is None:
        max_bytes = current_limits().max_bytes
    inflation = current_limits().max_inflation
    most = max(inflation * len(raw), INFLATION_FLOOR)  # bounded by what the file holds, not its trailer
    first: list[bytes] = []  # the content while it is one slice (a small file): returned as it is
    out = bytearray()
    filled = 0
    view = memoryview(raw)
    pos = 0

    def put(chunk: bytes) -> None:
        nonlocal filled, out
        end = filled + len(chunk)
        if end > max_bytes:
            raise InputError(f"decompresses to more than the {max_bytes:,}-byte input limit (max_bytes; "
                             "raise it with --limit max_bytes=N)", file=file, field="gzip")
        if end > most:
            raise InputError(f"decompresses to more than {inflation} times its {len(raw):,} stored bytes "
                             f"(limit max_inflation; raise it with --limit max_inflation=N)", file=file,
                             field="gzip")
        if not filled and not first:
            first.append(chunk)
        else:
            if first:  # a second slice: gather into a buffer that grows with what is produced
                out = bytearray(first.pop())
            out += chunk
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
    if first:
        return first[0]
    return out  # the buffer itself: a bytes copy would briefly hold the text twice


def check_line_bytes(data: bytes | bytearray, file: str, limit: int | None = None) -> None:
    """Refuse content with a line longer than ``limit`` bytes, before any line of it is decoded or split.

    The content is scanned a window of ``limit + 1`` bytes at a time for its last newline (a few
    ``rfind`` calls per ``limit`` bytes, whatever the number of lines): no line is copied.

    Parameters
    ----------
    data
        The content (plain bytes).
    file
        The file's name, for the error.
    limit
        The most bytes one line may hold, its newline excluded (default: the ``max_line_bytes``
        limit in force).

    Raises
    ------
    InputError
        A line of more than ``limit`` bytes (the message gives its line number and the limit).
    """
    if limit is None:
        limit = current_limits().max_line_bytes
    n, pos = len(data), 0
    while n - pos > limit:  # the rest may hold a longer line
        last = data.rfind(b"\n", pos, pos + limit + 1)
        if last < 0:  # no newline in limit + 1 bytes from a line's start
            line = data.count(b"\n", 0, pos) + 1
            raise InputError(f"line {line} holds more than the {limit:,}-byte line limit (max_line_bytes; "
                             "raise it with --limit max_line_bytes=N)", file=file, row=line)
        pos = last + 1


def read_text(path: PathArg, *, max_bytes: int | None = None) -> str:
    """Return ``path`` as UTF-8 text (plain or gzip, by its bytes; a byte-order mark is dropped).

    Every line is held to the ``max_line_bytes`` limit (:func:`check_line_bytes`) before the bytes
    are decoded.

    Raises
    ------
    InputError
        As :func:`read_bytes`, a line longer than ``max_line_bytes``, or a byte that is not UTF-8
        (the message gives its line).
    """
    data = read_bytes(path, max_bytes=max_bytes)
    check_line_bytes(data, str(path))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8 text; "
                         "expected UTF-8, optionally gzipped", file=str(path), row=line) from exc


def confined(base: PathArg, name: PathArg, *, what: str = "path",
             allow: Iterable[PathArg] | None = None) -> Path:
    """Resolve ``name`` against the folder ``base`` and refuse it if it leaves that folder.

    Parameters
    ----------
    base
        The folder of the manifest or scenario file that names the path (or the project root).
    name
        The path as written there (relative; an absolute path must still lie inside ``base``).
    what
        What the path is, for the message (``"scheduler file"``).
    allow
        Further folders the path may lie in; default those an explicit allow-list opened
        (``fleetlib --allow-path DIR``, :func:`using_limits` ``allow=``).

    Returns
    -------
    Path
        The resolved path (existence is not checked).

    Raises
    ------
    InputError
        The path resolves outside ``base`` and every allowed folder (``..``, an absolute path
        elsewhere, a link out).
    """
    root = Path(base).resolve()
    written = Path(base).absolute() / Path(name)  # an absolute name replaces the base
    target = written.resolve()
    roots = (root, *(r for r in (allowed_roots() if allow is None else map(_root, allow)) if not is_url(r)))
    if not _inside(target, roots):
        raise InputError(f"{what} {excerpt(os.fspath(name), 80)} lies outside {root}{link_note(base, name)}; "
                         "only paths "
                         "inside the folder that names them are read (name another folder with "
                         "--allow-path DIR)", file=excerpt(os.fspath(name), 80)[1:-1])
    return target


def _inside(target: Path, roots: Iterable[Path]) -> bool:
    return any(target == r or r in target.parents for r in roots)


def link_note(base: PathArg, name: PathArg) -> str:
    """Return `` (the link L leads to T)`` for the first symbolic link on the way to ``base/name``, or ''.

    Parameters
    ----------
    base
        The folder ``name`` is relative to.
    name
        The path as written (an absolute one replaces ``base``).

    Returns
    -------
    str
        The note, for a message refusing a path that leaves its folder.
    """
    if is_url(base) or is_url(name):
        return ""
    written = Path(base).absolute() / Path(name)
    for part in (*reversed(written.parents), written):
        if part.is_symlink():
            return f" (the link {part} leads to {part.resolve()})"
    return ""


#: What a listed folder's entry is when it is no regular file, by its ``stat`` mode.
_SPECIAL = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def listed_files(folder: PathArg, suffixes: tuple[str, ...], *, recursive: bool = False,
                 ledger: Ledger | None = None) -> list[Path]:
    """Return the regular files of a listed folder whose names end with one of ``suffixes``, sorted.

    Every entry is resolved (symbolic links followed) and must lie inside the folder or a folder that
    ``--allow-path`` opened: a link leading out is refused, naming the link and its target.  A named
    pipe, a device or a socket among the entries is never opened: it is flagged ``special_file`` in
    ``ledger``, or refused when no ledger is given -- never skipped silently.  Sub-folders are walked
    when ``recursive`` (links to folders are not followed into).

    Parameters
    ----------
    folder
        The folder a manifest or a command names; an fsspec folder URL (``s3://bucket/traces/``) is
        listed through fsspec and its objects returned as URLs (``str``), never copied.
    suffixes
        Name endings (lower case) of the files wanted, e.g. ``(".json", ".json.gz")``.
    recursive
        Walk sub-folders too.
    ledger
        Where special files are noted.

    Returns
    -------
    list of Path
        The files, each as listed (not resolved), sorted by path.

    Raises
    ------
    InputError
        A link leads outside the allowed folders, or a special file is listed and no ledger is given.
    """
    if is_url(folder):
        return _listed_objects(str(folder), suffixes, recursive=recursive)  # type: ignore[return-value]
    top = Path(folder)
    roots = (top.resolve(), *allowed_roots())
    entries: list[Path] = []
    if recursive:
        for dirpath, _, names in os.walk(top):  # links to folders are listed as names, not walked into
            entries += [Path(dirpath) / n for n in names]
    else:
        entries = [e for e in top.iterdir()]
    found = []
    for entry in sorted(entries):
        if not entry.name.lower().endswith(suffixes):
            continue
        if entry.is_symlink():
            target = entry.resolve()
            if not _inside(target, roots):
                raise InputError(f"the link {entry} leads to {target}, outside the listed folder {roots[0]}; "
                                 "only files inside it are read (name another folder with --allow-path DIR)",
                                 file=str(entry))
        try:
            mode = entry.stat().st_mode
        except OSError:  # a dangling link: the reader names the missing file
            found.append(entry)
            continue
        if stat.S_ISDIR(mode):
            continue
        kind = next((what for test, what in _SPECIAL if test(mode)), None)
        if kind is None:
            found.append(entry)
        elif ledger is None:
            raise InputError(f"is {kind}, not a regular file (never read)", file=str(entry))
        else:
            ledger.flag("special_file", f"{kind} in the listed folder {top} is not read", file=str(entry))
    return found


def _listed_objects(url: str, suffixes: tuple[str, ...], *, recursive: bool) -> list[str]:
    """Return the URLs of the objects under the folder URL ``url`` whose names end with ``suffixes``, sorted.

    Object storage holds no links and no special files: the listing is the objects themselves, each
    named by its URL (read later by whichever process is handed it).
    """
    fs, key = _url_fs(url)
    key = key.rstrip("/")
    try:
        found = fs.find(key, detail=True, maxdepth=None if recursive else 1)
    except OSError as exc:
        raise InputError(f"cannot list the folder ({exc.strerror or exc})", file=url) from None
    base = url.rstrip("/")
    return [f"{base}/{posixpath.relpath(k, key)}" for k, v in sorted(found.items())
            if v.get("type") != "directory" and posixpath.basename(k).lower().endswith(suffixes)]


# ---------------------------------------------------------------------------------------------------
# Limits: what one input may ask of the machine
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """The bounds every reader holds an input to; each is named in the error that reports it crossed.

    The defaults are sized for real inputs (many times the largest bundled sample or real export we
    know) and far below what would exhaust memory or time.  Raise one for a run with
    ``fleetlib --limit NAME=VALUE ...`` or, in Python, ``with using_limits(NAME=VALUE): ...``.

    Attributes
    ----------
    max_bytes
        The most bytes one input may hold once decompressed.
    max_depth
        The deepest nesting of one JSON or YAML document (a Kubernetes object is about 8 deep).
    max_yaml_nodes
        The most nodes one YAML document may hold with every alias expanded where it is used
        (a "billion laughs" document is a few aliases that expand to billions).
    max_node_names
        The most node names one Slurm hostlist (``gpu-a[0001-0512]``) may expand to.
    max_events
        The most events one trace file may hold.
    max_steps
        The most steps one input may describe or a generator may write (an MLPerf count field of
        8e15, or a synthetic-steps parameter of 10**12, would otherwise size an allocation).
    max_line_bytes
        The most bytes one line of a text input may hold (a whole JSON document written on one line
        is one line): a 200 MB line would otherwise be materialised, split and parsed as one value.
    max_inflation
        The most bytes a gzip file may decompress to per stored byte, beyond its first 64 MiB (real
        exports inflate 5 to 50 times; a small gzip of a gigabyte of newlines, about 1,000).
    earliest_year, latest_year
        Times outside ``[earliest_year-01-01, latest_year-01-01)`` (UTC) are refused as implausible:
        a number of seconds read as nanoseconds, or a 1e20 that would otherwise become 1970.  Both lie
        in 1678..2262, the span a nanosecond time can hold.
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = 64
    max_yaml_nodes: int = 1_000_000
    max_node_names: int = 1_000_000
    max_events: int = 100_000_000
    max_steps: int = 10_000_000
    max_line_bytes: int = 64 * 1024**2
    max_inflation: int = 200
    earliest_year: int = 2000
    latest_year: int = 2100

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DomainError(f"limit {f.name} must be a whole number >= 1; got {value!r}")
        if not 1678 <= self.earliest_year < self.latest_year <= 2262:  # what a nanosecond time holds
            raise DomainError(f"the plausible years must satisfy 1678 <= earliest_year < latest_year <= 2262 "
                              f"(the span a nanosecond time holds); got earliest_year={self.earliest_year}, "
                              f"latest_year={self.latest_year}")


#: One line per limit for ``--help`` and the README.
LIMIT_HELP: dict[str, str] = {
    "max_bytes": "bytes one input may hold once decompressed",
    "max_depth": "nesting depth of one JSON or YAML document",
    "max_yaml_nodes": "nodes of one YAML document with its aliases expanded",
    "max_node_names": "node names one Slurm hostlist may expand to",
    "max_events": "events one trace file may hold",
    "max_steps": "steps one input may describe or a generator may write",
    "max_line_bytes": "bytes one line of a text input may hold",
    "max_inflation": "bytes a gzip input may inflate to per stored byte (beyond its first 64 MiB)",
    "earliest_year": "times before January 1 of this year are refused",
    "latest_year": "times from January 1 of this year on are refused",
}

#: Environment variables that carry ``--limit`` and ``--allow-path`` into the processes a command
#: starts (the report's notebook kernels): ``FLEETLIB_LIMITS="max_depth=200,max_bytes=4e9"`` and
#: ``FLEETLIB_ALLOW_PATH`` (folders separated by ``os.pathsep``).
LIMITS_ENV = "FLEETLIB_LIMITS"
ALLOW_ENV = "FLEETLIB_ALLOW_PATH"

_LIMITS: list[Limits] = []
_ALLOWED: list[tuple[Path | str, ...]] = []


def _from_environment() -> None:
    if _LIMITS:
        return
    text = os.environ.get(LIMITS_ENV, "").strip()
    overrides = dict(parse_limit(t) for t in text.split(",") if t.strip())
    listed = os.environ.get(ALLOW_ENV, "")
    # a URL's own "://" is no separator
    parts = re.split(r":(?!//)", listed) if os.pathsep == ":" else listed.split(os.pathsep)
    allow = [_root(a) for a in parts if a.strip()]
    _LIMITS.append(dataclasses.replace(Limits(), **overrides))
    _ALLOWED.append(tuple(allow))


def current_limits() -> Limits:
    """Return the limits in force: the defaults, changed by ``$FLEETLIB_LIMITS`` and :func:`using_limits`."""
    _from_environment()
    return _LIMITS[-1]


@contextlib.contextmanager
def using_limits(limits: Limits | None = None, *, allow: Iterable[PathArg] = (),
                 **overrides: int) -> Iterator[Limits]:
    """Run a block under other limits and with extra folders allowed for named paths.

    Parameters
    ----------
    limits
        The limits to start from (default: those in force).
    allow
        Folders outside the project root (or a manifest's folder) that paths in scenario files and
        manifests may name during the block (the CLI's ``--allow-path``).
    **overrides
        Limits to change, by name (``max_depth=200``).

    Yields
    ------
    Limits
        The limits in force inside the block.
    """
    base = limits if limits is not None else current_limits()  # also reads the environment once
    unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(Limits)})
    if unknown:
        raise DomainError(f"unknown limit {unknown[0]!r}; known: {', '.join(LIMIT_HELP)}")
    new = dataclasses.replace(base, **overrides)
    _LIMITS.append(new)
    _ALLOWED.append((*_ALLOWED[-1], *(_root(a) for a in allow)))
    try:
        yield new
    finally:
        _LIMITS.pop()
        _ALLOWED.pop()


def _root(allowed: PathArg) -> Path | str:
    """Return an allowed folder resolved, or an allowed URL prefix as written."""
    return str(allowed) if is_url(allowed) else Path(allowed).resolve()


def allowed_roots() -> tuple[Path | str, ...]:
    """Return the folders (and URL prefixes) an explicit allow-list (``--allow-path``) opened."""
    _from_environment()
    return _ALLOWED[-1]


def parse_limit(text: str) -> tuple[str, int]:
    """Parse ``NAME=VALUE`` (``max_depth=200``, ``max_bytes=32e9``) into a limit's name and value.

    Raises
    ------
    DomainError
        Not ``NAME=VALUE``, an unknown name, or a value that is not a whole number >= 1.
    """
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or name not in LIMIT_HELP:
        raise DomainError(f"--limit expects NAME=VALUE with NAME one of {', '.join(LIMIT_HELP)}; "
                          f"got {text!r}")
    try:
        number = float(value.replace("_", ""))
    except ValueError:
        number = float("nan")
    if not (number >= 1 and number == int(number) and number < 2**63):
        raise DomainError(f"--limit {name} expects a whole number >= 1; got {value!r}")
    return name, int(number)


def excerpt(value: Any, width: int = 40) -> str:
    """Return ``value`` as a short, escaped excerpt for a message (never the whole of a long field).

    Control characters and non-ASCII are escaped as Python writes them; text longer than ``width``
    is cut and ends in ``...`` with its length, so a message never carries more than a glimpse of a
    file's contents.
    """
    text = value if isinstance(value, str) else str(value)
    shown = ascii(text[:width])[1:-1]
    return f"'{shown}'" if len(text) <= width else f"'{shown}...' ({len(text):,} characters)"


# ---------------------------------------------------------------------------------------------------
# Text that is no text: lone surrogate escapes
# ---------------------------------------------------------------------------------------------------

#: A JSON or YAML escape of a UTF-16 surrogate (U+D800-U+DFFF): ``\ud800``, or YAML's ``\U0000dc00``.
_SURROGATE_ESCAPE = re.compile(r"\\(?:u|U0000)([dD][89a-fA-F][0-9a-fA-F]{2})")


def _whole_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # only a surrogate cannot be encoded
        return False
    return True


def _lone_surrogate_text(value: Any) -> tuple[str, str] | None:
    """Return (where, text) of the first text of a parsed document, key or value, with a lone surrogate.

    ``where`` is the path to it (``key.key[index]``; ``(document)`` for a document that is one text);
    ``text`` is the value, or empty where the key itself holds the surrogate.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not _whole_text(item):
                return path or "(document)", item
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                name = key if isinstance(key, str) else str(key)
                at = f"{path}.{name}" if path else name
                if isinstance(key, str) and not _whole_text(key):
                    return at, ""  # the key itself: no value to show
                children.append((at, child))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path}[{i}]", child) for i, child in enumerate(item)]))
    return None


def _first_lone_escape(text: str) -> tuple[int, str] | None:
    """Return (0-based line, escape) of the first surrogate escape of ``text`` that is not half of a pair."""
    matches = list(_SURROGATE_ESCAPE.finditer(text))
    k = 0
    while k < len(matches):
        m = matches[k]
        code = int(m.group(1), 16)
        after = matches[k + 1] if k + 1 < len(matches) else None
        if (code < 0xDC00 and after is not None and after.start() == m.end()
                and int(after.group(1), 16) >= 0xDC00):
            k += 2  # a high and a low half: one character
            continue
        return text.count("\n", 0, m.start()), m.group(0)
    return None


#: A lone UTF-16 surrogate that is not an escaped byte: a JSON ``\uD800``-``\uDFFF`` escape
#: without its pair (U+DC80-U+DCFF are bytes that ``surrogateescape`` could not decode).
_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
_ANY_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: Any) -> Any:
    r"""Return text whose lone surrogates are replaced by U+FFFD; any other value as it is.

    Two kinds of surrogate reach text that no UTF-8 file, Arrow column or report can hold: bytes
    that were not UTF-8, decoded with ``errors="surrogateescape"`` (U+DC80-U+DCFF, one per byte),
    and JSON escapes of one half of a UTF-16 pair (``"\ud800"``), which :mod:`json` decodes.  The
    escaped bytes are decoded again as UTF-8 with each invalid sequence replaced, the lone escapes
    replaced one character each.

    Parameters
    ----------
    value
        Anything; only a ``str`` holding a surrogate is changed.

    Examples
    --------
    >>> clean_text(b"caf\xe9".decode("utf-8", "surrogateescape")) == "caf\ufffd"
    True
    >>> clean_text(json.loads('"H100\\ud800"')) == "H100\ufffd"
    True
    >>> clean_text(3)
    3
    """
    if isinstance(value, str) and _ANY_SURROGATE.search(value):
        value = _LONE_SURROGATE.sub("\ufffd", value)  # first: surrogateescape cannot write them
        return value.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    return value


def check_whole_text(parsed: Any, source: str | bytes | bytearray, *, file: str,
                     row: int | None = None) -> None:
    r"""Refuse a parsed JSON or YAML document whose text holds a lone surrogate escape.

    JSON (``"\ud800"``) and YAML (``"\ud800"``, ``"\U0000d800"``) can escape one half of a
    UTF-16 pair alone: the parsers return it as a Python string that names no character, which no
    UTF-8 file, Arrow string column or report can hold.  Such text is refused here, where its file
    and line are known, rather than failing later far from them.  Only a document whose source
    holds a surrogate escape is looked through (one search for a backslash decides most).

    Parameters
    ----------
    parsed
        The parsed document (dicts, lists, text, numbers).
    source
        The text it was parsed from.
    file, row
        Where it is (``row``: the file line ``source`` starts on; None: line 1 of the file).

    Raises
    ------
    InputError
        A key or text value holds a lone surrogate; the message names its path in the document and
        the escape, ``row`` the line of the first lone escape in ``source``.
    """
    text = source if isinstance(source, str) else bytes(source).decode("utf-8", "replace")
    if not _may_escape_surrogates(text):
        return
    found = _lone_surrogate_text(parsed)
    if found is not None:  # else escapes of pairs only
        raise _lone_surrogate_error(found, text, file=file, row=row)


def _may_escape_surrogates(text: str) -> bool:
    return "\\" in text and _SURROGATE_ESCAPE.search(text) is not None


def _lone_surrogate_error(found: tuple[str, str], text: str, *, file: str, row: int | None) -> InputError:
    where, value = found
    where = ascii(where)[1:-1]  # the path may hold the surrogate itself: shown escaped, as excerpt shows
    lone = _first_lone_escape(text)
    line = (row or 1) + lone[0] if lone is not None else row
    what = f"the text of {where}, {excerpt(value)}," if value else f"the key {where}"
    if lone is None:  # only escapes that would pair in JSON: YAML reads each \u escape alone
        return InputError(f"{what} holds halves of a UTF-16 pair, which YAML reads as two lone surrogates, "
                          "no character; write the character itself or one \\U escape (\\U0001F600)",
                          file=file, row=row, field=where)
    return InputError(f"{what} holds a lone surrogate escape ({lone[1]}): half of a UTF-16 pair, which is "
                      "no character; expected text of whole characters", file=file, row=line, field=where)


# ---------------------------------------------------------------------------------------------------
# Bounded parsing: JSON and YAML
# ---------------------------------------------------------------------------------------------------


def nesting_message(kind: str = "JSON", *, limit: int | None = None, at: str = "") -> str:
    """Return the message for ``kind`` text nested deeper than ``limit`` (default: the limit in force).

    ``at`` is inserted after the depth (``" at line 3"``) where the row field cannot say where.
    """
    depth = current_limits().max_depth if limit is None else limit
    return f"{kind} nested more than {depth} deep{at} (limit max_depth; raise it with --limit max_depth=N)"


def json_depth_rows(data: str | bytes | bytearray, max_depth: int | None = None, *,
                    per_line: bool = False) -> Any:
    """Return the 1-based lines where JSON text nests deeper than ``max_depth`` (streaming scan).

    Brackets inside strings are not counted (a quote preceded by an odd run of backslashes is
    escaped).  With ``per_line`` each line is scanned as its own document (JSON lines), so one broken
    line does not shift the depth of the next; otherwise the first line where the whole document
    crosses the limit is returned (at most one).  The scan (:mod:`fleetlib._jsondepth`) carries only
    its depth and string state from chunk to chunk: a ``str`` is encoded a chunk at a time, bytes are
    read in place a chunk at a time, so the memory it adds does not grow with the text.

    Returns
    -------
    numpy.ndarray
        Sorted, unique 1-based line numbers (empty when every document is within the limit).
    """
    limit = current_limits().max_depth if max_depth is None else max_depth
    state = new_state()
    if isinstance(data, str):
        chunks: Iterable[Any] = (data[i:i + CHUNK].encode("utf-8", "surrogatepass")
                                 for i in range(0, len(data), CHUNK))
    else:
        view = memoryview(data).cast("B")
        chunks = (view[i:i + CHUNK] for i in range(0, len(view), CHUNK))
    found = []
    for chunk in chunks:
        lines = scan_depth(np.frombuffer(chunk, dtype=np.uint8), limit, per_line, state)
        if lines.size:
            found.append(lines)
            if not per_line:
                break
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {excerpt(text, 24)} is beyond the range of a float; expected a finite "
                         "number")
    return value


_NON_FINITE_MEMBER = re.compile(r'"((?:[^"\\\n]|\\.){1,200})"\s*:\s*'
                                r'(?:-?(?:NaN|Infinity)\b|-?\d[\d.]*[eE]\+?\d{3,})')


def _key_of_non_finite(text: str | bytes | bytearray) -> str | None:
    """Return the key of the first member whose value is NaN, Infinity or beyond a float (or None)."""
    if not isinstance(text, str):
        text = bytes(text[:1 << 20]).decode("utf-8", "replace")
    found = _NON_FINITE_MEMBER.search(text[:1 << 20])
    return found.group(1) if found else None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows; expected a finite number")


def load_json(text: str | bytes | bytearray, *, file: str, row: int | None = None,
              max_depth: int | None = None, depth_checked: bool = False) -> Any:
    """Parse one JSON document with bounded nesting and finite numbers only.

    ``NaN``, ``Infinity`` and a number beyond the float range (``1e400``) are refused rather than
    read as non-finite floats.

    Parameters
    ----------
    text
        The document.
    file, row
        Where it is, for messages (``row``: the file line the text starts on).
    max_depth
        The deepest nesting allowed (default: the limit in force).
    depth_checked
        True when the caller has already scanned the depth (:func:`json_depth_rows` over a whole
        JSON-lines file), to skip a second scan.

    Raises
    ------
    InputError
        Not valid JSON (with its line), nested deeper than ``max_depth``, or a non-finite number.
    """
    limit = current_limits().max_depth if max_depth is None else max_depth
    deep = () if depth_checked else json_depth_rows(text, limit)
    if len(deep):
        line = int(deep[0]) + (row - 1 if row is not None else 0)
        raise InputError(nesting_message("JSON", limit=limit), file=file, row=line)
    try:
        parsed = json.loads(text, parse_float=_finite_float, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        line = exc.lineno + (row - 1 if row is not None else 0)
        raise InputError(f"not valid JSON ({exc.msg} at column {exc.colno}); expected one complete JSON "
                         "document (a truncated line?)", file=file, row=line) from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{exc}", file=file, row=row, field=_key_of_non_finite(text)) from None
    check_whole_text(parsed, text, file=file, row=row)
    return parsed


def _bounded_loader(file: str, limits: Limits, base: type) -> type:

    class _Bounded(base):  # type: ignore[misc, valid-type]
        """A safe loader that refuses deep nesting before composing and counts aliases as they expand."""

        _depth = 0
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
            self._depth += 1
            if self._depth > limits.max_depth:
                mark = self.peek_event().start_mark
                raise InputError(nesting_message("YAML", limit=limits.max_depth), file=file,
                                 row=mark.line + 1)
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            """Refuse a key written twice in one mapping: the later value would replace the first silently."""
            if isinstance(node, yaml.MappingNode):
                seen: dict[tuple[str, str], int] = {}
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # merged keys ('<<') may be overridden, as YAML says
                    key = (key_node.tag, key_node.value)
                    line = key_node.start_mark.line + 1
                    if key in seen:
                        raise InputError(f"duplicate key {excerpt(key_node.value)} (first at line "
                                         f"{seen[key]}): a mapping names each key once; the later value "
                                         "would silently replace the first", file=file, row=line,
                                         field=excerpt(key_node.value, 64).strip("'"))
                    seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return _Bounded


def _expanded_size(node: Any, limit: int, file: str) -> int:
    """Count the nodes of a composed YAML graph with each alias expanded where it is used."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        cur, done = stack.pop()
        key = id(cur)
        if key in sizes and not done:
            continue
        if isinstance(cur, yaml.SequenceNode):
            children = list(cur.value)
        elif isinstance(cur, yaml.MappingNode):
            children = [n for pair in cur.value for n in pair]
        else:
            sizes[key] = 1
            continue
        if not done:
            stack.append((cur, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        total = 1 + sum(sizes.get(id(c), 1) for c in children)
        if total > limit:
            raise InputError(f"YAML expands to more than {limit:,} nodes once its aliases are expanded "
                             "(limit max_yaml_nodes; raise it with --limit max_yaml_nodes=N)",
                             file=file, row=cur.start_mark.line + 1)
        sizes[key] = total
    return sizes[id(node)]


def _c_event_check(text: str, base: type, file: str, limits: Limits) -> int:
    """Walk the YAML events (libyaml, iterative): refuse deep nesting; return the number of aliases."""
    depth = aliases = 0
    for event in yaml.parse(text, Loader=base):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.max_depth:
                raise InputError(nesting_message("YAML", limit=limits.max_depth), file=file,
                                 row=event.start_mark.line + 1)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
    return aliases


class Yaml12FloatLoader(yaml.SafeLoader):
    """A safe YAML loader that also reads ``1e-3`` as a number (YAML 1.2 floats).

    PyYAML follows YAML 1.1, where an exponent without a decimal point is text; scenario files and
    model configurations that write ``1e-3`` mean a number, so the YAML 1.2 float form is accepted as
    well.  Pass it as ``loader=`` to :func:`load_yaml`.
    """


Yaml12FloatLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.VERBOSE,
    ),
    list("-+0123456789."),
)


def load_yaml_all(text: str, *, file: str, invalid: str = "not valid YAML",
                  loader: type | None = None) -> list[tuple[int, Any]]:
    """Parse every YAML document of ``text`` safely, with bounded nesting and alias expansion.

    Only the safe tags are constructed (no Python objects); nesting deeper than ``max_depth`` is
    refused before it is composed, and a document whose aliases would expand to more than
    ``max_yaml_nodes`` nodes (a "billion laughs") is refused before anything expands it.

    Parameters
    ----------
    text
        The YAML text.
    file
        Its name, for messages.
    invalid
        How a message calls YAML that does not parse.
    loader
        A :class:`yaml.SafeLoader` subclass to build on (extra implicit resolvers); default the safe
        loader itself.

    Returns
    -------
    list of (int, object)
        Each non-empty document with the 1-based line it starts on.

    Raises
    ------
    InputError
        Not valid YAML (with its line), too deep, or too large once expanded.
    """
    limits = current_limits()
    base = yaml.SafeLoader if loader is None else loader
    c_loader = getattr(yaml, "CSafeLoader", None)
    is_c = c_loader is not None and issubclass(base, c_loader)
    if not (is_c or issubclass(base, yaml.SafeLoader)):
        raise DomainError("load_yaml_all builds only on yaml.SafeLoader, yaml.CSafeLoader and their "
                          "subclasses")
    out: list[tuple[int, Any]] = []
    reader: Any = None
    # A composed document is hundreds of thousands of container objects at fleet scale (a manifest's
    # 200k job entries) and none of them is garbage until it is returned: the cyclic collector's scans
    # while they are built find nothing and cost four times the parse (3.6 s of 4.4 s), so it pauses.
    with collector_paused():
        try:
            if is_c:  # libyaml composes in C, out of reach of a hook: check the events first (no recursion)
                aliases = _c_event_check(text, base, file, limits)
                reader = base(text)
            else:
                reader = _bounded_loader(file, limits, base)(text)
            while reader.check_node():
                node = reader.get_node()
                if node is None:
                    continue
                if (aliases if is_c else reader.aliases):  # without an alias nothing can expand
                    _expanded_size(node, limits.max_yaml_nodes, file)
                out.append((node.start_mark.line + 1, reader.construct_document(node)))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise InputError(f"{invalid} ({getattr(exc, 'problem', None) or exc}); expected complete YAML "
                             "(a truncated file?)", file=file,
                             row=None if mark is None else mark.line + 1) from None
        except RecursionError:
            raise InputError(f"YAML nested too deep to read (limit max_depth={limits.max_depth})",
                             file=file) from None
        finally:
            if reader is not None:
                reader.dispose()
    docs = [(line, doc) for line, doc in out if doc is not None]
    if _may_escape_surrogates(text):  # one search of the whole text, however many documents
        for _, doc in docs:
            found = _lone_surrogate_text(doc)
            if found is not None:
                raise _lone_surrogate_error(found, text, file=file, row=None)
    return docs


def load_yaml(text: str, *, file: str, invalid: str = "not valid YAML", loader: type | None = None) -> Any:
    """Parse one YAML document as :func:`load_yaml_all` does; None for an empty text.

    Raises
    ------
    InputError
        As :func:`load_yaml_all`, or the text holds more than one document.
    """
    docs = load_yaml_all(text, file=file, invalid=invalid, loader=loader)
    if len(docs) > 1:
        raise InputError("expected one YAML document; found another", file=file, row=docs[1][0])
    return docs[0][1] if docs else None


# ---------------------------------------------------------------------------------------------------
# Values in range
# ---------------------------------------------------------------------------------------------------

_INT64_MAX = 2**63 - 1


def out_of_range_int(values: Any) -> Any:
    """Return a mask of values that are whole numbers beyond int64 (would wrap if stored as int64).

    ``values`` may be text or numbers (a pandas Series or anything array-like); text that is not a
    whole number, and missing values, are not marked.
    """
    import numpy as np
    import pandas as pd

    s = pd.Series(values) if not isinstance(values, pd.Series) else values
    if s.dtype.kind == "u":  # pandas reads 2**63 .. 2**64-1 as uint64: beyond int64 all the same
        return s.to_numpy() > np.uint64(_INT64_MAX)
    if s.dtype.kind in "ib":
        return np.zeros(len(s), dtype=bool)
    if s.dtype.kind == "f":
        a = s.to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            return np.isfinite(a) & ((a >= 2.0**63) | (a < -(2.0**63)))  # float(int64 max) is 2**63
    text = s.astype("string").str.strip()
    digits = text.str.fullmatch(r"[+-]?\d+").fillna(False).to_numpy(dtype=bool)
    out = np.zeros(len(s), dtype=bool)
    if digits.any():
        body = text[digits].str.lstrip("+-").str.lstrip("0")
        most = pd.Series(str(_INT64_MAX), index=body.index).where(~text[digits].str.startswith("-"),
                                                                  str(_INT64_MAX + 1))  # int64 min fits
        long = (body.str.len() > 19) | ((body.str.len() == 19) & (body > most))
        out[np.flatnonzero(digits)] = long.fillna(False).to_numpy(dtype=bool)
    return out


def time_range(limits: Limits | None = None) -> tuple[Any, Any]:
    """Return the plausible-time bounds ``(earliest, latest)`` as UTC :class:`pandas.Timestamp`."""
    import pandas as pd

    lim = limits or current_limits()
    return (pd.Timestamp(year=lim.earliest_year, month=1, day=1, tz="UTC"),
            pd.Timestamp(year=lim.latest_year, month=1, day=1, tz="UTC"))


#: The least margin around the bulk of a file's times before a time is far from the rest (90 days, in ns).
FAR_MARGIN_NS = 90 * 86_400 * 10**9
#: The fewest records (rows with a time) a file must hold before its bulk is judged (fewer: no time is far).
FAR_MIN_TIMES = 10


def far_times(values: Any) -> tuple[Any, Any, str]:
    """Find the times far from the bulk of one file's times: a year ahead of the rest, or a 1970 among 2026.

    The bulk is the file's middle half (first to third quartile, ``q1..q3``); the margin ``m`` is
    twice its width, at least 90 days.  A time more than ``m`` outside ``[q1, q3]`` is far (a ledger
    flag); more than ten margins outside, it is impossible for the file (a rejection: a clock reset
    to 1970 would otherwise hold decades).  A file of fewer than 10 records has no bulk to judge by.

    Parameters
    ----------
    values
        The file's times as ``datetime64[ns]`` (NaT: missing): one per record, or one row of
        times (its columns) per record.

    Returns
    -------
    tuple of (ndarray, ndarray, str)
        The masks of the far times and of the impossible ones (exclusive), and the bulk as text
        (``"2026-03-01 .. 2026-03-20"``) for the messages.
    """
    import numpy as np

    arr = np.asarray(values, dtype="datetime64[ns]")
    ns = arr.view(np.int64)
    present = ~np.isnat(arr)
    far = np.zeros(arr.shape, dtype=bool)
    impossible = np.zeros(arr.shape, dtype=bool)
    records = int(present.any(axis=1).sum()) if present.ndim == 2 else int(present.sum())
    if records < FAR_MIN_TIMES:
        return far, impossible, ""
    q1, q3 = np.quantile(ns[present], [0.25, 0.75], method="lower")
    margin = max(2 * (int(q3) - int(q1)), FAR_MARGIN_NS)
    off = np.where(present, np.maximum(q1 - ns, ns - q3), 0).astype(np.float64)  # ns outside the bulk
    impossible = present & (off > 10.0 * margin)
    far = present & (off > margin) & ~impossible
    first, third = (np.datetime64(int(q), "ns").astype("datetime64[D]") for q in (q1, q3))
    bulk = f"{first} .. {third}"
    return far, impossible, bulk
