"""The server as an agent's Ollama transport, with no socket (the sim backend).

The sim backend runs everything on one virtual-time loop, where no socket may
exist; `InProcessOllama` hands the agent's `LocalLlm` the very same core and
runner `tetherbed llm-server` uses, so the answers, the serialisation and
the time between tokens are those of the real server, on the sim's clock.
Only HTTP itself is skipped: a reply's JSON body, the stream's NDJSON lines
and a cut connection (`BackendUnavailable`) reach the agent as they would
over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from tetherbed.agent.local_llm.transport import BackendUnavailable
from tetherbed.simulator.peripherals.llm_server.core import Reply
from tetherbed.simulator.peripherals.llm_server.runner import GenerationRunner

_END = object()
_CUT = object()


class _QueueResponder:
    """Hands the runner's pieces to the caller through a queue."""

    def __init__(self) -> None:
        self.head: asyncio.Future[tuple[int, bytes | None]] = (
            asyncio.get_running_loop().create_future()
        )
        self.body: asyncio.Queue[Any] = asyncio.Queue()

    def ended(self, task: asyncio.Task[None]) -> None:
        """The runner's task is over: a caller still waiting for the head learns why."""
        if self.head.done():
            return
        failure = None if task.cancelled() else task.exception()
        self.head.set_exception(BackendUnavailable(f"the server failed: {failure!r}"))

    def _start(self, status: int, body: bytes | None) -> None:
        if not self.head.done():
            self.head.set_result((status, body))

    async def reply(self, reply: Reply) -> None:
        body = reply.body
        data = msgspec.json.encode(body) if isinstance(body, dict) else body.encode()
        self._start(reply.status, data)

    async def start_stream(self) -> None:
        self._start(200, None)

    async def write_line(self, line: bytes) -> None:
        await self.body.put(line)

    async def end(self) -> None:
        await self.body.put(_END)

    async def cut(self) -> None:
        if not self.head.done():
            self.head.set_exception(BackendUnavailable("ServerDisconnectedError: cut"))
        await self.body.put(_CUT)


class _InProcessResponse:
    def __init__(
        self, status: int, body: bytes | None, out: _QueueResponder, task: asyncio.Task[None]
    ) -> None:
        self.status = status
        self._body = body
        self._out = out
        self._task = task

    async def lines(self) -> AsyncIterator[bytes]:
        if self._body is not None:
            yield self._body
            return
        while True:
            item = await self._out.body.get()
            if item is _END:
                return
            if item is _CUT:
                raise BackendUnavailable(
                    "ClientPayloadError: Response payload is not completed (connection cut)"
                )
            yield item

    async def read(self, limit: int) -> bytes:
        if self._body is not None:
            return self._body[:limit]
        data = bytearray()
        async for line in self.lines():
            data += line
            if len(data) >= limit:
                break
        return bytes(data[:limit])

    async def close(self) -> None:
        """Like closing the HTTP connection: the server stops generating."""
        if not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, BackendUnavailable):
                await self._task


class InProcessOllama:
    """An agent's OllamaTransport onto a `GenerationRunner` on the same loop."""

    def __init__(self, runner: GenerationRunner, *, reachable: bool = True) -> None:
        self.runner = runner
        #: False: as if nothing listened (the agent sees a refused connection).
        self.reachable = reachable

    async def request(
        self, method: str, path: str, body: bytes | None = None
    ) -> _InProcessResponse:
        if not self.reachable:
            raise BackendUnavailable(
                "ClientConnectorError: Cannot connect to host 127.0.0.1:11434 "
                "[Connect call failed ('127.0.0.1', 11434)]"
            )
        out = _QueueResponder()
        task = asyncio.ensure_future(self.runner.serve(method, path, body or b"", out))
        task.add_done_callback(out.ended)
        status, data = await out.head
        return _InProcessResponse(status, data, out, task)

    async def close(self) -> None:
        return None
