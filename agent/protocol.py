"""The agent's side of one connection, as a sans-I/O state machine.

It takes frames and operation results and returns actions (`agent/actions.py`);
it never touches a socket, a clock it was not given, or the file system. The
asyncio runtime drives it over a real WebSocket; the simulator drives the same
class over an in-memory network in virtual time.

What it owns: the HELLO/HELLO_ACK handshake and its checks, version rules,
capability enforcement, the `max_concurrent` admission limit, the envelope-level
`pending_capacity`, STATUS frames (periodic and on the full→not-full edge),
PING→PONG, and SESSION_REVOKED handling.

With `strict_wire` it plays the strict profile: every frame from the platform is
first checked against `wire/strict.py` (the spec's messages exactly), and one
that fails is dropped without an answer, as the public reference shim drops
what its `extra="forbid"` models refuse. The spec says every request gets a
response with the same id; this profile exists to prove that a platform
survives peers that do not (docs/spec-notes.md, "The strict profile").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum, auto

import msgspec

from tetherbed.agent.actions import Action, Close, Log, Ready, Revoked, Run, Send
from tetherbed.agent.config import Limits
from tetherbed.agent.exit_codes import AgentExit
from tetherbed.agent.spec_codes import error_payload
from tetherbed.runtime.clock import Clock
from tetherbed.wire import catalog, serial_io, strict
from tetherbed.wire.codes import CloseCode, ErrorCode, ExtensionCode
from tetherbed.wire.envelope import (
    Envelope,
    decode_envelope,
    decode_payload,
    encode_message,
)
from tetherbed.wire.errors import ProtocolError, WireError
from tetherbed.wire.limits import STATUS_INTERVAL_SECONDS
from tetherbed.wire.messages import (
    Capability,
    Empty,
    Hello,
    HelloAck,
    MessageType,
    Payload,
    SessionRevoked,
    Status,
)
from tetherbed.wire.version import (
    CURRENT,
    CURRENT_TEXT,
    ProtocolVersion,
    VersionMismatch,
    negotiate,
    same_major,
)

log = logging.getLogger(__name__)


class State(Enum):
    AWAITING_ACK = auto()
    OPEN = auto()
    CLOSED = auto()


class AgentProtocol:
    """One connection's protocol state. Create a new one per connection."""

    def __init__(
        self,
        *,
        hello: Hello,
        local_limits: Limits,
        clock: Clock,
        new_id: Callable[[], str],
        session_id: str | None,
        audit_bytes: Callable[[], int] = lambda: 0,
        status_interval: float = STATUS_INTERVAL_SECONDS,
        strict_wire: bool = False,
    ) -> None:
        self.hello = hello
        self.session_id = session_id
        self.state = State.AWAITING_ACK
        self.limits = local_limits
        self.granted: frozenset[str] = frozenset()
        self.version = ProtocolVersion.parse(hello.protocol_version)
        self.in_flight: set[str] = set()
        self._local_limits = local_limits
        self._clock = clock
        self._new_id = new_id
        self._audit_bytes = audit_bytes
        self._status_interval = status_interval
        self._hello_id = new_id()
        self._started = clock.monotonic()
        self._next_status = self._started + status_interval
        self._control = session_id is None
        self._strict_wire = strict_wire

    # --- outgoing ----------------------------------------------------------

    def start(self) -> Send:
        """The HELLO frame, the first thing sent on a new connection."""
        return Send(self._encode(MessageType.HELLO, self._hello_id, self.hello, capacity=False))

    @property
    def free_slots(self) -> int:
        return max(self.limits.max_concurrent - len(self.in_flight), 0)

    def complete(
        self, request_id: str, kind: MessageType, payload: Payload | strict.Strict
    ) -> list[Action]:
        """An operation finished: answer it and release its slot."""
        if request_id not in self.in_flight:
            return []
        was_full = self.free_slots == 0
        self.in_flight.discard(request_id)
        if self.state is not State.OPEN:
            return []
        actions: list[Action] = [Send(self._encode(kind, request_id, payload))]
        if was_full:
            actions.append(self._status())
        return actions

    def fail(self, request_id: str, error: ProtocolError) -> list[Action]:
        """An operation failed with a typed error: answer ERROR and release its slot."""
        return self.complete(request_id, MessageType.ERROR, error_payload(error))

    def streaming(self, request_id: str) -> bool:
        """Whether frames of this request can still go out (its connection lives)."""
        return self.state is State.OPEN and request_id in self.in_flight

    def emit(self, request_id: str, kind: MessageType, payload: Payload) -> list[Action]:
        """A non-terminal frame of a streaming request (a LOCAL_LLM_COMPLETION_CHUNK),
        which keeps its slot and carries no pending_capacity: it is not a response."""
        if request_id not in self.in_flight or self.state is not State.OPEN:
            return []
        return [Send(self._encode(kind, request_id, payload, capacity=False))]

    # --- timers ------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return self._next_status if self.state is State.OPEN else None

    def on_timer(self) -> list[Action]:
        """Emit the periodic STATUS when it is due."""
        now = self._clock.monotonic()
        if self.state is not State.OPEN or now < self._next_status:
            return []
        return [self._status()]

    # --- incoming ----------------------------------------------------------

    def _negotiated_extension(self, data: bytes) -> bool:
        """A request of an extension this connection negotiated: not the spec's
        frame, so the strict profile does not judge it (its own decoder does)."""
        return serial_io.CAPABILITY in self.granted and _frame_type(data) in serial_io.REQUESTS

    def receive(self, data: bytes) -> list[Action]:
        """One frame from the platform. Never raises on bad input."""
        if self.state is State.CLOSED:
            return []
        if (
            self._strict_wire
            and (refused := _strict_refusal(data)) is not None
            and not self._negotiated_extension(data)
        ):
            if self.state is State.AWAITING_ACK and _is_hello_ack(data):
                return self._handshake_failed(f"strict profile refused the HELLO_ACK: {refused}")
            return [Log("warning", f"strict profile: dropped a frame without answer: {refused}")]
        try:
            envelope = decode_envelope(data)
        except WireError as exc:
            return self._reject(exc)
        if self.state is State.AWAITING_ACK:
            return self._on_handshake(envelope)
        if envelope.type != MessageType.HELLO_ACK and not same_major(
            envelope.version, self.version
        ):
            return [Log("error", f"dropped {envelope.type} frame with version {envelope.version}")]
        if envelope.type in serial_io.REQUESTS and serial_io.CAPABILITY in self.granted:
            return self._admit_extension(envelope)
        try:
            kind = MessageType(envelope.type)
        except ValueError:
            return self._reject(
                ProtocolError(
                    ExtensionCode.UNKNOWN_MESSAGE_TYPE,
                    f"unknown message type {envelope.type!r}",
                    request_id=envelope.id,
                )
            )
        if kind is MessageType.PING:
            return [Send(self._encode(MessageType.PONG, envelope.id, Empty()))]
        if kind is MessageType.SESSION_REVOKED:
            return self._on_revoked(envelope)
        if kind is MessageType.ERROR:
            return [Log("warning", f"platform sent ERROR: {bytes(envelope.payload)[:300]!r}")]
        capability = catalog.required_capability(kind)
        if capability is None:
            return self._reject(
                ProtocolError(
                    ExtensionCode.MESSAGE_NOT_ALLOWED,
                    f"{kind} is not a request the platform may send",
                    request_id=envelope.id,
                )
            )
        return self._admit(envelope, kind, capability)

    def connection_lost(self) -> None:
        """The transport ended; in-flight results will be discarded."""
        self.state = State.CLOSED

    # --- internals ---------------------------------------------------------

    def _on_handshake(self, envelope: Envelope) -> list[Action]:
        if envelope.type != MessageType.HELLO_ACK:
            return [Log("warning", f"ignored {envelope.type} before HELLO_ACK")]
        try:
            ack = decode_payload(envelope, MessageType.HELLO_ACK)
        except WireError as exc:
            return self._handshake_failed(f"malformed HELLO_ACK: {exc.message}")
        assert isinstance(ack, HelloAck)
        if envelope.id != self._hello_id:
            return self._handshake_failed("HELLO_ACK id does not match the HELLO id")
        try:
            self.version = negotiate(self.hello.protocol_version, ack.protocol_version)
        except VersionMismatch as exc:
            self.state = State.CLOSED
            return [
                Close(
                    CloseCode.PROTOCOL_VERSION_MISMATCH,
                    f"protocol mismatch: shim {exc.shim_max}, platform {exc.platform_max}",
                    fatal=True,
                    exit_code=AgentExit.PROTOCOL_VERSION_MISMATCH,
                )
            ]
        except WireError as exc:
            return self._handshake_failed(exc.message)
        advertised = set(self.hello.capabilities)
        extra = set(ack.granted_capabilities) - advertised
        if extra:
            return self._handshake_failed(f"HELLO_ACK grants unadvertised {sorted(extra)}")
        if self._control:
            problem = _control_ack_problem(ack, self.version)
            if problem:
                return self._handshake_failed(problem)
        elif ack.session_id != self.session_id:
            return self._handshake_failed(
                f"HELLO_ACK session {ack.session_id!r} is not {self.session_id!r}"
            )
        self.granted = frozenset(ack.granted_capabilities)
        self.limits = self._local_limits.narrowed_by(ack)
        self.state = State.OPEN
        # A STATUS right away tells the hub our effective max_concurrent (the
        # lower of its ACK and our local policy) before it issues anything.
        return [Ready(ack, str(self.version)), self._status()]

    def _handshake_failed(self, reason: str) -> list[Action]:
        self.state = State.CLOSED
        return [
            Close(
                CloseCode.PROTOCOL_ERROR,
                reason,
                fatal=True,
                exit_code=AgentExit.HANDSHAKE_INVALID,
            )
        ]

    def _on_revoked(self, envelope: Envelope) -> list[Action]:
        try:
            revoked = decode_payload(envelope, MessageType.SESSION_REVOKED)
            assert isinstance(revoked, SessionRevoked)
            reason, new_machine = revoked.reason, revoked.new_shim_machine_id
        except WireError:
            reason, new_machine = "unspecified", None
        # Spec: log, send no further frame, close with 4428, never reconnect.
        self.state = State.CLOSED
        self.in_flight.clear()
        return [
            Revoked(reason, new_machine),
            Close(
                CloseCode.SESSION_REVOKED,
                f"session revoked: {reason}",
                fatal=True,
                exit_code=AgentExit.SESSION_REVOKED,
            ),
        ]

    def _admit(self, envelope: Envelope, kind: MessageType, capability: Capability) -> list[Action]:
        request_id = envelope.id
        if not request_id:
            # Answered under the id it carried (null or ""), the only one there is.
            return self._reject(
                ProtocolError(
                    ExtensionCode.INVALID_MESSAGE, "request has no id", request_id=request_id
                )
            )
        is_control_request = kind in catalog.CONTROL_REQUESTS
        if is_control_request != self._control:
            where = "the control connection" if self._control else "a data connection"
            return self._reject(
                ProtocolError(
                    ExtensionCode.MESSAGE_NOT_ALLOWED,
                    f"{kind} is not accepted on {where}",
                    request_id=request_id,
                )
            )
        if capability not in self.granted:
            return self._reject(
                ProtocolError(
                    ErrorCode.CAPABILITY_NOT_GRANTED,
                    f"{kind} needs the {capability} capability, which was not granted",
                    request_id=request_id,
                )
            )
        refusal = self._slot_refusal(request_id)
        if refusal is not None:
            return self._reject(refusal)
        try:
            payload = decode_payload(envelope, kind)
        except WireError as exc:
            return self._reject(exc)
        self.in_flight.add(request_id)
        return [Run(request_id, kind, payload, envelope.payload)]

    def _admit_extension(self, envelope: Envelope) -> list[Action]:
        """A request of the serial extension, which this connection negotiated."""
        request_id = envelope.id
        if not request_id or self._control:
            return self._reject(
                ProtocolError(
                    ExtensionCode.MESSAGE_NOT_ALLOWED,
                    f"{envelope.type} needs an id and a data connection",
                    request_id=request_id,
                )
            )
        refusal = self._slot_refusal(request_id)
        if refusal is not None:
            return self._reject(refusal)
        try:
            payload = serial_io.decode_request(envelope.type, envelope.payload)
        except (msgspec.MsgspecError, RecursionError) as exc:
            return self._reject(
                ProtocolError(
                    ExtensionCode.INVALID_MESSAGE,
                    f"invalid {envelope.type} payload: {exc}",
                    request_id=request_id,
                )
            )
        self.in_flight.add(request_id)
        return [Run(request_id, envelope.type, payload, envelope.payload)]  # type: ignore[arg-type]

    def _slot_refusal(self, request_id: str) -> ProtocolError | None:
        """Why a request cannot take a slot now: its id is in use, or none is free."""
        if request_id in self.in_flight:
            return ProtocolError(
                ExtensionCode.DUPLICATE_REQUEST_ID,
                f"request id {request_id!r} is already in flight",
                request_id=request_id,
            )
        if self.free_slots == 0:
            return ProtocolError(
                ErrorCode.SHIM_OVERLOADED,
                f"{len(self.in_flight)} requests in flight, max_concurrent is "
                f"{self.limits.max_concurrent}",
                request_id=request_id,
            )
        return None

    def _reject(self, error: ProtocolError) -> list[Action]:
        """Answer a frame that was not admitted; it held no slot."""
        return [Send(self._encode(MessageType.ERROR, error.request_id, error_payload(error)))]

    def _status(self) -> Send:
        now = self._clock.monotonic()
        self._next_status = now + self._status_interval
        status = Status(
            in_flight=len(self.in_flight),
            max_concurrent=self.limits.max_concurrent,
            queue_depth=0,
            audit_log_bytes=self._audit_bytes(),
            uptime_seconds=round(now - self._started, 3),
        )
        return Send(self._encode(MessageType.STATUS, self._new_id(), status))

    def _encode(
        self,
        kind: MessageType,
        request_id: str | None,
        payload: Payload | strict.Strict,
        *,
        capacity: bool = True,
    ) -> bytes:
        version = str(CURRENT) if kind is MessageType.HELLO else str(self.version)
        return encode_message(
            kind,
            request_id,
            payload,
            ts=self._clock.time(),
            version=version,
            pending_capacity=self.free_slots if capacity else None,
        )


def _frame_type(data: bytes) -> str | None:
    try:
        return decode_envelope(data).type
    except WireError:
        return None


def _strict_refusal(data: bytes) -> str | None:
    """Why a strict peer would refuse this platform frame, or None if it would not."""
    try:
        strict.check_frame(data, from_shim=False)
    except strict.StrictViolation as exc:
        return str(exc)[:300]
    return None


def _is_hello_ack(data: bytes) -> bool:
    try:
        return decode_envelope(data).type == MessageType.HELLO_ACK
    except WireError:
        return False


def _control_ack_problem(ack: HelloAck, version: ProtocolVersion) -> str | None:
    """Spec: the control ACK carries a null session, a connection_id, protocol
    1.1 and directory_browse; a control daemon fails terminally otherwise."""
    if ack.session_id:
        return "control HELLO_ACK carries a session id"
    if not ack.connection_id:
        return "control HELLO_ACK lacks a connection_id"
    if ack.protocol_version != CURRENT_TEXT or version != CURRENT:
        return f"control HELLO_ACK protocol is {ack.protocol_version}, not {CURRENT_TEXT}"
    if Capability.DIRECTORY_BROWSE not in ack.granted_capabilities:
        return "control HELLO_ACK does not grant directory_browse"
    return None
