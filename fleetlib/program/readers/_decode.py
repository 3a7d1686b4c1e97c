"""Bytes -> events: the Chrome-trace document cut into pieces of events and decoded.

A piece is decoded by ``msgspec`` into typed records holding only the fields the tables use, or by
:mod:`json` wherever the typed decoder could differ from the standard library (see the *Decoding
and cache* section of :mod:`fleetlib.program.readers.kineto`).  Also the small value helpers the
other reader modules share.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np

from fleetlib._io import GZIP_MAGIC, check_regular, clean_text, compression_of, current_limits
from fleetlib.program.readers import _memo
from fleetlib.quality import InputError

try:  # typed, column-projected decoding; the stdlib path below is complete without it
    import msgspec
except ImportError:  # pragma: no cover - msgspec is a declared dependency
    msgspec = None


_CHUNK_BYTES = 1 << 20        # largest piece of the event array decoded at once
_MIN_CHUNK_BYTES = 256 << 10  # smallest (a file is cut into about 16 pieces between the two)
#: Text up to this size is not cut below ``_CHUNK_BYTES`` (a sub-MB rank file is one piece): a
#: piece's fixed cost (a decode call, one pass of column building) outweighs the memory it saves.
_ONE_PIECE_BYTES = 4 << 20
_KEY_RE = re.compile(rb'"traceEvents"\s*:\s*\[')
_JSON_WS = b" \t\n\r"  # the whitespace JSON allows between tokens (bytes.strip() takes more)
_KEY_STRICT_RE = re.compile(rb'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')  # JSON whitespace only
_CUT_RE = re.compile(rb"\}\s*,\s*\{")
# The keys of an event's args that the tables use (JSON key -> attribute of the typed record)
_ARG_KEYS: dict[str, str] = {
    "device": "device", "stream": "stream", "correlation": "correlation",
    "Collective name": "collective_name", "In msg nelems": "in_msg_nelems", "dtype": "dtype",
    "Process Group Name": "pg_name", "Process Group Description": "pg_desc", "bytes": "bytes",
    "External id": "external_id", "Input Dims": "input_dims", "Input type": "input_type",
    "Seq": "seq_", "seq": "seq", "Seq num": "seq_num_", "seq_num": "seq_num", "sequence_num": "sequence_num",
    "graph id": "graph_id_", "graphId": "graphid", "graph_id": "graph_id", "graph node id": "graph_node_id_",
    "graphNodeId": "graphnodeid",
}
#: Arg keys the typed decoder keeps as raw JSON text (a :class:`msgspec.Raw` view of the piece).
_RAW_ARGS = frozenset({"Input Dims", "Input type"})
_EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
_ATTRS: dict[str, Any] = {k: attrgetter(a) for k, a in {**_ARG_KEYS, **{k: k for k in _EVENT_KEYS}}.items()}

if msgspec is not None:
    _ArgsStruct = msgspec.defstruct(
        "_ArgsStruct",
        # shapes stay undecoded JSON text (msgspec.Raw): the ops table keeps them as text, and a
        # list of lists per CPU op is the costliest value a trace holds
        [(a, msgspec.Raw if k in _RAW_ARGS else Any, msgspec.field(default=None, name=k))
         for k, a in _ARG_KEYS.items()]
        # metadata events: GPU labels and thread names (UNSET tells an absent key from a null)
        + [("labels", Any, msgspec.UNSET), ("name", Any, msgspec.UNSET)],
        gc=False,
    )
    _EventStruct = msgspec.defstruct(
        "_EventStruct", [(k, Any, None) for k in _EVENT_KEYS[:-1]] + [("args", _ArgsStruct | None, None)],
        gc=False,
    )
    _DECODER: Any = msgspec.json.Decoder(list[_EventStruct])
    _WHOLE_DECODER: Any = msgspec.json.Decoder(dict[str, msgspec.Raw])  # a document's top-level values
    _NO_ARGS: Any = _ArgsStruct()
    _TYPED: tuple[type, ...] = (_EventStruct,)
else:  # pragma: no cover
    _DECODER = _NO_ARGS = _WHOLE_DECODER = None
    _TYPED = ()
_TRAILING_RE = re.compile(r"trailing characters \(byte (\d+)\)")
# Bytes -> events, in chunks
# ---------------------------------------------------------------------------------------------------


def _load_bytes(path: Path, *, max_bytes: int | None = None) -> bytes:
    """Return a trace file's bytes as stored, checked the way :mod:`fleetlib._io` checks every input.

    A path that is not a regular file is refused before any byte is read; a compression other than
    gzip is refused by its magic bytes, naming it; plain content beyond ``max_bytes`` is refused.
    gzip content is decompressed by :func:`_gunzip` (bounded by the same ``max_bytes``) after the
    caller has hashed the stored bytes for the cache key.

    :func:`fleetlib._io.read_bytes` is not used for the decompression itself: its 16 MiB output
    slices appended to a growing buffer held about 2.0x the text at peak on the 9.8 MB bundled
    trace, against 1.4x for the buffer presized from the gzip trailer here (resident set growth
    19.9 MB against 13.6 MB).
    """
    check_regular(path)
    max_bytes = current_limits().max_bytes if max_bytes is None else max_bytes
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror or exc})", file=file) from exc
    kind = compression_of(raw[:8])
    if kind is None and len(raw) > max_bytes:
        raise InputError(f"larger than the {max_bytes:,}-byte input limit", file=file)
    if kind not in (None, "gzip"):
        raise InputError(f"{kind}-compressed input is not read; decompress it, or gzip it instead", file=file)
    return raw


def _gunzip(raw: bytes, file: str, max_bytes: int | None = None) -> bytes | bytearray:
    """Decompress gzip (all members) into one growing buffer, a slice of input at a time.

    ``gzip.decompress`` joins its output blocks at the end, briefly holding the text twice; this
    keeps peak memory near the decompressed size.  The buffer is sized up front from the gzip
    trailer's length field (exact for a single member under 4 GiB, capped at 64x the compressed
    size and at ``max_bytes``; a growing buffer over-allocates by an eighth), and written in place.
    Content beyond ``max_bytes`` once decompressed is refused (a small file cannot expand without
    bound).  Bytes that are not gzip are returned as they are.
    """
    if raw[:2] != GZIP_MAGIC:
        return raw
    max_bytes = current_limits().max_bytes if max_bytes is None else max_bytes
    whole = _gunzip_small(raw, max_bytes)
    if whole is not None:
        return whole
    # trust the trailer only within a plausible ratio: a truncated file ends in arbitrary bytes
    presize = min(int.from_bytes(raw[-4:], "little"), 64 * len(raw), max_bytes) if len(raw) >= 18 else 0
    out = bytearray(presize)
    size = 0
    view = memoryview(raw)
    pos, n, step = 0, len(raw), 1 << 16
    try:
        while pos < n:
            member = zlib.decompressobj(wbits=31)
            while not member.eof:
                if pos >= n:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                piece = view[pos:pos + step]
                data = member.decompress(piece, max_bytes + 1 - size)
                out[size:size + len(data)] = data  # in place while it fits, then it extends
                size += len(data)
                if size > max_bytes:
                    raise InputError(f"decompresses to more than the {max_bytes:,}-byte input limit",
                                     file=file, field="gzip")
                pos += len(piece) - len(member.unconsumed_tail)
            pos -= len(member.unused_data)
            while pos < n and raw[pos] == 0:  # zero padding between members is allowed
                pos += 1
            if pos < n and raw[pos:pos + 2] != GZIP_MAGIC:
                raise EOFError(f"{n - pos} bytes of trailing garbage after the gzip stream")
    except (EOFError, zlib.error) as exc:
        raise InputError(f"truncated or corrupt gzip stream ({exc}); expected a complete gzip file",
                         file=file, field="gzip") from exc
    del out[size:]  # a multi-member file's trailer gives only the last member's length
    return out


#: A gzip file whose trailer states at most this many bytes is decompressed in one call.
_ONE_SHOT_BYTES = 4 << 20


def _gunzip_small(raw: bytes, max_bytes: int) -> bytes | None:
    """Decompress a small single-member gzip file in one call (a third of the sliced loop's time).

    Returns None -- and :func:`_gunzip`'s loop decides, errors included -- unless the file is one
    complete member whose trailer states at most :data:`_ONE_SHOT_BYTES` (and ``max_bytes``) and
    whose content has exactly that length, with nothing after it.  The one call's output is built
    in blocks and joined, briefly twice its size: for a sub-4 MiB rank file that is a few MB.
    """
    if len(raw) < 18:
        return None
    stated = int.from_bytes(raw[-4:], "little")
    if stated > min(_ONE_SHOT_BYTES, max_bytes):
        return None
    member = zlib.decompressobj(wbits=31)
    try:
        data = member.decompress(raw, stated + 1)
    except zlib.error:
        return None
    if not member.eof or member.unused_data or member.unconsumed_tail or len(data) != stated:
        return None
    return data


def _line_col(buf: bytes | bytearray, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(buf)))
    line = buf.count(b"\n", 0, offset) + 1
    return line, offset - (buf.rfind(b"\n", 0, offset) + 1) + 1


def _json_error(buf: bytes | bytearray, offset: int, exc: Exception, file: str, what: str) -> InputError:
    line, col = _line_col(buf, offset)
    msg = getattr(exc, "msg", str(exc))
    hint = " (the file looks truncated)" if offset >= len(buf.rstrip()) - 1 else ""
    return InputError(f"invalid JSON in {what}: {msg} at line {line} column {col}{hint}; expected a "
                      f"Chrome-trace JSON object or array of events", file=file, row=line, field="json")


_ESCAPED_RE = re.compile("[\udc80-\udcff]")
#: A lone UTF-16 surrogate that is not an escaped byte: only a JSON ``\uD800``-``\uDFFF`` escape
#: without its pair makes one (:mod:`json` decodes it; no UTF-8 text can hold it).
_LONE_RE = re.compile("[\ud800-\udc7f\udd00-\udfff]")
#: Any surrogate: in a file without invalid UTF-8 bytes every one is a lone escape.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _text(piece: bytes) -> tuple[str, int]:
    """Decode UTF-8; each invalid byte becomes a lone surrogate (``surrogateescape``), counted.

    Surrogates keep one character per undecodable byte, so character positions still map back to
    byte offsets exactly; :func:`_clean` turns them into U+FFFD for the tables.
    """
    try:
        return piece.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = piece.decode("utf-8", errors="surrogateescape")
        return text, len(_ESCAPED_RE.findall(text))


def _byte_offset(text: str, char_pos: int) -> int:
    return char_pos if text.isascii() else len(text[:char_pos].encode("utf-8", errors="surrogateescape"))


def _clean(values: np.ndarray) -> np.ndarray:
    """Replace escaped invalid UTF-8 bytes and lone surrogates in text by U+FFFD (per distinct value)."""
    return _map_unique(values, clean_text, None) if len(values) else values


def _clean_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {clean_text(k): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v) for v in value]
    return clean_text(value)


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_TEXT = re.compile(r"\\u[dD][89a-fA-F]")


def _surrogate_escape(data: bytes | bytearray | str) -> bool:
    """Whether JSON text may hold a lone surrogate: it escapes one of U+D800-U+DFFF (paired or not).

    Only the :mod:`json` path can decode one (msgspec refuses it).  Trace text seldom holds a
    backslash at all: a search for one byte (memchr, 0.4 ms on 10 MB, 0.5% of decoding it) decides
    most files; the escape itself is searched for only in text that has one.
    """
    if isinstance(data, str):
        return "\\" in data and _SURROGATE_ESCAPE_TEXT.search(data) is not None
    return b"\\" in data and _SURROGATE_ESCAPE.search(data) is not None


def _skip_ws(buf: bytes | bytearray, pos: int) -> int:
    n = len(buf)
    while pos < n and buf[pos] in b" \t\r\n":
        pos += 1
    return pos


def _valid_utf8(data: bytes | bytearray) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _typed_events(data: bytes | bytearray) -> list[Any] | None:
    """Decode a JSON array of events into typed records holding only the fields the tables use.

    Returns None where the typed decoder cannot stand in exactly for the stdlib one -- invalid
    UTF-8 anywhere (the stdlib path counts and repairs it), malformed JSON, a value of another
    shape (``args`` not an object, a non-object entry), ``NaN`` or lone-surrogate escapes --
    and the caller decodes the same text with :mod:`json`.
    """
    if _DECODER is None or not _valid_utf8(data):
        return None
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError:  # ValidationError is a DecodeError too
        return None


def _bracketed(buf: bytes | bytearray, start: int, end: int, close: bool = True) -> bytearray:
    """``[`` + ``buf[start:end]`` (+ ``]``) built with a single copy of the slice."""
    data = bytearray(b"[")
    data += memoryview(buf)[start:end]
    if close:
        data += b"]"
    return data


class _Source:
    """Splits a trace document into chunks of events; keeps the top-level keys and the format."""

    def __init__(self, buf: bytes | bytearray, file: str, typed: bool = True) -> None:
        self.buf = buf
        self.file = file
        self.format = "object"
        self.top: dict[str, Any] = {}
        self.replaced = 0
        self.surrogates = False  # text decoded by json had a surrogate escape (maybe a lone one)
        self.typed = typed and _DECODER is not None

    def chunks(self) -> Iterator[list[Any]]:
        limit = current_limits().max_events
        seen = 0
        try:  # a decoder recurses per nesting level: a hostile document ends in one line, not a traceback
            for events in self._chunks():
                seen += len(events)
                if seen > limit:
                    raise InputError(f"more than {limit:,} trace events (limit max_events; raise it with "
                                     "--limit max_events=N)", file=self.file, field="traceEvents")
                yield events
        except RecursionError:
            raise InputError("JSON nested too deep to decode (a trace event is a few levels deep); "
                             "expected a Chrome-trace JSON object or array", file=self.file,
                             field="json") from None

    def _chunks(self) -> Iterator[list[Any]]:
        buf = self.buf
        start = _skip_ws(buf, 0)
        if buf[start:start + 3] == b"\xef\xbb\xbf":
            start = _skip_ws(buf, start + 3)
        if start >= len(buf):
            raise InputError("empty file: expected a Chrome-trace JSON object or array", file=self.file,
                             row=1)
        first = buf[start:start + 1]
        if first == b"[":
            self.format = "bare_array"
            yield from self._array(start + 1)
            return
        if first != b"{":
            line, _ = _line_col(buf, start)
            raise InputError(f"not JSON: the file starts with {buf[start:start + 16]!r}; expected a "
                             f"Chrome-trace JSON object or array", file=self.file, row=line, field="json")
        if self.typed and len(buf) <= min(_CHUNK_BYTES, _ONE_PIECE_BYTES):
            whole = self._typed_whole()
            if whole is not None:
                yield whole
                return
        m = _KEY_RE.search(buf, start)
        head = None
        if m is not None:
            # the key is top-level iff everything before it is a run of complete "key": value pairs
            piece = buf[start + 1:m.start()].rstrip()
            piece = piece[:-1] if piece.endswith(b",") else piece
            try:
                text, bad = _text(b"{" + piece + b"}")
                head = json.loads(text)
                self.replaced += bad
                self.surrogates |= _surrogate_escape(piece)
            except ValueError:
                head = None
        if not isinstance(head, dict):
            yield from self._whole()
            return
        self.top = head
        yield from self._array(m.end())

    def _array(self, pos: int) -> Iterator[list[Any]]:
        buf = self.buf
        n = len(buf)
        chunk = min(_CHUNK_BYTES, n if n <= _ONE_PIECE_BYTES else max(_MIN_CHUNK_BYTES, n // 16))
        while True:
            target = pos + chunk
            m = _CUT_RE.search(buf, target) if target < n else None
            misses = 0
            while m is not None:
                events = _typed_events(_bracketed(buf, pos, m.start() + 1)) if self.typed else None
                if events is not None:
                    yield events
                    pos = m.end() - 1
                    break
                text, bad = _text(buf[pos:m.start() + 1])
                try:
                    events = json.loads("[" + text + "]")
                except ValueError:
                    # not a cut between two top-level events (or broken text before it): try a later
                    # candidate, skipping further each time so that a long run of false candidates
                    # costs a logarithmic number of attempts
                    misses += 1
                    skip = 0 if misses <= 4 else 256 << min(misses - 4, 40)
                    m = _CUT_RE.search(buf, m.end() + skip)
                    continue
                self.replaced += bad
                self.surrogates |= _surrogate_escape(text)
                yield events
                pos = m.end() - 1
                break
            else:
                break
        # the last piece: decode up to the array's closing bracket, then the rest of the object
        last = self._typed_last(pos)
        if last is not None:
            events, tail = last
        else:
            text, bad = _text(buf[pos:])
            text = "[" + text
            try:
                events, end = json.JSONDecoder().raw_decode(text)
            except ValueError as exc:
                err = int(getattr(exc, "pos", 1) or 1)
                raise _json_error(buf, pos + _byte_offset(text[1:], max(0, err - 1)), exc, self.file,
                                  "traceEvents") from exc
            self.replaced += bad
            self.surrogates |= _surrogate_escape(text)
            tail = pos + _byte_offset(text[1:], end - 1)
            del text
        yield events
        rest = buf[tail:]
        if self.format == "bare_array":
            if rest.strip():
                raise _json_error(buf, _skip_ws(buf, tail), ValueError("extra data after the event array"),
                                  self.file, "the document")
            return
        body = rest.lstrip()
        body = body[1:] if body.startswith(b",") else body
        text, bad = _text(b"{" + body)
        try:
            more, end = json.JSONDecoder().raw_decode(text)
        except ValueError as exc:
            err = int(getattr(exc, "pos", 1) or 1)
            lead = len(rest) - len(rest.lstrip()) + (1 if rest.lstrip().startswith(b",") else 0)
            raise _json_error(buf, tail + lead + _byte_offset(text[1:], max(0, err - 1)), exc, self.file,
                              "the keys after traceEvents") from exc
        if text[end:].strip():
            raise _json_error(buf, len(buf.rstrip()), ValueError("extra data after the JSON object"),
                              self.file, "the document")
        self.replaced += bad
        self.surrogates |= _surrogate_escape(text)
        self.top.update(more)

    def _typed_whole(self) -> list[Any] | None:
        """Typed decode of a small document in one call: its events, with its other keys as ``top``.

        The document is split into its top-level values without building them (``msgspec.Raw``);
        ``traceEvents`` is decoded by the typed decoder, every other key by :mod:`json`, exactly as
        the piece-by-piece path decodes them.  None where that path must decide (invalid UTF-8, a
        value msgspec refuses, no ``traceEvents`` array), which then runs as usual.
        """
        if _WHOLE_DECODER is None or not _valid_utf8(self.buf):
            return None
        events = self._typed_split()
        if events is not None:
            return events
        try:
            doc = _WHOLE_DECODER.decode(self.buf)
            raw_events = doc.pop("traceEvents")
        except (msgspec.DecodeError, KeyError):
            return None
        try:  # the whole document was checked to be valid UTF-8 above
            events = _DECODER.decode(raw_events)
        except msgspec.DecodeError:
            return None
        try:
            top = {k: json.loads(bytes(v)) for k, v in doc.items()}
        except ValueError:
            return None
        self.surrogates |= any(_surrogate_escape(bytes(v)) for v in doc.values())
        self.top = top
        return events

    def _typed_split(self) -> list[Any] | None:
        """:meth:`_typed_whole` without first scanning the event array to split the document.

        Splitting the document into raw top-level values reads the whole event array once before
        it is decoded (a third of the decode's time).  Here the array is cut out where it must be:
        from the ``"traceEvents"`` key (the keys before it decoded as an object of their own) to a
        ``]`` such that the rest of the document decodes as the remaining keys.  The array is then
        decoded by the typed decoder, which accepts nothing but one complete JSON array, and the
        value that starts at the ``[`` ends at exactly one place: so when all three pieces decode,
        the document is that object -- the keys before, ``traceEvents``, the keys after -- and the
        answer is :meth:`_typed_whole`'s.  Anything else (a key found inside a string, a second
        ``traceEvents``, a byte-order mark, invalid pieces) returns None and the caller splits the
        document as before.  The buffer must be valid UTF-8 (checked by the caller).
        """
        buf = self.buf
        body = memoryview(buf)
        start = _skip_ws(buf, 0)
        m = _KEY_STRICT_RE.search(buf, start)
        if buf[start:start + 1] != b"{" or m is None:
            return None
        head = buf[start + 1:m.start()].strip(_JSON_WS)
        if head and not head.endswith(b","):
            return None
        try:
            before = _WHOLE_DECODER.decode(b"{" + head[:-1] + b"}") if head else {}
        except msgspec.DecodeError:
            return None
        end = len(buf)
        while end > 0 and buf[end - 1] in _JSON_WS:  # no copy of the buffer, as rstrip() makes
            end -= 1
        first = m.end() - 1  # the array's ``[``
        close, after = end, None
        for _ in range(8):  # the array's ``]``: the last one, unless a later key's value holds one
            close = buf.rfind(b"]", first, close)
            after = self._keys_after(buf, close, end)
            if close < 0 or after is not None:
                break
        if after is None:
            return None
        try:
            events = _DECODER.decode(body[first:close + 1])
        except msgspec.DecodeError as exc:
            # the array ended earlier (a later key's value holds a ``]``): msgspec names the byte
            # after the first character past its end; the array's ``]`` is the last one before it
            found = _TRAILING_RE.search(str(exc))
            if found is None:
                return None
            close = buf.rfind(b"]", first, first + int(found.group(1)) - 1)
            after = self._keys_after(buf, close, end)
            if after is None:
                return None
            try:
                events = _DECODER.decode(body[first:close + 1])
            except msgspec.DecodeError:
                return None
        if "traceEvents" in before or "traceEvents" in after:
            return None  # a repeated key: the document's last value is the one used
        try:
            top = {k: json.loads(bytes(v)) for k, v in {**before, **after}.items()}
        except ValueError:
            return None
        self.surrogates |= any(_surrogate_escape(bytes(v)) for v in {**before, **after}.values())
        self.top = top
        return events

    @staticmethod
    def _keys_after(buf: bytes | bytearray, close: int, end: int) -> dict[str, Any] | None:
        """Return the keys after an event array that ends at ``close`` (raw values); None if not keys."""
        if close < 0:
            return None
        tail = buf[close + 1:end].strip(_JSON_WS)
        if tail == b"}":
            return {}
        if not tail.startswith(b","):
            return None
        try:
            return _WHOLE_DECODER.decode(b"{" + tail[1:])
        except msgspec.DecodeError:
            return None

    def _typed_last(self, pos: int) -> tuple[list[Any], int] | None:
        """Typed decode of the last piece: the events and the offset just past the array's end."""
        if not self.typed:
            return None
        data = _bracketed(self.buf, pos, len(self.buf), close=False)
        if not _valid_utf8(data):
            return None
        try:
            return _DECODER.decode(data), len(self.buf)  # a bare array ends the document
        except msgspec.DecodeError as exc:
            m = _TRAILING_RE.search(str(exc))  # the array ended before the document did
            if m is None:
                return None
        end = int(m.group(1)) - 1  # msgspec names the byte after the first trailing character
        del data[end:]  # in place: no second copy of the piece
        try:
            return _DECODER.decode(data), pos + end - 1
        except msgspec.DecodeError:
            return None

    def _whole(self) -> Iterator[list[Any]]:
        """Decode the whole document at once (fallback; also names the place of a syntax error)."""
        text, bad = _text(self.buf)
        try:
            doc = json.loads(text)
        except ValueError as exc:
            err = int(getattr(exc, "pos", 0) or 0)
            raise _json_error(self.buf, _byte_offset(text, err), exc, self.file, "the document") from exc
        self.surrogates |= _surrogate_escape(text)
        del text
        self.replaced += bad
        if isinstance(doc, list):
            self.format = "bare_array"
            yield doc
            return
        if not isinstance(doc, dict):
            raise InputError(f"the top-level JSON value is a {type(doc).__name__}; expected an object "
                             f"with traceEvents or an array of events", file=self.file, field="json")
        events = doc.pop("traceEvents", None)
        self.top = doc
        if events is None:
            raise InputError("the JSON object has no traceEvents array", file=self.file, field="traceEvents")
        if not isinstance(events, list):
            raise InputError(f"traceEvents is a {type(events).__name__}; expected an array", file=self.file,
                             field="traceEvents")
        yield events



class GiveUp(Exception):
    """A streamed read met what only the whole-text path decides (:class:`_Source` is run instead)."""


#: Input bytes fed to the decompressor at a time, and how far past a cut's target text is made.
_STREAM_STEP = 1 << 16
_LOOKAHEAD = 1 << 16
#: The decoded front of the text is dropped from the window once it is at least this long.
_STREAM_SLACK = 2 << 20
#: How far into the text the ``traceEvents`` key is looked for before the whole-text path decides.
_HEAD_LIMIT = 8 << 20


class _Stream:
    """:class:`_Source`'s pieces of a gzip file, decoded while the file is decompressed.

    The whole text of a large file is never held: only a window of it, from the piece being cut
    to a little past its end.  The pieces are cut where :class:`_Source` cuts them -- the piece
    size comes from the text's length, which the gzip trailer states, and a cut is the first
    ``}, {`` after the target, which lies in the window -- and decoded by the same typed decoder,
    so the events, ``top``, ``format`` and ``replaced`` are :class:`_Source`'s.  Anything that
    path decides otherwise (another gzip member, a length other than the stated one, a corrupt
    stream, a piece the typed decoder refuses, a byte-order mark, a bare array, JSON errors, the
    event limit) raises :class:`GiveUp` instead: the caller then reads the file with
    :class:`_Source` from the start, which gives its answer or its error exactly.  Only a single
    gzip member whose stated length is above :data:`_ONE_PIECE_BYTES` is streamed
    (:meth:`of`).
    """

    def __init__(self, raw: bytes, file: str, n: int) -> None:
        self.raw, self.file, self.n = raw, file, n
        self.format = "object"
        self.top: dict[str, Any] = {}
        self.replaced = 0
        # msgspec decodes every piece (the stream gives up on one it refuses, and the whole-text path
        # reads the file again): no text here came through json, so none holds a surrogate escape
        self.surrogates = False
        self.buf = b""  # no whole text (the attribute :func:`_parse` clears)
        self._member = zlib.decompressobj(wbits=31)
        self._win = bytearray()  # the text from offset ``_base`` on
        self._base = 0
        self._in = 0  # input bytes consumed
        self._done = False

    @classmethod
    def of(cls, raw: bytes | bytearray, file: str, max_bytes: int | None = None) -> _Stream | None:
        """Return a stream of a gzip file large enough to be cut into pieces; None for any other."""
        if _DECODER is None or raw[:2] != GZIP_MAGIC or len(raw) < 18:
            return None
        max_bytes = current_limits().max_bytes if max_bytes is None else max_bytes
        stated = int.from_bytes(raw[-4:], "little")
        if not _ONE_PIECE_BYTES < stated <= max_bytes:
            return None
        return cls(raw, file, stated)

    def _end(self) -> int:
        return self._base + len(self._win)

    def _fill(self, upto: int) -> None:
        """Decompress until the window reaches text offset ``upto`` or the stream has ended."""
        raw, member, win = self.raw, self._member, self._win
        view = memoryview(raw)
        try:
            while self._end() < upto and not self._done:
                if member.eof:  # anything after the one member, or another length: _Source decides
                    if member.unused_data or self._in < len(raw) or self._end() != self.n:
                        raise GiveUp
                    self._done = True
                    break
                if self._in >= len(raw):  # truncated
                    raise GiveUp
                piece = view[self._in:self._in + _STREAM_STEP]
                win += member.decompress(piece, self.n + 1 - self._end())
                if self._end() > self.n:
                    raise GiveUp
                self._in += len(piece) - len(member.unconsumed_tail)
        except zlib.error:
            raise GiveUp from None

    def _drop(self, pos: int) -> None:
        """Forget the text before offset ``pos`` once that is long enough to be worth a copy."""
        if pos - self._base >= _STREAM_SLACK:
            del self._win[:pos - self._base]  # moves the start; the next growth copies the rest
            self._base = pos

    def chunks(self) -> Iterator[list[Any]]:
        limit = current_limits().max_events
        seen = 0
        try:
            for events in self._chunks():
                seen += len(events)
                if seen > limit:
                    raise GiveUp
                yield events
        except RecursionError:
            raise GiveUp from None

    def _chunks(self) -> Iterator[list[Any]]:
        self._fill(_LOOKAHEAD)
        win = self._win
        start = _skip_ws(win, 0)
        if win[start:start + 1] != b"{":  # a bare array, a byte-order mark, not JSON ...
            raise GiveUp
        m = _KEY_RE.search(win, start)
        while m is None:
            if self._done or self._end() > _HEAD_LIMIT:
                raise GiveUp
            self._fill(self._end() + (1 << 20))
            m = _KEY_RE.search(win, start)
        piece = win[start + 1:m.start()].rstrip()
        piece = piece[:-1] if piece.endswith(b",") else piece
        try:
            text, bad = _text(b"{" + piece + b"}")
            head = json.loads(text)
        except ValueError:
            raise GiveUp from None
        if not isinstance(head, dict):
            raise GiveUp
        self.replaced += bad
        self.top = head
        yield from self._array(m.end())

    def _cut(self, target: int) -> tuple[int, int] | None:
        """Return the first ``}, {`` from text offset ``target`` on (start and end offsets), or None."""
        self._fill(target + _LOOKAHEAD)
        while True:
            m = _CUT_RE.search(self._win, target - self._base)
            if m is not None:  # a match wholly in the window: no earlier one runs past its end
                return self._base + m.start(), self._base + m.end()
            if self._done:
                return None
            self._fill(self._end() + (1 << 20))

    def _array(self, pos: int) -> Iterator[list[Any]]:
        n = self.n
        chunk = min(_CHUNK_BYTES, max(_MIN_CHUNK_BYTES, n // 16))  # _Source's for more than one piece
        while pos + chunk < n:
            cut = self._cut(pos + chunk)
            if cut is None:
                break
            events = _typed_events(_bracketed(self._win, pos - self._base, cut[0] + 1 - self._base))
            if events is None:
                raise GiveUp
            yield events
            pos = cut[1] - 1
            self._drop(pos)
        self._fill(n + 1)  # the rest of the text, and the checks at the end of the stream
        data = _bracketed(self._win, pos - self._base, len(self._win), close=False)
        if not _valid_utf8(data):
            raise GiveUp
        try:
            events, tail = _DECODER.decode(data), n
        except msgspec.DecodeError as exc:
            m = _TRAILING_RE.search(str(exc))  # the array ended before the document did
            if m is None:
                raise GiveUp from None
            end = int(m.group(1)) - 1
            del data[end:]
            try:
                events, tail = _DECODER.decode(data), pos + end - 1
            except msgspec.DecodeError:
                raise GiveUp from None
        del data
        yield events
        body = self._win[tail - self._base:].lstrip()
        body = body[1:] if body.startswith(b",") else body
        text, bad = _text(b"{" + body)
        try:
            more, end = json.JSONDecoder().raw_decode(text)
        except ValueError:
            raise GiveUp from None
        if text[end:].strip():
            raise GiveUp
        self.replaced += bad
        self.top.update(more)



# ---------------------------------------------------------------------------------------------------
# Value helpers
# ---------------------------------------------------------------------------------------------------

def _objects(values: Iterable[Any], n: int) -> np.ndarray:
    return np.fromiter(values, dtype=object, count=n)

def _small_int(value: Any) -> int | None:
    """Return an int from an int, an integral float or digit text (|value| < 2**31); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2 ** 31 else None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 31:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,10}\s*", value):
        return int(value)
    return None


def _map_unique(values: np.ndarray, fn: Any, missing: Any) -> np.ndarray:
    """Apply ``fn`` once per distinct value; missing values get ``missing``."""
    try:
        codes, uniques = _memo.factorize(values)
    except TypeError:  # unhashable values (lists, objects) in a malformed trace
        return _objects((missing if isinstance(v, (list, dict)) or v is None else fn(v) for v in values),
                        len(values))
    per = _objects((fn(u) for u in uniques), len(uniques))
    per = np.append(per, _objects([missing], 1))
    return per[np.where(codes < 0, len(uniques), codes)]

def _not_text(values: np.ndarray) -> np.ndarray:
    """Return the mask of values that are not text (missing ones too); one C pass when all are text."""
    if len(values) and values.dtype == object and _memo.is_string_array is not None \
            and _memo.is_string_array(values, skipna=False):
        return np.zeros(len(values), dtype=bool)
    return ~_map_unique(values, lambda v: isinstance(v, str), False).astype(bool)


def _int_value(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None
