"""Who may open which connection: the checks made before any upgrade.

Shared by every hub driver (aiohttp, the simulator's in-memory one), so a
refused peer is refused the same way — same status, same code — whatever
carries it, and never gets to send a payload.
"""

from __future__ import annotations

from dataclasses import dataclass

from tetherbed.hub.store import HubStore, TokenKind
from tetherbed.wire.codes import ErrorCode, ExtensionCode


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    code: str
    message: str


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def admit_agent(store: HubStore, token: str | None, session_id: str | None) -> str | Refusal:
    """The agent's user, or why it is refused. A new session id is claimed for the user."""
    user = store.authenticate(token, TokenKind.AGENT)
    if user is None:
        return Refusal(401, ErrorCode.AUTH_FAILED, "missing or invalid agent token")
    if session_id is not None and not store.claim_session(session_id, user):
        return Refusal(403, ExtensionCode.SESSION_NOT_FOUND, "session belongs to another user")
    return user


def admit_client(
    store: HubStore, token: str | None, session_id: str | None = None
) -> str | Refusal:
    """The client's user, or why it is refused. With a session id, the session
    must be the user's; someone else's gets the same answer as a missing one."""
    user = store.authenticate(token, TokenKind.CLIENT)
    if user is None:
        return Refusal(401, ErrorCode.AUTH_FAILED, "missing or invalid client token")
    if session_id is not None:
        record = store.session(session_id)
        if record is None or record.user != user:
            return Refusal(404, ExtensionCode.SESSION_NOT_FOUND, f"no session {session_id}")
    return user
