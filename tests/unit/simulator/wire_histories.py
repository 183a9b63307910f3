"""Hand-written histories the way the recorder writes them.

Tests describe what crossed the wire — an agent connecting, its HELLO, the
hub's HELLO_ACK, requests and answers, closes — and the real recorder core
(`wiretap.WireLog`) turns that into records, so the checkers are tested on
exactly the records a run produces. Journal events and client operations are
appended directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap.digest import payload_digest
from tetherbed.simulator.wiretap.log import WireConnection, WireLog
from tetherbed.simulator.wiretap.records import WireRecord, process_of


def frame(kind: str, request_id: str | None, payload: Any, **extra: Any) -> bytes:
    body = {"type": kind, "id": request_id, "ts": 0.0, "version": "1.1", **extra}
    body["payload"] = payload
    return json.dumps(body).encode()


@dataclass
class Link:
    """One connection of one agent, as the recorder saw it."""

    scribe: Scribe
    wire: WireConnection
    #: The `connect` record: the attempt this connection was.
    attempt: Record

    @property
    def conn(self) -> str:
        return self.wire.conn

    def deliver(self, t: float, kind: str, request_id: str, payload: Any) -> Record:
        """A request from the hub reaches the agent."""
        self.wire.message("down", frame(kind, request_id, payload), t)
        return self.scribe.last

    def answer(self, t: float, kind: str, request_id: str, payload: Any) -> Record:
        """The agent answers."""
        self.wire.message("up", frame(kind, request_id, payload, pending_capacity=3), t)
        return self.scribe.last

    def revoke(self, t: float, reason: str = "another_shim_connected") -> Record:
        self.wire.message("down", frame("SESSION_REVOKED", "r1", {"reason": reason}), t)
        return self.scribe.last

    def close(
        self, t: float, code: int | None, direction: str = "down", reason: str = ""
    ) -> Record:
        self.wire.close(direction, code, reason, t)
        return self.scribe.last

    def end(self, t: float, how: str = "closed") -> Record:
        self.wire.end(how, t)
        return self.scribe.last

    def closed_by_hub(self, t: float, code: int) -> Record:
        """A Close from the hub, the agent's reply, the end; returns the hub's Close."""
        close = self.close(t, code, "down")
        self.close(t + 0.001, code, "up")
        self.end(t + 0.002)
        return close


@dataclass
class Scribe:
    history: History = field(default_factory=History)
    logs: dict[str, WireLog] = field(default_factory=dict)

    @property
    def last(self) -> Record:
        return self.history.records[-1]

    def _sink(self, node: str):
        def sink(record: WireRecord) -> None:
            self.history.append(
                record.time,
                process_of(node),
                "event",
                record.f,
                record.value,
                session=record.session,
                machine=record.machine,
            )

        return sink

    def log(self, node: str) -> WireLog:
        if node not in self.logs:
            self.logs[node] = WireLog(node, self._sink(node))
        return self.logs[node]

    def attempt(self, node: str, t: float) -> WireConnection:
        return self.log(node).connect(t)

    def connect(
        self,
        node: str,
        t: float,
        session: str = "s",
        machine: str | None = None,
        *,
        accepted: bool = True,
        capabilities: tuple[str, ...] = ("files",),
        granted: tuple[str, ...] | None = None,
    ) -> Link:
        """An agent connects, says HELLO offering `capabilities` and (when
        `accepted`) gets its HELLO_ACK, granting `granted` when given."""
        wire = self.attempt(node, t)
        attempt = self.last
        wire.upgrade(f"/ws/local-executor/{session}", t + 0.001)
        wire.response(101, t + 0.002)
        hello = {
            "machine_id": machine or node,
            "protocol_version": "1.1",
            "capabilities": list(capabilities),
        }
        wire.message("up", frame("HELLO", "hello", hello), t + 0.003)
        if accepted:
            ack = {"session_id": session, "protocol_version": "1.1", "max_concurrent": 4}
            if granted is not None:
                ack["granted_capabilities"] = list(granted)
            wire.message("down", frame("HELLO_ACK", "hello", ack), t + 0.004)
        return Link(self, wire, attempt)

    def unreachable(self, node: str, t: float, session: str = "s") -> Record:
        """An attempt the recorder could not forward (the hub is down): its `connect`."""
        wire = self.attempt(node, t)
        attempt = self.last
        wire.upgrade(f"/ws/local-executor/{session}", t + 0.001)
        wire.unreachable(t + 0.002)
        wire.end("closed", t + 0.003)
        return attempt

    def event(
        self, t: float, process: str, f: str, session: str | None = None, **value: Any
    ) -> Record:
        return self.history.append(t, process, "event", f, value, session=session)

    def invoke(
        self, t: float, client: str, req: str, kind: str, payload: Any, *, session: str = "s"
    ) -> Record:
        digest = payload_digest(json.dumps(payload).encode())
        return self.history.append(
            t,
            f"client:{client}",
            "invoke",
            kind,
            {"payload": payload, "digest": digest},
            session=session,
            req=req,
        )

    def complete(
        self,
        t: float,
        client: str,
        req: str,
        kind: str,
        answer_type: str,
        *,
        payload: Any,
        outcome: str = "ok",
        session: str = "s",
    ) -> Record:
        value = {"type": answer_type, "digest": payload_digest(json.dumps(payload).encode())}
        if answer_type == "ERROR":
            value["code"] = payload.get("code")
        return self.history.append(
            t, f"client:{client}", outcome, kind, value, session=session, req=req
        )
