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


@dataclass(frozen=True)
class AgentSpec:
    name: str
    machine: str
    session: str
    user: str = "alice"
    #: The machine's folder; agents of one machine share it by default.
    root: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    #: A third-party agent command to run instead of the reference agent.
    command: list[str] | None = None

    @property
    def shell(self) -> bool:
        return bool(self.options.get("shell", False))

    @property
    def serial_ports(self) -> dict[str, dict[str, Any]]:
        """Its machine's virtual serial ports (`options.serial`): name → device."""
        return dict(self.options.get("serial") or {})


@dataclass(frozen=True)
class ClientSpec:
    name: str
    session: str
    user: str = "alice"


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
        found = [a.session for a in self.agents.values()]
        found += [c.session for c in self.clients.values()]
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
