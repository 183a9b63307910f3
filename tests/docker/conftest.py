"""Fixtures for the Docker tests: the registry-free images and a compose stack.

`images` runs compose/build_images.py once per session (a warm tree takes
about a second); `stack` brings compose/docker-compose.yml up under a compose
project name unique to this pytest-xdist worker and process, with the hub on
a free host port, waits until every container is healthy, and always tears it
down with `down -v`. Nothing is skipped: a failed build, or a container that
does not become healthy within HEALTHY_TIMEOUT_S, fails the test with the
build log's tail or the containers' health output and logs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "compose" / "docker-compose.yml"
BUILD_SCRIPT = REPO / "compose" / "build_images.py"
IMAGES_ENV = REPO / "compose" / ".build" / "images.env"

#: The stack's promise: healthy within a minute of `up` (it takes about 7 s).
HEALTHY_TIMEOUT_S = 60.0
#: A cold build (debootstrap, wheels, two images) takes about 3 minutes.
BUILD_TIMEOUT_S = 1500.0
SERVICES = ("hub", "llm", "machine-1", "machine-2")
#: The user the hub's entrypoint mints the agents' token for.
STACK_USER = "tetherbed"
HUB_STATE = "/var/lib/tetherbed/hub"


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _compose_command() -> list[str]:
    """Compose v2 (`docker compose`) if the CLI has it, else v1 (`docker-compose`)."""
    if shutil.which("docker") is None:
        pytest.fail("the docker CLI is not installed")
    v2 = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if v2.returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail("neither `docker compose` nor `docker-compose` is installed")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    """Build (or find) the images; {TETHERBED_*_IMAGE: tag} from images.env."""
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, str(BUILD_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"building the images took over {BUILD_TIMEOUT_S} s: {exc}")
    if result.returncode != 0:
        pytest.fail(
            f"building the images failed (exit {result.returncode}):\n"
            f"{_tail(result.stdout + result.stderr)}"
        )
    print(f"images: {_tail(result.stdout, 1)} (fixture: {time.monotonic() - started:.1f} s)")
    tags = dict(line.split("=", 1) for line in IMAGES_ENV.read_text().splitlines() if "=" in line)
    if not {"TETHERBED_HUB_IMAGE", "TETHERBED_MACHINE_IMAGE"} <= tags.keys():
        pytest.fail(f"{IMAGES_ENV} lacks image tags: {tags}")
    return tags


@dataclass
class Stack:
    """A running compose project."""

    project: str
    port: int
    env: dict[str, str]
    compose: list[str]
    healthy_after: float = 0.0
    client_token: str = ""
    containers: dict[str, str] = field(default_factory=dict)  # service -> container id

    @property
    def hub_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def hub_http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """`docker compose -p PROJECT -f FILE ARGS...`, with output captured."""
        command = [*self.compose, "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        return subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def states(self) -> dict[str, tuple[str, str]]:
        """service -> (container state, health status) for this project's containers."""
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if not ids:
            return {}
        inspected = json.loads(
            subprocess.run(
                ["docker", "inspect", *ids], capture_output=True, text=True, check=True
            ).stdout
        )
        states = {}
        for info in inspected:
            service = info["Config"]["Labels"].get("com.docker.compose.service", "?")
            health = (info["State"].get("Health") or {}).get("Status", "none")
            states[service] = (info["State"]["Status"], health)
            self.containers[service] = info["Id"]
        return states

    def diagnostics(self) -> str:
        """What a person needs to see why the stack is not healthy."""
        parts = []
        for service, container in sorted(self.containers.items()):
            info = subprocess.run(
                ["docker", "inspect", "--format", "{{json .State}}", container],
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            try:
                state = json.loads(info)
            except ValueError:
                parts.append(f"{service}: cannot inspect {container}")
                continue
            health = state.get("Health") or {}
            last = (health.get("Log") or [{}])[-1].get("Output", "").strip()
            parts.append(
                f"{service}: {state['Status']} (exit {state['ExitCode']}), "
                f"health {health.get('Status', 'none')}: {last}"
            )
        logs = self.run("logs", "--no-color", "--tail", "40")
        parts.append(_tail(logs.stdout + logs.stderr, 120))
        return "\n".join(parts)


@pytest.fixture(scope="module")
def stack(images: dict[str, str]) -> Iterator[Stack]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    port = _free_port()
    env = {
        **os.environ,
        **images,
        "TETHERBED_HUB_PORT": str(port),
        "TETHERBED_HUB_BIND": "127.0.0.1",
    }
    stack = Stack(f"tbtest-{worker}-{os.getpid()}", port, env, _compose_command())
    try:
        started = time.monotonic()
        up = stack.run("up", "-d", timeout=HEALTHY_TIMEOUT_S * 2)
        if up.returncode != 0:
            stack.states()
            pytest.fail(
                f"`compose up` failed (exit {up.returncode}):\n{_tail(up.stderr)}\n"
                f"{stack.diagnostics()}"
            )
        deadline = started + HEALTHY_TIMEOUT_S
        while True:
            states = stack.states()
            if len(states) == len(SERVICES) and all(
                health == "healthy" for _, health in states.values()
            ):
                break
            stopped = [s for s, (state, _) in states.items() if state in ("exited", "dead")]
            if stopped or time.monotonic() > deadline:
                why = f"{stopped} stopped" if stopped else f"not healthy in {HEALTHY_TIMEOUT_S} s"
                pytest.fail(f"the stack is not healthy ({why}): {states}\n{stack.diagnostics()}")
            time.sleep(0.25)
        stack.healthy_after = time.monotonic() - started
        print(f"stack {stack.project} healthy {stack.healthy_after:.1f} s after `up`")

        # A client token, minted the way compose/README.md tells people to.
        token = stack.run(
            "exec", "-T", "hub", "tetherbed", "hub", "token", "create",
            "--state", HUB_STATE, "--user", STACK_USER, "--kind", "client",
        )  # fmt: skip
        if token.returncode != 0 or not token.stdout.strip():
            pytest.fail(f"minting a client token failed: {token.stdout}{token.stderr}")
        stack.client_token = token.stdout.strip()
        yield stack
    finally:
        down = stack.run("down", "-v", "--remove-orphans", "--timeout", "10")
        if down.returncode != 0:
            # Never leave containers behind: remove whatever carries our label.
            leftover = stack.states()
            for container in stack.containers.values():
                subprocess.run(["docker", "rm", "-f", "-v", container], check=False)
            pytest.fail(f"`compose down -v` failed: {down.stderr}; removed {leftover}")
