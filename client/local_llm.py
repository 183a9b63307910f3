"""`sandbox.llm`: LOCAL_LLM_COMPLETION on the session's machine, streamed or whole.

    async for delta in sandbox.llm.stream("llama3.2:3b", [{"role": "user", "content": "Hi"}]):
        print(delta, end="")
    answer = await sandbox.llm.complete("llama3.2:3b", messages, max_tokens=64)

Errors are typed: MODEL_NOT_AVAILABLE (`details.available_models`),
LOCAL_LLM_BUSY (an OverloadedError: back off and retry) and LOCAL_LLM_FAILED
(`details.backend_error`) raise their HubError.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tetherbed.client.errors import UnexpectedResponseError
from tetherbed.wire.messages import LocalLlmCompletionResponse, MessageType

if TYPE_CHECKING:
    from tetherbed.client.sandbox import HubSandbox


class LocalLlm:
    def __init__(self, sandbox: HubSandbox) -> None:
        self._sandbox = sandbox
        #: The last streamed completion's response (content, finish_reason, tokens).
        self.last: LocalLlmCompletionResponse | None = None

    async def complete(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        *,
        request_timeout: float | None = None,
        **options: Any,
    ) -> LocalLlmCompletionResponse:
        """The whole answer (`stream: false`: the agent sends no chunk)."""
        frame = await self._sandbox.request(
            MessageType.LOCAL_LLM_COMPLETION,
            _payload(model, messages, options, stream=False),
            request_timeout=request_timeout,
        )
        return _response(frame)

    async def stream(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        *,
        request_timeout: float | None = None,
        **options: Any,
    ) -> AsyncIterator[str]:
        """Each chunk's text as it arrives; the response is then in `self.last`.

        `options`: max_tokens, temperature, top_p."""
        self.last = None
        async with self._sandbox.stream(
            MessageType.LOCAL_LLM_COMPLETION,
            _payload(model, messages, options, stream=True),
            request_timeout=request_timeout,
        ) as frames:
            async for frame in frames:
                if frame.type == MessageType.LOCAL_LLM_COMPLETION_CHUNK:
                    if frame.payload.delta:
                        yield frame.payload.delta
                else:
                    self.last = _response(frame)


def _payload(
    model: str, messages: Sequence[Mapping[str, str]], options: Mapping[str, Any], *, stream: bool
) -> dict[str, Any]:
    unknown = sorted(set(options) - {"max_tokens", "temperature", "top_p"})
    if unknown:
        raise TypeError(f"unknown option(s) {unknown}: max_tokens, temperature, top_p")
    return {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        **{k: v for k, v in options.items() if v is not None},
        "stream": stream,
    }


def _response(frame: Any) -> LocalLlmCompletionResponse:
    if frame.type != MessageType.LOCAL_LLM_COMPLETION_RESPONSE or not isinstance(
        frame.payload, LocalLlmCompletionResponse
    ):
        raise UnexpectedResponseError(
            "UNEXPECTED_RESPONSE", f"LOCAL_LLM_COMPLETION answered with {frame.type}"
        )
    return frame.payload
