"""Messages of the hub's own client API, beside the spec's (docs/hub-api.md).

The hub answers these itself; they never reach an agent, so they are not
part of the local-executor protocol and not in `MessageType`.
"""

from __future__ import annotations

from msgspec import Struct

#: Client → hub: what does the hub know about this session? (payload `{}`)
SESSION_INFO_REQUEST = "SESSION_INFO_REQUEST"
#: Hub → client: the answer, under the request's id.
SESSION_INFO_RESPONSE = "SESSION_INFO_RESPONSE"


class SessionInfo(Struct, kw_only=True):
    """The session as its agent described itself in HELLO.

    `allowed_root` is the canonical root the agent serves (null when no agent
    is connected); clients resolve relative paths against it.
    """

    session_id: str
    allowed_root: str | None = None
    machine_id: str | None = None
    connection_id: str | None = None
