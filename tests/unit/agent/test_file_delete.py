"""FILE_DELETE: files, links, directories, recursion, missing_ok, and the root."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import delete_path
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, FileDelete


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "tree" / "branch").mkdir(parents=True)
    (root / "tree" / "leaf.txt").write_text("leaf")
    (root / "tree" / "branch" / "twig.txt").write_text("twig")
    (root / "empty").mkdir()
    (root / "file.txt").write_text("file")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "nested").mkdir(parents=True)
    (outside / "secret.txt").write_text("secret")
    (outside / "nested" / "deep.txt").write_text("deep")
    return outside


def delete(jail: PathJail, **fields: Any) -> Ack:
    return delete_path(FileDelete(**fields), jail, Limits())


def delete_error(jail: PathJail, **fields: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        delete(jail, **fields)
    return caught.value


def test_delete_a_file(root: Path, jail: PathJail) -> None:
    assert delete(jail, path="file.txt") == Ack(ok=True)
    assert not (root / "file.txt").exists()


def test_delete_an_empty_directory(root: Path, jail: PathJail) -> None:
    delete(jail, path="empty")
    assert not (root / "empty").exists()


def test_non_empty_directory_needs_recursive(root: Path, jail: PathJail) -> None:
    error = delete_error(jail, path="tree")
    assert error.code == ErrorCode.PATH_NOT_EMPTY
    assert "tree" in error.message and "recursive" in error.message
    assert (root / "tree" / "branch" / "twig.txt").read_text() == "twig"


def test_recursive_delete_removes_the_tree(root: Path, jail: PathJail) -> None:
    delete(jail, path="tree", recursive=True)
    assert not (root / "tree").exists()
    assert (root / "file.txt").exists()


def test_recursive_on_a_file_just_deletes_it(root: Path, jail: PathJail) -> None:
    delete(jail, path="file.txt", recursive=True)
    assert not (root / "file.txt").exists()


def test_missing_path(jail: PathJail) -> None:
    error = delete_error(jail, path="gone.txt")
    assert error.code == ErrorCode.PATH_NOT_FOUND
    assert "gone.txt" in error.message


def test_missing_ok(jail: PathJail) -> None:
    assert delete(jail, path="gone.txt", missing_ok=True) == Ack(ok=True)
    assert delete(jail, path="gone/deeper.txt", missing_ok=True) == Ack(ok=True)


def test_retry_with_missing_ok_is_a_no_op(root: Path, jail: PathJail) -> None:
    delete(jail, path="file.txt", missing_ok=True)
    delete(jail, path="file.txt", missing_ok=True)
    assert not (root / "file.txt").exists()


def test_symlink_is_deleted_not_its_target(root: Path, jail: PathJail) -> None:
    (root / "link").symlink_to("tree")
    delete(jail, path="link", recursive=True)
    assert not (root / "link").is_symlink()
    assert (root / "tree" / "leaf.txt").read_text() == "leaf"


def test_symlink_to_outside_is_deleted_and_the_outside_kept(
    root: Path, outside: Path, jail: PathJail
) -> None:
    (root / "escape").symlink_to(outside)
    delete(jail, path="escape", recursive=True)
    assert not (root / "escape").is_symlink()
    assert (outside / "nested" / "deep.txt").read_text() == "deep"


def test_dangling_and_looping_links_can_be_deleted(root: Path, jail: PathJail) -> None:
    (root / "dangling").symlink_to("nowhere")
    (root / "loop").symlink_to("loop")
    delete(jail, path="dangling")
    delete(jail, path="loop")
    assert not os.path.lexists(root / "dangling")
    assert not os.path.lexists(root / "loop")


def test_recursive_delete_does_not_follow_links_out_of_the_root(
    root: Path, outside: Path, jail: PathJail
) -> None:
    (root / "tree" / "to-outside").symlink_to(outside)
    (root / "tree" / "branch" / "to-secret").symlink_to(outside / "secret.txt")
    delete(jail, path="tree", recursive=True)
    assert not (root / "tree").exists()
    assert (outside / "secret.txt").read_text() == "secret"
    assert (outside / "nested" / "deep.txt").read_text() == "deep"


@pytest.mark.parametrize("wire_path", [".", "", "tree/..", "{root}", "{root}/"])
def test_the_root_is_never_deleted(root: Path, jail: PathJail, wire_path: str) -> None:
    wire_path = wire_path.format(root=root)
    if wire_path == "":
        assert delete_error(jail, path="").code == ExtensionCode.INVALID_MESSAGE
    else:
        error = delete_error(jail, path=wire_path, recursive=True)
        assert error.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
        assert error.details is not None and error.details["reason"] == "allowed_root"
    assert (root / "file.txt").exists()


def test_path_through_a_symlinked_directory_deletes_inside_its_target(
    root: Path, jail: PathJail
) -> None:
    (root / "tree-link").symlink_to("tree")
    delete(jail, path="tree-link/leaf.txt")
    assert not (root / "tree" / "leaf.txt").exists()
    assert (root / "tree-link").is_symlink()


def test_os_errors_are_typed(root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch) -> None:
    def refusing_unlink(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "unlink", refusing_unlink)
    error = delete_error(jail, path="file.txt")
    assert error.code == ExtensionCode.PERMISSION_DENIED
    assert error.message.startswith("file.txt: ")
    assert (root / "file.txt").exists()


def test_concurrent_disappearance_respects_missing_ok(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_unlink = os.unlink

    def racing_unlink(name: str, *, dir_fd: int) -> None:
        real_unlink(name, dir_fd=dir_fd)  # someone else got there first
        real_unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", racing_unlink)
    assert delete(jail, path="file.txt", missing_ok=True) == Ack(ok=True)
    (root / "file.txt").write_text("again")
    assert delete_error(jail, path="file.txt").code == ErrorCode.PATH_NOT_FOUND


def test_a_directory_swapped_for_a_link_during_a_recursive_delete_is_a_typed_refusal(
    jail: PathJail, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the path-jail swap property (tests/fuzz/test_path_jail.py): the
    directory checked for removal became a symlink before shutil.rmtree ran;
    rmtree refused the link (safely) with an errno-less OSError, which was
    answered INTERNAL_ERROR "unexpected OS error UNKNOWN". Now it is the
    jail's changed_during_operation refusal, and nothing outside is touched."""
    import shutil

    real_rmtree = shutil.rmtree

    def swapped_first(path: str, *args: Any, **kwargs: Any) -> None:
        os.rename(root / "tree", root / "tree-moved")
        (root / "tree").symlink_to(outside)
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", swapped_first)
    with pytest.raises(ProtocolError) as refused:
        delete(jail, path="tree", recursive=True)
    assert refused.value.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
    assert refused.value.details["reason"] == "changed_during_operation"
    assert (outside / "secret.txt").read_text() == "secret"
    assert (outside / "nested" / "deep.txt").read_text() == "deep"


def test_a_swap_undone_before_the_refusal_is_reported_is_still_a_swap(
    jail: PathJail, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap property's second finding: the link was swapped back for the
    directory between rmtree's refusal and a look at the entry afterwards, so
    judging by what the entry is *now* answered INTERNAL_ERROR again."""
    import shutil

    real_rmtree = shutil.rmtree

    def swapped_then_restored(path: str, *args: Any, **kwargs: Any) -> None:
        os.rename(root / "tree", root / "tree-moved")
        (root / "tree").symlink_to(outside)
        try:
            real_rmtree(path, *args, **kwargs)
        finally:
            (root / "tree").unlink()
            os.rename(root / "tree-moved", root / "tree")

    monkeypatch.setattr(shutil, "rmtree", swapped_then_restored)
    with pytest.raises(ProtocolError) as refused:
        delete(jail, path="tree", recursive=True)
    assert refused.value.code == ErrorCode.PATH_OUTSIDE_ALLOWED_ROOT
    assert refused.value.details["reason"] == "changed_during_operation"
    assert (outside / "secret.txt").read_text() == "secret"
    assert (root / "tree" / "leaf.txt").read_text() == "leaf"
