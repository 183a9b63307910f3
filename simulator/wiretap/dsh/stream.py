"""The recorder on a byte stream: one dsh-computers connection, read as HTTP and SSE.

The proxy and the sim network hand it the bytes the agent sent (`up`, before
any fault) and the bytes that reached the agent (`down`, after every fault).
Requests are read with the proxy's HTTP parser and recorded once complete;
each answer is paired with the oldest unanswered request; an event-stream
answer is decoded as SSE (`wire.dsh.sse`) and each event recorded as it
arrives. What it cannot read as HTTP is no longer recorded exchange by
exchange; the connection's connect and end still are.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from tetherbed.simulator.proxy.http.parser import HttpParser, Part
from tetherbed.simulator.wiretap.dsh import records as d
from tetherbed.simulator.wiretap.dsh.log import DshWireConnection
from tetherbed.simulator.wiretap.records import DOWN, UP
from tetherbed.wire.dsh.sse import SseDecoder, SseError, SseEvent

#: Body bytes kept to digest and summarise one message; a longer body is
#: digested over what was kept (the spec's largest body is 16 MiB).
BODY_KEPT = 32 * 1024 * 1024
_EVENT_STREAM = "text/event-stream"


@dataclass(eq=False, slots=True)
class _Exchange:
    n: int
    method: str
    path: str
    body: bytearray = field(default_factory=bytearray)


class HttpStreamTap:
    def __init__(self, connection: DshWireConnection) -> None:
        self.connection = connection
        self._requests = HttpParser("request")
        self._responses = HttpParser("response")
        self._numbers = 0
        self._sending: _Exchange | None = None
        self._waiting: collections.deque[_Exchange] = collections.deque()
        self._answer: _Exchange | None = None
        self._answer_status = 0
        self._answer_body = bytearray()
        #: The answer being read is an event stream (its decoder is None once
        #: it broke the framing: its events are no longer recorded).
        self._streaming = False
        self._decoder: SseDecoder | None = None

    def feed(self, direction: str, data: bytes, now: float) -> None:
        if not data:
            return
        if direction == UP:
            for part in self._requests.feed(data):
                self._request_part(part, now)
        elif direction == DOWN:
            for part in self._responses.feed(data):
                self._response_part(part, now)

    def end(self, how: str, now: float) -> None:
        for part in self._responses.feed_eof():
            self._response_part(part, now)
        if self._streaming and self._answer is not None:
            self.connection.sse_end(self._answer.n, how, now)
            self._streaming = False
        self.connection.end(how, now)

    def unreachable(self, now: float) -> None:
        self.connection.unreachable(now)

    # --- requests --------------------------------------------------------------------

    def _request_part(self, part: Part, now: float) -> None:
        if part.kind == "head" and part.head is not None:
            self._numbers += 1
            method = part.head.method or "GET"
            self._sending = _Exchange(self._numbers, method, part.head.path)
            self._responses.expect(method)
            return
        exchange = self._sending
        if exchange is None:
            return
        if part.kind == "data" and len(exchange.body) < BODY_KEPT:
            exchange.body += part.data[: BODY_KEPT - len(exchange.body)]
        elif part.kind == "end":
            self._sending = None
            self._waiting.append(exchange)
            self.connection.request(
                exchange.n, exchange.method, exchange.path, bytes(exchange.body), now
            )
            exchange.body = bytearray()

    # --- responses -------------------------------------------------------------------

    def _response_part(self, part: Part, now: float) -> None:
        if part.kind == "head" and part.head is not None:
            status = part.head.status or 0
            if 100 <= status < 200:
                return  # interim
            self._answer = self._waiting.popleft() if self._waiting else _Exchange(0, "?", "?")
            self._answer_status = status
            self._answer_body = bytearray()
            if status == 200 and part.head.content_type == _EVENT_STREAM:
                self._streaming = True
                self._decoder = SseDecoder()
                self.connection.sse_open(self._answer.n, self._answer.path, status, now)
            return
        answer = self._answer
        if answer is None:
            return
        if part.kind == "data":
            if self._streaming:
                self._events(answer, part.data, now)
            elif len(self._answer_body) < BODY_KEPT:
                self._answer_body += part.data[: BODY_KEPT - len(self._answer_body)]
        elif part.kind == "end":
            if self._streaming:
                self.connection.sse_end(answer.n, d.ENDED, now)
                self._streaming = False
            else:
                self.connection.response(
                    answer.n,
                    answer.method,
                    answer.path,
                    self._answer_status,
                    bytes(self._answer_body),
                    now,
                )
            self._answer = None
            self._answer_body = bytearray()

    def _events(self, answer: _Exchange, data: bytes, now: float) -> None:
        decoder = self._decoder
        if decoder is None:
            return
        try:
            items = decoder.feed(data)
        except SseError:
            self._decoder = None  # unreadable from here on: no more events recorded
            return
        for item in items:
            if isinstance(item, SseEvent):
                self.connection.sse_event(answer.n, item.event, item.id, item.data, now)
