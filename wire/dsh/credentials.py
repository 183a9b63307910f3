"""Shapes and digests of enrollment keys and agent tokens (§2, §3).

Both are "dshc_" + base64url(32 random bytes). The hub keeps only their
SHA-256 digests and compares digests in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from tetherbed.wire.dsh.constants import (
    COMPUTER_ID_HEX_CHARS,
    COMPUTER_ID_PREFIX,
    CREDENTIAL_BODY_CHARS,
    CREDENTIAL_PREFIX,
)

_CREDENTIAL = re.compile(
    re.escape(CREDENTIAL_PREFIX) + r"[A-Za-z0-9_-]{" + str(CREDENTIAL_BODY_CHARS) + r"}\Z"
)
_COMPUTER_ID = re.compile(
    re.escape(COMPUTER_ID_PREFIX) + r"[0-9a-f]{" + str(COMPUTER_ID_HEX_CHARS) + r"}\Z"
)


def make_credential(random_bytes: bytes) -> str:
    """`dshc_` + base64url without padding, from 32 random bytes."""
    body = base64.urlsafe_b64encode(random_bytes).rstrip(b"=").decode("ascii")
    return CREDENTIAL_PREFIX + body


def is_credential(text: object) -> bool:
    return isinstance(text, str) and _CREDENTIAL.match(text) is not None


def is_computer_id(text: object) -> bool:
    return isinstance(text, str) and _COMPUTER_ID.match(text) is not None


def digest(credential: str) -> str:
    """sha256 hex of the credential's UTF-8 bytes (the spec's `tokenHash`)."""
    return hashlib.sha256(credential.encode("utf-8")).hexdigest()


def same_digest(a: str, b: str) -> bool:
    """Constant-time comparison of two hex digests."""
    return hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii", "replace"))


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
