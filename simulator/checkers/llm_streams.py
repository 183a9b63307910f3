"""llm_streams: every LOCAL_LLM_COMPLETION streams by the spec's rules, and the
hub relays the agent's chunks in order to the client that asked.

Why: a client assembles the answer from the chunks as they come; a chunk that
claims a finish too early, a response that does not match what streamed, or
chunks from another request mixed in give the user a wrong answer, however
well every other frame is formed.

Per client request of type LOCAL_LLM_COMPLETION (client legs, `chunk`
events under its `req`):

- every chunk but the last has `finish_reason: null`; a stream that ended
  with its response has a last chunk with finish_reason stop, length or
  content_filter, which the response repeats; a stream that ended with an
  ERROR has none that claims a finish;
- `stream: false` gets no chunk; `stream: true` (the default) that ends with a
  response got at least one;
- the response's `content` is the chunks' deltas joined;
- no chunk comes after the request's terminal answer;
- from the wire: the chunks the agent sent under that request (found on its
  recorded link by the response's payload digest) reached the client in the
  same order, none missing and none added.

No LOCAL_LLM_COMPLETION in the history: unknown.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tetherbed.simulator.checkers.evidence.records import COMPLETIONS, fields, ordered, text
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap import records as wire
from tetherbed.wire.messages import MessageType

NAME = "llm_streams"

_REQUEST = str(MessageType.LOCAL_LLM_COMPLETION)
_CHUNK = str(MessageType.LOCAL_LLM_COMPLETION_CHUNK)
_RESPONSE = str(MessageType.LOCAL_LLM_COMPLETION_RESPONSE)
FINISH_REASONS = frozenset({"stop", "length", "content_filter"})


class _Request:
    def __init__(self, invoke: Record) -> None:
        self.invoke = invoke
        self.chunks: list[Record] = []
        self.answer: Record | None = None
        self.late: list[Record] = []


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    records = ordered(history)
    requests: dict[tuple[str, Any], _Request] = {}
    done: list[_Request] = []
    sent_by_agents = _agent_streams(records)
    for record in records:
        slot = (record.process, record.req)
        if record.type == "invoke":
            if record.f == _REQUEST:
                requests[slot] = _Request(record)
            else:
                requests.pop(slot, None)
            continue
        request = requests.get(slot)
        if request is None:
            continue
        if record.type == "event" and record.f == "chunk":
            (request.late if request.answer is not None else request.chunks).append(record)
        elif record.type in COMPLETIONS and request.answer is None:
            request.answer = record
            done.append(request)
    for request in requests.values():
        if request.answer is None:
            done.append(request)
    for request in done:
        _judge(request, sent_by_agents, findings)
    no_evidence = "no LOCAL_LLM_COMPLETION in the history" if not done else None
    return findings.verdict(
        f"{len(done)} LOCAL_LLM_COMPLETION stream(s) kept the chunk rules", no_evidence=no_evidence
    )


def _judge(request: _Request, sent_by_agents: dict[str, list[Record]], findings: Findings) -> None:
    invoke, chunks, answer = request.invoke, request.chunks, request.answer
    who = f"{invoke.process} req {invoke.req}"
    payload = fields(invoke).get("payload")
    streaming = not (isinstance(payload, dict) and payload.get("stream") is False)
    reasons = [fields(c).get("finish_reason") for c in chunks]
    for late in request.late:
        findings.add(
            f"{who}: a chunk after its terminal answer", (answer, "answer"), (late, "late")
        )
    if not streaming and chunks:
        findings.add(f"{who}: stream false, yet {len(chunks)} chunk(s)", (invoke, "request"))
    early = [c for c, r in zip(chunks[:-1], reasons[:-1], strict=True) if r is not None]
    for chunk in early:
        findings.add(f"{who}: a chunk before the last claims a finish", (chunk, "chunk"))
    if answer is None:
        return
    value = fields(answer)
    if value.get("type") == _RESPONSE:
        if streaming and not chunks:
            findings.add(f"{who}: streamed, answered without any chunk", (answer, "response"))
        if chunks:
            last = reasons[-1]
            if last not in FINISH_REASONS:
                findings.add(
                    f"{who}: the last chunk's finish_reason is {last!r}", (chunks[-1], "last chunk")
                )
            elif value.get("finish_reason") != last:
                findings.add(
                    f"{who}: the response says {value.get('finish_reason')!r}, "
                    f"the last chunk {last!r}",
                    (chunks[-1], "last chunk"),
                    (answer, "response"),
                )
            joined = "".join(text(fields(c).get("delta")) or "" for c in chunks)
            content = value.get("content")
            if isinstance(content, str) and content != joined:
                findings.add(
                    f"{who}: the response's content is not the chunks joined "
                    f"({len(content)} vs {len(joined)} characters)",
                    (answer, "response"),
                )
        _compare_with_agent(who, request, sent_by_agents, findings)
    elif chunks and reasons[-1] is not None:
        findings.add(
            f"{who}: ended with {value.get('type')} {value.get('code')}, "
            "yet a chunk claimed a finish",
            (chunks[-1], "chunk"),
            (answer, "answer"),
        )


def _agent_streams(records: list[Record]) -> dict[str, list[Record]]:
    """Each agent connection's streamed frames and responses, by `conn id`."""
    streams: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record.type != "event" or record.f != wire.FRAME:
            continue
        value = fields(record)
        if value.get("dir") == wire.UP and value.get("type") in (_CHUNK, _RESPONSE):
            streams[f"{value.get('conn')} {value.get('id')}"].append(record)
    return streams


def _compare_with_agent(
    who: str, request: _Request, sent_by_agents: dict[str, list[Record]], findings: Findings
) -> None:
    answer = request.answer
    assert answer is not None
    digest = fields(answer).get("digest")
    matches = [
        frames
        for frames in sent_by_agents.values()
        if frames and fields(frames[-1]).get("digest") == digest
    ]
    if len(matches) != 1:
        return  # not recorded, or not told apart: nothing to compare with
    sent = [fields(f).get("digest") for f in matches[0][:-1]]
    got = [fields(c).get("digest") for c in request.chunks]
    if sent != got:
        findings.add(
            f"{who}: the agent sent {len(sent)} chunk(s), the client got {len(got)}"
            + (" in another order" if sorted(map(str, sent)) == sorted(map(str, got)) else ""),
            (matches[0][-1], "the agent's response"),
            (answer, "the client's answer"),
        )
