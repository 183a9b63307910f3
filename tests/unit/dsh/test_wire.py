"""wire/dsh: SSE framing, the reconnect bounds, credentials, the strict shapes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tetherbed.wire.dsh import backoff, schema
from tetherbed.wire.dsh.credentials import (
    bearer,
    digest,
    is_computer_id,
    is_credential,
    make_credential,
    same_digest,
)
from tetherbed.wire.dsh.sse import (
    SseDecoder,
    SseError,
    SseEvent,
    SseRetry,
    encode_comment,
    encode_event,
    encode_retry,
)


def events(decoder: SseDecoder, *parts: bytes) -> list:
    out = []
    for part in parts:
        out += decoder.feed(part)
    return out


def test_the_hubs_framing_round_trips() -> None:
    data = encode_retry(2000) + encode_event("hello", {"computerId": "cmp_1", "n": "ü"})
    assert data.startswith(b"retry: 2000\n\n")
    got = SseDecoder().feed(data)
    assert got[0] == SseRetry(2000)
    assert isinstance(got[1], SseEvent) and got[1].event == "hello"
    assert got[1].json() == {"computerId": "cmp_1", "n": "ü"}


def test_line_endings_comments_bom_and_multiline_data() -> None:
    raw = b"\xef\xbb\xbf: comment\r\nevent: x\rdata: a\r\ndata:b\n\nevent: y\ndata\n\n"
    got = SseDecoder().feed(raw)
    assert got == [SseEvent("x", "a\nb"), SseEvent("y", "")]


def test_an_event_without_data_is_not_dispatched_and_the_default_name_is_message() -> None:
    got = SseDecoder().feed(b"event: nothing\n\ndata: 1\n\n" + encode_comment("keepalive"))
    assert got == [SseEvent("message", "1")]


def test_a_cr_at_the_end_of_a_feed_may_be_followed_by_lf() -> None:
    decoder = SseDecoder()
    assert events(decoder, b"data: 1\r", b"\n\r", b"\ndata: 2\n\n") == [
        SseEvent("message", "1"),
        SseEvent("message", "2"),
    ]


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=20))
def test_any_split_of_the_bytes_gives_the_same_events(cuts: list[int]) -> None:
    whole = (
        b"".join(encode_event(name, {"i": i, "text": "x" * i}) for i, name in enumerate("abcdef"))
        + b"id: 7\nretry: 10\n\n"
    )
    expected = SseDecoder().feed(whole)
    decoder = SseDecoder()
    got, start = [], 0
    for cut in cuts:
        got += decoder.feed(whole[start : start + cut])
        start += cut
    got += decoder.feed(whole[start:])
    assert got == expected


def test_an_event_over_the_limit_is_refused_before_it_is_kept() -> None:
    decoder = SseDecoder(limit=100)
    decoder.feed(b"data: " + b"x" * 50 + b"\n")
    with pytest.raises(SseError):
        decoder.feed(b"data: " + b"y" * 60 + b"\n")
    with pytest.raises(SseError):
        SseDecoder(limit=100).feed(b"data: " + b"z" * 200)  # no line end yet


def test_event_names_cannot_break_the_framing() -> None:
    with pytest.raises(ValueError):
        encode_event("a\nb", {})


def test_backoff_bounds_are_the_spec_numbers() -> None:
    assert backoff.step(0) == 1.0 and backoff.step(4) == 16.0 and backoff.step(5) == 30.0
    assert backoff.bounds(0) == (1.0, 1.2)
    assert backoff.bounds(10) == (24.0, 30.0)
    for attempt in range(40):
        for draw in (0.0, 0.5, 0.999999):
            low, high = backoff.bounds(attempt)
            assert low <= backoff.delay(attempt, draw) <= high
    with pytest.raises(ValueError):
        backoff.step(-1)


def test_credentials() -> None:
    key = make_credential(bytes(range(32)))
    assert key.startswith("dshc_") and len(key) == 5 + 43 and is_credential(key)
    assert not is_credential(key + "=") and not is_credential("dshc_short") and not is_credential(7)
    assert digest(key) == digest(key) and len(digest(key)) == 64
    assert same_digest(digest(key), digest(key)) and not same_digest(digest(key), digest("x"))
    assert is_computer_id("cmp_0123456789ab") and not is_computer_id("cmp_0123456789AB")
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None and bearer(None) is None and bearer("Bearer") is None


def test_strict_and_lenient_readers() -> None:
    hello = {"computerId": "cmp_1", "name": "n", "heartbeatMs": 20000}
    assert schema.problems(hello, schema.HELLO) == []
    assert schema.problems({**hello, "extra": 1}, schema.HELLO) == ["$.extra: not in the spec"]
    assert schema.problems({**hello, "extra": 1}, schema.HELLO, strict=False) == []
    assert schema.problems({"name": "n"}, schema.HELLO, strict=False) == ["$.computerId: missing"]
    assert schema.problems({**hello, "heartbeatMs": True}, schema.HELLO) == [
        "$.heartbeatMs: expected integer"
    ]
    assert schema.problems({**hello, "heartbeatMs": 1.5}, schema.HELLO) == [
        "$.heartbeatMs: expected integer"
    ]
    nested = {"key": "k", "agentVersion": "1", "machine": {"memoryBytes": "x"}}
    assert schema.problems(nested, schema.ENROLL_REQUEST) == [
        "$.machine.memoryBytes: expected integer"
    ]
    assert schema.problems([], schema.HELLO) == ["$: expected an object"]
    assert json.dumps(
        schema.problems({"entries": [1]}, {"entries": schema.f(list, shape=schema.FS_ENTRY)})
    )
