"""The hub's per-connection and per-target state (plain data, no behaviour)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tetherbed.hub.agent_states import AgentState
from tetherbed.wire import catalog
from tetherbed.wire.envelope import Envelope
from tetherbed.wire.version import CURRENT_TEXT

NEVER = float("inf")
#: The request types a client may send to a session, and to a machine's control
#: connection: one set each for every target (a set per target cost ~3.7 KiB).
SESSION_REQUESTS = frozenset(str(kind) for kind in catalog.DATA_REQUESTS)
MACHINE_REQUESTS = frozenset(str(kind) for kind in catalog.CONTROL_REQUESTS)


@dataclass(eq=False, slots=True)
class Target:
    """Where client requests go: a session's data connection, or a machine's
    control connection. Holds requests while the agent has no free slot, and
    — for sessions — while a lost agent may still come back."""

    key: str
    #: "session" or "machine"
    kind: str
    #: The user the session or machine belongs to.
    user: str = ""
    owner: AgentLink | None = None
    #: Requests waiting to be issued, oldest (or retried) first.
    queue: deque[Route] = field(default_factory=deque)
    #: Until when requests are held, and the session kept reserved, for a
    #: lost agent to reconnect.
    hold_until: float | None = None
    #: The machine whose connection dropped unexpectedly: only it may claim
    #: the session while the hold lasts (it never explicitly disconnected).
    reserved_for: str | None = None
    #: The machine a session was last served from (for transparent restore).
    machine_id: str | None = None
    #: The last root grant seen for this session (for transparent restore).
    root_grant: str | None = None
    #: A RESTORE_SESSION the hub sent on its own is in flight.
    restoring: bool = False
    #: The user revoked the session: no agent, no request, ever again.
    revoked: bool = False
    #: Requests the agent refused with SHIM_OVERLOADED, waiting out their backoff.
    deferred: list[Route] = field(default_factory=list)
    #: When the earliest deferred request may go again.
    deferred_at: float = NEVER
    #: When the oldest queued request has waited for a slot long enough (only
    #: while an agent owns the target; while none does, the hold bounds it).
    queue_deadline: float = NEVER
    #: The request types a client may send here (derived from `kind`).
    allowed: frozenset[str] = frozenset()
    is_session: bool = False

    def __post_init__(self) -> None:
        self.is_session = self.kind == "session"
        self.allowed = SESSION_REQUESTS if self.is_session else MACHINE_REQUESTS


@dataclass(eq=False, slots=True)
class ClientLink:
    peer: Any
    user: str
    target: Target
    #: client request id → the Route carrying it (sent or queued).
    inflight: dict[str, Route] = field(default_factory=dict)
    closed: bool = False


@dataclass(eq=False, slots=True)
class Route:
    """One relayed request: where its answer goes back to."""

    client: ClientLink | None
    client_id: str
    kind: str
    envelope: Envelope
    hub_id: str = ""
    #: How many times it was re-issued after its connection died.
    attempts: int = 0
    #: How many times the agent refused it with SHIM_OVERLOADED (it ran nothing).
    refusals: int = 0
    #: Some attempt reached an agent that then vanished without answering:
    #: it may have run. A refusal never sets this, and nothing clears it.
    may_have_run: bool = False
    #: Streamed frames of it (LOCAL_LLM_COMPLETION_CHUNK) reached the client:
    #: running it again would send the client a second stream under one id.
    streamed: bool = False
    #: While issued: when the hub stops waiting for the answer.
    deadline: float = NEVER
    #: While deferred: not before this time.
    not_before: float = 0.0
    #: When it entered the queue (for the wait-for-a-slot bound).
    queued_at: float = 0.0


@dataclass(eq=False, slots=True)
class AgentLink:
    peer: Any
    user: str
    session_id: str | None
    connection_id: str
    state: AgentState = AgentState.AWAITING_HELLO
    machine_id: str = ""
    version: str = CURRENT_TEXT
    granted: frozenset[str] = frozenset()
    #: The models a LOCAL_LLM_COMPLETION may name: HELLO's local_llm_models when
    #: local_llm was granted, else none (the spec: local LLM routing unavailable).
    llm_models: tuple[str, ...] = ()
    #: The root the agent serves, from its HELLO (None on control connections).
    allowed_root: str | None = None
    #: The session or machine this connection serves once READY.
    target: Target | None = None
    #: How many requests may be outstanding on it as the hub best knows now.
    capacity: int = 0
    #: The most it may ever be: HELLO_ACK's max_concurrent, lowered by the
    #: agent's own STATUS.max_concurrent.
    limit: int = 0
    #: hub request id → route, for requests sent and not yet answered.
    routes: dict[str, Route] = field(default_factory=dict)
    #: hub id → request type of requests given up at their deadline, so that a
    #: late answer is recognised (bounded; the oldest are forgotten).
    abandoned: dict[str, str] = field(default_factory=dict)
    #: No route's deadline is earlier than this (it may be stale-early).
    expiry_at: float = NEVER
    ping_id: str | None = None
    ping_at: float = 0.0
    pong_deadline: float | None = None
    hello_deadline: float | None = None
    connected_at: float = 0.0
    #: The hub closed this connection itself (keepalive, takeover, revoke).
    hub_closed: bool = False
    #: The `evict_after_drain` defect: taken over, but kept (READY, no longer
    #: the owner) until its requests in flight are answered, then evicted.
    evict_when_idle: bool = False

    @property
    def free_slots(self) -> int:
        return self.capacity - len(self.routes)
