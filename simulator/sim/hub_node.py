"""The reference hub on the sim network: the same `HubCore`, admission rules,
action runner and per-peer outboxes as `tetherbed hub`, driven over in-memory
connections in virtual time."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from tetherbed.hub.actions import Actions, Close
from tetherbed.hub.admission import Refusal, admit_agent, admit_client, bearer_token
from tetherbed.hub.config import HubConfig
from tetherbed.hub.core import HubCore
from tetherbed.hub.driver import ActionRunner
from tetherbed.hub.outbox import Outbox, Outboxes
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
        self.core = HubCore(config, clock)
        #: False: the `revocation_unenforced` defect (hub/admission.py).
        self._revocation = "revocation_unenforced" not in config.defects
        self.runner = ActionRunner(self.core, store, observer)
        self._observer = observer
        self.outboxes = Outboxes(
            limit_bytes=config.slow_consumer_bytes,
            stall_seconds=config.slow_consumer_seconds,
            on_slow=self._slow_consumer,
        )
        self._timer = CoreTimer(self.core, self._apply)
        # Dicts, not sets: iteration order must not depend on object addresses,
        # or the same seed would not give the same history.
        self._ends: dict[SimEndpoint, Outbox] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self.network.listen(self._admit, self._serve)

    async def shutdown(self) -> None:
        """Graceful: 4429 to every agent, then stop listening."""
        self.network.stop_listening()
        closing = self.core.shutdown()
        agents = [a.peer for a in closing if isinstance(a, Close)]
        self._apply(closing)
        await asyncio.gather(*(o.wait_closed(5) for o in agents))
        for end, outbox in list(self._ends.items()):
            if outbox not in agents:
                await end.close(1001, "hub shutting down")
        await self.outboxes.close()
        self._timer.cancel()

    def crash(self) -> None:
        """Abrupt: every connection drops without a close frame."""
        self.network.stop_listening()
        for end, outbox in list(self._ends.items()):
            outbox.stop()
            self.network.abort(end)
        self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()

    def revoke(self, session_id: str, user: str | None = None) -> None:
        """The user revokes the session (every user's session of that id when
        `user` is None, as the scenario steps name sessions only)."""
        users = [user] if user is not None else self._users_with(session_id)
        for owner in users:
            self.store.mark_revoked(owner, session_id)
            self._apply(self.core.revoke(owner, session_id))

    def _users_with(self, session_id: str) -> list[str]:
        users = {u for (u, s) in self.core.sessions if s == session_id}
        users |= {r.user for r in self.store.sessions_with_id(session_id)}
        return sorted(users)

    # --- connections -------------------------------------------------------------

    def _admit(self, path: str, headers: Mapping[str, str]) -> tuple[int, bytes] | None:
        token = bearer_token(headers.get("Authorization"))
        kind, name = _route(path)
        if kind == "agent":
            verdict = admit_agent(self.store, token, name or None, revocation=self._revocation)
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

    def _outbox(self, end: SimEndpoint, name: str) -> Outbox:
        async def close(code: int, reason: str) -> None:
            await end.close(code, reason)

        def abort() -> None:
            self.network.abort(end)

        outbox = self.outboxes.open(name, end.send, close, abort)
        self._ends[end] = outbox
        return outbox

    async def _serve(self, end: SimEndpoint, path: str, headers: Mapping[str, str]) -> None:
        token = bearer_token(headers.get("Authorization"))
        kind, name = _route(path)
        outbox = self._outbox(end, f"{kind}:{end.link.name}")
        try:
            if kind == "agent":
                user = admit_agent(self.store, token, name or None, revocation=self._revocation)
                assert isinstance(user, str)
                link, opened = self.core.agent_opened(outbox, user=user, session_id=name or None)
                self._apply(opened)
                code: int | None = None
                try:
                    code = await self._pump(end, functools.partial(self.core.agent_frame, link))
                finally:
                    self._apply(self.core.agent_closed(link, code))
            else:
                user = admit_client(self.store, token)
                assert isinstance(user, str)
                if kind == "session":
                    client, opened = self.core.client_opened(outbox, user=user, session_id=name)
                else:
                    client, opened = self.core.machine_client_opened(
                        outbox, user=user, machine_id=name
                    )
                self._apply(opened)
                try:
                    await self._pump(end, functools.partial(self.core.client_frame, client))
                finally:
                    self._apply(self.core.client_closed(client))
        finally:
            outbox.stop()
            self._ends.pop(end, None)

    async def _pump(self, end: SimEndpoint, handle: Callable[[bytes], Actions]) -> int | None:
        """Feed frames to the core until the connection ends; returns the close code."""
        inline = self.runner.inline
        while True:
            try:
                data = await end.recv()
            except TransportClosed as exc:
                return exc.code
            actions = handle(data)
            if inline:  # the head_of_line defect: the old, blocking driver
                await self.runner.apply_inline(actions)
                if self.core.timers.dirty:
                    self._timer.reschedule()
            else:
                self._apply(actions)

    def _apply(self, actions: Actions) -> None:
        self.runner.apply(actions)
        if self.core.timers.dirty:
            self._timer.reschedule()

    def _slow_consumer(self, outbox: Outbox, why: dict[str, Any]) -> None:
        self._observer("slow_consumer", peer=outbox.name, **why)


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
