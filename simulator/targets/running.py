"""Running a target's hub: start, stop, kill, freeze, reset, and where to reach it.

One object for the three kinds of hub (`hub.py`): Tetherbed's own, started as
`tetherbed hub`; a command, started in its own process group with its output
in a log file and waited for until it is up; a URL, which is only reached.
Every start of a command hub is preceded by its `reset` command, if any, and
each run has its own `{state}` folder, so cases never share a hub's state.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tetherbed.launch import ManagedProcess, create_token, start_hub
from tetherbed.simulator.targets.errors import TargetError
from tetherbed.simulator.targets.hub import HubAccess, HubTarget, Tokens
from tetherbed.simulator.targets.tls import TlsOptions

#: How often readiness is probed while a started hub comes up.
READY_POLL = 0.05


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HubNotStartable(TargetError):
    """The hub is someone else's running service: it cannot be started or stopped."""


class HubRunner:
    def __init__(
        self,
        hub: HubTarget,
        tls: TlsOptions,
        workdir: Path,
        *,
        users: list[str],
        options: dict[str, Any] | None = None,
        reference_args: list[str] | None = None,
    ) -> None:
        """`options` are the scenario's hub options (a command gets them as JSON in
        `{options}`); `reference_args` are `tetherbed hub` flags for the reference."""
        self.hub = hub
        self.tls = tls
        self.workdir = workdir
        self.state = workdir / "hub-state"
        self.users = sorted(users)
        self.options = dict(options or {})
        self.reference_args = list(reference_args or [])
        self.port = free_port()
        self.process: ManagedProcess | None = None
        self._tokens: Tokens | None = hub.tokens

    # --- where it is ------------------------------------------------------------------

    @property
    def values(self) -> dict[str, object]:
        values = self.hub.values(port=self.port, state=self.state, users=self.users)
        values["options"] = json.dumps(self.options, sort_keys=True)
        return values

    @property
    def url(self) -> str:
        if self.hub.is_reference:
            return f"ws://127.0.0.1:{self.port}"
        return self.hub.resolved_url(self.values)

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        default = 443 if parts.scheme == "wss" else 80
        return parts.hostname or "127.0.0.1", parts.port or default

    @property
    def secure(self) -> bool:
        return self.url.startswith("wss://")

    def ssl_context(self) -> Any:
        return self.tls.client_context() if self.secure else None

    def tokens(self) -> Tokens:
        if self._tokens is None:
            if self.hub.is_reference:
                raise TargetError("the reference hub's tokens are made by prepare()")
            self._tokens = self.hub.load_tokens(self.values)
        return self._tokens

    def access(self) -> HubAccess:
        return HubAccess(self.url, self.tokens(), self.ssl_context())

    # --- lifecycle --------------------------------------------------------------------

    def prepare(self) -> None:
        """Before anything starts: the state folder and, for the reference, tokens."""
        self.state.mkdir(parents=True, exist_ok=True)
        if self.hub.is_reference:
            table = {
                (user, kind): create_token(self.state, user, kind)
                for user in self.users
                for kind in ("agent", "client")
            }
            self._tokens = Tokens(table)

    def add_user(self, user: str) -> None:
        if user in self.users:
            return
        self.users.append(user)
        if self.hub.is_reference and self._tokens is not None:
            table = dict(self._tokens.table)
            for kind in ("agent", "client"):
                table[user, kind] = create_token(self.state, user, kind)
            self._tokens = Tokens(table)

    def start(self) -> ManagedProcess | None:
        """Start the hub and wait until it is up (blocking: run it in a thread).
        A hub at a URL is only checked: it must already be up."""
        if self.hub.is_reference:
            self.process = start_hub(
                self.state, listen=f"127.0.0.1:{self.port}", args=self.reference_args
            ).process
            return self.process
        if self.hub.command is None:
            self._wait_ready(None)
            return None
        values = self.values
        reset = self.hub.reset_argv(values)
        if reset:
            done = subprocess.run(reset, capture_output=True, text=True, check=False, timeout=60)
            if done.returncode != 0:
                raise TargetError(f"hub reset {reset[0]} failed: {done.stderr.strip()[-500:]}")
        log = (self.workdir / "logs").joinpath("hub.log")
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                self.hub.argv(values),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **self.hub.environment(values)},
            )
        self.process = ManagedProcess("hub", proc)
        self._wait_ready(self.process)
        self._tokens = self.hub.tokens or self.hub.load_tokens(values)
        return self.process

    def _wait_ready(self, process: ManagedProcess | None) -> None:
        deadline = time.monotonic() + self.hub.ready_timeout
        while True:
            if process is not None and not process.alive():
                raise TargetError(
                    f"the hub command exited with {process.proc.returncode} before it was up "
                    f"(log: {self.workdir / 'logs' / 'hub.log'})"
                )
            if self._ready():
                return
            if time.monotonic() >= deadline:
                raise TargetError(
                    f"the hub at {self.url} was not up within {self.hub.ready_timeout:g} s"
                )
            time.sleep(READY_POLL)

    def _ready(self) -> bool:
        host, port = self.address
        if self.hub.ready is None:
            with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
                return True
            return False
        scheme = "https" if self.secure else "http"
        request = urllib.request.Request(f"{scheme}://{host}:{port}{self.hub.ready}")
        context = self.ssl_context()
        try:
            with urllib.request.urlopen(request, timeout=1, context=context) as response:
                return 200 <= response.status < 300
        except (OSError, urllib.error.URLError):
            return False

    def require_control(self, action: str) -> ManagedProcess:
        """The hub's process, for a step that acts on it; a URL hub has none."""
        if not self.hub.startable:
            raise HubNotStartable(
                f"cannot {action} the hub at {self.url}: it is a running service, not a "
                "process Tetherbed started (give its `command` to let Tetherbed run it)"
            )
        if self.process is None:
            raise TargetError(f"cannot {action} the hub: it is not running")
        return self.process
