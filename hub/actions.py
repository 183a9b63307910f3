"""What the hub's core asks its driver to do.

The core never touches a socket, a database or a log: it answers every event
with actions. `Send`/`Close` move frames; `Record` is an event for the journal;
`Persist` is a fact for durable state; `Authorize` asks a question only the
store can answer, and the driver answers it with `HubCore.authorized`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


# Not frozen: a frozen dataclass's __init__ goes through object.__setattr__,
# which costs measurably on the relay path (one Send per relayed frame).
@dataclass(slots=True)
class Send:
    peer: Any
    data: bytes


@dataclass(slots=True)
class Close:
    peer: Any
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Record:
    """An event for the hub's journal (the history's `hub` process)."""

    event: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RootGrant:
    """A session was attached or restored with this grant (for transparent restore)."""

    user: str
    session_id: str
    machine_id: str
    root_grant: str


@dataclass(frozen=True, slots=True)
class Persist:
    fact: RootGrant


@dataclass(frozen=True, slots=True)
class Authorize:
    """May `user` address `session_id` (creating it when new)? The driver asks
    its store and calls `HubCore.authorized(ticket, allowed)`."""

    ticket: int
    user: str
    session_id: str


HubAction = Send | Close | Record | Persist | Authorize
Actions = Sequence[HubAction]

#: The answer "nothing to do": immutable, so no caller can corrupt it.
NO_ACTIONS: tuple[HubAction, ...] = ()
