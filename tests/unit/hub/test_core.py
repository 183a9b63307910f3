"""The hub's sans-I/O core: handshake, ownership, relay, capacity, keepalive."""

from __future__ import annotations

import json

import pytest

from tetherbed.hub.config import OwnershipPolicy
from tetherbed.hub.links import AgentLink

from .core_harness import Hub, Peer, closes, enc, frames, hello


def test_hello_ack_same_id_grants_intersection_and_limits() -> None:
    hub = Hub(max_concurrent=7, max_file_size_bytes=1234, command_timeout_seconds=9)
    peer, link, actions = hub.agent(
        caps=["files", "shell", "computer_use", "recording", "directory_browse"]
    )
    (ack,) = frames(actions, peer)
    assert ack["type"] == "HELLO_ACK" and ack["id"] == "hello-m1"
    payload = ack["payload"]
    assert payload["session_id"] == "s1"
    assert payload["granted_capabilities"] == ["files", "shell", "computer_use"]
    assert (
        payload["max_concurrent"],
        payload["max_file_size_bytes"],
        payload["command_timeout_seconds"],
    ) == (7, 1234, 9)
    assert payload["connection_id"] == link.connection_id


def test_hub_policy_limits_grants() -> None:
    hub = Hub(grants=frozenset({"files"}))
    peer, _, actions = hub.agent()
    assert frames(actions, peer)[0]["payload"]["granted_capabilities"] == ["files"]


def test_major_mismatch_closes_4426_with_json_reason() -> None:
    hub = Hub()
    peer, _, actions = hub.agent(version="2.0")
    (close,) = closes(actions, peer)
    assert close.code == 4426
    reason = json.loads(close.reason)
    assert reason["error"] == "PROTOCOL_VERSION_MISMATCH"
    assert (reason["shim_max"], reason["platform_max"]) == ("2.0", "1.1")
    assert not frames(actions, peer)  # no ACK


def test_unsupported_arch_is_refused_with_the_spec_code() -> None:
    hub = Hub()
    peer, _, actions = hub.agent(arch="mips")
    (error,) = frames(actions, peer)
    assert error["type"] == "ERROR" and error["payload"]["code"] == "UNSUPPORTED_ARCH"
    assert error["id"] == "hello-m1"
    assert closes(actions, peer)


def test_first_frame_must_be_hello() -> None:
    hub = Hub()
    peer = Peer("a")
    link = hub.core.agent_opened(peer, user="alice", session_id="s1")
    actions = hub.core.agent_frame(link, enc(type="PONG", id="x", payload={}))
    assert frames(actions, peer)[0]["payload"]["code"] == "MESSAGE_NOT_ALLOWED"
    assert closes(actions, peer)[0].code == 1002


def test_relay_rewrites_ids_and_returns_answers_under_the_client_id() -> None:
    hub = Hub()
    agent, link, _ = hub.agent()
    c1, l1 = hub.client()
    c2, l2 = hub.client()
    out1 = hub.core.client_frame(l1, enc(type="FILE_READ", id="same", payload={"path": "one"}))
    out2 = hub.core.client_frame(l2, enc(type="FILE_READ", id="same", payload={"path": "two"}))
    (sent1,) = frames(out1, agent)
    (sent2,) = frames(out2, agent)
    assert sent1["id"] != sent2["id"]
    assert sent1["payload"] == {"path": "one"}
    # answer the second first
    back2 = hub.core.agent_frame(
        link,
        enc(type="FILE_CONTENTS", id=sent2["id"], pending_capacity=3, payload={"content": "2"}),
    )
    back1 = hub.core.agent_frame(
        link, enc(type="FILE_CONTENTS", id=sent1["id"], payload={"content": "1"})
    )
    assert frames(back2, c2) == [
        {
            "type": "FILE_CONTENTS",
            "id": "same",
            "ts": 1.0,
            "version": "1.1",
            "payload": {"content": "2"},
        }
    ]
    assert frames(back1, c1)[0]["payload"] == {"content": "1"}
    assert not frames(back2, c1) and not frames(back1, c2)


def test_payload_bytes_relayed_verbatim() -> None:
    hub = Hub()
    agent, _, _ = hub.agent()
    _, client = hub.client()
    payload = b'{"path":"x",  "content":"\\u00e9 caf\\u00e9","zz":[1, 2]}'
    raw = b'{"type":"FILE_WRITE","id":"w","payload":' + payload + b"}"
    (send,) = hub.core.client_frame(client, raw)
    assert send.peer is agent
    assert payload in send.data


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"garbage", "INVALID_MESSAGE"),
        (b'{"type":"HELLO","id":"h","payload":{}}', "MESSAGE_NOT_ALLOWED"),
        (b'{"type":"DIRECTORY_LIST_REQUEST","id":"h","payload":{}}', "MESSAGE_NOT_ALLOWED"),
        (b'{"type":"NOPE","id":"h","payload":{}}', "UNKNOWN_MESSAGE_TYPE"),
        (b'{"type":"FILE_READ","id":"","payload":{}}', "INVALID_MESSAGE"),
    ],
)
def test_client_frames_that_cannot_be_relayed(data: bytes, code: str) -> None:
    hub = Hub()
    agent, _, _ = hub.agent()
    peer, client = hub.client()
    actions = hub.core.client_frame(client, data)
    assert not frames(actions, agent)  # never forwarded
    assert frames(actions, peer)[0]["payload"]["code"] == code


def test_no_agent_means_agent_not_connected() -> None:
    hub = Hub()
    peer, client = hub.client("lonely")
    (error,) = frames(
        hub.core.client_frame(client, enc(type="FILE_STAT", id="q", payload={"path": "a"})), peer
    )
    assert error["id"] == "q" and error["payload"]["code"] == "AGENT_NOT_CONNECTED"


def test_duplicate_id_from_one_client_is_refused() -> None:
    hub = Hub()
    hub.agent()
    peer, client = hub.client()
    hub.core.client_frame(client, enc(type="FILE_STAT", id="dup", payload={"path": "a"}))
    (error,) = frames(
        hub.core.client_frame(client, enc(type="FILE_STAT", id="dup", payload={"path": "b"})), peer
    )
    assert error["payload"]["code"] == "DUPLICATE_REQUEST_ID"


def test_explicit_disconnect_answers_every_in_flight_request_at_once() -> None:
    hub = Hub()
    _, link, _ = hub.agent()
    peer, client = hub.client()
    for i in range(3):
        hub.core.client_frame(client, enc(type="FILE_STAT", id=f"r{i}", payload={"path": "a"}))
    hub.core.client_frame(client, enc(type="EXECUTE_COMMAND", id="cmd", payload={"command": "x"}))
    answers = frames(hub.core.agent_closed(link, 1000), peer)
    by_id = {a["id"]: a["payload"]["code"] for a in answers}
    assert by_id == {
        "cmd": "OUTCOME_UNKNOWN",
        "r0": "AGENT_DISCONNECTED",
        "r1": "AGENT_DISCONNECTED",
        "r2": "AGENT_DISCONNECTED",
    }
    assert not client.inflight


def reconnect(hub: Hub, machine: str = "m1") -> tuple[Peer, AgentLink, list]:
    peer = Peer(f"agent-{machine}-again")
    link = hub.core.agent_opened(peer, user="alice", session_id="s1")
    return peer, link, hub.core.agent_frame(link, hello(machine))


def test_drop_reissues_idempotent_requests_and_reports_the_rest_unknown() -> None:
    hub = Hub()
    _, link, _ = hub.agent()
    peer, client = hub.client()
    hub.core.client_frame(client, enc(type="FILE_READ", id="read", payload={"path": "a"}))
    hub.core.client_frame(client, enc(type="FILE_DELETE", id="del", payload={"path": "b"}))
    hub.core.client_frame(client, enc(type="EXECUTE_COMMAND", id="cmd", payload={"command": "x"}))
    hub.core.client_frame(client, enc(type="FILE_MOVE", id="mv", payload={"src": "a", "dst": "c"}))
    dropped = hub.core.agent_closed(link, 1006)
    assert {a["id"]: a["payload"]["code"] for a in frames(dropped, peer)} == {
        "cmd": "OUTCOME_UNKNOWN",
        "mv": "OUTCOME_UNKNOWN",
    }
    # while the agent is away, new requests are held too
    assert not hub.core.client_frame(
        client, enc(type="FILE_STAT", id="late", payload={"path": "a"})
    )
    hub.clock.advance(5.0)
    again, _, actions = reconnect(hub)
    reissued = frames(actions, again)
    assert [f["type"] for f in reissued] == ["HELLO_ACK", "FILE_READ", "FILE_DELETE", "FILE_STAT"]
    assert reissued[2]["payload"] == {"path": "b", "missing_ok": True}


def test_held_requests_fail_when_the_agent_does_not_return_in_time() -> None:
    hub = Hub(retry_window=30.0)
    _, link, _ = hub.agent()
    peer, client = hub.client()
    hub.core.client_frame(client, enc(type="FILE_READ", id="sent", payload={"path": "a"}))
    hub.core.agent_closed(link, 1006)
    hub.core.client_frame(client, enc(type="FILE_READ", id="never", payload={"path": "a"}))
    assert hub.core.next_deadline() == pytest.approx(30.0)
    hub.clock.advance(30.0)
    answers = {a["id"]: a["payload"]["code"] for a in frames(hub.core.on_timer(), peer)}
    assert answers == {"sent": "AGENT_DISCONNECTED", "never": "AGENT_NOT_CONNECTED"}
    assert not client.inflight


def test_a_dropped_session_stays_reserved_for_its_machine() -> None:
    hub = Hub(retry_window=30.0)
    _, link, _ = hub.agent(machine="laptop-a")
    hub.core.agent_closed(link, 1006)
    intruder, _, actions = reconnect(hub, "laptop-b")
    assert closes(actions, intruder)[0].code == 4427
    hub.clock.advance(30.0)
    hub.core.on_timer()
    latecomer, _, actions = reconnect(hub, "laptop-b")
    assert frames(actions, latecomer)[0]["type"] == "HELLO_ACK"  # reservation lapsed


def test_shim_overloaded_answers_are_requeued_not_returned() -> None:
    hub = Hub(max_concurrent=4)
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    (sent,) = frames(
        hub.core.client_frame(client, enc(type="FILE_STAT", id="q", payload={"path": "a"})), agent
    )
    overloaded = enc(
        type="ERROR",
        id=sent["id"],
        pending_capacity=1,
        payload={"code": "SHIM_OVERLOADED", "message": "busy"},
    )
    actions = hub.core.agent_frame(link, overloaded)
    assert not frames(actions, peer)  # not passed to the client
    assert not frames(actions, agent)  # not at once: after a back-off
    hub.clock.advance(0.5)
    (again,) = frames(hub.core.on_timer(), agent)
    assert again["type"] == "FILE_STAT" and again["id"] != sent["id"]


def test_capacity_from_status_queues_and_releases_in_order() -> None:
    hub = Hub(max_concurrent=8)
    agent, link, _ = hub.agent()
    hub.core.agent_frame(
        link,
        enc(
            type="STATUS",
            id="st",
            pending_capacity=1,
            payload={"in_flight": 0, "max_concurrent": 1},
        ),
    )
    _, client = hub.client()
    first = frames(
        hub.core.client_frame(client, enc(type="FILE_STAT", id="a", payload={"path": "a"})), agent
    )
    second = frames(
        hub.core.client_frame(client, enc(type="FILE_STAT", id="b", payload={"path": "b"})), agent
    )
    assert len(first) == 1 and second == []  # held: no free slot
    released = frames(
        hub.core.agent_frame(
            link,
            enc(
                type="FILE_STAT_RESPONSE",
                id=first[0]["id"],
                pending_capacity=1,
                payload={"exists": False},
            ),
        ),
        agent,
    )
    assert [f["payload"] for f in released] == [{"path": "b"}]


def test_full_queue_answers_shim_overloaded() -> None:
    hub = Hub(max_concurrent=1, queue_limit=1)
    hub.agent()
    peer, client = hub.client()
    hub.core.client_frame(client, enc(type="FILE_STAT", id="a", payload={"path": "a"}))
    assert not hub.core.client_frame(client, enc(type="FILE_STAT", id="b", payload={"path": "a"}))
    (error,) = frames(
        hub.core.client_frame(client, enc(type="FILE_STAT", id="c", payload={"path": "a"})), peer
    )
    assert error["id"] == "c" and error["payload"]["code"] == "SHIM_OVERLOADED"


def test_streaming_chunks_keep_the_route_open() -> None:
    hub = Hub()
    agent, link, _ = hub.agent(caps=["files", "local_llm"])
    peer, client = hub.client()
    (sent,) = frames(
        hub.core.client_frame(
            client,
            enc(type="LOCAL_LLM_COMPLETION", id="llm", payload={"model": "m", "messages": []}),
        ),
        agent,
    )
    for delta in ("a", "b"):
        chunk = frames(
            hub.core.agent_frame(
                link,
                enc(type="LOCAL_LLM_COMPLETION_CHUNK", id=sent["id"], payload={"delta": delta}),
            ),
            peer,
        )
        assert chunk[0]["id"] == "llm"
    final = frames(
        hub.core.agent_frame(
            link,
            enc(type="LOCAL_LLM_COMPLETION_RESPONSE", id=sent["id"], payload={"content": "ab"}),
        ),
        peer,
    )
    assert final[0]["type"] == "LOCAL_LLM_COMPLETION_RESPONSE"
    assert not link.routes and not client.inflight


def test_same_machine_takes_over_old_gets_revoked_then_4427() -> None:
    hub = Hub()
    old, _, _ = hub.agent(machine="laptop")
    _, client = hub.client()
    hub.core.client_frame(client, enc(type="FILE_STAT", id="held", payload={"path": "a"}))
    new = Peer("new")
    new_link = hub.core.agent_opened(new, user="alice", session_id="s1")
    actions = hub.core.agent_frame(new_link, hello("laptop"))
    (revoked,) = frames(actions, old)
    assert revoked["type"] == "SESSION_REVOKED"
    assert revoked["payload"] == {
        "reason": "another_shim_connected",
        "new_shim_machine_id": "laptop",
    }
    assert closes(actions, old)[0].code == 4427
    assert frames(actions, new)[0]["type"] == "HELLO_ACK"
    assert hub.core.sessions["alice", "s1"].owner is new_link
    # the idempotent request the old connection held is re-issued, not orphaned
    assert [f["type"] for f in frames(actions, new)] == ["HELLO_ACK", "FILE_STAT"]
    assert not frames(actions, client.peer)


def test_different_machine_is_refused_and_owner_untouched() -> None:
    hub = Hub()
    owner, owner_link, _ = hub.agent(machine="laptop-a")
    intruder = Peer("intruder")
    link = hub.core.agent_opened(intruder, user="alice", session_id="s1")
    actions = hub.core.agent_frame(link, hello("laptop-b"))
    (close,) = closes(actions, intruder)
    assert close.code == 4427
    assert json.loads(close.reason)["error"] == "SESSION_TAKEN_OVER"
    assert not frames(actions, intruder)  # no ACK
    assert not frames(actions, owner) and not closes(actions, owner)
    assert hub.core.sessions["alice", "s1"].owner is owner_link


def test_evict_old_reading_always_evicts_the_owner() -> None:
    hub = Hub(ownership=OwnershipPolicy.EVICT_OLD)
    owner, _, _ = hub.agent(machine="a")
    newcomer = Peer("b")
    link = hub.core.agent_opened(newcomer, user="alice", session_id="s1")
    actions = hub.core.agent_frame(link, hello("b"))
    assert closes(actions, owner)[0].code == 4427
    assert not frames(actions, owner)  # different machine: no SESSION_REVOKED
    assert frames(actions, newcomer)[0]["type"] == "HELLO_ACK"


def test_last_write_wins_is_silent() -> None:
    hub = Hub(ownership=OwnershipPolicy.LAST_WRITE_WINS)
    owner, _, _ = hub.agent(machine="a")
    newcomer = Peer("b")
    link = hub.core.agent_opened(newcomer, user="alice", session_id="s1")
    actions = hub.core.agent_frame(link, hello("b"))
    assert not frames(actions, owner) and not closes(actions, owner)
    assert hub.core.sessions["alice", "s1"].owner is link


def test_keepalive_ping_pong_and_timeout() -> None:
    hub = Hub(ping_interval=30.0, pong_timeout=10.0)
    agent, link, _ = hub.agent()
    assert hub.core.next_deadline() == pytest.approx(30.0)
    hub.clock.advance(30.0)
    (ping,) = frames(hub.core.on_timer(), agent)
    assert ping["type"] == "PING"
    hub.core.agent_frame(link, enc(type="PONG", id=ping["id"], payload={}))
    hub.clock.advance(10.0)
    assert hub.core.on_timer() == []  # answered: no drop
    hub.clock.advance(20.0)
    (ping2,) = frames(hub.core.on_timer(), agent)
    hub.clock.advance(10.0)
    (close,) = closes(hub.core.on_timer(), agent)
    assert ping2["id"] != ping["id"]
    assert close.code == 1001 and "PONG" in close.reason


def test_hello_timeout() -> None:
    hub = Hub(hello_timeout=5.0)
    peer = Peer("silent")
    hub.core.agent_opened(peer, user="alice", session_id="s1")
    hub.clock.advance(5.0)
    (close,) = closes(hub.core.on_timer(), peer)
    assert close.code == 1008


def test_revoke_and_shutdown() -> None:
    hub = Hub()
    agent, _, _ = hub.agent()
    actions = hub.core.revoke("alice", "s1")
    assert frames(actions, agent)[0]["payload"]["reason"] == "user_revoked"
    assert closes(actions, agent)[0].code == 4428
    hub2 = Hub()
    agent2, _, _ = hub2.agent()
    assert closes(hub2.core.shutdown(), agent2)[0].code == 4429


def test_events_are_observed() -> None:
    hub = Hub()
    hub.agent()
    names = [e for e, _ in hub.events]
    assert names[:3] == ["connect", "hello", "ack"]


def control(hub: Hub, machine: str = "m1") -> tuple[Peer, AgentLink, list]:
    peer = Peer(f"control-{machine}")
    link = hub.core.agent_opened(peer, user="alice", session_id=None)
    return (
        peer,
        link,
        hub.core.agent_frame(link, hello(machine, caps=["directory_browse", "files"])),
    )


def test_control_connection_registers_presence_and_grants_only_browse() -> None:
    hub = Hub()
    peer, link, actions = control(hub)
    (ack,) = frames(actions, peer)
    assert ack["payload"]["session_id"] is None
    assert ack["payload"]["connection_id"] == link.connection_id
    assert ack["payload"]["granted_capabilities"] == ["directory_browse"]
    assert hub.core.machines["alice", "m1"].owner is link
    # a newer control connection of the same machine replaces the old one
    _, link2, actions2 = control(hub)
    assert closes(actions2, peer)[0].code == 4427
    assert hub.core.machines["alice", "m1"].owner is link2
    assert link2.connection_id != link.connection_id


def test_control_connection_without_directory_browse_is_refused() -> None:
    hub = Hub()
    peer = Peer("c")
    link = hub.core.agent_opened(peer, user="alice", session_id=None)
    actions = hub.core.agent_frame(link, hello("m1", caps=["files"]))
    assert frames(actions, peer)[0]["payload"]["code"] == "CAPABILITY_NOT_GRANTED"
    assert closes(actions, peer)


def test_machine_clients_send_only_control_requests_for_live_sessions() -> None:
    hub = Hub()
    hub.authority = lambda user, session: not session.startswith("revoked")
    agent, _, _ = control(hub)
    peer = Peer("mc")
    client = hub.core.machine_client_opened(peer, user="alice", machine_id="m1")
    browse = enc(type="DIRECTORY_LIST_REQUEST", id="b", payload={})
    assert (
        frames(hub.core.client_frame(client, browse), agent)[0]["type"] == "DIRECTORY_LIST_REQUEST"
    )
    data = enc(type="FILE_READ", id="f", payload={"path": "x"})
    assert (
        frames(hub.core.client_frame(client, data), peer)[0]["payload"]["code"]
        == "MESSAGE_NOT_ALLOWED"
    )
    mine = enc(type="ACTIVATE_SESSION", id="a", payload={"session_id": "mine", "revision": 1})
    assert frames(hub.core.client_frame(client, mine), agent)[0]["type"] == "ACTIVATE_SESSION"
    revoked = enc(
        type="ACTIVATE_SESSION", id="r", payload={"session_id": "revoked-1", "revision": 1}
    )
    actions = hub.core.client_frame(client, revoked)
    assert not frames(actions, agent)
    assert frames(actions, peer)[0]["payload"]["code"] == "SESSION_REVOKED"


def test_idle_stopped_session_is_restored_transparently() -> None:
    hub = Hub()
    agent, link, _ = control(hub)
    peer = Peer("mc")
    machine_client = hub.core.machine_client_opened(peer, user="alice", machine_id="m1")
    attach = enc(
        type="ATTACH_SESSION",
        id="att",
        payload={"session_id": "s1", "browse_id": "b", "directory_ref": "r"},
    )
    (sent,) = frames(hub.core.client_frame(machine_client, attach), agent)
    attached = {
        "session_id": "s1",
        "allowed_root": "/w",
        "fingerprint": "f" * 64,
        "revision": 1,
        "root_grant": "v1.abc.def",
    }
    hub.core.agent_frame(link, enc(type="SESSION_ATTACHED", id=sent["id"], payload=attached))
    assert hub.core.sessions["alice", "s1"].root_grant == "v1.abc.def"
    # no data connection for s1: a request triggers RESTORE_SESSION on the control link
    data_peer, data_client = hub.client("s1")
    actions = hub.core.client_frame(
        data_client, enc(type="FILE_STAT", id="q", payload={"path": "a"})
    )
    (restore,) = frames(actions, agent)
    assert restore["type"] == "RESTORE_SESSION"
    assert restore["payload"] == {"session_id": "s1", "root_grant": "v1.abc.def"}
    assert not frames(actions, data_peer)  # held, not refused
    restored = {**attached, "root_grant": "v1.abc.def"}
    hub.core.agent_frame(link, enc(type="SESSION_RESTORED", id=restore["id"], payload=restored))
    child, _, child_actions = hub.agent(session="s1", machine="m1")
    assert [f["type"] for f in frames(child_actions, child)] == ["HELLO_ACK", "FILE_STAT"]
