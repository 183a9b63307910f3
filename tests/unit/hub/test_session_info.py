"""SESSION_INFO: the hub tells a session's clients the root its agent serves."""

from __future__ import annotations

import msgspec

from .core_harness import Hub, enc, frames, hello


def info_request(request_id: str = "i") -> bytes:
    return enc(type="SESSION_INFO_REQUEST", id=request_id, payload={})


def msgspec_hello(root: str) -> bytes:
    frame = msgspec.json.decode(hello("m1"))
    frame["payload"]["allowed_root"] = root
    return msgspec.json.encode(frame)


def test_the_hub_answers_with_the_agents_allowed_root_and_relays_nothing() -> None:
    hub = Hub()
    agent = object()
    link = hub.core.agent_opened(agent, user="alice", session_id="s1")
    hub.core.agent_frame(link, msgspec_hello("/home/alice/work"))
    peer, client = hub.client()
    actions = hub.core.client_frame(client, info_request())
    (answer,) = frames(actions, peer)
    assert answer["type"] == "SESSION_INFO_RESPONSE" and answer["id"] == "i"
    assert answer["payload"] == {
        "session_id": "s1",
        "allowed_root": "/home/alice/work",
        "machine_id": "m1",
        "connection_id": link.connection_id,
    }
    assert not frames(actions, agent) and not link.routes


def test_without_an_agent_the_root_is_unknown() -> None:
    hub = Hub()
    peer, client = hub.client()
    (answer,) = frames(hub.core.client_frame(client, info_request()), peer)
    assert answer["payload"]["allowed_root"] is None


def test_while_a_dropped_agent_may_return_the_question_waits_for_it() -> None:
    hub = Hub(retry_window=30.0)
    _, link, _ = hub.agent()
    hub.core.agent_closed(link, 1006)
    peer, client = hub.client()
    assert not hub.core.client_frame(client, info_request())  # held
    again = object()
    link2 = hub.core.agent_opened(again, user="alice", session_id="s1")
    actions = hub.core.agent_frame(link2, msgspec_hello("/srv/w"))
    (answer,) = frames(actions, peer)
    assert answer["payload"]["allowed_root"] == "/srv/w"


def test_a_machine_connection_does_not_answer_it() -> None:
    hub = Hub()
    peer = object()
    client = hub.core.machine_client_opened(peer, user="alice", machine_id="m1")
    (error,) = frames(hub.core.client_frame(client, info_request()), peer)
    assert error["payload"]["code"] == "UNKNOWN_MESSAGE_TYPE"
