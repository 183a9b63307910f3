"""The stand-in hub's client and admin adapters: how Tetherbed drives its API.

They implement the interfaces of `tetherbed.simulator.targets.adapters` over
the stand-in's own API (Server-Sent Events for answers, POST for requests,
an admin API of its own) — the same thing a user writes for their platform.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tetherbed.simulator.targets import (
    Answer,
    ConnectionLost,
    HubAccess,
    OpenRefused,
)


class StandinSessionClient:
    def __init__(
        self, http: aiohttp.ClientSession, base: str, session: str, response: Any, channel: str
    ) -> None:
        self._http = http
        self._calls = f"{base}/standin/sessions/{session}/calls"
        self._response = response
        self._channel = channel

    async def send(self, request_id: str, kind: str, payload: bytes) -> None:
        body = {
            "channel": self._channel,
            "ref": request_id,
            "method": kind,
            "args": json.loads(payload),
        }
        try:
            async with self._http.post(self._calls, json=body) as answer:
                if answer.status == 404:
                    raise ConnectionLost("the stand-in forgot the channel")
                if answer.status >= 400:
                    raise ConnectionLost(f"the stand-in refused the call: HTTP {answer.status}")
        except aiohttp.ClientError as exc:
            raise ConnectionLost(str(exc)) from None

    async def receive(self) -> Answer:
        while True:
            event, data = await _next_event(self._response)
            if event == "answer":
                body = json.dumps(data.get("body") or {}).encode()
                ref = data.get("ref")
                return Answer(str(data.get("kind")), ref if isinstance(ref, str) else None, body)

    async def close(self) -> None:
        self._response.close()
        await self._http.close()


class StandinClients:
    """ClientAdapter: one SSE stream per session client."""

    def __init__(self, hub: HubAccess) -> None:
        self.hub = hub

    async def open(self, session: str, user: str) -> StandinSessionClient:
        http = _session(self.hub, user)
        base = self.hub.http_url
        try:
            response = await http.get(
                f"{base}/standin/sessions/{session}/stream",
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            )
        except aiohttp.ClientError:
            await http.close()
            raise
        if response.status != 200:
            status = response.status
            response.close()
            await http.close()
            raise OpenRefused(status)
        event, data = await _next_event(response)
        if event != "ready":
            response.close()
            await http.close()
            raise OpenRefused("no ready event")
        return StandinSessionClient(http, base, session, response, str(data["channel"]))

    async def close(self) -> None:
        return None


class StandinAdmin:
    """AdminAdapter over the stand-in's admin API."""

    def __init__(self, hub: HubAccess) -> None:
        self.hub = hub

    async def _post(self, path: str, user: str, body: dict[str, Any]) -> None:
        async with (
            _session(self.hub, user) as http,
            http.post(f"{self.hub.http_url}{path}", json=body) as answer,
        ):
            if answer.status >= 400:
                raise RuntimeError(f"stand-in {path}: HTTP {answer.status}")

    async def revoke(self, session: str, user: str) -> None:
        await self._post("/standin/admin/revoke", user, {"session": session})

    async def shutdown(self) -> None:
        user = sorted(self.hub.tokens.users())[0]
        await self._post("/standin/admin/shutdown", user, {})

    async def sessions(self, user: str) -> list[str]:
        async with (
            _session(self.hub, user) as http,
            http.get(f"{self.hub.http_url}/standin/admin/sessions") as answer,
        ):
            return list(await answer.json())

    async def close(self) -> None:
        return None


def _session(hub: HubAccess, user: str) -> aiohttp.ClientSession:
    """HTTP with the user's key, trusting what the target trusts for https."""
    connector = aiohttp.TCPConnector(ssl=hub.ssl) if hub.ssl is not None else None
    headers = {"X-Api-Key": hub.tokens.get(user, "client")}
    return aiohttp.ClientSession(headers=headers, connector=connector)


async def _next_event(response: Any) -> tuple[str, Any]:
    """The next Server-Sent Event; ConnectionLost when the stream ends."""
    event, data = "message", []
    try:
        while True:
            raw = await response.content.readline()
            if not raw:
                raise ConnectionLost("the stand-in's stream ended")
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                if data:
                    return event, json.loads("\n".join(data))
                continue
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
    except (aiohttp.ClientError, ConnectionError) as exc:
        raise ConnectionLost(str(exc)) from None
