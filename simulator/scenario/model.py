"""What a loaded scenario is: a topology, numbered steps, checkers and limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class HubSpec:
    options: dict[str, Any] = field(default_factory=dict)
    #: A third-party hub to test instead of the reference one (process backend).
    url: str | None = None


#: An agent's protocol: the local-executor WebSocket, or dsh-computers' SSE + HTTP.
WEBSOCKET, SSE = "websocket", "sse"
TRANSPORTS = (WEBSOCKET, SSE)
#: A client's API: a local-executor session, or dsh-computers' browser API and model tools.
LOCAL_EXECUTOR, DSH = "local-executor", "dsh"
#: A machine's control connection through the hub (`simulator/scenario/control.py`).
MACHINE = "machine"
CLIENT_APIS = (LOCAL_EXECUTOR, DSH, MACHINE)


@dataclass(frozen=True)
class AgentSpec:
    name: str
    machine: str
    #: The session it serves (WebSocket agents; None for SSE agents).
    session: str | None
    user: str = "alice"
    #: The machine's folder; agents of one machine share it by default.
    root: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    #: A third-party agent command to run instead of the reference agent.
    command: list[str] | None = None
    transport: str = WEBSOCKET
    #: SSE agents: start with this other agent's saved connection (its token).
    token_of: str | None = None
    #: Control mode (`control:`): browse roots (relative to `root`) and the
    #: children's idle stop; None for an agent serving one session.
    control: dict[str, Any] | None = None

    @property
    def shell(self) -> bool:
        return bool(self.options.get("shell", False))

    @property
    def serial_ports(self) -> dict[str, dict[str, Any]]:
        """Its machine's virtual serial ports (`options.serial`): name → device."""
        return dict(self.options.get("serial") or {})

    @property
    def sse(self) -> bool:
        return self.transport == SSE


@dataclass(frozen=True)
class ClientSpec:
    name: str
    #: The session it talks to (local-executor clients; None for dsh clients).
    session: str | None = None
    user: str = "alice"
    api: str = LOCAL_EXECUTOR
    #: The machine a machine client (`api: machine`) drives.
    machine: str | None = None

    @property
    def dsh(self) -> bool:
        return self.api == DSH


@dataclass(frozen=True)
class Topology:
    hub: HubSpec
    agents: dict[str, AgentSpec]
    clients: dict[str, ClientSpec]

    def node(self, name: str) -> HubSpec | AgentSpec:
        if name == "hub":
            return self.hub
        return self.agents[name]

    def sessions(self) -> list[str]:
        found = [a.session for a in self.agents.values() if a.session is not None]
        found += [c.session for c in self.clients.values() if c.session is not None]
        return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Step:
    index: int
    kind: str
    args: Any

    def describe(self) -> str:
        return f"{self.kind} {self.args}" if self.args not in (None, {}) else self.kind


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path | None
    description: str
    seed: int
    topology: Topology
    steps: tuple[Step, ...]
    checkers: tuple[str, ...]
    #: Checker options, by checker name.
    checker_options: dict[str, dict[str, Any]]
    #: Seconds the run may take before it is an error (virtual on sim).
    timeout: float
    #: Backends the scenario supports (default: all).
    backends: tuple[str, ...]
    #: The operation mix and fault schedule (`generate:`, `nemesis:`; checked),
    #: which the seed turns into steps (simulator/explore/generator.py).
    generate: dict[str, Any] | None = None
    nemesis: dict[str, Any] | None = None
    #: The document as written (for exporting a generated run as steps).
    document: dict[str, Any] | None = None

    @property
    def generated(self) -> bool:
        return self.generate is not None
