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


def test_exit_codes_are_reference_only_for_someone_elses_agent(tmp_path: Path) -> None:
    """The minimal agent exits 1 after 4426 (its own convention): an unmarked
    exit-code step fails and says why; marked reference_only it is counted as
    not applicable, and the wire-level step still judges the agent."""
    from tests.third_party.targets import MINIMAL_AGENT
    from tetherbed.simulator.targets import Target

    steps = [
        {"start": "hub"},
        {"start": "future"},
        {"expect": {"event": "close", "process": "wire:future", "value": {"code": 4426}}},
        {"expect": {"agent": "future", "exit_code": 26}},
    ]
    topology = {"agents": {"future": {"session": "s", "options": {"protocol_version": "2.0"}}}}
    target = Target.reference().with_options(agent_command=MINIMAL_AGENT)
    raw = {"name": "exit codes", "checkers": ["no_reconnect_after_fatal"], "topology": topology}
    unmarked = run_scenario(
        parse({**raw, "steps": steps}), "process", 1, tmp_path / "a", target=target
    )
    assert unmarked.step_failure is not None
    assert "exited with 1, expected 26" in unmarked.step_failure
    assert "mark the step reference_only" in unmarked.step_failure
    assert unmarked.verdict == "error"  # it could not be judged: not the agent's failure
    steps[-1] = {"expect": {"agent": "future", "exit_code": 26, "reference_only": True}}
    marked = run_scenario(
        parse({**raw, "steps": steps}), "process", 1, tmp_path / "b", target=target
    )
    assert marked.ok, (marked.step_failure, marked.error)
    assert len(marked.not_applicable) == 1 and "future" in marked.not_applicable[0]


def test_a_control_mode_scenario_is_skipped_for_a_third_party_agent(tmp_path: Path) -> None:
    """Control mode runs Tetherbed's agent; against someone else's agent the run
    says so and starts nothing, instead of ending in an error."""
    import subprocess

    from tests.third_party.targets import MINIMAL_AGENT

    root = Path(__file__).resolve().parents[2]
    scenario = root / "scenarios" / "control_idle_stop_and_restore.yaml"
    command = [sys.executable, "-m", "tetherbed", "run", str(scenario), "--backend", "process"]
    done = subprocess.run(
        [*command, "--agent-command", MINIMAL_AGENT, "--report", str(tmp_path / "report")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "control mode: runs Tetherbed's agent only" in done.stdout
    assert "tetherbed conform agent --control-command" in done.stdout
