"""The hub as a sans-I/O state machine: agents, sessions, relay, keepalive.

Drivers (the aiohttp server, the simulator) report connections and frames;
the core answers with `Send`/`Close` actions and never touches a socket. The
relay path decodes only the envelope (type, id, version) and copies the
payload bytes through untouched, rewriting the id so that answers return to
the right client under the client's own id.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

from tetherbed.clock import Clock
from tetherbed.hub.actions import Close, HubAction, Send
from tetherbed.hub.config import HubConfig
from tetherbed.hub.handshake import Accepted, answer_hello
from tetherbed.hub.links import AgentLink, AgentState, ClientLink, Route, Session
from tetherbed.hub.ownership import Verdict, decide
from tetherbed.wire import catalog
from tetherbed.wire.codes import CloseCode, ErrorCode, ExtensionCode
from tetherbed.wire.envelope import Envelope, decode_envelope, decode_payload, encode_message
from tetherbed.wire.errors import ProtocolError, WireError
from tetherbed.wire.messages import (
    Empty,
    ErrorPayload,
    Hello,
    MessageType,
    SessionRevoked,
    Status,
)
from tetherbed.wire.version import ProtocolVersion, same_major

log = logging.getLogger(__name__)

Observer = Callable[..., None]
_NO_ACTIONS: list[HubAction] = []


def _noop(event: str, **fields: Any) -> None:
    return None


class HubCore:
    def __init__(
        self,
        config: HubConfig,
        clock: Clock,
        *,
        observer: Observer | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.sessions: dict[str, Session] = {}
        self.agents: set[AgentLink] = set()
        self._observe = observer or _noop
        self._ids = itertools.count(1)
        self._timers: list[tuple[float, int, AgentLink]] = []
        self._timer_seq = itertools.count()

    # === agents ============================================================

    def agent_opened(self, peer: Any, *, user: str, session_id: str | None) -> AgentLink:
        """An agent's upgrade was authenticated; it must now send HELLO."""
        link = AgentLink(peer, user, session_id, connection_id=f"c{next(self._ids):x}")
        link.hello_deadline = self.clock.monotonic() + self.config.hello_timeout
        self._arm(link)
        self.agents.add(link)
        self._observe("connect", conn=link.connection_id, session=session_id, user=user)
        return link

    def agent_frame(self, link: AgentLink, data: bytes) -> list[HubAction]:
        if link.state is AgentState.READY or link.state is AgentState.DETACHED:
            return self._agent_answer(link, data)
        if link.state is AgentState.AWAITING_HELLO:
            return self._agent_hello(link, data)
        return _NO_ACTIONS

    def agent_closed(self, link: AgentLink, code: int | None = None) -> list[HubAction]:
        """The agent's socket is gone: fail what it held, free the session."""
        if link.state is AgentState.CLOSED:
            return _NO_ACTIONS
        was_owner = self._owner_of(link)
        link.state = AgentState.CLOSED
        self.agents.discard(link)
        self._observe("disconnect", conn=link.connection_id, session=link.session_id, code=code)
        actions: list[HubAction] = []
        self._fail_routes(link, actions)
        if was_owner:
            session = self.sessions[link.session_id]  # type: ignore[index]
            session.owner = None
            self._drain_queue_with_error(session, actions)
        return actions

    # === clients ===========================================================

    def client_opened(self, peer: Any, *, user: str, session_id: str) -> ClientLink:
        self._observe("client_connect", session=session_id, user=user)
        return ClientLink(peer, user, session_id)

    def client_frame(self, client: ClientLink, data: bytes) -> list[HubAction]:
        """Relay one client request to the session's agent (or answer an error)."""
        try:
            envelope = decode_envelope(data)
        except WireError as exc:
            return [Send(client.peer, self._error_frame(exc.request_id, exc))]
        request_id = envelope.id
        kind = envelope.type
        if kind not in catalog.DATA_REQUESTS:
            return [Send(client.peer, self._error_frame(request_id, _not_relayable(envelope)))]
        if not request_id:
            error = ProtocolError(ExtensionCode.INVALID_MESSAGE, "request has no id")
            return [Send(client.peer, self._error_frame(None, error))]
        if request_id in client.inflight:
            error = ProtocolError(
                ExtensionCode.DUPLICATE_REQUEST_ID,
                f"request id {request_id!r} is already in flight on this connection",
            )
            return [Send(client.peer, self._error_frame(request_id, error))]
        session = self.sessions.get(client.session_id)
        owner = session.owner if session is not None else None
        if owner is None or owner.state is not AgentState.READY:
            error = ProtocolError(
                ExtensionCode.AGENT_NOT_CONNECTED,
                f"session {client.session_id} has no connected agent",
            )
            return [Send(client.peer, self._error_frame(request_id, error))]
        route = Route(client, request_id, kind, envelope)
        client.inflight[request_id] = route
        if owner.free_slots > 0 and not session.queue:  # type: ignore[union-attr]
            return [self._issue(owner, route)]
        if len(session.queue) >= self.config.queue_limit:  # type: ignore[union-attr]
            del client.inflight[request_id]
            error = ProtocolError(
                ErrorCode.SHIM_OVERLOADED,
                f"agent has no free slot and {self.config.queue_limit} requests are queued",
            )
            return [Send(client.peer, self._error_frame(request_id, error))]
        session.queue.append(route)  # type: ignore[union-attr]
        return _NO_ACTIONS

    def client_closed(self, client: ClientLink) -> list[HubAction]:
        """Answers still to come for this client will be dropped on arrival."""
        client.closed = True
        session = self.sessions.get(client.session_id)
        if session is not None and session.queue:
            session.queue = type(session.queue)(r for r in session.queue if r.client is not client)
        client.inflight.clear()
        return _NO_ACTIONS

    # === administration ====================================================

    def revoke(self, session_id: str, reason: str = "user_revoked") -> list[HubAction]:
        """The user revoked the session: SESSION_REVOKED then close 4428."""
        session = self.sessions.get(session_id)
        owner = session.owner if session is not None else None
        if owner is None:
            return _NO_ACTIONS
        actions: list[HubAction] = [
            Send(
                owner.peer, self._frame(MessageType.SESSION_REVOKED, SessionRevoked(reason=reason))
            ),
            Close(owner.peer, CloseCode.SESSION_REVOKED, json.dumps({"reason": reason})),
        ]
        self._observe("revoke", conn=owner.connection_id, session=session_id, reason=reason)
        self._detach(owner, actions)
        return actions

    def shutdown(self) -> list[HubAction]:
        """The hub is going down: every agent gets 4429."""
        actions: list[HubAction] = []
        for link in list(self.agents):
            actions.append(Close(link.peer, CloseCode.PLATFORM_SHUTDOWN, "platform shutting down"))
            self._observe("shutdown_close", conn=link.connection_id, session=link.session_id)
        return actions

    # === keepalive and handshake deadlines =================================

    def next_deadline(self) -> float | None:
        while self._timers:
            when, _, link = self._timers[0]
            if when == self._due(link):
                return when
            heapq.heappop(self._timers)
        return None

    def on_timer(self) -> list[HubAction]:
        now = self.clock.monotonic()
        actions: list[HubAction] = []
        while self._timers and self._timers[0][0] <= now:
            when, _, link = heapq.heappop(self._timers)
            if when != self._due(link):
                continue  # stale entry
            self._fire(link, now, actions)
        return actions

    def _due(self, link: AgentLink) -> float | None:
        if link.state is AgentState.CLOSED:
            return None
        if link.state is AgentState.AWAITING_HELLO:
            return link.hello_deadline
        if link.state is AgentState.DETACHED:
            return None
        if link.pong_deadline is not None:
            return min(link.pong_deadline, link.ping_at)
        return link.ping_at

    def _arm(self, link: AgentLink) -> None:
        due = self._due(link)
        if due is not None:
            heapq.heappush(self._timers, (due, next(self._timer_seq), link))

    def _fire(self, link: AgentLink, now: float, actions: list[HubAction]) -> None:
        if link.state is AgentState.AWAITING_HELLO:
            link.hello_deadline = None
            actions.append(Close(link.peer, CloseCode.POLICY_VIOLATION, "no HELLO in time"))
            return
        if link.pong_deadline is not None and now >= link.pong_deadline:
            link.pong_deadline = None
            link.ping_at = float("inf")
            self._observe("pong_timeout", conn=link.connection_id, session=link.session_id)
            actions.append(Close(link.peer, CloseCode.GOING_AWAY, "no PONG in time"))
            return
        if now >= link.ping_at:
            link.ping_id = f"p{next(self._ids):x}"
            link.ping_at = now + self.config.ping_interval
            link.pong_deadline = now + self.config.pong_timeout
            actions.append(Send(link.peer, self._frame(MessageType.PING, Empty(), link.ping_id)))
        self._arm(link)

    # === internals: handshake ==============================================

    def _agent_hello(self, link: AgentLink, data: bytes) -> list[HubAction]:
        try:
            envelope = decode_envelope(data)
            if envelope.type != MessageType.HELLO:
                raise WireError(
                    ExtensionCode.MESSAGE_NOT_ALLOWED,
                    f"expected HELLO, got {envelope.type}",
                    request_id=envelope.id,
                )
            hello = decode_payload(envelope, MessageType.HELLO)
        except WireError as exc:
            exc.fatal = True
            return [
                Send(link.peer, self._error_frame(exc.request_id, exc)),
                Close(link.peer, CloseCode.PROTOCOL_ERROR, exc.code),
            ]
        assert isinstance(hello, Hello)
        link.machine_id = hello.machine_id
        self._observe(
            "hello",
            conn=link.connection_id,
            session=link.session_id,
            machine=hello.machine_id,
            version=hello.protocol_version,
        )
        answer = answer_hello(
            hello, config=self.config, session_id=link.session_id, connection_id=link.connection_id
        )
        if not isinstance(answer, Accepted):
            link.state = AgentState.DETACHED
            actions: list[HubAction] = []
            if answer.error is not None:
                actions.append(Send(link.peer, self._error_frame(envelope.id, answer.error)))
            actions.append(Close(link.peer, answer.code, answer.reason))
            self._observe("refused", conn=link.connection_id, code=answer.code)
            return actions
        actions = []
        if link.session_id is not None and not self._take_session(link, actions):
            return actions
        link.version = answer.version
        link.granted = frozenset(answer.ack.granted_capabilities)
        link.capacity = answer.ack.max_concurrent
        link.state = AgentState.READY
        link.hello_deadline = None
        link.ping_at = self.clock.monotonic() + self.config.ping_interval
        self._arm(link)
        actions.append(Send(link.peer, self._frame(MessageType.HELLO_ACK, answer.ack, envelope.id)))
        self._observe(
            "ack", conn=link.connection_id, session=link.session_id, machine=link.machine_id
        )
        if link.session_id is not None:
            self._pump(self.sessions[link.session_id], actions)
        return actions

    def _take_session(self, link: AgentLink, actions: list[HubAction]) -> bool:
        """Apply the ownership policy; False when the newcomer was refused."""
        session_id = link.session_id
        assert session_id is not None
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = Session(session_id)
        old = session.owner
        decision = decide(self.config.ownership, old.machine_id if old else None, link.machine_id)
        if decision.verdict is Verdict.REJECT:
            assert old is not None
            link.state = AgentState.DETACHED
            reason = json.dumps(
                {"error": "SESSION_TAKEN_OVER", "detail": "owned by another machine"},
                separators=(",", ":"),
            )
            actions.append(Close(link.peer, CloseCode.SESSION_TAKEN_OVER, reason))
            self._observe(
                "takeover_rejected",
                conn=link.connection_id,
                session=session_id,
                machine=link.machine_id,
                owner=old.connection_id,
            )
            return False
        if old is not None and decision.verdict is Verdict.TAKEOVER:
            if decision.revoke_old:
                revoked = SessionRevoked(
                    reason="another_shim_connected", new_shim_machine_id=link.machine_id
                )
                actions.append(Send(old.peer, self._frame(MessageType.SESSION_REVOKED, revoked)))
            reason = json.dumps(
                {"error": "SESSION_TAKEN_OVER", "new_shim_machine_id": link.machine_id[:60]},
                separators=(",", ":"),
            )
            actions.append(Close(old.peer, CloseCode.SESSION_TAKEN_OVER, reason))
            self._detach(old, actions)
        if old is not None:
            self._observe(
                "takeover",
                session=session_id,
                old=old.connection_id,
                new=link.connection_id,
                machine=link.machine_id,
                silent=decision.verdict is Verdict.REPLACE_SILENTLY,
            )
        session.owner = link
        return True

    def _detach(self, link: AgentLink, actions: list[HubAction]) -> None:
        """Stop routing to `link` now; its socket closes later."""
        if self._owner_of(link):
            self.sessions[link.session_id].owner = None  # type: ignore[index]
        link.state = AgentState.DETACHED
        self._fail_routes(link, actions)

    def _owner_of(self, link: AgentLink) -> bool:
        if link.session_id is None:
            return False
        session = self.sessions.get(link.session_id)
        return session is not None and session.owner is link

    # === internals: relay ==================================================

    def _issue(self, owner: AgentLink, route: Route) -> Send:
        hub_id = f"h{next(self._ids):x}"
        route.hub_id = hub_id
        owner.routes[hub_id] = route
        envelope = route.envelope
        data = encode_message(
            envelope.type,
            hub_id,
            envelope.payload,
            ts=envelope.ts if envelope.ts is not None else self.clock.time(),
            version=envelope.version or owner.version,
        )
        return Send(owner.peer, data)

    def _pump(self, session: Session, actions: list[HubAction]) -> None:
        """Issue queued requests while the owner has free slots."""
        owner = session.owner
        queue = session.queue
        while queue and owner is not None and owner.free_slots > 0:
            actions.append(self._issue(owner, queue.popleft()))

    def _agent_answer(self, link: AgentLink, data: bytes) -> list[HubAction]:
        try:
            envelope = decode_envelope(data)
        except WireError as exc:
            log.warning("agent %s sent a bad frame: %s", link.connection_id, exc)
            return _NO_ACTIONS
        frame_version = envelope.version
        if (
            frame_version is not None
            and frame_version != link.version
            and not same_major(frame_version, ProtocolVersion.parse(link.version))
        ):
            log.error("agent %s sent version %s; closing", link.connection_id, envelope.version)
            return [Close(link.peer, CloseCode.PROTOCOL_VERSION_MISMATCH, "frame major mismatch")]
        route = link.routes.get(envelope.id) if envelope.id else None
        if route is None:
            return self._agent_unsolicited(link, envelope)
        kind = envelope.type
        terminal = kind not in catalog.STREAMING_RESPONSES
        if terminal:
            del link.routes[envelope.id]  # type: ignore[arg-type]
        actions: list[HubAction] = []
        client = route.client
        if not client.closed:
            if terminal:
                client.inflight.pop(route.client_id, None)
            actions.append(
                Send(
                    client.peer,
                    encode_message(
                        kind,
                        route.client_id,
                        envelope.payload,
                        ts=envelope.ts if envelope.ts is not None else self.clock.time(),
                        version=envelope.version or link.version,
                    ),
                )
            )
        if terminal and envelope.pending_capacity is not None:
            # pending_capacity counts the agent's own in-flight requests, which
            # are at most ours: free + ours is an upper bound on its limit.
            link.capacity = min(link.capacity, envelope.pending_capacity + len(link.routes))
        if terminal and link.state is AgentState.READY:
            self._pump(self.sessions[link.session_id], actions)  # type: ignore[index]
        return actions

    def _agent_unsolicited(self, link: AgentLink, envelope: Envelope) -> list[HubAction]:
        kind = envelope.type
        if kind == MessageType.PONG:
            if envelope.id == link.ping_id:
                link.pong_deadline = None
                link.ping_id = None
                self._arm(link)  # the next PING is now the earliest deadline
            return _NO_ACTIONS
        if kind == MessageType.STATUS:
            try:
                status = decode_payload(envelope, MessageType.STATUS)
            except WireError:
                return _NO_ACTIONS
            assert isinstance(status, Status)
            link.capacity = status.max_concurrent
            self._observe(
                "status",
                conn=link.connection_id,
                session=link.session_id,
                in_flight=status.in_flight,
                max_concurrent=status.max_concurrent,
            )
            actions: list[HubAction] = []
            if link.session_id is not None and link.state is AgentState.READY:
                self._pump(self.sessions[link.session_id], actions)
            return actions
        log.debug("agent %s sent unsolicited %s", link.connection_id, kind)
        return _NO_ACTIONS

    def _fail_routes(self, link: AgentLink, actions: list[HubAction]) -> None:
        """Answer every request the agent held: it will never answer them now."""
        for route in link.routes.values():
            self._answer_lost(route, actions)
        link.routes.clear()

    def _answer_lost(self, route: Route, actions: list[HubAction]) -> None:
        client = route.client
        if client.closed:
            return
        client.inflight.pop(route.client_id, None)
        error = ProtocolError(
            ExtensionCode.AGENT_DISCONNECTED,
            f"the agent disconnected with {route.kind} in flight",
            details={"idempotent": catalog.is_idempotent(route.kind)},
        )
        actions.append(Send(client.peer, self._error_frame(route.client_id, error)))

    def _drain_queue_with_error(self, session: Session, actions: list[HubAction]) -> None:
        while session.queue:
            route = session.queue.popleft()
            client = route.client
            if client.closed:
                continue
            client.inflight.pop(route.client_id, None)
            error = ProtocolError(
                ExtensionCode.AGENT_NOT_CONNECTED,
                f"the agent disconnected before {route.kind} was sent; it was not executed",
            )
            actions.append(Send(client.peer, self._error_frame(route.client_id, error)))

    # === internals: encoding ===============================================

    def _frame(self, kind: MessageType, payload: Any, request_id: str | None = None) -> bytes:
        return encode_message(
            kind,
            request_id if request_id is not None else f"s{next(self._ids):x}",
            payload,
            ts=self.clock.time(),
            version=self.config.protocol_version,
        )

    def _error_frame(self, request_id: str | None, error: ProtocolError) -> bytes:
        payload = ErrorPayload(
            code=error.code, message=error.message, fatal=error.fatal, details=error.details
        )
        return encode_message(
            MessageType.ERROR,
            request_id,
            payload,
            ts=self.clock.time(),
            version=self.config.protocol_version,
        )


def _not_relayable(envelope: Envelope) -> ProtocolError:
    try:
        MessageType(envelope.type)
    except ValueError:
        return ProtocolError(
            ExtensionCode.UNKNOWN_MESSAGE_TYPE, f"unknown message type {envelope.type!r}"
        )
    return ProtocolError(
        ExtensionCode.MESSAGE_NOT_ALLOWED,
        f"{envelope.type} is not a request a client may send on a session",
    )
