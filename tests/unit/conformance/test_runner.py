"""The runner and the verdicts: levels, outcomes, timeouts, locks, `last`, evidence."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import ClassVar

from tetherbed.simulator.conformance.case import Case, Context
from tetherbed.simulator.conformance.evidence import Evidence
from tetherbed.simulator.conformance.levels import Level, Outcome
from tetherbed.simulator.conformance.profiles import Profile
from tetherbed.simulator.conformance.runner import run_cases


class FakeEnvironment:
    description = "a fake target"
    details: ClassVar[dict] = {}

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.order: list[str] = []

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def applicable(self, case: Case) -> str | None:
        return "no such capability" if "missing" in case.needs else None

    @contextlib.asynccontextmanager
    async def context(
        self, case: Case, evidence: Evidence, profile: Profile
    ) -> AsyncIterator[Context]:
        self.running += 1
        self.most = max(self.most, self.running)
        self.order.append(case.id)
        try:
            yield Context(case, evidence, profile)
        finally:
            self.running -= 1


def make(case_id: str, check, level: Level = Level.MUST, **fields) -> Case:  # type: ignore[no-untyped-def]
    return Case(case_id, "agent", level, "Section", "A rule.", check, "family", **fields)


async def passes(ctx: Context) -> None:
    ctx.evidence.sent("conn", '{"type":"PING","id":"p1","payload":{}}')
    ctx.observe("measured something")


async def departs(ctx: Context) -> None:
    ctx.require(False, "what came back broke the rule")


async def no_evidence(ctx: Context) -> None:
    ctx.no_evidence("nothing happened")


async def not_applicable(ctx: Context) -> None:
    ctx.not_applicable("not advertised")


async def crashes(ctx: Context) -> None:
    raise KeyError("oops")


async def hangs(ctx: Context) -> None:
    await asyncio.sleep(30)


def run(cases: list[Case], env: FakeEnvironment | None = None, jobs: int = 4):  # type: ignore[no-untyped-def]
    return asyncio.run(run_cases(env or FakeEnvironment(), cases, Profile({}), jobs=jobs))


def test_a_departure_costs_what_its_level_says() -> None:
    results = run(
        [
            make("LE-a-must", departs, Level.MUST),
            make("LE-a-should", departs, Level.SHOULD),
            make("LE-an-info", departs, Level.INFO),
            make("LE-a-pass", passes),
        ]
    )
    assert [r.outcome for r in results] == [Outcome.FAIL, Outcome.WARN, Outcome.INFO, Outcome.PASS]
    assert results[0].reason == "what came back broke the rule"


def test_no_evidence_is_unknown_never_a_pass_and_a_crash_is_the_test_beds_error() -> None:
    results = run(
        [
            make("LE-nothing", no_evidence),
            make("LE-skipped", not_applicable),
            make("LE-crash", crashes),
            make("LE-gap", passes, needs=frozenset({"missing"})),
            make("LE-hang", hangs, timeout=0.2),
        ]
    )
    outcomes = {r.id: r.outcome for r in results}
    assert outcomes == {
        "LE-nothing": Outcome.UNKNOWN,
        "LE-skipped": Outcome.SKIP,
        "LE-crash": Outcome.ERROR,
        "LE-gap": Outcome.SKIP,
        "LE-hang": Outcome.ERROR,
    }
    crash = results[2]
    assert "KeyError" in crash.reason
    assert any("Traceback" in e.text for e in crash.evidence)
    assert "did not finish within 0.2 s" in results[4].reason


def test_evidence_and_observations_are_kept() -> None:
    (result,) = run([make("LE-a-pass", passes)])
    assert result.observations == ["measured something"]
    assert result.evidence[0].direction == "sent"
    assert result.evidence[0].channel == "conn"


def test_cases_run_at_once_up_to_jobs_and_locks_and_last_are_honoured() -> None:
    async def slow(ctx: Context) -> None:
        await asyncio.sleep(0.1)

    env = FakeEnvironment()
    cases = [make(f"LE-case-{n}", slow) for n in range(6)]
    run(cases, env, jobs=3)
    assert env.most == 3
    env = FakeEnvironment()
    locked = [make(f"LE-locked-{n}", slow, locks=frozenset({"display"})) for n in range(3)]
    run(locked, env, jobs=3)
    assert env.most == 1
    env = FakeEnvironment()
    ordered = [make("LE-at-the-end", slow, last=True), *(make(f"LE-x-{n}", slow) for n in range(3))]
    results = run(ordered, env, jobs=4)
    assert env.order[-1] == "LE-at-the-end"
    assert results[0].id == "LE-at-the-end"  # results keep the order given
