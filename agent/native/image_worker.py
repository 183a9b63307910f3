"""The one image-encoding worker: screenshots jump ahead of queued previews.

PNG encoding of a 1080p frame takes tens of milliseconds; it runs on this thread
so the owner loop keeps handling cancellation and input release meanwhile. Jobs
whose future was cancelled before they started are skipped.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from collections.abc import Callable
from typing import Any

SCREENSHOT = 0
PREVIEW = 1


class ImageWorker:
    def __init__(self) -> None:
        self._queue: list[tuple[int, int, Callable[[], Any], asyncio.Future[Any]]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="native-images", daemon=True)
        self._thread.start()

    def submit(self, priority: int, job: Callable[[], Any]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        with self._cond:
            heapq.heappush(self._queue, (priority, next(self._order), job, future))
            self._cond.notify()
        return future

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                _, _, job, future = heapq.heappop(self._queue)
            if future.cancelled():
                continue
            loop = future.get_loop()
            try:
                result = job()
            except BaseException as exc:
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
