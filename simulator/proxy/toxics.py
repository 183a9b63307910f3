"""Toxic definitions in Toxiproxy's JSON shape: name, type, stream, toxicity, attributes.

A `Toxic` is an immutable description; what it does to bytes lives in
`stages.py`. Parsing follows Toxiproxy: the name defaults to `<type>_<stream>`,
the stream to `downstream`, toxicity to 1.0; unknown attributes are ignored and
missing ones are 0. Times are milliseconds except the slicer's `delay`, which is
microseconds, as in Toxiproxy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.streams import DOWNSTREAM, STREAMS, Stream

# Every supported type with its attributes and their defaults.
TOXIC_TYPES: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        "latency": {"latency": 0, "jitter": 0},
        "bandwidth": {"rate": 0},
        "slow_close": {"delay": 0},
        "timeout": {"timeout": 0},
        "reset_peer": {"timeout": 0},
        "slicer": {"average_size": 0, "size_variation": 0, "delay": 0},
        "limit_data": {"bytes": 0},
    }
)


@dataclass(frozen=True)
class Toxic:
    name: str
    type: str
    stream: Stream
    toxicity: float = 1.0
    attributes: Mapping[str, int] = field(default_factory=dict)

    def attribute(self, key: str) -> int:
        return self.attributes.get(key, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": dict(self.attributes),
        }

    @classmethod
    def create(
        cls,
        type: str,
        *,
        name: str | None = None,
        stream: str = DOWNSTREAM,
        toxicity: float = 1.0,
        **attributes: float,
    ) -> Toxic:
        """The Python-side constructor: `Toxic.create("latency", latency=200)`."""
        body: dict[str, Any] = {"type": type, "stream": stream, "toxicity": toxicity}
        if name:
            body["name"] = name
        body["attributes"] = attributes
        return cls.from_json(body)

    @classmethod
    def from_json(cls, body: object) -> Toxic:
        if not isinstance(body, Mapping):
            raise errors.bad_body("a toxic is a JSON object")
        kind = body.get("type")
        if kind not in TOXIC_TYPES:
            raise errors.invalid_toxic_type(kind)
        stream = body.get("stream") or DOWNSTREAM
        if stream not in STREAMS:
            raise errors.invalid_stream()
        name = body.get("name") or f"{kind}_{stream}"
        if not isinstance(name, str):
            raise errors.bad_body("name must be a string")
        toxicity = _toxicity(body.get("toxicity", 1.0))
        attributes = _attributes(kind, body.get("attributes") or {}, dict(TOXIC_TYPES[kind]))
        return cls(name, kind, stream, toxicity, MappingProxyType(attributes))

    def updated(self, body: object) -> Toxic:
        """A copy with the toxicity and attributes given in `body` (type and stream stay)."""
        if not isinstance(body, Mapping):
            raise errors.bad_body("a toxic is a JSON object")
        toxicity = _toxicity(body.get("toxicity", self.toxicity))
        attributes = _attributes(self.type, body.get("attributes") or {}, dict(self.attributes))
        return Toxic(self.name, self.type, self.stream, toxicity, MappingProxyType(attributes))


def _toxicity(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise errors.bad_body("toxicity must be a number")
    return float(value)


def _attributes(kind: str, given: object, base: dict[str, int]) -> dict[str, int]:
    if not isinstance(given, Mapping):
        raise errors.bad_body("attributes must be an object")
    for key, value in given.items():
        if key not in TOXIC_TYPES[kind]:
            continue  # Toxiproxy ignores attributes a toxic does not have
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise errors.bad_body(f"attribute {key} must be a number")
        if isinstance(value, float) and not value.is_integer():
            raise errors.bad_body(f"attribute {key} must be an integer")
        base[key] = int(value)
    return base
