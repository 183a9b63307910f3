"""HTTP and SSE as a dsh-computers agent or browser speaks them, every exchange recorded.

The hub suite's peers (raw SSE agents, the browser, the install script's
download) are plain HTTP clients; each request and answer, and each SSE
event of a stream, goes into the case's evidence. Headers are never
recorded, and enrollment keys and tokens inside bodies are shown shortened
(`dshc_ab…`), so a report never carries a working credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.waiting import wait_until
from tetherbed.wire.dsh.sse import SseDecoder, SseError, SseEvent, SseRetry

#: A credential inside a recorded body, shown by its first characters only.
_CREDENTIAL = re.compile(r"dshc_([A-Za-z0-9_-]{4})[A-Za-z0-9_-]{39}")
#: Seconds any single request may take before the case gives up on it.
REQUEST_TIMEOUT = 15.0


def redact(text: str) -> str:
    return _CREDENTIAL.sub(r"dshc_\1…", text)


@dataclass(slots=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.text)
        except ValueError:
            return None

    def error_code(self) -> str | None:
        value = self.json()
        return value.get("error") if isinstance(value, dict) else None

    def describe(self) -> str:
        return f"HTTP {self.status} {redact(self.text[:200])}"


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


class RecordedHttp:
    """One client (a connection per request: no keep-alive crosses a case's steps)."""

    def __init__(self, base: str, evidence: Evidence, channel: str, ssl: Any = None) -> None:
        self.base = base.rstrip("/")
        self.evidence = evidence
        self.channel = channel
        self.ssl = ssl
        self._session: aiohttp.ClientSession | None = None
        self.streams: list[EventStream] = []

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True, ssl=self.ssl),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = None,
        note: str = "",
    ) -> HttpAnswer:
        sent_headers = dict(headers or {})
        if token is not None:
            sent_headers["Authorization"] = f"Bearer {token}"
        data: bytes | None = raw
        if body is not None:
            data = json.dumps(body).encode()
            sent_headers.setdefault("Content-Type", "application/json")
        shown = redact(data.decode("utf-8", "replace")) if data else ""
        auth = "with a bearer token" if token else "without a token"
        extra = f" [{note}]" if note else ""
        self.evidence.add(
            self.channel,
            "sent",
            "http",
            f"{method} {path} ({auth}){extra} {shown}"[:600],
            len(data or b""),
        )
        async with asyncio.timeout(REQUEST_TIMEOUT):
            async with self.session().request(
                method, self.base + path, data=data, headers=sent_headers
            ) as response:
                text = await response.text(errors="replace")
                answer = HttpAnswer(response.status, _lower(response.headers), text)
        self.evidence.add(
            self.channel, "received", "http", answer.describe()[:600], len(text.encode())
        )
        return answer

    async def open_stream(self, path: str, token: str | None, *, name: str = "") -> EventStream:
        """GET an SSE route; the stream reads its events in the background."""
        channel = f"{self.channel} stream{name or len(self.streams) + 1}"
        headers = {"Accept": "text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self.evidence.add(
            channel,
            "sent",
            "http",
            f"GET {path} ({'with a bearer token' if token else 'without a token'})",
        )
        async with asyncio.timeout(REQUEST_TIMEOUT):
            response = await self.session().get(self.base + path, headers=headers)
        stream = EventStream(channel, self.evidence, response)
        self.streams.append(stream)
        stream.start()
        return stream

    async def close(self) -> None:
        for stream in self.streams:
            await stream.close()
        if self._session is not None:
            await self._session.close()


@dataclass(slots=True)
class Received:
    #: Case time it arrived.
    t: float
    event: SseEvent

    @property
    def name(self) -> str:
        return self.event.event

    def data(self) -> Any:
        try:
            return self.event.json()
        except ValueError:
            return None


@dataclass(slots=True)
class EventStream:
    channel: str
    evidence: Evidence
    response: aiohttp.ClientResponse
    events: list[Received] = field(default_factory=list)
    retry_ms: int | None = None
    #: What preceded the first event: the first field the stream carried.
    first_field: str | None = None
    ended_at: float | None = None
    _task: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def status(self) -> int:
        return self.response.status

    @property
    def headers(self) -> dict[str, str]:
        return _lower(self.response.headers)

    def start(self) -> None:
        note = f"HTTP {self.status} {self.headers.get('content-type', '')}"
        self.evidence.add(self.channel, "received", "http", note)
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        decoder = SseDecoder()
        why = "the hub ended the stream"
        try:
            if self.status != 200:
                body = await self.response.text(errors="replace")
                self.evidence.add(self.channel, "received", "http", redact(body[:300]))
                return
            async for data in self.response.content.iter_any():
                for item in decoder.feed(data):
                    if isinstance(item, SseRetry):
                        if self.first_field is None:
                            self.first_field = "retry"
                        self.retry_ms = item.milliseconds
                        self.evidence.add(
                            self.channel, "received", "sse", f"retry: {item.milliseconds}"
                        )
                        continue
                    if self.first_field is None:
                        self.first_field = "event"
                    self.events.append(Received(self.evidence.now(), item))
                    text = redact(f"event: {item.event} data: {item.data}")
                    self.evidence.add(self.channel, "received", "sse", text[:600], len(item.data))
                    self._changed.set()
        except (aiohttp.ClientError, SseError, ConnectionError) as exc:
            why = f"the stream broke: {type(exc).__name__}: {exc}"
        except asyncio.CancelledError:
            why = "closed by the case"
            raise
        finally:
            self.ended_at = self.evidence.now()
            self.evidence.add(self.channel, "event", "end", why)
            self._changed.set()

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def named(self, name: str) -> list[Received]:
        return [e for e in self.events if e.name == name]

    async def wait(self, condition: Any, timeout: float) -> bool:
        """Until `condition()` holds (True) or `timeout` seconds pass (False)."""
        return await wait_until(self._changed, condition, timeout)

    async def next_event(self, name: str, timeout: float, *, after: int = 0) -> Received | None:
        """The first `name` event at index `after` or later."""

        def found() -> Received | None:
            return next((e for e in self.events[after:] if e.name == name), None)

        await self.wait(lambda: found() is not None or self.ended, timeout)
        return found()

    async def wait_end(self, timeout: float) -> bool:
        return await self.wait(lambda: self.ended, timeout)

    async def close(self) -> None:
        """Close our end cleanly (the connection goes with it)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self.response.close()
