"""A dsh hub core on a manual clock, with the bookkeeping a driver would do."""

from __future__ import annotations

import base64
import itertools
from typing import Any

from tetherbed.hub.dsh.actions import End, Output, Persist, Push, Settled, Stream
from tetherbed.hub.dsh.config import DshConfig
from tetherbed.hub.dsh.core import Answer, DshHubCore
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.dsh.sse import SseDecoder, SseEvent

SERVER = "http://hub.test:8765"


def counting_entropy() -> Any:
    """Deterministic 'random' bytes: a counter, so ids and tokens differ."""
    counter = itertools.count(1)

    def entropy(n: int) -> bytes:
        value = next(counter)
        return value.to_bytes(8, "little").ljust(n, b"\x5a")[:n]

    return entropy


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Hub:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualClock()
        self.core = DshHubCore(DshConfig(**config), self.clock, entropy=counting_entropy())
        self.events: dict[Stream, list[SseEvent]] = {}
        self.decoders: dict[Stream, SseDecoder] = {}
        self.ended: dict[Stream, str] = {}
        self.outputs: dict[str, list[tuple[str, bytes]]] = {}
        self.settled: dict[str, Settled] = {}
        self.persisted: list[Persist] = []

    def apply(self, actions: list) -> list:
        for action in actions:
            if isinstance(action, Push):
                decoder = self.decoders.setdefault(action.stream, SseDecoder())
                got = [e for e in decoder.feed(action.data) if isinstance(e, SseEvent)]
                self.events.setdefault(action.stream, []).extend(got)
            elif isinstance(action, End):
                self.ended[action.stream] = action.reason
            elif isinstance(action, Output):
                self.outputs.setdefault(action.request_id, []).append((action.stream, action.data))
            elif isinstance(action, Settled):
                assert action.request_id not in self.settled, "settled twice"
                self.settled[action.request_id] = action
            elif isinstance(action, Persist):
                self.persisted.append(action)
        return actions

    def call(self, outcome: tuple[Answer, list]) -> Answer:
        answer, actions = outcome
        self.apply(actions)
        return answer

    # --- shortcuts ----------------------------------------------------------

    def key(self, user: str = "alice", **body: Any) -> str:
        answer = self.call(self.core.create_key(user, body, SERVER))
        assert answer.status == 200, answer
        return answer.body["key"]

    def enroll(self, key: str, name: str = "mac-mini", **machine: Any) -> Answer:
        body = {
            "key": key,
            "agentVersion": "1.3.0",
            "machine": {"hostname": name, "name": name, "os": "linux", **machine},
            "capabilities": ["exec", "fs"],
        }
        return self.call(self.core.enroll(body, SERVER))

    def enrolled(self, user: str = "alice", name: str = "mac-mini") -> tuple[str, str]:
        """(computer id, token) of a freshly enrolled computer."""
        answer = self.enroll(self.key(user), name)
        assert answer.status == 200, answer
        return answer.body["computerId"], answer.body["token"]

    def stream(self, token: str) -> Stream:
        stream, actions = self.core.open_stream(token)
        assert isinstance(stream, Stream), stream
        self.apply(actions)
        return stream

    def names(self, stream: Stream) -> list[str]:
        return [e.event for e in self.events.get(stream, [])]

    def last(self, stream: Stream, name: str) -> dict:
        return [e for e in self.events[stream] if e.event == name][-1].json()

    def tick(self, seconds: float) -> list:
        self.clock.advance(seconds)
        return self.apply(self.core.on_timer())

    def online(self, computer_id: str) -> bool:
        return self.core.online(self.core.registry.computers[computer_id])
