"""A generated run as data: timed items that compile to a plain step list.

The generator and the nemesis (`generator.py`, `nemesis.py`) draw items from
the seed; each item is one operation or one fault, with the steps that carry
it out at offsets from its start (a partition and its heal, a kill and the
restart after it). Compiling sorts every step by time and puts `wait` steps
between them, so a plan *is* an ordinary scenario — the same document that
`--export` writes and `tetherbed run` replays. Shrinking (`shrink.py`)
removes items, cuts the run short or drops agents and compiles again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: Item kinds that are not faults.
OPERATION, START = "operation", "start"
#: Steps that end every generated run: undo what may still be in force.
_CODA = ({"heal": "all"}, {"clear": "all"})


@dataclass(frozen=True, slots=True)
class Item:
    """One operation or fault: its steps, at offsets (seconds) from `at`."""

    at: float
    kind: str
    steps: tuple[tuple[float, Mapping[str, Any]], ...]
    #: The agents it touches (an agent dropped by shrinking takes its items along).
    agents: frozenset[str] = frozenset()

    @property
    def end(self) -> float:
        return self.at + max((offset for offset, _ in self.steps), default=0.0)

    @property
    def is_fault(self) -> bool:
        return self.kind not in (OPERATION, START)

    def describe(self) -> str:
        first = self.steps[0][1] if self.steps else {}
        return f"{self.at:.3f} s {self.kind} {_short(first)}"


@dataclass(frozen=True, slots=True)
class Plan:
    """A generated run: the scenario's fixed parts, and its items in time order."""

    #: name, description, seed, timeout, checkers, checker_options, topology.
    base: Mapping[str, Any]
    seed: int
    items: tuple[Item, ...]
    #: Seconds of quiet after the last step, before the run ends.
    settle: float
    #: Agents dropped from the topology (by shrinking).
    dropped_agents: frozenset[str] = field(default_factory=frozenset)

    # --- sizes, for the shrinker's report -----------------------------------------

    @property
    def operations(self) -> int:
        return sum(1 for item in self.items if item.kind == OPERATION)

    @property
    def faults(self) -> int:
        return sum(1 for item in self.items if item.is_fault)

    @property
    def agents(self) -> list[str]:
        declared = self.base["topology"].get("agents") or {}
        return [name for name in declared if name not in self.dropped_agents]

    @property
    def length(self) -> float:
        """Seconds from the first step to the end of the run."""
        return max((item.end for item in self.items), default=0.0) + self.settle

    def size(self) -> dict[str, Any]:
        return {
            "operations": self.operations,
            "faults": self.faults,
            "agents": len(self.agents),
            "steps": len(self.steps()),
            "seconds": round(self.length, 3),
        }

    # --- compiling ------------------------------------------------------------------

    def steps(self) -> list[dict[str, Any]]:
        """The plain step list: the hub first, every item's steps in time order
        with waits between them, then undo what is still in force and settle."""
        timed: list[tuple[float, int, Mapping[str, Any]]] = []
        order = 0
        for item in self.items:
            for offset, step in item.steps:
                timed.append((item.at + offset, order, step))
                order += 1
        timed.sort(key=lambda entry: (entry[0], entry[1]))
        steps: list[dict[str, Any]] = [{"start": "hub"}]
        now = 0.0
        for at, _, step in timed:
            gap = round(at - now, 3)
            if gap > 0:
                steps.append({"wait": gap})
                now = round(now + gap, 3)
            steps.append(dict(step))
        steps.extend(dict(step) for step in _CODA)
        if self.settle > 0:
            steps.append({"wait": round(self.settle, 3)})
        return steps

    def document(self, *, name: str | None = None, description: str | None = None) -> dict:
        """The scenario as a plain step-list document (no generate, no nemesis)."""
        base = dict(self.base)
        topology = _without_agents(base["topology"], self.dropped_agents)
        document: dict[str, Any] = {
            "name": name or base["name"],
            "description": description if description is not None else base["description"],
            "seed": self.seed,
            "timeout": base["timeout"],
        }
        if base.get("backends") is not None:
            document["backends"] = list(base["backends"])
        document["checkers"] = list(base["checkers"])
        if base.get("checker_options"):
            document["checker_options"] = base["checker_options"]
        document["topology"] = topology
        document["steps"] = self.steps()
        return document

    # --- shrinking ------------------------------------------------------------------

    def keeping(self, items: Iterable[Item]) -> Plan:
        return replace(self, items=tuple(items))

    def without_agent(self, agent: str) -> Plan:
        return replace(
            self,
            items=tuple(item for item in self.items if agent not in item.agents),
            dropped_agents=self.dropped_agents | {agent},
        )

    def until(self, seconds: float) -> Plan:
        """Only what starts before `seconds`."""
        return replace(self, items=tuple(item for item in self.items if item.at < seconds))


def _without_agents(topology: Mapping[str, Any], dropped: frozenset[str]) -> dict[str, Any]:
    copy = {key: value for key, value in topology.items()}
    if dropped and "agents" in copy:
        copy["agents"] = {n: a for n, a in copy["agents"].items() if n not in dropped}
    return copy


def _short(step: Mapping[str, Any]) -> str:
    text = str(dict(step))
    return text if len(text) <= 100 else text[:97] + "..."
