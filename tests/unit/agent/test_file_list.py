"""FILE_LIST: globs, recursion, hidden entries, caps and symlinks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.files import list_directory, listing
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire import limits as wire_limits
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import FileEntry, FileList, FileListResponse


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """root/
    a.txt  b.csv  B.TXT  .hidden.txt
    docs/  notes.txt  deep/more.txt  .git/config.txt
    .cache/  cached.txt
    """
    root = tmp_path / "root"
    for directory in ("docs/deep", "docs/.git", ".cache"):
        (root / directory).mkdir(parents=True)
    for name in (
        "a.txt",
        "b.csv",
        "B.TXT",
        ".hidden.txt",
        "docs/notes.txt",
        "docs/deep/more.txt",
        "docs/.git/config.txt",
        ".cache/cached.txt",
    ):
        (root / name).write_text(f"content of {name}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    return root


def listed(jail: PathJail, **fields: Any) -> FileListResponse:
    return list_directory(FileList(**fields), jail, Limits())


def names(response: FileListResponse, root: Path) -> list[str]:
    return [os.path.relpath(entry.path, root) for entry in response.entries]


def list_error(jail: PathJail, **fields: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        listed(jail, **fields)
    return caught.value


def test_plain_listing_is_sorted_and_skips_hidden(root: Path, jail: PathJail) -> None:
    response = listed(jail, path=".")
    assert names(response, root) == ["B.TXT", "a.txt", "b.csv", "docs"]
    assert response.truncated is False


def test_entry_fields(root: Path, jail: PathJail) -> None:
    os.utime(root / "a.txt", (1_700_000_000, 1_712_345_678.5))
    entries = {entry.name: entry for entry in listed(jail, path=str(root)).entries}
    assert entries["a.txt"] == FileEntry(
        name="a.txt",
        path=str(root / "a.txt"),
        is_file=True,
        is_dir=False,
        is_symlink=False,
        size_bytes=len("content of a.txt"),
        mtime=1_712_345_678.5,
    )
    docs = entries["docs"]
    assert (docs.is_file, docs.is_dir, docs.is_symlink) == (False, True, False)


def test_include_hidden(root: Path, jail: PathJail) -> None:
    response = listed(jail, path=".", include_hidden=True)
    assert names(response, root) == [".cache", ".hidden.txt", "B.TXT", "a.txt", "b.csv", "docs"]


def test_glob_matches_the_basename_case_sensitively(root: Path, jail: PathJail) -> None:
    assert names(listed(jail, path=".", glob="*.txt"), root) == ["a.txt"]
    assert names(listed(jail, path=".", glob="*.TXT"), root) == ["B.TXT"]
    assert names(listed(jail, path=".", glob="[ab].*"), root) == ["a.txt", "b.csv"]
    assert names(listed(jail, path=".", glob="docs/*"), root) == []


def test_recursive_descends_depth_first_in_name_order(root: Path, jail: PathJail) -> None:
    response = listed(jail, path=".", recursive=True)
    assert names(response, root) == [
        "B.TXT",
        "a.txt",
        "b.csv",
        "docs",
        "docs/deep",
        "docs/deep/more.txt",
        "docs/notes.txt",
    ]


def test_recursive_glob_matches_nested_basenames(root: Path, jail: PathJail) -> None:
    response = listed(jail, path=".", recursive=True, glob="*.txt")
    assert names(response, root) == ["a.txt", "docs/deep/more.txt", "docs/notes.txt"]


def test_recursive_with_hidden_enters_dot_directories(root: Path, jail: PathJail) -> None:
    response = listed(jail, path=".", recursive=True, include_hidden=True, glob="*.txt")
    assert names(response, root) == [
        ".cache/cached.txt",
        ".hidden.txt",
        "a.txt",
        "docs/.git/config.txt",
        "docs/deep/more.txt",
        "docs/notes.txt",
    ]


def test_listing_a_subdirectory(root: Path, jail: PathJail) -> None:
    response = listed(jail, path="docs")
    assert [entry.path for entry in response.entries] == [
        str(root / "docs" / "deep"),
        str(root / "docs" / "notes.txt"),
    ]


def test_max_entries_truncates(root: Path, jail: PathJail) -> None:
    response = listed(jail, path=".", recursive=True, max_entries=3)
    assert names(response, root) == ["B.TXT", "a.txt", "b.csv"]
    assert response.truncated is True


def test_max_entries_equal_to_the_count_is_not_truncated(root: Path, jail: PathJail) -> None:
    response = listed(jail, path=".", max_entries=4)
    assert len(response.entries) == 4
    assert response.truncated is False


def test_scanning_stops_once_the_cap_is_exceeded(
    root: Path, jail: PathJail, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(30):
        (root / f"tree{number:02}").mkdir()
        (root / f"tree{number:02}" / "leaf.txt").write_text("x")
    directories_read: list[int] = []
    real_names = listing._names

    def counting_names(dir_fd: int) -> list[str]:
        directories_read.append(dir_fd)
        return real_names(dir_fd)

    monkeypatch.setattr(listing, "_names", counting_names)
    response = listed(jail, path=".", recursive=True, max_entries=2)
    assert response.truncated is True
    assert len(directories_read) <= 2


def test_the_protocol_cap_bounds_max_entries(root: Path, jail: PathJail) -> None:
    bulk = root / "bulk"
    bulk.mkdir()
    for number in range(wire_limits.DEFAULT_LIST_MAX_ENTRIES + 5):
        (bulk / f"f{number:05}").touch()
    response = listed(jail, path="bulk", max_entries=5000)
    assert len(response.entries) == wire_limits.DEFAULT_LIST_MAX_ENTRIES
    assert response.truncated is True


def test_symlinks_are_flagged_and_never_descended(
    root: Path, tmp_path: Path, jail: PathJail
) -> None:
    (root / "docs-link").symlink_to("docs")
    (root / "file-link").symlink_to("a.txt")
    (root / "out-dir").symlink_to(tmp_path / "outside")
    (root / "out-file").symlink_to(tmp_path / "outside" / "secret.txt")
    (root / "dangling").symlink_to("missing")
    response = listed(jail, path=".", recursive=True)
    entries = {os.path.relpath(entry.path, root): entry for entry in response.entries}
    assert "docs-link/notes.txt" not in entries
    assert not any(path.startswith(("out-dir/", "docs-link/")) for path in entries)
    assert all(entry.path.startswith(str(root) + "/") for entry in response.entries)
    # links inside the root report their target's kind; the others only the link
    assert (entries["docs-link"].is_symlink, entries["docs-link"].is_dir) == (True, True)
    file_link = entries["file-link"]
    assert (file_link.is_symlink, file_link.is_file) == (True, True)
    assert file_link.size_bytes == len("content of a.txt")
    for name in ("out-dir", "out-file", "dangling"):
        entry = entries[name]
        assert (entry.is_symlink, entry.is_file, entry.is_dir) == (True, False, False), name
        assert entry.size_bytes == len(os.readlink(root / name))


def test_listing_a_symlinked_directory_inside_the_root(root: Path, jail: PathJail) -> None:
    (root / "docs-link").symlink_to("docs")
    response = listed(jail, path="docs-link")
    assert [entry.path for entry in response.entries][-1] == str(root / "docs" / "notes.txt")


def test_listing_a_file_is_not_a_directory(jail: PathJail) -> None:
    error = list_error(jail, path="a.txt")
    assert error.code == ExtensionCode.NOT_A_DIRECTORY
    assert "a.txt" in error.message


def test_listing_a_missing_directory(jail: PathJail) -> None:
    assert list_error(jail, path="nope").code == ErrorCode.PATH_NOT_FOUND


def test_empty_glob_is_invalid(jail: PathJail) -> None:
    assert list_error(jail, path=".", glob="").code == ExtensionCode.INVALID_MESSAGE


def test_non_utf8_names_are_skipped(root: Path, jail: PathJail) -> None:
    (root / "docs").joinpath(os.fsdecode(b"bad-\xff.txt")).write_text("x")
    response = listed(jail, path="docs")
    assert [entry.name for entry in response.entries] == ["deep", "notes.txt"]


def test_no_descriptor_is_leaked(root: Path, jail: PathJail) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(10):
        listed(jail, path=".", recursive=True, include_hidden=True)
        listed(jail, path=".", recursive=True, max_entries=1)
    assert len(os.listdir("/proc/self/fd")) == before
