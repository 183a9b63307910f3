"""The containers of a `docker` backend run: what runs in each, and how they go.

Three kinds, all under `tini -g` (PID 1 that forwards signals and reaps), all
running as the host user so that what they write into the run's folders
belongs to whoever runs the scenarios:

- the hub (hub image): `tetherbed hub` on 0.0.0.0:8765 with the run's state
  and logs folders mounted, alias `hub` at a fixed address on the run's
  network, its port published on a random 127.0.0.1 port;
- an agent's *link* (machine image): owns the agent's network namespace and
  hostname (the agent's machine), runs its fault proxy on 127.0.0.1:18765 →
  hub:8765 with the proxy API published on the host, and has NET_ADMIN so
  tc and iptables can shape that namespace;
- the agent (machine image): joins its link's namespace and runs the agent
  and nothing else, so the container's exit code, signals and freezes are
  the agent's own. A supervising script beside a proxy in one container would
  have to forward SIGTERM, keep the proxy alive across it (the agent's close
  frame must get out) and pass the agent's exit code on; here there is
  nothing to get wrong, and the link with its faults outlives the agent's
  restarts, as the process backend's proxies do.

When the agent's machine has virtual serial ports, their socat pairs and
simulated devices start in the agent's container just before the agent (a
pty exists only in its own container's /dev/pts), by a command that then
becomes the agent (`serial_ports boot ... -- AGENT`: same PID, same exit
code). They run in sessions of their own, so signals still reach the agent
alone; they go with the container (a restarted agent gets freshly powered-up
devices, and a paused one's devices sleep with it).

Containers are configured and started with testcontainers' `DockerContainer`;
the Docker SDK does what it has no call for (pause, kill, exec, networks, the
event stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
from docker.types import EndpointConfig
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from tetherbed.simulator.backends.docker.network import RUN_LABEL, RunNetworks
from tetherbed.simulator.backends.process import hub_arguments, serial_ports_value
from tetherbed.simulator.scenario import AgentSpec
from tetherbed.simulator.targets import AgentTarget
from tetherbed.wire.version import CURRENT_TEXT

log = logging.getLogger("tetherbed.simulator.docker")

HUB_PORT = 8765
PROXY_API_PORT = 8474
#: Where an agent's proxy listens inside the agent's namespace.
LINK_PORT = 18765
ROLE_LABEL = "tetherbed.role"
NODE_LABEL = "tetherbed.node"
INIT = ["tini", "-g", "--"]
_IMAGES_ENV = Path(__file__).resolve().parents[2] / "compose" / ".build" / "images.env"
#: An agent container's virtual serial ports (container-local: the ptys behind
#: them exist only in its own /dev/pts), and the ports' config, mounted from the host.
SERIAL_FOLDER = "/tmp/tetherbed-serial"
SERIAL_CONFIG_DIR = "/serial"
SERIAL_CONFIG = f"{SERIAL_CONFIG_DIR}/ports.json"
SERIAL_COMMAND = ["python", "-m", "tetherbed.simulator.peripherals.serial_ports"]


def image_tags() -> tuple[str, str]:
    """(hub image, machine image): the environment (TETHERBED_HUB_IMAGE,
    TETHERBED_MACHINE_IMAGE), else compose/.build/images.env of this checkout
    (what `make images` built last), else `:latest`. Never pulled."""
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


def host_user() -> str:
    return f"{os.getuid()}:{os.getgid()}"


def labels(run: str, role: str, node: str) -> dict[str, str]:
    return {RUN_LABEL: run, ROLE_LABEL: role, NODE_LABEL: node}


def container_name(run: str, role: str, node: str) -> str:
    return f"{run}-{role}-{slug(node)}"


def slug(text: str, limit: int = 40) -> str:
    """Docker names and hostnames allow letters, digits, `.` and `-`."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in ".-") else "-" for c in text)
    return cleaned.strip("-.")[:limit] or "x"


def hub_container(
    image: str,
    run: str,
    *,
    workdir: Path,
    options: dict[str, Any],
    networks: RunNetworks,
    api_version: str,
) -> DockerContainer:
    net = networks.net
    command = [
        *f"tetherbed hub --listen 0.0.0.0:{HUB_PORT} --state /state".split(),
        *["--events", "/logs/hub-events.jsonl"],
        *hub_arguments(options),
    ]
    # testcontainers sets the network's aliases only; this adds the fixed address.
    endpoint = EndpointConfig(api_version, aliases=["hub"], ipv4_address=networks.hub_address)
    container = DockerContainer(
        image,
        command=command,  # type: ignore[arg-type] - docker takes a list
        name=container_name(run, "hub", "hub"),
        volumes=[
            (str(workdir / "hub-state"), "/state", "rw"),
            (str(workdir / "logs"), "/logs", "rw"),
        ],
        network=net,
        hostname="hub",
        entrypoint=INIT,
        user=host_user(),
        networking_config={net.name: endpoint},
        labels=labels(run, "hub", "hub"),
    )
    container.ports[f"{HUB_PORT}/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
    return container


def wire_log_name(spec: AgentSpec) -> str:
    return f"wire-{spec.name}.jsonl"


def link_container(
    image: str,
    run: str,
    spec: AgentSpec,
    seed: int,
    control: Network,
    *,
    logs: Path,
    schedule: list[str] | None = None,
) -> DockerContainer:
    """The agent's namespace and fault proxy, on the control network (the hub's
    network is connected by the backend, at the agent's own address). The proxy
    records the agent's link into `logs` (`wire_log_name`), the wire recorder;
    `schedule` are its frame-scheduling options (scheduling.py)."""
    command = [
        *f"tetherbed proxy --api 0.0.0.0:{PROXY_API_PORT} --seed {seed}".split(),
        *f"--proxy link=127.0.0.1:{LINK_PORT}=hub:{HUB_PORT}".split(),
        *["--record", f"link={spec.name}=/logs/{wire_log_name(spec)}"],
        *(schedule or []),
    ]
    container = DockerContainer(
        image,
        command=command,  # type: ignore[arg-type]
        volumes=[(str(logs), "/logs", "rw")],
        name=container_name(run, "link", spec.name),
        network=control,
        hostname=slug(spec.machine, 63),
        entrypoint=INIT,
        user=host_user(),
        cap_add=["NET_ADMIN"],
        labels=labels(run, "link", spec.name),
    )
    container.ports[f"{PROXY_API_PORT}/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
    return container


def agent_container(
    image: str,
    run: str,
    spec: AgentSpec,
    *,
    token: str,
    namespace: str,
    root: Path,
    state: Path,
    logs: Path,
    journal: str,
    target: AgentTarget,
    serial_config: Path | None = None,
    serial_ports: list[tuple[str, str]] | None = None,
) -> DockerContainer:
    """The agent alone, in the namespace of the container `namespace`: Tetherbed's,
    or `target`'s command (the same placeholders as on the process backend).
    With `serial_config` (the host file `serial_ports boot` reads), its
    machine's virtual serial ports (`serial_ports`: path, description) first."""
    ports = serial_ports or []
    hub_url = f"ws://127.0.0.1:{LINK_PORT}"
    if spec.command:
        target = AgentTarget.from_command(spec.command, f"agents.{spec.name}.command")
    if not target.is_reference:
        values = {
            "hub_url": hub_url,
            "token": token,
            "session": spec.session,
            "root": "/workspace",
            "machine": spec.machine,
            "name": spec.name,
            "state": "/agent-state",
            "shell": spec.shell,
            "max_concurrent": spec.options.get("max_concurrent", 4),
            "protocol_version": spec.options.get("protocol_version", CURRENT_TEXT),
            "serial_ports": serial_ports_value(ports),
        }
        command = target.argv(values)
    else:
        options = spec.options
        command = [
            *f"tetherbed agent --hub {hub_url} --root /workspace".split(),
            *["--session-id", spec.session, "--machine-id", spec.machine],
            *f"--journal /logs/{journal} --state-dir /agent-state".split(),
            *["--max-concurrent", str(options.get("max_concurrent", 4))],
            *["--protocol-version", str(options.get("protocol_version", CURRENT_TEXT))],
        ]
        if spec.shell:
            command.append("--enable-shell")
        for defect in options.get("defects") or ():
            command += ["--defect", defect]
        for path, description in ports:
            command += ["--serial-port", f"{path}={description}"]
    volumes = [
        (str(root), "/workspace", "rw"),
        (str(logs), "/logs", "rw"),
        (str(state), "/agent-state", "rw"),
    ]
    if serial_config is not None:
        volumes.append((str(serial_config.parent), SERIAL_CONFIG_DIR, "ro"))
        boot = ["boot", "--config", SERIAL_CONFIG, "--folder", SERIAL_FOLDER, "--"]
        command = [*SERIAL_COMMAND, *boot, *command]
    return DockerContainer(
        image,
        command=command,  # type: ignore[arg-type]
        name=container_name(run, "agent", spec.name),
        env={"TETHERBED_AGENT_TOKEN": token},  # not on the command line, as ps shows it
        volumes=volumes,
    ).with_kwargs(
        # `network: None` also keeps testcontainers from choosing a network itself.
        network=None,
        network_mode=f"container:{namespace}",
        entrypoint=INIT,
        user=host_user(),
        working_dir="/workspace",
        labels=labels(run, "agent", spec.name),
    )


def published_port(container: DockerContainer, port: int) -> int:
    client = container.get_docker_client()
    return int(client.port(container.get_container_id(), port))


def container_logs(container: DockerContainer) -> str:
    """The tail of a container's output, for an error message."""
    try:
        out, err = container.get_logs()
    except Exception as exc:  # it may be gone, or never started
        return f"(no logs: {exc})"
    lines = (out + err).decode("utf-8", "replace").strip().splitlines()
    return "\n".join(lines[-30:]) or "(no output)"


def remove(container: DockerContainer | None) -> None:
    if container is not None:
        container.stop(force=True, delete_volume=True)


def sweep(client: docker.DockerClient, run: str, networks: RunNetworks | None) -> None:
    """Whatever of this run is still there (a failed start, an untracked container)."""
    selector = {"label": f"{RUN_LABEL}={run}"}
    # Sparse: no inspect per container, so one removed meanwhile is no 404.
    for container in client.containers.list(all=True, filters=selector, sparse=True):
        with contextlib.suppress(Exception):
            container.remove(force=True, v=True)
    if networks is not None:
        networks.remove()
    for network in client.networks.list(filters=selector):
        with contextlib.suppress(Exception):
            network.remove()


class DeathWatch:
    """`die` events of one run's containers, read by one thread, handed to the loop.

    One stream for the whole run reports every exit with its code as it
    happens, without a thread blocked in `wait()` per container.
    """

    def __init__(
        self, client: docker.DockerClient, run: str, on_death: Callable[[dict[str, Any]], None]
    ) -> None:
        self._client = client
        self._run = run
        self._on_death = on_death
        self._stream: Any = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Subscribe (before any container exists, so no exit is missed), then read."""
        self._stream = self._client.events(
            decode=True,
            filters={"type": "container", "event": "die", "label": f"{RUN_LABEL}={self._run}"},
        )
        threading.Thread(
            target=self._pump, args=(loop,), name=f"{self._run}-deaths", daemon=True
        ).start()

    def _pump(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            for event in self._stream:
                loop.call_soon_threadsafe(self._on_death, event)
        except Exception as exc:  # closed by close(), or the loop is gone
            log.debug("docker event stream ended: %s", exc)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stream.close()
