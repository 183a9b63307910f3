"""FILE_DELETE's recycle-bin mode and PATH_RESERVED_NAME."""

from __future__ import annotations

from pathlib import Path

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import delete_path, move_path, write_file
from tetherbed.agent.files.recycle_bin import RecycleBin, RecycleBinError
from tetherbed.agent.path_jail import PathJail
from tetherbed.agent.reserved_names import is_reserved
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import FileDelete, FileMove, FileWrite


@pytest.fixture
def tree(tmp_path: Path) -> tuple[PathJail, RecycleBin, Path]:
    root = tmp_path / "root"
    root.mkdir()
    trash = tmp_path / "trash"
    return PathJail(str(root)), RecycleBin(str(trash), root=str(root), clock=ManualClock()), trash


def delete(jail: PathJail, bin_: RecycleBin, path: str, **options: bool) -> None:
    delete_path(FileDelete(path=path, **options), jail, Limits(), recycle_bin=bin_)


def test_a_deleted_file_goes_to_the_bin_with_a_restore_record(tree) -> None:  # type: ignore[no-untyped-def]
    jail, bin_, trash = tree
    (Path(jail.root) / "old data.csv").write_text("a,b\n")
    delete(jail, bin_, "old data.csv")
    assert not (Path(jail.root) / "old data.csv").exists()
    assert (trash / "files" / "old data.csv").read_text() == "a,b\n"
    record = (trash / "info" / "old data.csv.trashinfo").read_text()
    assert record.startswith("[Trash Info]\n")
    assert f"Path={jail.root}/old%20data.csv\n" in record
    assert "DeletionDate=2023-11-1" in record  # the clock's time, local


def test_names_never_collide(tree) -> None:  # type: ignore[no-untyped-def]
    jail, bin_, trash = tree
    for content in ("one", "two", "three"):
        (Path(jail.root) / "f.txt").write_text(content)
        delete(jail, bin_, "f.txt")
    assert (trash / "files" / "f.txt").read_text() == "one"
    assert (trash / "files" / "f.txt.2").read_text() == "two"
    assert (trash / "files" / "f.txt.3").read_text() == "three"
    assert sorted(p.name for p in (trash / "info").iterdir()) == [
        "f.txt.2.trashinfo",
        "f.txt.3.trashinfo",
        "f.txt.trashinfo",
    ]
    # A stale entry without its record is stepped over, never overwritten.
    (trash / "files" / "g.txt").write_text("stale")
    (Path(jail.root) / "g.txt").write_text("new")
    delete(jail, bin_, "g.txt")
    assert (trash / "files" / "g.txt").read_text() == "stale"
    assert (trash / "files" / "g.txt.2").read_text() == "new"
    assert not (trash / "info" / "g.txt.trashinfo").exists()


def test_directories_need_recursive_and_links_move_as_links(tree) -> None:  # type: ignore[no-untyped-def]
    jail, bin_, trash = tree
    folder = Path(jail.root) / "dir"
    folder.mkdir()
    (folder / "x").write_text("x")
    with pytest.raises(ProtocolError) as caught:
        delete(jail, bin_, "dir")
    assert caught.value.code == "PATH_NOT_EMPTY"
    delete(jail, bin_, "dir", recursive=True)
    assert (trash / "files" / "dir" / "x").read_text() == "x"
    (Path(jail.root) / "link").symlink_to("/etc/passwd")
    delete(jail, bin_, "link")
    assert (trash / "files" / "link").is_symlink()
    with pytest.raises(ProtocolError) as missing:
        delete(jail, bin_, "ghost")
    assert missing.value.code == "PATH_NOT_FOUND"
    delete(jail, bin_, "ghost", missing_ok=True)


def test_the_bin_must_be_outside_the_root(tmp_path: Path) -> None:
    with pytest.raises(RecycleBinError, match="inside the allowed root"):
        RecycleBin(str(tmp_path / "trash"), root=str(tmp_path), clock=ManualClock())


@pytest.mark.parametrize(
    "name",
    ["CON", "con", "nul.txt", "Aux", "COM1", "lpt9.log", "PRN. ", "com\u00b9", "NUL.tar.gz"],
)
def test_windows_device_names_are_reserved(name: str) -> None:
    assert is_reserved(name)


@pytest.mark.parametrize("name", ["compose.yml", "COM10", "COM0", "console", "nullable", "LPT"])
def test_ordinary_names_are_not(name: str) -> None:
    assert not is_reserved(name)


def test_creating_a_reserved_name_is_refused_reading_it_is_not(tmp_path: Path) -> None:
    jail = PathJail(str(tmp_path))
    for request in (
        FileWrite(path="nul.txt", content="x"),
        FileWrite(path="logs/COM1/a.txt", content="x", create_parents=True),
    ):
        with pytest.raises(ProtocolError) as caught:
            write_file(request, jail, Limits())
        assert caught.value.code == "PATH_RESERVED_NAME"
        assert caught.value.details["path"] == request.path  # type: ignore[index]
    (tmp_path / "a.txt").write_text("a")
    with pytest.raises(ProtocolError) as moved:
        move_path(FileMove(src="a.txt", dst="LPT1"), jail, Limits())
    assert moved.value.code == "PATH_RESERVED_NAME"
    # An entry of that name made by someone else stays reachable (deletable).
    (tmp_path / "con").write_text("legacy")
    delete_path(FileDelete(path="con"), jail, Limits())
    assert not (tmp_path / "con").exists() and not list(tmp_path.glob("logs"))
