"""The stdio driver: stdin lines in, responses out on the preserved descriptor.

Threads do the blocking reads (stdin, the credential descriptor) and writes
(`output.OutputQueue`); everything else runs on the owner loop. The reader hands
each chunk to the loop and waits for it to be dispatched, so a full output queue
stops reading instead of growing memory. EOF, SIGTERM/SIGINT, `exit`, a stalled
output pipe and a closed one all end in the same shutdown: cancel requests,
disconnect (which releases held input), flush what is queued, stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable

from tetherbed.agent.native.adapter import Adapter, Options
from tetherbed.agent.native.desktop_backend import DesktopBackend
from tetherbed.agent.native.dispatch import Dispatcher
from tetherbed.agent.native.framing import Line, LineFramer
from tetherbed.agent.native.output import OutputQueue

log = logging.getLogger(__name__)
MAX_PASSWORD_BYTES = 1024
EXIT_OK = 0
EXIT_OUTPUT_STALLED = 3
FLUSH_SECONDS = 2.0


def read_password(fd: int) -> str | None:
    """Read up to a newline or EOF, then close the descriptor. None when unusable."""
    data = b""
    try:
        while b"\n" not in data and len(data) <= MAX_PASSWORD_BYTES:
            chunk = os.read(fd, 256)
            if not chunk:
                break
            data += chunk
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    line = data.split(b"\n", 1)[0].rstrip(b"\r")
    if not line or len(line) > MAX_PASSWORD_BYTES:
        return None
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _in_thread(fn: Callable[[], object], name: str) -> None:
    threading.Thread(target=fn, name=name, daemon=True).start()


async def serve(
    options: Options,
    *,
    in_fd: int,
    out_fd: int,
    password_fd: int,
    desktop: DesktopBackend | None = None,
) -> int:
    loop = asyncio.get_running_loop()
    password: asyncio.Future[str | None] = loop.create_future()

    def password_thread() -> None:
        value = read_password(password_fd)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve, password, value)

    _in_thread(password_thread, "native-password")

    async def get_password() -> str | None:
        return await asyncio.shield(password)

    stop = asyncio.Event()
    code = EXIT_OK

    def stalled() -> None:
        nonlocal code
        log.error("the output pipe made no progress for 10 s; ending")
        code = EXIT_OUTPUT_STALLED
        stop.set()

    def closed() -> None:
        log.warning("the caller closed stdout; ending as on EOF")
        stop.set()

    def hang() -> None:  # the planted defect blocked_pipe_never_exits
        log.error("DEFECT blocked_pipe_never_exits: the output pipe is stalled; carrying on")

    never_exits = "blocked_pipe_never_exits" in options.defects
    output = OutputQueue(out_fd, on_stall=hang if never_exits else stalled, on_closed=closed)
    adapter = Adapter(options, password=get_password, desktop=desktop)
    dispatcher = Dispatcher(adapter, output.put, defects=options.defects)
    framer = LineFramer()

    async def feed(chunk: bytes | None) -> None:
        events = framer.feed(chunk) if chunk is not None else framer.eof()
        for event in events:
            if isinstance(event, Line):
                await dispatcher.on_line(event.data)
            else:
                await dispatcher.on_oversized()
        if chunk is None:
            stop.set()

    def reader() -> None:
        while True:
            try:
                chunk = os.read(in_fd, 65536)
            except OSError:
                chunk = b""
            try:
                asyncio.run_coroutine_threadsafe(feed(chunk or None), loop).result()
            except (RuntimeError, asyncio.CancelledError, Exception):
                return
            if not chunk:
                return

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    _in_thread(reader, "native-stdin")

    exit_wait = asyncio.create_task(adapter.exit_requested.wait())
    stop_wait = asyncio.create_task(stop.wait())
    await asyncio.wait({exit_wait, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    exit_wait.cancel()
    stop_wait.cancel()
    if adapter.exit_requested.is_set() and code == EXIT_OK:
        # let the `exit` answer (and others already finished) reach the pipe
        for _ in range(50):
            if dispatcher.in_flight == 0 or stop.is_set():
                break
            await asyncio.sleep(0.01)
    await dispatcher.close()
    try:
        await asyncio.wait_for(adapter.shutdown(), 10)
    except Exception:
        log.exception("shutdown did not finish cleanly")
    if code == EXIT_OK and not output.broken:
        await output.flush(FLUSH_SECONDS)
    output.close()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)
    return code


def _resolve(future: asyncio.Future[str | None], value: str | None) -> None:
    if not future.done():
        future.set_result(value)
