"""FILE_WRITE: atomic replacement, parents, symlinks, sizes and encodings."""

from __future__ import annotations

import base64
import errno
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import read_file, write_file
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, FileRead, FileWrite

MiB = 1024 * 1024


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    return outside


def write(jail: PathJail, limits: Limits | None = None, **fields: Any) -> Ack:
    return write_file(FileWrite(**fields), jail, limits or Limits())


def write_error(jail: PathJail, limits: Limits | None = None, **fields: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        write(jail, limits, **fields)
    return caught.value


def leftovers(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.startswith(".tetherbed-")]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_creates_a_file(root: Path, jail: PathJail) -> None:
    assert write(jail, path="out.txt", content="hello world\n") == Ack(ok=True)
    assert (root / "out.txt").read_bytes() == b"hello world\n"
    assert stat.S_IMODE((root / "out.txt").stat().st_mode) == 0o666 & ~current_umask()
    assert leftovers(root) == []


def test_text_is_written_as_utf8_without_newline_translation(root: Path, jail: PathJail) -> None:
    write(jail, path="w.txt", content="a\r\nb\rc\n grüße 🌍", format="text")
    assert (root / "w.txt").read_bytes() == "a\r\nb\rc\n grüße 🌍".encode()


def test_base64_round_trip_of_random_bytes(root: Path, jail: PathJail) -> None:
    data = os.urandom(65_537)
    encoded = base64.b64encode(data).decode()
    write(jail, path="blob.bin", content=encoded, encoding="base64", format="bytes")
    assert (root / "blob.bin").read_bytes() == data
    back = read_file(FileRead(path="blob.bin", encoding="base64"), jail, Limits())
    assert back.content == encoded


def test_overwrite_replaces_content_and_keeps_permission_bits(root: Path, jail: PathJail) -> None:
    target = root / "script.sh"
    target.write_text("old content that is longer than the new one")
    target.chmod(0o4750)
    write(jail, path="script.sh", content="new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o4750


def test_write_is_a_rename_onto_a_new_inode(root: Path, jail: PathJail) -> None:
    target = root / "f.txt"
    target.write_text("one")
    before = target.stat().st_ino
    write(jail, path="f.txt", content="two")
    assert target.stat().st_ino != before


def test_missing_parent_without_create_parents_is_not_found(root: Path, jail: PathJail) -> None:
    error = write_error(jail, path="a/b/c.txt", content="x")
    assert error.code == ErrorCode.PATH_NOT_FOUND
    assert "a/b/c.txt" in error.message
    assert not (root / "a").exists()


def test_create_parents_makes_the_directories(root: Path, jail: PathJail) -> None:
    write(jail, path="a/b/c.txt", content="deep", create_parents=True)
    assert (root / "a" / "b" / "c.txt").read_text() == "deep"


def test_create_parents_with_an_absolute_path(root: Path, jail: PathJail) -> None:
    write(jail, path=str(root / "x" / "y.txt"), content="abs", create_parents=True)
    assert (root / "x" / "y.txt").read_text() == "abs"


def test_parent_that_is_a_file_is_not_a_directory(root: Path, jail: PathJail) -> None:
    (root / "file.txt").write_text("f")
    error = write_error(jail, path="file.txt/child.txt", content="x", create_parents=True)
    assert error.code == ExtensionCode.NOT_A_DIRECTORY


def test_writing_onto_a_directory_is_not_a_file(root: Path, jail: PathJail) -> None:
    (root / "dir").mkdir()
    assert write_error(jail, path="dir", content="x").code == ExtensionCode.NOT_A_FILE
    assert write_error(jail, path=".", content="x").code == ExtensionCode.NOT_A_FILE
    assert (root / "dir").is_dir()


def test_symlink_inside_the_root_writes_the_target_and_keeps_the_link(
    root: Path, jail: PathJail
) -> None:
    (root / "real.txt").write_text("before")
    (root / "link").symlink_to("real.txt")
    write(jail, path="link", content="after")
    assert (root / "link").is_symlink()
    assert os.readlink(root / "link") == "real.txt"
    assert (root / "real.txt").read_text() == "after"


def test_dangling_symlink_inside_the_root_creates_its_target(root: Path, jail: PathJail) -> None:
    (root / "link").symlink_to("created.txt")
    write(jail, path="link", content="made")
    assert (root / "created.txt").read_text() == "made"
    assert (root / "link").is_symlink()


def test_symlink_to_outside_is_refused(root: Path, outside: Path, jail: PathJail) -> None:
    (root / "link").symlink_to(outside / "secret.txt")
    error = write_error(jail, path="link", content="pwned")
    assert error.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
    assert (outside / "secret.txt").read_text() == "secret"


def test_text_over_the_limit_is_too_large(root: Path, jail: PathJail) -> None:
    limits = Limits(max_file_size_bytes=10)
    assert write_error(jail, limits, path="t.txt", content="x" * 11).code == (
        ErrorCode.FILE_TOO_LARGE
    )
    # 5 characters, but 20 bytes of UTF-8
    assert write_error(jail, limits, path="t.txt", content="🌍" * 5).code == (
        ErrorCode.FILE_TOO_LARGE
    )
    write(jail, limits, path="t.txt", content="x" * 10)
    assert (root / "t.txt").read_text() == "x" * 10


def test_base64_over_the_limit_is_refused_before_decoding(
    jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_decoding(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("decoded before the size check")

    monkeypatch.setattr(base64, "b64decode", no_decoding)
    content = base64.b64encode(b"z" * 11).decode()
    error = write_error(
        jail, Limits(max_file_size_bytes=10), path="b.bin", content=content, encoding="base64"
    )
    assert error.code == ErrorCode.FILE_TOO_LARGE


def test_base64_exactly_at_the_limit_is_written(root: Path, jail: PathJail) -> None:
    for size in (8, 9, 10):  # padding "==", "=", none
        content = base64.b64encode(b"q" * size).decode()
        write(
            jail, Limits(max_file_size_bytes=10), path="b.bin", content=content, encoding="base64"
        )
        assert (root / "b.bin").read_bytes() == b"q" * size


@pytest.mark.parametrize("content", ["not base64!", "abc", "YWJj\n", "YW=j", "é==="])
def test_bad_base64_is_invalid_encoding(root: Path, jail: PathJail, content: str) -> None:
    error = write_error(jail, path="b.bin", content=content, encoding="base64")
    assert error.code == ExtensionCode.INVALID_ENCODING
    assert not (root / "b.bin").exists()


@pytest.mark.parametrize(("encoding", "format"), [("utf-8", "bytes"), ("base64", "text")])
def test_format_must_agree_with_encoding(
    root: Path, jail: PathJail, encoding: str, format: str
) -> None:
    error = write_error(jail, path="f", content="YWJj", encoding=encoding, format=format)
    assert error.code == ExtensionCode.INVALID_MESSAGE
    assert not (root / "f").exists()


def test_failure_removes_the_temp_file_and_keeps_the_old_content(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "keep.txt").write_text("original")

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    error = write_error(jail, path="keep.txt", content="replacement")
    assert error.code == ErrorCode.INTERNAL_ERROR
    assert "EIO" in error.message
    assert (root / "keep.txt").read_text() == "original"
    assert leftovers(root) == []


def test_full_disk_is_reported_and_cleaned_up(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    error = write_error(jail, path="new.txt", content="x" * 100)
    assert error.code == ErrorCode.INTERNAL_ERROR
    assert error.details is not None and error.details["errno"] == "ENOSPC"
    assert os.listdir(root) == []


def test_permission_denied_is_typed(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refusing_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        creating = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE
        if isinstance(path, str) and creating:  # the temporary, named or not
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    error = write_error(jail, path="denied.txt", content="x")
    assert error.code == ExtensionCode.PERMISSION_DENIED
    assert error.message.startswith("denied.txt: ")


def test_readers_never_see_a_partial_file(root: Path, jail: PathJail) -> None:
    size = 4 * MiB
    versions = ["A" * size, "B" * size]
    (root / "big.txt").write_text(versions[0])
    limits = Limits(max_file_size_bytes=8 * MiB)
    seen: list[str] = []
    problems: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            content = read_file(FileRead(path="big.txt"), jail, limits).content
            if len(content) != size or content[0] * size != content:
                problems.append(f"partial or mixed read: {len(content)} bytes")
                return
            seen.append(content[0])

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for round_number in range(12):
            write(jail, limits, path="big.txt", content=versions[round_number % 2])
    finally:
        stop.set()
        thread.join()
    assert problems == []
    assert len(seen) > 0
    assert leftovers(root) == []


def test_concurrent_writers_to_one_path_leave_one_whole_version(root: Path, jail: PathJail) -> None:
    contents = [chr(ord("a") + n) * 100_000 for n in range(4)]
    threads = [
        threading.Thread(target=write, args=(jail,), kwargs={"path": "c.txt", "content": text})
        for text in contents
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (root / "c.txt").read_text() in contents
    assert leftovers(root) == []
