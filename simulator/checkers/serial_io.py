"""serial_io: the serial I/O extension kept its rules on every agent link.

Why: the extension (wire/serial_io.py) is only safe if a peer that does not
know it never sees it, and a client can only trust a port's bytes if the
port's state is what the answers say: one opener at a time, closed by a close
or by the device going away, nothing read from a port that is not open, and
the bytes a vanished device had delivered handed over, not lost.

From each agent connection's recording (`wire:<agent>`, the answers in the
order the agent sent them):

- a SERIAL_* request reached a connection whose HELLO did not offer
  `tetherbed.serial_io` or whose HELLO_ACK did not grant it (the hub must
  answer such a request itself);
- a request was answered with another type than the extension names for it
  (SERIAL_OPEN → SERIAL_OPENED, WRITE → WRITTEN, READ → DATA, CLOSE → ACK) or
  ERROR;
- SERIAL_OPENED for a port already open on the connection; SERIAL_WRITTEN or
  SERIAL_DATA for a port that is not open on it (never opened there, closed,
  or gone: SERIAL_PORT_GONE closes it; a new connection starts with none open);
- SERIAL_DATA whose `size_bytes` is not what its data holds or more than
  the read's `max_bytes`, or that ended early (not timed out, below
  `max_bytes`) without the read's terminator at its end;
- SERIAL_PORT_GONE whose `details.received` is not the base64 of
  `details.received_bytes` bytes.

Data longer than the recording keeps (`TEXT_KEPT`) is not measured. No
SERIAL_* request on any link: unknown.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from tetherbed.simulator.checkers.evidence.connections import Connection, connections
from tetherbed.simulator.checkers.evidence.records import fields, integer, text
from tetherbed.simulator.checkers.verdict import Findings, Verdict
from tetherbed.simulator.history import History, Record
from tetherbed.simulator.wiretap import records as wire
from tetherbed.wire import serial_io as x

NAME = "serial_io"

_GONE = str(x.SerialErrorCode.SERIAL_PORT_GONE)
_ANSWERS = {str(kind): str(answer) for kind, answer in x.ANSWERS.items()}
_DEFAULT_MAX_BYTES = x.SerialRead(port="-").max_bytes


@dataclass(slots=True)
class _Link:
    """One connection's ports, as its answers left them."""

    connection: Connection
    #: port → the SERIAL_OPENED that opened it.
    open: dict[str, Record] = field(default_factory=dict)
    #: port → what closed it last (the ACK of a close, a SERIAL_PORT_GONE).
    closed_by: dict[str, Record] = field(default_factory=dict)


def check(history: History) -> Verdict:
    findings = Findings(NAME)
    requests = 0
    for connection in connections(history):
        serial = [r for r in connection.requests if r.kind in _ANSWERS]
        if not serial:
            continue
        requests += len(serial)
        _negotiation(connection, serial[0].frame, findings)
        link = _Link(connection)
        answered = sorted(
            (r for r in serial if r.answer is not None),
            key=lambda r: connection.frames.index(r.answer),  # type: ignore[arg-type]
        )
        for request in answered:
            assert request.answer is not None
            _answer(link, request.kind, request.frame, request.answer, findings)
    if not requests:
        return findings.verdict("", no_evidence="no SERIAL_* request reached any agent")
    return findings.verdict(
        f"{requests} SERIAL_* request(s) reached agents that had negotiated the extension "
        "and were answered as the ports' states allow"
    )


def _negotiation(connection: Connection, first: Record, findings: Findings) -> None:
    hello, ack = connection.hello, connection.hello_ack
    offered = _listed(hello, "capabilities")
    granted = _listed(ack, "granted_capabilities")
    if x.CAPABILITY in offered and x.CAPABILITY in granted:
        return
    missing = "offer" if x.CAPABILITY not in offered else "grant"
    who = "its HELLO does not" if missing == "offer" else "the HELLO_ACK does not"
    findings.add(
        f"{connection.node} {connection.conn}: a SERIAL_* request reached it though "
        f"{who} {missing} {x.CAPABILITY}",
        (first, "the first SERIAL_* request on the connection"),
        (hello if missing == "offer" else ack, "the negotiation"),
    )


def _listed(frame: Record | None, key: str) -> list[Any]:
    if frame is None:
        return []
    payload = fields(frame).get("payload")
    found = payload.get(key) if isinstance(payload, dict) else None
    return found if isinstance(found, list) else []


def _answer(link: _Link, kind: str, request: Record, answer: Record, findings: Findings) -> None:
    asked = _payload(request)
    got = _payload(answer)
    answered = text(fields(answer).get("type"))
    port = text(asked.get("port"))
    where = f"{link.connection.node} {link.connection.conn}"
    if answered == "ERROR":
        if got.get("code") == _GONE:
            _gone(where, request, answer, got, findings)
            if port is not None and port in link.open:
                del link.open[port]
                link.closed_by[port] = answer
        return
    if answered != _ANSWERS[kind]:
        findings.add(
            f"{where}: {kind} was answered with {answered}, not {_ANSWERS[kind]} or ERROR",
            (request, "the request"),
            (answer, "the answer"),
        )
        return
    if port is None:
        return  # the recording kept no port: nothing to follow
    if kind == x.S.SERIAL_OPEN:
        if port in link.open:
            findings.add(
                f"{where}: {port} was opened again while open (a port has one opener)",
                (link.open[port], "the open that holds it"),
                (answer, "a second SERIAL_OPENED"),
            )
        link.open[port] = answer
        link.closed_by.pop(port, None)
        return
    if kind == x.S.SERIAL_CLOSE:
        link.closed_by[port] = answer
        link.open.pop(port, None)
        return
    if port not in link.open:
        before = link.closed_by.get(port)
        state = "closed by the answer shown" if before is not None else "never opened on it"
        findings.add(
            f"{where}: {answered} for {port}, which is not open on this connection ({state})",
            (before, "what closed it"),
            (request, "the request"),
            (answer, "the answer"),
        )
    if kind == x.S.SERIAL_READ:
        _data(where, request, answer, findings, asked=asked)


def _data(
    where: str, request: Record, answer: Record, findings: Findings, *, asked: dict[str, Any]
) -> None:
    got = _payload(answer)
    size = integer(got.get("size_bytes"))
    limit = integer(asked.get("max_bytes"))
    limit = _DEFAULT_MAX_BYTES if limit is None else limit
    data = _bytes_of(got)
    problem = None
    if size is not None and size > limit:
        problem = f"{size} bytes for a read of at most {limit}"
    elif data is not None and size is not None and len(data) != size:
        problem = f"size_bytes {size}, but its data holds {len(data)} bytes"
    elif data is not None and got.get("timed_out") is False and len(data) < limit:
        until = text(asked.get("until"))
        if until is None or not data.endswith(until.encode("utf-8")):
            problem = (
                f"it ended before its deadline with {len(data)} of {limit} bytes, "
                f"without the terminator {until!r} at its end"
            )
    if problem is not None:
        findings.add(
            f"{where}: SERIAL_DATA: {problem}", (request, "the read"), (answer, "its data")
        )


def _gone(
    where: str, request: Record, answer: Record, got: dict[str, Any], findings: Findings
) -> None:
    details = got.get("details") if isinstance(got.get("details"), dict) else {}
    received = text(details.get("received"))
    count = integer(details.get("received_bytes"))
    if received is None or _cut(received):
        return
    try:
        size = len(base64.b64decode(received, validate=True))
    except (binascii.Error, ValueError):
        size = None
    if size is None or (count is not None and size != count):
        findings.add(
            f"{where}: SERIAL_PORT_GONE: details.received is not {count} bytes of base64",
            (request, "the request"),
            (answer, "the answer"),
        )


def _bytes_of(got: dict[str, Any]) -> bytes | None:
    """The data's bytes, when the recording kept all of it and they can be told."""
    data = text(got.get("data"))
    if data is None or _cut(data):
        return None
    if got.get("encoding") == "base64":
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return None
    if "\ufffd" in data:  # the agent replaced bytes that were no UTF-8: sizes differ
        return None
    return data.encode("utf-8")


def _cut(value: str) -> bool:
    """The recording cut this text (`wiretap` keeps TEXT_KEPT characters)."""
    return len(value) >= wire.TEXT_KEPT and value.endswith("…")


def _payload(record: Record) -> dict[str, Any]:
    payload = fields(record).get("payload")
    return payload if isinstance(payload, dict) else {}
