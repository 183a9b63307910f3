"""LOCAL_LLM_COMPLETION on the agent, against the bed's server in process."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tetherbed.agent.config import Limits
from tetherbed.agent.local_llm import LocalLlm
from tetherbed.agent.local_llm.ollama import chat_body
from tetherbed.runtime.clock import SystemClock
from tetherbed.simulator.peripherals.llm_server.config import LlmServerConfig
from tetherbed.simulator.peripherals.llm_server.core import LlmServerCore
from tetherbed.simulator.peripherals.llm_server.in_process import InProcessOllama
from tetherbed.simulator.peripherals.llm_server.runner import GenerationRunner
from tetherbed.wire import strict
from tetherbed.wire.envelope import encode_message
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.messages import ChatMessage, LocalLlmCompletion, MessageType

FAST = {"latency_ms": 0.0, "tokens_per_second": 100_000.0}


def server(**options: Any) -> GenerationRunner:
    config = LlmServerConfig(**{**FAST, **options})
    return GenerationRunner(LlmServerCore(config), SystemClock())


async def llm(runner: GenerationRunner, **kwargs: Any) -> LocalLlm:
    local = LocalLlm(InProcessOllama(runner), clock=SystemClock(), **kwargs)
    await local.probe()
    return local


def request(text: str = "echo: one two three", **fields: Any) -> LocalLlmCompletion:
    fields.setdefault("model", "mistral:7b")
    return LocalLlmCompletion(messages=[ChatMessage(role="user", content=text)], **fields)


class Frames:
    def __init__(self) -> None:
        self.sent: list[tuple[MessageType, Any]] = []

    async def __call__(self, kind: MessageType, payload: Any) -> None:
        self.sent.append((kind, payload))


async def test_probe_advertises_the_backends_models_or_nothing() -> None:
    assert (await llm(server())).models == ["llama3.2:3b", "mistral:7b"]
    assert (await llm(server(), allowed_models=["mistral:7b"])).models == ["mistral:7b"]
    down = LocalLlm(InProcessOllama(server(), reachable=False), clock=SystemClock())
    assert await down.probe() == []


async def test_a_stream_follows_the_chunk_rules_and_assembles_the_content() -> None:
    local, frames = await llm(server()), Frames()
    response = await local.complete(request(), limits=Limits(), emit=frames)
    chunks = [payload for kind, payload in frames.sent]
    assert all(kind is MessageType.LOCAL_LLM_COMPLETION_CHUNK for kind, _ in frames.sent)
    assert [c.finish_reason for c in chunks] == [None, None, None, "stop"]
    assert "".join(c.delta for c in chunks) == response.content == "one two three"
    assert response.finish_reason == "stop"
    assert response.tokens is not None and response.tokens.completion == 3
    assert response.tokens.total == response.tokens.prompt + 3  # type: ignore[operator]
    # Exactly the spec's fields, as a strict platform checks them.
    for kind, payload in [*frames.sent, (MessageType.LOCAL_LLM_COMPLETION_RESPONSE, response)]:
        frame = encode_message(kind, "r1", payload, ts=1.0, version="1.1")
        strict.check_frame(frame, from_shim=True)


async def test_stream_false_sends_no_chunk_and_max_tokens_gives_length() -> None:
    local, frames = await llm(server()), Frames()
    response = await local.complete(
        request("tell me", stream=False, max_tokens=2), limits=Limits(), emit=frames
    )
    assert frames.sent == []
    assert response.finish_reason == "length" and response.tokens.completion == 2  # type: ignore[union-attr]


async def test_a_second_request_while_one_runs_is_local_llm_busy() -> None:
    local = await llm(server(latency_ms=200.0))
    first = asyncio.ensure_future(local.complete(request(), limits=Limits(), emit=Frames()))
    await asyncio.sleep(0.05)
    with pytest.raises(ProtocolError) as caught:
        await local.complete(request(), limits=Limits(), emit=Frames())
    assert caught.value.code == "LOCAL_LLM_BUSY"
    assert (await first).content == "one two three"
    assert not local.busy


async def test_the_backends_own_503_is_local_llm_busy() -> None:
    runner = server(latency_ms=200.0, max_queue=0)
    one, two = await llm(runner), await llm(runner)
    first = asyncio.ensure_future(one.complete(request(), limits=Limits(), emit=Frames()))
    await asyncio.sleep(0.05)
    with pytest.raises(ProtocolError) as caught:
        await two.complete(request(), limits=Limits(), emit=Frames())
    assert caught.value.code == "LOCAL_LLM_BUSY"
    assert "server busy" in caught.value.details["backend_error"]  # type: ignore[index]
    await first


async def test_unknown_and_vanished_models_are_model_not_available() -> None:
    local = await llm(server(missing_models=frozenset({"mistral:7b"})))
    with pytest.raises(ProtocolError) as caught:
        await local.complete(request(model="gpt-9"), limits=Limits(), emit=Frames())
    assert caught.value.code == "MODEL_NOT_AVAILABLE"
    assert caught.value.details == {
        "requested_model": "gpt-9",
        "available_models": ["llama3.2:3b", "mistral:7b"],
    }
    with pytest.raises(ProtocolError) as caught:
        await local.complete(request(), limits=Limits(), emit=Frames())
    assert caught.value.code == "MODEL_NOT_AVAILABLE"
    assert caught.value.details["available_models"] == ["llama3.2:3b"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("error", "llama runner process has terminated"),
        ("midstream", "llama runner process has terminated"),
        ("disconnect", "connection cut"),
    ],
)
async def test_a_failing_backend_is_local_llm_failed_with_its_words(mode: str, said: str) -> None:
    local = await llm(server(fail_models=frozenset({"mistral:7b"}), fail_mode=mode))
    frames = Frames()
    with pytest.raises(ProtocolError) as caught:
        await local.complete(request("say something long"), limits=Limits(), emit=frames)
    assert caught.value.code == "LOCAL_LLM_FAILED"
    assert said in caught.value.details["backend_error"]  # type: ignore[index]
    # Chunks that went out before the failure never claim a finish.
    assert all(payload.finish_reason is None for _, payload in frames.sent)
    assert not local.busy


async def test_an_unreachable_backend_is_local_llm_failed() -> None:
    runner = server()
    transport = InProcessOllama(runner)
    local = LocalLlm(transport, clock=SystemClock())
    await local.probe()
    transport.reachable = False
    with pytest.raises(ProtocolError) as caught:
        await local.complete(request(), limits=Limits(), emit=Frames())
    assert caught.value.code == "LOCAL_LLM_FAILED"
    assert "Cannot connect" in caught.value.details["backend_error"]  # type: ignore[index]


async def test_a_stalled_backend_is_local_llm_failed_at_the_idle_timeout() -> None:
    local = await llm(server(latency_ms=2000.0), idle_timeout=0.1)
    with pytest.raises(ProtocolError) as caught:
        await local.complete(request(), limits=Limits(), emit=Frames())
    assert caught.value.code == "LOCAL_LLM_FAILED"
    assert "no data" in caught.value.details["backend_error"]  # type: ignore[index]


async def test_content_past_the_size_limit_ends_with_length() -> None:
    local, frames = await llm(server()), Frames()
    response = await local.complete(
        request("echo: " + "word " * 50), limits=Limits(max_file_size_bytes=20), emit=frames
    )
    assert response.finish_reason == "length"
    assert len(response.content.encode()) <= 20
    assert frames.sent[-1][1].finish_reason == "length"


def test_the_backend_request_drops_unknown_roles_and_maps_the_knobs() -> None:
    body = chat_body(
        LocalLlmCompletion(
            model="m",
            messages=[
                ChatMessage(role="system", content="s"),
                ChatMessage(role="tool", content="t"),
                ChatMessage(role="user", content="u"),
            ],
            max_tokens=10,
            temperature=0.0,
            top_p=1.0,
        )
    )
    assert body == (
        b'{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],'
        b'"stream":true,"options":{"num_predict":10,"temperature":0.0,"top_p":1.0}}'
    )
