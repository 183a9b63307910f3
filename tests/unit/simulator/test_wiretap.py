"""The wire recorder: bytes and messages in, `wire:<node>` records out."""

from __future__ import annotations

import asyncio
import json
import random

import websockets

from tetherbed.simulator.history import History
from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.proxy.ws.frames import (
    OP_CLOSE,
    OP_PING,
    OP_TEXT,
    build_frame,
    close_payload,
)
from tetherbed.simulator.recorder import Recorder
from tetherbed.simulator.wiretap.digest import payload_digest
from tetherbed.simulator.wiretap.log import WireLog
from tetherbed.simulator.wiretap.records import WireRecord
from tetherbed.simulator.wiretap.stream import StreamTap

MASK = b"\x01\x02\x03\x04"
UPGRADE = (
    b"GET /ws/local-executor/s1 HTTP/1.1\r\nHost: hub\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nAuthorization: Bearer SECRET-TOKEN\r\n\r\n"
)
SWITCHED = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"


def envelope(kind: str, request_id: str, payload: dict) -> bytes:
    return json.dumps({"type": kind, "id": request_id, "ts": 1.0, "payload": payload}).encode()


def label(record: WireRecord) -> object:
    value = record.value
    return value.get("type") or value.get("code") or value.get("path")


def recorded() -> tuple[list[WireRecord], WireLog]:
    records: list[WireRecord] = []
    return records, WireLog("laptop", records.append)


def test_a_byte_stream_becomes_the_records_of_one_connection() -> None:
    records, log = recorded()
    tap = StreamTap(log.connect(0.0))
    hello = envelope("HELLO", "h", {"machine_id": "m1", "capabilities": ["files"]})
    tap.feed("up", UPGRADE + build_frame(OP_TEXT, hello, mask=MASK).raw[:7], 0.1)
    tap.feed("up", build_frame(OP_TEXT, hello, mask=MASK).raw[7:], 0.2)
    ack = envelope("HELLO_ACK", "h", {"session_id": "s1", "max_concurrent": 4})
    tap.feed("down", SWITCHED + build_frame(OP_TEXT, ack).raw, 0.3)
    tap.feed("down", build_frame(OP_PING, b"").raw, 0.4)
    tap.feed("down", build_frame(OP_CLOSE, close_payload(4427, "taken")).raw, 0.5)
    tap.feed("up", build_frame(OP_CLOSE, close_payload(4427, ""), mask=MASK).raw, 0.6)
    tap.end("closed", 0.7)
    kinds = [
        (r.f, r.value.get("type") or r.value.get("code") or r.value.get("path")) for r in records
    ]
    assert kinds == [
        ("connect", None),
        ("upgrade", "/ws/local-executor/s1"),
        ("open", "/ws/local-executor/s1"),
        ("frame", "HELLO"),
        ("frame", "HELLO_ACK"),
        ("frame", "ws.ping"),
        ("close", 4427),
        ("close", 4427),
        ("end", None),
    ]
    hello_record = records[3]
    assert hello_record.value["payload"]["machine_id"] == "m1"
    assert hello_record.value["digest"] == payload_digest(
        b'{"capabilities":["files"],"machine_id":"m1"}'
    )
    assert records[-1].session == "s1" and records[-1].machine == "m1"
    assert records[6].value["by"] == "hub" and records[6].value["first"] is True
    assert records[-1].value["clean"] is True
    assert "SECRET-TOKEN" not in json.dumps([r.value for r in records])


def test_a_plain_request_or_a_refusal_is_recorded_as_such() -> None:
    records, log = recorded()
    probe = StreamTap(log.connect(0.0))
    probe.feed("up", b"GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n", 0.1)
    probe.feed("down", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0.2)
    refused = StreamTap(log.connect(1.0))
    refused.feed("up", UPGRADE, 1.1)
    refused.feed("down", b"HTTP/1.1 401 Unauthorized\r\n\r\n", 1.2)
    assert [(r.f, r.value.get("status")) for r in records if r.f != "connect"] == [
        ("request", None),
        ("response", 200),
        ("upgrade", None),
        ("refused", 401),
    ]
    assert records[-1].value["conn"] == "laptop#2"


def test_what_is_not_http_is_only_connected_and_ended() -> None:
    records, log = recorded()
    tap = StreamTap(log.connect(0.0))
    tap.feed("up", b"\x16\x03\x01\x02\x00tls hello", 0.1)
    tap.feed("down", b"\x16\x03\x03server hello", 0.2)
    tap.end("reset", 0.3)
    assert [r.f for r in records] == ["connect", "end"]
    assert records[-1].value == {"conn": "laptop#1", "leg": "agent", "how": "reset", "clean": False}


def test_the_digest_ignores_how_a_payload_was_encoded() -> None:
    assert payload_digest(b'{"a": 1, "b": [2, 3]}') == payload_digest(b'{"b":[2,3],"a":1}')
    assert payload_digest(b'{"a": 1}') != payload_digest(b'{"a": 2}')
    assert payload_digest(b"\xff not json") == payload_digest(b"\xff not json")


async def test_the_fault_proxy_records_its_connecting_side() -> None:
    async def echo(socket):  # the "hub": answers every message, then closes with 4428
        async for message in socket:
            await socket.send(message)
            await socket.close(4428, "revoked")

    history = History()
    recorder = Recorder(asyncio.get_running_loop().time)
    recorder.history = history
    async with websockets.serve(echo, "127.0.0.1", 0, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        proxy = FaultProxy(
            "p", "127.0.0.1:0", f"127.0.0.1:{port}", rng=random.Random(1),
            wire=recorder.wire_log("w"), wire_clock=recorder.now,
        )  # fmt: skip
        await proxy.start()
        async with websockets.connect(f"ws://{proxy.listen}/ws/local-executor/s1") as client:
            await client.send(envelope("PING", "p1", {}).decode())
            await client.recv()
            await client.wait_closed()
        await proxy.stop()
    events = [(r.f, r.value.get("type") or r.value.get("code")) for r in history]
    assert ("frame", "PING") in events and events.count(("frame", "PING")) == 2
    assert ("close", 4428) in events and events[-1][0] == "end"
    assert {r.process for r in history} == {"wire:w"}
    ups = [r for r in history if r.f == "frame" and r.value["dir"] == "up"]
    assert len(ups) == 1


async def test_an_unreachable_hub_is_recorded_with_what_was_asked() -> None:
    history = History()
    recorder = Recorder(asyncio.get_running_loop().time)
    recorder.history = history
    proxy = FaultProxy(
        "p", "127.0.0.1:0", "127.0.0.1:9", rng=random.Random(1), wire=recorder.wire_log("w")
    )
    await proxy.start()
    reader, writer = await asyncio.open_connection(*proxy.listen.split(":"))
    writer.write(UPGRADE)
    await writer.drain()
    assert await reader.read() == b""
    writer.close()
    await proxy.stop()
    assert [r.f for r in history] == ["connect", "upgrade", "unreachable", "end"]
