"""One direction of an HTTP/1.1 connection, cut into message parts.

Fed the bytes as they arrive, an `HttpParser` returns `Part`s: a message's
head, pieces of its body (de-chunked in `data`), and its end. Every input
byte belongs to exactly one part (`raw`), in order, so a stage can forward
or drop a message byte for byte without re-encoding it. Messages follow each
other on a kept-alive connection; a response's framing depends on the
request it answers (`expect`: a HEAD has no body, a 101 turns the rest of the
connection into something else). A body is framed by chunked coding, by
Content-Length, or — for a response only — by the connection's end.

Whatever cannot be parsed (a broken head, a bad chunk line) makes the rest of
the direction `raw` parts: a peer that breaks HTTP is the system under test,
never a reason to stop forwarding its bytes. Limits are checked before bytes
are kept: a head over `MAX_HEAD`, a chunk line over 1 KiB.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Literal

from tetherbed.simulator.proxy.ws.handshake import could_be_request

MAX_HEAD = 64 * 1024
_CHUNK_LINE_LIMIT = 1024
HEAD_END = b"\r\n\r\n"

PartKind = Literal["head", "data", "end", "raw"]
Role = Literal["request", "response"]


@dataclass(frozen=True, slots=True)
class Head:
    """A request or status line and the headers (names lower-case; repeats joined)."""

    method: str | None = None
    target: str | None = None
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """The target without its query."""
        return (self.target or "").split("?", 1)[0]

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()


@dataclass(frozen=True, slots=True)
class Part:
    kind: PartKind
    #: The input bytes this part stands for (what to forward, or drop).
    raw: bytes
    #: For `data`: the body bytes it carries (chunk framing removed).
    data: bytes = b""
    head: Head | None = None


class HttpParser:
    def __init__(self, role: Role) -> None:
        self.role = role
        self._buffer = bytearray()
        self._state = "head"  # head | length | chunk-size | chunk-data | chunk-crlf | trailer
        #                       | close | raw
        self._remaining = 0
        self._methods: collections.deque[str] = collections.deque()
        self._current: Head | None = None
        self._framing = b""  # chunk framing bytes waiting to ride on the next part
        self.error: str | None = None
        self.messages = 0

    @property
    def in_message(self) -> bool:
        """A head was read and its message has not ended yet."""
        return self._state not in ("head", "raw")

    @property
    def current(self) -> Head | None:
        return self._current if self.in_message else None

    def expect(self, method: str) -> None:
        """A request with this method went the other way: frame its answer by it."""
        self._methods.append(method.upper())

    def feed(self, data: bytes) -> list[Part]:
        if self._state == "raw":
            return [Part("raw", bytes(data))] if data else []
        self._buffer += data
        parts: list[Part] = []
        while self._step(parts):
            pass
        return parts

    def feed_eof(self) -> list[Part]:
        """The sender closed: the end of a close-delimited body."""
        parts: list[Part] = []
        if self._state == "close":
            parts.append(Part("end", self._take_framing()))
            self._finish()
        return parts

    # --- the state machine ------------------------------------------------------

    def _step(self, parts: list[Part]) -> bool:
        """Take one part off the buffer if a whole one is there."""
        state = self._state
        buffer = self._buffer
        if state == "raw":
            if buffer:
                parts.append(Part("raw", self._take(len(buffer))))
            return False
        if state == "head":
            return self._head(parts)
        if state == "close":
            if buffer:
                piece = self._take(len(buffer))
                parts.append(Part("data", piece, piece))
            return False
        if state == "length":
            if not buffer:
                return False
            piece = self._take(min(self._remaining, len(buffer)))
            self._remaining -= len(piece)
            parts.append(Part("data", piece, piece))
            if self._remaining == 0:
                parts.append(Part("end", b""))
                self._finish()
            return True
        if state == "chunk-size":
            end = buffer.find(b"\r\n")
            if end < 0:
                if len(buffer) > _CHUNK_LINE_LIMIT:
                    return self._broken(parts, "chunk size line too long")
                return False
            line = bytes(buffer[: end + 2])
            size_text = line[:-2].split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                return self._broken(parts, f"bad chunk size {size_text[:20]!r}")
            self._framing += self._take(len(line))
            self._remaining = size
            self._state = "chunk-data" if size else "trailer"
            return True
        if state == "chunk-data":
            if not buffer:
                return False
            piece = self._take(min(self._remaining, len(buffer)))
            self._remaining -= len(piece)
            parts.append(Part("data", self._take_framing() + piece, piece))
            if self._remaining == 0:
                self._state = "chunk-crlf"
            return True
        if state == "chunk-crlf":
            if len(buffer) < 2:
                return False
            if buffer[:2] != b"\r\n":
                return self._broken(parts, "chunk data not followed by CRLF")
            self._framing += self._take(2)
            self._state = "chunk-size"
            return True
        # trailer: header lines until an empty one
        end = buffer.find(b"\r\n")
        if end < 0:
            if len(buffer) > MAX_HEAD:
                return self._broken(parts, "chunked trailer too long")
            return False
        line = self._take(end + 2)
        self._framing += line
        if line == b"\r\n":
            parts.append(Part("end", self._take_framing()))
            self._finish()
        return True

    def _head(self, parts: list[Part]) -> bool:
        buffer = self._buffer
        end = buffer.find(HEAD_END)
        if end < 0:
            if len(buffer) > MAX_HEAD:
                return self._broken(parts, f"head over {MAX_HEAD} bytes")
            if buffer and not self._could_start(bytes(buffer[:32])):
                # Not HTTP at all: pass it on now rather than wait for a head.
                return self._broken(parts, "not HTTP/1.x")
            return False
        raw = self._take(end + len(HEAD_END))
        head = self._parse_head(raw)
        if head is None:
            parts.append(Part("raw", raw))
            self._state = "raw"
            return True
        self._current = head
        parts.append(Part("head", raw, head=head))
        self._frame(head, parts)
        return True

    def _could_start(self, prefix: bytes) -> bool:
        """Whether these first bytes can begin a request line (or a status line)."""
        if self.role == "request":
            return could_be_request(prefix)
        return b"HTTP/1."[: len(prefix)] == prefix[:7]

    def _parse_head(self, raw: bytes) -> Head | None:
        text = raw[: -len(HEAD_END)].decode("latin-1")
        first, *lines = text.split("\r\n")
        headers: dict[str, str] = {}
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                self.error = f"malformed header line {line[:80]!r}"
                return None
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        words = first.split(" ", 2)
        if self.role == "request":
            if len(words) != 3 or not words[2].startswith("HTTP/1.") or not words[0].isalpha():
                self.error = f"not a request line: {first[:80]!r}"
                return None
            return Head(method=words[0].upper(), target=words[1], headers=headers)
        if len(words) < 2 or not words[0].startswith("HTTP/1.") or not words[1].isdigit():
            self.error = f"not a status line: {first[:80]!r}"
            return None
        return Head(status=int(words[1]), headers=headers)

    def _frame(self, head: Head, parts: list[Part]) -> None:
        """Where the body of this message ends."""
        headers = head.headers
        if self.role == "response":
            status = head.status or 0
            if 100 <= status < 200:
                if status == 101:
                    self._methods.clear()
                    self._state = "raw"  # the connection is something else now
                    return
                self._state = "head"  # an interim answer; the real one follows
                return
            method = self._methods.popleft() if self._methods else "GET"
            if method == "HEAD" or status in (204, 304):
                self._end_empty(parts)
                return
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = "chunk-size"
            return
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                self._broken(parts, f"bad Content-Length {length!r}")
                return
            self._remaining = int(length)
            if self._remaining == 0:
                self._end_empty(parts)
            else:
                self._state = "length"
            return
        if self.role == "request":
            self._end_empty(parts)
        else:
            self._state = "close"

    def _end_empty(self, parts: list[Part]) -> None:
        parts.append(Part("end", b""))
        self._finish()

    def _finish(self) -> None:
        self.messages += 1
        self._state = "head"
        self._remaining = 0

    def _broken(self, parts: list[Part], why: str) -> bool:
        self.error = why
        self._state = "raw"
        rest = self._take_framing() + self._take(len(self._buffer))
        if rest:
            parts.append(Part("raw", rest))
        return False

    def _take(self, size: int) -> bytes:
        piece = bytes(self._buffer[:size])
        del self._buffer[:size]
        return piece

    def _take_framing(self) -> bytes:
        framing, self._framing = self._framing, b""
        return framing
