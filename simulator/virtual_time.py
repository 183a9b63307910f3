"""An asyncio event loop that runs in virtual time.

`loop.time()` is a number the loop moves itself: whenever every task is
blocked and nothing is ready, time jumps straight to the next timer. A 60 s
reconnect backoff therefore costs no real time, and since nothing depends on
how fast the machine is, the same program takes the same steps every run.

Work handed to threads (`asyncio.to_thread`, `run_in_executor`) is real and
takes real time; while any is outstanding, virtual time stands still and the
loop waits for it, so a blocking file operation never lets a timer overtake
it. Real sockets and pipes still work, but time does not wait for them: a
program that needs real I/O to arrive "before" a virtual deadline does not
belong in this loop.

With a seeded generator (`schedule=random.Random(seed)`, as the sim backend
gives it) the loop is also a seeded scheduler. Every callback has an owner
(`OWNER`: the hub, an agent, one direction of a link), and each owner is a
single-threaded process whose own callbacks keep asyncio's first-in,
first-out order; but the callbacks of different owners that are ready in
one iteration — deliveries on different links, timers due at the same
virtual instant, tasks of different nodes — run in an order the generator
picks, and an owner may be held back a few iterations while the others run.
Each link still delivers its messages in order. The same seed picks the
same order every run. Without a generator the loop is plain asyncio.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import gc
import random
import selectors
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

#: Virtual time starts here, so that wall-clock timestamps look plausible.
EPOCH = 1_700_000_000.0


class _VirtualSelector(selectors.BaseSelector):
    """Wraps a real selector; instead of sleeping, it moves the loop's clock."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Any:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        loop = self._loop
        loop.new_iteration()
        if loop.threads_busy:
            # Real work is running: wait for it in real time, time stands still.
            return self._real.select(None if timeout is None or timeout > 0 else 0)
        events = self._real.select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            # Nothing scheduled at all: only real I/O can wake us.
            return self._real.select(None)
        loop.advance(timeout)
        return []


#: Who a callback belongs to: the node of the simulation whose code scheduled
#: it ("hub", an agent's name, one direction of a link). Tasks inherit it from
#: the context they were created in, as every asyncio callback does.
OWNER: contextvars.ContextVar[str] = contextvars.ContextVar("tetherbed_sim_owner", default="")
#: The seeded scheduler holds a node back, one time in HOLD_ODDS, for up to
#: HOLD_MAX loop iterations (no virtual time passes meanwhile): a longer chain
#: of callbacks in another node may then overtake a shorter one, as when a
#: busy process lets others run first.
HOLD_ODDS = 3
HOLD_MAX = 8


#: The garbage collector's thresholds while a big simulation runs.
GC_THRESHOLDS = (50_000, 50, 1000)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect garbage less often meanwhile (the old thresholds come back after).

    A big run keeps hundreds of thousands of records and tasks alive; with the
    default thresholds the collector rescans them so often that it costs more
    than the run (a third of a 2,000-agent storm, growing faster than the
    run). Cycles are still collected, only less often.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def owned_by(owner: str) -> contextvars.Context:
    """A context whose callbacks and tasks the seeded scheduler counts as `owner`'s."""
    context = contextvars.copy_context()
    context.run(OWNER.set, owner)
    return context


class _SeededReady(collections.deque):  # type: ignore[type-arg]
    """The loop's ready queue, ordered once per iteration by a seeded generator.

    asyncio's `_run_once` counts the ready callbacks, then pops that many from
    the left. The first pop of an iteration plans them: callbacks are grouped
    by owner (each node is one single-threaded process, so its own callbacks
    keep asyncio's first-in, first-out order), the groups are merged in a
    seeded random order, and a group may be held back: its callbacks stay
    queued for a later iteration while a cancelled placeholder takes each of
    their turns (asyncio skips cancelled handles). What callbacks add
    meanwhile waits for the next iteration, as asyncio does.
    """

    def __init__(
        self, rng: random.Random, placeholder: asyncio.Handle, loop: VirtualTimeLoop
    ) -> None:
        super().__init__()
        self.rng = rng
        self._loop = loop
        self.fresh = False
        self._placeholder = placeholder
        #: This iteration's turns, handed out by `popleft`.
        self._turns: collections.deque[Any] = collections.deque()
        #: Iterations each held owner still waits.
        self._held: dict[str, int] = {}

    def popleft(self) -> Any:
        if self.fresh:
            self.fresh = False
            self._plan()
        if self._turns:
            return self._turns.popleft()
        return super().popleft()

    def _plan(self) -> None:
        batch = list(self)
        self.clear()
        groups: dict[str, list[Any]] = {}
        for handle in batch:
            groups.setdefault(handle._context.get(OWNER, ""), []).append(handle)
        if len(groups) < 2 or self._loop.is_stopping:
            self._turns.extend(batch)
            return
        rng, held = self.rng, self._held
        running: list[list[Any]] = []
        waiting: list[Any] = []
        for owner, handles in groups.items():
            left = held.get(owner)
            if left is None:
                left = rng.randint(1, HOLD_MAX) if rng.randrange(HOLD_ODDS) == 0 else 0
            if left > 0:
                held[owner] = left - 1
                waiting.extend(handles)
            else:
                held.pop(owner, None)
                running.append(handles)
        if not running:  # nothing else would run: holding back gains nothing
            running = list(groups.values())
            waiting = []
            held.clear()
        # A seeded merge of the groups, each in its own order.
        picks = [n for n, handles in enumerate(running) for _ in handles]
        rng.shuffle(picks)
        heads = [0] * len(running)
        for n in picks:
            self._turns.append(running[n][heads[n]])
            heads[n] += 1
        self._turns.extend([self._placeholder] * len(waiting))
        self.extend(waiting)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, start: float = 0.0, *, schedule: random.Random | None = None) -> None:
        self._now = start
        self._threads_busy = 0
        super().__init__(selector=_VirtualSelector(self))
        self._seeded: _SeededReady | None = None
        if schedule is not None:
            placeholder = asyncio.Handle(_nothing, (), self)
            placeholder.cancel()
            self._seeded = _SeededReady(schedule, placeholder, self)
            self._seeded.extend(self._ready)
            self._ready = self._seeded

    fewer_collections = staticmethod(fewer_collections)

    @staticmethod
    def owned_by(owner: str) -> contextvars.Context:
        """A context whose callbacks and tasks the seeded scheduler counts as `owner`'s."""
        return owned_by(owner)

    @property
    def is_stopping(self) -> bool:
        """`run_until_complete`'s main is done: whatever is ready runs now."""
        return bool(self._stopping)

    def new_iteration(self) -> None:
        """The loop is about to collect this iteration's ready callbacks."""
        if self._seeded is not None:
            self._seeded.fresh = True

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    @property
    def threads_busy(self) -> int:
        return self._threads_busy

    def run_in_executor(
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future = super().run_in_executor(executor, func, *args)
        self._threads_busy += 1
        future.add_done_callback(self._thread_done)
        return future

    def _thread_done(self, _future: asyncio.Future[Any]) -> None:
        self._threads_busy -= 1


def _nothing() -> None:
    """The placeholder a held-back callback leaves in its turn (never runs)."""


class VirtualClock:
    """The `Clock` of code running on a VirtualTimeLoop."""

    def __init__(self, loop: VirtualTimeLoop, epoch: float = EPOCH) -> None:
        self._loop = loop
        self._epoch = epoch

    def time(self) -> float:
        return self._epoch + self._loop.time()

    def monotonic(self) -> float:
        return self._loop.time()


def run_virtual(main: Coroutine[Any, Any, T], *, start: float = 0.0) -> T:
    """Run `main` to completion on a fresh VirtualTimeLoop."""
    loop = VirtualTimeLoop(start)
    try:
        return loop.run_until_complete(main)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
