"""The Ollama-compatible server's core: answers, plans, determinism, failures."""

from __future__ import annotations

import json

import pytest

from tetherbed.simulator.peripherals.llm_server.config import LlmServerConfig
from tetherbed.simulator.peripherals.llm_server.core import LlmServerCore, Plan, Reply


def chat(core: LlmServerCore, **body: object) -> Reply | Plan:
    body.setdefault("messages", [{"role": "user", "content": "hello"}])
    return core.handle("POST", "/api/chat", json.dumps(body).encode())


def test_tags_version_and_unknown_paths() -> None:
    core = LlmServerCore(LlmServerConfig(models=("a:1b", "b:7b")))
    tags = core.handle("GET", "/api/tags")
    assert isinstance(tags, Reply) and tags.status == 200
    assert [m["name"] for m in tags.body["models"]] == ["a:1b", "b:7b"]  # type: ignore[index]
    assert core.handle("GET", "/api/version").body == {"version": "0.12.3"}  # type: ignore[union-attr]
    assert core.handle("HEAD", "/").status == 200  # type: ignore[union-attr]
    assert core.handle("GET", "/api/nope").status == 404  # type: ignore[union-attr]
    assert core.handle("GET", "/api/chat").status == 405  # type: ignore[union-attr]


def test_the_same_seed_gives_the_same_tokens_and_another_seed_others() -> None:
    first = chat(LlmServerCore(LlmServerConfig(seed=7)), model="llama3.2:3b")
    again = chat(LlmServerCore(LlmServerConfig(seed=7)), model="llama3.2:3b")
    other = chat(LlmServerCore(LlmServerConfig(seed=8)), model="llama3.2:3b")
    assert isinstance(first, Plan) and isinstance(again, Plan) and isinstance(other, Plan)
    assert first.lines == again.lines
    assert first.assembled() != other.assembled()


def test_a_plan_streams_tokens_then_a_final_line_with_counts() -> None:
    config = LlmServerConfig(latency_ms=100, tokens_per_second=10, load_ms=500)
    core = LlmServerCore(config)
    plan = chat(core, model="mistral:7b", messages=[{"role": "user", "content": "echo: a b c"}])
    assert isinstance(plan, Plan)
    pieces = [line.fields["message"]["content"] for line in plan.lines]
    assert pieces == ["a", " b", " c", ""]
    assert [round(line.delay, 3) for line in plan.lines] == [0.6, 0.1, 0.1, 0.0]
    final = plan.lines[-1].fields
    assert final["done"] is True and final["done_reason"] == "stop"
    assert final["eval_count"] == 3 and final["prompt_eval_count"] > 0
    assert final["load_duration"] == 500_000_000
    reply = plan.assembled()
    assert reply is not None and reply.body["message"]["content"] == "a b c"  # type: ignore[index]
    # The model is loaded now: the next generation does not wait for it.
    again = chat(core, model="mistral:7b")
    assert isinstance(again, Plan) and round(again.lines[0].delay, 3) == 0.1


def test_num_predict_cuts_the_answer_with_done_reason_length() -> None:
    plan = chat(LlmServerCore(LlmServerConfig()), model="mistral:7b", options={"num_predict": 2})
    assert isinstance(plan, Plan)
    assert len(plan.lines) == 3 and plan.lines[-1].fields["done_reason"] == "length"


def test_generate_streams_response_pieces_and_a_context() -> None:
    core = LlmServerCore(LlmServerConfig())
    plan = core.handle("POST", "/api/generate", b'{"model": "mistral:7b", "prompt": "echo: x y"}')
    assert isinstance(plan, Plan)
    assert [line.fields["response"] for line in plan.lines] == ["x", " y", ""]
    assert plan.lines[-1].fields["context"]


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{", 400, "invalid request body"),
        (b'{"messages": []}', 400, "model is required"),
        (b'{"model": "ghost", "messages": []}', 404, 'model "ghost" not found'),
        (b'{"model": "mistral:7b", "messages": "hi"}', 400, "invalid request body"),
    ],
)
def test_bad_requests_get_ollamas_errors(body: bytes, status: int, error: str) -> None:
    reply = LlmServerCore(LlmServerConfig()).handle("POST", "/api/chat", body)
    assert isinstance(reply, Reply) and reply.status == status
    assert error in reply.body["error"]  # type: ignore[index]


def test_an_empty_chat_loads_the_model() -> None:
    plan = chat(LlmServerCore(LlmServerConfig()), model="mistral:7b", messages=[])
    assert isinstance(plan, Plan)
    assert plan.lines[-1].fields["done_reason"] == "load"


def test_failure_modes() -> None:
    config = dict(models=("ok:1b", "bad:1b"), fail_models=frozenset({"bad:1b"}))
    error = chat(LlmServerCore(LlmServerConfig(**config)), model="bad:1b")  # type: ignore[arg-type]
    assert isinstance(error, Plan) and error.failure is not None
    assert error.failure.status == 500 and "terminated" in error.failure.body["error"]  # type: ignore[index]
    midstream = chat(
        LlmServerCore(LlmServerConfig(**config, fail_mode="midstream")),  # type: ignore[arg-type]
        model="bad:1b",
    )
    assert isinstance(midstream, Plan) and "error" in midstream.lines[-1].fields
    assert midstream.assembled().status == 500  # type: ignore[union-attr]
    cut = chat(
        LlmServerCore(LlmServerConfig(**config, fail_mode="disconnect")),  # type: ignore[arg-type]
        model="bad:1b",
    )
    assert isinstance(cut, Plan) and cut.cut and cut.assembled() is None
    fine = chat(LlmServerCore(LlmServerConfig(**config)), model="ok:1b")  # type: ignore[arg-type]
    assert isinstance(fine, Plan) and fine.failure is None and not fine.cut


def test_a_missing_model_is_listed_but_answers_404() -> None:
    core = LlmServerCore(LlmServerConfig(missing_models=frozenset({"mistral:7b"})))
    assert "mistral:7b" in [m["name"] for m in core.tags().body["models"]]  # type: ignore[index]
    assert chat(core, model="mistral:7b").status == 404  # type: ignore[union-attr]


def test_fail_rate_is_seeded() -> None:
    def outcomes(seed: int) -> list[bool]:
        core = LlmServerCore(LlmServerConfig(seed=seed, fail_rate=0.5))
        return [chat(core, model="mistral:7b").failure is not None for _ in range(20)]  # type: ignore[union-attr]

    assert outcomes(3) == outcomes(3)
    assert 0 < sum(outcomes(3)) < 20


def test_configuration_is_checked() -> None:
    with pytest.raises(ValueError, match="fail_mode"):
        LlmServerConfig(fail_mode="explode")
    with pytest.raises(ValueError, match="listed models"):
        LlmServerConfig(fail_models=frozenset({"ghost"}))
    with pytest.raises(ValueError, match="unknown llm option"):
        LlmServerConfig.from_mapping({"latency": 3})
    config = LlmServerConfig.from_mapping({"models": ["a:1b"], "latency_ms": 5})
    assert config.to_arguments() == ["--model", "a:1b", "--latency-ms", "5"]
