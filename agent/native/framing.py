"""JSON lines with the spec's limits: 64 KiB a request, nesting depth 32.

`LineFramer` is sans-I/O: it takes byte chunks and returns complete lines, and
reports an oversized line once while discarding the rest of it, so that a huge
line never sits in memory ("a limit is enforced before memory is spent").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from tetherbed.agent.native.errors import Code, NativeError

MAX_REQUEST_BYTES = 65536
MAX_DEPTH = 32
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
MAX_REQUEST_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Line:
    data: bytes


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit; its bytes were dropped."""


class LineFramer:
    """Splits a byte stream into lines of at most `limit` bytes (newline excluded)."""

    def __init__(self, limit: int = MAX_REQUEST_BYTES) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, chunk: bytes) -> list[Line | Oversized]:
        events: list[Line | Oversized] = []
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._discarding:
                if len(self._buffer) + len(piece) > self._limit:
                    self._buffer.clear()
                    self._discarding = True
                    events.append(Oversized())
                else:
                    self._buffer += piece
            if end < 0:
                break
            if not self._discarding:
                events.append(Line(bytes(self._buffer)))
            self._buffer.clear()
            self._discarding = False
            start = end + 1
        return events

    def eof(self) -> list[Line | Oversized]:
        """A final line without a newline still counts as a request."""
        events: list[Line | Oversized] = []
        if self._buffer and not self._discarding:
            events.append(Line(bytes(self._buffer)))
        self._buffer.clear()
        self._discarding = False
        return events


def nesting_depth(value: Any) -> int:
    """Depth of containers; a scalar is 0, `{}` is 1. Iterative, so no recursion limit."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def request_id_of(value: Any) -> int | None:
    """The id when it is valid, else None (the answer then carries `"id": null`)."""
    if isinstance(value, dict):
        rid = value.get("id")
        if type(rid) is int and 0 <= rid <= MAX_REQUEST_ID:
            return rid
    return None


def decode_line(line: bytes, *, check_depth: bool = True) -> dict[str, Any]:
    """Parse one request line into a dict, enforcing size, UTF-8, JSON and depth.

    `check_depth` False is the planted defect `accept_over_deep` (never in normal use):
    a request nested past MAX_DEPTH is parsed like any other."""
    if len(line) > MAX_REQUEST_BYTES:
        raise NativeError(
            Code.REQUEST_TOO_LARGE, f"requests are limited to {MAX_REQUEST_BYTES} bytes"
        )
    try:
        value = msgspec.json.decode(line)
    except RecursionError:
        raise NativeError(
            Code.NESTING_TOO_DEEP, f"nesting depth is limited to {MAX_DEPTH}"
        ) from None
    except msgspec.DecodeError as exc:
        raise NativeError(Code.INVALID_REQUEST, f"not valid UTF-8 JSON: {exc}") from None
    if not isinstance(value, dict):
        raise NativeError(Code.INVALID_REQUEST, "a request is one JSON object")
    if check_depth and nesting_depth(value) > MAX_DEPTH:
        error = NativeError(Code.NESTING_TOO_DEEP, f"nesting depth is limited to {MAX_DEPTH}")
        error.request_id = request_id_of(value)  # parsed, so the answer can be correlated
        raise error
    return value


_encoder = msgspec.json.Encoder()


def encode_ok(request_id: int, result: Any) -> bytes:
    return _encoder.encode({"id": request_id, "ok": True, "result": result}) + b"\n"


def encode_error(request_id: int | None, error: NativeError) -> bytes:
    return _encoder.encode({"id": request_id, "ok": False, "error": error.to_wire()}) + b"\n"
