"""The `docker` backend: the hub and every agent in containers of the local images.

It follows the process backend step for step, with containers for processes,
so that a scenario runs unchanged on it and its history means the same:

- the hub and each agent run in containers (containers.py: what runs
  where, and why each agent's fault proxy lives in a "link" container whose
  network namespace the agent's container joins). Tokens are minted on the
  host into the hub's state folder before it starts; a restarted hub reuses
  its container, so its state, alias `hub` and address stay;
- lifecycle steps are Docker's: start, `docker stop` (SIGTERM; the hub sends
  4429), `docker kill` (SIGKILL), restart (kill, then start the same
  container), `docker pause` / `unpause` (sleep and wake);
- a partition of both directions is `docker network disconnect` / `connect`
  (network.py: the networks, and why addresses are fixed); one-way
  partitions and every other fault are in faults.py;
- the history is built as on the process backend: the hub's events file and
  the agents' journals are bind-mounted, written with the host's clock (a
  container has no other) and tailed into it; lifecycle events (started,
  exited with the container's exit code, paused, resumed, killed) come from
  the backend and from Docker's event stream;
- clients and the revoke API reach the hub on its port published on
  127.0.0.1; `now()` is wall time since the start;
- a machine's virtual serial ports (`options.serial`) live in its agent's
  container (containers.py says why); `unplug`/`plug` run
  `serial_ports unplug|plug` there, and the ports' config on the host keeps
  which are plugged in, for the container's next start.

Everything carries the label `tetherbed.run=<run id>` and teardown removes it
all, whatever happened before (Ctrl-C included).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

try:
    import docker
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.docker_client import DockerClient
except ImportError as missing:  # not a core dependency: say what to install
    raise ImportError(
        f"the docker backend needs testcontainers ({missing}): "
        "pip install 'testcontainers>=4.15' (or the project's dev extra)"
    ) from missing

from tetherbed.client.admin import HubAdmin
from tetherbed.launch import create_token
from tetherbed.runtime import event_loop
from tetherbed.runtime.transport import MessageTransport
from tetherbed.runtime.websocket_transport import connect_websocket
from tetherbed.simulator.backends.base import (
    Backend,
    BackendError,
    NodeState,
    prepare_root,
)
from tetherbed.simulator.backends.docker.containers import (
    HUB_PORT,
    NODE_LABEL,
    PROXY_API_PORT,
    ROLE_LABEL,
    SERIAL_COMMAND,
    SERIAL_CONFIG,
    SERIAL_FOLDER,
    DeathWatch,
    agent_container,
    container_logs,
    host_user,
    hub_container,
    image_tags,
    link_container,
    published_port,
    remove,
    sweep,
    wire_log_name,
)
from tetherbed.simulator.backends.docker.faults import (
    LinkShaper,
    ProxyApi,
    apply_plan,
)
from tetherbed.simulator.backends.docker.network import RunNetworks, new_run_id
from tetherbed.simulator.backends.docker.scheduling import (
    link_arguments,
    merge_link_logs,
    prepare_replay,
)
from tetherbed.simulator.backends.event_files import EventFiles
from tetherbed.simulator.faults import SELECTORS, DropPackets, checked, plan
from tetherbed.simulator.peripherals.serial_ports import DeviceSpec
from tetherbed.simulator.proxy.scheduler import ScheduleOptions
from tetherbed.simulator.scenario import AgentSpec, ClientSpec, Scenario
from tetherbed.simulator.targets import Target

T = TypeVar("T")
log = logging.getLogger("tetherbed.simulator.docker")

# No registry here, so no ryuk image: containers are removed by teardown instead
# (and carry the run's label for a sweep). testcontainers reads this lazily.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

#: Seconds for a container to answer (hub /healthz, proxy API) after it started.
READY_TIMEOUT = 30.0
#: `docker stop` grace before SIGKILL, as the process backend's stop.
STOP_TIMEOUT = 10
#: How long a stopped or killed container may take to be reported as exited.
EXIT_TIMEOUT = 15.0


class _Node:
    """The hub or an agent: a container created on its first start, restarted after."""

    def __init__(self, name: str, process: str) -> None:
        self.name = name
        self.process = process
        self.container: DockerContainer | None = None
        self.state = NodeState("not_started")
        self.exited = asyncio.Event()

    @property
    def sdk(self) -> Any:
        """The Docker SDK's container, for what testcontainers has no call for."""
        assert self.container is not None
        return self.container.get_wrapped_container()


class _Agent(_Node):
    def __init__(self, spec: AgentSpec, address: str, journal: Path) -> None:
        super().__init__(spec.name, f"agent:{spec.name}")
        self.spec = spec
        self.address = address
        self.journal = journal
        self.link: DockerContainer | None = None
        self.link_exit: str | None = None
        self.api: ProxyApi | None = None
        self.shaper: LinkShaper | None = None
        self.disconnected = False
        #: Its machine's virtual serial ports: each device, and whether it is plugged in.
        self.devices = {
            name: DeviceSpec.from_scenario(name, options, spec.machine)
            for name, options in spec.serial_ports.items()
        }
        self.plugged = dict.fromkeys(self.devices, True)
        self.serial_config: Path | None = None

    def write_serial_config(self) -> None:
        """What `serial_ports boot` reads when the container (re)starts."""
        assert self.serial_config is not None
        ports = [
            {**device.to_json(), "plugged": self.plugged[name]}
            for name, device in self.devices.items()
        ]
        self.serial_config.write_text(json.dumps({"ports": ports}), encoding="utf-8")

    def serial_ports(self) -> list[tuple[str, str]]:
        return [
            (f"{SERIAL_FOLDER}/{name}", device.description) for name, device in self.devices.items()
        ]


def _stop_gently(container: DockerContainer | None) -> None:
    """`docker stop`: SIGTERM, then SIGKILL after a few seconds."""
    if container is not None:
        container.get_wrapped_container().stop(timeout=3)


class DockerBackend(Backend):
    name = "docker"
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
        """`schedule`: each agent's link schedules its frames (scheduling.py)."""
        if target is not None and not target.hub.is_reference:
            raise BackendError(
                "the docker backend runs Tetherbed's hub in a container; test a third-party "
                "hub on the process backend (an agent command works here)"
            )
        self._wall0 = time.time()
        super().__init__(scenario, workdir, seed, target=target)
        self.run_id = new_run_id()
        self.hub_image, self.machine_image = image_tags()
        self.hub = _Node("hub", "hub")
        self.hub_port = 0
        self.hub_events = workdir / "logs" / "hub-events.jsonl"
        self.event_files = EventFiles(self.recorder, self._wall0)
        self.event_files.hub(self.hub_events)
        self.agents: dict[str, _Agent] = {}
        self.tokens: dict[tuple[str, str], str] = {}
        self._seeds = random.Random(seed)
        self._client: docker.DockerClient | None = None
        self._networks: RunNetworks | None = None
        self._http: aiohttp.ClientSession | None = None
        self._deaths_watch: DeathWatch | None = None
        self._tailer: asyncio.Task[None] | None = None
        self._closing = False
        self._held = 0  # see _holding_logs
        self._deaths: list[dict[str, Any]] = []  # Docker `die` events not handled yet
        #: None: not tried yet; False: this kernel has no netem (proxy latency instead).
        self._netem: bool | None = None
        self._schedule = schedule
        self._schedule_report: dict[str, Any] | None = None

    # --- running -------------------------------------------------------------------

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        return event_loop.run(main)

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
        prepare_replay(self._schedule, self.workdir / "logs")
        self._http = aiohttp.ClientSession()
        self._client = await asyncio.to_thread(self._connect_engine)
        self._deaths_watch = DeathWatch(self._client, self.run_id, self._on_death)
        await asyncio.to_thread(self._deaths_watch.start, asyncio.get_running_loop())
        self._networks = await asyncio.to_thread(RunNetworks.create, self._client, self.run_id)
        users = {a.user for a in self.topology.agents.values()}
        users |= {c.user for c in self.topology.clients.values()}
        self._tailer = asyncio.ensure_future(self._tail())
        specs = list(self.topology.agents.values())
        # All of them finish before a failure is raised: teardown must not race
        # a container that is still being created.
        results = await asyncio.gather(
            self._mint_tokens(sorted(users)),
            *(self._prepare(spec) for spec in specs),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result

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
        """The agent's folders, and its link: its namespace, hostname and fault proxy."""
        assert self._networks is not None and self._http is not None
        agent = _Agent(
            spec,
            self._networks.next_agent_address(),
            self.workdir / "logs" / f"agent-{spec.name}.jsonl",
        )
        self.agents[spec.name] = agent
        self.event_files.agent(agent.journal, agent.process, spec.session, spec.machine)
        logs = self.workdir / "logs"
        self.event_files.wire(logs / wire_log_name(spec), f"wire:{spec.name}")
        prepare_root(self.agent_root(spec), spec)
        (self.workdir / "agents" / spec.name).mkdir(parents=True, exist_ok=True)
        if agent.devices:
            folder = self.workdir / "serial" / spec.name
            folder.mkdir(parents=True, exist_ok=True)
            agent.serial_config = folder / "ports.json"
            agent.write_serial_config()
        link = link_container(
            self.machine_image,
            self.run_id,
            spec,
            self._seeds.getrandbits(32),
            self._networks.ctl,
            logs=logs,
            schedule=link_arguments(self._schedule, self.seed, spec.name),
        )
        agent.link = link
        await self._docker(f"starting {spec.name}'s link", link.start)
        await self._docker(f"connecting {spec.name} to the hub's network", self._plug, agent)
        port = await asyncio.to_thread(published_port, link, PROXY_API_PORT)
        agent.api = ProxyApi(self._http, f"http://127.0.0.1:{port}")
        agent.shaper = LinkShaper(
            lambda script: self._exec_root(agent, script), agent.address, self._hub_address
        )
        try:
            await agent.api.wait_ready(READY_TIMEOUT, lambda: agent.link_exit)
        except BackendError as exc:
            raise BackendError(
                f"{spec.name}'s fault proxy: {exc}\n{container_logs(link)}"
            ) from None

    @property
    def _hub_address(self) -> str:
        assert self._networks is not None
        return self._networks.hub_address

    def _plug(self, agent: _Agent) -> None:
        """Put the agent's namespace on the hub's network, always at its own address."""
        assert self._networks is not None and agent.link is not None
        self._client_or_fail().api.connect_container_to_network(
            agent.link.get_container_id(), self._networks.net.name, ipv4_address=agent.address
        )

    def _unplug(self, agent: _Agent) -> None:
        assert self._networks is not None and agent.link is not None
        self._client_or_fail().api.disconnect_container_from_network(
            agent.link.get_container_id(), self._networks.net.name
        )

    async def _replug(self, agent: _Agent, plug: Callable[[_Agent], None], what: str) -> None:
        """(Dis)connect the agent's namespace, then look its API port up again:
        Docker keeps published ports on the gateway network (the control one,
        see network.py), but a port that moved must not lose the link."""
        assert agent.link is not None and agent.api is not None
        await self._docker(f"{what} {agent.name}", plug, agent)
        port = await asyncio.to_thread(published_port, agent.link, PROXY_API_PORT)
        agent.api.base_url = f"http://127.0.0.1:{port}"

    def _client_or_fail(self) -> docker.DockerClient:
        if self._client is None:
            raise BackendError("the docker backend is not set up")
        return self._client

    async def _exec_root(self, agent: _Agent, script: str) -> tuple[int, str]:
        """A shell script as root in the agent's namespace (in its link container)."""
        assert agent.link is not None
        result = await self._docker(
            f"exec in {agent.name}'s namespace",
            agent.link.get_wrapped_container().exec_run,
            ["sh", "-c", script],
            user="0",
        )
        return result.exit_code, result.output.decode("utf-8", "replace")

    @staticmethod
    async def _docker(what: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking Docker call in a thread; its failure is a BackendError saying what."""
        try:
            return await asyncio.to_thread(call, *args, **kwargs)
        except docker.errors.DockerException as exc:
            raise BackendError(f"{what}: {exc}") from exc

    # --- containers ------------------------------------------------------------------

    def _new_container(self, node: str) -> DockerContainer:
        assert self._networks is not None and self._client is not None
        if node == "hub":
            return hub_container(
                self.hub_image,
                self.run_id,
                workdir=self.workdir,
                options=self.topology.hub.options,
                networks=self._networks,
                api_version=self._client.api.api_version,
            )
        agent = self.agents[node]
        assert agent.link is not None
        return agent_container(
            self.machine_image,
            self.run_id,
            agent.spec,
            token=self.tokens[agent.spec.user, "agent"],
            namespace=agent.link.get_container_id(),
            root=self.agent_root(agent.spec),
            state=self.workdir / "agents" / agent.name,
            logs=self.workdir / "logs",
            journal=agent.journal.name,
            target=self.target.agent,
            serial_config=agent.serial_config,
            serial_ports=agent.serial_ports(),
        )

    # --- lifecycle -----------------------------------------------------------------

    def _node(self, node: str) -> _Node:
        return self.hub if node == "hub" else self.agents[node]

    async def start(self, node: str) -> None:
        target = self._node(node)
        if target.state.status in ("running", "paused"):
            raise BackendError(f"{node} is already running")
        if isinstance(target, _Agent) and target.link_exit:
            raise BackendError(f"{node}'s fault proxy is gone: {target.link_exit}")
        at = self.now()  # nothing it logs can come before this
        target.exited.clear()
        if target.container is None:
            target.container = self._new_container(node)
            await self._docker(f"starting {node}", target.container.start)
        else:
            await self._docker(f"starting {node}", target.sdk.start)
        target.state = NodeState("running")
        self._record(target, "started", {"container": target.sdk.short_id}, time=at)
        if node == "hub":
            self.hub_port = await asyncio.to_thread(published_port, target.container, HUB_PORT)
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
                raise BackendError(
                    f"the hub container {why}:\n{container_logs(self.hub.container)}"
                )
            await asyncio.sleep(0.03)

    async def stop(self, node: str) -> None:
        target = self._node(node)
        if target.container is None or target.state.status not in ("running", "paused"):
            return
        if target.state.status == "paused":  # a frozen process cannot handle SIGTERM
            await self._docker(f"waking {node}", target.sdk.unpause)
        await self._docker(f"stopping {node}", target.sdk.stop, timeout=STOP_TIMEOUT)
        await self._wait_exit(target)

    async def kill(self, node: str) -> None:
        target = self._node(node)
        if target.container is None or target.state.status not in ("running", "paused"):
            return
        if target.state.status == "paused":  # Docker refuses to kill a paused container
            await self._docker(f"waking {node}", target.sdk.unpause)
        with contextlib.suppress(docker.errors.APIError):  # it may have exited meanwhile
            await asyncio.to_thread(target.sdk.kill, "SIGKILL")
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
        await self._docker(f"pausing {node}", target.sdk.pause)
        target.state = NodeState("paused")
        self._record(target, "paused", {})  # frozen by now: nothing it logs comes later

    async def resume(self, node: str) -> None:
        target = self._node(node)
        if target.container is None:
            raise BackendError(f"{node} is not running")
        at = self.now()  # it thaws during the call: nothing it logs comes earlier
        if target.state.status == "paused":
            await self._docker(f"resuming {node}", target.sdk.unpause)
            target.state = NodeState("running")
        self._record(target, "resumed", {}, time=at)

    def state(self, node: str) -> NodeState:
        return self._node(node).state

    def _record(
        self, target: _Node, event: str, fields: dict[str, Any], time: float | None = None
    ) -> None:
        if isinstance(target, _Agent):
            self._agent_event(target, event, fields, time)
        else:
            self.recorder.event("hub", event, fields, time=time)

    def _on_death(self, event: dict[str, Any]) -> None:
        """A container of this run died (runs on the loop, from the events thread)."""
        if self._closing:
            return
        self._deaths.append(event)
        if not self._held:
            self._handle_deaths()

    def _handle_deaths(self) -> None:
        while self._deaths:
            self._handle_death(self._deaths.pop(0))

    def _handle_death(self, event: dict[str, Any]) -> None:
        attributes = event.get("Actor", {}).get("Attributes", {})
        role, name = attributes.get(ROLE_LABEL), attributes.get(NODE_LABEL, "")
        code = int(attributes.get("exitCode", -1))
        at = event["timeNano"] / 1e9 - self._wall0 if "timeNano" in event else None
        if role == "link" and name in self.agents:
            self.agents[name].link_exit = f"its container exited with {code}"
            self.recorder.event("docker", "link_exited", {"agent": name, "code": code}, time=at)
            return
        target = self.hub if role == "hub" else self.agents.get(name)
        if target is None or target.state.status not in ("running", "paused"):
            return
        self._ingest()  # its last journal lines come before its exit
        target.state = NodeState("exited", code)
        self._record(target, "exited", {"code": code}, time=at)
        target.exited.set()

    # --- network -------------------------------------------------------------------

    def _agent(self, name: str) -> tuple[_Agent, ProxyApi, LinkShaper]:
        agent = self.agents[name]
        if agent.api is None or agent.shaper is None:
            raise BackendError(f"{name}'s link is not set up")
        return agent, agent.api, agent.shaper

    @contextlib.contextmanager
    def _holding_logs(self) -> Iterator[None]:
        """Ingest what a step makes the parts log only once the step has returned.

        The runner opens the next step's `expect` window (events "since the
        step began") right when this step returns. On the process backend the
        fault proxy runs on the runner's own loop, so what a fault or a
        revocation makes an agent log always lands after that boundary. Here
        the proxy and the agent run alongside, and the tailer could ingest
        their lines while the call is still returning, i.e. before the
        boundary, where the next `expect` would never look. Holding the tailer
        (and the exits Docker reports) during the call keeps the process
        backend's order; the records keep the times the parts gave them.
        """
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    async def partition(self, agent: str, direction: str = "both") -> None:
        target, api, _ = self._agent(agent)
        with self._holding_logs():
            if direction != "both":
                await api.partition(SELECTORS[direction])
            elif not target.disconnected:
                await self._replug(target, self._unplug, "disconnecting")
                target.disconnected = True

    async def heal(self, agent: str | None = None) -> None:
        with self._holding_logs():
            for name in [agent] if agent else list(self.agents):
                target, api, shaper = self._agent(name)
                if target.disconnected:
                    await self._replug(target, self._plug, "reconnecting")
                    target.disconnected = False
                    await shaper.reapply()
                await api.heal()

    async def fault(self, agent: str, kind: str, params: dict[str, Any]) -> None:
        _, api, shaper = self._agent(agent)
        with self._holding_logs():
            params = checked(kind, params)
            ops = plan(kind, params)
            if kind == "loss":
                (op,) = ops
                assert isinstance(op, DropPackets)
                await shaper.loss(op.percent, op.direction)
                return
            if kind == "latency" and self._netem is not False:
                self._netem = await shaper.delay(params)
                via = "netem" if self._netem else "proxy (this kernel has no netem)"
                self.recorder.event(
                    "fault", "fault_via", {"kind": kind, "target": agent, "via": via}
                )
                if self._netem:
                    return
            await apply_plan(api, ops)

    async def clear(self, agent: str | None = None) -> None:
        with self._holding_logs():
            for name in [agent] if agent else list(self.agents):
                _, api, shaper = self._agent(name)
                await api.clear()
                await shaper.clear()

    # --- clients -------------------------------------------------------------------

    async def open_client(self, client: ClientSpec) -> MessageTransport:
        token = self.tokens[client.user, "client"]
        url = f"{self.hub_url}/v1/sessions/{client.session}/client"
        return await connect_websocket(url, {"Authorization": f"Bearer {token}"})

    async def revoke(self, session: str, user: str) -> None:
        with self._holding_logs():
            async with HubAdmin(self.hub_url, self.tokens[user, "client"]) as admin:
                await admin.revoke(session)

    # --- serial ports --------------------------------------------------------------

    def _serial(self, agent: str, port: str) -> _Agent:
        target = self.agents[agent]
        if port not in target.devices:
            raise BackendError(f"{agent} has no serial port {port!r}")
        return target

    def serial_path(self, agent: str, port: str) -> str:
        self._serial(agent, port)
        return f"{SERIAL_FOLDER}/{port}"

    async def unplug(self, agent: str, port: str) -> None:
        await self._plugging(agent, port, plugged=False)

    async def plug(self, agent: str, port: str) -> None:
        await self._plugging(agent, port, plugged=True)

    async def _plugging(self, agent: str, port: str, *, plugged: bool) -> None:
        """In the running agent container (where the port is), and in the config
        its next start reads."""
        target = self._serial(agent, port)
        if target.plugged[port] == plugged:
            state = "plugged in" if plugged else "unplugged"
            raise BackendError(f"{agent}'s {port} is {state} already")
        status = target.state.status
        if status == "paused":
            raise BackendError(
                f"{agent} is paused: its container is frozen, so its {port} cannot be "
                "reached (resume it first)"
            )
        target.plugged[port] = plugged
        target.write_serial_config()
        if status != "running":
            return  # the container's next start sets the port up as the config says
        what = "plug" if plugged else "unplug"
        config = ["--config", SERIAL_CONFIG] if plugged else []
        command = [*SERIAL_COMMAND, what, *config, "--folder", SERIAL_FOLDER, port]
        with self._holding_logs():
            result = await self._docker(
                f"{what}ging {agent}'s {port}",
                target.sdk.exec_run,
                command,
                user=host_user(),
            )
        if result.exit_code != 0:
            output = result.output.decode("utf-8", "replace").strip()
            raise BackendError(f"{what}ging {agent}'s {port}: {output or result.exit_code}")

    # --- teardown ------------------------------------------------------------------

    async def teardown(self) -> None:
        """Remove every container and network of the run; never raises."""
        self._closing = True
        agents = list(self.agents.values())
        await _quietly(*(asyncio.to_thread(remove, a.container) for a in agents))
        if self._schedule is not None:  # SIGTERM: each link's scheduler writes its summary
            await _quietly(*(asyncio.to_thread(_stop_gently, a.link) for a in agents))
        await _quietly(
            *(asyncio.to_thread(remove, a.link) for a in agents),
            asyncio.to_thread(remove, self.hub.container),
        )
        if self._client is not None:
            await _quietly(asyncio.to_thread(sweep, self._client, self.run_id, self._networks))
        if self._deaths_watch is not None:
            self._deaths_watch.close()
        if self._http is not None:
            await _quietly(self._http.close())
        if self._tailer is not None:
            self._tailer.cancel()
            await asyncio.gather(self._tailer, return_exceptions=True)
        self._ingest()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        if self._schedule is not None:
            header = {"schedule": self._schedule.mode, "seed": self.seed, "backend": self.name}
            header["scenario"] = self.scenario.name
            with contextlib.suppress(Exception):
                self._schedule_report = merge_link_logs(
                    self.workdir / "logs", list(self.agents), self._schedule.decisions, header
                )

    def schedule_report(self) -> dict[str, Any] | None:
        """What the links' frame schedulers did (merged at teardown)."""
        return self._schedule_report

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
            if not self._held:
                self._handle_deaths()
                self._ingest()
            await asyncio.sleep(0.05)

    def sync(self) -> None:
        self._ingest()

    def _ingest(self) -> None:
        """Move new lines of the hub's and agents' event files into the history."""
        self.event_files.ingest()


async def _quietly(*awaitables: Any) -> None:
    for result in await asyncio.gather(*awaitables, return_exceptions=True):
        if isinstance(result, BaseException):
            log.debug("teardown: %s", result)
