"""The hub's plain-HTTP API for a client token: sessions, machines, revocation."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from tetherbed.client.errors import HubError, error_from_code


class HubAdmin:
    """`async with HubAdmin(hub_url, client_token) as admin: await admin.revoke(sid)`."""

    def __init__(self, hub_url: str, token: str) -> None:
        base = hub_url.rstrip("/")
        for socket, web in (("ws://", "http://"), ("wss://", "https://")):
            if base.startswith(socket):
                base = web + base[len(socket) :]
        self.base_url = base
        self._headers = {"Authorization": f"Bearer {token}"}
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HubAdmin:
        self._http = aiohttp.ClientSession(headers=self._headers)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._http is not None:
            await self._http.close()

    async def create_session(self) -> str:
        return (await self._call("POST", "/v1/sessions"))["session_id"]

    async def sessions(self) -> list[dict[str, Any]]:
        return (await self._call("GET", "/v1/sessions"))["sessions"]

    async def machines(self) -> list[dict[str, Any]]:
        """The presence registry: machines with a live control connection."""
        return (await self._call("GET", "/v1/machines"))["machines"]

    async def wait_connected(self, session_id: str, timeout: float) -> dict[str, Any]:
        """Poll until an agent serves `session_id`; TimeoutError after `timeout` s.

        A hub that is not listening yet counts as "not yet", so a script can
        start a hub and an agent in the background and wait here for both.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                for session in await self.sessions():
                    if session.get("session_id") == session_id and session.get("connected"):
                        return session
            except aiohttp.ClientConnectionError:
                pass
            if loop.time() >= deadline:
                raise TimeoutError(f"no agent serves session {session_id} after {timeout:g} s")
            await asyncio.sleep(0.1)

    async def revoke(self, session_id: str) -> dict[str, Any]:
        """SESSION_REVOKED{user_revoked} and close 4428 to the session's agent."""
        return await self._call("POST", f"/v1/sessions/{session_id}/revoke")

    async def _call(self, method: str, path: str) -> dict[str, Any]:
        if self._http is None:
            raise RuntimeError("use HubAdmin as an async context manager")
        async with self._http.request(method, self.base_url + path) as response:
            body = await response.json(content_type=None)
            if response.status >= 400:
                error = (body or {}).get("error", {})
                raise error_from_code(
                    error.get("code", "HTTP_ERROR"),
                    error.get("message", f"HTTP {response.status}"),
                    http_status=response.status,
                )
            return body


__all__ = ["HubAdmin", "HubError"]
