"""The hub's per-connection and per-session state (plain data, no behaviour)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

from tetherbed.wire.envelope import Envelope


class AgentState(Enum):
    AWAITING_HELLO = auto()
    READY = auto()
    #: Taken over or refused: no longer owner, waiting for its socket to close.
    DETACHED = auto()
    CLOSED = auto()


@dataclass(eq=False, slots=True)
class ClientLink:
    peer: Any
    user: str
    session_id: str
    #: client request id → the Route carrying it (sent or queued).
    inflight: dict[str, Route] = field(default_factory=dict)
    closed: bool = False


@dataclass(eq=False, slots=True)
class Route:
    """One relayed request: where its answer goes back to."""

    client: ClientLink
    client_id: str
    kind: str
    envelope: Envelope
    hub_id: str = ""


@dataclass(eq=False, slots=True)
class AgentLink:
    peer: Any
    user: str
    session_id: str | None
    connection_id: str
    state: AgentState = AgentState.AWAITING_HELLO
    machine_id: str = ""
    version: str = "1.1"
    granted: frozenset[str] = frozenset()
    #: The agent's effective max_concurrent as the hub best knows it.
    capacity: int = 0
    #: hub request id → route, for requests sent and not yet answered.
    routes: dict[str, Route] = field(default_factory=dict)
    ping_id: str | None = None
    ping_at: float = 0.0
    pong_deadline: float | None = None
    hello_deadline: float | None = None

    @property
    def free_slots(self) -> int:
        return self.capacity - len(self.routes)


@dataclass(eq=False, slots=True)
class Session:
    session_id: str
    owner: AgentLink | None = None
    #: Requests waiting for a free slot on the owner, oldest first.
    queue: deque[Route] = field(default_factory=deque)
