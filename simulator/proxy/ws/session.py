"""The WebSocket-aware stage of one proxied connection, sans-I/O.

It takes the bytes each side sent and returns actions for the I/O driver: bytes
to pass on in a direction, a half-close to pass on, a timer to set, or the end of
the connection. Until the upgrade completes, and for anything that is not a
WebSocket, bytes pass through unchanged. After `101 Switching Protocols` both
directions are parsed into messages and the proxy's `RuleBook` decides each one.
If a stream stops parsing as valid framing, that direction falls back to raw
forwarding: a broken peer is the system under test, never a reason to crash.

Injected closes (`inject_close`) play the closing handshake on the proxy's side:
the targeted side gets a Close frame, nothing else crosses between the two sides
any more, the target's Close reply is swallowed, and once every target replied
(or `close_timeout` passed) both TCP connections are closed. A side that was not
targeted sees its TCP connection end without a Close frame (code 1006).
"""

from __future__ import annotations

import enum
import itertools
import json
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

from tetherbed.simulator.proxy.streams import DOWNSTREAM, STREAMS, UPSTREAM, Stream
from tetherbed.simulator.proxy.ws.frames import (
    DEFAULT_MAX_PAYLOAD,
    OP_CLOSE,
    OP_TEXT,
    FrameError,
    FrameParser,
    build_frame,
    close_payload,
)
from tetherbed.simulator.proxy.ws.handshake import (
    MAX_HEAD,
    could_be_request,
    is_switching_protocols,
    is_upgrade_request,
    split_head,
    strip_extensions,
)
from tetherbed.simulator.proxy.ws.messages import Message, MessageAssembler, message_type
from tetherbed.simulator.proxy.ws.rules import ACTIONS, RuleBook

log = logging.getLogger(__name__)
_NO_REORDER = ACTIONS - {"reorder"}
#: Where a connection is accepted: the moment `reissue` copies are sent.
_ACCEPTED = "HELLO_ACK"
MAX_EARLY = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Send:
    """Pass these bytes on in this direction; `frame`: they are one whole
    WebSocket message (or control frame), which a frame scheduler may hold."""

    stream: Stream
    data: bytes
    frame: bool = False


@dataclass(frozen=True, slots=True)
class SendEof:
    """Pass the sender's half-close on in this direction."""

    stream: Stream


@dataclass(frozen=True, slots=True)
class CallAt:
    """Call `timer_fired(token, now)` at loop time `when`."""

    when: float
    token: int


@dataclass(frozen=True, slots=True)
class EndConnection:
    """Close both sides' TCP connections (after what is already queued)."""

    reason: str


SessionAction = Send | SendEof | CallAt | EndConnection


class _Mode(enum.Enum):
    SNIFF = "sniff"  # waiting for the client's first request head
    AWAIT_RESPONSE = "await_response"  # upgrade requested; waiting for the server's answer
    FRAMES = "frames"
    RAW = "raw"


class WsSession:
    def __init__(
        self,
        rules: RuleBook,
        rng: random.Random,
        *,
        strip_extensions: bool = True,
        close_timeout: float = 2.0,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        mask_source: Callable[[], bytes] = lambda: os.urandom(4),
    ) -> None:
        self._rules = rules
        self._rng = rng
        self._strip = strip_extensions
        self._close_timeout = close_timeout
        self._max_payload = max_payload
        self._mask = mask_source
        self._mode = _Mode.SNIFF
        self._head: dict[Stream, bytearray] = {UPSTREAM: bytearray(), DOWNSTREAM: bytearray()}
        self._early = bytearray()  # client bytes after its upgrade request, before the 101
        self._parsers: dict[Stream, FrameParser] = {}
        self._assemblers: dict[Stream, MessageAssembler] = {}
        self._raw_streams: set[Stream] = set()
        self._held: dict[Stream, tuple[bytes, int | None] | None] = dict.fromkeys(STREAMS)
        self._delayed: dict[Stream, int] = dict.fromkeys(STREAMS, 0)
        self._eof_waiting: set[Stream] = set()
        self._timers: dict[int, tuple[str, Stream | None, bytes]] = {}
        self._tokens = itertools.count()
        self._severed = False
        self._awaiting_reply: set[str] = set()
        self._ended = False

    @property
    def is_websocket(self) -> bool:
        """True once the upgrade completed and both directions parse as frames."""
        return self._mode is _Mode.FRAMES and not self._raw_streams

    @property
    def closing(self) -> bool:
        return self._severed

    # -- inputs ---------------------------------------------------------------

    def receive(self, stream: Stream, data: bytes, now: float) -> list[SessionAction]:
        if self._mode is _Mode.RAW or stream in self._raw_streams:
            return [Send(stream, data)] if data and not self._severed else []
        if self._mode is _Mode.FRAMES:
            return self._frames(stream, data, now)
        if self._mode is _Mode.SNIFF:
            return self._sniff(stream, data)
        return self._await_response(stream, data, now)

    def receive_eof(self, stream: Stream, now: float) -> list[SessionAction]:
        if self._severed:
            return self._end("peer closed its connection during an injected close")
        actions: list[SessionAction] = []
        if self._mode in (_Mode.SNIFF, _Mode.AWAIT_RESPONSE):
            actions += self._go_raw()
        elif self._mode is _Mode.FRAMES and stream not in self._raw_streams:
            leftover = self._unparsed(stream)
            if leftover:
                actions.append(Send(stream, leftover))
        actions += self._release_held(stream)
        if self._delayed[stream]:
            self._eof_waiting.add(stream)
            return actions
        actions.append(SendEof(stream))
        return actions

    def timer_fired(self, token: int, now: float) -> list[SessionAction]:
        entry = self._timers.pop(token, None)
        if entry is None:
            return []
        kind, stream, data = entry
        if kind == "close":
            return self._end("no Close reply before the timeout")
        if stream is None or self._severed:
            return []
        if kind == "hold":
            held = self._held[stream]
            return self._release_held(stream) if held is not None and held[1] == token else []
        self._delayed[stream] -= 1
        actions: list[SessionAction] = [Send(stream, data, frame=True)]
        if stream in self._eof_waiting and not self._delayed[stream]:
            self._eof_waiting.discard(stream)
            actions.append(SendEof(stream))
        return actions

    def inject_close(self, toward: str, code: int, reason: str, now: float) -> list[SessionAction]:
        """Send a Close frame toward `client`, `server` or `both`; [] if not possible now."""
        if not self.is_websocket or self._severed:
            return []
        self._severed = True
        targets = {"client", "server"} if toward == "both" else {toward}
        self._awaiting_reply = set(targets)
        self._held = dict.fromkeys(STREAMS)
        self._timers.clear()
        payload = close_payload(code, reason)
        actions: list[SessionAction] = []
        if "client" in targets:
            actions.append(Send(DOWNSTREAM, build_frame(OP_CLOSE, payload).raw, frame=True))
        if "server" in targets:
            frame = build_frame(OP_CLOSE, payload, mask=self._mask())
            actions.append(Send(UPSTREAM, frame.raw, frame=True))
        token = next(self._tokens)
        self._timers[token] = ("close", None, b"")
        actions.append(CallAt(now + self._close_timeout, token))
        return actions

    # -- handshake ------------------------------------------------------------

    def _sniff(self, stream: Stream, data: bytes) -> list[SessionAction]:
        if stream == DOWNSTREAM:  # the server spoke first: this is no HTTP client
            return [*self._go_raw(), Send(DOWNSTREAM, data)]
        buffer = self._head[UPSTREAM]
        buffer += data
        if not could_be_request(bytes(buffer[:MAX_HEAD])):
            return self._go_raw()
        split = split_head(bytes(buffer))
        if split is None:
            return self._go_raw() if len(buffer) > MAX_HEAD else []
        head, rest = split
        buffer.clear()
        if not is_upgrade_request(head):
            self._mode = _Mode.RAW
            return [Send(UPSTREAM, head + rest)]
        self._mode = _Mode.AWAIT_RESPONSE
        self._early += rest
        return [Send(UPSTREAM, strip_extensions(head) if self._strip else head)]

    def _await_response(self, stream: Stream, data: bytes, now: float) -> list[SessionAction]:
        if stream == UPSTREAM:
            self._early += data
            # A client that keeps talking before the 101 is no WebSocket client.
            return self._go_raw() if len(self._early) > MAX_EARLY else []
        buffer = self._head[DOWNSTREAM]
        buffer += data
        split = split_head(bytes(buffer))
        if split is None:
            return self._go_raw() if len(buffer) > MAX_HEAD else []
        head, rest = split
        buffer.clear()
        early = bytes(self._early)
        self._early.clear()
        if not is_switching_protocols(head):
            self._mode = _Mode.RAW
            actions: list[SessionAction] = [Send(DOWNSTREAM, head + rest)]
            return actions + ([Send(UPSTREAM, early)] if early else [])
        self._mode = _Mode.FRAMES
        self._parsers = {
            UPSTREAM: FrameParser(masked=True, max_payload=self._max_payload),
            DOWNSTREAM: FrameParser(masked=False, max_payload=self._max_payload),
        }
        self._assemblers = {UPSTREAM: MessageAssembler(), DOWNSTREAM: MessageAssembler()}
        actions = [Send(DOWNSTREAM, head)]
        if rest:
            actions += self._frames(DOWNSTREAM, rest, now)
        if early:
            actions += self._frames(UPSTREAM, early, now)
        return actions

    def _go_raw(self) -> list[SessionAction]:
        """Stop looking for a WebSocket; hand back everything buffered so far."""
        self._mode = _Mode.RAW
        actions: list[SessionAction] = []
        upstream = bytes(self._head[UPSTREAM]) + bytes(self._early)
        downstream = bytes(self._head[DOWNSTREAM])
        for buffer in (*self._head.values(), self._early):
            buffer.clear()
        if upstream:
            actions.append(Send(UPSTREAM, upstream))
        if downstream:
            actions.append(Send(DOWNSTREAM, downstream))
        return actions

    # -- frames ---------------------------------------------------------------

    def _frames(self, stream: Stream, data: bytes, now: float) -> list[SessionAction]:
        parser = self._parsers[stream]
        assembler = self._assemblers[stream]
        frames = parser.feed(data)
        actions: list[SessionAction] = []
        for index, frame in enumerate(frames):
            try:
                message = assembler.feed(frame)
            except FrameError as exc:
                tail = b"".join(later.raw for later in frames[index:])
                return actions + self._fall_back(stream, exc, tail)
            if message is not None:
                actions += self._on_message(stream, message, now)
        if parser.error is not None:
            actions += self._fall_back(stream, parser.error, b"")
        return actions

    def _unparsed(self, stream: Stream) -> bytes:
        pending = b"".join(frame.raw for frame in self._assemblers[stream].pending())
        return pending + self._parsers[stream].remaining()

    def _fall_back(self, stream: Stream, error: FrameError, tail: bytes) -> list[SessionAction]:
        log.warning("%s stream is not valid WebSocket framing (%s); forwarding raw", stream, error)
        pending = b"".join(frame.raw for frame in self._assemblers[stream].pending())
        raw = pending + tail + self._parsers[stream].remaining()
        self._raw_streams.add(stream)
        if self._severed:
            return []
        actions = self._release_held(stream)
        return actions + ([Send(stream, raw)] if raw else [])

    def _on_message(self, stream: Stream, message: Message, now: float) -> list[SessionAction]:
        if self._severed:
            return self._on_message_while_closing(stream, message)
        waiting = stream == DOWNSTREAM and bool(self._rules.reissues)
        if not self._rules.watches(stream) and not waiting:
            return self._forward(stream, message, [])
        kind = message_type(message)
        allow = ACTIONS if self._held[stream] is None else _NO_REORDER
        rule = self._rules.decide(stream, kind, self._rng, allow=allow)
        if rule is None:
            actions = self._forward(stream, message, [])
            if kind == _ACCEPTED and stream == DOWNSTREAM and self._rules.reissues:
                actions += self._reissue()
            return actions
        if rule.action == "reissue":
            self._rules.reissues.append(message.payload)
            return self._forward(stream, message, [])
        if rule.action == "drop":
            return []
        if rule.action == "delay":
            token = next(self._tokens)
            self._timers[token] = ("delay", stream, message.raw)
            self._delayed[stream] += 1
            return [CallAt(now + rule.delay / 1000, token)]
        if rule.action == "duplicate":
            return self._forward(stream, message, [self._reencode(message)] * rule.copies)
        if rule.action == "reorder":
            token = None
            actions: list[SessionAction] = []
            if rule.max_hold is not None:
                token = next(self._tokens)
                self._timers[token] = ("hold", stream, b"")
                actions.append(CallAt(now + rule.max_hold / 1000, token))
            self._held[stream] = (message.raw, token)
            return actions
        return self.inject_close(rule.toward, rule.code, rule.reason, now)

    def _forward(
        self, stream: Stream, message: Message, copies: list[bytes]
    ) -> list[SessionAction]:
        actions: list[SessionAction] = [Send(stream, message.raw, frame=True)]
        actions += [Send(stream, copy, frame=True) for copy in copies]
        if not message.is_control:
            actions += self._release_held(stream)
        return actions

    def _reissue(self) -> list[SessionAction]:
        """Send every saved request again, each under a new id, toward the client."""
        actions: list[SessionAction] = []
        saved, self._rules.reissues = self._rules.reissues, []
        for payload in saved:
            try:
                body = json.loads(payload)
            except ValueError:
                continue
            if isinstance(body, dict):
                body["id"] = f"{body.get('id')}-again"
                data = json.dumps(body, separators=(",", ":")).encode()
                actions.append(Send(DOWNSTREAM, build_frame(OP_TEXT, data).raw, frame=True))
        return actions

    def _release_held(self, stream: Stream) -> list[SessionAction]:
        held = self._held[stream]
        if held is None:
            return []
        self._held[stream] = None
        return [Send(stream, held[0], frame=True)]

    def _reencode(self, message: Message) -> bytes:
        """A copy of the message with a fresh mask on every client frame."""
        return b"".join(
            frame.remasked(self._mask() if frame.mask is not None else None).raw
            for frame in message.frames
        )

    def _on_message_while_closing(self, stream: Stream, message: Message) -> list[SessionAction]:
        if message.opcode == OP_CLOSE:
            self._awaiting_reply.discard("client" if stream == UPSTREAM else "server")
            if not self._awaiting_reply:
                return self._end("closing handshake complete")
        return []

    def _end(self, reason: str) -> list[SessionAction]:
        if self._ended:
            return []
        self._ended = True
        self._timers.clear()
        return [EndConnection(reason)]
