"""The loopback listener in-process, with real sockets and synthetic frames (no X)."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tetherbed.agent.native.video import frames as vf
from tetherbed.agent.native.video.listener import CLOSE_POLICY, CLOSE_STALLED, VideoListener
from tetherbed.agent.native.video.viewer import Viewer

ORIGIN = "http://127.0.0.1:5000"


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def listener(clock: Clock) -> Iterator[VideoListener]:
    keyframes: list[float] = []
    active: list[bool] = []
    server = VideoListener(
        nv12=False,
        request_keyframe=lambda: keyframes.append(time.monotonic()),
        set_active=active.append,
        clock=clock,
    )
    server.start()
    server.keyframe_log = keyframes  # type: ignore[attr-defined]
    server.active_log = active  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def new_id() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(24)).decode()


async def ticket_for(listener: VideoListener, clock: Clock) -> str:
    ticket = new_id()
    args = {
        "ticket": ticket,
        "view": new_id(),
        "view_generation": 1,
        "session": new_id(),
        "origin": ORIGIN,
        "apps": None,
    }
    await listener.call(listener.grant, args, clock())
    return ticket


def url(listener: VideoListener) -> str:
    return f"ws://127.0.0.1:{listener.port}/api/video"


async def join(listener: VideoListener, clock: Clock, count: int) -> list[Viewer]:
    """`count` acking viewers, once the listener has admitted them all."""
    before = (await listener.call(listener.status))["viewers"]
    viewers = [
        await Viewer.open(url(listener), await ticket_for(listener, clock), origin=ORIGIN)
        for _ in range(count)
    ]
    while (await listener.call(listener.status))["viewers"] < before + count:
        await asyncio.sleep(0.01)
    return viewers


def push(listener: VideoListener, seq: int, size: int, key: bool) -> None:
    listener.push(vf.h264_frame(1, seq, 0, key, [bytes(size)]))


async def test_stalled_viewer_does_not_slow_fast_viewers(
    listener: VideoListener, clock: Clock
) -> None:
    await listener.call(listener.new_generation, 1)
    fast = [
        await Viewer.open(url(listener), await ticket_for(listener, clock), origin=ORIGIN)
        for _ in range(3)
    ]
    stalled = await Viewer.open(
        url(listener), await ticket_for(listener, clock), origin=ORIGIN, ack=False
    )
    while (await listener.call(listener.status))["viewers"] < 4:
        await asyncio.sleep(0.01)
    assert listener.active_log[-1] is True  # type: ignore[attr-defined]
    requests_before = len(listener.keyframe_log)  # type: ignore[attr-defined]
    total = 120
    for seq in range(1, total + 1):
        key = seq % 30 == 1
        push(listener, seq, 200_000 if key else 60_000, key)
        # Every fast viewer gets every frame although the stalled one stopped at 8.
        got = await asyncio.gather(*(asyncio.wait_for(v.receive(), 5) for v in fast))
        assert {r.message.sequence for r in got} == {seq}
    stats = await listener.call(listener.viewer_stats)
    worst = max(stats, key=lambda s: s["unacked_frames"])
    assert worst["unacked_frames"] <= 8 and worst["unacked_bytes"] <= 1024 * 1024
    assert worst["dropped"] > 0
    # Full, the stalled viewer could not take an IDR: it forced none on the others.
    assert len(listener.keyframe_log) == requests_before  # type: ignore[attr-defined]
    status = await listener.call(listener.status)
    assert status["unacknowledged_bytes"] == worst["unacked_bytes"]
    assert status["dropped"] >= worst["dropped"]
    # The stalled viewer is disconnected once its oldest frame is 10 s old.
    clock.offset += 10.5
    with pytest.raises(ConnectionClosed) as info:
        while True:
            await asyncio.wait_for(stalled.receive(), 5)
    assert info.value.rcvd is not None and info.value.rcvd.code == CLOSE_STALLED
    for viewer in fast:
        await viewer.close()


class RecordingTransport:
    """Wraps a server-side transport: records what is written, passes everything on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.written: list[Any] = []

    def write(self, data: Any) -> None:
        self.written.append(data)
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _record_writes(listener: VideoListener) -> list[RecordingTransport]:
    recorders = []
    for viewer in listener._viewers:
        viewer.ws.transport = RecordingTransport(viewer.ws.transport)
        recorders.append(viewer.ws.transport)
    return recorders


async def test_every_viewer_is_written_the_same_prepared_frame(
    listener: VideoListener, clock: Clock
) -> None:
    """No per-viewer framing or copy: each socket gets the encoder's very `bytes` object."""
    await listener.call(listener.new_generation, 1)
    viewers = await join(listener, clock, 3)
    recorders = await listener.call(_record_writes, listener)
    frames = [vf.h264_frame(1, seq, 0, seq == 1, [bytes(70_000)]) for seq in (1, 2, 3)]
    for frame in frames:
        listener.push(frame)
        got = await asyncio.gather(*(asyncio.wait_for(v.receive(), 5) for v in viewers))
        assert all(bytes(r.message.payload) == bytes(70_000) for r in got)
    for recorder in recorders:
        assert len(recorder.written) == 3
        assert all(w is f.wire for w, f in zip(recorder.written, frames, strict=True))
    for viewer in viewers:
        await viewer.close()


async def test_out_of_order_ack_closes_the_viewer(listener: VideoListener, clock: Clock) -> None:
    await listener.call(listener.new_generation, 1)
    viewer = await Viewer.open(
        url(listener), await ticket_for(listener, clock), origin=ORIGIN, ack=False
    )
    while (await listener.call(listener.status))["viewers"] < 1:
        await asyncio.sleep(0.01)
    push(listener, 1, 100, True)
    push(listener, 2, 100, False)
    await viewer.receive()
    await viewer.receive()
    await viewer.ws.send(json.dumps({"type": "ack", "generation": 1, "sequence": 2}))
    with pytest.raises(ConnectionClosed) as info:
        await asyncio.wait_for(viewer.ws.recv(), 5)
    assert info.value.rcvd is not None and info.value.rcvd.code == CLOSE_POLICY


async def test_big_client_messages_and_commands_are_refused(
    listener: VideoListener, clock: Clock
) -> None:
    await listener.call(listener.new_generation, 1)
    for message in ("x" * 1025, json.dumps({"type": "click", "x": 1})):
        viewer = await Viewer.open(url(listener), await ticket_for(listener, clock), origin=ORIGIN)
        await viewer.ws.send(message)
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(viewer.ws.recv(), 5)
        assert info.value.rcvd is not None and info.value.rcvd.code in (1008, 1009)


async def test_keyframe_requests_reach_the_encoder_rate_limited(
    listener: VideoListener, clock: Clock
) -> None:
    await listener.call(listener.new_generation, 1)
    viewer = await Viewer.open(url(listener), await ticket_for(listener, clock), origin=ORIGIN)
    while (await listener.call(listener.status))["viewers"] < 1:
        await asyncio.sleep(0.01)
    before = len(listener.keyframe_log)  # type: ignore[attr-defined]
    for _ in range(5):
        await viewer.request_keyframe()
    await asyncio.sleep(0.2)
    assert len(listener.keyframe_log) - before == 1  # type: ignore[attr-defined]
    await viewer.close()


async def test_capacity_eight_viewers(listener: VideoListener, clock: Clock) -> None:
    await listener.call(listener.new_generation, 1)
    viewers = [
        await Viewer.open(url(listener), await ticket_for(listener, clock), origin=ORIGIN)
        for _ in range(8)
    ]
    while (await listener.call(listener.status))["viewers"] < 8:
        await asyncio.sleep(0.01)
    ninth = await Viewer.open(url(listener), await ticket_for(listener, clock), origin=ORIGIN)
    with pytest.raises(ConnectionClosed) as info:
        await asyncio.wait_for(ninth.ws.recv(), 5)
    assert info.value.rcvd is not None and info.value.rcvd.code == 1013
    for viewer in viewers:
        await viewer.close()


async def test_ticket_must_come_within_three_seconds(listener: VideoListener, clock: Clock) -> None:
    await ticket_for(listener, clock)
    started = time.monotonic()
    async with connect(url(listener), origin=ORIGIN, proxy=None) as ws:  # type: ignore[arg-type]
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 10)
    assert info.value.rcvd is not None and info.value.rcvd.code == CLOSE_POLICY
    assert 2.5 <= time.monotonic() - started <= 6


async def test_expired_ticket_is_refused(listener: VideoListener, clock: Clock) -> None:
    await listener.call(listener.new_generation, 1)
    ticket = await ticket_for(listener, clock)
    await ticket_for(listener, clock)
    clock.offset += 15.0
    await ticket_for(listener, clock)  # a live grant keeps the Origin pre-check open
    viewer = await Viewer.open(url(listener), ticket, origin=ORIGIN)
    with pytest.raises(ConnectionClosed) as info:
        await asyncio.wait_for(viewer.ws.recv(), 5)
    assert info.value.rcvd is not None and info.value.rcvd.code == CLOSE_POLICY
