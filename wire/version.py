"""Wire-protocol version parsing and negotiation ("major.minor")."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tetherbed.wire.codes import ExtensionCode
from tetherbed.wire.errors import WireError

_VERSION = re.compile(r"^(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})$")


@dataclass(frozen=True, order=True, slots=True)
class ProtocolVersion:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> ProtocolVersion:
        match = _VERSION.match(text) if isinstance(text, str) else None
        if match is None:
            raise WireError(ExtensionCode.INVALID_MESSAGE, f"bad protocol version {text!r}")
        return cls(int(match[1]), int(match[2]))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: The highest version this implementation speaks, on both sides (spec:
#: `autogpt_local_executor.protocol.VERSION`). The control connection's
#: HELLO_ACK must carry exactly this version too.
CURRENT = ProtocolVersion(1, 1)
#: The same, as it travels in `version` and `protocol_version` fields.
CURRENT_TEXT = str(CURRENT)


class VersionMismatch(Exception):
    """Different majors: the platform closes with 4426 and this JSON reason."""

    def __init__(self, shim_max: str, platform_max: str) -> None:
        super().__init__(f"protocol major mismatch: shim {shim_max}, platform {platform_max}")
        self.shim_max = shim_max
        self.platform_max = platform_max

    def close_reason(self) -> str:
        """The JSON-encoded close reason the spec prescribes for code 4426.

        Close reasons are limited to 123 bytes by RFC 6455, so the hint is short.
        """
        return json.dumps(
            {
                "error": "PROTOCOL_VERSION_MISMATCH",
                "shim_max": self.shim_max,
                "platform_max": self.platform_max,
                "hint": "upgrade the older side",
            },
            separators=(",", ":"),
        )


def negotiate(shim_max: str, platform_max: str) -> ProtocolVersion:
    """Same major: the lower minor. Different majors: VersionMismatch."""
    shim, platform = ProtocolVersion.parse(shim_max), ProtocolVersion.parse(platform_max)
    if shim.major != platform.major:
        raise VersionMismatch(str(shim), str(platform))
    return min(shim, platform)


def same_major(frame_version: str | None, negotiated: ProtocolVersion) -> bool:
    """Whether a non-HELLO frame may be processed. Absent or odd versions pass:
    receivers are lenient and the HELLO-time negotiation is the truth."""
    if not frame_version:
        return True
    try:
        return ProtocolVersion.parse(frame_version).major == negotiated.major
    except WireError:
        return True
