"""Atomic replacement of a file: temp file in the same directory, fsync, rename.

A reader opening the target sees either the old content or the new, never a
mix. Everything happens relative to a verified directory descriptor, so a
directory swapped for a symlink mid-write cannot redirect the data.
"""

from __future__ import annotations

import os
import secrets
import stat

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def temp_name() -> str:
    """A fresh hidden name, short enough for any file system's NAME_MAX."""
    return f".tetherbed-{secrets.token_hex(8)}.tmp"


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


def replace_file(dir_fd: int, name: str, data: bytes) -> None:
    """Atomically make `name` in `dir_fd` hold exactly `data`.

    An existing file keeps its permission bits (a new inode: owner, ACLs and
    hard links are not carried over). New files get 0o666 less the umask. The
    temp file is removed on any failure.
    """
    mode = existing_mode(dir_fd, name)
    temp = temp_name()
    fd = os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=dir_fd)
    try:
        try:
            write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    os.fsync(dir_fd)  # make the rename itself durable
