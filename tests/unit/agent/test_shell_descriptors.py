"""Running a command closes each of its pipe descriptors exactly once, and only its own.

On uvloop, `loop.connect_read_pipe` closed each pipe's descriptor twice: libuv
closed it, then the file object it had been given closed the same number again.
The kernel hands out the lowest free number, so a worker thread that opens a
file between the two closes gets exactly that number, and the second close
takes it away: the thread then fails with "Bad file descriptor" (seen under the
symlink race), or uses a number that by then names another file.

The test follows every read end the shell creates: each close, by `os.close` or
by a file object, must find the descriptor still open (else it was already
closed by someone else), and each read end must be closed once. It runs on
uvloop, the loop the agent process uses.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys

import pytest
import uvloop

from tetherbed.agent.config import Limits
from tetherbed.agent.shell import run_command
from tetherbed.runtime.clock import SystemClock
from tetherbed.wire.messages import ExecuteCommand


class Descriptors:
    """Read ends of the pipes the shell makes, and how each was closed."""

    def __init__(self) -> None:
        self.read_ends: set[int] = set()  # open now (a number may come back later)
        self.created = 0
        self.closed = 0
        self.already_closed: list[int] = []

    def closing(self, fd: int) -> None:
        if fd not in self.read_ends:
            return
        try:
            os.fstat(fd)
        except OSError:
            self.already_closed.append(fd)  # closed before its owner closed it
        self.closed += 1
        self.read_ends.discard(fd)


@pytest.fixture
def descriptors(monkeypatch: pytest.MonkeyPatch) -> Descriptors:
    seen = Descriptors()
    real_pipe, real_close, real_fdopen = os.pipe, os.close, os.fdopen

    def pipe() -> tuple[int, int]:
        read_end, write_end = real_pipe()
        seen.read_ends.add(read_end)
        seen.created += 1
        return read_end, write_end

    def close(fd: int) -> None:
        seen.closing(fd)
        real_close(fd)

    class WatchedFile(io.FileIO):
        def close(self) -> None:
            if not self.closed:
                seen.closing(self.fileno())
            super().close()

    def fdopen(fd: int, mode: str = "r", buffering: int = -1, **kw: object) -> object:
        if fd in seen.read_ends and buffering == 0:
            return WatchedFile(fd, mode.replace("b", ""), closefd=True)
        return real_fdopen(fd, mode, buffering, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "pipe", pipe)
    monkeypatch.setattr(os, "close", close)
    monkeypatch.setattr(os, "fdopen", fdopen)
    return seen


def test_each_pipe_descriptor_is_closed_once_under_uvloop(descriptors: Descriptors) -> None:
    async def commands() -> None:
        request = ExecuteCommand(argv=[sys.executable, "-c", "print('x' * 100)"])
        results = await asyncio.gather(
            *(
                run_command(request, cwd="/", limits=Limits(), agent_env={}, clock=SystemClock())
                for _ in range(4)
            )
        )
        assert all(r.stdout == "x" * 100 + "\n" for r in results)

    uvloop.run(commands())
    assert not descriptors.already_closed, (
        f"descriptors {descriptors.already_closed} were closed twice (the second close "
        "could take a descriptor another thread had just opened)"
    )
    assert descriptors.created >= 8  # two per command (Popen makes its own too)
    assert descriptors.closed == descriptors.created, "each read end is closed exactly once"
    assert not descriptors.read_ends, f"never closed: {descriptors.read_ends}"
