"""Each checker, fed the history of a deliberately broken implementation, fails.

The broken implementations are the hub's and agent's `defects` switches; every
test also shows the unbroken run passes the same checker, so a checker that
always fails (or never does) is caught here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tetherbed.simulator.testbed import Testbed, topology


def bed(tmp_path: Path, hub: dict[str, Any] | None = None, **agents: dict[str, Any]) -> Testbed:
    clients = {"alice": {"session": "s"}, "bob": {"session": "s"}}
    testbed = Testbed(topology(hub, agents, clients), workdir=tmp_path)
    testbed.start("hub")
    return testbed


def verdict(testbed: Testbed, name: str) -> bool:
    (result,) = testbed.check([name])
    return result.ok


@pytest.mark.parametrize(("ownership", "ok"), [("reference", True), ("last-write-wins", False)])
def test_single_owner_catches_last_write_wins(tmp_path: Path, ownership: str, ok: bool) -> None:
    tb = bed(
        tmp_path,
        {"ownership": ownership},
        a={"machine": "a", "session": "s"},
        b={"machine": "b", "session": "s"},
    )
    try:
        tb.start("a")
        tb.expect(agent="a", state="connected")
        tb.start("b")
        tb.wait(5)
        assert verdict(tb, "single_owner") is ok
    finally:
        tb.close()


def _command_across_a_reset(tb: Testbed) -> None:
    tb.start("w")
    tb.expect(agent="w", state="connected")
    tb.send("alice", "EXECUTE_COMMAND", {"command": "echo ran >> ran.txt; sleep 3"}, "cmd")
    tb.wait(1)
    tb.fault("w", "reset")
    tb.wait(30)


@pytest.mark.parametrize(("defects", "ok"), [([], True), (["retry_non_idempotent"], False)])
def test_no_double_execution_catches_a_retried_command(
    tmp_path: Path, defects: list[str], ok: bool
) -> None:
    tb = bed(tmp_path, {"defects": defects}, w={"session": "s", "options": {"shell": True}})
    try:
        _command_across_a_reset(tb)
        assert verdict(tb, "no_double_execution") is ok
        assert (tb.root("w") / "ran.txt").read_text().count("ran") == (1 if ok else 2)
    finally:
        tb.close()


@pytest.mark.parametrize(("defects", "ok"), [([], True), (["orphan_on_disconnect"], False)])
def test_exactly_one_answer_catches_orphaned_requests(
    tmp_path: Path, defects: list[str], ok: bool
) -> None:
    tb = bed(tmp_path, {"defects": defects}, w={"session": "s", "options": {"shell": True}})
    try:
        _command_across_a_reset(tb)
        assert verdict(tb, "exactly_one_answer") is ok
    finally:
        tb.close()


@pytest.mark.parametrize(("defects", "ok"), [([], True), (["ignore_fatal_close"], False)])
def test_no_reconnect_after_fatal_catches_an_agent_ignoring_4427(
    tmp_path: Path, defects: list[str], ok: bool
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
        assert verdict(tb, "no_reconnect_after_fatal") is ok
    finally:
        tb.close()


@pytest.mark.parametrize(("defects", "ok"), [([], True), (["reconnect_immediately"], False)])
def test_backoff_bounds_catches_a_hot_reconnect_loop(
    tmp_path: Path, defects: list[str], ok: bool
) -> None:
    tb = bed(tmp_path, None, w={"session": "s", "options": {"defects": defects}})
    try:
        tb.start("w")
        tb.expect(agent="w", state="connected")
        tb.kill("hub")
        tb.wait(2)
        tb.start("hub")
        tb.wait(10)
        assert verdict(tb, "backoff_bounds") is ok
    finally:
        tb.close()


@pytest.mark.parametrize(("defects", "ok"), [([], True), (["shared_ids"], False)])
def test_no_crossed_answers_catches_a_hub_that_does_not_rewrite_ids(
    tmp_path: Path, defects: list[str], ok: bool
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
        assert verdict(tb, "no_crossed_answers") is ok
    finally:
        tb.close()


@pytest.mark.parametrize(("defects", "ok"), [([], True), (["lose_writes"], False)])
def test_file_contents_catches_an_agent_that_acknowledges_lost_writes(
    tmp_path: Path, defects: list[str], ok: bool
) -> None:
    tb = bed(tmp_path, None, w={"session": "s", "options": {"defects": defects}})
    try:
        tb.start("w")
        tb.expect(agent="w", state="connected")
        answer = tb.request("alice", "FILE_WRITE", {"path": "kept.txt", "content": "important"})
        assert answer.type == "ok"  # acknowledged either way
        assert verdict(tb, "file_contents") is ok
    finally:
        tb.close()
