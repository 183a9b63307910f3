"""A raw agent: Tetherbed's own minimal agent side of the protocol, for judging a hub.

It dials the hub like a shim (bearer token on the upgrade), sends exactly the
HELLO a case wants — any machine id, arch, version or capability list —
answers PINGs unless told not to, and then lets the case see every request
the hub relays and answer it however the case needs: correctly, late, never,
or by dropping the connection. Every frame both ways is recorded.
"""

from __future__ import annotations

import asyncio
import platform
import ssl
import time
import uuid
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidHandshake, InvalidStatus

from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.recorded_socket import Frame, RecordedSocket
from tetherbed.wire.catalog import ANSWERS
from tetherbed.wire.endpoints import CONTROL_PATH, data_path
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.version import CURRENT_TEXT

#: Seconds the hub gets to answer HELLO.
ACK_WAIT = 10.0
#: Frames the hub sends that are not requests to serve.
NOT_REQUESTS = frozenset({"HELLO_ACK", "PING", "SESSION_REVOKED", "ERROR"})


def default_hello(
    machine: str, *, control: bool = False, root: str | None = None
) -> dict[str, Any]:
    arch = "arm64" if platform.machine().lower() in ("arm64", "aarch64") else "x86_64"
    return {
        "shim_version": "0.1.0-conform",
        "protocol_version": CURRENT_TEXT,
        "machine_id": machine,
        "platform": "linux",
        "arch": arch,
        "screen_resolution": None,
        "capabilities": ["directory_browse"] if control else ["files", "shell"],
        "allowed_root": None if control else (root or "/srv/conform"),
        "local_llm_models": [],
        "hardware_devices": [],
    }


class UpgradeRefused(Exception):
    def __init__(self, status: int | None, text: str) -> None:
        super().__init__(text)
        self.status = status


class RawAgent:
    def __init__(
        self,
        evidence: Evidence,
        channel: str,
        *,
        url: str,
        token: str | None,
        session: str | None,
        machine: str,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.evidence = evidence
        self.channel = channel
        self.url = url
        self.token = token
        self.session = session
        self.machine = machine
        self.ssl = ssl_context
        self.socket: RecordedSocket | None = None
        self.hello_id = f"hello-{uuid.uuid4()}"
        self.ack: Frame | None = None
        #: Answer PINGs with PONG (a case turns it off to be dropped).
        self.answer_pings = True
        self._pongs: set[asyncio.Task[bool]] = set()

    @property
    def path(self) -> str:
        return CONTROL_PATH if self.session is None else data_path(self.session)

    async def open(self) -> None:
        """The upgrade; UpgradeRefused with the HTTP status if the hub refuses it."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token is not None else {}
        self.evidence.add(
            self.channel, "sent", "upgrade",
            f"GET {self.path} ({'with a bearer token' if self.token else 'without Authorization'})",
        )  # fmt: skip
        try:
            ws = await connect(
                self.url + self.path,
                additional_headers=headers,
                ssl=self.ssl,
                compression=None,
                max_size=FRAME_LIMIT_BYTES + 1024,
                max_queue=None,
                ping_interval=None,
                open_timeout=10,
                close_timeout=3,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            self.evidence.add(self.channel, "received", "refused", f"HTTP {status}")
            raise UpgradeRefused(status, f"HTTP {status}") from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            self.evidence.add(self.channel, "received", "refused", f"{type(exc).__name__}: {exc}")
            raise UpgradeRefused(None, str(exc)) from None
        self.evidence.add(self.channel, "received", "upgrade", "101 Switching Protocols")
        self.socket = RecordedSocket(ws, self.evidence, self.channel, on_frame=self._on_frame)
        self.socket.start_reader()

    async def hello(self, payload: dict[str, Any] | None = None, **envelope: Any) -> Frame | None:
        """Send HELLO; the hub's first frame back under any id (None: nothing in time)."""
        assert self.socket is not None
        frame = {"type": "HELLO", "id": self.hello_id, "ts": time.time(), "version": CURRENT_TEXT}
        frame.update(envelope)
        frame["payload"] = payload or default_hello(self.machine, control=self.session is None)
        sent = self.evidence.now()
        await self.socket.send(frame)
        answer = await self.socket.wait_for(lambda f: f.type != "PING", ACK_WAIT, after=sent)
        if answer is not None and answer.type == "HELLO_ACK":
            self.ack = answer
        return answer

    async def connect(self, payload: dict[str, Any] | None = None) -> Frame | None:
        await self.open()
        return await self.hello(payload)

    @property
    def ack_payload(self) -> dict[str, Any]:
        return self.ack.payload if self.ack is not None else {}

    def _on_frame(self, frame: Frame) -> None:
        if frame.type == "PING" and self.answer_pings:
            task = asyncio.ensure_future(self.send("PONG", {}, frame.id))
            self._pongs.add(task)
            task.add_done_callback(self._pongs.discard)

    # --- requests from the hub ------------------------------------------------------

    def requests(self, after: float = -1.0) -> list[Frame]:
        assert self.socket is not None
        return self.socket.frames(
            lambda f: f.type is not None and f.type not in NOT_REQUESTS, after=after
        )

    async def next_request(
        self, timeout: float, *, kind: str | None = None, after: float = -1.0
    ) -> Frame | None:
        assert self.socket is not None
        return await self.socket.wait_for(
            lambda f: (
                f.type is not None
                and f.type not in NOT_REQUESTS
                and (kind is None or f.type == kind)
            ),
            timeout,
            after=after,
        )

    async def wait_requests(self, count: int, timeout: float) -> list[Frame]:
        """At least `count` requests received (or what came within `timeout`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.requests()) < count and loop.time() < deadline:
            assert self.socket is not None
            if self.socket.closed:
                break
            await asyncio.sleep(0.05)
        return self.requests()

    async def send(
        self, kind: str, payload: Any, request_id: Any, *, version: str = CURRENT_TEXT, **extra: Any
    ) -> bool:
        assert self.socket is not None
        frame = {"type": kind, "id": request_id, "ts": time.time(), "version": version}
        frame.update(extra)
        frame["payload"] = payload
        return await self.socket.send(frame)

    async def answer(
        self, request: Frame, payload: Any, *, kind: str | None = None, capacity: int | None = 3,
        version: str = CURRENT_TEXT,
    ) -> bool:  # fmt: skip
        """Answer a relayed request with its proper response type (or `kind`)."""
        answer_kind = kind or str(ANSWERS.get(request.type, "ACK"))  # type: ignore[call-overload]
        extra = {"pending_capacity": capacity} if capacity is not None else {}
        return await self.send(answer_kind, payload, request.id, version=version, **extra)

    async def status(self, *, in_flight: int, max_concurrent: int, capacity: int) -> None:
        payload = {"in_flight": in_flight, "max_concurrent": max_concurrent, "queue_depth": 0,
                   "audit_log_bytes": 0, "uptime_seconds": 1.0}  # fmt: skip
        await self.send("STATUS", payload, f"status-{uuid.uuid4()}", pending_capacity=capacity)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.socket is not None:
            await self.socket.close(code, reason)

    def drop(self) -> None:
        if self.socket is not None:
            self.socket.abort()

    async def shutdown(self) -> None:
        for task in list(self._pongs):
            task.cancel()
        if self.socket is not None:
            await self.socket.shutdown()
