"""The `process` backend: real `tetherbed hub` and `tetherbed agent` processes.

Every agent reaches the hub through its own fault proxy on loopback, so a
fault or partition targets one agent's link; pause and resume are SIGSTOP and
SIGCONT, exactly a laptop going to sleep. The hub writes its events
(`--events`) and every agent its journal (`--journal`); a tailer merges them
into the history as they appear. Time is real here: the run's clock is wall
time since the start.

A scenario may point the hub at a third-party implementation (`hub.url`, with
`hub.tokens`) or replace an agent by another command (`agents.X.command`,
with `{hub_url}`, `{token}`, `{session}`, `{root}`, `{machine}` filled in).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import socket
import subprocess
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from tetherbed.client.admin import HubAdmin
from tetherbed.launch import (
    HubProcess,
    ManagedProcess,
    create_token,
    spawn_tetherbed,
    start_hub,
)
from tetherbed.runtime import event_loop
from tetherbed.runtime.transport import MessageTransport
from tetherbed.runtime.websocket_transport import connect_websocket
from tetherbed.simulator.backends.base import Backend, BackendError, NodeState, prepare_root
from tetherbed.simulator.backends.event_files import EventFiles
from tetherbed.simulator.faults import (
    SELECTORS,
    AddRule,
    AddToxic,
    InjectClose,
    ResetConnections,
    plan,
)
from tetherbed.simulator.proxy import ProxyRegistry
from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.scenario import AgentSpec, ClientSpec, Scenario
from tetherbed.wire.version import CURRENT_TEXT

T = TypeVar("T")

#: Scenario hub options → `tetherbed hub` flags.
_HUB_FLAGS = {
    "max_concurrent": "--max-concurrent",
    "max_file_size": "--max-file-size",
    "command_timeout": "--command-timeout",
    "ping_interval": "--ping-interval",
    "pong_timeout": "--pong-timeout",
    "retry_window": "--retry-window",
    "queue_limit": "--queue-limit",
    "ownership": "--ownership",
    "protocol_version": "--protocol-version",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def hub_arguments(options: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for option, flag in _HUB_FLAGS.items():
        if option in options:
            args += [flag, str(options[option])]
    for defect in options.get("defects") or ():
        args += ["--defect", defect]
    return args


class _Agent:
    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.process: ManagedProcess | None = None
        self.proxy: FaultProxy | None = None
        self.state = NodeState("not_started")
        self.journal: Path | None = None


class ProcessBackend(Backend):
    name = "process"

    def __init__(self, scenario: Scenario, workdir: Path, seed: int) -> None:
        self._wall0 = time.time()
        super().__init__(scenario, workdir, seed)
        self.hub: HubProcess | None = None
        self.hub_state = NodeState("not_started")
        self.hub_port = 0
        self.hub_events = workdir / "logs" / "hub-events.jsonl"
        self.event_files = EventFiles(self.recorder, self._wall0)
        self.event_files.hub(self.hub_events)
        self.agents = {name: _Agent(spec) for name, spec in self.topology.agents.items()}
        self.tokens: dict[tuple[str, str], str] = {}
        self.registry = ProxyRegistry(random.Random(seed))
        self._tailer: asyncio.Task[None] | None = None
        self._watchers: set[asyncio.Task[None]] = set()

    # --- running -------------------------------------------------------------------

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        return event_loop.run(main)

    def now(self) -> float:
        return time.time() - self._wall0

    @property
    def hub_url(self) -> str:
        return self.topology.hub.url or f"ws://127.0.0.1:{self.hub_port}"

    async def setup(self) -> None:
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.hub_port = free_port()
        users = {a.user for a in self.topology.agents.values()}
        users |= {c.user for c in self.topology.clients.values()}
        given = self.topology.hub.options.get("tokens") or {}
        for user in sorted(users):
            for kind in ("agent", "client"):
                if self.topology.hub.url:
                    self.tokens[user, kind] = given[user][kind]
                else:
                    self.tokens[user, kind] = await asyncio.to_thread(
                        create_token, self.workdir / "hub-state", user, kind
                    )
        for agent in self.agents.values():
            await self._prepare(agent)
        self._tailer = asyncio.ensure_future(self._tail())

    async def _prepare(self, agent: _Agent) -> None:
        """The agent's own fault proxy, journal and folder."""
        name = agent.spec.name
        upstream = self.hub_url.split("://", 1)[1].rstrip("/")
        agent.proxy = await self.registry.create(f"agent-{name}", "127.0.0.1:0", upstream)
        agent.journal = self.workdir / "logs" / f"agent-{name}.jsonl"
        spec = agent.spec
        self.event_files.agent(agent.journal, f"agent:{name}", spec.session, spec.machine)
        prepare_root(self.agent_root(agent.spec), agent.spec)

    async def add_agent(self, spec: AgentSpec) -> None:
        if spec.user not in {user for user, _ in self.tokens}:
            for kind in ("agent", "client"):
                self.tokens[spec.user, kind] = await asyncio.to_thread(
                    create_token, self.workdir / "hub-state", spec.user, kind
                )
        self.topology.agents[spec.name] = spec
        agent = self.agents[spec.name] = _Agent(spec)
        await self._prepare(agent)

    async def teardown(self) -> None:
        for agent in self.agents.values():
            if agent.process is not None:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(agent.process.stop, 5.0)
        if self.hub is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.hub.stop)
        with contextlib.suppress(Exception):
            await self.registry.close()
        self._ingest()
        if self._tailer is not None:
            self._tailer.cancel()
            await asyncio.gather(self._tailer, return_exceptions=True)

    def agent_root(self, agent: AgentSpec) -> Path:
        return self.workdir / "roots" / agent.root

    # --- lifecycle -----------------------------------------------------------------

    async def start(self, node: str) -> None:
        if node == "hub":
            if self.topology.hub.url:
                raise BackendError("the hub is a third-party one at hub.url: not started here")
            if self.hub_state.status in ("running", "paused"):
                raise BackendError("the hub is already running")
            args = ["--events", str(self.hub_events), *hub_arguments(self.topology.hub.options)]
            self.hub = await asyncio.to_thread(
                start_hub,
                self.workdir / "hub-state",
                listen=f"127.0.0.1:{self.hub_port}",
                args=args,
            )
            self.hub_state = NodeState("running")
            self.recorder.event("hub", "started", {"pid": self.hub.process.pid})
            self._keep(self._watch("hub", self.hub.process))
            return
        agent = self.agents[node]
        if agent.state.status in ("running", "paused"):
            raise BackendError(f"{node} is already running")
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
        assert agent.proxy is not None and agent.journal is not None
        hub_url = f"ws://{agent.proxy.listen}"
        token = self.tokens[spec.user, "agent"]
        root = self.agent_root(spec)
        if spec.command:
            values = {
                "hub_url": hub_url,
                "token": token,
                "session": spec.session,
                "root": str(root),
                "machine": spec.machine,
            }
            argv = [part.format(**values) for part in spec.command]
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            return ManagedProcess(spec.name, proc)
        options = spec.options
        args = [
            "agent",
            "--hub",
            hub_url,
            "--root",
            str(root),
            "--session-id",
            spec.session,
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
        for defect in options.get("defects") or ():
            args += ["--defect", defect]
        return spawn_tetherbed(spec.name, args, env={"TETHERBED_AGENT_TOKEN": token})

    async def _watch(self, node: str, process: ManagedProcess) -> None:
        """Record the exit of a process that ends by itself."""
        code = await asyncio.to_thread(process.proc.wait)
        if node == "hub":
            if self.hub is not None and self.hub.process is process:
                self.hub_state = NodeState("exited", code)
                self.recorder.event("hub", "exited", {"code": code})
            return
        agent = self.agents[node]
        if agent.process is process:
            self._ingest()  # its last journal lines come before its exit
            agent.state = NodeState("exited", code)
            self._agent_event(agent, "exited", {"code": code})

    async def stop(self, node: str) -> None:
        process = self._process(node)
        if process is not None and process.alive():
            await asyncio.to_thread(process.stop)
            await asyncio.sleep(0.05)

    async def kill(self, node: str) -> None:
        process = self._process(node)
        if process is None or not process.alive():
            return
        process.signal(signal.SIGKILL)
        await asyncio.to_thread(process.proc.wait)
        self._record_process(node, "killed")

    async def pause(self, node: str) -> None:
        process = self._process(node)
        if process is None:
            raise BackendError(f"{node} is not running")
        process.signal(signal.SIGSTOP)
        self._set_state(node, NodeState("paused"))
        self._record_process(node, "paused")

    async def resume(self, node: str) -> None:
        process = self._process(node)
        if process is None:
            raise BackendError(f"{node} is not running")
        process.signal(signal.SIGCONT)
        if self.state(node).status == "paused":
            self._set_state(node, NodeState("running"))
        self._record_process(node, "resumed")

    def _process(self, node: str) -> ManagedProcess | None:
        if node == "hub":
            return self.hub.process if self.hub is not None else None
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

    # --- clients -------------------------------------------------------------------

    async def open_client(self, client: ClientSpec) -> MessageTransport:
        token = self.tokens[client.user, "client"]
        url = f"{self.hub_url}/v1/sessions/{client.session}/client"
        return await connect_websocket(url, {"Authorization": f"Bearer {token}"})

    async def revoke(self, session: str, user: str) -> None:
        async with HubAdmin(self.hub_url, self.tokens[user, "client"]) as admin:
            await admin.revoke(session)

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
