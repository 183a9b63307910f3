"""serial_io: the extension's rules judged from hand-written agent links.

Each broken history is one bug a hub or an agent could have; the checker
names it and blames the frames that show it. The well-formed history is the
unplug scenario's, frame for frame.
"""

from __future__ import annotations

import base64

from tests.unit.simulator.wire_histories import Link, Scribe
from tetherbed.simulator.checkers import serial_io

CAP = "tetherbed.serial_io"
PORT = "/dev/ttyTB0"


def negotiated(scribe: Scribe, t: float = 0.0) -> Link:
    return scribe.connect(
        "laptop",
        t,
        capabilities=("files", "hardware_serial", CAP),
        granted=("files", "hardware_serial", CAP),
    )


def exchange(link: Link, t: float, rid: str, request: tuple[str, dict], answer: tuple[str, dict]):
    """A request on PORT reaches the agent, which answers it."""
    kind, payload = request
    link.deliver(t, kind, rid, {"port": PORT, **payload})
    return link.answer(t + 0.01, answer[0], rid, answer[1])


def gone(received: bytes = b"") -> dict:
    details: dict = {"port": PORT}
    if received:
        details["received"] = base64.b64encode(received).decode()
        details["received_bytes"] = len(received)
    return {"code": "SERIAL_PORT_GONE", "message": "gone", "fatal": False, "details": details}


def test_open_read_gone_reopen_close_passes() -> None:
    scribe = Scribe()
    link = negotiated(scribe)
    exchange(
        link, 1, "o", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    exchange(
        link,
        2,
        "w",
        ("SERIAL_WRITE", {"data": "PING\n"}),
        ("SERIAL_WRITTEN", {"port": PORT, "bytes_written": 5}),
    )
    exchange(
        link,
        3,
        "r",
        ("SERIAL_READ", {"max_bytes": 64, "timeout_ms": 20000}),
        ("ERROR", gone(b"PONG\r\n")),
    )
    not_open = {"code": "SERIAL_PORT_NOT_OPEN", "message": "no", "fatal": False}
    exchange(link, 4, "r2", ("SERIAL_READ", {}), ("ERROR", not_open))
    exchange(
        link, 5, "o2", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    data = {
        "port": PORT,
        "data": "PONG\r\n",
        "encoding": "utf-8",
        "size_bytes": 6,
        "timed_out": False,
    }
    exchange(link, 6, "r3", ("SERIAL_READ", {"until": "\r\n"}), ("SERIAL_DATA", data))
    exchange(link, 7, "c", ("SERIAL_CLOSE", {}), ("ACK", {"ok": True}))
    verdict = serial_io.check(scribe.history)
    assert verdict.ok and not verdict.unknown, verdict.summary
    assert verdict.summary.startswith("7 SERIAL_* request(s)")


def test_no_serial_traffic_is_unknown() -> None:
    scribe = Scribe()
    negotiated(scribe)
    assert serial_io.check(scribe.history).unknown


def test_a_request_to_an_agent_that_did_not_negotiate_fails() -> None:
    scribe = Scribe()
    link = scribe.connect("laptop", 0, capabilities=("files", "hardware_serial"))
    exchange(link, 1, "o", ("SERIAL_OPEN", {}), ("ERROR", {"code": "FEATURE_NOT_SUPPORTED"}))
    verdict = serial_io.check(scribe.history)
    assert not verdict.ok
    assert "its HELLO does not offer tetherbed.serial_io" in verdict.summary
    roles = {e["role"] for e in verdict.evidence}
    assert roles == {"the first SERIAL_* request on the connection", "the negotiation"}
    offered_not_granted = Scribe()
    link = offered_not_granted.connect("laptop", 0, capabilities=("files", CAP), granted=("files",))
    exchange(
        link, 1, "o", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    assert "the HELLO_ACK does not grant" in serial_io.check(offered_not_granted.history).summary


def test_data_from_a_port_that_is_gone_or_closed_or_never_opened_fails() -> None:
    data = {"port": PORT, "data": "", "encoding": "utf-8", "size_bytes": 0, "timed_out": True}
    scribe = Scribe()
    link = negotiated(scribe)
    exchange(
        link, 1, "o", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    exchange(link, 2, "r", ("SERIAL_READ", {}), ("ERROR", gone()))
    exchange(link, 3, "r2", ("SERIAL_READ", {}), ("SERIAL_DATA", data))  # the bug
    verdict = serial_io.check(scribe.history)
    assert not verdict.ok and "not open on this connection (closed by" in verdict.summary
    assert [e["role"] for e in verdict.evidence] == ["what closed it", "the request", "the answer"]

    fresh = Scribe()
    first = negotiated(fresh)
    exchange(
        first, 1, "o", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    first.closed_by_hub(2, 1001)
    second = negotiated(fresh, 3)  # a new connection opens no port
    exchange(
        second, 4, "w", ("SERIAL_WRITE", {"data": "x"}), ("SERIAL_WRITTEN", {"bytes_written": 1})
    )
    assert "never opened on it" in serial_io.check(fresh.history).summary


def test_a_second_opener_and_a_wrong_answer_type_fail() -> None:
    scribe = Scribe()
    link = negotiated(scribe)
    exchange(
        link, 1, "o", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    exchange(
        link, 2, "o2", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    exchange(link, 3, "c", ("SERIAL_CLOSE", {}), ("SERIAL_WRITTEN", {"bytes_written": 0}))
    summary = serial_io.check(scribe.history).summary
    assert "opened again while open" in summary
    assert "SERIAL_CLOSE was answered with SERIAL_WRITTEN, not ACK or ERROR" in summary


def test_data_that_does_not_add_up_fails() -> None:
    scribe = Scribe()
    link = negotiated(scribe)
    exchange(
        link, 1, "o", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )

    def read(rid: str, asked: dict, **got: object) -> None:
        answer = {"port": PORT, "encoding": "utf-8", "timed_out": False, **got}
        exchange(link, 2, rid, ("SERIAL_READ", asked), ("SERIAL_DATA", answer))

    read("size", {"until": "\n"}, data="ab\n", size_bytes=5)
    read("long", {"max_bytes": 2}, data="abc", size_bytes=3)
    read("early", {"until": "\r\n", "max_bytes": 64}, data="PON", size_bytes=3)
    read(
        "b64",
        {"max_bytes": 4},
        data=base64.b64encode(b"\xff\xfe\x00\x01").decode(),
        size_bytes=4,
        encoding="base64",
    )
    summary = serial_io.check(scribe.history).summary
    assert summary.startswith("3 violations")
    assert "size_bytes 5, but its data holds 3 bytes" in summary
    assert "3 bytes for a read of at most 2" in summary
    assert (
        "ended before its deadline with 3 of 64 bytes, without the terminator '\\r\\n'" in summary
    )


def test_a_gone_whose_received_bytes_do_not_add_up_fails() -> None:
    scribe = Scribe()
    link = negotiated(scribe)
    exchange(
        link, 1, "o", ("SERIAL_OPEN", {}), ("SERIAL_OPENED", {"port": PORT, "baud_rate": 9600})
    )
    broken = gone(b"PONG\r\n")
    broken["details"]["received_bytes"] = 9
    exchange(link, 2, "r", ("SERIAL_READ", {}), ("ERROR", broken))
    assert "details.received is not 9 bytes of base64" in serial_io.check(scribe.history).summary
