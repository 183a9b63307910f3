"""FILE_DELETE: unlink a file or symlink, remove a directory (recursively on request)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
from typing import TYPE_CHECKING, Any

from tetherbed.agent.config import Limits
from tetherbed.agent.path_jail import PathJail, protocol_error_from_os_error

if TYPE_CHECKING:
    from tetherbed.agent.files.recycle_bin import RecycleBin
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, FileDelete

# rmtree walks with descriptors and O_NOFOLLOW only where the platform allows;
# the jail relies on that, so refuse to load where it does not hold.
if not shutil.rmtree.avoids_symlink_attacks:
    raise ImportError("recursive delete needs a symlink-attack-safe shutil.rmtree")


class EntrySwapped(OSError):
    """A directory about to be removed was swapped for a symlink after it was
    checked: rmtree refused it (untouched, safely), but says so without an errno."""


def remove_entry(dir_fd: int, name: str, *, recursive: bool) -> None:
    """Remove `name` in `dir_fd`: a symlink itself (never its target), a file, a directory.

    Raises EntrySwapped when the directory, or one below it, became a symlink
    between the check and its removal (found by the path-jail swap property).
    """
    status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(status.st_mode):
        os.unlink(name, dir_fd=dir_fd)
    elif recursive:
        if sys.version_info >= (3, 12):
            shutil.rmtree(name, dir_fd=dir_fd, onexc=_refuse_swapped)
        else:
            shutil.rmtree(name, dir_fd=dir_fd, onerror=_refuse_swapped)
    else:
        os.rmdir(name, dir_fd=dir_fd)


def _refuse_swapped(function: Any, path: str, error: Any) -> None:
    """rmtree's error hook: its "is a symbolic link" refusal (reported through
    `os.path.islink`, the only check it makes that way) becomes EntrySwapped;
    anything else is raised as it was."""
    exc = error[1] if isinstance(error, tuple) else error
    if function is os.path.islink:
        raise EntrySwapped(f"{path} became a symlink while being removed") from exc
    raise exc


def missing_error(wire_path: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.PATH_NOT_FOUND,
        f"{wire_path}: no such file or directory",
        details={"path": wire_path},
    )


def delete_path(
    request: FileDelete, jail: PathJail, limits: Limits, *, recycle_bin: RecycleBin | None = None
) -> Ack:
    """Delete without following a final symlink; the root itself is never deleted.

    With a `recycle_bin` the entry is moved there instead (same rules: a
    non-empty directory needs `recursive: true`)."""
    del limits
    location = jail.locate(request.path, follow_symlinks=False)
    if not location.exists:
        if request.missing_ok:
            return Ack(ok=True)
        raise missing_error(request.path)
    if location.path == jail.root:
        raise jail.root_refusal(request.path, "deleted")
    with jail.opened_parent(location.path, request.path) as (dir_fd, name):
        try:
            if recycle_bin is None:
                remove_entry(dir_fd, name, recursive=request.recursive)
            else:
                if not request.recursive and _non_empty_directory(dir_fd, name):
                    raise OSError(errno.ENOTEMPTY, "directory not empty", request.path)
                recycle_bin.discard(dir_fd, name, location.path, jail.temporaries)
        except FileNotFoundError:
            if not request.missing_ok:  # deleted concurrently
                raise missing_error(request.path) from None
        except EntrySwapped as exc:
            raise jail.changed_error(request.path) from exc
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise ProtocolError(
                    ErrorCode.PATH_NOT_EMPTY,
                    f"{request.path}: directory not empty (set recursive: true to delete it)",
                    details={"path": request.path},
                ) from exc
            raise protocol_error_from_os_error(exc, request.path) from exc
    return Ack(ok=True)


def _non_empty_directory(dir_fd: int, name: str) -> bool:
    status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(status.st_mode):
        return False
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return bool(os.listdir(fd))
    finally:
        os.close(fd)
