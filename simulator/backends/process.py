"""The `process` backend: real `tetherbed hub` and `tetherbed agent` processes.

Every agent reaches the hub through its own fault proxy on loopback, so a
fault or partition targets one agent's link; pause and resume are SIGSTOP and
SIGCONT, exactly a laptop going to sleep. The hub writes its events
(`--events`) and every agent its journal (`--journal`); a tailer merges them
into the history as they appear. Time is real here: the run's clock is wall
time since the start.

The parts under test come from the run's target (`simulator/targets`): a
third-party hub (a URL, or a command Tetherbed starts and stops) reached
through the target's client and admin adapters, and third-party agents from
a command template. A scenario may also name them itself (`hub.url` with
`hub.options.tokens`, `agents.X.command`). Every fault proxy records its
agent's link (`wire:<agent>` records): that recording, not the parts'
journals, is what the checkers judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from tetherbed.agent.dsh import config as dsh_agent_config
from tetherbed.agent.dsh.transport import HubHttp
from tetherbed.hub.config import TUNABLE_OPTIONS, option_flag
from tetherbed.hub.store import DATABASE_NAME
from tetherbed.launch import (
    LlmServerProcess,
    ManagedProcess,
    dsh_agent_command,
    spawn_tetherbed,
    start_dsh_agent,
    start_llm_server,
)
from tetherbed.runtime import event_loop
from tetherbed.runtime.transport import MessageTransport, UpgradeRefused
from tetherbed.runtime.websocket_transport import connect_websocket
from tetherbed.simulator.backends.base import Backend, BackendError, NodeState, prepare_root
from tetherbed.simulator.backends.event_files import EventFiles
from tetherbed.simulator.faults import (
    SELECTORS,
    AddHttpRule,
    AddRule,
    AddToxic,
    InjectClose,
    ResetConnections,
    plan,
)
from tetherbed.simulator.peripherals.llm_server.config import LlmServerConfig
from tetherbed.simulator.peripherals.serial_ports import DeviceSpec, VirtualSerialPort
from tetherbed.simulator.proxy import ProxyRegistry
from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.proxy.scheduler import FrameScheduler, ScheduleOptions, schedule_report
from tetherbed.simulator.scenario import AgentSpec, ClientSpec, Scenario
from tetherbed.simulator.targets import (
    AdminAdapter,
    AgentTarget,
    ClientAdapter,
    NotSupported,
    SessionClient,
    Target,
    TargetError,
    admin_adapter,
    client_adapter,
)
from tetherbed.simulator.targets.adapters import OpenRefused
from tetherbed.simulator.targets.hub import HubTarget, Tokens
from tetherbed.simulator.targets.reference import FrameSessionClient
from tetherbed.simulator.targets.running import HubRunner
from tetherbed.wire.version import CURRENT_TEXT

T = TypeVar("T")

#: Scenario hub options → `tetherbed hub` flags.
_HUB_FLAGS = {
    **{option: option_flag(option) for option in TUNABLE_OPTIONS},
    "ownership": "--ownership",
    "protocol_version": "--protocol-version",
}


#: Scenario `hub.options.dsh` → `tetherbed hub` flags.
_DSH_FLAGS = {
    "heartbeat_ms": "--dsh-heartbeat-ms",
    "key_ttl_minutes": "--dsh-key-ttl-minutes",
    "exec_timeout_ms": "--dsh-exec-timeout-ms",
}
#: How long an SSE agent's `enroll` command may take (it also holds a stream
#: until `hello`, up to 5 s).
ENROLL_TIMEOUT_S = 60.0


def hub_arguments(options: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for option, flag in _HUB_FLAGS.items():
        if option in options:
            args += [flag, str(options[option])]
    for defect in options.get("defects") or ():
        args += ["--defect", defect]
    dsh = options.get("dsh") or {}
    for option, flag in _DSH_FLAGS.items():
        if option in dsh:
            args += [flag, str(dsh[option])]
    if dsh.get("promote_on_timeout") is False:
        args.append("--dsh-no-promote-on-timeout")
    for defect in dsh.get("defects") or ():
        args += ["--dsh-defect", defect]
    return args


class _Agent:
    def __init__(self, spec: AgentSpec, target: AgentTarget) -> None:
        self.spec = spec
        #: The agent's own command in the scenario wins over the target's.
        self.target = AgentTarget.from_command(spec.command) if spec.command else target
        self.process: ManagedProcess | None = None
        self.proxy: FaultProxy | None = None
        self.state = NodeState("not_started")
        self.journal: Path | None = None
        #: Its machine's local LLM server (`options.llm`), and the URL the agent gets.
        self.llm: LlmServerProcess | None = None
        self.ollama_url: str | None = None
        #: Its machine's virtual serial ports (`options.serial`): each device's
        #: description, and its socat pair with the device while plugged in.
        self.devices = {
            name: DeviceSpec.from_scenario(name, options, spec.machine)
            for name, options in spec.serial_ports.items()
        }
        self.ports: dict[str, VirtualSerialPort | None] = {}
        #: Starting them (alongside the hub's start): awaited before the agent starts.
        self.ports_ready: asyncio.Future[None] | None = None
        #: SSE agents: the agent's config folder (`--home`, its config.json).
        self.home: Path | None = None

    def serial_arguments(self, folder: Path) -> list[tuple[str, str]]:
        """(path, description) of each port, as the agent advertises them."""
        return [(str(folder / name), device.description) for name, device in self.devices.items()]


def scenario_target(scenario: Scenario, target: Target | None) -> Target:
    """The run's target, with what the scenario itself names (a hub.url)."""
    target = target or Target.reference()
    hub = scenario.topology.hub
    if hub.url and target.hub.is_reference:
        tokens = hub.options.get("tokens")
        raw: dict[str, Any] = {"url": hub.url, "tokens": tokens}
        try:
            target = replace(target, hub=HubTarget.from_mapping(raw, Path(), "topology.hub"))
        except TargetError as exc:
            raise BackendError(str(exc)) from None
    return target


class ProcessBackend(Backend):
    name = "process"
    records_wire = True

    def __init__(
        self,
        scenario: Scenario,
        workdir: Path,
        seed: int,
        *,
        target: Target | None = None,
        schedule: ScheduleOptions | None = None,
    ) -> None:
        """`schedule`: the agents' proxies hold and release every WebSocket
        message under one frame scheduler (seeded, or replaying a decision log)."""
        self._wall0 = time.time()
        super().__init__(scenario, workdir, seed, target=scenario_target(scenario, target))
        self.hub_state = NodeState("not_started")
        self.hub_events = workdir / "logs" / "hub-events.jsonl"
        self.event_files = EventFiles(self.recorder, self._wall0)
        self.event_files.hub(self.hub_events)
        self.agents = {
            name: _Agent(spec, self.target.agent) for name, spec in self.topology.agents.items()
        }
        options = {k: v for k, v in self.topology.hub.options.items() if k != "tokens"}
        self.hub = HubRunner(
            self.target.hub,
            self.target.tls,
            workdir,
            users=sorted(self._users()),
            options=options,
            reference_args=["--events", str(self.hub_events), *hub_arguments(options)],
        )
        self.scheduler: FrameScheduler | None = (
            schedule.build(seed, {"scenario": scenario.name, "backend": self.name})
            if schedule is not None
            else None
        )
        self.registry = ProxyRegistry(random.Random(seed), scheduler=self.scheduler)
        self._clients: ClientAdapter | None = None
        self._admin: AdminAdapter | None = None
        self._tailer: asyncio.Task[None] | None = None
        self._watchers: set[asyncio.Task[None]] = set()

    def schedule_report(self) -> dict[str, Any] | None:
        """What the frame scheduler did (after teardown)."""
        return schedule_report(self.scheduler) if self.scheduler is not None else None

    def _users(self) -> set[str]:
        users = {a.user for a in self.topology.agents.values()}
        return users | {c.user for c in self.topology.clients.values()}

    # --- running -------------------------------------------------------------------

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        return event_loop.run(main)

    def now(self) -> float:
        return time.time() - self._wall0

    @property
    def hub_url(self) -> str:
        return self.hub.url

    @property
    def tokens(self) -> Tokens:
        return self.hub.tokens()

    async def setup(self) -> None:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self.hub.prepare)
        for agent in self.agents.values():
            await self._prepare(agent)
        self._tailer = asyncio.ensure_future(self._tail())

    async def _proxy_for(self, name: str, **recording: Any) -> FaultProxy:
        """An agent's own fault proxy in front of the hub, recording its link."""
        host, port = self.hub.address
        return await self.registry.create(
            f"agent-{name}",
            "127.0.0.1:0",
            f"{host}:{port}",
            wire_clock=self.now,
            upstream_ssl=self.hub.ssl_context(),
            upstream_hostname=host if self.hub.secure else None,
            **recording,
        )

    async def _prepare(self, agent: _Agent) -> None:
        """The agent's own fault proxy (its wire recorder), journal and folder."""
        name = agent.spec.name
        if agent.spec.sse:
            await self._prepare_sse(agent)
            return
        agent.proxy = await self._proxy_for(
            name,
            wire=self.recorder.wire_log(name),
            listen_ssl=self.target.tls.server_context() if self.hub.secure else None,
        )
        agent.journal = self.workdir / "logs" / f"agent-{name}.jsonl"
        spec = agent.spec
        self.event_files.agent(agent.journal, f"agent:{name}", spec.session, spec.machine)
        prepare_root(self.agent_root(agent.spec), agent.spec)
        await self._start_llm(agent)
        if agent.devices:
            agent.ports_ready = asyncio.ensure_future(self._start_ports(agent))

    @staticmethod
    async def _ports_ready(agent: _Agent) -> None:
        """The machine's ports are up (they start alongside the hub)."""
        if agent.ports_ready is not None:
            await agent.ports_ready

    def _serial_folder(self, agent: str) -> Path:
        return self.workdir / "serial" / agent

    async def _start_ports(self, agent: _Agent) -> None:
        """socat pairs with the simulated devices, one per port of `options.serial`."""
        folder = self._serial_folder(agent.spec.name)
        started = await asyncio.gather(
            *(
                asyncio.to_thread(VirtualSerialPort.start_spec, folder, device)
                for device in agent.devices.values()
            ),
            return_exceptions=True,
        )
        for name, port in zip(agent.devices, started, strict=True):
            if isinstance(port, VirtualSerialPort):
                agent.ports[name] = port
        for port in started:
            if isinstance(port, BaseException):
                raise BackendError(f"{agent.spec.name}: options.serial: {port}") from None

    async def _start_llm(self, agent: _Agent) -> None:
        """`tetherbed llm-server` for an agent whose scenario gives it a local LLM."""
        options = agent.spec.options.get("llm")
        if options is None:
            return
        try:
            config, reachable = LlmServerConfig.from_scenario(options)
        except ValueError as exc:
            raise BackendError(f"{agent.spec.name}: options.llm: {exc}") from None
        if not reachable:  # a port nothing listens on: the backend is down
            agent.ollama_url = f"http://127.0.0.1:{_closed_port()}"
            return
        try:
            agent.llm = await asyncio.to_thread(
                start_llm_server, config.to_arguments(), name=f"llm-{agent.spec.name}"
            )
        except RuntimeError as exc:
            raise BackendError(str(exc)) from None
        agent.ollama_url = agent.llm.url
        self.recorder.event(
            "runner", "note", {"text": f"{agent.spec.name}: local LLM server at {agent.llm.url}"}
        )

    async def _prepare_sse(self, agent: _Agent) -> None:
        """An SSE agent: an HTTP-reading fault proxy (its dsh wire recorder), its
        config folder and its machine folder."""
        name = agent.spec.name
        agent.proxy = await self._proxy_for(name, wire=self.recorder.dsh_wire_log(name), http=True)
        agent.home = self.workdir / "agents" / name / "home"
        agent.home.mkdir(parents=True, exist_ok=True)
        prepare_root(self.agent_root(agent.spec), agent.spec)

    async def add_agent(self, spec: AgentSpec) -> None:
        await asyncio.to_thread(self.hub.add_user, spec.user)
        self.topology.agents[spec.name] = spec
        agent = self.agents[spec.name] = _Agent(spec, self.target.agent)
        await self._prepare(agent)

    async def teardown(self) -> None:
        for agent in self.agents.values():
            if agent.ports_ready is not None:
                await asyncio.gather(agent.ports_ready, return_exceptions=True)
            if agent.process is not None:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(agent.process.stop, 5.0)
            if agent.llm is not None:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(agent.llm.stop)
            for port in agent.ports.values():
                if port is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.to_thread(port.stop)
        if self.hub.process is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.hub.process.stop)
        for adapter in (self._clients, self._admin):
            if adapter is not None:
                with contextlib.suppress(Exception):
                    await adapter.close()
        with contextlib.suppress(Exception):
            await self.registry.close()
        if self.scheduler is not None:
            self.scheduler.close()
        self._ingest()
        if self._tailer is not None:
            self._tailer.cancel()
            await asyncio.gather(self._tailer, return_exceptions=True)

    def agent_root(self, agent: AgentSpec) -> Path:
        return self.workdir / "roots" / agent.root

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, node: str) -> None:
        if node == "hub":
            if self.hub_state.status in ("running", "paused"):
                raise BackendError("the hub is already running")
            try:
                process = await asyncio.to_thread(self.hub.start)
            except TargetError as exc:
                raise BackendError(str(exc)) from None
            self.hub_state = NodeState("running")
            if process is None:  # a hub at a URL: it was up already
                self.recorder.event("runner", "note", {"text": f"hub at {self.hub.url} is up"})
                return
            self.recorder.event("hub", "started", {"pid": process.pid})
            self._keep(self._watch("hub", process))
            return
        agent = self.agents[node]
        if agent.state.status in ("running", "paused"):
            raise BackendError(f"{node} is already running")
        await self._ports_ready(agent)
        agent.process = self._spawn_agent(agent)
        agent.state = NodeState("running")
        self._agent_event(agent, "started", {"pid": agent.process.pid})
        self._keep(self._watch(node, agent.process))

    def _keep(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    def _spawn_agent(self, agent: _Agent) -> ManagedProcess:
        spec = agent.spec
        if spec.sse:
            return self._spawn_sse_agent(agent)
        assert agent.proxy is not None and agent.journal is not None
        scheme = "wss" if agent.proxy.listen_ssl is not None else "ws"
        hub_url = f"{scheme}://{agent.proxy.listen}"
        try:
            token = self.tokens.get(spec.user, "agent")
        except TargetError as exc:
            raise BackendError(str(exc)) from None
        root = self.agent_root(spec)
        if not agent.target.is_reference:
            if spec.control is not None:
                raise BackendError(
                    f"{spec.name}: a control-mode agent runs Tetherbed's own agent only "
                    "(a third-party agent's control mode is checked by `tetherbed conform "
                    "--control-command`)"
                )
            return self._spawn_command(agent, hub_url, token, root)
        options = spec.options
        args = ["agent", "--hub", hub_url]
        if spec.control is None:
            args += ["--root", str(root), "--session-id", str(spec.session)]
        else:
            for folder in spec.control["browse"]:
                args += ["--browse-root", str((root / folder).resolve())]
            args += ["--child-idle-exit", str(float(spec.control["child_idle_exit"]))]
        args += [
            "--machine-id",
            spec.machine,
            "--journal",
            str(agent.journal),
            "--state-dir",
            str(self.workdir / "agents" / spec.name),
            "--max-concurrent",
            str(options.get("max_concurrent", 4)),
            "--protocol-version",
            str(options.get("protocol_version", CURRENT_TEXT)),
        ]
        if spec.shell:
            args.append("--enable-shell")
        if agent.ollama_url:
            args += ["--ollama-url", agent.ollama_url]
        for path, description in agent.serial_arguments(self._serial_folder(spec.name)):
            args += ["--serial-port", f"{path}={description}"]
        for defect in options.get("defects") or ():
            args += ["--defect", defect]
        return spawn_tetherbed(spec.name, args, env={"TETHERBED_AGENT_TOKEN": token})

    def _spawn_sse_agent(self, agent: _Agent) -> ManagedProcess:
        """`tetherbed agent --transport sse run` with the agent's saved connection
        (another agent's, for `token_of`: two machines sharing one token)."""
        spec = agent.spec
        assert agent.home is not None
        if spec.token_of is not None:
            source = self.agents[spec.token_of].home
            assert source is not None and agent.proxy is not None
            with contextlib.suppress(dsh_agent_config.ConfigError):
                # A copy of the other machine's saved connection, reaching the
                # hub over this machine's own link (its proxy).
                saved = dsh_agent_config.load(dsh_agent_config.config_path(source))
                saved["serverUrl"] = f"http://{agent.proxy.listen}"
                dsh_agent_config.write_private_json(dsh_agent_config.config_path(agent.home), saved)
        args = [
            "--workspace",
            str(self.agent_root(spec)),
            "--log-file",
            str(self.workdir / "logs" / f"agent-{spec.name}.log"),
            "--chunk-format",
            str(spec.options.get("chunk_format", "split")),
        ]
        for defect in spec.options.get("defects") or ():
            args += ["--defect", defect]
        return start_dsh_agent(agent.home, args=args, name=spec.name)

    def _spawn_command(self, agent: _Agent, hub_url: str, token: str, root: Path) -> ManagedProcess:
        """A third-party agent from its command template; its output goes to a log."""
        spec = agent.spec
        state = self.workdir / "agents" / spec.name
        state.mkdir(parents=True, exist_ok=True)
        values = {
            "hub_url": hub_url,
            "token": token,
            "session": spec.session,
            "root": str(root),
            "machine": spec.machine,
            "name": spec.name,
            "state": str(state),
            "shell": spec.shell,
            "max_concurrent": spec.options.get("max_concurrent", 4),
            "protocol_version": spec.options.get("protocol_version", CURRENT_TEXT),
            "ollama_url": agent.ollama_url or "",
            "serial_ports": serial_ports_value(
                agent.serial_arguments(self._serial_folder(spec.name))
            ),
        }
        argv = agent.target.argv(values)
        log = self.workdir / "logs" / f"agent-{spec.name}.log"
        with log.open("ab") as out:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, **agent.target.environment(values)},
                )
            except OSError as exc:
                raise BackendError(f"cannot start agent {spec.name} ({argv[0]}): {exc}") from None
        return ManagedProcess(spec.name, proc)

    async def _watch(self, node: str, process: ManagedProcess) -> None:
        """Record the exit of a process that ends by itself."""
        code = await asyncio.to_thread(process.proc.wait)
        if node == "hub":
            if self.hub.process is process:
                self.hub_state = NodeState("exited", code)
                self.recorder.event("hub", "exited", {"code": code})
            return
        agent = self.agents[node]
        if agent.process is process:
            self._ingest()  # its last journal lines come before its exit
            agent.state = NodeState("exited", code)
            self._agent_event(agent, "exited", {"code": code})

    async def stop(self, node: str) -> None:
        if node == "hub" and not self.target.hub.startable:
            await self._admin_call("shut the hub down", lambda admin: admin.shutdown())
            return
        process = self._process(node, "stop")
        if process is not None and process.alive():
            await asyncio.to_thread(process.stop)
            await asyncio.sleep(0.05)

    async def kill(self, node: str) -> None:
        process = self._process(node, "kill")
        if process is None or not process.alive():
            return
        process.signal(signal.SIGKILL)
        await asyncio.to_thread(process.proc.wait)
        self._record_process(node, "killed")

    async def pause(self, node: str) -> None:
        process = self._process(node, "pause")
        if process is None:
            raise BackendError(f"{node} is not running")
        process.signal(signal.SIGSTOP)
        self._set_state(node, NodeState("paused"))
        self._record_process(node, "paused")

    async def resume(self, node: str) -> None:
        process = self._process(node, "resume")
        if process is None:
            raise BackendError(f"{node} is not running")
        process.signal(signal.SIGCONT)
        if self.state(node).status == "paused":
            self._set_state(node, NodeState("running"))
        self._record_process(node, "resumed")

    def _process(self, node: str, action: str = "signal") -> ManagedProcess | None:
        if node == "hub":
            if not self.target.hub.startable:
                try:
                    self.hub.require_control(action)
                except TargetError as exc:
                    raise BackendError(str(exc)) from None
            return self.hub.process
        return self.agents[node].process

    def _set_state(self, node: str, state: NodeState) -> None:
        if node == "hub":
            self.hub_state = state
        else:
            self.agents[node].state = state

    def _record_process(self, node: str, event: str) -> None:
        if node == "hub":
            self.recorder.event("hub", event)
        else:
            self._agent_event(self.agents[node], event, {})

    def state(self, node: str) -> NodeState:
        if node == "hub":
            return self.hub_state
        return self.agents[node].state

    # --- network -------------------------------------------------------------------

    def _proxy(self, agent: str) -> FaultProxy:
        proxy = self.agents[agent].proxy
        assert proxy is not None
        return proxy

    async def partition(self, agent: str, direction: str = "both") -> None:
        self._proxy(agent).partition(SELECTORS[direction], mode="hold")

    async def heal(self, agent: str | None = None) -> None:
        for name in [agent] if agent else list(self.agents):
            self._proxy(name).heal("both")

    async def fault(self, agent: str, kind: str, params: dict[str, Any]) -> None:
        proxy = self._proxy(agent)
        for op in plan(kind, params):
            match op:
                case AddToxic(toxic):
                    if any(existing.name == toxic.name for existing in proxy.toxics):
                        proxy.remove_toxic(toxic.name)
                    proxy.add_toxic(toxic)
                case AddRule(rule):
                    proxy.add_rule(rule)
                case AddHttpRule(rule):
                    proxy.add_http_rule(rule)
                case ResetConnections():
                    proxy.reset_connections()
                case InjectClose(toward, code, reason):
                    proxy.inject_close(toward, code, reason)
                case _:
                    raise BackendError(f"the process backend cannot carry out a {kind} fault")

    async def clear(self, agent: str | None = None) -> None:
        for name in [agent] if agent else list(self.agents):
            proxy = self._proxy(name)
            proxy.clear_toxics()
            for rule in list(proxy.rules):
                proxy.remove_rule(rule.name)
            proxy.http_rules.clear()

    # --- clients -------------------------------------------------------------------

    async def open_client(self, client: ClientSpec) -> MessageTransport:
        raise BackendError("the process backend opens clients through the client adapter")

    async def open_session_client(self, client: ClientSpec) -> SessionClient:
        if self._clients is None:
            try:
                self._clients = client_adapter(self.target.client_adapter, self.hub.access())
            except TargetError as exc:
                raise BackendError(str(exc)) from None
        return await self._clients.open(client.session, client.user)

    async def open_machine_client(self, client: ClientSpec) -> SessionClient:
        """The hub's machine endpoint (Tetherbed's hub API: docs/hub-api.md)."""
        access = self.hub.access()
        try:
            token = access.tokens.get(client.user, "client")
        except TargetError as exc:
            raise BackendError(str(exc)) from None
        url = f"{access.url}/v1/machines/{quote(str(client.machine), safe='')}/client"
        try:
            transport = await connect_websocket(
                url, {"Authorization": f"Bearer {token}"}, ssl=access.ssl
            )
        except UpgradeRefused as exc:
            raise OpenRefused(exc.status) from None
        return FrameSessionClient(transport)

    async def revoke(self, session: str, user: str) -> None:
        await self._admin_call(f"revoke {session}", lambda admin: admin.revoke(session, user))

    # --- serial ports ----------------------------------------------------------------

    def _device(self, agent: str, port: str) -> DeviceSpec:
        device = self.agents[agent].devices.get(port)
        if device is None:
            raise BackendError(f"{agent} has no serial port {port!r}")
        return device

    def serial_path(self, agent: str, port: str) -> str:
        self._device(agent, port)
        return str(self._serial_folder(agent) / port)

    async def unplug(self, agent: str, port: str) -> None:
        self._device(agent, port)
        await self._ports_ready(self.agents[agent])
        running = self.agents[agent].ports.get(port)
        if running is None:
            raise BackendError(f"{agent}'s {port} is unplugged already")
        self.agents[agent].ports[port] = None
        await asyncio.to_thread(running.unplug)
        await asyncio.to_thread(running.stop)  # the device has exited; reap it

    async def plug(self, agent: str, port: str) -> None:
        device = self._device(agent, port)
        await self._ports_ready(self.agents[agent])
        if self.agents[agent].ports.get(port) is not None:
            raise BackendError(f"{agent}'s {port} is plugged in already")
        folder = self._serial_folder(agent)
        try:
            started = await asyncio.to_thread(VirtualSerialPort.start_spec, folder, device)
        except RuntimeError as exc:
            raise BackendError(f"plugging {agent}'s {port} in: {exc}") from None
        self.agents[agent].ports[port] = started

    async def _admin_call(self, what: str, call: Any) -> None:
        if self._admin is None:
            try:
                self._admin = admin_adapter(self.target.admin_adapter, self.hub.access())
            except TargetError as exc:
                raise BackendError(str(exc)) from None
        try:
            await call(self._admin)
        except NotSupported as exc:
            raise BackendError(f"the hub's admin adapter cannot {what}: {exc}") from None

    # --- dsh-computers ---------------------------------------------------------------

    async def dsh_enroll(self, agent: str, key: str) -> int:
        """`tetherbed agent --transport sse enroll` through the agent's proxy."""
        node = self.agents[agent]
        assert node.proxy is not None and node.home is not None
        server = f"http://{node.proxy.listen}"
        args = dsh_agent_command(
            node.home, "enroll", "--server", server, "--key", key, "--name", node.spec.machine
        )
        if dsh_agent_config.config_path(node.home).exists():
            args.append("--replace")  # enrolling again replaces its saved connection
        log = self.workdir / "logs" / f"agent-{agent}-enroll.log"
        with log.open("ab") as out:
            process = await asyncio.create_subprocess_exec(
                *args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                code = await asyncio.wait_for(process.wait(), ENROLL_TIMEOUT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                code = await process.wait()
        self._agent_event(node, "enroll", {"code": code})
        return code

    def dsh_http(self, client: ClientSpec) -> HubHttp:
        host, port = self.hub.address
        scheme = "https" if self.hub.secure else "http"
        try:
            token = self.tokens.get(client.user, "client")
        except TargetError as exc:
            raise BackendError(str(exc)) from None
        return HubHttp(f"{scheme}://{host}:{port}", token)

    def dsh_stored_state(self) -> str:
        if not self.target.hub.is_reference:
            raise BackendError("only Tetherbed's own hub's store can be read")
        path = self.hub.state / DATABASE_NAME
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                computers = db.execute(
                    "SELECT id, user, token_hash, record FROM dsh_computers"
                ).fetchall()
                keys = db.execute("SELECT digest, user, record FROM dsh_keys").fetchall()
                return repr((computers, keys))
        except sqlite3.Error as exc:
            raise BackendError(f"cannot read the hub's store {path}: {exc}") from None

    def dsh_tokens(self) -> set[str]:
        found = set()
        for agent in self.agents.values():
            if agent.home is None:
                continue
            with contextlib.suppress(dsh_agent_config.ConfigError):
                found.add(dsh_agent_config.load(dsh_agent_config.config_path(agent.home))["token"])
        return found

    # --- history -------------------------------------------------------------------

    def _agent_event(
        self, agent: _Agent, event: str, fields: dict[str, Any], time: float | None = None
    ) -> None:
        spec = agent.spec
        self.recorder.event(
            f"agent:{spec.name}",
            event,
            fields,
            session=spec.session,
            machine=spec.machine,
            time=time,
        )

    async def _tail(self) -> None:
        while True:
            self._ingest()
            await asyncio.sleep(0.05)

    def sync(self) -> None:
        self._ingest()

    def _ingest(self) -> None:
        """Move new lines of the hub's and agents' event files into the history."""
        self.event_files.ingest()


def serial_ports_value(ports: list[tuple[str, str]]) -> str:
    """`{serial_ports}` of a third-party agent command: `PATH=DESCRIPTION` of each
    port, joined by commas (one port: exactly the reference agent's
    `--serial-port` value); empty without ports."""
    return ",".join(f"{path}={description}" for path, description in ports)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
