"""What the audit log may say about each operation, and nothing more.

The audit log outlives the operations it records and is read by people who
must not see what went through them, so details are built from a WHITELIST:
each request type names the facts worth keeping, every value is type-checked,
and a field the table does not name is never recorded. A new payload field
therefore stays out of the log until someone decides it is safe.

Never recorded: file contents (FILE_WRITE → byte length), command environments
(EXECUTE_COMMAND → variable count, neither names nor values), typed or pasted
text (INPUT_ACTION, CLIPBOARD_WRITE → length in characters), chat messages
(LOCAL_LLM_COMPLETION → count), tokens and grants (RESTORE_SESSION root_grant),
opaque browse references, and URL credentials or query strings.

Strings are cut to `MAX_TEXT_CHARS` and lists to `MAX_LIST_ITEMS`, so one huge
command cannot swell the log; lone surrogates are escaped so that every result
encodes as canonical JSON (see `agent/audit/log.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tetherbed.wire.messages import MessageType

MAX_TEXT_CHARS = 4096
MAX_LIST_ITEMS = 256
_MAX_INT = 2**63

T = MessageType

_SHELLS = frozenset({"auto", "bash", "sh", "zsh", "pwsh", "powershell", "cmd"})
_ENCODINGS = frozenset({"utf-8", "base64"})
_FORMATS = frozenset({"text", "bytes"})
_IMAGE_FORMATS = frozenset({"jpeg", "png"})


class AuditOp(StrEnum):
    """`op` of the records that are agent events rather than requests.

    Requests use their wire type (`"FILE_WRITE"`) as `op`.
    """

    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    FATAL_CLOSE = "fatal_close"
    SESSION_REVOKED = "SESSION_REVOKED"


def clip(value: str, limit: int = MAX_TEXT_CHARS) -> str:
    """`value` made safe to record: UTF-8 encodable and at most `limit` characters."""
    safe = value.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(safe) <= limit:
        return safe
    return f"{safe[:limit]}…[+{len(safe) - limit} chars]"


class _Fields:
    """Typed, defensive reads from a decoded Struct or a raw dict payload."""

    def __init__(self, payload: object) -> None:
        self._payload = payload

    def raw(self, name: str) -> Any:
        if isinstance(self._payload, Mapping):
            return self._payload.get(name)
        return getattr(self._payload, name, None)

    def text(self, name: str) -> str | None:
        value = self.raw(name)
        return clip(value) if isinstance(value, str) else None

    def choice(self, name: str, allowed: frozenset[str]) -> str | None:
        value = self.raw(name)
        if value is None:
            return None
        return value if isinstance(value, str) and value in allowed else "<other>"

    def integer(self, name: str) -> int | None:
        value = self.raw(name)
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _MAX_INT:
            return value
        return None

    def number(self, name: str) -> float | int | None:
        value = self.raw(name)
        if isinstance(value, float) and math.isfinite(value):
            return value
        return self.integer(name)

    def flag(self, name: str) -> bool | None:
        value = self.raw(name)
        return value if isinstance(value, bool) else None

    def ints(self, name: str, size: int) -> list[int] | None:
        """A point (2) or a rectangle (4)."""
        value = self.raw(name)
        if (
            isinstance(value, (list, tuple))
            and len(value) == size
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            return [int(v) for v in value]
        return None

    def texts(self, name: str) -> list[str] | None:
        value = self.raw(name)
        if not isinstance(value, (list, tuple)):
            return None
        items = [clip(v) if isinstance(v, str) else "<non-string>" for v in value]
        if len(items) > MAX_LIST_ITEMS:
            items = [*items[:MAX_LIST_ITEMS], f"…[+{len(items) - MAX_LIST_ITEMS} items]"]
        return items

    def count(self, name: str) -> int | None:
        """How many items a list or mapping holds, without recording any of them."""
        value = self.raw(name)
        return len(value) if isinstance(value, (list, tuple, Mapping)) else None

    def length(self, name: str) -> int | None:
        """A string's length in characters, without recording the string."""
        value = self.raw(name)
        return len(value) if isinstance(value, str) else None

    def present(self, name: str) -> bool:
        return self.raw(name) is not None


def _facts(**facts: Any) -> dict[str, Any]:
    """Details without the facts that were absent (None)."""
    return {name: value for name, value in facts.items() if value is not None}


_BASE64_SPACE = " \t\r\n"


def _content_bytes(f: _Fields) -> int | None:
    """Byte length FILE_WRITE will write, computed without copying the content.

    This runs on the event loop for every write, so it stays linear-and-cheap
    on a 10 MiB payload: ASCII text is its own length (an O(1) check), and the
    base64 form is measured with memchr-speed searches, no copies.
    """
    content = f.raw("content")
    if not isinstance(content, str):
        return None
    if f.raw("encoding") == "base64":
        return _base64_length(content)
    if content.isascii():
        return len(content)
    return len(content.encode("utf-8", "surrogatepass"))


def _base64_length(content: str) -> int:
    spaces = 0
    if any(space in content for space in _BASE64_SPACE):
        spaces = sum(content.count(space) for space in _BASE64_SPACE)
    padding, end = 0, len(content)
    while end and content[end - 1] in "=" + _BASE64_SPACE:
        end -= 1
        padding += content[end] == "="
    return max((len(content) - spaces) * 3 // 4 - padding, 0)


def _execute_command(f: _Fields) -> dict[str, Any]:
    return _facts(
        command=f.text("command"),
        argv=f.texts("argv"),
        shell=f.choice("shell", _SHELLS),
        cwd=f.text("cwd"),
        timeout_seconds=f.number("timeout_seconds"),
        env_count=f.count("env"),
    )


def _file_read(f: _Fields) -> dict[str, Any]:
    return _facts(
        path=f.text("path"),
        offset=f.integer("offset"),
        length=f.integer("length"),
        encoding=f.choice("encoding", _ENCODINGS),
        format=f.choice("format", _FORMATS),
    )


def _file_write(f: _Fields) -> dict[str, Any]:
    return _facts(
        path=f.text("path"),
        encoding=f.choice("encoding", _ENCODINGS),
        format=f.choice("format", _FORMATS),
        content_bytes=_content_bytes(f),
        create_parents=f.flag("create_parents"),
    )


def _file_stat(f: _Fields) -> dict[str, Any]:
    return _facts(path=f.text("path"), follow_symlinks=f.flag("follow_symlinks"))


def _file_list(f: _Fields) -> dict[str, Any]:
    return _facts(
        path=f.text("path"),
        glob=f.text("glob"),
        recursive=f.flag("recursive"),
        include_hidden=f.flag("include_hidden"),
        max_entries=f.integer("max_entries"),
    )


def _file_delete(f: _Fields) -> dict[str, Any]:
    return _facts(
        path=f.text("path"), recursive=f.flag("recursive"), missing_ok=f.flag("missing_ok")
    )


def _file_move(f: _Fields) -> dict[str, Any]:
    return _facts(src=f.text("src"), dst=f.text("dst"), overwrite=f.flag("overwrite"))


def _llm_completion(f: _Fields) -> dict[str, Any]:
    return _facts(
        model=f.text("model"),
        message_count=f.count("messages"),
        max_tokens=f.integer("max_tokens"),
        temperature=f.number("temperature"),
        top_p=f.number("top_p"),
        stream=f.flag("stream"),
    )


def _screenshot(f: _Fields) -> dict[str, Any]:
    return _facts(
        monitor=f.integer("monitor"),
        region=f.ints("region", 4),
        format=f.choice("format", _IMAGE_FORMATS),
        quality=f.integer("quality"),
        window_id=f.text("window_id"),
        include_cursor=f.flag("include_cursor"),
    )


def _input_action(f: _Fields) -> dict[str, Any]:
    return _facts(
        action=f.text("action"),
        coordinate=f.ints("coordinate", 2),
        key=f.text("key"),
        button=f.text("button"),
        clicks=f.integer("clicks"),
        direction=f.text("direction"),
        modifiers=f.texts("modifiers"),
        scroll_amount=f.integer("scroll_amount"),
        scroll_direction=f.text("scroll_direction"),
        duration_ms=f.integer("duration_ms"),
        path_points=f.count("path"),
        text_length=f.length("text"),
        paste=f.flag("paste"),
        preserve_clipboard=f.flag("preserve_clipboard"),
    )


def _window_focus(f: _Fields) -> dict[str, Any]:
    return _facts(window_id=f.text("window_id"))


def _app_launch(f: _Fields) -> dict[str, Any]:
    # Arguments may carry secrets (URLs with tokens, passwords); only their count.
    return _facts(app=f.text("app"), arg_count=f.count("args"))


def _clipboard_write(f: _Fields) -> dict[str, Any]:
    return _facts(text_length=f.length("text"))


def _directory_list(f: _Fields) -> dict[str, Any]:
    # browse_id, directory_ref and cursor are host-issued references: never recorded.
    return {"has_directory_ref": f.present("directory_ref"), "has_cursor": f.present("cursor")}


def _session_only(f: _Fields) -> dict[str, Any]:
    return _facts(session_id=f.text("session_id"))


def _activate_session(f: _Fields) -> dict[str, Any]:
    return _facts(session_id=f.text("session_id"), revision=f.integer("revision"))


def _session_revoked(f: _Fields) -> dict[str, Any]:
    return _facts(
        reason=f.text("reason"),
        new_shim_machine_id=f.text("new_shim_machine_id"),
        source="platform",
    )


def _nothing(_: _Fields) -> dict[str, Any]:
    return {}


_DETAILS: dict[MessageType, Callable[[_Fields], dict[str, Any]]] = {
    T.EXECUTE_COMMAND: _execute_command,
    T.FILE_READ: _file_read,
    T.FILE_WRITE: _file_write,
    T.FILE_STAT: _file_stat,
    T.FILE_LIST: _file_list,
    T.FILE_DELETE: _file_delete,
    T.FILE_MOVE: _file_move,
    T.LOCAL_LLM_COMPLETION: _llm_completion,
    T.SCREENSHOT_REQUEST: _screenshot,
    T.INPUT_ACTION: _input_action,
    T.CURSOR_POSITION_REQUEST: _nothing,
    T.DISPLAY_INFO_REQUEST: _nothing,
    T.WINDOW_LIST_REQUEST: _nothing,
    T.WINDOW_FOCUS: _window_focus,
    T.APP_LIST_REQUEST: _nothing,
    T.APP_LAUNCH: _app_launch,
    T.CLIPBOARD_READ: _nothing,
    T.CLIPBOARD_WRITE: _clipboard_write,
    T.PERMISSIONS_CHECK_REQUEST: _nothing,
    # Recording payloads are not defined yet: nothing of them is known to be safe.
    T.REQUEST_RECORDING_CONSENT: _nothing,
    T.START_RECORDING: _nothing,
    T.STOP_RECORDING: _nothing,
    T.RECORDING_FETCH: _nothing,
    T.APPLY_RECORDING_REVIEW: _nothing,
    T.DIRECTORY_LIST_REQUEST: _directory_list,
    T.ATTACH_SESSION: _session_only,
    T.ACTIVATE_SESSION: _activate_session,
    T.RESTORE_SESSION: _session_only,  # never the root_grant
    T.DETACH_SESSION: _session_only,
    T.SESSION_REVOKED: _session_revoked,
}


def audit_details(kind: MessageType | str, payload: object) -> dict[str, Any]:
    """The details to record for a request of type `kind`.

    `payload` may be the decoded payload Struct or the raw JSON object; values
    of the wrong type are left out. An unknown type records only the type.
    """
    try:
        handler = _DETAILS.get(MessageType(kind))
    except ValueError:
        handler = None
    if handler is None:
        return {"type": clip(str(kind), 128)}
    return handler(_Fields(payload))


# --- agent events ------------------------------------------------------------


def session_revoked_details(
    reason: str, new_shim_machine_id: str | None = None, *, source: str = "platform"
) -> dict[str, Any]:
    """SESSION_REVOKED: why, who took over, and who said so (the spec asks for all three)."""
    return _facts(
        reason=clip(reason, 256),
        new_shim_machine_id=None if new_shim_machine_id is None else clip(new_shim_machine_id, 256),
        source=clip(source, 256),
    )


def fatal_close_details(code: int, reason: str, *, exit_code: int | None = None) -> dict[str, Any]:
    """A close after which the agent will not reconnect."""
    return _facts(code=code, reason=clip(reason, 1024), exit_code=exit_code)


def connect_details(
    url: str,
    *,
    protocol_version: str | None = None,
    connection_id: str | None = None,
    granted_capabilities: list[str] | None = None,
) -> dict[str, Any]:
    """A connection to the hub was established (control or data plane)."""
    return _facts(
        url=safe_url(url),
        protocol_version=None if protocol_version is None else clip(protocol_version, 64),
        connection_id=None if connection_id is None else clip(connection_id, 256),
        granted_capabilities=None
        if granted_capabilities is None
        else [clip(c, 64) for c in granted_capabilities[:MAX_LIST_ITEMS]],
    )


def disconnect_details(
    code: int | None, reason: str = "", *, will_reconnect: bool | None = None
) -> dict[str, Any]:
    """A connection ended; `code` is the WebSocket close code when there was one."""
    return _facts(code=code, reason=clip(reason, 1024), will_reconnect=will_reconnect)


def safe_url(url: str) -> str:
    """`url` without credentials, query or fragment, where tokens tend to travel."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
    except ValueError:
        return "<unparsable url>"
    return clip(urlunsplit((parts.scheme, netloc, parts.path, "", "")), 1024)
