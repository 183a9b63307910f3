"""Fault kinds: one table, one meaning on every backend.

A scenario's `fault: {agent: A, kind: K, ...}` names a kind from `FAULT_KINDS`
with that kind's parameters (the scenario schema checks them against this
table). `plan()` turns it into fault-proxy operations — Toxiproxy toxics,
WebSocket message rules, a reset, an injected close — and every backend carries
out those same operations:

- process: on the agent's own `FaultProxy`, in the runner's process;
- docker: on the agent's `tetherbed proxy`, over its Toxiproxy-style HTTP API
  (plus the kernel's netem and iptables where those are the real thing);
- sim: on the in-memory network, which runs the proxy's own toxic stages and
  rule book over the frames it carries, so a bandwidth limit serialises frames,
  a slicer spaces each frame's pieces and limit_data counts the bytes of its
  own direction per connection — exactly as through the proxy.

Directions are the agent's view: `to_hub` is the proxy's upstream (agent →
hub), `from_hub` its downstream. A fault of the same kind and direction
replaces the one before it; `clear` removes them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tetherbed.simulator.proxy.streams import DOWNSTREAM, UPSTREAM, Stream
from tetherbed.simulator.proxy.toxics import Toxic
from tetherbed.simulator.validation import (
    Context,
    Field,
    Integer,
    ListOf,
    Number,
    Record,
    SchemaError,
    Spec,
    Text,
    Where,
)
from tetherbed.wire.messages import MessageType

#: Scenario directions → the proxy's streams.
DIRECTIONS: Mapping[str, tuple[Stream, ...]] = MappingProxyType(
    {"both": (UPSTREAM, DOWNSTREAM), "to_hub": (UPSTREAM,), "from_hub": (DOWNSTREAM,)}
)
#: Scenario directions → the proxy's stream selectors (rules take `both`).
SELECTORS: Mapping[str, str] = MappingProxyType(
    {"both": "both", "to_hub": UPSTREAM, "from_hub": DOWNSTREAM}
)
#: Every backend, for the kinds without a restriction.
ALL_BACKENDS = frozenset({"sim", "process", "docker"})
#: The links a fault can act on: WebSocket agents', SSE agents' (HTTP), or both.
WEBSOCKET_LINKS = frozenset({"websocket"})
HTTP_LINKS = frozenset({"sse"})
ALL_LINKS = WEBSOCKET_LINKS | HTTP_LINKS


# --- what a plan is made of ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddToxic:
    """A Toxiproxy toxic on the agent's link; replaces a toxic of the same name."""

    toxic: Toxic


@dataclass(frozen=True, slots=True)
class AddRule:
    """A WebSocket message rule, as the proxy's HTTP API takes it (`MessageRule` JSON)."""

    rule: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AddHttpRule:
    """An HTTP rule on an SSE agent's link (`proxy.http.rules.HttpRule` JSON)."""

    rule: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ResetConnections:
    """RST every current connection of the agent's link, both sides."""


@dataclass(frozen=True, slots=True)
class InjectClose:
    """A Close frame toward the proxy's `client` (the agent) or `server` (the hub)."""

    toward: str
    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class DropPackets:
    """Random packet loss at the IP level (docker only: iptables in the agent's namespace)."""

    percent: float
    direction: str


FaultOp = AddToxic | AddRule | AddHttpRule | ResetConnections | InjectClose | DropPackets


@dataclass(frozen=True, slots=True)
class FaultKind:
    name: str
    doc: str
    params: Mapping[str, Field]
    plan: Callable[[Mapping[str, Any]], list[FaultOp]]
    backends: frozenset[str] = ALL_BACKENDS
    #: It happens at one moment (a reset), rather than lasting until `clear`.
    instant: bool = False
    #: The agents' transports whose links it can act on (message rules read
    #: WebSocket messages; HTTP rules read HTTP requests).
    transports: frozenset[str] = ALL_LINKS

    def record(self) -> Record:
        """The schema of this kind's parameters (without `agent` and `kind`)."""
        return Record(self.params, noun=f"{self.name} fault")


# --- parameters ---------------------------------------------------------------------

_DIRECTION = Field(Text(tuple(DIRECTIONS)), default="both", doc="both, to_hub or from_hub")
_MILLISECONDS = Integer(minimum=0)
#: Message types a message rule matches; `*` is every data message.
_TYPES = Field(
    ListOf(Text(("*", *(t.value for t in MessageType))), nonempty=True, single=True),
    default=["*"],
    doc="message types (`*`: every data message)",
)
_COUNT = Field(Integer(minimum=1), doc="how many messages (default: every match)")


class _RequestPath(Spec):
    """A request path (no query): `/api/dsh-computers/agent/results` or its tail."""

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if (
            not isinstance(value, str)
            or not value.startswith("/")
            or "?" in value
            or any(ch.isspace() for ch in value)
        ):
            raise SchemaError(where, f"expected {self.describe()}, got {value!r}")
        return value

    def describe(self) -> str:
        return "a request path starting with / (no query), e.g. /agent/results"


_HTTP_PATH = Field(
    _RequestPath(),
    required=True,
    doc="the request path, or its last segments (`/agent/results`)",
)
_HTTP_METHOD = Field(Text(("GET", "POST")), default="POST")
#: HTTP rules live in the fault proxy's object API (process) and the sim network.
HTTP_BACKENDS = frozenset({"sim", "process"})


def _toxics(kind: str, params: Mapping[str, Any], **attributes: int) -> list[FaultOp]:
    return [
        AddToxic(Toxic.create(kind, name=f"{kind}_{stream}", stream=stream, **attributes))
        for stream in DIRECTIONS[params["direction"]]
    ]


def _rules(action: str, params: Mapping[str, Any], **extra: Any) -> list[FaultOp]:
    stream = SELECTORS[params["direction"]]
    count = params.get("count")
    return [
        AddRule(
            {
                "action": action,
                "stream": stream,
                "type": message_type,
                **({"count": count} if count is not None else {}),
                **extra,
            }
        )
        for message_type in params["types"]
    ]


def _latency(p: Mapping[str, Any]) -> list[FaultOp]:
    return _toxics("latency", p, latency=p["latency_ms"], jitter=p["jitter_ms"])


def _bandwidth(p: Mapping[str, Any]) -> list[FaultOp]:
    return _toxics("bandwidth", p, rate=p["rate_kbps"])


def _blackhole(p: Mapping[str, Any]) -> list[FaultOp]:
    # A `timeout` toxic of 0 drops all data and never closes (the proxy's blackhole).
    return [
        AddToxic(Toxic.create("timeout", name=f"blackhole_{stream}", stream=stream, timeout=0))
        for stream in DIRECTIONS[p["direction"]]
    ]


def _slicer(p: Mapping[str, Any]) -> list[FaultOp]:
    return _toxics(
        "slicer",
        p,
        average_size=p["average_size"],
        size_variation=p["size_variation"],
        delay=p["delay_ms"] * 1000,  # Toxiproxy's slicer delay is in microseconds
    )


def _limit_data(p: Mapping[str, Any]) -> list[FaultOp]:
    return _toxics("limit_data", p, bytes=p["bytes"])


def _reset(p: Mapping[str, Any]) -> list[FaultOp]:
    return [ResetConnections()]


def _http_rule(action: str, p: Mapping[str, Any], **extra: Any) -> list[FaultOp]:
    rule = {"action": action, "path": p["path"], "method": p["method"], **extra}
    if p.get("count") is not None:
        rule["count"] = p["count"]
    return [AddHttpRule(rule)]


def _http_drop(p: Mapping[str, Any]) -> list[FaultOp]:
    return _http_rule("drop_response" if p["what"] == "response" else "drop_request", p)


def _inject_close(p: Mapping[str, Any]) -> list[FaultOp]:
    toward = "client" if p["toward"] == "agent" else "server"
    return [InjectClose(toward, p["code"], p["reason"])]


FAULT_KINDS: Mapping[str, FaultKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            FaultKind(
                "latency",
                "each chunk arrives latency_ms ± jitter_ms later",
                {
                    "latency_ms": Field(_MILLISECONDS, required=True),
                    "jitter_ms": Field(_MILLISECONDS, default=0),
                    "direction": _DIRECTION,
                },
                _latency,
            ),
            FaultKind(
                "bandwidth",
                "at most rate_kbps kilobytes (1000 bytes) per second; frames queue behind each "
                "other (Toxiproxy's `rate`)",
                {"rate_kbps": Field(Integer(minimum=1), required=True), "direction": _DIRECTION},
                _bandwidth,
            ),
            FaultKind("reset", "cut the agent's connections now (RST)", {}, _reset, instant=True),
            FaultKind(
                "blackhole",
                "data is dropped, connections stay open",
                {"direction": _DIRECTION},
                _blackhole,
            ),
            FaultKind(
                "slicer",
                "TCP writes cut into average_size ± size_variation byte pieces, delay_ms apart",
                {
                    "average_size": Field(Integer(minimum=1), default=16),
                    "size_variation": Field(Integer(minimum=0), default=0),
                    "delay_ms": Field(_MILLISECONDS, default=1),
                    "direction": _DIRECTION,
                },
                _slicer,
            ),
            FaultKind(
                "limit_data",
                "each connection closes after `bytes` bytes in the direction given",
                {"bytes": Field(Integer(minimum=0), required=True), "direction": _DIRECTION},
                _limit_data,
            ),
            FaultKind(
                "drop",
                "messages of these types are not forwarded",
                {"types": _TYPES, "count": _COUNT, "direction": _DIRECTION},
                lambda p: _rules("drop", p),
                transports=WEBSOCKET_LINKS,
            ),
            FaultKind(
                "delay",
                "messages of these types are forwarded delay_ms late; later ones overtake them",
                {
                    "types": _TYPES,
                    "delay_ms": Field(_MILLISECONDS, required=True),
                    "count": _COUNT,
                    "direction": _DIRECTION,
                },
                lambda p: _rules("delay", p, delay=p["delay_ms"]),
                transports=WEBSOCKET_LINKS,
            ),
            FaultKind(
                "duplicate",
                "messages of these types are forwarded twice",
                {"types": _TYPES, "count": _COUNT, "direction": _DIRECTION},
                lambda p: _rules("duplicate", p),
                transports=WEBSOCKET_LINKS,
            ),
            FaultKind(
                "reorder",
                "a message of these types is held until the next one has passed",
                {"types": _TYPES, "count": _COUNT, "direction": _DIRECTION},
                lambda p: _rules("reorder", p),
                transports=WEBSOCKET_LINKS,
            ),
            FaultKind(
                "swallow_pongs",
                "the agent's PONGs never reach the hub",
                {"count": _COUNT},
                lambda p: _rules("drop", {**p, "types": ["PONG"], "direction": "to_hub"}),
                transports=WEBSOCKET_LINKS,
            ),
            FaultKind(
                "inject_close",
                "a Close frame with `code` reaches one side; the other sees the connection drop",
                {
                    "code": Field(Integer(minimum=1000, maximum=4999), required=True),
                    "reason": Field(Text(nonempty=False), default=""),
                    "toward": Field(Text(("agent", "hub")), default="agent"),
                },
                _inject_close,
                instant=True,
                transports=WEBSOCKET_LINKS,
            ),
            FaultKind(
                "http_drop",
                "the next `count` requests to `path` are lost: `what: request` never reaches "
                "the hub, `what: response` is handled by the hub and its answer lost; either "
                "way the agent's connection is reset",
                {
                    "path": _HTTP_PATH,
                    "what": Field(Text(("request", "response")), default="response"),
                    "method": _HTTP_METHOD,
                    "count": Field(Integer(minimum=1), default=1),
                },
                _http_drop,
                backends=HTTP_BACKENDS,
                transports=HTTP_LINKS,
            ),
            FaultKind(
                "http_replay",
                "the next `count` requests to `path` pass, and each reaches the hub again "
                "`delay_ms` later (an intermediary retrying it): late, out of order, twice",
                {
                    "path": _HTTP_PATH,
                    "delay_ms": Field(_MILLISECONDS, required=True),
                    "method": _HTTP_METHOD,
                    "count": Field(Integer(minimum=1), default=1),
                },
                lambda p: _http_rule("replay", p, delay=p["delay_ms"]),
                backends=HTTP_BACKENDS,
                transports=HTTP_LINKS,
            ),
            FaultKind(
                "loss",
                "percent of packets dropped at random (TCP retransmits them)",
                {
                    "percent": Field(Number(minimum=0, maximum=100), required=True),
                    "direction": _DIRECTION,
                },
                lambda p: [DropPackets(float(p["percent"]), p["direction"])],
                backends=frozenset({"docker"}),
            ),
        )
    }
)


#: The kinds that happen at one moment.
INSTANT_FAULTS = frozenset(name for name, kind in FAULT_KINDS.items() if kind.instant)


def checked(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The fault's parameters checked against the table, with its defaults filled in.

    A fault read from a scenario file is already checked; one built in code
    (`Testbed.fault`) is checked here, so both mean the same.
    """
    if kind not in FAULT_KINDS:
        raise SchemaError(Where("fault"), f"unknown fault kind {kind!r}")
    return FAULT_KINDS[kind].record().check(dict(params), Where(f"fault {kind}"), Context())


def plan(kind: str, params: Mapping[str, Any]) -> list[FaultOp]:
    """The proxy operations that carry the fault out."""
    return FAULT_KINDS[kind].plan(checked(kind, params))
