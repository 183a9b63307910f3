"""The hub as a sans-I/O state machine: agents, sessions, machines, relay.

Drivers (the aiohttp server, the simulator) report connections, frames and
the clock; the core answers with actions (`hub/actions.py`) and never touches
a socket, a database or a log: journal events come back as `Record`, durable
facts as `Persist`, and the one question only the store can answer (may this
user address that session?) as `Authorize`, which the driver answers with
`authorized`. The relay path decodes only the envelope (type, id, version)
and copies the payload bytes through untouched, rewriting the id so that
answers return to the right client under the client's own id, and stamping
the version negotiated with the agent.

Beyond relaying it owns: the handshake, session ownership and revocation, the
presence registry of machine control connections, capacity-aware issuance
with a bounded queue per target, a deadline on every request (so that no
request holds a slot forever, whatever the agent does), bounded back-off for
requests the agent refused, keepalive, the retry layer for requests that die
with a connection, and transparent restore of idle-stopped sessions.

Agent connections move through the table in `hub/agent_states.py` only.
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import msgspec

from tetherbed.hub.actions import (
    NO_ACTIONS,
    Actions,
    Authorize,
    Close,
    HubAction,
    Persist,
    Record,
    RootGrant,
    Send,
)
from tetherbed.hub.agent_states import AgentEvent, AgentState, advance
from tetherbed.hub.config import HubConfig
from tetherbed.hub.handshake import Accepted, answer_hello
from tetherbed.hub.links import NEVER, AgentLink, ClientLink, Route, Target
from tetherbed.hub.ownership import Verdict, decide
from tetherbed.hub.request_policy import answer_budget, capacity_from, overload_delay
from tetherbed.hub.retry import can_retry, prepare_retry
from tetherbed.hub.timers import Timers
from tetherbed.hub.unknown_field_crash import crash_on_unknown_field
from tetherbed.runtime.clock import Clock
from tetherbed.wire import catalog, serial_io
from tetherbed.wire.codes import CloseCode, ErrorCode, ExtensionCode
from tetherbed.wire.envelope import (
    Envelope,
    decode_envelope,
    decode_payload,
    encode_message,
    reframe,
)
from tetherbed.wire.errors import ProtocolError, WireError
from tetherbed.wire.hub_api import SESSION_INFO_REQUEST, SESSION_INFO_RESPONSE, SessionInfo
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.messages import (
    Capability,
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

# Plain constants for the hot path (enum attribute lookups cost more).
_READY = AgentState.READY
_ERROR = str(MessageType.ERROR)
_EXECUTE = str(MessageType.EXECUTE_COMMAND)
_STREAMING = frozenset(str(kind) for kind in catalog.STREAMING_RESPONSES)
_ANSWERS = {
    str(kind): answers
    for kind in (*catalog.DATA_REQUESTS, *catalog.CONTROL_REQUESTS)
    if (answers := catalog.allowed_answers(kind)) is not None
}
#: Refusals that mean "busy, nothing ran": sent again after a back-off (the
#: spec's auto-retry layer: "transient LOCAL_LLM_BUSY / SHIM_OVERLOADED").
_REFUSED_BUSY = frozenset({str(ErrorCode.SHIM_OVERLOADED), str(ErrorCode.LOCAL_LLM_BUSY)})
_ANSWERS.update({kind: frozenset({answer, _ERROR}) for kind, answer in serial_io.ANSWERS.items()})
#: Late answers remembered per agent connection, to tell them from strays.
_ABANDONED_KEPT = 1024


class _SessionRef(msgspec.Struct):
    session_id: str = ""


class _ModelRef(msgspec.Struct):
    model: str = ""


class _ErrorCode(msgspec.Struct):
    code: str = ""


class _GrantAnswer(msgspec.Struct):
    session_id: str = ""
    root_grant: str = ""


_session_ref = msgspec.json.Decoder(_SessionRef)
_model_ref = msgspec.json.Decoder(_ModelRef)
_LOCAL_LLM = str(MessageType.LOCAL_LLM_COMPLETION)
_grant_answer = msgspec.json.Decoder(_GrantAnswer)
_error_code = msgspec.json.Decoder(_ErrorCode)


class HubCore:
    def __init__(self, config: HubConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        #: (user, session id) → session target. Session ids are names within
        #: a user: two users' sessions of the same id are two sessions, so an
        #: agent token learns nothing about anyone else's.
        self.sessions: dict[tuple[str, str], Target] = {}
        #: The presence registry: (user, machine_id) → control connection target.
        self.machines: dict[tuple[str, str], Target] = {}
        #: Live agent connections, in connection order (a dict, so that every
        #: walk over them — shutdown, metrics — is deterministic).
        self.agents: dict[AgentLink, None] = {}
        self._ids = itertools.count(1)
        #: Authorize tickets the driver has not answered yet.
        self._authorizing: dict[int, Route] = {}
        self.timers: Timers[AgentLink | Target] = Timers(self._due)
        defects = config.defects
        self._retry_everything = "retry_non_idempotent" in defects
        self._orphan = "orphan_on_disconnect" in defects
        self._shared_ids = "shared_ids" in defects
        self._no_ping = "no_ping" in defects
        self._ignore_capacity = "ignore_capacity" in defects
        self._crash_on_unknown = "crash_on_unknown_field" in defects
        self._llm_without_models = "llm_without_models" in defects
        self._no_deadline = "no_request_deadline" in defects
        self._takeover_unlabelled = "takeover_unlabelled" in defects
        self._enforce_revocation = "revocation_unenforced" not in defects
        self._evict_after_drain = "evict_after_drain" in defects
        self._reissue_unlabelled = "reissue_unlabelled" in defects
        self._request_timeout = config.request_timeout
        # Bound once: the relay path reads the clock per request.
        self._monotonic = clock.monotonic

    # === agents ============================================================

    def agent_opened(
        self, peer: Any, *, user: str, session_id: str | None
    ) -> tuple[AgentLink, Actions]:
        """An agent's upgrade was authenticated; it must now send HELLO."""
        link = AgentLink(peer, user, session_id, connection_id=f"c{next(self._ids):x}")
        link.connected_at = self.clock.monotonic()
        link.hello_deadline = link.connected_at + self.config.hello_timeout
        self.timers.arm(link)
        self.agents[link] = None
        return link, (
            Record("connect", {"conn": link.connection_id, "session": session_id, "user": user}),
        )

    def agent_frame(self, link: AgentLink, data: bytes) -> Actions:
        state = link.state
        if state is _READY or state is AgentState.DETACHED:
            return self._agent_answer(link, data)
        if state is AgentState.AWAITING_HELLO:
            return self._agent_hello(link, data)
        return NO_ACTIONS

    def agent_closed(self, link: AgentLink, code: int | None = None) -> Actions:
        """The agent's socket is gone: retry or fail what it held."""
        if link.state is AgentState.CLOSED:
            return NO_ACTIONS
        target = link.target
        was_owner = target is not None and target.owner is link
        advance(link, AgentEvent.SOCKET_CLOSED)
        self.agents.pop(link, None)
        actions: list[HubAction] = [
            Record(
                "disconnect",
                {
                    "conn": link.connection_id,
                    "session": link.session_id,
                    "machine": link.machine_id,
                    "code": code,
                },
            )
        ]
        if was_owner:
            assert target is not None
            target.owner = None
            self._undefer_all(target)
            # A clean close by the agent itself is an explicit disconnect and
            # releases the session; anything else may be a laptop going to
            # sleep or a network blip, so the session stays reserved for that
            # machine and what can be retried is held for it.
            explicit = code == CloseCode.NORMAL and not link.hub_closed
            if target.is_session and not explicit and not target.revoked:
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

    def client_opened(self, peer: Any, *, user: str, session_id: str) -> tuple[ClientLink, Actions]:
        client = ClientLink(peer, user, self._session(session_id, user))
        return client, (Record("client_connect", {"session": session_id, "user": user}),)

    def machine_client_opened(
        self, peer: Any, *, user: str, machine_id: str
    ) -> tuple[ClientLink, Actions]:
        """A client of the machine's control connection (browse, attach, ...)."""
        client = ClientLink(peer, user, self._machine(user, machine_id))
        return client, (Record("client_connect", {"machine": machine_id, "user": user}),)

    def client_frame(self, client: ClientLink, data: bytes) -> Actions:
        """Relay one client request (or answer it with an error).

        This and `_agent_answer` are the relay's hot path: the common case
        runs first and touches as little as possible.
        """
        if self._crash_on_unknown:  # a planted defect, never in normal use
            crash_on_unknown_field(data)
        try:
            envelope = decode_envelope(data)
        except WireError as exc:
            return (Send(client.peer, self._error_frame(exc.request_id, exc)),)
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
            and (owner.llm_models or envelope.type != _LOCAL_LLM)
        ):
            route = Route(client, request_id, envelope.type, envelope)
            client.inflight[request_id] = route
            return (self._issue(owner, route),)
        return self._client_frame_slow(client, envelope)

    def _client_frame_slow(self, client: ClientLink, envelope: Envelope) -> Actions:
        request_id = envelope.id
        kind = envelope.type
        target = client.target
        if not request_id:
            error = ProtocolError(ExtensionCode.INVALID_MESSAGE, "request has no id")
            return (Send(client.peer, self._error_frame(None, error)),)
        hub_api = kind == SESSION_INFO_REQUEST and target.is_session
        if kind not in target.allowed and not hub_api:
            error = _extension_refusal(target, kind) if kind in serial_io.REQUESTS else None
            if error is None and kind not in serial_io.REQUESTS:
                error = _not_relayable(envelope, target.kind)
            if error is not None:
                return (Send(client.peer, self._error_frame(request_id, error)),)
        owner = target.owner
        if kind == _LOCAL_LLM and target.is_session and owner is not None and not owner.llm_models:
            return (Send(client.peer, self._error_frame(request_id, _llm_unavailable(envelope))),)
        if request_id in client.inflight:
            error = ProtocolError(
                ExtensionCode.DUPLICATE_REQUEST_ID,
                f"request id {request_id!r} is already in flight on this connection",
            )
            return (Send(client.peer, self._error_frame(request_id, error)),)
        if target.revoked:
            return (Send(client.peer, self._error_frame(request_id, _revoked(target))),)
        route = Route(client, request_id, kind, envelope)
        if not target.is_session:
            named = _named_session(envelope)
            if named:
                ticket = next(self._ids)
                self._authorizing[ticket] = route
                client.inflight[request_id] = route
                return (Authorize(ticket, client.user, named),)
        return self._route(client, route)

    def authorized(self, ticket: int, allowed: bool) -> Actions:
        """The driver's answer to `Authorize`: False means the session is revoked."""
        route = self._authorizing.pop(ticket, None)
        if route is None or route.client is None or route.client.closed:
            return NO_ACTIONS
        client = route.client
        if not allowed:
            client.inflight.pop(route.client_id, None)
            error = ProtocolError(
                ExtensionCode.SESSION_REVOKED, "the request names a session that was revoked"
            )
            return (Send(client.peer, self._error_frame(route.client_id, error)),)
        client.inflight.pop(route.client_id, None)
        return self._route(client, route)

    def _route(self, client: ClientLink, route: Route) -> Actions:
        """Issue `route` now, queue it, hold it for a returning agent, or refuse it."""
        target = client.target
        owner = target.owner
        if owner is not None and owner.state is _READY:
            if route.kind == SESSION_INFO_REQUEST:
                return (self._session_info(client, route.client_id, owner),)
            if owner.capacity > len(owner.routes) and not target.queue:
                client.inflight[route.client_id] = route
                return (self._issue(owner, route),)
            return self._enqueue(target, route)
        actions: list[HubAction] = []
        if target.is_session and self._holding(target, actions):
            actions.extend(self._enqueue(target, route))
            return actions
        if route.kind == SESSION_INFO_REQUEST:
            return (self._session_info(client, route.client_id, None),)
        error = ProtocolError(
            ExtensionCode.AGENT_NOT_CONNECTED, f"{target.kind} {target.key} has no connected agent"
        )
        return (Send(client.peer, self._error_frame(route.client_id, error)),)

    def client_closed(self, client: ClientLink) -> Actions:
        """Answers still to come for this client will be dropped on arrival."""
        client.closed = True
        target = client.target
        if target.queue:
            target.queue = type(target.queue)(r for r in target.queue if r.client is not client)
        if target.deferred:
            target.deferred = [r for r in target.deferred if r.client is not client]
        client.inflight.clear()
        return NO_ACTIONS

    # === administration ====================================================

    def revoke(self, user: str, session_id: str, reason: str = "user_revoked") -> Actions:
        """The user revoked the session: SESSION_REVOKED then close 4428 to its
        agent; from now on no agent is admitted and no request relayed."""
        target = self._session(session_id, user)
        target.revoked = True
        target.hold_until = None
        target.reserved_for = None
        target.root_grant = None  # a revoked session is not restored behind the user's back
        owner = target.owner
        actions: list[HubAction] = []
        if owner is not None:
            actions.append(Send(owner.peer, self._revocation(reason)))
            actions.append(
                Close(owner.peer, CloseCode.SESSION_REVOKED, json.dumps({"reason": reason}))
            )
            actions.append(
                Record(
                    "revoke", {"conn": owner.connection_id, "session": session_id, "reason": reason}
                )
            )
            target.owner = None
            advance(owner, AgentEvent.EVICTED)
            owner.hub_closed = True
            self._fail_routes(owner, actions)
        self._undefer_all(target)
        self._drain_queue(target, actions)
        return actions

    def shutdown(self) -> Actions:
        """The hub is going down: every agent gets 4429."""
        actions: list[HubAction] = []
        for link in list(self.agents):
            actions.append(Close(link.peer, CloseCode.PLATFORM_SHUTDOWN, "platform shutting down"))
            actions.append(
                Record("shutdown_close", {"conn": link.connection_id, "session": link.session_id})
            )
        return actions

    def remember_grant(self, user: str, session_id: str, machine_id: str, root_grant: str) -> None:
        """The root grant a session was attached with, for transparent restore
        (learnt from SESSION_ATTACHED/RESTORED, or from durable state)."""
        target = self._session(session_id, user)
        target.machine_id = machine_id
        target.root_grant = root_grant

    def session_of(self, user: str, session_id: str) -> Target | None:
        return self.sessions.get((user, session_id))

    # === timers ============================================================

    def next_deadline(self) -> float | None:
        return self.timers.next_deadline()

    def on_timer(self) -> Actions:
        now = self.clock.monotonic()
        actions: list[HubAction] = []
        for owner in list(self.timers.expired(now)):
            if isinstance(owner, Target):
                self._target_timer(owner, now, actions)
            else:
                self._link_timer(owner, now, actions)
        return actions

    def _due(self, owner: AgentLink | Target) -> float | None:
        """The owner's next deadline. Deadlines are only ever moved earlier
        between firings (a stale early one just fires and is recomputed), so
        that the relay path almost never pushes onto the timer heap."""
        if isinstance(owner, Target):
            due = owner.queue_deadline
            due = min(due, owner.deferred_at)
            if owner.owner is None and owner.hold_until is not None and owner.hold_until < due:
                due = owner.hold_until
            return None if due == NEVER else due
        state = owner.state
        if state is AgentState.AWAITING_HELLO:
            return owner.hello_deadline
        if state is AgentState.CLOSED:
            return None
        due = owner.expiry_at
        if state is _READY:
            due = min(due, owner.ping_at)
            if owner.pong_deadline is not None and owner.pong_deadline < due:
                due = owner.pong_deadline
        return None if due == NEVER else due

    def _link_timer(self, link: AgentLink, now: float, actions: list[HubAction]) -> None:
        if link.state is AgentState.AWAITING_HELLO:
            link.hello_deadline = None
            advance(link, AgentEvent.HELLO_TIMEOUT)
            actions.append(Close(link.peer, CloseCode.POLICY_VIOLATION, "no HELLO in time"))
            return
        if now >= link.expiry_at:
            self._expire_routes(link, now, actions)
        if link.state is _READY:
            self._keepalive(link, now, actions)
        self.timers.arm(link)

    def _keepalive(self, link: AgentLink, now: float, actions: list[HubAction]) -> None:
        if link.pong_deadline is not None and now >= link.pong_deadline:
            link.pong_deadline = None
            link.ping_at = NEVER
            actions.append(
                Record("pong_timeout", {"conn": link.connection_id, "session": link.session_id})
            )
            link.hub_closed = True
            actions.append(Close(link.peer, CloseCode.GOING_AWAY, "no PONG in time"))
            return
        if now >= link.ping_at:
            link.ping_id = f"p{next(self._ids):x}"
            link.ping_at = now + self.config.ping_interval
            link.pong_deadline = now + self.config.pong_timeout
            actions.append(Send(link.peer, self._frame(MessageType.PING, Empty(), link.ping_id)))

    def _target_timer(self, target: Target, now: float, actions: list[HubAction]) -> None:
        if target.owner is None and target.hold_until is not None and now >= target.hold_until:
            self._hold_expired(target, actions)
        if now >= target.deferred_at:
            self._undefer(target, now)
        if now >= target.queue_deadline:
            if target.owner is not None:
                self._expire_queue(target, now, actions)
            else:  # while no agent owns it, the hold bounds the wait
                target.queue_deadline = NEVER
        owner = target.owner
        if owner is not None and owner.state is _READY and target.queue:
            self._pump(target, actions)
        self.timers.arm(target)

    def _hold_expired(self, target: Target, actions: list[HubAction]) -> None:
        """The lost agent did not come back in time: give up what was held."""
        target.hold_until = None
        target.reserved_for = None
        target.restoring = False
        actions.append(Record("hold_expired", {"session": target.key, "held": len(target.queue)}))
        self._undefer_all(target)
        self._drain_queue(target, actions)

    # === internals: handshake ==============================================

    def _agent_hello(self, link: AgentLink, data: bytes) -> Actions:
        if self._crash_on_unknown:  # a planted defect, never in normal use
            crash_on_unknown_field(data)
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
            advance(link, AgentEvent.REFUSED)
            return (
                Send(link.peer, self._error_frame(exc.request_id, exc)),
                Close(link.peer, CloseCode.PROTOCOL_ERROR, exc.code),
            )
        assert isinstance(hello, Hello)
        link.machine_id = hello.machine_id
        link.allowed_root = hello.allowed_root if link.session_id is not None else None
        actions: list[HubAction] = [
            Record(
                "hello",
                {
                    "conn": link.connection_id,
                    "session": link.session_id,
                    "machine": hello.machine_id,
                    "version": hello.protocol_version,
                },
            )
        ]
        answer = answer_hello(
            hello, config=self.config, session_id=link.session_id, connection_id=link.connection_id
        )
        if not isinstance(answer, Accepted):
            advance(link, AgentEvent.REFUSED)
            if answer.error is not None:
                actions.append(Send(link.peer, self._error_frame(envelope.id, answer.error)))
            actions.append(Close(link.peer, answer.code, answer.reason))
            actions.append(
                Record(
                    "refused",
                    {"conn": link.connection_id, "code": answer.code, "reason": answer.reason},
                )
            )
            return actions
        target = self._claim(link, actions)
        if target is None:
            return actions
        link.target = target
        link.version = answer.version
        link.granted = frozenset(answer.ack.granted_capabilities)
        if Capability.LOCAL_LLM in link.granted:
            link.llm_models = tuple(hello.local_llm_models or ())
        if self._llm_without_models and not link.llm_models:  # a planted defect
            link.llm_models = ("",)  # any agent looks as if it had a model
        link.capacity = link.limit = answer.ack.max_concurrent
        advance(link, AgentEvent.HELLO_ACCEPTED)
        link.hello_deadline = None
        now = self.clock.monotonic()
        link.ping_at = NEVER if self._no_ping else now + self.config.ping_interval
        self.timers.arm(link)
        actions.append(Send(link.peer, self._frame(MessageType.HELLO_ACK, answer.ack, envelope.id)))
        actions.append(
            Record(
                "ack",
                {
                    "conn": link.connection_id,
                    "session": link.session_id,
                    "machine": link.machine_id,
                    "control": link.session_id is None,
                },
            )
        )
        if target.is_session:
            target.machine_id = link.machine_id
            target.hold_until = None
            target.restoring = False
        # Held requests waited for an agent, not for a slot: their wait for
        # a slot starts now.
        for route in target.queue:
            route.queued_at = now
        target.queue_deadline = now + self._request_timeout if target.queue else NEVER
        self.timers.arm(target)
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
                advance(old, AgentEvent.EVICTED)
                old.hub_closed = True
                self._fail_routes(old, actions)
                actions.append(
                    Record(
                        "takeover",
                        {
                            "machine": link.machine_id,
                            "old": old.connection_id,
                            "new": link.connection_id,
                            "control": True,
                            "silent": False,
                        },
                    )
                )
            target.owner = link
            return target
        target = self._session(link.session_id, link.user)
        if target.revoked and self._enforce_revocation:
            # Admission refuses revoked sessions; this covers a revocation
            # between the upgrade and the HELLO.
            advance(link, AgentEvent.REFUSED)
            actions.append(Send(link.peer, self._revocation("user_revoked")))
            actions.append(
                Close(link.peer, CloseCode.SESSION_REVOKED, json.dumps({"reason": "user_revoked"}))
            )
            actions.append(
                Record(
                    "refused",
                    {"conn": link.connection_id, "code": 4428, "reason": "session revoked"},
                )
            )
            return None
        old = target.owner
        holder = old.machine_id if old is not None else self._reservation(target)
        decision = decide(self.config.ownership, holder, link.machine_id)
        if decision.verdict is Verdict.REJECT:
            advance(link, AgentEvent.REFUSED)
            reason = json.dumps(
                {"error": "SESSION_TAKEN_OVER", "detail": "owned by another machine"},
                separators=(",", ":"),
            )
            actions.append(Close(link.peer, CloseCode.SESSION_TAKEN_OVER, reason))
            actions.append(
                Record(
                    "takeover_rejected",
                    {
                        "conn": link.connection_id,
                        "session": target.key,
                        "machine": link.machine_id,
                        "owner": old.connection_id if old is not None else None,
                        "reserved_for": holder if old is None else None,
                    },
                )
            )
            return None
        if old is not None:
            if decision.verdict is Verdict.TAKEOVER and self._keeps_old(old):
                pass  # a planted defect: the old owner is neither told nor closed (yet)
            elif decision.verdict is Verdict.TAKEOVER:
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
                advance(old, AgentEvent.EVICTED)
                old.hub_closed = True
                # What the old connection held goes to the new owner when safe.
                self._undefer_all(target)
                self._requeue_or_fail(old, target, actions)
            actions.append(
                Record(
                    "takeover",
                    {
                        "session": target.key,
                        "old": old.connection_id,
                        "new": link.connection_id,
                        "machine": link.machine_id,
                        "silent": decision.verdict is Verdict.REPLACE_SILENTLY,
                    },
                )
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

    def _keeps_old(self, old: AgentLink) -> bool:
        """The takeover defects: `takeover_unlabelled` keeps the old owner's
        connection for good, `evict_after_drain` until what it holds is
        answered (a race: only a takeover with requests in flight shows it).
        Either way the journal says an ordinary takeover happened."""
        if self._takeover_unlabelled:
            return True
        if self._evict_after_drain and old.routes:
            old.evict_when_idle = True
            return True
        return False

    def _evict_if_drained(self, link: AgentLink, actions: list[HubAction]) -> None:
        """The `evict_after_drain` defect: the old owner's last answer is in,
        so now it hears of the takeover."""
        if not link.evict_when_idle or link.routes or link.state is not _READY:
            return
        link.evict_when_idle = False
        revoked = SessionRevoked(
            reason="another_shim_connected", new_shim_machine_id=link.machine_id
        )
        actions.append(Send(link.peer, self._frame(MessageType.SESSION_REVOKED, revoked)))
        reason = json.dumps({"error": "SESSION_TAKEN_OVER"}, separators=(",", ":"))
        actions.append(Close(link.peer, CloseCode.SESSION_TAKEN_OVER, reason))
        advance(link, AgentEvent.EVICTED)
        link.hub_closed = True

    # === internals: targets ================================================

    def _session(self, session_id: str, user: str) -> Target:
        key = (user, session_id)
        target = self.sessions.get(key)
        if target is None:
            target = self.sessions[key] = Target(session_id, "session", user)
        return target

    def _machine(self, user: str, machine_id: str) -> Target:
        key = (user, machine_id)
        target = self.machines.get(key)
        if target is None:
            target = self.machines[key] = Target(machine_id, "machine", user)
        return target

    def _holding(self, target: Target, actions: list[HubAction]) -> bool:
        """Whether requests for an agent-less session are held (and maybe
        start a transparent restore so that they are)."""
        now = self.clock.monotonic()
        if target.hold_until is not None and now < target.hold_until:
            return True
        if not self.config.auto_restore or target.root_grant is None or target.restoring:
            return target.restoring
        control = self.machines.get((target.user, target.machine_id or ""))
        if control is None or control.owner is None or control.owner.state is not _READY:
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
        actions.append(
            Record("auto_restore", {"session": target.key, "machine": target.machine_id})
        )
        if control.owner.free_slots > 0 and not control.queue:
            actions.append(self._issue(control.owner, route))
        else:
            self._append(control, route)
        return True

    def _session_info(self, client: ClientLink, request_id: str, owner: AgentLink | None) -> Send:
        info = SessionInfo(
            session_id=client.target.key,
            allowed_root=owner.allowed_root if owner is not None else None,
            machine_id=owner.machine_id if owner is not None else None,
            connection_id=owner.connection_id if owner is not None else None,
        )
        client.inflight.pop(request_id, None)
        return Send(
            client.peer,
            encode_message(
                SESSION_INFO_RESPONSE,
                request_id,
                info,
                ts=self.clock.time(),
                version=self.config.protocol_version,
            ),
        )

    # === internals: relay ==================================================

    def _enqueue(self, target: Target, route: Route) -> Actions:
        client = route.client
        assert client is not None
        if len(target.queue) >= self.config.queue_limit:
            error = ProtocolError(
                ErrorCode.SHIM_OVERLOADED,
                f"agent has no free slot and {self.config.queue_limit} requests are queued; "
                "not sent",
            )
            return (Send(client.peer, self._error_frame(route.client_id, error)),)
        client.inflight[route.client_id] = route
        self._append(target, route)
        return NO_ACTIONS

    def _append(self, target: Target, route: Route) -> None:
        now = self.clock.monotonic()
        route.queued_at = now
        target.queue.append(route)
        deadline = now + self._request_timeout
        if deadline < target.queue_deadline:
            target.queue_deadline = deadline
            self.timers.arm(target)

    def _issue(self, owner: AgentLink, route: Route) -> Send:
        """Send `route` to `owner` under a hub id, with the negotiated version."""
        hub_id = route.client_id if self._shared_ids else f"h{next(self._ids)}"
        data = reframe(route.envelope, hub_id, owner.version, self.clock.time)
        client = route.client
        if len(data) > FRAME_LIMIT_BYTES and client is not None:
            # Re-framing grew it (a shorter client id): refuse it here rather
            # than have the agent's transport close on it.
            client.inflight.pop(route.client_id, None)
            error = ProtocolError(
                ExtensionCode.FRAME_TOO_LARGE,
                f"{route.kind} would be {len(data)} bytes as relayed, over the "
                f"{FRAME_LIMIT_BYTES}-byte frame limit; not sent",
            )
            return Send(client.peer, self._error_frame(route.client_id, error))
        route.hub_id = hub_id
        owner.routes[hub_id] = route
        kind = route.kind
        budget = (
            self._request_timeout
            if kind != _EXECUTE
            else answer_budget(self.config, kind, route.envelope.payload)
        )
        deadline = route.deadline = self._monotonic() + budget
        if self._no_deadline:  # a planted defect: the slot leak of an unanswered request
            route.deadline = NEVER
            return Send(owner.peer, data)
        if deadline < owner.expiry_at:
            owner.expiry_at = deadline
            self.timers.arm(owner)
        return Send(owner.peer, data)

    def _pump(self, target: Target, actions: list[HubAction]) -> None:
        """Issue queued requests while the owner has free slots."""
        owner = target.owner
        queue = target.queue
        while queue and owner is not None and (owner.free_slots > 0 or self._ignore_capacity):
            route = queue.popleft()
            client = route.client
            if route.kind == SESSION_INFO_REQUEST and client is not None:
                actions.append(self._session_info(client, route.client_id, owner))
                continue
            if route.kind == _LOCAL_LLM and not owner.llm_models and client is not None:
                client.inflight.pop(route.client_id, None)
                error = _llm_unavailable(route.envelope)
                actions.append(Send(client.peer, self._error_frame(route.client_id, error)))
                continue
            if (route.attempts and not self._reissue_unlabelled) or route.refusals:
                actions.append(
                    Record(
                        "retry",
                        {
                            "session": target.key,
                            "kind": route.kind,
                            "attempt": route.attempts,
                            "refusals": route.refusals,
                        },
                    )
                )
            actions.append(self._issue(owner, route))

    def _agent_answer(self, link: AgentLink, data: bytes) -> Actions:
        try:
            envelope = decode_envelope(data)
        except WireError as exc:
            log.warning("agent %s sent a bad frame: %s", link.connection_id, exc)
            return NO_ACTIONS
        frame_version = envelope.version
        if (
            frame_version is not None
            and frame_version != link.version
            and not same_major(frame_version, ProtocolVersion.parse(link.version))
        ):
            log.error("agent %s sent version %s; closing", link.connection_id, frame_version)
            return (Close(link.peer, CloseCode.PROTOCOL_VERSION_MISMATCH, "frame major mismatch"),)
        routes = link.routes
        route = routes.get(envelope.id) if envelope.id else None  # type: ignore[arg-type]
        if route is None:
            return self._agent_unsolicited(link, envelope)
        kind = envelope.type
        allowed = _ANSWERS.get(route.kind)
        if allowed is not None and kind not in allowed:
            return self._wrong_answer(link, route, envelope)
        terminal = kind not in _STREAMING
        actions: list[HubAction] = []
        if terminal:
            del routes[envelope.id]  # type: ignore[arg-type]
            free = envelope.pending_capacity
            if free is not None:  # capacity_from, inline: this is the hot path
                estimate = free + len(routes)
                limit = link.limit
                link.capacity = estimate if estimate < limit else limit
            if kind == _ERROR and self._refused_unrun(link, route, envelope, actions):
                return actions
        else:
            route.deadline = self._monotonic() + self._request_timeout
            route.streamed = True
        client = route.client
        if client is None:
            self._hub_answer(link, route, envelope, actions)
        elif not client.closed:
            if terminal:
                client.inflight.pop(route.client_id, None)
            out = reframe(envelope, route.client_id, link.version, self.clock.time)
            if len(out) > FRAME_LIMIT_BYTES:
                out = self._error_frame(route.client_id, _answer_too_large(route, len(out)))
            actions.append(Send(client.peer, out))
        if terminal:
            if link.session_id is None:
                self._learn_grant(link, kind, envelope, actions)
            if link.evict_when_idle:
                self._evict_if_drained(link, actions)
                return actions
            target = link.target
            if target is not None and target.queue and link.state is _READY:
                self._pump(target, actions)
        return actions

    def _wrong_answer(self, link: AgentLink, route: Route, envelope: Envelope) -> Actions:
        """An answer its request does not allow: the client gets a typed error
        instead, and the request is over (the agent considers it answered)."""
        del link.routes[route.hub_id]
        free = envelope.pending_capacity
        if free is not None:
            link.capacity = capacity_from(link.limit, free, len(link.routes))
        actions: list[HubAction] = [
            Record(
                "wrong_answer",
                {"conn": link.connection_id, "request": route.kind, "answer": envelope.type},
            )
        ]
        client = route.client
        if client is None:
            self._hub_answer(link, route, envelope, actions, failed=True)
        elif not client.closed:
            client.inflight.pop(route.client_id, None)
            error = ProtocolError(
                ExtensionCode.UNEXPECTED_ANSWER_TYPE,
                f"the agent answered {route.kind} with {envelope.type}",
                details={"request": route.kind, "answer": envelope.type},
            )
            actions.append(Send(client.peer, self._error_frame(route.client_id, error)))
        target = link.target
        if target is not None and target.queue and link.state is _READY:
            self._pump(target, actions)
        return actions

    def _refused_unrun(
        self, link: AgentLink, route: Route, envelope: Envelope, actions: list[HubAction]
    ) -> bool:
        """SHIM_OVERLOADED (and LOCAL_LLM_BUSY) mean the agent ran nothing: send
        it again after a back-off, a bounded number of times, then let the client
        have the refusal."""
        try:
            code = _error_code.decode(envelope.payload).code
        except (msgspec.MsgspecError, RecursionError):
            return False
        if code not in _REFUSED_BUSY:
            return False
        target = link.target
        if target is None or link.state is not _READY:
            return False
        route.refusals += 1
        delay = overload_delay(self.config, route.refusals)
        if delay is None:
            actions.append(
                Record("overloaded_given_up", {"conn": link.connection_id, "kind": route.kind})
            )
            return False
        route.not_before = self.clock.monotonic() + delay
        target.deferred.append(route)
        if route.not_before < target.deferred_at:
            target.deferred_at = route.not_before
            self.timers.arm(target)
        actions.append(
            Record(
                "overloaded_requeue",
                {
                    "conn": link.connection_id,
                    "kind": route.kind,
                    "refusals": route.refusals,
                    "delay": delay,
                    "code": code,
                },
            )
        )
        return True

    def _undefer(self, target: Target, now: float) -> None:
        """Deferred requests whose back-off is over go to the front of the queue."""
        due = [r for r in target.deferred if r.not_before <= now]
        target.deferred = [r for r in target.deferred if r.not_before > now]
        target.deferred_at = min((r.not_before for r in target.deferred), default=NEVER)
        if due:
            target.queue_deadline = min(target.queue_deadline, now + self._request_timeout)
            for route in due:
                route.queued_at = now
            target.queue.extendleft(reversed(due))

    def _undefer_all(self, target: Target) -> None:
        """The agent is gone: deferred requests wait with the queue (they never ran)."""
        if target.deferred:
            target.queue.extendleft(reversed(target.deferred))
            target.deferred = []
            target.deferred_at = NEVER

    def _hub_answer(
        self,
        link: AgentLink,
        route: Route,
        envelope: Envelope | None,
        actions: list[HubAction],
        *,
        failed: bool = False,
    ) -> None:
        """The answer to a request the hub itself sent (a transparent restore)."""
        target = self.sessions.get((link.user, route.client_id))
        if target is None:
            return
        target.restoring = False
        if failed or envelope is None or envelope.type == MessageType.ERROR:
            actions.append(Record("auto_restore_failed", {"session": target.key}))
            if target.owner is None:
                target.hold_until = None
                self._undefer_all(target)
                self._drain_queue(target, actions)

    def _learn_grant(
        self, link: AgentLink, kind: str, envelope: Envelope, actions: list[HubAction]
    ) -> None:
        if kind not in (MessageType.SESSION_ATTACHED, MessageType.SESSION_RESTORED):
            return
        try:
            answer = _grant_answer.decode(envelope.payload)
        except (msgspec.MsgspecError, RecursionError):
            return
        if not answer.session_id or not answer.root_grant:
            return
        self.remember_grant(link.user, answer.session_id, link.machine_id, answer.root_grant)
        actions.append(
            Persist(RootGrant(link.user, answer.session_id, link.machine_id, answer.root_grant))
        )

    def _agent_unsolicited(self, link: AgentLink, envelope: Envelope) -> Actions:
        kind = envelope.type
        if kind == MessageType.PONG:
            if envelope.id == link.ping_id:
                link.pong_deadline = None
                link.ping_id = None
                self.timers.arm(link)  # the next PING is now the earliest deadline
            return NO_ACTIONS
        if kind == MessageType.STATUS:
            return self._status(link, envelope)
        actions: list[HubAction] = []
        late = link.abandoned.pop(envelope.id, None) if envelope.id else None
        if late is not None:
            # An answer after its deadline: the client was told already. Its
            # pending_capacity still says how busy the agent is.
            free = envelope.pending_capacity
            if free is not None:
                link.capacity = capacity_from(link.limit, free, len(link.routes))
            actions.append(
                Record(
                    "late_answer",
                    {"conn": link.connection_id, "kind": kind, "request": late, "id": envelope.id},
                )
            )
            target = link.target
            if target is not None and target.queue and link.state is _READY:
                self._pump(target, actions)
            return actions
        log.debug("agent %s sent unsolicited %s", link.connection_id, kind)
        return NO_ACTIONS

    def _status(self, link: AgentLink, envelope: Envelope) -> Actions:
        """STATUS is advisory: it sets the ceiling the agent itself reports."""
        try:
            status = decode_payload(envelope, MessageType.STATUS)
        except WireError:
            return NO_ACTIONS
        assert isinstance(status, Status)
        granted = self.config.max_concurrent
        if status.max_concurrent > 0:
            link.limit = min(status.max_concurrent, granted)
        free = envelope.pending_capacity
        if free is not None:
            link.capacity = capacity_from(link.limit, free, len(link.routes))
        else:
            link.capacity = link.limit
        actions: list[HubAction] = [
            Record(
                "status",
                {
                    "conn": link.connection_id,
                    "session": link.session_id,
                    "in_flight": status.in_flight,
                    "max_concurrent": status.max_concurrent,
                },
            )
        ]
        if link.state is _READY and link.target is not None:
            self._pump(link.target, actions)
        return actions

    # === internals: deadlines ==============================================

    def _expire_routes(self, link: AgentLink, now: float, actions: list[HubAction]) -> None:
        """Requests past their deadline: the client hears so, the slot is free."""
        earliest = NEVER
        for hub_id, route in list(link.routes.items()):
            if route.deadline <= now:
                del link.routes[hub_id]
                link.abandoned[hub_id] = route.kind
                if len(link.abandoned) > _ABANDONED_KEPT:
                    del link.abandoned[next(iter(link.abandoned))]
                self._answer_timeout(link, route, actions)
            elif route.deadline < earliest:
                earliest = route.deadline
        link.expiry_at = earliest
        if link.evict_when_idle:
            self._evict_if_drained(link, actions)
            return
        target = link.target
        if target is not None and target.queue and link.state is _READY:
            self._pump(target, actions)

    def _answer_timeout(self, link: AgentLink, route: Route, actions: list[HubAction]) -> None:
        waited = round(self._budget_of(route), 3)
        actions.append(
            Record(
                "request_timeout",
                {"conn": link.connection_id, "kind": route.kind, "deadline": waited},
            )
        )
        client = route.client
        if client is None:
            self._hub_answer(link, route, None, actions, failed=True)
            return
        if client.closed:
            return
        client.inflight.pop(route.client_id, None)
        idempotent = catalog.is_idempotent(route.kind)
        error = ProtocolError(
            ExtensionCode.AGENT_TIMEOUT,
            f"the agent did not answer {route.kind} within {waited:g} s; "
            + ("it may still run" if not idempotent else "it is safe to ask again"),
            details={"kind": route.kind, "idempotent": idempotent, "deadline_seconds": waited},
        )
        actions.append(Send(client.peer, self._error_frame(route.client_id, error)))

    def _budget_of(self, route: Route) -> float:
        if route.kind != _EXECUTE:
            return self._request_timeout
        return answer_budget(self.config, route.kind, route.envelope.payload)

    def _expire_queue(self, target: Target, now: float, actions: list[HubAction]) -> None:
        """Requests that waited `request_timeout` for a slot are answered: not sent."""
        timeout = self._request_timeout
        kept = type(target.queue)()
        for route in target.queue:
            # Compared as the deadline is computed (queued_at + timeout): `now -
            # timeout` can round below queued_at when the deadline is exactly
            # now, keeping the route with a deadline that fires again at once
            # (the timer spun forever; found by tetherbed explore).
            if route.queued_at + timeout > now:
                kept.append(route)
                continue
            client = route.client
            if client is None or client.closed:
                continue
            if route.may_have_run:
                self._answer_lost(route, actions)
                continue
            client.inflight.pop(route.client_id, None)
            error = ProtocolError(
                ErrorCode.SHIM_OVERLOADED,
                f"{route.kind} waited {self._request_timeout:g} s for a free slot on the "
                "agent; not sent",
            )
            actions.append(Send(client.peer, self._error_frame(route.client_id, error)))
        target.queue = kept
        target.queue_deadline = (
            min(r.queued_at for r in kept) + self._request_timeout if kept else NEVER
        )

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
            route.may_have_run = True
            everything = self._retry_everything or self._reissue_unlabelled
            if not route.streamed and can_retry(route, everything=everything):
                retry.append(prepare_retry(route, counter=self._reissue_unlabelled))
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
            route.may_have_run = True
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
            actions.append(
                Record("outcome_unknown", {"session": client.target.key, "kind": route.kind})
            )
            error = ProtocolError(
                ExtensionCode.OUTCOME_UNKNOWN,
                f"the agent disconnected with {route.kind} in flight; it may or may not "
                "have run, and it is not retried",
                details=details,
            )
        actions.append(Send(client.peer, self._error_frame(route.client_id, error)))

    def _drain_queue(self, target: Target, actions: list[HubAction]) -> None:
        """No agent will serve what waits: each request hears whether it may have run."""
        while target.queue:
            route = target.queue.popleft()
            client = route.client
            if client is None or client.closed:
                continue
            if route.may_have_run:
                self._answer_lost(route, actions)
                continue
            client.inflight.pop(route.client_id, None)
            if target.revoked:
                error = _revoked(target)
            else:
                error = ProtocolError(
                    ExtensionCode.AGENT_NOT_CONNECTED,
                    f"no agent served {target.kind} {target.key} in time; "
                    f"{route.kind} was not sent",
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

    def _revocation(self, reason: str) -> bytes:
        return self._frame(MessageType.SESSION_REVOKED, SessionRevoked(reason=reason))

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


def _named_session(envelope: Envelope) -> str:
    """The session a control request names ("" when none, or unreadable:
    the agent then answers INVALID_MESSAGE with the details)."""
    try:
        return _session_ref.decode(envelope.payload).session_id
    except (msgspec.MsgspecError, RecursionError):
        return ""


def _revoked(target: Target) -> ProtocolError:
    return ProtocolError(
        ExtensionCode.SESSION_REVOKED, f"session {target.key} was revoked; nothing is relayed"
    )


def _answer_too_large(route: Route, size: int) -> ProtocolError:
    return ProtocolError(
        ExtensionCode.FRAME_TOO_LARGE,
        f"the agent's answer to {route.kind} would be {size} bytes as relayed, over the "
        f"{FRAME_LIMIT_BYTES}-byte frame limit; read it in smaller ranges",
    )


def _llm_unavailable(envelope: Envelope) -> ProtocolError:
    """LOCAL_LLM_COMPLETION to an agent without local_llm or with no models: "the
    platform MUST treat local LLM routing as unavailable" — it is never relayed,
    and the caller learns it can fall back (MODEL_NOT_AVAILABLE, no models)."""
    try:
        model = _model_ref.decode(envelope.payload).model
    except (msgspec.MsgspecError, RecursionError):
        model = ""
    return ProtocolError(
        ErrorCode.MODEL_NOT_AVAILABLE,
        "local LLM routing is unavailable for this session: its agent advertises no "
        "local_llm models; fall back to cloud-side completion",
        details={"requested_model": model, "available_models": []},
    )


def _extension_refusal(target: Target, kind: str) -> ProtocolError | None:
    """Why a serial-extension request cannot go to this target's agent (None: it can).

    Only an agent that negotiated the extension may ever see its frames."""
    owner = target.owner
    if target.is_session and owner is not None and serial_io.CAPABILITY in owner.granted:
        return None
    where = f"session {target.key}" if target.is_session else "a machine's control connection"
    return ProtocolError(
        ErrorCode.CAPABILITY_NOT_GRANTED,
        f"{kind}: the agent serving {where} has not negotiated the serial I/O extension "
        f"({serial_io.CAPABILITY})",
        details={"capability": serial_io.CAPABILITY},
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
