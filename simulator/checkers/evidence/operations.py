"""Client operations: each invoke paired with its completion.

Pairing is by (process, req), the first completion after the invoke; checkers
that care about duplicates or strays (exactly_one_answer, no_crossed_answers)
look at the raw records themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tetherbed.simulator.checkers.evidence.records import (
    COMPLETIONS,
    END,
    Key,
    fields,
    key,
    ordered,
)
from tetherbed.simulator.history import History, Record


@dataclass(frozen=True, slots=True)
class Operation:
    invoke: Record
    completion: Record | None

    @property
    def process(self) -> str:
        return self.invoke.process

    @property
    def kind(self) -> str:
        return self.invoke.f if isinstance(self.invoke.f, str) else ""

    @property
    def outcome(self) -> str | None:
        """ok, fail, info, or None when no answer ever came."""
        return None if self.completion is None else self.completion.type

    @property
    def start(self) -> Key:
        return key(self.invoke)

    @property
    def end(self) -> Key:
        return END if self.completion is None else key(self.completion)

    @property
    def payload(self) -> dict[str, Any]:
        found = fields(self.invoke).get("payload")
        return found if isinstance(found, dict) else {}

    @property
    def answer(self) -> dict[str, Any]:
        return {} if self.completion is None else fields(self.completion)


def operations(history: History) -> list[Operation]:
    """Every invoke with its completion (or None), in history order."""
    pending: dict[tuple[str, Any], list[Record]] = {}
    pairs: dict[int, Record | None] = {}
    invokes: list[Record] = []
    for record in ordered(history):
        if record.type == "invoke":
            invokes.append(record)
            pairs[id(record)] = None
            if _hashable(record.req):
                pending.setdefault((record.process, record.req), []).append(record)
        elif record.type in COMPLETIONS and _hashable(record.req):
            waiting = pending.get((record.process, record.req))
            if waiting:
                pairs[id(waiting.pop(0))] = record
    return [Operation(r, pairs[id(r)]) for r in invokes]


def _hashable(req: Any) -> bool:
    return isinstance(req, str | int) and not isinstance(req, bool)
