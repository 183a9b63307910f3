"""Regression tests for what live fuzzing found, and the planted crash's trigger.

- The conformance evidence shortened every JSON frame it recorded with `json.loads`,
  which raises RecursionError (not ValueError) on a frame nested past the
  interpreter's limit: a peer sending one crashed the recording peer. Found by
  `tetherbed fuzz native` (a request nested 5 000 deep).
"""

from __future__ import annotations

import pytest

from tetherbed.hub.unknown_field_crash import EXIT_STATUS, PlantedCrash, crash_on_unknown_field
from tetherbed.simulator.conformance.evidence import Evidence, shorten_text
from tetherbed.simulator.fuzz.strategies.mutations import nested


def test_evidence_records_a_frame_nested_past_the_recursion_limit() -> None:
    frame = b'{"id":1,"x":' + nested(5000) + b"}"
    shown = shorten_text(frame.decode())
    assert shown.startswith('{"id":1,"x":[[[') and "chars)" in shown
    evidence = Evidence()
    evidence.sent("adapter", frame)
    evidence.sent("adapter", frame.decode())
    assert len(evidence.entries) == 2


def test_the_planted_crash_fires_only_on_unknown_fields() -> None:
    crash_on_unknown_field(
        b'{"type":"HELLO","id":"h","ts":1,"version":"1.1","payload":{"machine_id":"m"}}'
    )
    crash_on_unknown_field(b"not json")
    crash_on_unknown_field(b'{"type":"PING","id":"p","payload":{"anything":1}}')
    with pytest.raises(PlantedCrash) as raised:
        crash_on_unknown_field(b'{"type":"HELLO","id":"h","payload":{"x_new":1}}')
    assert raised.value.code == EXIT_STATUS
    with pytest.raises(PlantedCrash):
        crash_on_unknown_field(b'{"type":"FILE_READ","id":"r","x_extra":null,"payload":{}}')
