"""The process backend against someone else's parts: a hub at a URL, an agent command.

The "third-party" parts here are Tetherbed's own hub and agent started the way
a user would start theirs — the hub by hand, the agent from a command
template — so the test shows the plumbing, not another implementation.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tetherbed.launch import start_hub
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import parse

pytestmark = pytest.mark.e2e


def test_a_scenario_against_an_external_hub_and_an_agent_command(tmp_path: Path) -> None:
    hub = start_hub(tmp_path / "their-hub")
    try:
        tokens = {
            "alice": {"agent": hub.token("alice", "agent"), "client": hub.token("alice", "client")}
        }
        agent_command = [
            sys.executable,
            "-m",
            "tetherbed",
            "agent",
            "--hub",
            "{hub_url}",
            "--token",
            "{token}",
            "--session-id",
            "{session}",
            "--root",
            "{root}",
            "--machine-id",
            "{machine}",
            "--enable-shell",
        ]
        scenario = parse(
            {
                "name": "third-party parts",
                "topology": {
                    "hub": {"url": hub.url, "options": {"tokens": tokens}},
                    "agents": {
                        "theirs": {"machine": "m1", "session": "s1", "command": agent_command},
                        "other": {"machine": "m2", "session": "s1", "command": agent_command},
                    },
                    "clients": {"alice": {"session": "s1"}},
                },
                "steps": [
                    {"start": "theirs"},
                    {"wait": 2},
                    {
                        "send": {
                            "client": "alice",
                            "id": "c",
                            "type": "EXECUTE_COMMAND",
                            "payload": {"command": "echo from theirs"},
                        }
                    },
                    {
                        "expect": {
                            "client": "alice",
                            "id": "c",
                            "outcome": "ok",
                            "value": {"stdout": "from theirs\n"},
                        }
                    },
                    {"start": "other"},
                    {"expect": {"agent": "other", "exit_code": 27}},
                ],
            }
        )
        outcome = run_scenario(scenario, "process", 1, tmp_path / "run")
    finally:
        hub.stop()
    assert outcome.ok, (
        outcome.step_failure,
        outcome.error,
        [v for v in outcome.verdicts if not v.ok],
    )
    # No journals from their agents: the agent-side checkers had nothing to hold
    # against them, the client-side ones did.
    names = {v.name for v in outcome.verdicts}
    assert {"exactly_one_answer", "no_crossed_answers"} <= names
