"""Carrying out model-tool calls: the core decides, this awaits the outcomes.

A tool call may take several round trips to the agent (computer_write stats
the path first to say whether it `created` it; computer_edit reads the file
and writes it back), so the composition lives here, above the sans-I/O core,
and each step is one `DispatchPort` call that resolves when the core settles
the request.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Protocol

from tetherbed.hub.dsh import tools
from tetherbed.hub.dsh.actions import ToolError
from tetherbed.hub.dsh.records import Computer
from tetherbed.wire.dsh import constants as C

T = C.ToolErrorCode


class DispatchPort(Protocol):
    async def fs(
        self, user: str, computer: str | None, request: dict[str, Any]
    ) -> tuple[dict[str, Any], Computer]:
        """One fs request's result; raises ToolCallError."""
        ...


class ToolCallError(Exception):
    def __init__(self, error: ToolError) -> None:
        super().__init__(error.message)
        self.error = error


def _fs_failed(result: dict[str, Any]) -> ToolCallError:
    message = result.get("error") or "the file operation failed"
    return ToolCallError(ToolError(T.FILE_ERROR, str(message), 422))


def _who(computer: Computer) -> dict[str, str]:
    return {"id": computer.id, "name": computer.name}


async def read(port: DispatchPort, user: str, args: dict[str, Any]) -> tuple[dict, list]:
    offset = int(args.get("offset") or 0)
    request = {"op": "read", "path": args["path"], "encoding": "utf8", "offset": max(0, offset)}
    if args.get("limit"):
        request["limit"] = int(args["limit"])
    result, computer = await port.fs(user, args.get("computer"), request)
    if not result.get("ok"):
        raise _fs_failed(result)
    value = {
        "computer": _who(computer),
        "path": args["path"],
        "text": result.get("text", ""),
        "lines": result.get("lines", 0),
        "bytes": result.get("bytes", 0),
        "truncated": bool(result.get("truncated")),
    }
    return value, tools.render_read(value, max(0, offset) + 1)


async def write(port: DispatchPort, user: str, args: dict[str, Any]) -> tuple[dict, list]:
    data = args["content"].encode("utf-8")
    if len(data) > C.FS_WRITE_MAX_BYTES:
        raise ToolCallError(
            ToolError(T.TOO_LARGE, f"content is over the {C.FS_WRITE_MAX_BYTES}-byte limit", 413)
        )
    query = args.get("computer")
    before, computer = await port.fs(user, query, {"op": "stat", "path": args["path"]})
    created = not before.get("ok") and str(before.get("error", "")).startswith("ENOENT")
    request = {
        "op": "write",
        "path": args["path"],
        "content": base64.b64encode(data).decode("ascii"),
        "encoding": "base64",
        "createDirs": bool(args.get("createDirs")),
    }
    result, computer = await port.fs(user, computer.id, request)
    if not result.get("ok"):
        raise _fs_failed(result)
    value = {
        "computer": _who(computer),
        "path": args["path"],
        "bytes": result.get("bytes", len(data)),
        "created": created,
    }
    return value, tools.render_write(value)


async def edit(port: DispatchPort, user: str, args: dict[str, Any]) -> tuple[dict, list]:
    path, old, new = args["path"], args["old"], args["new"]
    if not old:
        raise ToolCallError(ToolError(T.INVALID_ARGUMENTS, "`old` must not be empty", 400))
    request = {
        "op": "read",
        "path": path,
        "encoding": "base64",
        "offset": 0,
        "limit": C.FS_WRITE_MAX_BYTES,
    }
    result, computer = await port.fs(user, args.get("computer"), request)
    if not result.get("ok"):
        raise _fs_failed(result)
    if result.get("truncated"):
        raise ToolCallError(
            ToolError(T.TOO_LARGE, f"{path} is larger than {C.FS_WRITE_MAX_BYTES} bytes", 413)
        )
    try:
        text = base64.b64decode(result.get("content", ""), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ToolCallError(ToolError(T.FILE_ERROR, f"{path} is not UTF-8 text", 422)) from None
    count = text.count(old)
    if count == 0:
        raise ToolCallError(ToolError(T.EDIT_NO_MATCH, f"`old` does not occur in {path}", 409))
    if count > 1 and not args.get("replaceAll"):
        raise ToolCallError(
            ToolError(
                T.EDIT_AMBIGUOUS,
                f"`old` occurs {count} times in {path}; make it unique or pass replaceAll",
                409,
            )
        )
    updated = text.replace(old, new) if args.get("replaceAll") else text.replace(old, new, 1)
    data = updated.encode("utf-8")
    request = {
        "op": "write",
        "path": path,
        "content": base64.b64encode(data).decode("ascii"),
        "encoding": "base64",
    }
    written, computer = await port.fs(user, computer.id, request)
    if not written.get("ok"):
        raise _fs_failed(written)
    value = {
        "computer": _who(computer),
        "path": path,
        "replacements": count if args.get("replaceAll") else 1,
        "bytes": written.get("bytes", len(data)),
    }
    return value, tools.render_edit(value)


async def glob(port: DispatchPort, user: str, args: dict[str, Any]) -> tuple[dict, list]:
    request = {"op": "glob", "pattern": args["pattern"]}
    if args.get("cwd"):
        request["cwd"] = args["cwd"]
    result, computer = await port.fs(user, args.get("computer"), request)
    if not result.get("ok"):
        raise _fs_failed(result)
    entries = result.get("entries") or []
    value = {
        "computer": _who(computer),
        "paths": [e.get("path") for e in entries if isinstance(e, dict)],
        "truncated": bool(result.get("truncated")),
    }
    return value, tools.render_glob(value)


async def grep(port: DispatchPort, user: str, args: dict[str, Any]) -> tuple[dict, list]:
    request: dict[str, Any] = {"op": "grep", "pattern": args["pattern"]}
    for name in ("path", "include"):
        if args.get(name):
            request[name] = args[name]
    if args.get("maxMatches"):
        request["maxMatches"] = int(args["maxMatches"])
    result, computer = await port.fs(user, args.get("computer"), request)
    if not result.get("ok"):
        raise _fs_failed(result)
    value = {
        "computer": _who(computer),
        "matches": [m for m in result.get("matches") or [] if isinstance(m, dict)],
        "truncated": bool(result.get("truncated")),
    }
    return value, tools.render_grep(value)


FILE_CALLS = {
    "computer_read": read,
    "computer_write": write,
    "computer_edit": edit,
    "computer_glob": glob,
    "computer_grep": grep,
}
