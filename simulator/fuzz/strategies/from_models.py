"""Hypothesis strategies read off msgspec models, so that they follow the models.

`values(model)` walks `msgspec.inspect.type_info(model)` and builds JSON-ready
values (dicts, lists, strings, numbers) that the model accepts: every required
field, optional ones sometimes, each within the model's constraints (lengths,
bounds, patterns, literals, tags). A `twin` model of the same message (the lenient
reading of `wire/messages.py` beside the strict one of `wire/strict.py`) narrows the
constraints further, so that a value is accepted by both.

`kinds(type)` says which JSON kinds a field accepts; the near-valid mutations use it
to pick a value of a kind the field refuses.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from hypothesis import strategies as st
from msgspec import inspect as mi

#: Sizes that keep valid examples small and fast; mutations go far past them.
MAX_TEXT = 24
MAX_ITEMS = 3
#: JSON integers every decoder here reads exactly (msgspec: 64 bits; JavaScript: 2^53).
SAFE_INT = 2**53 - 1

JSON_KINDS = ("string", "integer", "number", "boolean", "null", "array", "object")

_VERSION_PATTERNS = {r"^\d+\.\d+$"}

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-SAFE_INT, SAFE_INT),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.text(max_size=MAX_TEXT),
)
#: Any small JSON value.
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=MAX_ITEMS),
        st.dictionaries(st.text(max_size=8), inner, max_size=MAX_ITEMS),
    ),
    max_leaves=6,
)


def type_of(model: Any) -> mi.Type:
    return mi.type_info(model)


def values(model: Any, twin: Any = None) -> st.SearchStrategy[Any]:
    """JSON-ready values `model` accepts (and `twin`, when given, accepts too)."""
    return strategy(type_of(model), type_of(twin) if twin is not None else None)


def strategy(t: mi.Type, twin: mi.Type | None = None) -> st.SearchStrategy[Any]:
    twin = _match(t, twin)
    if isinstance(t, mi.StructType):
        return _struct(t, twin if isinstance(twin, mi.StructType) else None)
    if isinstance(t, mi.UnionType):
        return st.one_of(*(strategy(m, twin) for m in t.types))
    if isinstance(t, mi.StrType):
        return _text(t, twin if isinstance(twin, mi.StrType) else None)
    if isinstance(t, mi.BoolType):
        return st.booleans()
    if isinstance(t, mi.IntType):
        return _integers(t, twin if isinstance(twin, mi.IntType) else None)
    if isinstance(t, mi.FloatType):
        return _floats(t, twin if isinstance(twin, mi.FloatType) else None)
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.LiteralType):
        allowed = list(t.values)
        if isinstance(twin, mi.LiteralType):
            allowed = [v for v in allowed if v in twin.values] or allowed
        return st.sampled_from(allowed)
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        other = twin if isinstance(twin, type(t)) else None
        low = max(t.min_length or 0, (other.min_length or 0) if other else 0)
        highs = [h for h in (t.max_length, other.max_length if other else None) if h is not None]
        high = min(highs) if highs else max(low, MAX_ITEMS)
        inner = other.item_type if other else None
        return st.lists(strategy(t.item_type, inner), min_size=low, max_size=min(high, low + 4))
    if isinstance(t, mi.DictType):
        return st.dictionaries(
            strategy(t.key_type), strategy(t.value_type), max_size=min(t.max_length or 3, 3)
        )
    if isinstance(t, mi.AnyType | mi.RawType):
        return json_values
    raise TypeError(f"no strategy for {t!r}")  # a new msgspec type: add it here


def _match(t: mi.Type, twin: mi.Type | None) -> mi.Type | None:
    """The member of a union twin that describes the same kind of value as `t`."""
    if twin is None or not isinstance(twin, mi.UnionType) or isinstance(t, mi.UnionType):
        return twin
    for member in twin.types:
        if type(member) is type(t):
            return member
    return None


def _struct(t: mi.StructType, twin: mi.StructType | None) -> st.SearchStrategy[dict[str, Any]]:
    twins = {f.encode_name: f for f in (twin.fields if twin is not None else ())}
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in t.fields:
        other = twins.get(field.encode_name)
        made = strategy(field.type, other.type if other is not None else None)
        if field.required or (other is not None and other.required):
            required[field.encode_name] = made
        else:
            optional[field.encode_name] = made
    if t.tag_field is not None:
        required[t.tag_field] = st.just(t.tag)
    return st.fixed_dictionaries(required, optional=optional)


def _text(t: mi.StrType, twin: mi.StrType | None) -> st.SearchStrategy[str]:
    low = max(t.min_length or 0, (twin.min_length or 0) if twin else 0)
    highs = [h for h in (t.max_length, twin.max_length if twin else None) if h is not None]
    high = min(highs) if highs else None
    pattern = t.pattern or (twin.pattern if twin else None)
    if pattern in _VERSION_PATTERNS:
        return st.builds("{}.{}".format, st.integers(0, 99), st.integers(0, 99))
    if pattern is not None:
        made = st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True)
        if low or high is not None:
            made = made.filter(lambda s: low <= len(s) <= (high if high is not None else len(s)))
        return made
    return st.text(
        min_size=low, max_size=min(high if high is not None else MAX_TEXT, low + MAX_TEXT)
    )


def _integers(t: mi.IntType, twin: mi.IntType | None) -> st.SearchStrategy[int]:
    low, high = -SAFE_INT, SAFE_INT
    for bound in (t, twin):
        if bound is None:
            continue
        if bound.ge is not None:
            low = max(low, bound.ge)
        if bound.gt is not None:
            low = max(low, bound.gt + 1)
        if bound.le is not None:
            high = min(high, bound.le)
        if bound.lt is not None:
            high = min(high, bound.lt - 1)
    return st.integers(low, high)


def _floats(t: mi.FloatType, twin: mi.FloatType | None) -> st.SearchStrategy[float]:
    low: float | None = None
    high: float | None = None
    exclude_low = exclude_high = False
    for bound in (t, twin):
        if bound is None:
            continue
        if bound.ge is not None and (low is None or bound.ge >= low):
            low, exclude_low = bound.ge, False
        if bound.gt is not None and (low is None or bound.gt >= low):
            low, exclude_low = bound.gt, True
        if bound.le is not None and (high is None or bound.le <= high):
            high, exclude_high = bound.le, False
        if bound.lt is not None and (high is None or bound.lt <= high):
            high, exclude_high = bound.lt, True
    return st.floats(
        min_value=low,
        max_value=high if high is not None else 1e12,
        exclude_min=exclude_low and low is not None,
        exclude_max=exclude_high and high is not None,
        allow_nan=False,
        allow_infinity=False,
    )


def kinds(t: mi.Type) -> frozenset[str]:
    """The JSON kinds a field of type `t` accepts."""
    if isinstance(t, mi.UnionType):
        found: set[str] = set()
        for member in t.types:
            found |= kinds(member)
        return frozenset(found)
    if isinstance(t, mi.LiteralType):
        return frozenset(
            "boolean" if isinstance(v, bool) else "integer" if isinstance(v, int) else "string"
            for v in t.values
        )
    if isinstance(t, mi.StrType):
        return frozenset({"string"})
    if isinstance(t, mi.BoolType):
        return frozenset({"boolean"})
    if isinstance(t, mi.IntType):
        return frozenset({"integer"})
    if isinstance(t, mi.FloatType):
        return frozenset({"integer", "number"})
    if isinstance(t, mi.NoneType):
        return frozenset({"null"})
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        return frozenset({"array"})
    if isinstance(t, mi.DictType | mi.StructType):
        return frozenset({"object"})
    return frozenset(JSON_KINDS)


#: One value of each JSON kind, none of which any other kind accepts.
KIND_SAMPLES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=8),
    "integer": st.integers(-1000, 1000),
    "number": st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda x: not float(x).is_integer()
    ),
    "boolean": st.booleans(),
    "null": st.none(),
    "array": st.lists(st.integers(0, 9), max_size=2),
    "object": st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=2),
}


def wrong_kind(t: mi.Type) -> st.SearchStrategy[Any] | None:
    """Values of a JSON kind the field refuses; None when it takes anything."""
    refused = [k for k in JSON_KINDS if k not in kinds(t)]
    if not refused:
        return None
    return st.sampled_from(refused).flatmap(KIND_SAMPLES.__getitem__)


def decode(model: Any, data: bytes) -> Any:
    """Decode JSON bytes with `model`; raises msgspec errors as msgspec does."""
    return msgspec.json.decode(data, type=model)


def minimal(model: Any) -> Any:
    """The smallest value `model` accepts: required fields only, each at its least.

    For the peers a fuzzer plays (an agent answering whatever a hub relays), whose
    answers must be valid but need not vary."""
    return _least(type_of(model))


def _least(t: mi.Type) -> Any:
    if isinstance(t, mi.StructType):
        made = {f.encode_name: _least(f.type) for f in t.fields if f.required}
        if t.tag_field is not None:
            made[t.tag_field] = t.tag
        return made
    if isinstance(t, mi.UnionType):
        for member in t.types:
            if isinstance(member, mi.NoneType):
                return None
        return _least(t.types[0])
    if isinstance(t, mi.StrType):
        return "x" * (t.min_length or 0)
    if isinstance(t, mi.BoolType):
        return False
    if isinstance(t, mi.IntType | mi.FloatType):
        if t.ge is not None:
            return t.ge
        if t.gt is not None:
            return t.gt + 1
        return 0
    if isinstance(t, mi.LiteralType):
        return t.values[0]
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        return [_least(t.item_type) for _ in range(t.min_length or 0)]
    if isinstance(t, mi.DictType):
        return {}
    return None
