"""The dsh agent's sans-I/O core: stream life, backoff, exec, chunks, POST retries."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from tetherbed.agent.dsh.core import (
    AgentCore,
    AgentSettings,
    CloseStream,
    Kill,
    OpenStream,
    Phase,
    Renamed,
    RunFs,
    SendPost,
    Spawn,
    Stopped,
)
from tetherbed.runtime.clock import ManualClock
from tetherbed.wire.dsh import backoff, schema
from tetherbed.wire.dsh import constants as C

HELLO = {
    "computerId": "cmp_0123456789ab",
    "name": "desk",
    "heartbeatMs": 20000,
    "capabilities": ["exec", "fs"],
    "features": ["stream", "fs"],
}


class Agent:
    def __init__(self, **settings: Any) -> None:
        self.clock = ManualClock()
        self.core = AgentCore(
            AgentSettings(computer_id="cmp_0123456789ab", name="desk", **settings),
            self.clock,
            random.Random(7),
        )
        self.actions: list = []

    def run(self, actions: list) -> list:
        self.actions += actions
        return actions

    def connect(self, hello: dict | None = None) -> int:
        opened = [
            a for a in self.run(self.core.start() or self.core.tick()) if isinstance(a, OpenStream)
        ]
        generation = opened[-1].generation
        self.run(self.core.stream_opened(generation, 200))
        self.run(self.core.stream_event(generation, "hello", json.dumps(hello or HELLO)))
        return generation

    def event(self, name: str, data: dict) -> list:
        return self.run(self.core.stream_event(self.core.generation, name, json.dumps(data)))

    def tick(self, seconds: float) -> list:
        self.clock.advance(seconds)
        return self.run(self.core.tick())

    def posts(self, path: str) -> list[SendPost]:
        return [a for a in self.actions if isinstance(a, SendPost) and a.path == C.url(path)]

    def answer_all(self, status: int = 200, body: Any = None) -> list:
        """Answer every POST sent so far (and those that sending causes)."""
        answered: set[int] = set()
        out: list = []
        while True:
            pending = [
                a for a in self.actions if isinstance(a, SendPost) and a.post_id not in answered
            ]
            if not pending:
                return out
            for post in pending:
                answered.add(post.post_id)
                out += self.run(self.core.post_answered(post.post_id, status, body))


def _exec(agent: Agent, rid: str = "req_1", **extra: Any) -> None:
    event = {
        "requestId": rid,
        "command": "echo hi",
        "cwd": None,
        "timeoutMs": 5000,
        "shell": "sh",
        "stream": True,
        **extra,
    }
    agent.event("exec", event)


# --- the stream and backoff ----------------------------------------------------


def test_hello_starts_streaming_and_a_heartbeat_post() -> None:
    agent = Agent()
    agent.connect()
    assert agent.core.phase is Phase.STREAMING
    beats = agent.posts(C.Route.HEARTBEAT)
    assert len(beats) == 1
    assert schema.problems(beats[0].body, schema.HEARTBEAT) == []
    assert beats[0].body["capabilities"] == ["exec", "fs"]
    agent.answer_all(body={"ok": True, "name": "desk"})
    agent.tick(20)
    assert len(agent.posts(C.Route.HEARTBEAT)) == 2


def test_reconnect_delays_follow_the_spec_and_reset_after_a_healthy_stream() -> None:
    agent = Agent()
    generation = agent.connect()
    for attempt in range(8):
        agent.run(agent.core.stream_lost(generation, "drop"))
        delay = agent.core.delays[-1]
        low, high = backoff.bounds(attempt)
        assert low <= delay <= high, (attempt, delay)
        assert 1.0 <= delay <= 30.0
        assert not [a for a in agent.tick(delay - 0.01) if isinstance(a, OpenStream)]
        opened = [a for a in agent.tick(0.02) if isinstance(a, OpenStream)]
        assert opened, attempt
        generation = opened[0].generation
    assert agent.core.delays[-1] >= 24.0  # at the cap, jittered below it
    # a stream that delivers hello and stays up 10 s resets the schedule
    agent.run(agent.core.stream_opened(generation, 200))
    agent.event("hello", HELLO)
    agent.tick(10)
    agent.run(agent.core.stream_lost(generation, "drop"))
    assert agent.core.delays[-1] <= 1.2


def test_a_stream_that_drops_before_ten_seconds_does_not_reset() -> None:
    agent = Agent()
    generation = agent.connect()
    agent.run(agent.core.stream_lost(generation, "drop"))
    generation = next(a for a in agent.tick(2) if isinstance(a, OpenStream)).generation
    agent.run(agent.core.stream_opened(generation, 200))
    agent.event("hello", HELLO)
    agent.tick(5)
    agent.run(agent.core.stream_lost(generation, "drop"))
    low, _ = backoff.bounds(1)
    assert agent.core.delays[-1] >= low


def test_401_stops_for_good() -> None:
    agent = Agent()
    agent.run(agent.core.start())
    actions = agent.run(agent.core.stream_opened(agent.core.generation, 401))
    stopped = [a for a in actions if isinstance(a, Stopped)]
    assert stopped and stopped[0].exit_code == 3
    assert agent.core.phase is Phase.STOPPED
    assert agent.tick(120) == []


def test_other_refusals_are_retried() -> None:
    agent = Agent()
    agent.run(agent.core.start())
    agent.run(agent.core.stream_opened(agent.core.generation, 503))
    assert agent.core.phase is Phase.WAITING
    assert [a for a in agent.tick(1.2) if isinstance(a, OpenStream)]


def test_a_silent_stream_is_given_up_after_two_and_a_half_heartbeats() -> None:
    agent = Agent()
    agent.connect()
    agent.tick(49)
    assert agent.core.phase is Phase.STREAMING
    agent.event("ping", {"t": 1})
    agent.tick(49)
    assert agent.core.phase is Phase.STREAMING
    actions = agent.tick(1.1)
    assert any(isinstance(a, CloseStream) for a in actions)
    assert agent.core.phase is Phase.WAITING


def test_stale_events_of_an_old_stream_are_ignored() -> None:
    agent = Agent()
    old = agent.connect()
    agent.run(agent.core.stream_lost(old, "drop"))
    agent.tick(1.2)
    assert (
        agent.run(
            agent.core.stream_event(old, "exec", json.dumps({"requestId": "r", "command": "x"}))
        )
        == []
    )


def test_defect_reconnect_immediately() -> None:
    agent = Agent(defects=frozenset({"reconnect_immediately"}))
    generation = agent.connect()
    agent.run(agent.core.stream_lost(generation, "drop"))
    assert agent.core.delays[-1] == 0.0


# --- exec ---------------------------------------------------------------------


def test_exec_spawns_and_posts_one_strict_result() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent, stream=False)
    spawn = next(a for a in agent.actions if isinstance(a, Spawn))
    assert (spawn.request_id, spawn.command, spawn.cwd, spawn.shell) == (
        "req_1",
        "echo hi",
        None,
        "sh",
    )
    agent.run(agent.core.process_output("req_1", "stdout", b"hi\n"))
    agent.clock.advance(0.042)
    agent.run(agent.core.process_exited("req_1", 0))
    results = agent.posts(C.Route.RESULTS)
    assert len(results) == 1
    body = results[0].body
    assert schema.problems(body, schema.RESULT) == []
    assert body["stdout"] == "hi\n" and body["ok"] is True and body["durationMs"] == 42
    assert agent.posts(C.Route.RESULTS_CHUNK) == []  # stream: false


def test_streaming_chunks_batch_at_100ms_and_stay_in_order() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent)
    agent.run(agent.core.process_output("req_1", "stdout", b"a"))
    chunks = agent.posts(C.Route.RESULTS_CHUNK)
    assert len(chunks) == 1  # the first output goes at once
    agent.run(agent.core.process_output("req_1", "stdout", b"b"))
    agent.run(agent.core.process_output("req_1", "stderr", b"E"))
    agent.tick(0.2)
    assert len(agent.posts(C.Route.RESULTS_CHUNK)) == 1  # one in flight at a time
    agent.run(agent.core.post_answered(chunks[0].post_id, 200, {"ok": True}))
    second = agent.posts(C.Route.RESULTS_CHUNK)[1].body
    assert schema.problems(second, schema.CHUNK) == []
    assert second["seq"] == 1
    assert base64.b64decode(second["stdout"]) == b"b"
    assert base64.b64decode(second["stderr"]) == b"E"
    # the final result waits for the chunk in flight
    agent.run(agent.core.process_exited("req_1", 0))
    assert agent.posts(C.Route.RESULTS) == []
    agent.answer_all()
    assert len(agent.posts(C.Route.RESULTS)) == 1
    final = agent.posts(C.Route.RESULTS)[0].body
    assert (final["stdout"], final["stderr"]) == ("ab", "E")


def test_a_32_kib_batch_goes_before_100ms() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent)
    agent.run(agent.core.process_output("req_1", "stdout", b"x"))
    agent.answer_all()
    agent.run(agent.core.process_output("req_1", "stdout", b"y" * (32 * 1024)))
    assert len(agent.posts(C.Route.RESULTS_CHUNK)) == 2


def test_no_streaming_without_the_hubs_feature() -> None:
    agent = Agent()
    agent.connect({**HELLO, "features": []})
    _exec(agent)
    agent.run(agent.core.process_output("req_1", "stdout", b"x"))
    assert agent.posts(C.Route.RESULTS_CHUNK) == []


def test_a_silent_streaming_command_sends_heartbeat_frames() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent, timeoutMs=60_000)
    agent.tick(9.9)
    assert agent.posts(C.Route.RESULTS_CHUNK) == []
    agent.tick(0.2)
    frames = agent.posts(C.Route.RESULTS_CHUNK)
    assert frames[-1].body == {"requestId": "req_1", "seq": 0, "type": "heartbeat", "data": ""}
    assert schema.problems(frames[-1].body, schema.TYPED_CHUNK) == []


def test_typed_chunk_format() -> None:
    agent = Agent(chunk_format="typed")
    agent.connect()
    _exec(agent)
    agent.run(agent.core.process_output("req_1", "stderr", b"oops"))
    body = agent.posts(C.Route.RESULTS_CHUNK)[0].body
    assert body == {"requestId": "req_1", "seq": 0, "type": "stderr", "data": "b29wcw=="}


def test_output_is_capped_per_stream_and_marked() -> None:
    agent = Agent(max_output_bytes=10)
    agent.connect()
    _exec(agent, stream=False)
    agent.run(agent.core.process_output("req_1", "stdout", b"0123456789abc"))
    agent.run(agent.core.process_output("req_1", "stderr", b"err"))
    agent.run(agent.core.process_exited("req_1", 0))
    body = agent.posts(C.Route.RESULTS)[0].body
    assert body["stdout"] == "0123456789\n[output truncated]"
    assert body["stderr"] == "err"
    assert body["truncated"] is True


def test_timeout_kills_and_reports_timed_out() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent, timeoutMs=1500, stream=False)
    agent.tick(1.4)
    assert not [a for a in agent.actions if isinstance(a, Kill)]
    agent.tick(0.2)
    assert next(a for a in agent.actions if isinstance(a, Kill)).request_id == "req_1"
    agent.run(agent.core.process_exited("req_1", None, "SIGKILL"))
    body = agent.posts(C.Route.RESULTS)[0].body
    assert body["timedOut"] is True and body["ok"] is False and body["signal"] == "SIGKILL"


def test_cancel_kills_the_process_group() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent, stream=False)
    agent.event("cancel", {"requestId": "req_1"})
    assert next(a for a in agent.actions if isinstance(a, Kill)).request_id == "req_1"
    agent.run(agent.core.process_exited("req_1", None, "SIGKILL"))
    assert agent.posts(C.Route.RESULTS)[0].body["error"] == "cancelled"
    # an unknown or finished request: nothing
    assert agent.event("cancel", {"requestId": "req_1"}) == []


def test_defect_ignore_cancel() -> None:
    agent = Agent(defects=frozenset({"ignore_cancel"}))
    agent.connect()
    _exec(agent)
    agent.event("cancel", {"requestId": "req_1"})
    assert not [a for a in agent.actions if isinstance(a, Kill)]


@pytest.mark.parametrize("defect, first", [("constant_seq", 0), ("seq_from_one", 1)])
def test_defects_misnumber_chunks(defect: str, first: int) -> None:
    agent = Agent(defects=frozenset({defect}))
    agent.connect()
    _exec(agent)
    agent.run(agent.core.process_output("req_1", "stdout", b"a"))
    agent.run(agent.core.process_output("req_1", "stdout", b"b"))
    first_post = agent.posts(C.Route.RESULTS_CHUNK)[0]
    agent.run(agent.core.post_answered(first_post.post_id, 200, {"ok": True}))
    agent.tick(0.2)
    seqs = [p.body["seq"] for p in agent.posts(C.Route.RESULTS_CHUNK)]
    assert seqs[0] == first and seqs != list(range(len(seqs)))


def test_config_renames_and_can_disable_exec() -> None:
    agent = Agent()
    agent.connect()
    actions = agent.event("config", {"name": "Desk Mac mini", "execEnabled": False})
    assert Renamed("Desk Mac mini") in actions
    _exec(agent)
    assert not [a for a in agent.actions if isinstance(a, Spawn)]
    body = agent.posts(C.Route.RESULTS)[0].body
    assert body["ok"] is False and "disabled" in body["error"]


def test_a_repeated_exec_runs_once() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent)
    _exec(agent)
    assert len([a for a in agent.actions if isinstance(a, Spawn)]) == 1


def test_exec_before_hello_is_ignored_and_bad_json_is_tolerated() -> None:
    agent = Agent()
    agent.run(agent.core.start())
    agent.run(agent.core.stream_opened(agent.core.generation, 200))
    _exec(agent)
    assert not [a for a in agent.actions if isinstance(a, Spawn)]
    agent.run(agent.core.stream_event(agent.core.generation, "exec", "{not json"))
    assert agent.core.phase is Phase.CONNECTING


# --- POSTs --------------------------------------------------------------------


def test_a_result_post_lost_on_the_network_is_retried_then_given_up() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent, stream=False)
    agent.run(agent.core.process_exited("req_1", 0))
    first = agent.posts(C.Route.RESULTS)[0]
    agent.run(agent.core.post_answered(first.post_id, None))
    assert len(agent.posts(C.Route.RESULTS)) == 1
    agent.tick(0.5)
    again = agent.posts(C.Route.RESULTS)
    assert len(again) == 2 and again[1].body == first.body and again[1].post_id == first.post_id
    for _ in range(10):
        agent.run(agent.core.post_answered(first.post_id, 503))
        agent.tick(30)
    assert len(agent.posts(C.Route.RESULTS)) == 6  # the first and five retries


def test_a_404_for_a_chunk_stops_streaming_that_command() -> None:
    agent = Agent()
    agent.connect()
    _exec(agent)
    agent.run(agent.core.process_output("req_1", "stdout", b"a"))
    chunk = agent.posts(C.Route.RESULTS_CHUNK)[0]
    agent.run(agent.core.post_answered(chunk.post_id, 404, {"error": "unknown-request"}))
    agent.run(agent.core.process_output("req_1", "stdout", b"b"))
    agent.tick(1)
    assert len(agent.posts(C.Route.RESULTS_CHUNK)) == 1
    agent.run(agent.core.process_exited("req_1", 0))
    assert agent.posts(C.Route.RESULTS)[0].body["stdout"] == "ab"


def test_the_heartbeat_answer_carries_the_name() -> None:
    agent = Agent()
    agent.connect()
    actions = agent.answer_all(body={"ok": True, "name": "renamed"})
    assert Renamed("renamed") in actions


# --- fs ---------------------------------------------------------------------------


def test_fs_requests_run_and_answer_on_fs_result() -> None:
    agent = Agent()
    agent.connect()
    agent.event("fs", {"requestId": "fsr_1", "op": "stat", "path": "/etc"})
    run = next(a for a in agent.actions if isinstance(a, RunFs))
    assert run.request["op"] == "stat"
    result = {
        "ok": True,
        "op": "stat",
        "path": "/etc",
        "stat": {"type": "dir", "size": 1, "mtimeMs": 0, "mode": 493},
        "error": None,
    }
    agent.run(agent.core.fs_finished("fsr_1", result))
    body = agent.posts(C.Route.FS_RESULT)[0].body
    assert body["requestId"] == "fsr_1"
    assert schema.problems(body, schema.FS_RESULT) == []


def test_unknown_defects_are_refused() -> None:
    with pytest.raises(ValueError):
        Agent(defects=frozenset({"nope"}))


def test_the_enroll_body_is_strict() -> None:
    from tetherbed.agent.dsh.enrollment import enroll_body

    body = enroll_body("dshc_" + "a" * 43, "desk", "/home/me")
    assert schema.problems(body, schema.ENROLL_REQUEST) == []
    assert body["machine"]["name"] == "desk" and body["metadata"]["workspaceBase"] == "/home/me"
    assert body["capabilities"] == ["exec", "fs"]
