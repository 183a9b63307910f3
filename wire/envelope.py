"""The JSON envelope around every message, and its decoding and encoding.

Decoding is two-staged: the envelope first, with the payload kept as raw bytes,
then the payload by type. The hub's relay path only ever does the first stage,
so it reads the fields it routes on and copies the payload untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import WireError
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.messages import PAYLOAD_MODELS, MessageType, Payload

EMPTY_PAYLOAD = msgspec.Raw(b"{}")


class Envelope(msgspec.Struct, omit_defaults=True, gc=False):
    """A received frame. `payload` stays undecoded until `decode_payload`."""

    type: str
    id: str | None
    ts: float | None = None
    version: str | None = None
    pending_capacity: int | None = None
    payload: msgspec.Raw = EMPTY_PAYLOAD


class _OutEnvelope(msgspec.Struct, omit_defaults=True, gc=False):
    type: str
    id: str | None
    ts: float
    version: str
    pending_capacity: int | None = None
    payload: Any = None


class _IdProbe(msgspec.Struct):
    id: Any = None


_envelope_decoder = msgspec.json.Decoder(Envelope)
_probe_decoder = msgspec.json.Decoder(_IdProbe)
_payload_decoders = {t: msgspec.json.Decoder(model) for t, model in PAYLOAD_MODELS.items()}
_encoder = msgspec.json.Encoder()
_encode = _encoder.encode


def decode_envelope(data: bytes | str, *, limit: int = FRAME_LIMIT_BYTES) -> Envelope:
    """Decode a frame's envelope, or raise WireError with the best id available."""
    if len(data) > limit:
        raise WireError(
            ExtensionCode.FRAME_TOO_LARGE,
            f"frame of {len(data)} bytes exceeds the {limit}-byte limit",
        )
    try:
        return _envelope_decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise WireError(
            ExtensionCode.INVALID_MESSAGE, f"invalid envelope: {exc}", request_id=_probe_id(data)
        ) from None
    except msgspec.DecodeError as exc:
        raise WireError(ExtensionCode.INVALID_MESSAGE, f"malformed JSON: {exc}") from None
    except RecursionError:
        # msgspec recurses once per nesting level, even to skip a Raw payload.
        raise WireError(
            ExtensionCode.INVALID_MESSAGE, TOO_DEEP, request_id=_probe_id(data)
        ) from None


#: Why a frame nested past the interpreter's recursion limit is refused.
TOO_DEEP = "JSON nested too deeply"


def _probe_id(data: bytes | str) -> str | None:
    """The frame's id, if it can be read before whatever made the frame invalid."""
    try:
        found = _probe_decoder.decode(data).id
    except (msgspec.MsgspecError, RecursionError):
        return _leading_id(data)
    return found if isinstance(found, str) else None


class _LeadingId(msgspec.Struct):
    type: Any = None
    id: Any = None


def _leading_id(data: bytes | str) -> str | None:
    """The id of a frame whose `type` and `id` come first (as every encoder here
    writes them), read from its head alone: what follows may be unreadable."""
    raw = data.encode() if isinstance(data, str) else data
    head = raw[:512]
    marker = head.find(b',"payload"')
    if marker < 0:
        return None
    try:
        found = msgspec.json.decode(head[:marker] + b"}", type=_LeadingId).id
    except msgspec.MsgspecError:
        return None
    return found if isinstance(found, str) else None


def message_type(envelope: Envelope) -> MessageType:
    """The envelope's type as a known MessageType, or UNKNOWN_MESSAGE_TYPE."""
    try:
        return MessageType(envelope.type)
    except ValueError:
        raise WireError(
            ExtensionCode.UNKNOWN_MESSAGE_TYPE,
            f"unknown message type {envelope.type!r}",
            request_id=envelope.id,
        ) from None


def decode_payload(envelope: Envelope, expected: MessageType | None = None) -> Payload:
    """Decode the payload by the envelope's type (unknown fields are ignored)."""
    kind = message_type(envelope) if expected is None else expected
    try:
        return _payload_decoders[kind].decode(envelope.payload)
    except msgspec.ValidationError as exc:
        raise WireError(
            ExtensionCode.INVALID_MESSAGE, f"invalid {kind} payload: {exc}", request_id=envelope.id
        ) from None
    except msgspec.DecodeError as exc:  # pragma: no cover - Raw is already valid JSON
        raise WireError(ExtensionCode.INVALID_MESSAGE, str(exc), request_id=envelope.id) from None
    except RecursionError:
        raise WireError(ExtensionCode.INVALID_MESSAGE, TOO_DEEP, request_id=envelope.id) from None


def encode_message(
    kind: str,
    request_id: str | None,
    payload: Payload | msgspec.Raw | dict[str, Any],
    *,
    ts: float,
    version: str,
    pending_capacity: int | None = None,
) -> bytes:
    """Encode one frame. A Raw payload is copied byte for byte."""
    return _encoder.encode(_OutEnvelope(kind, request_id, ts, version, pending_capacity, payload))


def reframe(
    envelope: Envelope, request_id: str | None, version: str, now: Callable[[], float]
) -> bytes:
    """The envelope again under another id, payload bytes untouched (relay path).

    `version` is always the one negotiated with the agent, whatever the sender
    wrote (a peer drops a frame of another major without answering); `now()`
    fills in a missing `ts`. Keyword-free because it runs once per relayed frame.
    """
    ts = envelope.ts
    return _encode(
        _OutEnvelope(
            envelope.type,
            request_id,
            now() if ts is None else ts,
            version,
            None,
            envelope.payload,
        )
    )
