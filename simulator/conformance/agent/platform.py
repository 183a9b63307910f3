"""The scripted platform an agent under test dials: a WebSocket server on loopback.

It is the hub side of the local-executor protocol reduced to what a case
needs to drive: it accepts the agent's upgrade (or refuses it, to measure a
reconnect schedule), reads HELLO, answers with the HELLO_ACK the case's
`AckPolicy` describes (or closes instead), and then lets the case send
requests, PINGs, SESSION_REVOKED and closes, recording everything both ways.
Every upgrade attempt is recorded with its path and time, and whether it
carried a bearer token (never the token itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from tetherbed.simulator.conformance.case import Departure
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.recorded_socket import Frame, RecordedSocket, answering
from tetherbed.wire.endpoints import CONTROL_PATH, session_of_path
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.version import CURRENT_TEXT

#: Seconds an agent gets to send HELLO after its upgrade.
HELLO_WAIT = 10.0
#: Seconds a request waits for its answer unless a case says otherwise.
ANSWER_WAIT = 10.0
#: Margin over the frame limit, so that a case can send an oversized frame.
MAX_SIZE = FRAME_LIMIT_BYTES + 1024 * 1024


@dataclass(slots=True)
class AckPolicy:
    """How the platform answers the next HELLO."""

    #: Capabilities to grant (None: every advertised one that fits the connection).
    grant: set[str] | None = None
    max_concurrent: int | None = 4
    max_file_size_bytes: int | None = 10 * 1024 * 1024
    command_timeout_seconds: float | None = 30
    protocol_version: str = CURRENT_TEXT
    #: Fields replaced in (or, with None values under `drop`, removed from) the ACK payload.
    overrides: dict[str, Any] = field(default_factory=dict)
    drop: tuple[str, ...] = ()
    #: Answer under another id than the HELLO's.
    wrong_id: bool = False
    #: Instead of an ACK: close right after HELLO with this code and reason.
    close_instead: tuple[int, str] | None = None
    #: Send nothing at all after HELLO (the case answers itself).
    silent: bool = False


@dataclass(slots=True)
class Attempt:
    t: float
    path: str
    bearer: bool
    status: int  # 101, or the HTTP status it was refused with


class AgentConnection:
    """One connection the agent opened, after its HELLO."""

    def __init__(self, platform: ScriptedPlatform, socket: RecordedSocket, path: str) -> None:
        self.platform = platform
        self.socket = socket
        self.path = path
        self.session = session_of_path(path)
        self.control = path.split("?", 1)[0].rstrip("/") == CONTROL_PATH
        self.hello: Frame | None = None
        self.ack: dict[str, Any] | None = None
        self.ack_sent_at: float | None = None
        #: The platform's side of the handshake is over (ACK sent, closed, or given up).
        self.handshake_done = False
        self._ids = itertools.count(1)

    @property
    def channel(self) -> str:
        return self.socket.channel

    @property
    def evidence(self) -> Evidence:
        return self.socket.evidence

    @property
    def hello_payload(self) -> dict[str, Any]:
        return self.hello.payload if self.hello is not None else {}

    @property
    def advertised(self) -> list[str]:
        caps = self.hello_payload.get("capabilities")
        return [c for c in caps if isinstance(c, str)] if isinstance(caps, list) else []

    @property
    def granted(self) -> list[str]:
        return list((self.ack or {}).get("granted_capabilities") or [])

    def new_id(self, prefix: str = "req") -> str:
        return f"{prefix}-{next(self._ids)}-{uuid.uuid4().hex[:8]}"

    async def handshake(self, policy: AckPolicy) -> None:
        hello = await self.socket.wait_for(lambda f: f.envelope is not None, HELLO_WAIT)
        self.hello = hello
        if hello is None or hello.type != "HELLO" or policy.silent:
            return
        if policy.close_instead is not None:
            await self.socket.close(*policy.close_instead)
            return
        payload = self._ack_payload(policy, hello)
        ack_id = f"not-{hello.id}" if policy.wrong_id else hello.id
        frame = {
            "type": "HELLO_ACK",
            "id": ack_id,
            "ts": time.time(),
            "version": policy.protocol_version,
            "payload": payload,
        }
        self.ack = payload
        await self.socket.send(frame)
        self.ack_sent_at = self.evidence.now()

    def _ack_payload(self, policy: AckPolicy, hello: Frame) -> dict[str, Any]:
        advertised = [c for c in (hello.payload.get("capabilities") or []) if isinstance(c, str)]
        if policy.grant is not None:
            granted = [c for c in advertised if c in policy.grant]
        elif self.control:
            granted = [c for c in advertised if c == "directory_browse"]
        else:
            granted = [c for c in advertised if c not in ("directory_browse", "recording")]
        payload: dict[str, Any] = {
            "session_id": None if self.control else self.session,
            "connection_id": f"conn-{uuid.uuid4().hex[:12]}",
            "protocol_version": policy.protocol_version,
            "granted_capabilities": granted,
        }
        for name in ("max_file_size_bytes", "command_timeout_seconds", "max_concurrent"):
            value = getattr(policy, name)
            if value is not None:
                payload[name] = value
        payload.update(policy.overrides)
        for name in policy.drop:
            payload.pop(name, None)
        return payload

    # --- talking to the agent -------------------------------------------------------

    def envelope(
        self, kind: str, payload: Any, request_id: Any = None, **extra: Any
    ) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "type": kind,
            "id": request_id if request_id is not None else self.new_id(),
            "ts": time.time(),
            "version": CURRENT_TEXT,
        }
        frame.update(extra)
        frame["payload"] = payload
        return frame

    async def send(self, frame: dict[str, Any] | str | bytes) -> bool:
        return await self.socket.send(frame)

    async def request(
        self,
        kind: str,
        payload: Any,
        *,
        timeout: float = ANSWER_WAIT,
        request_id: str | None = None,
        **extra: Any,
    ) -> Frame:
        """Send a request and wait for its terminal answer (not a chunk, not STATUS).
        No answer within `timeout` is a departure: every request gets one."""
        frame = self.envelope(kind, payload, request_id, **extra)
        sent_at = self.evidence.now()
        await self.send(frame)
        answer = await self.answer_to(frame["id"], timeout=timeout, after=sent_at)
        if answer is None:
            ended = self.socket.ending
            if ended is not None:
                raise Departure(
                    f"no answer to {kind} (id {frame['id']}): the connection ended "
                    f"({ended.by}, {ended.code} {ended.reason})".rstrip()
                )
            raise Departure(f"no answer to {kind} (id {frame['id']}) within {timeout:g} s")
        return answer

    async def answer_to(self, request_id: Any, *, timeout: float, after: float) -> Frame | None:
        return await self.socket.wait_for(
            lambda f: answering(request_id)(f) and f.type != "LOCAL_LLM_COMPLETION_CHUNK",
            timeout,
            after=after,
        )

    async def close(self, code: int, reason: str = "") -> None:
        await self.socket.close(code, reason)


class ScriptedPlatform:
    """The WebSocket server one case's agent dials."""

    def __init__(self, evidence: Evidence, token: str) -> None:
        self.evidence = evidence
        self.token = token
        self.policy = AckPolicy()
        #: While set, upgrades are answered with this HTTP status instead of 101.
        self.refuse_with: int | None = None
        self.attempts: list[Attempt] = []
        self.connections: list[AgentConnection] = []
        self._changed = asyncio.Condition()
        self._server: Server | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._numbers = itertools.count(1)
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await serve(
            self._handle,
            "127.0.0.1",
            0,
            process_request=self._process_request,
            compression=None,
            max_size=MAX_SIZE,
            max_queue=None,
            ping_interval=None,
            open_timeout=10,
            close_timeout=3,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for connection in list(self.connections):
            await connection.socket.shutdown()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        bearer = request.headers.get("Authorization") == f"Bearer {self.token}"
        status = self.refuse_with or 101
        self.attempts.append(Attempt(self.evidence.now(), request.path, bearer, status))
        self.evidence.add(
            "platform",
            "received",
            "upgrade",
            f"GET {request.path} ({'with' if bearer else 'WITHOUT'} the agent's bearer token)",
        )
        if self.refuse_with is not None:
            self.evidence.add("platform", "sent", "refused", f"HTTP {self.refuse_with}")
            return connection.respond(http.HTTPStatus(self.refuse_with), "unavailable\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        path = ws.request.path if ws.request is not None else "?"
        socket = RecordedSocket(ws, self.evidence, f"conn#{next(self._numbers)}")
        connection = AgentConnection(self, socket, path)
        policy = self.policy
        reader = asyncio.ensure_future(socket.read_until_closed())
        async with self._changed:
            self.connections.append(connection)
            self._changed.notify_all()
        try:
            try:
                await connection.handshake(policy)
            finally:
                connection.handshake_done = True
            async with self._changed:
                self._changed.notify_all()
            await reader
        finally:
            reader.cancel()

    # --- waiting for the agent ------------------------------------------------------

    async def next_connection(
        self, timeout: float, *, after: int = 0, handshake: bool = True
    ) -> AgentConnection | None:
        """The connection numbered `after`+1 (from 1), once its handshake is done."""
        deadline = time.monotonic() + timeout
        async with self._changed:
            while True:
                if len(self.connections) > after:
                    found = self.connections[after]
                    if not handshake or found.handshake_done or found.socket.closed:
                        return found
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, 0.5)):
                        await self._changed.wait()

    def attempts_after(self, t: float) -> list[Attempt]:
        return [a for a in self.attempts if a.t > t]


def describe_payload(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))[:300]
