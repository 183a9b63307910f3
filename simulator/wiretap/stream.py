"""The recorder on a byte stream: one node's TCP connection, read as HTTP and WebSocket.

The fault proxy hands it the bytes the node sent (`up`, as read from the
node's socket, before any fault) and the bytes that reached the node (`down`,
as written to the node's socket, after every fault). Until the upgrade is
answered it reads HTTP heads; after `101 Switching Protocols` it reads RFC
6455 frames with the proxy's own parser, never changing a byte. A stream that
stops parsing (not a WebSocket, or TLS it cannot see into) is no longer
recorded message by message; its connect and end still are.
"""

from __future__ import annotations

from tetherbed.simulator.proxy.ws.frames import (
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    FrameError,
    FrameParser,
    parse_close_payload,
)
from tetherbed.simulator.proxy.ws.handshake import MAX_HEAD, is_upgrade_request, split_head
from tetherbed.simulator.proxy.ws.messages import MessageAssembler
from tetherbed.simulator.wiretap.log import WireConnection
from tetherbed.simulator.wiretap.records import DOWN, UP

_CONTROL_TYPES = {OP_PING: "ws.ping", OP_PONG: "ws.pong"}


class StreamTap:
    """Feed it both directions of one connection; it records what it can read."""

    def __init__(self, connection: WireConnection) -> None:
        self.connection = connection
        self._heads = {UP: bytearray(), DOWN: bytearray()}
        self._early = bytearray()  # frames the node sent before the hub's answer
        self._upgraded = False
        self._requested = False
        self._blind = False  # not HTTP/WebSocket (or unreadable): connect/end only
        self._parsers: dict[str, FrameParser] = {}
        self._assemblers: dict[str, MessageAssembler] = {}

    def feed(self, direction: str, data: bytes, now: float) -> None:
        if self._blind or not data:
            return
        if self._upgraded:
            self._frames(direction, data, now)
        elif direction == UP:
            self._request(data, now)
        else:
            self._response(data, now)

    def end(self, how: str, now: float) -> None:
        self.connection.end(how, now)

    def unreachable(self, now: float) -> None:
        self.connection.unreachable(now)

    # --- HTTP ---------------------------------------------------------------------

    def _request(self, data: bytes, now: float) -> None:
        if self._requested:
            self._early += data
            return
        head = self._heads[UP]
        head += data
        split = split_head(bytes(head))
        if split is None:
            self._blind = len(head) > MAX_HEAD or not head[:1].isalpha()
            return
        request, rest = split
        head.clear()
        line = request.split(b"\r\n", 1)[0].split(b" ")
        if len(line) < 3 or not line[2].startswith(b"HTTP/"):
            self._blind = True
            return
        self._requested = True
        path = line[1].decode("latin-1")
        if is_upgrade_request(request):
            self.connection.upgrade(path, now)
        else:
            self.connection.plain_request(line[0].decode("latin-1"), path, now)
        self._early += rest

    def _response(self, data: bytes, now: float) -> None:
        head = self._heads[DOWN]
        head += data
        split = split_head(bytes(head))
        if split is None:
            self._blind = len(head) > MAX_HEAD
            return
        response, rest = split
        head.clear()
        parts = response.split(b"\r\n", 1)[0].split(b" ")
        status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
        self.connection.response(status, now)
        if status != 101:
            self._blind = True
            return
        self._upgraded = True
        self._parsers = {UP: FrameParser(masked=True), DOWN: FrameParser(masked=False)}
        self._assemblers = {UP: MessageAssembler(), DOWN: MessageAssembler()}
        if self._early:  # sent before the answer came: recorded first
            early = bytes(self._early)
            self._early.clear()
            self._frames(UP, early, now)
        if rest:
            self._frames(DOWN, rest, now)

    # --- WebSocket ----------------------------------------------------------------

    def _frames(self, direction: str, data: bytes, now: float) -> None:
        parser = self._parsers.get(direction)
        if parser is None:
            return
        connection = self.connection
        for frame in parser.feed(data):
            try:
                message = self._assemblers[direction].feed(frame)
            except FrameError:
                del self._parsers[direction]
                return
            if message is None:
                continue
            opcode = message.opcode
            if opcode == OP_CLOSE:
                code, reason = parse_close_payload(message.payload)
                connection.close(direction, code, reason, now)
            elif opcode in _CONTROL_TYPES:
                connection.control(direction, _CONTROL_TYPES[opcode], now)
            else:
                connection.message(direction, message.payload, now, text=opcode != OP_BINARY)
        if parser.error is not None:
            del self._parsers[direction]
