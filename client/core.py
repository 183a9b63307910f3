"""Sans-I/O core of the hub client: request ids, frame encoding, reply routing.

It never touches a socket or sleeps. The driver (`client.py`) hands it the
bytes it received and gets back what happened; the same core can sit on a
real WebSocket or on the simulator's in-memory network.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from tetherbed.client.errors import (
    HubError,
    InvalidArgumentError,
    TooLargeError,
    UnexpectedResponseError,
    error_from_code,
)
from tetherbed.client.models import Frame
from tetherbed.runtime.clock import Clock, SystemClock
from tetherbed.wire.catalog import STREAMING_RESPONSES
from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.envelope import Envelope, decode_envelope, decode_payload, encode_message
from tetherbed.wire.errors import WireError
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.messages import ErrorPayload, MessageType
from tetherbed.wire.version import CURRENT

#: A request's payload: a struct (`wire.strict` for exactly the spec's fields,
#: or `wire.messages`) or a plain dict.
RequestPayload = msgspec.Struct | dict[str, Any]


def new_request_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class Reply:
    """A frame for a waiting request; `final` is False for streamed chunks."""

    request_id: str
    frame: Frame
    final: bool


@dataclass(frozen=True, slots=True)
class Failure:
    """The request ends with this error (an ERROR answer, or an unusable one)."""

    request_id: str
    error: HubError


@dataclass(frozen=True, slots=True)
class ConnectionLevelError:
    """An ERROR with id null, or a frame whose id could not be read."""

    error: HubError


Event = Reply | Failure | ConnectionLevelError


class ClientCore:
    """Allocates ids, encodes requests, and routes each received frame.

    A request is pending from `start_request` until its terminal frame, an
    ERROR, or `forget`. Frames for ids that are not pending (late answers to a
    request the caller gave up on) are dropped and counted.
    """

    def __init__(
        self,
        *,
        id_factory: Callable[[], str] = new_request_id,
        clock: Clock | None = None,
        frame_limit: int = FRAME_LIMIT_BYTES,
    ) -> None:
        self._id_factory = id_factory
        self._clock = clock or SystemClock()
        self._frame_limit = frame_limit
        self._version = str(CURRENT)
        self._pending: dict[str, str] = {}  # request id -> request type
        self.dropped_frames = 0

    @property
    def pending_ids(self) -> frozenset[str]:
        return frozenset(self._pending)

    def start_request(
        self,
        kind: str,
        payload: RequestPayload,
        request_id: str | None = None,
    ) -> tuple[str, bytes]:
        """Register a request and return its id and the text frame to send.

        Raises before anything is registered when the id is already waiting
        (answers could not be told apart) or the frame is over the limit.
        """
        rid = self._id_factory() if request_id is None else request_id
        if rid in self._pending:
            raise InvalidArgumentError(
                ExtensionCode.DUPLICATE_REQUEST_ID,
                f"request id {rid!r} is already waiting for an answer on this connection",
            )
        try:
            data = encode_message(
                str(kind), rid, payload, ts=self._clock.time(), version=self._version
            )
        except (TypeError, msgspec.EncodeError) as exc:
            raise InvalidArgumentError(
                ExtensionCode.INVALID_MESSAGE, f"payload cannot be encoded: {exc}"
            ) from None
        if len(data) > self._frame_limit:
            raise TooLargeError(
                ExtensionCode.FRAME_TOO_LARGE,
                f"{kind} frame of {len(data)} bytes exceeds the {self._frame_limit}-byte limit",
            )
        self._pending[rid] = str(kind)
        return rid, data

    def forget(self, request_id: str) -> None:
        """Stop waiting for a request; its later frames will be dropped."""
        self._pending.pop(request_id, None)

    def forget_all(self) -> list[str]:
        """Every pending id, now forgotten (the connection ended)."""
        ids = list(self._pending)
        self._pending.clear()
        return ids

    def receive(self, data: bytes | str) -> Event | None:
        """What a received frame means, or None when it is dropped."""
        try:
            envelope = decode_envelope(data, limit=self._frame_limit)
        except WireError as exc:
            error = UnexpectedResponseError(exc.code, f"hub sent an unreadable frame: {exc}")
            if exc.request_id is not None and exc.request_id in self._pending:
                self._pending.pop(exc.request_id)
                return Failure(exc.request_id, error)
            return ConnectionLevelError(error)

        rid = envelope.id
        if envelope.type == MessageType.ERROR:
            error = _error_from_envelope(envelope)
            if rid is None:
                return ConnectionLevelError(error)
            if self._pending.pop(rid, None) is None:
                self.dropped_frames += 1
                return None
            return Failure(rid, error)

        if rid is None or rid not in self._pending:
            self.dropped_frames += 1
            return None
        try:
            frame = Frame(envelope.type, _decode_payload(envelope))
        except WireError as exc:
            self._pending.pop(rid)
            return Failure(rid, UnexpectedResponseError(exc.code, exc.message))
        final = envelope.type not in STREAMING_RESPONSES
        if final:
            self._pending.pop(rid)
        return Reply(rid, frame, final)


def _decode_payload(envelope: Envelope) -> Any:
    try:
        kind = MessageType(envelope.type)
    except ValueError:
        # A type newer than this client: hand it over undecoded by model.
        try:
            return msgspec.json.decode(envelope.payload)
        except msgspec.DecodeError as exc:  # pragma: no cover - Raw is valid JSON
            raise WireError(ExtensionCode.INVALID_MESSAGE, str(exc)) from None
    return decode_payload(envelope, kind)


def _error_from_envelope(envelope: Envelope) -> HubError:
    try:
        payload = decode_payload(envelope, MessageType.ERROR)
    except WireError as exc:
        return UnexpectedResponseError(exc.code, f"ERROR frame with a bad payload: {exc.message}")
    assert isinstance(payload, ErrorPayload)
    return error_from_code(
        payload.code, payload.message, details=payload.details, fatal=payload.fatal
    )
