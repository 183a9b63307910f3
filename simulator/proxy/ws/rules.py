"""Message rules: which WebSocket messages to drop, delay, duplicate, reorder, or
answer with a close frame. Sans-I/O: matching is a pure function of the rule list,
the direction, the message type and an injected random source.

A rule matches by direction and type. `type` is the JSON `type` of a text message
(`PONG`, `EXECUTE_COMMAND`, ...), a `ws.*` name (`ws.ping`, `ws.pong`, `ws.close`,
`ws.binary`, `ws.text`), or `*` for every data message (never control frames, so
`*` cannot break the closing handshake by accident). `count` limits how many
messages a rule takes ("the next 1 EXECUTE_COMMAND"); the rule disappears when
it is used up. Counts are shared by all connections of a proxy. Rules are tried
in the order they were added and the first match wins.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.streams import Stream, StreamSelector, select_streams
from tetherbed.simulator.proxy.ws.messages import CONTROL_TYPES

Action = Literal["drop", "delay", "duplicate", "reorder", "close", "reissue"]
Toward = Literal["client", "server", "both"]
ACTIONS: frozenset[str] = frozenset({"drop", "delay", "duplicate", "reorder", "close", "reissue"})
TOWARDS: frozenset[str] = frozenset({"client", "server", "both"})


def check_close(toward: object, code: object) -> None:
    """Refuse a close that could not be sent: unknown target, or a code outside
    1000..4999 (the range a Close frame may carry)."""
    if toward not in TOWARDS:
        raise errors.BadRequest("toward must be client, server or both")
    if isinstance(code, bool) or not isinstance(code, int) or not 1000 <= code <= 4999:
        raise errors.BadRequest("close code must be an integer within 1000..4999")


@dataclass
class MessageRule:
    """One message fault; field names are the JSON names of the HTTP API.

    - drop: the message is not forwarded.
    - delay: forwarded after `delay` ms; later messages overtake it.
    - duplicate: forwarded, then `copies` more times (re-masked when client→server).
    - reorder: held until the next data message in the same direction has passed,
      then forwarded after it (or after `max_hold` ms when given).
    - close: the message is dropped and a Close frame with `code`/`reason` is sent
      toward `toward` (see `WsSession.inject_close`).
    - reissue: the message is forwarded, and a copy (under a new id) is sent
      again toward the client once its next connection is accepted (HELLO_ACK
      passes): a retry layer that ignores the idempotency table, as a hub with
      that bug would be. Downstream only.
    """

    action: Action
    stream: StreamSelector = "both"
    type: str = "*"
    count: int | None = None
    delay: int = 0
    copies: int = 1
    max_hold: int | None = None
    code: int = 1000
    reason: str = ""
    toward: Toward = "client"
    probability: float = 1.0
    name: str = ""
    matched: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise errors.BadRequest(f"action must be one of {sorted(ACTIONS)}")
        try:
            select_streams(self.stream)
        except ValueError as exc:
            raise errors.BadRequest(str(exc)) from None
        if self.count is not None and self.count < 1:
            raise errors.BadRequest("count must be at least 1 (omit it for no limit)")
        if self.delay < 0 or self.copies < 1 or (self.max_hold or 0) < 0:
            raise errors.BadRequest("delay and max_hold must be >= 0, copies >= 1")
        if not isinstance(self.type, str) or not isinstance(self.probability, int | float):
            raise errors.BadRequest("type must be a string and probability a number")
        check_close(self.toward, self.code)
        if self.action == "reissue" and self.stream != "downstream":
            raise errors.BadRequest("reissue acts on the downstream (hub → client) stream")

    def applies_to(self, stream: Stream, message_type: str) -> bool:
        if stream not in select_streams(self.stream):
            return False
        if self.type == "*":
            return message_type not in CONTROL_TYPES
        return self.type == message_type

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MessageRule:
        if not isinstance(data, Mapping):
            raise errors.bad_body("a message rule is a JSON object")
        if "action" not in data:
            raise errors.missing_field("action")
        known = {
            "action", "stream", "type", "count", "delay", "copies", "max_hold",
            "code", "reason", "toward", "probability", "name",
        }  # fmt: skip
        fields = {key: value for key, value in data.items() if key in known}
        try:
            return cls(**fields)
        except TypeError as exc:
            raise errors.bad_body(str(exc)) from None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "stream": self.stream,
            "type": self.type,
            "count": self.count,
            "delay": self.delay,
            "copies": self.copies,
            "max_hold": self.max_hold,
            "code": self.code,
            "reason": self.reason,
            "toward": self.toward,
            "probability": self.probability,
            "matched": self.matched,
        }


class RuleBook:
    """The ordered rules of one proxy."""

    def __init__(self) -> None:
        self._rules: list[MessageRule] = []
        self._numbers = itertools.count(1)
        #: Messages a `reissue` rule saw, waiting for the client's next connection.
        self.reissues: list[bytes] = []

    def __iter__(self) -> Iterator[MessageRule]:
        return iter(list(self._rules))

    def __len__(self) -> int:
        return len(self._rules)

    def add(self, rule: MessageRule) -> MessageRule:
        if not rule.name:
            rule.name = f"{rule.action}_{rule.type}_{next(self._numbers)}"
        if any(existing.name == rule.name for existing in self._rules):
            raise errors.rule_exists(rule.name)
        self._rules.append(rule)
        return rule

    def get(self, name: str) -> MessageRule:
        for rule in self._rules:
            if rule.name == name:
                return rule
        raise errors.rule_not_found(name)

    def remove(self, name: str) -> None:
        self._rules.remove(self.get(name))

    def clear(self) -> None:
        self._rules.clear()

    def watches(self, stream: Stream) -> bool:
        """Whether any rule could match in this direction (else skip decoding)."""
        return any(stream in select_streams(rule.stream) for rule in self._rules)

    def decide(
        self,
        stream: Stream,
        message_type: str,
        rng: random.Random,
        *,
        allow: frozenset[str] = ACTIONS,
    ) -> MessageRule | None:
        """The rule to apply to this message, consuming one of its `count`."""
        for rule in self._rules:
            if rule.action not in allow or not rule.applies_to(stream, message_type):
                continue
            if rule.probability < 1.0 and rng.random() >= rule.probability:
                continue
            rule.matched += 1
            if rule.count is not None:
                rule.count -= 1
                if rule.count == 0:
                    self._rules.remove(rule)
            return rule
        return None
