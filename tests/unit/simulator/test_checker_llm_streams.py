"""llm_streams: the chunk rules on the client legs, and the relay order from the wire."""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.checkers import llm_streams
from tetherbed.simulator.history import History

REQ = "LOCAL_LLM_COMPLETION"
CHUNK = "LOCAL_LLM_COMPLETION_CHUNK"
RESPONSE = "LOCAL_LLM_COMPLETION_RESPONSE"


def stream(
    h: History,
    deltas: list[tuple[str, str | None]],
    *,
    content: str | None = None,
    finish: str = "stop",
    req: str = "q",
    agent_order: list[int] | None = None,
    payload: dict[str, Any] | None = None,
) -> None:
    """A client request streamed as `deltas`, and the agent's link sending them."""
    client = "client:alice"
    h.append(1, client, "invoke", REQ, {"payload": payload or {"model": "m"}}, req=req)
    digests = [f"d{req}{i}" for i in range(len(deltas))]
    for i in agent_order if agent_order is not None else range(len(deltas)):
        h.append(2, "wire:laptop", "event", "frame", _up(CHUNK, req, digests[i]))
    h.append(3, "wire:laptop", "event", "frame", _up(RESPONSE, req, f"r{req}"))
    for (delta, reason), digest in zip(deltas, digests, strict=True):
        value = {"type": CHUNK, "delta": delta, "finish_reason": reason, "digest": digest}
        h.append(2.5, client, "event", "chunk", value, req=req)
    joined = "".join(d for d, _ in deltas) if content is None else content
    answer = {"type": RESPONSE, "content": joined, "finish_reason": finish, "digest": f"r{req}"}
    h.append(4, client, "ok", REQ, answer, req=req)


def _up(kind: str, req: str, digest: str) -> dict[str, Any]:
    return {"dir": "up", "type": kind, "id": f"hub-{req}", "conn": "laptop#1", "digest": digest}


def test_a_well_formed_stream_passes() -> None:
    h = History()
    stream(h, [("Hel", None), ("lo", None), ("", "stop")])
    verdict = llm_streams.check(h)
    assert verdict.ok and not verdict.unknown, verdict.summary


def test_no_completion_is_unknown() -> None:
    assert llm_streams.check(History()).unknown


def test_an_early_finish_and_a_missing_last_finish_fail() -> None:
    h = History()
    stream(h, [("a", "stop"), ("b", None)])
    verdict = llm_streams.check(h)
    assert not verdict.ok
    assert "claims a finish" in verdict.summary and "'None'" not in verdict.summary


def test_content_that_is_not_the_chunks_joined_fails() -> None:
    h = History()
    stream(h, [("a", None), ("b", "stop")], content="ab!")
    assert "not the chunks joined" in llm_streams.check(h).summary


def test_chunks_relayed_out_of_order_fail_from_the_wire() -> None:
    h = History()
    stream(h, [("a", None), ("b", None), ("", "stop")], agent_order=[1, 0, 2])
    verdict = llm_streams.check(h)
    assert not verdict.ok and "another order" in verdict.summary


def test_stream_false_with_chunks_fails() -> None:
    h = History()
    stream(h, [("a", "stop")], payload={"model": "m", "stream": False})
    assert "stream false" in llm_streams.check(h).summary


def test_an_error_after_chunks_must_not_follow_a_finish() -> None:
    h = History()
    h.append(1, "client:alice", "invoke", REQ, {"payload": {}}, req="q")
    h.append(2, "client:alice", "event", "chunk", {"delta": "a", "finish_reason": None}, req="q")
    h.append(3, "client:alice", "fail", REQ, {"type": "ERROR", "code": "LOCAL_LLM_FAILED"}, req="q")
    assert llm_streams.check(h).ok
    h.append(4, "client:alice", "invoke", REQ, {"payload": {}}, req="w")
    h.append(5, "client:alice", "event", "chunk", {"delta": "", "finish_reason": "stop"}, req="w")
    h.append(6, "client:alice", "fail", REQ, {"type": "ERROR", "code": "LOCAL_LLM_FAILED"}, req="w")
    assert "yet a chunk claimed a finish" in llm_streams.check(h).summary
