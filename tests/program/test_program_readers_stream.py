"""A large gzip trace read while it is decompressed answers what the whole-text read answers.

:class:`fleetlib.program.readers._decode._Stream` cuts and decodes the pieces of a gzip file from
a window of its text; :class:`~fleetlib.program.readers._decode._Source` cuts the same pieces
from the whole decompressed text.  Every read here is made both ways -- the second with the
stream switched off -- and the tables, metadata, ledgers and errors must be identical; files the
stream must leave to the whole-text path (several gzip members, a truncated or padded stream,
a trailer that misstates the length, invalid UTF-8, JSON errors, a bare array) are checked to
take that path.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest

from fleetlib.program.readers import _columns, _decode
from fleetlib.program.readers._columns import _streamed
from fleetlib.program.traces import read_trace

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
ALLREDUCE = DATA / "hta_nccl_allreduce_rank-0.json.gz"  # 8.6 MB of text: streamed as it is
DLRM = sorted((DATA / "dlrm_8rank").glob("*.json.gz"))[0]


def outcome(path: Path, stream: bool) -> tuple:
    """read_trace's tables, metadata and ledger (or its error), streamed or from the whole text."""
    off = mock.patch.object(_decode._Stream, "of", return_value=None)
    try:
        if stream:
            tr = read_trace(path, cache=False)
        else:
            with off:
                tr = read_trace(path, cache=False)
    except Exception as exc:  # the error itself is what must agree
        return ("error", type(exc).__name__, str(exc))
    meta = {k: v for k, v in tr.metadata.items() if k != "parse_s"}
    return ("ok", [tr.kernels, tr.steps, tr.host_syncs, tr.ops], repr(meta), repr(tr.ledger.flags),
            pickle.dumps(tr.ledger))


def assert_same(path: Path) -> None:
    got, want = outcome(path, True), outcome(path, False)
    assert got[0] == want[0], (got[:3], want[:3])
    if got[0] == "error":
        assert got == want
        return
    for a, b in zip(got[1], want[1], strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert got[2:] == want[2:]


def streamed(path: Path) -> bool:
    raw = path.read_bytes()
    col, source = _streamed(raw, str(path), None)
    return col is not None and source is not None


def test_a_large_trace_is_streamed_and_reads_as_the_whole_text():
    assert streamed(ALLREDUCE)
    assert_same(ALLREDUCE)


# small pieces, a small window and small decompression steps: many cuts, window drops and cuts
# found only after the window grew
SMALL = [(1000, 2000, 30_000, 2 << 20, 1 << 16, 1 << 16), (100, 300, 5_000, 1000, 7, 50)]


@pytest.mark.parametrize("sizes", SMALL)
@pytest.mark.parametrize("path", [DLRM, DATA / "hta_pp_pair_rank-0.json.gz"], ids=lambda p: p.name[:12])
def test_small_pieces_streamed_read_as_the_whole_text(path, sizes):
    names = ("_ONE_PIECE_BYTES", "_MIN_CHUNK_BYTES", "_CHUNK_BYTES", "_STREAM_SLACK", "_LOOKAHEAD",
             "_STREAM_STEP")
    with mock.patch.multiple(_decode, **dict(zip(names, sizes, strict=True))):
        assert streamed(path)
        assert_same(path)


def _variants(text: bytes) -> dict[str, bytes]:
    """gzip files the stream must leave to the whole-text path, or read exactly as it does."""
    gz = gzip.compress(text, 6)
    half = len(text) // 2
    name = text.find(b'"name": "', len(text) // 3) + 9
    ts = text.find(b'"ts": ', len(text) // 2)
    close = text.rfind(b"]")
    return {
        "two_members": gzip.compress(text[:half], 6) + gzip.compress(text[half:], 6),
        "truncated": gz[: len(gz) * 2 // 3],
        "garbage_after": gz + b"garbage",
        "zero_padding": gz + b"\0\0",
        "trailer_too_small": gz[:-4] + (len(text) - 100).to_bytes(4, "little"),
        "trailer_too_large": gz[:-4] + (len(text) + 100).to_bytes(4, "little"),
        "invalid_utf8": gzip.compress(text[:name] + b"\xff\xfe" + text[name:], 6),
        "syntax_error": gzip.compress(text[:ts] + b'"ts": ,' + text[ts + 6:], 6),
        "nan": gzip.compress(text[:ts] + b'"ts": NaN, "x": ' + text[ts + 6:], 6),
        "no_closing_brace": gzip.compress(text[:close + 1], 6),
        "byte_order_mark": gzip.compress(b"\xef\xbb\xbf" + text, 6),
        "bare_array": gzip.compress(text[text.find(b"[", text.find(b'"traceEvents"')):close + 1], 6),
        "keys_after": gzip.compress(text[:close + 1] + b', "zz": [1, "]", {"a": "]"}]' + text[close + 1:], 6),
        "key_late": gzip.compress(b'{"pad": "' + b"x" * 300_000 + b'", ' + text[text.find(b"{") + 1:], 6),
    }


STREAMED_VARIANTS = {"keys_after", "key_late"}
VARIANTS = ("two_members", "truncated", "garbage_after", "zero_padding", "trailer_too_small",
            "trailer_too_large", "invalid_utf8", "syntax_error", "nan", "no_closing_brace", "byte_order_mark",
            "bare_array", "keys_after", "key_late")


@pytest.fixture(scope="module")
def variants() -> dict[str, bytes]:
    return _variants(gzip.decompress(ALLREDUCE.read_bytes()))


def test_the_variants_are_the_listed_ones(variants):
    assert sorted(variants) == sorted(VARIANTS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_odd_gzip_files_read_as_the_whole_text(tmp_path, variants, variant):
    path = tmp_path / f"{variant}.json.gz"
    path.write_bytes(variants[variant])
    assert streamed(path) == (variant in STREAMED_VARIANTS)
    assert_same(path)


def test_a_table_is_taken_once():
    col = _columns._Collector(None)
    events = [{"ph": "X", "cat": "cuda_runtime", "name": f"cudaLaunchKernel{i % 2}", "pid": 1, "tid": 2,
               "ts": 10 * i, "dur": 5, "args": {"correlation": i}} for i in range(6)]
    col.add(events[:3])
    col.add(events[3:])
    table = col.table("runtime")
    assert table["correlation"].tolist() == list(range(6))
    assert table["row"].tolist() == list(range(1, 7))
    assert col.table("runtime") == {} and col.parts["runtime"] == []
