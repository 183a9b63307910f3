"""`tetherbed llm-server` as a real process, driven by the official `ollama` client
unchanged, and an agent serving LOCAL_LLM_COMPLETION from it through the hub."""

from __future__ import annotations

from collections.abc import Iterator

import ollama
import pytest

from tetherbed.launch import LlmServerProcess, start_llm_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def llm_server() -> Iterator[LlmServerProcess]:
    server = start_llm_server(
        [
            "--model",
            "llama3.2:3b",
            "--model",
            "broken:1b",
            "--model",
            "gone:1b",
            "--fail-model",
            "broken:1b",
            "--fail-mode",
            "midstream",
            "--missing-model",
            "gone:1b",
            "--seed",
            "5",
            "--latency-ms",
            "0",
            "--tokens-per-second",
            "2000",
        ]
    )
    try:
        yield server
    finally:
        server.stop()


def test_the_official_client_lists_shows_and_versions(llm_server: LlmServerProcess) -> None:
    client = ollama.Client(host=llm_server.url)
    assert [m.model for m in client.list().models] == ["llama3.2:3b", "broken:1b", "gone:1b"]
    shown = client.show("llama3.2:3b")
    assert shown.details is not None and shown.details.format == "gguf"
    version = client._request_raw("GET", "/api/version").json()["version"]
    assert version.count(".") == 2


def test_the_official_client_chats_streaming_and_not(llm_server: LlmServerProcess) -> None:
    client = ollama.Client(host=llm_server.url)
    messages = [{"role": "user", "content": "echo: the quick brown fox"}]
    whole = client.chat(model="llama3.2:3b", messages=messages)
    assert whole.message.content == "the quick brown fox"
    assert whole.done and whole.done_reason == "stop" and whole.eval_count == 4
    parts = list(client.chat(model="llama3.2:3b", messages=messages, stream=True))
    assert "".join(p.message.content for p in parts) == "the quick brown fox"
    assert [p.done for p in parts] == [False] * 4 + [True]
    assert parts[-1].prompt_eval_count and parts[-1].eval_count == 4
    # Seeded: the same question, the same answer.
    free = [{"role": "user", "content": "say something"}]
    first = client.chat(model="llama3.2:3b", messages=free, options={"num_predict": 6})
    again = client.chat(model="llama3.2:3b", messages=free, options={"num_predict": 6})
    assert first.message.content == again.message.content
    assert first.done_reason == "length" and first.eval_count == 6
    assert client.ps().models[0].model == "llama3.2:3b"


def test_the_official_client_generates(llm_server: LlmServerProcess) -> None:
    client = ollama.Client(host=llm_server.url)
    assert client.generate(model="llama3.2:3b", prompt="echo: a b").response == "a b"
    pieces = [p.response for p in client.generate(model="llama3.2:3b", prompt="hi", stream=True)]
    assert len(pieces) > 2 and pieces[-1] == ""


async def test_the_async_client_streams(llm_server: LlmServerProcess) -> None:
    client = ollama.AsyncClient(host=llm_server.url)
    stream = await client.chat(
        model="llama3.2:3b", messages=[{"role": "user", "content": "echo: x y z"}], stream=True
    )
    assert "".join([part.message.content async for part in stream]) == "x y z"


def test_the_official_client_sees_ollamas_errors(llm_server: LlmServerProcess) -> None:
    client = ollama.Client(host=llm_server.url)
    with pytest.raises(ollama.ResponseError) as missing:
        client.chat(model="nope:1b", messages=[{"role": "user", "content": "x"}])
    assert missing.value.status_code == 404 and "not found" in missing.value.error
    with pytest.raises(ollama.ResponseError) as gone:
        client.chat(model="gone:1b", messages=[{"role": "user", "content": "x"}])
    assert gone.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as crashed:
        list(
            client.chat(model="broken:1b", messages=[{"role": "user", "content": "x"}], stream=True)
        )
    assert "llama runner process has terminated" in crashed.value.error
