"""Server-sent events framing: the hub's encoder and a sans-I/O decoder.

The decoder follows the WHATWG "event stream interpretation" rules (lines end
in CRLF, LF or CR; `:` starts a comment; one leading space after the colon is
dropped; `data` lines join with LF; an event without data is not dispatched; a
leading BOM is skipped), so it reads any conforming server, not only
Tetherbed's hub. It is fed bytes as they arrive and never buffers more than
`limit` bytes of one event: a larger event is an `SseError`, raised before the
bytes are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tetherbed.wire.dsh.constants import SSE_EVENT_LIMIT

_BOM = b"\xef\xbb\xbf"


class SseError(ValueError):
    """The stream broke the framing rules or a limit."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        """The data as JSON (raises ValueError when it is not)."""
        return json.loads(self.data)


@dataclass(frozen=True, slots=True)
class SseRetry:
    """A `retry:` field: the reconnection time the server asks for, in ms."""

    milliseconds: int


def encode_event(event: str, data: Any) -> bytes:
    """`event: NAME\\ndata: JSON\\n\\n` (compact JSON never holds a newline)."""
    if "\n" in event or "\r" in event:
        raise ValueError("an event name cannot contain a line break")
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines = "".join(f"data: {line}\n" for line in text.split("\n"))
    return f"event: {event}\n{lines}\n".encode()


def encode_retry(milliseconds: int) -> bytes:
    return f"retry: {int(milliseconds)}\n\n".encode("ascii")


def encode_comment(text: str = "") -> bytes:
    return f": {text}\n\n".encode() if text else b":\n\n"


class SseDecoder:
    """Feed bytes, get `SseEvent`s and `SseRetry`s in order."""

    def __init__(self, limit: int = SSE_EVENT_LIMIT) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._started = False
        self._skip_lf = False
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, data: bytes) -> list[SseEvent | SseRetry]:
        if not data:
            return []
        out: list[SseEvent | SseRetry] = []
        buffer = self._buffer
        buffer += data
        if not self._started:
            if len(buffer) < len(_BOM) and _BOM.startswith(bytes(buffer)):
                return out
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
            self._started = True
        start = 0
        length = len(buffer)
        while start < length:
            if self._skip_lf:
                self._skip_lf = False
                if buffer[start] == 0x0A:
                    start += 1
                    continue
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            ends = [i for i in (cr, lf) if i >= 0]
            if not ends:
                break
            end = min(ends)
            line = bytes(buffer[start:end])
            start = end + 1
            if end == cr:
                self._skip_lf = True
            self._line(line, out)
        del buffer[:start]
        if self._size + len(buffer) > self._limit:
            raise SseError(f"an event exceeds the {self._limit}-byte limit")
        return out

    def _line(self, raw: bytes, out: list[SseEvent | SseRetry]) -> None:
        if not raw:
            self._dispatch(out)
            return
        if raw[0] == 0x3A:  # ':' comment
            return
        line = raw.decode("utf-8", "replace")
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._size += len(raw) + 1
            if self._size > self._limit:
                raise SseError(f"an event exceeds the {self._limit}-byte limit")
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
            out.append(SseRetry(self.retry_ms))
        # any other field is ignored, as the standard says

    def _dispatch(self, out: list[SseEvent | SseRetry]) -> None:
        if self._data:
            out.append(
                SseEvent(self._event or "message", "\n".join(self._data), self.last_event_id)
            )
        self._event = ""
        self._data = []
        self._size = 0
