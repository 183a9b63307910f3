"""The dsh-computers part of the scenario format (docs/scenarios.md, "dsh-computers").

SSE agents (`transport: sse`) sit in a topology next to WebSocket agents;
dsh clients (`api: dsh`) are a user's browser and model-tool calls. Steps
create enrollment keys, enroll agents with them, run commands through the
model tools, rename and delete computers; `expect {computer: A, online: ...}`
reads presence the way the settings page does. Everything here is a table
entry `schema.py` registers, checked at load like every other key: a step
naming a WebSocket agent where an SSE agent is needed, a key no earlier step
created, or a message fault on an HTTP link, is refused before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tetherbed.agent.dsh.core import AGENT_DEFECTS as DSH_AGENT_DEFECTS
from tetherbed.hub.dsh.config import DSH_HUB_DEFECTS
from tetherbed.simulator.faults import FAULT_KINDS
from tetherbed.simulator.scenario.model import SSE, WEBSOCKET, Topology
from tetherbed.simulator.validation import (
    Boolean,
    Context,
    Field,
    Integer,
    ListOf,
    Literal,
    MapOf,
    Number,
    Record,
    Ref,
    SchemaError,
    Spec,
    Text,
    Where,
    seconds,
)
from tetherbed.wire.dsh import constants as C

#: Where SSE agents and dsh clients run (the docker backend's proxies and images
#: do not carry them yet).
BACKENDS = frozenset({"sim", "process"})

SSE_AGENTS = Ref("sse_agents", "SSE agent (transport: sse)")
DSH_CLIENTS = Ref("dsh_clients", "dsh client (api: dsh)")
KEYS = Ref("keys", "key (the id of a create_key step)")
_WITHIN = Field(seconds(exclusive=True), doc="how long to wait (backend seconds; default 30)")
_REFERENCE_ONLY = Field(Boolean(), doc="only Tetherbed's own parts can show it")

# --- topology -----------------------------------------------------------------------

HUB_OPTIONS = Record(
    {
        "heartbeat_ms": Field(Integer(minimum=1), doc="§3.2 heartbeatMs (default 20000)"),
        "key_ttl_minutes": Field(Number(minimum=0, exclusive_minimum=True)),
        "exec_timeout_ms": Field(Integer(minimum=1)),
        "promote_on_timeout": Field(Boolean(), doc="§11.6.3 (default true)"),
        "defects": Field(ListOf(Text(tuple(sorted(DSH_HUB_DEFECTS))))),
    },
    noun="the hub's dsh-computers options",
)

AGENT_OPTIONS = Record(
    {
        "defects": Field(ListOf(Text(tuple(sorted(DSH_AGENT_DEFECTS))))),
        "chunk_format": Field(Text(("split", "typed")), doc="§11.2 or §11.6.2 chunks"),
        "files": Field(MapOf(Text(nonempty=False)), doc="initial files: {path: content}"),
    },
    noun="SSE agent options",
)

AGENT = Record(
    {
        "machine": Field(Text(), doc="its hostname and enrolled name (default: its name)"),
        "user": Field(Text(), default="alice"),
        "root": Field(Text(), doc="its machine's folder, the commands' working directory"),
        "options": Field(AGENT_OPTIONS, default={}),
        "token_of": Field(
            Text(), doc="start with this other SSE agent's saved connection (its token)"
        ),
    },
    noun="an SSE agent",
)

CLIENT = Record(
    {"user": Field(Text(), default="alice")},
    noun="a dsh client (a user's browser and model-tool calls)",
)


def check_topology_references(topology: dict[str, Any], where: Where) -> None:
    """`token_of` names another SSE agent."""
    agents = topology.get("agents", {})
    for name, agent in agents.items():
        shared = agent.get("token_of")
        if shared is None:
            continue
        spot = where.key("agents").key(name).key("token_of")
        other = agents.get(shared)
        if other is None or other.get("transport", WEBSOCKET) != SSE or shared == name:
            known = [n for n, a in agents.items() if a.get("transport") == SSE and n != name]
            raise SchemaError(spot, f"{shared!r} is not another SSE agent; SSE agents: {known}")


# --- steps --------------------------------------------------------------------------

STEPS: Mapping[str, Spec] = {
    "create_key": Record(
        {
            "client": Field(DSH_CLIENTS, required=True),
            "id": Field(Text(), required=True, doc="names the key in `enroll` steps"),
            "os": Field(Text(C.KEY_OS), default="linux"),
            "replace": Field(Boolean(), default=False),
            "label": Field(Text()),
            "forwarded_host": Field(
                Text(),
                doc="also send X-Forwarded-Host/-Proto and Forwarded naming this host (an "
                "attacker's): the install command must not follow it",
            ),
        },
        noun="a key to create (§4.2)",
    ),
    "enroll": Record(
        {"agent": Field(SSE_AGENTS, required=True), "key": Field(KEYS, required=True)},
        noun="the agent's `enroll` with a key (§3.1, §6)",
    ),
    "exec": Record(
        {
            "client": Field(DSH_CLIENTS, required=True),
            "id": Field(Text(), required=True, doc="refers to the answer in `expect`"),
            "computer": Field(SSE_AGENTS, required=True),
            "command": Field(Text(), required=True),
            "cwd": Field(Text()),
            "timeout_ms": Field(Integer(minimum=1)),
        },
        noun="a computer_exec call through the model tools (§5.2), without waiting",
    ),
    "rename_computer": Record(
        {
            "client": Field(DSH_CLIENTS, required=True),
            "computer": Field(SSE_AGENTS, required=True),
            "name": Field(Text(), required=True),
        },
        noun="a rename through the browser API (§4.5)",
    ),
    "delete_computer": Record(
        {"client": Field(DSH_CLIENTS, required=True), "computer": Field(SSE_AGENTS, required=True)},
        noun="a delete through the browser API (§4.4)",
    ),
}

EXPECT_PRESENCE = Record(
    {
        "computer": Field(SSE_AGENTS, required=True),
        "online": Field(Boolean(), required=True),
        "via": Field(
            DSH_CLIENTS, doc="the dsh client that reads /state (default: the agent's user's)"
        ),
        "within": _WITHIN,
        "reference_only": _REFERENCE_ONLY,
    },
    noun="a computer's presence as /state shows it",
)

ASSERT_CREDENTIALS = Record(
    {
        "credentials_stored": Field(
            Literal("digests_only"),
            required=True,
            doc="the hub's persisted state holds no enrollment key or token in clear",
        ),
        "reference_only": _REFERENCE_ONLY,
    },
    noun="how the hub stores credentials",
)

#: Error codes an `expect {client: ...}` may name for a dsh call.
ERROR_CODES = tuple(
    sorted(
        {v for k, v in vars(C.ToolErrorCode).items() if not k.startswith("_")}
        | {v for k, v in vars(C.ErrorCode).items() if not k.startswith("_")}
        | {"connection-lost", "bad-answer"}
    )
)


class OnTheRightLink(Spec):
    """A `fault` step whose kind can act on its agent's link (message rules read
    WebSocket messages, HTTP rules read HTTP requests)."""

    def __init__(self, inner: Spec) -> None:
        self.inner = inner

    def check(self, value: Any, where: Where, context: Context) -> Any:
        checked = self.inner.check(value, where, context)
        sse = context.known("sse_agents")
        if sse is None:
            return checked
        kind = FAULT_KINDS[checked["kind"]]
        transport = SSE if checked["agent"] in sse else WEBSOCKET
        if transport not in kind.transports:
            fits = sorted(k for k, f in FAULT_KINDS.items() if transport in f.transports)
            raise SchemaError(
                where.key("kind"),
                f"a {checked['kind']} fault cannot act on {checked['agent']}'s {transport} link; "
                f"faults for it: {', '.join(fits)}",
            )
        return checked

    def describe(self) -> str:
        return self.inner.describe()


def uses_dsh(topology: Topology) -> bool:
    """The topology holds SSE agents or dsh clients."""
    return any(a.sse for a in topology.agents.values()) or any(
        c.dsh for c in topology.clients.values()
    )


def reference_parts_only(
    topology: Topology, *, hub_is_reference: bool, agent_is_reference: bool
) -> str | None:
    """Why a scenario cannot run against this target (None: it can): the dsh-computers
    routes need Tetherbed's hub until targets name a dsh adapter, and a control-mode
    agent runs Tetherbed's agent (a third party's control mode is judged by
    `tetherbed conform agent --control-command`)."""
    if uses_dsh(topology) and not hub_is_reference:
        return "dsh-computers: runs against Tetherbed's hub only, until targets name a dsh adapter"
    if not agent_is_reference and any(a.control is not None for a in topology.agents.values()):
        return (
            "control mode: runs Tetherbed's agent only; a third-party agent's control mode "
            "is checked by `tetherbed conform agent --control-command`"
        )
    return None


def context_names(topology: Topology) -> dict[str, list[str]]:
    return {
        "sse_agents": [n for n, a in topology.agents.items() if a.sse],
        "dsh_clients": [n for n, c in topology.clients.items() if c.dsh],
        "session_clients": [n for n, c in topology.clients.items() if not c.dsh],
    }


def created_keys(raw_steps: list[Any]) -> list[str]:
    """The ids every `create_key` step of a file declares (for references)."""
    found = []
    for raw in raw_steps:
        if isinstance(raw, Mapping) and isinstance(raw.get("create_key"), Mapping):
            ident = raw["create_key"].get("id")
            if isinstance(ident, str):
                found.append(ident)
    return found


def check_order(steps: list[tuple[str, Any]], topology: Topology, where: Where) -> None:
    """References that depend on the order of steps, and on users: a key is
    used after it is created (and created once); a presence read names a dsh
    client of the agent's user, or there is exactly one to default to."""
    created: set[str] = set()
    for index, (kind, args) in enumerate(steps, 1):
        spot = where.at_step(index, kind)
        if kind == "create_key":
            if args["id"] in created:
                raise SchemaError(spot.key("id"), f"key {args['id']!r} is created twice")
            created.add(args["id"])
        elif kind == "enroll" and args["key"] not in created:
            raise SchemaError(spot.key("key"), f"key {args['key']!r} is used before it is created")
        elif kind == "expect" and "computer" in args and "via" not in args:
            default_reader(topology, args["computer"], spot)


def default_reader(topology: Topology, agent: str, where: Where) -> str:
    user = topology.agents[agent].user
    readers = [n for n, c in topology.clients.items() if c.dsh and c.user == user]
    if len(readers) != 1:
        raise SchemaError(
            where,
            f"expect {{computer: {agent}}} needs `via:` (the dsh clients of user {user!r}: "
            f"{readers or 'none'})",
        )
    return readers[0]
