"""A scenario's client: sends requests and records every request's fate.

This is the client leg of the wire recording. It talks to the hub through
the target's client adapter (`simulator/targets/adapters.py`; Tetherbed's own
API by default) and records exactly what went out and what came back: a
duplicate answer, an answer for an id never sent, or no answer at all are
recorded as such for the checkers to judge. Payloads are sent exactly as the
scenario gives them — no marker field, since a strict agent drops a request
with a field the spec does not name — and every invoke and answer carries its
payload digest (`wiretap.digest`), the same one the wire recorder gives the
frames on the agent's side, so a request can be followed across the hub.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from tetherbed.client.errors import CONNECTION_LOST
from tetherbed.simulator.recorder import Recorder
from tetherbed.simulator.scenario import ClientSpec
from tetherbed.simulator.targets.adapters import (
    Answer,
    ConnectionLost,
    OpenRefused,
    SessionClient,
)
from tetherbed.simulator.wiretap.digest import payload_digest
from tetherbed.wire.catalog import STREAMING_RESPONSES
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.messages import MessageType
from tetherbed.wire.serial_io import SerialMessageType

#: Error codes after which the request may have happened: recorded as `info`.
UNKNOWN_OUTCOME_CODES = frozenset(
    {
        ExtensionCode.OUTCOME_UNKNOWN,
        ExtensionCode.AGENT_DISCONNECTED,
        ExtensionCode.AGENT_TIMEOUT,  # the agent may still be running it
        ExtensionCode.UNEXPECTED_ANSWER_TYPE,  # answered, not with what the request asks
        ErrorCode.INTERNAL_ERROR,
        CONNECTION_LOST,
    }
)

#: ERROR details the client's record keeps: what a caller acts on
#: (MODEL_NOT_AVAILABLE, LOCAL_LLM_FAILED; SERIAL_PORT_GONE's bytes, base64).
_ERROR_DETAILS_KEPT = (
    "requested_model",
    "available_models",
    "backend_error",
    "received",
    "received_bytes",
)
#: Content longer than this is summarised by its digest in the history.
_CONTENT_KEPT = 64 * 1024

#: Answers binding a session on a control connection (their summary: id, revision).
_SESSION_BINDINGS = frozenset(
    {MessageType.SESSION_ATTACHED, MessageType.SESSION_ACTIVATED, MessageType.SESSION_RESTORED}
)
#: Answers a later control step takes its input from: kept whole, by request id.
CONTROL_ANSWERS = _SESSION_BINDINGS | {MessageType.DIRECTORY_LIST_RESPONSE}
#: Request fields the history keeps only as a digest (a root grant opens a folder).
_SECRETS = frozenset({"root_grant"})

Opener = Callable[[], Awaitable[SessionClient]]


class ScenarioClient:
    def __init__(self, spec: ClientSpec, opener: Opener, recorder: Recorder) -> None:
        self.spec = spec
        self.process = f"client:{spec.name}"
        self._open = opener
        self._recorder = recorder
        self._transport: SessionClient | None = None
        self._reader: asyncio.Task[None] | None = None
        self.outstanding: dict[str, str] = {}  # request id → message type
        #: Control answers' payloads by request id (`CONTROL_ANSWERS`).
        self.answers: dict[str, dict[str, Any]] = {}

    async def send(self, request_id: str, kind: str, payload: dict[str, Any]) -> None:
        payload_bytes = msgspec.json.encode(payload)
        self._recorder.record(
            self.process,
            "invoke",
            kind,
            {"payload": _keep(payload), "digest": self._digest(payload_bytes)},
            session=self.spec.session,
            req=request_id,
        )
        self.outstanding[request_id] = kind
        try:
            transport = await self._connection()
            await transport.send(request_id, kind, payload_bytes)
        except OpenRefused as exc:
            self._complete(request_id, "fail", {"type": "ERROR", "code": f"HTTP_{exc.status}"})
        except (OSError, TimeoutError) as exc:
            code = "CONNECT_FAILED"
            self._complete(
                request_id, "fail", {"type": "ERROR", "code": code, "why": type(exc).__name__}
            )
        except ConnectionLost:
            self._lost()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._transport is not None:
            with contextlib.suppress(Exception):
                await self._transport.close()
        self._transport = None

    async def _connection(self) -> SessionClient:
        if self._transport is None:
            self._transport = await self._open()
            self._reader = asyncio.ensure_future(self._read(self._transport))
        return self._transport

    async def _read(self, transport: SessionClient) -> None:
        try:
            while True:
                self._on_answer(await transport.receive())
        except ConnectionLost:
            pass
        if self._transport is transport:
            self._transport = None
            self._lost()

    def _on_answer(self, answer: Answer) -> None:
        if answer.kind == "ws.undecodable":
            self._recorder.event(self.process, "note", {"undecodable_answer": len(answer.payload)})
            return
        if answer.kind in STREAMING_RESPONSES:
            self._on_chunk(answer)
            return
        summary = _summary(answer)
        summary["digest"] = self._digest(answer.payload or b"{}")
        if answer.request_id is None:
            self._recorder.event(self.process, "note", {"connection_error": summary})
            return
        if answer.kind in CONTROL_ANSWERS:
            self.answers[answer.request_id] = _payload_of(answer)
        if answer.kind == MessageType.ERROR:
            kind = "info" if summary.get("code") in UNKNOWN_OUTCOME_CODES else "fail"
        else:
            kind = "ok"
        self._complete(answer.request_id, kind, summary)

    def _on_chunk(self, answer: Answer) -> None:
        """A streamed frame (LOCAL_LLM_COMPLETION_CHUNK): a `chunk` event under its
        request, with its text and finish_reason, for `llm_streams` to judge."""
        payload = _payload_of(answer)
        value = {
            "type": answer.kind,
            "delta": _keep_text(payload.get("delta")),
            "finish_reason": payload.get("finish_reason"),
            "digest": self._digest(answer.payload or b"{}"),
        }
        self._recorder.record(
            self.process,
            "event",
            "chunk",
            value,
            session=self.spec.session,
            req=answer.request_id,
        )

    def _digest(self, payload: bytes) -> str:
        scrub = self._recorder.scrub
        return payload_digest(scrub(payload) if scrub is not None else payload)

    def _complete(self, request_id: str, kind: str, value: dict[str, Any]) -> None:
        f = self.outstanding.pop(request_id, None) or value.get("type", "?")
        self._recorder.record(
            self.process,
            kind,
            f,
            value,
            session=self.spec.session,
            req=request_id,  # type: ignore[arg-type]
        )

    def _lost(self) -> None:
        """The connection died: whatever was outstanding may or may not have run."""
        for request_id in list(self.outstanding):
            self._complete(request_id, "info", {"type": "ERROR", "code": "CONNECTION_LOST"})


def _payload_of(answer: Answer) -> dict[str, Any]:
    """An answer's payload as a dict ({} when it is no JSON object)."""
    try:
        payload = msgspec.json.decode(answer.payload or b"{}")
    except msgspec.MsgspecError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _summary(answer: Answer) -> dict[str, Any]:
    """The deterministic facts of an answer (no timestamps, paths or messages);
    the client adds the digest of its payload, to follow it back to the agent."""
    payload = _payload_of(answer)
    kind = answer.kind
    summary: dict[str, Any] = {"type": kind}
    if kind == MessageType.ERROR:
        summary["code"] = payload.get("code")
        details = payload.get("details")
        if isinstance(details, dict):
            for key in _ERROR_DETAILS_KEPT:
                if key in details:
                    summary[key] = _keep_text(details[key], 1000)
            received = _text_of_base64(details.get("received"))
            if received is not None:  # readable in a scenario: `received_text: "PONG\r\n"`
                summary["received_text"] = _keep_text(received, 1000)
    elif kind == MessageType.LOCAL_LLM_COMPLETION_RESPONSE:
        summary["content"] = _keep_text(payload.get("content", ""))
        summary["finish_reason"] = payload.get("finish_reason")
        tokens = payload.get("tokens")
        if isinstance(tokens, dict):
            summary["completion_tokens"] = tokens.get("completion")
    elif kind == MessageType.FILE_CONTENTS:
        summary["content"] = _keep_text(payload.get("content", ""))
        summary["encoding"] = payload.get("encoding")
        summary["size"] = payload.get("size_bytes")
    elif kind == MessageType.COMMAND_RESULT:
        for key in ("exit_code", "timed_out", "output_truncated"):
            summary[key] = payload.get(key)
        summary["stdout"] = _keep_text(payload.get("stdout", ""), 4096)
        summary["stderr"] = _keep_text(payload.get("stderr", ""), 4096)
    elif kind == MessageType.FILE_STAT_RESPONSE:
        for key in ("exists", "is_file", "is_dir", "size_bytes"):
            summary[key] = payload.get(key)
    elif kind == MessageType.FILE_LIST_RESPONSE:
        summary["names"] = [e.get("name") for e in payload.get("entries", [])]
        summary["truncated"] = payload.get("truncated")
    elif kind == MessageType.ACK:
        summary["ok"] = payload.get("ok")
    elif kind == MessageType.DIRECTORY_LIST_RESPONSE:
        summary["names"] = [e.get("name") for e in payload.get("entries", [])]
        summary["truncated"] = payload.get("truncated")
    elif kind in _SESSION_BINDINGS:
        summary["session_id"] = payload.get("session_id")
        summary["revision"] = payload.get("revision")
    elif kind == SerialMessageType.SERIAL_DATA:
        summary["data"] = _keep_text(payload.get("data", ""))
        for key in ("encoding", "size_bytes", "timed_out"):
            summary[key] = payload.get(key)
    elif kind == SerialMessageType.SERIAL_OPENED:
        summary["baud_rate"] = payload.get("baud_rate")
    elif kind == SerialMessageType.SERIAL_WRITTEN:
        summary["bytes_written"] = payload.get("bytes_written")
    return summary


def _text_of_base64(value: Any) -> str | None:
    """Base64 bytes as UTF-8 text (None when they are neither)."""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _keep(payload: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _keep_text(v, 0 if k in _SECRETS else _CONTENT_KEPT) if isinstance(v, str) else v
        for k, v in payload.items()
    }


def _keep_text(text: Any, limit: int = _CONTENT_KEPT) -> Any:
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "length": len(text)}


__all__ = ["ScenarioClient", "payload_digest"]
