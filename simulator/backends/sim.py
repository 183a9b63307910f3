"""The `sim` backend: the reference hub and agents in one virtual-time loop.

Nothing here waits in real time: a 60 s backoff costs nothing, and since
every random choice (backoff jitter, network jitter, ids) comes from
generators seeded from the run's seed, the same seed produces the same
history, byte for byte. The hub and agents are the real `HubCore` and
`AgentRuntime`; only sockets, processes and the shell are simulated.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from tetherbed.agent.audit.sink import NullAuditSink
from tetherbed.agent.config import AgentConfig, Limits
from tetherbed.agent.control.controller import ControlOperations
from tetherbed.agent.dsh.transport import HubHttp
from tetherbed.agent.hardware import HardwareConfig, SerialPorts
from tetherbed.agent.local_llm import LocalLlm
from tetherbed.agent.operations import DataOperations
from tetherbed.agent.runtime import AgentRuntime
from tetherbed.hub.config import TUNABLE_OPTIONS, HubConfig, OwnershipPolicy
from tetherbed.hub.dsh.config import DshConfig
from tetherbed.hub.store import HubStore
from tetherbed.runtime.transport import MessageTransport, UpgradeRefused
from tetherbed.simulator.backends.base import Backend, BackendError, NodeState, prepare_root
from tetherbed.simulator.faults import (
    AddHttpRule,
    AddRule,
    AddToxic,
    InjectClose,
    ResetConnections,
    plan,
)
from tetherbed.simulator.peripherals.llm_server.config import LlmServerConfig
from tetherbed.simulator.peripherals.llm_server.core import LlmServerCore
from tetherbed.simulator.peripherals.llm_server.in_process import InProcessOllama
from tetherbed.simulator.peripherals.llm_server.runner import GenerationRunner
from tetherbed.simulator.peripherals.serial_ports import DeviceSpec
from tetherbed.simulator.proxy.ws.rules import MessageRule
from tetherbed.simulator.scenario import AgentSpec, ClientSpec, Scenario
from tetherbed.simulator.sim.control_children import SimChildren, stepped_file_ops
from tetherbed.simulator.sim.dsh.agent import hub_http
from tetherbed.simulator.sim.dsh.hub import SimDshHub
from tetherbed.simulator.sim.dsh.nodes import SimDshAgents
from tetherbed.simulator.sim.hub_node import SimHub
from tetherbed.simulator.sim.network import SimNetwork
from tetherbed.simulator.sim.serial import SimSerialPort
from tetherbed.simulator.sim.shell import run_sim_command, sim_agent_environment
from tetherbed.simulator.sim.stepped_calls import SteppedCalls
from tetherbed.simulator.sim.tcp import SimTcp
from tetherbed.simulator.targets import Target
from tetherbed.simulator.targets.adapters import OpenRefused, SessionClient
from tetherbed.simulator.targets.reference import FrameSessionClient
from tetherbed.simulator.virtual_time import VirtualClock, VirtualTimeLoop
from tetherbed.simulator.wiretap.scrub import Scrubber
from tetherbed.wire.version import CURRENT_TEXT

T = TypeVar("T")

_HUB_FIELDS = {"session", "machine"}


def hub_config(options: dict[str, Any]) -> HubConfig:
    """A HubConfig from a scenario's hub options (also used by other backends)."""
    config = HubConfig()
    for option, attribute in TUNABLE_OPTIONS.items():
        if option in options:
            setattr(config, attribute, options[option])
    if "protocol_version" in options:
        config.protocol_version = options["protocol_version"]
    if "ownership" in options:
        config.ownership = OwnershipPolicy(options["ownership"])
    if "defects" in options:
        config.defects = frozenset(options["defects"])
    config.__post_init__()
    config.dsh = dsh_config(options.get("dsh") or {}, config.dsh)
    return config


def dsh_config(options: dict[str, Any], base: DshConfig | None = None) -> DshConfig:
    """The hub's dsh-computers settings from a scenario's `hub.options.dsh`."""
    config = base or DshConfig()
    for option in ("heartbeat_ms", "key_ttl_minutes", "exec_timeout_ms", "promote_on_timeout"):
        if option in options:
            setattr(config, option, options[option])
    if "defects" in options:
        config.defects = frozenset(options["defects"])
    config.__post_init__()
    return config


class _AgentNode:
    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.runtime: AgentRuntime | None = None
        self.task: asyncio.Task[Any] | None = None
        self.state = NodeState("not_started")
        self.starts = 0
        #: The machine's local LLM server (`options.llm`): the same core and
        #: runner as `tetherbed llm-server`, on the virtual clock; it outlives
        #: restarts of the agent, as a server on the machine would.
        self.llm: InProcessOllama | None = None
        #: The machine's virtual serial ports (`options.serial`), by name: the
        #: device core on the virtual clock; they outlive the agent's restarts.
        self.ports: dict[str, SimSerialPort] = {}
        #: A control agent's children, one launcher per start (stopped with
        #: the control agent, killed at teardown).
        self.children: list[SimChildren] = []

    def release_ports(self) -> None:
        """The agent's process is gone: the ports it had open are free again."""
        for port in self.ports.values():
            port.release()

    def serial_ports(self) -> SerialPorts | None:
        """The agent's serial extension, on these ports instead of pyserial."""
        if not self.ports:
            return None
        by_path = {port.path: port for port in self.ports.values()}

        async def opener(request: Any) -> Any:
            return await by_path[request.port].open(request)

        hardware = HardwareConfig(serial_ports=self.advertised())
        return SerialPorts(hardware, opener=opener)

    def advertised(self) -> tuple[tuple[str, str], ...]:
        return tuple((port.path, port.spec.description) for port in self.ports.values())


class SimBackend(Backend):
    name = "sim"
    records_wire = True

    def __init__(
        self, scenario: Scenario, workdir: Path, seed: int, *, target: Target | None = None
    ) -> None:
        if target is not None and not target.is_reference:
            raise BackendError(
                "the sim backend runs Tetherbed's own hub and agents in virtual time; "
                "run a third-party target on the process backend"
            )
        # The seeded scheduler: what is ready at one virtual instant runs in an
        # order this generator picks (its own stream: other draws stay as they were).
        self.loop = VirtualTimeLoop(schedule=random.Random(f"{seed}/schedule"))
        self.clock = VirtualClock(self.loop)
        super().__init__(scenario, workdir, seed)
        self.recorder.scrub = Scrubber(workdir)
        self.rng = random.Random(seed)
        self.network = SimNetwork(random.Random(self.rng.getrandbits(64)))
        self.store = HubStore(":memory:")
        self.hub: SimHub | None = None
        self.hub_state = NodeState("not_started")
        self.agents = {
            name: _AgentNode(spec) for name, spec in self.topology.agents.items() if not spec.sse
        }
        self.tokens: dict[tuple[str, str], str] = {}
        # dsh-computers: SSE agents on byte-stream connections of the same links.
        self.tcp = SimTcp(self.network)
        self.dsh_hub: SimDshHub | None = None
        self.dsh_agents = SimDshAgents(
            {name: spec for name, spec in self.topology.agents.items() if spec.sse},
            network=self.network,
            tcp=self.tcp,
            clock=self.clock,
            seed=seed,
            root=self.agent_root,
            event=self._dsh_agent_event,
        )

    # --- running -------------------------------------------------------------------

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        asyncio.set_event_loop(self.loop)
        try:
            with self.loop.fewer_collections():
                return self.loop.run_until_complete(main)
        finally:
            self.cancel_leftovers()
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()
            asyncio.set_event_loop(None)

    def cancel_leftovers(self) -> None:
        """Tasks the teardown left behind (a hub's connection handler a held-back
        wake-up had not yet finished) end before the loop closes, as
        `asyncio.run` ends them, instead of being destroyed pending."""
        leftovers = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            self.loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))

    def now(self) -> float:
        return self.loop.time()

    def _llm(self, node: _AgentNode) -> LocalLlm | None:
        options = node.spec.options.get("llm")
        if options is None:
            return None
        if node.llm is None:
            try:
                config, reachable = LlmServerConfig.from_scenario(options)
            except ValueError as exc:
                raise BackendError(f"{node.spec.name}: options.llm: {exc}") from None
            runner = GenerationRunner(LlmServerCore(config), self.clock)
            node.llm = InProcessOllama(runner, reachable=reachable)
        return LocalLlm(node.llm, clock=self.clock)

    async def setup(self) -> None:
        users = {a.user for a in self.topology.agents.values()}
        users |= {c.user for c in self.topology.clients.values()}
        for user in sorted(users):
            self._tokens_for(user)
        for node in self.agents.values():
            prepare_root(self.agent_root(node.spec), node.spec)
            self.network.taps[node.spec.name] = self.recorder.wire_log(node.spec.name)
            self._make_ports(node)
        for agent in self.dsh_agents.agents.values():
            prepare_root(self.agent_root(agent.spec), agent.spec)
            self.tcp.taps[agent.spec.name] = self.recorder.dsh_wire_log(agent.spec.name)

    def _make_ports(self, node: _AgentNode) -> None:
        """`options.serial`: each port at /dev/NAME with its device, in process."""
        spec = node.spec
        for name, options in spec.serial_ports.items():
            device = DeviceSpec.from_scenario(name, options, spec.machine)
            node.ports[name] = SimSerialPort(f"/dev/{name}", device, self.clock.monotonic)

    def _tokens_for(self, user: str) -> None:
        for kind in ("agent", "client"):
            if (user, kind) not in self.tokens:
                self.tokens[user, kind] = self.store.create_token(user, kind)

    async def add_agent(self, spec: AgentSpec) -> None:
        self.topology.agents[spec.name] = spec
        self._tokens_for(spec.user)
        prepare_root(self.agent_root(spec), spec)
        if spec.sse:
            self.dsh_agents.add(spec)
            self.tcp.taps[spec.name] = self.recorder.dsh_wire_log(spec.name)
            return
        self.agents[spec.name] = _AgentNode(spec)
        self.network.taps[spec.name] = self.recorder.wire_log(spec.name)
        self._make_ports(self.agents[spec.name])

    async def teardown(self) -> None:
        for node in self.agents.values():
            for children in node.children:
                children.kill_all()
            if node.task is not None and not node.task.done():
                node.task.cancel()
                await asyncio.gather(node.task, return_exceptions=True)
        await self.dsh_agents.close()
        if self.hub is not None:
            self.hub.crash()
        if self.dsh_hub is not None:
            self.dsh_hub.crash()
        await self.tcp.close()
        if self.dsh_hub is not None:
            await self.dsh_hub.closed()
        self.store.close()

    def agent_root(self, agent: AgentSpec) -> Path:
        return self.workdir / "roots" / agent.root

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, node: str) -> None:
        if node == "hub":
            if self.hub_state.status in ("running", "paused"):
                raise BackendError("the hub is already running")
            self.hub = SimHub(
                self.network,
                self.store,
                hub_config(self.topology.hub.options),
                self.clock,
                self._hub_event,
            )
            self.loop.owned_by(self.network.hub_owner).run(self.hub.start)
            config = hub_config(self.topology.hub.options)
            self.dsh_hub = SimDshHub(
                self.tcp,
                self.store,
                config.dsh,
                self.clock,
                random.Random(f"{self.seed}/hub/dsh/{self.rng.getrandbits(32)}"),
                keepalive_timeout=config.handshake_timeout,
            )
            await self._as(self.network.hub_owner, self.dsh_hub.start())
            self.hub_state = NodeState("running")
            self.recorder.event("hub", "started")
            return
        if node in self.dsh_agents:
            await self._as(node, self.dsh_agents.start(node))
            return
        agent = self.agents[node]
        if agent.state.status in ("running", "paused"):
            raise BackendError(f"{node} is already running")
        agent.starts += 1
        agent.runtime = self._runtime(agent)
        agent.state = NodeState("running")
        self._agent_event(agent, "started", {})
        agent.task = self.loop.create_task(
            self._run_agent(agent, agent.runtime), context=self.loop.owned_by(node)
        )

    async def _as(self, owner: str, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` as `owner` (the seeded scheduler's unit): what it starts
        stays that node's, not the scenario runner's."""
        return await self.loop.create_task(work, context=self.loop.owned_by(owner))

    async def _run_agent(self, agent: _AgentNode, runtime: AgentRuntime) -> None:
        try:
            stop = await runtime.run()
        except asyncio.CancelledError:
            return
        finally:
            await runtime.close()
            agent.release_ports()
        if agent.runtime is runtime:
            agent.state = NodeState("exited", int(stop.exit_code))
            self._agent_event(agent, "exited", {"code": int(stop.exit_code)})

    def _runtime(self, agent: _AgentNode) -> AgentRuntime:
        spec = agent.spec
        options = spec.options
        root = str(self.agent_root(spec))
        config = AgentConfig(
            hub_url="sim://hub",
            token=self.tokens[spec.user, "agent"],
            root=root,
            session_id=spec.session,
            machine_id=spec.machine,
            enable_shell=spec.shell,
            local_limits=Limits(max_concurrent=int(options.get("max_concurrent", 4))),
            protocol_version=str(options.get("protocol_version", CURRENT_TEXT)),
            defects=frozenset(options.get("defects") or ()),
            serial_ports=list(agent.advertised()),
        )
        # One generator per agent start, derived from the run's seed.
        rng = random.Random(f"{self.seed}/{spec.name}/{agent.starts}")
        if spec.control is not None:
            return self._control_runtime(agent, config, rng)
        return AgentRuntime(
            config,
            connector=self.network.connector(spec.name),
            clock=self.clock,
            rng=rng,
            new_id=lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            operations=DataOperations(
                root=root,
                clock=self.clock,
                agent_env=sim_agent_environment(root),
                offload=False,
                shell=run_sim_command,
                local_llm=self._llm(agent),
                serial_ports=agent.serial_ports(),
                run_blocking=self._file_ops(agent),
            ),
            audit=NullAuditSink(),
            events=lambda event, **fields: self._agent_event(agent, event, fields),
        )

    def _control_runtime(
        self, agent: _AgentNode, config: AgentConfig, rng: random.Random
    ) -> AgentRuntime:
        """The machine's control agent: browse roots under its root, children
        on this loop (`SimChildren`), grants signed with a key from the seed."""
        spec = agent.spec
        assert spec.control is not None
        root = self.agent_root(spec)
        roots = [str((root / folder).resolve()) for folder in spec.control["browse"]]
        idle = float(spec.control["child_idle_exit"])
        config = dataclasses.replace(
            config, root="", session_id=None, browse_roots=roots, child_idle_exit=idle
        )
        serial = spec.options.get("file_ops", "overlapped") == "serial"
        children = SimChildren(
            connector=self.network.connector(spec.name),
            clock=self.clock,
            rng=random.Random(rng.getrandbits(64)),
            file_ops=None if serial else stepped_file_ops,
        )
        agent.children.append(children)
        return AgentRuntime(
            config,
            connector=self.network.connector(spec.name),
            clock=self.clock,
            rng=rng,
            new_id=lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            operations=ControlOperations(
                config,
                browse_roots=roots,
                grant_key=rng.randbytes(32),
                clock=self.clock,
                launcher=children,
                machine_id=spec.machine,
                offload=False,
                new_token=lambda: f"{rng.getrandbits(128):032x}",
                idle_exit_seconds=idle,
            ),
            audit=NullAuditSink(),
            events=lambda event, **fields: self._agent_event(agent, event, fields),
        )

    def _file_ops(self, agent: _AgentNode) -> Any:
        """Overlapping file operations (`stepped_calls`), unless `file_ops: serial`."""
        if agent.spec.options.get("file_ops", "overlapped") == "serial":
            return None
        rng = random.Random(f"{self.seed}/{agent.spec.name}/{agent.starts}/files")
        return SteppedCalls(rng).run

    async def stop(self, node: str) -> None:
        if node == "hub":
            if self.hub is not None and self.hub_state.status == "running":
                await self.hub.shutdown()
                if self.dsh_hub is not None:
                    await self.dsh_hub.shutdown()
                self.hub_state = NodeState("exited", 0)
                self.recorder.event("hub", "exited", {"code": 0})
            return
        if node in self.dsh_agents:
            await self.dsh_agents.stop(node)
            return
        agent = self.agents[node]
        if agent.runtime is not None and agent.state.status in ("running", "paused"):
            self.network.set_paused(node, False)
            await agent.runtime.shutdown()
            if agent.task is not None:
                await asyncio.gather(agent.task, return_exceptions=True)

    async def kill(self, node: str) -> None:
        if node == "hub":
            if self.hub is not None and self.hub_state.status in ("running", "paused"):
                self.hub.crash()
                if self.dsh_hub is not None:
                    self.dsh_hub.crash()
                self._unfreeze_hub()
                self.hub_state = NodeState("exited", -9)
                self.recorder.event("hub", "killed")
            return
        if node in self.dsh_agents:
            await self.dsh_agents.kill(node)
            return
        agent = self.agents[node]
        if agent.task is None or agent.state.status not in ("running", "paused"):
            return
        runtime, agent.runtime = agent.runtime, None
        agent.task.cancel()
        await asyncio.gather(agent.task, return_exceptions=True)
        self.network.reset(node)
        self.network.set_paused(node, False)
        agent.state = NodeState("exited", -9)
        self._agent_event(agent, "killed", {})
        del runtime

    async def pause(self, node: str) -> None:
        if node == "hub":
            for name in self.network.links:
                self.network.set_held(name, "both", True)
            self.hub_state = NodeState("paused")
            self.recorder.event("hub", "paused")
            return
        if node in self.dsh_agents:
            await self.dsh_agents.pause(node)
            return
        agent = self.agents[node]
        self.network.set_paused(node, True)
        agent.state = NodeState("paused")
        self._agent_event(agent, "paused", {})

    async def resume(self, node: str) -> None:
        if node == "hub":
            self._unfreeze_hub()
            self.hub_state = NodeState("running")
            self.recorder.event("hub", "resumed")
            return
        if node in self.dsh_agents:
            await self.dsh_agents.resume(node)
            return
        agent = self.agents[node]
        self.network.set_paused(node, False)
        if agent.state.status == "paused":
            agent.state = NodeState("running")
        self._agent_event(agent, "resumed", {})

    def _unfreeze_hub(self) -> None:
        for name in self.network.links:
            self.network.set_held(name, "both", False)

    def state(self, node: str) -> NodeState:
        if node == "hub":
            return self.hub_state
        if node in self.dsh_agents:
            return self.dsh_agents.state(node)
        return self.agents[node].state

    # --- network ---------------------------------------------------------------------

    async def partition(self, agent: str, direction: str = "both") -> None:
        self.network.set_held(agent, _direction(direction), True)

    async def heal(self, agent: str | None = None) -> None:
        for name in [agent] if agent else list(self.network.links):
            self.network.set_held(name, "both", False)

    async def fault(self, agent: str, kind: str, params: dict[str, Any]) -> None:
        for op in plan(kind, params):
            match op:
                case AddToxic(toxic):
                    self.network.add_toxic(agent, toxic)
                case AddRule(rule):
                    self.network.add_rule(agent, MessageRule.from_json(rule))
                case ResetConnections():
                    self.network.reset(agent)
                    self.tcp.reset(agent)
                case AddHttpRule(rule):
                    self.tcp.rules(agent).add(dict(rule))
                case InjectClose(toward, code, reason):
                    side = "agent" if toward == "client" else "hub"
                    self.network.inject_close(agent, code, reason, side)
                case _:
                    raise BackendError(f"the sim backend cannot carry out a {kind} fault")

    async def clear(self, agent: str | None = None) -> None:
        for name in [agent] if agent else list(self.network.links):
            self.network.clear_faults(name)
            self.tcp.rules(name).clear()

    # --- clients ---------------------------------------------------------------------

    async def open_client(self, client: ClientSpec) -> MessageTransport:
        self._tokens_for(client.user)
        token = self.tokens[client.user, "client"]
        connect = self.network.connector(f"client:{client.name}")
        return await connect(
            f"sim://hub/v1/sessions/{client.session}/client",
            {"Authorization": f"Bearer {token}"},
        )

    async def open_machine_client(self, client: ClientSpec) -> SessionClient:
        self._tokens_for(client.user)
        token = self.tokens[client.user, "client"]
        connect = self.network.connector(f"client:{client.name}")
        try:
            transport = await connect(
                f"sim://hub/v1/machines/{client.machine}/client",
                {"Authorization": f"Bearer {token}"},
            )
        except UpgradeRefused as exc:
            raise OpenRefused(exc.status) from None
        return FrameSessionClient(transport, self.now)

    async def revoke(self, session: str, user: str) -> None:
        if self.hub is None:
            raise BackendError("the hub is not running")
        self.hub.revoke(session, user)

    # --- serial ports ----------------------------------------------------------------

    def _port(self, agent: str, port: str) -> SimSerialPort:
        found = self.agents[agent].ports.get(port)
        if found is None:
            raise BackendError(f"{agent} has no serial port {port!r}")
        return found

    def serial_path(self, agent: str, port: str) -> str:
        return self._port(agent, port).path

    async def unplug(self, agent: str, port: str) -> None:
        found = self._port(agent, port)
        if not found.plugged:
            raise BackendError(f"{agent}'s {port} is unplugged already")
        found.unplug()

    async def plug(self, agent: str, port: str) -> None:
        found = self._port(agent, port)
        if found.plugged:
            raise BackendError(f"{agent}'s {port} is plugged in already")
        found.plug()

    # --- dsh-computers -----------------------------------------------------------------

    async def dsh_enroll(self, agent: str, key: str) -> int:
        return await self.dsh_agents.enroll(agent, key)

    def dsh_http(self, client: ClientSpec) -> HubHttp:
        self._tokens_for(client.user)
        return hub_http(self.tcp, f"client:{client.name}", self.tokens[client.user, "client"])

    def dsh_stored_state(self) -> str:
        computers, keys = self.store.dsh_rows()
        return repr((computers, keys))

    def dsh_tokens(self) -> set[str]:
        return {a.saved.token for a in self.dsh_agents.agents.values() if a.saved is not None}

    def _dsh_agent_event(self, name: str, event: str, fields: dict[str, Any]) -> None:
        self.recorder.event(f"agent:{name}", event, fields)

    # --- history -----------------------------------------------------------------------

    def _hub_event(self, event: str, **fields: Any) -> None:
        session = fields.pop("session", None)
        machine = fields.pop("machine", None)
        self.recorder.event("hub", event, fields, session=session, machine=machine)

    def _agent_event(self, agent: _AgentNode, event: str, fields: dict[str, Any]) -> None:
        spec = agent.spec
        self.recorder.event(
            f"agent:{spec.name}", event, fields, session=spec.session, machine=spec.machine
        )


def _direction(direction: str) -> str:
    """Scenario directions → the network's: to_hub = up, from_hub = down."""
    return {"both": "both", "to_hub": "up", "from_hub": "down", "up": "up", "down": "down"}[
        direction
    ]
