"""The native adapter the video profile loads: an Xvfb display, moving pictures, the process.

`tetherbed native` speaks JSON lines on stdio (crossdesk-automation/1) and
takes its device password on descriptor 3. This starts it on its own Xvfb
display with moving bars painted on it, connects it to the display in observe
mode with its loopback video listener on, and hands out viewer grants
(`video_open`: a one-time ticket and the listener's URL) to Locust's viewers
over a small HTTP endpoint, since tickets expire and viewers come and go.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import itertools
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tetherbed.agent.desktop.xvfb import XvfbDisplay
from tetherbed.agent.native.devices import register_device
from tetherbed.simulator.peripherals.screen_noise import ScreenNoise

#: The Origin viewers present (the listener checks it against the grant).
ORIGIN = "http://127.0.0.1:4173"
#: Moves the password pipe to descriptor 3 and execs the adapter (same pid).
_LAUNCHER = (
    "import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3, inheritable=True); os.close(fd); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


class AdapterError(Exception):
    """The adapter did not start, or answered a call with an error."""


def _new_id() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(24)).decode()


class NativeAdapter:
    """One adapter process and its JSON-lines conversation."""

    def __init__(self, folder: Path, display: str, registry: Path, args: list[str]) -> None:
        read_fd, write_fd = os.pipe()
        command = [sys.executable, "-m", "tetherbed.agent.native.main", "--stdio"]
        command += ["--password-fd", "3", *args]
        self.stderr_path = folder / "native.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(read_fd), *command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            pass_fds=(read_fd,),
            env={**os.environ, "TETHERBED_DEVICE_REGISTRY": str(registry), "DISPLAY": display},
            start_new_session=True,
        )
        os.close(read_fd)
        self._password_fd = write_fd
        self._answers: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._eof = False
        threading.Thread(target=self._read, daemon=True, name="native-stdout").start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def give_password(self, password: str) -> None:
        os.write(self._password_fd, password.encode() + b"\n")
        os.close(self._password_fd)
        self._password_fd = -1

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._cond:
                if isinstance(message.get("id"), int):
                    self._answers[message["id"]] = message
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def call(self, method: str, timeout: float = 15.0, **params: Any) -> Any:
        """The result of one call; AdapterError for an error answer or none."""
        request_id = next(self._ids)
        line = json.dumps({"id": request_id, "method": method, **params}).encode() + b"\n"
        assert self.proc.stdin is not None
        with self._send_lock:
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise AdapterError(f"the adapter is gone: {exc}") from None
        deadline = time.monotonic() + timeout
        with self._cond:
            while request_id not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise AdapterError(f"no answer to {method}: {self.stderr_tail()}")
                self._cond.wait(left)
            answer = self._answers.pop(request_id)
        if not answer.get("ok"):
            raise AdapterError(f"{method}: {answer.get('error')}")
        return answer.get("result")

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.call("status")["state"] != "ready":
            if time.monotonic() > deadline:
                raise AdapterError("the adapter never became ready")
            time.sleep(0.05)

    def grant(self) -> dict[str, str]:
        """A viewer's ticket and the listener's URL."""
        ticket = _new_id()
        result = self.call(
            "video_open",
            ticket=ticket,
            view=_new_id(),
            view_generation=1,
            session=_new_id(),
            origin=ORIGIN,
            apps=None,
        )
        return {"url": result["url"], "ticket": ticket, "origin": ORIGIN}

    def rss_bytes(self) -> int | None:
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return None

    def stderr_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text(errors="replace")[-2000:]
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self._password_fd >= 0:
            os.close(self._password_fd)
            self._password_fd = -1
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        self._stderr.close()


class GrantServer:
    """`GET /grant` → `{"url", "ticket", "origin"}` from the adapter, for Locust's viewers."""

    def __init__(self, adapter: NativeAdapter) -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/grant":
                    self.send_error(404)
                    return
                try:
                    body = json.dumps(outer.adapter.grant()).encode()
                except AdapterError as exc:
                    self.send_error(503, str(exc)[:200])
                    return
                outer.granted += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.adapter = adapter
        self.granted = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/grant"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def running_adapter(
    folder: Path, width: int, height: int, args: list[str]
) -> Iterator[tuple[NativeAdapter, GrantServer]]:
    """Xvfb with moving bars, the adapter connected to it (observe mode, video on)."""
    registry = folder / "devices.json"
    with XvfbDisplay(width, height, 24) as xvfb, ScreenNoise(xvfb.name, fps=30):
        device_id, password = register_device(registry, xvfb.name)
        adapter = NativeAdapter(folder, xvfb.name, registry, ["--video-ws", *args])
        try:
            adapter.give_password(password)
            adapter.call("connect", device=device_id, mode="observe", display=0)
            adapter.wait_ready()
            grants = GrantServer(adapter)
            try:
                yield adapter, grants
            finally:
                grants.close()
        finally:
            adapter.stop()
