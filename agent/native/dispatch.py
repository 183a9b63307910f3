"""Requests to tasks and tasks to responses: concurrency, cancel, and one answer per id.

Every admitted request runs as its own task, so a slow screenshot never holds up a
`status`; responses go out as tasks finish (out of order, correlated by id). A
request that cannot be parsed is answered at once, with `"id": null` when its id
cannot be read. `cancel` is answered here because the tasks live here.

At most `MAX_IN_FLIGHT` requests run (or wait to be sent) at once. `on_line`
waits for a free slot before it starts another, and the stdin reader waits for
`on_line`, so a caller that never reads stdout stops the adapter reading stdin:
memory stays bounded (the output queue's 8 MiB, plus at most `MAX_IN_FLIGHT`
answers of at most 4 MiB) whatever the caller sends. Lines are taken in order,
so with every slot busy a later line (a `cancel` too) waits for one to free up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from tetherbed.agent.native.errors import Code, NativeError
from tetherbed.agent.native.framing import (
    MAX_REQUEST_BYTES,
    MAX_RESPONSE_BYTES,
    decode_line,
    encode_error,
    encode_ok,
    request_id_of,
)
from tetherbed.agent.native.protocol import Request, RequestTracker

log = logging.getLogger(__name__)

#: Requests running or waiting to be sent at once (see the module docstring).
MAX_IN_FLIGHT = 32


class Dispatcher:
    def __init__(
        self,
        adapter: Any,
        send: Callable[[bytes], Awaitable[None]],
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        defects: frozenset[str] = frozenset(),
    ) -> None:
        self._adapter = adapter
        self._send = send
        self._tracker = RequestTracker(defects)
        self._check_depth = "accept_over_deep" not in defects
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._slots = asyncio.Semaphore(max_in_flight)
        self._closing = False

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def on_line(self, line: bytes) -> None:
        if not line.strip():
            return  # blank lines carry no request
        obj: Any = None
        try:
            obj = decode_line(line, check_depth=self._check_depth)
            request = self._tracker.admit(obj)
        except NativeError as exc:
            rid = exc.request_id if exc.request_id is not None else request_id_of(obj)
            await self._send(encode_error(rid, exc))
            return
        if self._closing:
            self._tracker.finish(request.id)
            await self._send(encode_error(request.id, NativeError(Code.SHUTTING_DOWN)))
            return
        if request.method == "cancel":
            self._tracker.finish(request.id)
            cancelled = self.cancel(request.args["request_id"])
            await self._send(encode_ok(request.id, {"cancelled": cancelled}))
            return
        await self._slots.acquire()  # backpressure: the reader waits here
        if self._closing:
            self._slots.release()
            self._tracker.finish(request.id)
            await self._send(encode_error(request.id, NativeError(Code.SHUTTING_DOWN)))
            return
        task = asyncio.create_task(self._run(request))
        self._tasks[request.id] = task
        # A callback, not a `finally` in _run: a task cancelled before its
        # first step never runs its body, yet its slot must come back.
        task.add_done_callback(lambda _, rid=request.id: self._finished(rid))

    async def on_oversized(self) -> None:
        error = NativeError(
            Code.REQUEST_TOO_LARGE, f"requests are limited to {MAX_REQUEST_BYTES} bytes"
        )
        await self._send(encode_error(None, error))

    def cancel(self, request_id: int) -> bool:
        task = self._tasks.get(request_id)
        if task is None or task.done():
            return False
        self._adapter.note_cancel(request_id, Code.CANCELLED)
        task.cancel()
        return True

    def task(self, request_id: int) -> asyncio.Task[None] | None:
        return self._tasks.get(request_id)

    async def _run(self, request: Request) -> None:
        await self._send(await self._answer(request))

    def _finished(self, request_id: int) -> None:
        self._tracker.finish(request_id)
        self._tasks.pop(request_id, None)
        self._slots.release()

    async def _answer(self, request: Request) -> bytes:
        """The encoded answer (a cancellation by `close` propagates: nobody waits)."""
        try:
            result = await self._adapter.handle(request)
            data = encode_ok(request.id, result)
            if len(data) > MAX_RESPONSE_BYTES:
                data = encode_error(
                    request.id, NativeError(Code.INTERNAL_ERROR, "the response exceeds 4 MiB")
                )
        except NativeError as exc:
            data = encode_error(request.id, exc)
        except asyncio.CancelledError:
            if self._closing:
                raise
            data = encode_error(request.id, NativeError(Code.CANCELLED, "cancelled"))
        except Exception:
            log.exception("request %d (%s) failed", request.id, request.method)
            data = encode_error(request.id, NativeError(Code.INTERNAL_ERROR, "internal error"))
        finally:
            self._tracker.finish(request.id)
        return data

    async def close(self) -> None:
        """Stop accepting; cancel what still runs (the process is ending)."""
        self._closing = True
        tasks = list(self._tasks.values())
        for request_id in list(self._tasks):
            self._adapter.note_cancel(request_id, Code.SHUTTING_DOWN)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
