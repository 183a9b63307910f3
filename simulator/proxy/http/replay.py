"""A request sent again by the proxy itself: `replay` rules' copies.

The copy goes to the upstream on a connection of its own (an intermediary
retrying a request does not reuse the client's), and its answer is read and
thrown away, so nothing of it reaches the connecting side or its recorder.
Bounded: it gives up after `timeout` seconds, whatever the server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from tetherbed.simulator.proxy.http.parser import HttpParser

log = logging.getLogger(__name__)
READ_SIZE = 64 * 1024
Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


async def replay_request(open_connection: Opener, data: bytes, *, timeout: float = 30.0) -> None:
    """Send `data` (whole requests) on a connection `open_connection()` makes,
    read the answers to their end, close."""
    methods = [p.head.method or "GET" for p in HttpParser("request").feed(data) if p.head]
    answers = HttpParser("response")
    for method in methods:
        answers.expect(method)
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await open_connection()
            writer.write(data)
            await writer.drain()
            ended = 0
            while ended < len(methods):
                chunk = await reader.read(READ_SIZE)
                if not chunk:
                    break
                ended += sum(1 for part in answers.feed(chunk) if part.kind == "end")
    except (OSError, TimeoutError) as exc:
        log.debug("replaying a request: %s", exc)
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
