"""The hub as a sans-I/O state machine: agents, sessions, machines, relay.

Drivers (the aiohttp server, the simulator) report connections and frames;
the core answers with `Send`/`Close` actions and never touches a socket or a
database. The relay path decodes only the envelope (type, id, version) and
copies the payload bytes through untouched, rewriting the id so that answers
return to the right client under the client's own id.

Beyond relaying it owns: the handshake, session ownership, the presence
registry of machine control connections, capacity-aware issuance with a
bounded queue per target, keepalive, the retry layer for requests that die
with a connection, and transparent restore of idle-stopped sessions.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from tetherbed.hub.actions import Close, HubAction, Send
from tetherbed.hub.config import HubConfig
from tetherbed.hub.handshake import Accepted, answer_hello
from tetherbed.hub.links import AgentLink, AgentState, ClientLink, Route, Target
from tetherbed.hub.ownership import Verdict, decide
from tetherbed.hub.retry import can_retry, prepare_retry
from tetherbed.hub.timers import Timers
from tetherbed.runtime.clock import Clock
from tetherbed.wire import catalog
from tetherbed.wire.codes import CloseCode, ErrorCode, ExtensionCode
from tetherbed.wire.envelope import (
    Envelope,
    decode_envelope,
    decode_payload,
    encode_message,
    reframe,
)
from tetherbed.wire.errors import ProtocolError, WireError
from tetherbed.wire.messages import (
    Empty,
    ErrorPayload,
    Hello,
    MessageType,
    RestoreSession,
    SessionRevoked,
    Status,
)
from tetherbed.wire.version import ProtocolVersion, same_major

log = logging.getLogger(__name__)

Observer = Callable[..., None]
#: May `user` address session `session_id`? (The driver answers from its store.)
SessionAuthority = Callable[[str, str], bool]
_NO_ACTIONS: list[HubAction] = []
# Plain constants for the hot path (enum attribute lookups cost more).
_READY = AgentState.READY
_ERROR = str(MessageType.ERROR)
_STREAMING = frozenset(str(kind) for kind in catalog.STREAMING_RESPONSES)


class _SessionRef(msgspec.Struct):
    session_id: str = ""


class _ErrorCode(msgspec.Struct):
    code: str = ""


class _GrantAnswer(msgspec.Struct):
    session_id: str = ""
    root_grant: str = ""


_session_ref = msgspec.json.Decoder(_SessionRef)
_grant_answer = msgspec.json.Decoder(_GrantAnswer)
_error_code = msgspec.json.Decoder(_ErrorCode)


def _noop(event: str, **fields: Any) -> None:
    return None


def _allow_all(user: str, session_id: str) -> bool:
    return True


class HubCore:
    def __init__(
        self,
        config: HubConfig,
        clock: Clock,
        *,
        observer: Observer | None = None,
        authority: SessionAuthority = _allow_all,
        on_grant: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.sessions: dict[str, Target] = {}
        #: The presence registry: (user, machine_id) → control connection target.
        self.machines: dict[tuple[str, str], Target] = {}
        #: Live agent connections, in connection order (a dict, so that every
        #: walk over them — shutdown, metrics — is deterministic).
        self.agents: dict[AgentLink, None] = {}
        self._observe = observer or _noop
        self._authority = authority
        self._on_grant = on_grant
        self._ids = itertools.count(1)
        self.timers: Timers[AgentLink | Target] = Timers(self._due)
        defects = config.defects
        self._retry_everything = "retry_non_idempotent" in defects
        self._orphan = "orphan_on_disconnect" in defects
        self._shared_ids = "shared_ids" in defects

    # === agents ============================================================

    def agent_opened(self, peer: Any, *, user: str, session_id: str | None) -> AgentLink:
        """An agent's upgrade was authenticated; it must now send HELLO."""
        link = AgentLink(peer, user, session_id, connection_id=f"c{next(self._ids):x}")
        link.connected_at = self.clock.monotonic()
        link.hello_deadline = link.connected_at + self.config.hello_timeout
        self.timers.arm(link)
        self.agents[link] = None
        self._observe("connect", conn=link.connection_id, session=session_id, user=user)
        return link

    def agent_frame(self, link: AgentLink, data: bytes) -> list[HubAction]:
        state = link.state
        if state is AgentState.READY or state is AgentState.DETACHED:
            return self._agent_answer(link, data)
        if state is AgentState.AWAITING_HELLO:
            return self._agent_hello(link, data)
        return _NO_ACTIONS

    def agent_closed(self, link: AgentLink, code: int | None = None) -> list[HubAction]:
        """The agent's socket is gone: retry or fail what it held."""
        if link.state is AgentState.CLOSED:
            return _NO_ACTIONS
        target = link.target
        was_owner = target is not None and target.owner is link
        link.state = AgentState.CLOSED
        self.agents.pop(link, None)
        self._observe(
            "disconnect",
            conn=link.connection_id,
            session=link.session_id,
            machine=link.machine_id,
            code=code,
        )
        actions: list[HubAction] = []
        if was_owner:
            assert target is not None
            target.owner = None
            # A clean close by the agent itself is an explicit disconnect and
            # releases the session; anything else may be a laptop going to
            # sleep or a network blip, so the session stays reserved for that
            # machine and what can be retried is held for it.
            explicit = code == CloseCode.NORMAL and not link.hub_closed
            if target.kind == "session" and not explicit:
                target.hold_until = self.clock.monotonic() + self.config.retry_window
                target.reserved_for = link.machine_id
                self.timers.arm(target)
                self._requeue_or_fail(link, target, actions)
            else:
                self._fail_routes(link, actions)
                self._drain_queue(target, actions)
        else:
            self._fail_routes(link, actions)
        return actions

    # === clients ===========================================================

    def client_opened(self, peer: Any, *, user: str, session_id: str) -> ClientLink:
        self._observe("client_connect", session=session_id, user=user)
        return ClientLink(peer, user, self._session(session_id, user))

    def machine_client_opened(self, peer: Any, *, user: str, machine_id: str) -> ClientLink:
        """A client of the machine's control connection (browse, attach, ...)."""
        self._observe("client_connect", machine=machine_id, user=user)
        return ClientLink(peer, user, self._machine(user, machine_id))

    def client_frame(self, client: ClientLink, data: bytes) -> list[HubAction]:
        """Relay one client request (or answer it with an error).

        This and `_agent_answer` are the relay's hot path: the common case
        runs first and touches as little as possible.
        """
        try:
            envelope = decode_envelope(data)
        except WireError as exc:
            return [Send(client.peer, self._error_frame(exc.request_id, exc))]
        request_id = envelope.id
        target = client.target
        owner = target.owner
        if (
            request_id
            and envelope.type in target.allowed
            and request_id not in client.inflight
            and owner is not None
            and owner.state is _READY
            and owner.capacity > len(owner.routes)
            and not target.queue
            and target.is_session
        ):
            route = Route(client, request_id, envelope.type, envelope)
            client.inflight[request_id] = route
            return [self._issue(owner, route)]
        return self._client_frame_slow(client, envelope)

    def _client_frame_slow(self, client: ClientLink, envelope: Envelope) -> list[HubAction]:
        request_id = envelope.id
        kind = envelope.type
        target = client.target
        if kind not in target.allowed:
            error = _not_relayable(envelope, target.kind)
            return [Send(client.peer, self._error_frame(request_id, error))]
        if not request_id:
            error = ProtocolError(ExtensionCode.INVALID_MESSAGE, "request has no id")
            return [Send(client.peer, self._error_frame(None, error))]
        if request_id in client.inflight:
            error = ProtocolError(
                ExtensionCode.DUPLICATE_REQUEST_ID,
                f"request id {request_id!r} is already in flight on this connection",
            )
            return [Send(client.peer, self._error_frame(request_id, error))]
        if not target.is_session and not self._session_allowed(client.user, envelope):
            error = ProtocolError(
                ExtensionCode.SESSION_NOT_FOUND, "the request names a session of another user"
            )
            return [Send(client.peer, self._error_frame(request_id, error))]
        owner = target.owner
        route = Route(client, request_id, kind, envelope)
        if owner is not None and owner.state is _READY:
            if owner.capacity > len(owner.routes) and not target.queue:
                client.inflight[request_id] = route
                return [self._issue(owner, route)]
            return self._enqueue(target, route)
        actions: list[HubAction] = []
        if target.is_session and self._holding(target, actions):
            actions.extend(self._enqueue(target, route))
            return actions
        error = ProtocolError(
            ExtensionCode.AGENT_NOT_CONNECTED, f"{target.kind} {target.key} has no connected agent"
        )
        return [Send(client.peer, self._error_frame(request_id, error))]

    def client_closed(self, client: ClientLink) -> list[HubAction]:
        """Answers still to come for this client will be dropped on arrival."""
        client.closed = True
        target = client.target
        if target.queue:
            target.queue = type(target.queue)(r for r in target.queue if r.client is not client)
        client.inflight.clear()
        return _NO_ACTIONS

    # === administration ====================================================

    def revoke(self, session_id: str, reason: str = "user_revoked") -> list[HubAction]:
        """The user revoked the session: SESSION_REVOKED then close 4428."""
        target = self.sessions.get(session_id)
        owner = target.owner if target is not None else None
        if target is None or owner is None:
            return _NO_ACTIONS
        revoked = self._frame(MessageType.SESSION_REVOKED, SessionRevoked(reason=reason))
        actions: list[HubAction] = [
            Send(owner.peer, revoked),
            Close(owner.peer, CloseCode.SESSION_REVOKED, json.dumps({"reason": reason})),
        ]
        self._observe("revoke", conn=owner.connection_id, session=session_id, reason=reason)
        target.owner = None
        target.hold_until = None
        target.reserved_for = None
        target.root_grant = None  # a revoked session is not restored behind the user's back
        owner.state = AgentState.DETACHED
        owner.hub_closed = True
        self._fail_routes(owner, actions)
        self._drain_queue(target, actions)
        return actions

    def shutdown(self) -> list[HubAction]:
        """The hub is going down: every agent gets 4429."""
        actions: list[HubAction] = []
        for link in list(self.agents):
            actions.append(Close(link.peer, CloseCode.PLATFORM_SHUTDOWN, "platform shutting down"))
            self._observe("shutdown_close", conn=link.connection_id, session=link.session_id)
        return actions

    def remember_grant(self, user: str, session_id: str, machine_id: str, root_grant: str) -> None:
        """The root grant a session was attached with, for transparent restore
        (learnt from SESSION_ATTACHED/RESTORED, or from durable state)."""
        target = self._session(session_id, user)
        target.machine_id = machine_id
        target.root_grant = root_grant

    # === timers ============================================================

    def next_deadline(self) -> float | None:
        return self.timers.next_deadline()

    def on_timer(self) -> list[HubAction]:
        now = self.clock.monotonic()
        actions: list[HubAction] = []
        for owner in list(self.timers.expired(now)):
            if isinstance(owner, Target):
                self._hold_expired(owner, actions)
            else:
                self._keepalive(owner, now, actions)
        return actions

    def _due(self, owner: AgentLink | Target) -> float | None:
        if isinstance(owner, Target):
            return owner.hold_until if owner.owner is None else None
        state = owner.state
        if state is AgentState.AWAITING_HELLO:
            return owner.hello_deadline
        if state is not AgentState.READY:
            return None
        if owner.pong_deadline is not None:
            return min(owner.pong_deadline, owner.ping_at)
        return owner.ping_at

    def _keepalive(self, link: AgentLink, now: float, actions: list[HubAction]) -> None:
        if link.state is AgentState.AWAITING_HELLO:
            link.hello_deadline = None
            actions.append(Close(link.peer, CloseCode.POLICY_VIOLATION, "no HELLO in time"))
            return
        if link.pong_deadline is not None and now >= link.pong_deadline:
            link.pong_deadline = None
            link.ping_at = float("inf")
            self._observe("pong_timeout", conn=link.connection_id, session=link.session_id)
            link.hub_closed = True
            actions.append(Close(link.peer, CloseCode.GOING_AWAY, "no PONG in time"))
            return
        if now >= link.ping_at:
            link.ping_id = f"p{next(self._ids):x}"
            link.ping_at = now + self.config.ping_interval
            link.pong_deadline = now + self.config.pong_timeout
            actions.append(Send(link.peer, self._frame(MessageType.PING, Empty(), link.ping_id)))
        self.timers.arm(link)

    def _hold_expired(self, target: Target, actions: list[HubAction]) -> None:
        """The lost agent did not come back in time: give up what was held."""
        target.hold_until = None
        target.reserved_for = None
        target.restoring = False
        self._observe("hold_expired", session=target.key, held=len(target.queue))
        self._drain_queue(target, actions)

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
            link.state = AgentState.DETACHED
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
            self._observe(
                "refused", conn=link.connection_id, code=answer.code, reason=answer.reason
            )
            return actions
        actions = []
        target = self._claim(link, actions)
        if target is None:
            return actions
        link.target = target
        link.version = answer.version
        link.granted = frozenset(answer.ack.granted_capabilities)
        link.capacity = answer.ack.max_concurrent
        link.state = AgentState.READY
        link.hello_deadline = None
        link.ping_at = self.clock.monotonic() + self.config.ping_interval
        self.timers.arm(link)
        actions.append(Send(link.peer, self._frame(MessageType.HELLO_ACK, answer.ack, envelope.id)))
        self._observe(
            "ack",
            conn=link.connection_id,
            session=link.session_id,
            machine=link.machine_id,
            control=link.session_id is None,
        )
        if target.kind == "session":
            target.machine_id = link.machine_id
            target.hold_until = None
            target.restoring = False
        self._pump(target, actions)
        return actions

    def _claim(self, link: AgentLink, actions: list[HubAction]) -> Target | None:
        """Make `link` the owner of its target, or refuse it (None)."""
        if link.session_id is None:
            target = self._machine(link.user, link.machine_id)
            old = target.owner
            if old is not None:
                # A newer control connection of the same machine replaces the old.
                reason = json.dumps(
                    {"error": "SESSION_TAKEN_OVER", "detail": "newer control connection"},
                    separators=(",", ":"),
                )
                actions.append(Close(old.peer, CloseCode.SESSION_TAKEN_OVER, reason))
                old.state = AgentState.DETACHED
                old.hub_closed = True
                self._fail_routes(old, actions)
                self._observe(
                    "takeover",
                    machine=link.machine_id,
                    old=old.connection_id,
                    new=link.connection_id,
                    control=True,
                    silent=False,
                )
            target.owner = link
            return target
        target = self._session(link.session_id, link.user)
        old = target.owner
        holder = old.machine_id if old is not None else self._reservation(target)
        decision = decide(self.config.ownership, holder, link.machine_id)
        if decision.verdict is Verdict.REJECT:
            link.state = AgentState.DETACHED
            reason = json.dumps(
                {"error": "SESSION_TAKEN_OVER", "detail": "owned by another machine"},
                separators=(",", ":"),
            )
            actions.append(Close(link.peer, CloseCode.SESSION_TAKEN_OVER, reason))
            self._observe(
                "takeover_rejected",
                conn=link.connection_id,
                session=target.key,
                machine=link.machine_id,
                owner=old.connection_id if old is not None else None,
                reserved_for=holder if old is None else None,
            )
            return None
        if old is not None:
            if decision.verdict is Verdict.TAKEOVER:
                if decision.revoke_old:
                    revoked = SessionRevoked(
                        reason="another_shim_connected", new_shim_machine_id=link.machine_id
                    )
                    actions.append(
                        Send(old.peer, self._frame(MessageType.SESSION_REVOKED, revoked))
                    )
                reason = json.dumps(
                    {"error": "SESSION_TAKEN_OVER", "new_shim_machine_id": link.machine_id[:60]},
                    separators=(",", ":"),
                )
                actions.append(Close(old.peer, CloseCode.SESSION_TAKEN_OVER, reason))
                old.state = AgentState.DETACHED
                old.hub_closed = True
                # What the old connection held goes to the new owner when safe.
                self._requeue_or_fail(old, target, actions)
            self._observe(
                "takeover",
                session=target.key,
                old=old.connection_id,
                new=link.connection_id,
                machine=link.machine_id,
                silent=decision.verdict is Verdict.REPLACE_SILENTLY,
            )
        target.owner = link
        target.reserved_for = None
        return target

    def _reservation(self, target: Target) -> str | None:
        """The machine a dropped session is still reserved for, if any."""
        if target.reserved_for is None or target.hold_until is None:
            return None
        if self.clock.monotonic() >= target.hold_until:
            return None
        return target.reserved_for

    # === internals: targets ================================================

    def _session(self, session_id: str, user: str) -> Target:
        target = self.sessions.get(session_id)
        if target is None:
            target = self.sessions[session_id] = Target(session_id, "session", user)
        return target

    def _machine(self, user: str, machine_id: str) -> Target:
        key = (user, machine_id)
        target = self.machines.get(key)
        if target is None:
            target = self.machines[key] = Target(machine_id, "machine", user)
        return target

    def _session_allowed(self, user: str, envelope: Envelope) -> bool:
        """Control requests name a session; it must be one the user may use."""
        try:
            session_id = _session_ref.decode(envelope.payload).session_id
        except msgspec.MsgspecError:
            return True  # the agent answers INVALID_MESSAGE with the details
        return not session_id or self._authority(user, session_id)

    def _holding(self, target: Target, actions: list[HubAction]) -> bool:
        """Whether requests for an agent-less session are held (and maybe
        start a transparent restore so that they are)."""
        now = self.clock.monotonic()
        if target.hold_until is not None and now < target.hold_until:
            return True
        if not self.config.auto_restore or target.root_grant is None or target.restoring:
            return target.restoring
        control = self.machines.get((target.user, target.machine_id or ""))
        if control is None or control.owner is None or control.owner.state is not AgentState.READY:
            return False
        restore = RestoreSession(session_id=target.key, root_grant=target.root_grant)
        envelope = Envelope(
            type=MessageType.RESTORE_SESSION,
            id=None,
            payload=msgspec.Raw(msgspec.json.encode(restore)),
        )
        route = Route(None, target.key, MessageType.RESTORE_SESSION, envelope)
        target.restoring = True
        target.hold_until = now + self.config.retry_window
        self.timers.arm(target)
        self._observe("auto_restore", session=target.key, machine=target.machine_id)
        if control.owner.free_slots > 0 and not control.queue:
            actions.append(self._issue(control.owner, route))
        else:
            control.queue.append(route)
        return True

    # === internals: relay ==================================================

    def _enqueue(self, target: Target, route: Route) -> list[HubAction]:
        client = route.client
        assert client is not None
        if len(target.queue) >= self.config.queue_limit:
            error = ProtocolError(
                ErrorCode.SHIM_OVERLOADED,
                f"agent has no free slot and {self.config.queue_limit} requests are queued",
            )
            return [Send(client.peer, self._error_frame(route.client_id, error))]
        client.inflight[route.client_id] = route
        target.queue.append(route)
        return _NO_ACTIONS

    def _issue(self, owner: AgentLink, route: Route) -> Send:
        hub_id = route.client_id if self._shared_ids else f"h{next(self._ids)}"
        route.hub_id = hub_id
        owner.routes[hub_id] = route
        return Send(owner.peer, reframe(route.envelope, hub_id, owner.version, self.clock.time))

    def _pump(self, target: Target, actions: list[HubAction]) -> None:
        """Issue queued requests while the owner has free slots."""
        owner = target.owner
        queue = target.queue
        while queue and owner is not None and owner.free_slots > 0:
            route = queue.popleft()
            if route.attempts:
                self._observe("retry", session=target.key, kind=route.kind, attempt=route.attempts)
            actions.append(self._issue(owner, route))

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
            log.error("agent %s sent version %s; closing", link.connection_id, frame_version)
            return [Close(link.peer, CloseCode.PROTOCOL_VERSION_MISMATCH, "frame major mismatch")]
        routes = link.routes
        route = routes.get(envelope.id) if envelope.id else None  # type: ignore[arg-type]
        if route is None:
            return self._agent_unsolicited(link, envelope)
        kind = envelope.type
        terminal = kind not in _STREAMING
        actions: list[HubAction] = []
        if terminal:
            del routes[envelope.id]  # type: ignore[arg-type]
            free = envelope.pending_capacity
            # The agent's in-flight count is at most ours, so free + ours
            # bounds its limit from above: never believe more than that.
            if free is not None and free + len(routes) < link.capacity:
                link.capacity = free + len(routes)
            if kind == _ERROR and self._refused_unrun(link, route, envelope, actions):
                return actions
        client = route.client
        if client is None:
            self._hub_answer(link, route, envelope, actions)
        elif not client.closed:
            if terminal:
                client.inflight.pop(route.client_id, None)
            data = reframe(envelope, route.client_id, link.version, self.clock.time)
            actions.append(Send(client.peer, data))
        if terminal:
            if link.session_id is None:
                self._learn_grant(link, kind, envelope)
            target = link.target
            if target is not None and target.queue and link.state is _READY:
                self._pump(target, actions)
        return actions

    def _refused_unrun(
        self, link: AgentLink, route: Route, envelope: Envelope, actions: list[HubAction]
    ) -> bool:
        """SHIM_OVERLOADED means the agent ran nothing: queue it again, first."""
        try:
            code = _error_code.decode(envelope.payload).code
        except msgspec.MsgspecError:
            return False
        if code != ErrorCode.SHIM_OVERLOADED:
            return False
        target = link.target
        if target is None or route.attempts >= 8 or link.state is not AgentState.READY:
            return False
        route.attempts += 1
        link.capacity = max(len(link.routes), 1)
        target.queue.appendleft(route)
        self._observe("overloaded_requeue", conn=link.connection_id, kind=route.kind)
        self._pump(target, actions)
        return True

    def _hub_answer(
        self, link: AgentLink, route: Route, envelope: Envelope, actions: list[HubAction]
    ) -> None:
        """The answer to a request the hub itself sent (a transparent restore)."""
        target = self.sessions.get(route.client_id)
        if target is None:
            return
        target.restoring = False
        if envelope.type == MessageType.ERROR:
            self._observe("auto_restore_failed", session=target.key)
            if target.owner is None:
                target.hold_until = None
                self._drain_queue(target, actions)

    def _learn_grant(self, link: AgentLink, kind: str, envelope: Envelope) -> None:
        if kind not in (MessageType.SESSION_ATTACHED, MessageType.SESSION_RESTORED):
            return
        try:
            answer = _grant_answer.decode(envelope.payload)
        except msgspec.MsgspecError:
            return
        if not answer.session_id or not answer.root_grant:
            return
        self.remember_grant(link.user, answer.session_id, link.machine_id, answer.root_grant)
        if self._on_grant is not None:
            self._on_grant(answer.session_id, link.machine_id, answer.root_grant)

    def _agent_unsolicited(self, link: AgentLink, envelope: Envelope) -> list[HubAction]:
        kind = envelope.type
        if kind == MessageType.PONG:
            if envelope.id == link.ping_id:
                link.pong_deadline = None
                link.ping_id = None
                self.timers.arm(link)  # the next PING is now the earliest deadline
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
            if link.state is AgentState.READY and link.target is not None:
                self._pump(link.target, actions)
            return actions
        log.debug("agent %s sent unsolicited %s", link.connection_id, kind)
        return _NO_ACTIONS

    # === internals: failure ================================================

    def _requeue_or_fail(self, link: AgentLink, target: Target, actions: list[HubAction]) -> None:
        """A lost connection's requests: retry the harmless ones, report the rest."""
        if self._orphan:
            link.routes.clear()  # the orphan_on_disconnect defect: no answer, ever
            return
        retry: list[Route] = []
        for route in link.routes.values():
            client = route.client
            if client is None or client.closed:
                continue
            if can_retry(route, everything=self._retry_everything):
                retry.append(prepare_retry(route))
            else:
                self._answer_lost(route, actions)
        link.routes.clear()
        # Retried requests were issued before anything still queued: keep order.
        # They go out once a new owner has its HELLO_ACK (see _agent_hello).
        target.queue.extendleft(reversed(retry))

    def _fail_routes(self, link: AgentLink, actions: list[HubAction]) -> None:
        """Answer every request the agent held: it will never answer them now."""
        if self._orphan:
            link.routes.clear()  # the orphan_on_disconnect defect
            return
        for route in link.routes.values():
            self._answer_lost(route, actions)
        link.routes.clear()

    def _answer_lost(self, route: Route, actions: list[HubAction]) -> None:
        client = route.client
        if client is None or client.closed:
            return
        client.inflight.pop(route.client_id, None)
        idempotent = catalog.is_idempotent(route.kind)
        details = {"kind": route.kind, "idempotent": idempotent, "attempts": route.attempts + 1}
        if idempotent:
            error = ProtocolError(
                ExtensionCode.AGENT_DISCONNECTED,
                f"the agent disconnected with {route.kind} in flight",
                details=details,
            )
        else:
            self._observe("outcome_unknown", session=client.target.key, kind=route.kind)
            error = ProtocolError(
                ExtensionCode.OUTCOME_UNKNOWN,
                f"the agent disconnected with {route.kind} in flight; it may or may not "
                "have run, and it is not retried",
                details=details,
            )
        actions.append(Send(client.peer, self._error_frame(route.client_id, error)))

    def _drain_queue(self, target: Target, actions: list[HubAction]) -> None:
        while target.queue:
            route = target.queue.popleft()
            client = route.client
            if client is None or client.closed:
                continue
            if route.attempts:
                self._answer_lost(route, actions)
                continue
            client.inflight.pop(route.client_id, None)
            error = ProtocolError(
                ExtensionCode.AGENT_NOT_CONNECTED,
                f"no agent served {target.kind} {target.key} in time; {route.kind} was not sent",
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


def _not_relayable(envelope: Envelope, target_kind: str) -> ProtocolError:
    try:
        MessageType(envelope.type)
    except ValueError:
        return ProtocolError(
            ExtensionCode.UNKNOWN_MESSAGE_TYPE, f"unknown message type {envelope.type!r}"
        )
    where = "a session" if target_kind == "session" else "a machine's control connection"
    return ProtocolError(
        ExtensionCode.MESSAGE_NOT_ALLOWED,
        f"{envelope.type} is not a request a client may send to {where}",
    )
