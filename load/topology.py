"""What a load run starts around Locust: the hub, the recorder, real agents, baselines.

Everything comes from the target (simulator/targets/, docs/targets.md): the
hub is Tetherbed's own (started here), a command (started here), or a URL (only
reached); real agents are Tetherbed's agent or the target's agent command.
Where a profile is judged from the recording, load agents reach the hub
through the fault proxy with its wire recorder (`tetherbed proxy --record`).
Every process is started in its own process group and stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tetherbed.launch import ManagedProcess, spawn_tetherbed, start_agent
from tetherbed.load.mix import DATA_FILE
from tetherbed.simulator.targets import HubAccess, Target, TargetError
from tetherbed.simulator.targets.adapters import DEFAULT_CLIENT
from tetherbed.simulator.targets.running import HubRunner

#: The user a run acts as on Tetherbed's own hub.
LOAD_USER = "load"
_PROXY_API = re.compile(r"API listening on http://(\S+)")
_PROXY_LISTEN = re.compile(r"proxy (\S+) listening on (\S+) ->")
_LISTENING = re.compile(r"listening on (ws://\S+)")


class TopologyError(Exception):
    """Something the run needs could not be started or reached."""


@dataclass
class Recorder:
    """The fault proxy in front of the hub, recording what crosses it."""

    process: ManagedProcess
    api: str  # host:port of its Toxiproxy-compatible API
    listen: str  # host:port load agents dial
    records: Path  # its wire records (JSON lines)
    name: str = "agents"

    @property
    def url(self) -> str:
        return f"ws://{self.listen}"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://{self.api}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def partition(self) -> int:
        """Cut every connection (RST) and hold new ones, unanswered, until
        `heal`: a network partition as agents see it. How many were cut."""
        self._call("POST", f"/proxies/{self.name}/partition", {"stream": "both", "mode": "hold"})
        return int(self._call("POST", f"/proxies/{self.name}/connections/reset")["reset"])

    def heal(self) -> None:
        self._call("DELETE", f"/proxies/{self.name}/partition?stream=both")


@dataclass
class Topology:
    folder: Path
    target: Target
    hub: HubRunner | None = None
    user: str = LOAD_USER
    processes: list[ManagedProcess] = field(default_factory=list)
    recorder: Recorder | None = None
    #: More arguments for Tetherbed's own hub (`--hub-arg`).
    hub_args: list[str] = field(default_factory=list)

    # --- the hub ----------------------------------------------------------------------

    def start_hub(self, reference_args: list[str] | None = None) -> HubAccess:
        """Start (or reach) the target's hub; the access its clients use.
        `reference_args` (and the run's `--hub-arg`s) go to Tetherbed's own hub."""
        self.hub = HubRunner(
            self.target.hub,
            self.target.tls,
            self.folder,
            users=[LOAD_USER],
            reference_args=[*(reference_args or []), *self.hub_args],
        )
        try:
            self.hub.prepare()
            self.hub.start()
            tokens = self.hub.tokens()
        except (TargetError, RuntimeError, OSError) as exc:
            raise TopologyError(f"the hub: {exc}") from None
        if not self.target.hub.is_reference:
            users = sorted(tokens.users())
            if LOAD_USER not in users:
                self.user = users[0]
        return self.hub.access()

    @property
    def hub_pid(self) -> int | None:
        """The hub's process, when this run started it."""
        if self.hub is None or self.hub.process is None:
            return None
        return self.hub.process.pid

    @property
    def is_reference_hub(self) -> bool:
        return self.target.hub.is_reference

    def metrics_url(self) -> str | None:
        """Tetherbed's hub serves /metrics; someone else's may not."""
        if self.hub is None or not self.is_reference_hub:
            return None
        return self.hub.access().http_url + "/metrics"

    # --- the recorder -----------------------------------------------------------------

    def start_recorder(self) -> Recorder:
        """The fault proxy between load agents and the hub, with its wire recorder."""
        assert self.hub is not None
        if self.hub.secure:
            raise TopologyError(
                "the load recorder speaks ws:// to the hub; a wss:// hub can be load tested "
                "with `relay`, not yet with the profiles judged from the recording"
            )
        host, port = self.hub.address
        records = self.folder / "wire.jsonl"
        process = spawn_tetherbed(
            "recorder",
            [
                "proxy",
                "--api",
                "127.0.0.1:0",
                "--proxy",
                f"agents=127.0.0.1:0={host}:{port}",
                "--record",
                f"agents=load={records}",
            ],
        )
        self.processes.append(process)
        lines = _read_lines(process, 2, timeout=20)
        api = next((m[1] for line in lines if (m := _PROXY_API.search(line))), None)
        listen = next((m[2] for line in lines if (m := _PROXY_LISTEN.search(line))), None)
        if api is None or listen is None:
            raise TopologyError(f"the recorder did not start:\n{process.log()}")
        self.recorder = Recorder(process, api, listen, records)
        return self.recorder

    # --- real agents ------------------------------------------------------------------

    def prepare_root(self, answer_bytes: int) -> Path:
        """The folder real agents serve, with the file FILE_READ reads."""
        root = self.folder / "root"
        root.mkdir(parents=True, exist_ok=True)
        (root / DATA_FILE).write_text("x" * answer_bytes, encoding="utf-8")
        return root

    def start_real_agents(self, sessions: list[str], hub_url: str, root: Path) -> None:
        """One agent process per session: the target's command, or Tetherbed's agent."""
        assert self.hub is not None
        token = self.hub.tokens().get(self.user, "agent")
        agent = self.target.agent
        for n, session in enumerate(sessions):
            machine = f"real-{n:03d}"
            if agent.is_reference:
                process = start_agent(
                    hub_url,
                    token,
                    root,
                    session,
                    machine_id=machine,
                    enable_shell=True,
                    args=["--max-concurrent", "16"],
                    name=f"agent-{n}",
                )
            else:
                process = self._start_command_agent(
                    n, session=session, machine=machine, hub_url=hub_url, token=token, root=root
                )
            self.processes.append(process)

    def _start_command_agent(
        self, n: int, *, session: str, machine: str, hub_url: str, token: str, root: Path
    ) -> ManagedProcess:
        state = self.folder / "agents" / f"real-{n}"
        state.mkdir(parents=True, exist_ok=True)
        values = {
            "hub_url": hub_url,
            "token": token,
            "session": session,
            "root": str(root),
            "machine": machine,
            "name": f"real-{n}",
            "state": str(state),
            "shell": True,
            "max_concurrent": 16,
        }
        argv = self.target.agent.argv(values)
        log = self.folder / "logs" / f"agent-real-{n}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            try:
                proc = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, **self.target.agent.environment(values)},
                )
            except OSError as exc:
                raise TopologyError(f"cannot start agent {argv[0]}: {exc}") from None
        return ManagedProcess(f"real-{n}", proc)

    # --- clients ----------------------------------------------------------------------

    def client_url(self, access: HubAccess) -> str:
        """Where load clients connect: the hub, when it speaks Tetherbed's client
        API; else the adapter bridge in front of the target's client adapter."""
        if self.target.client_adapter == DEFAULT_CLIENT:
            return access.url
        from tetherbed.load.adapter_bridge import write_access

        path = self.folder / "bridge-access.json"
        write_access(path, access, self.target.tls)
        process = _spawn_module(
            "bridge",
            "tetherbed.load.adapter_bridge",
            "--access",
            str(path),
            "--adapter",
            self.target.client_adapter,
            "--user",
            self.user,
        )
        self.processes.append(process)
        lines = _read_lines(process, 1, timeout=30)
        found = next((m[1] for line in lines if (m := _LISTENING.search(line))), None)
        if found is None:
            raise TopologyError(f"the adapter bridge did not start:\n{process.log()}")
        return found

    # --- baselines --------------------------------------------------------------------

    def start_echo(self) -> str:
        """A raw `websockets` echo server (the generator's ceiling); its ws:// URL."""
        process = _spawn_module("echo", "tetherbed.load.echo_server")
        self.processes.append(process)
        lines = _read_lines(process, 1, timeout=20)
        found = next((m[1] for line in lines if (m := _LISTENING.search(line))), None)
        if found is None:
            raise TopologyError(f"the echo server did not start:\n{process.log()}")
        return found

    # --- the end ----------------------------------------------------------------------

    def close(self) -> None:
        """Agents first (so that they leave cleanly), then the rest, then the hub."""
        for process in sorted(
            self.processes, key=lambda p: not p.name.startswith(("agent", "real"))
        ):
            with contextlib.suppress(Exception):
                process.stop(timeout=5)
        if self.hub is not None and self.hub.process is not None:
            with contextlib.suppress(Exception):
                self.hub.process.stop(timeout=10)

    def restart_hub(self) -> float:
        """Kill the hub (SIGKILL: a crash, no goodbye) and start it again on the
        same port and state; the wall-clock time it was killed."""
        assert self.hub is not None
        process = self.hub.require_control("restart")
        killed = time.time()
        process.signal(signal.SIGKILL)
        process.wait(10)
        try:
            self.hub.start()
        except (TargetError, RuntimeError) as exc:
            raise TopologyError(f"the hub did not come back: {exc}") from None
        return killed


def host_of(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "wss" else 80)


def _spawn_module(name: str, module: str, *args: str) -> ManagedProcess:
    """`python -m MODULE ARGS` in its own process group (stdout read for its address)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=dict(os.environ),
    )
    managed = ManagedProcess(name, proc)

    def pump() -> None:
        for raw in iter(proc.stderr.readline, b""):  # type: ignore[union-attr]
            managed.log_tail.append(raw.decode("utf-8", "replace").rstrip())

    threading.Thread(target=pump, daemon=True, name=f"{name}-stderr").start()
    return managed


def _read_lines(process: ManagedProcess, count: int, *, timeout: float) -> list[str]:
    """The first `count` lines the process prints on stdout (fewer if it dies)."""
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        for raw in iter(process.proc.stdout.readline, b""):  # type: ignore[union-attr]
            lines.append(raw.decode("utf-8", "replace").strip())
            if len(lines) >= count:
                break
        done.set()

    threading.Thread(target=read, daemon=True, name=f"{process.name}-stdout").start()
    done.wait(timeout)
    return list(lines)
