"""Starting real `tetherbed hub` / `tetherbed agent` processes on loopback.

Used by the end-to-end tests, the demo, the benchmarks and the simulator's
process backend. Every process is started in its own process group and
stopped by PID (SIGTERM, then SIGKILL), so nothing outlives its owner.
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
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

_LISTENING = re.compile(r"listening on (ws://\S+)")


@dataclass
class ManagedProcess:
    """A child process whose stderr is kept (last lines) for diagnostics."""

    name: str
    proc: subprocess.Popen[bytes]
    log_tail: deque[str] = field(default_factory=lambda: deque(maxlen=200))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signum)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait, then SIGKILL the whole group. Returns the exit code."""
        if self.alive():
            self.signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout)
        return self.proc.returncode

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def log(self) -> str:
        return "\n".join(self.log_tail)


def spawn_tetherbed(
    name: str, args: list[str], env: dict[str, str] | None = None
) -> ManagedProcess:
    """`python -m tetherbed ARGS` in its own process group, stderr kept."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tetherbed", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    managed = ManagedProcess(name, proc)
    threading.Thread(
        target=_pump, args=(proc.stderr, managed.log_tail), daemon=True, name=f"{name}-stderr"
    ).start()
    return managed


def _pump(stream: object, tail: deque[str]) -> None:
    for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
        tail.append(raw.decode("utf-8", "replace").rstrip())


@dataclass
class HubProcess:
    process: ManagedProcess
    url: str
    state_dir: Path

    @property
    def http_url(self) -> str:
        return "http" + self.url.removeprefix("ws")

    def token(self, user: str, kind: str) -> str:
        return create_token(self.state_dir, user, kind)

    def sessions(self, client_token: str) -> list[dict]:
        request = urllib.request.Request(
            f"{self.http_url}/v1/sessions", headers={"Authorization": f"Bearer {client_token}"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return json.load(response)["sessions"]

    def wait_connected(
        self,
        client_token: str,
        session_id: str,
        *,
        machine_id: str | None = None,
        timeout: float = 20.0,
    ) -> None:
        """Block until the session has a connected agent (of `machine_id`, if given)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for session in self.sessions(client_token):
                if (
                    session["session_id"] == session_id
                    and session["connected"]
                    and (machine_id is None or session["machine_id"] == machine_id)
                ):
                    return
            time.sleep(0.05)
        raise TimeoutError(f"no agent connected to session {session_id} within {timeout} s")

    def stop(self) -> int | None:
        return self.process.stop()


def create_token(state_dir: Path, user: str, kind: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tetherbed",
            "hub",
            "token",
            "create",
            "--state",
            str(state_dir),
            "--user",
            user,
            "--kind",
            kind,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def start_hub(
    state_dir: Path,
    *,
    listen: str = "127.0.0.1:0",
    args: list[str] | None = None,
    timeout: float = 20.0,
) -> HubProcess:
    """Start a hub and wait until it listens; the port is chosen by the OS."""
    state_dir.mkdir(parents=True, exist_ok=True)
    process = spawn_tetherbed(
        "hub", ["hub", "--listen", listen, "--state", str(state_dir), *(args or [])]
    )
    url = _read_listening_url(process, timeout)
    return HubProcess(process, url, state_dir)


def _read_listening_url(process: ManagedProcess, timeout: float) -> str:
    found: list[str] = []
    done = threading.Event()

    def read() -> None:
        for raw in iter(process.proc.stdout.readline, b""):  # type: ignore[union-attr]
            match = _LISTENING.search(raw.decode("utf-8", "replace"))
            if match and not found:
                found.append(match[1])
                done.set()
        done.set()

    threading.Thread(target=read, daemon=True, name="hub-stdout").start()
    done.wait(timeout)
    if not found:
        process.stop()
        raise RuntimeError(f"hub did not start:\n{process.log()}")
    return found[0]


def start_agent(
    hub_url: str,
    token: str,
    root: Path,
    session_id: str,
    *,
    machine_id: str = "",
    enable_shell: bool = False,
    args: list[str] | None = None,
    name: str = "agent",
) -> ManagedProcess:
    argv = [
        "agent",
        "--hub",
        hub_url,
        "--token",
        token,
        "--root",
        str(root),
        "--session-id",
        session_id,
    ]
    if machine_id:
        argv += ["--machine-id", machine_id]
    if enable_shell:
        argv.append("--enable-shell")
    return spawn_tetherbed(name, [*argv, *(args or [])])


def start_control_agent(
    hub_url: str,
    token: str,
    browse_roots: list[Path],
    state_dir: Path,
    *,
    machine_id: str = "",
    enable_shell: bool = False,
    args: list[str] | None = None,
    name: str = "control-agent",
) -> ManagedProcess:
    """A control-mode agent: the machine's daemon that starts session children."""
    argv = ["agent", "--hub", hub_url, "--state-dir", str(state_dir)]
    for root in browse_roots:
        argv += ["--browse-root", str(root)]
    if machine_id:
        argv += ["--machine-id", machine_id]
    if enable_shell:
        argv.append("--enable-shell")
    return spawn_tetherbed(name, [*argv, *(args or [])], env={"TETHERBED_AGENT_TOKEN": token})


# === dsh-computers agents (agent/dsh) ===========================================


def dsh_agent_command(home: Path, *args: str) -> list[str]:
    """`python -m tetherbed agent --transport sse --home HOME ARGS`."""
    return [
        sys.executable,
        "-m",
        "tetherbed",
        "agent",
        "--transport",
        "sse",
        "--home",
        str(home),
        *args,
    ]


def enroll_dsh_agent(server: str, key: str, home: Path, *, name: str | None = None) -> str:
    """Run `enroll` (which proves the round trip); its output, or RuntimeError."""
    argv = dsh_agent_command(home, "enroll", "--server", server, "--key", key)
    if name:
        argv += ["--name", name]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"enroll failed ({done.returncode}): {done.stdout}{done.stderr}")
    return done.stdout


def start_dsh_agent(
    home: Path, *, args: list[str] | None = None, name: str = "dsh-agent"
) -> ManagedProcess:
    """`run` for an enrolled home, in its own process group."""
    return spawn_tetherbed(
        name, ["agent", "--transport", "sse", "--home", str(home), "run", *(args or [])]
    )


# === the bed's Ollama-compatible LLM server ========================================


@dataclass
class LlmServerProcess:
    process: ManagedProcess
    #: http://HOST:PORT, what `--ollama-url` takes.
    url: str

    def stop(self) -> int | None:
        return self.process.stop()


def start_llm_server(
    args: list[str] | None = None, *, name: str = "llm-server", timeout: float = 20.0
) -> LlmServerProcess:
    """`tetherbed llm-server --listen 127.0.0.1:0 ARGS`: started, its URL read from
    its first line of output (the port it bound), stopped by PID by the caller."""
    process = spawn_tetherbed(name, ["llm-server", "--listen", "127.0.0.1:0", *(args or [])])
    stdout = process.proc.stdout
    assert stdout is not None
    ready: list[str] = []
    reader = threading.Thread(
        target=lambda: ready.append(stdout.readline().decode("utf-8", "replace")), daemon=True
    )
    reader.start()
    reader.join(timeout)
    line = ready[0].strip() if ready else ""
    marker = "listening on "
    if marker not in line:
        process.stop()
        tail = "\n".join(process.log_tail)
        raise RuntimeError(f"tetherbed llm-server did not start ({line!r}):\n{tail}")
    # Keep reading so that a full pipe never blocks it.
    threading.Thread(target=stdout.read, daemon=True).start()
    return LlmServerProcess(process, line.split(marker, 1)[1])
