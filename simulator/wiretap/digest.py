"""One digest for a message payload, whoever re-encodes it on the way.

A hub relays payloads it may or may not re-serialise (key order, spacing), so
the digest is taken over the payload's canonical JSON (sorted keys, no
whitespace): the client's request, the frame that reaches the agent and the
answer that comes back can be matched whenever their content is the same.
Bytes that are not JSON are digested as they are.
"""

from __future__ import annotations

import hashlib

import msgspec

#: Hex characters kept: 64 bits, plenty to tell a run's payloads apart.
DIGEST_LENGTH = 16


def payload_digest(payload: bytes) -> str:
    try:
        canonical = msgspec.json.encode(msgspec.json.decode(payload), order="sorted")
    except (msgspec.DecodeError, msgspec.EncodeError, ValueError):
        canonical = payload
    return hashlib.sha256(canonical).hexdigest()[:DIGEST_LENGTH]


def value_digest(value: object) -> str:
    """The digest of an already decoded payload (what `payload_digest` gives its JSON)."""
    return hashlib.sha256(msgspec.json.encode(value, order="sorted")).hexdigest()[:DIGEST_LENGTH]


def data_digest(data: bytes) -> str:
    """The digest of raw bytes (command output, a chunk's data), never reinterpreted."""
    return hashlib.sha256(data).hexdigest()[:DIGEST_LENGTH]
