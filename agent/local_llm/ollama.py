"""Ollama's wire format, sans I/O: the chat request body and the stream's events.

`/api/chat` with `stream: true` answers NDJSON: one object per line, each
`{"message": {"content": TOKEN}, "done": false}`, then a last one with
`"done": true`, `done_reason` and the counts; a runner that dies mid-stream
sends `{"error": TEXT}` instead. `ChatStream.feed(line)` turns each line into
one event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from tetherbed.wire.messages import LocalLlmCompletion

#: The roles the spec defines; others are to be ignored ("receivers MUST ignore
#: unknown roles"), so they are not passed to the backend.
KNOWN_ROLES = frozenset({"system", "user", "assistant"})


def chat_body(request: LocalLlmCompletion) -> bytes:
    """The `/api/chat` body for a LOCAL_LLM_COMPLETION (always streamed from the
    backend: the agent needs the pieces to watch for stalls and limits)."""
    options: dict[str, Any] = {}
    if request.max_tokens is not None:
        options["num_predict"] = request.max_tokens
    if request.temperature is not None:
        options["temperature"] = request.temperature
    if request.top_p is not None:
        options["top_p"] = request.top_p
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [
            {"role": m.role, "content": m.content}
            for m in request.messages
            if m.role in KNOWN_ROLES
        ],
        "stream": True,
    }
    if options:
        body["options"] = options
    return msgspec.json.encode(body)


def model_names(body: bytes) -> list[str]:
    """The model names of an `/api/tags` answer, in its order (ValueError if unreadable)."""
    try:
        tags = msgspec.json.decode(body, type=_Tags)
    except msgspec.MsgspecError as exc:
        raise ValueError(f"unreadable /api/tags answer: {exc}") from None
    names = [m.model or m.name for m in tags.models]
    return list(dict.fromkeys(n for n in names if n))


def error_text(body: bytes) -> str:
    """The `error` of an Ollama error body, or the body itself."""
    try:
        parsed = msgspec.json.decode(body)
    except msgspec.MsgspecError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        return parsed["error"]
    return body.decode("utf-8", "replace").strip()


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    text: str
    reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_seconds: float | None


@dataclass(frozen=True, slots=True)
class Failed:
    """The backend said it failed, or sent something that is no stream line."""

    error: str


Event = Delta | Done | Failed


class _Message(msgspec.Struct):
    content: str = ""


class _Line(msgspec.Struct):
    message: _Message | None = None
    response: str | None = None  # /api/generate's spelling
    done: bool = False
    done_reason: str | None = None
    error: str | None = None
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    total_duration: int | None = None


class _Model(msgspec.Struct):
    name: str = ""
    model: str = ""


class _Tags(msgspec.Struct):
    models: list[_Model] = []


_decode_line = msgspec.json.Decoder(_Line).decode


class ChatStream:
    """Turns the lines of one streamed answer into events; nothing after Done."""

    def __init__(self) -> None:
        self.finished = False

    def feed(self, line: bytes) -> Event | None:
        """The event of one line (None for a blank line)."""
        if not line.strip():
            return None
        try:
            parsed = _decode_line(line)
        except msgspec.MsgspecError as exc:
            self.finished = True
            return Failed(f"unreadable stream line ({exc}): {line[:200]!r}")
        if parsed.error is not None:
            self.finished = True
            return Failed(parsed.error)
        text = parsed.message.content if parsed.message is not None else parsed.response or ""
        if not parsed.done:
            return Delta(text)
        self.finished = True
        total = parsed.total_duration / 1e9 if parsed.total_duration is not None else None
        return Done(text, parsed.done_reason, parsed.prompt_eval_count, parsed.eval_count, total)
