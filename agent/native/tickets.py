"""One-time video tickets, sans-I/O: 15 s, consumed once, bound to view/session/generation.

The trusted adapter mints the ticket (24 random bytes, 32 base64url characters) and
hands it over in `video_open`; the browser presents it as its first WebSocket
message. A ticket value is never accepted twice, even after it expired.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

from tetherbed.agent.native.errors import Code, NativeError

TICKET_TTL_S = 15.0
_SEEN_LIMIT = 4096
_LOOPBACK_ORIGIN = re.compile(r"http://127\.0\.0\.1:([0-9]{1,5})")
_HTTPS_ORIGIN = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]{1,5})?")


@dataclass(frozen=True, slots=True)
class Grant:
    ticket: str
    view: str
    view_generation: int
    session: str
    origin: str
    apps: str | None
    display_generation: int
    expires_at: float

    def allows_origin(self, origin: str | None) -> bool:
        return origin is not None and origin in (self.origin, self.apps)


class TicketRejected(Exception):
    """Why a presented ticket was refused (the socket is closed; nothing else is said)."""


def check_origins(origin: str, apps: str | None) -> None:
    match = _LOOPBACK_ORIGIN.fullmatch(origin)
    if match is None or not 1 <= int(match.group(1)) <= 65535:
        raise NativeError(Code.INVALID_ARGUMENT, "`origin` must be exactly http://127.0.0.1:PORT")
    if apps is not None and apps != "null" and not _HTTPS_ORIGIN.fullmatch(apps):
        raise NativeError(Code.INVALID_ARGUMENT, '`apps` must be "null" or an https:// origin')


class TicketBook:
    def __init__(self) -> None:
        self._grants: dict[str, Grant] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._view_generations: dict[str, int] = {}

    def grant(
        self,
        *,
        ticket: str,
        view: str,
        view_generation: int,
        session: str,
        origin: str,
        apps: str | None,
        display_generation: int,
        now: float,
    ) -> bool:
        """Store a grant; True when it replaces an older generation of the same view."""
        check_origins(origin, apps)
        if ticket in self._seen:
            raise NativeError(Code.TICKET_REUSED, "a ticket is accepted once")
        latest = self._view_generations.get(view, 0)
        if view_generation < latest:
            raise NativeError(Code.VIEW_GENERATION_STALE, "a newer generation of this view exists")
        replaced = view_generation > latest > 0
        if replaced:
            self.revoke(view)
        self._view_generations[view] = view_generation
        self._seen[ticket] = None
        while len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        self._grants[ticket] = Grant(
            ticket, view, view_generation, session, origin, apps, display_generation,
            now + TICKET_TTL_S,
        )  # fmt: skip
        return replaced

    def view_generation(self, view: str) -> int:
        return self._view_generations.get(view, 0)

    def origin_allowed(self, origin: str | None, now: float) -> bool:
        """Handshake pre-check: does any live grant name this Origin?"""
        self._expire(now)
        return any(g.allows_origin(origin) for g in self._grants.values())

    def redeem(self, ticket: str, origin: str | None, display_generation: int, now: float) -> Grant:
        self._expire(now)
        grant = self._grants.pop(ticket, None)
        if grant is None:
            raise TicketRejected("unknown, used or expired ticket")
        if grant.display_generation != display_generation:
            raise TicketRejected("the display generation changed")
        if not grant.allows_origin(origin):
            raise TicketRejected("Origin is not authorized for this ticket")
        if grant.view_generation != self._view_generations.get(grant.view):
            raise TicketRejected("the view was replaced")
        return grant

    def revoke(self, view: str | None = None) -> int:
        """Invalidate grants (all, or one view's); returns how many were dropped."""
        doomed = [t for t, g in self._grants.items() if view is None or g.view == view]
        for ticket in doomed:
            del self._grants[ticket]
        return len(doomed)

    def live(self, now: float) -> int:
        self._expire(now)
        return len(self._grants)

    def _expire(self, now: float) -> None:
        for ticket in [t for t, g in self._grants.items() if g.expires_at <= now]:
            del self._grants[ticket]
