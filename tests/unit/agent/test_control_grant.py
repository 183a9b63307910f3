"""Root grants: format, round trip, and every way of tampering with one."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import re

import pytest

from tetherbed.agent.audit.key import ROOT_GRANT_LABEL, derive
from tetherbed.agent.control import grant
from tetherbed.agent.control.grant import GrantClaims
from tetherbed.wire.codes import ErrorCode
from tetherbed.wire.errors import ProtocolError

KEY = grant.grant_key(b"k" * 32)
CLAIMS = GrantClaims(
    machine_id="laptop-1",
    session_id="session-1",
    revision=3,
    allowed_root="/home/alice/Projects/Ünïcode dir",
    fingerprint="ab" * 32,
    issued_at=1_700_000_000.25,
)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signed_raw(claims: dict[str, object], key: bytes = KEY) -> str:
    """A grant over arbitrary claims, signed correctly (a forger with the key)."""
    body = b64(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())
    mac = hmac.new(key, f"v1.{body}".encode(), hashlib.sha256).digest()
    return f"v1.{body}.{b64(mac)}"


def rejected(text: object, *, machine_id: str = "laptop-1", session_id: str = "session-1") -> str:
    with pytest.raises(ProtocolError) as caught:
        grant.verify(KEY, text, machine_id=machine_id, session_id=session_id)  # type: ignore[arg-type]
    assert caught.value.code == ErrorCode.ROOT_GRANT_INVALID
    return caught.value.message


def test_round_trip_and_format() -> None:
    text = grant.sign(KEY, CLAIMS)
    assert re.fullmatch(r"v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}", text)
    assert grant.verify(KEY, text, machine_id="laptop-1", session_id="session-1") == CLAIMS
    body = unb64(text.split(".")[1])
    assert (
        body
        == json.dumps(
            dataclasses.asdict(CLAIMS), sort_keys=True, separators=(",", ":"), ensure_ascii=True
        ).encode()
    )
    assert grant.sign(KEY, CLAIMS) == text  # canonical: deterministic


def test_grant_key_is_the_derived_root_grant_key() -> None:
    assert grant.grant_key(b"k" * 32) == derive(b"k" * 32, ROOT_GRANT_LABEL)
    assert grant.grant_key(b"k" * 32) != b"k" * 32


def test_edited_claims_are_rejected() -> None:
    version, body, mac = grant.sign(KEY, CLAIMS).split(".")
    claims = json.loads(unb64(body))
    claims["allowed_root"] = "/etc"
    forged_body = b64(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())
    assert "MAC does not verify" in rejected(f"{version}.{forged_body}.{mac}")


def test_edited_mac_is_rejected() -> None:
    version, body, mac = grant.sign(KEY, CLAIMS).split(".")
    raw = bytearray(unb64(mac))
    raw[0] ^= 1
    assert "MAC does not verify" in rejected(f"{version}.{body}.{b64(bytes(raw))}")


def test_non_canonical_base64_is_rejected() -> None:
    """The last character of a 32-byte MAC carries two unused bits; a string
    differing only there decodes to the same bytes and must still fail."""
    version, body, mac = grant.sign(KEY, CLAIMS).split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    index = alphabet.index(mac[-1])
    sibling = alphabet[index ^ 1]
    assert unb64(mac[:-1] + sibling) == unb64(mac)
    assert "canonical" in rejected(f"{version}.{body}.{mac[:-1]}{sibling}")


def test_wrong_key_machine_and_session_are_rejected() -> None:
    text = grant.sign(KEY, CLAIMS)
    with pytest.raises(ProtocolError) as caught:
        grant.verify(
            grant.grant_key(b"j" * 32), text, machine_id="laptop-1", session_id="session-1"
        )
    assert caught.value.code == ErrorCode.ROOT_GRANT_INVALID
    assert "different machine" in rejected(text, machine_id="laptop-2")
    assert "different session" in rejected(text, session_id="session-2")


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[: len(t) // 2],  # truncated
        lambda t: t[:-1],  # MAC one character short
        lambda t: t + "A",  # MAC one character long
        lambda t: t + "=",  # padding
        lambda t: t.replace(".", ".!", 1),  # not base64url
        lambda t: t.replace(".", ".+/", 1),  # standard base64, not url-safe
        lambda t: "v2" + t[2:],  # unknown version
        lambda t: t + ".extra",  # four parts
        lambda t: t.split(".", 1)[1],  # no version
        lambda t: "",
        lambda t: "v1..",
        lambda t: "x" * 20_000,  # absurdly long
    ],
)
def test_malformed_grants_are_rejected(mangle) -> None:  # type: ignore[no-untyped-def]
    rejected(mangle(grant.sign(KEY, CLAIMS)))


def test_non_string_grant_is_rejected() -> None:
    rejected(None)
    rejected(12)


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c.pop("issued_at"),
        lambda c: c.update(extra=1),
        lambda c: c.update(revision=True),
        lambda c: c.update(revision=0),
        lambda c: c.update(revision="3"),
        lambda c: c.update(fingerprint="AB" * 32),
        lambda c: c.update(allowed_root="relative"),
        lambda c: c.update(machine_id=None),
    ],
)
def test_correctly_signed_but_misshapen_claims_are_rejected(edit) -> None:  # type: ignore[no-untyped-def]
    claims = dataclasses.asdict(CLAIMS)
    edit(claims)
    rejected(signed_raw(claims))


def test_signed_non_json_is_rejected() -> None:
    body = b64(b"not json")
    mac = hmac.new(KEY, f"v1.{body}".encode(), hashlib.sha256).digest()
    assert "not JSON" in rejected(f"v1.{body}.{b64(mac)}")
