"""FILE_STAT: fields, symlink handling, nonexistent paths and loops."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import stat_path
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import FileStat, FileStatResponse


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return root


def stat_of(jail: PathJail, **fields: Any) -> FileStatResponse:
    return stat_path(FileStat(**fields), jail, Limits())


def stat_error(jail: PathJail, **fields: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        stat_of(jail, **fields)
    return caught.value


def test_regular_file(root: Path, jail: PathJail) -> None:
    (root / "data.csv").write_text("col1,col2\n1,2\n")
    os.chmod(root / "data.csv", 0o644)
    os.utime(root / "data.csv", (1_700_000_000.5, 1_712_345_678.25))
    response = stat_of(jail, path="data.csv")
    assert response == FileStatResponse(
        exists=True,
        is_file=True,
        is_dir=False,
        is_symlink=False,
        size_bytes=14,
        mtime=1_712_345_678.25,
        ctime=response.ctime,
        mode="0644",
        owner_uid=os.getuid(),
        owner_gid=os.getgid(),
        mime_type="text/csv",
        path=str(root / "data.csv"),
    )
    assert isinstance(response.ctime, float) and response.ctime > 0


@pytest.mark.parametrize(("mode", "text"), [(0o600, "0600"), (0o4755, "4755"), (0o1777, "1777")])
def test_mode_is_four_digit_octal_with_special_bits(
    root: Path, jail: PathJail, mode: int, text: str
) -> None:
    (root / "f").write_text("x")
    os.chmod(root / "f", mode)
    assert stat_of(jail, path="f").mode == text


def test_directory(root: Path, jail: PathJail) -> None:
    (root / "dir.csv").mkdir()
    response = stat_of(jail, path="dir.csv")
    assert (response.is_file, response.is_dir, response.is_symlink) == (False, True, False)
    assert response.mime_type is None
    assert response.path == str(root / "dir.csv")


def test_the_root_itself(root: Path, jail: PathJail) -> None:
    response = stat_of(jail, path=".")
    assert response.exists and response.is_dir
    assert response.path == str(root)


def test_unknown_mime_type_is_null(root: Path, jail: PathJail) -> None:
    (root / "thing.unknownext").write_text("x")
    assert stat_of(jail, path="thing.unknownext").mime_type is None


def test_missing_path_is_exists_false_with_the_resolved_target(root: Path, jail: PathJail) -> None:
    response = stat_of(jail, path="gone/file.txt")
    assert response == FileStatResponse(exists=False, path=str(root / "gone" / "file.txt"))


def test_symlink_followed_describes_the_target(root: Path, jail: PathJail) -> None:
    (root / "real.txt").write_text("twelve bytes")
    (root / "link.txt").symlink_to("real.txt")
    response = stat_of(jail, path="link.txt")
    assert response.is_symlink is True
    assert (response.is_file, response.size_bytes) == (True, 12)
    assert response.path == str(root / "real.txt")
    assert response.mime_type == "text/plain"


def test_symlink_not_followed_describes_the_link(root: Path, jail: PathJail) -> None:
    (root / "real.txt").write_text("twelve bytes")
    (root / "link.txt").symlink_to("real.txt")
    response = stat_of(jail, path="link.txt", follow_symlinks=False)
    assert (response.is_symlink, response.is_file, response.is_dir) == (True, False, False)
    assert response.size_bytes == len("real.txt")
    assert response.path == str(root / "link.txt")
    assert response.mime_type is None


def test_symlink_to_outside_may_be_lstat_but_not_followed(
    root: Path, tmp_path: Path, jail: PathJail
) -> None:
    (root / "escape").symlink_to(tmp_path / "outside" / "secret.txt")
    response = stat_of(jail, path="escape", follow_symlinks=False)
    assert response.exists and response.is_symlink
    assert response.path == str(root / "escape")
    error = stat_error(jail, path="escape")
    assert error.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT


def test_dangling_symlink(root: Path, jail: PathJail) -> None:
    (root / "dangling").symlink_to("nowhere/target.txt")
    followed = stat_of(jail, path="dangling")
    assert followed == FileStatResponse(exists=False, path=str(root / "nowhere" / "target.txt"))
    itself = stat_of(jail, path="dangling", follow_symlinks=False)
    assert itself.exists and itself.is_symlink


def test_symlink_loop_is_an_error_when_followed(root: Path, jail: PathJail) -> None:
    (root / "loop").symlink_to("loop")
    error = stat_error(jail, path="loop")
    assert error.code == ErrorCode.PATH_NOT_FOUND
    assert error.details is not None and error.details["reason"] == "symlink_loop"
    assert stat_of(jail, path="loop", follow_symlinks=False).is_symlink is True


def test_outside_is_an_error_never_exists_false(jail: PathJail, tmp_path: Path) -> None:
    for wire_path in ("/etc/passwd", "/no/such/dir", str(tmp_path / "outside" / "none"), ".."):
        assert stat_error(jail, path=wire_path).code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
