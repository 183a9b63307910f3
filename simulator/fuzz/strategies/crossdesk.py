"""Strategies for every message of crossdesk-automation/1: request lines and answers.

Built by iterating `wire.crossdesk_messages.REQUEST_MODELS`, `ACTION_MODELS` and
`RESPONSE_MODELS`. A request is one JSON line; near-valid ones break one thing in
the method's parameters (`mutations.py`) or in the envelope: an id that is
negative, huge, fractional, a string or missing; an unknown method; not an object;
truncated JSON; bytes that are not UTF-8; nesting past the spec's depth of 32;
a line past the spec's 64 KiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st

from tetherbed.simulator.fuzz.strategies import mutations
from tetherbed.simulator.fuzz.strategies.from_models import values
from tetherbed.simulator.fuzz.strategies.message import FuzzedMessage
from tetherbed.wire import crossdesk
from tetherbed.wire.crossdesk_messages import (
    ACTION_MODELS,
    ENDING_METHODS,
    REQUEST_MODELS,
    RESPONSE_MODELS,
)

_encode = msgspec.json.Encoder().encode

BAD_REQUEST_ID = "bad_request_id"
UNKNOWN_METHOD = "unknown_method"
NOT_AN_OBJECT = "not_an_object"
TRUNCATED = "truncated_json"
LINE_INVALID_UTF8 = "line_invalid_utf8"
TOO_DEEP = "too_deep"
OVERSIZED_LINE = "oversized_line"

ENVELOPE_MUTATIONS = (
    BAD_REQUEST_ID,
    UNKNOWN_METHOD,
    NOT_AN_OBJECT,
    TRUNCATED,
    LINE_INVALID_UTF8,
    TOO_DEEP,
    OVERSIZED_LINE,
)

#: Methods a fuzzer sends by default: all but those that end the process.
FUZZ_METHODS: tuple[str, ...] = tuple(m for m in REQUEST_MODELS if m not in ENDING_METHODS)

request_ids = st.integers(0, 2**31)


@dataclass(frozen=True, slots=True)
class RequestLine(FuzzedMessage):
    """One line to write to the adapter (newline included), and what it is."""

    NAME = "method"

    data: bytes
    method: str
    request_id: int | None
    mutation: str | None = None
    field: str | None = None


def requests(
    method: str, ids: st.SearchStrategy[int] = request_ids
) -> st.SearchStrategy[dict[str, Any]]:
    """Valid requests of `method` (as JSON-ready dicts, `id` and `method` included)."""
    return values(REQUEST_MODELS[method]).flatmap(
        lambda request: ids.map(lambda rid: {**request, "id": rid})
    )


def near_valid_requests(
    method: str, only: tuple[str, ...] | None = None, ids: st.SearchStrategy[int] = request_ids
) -> st.SearchStrategy[mutations.Mutant]:
    narrowed = tuple(m for m in (only or mutations.MUTATIONS))
    return mutations.model_mutants(REQUEST_MODELS[method], requests(method, ids), narrowed)


def actions(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """Valid `action` objects of `type` `kind` (click, drag, ...)."""
    return values(_ACTIONS[kind])


_ACTIONS = {model.__struct_config__.tag: model for model in ACTION_MODELS}  # type: ignore[misc]

#: Every method's valid requests, every action type's payloads, every answer's shape.
REQUESTS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    method: st.deferred(lambda method=method: requests(method)) for method in REQUEST_MODELS
}
NEAR_VALID_REQUESTS: dict[str, st.SearchStrategy[mutations.Mutant]] = {
    method: st.deferred(lambda method=method: near_valid_requests(method))
    for method in REQUEST_MODELS
}
ACTIONS: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    kind: st.deferred(lambda kind=kind: actions(kind)) for kind in _ACTIONS
}
RESPONSES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    name: st.deferred(lambda model=model: values(model)) for name, model in RESPONSE_MODELS.items()
}


def lines(
    methods: tuple[str, ...] = FUZZ_METHODS, ids: st.SearchStrategy[int] = request_ids
) -> st.SearchStrategy[RequestLine]:
    """Valid request lines."""
    return st.sampled_from(methods).flatmap(
        lambda method: requests(method, ids).map(
            lambda r: RequestLine(_encode(r) + b"\n", method, r["id"])
        )
    )


def near_valid_lines(
    methods: tuple[str, ...] = FUZZ_METHODS,
    ids: st.SearchStrategy[int] = request_ids,
    *,
    envelope_mutations: tuple[str, ...] = ENVELOPE_MUTATIONS,
    payload_mutations: tuple[str, ...] | None = None,
) -> st.SearchStrategy[RequestLine]:
    """Request lines with one thing broken, in the parameters or in the envelope."""

    def in_params(method: str) -> st.SearchStrategy[RequestLine]:
        return near_valid_requests(method, payload_mutations, ids).map(
            lambda m: RequestLine(m.data + b"\n", method, _id_of(m.data), m.mutation, m.field)
        )

    made = []
    if payload_mutations is None or payload_mutations:  # (): the envelope alone
        made.append(st.sampled_from(methods).flatmap(in_params))
    if envelope_mutations:
        made.append(_broken(st.sampled_from(envelope_mutations), st.sampled_from(methods), ids))
    return st.one_of(*made)


def _id_of(data: bytes) -> int | None:
    """The id a line carries when the adapter can read it (for the answer's `id`)."""
    try:
        found = msgspec.json.decode(data)
    except (msgspec.MsgspecError, RecursionError):
        return None
    rid = found.get("id") if isinstance(found, dict) else None
    return rid if type(rid) is int and 0 <= rid <= 2**63 - 1 else None


@st.composite
def _broken(
    draw: Any,
    mutations_: st.SearchStrategy[str],
    methods: st.SearchStrategy[str],
    ids: st.SearchStrategy[int],
) -> RequestLine:
    mutation, method, rid = draw(mutations_), draw(methods), draw(ids)
    request = draw(requests(method, st.just(rid)))
    if mutation == BAD_REQUEST_ID:
        bad = draw(st.sampled_from((-1, 2**64, 1.5, "1", None, [], "absent")))
        if bad == "absent":
            request.pop("id")
        else:
            request["id"] = bad
        return RequestLine(_encode(request) + b"\n", method, None, mutation, "id")
    if mutation == UNKNOWN_METHOD:
        name = draw(st.sampled_from(("HELLO", "screenshots", "", "tools/call", "__proto__")))
        request["method"] = name
        return RequestLine(_encode(request) + b"\n", name, rid, mutation, "method")
    if mutation == NOT_AN_OBJECT:
        line = draw(
            st.sampled_from((b"[]", b"1", b'"hello"', b"null", b"[" + _encode(request) + b"]"))
        )
        return RequestLine(line + b"\n", method, None, mutation)
    if mutation == TRUNCATED:
        whole = _encode(request)
        cut = draw(st.integers(1, len(whole) - 1))
        return RequestLine(whole[:cut] + b"\n", method, None, mutation)
    if mutation == LINE_INVALID_UTF8:
        line = _encode(request)[:-1] + b',"x":"\xff"}'
        return RequestLine(line + b"\n", method, None, mutation)
    if mutation == TOO_DEEP:
        depth = draw(st.integers(crossdesk.MAX_DEPTH + 1, crossdesk.MAX_DEPTH + 40))
        line = mutations.splice(request, "x_deep", mutations.nested(depth - 1))
        return RequestLine(line + b"\n", method, rid, mutation, "x_deep")
    if mutation == OVERSIZED_LINE:
        extra = draw(st.sampled_from((1, 100, 70_000)))
        pad = crossdesk.MAX_REQUEST_BYTES - len(_encode(request)) + extra
        line = _encode({**request, "x_pad": "x" * max(pad, 1)})
        return RequestLine(line + b"\n", method, None, mutation, "x_pad")
    raise ValueError(mutation)  # pragma: no cover


def sequences(
    methods: tuple[str, ...] = FUZZ_METHODS, *, min_size: int = 1, max_size: int = 6
) -> st.SearchStrategy[list[RequestLine]]:
    """Lists of lines whose ids come from a small pool (duplicate and reused ids)."""
    pool = st.lists(request_ids, min_size=1, max_size=3, unique=True)
    return pool.flatmap(
        lambda ids: st.lists(
            st.one_of(
                lines(methods, st.sampled_from(ids)),
                near_valid_lines(methods, st.sampled_from(ids)),
            ),
            min_size=min_size,
            max_size=max_size,
        )
    )
