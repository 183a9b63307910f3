"""Local LLM: LOCAL_LLM_COMPLETION, its chunks, its response and its error codes.

Section: Local LLM (LOCAL_LLM_COMPLETION, LOCAL_LLM_COMPLETION_CHUNK,
LOCAL_LLM_COMPLETION_RESPONSE) and the error codes MODEL_NOT_AVAILABLE,
LOCAL_LLM_BUSY, LOCAL_LLM_FAILED. Each case gives the agent its own
Ollama-compatible backend (`tetherbed llm-server`'s application, through
`{ollama_url}`), shaped for the case: slow, failing, a model gone, or down.
An agent that does not advertise `local_llm` with it is not judged here
(`LE-hello-empty-llm-models` judges its HELLO).
"""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.conformance.agent.answers import quote, require_error, require_type
from tetherbed.simulator.conformance.agent.environment import AgentContext
from tetherbed.simulator.conformance.agent.peripherals import LlmBackend, llm_backend
from tetherbed.simulator.conformance.agent.platform import AgentConnection
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.recorded_socket import Frame, of_type
from tetherbed.simulator.conformance.registry import case
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.messages import MessageType

COMPLETION = "Local LLM › LOCAL_LLM_COMPLETION"
CHUNK = "Local LLM › LOCAL_LLM_COMPLETION_CHUNK"
RESPONSE = "Local LLM › LOCAL_LLM_COMPLETION_RESPONSE"
ERRORS = "Error codes"
REQUEST = str(MessageType.LOCAL_LLM_COMPLETION)
CHUNK_TYPE = str(MessageType.LOCAL_LLM_COMPLETION_CHUNK)
RESPONSE_TYPE = str(MessageType.LOCAL_LLM_COMPLETION_RESPONSE)
FINISH_REASONS = ("stop", "length", "content_filter")
#: Seconds a completion may take on the case's backend (tokens arrive in well under one).
ANSWER_WAIT = 30.0
#: Seconds to watch for frames of a request after its terminal answer.
AFTERMATH = 0.5


async def llm_agent(
    ctx: AgentContext, **backend: Any
) -> tuple[AgentConnection, LlmBackend, list[str]]:
    """An agent connected with its own backend; skips unless it advertises local_llm."""
    server = await llm_backend(ctx, **backend)
    conn = await ctx.connect(ollama_url=server.url)
    if "local_llm" not in conn.advertised:
        ctx.not_applicable(
            "the agent does not advertise local_llm when given an Ollama-compatible "
            "backend ({ollama_url} in its command)"
        )
    raw = conn.hello_payload.get("local_llm_models")
    models = [m for m in raw if isinstance(m, str)] if isinstance(raw, list) else []
    if not models:
        ctx.not_applicable("local_llm is advertised with no models (LE-hello-empty-llm-models)")
    return conn, server, models


def completion(model: str, *, stream: bool | None = True, **fields: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Summarize the conformance suite in 3 bullets."},
        ],
        "max_tokens": 256,
        "temperature": 0.0,
        "top_p": 1.0,
    }
    if stream is not None:
        payload["stream"] = stream
    payload.update(fields)
    return payload


async def complete(
    conn: AgentConnection, payload: dict[str, Any]
) -> tuple[Frame, list[Frame], list[Frame]]:
    """The terminal answer, the chunks before it, and any frame of the id after it."""
    answer = await conn.request(REQUEST, payload, timeout=ANSWER_WAIT)
    await conn.socket.wait_for(lambda f: f.id == answer.id, AFTERMATH, after=answer.t)
    mine = conn.socket.frames(lambda f: f.id == answer.id)
    chunks = [f for f in mine if f.type == CHUNK_TYPE and f.t < answer.t]
    return answer, chunks, [f for f in mine if f.t > answer.t]


@case(
    "LE-llm-unknown-model",
    level=Level.MUST,
    section=COMPLETION,
    rule="A model not advertised in HELLO.local_llm_models is answered MODEL_NOT_AVAILABLE.",
)
async def unknown_model(ctx: AgentContext) -> None:
    conn, _, _ = await llm_agent(ctx)
    name = "no-such-model:1b"
    answer, chunks, _ = await complete(conn, completion(name))
    require_error(answer, str(ErrorCode.MODEL_NOT_AVAILABLE), f"a completion with model {name}")
    ctx.require(not chunks, f"{len(chunks)} chunk(s) came before the ERROR")


@case(
    "LE-llm-unknown-model-details",
    level=Level.MUST,
    section=f"{ERRORS} › MODEL_NOT_AVAILABLE",
    rule="MODEL_NOT_AVAILABLE carries details.requested_model (the model asked for) and "
    "details.available_models (a list of model names, without the one refused).",
)
async def unknown_model_details(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    name = "no-such-model:1b"
    answer, _, _ = await complete(conn, completion(name))
    require_error(answer, str(ErrorCode.MODEL_NOT_AVAILABLE), f"a completion with model {name}")
    details = answer.payload.get("details")
    ctx.require(isinstance(details, dict), f"the ERROR has no details object ({details!r})")
    ctx.require(
        details.get("requested_model") == name,
        f"details.requested_model is {details.get('requested_model')!r}, not {name!r}",
    )
    available = details.get("available_models")
    ctx.require(
        isinstance(available, list) and all(isinstance(m, str) for m in available),
        f"details.available_models is {available!r}, not a list of names",
    )
    ctx.require(name not in available, f"details.available_models lists {name!r}")
    ctx.observe(f"available_models {available} (HELLO advertised {models})")


@case(
    "LE-llm-model-gone",
    level=Level.MUST,
    section=f"{ERRORS} › MODEL_NOT_AVAILABLE",
    rule="An advertised model the backend no longer has (Ollama's 404 on /api/chat) is "
    "MODEL_NOT_AVAILABLE.",
)
async def model_gone(ctx: AgentContext) -> None:
    gone = "mistral:7b"
    conn, _, models = await llm_agent(ctx, missing_models=[gone])
    if gone not in models:
        ctx.not_applicable(f"the agent did not advertise {gone}, which /api/tags lists")
    answer, _, _ = await complete(conn, completion(gone))
    require_error(answer, str(ErrorCode.MODEL_NOT_AVAILABLE), f"a completion with {gone} (404)")


@case(
    "LE-llm-stream-chunks",
    level=Level.MUST,
    section=f"{COMPLETION} (stream); {CHUNK}",
    rule="With stream true the shim sends one or more LOCAL_LLM_COMPLETION_CHUNK frames under "
    "the request's id, then a single LOCAL_LLM_COMPLETION_RESPONSE, and nothing after it.",
)
async def stream_chunks(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    answer, chunks, after = await complete(conn, completion(models[0], stream=True))
    require_type(answer, RESPONSE_TYPE, "a streamed completion")
    ctx.require(chunks, "no LOCAL_LLM_COMPLETION_CHUNK came before the response")
    if after:
        ctx.depart(f"after the response came {quote(after[0])}")
    ctx.observe(f"{len(chunks)} chunk(s)")


@case(
    "LE-llm-stream-default",
    level=Level.MUST,
    section=f"{COMPLETION} (stream default true)",
    rule="A completion without `stream` is streamed: chunks, then the response.",
)
async def stream_default(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    answer, chunks, _ = await complete(conn, completion(models[0], stream=None))
    require_type(answer, RESPONSE_TYPE, "a completion without stream")
    ctx.require(chunks, "no chunk came: stream defaults to true")


@case(
    "LE-llm-chunk-finish-reason",
    level=Level.MUST,
    section=CHUNK,
    rule="Every chunk but the last has finish_reason null; the last has stop, length or "
    "content_filter and is immediately followed by the response.",
)
async def chunk_finish_reason(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    answer, chunks, _ = await complete(conn, completion(models[0]))
    require_type(answer, RESPONSE_TYPE, "a streamed completion")
    ctx.require(chunks, "no LOCAL_LLM_COMPLETION_CHUNK came before the response")
    early = [n for n, c in enumerate(chunks[:-1]) if c.payload.get("finish_reason") is not None]
    if early:
        reason = chunks[early[0]].payload.get("finish_reason")
        ctx.depart(
            f"chunk {early[0] + 1} of {len(chunks)} has finish_reason {reason!r} "
            "(only the final chunk may)"
        )
    last = chunks[-1].payload.get("finish_reason")
    ctx.require(last in FINISH_REASONS, f"the final chunk's finish_reason is {last!r}")
    between = conn.socket.frames(
        lambda f: f.envelope is not None and chunks[-1].t < f.t < answer.t and f.id == answer.id
    )
    if between:
        ctx.depart(f"{quote(between[0])} came between the final chunk and the response")


@case(
    "LE-llm-response-assembled",
    level=Level.MUST,
    section=RESPONSE,
    rule="The response's content is the chunks' deltas concatenated, and its finish_reason "
    "is one of stop, length, content_filter.",
)
async def response_assembled(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    answer, chunks, _ = await complete(conn, completion(models[0]))
    payload = require_type(answer, RESPONSE_TYPE, "a streamed completion")
    deltas = [c.payload.get("delta") for c in chunks]
    ctx.require(all(isinstance(d, str) for d in deltas), "a chunk's delta is not text")
    joined = "".join(deltas)  # type: ignore[arg-type]
    content = payload.get("content")
    ctx.require(
        content == joined,
        f"content is {str(content)[:60]!r}…, the deltas make {joined[:60]!r}…",
    )
    reason = payload.get("finish_reason")
    ctx.require(reason in FINISH_REASONS, f"the response's finish_reason is {reason!r}")


@case(
    "LE-llm-response-fields",
    level=Level.MUST,
    section=RESPONSE,
    rule="The response carries tokens {prompt, completion, total} (each a count or null) and "
    "duration_seconds, a number of seconds.",
)
async def response_fields(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    answer, _, _ = await complete(conn, completion(models[0], stream=False))
    payload = require_type(answer, RESPONSE_TYPE, "a completion")
    tokens = payload.get("tokens")
    ctx.require(isinstance(tokens, dict), f"tokens is {tokens!r}, not an object")
    for name in ("prompt", "completion", "total"):
        value = tokens.get(name, "absent")
        counted = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        ctx.require(value is None or counted, f"tokens.{name} is {value!r}")
    duration = payload.get("duration_seconds")
    ctx.require(
        isinstance(duration, int | float) and not isinstance(duration, bool) and duration >= 0,
        f"duration_seconds is {duration!r}",
    )
    ctx.observe(f"tokens {tokens}, duration_seconds {duration}")


@case(
    "LE-llm-no-stream",
    level=Level.MUST,
    section=f"{COMPLETION} (stream false)",
    rule="With stream false only the LOCAL_LLM_COMPLETION_RESPONSE is sent (no chunks), with "
    "the whole output.",
)
async def no_stream(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    answer, chunks, after = await complete(conn, completion(models[0], stream=False))
    payload = require_type(answer, RESPONSE_TYPE, "a completion with stream false")
    ctx.require(not chunks and not after, f"{len(chunks) + len(after)} chunk(s) came")
    content = payload.get("content")
    ctx.require(isinstance(content, str) and content, f"content is {content!r}")


@case(
    "LE-llm-unknown-role",
    level=Level.MUST,
    section=f"{COMPLETION} (messages)",
    rule="A message with a role the receiver does not know (a future `tool`) is ignored: "
    "the completion is served.",
)
async def unknown_role(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx)
    payload = completion(models[0], stream=False)
    payload["messages"] = [
        {"role": "user", "content": "What is the weather?"},
        {"role": "tool", "content": '{"temperature": 21}'},
        {"role": "user", "content": "Summarize it."},
    ]
    answer, _, _ = await complete(conn, payload)
    require_type(answer, RESPONSE_TYPE, "a completion with a `tool` message")


@case(
    "LE-llm-busy",
    level=Level.MUST,
    section=f"{ERRORS} › LOCAL_LLM_BUSY",
    rule="While the backend serves one completion (Ollama serialises), another is answered "
    "LOCAL_LLM_BUSY at once, and the first completes.",
    timeout=90.0,
)
async def busy(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(
        ctx, latency_ms=100, tokens_per_second=3, max_output_tokens=16
    )
    first = conn.envelope(REQUEST, completion(models[0]))
    sent = ctx.evidence.now()
    await conn.send(first)
    chunk = await conn.socket.wait_for(of_type(CHUNK_TYPE, first["id"]), ANSWER_WAIT, after=sent)
    if chunk is None:
        ctx.no_evidence("the first completion sent no chunk to show it was being served")
    second_sent = ctx.evidence.now()
    second = await conn.request(REQUEST, completion(models[-1]), timeout=ANSWER_WAIT)
    done = await conn.answer_to(first["id"], timeout=ANSWER_WAIT, after=sent)
    if done is not None and done.t < second_sent:
        ctx.no_evidence("the first completion was over before the second was sent")
    if second.type == RESPONSE_TYPE and done is not None and done.t < second.t:
        ctx.depart("the second completion waited for the first and was served after it")
    require_error(second, str(ErrorCode.LOCAL_LLM_BUSY), "a completion while another streams")
    ctx.require(done is not None, "the first completion never got its answer")
    require_type(done, RESPONSE_TYPE, "the first completion")


@case(
    "LE-llm-failed",
    level=Level.MUST,
    section=f"{ERRORS} › LOCAL_LLM_FAILED",
    rule="A backend that fails the request (HTTP error) is LOCAL_LLM_FAILED with "
    "details.backend_error, the backend's error text.",
)
async def failed(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx, fail_models=["llama3.2:3b"], fail_mode="error")
    if "llama3.2:3b" not in models:
        ctx.not_applicable("the agent did not advertise llama3.2:3b, which /api/tags lists")
    answer, _, _ = await complete(conn, completion("llama3.2:3b"))
    require_error(answer, str(ErrorCode.LOCAL_LLM_FAILED), "a completion the backend fails")
    details = answer.payload.get("details")
    error = details.get("backend_error") if isinstance(details, dict) else None
    ctx.require(isinstance(error, str) and error, f"details.backend_error is {error!r}")
    ctx.observe(f"backend_error {error!r}")


@case(
    "LE-llm-failed-midstream",
    level=Level.MUST,
    section=f"{CHUNK}; {ERRORS} › LOCAL_LLM_FAILED",
    rule="A stream the backend breaks after some tokens ends with LOCAL_LLM_FAILED, and no "
    "chunk before it claims a finish_reason (a final chunk is followed by the response).",
)
async def failed_midstream(ctx: AgentContext) -> None:
    conn, _, models = await llm_agent(ctx, fail_models=["llama3.2:3b"], fail_mode="midstream")
    if "llama3.2:3b" not in models:
        ctx.not_applicable("the agent did not advertise llama3.2:3b, which /api/tags lists")
    answer, chunks, _ = await complete(conn, completion("llama3.2:3b"))
    require_error(answer, str(ErrorCode.LOCAL_LLM_FAILED), "a stream the backend breaks")
    final = [c for c in chunks if c.payload.get("finish_reason") is not None]
    if final:
        ctx.depart(
            f"a chunk claimed finish_reason {final[0].payload.get('finish_reason')!r} "
            "before the ERROR"
        )
    ctx.observe(f"{len(chunks)} chunk(s) before the ERROR")


@case(
    "LE-llm-backend-down",
    level=Level.MUST,
    section=f"{ERRORS} › LOCAL_LLM_FAILED",
    rule="A backend that refuses the connection (it went down after HELLO) is "
    "LOCAL_LLM_FAILED with details.backend_error.",
)
async def backend_down(ctx: AgentContext) -> None:
    conn, server, models = await llm_agent(ctx)
    await server.stop()
    answer, _, _ = await complete(conn, completion(models[0]))
    require_error(answer, str(ErrorCode.LOCAL_LLM_FAILED), "a completion with the backend down")
    details = answer.payload.get("details")
    error = details.get("backend_error") if isinstance(details, dict) else None
    ctx.require(isinstance(error, str) and error, f"details.backend_error is {error!r}")
