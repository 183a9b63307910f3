"""Strict re-resolution and fingerprints of the directories a session may own.

A fingerprint names one directory object, not just a path: deleting a folder
and creating another with the same name yields a different fingerprint, so a
grant or binding made for the first can never silently cover the second.

Exact definition (lowercase hex, 64 characters)::

    sha256( b"tetherbed/directory-fingerprint/v1" 0x00
            fsencode(canonical_path)               0x00
            ascii(decimal st_dev)                  0x00
            ascii(decimal st_ino) )

`st_dev` and `st_ino` come from `lstat` of the canonical path. They identify
the directory on this machine only, which is all a grant needs: grants are
bound to one machine id anyway.
"""

from __future__ import annotations

import hashlib
import os
import stat

from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError

FINGERPRINT_LABEL = b"tetherbed/directory-fingerprint/v1"


def resolve_directory(path: str) -> os.stat_result:
    """The `lstat` of `path`, which must still be a canonical, real, accessible
    directory: absolute, normalised, no symlink or junction anywhere in it
    (`realpath(path) == path`). Anything else is DIRECTORY_UNAVAILABLE."""
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        raise _unavailable(path, "is not a canonical absolute path")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise _unavailable(path, "no longer exists") from None
    except OSError as exc:
        raise _unavailable(path, f"cannot be inspected ({exc.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise _unavailable(path, "has become a symlink")
    if not stat.S_ISDIR(info.st_mode):
        raise _unavailable(path, "is no longer a directory")
    if os.path.realpath(path) != path:
        raise _unavailable(path, "is reached through a symlink")
    if not os.access(path, os.R_OK | os.X_OK):
        raise _unavailable(path, "is not accessible")
    return info


def compute(path: str, info: os.stat_result) -> str:
    """The fingerprint of `path` whose `lstat` is `info` (no file system access)."""
    digest = hashlib.sha256()
    digest.update(FINGERPRINT_LABEL + b"\0")
    digest.update(os.fsencode(path) + b"\0")
    digest.update(f"{info.st_dev}\0{info.st_ino}".encode("ascii"))
    return digest.hexdigest()


def fingerprint(path: str) -> str:
    """Strictly re-resolve `path` and fingerprint it (DIRECTORY_UNAVAILABLE)."""
    return compute(path, resolve_directory(path))


def is_fingerprint(text: object) -> bool:
    """64 lowercase hex characters."""
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _unavailable(path: str, why: str) -> ProtocolError:
    return ProtocolError(ErrorCode.DIRECTORY_UNAVAILABLE, f"directory {path} {why}")
