"""One way in: fleetlib._io opens any input by its bytes, bounded and confined."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetlib._io import as_paths, compression_of, confined, read_bytes, read_text
from fleetlib.quality import DomainError, InputError


def test_gzip_is_recognised_by_its_bytes_not_its_name(tmp_path):
    text = "line one\nline two\n"
    for name in ("log.txt.gz", "log.gz", "log.txt"):
        (tmp_path / name).write_bytes(gzip.compress(text.encode(), mtime=0))
        assert read_text(tmp_path / name) == text
    (tmp_path / "plain.gz").write_text(text)  # a plain file with a .gz name is plain
    assert read_text(tmp_path / "plain.gz") == text


def test_concatenated_gzip_members_are_all_read(tmp_path):
    p = tmp_path / "two.gz"
    p.write_bytes(gzip.compress(b"a\n") + gzip.compress(b"b\n"))
    assert read_bytes(p) == b"a\nb\n"


@pytest.mark.parametrize(("compress", "name"), [(bz2.compress, "bzip2"), (lzma.compress, "xz")])
def test_other_compressions_are_refused_by_name(tmp_path, compress, name):
    p = tmp_path / "log.txt"
    p.write_bytes(compress(b"hello"))
    with pytest.raises(InputError, match=rf"{name}-compressed input is not read") as exc:
        read_text(p)
    assert exc.value.file == str(p)


def test_truncated_gzip_and_trailing_garbage_are_input_errors(tmp_path):
    p = tmp_path / "t.gz"
    p.write_bytes(gzip.compress(b"x" * 1000)[:-6])
    with pytest.raises(InputError, match="truncated or corrupt gzip"):
        read_bytes(p)
    p.write_bytes(gzip.compress(b"x") + b"garbage")
    with pytest.raises(InputError, match="trailing garbage"):
        read_bytes(p)


def test_decompression_is_bounded(tmp_path):
    p = tmp_path / "bomb.gz"
    p.write_bytes(gzip.compress(b"\0" * (40 << 20)))  # 40 MiB of zeros in ~40 KiB
    with pytest.raises(InputError, match="input limit"):
        read_bytes(p, max_bytes=8 << 20)
    q = tmp_path / "big.txt"
    q.write_bytes(b"x" * 100)
    with pytest.raises(InputError, match="input limit"):
        read_bytes(q, max_bytes=99)


def test_only_regular_files_are_read(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_bytes(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="is a folder"):
        read_bytes(tmp_path)
    if os.path.exists("/dev/zero"):
        with pytest.raises(InputError, match="not a regular file"):
            read_bytes("/dev/zero")


def test_invalid_utf8_names_its_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\nok\n\xff\n")
    with pytest.raises(InputError, match=r"row 3: byte 0xff at offset 6 is not UTF-8"):
        read_text(p)


def test_byte_order_mark_is_dropped(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbfa,b\n")
    assert read_text(p) == "a,b\n"


def test_confined_refuses_paths_that_leave_the_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    assert confined(tmp_path, "sub/x.csv") == (tmp_path / "sub" / "x.csv").resolve()
    for bad in ("../x.csv", "/etc/passwd", "sub/../../x"):
        with pytest.raises(InputError, match="lies outside"):
            confined(tmp_path, bad, what="scheduler file")
    link = tmp_path / "out"
    link.symlink_to("/etc")
    with pytest.raises(InputError, match="lies outside"):
        confined(tmp_path, "out/passwd")


def test_as_paths():
    assert [p.name for p in as_paths("a")] == ["a"]
    assert [p.name for p in as_paths(["a", "b"])] == ["a", "b"]
    with pytest.raises(DomainError):
        as_paths([])


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_give_content_or_an_input_error(tmp_path_factory, data):
    """Fuzz: arbitrary bytes (with or without a gzip header) never escape as another exception."""
    p = tmp_path_factory.mktemp("fuzz") / "f"
    for blob in (data, b"\x1f\x8b" + data):
        p.write_bytes(blob)
        try:
            out = read_text(p)
        except InputError:
            continue
        assert isinstance(out, str)
    assert compression_of(gzip.compress(data)) == "gzip"
