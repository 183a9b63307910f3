"""The hub's aiohttp driver: one application, one port, for agents and clients.

Authentication and the SQLite lookups happen here, before an upgrade is
accepted, so a refused peer never gets to send a payload. Everything after the
upgrade is decided by `HubCore`; this module moves frames and timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import Any

from aiohttp import WSMsgType, web

from tetherbed.hub.actions import Close, HubAction, Send
from tetherbed.hub.admission import Refusal, admit_agent, admit_client, bearer_token
from tetherbed.hub.config import HubConfig
from tetherbed.hub.core import HubCore
from tetherbed.hub.dsh.server import mount_dsh_computers
from tetherbed.hub.links import ClientLink
from tetherbed.hub.store import HubStore
from tetherbed.hub.timer_driver import CoreTimer
from tetherbed.runtime.clock import SystemClock
from tetherbed.runtime.event_log import EventLog, EventSink
from tetherbed.wire.codes import CloseCode
from tetherbed.wire.limits import FRAME_LIMIT_BYTES

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
        self.core = HubCore(
            config,
            SystemClock(),
            observer=observer,
            authority=lambda user, session_id: store.claim_session(session_id, user),
            on_grant=store.save_grant,
        )
        for user, session_id, machine_id, grant in store.grants():
            self.core.remember_grant(user, session_id, machine_id, grant)
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
        self._sockets: set[web.WebSocketResponse] = set()
        self._closing: set[asyncio.Task[Any]] = set()
        #: Frames received from agents and clients (for /metrics).
        self.frames = 0

    # --- agents ------------------------------------------------------------

    async def _agent_control(self, request: web.Request) -> web.StreamResponse:
        return await self._agent(request, None)

    async def _agent_data(self, request: web.Request) -> web.StreamResponse:
        return await self._agent(request, request.match_info["session_id"])

    async def _agent(self, request: web.Request, session_id: str | None) -> web.StreamResponse:
        user = admit_agent(self.store, _bearer(request), session_id)
        if isinstance(user, Refusal):
            return _refuse(user)
        ws = await self._upgrade(request)
        link = self.core.agent_opened(ws, user=user, session_id=session_id)
        try:
            await self._pump_frames(ws, functools.partial(self.core.agent_frame, link))
        finally:
            await self._apply(self.core.agent_closed(link, ws.close_code))
            self._sockets.discard(ws)
            self._timer.reschedule()
        return ws

    # --- clients -----------------------------------------------------------

    async def _client(self, request: web.Request) -> web.StreamResponse:
        session_id = request.match_info["session_id"]
        user = admit_client(self.store, _bearer(request), session_id)
        if isinstance(user, Refusal):
            return _refuse(user)
        ws = await self._upgrade(request)
        client = self.core.client_opened(ws, user=user, session_id=session_id)
        return await self._serve_client(ws, client)

    async def _machine_client(self, request: web.Request) -> web.StreamResponse:
        user = admit_client(self.store, _bearer(request))
        if isinstance(user, Refusal):
            return _refuse(user)
        ws = await self._upgrade(request)
        machine_id = request.match_info["machine_id"]
        client = self.core.machine_client_opened(ws, user=user, machine_id=machine_id)
        return await self._serve_client(ws, client)

    async def _serve_client(
        self, ws: web.WebSocketResponse, client: ClientLink
    ) -> web.WebSocketResponse:
        try:
            await self._pump_frames(ws, functools.partial(self.core.client_frame, client))
        finally:
            await self._apply(self.core.client_closed(client))
            self._sockets.discard(ws)
        return ws

    async def _pump_frames(
        self, ws: web.WebSocketResponse, handle: Callable[[bytes], list[HubAction]]
    ) -> None:
        """Feed every frame of `ws` to the core and carry out its answer.

        The relay path's common case, exactly one Send, is done inline: a
        coroutine call per frame is a measurable share of the hub's cost.
        """
        timers = self.core.timers
        apply = self._apply
        text, binary = WSMsgType.TEXT, WSMsgType.BINARY
        async for message in ws:
            kind = message.type
            if kind is not text and kind is not binary:
                continue
            self.frames += 1
            actions = handle(message.data)
            if len(actions) == 1 and type(action := actions[0]) is Send:
                peer = action.peer
                if not peer.closed:
                    try:
                        await peer.send_frame(action.data, text)
                    except (ConnectionError, RuntimeError):
                        pass  # the peer's own loop sees the close and cleans up
            elif actions:
                await apply(actions)
            if timers.dirty:
                self._timer.reschedule()

    # --- plain HTTP --------------------------------------------------------

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
            live = self.core.sessions.get(record.session_id)
            owner = live.owner if live is not None else None
            sessions.append(
                {
                    "session_id": record.session_id,
                    "created": record.created,
                    "connected": owner is not None,
                    "machine_id": owner.machine_id if owner is not None else None,
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
        user = self._client_user(request)
        if isinstance(user, Refusal):
            return _refuse(user)
        session_id = request.match_info["session_id"]
        refusal = admit_client(self.store, _bearer(request), session_id)
        if isinstance(refusal, Refusal):
            return _refuse(refusal)
        actions = self.core.revoke(session_id)
        self.store.mark_revoked(session_id)
        await self._apply(actions)
        return web.json_response({"session_id": session_id, "agent_closed": bool(actions)})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "agents": len(self.core.agents)})

    async def _metrics(self, request: web.Request) -> web.Response:
        owners = sum(1 for s in self.core.sessions.values() if s.owner is not None)
        lines = [
            "# TYPE tetherbed_hub_agents gauge",
            f"tetherbed_hub_agents {len(self.core.agents)}",
            "# TYPE tetherbed_hub_sessions_owned gauge",
            f"tetherbed_hub_sessions_owned {owners}",
            "# TYPE tetherbed_hub_frames_total counter",
            f"tetherbed_hub_frames_total {self.frames}",
        ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    # --- plumbing ----------------------------------------------------------

    async def _upgrade(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(
            compress=False,
            max_msg_size=FRAME_LIMIT_BYTES,
            autoping=True,
            heartbeat=None,
            decode_text=False,
        )
        await ws.prepare(request)
        self._sockets.add(ws)
        return ws

    async def _apply(self, actions: Iterable[HubAction]) -> None:
        for action in actions:
            if type(action) is Send:
                peer = action.peer
                if not peer.closed:
                    try:
                        await peer.send_frame(action.data, WSMsgType.TEXT)
                    except (ConnectionError, RuntimeError):
                        pass  # the peer's own loop sees the close and cleans up
            elif isinstance(action, Close):
                # Do not wait for the peer's close handshake in this loop.
                task = asyncio.ensure_future(self._close(action.peer, action.code, action.reason))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close(peer: web.WebSocketResponse, code: int, reason: str) -> None:
        with contextlib.suppress(Exception):
            await peer.close(code=code, message=reason.encode("utf-8")[:123])

    async def _on_shutdown(self, app: web.Application) -> None:
        """SIGTERM: every agent gets 4429, then the process exits."""
        agents = [
            self._close(a.peer, a.code, a.reason)
            for a in self.core.shutdown()
            if isinstance(a, Close)
        ]
        await asyncio.gather(*agents)
        others = [
            self._close(ws, CloseCode.GOING_AWAY, "hub shutting down") for ws in self._sockets
        ]
        await asyncio.gather(*others)
        self._timer.cancel()


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
    runner = web.AppRunner(server.app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise CannotListen(host, port, exc) from exc
    bound = runner.addresses[0] if runner.addresses else (host, port)
    print(f"tetherbed hub listening on ws://{bound[0]}:{bound[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("shutting down")
    await runner.cleanup()
    if event_log is not None:
        event_log.close()
