"""The `generate:` and `nemesis:` keys: a seeded workload and fault schedule.

A scenario may, instead of `steps:`, declare an operation mix (`generate`:
which requests, from which clients, at what rate, for how long) and a fault
schedule (`nemesis`: each kind of fault with its rate). The seed turns them
into a plain step list (`simulator/explore/generator.py`), so a generated
run is an ordinary scenario run, on every backend, and a failing one can be
shrunk and exported as a step-list file (docs/explore.md).

Checked as strictly as the rest: unknown keys, kinds and names are errors,
and a fault kind the backend cannot carry out (`loss` outside docker) is
refused at load, before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tetherbed.simulator.faults import FAULT_KINDS, WEBSOCKET_LINKS
from tetherbed.simulator.validation import (
    Context,
    Field,
    Integer,
    ListOf,
    MapOf,
    Number,
    Record,
    Ref,
    SchemaError,
    Spec,
    Text,
    Where,
)

#: The requests a generated client sends (each with a payload the generator makes).
OPERATIONS = (
    "EXECUTE_COMMAND",
    "FILE_WRITE",
    "FILE_READ",
    "FILE_LIST",
    "FILE_STAT",
    "FILE_DELETE",
)
DEFAULT_MIX = {"FILE_WRITE": 1, "FILE_READ": 1, "EXECUTE_COMMAND": 1}


class Span(Spec):
    """A duration: a number of seconds, or `[low, high]` (drawn uniformly)."""

    def check(self, value: Any, where: Where, context: Context) -> Any:
        if isinstance(value, bool):
            raise SchemaError(where, f"expected {self.describe()}, got {value!r}")
        if isinstance(value, int | float) and value >= 0:
            return (float(value), float(value))
        if (
            isinstance(value, list)
            and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            and 0 <= value[0] <= value[1]
        ):
            return (float(value[0]), float(value[1]))
        raise SchemaError(where, f"expected {self.describe()}, got {value!r}")

    def describe(self) -> str:
        return "seconds (a number >= 0, or [low, high] with 0 <= low <= high)"


_RATE = Field(
    Number(minimum=0, unit="events per second"),
    required=True,
    doc="how often, on average (a Poisson process over the generated duration)",
)
_AGENTS = Field(
    ListOf(Ref("agents", "declared agent"), nonempty=True),
    doc="the agents it may hit (default: every agent)",
)

CLIENT_MIX = Record(
    {
        "rate": Field(
            Number(minimum=0, unit="requests per second", exclusive_minimum=True), required=True
        ),
        "mix": Field(
            MapOf(Number(minimum=0), key=Text(OPERATIONS)),
            default=dict(DEFAULT_MIX),
            doc="request type → weight",
        ),
    },
    noun="a client's operation mix",
)

GENERATE = Record(
    {
        "duration": Field(
            Number(minimum=0, unit="seconds", exclusive_minimum=True),
            required=True,
            doc="seconds during which operations and faults are generated",
        ),
        "clients": Field(
            MapOf(CLIENT_MIX, key=Ref("session_clients", "declared client")),
            required=True,
            doc="client → its rate and mix",
        ),
        "start": Field(
            ListOf(Ref("agents", "declared agent"), nonempty=True),
            doc="agents started first (default: the first of each machine and session)",
        ),
        "stagger": Field(Span(), default=(0.0, 0.5), doc="when each first agent starts"),
        "files": Field(Integer(minimum=1), default=3, doc="distinct paths the file requests use"),
        "command_seconds": Field(
            Span(), default=(0.0, 2.0), doc="how long a generated command sleeps"
        ),
        "settle": Field(
            Number(minimum=0, unit="seconds"),
            default=15.0,
            doc="seconds after the last operation and fault before the checkers",
        ),
    },
    noun="an operation mix",
)


@dataclass(frozen=True, slots=True)
class NemesisKind:
    """One kind of fault the nemesis schedules."""

    name: str
    doc: str
    #: Its own parameters (besides `rate`, `duration`, `agents`).
    params: Mapping[str, Field]
    #: It lasts `duration` (then is undone); otherwise it happens at one moment.
    lasting: bool
    #: Backends that can carry it out.
    backends: frozenset[str] | None = None
    #: It acts on one agent (else on the hub or the session).
    on_agent: bool = True


_DIRECTION = Field(Text(("both", "to_hub", "from_hub")), default="both")

#: The nemesis's own kinds: lifecycle, takeovers and revocation.
LIFECYCLE_KINDS: Mapping[str, NemesisKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            NemesisKind("partition", "cut the agent's link", {"direction": _DIRECTION}, True),
            NemesisKind("pause", "freeze the agent (a laptop asleep)", {}, True),
            NemesisKind("kill", "kill the agent; start it again after `duration`", {}, True),
            NemesisKind(
                "hub_restart", "kill the hub; start it after `duration`", {}, True, on_agent=False
            ),
            NemesisKind(
                "takeover_same_machine",
                "start another agent of the same machine and session (it takes over)",
                {},
                False,
            ),
            NemesisKind(
                "takeover_other_machine",
                "start an agent of another machine for the same session (it must be refused)",
                {},
                False,
            ),
            NemesisKind("revoke", "the user revokes a session", {}, False, on_agent=False),
        )
    }
)


def _fault_kinds() -> dict[str, NemesisKind]:
    """Every WebSocket fault kind of `simulator/faults.py`, with its parameters."""
    kinds = {}
    for name, fault in FAULT_KINDS.items():
        if not fault.transports & WEBSOCKET_LINKS:
            continue  # HTTP rules act on dsh-computers agents, which explore does not generate
        kinds[name] = NemesisKind(
            name, fault.doc, dict(fault.params), not fault.instant, fault.backends
        )
    return kinds


#: Every kind the nemesis knows: its own, then the fault table's.
NEMESIS_KINDS: Mapping[str, NemesisKind] = MappingProxyType({**LIFECYCLE_KINDS, **_fault_kinds()})


def _kind_record(kind: NemesisKind) -> Record:
    fields: dict[str, Field] = {"rate": _RATE, "agents": _AGENTS, **kind.params}
    if not kind.on_agent:
        del fields["agents"]
    if kind.lasting:
        fields["duration"] = Field(Span(), default=(0.5, 3.0), doc="how long it lasts")
    return Record(fields, noun=f"nemesis {kind.name}")


NEMESIS = Record(
    {
        name: Field(
            _kind_record(kind),
            doc=kind.doc,
            backends=kind.backends,
        )
        for name, kind in NEMESIS_KINDS.items()
    },
    noun="a fault schedule (nemesis kind → rate and parameters)",
)


def check_generation(
    generate: Any, nemesis: Any, context: Context, where: Where
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Both keys checked against the topology's names (None: not given)."""
    checked_generate = (
        GENERATE.check(generate, where.key("generate"), context) if generate is not None else None
    )
    if nemesis is not None and checked_generate is None:
        raise SchemaError(where.key("nemesis"), "a nemesis needs `generate:` (its duration)")
    checked_nemesis = (
        NEMESIS.check(nemesis, where.key("nemesis"), context) if nemesis is not None else None
    )
    return checked_generate, checked_nemesis


def check_fit(
    generate: Mapping[str, Any] | None,
    nemesis: Mapping[str, Any] | None,
    topology: Any,
    where: Where,
) -> None:
    """What the topology must have for the schedule: WebSocket agents only,
    and the agents a takeover starts."""
    if generate is None:
        return
    sse = sorted(name for name, agent in topology.agents.items() if agent.sse)
    if sse:
        raise SchemaError(
            where.key("generate"),
            f"generated runs drive local-executor (WebSocket) agents only; {sse} are SSE agents",
        )
    for kind, needs in (
        ("takeover_same_machine", "two agents of one machine and session"),
        ("takeover_other_machine", "agents of two machines for one session"),
    ):
        if nemesis is None or kind not in nemesis:
            continue
        same = kind == "takeover_same_machine"
        if not any(takeover_pairs(topology, same=same).values()):
            raise SchemaError(where.key("nemesis").key(kind), f"needs {needs} in the topology")


def takeover_pairs(topology: Any, *, same: bool) -> dict[str, list[str]]:
    """Agent → the agents that could take its session over: of the same
    machine (`same`) or of another one."""
    pairs: dict[str, list[str]] = {}
    agents = list(topology.agents.values())
    for agent in agents:
        pairs[agent.name] = [
            other.name
            for other in agents
            if other.name != agent.name
            and other.session == agent.session
            and (other.machine == agent.machine) == same
        ]
    return pairs
