"""What crossed the wire during one case: the frames sent and received, in order.

Every peer the suite plays (the scripted platform an agent dials, the raw
agents and clients a hub serves, the caller and viewers of a native adapter)
writes what it sent and what it received here, as it happens. That record is
the evidence a verdict rests on and what the report shows; a case never asks
the target what it did. Headers are never recorded (they carry tokens), long
strings inside JSON are shortened, and a case keeps at most `LIMIT` entries
(the rest are counted) so that a flood still gives a report one can open.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["sent", "received", "event"]

#: Entries kept per case; later ones are only counted.
LIMIT = 400
#: Strings inside a JSON frame longer than this are shown shortened.
LONG_STRING = 200
#: Text of a frame that is not JSON, shown up to this many characters.
TEXT_PREVIEW = 600


@dataclass(frozen=True, slots=True)
class Entry:
    #: Seconds since the case started.
    t: float
    #: Which connection or stream: "platform#1", "client alice", "stdio", ...
    channel: str
    direction: Direction
    #: text, binary, close, upgrade, refused, connect, exit, note
    kind: str
    #: The frame as it crossed (shortened), or what happened, in words.
    text: str
    size: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 3),
            "channel": self.channel,
            "direction": self.direction,
            "kind": self.kind,
            "text": self.text,
            "size": self.size,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        return cls(
            t=float(data.get("t", 0.0)),
            channel=str(data.get("channel", "")),
            direction=data.get("direction", "event"),
            kind=str(data.get("kind", "")),
            text=str(data.get("text", "")),
            size=int(data.get("size", 0)),
        )


class Evidence:
    """The case's record; every peer of the case appends to the same one."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.entries: list[Entry] = []
        self.dropped = 0

    def now(self) -> float:
        return self._clock() - self.started

    def add(self, channel: str, direction: Direction, kind: str, text: str, size: int = 0) -> None:
        if len(self.entries) >= LIMIT:
            self.dropped += 1
            return
        self.entries.append(Entry(self.now(), channel, direction, kind, text, size))

    def sent(self, channel: str, data: str | bytes) -> None:
        self._frame(channel, "sent", data)

    def received(self, channel: str, data: str | bytes) -> None:
        self._frame(channel, "received", data)

    def note(self, channel: str, text: str) -> None:
        """Something that is not a frame: a connection refused, a process exit, a file's state."""
        self.add(channel, "event", "note", text)

    def _frame(self, channel: str, direction: Direction, data: str | bytes) -> None:
        if isinstance(data, bytes | bytearray | memoryview):
            raw = bytes(data)
            self.add(channel, direction, "binary", describe_binary(raw), len(raw))
        else:
            self.add(channel, direction, "text", shorten_text(data), len(data.encode()))


def describe_binary(data: bytes) -> str:
    head = data[:24].hex(" ")
    return f"{len(data)} bytes: {head}{' …' if len(data) > 24 else ''}"


def shorten_text(text: str) -> str:
    """A JSON frame with its long strings shortened; other text cut to a preview."""
    if len(text) <= LONG_STRING:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # nested past the interpreter's limit: still text
        return _cut(text, TEXT_PREVIEW)
    return json.dumps(_shorten(value), ensure_ascii=False, separators=(",", ":"))


def _shorten(value: Any, depth: int = 0) -> Any:
    if depth > 12:
        return "…"
    if isinstance(value, str):
        return _cut(value, LONG_STRING)
    if isinstance(value, list):
        items = [_shorten(v, depth + 1) for v in value[:50]]
        if len(value) > 50:
            items.append(f"… {len(value) - 50} more")
        return items
    if isinstance(value, dict):
        return {k: _shorten(v, depth + 1) for k, v in value.items()}
    return value


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text)} chars)"
