"""Strategies for every dsh-computers body and event: valid, and near-valid.

The dsh-computers messages are described once, in `wire/dsh/schema.py`, as plain
`Shape`s (that package is standard-library only: the standalone agent imports it).
`SHAPES` collects every shape that module defines, by its name there, and
`model_of` turns one into an equivalent msgspec struct (unknown fields forbidden,
as a strict peer reads), so that the same generators and mutations serve all three
specs. Whether a value fits is still judged by `schema.problems` itself: the
strategies cannot drift from the shapes, and the tests check them against the
schema, not against the struct made here.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

import msgspec
from hypothesis import strategies as st

from tetherbed.simulator.fuzz.strategies import mutations
from tetherbed.simulator.fuzz.strategies.from_models import values
from tetherbed.wire.dsh import constants, schema

#: Every shape `wire/dsh/schema.py` defines, by its name there (ENROLL_REQUEST, EXEC, ...).
SHAPES: dict[str, schema.Shape] = {
    name: value
    for name, value in vars(schema).items()
    if name.isupper()
    and isinstance(value, Mapping)
    and value
    and all(isinstance(f, schema.Field) for f in value.values())
}

#: What travels where (§3, §4, §11): agent → hub bodies, hub → agent SSE events,
#: browser → hub bodies, and the hub's answers.
AGENT_BODIES = (
    "ENROLL_REQUEST",
    "RESULT",
    "CHUNK",
    "TYPED_CHUNK",
    "HEARTBEAT",
    "FS_RESULT",
)
SSE_EVENTS = {
    constants.Event.HELLO: "HELLO",
    constants.Event.EXEC: "EXEC",
    constants.Event.CANCEL: "CANCEL",
    constants.Event.PING: "PING",
    constants.Event.CONFIG: "CONFIG",
    constants.Event.FS: "FS_REQUEST",
}
BROWSER_BODIES = ("CREATE_KEY", "DELETE", "RENAME", "RUNTIME_CONNECT", "RUNTIME_ENABLE")

_PY_TO_TYPE = {str: str, int: int, float: float, bool: bool, list: list, dict: dict}


def _type(field: schema.Field, name: str) -> Any:
    members: list[Any] = []
    for t in field.types:
        if t is schema.NULL:
            members.append(None)
        elif t is float:
            if int not in field.types:
                members.append(float)
        elif t is int and float in field.types:
            members.append(float)  # msgspec's float takes JSON integers too
        elif t is list:
            if field.shape is not None:
                members.append(list[model_of(field.shape, f"{name}Item")])  # type: ignore[misc]
            elif field.items is not None:
                members.append(list[_union(list(field.items))])  # type: ignore[misc]
            else:
                members.append(list[Any])
        elif t is dict:
            members.append(
                model_of(field.shape, name) if field.shape is not None else dict[str, Any]
            )
        else:
            members.append(_PY_TO_TYPE[t])
    return _union(members)


def _union(members: list[Any]) -> Any:
    unique: list[Any] = []
    for member in members:
        if member not in unique:
            unique.append(member)
    made = unique[0]
    for member in unique[1:]:
        made = made | member
    return made


@cache
def _model(shape_id: int, name: str) -> type[msgspec.Struct]:
    shape = _BY_ID[shape_id]
    fields: list[Any] = []
    for field_name, field in shape.items():
        t = _type(field, f"{name}_{field_name}")
        if field.required:
            fields.append((field_name, t))
        else:
            fields.append((field_name, t | msgspec.UnsetType, msgspec.UNSET))
    return msgspec.defstruct(name, fields, kw_only=True, forbid_unknown_fields=True)


_BY_ID: dict[int, schema.Shape] = {}


def model_of(shape: schema.Shape, name: str = "Body") -> type[msgspec.Struct]:
    """A msgspec struct that reads `shape` as a strict peer does."""
    _BY_ID[id(shape)] = shape
    return _model(id(shape), name)


def bodies(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Valid values of the shape `name` (strictly: every required field, no other)."""
    return values(model_of(SHAPES[name], name))


def near_valid_bodies(
    name: str, only: tuple[str, ...] | None = None
) -> st.SearchStrategy[mutations.Mutant]:
    """Values of the shape `name` with one thing broken."""
    return mutations.model_mutants(model_of(SHAPES[name], name), bodies(name), only)


#: Every shape's valid values, by name.
BODIES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    name: st.deferred(lambda name=name: bodies(name)) for name in SHAPES
}
#: Every shape's near-valid values, by name.
NEAR_VALID_BODIES: dict[str, st.SearchStrategy[mutations.Mutant]] = {
    name: st.deferred(lambda name=name: near_valid_bodies(name)) for name in SHAPES
}


def sse_events() -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of the hub's SSE stream."""
    return st.sampled_from(sorted(SSE_EVENTS.items())).flatmap(
        lambda pair: st.tuples(st.just(pair[0]), bodies(pair[1]))
    )


def oversized_body(limit: int) -> bytes:
    """A JSON body one byte past `limit` (e.g. `constants.ENROLL_BODY_LIMIT`)."""
    head = b'{"x":"'
    return head + b"x" * (limit + 1 - len(head) - 2 + 1) + b'"}'
