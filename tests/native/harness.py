"""Driving a real `tetherbed native` process: JSON lines on its stdin/stdout, password on fd 3.

The adapter is started through a one-line launcher that moves the credential pipe
to descriptor 3 and then execs the adapter (same PID), so the password really is
on fd 3, as the spec has it, whatever numbers the test process happens to use.
Responses are collected by a reader thread and looked up by id, since they may
arrive out of order. Stopped by PID.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_LAUNCHER = (
    "import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3, inheritable=True); os.close(fd); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


class NativeProcess:
    def __init__(
        self,
        *,
        password: str | None,
        registry: Path,
        args: list[str] | None = None,
        stderr_path: Path,
        close_password: bool = True,
    ) -> None:
        read_fd, write_fd = os.pipe()
        command = [sys.executable, "-m", "tetherbed.agent.native.main", "--stdio"]
        command += ["--password-fd", "3", *(args or [])]
        env = dict(os.environ, TETHERBED_DEVICE_REGISTRY=str(registry))
        self._stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed in stop()
        self.stderr_path = stderr_path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(read_fd), *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            pass_fds=(read_fd,),
            env=env,
        )
        os.close(read_fd)
        self.password_fd: int | None = write_fd
        if password is not None:
            os.write(write_fd, password.encode() + b"\n")
        if close_password:
            os.close(write_fd)
            self.password_fd = None
        self.responses: dict[Any, list[dict[str, Any]]] = {}
        self.lines: list[bytes] = []
        self._cond = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._next_id = 1000

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.endswith(b"\n"):
                break  # the process died mid-line (e.g. ended for a stalled pipe)
            with self._cond:
                self.lines.append(line)
                message = json.loads(line)
                self.responses.setdefault(message.get("id"), []).append(message)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> Any:
        if "id" not in message:
            self._next_id += 1
            message = {"id": self._next_id, **message}
        self.send_raw(json.dumps(message).encode() + b"\n")
        return message["id"]

    def wait(self, request_id: Any, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.responses.get(request_id):
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise TimeoutError(f"no response to {request_id}; stderr: {self.stderr_tail()}")
                self._cond.wait(left)
            return self.responses[request_id].pop(0)

    def call(self, method: str, timeout: float = 15.0, **params: Any) -> dict[str, Any]:
        return self.wait(self.send({"method": method, **params}), timeout)

    def result(self, method: str, **params: Any) -> dict[str, Any]:
        response = self.call(method, **params)
        assert response["ok"], response
        return response["result"]

    def wait_ready(self, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            status = self.result("status")
            if status["state"] == "ready":
                return status
            assert time.monotonic() < deadline, status
            time.sleep(0.05)

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()

    def exit_code(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout)

    def stderr_tail(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.password_fd is not None:
            os.close(self.password_fd)
            self.password_fd = None
        with contextlib.suppress(Exception):
            self.close_stdin()
        self._stderr.close()


class ProbeApp:
    """The desktop core's probe app as a subprocess; stopped by PID."""

    def __init__(self, display: str, events: Path, geometry: str = "800x600+100+100") -> None:
        from tetherbed.simulator.peripherals.probe_app import ProbeEvents

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tetherbed.simulator.peripherals.probe_app",
                "--display",
                display,
                "--events",
                str(events),
                "--geometry",
                geometry,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        self.events = ProbeEvents(events)
        self.ready = self.events.wait_for(lambda e: e["type"] == "ready", timeout=20)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
