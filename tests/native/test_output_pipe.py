"""The adapter process when its caller stops reading stdout, or closes it.

The spec: "The output queue is bounded to 64 messages and 8 MiB; a blocked
output pipe terminates after 10 seconds without progress." Here a real adapter
gets `hello` lines as fast as it takes them while nobody reads its stdout. Its
memory must stay bounded (peak RSS, VmHWM, is printed) and it must exit about
10 s after its output pipe stopped accepting bytes — which the test sees from
outside, as the moment the pipe's fill level stopped rising. With stdout closed
by the caller it must end as on EOF, within a few seconds, whether or not it
has anything to say.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from tests.native.harness import _LAUNCHER

HELLO = b'{"id":%d,"method":"hello","protocol":"crossdesk-automation/1"}\n'
RSS_LIMIT_MIB = 300
EXIT_OUTPUT_STALLED = 3


class Adapter:
    """A `tetherbed native --stdio` process on pipes the test controls."""

    def __init__(self, tmp_path: Path) -> None:
        password_read, password_write = os.pipe()
        os.close(password_write)  # no password: `hello` needs none
        self.stderr_path = tmp_path / "native.stderr"
        command = [sys.executable, "-m", "tetherbed.agent.native.main", "--stdio"]
        with open(self.stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _LAUNCHER, str(password_read), *command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                pass_fds=(password_read,),
                env=dict(os.environ, TETHERBED_DEVICE_REGISTRY=str(tmp_path / "devices.json")),
            )
        os.close(password_read)
        self.peak_rss_kib = 0

    def memory(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) in KiB, (0, 0) once the process is gone."""
        values = {}
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values[key] = int(rest.split()[0])
        self.peak_rss_kib = max(self.peak_rss_kib, values.get("VmHWM", 0))
        return values.get("VmRSS", 0), values.get("VmHWM", 0)

    def flood(self, stop: threading.Event) -> threading.Thread:
        """Write `hello` lines, each with its own id, as fast as the adapter takes them."""

        def write() -> None:
            assert self.proc.stdin is not None
            ids = itertools.count(1)
            with contextlib.suppress(OSError, ValueError):
                while not stop.is_set():
                    chunk = b"".join(HELLO % next(ids) for _ in range(1024))
                    self.proc.stdin.write(chunk)
                    self.proc.stdin.flush()

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-2000:]


def _unread_bytes(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_unread_stdout_bounds_memory_and_ends_ten_seconds_after_progress_stops(
    tmp_path: Path,
) -> None:
    adapter = Adapter(tmp_path)
    stop = threading.Event()
    try:
        assert adapter.proc.stdout is not None
        out_fd = adapter.proc.stdout.fileno()
        adapter.flood(stop)
        level, last_progress = -1, time.monotonic()
        deadline = time.monotonic() + 60
        while adapter.proc.poll() is None and time.monotonic() < deadline:
            rss, _ = adapter.memory()
            assert rss < 2 * RSS_LIMIT_MIB * 1024, f"RSS {rss // 1024} MiB and growing"
            now_level = _unread_bytes(out_fd)
            if now_level != level:
                level, last_progress = now_level, time.monotonic()
            time.sleep(0.05)
        exited = time.monotonic()
        code = adapter.proc.poll()
    finally:
        stop.set()
        adapter.stop()
    peak = adapter.peak_rss_kib / 1024
    silent_for = exited - last_progress
    print(f"\npeak RSS {peak:.0f} MiB; pipe held {level} bytes; exit {silent_for:.1f} s after")
    assert code == EXIT_OUTPUT_STALLED, f"still running after 60 s: {adapter.stderr()}"
    assert peak < RSS_LIMIT_MIB, f"peak RSS {peak:.0f} MiB"
    assert 9 <= silent_for <= 20, f"exited {silent_for:.1f} s after the pipe stopped moving"
    assert "no progress" in adapter.stderr()


def test_closed_stdout_ends_the_adapter_while_it_is_idle(tmp_path: Path) -> None:
    adapter = Adapter(tmp_path)
    try:
        assert adapter.proc.stdout is not None
        time.sleep(1)  # let it start and settle into waiting for input
        adapter.proc.stdout.close()
        closed = time.monotonic()
        code = adapter.proc.wait(30)
        took = time.monotonic() - closed
    finally:
        adapter.stop()
    print(f"\nexit {code} {took:.1f} s after stdout was closed (stdin still open)")
    assert code == 0
    assert took < 5, adapter.stderr()


def test_closed_stdout_ends_the_adapter_while_it_answers(tmp_path: Path) -> None:
    adapter = Adapter(tmp_path)
    stop = threading.Event()
    try:
        assert adapter.proc.stdout is not None
        adapter.proc.stdout.close()
        closed = time.monotonic()
        adapter.flood(stop)
        code = adapter.proc.wait(30)
        took = time.monotonic() - closed
    finally:
        stop.set()
        adapter.stop()
    print(f"\nexit {code} {took:.1f} s after stdout was closed, with requests coming")
    assert code == 0
    assert took < 5, adapter.stderr()
