"""The frame scheduler finds a race in someone else's agent, and replays it.

The independent minimal agent (tests/third_party/minimal_agent.py) runs with
its planted race switched on (`--plant-race`: an answer carries the id of the
request that arrived last). The scenario sends a read and, 100 ms later, a
stat: unscheduled, the agent has answered the read long before the stat
arrives and the run passes. With `--schedule 600ms` the hub's two frames are
held for seeded times, and under some seeds the read is held until the stat
catches up with it, so both reach the agent together: the read's answer goes
out under the stat's id, and the hub refuses it (UNEXPECTED_ANSWER_TYPE).
Seeds 3 and 4 hold the read too briefly for that; seed 5 holds it long enough
(the holds are a function of the seed and the frame's place in its lane, so
this does not move with the machine's load by more than the margins).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.third_party.targets import MINIMAL_AGENT
from tetherbed.simulator.cli import main
from tetherbed.simulator.proxy.scheduler import DecisionLog, ScheduleOptions
from tetherbed.simulator.runner import run_scenario
from tetherbed.simulator.scenario import load_all
from tetherbed.simulator.targets import Target

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parents[1] / "third_party"
SCENARIO = HERE / "scenarios" / "requests_back_to_back.yaml"
#: A decision log recorded by `tetherbed run SCENARIO --schedule 600ms --seed 5`
#: against the racy agent (it failed).
RECORDED = HERE / "scenarios" / "requests_back_to_back.seed5.decisions.jsonl"
RACY = Target.reference().with_options(agent_command=MINIMAL_AGENT + " --plant-race")


def scenario():
    return load_all([SCENARIO], "process")[0]


def test_a_seed_sweep_with_the_scheduler_finds_the_planted_race(tmp_path: Path) -> None:
    found = None
    passed = []
    for seed in (3, 4, 5):
        decisions = tmp_path / f"seed{seed}.jsonl"
        outcome = run_scenario(
            scenario(),
            "process",
            seed,
            tmp_path / f"run{seed}",
            target=RACY,
            schedule=ScheduleOptions.explore("600ms", decisions=decisions),
        )
        assert outcome.schedule is not None and outcome.schedule["released"] > 0
        if outcome.verdict == "fail":
            found = (seed, outcome, decisions)
            break
        assert outcome.verdict == "pass", outcome.run_error
        passed.append(seed)
    assert found is not None, "no seed of 3..5 triggered the race"
    seed, outcome, decisions = found
    assert passed, "the very first seed failed: the race should need some orders only"
    # Both answers go out under the stat's id. When the read's FILE_CONTENTS
    # reaches the hub first, the stat is answered UNEXPECTED_ANSWER_TYPE; when
    # the stat's own answer wins, the read is left unanswered until its
    # deadline (AGENT_TIMEOUT). Which one the hub sees first is the OS's choice.
    failure = outcome.failure or ""
    assert "UNEXPECTED_ANSWER_TYPE" in failure or (
        "'id': 'read'" in failure and "AGENT_TIMEOUT" in failure
    ), failure
    log = DecisionLog.read(decisions)
    assert log.header["seed"] == seed and log.outcome == {"verdict": "fail", "failed": ["step"]}
    # The trigger, as the log shows it: the read went out while the stat was held
    # right behind it, and the agent answered the stat's id twice.
    read = next(d for d in log.decisions if d.kind == "FILE_READ")
    stat = next(d for d in log.decisions if d.kind == "FILE_STAT")
    assert stat.key in read.held and stat.n == read.n + 1
    answers = [d.request_id for d in log.decisions if d.key.direction == "up" and d.n > stat.n]
    assert answers[:2] == [stat.request_id, stat.request_id]


def test_replaying_the_recorded_order_reproduces_the_race(tmp_path: Path, capsys) -> None:
    status = main(
        [
            str(SCENARIO),
            "--backend", "process",
            "--agent-command", MINIMAL_AGENT + " --plant-race",
            "--replay", str(RECORDED),
            "--times", "2",
            "--report", str(tmp_path),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    said = re.search(r"reproduced (\d) of 2 runs", out)
    assert said, out
    assert status == (0 if int(said.group(1)) else 1)
    assert int(said.group(1)) >= 1, out
    assert "Real processes are not deterministic" in out
    replays = tmp_path / "two-requests-back-to-back-process-replay"
    replayed = [json.loads(line) for line in (replays / "replay-1.jsonl").read_text().splitlines()]
    assert replayed[0]["schedule"] == "replay" and replayed[0]["seed"] == 5
    whys = {line["why"] for line in replayed if "why" in line}
    assert "replay" in whys and whys <= {"replay", "unexpected", "late", "past-log"}
    # The same agent, unscheduled, passes the scenario: the fixed order misses the race.
    plain = run_scenario(scenario(), "process", 5, tmp_path / "plain", target=RACY)
    assert plain.verdict == "pass", plain.failure or plain.run_error
