"""Frames grouped into messages, and the cheap look at a message's JSON `type`.

Message-level faults (drop, delay, duplicate, reorder) act on whole messages, so a
fragmented message is collected until its final frame. Control frames may arrive
between fragments (RFC 6455 §5.4); they are handed out on their own right away,
which a receiver accepts because the data message has not been delivered yet.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from tetherbed.simulator.proxy.ws.frames import (
    OP_BINARY,
    OP_CLOSE,
    OP_CONTINUATION,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Frame,
    FrameError,
)

# Names for messages that have no JSON `type` of their own; rules match them too.
TYPE_PING = "ws.ping"
TYPE_PONG = "ws.pong"
TYPE_CLOSE = "ws.close"
TYPE_BINARY = "ws.binary"
TYPE_TEXT = "ws.text"  # a text message whose body has no string `type` field
CONTROL_TYPES = frozenset({TYPE_PING, TYPE_PONG, TYPE_CLOSE})
_CONTROL_NAMES = {OP_PING: TYPE_PING, OP_PONG: TYPE_PONG, OP_CLOSE: TYPE_CLOSE}


@dataclass(frozen=True, slots=True)
class Message:
    """A complete data message (one or more frames) or a single control frame."""

    frames: tuple[Frame, ...]

    @property
    def opcode(self) -> int:
        return self.frames[0].opcode

    @property
    def is_control(self) -> bool:
        return self.frames[0].is_control

    @property
    def compressed(self) -> bool:
        return bool(self.frames[0].rsv & 0x4)

    @property
    def payload(self) -> bytes:
        return b"".join(frame.payload for frame in self.frames)

    @property
    def raw(self) -> bytes:
        return b"".join(frame.raw for frame in self.frames)


class MessageAssembler:
    """Turns one direction's frames into messages; checks the fragmentation rules."""

    def __init__(self) -> None:
        self._fragments: list[Frame] = []

    def feed(self, frame: Frame) -> Message | None:
        if frame.is_control:
            return Message((frame,))
        if frame.opcode == OP_CONTINUATION:
            if not self._fragments:
                raise FrameError("continuation frame without a message to continue")
        elif self._fragments:
            raise FrameError("new data message before the previous one finished")
        if not frame.fin:
            self._fragments.append(frame)
            return None
        frames = (*self._fragments, frame)
        self._fragments.clear()
        return Message(frames)

    def pending(self) -> list[Frame]:
        """Fragments of an unfinished message, in arrival order."""
        return list(self._fragments)


class _Envelope(msgspec.Struct):
    type: str | None = None


_decoder = msgspec.json.Decoder(_Envelope)


def message_type(message: Message) -> str:
    """The JSON `type` of a text message, or a `ws.*` name for everything else.

    msgspec skips every field but `type` without building objects for them, so
    this costs little even for large FILE_CONTENTS bodies.
    """
    opcode = message.opcode
    if opcode in _CONTROL_NAMES:
        return _CONTROL_NAMES[opcode]
    if opcode == OP_BINARY:
        return TYPE_BINARY
    if opcode != OP_TEXT or message.compressed:
        return TYPE_TEXT
    try:
        decoded = _decoder.decode(message.payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return TYPE_TEXT
    return decoded.type if decoded.type is not None else TYPE_TEXT
