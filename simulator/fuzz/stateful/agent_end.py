"""One agent connection in a stateful run: the real `AgentProtocol` on a held wire.

Frames wait in a queue each way until the machine delivers them, so a
partition is just "do not deliver"; operations the protocol admits wait in
`pending` until a rule answers them (once, twice, late or never).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tetherbed.agent.actions import Close, Run, Send
from tetherbed.agent.config import Limits
from tetherbed.agent.protocol import AgentProtocol
from tetherbed.runtime.clock import Clock
from tetherbed.wire.messages import Hello
from tetherbed.wire.version import CURRENT_TEXT

#: What a session agent and a control agent advertise.
SESSION_CAPABILITIES = ["files", "shell"]
CONTROL_CAPABILITIES = ["directory_browse"]


@dataclass(eq=False)
class AgentEnd:
    """The agent side of one connection, and the frames in flight on it."""

    name: str
    machine: str
    session: str | None
    protocol: AgentProtocol
    #: The hub's handle for this connection (whatever `agent_opened` returned).
    link: Any = None
    to_agent: list[bytes] = field(default_factory=list)
    to_hub: list[bytes] = field(default_factory=list)
    #: Admitted requests not answered yet, by request id.
    pending: dict[str, Run] = field(default_factory=dict)
    #: The last answer sent per request id (for answering twice).
    answered: dict[str, bytes] = field(default_factory=dict)
    hello_sent: bool = False
    partitioned: bool = False
    closed: bool = False
    #: Set when either side asked to close: (code, who).
    closing: tuple[int | None, str] | None = None
    #: Told of every request the protocol admits (the machine's ledger).
    on_run: Callable[[str, Run], None] | None = None

    def take(self, actions: list[Any]) -> None:
        """Carry out what the agent's protocol asked for."""
        for action in actions:
            if isinstance(action, Send):
                self.to_hub.append(action.data)
            elif isinstance(action, Run):
                self.pending[action.request_id] = action
                if self.on_run is not None:
                    self.on_run(self.name, action)
            elif isinstance(action, Close) and self.closing is None:
                self.closing = (action.code, "agent")


def new_agent_end(
    name: str,
    *,
    machine: str,
    session: str | None,
    clock: Clock,
    max_concurrent: int,
) -> AgentEnd:
    ids = itertools.count(1)
    hello = Hello(
        shim_version="0.1.0",
        protocol_version=CURRENT_TEXT,
        machine_id=machine,
        platform="linux",
        arch="x86_64",
        capabilities=list(SESSION_CAPABILITIES if session is not None else CONTROL_CAPABILITIES),
        allowed_root=f"/w/{session}" if session is not None else None,
    )
    protocol = AgentProtocol(
        hello=hello,
        local_limits=Limits(max_concurrent=max_concurrent),
        clock=clock,
        new_id=lambda: f"{name}-{next(ids)}",
        session_id=session,
    )
    return AgentEnd(name, machine, session, protocol)
