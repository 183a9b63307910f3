"""Client for a machine's control connection: browse, attach, activate, restore, detach.

    async with MachineControl.connect(hub_url, machine_id, token) as machine:
        roots = await machine.browse()
        home = await machine.browse(roots.browse_id, roots.entries[0].directory_ref)
        attached = await machine.attach(session_id, home.browse_id, home.entries[0].directory_ref)
        await machine.activate(session_id, attached.revision)

The hub relays these to the machine's control connection
(`/v1/machines/{machine_id}/client`); see docs/hub-api.md.
"""

from __future__ import annotations

import urllib.parse

from msgspec import UNSET

from tetherbed.client.sandbox import HubConnection, expect_answer
from tetherbed.wire import strict
from tetherbed.wire.messages import (
    Ack,
    DirectoryListResponse,
    MessageType,
    SessionActivated,
    SessionAttached,
    SessionRestored,
)


def machine_url(hub_url: str, machine_id: str) -> str:
    base = hub_url.rstrip("/")
    for web, socket in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(web):
            base = socket + base[len(web) :]
    return f"{base}/v1/machines/{urllib.parse.quote(machine_id, safe='')}/client"


class MachineControl(HubConnection):
    """The control plane of one machine, through the hub."""

    @staticmethod
    def endpoint(hub_url: str, name: str) -> str:
        return machine_url(hub_url, name)

    @property
    def machine_id(self) -> str:
        return self.session_id

    async def browse(
        self,
        browse_id: str | None = None,
        directory_ref: str | None = None,
        cursor: str | None = None,
    ) -> DirectoryListResponse:
        """Both references None start a new browse at the machine's roots."""
        request = strict.DirectoryListRequest(
            browse_id=browse_id,
            directory_ref=directory_ref,
            cursor=UNSET if cursor is None else cursor,
        )
        frame = await self.request(MessageType.DIRECTORY_LIST_REQUEST, request)
        return expect_answer(frame, MessageType.DIRECTORY_LIST_RESPONSE, DirectoryListResponse)

    async def attach(
        self,
        session_id: str,
        browse_id: str,
        directory_ref: str,
        *,
        expected_connection_id: str | None = None,
    ) -> SessionAttached:
        """`expected_connection_id` is carried for the platform's race detection
        (the spec: the host ignores it); null when not given."""
        request = strict.AttachSession(
            session_id=session_id,
            browse_id=browse_id,
            directory_ref=directory_ref,
            expected_connection_id=expected_connection_id,
        )
        frame = await self.request(MessageType.ATTACH_SESSION, request)
        return expect_answer(frame, MessageType.SESSION_ATTACHED, SessionAttached)

    async def activate(self, session_id: str, revision: int) -> SessionActivated:
        request = strict.ActivateSession(session_id=session_id, revision=revision)
        frame = await self.request(MessageType.ACTIVATE_SESSION, request)
        return expect_answer(frame, MessageType.SESSION_ACTIVATED, SessionActivated)

    async def restore(self, session_id: str, root_grant: str) -> SessionRestored:
        request = strict.RestoreSession(session_id=session_id, root_grant=root_grant)
        frame = await self.request(MessageType.RESTORE_SESSION, request)
        return expect_answer(frame, MessageType.SESSION_RESTORED, SessionRestored)

    async def detach(self, session_id: str) -> None:
        frame = await self.request(
            MessageType.DETACH_SESSION, strict.DetachSession(session_id=session_id)
        )
        expect_answer(frame, MessageType.ACK, Ack)
