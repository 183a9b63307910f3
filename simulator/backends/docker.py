"""The `docker` backend: the hub and every agent in containers of the local images.

It follows the process backend step for step, with containers for processes:

- The hub is a container of the hub image (`tetherbed hub --listen
  0.0.0.0:8765 --state /state --events /logs/hub-events.jsonl` + the
  scenario's options) with the run's `hub-state` and `logs` folders
  bind-mounted, alias `hub` and a fixed address on the run's network, and its
  port published on a random 127.0.0.1 port for clients and the revoke API.
  Tokens are minted on the host into `hub-state` before it starts (same
  SQLite file); a restarted hub reuses the container, so its state, alias
  and address stay.
- Each agent gets a network namespace of its own, owned by a small container
  of the machine image whose hostname is the agent's machine and which runs
  the agent's fault proxy (`tetherbed proxy`, link on 127.0.0.1:18765 → hub:8765,
  Toxiproxy API published on the host) with NET_ADMIN for tc and iptables.
  The agent itself is a second container that joins that namespace
  (`network_mode=container:…`) and runs only `tini -g -- tetherbed agent
  --hub ws://127.0.0.1:18765 ...`: its exit code is the agent's, `docker stop`
  is a SIGTERM to the agent, `docker kill` a SIGKILL, `docker pause` a sleep.
  Like the process backend's proxies, the link (its faults and partitions)
  outlives the agent's restarts, and `kill` leaves the proxy to pass the
  kernel's FIN on to the hub.
- Partitions of both directions are `docker network disconnect` / `connect`
  of the agent's namespace (docker_network.py says why addresses are fixed);
  one-way partitions and the other faults are in docker_faults.py.
- The history is built as on the process backend: the hub's events file and
  the agents' journals (bind-mounted, written with the host's clock) are
  tailed into it, and container lifecycle (started, exited with the
  container's exit code, paused, resumed, killed) comes from the backend and
  from the Docker event stream.

Containers come from the images `make images` built (never pulled):
TETHERBED_HUB_IMAGE / TETHERBED_MACHINE_IMAGE from the environment, else
compose/.build/images.env of this checkout, else `:latest`. Every container
and network carries the label `tetherbed.run=<run id>` and is removed in
teardown, whatever happened before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import docker
from docker.types import EndpointConfig
from testcontainers.core.container import DockerContainer
from testcontainers.core.docker_client import DockerClient

from tetherbed import aio
from tetherbed.event_log import read_events
from tetherbed.hub.admin_client import HubAdmin
from tetherbed.launch import create_token
from tetherbed.simulator.backends.base import (
    Backend,
    BackendError,
    NodeState,
    prepare_root,
)
from tetherbed.simulator.backends.docker_faults import (
    STREAMS,
    LinkShaper,
    ProxyApi,
    proxy_fault,
)
from tetherbed.simulator.backends.docker_network import RUN_LABEL, RunNetworks, new_run_id
from tetherbed.simulator.backends.process import hub_arguments
from tetherbed.simulator.scenario import AgentSpec, ClientSpec, Scenario
from tetherbed.transport import MessageTransport
from tetherbed.ws_transport import connect_websocket

T = TypeVar("T")
log = logging.getLogger("tetherbed.simulator.docker")

# No registry here, so no ryuk image: containers are removed by teardown instead
# (and carry the run's label for a sweep). testcontainers reads this lazily.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

HUB_PORT = 8765
PROXY_API_PORT = 8474
#: Where the agent's proxy listens inside the agent's namespace.
LINK_PORT = 18765
#: Seconds for a container to answer (hub /healthz, proxy API) after it started.
READY_TIMEOUT = 30.0
#: `docker stop` grace before SIGKILL, as the process backend's stop.
STOP_TIMEOUT = 10
#: How long a stopped or killed container may take to be reported as exited.
EXIT_TIMEOUT = 15.0
ROLE_LABEL = "tetherbed.role"
NODE_LABEL = "tetherbed.node"
INIT = ["tini", "-g", "--"]
_IMAGES_ENV = Path(__file__).resolve().parents[2] / "compose" / ".build" / "images.env"


def image_tags() -> tuple[str, str]:
    """(hub image, machine image): environment, then images.env, then :latest."""
    found: dict[str, str] = {}
    if _IMAGES_ENV.is_file():
        for line in _IMAGES_ENV.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                found[key.strip()] = value.strip()
    found.update({k: v for k, v in os.environ.items() if k.startswith("TETHERBED_")})
    return (
        found.get("TETHERBED_HUB_IMAGE", "tetherbed/hub:latest"),
        found.get("TETHERBED_MACHINE_IMAGE", "tetherbed/machine:latest"),
    )


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^a-zA-Z0-9.-]+", "-", text).strip("-.")[:limit] or "x"


class _Node:
    """The hub or an agent: a container created on its first start, restarted after."""

    def __init__(self, name: str, process: str) -> None:
        self.name = name
        self.process = process
        self.container: DockerContainer | None = None
        self.state = NodeState("not_started")
        self.exited = asyncio.Event()

    @property
    def docker(self) -> Any:
        """The docker SDK container (for what testcontainers has no call for)."""
        assert self.container is not None
        return self.container.get_wrapped_container()


class _Agent(_Node):
    def __init__(self, spec: AgentSpec, address: str, journal: Path) -> None:
        super().__init__(spec.name, f"agent:{spec.name}")
        self.spec = spec
        self.address = address
        self.journal = journal
        self.journal_read = 0
        self.proxy: DockerContainer | None = None
        self.proxy_exit: str | None = None
        self.api: ProxyApi | None = None
        self.shaper: LinkShaper | None = None
        self.disconnected = False


class DockerBackend(Backend):
    name = "docker"

    def __init__(self, scenario: Scenario, workdir: Path, seed: int) -> None:
        self._wall0 = time.time()
        super().__init__(scenario, workdir, seed)
        self.run_id = new_run_id()
        self.hub_image, self.machine_image = image_tags()
        self.hub = _Node("hub", "hub")
        self.hub_port = 0
        self.hub_events = workdir / "logs" / "hub-events.jsonl"
        self._hub_events_read = 0
        self.agents: dict[str, _Agent] = {}
        self.tokens: dict[tuple[str, str], str] = {}
        self._seeds = random.Random(seed)
        self._user = f"{os.getuid()}:{os.getgid()}"
        self._client: docker.DockerClient | None = None
        self._networks: RunNetworks | None = None
        self._http: aiohttp.ClientSession | None = None
        self._events: _DockerEvents | None = None
        self._tailer: asyncio.Task[None] | None = None
        self._closing = False
        #: None: not tried yet; False: this kernel has no netem (proxy latency instead).
        self._netem: bool | None = None

    # --- running -------------------------------------------------------------------

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        return aio.run(main)

    def now(self) -> float:
        return time.time() - self._wall0

    @property
    def hub_url(self) -> str:
        return f"ws://127.0.0.1:{self.hub_port}"

    async def setup(self) -> None:
        if self.topology.hub.url:
            raise BackendError(
                "hub.url (a third-party hub) is for the process backend; "
                "the docker backend runs the reference hub in a container"
            )
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self._http = aiohttp.ClientSession()
        self._client = await asyncio.to_thread(self._connect_engine)
        self._events = _DockerEvents(self._client, self.run_id, self._on_docker_event)
        await asyncio.to_thread(self._events.start, asyncio.get_running_loop())
        self._networks = await asyncio.to_thread(RunNetworks.create, self._client, self.run_id)
        users = {a.user for a in self.topology.agents.values()}
        users |= {c.user for c in self.topology.clients.values()}
        self._tailer = asyncio.ensure_future(self._tail())
        specs = list(self.topology.agents.values())
        await asyncio.gather(
            self._mint_tokens(sorted(users)), *(self._prepare(spec) for spec in specs)
        )

    def _connect_engine(self) -> docker.DockerClient:
        try:
            client = DockerClient().client
        except docker.errors.DockerException as exc:
            raise BackendError(f"cannot reach the Docker engine: {exc}") from exc
        for image in (self.hub_image, self.machine_image):
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                raise BackendError(
                    f"image {image} is not here and is never pulled: build it with "
                    "`make images` (compose/build_images.py)"
                ) from None
        return client

    async def _mint_tokens(self, users: list[str]) -> None:
        """On the host, into the state the hub container will open (one at a time:
        the first call creates the SQLite file)."""
        for user in users:
            for kind in ("agent", "client"):
                if (user, kind) not in self.tokens:
                    self.tokens[user, kind] = await asyncio.to_thread(
                        create_token, self.workdir / "hub-state", user, kind
                    )

    async def add_agent(self, spec: AgentSpec) -> None:
        await self._mint_tokens([spec.user])
        self.topology.agents[spec.name] = spec
        await self._prepare(spec)

    def agent_root(self, agent: AgentSpec) -> Path:
        return self.workdir / "roots" / agent.root

    # --- an agent's namespace and proxy ------------------------------------------------

    async def _prepare(self, spec: AgentSpec) -> None:
        """The agent's folders, and its namespace container running its fault proxy."""
        assert self._networks is not None and self._http is not None
        agent = _Agent(
            spec,
            self._networks.next_agent_address(),
            self.workdir / "logs" / f"agent-{spec.name}.jsonl",
        )
        self.agents[spec.name] = agent
        prepare_root(self.agent_root(spec), spec)
        (self.workdir / "agents" / spec.name).mkdir(parents=True, exist_ok=True)
        command = [
            "tetherbed",
            "proxy",
            "--api",
            f"0.0.0.0:{PROXY_API_PORT}",
            "--proxy",
            f"link=127.0.0.1:{LINK_PORT}=hub:{HUB_PORT}",
            "--seed",
            str(self._seeds.getrandbits(32)),
        ]
        proxy = DockerContainer(
            self.machine_image,
            command=command,  # type: ignore[arg-type] - docker takes a list
            name=f"{self.run_id}-link-{_slug(spec.name)}",
            hostname=_slug(spec.machine, 63),
            entrypoint=INIT,
            user=self._user,
            cap_add=["NET_ADMIN"],
            network=self._networks.ctl,
            labels=self._labels("proxy", spec.name),
        )
        proxy.ports[f"{PROXY_API_PORT}/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
        agent.proxy = proxy
        await self._docker(f"starting {spec.name}'s proxy", proxy.start)
        await self._docker(f"connecting {spec.name} to the hub's network", self._plug, agent)
        port = await asyncio.to_thread(self._published_port, proxy, PROXY_API_PORT)
        agent.api = ProxyApi(self._http, f"http://127.0.0.1:{port}")
        agent.shaper = LinkShaper(
            lambda script: self._exec_root(agent, script), agent.address, self._hub_address
        )
        try:
            await agent.api.wait_ready(READY_TIMEOUT, lambda: agent.proxy_exit)
        except BackendError as exc:
            raise BackendError(f"{spec.name}'s fault proxy: {exc}\n{_logs(proxy)}") from None

    @property
    def _hub_address(self) -> str:
        assert self._networks is not None
        return self._networks.hub_address

    def _plug(self, agent: _Agent) -> None:
        assert self._networks is not None and agent.proxy is not None
        net = self._client_or_fail().networks.get(self._networks.net.name)
        net.connect(agent.proxy.get_wrapped_container(), ipv4_address=agent.address)

    def _unplug(self, agent: _Agent) -> None:
        assert self._networks is not None and agent.proxy is not None
        net = self._client_or_fail().networks.get(self._networks.net.name)
        net.disconnect(agent.proxy.get_wrapped_container())

    def _client_or_fail(self) -> docker.DockerClient:
        if self._client is None:
            raise BackendError("the docker backend is not set up")
        return self._client

    async def _exec_root(self, agent: _Agent, script: str) -> tuple[int, str]:
        """A shell script as root in the agent's namespace (its proxy container)."""
        assert agent.proxy is not None
        result = await self._docker(
            f"exec in {agent.name}'s namespace",
            agent.proxy.get_wrapped_container().exec_run,
            ["sh", "-c", script],
            user="0",
        )
        return result.exit_code, result.output.decode("utf-8", "replace")

    def _labels(self, role: str, node: str) -> dict[str, str]:
        return {RUN_LABEL: self.run_id, ROLE_LABEL: role, NODE_LABEL: node}

    @staticmethod
    def _published_port(container: DockerContainer, port: int) -> int:
        client = container.get_docker_client()
        return int(client.port(container.get_container_id(), port))

    @staticmethod
    async def _docker(what: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking Docker call in a thread; its failure is a BackendError saying what."""
        try:
            return await asyncio.to_thread(call, *args, **kwargs)
        except docker.errors.DockerException as exc:
            raise BackendError(f"{what}: {exc}") from exc

    # --- containers ------------------------------------------------------------------

    def _hub_container(self) -> DockerContainer:
        assert self._networks is not None and self._client is not None
        net = self._networks.net
        command = [
            "tetherbed",
            "hub",
            "--listen",
            f"0.0.0.0:{HUB_PORT}",
            "--state",
            "/state",
            "--events",
            "/logs/hub-events.jsonl",
            *hub_arguments(self.topology.hub.options),
        ]
        endpoint = EndpointConfig(
            self._client.api._version, aliases=["hub"], ipv4_address=self._hub_address
        )
        container = DockerContainer(
            self.hub_image,
            command=command,  # type: ignore[arg-type]
            name=f"{self.run_id}-hub",
            hostname="hub",
            entrypoint=INIT,
            user=self._user,
            volumes=[
                (str(self.workdir / "hub-state"), "/state", "rw"),
                (str(self.workdir / "logs"), "/logs", "rw"),
            ],
            network=net,
            # testcontainers sets the aliases only; this adds the fixed address
            networking_config={net.name: endpoint},
            labels=self._labels("hub", "hub"),
        )
        container.ports[f"{HUB_PORT}/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
        return container

    def _agent_container(self, agent: _Agent) -> DockerContainer:
        spec = agent.spec
        assert agent.proxy is not None
        token = self.tokens[spec.user, "agent"]
        hub_url = f"ws://127.0.0.1:{LINK_PORT}"
        if spec.command:
            values = {
                "hub_url": hub_url,
                "token": token,
                "session": spec.session,
                "root": "/workspace",
                "machine": spec.machine,
            }
            command = [part.format(**values) for part in spec.command]
        else:
            options = spec.options
            command = [
                "tetherbed",
                "agent",
                "--hub",
                hub_url,
                "--root",
                "/workspace",
                "--session-id",
                spec.session,
                "--machine-id",
                spec.machine,
                "--journal",
                f"/logs/{agent.journal.name}",
                "--state-dir",
                "/agent-state",
                "--max-concurrent",
                str(options.get("max_concurrent", 4)),
                "--protocol-version",
                str(options.get("protocol_version", "1.1")),
            ]
            if spec.shell:
                command.append("--enable-shell")
            for defect in options.get("defects") or ():
                command += ["--defect", defect]
        return DockerContainer(
            self.machine_image,
            command=command,  # type: ignore[arg-type]
            name=f"{self.run_id}-agent-{_slug(spec.name)}",
            env={"TETHERBED_AGENT_TOKEN": token},
            volumes=[
                (str(self.agent_root(spec)), "/workspace", "rw"),
                (str(self.workdir / "logs"), "/logs", "rw"),
                (str(self.workdir / "agents" / spec.name), "/agent-state", "rw"),
            ],
        ).with_kwargs(
            # `network: None` also stops testcontainers from picking a network itself.
            network=None,
            network_mode=f"container:{agent.proxy.get_container_id()}",
            entrypoint=INIT,
            user=self._user,
            working_dir="/workspace",
            labels=self._labels("agent", spec.name),
        )

    # --- lifecycle -----------------------------------------------------------------

    def _node(self, node: str) -> _Node:
        return self.hub if node == "hub" else self.agents[node]

    async def start(self, node: str) -> None:
        target = self._node(node)
        if target.state.status in ("running", "paused"):
            raise BackendError(f"{node} is already running")
        if isinstance(target, _Agent) and target.proxy_exit:
            raise BackendError(f"{node}'s fault proxy is gone: {target.proxy_exit}")
        at = self.now()  # nothing it logs can come before this
        target.exited.clear()
        if target.container is None:
            target.container = (
                self._hub_container() if node == "hub" else self._agent_container(self.agents[node])
            )
            await self._docker(f"starting {node}", target.container.start)
        else:
            await self._docker(f"starting {node}", target.docker.start)
        target.state = NodeState("running")
        self._record(target, "started", {"container": target.docker.short_id}, time=at)
        if node == "hub":
            self.hub_port = await asyncio.to_thread(
                self._published_port, target.container, HUB_PORT
            )
            await self._wait_hub_ready()

    async def _wait_hub_ready(self) -> None:
        assert self._http is not None
        deadline = time.monotonic() + READY_TIMEOUT
        url = f"http://127.0.0.1:{self.hub_port}/healthz"
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with self._http.get(url, timeout=aiohttp.ClientTimeout(total=1)) as answer:
                    if answer.status == 200:
                        return
            if self.hub.state.status == "exited" or time.monotonic() > deadline:
                why = (
                    f"exited with {self.hub.state.exit_code}"
                    if self.hub.state.status == "exited"
                    else f"no answer on {url} within {READY_TIMEOUT} s"
                )
                assert self.hub.container is not None
                raise BackendError(f"the hub container {why}:\n{_logs(self.hub.container)}")
            await asyncio.sleep(0.03)

    async def stop(self, node: str) -> None:
        target = self._node(node)
        if target.container is None or target.state.status not in ("running", "paused"):
            return
        if target.state.status == "paused":  # a frozen process cannot handle SIGTERM
            await self._docker(f"waking {node}", target.docker.unpause)
        await self._docker(f"stopping {node}", target.docker.stop, timeout=STOP_TIMEOUT)
        await self._wait_exit(target)

    async def kill(self, node: str) -> None:
        target = self._node(node)
        if target.container is None or target.state.status not in ("running", "paused"):
            return
        if target.state.status == "paused":  # Docker refuses to kill a paused container
            await self._docker(f"waking {node}", target.docker.unpause)
        with contextlib.suppress(docker.errors.APIError):  # it may have exited meanwhile
            await asyncio.to_thread(target.docker.kill, "SIGKILL")
        await self._wait_exit(target)
        self._record(target, "killed", {})

    async def _wait_exit(self, target: _Node) -> None:
        try:
            await asyncio.wait_for(target.exited.wait(), EXIT_TIMEOUT)
        except TimeoutError:
            raise BackendError(
                f"{target.name} was not reported exited in {EXIT_TIMEOUT} s"
            ) from None

    async def pause(self, node: str) -> None:
        target = self._node(node)
        if target.container is None or target.state.status != "running":
            raise BackendError(f"{node} is not running")
        await self._docker(f"pausing {node}", target.docker.pause)
        target.state = NodeState("paused")
        self._record(target, "paused", {})

    async def resume(self, node: str) -> None:
        target = self._node(node)
        if target.container is None:
            raise BackendError(f"{node} is not running")
        if target.state.status == "paused":
            await self._docker(f"resuming {node}", target.docker.unpause)
            target.state = NodeState("running")
        self._record(target, "resumed", {})

    def state(self, node: str) -> NodeState:
        return self._node(node).state

    def _record(
        self, target: _Node, event: str, fields: dict[str, Any], time: float | None = None
    ) -> None:
        if isinstance(target, _Agent):
            self._agent_event(target, event, fields, time)
        else:
            self.recorder.event("hub", event, fields, time=time)

    def _on_docker_event(self, event: dict[str, Any]) -> None:
        """A container of this run died (runs on the loop, from the events thread)."""
        if self._closing:
            return
        attributes = event.get("Actor", {}).get("Attributes", {})
        role, name = attributes.get(ROLE_LABEL), attributes.get(NODE_LABEL, "")
        code = int(attributes.get("exitCode", -1))
        at = event["timeNano"] / 1e9 - self._wall0 if "timeNano" in event else None
        if role == "proxy" and name in self.agents:
            self.agents[name].proxy_exit = f"its container exited with {code}"
            self.recorder.event("docker", "proxy_exited", {"agent": name, "code": code}, time=at)
            return
        target = self.hub if role == "hub" else self.agents.get(name)
        if target is None or target.state.status not in ("running", "paused"):
            return
        self._ingest()  # its last journal lines come before its exit
        target.state = NodeState("exited", code)
        self._record(target, "exited", {"code": code}, time=at)
        target.exited.set()

    # --- network -------------------------------------------------------------------

    def _agent(self, name: str) -> _Agent:
        agent = self.agents[name]
        assert agent.api is not None and agent.shaper is not None
        return agent

    async def partition(self, agent: str, direction: str = "both") -> None:
        target = self._agent(agent)
        if direction == "both":
            if not target.disconnected:
                await self._docker(f"disconnecting {agent}", self._unplug, target)
                target.disconnected = True
        else:
            await target.api.partition(STREAMS[direction])  # type: ignore[union-attr]

    async def heal(self, agent: str | None = None) -> None:
        for name in [agent] if agent else list(self.agents):
            target = self._agent(name)
            if target.disconnected:
                await self._docker(f"reconnecting {name}", self._plug, target)
                target.disconnected = False
                await target.shaper.reapply()  # type: ignore[union-attr]
            await target.api.heal()  # type: ignore[union-attr]

    async def fault(self, agent: str, kind: str, params: dict[str, Any]) -> None:
        target = self._agent(agent)
        assert target.api is not None and target.shaper is not None
        if kind == "loss":
            await target.shaper.loss(params)
            return
        if kind == "latency" and self._netem is not False:
            self._netem = await target.shaper.delay(params)
            via = "netem" if self._netem else "proxy (this kernel has no netem)"
            self.recorder.event("fault", "fault_via", {"kind": kind, "target": agent, "via": via})
            if self._netem:
                return
        await proxy_fault(target.api, kind, params)

    async def clear(self, agent: str | None = None) -> None:
        for name in [agent] if agent else list(self.agents):
            target = self._agent(name)
            await target.api.clear()  # type: ignore[union-attr]
            await target.shaper.clear()  # type: ignore[union-attr]

    # --- clients -------------------------------------------------------------------

    async def open_client(self, client: ClientSpec) -> MessageTransport:
        token = self.tokens[client.user, "client"]
        url = f"{self.hub_url}/v1/sessions/{client.session}/client"
        return await connect_websocket(url, {"Authorization": f"Bearer {token}"})

    async def revoke(self, session: str, user: str) -> None:
        async with HubAdmin(self.hub_url, self.tokens[user, "client"]) as admin:
            await admin.revoke(session)

    # --- teardown ------------------------------------------------------------------

    async def teardown(self) -> None:
        """Remove every container and network of the run; never raises."""
        self._closing = True
        agents = list(self.agents.values())
        await _quietly(*(_remove(a.container) for a in agents))
        await _quietly(*(_remove(a.proxy) for a in agents), _remove(self.hub.container))
        if self._client is not None:
            await _quietly(asyncio.to_thread(_sweep, self._client, self.run_id, self._networks))
        if self._events is not None:
            self._events.close()
        if self._http is not None:
            await _quietly(self._http.close())
        if self._tailer is not None:
            self._tailer.cancel()
            await asyncio.gather(self._tailer, return_exceptions=True)
        self._ingest()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()

    # --- history -------------------------------------------------------------------

    def _agent_event(
        self, agent: _Agent, event: str, fields: dict[str, Any], time: float | None = None
    ) -> None:
        spec = agent.spec
        self.recorder.event(
            agent.process, event, fields, session=spec.session, machine=spec.machine, time=time
        )

    async def _tail(self) -> None:
        while True:
            self._ingest()
            await asyncio.sleep(0.05)

    def sync(self) -> None:
        self._ingest()

    def _ingest(self) -> None:
        """Move new lines of the hub's and agents' event files into the history."""
        events = read_events(self.hub_events)
        for event in events[self._hub_events_read :]:
            fields = dict(event)
            at = fields.pop("t") - self._wall0
            name = fields.pop("event")
            session = fields.pop("session", None)
            machine = fields.pop("machine", None)
            self.recorder.event("hub", name, fields, session=session, machine=machine, time=at)
        self._hub_events_read = len(events)
        for agent in self.agents.values():
            lines = read_events(agent.journal)
            for event in lines[agent.journal_read :]:
                fields = dict(event)
                at = fields.pop("t") - self._wall0
                name = fields.pop("event")
                self._agent_event(agent, name, fields, time=at)
            agent.journal_read = len(lines)


class _DockerEvents:
    """`die` events of this run's containers, read by one thread and handed to the loop.

    One stream for the whole run reports every exit with its code as it
    happens, without a blocked `wait()` thread per container.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        run: str,
        on_event: Callable[[dict[str, Any]], None],
    ) -> None:
        self._client = client
        self._run = run
        self._on_event = on_event
        self._stream: Any = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Subscribe (before any container exists, so no exit is missed), then read."""
        self._stream = self._client.events(
            decode=True,
            filters={"type": "container", "event": "die", "label": f"{RUN_LABEL}={self._run}"},
        )
        threading.Thread(
            target=self._pump, args=(loop,), name=f"{self._run}-events", daemon=True
        ).start()

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for event in self._stream:
                loop.call_soon_threadsafe(self._on_event, event)
        except Exception as exc:  # closed by teardown, or the loop is gone
            log.debug("docker event stream ended: %s", exc)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()


async def _remove(container: DockerContainer | None) -> None:
    if container is not None:
        await asyncio.to_thread(container.stop, force=True, delete_volume=True)


async def _quietly(*awaitables: Any) -> None:
    for result in await asyncio.gather(*awaitables, return_exceptions=True):
        if isinstance(result, BaseException):
            log.debug("teardown: %s", result)


def _sweep(client: docker.DockerClient, run: str, networks: RunNetworks | None) -> None:
    """Whatever of this run is still there (a failed start, an untracked container)."""
    selector = {"label": f"{RUN_LABEL}={run}"}
    for container in client.containers.list(all=True, filters=selector):
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)
    if networks is not None:
        networks.remove()
    for network in client.networks.list(filters=selector):
        with contextlib.suppress(Exception):
            network.remove()


def _logs(container: DockerContainer) -> str:
    """The tail of a container's output, for an error message."""
    try:
        out, err = container.get_logs()
    except Exception as exc:  # it may be gone
        return f"(no logs: {exc})"
    text = (out + err).decode("utf-8", "replace").strip().splitlines()
    return "\n".join(text[-30:]) or "(no output)"
