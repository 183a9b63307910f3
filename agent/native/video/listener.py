"""The loopback video listener: ticket-authorized WebSocket viewers on 127.0.0.1.

It runs on its own thread with its own event loop, as the spec says: fan-out to
up to eight viewers then never competes with JSON-lines dispatch for a loop turn,
and the owner loop reaches it only through `call()` (run_coroutine_threadsafe).
The handshake is checked before any upgrade — exact Host, exact path, version 13,
an Origin some live grant names, at most 16 candidates — and answered with an
empty body: this listener serves no HTTP content. Its logs are disabled.

Each viewer has a `ViewerFlow` (admission). An admitted frame is written to the
viewer's transport at once, as the complete WebSocket frame the encoder thread
built (`OutFrame.wire`): every viewer is handed the same `bytes` object, with no
per-viewer framing or copy. No write waits for the socket to drain: what a viewer
can have outstanding is bounded by its flow (8 frames / 1 MiB, one NV12 picture),
so a slow socket only ever holds its own bounded backlog and delays no one else.
Server frames are unmasked and the listener negotiates no extension, so the
prepared frame is exactly what `websockets` would have written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from tetherbed.agent.native.tickets import Grant, TicketBook, TicketRejected
from tetherbed.agent.native.video.flow import FlowViolation, Handoff, OutFrame, Verdict, ViewerFlow
from tetherbed.wire import crossdesk

PATH = crossdesk.VIDEO_PATH
TRANSPORT = crossdesk.VIDEO_TRANSPORT
MAX_CANDIDATES = crossdesk.MAX_CANDIDATES
MAX_VIEWERS = crossdesk.MAX_VIEWERS
MAX_CLIENT_MESSAGE = crossdesk.MAX_CLIENT_MESSAGE_BYTES
TICKET_WAIT_S = crossdesk.FIRST_MESSAGE_SECONDS
# Close codes (1xxx from RFC 6455; 44xx are this listener's own).
CLOSE_POLICY = 1008
CLOSE_TRY_LATER = 1013
CLOSE_GOING_AWAY = 1001
CLOSE_STALLED = 4408
CLOSE_REVOKED = 4410

_silent = logging.getLogger("tetherbed.native.video_listener.silent")
_silent.disabled = True  # "Logs are disabled for this listener"
_silent.propagate = False


@dataclass(eq=False)
class Viewer:
    ws: ServerConnection
    grant: Grant
    flow: ViewerFlow

    def send(self, frame: OutFrame) -> None:
        """Write the shared, prepared WebSocket frame; nothing once the socket is closing."""
        ws = self.ws
        transport = ws.transport
        if ws.protocol.state is State.OPEN and not transport.is_closing():
            transport.write(frame.wire)


class VideoListener:
    def __init__(
        self,
        *,
        nv12: bool,
        request_keyframe: Callable[[], None],
        set_active: Callable[[bool], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nv12 = nv12
        self._request_keyframe = request_keyframe
        self._set_active = set_active
        self._clock = clock
        self.tickets = TicketBook()
        self.generation = 0
        self.port = 0
        self._handoff = Handoff(nv12=nv12)
        self._handoff_lock = threading.Lock()
        self._drain_scheduled = False
        self._viewers: set[Viewer] = set()
        self._candidates = 0
        self._closed_dropped = 0  # congestion skips of viewers that have gone
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Server | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self._thread_main, name="native-video-ws", daemon=True
        )

    # --- lifecycle (owner side) ----------------------------------------------

    def start(self) -> int:
        self._thread.start()
        if not self._ready.wait(10) or not self.port:
            raise RuntimeError("the video listener did not start")
        return self.port

    def _thread_main(self) -> None:
        try:
            import uvloop

            loop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover
            loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            self._ready.set()
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._server = await serve(
            self._handle,
            "127.0.0.1",
            0,
            process_request=self._check_handshake,
            compression=None,
            max_size=MAX_CLIENT_MESSAGE,
            max_queue=4,
            open_timeout=TICKET_WAIT_S,
            close_timeout=1,
            server_header=None,
            logger=_silent,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        watchdog = asyncio.create_task(self._watch_stalls())
        await self._stop.wait()
        watchdog.cancel()
        for viewer in list(self._viewers):
            await self._close(viewer, CLOSE_GOING_AWAY, "shutdown")
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    def call(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> asyncio.Future[Any]:
        """Run `fn(*args)` on the listener loop; awaitable from the owner loop."""
        assert self._loop is not None
        future: concurrent.futures.Future[Any] = asyncio.run_coroutine_threadsafe(
            fn(*args), self._loop
        )
        return asyncio.wrap_future(future)

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    # --- frames from the encoder thread --------------------------------------

    def push(self, frame: OutFrame) -> None:
        """Thread-safe entry of the bounded handoff (60 frames / 8 MiB)."""
        with self._handoff_lock:
            if frame.generation != self.generation:
                return
            self._handoff.push(frame)
            if self._drain_scheduled or self._loop is None:
                return
            self._drain_scheduled = True
        with contextlib.suppress(RuntimeError):  # the loop closed during shutdown
            self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._handoff_lock:
            self._drain_scheduled = False
            frames = self._handoff.pop_all()
        now = self._clock()
        for frame in frames:
            for viewer in list(self._viewers):
                verdict = viewer.flow.offer(frame, now)
                if verdict is Verdict.SEND:
                    viewer.send(frame)
                elif verdict is Verdict.SKIP and viewer.flow.wants_keyframe:
                    self._request_keyframe()

    # --- owner-side operations (run on this loop through `call`) -------------

    async def grant(self, args: dict[str, Any], now: float) -> None:
        replaced = self.tickets.grant(
            ticket=args["ticket"],
            view=args["view"],
            view_generation=args["view_generation"],
            session=args["session"],
            origin=args["origin"],
            apps=args["apps"],
            display_generation=self.generation,
            now=now,
        )
        if replaced:
            latest = self.tickets.view_generation(args["view"])
            for viewer in list(self._viewers):
                if viewer.grant.view == args["view"] and viewer.grant.view_generation < latest:
                    await self._close(viewer, CLOSE_REVOKED, "view replaced")

    async def revoke(self, view: str | None) -> int:
        self.tickets.revoke(view)
        doomed = [v for v in self._viewers if view is None or v.grant.view == view]
        for viewer in doomed:
            await self._close(viewer, CLOSE_REVOKED, "revoked")
        return len(doomed)

    async def new_generation(self, generation: int) -> None:
        """A display change or disconnect: every ticket and socket of the old one goes."""
        with self._handoff_lock:
            self.generation = generation
            self._handoff.clear()
        self.tickets.revoke(None)
        for viewer in list(self._viewers):
            await self._close(viewer, CLOSE_REVOKED, "display generation changed")

    async def status(self) -> dict[str, Any]:
        with self._handoff_lock:
            queued, queued_bytes = self._handoff.queued, self._handoff.queued_bytes
            dropped = self._handoff.dropped
        dropped += self._closed_dropped + sum(v.flow.dropped for v in self._viewers)
        return {
            "transport": TRANSPORT,
            "viewers": len(self._viewers),
            "queued": queued,
            "queued_bytes": queued_bytes,
            "unacknowledged_bytes": sum(v.flow.unacked_bytes for v in self._viewers),
            "dropped": dropped,
        }

    async def viewer_stats(self) -> list[dict[str, int]]:
        return [
            {
                "unacked_frames": v.flow.unacked_frames,
                "unacked_bytes": v.flow.unacked_bytes,
                "dropped": v.flow.dropped,
            }
            for v in self._viewers
        ]

    # --- handshake and sockets -----------------------------------------------

    def _check_handshake(self, connection: ServerConnection, request: Request) -> Response | None:
        headers: Headers = request.headers
        if request.path != PATH:
            return _refuse(connection, HTTPStatus.NOT_FOUND)
        if headers.get("Host") != f"127.0.0.1:{self.port}":
            return _refuse(connection, HTTPStatus.FORBIDDEN)
        if headers.get("Upgrade", "").lower() != "websocket":
            return _refuse(connection, HTTPStatus.UPGRADE_REQUIRED)
        if headers.get("Sec-WebSocket-Version") != "13":
            response = _refuse(connection, HTTPStatus.UPGRADE_REQUIRED)
            response.headers["Sec-WebSocket-Version"] = "13"
            return response
        origins = headers.get_all("Origin")
        origin = origins[0] if len(origins) == 1 else None
        if not self.tickets.origin_allowed(origin, self._clock()):
            return _refuse(connection, HTTPStatus.FORBIDDEN)
        if self._candidates >= MAX_CANDIDATES:
            return _refuse(connection, HTTPStatus.SERVICE_UNAVAILABLE)
        self._candidates += 1
        connection.tetherbed_origin = origin  # type: ignore[attr-defined]
        connection.tetherbed_counted = True  # type: ignore[attr-defined]
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        viewer = None
        try:
            viewer = await self._authorize(ws)
            if viewer is not None:
                await self._serve_viewer(viewer)
        finally:
            if getattr(ws, "tetherbed_counted", False):
                ws.tetherbed_counted = False  # type: ignore[attr-defined]
                self._candidates -= 1
            if viewer is not None:
                self._forget(viewer)

    async def _authorize(self, ws: ServerConnection) -> Viewer | None:
        try:
            first = await asyncio.wait_for(ws.recv(), TICKET_WAIT_S)
        except (TimeoutError, ConnectionClosed):
            await ws.close(CLOSE_POLICY, "ticket expected")
            return None
        ticket = _ticket_of(first)
        if ticket is None:
            await ws.close(CLOSE_POLICY, "ticket expected")
            return None
        if len(self._viewers) >= MAX_VIEWERS:
            await ws.close(CLOSE_TRY_LATER, "too many viewers")
            return None
        try:
            grant = self.tickets.redeem(
                ticket, getattr(ws, "tetherbed_origin", None), self.generation, self._clock()
            )
        except TicketRejected:
            await ws.close(CLOSE_POLICY, "ticket refused")
            return None
        ws.tetherbed_counted = False  # type: ignore[attr-defined]
        self._candidates -= 1
        if ws.protocol.extensions:  # pragma: no cover - `compression=None` negotiates none
            await ws.close(CLOSE_POLICY, "no extension is supported")
            return None
        viewer = Viewer(ws, grant, ViewerFlow(nv12=self.nv12))
        self._viewers.add(viewer)
        self._set_active(True)
        self._request_keyframe()
        return viewer

    async def _serve_viewer(self, viewer: Viewer) -> None:
        ws = viewer.ws
        try:
            async for message in ws:
                if not await self._on_client_message(viewer, message):
                    return
        except ConnectionClosed:
            return

    async def _on_client_message(self, viewer: Viewer, message: str | bytes) -> bool:
        now = self._clock()
        parsed = _control_of(message)
        if parsed is None:
            await self._close(viewer, CLOSE_POLICY, "unexpected message")
            return False
        if parsed[0] == "keyframe":
            if viewer.flow.keyframe_requested(now):
                self._request_keyframe()
            return True
        try:
            pending = viewer.flow.ack(parsed[1], parsed[2], now)
        except FlowViolation:
            await self._close(viewer, CLOSE_POLICY, "ack out of order")
            return False
        if pending is not None:
            viewer.send(pending)
        elif viewer.flow.wants_keyframe:  # room again after skips: recover (paced, 1/s)
            self._request_keyframe()
        return True

    async def _watch_stalls(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            now = self._clock()
            for viewer in list(self._viewers):
                if viewer.flow.stalled(now):
                    await self._close(viewer, CLOSE_STALLED, "acknowledgements stalled")

    async def _close(self, viewer: Viewer, code: int, reason: str) -> None:
        """Stop sending at once; a frame still in the socket buffer is cut off (abort)."""
        self._forget(viewer)
        ws = viewer.ws
        transport = ws.transport
        if transport is not None and transport.get_write_buffer_size() > 0:
            transport.abort()
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(code, reason), 1.5)

    def _forget(self, viewer: Viewer) -> None:
        if viewer not in self._viewers:
            return
        self._viewers.discard(viewer)
        self._closed_dropped += viewer.flow.dropped
        if not self._viewers:
            self._set_active(False)


def _refuse(connection: ServerConnection, status: HTTPStatus) -> Response:
    response = connection.respond(status, "")
    response.headers["Cache-Control"] = "no-store"
    return response


def _ticket_of(message: str | bytes) -> str | None:
    if not isinstance(message, str):
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != {"ticket"}:
        return None
    ticket = value["ticket"]
    return ticket if isinstance(ticket, str) and len(ticket) == 32 else None


def _control_of(message: str | bytes) -> tuple[str, int, int] | None:
    """("ack", generation, sequence) or ("keyframe", 0, 0); None for anything else."""
    if not isinstance(message, str):
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    if value == {"type": "keyframe"}:
        return ("keyframe", 0, 0)
    if set(value) == {"type", "generation", "sequence"} and value["type"] == "ack":
        generation, sequence = value["generation"], value["sequence"]
        if type(generation) is int and type(sequence) is int:
            return ("ack", generation, sequence)
    return None
