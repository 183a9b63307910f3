"""The caller of a native adapter: JSON lines on its stdin and stdout, the password on fd 3.

It plays the trusted parent of `crossdesk-automation/1`: it starts the
adapter's command with the credential pipe on descriptor 3 (a launcher moves it
there and execs the command, whatever number the pipe got here), writes
requests and reads every line the adapter prints, recording both. Responses
are matched by id since they may come out of order. Reading can be paused, to
be the caller that stops reading its pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.simulator.conformance.case import Departure
from tetherbed.simulator.conformance.evidence import Evidence

#: Moves the pipe given as argv[1] to descriptor 3, then runs the adapter's command in
#: the same process (a shell cannot: dash takes only one-digit descriptors).
FD3_LAUNCHER = (
    "import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3, inheritable=True); "
    "fd != 3 and os.close(fd); os.execvp(sys.argv[2], sys.argv[2:])"
)
#: Seconds a request waits for its response unless a case says otherwise.
ANSWER_WAIT = 15.0
#: Largest line the adapter may print (a 4 MiB response, escaped JSON, with room).
LINE_LIMIT = 16 * 1024 * 1024


@dataclass(slots=True)
class Line:
    t: float
    raw: bytes
    message: dict[str, Any] | None

    @property
    def id(self) -> Any:
        return (self.message or {}).get("id", "absent")

    @property
    def ok(self) -> bool | None:
        value = (self.message or {}).get("ok")
        return value if isinstance(value, bool) else None

    @property
    def result(self) -> dict[str, Any]:
        value = (self.message or {}).get("result")
        return value if isinstance(value, dict) else {}

    @property
    def error(self) -> dict[str, Any]:
        value = (self.message or {}).get("error")
        return value if isinstance(value, dict) else {}

    def describe(self) -> str:
        if self.message is None:
            return f"a line that is not a JSON object ({self.raw[:80]!r})"
        if self.ok:
            return f"ok (id {self.id!r})"
        return f"error {self.error.get('code')!r} (id {self.id!r})"


class NativePeer:
    def __init__(
        self,
        evidence: Evidence,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        password: str | None,
        log: Path,
        name: str = "adapter",
    ) -> None:
        self.evidence = evidence
        self.argv = list(argv)
        self.env = env
        self.password = password
        self.log = log
        self.name = name
        self.lines: list[Line] = []
        self.proc: asyncio.subprocess.Process | None = None
        self.eof = False
        self._changed = asyncio.Condition()
        self._reader: asyncio.Task[None] | None = None
        self._ids = iter(range(1, 2**62))
        self._log_file: Any = None
        self._stdout_transport: Any = None
        self.stdout = asyncio.StreamReader()

    async def start(self) -> None:
        read_fd, write_fd = os.pipe()
        out_read, out_write = os.pipe()
        self._log_file = self.log.open("ab")
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", FD3_LAUNCHER, str(read_fd), *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=out_write,
                stderr=self._log_file,
                pass_fds=(read_fd,),
                env={**os.environ, **self.env},
                start_new_session=True,
            )  # fmt: skip
        finally:
            os.close(read_fd)
            os.close(out_write)
        # stdout is read through a pipe transport of our own, so that reading can
        # really stop (a caller that no longer reads: the pipe fills up).
        self.stdout = asyncio.StreamReader(limit=LINE_LIMIT)
        loop = asyncio.get_running_loop()
        self._stdout_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self.stdout),
            os.fdopen(out_read, "rb", buffering=0),
        )
        if self.password is not None:
            os.write(write_fd, self.password.encode() + b"\n")
        os.close(write_fd)
        self.evidence.note(self.name, f"started (pid {self.proc.pid})")
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            try:
                raw = await self.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                self.evidence.note(self.name, "a line over the reader's limit")
                continue
            if not raw:
                break
            try:
                value = json.loads(raw)
            except ValueError:
                value = None
            message = value if isinstance(value, dict) else None
            self.evidence.received(self.name, raw.decode("utf-8", "replace").rstrip("\n"))
            async with self._changed:
                self.lines.append(Line(self.evidence.now(), raw, message))
                self._changed.notify_all()
        self.eof = True
        self.evidence.add(self.name, "event", "close", "stdout ended")
        async with self._changed:
            self._changed.notify_all()

    # --- requests -------------------------------------------------------------------

    def new_id(self) -> int:
        return next(self._ids)

    async def send_raw(self, data: bytes, *, timeout: float = 10.0) -> bool:
        """Write bytes to stdin; False if the adapter no longer reads (or is gone)."""
        assert self.proc is not None and self.proc.stdin is not None
        self.evidence.sent(self.name, data.decode("utf-8", "replace").rstrip("\n"))
        try:
            self.proc.stdin.write(data)
            await asyncio.wait_for(self.proc.stdin.drain(), timeout)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            return False
        return True

    async def send(self, message: dict[str, Any]) -> Any:
        if "id" not in message:
            message = {"id": self.new_id(), **message}
        await self.send_raw(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        return message["id"]

    async def wait_for(
        self, predicate: Callable[[Line], bool], timeout: float, *, after: float = -1.0
    ) -> Line | None:
        deadline = time.monotonic() + timeout
        async with self._changed:
            while True:
                for line in self.lines:
                    if line.t > after and predicate(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    return None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._changed.wait()

    async def response(self, request_id: Any, timeout: float = ANSWER_WAIT) -> Line | None:
        return await self.wait_for(lambda line: line.id == request_id, timeout)

    async def call(self, method: str, *, timeout: float = ANSWER_WAIT, **params: Any) -> Line:
        """Send a request and wait for its response; none is a departure."""
        request_id = await self.send({"method": method, **params})
        answer = await self.response(request_id, timeout)
        if answer is None:
            state = "its stdout ended" if self.eof else f"nothing within {timeout:g} s"
            raise Departure(f"no response to {method} (id {request_id}): {state}")
        return answer

    async def result(self, method: str, **params: Any) -> dict[str, Any]:
        answer = await self.call(method, **params)
        if not answer.ok:
            raise Departure(
                f"{method} failed: {answer.describe()} {answer.error.get('message', '')}"
            )
        return answer.result

    async def pause_reading(self) -> None:
        """Stop reading stdout: the caller that no longer takes the adapter's output."""
        self._stdout_transport.pause_reading()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        self.evidence.note(self.name, "the caller stopped reading stdout")

    async def close_stdin(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.evidence.note(self.name, "stdin closed (EOF)")
        with contextlib.suppress(Exception):
            self.proc.stdin.close()

    async def wait_exit(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None
        self.evidence.add(self.name, "event", "exit", f"exited with {code}")
        return code

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            if await self.wait_exit(5) is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                await self.wait_exit(5)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        if self._stdout_transport is not None:
            self._stdout_transport.close()
        if self._log_file is not None:
            self._log_file.close()
