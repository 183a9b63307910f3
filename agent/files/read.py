"""FILE_READ: a byte range of a regular file, as UTF-8 text or base64."""

from __future__ import annotations

import os
import stat

from tetherbed.agent.config import Limits
from tetherbed.agent.files.content_encoding import (
    check_frame_room,
    encode_content,
    is_text,
    too_large,
)
from tetherbed.agent.path_jail import PathJail, os_errors_as_protocol_errors
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import FileContents, FileRead

# O_NONBLOCK: should a FIFO replace the file after the kind check, opening it
# must not hang the worker; it is then refused after fstat.
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK


def read_range(fd: int, offset: int, length: int) -> bytes:
    """Read up to `length` bytes at `offset`; shorter only at end of file."""
    chunks: list[bytes] = []
    remaining = length
    while remaining > 0:
        chunk = os.pread(fd, remaining, offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def require_regular_file(status: os.stat_result, wire_path: str) -> None:
    """Only regular files are read: devices and sockets are not even opened."""
    if not stat.S_ISREG(status.st_mode):
        kind = "a directory" if stat.S_ISDIR(status.st_mode) else "not a regular file"
        raise ProtocolError(
            ExtensionCode.NOT_A_FILE,
            f"{wire_path}: {kind}, cannot be read",
            details={"path": wire_path},
        )


def read_file(request: FileRead, jail: PathJail, limits: Limits) -> FileContents:
    """Read `length` bytes from `offset` (None: to end of file).

    The range is sized from fstat before any byte is read: a whole-file read of
    a file over the limit, or a requested length over it, is FILE_TOO_LARGE,
    while a bounded range of a larger file is fine.
    """
    as_text = is_text(request.encoding, request.format)
    limit = limits.max_file_size_bytes
    if request.length is not None and request.length > limit:
        raise too_large(request.path, request.length, limit, "requested range")
    path = jail.resolve_existing(request.path)
    require_regular_file(jail.lstat_resolved(path, request.path), request.path)
    fd = jail.open_entry(path, request.path, _READ_FLAGS)
    try:
        with os_errors_as_protocol_errors(request.path):
            status = os.fstat(fd)
            require_regular_file(status, request.path)  # it may have been swapped meanwhile
            size = status.st_size
            available = max(0, size - request.offset)
            wanted = available if request.length is None else min(request.length, available)
            if wanted > limit:
                what = "file" if request.offset == 0 else "rest of the file"
                raise too_large(request.path, wanted, limit, what)
            check_frame_room(wanted, as_text=as_text, wire_path=request.path)
            data = read_range(fd, request.offset, wanted)
    finally:
        os.close(fd)
    content = encode_content(data, as_text=as_text, wire_path=request.path)
    return FileContents(
        content=content,
        encoding=request.encoding,
        size_bytes=len(data),
        truncated=request.offset + len(data) < size,
    )
