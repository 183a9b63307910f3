"""FILE_MOVE: renames, overwrite, no-replace atomicity, and the cross-device fallback."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import tetherbed.agent.files.move as move_module
import tetherbed.agent.files.rename as rename_module
from tetherbed.agent.config import Limits
from tetherbed.agent.files import cross_device, move_path
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, FileMove


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "dest").mkdir()
    (root / "a.txt").write_text("alpha")
    (root / "b.txt").write_text("bravo")
    (root / "dir" / "one.txt").write_text("one")
    (root / "dir" / "sub" / "two.txt").write_text("two")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    return outside


def move(jail: PathJail, **fields: Any) -> Ack:
    return move_path(FileMove(**fields), jail, Limits())


def move_error(jail: PathJail, **fields: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        move(jail, **fields)
    return caught.value


def cross_device_only(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Make the direct rename fail with EXDEV, as between two mounts; record attempts."""
    attempts: list[tuple[str, str]] = []

    def exdev(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str, *, replace: bool) -> None:
        attempts.append((src, dst))
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(move_module, "rename_entry", exdev)
    return attempts


def temp_leftovers(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.startswith(".tetherbed-")]


# --- same device -----------------------------------------------------------------


def test_rename_a_file(root: Path, jail: PathJail) -> None:
    assert move(jail, src="a.txt", dst="c.txt") == Ack(ok=True)
    assert not (root / "a.txt").exists()
    assert (root / "c.txt").read_text() == "alpha"


def test_move_a_directory_into_another(root: Path, jail: PathJail) -> None:
    move(jail, src="dir", dst="dest/moved")
    assert (root / "dest" / "moved" / "sub" / "two.txt").read_text() == "two"
    assert not (root / "dir").exists()


def test_absolute_paths(root: Path, jail: PathJail) -> None:
    move(jail, src=str(root / "a.txt"), dst=str(root / "dest" / "a.txt"))
    assert (root / "dest" / "a.txt").read_text() == "alpha"


def test_existing_destination_without_overwrite(root: Path, jail: PathJail) -> None:
    error = move_error(jail, src="a.txt", dst="b.txt")
    assert error.code == ErrorCode.PATH_EXISTS
    assert "b.txt" in error.message
    assert (root / "a.txt").read_text() == "alpha"
    assert (root / "b.txt").read_text() == "bravo"


def test_overwrite_replaces_the_destination(root: Path, jail: PathJail) -> None:
    move(jail, src="a.txt", dst="b.txt", overwrite=True)
    assert not (root / "a.txt").exists()
    assert (root / "b.txt").read_text() == "alpha"


def test_overwrite_replaces_an_empty_directory_but_not_a_full_one(
    root: Path, jail: PathJail
) -> None:
    (root / "empty").mkdir()
    move(jail, src="dir", dst="empty", overwrite=True)
    assert (root / "empty" / "one.txt").read_text() == "one"
    (root / "other").mkdir()
    (root / "other" / "x").write_text("x")
    error = move_error(jail, src="other", dst="empty", overwrite=True)
    assert error.code == ErrorCode.PATH_NOT_EMPTY


def test_overwrite_cannot_swap_kinds(root: Path, jail: PathJail) -> None:
    assert move_error(jail, src="a.txt", dst="dest", overwrite=True).code == ErrorCode.PATH_EXISTS
    assert move_error(jail, src="dir", dst="a.txt", overwrite=True).code == ErrorCode.PATH_EXISTS
    assert (root / "a.txt").read_text() == "alpha"


def test_missing_source(jail: PathJail) -> None:
    error = move_error(jail, src="nope.txt", dst="x.txt")
    assert error.code == ErrorCode.PATH_NOT_FOUND
    assert "nope.txt" in error.message


def test_missing_destination_parent(root: Path, jail: PathJail) -> None:
    error = move_error(jail, src="a.txt", dst="no/such/dir/a.txt")
    assert error.code == ErrorCode.PATH_NOT_FOUND
    assert (root / "a.txt").exists()
    assert not (root / "no").exists()


def test_moving_a_directory_into_itself(root: Path, jail: PathJail) -> None:
    error = move_error(jail, src="dir", dst="dir/sub/inside")
    assert error.code == ExtensionCode.INVALID_MESSAGE
    assert (root / "dir" / "one.txt").exists()


def test_symlink_is_moved_as_a_link(root: Path, outside: Path, jail: PathJail) -> None:
    (root / "link").symlink_to(outside / "secret.txt")
    move(jail, src="link", dst="dest/link")
    assert os.readlink(root / "dest" / "link") == str(outside / "secret.txt")
    assert (outside / "secret.txt").read_text() == "secret"


def test_overwrite_replaces_a_destination_link_not_its_target(
    root: Path, outside: Path, jail: PathJail
) -> None:
    (root / "escape").symlink_to(outside / "secret.txt")
    move(jail, src="a.txt", dst="escape", overwrite=True)
    assert not (root / "escape").is_symlink()
    assert (root / "escape").read_text() == "alpha"
    assert (outside / "secret.txt").read_text() == "secret"


def test_hard_links_of_one_file_still_move(root: Path, jail: PathJail) -> None:
    os.link(root / "a.txt", root / "hard.txt")
    move(jail, src="a.txt", dst="hard.txt", overwrite=True)
    assert not (root / "a.txt").exists()
    assert (root / "hard.txt").read_text() == "alpha"


def test_same_path(root: Path, jail: PathJail) -> None:
    assert move_error(jail, src="a.txt", dst="a.txt").code == ErrorCode.PATH_EXISTS
    move(jail, src="a.txt", dst="./a.txt", overwrite=True)
    assert (root / "a.txt").read_text() == "alpha"


def test_destination_created_concurrently_is_not_replaced(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The existence pre-check passes; the destination appears before the rename.
    real_rename_entry = move_module.rename_entry

    def racing(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str, *, replace: bool) -> None:
        (root / "late.txt").write_text("late writer")
        real_rename_entry(src_dir_fd, src, dst_dir_fd, dst, replace=replace)

    monkeypatch.setattr(move_module, "rename_entry", racing)
    assert move_error(jail, src="a.txt", dst="late.txt").code == ErrorCode.PATH_EXISTS
    assert (root / "late.txt").read_text() == "late writer"
    assert (root / "a.txt").read_text() == "alpha"


@pytest.mark.parametrize("kind", ["file", "directory", "symlink"])
def test_no_replace_fallback_without_renameat2(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(rename_module, "_RENAMEAT2", None)
    src = {"file": "a.txt", "directory": "dir", "symlink": "link"}[kind]
    (root / "link").symlink_to("a.txt")
    move(jail, src=src, dst="dest/moved")
    assert os.path.lexists(root / "dest" / "moved")
    assert not os.path.lexists(root / src)
    assert (root / "dest" / "moved").is_symlink() == (kind == "symlink")
    (root / "b2.txt").write_text("b2")
    assert move_error(jail, src="b2.txt", dst="b.txt").code == ErrorCode.PATH_EXISTS


def test_native_no_replace_refuses_an_existing_name(root: Path) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FileExistsError):
            rename_module.rename_entry(fd, "a.txt", fd, "b.txt", replace=False)
    finally:
        os.close(fd)
    assert (root / "b.txt").read_text() == "bravo"


# --- refusals ---------------------------------------------------------------------


def test_root_cannot_be_moved_or_replaced(root: Path, jail: PathJail) -> None:
    assert move_error(jail, src=".", dst="dest/r").code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
    error = move_error(jail, src="dir", dst=str(root), overwrite=True)
    assert error.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
    assert (root / "dir").is_dir()


def test_both_endpoints_are_jailed(root: Path, outside: Path, jail: PathJail) -> None:
    (root / "link-out").symlink_to(outside)
    into = move_error(jail, src="a.txt", dst=str(outside / "a.txt"))
    out = move_error(jail, src="link-out/secret.txt", dst="got.txt")
    assert into.code == out.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
    assert (root / "a.txt").exists() and (outside / "secret.txt").exists()


# --- cross-device fallback --------------------------------------------------------


def test_cross_device_file_move(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = cross_device_only(monkeypatch)
    os.chmod(root / "a.txt", 0o640)
    os.utime(root / "a.txt", ns=(1_600_000_000_000_000_000, 1_700_000_000_123_456_789))
    move(jail, src="a.txt", dst="dest/a.txt")
    assert attempts == [("a.txt", "a.txt")]
    moved = root / "dest" / "a.txt"
    assert moved.read_text() == "alpha"
    assert stat.S_IMODE(moved.stat().st_mode) == 0o640
    assert moved.stat().st_mtime_ns == 1_700_000_000_123_456_789
    assert not (root / "a.txt").exists()
    assert temp_leftovers(root / "dest") == []


def test_cross_device_tree_move_keeps_links_as_links(
    root: Path, outside: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    cross_device_only(monkeypatch)
    (root / "dir" / "sub" / "escape").symlink_to(outside / "secret.txt")
    binary = os.urandom(3 * 1024 * 1024 + 7)
    (root / "dir" / "blob.bin").write_bytes(binary)
    move(jail, src="dir", dst="dest/dir")
    moved = root / "dest" / "dir"
    assert (moved / "one.txt").read_text() == "one"
    assert (moved / "sub" / "two.txt").read_text() == "two"
    assert (moved / "blob.bin").read_bytes() == binary
    assert os.readlink(moved / "sub" / "escape") == str(outside / "secret.txt")
    assert not (root / "dir").exists()
    assert (outside / "secret.txt").read_text() == "secret"


def test_cross_device_overwrite(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    cross_device_only(monkeypatch)
    assert move_error(jail, src="a.txt", dst="b.txt").code == ErrorCode.PATH_EXISTS
    move(jail, src="a.txt", dst="b.txt", overwrite=True)
    assert (root / "b.txt").read_text() == "alpha"
    assert not (root / "a.txt").exists()
    assert temp_leftovers(root) == []


def test_cross_device_failure_keeps_the_source_and_cleans_up(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    cross_device_only(monkeypatch)
    real_copy_file = cross_device._copy_file
    copied: list[str] = []

    def copy_then_fail(src_dir_fd: int, name: str, dst_dir_fd: int, new_name: str) -> None:
        if copied:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        copied.append(name)
        real_copy_file(src_dir_fd, name, dst_dir_fd, new_name)

    monkeypatch.setattr(cross_device, "_copy_file", copy_then_fail)
    error = move_error(jail, src="dir", dst="dest/dir")
    assert error.code == ErrorCode.INTERNAL_ERROR
    assert "ENOSPC" in error.message
    assert (root / "dir" / "sub" / "two.txt").read_text() == "two"
    assert os.listdir(root / "dest") == []


def test_cross_device_special_file_is_refused(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    cross_device_only(monkeypatch)
    os.mkfifo(root / "pipe")
    assert move_error(jail, src="pipe", dst="dest/pipe").code == ExtensionCode.NOT_A_FILE
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)
    assert os.listdir(root / "dest") == []


def test_a_source_swapped_during_a_cross_device_move_is_a_typed_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cross-device move removes its source with FILE_DELETE's remove_entry,
    which reports a directory swapped for a symlink as EntrySwapped: the move
    answers the jail's changed_during_operation refusal, not INTERNAL_ERROR."""
    from tetherbed.agent.files.delete import EntrySwapped

    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)

    def swapped(*args: object, **kwargs: object) -> None:
        raise EntrySwapped("src became a symlink while being removed")

    monkeypatch.setattr(move_module, "_move", swapped)
    with pytest.raises(ProtocolError) as refused:
        move_path(FileMove(src="src", dst="dst"), PathJail(str(root)), Limits())
    assert refused.value.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
    assert refused.value.details["reason"] == "changed_during_operation"
