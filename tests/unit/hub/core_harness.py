"""A HubCore driven by hand: peers are plain objects, time is a manual clock."""

from __future__ import annotations

from typing import Any

import msgspec

from tetherbed.hub.actions import Close, Send
from tetherbed.hub.config import HubConfig
from tetherbed.hub.core import HubCore
from tetherbed.hub.links import AgentLink, ClientLink
from tetherbed.runtime.clock import ManualClock


class Peer:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def enc(**frame: Any) -> bytes:
    frame.setdefault("ts", 1.0)
    frame.setdefault("version", "1.1")
    return msgspec.json.encode(frame)


def frames(actions: list, peer: Peer) -> list[dict]:
    return [msgspec.json.decode(a.data) for a in actions if isinstance(a, Send) and a.peer is peer]


def closes(actions: list, peer: Peer) -> list[Close]:
    return [a for a in actions if isinstance(a, Close) and a.peer is peer]


def hello(
    machine: str = "m1",
    *,
    caps: list[str] | None = None,
    version: str = "1.1",
    arch: str = "x86_64",
) -> bytes:
    payload = {
        "shim_version": "0.1.0",
        "protocol_version": version,
        "machine_id": machine,
        "platform": "linux",
        "arch": arch,
        "capabilities": caps if caps is not None else ["files", "shell", "directory_browse"],
    }
    return enc(type="HELLO", id=f"hello-{machine}", payload=payload)


class Hub:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualClock()
        self.events: list[tuple[str, dict]] = []
        self.core = HubCore(
            HubConfig(**config), self.clock, observer=lambda e, **f: self.events.append((e, f))
        )

    def agent(
        self, session: str | None = "s1", machine: str = "m1", **kw: Any
    ) -> tuple[Peer, AgentLink, list]:
        peer = Peer(f"agent-{machine}")
        link = self.core.agent_opened(peer, user="alice", session_id=session)
        return peer, link, self.core.agent_frame(link, hello(machine, **kw))

    def client(self, session: str = "s1") -> tuple[Peer, ClientLink]:
        peer = Peer("client")
        return peer, self.core.client_opened(peer, user="alice", session_id=session)
