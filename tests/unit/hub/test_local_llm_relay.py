"""The hub and LOCAL_LLM_COMPLETION: busy refusals are retried, a started stream is not."""

from __future__ import annotations

import json

from .core_harness import Hub, Peer, enc, frames, hello
from .test_core import reconnect

LLM = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_local_llm_busy_is_sent_again_after_a_back_off_like_shim_overloaded() -> None:
    hub = Hub()
    agent, link, _ = hub.agent(caps=["files", "local_llm"])
    peer, client = hub.client()
    request = enc(type="LOCAL_LLM_COMPLETION", id="q", payload=LLM)
    (sent,) = frames(hub.core.client_frame(client, request), agent)
    busy = enc(
        type="ERROR",
        id=sent["id"],
        pending_capacity=4,
        payload={"code": "LOCAL_LLM_BUSY", "message": "busy", "fatal": False},
    )
    actions = hub.core.agent_frame(link, busy)
    assert not frames(actions, peer)
    hub.clock.advance(0.5)
    (again,) = frames(hub.core.on_timer(), agent)
    assert again["type"] == "LOCAL_LLM_COMPLETION" and again["payload"] == LLM


def test_local_llm_busy_reaches_the_client_once_retries_are_spent() -> None:
    hub = Hub(overload_retries=0)
    agent, link, _ = hub.agent(caps=["files", "local_llm"])
    peer, client = hub.client()
    (sent,) = frames(
        hub.core.client_frame(client, enc(type="LOCAL_LLM_COMPLETION", id="q", payload=LLM)), agent
    )
    busy = enc(type="ERROR", id=sent["id"], payload={"code": "LOCAL_LLM_BUSY", "message": "b"})
    (answer,) = frames(hub.core.agent_frame(link, busy), peer)
    assert answer["id"] == "q" and answer["payload"]["code"] == "LOCAL_LLM_BUSY"


def test_a_stream_cut_by_a_drop_is_not_run_again_under_the_same_id() -> None:
    hub = Hub()
    agent, link, _ = hub.agent(caps=["files", "local_llm"])
    peer, client = hub.client()
    (sent,) = frames(
        hub.core.client_frame(client, enc(type="LOCAL_LLM_COMPLETION", id="q", payload=LLM)), agent
    )
    chunk = enc(
        type="LOCAL_LLM_COMPLETION_CHUNK",
        id=sent["id"],
        payload={"delta": "Hi", "finish_reason": None},
    )
    assert frames(hub.core.agent_frame(link, chunk), peer)[0]["id"] == "q"
    (lost,) = frames(hub.core.agent_closed(link, 1006), peer)
    assert lost["id"] == "q" and lost["payload"]["code"] == "AGENT_DISCONNECTED"
    again, _, actions = reconnect(hub)
    assert [f["type"] for f in frames(actions, again)] == ["HELLO_ACK"]


def test_a_completion_that_never_streamed_is_reissued_after_a_drop() -> None:
    hub = Hub()
    _, link, _ = hub.agent(caps=["files", "local_llm"])
    _, client = hub.client()
    hub.core.client_frame(client, enc(type="LOCAL_LLM_COMPLETION", id="q", payload=LLM))
    hub.core.agent_closed(link, 1006)
    peer = type(link.peer)("again")
    relink = hub.core.agent_opened(peer, user="alice", session_id="s1")
    actions = hub.core.agent_frame(relink, hello("m1", caps=["files", "local_llm"]))
    assert [f["type"] for f in frames(actions, peer)] == ["HELLO_ACK", "LOCAL_LLM_COMPLETION"]


def test_a_completion_for_an_agent_without_models_is_answered_and_never_relayed() -> None:
    """LOCAL_LLM routing is unavailable without local_llm or with no models."""
    for caps, models in ((["files"], None), (["files", "local_llm"], [])):
        hub = Hub()
        payload = json.loads(hello("m1", caps=caps))
        if models is not None:
            payload["payload"]["local_llm_models"] = models
        agent = Peer("agent")
        link = hub.core.agent_opened(agent, user="alice", session_id="s1")
        hub.core.agent_frame(link, json.dumps(payload).encode())
        peer, client = hub.client()
        actions = hub.core.client_frame(
            client, enc(type="LOCAL_LLM_COMPLETION", id="q", payload=LLM)
        )
        assert not frames(actions, agent)
        (answer,) = frames(actions, peer)
        assert answer["id"] == "q" and answer["payload"]["code"] == "MODEL_NOT_AVAILABLE"
        assert answer["payload"]["details"] == {"requested_model": "m", "available_models": []}
