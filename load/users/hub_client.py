"""A client of one session through the hub, on gevent: requests out, answers matched.

It speaks Tetherbed's client API (`/v1/sessions/{id}/client`, the spec's
envelopes), which is also what the adapter bridge (load/bridge.py) offers in
front of any other hub. One reader greenlet matches answers to requests by id
and reports each request once, with its latency, through `report`:

- closed loop: `call` sends and waits for the answer (a user keeps
  `in_flight` of them going);
- open loop: `send` never waits, and latency counts from the moment the
  request was *due*, so a slow hub cannot hide behind fewer requests.

A request without an answer after `timeout` is reported failed once ("lost");
an answer nobody waits for (a second answer, or one for an id never sent) is
reported failed too. With `legs`, every request and answer is also written as
history records (invoke, ok/fail/info), the client leg of the recording the
takeover profile is judged from.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
import msgspec
from gevent.event import AsyncResult

from tetherbed.load.mix import Payloads, expected_answer
from tetherbed.load.users.client_legs import ClientLegs
from tetherbed.load.users.websocket_link import Closed, Link, Refused
from tetherbed.wire.catalog import STREAMING_RESPONSES

#: Error codes that say "the agent went away under this request": the honest
#: answer to a request caught by a takeover (reported apart, not as failures,
#: where the profile expects takeovers).
REPLACED_CODES = frozenset({"OUTCOME_UNKNOWN", "AGENT_DISCONNECTED"})
#: The answer that means "no agent serves this session (yet)".
NOT_SERVED = "AGENT_NOT_CONNECTED"
CONNECTION_LOST = "CONNECTION_LOST"
#: How often unanswered requests are checked against their deadline.
SWEEP_SECONDS = 0.25
_STREAMING = frozenset(str(kind) for kind in STREAMING_RESPONSES)

#: report(request_type, name, seconds, response_length, error or None)
Report = Callable[[str, str, float, int, Exception | None], None]


class AnswerError(Exception):
    """The hub or agent answered with ERROR (or with the wrong type)."""


class Lost(Exception):
    """No answer within the deadline."""


class _Envelope(msgspec.Struct):
    type: str = ""
    id: Any = None
    payload: msgspec.Raw = msgspec.Raw(b"{}")


class _Code(msgspec.Struct):
    code: str = ""


_decode = msgspec.json.Decoder(_Envelope).decode
_decode_code = msgspec.json.Decoder(_Code).decode


def _error_code(payload: msgspec.Raw) -> str:
    try:
        return _decode_code(payload).code
    except msgspec.MsgspecError:
        return "ERROR"


@dataclass(slots=True)
class _Pending:
    kind: str
    #: perf_counter() when it was due (open loop) or sent (closed loop).
    started: float
    done: AsyncResult | None = None
    expected: str = ""
    #: A readiness probe: its answer goes to `done` (as the error code, or ""),
    #: and is not reported.
    probe: bool = False


@dataclass
class ClientStats:
    sent: int = 0
    answered: int = 0
    lost: int = 0
    strays: int = 0
    late: int = 0
    replaced: int = 0
    by_code: dict[str, int] = field(default_factory=dict)


class HubClient:
    """One client connection to one session."""

    def __init__(
        self,
        link: Link,
        *,
        session: str,
        tag: str,
        payloads: Payloads,
        report: Report,
        timeout: float,
        takeovers_expected: bool = False,
        echo: bool = False,
        legs: ClientLegs | None = None,
    ) -> None:
        self.link = link
        self.session = session
        self.tag = tag
        self.payloads = payloads
        self.report = report
        self.timeout = timeout
        self.takeovers_expected = takeovers_expected
        self.echo = echo
        self.legs = legs
        self.stats = ClientStats()
        self.pending: dict[str, _Pending] = {}
        self.closed: Closed | None = None
        self._ids = itertools.count(1)
        self._expired: set[str] = set()
        self._reader = gevent.spawn(self._read)
        self._sweeper = gevent.spawn(self._sweep)

    @classmethod
    def open(
        cls,
        base_url: str,
        token: str,
        session: str,
        *,
        patience: float = 30.0,
        **kwargs: Any,
    ) -> HubClient:
        """Open the session's client endpoint; a 404 (no agent has claimed the
        session yet) is retried for `patience` seconds."""
        url = f"{base_url.rstrip('/')}/v1/sessions/{session}/client"
        deadline = time.monotonic() + patience
        while True:
            try:
                link = Link.open(url, headers={"Authorization": f"Bearer {token}"})
                break
            except Refused as exc:
                if exc.status != 404 or time.monotonic() >= deadline:
                    raise
                gevent.sleep(0.2)
        return cls(link, session=session, **kwargs)

    # --- sending ------------------------------------------------------------------

    def _new_id(self) -> str:
        return f"{self.tag}-{next(self._ids)}"

    def call(self, kind: str) -> bool:
        """Closed loop: send one request and wait for its answer; True if it succeeded."""
        done: AsyncResult = AsyncResult()
        self._send(kind, time.perf_counter(), done)
        return bool(done.get())

    def send(self, kind: str, due: float) -> None:
        """Open loop: send one request that was due at `due` (perf_counter)."""
        self._send(kind, due, None)

    def wait_served(self, patience: float) -> float:
        """Until an agent serves the session: FILE_STAT probes, unreported, until
        one is answered with anything but AGENT_NOT_CONNECTED. The seconds it
        took; `Lost` after `patience` seconds. (A hub admits a client to a
        session as soon as it exists, which can be before its agent's HELLO.)"""
        started = time.perf_counter()
        deadline = time.monotonic() + patience
        while True:
            done: AsyncResult = AsyncResult()
            self._send("FILE_STAT", time.perf_counter(), done, probe=True)
            try:
                code = done.get(timeout=max(deadline - time.monotonic(), 0.1))
            except gevent.Timeout:
                code = NOT_SERVED
            if code == CONNECTION_LOST:
                raise Lost(f"the client connection of {self.session} closed: {self.closed}")
            if code != NOT_SERVED:
                return time.perf_counter() - started
            if time.monotonic() >= deadline:
                raise Lost(f"no agent served {self.session} within {patience:g} s")
            gevent.sleep(0.2)

    def _send(
        self, kind: str, started: float, done: AsyncResult | None, *, probe: bool = False
    ) -> None:
        if self.closed is not None:
            if probe:
                assert done is not None
                done.set(CONNECTION_LOST)
                return
            self.report("ws", kind, 0.0, 0, self.closed)
            if done is not None:
                done.set(False)
            return
        request_id = self._new_id()
        payload = self.payloads.payload(kind, request_id)
        frame = b'{"type":"%s","id":"%s","ts":%.3f,"version":"1.1","payload":%s}' % (
            kind.encode(),
            request_id.encode(),
            time.time(),
            payload,
        )
        expected = kind if self.echo else expected_answer(kind)
        self.pending[request_id] = _Pending(kind, started, done, expected, probe)
        if self.legs is not None:
            self.legs.invoke(self.session, request_id, kind, payload)
        self.stats.sent += 1 if not probe else 0
        try:
            self.link.send(frame)
        except Closed as closed:
            self._connection_lost(closed)

    @property
    def outstanding(self) -> int:
        return len(self.pending)

    # --- answers ------------------------------------------------------------------

    def _read(self) -> None:
        link = self.link
        clock = time.perf_counter
        while True:
            try:
                data = link.recv()
            except Closed as closed:
                self._connection_lost(closed)
                return
            now = clock()
            try:
                envelope = _decode(data)
            except msgspec.MsgspecError:
                self.report("ws", "undecodable answer", 0.0, len(data), AnswerError("not JSON"))
                continue
            self._answer(envelope, len(data), now)

    def _answer(self, envelope: _Envelope, size: int, now: float) -> None:
        kind, request_id = envelope.type, envelope.id
        if kind in _STREAMING:
            return
        pending = self.pending.pop(request_id, None) if isinstance(request_id, str) else None
        code = _error_code(envelope.payload) if kind == "ERROR" else ""
        if self.legs is not None and isinstance(request_id, str):
            request = pending.kind if pending is not None else kind
            self.legs.complete(
                self.session,
                request_id,
                request=request,
                kind=kind,
                code=code,
                payload=bytes(envelope.payload),
            )
        if pending is None:
            if isinstance(request_id, str) and request_id in self._expired:
                self._expired.discard(request_id)
                self.stats.late += 1
                return  # already reported lost; the legs keep the late answer
            self.stats.strays += 1
            self.report(
                "ws", "stray answer", 0.0, size, AnswerError(f"{kind} for unknown id {request_id}")
            )
            return
        if pending.probe:
            if pending.done is not None:
                pending.done.set(code)
            return
        self.stats.answered += 1
        name = pending.kind
        error: Exception | None = None
        if kind == "ERROR":
            self.stats.by_code[code] = self.stats.by_code.get(code, 0) + 1
            if self.takeovers_expected and code in REPLACED_CODES:
                self.stats.replaced += 1
                name = f"{pending.kind} (agent replaced)"
            else:
                error = AnswerError(code or "ERROR")
        elif kind != pending.expected:
            error = AnswerError(f"{kind} instead of {pending.expected}")
        self.report("ws", name, now - pending.started, size, error)
        if pending.done is not None:
            pending.done.set(error is None)

    def _sweep(self) -> None:
        """Requests past their deadline are reported lost, once."""
        while self.closed is None:
            gevent.sleep(SWEEP_SECONDS)
            limit = time.perf_counter() - self.timeout
            for request_id in [i for i, p in self.pending.items() if p.started < limit]:
                pending = self.pending.pop(request_id)
                self._expired.add(request_id)
                if pending.probe:
                    if pending.done is not None:
                        pending.done.set("LOST")
                    continue
                self.stats.lost += 1
                self.report(
                    "ws", pending.kind, self.timeout, 0, Lost(f"no answer in {self.timeout:g} s")
                )
                if pending.done is not None:
                    pending.done.set(False)

    def _connection_lost(self, closed: Closed) -> None:
        if self.closed is not None:
            return
        self.closed = closed
        for pending in self.pending.values():
            if pending.probe:
                if pending.done is not None:
                    pending.done.set(CONNECTION_LOST)
                continue
            self.stats.lost += 1
            self.report("ws", pending.kind, 0.0, 0, closed)
            if pending.done is not None:
                pending.done.set(False)
        self.pending.clear()

    def close(self) -> None:
        """Stop: what is still unanswered is neither reported nor waited for."""
        self._sweeper.kill(block=False)
        for pending in self.pending.values():
            if pending.done is not None:
                pending.done.set(False)
        self.pending.clear()
        self.closed = self.closed or Closed(1000, "client closed")
        self.link.close()
        self._reader.kill(block=False)
