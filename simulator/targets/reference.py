"""Tetherbed's own client and admin API: the default adapters, and frame clients.

Clients open `/v1/sessions/{session}/client` with the user's client token and
exchange the spec's envelopes; the admin API is `client.admin.HubAdmin`.
`FrameSessionClient` speaks envelopes over any message transport, which is
also how the sim backend's clients reach its in-memory hub.
"""

from __future__ import annotations

import time
from urllib.parse import quote

import msgspec

from tetherbed.client.admin import HubAdmin
from tetherbed.client.errors import HubError
from tetherbed.runtime.transport import MessageTransport, TransportClosed, UpgradeRefused
from tetherbed.runtime.websocket_transport import connect_websocket
from tetherbed.simulator.targets.adapters import (
    Answer,
    ConnectionLost,
    NotSupported,
    OpenRefused,
)
from tetherbed.simulator.targets.hub import HubAccess
from tetherbed.wire.envelope import decode_envelope, encode_message
from tetherbed.wire.errors import WireError
from tetherbed.wire.version import CURRENT_TEXT


class FrameSessionClient:
    """A SessionClient over a transport that carries the spec's envelopes."""

    def __init__(self, transport: MessageTransport, clock=time.time) -> None:
        self._transport = transport
        self._clock = clock

    async def send(self, request_id: str, kind: str, payload: bytes) -> None:
        frame = encode_message(
            kind, request_id, msgspec.Raw(payload), ts=self._clock(), version=CURRENT_TEXT
        )
        try:
            await self._transport.send(frame)
        except TransportClosed as exc:
            raise ConnectionLost(str(exc)) from None

    async def receive(self) -> Answer:
        while True:
            try:
                data = await self._transport.recv()
            except TransportClosed as exc:
                raise ConnectionLost(str(exc)) from None
            try:
                envelope = decode_envelope(data)
            except WireError:
                return Answer("ws.undecodable", None, bytes(data))
            request_id = envelope.id if isinstance(envelope.id, str) else None
            return Answer(envelope.type, request_id, bytes(envelope.payload))

    async def close(self) -> None:
        try:
            await self._transport.close()
        except Exception:
            pass


class TetherbedClients:
    """ClientAdapter for Tetherbed's hub API (`docs/hub-api.md`)."""

    def __init__(self, hub: HubAccess) -> None:
        self.hub = hub

    async def open(self, session: str, user: str) -> FrameSessionClient:
        token = self.hub.tokens.get(user, "client")
        url = f"{self.hub.url}/v1/sessions/{quote(session, safe='')}/client"
        try:
            transport = await connect_websocket(
                url, {"Authorization": f"Bearer {token}"}, ssl=self.hub.ssl
            )
        except UpgradeRefused as exc:
            raise OpenRefused(exc.status) from None
        return FrameSessionClient(transport)

    async def close(self) -> None:
        return None


class TetherbedAdmin:
    """AdminAdapter for Tetherbed's hub API."""

    def __init__(self, hub: HubAccess) -> None:
        self.hub = hub

    async def revoke(self, session: str, user: str) -> None:
        async with HubAdmin(self.hub.url, self.hub.tokens.get(user, "client")) as admin:
            await admin.revoke(session)

    async def shutdown(self) -> None:
        raise NotSupported("Tetherbed's hub is shut down by its process (SIGTERM), not its API")

    async def sessions(self, user: str) -> list[str]:
        async with HubAdmin(self.hub.url, self.hub.tokens.get(user, "client")) as admin:
            try:
                return [s["session_id"] for s in await admin.sessions()]
            except HubError as exc:
                raise NotSupported(str(exc)) from None

    async def close(self) -> None:
        return None
