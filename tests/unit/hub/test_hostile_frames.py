"""Hostile or broken input reaching the core: typed answers, nothing crashes."""

from __future__ import annotations

import pytest

from .core_harness import Hub, enc, frames


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_deeply_nested_client_json_is_answered_not_raised() -> None:
    """Before: RecursionError escaped the core and killed the connection's
    handler with no ERROR frame."""
    hub = Hub()
    hub.agent()
    peer, client = hub.client()
    frame = b'{"type":"FILE_STAT","id":"deep","payload":' + nested(1000) + b"}"
    (error,) = frames(hub.core.client_frame(client, frame), peer)
    assert error["payload"]["code"] == "INVALID_MESSAGE"
    assert error["id"] == "deep"
    # the connection goes on working
    ok = hub.core.client_frame(client, enc(type="FILE_STAT", id="next", payload={"path": "a"}))
    assert len(ok) == 1


def test_deeply_nested_agent_json_is_dropped_not_raised() -> None:
    hub = Hub()
    _, link, _ = hub.agent()
    frame = b'{"type":"ACK","id":"x","payload":' + nested(5000) + b"}"
    assert not hub.core.agent_frame(link, frame)


@pytest.mark.parametrize(
    ("request_type", "payload", "answer_type"),
    [
        ("EXECUTE_COMMAND", {"command": "true"}, "FILE_CONTENTS"),
        ("FILE_READ", {"path": "a"}, "ACK"),
        ("FILE_WRITE", {"path": "a", "content": ""}, "COMMAND_RESULT"),
        ("FILE_STAT", {"path": "a"}, "LOCAL_LLM_COMPLETION_CHUNK"),
    ],
)
def test_an_answer_of_the_wrong_type_becomes_a_typed_error(
    request_type: str, payload: dict, answer_type: str
) -> None:
    """Before: the hub relayed e.g. FILE_CONTENTS as the answer to a command."""
    hub = Hub()
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    (sent,) = frames(
        hub.core.client_frame(client, enc(type=request_type, id="q", payload=payload)), agent
    )
    wrong = enc(type=answer_type, id=sent["id"], payload={"content": "x"})
    (error,) = frames(hub.core.agent_frame(link, wrong), peer)
    assert error["type"] == "ERROR" and error["id"] == "q"
    assert error["payload"]["code"] == "UNEXPECTED_ANSWER_TYPE"
    assert error["payload"]["details"] == {"request": request_type, "answer": answer_type}
    assert not link.routes and not client.inflight  # the slot is free again


def test_errors_and_the_right_answers_are_relayed() -> None:
    hub = Hub()
    agent, link, _ = hub.agent()
    peer, client = hub.client()
    for kind, answer in (("FILE_WRITE", "ACK"), ("FILE_DELETE", "ERROR"), ("FILE_MOVE", "ACK")):
        (sent,) = frames(
            hub.core.client_frame(client, enc(type=kind, id=kind, payload={"path": "a"})), agent
        )
        (back,) = frames(
            hub.core.agent_frame(link, enc(type=answer, id=sent["id"], payload={})), peer
        )
        assert back["type"] == answer


def test_empty_answers_are_never_shared_mutable_state() -> None:
    hub = Hub()
    _, link, _ = hub.agent()
    first = hub.core.agent_frame(link, enc(type="PONG", id="nobody", payload={}))
    assert not first
    with pytest.raises((AttributeError, TypeError)):
        first.append("corrupted")  # type: ignore[attr-defined]
