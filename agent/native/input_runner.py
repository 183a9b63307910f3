"""Runs planned input steps: one sequence at a time, timed by the owner loop.

Each blocking driver call runs on the single input thread; waits between steps are
`asyncio.sleep` on the owner loop, so cancel, disconnect, pause or a display change
can stop a drag between two points and release what it holds. Further sequences
wait their turn (FIFO, at most `max_waiting`); beyond that they are refused with
`INPUT_BUSY` before anything is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tetherbed.agent.native.actions import Step
from tetherbed.agent.native.errors import Code, NativeError

MAX_WAITING = 8


@dataclass(slots=True)
class Progress:
    """How far a sequence got; `sent` decides between failed_before_submit and unknown."""

    sent: bool = False
    started: bool = False


class InputRunner:
    def __init__(self, driver: Any, *, max_waiting: int = MAX_WAITING) -> None:
        self._driver = driver
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="native-input")
        self._turn = asyncio.Lock()
        self._waiting = 0
        self._max_waiting = max_waiting

    async def run(self, steps: list[Step], progress: Progress, admit: Callable[[], None]) -> None:
        """Run `steps`; `admit()` re-checks permission when the sequence's turn comes.

        Cancellation releases held input before the CancelledError propagates.
        Driver failures propagate; `progress.sent` tells whether input may have landed.
        """
        if self._waiting >= self._max_waiting:
            raise NativeError(Code.INPUT_BUSY, "too many input sequences are waiting")
        self._waiting += 1
        try:
            await self._turn.acquire()
        finally:
            self._waiting -= 1
        try:
            admit()
            progress.started = True
            loop = asyncio.get_running_loop()
            for step in steps:
                if step.op == "wait":
                    await asyncio.sleep(step.seconds)
                    continue
                progress.sent = True  # a failed send may still have reached the display
                await loop.run_in_executor(self._executor, _perform, self._driver, step)
        except asyncio.CancelledError:
            if progress.sent:
                await asyncio.shield(self.release())
            raise
        except BaseException:
            if progress.sent:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.release())
            raise
        finally:
            self._turn.release()

    async def release(self) -> None:
        """Let go of every held button and key (ordered after the step in flight)."""
        await asyncio.get_running_loop().run_in_executor(None, self._driver.release_all)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _perform(driver: Any, step: Step) -> None:
    op = step.op
    if op == "move":
        driver.move(step.x, step.y)
    elif op == "click":
        driver.click(step.x, step.y, button=step.button, count=step.count)
    elif op == "scroll":
        driver.scroll(step.x, step.y, step.direction, step.ticks)
    elif op == "down":
        driver.button_down(step.button, step.x, step.y)
    elif op == "up":
        driver.button_up(step.button, step.x, step.y)
    elif op == "key":
        driver.key(step.key)
    elif op == "hotkey":
        driver.hotkey(list(step.keys))
    elif op == "type":
        driver.type_text(step.text)
    else:  # pragma: no cover - plan() produces only the ops above
        raise ValueError(f"unknown step {op}")
