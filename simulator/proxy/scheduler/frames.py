"""What the scheduler orders: whole WebSocket messages, named by where they travel.

A frame's key is (link, connection, direction, index): the proxy it crosses
(one per agent), the connection's place in that proxy's accept order, `up`
(agent → hub) or `down` (hub → agent), and its place in that direction of that
connection. The key, not the time, is what a decision log names, so a replay
recognises "the third frame the hub sent on the agent's second connection"
whatever the clock says; `kind` and `request_id` are there to check that it is
still the same frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from tetherbed.simulator.proxy.ws.frames import FrameError, FrameParser
from tetherbed.simulator.proxy.ws.messages import MessageAssembler, message_type

UP = "up"
DOWN = "down"
DIRECTIONS = (UP, DOWN)


@dataclass(frozen=True, slots=True, order=True)
class FrameKey:
    link: str
    connection: int
    direction: str
    index: int

    @property
    def lane(self) -> tuple[str, int, str]:
        """The FIFO lane the frame belongs to: one direction of one connection."""
        return self.link, self.connection, self.direction

    def to_json(self) -> list[Any]:
        return [self.link, self.connection, self.direction, self.index]

    @classmethod
    def from_json(cls, raw: Any) -> FrameKey:
        link, connection, direction, index = raw
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be up or down, not {direction!r}")
        return cls(str(link), int(connection), str(direction), int(index))

    def __str__(self) -> str:
        return f"{self.link}#{self.connection} {self.direction}[{self.index}]"


@dataclass(frozen=True, slots=True)
class Frame:
    key: FrameKey
    kind: str
    request_id: str | None = None


class _Id(msgspec.Struct):
    id: Any = None


_id_decoder = msgspec.json.Decoder(_Id)


def label(data: bytes, *, masked: bool) -> tuple[str, str | None]:
    """(type, request id) of one whole message's bytes, as the rules name types.

    Bytes that are not exactly one message (they cannot be here, but a broken
    peer is the system under test) are labelled `ws.unknown`.
    """
    parser = FrameParser(masked=masked, max_payload=1 << 62)
    assembler = MessageAssembler()
    try:
        frames = parser.feed(data)
        messages = [m for m in (assembler.feed(frame) for frame in frames) if m is not None]
    except FrameError:
        return "ws.unknown", None
    if len(messages) != 1 or parser.error is not None:
        return "ws.unknown", None
    message = messages[0]
    kind = message_type(message)
    if kind.startswith("ws."):
        return kind, None
    try:
        found = _id_decoder.decode(message.payload).id
    except (msgspec.DecodeError, msgspec.ValidationError):
        return kind, None
    return kind, None if found is None else str(found)
