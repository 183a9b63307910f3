"""Per-peer outboxes: order, the direct path, backpressure, slow consumers."""

from __future__ import annotations

import asyncio
from typing import Any

from tetherbed.hub.outbox import Outboxes


class FakeTransport:
    """Writes complete only when `gate` is open; `room` decides the direct path."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed: tuple[int, str] | None = None
        self.aborted = False
        self.gate = asyncio.Event()
        self.gate.set()
        self.room = True
        self.backlog = 0

    async def write(self, data: bytes) -> None:
        await self.gate.wait()
        self.written.append(data)

    def write_now(self, data: bytes) -> int:
        if not self.room:
            return -1
        self.written.append(data)
        return self.backlog

    async def close(self, code: int, reason: str) -> None:
        await self.gate.wait()
        self.closed = (code, reason)

    def abort(self) -> None:
        self.aborted = True


def outboxes(**kw: Any) -> tuple[Outboxes, list[dict]]:
    slow: list[dict] = []
    registry = Outboxes(
        limit_bytes=kw.pop("limit_bytes", 1000),
        stall_seconds=kw.pop("stall_seconds", 1.0),
        on_slow=lambda outbox, why: slow.append(why),
    )
    return registry, slow


async def test_frames_keep_their_order_across_the_direct_path_and_the_queue() -> None:
    registry, _ = outboxes()
    t = FakeTransport()
    box = registry.open("p", t.write, t.close, t.abort, write_now=t.write_now)
    box.put(b"1")  # direct
    t.room = False
    box.put(b"2")  # queued
    t.room = True
    box.put(b"3")  # queued behind 2, although there is room again
    await asyncio.sleep(0.01)
    assert t.written == [b"1", b"2", b"3"]


async def test_put_never_waits_for_a_blocked_peer_and_close_follows_the_frames() -> None:
    registry, _ = outboxes()
    t = FakeTransport()
    t.gate.clear()
    box = registry.open("p", t.write, t.close, t.abort)
    for i in range(5):
        box.put(b"x%d" % i)  # returns at once
    box.close_after(4428, "revoked")
    box.put(b"after close")
    assert box.queued_bytes == 10
    t.gate.set()
    await box.wait_closed(1)
    assert t.written == [b"x0", b"x1", b"x2", b"x3", b"x4"]
    assert t.closed == (4428, "revoked")


async def test_too_many_bytes_waiting_makes_a_slow_consumer() -> None:
    registry, slow = outboxes(limit_bytes=100)
    t = FakeTransport()
    t.gate.clear()
    box = registry.open("p", t.write, t.close, t.abort)
    for _ in range(11):
        box.put(b"x" * 10)
    assert slow == [{"queued_bytes": 110}] and box.closed
    await asyncio.sleep(1.2)  # the close cannot get through: the transport is aborted
    assert t.aborted


async def test_no_progress_for_the_stall_time_makes_a_slow_consumer() -> None:
    registry, slow = outboxes(stall_seconds=0.4)
    t = FakeTransport()
    t.gate.clear()
    box = registry.open("p", t.write, t.close, t.abort)
    box.put(b"stuck")
    await asyncio.sleep(0.3)
    assert not slow
    await asyncio.sleep(0.5)
    assert slow and slow[0]["stalled_seconds"] >= 0.4
    assert box.closed


async def test_bytes_left_in_the_transport_are_watched_too() -> None:
    registry, slow = outboxes(stall_seconds=0.4)
    t = FakeTransport()
    t.backlog = 5000  # the transport keeps what the peer does not take
    box = registry.open(
        "p", t.write, t.close, t.abort, write_now=t.write_now, buffered=lambda: t.backlog
    )
    box.put(b"big")
    await asyncio.sleep(0.8)
    assert slow and box.closed


async def test_a_peer_that_keeps_reading_is_never_slow() -> None:
    registry, slow = outboxes(stall_seconds=0.3)
    t = FakeTransport()
    box = registry.open("p", t.write, t.close, t.abort)
    for _ in range(20):
        box.put(b"x")
        await asyncio.sleep(0.05)
    assert not slow and not box.closed
    await registry.close()
