"""Near-valid messages: a valid one with exactly one thing wrong.

A mutation takes a valid JSON object of a model (from `from_models.values`) and the
model's type description, and breaks it one way: an unknown field, a missing one, a
value of the wrong JSON kind, a null where none is allowed, a string past its
length, a number past its bounds (huge or negative), a literal the spec does not
list, nesting far deeper than any message needs, or bytes that are not UTF-8. The
result is the bytes to send and the mutation's name, so that a fuzzer can say what
answer the spec calls for and a report can say what was sent.

Which mutations apply depends on the model: a message with no required field
cannot lose one; a field that takes any JSON value has no wrong kind. `mutants`
draws only from those that apply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import strategies as st
from msgspec import inspect as mi

from tetherbed.simulator.fuzz.strategies.from_models import json_values, kinds, wrong_kind

#: Every mutation, by name. `unknown_field` is the only one a lenient receiver may accept.
UNKNOWN_FIELD = "unknown_field"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
NULL_FIELD = "null_field"
OVERSIZED_STRING = "oversized_string"
OUT_OF_RANGE = "out_of_range_number"
HUGE_NUMBER = "huge_number"
BAD_LITERAL = "bad_literal"
DEEP_NESTING = "deep_nesting"
INVALID_UTF8 = "invalid_utf8"

MUTATIONS = (
    UNKNOWN_FIELD,
    MISSING_FIELD,
    WRONG_TYPE,
    NULL_FIELD,
    OVERSIZED_STRING,
    OUT_OF_RANGE,
    HUGE_NUMBER,
    BAD_LITERAL,
    DEEP_NESTING,
    INVALID_UTF8,
)

#: Mutations a model may accept: a model with no upper bound on an integer reads
#: one past 64 bits (msgspec does), so these test the code behind the model.
MODEL_MAY_ACCEPT = frozenset({HUGE_NUMBER})

#: Nesting depths drawn by DEEP_NESTING: past crossdesk's 32, and past the
#: interpreter's recursion limit that bounds msgspec (about 1000).
DEEP_LEVELS = st.sampled_from((33, 40, 64, 1100, 5000))

_encode = msgspec.json.Encoder().encode


@dataclass(frozen=True, slots=True)
class Mutant:
    """One near-valid message: its bytes, what was broken, and where."""

    data: bytes
    mutation: str
    field: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "data": self.data.decode("utf-8", "surrogateescape"),
            "mutation": self.mutation,
            "field": self.field,
        }


def nested(depth: int, leaf: bytes = b"0") -> bytes:
    """`depth` arrays one inside the other, as JSON bytes (never built as objects)."""
    return b"[" * depth + leaf + b"]" * depth


def splice(value: dict[str, Any], name: str, raw: bytes) -> bytes:
    """`value` encoded with field `name` set to the raw JSON bytes `raw`."""
    rest = {k: v for k, v in value.items() if k != name}
    head = _encode(rest)
    key = _encode(name)
    if head == b"{}":
        return b"{" + key + b":" + raw + b"}"
    return head[:-1] + b"," + key + b":" + raw + b"}"


def _fields(t: mi.StructType) -> list[mi.Field]:
    return [f for f in t.fields if f.encode_name != t.tag_field]


def _leaf(t: mi.Type) -> mi.Type:
    """The non-null, non-unset member of an optional type."""
    if isinstance(t, mi.UnionType):
        members = [m for m in t.types if not isinstance(m, mi.NoneType)]
        if len(members) == 1:
            return members[0]
    return t


def _bounded_strings(t: mi.StructType) -> list[tuple[str, int]]:
    found = []
    for f in _fields(t):
        leaf = _leaf(f.type)
        if isinstance(leaf, mi.StrType) and leaf.max_length is not None:
            found.append((f.encode_name, leaf.max_length))
    return found


def _numbers(t: mi.StructType) -> list[tuple[str, mi.IntType | mi.FloatType]]:
    return [
        (f.encode_name, leaf)
        for f in _fields(t)
        if isinstance(leaf := _leaf(f.type), mi.IntType | mi.FloatType)
    ]


def _out_of_range(bound: mi.IntType | mi.FloatType) -> list[int | float]:
    """Values just outside the field's bounds (negative ones for a nonnegative field)."""
    found: list[int | float] = []
    step = 1 if isinstance(bound, mi.IntType) else 0.5
    if bound.ge is not None:
        found.append(bound.ge - step)
    if bound.gt is not None:
        found.append(bound.gt if isinstance(bound, mi.IntType) else bound.gt - step)
    if bound.le is not None:
        found.append(bound.le + step)
    if bound.lt is not None:
        found.append(bound.lt)
    lower = bound.ge if bound.ge is not None else bound.gt
    if isinstance(bound, mi.IntType) and lower is not None and lower >= 0:
        found.append(-(2**31))
    return found


def applicable(t: mi.StructType) -> list[str]:
    """The mutations that break a message of this model."""
    fields = _fields(t)
    found = [UNKNOWN_FIELD, DEEP_NESTING, INVALID_UTF8]
    if any(f.required for f in fields):
        found.append(MISSING_FIELD)
    if any(wrong_kind(f.type) is not None for f in fields):
        found.append(WRONG_TYPE)
    if any("null" not in kinds(f.type) and kinds(f.type) for f in fields):
        found.append(NULL_FIELD)
    if _bounded_strings(t):
        found.append(OVERSIZED_STRING)
    if any(_out_of_range(b) for _, b in _numbers(t)):
        found.append(OUT_OF_RANGE)
    if any(isinstance(b, mi.IntType) for _, b in _numbers(t)):
        found.append(HUGE_NUMBER)
    if any(isinstance(_leaf(f.type), mi.LiteralType) for f in fields):
        found.append(BAD_LITERAL)
    return found


def mutants(
    t: mi.StructType,
    valid: st.SearchStrategy[dict[str, Any]],
    only: tuple[str, ...] | None = None,
) -> st.SearchStrategy[Mutant]:
    """Near-valid messages of model `t`, from valid ones drawn from `valid`."""
    names = [m for m in applicable(t) if only is None or m in only]
    if not names:
        return st.nothing()
    return _mutant(t, valid, tuple(names))


def model_mutants(
    model: type,
    valid: st.SearchStrategy[dict[str, Any]],
    only: tuple[str, ...] | None = None,
) -> st.SearchStrategy[Mutant]:
    """`mutants` of a msgspec struct model, read through its type info."""
    info = mi.type_info(model)
    assert isinstance(info, mi.StructType)
    return mutants(info, valid, only)


@st.composite
def _mutant(
    draw: Callable[[st.SearchStrategy[Any]], Any],
    t: mi.StructType,
    valid: st.SearchStrategy[dict[str, Any]],
    names: tuple[str, ...],
) -> Mutant:
    name = draw(st.sampled_from(names))
    return _BREAK[name](t, draw(valid), draw)


# --- each mutation -------------------------------------------------------------------------


def _unknown(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    known = {f.encode_name for f in t.fields}
    suffix = draw(st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8))
    name = f"x_{suffix}"
    while name in known:
        name += "_"
    extra = draw(json_values)
    return Mutant(_encode({**value, name: extra}), UNKNOWN_FIELD, name)


def _missing(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    field = draw(st.sampled_from([f.encode_name for f in _fields(t) if f.required]))
    return Mutant(_encode({k: v for k, v in value.items() if k != field}), MISSING_FIELD, field)


def _wrong_type(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    choices = [f for f in _fields(t) if wrong_kind(f.type) is not None]
    field = draw(st.sampled_from(choices))
    bad = draw(wrong_kind(field.type))  # type: ignore[arg-type]
    return Mutant(_encode({**value, field.encode_name: bad}), WRONG_TYPE, field.encode_name)


def _null(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    choices = [f.encode_name for f in _fields(t) if "null" not in kinds(f.type) and kinds(f.type)]
    field = draw(st.sampled_from(choices))
    return Mutant(_encode({**value, field: None}), NULL_FIELD, field)


def _oversized(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    field, limit = draw(st.sampled_from(_bounded_strings(t)))
    extra = draw(st.sampled_from((1, 2, 100, 70_000)))
    return Mutant(_encode({**value, field: "x" * (limit + extra)}), OVERSIZED_STRING, field)


def _range(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    choices = [(name, b) for name, b in _numbers(t) if _out_of_range(b)]
    field, bound = draw(st.sampled_from(choices))
    bad = draw(st.sampled_from(_out_of_range(bound)))
    return Mutant(_encode({**value, field: bad}), OUT_OF_RANGE, field)


def _huge(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    field = draw(st.sampled_from([n for n, b in _numbers(t) if isinstance(b, mi.IntType)]))
    bad = draw(st.sampled_from((2**64, -(2**64), 10**30, -(10**30))))
    return Mutant(splice(value, field, str(bad).encode()), HUGE_NUMBER, field)


def _literal(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    choices = [f for f in _fields(t) if isinstance(_leaf(f.type), mi.LiteralType)]
    field = draw(st.sampled_from(choices))
    allowed = set(_leaf(field.type).values)  # type: ignore[attr-defined]
    bad = draw(st.text(min_size=1, max_size=12).filter(lambda s: s not in allowed))
    return Mutant(_encode({**value, field.encode_name: bad}), BAD_LITERAL, field.encode_name)


def _deep(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    depth = draw(DEEP_LEVELS)
    # A field no array fits, or a new one: either way no model takes it.
    names = [f.encode_name for f in _fields(t) if "array" not in kinds(f.type)] or ["x_deep"]
    field = draw(st.sampled_from(names))
    return Mutant(splice(value, field, nested(depth)), DEEP_NESTING, field)


def _utf8(t: mi.StructType, value: dict[str, Any], draw: Any) -> Mutant:
    bad = draw(st.sampled_from((b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80")))
    names = [f.encode_name for f in _fields(t)] or ["x_text"]
    field = draw(st.sampled_from(names))
    return Mutant(splice(value, field, b'"' + bad + b'"'), INVALID_UTF8, field)


_BREAK: dict[str, Callable[[mi.StructType, dict[str, Any], Any], Mutant]] = {
    UNKNOWN_FIELD: _unknown,
    MISSING_FIELD: _missing,
    WRONG_TYPE: _wrong_type,
    NULL_FIELD: _null,
    OVERSIZED_STRING: _oversized,
    OUT_OF_RANGE: _range,
    HUGE_NUMBER: _huge,
    BAD_LITERAL: _literal,
    DEEP_NESTING: _deep,
    INVALID_UTF8: _utf8,
}
assert set(_BREAK) == set(MUTATIONS)
