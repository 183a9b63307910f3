"""Bugs that do not label themselves, caught from the wire.

The reference's defect switches announce themselves (a hub event says the
takeover was silent). These mutations come from outside and say nothing: a
stand-in hub that does silent last-write-wins, a fault-proxy rule that
re-issues a non-idempotent request on the next connection, an agent whose
backoff stops growing at 30 s. Each test checks the verdict's evidence names
the records that show the bug — and that the same run without it passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.third_party.targets import MINIMAL_AGENT, standin_hub
from tetherbed.simulator.checkers.verdict import Verdict
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import parse
from tetherbed.simulator.targets import Target
from tetherbed.simulator.testbed import Testbed, topology

pytestmark = pytest.mark.e2e


def _verdict(verdicts: list[Verdict], name: str) -> Verdict:
    return next(v for v in verdicts if v.name == name)


def _blamed(verdict: Verdict) -> list[tuple[str, str, Any]]:
    return [(e["process"], e["f"], (e.get("value") or {}).get("type")) for e in verdict.evidence]


SPLIT_BRAIN = {
    "name": "two machines, one session, a command in flight",
    "checkers": ["single_owner"],
    "topology": {
        "agents": {
            "a": {"machine": "a", "session": "s", "options": {"shell": True}},
            "b": {"machine": "b", "session": "s", "options": {"shell": True}},
        },
        "clients": {"alice": {"session": "s"}},
    },
    "steps": [
        {"start": "hub"},
        {"start": "a"},
        {"expect": {"agent": "a", "state": "connected"}},
        {
            "send": {
                "client": "alice",
                "id": "slow",
                "type": "EXECUTE_COMMAND",
                "payload": {"command": "sleep 3; echo a"},
            }
        },
        {"wait": 0.5},
        {"start": "b"},
        {"wait": 1},
        {
            "send": {
                "client": "alice",
                "id": "fast",
                "type": "EXECUTE_COMMAND",
                "payload": {"command": "echo b"},
            }
        },
        {"wait": 4},
    ],
}


@pytest.mark.parametrize("silent", [False, True])
def test_a_hub_doing_silent_last_write_wins_without_saying_so(tmp_path: Path, silent: bool) -> None:
    flags = ["--silent-last-write-wins"] if silent else []
    target = standin_hub(*flags, agent=MINIMAL_AGENT)
    outcome = run_scenario(parse(SPLIT_BRAIN), "process", 1, tmp_path, target=target)
    assert outcome.error is None, outcome.error
    verdict = _verdict(outcome.verdicts, "single_owner")
    journal = {r.f for r in outcome.history if r.process == "hub"}
    assert journal <= {"started", "exited", "killed"}  # no hub journal to go by
    if not silent:
        assert verdict.ok, verdict.summary
        return
    assert verdict.failed, verdict.summary
    blamed = _blamed(verdict)
    assert ("wire:a", "frame", "EXECUTE_COMMAND") in blamed
    assert ("wire:b", "frame", "EXECUTE_COMMAND") in blamed
    assert ("wire:b", "frame", "HELLO_ACK") in blamed


@pytest.mark.parametrize("reissue", [False, True])
def test_a_proxy_that_reissues_a_command_on_the_next_connection(
    tmp_path: Path, reissue: bool
) -> None:
    bed = Testbed(
        topology(
            None, {"w": {"session": "s", "options": {"shell": True}}}, {"alice": {"session": "s"}}
        ),
        backend="process",
        workdir=tmp_path,
    )
    try:
        bed.start("hub")
        bed.start("w")
        bed.expect(agent="w", state="connected")
        if reissue:
            proxy = bed.backend.agents["w"].proxy  # type: ignore[attr-defined]
            proxy.add_rule("reissue", stream="downstream", type="EXECUTE_COMMAND", count=1)
        answer = bed.request("alice", "EXECUTE_COMMAND", {"command": "echo ran >> ran.txt"})
        assert answer.type == "ok"
        bed.fault("w", "reset")
        bed.wait(8)
        bed.expect(agent="w", state="connected")
        bed.wait(1)
        (verdict,) = bed.check(["no_double_execution"])
        runs = (bed.root("w") / "ran.txt").read_text().count("ran")
    finally:
        bed.close()
    if not reissue:
        assert verdict.ok and runs == 1, verdict.summary
        return
    assert verdict.failed and runs == 2, verdict.summary
    frames = [e for e in verdict.evidence if e["f"] == "frame"]
    executions = [e for e in frames if e["role"].startswith("execution")]
    assert len(executions) == 2
    assert executions[1]["value"]["id"].endswith("-again")
    assert all(e["process"] == "wire:w" for e in executions)


OUTAGE = {
    "name": "a long outage",
    "checkers": ["backoff_bounds"],
    "topology": {"agents": {"w": {"session": "s"}}},
    "steps": [
        {"start": "hub"},
        {"start": "w"},
        {"expect": {"agent": "w", "state": "connected"}},
        {"kill": "hub"},
        {"wait": 92},
        {"start": "hub"},
        {"expect": {"agent": "w", "state": "connected", "within": 70}},
    ],
}


@pytest.mark.xdist_group("long-outage")
def test_an_agent_whose_backoff_stops_growing_at_30_s(tmp_path: Path) -> None:
    """After 1+2+4+8+16 s (plus jitter) the next delays must be 32-37 s, then
    60-65 s; at 30 s (+ jitter) the agent comes back too early — the sixth
    delay may still land inside 32-37 s, the seventh cannot. The hub stays down
    long enough for the seventh. One run, about two minutes."""
    capped = Target.reference().with_options(agent_command=MINIMAL_AGENT + " --backoff-cap 30")
    outcome = run_scenario(parse(OUTAGE), "process", 1, tmp_path, target=capped)
    assert outcome.error is None, outcome.error
    verdict = _verdict(outcome.verdicts, "backoff_bounds")
    assert verdict.failed, verdict.summary
    assert "too early" in verdict.summary and "[60, 65]" in verdict.summary
    roles = [e["role"] for e in verdict.evidence]
    assert any(r.endswith("the next attempt") for r in roles)
    assert {e["process"] for e in verdict.evidence} == {"wire:w"}
