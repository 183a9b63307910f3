"""The fault proxy's HTTP stage: the parser, the rules, the stage, and a real proxy."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from tetherbed.simulator.proxy import errors
from tetherbed.simulator.proxy.http.parser import HttpParser
from tetherbed.simulator.proxy.http.rules import HttpRule, HttpRuleBook
from tetherbed.simulator.proxy.http.session import HttpSession, Replay, ResetConnection
from tetherbed.simulator.proxy.proxy import FaultProxy
from tetherbed.simulator.proxy.streams import DOWNSTREAM, UPSTREAM
from tetherbed.simulator.proxy.ws.session import Send, SendEof
from tetherbed.simulator.recorder import Recorder


def post(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: hub\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def answer(status: int, body: bytes, *, chunks: bool = False) -> bytes:
    if chunks:
        head = f"HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        return head + chunked(body)
    return f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


TWO_REQUESTS = post("/api/a", b'{"x":1}') + post("/api/b", b"")
TWO_ANSWERS = answer(200, b"one", chunks=True) + answer(204, b"") + answer(200, b"three")


# --- the parser ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=30))
def test_every_byte_belongs_to_exactly_one_part_however_it_is_cut(cuts: list[int]) -> None:
    for data, role in ((TWO_REQUESTS, "request"), (TWO_ANSWERS, "response")):
        parser = HttpParser(role)  # type: ignore[arg-type]
        for method in ("POST", "HEAD", "GET"):
            parser.expect(method)
        parts, offset = [], 0
        for size in [*cuts, len(data)]:
            parts += parser.feed(data[offset : offset + size])
            offset += size
        assert b"".join(p.raw for p in parts) == data
        assert [p.kind for p in parts].count("end") == (2 if role == "request" else 3)
        assert parser.error is None


def test_bodies_are_dechunked_and_a_head_answer_has_none() -> None:
    parser = HttpParser("response")
    parser.expect("GET")
    parser.expect("HEAD")
    head_answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    parts = parser.feed(answer(200, b"hello world", chunks=True) + head_answer)
    assert b"".join(p.data for p in parts if p.kind == "data") == b"hello world"
    assert [p.kind for p in parts] == ["head", "data", "end", "head", "end"]


def test_a_close_delimited_answer_ends_at_eof_and_a_101_ends_the_parsing() -> None:
    parser = HttpParser("response")
    parts = parser.feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: a\n")
    assert parts[0].head is not None and parts[0].head.content_type == "text/event-stream"
    assert [p.kind for p in parser.feed_eof()] == ["end"]
    upgraded = HttpParser("response")
    rest = upgraded.feed(b"HTTP/1.1 101 Switching\r\n\r\n\x81\x00")
    assert [p.kind for p in rest] == ["head", "raw"]


def test_broken_framing_becomes_raw_bytes_not_a_crash() -> None:
    parser = HttpParser("response")
    parts = parser.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnope")
    assert parser.error is not None and "chunk size" in parser.error
    assert parts[-1].kind == "raw"
    assert parser.feed(b"more") == [parts[-1].__class__("raw", b"more")]
    assert HttpParser("request").feed(b"\x16\x03\x01 not http\r\n\r\n")[0].kind == "raw"


# --- rules -----------------------------------------------------------------------------


def test_rules_match_a_path_or_its_last_segments_and_use_up_their_count() -> None:
    book = HttpRuleBook()
    rule = book.add({"action": "drop_response", "path": "/agent/results", "count": 2})
    assert rule.name.startswith("http_drop_response")
    assert book.decide("POST", "/agent/results/chunk") is None
    assert book.decide("GET", "/api/dsh-computers/agent/results") is None
    assert book.decide("POST", "/api/dsh-computers/agent/results") is rule
    assert book.decide("POST", "/prefix/api/dsh-computers/agent/results") is rule
    assert book.decide("POST", "/api/dsh-computers/agent/results") is None  # used up
    with pytest.raises(errors.BadRequest):
        HttpRule("drop", "/x")  # type: ignore[arg-type]
    with pytest.raises(errors.BadRequest):
        HttpRule.from_json({"action": "replay", "path": "x"})
    with pytest.raises(errors.BadRequest):
        HttpRule.from_json({"action": "replay", "path": "/x", "delay_ms": 5})


# --- the stage -------------------------------------------------------------------------


def session(rule: dict) -> HttpSession:
    book = HttpRuleBook()
    book.add(rule)
    return HttpSession(book)


def sent(actions: list, stream: str) -> bytes:
    return b"".join(a.data for a in actions if isinstance(a, Send) and a.stream == stream)


def test_without_rules_every_byte_passes_unchanged() -> None:
    stage = HttpSession(HttpRuleBook())
    up = stage.receive(UPSTREAM, TWO_REQUESTS, 0.0)
    down = stage.receive(DOWNSTREAM, TWO_ANSWERS[:40], 0.0)
    down += stage.receive(DOWNSTREAM, TWO_ANSWERS[40:], 0.0)
    assert sent(up, UPSTREAM) == TWO_REQUESTS and sent(down, DOWNSTREAM) == TWO_ANSWERS
    assert stage.receive_eof(UPSTREAM, 0.0) == [SendEof(UPSTREAM)]
    assert not stage.is_websocket and stage.inject_close("client", 1000, "", 0.0) == []


def test_a_dropped_response_reaches_the_server_but_never_the_client() -> None:
    stage = session({"action": "drop_response", "path": "/api/b"})
    up = stage.receive(UPSTREAM, TWO_REQUESTS, 0.0)
    assert sent(up, UPSTREAM) == TWO_REQUESTS  # the server handles both
    first = answer(200, b"one")
    down = stage.receive(DOWNSTREAM, first + answer(200, b"two"), 0.0)
    assert sent(down, DOWNSTREAM) == first
    assert isinstance(down[-1], ResetConnection)
    assert stage.receive(DOWNSTREAM, b"anything", 0.0) == []  # the connection is gone


def test_a_dropped_request_never_reaches_the_server() -> None:
    stage = session({"action": "drop_request", "path": "/api/a"})
    actions = stage.receive(UPSTREAM, TWO_REQUESTS, 0.0)
    assert sent(actions, UPSTREAM) == b""
    assert isinstance(actions[-1], ResetConnection)


def test_a_replayed_request_passes_and_is_sent_again_whole_later() -> None:
    stage = session({"action": "replay", "path": "/api/a", "delay": 250})
    request = post("/api/a", b'{"x":1}')
    actions = stage.receive(UPSTREAM, request[:10], 0.0)
    actions += stage.receive(UPSTREAM, request[10:] + post("/api/a", b"{}"), 0.0)
    assert sent(actions, UPSTREAM) == request + post("/api/a", b"{}")
    replays = [a for a in actions if isinstance(a, Replay)]
    # The rule has no count: both requests are replayed, each whole, once sent.
    assert replays == [Replay(request, 0.25), Replay(post("/api/a", b"{}"), 0.25)]


# --- a real proxy ------------------------------------------------------------------------


def test_a_real_http_proxy_drops_an_answer_replays_a_request_and_records_both() -> None:
    async def main() -> tuple[list[bytes], list, list]:
        seen: list[bytes] = []

        async def handle(request: web.Request) -> web.Response:
            seen.append(await request.read())
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_post("/api/dsh-computers/agent/results", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        recorder = Recorder(asyncio.get_running_loop().time)
        proxy = FaultProxy(
            "agent-a",
            "127.0.0.1:0",
            f"127.0.0.1:{port}",
            http=True,
            wire=recorder.dsh_wire_log("a"),
            wire_clock=recorder.now,
        )
        await proxy.start()
        proxy.add_http_rule({"action": "drop_response", "path": "/agent/results", "count": 1})
        outcomes = []
        for body in (b'{"requestId":"req_1"}', b'{"requestId":"req_2"}'):
            reader, writer = await asyncio.open_connection(*proxy.listen.split(":"))
            writer.write(post("/api/dsh-computers/agent/results", body))
            try:
                outcomes.append(await asyncio.wait_for(reader.read(4096), 5))
            except ConnectionResetError as exc:
                outcomes.append(exc)
            writer.close()
        proxy.add_http_rule({"action": "replay", "path": "/agent/results", "delay": 50})
        reader, writer = await asyncio.open_connection(*proxy.listen.split(":"))
        writer.write(post("/api/dsh-computers/agent/results", b'{"requestId":"req_3"}'))
        outcomes.append(await asyncio.wait_for(reader.read(4096), 5))
        writer.close()
        for _ in range(100):
            if len(seen) == 4:
                break
            await asyncio.sleep(0.02)
        await proxy.stop()
        await runner.cleanup()
        events = [(r.f, r.value.get("status"), r.value.get("how")) for r in recorder.history]
        return seen, outcomes, events

    seen, outcomes, events = asyncio.run(main())
    ids = [json.loads(body)["requestId"] for body in seen]
    assert ids == ["req_1", "req_2", "req_3", "req_3"]  # handled, handled, and replayed
    assert isinstance(outcomes[0], ConnectionResetError) or outcomes[0] == b""
    assert b"200 OK" in outcomes[1] and b"200 OK" in outcomes[2]
    assert ("http_response", 200, None) in events
    assert ("end", None, "reset") in events  # the dropped answer's connection
    # The recorder saw one request per connection the client made (not the replay).
    assert [f for f, _, _ in events].count("http_request") == 3
