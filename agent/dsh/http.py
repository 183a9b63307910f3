"""HTTP/1.1 for the agent, sans-I/O: request bytes out, response events in.

`encode_request` writes a request; `ResponseParser` is fed the bytes that
come back and yields `Head`, `Body` and `End` events, for a body framed by
Content-Length, by chunked transfer coding, or by the connection's close.
Limits are checked before bytes are kept: a head over `HEAD_LIMIT`, a chunk
size line over 1 KiB, or a body over the caller's limit is an `HttpError`.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_LIMIT = 64 * 1024
_CHUNK_LINE_LIMIT = 1024


class HttpError(ValueError):
    """The peer broke HTTP/1.1 framing or a limit."""


@dataclass(frozen=True, slots=True)
class Head:
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


@dataclass(frozen=True, slots=True)
class Body:
    data: bytes


@dataclass(frozen=True, slots=True)
class End:
    #: The connection may carry another request.
    keep_alive: bool


HttpEvent = Head | Body | End


def encode_request(
    method: str, target: str, host: str, headers: dict[str, str], body: bytes | None = None
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0"):
            raise ValueError(f"header {name!r} holds a line break")
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body if body else head


class ResponseParser:
    """One response. `head_only` (the answer to HEAD) has no body."""

    def __init__(self, body_limit: int | None = None, *, head_only: bool = False) -> None:
        self._buffer = bytearray()
        self._body_limit = body_limit
        self._head_only = head_only
        self._head: Head | None = None
        self._mode = ""  # "length" | "chunked" | "close" | "none"
        self._remaining = 0
        self._chunk_state = "size"  # "size" | "data" | "data-crlf" | "trailer"
        self._received = 0
        self._keep_alive = True
        self.done = False

    @property
    def head(self) -> Head | None:
        return self._head

    def feed(self, data: bytes) -> list[HttpEvent]:
        if self.done:
            return []
        self._buffer += data
        events: list[HttpEvent] = []
        if self._head is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buffer) > HEAD_LIMIT:
                    raise HttpError(f"response head over {HEAD_LIMIT} bytes")
                return events
            self._head = self._parse_head(bytes(self._buffer[:end]))
            del self._buffer[: end + 4]
            events.append(self._head)
            if self._mode == "none":
                self.done = True
                events.append(End(self._keep_alive))
                return events
        events += self._body()
        return events

    def feed_eof(self) -> list[HttpEvent]:
        """The connection closed: the end of a close-delimited body, else an error."""
        if self.done:
            return []
        if self._head is not None and self._mode == "close":
            self.done = True
            return [End(False)]
        raise HttpError("the connection closed before the response was complete")

    def _parse_head(self, raw: bytes) -> Head:
        text = raw.decode("latin-1")
        status_line, *lines = text.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise HttpError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        version, status = parts[0], int(parts[1])
        headers: dict[str, str] = {}
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise HttpError(f"malformed header line {line[:80]!r}")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        connection = headers.get("connection", "").lower()
        self._keep_alive = version == "HTTP/1.1" and "close" not in connection
        encoding = headers.get("transfer-encoding", "").lower()
        if self._head_only or status in (204, 304) or 100 <= status < 200:
            self._mode = "none"
        elif "chunked" in encoding:
            self._mode = "chunked"
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isdigit():
                raise HttpError(f"bad Content-Length {length!r}")
            self._remaining = int(length)
            self._check_limit(self._remaining)
            self._mode = "length" if self._remaining else "none"
        else:
            self._mode = "close"
            self._keep_alive = False
        return Head(status, parts[2] if len(parts) > 2 else "", headers)

    def _check_limit(self, total: int) -> None:
        if self._body_limit is not None and total > self._body_limit:
            raise HttpError(f"response body over {self._body_limit} bytes")

    def _take(self, size: int) -> bytes:
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        self._received += len(data)
        self._check_limit(self._received)
        return data

    def _body(self) -> list[HttpEvent]:
        events: list[HttpEvent] = []
        if self._mode == "close":
            if self._buffer:
                events.append(Body(self._take(len(self._buffer))))
            return events
        if self._mode == "length":
            if self._buffer:
                data = self._take(min(self._remaining, len(self._buffer)))
                self._remaining -= len(data)
                events.append(Body(data))
            if self._remaining == 0:
                self.done = True
                events.append(End(self._keep_alive))
            return events
        while not self.done:
            if self._chunk_state == "size":
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > _CHUNK_LINE_LIMIT:
                        raise HttpError("chunk size line too long")
                    break
                line = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
                del self._buffer[: end + 2]
                try:
                    self._remaining = int(line, 16)
                except ValueError:
                    raise HttpError(f"bad chunk size {line[:20]!r}") from None
                self._chunk_state = "data" if self._remaining else "trailer"
            elif self._chunk_state == "data":
                if not self._buffer:
                    break
                data = self._take(min(self._remaining, len(self._buffer)))
                self._remaining -= len(data)
                events.append(Body(data))
                if self._remaining == 0:
                    self._chunk_state = "data-crlf"
            elif self._chunk_state == "data-crlf":
                if len(self._buffer) < 2:
                    break
                if self._buffer[:2] != b"\r\n":
                    raise HttpError("chunk data not followed by CRLF")
                del self._buffer[:2]
                self._chunk_state = "size"
            else:  # trailer: lines until an empty one
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > HEAD_LIMIT:
                        raise HttpError("chunked trailer too long")
                    break
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 2]
                if not line:
                    self.done = True
                    events.append(End(self._keep_alive))
        return events
