"""The nemesis: a seeded fault schedule over a generated run.

Each kind in `nemesis:` fires as a Poisson process at its `rate` over the
generated duration. A fault that fires picks its victim from what a small
model of the run says is possible: only an agent believed running is paused
or killed, a takeover starts an agent that is not running while one of its
machine (or another machine) serves the session, and faults on one agent's
lifecycle, on its link, or on the hub never overlap each other (the one that
would is skipped). Every fault becomes the scenario steps that carry it out —
the same `partition`, `pause`, `kill`, `fault`, `revoke` steps a hand-written
scenario uses — so it runs on every backend the steps run on.

The model can be wrong about a third-party agent (one that does not exit
after a fatal close); starting an agent is therefore always `kill` (a no-op
for one not running) then `start`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tetherbed.simulator.explore.plan import Item
from tetherbed.simulator.scenario import Topology
from tetherbed.simulator.scenario.generation import NEMESIS_KINDS, takeover_pairs

#: Seconds a takeover keeps both agents' lifecycles to itself.
TAKEOVER_SETTLE = 1.0
#: Parameters that are the nemesis's own, not the fault's.
_OWN = frozenset({"rate", "duration", "agents"})


@dataclass
class RunModel:
    """What the nemesis believes about the run at a given time."""

    up: set[str]
    #: When each agent's lifecycle, and its link, are free again.
    life_free: dict[str, float] = field(default_factory=dict)
    link_free: dict[str, float] = field(default_factory=dict)
    hub_free: float = 0.0
    revoked: set[str] = field(default_factory=set)

    def life(self, agent: str, at: float) -> bool:
        return self.life_free.get(agent, 0.0) <= at

    def link(self, agent: str, at: float) -> bool:
        return self.link_free.get(agent, 0.0) <= at


def fault_times(rng: random.Random, rate: float, duration: float) -> list[float]:
    """Poisson arrivals at `rate` per second over [0, duration)."""
    times: list[float] = []
    if rate <= 0:
        return times
    at = rng.expovariate(rate)
    while at < duration:
        times.append(round(at, 3))
        at += rng.expovariate(rate)
    return times


def schedule(
    nemesis: Mapping[str, Mapping[str, Any]],
    topology: Topology,
    started: Mapping[str, float],
    duration: float,
    seed: int,
) -> list[Item]:
    """The fault items of one run: `started` maps each first agent to when it starts."""
    rng = random.Random(f"{seed}/nemesis")
    fired: list[tuple[float, int, str]] = []
    for order, (kind, spec) in enumerate(sorted(nemesis.items())):
        fired += [(at, order, kind) for at in fault_times(rng, float(spec["rate"]), duration)]
    fired.sort()
    model = RunModel(up=set(started))
    for agent, at in started.items():
        model.life_free[agent] = at
    same = takeover_pairs(topology, same=True)
    other = takeover_pairs(topology, same=False)
    items: list[Item] = []
    for at, _, kind in fired:
        spec = nemesis[kind]
        item = _fault(
            kind, spec, at, rng=rng, model=model, topology=topology, same=same, other=other
        )
        if item is not None:
            items.append(item)
    return items


def _span(rng: random.Random, spec: Mapping[str, Any]) -> float:
    low, high = spec.get("duration", (0.0, 0.0))
    return round(rng.uniform(low, high), 3)


def _victims(spec: Mapping[str, Any], topology: Topology) -> list[str]:
    return list(spec.get("agents") or topology.agents)


def _fault(
    kind: str,
    spec: Mapping[str, Any],
    at: float,
    *,
    rng: random.Random,
    model: RunModel,
    topology: Topology,
    same: Mapping[str, list[str]],
    other: Mapping[str, list[str]],
) -> Item | None:
    lasting = _span(rng, spec) if NEMESIS_KINDS[kind].lasting else 0.0
    if kind == "hub_restart":
        if model.hub_free > at:
            return None
        model.hub_free = at + lasting
        return Item(at, kind, ((0.0, {"kill": "hub"}), (lasting, {"start": "hub"})))
    if kind == "revoke":
        sessions = [s for s in topology.sessions() if s not in model.revoked]
        if not sessions or model.hub_free > at:
            return None
        session = rng.choice(sessions)
        model.revoked.add(session)
        for agent in topology.agents.values():
            if agent.session == session:
                model.up.discard(agent.name)
        return Item(at, kind, ((0.0, {"revoke": session}),))
    victims = _victims(spec, topology)
    if kind in ("takeover_same_machine", "takeover_other_machine"):
        pairs = same if "same" in kind else other
        return _takeover(kind, at, rng=rng, model=model, victims=victims, pairs=pairs)
    if kind in ("pause", "kill"):
        # Only a running agent is paused; any agent may be killed and started
        # again (the operator's restart, also of one that stopped on its own).
        candidates = [a for a in victims if (kind == "kill" or a in model.up) and model.life(a, at)]
        if not candidates:
            return None
        agent = rng.choice(candidates)
        model.life_free[agent] = at + lasting
        if kind == "kill":
            _restarted(agent, model, topology)
        undo = "resume" if kind == "pause" else "start"
        return Item(at, kind, ((0.0, {kind: agent}), (lasting, {undo: agent})), frozenset({agent}))
    # The link: a partition, or a fault of simulator/faults.py.
    candidates = [a for a in victims if model.link(a, at)]
    if not candidates:
        return None
    agent = rng.choice(sorted(candidates, key=lambda a: (a not in model.up, a)))
    model.link_free[agent] = at + lasting
    if kind == "partition":
        steps: tuple[tuple[float, Mapping[str, Any]], ...] = (
            (0.0, {"partition": {"agent": agent, "direction": spec["direction"]}}),
            (lasting, {"heal": {"agent": agent}}),
        )
        return Item(at, kind, steps, frozenset({agent}))
    params = {k: v for k, v in spec.items() if k not in _OWN}
    start = (0.0, {"fault": {"agent": agent, "kind": kind, **params}})
    if not NEMESIS_KINDS[kind].lasting:
        return Item(at, kind, (start,), frozenset({agent}))
    return Item(at, kind, (start, (lasting, {"clear": {"agent": agent}})), frozenset({agent}))


def _restarted(agent: str, model: RunModel, topology: Topology) -> None:
    """What the model expects once a killed agent is started again: refused
    when its session is revoked or another machine's agent serves it; else it
    serves the session, taking it over from its own machine's other agents."""
    spec = topology.agents[agent]
    others = [a for a in model.up if a != agent and topology.agents[a].session == spec.session]
    if spec.session in model.revoked or any(
        topology.agents[a].machine != spec.machine for a in others
    ):
        model.up.discard(agent)
        return
    model.up.difference_update(others)
    model.up.add(agent)


def _takeover(
    kind: str,
    at: float,
    *,
    rng: random.Random,
    model: RunModel,
    victims: list[str],
    pairs: Mapping[str, list[str]],
) -> Item | None:
    """Start an agent that is not running for a session a running one serves."""
    choices = [
        (owner, newcomer)
        for owner in sorted(model.up)
        if owner in victims and model.life(owner, at)
        for newcomer in pairs.get(owner, [])
        if newcomer not in model.up and model.life(newcomer, at)
    ]
    if not choices:
        return None
    owner, newcomer = rng.choice(choices)
    for agent in (owner, newcomer):
        model.life_free[agent] = at + TAKEOVER_SETTLE
    if kind == "takeover_same_machine":
        model.up.discard(owner)  # evicted: 4427, and it stops
        model.up.add(newcomer)
    # Another machine's agent is refused (4427) and stops: the model keeps it down.
    steps = ((0.0, {"kill": newcomer}), (0.0, {"start": newcomer}))
    return Item(at, kind, steps, frozenset({owner, newcomer}))
