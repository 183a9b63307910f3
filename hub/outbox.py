"""Per-peer outbound queues: no peer's slowness ever reaches another's read loop.

Every connection the hub serves gets an `Outbox`: `put` appends a frame and
returns at once; one writer task per outbox drains it into the transport,
waiting on that peer's backpressure alone. The code that reads a frame from
one peer and relays it to another therefore never waits for the other.

A peer that lets its outbox grow past `slow_consumer_bytes`, or accepts no
byte for `slow_consumer_seconds` while frames wait, is a slow consumer: it is
closed with 1008 and a JSON reason (`{"error": "SLOW_CONSUMER", ...}`), its
queue dropped, and the transport aborted if the close cannot get through.
The reader of that connection then sees it end, and the core retries or
fails what it held as for any lost connection.

Transport-agnostic: the aiohttp server and the simulator's hub give it their
own `write`/`close`/`abort`, and optionally `write_now`, a synchronous write
used while nothing waits and the transport has room. The relay path then
costs no task switch at all; under backpressure, frames queue in order and
the writer drains them, waking once per batch.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from tetherbed.wire.codes import CloseCode

Write = Callable[[bytes], Awaitable[None]]
#: Write at once if the transport has room, without waiting: the bytes the
#: transport still buffers afterwards, or -1 when it had no room (nothing written).
WriteNow = Callable[[bytes], int]
#: Bytes written to the transport and not yet taken by the peer.
Buffered = Callable[[], int]
CloseTransport = Callable[[int, str], Awaitable[None]]
Abort = Callable[[], None]
#: How long a slow consumer's close may take before its transport is aborted.
CLOSE_GRACE_SECONDS = 1.0


class WaitTimer(Protocol):
    """Told how long each queued frame waited before it was written (metrics)."""

    def observe(self, seconds: float) -> None: ...


class FrameCounter(Protocol):
    """Counts the frames (and their bytes) handed to one kind of peer (metrics)."""

    frames: int
    bytes: int


class _CloseAfter:
    """A close queued behind the frames before it."""

    __slots__ = ("code", "reason")

    def __init__(self, code: int, reason: str) -> None:
        self.code = code
        self.reason = reason


class Outbox:
    """One peer's frames waiting to be written, and the task that writes them."""

    __slots__ = (
        "_abort",
        "_buffered",
        "_bytes",
        "_close",
        "_closing",
        "_counter",
        "_queue",
        "_queued_at",
        "_registry",
        "_task",
        "_waiter",
        "_write",
        "_write_now",
        "closed",
        "name",
        "seen_buffered",
        "seen_writes",
        "stalled_since",
        "writes",
        "writing",
    )

    def __init__(
        self,
        registry: Outboxes,
        name: str,
        write: Write,
        close: CloseTransport,
        abort: Abort,
        *,
        write_now: WriteNow | None = None,
        buffered: Buffered | None = None,
        counter: FrameCounter | None = None,
    ) -> None:
        self._registry = registry
        self._counter = counter
        self.name = name
        self._write = write
        self._write_now = write_now
        self._buffered = buffered
        self._close = close
        self._abort = abort
        self._queue: collections.deque[bytes | _CloseAfter] = collections.deque()
        #: When each queued frame was put, while the registry times the waits
        #: (made on the first frame that queues: most peers never need one).
        self._queued_at: collections.deque[float] | None = None
        self._bytes = 0
        self._closing = False
        self._waiter: asyncio.Future[None] | None = None
        #: Nothing more is written (closed, slow, or the transport failed).
        self.closed = False
        #: Frames written so far; the stall sweep watches it move.
        self.writes = 0
        self.writing = False
        self.seen_writes = 0
        self.seen_buffered = 0
        self.stalled_since: float | None = None
        self._task = asyncio.ensure_future(self._run())

    def __repr__(self) -> str:
        return f"Outbox({self.name})"

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    @property
    def buffered(self) -> int:
        """Bytes the transport holds for the peer (0 when it cannot tell)."""
        return self._buffered() if self._buffered is not None else 0

    @property
    def busy(self) -> bool:
        """Something waits for the peer to take it."""
        return bool(self._queue) or self.writing or self.buffered > 0

    def put(self, data: bytes) -> bool:
        """Queue one frame (or write it at once when nothing waits and the
        transport has room: no task switch on the relay path); never waits.
        True when it was written at once."""
        if self.closed or self._closing:
            return False
        counter = self._counter
        if counter is not None:
            counter.frames += 1
            counter.bytes += len(data)
        if not self._queue and not self.writing:
            write_now = self._write_now
            if write_now is not None:
                left = write_now(data)
                if left >= 0:
                    self.writes += 1
                    if left:  # the peer has not taken it all yet: watch it
                        self._registry.watch(self)
                    return True
        self._queue.append(data)
        if self._registry.wait_timer is not None:
            if self._queued_at is None:
                self._queued_at = collections.deque()
            self._queued_at.append(time.perf_counter())
        self._bytes += len(data)
        if self._bytes > self._registry.limit_bytes:
            self.slow({"queued_bytes": self._bytes})
            return False
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        return False

    def close_after(self, code: int, reason: str) -> None:
        """Close the connection once the frames queued before are written;
        frames put after it are dropped."""
        if self.closed or self._closing:
            return
        self._closing = True
        self._queue.append(_CloseAfter(code, reason))
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def send_now(self, data: bytes) -> None:
        """Write at once and wait for it: the old, head-of-line-blocking way
        (only for the `head_of_line` defect)."""
        if self.closed:
            return
        with contextlib.suppress(Exception):
            await self._write(data)

    def slow(self, why: dict[str, Any]) -> None:
        """This peer is a slow consumer: drop what waits and close it."""
        if self.closed:
            return
        self.closed = True
        self._queue.clear()
        self._forget_waits()
        self._bytes = 0
        self._task.cancel()
        self._registry.busy.pop(self, None)
        reason = json.dumps({"error": "SLOW_CONSUMER", **why}, separators=(",", ":"))[:123]
        self._registry.on_slow(self, why)
        self._registry.spawn(self._close_slow(reason))

    async def _close_slow(self, reason: str) -> None:
        try:
            async with asyncio.timeout(CLOSE_GRACE_SECONDS):
                await self._close(CloseCode.POLICY_VIOLATION, reason)
        except Exception:
            pass
        finally:
            self._abort()

    async def wait_closed(self, timeout: float) -> None:
        """Until the writer is done (a queued close went out), at most `timeout` s."""
        await asyncio.wait({self._task}, timeout=timeout)

    def stop(self) -> None:
        """The connection ended: the writer has nothing more to do."""
        self.closed = True
        self._queue.clear()
        self._forget_waits()
        self._bytes = 0
        self._registry.busy.pop(self, None)
        if not self._task.done():
            self._task.cancel()

    def _forget_waits(self) -> None:
        if self._queued_at is not None:
            self._queued_at.clear()

    async def _run(self) -> None:
        queue = self._queue
        loop = asyncio.get_running_loop()
        registry = self._registry
        timer = registry.wait_timer
        while True:
            if not queue:
                if not self.buffered:
                    registry.busy.pop(self, None)
                waiter = self._waiter = loop.create_future()
                await waiter
            registry.watch(self)
            self.writing = True
            while queue:
                item = queue.popleft()
                if type(item) is bytes:
                    self._bytes -= len(item)
                    try:
                        await self._write(item)
                    except Exception:
                        self.closed = True
                        self.writing = False
                        return
                    self.writes += 1
                    queued_at = self._queued_at
                    if queued_at and timer is not None:
                        timer.observe(time.perf_counter() - queued_at.popleft())
                else:
                    assert isinstance(item, _CloseAfter)
                    self.closed = True
                    self.writing = False
                    queue.clear()
                    with contextlib.suppress(Exception):
                        await self._close(item.code, item.reason)
                    return
            self.writing = False


class Outboxes:
    """Every outbox of one hub, and the sweep that finds stalled ones."""

    def __init__(
        self,
        *,
        limit_bytes: int,
        stall_seconds: float,
        on_slow: Callable[[Outbox, dict[str, Any]], None] | None = None,
        wait_timer: WaitTimer | None = None,
    ) -> None:
        """`wait_timer`, if given, is told how long each queued frame waited."""
        self.limit_bytes = limit_bytes
        self.wait_timer = wait_timer
        self.stall_seconds = stall_seconds
        self._on_slow = on_slow
        #: Outboxes with frames waiting or a write in progress (a dict: ordered).
        self.busy: dict[Outbox, None] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sweep: asyncio.TimerHandle | None = None

    def open(
        self,
        name: str,
        write: Write,
        close: CloseTransport,
        abort: Abort,
        *,
        write_now: WriteNow | None = None,
        buffered: Buffered | None = None,
        counter: FrameCounter | None = None,
    ) -> Outbox:
        return Outbox(
            self,
            name,
            write,
            close,
            abort,
            write_now=write_now,
            buffered=buffered,
            counter=counter,
        )

    def watch(self, outbox: Outbox) -> None:
        """`outbox` has frames to write: keep an eye on its progress."""
        if outbox not in self.busy:
            outbox.seen_writes = outbox.writes
            outbox.seen_buffered = outbox.buffered
            outbox.stalled_since = None
            self.busy[outbox] = None
        if self._sweep is None:
            self._arm()

    def on_slow(self, outbox: Outbox, why: dict[str, Any]) -> None:
        if self._on_slow is not None:
            self._on_slow(outbox, why)

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweep = loop.call_later(max(self.stall_seconds / 4, 0.05), self._check)

    def _check(self) -> None:
        """Close every outbox whose peer has taken nothing for too long while
        frames wait for it (queued, being written, or in the transport)."""
        now = asyncio.get_running_loop().time()
        for outbox in list(self.busy):
            buffered = outbox.buffered
            if not (outbox._queue or outbox.writing or buffered):
                del self.busy[outbox]  # idle again: nothing to watch
                continue
            progressed = outbox.writes != outbox.seen_writes or buffered < outbox.seen_buffered
            outbox.seen_writes, outbox.seen_buffered = outbox.writes, buffered
            if progressed:
                outbox.stalled_since = None
                continue
            if outbox.stalled_since is None:
                outbox.stalled_since = now
            elif now - outbox.stalled_since >= self.stall_seconds:
                outbox.slow(
                    {
                        "stalled_seconds": round(now - outbox.stalled_since, 1),
                        "queued_bytes": outbox.queued_bytes,
                    }
                )
        self._sweep = None
        if self.busy:
            self._arm()

    async def close(self, timeout: float = 5.0) -> None:
        """Stop the sweep and give pending closes a moment to finish."""
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
