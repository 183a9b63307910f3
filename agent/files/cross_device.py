"""Moving across devices, where rename() fails with EXDEV: copy, rename, delete.

The copy goes to a hidden temp name in the destination directory and is renamed
into place only once complete, so the destination never shows a partial tree.
The source is deleted last; until then a failure leaves it untouched. All work
is relative to verified directory descriptors and never follows symlinks: links
are copied as links.
"""

from __future__ import annotations

import os
import stat

from tetherbed.agent.files.atomic import write_all
from tetherbed.agent.files.delete import remove_entry
from tetherbed.agent.files.rename import rename_entry
from tetherbed.agent.temporaries import TemporaryLedger, temp_name
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError

_CHUNK_BYTES = 1024 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _copy_times_and_mode(fd: int, status: os.stat_result) -> None:
    os.fchmod(fd, stat.S_IMODE(status.st_mode))
    os.utime(fd, ns=(status.st_atime_ns, status.st_mtime_ns))


def _copy_file(src_dir_fd: int, name: str, dst_dir_fd: int, new_name: str) -> None:
    source = os.open(name, _READ_FLAGS, dir_fd=src_dir_fd)
    try:
        status = os.fstat(source)
        target = os.open(new_name, _CREATE_FLAGS, 0o600, dir_fd=dst_dir_fd)
        try:
            while chunk := os.read(source, _CHUNK_BYTES):
                write_all(target, chunk)
            _copy_times_and_mode(target, status)
            os.fsync(target)
        finally:
            os.close(target)
    finally:
        os.close(source)


def _copy_directory(src_dir_fd: int, name: str, dst_dir_fd: int, new_name: str) -> None:
    source = os.open(name, _DIRECTORY_FLAGS, dir_fd=src_dir_fd)
    try:
        status = os.fstat(source)
        os.mkdir(new_name, 0o700, dir_fd=dst_dir_fd)
        target = os.open(new_name, _DIRECTORY_FLAGS, dir_fd=dst_dir_fd)
        try:
            for child in sorted(os.listdir(source)):
                copy_entry(source, child, target, child)
            _copy_times_and_mode(target, status)
        finally:
            os.close(target)
    finally:
        os.close(source)


def copy_entry(src_dir_fd: int, name: str, dst_dir_fd: int, new_name: str) -> None:
    """Copy a file, a symlink (as a link) or a directory tree; other kinds are refused."""
    status = os.stat(name, dir_fd=src_dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(status.st_mode):
        os.symlink(os.readlink(name, dir_fd=src_dir_fd), new_name, dir_fd=dst_dir_fd)
    elif stat.S_ISREG(status.st_mode):
        _copy_file(src_dir_fd, name, dst_dir_fd, new_name)
    elif stat.S_ISDIR(status.st_mode):
        _copy_directory(src_dir_fd, name, dst_dir_fd, new_name)
    else:
        raise ProtocolError(
            ExtensionCode.NOT_A_FILE,
            f"{name}: a special file (device, FIFO or socket) cannot be moved across devices",
            details={"name": name},
        )


def move_across_devices(
    src_dir_fd: int,
    src: str,
    dst_dir_fd: int,
    dst: str,
    *,
    replace: bool,
    dst_directory: str,
    ledger: TemporaryLedger,
) -> None:
    """Copy `src` to a temp name beside `dst`, rename it into place, then delete `src`.

    The copy is in the ledger while it has its temp name, so a copy cut short
    by a crash is removed when the next agent starts.
    """
    temp = temp_name()
    with ledger.holding(dst_directory, temp):
        try:
            copy_entry(src_dir_fd, src, dst_dir_fd, temp)
            rename_entry(dst_dir_fd, temp, dst_dir_fd, dst, replace=replace)
        except BaseException:
            try:
                remove_entry(dst_dir_fd, temp, recursive=True)
            except FileNotFoundError:
                pass
            raise
    remove_entry(src_dir_fd, src, recursive=True)
