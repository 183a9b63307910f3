"""A client of the hub, through the target's client adapter, every request and answer recorded.

The specs leave the client side to each platform, so cases reach it only
through the adapter (docs/targets.md): `send(request_id, kind, payload)` and
the answers the adapter reports, recorded exactly as they come — an adapter
must not invent, merge or drop answers, so an answer missing here is an
answer the hub never gave.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.targets import Answer, ConnectionLost, SessionClient


@dataclass(slots=True)
class Received:
    t: float
    kind: str
    request_id: str | None
    payload: dict[str, Any]

    def describe(self) -> str:
        code = self.payload.get("code") if self.kind == "ERROR" else None
        return f"{self.kind}" + (f" {code}" if code else "") + f" (id {self.request_id!r})"


class RecordedClient:
    def __init__(self, client: SessionClient, evidence: Evidence, channel: str) -> None:
        self.client = client
        self.evidence = evidence
        self.channel = channel
        self.answers: list[Received] = []
        self.lost: str | None = None
        self._changed = asyncio.Condition()
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            try:
                answer: Answer = await self.client.receive()
            except ConnectionLost as exc:
                self.lost = str(exc) or "connection lost"
                self.evidence.add(self.channel, "event", "close", f"client connection lost: {exc}")
                break
            except Exception as exc:
                self.lost = f"{type(exc).__name__}: {exc}"
                self.evidence.add(self.channel, "event", "close", f"client failed: {self.lost}")
                break
            try:
                payload = json.loads(answer.payload)
            except ValueError:
                payload = {"_raw": answer.payload.decode("utf-8", "replace")[:500]}
            if not isinstance(payload, dict):
                payload = {"_value": payload}
            text = json.dumps(
                {"type": answer.kind, "id": answer.request_id, "payload": payload},
                separators=(",", ":"),
            )
            self.evidence.received(self.channel, text)
            async with self._changed:
                self.answers.append(
                    Received(self.evidence.now(), answer.kind, answer.request_id, payload)
                )
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    async def send(self, kind: str, payload: dict[str, Any], request_id: str | None = None) -> str:
        request_id = request_id or f"c-{uuid.uuid4().hex[:12]}"
        body = json.dumps(payload, separators=(",", ":"))
        self.evidence.sent(
            self.channel,
            json.dumps({"type": kind, "id": request_id, "payload": payload}, separators=(",", ":")),
        )
        try:
            await self.client.send(request_id, kind, body.encode())
        except ConnectionLost as exc:
            self.lost = str(exc) or "connection lost"
            self.evidence.add(self.channel, "event", "close", f"send failed: {exc}")
        return request_id

    async def wait_for(
        self, predicate: Callable[[Received], bool], timeout: float, *, after: float = -1.0
    ) -> Received | None:
        deadline = time.monotonic() + timeout
        async with self._changed:
            while True:
                for answer in self.answers:
                    if answer.t > after and predicate(answer):
                        return answer
                left = deadline - time.monotonic()
                if left <= 0 or self.lost is not None:
                    return None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._changed.wait()

    async def answer_to(self, request_id: str, timeout: float) -> Received | None:
        return await self.wait_for(
            lambda a: a.request_id == request_id and a.kind != "LOCAL_LLM_COMPLETION_CHUNK",
            timeout,
        )

    def answers_to(self, request_id: str) -> list[Received]:
        return [a for a in self.answers if a.request_id == request_id]

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.close(), 5)
