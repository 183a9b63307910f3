"""FILE_MOVE: rename within the root, atomic where the OS allows, copy across devices."""

from __future__ import annotations

import errno
import os

from tetherbed.agent.config import Limits
from tetherbed.agent.files.cross_device import move_across_devices
from tetherbed.agent.files.delete import EntrySwapped
from tetherbed.agent.files.rename import rename_entry
from tetherbed.agent.path_jail import CreateTarget, PathJail, protocol_error_from_os_error
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, FileMove


def _exists_error(request: FileMove, reason: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.PATH_EXISTS,
        f"{request.dst}: {reason}",
        details={"src": request.src, "dst": request.dst},
    )


def _rename_error(exc: OSError, request: FileMove) -> ProtocolError:
    """Name the endpoint an OS error is about: the destination for clashes, else the source."""
    if exc.errno == errno.EEXIST:
        return _exists_error(request, "already exists (set overwrite: true to replace it)")
    if exc.errno in (errno.EISDIR, errno.ENOTDIR):
        return _exists_error(request, "exists and is of another kind (file vs directory)")
    if exc.errno == errno.ENOTEMPTY:
        return ProtocolError(
            ErrorCode.PATH_NOT_EMPTY,
            f"{request.dst}: is a non-empty directory and cannot be replaced",
            details={"src": request.src, "dst": request.dst},
        )
    error = protocol_error_from_os_error(exc, request.src)
    error.details = {**(error.details or {}), "src": request.src, "dst": request.dst}
    return error


def move_path(request: FileMove, jail: PathJail, limits: Limits) -> Ack:
    """Move `src` (a symlink is moved itself) to `dst`, both inside the root.

    Without `overwrite`, an existing `dst` is PATH_EXISTS, decided atomically by
    the rename itself; with it, `dst` is replaced in one rename. A cross-device
    move falls back to copy + rename + delete.
    """
    del limits
    src = jail.resolve_existing(request.src, follow_symlinks=False)
    if src == jail.root:
        raise jail.root_refusal(request.src, "moved")
    dst = jail.resolve_for_create(request.dst, create_parents=False, follow_symlinks=False)
    if dst.path == jail.root:
        raise jail.root_refusal(request.dst, "replaced")
    if dst.path.startswith(src + "/"):
        raise ProtocolError(
            ExtensionCode.INVALID_MESSAGE,
            f"cannot move {request.src} into itself ({request.dst})",
            details={"src": request.src, "dst": request.dst, "reason": "into_itself"},
        )
    if dst.exists and not request.overwrite:
        raise _exists_error(request, "already exists (set overwrite: true to replace it)")
    with jail.opened_parent(src, request.src) as (src_dir_fd, src_name):
        dst_dir_fd = jail.open_parent_for_create(dst)
        try:
            _move(src_dir_fd, src_name, dst_dir_fd, dst, request=request, jail=jail)
        except EntrySwapped as exc:  # a cross-device move's delete of the source
            raise jail.changed_error(request.src) from exc
        except OSError as exc:
            raise _rename_error(exc, request) from exc
        finally:
            os.close(dst_dir_fd)
    return Ack(ok=True)


def _move(
    src_dir_fd: int,
    src: str,
    dst_dir_fd: int,
    target: CreateTarget,
    *,
    request: FileMove,
    jail: PathJail,
) -> None:
    dst = target.name
    if request.overwrite and _same_file_under_two_names(src_dir_fd, src, dst_dir_fd, dst):
        # rename() between two hard links of one file does nothing; finish the move.
        os.unlink(src, dir_fd=src_dir_fd)
        return
    try:
        rename_entry(src_dir_fd, src, dst_dir_fd, dst, replace=request.overwrite)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        move_across_devices(
            src_dir_fd,
            src,
            dst_dir_fd,
            dst,
            replace=request.overwrite,
            dst_directory=os.path.dirname(target.path),
            ledger=jail.temporaries,
        )


def _same_file_under_two_names(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
    try:
        dst_status = os.stat(dst, dir_fd=dst_dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    src_status = os.stat(src, dir_fd=src_dir_fd, follow_symlinks=False)
    same_name = os.path.samestat(os.fstat(src_dir_fd), os.fstat(dst_dir_fd)) and src == dst
    return os.path.samestat(src_status, dst_status) and not same_name
