"""Waiting on a condition that an `asyncio.Event` signals may have changed.

What the case peers record (posts, streams, events) sets their `changed` event;
a case waits for a condition over what was recorded, not for a fixed time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any


async def wait_until(changed: asyncio.Event, condition: Callable[[], Any], timeout: float) -> bool:
    """Until `condition()` holds (True) or `timeout` seconds pass (False). The
    condition is read again at each `changed` and at least every half second."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        left = deadline - loop.time()
        if left <= 0:
            return False
        changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), min(left, 0.5))
    return True
