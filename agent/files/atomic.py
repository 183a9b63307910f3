"""Atomic replacement of a file: unnamed temp file in the same directory, fsync, rename.

A reader opening the target sees either the old content or the new, never a
mix. Everything happens relative to a verified directory descriptor, so a
directory swapped for a symlink mid-write cannot redirect the data.

The data is written into an O_TMPFILE file, which has no name: if the agent is
killed meanwhile, the kernel frees it and nothing is left in the user's tree.
It is given a temporary name (`linkat` through /proc/self/fd) only to be renamed
over the target a moment later, and that name is in the ledger while it exists
(`agent/temporaries.py`). Where the file system has no O_TMPFILE, a named temporary is
created instead, recorded in the ledger from before it exists.
"""

from __future__ import annotations

import errno
import os
import stat

from tetherbed.agent.temporaries import TemporaryLedger, temp_name

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_UNNAMED_FLAGS = os.O_WRONLY | os.O_CLOEXEC | getattr(os, "O_TMPFILE", 0)
#: open(O_TMPFILE) errors that mean "not here", not "failed".
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT})
_NOBODY = TemporaryLedger(None)
#: Unnamed files can be given a name only through /proc/self/fd (linkat with
#: AT_EMPTY_PATH needs a privilege).
_CAN_NAME_UNNAMED = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write may write less than asked; loop until everything is written."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def existing_mode(dir_fd: int, name: str) -> int | None:
    """Permission bits of an existing regular file to keep, or None."""
    try:
        status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(status.st_mode) if stat.S_ISREG(status.st_mode) else None


def replace_file(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    directory: str = "",
    ledger: TemporaryLedger = _NOBODY,
) -> None:
    """Atomically make `name` in `dir_fd` (whose canonical path is `directory`) hold `data`.

    An existing file keeps its permission bits (a new inode: owner, ACLs and
    hard links are not carried over). New files get 0o666 less the umask. No
    temporary outlives a failure, and none outlives a crash (see the module).
    """
    mode = existing_mode(dir_fd, name)
    fd = _open_unnamed(dir_fd)
    if fd is None:
        _replace_through_named(dir_fd, name, data, mode=mode, directory=directory, ledger=ledger)
    else:
        try:
            _fill(fd, data, mode)
            temp = temp_name()
            with ledger.holding(directory, temp):
                os.link(f"/proc/self/fd/{fd}", temp, dst_dir_fd=dir_fd, follow_symlinks=True)
                _rename_or_remove(dir_fd, temp, name)
        finally:
            os.close(fd)
    os.fsync(dir_fd)  # make the rename itself durable


def _open_unnamed(dir_fd: int) -> int | None:
    """An O_TMPFILE file in `dir_fd`, or None where that is not available."""
    if not _CAN_NAME_UNNAMED:
        return None
    try:
        return os.open(".", _UNNAMED_FLAGS, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _NO_TMPFILE:
            return None
        raise


def _fill(fd: int, data: bytes, mode: int | None) -> None:
    write_all(fd, data)
    if mode is not None:
        os.fchmod(fd, mode)
    os.fsync(fd)


def _replace_through_named(
    dir_fd: int,
    name: str,
    data: bytes,
    *,
    mode: int | None,
    directory: str,
    ledger: TemporaryLedger,
) -> None:
    temp = temp_name()
    with ledger.holding(directory, temp):
        fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=dir_fd)
        try:
            try:
                _fill(fd, data, mode)
            finally:
                os.close(fd)
        except BaseException:
            _unlink_quietly(dir_fd, temp)
            raise
        _rename_or_remove(dir_fd, temp, name)


def _rename_or_remove(dir_fd: int, temp: str, name: str) -> None:
    try:
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        _unlink_quietly(dir_fd, temp)
        raise


def _unlink_quietly(dir_fd: int, temp: str) -> None:
    try:
        os.unlink(temp, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
