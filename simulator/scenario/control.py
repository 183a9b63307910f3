"""Control-mode agents in scenarios (docs/scenarios.md, "Control-mode agents").

An agent declared with `control:` instead of `session:` is the machine's
control daemon (`tetherbed agent` without `--session-id`): it keeps the
machine's control connection and starts a child data agent per activated
session. A machine client (`api: machine`, `machine: M`) talks to it through
the hub's `/v1/machines/M/client`. The steps `browse`, `attach`, `activate`,
`restore` and `detach` send the five control-plane requests, taking what
they need (browse id, directory reference, revision, root grant) from the
answer an earlier step's request got, as a platform would; `expect` judges
their answers like any other.

Control agents and machine clients run on the sim and process backends; the
docker backend's images do not start children yet, so a scenario using them
is refused there at load.
"""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.scenario.model import Topology
from tetherbed.simulator.validation import (
    Field,
    ListOf,
    Record,
    Ref,
    SchemaError,
    Text,
    Where,
    seconds,
)

#: Where control-mode agents and machine clients run.
BACKENDS = frozenset({"sim", "process"})

MACHINE_CLIENTS = Ref("machine_clients", "machine client (api: machine)")

#: `agents.NAME.control`: the agent runs in control mode.
CONTROL = Record(
    {
        "browse": Field(
            ListOf(Text(), nonempty=True),
            default=["."],
            doc="folders browsing starts from, relative to the agent's root",
        ),
        "child_idle_exit": Field(
            seconds(exclusive=True),
            default=600.0,
            doc="seconds without a data request before a session's child stops (idle stop)",
        ),
    },
    noun="control-mode options",
)

MACHINE_CLIENT = Record(
    {
        "machine": Field(Text(), required=True, doc="the machine whose control agent it drives"),
        "user": Field(Text(), default="alice"),
    },
    noun="a machine client",
)


def session_or_control(agent: dict[str, Any], where: Where) -> None:
    """A WebSocket agent serves one session, or is its machine's control agent."""
    if "session" not in agent and "control" not in agent:
        raise SchemaError(
            where, "`session` is required (or `control:`, for the machine's control-mode agent)"
        )
    if "session" in agent and "control" in agent:
        raise SchemaError(
            where,
            "`session` and `control` exclude each other: an agent serves one session, "
            "or is the machine's control agent that starts a child per session",
        )


# --- steps --------------------------------------------------------------------------

_ID = Field(Text(), required=True, doc="refers to the answer in `expect`, and in later steps")
_FROM = Field(Text(), doc="the id of an earlier step whose answer this step uses")
_SESSION = Field(Text(), required=True, doc="the session the request names")
_ENTRY = Field(Text(), doc="an entry of the `from` listing, by name or path")

STEPS = {
    "browse": Record(
        {
            "client": Field(MACHINE_CLIENTS, required=True),
            "id": _ID,
            "from": _FROM,
            "entry": _ENTRY,
        },
        noun="a DIRECTORY_LIST_REQUEST (no `from`: start a browse at the browse roots)",
    ),
    "attach": Record(
        {
            "client": Field(MACHINE_CLIENTS, required=True),
            "id": _ID,
            "session": _SESSION,
            "from": Field(Text(), required=True, doc="the browse step whose listing holds it"),
            "entry": _ENTRY,
        },
        noun="an ATTACH_SESSION (no `entry`: the listed directory itself)",
    ),
    "activate": Record(
        {
            "client": Field(MACHINE_CLIENTS, required=True),
            "id": _ID,
            "session": _SESSION,
            "from": Field(Text(), required=True, doc="the attach or restore step (its revision)"),
        },
        noun="an ACTIVATE_SESSION",
    ),
    "restore": Record(
        {
            "client": Field(MACHINE_CLIENTS, required=True),
            "id": _ID,
            "session": _SESSION,
            "from": Field(Text(), required=True, doc="the attach step (its root grant)"),
        },
        noun="a RESTORE_SESSION",
    ),
    "detach": Record(
        {"client": Field(MACHINE_CLIENTS, required=True), "id": _ID, "session": _SESSION},
        noun="a DETACH_SESSION",
    ),
}
STEP_KINDS = frozenset(STEPS)
#: Each step's request type.
REQUEST_TYPES = {
    "browse": "DIRECTORY_LIST_REQUEST",
    "attach": "ATTACH_SESSION",
    "activate": "ACTIVATE_SESSION",
    "restore": "RESTORE_SESSION",
    "detach": "DETACH_SESSION",
}


def context_names(topology: Topology) -> dict[str, list[str]]:
    return {
        "machine_clients": [n for n, c in topology.clients.items() if c.machine is not None],
        "control_agents": [n for n, a in topology.agents.items() if a.control is not None],
    }


def check_order(steps: list[tuple[str, Any]], where: Where) -> None:
    """`from` names an earlier control step of the same client, of the right kind."""
    seen: dict[str, tuple[str, str]] = {}  # id -> (kind, client)
    wanted = {
        "browse": ("browse",),
        "attach": ("browse",),
        "activate": ("attach", "restore"),
        "restore": ("attach", "restore"),
    }
    for index, (kind, args) in enumerate(steps, 1):
        if kind not in STEP_KINDS:
            continue
        spot = where.at_step(index, kind)
        source = args.get("from")
        if source is not None:
            found = seen.get(source)
            if found is None:
                raise SchemaError(spot.key("from"), f"no earlier control step has id {source!r}")
            if found[0] not in wanted[kind]:
                raise SchemaError(
                    spot.key("from"),
                    f"{kind} takes its input from a {' or '.join(wanted[kind])} step, "
                    f"not from the {found[0]} step {source!r}",
                )
            if found[1] != args["client"]:
                raise SchemaError(spot.key("from"), f"{source!r} was sent by another client")
        elif "entry" in args:
            raise SchemaError(spot.key("entry"), "`entry` names an entry of the `from` listing")
        seen[args["id"]] = (kind, args["client"])
