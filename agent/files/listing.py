"""FILE_LIST: directory entries, optionally recursive and filtered by a basename glob."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from fnmatch import fnmatchcase

import msgspec

from tetherbed.agent.config import Limits
from tetherbed.agent.files.content_encoding import CONTENT_BUDGET_BYTES
from tetherbed.agent.path_jail import PathJail, os_errors_as_protocol_errors
from tetherbed.wire import limits as wire_limits
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import FileEntry, FileList, FileListResponse

_SUBDIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _child_path(directory: str, name: str) -> str:
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


def _is_wire_safe(name: str) -> bool:
    """Names that are not valid UTF-8 cannot be sent in JSON, nor named back."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def walk_directory(
    dir_fd: int, dir_path: str, *, recursive: bool, include_hidden: bool
) -> Iterator[tuple[str, str, os.stat_result]]:
    """Yield (name, path, lstat) depth-first, names sorted within each directory.

    Directory symlinks are never descended into; each subdirectory is opened
    relative to its parent with O_NOFOLLOW, so the walk cannot leave the tree.
    Entries that vanish or cannot be opened mid-walk are skipped. Descriptors
    opened here are closed when the generator finishes or is closed early.
    """
    stack: list[tuple[int, str, Iterator[str]]] = [(dir_fd, dir_path, iter(_names(dir_fd)))]
    try:
        while stack:
            fd, path, names = stack[-1]
            name = next(names, None)
            if name is None:
                stack.pop()
                if fd != dir_fd:
                    os.close(fd)
                continue
            if not include_hidden and name.startswith("."):
                continue
            try:
                status = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            child = _child_path(path, name)
            yield name, child, status
            if recursive and stat.S_ISDIR(status.st_mode):
                try:
                    child_fd = os.open(name, _SUBDIRECTORY_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # vanished, replaced, or unreadable: list what we can
                stack.append((child_fd, child, iter(_names(child_fd))))
    finally:
        for fd, _, _ in stack:
            if fd != dir_fd:
                os.close(fd)


def _names(dir_fd: int) -> list[str]:
    return sorted(name for name in os.listdir(dir_fd) if _is_wire_safe(name))


def describe_entry(jail: PathJail, name: str, path: str, link_status: os.stat_result) -> FileEntry:
    """A FileEntry; a symlink reports its target's kind only when that is inside the root."""
    status = link_status
    is_symlink = stat.S_ISLNK(link_status.st_mode)
    if is_symlink:
        status = _target_status(jail, path) or link_status
    is_link_only = status is link_status and is_symlink
    return FileEntry(
        name=name,
        path=path,
        is_file=not is_link_only and stat.S_ISREG(status.st_mode),
        is_dir=not is_link_only and stat.S_ISDIR(status.st_mode),
        is_symlink=is_symlink,
        size_bytes=status.st_size,
        mtime=status.st_mtime,
    )


def _target_status(jail: PathJail, link_path: str) -> os.stat_result | None:
    """Status of a symlink's target if it exists inside the root; else None."""
    try:
        location = jail.locate(link_path)
        if not location.exists:
            return None
        fd = jail.open_entry(location.path, link_path, os.O_PATH)
    except ProtocolError:
        return None  # dangling, a loop, or outside: describe the link itself
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def list_directory(request: FileList, jail: PathJail, limits: Limits) -> FileListResponse:
    """List a directory, stopping as soon as one entry beyond the cap is found.

    The cap is the smaller of `max_entries` and the protocol's hard cap; the
    response is also kept inside one frame. `truncated` says more entries exist.
    """
    del limits  # the entry cap and the frame budget bound this response
    if request.glob == "":
        raise ProtocolError(ExtensionCode.INVALID_MESSAGE, "glob must not be empty; use null")
    cap = min(request.max_entries, wire_limits.DEFAULT_LIST_MAX_ENTRIES)
    path = jail.resolve_existing(request.path)
    if not stat.S_ISDIR(jail.lstat_resolved(path, request.path).st_mode):
        raise ProtocolError(
            ExtensionCode.NOT_A_DIRECTORY,
            f"{request.path}: not a directory, cannot be listed",
            details={"path": request.path},
        )
    dir_fd = jail.open_entry(path, request.path, os.O_RDONLY | os.O_DIRECTORY)
    entries: list[FileEntry] = []
    budget = CONTENT_BUDGET_BYTES
    truncated = False
    try:
        with os_errors_as_protocol_errors(request.path):
            walk = walk_directory(
                dir_fd, path, recursive=request.recursive, include_hidden=request.include_hidden
            )
            try:
                for name, child, status in walk:
                    if request.glob is not None and not fnmatchcase(name, request.glob):
                        continue
                    entry = describe_entry(jail, name, child, status)
                    budget -= len(msgspec.json.encode(entry)) + 1
                    if len(entries) == cap or budget < 0:
                        truncated = True
                        break
                    entries.append(entry)
            finally:
                walk.close()
    finally:
        os.close(dir_fd)
    return FileListResponse(entries=entries, truncated=truncated)
