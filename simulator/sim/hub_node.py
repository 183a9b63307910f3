"""The reference hub on the sim network: the same `HubCore` and admission rules
as `tetherbed hub`, driven over in-memory connections in virtual time."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from tetherbed.hub.actions import Close, HubAction, Send
from tetherbed.hub.admission import Refusal, admit_agent, admit_client, bearer_token
from tetherbed.hub.config import HubConfig
from tetherbed.hub.core import HubCore
from tetherbed.hub.store import HubStore
from tetherbed.hub.timer_driver import CoreTimer
from tetherbed.runtime.clock import Clock
from tetherbed.runtime.transport import TransportClosed
from tetherbed.simulator.sim.network import SimEndpoint, SimNetwork

_AGENT = "/ws/local-executor"


class SimHub:
    def __init__(
        self,
        network: SimNetwork,
        store: HubStore,
        config: HubConfig,
        clock: Clock,
        observer: Callable[..., None],
    ) -> None:
        self.network = network
        self.store = store
        self.core = HubCore(
            config,
            clock,
            observer=observer,
            authority=lambda user, session_id: store.claim_session(session_id, user),
            on_grant=store.save_grant,
        )
        self._timer = CoreTimer(self.core, self._apply)
        # Dicts, not sets: iteration order must not depend on object addresses,
        # or the same seed would not give the same history.
        self._ends: dict[SimEndpoint, None] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self.network.listen(self._admit, self._serve)

    async def shutdown(self) -> None:
        """Graceful: 4429 to every agent, then stop listening."""
        self.network.stop_listening()
        await self._apply(self.core.shutdown())
        for end in list(self._ends):
            await end.close(1001, "hub shutting down")
        self._timer.cancel()

    def crash(self) -> None:
        """Abrupt: every connection drops without a close frame."""
        self.network.stop_listening()
        for end in list(self._ends):
            self.network.abort(end)
        self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    def revoke(self, session_id: str) -> None:
        self.store.mark_revoked(session_id)
        self._spawn(self._apply(self.core.revoke(session_id)))

    # --- connections -------------------------------------------------------------

    def _admit(self, path: str, headers: Mapping[str, str]) -> tuple[int, bytes] | None:
        token = bearer_token(headers.get("Authorization"))
        kind, name = _route(path)
        if kind == "agent":
            verdict = admit_agent(self.store, token, name or None)
        elif kind == "session":
            verdict = admit_client(self.store, token, name)
        elif kind == "machine":
            verdict = admit_client(self.store, token)
        else:
            return 404, b'{"error":{"code":"NOT_FOUND","message":"no such endpoint"}}'
        if isinstance(verdict, Refusal):
            body = {"error": {"code": verdict.code, "message": verdict.message}}
            return verdict.status, json.dumps(body).encode()
        return None

    async def _serve(self, end: SimEndpoint, path: str, headers: Mapping[str, str]) -> None:
        token = bearer_token(headers.get("Authorization"))
        kind, name = _route(path)
        self._ends[end] = None
        try:
            if kind == "agent":
                user = admit_agent(self.store, token, name or None)
                assert isinstance(user, str)
                link = self.core.agent_opened(end, user=user, session_id=name or None)
                self._timer.reschedule()
                code: int | None = None
                try:
                    code = await self._pump(end, functools.partial(self.core.agent_frame, link))
                finally:
                    await self._apply(self.core.agent_closed(link, code))
                    self._timer.reschedule()
            else:
                user = admit_client(self.store, token)
                assert isinstance(user, str)
                if kind == "session":
                    client = self.core.client_opened(end, user=user, session_id=name)
                else:
                    client = self.core.machine_client_opened(end, user=user, machine_id=name)
                try:
                    await self._pump(end, functools.partial(self.core.client_frame, client))
                finally:
                    await self._apply(self.core.client_closed(client))
        finally:
            self._ends.pop(end, None)

    async def _pump(
        self, end: SimEndpoint, handle: Callable[[bytes], list[HubAction]]
    ) -> int | None:
        """Feed frames to the core until the connection ends; returns the close code."""
        while True:
            try:
                data = await end.recv()
            except TransportClosed as exc:
                return exc.code
            await self._apply(handle(data))
            if self.core.timers.dirty:
                self._timer.reschedule()

    async def _apply(self, actions: list[HubAction]) -> None:
        for action in actions:
            peer: SimEndpoint = action.peer
            if isinstance(action, Send):
                with contextlib.suppress(TransportClosed):
                    await peer.send(action.data)
            elif isinstance(action, Close):
                await peer.close(action.code, action.reason)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _route(path: str) -> tuple[str, str]:
    """("agent", session or ""), ("session", id), ("machine", id) or ("", "")."""
    if path == _AGENT:
        return "agent", ""
    if path.startswith(_AGENT + "/"):
        return "agent", path[len(_AGENT) + 1 :]
    parts = path.strip("/").split("/")
    if len(parts) == 4 and parts[0] == "v1" and parts[3] == "client":
        if parts[1] == "sessions":
            return "session", parts[2]
        if parts[1] == "machines":
            return "machine", parts[2]
    return "", ""
