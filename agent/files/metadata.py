"""FILE_STAT: metadata of a path, in place of `ls -la`, `stat` and `test -e`."""

from __future__ import annotations

import mimetypes
import stat

from tetherbed.agent.config import Limits
from tetherbed.agent.path_jail import PathJail
from tetherbed.wire.messages import FileStat, FileStatResponse

# Built once at import and only read afterwards, so threads can share it; the
# module-level mimetypes functions initialise lazily, which is not thread-safe.
_MIME_TYPES = mimetypes.MimeTypes()


def octal_mode(mode: int) -> str:
    """Permission bits, setuid/setgid/sticky included, as POSIX octal: "0644"."""
    return f"{stat.S_IMODE(mode):04o}"


def guess_mime_type(path: str) -> str | None:
    return _MIME_TYPES.guess_type(path, strict=False)[0]


def stat_path(request: FileStat, jail: PathJail, limits: Limits) -> FileStatResponse:
    """Stat a path; a jail violation is an ERROR, never `exists: false`.

    `is_symlink` describes the path as given (lstat), while the other fields
    describe what it leads to when following. Without following, a symlink
    inside the root is described itself, wherever it points.
    """
    del limits  # no size limit applies to metadata
    location = jail.locate(request.path, follow_symlinks=request.follow_symlinks)
    if not location.exists:
        return FileStatResponse(exists=False, path=location.path)
    status = jail.lstat_entry(location.path, request.path)
    is_symlink = stat.S_ISLNK(status.st_mode)
    if request.follow_symlinks:
        given = jail.locate(request.path, follow_symlinks=False)
        is_symlink = given.exists and stat.S_ISLNK(
            jail.lstat_entry(given.path, request.path).st_mode
        )
    is_file = stat.S_ISREG(status.st_mode)
    return FileStatResponse(
        exists=True,
        is_file=is_file,
        is_dir=stat.S_ISDIR(status.st_mode),
        is_symlink=is_symlink,
        size_bytes=status.st_size,
        mtime=status.st_mtime,
        ctime=status.st_ctime,
        mode=octal_mode(status.st_mode),
        owner_uid=status.st_uid,
        owner_gid=status.st_gid,
        mime_type=guess_mime_type(location.path) if is_file else None,
        path=location.path,
    )
