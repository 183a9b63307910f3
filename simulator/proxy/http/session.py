"""The fault proxy's HTTP stage for one connection, sans-I/O.

It reads both directions as HTTP/1.1 (`parser.py`), pairs each response with
its request (in order, as HTTP/1.1 answers them), and asks the link's
`HttpRuleBook` about every request. The driver gets actions: bytes to pass
on (`Send`, `SendEof`, the WebSocket stage's own), `ResetConnection` (RST
both sides now) and `Replay` (send these request bytes to the server again,
`delay` seconds from now, on a connection of its own, and discard the
answer). Bytes it cannot read as HTTP pass unchanged; once a rule has reset
the connection nothing more crosses.

It offers the WebSocket stage's interface (`receive`, `receive_eof`,
`timer_fired`, `inject_close`, `is_websocket`), so a proxied connection runs
either one.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from tetherbed.simulator.proxy.http.parser import HttpParser, Part
from tetherbed.simulator.proxy.http.rules import HttpRule, HttpRuleBook
from tetherbed.simulator.proxy.streams import DOWNSTREAM, UPSTREAM, Stream
from tetherbed.simulator.proxy.ws.session import Send, SendEof


@dataclass(frozen=True, slots=True)
class ResetConnection:
    """End both sides' connections with RST, now."""

    reason: str


@dataclass(frozen=True, slots=True)
class Replay:
    """Send `data` (a whole request) to the server again after `delay` seconds,
    on a connection of its own; its answer is read and thrown away."""

    data: bytes
    delay: float


HttpAction = Send | SendEof | ResetConnection | Replay


@dataclass(eq=False, slots=True)
class _Exchange:
    rule: HttpRule | None
    copy: bytearray = field(default_factory=bytearray)

    def is_(self, action: str) -> bool:
        return self.rule is not None and self.rule.action == action


class HttpSession:
    is_websocket = False

    def __init__(self, rules: HttpRuleBook) -> None:
        self._rules = rules
        self._requests = HttpParser("request")
        self._responses = HttpParser("response")
        self._pending: collections.deque[_Exchange] = collections.deque()
        self._sending: _Exchange | None = None
        self._reset = False

    def receive(self, stream: Stream, data: bytes, now: float) -> list[HttpAction]:
        if self._reset or not data:
            return []
        if stream == UPSTREAM:
            return self._upstream(self._requests.feed(data))
        return self._downstream(self._responses.feed(data))

    def receive_eof(self, stream: Stream, now: float) -> list[HttpAction]:
        if self._reset:
            return []
        parser = self._requests if stream == UPSTREAM else self._responses
        rest = parser.feed_eof()
        actions = self._upstream(rest) if stream == UPSTREAM else self._downstream(rest)
        return [*actions, SendEof(stream)] if not self._reset else actions

    def timer_fired(self, token: int, now: float) -> list[HttpAction]:
        return []

    def inject_close(self, toward: str, code: int, reason: str, now: float) -> list[HttpAction]:
        return []  # no WebSocket here

    # --- requests -------------------------------------------------------------------

    def _upstream(self, parts: list[Part]) -> list[HttpAction]:
        actions: list[HttpAction] = []
        for part in parts:
            if part.kind == "raw":
                actions.append(Send(UPSTREAM, part.raw))
                continue
            if part.kind == "head":
                assert part.head is not None
                method = part.head.method or "GET"
                self._sending = _Exchange(self._rules.decide(method, part.head.path))
                self._responses.expect(method)
                self._pending.append(self._sending)
            exchange = self._sending
            if exchange is None:  # cannot happen: a body part follows a head
                actions.append(Send(UPSTREAM, part.raw))
                continue
            if exchange.is_("replay"):
                exchange.copy += part.raw
            if not exchange.is_("drop_request") and part.raw:
                actions.append(Send(UPSTREAM, part.raw))
            if part.kind == "end":
                self._sending = None
                if exchange.is_("drop_request"):
                    self._reset = True
                    actions.append(ResetConnection("a rule dropped the request"))
                    return actions
                if exchange.is_("replay"):
                    assert exchange.rule is not None
                    actions.append(Replay(bytes(exchange.copy), exchange.rule.delay / 1000))
        return actions

    # --- responses ------------------------------------------------------------------

    def _downstream(self, parts: list[Part]) -> list[HttpAction]:
        actions: list[HttpAction] = []
        for part in parts:
            if part.kind == "head":
                assert part.head is not None
                status = part.head.status or 0
                if not 100 <= status < 200 and self._pending:
                    answered = self._pending.popleft()
                    if answered.is_("drop_response"):
                        self._reset = True
                        actions.append(ResetConnection("a rule dropped the response"))
                        return actions
            if part.raw:
                actions.append(Send(DOWNSTREAM, part.raw))
        return actions
