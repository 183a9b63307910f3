"""Result objects of the hub client, shaped like E2B's so platforms can duck-type.

E2B names are kept (`EntryInfo.size`, `modified_time`, `CommandResult.exit_code`,
`FileType.DIR`); fields the local-executor wire adds (`is_symlink`,
`timed_out`, `output_truncated`, ...) come after them.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, NamedTuple

from tetherbed.wire.messages import CommandResult as WireCommandResult
from tetherbed.wire.messages import FileEntry, FileStatResponse


class Frame(NamedTuple):
    """One answer frame: its type and decoded payload.

    `payload` is the wire model (a msgspec Struct) for known types and a plain
    dict for types this version does not know. Unpacks as `(type, payload)`.
    """

    type: str
    payload: Any


class FileType(Enum):
    FILE = "file"
    DIR = "dir"


@dataclass(frozen=True, kw_only=True, slots=True)
class WriteInfo:
    """What `files.write` wrote. The ACK carries nothing, so this echoes the request."""

    name: str
    type: FileType | None
    path: str


@dataclass(frozen=True, kw_only=True, slots=True)
class EntryInfo(WriteInfo):
    """One file system entry, from FILE_LIST or FILE_STAT.

    `owner`/`group` are numeric ids as text (as `ls -n` shows them); they,
    `mode` and `permissions` are None when the wire did not carry them
    (FILE_LIST entries, Windows agents). `type` is None for anything that is
    neither a regular file nor a directory (a dangling link, a socket).
    """

    size: int
    modified_time: datetime | None
    is_symlink: bool = False
    symlink_target: str | None = None
    mode: int | None = None
    permissions: str | None = None
    owner: str | None = None
    group: str | None = None
    mime_type: str | None = None


class EntryList(list[EntryInfo]):
    """The entries of `files.list`; `truncated` is True when the agent stopped
    at `max_entries`, so the list is incomplete."""

    truncated: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class CommandResult:
    """The outcome of `commands.run`, E2B's fields first.

    `error` is None on exit code 0, "exit status N" otherwise, and names the
    timeout when the agent killed the command (then `exit_code` is -1).
    """

    stdout: str
    stderr: str
    exit_code: int
    error: str | None
    timed_out: bool = False
    output_truncated: bool = False
    duration_seconds: float = 0.0


def file_type(is_file: bool | None, is_dir: bool | None) -> FileType | None:
    if is_dir:
        return FileType.DIR
    if is_file:
        return FileType.FILE
    return None


def base_name(path: str) -> str:
    """The last component of a POSIX or Windows path, ignoring trailing separators."""
    trimmed = path.rstrip("/\\")
    if not trimmed:
        return path
    return trimmed.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]


def timestamp(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


def parse_mode(mode: str | None) -> int | None:
    """The spec sends mode as POSIX octal text ("0644"); None if absent or garbled."""
    if not mode:
        return None
    try:
        return int(mode, 8)
    except ValueError:
        return None


def permissions_text(mode: int | None) -> str | None:
    """ "rw-r--r--" for 0o644, as E2B's `permissions` field shows it."""
    return None if mode is None else stat.filemode(mode)[1:]


def entry_from_list(entry: FileEntry) -> EntryInfo:
    return EntryInfo(
        name=entry.name,
        type=file_type(entry.is_file, entry.is_dir),
        path=entry.path,
        size=entry.size_bytes,
        modified_time=timestamp(entry.mtime),
        is_symlink=entry.is_symlink,
    )


def entry_from_stat(
    response: FileStatResponse, requested_path: str, symlink_target: str | None = None
) -> EntryInfo:
    path = response.path or requested_path
    mode = parse_mode(response.mode)
    return EntryInfo(
        name=base_name(path),
        type=file_type(response.is_file, response.is_dir),
        path=path,
        size=response.size_bytes or 0,
        modified_time=timestamp(response.mtime),
        is_symlink=bool(response.is_symlink),
        symlink_target=symlink_target,
        mode=mode,
        permissions=permissions_text(mode),
        owner=None if response.owner_uid is None else str(response.owner_uid),
        group=None if response.owner_gid is None else str(response.owner_gid),
        mime_type=response.mime_type,
    )


def command_result(result: WireCommandResult) -> CommandResult:
    if result.timed_out:
        error: str | None = f"command timed out after {result.duration_seconds:g}s"
    elif result.exit_code != 0:
        error = f"exit status {result.exit_code}"
    else:
        error = None
    return CommandResult(
        stdout=result.stdout,
        stderr=result.stderr,
        exit_code=result.exit_code,
        error=error,
        timed_out=result.timed_out,
        output_truncated=result.output_truncated,
        duration_seconds=result.duration_seconds,
    )
