"""The message strategies follow the wire models: valid ones validate, near-valid ones do not.

Each registry is built by iterating the models in `wire/`; these tests iterate the
models again, so a model added without a working strategy fails here.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tetherbed.fuzz import strategies as public
from tetherbed.simulator.fuzz.strategies import crossdesk, dsh, local_executor
from tetherbed.simulator.fuzz.strategies.mutations import MODEL_MAY_ACCEPT, MUTATIONS
from tetherbed.wire import crossdesk_messages
from tetherbed.wire.dsh import schema
from tetherbed.wire.envelope import decode_envelope, decode_payload
from tetherbed.wire.errors import WireError
from tetherbed.wire.messages import PAYLOAD_MODELS
from tetherbed.wire.strict import STRICT_MODELS

FAST = settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _strict_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- every model has a strategy --------------------------------------------------------------


def test_every_wire_model_has_a_strategy() -> None:
    assert set(local_executor.PAYLOADS) == set(PAYLOAD_MODELS)
    assert set(local_executor.NEAR_VALID_PAYLOADS) == set(PAYLOAD_MODELS)
    assert set(STRICT_MODELS) <= set(local_executor.PAYLOADS)
    assert set(crossdesk.REQUESTS) == set(crossdesk_messages.REQUEST_MODELS)
    assert set(crossdesk.NEAR_VALID_REQUESTS) == set(crossdesk_messages.REQUEST_MODELS)
    assert len(crossdesk.ACTIONS) == len(crossdesk_messages.ACTION_MODELS)
    assert set(crossdesk.RESPONSES) == set(crossdesk_messages.RESPONSE_MODELS)
    shapes = {
        name
        for name, value in vars(schema).items()
        if name.isupper() and isinstance(value, dict) and value
        and all(isinstance(f, schema.Field) for f in value.values())
    }  # fmt: skip
    assert set(dsh.BODIES) == shapes
    assert {"ENROLL_REQUEST", "EXEC", "RESULT", "CHUNK", "FS_REQUEST"} <= shapes


def test_the_public_module_is_the_same_code() -> None:
    assert public.local_executor is local_executor
    assert public.dsh is dsh
    assert public.crossdesk is crossdesk


# --- local-executor ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(PAYLOAD_MODELS))
def test_valid_payloads_validate_both_readings(kind: str) -> None:
    @FAST
    @given(local_executor.payloads(kind))
    def check(payload: dict) -> None:
        data = msgspec.json.encode(payload)
        assert local_executor.decodes_leniently(kind, data), payload
        if kind in STRICT_MODELS:
            assert local_executor.decodes_strictly(kind, data), payload

    check()


@pytest.mark.parametrize("kind", sorted(STRICT_MODELS))
def test_near_valid_payloads_are_refused_by_the_strict_reading(kind: str) -> None:
    seen: set[str] = set()

    @FAST
    @given(local_executor.near_valid_payloads(kind))
    def check(mutant: public.Mutant) -> None:
        assert mutant.mutation in MUTATIONS
        seen.add(mutant.mutation)
        if mutant.mutation in MODEL_MAY_ACCEPT:
            return
        assert not local_executor.decodes_strictly(kind, mutant.data), mutant
        if mutant.mutation == "invalid_utf8":
            assert not _strict_utf8(mutant.data)

    check()
    assert seen


@FAST
@given(local_executor.frames())
def test_valid_frames_decode(frame: local_executor.Frame) -> None:
    envelope = decode_envelope(frame.data)
    assert envelope.type == frame.kind and envelope.id == frame.request_id
    decode_payload(envelope)


#: Envelope mutations and the code the wire's decoder answers them with.
ENVELOPE_CODES = {
    local_executor.BAD_ID: "INVALID_MESSAGE",
    local_executor.NOT_AN_OBJECT: "INVALID_MESSAGE",
    local_executor.TRUNCATED: "INVALID_MESSAGE",
    local_executor.FRAME_INVALID_UTF8: "INVALID_MESSAGE",
    local_executor.DEEP_FRAME: "INVALID_MESSAGE",
    local_executor.OVERSIZED_FRAME: "FRAME_TOO_LARGE",
    local_executor.UNKNOWN_TYPE: "UNKNOWN_MESSAGE_TYPE",
}


@FAST
@given(
    local_executor.near_valid_frames(
        envelope_mutations=tuple(local_executor.ENVELOPE_MUTATIONS), payload_mutations=()
    )
)
def test_broken_envelopes_get_the_wire_decoders_code(frame: local_executor.Frame) -> None:
    expected = ENVELOPE_CODES.get(frame.mutation)  # type: ignore[arg-type]
    try:
        envelope = decode_envelope(frame.data)
        decode_payload(envelope)
    except WireError as exc:
        if expected is not None:
            assert exc.code == expected, frame.describe()
        elif frame.mutation == local_executor.MISSING_ENVELOPE_FIELD:
            assert exc.code == "INVALID_MESSAGE"
        return
    # Accepted: only what a lenient receiver may take (an unknown field, an odd version).
    assert frame.mutation in (
        local_executor.UNKNOWN_ENVELOPE_FIELD,
        local_executor.WRONG_VERSION,
    ), frame.describe()


@FAST
@given(local_executor.sequences(("FILE_READ", "FILE_STAT"), min_size=4, max_size=6))
def test_sequences_reuse_ids(sequence: list[local_executor.Frame]) -> None:
    ids = [f.request_id for f in sequence if f.request_id is not None]
    assert len(set(ids)) <= 3


def test_frames_replay_from_json() -> None:
    frame = local_executor.Frame(b'{"type":"PING","id":"\xff"}', "PING", None, "frame_invalid_utf8")
    assert local_executor.Frame.from_json(json.loads(json.dumps(frame.to_json()))) == frame


# --- dsh-computers -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(dsh.SHAPES))
def test_dsh_bodies_fit_the_schema_and_near_valid_ones_do_not(name: str) -> None:
    shape = dsh.SHAPES[name]

    @FAST
    @given(dsh.bodies(name), dsh.near_valid_bodies(name))
    def check(body: dict, mutant: public.Mutant) -> None:
        assert schema.fits(json.loads(msgspec.json.encode(body)), shape), body
        if mutant.mutation in MODEL_MAY_ACCEPT:
            return
        if not _strict_utf8(mutant.data):
            return  # not even text: no body at all
        try:
            value = msgspec.json.decode(mutant.data)
        except (msgspec.DecodeError, RecursionError):
            return
        assert not schema.fits(value, shape), mutant

    check()


@FAST
@given(dsh.sse_events())
def test_sse_events_are_the_specs(event: tuple[str, dict]) -> None:
    name, data = event
    assert schema.fits(data, dsh.SHAPES[dsh.SSE_EVENTS[name]])


# --- crossdesk-automation ----------------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(crossdesk_messages.REQUEST_MODELS))
def test_crossdesk_requests_validate_and_near_valid_ones_do_not(method: str) -> None:
    @FAST
    @given(crossdesk.requests(method), crossdesk.near_valid_requests(method))
    def check(request: dict, mutant: public.Mutant) -> None:
        assert crossdesk_messages.is_valid_request(msgspec.json.encode(request)), request
        if mutant.mutation not in MODEL_MAY_ACCEPT:
            assert not crossdesk_messages.is_valid_request(mutant.data), mutant

    check()


@FAST
@given(st.sampled_from(sorted(crossdesk.ACTIONS)).flatmap(lambda k: crossdesk.ACTIONS[k]))
def test_crossdesk_actions_validate(action: dict) -> None:
    request = {"id": 1, "method": "action", "operation_id": "op", "observation_id": "obs"}
    assert crossdesk_messages.is_valid_request(msgspec.json.encode({**request, "action": action}))


@FAST
@given(crossdesk.near_valid_lines(payload_mutations=()))
def test_crossdesk_broken_lines_are_not_requests(line: crossdesk.RequestLine) -> None:
    assert line.data.endswith(b"\n")
    assert not crossdesk_messages.is_valid_request(line.data[:-1]), line.describe()
    if line.mutation == crossdesk.TOO_DEEP:
        depth = line.data.count(b"[") + 1
        assert depth > 32
    if line.mutation == crossdesk.OVERSIZED_LINE:
        assert len(line.data) - 1 > 64 * 1024
