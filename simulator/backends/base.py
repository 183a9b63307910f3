"""What every backend offers the scenario runner.

A backend turns a topology into running parts — in one virtual-time event
loop (`sim`), as local processes (`process`) or as containers (`docker`) —
and carries out lifecycle steps and faults on them. The runner drives every
backend through this interface only, so a scenario runs unchanged on all.
"""

from __future__ import annotations

import abc
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tetherbed.agent.dsh.transport import HubHttp
from tetherbed.runtime.transport import MessageTransport, UpgradeRefused
from tetherbed.simulator.recorder import Recorder
from tetherbed.simulator.scenario import AgentSpec, ClientSpec, Scenario
from tetherbed.simulator.targets import Target
from tetherbed.simulator.targets.adapters import OpenRefused, SessionClient
from tetherbed.simulator.targets.reference import FrameSessionClient

T = TypeVar("T")


class BackendError(RuntimeError):
    """The backend could not do what a step asked (a part failed to start, ...)."""


@dataclass(frozen=True, slots=True)
class NodeState:
    """`status` is one of: not_started, running, paused, exited."""

    status: str
    exit_code: int | None = None


class Backend(abc.ABC):
    name: str
    #: Whether the wire recorder sits on every agent link (`wire:<agent>` records).
    records_wire = False

    def __init__(
        self, scenario: Scenario, workdir: Path, seed: int, *, target: Target | None = None
    ) -> None:
        self.scenario = scenario
        self.topology = scenario.topology
        self.workdir = workdir
        self.seed = seed
        self.target = target or Target.reference()
        self.recorder: Recorder = Recorder(self.now)

    def third_party(self, node: str) -> bool:
        """Whether `node` (the hub or an agent) is someone else's implementation:
        it writes no Tetherbed journal and keeps no Tetherbed convention."""
        if node == "hub":
            return not self.target.hub.is_reference or self.topology.hub.url is not None
        spec = self.topology.agents.get(node)
        if spec is not None and spec.sse:
            # The target's agent is a local-executor agent; SSE agents are
            # Tetherbed's dsh agent (a dsh agent target comes with its
            # conformance suite).
            return False
        return not self.target.agent.is_reference or (spec is not None and bool(spec.command))

    # --- running the whole thing ------------------------------------------

    @abc.abstractmethod
    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run the runner's coroutine on this backend's event loop."""

    @abc.abstractmethod
    def now(self) -> float:
        """Seconds since the run started (virtual on the sim backend)."""

    async def setup(self) -> None:  # noqa: B027 - optional hook
        """Prepare what every node needs (folders, tokens, proxies)."""

    async def teardown(self) -> None:  # noqa: B027 - optional hook
        """Stop everything still running; must never raise."""

    def sync(self) -> None:  # noqa: B027 - optional hook
        """Bring the history up to date with what the parts logged (before an assert)."""

    async def add_agent(self, spec: AgentSpec) -> None:
        """Declare one more agent after setup (the pytest plugin's `agent` fixture)."""
        raise BackendError(f"the {self.name} backend cannot add agents after setup")

    # --- lifecycle --------------------------------------------------------

    @abc.abstractmethod
    async def start(self, node: str) -> None: ...

    @abc.abstractmethod
    async def stop(self, node: str) -> None:
        """Graceful: SIGTERM (the hub sends 4429 to its agents)."""

    @abc.abstractmethod
    async def kill(self, node: str) -> None:
        """Abrupt: no close frame, no clean-up (SIGKILL)."""

    @abc.abstractmethod
    async def pause(self, node: str) -> None:
        """Freeze it, like a laptop going to sleep (SIGSTOP)."""

    @abc.abstractmethod
    async def resume(self, node: str) -> None: ...

    async def restart(self, node: str) -> None:
        await self.kill(node)
        await self.start(node)

    @abc.abstractmethod
    def state(self, node: str) -> NodeState: ...

    # --- the network --------------------------------------------------------

    @abc.abstractmethod
    async def partition(self, agent: str, direction: str = "both") -> None:
        """Cut the agent↔hub link: `both`, `to_hub` or `from_hub`."""

    @abc.abstractmethod
    async def heal(self, agent: str | None = None) -> None:
        """Undo partitions (of one agent, or all)."""

    @abc.abstractmethod
    async def fault(self, agent: str, kind: str, params: dict[str, Any]) -> None:
        """Carry out `simulator.faults.plan(kind, params)` on the agent's link."""

    @abc.abstractmethod
    async def clear(self, agent: str | None = None) -> None:
        """Remove faults (of one agent, or all); partitions stay until healed."""

    # --- clients and the hub's API ------------------------------------------

    @abc.abstractmethod
    async def open_client(self, client: ClientSpec) -> MessageTransport:
        """A client connection to the session through the hub."""

    async def open_session_client(self, client: ClientSpec) -> SessionClient:
        """The client through the target's client adapter; by default the spec's
        envelopes over `open_client` (Tetherbed's own client API). A refused
        upgrade is `OpenRefused`, as from every client adapter."""
        try:
            transport = await self.open_client(client)
        except UpgradeRefused as exc:
            raise OpenRefused(exc.status) from None
        return FrameSessionClient(transport, self.now)

    async def open_machine_client(self, client: ClientSpec) -> SessionClient:
        """A machine client (`api: machine`): the hub's `/v1/machines/{machine}/client`."""
        raise BackendError(f"the {self.name} backend does not run machine clients")

    @abc.abstractmethod
    async def revoke(self, session: str, user: str) -> None: ...

    @abc.abstractmethod
    def agent_root(self, agent: AgentSpec) -> Path:
        """The agent machine's folder, where its files land."""

    # --- the machines' virtual serial ports (`options.serial`) -----------------

    def serial_path(self, agent: str, port: str) -> str:
        """Where the agent's machine has the port: what it advertises and what
        SERIAL_* requests name."""
        raise BackendError(f"the {self.name} backend has no virtual serial ports")

    async def unplug(self, agent: str, port: str) -> None:
        """The port's device goes away, as a USB adapter pulled out."""
        raise BackendError(f"the {self.name} backend has no virtual serial ports")

    async def plug(self, agent: str, port: str) -> None:
        """A fresh device on the port again, answering once this returns."""
        raise BackendError(f"the {self.name} backend has no virtual serial ports")

    # --- dsh-computers --------------------------------------------------------

    async def dsh_enroll(self, agent: str, key: str) -> int:
        """Run the SSE agent's `enroll` with `key` through its link; the command's
        exit code (0: enrolled). What the hub answered is on the wire."""
        raise BackendError(f"the {self.name} backend runs no dsh-computers agents")

    def dsh_http(self, client: ClientSpec) -> HubHttp:
        """An HTTP client of the hub's dsh-computers and client API, with the
        client's user's token."""
        raise BackendError(f"the {self.name} backend has no dsh-computers clients")

    def dsh_stored_state(self) -> str:
        """The text of what the hub persisted for dsh-computers (its own store:
        reference-only evidence)."""
        raise BackendError(f"the {self.name} backend cannot read the hub's store")

    def dsh_tokens(self) -> set[str]:
        """The agent tokens the SSE agents saved at enrollment."""
        return set()


def prepare_root(root: Path, spec: AgentSpec) -> None:
    """The agent machine's folder, with the scenario's initial files (once)."""
    if root.exists():
        return
    root.mkdir(parents=True)
    for path, content in (spec.options.get("files") or {}).items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(content), encoding="utf-8")
