"""The request mix: weights, and payloads a real agent can answer and a digest can follow."""

from __future__ import annotations

import msgspec
import pytest

from tetherbed.load.mix import MixError, Payloads, expected_answer, parse_mix


def test_weights_are_read_and_repeated_types_add_up() -> None:
    assert parse_mix("file_stat=4, FILE_READ,FILE_STAT=1") == {"FILE_STAT": 5, "FILE_READ": 1}


@pytest.mark.parametrize("text", ["SCREENSHOT_REQUEST=1", "FILE_STAT=0", "FILE_STAT=x", " , "])
def test_a_bad_mix_is_refused(text: str) -> None:
    with pytest.raises(MixError):
        parse_mix(text)


def test_payloads_stay_under_the_root_and_carry_the_request_id_where_they_can() -> None:
    payloads = Payloads("/srv/load/", 16)
    stat = msgspec.json.decode(payloads.payload("FILE_STAT", "c1-7"))
    assert stat == {"path": "/srv/load/stat-c1-7"}
    command = msgspec.json.decode(payloads.payload("EXECUTE_COMMAND", "c1-8"))
    assert command["command"] == "echo c1-8"
    read = msgspec.json.decode(payloads.payload("FILE_READ", "c1-9"))
    assert read["path"] == "/srv/load/load-data.txt"
    assert expected_answer("FILE_STAT") == "FILE_STAT_RESPONSE"
