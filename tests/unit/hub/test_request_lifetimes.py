"""No request holds a slot forever: versions, deadlines, capacity, overload refusals.

Each test here is a finding of the interop issue, reproduced on the core:
it failed before the fix, and says how in its docstring.
"""

from __future__ import annotations

import pytest

from .core_harness import Hub, closes, enc, frames


def quiet(**config: object) -> Hub:
    """A hub whose keepalive stays out of the way of the deadlines under test."""
    return Hub(ping_interval=3600.0, **config)


def stat(request_id: str, **envelope: object) -> bytes:
    return enc(type="FILE_STAT", id=request_id, payload={"path": "/w/a"}, **envelope)


def overloaded(hub_id: str, free: int | None = 0) -> bytes:
    extra = {} if free is None else {"pending_capacity": free}
    payload = {"code": "SHIM_OVERLOADED", "message": "busy", "fatal": False}
    return enc(type="ERROR", id=hub_id, payload=payload, **extra)


def resent(hub: Hub, agent: object, step: float = 0.25) -> tuple[float, list[dict]]:
    """Advance time until the hub sends the agent something; (waited, frames)."""
    waited = 0.0
    while waited < 60.0:
        if sent := frames(hub.core.on_timer(), agent):
            return waited, sent
        hub.clock.advance(step)
        waited += step
    raise AssertionError("nothing was sent again within 60 s")


def test_the_relay_stamps_the_negotiated_version_not_the_clients() -> None:
    """Before: the client's "2.0" went to the agent, which drops another major
    without answering (the spec), so four such requests held every slot."""
    hub = quiet()
    agent, _, _ = hub.agent()
    _, client = hub.client()
    (sent,) = frames(hub.core.client_frame(client, stat("q", version="2.0")), agent)
    assert sent["version"] == "1.1"


def test_an_unanswered_request_times_out_and_frees_its_slot() -> None:
    """Before: no deadline; four silent FILE_STATs (= max_concurrent) kept their
    slots until the agent reconnected, and every later request waited."""
    hub = quiet(max_concurrent=4)
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    for i in range(4):
        hub.core.client_frame(client, stat(f"silent{i}"))
    assert not hub.core.client_frame(client, stat("waiting"))  # no free slot
    hub.clock.advance(59.0)
    assert not frames(hub.core.on_timer(), peer)
    hub.clock.advance(1.0)
    actions = hub.core.on_timer()
    answers = {f["id"]: f["payload"] for f in frames(actions, peer)}
    assert set(answers) == {f"silent{i}" for i in range(4)}
    assert {a["code"] for a in answers.values()} == {"AGENT_TIMEOUT"}
    assert answers["silent0"]["details"]["deadline_seconds"] == 60
    # the slots are free again: the queued request goes out
    assert [f["payload"] for f in frames(actions, agent)] == [{"path": "/w/a"}]
    assert len(link.routes) == 1


def test_a_late_answer_after_the_deadline_is_dropped_and_recorded() -> None:
    hub = quiet()
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    (sent,) = frames(hub.core.client_frame(client, stat("slow")), agent)
    hub.clock.advance(60.0)
    hub.core.on_timer()
    late = enc(type="FILE_STAT_RESPONSE", id=sent["id"], payload={"exists": False})
    actions = hub.core.agent_frame(link, late)
    assert not frames(actions, peer)
    assert ("late_answer", {"conn": link.connection_id, "kind": "FILE_STAT_RESPONSE"}) in [
        (e, {k: f[k] for k in ("conn", "kind")}) for e, f in hub.events if e == "late_answer"
    ]


@pytest.mark.parametrize(
    ("timeout_seconds", "deadline"),
    [(5, 5 + 10), (None, 30 + 10), (300, 30 + 10)],
)
def test_a_command_gets_its_own_timeout_plus_slack(
    timeout_seconds: int | None, deadline: int
) -> None:
    """The agent caps a command at HELLO_ACK's command_timeout_seconds (30)."""
    hub = quiet(command_timeout_seconds=30)
    hub.agent()
    peer, client = hub.client()
    payload: dict[str, object] = {"command": "sleep 999"}
    if timeout_seconds is not None:
        payload["timeout_seconds"] = timeout_seconds
    hub.core.client_frame(client, enc(type="EXECUTE_COMMAND", id="cmd", payload=payload))
    hub.clock.advance(deadline - 0.5)
    assert not frames(hub.core.on_timer(), peer)
    hub.clock.advance(0.5)
    (error,) = frames(hub.core.on_timer(), peer)
    assert error["payload"]["code"] == "AGENT_TIMEOUT"


def test_the_default_deadline_is_configurable() -> None:
    hub = quiet(request_timeout=5.0)
    hub.agent()
    peer, client = hub.client()
    hub.core.client_frame(client, stat("q"))
    hub.clock.advance(5.0)
    assert frames(hub.core.on_timer(), peer)[0]["payload"]["code"] == "AGENT_TIMEOUT"


def test_streamed_chunks_keep_a_request_alive() -> None:
    hub = quiet(request_timeout=10.0)
    agent, link, _ = hub.agent(caps=["files", "local_llm"])
    peer, client = hub.client()
    request = enc(type="LOCAL_LLM_COMPLETION", id="llm", payload={"model": "m", "messages": []})
    (sent,) = frames(hub.core.client_frame(client, request), agent)
    for _ in range(3):
        hub.clock.advance(8.0)
        chunk = enc(type="LOCAL_LLM_COMPLETION_CHUNK", id=sent["id"], payload={"delta": "x"})
        assert frames(hub.core.agent_frame(link, chunk), peer)
        assert not frames(hub.core.on_timer(), peer)
    hub.clock.advance(10.0)
    assert frames(hub.core.on_timer(), peer)[0]["payload"]["code"] == "AGENT_TIMEOUT"


def test_a_request_waiting_for_a_slot_is_answered_within_the_deadline_too() -> None:
    """An agent that reports no free slot and then falls silent must not keep
    queued requests forever: they are answered as never sent."""
    hub = quiet(max_concurrent=1, request_timeout=10.0)
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    (sent,) = frames(hub.core.client_frame(client, stat("a")), agent)
    answer = enc(type="FILE_STAT_RESPONSE", id=sent["id"], pending_capacity=0, payload={})
    hub.core.agent_frame(link, answer)  # says: no slot free, though we hold none
    assert not hub.core.client_frame(client, stat("queued"))
    hub.clock.advance(10.0)
    (error,) = frames(hub.core.on_timer(), peer)
    assert error["id"] == "queued" and error["payload"]["code"] == "SHIM_OVERLOADED"
    assert "not sent" in error["payload"]["message"]


def test_capacity_rises_again_from_pending_capacity() -> None:
    """Before: pending_capacity only ever lowered the hub's estimate, so one
    busy moment throttled the agent for good (until a STATUS)."""
    hub = quiet(max_concurrent=4)
    agent, link, _ = hub.agent()
    _peer, client = hub.client()
    first = frames(hub.core.client_frame(client, stat("a")), agent)[0]
    second = frames(hub.core.client_frame(client, stat("b")), agent)[0]
    busy = enc(type="FILE_STAT_RESPONSE", id=first["id"], pending_capacity=0, payload={})
    hub.core.agent_frame(link, busy)
    assert link.capacity == 1  # 0 free + 1 of ours in flight
    idle = enc(type="FILE_STAT_RESPONSE", id=second["id"], pending_capacity=4, payload={})
    hub.core.agent_frame(link, idle)
    assert link.capacity == 4
    sent = [frames(hub.core.client_frame(client, stat(f"n{i}")), agent) for i in range(4)]
    assert all(len(s) == 1 for s in sent)


def test_capacity_never_exceeds_what_the_hub_granted() -> None:
    hub = quiet(max_concurrent=2)
    agent, link, _ = hub.agent()
    _, client = hub.client()
    (sent,) = frames(hub.core.client_frame(client, stat("a")), agent)
    hub.core.agent_frame(
        link, enc(type="FILE_STAT_RESPONSE", id=sent["id"], pending_capacity=50, payload={})
    )
    assert link.capacity == 2


def test_status_raises_and_lowers_capacity_within_the_grant() -> None:
    hub = quiet(max_concurrent=8)
    _agent, link, _ = hub.agent()
    status = {"in_flight": 0, "queue_depth": 0, "audit_log_bytes": 0, "uptime_seconds": 1.0}
    hub.core.agent_frame(link, enc(type="STATUS", id="s1", payload={**status, "max_concurrent": 2}))
    assert link.capacity == 2
    hub.core.agent_frame(
        link, enc(type="STATUS", id="s2", payload={**status, "max_concurrent": 64})
    )
    assert link.capacity == 8


def test_a_refused_request_is_answered_as_not_sent_when_the_agent_leaves() -> None:
    """Before: SHIM_OVERLOADED bumped the same counter as a re-issue after a
    drop, so the refused command was reported OUTCOME_UNKNOWN ("may or may
    not have run") although the agent said it ran nothing."""
    hub = quiet(max_concurrent=2)
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    frames(hub.core.client_frame(client, stat("read")), agent)
    command = enc(type="EXECUTE_COMMAND", id="cmd", payload={"command": "touch x"})
    (sent,) = frames(hub.core.client_frame(client, command), agent)
    hub.core.agent_frame(link, overloaded(sent["id"], free=0))
    answers = {
        f["id"]: f["payload"]["code"] for f in frames(hub.core.agent_closed(link, 1000), peer)
    }
    assert answers == {"read": "AGENT_DISCONNECTED", "cmd": "AGENT_NOT_CONNECTED"}


def test_a_refused_command_is_sent_again_after_a_drop_since_it_never_ran() -> None:
    hub = quiet(max_concurrent=2)
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    command = enc(type="EXECUTE_COMMAND", id="cmd", payload={"command": "touch x"})
    (sent,) = frames(hub.core.client_frame(client, command), agent)
    hub.core.agent_frame(link, overloaded(sent["id"], free=0))
    assert not frames(hub.core.agent_closed(link, 1006), peer)  # held, not failed
    again, _, actions = hub.agent()
    assert [f["type"] for f in frames(actions, again)] == ["HELLO_ACK", "EXECUTE_COMMAND"]


def test_reissue_after_overload_backs_off_and_gives_up() -> None:
    """Before: re-issued at once, up to eight times in a row, a resend loop
    against a rate-limited agent."""
    hub = quiet()
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    (sent,) = frames(hub.core.client_frame(client, stat("q")), agent)
    delays = []
    refusals = 0
    while True:
        refusals += 1
        actions = hub.core.agent_frame(link, overloaded(sent["id"], free=3))
        if frames(actions, peer):
            (final,) = frames(actions, peer)
            break
        assert not frames(actions, agent)  # not sent again at once
        waited, again = resent(hub, agent)
        delays.append(waited)
        (sent,) = again
    assert final["id"] == "q" and final["payload"]["code"] == "SHIM_OVERLOADED"
    assert refusals == 5
    assert delays == sorted(delays) and delays[0] >= 0.5 and delays[-1] > delays[0]


def test_overload_refusals_do_not_use_up_the_reconnect_retries() -> None:
    """Before: three refusals counted as three re-issues, so the first drop
    afterwards gave the read up (AGENT_DISCONNECTED) instead of retrying it."""
    hub = quiet()
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    (sent,) = frames(hub.core.client_frame(client, stat("q")), agent)
    for _ in range(3):
        hub.core.agent_frame(link, overloaded(sent["id"], free=3))
        _, (sent,) = resent(hub, agent)
    assert not frames(hub.core.agent_closed(link, 1006), peer)
    again, _, actions = hub.agent()
    assert [f["type"] for f in frames(actions, again)] == ["HELLO_ACK", "FILE_STAT"]


def test_hub_frames_never_close_a_healthy_link_on_timeout() -> None:
    """A deadline frees a slot; it never closes the agent's connection."""
    hub = quiet()
    agent, _, _ = hub.agent()
    _, client = hub.client()
    hub.core.client_frame(client, stat("q"))
    hub.clock.advance(60.0)
    assert not closes(hub.core.on_timer(), agent)
