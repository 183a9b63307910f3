"""The life of one agent connection at the hub, as one explicit table.

In the manner of h11's `_state.py`: every state change of an `AgentLink` is an
event looked up in `TRANSITIONS`, and an event a state does not list is a bug
in the hub (raised, never ignored), so no code path can move a link where the
table does not allow it.

    AWAITING_HELLO --HELLO_ACCEPTED--> READY
    AWAITING_HELLO --REFUSED---------> DETACHED   (bad HELLO, version, arch, owner, revoked)
    AWAITING_HELLO --HELLO_TIMEOUT---> DETACHED
    READY ----------EVICTED----------> DETACHED   (taken over, replaced, revoked)
    any but CLOSED -SOCKET_CLOSED----> CLOSED

A DETACHED link is no longer routed to; answers it still sends for requests
it holds are relayed until its socket closes. A link the hub closes for a
missed PONG or as a slow consumer stays READY until the socket is gone: its
session remains its until then, so that what it held is retried by the rules
for a dropped connection.
"""

from __future__ import annotations

from enum import Enum, auto
from typing import Protocol


class AgentState(Enum):
    AWAITING_HELLO = auto()
    READY = auto()
    #: Refused, taken over or revoked: no longer routed to, waiting for its socket to close.
    DETACHED = auto()
    CLOSED = auto()


class AgentEvent(Enum):
    HELLO_ACCEPTED = auto()
    REFUSED = auto()
    HELLO_TIMEOUT = auto()
    EVICTED = auto()
    SOCKET_CLOSED = auto()


S, E = AgentState, AgentEvent

TRANSITIONS: dict[AgentState, dict[AgentEvent, AgentState]] = {
    S.AWAITING_HELLO: {
        E.HELLO_ACCEPTED: S.READY,
        E.REFUSED: S.DETACHED,
        E.HELLO_TIMEOUT: S.DETACHED,
        E.SOCKET_CLOSED: S.CLOSED,
    },
    S.READY: {E.EVICTED: S.DETACHED, E.SOCKET_CLOSED: S.CLOSED},
    S.DETACHED: {E.SOCKET_CLOSED: S.CLOSED},
    S.CLOSED: {},
}


class IllegalTransition(RuntimeError):
    """The hub tried a state change the table does not allow (a hub bug)."""


class HasState(Protocol):
    state: AgentState


def advance(link: HasState, event: AgentEvent) -> AgentState:
    """Move `link` by `event`; its new state."""
    try:
        new = TRANSITIONS[link.state][event]
    except KeyError:
        raise IllegalTransition(f"{event.name} in state {link.state.name}") from None
    link.state = new
    return new
