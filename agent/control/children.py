"""The real launcher: every active session runs in its own agent process.

A child is `python -m tetherbed agent` with the control agent's configuration
(deep-copied by the bindings) plus the session's root and id: a legacy-mode
data agent dialling `/ws/local-executor/{session_id}`. Separate processes
isolate sessions from each other and from the control daemon: a crash, a leak
or a runaway command in one chat cannot touch another's root or the bindings.

The bearer token travels in the TETHERBED_AGENT_TOKEN environment variable,
never in argv (argv is world-readable through /proc and `ps`). Option values
use the `--name=value` form so that no value (a session id starting with "-")
can be mistaken for an option.

Children log to the parent's stderr (their stdout too), or to one file per
session under `log_dir`. A child whose parent dies by SIGKILL keeps running
until its idle stop; an orderly shutdown stops all of them (`stop_all`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from tetherbed.agent.control.launcher import IDLE_EXIT_CODE, ChildSpec, ExitCallback

log = logging.getLogger(__name__)

TOKEN_ENV = "TETHERBED_AGENT_TOKEN"
#: SIGTERM first; SIGKILL if the child has not exited after this long.
STOP_TIMEOUT_SECONDS = 5.0
_PARENT_STDERR = 2  # file descriptor: child stdout joins the parent's stderr


def default_command() -> list[str]:
    """How this interpreter starts the `tetherbed` CLI."""
    return [sys.executable, "-m", "tetherbed"]


def child_argv(spec: ChildSpec, command: Sequence[str]) -> list[str]:
    """The child's command line (without the token)."""
    config = spec.config
    limits = config.local_limits
    argv = [
        *command,
        "agent",
        f"--hub={config.hub_url}",
        f"--session-id={spec.session_id}",
        f"--root={config.root}",
    ]
    if config.enable_shell:
        argv.append("--enable-shell")
    if config.machine_id:
        argv.append(f"--machine-id={config.machine_id}")
    if config.state_dir:
        argv.append(f"--state-dir={config.state_dir}")
    if config.strict_wire:
        argv.append("--strict-wire")
    for port, description in config.serial_ports:
        argv.append(f"--serial-port={port}={description}")
    argv += [
        f"--max-concurrent={limits.max_concurrent}",
        f"--max-file-size={limits.max_file_size_bytes}",
        f"--command-timeout={_number(limits.command_timeout_seconds)}",
        f"--idle-exit={_number(spec.idle_exit_seconds)}",
    ]
    return argv


def child_env(spec: ChildSpec, base: Mapping[str, str]) -> dict[str, str]:
    """The parent's environment with the child's token added."""
    return {**base, TOKEN_ENV: spec.config.token}


class ProcessChild:
    """One child process and the task that notices it exit."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        session_id: str,
        *,
        stop_timeout: float,
        log_file: IO[bytes] | None,
    ) -> None:
        self._process = process
        self._session_id = session_id
        self._stop_timeout = stop_timeout
        self._log_file = log_file
        self._stopping = False
        self.exited = asyncio.Event()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after the stop timeout; the exit code."""
        self._stopping = True
        process = self._process
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(self._stop_timeout):
                    await process.wait()
            except TimeoutError:
                log.warning(
                    "session %s child (pid %d) ignored SIGTERM for %.1f s; killing it",
                    self._session_id,
                    process.pid,
                    self._stop_timeout,
                )
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        await self.exited.wait()
        return process.returncode

    async def watch(self, on_exit: ExitCallback) -> None:
        """Wait for the exit; report it unless we caused it."""
        try:
            code = await self._process.wait()
        finally:
            if self._log_file is not None:
                self._log_file.close()
            self.exited.set()
        if self._stopping:
            log.info("session %s child (pid %d) stopped: %d", self._session_id, self.pid, code)
            return
        if code == IDLE_EXIT_CODE:
            log.info("session %s child (pid %d) stopped after idling", self._session_id, self.pid)
        else:
            log.warning(
                "session %s child (pid %d) exited with %d", self._session_id, self.pid, code
            )
        try:
            on_exit(code)
        except Exception:
            log.exception("exit callback failed for session %s", self._session_id)


class ProcessLauncher:
    """Starts, watches and stops child agent processes."""

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        stop_timeout: float = STOP_TIMEOUT_SECONDS,
    ) -> None:
        self._command = list(command) if command is not None else default_command()
        self._env = env
        self._log_dir = log_dir
        self._stop_timeout = stop_timeout
        self._children: dict[ProcessChild, asyncio.Task[None]] = {}

    @property
    def running(self) -> int:
        return sum(1 for child in self._children if child.returncode is None)

    async def start(self, spec: ChildSpec, on_exit: ExitCallback) -> ProcessChild:
        argv = child_argv(spec, self._command)
        env = child_env(spec, os.environ if self._env is None else self._env)
        log_file = self._open_log(spec.session_id)
        output: IO[bytes] | int = log_file if log_file is not None else _PARENT_STDERR
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=output if log_file is not None else None,
                env=env,
            )
        except BaseException:
            if log_file is not None:
                log_file.close()
            raise
        child = ProcessChild(
            process, spec.session_id, stop_timeout=self._stop_timeout, log_file=log_file
        )
        task = asyncio.ensure_future(child.watch(on_exit))
        self._children[child] = task
        task.add_done_callback(lambda _: self._children.pop(child, None))
        log.info(
            "session %s child started (pid %d, root %s)", spec.session_id, child.pid, spec.root
        )
        return child

    async def stop_all(self) -> None:
        children = list(self._children)
        await asyncio.gather(*(child.stop() for child in children), return_exceptions=True)

    def _open_log(self, session_id: str) -> IO[bytes] | None:
        if self._log_dir is None:
            return None
        self._log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:64]
        digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        path = self._log_dir / f"session-{safe}-{digest}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        return os.fdopen(fd, "ab")


def _number(value: float) -> str:
    """`600`, not `600.0`, for whole numbers."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
