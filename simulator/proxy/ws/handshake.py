"""Recognising the HTTP upgrade that turns a TCP stream into a WebSocket.

The proxy forwards raw bytes until it has seen a `GET ... Upgrade: websocket`
request answered by `101 Switching Protocols`; only then does it parse frames.
It also removes `Sec-WebSocket-Extensions` from the request (by default): with
permessage-deflate negotiated, message bodies are compressed with a shared
sliding window, so the proxy could neither read `type` nor drop or reorder a
message without corrupting every later one.
"""

from __future__ import annotations

import re

HEAD_END = b"\r\n\r\n"
MAX_HEAD = 16 * 1024
_REQUEST_LINE = re.compile(rb"^[A-Z]{1,16} \S+ HTTP/1\.[01]\r\n")
_METHOD_PREFIX = re.compile(rb"^[A-Z]{0,16}( |$)")


def split_head(buffer: bytes) -> tuple[bytes, bytes] | None:
    """(head including the blank line, the bytes after it), or None if incomplete."""
    end = buffer.find(HEAD_END)
    if end < 0:
        return None
    end += len(HEAD_END)
    return buffer[:end], buffer[end:]


def could_be_request(prefix: bytes) -> bool:
    """False as soon as the first bytes cannot start an HTTP/1.x request line."""
    line_end = prefix.find(b"\r\n")
    if line_end >= 0:
        return _REQUEST_LINE.match(prefix[: line_end + 2]) is not None
    return _METHOD_PREFIX.match(prefix[:17]) is not None


def _headers(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head.split(b"\r\n")[1:]
    pairs = []
    for line in lines:
        name, sep, value = line.partition(b":")
        if sep:
            pairs.append((name.strip().lower(), value.strip().lower()))
    return pairs


def _tokens(value: bytes) -> set[bytes]:
    return {token.strip() for token in value.split(b",")}


def is_upgrade_request(head: bytes) -> bool:
    if not head.startswith(b"GET "):
        return False
    headers = _headers(head)
    upgrade = any(name == b"upgrade" and b"websocket" in _tokens(v) for name, v in headers)
    connection = any(name == b"connection" and b"upgrade" in _tokens(v) for name, v in headers)
    return upgrade and connection


def is_switching_protocols(head: bytes) -> bool:
    status_line = head.split(b"\r\n", 1)[0]
    parts = status_line.split(b" ", 2)
    return len(parts) >= 2 and parts[0].startswith(b"HTTP/1.") and parts[1] == b"101"


def strip_extensions(head: bytes) -> bytes:
    """The request head without any `Sec-WebSocket-Extensions` header lines."""
    lines = head[: -len(HEAD_END)].split(b"\r\n")
    kept = [lines[0]] + [
        line
        for line in lines[1:]
        if line.partition(b":")[0].strip().lower() != b"sec-websocket-extensions"
    ]
    return b"\r\n".join(kept) + HEAD_END
