"""The planted defect `crash_on_unknown_field`: a parser that dies on a field it does not know.

Never in normal use. With the defect on (`tetherbed hub --defect crash_on_unknown_field`),
a frame whose envelope, or whose HELLO payload, carries a field the spec does not name
takes the whole hub process down (exit status 70) — the way a strict parser with an
unhandled exception would. It exists so that `tetherbed fuzz hub` can show it finds
and shrinks such a crash; the spec asks receivers to ignore unknown fields.
"""

from __future__ import annotations

import msgspec

from tetherbed.wire.envelope import Envelope
from tetherbed.wire.messages import Hello

#: The exit status of a hub that died this way.
EXIT_STATUS = 70

_ENVELOPE_FIELDS = frozenset(Envelope.__struct_fields__)
_HELLO_FIELDS = frozenset(Hello.__struct_fields__)


class PlantedCrash(SystemExit):
    """SystemExit, so that it escapes every handler and ends the event loop."""


def crash_on_unknown_field(data: bytes | str) -> None:
    """Raise PlantedCrash when `data` carries an unknown envelope or HELLO field."""
    try:
        value = msgspec.json.decode(data)
    except (msgspec.MsgspecError, RecursionError):
        return
    if not isinstance(value, dict):
        return
    unknown = set(value) - _ENVELOPE_FIELDS
    payload = value.get("payload")
    if value.get("type") == "HELLO" and isinstance(payload, dict):
        unknown |= set(payload) - _HELLO_FIELDS
    if unknown:
        raise PlantedCrash(EXIT_STATUS)
