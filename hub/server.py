"""The hub's aiohttp driver: one application, one port, for agents and clients.

Authentication and the SQLite lookups happen here, before an upgrade is
accepted, so a refused peer never gets to send a payload. Everything after the
upgrade is decided by `HubCore`; this module moves frames and timers. Every
peer has its own outbox and writer task (hub/outbox.py), so a read loop never
waits for anyone but its own peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import struct
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from tetherbed.hub.actions import Actions, Close, Send
from tetherbed.hub.admission import Refusal, admit_agent, admit_client, bearer_token
from tetherbed.hub.config import HubConfig
from tetherbed.hub.core import HubCore
from tetherbed.hub.driver import ActionRunner
from tetherbed.hub.dsh.server import mount_dsh_computers
from tetherbed.hub.links import ClientLink
from tetherbed.hub.metrics import CONTENT_TYPE, LATENCY_BOUNDS, LATENCY_SAMPLE, HubMetrics
from tetherbed.hub.outbox import Outbox, Outboxes
from tetherbed.hub.store import HubStore
from tetherbed.hub.timer_driver import CoreTimer
from tetherbed.runtime.clock import SystemClock
from tetherbed.runtime.event_log import EventLog, EventSink
from tetherbed.wire.codes import CloseCode, ExtensionCode
from tetherbed.wire.limits import FRAME_LIMIT_BYTES

#: aiohttp refuses a message of `max_msg_size` bytes or more, the spec allows
#: one of exactly FRAME_LIMIT_BYTES: one more byte gives the spec's limit.
AIOHTTP_MAX_MSG_SIZE = FRAME_LIMIT_BYTES + 1
#: Frames are written directly while the transport buffers less than this;
#: beyond it they queue and aiohttp's writer waits for the drain (its own limit).
WRITE_BUFFER_HIGH = 64 * 1024
#: A payload this large is written after its header, not copied onto it.
SEPARATE_HEADER_ABOVE = 16 * 1024


_HEADER_16 = struct.Struct("!BBH").pack
_HEADER_64 = struct.Struct("!BBQ").pack


def text_frame_header(length: int) -> bytes:
    """RFC 6455 header of one unmasked, final text frame (server to client)."""
    if length < 126:
        return bytes((0x81, length))
    if length < 65536:
        return _HEADER_16(0x81, 126, length)
    return _HEADER_64(0x81, 127, length)


log = logging.getLogger("tetherbed.hub")


def _bearer(request: web.Request) -> str | None:
    return bearer_token(request.headers.get("Authorization"))


def _refuse(refusal: Refusal) -> web.Response:
    body = {"error": {"code": refusal.code, "message": refusal.message}}
    return web.json_response(body, status=refusal.status)


class HubServer:
    """Owns the core, the store and the aiohttp application."""

    def __init__(
        self, config: HubConfig, store: HubStore, *, observer: EventSink | None = None
    ) -> None:
        self.config = config
        self.store = store
        self.core = HubCore(config, SystemClock())
        for user, session_id, machine_id, grant in store.grants():
            self.core.remember_grant(user, session_id, machine_id, grant)
        self._observer = observer
        self.metrics = HubMetrics(self.core)
        self.runner = ActionRunner(
            self.core, store, self.metrics.journal(observer), on_close=self.metrics.closed
        )
        self.outboxes = Outboxes(
            limit_bytes=config.slow_consumer_bytes,
            stall_seconds=config.slow_consumer_seconds,
            on_slow=self._slow_consumer,
            wait_timer=self.metrics.outbox_wait,
        )
        self.app = web.Application()
        self.app.add_routes(
            [
                web.get("/ws/local-executor", self._agent_control),
                web.get("/ws/local-executor/{session_id}", self._agent_data),
                web.get("/v1/sessions/{session_id}/client", self._client),
                web.get("/v1/machines/{machine_id}/client", self._machine_client),
                web.get("/v1/machines", self._list_machines),
                web.post("/v1/sessions", self._create_session),
                web.get("/v1/sessions", self._list_sessions),
                web.post("/v1/sessions/{session_id}/revoke", self._revoke_session),
                web.get("/healthz", self._healthz),
                web.get("/metrics", self._metrics),
            ]
        )
        self.app.on_shutdown.append(self._on_shutdown)
        self.dsh = mount_dsh_computers(self.app, store, config.dsh)
        self._timer = CoreTimer(self.core, self._apply)
        self._sockets: dict[web.WebSocketResponse, Outbox] = {}
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on `host:port` (0: the OS picks); the address actually bound.

        aiohttp's keep-alive timer also runs from the moment a connection
        opens until its first request is complete, so it is the handshake
        timeout: a half-open upgrade is closed after `handshake_timeout`.
        """
        self._runner = web.AppRunner(
            self.app,
            handle_signals=False,
            access_log=None,
            keepalive_timeout=self.config.handshake_timeout,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise CannotListen(host, port, exc) from exc
        bound = self._runner.addresses[0] if self._runner.addresses else (host, port)
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        """Graceful: agents get 4429 (see `_on_shutdown`), then every socket closes."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- agents ------------------------------------------------------------

    async def _agent_control(self, request: web.Request) -> web.StreamResponse:
        return await self._agent(request, None)

    async def _agent_data(self, request: web.Request) -> web.StreamResponse:
        return await self._agent(request, request.match_info["session_id"])

    async def _agent(self, request: web.Request, session_id: str | None) -> web.StreamResponse:
        user = admit_agent(
            self.store,
            _bearer(request),
            session_id,
            revocation="revocation_unenforced" not in self.config.defects,
        )
        if isinstance(user, Refusal) and "agent_auth_skipped" in self.config.defects:
            user = "anonymous"  # a planted defect: any token, or none, is let in
        if isinstance(user, Refusal):
            return self._refuse(user)
        kind = "agent" if session_id is not None else "agent-control"
        ws, outbox = await self._upgrade(request, "agent")
        link, opened = self.core.agent_opened(outbox, user=user, session_id=session_id)
        self.metrics.opened(kind)
        self._apply(opened)
        self._timer.reschedule()
        try:
            await self._pump_frames(ws, functools.partial(self.core.agent_frame, link), "agent")
        finally:
            self.metrics.ended(kind)
            self._apply(self.core.agent_closed(link, ws.close_code))
            self._forget(ws)
            self._timer.reschedule()
        return ws

    # --- clients -----------------------------------------------------------

    async def _client(self, request: web.Request) -> web.StreamResponse:
        session_id = request.match_info["session_id"]
        user = admit_client(self.store, _bearer(request), session_id)
        if isinstance(user, Refusal):
            return self._refuse(user)
        ws, outbox = await self._upgrade(request, "client")
        client, opened = self.core.client_opened(outbox, user=user, session_id=session_id)
        self._apply(opened)
        return await self._serve_client(ws, client, "client")

    async def _machine_client(self, request: web.Request) -> web.StreamResponse:
        user = admit_client(self.store, _bearer(request))
        if isinstance(user, Refusal):
            return self._refuse(user)
        ws, outbox = await self._upgrade(request, "machine-client")
        machine_id = request.match_info["machine_id"]
        client, opened = self.core.machine_client_opened(outbox, user=user, machine_id=machine_id)
        self._apply(opened)
        return await self._serve_client(ws, client, "machine-client")

    async def _serve_client(
        self, ws: web.WebSocketResponse, client: ClientLink, kind: str
    ) -> web.WebSocketResponse:
        self.metrics.opened(kind)
        try:
            await self._pump_frames(ws, functools.partial(self.core.client_frame, client), "client")
        finally:
            self.metrics.ended(kind)
            self._apply(self.core.client_closed(client))
            self._forget(ws)
        return ws

    async def _pump_frames(
        self, ws: web.WebSocketResponse, handle: Callable[[bytes], Actions], peer: str
    ) -> None:
        """Feed every frame of `ws` (from an `agent` or `client` peer) to the
        core and carry out its answer.

        Nothing here waits for another peer: a Send is an append to that
        peer's outbox. The common case, exactly one Send, is done inline; one
        such frame in LATENCY_SAMPLE that goes straight out is timed for the
        relay-latency histogram (a frame that queues is timed by its outbox).
        """
        timers = self.core.timers
        apply = self._apply
        inline = self.runner.inline
        text, binary = WSMsgType.TEXT, WSMsgType.BINARY
        received = self.metrics.received[peer]
        latency = self.metrics.relay_latency
        buckets, bounds = latency.counts, LATENCY_BOUNDS
        clock = time.perf_counter
        mask = LATENCY_SAMPLE - 1
        async for message in ws:
            kind = message.type
            if kind is not text and kind is not binary:
                continue
            received.frames += 1
            timed = not received.frames & mask
            if timed:
                started = clock()
            actions = handle(message.data)
            if inline:
                await self.runner.apply_inline(actions)
            elif len(actions) == 1 and type(action := actions[0]) is Send:
                if action.peer.put(action.data) and timed:
                    elapsed = clock() - started
                    buckets[bisect_left(bounds, elapsed)] += 1
                    latency.total += elapsed
            elif actions:
                apply(actions)
            if timers.dirty:
                self._timer.reschedule()

    def _apply(self, actions: Actions) -> None:
        self.runner.apply(actions)
        if self.core.timers.dirty:
            self._timer.reschedule()

    def _slow_consumer(self, outbox: Outbox, why: dict[str, Any]) -> None:
        self.metrics.slow_consumer()
        if self._observer is not None:
            self._observer("slow_consumer", peer=outbox.name, **why)
        log.warning("closing slow consumer %s: %s", outbox.name, why)

    # --- plain HTTP --------------------------------------------------------

    def _refuse(self, refusal: Refusal) -> web.Response:
        """An upgrade refused before any WebSocket exists (counted for /metrics)."""
        self.metrics.refused_upgrade(refusal.status, refusal.code)
        return _refuse(refusal)

    def _client_user(self, request: web.Request) -> str | Refusal:
        return admit_client(self.store, _bearer(request))

    async def _create_session(self, request: web.Request) -> web.Response:
        user = self._client_user(request)
        if isinstance(user, Refusal):
            return _refuse(user)
        record = self.store.create_session(user)
        return web.json_response({"session_id": record.session_id}, status=201)

    async def _list_sessions(self, request: web.Request) -> web.Response:
        user = self._client_user(request)
        if isinstance(user, Refusal):
            return _refuse(user)
        sessions = []
        for record in self.store.sessions_of(user):
            live = self.core.session_of(user, record.session_id)
            owner = live.owner if live is not None else None
            sessions.append(
                {
                    "session_id": record.session_id,
                    "created": record.created,
                    "connected": owner is not None,
                    "machine_id": owner.machine_id if owner is not None else None,
                    "allowed_root": owner.allowed_root if owner is not None else None,
                    "revoked": record.revoked,
                }
            )
        return web.json_response({"sessions": sessions})

    async def _list_machines(self, request: web.Request) -> web.Response:
        """The presence registry: this user's machines with a control connection."""
        user = self._client_user(request)
        if isinstance(user, Refusal):
            return _refuse(user)
        machines = []
        for (owner_user, machine_id), target in self.core.machines.items():
            link = target.owner
            if owner_user != user or link is None:
                continue
            machines.append(
                {
                    "machine_id": machine_id,
                    "connection_id": link.connection_id,
                    "connected_for_seconds": round(
                        self.core.clock.monotonic() - link.connected_at, 3
                    ),
                }
            )
        return web.json_response({"machines": machines})

    async def _revoke_session(self, request: web.Request) -> web.Response:
        session_id = request.match_info["session_id"]
        user = admit_client(self.store, _bearer(request), session_id)
        if isinstance(user, Refusal) and user.code != ExtensionCode.SESSION_REVOKED:
            return _refuse(user)
        if isinstance(user, Refusal):  # already revoked: the outcome holds
            return web.json_response({"session_id": session_id, "agent_closed": False})
        self.store.mark_revoked(user, session_id)
        actions = self.core.revoke(user, session_id)
        closed = any(type(a) is Close for a in actions)
        self._apply(actions)
        return web.json_response({"session_id": session_id, "agent_closed": closed})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "agents": len(self.core.agents)})

    async def _metrics(self, request: web.Request) -> web.Response:
        """Prometheus text format (hub/metrics.py); no token needed."""
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    # --- plumbing ----------------------------------------------------------

    async def _upgrade(
        self, request: web.Request, kind: str
    ) -> tuple[web.WebSocketResponse, Outbox]:
        ws = web.WebSocketResponse(
            compress=False,
            max_msg_size=AIOHTTP_MAX_MSG_SIZE,
            autoping=True,
            heartbeat=None,
            decode_text=False,
        )
        await ws.prepare(request)
        transport = request.transport

        # Under backpressure: aiohttp's own writer, which waits for the drain.
        write = functools.partial(ws.send_frame, opcode=WSMsgType.TEXT)

        buffer_size = transport.get_write_buffer_size if transport is not None else None
        is_closing = transport.is_closing if transport is not None else None

        def write_now(data: bytes) -> int:
            """The relay path: straight into the transport while it has room."""
            if (
                buffer_size is None
                or buffer_size() >= WRITE_BUFFER_HIGH
                or ws.closed  # no frame after aiohttp answered a close
                or is_closing()  # type: ignore[misc]
            ):
                return -1
            length = len(data)
            if length < SEPARATE_HEADER_ABOVE:
                transport.write(text_frame_header(length) + data)  # type: ignore[union-attr]
                # A small frame left in the buffer is caught by the queue that
                # forms behind it; only a large one needs watching on its own.
                return 0
            transport.write(text_frame_header(length))  # type: ignore[union-attr]
            transport.write(data)  # no copy of a large payload  # type: ignore[union-attr]
            return buffer_size()

        def buffered() -> int:
            return transport.get_write_buffer_size() if transport is not None else 0

        async def close(code: int, reason: str) -> None:
            await ws.close(code=code, message=reason.encode("utf-8")[:123], drain=False)

        def abort() -> None:
            if transport is not None:
                transport.abort()

        peer = request.remote or "?"
        outbox = self.outboxes.open(
            f"{kind}@{peer}",
            write,
            close,
            abort,
            write_now=write_now,
            buffered=buffered,
            counter=self.metrics.sent["agent" if kind == "agent" else "client"],
        )
        self._sockets[ws] = outbox
        return ws, outbox

    def _forget(self, ws: web.WebSocketResponse) -> None:
        outbox = self._sockets.pop(ws, None)
        if outbox is not None:
            outbox.stop()

    async def _on_shutdown(self, app: web.Application) -> None:
        """SIGTERM: every agent gets 4429, then the process exits."""
        closing = self.core.shutdown()
        agents = [a.peer for a in closing if type(a) is Close]
        self._apply(closing)
        await asyncio.gather(*(o.wait_closed(5) for o in agents if isinstance(o, Outbox)))
        others = [
            self._close(ws, CloseCode.GOING_AWAY, "hub shutting down")
            for ws, outbox in list(self._sockets.items())
            if outbox not in agents
        ]
        await asyncio.gather(*others)
        await self.outboxes.close()
        self._timer.cancel()

    @staticmethod
    async def _close(peer: web.WebSocketResponse, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await peer.close(code=code, message=reason.encode("utf-8")[:123])


class CannotListen(Exception):
    """The hub's address cannot be bound: in use, not an address of this host, ..."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        why = os.strerror(cause.errno).lower() if cause.errno else str(cause)
        super().__init__(f"cannot listen on {host}:{port}: {why}")
        self.cause = cause


async def serve(
    config: HubConfig, store: HubStore, host: str, port: int, *, events: str | None = None
) -> None:
    """Run until SIGTERM/SIGINT; print the bound address once listening."""
    event_log = EventLog(events, time.time) if events else None
    server = HubServer(config, store, observer=event_log)
    bound = await server.start(host, port)
    print(f"tetherbed hub listening on ws://{bound[0]}:{bound[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("shutting down")
    await server.stop()
    if event_log is not None:
        event_log.close()
