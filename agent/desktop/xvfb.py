"""A private Xvfb display for tests, benches and the simulator.

Xvfb picks a free display number itself (`-displayfd`), which is race-free
when many test workers start displays at once; guessing a number and checking
lock files is not. The server is stopped by its PID, never by name.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from types import TracebackType
from typing import IO

#: Seconds to wait for Xvfb to report its display number and accept a client.
START_TIMEOUT_S = 20.0


class XvfbError(RuntimeError):
    """Xvfb is missing or did not come up."""


class XvfbDisplay:
    """One Xvfb server: `with XvfbDisplay() as xvfb: use(xvfb.name)`.

    `-ac` disables access control so clients need no ~/.Xauthority;
    `-nolisten tcp` keeps the display local; `-noreset` stops the server from
    resetting (and dropping keymap and selection state) whenever its last
    client disconnects, which otherwise races with the next test's connect.
    """

    def __init__(
        self,
        width: int = 1920,
        height: int = 1080,
        depth: int = 24,
        *,
        extra_args: Sequence[str] = (),
        access_control: bool = False,
    ) -> None:
        self.width = width
        self.height = height
        self.depth = depth
        self._extra_args = list(extra_args)
        self._access_control = access_control
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.number: int | None = None

    @property
    def name(self) -> str:
        """The display name, ":N"."""
        if self.number is None:
            raise XvfbError("Xvfb is not running")
        return f":{self.number}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> XvfbDisplay:
        executable = shutil.which("Xvfb")
        if executable is None:
            raise XvfbError(
                "Xvfb is not installed (no `Xvfb` on PATH); install the Debian package "
                "`xvfb` - `make test` does this"
            )
        # Server messages go to a file, not a pipe: a chatty server must never
        # block on a full pipe nobody reads.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives until stop()
        read_fd, write_fd = os.pipe()
        args = [
            executable,
            "-displayfd",
            str(write_fd),
            "-screen",
            "0",
            f"{self.width}x{self.height}x{self.depth}",
            "-nolisten",
            "tcp",
            "-noreset",
            *([] if self._access_control else ["-ac"]),
            *self._extra_args,
        ]
        try:
            self._proc = subprocess.Popen(
                args,
                pass_fds=(write_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._log,
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        try:
            self.number = self._read_number(read_fd)
            self._wait_accepting()
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(read_fd)
        return self

    def _read_number(self, fd: int) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        data = b""
        while not data.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise XvfbError(f"Xvfb did not report a display within {START_TIMEOUT_S} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            chunk = os.read(fd, 64) if ready else b""
            if ready and not chunk:
                raise XvfbError(f"Xvfb exited before reporting a display: {self._stderr()}")
            data += chunk
        return int(data.strip())

    def _wait_accepting(self) -> None:
        """`-displayfd` already means "ready"; one real connect makes sure."""
        path = f"/tmp/.X11-unix/X{self.number}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                try:
                    sock.connect(path)
                    return
                except OSError as exc:
                    if time.monotonic() > deadline or not self.running():
                        raise XvfbError(f"Xvfb {self.name} does not accept: {exc}") from exc
            time.sleep(0.02)

    def _stderr(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-2000:].decode("utf-8", "replace").strip()

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM by PID, then SIGKILL; idempotent."""
        proc, self._proc = self._proc, None
        log, self._log = self._log, None
        if log is not None:
            log.close()
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout)

    def __enter__(self) -> XvfbDisplay:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
