"""FILE_DELETE: unlink a file or symlink, remove a directory (recursively on request)."""

from __future__ import annotations

import errno
import os
import shutil
import stat

from tetherbed.agent.config import Limits
from tetherbed.agent.path_jail import PathJail, protocol_error_from_os_error
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, FileDelete

# rmtree walks with descriptors and O_NOFOLLOW only where the platform allows;
# the jail relies on that, so refuse to load where it does not hold.
if not shutil.rmtree.avoids_symlink_attacks:
    raise ImportError("recursive delete needs a symlink-attack-safe shutil.rmtree")


def remove_entry(dir_fd: int, name: str, *, recursive: bool) -> None:
    """Remove `name` in `dir_fd`: a symlink itself (never its target), a file, a directory."""
    status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(status.st_mode):
        os.unlink(name, dir_fd=dir_fd)
    elif recursive:
        shutil.rmtree(name, dir_fd=dir_fd)
    else:
        os.rmdir(name, dir_fd=dir_fd)


def missing_error(wire_path: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.PATH_NOT_FOUND,
        f"{wire_path}: no such file or directory",
        details={"path": wire_path},
    )


def delete_path(request: FileDelete, jail: PathJail, limits: Limits) -> Ack:
    """Delete without following a final symlink; the root itself is never deleted."""
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
            remove_entry(dir_fd, name, recursive=request.recursive)
        except FileNotFoundError:
            if not request.missing_ok:  # deleted concurrently
                raise missing_error(request.path) from None
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise ProtocolError(
                    ErrorCode.PATH_NOT_EMPTY,
                    f"{request.path}: directory not empty (set recursive: true to delete it)",
                    details={"path": request.path},
                ) from exc
            raise protocol_error_from_os_error(exc, request.path) from exc
    return Ack(ok=True)
