"""The interface between session bindings and the children that serve them.

Bindings decide *when* a session's data runtime runs; a launcher decides *how*
(a real process in `children.py`, a fake in tests, virtual peers in the
simulator). Keeping the seam this narrow is what makes the binding state
machine testable without processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from tetherbed.agent.config import AgentConfig
from tetherbed.agent.exit_codes import AgentExit

#: A child stops itself with this exit code after IDLE_EXIT_SECONDS without a
#: data request (`tetherbed agent --idle-exit`). Its binding is kept.
IDLE_EXIT_CODE = int(AgentExit.IDLE)
#: Spec: a non-recording child stops after ten minutes without a data request.
IDLE_EXIT_SECONDS = 600.0

#: Told the exit code of a child that stopped on its own (never after `stop`).
ExitCallback = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """What one child runs: a deep copy of the control agent's configuration
    with the session's root and id filled in."""

    config: AgentConfig
    idle_exit_seconds: float = IDLE_EXIT_SECONDS

    @property
    def session_id(self) -> str:
        assert self.config.session_id is not None
        return self.config.session_id

    @property
    def root(self) -> str:
        return self.config.root


class ChildHandle(Protocol):
    """One running child."""

    @property
    def pid(self) -> int | None: ...

    async def stop(self) -> int | None:
        """Stop the child (idempotent); its exit code, None if never known."""
        ...


class Launcher(Protocol):
    async def start(self, spec: ChildSpec, on_exit: ExitCallback) -> ChildHandle:
        """Start a child; `on_exit` is called at most once, only if it stops by itself."""
        ...

    async def stop_all(self) -> None:
        """Stop every child this launcher started (shutdown)."""
        ...
