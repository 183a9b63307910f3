"""The local LLM as the spec has the shim serve it.

- It advertises the backend's models (`probe`, at every connection): the
  `local_llm` capability only when there is at least one, since "if the list
  is empty OR the capability is missing" the platform falls back anyway.
- One completion at a time: Ollama serialises, so a second one while the
  first runs is answered LOCAL_LLM_BUSY at once rather than queued behind it
  (the backend's own 503 "server busy" is LOCAL_LLM_BUSY too).
- A model not advertised, or one the backend no longer has (404), is
  MODEL_NOT_AVAILABLE with `details {requested_model, available_models}`.
- Anything else the backend does wrong — refused connection, HTTP error, an
  `{"error"}` line mid-stream, a cut or stalled stream — is LOCAL_LLM_FAILED
  with `details.backend_error`, the backend's own words.
- Streaming: each token goes out as a LOCAL_LLM_COMPLETION_CHUNK with
  `finish_reason: null`; the backend's last line becomes the final chunk (its
  text, often "", with `finish_reason` "stop" or "length"), then the
  LOCAL_LLM_COMPLETION_RESPONSE with the assembled content and the counts.
  A stream that fails after chunks ends with the ERROR alone: no final chunk
  may claim it stopped.
- The assembled content is bounded so that the response fits one frame and
  `max_file_size_bytes`; past that the answer ends with `finish_reason: length`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from tetherbed.agent.config import Limits
from tetherbed.agent.local_llm import ollama
from tetherbed.agent.local_llm.transport import BackendUnavailable, OllamaTransport
from tetherbed.runtime.clock import Clock
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError
from tetherbed.wire.limits import ENVELOPE_HEADROOM_BYTES, FRAME_LIMIT_BYTES, JSON_ESCAPE_FACTOR
from tetherbed.wire.messages import (
    LocalLlmCompletion,
    LocalLlmCompletionChunk,
    LocalLlmCompletionResponse,
    MessageType,
    Payload,
    TokenCounts,
)

log = logging.getLogger(__name__)

Emit = Callable[[MessageType, Payload], Awaitable[None]]

#: The longest `backend_error` passed on (the backend's words, for debugging).
BACKEND_ERROR_CHARS = 1000
#: The most bytes of an error or listing body read from the backend.
SHORT_BODY_BYTES = 256 * 1024
#: Content that can always go out in one frame, whatever it holds.
_FRAME_CONTENT_BYTES = (FRAME_LIMIT_BYTES - ENVELOPE_HEADROOM_BYTES) // JSON_ESCAPE_FACTOR


class StreamAbandoned(Exception):
    """The connection the chunks were for is gone; stop generating."""


class LocalLlm:
    def __init__(
        self,
        transport: OllamaTransport,
        *,
        clock: Clock,
        allowed_models: Iterable[str] = (),
        idle_timeout: float = 50.0,
        probe_timeout: float = 3.0,
    ) -> None:
        """`allowed_models` (empty: all) limits what is advertised; `idle_timeout`
        is the longest wait for the backend's next line (the first one too, which
        includes loading the model)."""
        self.transport = transport
        self.models: list[str] = []
        self._clock = clock
        self._allowed = frozenset(allowed_models)
        self._idle_timeout = idle_timeout
        self._probe_timeout = probe_timeout
        self._busy = False

    @property
    def busy(self) -> bool:
        return self._busy

    async def close(self) -> None:
        await self.transport.close()

    async def probe(self) -> list[str]:
        """Ask the backend for its models (`/api/tags`); [] when it cannot say."""
        try:
            models = await asyncio.wait_for(self._tags(), self._probe_timeout)
        except (BackendUnavailable, ValueError, TimeoutError) as exc:
            log.warning("local LLM backend unavailable, local_llm not advertised: %s", exc)
            models = []
        if self._allowed:
            models = [m for m in models if m in self._allowed]
        self.models = models
        return list(models)

    async def _tags(self) -> list[str]:
        response = await self.transport.request("GET", "/api/tags")
        try:
            body = await response.read(SHORT_BODY_BYTES)
        finally:
            await response.close()
        if response.status != 200:
            raise ValueError(f"/api/tags answered HTTP {response.status}")
        return ollama.model_names(body)

    async def complete(
        self, request: LocalLlmCompletion, *, limits: Limits, emit: Emit
    ) -> LocalLlmCompletionResponse:
        """Serve one completion; raises ProtocolError with the spec's code."""
        if request.model not in self.models:
            raise _model_not_available(request.model, self.models, "was not advertised")
        if self._busy:
            raise ProtocolError(
                ErrorCode.LOCAL_LLM_BUSY,
                "the local LLM is serving another request; it serves one at a time",
            )
        self._busy = True
        try:
            return await self._complete(request, limits, emit)
        finally:
            self._busy = False

    async def _complete(
        self, request: LocalLlmCompletion, limits: Limits, emit: Emit
    ) -> LocalLlmCompletionResponse:
        started = self._clock.monotonic()
        try:
            response = await asyncio.wait_for(
                self.transport.request("POST", "/api/chat", ollama.chat_body(request)),
                self._idle_timeout,
            )
        except TimeoutError:
            raise _failed(f"no answer from the backend in {self._idle_timeout:g} s") from None
        except BackendUnavailable as exc:
            raise _failed(str(exc)) from None
        try:
            if response.status != 200:
                await self._refused(request.model, response.status, response)
            return await self._stream(request, limits, emit, response.lines(), started)
        finally:
            await response.close()

    async def _refused(self, model: str, status: int, response: object) -> None:
        try:
            body = await response.read(SHORT_BODY_BYTES)  # type: ignore[attr-defined]
        except BackendUnavailable:
            body = b""
        text = ollama.error_text(body)
        if status == 404:
            others = [m for m in self.models if m != model]
            raise _model_not_available(model, others, f"is not loaded on the backend ({text})")
        if status == 503:
            raise ProtocolError(
                ErrorCode.LOCAL_LLM_BUSY,
                f"the local LLM backend is busy: {text}",
                details={"backend_error": text[:BACKEND_ERROR_CHARS]},
            )
        raise _failed(f"HTTP {status}: {text}")

    async def _stream(
        self,
        request: LocalLlmCompletion,
        limits: Limits,
        emit: Emit,
        lines: object,
        started: float,
    ) -> LocalLlmCompletionResponse:
        budget = min(limits.max_file_size_bytes, _FRAME_CONTENT_BYTES)
        stream = ollama.ChatStream()
        parts: list[str] = []
        size = 0
        iterator = lines.__aiter__()  # type: ignore[attr-defined]
        done: ollama.Done | None = None
        cut_at_limit = False
        while done is None:
            try:
                line = await asyncio.wait_for(iterator.__anext__(), self._idle_timeout)
            except StopAsyncIteration:
                raise _failed("the backend's stream ended without its final line") from None
            except TimeoutError:
                raise _failed(f"no data from the backend for {self._idle_timeout:g} s") from None
            except BackendUnavailable as exc:
                raise _failed(str(exc)) from None
            event = stream.feed(line)
            if event is None:
                continue
            if isinstance(event, ollama.Failed):
                raise _failed(event.error)
            text = event.text
            encoded = len(text.encode("utf-8"))
            if size + encoded > budget:
                cut_at_limit = True
                done = ollama.Done("", "length", None, None, None)
                break
            size += encoded
            if isinstance(event, ollama.Done):
                done = event
            elif text:
                parts.append(text)
                if request.stream:
                    await emit(
                        MessageType.LOCAL_LLM_COMPLETION_CHUNK,
                        LocalLlmCompletionChunk(delta=text, finish_reason=None),
                    )
        if done.text:
            parts.append(done.text)
        finish = "length" if done.reason == "length" else "stop"
        if request.stream:
            await emit(
                MessageType.LOCAL_LLM_COMPLETION_CHUNK,
                LocalLlmCompletionChunk(delta=done.text, finish_reason=finish),
            )
        if cut_at_limit:
            log.warning("local LLM answer cut at %d bytes (the frame limit)", size)
        prompt, completion = done.prompt_tokens, done.completion_tokens
        total = prompt + completion if prompt is not None and completion is not None else None
        duration = done.total_seconds
        if duration is None:
            duration = self._clock.monotonic() - started
        return LocalLlmCompletionResponse(
            content="".join(parts),
            finish_reason=finish,
            tokens=TokenCounts(prompt=prompt, completion=completion, total=total),
            duration_seconds=round(duration, 6),
        )


def _model_not_available(model: str, available: list[str], why: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.MODEL_NOT_AVAILABLE,
        f"model {model!r} {why}",
        details={"requested_model": model, "available_models": list(available)},
    )


def _failed(backend_error: str) -> ProtocolError:
    return ProtocolError(
        ErrorCode.LOCAL_LLM_FAILED,
        f"the local LLM backend failed: {backend_error[:200]}",
        details={"backend_error": backend_error[:BACKEND_ERROR_CHARS]},
    )
