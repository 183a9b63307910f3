"""How the agent reaches its LLM backend: an Ollama-compatible HTTP server.

`OllamaTransport` is what the service needs: a request, then the answer's
status and its body line by line. `HttpOllama` does it with aiohttp; the sim
backend hands the service an in-process one over the same server core
(`simulator/peripherals/llm_server/in_process.py`), so virtual time drives it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # aiohttp is imported when first used: it costs an agent ~0.5 s to start
    import aiohttp

#: The longest NDJSON line accepted from the backend (one token's object).
MAX_LINE_BYTES = 1024 * 1024


class BackendUnavailable(Exception):
    """The backend could not be reached, or the connection broke mid-answer."""


class BackendResponse(Protocol):
    status: int

    def lines(self) -> AsyncIterator[bytes]:
        """The body, line by line; raises BackendUnavailable if it breaks."""
        ...

    async def read(self, limit: int) -> bytes:
        """The whole body (at most `limit` bytes), for short answers."""
        ...

    async def close(self) -> None: ...


class OllamaTransport(Protocol):
    async def request(self, method: str, path: str, body: bytes | None = None) -> BackendResponse:
        """Send one request; raises BackendUnavailable when it cannot."""
        ...

    async def close(self) -> None: ...


class _HttpResponse:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        import aiohttp

        self._response = response
        self.status = response.status
        self._errors: tuple[type[BaseException], ...] = (aiohttp.ClientError, ValueError)

    async def lines(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            while True:
                line = await content.readuntil(b"\n")
                if not line:
                    return
                if len(line) > MAX_LINE_BYTES:
                    raise BackendUnavailable(f"a stream line over {MAX_LINE_BYTES} bytes")
                yield line
        except self._errors as exc:
            raise BackendUnavailable(_describe(exc)) from None

    async def read(self, limit: int) -> bytes:
        try:
            return await self._response.content.read(limit)
        except self._errors as exc:
            raise BackendUnavailable(_describe(exc)) from None

    async def close(self) -> None:
        self._response.close()


class HttpOllama:
    """An Ollama server at `base_url` (e.g. http://127.0.0.1:11434)."""

    def __init__(self, base_url: str, *, connect_timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._connect_timeout = connect_timeout
        self._session: Any = None  # aiohttp.ClientSession, made on first use

    async def request(self, method: str, path: str, body: bytes | None = None) -> _HttpResponse:
        import aiohttp

        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout)
            self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=True)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            response = await self._session.request(
                method, self.base_url + path, data=body, headers=headers
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise BackendUnavailable(_describe(exc)) from None
        return _HttpResponse(response)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text
