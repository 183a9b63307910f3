"""Records a run's history as it happens, and lets the runner wait on it.

Backends, nodes and clients append records; the runner's `expect` steps wait
for a record matching a condition, with a timeout measured on the backend's
clock (virtual on the sim backend).

Records are indexed as they arrive (by process, and which of each link's
connections the hub has accepted), and a waiter may name the processes it
watches: a run's cost grows with its records, not with records times polls
(a reconnect storm of 10,000 agents polls tens of thousands of times).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from typing import Any

from tetherbed.simulator.history import History, Record, RecordType
from tetherbed.simulator.wiretap.dsh.log import DshWireLog
from tetherbed.simulator.wiretap.log import WireLog
from tetherbed.simulator.wiretap.records import (
    CLOSE,
    DOWN,
    END,
    FRAME,
    PREFIX,
    WireRecord,
    process_of,
)

Predicate = Callable[[Record], bool]
#: A waiter: its condition, the processes it watches (None: all), its future.
_Waiter = tuple[Predicate, frozenset[str] | None, "asyncio.Future[Record]"]


class RecordIndex:
    """What the runner asks of a history over and over, kept up to date as
    records arrive instead of searched for each time."""

    def __init__(self) -> None:
        self.by_process: dict[str, list[Record]] = {}
        #: Per wire process (`wire:<node>`): the connections the hub accepted
        #: (HELLO_ACK reached the node) that no close or end has finished.
        self.served: dict[str, dict[Any, None]] = {}

    def add(self, record: Record) -> None:
        process = record.process
        self.by_process.setdefault(process, []).append(record)
        if record.type != "event" or not process.startswith(PREFIX):
            return
        value = record.value if isinstance(record.value, dict) else {}
        if record.f == FRAME:
            if value.get("type") == "HELLO_ACK" and value.get("dir") == DOWN:
                self.served.setdefault(process, {})[value.get("conn")] = None
        elif record.f in (CLOSE, END):
            self.served.get(process, {}).pop(value.get("conn"), None)


class Recorder:
    def __init__(self, now: Callable[[], float]) -> None:
        self.history = History()
        self.now = now
        #: Rewrites payloads before they are digested or kept (the sim backend's
        #: `wiretap.scrub.Scrubber`, for byte-identical histories); None: as they are.
        self.scrub: Callable[[bytes], bytes] | None = None
        self.index = RecordIndex()
        #: Waiters that watch every process, and those that watch only some.
        self._waiters: list[_Waiter] = []
        self._watching: dict[str, list[_Waiter]] = {}

    def record(
        self,
        process: str,
        type: RecordType,
        f: str,
        value: Any = None,
        *,
        session: str | None = None,
        machine: str | None = None,
        req: str | None = None,
        time: float | None = None,
    ) -> Record:
        record = self.history.append(
            self.now() if time is None else time,
            process,
            type,
            f,
            value,
            session=session,
            machine=machine,
            req=req,
        )
        self.index.add(record)
        if self._waiters or self._watching:
            self._wake(record)
        return record

    def event(
        self,
        process: str,
        f: str,
        value: Any = None,
        *,
        session: str | None = None,
        machine: str | None = None,
        time: float | None = None,
    ) -> Record:
        return self.record(
            process, "event", f, value or {}, session=session, machine=machine, time=time
        )

    def wire_log(self, node: str, *, leg: str = "agent") -> WireLog:
        """The wire recorder of one node's link, writing into this history."""
        process = process_of(node)

        def sink(record: WireRecord) -> None:
            self.event(
                process,
                record.f,
                record.value,
                session=record.session,
                machine=record.machine,
                time=record.time,
            )

        return WireLog(node, sink, leg=leg, scrub=self.scrub)

    def dsh_wire_log(self, node: str) -> DshWireLog:
        """The wire recorder of an SSE agent's link (HTTP and SSE), into this history."""
        process = process_of(node)

        def sink(record: WireRecord) -> None:
            self.event(process, record.f, record.value, time=record.time)

        return DshWireLog(node, sink, scrub=self.scrub)

    def find(
        self,
        predicate: Predicate,
        start: int = 0,
        *,
        processes: Collection[str] | None = None,
    ) -> Record | None:
        """The first record from index `start` on that matches (among `processes`' only)."""
        if processes is None:
            for record in self.history.records[start:]:
                if predicate(record):
                    return record
            return None
        found: Record | None = None
        for process in processes:
            records = self.index.by_process.get(process, [])
            for record in records[_first_at(records, start) :]:
                if found is not None and record.index >= found.index:
                    break
                if predicate(record):
                    found = record
                    break
        return found

    async def next_record(
        self,
        timeout: float,
        predicate: Predicate | None = None,
        *,
        processes: Collection[str] | None = None,
    ) -> Record:
        """The next record appended from now on (matching `predicate`, if given)."""
        start = len(self.history.records)
        return await self.wait_for(
            predicate or _anything, timeout, since=start, processes=processes
        )

    async def wait_for(
        self,
        predicate: Predicate,
        timeout: float,
        *,
        since: int = 0,
        processes: Collection[str] | None = None,
    ) -> Record:
        """The first record from index `since` on (already there or still to come)
        matching `predicate`; with `processes`, only those processes' records
        are looked at, already there or to come."""
        found = self.find(predicate, since, processes=processes)
        if found is not None:
            return found
        future: asyncio.Future[Record] = asyncio.get_running_loop().create_future()
        watched = None if processes is None else frozenset(processes)
        entry: _Waiter = (predicate, watched, future)
        lists = (
            [self._waiters]
            if watched is None
            else [self._watching.setdefault(process, []) for process in sorted(watched)]
        )
        for waiters in lists:
            waiters.append(entry)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            for waiters in lists:
                if entry in waiters:
                    waiters.remove(entry)
            if watched is not None:
                for process in watched:
                    if not self._watching.get(process, True):
                        del self._watching[process]

    def _wake(self, record: Record) -> None:
        if self._waiters:
            for predicate, _, future in list(self._waiters):
                if not future.done() and predicate(record):
                    future.set_result(record)
        watching = self._watching.get(record.process)
        if watching:
            for predicate, _, future in list(watching):
                if not future.done() and predicate(record):
                    future.set_result(record)


def _anything(_record: Record) -> bool:
    return True


def _first_at(records: list[Record], start: int) -> int:
    """The position of the first of `records` (in index order) at index `start` or later."""
    low, high = 0, len(records)
    while low < high:
        middle = (low + high) // 2
        if records[middle].index < start:
            low = middle + 1
        else:
            high = middle
    return low
