"""A small vocabulary for strict, declarative validation of plain data (YAML).

A scenario's schema (`simulator/scenario/schema.py`) and the fault kinds'
parameters (`simulator/faults.py`) are written as tables of these specs. Every
spec checks one value and returns it normalised (defaults filled in); the first
problem raises `SchemaError` naming where it is — file, step, key path — and
what was expected, with a "did you mean" for a misspelt key. Nothing unknown is
ever ignored: a typo must not turn a fault off and let a scenario pass.

References to declared names (agents, clients, checkers, message types) and
backend restrictions are checked against a `Context`, so one table serves a
file loaded for any backend, or for none.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: Marks a field without a default (absent stays absent).
NO_DEFAULT: Any = object()


class SchemaError(ValueError):
    """Invalid data; the message says where and why."""

    def __init__(self, where: Where, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Where:
    """A place in a document: its file, the step it is in, and the key path."""

    file: str = "<scenario>"
    step: int | None = None
    step_kind: str | None = None
    keys: tuple[str, ...] = ()

    def key(self, name: object) -> Where:
        return replace(self, keys=(*self.keys, str(name)))

    def at_step(self, index: int, kind: str | None) -> Where:
        return replace(self, step=index, step_kind=kind, keys=())

    def __str__(self) -> str:
        parts = [self.file]
        if self.step is not None:
            parts.append(f"step {self.step}" + (f" ({self.step_kind})" if self.step_kind else ""))
        if self.keys:
            parts.append(".".join(self.keys))
        return ": ".join(parts)


@dataclass(frozen=True, slots=True)
class Context:
    """What references resolve against: declared names, and the backend (None: any)."""

    backend: str | None = None
    names: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def known(self, kind: str) -> Sequence[str] | None:
        return self.names.get(kind)


class Spec:
    """One kind of value. Subclasses implement `check` and `describe`."""

    def check(self, value: Any, where: Where, context: Context) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_error(spec: Spec, value: Any, where: Where) -> SchemaError:
    return SchemaError(where, f"expected {spec.describe()}, got {_shown(value)}")


@dataclass(frozen=True, slots=True)
class Text(Spec):
    choices: tuple[str, ...] | None = None
    nonempty: bool = True

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if not isinstance(value, str) or (self.nonempty and not value):
            raise _type_error(self, value, where)
        if self.choices is not None and value not in self.choices:
            raise SchemaError(where, _unknown_value(value, self.choices))
        return value

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        return "text" if not self.nonempty else "non-empty text"


@dataclass(frozen=True, slots=True)
class Integer(Spec):
    minimum: int | None = None
    maximum: int | None = None

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(self, value, where)
        _in_range(value, self.minimum, self.maximum, where)
        return value

    def describe(self) -> str:
        return "an integer" + _range_text(self.minimum, self.maximum)


@dataclass(frozen=True, slots=True)
class Number(Spec):
    """An int or float (never a string such as "10s"); `unit` names what it counts."""

    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""
    #: The minimum itself is not allowed (a timeout must be > 0).
    exclusive_minimum: bool = False

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise SchemaError(where, f"expected {self._noun()}, got {_shown(value)}")
        if self.exclusive_minimum and self.minimum is not None and value <= self.minimum:
            raise SchemaError(where, f"must be more than {self.minimum:g}, got {value}")
        _in_range(value, self.minimum, self.maximum, where)
        return value

    def _noun(self) -> str:
        return f"a number of {self.unit}" if self.unit else "a number"

    def describe(self) -> str:
        if self.exclusive_minimum and self.minimum is not None:
            return f"{self._noun()} > {self.minimum:g}"
        return self._noun() + _range_text(self.minimum, self.maximum)


def seconds(minimum: float = 0.0, *, exclusive: bool = False) -> Number:
    return Number(minimum=minimum, unit="seconds", exclusive_minimum=exclusive)


@dataclass(frozen=True, slots=True)
class Boolean(Spec):
    def check(self, value: Any, where: Where, context: Context) -> Any:
        if not isinstance(value, bool):
            raise _type_error(self, value, where)
        return value

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True, slots=True)
class Literal(Spec):
    value: Any

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if value != self.value or type(value) is not type(self.value):
            raise _type_error(self, value, where)
        return value

    def describe(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Anything(Spec):
    """Free-form data (a request payload); `mapping` requires a mapping."""

    mapping: bool = False

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if self.mapping and not isinstance(value, Mapping):
            raise _type_error(self, value, where)
        return value

    def describe(self) -> str:
        return "a mapping" if self.mapping else "any value"


@dataclass(frozen=True, slots=True)
class Ref(Spec):
    """A name that must be declared: `kind` is a key of `Context.names`."""

    kind: str
    noun: str

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if not isinstance(value, str) or not value:
            raise _type_error(self, value, where)
        known = context.known(self.kind)
        if known is not None and value not in known:
            raise SchemaError(where, f"no {self.noun} {value!r}" + _suggest(value, known, True))
        return value

    def describe(self) -> str:
        return f"the name of a {self.noun}"


@dataclass(frozen=True, slots=True)
class ListOf(Spec):
    item: Spec
    nonempty: bool = False
    #: A single item is accepted for a list of one (`types: PONG`).
    single: bool = False

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if self.single and not isinstance(value, list):
            value = [value]
        if not isinstance(value, list) or (self.nonempty and not value):
            raise _type_error(self, value, where)
        return [self.item.check(v, where.key(i), context) for i, v in enumerate(value)]

    def describe(self) -> str:
        return ("a non-empty list" if self.nonempty else "a list") + f" of {self.item.describe()}"


@dataclass(frozen=True, slots=True)
class MapOf(Spec):
    """A mapping with free keys (declared names, paths) and values of one spec."""

    value: Spec
    key: Spec = Text()

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if not isinstance(value, Mapping):
            raise _type_error(self, value, where)
        checked = {}
        for k, v in value.items():
            self.key.check(k, where.key(k), context)
            checked[k] = self.value.check(v, where.key(k), context)
        return checked

    def describe(self) -> str:
        return f"a mapping of {self.key.describe()} to {self.value.describe()}"


@dataclass(frozen=True, slots=True)
class Field:
    spec: Spec
    required: bool = False
    default: Any = NO_DEFAULT
    #: Backends on which the field may be given (None: all).
    backends: frozenset[str] | None = None
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Record(Spec):
    """A mapping with fixed keys; any other key is an error."""

    fields: Mapping[str, Field]
    noun: str = "a mapping"
    #: Extra checks over the whole record (say, "state or exit_code").
    rules: tuple[Callable[[dict[str, Any], Where], None], ...] = ()

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if value is None and not any(f.required for f in self.fields.values()):
            value = {}
        if not isinstance(value, Mapping):
            raise _type_error(self, value, where)
        for key in value:
            if key not in self.fields:
                raise SchemaError(where, _unknown_key(key, self.fields))
        checked: dict[str, Any] = {}
        for name, spec in self.fields.items():
            if name not in value:
                if spec.required:
                    raise SchemaError(where, f"`{name}` is required ({spec.spec.describe()})")
                if spec.default is not NO_DEFAULT:
                    checked[name] = spec.default
                continue
            if (
                spec.backends is not None
                and context.backend is not None
                and context.backend not in spec.backends
            ):
                allowed = " and ".join(sorted(spec.backends))
                raise SchemaError(
                    where.key(name),
                    f"not supported on the {context.backend} backend (only on {allowed})",
                )
            checked[name] = spec.spec.check(value[name], where.key(name), context)
        for rule in self.rules:
            rule(checked, where)
        return checked

    def describe(self) -> str:
        return self.noun


@dataclass(frozen=True, slots=True)
class Tagged(Spec):
    """A mapping with exactly one key, the tag, whose value the tag's spec checks
    (a scenario step: `{fault: {...}}`). The tag goes into `Where.step_kind`."""

    variants: Mapping[str, Spec]
    noun: str = "step"

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if not isinstance(value, Mapping) or len(value) != 1:
            raise SchemaError(
                where, f"a {self.noun} is a mapping with exactly one of {', '.join(self.variants)}"
            )
        ((tag, inner),) = value.items()
        if tag not in self.variants:
            raise SchemaError(where, f"unknown {self.noun} {tag!r}" + _suggest(tag, self.variants))
        return tag, self.variants[tag].check(inner, replace(where, step_kind=tag), context)

    def describe(self) -> str:
        return f"a {self.noun}"


@dataclass(frozen=True, slots=True)
class Switch(Spec):
    """A record chosen by the value of one of its keys (a fault by its `kind`)."""

    key: str
    variants: Mapping[str, Record]
    #: Backends each variant may run on (absent: all).
    backends: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: The variant when the key is absent (None: the key is required).
    default: str | None = None
    #: What the key's value is called in messages.
    noun: str = "kind"

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if not isinstance(value, Mapping):
            raise _type_error(self, value, where)
        if self.key not in value and self.default is None:
            raise SchemaError(
                where, f"`{self.key}` is required (one of {', '.join(self.variants)})"
            )
        tag = value.get(self.key, self.default)
        if not isinstance(tag, str) or tag not in self.variants:
            raise SchemaError(
                where.key(self.key), _unknown_value(tag, tuple(self.variants), self.noun)
            )
        allowed = self.backends.get(tag)
        if allowed is not None and context.backend is not None and context.backend not in allowed:
            raise SchemaError(
                where.key(self.key),
                f"{tag} is not supported on the {context.backend} backend "
                f"(only on {' and '.join(sorted(allowed))})",
            )
        rest = {k: v for k, v in value.items() if k != self.key}
        return {self.key: tag, **self.variants[tag].check(rest, where, context)}

    def describe(self) -> str:
        return f"a mapping with `{self.key}:` one of {', '.join(self.variants)}"


@dataclass(frozen=True, slots=True)
class ByKey(Spec):
    """A record chosen by which of its distinguishing keys is present
    (`expect: {client: ...}` versus `expect: {agent: ...}`); exactly one must be."""

    variants: Mapping[str, Record]

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if not isinstance(value, Mapping):
            raise _type_error(self, value, where)
        present = [key for key in self.variants if key in value]
        if len(present) != 1:
            names = ", ".join(f"`{k}:`" for k in self.variants)
            if not present:
                raise SchemaError(
                    where, f"needs one of {names}" + _first_unknown(value, self.variants)
                )
            raise SchemaError(where, f"takes only one of {names}, got {present}")
        return self.variants[present[0]].check(value, where, context)

    def describe(self) -> str:
        return "a mapping with one of " + ", ".join(self.variants)


@dataclass(frozen=True, slots=True)
class OneOf(Spec):
    """The first alternative that accepts the value (`heal: all` or `heal: {agent: A}`)."""

    alternatives: tuple[Spec, ...]

    def check(self, value: Any, where: Where, context: Context) -> Any:
        mapping_problem: SchemaError | None = None
        for alternative in self.alternatives:
            try:
                return alternative.check(value, where, context)
            except SchemaError as exc:
                if isinstance(alternative, Record | Switch | ByKey):
                    mapping_problem = mapping_problem or exc
        # A mapping that is almost right says what is wrong with it.
        if isinstance(value, Mapping) and mapping_problem is not None:
            raise mapping_problem
        raise _type_error(self, value, where)

    def describe(self) -> str:
        return " or ".join(a.describe() for a in self.alternatives)


def _in_range(value: float, low: float | None, high: float | None, where: Where) -> None:
    if low is not None and value < low:
        raise SchemaError(where, f"must be at least {low:g}, got {value}")
    if high is not None and value > high:
        raise SchemaError(where, f"must be at most {high:g}, got {value}")


def _range_text(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f" within {low:g}..{high:g}"
    if low is not None:
        return f" >= {low:g}"
    if high is not None:
        return f" <= {high:g}"
    return ""


def _suggest(value: Any, known: Any, list_known: bool = False) -> str:
    names = [str(k) for k in known]
    close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if list_known or not close:
        hint += f"; known: {', '.join(names) if names else 'none'}"
    return hint


def _unknown_key(key: Any, allowed: Mapping[str, Any]) -> str:
    names = list(allowed)
    close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listed = ", ".join(names) if names else "none"
    return f"unknown key {str(key)!r}{hint}; allowed: {listed}"


def _unknown_value(value: Any, choices: Sequence[str], noun: str = "value") -> str:
    close = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {noun} {_shown(value)}{hint}; one of {', '.join(choices)}"


def _first_unknown(value: Mapping[str, Any], variants: Mapping[str, Record]) -> str:
    known = {key for record in variants.values() for key in record.fields}
    for key in value:
        if key not in known:
            return "; " + _unknown_key(key, {k: None for k in sorted(known)})
    return ""
