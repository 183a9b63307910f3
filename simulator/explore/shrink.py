"""Shrinking a failing generated run to a small one that fails the same way.

Jepsen and Hypothesis both do it: a failure found among 200 operations and
30 faults is hard to read; the few that matter are easy. Given a plan that
fails and a way to run a plan, the shrinker tries, in turn and until nothing
more helps (or the budget of runs is spent):

1. fewer agents: drop an agent with its start and every fault on it;
2. shorter: cut everything that starts after some time (a binary search);
3. fewer operations and faults: delta debugging over the items (remove
   halves, then quarters, ... then single items);
4. a shorter settle at the end.

A candidate counts only when it *fails the same way*: its verdict is a
failure (never an error) and one of the checkers that failed originally
fails again. Items keep their absolute times, so what remains happens when
it happened in the failing run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tetherbed.simulator.explore.plan import START, Plan

#: Runs the shrinker may spend by default.
DEFAULT_BUDGET = 150


@dataclass(frozen=True, slots=True)
class Attempt:
    """What running one candidate showed."""

    verdict: str
    failed: frozenset[str]


@dataclass
class Shrunk:
    original: Plan
    plan: Plan
    runs: int
    #: The checkers the shrunk run still fails.
    failed: frozenset[str] = field(default_factory=frozenset)


def same_failure(wanted: frozenset[str]) -> Callable[[Attempt], bool]:
    """A failure (not an error) of at least one checker of `wanted` (or, when
    only a step failed originally, any failure)."""

    def matches(attempt: Attempt) -> bool:
        if attempt.verdict != "fail":
            return False
        return not wanted or bool(attempt.failed & wanted)

    return matches


class _Budget:
    def __init__(self, run: Callable[[Plan], Attempt], keep: Callable[[Attempt], bool], runs: int):
        self.run, self.keep, self.left, self.used = run, keep, runs, 0
        self.last_failed: frozenset[str] = frozenset()

    def fails(self, plan: Plan) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.used += 1
        attempt = self.run(plan)
        if self.keep(attempt):
            self.last_failed = attempt.failed
            return True
        return False


def shrink(
    plan: Plan,
    run: Callable[[Plan], Attempt],
    failed: frozenset[str],
    *,
    budget: int = DEFAULT_BUDGET,
) -> Shrunk:
    """The smallest plan found that fails as `plan` did (which failed `failed`)."""
    tries = _Budget(run, same_failure(failed), budget)
    tries.last_failed = failed
    current = plan
    while tries.left > 0:
        before = current.size()
        current = _fewer_agents(current, tries)
        current = _shorter(current, tries)
        current = _fewer_items(current, tries)
        current = _shorter_settle(current, tries)
        if current.size() == before:
            break
    return Shrunk(plan, current, tries.used, tries.last_failed)


def _fewer_agents(plan: Plan, tries: _Budget) -> Plan:
    for agent in list(plan.agents):
        if len(plan.agents) <= 1:
            break
        candidate = plan.without_agent(agent)
        if tries.fails(candidate):
            plan = candidate
    return plan


def _shorter(plan: Plan, tries: _Budget) -> Plan:
    """The earliest cut-off that still fails (assuming a later one would too)."""
    starts = sorted({item.at for item in plan.items if item.kind != START})
    if len(starts) < 2:
        return plan
    low, high = 0, len(starts) - 1  # cut after starts[i]: keep items with at <= starts[i]
    best = plan
    while low < high:
        middle = (low + high) // 2
        candidate = plan.until(starts[middle] + 1e-6)
        if tries.fails(candidate):
            best, high = candidate, middle
        else:
            low = middle + 1
    return best


def _fewer_items(plan: Plan, tries: _Budget) -> Plan:
    """Delta debugging (ddmin) over the operations and faults."""
    items = list(plan.items)
    chunks = 2
    while len(items) >= 2 and tries.left > 0:
        size = max(1, len(items) // chunks)
        removed_any = False
        for begin in range(0, len(items), size):
            rest = items[:begin] + items[begin + size :]
            if rest and tries.fails(plan.keeping(rest)):
                items = rest
                chunks = max(chunks - 1, 2)
                removed_any = True
                break
        if not removed_any:
            if size == 1:
                break
            chunks = min(chunks * 2, len(items))
    return plan.keeping(items)


def _shorter_settle(plan: Plan, tries: _Budget) -> Plan:
    settle = plan.settle
    while settle >= 2.0:
        candidate = replace(plan, settle=round(settle / 2, 3))
        if not tries.fails(candidate):
            break
        plan, settle = candidate, candidate.settle
    return plan
