"""The sim backend's SSE agents: enroll, start, stop, kill, pause, resume.

Each agent keeps what `tetherbed agent --transport sse` keeps in its config
file (computer id, token, name) in memory; `enroll` does what the CLI's
`enroll` does (the §3.1 POST, then the §6 probe that holds a stream until
`hello`), and `start` runs the reference driver until it stops or is killed.
An agent with `token_of` starts with another agent's saved connection (two
machines sharing one token). Every connection goes through the agent's own
link of the sim network, so its faults and its wire recording apply.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.agent.dsh import enrollment
from tetherbed.agent.dsh.runner import RuntimeOptions
from tetherbed.agent.dsh.transport import TransportError
from tetherbed.runtime.clock import Clock
from tetherbed.simulator.backends.base import BackendError, NodeState
from tetherbed.simulator.scenario import AgentSpec
from tetherbed.simulator.sim.dsh.agent import (
    HUB_URL,
    SimAgentRunner,
    hub_http,
    machine_block,
    metadata_block,
)
from tetherbed.simulator.sim.network import SimNetwork
from tetherbed.simulator.sim.stepped_calls import SteppedCalls
from tetherbed.simulator.sim.tcp import SimTcp

#: `enroll`'s exit codes, as the CLI's: 0 enrolled (and the stream proved), 1 not.
ENROLLED, NOT_ENROLLED = 0, 1


@dataclass(frozen=True, slots=True)
class Saved:
    """The agent's config file (§6): what `enroll` saved."""

    computer_id: str
    token: str
    name: str


class SimDshAgent:
    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.state = NodeState("not_started")
        self.starts = 0
        self.saved: Saved | None = None
        self.runner: SimAgentRunner | None = None
        self.task: asyncio.Task[Any] | None = None
        self.paused = False
        self.resumed = asyncio.Event()


Event = Callable[[str, str, dict[str, Any]], None]


class SimDshAgents:
    def __init__(
        self,
        specs: dict[str, AgentSpec],
        *,
        network: SimNetwork,
        tcp: SimTcp,
        clock: Clock,
        seed: int,
        root: Callable[[AgentSpec], Path],
        event: Event,
    ) -> None:
        self.network = network
        self.tcp = tcp
        self.clock = clock
        self.seed = seed
        self.root = root
        self.event = event
        self.agents = {name: SimDshAgent(spec) for name, spec in specs.items()}

    def add(self, spec: AgentSpec) -> None:
        self.agents[spec.name] = SimDshAgent(spec)

    def __contains__(self, name: object) -> bool:
        return name in self.agents

    def state(self, name: str) -> NodeState:
        return self.agents[name].state

    # --- enroll -----------------------------------------------------------------------

    async def enroll(self, name: str, key: str) -> int:
        """The CLI's `enroll --key KEY --name NAME`: its exit code (0 when enrolled
        and a stream proved the round trip)."""
        agent = self.agents[name]
        spec = agent.spec
        workspace = str(self.root(spec))
        capabilities = list(enrollment.CAPABILITIES)
        body = enrollment.enroll_body(key, spec.machine, workspace)
        body["machine"] = machine_block(spec.machine, spec.machine)
        body["metadata"] = metadata_block(spec.machine, workspace, capabilities)
        try:
            enrolled = await enrollment.enroll(
                HUB_URL, key, spec.machine, http=hub_http(self.tcp, name), body=body
            )
        except (enrollment.EnrollRefused, TransportError) as exc:
            self.event(name, "enroll", {"code": NOT_ENROLLED, "why": str(exc)})
            return NOT_ENROLLED
        agent.saved = Saved(enrolled.computer_id, enrolled.token, enrolled.name)
        problem = await enrollment.probe(
            HUB_URL, enrolled.token, http=hub_http(self.tcp, name, enrolled.token)
        )
        code = ENROLLED if problem is None else NOT_ENROLLED
        self.event(name, "enroll", {"code": code, **({"why": problem} if problem else {})})
        return code

    # --- lifecycle --------------------------------------------------------------------

    async def start(self, name: str) -> None:
        agent = self.agents[name]
        if agent.state.status in ("running", "paused"):
            raise BackendError(f"{name} is already running")
        agent.starts += 1
        saved = self._saved(agent)
        agent.state = NodeState("running")
        self.event(name, "started", {})
        if saved is None:  # `run` without a config file: it says so and exits 1
            agent.state = NodeState("exited", 1)
            self.event(name, "exited", {"code": 1, "why": "not enrolled"})
            return
        spec = agent.spec
        options = RuntimeOptions(
            server_url=HUB_URL,
            token=saved.token,
            computer_id=saved.computer_id,
            name=saved.name,
            workspace_base=str(self.root(spec)),
            chunk_format=str(spec.options.get("chunk_format", "split")),
            defects=frozenset(spec.options.get("defects") or ()),
        )
        agent.paused = False
        runner = SimAgentRunner(
            options,
            tcp=self.tcp,
            node=name,
            hostname=spec.machine,
            paused=lambda: agent.paused,
            resumed=lambda: agent.resumed,
            clock=self.clock,
            rng=random.Random(f"{self.seed}/{name}/{agent.starts}"),
            file_ops=SteppedCalls(random.Random(f"{self.seed}/{name}/{agent.starts}/files")),
        )
        agent.runner = runner
        agent.task = asyncio.ensure_future(self._run(agent, runner))

    def _saved(self, agent: SimDshAgent) -> Saved | None:
        shared = agent.spec.token_of
        if shared is not None:
            return self.agents[shared].saved
        return agent.saved

    async def _run(self, agent: SimDshAgent, runner: SimAgentRunner) -> None:
        try:
            code = await runner.run()
        except asyncio.CancelledError:
            return
        if agent.runner is runner:
            agent.state = NodeState("exited", code)
            self.event(agent.spec.name, "exited", {"code": code})

    async def stop(self, name: str) -> None:
        agent = self.agents[name]
        if agent.runner is None or agent.state.status not in ("running", "paused"):
            return
        self._thaw(agent)
        agent.runner.stop()
        if agent.task is not None:
            await asyncio.gather(agent.task, return_exceptions=True)

    async def kill(self, name: str) -> None:
        agent = self.agents[name]
        if agent.task is None or agent.state.status not in ("running", "paused"):
            return
        # The process is gone at once: its connections end without a word from
        # it (its clean-up, which would close them politely, never runs).
        if agent.runner is not None:
            agent.runner.kill()
        self.tcp.reset(name)
        agent.runner = None
        await _ended(agent.task)
        self._thaw(agent)
        agent.state = NodeState("exited", -9)
        self.event(name, "killed", {})

    async def pause(self, name: str) -> None:
        agent = self.agents[name]
        agent.paused = True
        agent.resumed = asyncio.Event()
        self.network.set_paused(name, True)
        agent.state = NodeState("paused")
        self.event(name, "paused", {})

    async def resume(self, name: str) -> None:
        agent = self.agents[name]
        self._thaw(agent)
        if agent.state.status == "paused":
            agent.state = NodeState("running")
        self.event(name, "resumed", {})

    def _thaw(self, agent: SimDshAgent) -> None:
        # What its kernel took while it slept reaches its code before its own
        # timers run again, as a woken process finds its sockets readable.
        self.network.set_paused(agent.spec.name, False)
        self.tcp.wake(agent.spec.name)
        agent.paused = False
        agent.resumed.set()

    async def close(self) -> None:
        for agent in self.agents.values():
            if agent.runner is not None:
                agent.runner.kill()
            if agent.task is not None:
                await _ended(agent.task)


async def _ended(task: asyncio.Task[Any]) -> None:
    """Until `task` is over: it was told to end; cancelled if it does not (a
    cancel can be lost when it lands as a timeout fires, so it is repeated)."""
    while not task.done():
        await asyncio.wait([task], timeout=1.0)
        if not task.done():
            task.cancel()
    if not task.cancelled():
        task.exception()  # retrieved: a crash of the agent's driver is the run's error
