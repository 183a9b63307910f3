"""Live video through the real adapter: a websockets viewer with ticket and acks.

The H.264 stream it receives is written to a file that ffprobe and ffmpeg must
decode without a single error, starting with an IDR that carries SPS and PPS.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.native.harness import NativeProcess
from tetherbed.agent.native.video.frames import CDN1, CDV1, nal_unit_types
from tetherbed.agent.native.video.viewer import Viewer
from tetherbed.simulator.peripherals.screen_noise import ScreenNoise

pytestmark = pytest.mark.xvfb
ORIGIN = "http://127.0.0.1:4173"


def new_id() -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(24)).decode()


def open_video(native: NativeProcess, **overrides: Any) -> tuple[dict[str, Any], str]:
    ticket = new_id()
    params = {
        "ticket": ticket,
        "view": new_id(),
        "view_generation": 1,
        "session": new_id(),
        "origin": ORIGIN,
        "apps": None,
        **overrides,
    }
    return native.result("video_open", **params), params["ticket"]


def test_h264_stream_decodes_cleanly(
    connected: Callable[..., NativeProcess], xvfb: Any, tmp_path: Path
) -> None:
    native = connected("--video-ws")
    grant, ticket = open_video(native)
    assert grant["transport"] == "loopback-websocket/1"
    assert grant["protocol"] == "h264-annexb/1" and grant["expires_in_ms"] == 15000
    assert grant["url"].startswith("ws://127.0.0.1:") and grant["url"].endswith("/api/video")
    assert ticket not in grant["url"]

    async def watch() -> Viewer:
        viewer = await Viewer.open(grant["url"], ticket, origin=ORIGIN)
        for _ in range(45):
            await asyncio.wait_for(viewer.receive(), 10)
        status = native.result("status")["video_output"]
        assert status["viewers"] == 1 and status["transport"] == "loopback-websocket/1"
        await viewer.close()
        return viewer

    with ScreenNoise(xvfb.name):
        viewer = asyncio.run(watch())
    frames = [r.message for r in viewer.frames]
    assert all(f.magic == CDV1 for f in frames)
    first = frames[0]
    assert first.keyframe and first.flags == 1
    types = nal_unit_types(first.payload)
    assert 7 in types and 8 in types and 5 in types, types
    assert types.index(7) < types.index(5) and types.index(8) < types.index(5)
    sequences = [f.sequence for f in frames]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    assert {f.generation for f in frames} == {1}
    for f in frames:
        assert f.keyframe == (5 in nal_unit_types(f.payload))
    stream = tmp_path / "x.h264"
    stream.write_bytes(b"".join(bytes(f.payload) for f in frames))
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=codec_name,width,height,nb_read_frames,r_frame_rate",
         "-of", "json", str(stream)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stderr == ""
    info = json.loads(probe.stdout)["streams"][0]
    # The default tier, as the stream itself says it (SPS timing): 1920 x 1080 at 60 fps.
    assert (info["codec_name"], info["width"], info["height"]) == ("h264", 1920, 1080)
    assert info["r_frame_rate"] == "60/1"
    assert int(info["nb_read_frames"]) == len(frames)
    decode = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(stream), "-f", "null", "-"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert decode.returncode == 0 and decode.stderr == "", decode.stderr


def test_nv12_frames_have_the_exact_size(
    connected: Callable[..., NativeProcess], xvfb: Any
) -> None:
    native = connected("--video-ws", decode_path="minirtc")
    grant, ticket = open_video(native)
    assert grant["protocol"] == "nv12/1"

    async def watch() -> list[Any]:
        viewer = await Viewer.open(grant["url"], ticket, origin=ORIGIN)
        got = [await asyncio.wait_for(viewer.receive(), 10) for _ in range(4)]
        await viewer.close()
        return got

    with ScreenNoise(xvfb.name):
        received = asyncio.run(watch())
    for item in received:
        message = item.message
        assert message.magic == CDN1 and message.flags == 1
        assert (message.width, message.height) == (1920, 1080)
        assert item.size == 32 + message.width * message.height * 3 // 2


def _raw_http(port: int, request: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace")


def test_handshake_checks_host_path_origin_version(connected: Callable[..., NativeProcess]) -> None:
    native = connected("--video-ws")
    grant, ticket = open_video(native)
    port = int(grant["url"].split(":")[2].split("/")[0])

    async def refused(url: str, origin: str | None) -> int:
        with pytest.raises(InvalidStatus) as info:
            await Viewer.open(url, ticket, origin=origin)
        return info.value.response.status_code

    async def checks() -> None:
        assert await refused(f"ws://localhost:{port}/api/video", ORIGIN) == 403  # Host
        assert await refused(f"ws://127.0.0.1:{port}/api/other", ORIGIN) == 404  # path
        assert await refused(f"ws://127.0.0.1:{port}/api/video?t=1", ORIGIN) == 404
        assert await refused(grant["url"], "http://127.0.0.1:9999") == 403  # Origin
        assert await refused(grant["url"], None) == 403

    asyncio.run(checks())
    key = base64.b64encode(b"0123456789abcdef").decode()
    upgrade = (
        f"GET /api/video HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nOrigin: {ORIGIN}\r\n"
    )
    old = _raw_http(port, upgrade + "Sec-WebSocket-Version: 8\r\n\r\n")
    assert old.startswith("HTTP/1.1 426") and "Sec-WebSocket-Version: 13" in old
    plain = _raw_http(port, f"GET /api/video HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
    assert plain.startswith("HTTP/1.1 426") and "Content-Length: 0" in plain
    # After all those refusals the ticket is still good (nothing consumed it).

    async def good() -> None:
        viewer = await Viewer.open(grant["url"], ticket, origin=ORIGIN)
        await asyncio.wait_for(viewer.receive(), 10)
        await viewer.close()

    asyncio.run(good())


def test_tickets_are_one_time_and_bound(connected: Callable[..., NativeProcess]) -> None:
    native = connected("--video-ws")
    grant, ticket = open_video(native, apps="null")
    again = native.call(
        "video_open",
        ticket=ticket,
        view=new_id(),
        view_generation=1,
        session=new_id(),
        origin=ORIGIN,
        apps=None,
    )
    assert again["error"]["code"] == "TICKET_REUSED"
    bad_origin = native.call(
        "video_open",
        ticket=new_id(),
        view=new_id(),
        view_generation=1,
        session=new_id(),
        origin="http://localhost:4173",
        apps=None,
    )
    assert bad_origin["error"]["code"] == "INVALID_ARGUMENT"

    async def use_twice() -> None:
        first = await Viewer.open(grant["url"], ticket, origin="null")  # the apps origin
        await asyncio.wait_for(first.receive(), 10)
        second = await Viewer.open(grant["url"], ticket, origin=ORIGIN)
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(second.receive(), 10)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1008
        await first.close()

    # The Origin pre-check needs a live grant naming the origin; keep one alive.
    open_video(native)
    asyncio.run(use_twice())

    async def no_ticket() -> None:
        viewer = await Viewer.open(grant["url"], new_id(), origin=ORIGIN)
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(viewer.receive(), 10)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1008

    asyncio.run(no_ticket())


def test_revoke_and_display_change_close_viewers(connected: Callable[..., NativeProcess]) -> None:
    native = connected("--video-ws")
    view = new_id()
    grant, ticket = open_video(native, view=view)
    grant2, ticket2 = open_video(native)

    async def run() -> None:
        viewer = await Viewer.open(grant["url"], ticket, origin=ORIGIN)
        other = await Viewer.open(grant2["url"], ticket2, origin=ORIGIN)
        await asyncio.wait_for(viewer.receive(), 10)
        await asyncio.wait_for(other.receive(), 10)
        revoked = await asyncio.to_thread(native.result, "video_revoke", view=view)
        assert revoked["sockets_closed"] == 1
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(viewer.receive(), 10)
        await asyncio.to_thread(native.result, "display", index=0)
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(other.receive(), 10)

    asyncio.run(run())
    assert native.result("status")["video_output"]["viewers"] == 0


def test_video_needs_the_flag(connected: Callable[..., NativeProcess]) -> None:
    native = connected()
    response = native.call(
        "video_open",
        ticket=new_id(),
        view=new_id(),
        view_generation=1,
        session=new_id(),
        origin=ORIGIN,
    )
    assert response["error"]["code"] == "VIDEO_DISABLED"
