"""Root grants: the signed, durable form of a session binding.

Bindings live only in memory; the grant is what lets the platform bring one
back after the agent restarts (RESTORE_SESSION). It is tamper-evident, not
encrypted: the claims are readable base64url JSON.

Format::

    v1.<base64url(claims)>.<base64url(HMAC-SHA256(key, "v1." + base64url(claims)))>

base64url without padding, canonical (re-encoding the decoded bytes must give
the same text, so no two strings carry one MAC). `claims` is canonical JSON:
sorted keys, no whitespace, ASCII-only. The key is
`derive(audit_key, ROOT_GRANT_LABEL)` (see `grant_key`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from tetherbed.agent.audit.key import ROOT_GRANT_LABEL, derive
from tetherbed.agent.control.fingerprint import is_fingerprint
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError

VERSION = "v1"
#: Longer strings are refused before any decoding: a grant is a few hundred bytes.
MAX_GRANT_CHARS = 16 * 1024
_MAC_BYTES = hashlib.sha256().digest_size
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


@dataclass(frozen=True, slots=True)
class GrantClaims:
    """What a grant binds: one session of one machine to one directory object."""

    machine_id: str
    session_id: str
    revision: int
    allowed_root: str
    fingerprint: str
    issued_at: float


def grant_key(audit_key: bytes) -> bytes:
    """The grant-signing key derived from the machine's audit key."""
    return derive(audit_key, ROOT_GRANT_LABEL)


def sign(key: bytes, claims: GrantClaims) -> str:
    """The grant string for `claims`."""
    body = json.dumps(asdict(claims), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    signing_input = f"{VERSION}.{_encode(body.encode('ascii'))}"
    return f"{signing_input}.{_encode(_mac(key, signing_input))}"


def verify(key: bytes, grant: str, *, machine_id: str, session_id: str) -> GrantClaims:
    """The claims of a genuine grant for this machine and session.

    Raises ROOT_GRANT_INVALID saying why. The MAC is checked (in constant
    time) before the claims are parsed, so unauthenticated JSON is never read.
    """
    if not isinstance(grant, str) or len(grant) > MAX_GRANT_CHARS:
        raise _invalid("grant is malformed (not a string of sensible length)")
    parts = grant.split(".")
    if len(parts) != 3:
        raise _invalid("grant is malformed (expected v1.<claims>.<mac>)")
    version, claims_text, mac_text = parts
    if version != VERSION:
        raise _invalid(f"grant version {version[:8]!r} is not supported (expected {VERSION})")
    claims_bytes = _decode(claims_text, "claims")
    mac = _decode(mac_text, "MAC")
    if len(mac) != _MAC_BYTES:
        raise _invalid("grant MAC has the wrong length")
    if not hmac.compare_digest(mac, _mac(key, f"{version}.{claims_text}")):
        raise _invalid("grant MAC does not verify (tampered, or signed by another key)")
    claims = _parse_claims(claims_bytes)
    if not hmac.compare_digest(claims.machine_id.encode(), machine_id.encode()):
        raise _invalid("grant is bound to a different machine")
    if not hmac.compare_digest(claims.session_id.encode(), session_id.encode()):
        raise _invalid("grant is bound to a different session")
    return claims


def _mac(key: bytes, signing_input: str) -> bytes:
    return hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _decode(text: str, what: str) -> bytes:
    if not text or not _BASE64URL.fullmatch(text) or len(text) % 4 == 1:
        raise _invalid(f"grant {what} is not unpadded base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise _invalid(f"grant {what} is not unpadded base64url") from None
    if _encode(data) != text:
        raise _invalid(f"grant {what} is not canonical base64url")
    return data


_CLAIM_TYPES: dict[str, tuple[type, ...]] = {
    "machine_id": (str,),
    "session_id": (str,),
    "revision": (int,),
    "allowed_root": (str,),
    "fingerprint": (str,),
    "issued_at": (int, float),
}


def _parse_claims(data: bytes) -> GrantClaims:
    """Claims are ours (the MAC verified), but a v1 grant must still be exactly
    v1-shaped: a key compromise or a signing bug must not yield odd bindings."""
    try:
        raw: Any = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise _invalid("grant claims are not JSON") from None
    if not isinstance(raw, dict) or set(raw) != set(_CLAIM_TYPES):
        raise _invalid("grant claims do not have the v1 fields")
    for name, types in _CLAIM_TYPES.items():
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, types):
            raise _invalid(f"grant claim {name} has the wrong type")
    if raw["revision"] < 1:
        raise _invalid("grant revision is not positive")
    if not is_fingerprint(raw["fingerprint"]):
        raise _invalid("grant fingerprint is not 64 lowercase hex characters")
    if not os.path.isabs(raw["allowed_root"]):
        raise _invalid("grant root is not an absolute path")
    return GrantClaims(**raw)


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(ErrorCode.ROOT_GRANT_INVALID, reason)
