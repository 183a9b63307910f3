"""A deadline heap with lazy invalidation.

Owners (agent links, sessions) know their own current deadline; the heap only
remembers candidate wake-ups. A popped entry fires only if it still equals the
owner's deadline, so re-arming never needs to find and remove old entries.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Timers(Generic[T]):
    def __init__(self, due: Callable[[T], float | None]) -> None:
        self._due = due
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        #: Set when a deadline was armed; a driver that sleeps until the
        #: next deadline re-reads it then, and clears the flag.
        self.dirty = False

    def arm(self, owner: T) -> None:
        """Note `owner`'s current deadline (call after changing it)."""
        when = self._due(owner)
        if when is not None:
            heapq.heappush(self._heap, (when, next(self._seq), owner))
            self.dirty = True

    def next_deadline(self) -> float | None:
        heap = self._heap
        while heap:
            when, _, owner = heap[0]
            if when == self._due(owner):
                return when
            heapq.heappop(heap)
        return None

    def expired(self, now: float) -> Iterator[T]:
        """Owners whose deadline is at or before `now` (each once per arming)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            when, _, owner = heapq.heappop(heap)
            if when == self._due(owner):
                yield owner
