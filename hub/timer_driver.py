"""Wakes the hub core at its next deadline on an asyncio loop.

The core only answers "when is the next deadline" and "what is due now";
this keeps one loop timer armed at the earliest deadline and hands what
`on_timer` returns to the driver's `apply` (which never waits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tetherbed.hub.actions import Actions
from tetherbed.hub.core import HubCore


class CoreTimer:
    def __init__(self, core: HubCore, apply: Callable[[Actions], None]) -> None:
        self._core = core
        self._apply = apply
        self._handle: asyncio.TimerHandle | None = None
        self._at: float | None = None

    def reschedule(self) -> None:
        """Call after the core armed a deadline (`core.timers.dirty`)."""
        self._core.timers.dirty = False
        deadline = self._core.next_deadline()
        if deadline is None or (self._at is not None and self._at <= deadline):
            return
        if self._handle is not None:
            self._handle.cancel()
        self._at = deadline
        self._handle = asyncio.get_running_loop().call_at(deadline, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._at = None
        self._apply(self._core.on_timer())
        self.reschedule()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._at = None
