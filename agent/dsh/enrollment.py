"""§3.1 from the agent's side: one POST that turns a key into a token.

Shared by the CLI's `enroll` and the hub's runtime mode (§10.3 "the same
body the CLI sends"), and the probe that proves the round trip afterwards.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tetherbed.agent.dsh import machine
from tetherbed.agent.dsh.transport import HubHttp, TransportError
from tetherbed.agent.dsh.version import AGENT_VERSION
from tetherbed.wire.dsh import constants as C
from tetherbed.wire.dsh.sse import SseDecoder, SseError, SseEvent

CAPABILITIES = (C.Capability.EXEC, C.Capability.FS)


class EnrollRefused(Exception):
    """The hub answered, and not with a token."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Enrolled:
    computer_id: str
    token: str
    name: str
    server_url: str


def enroll_body(key: str, name: str | None, workspace: str | None = None) -> dict[str, Any]:
    caps = list(CAPABILITIES)
    return {
        "key": key,
        "agentVersion": AGENT_VERSION,
        "machine": machine.machine_block(name),
        "capabilities": caps,
        "metadata": machine.metadata_block(caps, workspace or str(Path.home())),
    }


async def enroll(
    server: str,
    key: str,
    name: str | None = None,
    *,
    http: HubHttp | None = None,
    body: dict[str, Any] | None = None,
) -> Enrolled:
    """POST /agent/enroll; raises EnrollRefused, TransportError or ValueError (bad URL).

    `http` (a client of `server`) and `body` replace the defaults, for a driver
    that reaches the hub its own way (the simulator's network)."""
    http = http or HubHttp(server)
    try:
        answer = await http.post_json(C.url(C.Route.ENROLL), body or enroll_body(key, name))
    finally:
        await http.close()
    value = answer.json()
    if answer.status != 200 or not isinstance(value, dict):
        code = value.get("error") if isinstance(value, dict) else None
        message = value.get("message") if isinstance(value, dict) else None
        raise EnrollRefused(
            answer.status,
            str(code or "http-error"),
            str(message or code or f"HTTP {answer.status}"),
        )
    try:
        return Enrolled(
            str(value["computerId"]),
            str(value["token"]),
            str(value.get("name") or name or machine.hostname()),
            str(value.get("serverUrl") or server),
        )
    except KeyError as exc:
        raise EnrollRefused(answer.status, "bad-answer", f"the answer lacks {exc}") from None


async def probe(
    server: str, token: str, seconds: float = C.ENROLL_PROBE_S, *, http: HubHttp | None = None
) -> str | None:
    """§6: hold the stream up to `seconds` to see `hello`; None when it came."""
    http = http or HubHttp(server, token)

    async def hello() -> str | None:
        stream = await http.open_stream(C.url(C.Route.EVENTS))
        try:
            if stream.head.status != 200:
                return f"HTTP {stream.head.status}"
            decoder = SseDecoder()
            async for data in stream.chunks():
                for item in decoder.feed(data):
                    if isinstance(item, SseEvent) and item.event == C.Event.HELLO:
                        return None
            return "the hub ended the stream before hello"
        finally:
            stream.close()

    try:
        return await asyncio.wait_for(hello(), seconds)
    except TimeoutError:
        return f"no hello within {seconds:g} s"
    except (TransportError, SseError) as exc:
        return str(exc)
    finally:
        await http.close()
