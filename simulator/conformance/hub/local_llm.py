"""Local LLM through the relay: routing only to an agent with models, chunks in order.

Sections: Local LLM ("If the list is empty OR the capability is missing, the
platform MUST treat local LLM routing as unavailable for this session");
LOCAL_LLM_COMPLETION_CHUNK ("Multiple frames per request, sharing the
request's id"). Raw agents advertise what the case needs; clients go through
the target's client adapter.
"""

from __future__ import annotations

from typing import Any

from tetherbed.simulator.conformance.hub.environment import HubContext
from tetherbed.simulator.conformance.hub.raw_agent import default_hello
from tetherbed.simulator.conformance.levels import Level
from tetherbed.simulator.conformance.registry import case

SECTION = "Local LLM"
REQUEST = "LOCAL_LLM_COMPLETION"
CHUNK = "LOCAL_LLM_COMPLETION_CHUNK"
RESPONSE = "LOCAL_LLM_COMPLETION_RESPONSE"
MODEL = "llama3.2:3b"
#: Seconds a relayed request takes to reach a raw agent on loopback, generously.
RELAY_WAIT = 5.0
#: Seconds to watch for a relay after the client's answer came.
GRACE = 1.0


def completion() -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "Hello?"}], "stream": True}


def hello_with(machine: str, *, llm: bool, models: list[str]) -> dict[str, Any]:
    hello = default_hello(machine)
    if llm:
        hello["capabilities"] = [*hello["capabilities"], "local_llm"]
    hello["local_llm_models"] = models
    return hello


@case(
    "LE-hub-llm-unavailable",
    level=Level.MUST,
    section=SECTION,
    rule="A LOCAL_LLM_COMPLETION for a session whose agent advertised local_llm with no "
    "models, or no local_llm at all, is not relayed to the agent; the client is answered.",
)
async def unavailable(ctx: HubContext) -> None:
    for llm, what in ((True, "local_llm with no models"), (False, "no local_llm")):
        session = ctx.new_session()
        agent = await ctx.serving_agent(
            session, machine=f"machine-{'a' if llm else 'b'}",
            hello=hello_with(f"machine-{'a' if llm else 'b'}", llm=llm, models=[]),
        )  # fmt: skip
        client = await ctx.client(session)
        request_id = await client.send(REQUEST, completion())
        answer = await client.answer_to(request_id, ctx.timings.answer_deadline)
        relayed = await agent.next_request(GRACE, kind=REQUEST)
        if relayed is not None:
            ctx.depart(f"the completion was relayed to an agent that advertised {what}")
        ctx.require(answer is not None, f"the client was never answered ({what})")
        ctx.observe(f"{what}: {answer.describe()}")


@case(
    "LE-hub-llm-chunks-relayed",
    level=Level.MUST,
    section=f"{SECTION} › LOCAL_LLM_COMPLETION_CHUNK",
    rule="The agent's chunks reach the client that asked, in order and under its request id, "
    "then the response; another client of the session gets none of them.",
)
async def chunks_relayed(ctx: HubContext) -> None:
    session = ctx.new_session()
    agent = await ctx.serving_agent(
        session, hello=hello_with("machine-a", llm=True, models=[MODEL])
    )
    asking, other = await ctx.client(session), await ctx.client(session)
    request_id = await asking.send(REQUEST, completion())
    relayed = await agent.next_request(RELAY_WAIT, kind=REQUEST)
    ctx.require(relayed is not None, "the completion never reached the agent")
    deltas = ["The ", "relay ", "keeps ", "order."]
    for number, delta in enumerate(deltas):
        last = number == len(deltas) - 1
        payload = {"delta": delta, "finish_reason": "stop" if last else None}
        await agent.send(CHUNK, payload, relayed.id)
    tokens = {"prompt": 3, "completion": 4, "total": 7}
    body = {"content": "".join(deltas), "finish_reason": "stop", "tokens": tokens}
    body["duration_seconds"] = 0.1
    await agent.answer(relayed, body, kind=RESPONSE)
    answer = await asking.answer_to(request_id, RELAY_WAIT * 2)
    ctx.require(answer is not None, f"no response under {request_id}")
    ctx.require(answer.kind == RESPONSE, f"the client got {answer.describe()}")
    chunks = [a for a in asking.answers_to(request_id) if a.kind == CHUNK]
    got = [c.payload.get("delta") for c in chunks]
    ctx.require(got == deltas, f"the client got the chunks {got!r}, not {deltas!r}")
    ctx.require(
        all(c.t <= answer.t for c in chunks), "a chunk reached the client after the response"
    )
    strays = [a for a in other.answers if a.kind in (CHUNK, RESPONSE)]
    if strays:
        ctx.depart(f"another client of the session got {strays[0].describe()}")
