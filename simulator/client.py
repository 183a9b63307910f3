"""A scenario's client: sends raw envelopes and records every request's fate.

It speaks the wire directly (not through `HubSandbox`) so that the history
shows exactly what arrived: a duplicate answer, an answer for an id never
sent, or no answer at all are recorded as such for the checkers to judge.

Each payload gets an extra `_tetherbed_req` field (agents ignore unknown
fields; the hub relays payload bytes untouched), which makes every request's
payload — and so its digest in the agent's `exec` events — unique, so that a
re-execution is told apart from a second request that happens to look alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from tetherbed.runtime.transport import MessageTransport, TransportClosed, UpgradeRefused
from tetherbed.simulator.recorder import Recorder
from tetherbed.simulator.scenario import ClientSpec
from tetherbed.wire.catalog import STREAMING_RESPONSES
from tetherbed.wire.envelope import EMPTY_PAYLOAD, Envelope, decode_envelope, encode_message
from tetherbed.wire.errors import WireError
from tetherbed.wire.messages import MessageType
from tetherbed.wire.version import CURRENT_TEXT

#: Error codes after which the request may have happened: recorded as `info`.
UNKNOWN_OUTCOME_CODES = frozenset(
    {"OUTCOME_UNKNOWN", "AGENT_DISCONNECTED", "INTERNAL_ERROR", "CONNECTION_LOST"}
)

#: Content longer than this is summarised by its digest in the history.
_CONTENT_KEPT = 64 * 1024

Opener = Callable[[], Awaitable[MessageTransport]]


def payload_digest(payload_bytes: bytes) -> str:
    """The same digest the agent's `exec` events carry."""
    return hashlib.sha256(payload_bytes).hexdigest()[:16]


class ScenarioClient:
    def __init__(self, spec: ClientSpec, opener: Opener, recorder: Recorder) -> None:
        self.spec = spec
        self.process = f"client:{spec.name}"
        self._open = opener
        self._recorder = recorder
        self._transport: MessageTransport | None = None
        self._reader: asyncio.Task[None] | None = None
        self.outstanding: dict[str, str] = {}  # request id → message type

    async def send(self, request_id: str, kind: str, payload: dict[str, Any]) -> None:
        body = dict(payload)
        body["_tetherbed_req"] = f"{self.spec.name}/{request_id}"
        payload_bytes = msgspec.json.encode(body)
        self._recorder.record(
            self.process,
            "invoke",
            kind,
            {"payload": _keep(body), "digest": payload_digest(payload_bytes)},
            session=self.spec.session,
            req=request_id,
        )
        self.outstanding[request_id] = kind
        try:
            transport = await self._connection()
            frame = encode_message(
                kind,
                request_id,
                msgspec.Raw(payload_bytes),
                ts=self._recorder.now(),
                version=CURRENT_TEXT,
            )
            await transport.send(frame)
        except UpgradeRefused as exc:
            self._complete(request_id, "fail", {"type": "ERROR", "code": f"HTTP_{exc.status}"})
        except (OSError, TimeoutError) as exc:
            code = "CONNECT_FAILED"
            self._complete(
                request_id, "fail", {"type": "ERROR", "code": code, "why": type(exc).__name__}
            )
        except TransportClosed:
            self._lost()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._transport is not None:
            with contextlib.suppress(Exception):
                await self._transport.close()
        self._transport = None

    async def _connection(self) -> MessageTransport:
        if self._transport is None:
            self._transport = await self._open()
            self._reader = asyncio.ensure_future(self._read(self._transport))
        return self._transport

    async def _read(self, transport: MessageTransport) -> None:
        try:
            while True:
                data = await transport.recv()
                self._on_frame(data)
        except TransportClosed:
            pass
        if self._transport is transport:
            self._transport = None
            self._lost()

    def _on_frame(self, data: bytes) -> None:
        try:
            envelope = decode_envelope(data)
        except WireError as exc:
            self._recorder.event(self.process, "note", {"undecodable_answer": exc.code})
            return
        if envelope.type in STREAMING_RESPONSES:
            return
        if envelope.id is None:
            self._recorder.event(self.process, "note", {"connection_error": _summary(envelope)})
            return
        summary = _summary(envelope)
        if envelope.type == MessageType.ERROR:
            kind = "info" if summary.get("code") in UNKNOWN_OUTCOME_CODES else "fail"
        else:
            kind = "ok"
        self._complete(envelope.id, kind, summary)

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


def _summary(envelope: Envelope) -> dict[str, Any]:
    """The deterministic facts of an answer (no timestamps, paths or messages)."""
    try:
        payload = msgspec.json.decode(envelope.payload or EMPTY_PAYLOAD)
    except msgspec.MsgspecError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    kind = envelope.type
    summary: dict[str, Any] = {"type": kind}
    if kind == MessageType.ERROR:
        summary["code"] = payload.get("code")
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
    return summary


def _keep(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: _keep_text(v) if isinstance(v, str) else v for k, v in payload.items()}


def _keep_text(text: Any, limit: int = _CONTENT_KEPT) -> Any:
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "length": len(text)}


__all__ = ["Envelope", "ScenarioClient", "payload_digest"]
