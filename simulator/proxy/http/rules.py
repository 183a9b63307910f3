"""HTTP faults: which requests or responses to lose, and which requests to replay.

Sans-I/O, like the WebSocket message rules: a rule matches a request by its
method and path, and `decide` is a pure function of the rule list. Actions:

- `drop_request`: the request never reaches the server, and the sender's
  connection is reset once it has sent it (a POST lost on the way: the
  sender sees a network error and may retry);
- `drop_response`: the request reaches the server, which handles it; its
  answer never reaches the sender, whose connection is reset (the nastier
  loss: the work is done, and the sender cannot know);
- `replay`: the request passes, and `delay` ms later an exact copy reaches
  the server again on a connection of its own, whose answer nobody reads (an
  intermediary that retried it): late, out of order, a duplicate.

`path` matches the request's path (without the query) exactly, or as its
last segments (`/agent/results` matches `/prefix/api/agent/results`, never
`/agent/results/chunk`). `count` limits how many requests a rule takes; it
disappears when used up. Counts are shared by all connections of a link;
the first matching rule wins.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tetherbed.simulator.proxy import errors

HttpAction = Literal["drop_request", "drop_response", "replay"]
HTTP_ACTIONS: frozenset[str] = frozenset({"drop_request", "drop_response", "replay"})


@dataclass
class HttpRule:
    """One HTTP fault; field names are its JSON names."""

    action: HttpAction
    path: str
    method: str = "POST"
    count: int | None = None
    delay: int = 0  # ms, for replay
    name: str = ""
    matched: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if self.action not in HTTP_ACTIONS:
            raise errors.BadRequest(f"action must be one of {sorted(HTTP_ACTIONS)}")
        if not isinstance(self.path, str) or not self.path.startswith("/"):
            raise errors.BadRequest("path must start with /")
        if not isinstance(self.method, str) or not self.method.isalpha():
            raise errors.BadRequest("method must be an HTTP method such as POST")
        self.method = self.method.upper()
        if self.count is not None and (isinstance(self.count, bool) or self.count < 1):
            raise errors.BadRequest("count must be at least 1 (omit it for no limit)")
        if isinstance(self.delay, bool) or not isinstance(self.delay, int) or self.delay < 0:
            raise errors.BadRequest("delay must be a non-negative number of ms")

    def matches(self, method: str, path: str) -> bool:
        if method.upper() != self.method:
            return False
        # `path` starts with "/", so a suffix match always starts at a segment.
        wanted = self.path.rstrip("/") or "/"
        return path.endswith(wanted)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> HttpRule:
        known = {"action", "path", "method", "count", "delay", "name"}
        unknown = set(body) - known
        if unknown:
            raise errors.BadRequest(f"unknown HTTP rule field(s) {sorted(unknown)}")
        if "action" not in body or "path" not in body:
            raise errors.BadRequest("an HTTP rule needs action and path")
        return cls(**{k: body[k] for k in known if k in body})

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "path": self.path,
            "method": self.method,
            "count": self.count,
            "delay": self.delay,
            "matched": self.matched,
        }


class HttpRuleBook:
    def __init__(self) -> None:
        self._rules: list[HttpRule] = []
        self._names = itertools.count(1)

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self) -> Iterator[HttpRule]:
        return iter(list(self._rules))

    def add(self, rule: HttpRule | Mapping[str, Any]) -> HttpRule:
        if not isinstance(rule, HttpRule):
            rule = HttpRule.from_json(rule)
        if not rule.name:
            rule.name = f"http_{rule.action}_{next(self._names)}"
        self._rules.append(rule)
        return rule

    def clear(self) -> None:
        self._rules.clear()

    def decide(self, method: str, path: str) -> HttpRule | None:
        """The rule that takes this request (its count used), or None."""
        for rule in self._rules:
            if rule.matches(method, path):
                rule.matched += 1
                if rule.count is not None and rule.matched >= rule.count:
                    self._rules.remove(rule)
                return rule
        return None
