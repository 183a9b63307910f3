"""The agent's ERROR codes: the spec's own, with the precise code in details."""

from __future__ import annotations

import msgspec
import pytest

from tetherbed.agent.spec_codes import REASON_CODE, error_payload, spec_code
from tetherbed.wire import strict
from tetherbed.wire.codes import ErrorCode, ExtensionCode
from tetherbed.wire.errors import ProtocolError


@pytest.mark.parametrize("code", [*ErrorCode, *ExtensionCode], ids=str)
def test_every_code_goes_out_as_a_spec_code(code: str) -> None:
    payload = error_payload(ProtocolError(code, "why", details={"path": "/p"}))
    assert payload.code in strict.SPEC_ERROR_CODES
    assert payload.details["path"] == "/p"
    if code in strict.SPEC_ERROR_CODES:
        assert payload.code == code and REASON_CODE not in payload.details
    else:
        assert payload.details[REASON_CODE] == code


@pytest.mark.parametrize(
    ("code", "sent"),
    [
        ("INVALID_MESSAGE", "INTERNAL_ERROR"),  # what the public shim sends for command + argv
        ("NOT_A_FILE", "INTERNAL_ERROR"),
        ("PATH_TOO_LONG", "PATH_INVALID_CHARS"),
        ("FRAME_TOO_LARGE", "FILE_TOO_LARGE"),
        ("MESSAGE_NOT_ALLOWED", "FEATURE_NOT_SUPPORTED"),
        ("UNKNOWN_MESSAGE_TYPE", "FEATURE_NOT_SUPPORTED"),
        ("SOMETHING_NEW", "INTERNAL_ERROR"),
    ],
)
def test_closest_spec_code(code: str, sent: str) -> None:
    assert spec_code(code) == sent


def test_no_details_means_none_on_the_wire() -> None:
    """`details` is optional in the spec; a strict peer refuses `null`."""
    data = msgspec.json.encode(error_payload(ProtocolError(ErrorCode.PATH_NOT_FOUND, "gone")))
    assert msgspec.json.decode(data) == {
        "code": "PATH_NOT_FOUND",
        "message": "gone",
        "fatal": False,
    }
    assert strict.accepts("ERROR", data)
