"""Remote file operations of `fs` events (§11.3), with the spec's limits.

Every function takes the event's data and returns the result fields (the
driver adds `requestId`). Paths must be absolute; relative glob patterns and
grep roots start at the agent's workspace base (§11.6.1). Limits are checked
before memory is spent: a read never loads more than the limit (+1 byte to
know it was cut), a write's decoded size is checked before anything is
written. Errors carry the OS error text in Node's style
("ENOENT: no such file or directory, open '/x'"), which is what the spec's
agent reports and what the hub shows the model.

Blocking calls: the driver runs them in a worker thread under the 15 s
per-request deadline; long walks (glob, grep) also check `deadline`
themselves so that a timed-out walk stops.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import fnmatch
import glob as globbing
import os
import re
import shutil
import stat as stat_mod
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tetherbed.wire.dsh import constants as C

Result = dict[str, Any]


class FsError(Exception):
    """`ok: false` with this message."""


def _os_error(exc: OSError, op: str, path: str) -> FsError:
    code = errno.errorcode.get(exc.errno or 0, "EIO")
    reason = (exc.strerror or str(exc)).lower()
    return FsError(f"{code}: {reason}, {op} '{path}'")


def _absolute(value: Any, field: str = "path") -> str:
    if not isinstance(value, str) or not value:
        raise FsError(f"{field} is required")
    if "\0" in value:
        raise FsError(f"{field} must not contain NUL")
    if not os.path.isabs(value):
        raise FsError("path must be absolute")
    return value


def _kind(mode: int) -> str:
    if stat_mod.S_ISLNK(mode):
        return "symlink"
    if stat_mod.S_ISDIR(mode):
        return "dir"
    return "file"


def _entry(path: str, info: os.stat_result) -> dict[str, Any]:
    return {
        "name": os.path.basename(path.rstrip("/")) or path,
        "path": path,
        "type": _kind(info.st_mode),
        "size": info.st_size,
        "mtimeMs": round(info.st_mtime * 1000, 3),
    }


def _int(value: Any, default: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return max(low, min(int(value), high))


# --- operations -----------------------------------------------------------------


def op_read(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    path = _absolute(request.get("path"))
    encoding = request.get("encoding") or "utf8"
    try:
        info = os.stat(path)
        if stat_mod.S_ISDIR(info.st_mode):
            raise FsError(f"EISDIR: illegal operation on a directory, read '{path}'")
        if not stat_mod.S_ISREG(info.st_mode):
            raise FsError(f"not a regular file: '{path}'")
        with open(path, "rb") as handle:
            if encoding == "base64":
                offset = _int(request.get("offset"), 0, 0, 1 << 62)
                limit = _int(request.get("limit"), C.FS_READ_MAX_BYTES, 0, C.FS_READ_MAX_BYTES)
                handle.seek(offset)
                data = handle.read(limit + 1)
                truncated = len(data) > limit
                data = data[:limit]
                return {
                    "content": base64.b64encode(data).decode("ascii"),
                    "encoding": "base64",
                    "bytes": len(data),
                    "truncated": truncated,
                }
            if encoding not in ("utf8", "utf-8"):
                raise FsError(f"encoding must be utf8 or base64, not {encoding!r}")
            return _read_lines(handle, path, request)
    except OSError as exc:
        raise _os_error(exc, "open", path) from None


def _read_lines(handle: Any, path: str, request: dict[str, Any]) -> Result:
    offset = _int(request.get("offset"), 0, 0, 1 << 62)
    limit = _int(request.get("limit"), C.FS_READ_DEFAULT_LINES, 1, C.FS_READ_MAX_LINES)
    kept: list[bytes] = []
    size = 0
    truncated = False
    for index, line in enumerate(iter(lambda: handle.readline(C.FS_READ_MAX_BYTES + 1), b"")):
        if index < offset:
            continue
        if len(kept) == limit or size + len(line) > C.FS_READ_MAX_BYTES:
            truncated = True
            break
        kept.append(line)
        size += len(line)
    raw = b"".join(kept)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FsError(f"'{path}' is not UTF-8 text; read it with encoding base64") from None
    return {
        "text": text,
        "encoding": "utf8",
        "bytes": len(raw),
        "lines": len(kept),
        "truncated": truncated,
    }


def op_write(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    path = _absolute(request.get("path"))
    content = request.get("content", "")
    if not isinstance(content, str):
        raise FsError("content must be a string")
    if request.get("encoding") in ("utf8", "utf-8"):
        if len(content) > C.FS_WRITE_MAX_BYTES:  # a character is at least one byte
            raise FsError(f"content over the {C.FS_WRITE_MAX_BYTES}-byte write limit")
        data = content.encode("utf-8")
    else:
        if len(content) > (C.FS_WRITE_MAX_BYTES + 2) // 3 * 4 + 4:
            raise FsError(f"content over the {C.FS_WRITE_MAX_BYTES}-byte write limit")
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise FsError("content is not valid base64") from None
    if len(data) > C.FS_WRITE_MAX_BYTES:
        raise FsError(f"content over the {C.FS_WRITE_MAX_BYTES}-byte write limit")
    directory = os.path.dirname(path) or "/"
    try:
        if request.get("createDirs"):
            os.makedirs(directory, exist_ok=True)
        try:
            mode = stat_mod.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = None
        fd, temp = tempfile.mkstemp(prefix=".dshc-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, mode if mode is not None else 0o666 & ~_umask())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
    except OSError as exc:
        raise _os_error(exc, "open", path) from None
    return {"bytes": len(data)}


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def op_list(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    path = _absolute(request.get("path"))
    entries: list[dict[str, Any]] = []
    truncated = False
    try:
        with os.scandir(path) as listing:
            names = sorted(listing, key=lambda e: e.name)
    except OSError as exc:
        raise _os_error(exc, "scandir", path) from None
    for item in names:
        if len(entries) == C.FS_LIST_MAX_ENTRIES:
            truncated = True
            break
        try:
            entries.append(_entry(item.path, item.stat(follow_symlinks=False)))
        except OSError:
            continue  # vanished between the listing and the stat
    return {"entries": entries, "truncated": truncated}


def op_stat(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    path = _absolute(request.get("path"))
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise _os_error(exc, "stat", path) from None
    return {
        "stat": {
            "type": _kind(info.st_mode),
            "size": info.st_size,
            "mtimeMs": round(info.st_mtime * 1000, 3),
            "mode": stat_mod.S_IMODE(info.st_mode),
        }
    }


def op_mkdir(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    path = _absolute(request.get("path"))
    try:
        if request.get("recursive", True):
            os.makedirs(path, exist_ok=True)
        else:
            os.mkdir(path)
    except OSError as exc:
        raise _os_error(exc, "mkdir", path) from None
    return {}


def op_rename(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    path = _absolute(request.get("path"))
    target = _absolute(request.get("newPath"), "newPath")
    try:
        os.rename(path, target)
    except OSError as exc:
        raise _os_error(exc, "rename", path) from None
    return {}


def op_delete(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    path = _absolute(request.get("path"))
    if os.path.normpath(path) == "/":
        raise FsError("refusing to delete '/'")
    try:
        info = os.lstat(path)
        if stat_mod.S_ISDIR(info.st_mode):
            if request.get("recursive"):
                shutil.rmtree(path)
            else:
                os.rmdir(path)
        else:
            os.unlink(path)
    except OSError as exc:
        raise _os_error(exc, "rm", path) from None
    return {}


def op_glob(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    pattern = request.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise FsError("pattern is required")
    base = request.get("cwd") or workspace
    if not os.path.isabs(base):
        raise FsError("path must be absolute")
    full = pattern if os.path.isabs(pattern) else os.path.join(base, pattern)
    entries: list[dict[str, Any]] = []
    truncated = False
    for found in globbing.iglob(full, recursive=True):
        if time.monotonic() > deadline:
            truncated = True
            break
        if len(entries) == C.FS_GLOB_MAX_PATHS:
            truncated = True
            break
        try:
            entries.append(_entry(found, os.lstat(found)))
        except OSError:
            continue
    return {"entries": entries, "truncated": truncated}


def op_grep(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    pattern = request.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise FsError("pattern is required")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise FsError(f"invalid pattern: {exc}") from None
    root = request.get("path") or workspace
    root = _absolute(root)
    include = request.get("include") if isinstance(request.get("include"), str) else None
    cap = _int(request.get("maxMatches"), C.FS_GREP_MAX_MATCHES, 1, C.FS_GREP_MAX_MATCHES)
    matches: list[dict[str, Any]] = []
    truncated = False
    for path in _walk_files(root, deadline):
        if path is None:
            truncated = True
            break
        if include and not fnmatch.fnmatch(os.path.basename(path), include):
            continue
        for number, text in _matching_lines(path, regex):
            if len(matches) == cap:
                truncated = True
                break
            matches.append({"path": path, "line": number, "text": text[:500]})
        if truncated:
            break
    return {"matches": matches, "truncated": truncated}


def _walk_files(root: str, deadline: float) -> Any:
    """Files under root (root itself if it is one), skipping VCS folders; None
    when the deadline passed."""
    if os.path.isfile(root):
        yield root
        return
    if not os.path.isdir(root):
        raise FsError(f"ENOENT: no such file or directory, scandir '{root}'")
    for directory, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if f not in (".git", ".hg", ".svn"))
        for name in sorted(files):
            if time.monotonic() > deadline:
                yield None
                return
            yield os.path.join(directory, name)


def _matching_lines(path: str, regex: re.Pattern[str]) -> Any:
    try:
        if os.path.getsize(path) > C.FS_GREP_MAX_FILE_BYTES:
            return
        with open(path, "rb") as handle:
            data = handle.read(C.FS_GREP_MAX_FILE_BYTES + 1)
    except OSError:
        return
    if b"\0" in data[:8192]:
        return  # binary
    text = data.decode("utf-8", "replace")
    for number, line in enumerate(text.splitlines(), 1):
        if regex.search(line):
            yield number, line


OPERATIONS: dict[str, Callable[[dict[str, Any], str, float], Result]] = {
    "read": op_read,
    "write": op_write,
    "list": op_list,
    "stat": op_stat,
    "mkdir": op_mkdir,
    "rename": op_rename,
    "delete": op_delete,
    "glob": op_glob,
    "grep": op_grep,
}


def run(request: dict[str, Any], workspace: str, deadline: float) -> Result:
    """The whole result (without requestId) of one fs request, never raising."""
    op = request.get("op")
    path = request.get("path") if isinstance(request.get("path"), str) else ""
    base: Result = {"ok": False, "op": op if isinstance(op, str) else "", "path": path}
    handler = OPERATIONS.get(op) if isinstance(op, str) else None
    if handler is None:
        return {**base, "error": f"unknown op {op!r}; one of {', '.join(C.FS_OPS)}"}
    try:
        fields = handler(request, workspace, deadline)
    except FsError as exc:
        return {**base, "error": str(exc)}
    except (OSError, ValueError, RecursionError) as exc:
        return {**base, "error": f"{type(exc).__name__}: {exc}"}
    return {**base, "ok": True, **fields, "error": None}
