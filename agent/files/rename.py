"""Renaming one entry to another inside verified directories, with or without replace.

"Do not replace" must not be check-then-rename: another writer could create
the destination in between. Linux has renameat2(RENAME_NOREPLACE), which the
standard library does not expose, so it is called through ctypes; where the
file system lacks it, a hard link (which fails if the name exists) plus unlink
is the atomic fallback for non-directories.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Callable

RENAME_NOREPLACE = 1

_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP})


def _load_renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


# Bound once at import and never reassigned: a function pointer, not state.
_RENAMEAT2 = _load_renameat2()


def rename_no_replace_native(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> bool:
    """renameat2(RENAME_NOREPLACE); False when the kernel or file system lacks it."""
    if _RENAMEAT2 is None:
        return False
    result = _RENAMEAT2(
        src_dir_fd, os.fsencode(src), dst_dir_fd, os.fsencode(dst), RENAME_NOREPLACE
    )
    if result == 0:
        return True
    error = ctypes.get_errno()
    if error in _UNSUPPORTED:
        return False
    raise OSError(error, os.strerror(error), dst)


def _rename_no_replace_fallback(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str) -> None:
    status = os.stat(src, dir_fd=src_dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(status.st_mode):
        try:
            os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
                raise  # EEXIST included: the destination exists
        else:
            os.unlink(src, dir_fd=src_dir_fd)
            return
    # Last resort (directories, or no hard links here): a narrow check-then-rename.
    try:
        os.stat(dst, dir_fd=dst_dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        return
    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)


def rename_entry(src_dir_fd: int, src: str, dst_dir_fd: int, dst: str, *, replace: bool) -> None:
    """Rename `src` to `dst`; with `replace` an existing `dst` is swapped atomically.

    Without `replace`, an existing `dst` raises FileExistsError. EXDEV is left
    to the caller, which knows how to copy across devices.
    """
    if replace:
        os.rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    elif not rename_no_replace_native(src_dir_fd, src, dst_dir_fd, dst):
        _rename_no_replace_fallback(src_dir_fd, src, dst_dir_fd, dst)
