"""FILE_READ: ranges, limits, encodings, and refusals."""

from __future__ import annotations

import base64
import errno
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import read_file
from tetherbed.agent.files.content_encoding import CONTENT_BUDGET_BYTES
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import FileRead

MiB = 1024 * 1024


def read(jail: PathJail, limits: Limits | None = None, **fields: Any) -> Any:
    return read_file(FileRead(**fields), jail, limits or Limits())


def read_error(jail: PathJail, limits: Limits | None = None, **fields: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        read(jail, limits, **fields)
    return caught.value


def test_text_read_returns_the_whole_file(root: Path, jail: PathJail) -> None:
    (root / "data.csv").write_bytes(b"col1,col2\n1,2\n")
    contents = read(jail, path="data.csv")
    assert contents.content == "col1,col2\n1,2\n"
    assert contents.encoding == "utf-8"
    assert (contents.size_bytes, contents.truncated) == (14, False)


def test_crlf_is_returned_as_on_disk(root: Path, jail: PathJail) -> None:
    (root / "windows.txt").write_bytes(b"one\r\ntwo\r\n\rthree\n")
    contents = read(jail, path="windows.txt", format="text")
    assert contents.content == "one\r\ntwo\r\n\rthree\n"


def test_utf8_text_keeps_multibyte_characters_and_bom(root: Path, jail: PathJail) -> None:
    text = "\ufeffgrüße, 世界 🌍\n"
    (root / "u.txt").write_bytes(text.encode("utf-8"))
    contents = read(jail, path="u.txt")
    assert contents.content == text
    assert contents.size_bytes == len(text.encode("utf-8"))


def test_base64_round_trip_of_random_bytes(root: Path, jail: PathJail) -> None:
    data = os.urandom(100_003)
    (root / "blob.bin").write_bytes(data)
    contents = read(jail, path="blob.bin", encoding="base64", format="bytes")
    assert contents.encoding == "base64"
    assert base64.b64decode(contents.content, validate=True) == data
    assert contents.size_bytes == len(data)


def test_range_read(root: Path, jail: PathJail) -> None:
    (root / "digits.txt").write_bytes(b"0123456789")
    contents = read(jail, path="digits.txt", offset=3, length=4)
    assert contents.content == "3456"
    assert (contents.size_bytes, contents.truncated) == (4, True)


def test_range_to_end_of_file(root: Path, jail: PathJail) -> None:
    (root / "digits.txt").write_bytes(b"0123456789")
    contents = read(jail, path="digits.txt", offset=7)
    assert (contents.content, contents.truncated) == ("789", False)
    exact = read(jail, path="digits.txt", offset=6, length=4)
    assert (exact.content, exact.truncated) == ("6789", False)


def test_range_past_end_of_file(root: Path, jail: PathJail) -> None:
    (root / "digits.txt").write_bytes(b"0123456789")
    contents = read(jail, path="digits.txt", offset=8, length=100)
    assert (contents.content, contents.size_bytes, contents.truncated) == ("89", 2, False)
    beyond = read(jail, path="digits.txt", offset=50, length=5)
    assert (beyond.content, beyond.size_bytes, beyond.truncated) == ("", 0, False)


def test_empty_file(root: Path, jail: PathJail) -> None:
    (root / "empty").write_bytes(b"")
    contents = read(jail, path="empty", encoding="base64")
    assert (contents.content, contents.size_bytes, contents.truncated) == ("", 0, False)


def test_bounded_range_of_a_file_larger_than_the_limit(root: Path, jail: PathJail) -> None:
    data = os.urandom(64 * 1024)
    (root / "big.bin").write_bytes(data)
    limits = Limits(max_file_size_bytes=4096)
    contents = read(jail, limits, path="big.bin", encoding="base64", offset=50_000, length=4096)
    assert base64.b64decode(contents.content) == data[50_000:54_096]
    assert contents.truncated is True


def test_whole_read_of_a_file_over_the_limit_is_too_large(root: Path, jail: PathJail) -> None:
    (root / "big.txt").write_bytes(b"x" * 5000)
    error = read_error(jail, Limits(max_file_size_bytes=4096), path="big.txt")
    assert error.code == ErrorCode.FILE_TOO_LARGE
    assert "big.txt" in error.message
    assert error.details is not None and error.details["limit_bytes"] == 4096


def test_file_exactly_at_the_limit_is_read(root: Path, jail: PathJail) -> None:
    (root / "edge.txt").write_bytes(b"y" * 4096)
    contents = read(jail, Limits(max_file_size_bytes=4096), path="edge.txt")
    assert contents.size_bytes == 4096


def test_requested_range_over_the_limit_is_too_large(root: Path, jail: PathJail) -> None:
    (root / "small.txt").write_bytes(b"tiny")
    error = read_error(jail, Limits(max_file_size_bytes=4096), path="small.txt", length=4097)
    assert error.code == ErrorCode.FILE_TOO_LARGE


def test_rest_of_a_large_file_that_fits_is_read(root: Path, jail: PathJail) -> None:
    (root / "big.txt").write_bytes(b"a" * 5000 + b"tail")
    limits = Limits(max_file_size_bytes=4096)
    contents = read(jail, limits, path="big.txt", offset=4000)
    assert contents.content == "a" * 1000 + "tail"
    assert read_error(jail, limits, path="big.txt", offset=10).code == ErrorCode.FILE_TOO_LARGE


def test_size_is_checked_before_reading(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "big.txt").write_bytes(b"x" * 5000)

    def no_reading(*args: object) -> bytes:
        raise AssertionError("read before the size check")

    monkeypatch.setattr(os, "pread", no_reading)
    error = read_error(jail, Limits(max_file_size_bytes=4096), path="big.txt")
    assert error.code == ErrorCode.FILE_TOO_LARGE


def test_base64_content_over_the_frame_budget_is_too_large(root: Path, jail: PathJail) -> None:
    size = CONTENT_BUDGET_BYTES * 3 // 4 + 3  # fits the file limit, not the frame once encoded
    with (root / "huge.bin").open("wb") as handle:
        handle.truncate(size)
    limits = Limits(max_file_size_bytes=32 * MiB)
    error = read_error(jail, limits, path="huge.bin", encoding="base64")
    assert error.code == ErrorCode.FILE_TOO_LARGE
    assert "encoded" in error.message


def test_text_whose_json_escaping_exceeds_the_frame_is_too_large(
    root: Path, jail: PathJail
) -> None:
    (root / "controls.txt").write_bytes(b"\x01" * (3 * MiB))  # each becomes \u0001
    limits = Limits(max_file_size_bytes=32 * MiB)
    error = read_error(jail, limits, path="controls.txt")
    assert error.code == ErrorCode.FILE_TOO_LARGE
    plain = read(jail, limits, path="controls.txt", length=1024)
    assert plain.content == "\x01" * 1024


@pytest.mark.parametrize(
    ("encoding", "format"), [("utf-8", "bytes"), ("base64", "text")], ids=["text-bytes", "b64-text"]
)
def test_format_must_agree_with_encoding(
    root: Path, jail: PathJail, encoding: str, format: str
) -> None:
    (root / "f.txt").write_text("x")
    error = read_error(jail, path="f.txt", encoding=encoding, format=format)
    assert error.code == ExtensionCode.INVALID_MESSAGE


def test_invalid_utf8_suggests_bytes(root: Path, jail: PathJail) -> None:
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    error = read_error(jail, path="latin1.txt", format="text")
    assert error.code == ExtensionCode.INVALID_ENCODING
    assert "format=bytes" in error.message
    assert error.details is not None and error.details["byte_offset"] == 3
    raw = read(jail, path="latin1.txt", encoding="base64", format="bytes")
    assert base64.b64decode(raw.content) == "café".encode("latin-1")


def test_reading_a_directory_is_not_a_file(root: Path, jail: PathJail) -> None:
    (root / "dir").mkdir()
    assert read_error(jail, path="dir").code == ExtensionCode.NOT_A_FILE
    assert read_error(jail, path=".").code == ExtensionCode.NOT_A_FILE


def test_reading_a_fifo_is_refused_without_blocking(root: Path, jail: PathJail) -> None:
    os.mkfifo(root / "pipe")
    assert read_error(jail, path="pipe").code == ExtensionCode.NOT_A_FILE


def test_missing_file_is_not_found(jail: PathJail) -> None:
    error = read_error(jail, path="nope/missing.txt")
    assert error.code == ErrorCode.PATH_NOT_FOUND
    assert "nope/missing.txt" in error.message


def test_symlink_inside_the_root_is_followed(root: Path, jail: PathJail) -> None:
    (root / "target.txt").write_text("through the link")
    (root / "link").symlink_to("target.txt")
    assert read(jail, path="link").content == "through the link"


def test_absolute_path_inside_the_root(root: Path, jail: PathJail) -> None:
    (root / "a.txt").write_text("abs")
    assert read(jail, path=str(root / "a.txt")).content == "abs"


@pytest.mark.parametrize(
    ("number", "code"),
    [
        (errno.EACCES, ExtensionCode.PERMISSION_DENIED),
        (errno.EPERM, ExtensionCode.PERMISSION_DENIED),
        (errno.EIO, ErrorCode.INTERNAL_ERROR),
    ],
)
def test_os_errors_while_reading_are_typed(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch, number: int, code: str
) -> None:
    (root / "f.txt").write_text("data")

    def failing_pread(*args: object) -> bytes:
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(os, "pread", failing_pread)
    error = read_error(jail, path="f.txt")
    assert error.code == code
    assert error.message.startswith("f.txt: ")
    assert error.details is not None and error.details["errno"] == errno.errorcode[number]


def test_permission_denied_on_open_is_typed(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "f.txt").write_text("data")
    real_open = os.open

    def refusing_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if path == "f.txt":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    assert read_error(jail, path="f.txt").code == ExtensionCode.PERMISSION_DENIED


def test_no_descriptor_is_leaked(root: Path, jail: PathJail) -> None:
    (root / "f.txt").write_text("data")
    (root / "dir").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        read(jail, path="f.txt")
        with pytest.raises(ProtocolError):
            read(jail, path="dir")
    assert len(os.listdir("/proc/self/fd")) == before


def test_reading_a_socket_is_not_a_file(root: Path, jail: PathJail) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(root / "sock"))
        assert read_error(jail, path="sock").code == ExtensionCode.NOT_A_FILE
    finally:
        server.close()
