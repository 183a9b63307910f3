"""Which agent's serial port a step names, checked against the topology at load.

A serial step names a port by the name its agent declares
(`agents.A.options.serial.PORT`). `plug`/`unplug` name the agent; a client's
`serial_*` request goes through the hub to the agent serving the client's
session, so its port is looked up among the agents of that session (`agent:`
chooses when two of them declare one of that name). The step comes back with
`agent` filled in. `check_plugging` follows a whole file: every port starts
plugged in, and a step that unplugs an unplugged port (or plugs a plugged one)
is a mistake in the scenario, refused before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tetherbed.simulator.scenario.model import Step, Topology
from tetherbed.simulator.scenario.schema import SERIAL_STEPS
from tetherbed.simulator.validation import SchemaError, Where

PLUG_STEPS = ("plug", "unplug")


def names_a_port(kind: str) -> bool:
    return kind in PLUG_STEPS or kind in SERIAL_STEPS


def resolve_port(kind: str, args: dict[str, Any], topology: Topology, where: Where) -> Any:
    """The step's arguments with `agent` filled in; SchemaError when no (or no
    single) agent has the port."""
    if not names_a_port(kind):
        return args
    port = args["port"]
    if kind in PLUG_STEPS:
        agent = topology.agents[args["agent"]]
        if port not in agent.serial_ports:
            raise SchemaError(where.key("port"), _no_port(port, [agent.name], topology))
        return args
    session = topology.clients[args["client"]].session
    serving = [a for a in topology.agents.values() if a.session == session]
    if "agent" in args:
        agent = topology.agents[args["agent"]]
        if agent.session != session:
            raise SchemaError(
                where.key("agent"),
                f"{agent.name} serves session {agent.session!r}, not {args['client']}'s "
                f"{session!r}: the hub would not send it this request",
            )
        if port not in agent.serial_ports:
            raise SchemaError(where.key("port"), _no_port(port, [agent.name], topology))
        return args
    having = [a.name for a in serving if port in a.serial_ports]
    if not having:
        names = [a.name for a in serving]
        raise SchemaError(where.key("port"), _no_port(port, names, topology, session))
    if len(having) > 1:
        raise SchemaError(
            where, f"agents {having} of session {session!r} all declare {port}: say which (agent:)"
        )
    return {**args, "agent": having[0]}


def _no_port(port: str, agents: list[str], topology: Topology, session: str | None = None) -> str:
    declared = sorted(f"{name}:{p}" for name in agents for p in topology.agents[name].serial_ports)
    whose = (
        f"the agents of session {session!r} ({', '.join(agents) or 'none'})"
        if session
        else agents[0]
    )
    listed = ", ".join(declared) if declared else "none"
    return f"no serial port {port!r} on {whose} (declared: {listed}; see options.serial)"


def check_plugging(steps: Iterable[Step], file: str) -> None:
    """Every port starts plugged in; each unplug needs it plugged, each plug unplugged."""
    unplugged: set[tuple[str, str]] = set()
    for step in steps:
        if step.kind not in PLUG_STEPS:
            continue
        key = (step.args["agent"], step.args["port"])
        if step.kind == "unplug" and key in unplugged:
            raise SchemaError(
                Where(file).at_step(step.index, step.kind),
                f"{key[0]}'s {key[1]} is unplugged already (plug it in first)",
            )
        if step.kind == "plug" and key not in unplugged:
            raise SchemaError(
                Where(file).at_step(step.index, step.kind),
                f"{key[0]}'s {key[1]} is plugged in already (every port starts plugged in)",
            )
        (unplugged.add if step.kind == "unplug" else unplugged.discard)(key)
