"""A scripted dsh-computers hub: the §3 agent routes, answering as a case says.

It serves enroll with the key the case created, the events stream (refused,
served or ended as the case scripts each attempt), and takes results,
chunks, heartbeats and file results, recording every request, answer and
event it sent. It is a peer, not a hub: no registry, no tools, no browser
routes — only what an agent talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tetherbed.simulator.conformance.dsh_hub.http import redact
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.waiting import wait_until
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.credentials import bearer, make_credential
from tetherbed.wire.dsh.sse import encode_event, encode_retry

#: What a stream attempt gets: "serve" (hello, then the case's events), "end"
#: (hello, then the stream ends), or an HTTP status to refuse it with.
StreamPolicy = Callable[[int], "str | int"]


@dataclass(slots=True)
class Post:
    t: float
    route: str
    body: Any
    authorized: bool

    def get(self, name: str) -> Any:
        return self.body.get(name) if isinstance(self.body, dict) else None


@dataclass(slots=True)
class Attempt:
    """One GET of the events stream."""

    t: float
    authorized: bool
    answered: str | int


class ServedStream:
    def __init__(self, number: int, evidence: Evidence) -> None:
        self.number = number
        self.channel = f"stream#{number}"
        self.evidence = evidence
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.opened = evidence.now()
        self.closed_at: float | None = None

    def push(self, event: str, data: Any) -> None:
        self.evidence.add(
            self.channel, "sent", "sse", redact(f"event: {event} data: {json.dumps(data)}")[:600]
        )
        self.queue.put_nowait(encode_event(event, data))

    def end(self) -> None:
        self.evidence.add(self.channel, "event", "end", "the hub ends the stream")
        self.queue.put_nowait(None)

    @property
    def open(self) -> bool:
        return self.closed_at is None


class ScriptedHub:
    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.key = make_credential(secrets.token_bytes(C.CREDENTIAL_RANDOM_BYTES))
        self.token = make_credential(secrets.token_bytes(C.CREDENTIAL_RANDOM_BYTES))
        self.computer_id = "cmp_" + secrets.token_hex(6)
        self.name = "conform-machine"
        #: The enroll answer: None for §3.1's 200, else (status, error code).
        self.enroll_refusal: tuple[int, str] | None = None
        self.stream_policy: StreamPolicy = lambda attempt: "serve"
        self.heartbeat_ms = C.HEARTBEAT_MS
        #: What hello offers (§11.5): "stream" and "fs" by default.
        self.features: list[str] | None = [C.Feature.STREAM, C.Feature.FS]
        self.enrolls: list[Post] = []
        self.attempts: list[Attempt] = []
        self.streams: list[ServedStream] = []
        self.posts: list[Post] = []
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    # --- lifecycle -----------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=32 * C.MiB)
        u = C.url
        app.add_routes(
            [
                web.post(u(C.Route.ENROLL), self._enroll),
                web.get(u(C.Route.EVENTS), self._events),
                web.post(u(C.Route.RESULTS), self._post),
                web.post(u(C.Route.RESULTS_CHUNK), self._post),
                web.post(u(C.Route.HEARTBEAT), self._post),
                web.post(u(C.Route.FS_RESULT), self._post),
            ]
        )
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        for stream in self.streams:
            if stream.open:
                stream.queue.put_nowait(None)
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._runner.cleanup(), 5)

    # --- waiting -------------------------------------------------------------------

    def _touch(self) -> None:
        self._changed.set()

    async def wait(self, condition: Callable[[], Any], timeout: float) -> bool:
        return await wait_until(self._changed, condition, timeout)

    def posts_to(self, route: str, request_id: str | None = None) -> list[Post]:
        return [
            p for p in self.posts
            if p.route == route and (request_id is None or p.get("requestId") == request_id)
        ]  # fmt: skip

    async def wait_post(self, route: str, request_id: str | None, timeout: float) -> Post | None:
        await self.wait(lambda: self.posts_to(route, request_id), timeout)
        found = self.posts_to(route, request_id)
        return found[0] if found else None

    async def wait_stream(self, timeout: float, *, after: int = 0) -> ServedStream | None:
        await self.wait(lambda: len(self.streams) > after, timeout)
        return self.streams[after] if len(self.streams) > after else None

    # --- routes --------------------------------------------------------------------

    async def _read(self, request: web.Request, channel: str) -> tuple[Any, bool]:
        raw = await request.read()
        authorized = bearer(request.headers.get("Authorization")) == self.token
        text = raw.decode("utf-8", "replace")
        how = "with our token" if authorized else "without our token"
        shown = redact(f"{request.method} {request.path} ({how}) {text}")
        self.evidence.add(channel, "received", "http", shown[:600], len(raw))
        try:
            return json.loads(text) if text.strip() else None, authorized
        except ValueError:
            return text, authorized

    def _answer(self, channel: str, status: int, body: Any) -> web.Response:
        self.evidence.add(
            channel, "sent", "http", redact(f"HTTP {status} {json.dumps(body)}")[:600]
        )
        return web.json_response(body, status=status, headers={"Cache-Control": "no-store"})

    async def _enroll(self, request: web.Request) -> web.Response:
        body, _ = await self._read(request, "enroll")
        self.enrolls.append(Post(self.evidence.now(), C.Route.ENROLL, body, True))
        self._touch()
        key = body.get("key") if isinstance(body, dict) else None
        if self.enroll_refusal is not None:
            status, code = self.enroll_refusal
            return self._answer("enroll", status, {"error": code, "message": f"scripted {code}"})
        if key != self.key:
            return self._answer(
                "enroll", 401, {"error": C.ErrorCode.INVALID_KEY, "message": "unknown key"}
            )
        answer = {
            "computerId": self.computer_id,
            "token": self.token,
            "name": self.name,
            "serverUrl": self.url,
        }
        return self._answer("enroll", 200, answer)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        authorized = bearer(request.headers.get("Authorization")) == self.token
        number = len(self.attempts)
        channel = f"attempt#{number + 1}"
        how = "with our token" if authorized else "without our token"
        self.evidence.add(channel, "received", "http", f"GET {request.path} ({how})")
        policy = self.stream_policy(number) if authorized else 401
        self.attempts.append(Attempt(self.evidence.now(), authorized, policy))
        self._touch()
        if isinstance(policy, int):
            code = C.ErrorCode.INVALID_TOKEN if policy == 401 else "unavailable"
            return self._answer(channel, policy, {"error": code, "message": "scripted refusal"})
        stream = ServedStream(len(self.streams) + 1, self.evidence)
        response = web.StreamResponse(status=200, headers=C.SSE_HEADERS)
        await response.prepare(request)
        await response.write(encode_retry(C.SSE_RETRY_MS))
        hello: dict[str, Any] = {
            "computerId": self.computer_id,
            "name": self.name,
            "heartbeatMs": self.heartbeat_ms,
            "capabilities": ["exec", "fs"],
        }
        if self.features is not None:
            hello["features"] = self.features
        self.streams.append(stream)
        stream.push(C.Event.HELLO, hello)
        if policy == "end":
            stream.end()
        self._touch()
        try:
            while True:
                item = await stream.queue.get()
                if item is None:
                    break
                await response.write(item)
        except (ConnectionError, RuntimeError):
            pass
        finally:
            stream.closed_at = self.evidence.now()
            self.evidence.add(stream.channel, "event", "end", "the stream is closed")
            self._touch()
        return response

    async def _post(self, request: web.Request) -> web.Response:
        route = request.path.removeprefix(C.BASE_PATH)
        body, authorized = await self._read(request, route.rsplit("/", 1)[-1])
        self.posts.append(Post(self.evidence.now(), route, body, authorized))
        self._touch()
        channel = route.rsplit("/", 1)[-1]
        if not authorized:
            return self._answer(channel, 401, {"error": C.ErrorCode.INVALID_TOKEN})
        if route == C.Route.HEARTBEAT:
            return self._answer(channel, 200, {"ok": True, "name": self.name})
        return self._answer(channel, 200, {"ok": True})
