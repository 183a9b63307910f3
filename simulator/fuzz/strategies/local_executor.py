"""Strategies for every message of the local-executor spec: payloads, frames, sequences.

Built by iterating `wire.messages.PAYLOAD_MODELS` (the lenient models every receiver
here uses) and `wire.strict.STRICT_MODELS` (what a strict peer accepts): a valid
payload satisfies both, so it is one any implementation must take. A message type
added to the wire gets its strategies here without an edit, and
`tests/fuzz/test_strategies.py` fails if one cannot be built.

Frames are whole WebSocket text messages: the envelope (`type`, `id`, `ts`,
`version`, `payload`) around a payload. Near-valid frames break one thing, either in
the payload (`mutations.py`) or in the envelope: a wrong or odd version, an unknown
type, an id of the wrong kind, a missing field, an unknown envelope field, not an
object, truncated JSON, bytes that are not UTF-8, nesting past the decoder's depth,
or a frame over the 16 MiB limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from tetherbed.simulator.fuzz.strategies import mutations
from tetherbed.simulator.fuzz.strategies.from_models import json_values, values
from tetherbed.simulator.fuzz.strategies.message import FuzzedMessage
from tetherbed.wire.catalog import CONTROL_REQUESTS, DATA_REQUESTS
from tetherbed.wire.limits import FRAME_LIMIT_BYTES
from tetherbed.wire.messages import PAYLOAD_MODELS, MessageType
from tetherbed.wire.strict import STRICT_MODELS
from tetherbed.wire.version import CURRENT_TEXT

_encode = msgspec.json.Encoder().encode

# --- envelope mutations (besides the payload's own, in mutations.py) -----------------------
WRONG_VERSION = "wrong_version"
UNKNOWN_TYPE = "unknown_type"
BAD_ID = "bad_id"
MISSING_ENVELOPE_FIELD = "missing_envelope_field"
UNKNOWN_ENVELOPE_FIELD = "unknown_envelope_field"
NOT_AN_OBJECT = "not_an_object"
TRUNCATED = "truncated_json"
FRAME_INVALID_UTF8 = "frame_invalid_utf8"
DEEP_FRAME = "deep_frame"
OVERSIZED_FRAME = "oversized_frame"

ENVELOPE_MUTATIONS = (
    WRONG_VERSION,
    UNKNOWN_TYPE,
    BAD_ID,
    MISSING_ENVELOPE_FIELD,
    UNKNOWN_ENVELOPE_FIELD,
    NOT_AN_OBJECT,
    TRUNCATED,
    FRAME_INVALID_UTF8,
    DEEP_FRAME,
    OVERSIZED_FRAME,
)
#: Envelope mutations that cost a lot to send (a frame past 16 MiB): drawn only on request.
COSTLY = frozenset({OVERSIZED_FRAME})

#: Request types a platform sends an agent, in the order the spec lists them.
REQUEST_TYPES: tuple[MessageType, ...] = (*DATA_REQUESTS, *CONTROL_REQUESTS)


@dataclass(frozen=True, slots=True)
class Frame(FuzzedMessage):
    """One frame to send: its bytes, the type and id it carries, what was broken."""

    NAME = "kind"

    data: bytes
    kind: str
    request_id: str | None
    mutation: str | None = None
    field: str | None = None


# --- payloads ------------------------------------------------------------------------------


def payloads(kind: MessageType | str) -> st.SearchStrategy[dict[str, Any]]:
    """Valid payloads of `kind`: what both the lenient and the strict model accept."""
    kind = MessageType(kind)
    strict = STRICT_MODELS.get(kind)
    lenient = PAYLOAD_MODELS[kind]
    if strict is None:  # the reserved recording messages: no payload the spec defines
        return values(lenient)
    return values(strict, lenient)


def near_valid_payloads(
    kind: MessageType | str, only: tuple[str, ...] | None = None
) -> st.SearchStrategy[mutations.Mutant]:
    """Payloads of `kind` with one thing broken (the strict model refuses each)."""
    kind = MessageType(kind)
    model = STRICT_MODELS.get(kind, PAYLOAD_MODELS[kind])
    return mutations.model_mutants(model, payloads(kind), only)


#: Every message type's valid payloads, built from the models.
PAYLOADS: dict[MessageType, st.SearchStrategy[dict[str, Any]]] = {
    kind: st.deferred(lambda kind=kind: payloads(kind)) for kind in PAYLOAD_MODELS
}
#: Every message type's near-valid payloads.
NEAR_VALID_PAYLOADS: dict[MessageType, st.SearchStrategy[mutations.Mutant]] = {
    kind: st.deferred(lambda kind=kind: near_valid_payloads(kind)) for kind in PAYLOAD_MODELS
}

# --- frames --------------------------------------------------------------------------------

#: Request ids as platforms write them: short, printable, unique enough.
request_ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12).map(
    lambda s: f"fz-{s}"
)


#: The `ts` of generated frames: fixed, so that a frame's size never depends on the
#: clock (Hypothesis replays a draw exactly; a receiver may not judge by `ts`).
TS = 1_767_225_600.0


def envelope(kind: str, request_id: str | None, payload: bytes, **extra: Any) -> bytes:
    """A frame around raw payload bytes, fields in the order every encoder here writes."""
    head = {"type": kind, "id": request_id, "ts": extra.pop("ts", TS)}
    head["version"] = extra.pop("version", CURRENT_TEXT)
    head.update(extra)
    return _encode(head)[:-1] + b',"payload":' + payload + b"}"


def _kinds(kinds: tuple[str, ...] | None) -> st.SearchStrategy[MessageType]:
    return st.sampled_from([MessageType(k) for k in (kinds or tuple(PAYLOAD_MODELS))])


def frames(
    kinds: tuple[str, ...] | None = None, ids: st.SearchStrategy[str] = request_ids
) -> st.SearchStrategy[Frame]:
    """Valid frames of the given types (all types by default)."""

    def build(kind: MessageType, request_id: str, payload: dict[str, Any]) -> Frame:
        return Frame(envelope(kind, request_id, _encode(payload)), str(kind), request_id)

    return _kinds(kinds).flatmap(lambda kind: st.builds(build, st.just(kind), ids, payloads(kind)))


def near_valid_frames(
    kinds: tuple[str, ...] | None = None,
    ids: st.SearchStrategy[str] = request_ids,
    *,
    envelope_mutations: tuple[str, ...] | None = None,
    payload_mutations: tuple[str, ...] | None = None,
) -> st.SearchStrategy[Frame]:
    """Frames with one thing broken, in the payload or in the envelope.

    `envelope_mutations` defaults to every cheap one (not OVERSIZED_FRAME);
    `payload_mutations` to every one that applies to the type drawn."""
    chosen = envelope_mutations
    if chosen is None:
        chosen = tuple(m for m in ENVELOPE_MUTATIONS if m not in COSTLY)

    def in_payload(kind: MessageType) -> st.SearchStrategy[Frame]:
        return st.builds(
            lambda rid, m: Frame(envelope(kind, rid, m.data), str(kind), rid, m.mutation, m.field),
            ids,
            near_valid_payloads(kind, payload_mutations),
        )

    strategies = [_kinds(kinds).flatmap(in_payload)]
    if chosen:
        strategies.append(_broken_envelope(st.sampled_from(chosen), _kinds(kinds), ids))
    return st.one_of(*strategies)


@st.composite
def _broken_envelope(
    draw: Any,
    mutations_: st.SearchStrategy[str],
    kinds_: st.SearchStrategy[MessageType],
    ids: st.SearchStrategy[str],
) -> Frame:
    mutation, kind, rid = draw(mutations_), draw(kinds_), draw(ids)
    data = _Drawer(draw)
    payload = _encode(data.draw(payloads(kind)))
    fields: dict[str, Any] = {"type": str(kind), "id": rid, "ts": TS}
    fields["version"] = CURRENT_TEXT
    made: bytes
    readable_id: str | None = rid
    if mutation == WRONG_VERSION:
        version = data.draw(st.sampled_from(("2.0", "0.9", "1", "x.y", "", "99.99", 1.1, None)))
        made = envelope(kind, rid, payload, version=version)
    elif mutation == UNKNOWN_TYPE:
        name = data.draw(st.sampled_from(("FILE_READX", "hello", "", "EXEC", "NOPE_" + rid)))
        return Frame(envelope(name, rid, payload), name, rid, mutation, "type")
    elif mutation == BAD_ID:
        bad = data.draw(st.sampled_from((1, -1, 2**70, 1.5, True, [], {}, ["a"])))
        made, readable_id = envelope(kind, bad, payload), None  # type: ignore[arg-type]
    elif mutation == MISSING_ENVELOPE_FIELD:
        field = data.draw(st.sampled_from(("type", "id")))
        del fields[field]
        made = _encode(fields)[:-1] + b',"payload":' + payload + b"}"
        readable_id = None if field == "id" else rid
        return Frame(made, "" if field == "type" else str(kind), readable_id, mutation, field)
    elif mutation == UNKNOWN_ENVELOPE_FIELD:
        made = envelope(kind, rid, payload, x_extra=data.draw(json_values))
    elif mutation == NOT_AN_OBJECT:
        made = data.draw(
            st.sampled_from((b"[]", b"1", b'"FILE_READ"', b"null", b"[" + payload + b"]"))
        )
        readable_id = None
    elif mutation == TRUNCATED:
        whole = envelope(kind, rid, payload)
        cut = data.draw(st.integers(1, len(whole) - 1))
        made, readable_id = whole[:cut], None
    elif mutation == FRAME_INVALID_UTF8:
        # In the id, which every receiver reads (msgspec skips an unknown field's
        # bytes without checking them).
        made = envelope(kind, rid, payload).replace(_encode(rid), b'"' + rid.encode() + b'\xff"', 1)
        readable_id = None
    elif mutation == DEEP_FRAME:
        made = envelope(
            kind, rid, mutations.nested(data.draw(st.sampled_from((1100, 5000, 20000))))
        )
    elif mutation == OVERSIZED_FRAME:
        pad = FRAME_LIMIT_BYTES + data.draw(st.sampled_from((1, 1024)))
        made = envelope(kind, rid, _encode({"x": "x" * pad}))
    else:  # pragma: no cover - every name above is handled
        raise ValueError(mutation)
    return Frame(made, str(kind), readable_id, mutation, None)


class _Drawer:
    """`draw` as an object with `.draw`, so each branch above reads the same."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw


def sequences(
    kinds: tuple[str, ...] | None = None,
    *,
    min_size: int = 1,
    max_size: int = 6,
    near_valid: bool = True,
) -> st.SearchStrategy[list[Frame]]:
    """Lists of frames whose ids come from a small pool: some are sent twice while the
    first is in flight (duplicates), some again after it was answered (reused)."""
    pool = st.lists(request_ids, min_size=1, max_size=3, unique=True)

    def build(ids: list[str]) -> st.SearchStrategy[list[Frame]]:
        chosen = st.sampled_from(ids)
        one = frames(kinds, chosen)
        if near_valid:
            one = st.one_of(one, one, near_valid_frames(kinds, chosen))
        return st.lists(one, min_size=min_size, max_size=max_size)

    return pool.flatmap(build)


def decodes_strictly(kind: MessageType | str, payload: bytes) -> bool:
    """Does the strict model of `kind` accept this payload?"""
    model = STRICT_MODELS.get(MessageType(kind))
    if model is None:
        return False
    try:
        msgspec.json.decode(payload, type=model)
    except (msgspec.MsgspecError, RecursionError):
        return False
    return True


def decodes_leniently(kind: MessageType | str, payload: bytes) -> bool:
    """Does the lenient model of `kind` (unknown fields ignored) accept it?"""
    try:
        msgspec.json.decode(payload, type=PAYLOAD_MODELS[MessageType(kind)])
    except (msgspec.MsgspecError, RecursionError):
        return False
    return True
