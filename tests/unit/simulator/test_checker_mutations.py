"""Each checker, fed the history of a deliberately broken implementation, fails —
and its evidence names the records that show the defect.

The broken implementations are the reference hub's and agent's `defects`
switches (mutations from outside — a stand-in hub, a proxy rule, an agent of
someone else's — are in tests/e2e/test_mutations_from_outside.py). Every test
also shows the unbroken run passes the same checker, so a checker that always
fails (or never does) is caught here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tetherbed.simulator.checkers.verdict import Verdict
from tetherbed.simulator.proxy.ws.rules import MessageRule
from tetherbed.simulator.testbed import Testbed, topology


def bed(tmp_path: Path, hub: dict[str, Any] | None = None, **agents: dict[str, Any]) -> Testbed:
    clients = {"alice": {"session": "s"}, "bob": {"session": "s"}}
    testbed = Testbed(topology(hub, agents, clients), workdir=tmp_path)
    testbed.start("hub")
    return testbed


def judge(testbed: Testbed, name: str) -> Verdict:
    (result,) = testbed.check([name])
    return result


def evidence(verdict: Verdict) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e["process"], e["f"], e.get("value") or {}) for e in verdict.evidence]


@pytest.mark.parametrize("ownership", ["reference", "last-write-wins"])
def test_single_owner_catches_last_write_wins(tmp_path: Path, ownership: str) -> None:
    tb = bed(
        tmp_path,
        {"ownership": ownership},
        a={"machine": "a", "session": "s", "options": {"shell": True}},
        b={"machine": "b", "session": "s", "options": {"shell": True}},
    )
    try:
        tb.start("a")
        tb.expect(agent="a", state="connected")
        tb.send("alice", "EXECUTE_COMMAND", {"command": "sleep 3; echo a"}, "slow")
        tb.wait(0.5)
        tb.start("b")
        tb.wait(0.5)
        tb.send("alice", "EXECUTE_COMMAND", {"command": "echo b"}, "fast")
        tb.wait(5)
        verdict = judge(tb, "single_owner")
        if ownership == "reference":
            assert verdict.ok, verdict.summary
            return
        assert verdict.failed
        frames = {(p, v.get("type")) for p, f, v in evidence(verdict) if f == "frame"}
        assert ("wire:a", "EXECUTE_COMMAND") in frames and ("wire:b", "EXECUTE_COMMAND") in frames
    finally:
        tb.close()


def _command_across_a_reset(tb: Testbed) -> None:
    tb.start("w")
    tb.expect(agent="w", state="connected")
    tb.send("alice", "EXECUTE_COMMAND", {"command": "echo ran >> ran.txt; sleep 3"}, "cmd")
    tb.wait(1)
    tb.fault("w", "reset")
    tb.wait(30)


@pytest.mark.parametrize("defects", [[], ["retry_non_idempotent"]])
def test_no_double_execution_catches_a_retried_command(tmp_path: Path, defects: list[str]) -> None:
    tb = bed(tmp_path, {"defects": defects}, w={"session": "s", "options": {"shell": True}})
    try:
        _command_across_a_reset(tb)
        verdict = judge(tb, "no_double_execution")
        runs = (tb.root("w") / "ran.txt").read_text().count("ran")
        if not defects:
            assert verdict.ok and runs == 1, verdict.summary
            return
        assert verdict.failed and runs == 2
        roles = {e["role"].split(" (")[0] for e in verdict.evidence if e["f"] == "frame"}
        assert {"execution 1 of 2", "execution 2 of 2"} <= roles
        assert ("client:alice", "EXECUTE_COMMAND") in {(p, f) for p, f, _ in evidence(verdict)}
    finally:
        tb.close()


@pytest.mark.parametrize("defects", [[], ["orphan_on_disconnect"]])
def test_exactly_one_answer_catches_orphaned_requests(tmp_path: Path, defects: list[str]) -> None:
    tb = bed(tmp_path, {"defects": defects}, w={"session": "s", "options": {"shell": True}})
    try:
        _command_across_a_reset(tb)
        verdict = judge(tb, "exactly_one_answer")
        if not defects:
            assert verdict.ok, verdict.summary
            return
        assert verdict.failed
        [orphan] = verdict.evidence
        assert (orphan["process"], orphan["type"], orphan["req"]) == (
            "client:alice",
            "invoke",
            "cmd",
        )
    finally:
        tb.close()


@pytest.mark.parametrize("defects", [[], ["ignore_fatal_close"]])
def test_no_reconnect_after_fatal_catches_an_agent_ignoring_4427(
    tmp_path: Path, defects: list[str]
) -> None:
    tb = bed(
        tmp_path,
        None,
        a={"machine": "a", "session": "s"},
        b={"machine": "b", "session": "s", "options": {"defects": defects}},
    )
    try:
        tb.start("a")
        tb.expect(agent="a", state="connected")
        tb.start("b")
        tb.wait(20)
        verdict = judge(tb, "no_reconnect_after_fatal")
        if not defects:
            assert verdict.ok, verdict.summary
            return
        assert verdict.failed
        found = evidence(verdict)
        assert found[0][:2] == ("wire:b", "close") and found[0][2]["code"] == 4427
        assert found[1][:2] == ("wire:b", "connect")
    finally:
        tb.close()


@pytest.mark.parametrize("defects", [[], ["reconnect_immediately"]])
def test_backoff_bounds_catches_a_hot_reconnect_loop(tmp_path: Path, defects: list[str]) -> None:
    tb = bed(tmp_path, None, w={"session": "s", "options": {"defects": defects}})
    try:
        tb.start("w")
        tb.expect(agent="w", state="connected")
        tb.kill("hub")
        tb.wait(2)
        tb.start("hub")
        tb.wait(10)
        verdict = judge(tb, "backoff_bounds")
        if not defects:
            assert verdict.ok, verdict.summary
            return
        assert verdict.failed and "hot loop" in verdict.summary
        assert {(p, f) for p, f, _ in evidence(verdict)} >= {("wire:w", "connect")}
    finally:
        tb.close()


@pytest.mark.parametrize("defects", [[], ["shared_ids"]])
def test_no_crossed_answers_catches_a_hub_that_does_not_rewrite_ids(
    tmp_path: Path, defects: list[str]
) -> None:
    files = {"alice.txt": "for alice", "bob.txt": "for bob"}
    tb = bed(tmp_path, {"defects": defects}, w={"session": "s", "options": {"files": files}})
    try:
        tb.start("w")
        tb.expect(agent="w", state="connected")
        for client in ("alice", "bob"):  # open both connections first
            assert tb.request(client, "FILE_STAT", {"path": "."}).type == "ok"
        # Same id from two clients; bob's lands while alice's answer is on its way.
        tb.send("alice", "FILE_READ", {"path": "alice.txt"}, "q")
        tb.wait(0.0005)
        tb.send("bob", "FILE_READ", {"path": "bob.txt"}, "q")
        tb.wait(5)
        verdict = judge(tb, "no_crossed_answers")
        if not defects:
            assert verdict.ok, verdict.summary
            return
        assert verdict.failed
        roles = {(e["process"], e["role"]) for e in verdict.evidence}
        assert any(role == "the content returned" for _, role in roles), roles
    finally:
        tb.close()


@pytest.mark.parametrize("defects", [[], ["lose_writes"]])
def test_file_contents_catches_an_agent_that_acknowledges_lost_writes(
    tmp_path: Path, defects: list[str]
) -> None:
    tb = bed(tmp_path, None, w={"session": "s", "options": {"defects": defects}})
    try:
        tb.start("w")
        tb.expect(agent="w", state="connected")
        answer = tb.request("alice", "FILE_WRITE", {"path": "kept.txt", "content": "important"})
        assert answer.type == "ok"  # acknowledged either way
        verdict = judge(tb, "file_contents")
        if not defects:
            assert verdict.ok, verdict.summary
            return
        assert verdict.failed and "lost write" in verdict.summary
        found = {(p, f) for p, f, _ in evidence(verdict)}
        assert {("runner", "final_file"), ("client:alice", "FILE_WRITE")} <= found
    finally:
        tb.close()


def test_no_double_execution_catches_a_reissue_no_journal_mentions(tmp_path: Path) -> None:
    """The network re-sends the command on the next connection (the proxy's
    `reissue` rule, on sim): the hub's journal knows nothing of it."""
    tb = bed(tmp_path, None, w={"session": "s", "options": {"shell": True}})
    try:
        tb.start("w")
        tb.expect(agent="w", state="connected")
        rule = MessageRule("reissue", stream="downstream", type="EXECUTE_COMMAND", count=1)
        tb.backend.network.add_rule("w", rule)  # type: ignore[attr-defined]
        assert (
            tb.request("alice", "EXECUTE_COMMAND", {"command": "echo ran >> ran.txt"}).type == "ok"
        )
        tb.fault("w", "reset")
        tb.wait(10)
        verdict = judge(tb, "no_double_execution")
        assert (tb.root("w") / "ran.txt").read_text().count("ran") == 2
    finally:
        tb.close()
    assert verdict.failed
    again = [e for e in verdict.evidence if e["role"].startswith("execution 2")]
    assert again and again[0]["value"]["id"].endswith("-again")
    assert not any(r.f == "retry" for r in tb.history if r.process == "hub")
