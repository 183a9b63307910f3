"""A HubCore driven by hand: peers are plain objects, time is a manual clock.

`Hub.core` is the real core behind a thin recorder that does what a driver
does with the non-frame actions: `Record`s go to `hub.events`, `Persist`s to
`hub.persisted`, and `Authorize` is answered from `hub.authority` at once
(its answer's actions replace it), so tests see frames and closes only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from tetherbed.hub.actions import Authorize, Close, Persist, Record, Send
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
    if caps is not None and "local_llm" in caps:  # routing needs an advertised model
        payload["local_llm_models"] = ["m"]
    return enc(type="HELLO", id=f"hello-{machine}", payload=payload)


class RecordingCore:
    """Every call goes to the core; the actions a driver would consume are consumed."""

    def __init__(self, core: HubCore, hub: Hub) -> None:
        self._core = core
        self._hub = hub

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._core, name)
        if not callable(attribute) or name.startswith("_"):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attribute(*args, **kwargs)
            if (
                isinstance(result, tuple)
                and len(result) == 2
                and isinstance(result[0], AgentLink | ClientLink)
            ):
                self._consume(result[1])
                return result[0]
            if isinstance(result, list | tuple):
                return self._consume(result)
            return result

        return call

    def _consume(self, actions: Any) -> Any:
        kept: list = []
        for action in actions:
            if isinstance(action, Record):
                self._hub.events.append((action.event, action.fields))
            elif isinstance(action, Persist):
                self._hub.persisted.append(action.fact)
            elif isinstance(action, Authorize):
                allowed = self._hub.authority(action.user, action.session_id)
                kept.extend(self._consume(self._core.authorized(action.ticket, allowed)))
            else:
                kept.append(action)
        # Keep the core's own type: the empty answer must stay immutable.
        return kept if kept or isinstance(actions, list) else actions


class Hub:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualClock()
        self.events: list[tuple[str, dict]] = []
        self.persisted: list[Any] = []
        #: May `user` address `session_id`? (what the store answers; True: not revoked)
        self.authority: Callable[[str, str], bool] = lambda user, session_id: True
        self.real_core = HubCore(HubConfig(**config), self.clock)
        self.core: Any = RecordingCore(self.real_core, self)

    def agent(
        self, session: str | None = "s1", machine: str = "m1", **kw: Any
    ) -> tuple[Peer, AgentLink, list]:
        peer = Peer(f"agent-{machine}")
        link = self.core.agent_opened(peer, user="alice", session_id=session)
        return peer, link, self.core.agent_frame(link, hello(machine, **kw))

    def client(self, session: str = "s1") -> tuple[Peer, ClientLink]:
        peer = Peer("client")
        return peer, self.core.client_opened(peer, user="alice", session_id=session)
