"""Who may open which connection: the checks made before any upgrade.

Shared by every hub driver (aiohttp, the simulator's in-memory one), so a
refused peer is refused the same way — same status, same code — whatever
carries it, and never gets to send a payload.

Session ids are names within a user (hub/store.py), so an agent naming any id
is admitted to *its user's* session of that id: the answer never depends on
what other users have. A revoked session is refused for good: agents with 401
(the spec: after 4428 a reconnect "would just 401"; an agent stops on it, as
for a bad token), clients with 403 SESSION_REVOKED.
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


def admit_agent(
    store: HubStore, token: str | None, session_id: str | None, *, revocation: bool = True
) -> str | Refusal:
    """The agent's user, or why it is refused. A new session id is claimed for the user.

    `revocation=False` is the `revocation_unenforced` defect: a revoked
    session admits a reconnecting agent."""
    user = store.authenticate(token, TokenKind.AGENT)
    if user is None:
        return Refusal(401, ErrorCode.AUTH_FAILED, "missing or invalid agent token")
    revoked = session_id is not None and store.claim_session(user, session_id).revoked
    if revoked and revocation:
        return Refusal(401, ErrorCode.AUTH_FAILED, f"session {session_id} was revoked")
    return user


def admit_client(
    store: HubStore, token: str | None, session_id: str | None = None
) -> str | Refusal:
    """The client's user, or why it is refused. With a session id, the session
    must exist for the user and not be revoked."""
    user = store.authenticate(token, TokenKind.CLIENT)
    if user is None:
        return Refusal(401, ErrorCode.AUTH_FAILED, "missing or invalid client token")
    if session_id is not None:
        record = store.session(user, session_id)
        if record is None:
            return Refusal(404, ExtensionCode.SESSION_NOT_FOUND, f"no session {session_id}")
        if record.revoked:
            return Refusal(403, ExtensionCode.SESSION_REVOKED, f"session {session_id} was revoked")
    return user


def session_access(store: HubStore, user: str, session_id: str) -> bool:
    """The answer to the core's `Authorize`: may `user` address `session_id`?
    (It is claimed for them when new; only a revoked session is refused.)"""
    return not store.claim_session(user, session_id).revoked
