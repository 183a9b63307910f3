"""A raw SSE agent: Tetherbed's minimal agent side of dsh-computers, for judging a hub.

It enrolls with whatever body a case wants, opens the `events` stream, reads
what the hub pushes, and POSTs results, chunks and heartbeats exactly as the
case scripts them: in order, out of order, twice, late or never. Every
request, answer and event is recorded (dsh_hub/http.py).
"""

from __future__ import annotations

import secrets
from typing import Any

from tetherbed.simulator.conformance.dsh_hub.http import EventStream, HttpAnswer, RecordedHttp
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.wire.dsh import constants as C

#: Seconds the hub gets to send `hello` on a new stream.
HELLO_WAIT = 10.0
#: What the raw agent claims to be.
AGENT_VERSION = "1.3.0"


def enroll_body(
    key: str, name: str, *, capabilities: list[str] | None = None, placement: str = "either"
) -> dict[str, Any]:
    """§3.1's body; `capabilities` at the top level, in `metadata`, or both (`either`)."""
    body: dict[str, Any] = {
        "key": key,
        "agentVersion": AGENT_VERSION,
        "machine": {
            "hostname": name,
            "name": name,
            "os": "linux",
            "arch": "x64",
            "platform": "Linux",
            "cpuModel": "conformance",
            "memoryBytes": 1 << 30,
            "nodeVersion": "v22.0.0",
        },
    }
    if capabilities is not None:
        if placement in ("either", "top-level"):
            body["capabilities"] = capabilities
        if placement in ("either", "metadata"):
            body["metadata"] = {
                "version": 1,
                "agentVersion": AGENT_VERSION,
                "hostname": name,
                "os": "linux",
                "arch": "x64",
                "capabilities": capabilities,
                "workspaceBase": "/home/conform",
            }
    return body


class RawSseAgent:
    def __init__(self, base: str, evidence: Evidence, channel: str, ssl: Any = None) -> None:
        self.http = RecordedHttp(base, evidence, channel, ssl)
        self.name = f"conform-{secrets.token_hex(4)}"
        self.computer_id: str | None = None
        self.token: str | None = None
        self.stream: EventStream | None = None

    async def enroll(
        self, key: str, body: dict[str, Any] | None = None, **options: Any
    ) -> HttpAnswer:
        answer = await self.http.request(
            "POST", C.url(C.Route.ENROLL), body=body or enroll_body(key, self.name, **options)
        )
        value = answer.json()
        if answer.status == 200 and isinstance(value, dict):
            self.computer_id = value.get("computerId")
            self.token = value.get("token")
        return answer

    async def connect(self, token: str | None = None) -> EventStream:
        """Open the events stream (with our token unless told otherwise)."""
        self.stream = await self.http.open_stream(
            C.url(C.Route.EVENTS), token if token is not None else self.token
        )
        return self.stream

    async def post(
        self, route: str, body: Any, *, token: str | None = None, note: str = ""
    ) -> HttpAnswer:
        return await self.http.request(
            "POST",
            C.url(route),
            body=body,
            token=token if token is not None else self.token,
            note=note,
        )

    async def result(self, request_id: str, **fields: Any) -> HttpAnswer:
        body = {
            "requestId": request_id,
            "ok": True,
            "exitCode": 0,
            "signal": None,
            "stdout": "",
            "stderr": "",
            "durationMs": 5,
            "truncated": False,
            "timedOut": False,
            "error": None,
        }
        body.update(fields)
        return await self.post(C.Route.RESULTS, body)

    async def close(self) -> None:
        await self.http.close()
