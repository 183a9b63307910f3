"""The generator: a scenario's `generate:` and `nemesis:` drawn from a seed.

`plan_for(scenario, seed)` turns the operation mix into timed `send` steps
(each client a Poisson process at its rate, each request drawn from its mix,
with a payload made here: commands that append their id to a log and sleep,
writes of the request id to one of a few paths, reads, lists, stats and
deletes of those paths), starts the first agents at seeded moments, adds the
nemesis's faults (`nemesis.py`) and returns a `Plan` — a step list in all
but name. The same scenario and seed give the same plan, on every backend.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from tetherbed.simulator.explore.nemesis import fault_times, schedule
from tetherbed.simulator.explore.plan import OPERATION, START, Item, Plan
from tetherbed.simulator.scenario import Scenario, parse
from tetherbed.simulator.scenario.schema import DEFAULT_CHECKERS

#: Where generated commands append their request id (one line per execution).
COMMAND_LOG = "ran.log"


def plan_for(scenario: Scenario, seed: int) -> Plan:
    """The generated run of `scenario` under `seed`."""
    generate = scenario.generate
    if generate is None:
        raise ValueError(f"{scenario.name}: no `generate:` to draw a run from")
    topology = scenario.topology
    rng = random.Random(f"{seed}/generate")
    duration = float(generate["duration"])
    first = generate.get("start") or _first_agents(scenario)
    low, high = generate["stagger"]
    started = {agent: round(rng.uniform(low, high), 3) for agent in first}
    # The first agent to start is waited for (as connected, from the wire):
    # on real processes the hub knows the session only once an agent claimed
    # it, and a run that never got going tells nothing.
    leader = min(started, key=lambda agent: (started[agent], first.index(agent)), default=None)
    items: list[Item] = []
    for agent, at in started.items():
        steps: tuple[tuple[float, dict[str, Any]], ...] = ((0.0, {"start": agent}),)
        if agent == leader:
            steps += ((0.0, {"expect": {"agent": agent, "state": "connected"}}),)
        items.append(Item(at, START, steps, frozenset({agent})))
    # Operations begin once the first agent may be up; faults too.
    begin = max(started.values(), default=0.0)
    counter = 0
    for client, mix in sorted(generate["clients"].items()):
        weights = {kind: float(w) for kind, w in sorted(mix["mix"].items()) if w > 0}
        if not weights:
            continue
        client_rng = random.Random(f"{seed}/generate/{client}")
        for at in fault_times(client_rng, float(mix["rate"]), duration):
            counter += 1
            kind = client_rng.choices(list(weights), list(weights.values()))[0]
            request_id = f"g{counter}"
            payload = _payload(kind, request_id, client_rng, generate)
            send = {"send": {"client": client, "id": request_id, "type": kind, "payload": payload}}
            items.append(Item(round(begin + at, 3), OPERATION, ((0.0, send),)))
    if scenario.nemesis:
        faults = schedule(scenario.nemesis, topology, started, duration, seed)
        items += [_shifted(item, begin) for item in faults]
    items.sort(key=lambda item: item.at)
    return Plan(
        base=_base(scenario),
        seed=seed,
        items=tuple(items),
        settle=float(generate["settle"]),
    )


def generated_scenario(scenario: Scenario, seed: int, backend: str | None = None) -> Scenario:
    """The plain step-list scenario that `scenario` generates under `seed`."""
    document = plan_for(scenario, seed).document()
    return parse(document, scenario.path, backend)


def _first_agents(scenario: Scenario) -> list[str]:
    """The first declared agent of each machine and session."""
    seen: set[tuple[str, str | None]] = set()
    first = []
    for agent in scenario.topology.agents.values():
        key = (agent.machine, agent.session)
        if key not in seen:
            seen.add(key)
            first.append(agent.name)
    return first


def _shifted(item: Item, by: float) -> Item:
    return Item(round(item.at + by, 3), item.kind, item.steps, item.agents)


def _payload(
    kind: str, request_id: str, rng: random.Random, generate: Mapping[str, Any]
) -> dict[str, Any]:
    path = f"f{rng.randrange(int(generate['files']))}.txt"
    if kind == "EXECUTE_COMMAND":
        low, high = generate["command_seconds"]
        sleep = round(rng.uniform(low, high), 2)
        command = f"echo {request_id} >> {COMMAND_LOG}"
        return {"command": command + (f"; sleep {sleep:g}" if sleep > 0 else "")}
    if kind == "FILE_WRITE":
        return {"path": path, "content": request_id}
    if kind == "FILE_LIST":
        return {"path": "."}
    if kind == "FILE_DELETE":
        return {"path": path, "missing_ok": True}
    return {"path": path}  # FILE_READ, FILE_STAT


def _base(scenario: Scenario) -> dict[str, Any]:
    """The parts of the document a generated run keeps as they are."""
    document = scenario.document or {}
    base: dict[str, Any] = {
        "name": scenario.name,
        "description": scenario.description,
        "timeout": scenario.timeout,
        "checkers": list(document.get("checkers") or DEFAULT_CHECKERS),
        "checker_options": document.get("checker_options") or {},
        "topology": document.get("topology") or {},
    }
    if "backends" in document:
        base["backends"] = list(document["backends"])
    return base
