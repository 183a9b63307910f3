"""Records a run's history as it happens, and lets the runner wait on it.

Backends, nodes and clients append records; the runner's `expect` steps wait
for a record matching a condition, with a timeout measured on the backend's
clock (virtual on the sim backend).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tetherbed.simulator.history import History, Record, RecordType
from tetherbed.simulator.wiretap.dsh.log import DshWireLog
from tetherbed.simulator.wiretap.log import WireLog
from tetherbed.simulator.wiretap.records import WireRecord, process_of

Predicate = Callable[[Record], bool]


class Recorder:
    def __init__(self, now: Callable[[], float]) -> None:
        self.history = History()
        self.now = now
        #: Rewrites payloads before they are digested or kept (the sim backend's
        #: `wiretap.scrub.Scrubber`, for byte-identical histories); None: as they are.
        self.scrub: Callable[[bytes], bytes] | None = None
        self._waiters: list[tuple[Predicate, asyncio.Future[Record]]] = []

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
        if self._waiters:
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

    def find(self, predicate: Predicate, start: int = 0) -> Record | None:
        for record in self.history.records[start:]:
            if predicate(record):
                return record
        return None

    async def next_record(self, timeout: float, predicate: Predicate | None = None) -> Record:
        """The next record appended from now on (matching `predicate`, if given)."""
        start = len(self.history.records)
        return await self.wait_for(
            lambda r: r.index >= start and (predicate is None or predicate(r)), timeout
        )

    async def wait_for(self, predicate: Predicate, timeout: float) -> Record:
        """The first record (already there or still to come) matching `predicate`."""
        found = self.find(predicate)
        if found is not None:
            return found
        future: asyncio.Future[Record] = asyncio.get_running_loop().create_future()
        entry = (predicate, future)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _wake(self, record: Record) -> None:
        for predicate, future in list(self._waiters):
            if not future.done() and predicate(record):
                future.set_result(record)
