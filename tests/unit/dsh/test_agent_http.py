"""The agent's sans-I/O HTTP/1.1 response parser and request encoder."""

from __future__ import annotations

import pytest

from tetherbed.agent.dsh.http import Body, End, Head, HttpError, ResponseParser, encode_request


def body_of(events: list) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, Body))


def feed_bytewise(parser: ResponseParser, data: bytes) -> list:
    events = []
    for i in range(len(data)):
        events += parser.feed(data[i : i + 1])
    return events


def test_content_length_body_and_keep_alive() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
        b'{"ok":true}'
    )
    events = feed_bytewise(ResponseParser(), raw)
    head = events[0]
    assert isinstance(head, Head) and head.status == 200
    assert head.header("content-type") == "application/json"
    assert body_of(events) == b'{"ok":true}'
    assert events[-1] == End(keep_alive=True)


def test_chunked_body_split_anywhere_with_trailer() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    events = feed_bytewise(ResponseParser(), raw)
    assert body_of(events) == b"hello world"
    assert isinstance(events[-1], End)


def test_close_delimited_body() -> None:
    parser = ResponseParser()
    events = parser.feed(b"HTTP/1.0 200 OK\r\n\r\nabc")
    assert body_of(events) == b"abc"
    assert parser.feed_eof() == [End(keep_alive=False)]


def test_no_body_statuses_and_connection_close() -> None:
    events = ResponseParser().feed(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    assert events[-1] == End(keep_alive=False)


@pytest.mark.parametrize(
    "raw",
    [
        b"SPDY/3 200 OK\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX",
    ],
)
def test_bad_framing_is_an_error(raw: bytes) -> None:
    with pytest.raises(HttpError):
        ResponseParser().feed(raw + b"\r\n\r\n")


def test_limits_are_checked_before_bytes_are_kept() -> None:
    with pytest.raises(HttpError, match="over 10 bytes"):
        ResponseParser(10).feed(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n")
    with pytest.raises(HttpError, match="over 10 bytes"):
        ResponseParser(10).feed(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n" + b"x" * 11
        )
    with pytest.raises(HttpError, match="head over"):
        ResponseParser().feed(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000)


def test_a_connection_that_closes_early_is_an_error() -> None:
    parser = ResponseParser()
    parser.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab")
    with pytest.raises(HttpError):
        parser.feed_eof()


def test_encode_request() -> None:
    data = encode_request("POST", "/p", "hub:8765", {"Authorization": "Bearer t"}, b"{}")
    assert data == (
        b"POST /p HTTP/1.1\r\nHost: hub:8765\r\nAuthorization: Bearer t\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )
    with pytest.raises(ValueError):
        encode_request("GET", "/", "h", {"X": "a\r\nInjected: 1"})
