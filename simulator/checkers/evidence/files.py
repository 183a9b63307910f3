"""What client operations did to files, as seen from the client side.

Shared by no_crossed_answers (is a read's content one this path could hold?)
and file_contents (is a final file what acknowledged writes imply?). Contents
are compared as bytes, so a write sent base64 and read back as utf-8 (or the
other way round) still matches.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tetherbed.simulator.checkers.evidence.operations import Operation
from tetherbed.simulator.checkers.evidence.records import text

#: The effect is unknown (a move into the path, a command that names it).
WILD = object()
#: The effect is "the file does not exist".
ABSENT = object()
#: Kinds whose effect on a path the checkers model.
WRITE, DELETE, MOVE, COMMAND = "FILE_WRITE", "FILE_DELETE", "FILE_MOVE", "EXECUTE_COMMAND"
#: initial_files: None (unknown), or session → path → content / path → content.
InitialFiles = Mapping[str, Any] | None
#: file_systems: session → the name of the disk it writes to. Sessions served
#: from one machine root share files; by default each session has its own.
FileSystems = Mapping[str, str] | None


def disk_of(session: str | None, systems: FileSystems) -> str | None:
    if systems is None or session is None:
        return session
    found = systems.get(session)
    return found if isinstance(found, str) else session


def norm_path(path: Any) -> str | None:
    """One spelling per path: forward slashes, no `./`, no `a/../`."""
    if not isinstance(path, str) or not path:
        return None
    return posixpath.normpath(path.replace("\\", "/"))


def to_bytes(content: Any, encoding: Any = "utf-8") -> bytes | None:
    """A payload's content as bytes; None when there is no content."""
    if not isinstance(content, str):
        return None
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            pass
    return content.encode("utf-8", "surrogatepass")


def digest_matches(digest: Any, data: bytes) -> bool:
    """A hex digest (any prefix length) of sha256(data)."""
    if not isinstance(digest, str) or not digest:
        return False
    return hashlib.sha256(data).hexdigest().startswith(digest.lower())


@dataclass(frozen=True, slots=True)
class Effect:
    """What one operation may have done to one path of one disk."""

    op: Operation
    disk: str | None
    path: str
    value: object  # bytes, ABSENT or WILD

    @property
    def session(self) -> str | None:
        return self.op.invoke.session


def effects(ops: list[Operation], systems: FileSystems = None) -> list[Effect]:
    """Per operation, its possible effects on file contents."""
    found: list[Effect] = []
    for op in ops:
        session = disk_of(op.invoke.session, systems)
        payload = op.payload
        if op.kind == WRITE:
            path = norm_path(payload.get("path"))
            data = to_bytes(payload.get("content"), payload.get("encoding"))
            if path is not None:
                found.append(Effect(op, session, path, WILD if data is None else data))
        elif op.kind == DELETE:
            path = norm_path(payload.get("path"))
            if path is not None:
                found.append(Effect(op, session, path, ABSENT))
        elif op.kind == MOVE:
            src, dst = norm_path(payload.get("src")), norm_path(payload.get("dst"))
            if src is not None:
                found.append(Effect(op, session, src, ABSENT))
            if dst is not None:
                found.append(Effect(op, session, dst, WILD))
    return found


def commands_naming(
    ops: list[Operation], disk: str | None, path: str, systems: FileSystems = None
) -> list[Operation]:
    """Shell commands on that disk whose text names the file: they may touch it."""
    name = posixpath.basename(path)
    named: list[Operation] = []
    for op in ops:
        if op.kind != COMMAND or op.outcome == "fail":
            continue
        if disk_of(op.invoke.session, systems) != disk:
            continue
        payload = op.payload
        words = [text(payload.get("command")) or ""]
        argv = payload.get("argv")
        if isinstance(argv, list):
            words += [w for w in argv if isinstance(w, str)]
        if name and any(name in word for word in words):
            named.append(op)
    return named


def initial_content(initial: InitialFiles, session: str | None, path: str) -> object:
    """bytes, ABSENT (known not to exist) or WILD (unknown)."""
    if initial is None:
        return WILD
    scoped = initial.get(session) if isinstance(session, str) else None
    table = scoped if isinstance(scoped, Mapping) else initial
    for name, content in table.items():
        if norm_path(name) == path:
            if isinstance(content, Mapping):
                continue  # another session's table, not a file
            if content is None:
                return ABSENT
            data = to_bytes(content) if isinstance(content, str) else None
            return WILD if data is None else data
    return ABSENT


def preview(value: object, limit: int = 32) -> str:
    """A content as a person reads it in a summary."""
    if value is ABSENT:
        return "(absent)"
    if value is WILD:
        return "(unknown)"
    assert isinstance(value, bytes)
    shown = repr(value.decode("utf-8", "replace"))
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
