"""The pytest plugin's fixtures, used the way a user's suite would (sim backend)."""

from __future__ import annotations

import pytest

from tetherbed.simulator.runner import StepFailed
from tetherbed.simulator.scenario import ScenarioError
from tetherbed.simulator.testbed import Testbed


def test_the_owner_keeps_serving_when_another_machine_claims_the_session(
    topology, hub: Testbed, agent
) -> None:
    topology.client("alice", session="chat")
    agent("laptop-a", machine="a", session="chat", shell=True)
    agent("laptop-b", machine="b", session="chat", wait=False)
    hub.expect(agent="laptop-b", exit_code=27)
    answer = hub.request("alice", "EXECUTE_COMMAND", {"command": "echo mine"})
    assert answer.type == "ok" and answer.value["stdout"] == "mine\n"
    verdicts = hub.check()
    assert [v.name for v in verdicts if v.failed or v.error is not None] == []
    judged = {v.name for v in verdicts if v.ok}
    assert {"single_owner", "exactly_one_answer", "no_reconnect_after_fatal"} <= judged


@pytest.mark.tetherbed(hub={"ping_interval": 5.0, "pong_timeout": 2.0})
def test_sleep_and_wake_in_virtual_time(topology, hub: Testbed, agent) -> None:
    topology.client("alice", session="s")
    agent("laptop", session="s")
    hub.pause("laptop")
    hub.wait(3600)  # an hour asleep costs no real time on sim
    # the hub dropped it (no PONG) and its retry window is long over
    asleep = hub.request("alice", "FILE_WRITE", {"path": "woke.txt", "content": "zz"})
    assert asleep.type == "fail" and asleep.value["code"] == "AGENT_NOT_CONNECTED"
    hub.resume("laptop")
    hub.expect(event="connected", process="agent:laptop", within=90)  # a new connection
    awake = hub.request("alice", "FILE_WRITE", {"path": "woke.txt", "content": "hi"})
    assert awake.type == "ok"
    assert (hub.root("laptop") / "woke.txt").read_text() == "hi"
    assert hub.history.records[-1].time > 3600


def test_a_failed_expectation_raises(topology, hub: Testbed, agent) -> None:
    agent("lonely", session="s")
    with pytest.raises(StepFailed):
        hub.expect(agent="lonely", exit_code=0, within=5)


@pytest.mark.tetherbed(hub={"ownership": "last-write-wins"})
def test_checkers_see_a_broken_hub(topology, hub: Testbed, agent) -> None:
    agent("a", machine="a", session="s")
    agent("b", machine="b", session="s")
    failing = {v.name for v in hub.check() if not v.ok}
    assert "single_owner" in failing


def test_unknown_fixture_keywords_are_refused_naming_the_key(topology, hub: Testbed, agent) -> None:
    with pytest.raises(ScenarioError, match=r"options: unknown key 'shel' \(did you mean 'shell'"):
        agent("laptop", session="s", shel=True)
    with pytest.raises(ScenarioError, match=r"unknown key 'latency' \(did you mean 'latency_ms'"):
        agent("box", session="s")
        hub.fault("box", "latency", latency=300)
    with pytest.raises(ScenarioError, match=r"within: expected a number of seconds, got '10s'"):
        hub.expect(agent="box", state="connected", within="10s")


def test_an_unknown_marker_option_errors_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.tetherbed(hub={"ping_intervl": 5})
        def test_typo(hub):
            pass

        @pytest.mark.tetherbed(hubb={})
        def test_unknown_keyword(hub):
            pass
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*topology.hub.options: unknown key 'ping_intervl' (did you mean 'ping_interval'?)*",
            "*@pytest.mark.tetherbed: unknown keyword 'hubb'; allowed: hub*",
        ]
    )
