"""FILE_WRITE: replace a file's content atomically, optionally creating parents."""

from __future__ import annotations

import os
import stat

from tetherbed.agent.config import Limits
from tetherbed.agent.files.atomic import replace_file
from tetherbed.agent.files.content_encoding import decode_content, is_text
from tetherbed.agent.path_jail import PathJail, os_errors_as_protocol_errors
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import Ack, FileWrite


def not_a_file(wire_path: str) -> ProtocolError:
    return ProtocolError(
        ExtensionCode.NOT_A_FILE,
        f"{wire_path}: is a directory, cannot be written as a file",
        details={"path": wire_path},
    )


def write_file(request: FileWrite, jail: PathJail, limits: Limits) -> Ack:
    """Decode (size first), jail-check, then temp-write + fsync + rename.

    A symlink inside the root is written through (its target replaced, the link
    kept); one that leads outside is PATH_OUTSIDE_ALLOWED_ROOT.
    """
    as_text = is_text(request.encoding, request.format)
    data = decode_content(
        request.content,
        as_text=as_text,
        limit=limits.max_file_size_bytes,
        wire_path=request.path,
    )
    target = jail.resolve_for_create(request.path, create_parents=request.create_parents)
    if target.exists and os.path.isdir(target.path):
        raise not_a_file(request.path)
    dir_fd = jail.open_parent_for_create(target)
    try:
        with os_errors_as_protocol_errors(request.path):
            current = _lstat_or_none(dir_fd, target.name)
            if current is not None and stat.S_ISDIR(current.st_mode):
                raise not_a_file(request.path)
            replace_file(
                dir_fd,
                target.name,
                data,
                directory=os.path.dirname(target.path),
                ledger=jail.temporaries,
            )
    finally:
        os.close(dir_fd)
    return Ack(ok=True)


def _lstat_or_none(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
